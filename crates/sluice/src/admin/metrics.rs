//! The Prometheus text exposition (format 0.0.4): a small writer that keeps each
//! family's HELP and TYPE with its samples and escapes label values. Labels are only
//! ever server names, user names and fixed words from the configuration: bounded.

use crate::stats::Stats;
use std::fmt::Write;

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

impl Exposition {
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
}
