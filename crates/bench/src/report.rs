//! The benchmark's results: every run as measured (sysbench steps and mysqlslap insert
//! runs), the per-step summary (median over repetitions, ratios to direct), and their
//! renderings as JSON and CSV. Tables and charts are in [`crate::render`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cache::Scenario;
use crate::document::{csv_field, Document};
use crate::render;
use crate::sysbench::{DataSet, PsMode, RunStats, Workload};
use crate::topology::SpanCount;

pub mod staleness;

/// Everything one `sluice bench` run knows; serialized as results.json.
#[derive(Debug, Serialize)]
pub struct Report {
    pub started_at: String,
    pub finished_at: Option<String>,
    pub status: Status,
    pub sluice_version: String,
    pub machine: Machine,
    pub sysbench_version: Option<String>,
    pub mysqlslap_version: Option<String>,
    pub topology: Vec<String>,
    pub settings: Settings,
    pub notes: Vec<String>,
    pub commands: Commands,
    /// sysbench runs.
    pub runs: Vec<RunRecord>,
    /// mysqlslap insert runs.
    pub inserts: Vec<InsertRecord>,
    /// Derived from `runs` when the report is written.
    pub summary: Vec<SummaryRow>,
    /// Derived from `inserts` when the report is written.
    pub insert_summary: Vec<InsertRow>,
    /// How stale the cache is after a direct commit, once measured.
    pub staleness: Option<staleness::Staleness>,
}

/// How far the benchmark got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "lowercase")]
pub enum Status {
    /// Still measuring (the files are rewritten after every run).
    Running,
    /// Every planned run was attempted; some may have failed (see `runs`).
    Finished,
    /// Stopped early: Ctrl-C, or a failure before or between runs.
    Aborted(String),
}

/// The line every report opens with: when the run started and how it ended, or that it
/// is still going (a report is rewritten after every run).
pub fn status_fact(started_at: &str, finished_at: Option<&str>, error: Option<&str>) -> String {
    let how = match (finished_at, error) {
        (None, _) => "**in progress** (partial results)".to_string(),
        (Some(f), None) => format!("ended {f}"),
        (Some(f), Some(e)) => format!(
            "ended {f}, **stopped early**: {}",
            e.lines().next().unwrap_or("")
        ),
    };
    format!("Started {started_at}, {how}.")
}

/// The end of a report's command list: every distinct sysbench command of its runs, in
/// the order first run, then the benchmark's own command line.
pub fn run_commands<'a>(
    mut commands: Vec<(String, Vec<String>)>,
    runs: impl Iterator<Item = &'a str>,
    this: &str,
) -> Vec<(String, Vec<String>)> {
    let mut sysbench: Vec<String> = Vec::new();
    for command in runs {
        if !command.is_empty() && !sysbench.iter().any(|c| c == command) {
            sysbench.push(command.to_string());
        }
    }
    if !sysbench.is_empty() {
        commands.push(("sysbench".to_string(), sysbench));
    }
    commands.push(("This benchmark".to_string(), vec![this.to_string()]));
    commands
}

/// What a scenario's results say of how its run went, for [`conclude`].
pub trait Ending {
    /// Records when the run ended and, if it stopped early, why.
    fn ended(&mut self, at: String, error: Option<String>);
    /// Runs measured, and how many of them failed.
    fn counts(&self) -> (usize, usize);
}

/// [`Ending`] for a scenario's results with `finished_at`, `error` and `runs` whose
/// items have a `failure`: what most scenarios' results are.
macro_rules! ending_by_runs {
    ($results:ty) => {
        impl $crate::report::Ending for $results {
            fn ended(&mut self, at: String, error: Option<String>) {
                self.finished_at = Some(at);
                self.error = error;
            }

            fn counts(&self) -> (usize, usize) {
                let failed = self.runs.iter().filter(|r| r.failure.is_some()).count();
                (self.runs.len(), failed)
            }
        }
    };
}
pub(crate) use ending_by_runs;

