//! How the cache scenario's report reads: per workload, the published report's tables
//! (throughput, total reads, average and 95th-percentile latency) plus Sluice's CPU
//! cost, the insert series, and charts of each against threads, as a [`Document`].

use std::collections::BTreeMap;

use crate::cache::Scenario;
use crate::chart::{Chart, Series};
use crate::document::{Document, NamedChart, Section, Table};
use crate::report::{thousands, InsertRow, Report, Status, SummaryRow};
use crate::sysbench::{PsMode, Workload};

/// Every section of the report, in plan order.
pub fn sections(report: &Report) -> Vec<Section> {
    let s = &report.settings;
    let mut out = Vec::new();
    for w in s.sysbench_workloads() {
        for &p in &s.ps_modes {
            out.push(sysbench_section(report, w, p));
        }
    }
    if s.insert.is_some() && s.workloads.contains(&Workload::Insert) {
        out.push(insert_section(report));
    }
    if let Some(staleness) = &report.staleness {
        out.push(crate::report::staleness::section(staleness));
    }
    out
}

/// One figure of a summary row, when it has one.
type Figure<'a> = &'a dyn Fn(&SummaryRow) -> Option<f64>;

/// A numeric column per scenario, one ratio column per scenario that is not direct, and
/// one per caching scenario against passthrough.
struct Metric<'a> {
    title: &'a str,
    value: Figure<'a>,
    format: &'a dyn Fn(f64) -> String,
    ratio: Option<Figure<'a>>,
    vs_passthrough: Option<Figure<'a>>,
}

fn sysbench_section(report: &Report, w: Workload, p: PsMode) -> Section {
    let s = &report.settings;
    let row = |t: u32, sc: Scenario| report.row(w, p, t, sc);
    let qps = |r: &SummaryRow| r.qps;
    let reads = |r: &SummaryRow| r.reads;
    let avg = |r: &SummaryRow| r.avg_latency_ms;
    let p95 = |r: &SummaryRow| r.p95_latency_ms;
    let qps_ratio = |r: &SummaryRow| r.qps_ratio_vs_direct;
    let avg_ratio = |r: &SummaryRow| r.avg_latency_ratio_vs_direct;
    let qps_vs_passthrough = |r: &SummaryRow| r.qps_ratio_vs_passthrough;
    let count = |v: f64| thousands(v.round() as u64);
    let ms = |v: f64| format!("{v:.2}");
    let metrics = [
        Metric {
            title: "Throughput (queries/s)",
            value: &qps,
            format: &count,
            ratio: Some(&qps_ratio),
            vs_passthrough: Some(&qps_vs_passthrough),
        },
        Metric {
            title: "Total reads",
            value: &reads,
            format: &count,
            ratio: None,
            vs_passthrough: None,
        },
        Metric {
            title: "Average latency (ms)",
            value: &avg,
            format: &ms,
            ratio: Some(&avg_ratio),
            vs_passthrough: None,
        },
        Metric {
            title: "95th percentile latency (ms)",
            value: &p95,
            format: &ms,
            ratio: None,
            vs_passthrough: None,
        },
    ];
    let mut tables: Vec<Table> = metrics
        .iter()
        .map(|m| metric_table(m, &s.threads, &s.scenarios, &row))
        .collect();
    tables.push(cost_table(&s.threads, &s.scenarios, &row));

    let mut missing = Missing::default();
    for &t in &s.threads {
        for &sc in &s.scenarios {
            if let Some(why) = row(t, sc).and_then(|r| r.missing.as_deref()) {
                missing.add(sc, why, t);
            }
        }
    }

    let stem = format!("{w}-{p}");
    let label = format!("{w}, {}", p.describe());
    let series = |value: &dyn Fn(&SummaryRow) -> Option<f64>| -> Vec<Series> {
        s.scenarios
            .iter()
            .filter(|sc| s.unavailable(**sc).is_none())
            .map(|&sc| Series {
                name: sc.to_string(),
                points: s
                    .threads
                    .iter()
                    .filter_map(|&t| Some((f64::from(t), value(row(t, sc)?)?)))
                    .collect(),
            })
            .collect()
    };
    let chart =
        |suffix: &str, what: &str, unit: &str, value: &dyn Fn(&SummaryRow) -> Option<f64>| {
            NamedChart {
                file_stem: format!("{stem}-{suffix}"),
                chart: Chart {
                    title: format!("{label}: {what}"),
                    x_label: "threads".into(),
                    y_label: unit.into(),
                    series: series(value),
                },
            }
        };
    Section {
        title: format!("{w}, {} (--db-ps-mode={p})", p.describe()),
        tables,
        notes: missing.lines(&s.threads),
        charts: vec![
            chart("qps", "throughput", "queries/s", &qps),
            chart("avg-latency", "average latency", "ms", &avg),
            chart("p95-latency", "95th percentile latency", "ms", &p95),
        ],
    }
}

