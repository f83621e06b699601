//! Generation counters, the cache's proof that an entry is current: an entry records the
//! counters it depends on *before* its query is sent, a write bumps them once committed,
//! and a lookup compares. Per table, and within a table per key value for entries and
//! writes whose rows a key decides (docs/ARCHITECTURE.md, "Cache invalidation").

use super::freshness::ChangedAt;
use super::Cause;
use crate::classify::keys::canon::Canon;
use crate::classify::sql::TableRef;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

/// Per-key counters of a table, by a hash of the key: two keys sharing one only cost a
/// needless invalidation. 128 KiB per table read by key.
const SLOTS: usize = 16 * 1024;

/// Which of a table's counters a dependency reads.
const WHOLE: u32 = u32::MAX;
const WIDE: u32 = u32::MAX - 1;

/// One table's generations.
pub struct TableGen {
    /// Bumped by every write to the table: what an entry that read the whole table checks.
    gen: AtomicU64,
    /// Bumped by writes whose rows no key tells: what an entry that read only some keys
    /// checks, with those keys' slots.
    wide: AtomicU64,
    last_cause: AtomicU8,
    /// When the binlog last brought a change of the table (of any of its rows): what an
    /// entry's fill is measured from ([`Snapshot::last_binlog_change`]).
    /// Set by [`Generations::binlog_changed`].
    binlog_changed: ChangedAt,
    /// Per-key generations, made when an entry first depends on a key.
    slots: OnceLock<Box<[AtomicU64]>>,
}

impl TableGen {
    fn new() -> TableGen {
        TableGen {
            gen: AtomicU64::new(0),
            wide: AtomicU64::new(0),
            last_cause: AtomicU8::new(0),
            binlog_changed: ChangedAt::default(),
            slots: OnceLock::new(),
        }
    }

    fn slots(&self) -> &[AtomicU64] {
        self.slots
            .get_or_init(|| (0..SLOTS).map(|_| AtomicU64::new(0)).collect())
    }

    fn counter(&self, which: u32) -> &AtomicU64 {
        match which {
            WHOLE => &self.gen,
            WIDE => &self.wide,
            slot => &self.slots()[slot as usize],
        }
    }
}

/// The slot of a key value.
fn slot(key: &Canon) -> u32 {
    let h = match key {
        Canon::Int(i) => crate::classify::sql::fnv1a(&i.to_le_bytes()),
        Canon::Bytes(b) => crate::classify::sql::fnv1a(b),
    };
    (h % SLOTS as u64) as u32
}

/// Only these key values of `table` decide a read's result, or a write's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSet {
    pub table: TableRef,
    pub keys: Vec<Canon>,
}

/// The generations an entry was filled under, captured before its query was sent.
pub struct Snapshot {
    global: u64,
    deps: Box<[(Arc<TableGen>, u32, u64)]>,
}

impl Snapshot {
    #[cfg(test)]
    pub fn empty() -> Snapshot {
        Snapshot {
            global: 0,
            deps: Box::new([]),
        }
    }

    pub fn len(&self) -> usize {
        self.deps.len()
    }

    /// When the binlog last brought a change of a table the entry read, if it brought
    /// any since Sluice began counting the table's writes. Per table, not per key: an
    /// entry of one key is measured from the table's last change, whichever rows.
    pub fn last_binlog_change(&self) -> Option<std::time::Instant> {
        self.deps
            .iter()
            .filter_map(|(gen, _, _)| gen.binlog_changed.get())
            .max()
    }

    /// Whether some dependency is on key values rather than whole tables.
    #[cfg(test)]
    pub fn by_key(&self) -> bool {
        self.deps.iter().any(|(_, which, _)| *which == WIDE)
    }
}

/// Per-table generation counters, plus a global one for writes whose tables are
/// unknown, and one bumped by every write (what reads through views depend on: their
/// base tables are not in the statement).
pub struct Generations {
    tables: RwLock<HashMap<TableRef, Arc<TableGen>, ahash::RandomState>>,
    global: AtomicU64,
    global_cause: AtomicU8,
    any: Arc<TableGen>,
    /// After a hand-over, until the entries of the process before have come: every
    /// table written here since this process started, counters or not (a write to a
    /// table no entry read leaves none), so that none of those entries that read one
    /// is taken.
    recording: AtomicBool,
    written: parking_lot::Mutex<std::collections::HashSet<TableRef>>,
}

/// What an entry depends on, by name, as it goes to another process: a table (`None`:
/// every write, for reads through views) and which of its counters.
pub type Deps = Vec<(Option<TableRef>, u32)>;

impl Default for Generations {
    fn default() -> Self {
        Generations {
            tables: RwLock::default(),
            global: AtomicU64::new(0),
            global_cause: AtomicU8::new(0),
            any: Arc::new(TableGen::new()),
            recording: AtomicBool::new(false),
            written: Default::default(),
        }
    }
}

impl Generations {
    fn table(&self, t: &TableRef) -> Arc<TableGen> {
        if let Some(found) = self.tables.read().get(t) {
            return found.clone();
        }
        self.tables
            .write()
            .entry(t.clone())
            .or_insert_with(|| Arc::new(TableGen::new()))
            .clone()
    }

