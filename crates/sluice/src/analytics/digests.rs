//! Per-digest statistics: counts, rows, times and an HDR histogram per normalized
//! statement, in shards that sessions' buffers are drained into (see [`super::pending`]).
//! Bounded: when full, the least executed digests make room. Each cacheable read also
//! runs a simulated cache (exact statement → its tables' write counters) that tells the
//! advisor its likely hit rate.

use super::pending::{Slot, Text};
use super::UserTotals;
use super::{latency_histogram, Finished, IdMap, Kind, Tables, Totals, UserStats};
use crate::classify::sql::{self, Analysis, TableRef};
use arc_swap::ArcSwapOption;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const SHARDS: usize = 16;

/// Exact statements one digest's simulated cache remembers; past that it starts over,
/// which under-estimates only digests with very many distinct statements.
const SHADOW_MAX: usize = 4096;

/// Servers and users listed per digest.
const LIST_MAX: usize = 16;

/// Places in the table of digests' infos, direct-mapped by digest.
const INFOS: usize = 4096;

pub struct DigestStore {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    pub evicted: AtomicU64,
    /// The info of digests entered, for sessions to find without a lock: a session's
    /// first statement of a digest the process knows is then buffered like the rest.
    infos: Box<[ArcSwapOption<DigestInfo>]>,
}

struct Shard {
    map: IdMap<u64, Entry>,
    /// Latencies since the last sample (the history's per-second percentiles).
    interval: Histogram<u64>,
    /// Latencies since start (the Prometheus histogram).
    all: Histogram<u64>,
    all_sum_us: u64,
    /// This shard's part of the totals and of each user's figures (by user id): kept
    /// under the lock the statement takes anyway, so that no counter is shared between
    /// cores on the request path.
    totals: Totals,
    users: Vec<UserTotals>,
}

/// What a digest's text tells, worked out once: enough to enter the digest again (it
/// may be evicted or reset while sessions still run it), and what sessions need to
/// record its statements as they run: whether they write its tables, and the tables'
/// write counters.
pub struct DigestInfo {
    digest: u64,
    text: Arc<str>,
    kind: Kind,
    schema: Option<String>,
    tables: Vec<TableRef>,
    cacheable: bool,
    /// Writes these tables when it succeeds.
    writes: bool,
    table_counters: Vec<Arc<AtomicU64>>,
}

