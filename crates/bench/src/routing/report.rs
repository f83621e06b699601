//! The routing scenario's results as a [`Document`]: direct against Sluice at each thread
//! count (medians), where the reads through Sluice went against the share the weights
//! promise, every run, and a chart of throughput against threads.

use std::path::Path;

use super::{BalanceRow, Results, Run, ServerInfo, ServerLoad, SummaryRow, DIRECT, SLUICE};
use crate::chart::{Chart, Series};
use crate::document::{Document, NamedChart, Section, Table};
use crate::mux::cell;
use crate::report::{median, status_fact, thousands};

/// Fills in the summary and the balance, writes the report's files into `out`, and
/// returns it.
pub(super) fn write(out: &Path, results: &mut Results) -> anyhow::Result<Document> {
    results.summary = summarize(&results.runs);
    results.balance = balance(&results.servers, &results.runs);
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

fn document(r: &Results) -> Document {
    let runs = runs_table(r);
    Document {
        title: "Sluice benchmark: routing (read scale-out)".into(),
        facts: facts(r),
        detail: r.error.clone(),
        legend: Some(
            "qps and p95: as sysbench reports them, medians over the repetitions. Expected \
             share: the server's weight over the sum of the readers' weights. Observed: \
             Sluice's read counter (`/v1/servers`), which also counts the statement \
             preparations it routes (sysbench prepares its statements once per connection); \
             cross-check: each server's `Com_select`, which counts executions only, the \
             monitor's checks included."
                .into(),
        ),
        sections: vec![
            Section {
                title: "Read scale-out".into(),
                tables: vec![summary_table(r)],
                notes: r
                    .runs
                    .iter()
                    .filter_map(|run| {
                        let f = run.failure.as_ref()?;
                        Some(format!(
                            "{} threads, run {}, {}: {f}",
                            run.threads, run.repetition, run.scenario
                        ))
                    })
                    .collect(),
                charts: vec![qps_chart(r)],
            },
            Section {
                title: "Balancing: where the reads through Sluice went".into(),
                tables: vec![balance_table(r)],
                notes: Vec::new(),
                charts: Vec::new(),
            },
            Section {
                title: "Every run".into(),
                tables: vec![runs.clone()],
                notes: Vec::new(),
                charts: Vec::new(),
            },
        ],
        commands: commands(r),
        commands_note: Some(
            "sysbench's output of every run is in `raw/`, Sluice's configuration in \
             `sluice.toml`."
                .into(),
        ),
        csv: runs.csv(),
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

/// What the run was and where, one line each.
fn facts(r: &Results) -> Vec<String> {
    let readers = r.servers.len().saturating_sub(1);
    let mut facts = vec![
        status_fact(&r.started_at, r.finished_at.as_deref(), r.error.as_deref()),
        r.machine.fact(),
        format!(
            "Load generator: {}. Sluice {}. MariaDB {}.",
            r.sysbench_version,
            r.sluice_version,
            r.mariadb_version.as_deref().unwrap_or("(version unknown)")
        ),
        format!(
            "oltp_read_only --skip_trx=on, prepared statements, {} s per run; {} tables x {} \
             rows.",
            r.duration_secs,
            r.data.tables,
            thousands(r.data.table_size)
        ),
        format!(
            "Direct: sysbench straight at the primary. Sluice: in front of the primary and \
             {readers} replicas, all on this machine, multiplexing onto up to {} connections \
             per server.{}",
            r.backend_connections,
            if r.repeat > 1 {
                format!(" Medians of {} runs each.", r.repeat)
            } else {
                String::new()
            }
        ),
    ];
    facts.extend(r.servers.iter().map(|s| {
        format!(
            "{}: {}, {}, weight {}.",
            s.name, s.address, s.role, s.weight
        )
    }));
    facts
}

/// Every command line, grouped.
fn commands(r: &Results) -> Vec<(String, Vec<String>)> {
    let mut commands = Vec::new();
    if let Some(c) = &r.sluice_command {
        commands.push(("Sluice".to_string(), vec![c.clone()]));
    }
    if let Some(c) = &r.prepare_command {
        commands.push(("Data (prepare)".to_string(), vec![c.clone()]));
    }
    crate::report::run_commands(
        commands,
        r.runs.iter().map(|run| run.command.as_str()),
        &r.command,
    )
}

fn summary_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Direct against Sluice",
        &[
            "threads",
            "direct qps",
            "Sluice qps",
            "Sluice / direct",
            "direct p95 ms",
            "Sluice p95 ms",
            "errors (direct / Sluice)",
        ],
    );
    for row in &r.summary {
        t.rows.push(vec![
            row.threads.to_string(),
            qps_cell(row.direct_qps),
            qps_cell(row.sluice_qps),
            row.ratio
                .map_or_else(|| "n/a".into(), |x| format!("{x:.2}")),
            cell(row.direct_p95_ms, 2),
            cell(row.sluice_p95_ms, 2),
            format!("{} / {}", row.direct_errors, row.sluice_errors),
        ]);
    }
    t
}

fn balance_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Reads per server",
        &[
            "threads",
            "server",
            "role",
            "weight",
            "expected share",
            "observed share (reads)",
            "Com_select share",
        ],
    );
    for row in &r.balance {
        t.rows.push(vec![
            row.threads.to_string(),
            row.name.clone(),
            row.role.clone(),
            row.weight.to_string(),
            percent(Some(row.expected_share)),
            format!("{} ({})", percent(row.observed_share), thousands(row.reads)),
            format!(
                "{} ({})",
                percent(row.com_select_share),
                thousands(row.com_select)
            ),
        ]);
    }
    t
}