    /// Captures the current generations of `tables` (of `rows`' table, only its keys'),
    /// creating counters as needed. Must happen before the query is sent: a write
    /// committing after this makes the result stale.
    pub fn capture(&self, tables: &[TableRef], rows: Option<&RowSet>, any_write: bool) -> Snapshot {
        let global = self.global.load(Ordering::Acquire);
        // Sized for every counter read (one a table, and a row set's keys beside its
        // table's wide one), so that boxing it needs no second allocation.
        let keys = rows.map_or(0, |r| r.keys.len());
        let mut deps = Vec::with_capacity(tables.len() + usize::from(any_write) + keys);
        let mut read = |gen: &Arc<TableGen>, which: u32| {
            let value = gen.counter(which).load(Ordering::Acquire);
            deps.push((gen.clone(), which, value));
        };
        if any_write {
            read(&self.any, WHOLE);
        }
        for t in tables {
            let gen = self.table(t);
            match rows.filter(|r| &r.table == t) {
                Some(r) => {
                    read(&gen, WIDE);
                    if let [key] = &r.keys[..] {
                        read(&gen, slot(key));
                    } else {
                        let mut slots: Vec<u32> = r.keys.iter().map(slot).collect();
                        slots.sort_unstable();
                        slots.dedup();
                        for s in slots {
                            read(&gen, s);
                        }
                    }
                }
                None => read(&gen, WHOLE),
            }
        }
        Snapshot {
            global,
            deps: deps.into_boxed_slice(),
        }
    }

    /// The same dependencies as `s`, at their current values: for refreshing an entry.
    pub fn recapture(&self, s: &Snapshot) -> Snapshot {
        let global = self.global.load(Ordering::Acquire);
        let deps = s
            .deps
            .iter()
            .map(|(gen, which, _)| {
                let value = gen.counter(*which).load(Ordering::Acquire);
                (gen.clone(), *which, value)
            })
            .collect();
        Snapshot { global, deps }
    }

    /// From now on, note every table written (see `written`).
    pub fn record_writes(&self) {
        self.recording.store(true, Ordering::SeqCst);
    }

    /// The entries from before have all come: stop noting.
    pub fn stop_recording(&self) {
        self.recording.store(false, Ordering::SeqCst);
        self.written.lock().clear();
    }

