//! Statements on their way to the digest store. Each session adds what it finishes to
//! a buffer of its own, whose lock only it and a drain ever take, so sessions running
//! the same statement never wait on each other; the store's shard locks are taken by
//! the drains: every second, before anything reads the store, when a session ends, and
//! when a buffer grows past its bound.

use super::digests::{DigestInfo, DigestStore};
use super::{clamp_us, coarse_now, CacheUse, Finished, IdMap, Prepared, Tables, UserStats};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A session drains its own buffer at this many digests or statements: what one session
/// holds back stays small however long no reader comes.
const DIGESTS_MAX: usize = 64;
const STATEMENTS_MAX: usize = 1024;

/// Servers a slot keeps the names of across drains (the store lists at most 16).
const SERVERS_KEPT: usize = 16;

/// A digest's text, kept until a drain has given it to the store.
pub(super) enum Text {
    Owned(Vec<u8>),
    Prepared(Arc<Prepared>),
}

impl Text {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Text::Owned(t) => t,
            Text::Prepared(p) => &p.text,
        }
    }
}

/// One digest's statements since the buffer's last drain: the sums the store adds to
/// its entry, and what has to be replayed in order (latencies, simulated lookups).
pub(super) struct Slot {
    pub digest: u64,
    /// Present when the store may not know the digest yet.
    pub text: Option<Text>,
    pub schema: Option<String>,
    /// The digest's info, when the session knew it: enough for the store to enter
    /// the digest again when it was forgotten since (reset, or evicted).
    pub info: Option<Arc<DigestInfo>>,
    pub count: u64,
    pub errors: u64,
    pub rows_sent: u64,
    pub rows_affected: u64,
    pub total_us: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub backend_count: u64,
    pub backend_us: u64,
    /// Executions that ran on several shards.
    pub scattered: u64,
    pub first_seen: u64,
    pub last_seen: u64,
    /// In microseconds, which an hour's bound keeps within u32.
    pub latencies: Vec<u32>,
    /// Names stay across drains with a count of 0, so a slot reused needs no allocation.
    pub servers: Vec<(String, u64)>,
    /// Simulated-cache lookups outside transactions, in order: the exact statement and
    /// its tables' generation when it ran (None: read it at the drain, which follows
    /// at once).
    pub lookups: Vec<(u64, Option<u64>)>,
    /// Lookups inside transactions: counted, never hits.
    pub tx_lookups: u64,
    /// Successful statements whose writes are still to be counted on their tables
    /// (the session did not know the digest's tables when they ran).
    pub unbumped: u64,
    /// Some statement ran without the digest's info: the drain hands it back.
    pub uninformed: bool,
}

impl Slot {
    pub fn new(digest: u64) -> Slot {
        Slot {
            digest,
            text: None,
            schema: None,
            info: None,
            count: 0,
            errors: 0,
            rows_sent: 0,
            rows_affected: 0,
            total_us: 0,
            min_us: u64::MAX,
            max_us: 0,
            bytes_in: 0,
            bytes_out: 0,
            cache_hits: 0,
            cache_misses: 0,
            backend_count: 0,
            backend_us: 0,
            scattered: 0,
            first_seen: 0,
            last_seen: 0,
            latencies: Vec::new(),
            servers: Vec::new(),
            lookups: Vec::new(),
            tx_lookups: 0,
            unbumped: 0,
            uninformed: false,
        }
    }

    /// Empty again, keeping what was allocated.
    fn reset(&mut self) {
        let latencies = std::mem::take(&mut self.latencies);
        let mut servers = std::mem::take(&mut self.servers);
        let lookups = std::mem::take(&mut self.lookups);
        servers.truncate(SERVERS_KEPT);
        for s in &mut servers {
            s.1 = 0;
        }
        *self = Slot {
            latencies,
            servers,
            lookups,
            ..Slot::new(0)
        };
        self.latencies.clear();
        self.lookups.clear();
    }