fn metric_table<'r>(
    m: &Metric,
    threads: &[u32],
    scenarios: &[Scenario],
    row: &dyn Fn(u32, Scenario) -> Option<&'r SummaryRow>,
) -> Table {
    let others: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|s| *s != Scenario::Direct)
        .collect();
    let has_direct = scenarios.contains(&Scenario::Direct);
    let caching: Vec<Scenario> = match m.vs_passthrough {
        Some(_) if scenarios.contains(&Scenario::Passthrough) => scenarios
            .iter()
            .copied()
            .filter(|s| s.caches() || s.traces())
            .collect(),
        _ => Vec::new(),
    };
    let mut header = vec!["threads".to_string()];
    header.extend(scenarios.iter().map(|s| s.to_string()));
    if let (Some(_), true) = (m.ratio, has_direct) {
        header.extend(others.iter().map(|s| format!("{s} ÷ direct")));
    }
    header.extend(caching.iter().map(|s| format!("{s} ÷ passthrough")));
    let rows = threads
        .iter()
        .map(|&t| {
            let mut cells = vec![t.to_string()];
            for &sc in scenarios {
                cells.push(cell(row(t, sc), &|r| (m.value)(r).map(|v| (m.format)(v))));
            }
            if let (Some(ratio), true) = (m.ratio, has_direct) {
                for &sc in &others {
                    cells.push(ratio_cell(row(t, sc).and_then(ratio)));
                }
            }
            if let Some(ratio) = m.vs_passthrough {
                for &sc in &caching {
                    cells.push(ratio_cell(row(t, sc).and_then(ratio)));
                }
            }
            cells
        })
        .collect();
    Table {
        title: m.title.to_string(),
        header,
        rows,
    }
}

/// A ratio with two decimals, or a dash where it has no value.
fn ratio_cell(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "—".to_string(), |v| format!("{v:.2}"))
}

/// The proxy's CPU time per query in each proxied scenario (with HAProxy's in the run,
/// each Sluice's over it; with dedicated's, passthrough's over it), and errors in every
/// scenario.
fn cost_table<'r>(
    threads: &[u32],
    scenarios: &[Scenario],
    row: &dyn Fn(u32, Scenario) -> Option<&'r SummaryRow>,
) -> Table {
    let proxied: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|s| *s != Scenario::Direct)
        .collect();
    let vs_haproxy: Vec<Scenario> = match scenarios.contains(&Scenario::Haproxy) {
        true => proxied.iter().copied().filter(|s| s.is_sluice()).collect(),
        false => Vec::new(),
    };
    let mut header = vec!["threads".to_string()];
    header.extend(
        proxied
            .iter()
            .map(|s| format!("{s}: {} CPU µs/query", s.proxy().unwrap_or_default())),
    );
    header.extend(vs_haproxy.iter().map(|s| format!("{s} CPU ÷ haproxy")));
    // Passthrough is the multiplexing Sluice: the one ratio dedicated has a meaning for.
    let vs_dedicated = [Scenario::Passthrough, Scenario::Dedicated]
        .iter()
        .all(|s| scenarios.contains(s));
    if vs_dedicated {
        header.push("multiplexed CPU ÷ dedicated".to_string());
    }
    // Tracing's cost: each traced Sluice against passthrough, tracing off.
    let traced: Vec<Scenario> = scenarios.iter().copied().filter(|s| s.traces()).collect();
    let vs_passthrough = match scenarios.contains(&Scenario::Passthrough) {
        true => traced.clone(),
        false => Vec::new(),
    };
    header.extend(
        vs_passthrough
            .iter()
            .map(|s| format!("{s} CPU ÷ passthrough")),
    );
    header.extend(traced.iter().map(|s| format!("{s}: spans/query (dropped)")));
    header.extend(scenarios.iter().map(|s| format!("{s}: errors")));
    let rows = threads
        .iter()
        .map(|&t| {
            let mut cells = vec![t.to_string()];
            for &sc in &proxied {
                cells.push(cell(row(t, sc), &|r| {
                    // Measured, but with no Sluice process to read: a dash, not a failure.
                    r.qps.map(|_| {
                        r.sluice_cpu_us_per_query
                            .map_or_else(|| "—".to_string(), |v| format!("{v:.1}"))
                    })
                }));
            }
            for &sc in &vs_haproxy {
                cells.push(ratio_cell(row(t, sc).and_then(|r| r.cpu_ratio_vs_haproxy)));
            }
            if vs_dedicated {
                let passthrough = row(t, Scenario::Passthrough);
                cells.push(ratio_cell(
                    passthrough.and_then(|r| r.cpu_ratio_vs_dedicated),
                ));
            }
            for &sc in &vs_passthrough {
                cells.push(ratio_cell(
                    row(t, sc).and_then(|r| r.cpu_ratio_vs_passthrough),
                ));
            }
            for &sc in &traced {
                cells.push(cell(row(t, sc), &|r| {
                    r.qps.map(|_| match (r.spans_per_query, r.spans_dropped) {
                        (Some(per), Some(dropped)) => format!("{per:.3} ({dropped})"),
                        _ => "—".to_string(),
                    })
                }));
            }
            for &sc in scenarios {
                cells.push(cell(row(t, sc), &|r| r.errors.map(|e| e.to_string())));
            }
            cells
        })
        .collect();
    let title = match vs_haproxy.is_empty() {
        true => "Sluice CPU time per query, and errors",
        false => "CPU time per query of each proxy, and errors",
    };
    Table {
        title: title.into(),
        header,
        rows,
    }
}

