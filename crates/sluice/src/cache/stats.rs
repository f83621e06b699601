//! Cache counters: per rule, per digest (bounded), and totals. Plain atomics, bumped on
//! the hot path without locks; read by the admin API and the periodic log line.

use super::freshness::AgeHistogram;
use super::Cause;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Digests tracked one by one; later ones share the "other" row.
const MAX_DIGESTS: usize = 2000;

fn get(a: &AtomicU64) -> u64 {
    a.load(Relaxed)
}
fn inc(a: &AtomicU64) {
    a.fetch_add(1, Relaxed);
}

#[derive(Default)]
pub struct RuleStats {
    hits: AtomicU64,
    stale_hits: AtomicU64,
    misses: AtomicU64,
    fills: AtomicU64,
    not_stored: AtomicU64,
    entries: AtomicU64,
    bytes: AtomicU64,
    evictions: AtomicU64,
    expired: AtomicU64,
    invalidated: [AtomicU64; 3],
    /// Fills refused because a write committed while they ran.
    raced: [AtomicU64; 3],
    /// The age of every entry served, fresh or stale.
    pub hit_age: AgeHistogram,
    /// How long after the last change of a table followed through the binlog each
    /// entry reading it was filled.
    pub filled_after_change: AgeHistogram,
}

impl RuleStats {
    fn served(&self, age: Duration) {
        self.hit_age.record(age);
    }
    pub fn hit(&self, age: Duration) {
        inc(&self.hits);
        self.served(age);
    }
    pub fn stale_hit(&self, age: Duration) {
        inc(&self.stale_hits);
        self.served(age);
    }
    pub fn miss(&self) {
        inc(&self.misses);
    }
    pub fn filled(&self, bytes: usize) {
        inc(&self.fills);
        inc(&self.entries);
        self.bytes.fetch_add(bytes as u64, Relaxed);
    }
    pub fn not_stored(&self) {
        inc(&self.not_stored);
    }
    pub fn removed(&self, bytes: usize) {
        self.entries.fetch_sub(1, Relaxed);
        self.bytes.fetch_sub(bytes as u64, Relaxed);
    }
    pub fn evicted(&self, bytes: usize) {
        inc(&self.evictions);
        self.removed(bytes);
    }
    pub fn expired(&self, bytes: usize) {
        inc(&self.expired);
        self.removed(bytes);
    }
    pub fn invalidated(&self, cause: Cause, bytes: usize) {
        inc(&self.invalidated[cause as usize]);
        self.removed(bytes);
    }
    pub fn raced(&self, cause: Cause) {
        inc(&self.raced[cause as usize]);
    }
    #[cfg(test)]
    pub fn invalidated_by(&self, cause: Cause) -> u64 {
        get(&self.invalidated[cause as usize])
    }
    #[cfg(test)]
    pub fn raced_by(&self, cause: Cause) -> u64 {
        get(&self.raced[cause as usize])
    }

    pub fn to_json(&self, name: &str) -> Value {
        let ages = self.hit_age.snapshot();
        let served = ages.count();
        json!({
            "rule": name,
            "hits": get(&self.hits),
            "stale_hits": get(&self.stale_hits),
            "misses": get(&self.misses),
            "fills": get(&self.fills),
            "not_stored": get(&self.not_stored),
            "entries": get(&self.entries),
            "bytes": get(&self.bytes),
            "evictions": get(&self.evictions),
            "expired": get(&self.expired),
            "invalidated": by_cause(&self.invalidated),
            "fills_raced_by_writes": by_cause(&self.raced),
            "served_age_ms_avg": (ages.sum().as_millis() as u64).checked_div(served).unwrap_or(0),
            "served_age_ms_max": ages.max().as_millis() as u64,
            "hit_age": ages.to_json(),
            "filled_after_change": self.filled_after_change.snapshot().to_json(),
        })
    }
}

fn by_cause(counters: &[AtomicU64; 3]) -> Value {
    json!({
        "write": get(&counters[Cause::Write as usize]),
        "binlog": get(&counters[Cause::Binlog as usize]),
        "admin": get(&counters[Cause::Admin as usize]),
    })
}

/// Counters of one normalized statement.
pub struct DigestStats {
    pub text: String,
    pub hash: u64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub fills: AtomicU64,
    pub admission: Admission,
    /// As [`RuleStats::hit_age`] and [`RuleStats::filled_after_change`], for this
    /// digest's entries whatever their rule.
    pub hit_age: AgeHistogram,
    pub filled_after_change: AgeHistogram,
}

impl DigestStats {
    /// An entry of this digest served, `age` after its fill.
    pub fn served(&self, age: Duration) {
        inc(&self.hits);
        self.hit_age.record(age);
    }

    pub fn new(text: String, hash: u64) -> DigestStats {
        DigestStats {
            text,
            hash,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            fills: AtomicU64::new(0),
            admission: Admission::default(),
            hit_age: AgeHistogram::default(),
            filled_after_change: AgeHistogram::default(),
        }
    }
}