    /// Adds one statement. With `info`, its writes are counted on its tables now and
    /// its lookup carries the generation its tables have now, as when the store was
    /// locked per statement.
    pub fn add(&mut self, f: &Finished, info: Option<&DigestInfo>) {
        let us = clamp_us(f.elapsed);
        let now = coarse_now();
        if self.count == 0 {
            self.first_seen = now;
        }
        self.count += 1;
        self.last_seen = self.last_seen.max(now);
        self.total_us += us;
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
        self.latencies.push(us as u32);
        self.rows_sent += f.outcome.rows;
        self.rows_affected = self.rows_affected.saturating_add(f.outcome.affected);
        self.bytes_in += f.bytes_in;
        self.bytes_out += f.bytes_out;
        match f.cache {
            CacheUse::Hit => self.cache_hits += 1,
            CacheUse::Miss => self.cache_misses += 1,
            CacheUse::None => {}
        }
        if f.cache != CacheUse::Hit {
            self.backend_count += 1;
            self.backend_us += us;
        }
        if let Some(server) = f.server {
            self.served_by(server);
        }
        self.scattered += u64::from(f.scattered);
        if f.outcome.error {
            self.errors += 1;
            return;
        }
        let generation = match info {
            Some(i) => {
                i.written(1);
                if !i.cacheable() {
                    return;
                }
                Some(i.generation())
            }
            None => {
                self.uninformed = true;
                self.unbumped += 1;
                None
            }
        };
        if f.in_transaction {
            self.tx_lookups += 1;
        } else {
            self.lookups.push((f.exact, generation));
        }
    }

    fn served_by(&mut self, server: &str) {
        if let Some(s) = self.servers.iter_mut().find(|(s, _)| s == server) {
            s.1 += 1;
        } else if let Some(s) = self.servers.iter_mut().find(|(_, n)| *n == 0) {
            s.0.clear();
            s.0.push_str(server);
            s.1 = 1;
        } else {
            self.servers.push((server.to_owned(), 1));
        }
    }
}

/// A session's statements since its buffer was last drained, one slot per digest.
pub(super) struct Pending {
    user: Arc<UserStats>,
    /// The first `used` are in use, in the order their digests came; the rest wait
    /// to be reused.
    slots: Vec<Slot>,
    used: usize,
    index: IdMap<u64, usize>,
    statements: usize,
    /// Digests drained with statements that ran without their info, and that info.
    pub learned: Vec<(u64, Arc<DigestInfo>)>,
}

impl Pending {
    pub fn new(user: Arc<UserStats>) -> Pending {
        Pending {
            user,
            slots: Vec::new(),
            used: 0,
            index: IdMap::default(),
            statements: 0,
            learned: Vec::new(),
        }
    }

    /// Frees the slots of a buffer that nothing was added to since its last drain (a
    /// second ago at most, by the history sampler's): an idle session holds no memory
    /// for statements it is not running. Its next statement allocates them again.
    fn release(&mut self) {
        debug_assert_eq!(self.used, 0);
        if self.slots.capacity() > 0 || self.index.capacity() > 0 {
            self.slots = Vec::new();
            self.index = IdMap::default();
        }
    }

    /// Adds a statement (with its digest's text when the store may not know it);
    /// true when the buffer is full and should be drained.
    pub fn add(
        &mut self,
        f: &Finished,
        text: Option<Text>,
        info: Option<&Arc<DigestInfo>>,
    ) -> bool {
        let i = match self.index.get(&f.digest) {
            Some(&i) => i,
            None => {
                let i = self.used;
                match self.slots.get_mut(i) {
                    // Emptied by the drain that freed it.
                    Some(s) => s.digest = f.digest,
                    None => self.slots.push(Slot::new(f.digest)),
                }
                self.used += 1;
                self.index.insert(f.digest, i);
                i
            }
        };
        let slot = &mut self.slots[i];
        if slot.text.is_none() && text.is_some() {
            slot.text = text;
            slot.schema = f.schema.map(str::to_owned);
        }
        if slot.info.is_none() {
            slot.info = info.cloned();
        }
        slot.add(f, info.map(|i| &**i));
        self.statements += 1;
        self.used >= DIGESTS_MAX || self.statements >= STATEMENTS_MAX
    }
}

