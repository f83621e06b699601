//! Connection pools, one per server. A client takes a [`PooledConn`] by lease. A session
//! that holds its connection for its whole life gives it back by dropping it: it is reset
//! (COM_RESET_CONNECTION) and kept idle. A multiplexed session gives it back after each
//! statement or transaction with [`PooledConn::release`], keeping its session state, which
//! the next lessee brings in line with its own.
//!
//! Every open connection, leased or idle, holds one of the server's `max_connections`
//! slots. When none is free, leases wait in one FIFO queue per server (bounded in length
//! and time): a released connection goes to the first waiter, as it is when the waiter
//! wants the same login and wire format, else its slot does (the connection is closed and
//! the waiter opens its own).

use super::config::PoolConfig;
use super::{BackendConn, Server};
use crate::error::{BackendError, Failed, RefusedAsNone};
use crate::id_hash::IdMap;
use crate::stats::Stats;
use parking_lot::Mutex;
use sluice_wire::handshake::InitialHandshake;
use sluice_wire::packet::take_packet;
use sluice_wire::response::ErrPacket;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

mod key;
pub use key::PoolKey;

struct Idle {
    conn: Conn,
    since: Instant,
}

/// A connection as the pool and its lessees hold it: boxed once when it is opened, so that
/// a lease, a release and each hand-over between them moves a pointer. Moved by value, the
/// connection (its stream, TLS state and buffers) was some 1,500 instructions of copying
/// for every statement of a multiplexed session.
type Conn = Box<BackendConn>;

/// Idle for less than this, a connection is not checked for a server-side close.
const FRESH: Duration = Duration::from_millis(100);

/// What a waiter is handed: a connection of its kind, or a slot to open one in.
enum Grant {
    Conn(Conn),
    Slot,
}

struct Waiter {
    id: u64,
    key: PoolKey,
    tx: oneshot::Sender<Grant>,
}

/// The server's slots: open connections, idle ones by kind, and the queue of waiters.
struct Slots {
    open: usize,
    /// By kind, looked up at every lease and release: keyed by the hash each key
    /// carries, not hashed again.
    idle: IdMap<PoolKey, Vec<Idle>>,
    waiters: VecDeque<Waiter>,
}

/// Queue figures of one server, for the admin interface.
#[derive(Default)]
pub struct QueueStats {
    /// Leases that had to wait.
    pub waits: AtomicU64,
    /// Total time they waited, in microseconds.
    pub wait_micros: AtomicU64,
    /// Longest wait so far, in microseconds.
    pub max_wait_micros: AtomicU64,
    /// Waits that ran out of time, and leases refused because the queue was full.
    pub timeouts: AtomicU64,
    pub rejected: AtomicU64,
}

pub struct ServerPool {
    pub server: Arc<Server>,
    slots: Mutex<Slots>,
    /// Keys (and schemas) clients have used: `min_idle` is kept for these. Recorded as
    /// a lease opens a connection, by the hash each key carries.
    warm: Mutex<IdMap<PoolKey, Option<Vec<u8>>>>,
    cfg: PoolConfig,
    stats: Arc<Stats>,
    pub queue: QueueStats,
    next_waiter: AtomicU64,
    /// Leases handed out and not yet given back.
    leased: AtomicUsize,
}

/// A leased backend connection. Dropping it gives it back to its pool, reset.
pub struct PooledConn {
    conn: Option<Conn>,
    pool: Arc<ServerPool>,
    key: PoolKey,
    broken: bool,
    /// Usable now, but in a state no other lessee may inherit: closed when given back.
    retired: bool,
}

impl std::ops::Deref for PooledConn {
    type Target = BackendConn;
    fn deref(&self) -> &BackendConn {
        self.conn.as_deref().expect("present until drop")
    }
}

impl std::ops::DerefMut for PooledConn {
    fn deref_mut(&mut self) -> &mut BackendConn {
        self.conn.as_deref_mut().expect("present until drop")
    }
}

