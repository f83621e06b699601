//! One measured run of the zones scenario: its links and Sluice started, sysbench
//! through them, and around it the servers' and Sluice's counters, the links' lateness
//! and the machine's CPU time.

use std::time::{Duration, Instant};

use sluice_sandbox::link::LinkStats;

use super::setup::{CpuTimes, Servers};
use super::{names, Bench, LinkLoad, Mode, Placement, Run, ServerLoad, SERVERS};
use crate::mux::{cell, spec};
use crate::report::thousands;
use crate::routing::{delta, endpoint, sysbench_run, Snapshot};
use crate::sysbench::SysbenchCommand;

impl Bench<'_> {
    /// One measured run with fresh links (and Sluice), the counters read around it. An
    /// error is a deployment that would not start; a failed sysbench is in the run.
    pub(super) fn one_run(
        &mut self,
        servers: &Servers,
        threads: u32,
        repetition: u32,
        (mode, placement): (Mode, Placement),
    ) -> anyhow::Result<Run> {
        let stem = format!(
            "{}-{}-t{threads}-r{repetition}",
            mode.name(),
            placement.name()
        );
        let mut deployment = self.deploy(servers, mode, placement, &stem)?;
        let spec = spec(threads, self.plan.duration, self.plan.data);
        let command = SysbenchCommand::run(
            &self.args.common.sysbench,
            &endpoint(deployment.entry()),
            &spec,
            self.out,
        );
        let output_file = format!("raw/{stem}.txt");
        let log = self.out.join(&output_file);
        let databases = servers.databases();
        let names = names();
        let admin = deployment.admin();
        let before = Snapshot::take(&names, &databases, admin);
        let links_before = deployment.link_stats();
        let cpu_before = CpuTimes::read();
        let t = Instant::now();
        let stats = sysbench_run(&command, &log, threads, self.plan.duration);
        let cpu_after = CpuTimes::read();
        let links_after = deployment.link_stats();
        let after = Snapshot::take(&names, &databases, admin);
        let wall_secs = t.elapsed().as_secs_f64();
        let mut run = Run {
            mode,
            placement,
            threads,
            repetition,
            tps: None,
            qps: None,
            avg_ms: None,
            p95_ms: None,
            errors: None,
            failure: None,
            command: command.display(),
            output_file,
            wall_secs,
            cpu_busy: CpuTimes::busy_share(cpu_before, cpu_after),
            servers: self.loads(&before, &after, wall_secs, mode != Mode::Direct),
            reads_to_readers: delta(before.reads_to_readers, after.reads_to_readers),
            reads_to_writer: delta(before.reads_to_writer, after.reads_to_writer),
            links: link_load(&links_before, &links_after),
        };
        match stats {
            Ok(s) => {
                run.tps = Some(s.transactions_per_sec);
                run.qps = Some(s.queries_per_sec);
                run.avg_ms = Some(s.latency_avg_ms);
                run.p95_ms = Some(s.latency_percentile_ms);
                run.errors = Some(s.ignored_errors);
            }
            Err(e) => {
                let mut failure = format!("{e:#}");
                if let Err(ended) = deployment.check() {
                    failure = format!("{failure}; {ended}");
                }
                run.failure = Some(failure);
            }
        }
        Ok(run)
    }

    /// Each server's load between two snapshots `secs` apart; with Sluice running, what
    /// it runs there idle over as long is taken off the SELECTs.
    fn loads(
        &self,
        before: &Snapshot,
        after: &Snapshot,
        secs: f64,
        sluice: bool,
    ) -> Vec<ServerLoad> {
        SERVERS
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let com_select = delta(before.com_select[i], after.com_select[i]);
                let idle = match sluice {
                    true => self
                        .results
                        .servers
                        .get(i)
                        .and_then(|s| s.idle_selects_per_sec)
                        .map_or(0, |rate| (rate * secs).round() as u64),
                    false => 0,
                };
                let reads = |s: &Snapshot| s.reads.as_ref().and_then(|r| r[i]);
                let writes = |s: &Snapshot| s.writes.as_ref().and_then(|r| r[i]);
                ServerLoad {
                    name: name.to_string(),
                    reads: delta(reads(before), reads(after)),
                    writes: delta(writes(before), writes(after)),
                    com_select,
                    selects: com_select.map(|n| n.saturating_sub(idle)),
                    // Sluice times reads only: 0 is "not measured", not a latency.
                    ttfb_ms: after
                        .ttfb_ms
                        .as_ref()
                        .and_then(|t| t[i])
                        .filter(|t| *t > 0.0),
                }
            })
            .collect()
    }
}

/// What a run's links did between two readings of them, in the same order.
fn link_load(before: &[LinkStats], after: &[LinkStats]) -> LinkLoad {
    let late_ns = |s: &LinkStats| s.mean_late.as_nanos() as f64 * s.chunks as f64;
    let mut chunks = 0;
    let mut late = 0.0;
    let mut worst = Duration::ZERO;
    for (b, a) in before.iter().zip(after) {
        chunks += a.chunks.saturating_sub(b.chunks);
        late += (late_ns(a) - late_ns(b)).max(0.0);
        worst = worst.max(a.worst_late);
    }
    LinkLoad {
        links: after.len(),
        chunks,
        mean_late_us: (chunks > 0).then(|| late / chunks as f64 / 1e3),
        worst_late_us: (!after.is_empty()).then_some(worst.as_secs_f64() * 1e6),
    }
}

/// A progress line's account of one run.
pub(super) fn describe(run: &Run) -> String {
    if let Some(f) = &run.failure {
        return format!("FAILED: {f}");
    }
    let selects: Vec<String> = run
        .servers
        .iter()
        .map(|l| format!("{} {}", l.name, l.selects.map_or("?".into(), thousands)))
        .collect();
    format!(
        "{} tps, avg {} ms, p95 {} ms, {} errors; SELECTs: {}; links late {} µs on average",
        thousands(run.tps.unwrap_or(0.0).round() as u64),
        cell(run.avg_ms, 2),
        cell(run.p95_ms, 2),
        run.errors.unwrap_or(0),
        selects.join(", "),
        cell(run.links.mean_late_us, 0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_figures_are_the_runs_own() {
        let stats = |chunks: u64, mean_us: u64, worst_us: u64| LinkStats {
            chunks,
            mean_late: Duration::from_micros(mean_us),
            worst_late: Duration::from_micros(worst_us),
            ..LinkStats::default()
        };
        // The first link relayed 10 chunks before the run and 20 during it; the second
        // only 10 during it.
        let before = [stats(10, 5, 40), stats(0, 0, 0)];
        let after = [stats(30, 8, 90), stats(10, 10, 20)];
        let load = link_load(&before, &after);
        assert_eq!(load.links, 2);
        assert_eq!(load.chunks, 30);
        let mean = load.mean_late_us.unwrap();
        assert!(
            (mean - (30.0 * 8.0 - 50.0 + 100.0) / 30.0).abs() < 1e-9,
            "{mean}"
        );
        assert_eq!(load.worst_late_us, Some(90.0));
        assert_eq!(link_load(&[], &[]).mean_late_us, None);
    }
}