    fn note<'a>(&self, tables: impl IntoIterator<Item = &'a TableRef>) {
        if self.recording.load(Ordering::Acquire) {
            self.written.lock().extend(tables.into_iter().cloned());
        }
    }

    /// The dependencies of `s` by name (`names`: [`Generations::names`]); `None` when
    /// one cannot be named.
    pub fn deps(&self, s: &Snapshot, names: &HashMap<usize, TableRef>) -> Option<Deps> {
        s.deps
            .iter()
            .map(|(gen, which, _)| {
                if Arc::ptr_eq(gen, &self.any) {
                    return Some((None, *which));
                }
                let name = names.get(&(Arc::as_ptr(gen) as usize))?;
                Some((Some(name.clone()), *which))
            })
            .collect()
    }

    /// Each table's counters' address, with its name.
    pub fn names(&self) -> HashMap<usize, TableRef> {
        (self.tables.read().iter())
            .map(|(t, g)| (Arc::as_ptr(g) as usize, t.clone()))
            .collect()
    }

    /// A snapshot for an entry of the process before that depends on `deps`, as if
    /// filled now: `None` if any of them was written since this process started (while
    /// recording), or anything was invalidated whole.
    pub fn adopt(&self, deps: &Deps) -> Option<Snapshot> {
        if !self.recording.load(Ordering::Acquire) || self.global.load(Ordering::Acquire) != 0 {
            return None;
        }
        let global = self.global.load(Ordering::Acquire);
        let mut out = Vec::with_capacity(deps.len());
        {
            // Held while the counters are read: a write notes its tables before it
            // bumps them.
            let written = self.written.lock();
            for (table, which) in deps {
                let gen = match table {
                    None if self.any.gen.load(Ordering::Acquire) == 0 => self.any.clone(),
                    None => return None,
                    Some(t) if written.contains(t) => return None,
                    Some(t) => self.table(t),
                };
                if *which != WHOLE && *which != WIDE && *which as usize >= SLOTS {
                    return None;
                }
                let value = gen.counter(*which).load(Ordering::Acquire);
                out.push((gen, *which, value));
            }
        }
        // A write not noted yet when the counters were read bumps them after: it makes
        // this snapshot stale, as any write after a capture does.
        Some(Snapshot {
            global,
            deps: out.into_boxed_slice(),
        })
    }

    fn bumped(gen: &TableGen, cause: Cause) {
        gen.last_cause.store(cause as u8, Ordering::Relaxed);
    }

    /// The binlog brought a change of `tables`, now. Noted once a change, before its
    /// first invalidation (not again at the second, which is no change): a fill stored
    /// after that invalidation then finds the time.
    pub fn binlog_changed<'a>(&self, tables: impl IntoIterator<Item = &'a TableRef>) {
        self.any.binlog_changed.now();
        let map = self.tables.read();
        for g in tables.into_iter().filter_map(|t| map.get(t)) {
            g.binlog_changed.now();
        }
    }

    /// Bumps each whole table; returns how many had entries depending on them.
    pub fn bump<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a TableRef> + Clone,
        cause: Cause,
    ) -> u64 {
        self.note(tables.clone());
        let map = self.tables.read();
        let mut n = 0;
        Self::bumped(&self.any, cause);
        self.any.gen.fetch_add(1, Ordering::AcqRel);
        for t in tables {
            if let Some(g) = map.get(t) {
                Self::bumped(g, cause);
                g.wide.fetch_add(1, Ordering::AcqRel);
                g.gen.fetch_add(1, Ordering::AcqRel);
                n += 1;
            }
        }
        n
    }

    /// Bumps the keys of `rows` only (and what depends on the whole table). Returns
    /// whether entries depended on the table.
    pub fn bump_rows(&self, rows: &RowSet, cause: Cause) -> bool {
        self.note([&rows.table]);
        Self::bumped(&self.any, cause);
        self.any.gen.fetch_add(1, Ordering::AcqRel);
        let Some(g) = self.tables.read().get(&rows.table).cloned() else {
            return false;
        };
        Self::bumped(&g, cause);
        // Made by the first capture by key: absent, no entry depends on a key yet, and
        // one captured from now on reads after this write committed.
        if let Some(slots) = g.slots.get() {
            for k in &rows.keys {
                slots[slot(k) as usize].fetch_add(1, Ordering::AcqRel);
            }
        }
        g.gen.fetch_add(1, Ordering::AcqRel);
        true
    }

    pub fn bump_all(&self, cause: Cause) {
        self.global_cause.store(cause as u8, Ordering::Relaxed);
        self.global.fetch_add(1, Ordering::AcqRel);
    }

    /// `Ok` while nothing the snapshot depends on was written since; otherwise the cause
    /// of the write that made it stale.
    pub fn check(&self, s: &Snapshot) -> Result<(), Cause> {
        if self.global.load(Ordering::Acquire) != s.global {
            return Err(Cause::from_u8(self.global_cause.load(Ordering::Relaxed)));
        }
        for (gen, which, value) in s.deps.iter() {
            if gen.counter(*which).load(Ordering::Acquire) != *value {
                return Err(Cause::from_u8(gen.last_cause.load(Ordering::Relaxed)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> TableRef {
        TableRef {
            schema: "db".into(),
            table: name.into(),
        }
    }

    fn rows(table: &str, keys: &[i128]) -> RowSet {
        RowSet {
            table: t(table),
            keys: keys.iter().map(|&k| Canon::Int(k)).collect(),
        }
    }

    #[test]
    fn a_write_by_key_reaches_only_entries_of_that_key_and_of_the_whole_table() {
        let g = Generations::default();
        let one = g.capture(&[t("a")], Some(&rows("a", &[1])), false);
        let two = g.capture(&[t("a")], Some(&rows("a", &[2, 3])), false);
        let whole = g.capture(&[t("a")], None, false);
        assert!(one.by_key() && !whole.by_key());
        g.bump_rows(&rows("a", &[3]), Cause::Write);
        assert!(g.check(&one).is_ok());
        assert_eq!(g.check(&two), Err(Cause::Write));
        assert_eq!(g.check(&whole), Err(Cause::Write));
        let two = g.recapture(&two);
        assert!(g.check(&two).is_ok());
        // A write whose rows no key tells reaches every entry of the table.
        g.bump([&t("a")], Cause::Binlog);
        assert_eq!(g.check(&one), Err(Cause::Binlog));
        assert_eq!(g.check(&two), Err(Cause::Binlog));
    }

    #[test]
    fn keys_of_another_table_and_writes_before_the_first_capture() {
        let g = Generations::default();
        // No counters yet: nothing can depend on them.
        assert!(!g.bump_rows(&rows("a", &[1]), Cause::Write));
        let one = g.capture(&[t("a"), t("b")], Some(&rows("a", &[1])), false);
        g.bump_rows(&rows("b", &[1]), Cause::Write);
        assert_eq!(g.check(&one), Err(Cause::Write), "b is read whole");
        let one = g.recapture(&one);
        let strings = RowSet {
            table: t("a"),
            keys: vec![Canon::Bytes(b"x".to_vec())],
        };
        g.bump_rows(&strings, Cause::Write);
        assert!(g.check(&one).is_ok());
        g.bump_all(Cause::Admin);
        assert_eq!(g.check(&one), Err(Cause::Admin));
    }

    #[test]
    fn reads_through_views_depend_on_every_write_even_by_key() {
        let g = Generations::default();
        let view = g.capture(&[t("v")], None, true);
        g.bump_rows(&rows("a", &[1]), Cause::Binlog);
        assert_eq!(g.check(&view), Err(Cause::Binlog));
    }
}
