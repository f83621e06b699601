//! Client side of the request path: the login exchange ([`login`]), then the command
//! loop ([`session`]) that classifies each command and relays it to the session's
//! backend connection, streaming the response back packet by packet.

mod analytics_admin;
mod attributes;
mod cache_admin;
mod client;
pub mod config;
mod fleet_local;
mod login;
mod servers_admin;
mod session;
mod sessions_admin;
pub mod warm;
pub use fleet_local::FleetLocal;

pub use analytics_admin::AnalyticsHandle;
pub use cache_admin::CacheHandle;
pub use client::ClientConn;
pub use servers_admin::ServersHandle;
pub use session::mux::{MuxStats, PinReason};
pub use session::{arrive, run};
pub use sessions_admin::SessionsHandle;

use crate::auth::config::UserConfig;
use crate::auth::{RsaKey, Users};
use crate::backend::config::PoolConfig;
use crate::backend::ConnParams;
use crate::cache::QueryCache;
use crate::router::Router;
use crate::stats::Stats;
use arc_swap::ArcSwap;
use config::{LimitsConfig, ListenerConfig, ProtocolConfig};
use parking_lot::Mutex;
use sluice_wire::CapabilityFlags;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// Capabilities Sluice can honour towards clients. Wire-format bits are further limited
/// to what the backends support, since responses are forwarded as the server wrote them.
pub const SUPPORTED_CAPS: u32 = CapabilityFlags::LONG_PASSWORD
    | CapabilityFlags::FOUND_ROWS
    | CapabilityFlags::LONG_FLAG
    | CapabilityFlags::CONNECT_WITH_DB
    | CapabilityFlags::IGNORE_SPACE
    | CapabilityFlags::PROTOCOL_41
    | CapabilityFlags::INTERACTIVE
    | CapabilityFlags::TRANSACTIONS
    | CapabilityFlags::SECURE_CONNECTION
    | CapabilityFlags::MULTI_STATEMENTS
    | CapabilityFlags::MULTI_RESULTS
    | CapabilityFlags::PS_MULTI_RESULTS
    | CapabilityFlags::PLUGIN_AUTH
    | CapabilityFlags::CONNECT_ATTRS
    | CapabilityFlags::PLUGIN_AUTH_LENENC_CLIENT_DATA
    | CapabilityFlags::SESSION_TRACK
    | CapabilityFlags::DEPRECATE_EOF;

/// MariaDB extended capabilities Sluice can honour: content-only changes.
pub const MARIADB_SUPPORTED_CAPS: u32 = sluice_wire::flags::mariadb::EXTENDED_TYPE_INFO;

/// What clients are told about "the server": learnt from the first backend.
#[derive(Clone, Debug)]
pub struct Identity {
    pub version: String,
    pub caps: CapabilityFlags,
    /// The backend's MariaDB extended capabilities (zero for MySQL).
    pub mariadb_caps: u32,
    pub charset: u8,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            version: "5.5.5-10.11.0-MariaDB-sluice".into(),
            caps: CapabilityFlags(SUPPORTED_CAPS),
            mariadb_caps: 0,
            charset: 45,
        }
    }
}

/// A session as KILL and the admin interface see it.
#[derive(Clone)]
pub struct SessionEntry {
    pub user: String,
    /// The backend login its connections use: what Sluice stops them with.
    pub login: Arc<crate::auth::BackendCredentials>,
    pub client: crate::stream::Peer,
    pub multiplexed: bool,
    /// The client's connection attributes (what the server would show for it).
    pub attributes: Arc<sluice_wire::handshake::Attributes>,
    /// Told to end (KILL of a session that holds no connection).
    pub kill: Arc<tokio::sync::Notify>,
    pub live: Arc<SessionLive>,
}

/// What changes with every statement of a multiplexed session: kept in atomics the
/// session writes without taking the registry's lock.
#[derive(Default)]
pub struct SessionLive {
    attached: std::sync::atomic::AtomicBool,
    thread_id: AtomicU32,
    /// 0: not pinned; else 1 + the reason's index (`reason as u8`, as in
    /// [`PinReason::ALL`]).
    pinned: std::sync::atomic::AtomicU8,
    /// The server of the connection held now, or last.
    server: Mutex<Option<Arc<crate::backend::Server>>>,
    /// Another session's KILL (of the connection) ended it: set before its statement in
    /// flight, if any, is stopped, so that the stopped statement's answer is never
    /// relayed.
    killed: std::sync::atomic::AtomicBool,
}