/// The end of a scenario run: its report written a last time (`write`) and printed,
/// where the files are said, and an error if the run stopped early (`measured`) or any
/// of its runs failed.
pub fn conclude<R: Ending>(
    out: &std::path::Path,
    results: &mut R,
    measured: anyhow::Result<()>,
    document: &mut Option<crate::document::Document>,
    write: impl FnOnce(&std::path::Path, &mut R) -> anyhow::Result<crate::document::Document>,
) -> anyhow::Result<()> {
    let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    results.ended(at, measured.as_ref().err().map(|e| format!("{e:#}")));
    let written = write(out, results)?;
    if results.counts().0 > 0 {
        print!("{}", crate::document::markdown_sections(&written.sections));
    }
    println!("\nreport: {}", out.join("report.html").display());
    println!("results: {}", out.join("results.md").display());
    *document = Some(written);
    measured?;
    let (total, failed) = results.counts();
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {total} runs failed; see {}",
            out.join("results.md").display()
        );
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub logical_cpus: usize,
    pub memory: String,
    pub kernel: String,
}

impl Machine {
    /// The line every report gives the machine.
    pub fn fact(&self) -> String {
        format!(
            "Machine: {} ({} logical CPUs), {} memory, {}.",
            self.cpu, self.logical_cpus, self.memory, self.kernel
        )
    }

    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0)))
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|k| format!("Linux {}", k.trim()))
            .unwrap_or_else(|_| std::env::consts::OS.to_string());
        Machine {
            cpu,
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory,
            kernel,
        }
    }
}

/// What was planned.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Every scenario asked for, including unavailable ones (their cells read "n/a").
    pub scenarios: Vec<Scenario>,
    pub unavailable: Vec<Unavailable>,
    pub workloads: Vec<Workload>,
    pub ps_modes: Vec<PsMode>,
    pub threads: Vec<u32>,
    pub duration_secs: u64,
    pub repeat: u32,
    pub data: DataSet,
    /// The mysqlslap series, when the `insert` workload is planned.
    pub insert: Option<InsertSettings>,
}

impl Settings {
    /// The reason a scenario cannot run at all, if it cannot.
    pub fn unavailable(&self, scenario: Scenario) -> Option<&str> {
        self.unavailable
            .iter()
            .find(|u| u.scenario == scenario)
            .map(|u| u.reason.as_str())
    }

    /// The sysbench workloads, in plan order.
    pub fn sysbench_workloads(&self) -> impl Iterator<Item = Workload> + '_ {
        self.workloads.iter().copied().filter(|w| w.is_sysbench())
    }

    /// The scenarios of the insert series: a cache has nothing to serve there.
    pub fn insert_scenarios(&self) -> Vec<Scenario> {
        self.scenarios
            .iter()
            .copied()
            .filter(|s| !s.caches())
            .collect()
    }
}

/// A scenario that was asked for and cannot run, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Unavailable {
    pub scenario: Scenario,
    pub reason: String,
}

/// The insert benchmark's plan.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct InsertSettings {
    pub clients: u32,
    /// Inserts per run, over all clients.
    pub rows: u64,
    /// Transaction lengths, one step each.
    pub per_trx: Vec<u32>,
}

/// Command lines outside the measured runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Commands {
    /// How each Sluice (and HAProxy) the benchmark started was run, with its configuration.
    pub sluice: Vec<String>,
    pub prepare: Option<String>,
    pub cleanup: Option<String>,
}

/// One sysbench run, or one that was planned and did not happen.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub workload: Workload,
    pub ps_mode: PsMode,
    pub threads: u32,
    pub scenario: Scenario,
    /// 1-based.
    pub repetition: u32,
    pub command: String,
    /// The tool's output, relative to the output directory.
    pub output_file: Option<String>,
    /// Spans a traced Sluice exported and dropped during the run (its /metrics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spans: Option<SpanCount>,
    #[serde(flatten)]
    pub outcome: Outcome<RunStats>,
}

/// One mysqlslap insert run, or one that was planned and did not happen.
#[derive(Debug, Clone, Serialize)]
pub struct InsertRecord {
    pub per_trx: u32,
    pub scenario: Scenario,
    /// 1-based.
    pub repetition: u32,
    pub command: String,
    pub output_file: Option<String>,
    #[serde(flatten)]
    pub outcome: Outcome<InsertStats>,
}

