//! The query cache: rules choose what is cached, entries hold the response packets as
//! the server sent them, and per-table generation counters make sure an entry filled
//! before a write is never served after it. Sessions call it between classify and the
//! backend; it does no I/O itself.

mod carry;
pub mod config;
mod fill;
pub mod freshness;
mod generations;
pub mod invalidation;
mod stats;
mod store;
pub mod table_keys;

pub use config::{CacheConfig, RuleConfig};
pub use fill::{Fill, FillTicket, Flight};
pub use stats::{DigestStats, RuleStats};

use crate::classify::sql::TableRef;
use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use stats::{Digests, Totals};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Found, Store};
pub use store::{Hashed, KeyHash};

pub use generations::RowSet;
use generations::{Generations, Snapshot};

/// Why entries stopped being valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Cause {
    /// A write that passed through Sluice.
    Write = 0,
    /// A write read from the primary's binlog.
    Binlog = 1,
    /// An admin call or a `/*wipe*/` hint.
    Admin = 2,
}

impl Cause {
    fn from_u8(v: u8) -> Cause {
        match v {
            0 => Cause::Write,
            1 => Cause::Binlog,
            _ => Cause::Admin,
        }
    }
}

/// A stored response.
pub struct Entry {
    /// The response packets exactly as the client receives them. Every cached request
    /// is one packet with sequence id 0, so the response's ids (1, 2, ...) are already
    /// those any later client expects: replay needs no rewriting.
    pub response: Bytes,
    pub filled_at: Instant,
    pub rule: Arc<Rule>,
    pub digest: Arc<DigestStats>,
    snapshot: Snapshot,
    /// Backend time the fill took: what a hit saves, and the entry's eviction weight.
    pub cost_micros: u64,
    /// Result rows in `response`.
    pub rows: u64,
    /// Set by the one session that refreshes a stale entry.
    refreshing: AtomicBool,
    /// Served at least once: what admission learns from when a write drops it.
    read: AtomicBool,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("rule", &self.rule.name())
            .field("bytes", &self.response.len())
            .finish_non_exhaustive()
    }
}

impl Entry {
    fn deps_len(&self) -> usize {
        self.snapshot.len()
    }
}

/// A compiled rule with its statistics. Replaced rules are deactivated, which retires
/// their entries.
pub struct Rule {
    pub config: RuleConfig,
    text: Option<regex::bytes::Regex>,
    digest: Option<regex::Regex>,
    pub stats: RuleStats,
    active: AtomicBool,
}

