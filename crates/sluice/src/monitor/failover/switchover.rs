//! Switchover: the writer moved on request, without losing a write.

use super::*;

/// Moves the writer to `to` (or the most advanced replica) without losing a write:
/// new writer statements wait while running ones end, the old writer turns
/// read-only, the new one catches up and takes over, and the old one replicates from
/// it. A step that fails before the new writer takes over is undone: the old writer
/// is writable again and the new one replicates as before.
pub async fn switchover(
    router: &Router,
    creds: &BackendCredentials,
    to: Option<&str>,
) -> Result<FailoverRecord, ChangeError> {
    let started = Instant::now();
    let old = router
        .writer()
        .ok_or("there is no writer to switch over from")?;
    if old.role == RoleConfig::Writer {
        return Err(format!("{} has role = \"writer\" in the configuration", old.name()).into());
    }
    let new = match to {
        Some(name) => router
            .by_name(name)
            .cloned()
            .ok_or_else(|| format!("no server is named {name:?}"))?,
        None => candidates(router, creds, &old)
            .await
            .0
            .into_iter()
            .next()
            .map(|(m, _, _)| m)
            .ok_or("no replica is up to switch over to")?,
    };
    if Arc::ptr_eq(&new, &old) {
        return Err(format!("{} is already the writer", new.name()).into());
    }
    if new.role == RoleConfig::Reader || !new.usable() {
        return Err(format!(
            "{} can't be the writer (role reader, down, fenced or disabled)",
            new.name()
        )
        .into());
    }
    let change = switchover_locked(router, creds, &old, &new, started);
    crate::monitor::follow::as_the_fleet_allows(router, change, |_| new.name().to_owned()).await
}

/// [`switchover`] once this instance may change the writer: under the writer lock,
/// with the other instances' writes held.
async fn switchover_locked(
    router: &Router,
    creds: &BackendCredentials,
    old: &Arc<Member>,
    new: &Arc<Member>,
    started: Instant,
) -> Result<FailoverRecord, ChangeError> {
    let (old, new) = (old.clone(), new.clone());
    let timeout = router.failover.switchover_timeout;
    let lock = WriterLock::acquire(router, creds, None).await?;
    // Under the lock: the writer this instance saw is still the one the servers have.
    if promoted_elsewhere(router, creds, &old).await.is_some() {
        lock.release().await;
        return Err("another Sluice instance changed the writer meanwhile".into());
    }
    let connected = async {
        Ok::<_, ChangeError>((
            connect(&old, creds, timeout).await?,
            connect(&new, creds, timeout).await?,
        ))
    }
    .await;
    let (mut old_conn, mut new_conn) = match connected {
        Ok(c) => c,
        Err(e) => {
            lock.release().await;
            return Err(e);
        }
    };

    router.paused.store(true, Ordering::Release);
    router.switching.send_modify(|begun| *begun += 1);
    if let Some(fleet) = router.coordination.get() {
        fleet.pause_peers(old.name(), timeout).await;
    }
    let result = async {
        wait_sessions_leave(&old, timeout).await?;
        let mut journal = Journal::default();
        let promoted =
            promote_in_switchover(&mut journal, &mut old_conn, &mut new_conn, &new, timeout).await;
        if let Err(failed) = promoted {
            let (undone, not_undone) = journal.undo(Some(&mut old_conn), &mut new_conn).await;
            return Err(ChangeError::Failed {
                failed,
                undone,
                not_undone,
            });
        }
        new.leftover_replication.store(false, Ordering::Relaxed);
        install_writer(router, &new);
        // The new writer takes writes from here on: what fails now is reported, not
        // undone (the cluster has its writer; a replica left behind is fixed by hand).
        Ok(repoint_after_switchover(router, creds, &old, &new, &mut old_conn, timeout).await)
    }
    .await;
    router.paused.store(false, Ordering::Release);
    router.writer_changed.notify_waiters();
    lock.release().await;
    let done = record("switchover", &old, Some(&new), started, result.as_deref());
    *router.stats.last_failover.lock() = Some(done.clone());
    if let Err(e) = result {
        tracing::error!(from = old.name(), to = new.name(), error = %e, "switchover failed");
        return Err(e);
    }
    Stats::incr(&router.stats.switchovers);
    tracing::info!(
        from = old.name(),
        to = new.name(),
        took_ms = done.took_ms,
        "switchover done"
    );
    Ok(done)
}

