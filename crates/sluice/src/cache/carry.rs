//! The cache's entries going to the successor process at a hand-over, so that its hit
//! rate does not start from zero. An entry goes as its key, its response and what it
//! depends on, by table name; the new process takes it only if nothing it depends on was
//! written there since it started (it notes every table written, counters or not, until
//! the entries have come: [`QueryCache::record_writes`]), and then holds it as if filled
//! at that moment, so that any later write drops it as it drops its own entries. The old
//! process sends them once it holds no session, so that no write it serves comes after.

use super::generations::Deps;
use super::{Entry, QueryCache};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Serialize, Deserialize)]
struct Meta {
    /// The rule it was filled under, whole: a rule of that name configured otherwise
    /// in the new process might not cache the statement at all.
    rule: super::RuleConfig,
    digest: String,
    age_ms: u64,
    cost_micros: u64,
    rows: u64,
    deps: Deps,
}

fn put(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&(part.len() as u32).to_be_bytes());
    out.extend_from_slice(part);
}

fn take<'a>(frame: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = u32::from_be_bytes(frame.get(..4)?.try_into().ok()?) as usize;
    let part = frame.get(4..4 + len)?;
    *frame = &frame[4 + len..];
    Some(part)
}

impl QueryCache {
    /// From now on, until [`QueryCache::carried_all`]: note every table written, for
    /// the entries the process before sends.
    pub fn record_writes(&self) {
        self.gens.record_writes();
    }

    /// The process before sent its last entry (or none will come).
    pub fn carried_all(&self) {
        self.gens.stop_recording();
    }

    /// Where this process's binlog readers have read up to (server, file, position),
    /// `None` for one that does not follow now: sent before the entries.
    pub fn read_up_to(&self) -> Vec<Option<(String, String, u64)>> {
        (self.binlog_status.lock().iter())
            .map(|s| s.read_up_to())
            .collect()
    }

    /// Whether entries kept right by readers that read up to `old` (the process
    /// before's) miss no write made around Sluice: each reader here has read every event
    /// since a position the old one's had reached, on the same server.
    pub fn binlog_covers(&self, old: &[Option<(String, String, u64)>]) -> bool {
        let here = self.binlog_status.lock();
        if here.len() != old.len() {
            return false;
        }
        here.iter().zip(old).all(|(status, old)| {
            let (Some((file, pos)), Some((server, old_file, old_pos))) =
                (status.unbroken_from(), old)
            else {
                return false;
            };
            // Binlog files are numbered with zero-padded suffixes: names order as files.
            *server == status.snapshot().server && (old_file, *old_pos) >= (&file, pos)
        })
    }

    /// Every entry still good, most hit first, each as one frame for the successor.
    pub fn carry_out(&self) -> Vec<Vec<u8>> {
        let now = Instant::now();
        let names = self.gens.names();
        let mut frames = Vec::new();
        for (key, entry, _) in self.store.entries() {
            if self.gone(&entry, now).is_some() {
                continue;
            }
            let age = now.saturating_duration_since(entry.filled_at);
            if age > entry.rule.config.ttl {
                continue;
            }
            let Some(deps) = self.gens.deps(&entry.snapshot, &names) else {
                continue;
            };
            let meta = Meta {
                rule: entry.rule.config.clone(),
                digest: entry.digest.text.clone(),
                age_ms: age.as_millis() as u64,
                cost_micros: entry.cost_micros,
                rows: entry.rows,
                deps,
            };
            let Ok(meta) = serde_json::to_vec(&meta) else {
                continue;
            };
            let mut frame = Vec::with_capacity(12 + meta.len() + key.len() + entry.response.len());
            put(&mut frame, &meta);
            put(&mut frame, &key);
            frame.extend_from_slice(&entry.response);
            frames.push(frame);
        }
        frames
    }