/// What one insert run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InsertStats {
    pub rows: u64,
    pub clients: u32,
    /// mysqlslap's wall-clock time for all clients to finish (one iteration).
    pub seconds: f64,
    pub rows_per_sec: f64,
}

/// How one run ended. `S` is what a successful run measured.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Outcome<S> {
    Ok {
        stats: S,
        /// Sluice's user+system CPU time divided by the statements of the run.
        sluice_cpu_us_per_query: Option<f64>,
    },
    Failed {
        error: String,
    },
    Skipped {
        reason: String,
    },
}

impl<S> Outcome<S> {
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok { .. })
    }
}

/// The median of one scenario's sysbench runs at one step: a row of results.csv.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SummaryRow {
    pub workload: Workload,
    pub ps_mode: PsMode,
    pub threads: u32,
    pub scenario: Scenario,
    pub runs_ok: usize,
    pub runs_failed: usize,
    pub qps: Option<f64>,
    pub tps: Option<f64>,
    /// Reads sent during the run (the published report's "total reads").
    pub reads: Option<f64>,
    pub avg_latency_ms: Option<f64>,
    pub p95_latency_ms: Option<f64>,
    /// Ignored errors, summed over the runs.
    pub errors: Option<u64>,
    /// The proxy's CPU time per query: Sluice's, or HAProxy's in the haproxy scenario.
    pub sluice_cpu_us_per_query: Option<f64>,
    /// A Sluice scenario's CPU per query over HAProxy's at the same step: what Sluice
    /// costs against relaying the same bytes.
    pub cpu_ratio_vs_haproxy: Option<f64>,
    /// Passthrough's Sluice CPU per query (multiplexing, this Sluice's default) over
    /// dedicated's (`multiplex = false`) at the same step: what multiplexing costs
    /// against a backend connection per client.
    pub cpu_ratio_vs_dedicated: Option<f64>,
    /// A traced scenario's Sluice CPU per query over passthrough's (tracing off) at
    /// the same step: what tracing costs.
    pub cpu_ratio_vs_passthrough: Option<f64>,
    /// Spans the traced Sluice exported and dropped over the step's runs, and exported
    /// per query.
    pub spans_exported: Option<u64>,
    pub spans_dropped: Option<u64>,
    pub spans_per_query: Option<f64>,
    /// This scenario's qps over direct's at the same step.
    pub qps_ratio_vs_direct: Option<f64>,
    /// This scenario's average latency over direct's at the same step.
    pub avg_latency_ratio_vs_direct: Option<f64>,
    /// A caching scenario's qps over passthrough's at the same step: what the cache
    /// gains over the same proxy without it; a traced one's: what tracing costs.
    pub qps_ratio_vs_passthrough: Option<f64>,
    /// Why there is no number, when there is none.
    pub missing: Option<String>,
}

/// The median of one scenario's insert runs at one transaction length.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InsertRow {
    pub per_trx: u32,
    pub scenario: Scenario,
    pub runs_ok: usize,
    pub runs_failed: usize,
    pub rows_per_sec: Option<f64>,
    pub seconds: Option<f64>,
    pub sluice_cpu_us_per_insert: Option<f64>,
    pub ratio_vs_direct: Option<f64>,
    pub missing: Option<String>,
}

/// A sysbench step: workload, ps-mode, threads.
type Step = (Workload, PsMode, u32);
/// A step and a scenario: one summary row.
type Key = (Workload, PsMode, u32, Scenario);

