//! Connection pools, one per server. A client takes a [`PooledConn`] by lease and gives
//! it back by dropping it: clean connections are reset (COM_RESET_CONNECTION) and kept
//! idle, broken ones are closed. Idle connections are checked for server-side close.
//! The lease is per session for now; the API does not change when it becomes per
//! statement or per transaction.

use super::{BackendConn, ConnParams, Server};
use crate::auth::BackendCredentials;
use crate::config::PoolConfig;
use crate::error::BackendError;
use crate::stats::Stats;
use parking_lot::Mutex;
use sluice_wire::handshake::InitialHandshake;
use sluice_wire::packet::take_packet;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Which idle connections can serve a lease: same backend login, same wire format.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub creds: BackendCredentials,
    pub params: ConnParams,
}

struct Idle {
    conn: BackendConn,
    permit: OwnedSemaphorePermit,
    since: Instant,
}

pub struct ServerPool {
    pub server: Arc<Server>,
    /// One permit per open connection, leased or idle: the server's connection limit.
    permits: Arc<Semaphore>,
    idle: Mutex<HashMap<PoolKey, Vec<Idle>>>,
    /// Keys (and schemas) clients have used: `min_idle` is kept for these.
    warm: Mutex<HashMap<PoolKey, Option<Vec<u8>>>>,
    cfg: PoolConfig,
    stats: Arc<Stats>,
}

/// A leased backend connection. Dropping it gives it back to its pool.
pub struct PooledConn {
    conn: Option<BackendConn>,
    permit: Option<OwnedSemaphorePermit>,
    pool: Arc<ServerPool>,
    key: PoolKey,
    broken: bool,
}

impl std::ops::Deref for PooledConn {
    type Target = BackendConn;
    fn deref(&self) -> &BackendConn {
        self.conn.as_ref().expect("present until drop")
    }
}

impl std::ops::DerefMut for PooledConn {
    fn deref_mut(&mut self) -> &mut BackendConn {
        self.conn.as_mut().expect("present until drop")
    }
}

impl PooledConn {
    /// The connection's state is unknown (an error mid-exchange): close it, don't reuse.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    pub fn pool(&self) -> &Arc<ServerPool> {
        &self.pool
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        let (Some(conn), Some(permit)) = (self.conn.take(), self.permit.take()) else {
            return;
        };
        if self.broken || !conn.rbuf.is_empty() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.pool.clone();
        let key = self.key.clone();
        rt.spawn(async move { pool.give_back(key, conn, permit).await });
    }
}

impl ServerPool {
    pub fn new(server: Arc<Server>, cfg: PoolConfig, stats: Arc<Stats>) -> Arc<ServerPool> {
        let pool = Arc::new(ServerPool {
            permits: Arc::new(Semaphore::new(server.max_connections as usize)),
            server,
            idle: Mutex::new(HashMap::new()),
            warm: Mutex::new(HashMap::new()),
            cfg,
            stats,
        });
        tokio::spawn(maintain(Arc::downgrade(&pool)));
        pool
    }