impl SessionLive {
    pub fn attach(&self, server: &Arc<crate::backend::Server>, thread_id: u32) {
        self.thread_id.store(thread_id, Ordering::Relaxed);
        self.attached.store(true, Ordering::Relaxed);
        let mut s = self.server.lock();
        if !s.as_ref().is_some_and(|old| Arc::ptr_eq(old, server)) {
            *s = Some(server.clone());
        }
    }

    pub fn detach(&self) {
        self.attached.store(false, Ordering::Relaxed);
    }

    pub fn pin(&self, reason: Option<PinReason>) {
        let code = reason.map_or(0, |r| 1 + r as u8);
        self.pinned.store(code, Ordering::Relaxed);
    }

    pub fn attached(&self) -> bool {
        self.attached.load(Ordering::Relaxed)
    }

    pub fn thread_id(&self) -> u32 {
        self.thread_id.load(Ordering::Relaxed)
    }

    /// Whether the session holds a connection to `server` now.
    pub fn attached_to(&self, server: &Arc<crate::backend::Server>) -> bool {
        self.attached()
            && self
                .server
                .lock()
                .as_ref()
                .is_some_and(|s| Arc::ptr_eq(s, server))
    }

    pub fn server_name(&self) -> Option<String> {
        self.server.lock().as_ref().map(|s| s.name.clone())
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }

    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    pub fn pinned(&self) -> Option<&'static str> {
        match self.pinned.load(Ordering::Relaxed) {
            0 => None,
            i => PinReason::ALL.get(i as usize - 1).map(|r| r.as_str()),
        }
    }
}

/// The configuration sections the frontend is built from. The accounts loader's
/// settings come built, since `[accounts]` and `[monitor]` decide them together.
pub struct Sections<'a> {
    pub listeners: &'a [ListenerConfig],
    pub users: &'a [UserConfig],
    pub accounts: crate::auth::accounts::Settings,
    pub limits: &'a LimitsConfig,
    pub protocol: &'a ProtocolConfig,
    pub pool: &'a PoolConfig,
    pub analytics: &'a crate::analytics::AnalyticsConfig,
}

/// State every session shares. Reloadable parts are swapped whole.
pub struct Frontend {
    pub users: ArcSwap<Users>,
    /// The servers' own accounts, for users `[[users]]` does not list.
    pub accounts: Arc<crate::auth::accounts::ServerAccounts>,
    pub router: ArcSwap<Router>,
    /// With `[[shards]]`: every shard's router (`router` is the default shard's).
    pub shards: Option<Arc<crate::shard::Shards>>,
    pub identity: ArcSwap<Identity>,
    pub limits: LimitsConfig,
    pub protocol: ProtocolConfig,
    pub pool_config: PoolConfig,
    pub mux_stats: MuxStats,
    /// Client connections per user, for the per-user limit.
    user_connections: Mutex<HashMap<String, u32>>,
    pub stats: Arc<Stats>,
    rsa: OnceLock<Option<Arc<RsaKey>>>,
    rsa_path: Option<std::path::PathBuf>,
    pub sessions: Mutex<HashMap<u32, SessionEntry>>,
    /// Clients' connection attributes, one copy of each distinct set.
    attribute_sets: attributes::AttributeSets,
    next_id: AtomicU32,
    /// The other Sluice instances in front of the same servers, once joined.
    pub fleet: OnceLock<Arc<crate::fleet::Fleet>>,
    /// The query cache, when rules are configured.
    pub cache: Option<Arc<QueryCache>>,
    /// Per-statement statistics, history and the cache advisor.
    pub analytics: Arc<crate::analytics::Analytics>,
    /// Wire format of the latest client of each user: what warming keys entries by.
    client_params: Mutex<HashMap<String, ConnParams>>,
    /// Warm-up groups waiting for their user's first client.
    warm_pending: Mutex<Vec<warm::WarmGroup>>,
    /// After a hand-over: where sessions leave for the successor process.
    pub departures: Mutex<Option<std::sync::mpsc::Sender<Departure>>>,
    /// With `[tracing]`: where statements' spans go.
    pub tracer: Option<Arc<crate::trace::Tracer>>,
    /// `[log] slow_statement`.
    pub slow_statement: Option<std::time::Duration>,
}