/// The digest store, the table counters, and every session's buffer.
pub(super) struct Recorder {
    pub digests: DigestStore,
    pub tables: Tables,
    buffers: Mutex<IdMap<u64, Arc<Mutex<Pending>>>>,
    next_id: AtomicU64,
}

/// A session's buffer, registered with the recorder while it lives; drained when
/// dropped, so nothing a session did is lost when it ends.
pub(super) struct Buffer {
    id: u64,
    pub pending: Arc<Mutex<Pending>>,
    pub recorder: Arc<Recorder>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // Drained before it leaves the registry: a reader never misses it in between.
        self.recorder.drain(&mut self.pending.lock());
        self.recorder.buffers.lock().remove(&self.id);
    }
}

impl Recorder {
    pub fn new(max_digests: usize) -> Recorder {
        Recorder {
            digests: DigestStore::new(max_digests),
            tables: Tables::default(),
            buffers: Mutex::new(IdMap::default()),
            next_id: AtomicU64::new(0),
        }
    }

    pub fn register(self: &Arc<Self>, user: &Arc<UserStats>) -> Buffer {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let pending = Arc::new(Mutex::new(Pending::new(user.clone())));
        self.buffers.lock().insert(id, pending.clone());
        Buffer {
            id,
            pending,
            recorder: self.clone(),
        }
    }

    /// Drains every session's buffer: what finished before this call is in the store
    /// after it.
    pub fn flush(&self) {
        // A buffer leaves the registry only after its last drain, so none is missed;
        // sessions wait on this lock only to register or to end.
        let buffers = self.buffers.lock();
        for p in buffers.values() {
            let mut p = p.lock();
            if p.statements == 0 {
                p.release();
            } else {
                self.drain(&mut p);
            }
        }
    }

