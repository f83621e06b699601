//! The benchmark's results: every sysbench run as measured, the per-step summary (median
//! over repetitions), and their renderings as Markdown, CSV and JSON.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use super::sysbench::{DataSet, PsMode, RunStats, Workload};
use super::Scenario;

/// Everything one `sluice bench` run knows; serialized as results.json.
#[derive(Debug, Serialize)]
pub struct Report {
    pub started_at: String,
    pub finished_at: Option<String>,
    pub status: Status,
    pub sluice_version: String,
    pub machine: Machine,
    pub sysbench_version: String,
    pub topology: Vec<String>,
    pub settings: Settings,
    pub notes: Vec<String>,
    pub commands: Commands,
    pub runs: Vec<RunRecord>,
    /// Derived from `runs` when the report is written.
    pub summary: Vec<SummaryRow>,
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

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub logical_cpus: usize,
    pub memory: String,
    pub kernel: String,
}

impl Machine {
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
    pub scenarios: Vec<Scenario>,
    pub workloads: Vec<Workload>,
    pub ps_modes: Vec<PsMode>,
    pub threads: Vec<u32>,
    pub duration_secs: u64,
    pub repeat: u32,
    pub data: DataSet,
}

/// Command lines outside the measured runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Commands {
    pub sluice: Option<String>,
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
    /// sysbench's output, relative to the output directory.
    pub output_file: Option<String>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Outcome {
    Ok {
        stats: RunStats,
        /// Sluice's user+system CPU time divided by the queries of the run (passthrough).
        sluice_cpu_us_per_query: Option<f64>,
    },
    Failed {
        error: String,
    },
    Skipped {
        reason: String,
    },
}

/// The median of one scenario's runs at one step: a row of results.csv.
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
    pub avg_latency_ms: Option<f64>,
    pub p95_latency_ms: Option<f64>,
    /// Ignored errors, summed over the runs.
    pub errors: Option<u64>,
    pub sluice_cpu_us_per_query: Option<f64>,
    /// This scenario's qps over direct's at the same step.
    pub qps_ratio_vs_direct: Option<f64>,
    /// Why there is no number, when there is none.
    pub missing: Option<String>,
}

type Key = (Workload, PsMode, u32, Scenario);

