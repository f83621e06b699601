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
    /// How each Sluice the benchmark started was run, with its configuration.
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
    pub sluice_cpu_us_per_query: Option<f64>,
    /// This scenario's qps over direct's at the same step.
    pub qps_ratio_vs_direct: Option<f64>,
    /// This scenario's average latency over direct's at the same step.
    pub avg_latency_ratio_vs_direct: Option<f64>,
    /// A caching scenario's qps over passthrough's at the same step: what the cache
    /// gains over the same proxy without it.
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
        let direct: HashMap<Step, SummaryRow> = rows
            .iter()
            .filter(|r| r.scenario == Scenario::Direct)
            .map(|r| ((r.workload, r.ps_mode, r.threads), r.clone()))
            .collect();
        for row in rows.iter_mut().filter(|r| r.scenario != Scenario::Direct) {
            if let Some(d) = direct.get(&(row.workload, row.ps_mode, row.threads)) {
                row.qps_ratio_vs_direct = ratio(row.qps, d.qps);
                row.avg_latency_ratio_vs_direct = ratio(row.avg_latency_ms, d.avg_latency_ms);
            }
        }
        let passthrough: HashMap<Step, Option<f64>> = rows
            .iter()
            .filter(|r| r.scenario == Scenario::Passthrough)
            .map(|r| ((r.workload, r.ps_mode, r.threads), r.qps))
            .collect();
        for row in rows.iter_mut().filter(|r| r.scenario.caches()) {
            if let Some(&p) = passthrough.get(&(row.workload, row.ps_mode, row.threads)) {
                row.qps_ratio_vs_passthrough = ratio(row.qps, p);
            }
        }
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
        self.document().write(dir)
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
        missing,
    }
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
mod tests {
    use super::*;
    use crate::sysbench::parse_run;

    pub(crate) fn report() -> Report {
        Report {
            started_at: "2024-05-01T10:00:00Z".into(),
            finished_at: None,
            status: Status::Running,
            sluice_version: "0.1.0".into(),
            machine: Machine {
                cpu: "test cpu".into(),
                logical_cpus: 2,
                memory: "1.0 GiB".into(),
                kernel: "Linux".into(),
            },
            sysbench_version: Some("sysbench 1.0.20".into()),
            mysqlslap_version: None,
            topology: vec![],
            settings: Settings {
                scenarios: vec![Scenario::Direct, Scenario::Passthrough],
                unavailable: vec![],
                workloads: vec![Workload::OltpReadOnly],
                ps_modes: vec![PsMode::Auto],
                threads: vec![1, 16],
                duration_secs: 3,
                repeat: 3,
                data: DataSet {
                    tables: 2,
                    table_size: 1000,
                },
                insert: None,
            },
            notes: vec![],
            commands: Commands::default(),
            runs: vec![],
            inserts: vec![],
            summary: vec![],
            insert_summary: vec![],
        }
    }

    fn stats(qps: f64, avg: f64) -> RunStats {
        let mut s = parse_run(include_str!("testdata/run_read_only_ps_auto.txt")).unwrap();
        s.queries_per_sec = qps;
        s.latency_avg_ms = avg;
        s
    }

    pub(crate) fn record(
        threads: u32,
        scenario: Scenario,
        rep: u32,
        outcome: Outcome<RunStats>,
    ) -> RunRecord {
        RunRecord {
            workload: Workload::OltpReadOnly,
            ps_mode: PsMode::Auto,
            threads,
            scenario,
            repetition: rep,
            command: format!("sysbench oltp_read_only --threads={threads} run # {scenario}"),
            output_file: None,
            outcome,
        }
    }

    pub(crate) fn ok(qps: f64, avg: f64, cpu: Option<f64>) -> Outcome<RunStats> {
        Outcome::Ok {
            stats: stats(qps, avg),
            sluice_cpu_us_per_query: cpu,
        }
    }

    fn insert(per_trx: u32, scenario: Scenario, rows_per_sec: Option<f64>) -> InsertRecord {
        InsertRecord {
            per_trx,
            scenario,
            repetition: 1,
            command: format!("mysqlslap --commit={per_trx} # {scenario}"),
            output_file: None,
            outcome: match rows_per_sec {
                Some(r) => Outcome::Ok {
                    stats: InsertStats {
                        rows: 16_000,
                        clients: 16,
                        seconds: 16_000.0 / r,
                        rows_per_sec: r,
                    },
                    sluice_cpu_us_per_query: (scenario != Scenario::Direct).then_some(12.5),
                },
                None => Outcome::Failed {
                    error: "mysqlslap exited with status 1: Lost connection".into(),
                },
            },
        }
    }

