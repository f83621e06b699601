//! Router: which server a statement runs on. Servers are members of one replication
//! cluster: at most one is the writer, the others are readers while they are healthy
//! and within their lag limit. Writes, transactions and pinned sessions go to the
//! writer; plain reads outside transactions go to a reader picked by weight and observed
//! latency, preferring Sluice's zone, and one that has applied the GTID the read must
//! see. The monitor keeps each member's [`ServerState`] and elects the writer; the
//! router only reads them, so it decides without I/O (leases aside).

pub mod commits;
pub mod config;
pub mod gtid;
mod member;
pub mod rules;

use crate::backend::{BackendConn, PoolKey, PooledConn, ServerPool};
use crate::error::BackendError;
use arc_swap::{ArcSwap, ArcSwapOption};
use config::{
    Consistency, FailoverConfig, GaleraWriters, MonitorConfig, RoleConfig, RoutingConfig,
    WriterReads,
};
use gtid::GtidPos;
use parking_lot::Mutex;
use rules::Rules;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use member::{FlowControl, GaleraState, Health, Member, ReplicaState, ServerState};

/// Where a lease must go, after the rules and the statement's kind are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Writer,
    /// A reader that has applied `need` (or waits for it, or the writer).
    Reader {
        need: Option<GtidPos>,
    },
    Group(Arc<str>),
    /// The Galera node a session's writes went to (`galera_writers = "all"`): its reads
    /// after them go there, where its writes are committed; another synced node when
    /// that one left.
    Node(NodeRef),
}

/// A member named by a target: equal when it is the same member.
#[derive(Clone)]
pub struct NodeRef(pub Arc<Member>);

impl PartialEq for NodeRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for NodeRef {}

impl std::fmt::Debug for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

/// A chosen server, and the GTID to wait for there before the statement.
pub struct Pick {
    pub member: Arc<Member>,
    pub wait_for: Option<GtidPos>,
}

/// The cluster's members, the writer, and the routing settings.
pub struct Router {
    pub members: Vec<Arc<Member>>,
    writer: ArcSwapOption<Member>,
    /// Woken when the writer changes or a switchover ends.
    pub writer_changed: tokio::sync::Notify,
    /// Counts switchovers begun: sessions idle in a transaction they can replay move
    /// it to the new writer rather than keep the old one busy.
    pub switching: tokio::sync::watch::Sender<u64>,
    /// A switchover is moving the writer: new writer leases wait.
    pub paused: AtomicBool,
    pub routing: RoutingConfig,
    pub rules: ArcSwap<Rules>,
    pub monitor: MonitorConfig,
    pub failover: FailoverConfig,
    /// The latest GTID any session wrote through this Sluice (global consistency).
    global_gtid: Mutex<GtidPos>,
    /// The latest transaction of the writer's binlog the query cache's reader reported
    /// (and so invalidated for): what a cache fill on a replica must have applied.
    binlog_seen: Mutex<GtidPos>,
    /// The writer's own position as the monitor last read it there, with that writer:
    /// what it had logged before any statement sent to it from now on.
    writer_seen: Mutex<Option<(Arc<Member>, GtidPos)>>,
    /// The GTIDs acknowledged, and the last promotion: whether a commit whose reply was
    /// lost with its writer can be on the new one.
    pub commits: commits::Commits,
    /// Replays waiting for the new writer, which other writer statements let go first.
    pub replay_gate: Arc<commits::ReplayGate>,
    /// Whether reads may go elsewhere than the writer at all.
    split: bool,
    pub stats: RouterStats,
    /// The other Sluice instances in front of these servers, once the fleet started.
    pub coordination: std::sync::OnceLock<Arc<dyn Coordination>>,
}