impl Report {
    /// Recomputes `summary` from `runs`, in plan order.
    pub fn summarize(&mut self) {
        let mut by_key: BTreeMap<usize, (Key, Vec<&RunRecord>)> = BTreeMap::new();
        let keys = self.keys();
        for run in &self.runs {
            let key = (run.workload, run.ps_mode, run.threads, run.scenario);
            if let Some(i) = keys.iter().position(|k| *k == key) {
                by_key
                    .entry(i)
                    .or_insert_with(|| (key, Vec::new()))
                    .1
                    .push(run);
            }
        }
        let mut rows: Vec<SummaryRow> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let runs = by_key.get(&i).map(|(_, r)| r.as_slice()).unwrap_or(&[]);
                summarize_runs(*key, runs)
            })
            .collect();
        let direct_qps: HashMap<(Workload, PsMode, u32), f64> = rows
            .iter()
            .filter(|r| r.scenario == Scenario::Direct)
            .filter_map(|r| Some(((r.workload, r.ps_mode, r.threads), r.qps?)))
            .collect();
        for row in &mut rows {
            if row.scenario != Scenario::Direct {
                let direct = direct_qps.get(&(row.workload, row.ps_mode, row.threads));
                row.qps_ratio_vs_direct = match (row.qps, direct) {
                    (Some(q), Some(&d)) if d > 0.0 => Some(q / d),
                    _ => None,
                };
            }
        }
        self.summary = rows;
    }

    fn keys(&self) -> Vec<Key> {
        let s = &self.settings;
        let mut keys = Vec::new();
        for &w in &s.workloads {
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

    fn row(&self, w: Workload, p: PsMode, t: u32, sc: Scenario) -> Option<&SummaryRow> {
        self.summary
            .iter()
            .find(|r| r.workload == w && r.ps_mode == p && r.threads == t && r.scenario == sc)
    }

    /// One Markdown table per workload and ps-mode: direct next to passthrough.
    pub fn markdown_tables(&self) -> String {
        let mut out = String::new();
        for &w in &self.settings.workloads {
            for &p in &self.settings.ps_modes {
                let _ = writeln!(out, "### {w}, {} (--db-ps-mode={p})\n", p.describe());
                out.push_str(&self.markdown_table(w, p));
                out.push('\n');
            }
        }
        out
    }

    fn markdown_table(&self, w: Workload, p: PsMode) -> String {
        let mut out = String::from(
            "| threads | direct qps | sluice qps | ratio | direct avg ms | sluice avg ms \
             | direct p95 ms | sluice p95 ms | sluice CPU µs/query | errors (direct / sluice) |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let mut problems = Vec::new();
        for &t in &self.settings.threads {
            let d = self.row(w, p, t, Scenario::Direct);
            let s = self.row(w, p, t, Scenario::Passthrough);
            for row in [d, s].into_iter().flatten() {
                if let Some(why) = &row.missing {
                    problems.push(format!("{} at threads={t}: {why}", row.scenario));
                }
            }
            let cell =
                |row: Option<&SummaryRow>, f: &dyn Fn(&SummaryRow) -> Option<String>| match row {
                    None => "—".to_string(),
                    Some(r) => f(r).unwrap_or_else(|| missing_mark(r)),
                };
            let qps = |r: &SummaryRow| r.qps.map(|v| thousands(v.round() as u64));
            let avg = |r: &SummaryRow| r.avg_latency_ms.map(|v| format!("{v:.2}"));
            let p95 = |r: &SummaryRow| r.p95_latency_ms.map(|v| format!("{v:.2}"));
            let errors = |r: &SummaryRow| r.errors.map(|e| e.to_string());
            // Measured but not applicable (no direct run to compare with, no Sluice pid
            // to read): a dash, not a failure mark.
            let ratio = s
                .and_then(|r| r.qps_ratio_vs_direct)
                .map_or_else(|| "—".to_string(), |v| format!("{v:.2}"));
            let cpu = cell(s, &|r| {
                r.qps.map(|_| {
                    r.sluice_cpu_us_per_query
                        .map_or_else(|| "—".to_string(), |v| format!("{v:.1}"))
                })
            });
            let _ = writeln!(
                out,
                "| {t} | {} | {} | {ratio} | {} | {} | {} | {} | {cpu} | {} / {} |",
                cell(d, &qps),
                cell(s, &qps),
                cell(d, &avg),
                cell(s, &avg),
                cell(d, &p95),
                cell(s, &p95),
                cell(d, &errors),
                cell(s, &errors),
            );
        }
        if !problems.is_empty() {
            out.push('\n');
            for problem in problems {
                let _ = writeln!(out, "- {problem}");
            }
        }
        out
    }

    /// The whole report as Markdown (results.md).
    pub fn markdown(&self) -> String {
        let mut out = String::from("# Sluice benchmark: direct vs passthrough\n\n");
        let status = match &self.status {
            Status::Running => "**in progress** (partial results)".to_string(),
            Status::Finished => {
                let failed = self
                    .runs
                    .iter()
                    .filter(|r| !matches!(r.outcome, Outcome::Ok { .. }));
                match failed.count() {
                    0 => "finished".to_string(),
                    n => format!("finished, **{n} run(s) failed or skipped** (marked below)"),
                }
            }
            Status::Aborted(why) => {
                format!(
                    "**aborted** (partial results): {}",
                    why.lines().next().unwrap_or("")
                )
            }
        };
        let s = &self.settings;
        let _ = writeln!(
            out,
            "- Started {}, {}{}.\n\
             - Machine: {} ({} logical CPUs), {} memory, {}.\n\
             - Load generator: {}.\n\
             - Sluice {}.",
            self.started_at,
            self.finished_at
                .as_ref()
                .map(|f| format!("ended {f}, "))
                .unwrap_or_default(),
            status,
            self.machine.cpu,
            self.machine.logical_cpus,
            self.machine.memory,
            self.machine.kernel,
            self.sysbench_version,
            self.sluice_version,
        );
        for line in &self.topology {
            let _ = writeln!(out, "- {line}");
        }
        let _ = writeln!(
            out,
            "- Data: {} tables x {} rows. Threads {}; {} s per step; {} repetition(s) per \
             step, scenarios alternating ({}); medians reported.",
            s.data.tables,
            thousands(s.data.table_size),
            join(&s.threads),
            s.duration_secs,
            s.repeat,
            join(&s.scenarios),
        );
        for note in &self.notes {
            let _ = writeln!(out, "- Note: {note}");
        }
        if let Status::Aborted(why) = &self.status {
            if why.lines().count() > 1 {
                let _ = writeln!(out, "\n```text\n{why}\n```");
            }
        }
        out.push_str(
            "\nqps: queries per second. avg and p95: per-event latency as sysbench reports it \
             (an event is 1 query in oltp_point_select, 14 in oltp_read_only), in ms with \
             sysbench's two decimals. ratio: sluice qps / direct qps. sluice CPU µs/query: \
             the Sluice process's user+system CPU time during the run divided by the \
             queries of the run. errors: sysbench's ignored errors. FAILED / skipped: no \
             measurement, reason under the table.\n\n## Results\n\n",
        );
        out.push_str(&self.markdown_tables());

        out.push_str("## Commands\n\n");
        if self.commands.sluice.is_some() || self.commands.prepare.is_some() {
            out.push_str("```sh\n");
            if let Some(c) = &self.commands.sluice {
                let _ = writeln!(out, "# Sluice\n{c}");
            }
            if let Some(c) = &self.commands.prepare {
                let _ = writeln!(out, "# data\n{c}");
            }
            if let Some(c) = &self.commands.cleanup {
                let _ = writeln!(out, "{c}");
            }
            out.push_str("```\n\n");
        }
        out.push_str(
            "Every command ran under `ulimit -n 65535` (or the hard limit, if lower). At \
             each step the scenarios ran one after the other, alternating when repeated; \
             the output of every run is in `raw/`.\n\n",
        );
        for &w in &s.workloads {
            for &p in &s.ps_modes {
                let mut seen: Vec<&str> = Vec::new();
                for run in self
                    .runs
                    .iter()
                    .filter(|r| r.workload == w && r.ps_mode == p)
                {
                    if !seen.contains(&run.command.as_str()) {
                        seen.push(&run.command);
                    }
                }
                if seen.is_empty() {
                    continue;
                }
                let _ = writeln!(out, "### {w}, --db-ps-mode={p}\n\n```sh");
                for c in seen {
                    let _ = writeln!(out, "{c}");
                }
                out.push_str("```\n\n");
            }
        }
        out
    }

    /// The summary as CSV (results.csv), one row per workload, ps-mode, threads and
    /// scenario.
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "workload,ps_mode,threads,scenario,runs_ok,runs_failed,qps,tps,avg_latency_ms,\
             p95_latency_ms,errors,sluice_cpu_us_per_query,qps_ratio_vs_direct,missing\n",
        );
        let num = |v: Option<f64>, decimals: usize| {
            v.map(|v| format!("{v:.decimals$}")).unwrap_or_default()
        };
        for r in &self.summary {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.workload,
                r.ps_mode,
                r.threads,
                r.scenario,
                r.runs_ok,
                r.runs_failed,
                num(r.qps, 2),
                num(r.tps, 2),
                num(r.avg_latency_ms, 2),
                num(r.p95_latency_ms, 2),
                r.errors.map(|e| e.to_string()).unwrap_or_default(),
                num(r.sluice_cpu_us_per_query, 2),
                num(r.qps_ratio_vs_direct, 4),
                csv_field(r.missing.as_deref().unwrap_or("")),
            );
        }
        out
    }

    /// Writes results.md, results.json and results.csv into `dir`; returns their paths.
    pub fn write(&mut self, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        self.summarize();
        let files = [
            ("results.md", self.markdown()),
            ("results.json", serde_json::to_string_pretty(self)? + "\n"),
            ("results.csv", self.csv()),
        ];
        let mut paths = Vec::new();
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            paths.push(path);
        }
        Ok(paths)
    }
}

