//! Router: which server a statement runs on. Servers are members of one replication
//! cluster: at most one is the writer, the others are readers while they are healthy
//! and within their lag limit. Writes, transactions and pinned sessions go to the
//! writer; plain reads outside transactions go to a reader picked by weight and observed
//! latency, preferring Sluice's zone, and one that has applied the GTID the read must
//! see. The monitor keeps each member's [`ServerState`] and elects the writer; the
//! router only reads them, so it decides without I/O (leases aside).

pub mod config;
pub mod gtid;
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
use std::time::{Duration, Instant, SystemTime};

/// A server as the monitor last saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Not checked yet: usable, since nothing says otherwise.
    #[default]
    Unknown,
    /// The last `up_after` checks (or the first one) succeeded.
    Up,
    /// The last `down_after` checks failed.
    Down,
}

/// A replica's replication threads and position (`SHOW SLAVE STATUS`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ReplicaState {
    pub source: String,
    pub io_running: String,
    pub sql_running: bool,
    pub seconds_behind: Option<u64>,
    pub gtid_io_pos: Option<String>,
    pub last_error: String,
}

/// A Galera node's state (`wsrep_*` status variables).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct GaleraState {
    /// 4 is Synced.
    pub local_state: u32,
    pub ready: bool,
    pub cluster_status: String,
    pub cluster_size: u32,
    pub flow_control_paused_ns: u64,
    /// Flow control over the monitor's last interval (deltas of the counters).
    pub flow: FlowControl,
}

/// A Galera node's part in flow control over the monitor's last interval: a node that
/// sends flow control is the slow one the cluster waits for.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct FlowControl {
    /// Share of the interval the node spent paused (`wsrep_flow_control_paused_ns`
    /// delta over the wall-clock delta), 0 to 1.
    pub paused_share: f64,
    /// Flow-control pause requests the node sent (`wsrep_flow_control_sent` delta).
    pub sent: u64,
    /// Pause requests it received from others (`wsrep_flow_control_recv` delta).
    pub received: u64,
    /// Write sets waiting to be applied (`wsrep_local_recv_queue`) at the check.
    pub recv_queue: u64,
    /// It was asking the cluster to pause at the check (`wsrep_flow_control_requested`).
    /// A node whose applier is stuck sends one pause request and then holds the pause
    /// for as long as it lasts: `sent` shows the start, this shows the whole of it.
    pub requested: bool,
}

impl GaleraState {
    /// It asked the cluster to pause in the last interval, or still holds it paused:
    /// it is the one that lags.
    pub fn sending_flow_control(&self) -> bool {
        self.flow.sent > 0 || self.flow.requested
    }

    pub fn synced(&self) -> bool {
        self.local_state == 4 && self.ready && self.cluster_status == "Primary"
    }
}

/// What the monitor knows of one server, swapped whole after each check.
#[derive(Clone, Debug, Default)]
pub struct ServerState {
    pub health: Health,
    pub read_only: Option<bool>,
    pub replica: Option<ReplicaState>,
    pub galera: Option<GaleraState>,
    /// `@@gtid_current_pos`.
    pub gtid: Option<GtidPos>,
    /// Connect-and-query time of the last check.
    pub ping: Option<Duration>,
    pub error: Option<String>,
    /// Over its lag limit (or not applying): out of the read set until it catches up.
    pub lagging: bool,
    pub checked_at: Option<SystemTime>,
    /// Needed privileges the monitor's account lacks here (`monitor::grants`); `None`
    /// until its grants have been read.
    pub missing_privileges: Option<Vec<&'static str>>,
}

/// One server of the cluster: its pool, its configured place, and what is known of it.
pub struct Member {
    pub pool: Arc<ServerPool>,
    pub role: RoleConfig,
    pub weight: u32,
    pub zone: Option<String>,
    pub max_lag: Duration,
    pub groups: Vec<String>,
    pub state: ArcSwap<ServerState>,
    /// At least this much is applied here: from the monitor and from GTID waits that
    /// succeeded, so that reads after them need no wait.
    applied: Mutex<GtidPos>,
    /// Exponentially weighted time to first byte of statements, microseconds.
    ttfb_us: AtomicU64,
    /// When it was last fed, in milliseconds since [`epoch`].
    ttfb_at_ms: AtomicU64,
    /// Reads routed here (for the balancing figures).
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    /// Kept out of routing by failover (an old primary) or by the operator.
    pub fenced: AtomicBool,
    pub disabled: AtomicBool,
    /// Drained by the operator: no new work; what runs there finishes.
    pub draining: AtomicBool,
    /// Promoted by a failover that could not clear its replication settings (`RESET
    /// SLAVE ALL` needs RELOAD): the stopped settings it still shows are leftovers,
    /// not a source it follows, so they do not keep it from being the writer.
    pub leftover_replication: AtomicBool,
}

