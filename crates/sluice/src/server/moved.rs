//! The sessions a hand-over moves: the old process sends each one that leaves
//! (`frontend::Departure`) to the successor on the hand-over's connection; the successor
//! serves each one it receives as if it had logged in there (`frontend::arrive`). Then,
//! once the old process holds no session, its cache's entries (`cache/carry.rs`).

use super::handover;
use crate::frontend::{self, Departure, Frontend};
use crate::shutdown::{Drain, Shutdown};
use crate::stats::Stats;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// What comes before the cache's entries: where each binlog reader of the old process
/// had read to (server, file, position), `None` for one not following.
#[derive(serde::Serialize, serde::Deserialize)]
struct CacheHeader {
    binlog: Vec<Option<(String, String, u64)>>,
}

/// Old side: opens the way out for the sessions; returns the thread that sends them,
/// which ends once the way is closed ([`close`]) and the last one went, with the
/// connection for the cache's entries (none if the successor stopped taking).
pub(super) fn open(
    fe: &Arc<Frontend>,
    successor: UnixStream,
) -> std::thread::JoinHandle<Option<UnixStream>> {
    let (tx, rx) = std::sync::mpsc::channel::<Departure>();
    *fe.departures.lock() = Some(tx);
    let fe = fe.clone();
    std::thread::spawn(move || {
        let mut moved = 0u64;
        let mut failed = false;
        for d in rx {
            if failed {
                // Its socket closes here: the client sees its connection end.
                Stats::incr(&fe.stats.sessions_not_moved);
                continue;
            }
            match handover::send_session(&successor, &d.parcel, d.socket.as_fd()) {
                Ok(()) => moved += 1,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "hand-over: the successor stopped taking sessions; the rest stay here");
                    Stats::incr(&fe.stats.sessions_not_moved);
                    fe.departures.lock().take();
                    failed = true;
                }
            }
        }
        tracing::info!(moved, "hand-over: sessions sent to the successor");
        (!failed && handover::end_sessions(&successor).is_ok()).then_some(successor)
    })
}

/// Old side, once no session is left here (none can write any more): the cache's
/// entries, after where its binlog readers have read up to, then the end.
pub(super) fn send_cache(fe: &Frontend, successor: UnixStream) {
    if let Some(cache) = &fe.cache {
        let header = CacheHeader {
            binlog: cache.read_up_to(),
        };
        let header = serde_json::to_string(&header).unwrap_or_default();
        let frames = cache.carry_out();
        let sent = handover::send_data(&successor, header.as_bytes()).and_then(|()| {
            frames
                .iter()
                .try_for_each(|f| handover::send_data(&successor, f))
        });
        match sent {
            Ok(()) => tracing::info!(
                entries = frames.len(),
                "hand-over: cache entries sent to the successor"
            ),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "hand-over: the cache's entries did not all go")
            }
        }
    }
    let _ = handover::end_sessions(&successor);
}

/// Old side: no session leaves from now on (the drain bound passed, or all went).
pub(super) fn close(fe: &Frontend) {
    fe.departures.lock().take();
}

/// New side: serves each session the old process sends on `from_old`, until it sends
/// its last. Each holds a place under the client limit when one is free (it was
/// admitted already: it is served either way) and keeps the drain open.
pub(super) fn receive(
    fe: &Arc<Frontend>,
    from_old: UnixStream,
    limit: &Arc<Semaphore>,
    shutdown: &Shutdown,
    drain: &Drain,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cache = fe.cache.clone();
    std::thread::spawn(move || {
        loop {
            match handover::receive_session(&from_old) {
                Ok(Some(session)) => {
                    if tx.send(session).is_err() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "hand-over: receiving sessions failed; the old process keeps the rest");
                    break;
                }
            }
        }
        // The sessions' tasks run from here on, whatever comes next.
        drop(tx);
        if let Some(cache) = cache {
            receive_cache(&cache, &from_old);
            cache.carried_all();
        }
    });
    let (fe, limit, shutdown, guard) = (fe.clone(), limit.clone(), shutdown.clone(), drain.guard());
    tokio::spawn(async move {
        let mut received = 0u64;
        while let Some((parcel, socket)) = rx.recv().await {
            received += 1;
            let (fe, permit, shutdown, guard) = (
                fe.clone(),
                limit.clone().try_acquire_owned().ok(),
                shutdown.clone(),
                guard.clone(),
            );
            tokio::spawn(async move {
                let (_permit, _guard) = (permit, guard);
                Stats::incr(&fe.stats.client_connections_active);
                frontend::arrive(fe.clone(), parcel, socket, shutdown).await;
                Stats::decr(&fe.stats.client_connections_active);
            });
        }
        tracing::info!(
            received,
            "hand-over: sessions taken from the process before"
        );
    });
}

/// New side: the old process's cache entries, each taken unless something it read was
/// written here since this process started (or the binlog readers here may have missed
/// a write the old ones had not read).
fn receive_cache(cache: &crate::cache::QueryCache, from_old: &UnixStream) {
    let header = match handover::receive_data(from_old) {
        Ok(Some(h)) => h,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "hand-over: no cache entries from the process before");
            return;
        }
    };
    let covered = serde_json::from_slice::<CacheHeader>(&header)
        .is_ok_and(|h| cache.binlog_covers(&h.binlog));
    if !covered {
        tracing::info!("hand-over: the binlog readers here did not start where the old ones had read to: its cache entries are not taken");
    }
    let (mut taken, mut refused) = (0u64, 0u64);
    loop {
        match handover::receive_data(from_old) {
            Ok(Some(frame)) if covered && cache.carry_in(&frame) => taken += 1,
            Ok(Some(_)) => refused += 1,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "hand-over: receiving cache entries failed");
                break;
            }
        }
    }
    tracing::info!(
        taken,
        refused,
        "hand-over: cache entries taken from the process before"
    );
}
