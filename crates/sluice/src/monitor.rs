//! Monitor: one task per server checks it every `monitor.interval` (connect, then
//! `read_only`, GTID position, replication threads and lag, Galera state) and
//! publishes a [`ServerState`]; a server changes health only after several checks
//! agree. After each check the router elects the writer again. When the writer is
//! down and a replica can take over, [`failover`] promotes the most advanced one.

pub mod failover;
pub mod flow;
pub mod follow;
pub mod grants;
mod rejoin;
pub mod shard_keys;
pub mod writer_lock;
pub mod xa_recovery;

use crate::auth::BackendCredentials;
use crate::backend::{BackendConn, ConnParams};
use crate::error::{BackendError, Failed};
use crate::router::gtid::GtidPos;
use crate::router::{GaleraState, Health, Member, ReplicaState, Router};
use crate::shutdown::Shutdown;
use sluice_wire::CapabilityFlags;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

/// Parameters of the monitor's own connections: plain text protocol, no tracking.
pub(crate) fn params() -> ConnParams {
    ConnParams {
        wire_caps: CapabilityFlags::TRANSACTIONS,
        mariadb_caps: 0,
        charset: 45,
        track_state: false,
    }
}

/// Starts a checking task per member, and the failover task. They end with shutdown
/// or when the router is replaced by a reload.
pub fn spawn(router: &Arc<Router>, creds: Arc<BackendCredentials>, shutdown: Shutdown) {
    // A single server is the writer whatever it says: nothing to watch for.
    if router.members.len() < 2 {
        return;
    }
    for (i, _) in router.members.iter().enumerate() {
        tokio::spawn(watch(
            Arc::downgrade(router),
            i,
            creds.clone(),
            shutdown.clone(),
        ));
    }
    if router.members.len() > 1 {
        tokio::spawn(failover::watch(Arc::downgrade(router), creds, shutdown));
    }
}

/// Checks every member once, in parallel, bounded by the check timeout: the state
/// the first clients are routed by.
pub async fn check_all_once(router: &Arc<Router>, creds: &Arc<BackendCredentials>) {
    let mut set = tokio::task::JoinSet::new();
    for m in &router.members {
        let (m, creds, cfg) = (m.clone(), creds.clone(), router.monitor.clone());
        set.spawn(async move {
            let mut conn = None;
            let result = check(&m, &mut conn, &creds, cfg.timeout).await;
            let position = result.as_ref().ok().and_then(|o| o.gtid.clone());
            publish(&m, result, &mut Counters::default(), &cfg);
            (m, position)
        });
    }
    let seen = set.join_all().await;
    router.elect();
    for (m, position) in seen {
        if let Some(pos) = position {
            router.note_writer_position(&m, pos);
        }
    }
}

/// What a member's task carries from one check to the next: consecutive results, for
/// the health and lag hysteresis, and the last flow-control counters, which the next
/// check's figures are differences from.
#[derive(Default)]
struct Counters {
    failures: u32,
    successes: u32,
    in_lag: u32,
    flow: Option<flow::Sample>,
}

async fn watch(
    router: Weak<Router>,
    index: usize,
    creds: Arc<BackendCredentials>,
    mut shutdown: Shutdown,
) {
    let mut conn: Option<BackendConn> = None;
    let mut counters = Counters::default();
    loop {
        let (member, interval, timeout) = {
            let Some(r) = router.upgrade() else { return };
            (
                r.members[index].clone(),
                r.monitor.interval,
                r.monitor.timeout,
            )
        };
        let started = Instant::now();
        let result = tokio::select! {
            r = check(&member, &mut conn, &creds, timeout) => r,
            _ = shutdown.stopping() => return,
        };
        {
            let Some(r) = router.upgrade() else { return };
            let before = member.state.load().health;
            let position = result.as_ref().ok().and_then(|o| o.gtid.clone());
            publish(&member, result, &mut counters, &r.monitor);
            let after = member.state.load().health;
            if before != after {
                tracing::info!(server = member.name(), from = ?before, to = ?after, "server health changed");
            }
            r.elect();
            if let Some(pos) = position {
                r.note_writer_position(&member, pos);
            }
        }
        let next = interval.saturating_sub(started.elapsed());
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = shutdown.stopping() => return,
        }
    }
}

/// One check's findings, before hysteresis.
struct Observation {
    ping: Duration,
    read_only: bool,
    gtid: Option<GtidPos>,
    replica: Option<ReplicaState>,
    galera: Option<GaleraState>,
    /// A Galera node's flow-control counters as read.
    flow: Option<flow::Sample>,
    /// What the account lacks, read on a new connection only (grants change rarely,
    /// and a server re-reads them for a session only when it logs in).
    missing_privileges: Option<Vec<&'static str>>,
}