impl Member {
    pub fn name(&self) -> &str {
        &self.pool.server.name
    }

    pub fn observe_ttfb(&self, d: Duration) {
        let sample = d.as_micros().min(u128::from(u32::MAX)) as u64;
        let old = self.ttfb_us.load(Ordering::Relaxed);
        // An EWMA with weight 1/8, each sample capped at 4 times the average: one stall
        // of a busy machine moves it little, a server that stays slow still shows
        // within tens of statements.
        let new = if old == 0 {
            sample
        } else {
            (old * 7 + sample.min(old * 4)) / 8
        };
        self.ttfb_us.store(new.max(1), Ordering::Relaxed);
        self.ttfb_at_ms.store(since_epoch_ms(), Ordering::Relaxed);
    }

    pub fn ttfb(&self) -> Duration {
        Duration::from_micros(self.ttfb_us.load(Ordering::Relaxed))
    }

    /// Load as the balancer sees it: latency times the statements in flight. A
    /// latency not measured for a while says nothing any more (a server that lost its
    /// share gets no new samples): it counts as fast until measured again.
    fn cost(&self) -> u64 {
        let fresh = since_epoch_ms().saturating_sub(self.ttfb_at_ms.load(Ordering::Relaxed))
            < STALE_TTFB_MS;
        let ttfb = if fresh {
            self.ttfb_us.load(Ordering::Relaxed).max(MIN_TTFB_US)
        } else {
            MIN_TTFB_US
        };
        ttfb * (self.pool.leased() as u64 + 1)
    }

    /// Whether a read needing `need` may run here without waiting. Never on a Galera
    /// node: its GTIDs are its own unless `wsrep_gtid_mode` aligns them, and it applies
    /// other nodes' writes after they commit there.
    pub fn has_applied(&self, need: &GtidPos) -> bool {
        self.state.load().galera.is_none() && self.applied.lock().includes(need)
    }

    /// A GTID wait (`MASTER_GTID_WAIT`) works here: a replica, not a Galera node.
    fn can_wait_for_gtid(&self) -> bool {
        self.state.load().galera.is_none()
    }

    pub fn note_applied(&self, pos: &GtidPos) {
        self.applied.lock().merge(pos);
    }

    pub fn usable(&self) -> bool {
        !self.fenced.load(Ordering::Relaxed)
            && !self.disabled.load(Ordering::Relaxed)
            && !self.draining.load(Ordering::Relaxed)
            && self.state.load().health != Health::Down
    }

    /// Could take writes, from what the monitor saw.
    pub fn writable(&self) -> bool {
        if !self.usable() || self.role == RoleConfig::Reader {
            return false;
        }
        if self.role == RoleConfig::Writer {
            return true;
        }
        let s = self.state.load();
        match &s.galera {
            Some(g) => g.synced(),
            None => {
                s.read_only == Some(false)
                    && match &s.replica {
                        None => true,
                        Some(r) => {
                            self.leftover_replication.load(Ordering::Relaxed)
                                && !r.sql_running
                                && r.io_running == "No"
                        }
                    }
            }
        }
    }

    /// Could take reads as a reader (not the writer).
    fn readable(&self) -> bool {
        if !self.usable() {
            return false;
        }
        let s = self.state.load();
        if s.health != Health::Up || s.lagging {
            return false;
        }
        match &s.galera {
            Some(g) => g.synced(),
            None => s.read_only == Some(true),
        }
    }
}

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
    /// A switchover is moving the writer: new writer leases wait.
    pub paused: AtomicBool,
    pub routing: RoutingConfig,
    pub rules: ArcSwap<Rules>,
    pub monitor: MonitorConfig,
    pub failover: FailoverConfig,
    /// The latest GTID any session wrote through this Sluice (global consistency).
    global_gtid: Mutex<GtidPos>,
    /// Whether reads may go elsewhere than the writer at all.
    split: bool,
    pub stats: RouterStats,
}