impl PooledConn {
    /// The connection's state is unknown (an error mid-exchange): close it, don't reuse.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// For a command Sluice sent here whose failure its session answers and goes on
    /// from: the error the client gets; a connection that failed is marked broken.
    pub fn answer_for(&mut self, failed: Failed<BackendError>) -> ErrPacket {
        if failed.is_broken() {
            self.mark_broken();
        }
        failed.to_err_packet()
    }

    /// Keeps working for this lessee, but is closed instead of being given back.
    pub fn retire(&mut self) {
        self.retired = true;
    }

    pub fn pool(&self) -> &Arc<ServerPool> {
        &self.pool
    }

    /// Gives the connection back as it is, session state included, for the next lessee
    /// to bring in line. A broken one is closed instead.
    pub fn release(mut self) {
        let Some(conn) = self.conn.take() else { return };
        self.pool.leased.fetch_sub(1, Ordering::Relaxed);
        if self.broken || self.retired || !conn.rbuf.is_empty() {
            self.pool.closed();
            return;
        }
        self.pool.put(self.key.clone(), conn);
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        self.pool.leased.fetch_sub(1, Ordering::Relaxed);
        if self.broken || self.retired || !conn.rbuf.is_empty() {
            self.pool.closed();
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.pool.closed();
            return;
        };
        let pool = self.pool.clone();
        let key = self.key.clone();
        rt.spawn(async move { pool.give_back(key, conn).await });
    }
}

impl ServerPool {
    pub fn new(server: Arc<Server>, cfg: PoolConfig, stats: Arc<Stats>) -> Arc<ServerPool> {
        let pool = Arc::new(ServerPool {
            server,
            slots: Mutex::new(Slots {
                open: 0,
                idle: IdMap::default(),
                waiters: VecDeque::new(),
            }),
            warm: Mutex::new(IdMap::default()),
            cfg,
            stats,
            queue: QueueStats::default(),
            next_waiter: AtomicU64::new(0),
            leased: AtomicUsize::new(0),
        });
        tokio::spawn(maintain(Arc::downgrade(&pool)));
        pool
    }

    /// Leases handed out and not yet given back: the statements in flight here.
    pub fn leased(&self) -> usize {
        self.leased.load(Ordering::Relaxed)
    }

    /// Closes every idle connection (a drained server keeps none). Returns how many.
    pub fn close_idle(&self) -> usize {
        self.close_idle_where(|_, _| true)
    }

    /// Closes the idle connections of account `user` that `stale` picks (they logged in
    /// with rights the account no longer has). Returns how many.
    pub fn close_idle_of(&self, user: &str, stale: impl Fn(&BackendConn) -> bool) -> usize {
        self.close_idle_where(|key, conn| key.creds.user == user && stale(conn))
    }

    /// Closes the idle connections `pick` chooses. Returns how many.
    fn close_idle_where(&self, pick: impl Fn(&PoolKey, &BackendConn) -> bool) -> usize {
        let mut closing = Vec::new();
        {
            let mut slots = self.slots.lock();
            for (key, conns) in slots.idle.iter_mut() {
                let (gone, kept): (Vec<Idle>, Vec<Idle>) =
                    conns.drain(..).partition(|i| pick(key, &i.conn));
                *conns = kept;
                closing.extend(gone);
            }
            slots.idle.retain(|_, conns| !conns.is_empty());
        }
        let n = closing.len();
        // Sockets close outside the lock; each freed slot may go to a waiter.
        drop(closing);
        for _ in 0..n {
            self.closed();
        }
        n
    }

