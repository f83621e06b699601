//! A server of the cluster as the monitor keeps it: its health, role and lag, its Galera
//! state and flow control, and the latency the sessions measure on it.

use super::config::RoleConfig;
use super::gtid::GtidPos;
use crate::backend::ServerPool;
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Latencies under this are noise on any network.
const MIN_TTFB_US: u64 = 50;
/// A latency older than this is not trusted.
const STALE_TTFB_MS: u64 = 2_000;

fn since_epoch_ms() -> u64 {
    crate::clock::micros() / 1000
}

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
    pub(super) applied: Mutex<GtidPos>,
    /// Exponentially weighted time to first byte of statements, microseconds.
    pub(super) ttfb_us: AtomicU64,
    /// When it was last fed, in milliseconds since [`epoch`].
    pub(super) ttfb_at_ms: AtomicU64,
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
    pub(super) fn cost(&self) -> u64 {
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
    pub(super) fn can_wait_for_gtid(&self) -> bool {
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
    pub(super) fn readable(&self) -> bool {
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
