//! The multiplexing scenario's results as a [`Document`]: every thread-thrashing run,
//! the median ratio at each thread count, the idle-clients part, and charts of
//! throughput and server memory against threads.

use std::path::Path;

use super::{cell, Results, ThreadRun};
use crate::chart::{Chart, Series};
use crate::document::{Document, NamedChart, Section, Table};
use crate::report::{median, status_fact, thousands};

const SCENARIOS: [&str; 2] = ["direct", "sluice"];

/// Writes the report's files into `out` and returns it.
pub(super) fn write(out: &Path, results: &Results) -> anyhow::Result<Document> {
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

fn document(r: &Results) -> Document {
    let runs = runs_table(&r.runs);
    let i = &r.idle;
    Document {
        title: "Sluice benchmark: mux (multiplexing)".into(),
        facts: vec![
            status_fact(&r.started_at, r.finished_at.as_deref(), None),
            r.machine.fact(),
            format!(
                "Load generator: {}. Sluice {}.",
                r.sysbench_version, r.sluice_version
            ),
            format!(
                "Thread thrashing: oltp_read_only --skip_trx=on, {} s per run, straight at \
                 MariaDB (a server thread per client) and through Sluice multiplexing onto {} \
                 backend connections, alternating.",
                r.duration_secs, r.backend_connections
            ),
            format!(
                "Idle clients: {} logged-in idle clients held on Sluice (pool of {}) while {} \
                 sysbench threads work through it.",
                i.clients, i.backend_limit, i.active_threads
            ),
        ],
        detail: None,
        legend: Some(
            "qps and p95: as sysbench reports them. Server connections: its \
             Threads_connected mid-run, not counting the sampling connection. Memory_used: \
             what the server says its threads use; RSS and its peak so far: the process's \
             resident memory. FAILED: no measurement, reason in the notes."
                .into(),
        ),
        sections: vec![
            Section {
                title: "Thread thrashing".into(),
                tables: vec![runs.clone(), ratio_table(&r.runs)],
                notes: r
                    .runs
                    .iter()
                    .filter_map(|run| {
                        let f = run.failure.as_ref()?;
                        Some(format!("{} threads, {}: {f}", run.threads, run.scenario))
                    })
                    .collect(),
                charts: charts(&r.runs),
            },
            Section {
                title: "Idle clients".into(),
                tables: vec![idle_table(r)],
                notes: i.failure.iter().map(|f| format!("FAILED: {f}")).collect(),
                charts: Vec::new(),
            },
        ],
        commands: vec![("Command".into(), vec![r.command.clone()])],
        commands_note: None,
        csv: runs.csv(),
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

fn runs_table(runs: &[ThreadRun]) -> Table {
    let mut t = Table::new(
        "Every run",
        &[
            "threads",
            "scenario",
            "qps",
            "p95 ms",
            "errors",
            "server connections",
            "server Memory_used MiB",
            "server RSS MiB",
            "server peak so far MiB",
            "Sluice RSS MiB",
        ],
    );
    for run in runs {
        t.rows.push(vec![
            run.threads.to_string(),
            run.scenario.to_string(),
            cell(run.qps, 0),
            cell(run.p95_ms, 1),
            run.errors.map_or("-".into(), |e| e.to_string()),
            run.server_connections.map_or("-".into(), |c| c.to_string()),
            cell(run.server_memory_used_mib, 0),
            cell(run.server_rss_mib, 0),
            cell(run.server_hwm_mib, 0),
            run.sluice_rss_mib.map_or("-".into(), |m| format!("{m:.0}")),
        ]);
    }
    t
}

/// The median of `value` over the runs of one scenario at one thread count.
fn med(
    runs: &[ThreadRun],
    threads: u32,
    scenario: &str,
    value: fn(&ThreadRun) -> Option<f64>,
) -> Option<f64> {
    median(
        runs.iter()
            .filter(|x| x.threads == threads && x.scenario == scenario)
            .filter_map(value)
            .collect(),
    )
}

fn thread_counts(runs: &[ThreadRun]) -> Vec<u32> {
    let all: Vec<u32> = runs.iter().map(|x| x.threads).collect();
    crate::dedup(&all)
}

fn ratio_table(runs: &[ThreadRun]) -> Table {
    let mut t = Table::new(
        "Sluice ÷ direct (median qps)",
        &["threads", "direct qps", "Sluice qps", "Sluice ÷ direct"],
    );
    for threads in thread_counts(runs) {
        let direct = med(runs, threads, "direct", |x| x.qps);
        let sluice = med(runs, threads, "sluice", |x| x.qps);
        let ratio = match (sluice, direct) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "n/a".into(),
        };
        let qps = |v: Option<f64>| v.map_or("FAILED".into(), |v| thousands(v.round() as u64));
        t.rows
            .push(vec![threads.to_string(), qps(direct), qps(sluice), ratio]);
    }
    t
}

fn idle_table(r: &Results) -> Table {
    let i = &r.idle;
    let mut t = Table::new(
        "Idle clients held while sysbench works through the same Sluice",
        &[
            "idle clients logged in",
            "Sluice RSS before → after",
            "per idle client",
            "active threads",
            "qps",
            "p95 ms",
            "errors",
            "server connections (limit)",
            "idle clients answering a ping",
        ],
    );
    t.rows.push(vec![
        format!("{} of {}", i.logged_in, i.clients),
        format!(
            "{:.1} → {:.1} MiB",
            i.sluice_rss_before_mib, i.sluice_rss_after_mib
        ),
        format!("{:.1} KiB", i.bytes_per_idle_client / 1024.0),
        i.active_threads.to_string(),
        cell(i.qps, 0),
        cell(i.p95_ms, 1),
        i.errors.map_or("-".into(), |e| e.to_string()),
        format!(
            "{} ({})",
            i.server_connections.map_or("-".into(), |c| c.to_string()),
            i.backend_limit
        ),
        format!("{} of {}", i.pings_answered, i.pings_sent),
    ]);
    t
}

fn charts(runs: &[ThreadRun]) -> Vec<NamedChart> {
    let threads = thread_counts(runs);
    let chart =
        |stem: &str, title: &str, unit: &str, value: fn(&ThreadRun) -> Option<f64>| NamedChart {
            file_stem: format!("mux-{stem}"),
            chart: Chart {
                title: format!("Thread thrashing: {title}"),
                x_label: "threads".into(),
                y_label: unit.into(),
                series: SCENARIOS
                    .iter()
                    .map(|&scenario| Series {
                        name: scenario.into(),
                        points: threads
                            .iter()
                            .filter_map(|&t| Some((f64::from(t), med(runs, t, scenario, value)?)))
                            .collect(),
                    })
                    .collect(),
            },
        };
    vec![
        chart("qps", "throughput", "queries/s", |x| x.qps),
        chart("server-memory", "server Memory_used", "MiB", |x| {
            x.server_memory_used_mib
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::IdleRun;
    use super::*;
    use crate::report::Machine;

    fn results() -> Results {
        let run = |scenario, qps| ThreadRun {
            scenario,
            threads: 256,
            qps,
            p95_ms: Some(1.5),
            errors: Some(0),
            server_rss_mib: Some(300.0),
            server_hwm_mib: Some(310.0),
            server_memory_used_mib: Some(50.0),
            server_connections: Some(33),
            sluice_rss_mib: None,
            failure: None,
        };
        Results {
            command: "sluice bench mux".into(),
            started_at: "2024-05-01T10:00:00Z".into(),
            finished_at: None,
            sluice_version: "0.1.0".into(),
            sysbench_version: "sysbench 1.0.20".into(),
            machine: Machine {
                cpu: "cpu".into(),
                logical_cpus: 2,
                memory: "4 GiB".into(),
                kernel: "Linux".into(),
            },
            duration_secs: 30,
            backend_connections: 32,
            runs: vec![run("direct", Some(1000.0)), run("sluice", Some(1200.0))],
            idle: IdleRun {
                clients: 10,
                logged_in: 10,
                bytes_per_idle_client: 8192.0,
                failure: Some("sysbench failed".into()),
                ..IdleRun::default()
            },
        }
    }

    #[test]
    fn tables_show_ratios_and_failures() {
        let mut r = results();
        let md = document(&r).markdown();
        assert!(md.contains("| 256 | 1,000 | 1,200 | 1.20 |"), "{md}");
        assert!(md.contains("| 256 | sluice | 1200 |"), "{md}");
        assert!(md.contains("| 10 of 10 |"), "{md}");
        assert!(md.contains("8.0 KiB"), "{md}");
        assert!(md.contains("FAILED: sysbench failed"), "{md}");
        assert!(
            md.contains("![Thread thrashing: throughput](charts/mux-qps.svg)"),
            "{md}"
        );
        r.runs[1].qps = None;
        assert!(document(&r)
            .markdown()
            .contains("| 256 | 1,000 | FAILED | n/a |"));
        assert!(document(&r).csv.starts_with("threads,scenario,qps,"));
    }
}
