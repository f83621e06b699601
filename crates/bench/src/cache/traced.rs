//! The traced scenarios' span counts: each traced Sluice's export counters read around
//! every run, so that the report shows what it really exported, and at the end.

use super::Scenario;
use crate::topology::{SpanCount, Topology};

/// A traced Sluice's span counters read before a run.
pub(super) struct SpanClock {
    scenario: Scenario,
    before: Option<SpanCount>,
}

impl SpanClock {
    /// Reads the counters of `scenario`'s Sluice, when it is a traced one this run
    /// started.
    pub(super) fn start(topology: &Topology, scenario: Scenario) -> SpanClock {
        SpanClock {
            scenario,
            before: read(topology, scenario),
        }
    }

    /// The spans counted since [`SpanClock::start`]. Spans still queued when a run ends
    /// count in the next one: the totals are exact, a run's share is near.
    pub(super) fn since(&self, topology: &Topology) -> Option<SpanCount> {
        Some(read(topology, self.scenario)?.since(self.before?))
    }
}

fn read(topology: &Topology, scenario: Scenario) -> Option<SpanCount> {
    if !scenario.traces() {
        return None;
    }
    topology.spans(scenario.role()?)?.ok()
}

/// One note per traced Sluice of `scenarios`: its counters as the run ends, or why
/// they could not be read.
pub(super) fn totals(topology: &Topology, scenarios: &[Scenario]) -> Vec<String> {
    scenarios
        .iter()
        .filter(|s| s.traces())
        .filter_map(|&s| {
            let read = topology.spans(s.role()?)?;
            Some(match read {
                Ok(count) if count.exported == 0 && count.dropped > 0 => format!(
                    "{s}: **no span reached the receiver**, {} dropped \
                     (sluice_trace_spans_dropped_total): its CPU figures are those of \
                     tracing without export; see the receiver and the Sluice's log",
                    crate::report::thousands(count.dropped)
                ),
                Ok(count) => format!(
                    "{s}: Sluice's /metrics at the end of the run: {} spans exported \
                     (sluice_trace_spans_exported_total), {} dropped \
                     (sluice_trace_spans_dropped_total)",
                    crate::report::thousands(count.exported),
                    crate::report::thousands(count.dropped)
                ),
                Err(e) => format!("{s}: span counters not read: {e:#}"),
            })
        })
        .collect()
}
