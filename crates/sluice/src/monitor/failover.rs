//! Failover and switchover for MariaDB GTID replication, and the writer of a Galera
//! cluster. Failover: when the writer has been down for `monitor.down_after` checks
//! and no other server can take writes, the replica that received the most of the old
//! primary's binlog applies what it has, stops replicating and becomes writable; the
//! other replicas follow it; the old primary is fenced (or rejoined as a replica when
//! it returns). Switchover does the same on request, after letting running
//! transactions end and the new writer catch up, so that nothing is lost. Galera needs
//! none of this: the router's election moves the writer among synced nodes.

use super::follow::install_writer;
use super::writer_lock::{promoted_elsewhere, WriterLock};
use crate::auth::BackendCredentials;
use crate::backend::BackendConn;
use crate::binlog::scan::Logged;
use crate::error::Failed;
use crate::router::config::{OldPrimary, RoleConfig};
use crate::router::gtid::GtidPos;
use crate::router::{FailoverRecord, Health, Member, Router, ServerState};
use crate::secret::Secret;
use crate::shutdown::Shutdown;
use crate::stats::Stats;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

mod switchover;
pub use switchover::switchover;

/// Longest a failover reads the new writer's binlog for: the window it reads is the
/// few transactions in flight when the old writer was lost.
const SCAN_LIMIT: Duration = Duration::from_secs(1);

/// Watches for a lost writer (and for returning old primaries to rejoin).
pub async fn watch(router: Weak<Router>, creds: Arc<BackendCredentials>, mut shutdown: Shutdown) {
    let mut last_writer: Option<Arc<Member>> = None;
    // Said once, not at every check, while this instance can't act on a lost writer.
    let mut out_of_reach = String::new();
    loop {
        let interval = {
            let Some(r) = router.upgrade() else { return };
            match r.writer() {
                Some(w) => {
                    last_writer = Some(w);
                    out_of_reach.clear();
                }
                None => {
                    if let Some(lost) = last_writer.clone() {
                        // Galera needs no promotion: the election moves the writer
                        // to another synced node as soon as there is one.
                        let galera = lost.state.load().galera.is_some();
                        let down = !galera && lost.state.load().health == Health::Down
                            || lost.fenced.load(Ordering::Relaxed)
                            || lost.disabled.load(Ordering::Relaxed);
                        if r.failover.enabled && down && !r.paused.load(Ordering::Acquire) {
                            match failover(&r, &creds, &lost).await {
                                Ok(to) => last_writer = Some(to),
                                Err(ChangeError::OutOfReach(why)) => {
                                    if why != out_of_reach {
                                        tracing::warn!(from = lost.name(), %why, "writer unreachable, not failing over");
                                        out_of_reach = why;
                                    }
                                }
                                Err(ChangeError::Elsewhere(why)) => {
                                    tracing::info!(from = lost.name(), %why, "not failing over: following the instance that does")
                                }
                                Err(e) => {
                                    tracing::error!(from = lost.name(), error = %e, "failover failed; will retry")
                                }
                            }
                        }
                    }
                }
            }
            super::rejoin::clear_leftover_replication(&r, &creds).await;
            if r.failover.old_primary == OldPrimary::Rejoin {
                super::rejoin::rejoin_fenced(&r, &creds).await;
            }
            r.monitor.interval
        };
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.stopping() => return,
        }
    }
}

/// The account replicas use towards a promoted server.
pub(super) fn replication_creds(router: &Router, creds: &BackendCredentials) -> (String, Secret) {
    match (
        &router.failover.replication_user,
        &router.failover.replication_password,
    ) {
        (Some(u), Some(p)) => (u.clone(), p.clone()),
        _ => (creds.user.clone(), creds.password.clone()),
    }
}