/// A boxed future, for [`Coordination`]'s methods.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What routing and failover need of the other Sluice instances in front of the same
/// servers (`crate::fleet` provides it).
pub trait Coordination: Send + Sync {
    /// The writer the fleet last named (promoted or switched over to), by name.
    fn named_writer(&self) -> Option<String>;
    /// Before this instance changes the writer: Err when it may not (with etcd: etcd
    /// can't be reached, or another instance holds the duty). The servers' writer lock
    /// is taken after this.
    fn begin_writer_change(&self) -> BoxFuture<'_, Result<(), String>>;
    /// The change ended: `to` is the writer it made (told to every instance).
    fn end_writer_change(&self, to: Option<String>) -> BoxFuture<'_, ()>;
    /// A switchover away from `from` begins: the other instances hold their writes,
    /// and this returns once what they run on `from` has ended (bounded by `timeout`).
    fn pause_peers(&self, from: &str, timeout: Duration) -> BoxFuture<'_, ()>;
}

#[derive(Default)]
pub struct RouterStats {
    pub reads_to_readers: AtomicU64,
    pub reads_to_writer: AtomicU64,
    pub gtid_waits: AtomicU64,
    pub gtid_wait_timeouts: AtomicU64,
    pub retried_reads: AtomicU64,
    /// Transactions run again on a new writer after theirs was lost, how many went on,
    /// and how many could not, by why.
    pub replays_attempted: AtomicU64,
    pub replays_succeeded: AtomicU64,
    pub replays_refused: AtomicU64,
    pub replays_refused_by: parking_lot::Mutex<std::collections::BTreeMap<&'static str, u64>>,
    /// COMMITs (and wrapped autocommit writes) whose reply was lost, found on the new
    /// writer's binlog and answered as committed (counted among the replays succeeded
    /// too).
    pub commits_found: AtomicU64,
    pub writer_waits: AtomicU64,
    pub writer_wait_timeouts: AtomicU64,
    pub failovers: AtomicU64,
    pub switchovers: AtomicU64,
    pub blocked: AtomicU64,
    pub timeouts: AtomicU64,
    /// The last failover or switchover attempt, done or failed (for the admin view).
    pub last_failover: Mutex<Option<FailoverRecord>>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct FailoverRecord {
    pub kind: &'static str,
    pub from: Option<String>,
    pub to: Option<String>,
    pub at: String,
    pub took_ms: u64,
    /// "ok", or why it did not happen.
    pub outcome: String,
    /// The statement that failed, on which server, and the server's answer.
    pub failed_step: Option<String>,
    /// What was undone after the failure, last change first.
    pub undone: Vec<String>,
    /// Changes that could not be undone: the servers need a person.
    pub not_undone: Vec<String>,
    /// What went wrong without stopping it (a replica not repointed).
    pub notes: Vec<String>,
}

impl Router {
    pub fn new(
        members: Vec<Arc<Member>>,
        routing: RoutingConfig,
        monitor: MonitorConfig,
        failover: FailoverConfig,
    ) -> Result<Router, String> {
        let rules = Rules::new(&routing.rules)?;
        let split = routing.read_write_split && members.len() > 1;
        let router = Router {
            members,
            writer: ArcSwapOption::empty(),
            writer_changed: tokio::sync::Notify::new(),
            switching: tokio::sync::watch::channel(0).0,
            paused: AtomicBool::new(false),
            routing,
            rules: ArcSwap::from_pointee(rules),
            monitor,
            failover,
            global_gtid: Mutex::new(GtidPos::default()),
            binlog_seen: Mutex::new(GtidPos::default()),
            writer_seen: Mutex::new(None),
            commits: Default::default(),
            replay_gate: Default::default(),
            split,
            stats: RouterStats::default(),
            coordination: std::sync::OnceLock::new(),
        };
        router.elect();
        Ok(router)
    }