fn insert_section(report: &Report) -> Section {
    let s = &report.settings;
    let insert = s.insert.as_ref().expect("checked by the caller");
    let scenarios = s.insert_scenarios();
    let others: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|sc| *sc != Scenario::Direct)
        .collect();
    let has_direct = scenarios.contains(&Scenario::Direct);
    let row = |n: u32, sc: Scenario| report.insert_row(n, sc);
    let icell = |r: Option<&InsertRow>, f: &dyn Fn(&InsertRow) -> Option<String>| match r {
        None => "—".to_string(),
        Some(r) => f(r).unwrap_or_else(|| mark(r.missing.as_deref())),
    };

    let mut header = vec!["inserts/trx".to_string()];
    header.extend(scenarios.iter().map(|sc| format!("{sc} rows/s")));
    if has_direct {
        header.extend(others.iter().map(|sc| format!("{sc} ÷ direct")));
    }
    header.extend(scenarios.iter().map(|sc| format!("{sc} seconds")));
    header.extend(
        others
            .iter()
            .map(|sc| format!("{sc}: {} CPU µs/insert", sc.proxy().unwrap_or_default())),
    );
    let mut missing = Missing::default();
    let rows = insert
        .per_trx
        .iter()
        .map(|&n| {
            let mut cells = vec![n.to_string()];
            for &sc in &scenarios {
                if let Some(why) = row(n, sc).and_then(|r| r.missing.as_deref()) {
                    missing.add(sc, why, n);
                }
                cells.push(icell(row(n, sc), &|r| {
                    r.rows_per_sec.map(|v| thousands(v.round() as u64))
                }));
            }
            if has_direct {
                for &sc in &others {
                    cells.push(ratio_cell(row(n, sc).and_then(|r| r.ratio_vs_direct)));
                }
            }
            for &sc in &scenarios {
                cells.push(icell(row(n, sc), &|r| r.seconds.map(|v| format!("{v:.2}"))));
            }
            for &sc in &others {
                cells.push(icell(row(n, sc), &|r| {
                    r.rows_per_sec.map(|_| {
                        r.sluice_cpu_us_per_insert
                            .map_or_else(|| "—".to_string(), |v| format!("{v:.1}"))
                    })
                }));
            }
            cells
        })
        .collect();
    let series = scenarios
        .iter()
        .filter(|sc| s.unavailable(**sc).is_none())
        .map(|&sc| Series {
            name: sc.to_string(),
            points: insert
                .per_trx
                .iter()
                .filter_map(|&n| Some((f64::from(n), row(n, sc)?.rows_per_sec?)))
                .collect(),
        })
        .collect();
    Section {
        title: format!(
            "insert (mysqlslap, {} clients, {} rows per run)",
            insert.clients,
            thousands(insert.rows)
        ),
        tables: vec![Table {
            title: "Insert throughput (rows/s) by transaction length".into(),
            header,
            rows,
        }],
        notes: missing.lines(&insert.per_trx),
        charts: vec![NamedChart {
            file_stem: "insert-rows-per-sec".into(),
            chart: Chart {
                title: "insert: rows/s by transaction length".into(),
                x_label: "inserts per transaction".into(),
                y_label: "rows/s".into(),
                series,
            },
        }],
    }
}