/// Reads back what `new` logged after `from`: whose commits, among those lost in
/// flight with the old writer, it has. Bounded by [`SCAN_LIMIT`]; None when it could
/// not be read, which leaves those commits' outcome unknown.
pub(super) async fn scan_binlog(
    router: &Router,
    new: &Member,
    creds: &BackendCredentials,
    from: GtidPos,
) -> Option<(GtidPos, Vec<Logged>)> {
    let (user, password) = replication_creds(router, creds);
    let creds = BackendCredentials::new(user, password);
    let scan = async {
        let mut conn = connect(new, &creds, SCAN_LIMIT).await?;
        crate::binlog::scan::logged_after(&mut conn, &from.to_string())
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(SCAN_LIMIT, scan).await {
        Ok(Ok(scanned)) => {
            tracing::info!(
                server = new.name(),
                from = %from,
                transactions = scanned.len(),
                "read the new writer's binlog to settle commits lost in flight"
            );
            Some((from, scanned))
        }
        Ok(Err(e)) => {
            tracing::warn!(server = new.name(), error = %e, "could not read the new writer's binlog: commits lost in flight stay of unknown outcome");
            None
        }
        Err(_) => {
            tracing::warn!(server = new.name(), "reading the new writer's binlog took longer than {SCAN_LIMIT:?}: commits lost in flight stay of unknown outcome");
            None
        }
    }
}

pub(super) async fn connect(
    m: &Member,
    creds: &BackendCredentials,
    timeout: Duration,
) -> Result<BackendConn, String> {
    match tokio::time::timeout(
        timeout,
        BackendConn::connect(m.pool.server.clone(), creds, &super::params(), None),
    )
    .await
    {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("{}: no connection within {timeout:?}", m.name())),
    }
}

pub(super) async fn exec(c: &mut BackendConn, sql: &str) -> Result<(), String> {
    run(c, sql)
        .await
        .map_err(|e| format!("{}: {}: {e}", c.server.name, redact(sql)))
}

/// Runs `sql`; the server's refusal (or the lost connection) as the error.
async fn run(c: &mut BackendConn, sql: &str) -> Result<(), String> {
    match c.simple_query(sql).await {
        Ok(_) => Ok(()),
        Err(Failed::Answered(e)) => Err(e.message),
        Err(Failed::Broken(e)) => Err(e.to_string()),
    }
}

/// Statements are named in errors without the password they may carry.
fn redact(sql: &str) -> &str {
    sql.split(" MASTER_PASSWORD").next().unwrap_or(sql)
}

