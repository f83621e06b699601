//! The traced scenarios' side of an embedded topology: the trace receiver the traced
//! Sluices export to (a Jaeger started for the run, or a receiver that already runs) and
//! each traced Sluice's span counters, read from its `/metrics`.

use anyhow::Context;
use serde::Serialize;
use sluice_sandbox::jaeger::Jaeger;

use super::config::{Role, TraceSettings};
use crate::routing::AdminApi;

/// The spans a traced Sluice handed over: what its receiver accepted and what it
/// dropped (queue full, receiver failing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SpanCount {
    pub exported: u64,
    pub dropped: u64,
}

impl SpanCount {
    /// What was counted between `before` and this reading.
    pub fn since(self, before: SpanCount) -> SpanCount {
        SpanCount {
            exported: self.exported.saturating_sub(before.exported),
            dropped: self.dropped.saturating_sub(before.dropped),
        }
    }

    /// The two counters in Prometheus text; `None` when either is missing.
    fn parse(metrics: &str) -> Option<SpanCount> {
        let counter = |name: &str| {
            metrics.lines().find_map(|line| {
                let (key, value) = line.split_once(' ')?;
                (key == name).then(|| value.trim().parse::<f64>().ok())?
            })
        };
        Some(SpanCount {
            exported: counter("sluice_trace_spans_exported_total")? as u64,
            dropped: counter("sluice_trace_spans_dropped_total")? as u64,
        })
    }
}

/// The receiver and the traced Sluices' admin APIs. Dropping it stops the Jaeger it
/// started.
#[derive(Default)]
pub(crate) struct Tracing {
    /// OTLP/HTTP endpoint the traced Sluices export to.
    endpoint: String,
    jaeger: Option<Jaeger>,
    counters: Vec<(Role, AdminApi)>,
}

impl Tracing {
    /// Exports to `existing` when given; otherwise starts a Jaeger (all-in-one, spans in
    /// memory) on loopback ports.
    pub(crate) fn start(existing: Option<&str>) -> anyhow::Result<Tracing> {
        if let Some(endpoint) = existing {
            return Ok(Tracing {
                endpoint: endpoint.to_string(),
                ..Tracing::default()
            });
        }
        let jaeger = Jaeger::start().context("starting Jaeger, the traced Sluices' receiver")?;
        Ok(Tracing {
            endpoint: jaeger.otlp_http_endpoint(),
            jaeger: Some(jaeger),
            counters: Vec::new(),
        })
    }

    /// The report's line on the receiver.
    pub(crate) fn describe(&self) -> String {
        match &self.jaeger {
            Some(jaeger) => format!(
                "Trace receiver: Jaeger all-in-one (pid {}), OTLP/HTTP at {}, spans in memory",
                jaeger.pid(),
                self.endpoint
            ),
            None => format!(
                "Trace receiver: existing, OTLP/HTTP at {} (--otlp-endpoint)",
                self.endpoint
            ),
        }
    }

    /// What a traced Sluice's configuration names: the receiver, and an admin API of
    /// its own on a free port.
    pub(crate) fn settings(&self) -> TraceSettings {
        TraceSettings {
            endpoint: self.endpoint.clone(),
            admin_port: sluice_sandbox::free_port(),
            admin_token: crate::routing::admin_token("cache"),
        }
    }

    /// Reads the span counters of the Sluice of `role` from now on.
    pub(crate) fn watch(&mut self, role: Role, trace: &TraceSettings) {
        let admin = AdminApi::new(
            format!("127.0.0.1:{}", trace.admin_port),
            trace.admin_token.clone(),
        );
        self.counters.push((role, admin));
    }

    /// The span counters of the Sluice of `role`, if it is watched.
    pub(crate) fn read(&self, role: Role) -> Option<anyhow::Result<SpanCount>> {
        let (_, admin) = self.counters.iter().find(|(r, _)| *r == role)?;
        Some(admin.get_text("/metrics").and_then(|text| {
            SpanCount::parse(&text).context("no span counters in Sluice's /metrics")
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_counters_from_prometheus_text() {
        let text = "# HELP sluice_trace_spans_exported_total spans the trace receiver accepted\n\
                    # TYPE sluice_trace_spans_exported_total counter\n\
                    sluice_trace_spans_exported_total 1234\n\
                    sluice_trace_spans_exported_total_x 9\n\
                    sluice_trace_spans_dropped_total 5\n";
        let count = SpanCount::parse(text).unwrap();
        assert_eq!(
            count,
            SpanCount {
                exported: 1234,
                dropped: 5
            }
        );
        assert_eq!(
            count.since(SpanCount {
                exported: 1000,
                dropped: 5
            }),
            SpanCount {
                exported: 234,
                dropped: 0
            }
        );
        assert_eq!(
            SpanCount::parse("sluice_trace_spans_exported_total 1\n"),
            None
        );
    }
}