impl Report {
    /// Recomputes both summaries from the runs, in plan order.
    pub fn summarize(&mut self) {
        let mut rows: Vec<SummaryRow> = self
            .keys()
            .into_iter()
            .map(|key| {
                let (w, p, t, sc) = key;
                let runs: Vec<&Outcome<RunStats>> = self
                    .runs
                    .iter()
                    .filter(|r| (r.workload, r.ps_mode, r.threads, r.scenario) == (w, p, t, sc))
                    .map(|r| &r.outcome)
                    .collect();
                summarize_runs(key, &runs, self.settings.unavailable(sc))
            })
            .collect();
        for row in &mut rows {
            set_spans(row, &self.runs);
        }
        set_against(
            &mut rows,
            Scenario::Direct,
            |r| r.scenario != Scenario::Direct,
            |row, d| {
                row.qps_ratio_vs_direct = ratio(row.qps, d.qps);
                row.avg_latency_ratio_vs_direct = ratio(row.avg_latency_ms, d.avg_latency_ms);
            },
        );
        set_against(
            &mut rows,
            Scenario::Passthrough,
            |r| r.scenario.caches() || r.scenario.traces(),
            |row, p| row.qps_ratio_vs_passthrough = ratio(row.qps, p.qps),
        );
        let cpu = |r: &SummaryRow| r.sluice_cpu_us_per_query;
        set_against(
            &mut rows,
            Scenario::Passthrough,
            |r| r.scenario.traces(),
            |row, p| row.cpu_ratio_vs_passthrough = ratio(cpu(row), cpu(p)),
        );
        set_against(
            &mut rows,
            Scenario::Haproxy,
            |r| r.scenario.is_sluice(),
            |row, h| row.cpu_ratio_vs_haproxy = ratio(cpu(row), cpu(h)),
        );
        set_against(
            &mut rows,
            Scenario::Dedicated,
            |r| r.scenario == Scenario::Passthrough,
            |row, d| row.cpu_ratio_vs_dedicated = ratio(cpu(row), cpu(d)),
        );
        self.summary = rows;

        let mut inserts = Vec::new();
        if let Some(insert) = &self.settings.insert {
            for &per_trx in &insert.per_trx {
                for scenario in self.settings.insert_scenarios() {
                    let runs: Vec<&Outcome<InsertStats>> = self
                        .inserts
                        .iter()
                        .filter(|r| r.per_trx == per_trx && r.scenario == scenario)
                        .map(|r| &r.outcome)
                        .collect();
                    inserts.push(summarize_inserts(
                        per_trx,
                        scenario,
                        &runs,
                        self.settings.unavailable(scenario),
                    ));
                }
            }
        }
        let direct: HashMap<u32, Option<f64>> = inserts
            .iter()
            .filter(|r| r.scenario == Scenario::Direct)
            .map(|r| (r.per_trx, r.rows_per_sec))
            .collect();
        for row in inserts
            .iter_mut()
            .filter(|r| r.scenario != Scenario::Direct)
        {
            if let Some(&d) = direct.get(&row.per_trx) {
                row.ratio_vs_direct = ratio(row.rows_per_sec, d);
            }
        }
        self.insert_summary = inserts;
    }

    fn keys(&self) -> Vec<Key> {
        let s = &self.settings;
        let mut keys = Vec::new();
        for w in s.sysbench_workloads() {
            for &p in &s.ps_modes {
                for &t in &s.threads {
                    for &sc in &s.scenarios {
                        keys.push((w, p, t, sc));
                    }
                }
            }
        }
        keys
    }

    pub fn row(&self, w: Workload, p: PsMode, t: u32, sc: Scenario) -> Option<&SummaryRow> {
        self.summary
            .iter()
            .find(|r| r.workload == w && r.ps_mode == p && r.threads == t && r.scenario == sc)
    }

    pub fn insert_row(&self, per_trx: u32, sc: Scenario) -> Option<&InsertRow> {
        self.insert_summary
            .iter()
            .find(|r| r.per_trx == per_trx && r.scenario == sc)
    }

    /// Runs that were attempted and did not measure anything (unavailable scenarios are
    /// never attempted, so they do not count).
    pub fn runs_not_ok(&self) -> usize {
        self.runs.iter().filter(|r| !r.outcome.is_ok()).count()
            + self.inserts.iter().filter(|r| !r.outcome.is_ok()).count()
    }

    pub fn runs_total(&self) -> usize {
        self.runs.len() + self.inserts.len()
    }