pub(super) async fn scalar(c: &mut BackendConn, sql: &str) -> Result<String, String> {
    match c.query_scalar(sql).await {
        Ok(v) => Ok(v
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()),
        Err(Failed::Answered(e)) => Err(format!("{}: {sql}: {}", c.server.name, e.message)),
        Err(Failed::Broken(e)) => Err(e.to_string()),
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `CHANGE MASTER TO` the server `to`, by GTID, and start replicating.
pub(super) async fn point_at(
    c: &mut BackendConn,
    to: &Member,
    user: &str,
    password: &Secret,
) -> Result<(), String> {
    let crate::stream::Endpoint::Tcp(address) = &to.pool.server.endpoint else {
        // Replicas reach their primary over TCP; Sluice knows no address for this one.
        return Err(format!(
            "{}: Sluice reaches it over a Unix socket, so it has no address replicas could use",
            to.name()
        ));
    };
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| format!("{}: address has no port", to.name()))?;
    exec(c, "STOP SLAVE").await?;
    exec(
        c,
        &format!(
            "CHANGE MASTER TO MASTER_HOST={}, MASTER_PORT={}, MASTER_USER={}, \
             MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_PASSWORD={}",
            quote(host.trim_matches(['[', ']'])),
            port.parse::<u16>()
                .map_err(|_| format!("{}: bad port", to.name()))?,
            quote(user),
            quote(&password.0)
        ),
    )
    .await?;
    exec(c, "START SLAVE").await
}

/// Replicas of the lost writer that can be promoted, with how much of its binlog each
/// received, most first; and the replicas (promotable or not) still connected to
/// their primary, which say it is alive.
async fn candidates(
    router: &Router,
    creds: &BackendCredentials,
    lost: &Member,
) -> (Vec<(Arc<Member>, BackendConn, GtidPos)>, Vec<String>) {
    let mut found = Vec::new();
    let mut connected = Vec::new();
    for m in &router.members {
        if std::ptr::eq(m.as_ref(), lost) || m.state.load().health != Health::Up {
            continue;
        }
        let Ok(mut c) = connect(m, creds, router.monitor.timeout).await else {
            continue;
        };
        let Some((received, io_running)) = has_of_primary(&mut c).await else {
            continue;
        };
        if io_running {
            connected.push(m.name().to_owned());
        }
        if m.role != RoleConfig::Reader && m.usable() {
            found.push((m.clone(), c, received));
        }
    }
    // Most received first; config order breaks ties (a stable choice).
    found.sort_by_key(|(_, _, g)| std::cmp::Reverse(g.total()));
    (found, connected)
}

/// What a replica has of its primary: what it received, and what it applied or wrote
/// itself; and whether its replication is connected to that primary now (a replica
/// that lost it says `Connecting`). `None`: it is not a replica, or could not be asked.
async fn has_of_primary(c: &mut BackendConn) -> Option<(GtidPos, bool)> {
    let cols = match c.query_named_row("SHOW SLAVE STATUS").await {
        Ok(Some(cols)) => cols,
        _ => return None,
    };
    let field = |name: &str| {
        cols.iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let mut received = GtidPos::parse(&field("Gtid_IO_Pos")?)?;
    let io_running = field("Slave_IO_Running").as_deref() == Some("Yes");
    let cur = scalar(c, "SELECT @@global.gtid_current_pos").await.ok()?;
    received.merge(&GtidPos::parse(&cur)?);
    Some((received, io_running))
}

/// Which server of a writer change a statement ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// The writer being replaced (a switchover's; a failover's is down).
    Old,
    /// The server being promoted.
    New,
}

/// The statements of a failover or switchover that changed a server, each with the
/// statement that undoes it, so that a failed step can put the servers back as they
/// were: a writer change either completes or leaves the writer it started from.
#[derive(Default)]
struct Journal {
    done: Vec<(Side, String, &'static str)>,
}

impl Journal {
    /// The promotion proper, shared by failover and switchover: the new writer stops
    /// replicating and takes writes, each step undone if a later one fails.
    async fn make_writer(&mut self, c: &mut BackendConn) -> Result<(), StepError> {
        self.step(c, Side::New, "STOP SLAVE", Some("START SLAVE"))
            .await?;
        self.step(
            c,
            Side::New,
            "SET GLOBAL read_only = 0",
            Some("SET GLOBAL read_only = 1"),
        )
        .await
    }

    /// Runs the step `sql` on `c`; `undo` is what puts the server back if a later step
    /// fails (`None`: it changed nothing that matters).
    async fn step(
        &mut self,
        c: &mut BackendConn,
        side: Side,
        sql: &'static str,
        undo: Option<&'static str>,
    ) -> Result<(), StepError> {
        run(c, sql).await.map_err(|error| StepError {
            step: format!("{}: {sql}", c.server.name),
            error,
        })?;
        if let Some(undo) = undo {
            let entry = (side, c.server.name.clone(), undo);
            // STOP SLAVE IO_THREAD then STOP SLAVE: one START SLAVE undoes both.
            if self.done.last() != Some(&entry) {
                self.done.push(entry);
            }
        }
        Ok(())
    }

    /// Undoes every step, last first; what was undone and what could not be.
    async fn undo(
        self,
        mut old: Option<&mut BackendConn>,
        new: &mut BackendConn,
    ) -> (Vec<String>, Vec<String>) {
        let (mut undone, mut not_undone) = (Vec::new(), Vec::new());
        for (side, server, sql) in self.done.into_iter().rev() {
            let c = match (side, old.as_deref_mut()) {
                (Side::Old, Some(c)) => c,
                (Side::Old, None) => continue,
                (Side::New, _) => &mut *new,
            };
            match run(c, sql).await {
                Ok(()) => undone.push(format!("{server}: {sql}")),
                Err(e) => not_undone.push(format!("{server}: {sql}: {e}")),
            }
        }
        (undone, not_undone)
    }
}

/// A step that failed: which statement on which server, and the server's answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{step}: {error}")]
pub struct StepError {
    pub step: String,
    pub error: String,
}

impl From<String> for StepError {
    fn from(error: String) -> StepError {
        StepError {
            step: "preparing".into(),
            error,
        }
    }
}

/// Why a failover or switchover did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChangeError {
    /// Refused before anything was changed.
    #[error("{0}")]
    Refused(String),
    /// Another instance holds the writer lock: it is changing the writer.
    #[error("{0}")]
    Elsewhere(String),
    /// What this instance sees is not enough to know the writer is lost for everyone:
    /// too few servers answer it, or the replicas still replicate from the writer.
    #[error("{0}")]
    OutOfReach(String),
    /// A step failed; the servers were put back as they were (`not_undone` says what
    /// could not be).
    #[error("{failed}; undone: {}{}", list(undone), not_undone_text(not_undone))]
    Failed {
        failed: StepError,
        undone: Vec<String>,
        not_undone: Vec<String>,
    },
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "nothing to undo".into()
    } else {
        items.join(", ")
    }
}

