//! How the process stops: a signal, or a successor that took the listeners over (then
//! the sessions here drain first, within `[handover] drain_timeout`); and what systemd
//! is told of it (`Type=notify`).

use super::handover::{self, Inherited, Named, Successor};
use super::reload_logged;
use super::upgrade::Upgrades;
use crate::config::{Config, Overrides};
use crate::frontend::Frontend;
use crate::shutdown::{self, Drain, Shutdown};
use crate::stats::Stats;
use sd_notify::NotifyState;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

/// With `--take-over`: the listening sockets of the process running on `[handover]
/// socket`. Without: none.
pub(super) async fn take_over(config: &Config, overrides: &Overrides) -> anyhow::Result<Inherited> {
    if !overrides.take_over {
        return Ok(Inherited::default());
    }
    let Some(socket) = config.handover.socket.clone() else {
        anyhow::bail!(
            "--take-over needs [handover] socket: where the running Sluice offers its listeners"
        );
    };
    let inherited = tokio::task::spawn_blocking(move || Inherited::take(&socket)).await??;
    tracing::info!("took the listeners over from the running Sluice");
    Ok(inherited)
}

/// With `[handover] socket`: offers `sockets` to the next process there, on a thread of
/// its own; resolves once one took them and accepts on them, with the connection the
/// sessions go to it on. `upgrades` hears how each attempt ends.
pub(super) fn offer_listeners(
    config: &Config,
    upgrades: &Arc<Upgrades>,
    sockets: Vec<(Named, OwnedFd)>,
    took_over: bool,
) -> tokio::sync::oneshot::Receiver<Successor> {
    let (done, handed_over) = tokio::sync::oneshot::channel();
    let Some(path) = config.handover.socket.clone() else {
        return handed_over;
    };
    // Bound before READY=1 goes to systemd, and before a successor says ready to the
    // process before: `systemctl reload` may come at once.
    let server = match handover::bind(&path, took_over) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(
                error = %format!("{e:#}"),
                "no hand-over: a restart will refuse connections while no process listens"
            );
            return handed_over;
        }
    };
    let ready_timeout = config.handover.ready_timeout;
    let upgrades = upgrades.clone();
    std::thread::spawn(move || {
        match handover::offer((server, &path), &sockets, ready_timeout, &upgrades) {
            Ok(successor) => {
                upgrades.handed_over(&successor);
                let _ = done.send(successor);
            }
            Err(e) => tracing::warn!(
                error = %format!("{e:#}"),
                "no hand-over: a restart will refuse connections while no process listens"
            ),
        }
    });
    handed_over
}

/// Tells systemd how the service is doing (`Type=notify` in sluice.service); does nothing
/// when systemd did not start Sluice (no `NOTIFY_SOCKET`).
pub(super) fn notify_systemd(state: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(state) {
        tracing::warn!(error = %e, "could not notify systemd");
    }
}

/// Why the process stops.
#[derive(Debug)]
pub(super) enum Stop {
    Signal,
    /// A new process took the listeners over and accepts on them; the sessions go to
    /// it on its connection.
    HandedOver(Successor),
}

/// The signals a running Sluice answers. Listened to before READY=1 goes to systemd
/// (or a client is accepted): systemd may send the reload's SIGHUP the moment it reads
/// READY=1, and a signal with no handler yet would kill the process.
pub(super) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn listen() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr2: signal(SignalKind::user_defined2())?,
        })
    }
}

