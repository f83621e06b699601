//! After a writer change, what is left to tidy on the servers: a promoted writer's
//! leftover replication settings, and an old primary that comes back (with
//! `old_primary = "rejoin"`) made a read-only replica of the new writer, by one
//! instance at a time.

use super::failover::{connect, exec, point_at, replication_creds};
use super::writer_lock::{replica_of, WriterLock};
use crate::auth::BackendCredentials;
use crate::router::{Health, Member, Router, ServerState};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A writer promoted without `RESET SLAVE ALL` (the account lacked RELOAD) tries it
/// again, so that its leftover settings go once the grant is there.
pub(super) async fn clear_leftover_replication(router: &Router, creds: &BackendCredentials) {
    let Some(w) = router.writer() else { return };
    if !w.leftover_replication.load(Ordering::Relaxed) {
        return;
    }
    let cleared = async {
        let mut c = connect(&w, creds, router.monitor.timeout).await?;
        exec(&mut c, "RESET SLAVE ALL").await
    }
    .await;
    if cleared.is_ok() {
        tracing::info!(server = w.name(), "leftover replication settings cleared");
        // The state first: the flag alone keeps it the writer until the monitor sees
        // that it has no replication settings any more.
        let mut s: ServerState = (*w.state.load_full()).clone();
        s.replica = None;
        w.state.store(Arc::new(s));
        w.leftover_replication.store(false, Ordering::Relaxed);
    }
}

/// `old_primary = "rejoin"`: a fenced server that is up again becomes a read-only
/// replica of the writer, then takes reads like any other.
pub(super) async fn rejoin_fenced(router: &Router, creds: &BackendCredentials) {
    let Some(writer) = router.writer() else {
        return;
    };
    let returned =
        |m: &Arc<Member>| m.fenced.load(Ordering::Relaxed) && m.state.load().health == Health::Up;
    if !router.members.iter().any(returned) {
        return;
    }
    // One instance rejoins it; the others find it done.
    let Ok(lock) = WriterLock::acquire(router, creds, None).await else {
        return;
    };
    for m in router.members.iter().filter(|m| returned(m)) {
        let (user, password) = replication_creds(router, creds);
        let result = async {
            let mut c = connect(m, creds, router.monitor.timeout).await?;
            if replica_of(&mut c, &writer).await {
                return Ok(());
            }
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
    lock.release().await;
}