fn not_undone_text(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!("; COULD NOT UNDO: {}", items.join(", "))
    }
}

impl From<String> for ChangeError {
    fn from(reason: String) -> ChangeError {
        ChangeError::Refused(reason)
    }
}

impl From<&str> for ChangeError {
    fn from(reason: &str) -> ChangeError {
        ChangeError::Refused(reason.to_owned())
    }
}

/// The admin API's record of a writer change, whatever its outcome.
fn record(
    kind: &'static str,
    from: &Member,
    to: Option<&Member>,
    started: Instant,
    result: Result<&[String], &ChangeError>,
) -> FailoverRecord {
    let (failed_step, undone, not_undone) = match result {
        Err(ChangeError::Failed {
            failed,
            undone,
            not_undone,
        }) => (Some(failed.to_string()), undone.clone(), not_undone.clone()),
        _ => (None, Vec::new(), Vec::new()),
    };
    FailoverRecord {
        kind,
        from: Some(from.name().to_owned()),
        to: to.map(|m| m.name().to_owned()),
        at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        took_ms: started.elapsed().as_millis() as u64,
        outcome: match result {
            Ok(_) => "ok".into(),
            Err(e) => e.to_string(),
        },
        failed_step,
        undone,
        not_undone,
        notes: result.map(<[String]>::to_vec).unwrap_or_default(),
    }
}

/// Promotes the most advanced replica of `lost` that can be promoted, repoints the
/// others, routes writes to it, and fences `lost`. A candidate whose promotion fails
/// is put back as it was (replicating) and the next one is tried.
pub async fn failover(
    router: &Router,
    creds: &BackendCredentials,
    lost: &Arc<Member>,
) -> Result<Arc<Member>, ChangeError> {
    let started = Instant::now();
    let change = async {
        let lock = WriterLock::acquire(router, creds, Some(lost)).await?;
        let result = failover_locked(router, creds, lost, started).await;
        lock.release().await;
        result
    };
    super::follow::as_the_fleet_allows(router, change, |m| m.name().to_owned()).await
}

