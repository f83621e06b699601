//! Prepared statements on the backend side: which statement texts clients still refer
//! to, what each connection has open on its server, and each server's budget of open
//! statements, so that Sluice never takes the server's `max_prepared_stmt_count` from
//! its other clients.
//!
//! A multiplexed session's statement is a text (with its schema) that it prepares
//! lazily on whichever connection runs it, so a connection's statements are shared and
//! outlive the client's COM_STMT_CLOSE. They are closed on the server as soon as no
//! client statement refers to their text any more: when the connection is next given
//! back, or by the pool's periodic check if it sits idle. No reuse cache of closed
//! statements is kept: a client that prepares again sends its prepare to the server
//! anyway, so a kept statement would only save re-preparing where an execute lands,
//! and would cost the server a statement nobody uses for as long as the connection
//! lives.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// MariaDB's default `max_prepared_stmt_count`, assumed until the server's is read.
const SERVER_DEFAULT_MAX: usize = 16_382;

/// The statement texts client statements refer to, with how many refer to each.
///
/// One for the process: a client statement is tied neither to a server nor to one
/// generation of the router (a reload replaces servers and pools, sessions go on).
pub struct StmtRefs {
    counts: Mutex<HashMap<Box<[u8]>, u32>>,
    /// Bumped each time a text loses its last reference: a connection swept at the
    /// current value has nothing unreferenced.
    released: AtomicU64,
}

static REFS: LazyLock<StmtRefs> = LazyLock::new(|| StmtRefs {
    counts: Mutex::new(HashMap::new()),
    released: AtomicU64::new(0),
});

/// The process's statement references.
pub fn refs() -> &'static StmtRefs {
    &REFS
}

impl StmtRefs {
    /// A client statement now refers to `key` until the returned guard is dropped.
    pub fn hold(&'static self, key: Box<[u8]>) -> StmtRef {
        *self.counts.lock().entry(key.clone()).or_insert(0) += 1;
        StmtRef { refs: self, key }
    }

    pub fn referenced(&self, key: &[u8]) -> bool {
        self.counts.lock().contains_key(key)
    }

    pub fn generation(&self) -> u64 {
        self.released.load(Ordering::Acquire)
    }

    fn release(&self, key: &[u8]) {
        let mut counts = self.counts.lock();
        if let Some(n) = counts.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                counts.remove(key);
                self.released.fetch_add(1, Ordering::Release);
            }
        }
    }
}

/// A client statement's reference to its text; dropping it (the client closed the
/// statement, reset its session, or left) lets connections close theirs.
pub struct StmtRef {
    refs: &'static StmtRefs,
    key: Box<[u8]>,
}

impl StmtRef {
    pub fn key(&self) -> &[u8] {
        &self.key
    }
}

impl std::fmt::Debug for StmtRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StmtRef").finish_non_exhaustive()
    }
}

impl Drop for StmtRef {
    fn drop(&mut self) {
        self.refs.release(&self.key);
    }
}

/// The statements Sluice has open on one server, across all its connections there, and
/// how many it may have.
#[derive(Debug, Default)]
pub struct ServerStmts {
    open: AtomicUsize,
    /// Multiplexed statements by text, with the number of connections that have one:
    /// past one, the others are copies an execute made where it landed.
    copies: Mutex<HashMap<Box<[u8]>, u32>>,
    /// The server's `max_prepared_stmt_count`, plus one; zero until read.
    server_max: AtomicUsize,
    /// `pool.max_prepared_statements`, when set.
    configured: Option<u32>,
}

impl ServerStmts {
    pub fn new(configured: Option<u32>) -> ServerStmts {
        ServerStmts {
            open: AtomicUsize::new(0),
            copies: Mutex::new(HashMap::new()),
            server_max: AtomicUsize::new(0),
            configured,
        }
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub fn configured(&self) -> Option<u32> {
        self.configured
    }

    /// Notes the server's `max_prepared_stmt_count` as read from it.
    pub fn learn_limit(&self, value: Option<&[u8]>) {
        let parsed = value.and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok());
        if let Some(max) = parsed {
            self.server_max.store(max + 1, Ordering::Relaxed);
        }
    }

    /// Whether the budget is known (configured, or the server's limit read).
    pub fn budget_known(&self) -> bool {
        self.configured.is_some() || self.server_max.load(Ordering::Relaxed) > 0
    }

    /// The server's limit, as far as known.
    pub fn server_limit(&self) -> usize {
        match self.server_max.load(Ordering::Relaxed) {
            0 => SERVER_DEFAULT_MAX,
            n => n - 1,
        }
    }

    /// How many statements Sluice keeps open on the server at most: the configured
    /// number, else half the server's limit, leaving the other half to its direct
    /// clients and to other proxies.
    pub fn budget(&self) -> usize {
        match self.configured {
            Some(n) => n as usize,
            None => self.server_limit() / 2,
        }
    }