/// The digests seen so far, bounded.
pub struct Digests {
    map: Mutex<HashMap<u64, Arc<DigestStats>, ahash::RandomState>>,
    /// Each statement shape's digest ([`crate::classify::sql::digest_shape`]): a miss
    /// of a shape seen before finds its counters without lexing the statement or
    /// building its digest text.
    shapes: Mutex<HashMap<u64, Arc<DigestStats>, ahash::RandomState>>,
    other: Arc<DigestStats>,
}

/// Shapes remembered; past this many they are forgotten and learnt again.
const MAX_SHAPES: usize = 4 * MAX_DIGESTS;

impl Default for Digests {
    fn default() -> Self {
        Digests {
            map: Mutex::default(),
            shapes: Mutex::default(),
            other: Arc::new(DigestStats::new("(other digests)".into(), 0)),
        }
    }
}

impl Digests {
    /// The counters of `sql`'s digest. Runs on misses only: hits reach the digest
    /// through their entry.
    /// `shape`: `sql`'s, when it was worked out already.
    pub fn of(&self, sql: &[u8], shape: Option<crate::classify::facts::Shape>) -> Arc<DigestStats> {
        let shape = shape.unwrap_or_else(|| crate::classify::sql::digest_shape(sql));
        let Some((shape, _)) = shape else {
            return self.by_digest(sql);
        };
        if let Some(d) = self.shapes.lock().get(&shape) {
            return d.clone();
        }
        let d = self.by_digest(sql);
        let mut shapes = self.shapes.lock();
        if shapes.len() >= MAX_SHAPES {
            shapes.clear();
        }
        shapes.insert(shape, d.clone());
        d
    }

    fn by_digest(&self, sql: &[u8]) -> Arc<DigestStats> {
        let (text, hash) = crate::classify::sql::digest(sql);
        let mut map = self.map.lock();
        if let Some(d) = map.get(&hash) {
            return d.clone();
        }
        if map.len() >= MAX_DIGESTS {
            return self.other.clone();
        }
        map.entry(hash)
            .or_insert_with(|| Arc::new(DigestStats::new(text, hash)))
            .clone()
    }

    /// Digests named by hex hash or by exact text.
    pub fn find(&self, wanted: &str) -> Vec<Arc<DigestStats>> {
        let hash = u64::from_str_radix(wanted.trim_start_matches("0x"), 16).ok();
        self.map
            .lock()
            .values()
            .filter(|d| Some(d.hash) == hash || d.text == wanted)
            .cloned()
            .collect()
    }

    /// The `limit` busiest digests.
    pub fn to_json(&self, limit: usize) -> Value {
        let mut all: Vec<Arc<DigestStats>> = self.map.lock().values().cloned().collect();
        all.push(self.other.clone());
        all.retain(|d| get(&d.hits) + get(&d.misses) > 0);
        all.sort_by_key(|d| std::cmp::Reverse(get(&d.hits) + get(&d.misses)));
        all.truncate(limit);
        Value::Array(
            all.iter()
                .map(|d| {
                    json!({
                        "digest": format!("{:016x}", d.hash),
                        "text": d.text,
                        "hits": get(&d.hits),
                        "misses": get(&d.misses),
                        "fills": get(&d.fills),
                        "not_admitted": get(&d.admission.declined),
                        "hit_age": d.hit_age.snapshot().to_json(),
                        "filled_after_change": d.filled_after_change.snapshot().to_json(),
                    })
                })
                .collect(),
        )
    }
}

/// Whether a digest's results are worth storing. An entry a write drops before anyone
/// read it cost a recording and a store and saved nothing: while, over a digest's recent
/// entries, fewer than one in [`Admission::USEFUL_SHARE`] of those dropped by a write had
/// been read, only one miss in [`Admission::SAMPLE`] fills (the others go to the server as
/// if uncached), which goes on measuring. Reads no write ever drops are always admitted,
/// so a cache still warming up (entries not read *yet*) is never held back.
#[derive(Default)]
pub struct Admission {
    /// Entries dropped by a write (or whose fill one raced) unread, and read, lately.
    wasted: AtomicU32,
    useful: AtomicU32,
    asked: AtomicU64,
    pub declined: AtomicU64,
}

impl Admission {
    const WINDOW: u32 = 1024;
    const MIN_WASTED: u32 = 64;
    const USEFUL_SHARE: u32 = 8;
    const SAMPLE: u64 = 16;

    /// Whether this miss should fill.
    pub fn admit(&self) -> bool {
        let wasted = self.wasted.load(Relaxed);
        let useful = self.useful.load(Relaxed);
        if wasted < Self::MIN_WASTED || useful.saturating_mul(Self::USEFUL_SHARE) >= wasted {
            return true;
        }
        if self
            .asked
            .fetch_add(1, Relaxed)
            .is_multiple_of(Self::SAMPLE)
        {
            return true;
        }
        inc(&self.declined);
        false
    }