impl DigestInfo {
    /// The digest's normalized text.
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    fn new(digest: u64, text: &[u8], schema: Option<&str>, tables: &Tables) -> DigestInfo {
        let (text, _) = sql::digest(text);
        let kind = Kind::of(&text);
        let (tables_read, cacheable, writes) = match sql::analyze(text.as_bytes(), schema) {
            Analysis::Read {
                tables,
                uncacheable,
            } => (tables, uncacheable.is_none(), false),
            Analysis::Write { tables: Some(t) } => (t, false, true),
            _ => (Vec::new(), false, false),
        };
        // A read of no table (SELECT 1) is cacheable but pointless to advise.
        let cacheable = cacheable && !tables_read.is_empty();
        DigestInfo {
            digest,
            text: text.into(),
            kind,
            schema: schema.map(str::to_owned),
            table_counters: tables_read.iter().map(|t| tables.counter(t)).collect(),
            tables: tables_read,
            cacheable,
            writes,
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn cacheable(&self) -> bool {
        self.cacheable
    }

    /// The sum of its tables' write counters: changes whenever one of them is written.
    pub fn generation(&self) -> u64 {
        self.table_counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }

    /// `n` successful executions: counted on its tables when it is a write.
    pub fn written(&self, n: u64) {
        if self.writes && n > 0 {
            for c in &self.table_counters {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

/// One digest's figures.
pub struct Entry {
    pub text: Arc<str>,
    pub kind: Kind,
    pub schema: Option<String>,
    pub tables: Vec<TableRef>,
    /// A read the cache may store (no NOW(), no locking...): an advisor candidate.
    pub cacheable: bool,
    info: Arc<DigestInfo>,
    pub count: u64,
    pub errors: u64,
    pub rows_sent: u64,
    pub rows_affected: u64,
    pub total_us: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub hist: Histogram<u64>,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Executions the servers answered, and their time: what caching would save.
    pub backend_count: u64,
    pub backend_us: u64,
    /// Executions that ran on several shards (`[[shards]]`).
    pub scattered: u64,
    pub servers: Vec<(String, u64)>,
    pub users: Vec<String>,
    pub first_seen: u64,
    pub last_seen: u64,
    shadow: Option<Shadow>,
}

#[derive(Default)]
struct Shadow {
    /// Exact statement → the sum of its tables' write counters when last seen.
    seen: IdMap<u64, u64>,
    lookups: u64,
    hits: u64,
}

impl Entry {
    fn new(info: Arc<DigestInfo>, now: u64) -> Entry {
        let cacheable = info.cacheable;
        Entry {
            text: info.text.clone(),
            kind: info.kind,
            schema: info.schema.clone(),
            tables: info.tables.clone(),
            cacheable,
            info,
            count: 0,
            errors: 0,
            rows_sent: 0,
            rows_affected: 0,
            total_us: 0,
            min_us: u64::MAX,
            max_us: 0,
            hist: latency_histogram(),
            cache_hits: 0,
            cache_misses: 0,
            backend_count: 0,
            backend_us: 0,
            scattered: 0,
            servers: Vec::new(),
            users: Vec::new(),
            first_seen: now,
            last_seen: now,
            shadow: cacheable.then(Shadow::default),
        }
    }

    /// Adds a session's statements of this digest.
    fn add(&mut self, slot: &Slot, user: &str) {
        self.count += slot.count;
        self.first_seen = self.first_seen.min(slot.first_seen);
        self.last_seen = self.last_seen.max(slot.last_seen);
        self.total_us += slot.total_us;
        self.min_us = self.min_us.min(slot.min_us);
        self.max_us = self.max_us.max(slot.max_us);
        for &us in &slot.latencies {
            self.hist.saturating_record(us.into());
        }
        self.rows_sent += slot.rows_sent;
        self.rows_affected = self.rows_affected.saturating_add(slot.rows_affected);
        self.errors += slot.errors;
        self.cache_hits += slot.cache_hits;
        self.cache_misses += slot.cache_misses;
        self.backend_count += slot.backend_count;
        self.backend_us += slot.backend_us;
        self.scattered += slot.scattered;
        for (server, n) in slot.servers.iter().filter(|(_, n)| *n > 0) {
            match self.servers.iter().position(|(s, _)| s == server) {
                Some(i) => self.servers[i].1 += n,
                None if self.servers.len() < LIST_MAX => self.servers.push((server.clone(), *n)),
                None => {}
            }
        }
        if self.users.len() < LIST_MAX && !self.users.iter().any(|u| u == user) {
            self.users.push(user.to_owned());
        }
        self.info.written(slot.unbumped);
        if let Some(s) = self.shadow.as_mut() {
            // Every execution counts; those in a transaction could never hit.
            s.lookups += slot.tx_lookups + slot.lookups.len() as u64;
            for &(exact, generation) in &slot.lookups {
                let generation = generation.unwrap_or_else(|| self.info.generation());
                if s.seen.len() >= SHADOW_MAX && !s.seen.contains_key(&exact) {
                    s.seen.clear();
                }
                if s.seen.insert(exact, generation) == Some(generation) {
                    s.hits += 1;
                }
            }
        }
    }

    /// How often an exact repeat found its tables unwritten since: the hit rate a cache
    /// rule for this digest would have had. `None` before anything was simulated.
    pub fn expected_hit_rate(&self) -> Option<f64> {
        let s = self.shadow.as_ref()?;
        (s.lookups > 0).then(|| s.hits as f64 / s.lookups as f64)
    }

    /// Writes to this digest's tables since start (through Sluice and the binlog).
    pub fn table_writes(&self) -> u64 {
        self.info
            .table_counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    pub fn mean_us(&self) -> u64 {
        self.total_us.checked_div(self.count).unwrap_or(0)
    }

    pub fn to_json(&self, id: u64) -> Value {
        let q = |p: f64| self.hist.value_at_quantile(p);
        json!({
            "id": hex(id),
            "text": &*self.text,
            "kind": self.kind.name(),
            "schema": self.schema,
            "tables": self.tables.iter().map(|t| format!("{}.{}", t.schema, t.table)).collect::<Vec<_>>(),
            "count": self.count,
            "errors": self.errors,
            "rows_sent": self.rows_sent,
            "rows_affected": self.rows_affected,
            "total_us": self.total_us,
            "min_us": if self.count == 0 { 0 } else { self.min_us },
            "max_us": self.max_us,
            "mean_us": self.mean_us(),
            "p50_us": q(0.5),
            "p95_us": q(0.95),
            "p99_us": q(0.99),
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "scattered": self.scattered,
            "servers": self.servers.iter().map(|(s, n)| (s.clone(), Value::from(*n)))
                .collect::<serde_json::Map<_, _>>(),
            "users": self.users,
            "table_writes": self.table_writes(),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
        })
    }
}

/// Digest ids as the cache statistics show them: 16 hex digits.
pub fn hex(id: u64) -> String {
    format!("{id:016x}")
}

pub fn parse_id(s: &str) -> Option<u64> {
    (s.len() == 16)
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
}

/// How to order a listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    TotalTime,
    Count,
    Errors,
    P99,
    Rows,
    LastSeen,
}

impl Sort {
    /// Each order by its name in the API.
    pub const NAMES: [(&'static str, Sort); 6] = [
        ("total_time", Sort::TotalTime),
        ("count", Sort::Count),
        ("errors", Sort::Errors),
        ("p99", Sort::P99),
        ("rows", Sort::Rows),
        ("last_seen", Sort::LastSeen),
    ];

    pub fn parse(s: &str) -> Option<Sort> {
        Sort::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|&(_, sort)| sort)
    }

    fn key(self, e: &Entry) -> u64 {
        match self {
            Sort::TotalTime => e.total_us,
            Sort::Count => e.count,
            Sort::Errors => e.errors,
            Sort::P99 => e.hist.value_at_quantile(0.99),
            Sort::Rows => e.rows_sent,
            Sort::LastSeen => e.last_seen,
        }
    }
}

impl DigestStore {
    pub fn new(max: usize) -> DigestStore {
        DigestStore {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        map: IdMap::default(),
                        interval: latency_histogram(),
                        all: latency_histogram(),
                        all_sum_us: 0,
                        totals: Totals::default(),
                        users: Vec::new(),
                    })
                })
                .collect(),
            per_shard: max.div_ceil(SHARDS).max(1),
            evicted: AtomicU64::new(0),
            infos: (0..INFOS).map(|_| ArcSwapOption::empty()).collect(),
        }
    }

    fn shard(&self, digest: u64) -> &Mutex<Shard> {
        // The low bits of an FNV hash are its best mixed.
        &self.shards[(digest as usize) % SHARDS]
    }

    /// Where `digest`'s info is kept.
    fn info_place(&self, digest: u64) -> &ArcSwapOption<DigestInfo> {
        // The shard is chosen by the low bits; these are independent of them.
        &self.infos[(digest >> 32) as usize % INFOS]
    }

    /// The info of `digest`, when it was entered and no other digest took its place.
    pub(super) fn info(&self, digest: u64) -> Option<Arc<DigestInfo>> {
        self.info_place(digest)
            .load_full()
            .filter(|i| i.digest == digest)
    }

    /// Adds one statement at once; returns its kind, or None when the digest is unknown
    /// and no text came with it.
    pub(super) fn record(&self, f: &Finished, tables: &Tables) -> Option<Kind> {
        let mut slot = Slot::new(f.digest);
        slot.text = f.text.map(|t| Text::Owned(t.to_vec()));
        slot.schema = f.schema.map(str::to_owned);
        slot.add(f, None);
        self.apply(&slot, f.user, tables).map(|i| i.kind)
    }

    /// Adds a slot's statements to its digest's entry, entering the digest (again) when
    /// the slot brings its text or info. Returns the digest's info, or None when it is
    /// unknown and the slot brings neither: the statements are dropped.
    pub(super) fn apply(
        &self,
        slot: &Slot,
        user: &UserStats,
        tables: &Tables,
    ) -> Option<Arc<DigestInfo>> {
        let mut guard = self.shard(slot.digest).lock();
        let shard = &mut *guard;
        if !shard.map.contains_key(&slot.digest) {
            let info = match (&slot.info, &slot.text) {
                (Some(info), _) => info.clone(),
                (None, Some(text)) => {
                    let schema = slot.schema.as_deref();
                    let info = DigestInfo::new(slot.digest, text.bytes(), schema, tables);
                    let info = Arc::new(info);
                    self.info_place(slot.digest).store(Some(info.clone()));
                    info
                }
                (None, None) => return None,
            };
            self.make_room(shard);
            shard
                .map
                .insert(slot.digest, Entry::new(info, slot.first_seen));
        }
        let e = shard.map.get_mut(&slot.digest).expect("entered above");
        e.add(slot, &user.name);
        // The interval's latencies reach `all` when the sampler takes them.
        for &us in &slot.latencies {
            shard.interval.saturating_record(us.into());
        }
        shard.all_sum_us += slot.total_us;
        let t = &mut shard.totals;
        t.by_kind[e.kind.index()] += slot.count;
        t.rows += slot.rows_sent;
        t.errors += slot.errors;
        t.cache_hits += slot.cache_hits;
        t.cache_misses += slot.cache_misses;
        if shard.users.len() <= user.id {
            shard.users.resize(user.id + 1, UserTotals::default());
        }
        shard.users[user.id].add(&UserTotals {
            queries: slot.count,
            errors: slot.errors,
            rows_sent: slot.rows_sent,
            total_us: slot.total_us,
            bytes_in: slot.bytes_in,
            bytes_out: slot.bytes_out,
            cache_hits: slot.cache_hits,
        });
        Some(e.info.clone())
    }

    /// The least executed make room; ties go to the oldest.
    fn make_room(&self, shard: &mut Shard) {
        if shard.map.len() < self.per_shard {
            return;
        }
        if let Some(victim) = shard
            .map
            .iter()
            .min_by_key(|(_, e)| (e.count, e.last_seen))
            .map(|(k, _)| *k)
        {
            shard.map.remove(&victim);
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs `f` on every entry, shard by shard (each shard locked while its entries are
    /// visited).
    pub fn for_each(&self, mut f: impl FnMut(u64, &Entry)) {
        for s in &self.shards {
            let s = s.lock();
            for (id, e) in &s.map {
                f(*id, e);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `f` on one entry.
    pub fn entry<T>(&self, id: u64, f: impl FnOnce(&Entry) -> T) -> Option<T> {
        self.shard(id).lock().map.get(&id).map(f)
    }

    pub fn get(&self, id: u64) -> Option<Value> {
        self.shard(id).lock().map.get(&id).map(|e| e.to_json(id))
    }

    /// The first `limit` digests by `sort`, largest first.
    pub fn top(&self, sort: Sort, limit: usize) -> Vec<Value> {
        let mut keyed = Vec::new();
        self.for_each(|id, e| keyed.push((sort.key(e), id)));
        keyed.sort_unstable_by(|a, b| b.cmp(a));
        keyed.truncate(limit);
        keyed
            .into_iter()
            .filter_map(|(_, id)| self.get(id))
            .collect()
    }

    /// Forgets every digest; returns how many there were.
    pub fn reset(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let mut s = s.lock();
                let n = s.map.len();
                s.map.clear();
                n
            })
            .sum()
    }

    /// The latencies recorded since the last call (merged), and the shards start over.
    pub fn take_interval(&self) -> Histogram<u64> {
        let mut merged = latency_histogram();
        for s in &self.shards {
            let mut guard = s.lock();
            let s = &mut *guard;
            merged.add(&s.interval).expect("same bounds");
            s.all.add(&s.interval).expect("same bounds");
            s.interval.reset();
        }
        merged
    }

    /// Counts of every statement since start (digests forgotten or not).
    pub fn totals(&self) -> Totals {
        let mut all = Totals::default();
        for s in &self.shards {
            all.add(&s.lock().totals);
        }
        all
    }

    /// Each user's figures, indexed by user id (`users` ids at least).
    pub fn user_totals(&self, users: usize) -> Vec<UserTotals> {
        let mut all = vec![UserTotals::default(); users];
        for s in &self.shards {
            let s = s.lock();
            for (a, b) in all.iter_mut().zip(&s.users) {
                a.add(b);
            }
        }
        all
    }

    /// Every latency since start (up to the last sample, and those since), and their
    /// sum in microseconds.
    pub fn all_latencies(&self) -> (Histogram<u64>, u64) {
        let mut merged = latency_histogram();
        let mut sum = 0;
        for s in &self.shards {
            let s = s.lock();
            merged.add(&s.all).expect("same bounds");
            merged.add(&s.interval).expect("same bounds");
            sum += s.all_sum_us;
        }
        (merged, sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::{CacheUse, UserStats};
    use sluice_wire::tracker::Outcome;
    use std::time::Duration;

    fn finished<'a>(
        text: &'a str,
        user: &'a UserStats,
        us: u64,
        outcome: Outcome,
        known: bool,
    ) -> Finished<'a> {
        Finished {
            digest: sql::digest_hash(text.as_bytes()),
            text: (!known).then_some(text.as_bytes()),
            schema: Some("shop"),
            user,
            exact: sql::fnv1a(text.as_bytes()),
            elapsed: Duration::from_micros(us),
            outcome,
            server: Some("db1"),
            cache: CacheUse::None,
            in_transaction: false,
            scattered: false,
            bytes_in: 0,
            bytes_out: 0,
        }
    }

    #[test]
    fn counts_times_and_rows_exactly() {
        let store = DigestStore::new(100);
        let tables = Tables::default();
        let user = UserStats {
            name: "app".into(),
            ..Default::default()
        };
        let rows = |n| Outcome {
            rows: n,
            ..Default::default()
        };
        for (i, id) in [1, 2, 3].iter().enumerate() {
            let sql = format!("SELECT name FROM items WHERE id = {id}");
            let f = finished(&sql, &user, 100 * (i as u64 + 1), rows(1), i > 0);
            assert_eq!(store.record(&f, &tables), Some(Kind::Select));
        }
        let failed = Outcome {
            error: true,
            ..Default::default()
        };
        store.record(
            &finished(
                "SELECT name FROM items WHERE id = 9",
                &user,
                50,
                failed,
                true,
            ),
            &tables,
        );
        let top = store.top(Sort::Count, 10);
        assert_eq!(top.len(), 1);
        let d = &top[0];
        assert_eq!(d["text"], "SELECT name FROM items WHERE id = ?");
        assert_eq!(d["tables"], json!(["shop.items"]));
        assert_eq!(
            (&d["count"], &d["errors"], &d["rows_sent"]),
            (&json!(4), &json!(1), &json!(3))
        );
        assert_eq!(
            (&d["total_us"], &d["min_us"], &d["max_us"]),
            (&json!(650), &json!(50), &json!(300))
        );
        assert_eq!(d["servers"], json!({"db1": 4}));
        assert_eq!(d["users"], json!(["app"]));
        // Unknown digest without text: refused, so the session sends the text next time.
        let f = finished("SELECT 2 FROM other", &user, 1, rows(1), true);
        assert_eq!(store.record(&f, &tables), None);
    }

    #[test]
    fn simulated_cache_sees_repeats_between_writes() {
        let store = DigestStore::new(100);
        let tables = Tables::default();
        let user = UserStats::default();
        let read = |id: u32| format!("SELECT name FROM items WHERE id = {id}");
        let ok = Outcome::default();
        // 1, 1, 2, 1: two repeats of four.
        for (i, id) in [1, 1, 2, 1].into_iter().enumerate() {
            store.record(&finished(&read(id), &user, 10, ok, i > 0), &tables);
        }
        // A write to the table: the next repeat is a miss, the one after a hit.
        store.record(
            &finished(
                "UPDATE items SET name = 'x' WHERE id = 2",
                &user,
                10,
                ok,
                false,
            ),
            &tables,
        );
        store.record(&finished(&read(1), &user, 10, ok, true), &tables);
        store.record(&finished(&read(1), &user, 10, ok, true), &tables);
        let id = sql::digest_hash(read(1).as_bytes());
        let s = store.shard(id).lock();
        let e = &s.map[&id];
        assert_eq!(e.expected_hit_rate(), Some(3.0 / 6.0));
        assert_eq!(e.table_writes(), 1);
    }

    #[test]
    fn bounded_by_evicting_the_least_executed() {
        let store = DigestStore::new(16);
        let tables = Tables::default();
        let user = UserStats::default();
        let ok = Outcome::default();
        for i in 0..200 {
            let sql = format!("SELECT c{i} FROM t");
            store.record(&finished(&sql, &user, 10, ok, false), &tables);
        }
        assert!(store.len() <= 16, "{} digests kept", store.len());
        assert_eq!(
            store.evicted.load(Ordering::Relaxed),
            200 - store.len() as u64
        );
        let (all, sum) = store.all_latencies();
        assert_eq!((all.len(), sum), (200, 2000));
        assert_eq!(store.take_interval().len(), 200);
        assert_eq!(store.take_interval().len(), 0);
    }
}