fn runs_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Each sysbench run, in order",
        &[
            "threads",
            "run",
            "scenario",
            "qps",
            "p95 ms",
            "errors",
            "reads per server (Sluice)",
            "Com_select per server",
        ],
    );
    for run in &r.runs {
        let per = |f: fn(&ServerLoad) -> Option<u64>| {
            run.servers
                .iter()
                .map(|l| format!("{} {}", l.name, f(l).map_or("-".into(), thousands)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        t.rows.push(vec![
            run.threads.to_string(),
            run.repetition.to_string(),
            run.scenario.to_string(),
            qps_cell(run.qps),
            cell(run.p95_ms, 2),
            run.errors.map_or("-".into(), |e| e.to_string()),
            if run.scenario == SLUICE {
                per(|l| l.reads)
            } else {
                "-".into()
            },
            per(|l| l.com_select),
        ]);
    }
    t
}

fn qps_chart(r: &Results) -> NamedChart {
    let series = |name: &str, value: fn(&SummaryRow) -> Option<f64>| Series {
        name: name.into(),
        points: r
            .summary
            .iter()
            .filter_map(|row| Some((f64::from(row.threads), value(row)?)))
            .collect(),
    };
    NamedChart {
        file_stem: "routing-qps".into(),
        chart: Chart {
            title: "Read scale-out: throughput".into(),
            x_label: "threads".into(),
            y_label: "queries/s".into(),
            series: vec![
                series(DIRECT, |row| row.direct_qps),
                series(SLUICE, |row| row.sluice_qps),
            ],
        },
    }
}

fn thread_counts(runs: &[Run]) -> Vec<u32> {
    let all: Vec<u32> = runs.iter().map(|r| r.threads).collect();
    crate::dedup(&all)
}

fn summarize(runs: &[Run]) -> Vec<SummaryRow> {
    thread_counts(runs)
        .into_iter()
        .map(|threads| {
            let of = |scenario: &'static str| {
                runs.iter()
                    .filter(move |r| r.threads == threads && r.scenario == scenario)
            };
            let med = |scenario: &'static str, f: fn(&Run) -> Option<f64>| {
                median(of(scenario).filter_map(f).collect())
            };
            let errors = |scenario: &'static str| of(scenario).filter_map(|r| r.errors).sum();
            let direct_qps = med(DIRECT, |r| r.qps);
            let sluice_qps = med(SLUICE, |r| r.qps);
            SummaryRow {
                threads,
                direct_qps,
                sluice_qps,
                ratio: match (sluice_qps, direct_qps) {
                    (Some(s), Some(d)) if d > 0.0 => Some(s / d),
                    _ => None,
                },
                direct_p95_ms: med(DIRECT, |r| r.p95_ms),
                sluice_p95_ms: med(SLUICE, |r| r.p95_ms),
                direct_errors: errors(DIRECT),
                sluice_errors: errors(SLUICE),
            }
        })
        .collect()
}

