//! The cache benchmark's account of where it is: a line per run, and on a terminal a
//! live status line.

use std::io::{IsTerminal, Write as _};
use std::time::{Duration, Instant};

use crate::report;
use crate::sysbench::Interval;

/// Where in the plan we are: a line per run, and on a terminal a live status line.
pub(super) struct Progress {
    started: Instant,
    total: usize,
    /// The clock ticks per second of CPU times read during the runs.
    pub(super) clk_tck: u64,
    live: bool,
    /// Off a terminal: the run time at which the next progress line is due.
    next_line_secs: std::cell::Cell<u64>,
}

impl Progress {
    pub(super) fn new(total: usize, clk_tck: u64) -> Progress {
        Progress {
            started: Instant::now(),
            total,
            clk_tck,
            live: std::io::stderr().is_terminal(),
            next_line_secs: std::cell::Cell::new(10),
        }
    }

    /// `[ 5/24 1:40, ~6:40 left]` for the run at 0-based `index`.
    pub(super) fn prefix(&self, index: usize) -> String {
        let elapsed = self.started.elapsed();
        let left = match index {
            0 => String::new(),
            done => {
                let per_run = elapsed.as_secs_f64() / done as f64;
                let left = per_run * (self.total - done) as f64;
                format!(", ~{} left", clock(Duration::from_secs_f64(left)))
            }
        };
        format!(
            "[{:>width$}/{} {}{left}]",
            index + 1,
            self.total,
            clock(elapsed),
            width = self.total.to_string().len()
        )
    }

    /// Called about once a second while a tool runs: on a terminal, the status line is
    /// rewritten in place; elsewhere (a log file, CI) a line is printed every 10 s.
    pub(super) fn tick(
        &self,
        elapsed: Duration,
        planned_secs: Option<u64>,
        last: Option<&Interval>,
    ) {
        let secs = elapsed.as_secs();
        let of = planned_secs.map(|p| format!("/{p}s")).unwrap_or_default();
        let live = last
            .map(|i| {
                format!(
                    ", {} qps, p95 {:.2} ms, {} errors/s",
                    report::thousands(i.qps.round() as u64),
                    i.latency_percentile_ms,
                    i.errors_per_sec
                )
            })
            .unwrap_or_default();
        if self.live {
            eprint!("\r\x1b[K    {secs}s{of}{live}");
            let _ = std::io::stderr().flush();
        } else if secs >= self.next_line_secs.get() {
            self.next_line_secs.set(secs + 10);
            eprintln!("    {secs}s{of}{live}");
        }
    }

    /// Ends the status line before the run's result is printed.
    pub(super) fn done(&self) {
        self.next_line_secs.set(10);
        if self.live {
            eprint!("\r\x1b[K");
        }
    }
}

/// `m:ss`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(clock(Duration::from_secs(65)), "1:05");
    }
}