/// [`failover`], under the writer lock: a writer another instance promoted is followed.
async fn failover_locked(
    router: &Router,
    creds: &BackendCredentials,
    lost: &Arc<Member>,
    started: Instant,
) -> Result<Arc<Member>, ChangeError> {
    if let Some(new) = promoted_elsewhere(router, creds, lost).await {
        tracing::warn!(
            from = lost.name(),
            to = new.name(),
            "writer down: following the writer another Sluice instance promoted"
        );
        super::follow::follow(router, creds, Some(lost), &new).await;
        return Ok(new);
    }
    let (mut found, connected) = candidates(router, creds, lost).await;
    if !connected.is_empty() {
        // This instance lost the writer; its replicas did not. Promoting one would make
        // a second writer beside one that others still reach: wait until the replicas
        // lose it too (within their `slave_net_timeout` if it stopped answering).
        return Err(ChangeError::OutOfReach(format!(
            "{} still replicate{} from it: only this instance lost it",
            connected.join(", "),
            if connected.len() == 1 { "s" } else { "" }
        )));
    }
    tracing::warn!(server = lost.name(), "writer down: failing over");
    if found.is_empty() {
        let e = ChangeError::Refused(
            "no replica of the lost writer can be promoted (none is up)".into(),
        );
        *router.stats.last_failover.lock() = Some(record("failover", lost, None, started, Err(&e)));
        return Err(e);
    }
    // Only as advanced as the first: promoting one that received less would lose what
    // the others have (acknowledged writes, with semi-sync). The next check ranks again.
    let most = found[0].2.total();
    let mut last_error = None;
    let mut failed = Vec::new();
    while found.first().is_some_and(|(_, _, g)| g.total() >= most) {
        let (new, mut conn, received) = found.remove(0);
        let (notes, has) = match promote_replica(router, &new, &mut conn, &received).await {
            Ok(done) => done,
            Err(e) => {
                tracing::error!(from = lost.name(), to = new.name(), error = %e, "promotion failed");
                *router.stats.last_failover.lock() =
                    Some(record("failover", lost, Some(&new), started, Err(&e)));
                last_error = Some(e);
                failed.push((new, conn, received));
                continue;
            }
        };
        lost.fenced.store(true, Ordering::Relaxed);
        // Before sessions see the new writer: a commit lost with the old one is looked
        // for in what this one received.
        if let Some(has) = has {
            let scanned = match router.commits.scan_from(&has) {
                Some(from) => scan_binlog(router, &new, creds, from).await,
                None => None,
            };
            router.promoted(&new, has, scanned);
        }
        install_writer(router, &new);
        let mut notes = notes;
        let (user, password) = replication_creds(router, creds);
        // Candidates that failed were put back as replicas of the lost writer.
        for (other, mut c, _) in failed.into_iter().chain(found) {
            if let Err(e) = point_at(&mut c, &new, &user, &password).await {
                tracing::error!(server = other.name(), error = %e, "could not repoint a replica");
                notes.push(format!("{} not repointed: {e}", other.name()));
            }
        }
        Stats::incr(&router.stats.failovers);
        let done = record("failover", lost, Some(&new), started, Ok(&notes));
        tracing::warn!(
            from = lost.name(),
            to = new.name(),
            took_ms = done.took_ms,
            "failover done"
        );
        *router.stats.last_failover.lock() = Some(done);
        return Ok(new);
    }
    Err(last_error.expect("a candidate was tried"))
}

/// Applies what `new` received of the lost primary, stops its replication and makes
/// it writable. A failed step is undone (it replicates again, read-only); only
/// clearing its replication settings may fail without stopping the promotion, since
/// a writer with stale settings beats no writer (see `Member::leftover_replication`).
/// Returns the notes, and all the new writer has of the old one once its replication
/// stopped (`None`: it could not be read).
async fn promote_replica(
    router: &Router,
    new: &Member,
    conn: &mut BackendConn,
    received: &GtidPos,
) -> Result<(Vec<String>, Option<GtidPos>), ChangeError> {
    let mut journal = Journal::default();
    let mut has = None;
    let result: Result<(), StepError> = async {
        // Apply whatever was received before taking writes, so that nothing
        // acknowledged by the old primary (semi-sync: in some replica's relay log) is
        // lost.
        journal
            .step(conn, Side::New, "STOP SLAVE IO_THREAD", Some("START SLAVE"))
            .await?;
        // Read again now that nothing more arrives: the old writer may not be dead.
        has = has_of_primary(conn).await.map(|(g, _)| g);
        let received = has.as_ref().unwrap_or(received);
        let wait = router.failover.switchover_timeout.as_secs().max(1);
        let waited = scalar(
            conn,
            &format!(
                "SELECT MASTER_GTID_WAIT({}, {wait})",
                quote(&received.to_string())
            ),
        )
        .await?;
        if waited != "0" {
            tracing::warn!(
                server = new.name(),
                "relay log not fully applied before promotion"
            );
        }
        journal.make_writer(conn).await
    }
    .await;
    if let Err(failed) = result {
        let (undone, not_undone) = journal.undo(None, conn).await;
        return Err(ChangeError::Failed {
            failed,
            undone,
            not_undone,
        });
    }
    let mut notes = Vec::new();
    if let Err(e) = run(conn, "RESET SLAVE ALL").await {
        tracing::warn!(
            server = new.name(),
            error = %e,
            "promoted, but its replication settings could not be cleared (RESET SLAVE ALL \
             needs RELOAD): retried until it works"
        );
        new.leftover_replication.store(true, Ordering::Relaxed);
        notes.push(format!("{}: RESET SLAVE ALL: {e}", new.name()));
    }
    Ok((notes, has))
}