/// Transactions and statements already on the old writer end first.
async fn wait_sessions_leave(old: &Member, timeout: Duration) -> Result<(), ChangeError> {
    let deadline = Instant::now() + timeout;
    while old.pool.leased() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if old.pool.leased() > 0 {
        // Their next statements would still write there (read_only does not stop
        // accounts with READ_ONLY ADMIN): give up rather than lose those writes.
        return Err(ChangeError::Refused(format!(
            "{} session(s) still hold connections on {} after {timeout:?} (a long \
             transaction, or state pinned there such as a temporary table or a lock); \
             nothing was changed",
            old.pool.leased(),
            old.name()
        )));
    }
    Ok(())
}

/// The old writer turns read-only, the new one catches up with it, stops replicating
/// and turns writable; every change is in `journal`. Clearing the new writer's
/// replication settings comes last, so that nothing after it can fail.
async fn promote_in_switchover(
    journal: &mut Journal,
    old_conn: &mut BackendConn,
    new_conn: &mut BackendConn,
    new: &Member,
    timeout: Duration,
) -> Result<(), StepError> {
    journal
        .step(
            old_conn,
            Side::Old,
            "SET GLOBAL read_only = 1",
            Some("SET GLOBAL read_only = 0"),
        )
        .await?;
    let pos = scalar(old_conn, "SELECT @@global.gtid_binlog_pos").await?;
    let waited = scalar(
        new_conn,
        &format!(
            "SELECT MASTER_GTID_WAIT({}, {})",
            quote(&pos),
            timeout.as_secs().max(1)
        ),
    )
    .await?;
    if waited != "0" {
        return Err(StepError {
            step: format!("{}: MASTER_GTID_WAIT", new.name()),
            error: format!("did not catch up with {pos} within {timeout:?}"),
        });
    }
    journal.make_writer(new_conn).await?;
    journal
        .step(new_conn, Side::New, "RESET SLAVE ALL", None)
        .await
}

/// The old writer and the other replicas replicate from the new writer; what could
/// not be done, as notes.
async fn repoint_after_switchover(
    router: &Router,
    creds: &BackendCredentials,
    old: &Arc<Member>,
    new: &Arc<Member>,
    old_conn: &mut BackendConn,
    timeout: Duration,
) -> Vec<String> {
    let mut notes = Vec::new();
    let (user, password) = replication_creds(router, creds);
    match point_at(old_conn, new, &user, &password).await {
        Ok(()) => {
            old.leftover_replication.store(false, Ordering::Relaxed);
            let mut s: ServerState = (*old.state.load_full()).clone();
            s.read_only = Some(true);
            old.state.store(Arc::new(s));
        }
        Err(e) => {
            tracing::error!(server = old.name(), error = %e, "the old writer does not replicate from the new one");
            notes.push(format!("{} not repointed: {e}", old.name()));
        }
    }
    for m in &router.members {
        if Arc::ptr_eq(m, new)
            || Arc::ptr_eq(m, old)
            || !m.usable()
            || m.state.load().replica.is_none()
        {
            continue;
        }
        let repointed = async {
            let mut c = connect(m, creds, timeout).await?;
            point_at(&mut c, new, &user, &password).await
        }
        .await;
        if let Err(e) = repointed {
            tracing::error!(server = m.name(), error = %e, "could not repoint a replica");
            notes.push(format!("{} not repointed: {e}", m.name()));
        }
    }
    notes
}