    /// How many multiplexed statements one connection keeps before closing its least
    /// recently used: its share of the budget among the server's `connections`, or
    /// `floor` when that is more. A workload preparing more distinct texts than the
    /// floor (sysbench: 9 per table) would otherwise prepare on nearly every execute
    /// once its sessions share connections, which costs the server more than the
    /// statement does.
    pub fn per_connection(&self, floor: usize, connections: u32) -> usize {
        floor.max(self.budget() / connections.max(1) as usize)
    }

    /// No new statement may be opened without closing one first.
    pub fn full(&self) -> bool {
        self.open() >= self.budget()
    }

    fn add(&self, n: usize) {
        self.open.fetch_add(n, Ordering::Relaxed);
    }

    fn copy_added(&self, key: &[u8]) {
        let mut copies = self.copies.lock();
        match copies.get_mut(key) {
            Some(n) => *n += 1,
            None => {
                copies.insert(key.into(), 1);
            }
        }
    }

    fn copies_removed<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) {
        let mut copies = self.copies.lock();
        for key in keys {
            uncount(&mut copies, key);
        }
    }

    fn sub(&self, n: usize) {
        if n > 0 {
            self.open.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

fn uncount(copies: &mut HashMap<Box<[u8]>, u32>, key: &[u8]) {
    if let Some(n) = copies.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            copies.remove(key);
        }
    }
}

/// Which of a connection's statements a sweep closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Those no client statement refers to.
    Unreferenced,
    /// Those too of which another connection has a copy: every text in use keeps one.
    Copies,
    /// All: the sessions that use them prepare them again where they next run.
    All,
}

/// A prepared statement on one backend connection, shared by the multiplexed sessions
/// that prepared the same text on the same schema.
#[derive(Debug)]
pub struct BackendStmt {
    pub id: u32,
    pub params: u16,
    /// The parameter types the server last had bound for it, if any.
    pub types: Option<Vec<u8>>,
    last_used: u64,
}

/// The statements one connection has open on its server, counted in its server's
/// [`ServerStmts`] for as long as they are.
#[derive(Debug)]
pub struct ConnStmts {
    /// Multiplexed sessions' statements, by schema and text (looked up for every
    /// execute: hashed with aHash, several times faster than SipHash on a text).
    shared: HashMap<Box<[u8]>, BackendStmt, ahash::RandomState>,
    /// A dedicated session's statements: the server's ids, which are the client's.
    owned: HashSet<u32>,
    clock: u64,
    /// [`StmtRefs::generation`] when unreferenced statements were last closed here.
    swept: u64,
    server: Arc<ServerStmts>,
}

impl ConnStmts {
    pub fn new(server: Arc<ServerStmts>) -> ConnStmts {
        ConnStmts {
            shared: HashMap::default(),
            owned: HashSet::new(),
            clock: 0,
            swept: refs().generation(),
            server,
        }
    }

    pub fn server(&self) -> &ServerStmts {
        &self.server
    }

    pub fn len(&self) -> usize {
        self.shared.len() + self.owned.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.shared.contains_key(key)
    }

    /// The statement for `key`, marked as just used.
    pub fn touch(&mut self, key: &[u8]) -> Option<&mut BackendStmt> {
        self.clock += 1;
        let clock = self.clock;
        let s = self.shared.get_mut(key)?;
        s.last_used = clock;
        Some(s)
    }