impl Rule {
    fn compile(config: RuleConfig) -> Result<Rule, String> {
        let text = config
            .pattern
            .as_deref()
            .map(regex::bytes::Regex::new)
            .transpose()
            .map_err(|e| format!("rule {:?}: {e}", config.name))?;
        let digest = config
            .digest
            .as_deref()
            .map(regex::Regex::new)
            .transpose()
            .map_err(|e| format!("rule {:?}: {e}", config.name))?;
        Ok(Rule {
            config,
            text,
            digest,
            stats: RuleStats::default(),
            active: AtomicBool::new(true),
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    fn matches(&self, q: &Candidate<'_>, digest: &mut impl FnMut() -> Arc<DigestStats>) -> bool {
        if let Some(u) = &self.config.user {
            if u != q.user {
                return false;
            }
        }
        if let Some(s) = &self.config.schema {
            if Some(s.as_str()) != q.schema {
                return false;
            }
        }
        if let Some(re) = &self.text {
            if !re.is_match(q.text) {
                return false;
            }
        }
        if let Some(re) = &self.digest {
            if !re.is_match(&digest().text) {
                return false;
            }
        }
        true
    }
}

/// The rule a statement's text found (or that none did), under the rules, user and
/// schema it was matched with: see [`QueryCache::rule_for_remembered`].
pub struct RuleMemo {
    rules: Arc<Vec<Arc<Rule>>>,
    user: String,
    schema: Option<String>,
    found: Option<(Arc<Rule>, Arc<DigestStats>)>,
}

/// A cacheable statement looking for a rule.
pub struct Candidate<'a> {
    pub text: &'a [u8],
    pub user: &'a str,
    pub schema: Option<&'a str>,
    /// The text's shape, when the statement's analytics already worked it out.
    pub shape: Option<crate::classify::facts::Shape>,
}

/// The server's views, looked up for every fill and every write (aHash: a table's
/// name hashed with SipHash was some 300 instructions a fill).
type ViewSet = std::collections::HashSet<TableRef, ahash::RandomState>;

/// Why a lookup removed the entry it found.
enum Gone {
    /// Its rule was replaced or removed.
    Retired,
    Invalidated(Cause),
    Expired,
}

/// What a lookup found.
pub enum Lookup {
    Hit(Arc<Entry>),
    /// Past its TTL but within the rule's stale-while-revalidate window. `refresh` is
    /// true for the one caller that should fetch a fresh copy after serving this one.
    Stale {
        entry: Arc<Entry>,
        refresh: bool,
    },
    Miss,
}

/// What admin invalidation targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Rule(String),
    Table(TableRef),
    /// A digest's hash in hex, or its text.
    Digest(String),
}

pub struct QueryCache {
    rules: ArcSwap<Vec<Arc<Rule>>>,
    /// Whether `rules` has any, asked of every statement (an atomic read where loading
    /// the rules took a guard from the swap).
    has_rules: AtomicBool,
    /// Held by [`Self::set_rules`], so that `has_rules` follows the last rules set.
    setting_rules: Mutex<()>,
    store: Store,
    gens: Generations,
    /// Fills under way by key (with the hash the store's lookup made, see `store.rs`).
    inflight: Mutex<store::KeptMap<Arc<Flight>>>,
    digests: Digests,
    totals: Totals,
    entry_limit: u64,
    pub fill_wait: Duration,
    pub budget: u64,
    /// Binlog readers following their primary (one per shard with `[[shards]]`).
    readers_up: AtomicUsize,
    binlog_status: Mutex<Vec<Arc<crate::binlog::BinlogStatus>>>,
    /// The views on the server, lowercased; `None` until read, and again after DDL
    /// may have changed them.
    views: RwLock<Option<ViewSet>>,
    /// Each table's key, for reads and writes by key.
    pub keys: table_keys::TableKeys,
    /// `[cache] by_key`: without it no table's key is learnt, so every write counts
    /// for its whole table.
    pub by_key: bool,
}

impl QueryCache {
    pub fn new(config: &CacheConfig) -> Result<Arc<QueryCache>, Vec<String>> {
        let rules = compile_rules(&config.rules)?;
        let store = Store::new(config.max_bytes);
        let entry_limit = config.entry_limit().min(store.max_charge());
        Ok(Arc::new(QueryCache {
            has_rules: AtomicBool::new(!rules.is_empty()),
            setting_rules: Mutex::new(()),
            rules: ArcSwap::from_pointee(rules),
            store,
            gens: Generations::default(),
            inflight: Mutex::default(),
            digests: Digests::default(),
            totals: Totals::default(),
            entry_limit,
            fill_wait: config.fill_wait,
            budget: config.max_bytes,
            readers_up: AtomicUsize::new(0),
            binlog_status: Mutex::new(Vec::new()),
            views: RwLock::new(None),
            keys: table_keys::TableKeys::default(),
            by_key: config.by_key,
        }))
    }

    /// Largest response recorded for an entry.
    pub fn entry_limit(&self) -> usize {
        self.entry_limit as usize
    }

    pub fn has_rules(&self) -> bool {
        self.has_rules.load(Ordering::Relaxed)
    }

    /// The first rule matching `q`, with the digest's statistics (computed only when a
    /// rule needs the digest or one matched).
    pub fn rule_for(&self, q: &Candidate<'_>) -> Option<(Arc<Rule>, Arc<DigestStats>)> {
        let rules = self.rules.load();
        let mut digest = None;
        let mut get = || {
            digest
                .get_or_insert_with(|| self.digests.of(q.text, q.shape))
                .clone()
        };
        let rule = rules.iter().find(|r| r.matches(q, &mut get))?.clone();
        Some((rule, get()))
    }

    /// [`Self::rule_for`] for a statement that comes back with the same text (a
    /// prepared statement's execute), remembered in `memo`: matched again only when the
    /// rules were replaced since, or the user or schema differ.
    pub fn rule_for_remembered(
        &self,
        q: &Candidate<'_>,
        memo: &mut Option<RuleMemo>,
    ) -> Option<(Arc<Rule>, Arc<DigestStats>)> {
        let rules = self.rules.load();
        if let Some(m) = memo.as_ref() {
            if Arc::ptr_eq(&m.rules, &rules) && m.user == q.user && m.schema.as_deref() == q.schema
            {
                return m.found.clone();
            }
        }
        let found = self.rule_for(q);
        *memo = Some(RuleMemo {
            rules: Arc::clone(&rules),
            user: q.user.to_owned(),
            schema: q.schema.map(str::to_owned),
            found: found.clone(),
        });
        found
    }