fn summarize_runs(key: Key, runs: &[&RunRecord]) -> SummaryRow {
    let (workload, ps_mode, threads, scenario) = key;
    let ok: Vec<(&RunStats, Option<f64>)> = runs
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Ok {
                stats,
                sluice_cpu_us_per_query,
            } => Some((stats, *sluice_cpu_us_per_query)),
            _ => None,
        })
        .collect();
    let failed: Vec<&str> = runs
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed { error } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    let skipped = runs.iter().find_map(|r| match &r.outcome {
        Outcome::Skipped { reason } => Some(reason.as_str()),
        _ => None,
    });
    let missing = if !ok.is_empty() {
        None
    } else if let Some(error) = failed.first() {
        Some(format!("FAILED: {}", first_line(error)))
    } else if let Some(reason) = skipped {
        Some(format!("skipped: {reason}"))
    } else {
        Some("not run".to_string())
    };
    let med = |f: &dyn Fn(&RunStats) -> f64| median(ok.iter().map(|(s, _)| f(s)).collect());
    SummaryRow {
        workload,
        ps_mode,
        threads,
        scenario,
        runs_ok: ok.len(),
        runs_failed: failed.len(),
        qps: med(&|s| s.queries_per_sec),
        tps: med(&|s| s.transactions_per_sec),
        avg_latency_ms: med(&|s| s.latency_avg_ms),
        p95_latency_ms: med(&|s| s.latency_percentile_ms),
        errors: (!ok.is_empty()).then(|| ok.iter().map(|(s, _)| s.ignored_errors).sum()),
        sluice_cpu_us_per_query: median(ok.iter().filter_map(|(_, c)| *c).collect()),
        qps_ratio_vs_direct: None,
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

fn missing_mark(row: &SummaryRow) -> String {
    match &row.missing {
        Some(m) if m.starts_with("FAILED") => "FAILED".into(),
        Some(m) if m.starts_with("skipped") => "skipped".into(),
        _ => "—".into(),
    }
}

fn first_line(s: &str) -> &str {
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

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\"").replace('\n', " "))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sysbench::parse_run;

    fn report() -> Report {
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
            sysbench_version: "sysbench 1.0.20".into(),
            topology: vec![],
            settings: Settings {
                scenarios: vec![Scenario::Direct, Scenario::Passthrough],
                workloads: vec![Workload::OltpReadOnly],
                ps_modes: vec![PsMode::Auto],
                threads: vec![1, 16],
                duration_secs: 3,
                repeat: 3,
                data: DataSet {
                    tables: 2,
                    table_size: 1000,
                },
            },
            notes: vec![],
            commands: Commands::default(),
            runs: vec![],
            summary: vec![],
        }
    }

    fn stats(qps: f64, avg: f64) -> RunStats {
        let mut s = parse_run(include_str!("testdata/run_read_only_ps_auto.txt")).unwrap();
        s.queries_per_sec = qps;
        s.latency_avg_ms = avg;
        s
    }

    fn record(threads: u32, scenario: Scenario, rep: u32, outcome: Outcome) -> RunRecord {
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

    fn ok(qps: f64, avg: f64, cpu: Option<f64>) -> Outcome {
        Outcome::Ok {
            stats: stats(qps, avg),
            sluice_cpu_us_per_query: cpu,
        }
    }

    #[test]
    fn medians_and_ratio() {
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
                reason: "Sluice exited earlier".into(),
            },
        ));
        r.status = Status::Aborted("interrupted".into());
        r.summarize();
        let md = r.markdown();
        assert!(
            md.contains("| 1 | 36,303 | FAILED | — | 0.77 | FAILED |"),
            "{md}"
        );
        assert!(md.contains("| 16 | 50,000 | skipped |"), "{md}");
        assert!(
            md.contains(
                "- passthrough at threads=1: FAILED: oltp_read_only: sysbench exited with status 1"
            ),
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
            "oltp_read_only,auto,1,direct,1,0,36303.36,2593.10,0.77,1.12,0,,,"
        );
        assert!(
            lines[2].starts_with("oltp_read_only,auto,1,passthrough,0,1,,,,,,,,FAILED:"),
            "{}",
            lines[2]
        );
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(json["runs"][1]["status"], "failed");
        assert_eq!(json["runs"][0]["stats"]["queries"], 108990);
        assert_eq!(json["status"]["state"], "aborted");
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
