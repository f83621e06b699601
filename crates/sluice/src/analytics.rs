//! Live analytics, beside the request path: what every statement did, kept per digest
//! ([`digests`]), per user and per server, sampled each second into a history that
//! survives restarts ([`history`]), and read by the cache advisor ([`advisor`]).
//! Sessions record each statement at its end into a buffer of their own ([`pending`]),
//! drained into the shared figures before anything reads them; the admin API reads
//! snapshots.

pub mod advisor;
pub mod digests;
pub mod history;
mod pending;
mod probe;

pub use probe::{Prepared, SessionProbe, Statement};

use crate::classify::sql::TableRef;
use digests::DigestStore;
use hdrhistogram::Histogram;
use parking_lot::{Mutex, RwLock};
use pending::Recorder;
use serde::Deserialize;
use sluice_wire::tracker::Outcome;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The `[analytics]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyticsConfig {
    /// Collect per-statement statistics. Default true; false leaves only the process
    /// counters (and the admin API's analytics endpoints answer with empty figures).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Most statement digests kept; when full, the least executed are dropped.
    /// Default 2000.
    #[serde(default = "default_max_digests")]
    pub max_digests: usize,
    /// File the per-second and per-minute history is kept in across restarts. Default:
    /// none (history starts empty at each start).
    pub history_file: Option<PathBuf>,
    /// How often the history file is written (it is also written at shutdown).
    /// Default "60s".
    #[serde(default = "default_save_interval", with = "humantime_serde")]
    pub save_interval: Duration,
}

impl Default for AnalyticsConfig {
    fn default() -> Self {
        AnalyticsConfig {
            enabled: true,
            max_digests: default_max_digests(),
            history_file: None,
            save_interval: default_save_interval(),
        }
    }
}

fn yes() -> bool {
    true
}
fn default_max_digests() -> usize {
    2000
}
fn default_save_interval() -> Duration {
    Duration::from_secs(60)
}

impl AnalyticsConfig {
    pub fn validate(&self, problems: &mut Vec<String>) {
        if self.max_digests < 16 {
            problems.push(format!(
                "analytics.max_digests is {}: keep at least 16",
                self.max_digests
            ));
        }
        if self.save_interval < Duration::from_secs(1) {
            problems.push("analytics.save_interval must be at least 1s".into());
        }
        if let Some(dir) = self.history_file.as_ref().and_then(|f| f.parent()) {
            if !dir.as_os_str().is_empty() && !dir.is_dir() {
                problems.push(format!(
                    "analytics.history_file: directory {} does not exist",
                    dir.display()
                ));
            }
        }
    }
}

/// What kind of statement a digest is, by its first keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Select,
    Insert,
    Update,
    Delete,
    /// BEGIN, START TRANSACTION, COMMIT, ROLLBACK, SAVEPOINT, RELEASE, XA.
    Transaction,
    /// SET, SHOW, DDL, CALL and the rest.
    Other,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Select,
        Kind::Insert,
        Kind::Update,
        Kind::Delete,
        Kind::Transaction,
        Kind::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Select => "select",
            Kind::Insert => "insert",
            Kind::Update => "update",
            Kind::Delete => "delete",
            Kind::Transaction => "transaction",
            Kind::Other => "other",
        }
    }

    /// From a digest's text (keywords are upper case there, comments gone).
    pub fn of(digest_text: &str) -> Kind {
        let first = digest_text
            .trim_start_matches(|c: char| c == '(' || c.is_whitespace())
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("");
        match first {
            "SELECT" | "WITH" | "VALUES" | "TABLE" => Kind::Select,
            "INSERT" | "REPLACE" => Kind::Insert,
            "UPDATE" => Kind::Update,
            "DELETE" => Kind::Delete,
            "BEGIN" | "START" | "COMMIT" | "ROLLBACK" | "SAVEPOINT" | "RELEASE" | "XA" => {
                Kind::Transaction
            }
            _ => Kind::Other,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Whether the query cache took part in a statement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheUse {
    /// No cache rule matched (or no cache).
    #[default]
    None,
    /// Answered from the cache.
    Hit,
    /// A rule matched; the server answered.
    Miss,
}

/// A server's traffic, kept with the server and counted as statements are relayed.
#[derive(Debug, Default)]
pub struct ServerCounters {
    pub queries: AtomicU64,
    pub errors: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Sum of the statements' times from sending to the end of their responses.
    pub busy_us: AtomicU64,
}

impl ServerCounters {
    /// One relayed command: bytes each way, its time, and whether it failed.
    pub fn relayed(&self, sent: u64, received: u64, busy: Duration, error: bool) {
        self.queries.fetch_add(1, Ordering::Relaxed);
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_sent.fetch_add(sent, Ordering::Relaxed);
        self.bytes_received.fetch_add(received, Ordering::Relaxed);
        self.busy_us
            .fetch_add(busy.as_micros() as u64, Ordering::Relaxed);
    }
}

/// One Sluice user: its name and sessions open. Its statement figures are kept in the
/// digest shards (see [`UserTotals`]), added with the digests' figures.
#[derive(Debug, Default)]
pub struct UserStats {
    pub name: String,
    /// Index of this user's tallies in every shard.
    pub id: usize,
    pub sessions: AtomicI64,
}

/// A user's statement figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserTotals {
    pub queries: u64,
    pub errors: u64,
    pub rows_sent: u64,
    pub total_us: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub cache_hits: u64,
}

impl UserTotals {
    pub fn add(&mut self, o: &UserTotals) {
        self.queries += o.queries;
        self.errors += o.errors;
        self.rows_sent += o.rows_sent;
        self.total_us += o.total_us;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.cache_hits += o.cache_hits;
    }
}

/// Counts of every statement recorded, by kind and outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub by_kind: [u64; 6],
    pub errors: u64,
    pub rows: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

impl Totals {
    pub fn kind(&self, k: Kind) -> u64 {
        self.by_kind[k.index()]
    }
    pub fn queries(&self) -> u64 {
        self.by_kind.iter().sum()
    }
    pub fn add(&mut self, o: &Totals) {
        for (a, b) in self.by_kind.iter_mut().zip(o.by_kind) {
            *a += b;
        }
        self.errors += o.errors;
        self.rows += o.rows;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
    }
}

/// A statement at its end, as a session reports it.
pub struct Finished<'a> {
    /// [`crate::classify::sql::digest_hash`] of its text (of the prepared text for
    /// COM_STMT_EXECUTE).
    pub digest: u64,
    /// The text: needed only the first time a digest is seen, so sessions pass it when
    /// they have not reported this digest before.
    pub text: Option<&'a [u8]>,
    pub schema: Option<&'a str>,
    pub user: &'a UserStats,
    /// Hash of the exact statement (text, or prepared text and parameters): what the
    /// advisor's simulated cache is keyed by.
    pub exact: u64,
    pub elapsed: Duration,
    pub outcome: Outcome,
    /// The server that answered (none for cache hits and statements refused by Sluice).
    pub server: Option<&'a str>,
    pub cache: CacheUse,
    /// Ran inside a transaction, where the cache never answers.
    pub in_transaction: bool,
    /// Ran on several shards.
    pub scattered: bool,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

use crate::id_hash::IdMap;

/// Latencies are kept in microseconds from 1 µs to an hour, to 2 significant digits.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;

pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 2).expect("valid bounds")
}

pub fn clamp_us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, LATENCY_MAX_US)
}

/// Write counters per table, shared by the digests that read them: a write through
/// Sluice or in the binlog bumps its tables, and the advisor's simulated cache
/// compares them as the real cache compares generations.
#[derive(Default)]
pub struct Tables {
    map: RwLock<HashMap<TableRef, Arc<AtomicU64>>>,
}

impl Tables {
    pub fn counter(&self, t: &TableRef) -> Arc<AtomicU64> {
        if let Some(c) = self.map.read().get(t) {
            return c.clone();
        }
        self.map.write().entry(t.clone()).or_default().clone()
    }

    pub fn written(&self, t: &TableRef) {
        self.counter(t).fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything analytics knows; one per process.
pub struct Analytics {
    pub cfg: AnalyticsConfig,
    /// The digests and the sessions' buffers on their way to them: shared with the
    /// sessions, which drain their buffer when they end.
    recorder: Arc<Recorder>,
    users: Mutex<HashMap<String, Arc<UserStats>>>,
    pub history: Mutex<history::History>,
    pub started: Instant,
    pub started_unix: u64,
}

/// Unix seconds as of the last sample (the sampler sets it every second): first and
/// last seen need no clock read per statement.
static COARSE_NOW: AtomicU64 = AtomicU64::new(0);

pub fn coarse_now() -> u64 {
    match COARSE_NOW.load(Ordering::Relaxed) {
        0 => unix_now(),
        t => t,
    }
}

/// Unix time in seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Analytics {
    pub fn new(cfg: &AnalyticsConfig) -> Analytics {
        let history = match &cfg.history_file {
            Some(path) => history::History::load(path).unwrap_or_else(|e| {
                tracing::warn!(file = %path.display(), error = %e, "history file not read; starting empty");
                history::History::default()
            }),
            None => history::History::default(),
        };
        Analytics {
            cfg: cfg.clone(),
            recorder: Arc::new(Recorder::new(cfg.max_digests)),
            users: Mutex::new(HashMap::new()),
            history: Mutex::new(history),
            started: Instant::now(),
            started_unix: unix_now(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.cfg.enabled
    }

    /// User `name`, created on first use.
    pub fn user(&self, name: &str) -> Arc<UserStats> {
        let mut users = self.users.lock();
        let id = users.len();
        users
            .entry(name.to_owned())
            .or_insert_with(|| {
                Arc::new(UserStats {
                    name: name.to_owned(),
                    id,
                    ..UserStats::default()
                })
            })
            .clone()
    }

    /// The digests, with every statement finished before this call in them.
    pub fn digests(&self) -> &DigestStore {
        self.recorder.flush();
        &self.recorder.digests
    }

    /// Every user with their figures, by name.
    pub fn users(&self) -> Vec<(Arc<UserStats>, UserTotals)> {
        let mut all: Vec<_> = self.users.lock().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        let tallies = self
            .digests()
            .user_totals(all.iter().map(|u| u.id).max().map_or(0, |m| m + 1));
        all.into_iter()
            .map(|u| {
                let t = tallies.get(u.id).copied().unwrap_or_default();
                (u, t)
            })
            .collect()
    }

    /// Counts of every statement since start.
    pub fn totals(&self) -> Totals {
        self.digests().totals()
    }

    /// Records a finished statement at once, past any session's buffer. False when its
    /// digest is not known and no text came with it (it was dropped meanwhile): the
    /// caller should send the text again.
    pub fn record(&self, f: &Finished) -> bool {
        let r = &self.recorder;
        r.digests.record(f, &r.tables).is_some()
    }

    /// A write the binlog reported (it bypassed Sluice, or Sluice's own came back).
    pub fn table_written(&self, t: &TableRef) {
        self.recorder.tables.written(t);
    }
}

/// Passes the binlog's findings on to the cache, and counts the tables written for the
/// advisor (writes that bypass Sluice make caching a digest less worthwhile).
pub struct BinlogTee {
    pub analytics: Arc<Analytics>,
    pub inner: Arc<dyn crate::binlog::BinlogSink>,
}

impl crate::binlog::BinlogSink for BinlogTee {
    fn changed(&self, batch: crate::binlog::Batch) {
        if let Some(tables) = crate::cache::invalidation::changed_tables(&batch) {
            for t in &tables {
                self.analytics.table_written(t);
            }
        }
        self.inner.changed(batch);
    }
    fn up(&self) {
        self.inner.up();
    }
    fn down(&self, reason: &str) {
        self.inner.down(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_problems() {
        let parse = |toml: &str| -> AnalyticsConfig { toml::from_str(toml).unwrap() };
        let c = parse("");
        assert!(c.enabled && c.history_file.is_none());
        assert_eq!(
            (c.max_digests, c.save_interval),
            (2000, Duration::from_secs(60))
        );
        let problems = |toml: &str| {
            let mut p = Vec::new();
            parse(toml).validate(&mut p);
            p
        };
        assert!(problems("max_digests = 15")[0].contains("at least 16"));
        assert!(problems("save_interval = \"10ms\"")[0].contains("at least 1s"));
        assert!(
            problems("history_file = \"/nonexistent/dir/h.json\"")[0].contains("does not exist")
        );
        assert!(problems("history_file = \"h.json\"\nenabled = false").is_empty());
        assert!(toml::from_str::<AnalyticsConfig>("colour = 1").is_err());
    }

    #[test]
    fn kinds_from_digest_text() {
        assert_eq!(Kind::of("SELECT c FROM t WHERE id=?"), Kind::Select);
        assert_eq!(Kind::of("(SELECT 1) UNION (SELECT 2)"), Kind::Select);
        assert_eq!(Kind::of("REPLACE INTO t VALUES(?)"), Kind::Insert);
        assert_eq!(Kind::of("COMMIT"), Kind::Transaction);
        assert_eq!(Kind::of("START TRANSACTION"), Kind::Transaction);
        assert_eq!(Kind::of("SET autocommit=?"), Kind::Other);
        assert_eq!(Kind::of(""), Kind::Other);
    }
}
