//! Failover and switchover for MariaDB GTID replication, and the writer of a Galera
//! cluster. Failover: when the writer has been down for `monitor.down_after` checks
//! and no other server can take writes, the replica that received the most of the old
//! primary's binlog applies what it has, stops replicating and becomes writable; the
//! other replicas follow it; the old primary is fenced (or rejoined as a replica when
//! it returns). Switchover does the same on request, after letting running
//! transactions end and the new writer catch up, so that nothing is lost. Galera needs
//! none of this: the router's election moves the writer among synced nodes.

use crate::auth::BackendCredentials;
use crate::backend::BackendConn;
use crate::config::Secret;
use crate::router::config::{OldPrimary, RoleConfig};
use crate::router::gtid::GtidPos;
use crate::router::{FailoverRecord, Health, Member, Router, ServerState};
use crate::shutdown::Shutdown;
use crate::stats::Stats;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Watches for a lost writer (and for returning old primaries to rejoin).
pub async fn watch(router: Weak<Router>, creds: Arc<BackendCredentials>, mut shutdown: Shutdown) {
    let mut last_writer: Option<Arc<Member>> = None;
    loop {
        let interval = {
            let Some(r) = router.upgrade() else { return };
            match r.writer() {
                Some(w) => last_writer = Some(w),
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
                                Err(e) => {
                                    tracing::error!(from = lost.name(), error = %e, "failover failed; will retry")
                                }
                            }
                        }
                    }
                }
            }
            if r.failover.old_primary == OldPrimary::Rejoin {
                rejoin_fenced(&r, &creds).await;
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
fn replication_creds(router: &Router, creds: &BackendCredentials) -> (String, Secret) {
    match (
        &router.failover.replication_user,
        &router.failover.replication_password,
    ) {
        (Some(u), Some(p)) => (u.clone(), p.clone()),
        _ => (creds.user.clone(), creds.password.clone()),
    }
}

async fn connect(
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

async fn exec(c: &mut BackendConn, sql: &str) -> Result<(), String> {
    match c.simple_query(sql).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("{}: {}: {}", c.server.name, redact(sql), e.message)),
        Err(e) => Err(e.to_string()),
    }
}

/// Statements are named in errors without the password they may carry.
fn redact(sql: &str) -> &str {
    sql.split(" MASTER_PASSWORD").next().unwrap_or(sql)
}

