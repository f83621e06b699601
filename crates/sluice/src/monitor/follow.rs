//! Following the other Sluice instances in front of the same servers through a change
//! of the writer (`crate::fleet`): a change runs only as the fleet allows and is told to
//! it after; an instance that did not promote follows the one that did, settling its own
//! commits lost in flight first; and a writer any path chose is routed to at once.

use super::failover::{connect, scalar, scan_binlog, ChangeError};
use crate::auth::BackendCredentials;
use crate::router::gtid::GtidPos;
use crate::router::{Member, Router, ServerState};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Runs a change of the writer as the other instances allow: asked of them before
/// (`begin_writer_change`), and the writer it made (`made`) told them after.
pub(super) async fn as_the_fleet_allows<T>(
    router: &Router,
    change: impl std::future::Future<Output = Result<T, ChangeError>>,
    made: impl Fn(&T) -> String,
) -> Result<T, ChangeError> {
    let fleet = router.coordination.get();
    if let Some(fleet) = fleet {
        fleet
            .begin_writer_change()
            .await
            .map_err(ChangeError::Refused)?;
    }
    let result = change.await;
    if let Some(fleet) = fleet {
        fleet
            .end_writer_change(result.as_ref().ok().map(made))
            .await;
    }
    result
}

/// Follows a writer another Sluice instance promoted, as that instance does after its
/// promotion: this instance's commits lost in flight with `lost` (the old writer, fenced
/// here too) are looked for in what `new` logged, before its sessions are routed there.
/// What `new` applied of the old writer is its `gtid_slave_pos`: it stopped replicating
/// when promoted, and applies nothing from anyone since.
pub async fn follow(
    router: &Router,
    creds: &BackendCredentials,
    lost: Option<&Member>,
    new: &Arc<Member>,
) {
    if router.writer().is_some_and(|w| Arc::ptr_eq(&w, new)) {
        return;
    }
    if let Some(lost) = lost {
        lost.fenced.store(true, Ordering::Relaxed);
    }
    let applied = match connect(new, creds, router.monitor.timeout).await {
        Ok(mut c) => scalar(&mut c, "SELECT @@global.gtid_slave_pos")
            .await
            .ok()
            .and_then(|p| GtidPos::parse(&p)),
        Err(_) => None,
    };
    if let Some(has) = applied {
        let scanned = match router.commits.scan_from(&has) {
            Some(from) => scan_binlog(router, new, creds, from).await,
            None => None,
        };
        router.promoted(new, has, scanned);
    }
    install_writer(router, new);
}

/// Routes writes to `new` at once, before its monitor's next check says it is writable.
pub fn install_writer(router: &Router, new: &Arc<Member>) {
    let mut s: ServerState = (*new.state.load_full()).clone();
    s.read_only = Some(false);
    s.replica = None;
    s.lagging = false;
    new.state.store(Arc::new(s));
    router.set_writer(Some(new.clone()));
}