    /// Takes one entry the process before sent: whether it is held now. Refused when
    /// what it depends on was written here since this process started, its rule is not
    /// configured here the same, its key is filled here already, or the frame is bad.
    pub fn carry_in(&self, mut frame: &[u8]) -> bool {
        let Some(meta) = take(&mut frame).and_then(|m| serde_json::from_slice::<Meta>(m).ok())
        else {
            return false;
        };
        let Some(key) = take(&mut frame) else {
            return false;
        };
        let rules = self.rules.load();
        let Some(rule) = rules.iter().find(|r| r.config == meta.rule) else {
            return false;
        };
        let age = Duration::from_millis(meta.age_ms);
        let Some(filled_at) = Instant::now().checked_sub(age) else {
            return false;
        };
        let hashed = self.store.hashed(key);
        if age > rule.config.ttl || self.store.contains(hashed) {
            return false;
        }
        let Some(snapshot) = self.gens.adopt(&meta.deps) else {
            return false;
        };
        let entry = Arc::new(Entry {
            response: Bytes::copy_from_slice(frame),
            filled_at,
            rule: rule.clone(),
            digest: self.digests.of(meta.digest.as_bytes(), None),
            snapshot,
            cost_micros: meta.cost_micros,
            rows: meta.rows,
            refreshing: AtomicBool::new(false),
            read: AtomicBool::new(false),
        });
        let len = entry.response.len();
        match self.store.insert(hashed.kept(), entry) {
            Ok(evicted) => {
                rule.stats.filled(len);
                for e in evicted.0 {
                    e.rule.stats.evicted(e.response.len());
                }
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheConfig, Cause, Lookup, RuleConfig};
    use crate::classify::sql::TableRef;

    fn cache() -> Arc<QueryCache> {
        let rule: RuleConfig =
            toml::from_str("name = \"all\"\nmatch = \".\"\nttl = \"1m\"").unwrap();
        let config = CacheConfig {
            rules: vec![rule],
            ..Default::default()
        };
        QueryCache::new(&config).unwrap()
    }

    fn t(name: &str) -> TableRef {
        TableRef {
            schema: "db".into(),
            table: name.into(),
        }
    }

    /// An entry for `key` that read `table`, filled in `c`.
    fn fill(c: &Arc<QueryCache>, key: &[u8], table: &str) {
        let rules = c.rules.load();
        let rule = rules[0].clone();
        let digest = c.digests.of(b"SELECT 1", None);
        let snapshot = c.gens.capture(&[t(table)], None, false);
        let entry = Arc::new(Entry {
            response: Bytes::from_static(b"rows"),
            filled_at: Instant::now(),
            rule,
            digest,
            snapshot,
            cost_micros: 5,
            rows: 1,
            refreshing: AtomicBool::new(false),
            read: AtomicBool::new(false),
        });
        c.store.insert(c.store.hashed(key).kept(), entry).unwrap();
    }

    #[test]
    fn entries_go_across_unless_their_tables_were_written_there() {
        let old = cache();
        fill(&old, b"k1", "a");
        fill(&old, b"k2", "b");
        let new = cache();
        new.record_writes();
        // A write here to b before the entries come: its entry from before is stale.
        new.invalidate_tables([&t("b")], Cause::Write);
        let frames = old.carry_out();
        assert_eq!(frames.len(), 2);
        let taken: Vec<bool> = frames.iter().map(|f| new.carry_in(f)).collect();
        assert_eq!(taken.iter().filter(|&&t| t).count(), 1);
        assert!(matches!(new.lookup(b"k1"), Lookup::Hit(_)));
        assert!(matches!(new.lookup(b"k2"), Lookup::Miss));
        // Taken, it is dropped by a later write as any entry.
        new.invalidate_tables([&t("a")], Cause::Write);
        assert!(matches!(new.lookup(b"k1"), Lookup::Miss));
        new.carried_all();
    }

    #[test]
    fn nothing_is_taken_unless_writes_were_noted_or_after_a_whole_invalidation() {
        let old = cache();
        fill(&old, b"k1", "a");
        let frames = old.carry_out();
        let new = cache();
        assert!(!new.carry_in(&frames[0]), "taken without writes noted");
        new.record_writes();
        new.invalidate_all(Cause::Admin);
        assert!(
            !new.carry_in(&frames[0]),
            "taken after everything was invalidated"
        );
        let fresh = cache();
        fresh.record_writes();
        assert!(!fresh.carry_in(b"\x00\x00\x00\x05{bad}"), "a bad frame");
        assert!(!fresh.carry_in(&frames[0][..10]), "a cut frame");
        assert!(fresh.carry_in(&frames[0]));
    }
}