/// Connects if needed (reusing the last check's connection), then reads what routing
/// needs. Any failure closes the connection: the next check starts afresh.
async fn check(
    member: &Member,
    conn: &mut Option<BackendConn>,
    creds: &BackendCredentials,
    timeout: Duration,
) -> Result<Observation, String> {
    let started = Instant::now();
    let work = async {
        let mut missing = None;
        if conn.is_none() {
            let mut c = BackendConn::connect(member.pool.server.clone(), creds, &params(), None)
                .await
                .map_err(|e| e.to_string())?;
            missing = missing_privileges(&mut c).await;
            *conn = Some(c);
        }
        let c = conn.as_mut().expect("just connected");
        let mut o = observe(c).await?;
        o.missing_privileges = missing;
        Ok(o)
    };
    let result = match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    };
    match result {
        Ok(mut o) => {
            o.ping = started.elapsed();
            Ok(o)
        }
        Err(e) => {
            *conn = None;
            Err(e)
        }
    }
}

/// The needed privileges the monitor's account lacks on this server; `None` when its
/// grants could not be read (the check goes on: this is advice, not a condition).
async fn missing_privileges(c: &mut BackendConn) -> Option<Vec<&'static str>> {
    match c.query_column("SHOW GRANTS").await {
        Ok(lines) => {
            let lines: Vec<String> = lines
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect();
            Some(
                grants::missing(&lines)
                    .into_iter()
                    .map(|n| n.privilege)
                    .collect(),
            )
        }
        Err(Failed::Answered(e)) => {
            tracing::debug!(server = %c.server.name, error = %e.message, "SHOW GRANTS refused");
            None
        }
        Err(Failed::Broken(e)) => {
            tracing::debug!(server = %c.server.name, error = %e, "SHOW GRANTS failed");
            None
        }
    }
}