    /// Builds a member for `pool` from its server's configuration, carrying over what
    /// an earlier member of the same server knew.
    pub fn member(
        pool: Arc<ServerPool>,
        cfg: &config::ServerConfig,
        routing: &RoutingConfig,
        previous: Option<&Member>,
    ) -> Arc<Member> {
        let m = Member {
            pool,
            role: cfg.role,
            weight: cfg.weight.max(1),
            zone: cfg.zone.clone(),
            max_lag: cfg.max_lag.unwrap_or(routing.max_lag),
            groups: cfg.groups.clone(),
            state: ArcSwap::from_pointee(ServerState::default()),
            applied: Mutex::new(GtidPos::default()),
            ttfb_us: AtomicU64::new(0),
            ttfb_at_ms: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            fenced: AtomicBool::new(false),
            disabled: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            leftover_replication: AtomicBool::new(false),
        };
        if let Some(p) = previous {
            m.state.store(p.state.load_full());
            m.note_applied(&p.applied.lock());
            m.ttfb_us
                .store(p.ttfb_us.load(Ordering::Relaxed), Ordering::Relaxed);
            m.ttfb_at_ms
                .store(p.ttfb_at_ms.load(Ordering::Relaxed), Ordering::Relaxed);
            m.fenced
                .store(p.fenced.load(Ordering::Relaxed), Ordering::Relaxed);
            m.disabled
                .store(p.disabled.load(Ordering::Relaxed), Ordering::Relaxed);
            m.draining
                .store(p.draining.load(Ordering::Relaxed), Ordering::Relaxed);
            m.leftover_replication.store(
                p.leftover_replication.load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
        }
        Arc::new(m)
    }

    pub fn pools(&self) -> impl Iterator<Item = &Arc<ServerPool>> {
        self.members.iter().map(|m| &m.pool)
    }

    pub fn by_name(&self, name: &str) -> Option<&Arc<Member>> {
        self.members.iter().find(|m| m.name() == name)
    }

    pub fn writer(&self) -> Option<Arc<Member>> {
        self.writer.load_full()
    }

    /// Whether reads can go to readers at all (more than one server, split on).
    pub fn splits(&self) -> bool {
        self.split
    }

    /// Sets the writer by hand (failover, switchover); `None` while there is none.
    pub fn set_writer(&self, m: Option<Arc<Member>>) {
        let old = self.writer.load_full();
        let same = match (&old, &m) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            tracing::info!(
                from = old.as_ref().map(|m| m.name().to_owned()),
                to = m.as_ref().map(|m| m.name().to_owned()),
                "writer changed"
            );
            self.writer.store(m);
            self.writer_changed.notify_waiters();
        }
    }

    /// When more than one server takes writes (two promotions, or one that came back
    /// writable), the one the fleet named, or none: writes never go to two of them.
    /// None when at most one is writable, or no instance named a writer.
    fn several_writable_named(&self) -> Option<Option<Arc<Member>>> {
        let named = self.coordination.get()?.named_writer()?;
        let writable: Vec<&Arc<Member>> = self.members.iter().filter(|m| m.writable()).collect();
        if writable.len() < 2 {
            return None;
        }
        let chosen = writable.into_iter().find(|m| m.name() == named).cloned();
        if chosen.is_none() {
            tracing::error!(
                named,
                "several servers take writes and none is the one the fleet named: writes wait"
            );
        }
        Some(chosen)
    }