async fn scalar(c: &mut BackendConn, sql: &str) -> Result<String, String> {
    match c.query_scalar(sql).await {
        Ok(Ok(v)) => Ok(v
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()),
        Ok(Err(e)) => Err(format!("{}: {sql}: {}", c.server.name, e.message)),
        Err(e) => Err(e.to_string()),
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `CHANGE MASTER TO` the server `to`, by GTID, and start replicating.
async fn point_at(
    c: &mut BackendConn,
    to: &Member,
    user: &str,
    password: &Secret,
) -> Result<(), String> {
    let (host, port) = to
        .pool
        .server
        .address
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
/// received, most first.
async fn candidates(
    router: &Router,
    creds: &BackendCredentials,
    lost: &Member,
) -> Vec<(Arc<Member>, BackendConn, GtidPos)> {
    let mut found = Vec::new();
    for m in &router.members {
        if std::ptr::eq(m.as_ref(), lost)
            || m.role == RoleConfig::Reader
            || !m.usable()
            || m.state.load().health != Health::Up
        {
            continue;
        }
        let Ok(mut c) = connect(m, creds, router.monitor.timeout).await else {
            continue;
        };
        let received = match c.query_named_row("SHOW SLAVE STATUS").await {
            Ok(Ok(Some(cols))) => cols
                .iter()
                .find(|(n, _)| n == "Gtid_IO_Pos")
                .and_then(|(_, v)| v.as_deref())
                .and_then(|v| GtidPos::parse(&String::from_utf8_lossy(v))),
            _ => None,
        };
        let Some(mut received) = received else {
            continue;
        };
        if let Ok(cur) = scalar(&mut c, "SELECT @@global.gtid_current_pos").await {
            received.merge(&GtidPos::parse(&cur).unwrap_or_default());
        }
        found.push((m.clone(), c, received));
    }
    // Most received first; config order breaks ties (a stable choice).
    found.sort_by_key(|(_, _, g)| std::cmp::Reverse(g.total()));
    found
}

/// Promotes the most advanced replica of `lost`, repoints the others, routes writes
/// to it, and fences `lost`.
pub async fn failover(
    router: &Router,
    creds: &BackendCredentials,
    lost: &Arc<Member>,
) -> Result<Arc<Member>, String> {
    let started = Instant::now();
    tracing::warn!(server = lost.name(), "writer down: failing over");
    let mut found = candidates(router, creds, lost).await;
    if found.is_empty() {
        return Err("no replica of the lost writer can be promoted (none is up)".into());
    }
    let (new, mut conn, received) = found.remove(0);
    // Apply whatever was received before taking writes, so that nothing acknowledged
    // by the old primary (semi-sync: in some replica's relay log) is lost.
    let wait = router.failover.switchover_timeout.as_secs().max(1);
    let _ = exec(&mut conn, "STOP SLAVE IO_THREAD").await;
    let waited = scalar(
        &mut conn,
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
    promote(&mut conn).await?;
    lost.fenced.store(true, Ordering::Relaxed);
    install_writer(router, &new);
    let (user, password) = replication_creds(router, creds);
    for (other, mut c, _) in found {
        if let Err(e) = point_at(&mut c, &new, &user, &password).await {
            tracing::error!(server = other.name(), error = %e, "could not repoint a replica");
        }
    }
    Stats::incr(&router.stats.failovers);
    let took = started.elapsed();
    tracing::warn!(
        from = lost.name(),
        to = new.name(),
        took_ms = took.as_millis() as u64,
        "failover done"
    );
    *router.stats.last_failover.lock() = Some(FailoverRecord {
        kind: "failover",
        from: Some(lost.name().to_owned()),
        to: Some(new.name().to_owned()),
        at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        took_ms: took.as_millis() as u64,
        outcome: "ok".into(),
    });
    Ok(new)
}

async fn promote(c: &mut BackendConn) -> Result<(), String> {
    exec(c, "STOP SLAVE").await?;
    exec(c, "RESET SLAVE ALL").await?;
    exec(c, "SET GLOBAL read_only = 0").await
}

/// Routes writes to `new` at once, before its monitor's next check says it is writable.
fn install_writer(router: &Router, new: &Arc<Member>) {
    let mut s: ServerState = (*new.state.load_full()).clone();
    s.read_only = Some(false);
    s.replica = None;
    s.lagging = false;
    new.state.store(Arc::new(s));
    router.set_writer(Some(new.clone()));
}

/// Moves the writer to `to` (or the most advanced replica) without losing a write:
/// new writer statements wait while running ones end, the old writer turns
/// read-only, the new one catches up and takes over, and the old one replicates from
/// it.
pub async fn switchover(
    router: &Router,
    creds: &BackendCredentials,
    to: Option<&str>,
) -> Result<FailoverRecord, String> {
    let started = Instant::now();
    let old = router
        .writer()
        .ok_or("there is no writer to switch over from")?;
    let timeout = router.failover.switchover_timeout;
    if old.role == RoleConfig::Writer {
        return Err(format!(
            "{} has role = \"writer\" in the configuration",
            old.name()
        ));
    }
    let new = match to {
        Some(name) => router
            .by_name(name)
            .cloned()
            .ok_or_else(|| format!("no server is named {name:?}"))?,
        None => candidates(router, creds, &old)
            .await
            .into_iter()
            .next()
            .map(|(m, _, _)| m)
            .ok_or("no replica is up to switch over to")?,
    };
    if Arc::ptr_eq(&new, &old) {
        return Err(format!("{} is already the writer", new.name()));
    }
    if new.role == RoleConfig::Reader || !new.usable() {
        return Err(format!(
            "{} can't be the writer (role reader, down, fenced or disabled)",
            new.name()
        ));
    }
    let mut old_conn = connect(&old, creds, timeout).await?;
    let mut new_conn = connect(&new, creds, timeout).await?;

    router.paused.store(true, Ordering::Release);
    let result = async {
        // Transactions and statements already on the old writer end first.
        let deadline = Instant::now() + timeout;
        while old.pool.leased() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if old.pool.leased() > 0 {
            // Their next statements would still write there (read_only does not stop
            // accounts with READ_ONLY ADMIN): give up rather than lose those writes.
            return Err(format!(
                "{} session(s) still hold connections on {} after {timeout:?} (a long \
                 transaction, or state pinned there such as a temporary table or a lock); \
                 nothing was changed",
                old.pool.leased(),
                old.name()
            ));
        }
        exec(&mut old_conn, "SET GLOBAL read_only = 1").await?;
        let pos = scalar(&mut old_conn, "SELECT @@global.gtid_binlog_pos").await?;
        let waited = scalar(
            &mut new_conn,
            &format!(
                "SELECT MASTER_GTID_WAIT({}, {})",
                quote(&pos),
                timeout.as_secs().max(1)
            ),
        )
        .await?;
        if waited != "0" {
            let _ = exec(&mut old_conn, "SET GLOBAL read_only = 0").await;
            return Err(format!(
                "{} did not catch up with {pos} within {timeout:?}",
                new.name()
            ));
        }
        promote(&mut new_conn).await?;
        install_writer(router, &new);
        let (user, password) = replication_creds(router, creds);
        point_at(&mut old_conn, &new, &user, &password).await?;
        let mut s: ServerState = (*old.state.load_full()).clone();
        s.read_only = Some(true);
        old.state.store(Arc::new(s));
        for m in &router.members {
            if Arc::ptr_eq(m, &new)
                || Arc::ptr_eq(m, &old)
                || !m.usable()
                || m.state.load().replica.is_none()
            {
                continue;
            }
            let repointed = async {
                let mut c = connect(m, creds, timeout).await?;
                point_at(&mut c, &new, &user, &password).await
            }
            .await;
            if let Err(e) = repointed {
                tracing::error!(server = m.name(), error = %e, "could not repoint a replica");
            }
        }
        Ok(())
    }
    .await;
    router.paused.store(false, Ordering::Release);
    router.writer_changed.notify_waiters();
    let took = started.elapsed();
    let record = FailoverRecord {
        kind: "switchover",
        from: Some(old.name().to_owned()),
        to: Some(new.name().to_owned()),
        at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        took_ms: took.as_millis() as u64,
        outcome: match &result {
            Ok(()) => "ok".into(),
            Err(e) => e.clone(),
        },
    };
    *router.stats.last_failover.lock() = Some(record.clone());
    result?;
    Stats::incr(&router.stats.switchovers);
    tracing::info!(
        from = old.name(),
        to = new.name(),
        took_ms = took.as_millis() as u64,
        "switchover done"
    );
    Ok(record)
}

/// `old_primary = "rejoin"`: a fenced server that is up again becomes a read-only
/// replica of the writer, then takes reads like any other.
async fn rejoin_fenced(router: &Router, creds: &BackendCredentials) {
    let Some(writer) = router.writer() else {
        return;
    };
    for m in &router.members {
        if !m.fenced.load(Ordering::Relaxed) || m.state.load().health != Health::Up {
            continue;
        }
        let (user, password) = replication_creds(router, creds);
        let result = async {
            let mut c = connect(m, creds, router.monitor.timeout).await?;
            exec(&mut c, "SET GLOBAL read_only = 1").await?;
            point_at(&mut c, &writer, &user, &password).await
        }
        .await;
        match result {
            Ok(()) => {
                tracing::info!(
                    server = m.name(),
                    writer = writer.name(),
                    "old primary rejoined as a replica"
                );
                m.fenced.store(false, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(server = m.name(), error = %e, "old primary could not rejoin yet")
            }
        }
    }
}