    /// (open, idle, leased, waiting) connections and leases right now.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let slots = self.slots.lock();
        let idle = slots.idle.values().map(Vec::len).sum();
        (
            slots.open,
            idle,
            self.leased.load(Ordering::Relaxed),
            slots.waiters.len(),
        )
    }

    /// Leases a connection for `key` whose default schema is `schema`: an idle one if a
    /// healthy one exists, else a new one, waiting in the queue for room up to the
    /// queue timeout.
    pub async fn lease(
        self: &Arc<Self>,
        key: &PoolKey,
        schema: Option<&[u8]>,
    ) -> Result<PooledConn, BackendError> {
        self.lease_preferring(key, schema, on_schema(schema), 1)
            .await
    }

    /// A connection for `key` if one is idle or a slot is free now; `None` rather than
    /// waiting in the queue.
    pub async fn try_lease(
        self: &Arc<Self>,
        key: &PoolKey,
        schema: Option<&[u8]>,
    ) -> Result<Option<PooledConn>, BackendError> {
        match self.try_take(key, schema, &|_: &BackendConn| 0, 0, false) {
            Taken::Conn(conn) => Ok(Some(self.wrap(key, conn))),
            Taken::Full | Taken::Queued(..) => Ok(None),
            Taken::QueueFull => Err(self.queue_full()),
            Taken::Slot => self.open_leased(key, schema).await.map(Some),
        }
    }

    /// [`Self::lease`], choosing among idle connections the one `score` rates highest
    /// (a multiplexed session prefers one whose state already matches its own); the
    /// first one scoring `perfect` is taken at once.
    pub async fn lease_preferring(
        self: &Arc<Self>,
        key: &PoolKey,
        schema: Option<&[u8]>,
        score: impl Fn(&BackendConn) -> u32,
        perfect: u32,
    ) -> Result<PooledConn, BackendError> {
        let grant = match self.try_take(key, schema, &score, perfect, true) {
            Taken::Conn(conn) => return Ok(self.wrap(key, conn)),
            Taken::Slot => Grant::Slot,
            Taken::Queued(id, rx) => self.wait(key, id, rx).await?,
            // Asked to queue, a full server queues the caller: `Full` is not returned.
            Taken::QueueFull | Taken::Full => return Err(self.queue_full()),
        };
        match grant {
            Grant::Conn(conn)
                if conn.looks_healthy() && (schema.is_some() || conn.schema.is_none()) =>
            {
                return Ok(self.wrap(key, conn))
            }
            // Closed by the server while idle, or on a schema that can't be unselected:
            // its slot is ours to open in.
            Grant::Conn(conn) => drop(conn),
            Grant::Slot => {}
        }
        self.open_leased(key, schema).await
    }

    /// A new connection in a slot the caller holds, for a lease. Boxed: a lease is
    /// awaited inside every multiplexed statement, and opening a connection (rare once
    /// the pool is warm) is its largest state, which the statement's future would
    /// otherwise carry and copy each time.
    async fn open_leased(
        self: &Arc<Self>,
        key: &PoolKey,
        schema: Option<&[u8]>,
    ) -> Result<PooledConn, BackendError> {
        // Each key that ever needed a connection; every idle one was opened here (or by
        // `maintain_once`, for a key already known), so a lease finding one has nothing
        // to record. Not for a client's attributes: one key per client process
        // (`_pid`), and kept warm after it is gone.
        if key.attributes.is_none() {
            let mut warm = self.warm.lock();
            if !warm.contains_key(key) {
                warm.insert(key.clone(), schema.map(<[u8]>::to_vec));
            }
        }
        match Box::pin(self.open(key, schema)).await {
            Ok(conn) => Ok(self.wrap(key, conn)),
            Err(e) => {
                self.closed();
                Err(e)
            }
        }
    }

    /// Takes an idle connection of `key`, or a free slot, or says the server is full;
    /// with `queue`, a full server puts the caller in the queue under the same lock, so
    /// that a connection given back in between can't miss it.
    /// With no schema wanted, only a connection without one will do (a schema can't be
    /// unselected); an idle connection of another kind gives its slot up when full.
    fn try_take(
        &self,
        key: &PoolKey,
        schema: Option<&[u8]>,
        score: &impl Fn(&BackendConn) -> u32,
        perfect: u32,
        queue: bool,
    ) -> Taken {
        let mut victims = Vec::new();
        let taken = {
            let mut slots = self.slots.lock();
            let taken = loop {
                let Some(list) = slots.idle.get_mut(key) else {
                    break None;
                };
                // Most recently used first; the first one scoring `perfect` ends the search.
                let mut best: Option<(usize, u32)> = None;
                for (i, c) in list.iter().enumerate().rev() {
                    if schema.is_none() && c.conn.schema.is_some() {
                        continue;
                    }
                    let s = score(&c.conn);
                    if best.is_none_or(|(_, b)| s > b) {
                        best = Some((i, s));
                    }
                    if s >= perfect {
                        break;
                    }
                }
                let Some((i, _)) = best else { break None };
                let candidate = list.swap_remove(i);
                // A connection used moments ago is taken as is: the check costs a system
                // call, and multiplexed sessions lease for every statement.
                if candidate.since.elapsed() < FRESH || candidate.conn.looks_healthy() {
                    break Some(candidate.conn);
                }
                tracing::debug!(server = %self.server.name, "dropping idle connection closed by the server");
                victims.push(candidate);
                slots.open -= 1;
            };
            match taken {
                Some(conn) => Taken::Conn(conn),
                None if slots.open < self.server.max_connections as usize => {
                    slots.open += 1;
                    Taken::Slot
                }
                None => match oldest_idle(&mut slots.idle) {
                    Some(victim) => {
                        victims.push(victim);
                        Taken::Slot
                    }
                    None if !queue => Taken::Full,
                    None if slots.waiters.len() >= self.cfg.max_queue as usize => Taken::QueueFull,
                    None => {
                        let (tx, rx) = oneshot::channel();
                        let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
                        slots.waiters.push_back(Waiter {
                            id,
                            key: key.clone(),
                            tx,
                        });
                        Taken::Queued(id, rx)
                    }
                },
            }
        };
        drop(victims);
        taken
    }

    /// Waits in the queue for the next connection or slot given back, up to the queue
    /// timeout.
    async fn wait(
        self: &Arc<Self>,
        key: &PoolKey,
        id: u64,
        mut rx: oneshot::Receiver<Grant>,
    ) -> Result<Grant, BackendError> {
        let started = Instant::now();
        let got = tokio::time::timeout(self.cfg.queue_timeout, &mut rx).await;
        let waited = started.elapsed().as_micros() as u64;
        Stats::incr(&self.queue.waits);
        Stats::add(&self.queue.wait_micros, waited);
        self.queue
            .max_wait_micros
            .fetch_max(waited, Ordering::Relaxed);
        match got {
            Ok(Ok(grant)) => Ok(grant),
            _ => {
                // Out of time (or the pool is going away): leave the queue, and hand on
                // anything given to us in the meantime.
                self.slots.lock().waiters.retain(|w| w.id != id);
                rx.close();
                if let Ok(grant) = rx.try_recv() {
                    match grant {
                        Grant::Conn(conn) => self.put(key.clone(), conn),
                        Grant::Slot => self.closed(),
                    }
                }
                Stats::incr(&self.queue.timeouts);
                Stats::incr(&self.stats.pool_timeouts);
                Err(BackendError::PoolTimeout {
                    server: self.server.name.clone(),
                    waited: self.cfg.queue_timeout,
                    max: self.server.max_connections,
                })
            }
        }
    }

    fn queue_full(&self) -> BackendError {
        Stats::incr(&self.queue.rejected);
        Stats::incr(&self.stats.pool_timeouts);
        BackendError::QueueFull {
            server: self.server.name.clone(),
            max: self.cfg.max_queue,
        }
    }

    fn wrap(self: &Arc<Self>, key: &PoolKey, conn: Conn) -> PooledConn {
        self.leased.fetch_add(1, Ordering::Relaxed);
        PooledConn {
            conn: Some(conn),
            pool: self.clone(),
            key: key.clone(),
            broken: false,
            retired: false,
        }
    }

    /// A clean connection comes back: to the first waiter (as it is when the waiter wants
    /// its kind, else as a slot), or to the idle list.
    fn put(&self, key: PoolKey, conn: Conn) {
        self.put_idle_since(key, conn, Instant::now());
    }

    /// [`Self::put`] for a connection idle since `since`.
    fn put_idle_since(&self, key: PoolKey, mut conn: Conn, since: Instant) {
        conn.fresh = false;
        let mut conn = Some(conn);
        let mut closing = None;
        {
            let mut slots = self.slots.lock();
            while let Some(w) = slots.waiters.pop_front() {
                let c = conn.take().expect("kept until handed over");
                let grant = if w.key == key {
                    Grant::Conn(c)
                } else {
                    closing = Some(c);
                    Grant::Slot
                };
                match w.tx.send(grant) {
                    Ok(()) => break,
                    Err(Grant::Conn(c)) => conn = Some(c),
                    Err(Grant::Slot) => conn = closing.take(),
                }
            }
            if let Some(conn) = conn {
                slots
                    .idle
                    .entry(key)
                    .or_default()
                    .push(Idle { conn, since });
            }
        }
        drop(closing);
    }

    /// A connection was closed (or never opened): its slot goes to the first waiter.
    fn closed(&self) {
        let mut slots = self.slots.lock();
        while let Some(w) = slots.waiters.pop_front() {
            if w.tx.send(Grant::Slot).is_ok() {
                return;
            }
        }
        slots.open -= 1;
    }

    async fn open(&self, key: &PoolKey, schema: Option<&[u8]>) -> Result<Conn, BackendError> {
        let connect = async {
            let mut conn = BackendConn::connect_as(
                self.server.clone(),
                &key.creds,
                &key.params,
                schema,
                key.attributes.as_deref(),
            )
            .await?;
            // Its rights are those of its login: noted now, before any session uses it.
            conn.grants = conn.read_grants(&key.creds.user).await?;
            Ok(Box::new(conn))
        };
        let result = match tokio::time::timeout(self.cfg.connect_timeout, connect).await {
            // Lost while logging in (a server dying under us): nothing of any client's
            // command was sent, so it is a failure to connect, which callers may retry
            // elsewhere.
            Ok(Err(BackendError::Io { server, source })) => Err(BackendError::Connect {
                server,
                address: self.server.endpoint.to_string(),
                source,
            }),
            Ok(r) => r,
            Err(_) => Err(BackendError::ConnectTimeout {
                server: self.server.name.clone(),
                address: self.server.endpoint.to_string(),
                after: self.cfg.connect_timeout,
            }),
        };
        match &result {
            Ok(_) => Stats::incr(&self.stats.backend_connects),
            Err(e) => {
                Stats::incr(&self.stats.backend_connect_errors);
                tracing::warn!(server = %self.server.name, error = %e, "backend connection failed");
            }
        }
        result
    }

    /// Cleans a connection a session held for its whole life and keeps it idle, or
    /// closes it when cleaning fails.
    async fn give_back(self: Arc<Self>, key: PoolKey, mut conn: Conn) {
        let clean = async {
            if !conn.reset().await? {
                return Ok::<bool, BackendError>(false);
            }
            // The reset dropped the statements and variables, tracking settings included.
            conn.stmts.forget_all();
            conn.vars.clear();
            conn.last_insert_id = Some(0);
            conn.user_vars.clear();
            if key.params.track_state {
                conn.start_tracking().await?;
            }
            // COM_RESET_CONNECTION keeps the schema; learn it so leases can match on it.
            match conn
                .query_scalar("SELECT DATABASE()")
                .await
                .refused_as_none()?
            {
                Some(schema) => conn.schema = schema,
                None => return Ok(false),
            }
            Ok(true)
        };
        match tokio::time::timeout(self.cfg.connect_timeout, clean).await {
            Ok(Ok(true)) => {
                Stats::incr(&self.stats.backend_resets);
                self.put(key, conn);
            }
            other => {
                tracing::debug!(server = %self.server.name, ?other, "closing backend connection that could not be reset");
                self.closed();
            }
        }
    }

    /// Closes on the server the prepared statements of idle connections that `which`
    /// says. Returns how many.
    pub async fn close_idle_statements(self: &Arc<Self>, which: super::Sweep) -> usize {
        let taken: Vec<(PoolKey, Idle)> = {
            let mut slots = self.slots.lock();
            let mut out = Vec::new();
            for (key, list) in slots.idle.iter_mut() {
                let mut i = 0;
                while i < list.len() {
                    let stmts = &list[i].conn.stmts;
                    let due = if which == super::Sweep::Unreferenced {
                        stmts.needs_sweep()
                    } else {
                        !stmts.is_empty()
                    };
                    if due {
                        out.push((key.clone(), list.swap_remove(i)));
                    } else {
                        i += 1;
                    }
                }
            }
            out
        };
        let mut closed = 0;
        // Out of the idle list meanwhile, each keeps its slot, as a leased one does.
        for (key, mut idle) in taken {
            let ids = idle.conn.stmts.sweep(which);
            closed += ids.len();
            let sent =
                tokio::time::timeout(self.cfg.connect_timeout, idle.conn.close_statements(&ids))
                    .await;
            match sent {
                Ok(Ok(())) => self.put_idle_since(key, idle.conn, idle.since),
                _ => {
                    drop(idle);
                    self.closed();
                }
            }
        }
        closed
    }

    /// Closes idle connections that expired or were closed by the server, closes the
    /// prepared statements no client uses any more, and opens connections up to
    /// `min_idle` for the kinds clients use.
    async fn maintain_once(self: &Arc<Self>) {
        let expired: Vec<Idle> = {
            let mut slots = self.slots.lock();
            let mut out = Vec::new();
            for list in slots.idle.values_mut() {
                let mut i = 0;
                while i < list.len() {
                    if list[i].since.elapsed() > self.cfg.idle_timeout
                        || !list[i].conn.looks_healthy()
                    {
                        out.push(list.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
            }
            // A client's attributes make a key of their own: forget it once unused.
            slots
                .idle
                .retain(|k, list| !list.is_empty() || k.attributes.is_none());
            out
        };
        // Each freed slot may go to a waiter.
        for idle in expired {
            drop(idle);
            self.closed();
        }
        self.close_idle_statements(super::Sweep::Unreferenced).await;
        if self.cfg.min_idle == 0 {
            return;
        }
        let warm: Vec<(PoolKey, Option<Vec<u8>>)> = self
            .warm
            .lock()
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        for (key, schema) in warm {
            let have = self.slots.lock().idle.get(&key).map_or(0, Vec::len);
            for _ in have..self.cfg.min_idle as usize {
                {
                    let mut slots = self.slots.lock();
                    if slots.open >= self.server.max_connections as usize {
                        return;
                    }
                    slots.open += 1;
                }
                match self.open(&key, schema.as_deref()).await {
                    Ok(conn) => self.put(key.clone(), conn),
                    Err(_) => {
                        self.closed();
                        return;
                    }
                }
            }
        }
    }
}

enum Taken {
    Conn(Conn),
    Slot,
    Full,
    /// In the queue: the waiter's id and where its grant arrives.
    Queued(u64, oneshot::Receiver<Grant>),
    QueueFull,
}

/// Scores a connection already on `schema` (no COM_INIT_DB to send) above the others.
pub fn on_schema(schema: Option<&[u8]>) -> impl Fn(&BackendConn) -> u32 + '_ {
    move |c| u32::from(c.schema.as_deref() == schema)
}

/// Removes the longest-idle connection of any kind, so its slot can serve another kind.
fn oldest_idle(idle: &mut IdMap<PoolKey, Vec<Idle>>) -> Option<Idle> {
    let (key, i) = idle
        .iter()
        .flat_map(|(key, list)| list.iter().enumerate().map(move |(i, c)| (c.since, key, i)))
        .min_by_key(|(since, _, _)| *since)
        .map(|(_, key, i)| (key.clone(), i))?;
    idle.get_mut(&key).map(|list| list.swap_remove(i))
}

async fn maintain(pool: Weak<ServerPool>) {
    let interval = match pool.upgrade() {
        Some(p) => p.cfg.check_interval,
        None => return,
    };
    loop {
        tokio::time::sleep(interval).await;
        let Some(p) = pool.upgrade() else { return };
        p.maintain_once().await;
    }
}

/// What a server says about itself before any login.
pub async fn probe(server: &Server, timeout: Duration) -> Option<InitialHandshake> {
    let attempt = async {
        let mut socket = server.endpoint.connect().await.ok()?;
        let mut buf = bytes::BytesMut::with_capacity(512);
        loop {
            if let Some(p) = take_packet(&mut buf, 64 * 1024).ok()? {
                return InitialHandshake::parse(&p.payload).ok();
            }
            if socket.read_buf(&mut buf).await.ok()? == 0 {
                return None;
            }
        }
    };
    tokio::time::timeout(timeout, attempt).await.ok().flatten()
}

#[cfg(test)]
mod tests;