    /// Looks `key` up. Stale and retired entries are dropped here and counted.
    pub fn lookup(&self, key: &[u8]) -> Lookup {
        self.lookup_hashed(self.store.hashed(key))
    }

    /// [`Self::lookup`] of a key hashed by the caller, who keeps its hash for the fill
    /// ([`Self::begin_fill`]) when it misses.
    pub fn lookup_hashed(&self, key: store::Hashed<'_>) -> Lookup {
        let now = Instant::now();
        let entry = match self.store.get_unless(key, |e| self.gone(e, now)) {
            Found::Absent => return Lookup::Miss,
            Found::Removed(entry, why) => {
                self.count_gone(&entry, why);
                return Lookup::Miss;
            }
            Found::Kept(entry) => entry,
        };
        let age = now.saturating_duration_since(entry.filled_at);
        if age <= entry.rule.config.ttl {
            return Lookup::Hit(self.count_hit(entry, age));
        }
        entry.rule.stats.stale_hit(age);
        entry.digest.served(age);
        Stats::incr(&self.totals.hits);
        let refresh = !entry.refreshing.swap(true, Ordering::AcqRel);
        Lookup::Stale { entry, refresh }
    }

    /// Why `entry` may no longer be served at `now`, if so: its rule was replaced, a
    /// write it depends on committed, or it is past its TTL and its rule's
    /// stale-while-revalidate window. Judged under the store's lock, which removes it.
    fn gone(&self, entry: &Entry, now: Instant) -> Option<Gone> {
        if !entry.rule.active.load(Ordering::Relaxed) {
            return Some(Gone::Retired);
        }
        if let Err(cause) = self.gens.check(&entry.snapshot) {
            return Some(Gone::Invalidated(cause));
        }
        let age = now.saturating_duration_since(entry.filled_at);
        let config = &entry.rule.config;
        (age > config.ttl + config.stale_while_revalidate).then_some(Gone::Expired)
    }

    fn count_gone(&self, entry: &Entry, why: Gone) {
        let (rule, len) = (&entry.rule.stats, entry.response.len());
        match why {
            Gone::Retired => rule.removed(len),
            Gone::Invalidated(cause) => {
                rule.invalidated(cause, len);
                self.totals.invalidated(cause);
                let read = entry.read.load(Ordering::Relaxed);
                entry.digest.admission.dropped(read);
            }
            Gone::Expired => rule.expired(len),
        }
    }

    fn count_hit(&self, entry: Arc<Entry>, age: Duration) -> Arc<Entry> {
        if !entry.read.load(Ordering::Relaxed) {
            entry.read.store(true, Ordering::Relaxed);
        }
        entry.rule.stats.hit(age);
        entry.digest.served(age);
        Stats::incr(&self.totals.hits);
        entry
    }

    /// The query that lists the server's views for [`Self::set_views`]: one row, a JSON
    /// array of [schema, name] pairs (NULL when there are none).
    pub const VIEWS_QUERY: &'static str = "SELECT JSON_ARRAYAGG(JSON_ARRAY(TABLE_SCHEMA, \
        TABLE_NAME)) FROM information_schema.VIEWS";

    /// Whether the views must be read (again) before the next fill.
    pub fn views_unknown(&self) -> bool {
        self.views.read().is_none()
    }

    /// Records the answer to [`Self::VIEWS_QUERY`]; an unreadable answer leaves the
    /// views unknown, so that every read depends on every write.
    pub fn set_views(&self, answer: Option<&[u8]>) {
        let parsed: Option<Vec<(String, String)>> = match answer {
            None => Some(Vec::new()),
            Some(json) => serde_json::from_slice(json).ok(),
        };
        if let Some(list) = parsed {
            let set = list
                .into_iter()
                .map(|(schema, table)| TableRef {
                    schema: schema.to_ascii_lowercase(),
                    table: table.to_ascii_lowercase(),
                })
                .collect();
            *self.views.write() = Some(set);
        }
    }