    pub fn get(&self, key: &[u8]) -> Option<&BackendStmt> {
        self.shared.get(key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut BackendStmt> {
        self.shared.get_mut(key)
    }

    /// Records a statement just prepared here for `key`. Returns the id of one the
    /// caller must close on the server: the one it replaces.
    pub fn insert(&mut self, key: Box<[u8]>, id: u32, params: u16) -> Option<u32> {
        self.clock += 1;
        let stmt = BackendStmt {
            id,
            params,
            types: None,
            last_used: self.clock,
        };
        if let Some(old) = self.shared.get_mut(&key) {
            return Some(std::mem::replace(old, stmt).id);
        }
        self.server.copy_added(&key);
        self.shared.insert(key, stmt);
        self.server.add(1);
        None
    }

    /// Forgets the least recently used statements until fewer than `max` are left,
    /// returning their ids for the caller to close on the server.
    pub fn evict_to(&mut self, max: usize) -> Vec<u32> {
        let mut ids = Vec::new();
        while self.shared.len() >= max.max(1) {
            let Some(key) = self
                .shared
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            ids.extend(self.shared.remove(&key).map(|s| s.id));
            self.server.copies_removed(std::iter::once(&key[..]));
        }
        self.server.sub(ids.len());
        ids
    }

    /// Whether statements may have lost their last reference since the last sweep.
    pub fn needs_sweep(&self) -> bool {
        !self.shared.is_empty() && self.swept != refs().generation()
    }

    /// Forgets the statements `which` says, returning their ids for the caller to close
    /// on the server.
    pub fn sweep(&mut self, which: Sweep) -> Vec<u32> {
        let refs = refs();
        // Read first: a text released during the scan makes the next check sweep again.
        let generation = refs.generation();
        let mut ids = Vec::new();
        {
            // One lock each for the whole connection: sweeps follow every client's close.
            let counts = refs.counts.lock();
            let mut copies = self.server.copies.lock();
            self.shared.retain(|key, s| {
                let keep = match which {
                    Sweep::Unreferenced => counts.contains_key(key),
                    Sweep::Copies => {
                        counts.contains_key(key) && copies.get(key).is_none_or(|n| *n <= 1)
                    }
                    Sweep::All => false,
                };
                if !keep {
                    ids.push(s.id);
                    uncount(&mut copies, key);
                }
                keep
            });
        }
        self.swept = generation;
        self.server.sub(ids.len());
        ids
    }

    /// The server dropped every statement of the connection (COM_RESET_CONNECTION).
    pub fn forget_all(&mut self) {
        self.server.sub(self.len());
        self.server
            .copies_removed(self.shared.keys().map(|k| &k[..]));
        self.shared.clear();
        self.owned.clear();
    }

    /// A dedicated session's prepare succeeded with this id.
    pub fn opened(&mut self, id: u32) {
        if self.owned.insert(id) {
            self.server.add(1);
        }
    }

    /// A dedicated session closed this id on the server.
    pub fn closed(&mut self, id: u32) {
        if self.owned.remove(&id) {
            self.server.sub(1);
        }
    }
}

impl Drop for ConnStmts {
    /// The server closes a connection's statements with it.
    fn drop(&mut self) {
        self.server.sub(self.len());
        self.server
            .copies_removed(self.shared.keys().map(|k| &k[..]));
    }
}

/// COM_STMT_CLOSE for each id, as one write (the server answers none of them).
pub fn close_packets(ids: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len() * 9);
    for id in ids {
        out.extend_from_slice(&[5, 0, 0, 0, sluice_wire::command::Command::StmtClose as u8]);
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_closed_once_no_client_refers_to_them() {
        let server = Arc::new(ServerStmts::new(Some(3)));
        let mut conn = ConnStmts::new(server.clone());
        let a: Box<[u8]> = b"\0unit test: kept".as_slice().into();
        let b: Box<[u8]> = b"\0unit test: closed".as_slice().into();
        let held = refs().hold(a.clone());
        let closing = refs().hold(b.clone());
        assert_eq!(conn.insert(a.clone(), 1, 0), None);
        assert_eq!(conn.insert(b.clone(), 2, 0), None);
        assert_eq!(conn.insert(b.clone(), 3, 0), Some(2), "replaced, to close");
        assert_eq!(server.open(), 2);
        assert!(!server.full());
        drop(closing);
        assert!(conn.needs_sweep());
        assert_eq!(conn.sweep(Sweep::Unreferenced), vec![3]);
        assert!(!conn.needs_sweep());
        assert_eq!(server.open(), 1);
        conn.opened(7);
        conn.opened(7);
        conn.closed(8);
        assert_eq!(server.open(), 2);
        drop(conn);
        assert_eq!(server.open(), 0, "a closed connection frees its statements");
        drop(held);
        assert!(!refs().referenced(&a));
    }

    #[test]
    fn a_text_in_use_keeps_one_copy_on_the_server() {
        let server = Arc::new(ServerStmts::new(None));
        let key: Box<[u8]> = b"\0unit test: copied".as_slice().into();
        let _held = refs().hold(key.clone());
        let mut conns: Vec<ConnStmts> = (0..3).map(|_| ConnStmts::new(server.clone())).collect();
        for (i, c) in conns.iter_mut().enumerate() {
            c.insert(key.clone(), i as u32, 0);
        }
        assert_eq!(server.open(), 3);
        let closed: usize = conns.iter_mut().map(|c| c.sweep(Sweep::Copies).len()).sum();
        assert_eq!((closed, server.open()), (2, 1));
        assert!(conns.iter_mut().all(|c| c.sweep(Sweep::Copies).is_empty()));
        conns.clear();
        assert_eq!(server.open(), 0);
        assert!(server.copies.lock().is_empty());
    }

    #[test]
    fn the_budget_is_half_the_servers_limit_unless_configured() {
        let s = ServerStmts::new(None);
        assert!(!s.budget_known());
        assert_eq!(s.budget(), SERVER_DEFAULT_MAX / 2);
        s.learn_limit(Some(b"40"));
        assert!(s.budget_known());
        assert_eq!((s.server_limit(), s.budget()), (40, 20));
        s.learn_limit(Some(b"0"));
        assert!(s.full(), "a server that allows no statements");
        assert_eq!(ServerStmts::new(Some(7)).budget(), 7);
        assert_eq!(close_packets(&[1]), vec![5, 0, 0, 0, 0x19, 1, 0, 0, 0]);
    }

    #[test]
    fn a_connection_keeps_its_share_of_the_budget_or_the_floor() {
        let s = ServerStmts::new(None);
        s.learn_limit(Some(b"1048576"));
        assert_eq!(s.per_connection(256, 100), 5242, "half the limit over 100");
        assert_eq!(
            s.per_connection(256, 0),
            524_288,
            "no connection count: all of it"
        );
        s.learn_limit(Some(b"16382"));
        assert_eq!(s.per_connection(256, 100), 256, "81 each: the floor wins");
        assert_eq!(ServerStmts::new(Some(1000)).per_connection(16, 10), 100);
    }
}
