//! A Galera node's flow-control figures over the monitor's last interval. The server
//! only offers running totals since it started (`wsrep_flow_control_paused_ns`,
//! `_sent`, `_recv`): what routing and operators need is what happened lately, so each
//! check is compared with the previous one of the same node.

use crate::router::FlowControl;
use std::time::Instant;

/// The raw counters of one check, and when they were read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub at: Instant,
    pub paused_ns: u64,
    pub sent: u64,
    pub received: u64,
    pub recv_queue: u64,
    pub requested: bool,
}

/// The figures between `previous` and `now`. Without a previous check, or when a
/// counter went back (the node restarted, or `FLUSH STATUS` cleared it), the
/// difference would be meaningless: the deltas are zero and only the gauges (the
/// queue, whether it asks for a pause now) are reported.
pub fn between(previous: Option<&Sample>, now: &Sample) -> FlowControl {
    let fresh = FlowControl {
        recv_queue: now.recv_queue,
        requested: now.requested,
        ..FlowControl::default()
    };
    let Some(p) = previous else { return fresh };
    if now.paused_ns < p.paused_ns || now.sent < p.sent || now.received < p.received {
        return fresh;
    }
    let wall_ns = now.at.saturating_duration_since(p.at).as_nanos();
    let paused_share = if wall_ns == 0 {
        0.0
    } else {
        // The two reads are not atomic with the clock: a pause that straddles them can
        // count a little more than the wall time between them.
        ((now.paused_ns - p.paused_ns) as f64 / wall_ns as f64).clamp(0.0, 1.0)
    };
    FlowControl {
        paused_share,
        sent: now.sent - p.sent,
        received: now.received - p.received,
        recv_queue: now.recv_queue,
        requested: now.requested,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample(at: Instant, paused_ns: u64, sent: u64, received: u64, queue: u64) -> Sample {
        Sample {
            at,
            paused_ns,
            sent,
            received,
            recv_queue: queue,
            requested: queue > 0,
        }
    }

    #[test]
    fn deltas_over_the_wall_clock_between_checks() {
        let t0 = Instant::now();
        let a = sample(t0, 5_000_000_000, 10, 20, 0);
        let b = sample(t0 + Duration::from_secs(2), 5_500_000_000, 13, 27, 9);
        let f = between(Some(&a), &b);
        assert!((f.paused_share - 0.25).abs() < 1e-9, "{f:?}");
        assert_eq!((f.sent, f.received, f.recv_queue), (3, 7, 9));
        assert!(f.requested);
    }

    #[test]
    fn first_check_has_no_deltas() {
        let now = sample(Instant::now(), 9_000_000_000, 100, 200, 4);
        assert_eq!(
            between(None, &now),
            FlowControl {
                recv_queue: 4,
                requested: true,
                ..FlowControl::default()
            }
        );
    }

    #[test]
    fn a_counter_going_back_is_a_restart_not_a_huge_delta() {
        let t0 = Instant::now();
        let before = sample(t0, 9_000_000_000, 100, 200, 0);
        let later = t0 + Duration::from_secs(1);
        for now in [
            sample(later, 1_000, 100, 200, 2),
            sample(later, 9_000_000_000, 1, 200, 2),
            sample(later, 9_000_000_000, 100, 3, 2),
        ] {
            let f = between(Some(&before), &now);
            assert_eq!(
                f,
                FlowControl {
                    recv_queue: 2,
                    requested: true,
                    ..FlowControl::default()
                },
                "{now:?}"
            );
        }
    }

    #[test]
    fn the_share_stays_between_zero_and_one() {
        let t0 = Instant::now();
        let a = sample(t0, 0, 0, 0, 0);
        let b = sample(t0 + Duration::from_millis(100), 300_000_000, 1, 1, 0);
        assert_eq!(between(Some(&a), &b).paused_share, 1.0);
        // Same instant (no wall time between them): nothing to divide by.
        let c = sample(t0, 300_000_000, 1, 1, 0);
        assert_eq!(between(Some(&a), &c).paused_share, 0.0);
        let idle = sample(t0 + Duration::from_secs(1), 0, 0, 0, 0);
        assert_eq!(between(Some(&a), &idle), FlowControl::default());
    }
}