fn text(v: &Option<Vec<u8>>) -> String {
    v.as_deref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// Why a query of the monitor's failed: the server refused `what`, or the connection
/// failed.
fn failure(what: &'static str) -> impl Fn(Failed<BackendError>) -> String {
    move |failed| match failed {
        Failed::Answered(e) => format!("{what} refused: {}", e.message),
        Failed::Broken(e) => e.to_string(),
    }
}

async fn observe(c: &mut BackendConn) -> Result<Observation, String> {
    let row = c
        .query_row(
            "SELECT @@global.read_only, @@global.gtid_current_pos, @@global.wsrep_on, \
             @@global.max_prepared_stmt_count",
        )
        .await
        .map_err(failure("status query"))?
        .ok_or("status query returned no row")?;
    let read_only = text(&row[0]) == "1";
    // Sluice's prepared-statement budget follows the server's limit.
    c.server
        .stmts
        .learn_limit(row.get(3).and_then(Option::as_deref));
    let gtid = GtidPos::parse(&text(&row[1]));
    let (galera, flow) = if text(&row[2]) == "1" {
        let (g, f) = galera_state(c).await?;
        if !g.ready {
            // It answers the monitor but refuses applications' statements (1047): for
            // them it is down, as a server that can't be reached.
            return Err(format!(
                "wsrep_ready is OFF (cluster status {}): the node refuses queries",
                g.cluster_status
            ));
        }
        (Some(g), Some(f))
    } else {
        (None, None)
    };
    let replica = match c.query_named_row("SHOW SLAVE STATUS").await {
        Ok(Some(cols)) => Some(replica_state(&cols)),
        Ok(None) => None,
        // An account without SLAVE MONITOR: the server answers, so it is up; its
        // replication is unknown (CONFIGURATION.md says what the monitor needs).
        Err(Failed::Answered(e)) => {
            tracing::debug!(error = %e.message, "SHOW SLAVE STATUS refused to the monitor");
            None
        }
        Err(Failed::Broken(e)) => return Err(e.to_string()),
    };
    Ok(Observation {
        ping: Duration::ZERO,
        read_only,
        gtid,
        replica,
        galera,
        flow,
        missing_privileges: None,
    })
}

/// The node's state, and its flow-control counters for [`flow::between`] (the figures
/// themselves need the previous check, which `publish` has).
async fn galera_state(c: &mut BackendConn) -> Result<(GaleraState, flow::Sample), String> {
    let row = c
        .query_row(
            "SELECT \
             MAX(IF(VARIABLE_NAME='WSREP_LOCAL_STATE', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_READY', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_CLUSTER_STATUS', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_CLUSTER_SIZE', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_FLOW_CONTROL_PAUSED_NS', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_FLOW_CONTROL_SENT', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_FLOW_CONTROL_RECV', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_LOCAL_RECV_QUEUE', VARIABLE_VALUE, NULL)), \
             MAX(IF(VARIABLE_NAME='WSREP_FLOW_CONTROL_REQUESTED', VARIABLE_VALUE, NULL)) \
             FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME LIKE 'WSREP%'",
        )
        .await
        .map_err(failure("wsrep status"))?
        .ok_or("wsrep status returned no row")?;
    let at = Instant::now();
    let number = |i: usize| row.get(i).and_then(|v| text(v).parse().ok()).unwrap_or(0);
    let sample = flow::Sample {
        at,
        paused_ns: number(4),
        sent: number(5),
        received: number(6),
        recv_queue: number(7),
        // Galera 26.4 and later says "true" or "false"; older providers lack it (NULL:
        // not requested).
        requested: row.get(8).is_some_and(|v| {
            let v = text(v);
            v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("ON") || v == "1"
        }),
    };
    let state = GaleraState {
        local_state: text(&row[0]).parse().unwrap_or(0),
        ready: text(&row[1]).eq_ignore_ascii_case("ON"),
        cluster_status: text(&row[2]),
        cluster_size: text(&row[3]).parse().unwrap_or(0),
        flow_control_paused_ns: sample.paused_ns,
        flow: Default::default(),
    };
    Ok((state, sample))
}

fn replica_state(cols: &[(String, Option<Vec<u8>>)]) -> ReplicaState {
    let get = |name: &str| {
        cols.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| text(v))
            .unwrap_or_default()
    };
    let behind = get("Seconds_Behind_Master");
    ReplicaState {
        source: format!("{}:{}", get("Master_Host"), get("Master_Port")),
        io_running: get("Slave_IO_Running"),
        sql_running: get("Slave_SQL_Running") == "Yes",
        seconds_behind: behind.parse().ok(),
        gtid_io_pos: Some(get("Gtid_IO_Pos")).filter(|g| !g.is_empty()),
        last_error: [get("Last_IO_Error"), get("Last_SQL_Error")]
            .into_iter()
            .filter(|e| !e.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// Turns one check into the member's published state, with hysteresis: `down_after`
/// failures in a row to go down, `up_after` successes in a row to come back (one
/// from the first check), and as many in-limit checks to rejoin the read set.
fn publish(
    member: &Member,
    result: Result<Observation, String>,
    c: &mut Counters,
    cfg: &crate::router::config::MonitorConfig,
) {
    let old = member.state.load_full();
    let mut s = (*old).clone();
    s.checked_at = Some(SystemTime::now());
    match result {
        Err(e) => {
            c.successes = 0;
            c.failures += 1;
            if c.failures >= cfg.down_after {
                s.health = Health::Down;
            }
            s.error = Some(e);
            s.ping = None;
            // The connection is gone, and the node may restart before the next check
            // with counters that happen to be higher: start the differences afresh.
            c.flow = None;
        }
        Ok(o) => {
            c.failures = 0;
            c.successes += 1;
            if s.health != Health::Down || c.successes >= cfg.up_after {
                s.health = Health::Up;
            }
            s.error = None;
            s.ping = Some(o.ping);
            s.read_only = Some(o.read_only);
            if let Some(g) = &o.gtid {
                // A replica's current position is what it applied: reads needing it
                // can go there without waiting.
                member.note_applied(g);
            }
            s.gtid = o.gtid;
            let over = match &o.replica {
                None => false,
                Some(r) if !r.sql_running => true,
                Some(r) => r
                    .seconds_behind
                    .is_some_and(|b| Duration::from_secs(b) > member.max_lag),
            } || o.galera.as_ref().is_some_and(|g| !g.synced());
            if over {
                c.in_lag = 0;
                if !s.lagging {
                    tracing::info!(
                        server = member.name(),
                        "replica out of the read set: lagging or not applying"
                    );
                }
                s.lagging = true;
            } else {
                c.in_lag += 1;
                if s.lagging && c.in_lag >= cfg.up_after {
                    tracing::info!(server = member.name(), "replica back in the read set");
                    s.lagging = false;
                }
            }
            s.replica = o.replica;
            s.galera = o.galera.map(|mut g| {
                if let Some(now) = &o.flow {
                    g.flow = flow::between(c.flow.as_ref(), now);
                }
                g
            });
            c.flow = o.flow;
            if let Some(missing) = o.missing_privileges {
                if !missing.is_empty() && old.missing_privileges.as_ref() != Some(&missing) {
                    warn_missing(member.name(), &missing);
                }
                s.missing_privileges = Some(missing);
            }
        }
    }
    member.state.store(Arc::new(s));
}

/// Names what the account lacks and what will fail for it, once per change.
fn warn_missing(server: &str, missing: &[&'static str]) {
    let used_for: Vec<&str> = grants::NEEDED
        .iter()
        .filter(|n| missing.contains(&n.privilege))
        .map(|n| n.used_for)
        .collect();
    tracing::warn!(
        server,
        missing = %missing.join(", "),
        needed_for = %used_for.join("; "),
        "the monitor's account lacks privileges on this server: failover and switchover \
         steps that need them will fail (see CONFIGURATION.md [monitor])"
    );
}
