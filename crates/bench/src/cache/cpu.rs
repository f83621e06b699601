//! The proxy's CPU time around a run, from `/proc`, spread over what the run did.

use crate::topology;

/// A process's CPU clock read before a run, for the ticks it used during it.
pub(super) struct CpuClock {
    pid: Option<u32>,
    before: Option<u64>,
}

impl CpuClock {
    pub(super) fn start(pid: Option<u32>) -> CpuClock {
        CpuClock {
            pid,
            before: pid.and_then(|p| topology::cpu_ticks(p).ok()),
        }
    }

    pub(super) fn ticks(&self) -> Option<u64> {
        let after = topology::cpu_ticks(self.pid?).ok()?;
        Some(after.saturating_sub(self.before?))
    }
}

/// CPU ticks spread over `units` (queries, rows), in µs each.
pub(super) fn per_unit(ticks: u64, clk_tck: u64, units: u64) -> Option<f64> {
    (units > 0).then(|| ticks as f64 * 1e6 / clk_tck as f64 / units as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(per_unit(250, 100, 1000), Some(2500.0));
        assert_eq!(per_unit(250, 100, 0), None);
    }
}
