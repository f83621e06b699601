//! The accept side: listeners, the client-connection limit, one task per client, and
//! the process lifecycle (signals, reload of users and servers, graceful shutdown).

pub mod handover;
mod listener;
use listener::start_listeners;
mod moved;
pub mod upgrade;
use upgrade::Upgrades;
mod stop;

use crate::auth::BackendCredentials;
use crate::auth::Users;
use crate::backend::{probe, Server, ServerPool};
use crate::cache::QueryCache;
use crate::config::{Config, Overrides};
use crate::frontend::{self, Frontend, Identity};
use crate::router::Router;
use crate::shutdown::{self, Drain, Shutdown};
use crate::stats::Stats;
use anyhow::Context;
use handover::Named;
use sd_notify::NotifyState;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use stop::{notify_systemd, offer_listeners, shut_down, take_over, until_stopped, Signals, Stop};
use tokio::sync::Semaphore;

/// Builds the router for `config`, reusing the pool (and what the monitor knew) of any
/// server whose settings did not change, so that its idle connections survive a reload.
fn build_router(
    config: &Config,
    stats: &Arc<Stats>,
    previous: Option<&Router>,
) -> anyhow::Result<Arc<Router>> {
    let mut members = Vec::new();
    for s in &config.servers {
        let server = Server::from_config(&s.backend_spec(), &config.pool)
            .with_context(|| format!("server {}", s.display_name()))?;
        let reused = previous.and_then(|p| {
            p.members.iter().find(|old| {
                let o = &old.pool.server;
                o.name == server.name
                    && o.endpoint == server.endpoint
                    && o.tls == server.tls
                    && o.max_connections == server.max_connections
                    && o.stmts.configured() == server.stmts.configured()
                    && s.tls_ca.is_none()
            })
        });
        let pool = match reused {
            Some(m) => m.pool.clone(),
            None => ServerPool::new(Arc::new(server), config.pool.clone(), stats.clone()),
        };
        members.push(Router::member(
            pool,
            s,
            &config.routing,
            reused.map(|m| m.as_ref()),
        ));
    }
    let router = Router::new(
        members,
        config.routing.clone(),
        config.monitor.clone(),
        config.failover.clone(),
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    if let Some(p) = previous {
        // Keep the writer across a reload unless the monitor disagrees.
        if let Some(w) = p.writer() {
            if let Some(m) = router.by_name(w.name()) {
                router.set_writer(Some(m.clone()));
                router.elect();
            }
        }
    }
    Ok(Arc::new(router))
}

/// The account the monitor logs in with: `[monitor]`, else the first user's backend
/// account, else `[accounts]`'s.
fn monitor_creds(config: &Config) -> Option<Arc<BackendCredentials>> {
    if let (Some(u), Some(p)) = (&config.monitor.user, &config.monitor.password) {
        return Some(Arc::new(BackendCredentials::new(u, p.clone())));
    }
    if let Some(u) = config.users.first() {
        return Some(Arc::new(BackendCredentials::new(
            u.backend_user.clone().unwrap_or_else(|| u.name.clone()),
            u.backend_password.clone().or_else(|| u.password.clone())?,
        )));
    }
    let (u, p) = (
        config.accounts.user.as_ref()?,
        config.accounts.password.as_ref()?,
    );
    Some(Arc::new(BackendCredentials::new(u, p.clone())))
}

/// The accounts loader's settings: `[accounts]`, with `[monitor]`'s account as fallback.
fn accounts_settings(config: &Config) -> crate::auth::accounts::Settings {
    crate::auth::accounts::Settings::from_config(
        &config.accounts,
        (
            config.monitor.user.as_ref(),
            config.monitor.password.as_ref(),
        ),
        !config.users.is_empty(),
    )
}

fn frontend_sections(config: &Config) -> frontend::Sections<'_> {
    frontend::Sections {
        listeners: &config.listeners,
        users: &config.users,
        accounts: accounts_settings(config),
        limits: &config.limits,
        protocol: &config.protocol,
        pool: &config.pool,
        analytics: &config.analytics,
    }
}