    /// The summary as CSV (results.csv): one row per workload, ps-mode, threads and
    /// scenario, then one per insert transaction length and scenario (where `threads` is
    /// the number of mysqlslap clients and `avg_latency_ms` the run's duration).
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "workload,ps_mode,threads,inserts_per_trx,scenario,runs_ok,runs_failed,qps,tps,\
             reads,rows_per_sec,avg_latency_ms,p95_latency_ms,errors,sluice_cpu_us_per_query,\
             ratio_vs_direct,avg_latency_ratio_vs_direct,ratio_vs_passthrough,missing\n",
        );
        let num = |v: Option<f64>, decimals: usize| {
            v.map(|v| format!("{v:.decimals$}")).unwrap_or_default()
        };
        for r in &self.summary {
            let _ = writeln!(
                out,
                "{},{},{},,{},{},{},{},{},{},,{},{},{},{},{},{},{},{}",
                r.workload,
                r.ps_mode,
                r.threads,
                r.scenario,
                r.runs_ok,
                r.runs_failed,
                num(r.qps, 2),
                num(r.tps, 2),
                num(r.reads, 0),
                num(r.avg_latency_ms, 2),
                num(r.p95_latency_ms, 2),
                r.errors.map(|e| e.to_string()).unwrap_or_default(),
                num(r.sluice_cpu_us_per_query, 2),
                num(r.qps_ratio_vs_direct, 4),
                num(r.avg_latency_ratio_vs_direct, 4),
                num(r.qps_ratio_vs_passthrough, 4),
                csv_field(r.missing.as_deref().unwrap_or("")),
            );
        }
        for r in &self.insert_summary {
            let _ = writeln!(
                out,
                "insert,,{},{},{},{},{},,,,{},{},,,{},{},,,{}",
                self.settings.insert.as_ref().map_or(0, |i| i.clients),
                r.per_trx,
                r.scenario,
                r.runs_ok,
                r.runs_failed,
                num(r.rows_per_sec, 2),
                num(r.seconds.map(|s| s * 1000.0), 2),
                num(r.sluice_cpu_us_per_insert, 2),
                num(r.ratio_vs_direct, 4),
                csv_field(r.missing.as_deref().unwrap_or("")),
            );
        }
        out
    }

    /// The report in the format every scenario shares, summarized first.
    pub fn document(&mut self) -> Document {
        self.summarize();
        render::document(self)
    }

    /// Writes the report's files into `dir` (see [`Document::write`]).
    pub fn write(&mut self, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let mut paths = self.document().write(dir)?;
        if let Some(staleness) = &self.staleness {
            let path = dir.join("staleness.csv");
            std::fs::write(&path, staleness::csv(staleness))
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            paths.push(path);
        }
        Ok(paths)
    }
}

/// Sets, on each row `applies` picks, what `set` makes of it and of `base`'s row at the
/// same step (none, nothing set).
fn set_against(
    rows: &mut [SummaryRow],
    base: Scenario,
    applies: impl Fn(&SummaryRow) -> bool,
    set: impl Fn(&mut SummaryRow, &SummaryRow),
) {
    let bases: HashMap<Step, SummaryRow> = rows
        .iter()
        .filter(|r| r.scenario == base)
        .map(|r| ((r.workload, r.ps_mode, r.threads), r.clone()))
        .collect();
    for row in rows.iter_mut().filter(|r| applies(r)) {
        if let Some(b) = bases.get(&(row.workload, row.ps_mode, row.threads)) {
            set(row, b);
        }
    }
}

fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (value, base) {
        (Some(v), Some(b)) if b > 0.0 => Some(v / b),
        _ => None,
    }
}

/// The runs of one summary row, sorted out.
struct Sorted<'a, S> {
    /// Each successful measurement, with Sluice's CPU time per statement.
    ok: Vec<(&'a S, Option<f64>)>,
    failed: usize,
    /// Why there is no measurement, when there is none.
    missing: Option<String>,
}

