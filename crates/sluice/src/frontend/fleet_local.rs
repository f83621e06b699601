//! What this instance does for the fleet: the runtime changes peers made, applied here,
//! and what peers ask of the sessions held here (KILL, holding writes while a peer
//! switches the writer over).

use super::{Frontend, SessionEntry};
use crate::auth::BackendCredentials;
use crate::fleet::{Change, KillTarget, Reply, Request};
use crate::router::{Health, Router};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct FleetLocal {
    pub fe: Arc<Frontend>,
    /// The monitor's account: what a failover peer's new writer is read with.
    creds: Option<Arc<BackendCredentials>>,
    /// Counts the holds a peer's switchover asked for: a hold ends at its end, or at
    /// its deadline unless a later one began.
    pauses: Arc<AtomicU64>,
}

impl FleetLocal {
    pub fn new(fe: Arc<Frontend>, creds: Option<Arc<BackendCredentials>>) -> Arc<FleetLocal> {
        Arc::new(FleetLocal {
            fe,
            creds,
            pauses: Arc::new(AtomicU64::new(0)),
        })
    }
}

impl Frontend {
    /// Tells the fleet of a runtime change made through this instance.
    pub(super) fn publish(&self, change: Change) {
        if let Some(fleet) = self.fleet.get() {
            fleet.publish(change);
        }
    }
}

/// Routes writes to `name` at once: a peer made it the writer and told us, before this
/// instance's monitor reads it writable. After a failover (`lost`: the writer it
/// replaced, down), this instance's commits lost in flight are first looked for on it,
/// as the peer did for its own.
fn follow_writer(
    router: Arc<Router>,
    creds: Option<Arc<BackendCredentials>>,
    name: &str,
    failover: bool,
) {
    let Some(new) = router.by_name(name).cloned() else {
        return;
    };
    let Some(creds) = creds.filter(|_| failover) else {
        crate::monitor::follow::install_writer(&router, &new);
        return;
    };
    tokio::spawn(async move {
        let lost = router
            .writer()
            .filter(|w| !Arc::ptr_eq(w, &new) && w.state.load().health == Health::Down);
        crate::monitor::follow::follow(&router, &creds, lost.as_deref(), &new).await;
    });
}

impl crate::fleet::Local for FleetLocal {
    fn apply(&self, change: &Change, live: bool) {
        let fe = &self.fe;
        let done = match change {
            Change::CacheRules { rules } => match &fe.cache {
                Some(cache) => {
                    super::cache_admin::set_rules(cache, rules.clone()).map_err(|e| e.join("; "))
                }
                None => Ok(()),
            },
            Change::Invalidate { what } => match &fe.cache {
                Some(cache) => super::cache_admin::invalidate(cache, what.clone()).map(|_| ()),
                None => Ok(()),
            },
            Change::Server { name, state } => fe
                .set_server_state(name, *state)
                .map(|_| ())
                .map_err(|(_, e)| e),
            Change::Writer { name } => {
                let router = fe.router.load_full();
                // Entries kept from long ago name a writer the monitor knows better.
                match live {
                    true => follow_writer(router, self.creds.clone(), name, true),
                    false => {
                        router.elect();
                    }
                }
                Ok(())
            }
            Change::SwitchoverEnded { to } => {
                let router = fe.router.load_full();
                if let Some(to) = to {
                    follow_writer(router.clone(), None, to, false);
                }
                self.pauses.fetch_add(1, Ordering::AcqRel);
                router.paused.store(false, Ordering::Release);
                router.writer_changed.notify_waiters();
                Ok(())
            }
        };
        match done {
            Ok(()) => tracing::info!(?change, "applied a peer's change"),
            Err(e) => tracing::warn!(?change, error = %e, "a peer's change does not apply here"),
        }
    }

    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Reply> + Send>> {
        let fe = self.fe.clone();
        match request {
            Request::Kill {
                target,
                query_only,
                user,
                privileged,
            } => Box::pin(kill(fe, target, query_only, user, privileged)),
            Request::PauseWrites { from, timeout_ms } => {
                let hold = (
                    self.pauses.clone(),
                    self.pauses.fetch_add(1, Ordering::AcqRel) + 1,
                );
                Box::pin(pause(fe, from, Duration::from_millis(timeout_ms), hold))
            }
        }
    }

    fn sessions(&self) -> u64 {
        self.fe.sessions.lock().len() as u64
    }
}

/// Holds new writes while a peer switches the writer over from `from`, and answers once
/// this instance's statements there have ended. The hold ends at the peer's word, or
/// after twice `timeout` if it never comes (and no later hold began: `hold` is the
/// count of holds and this one's number).
async fn pause(
    fe: Arc<Frontend>,
    from: String,
    timeout: Duration,
    hold: (Arc<AtomicU64>, u64),
) -> Reply {
    let router = fe.router.load_full();
    router.paused.store(true, Ordering::Release);
    router.switching.send_modify(|begun| *begun += 1);
    let watchdog = router.clone();
    tokio::spawn(async move {
        tokio::time::sleep(timeout * 2).await;
        let (holds, mine) = hold;
        if holds.load(Ordering::Acquire) == mine && watchdog.paused.swap(false, Ordering::AcqRel) {
            tracing::warn!("a peer's switchover never said it ended: writes go on");
            watchdog.writer_changed.notify_waiters();
        }
    });
    let deadline = Instant::now() + timeout;
    let old = router.by_name(&from).cloned();
    let leased = || old.as_ref().map_or(0, |m| m.pool.leased());
    while leased() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Reply::Paused {
        drained: leased() == 0,
    }
}

/// A peer's KILL of sessions held here, with the server's rules: a session may be
/// killed by its own user, or by an account privileged to kill others'.
async fn kill(
    fe: Arc<Frontend>,
    target: KillTarget,
    query_only: bool,
    user: String,
    privileged: bool,
) -> Reply {
    let may = |e: &SessionEntry| privileged || e.user == user;
    let targets: Vec<SessionEntry> = {
        let sessions = fe.sessions.lock();
        match &target {
            KillTarget::Session(id) => match sessions.get(id) {
                None => return Reply::Unknown,
                Some(e) if !may(e) => return Reply::Denied,
                Some(e) => vec![e.clone()],
            },
            KillTarget::User { name, host } => sessions
                .values()
                .filter(|e| {
                    &e.user == name
                        && may(e)
                        && host
                            .as_deref()
                            .is_none_or(|h| super::session::host_matches(h, &e.client))
                })
                .cloned()
                .collect(),
            KillTarget::Thread { server, thread } => {
                let owner = sessions.values().find(|e| {
                    e.live.attached()
                        && e.live.thread_id() == *thread
                        && e.live.server_name().as_deref() == Some(server.as_str())
                });
                match owner {
                    None => return Reply::Unknown,
                    Some(e) if !may(e) => return Reply::Denied,
                    Some(e) => vec![e.clone()],
                }
            }
        }
    };
    let params = crate::monitor::params();
    for t in &targets {
        if let Err(e) = super::session::stop_session(&fe, t, query_only, params.clone(), None).await
        {
            tracing::warn!(error = %e, "a peer's KILL could not stop a session's statement");
        }
    }
    Reply::Killed {
        count: targets.len() as u64,
    }
}