/// A summary cell: the value, or a short mark saying why there is none.
fn cell(row: Option<&SummaryRow>, f: &dyn Fn(&SummaryRow) -> Option<String>) -> String {
    match row {
        None => "—".to_string(),
        Some(r) => f(r).unwrap_or_else(|| mark(r.missing.as_deref())),
    }
}

fn mark(missing: Option<&str>) -> String {
    match missing {
        Some(m) if m.starts_with("n/a") => "n/a".into(),
        Some(m) if m.starts_with("FAILED") => "FAILED".into(),
        Some(m) if m.starts_with("skipped") => "skipped".into(),
        _ => "—".into(),
    }
}

/// Why cells are empty, grouped so that one reason shared by many steps is one line.
#[derive(Default)]
struct Missing {
    /// (scenario, reason) → the steps it applies to, in first-seen order.
    by_reason: BTreeMap<(usize, String), (Scenario, Vec<u32>)>,
    order: usize,
}

impl Missing {
    fn add(&mut self, scenario: Scenario, reason: &str, step: u32) {
        let existing = self
            .by_reason
            .iter_mut()
            .find(|((_, r), (sc, _))| *sc == scenario && r == reason);
        match existing {
            Some((_, (_, steps))) => steps.push(step),
            None => {
                self.order += 1;
                self.by_reason
                    .insert((self.order, reason.to_string()), (scenario, vec![step]));
            }
        }
    }

    fn lines(&self, all_steps: &[u32]) -> Vec<String> {
        self.by_reason
            .iter()
            .map(|((_, reason), (scenario, steps))| {
                if steps.len() == all_steps.len() {
                    format!("{scenario}: {reason}")
                } else {
                    let list: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
                    format!("{scenario} at {}: {reason}", list.join(", "))
                }
            })
            .collect()
    }
}

/// A table as GitHub Markdown, numbers right-aligned.
/// One-line account of how far the run got.
fn status_line(report: &Report) -> String {
    match &report.status {
        Status::Running => "**in progress** (partial results)".to_string(),
        Status::Finished => match report.runs_not_ok() {
            0 => "finished".to_string(),
            n => format!("finished, **{n} run(s) failed or were skipped** (marked below)"),
        },
        Status::Aborted(why) => format!(
            "**aborted** (partial results): {}",
            why.lines().next().unwrap_or("")
        ),
    }
}