fn collect<'a, S>(runs: &[&'a Outcome<S>], unavailable: Option<&str>) -> Sorted<'a, S> {
    let ok: Vec<(&S, Option<f64>)> = runs
        .iter()
        .filter_map(|r| match r {
            Outcome::Ok {
                stats,
                sluice_cpu_us_per_query,
            } => Some((stats, *sluice_cpu_us_per_query)),
            _ => None,
        })
        .collect();
    let failed: Vec<&str> = runs
        .iter()
        .filter_map(|r| match r {
            Outcome::Failed { error } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    let skipped = runs.iter().find_map(|r| match r {
        Outcome::Skipped { reason } => Some(reason.as_str()),
        _ => None,
    });
    let missing = if !ok.is_empty() {
        None
    } else if let Some(reason) = unavailable {
        Some(format!("n/a: {reason}"))
    } else if let Some(error) = failed.first() {
        Some(format!("FAILED: {}", first_line(error)))
    } else if let Some(reason) = skipped {
        Some(format!("skipped: {reason}"))
    } else {
        Some("not run".to_string())
    };
    Sorted {
        ok,
        failed: failed.len(),
        missing,
    }
}

fn summarize_runs(key: Key, runs: &[&Outcome<RunStats>], unavailable: Option<&str>) -> SummaryRow {
    let (workload, ps_mode, threads, scenario) = key;
    let Sorted {
        ok,
        failed: runs_failed,
        missing,
    } = collect(runs, unavailable);
    let med = |f: &dyn Fn(&RunStats) -> f64| median(ok.iter().map(|(s, _)| f(s)).collect());
    SummaryRow {
        workload,
        ps_mode,
        threads,
        scenario,
        runs_ok: ok.len(),
        runs_failed,
        qps: med(&|s| s.queries_per_sec),
        tps: med(&|s| s.transactions_per_sec),
        reads: med(&|s| s.reads as f64),
        avg_latency_ms: med(&|s| s.latency_avg_ms),
        p95_latency_ms: med(&|s| s.latency_percentile_ms),
        errors: (!ok.is_empty()).then(|| ok.iter().map(|(s, _)| s.ignored_errors).sum()),
        sluice_cpu_us_per_query: median(ok.iter().filter_map(|(_, c)| *c).collect()),
        qps_ratio_vs_direct: None,
        avg_latency_ratio_vs_direct: None,
        qps_ratio_vs_passthrough: None,
        cpu_ratio_vs_haproxy: None,
        cpu_ratio_vs_dedicated: None,
        cpu_ratio_vs_passthrough: None,
        spans_exported: None,
        spans_dropped: None,
        spans_per_query: None,
        missing,
    }
}

/// Sets `row`'s span figures from the successful `runs` of its step that counted spans.
fn set_spans(row: &mut SummaryRow, runs: &[RunRecord]) {
    let counted: Vec<(SpanCount, u64)> = runs
        .iter()
        .filter(|r| {
            (r.workload, r.ps_mode, r.threads, r.scenario)
                == (row.workload, row.ps_mode, row.threads, row.scenario)
        })
        .filter_map(|r| match (&r.outcome, r.spans) {
            (Outcome::Ok { stats, .. }, Some(spans)) => Some((spans, stats.queries)),
            _ => None,
        })
        .collect();
    if counted.is_empty() {
        return;
    }
    let exported: u64 = counted.iter().map(|(s, _)| s.exported).sum();
    let queries: u64 = counted.iter().map(|(_, q)| q).sum();
    row.spans_exported = Some(exported);
    row.spans_dropped = Some(counted.iter().map(|(s, _)| s.dropped).sum());
    row.spans_per_query = (queries > 0).then(|| exported as f64 / queries as f64);
}

fn summarize_inserts(
    per_trx: u32,
    scenario: Scenario,
    runs: &[&Outcome<InsertStats>],
    unavailable: Option<&str>,
) -> InsertRow {
    let Sorted {
        ok,
        failed: runs_failed,
        missing,
    } = collect(runs, unavailable);
    InsertRow {
        per_trx,
        scenario,
        runs_ok: ok.len(),
        runs_failed,
        rows_per_sec: median(ok.iter().map(|(s, _)| s.rows_per_sec).collect()),
        seconds: median(ok.iter().map(|(s, _)| s.seconds).collect()),
        sluice_cpu_us_per_insert: median(ok.iter().filter_map(|(_, c)| *c).collect()),
        ratio_vs_direct: None,
        missing,
    }
}

/// The median; the mean of the middle two for an even count.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// 45123 → "45,123".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).expect("ASCII digits"))
        .collect();
    groups.join(",")
}

#[cfg(test)]
mod tests;