    /// Chooses the writer from what the monitor saw: the current one while it can
    /// take writes, else the first member that can. A single server is always the
    /// writer, whatever it says about itself.
    pub fn elect(&self) -> Option<Arc<Member>> {
        if self.members.len() == 1 {
            let only = self.members[0].clone();
            if self.writer.load().is_none() {
                self.set_writer(Some(only.clone()));
            }
            return Some(only);
        }
        let current = self.writer.load_full();
        if let Some(named) = self.several_writable_named() {
            self.set_writer(named.clone());
            return named;
        }
        let pinned = self
            .members
            .iter()
            .find(|m| m.role == RoleConfig::Writer && m.usable());
        let chosen = match (pinned, &current) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(c)) if c.writable() => Some(c.clone()),
            _ => self.members.iter().find(|m| m.writable()).cloned(),
        };
        // A replica another instance promoted after the writer was lost is left to the
        // failover watcher while commits of this instance's are in doubt: it settles them
        // against the new writer's binlog before any session is routed there.
        let promoted_elsewhere = current.is_none()
            && self.failover.enabled
            && chosen
                .as_ref()
                .is_some_and(|c| c.state.load().galera.is_none() && c.role != RoleConfig::Writer);
        if promoted_elsewhere && self.commits.in_doubt() {
            return None;
        }
        self.set_writer(chosen.clone());
        chosen
    }

    /// The GTID a read must see under `consistency`, given the session's last write.
    pub fn needed_gtid(
        &self,
        consistency: Consistency,
        session: Option<&GtidPos>,
    ) -> Option<GtidPos> {
        match consistency {
            Consistency::None => None,
            Consistency::Session => session.filter(|g| !g.is_empty()).cloned(),
            Consistency::Global => {
                let g = self.global_gtid.lock();
                (!g.is_empty()).then(|| g.clone())
            }
        }
    }

    /// The query cache's binlog reader reported this transaction, before the cache
    /// drops what it changed.
    pub fn note_binlog(&self, gtid: &GtidPos) {
        self.binlog_seen.lock().merge(gtid);
    }

    /// What a read that fills a cache entry must see on a replica: every transaction
    /// the binlog reader has reported, since the cache already dropped the entries they
    /// changed and would otherwise store a row from before them.
    pub fn fill_floor(&self, need: Option<GtidPos>) -> Option<GtidPos> {
        let seen = self.binlog_seen.lock();
        if seen.is_empty() {
            return need;
        }
        let mut floor = need.unwrap_or_default();
        floor.merge(&seen);
        Some(floor)
    }

    /// A session's write committed with this GTID.
    pub fn note_write(&self, gtid: &GtidPos) {
        self.global_gtid.lock().merge(gtid);
        self.commits.acknowledged(gtid);
        if let Some(w) = self.writer.load().as_ref() {
            w.note_applied(gtid);
        }
    }

    /// The latest GTID acknowledged through this Sluice, per domain, and what `on` (the
    /// writer a statement is about to be sent to) was last seen to have logged: a commit
    /// sent there now is logged past both.
    pub fn commit_floor(&self, on: Option<&Arc<Member>>) -> GtidPos {
        let mut floor = self.global_gtid.lock().clone();
        if let (Some(on), Some((seen, pos))) = (on, self.writer_seen.lock().as_ref()) {
            // Another server's sequence numbers say nothing of this one's: after a
            // failover the new writer may have logged less than the old one had.
            if Arc::ptr_eq(on, seen) {
                floor.merge(pos);
            }
        }
        floor
    }

    /// A failover is about to make `writer`, which has `has` of the old writer, the
    /// writer, having read its binlog after `scanned.0` (None: it did not, or could
    /// not): commits lost in flight are looked for there; what was acknowledged past
    /// `has` is gone, and the floors of commits sent from now on, and what `global`
    /// reads wait for, come back to what it has. (A switchover's new writer has
    /// everything: nothing changes.)
    pub fn promoted(
        &self,
        writer: &Arc<Member>,
        has: GtidPos,
        scanned: Option<(GtidPos, Vec<crate::binlog::scan::Logged>)>,
    ) {
        self.global_gtid.lock().cap(&has);
        self.commits.forget_beyond(&has);
        self.commits.promoted(writer, has, scanned);
    }

    /// The monitor read `pos` (its `gtid_current_pos`) on `member`: if that is the
    /// writer, a commit sent to it from now on is logged past it. Without it, a commit
    /// lost in flight before any was acknowledged through this Sluice (just after it
    /// started) could never be settled, and every write made around Sluice would widen
    /// what a failover has to read back.
    pub fn note_writer_position(&self, member: &Arc<Member>, pos: GtidPos) {
        if self.writer().is_some_and(|w| Arc::ptr_eq(&w, member)) {
            *self.writer_seen.lock() = Some((member.clone(), pos));
        }
    }

    #[cfg(test)]
    pub fn pick(&self, target: &Target) -> Option<Pick> {
        self.pick_excluding(target, &[])
    }

    /// The member a statement for `target` goes to now, among those not in `exclude`,
    /// or `None` when no server can take it yet (no writer during a failover). Pure:
    /// no I/O.
    pub fn pick_excluding(&self, target: &Target, exclude: &[Arc<Member>]) -> Option<Pick> {
        let excluded = |m: &Arc<Member>| exclude.iter().any(|x| Arc::ptr_eq(x, m));
        let writer = self.writer.load_full().filter(|w| !excluded(w));
        let to_writer = |w: Option<Arc<Member>>| {
            w.map(|member| Pick {
                member,
                wait_for: None,
            })
        };
        match target {
            Target::Writer if self.multi_writer() => {
                self.spread_writer(exclude).or_else(|| to_writer(writer))
            }
            Target::Writer => to_writer(writer),
            Target::Node(NodeRef(m)) => match m {
                m if m.writable() && !excluded(m) => Some(Pick {
                    member: m.clone(),
                    wait_for: None,
                }),
                _ => self.pick_excluding(&Target::Reader { need: None }, exclude),
            },
            Target::Group(g) => {
                let in_group: Vec<&Arc<Member>> = self
                    .members
                    .iter()
                    .filter(|m| m.groups.iter().any(|x| **x == **g) && m.usable() && !excluded(m))
                    .collect();
                balance(&self.prefer_zone(in_group)).map(|member| Pick {
                    member: member.clone(),
                    wait_for: None,
                })
            }
            Target::Reader { need } => {
                if !self.split {
                    return to_writer(writer);
                }
                let is_writer =
                    |m: &Arc<Member>| writer.as_ref().is_some_and(|w| Arc::ptr_eq(w, m));
                let mut readers: Vec<&Arc<Member>> = self
                    .members
                    .iter()
                    .filter(|m| !is_writer(m) && !excluded(m) && m.readable())
                    .collect();
                // Every synced node takes writes: the writer is a node like the others.
                if self.routing.writer_reads == WriterReads::Always || self.multi_writer() {
                    readers.extend(writer.iter());
                }
                let readers = self.prefer_zone(away_from_flow_control(readers));
                if readers.is_empty() {
                    return match self.routing.writer_reads {
                        WriterReads::Never => None,
                        _ => to_writer(writer),
                    };
                }
                let Some(need) = need else {
                    return balance(&readers).map(|m| Pick {
                        member: m.clone(),
                        wait_for: None,
                    });
                };
                let ready: Vec<&Arc<Member>> = readers
                    .iter()
                    .copied()
                    .filter(|m| is_writer(m) || m.has_applied(need))
                    .collect();
                if let Some(m) = balance(&ready) {
                    return Some(Pick {
                        member: m.clone(),
                        wait_for: None,
                    });
                }
                let waitable: Vec<&Arc<Member>> = readers
                    .iter()
                    .copied()
                    .filter(|m| m.can_wait_for_gtid())
                    .collect();
                if self.routing.consistency_wait.is_zero() || waitable.is_empty() {
                    return to_writer(writer);
                }
                balance(&waitable).map(|m| Pick {
                    member: m.clone(),
                    wait_for: Some(need.clone()),
                })
            }
        }
    }

    /// Whether a commit lost with the writer may have to be found on a new one
    /// (transaction replay, several servers, one writer): row-changing statements then
    /// name their connection in the binlog (`binlog/origin.rs`).
    pub fn settles_lost_commits(&self) -> bool {
        self.failover.transaction_replay && self.members.len() > 1 && !self.multi_writer()
    }

    /// Whether writes spread over every synced Galera node (`galera_writers = "all"`
    /// and the monitor has seen Galera nodes).
    pub fn multi_writer(&self) -> bool {
        self.routing.galera_writers == GaleraWriters::All
            && self.members.iter().any(|m| m.state.load().galera.is_some())
    }

    /// A synced Galera node for a write, by load and latency, away from a node that
    /// sends flow control (the cluster waits for it: more work there stalls everyone)
    /// and in Sluice's zone when one is.
    fn spread_writer(&self, exclude: &[Arc<Member>]) -> Option<Pick> {
        let nodes: Vec<&Arc<Member>> = self
            .members
            .iter()
            .filter(|m| {
                m.state.load().galera.is_some()
                    && m.writable()
                    && !exclude.iter().any(|x| Arc::ptr_eq(x, m))
            })
            .collect();
        let nodes = self.prefer_zone(away_from_flow_control(nodes));
        balance(&nodes).map(|m| Pick {
            member: m.clone(),
            wait_for: None,
        })
    }

    /// Same-zone members when Sluice has a zone and one of them is in the list.
    fn prefer_zone<'a>(&self, list: Vec<&'a Arc<Member>>) -> Vec<&'a Arc<Member>> {
        let Some(zone) = &self.routing.zone else {
            return list;
        };
        if list.iter().any(|m| m.zone.as_ref() == Some(zone)) {
            list.into_iter()
                .filter(|m| m.zone.as_ref() == Some(zone))
                .collect()
        } else {
            list
        }
    }

    /// Waits until a writer other than `not` exists and no switchover holds writes,
    /// up to `failover.write_wait`.
    pub async fn wait_for_writer(
        &self,
        not: Option<&Arc<Member>>,
    ) -> Result<Arc<Member>, BackendError> {
        let current = || {
            self.writer
                .load_full()
                .filter(|_| !self.paused.load(Ordering::Acquire))
                .filter(|w| !not.is_some_and(|n| Arc::ptr_eq(n, w)))
        };
        // The usual case, without registering for a wake-up.
        if let Some(w) = current() {
            return Ok(w);
        }
        let started = Instant::now();
        let deadline = started + self.failover.write_wait;
        let mut counted = false;
        loop {
            let notified = self.writer_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(w) = current() {
                return Ok(w);
            }
            if !counted {
                counted = true;
                crate::stats::Stats::incr(&self.stats.writer_waits);
            }
            let now = Instant::now();
            if now >= deadline {
                crate::stats::Stats::incr(&self.stats.writer_wait_timeouts);
                return Err(BackendError::NoServer {
                    role: "writer",
                    waited: now - started,
                });
            }
            // Woken by a change, or re-checked every 100 ms in case a wake-up was missed.
            let _ =
                tokio::time::timeout((deadline - now).min(Duration::from_millis(100)), notified)
                    .await;
        }
    }

    /// A connection on the server `target` goes to, preferring idle connections that
    /// `score` rates highest, on none of the `avoid` servers (a read sent again after
    /// its server was lost). A connect failure (nothing was sent) moves on: a read to
    /// another reader or the writer, a write to the next writer once there is one.
    /// Returns the pick too, with the GTID to wait for before the statement.
    pub async fn lease(
        &self,
        target: &Target,
        avoid: &[Arc<Member>],
        key: &PoolKey,
        schema: Option<&[u8]>,
        score: impl Fn(&BackendConn) -> u32,
        perfect: u32,
    ) -> Result<(PooledConn, Pick), BackendError> {
        let mut tried: Vec<Arc<Member>> = avoid.to_vec();
        let mut last = None;
        for _ in 0..self.members.len() + 2 {
            let pick = match target {
                Target::Writer => match self.multi_writer() {
                    true => match self.spread_writer(&tried) {
                        Some(p) => p,
                        None => Pick {
                            member: self.wait_for_writer(tried.last()).await?,
                            wait_for: None,
                        },
                    },
                    false => Pick {
                        member: self.wait_for_writer(tried.last()).await?,
                        wait_for: None,
                    },
                },
                _ => match self.pick_excluding(target, &tried) {
                    Some(p) => p,
                    None if matches!(target, Target::Group(_)) => break,
                    None if self.routing.writer_reads == WriterReads::Never => break,
                    // No reader left: the writer reads too rather than failing.
                    None => Pick {
                        member: self.wait_for_writer(None).await?,
                        wait_for: None,
                    },
                },
            };
            if tried.iter().any(|t| Arc::ptr_eq(t, &pick.member)) {
                break;
            }
            match pick
                .member
                .pool
                .lease_preferring(key, schema, &score, perfect)
                .await
            {
                Ok(conn) => return Ok((conn, pick)),
                // The server is there but busy: its queue already waited.
                Err(e @ (BackendError::PoolTimeout { .. } | BackendError::QueueFull { .. })) => {
                    return Err(e)
                }
                // Alone, there is no other server to wait for.
                Err(e) if self.members.len() == 1 => return Err(e),
                Err(e) if e.retry_safe() => {
                    tracing::debug!(server = pick.member.name(), error = %e, "lease failed; trying another server");
                    tried.push(pick.member);
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(BackendError::NoServer {
            role: match target {
                Target::Writer => "writer",
                Target::Reader { .. } => "reader",
                Target::Group(_) => "group",
                Target::Node(_) => "reader",
            },
            waited: Duration::ZERO,
        }))
    }

    /// A connection on the writer if one is free now; `None` rather than waiting.
    pub async fn try_lease_writer(
        &self,
        key: &PoolKey,
        schema: Option<&[u8]>,
    ) -> Result<Option<PooledConn>, BackendError> {
        match self.writer() {
            Some(w) => w.pool.try_lease(key, schema).await,
            None => Ok(None),
        }
    }
}

/// Picks among candidates: a first draw weighted by `weight`, kept unless a second
/// draw is clearly less loaded (a third of its cost or less). With equal latency,
/// reads spread by weight; a slow or busy server loses its share. One pick in 16 keeps
/// the first draw whatever the costs, so every server keeps being measured.
/// The members that are not sending Galera flow control, unless all of them are.
fn away_from_flow_control(list: Vec<&Arc<Member>>) -> Vec<&Arc<Member>> {
    let sending = |m: &Arc<Member>| {
        m.state
            .load()
            .galera
            .as_ref()
            .is_some_and(GaleraState::sending_flow_control)
    };
    if list.iter().any(|m| sending(m)) && !list.iter().all(|m| sending(m)) {
        list.into_iter().filter(|m| !sending(m)).collect()
    } else {
        list
    }
}

fn balance<'a>(list: &[&'a Arc<Member>]) -> Option<&'a Arc<Member>> {
    match list.len() {
        0 => return None,
        1 => return Some(list[0]),
        _ => {}
    }
    let total: u64 = list.iter().map(|m| u64::from(m.weight)).sum();
    let draw = |skip: Option<usize>| {
        let total = total - skip.map_or(0, |i| u64::from(list[i].weight));
        let mut r = rand::random::<u64>() % total.max(1);
        for (i, m) in list.iter().enumerate() {
            if Some(i) == skip {
                continue;
            }
            let w = u64::from(m.weight);
            if r < w {
                return i;
            }
            r -= w;
        }
        list.len() - 1
    };
    let a = draw(None);
    if rand::random::<u8>().is_multiple_of(16) {
        return Some(list[a]);
    }
    let b = draw(Some(a));
    if list[b].cost() * 3 <= list[a].cost() {
        Some(list[b])
    } else {
        Some(list[a])
    }
}

#[cfg(test)]
pub(crate) mod tests;