#[derive(Default)]
pub struct RouterStats {
    pub reads_to_readers: AtomicU64,
    pub reads_to_writer: AtomicU64,
    pub gtid_waits: AtomicU64,
    pub gtid_wait_timeouts: AtomicU64,
    pub retried_reads: AtomicU64,
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
            paused: AtomicBool::new(false),
            routing,
            rules: ArcSwap::from_pointee(rules),
            monitor,
            failover,
            global_gtid: Mutex::new(GtidPos::default()),
            split,
            stats: RouterStats::default(),
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
        let pinned = self
            .members
            .iter()
            .find(|m| m.role == RoleConfig::Writer && m.usable());
        let chosen = match (pinned, &current) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(c)) if c.writable() => Some(c.clone()),
            _ => self.members.iter().find(|m| m.writable()).cloned(),
        };
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

    /// A session's write committed with this GTID.
    pub fn note_write(&self, gtid: &GtidPos) {
        self.global_gtid.lock().merge(gtid);
        if let Some(w) = self.writer.load().as_ref() {
            w.note_applied(gtid);
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

/// Latencies under this are noise on any network.
const MIN_TTFB_US: u64 = 50;
/// A latency older than this is not trusted.
const STALE_TTFB_MS: u64 = 2_000;

fn since_epoch_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
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
mod tests {
    use super::*;
    use crate::backend::config::{PoolConfig, TlsMode};
    use crate::backend::Server;
    use config::ServerConfig;

    fn member(name: &str, f: impl FnOnce(&mut ServerConfig)) -> Arc<Member> {
        let mut cfg = ServerConfig::at(&format!("127.0.0.1:{}", 1000 + name.len()));
        cfg.name = Some(name.into());
        f(&mut cfg);
        let server = Arc::new(Server {
            name: name.into(),
            endpoint: cfg.endpoint(),
            tls: TlsMode::Disabled,
            tls_config: None,
            max_connections: 4,
            counters: Default::default(),
            stmts: Default::default(),
            globals: Default::default(),
        });
        let pool = ServerPool::new(server, PoolConfig::default(), Default::default());
        Router::member(pool, &cfg, &RoutingConfig::default(), None)
    }

    fn set(m: &Member, f: impl FnOnce(&mut ServerState)) {
        let mut s = (*m.state.load_full()).clone();
        f(&mut s);
        m.state.store(Arc::new(s));
    }

    fn primary(m: &Member) {
        set(m, |s| {
            s.health = Health::Up;
            s.read_only = Some(false);
            s.replica = None;
        });
    }

    fn replica(m: &Member) {
        set(m, |s| {
            s.health = Health::Up;
            s.read_only = Some(true);
            s.replica = Some(ReplicaState {
                sql_running: true,
                ..Default::default()
            });
        });
    }

    fn router(members: Vec<Arc<Member>>, routing: RoutingConfig) -> Router {
        Router::new(
            members,
            routing,
            MonitorConfig::default(),
            FailoverConfig::default(),
        )
        .unwrap()
    }

    /// Members a (primary), b and c (replicas), and a router over them.
    fn cluster(routing: RoutingConfig) -> (Arc<Member>, Arc<Member>, Arc<Member>, Router) {
        let (a, b, c) = (
            member("a", |_| {}),
            member("b", |_| {}),
            member("c", |_| {}),
        );
        primary(&a);
        replica(&b);
        replica(&c);
        let r = router(vec![a.clone(), b.clone(), c.clone()], routing);
        (a, b, c, r)
    }

    fn name(p: Option<Pick>) -> String {
        p.map(|p| p.member.name().to_owned()).unwrap_or_default()
    }

    #[tokio::test]
    async fn the_writable_server_is_elected_and_kept_while_it_can_write() {
        let (a, b, c) = (
            member("a", |_| {}),
            member("b", |_| {}),
            member("c", |_| {}),
        );
        let r = router(
            vec![a.clone(), b.clone(), c.clone()],
            RoutingConfig::default(),
        );
        assert!(r.writer().is_none(), "nothing known yet");
        replica(&a);
        primary(&b);
        replica(&c);
        assert_eq!(r.elect().unwrap().name(), "b");
        // A second writable server (an old primary back) does not take over.
        primary(&a);
        assert_eq!(r.elect().unwrap().name(), "b");
        set(&b, |s| s.health = Health::Down);
        assert_eq!(r.elect().unwrap().name(), "a");
        a.fenced.store(true, Ordering::Relaxed);
        assert!(r.elect().is_none(), "replicas wait for a failover");
    }

    #[tokio::test]
    async fn reads_go_to_healthy_in_lag_readers_and_fall_back_to_the_writer() {
        let (a, b, c, r) = cluster(RoutingConfig::default());
        let read = Target::Reader { need: None };
        for _ in 0..50 {
            assert_ne!(name(r.pick(&read)), "a");
        }
        set(&b, |s| s.lagging = true);
        for _ in 0..20 {
            assert_eq!(name(r.pick(&read)), "c");
        }
        set(&c, |s| s.health = Health::Down);
        assert_eq!(
            name(r.pick(&read)),
            "a",
            "the writer reads when no reader can"
        );
        assert_eq!(name(r.pick(&Target::Writer)), "a");
        assert_eq!(name(r.pick_excluding(&read, std::slice::from_ref(&a))), "");

        let always = router(
            vec![a.clone(), b.clone(), c.clone()],
            RoutingConfig {
                writer_reads: WriterReads::Always,
                ..Default::default()
            },
        );
        assert!(
            (0..200).any(|_| name(always.pick(&read)) == "a"),
            "the writer is one of the readers"
        );

        let never = router(
            vec![a.clone(), b.clone(), c.clone()],
            RoutingConfig {
                writer_reads: WriterReads::Never,
                ..Default::default()
            },
        );
        assert!(never.pick(&read).is_none());
    }

    #[tokio::test]
    async fn reads_follow_weights_zone_and_the_gtid_they_need() {
        let a = member("a", |_| {});
        let b = member("b", |c| c.weight = 1);
        let c = member("c", |c| {
            c.weight = 3;
            c.zone = Some("z2".into());
        });
        primary(&a);
        replica(&b);
        replica(&c);
        let r = router(
            vec![a.clone(), b.clone(), c.clone()],
            RoutingConfig::default(),
        );
        let read = Target::Reader { need: None };
        let on_c = (0..4000).filter(|_| name(r.pick(&read)) == "c").count();
        assert!((2700..3300).contains(&on_c), "weight 3 of 4: {on_c}");

        let zoned = router(
            vec![a.clone(), b.clone(), c.clone()],
            RoutingConfig {
                zone: Some("z2".into()),
                ..Default::default()
            },
        );
        for _ in 0..20 {
            assert_eq!(name(zoned.pick(&read)), "c");
        }

        let need = GtidPos::parse("0-1-10").unwrap();
        b.note_applied(&GtidPos::parse("0-1-10").unwrap());
        c.note_applied(&GtidPos::parse("0-1-9").unwrap());
        let with_need = Target::Reader {
            need: Some(need.clone()),
        };
        for _ in 0..20 {
            let p = r.pick(&with_need).unwrap();
            assert_eq!(p.member.name(), "b", "only b has applied it");
            assert!(p.wait_for.is_none());
        }
        let further = Target::Reader {
            need: GtidPos::parse("0-1-11"),
        };
        let p = r.pick(&further).unwrap();
        assert_eq!(
            p.wait_for,
            GtidPos::parse("0-1-11"),
            "a reader waits for it"
        );
        let no_wait = router(
            vec![a.clone(), b.clone(), c.clone()],
            RoutingConfig {
                consistency_wait: Duration::ZERO,
                ..Default::default()
            },
        );
        assert_eq!(name(no_wait.pick(&further)), "a", "or the writer answers");
    }

    #[tokio::test]
    async fn reads_need_the_sessions_write_or_every_write_through_sluice() {
        let (_a, _b, _c, r) = cluster(RoutingConfig::default());
        let mine = GtidPos::parse("0-1-7").unwrap();
        assert_eq!(r.needed_gtid(Consistency::None, Some(&mine)), None);
        assert_eq!(
            r.needed_gtid(Consistency::Session, Some(&mine)),
            Some(mine.clone())
        );
        assert_eq!(r.needed_gtid(Consistency::Session, None), None);
        assert_eq!(r.needed_gtid(Consistency::Global, None), None);
        r.note_write(&GtidPos::parse("0-1-9").unwrap());
        r.note_write(&GtidPos::parse("0-1-8").unwrap());
        assert_eq!(
            r.needed_gtid(Consistency::Global, None),
            GtidPos::parse("0-1-9"),
            "the latest write of any session"
        );
    }

    #[tokio::test]
    async fn a_slow_reader_loses_its_share() {
        let (_a, b, c, r) = cluster(RoutingConfig::default());
        for _ in 0..40 {
            b.observe_ttfb(Duration::from_millis(20));
            c.observe_ttfb(Duration::from_micros(400));
        }
        let read = Target::Reader { need: None };
        let on_b = (0..1000).filter(|_| name(r.pick(&read)) == "b").count();
        assert!(
            on_b < 80,
            "50 times slower: chosen only to be measured, {on_b}"
        );
        for _ in 0..60 {
            b.observe_ttfb(Duration::from_micros(400));
        }
        let on_b = (0..1000).filter(|_| name(r.pick(&read)) == "b").count();
        assert!(
            (400..600).contains(&on_b),
            "fast again: half the reads, {on_b}"
        );
    }

    #[tokio::test]
    async fn galera_nodes_write_one_at_a_time_and_read_when_synced() {
        let nodes: Vec<Arc<Member>> = ["n1", "n2", "n3"]
            .iter()
            .map(|n| member(n, |_| {}))
            .collect();
        for n in &nodes {
            set(n, |s| {
                s.health = Health::Up;
                s.read_only = Some(false);
                s.galera = Some(GaleraState {
                    local_state: 4,
                    ready: true,
                    cluster_status: "Primary".into(),
                    cluster_size: 3,
                    ..GaleraState::default()
                });
            });
        }
        let r = router(nodes.clone(), RoutingConfig::default());
        assert_eq!(r.elect().unwrap().name(), "n1");
        for _ in 0..20 {
            assert_ne!(name(r.pick(&Target::Reader { need: None })), "n1");
        }
        // A read after a write goes to the writer node: the others apply it later.
        let need = Target::Reader {
            need: GtidPos::parse("0-1-5"),
        };
        nodes[1].note_applied(&GtidPos::parse("0-1-9").unwrap());
        assert_eq!(name(r.pick(&need)), "n1");
        // n1 leaves sync (donor, or desynced): the writer moves to a synced node.
        set(&nodes[0], |s| s.galera.as_mut().unwrap().local_state = 2);
        assert_eq!(r.elect().unwrap().name(), "n2");
        set(&nodes[0], |s| s.galera.as_mut().unwrap().local_state = 4);
        assert_eq!(r.elect().unwrap().name(), "n2", "and stays there");
    }

    fn synced_nodes(names: &[&str]) -> Vec<Arc<Member>> {
        let nodes: Vec<Arc<Member>> = names.iter().map(|n| member(n, |_| {})).collect();
        for n in &nodes {
            set(n, |s| {
                s.health = Health::Up;
                s.read_only = Some(false);
                s.galera = Some(GaleraState {
                    local_state: 4,
                    ready: true,
                    cluster_status: "Primary".into(),
                    cluster_size: names.len() as u32,
                    ..GaleraState::default()
                });
            });
        }
        nodes
    }

    #[tokio::test]
    async fn galera_writes_spread_over_synced_nodes_away_from_flow_control() {
        let nodes = synced_nodes(&["n1", "n2", "n3"]);
        let routing = RoutingConfig {
            galera_writers: GaleraWriters::All,
            ..RoutingConfig::default()
        };
        let r = router(nodes.clone(), routing);
        r.elect();
        assert!(r.multi_writer());
        let picks = |target: &Target| {
            let mut seen = std::collections::HashMap::new();
            for _ in 0..300 {
                *seen.entry(name(r.pick(target)).to_owned()).or_insert(0) += 1;
            }
            seen
        };
        let writes = picks(&Target::Writer);
        assert!(
            writes.values().all(|n| *n >= 50) && writes.len() == 3,
            "{writes:?}"
        );
        let reads = picks(&Target::Reader { need: None });
        assert_eq!(reads.len(), 3, "the elected writer reads too: {reads:?}");

        // n2 sends flow control: neither writes nor reads go there while others can.
        set(&nodes[1], |s| s.galera.as_mut().unwrap().flow.sent = 3);
        for target in [Target::Writer, Target::Reader { need: None }] {
            assert!(!picks(&target).contains_key("n2"), "{target:?}");
        }
        // A node out of sync takes nothing; a session's node takes its reads while synced.
        set(&nodes[2], |s| s.galera.as_mut().unwrap().local_state = 2);
        let home = Target::Node(NodeRef(nodes[2].clone()));
        assert_eq!(picks(&Target::Writer).keys().collect::<Vec<_>>(), ["n1"]);
        assert_ne!(name(r.pick(&home)), "n3");
        set(&nodes[2], |s| s.galera.as_mut().unwrap().local_state = 4);
        assert_eq!(picks(&home).keys().collect::<Vec<_>>(), ["n3"]);

        // Every node sends flow control: all of them still take work.
        for n in &nodes {
            set(n, |s| s.galera.as_mut().unwrap().flow.sent = 1);
        }
        assert_eq!(picks(&Target::Writer).len(), 3);
    }
}