/// A session leaving for the successor process at a hand-over: its state, as the
/// successor's `session::arrive` reads it, and its client's socket.
pub struct Departure {
    pub parcel: Vec<u8>,
    pub socket: std::os::fd::OwnedFd,
}

impl Frontend {
    /// Which Sluice session runs on each of `server`'s threads now, by thread id:
    /// `own` (thread, session) first, since the asking session's connection may not
    /// be shown as attached while it is multiplexed.
    pub fn sessions_on(
        &self,
        server: &Arc<crate::backend::Server>,
        own: (u32, u32),
    ) -> HashMap<u32, u32> {
        let mut ids: HashMap<u32, u32> = self
            .sessions
            .lock()
            .iter()
            .filter(|(_, e)| e.live.attached_to(server))
            .map(|(&id, e)| (e.live.thread_id(), id))
            .collect();
        ids.insert(own.0, own.1);
        ids
    }

    /// Users, limits and protocol settings come from `config`.
    pub fn new(
        config: Sections<'_>,
        router: Arc<Router>,
        stats: Arc<Stats>,
        cache: Option<Arc<QueryCache>>,
    ) -> Frontend {
        Frontend {
            users: ArcSwap::from_pointee(Users::from_config(config.users)),
            accounts: Arc::new(crate::auth::accounts::ServerAccounts::new(config.accounts)),
            router: ArcSwap::new(router),
            shards: None,
            identity: ArcSwap::from_pointee(Identity::default()),
            limits: config.limits.clone(),
            protocol: config.protocol.clone(),
            pool_config: config.pool.clone(),
            mux_stats: MuxStats::default(),
            user_connections: Mutex::new(HashMap::new()),
            stats,
            rsa: OnceLock::new(),
            rsa_path: config.listeners.iter().find_map(|l| l.rsa_key.clone()),
            sessions: Mutex::new(HashMap::new()),
            attribute_sets: Default::default(),
            next_id: AtomicU32::new(1),
            fleet: OnceLock::new(),
            cache,
            analytics: Arc::new(crate::analytics::Analytics::new(config.analytics)),
            client_params: Mutex::new(HashMap::new()),
            warm_pending: Mutex::new(Vec::new()),
            departures: Mutex::new(None),
            tracer: None,
            slow_statement: None,
        }
    }

    /// Every router: each shard's, or the one cluster's.
    pub fn routers(&self) -> Vec<Arc<Router>> {
        match &self.shards {
            Some(s) => s.routers.clone(),
            None => vec![self.router.load_full()],
        }
    }

    /// Closes the idle connections of account `user` on every server: it was dropped,
    /// and they would keep its rights there. Returns how many.
    pub fn close_idle_of(&self, user: &str) -> usize {
        self.routers()
            .iter()
            .flat_map(|r| r.pools())
            .map(|p| p.close_idle_of(user, |_| true))
            .sum()
    }

    /// Queues warm-up groups until a client of their user logs in.
    pub fn warm_later(&self, groups: Vec<warm::WarmGroup>) {
        self.warm_pending.lock().extend(groups);
    }

    pub fn client_params(&self, user: &str) -> Option<ConnParams> {
        self.client_params.lock().get(user).cloned()
    }