    #[test]
    fn medians_and_ratios() {
        let mut r = report();
        for (rep, (dq, sq)) in [(100.0, 80.0), (300.0, 90.0), (200.0, 1000.0)]
            .into_iter()
            .enumerate()
        {
            let rep = rep as u32 + 1;
            r.runs
                .push(record(1, Scenario::Direct, rep, ok(dq, 1.0, None)));
            r.runs.push(record(
                1,
                Scenario::Passthrough,
                rep,
                ok(sq, 2.0 * rep as f64, Some(rep as f64 * 10.0)),
            ));
        }
        r.summarize();
        assert_eq!(r.summary.len(), 4);
        let d = r
            .row(Workload::OltpReadOnly, PsMode::Auto, 1, Scenario::Direct)
            .unwrap();
        assert_eq!(d.qps, Some(200.0));
        assert_eq!(d.reads, Some(108990.0));
        assert_eq!(d.runs_ok, 3);
        assert_eq!(d.qps_ratio_vs_direct, None);
        let s = r
            .row(
                Workload::OltpReadOnly,
                PsMode::Auto,
                1,
                Scenario::Passthrough,
            )
            .unwrap();
        assert_eq!(s.qps, Some(90.0));
        assert_eq!(s.avg_latency_ms, Some(4.0));
        assert_eq!(s.sluice_cpu_us_per_query, Some(20.0));
        assert_eq!(s.qps_ratio_vs_direct, Some(0.45));
        assert_eq!(s.avg_latency_ratio_vs_direct, Some(4.0));
        // The 16-thread step never ran.
        let later = r
            .row(
                Workload::OltpReadOnly,
                PsMode::Auto,
                16,
                Scenario::Passthrough,
            )
            .unwrap();
        assert_eq!(later.missing.as_deref(), Some("not run"));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn failures_are_marked_not_hidden() {
        let mut r = report();
        r.runs
            .push(record(1, Scenario::Direct, 1, ok(36303.36, 0.77, None)));
        r.runs.push(record(
            1,
            Scenario::Passthrough,
            1,
            Outcome::Failed {
                error: "oltp_read_only: sysbench exited with status 1\n  tail".into(),
            },
        ));
        r.runs
            .push(record(16, Scenario::Direct, 1, ok(50000.0, 0.5, None)));
        r.runs.push(record(
            16,
            Scenario::Passthrough,
            1,
            Outcome::Skipped {
                reason: "its Sluice exited during an earlier run".into(),
            },
        ));
        r.status = Status::Aborted("interrupted".into());
        r.summarize();
        assert_eq!(r.runs_not_ok(), 2);
        let md = render::document(&r).markdown();
        assert!(
            md.contains("| 1 | 36,303 | FAILED | — |"),
            "throughput row: {md}"
        );
        assert!(
            md.contains("| 1 | 0.77 | FAILED | — |"),
            "latency row: {md}"
        );
        assert!(md.contains("| 16 | 50,000 | skipped | — |"), "{md}");
        assert!(
            md.contains(
                "- passthrough at 1: FAILED: oltp_read_only: sysbench exited with status 1"
            ),
            "{md}"
        );
        assert!(
            md.contains("- passthrough at 16: skipped: its Sluice exited during an earlier run"),
            "{md}"
        );
        assert!(
            md.contains("**aborted** (partial results): interrupted"),
            "{md}"
        );
        let csv = r.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(
            lines[1],
            "oltp_read_only,auto,1,,direct,1,0,36303.36,2593.10,108990,,0.77,1.12,0,,,,,"
        );
        assert!(
            lines[2].starts_with("oltp_read_only,auto,1,,passthrough,0,1,,,,,,,,,,,,FAILED:"),
            "{}",
            lines[2]
        );
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(json["runs"][1]["status"], "failed");
        assert_eq!(json["runs"][0]["stats"]["queries"], 108990);
        assert_eq!(json["runs"][0]["stats"]["reads"], 108990);
        assert_eq!(json["status"]["state"], "aborted");
    }

    #[test]
    fn an_unavailable_scenario_reads_na_everywhere() {
        let mut r = report();
        r.settings.scenarios.push(Scenario::Cached);
        r.settings.unavailable.push(Unavailable {
            scenario: Scenario::Cached,
            reason: "this Sluice has no query cache yet".into(),
        });
        r.runs
            .push(record(1, Scenario::Direct, 1, ok(1000.0, 1.0, None)));
        r.runs.push(record(
            1,
            Scenario::Passthrough,
            1,
            ok(800.0, 1.25, Some(20.0)),
        ));
        r.status = Status::Finished;
        r.summarize();
        // Never attempted: not a failure.
        assert_eq!(r.runs_not_ok(), 0);
        let sections = render::sections(&r);
        let md = render::document(&r).markdown();
        assert!(
            md.contains(
                "| threads | direct | passthrough | cached | passthrough ÷ direct | cached ÷ direct \
                 | cached ÷ passthrough |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 1 | 1,000 | 800 | n/a | 0.80 | — | — |"),
            "{md}"
        );
        // One note for the whole ramp, not one per step.
        assert_eq!(
            md.matches("cached: n/a: this Sluice has no query cache yet")
                .count(),
            sections.len()
        );
        assert!(md.contains("cached: not available: this Sluice has no query cache yet"));
        // Charts leave the unavailable scenario out rather than drawing an empty line.
        assert!(sections[0].charts[0]
            .chart
            .series
            .iter()
            .all(|s| s.name != "cached"));
    }

    #[test]
    fn a_cache_is_set_against_passthrough_too() {
        let mut r = report();
        r.settings.scenarios.push(Scenario::Cached);
        for (scenario, qps) in [
            (Scenario::Direct, 1000.0),
            (Scenario::Passthrough, 800.0),
            (Scenario::Cached, 1200.0),
        ] {
            r.runs.push(record(16, scenario, 1, ok(qps, 1.0, None)));
        }
        r.summarize();
        let row = |sc| r.row(Workload::OltpReadOnly, PsMode::Auto, 16, sc).unwrap();
        assert_eq!(row(Scenario::Cached).qps_ratio_vs_passthrough, Some(1.5));
        assert_eq!(row(Scenario::Cached).qps_ratio_vs_direct, Some(1.2));
        // Only a cache is measured against the proxy without one.
        assert_eq!(row(Scenario::Passthrough).qps_ratio_vs_passthrough, None);
        assert_eq!(row(Scenario::Direct).qps_ratio_vs_passthrough, None);
        let md = render::document(&r).markdown();
        assert!(
            md.contains("| 16 | 1,000 | 800 | 1,200 | 0.80 | 1.20 | 1.50 |"),
            "{md}"
        );
        // Latency has ratios to direct only.
        assert!(
            md.contains("| 16 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 |\n"),
            "{md}"
        );
        assert!(
            r.csv()
                .contains("\noltp_read_only,auto,16,,cached,1,0,1200.00,"),
            "{}",
            r.csv()
        );
        assert!(r.csv().contains(",1.2000,1.0000,1.5000,\n"), "{}", r.csv());
    }

    #[test]
    fn caching_by_table_appears_wherever_cached_does() {
        let mut r = report();
        r.settings.scenarios = vec![
            Scenario::Direct,
            Scenario::Passthrough,
            Scenario::Cached,
            Scenario::CachedByTable,
        ];
        r.settings.workloads = vec![Workload::OltpReadOnly, Workload::Insert];
        r.settings.insert = Some(InsertSettings {
            clients: 16,
            rows: 16_000,
            per_trx: vec![1],
        });
        for (scenario, qps, cpu) in [
            (Scenario::Direct, 1000.0, None),
            (Scenario::Passthrough, 800.0, Some(20.0)),
            (Scenario::Cached, 1200.0, Some(12.0)),
            (Scenario::CachedByTable, 600.0, Some(30.0)),
        ] {
            r.runs.push(record(16, scenario, 1, ok(qps, 1.0, cpu)));
        }
        r.summarize();
        let row = |sc| r.row(Workload::OltpReadOnly, PsMode::Auto, 16, sc).unwrap();
        let by_table = row(Scenario::CachedByTable);
        assert_eq!(by_table.qps_ratio_vs_direct, Some(0.6));
        assert_eq!(by_table.qps_ratio_vs_passthrough, Some(0.75));
        // A cache has no part in the insert series.
        assert_eq!(
            r.settings.insert_scenarios(),
            [Scenario::Direct, Scenario::Passthrough]
        );
        let sections = render::sections(&r);
        let md = crate::document::markdown_sections(&sections);
        assert!(
            md.contains(
                "| threads | direct | passthrough | cached | cached-by-table | passthrough ÷ \
                 direct | cached ÷ direct | cached-by-table ÷ direct | cached ÷ passthrough | \
                 cached-by-table ÷ passthrough |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 16 | 1,000 | 800 | 1,200 | 600 | 0.80 | 1.20 | 0.60 | 1.50 | 0.75 |"),
            "{md}"
        );
        assert!(
            md.contains("| cached-by-table: Sluice CPU µs/query |"),
            "{md}"
        );
        assert!(
            md.contains("| 20.0 | 12.0 | 30.0 | 0 | 0 | 0 | 0 |"),
            "{md}"
        );
        for chart in &sections[0].charts {
            let names: Vec<&str> = chart.chart.series.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(
                names,
                ["direct", "passthrough", "cached", "cached-by-table"],
                "{}",
                chart.file_stem
            );
        }
        let csv = r.csv();
        assert!(
            csv.contains("\noltp_read_only,auto,16,,cached-by-table,1,0,600.00,"),
            "{csv}"
        );
        assert!(csv.contains(",0.6000,1.0000,0.7500,\n"), "{csv}");
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(json["settings"]["scenarios"][3], "cached_by_table");
        // Threads 1 (not run), then 16: direct, passthrough, cached, cached_by_table.
        assert_eq!(json["summary"][7]["scenario"], "cached_by_table");
        assert_eq!(json["summary"][7]["qps_ratio_vs_passthrough"], 0.75);
        let facts = render::document(&r).facts.join("\n");
        assert!(facts.contains("`by_key = false`"), "{facts}");
    }

    #[test]
    fn insert_series_summary_and_table() {
        let mut r = report();
        r.settings.workloads = vec![Workload::Insert];
        r.settings.scenarios = vec![Scenario::Direct, Scenario::Passthrough, Scenario::Cached];
        r.settings.insert = Some(InsertSettings {
            clients: 16,
            rows: 16_000,
            per_trx: vec![1, 10],
        });
        r.inserts.push(insert(1, Scenario::Direct, Some(8000.0)));
        r.inserts
            .push(insert(1, Scenario::Passthrough, Some(6000.0)));
        r.inserts.push(insert(10, Scenario::Direct, Some(16000.0)));
        r.inserts.push(insert(10, Scenario::Passthrough, None));
        r.summarize();
        assert!(r.summary.is_empty());
        // No cached rows: a cache has nothing to serve to inserts.
        assert_eq!(r.insert_summary.len(), 4);
        let p = r.insert_row(1, Scenario::Passthrough).unwrap();
        assert_eq!(p.ratio_vs_direct, Some(0.75));
        assert_eq!(p.sluice_cpu_us_per_insert, Some(12.5));
        assert_eq!(p.seconds, Some(16_000.0 / 6000.0));
        assert!(r
            .insert_row(10, Scenario::Passthrough)
            .unwrap()
            .missing
            .as_deref()
            .unwrap()
            .starts_with("FAILED: mysqlslap exited"));
        let sections = render::sections(&r);
        assert_eq!(sections.len(), 1);
        let md = crate::document::markdown_sections(&sections);
        assert!(
            md.contains("| 1 | 8,000 | 6,000 | 0.75 | 2.00 | 2.67 | 12.5 |"),
            "{md}"
        );
        assert!(
            md.contains("| 10 | 16,000 | FAILED | — | 1.00 | FAILED | FAILED |"),
            "{md}"
        );
        let csv = r.csv();
        assert!(
            csv.contains("\ninsert,,16,1,passthrough,1,0,,,,6000.00,2666.67,,,12.50,0.7500,,,\n"),
            "{csv}"
        );
    }

    #[test]
    fn write_produces_every_file_and_a_self_contained_page() {
        let mut r = report();
        r.runs
            .push(record(1, Scenario::Direct, 1, ok(1000.0, 1.0, None)));
        r.runs.push(record(
            1,
            Scenario::Passthrough,
            1,
            ok(800.0, 1.25, Some(20.0)),
        ));
        r.runs
            .push(record(16, Scenario::Direct, 1, ok(4000.0, 4.0, None)));
        r.runs.push(record(
            16,
            Scenario::Passthrough,
            1,
            ok(3000.0, 5.3, Some(25.0)),
        ));
        r.notes.push("a <note> & more".into());
        let dir = tempfile::tempdir().unwrap();
        let paths = r.write(dir.path()).unwrap();
        let names: Vec<String> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["results.md", "results.json", "results.csv", "report.html"]
        );
        let mut charts: Vec<String> = std::fs::read_dir(dir.path().join("charts"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        charts.sort();
        assert_eq!(
            charts,
            [
                "oltp_read_only-auto-avg-latency.svg",
                "oltp_read_only-auto-p95-latency.svg",
                "oltp_read_only-auto-qps.svg"
            ]
        );
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        // Everything inline: no scripts, stylesheets or images fetched from anywhere.
        for outside in ["<script", "<link", "src=", "http://", "https://"] {
            let allowed = html.matches("http://www.w3.org/2000/svg").count();
            if outside == "http://" {
                assert_eq!(html.matches(outside).count(), allowed, "{outside}");
            } else {
                assert!(!html.contains(outside), "{outside}");
            }
        }
        assert_eq!(html.matches("<svg").count(), 3);
        assert!(html.contains("<td>800</td>"), "{html}");
        assert!(html.contains("a &lt;note&gt; &amp; more"));
        assert!(!html.contains("<note>"));
        let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
        assert!(md.contains("![oltp_read_only, prepared statements: throughput](charts/oltp_read_only-auto-qps.svg)"), "{md}");
        let qps =
            std::fs::read_to_string(dir.path().join("charts/oltp_read_only-auto-qps.svg")).unwrap();
        assert!(qps.contains("passthrough") && qps.contains("direct"));
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