    /// An entry of the digest was dropped by a write, after `read` hits or none.
    pub fn dropped(&self, read: bool) {
        let counter = if read { &self.useful } else { &self.wasted };
        counter.fetch_add(1, Relaxed);
        // Halving keeps the window on recent entries (racing halvings only blur it).
        if self.wasted.load(Relaxed) + self.useful.load(Relaxed) >= Self::WINDOW {
            self.wasted.store(self.wasted.load(Relaxed) / 2, Relaxed);
            self.useful.store(self.useful.load(Relaxed) / 2, Relaxed);
        }
    }
}

#[derive(Default)]
pub struct Totals {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
    invalidations: [AtomicU64; 3],
    table_bumps: [AtomicU64; 3],
    /// Key values written (by a write whose rows a key tells), when entries depended on
    /// their table.
    key_bumps: [AtomicU64; 3],
}

impl Totals {
    pub fn invalidated(&self, cause: Cause) {
        inc(&self.invalidations[cause as usize]);
    }
    pub fn table_bumps(&self, cause: Cause, n: u64) {
        inc(&self.invalidations[cause as usize]);
        self.table_bumps[cause as usize].fetch_add(n, Relaxed);
    }
    pub fn row_bumps(&self, cause: Cause, read: bool, keys: usize) {
        inc(&self.invalidations[cause as usize]);
        if read {
            self.key_bumps[cause as usize].fetch_add(keys as u64, Relaxed);
        }
    }

    pub fn to_json(&self, entries: u64, bytes: u64, budget: u64) -> Value {
        let (hits, misses) = (get(&self.hits), get(&self.misses));
        json!({
            "hits": hits,
            "misses": misses,
            "hit_ratio": if hits + misses == 0 { 0.0 } else { hits as f64 / (hits + misses) as f64 },
            "entries": entries,
            "bytes": bytes,
            "budget_bytes": budget,
            "evictions": get(&self.evictions),
            "invalidation_events": by_cause(&self.invalidations),
            "tables_invalidated": by_cause(&self.table_bumps),
            "keys_invalidated": by_cause(&self.key_bumps),
        })
    }

    pub fn summary(&self, entries: u64, bytes: u64, budget: u64) -> String {
        let (hits, misses) = (get(&self.hits), get(&self.misses));
        format!(
            "hits={hits} misses={misses} entries={entries} bytes={bytes}/{budget} evictions={} invalidations(write/binlog/admin)={}/{}/{}",
            get(&self.evictions),
            get(&self.invalidations[0]),
            get(&self.invalidations[1]),
            get(&self.invalidations[2]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_whose_entries_writes_drop_unread_fills_one_miss_in_sixteen() {
        let a = Admission::default();
        // Warming up: nothing dropped yet, everything admitted.
        assert!((0..1000).all(|_| a.admit()));
        for _ in 0..100 {
            a.dropped(false);
        }
        let admitted = (0..1600).filter(|_| a.admit()).count();
        assert_eq!(admitted, 100);
        assert_eq!(get(&a.declined), 1500);
        // Read entries make it worth storing again.
        for _ in 0..20 {
            a.dropped(true);
        }
        assert!((0..100).all(|_| a.admit()));
        // The window forgets old entries: only recent ones count.
        for _ in 0..2000 {
            a.dropped(true);
        }
        assert!(a.wasted.load(Relaxed) + a.useful.load(Relaxed) < Admission::WINDOW);
    }

    #[test]
    fn a_shape_seen_before_finds_its_digest_without_a_lex() {
        let d = Digests::default();
        let first = d.of(b"SELECT c FROM t WHERE id = 1", None);
        assert_eq!(first.text, "SELECT c FROM t WHERE id = ?");
        assert!(Arc::ptr_eq(
            &first,
            &d.of(b"SELECT c FROM t WHERE id = 22", None)
        ));
        assert_eq!(d.shapes.lock().len(), 1);
        // A string has a shape of its own, and the same digest.
        let quoted = d.of(b"SELECT c FROM t WHERE id = '3'", None);
        assert_eq!(quoted.text, "SELECT c FROM t WHERE id = ?");
        assert!(Arc::ptr_eq(&first, &quoted));
        assert_eq!(d.shapes.lock().len(), 2);
        // Statements the shape can't vouch for (a comment) still reach the same digest.
        let commented = d.of(b"SELECT c FROM t WHERE id = /* x */ 4", None);
        assert!(Arc::ptr_eq(&first, &commented));
        assert_eq!(d.shapes.lock().len(), 2);
        assert!(!Arc::ptr_eq(
            &first,
            &d.of(b"SELECT c FROM t WHERE k = 1", None)
        ));
    }
}
