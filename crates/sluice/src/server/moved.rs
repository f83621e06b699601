//! The sessions a hand-over moves: the old process sends each one that leaves
//! (`frontend::Departure`) to the successor on the hand-over's connection; the successor
//! serves each one it receives as if it had logged in there (`frontend::arrive`).

use super::handover;
use crate::frontend::{self, Departure, Frontend};
use crate::shutdown::{Drain, Shutdown};
use crate::stats::Stats;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Old side: opens the way out for the sessions; returns the thread that sends them,
/// which ends once the way is closed ([`close`]) and the last one went.
pub(super) fn open(fe: &Arc<Frontend>, successor: UnixStream) -> std::thread::JoinHandle<()> {
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
        if !failed {
            let _ = handover::end_sessions(&successor);
        }
        tracing::info!(moved, "hand-over: sessions sent to the successor");
    })
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
    std::thread::spawn(move || loop {
        match handover::receive_session(&from_old) {
            Ok(Some(session)) => {
                if tx.send(session).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "hand-over: receiving sessions failed; the old process keeps the rest");
                return;
            }
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
