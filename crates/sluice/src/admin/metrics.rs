//! The Prometheus text exposition (format 0.0.4): a small writer that keeps each
//! family's HELP and TYPE with its samples and escapes label values. Labels are only
//! ever server, user and cache rule names and fixed words from the configuration:
//! bounded.

use crate::router::{GaleraState, Member};
use crate::stats::Stats;
use std::fmt::Write;
use std::sync::Arc;

/// Latency buckets of `sluice_query_duration_seconds`, in seconds.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Default)]
pub struct Exposition {
    out: String,
}

#[derive(Clone, Copy)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
}

/// A metric family as declared once: its name, its type and its help line.
pub struct Family {
    pub name: &'static str,
    pub kind: Type,
    pub help: &'static str,
}

impl Family {
    pub const fn counter(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            kind: Type::Counter,
            help,
        }
    }

    pub const fn gauge(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            kind: Type::Gauge,
            help,
        }
    }

    pub const fn histogram(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            kind: Type::Histogram,
            help,
        }
    }
}

impl Exposition {
    /// Starts a declared family; its samples follow, named `f.name`.
    pub fn declare(&mut self, f: &Family) -> &mut Self {
        self.family(f.name, f.kind, f.help)
    }

    /// A declared family with a single unlabelled sample.
    pub fn only(&mut self, f: &Family, value: f64) -> &mut Self {
        self.single(f.name, f.kind, f.help, value)
    }

    /// Starts a family.
    pub fn family(&mut self, name: &str, kind: Type, help: &str) -> &mut Self {
        let kind = match kind {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        };
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) -> &mut Self {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = if value.is_finite() {
            writeln!(self.out, " {value}")
        } else if value.is_nan() {
            writeln!(self.out, " NaN")
        } else if value > 0.0 {
            writeln!(self.out, " +Inf")
        } else {
            writeln!(self.out, " -Inf")
        };
        self
    }

    /// One series of a histogram family: its cumulative buckets (each upper bound in
    /// seconds with how many were at most that), `+Inf`, then the count and the sum.
    pub fn histogram(
        &mut self,
        f: &Family,
        labels: &[(&str, &str)],
        buckets: impl IntoIterator<Item = (f64, u64)>,
        count: u64,
        sum_seconds: f64,
    ) -> &mut Self {
        let bucket = format!("{}_bucket", f.name);
        for (le, n) in buckets {
            let le = format!("{le}");
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, n as f64);
        }
        let mut all = labels.to_vec();
        all.push(("le", "+Inf"));
        self.sample(&bucket, &all, count as f64);
        self.sample(&format!("{}_sum", f.name), labels, sum_seconds);
        self.sample(&format!("{}_count", f.name), labels, count as f64)
    }

    /// A family with a single unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Type, help: &str, value: f64) -> &mut Self {
        self.family(name, kind, help).sample(name, &[], value)
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The process counters: names ending in `_total` are counters, the others gauges.
pub fn counters(e: &mut Exposition, stats: &Stats) {
    for (name, help, value) in stats.snapshot() {
        let kind = if name.ends_with("_total") {
            Type::Counter
        } else {
            Type::Gauge
        };
        e.single(name, kind, help, value as f64);
    }
}

/// A per-node Galera family: name, type, help, and its value from the node's state.
type GaleraFamily = (&'static str, Type, &'static str, fn(&GaleraState) -> f64);

/// Galera flow control per node, over the monitor's last interval. Every family is
/// announced even without Galera nodes, so dashboards find their series; a node that
/// is not (or not yet known to be) a Galera node has no sample.
pub fn galera_flow(e: &mut Exposition, members: &[Arc<Member>]) {
    let states: Vec<(&str, Option<GaleraState>)> = members
        .iter()
        .map(|m| (m.name(), m.state.load().galera.clone()))
        .collect();
    let families: [GaleraFamily; 6] = [
        (
            "sluice_galera_flow_control_paused_ratio",
            Type::Gauge,
            "share of the monitor's last interval the node spent paused by flow control (0 to 1)",
            |g| g.flow.paused_share,
        ),
        (
            "sluice_galera_flow_control_sent",
            Type::Gauge,
            "flow-control pause requests the node sent in the monitor's last interval: it is the slow one",
            |g| g.flow.sent as f64,
        ),
        (
            "sluice_galera_flow_control_received",
            Type::Gauge,
            "flow-control pause requests the node received in the monitor's last interval",
            |g| g.flow.received as f64,
        ),
        (
            "sluice_galera_flow_control_requested",
            Type::Gauge,
            "1 while the node asks the cluster to pause (wsrep_flow_control_requested)",
            |g| f64::from(u8::from(g.flow.requested)),
        ),
        (
            "sluice_galera_recv_queue",
            Type::Gauge,
            "write sets waiting to be applied on the node at the monitor's last check",
            |g| g.flow.recv_queue as f64,
        ),
        (
            "sluice_galera_flow_control_paused_seconds_total",
            Type::Counter,
            "time the node spent paused by flow control since it started (wsrep_flow_control_paused_ns)",
            |g| g.flow_control_paused_ns as f64 / 1e9,
        ),
    ];
    for (name, kind, help, value) in families {
        e.family(name, kind, help);
        for (server, g) in &states {
            if let Some(g) = g {
                e.sample(name, &[("server", server)], value(g));
            }
        }
    }
}

/// Only the process counters (when analytics has no handle).
pub fn render_counters(stats: &Stats) -> String {
    let mut e = Exposition::default();
    counters(&mut e, stats);
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escaping() {
        let mut e = Exposition::default();
        e.family("x_total", Type::Counter, "things")
            .sample("x_total", &[("server", "a\"b\\c\nd")], 3.0)
            .sample("x_total", &[("server", "b"), ("state", "idle")], 0.5);
        e.single("up", Type::Gauge, "up", f64::INFINITY);
        assert_eq!(
            e.finish(),
            "# HELP x_total things\n# TYPE x_total counter\n\
             x_total{server=\"a\\\"b\\\\c\\nd\"} 3\n\
             x_total{server=\"b\",state=\"idle\"} 0.5\n\
             # HELP up up\n# TYPE up gauge\nup +Inf\n"
        );
    }

    #[test]
    fn a_histogram_series_has_its_buckets_count_and_sum() {
        let mut e = Exposition::default();
        let f = Family::histogram("h_seconds", "ages");
        e.declare(&f)
            .histogram(&f, &[("rule", "r")], [(0.5, 1), (1.0, 3)], 4, 2.5);
        assert_eq!(
            e.finish(),
            "# HELP h_seconds ages\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{rule=\"r\",le=\"0.5\"} 1\n\
             h_seconds_bucket{rule=\"r\",le=\"1\"} 3\n\
             h_seconds_bucket{rule=\"r\",le=\"+Inf\"} 4\n\
             h_seconds_sum{rule=\"r\"} 2.5\nh_seconds_count{rule=\"r\"} 4\n"
        );
    }
}