    /// Leases a connection for `key` whose default schema is `schema`: an idle one if a
    /// healthy one exists, else a new one, waiting up to the acquire timeout for room.
    pub async fn lease(
        self: &Arc<Self>,
        key: &PoolKey,
        schema: Option<&[u8]>,
    ) -> Result<PooledConn, BackendError> {
        self.warm
            .lock()
            .insert(key.clone(), schema.map(<[u8]>::to_vec));
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        loop {
            if let Some(idle) = self.take_idle(key, schema) {
                return Ok(self.wrap(key, idle.conn, idle.permit));
            }
            let permit = match self.permits.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    // Full: an idle connection of another kind gives its place up.
                    self.evict_one_idle();
                    let wait = deadline
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(50));
                    tokio::time::timeout(wait, self.permits.clone().acquire_owned())
                        .await
                        .ok()
                        .and_then(Result::ok)
                }
            };
            if let Some(permit) = permit {
                let conn = self.open(key, schema).await?;
                return Ok(self.wrap(key, conn, permit));
            }
            if Instant::now() >= deadline {
                Stats::incr(&self.stats.pool_timeouts);
                return Err(BackendError::PoolTimeout {
                    server: self.server.name.clone(),
                    waited: self.cfg.acquire_timeout,
                    max: self.server.max_connections,
                });
            }
        }
    }

    fn wrap(
        self: &Arc<Self>,
        key: &PoolKey,
        conn: BackendConn,
        permit: OwnedSemaphorePermit,
    ) -> PooledConn {
        PooledConn {
            conn: Some(conn),
            permit: Some(permit),
            pool: self.clone(),
            key: key.clone(),
            broken: false,
        }
    }

    async fn open(
        &self,
        key: &PoolKey,
        schema: Option<&[u8]>,
    ) -> Result<BackendConn, BackendError> {
        let connect = BackendConn::connect(self.server.clone(), &key.creds, &key.params, schema);
        let result = match tokio::time::timeout(self.cfg.connect_timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(BackendError::ConnectTimeout {
                server: self.server.name.clone(),
                address: self.server.address.clone(),
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

    /// An idle connection for `key`, preferring one already on `schema`; with a schema
    /// wanted any will do (the caller selects it), with none wanted only a connection
    /// without one (a schema can't be unselected). Health is checked outside the lock.
    fn take_idle(&self, key: &PoolKey, schema: Option<&[u8]>) -> Option<Idle> {
        loop {
            let candidate = {
                let mut idle = self.idle.lock();
                let list = idle.get_mut(key)?;
                let i = list
                    .iter()
                    .rposition(|c| c.conn.schema.as_deref() == schema)
                    .or_else(|| schema.and(list.len().checked_sub(1)))?;
                list.swap_remove(i)
            };
            if candidate.conn.looks_healthy() {
                return Some(candidate);
            }
            tracing::debug!(server = %self.server.name, "dropping idle connection closed by the server");
        }
    }

    /// Closes the longest-idle connection of any kind, giving its place to a new one.
    fn evict_one_idle(&self) {
        let victim = {
            let mut idle = self.idle.lock();
            let oldest = idle
                .iter()
                .flat_map(|(key, list)| {
                    list.iter().enumerate().map(move |(i, c)| (c.since, key, i))
                })
                .min_by_key(|(since, _, _)| *since)
                .map(|(_, key, i)| (key.clone(), i));
            oldest.and_then(|(key, i)| idle.get_mut(&key).map(|list| list.swap_remove(i)))
        };
        drop(victim);
    }

    /// Cleans a returned connection and keeps it idle, or closes it when cleaning fails.
    async fn give_back(
        self: Arc<Self>,
        key: PoolKey,
        mut conn: BackendConn,
        permit: OwnedSemaphorePermit,
    ) {
        let clean = async {
            if !conn.reset().await? {
                return Ok::<bool, BackendError>(false);
            }
            // COM_RESET_CONNECTION keeps the schema; learn it so leases can match on it.
            match conn.query_scalar("SELECT DATABASE()").await? {
                Ok(schema) => conn.schema = schema,
                Err(_) => return Ok(false),
            }
            Ok(true)
        };
        match tokio::time::timeout(self.cfg.connect_timeout, clean).await {
            Ok(Ok(true)) => {
                Stats::incr(&self.stats.backend_resets);
                self.idle.lock().entry(key).or_default().push(Idle {
                    conn,
                    permit,
                    since: Instant::now(),
                });
            }
            other => {
                tracing::debug!(server = %self.server.name, ?other, "closing backend connection that could not be reset");
            }
        }
    }

    /// Closes idle connections that expired or were closed by the server, and opens
    /// connections up to `min_idle` for the kinds clients use.
    async fn maintain_once(self: &Arc<Self>) {
        let expired: Vec<Idle> = {
            let mut idle = self.idle.lock();
            let mut out = Vec::new();
            for list in idle.values_mut() {
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
            out
        };
        drop(expired);
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
            let have = self.idle.lock().get(&key).map_or(0, Vec::len);
            for _ in have..self.cfg.min_idle as usize {
                let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                    return;
                };
                match self.open(&key, schema.as_deref()).await {
                    Ok(conn) => self.idle.lock().entry(key.clone()).or_default().push(Idle {
                        conn,
                        permit,
                        since: Instant::now(),
                    }),
                    Err(_) => return,
                }
            }
        }
    }
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

/// The servers sessions are spread over. Until routing exists, servers are treated as
/// equivalent: new sessions go round-robin, skipping servers that can't be reached.
pub struct Pools {
    pub servers: Vec<Arc<ServerPool>>,
    next: AtomicUsize,
}

impl Pools {
    pub fn new(servers: Vec<Arc<ServerPool>>) -> Pools {
        Pools {
            servers,
            next: AtomicUsize::new(0),
        }
    }

    /// Leases from the next server in turn; on an error that proves nothing was sent
    /// (connect failure, pool timeout), tries the others before giving up.
    pub async fn lease(
        &self,
        key: &PoolKey,
        schema: Option<&[u8]>,
    ) -> Result<PooledConn, BackendError> {
        let n = self.servers.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last = None;
        for i in 0..n {
            let pool = &self.servers[(start + i) % n];
            match pool.lease(key, schema).await {
                Ok(c) => return Ok(c),
                Err(e) if e.retry_safe() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("at least one server is configured"))
    }
}

/// What a server says about itself before any login.
pub async fn probe(server: &Server, timeout: Duration) -> Option<InitialHandshake> {
    let attempt = async {
        let mut tcp = tokio::net::TcpStream::connect(&server.address).await.ok()?;
        let mut buf = bytes::BytesMut::with_capacity(512);
        loop {
            if let Some(p) = take_packet(&mut buf, 64 * 1024).ok()? {
                return InitialHandshake::parse(&p.payload).ok();
            }
            if tcp.read_buf(&mut buf).await.ok()? == 0 {
                return None;
            }
        }
    };
    tokio::time::timeout(timeout, attempt).await.ok().flatten()
}