    /// Whether a read of `tables` may go through a view (or nobody knows): its entry
    /// then depends on every write, since a view's base tables are not in the text.
    fn reads_view(&self, tables: &[TableRef]) -> bool {
        match &*self.views.read() {
            Some(views) => tables.iter().any(|t| views.contains(t)),
            None => true,
        }
    }

    /// Writes to `tables` committed.
    pub fn invalidate_tables<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a TableRef>,
        cause: Cause,
    ) {
        let tables: Vec<&TableRef> = tables.into_iter().collect();
        // Renaming or altering a view names it: the set of views may have changed.
        if self
            .views
            .read()
            .as_ref()
            .is_some_and(|v| tables.iter().any(|t| v.contains(*t)))
        {
            *self.views.write() = None;
        }
        let n = self.gens.bump(tables.iter().copied(), cause);
        self.totals.table_bumps(cause, n);
    }

    /// Writes to only these keys of a table committed: entries that read other keys of it
    /// stay.
    pub fn invalidate_rows(&self, rows: &RowSet, cause: Cause) {
        let n = self.gens.bump_rows(rows, cause);
        self.totals.row_bumps(cause, n, rows.keys.len());
    }

    /// Everything is stale: a write whose tables are unknown, an admin call, or a gap
    /// in the binlog.
    pub fn invalidate_all(&self, cause: Cause) -> u64 {
        // Unknown writes include DDL that creates or drops views or alters keys.
        *self.views.write() = None;
        self.keys.forget_all();
        self.gens.bump_all(cause);
        self.totals.invalidated(cause);
        self.drop_where(cause, |_| true)
    }

    /// Drops the entry for `key` (the `/*wipe*/` hint).
    pub fn wipe(&self, key: &[u8]) -> bool {
        match self.store.remove(self.store.hashed(key)) {
            Some(e) => {
                e.rule.stats.invalidated(Cause::Admin, e.response.len());
                true
            }
            None => false,
        }
    }

    fn drop_where(&self, cause: Cause, f: impl FnMut(&Entry) -> bool) -> u64 {
        let removed = self.store.remove_where(f);
        for e in &removed {
            e.rule.stats.invalidated(cause, e.response.len());
        }
        removed.len() as u64
    }

    /// Admin invalidation. Returns how many entries were dropped (for a table: how
    /// many depended on it and are now unreachable, dropped lazily).
    pub fn invalidate(&self, scope: &Scope) -> Result<u64, String> {
        match scope {
            Scope::All => Ok(self.invalidate_all(Cause::Admin)),
            Scope::Rule(name) => {
                if !self.rules.load().iter().any(|r| r.name() == name) {
                    return Err(format!("no cache rule named {name:?}"));
                }
                Ok(self.drop_where(Cause::Admin, |e| e.rule.name() == name))
            }
            Scope::Table(t) => {
                self.invalidate_tables([t], Cause::Admin);
                Ok(self.drop_where(Cause::Admin, |e| self.gens.check(&e.snapshot).is_err()))
            }
            Scope::Digest(d) => {
                let wanted = self.digests.find(d);
                if wanted.is_empty() {
                    return Err(format!("no digest {d:?} has been seen"));
                }
                Ok(self.drop_where(Cause::Admin, |e| {
                    wanted.iter().any(|w| Arc::ptr_eq(w, &e.digest))
                }))
            }
        }
    }

    /// Replaces the rules. Rules whose definition did not change keep their entries
    /// and statistics; the others' entries are dropped.
    pub fn set_rules(&self, configs: Vec<RuleConfig>) -> Result<(), Vec<String>> {
        let problems = config::validate_rules(&configs);
        if !problems.is_empty() {
            return Err(problems);
        }
        let _setting = self.setting_rules.lock();
        let old = self.rules.load_full();
        let mut new = Vec::with_capacity(configs.len());
        for c in configs {
            match old.iter().find(|r| r.config == c) {
                Some(r) => new.push(r.clone()),
                None => new.push(Arc::new(Rule::compile(c).map_err(|e| vec![e])?)),
            }
        }
        for r in old.iter() {
            if !new.iter().any(|n| Arc::ptr_eq(n, r)) {
                r.active.store(false, Ordering::Relaxed);
            }
        }
        self.has_rules.store(!new.is_empty(), Ordering::Relaxed);
        self.rules.store(Arc::new(new));
        let retired = self
            .store
            .remove_where(|e| !e.rule.active.load(Ordering::Relaxed));
        for e in retired {
            e.rule.stats.removed(e.response.len());
        }
        Ok(())
    }