    /// A client of `user` logged in with `params`: remember them, and warm what was
    /// waiting for this user.
    pub(crate) fn client_logged_in(self: &Arc<Self>, user: &str, params: &ConnParams) {
        {
            let mut seen = self.client_params.lock();
            if seen.get(user) != Some(params) {
                seen.insert(user.to_owned(), params.clone());
            }
        }
        let groups: Vec<warm::WarmGroup> = {
            let mut pending = self.warm_pending.lock();
            if pending.is_empty() {
                return;
            }
            let (mine, others) = pending.drain(..).partition(|g| g.user == user);
            *pending = others;
            mine
        };
        if groups.is_empty() {
            return;
        }
        let fe = self.clone();
        let params = params.clone();
        tokio::spawn(async move {
            let mut report = warm::WarmReport::default();
            for g in &groups {
                warm::warm_group(&fe, g, params.clone(), &mut report).await;
            }
            tracing::info!(
                stored = report.stored,
                skipped = report.skipped,
                failed = report.failed,
                problems = ?report.problems,
                "cache warmed"
            );
        });
    }

    /// Counts a client of `user` in, unless that makes more than `max` (0: no limit).
    pub(crate) fn user_connected(&self, user: &str, max: u32) -> bool {
        let mut counts = self.user_connections.lock();
        let n = counts.entry(user.to_owned()).or_default();
        if max > 0 && *n >= max {
            return false;
        }
        *n += 1;
        true
    }

    pub(crate) fn user_disconnected(&self, user: &str) {
        let mut counts = self.user_connections.lock();
        if let Some(n) = counts.get_mut(user) {
            *n -= 1;
            if *n == 0 {
                counts.remove(user);
            }
        }
    }

    /// A session id unique across the fleet: the instance's slot in the top byte, its
    /// own count below (a lone instance's ids are 1, 2, 3...), never one in use here.
    /// The id counter as it stands: a successor goes on from here, so that the ids of
    /// the sessions it takes over are not given again.
    pub fn id_counter(&self) -> u32 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Goes on from the process before's id counter (a hand-over).
    pub fn continue_ids(&self, from: u32) {
        self.next_id.fetch_max(from, Ordering::Relaxed);
    }

    pub fn next_connection_id(&self) -> u32 {
        let prefix = self.fleet.get().map_or(0, |f| f.id_prefix());
        loop {
            let n = self.next_id.fetch_add(1, Ordering::Relaxed);
            let id = prefix | ((n.wrapping_sub(1) % crate::fleet::LOCAL_ID_MASK) + 1);
            if !self.sessions.lock().contains_key(&id) {
                return id;
            }
        }
    }

    /// The RSA key for `caching_sha2_password` without TLS: loaded or generated once.
    pub async fn rsa_key(self: &Arc<Self>) -> Option<Arc<RsaKey>> {
        if let Some(k) = self.rsa.get() {
            return k.clone();
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            me.rsa
                .get_or_init(|| {
                    let key = match &me.rsa_path {
                        Some(p) => RsaKey::load(p),
                        None => RsaKey::generate(),
                    };
                    key.map_err(
                        |e| tracing::error!(error = %e, "no RSA key for caching_sha2_password"),
                    )
                    .ok()
                    .map(Arc::new)
                })
                .clone()
        })
        .await
        .ok()
        .flatten()
    }

    /// Capabilities offered to clients of a listener, with the MariaDB extended ones.
    /// Behind MariaDB, Sluice presents itself as MariaDB does (no `CLIENT_LONG_PASSWORD`)
    /// so that MariaDB clients negotiate the extended type information they would get
    /// directly; extensions that change framing (progress reports, cached metadata,
    /// bulk execute) are never offered.
    pub fn advertised_caps(&self, listener: &ListenerConfig) -> (CapabilityFlags, u32) {
        let identity = self.identity.load();
        let backend = identity.caps.0;
        let mut caps = SUPPORTED_CAPS & (backend | !CapabilityFlags::WIRE_FORMAT);
        let mut mariadb_caps = 0;
        if backend & CapabilityFlags::LONG_PASSWORD == 0 {
            caps &= !CapabilityFlags::LONG_PASSWORD;
            mariadb_caps = identity.mariadb_caps & MARIADB_SUPPORTED_CAPS;
        }
        if self.protocol.local_infile && backend & CapabilityFlags::LOCAL_FILES != 0 {
            caps |= CapabilityFlags::LOCAL_FILES;
        }
        if listener.tls_cert.is_some() {
            caps |= CapabilityFlags::SSL;
        }
        (CapabilityFlags(caps), mariadb_caps)
    }
}