/// Checks every server once, then watches them (one task each) and the writer.
async fn start_monitor(router: &Arc<Router>, config: &Config, shutdown: Shutdown) {
    let Some(creds) = monitor_creds(config) else {
        tracing::warn!("no account for the monitor: servers are not checked");
        return;
    };
    if router.members.len() > 1 {
        crate::monitor::check_all_once(router, &creds).await;
        match router.writer() {
            Some(w) => tracing::info!(writer = w.name(), "servers checked"),
            None => tracing::warn!(
                "no server can take writes yet: writes wait up to failover.write_wait for one"
            ),
        }
    }
    crate::monitor::spawn(router, creds, shutdown);
}

/// Learns the version and capabilities clients should see from the first server that
/// answers, retrying in the background until one does.
async fn learn_identity(fe: Arc<Frontend>, announced: Option<String>) {
    loop {
        let router = fe.router.load_full();
        for pool in router.pools() {
            if let Some(hs) = probe(&pool.server, Duration::from_secs(2)).await {
                let identity = Identity {
                    version: announced.clone().unwrap_or_else(|| {
                        String::from_utf8_lossy(&hs.server_version).into_owned()
                    }),
                    caps: hs.capabilities,
                    mariadb_caps: hs.mariadb_caps,
                    charset: hs.charset,
                };
                tracing::info!(server = %pool.server.name, version = %identity.version, "learnt backend identity");
                fe.identity.store(Arc::new(identity));
                return;
            }
        }
        tracing::warn!("no backend answered yet; retrying in 2s");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Where the first listener takes clients: an address, or a socket's path.
fn first_listener(config: &Config) -> Option<String> {
    config.listeners.first().map(|l| match &l.socket {
        Some(path) => path.display().to_string(),
        None => l.address.clone(),
    })
}

/// The name this instance's cross-shard transactions carry: `[sharding] instance`, or
/// the host and the first listener.
fn xa_instance(config: &Config) -> String {
    config
        .sharding
        .instance
        .clone()
        .unwrap_or_else(|| crate::shard::xa::default_instance(first_listener(config).as_deref()))
}

/// Joins the other instances in front of the same servers (`[fleet]`), unless turned
/// off or there is no account to reach the servers with. Fails when the key to sign
/// messages with can't be read: running unsigned instead would trust anyone.
fn start_fleet(fe: &Arc<Frontend>, config: &Config, shutdown: &Shutdown) -> anyhow::Result<()> {
    if !config.fleet.enabled {
        return Ok(());
    }
    let Some(creds) = monitor_creds(config) else {
        return Ok(());
    };
    let key = config
        .fleet
        .key(&config.admin)
        .map_err(anyhow::Error::msg)?;
    let listen = first_listener(config);
    let identity = crate::fleet::Identity {
        name: config
            .fleet
            .instance
            .clone()
            .unwrap_or_else(|| crate::shard::xa::default_instance(listen.as_deref())),
        address: listen.unwrap_or_default(),
        config_hash: crate::fleet::config_hash(&format!("{config:?}")),
        xa_instance: xa_instance(config),
    };
    let source = fe.clone();
    let fleet = crate::fleet::Fleet::new(
        &config.fleet,
        identity,
        Arc::new(move || source.router.load_full()),
        creds.clone(),
        key,
    );
    for router in fe.routers() {
        let _ = router.coordination.set(fleet.clone());
    }
    let _ = fe.fleet.set(fleet.clone());
    fleet.start(
        frontend::FleetLocal::new(fe.clone(), Some(creds)),
        shutdown.clone(),
    );
    Ok(())
}

/// Runs Sluice until SIGTERM or SIGINT, then drains.
pub async fn run(
    config: Config,
    config_path: Option<PathBuf>,
    overrides: Overrides,
) -> anyhow::Result<()> {
    let stats = Arc::new(Stats::default());
    let fe = build_frontend(&config, &stats)?;
    if let (true, Some(cache)) = (overrides.take_over, &fe.cache) {
        // From before any client is served: the entries of the process before are
        // taken only if nothing they read was written here meanwhile.
        cache.record_writes();
    }
    let router = fe.router.load_full();
    learn_identity_soon(&fe, &config).await;

    let (trigger, shutdown) = shutdown::channel();
    start_monitors(&fe, &router, &config, &shutdown).await;
    start_fleet(&fe, &config, &shutdown)?;
    start_accounts(&fe, &router, &shutdown).await;
    let drain = Drain::new();
    let limit = Arc::new(Semaphore::new(
        config.limits.max_client_connections as usize,
    ));
    if let (Some(cache), Some(binlog)) = (&fe.cache, &config.cache.binlog) {
        if binlog.enabled {
            follow_binlogs(&fe, cache, binlog, &shutdown)?;
        }
    }
    let upgrades = Arc::new(Upgrades::new(
        &fe,
        config.handover.socket.is_some(),
        config.handover.ready_timeout,
    ));
    let admin = admin_state(
        &fe,
        &config,
        config_path.clone(),
        &stats,
        &overrides,
        &shutdown,
        &upgrades,
    );
    let mut inherited = take_over(&config, &overrides).await?;
    fe.continue_ids(inherited.first_id());
    let admin_name = Named::Admin(config.admin.address.clone());
    let admin_socket = inherited.claim(&admin_name);
    let admin = crate::admin::start(&config.admin, admin, shutdown.clone(), admin_socket).await?;
    let sampler = fe.analytics.enabled().then(|| {
        let gauges = {
            let fe = fe.clone();
            Box::new(move || fe.gauges())
        };
        tokio::spawn(crate::analytics::history::run(
            fe.analytics.clone(),
            gauges,
            shutdown.clone(),
        ))
    });
    let (accept_tasks, mut sockets) =
        start_listeners(&fe, &config, &limit, &shutdown, &drain, &mut inherited).await?;
    if let Some(a) = &admin {
        sockets.push((admin_name, a.socket.try_clone()?));
    }
    let signals = Signals::listen()?;
    // Accepting on every listener: the previous process, if any, may stop now, and the
    // service is up.
    let handed_over = offer_listeners(&config, &upgrades, sockets, overrides.take_over);
    match inherited.ready()? {
        // The old process tells systemd this one is its main process now: a READY=1
        // from here, not the main process yet, would be refused.
        Some(from_old) => moved::receive(&fe, from_old, &limit, &shutdown, &drain),
        None => notify_systemd(&[NotifyState::Ready]),
    }
    if let Some(cache) = &fe.cache {
        if !config.cache.log_interval.is_zero() {
            tokio::spawn(log_cache(
                cache.clone(),
                config.cache.log_interval,
                shutdown.clone(),
            ));
        }
    }

    let stop = until_stopped(
        signals,
        &fe,
        &stats,
        config_path.as_deref(),
        &overrides,
        &shutdown,
        (handed_over, &upgrades),
    )
    .await?;
    // After a hand-over the service goes on in the successor: how systemd learns its
    // process is for the change that makes reload a hand-over.
    // After a hand-over, the sessions here move or drain first, within their bound.
    let handed_over = match stop {
        Stop::Signal => {
            notify_systemd(&[NotifyState::Stopping]);
            None
        }
        Stop::HandedOver(successor) => {
            // `systemctl reload` ran `sluice upgrade`: the service goes on in the
            // successor.
            if let Some(pid) = successor.pid {
                notify_systemd(&[NotifyState::MainPid(pid), NotifyState::Ready]);
            }
            Some((config.handover.drain_timeout, successor, &fe))
        }
    };
    let grace = config.limits.shutdown_grace;
    shut_down(
        (grace, trigger),
        accept_tasks,
        drain,
        handed_over,
        sampler,
        &stats,
    )
    .await;
    Ok(())
}

/// The frontend over the configured servers (each shard's with `[[shards]]`), with
/// its query cache, and the cache warm-up queued.
fn build_frontend(config: &Config, stats: &Arc<Stats>) -> anyhow::Result<Arc<Frontend>> {
    let shards = build_shards(config, stats)?;
    let router = match &shards {
        Some(s) => s.routers[s.map.default_shard()].clone(),
        None => build_router(config, stats, None)?,
    };
    let cache = if config.cache.enabled() {
        let cache = QueryCache::new(&config.cache)
            .map_err(|p| anyhow::anyhow!("cache rules: {}", p.join("; ")))?;
        tracing::info!(
            rules = config.cache.rules.len(),
            budget_bytes = config.cache.max_bytes,
            "query cache on"
        );
        Some(cache)
    } else {
        None
    };
    let mut fe = Frontend::new(frontend_sections(config), router, stats.clone(), cache);
    fe.shards = shards;
    fe.tracer = crate::trace::Tracer::start(&config.tracing, stats.clone());
    fe.slow_statement = config.log.slow_statement;
    if let Some(t) = &fe.tracer {
        let c = t.config();
        tracing::info!(
            endpoint = c.endpoint.as_deref().unwrap_or_default(),
            sample_ratio = c.sample_ratio,
            "tracing on"
        );
    }
    let fe = Arc::new(fe);
    if let Some(file) = &config.cache.warm_file {
        let groups =
            frontend::warm::load(file).map_err(|e| anyhow::anyhow!("cache.warm_file: {e}"))?;
        tracing::info!(
            groups = groups.len(),
            "cache warm-up queued: each user's queries run when its first client logs in"
        );
        fe.warm_later(groups);
    }
    Ok(fe)
}

/// The shards and a router for each, with `[[shards]]`.
fn build_shards(
    config: &Config,
    stats: &Arc<Stats>,
) -> anyhow::Result<Option<Arc<crate::shard::Shards>>> {
    let Some(map) = config.shard_map() else {
        return Ok(None);
    };
    let map = map.map_err(|e| anyhow::anyhow!("sharding: {}", e.join("; ")))?;
    let routers = (0..config.shards.len())
        .map(|i| build_router(&config.for_shard(i), stats, None))
        .collect::<anyhow::Result<Vec<_>>>()?;
    tracing::info!(shards = routers.len(), "sharding on");
    let instance = xa_instance(config);
    Ok(Some(Arc::new(crate::shard::Shards::new(
        map,
        routers,
        config.sharding.cross_shard,
        &instance,
    ))))
}

/// Learns the servers' identity in the background, after giving the first probe a
/// moment so that the first clients see the real server version.
async fn learn_identity_soon(fe: &Arc<Frontend>, config: &Config) {
    let announced = config.protocol.server_version.clone();
    let identity = tokio::spawn(learn_identity(fe.clone(), announced));
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while !identity.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Checks and watches the servers: the one cluster's, or each shard's with the
/// watch on shard keys and, for XA, the recovery of orphaned transactions.
async fn start_monitors(
    fe: &Arc<Frontend>,
    router: &Arc<Router>,
    config: &Config,
    shutdown: &Shutdown,
) {
    let Some(s) = &fe.shards else {
        return start_monitor(router, config, shutdown.clone()).await;
    };
    for (i, r) in s.routers.iter().enumerate() {
        start_monitor(r, &config.for_shard(i), shutdown.clone()).await;
    }
    let Some(creds) = monitor_creds(config) else {
        return;
    };
    crate::monitor::shard_keys::spawn(s.clone(), creds.clone(), shutdown.clone());
    if s.cross_shard == crate::shard::config::CrossShard::Xa {
        let fe = fe.clone();
        let orphans: crate::monitor::xa_recovery::Orphans =
            Arc::new(move || fe.fleet.get().map(|f| f.orphaned_xa()).unwrap_or_default());
        crate::monitor::xa_recovery::spawn(s.clone(), creds, orphans, shutdown.clone());
    }
}

/// Reads the servers' accounts once, before clients are accepted, then keeps reading
/// them in the background.
async fn start_accounts(fe: &Arc<Frontend>, router: &Arc<Router>, shutdown: &Shutdown) {
    if fe.accounts.enabled() {
        if let Some(server) = crate::auth::accounts::source_server(router) {
            match fe.accounts.reload(server).await {
                Ok(n) => tracing::info!(accounts = n, "read the servers' accounts"),
                Err(e) => {
                    tracing::warn!(error = %e, "reading the servers' accounts failed; retrying")
                }
            }
        }
    }
    let source_fe = fe.clone();
    let pools_fe = fe.clone();
    tokio::spawn(crate::auth::accounts::run(
        fe.accounts.clone(),
        Box::new(move || crate::auth::accounts::source_server(&source_fe.router.load())),
        // A dropped account's idle connections would keep its rights on the server.
        Box::new(move |dropped| {
            let closed: usize = dropped
                .iter()
                .map(|user| pools_fe.close_idle_of(user))
                .sum();
            tracing::info!(accounts = ?dropped, closed, "accounts dropped on the servers: their idle connections closed");
        }),
        shutdown.clone(),
    ));
}

/// What the admin API works on: the frontend's parts, and a reload of `config_path`.
fn admin_state(
    fe: &Arc<Frontend>,
    config: &Config,
    config_path: Option<PathBuf>,
    stats: &Arc<Stats>,
    overrides: &Overrides,
    shutdown: &Shutdown,
    upgrades: &Arc<Upgrades>,
) -> crate::admin::AdminState {
    crate::admin::AdminState {
        cache: fe.cache.as_ref().map(|_| {
            Arc::new(frontend::CacheHandle {
                fe: fe.clone(),
                warm_file: config.cache.warm_file.clone(),
            }) as Arc<dyn crate::admin::CacheAdmin>
        }),
        sessions: Some(Arc::new(frontend::SessionsHandle { fe: fe.clone() })),
        servers: Some(Arc::new(frontend::ServersHandle {
            fe: fe.clone(),
            creds: monitor_creds(config),
        })),
        analytics: Some(Arc::new(frontend::AnalyticsHandle { fe: fe.clone() })),
        fleet: fe
            .fleet
            .get()
            .map(|f| f.clone() as Arc<dyn crate::admin::FleetAdmin>),
        reload: config_path.map(|path| {
            let (fe, stats, overrides, shutdown) = (
                fe.clone(),
                stats.clone(),
                overrides.clone(),
                shutdown.clone(),
            );
            Arc::new(move || reload(&fe, &stats, Some(&path), &overrides, &shutdown))
                as crate::admin::Reload
        }),
        upgrade: config.handover.socket.is_some().then(|| {
            let upgrades = upgrades.clone();
            Arc::new(move || match upgrades.run() {
                o @ upgrade::Outcome::HandedOver { .. } => Ok(o.to_json()),
                upgrade::Outcome::Failed(e) => Err(vec![e]),
            }) as crate::admin::Reload
        }),
        stats: stats.clone(),
    }
}

/// SIGHUP (and `POST /v1/config/reload`): reads the configuration again and swaps
/// users, servers and cache rules. Listener, limit and logging changes need a restart.
/// Err: every problem found; nothing changed then.
fn reload(
    fe: &Arc<Frontend>,
    stats: &Arc<Stats>,
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    shutdown: &Shutdown,
) -> Result<serde_json::Value, Vec<String>> {
    let Some(path) = path else {
        return Err(vec![
            "Sluice was started without a configuration file".into()
        ]);
    };
    let mut config = Config::load(path).map_err(|e| vec![format!("{e:#}")])?;
    let mut problems = config.apply(overrides).err().unwrap_or_default();
    problems.extend(config.validate());
    if !problems.is_empty() {
        return Err(problems);
    }
    if fe.shards.is_some() {
        // Each shard's router was built from its own servers: rebuilding them here would
        // need the placement to move with them.
        fe.users.store(Arc::new(Users::from_config(&config.users)));
        fe.accounts.set_settings(accounts_settings(&config));
        tracing::warn!("users reloaded; with [[shards]], servers and shards change at a restart");
        return Ok(serde_json::json!({
            "reloaded": true,
            "users": config.users.len(),
            "servers": config.servers.len(),
            "notes": ["with [[shards]], servers and shards change at a restart"],
        }));
    }
    let previous = fe.router.load_full();
    let router =
        build_router(&config, stats, Some(&previous)).map_err(|e| vec![format!("{e:#}")])?;
    if let Some(cache) = &fe.cache {
        // First of the swaps: if the rules are refused, nothing has changed.
        cache.set_rules(config.cache.rules.clone()).map_err(|p| {
            p.into_iter()
                .map(|p| format!("cache rules: {p}"))
                .collect::<Vec<_>>()
        })?;
    }
    if let Some(creds) = monitor_creds(&config) {
        crate::monitor::spawn(&router, creds, shutdown.clone());
    }
    if let Some(fleet) = fe.fleet.get() {
        let _ = router.coordination.set(fleet.clone());
    }
    fe.router.store(router);
    fe.users.store(Arc::new(Users::from_config(&config.users)));
    fe.accounts.set_settings(accounts_settings(&config));
    let mut notes = Vec::new();
    if fe.cache.is_none() && config.cache.enabled() {
        notes.push("cache rules added: a restart is needed to turn the cache on".to_owned());
        tracing::warn!("cache rules added: a restart is needed to turn the cache on");
    }
    tracing::info!(
        users = config.users.len(),
        servers = config.servers.len(),
        "configuration reloaded"
    );
    Ok(serde_json::json!({
        "reloaded": true,
        "users": config.users.len(),
        "servers": config.servers.len(),
        "notes": notes,
    }))
}

/// SIGHUP's reload, with its outcome in the log.
fn reload_logged(
    fe: &Arc<Frontend>,
    stats: &Arc<Stats>,
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    shutdown: &Shutdown,
) {
    if let Err(problems) = reload(fe, stats, path, overrides, shutdown) {
        for p in &problems {
            tracing::error!(problem = %p, "reload refused; keeping the running configuration");
        }
    }
}

/// Binlog readers that keep the cache right about writes made around Sluice: one for
/// the cluster, or one per shard, each following its writer through failovers.
fn follow_binlogs(
    fe: &Arc<Frontend>,
    cache: &Arc<QueryCache>,
    binlog: &crate::binlog::BinlogConfig,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let routers: Vec<Arc<crate::router::Router>> = match &fe.shards {
        Some(s) => s.routers.clone(),
        None => vec![fe.router.load_full()],
    };
    for (i, router) in routers.into_iter().enumerate() {
        let servers: Vec<Arc<Server>> = router.pools().map(|p| p.server.clone()).collect();
        let server = binlog
            .pick_server(&servers)
            .context("cache.binlog.server names no server")?;
        let status = Arc::new(crate::binlog::BinlogStatus::new());
        cache.follow_binlog(status.clone());
        let invalidator = Arc::new(crate::cache::invalidation::BinlogInvalidator::new(
            cache.clone(),
        ));
        let router_now: RouterNow = match &fe.shards {
            Some(shards) => {
                let shards = shards.clone();
                Box::new(move || shards.routers[i].clone())
            }
            None => {
                let fe = fe.clone();
                Box::new(move || fe.router.load_full())
            }
        };
        let sink = Arc::new(crate::analytics::BinlogTee {
            analytics: fe.analytics.clone(),
            inner: Arc::new(FillFloor {
                router: router_now,
                inner: invalidator,
            }),
        });
        // Unless a server is named, the reader follows the writer.
        let source: Option<crate::binlog::ServerSource> = match (&binlog.server, &fe.shards) {
            (Some(_), _) => None,
            (None, Some(shards)) => {
                let shards = shards.clone();
                Some(Box::new(move || {
                    shards.routers[i].writer().map(|w| w.pool.server.clone())
                }))
            }
            (None, None) => {
                let fe = fe.clone();
                Some(Box::new(move || {
                    fe.router.load().writer().map(|w| w.pool.server.clone())
                }))
            }
        };
        tokio::spawn(crate::binlog::run(
            server,
            source,
            binlog.clone(),
            sink,
            status,
            shutdown.clone(),
        ));
    }
    Ok(())
}

/// The router the binlog reader's transactions are noted on (a shard's, or the one in
/// use now: a reload replaces it).
type RouterNow = Box<dyn Fn() -> Arc<crate::router::Router> + Send + Sync>;

/// Notes each transaction the binlog reader reports on the router before the cache
/// drops what it changed, so that a cache fill on a replica waits for the replica to
/// have it (`Router::fill_floor`).
struct FillFloor {
    router: RouterNow,
    inner: Arc<dyn crate::binlog::BinlogSink>,
}

impl crate::binlog::BinlogSink for FillFloor {
    fn changed(&self, batch: crate::binlog::Batch) {
        let gtid = batch
            .gtid
            .as_deref()
            .and_then(crate::router::gtid::GtidPos::parse);
        if let Some(g) = gtid {
            (self.router)().note_binlog(&g);
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

/// The cache's counters in the log at an interval.
async fn log_cache(cache: Arc<QueryCache>, every: Duration, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => tracing::info!("query cache {}", cache.summary()),
            _ = shutdown.stopping() => return,
        }
    }
}