    pub fn rule_configs(&self) -> Vec<RuleConfig> {
        self.rules.load().iter().map(|r| r.config.clone()).collect()
    }

    /// One binlog reader started or stopped following its primary (each reports its
    /// own changes once): while one is down, what its servers change expires by TTL only.
    pub fn reader_state(&self, up: bool) {
        if up {
            self.readers_up.fetch_add(1, Ordering::Relaxed);
        } else {
            self.readers_up.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A binlog reader whose state the statistics show (one per shard with shards).
    pub fn follow_binlog(&self, status: Arc<crate::binlog::BinlogStatus>) {
        self.binlog_status.lock().push(status);
    }

    /// Whether every binlog reader follows its primary; `None` without one.
    pub fn binlog_up(&self) -> Option<bool> {
        let readers = self.binlog_status.lock().len();
        (readers > 0).then(|| self.readers_up.load(Ordering::Relaxed) >= readers)
    }

    /// Every counter, per rule and per digest, as JSON.
    pub fn stats_json(&self) -> serde_json::Value {
        let (entries, bytes) = self.store.usage();
        let rules: Vec<serde_json::Value> = self
            .rules
            .load()
            .iter()
            .map(|r| r.stats.to_json(r.name()))
            .collect();
        let readers: Vec<serde_json::Value> = self
            .binlog_status
            .lock()
            .iter()
            .map(|s| serde_json::to_value(s.snapshot()).unwrap_or_default())
            .collect();
        serde_json::json!({
            "totals": self.totals.to_json(entries, bytes, self.budget),
            "binlog": match self.binlog_up() {
                None => serde_json::json!("not configured"),
                Some(true) => serde_json::json!("following"),
                Some(false) => serde_json::json!("down: entries expire by TTL only"),
            },
            "binlog_reader": readers.first(),
            "binlog_readers": readers,
            "rules": rules,
            "digests": self.digests.to_json(200),
        })
    }

    /// Each rule's name with the ages of its hits and how long after a change its
    /// entries were filled ([`freshness`]).
    pub fn freshness(&self) -> Vec<(String, freshness::Ages, freshness::Ages)> {
        (self.rules.load().iter())
            .map(|r| {
                let stats = &r.stats;
                let filled = stats.filled_after_change.snapshot();
                (r.name().to_owned(), stats.hit_age.snapshot(), filled)
            })
            .collect()
    }

    /// Entries held and the bytes they take.
    pub fn usage(&self) -> (u64, u64) {
        self.store.usage()
    }

    /// One line for the periodic log.
    pub fn summary(&self) -> String {
        let (entries, bytes) = self.store.usage();
        self.totals.summary(entries, bytes, self.budget)
    }
}

use crate::stats::Stats;

fn compile_rules(configs: &[RuleConfig]) -> Result<Vec<Arc<Rule>>, Vec<String>> {
    let mut rules = Vec::new();
    let mut problems = Vec::new();
    for c in configs {
        match Rule::compile(c.clone()) {
            Ok(r) => rules.push(Arc::new(r)),
            Err(e) => problems.push(e),
        }
    }
    if problems.is_empty() {
        Ok(rules)
    } else {
        Err(problems)
    }
}

/// Builds a cache key: the session part (user, settings, wire flags) then the
/// statement part. Keys are compared whole, never by hash alone, so two sessions share
/// an entry only when every byte that can change the result is the same.
pub fn key(session: &[u8], command: u8, statement: &[u8], params: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(session.len() + statement.len() + params.len() + 9);
    key_head(&mut k, session, command, statement);
    k.extend_from_slice(params);
    k
}

/// The start of [`key`] written into `out` (cleared first, its allocation kept): the
/// caller appends the parameters. A session reuses one buffer for every lookup.
pub fn key_head(out: &mut Vec<u8>, session: &[u8], command: u8, statement: &[u8]) {
    out.clear();
    out.extend_from_slice(session);
    out.push(command);
    out.extend_from_slice(&(statement.len() as u32).to_le_bytes());
    out.extend_from_slice(statement);
}

#[cfg(test)]
pub(crate) mod tests;