fn balance(servers: &[ServerInfo], runs: &[Run]) -> Vec<BalanceRow> {
    let reader_weights: u32 = servers
        .iter()
        .filter(|s| s.role == "reader")
        .map(|s| s.weight)
        .sum();
    let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
    let mut rows = Vec::new();
    for threads in thread_counts(runs) {
        let through: Vec<&Run> = runs
            .iter()
            .filter(|r| r.threads == threads && r.scenario == SLUICE && r.failure.is_none())
            .collect();
        let sum = |i: usize, f: fn(&ServerLoad) -> Option<u64>| -> u64 {
            through
                .iter()
                .filter_map(|r| r.servers.get(i).and_then(f))
                .sum()
        };
        let reads: Vec<u64> = (0..servers.len()).map(|i| sum(i, |l| l.reads)).collect();
        let selects: Vec<u64> = (0..servers.len())
            .map(|i| sum(i, |l| l.com_select))
            .collect();
        let (all_reads, all_selects) = (reads.iter().sum(), selects.iter().sum());
        for (i, s) in servers.iter().enumerate() {
            rows.push(BalanceRow {
                threads,
                name: s.name.clone(),
                role: s.role.clone(),
                weight: s.weight,
                expected_share: match s.role.as_str() {
                    "reader" if reader_weights > 0 => {
                        f64::from(s.weight) / f64::from(reader_weights)
                    }
                    _ => 0.0,
                },
                reads: reads[i],
                observed_share: share(reads[i], all_reads),
                com_select: selects[i],
                com_select_share: share(selects[i], all_selects),
            });
        }
    }
    rows
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{:.1}%", v * 100.0))
}

fn qps_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "FAILED".into(), |v| thousands(v.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Machine;
    use crate::sysbench::DataSet;

    fn run(scenario: &'static str, threads: u32, qps: f64, reads: [Option<u64>; 3]) -> Run {
        Run {
            scenario,
            threads,
            repetition: 1,
            qps: Some(qps),
            p95_ms: Some(2.0),
            errors: Some(0),
            failure: None,
            command: String::new(),
            output_file: String::new(),
            servers: ["primary", "replica1", "replica2"]
                .iter()
                .zip(reads)
                .map(|(name, reads)| ServerLoad {
                    name: name.to_string(),
                    reads,
                    com_select: reads.map(|r| r + 5),
                })
                .collect(),
            reads_to_readers: None,
            reads_to_writer: None,
        }
    }

    #[test]
    fn summary_balance_and_tables() {
        let servers: Vec<ServerInfo> = [("primary", "writer", 1), ("replica1", "reader", 1)]
            .into_iter()
            .chain([("replica2", "reader", 3)])
            .map(|(name, role, weight)| ServerInfo {
                name: name.into(),
                address: "127.0.0.1:1".into(),
                weight,
                role: role.into(),
            })
            .collect();
        let runs = vec![
            run(DIRECT, 16, 1000.0, [None; 3]),
            run(SLUICE, 16, 1500.0, [Some(0), Some(250), Some(750)]),
            run(DIRECT, 16, 1200.0, [None; 3]),
            run(SLUICE, 16, 1700.0, [Some(0), Some(250), Some(750)]),
        ];
        let summary = summarize(&runs);
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0].direct_qps, Some(1100.0));
        assert_eq!(summary[0].sluice_qps, Some(1600.0));
        assert!((summary[0].ratio.unwrap() - 1600.0 / 1100.0).abs() < 1e-9);
        let rows = balance(&servers, &runs);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].expected_share, 0.0);
        assert_eq!(rows[0].observed_share, Some(0.0));
        assert_eq!(rows[2].expected_share, 0.75);
        assert_eq!(rows[2].observed_share, Some(0.75));
        assert_eq!(rows[2].reads, 1500);
        assert_eq!(rows[2].com_select, 1510);

        let mut results = Results {
            command: "sluice bench routing".into(),
            started_at: String::new(),
            finished_at: None,
            error: None,
            sluice_version: String::new(),
            sysbench_version: String::new(),
            mariadb_version: Some("11.4".into()),
            machine: Machine::detect(),
            duration_secs: 20,
            repeat: 2,
            data: DataSet {
                tables: 8,
                table_size: 10_000,
            },
            backend_connections: 64,
            servers,
            sluice_command: None,
            prepare_command: None,
            runs,
            summary,
            balance: rows,
        };
        let md = document(&results).markdown();
        assert!(
            md.contains("| 16 | 1,100 | 1,600 | 1.45 | 2.00 | 2.00 | 0 / 0 |"),
            "{md}"
        );
        assert!(
            md.contains("| 16 | replica2 | reader | 3 | 75.0% | 75.0% (1,500) |"),
            "{md}"
        );
        assert!(md.contains("Medians of 2 runs"), "{md}");
        results.runs[1].qps = None;
        results.runs[3].qps = None;
        results.summary = summarize(&results.runs);
        assert!(document(&results)
            .markdown()
            .contains("| 16 | 1,100 | FAILED | n/a |"));
    }
}
