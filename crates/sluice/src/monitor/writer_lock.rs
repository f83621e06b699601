//! One Sluice at a time changes the writer. Every instance in front of the same servers
//! runs its own monitor, and each would promote a replica when the writer is lost: two
//! promotions make two writers. So before a failover or a switchover an instance takes
//! a named lock (`GET_LOCK`) on a majority of the servers it sees running, as MariaDB
//! MaxScale's cooperative monitoring does (`majority_of_running`). A server holds a named
//! lock for one connection only, so two instances that see the same servers can't both
//! hold a majority; and it releases the lock when that connection closes, so a dead
//! instance's hold ends with it. Under the lock the servers are read again: a writer
//! another instance promoted meanwhile is followed, not promoted over.

use super::failover::ChangeError;
use crate::auth::BackendCredentials;
use crate::backend::BackendConn;
use crate::router::config::Quorum;
use crate::router::{Health, Member, Router};
use std::sync::Arc;

/// The named lock, the same on every server and every instance.
const LOCK: &str = "sluice.writer_change";

/// The lock held on a majority of the running servers, for as long as this lives.
pub struct WriterLock {
    held: Vec<BackendConn>,
}

impl WriterLock {
    /// Takes the lock on every running server but `except` (the lost writer) that gives
    /// it at once; refused unless that is a majority of all the set's servers, the lost
    /// one counted. A majority of those this instance sees running would not do: cut
    /// off from all but one replica, it would count one of one and promote it while the
    /// rest of the fleet, with the other servers, goes on with the writer it lost.
    ///
    /// (`failover.quorum = "majority_of_running"` asks only that, for a lone instance.)
    /// Two servers are the exception: after losing one, a majority of two is out of
    /// reach for good, so the survivor's lock alone is the quorum there; what keeps a
    /// cut-off instance from promoting it is the replica's own word that it lost its
    /// primary too (see the failover).
    pub async fn acquire(
        router: &Router,
        creds: &BackendCredentials,
        except: Option<&Member>,
    ) -> Result<WriterLock, ChangeError> {
        let all = router.members.len();
        let running: Vec<&Arc<Member>> = router
            .members
            .iter()
            .filter(|m| {
                !except.is_some_and(|e| std::ptr::eq(m.as_ref(), e))
                    && m.state.load().health == Health::Up
            })
            .collect();
        let need = match router.failover.quorum {
            Quorum::MajorityOfAll => quorum(all, except.is_some()),
            Quorum::MajorityOfRunning => running.len() / 2 + 1,
        };
        let mut held = Vec::new();
        let mut refused = 0;
        // In configuration order, as every instance asks: one that misses a lock stops
        // as soon as a majority is out of reach, leaving the rest to the one that got
        // it, rather than both holding half.
        for (i, m) in running.iter().enumerate() {
            if held.len() + (running.len() - i) < need {
                break;
            }
            let Ok(mut c) = super::failover::connect(m, creds, router.monitor.timeout).await else {
                continue;
            };
            let sql = format!("SELECT GET_LOCK('{LOCK}', 0)");
            match super::failover::scalar(&mut c, &sql).await.as_deref() {
                Ok("1") => held.push(c),
                Ok(_) => refused += 1,
                Err(_) => {}
            }
        }
        if held.len() >= need {
            return Ok(WriterLock { held });
        }
        let lock = WriterLock { held };
        let n = lock.held.len();
        lock.release().await;
        if refused > 0 {
            return Err(ChangeError::Elsewhere(format!(
                "another Sluice instance is changing the writer: this one holds the lock \
                 on {n} of the {all} servers, and needs {need}"
            )));
        }
        Err(ChangeError::OutOfReach(format!(
            "this instance reaches {} of the {all} servers and needs {need} to change the \
             writer: the others may still see it",
            running.len()
        )))
    }

    /// Gives the lock back (closing the connections would too, a moment later).
    pub async fn release(mut self) {
        for c in &mut self.held {
            let _ = super::failover::scalar(c, &format!("SELECT RELEASE_LOCK('{LOCK}')")).await;
        }
    }
}

/// A server other than `lost` that takes writes: another instance promoted it while
/// this one waited for the lock. Read again from the servers, not from the monitor's
/// last check, which may predate the promotion.
pub async fn promoted_elsewhere(
    router: &Router,
    creds: &BackendCredentials,
    lost: &Member,
) -> Option<Arc<Member>> {
    for m in &router.members {
        if std::ptr::eq(m.as_ref(), lost) || !m.usable() || m.state.load().health != Health::Up {
            continue;
        }
        let Ok(mut c) = super::failover::connect(m, creds, router.monitor.timeout).await else {
            continue;
        };
        if super::failover::scalar(&mut c, "SELECT @@read_only")
            .await
            .as_deref()
            == Ok("0")
        {
            return Some(m.clone());
        }
    }
    None
}

/// Whether the server on `c` is already a read-only replica of `writer`: another
/// instance rejoined it (an old primary) while this one waited for the lock.
pub async fn replica_of(c: &mut BackendConn, writer: &Member) -> bool {
    let crate::stream::Endpoint::Tcp(address) = &writer.pool.server.endpoint else {
        return false;
    };
    let Some(port) = address.rsplit_once(':').map(|(_, p)| p.to_owned()) else {
        return false;
    };
    let read_only = super::failover::scalar(c, "SELECT @@read_only").await;
    let status = match c.query_named_row("SHOW SLAVE STATUS").await {
        Ok(Some(cols)) => cols,
        _ => return false,
    };
    let port_is = status
        .iter()
        .any(|(n, v)| n == "Master_Port" && v.as_deref() == Some(port.as_bytes()));
    read_only.as_deref() == Ok("1") && port_is
}

/// How many servers' locks make a writer change safe: a majority of all `servers`,
/// but one when a set of two lost one (`after_loss`).
fn quorum(servers: usize, after_loss: bool) -> usize {
    if servers == 2 && after_loss {
        1
    } else {
        servers / 2 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::quorum;

    #[test]
    fn a_majority_of_all_servers_the_lost_one_counted() {
        assert_eq!(quorum(1, true), 1);
        assert_eq!(quorum(3, true), 2);
        assert_eq!(quorum(3, false), 2);
        assert_eq!(quorum(4, true), 3);
        assert_eq!(quorum(5, true), 3);
        // A pair that lost one can only go on with the other.
        assert_eq!(quorum(2, true), 1);
        assert_eq!(quorum(2, false), 2);
    }
}