    /// Moves one buffer's statements into the store.
    pub fn drain(&self, p: &mut Pending) {
        if p.statements == 0 {
            return;
        }
        for slot in &mut p.slots[..p.used] {
            // Every slot brings its text or its info: none is refused.
            if let Some(info) = self.digests.apply(slot, &p.user, &self.tables) {
                if slot.uninformed {
                    p.learned.push((slot.digest, info));
                }
            }
            slot.reset();
        }
        p.used = 0;
        p.statements = 0;
        p.index.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::{Analytics, AnalyticsConfig, SessionProbe};
    use crate::classify::sql::{self, TableRef};
    use sluice_wire::tracker::Outcome;

    fn analytics() -> Arc<Analytics> {
        Arc::new(Analytics::new(&AnalyticsConfig::default()))
    }

    /// One statement of `text` through the probe, as a session runs it: `rows` rows,
    /// answered by db1.
    fn run(a: &Analytics, probe: &mut SessionProbe, text: &str, rows: u64) {
        let shape = sql::digest_shape(text.as_bytes());
        probe.query(text.as_bytes(), shape, text.len() as u64);
        let outcome = Outcome {
            rows,
            ..Outcome::default()
        };
        probe.finish(
            a,
            Some("shop"),
            outcome,
            Some("db1"),
            CacheUse::None,
            false,
            false,
            7,
        );
    }

    fn id(text: &str) -> u64 {
        sql::digest_hash(text.as_bytes())
    }

    /// The count the store holds now, without draining anything.
    fn stored(a: &Analytics, text: &str) -> Option<u64> {
        a.recorder.digests.entry(id(text), |e| e.count)
    }

    #[test]
    fn a_reader_sees_what_finished_just_before_it() {
        let a = analytics();
        let mut probe = SessionProbe::new(a.user("app"));
        let q = "SELECT name FROM items WHERE id = 1";
        // The first of a digest is recorded at once, the next wait in the buffer...
        run(&a, &mut probe, q, 1);
        run(&a, &mut probe, q, 1);
        assert_eq!(stored(&a, q), Some(1));
        // ...until anything reads.
        let d = a.digests().get(id(q)).unwrap();
        assert_eq!((&d["count"], &d["rows_sent"]), (&2.into(), &2.into()));
        run(&a, &mut probe, q, 1);
        assert_eq!(a.totals().queries(), 3);
        run(&a, &mut probe, q, 1);
        assert_eq!(a.users()[0].1.queries, 4);
        run(&a, &mut probe, q, 1);
        assert_eq!(a.digests().all_latencies().0.len(), 5);
    }

    /// What the session's buffer holds allocated: its slots' room.
    fn held(probe: &SessionProbe) -> usize {
        probe
            .buffer()
            .map_or(0, |b| b.pending.lock().slots.capacity())
    }

    #[test]
    fn an_idle_sessions_buffer_is_freed_and_comes_back_when_it_runs_again() {
        let a = analytics();
        let mut probe = SessionProbe::new(a.user("app"));
        let (q, r) = (
            "SELECT 1 FROM t WHERE id = 1",
            "SELECT 2 FROM u WHERE id = 1",
        );
        for text in [q, r, q, r] {
            run(&a, &mut probe, text, 1);
        }
        assert!(held(&probe) > 0);
        // The read drains it: kept for the session's next statements.
        assert_eq!(a.totals().queries(), 4);
        assert!(held(&probe) > 0);
        // Nothing since: the next drain frees it.
        a.digests();
        assert_eq!(held(&probe), 0);
        run(&a, &mut probe, q, 1);
        run(&a, &mut probe, q, 1);
        assert!(held(&probe) > 0);
        let d = a.digests().get(id(q)).unwrap();
        assert_eq!((&d["count"], &d["rows_sent"]), (&4.into(), &4.into()));
        assert_eq!(a.totals().queries(), 6);
    }

    #[test]
    fn a_session_ending_or_filling_its_buffer_drains_it() {
        let a = analytics();
        let q = "SELECT name FROM items WHERE id = 1";
        let mut probe = SessionProbe::new(a.user("app"));
        for _ in 0..STATEMENTS_MAX {
            run(&a, &mut probe, q, 0);
        }
        // The first at once, the next STATEMENTS_MAX - 1 still held.
        assert_eq!(stored(&a, q), Some(1));
        run(&a, &mut probe, q, 0);
        assert_eq!(stored(&a, q), Some(STATEMENTS_MAX as u64 + 1));
        run(&a, &mut probe, q, 0);
        drop(probe);
        assert_eq!(stored(&a, q), Some(STATEMENTS_MAX as u64 + 2));
        assert!(a.recorder.buffers.lock().is_empty());
    }

    #[test]
    fn concurrent_sessions_and_readers_count_every_statement_once() {
        const N: u64 = 3000;
        let a = analytics();
        let texts = |i: u64| match i % 3 {
            0 => format!("SELECT name FROM items WHERE id = {i}"),
            1 => format!("SELECT id FROM items WHERE name = 'n{i}'"),
            _ => format!("UPDATE items SET name = 'x' WHERE id = {i}"),
        };
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let sessions: Vec<_> = ["app", "batch"]
                .into_iter()
                .map(|user| {
                    let a = &a;
                    s.spawn(move || {
                        let mut probe = SessionProbe::new(a.user(user));
                        for i in 0..N {
                            run(a, &mut probe, &texts(i), i % 2);
                        }
                        // One session ends, the other lives on: both must be counted.
                        (user == "app").then_some(probe)
                    })
                })
                .collect();
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    a.digests().top(super::super::digests::Sort::Count, 10);
                    a.totals();
                    a.users();
                }
            });
            let live: Vec<_> = sessions.into_iter().map(|h| h.join().unwrap()).collect();
            done.store(true, Ordering::Relaxed);
            let t = a.totals();
            assert_eq!(t.queries(), 2 * N);
            assert_eq!((t.kind(super::super::Kind::Update), t.rows), (2 * N / 3, N));
            let users = a.users();
            assert!(users
                .iter()
                .all(|(_, u)| u.queries == N && u.bytes_out == 7 * N));
            for i in 0..3 {
                let d = a.digests().get(id(&texts(i))).unwrap();
                assert_eq!(d["count"], 2 * N / 3, "{d}");
                assert_eq!(d["servers"]["db1"], 2 * N / 3, "{d}");
            }
            let (latencies, _) = a.digests().all_latencies();
            assert_eq!(latencies.len(), 2 * N);
            // Every successful UPDATE counted on its table, once.
            let items = a.recorder.tables.counter(&TableRef {
                schema: "shop".into(),
                table: "items".into(),
            });
            assert_eq!(items.load(Ordering::Relaxed), 2 * N / 3);
            drop(live);
        });
    }

    #[test]
    fn writes_count_as_they_run_and_lookups_see_them_in_order() {
        // The same session through a probe (buffered) and straight into the store:
        // the simulated cache must find the same hits.
        let steps = [
            "SELECT name FROM items WHERE id = 1",
            "SELECT name FROM items WHERE id = 1",
            "UPDATE items SET name = 'x' WHERE id = 2",
            "SELECT name FROM items WHERE id = 1",
            "UPDATE items SET name = 'y' WHERE id = 3",
            "SELECT name FROM items WHERE id = 1",
            "SELECT name FROM items WHERE id = 1",
            "SELECT name FROM items WHERE id = 2",
        ];
        let direct = analytics();
        let user = direct.user("app");
        for text in steps {
            let f = Finished {
                digest: id(text),
                text: Some(text.as_bytes()),
                schema: Some("shop"),
                user: &user,
                exact: sql::fnv1a(text.as_bytes()),
                elapsed: std::time::Duration::from_micros(10),
                outcome: Outcome::default(),
                server: Some("db1"),
                cache: CacheUse::None,
                in_transaction: false,
                scattered: false,
                bytes_in: 0,
                bytes_out: 0,
            };
            assert!(direct.record(&f));
        }
        let a = analytics();
        let mut probe = SessionProbe::new(a.user("app"));
        let items = a.recorder.tables.counter(&TableRef {
            schema: "shop".into(),
            table: "items".into(),
        });
        for (i, text) in steps.into_iter().enumerate() {
            run(&a, &mut probe, text, 0);
            if i == 4 {
                // Known to the session by now: counted without a drain.
                assert_eq!(items.load(Ordering::Relaxed), 2);
            }
        }
        let rate = |a: &Analytics| {
            a.digests()
                .entry(id(steps[0]), |e| e.expected_hit_rate())
                .flatten()
        };
        assert_eq!(rate(&direct), Some(2.0 / 6.0));
        assert_eq!(rate(&a), rate(&direct));
    }

    #[test]
    fn a_digest_reset_while_sessions_run_it_comes_back_whole() {
        let a = analytics();
        let mut probe = SessionProbe::new(a.user("app"));
        let q = "SELECT name FROM items WHERE id = 1";
        run(&a, &mut probe, q, 1);
        assert_eq!(a.digests().reset(), 1);
        // The session no longer sends the text, but its buffer knows the digest.
        run(&a, &mut probe, q, 1);
        run(&a, &mut probe, q, 1);
        let d = a.digests().get(id(q)).unwrap();
        assert_eq!(d["count"], 2);
        assert_eq!(d["text"], "SELECT name FROM items WHERE id = ?");
        assert_eq!(d["tables"], serde_json::json!(["shop.items"]));
        // A new session finds it in the store's table: buffered from its first.
        let mut other = SessionProbe::new(a.user("app"));
        run(&a, &mut other, q, 1);
        assert_eq!(stored(&a, q), Some(2));
        assert_eq!(a.digests().get(id(q)).unwrap()["count"], 3);
    }
}