/// Waits for SIGTERM, SIGINT or a completed hand-over, reloading the configuration on
/// each SIGHUP, and starting a successor on each SIGUSR2 meanwhile.
pub(super) async fn until_stopped(
    signals: Signals,
    fe: &Arc<Frontend>,
    stats: &Arc<Stats>,
    config_path: Option<&std::path::Path>,
    overrides: &Overrides,
    shutdown: &Shutdown,
    (handed_over, upgrades): (tokio::sync::oneshot::Receiver<Successor>, &Arc<Upgrades>),
) -> anyhow::Result<Stop> {
    // Without a hand-over (no `[handover] socket`, or the offer failed) the channel
    // closes at once. A oneshot polled again after it completed panics, and the loop
    // below polls it once per turn: closed, it waits forever instead.
    let handed_over = async move {
        match handed_over.await {
            Ok(successor) => successor,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::pin!(handed_over);
    let Signals {
        mut term,
        mut int,
        mut hup,
        mut usr2,
    } = signals;
    loop {
        tokio::select! {
            _ = term.recv() => return Ok(Stop::Signal),
            _ = int.recv() => return Ok(Stop::Signal),
            successor = &mut handed_over => return Ok(Stop::HandedOver(successor)),
            _ = hup.recv() => {
                // A reload (`systemctl reload` sends the SIGHUP) lasts until READY=1.
                let mut reloading = vec![NotifyState::Reloading];
                reloading.extend(NotifyState::monotonic_usec_now().ok());
                notify_systemd(&reloading);
                reload_logged(fe, stats, config_path, overrides, shutdown);
                notify_systemd(&[NotifyState::Ready]);
            }
            _ = usr2.recv() => {
                if let Err(e) = upgrades.begin() {
                    tracing::warn!(error = %e, "SIGUSR2: no successor started");
                }
            }
        }
    }
}

/// Takes no more clients, lets running statements finish within `grace`, lets the
/// history sampler write its file, and logs the final counts. `handed_over`: a
/// successor took the listeners over; the sessions here go to it as soon as they can
/// (on this connection), or go on until they end, within the drain bound, before the
/// rest.
pub(super) async fn shut_down(
    (grace, trigger): (Duration, shutdown::ShutdownTrigger),
    accept_tasks: Vec<tokio::task::JoinHandle<()>>,
    drain: Drain,
    handed_over: Option<(Duration, Successor, &Arc<Frontend>)>,
    sampler: Option<tokio::task::JoinHandle<()>>,
    stats: &Stats,
) {
    let mut drain = std::pin::pin!(drain.wait());
    let mut drained = false;
    let mut sending = None;
    if let Some((bound, successor, fe)) = handed_over {
        let fe = Arc::clone(fe);
        super::listener::keep_socket_files();
        // The successor accepts from here on; the sessions here go on until they end,
        // within the bound, rather than be cut mid-login or between two statements.
        for t in &accept_tasks {
            t.abort();
        }
        sending = Some((super::moved::open(&fe, successor.stream), fe.clone()));
        trigger.start_moving();
        tracing::info!(bound = ?bound, "handed over: no new clients here; sessions move once they can, or go on until they end");
        drained = tokio::time::timeout(bound, &mut drain).await.is_ok();
        super::moved::close(&fe);
        if !drained {
            let left = fe.sessions.lock().len();
            fe.stats
                .sessions_not_moved
                .fetch_add(left as u64, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(
                sessions = left,
                "hand-over drain bound reached: stopping the sessions left as at SIGTERM"
            );
        }
    }
    tracing::info!(grace = ?grace, "shutting down: no new clients, running statements may finish");
    trigger.trigger();
    for t in accept_tasks {
        let _ = t.await;
    }
    if !drained && tokio::time::timeout(grace, &mut drain).await.is_err() {
        tracing::warn!("shutdown grace period over; closing remaining sessions");
    }
    if let Some((sending, fe)) = sending {
        // The sessions sent last are on their way (the socket of one still queued would
        // close with this process); then, with no session left to write, the cache.
        let _ = tokio::task::spawn_blocking(move || {
            if let Ok(Some(successor)) = sending.join() {
                super::moved::send_cache(&fe, successor);
            }
        })
        .await;
    }
    if let Some(sampler) = sampler {
        // It writes the history file as it stops.
        let _ = tokio::time::timeout(Duration::from_secs(5), sampler).await;
    }
    for (name, _, value) in stats.snapshot() {
        tracing::info!(metric = name, value, "final count");
    }
}