/// The facts about the run, one per line, as Markdown list items without the dash.
fn facts(report: &Report) -> Vec<String> {
    let s = &report.settings;
    let mut facts = vec![
        format!(
            "Started {}, {}{}.",
            report.started_at,
            report
                .finished_at
                .as_ref()
                .map(|f| format!("ended {f}, "))
                .unwrap_or_default(),
            status_line(report)
        ),
        format!(
            "Machine: {} ({} logical CPUs), {} memory, {}.",
            report.machine.cpu,
            report.machine.logical_cpus,
            report.machine.memory,
            report.machine.kernel
        ),
        format!(
            "Load generators: {}.",
            [
                report.sysbench_version.as_deref(),
                report.mysqlslap_version.as_deref()
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ")
        ),
        format!("Sluice {}.", report.sluice_version),
    ];
    facts.extend(report.topology.iter().cloned());
    if s.scenarios.contains(&Scenario::CachedByTable) {
        facts.push(
            "cached-by-table: the cached scenario's rule in a Sluice with `by_key = false` in \
             `[cache]`, where any write to a table drops all of its entries, as before \
             row-level invalidation; cached keeps this Sluice's default (by key)."
                .to_string(),
        );
    }
    if s.scenarios.contains(&Scenario::Dedicated) {
        facts.push(
            "dedicated: passthrough in a Sluice with `multiplex = false` in `[pool]`, where \
             each client keeps a backend connection of its own for its whole session; \
             passthrough keeps this Sluice's default (multiplexing), and its CPU per query \
             over dedicated's is the cost table's multiplexed CPU ÷ dedicated."
                .to_string(),
        );
    }
    if s.scenarios.iter().any(|sc| sc.traces()) {
        facts.push(format!(
            "traced, traced-all: passthrough in a Sluice with `[tracing]` at `sample_ratio` \
             {} and 1.0, exporting over OTLP/HTTP (statements carry no caller's \
             traceparent, so the ratio decides); each one's CPU per query over \
             passthrough's (tracing off) is the cost table's CPU ÷ passthrough.",
            crate::topology::TRACED_RATIO
        ));
    }
    if s.scenarios.contains(&Scenario::Haproxy) {
        facts.push(
            "haproxy: HAProxy relaying TCP to the same database (no look into the protocol: \
             no pooling, routing or cache), the baseline each Sluice's CPU per query is set \
             against; its CPU time is read from /proc like Sluice's."
                .to_string(),
        );
    }
    if s.sysbench_workloads().next().is_some() {
        facts.push(format!(
            "sysbench: {} tables x {} rows; threads {}; {} s per step; {} repetition(s) per \
             step, scenarios alternating ({}); medians reported.",
            s.data.tables,
            thousands(s.data.table_size),
            join(&s.threads),
            s.duration_secs,
            s.repeat,
            join(&s.scenarios),
        ));
    }
    if let Some(insert) = s
        .insert
        .as_ref()
        .filter(|_| s.workloads.contains(&Workload::Insert))
    {
        facts.push(format!(
            "insert: mysqlslap, {} clients, {} rows per run, {} inserts per transaction; \
             scenarios alternating ({}).",
            insert.clients,
            thousands(insert.rows),
            join(&insert.per_trx),
            join(&s.insert_scenarios()),
        ));
    }
    for u in &s.unavailable {
        facts.push(format!("{}: not available: {}", u.scenario, u.reason));
    }
    facts.extend(report.notes.iter().map(|n| format!("Note: {n}")));
    facts
}

const LEGEND: &str = "queries/s and total reads: as sysbench counts them over the run. \
    Latency: per event as sysbench reports it (an event is 1 query in oltp_point_select, \
    14 in oltp_read_only, 14 reads and a 4-write transaction in oltp_read_write_split), in \
    ms with sysbench's two decimals. ÷ direct: the scenario's value over direct's at the \
    same step; ÷ passthrough: a caching or traced scenario's queries/s (or a traced \
    one's Sluice CPU) over passthrough's at the same step. spans/query: spans the traced \
    Sluice exported (its sluice_trace_spans_exported_total) over the queries of the step's \
    runs, dropped spans in parentheses. Sluice CPU µs/query: the Sluice process's user+system CPU time during the \
    run divided by the queries of the run. errors: sysbench's ignored errors. n/a: the \
    scenario cannot run here; FAILED / skipped: no measurement, reason under the table.";

/// Said under the commands: how they ran.
const COMMANDS_NOTE: &str = "Every command ran under `ulimit -n 65535` (or the hard limit, if \
    lower), sysbench in the results directory (which holds the Lua script Sluice ships). At \
    each step the scenarios ran one after the other, alternating when repeated; the output \
    of every run is in `raw/`.";

/// The report in the format every scenario shares.
pub fn document(report: &Report) -> Document {
    Document {
        title: format!(
            "Sluice benchmark: cache ({})",
            join(&report.settings.scenarios)
        ),
        facts: facts(report),
        detail: match &report.status {
            Status::Aborted(why) => Some(why.clone()),
            _ => None,
        },
        legend: Some(LEGEND.to_string()),
        sections: sections(report),
        commands: command_groups(report),
        commands_note: Some(COMMANDS_NOTE.to_string()),
        csv: report.csv(),
        json: serde_json::to_string_pretty(report).expect("the report serializes") + "\n",
    }
}

fn command_groups(report: &Report) -> Vec<(String, Vec<String>)> {
    let mut groups = Vec::new();
    let c = &report.commands;
    if !c.sluice.is_empty() {
        let name = match report.settings.scenarios.contains(&Scenario::Haproxy) {
            true => "Sluice and HAProxy",
            false => "Sluice",
        };
        groups.push((name.to_string(), c.sluice.clone()));
    }
    let data: Vec<String> = c.prepare.iter().chain(&c.cleanup).cloned().collect();
    if !data.is_empty() {
        groups.push(("Data (prepare, cleanup)".to_string(), data));
    }
    let s = &report.settings;
    for w in s.sysbench_workloads() {
        for &p in &s.ps_modes {
            let lines = distinct(
                report
                    .runs
                    .iter()
                    .filter(|r| r.workload == w && r.ps_mode == p)
                    .map(|r| r.command.as_str()),
            );
            if !lines.is_empty() {
                groups.push((format!("{w}, --db-ps-mode={p}"), lines));
            }
        }
    }
    let inserts = distinct(report.inserts.iter().map(|r| r.command.as_str()));
    if !inserts.is_empty() {
        groups.push(("insert (mysqlslap)".to_string(), inserts));
    }
    groups
}

fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        if !item.is_empty() && !seen.iter().any(|s| s == item) {
            seen.push(item.to_string());
        }
    }
    seen
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
