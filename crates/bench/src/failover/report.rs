//! The failover scenario's results as a [`Document`]: one row per run (the failover,
//! the write pause, the errors clients got, Sluice's replays, acknowledged writes lost
//! or doubled), the runs summed up against the target, and the errors' texts.

use std::path::Path;

use super::{Results, Run, Summary};
use crate::document::{Document, Section, Table};
use crate::report::{status_fact, thousands};

/// Fills in the summary, writes the report's files into `out`, and returns it.
pub(super) fn write(out: &Path, results: &mut Results) -> anyhow::Result<Document> {
    results.summary = summarize(&results.runs);
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

fn document(r: &Results) -> Document {
    let runs = runs_table(r);
    Document {
        title: "Sluice benchmark: failover".into(),
        facts: facts(r),
        detail: r.error.clone(),
        legend: Some(
            "Failover: Sluice's own figure (`last_failover.took_ms`), from finding the \
             primary down to the replica promoted. Writer back: from the kill to Sluice's \
             admin API naming the new writer (asked every 50 ms), the monitor's time to find \
             the primary down included. Write pause: the longest time without an \
             acknowledged probe write (autocommit inserts and committed transactions \
             together) across the failover. Client errors: sysbench's ignored errors and \
             reconnects plus every error reply, lost connection and failed login of the \
             probes; the target excepts those of transactions whose results differed on \
             replay (replays refused for \"mismatch\"), and sysbench's conflicts: the \
             server's own deadlock, duplicate-key and lock-wait errors between sysbench's \
             threads, told by MariaDB's wording, which runs straight at MariaDB get too. \
             sysbench's errors before the kill (from its reports each second) are a baseline \
             of those. Lost: acknowledged probe writes \
             missing on the promoted server; twice: probe writes found there more than once \
             (the probe tables have no unique key)."
                .into(),
        ),
        sections: vec![Section {
            title: "Primary killed under load".into(),
            tables: vec![summary_table(&r.summary), runs.clone()],
            notes: notes(&r.runs),
            charts: Vec::new(),
        }],
        commands: commands(r),
        commands_note: Some(
            "Each run's sysbench output, Sluice configuration and Sluice log are in `raw/`.".into(),
        ),
        csv: runs.csv(),
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

/// What the run was and where, one line each.
fn facts(r: &Results) -> Vec<String> {
    vec![
        status_fact(&r.started_at, r.finished_at.as_deref(), r.error.as_deref()),
        r.machine.fact(),
        format!(
            "Load generator: {}. Sluice {}. MariaDB {}.",
            r.sysbench_version,
            r.sluice_version,
            r.mariadb_version.as_deref().unwrap_or("(version unknown)")
        ),
        format!(
            "Each run: a fresh primary and 2 replicas (semi-synchronous replication, \
             binlog_format={}) on this machine, Sluice in front (multiplexing, read/write split, the monitor at its \
             defaults, failover on{}); sysbench oltp_read_write with {} threads (prepared \
             statements, --mysql-ignore-errors=all) on {} tables x {} rows, {} probe writers \
             and one probe transaction client, all through Sluice; the primary SIGKILLed after \
             {} s of load, the load kept on {} s after the failover.",
            r.binlog_format.name(),
            if r.wrap_autocommit_writes {
                ", autocommit writes wrapped in a transaction"
            } else {
                ""
            },
            r.threads,
            r.data.tables,
            thousands(r.data.table_size),
            r.probe_writers,
            seconds(r.kill_after_ms),
            seconds(r.after_ms),
        ),
        format!(
            "Target: 0 errors reach clients in at least 9 of 10 runs (transactions whose \
             results differ on replay excepted, counted), 0 acknowledged writes lost, 0 \
             writes applied twice; write pause at most 2.5 s with the default monitor. \
             {} of {} runs done.",
            r.runs.len(),
            r.runs_planned
        ),
        format!("**{}**", summary_line(&r.summary)),
    ]
}

/// "8 of 10 runs with no client error (...); worst write pause ...".
fn summary_line(s: &Summary) -> String {
    format!(
        "{} of {} runs with no client error (mismatch-refused replays, {} of them, and sysbench's own conflicts excepted); \
         worst write pause {}; {} acknowledged writes lost; {} applied twice.",
        s.without_client_error,
        s.runs,
        s.mismatches,
        s.worst_write_pause_ms
            .map_or_else(|| "not measured".into(), |ms| format!("{ms} ms")),
        s.acked_lost,
        s.applied_twice
    )
}

fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        format!("{:.1}", ms as f64 / 1000.0)
    }
}

/// Every command line, grouped.
fn commands(r: &Results) -> Vec<(String, Vec<String>)> {
    let mut commands = Vec::new();
    if let Some(c) = &r.sluice_command {
        commands.push(("Sluice (the last run's)".to_string(), vec![c.clone()]));
    }
    if let Some(c) = &r.prepare_command {
        commands.push((
            "Data (prepare, the last run's)".to_string(),
            vec![c.clone()],
        ));
    }
    crate::report::run_commands(
        commands,
        r.runs
            .iter()
            .filter_map(|run| run.sysbench_command.as_deref()),
        &r.command,
    )
}

fn summary_table(s: &Summary) -> Table {
    let mut t = Table::new(
        "All runs",
        &[
            "runs",
            "measured",
            "no client error",
            "passed",
            "worst write pause ms",
            "worst failover ms",
            "acked lost",
            "applied twice",
            "mismatch-refused replays",
        ],
    );
    t.rows.push(vec![
        s.runs.to_string(),
        s.measured.to_string(),
        format!("{} of {}", s.without_client_error, s.runs),
        format!("{} of {}", s.passed, s.runs),
        opt(s.worst_write_pause_ms),
        opt(s.worst_failover_took_ms),
        s.acked_lost.to_string(),
        s.applied_twice.to_string(),
        s.mismatches.to_string(),
    ]);
    t
}

fn runs_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Each run",
        &[
            "run",
            "new writer",
            "failover ms",
            "writer back after ms",
            "write pause ms",
            "sysbench trx",
            "sysbench errors (before the kill / conflicts)",
            "sysbench reconnects",
            "probe writes acked",
            "probe trx committed",
            "probe errors (writes / trx)",
            "replays attempted",
            "replays succeeded",
            "replays refused (why)",
            "acked lost",
            "applied twice",
            "result",
        ],
    );
    for run in &r.runs {
        let sysbench = |f: fn(&super::SysbenchFigures) -> u64| {
            run.sysbench
                .as_ref()
                .map_or("-".into(), |s| thousands(f(s)))
        };
        t.rows.push(vec![
            run.run.to_string(),
            run.new_writer.clone().unwrap_or_else(|| "-".into()),
            opt(run.failover_took_ms),
            opt(run.failover_seen_ms),
            opt(run.write_pause_ms),
            sysbench(|s| s.transactions),
            run.sysbench.as_ref().map_or("-".into(), |s| {
                format!(
                    "{} ({} / {})",
                    thousands(s.ignored_errors),
                    s.errors_before_kill,
                    s.conflicts
                )
            }),
            sysbench(|s| s.reconnects),
            thousands(run.probe_writes_acked),
            thousands(run.probe_transactions),
            format!("{} / {}", run.probe_write_errors, run.probe_trx_errors),
            run.replays.attempted.to_string(),
            run.replays.succeeded.to_string(),
            run.replays.refused_cell(),
            opt(run.acked_lost),
            opt(run.applied_twice),
            match (&run.failure, run.passed) {
                (Some(_), _) => "FAILED".into(),
                (None, Some(true)) => "pass".into(),
                (None, _) => "fail".into(),
            },
        ]);
    }
    t
}

/// Why runs failed, and what clients were told, run by run.
fn notes(runs: &[Run]) -> Vec<String> {
    let mut notes = Vec::new();
    for run in runs {
        if let Some(f) = &run.failure {
            notes.push(format!("Run {}: not measured: {f}", run.run));
        }
        for e in &run.probe_errors {
            notes.push(format!(
                "Run {}, probes ({}x): {}",
                run.run, e.count, e.text
            ));
        }
        for e in &run.sysbench_errors {
            notes.push(format!(
                "Run {}, sysbench ({}x): {}",
                run.run, e.count, e.text
            ));
        }
        if !run.lost_ids.is_empty() {
            notes.push(format!(
                "Run {}: acknowledged ids missing on the promoted server: {:?}",
                run.run, run.lost_ids
            ));
        }
        if !run.twice_ids.is_empty() {
            notes.push(format!(
                "Run {}: ids found more than once on the promoted server: {:?}",
                run.run, run.twice_ids
            ));
        }
    }
    notes
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), thousands)
}

fn summarize(runs: &[Run]) -> Summary {
    let measured: Vec<&Run> = runs.iter().filter(|r| r.passed.is_some()).collect();
    Summary {
        runs: runs.len(),
        measured: measured.len(),
        without_client_error: measured
            .iter()
            .filter(|r| r.unexcepted_errors() == Some(0))
            .count(),
        passed: measured.iter().filter(|r| r.passed == Some(true)).count(),
        worst_write_pause_ms: runs.iter().filter_map(|r| r.write_pause_ms).max(),
        worst_failover_took_ms: runs.iter().filter_map(|r| r.failover_took_ms).max(),
        acked_lost: runs.iter().filter_map(|r| r.acked_lost).sum(),
        applied_twice: runs.iter().filter_map(|r| r.applied_twice).sum(),
        mismatches: runs.iter().map(|r| r.replays.mismatches()).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tally::Replays;
    use super::super::SysbenchFigures;
    use super::*;
    use crate::report::Machine;
    use crate::sysbench::DataSet;

    fn run(n: u32, errors: u64, mismatches: u64, lost: u64, conflicts: u64) -> Run {
        let mut run = Run {
            run: n,
            new_writer: Some("replica1".into()),
            failover_took_ms: Some(900 + u64::from(n)),
            write_pause_ms: Some(1500 + 100 * u64::from(n)),
            sysbench: Some(SysbenchFigures {
                transactions: 12_345,
                tps: 1234.5,
                ignored_errors: errors,
                errors_before_kill: 0,
                conflicts,
                reconnects: 0,
            }),
            probe_writes_acked: 2000,
            probe_transactions: 500,
            replays: Replays {
                attempted: 4,
                succeeded: 4 - mismatches,
                refused: mismatches,
                refused_by: (mismatches > 0)
                    .then(|| ("mismatch".to_string(), mismatches))
                    .into_iter()
                    .collect(),
            },
            client_errors: Some(errors),
            acked_lost: Some(lost),
            applied_twice: Some(0),
            ..Run::default()
        };
        run.judge();
        run
    }

    #[test]
    fn runs_are_judged_and_summed_up() {
        let runs = vec![
            run(1, 0, 0, 0, 0),
            // Its only error is a mismatch-refused replay's: excepted.
            run(2, 1, 1, 0, 0),
            run(3, 2, 1, 0, 0),
            run(4, 0, 0, 1, 0),
            Run {
                run: 5,
                failure: Some("no failover".into()),
                ..Run::default()
            },
            // Its errors are sysbench's own deadlocks: excepted.
            run(6, 3, 0, 0, 3),
        ];
        let passed: Vec<Option<bool>> = runs.iter().map(|r| r.passed).collect();
        assert_eq!(
            passed,
            [
                Some(true),
                Some(true),
                Some(false),
                Some(false),
                None,
                Some(true)
            ]
        );
        let s = summarize(&runs);
        assert_eq!(
            s,
            Summary {
                runs: 6,
                measured: 5,
                without_client_error: 4,
                passed: 3,
                worst_write_pause_ms: Some(2100),
                worst_failover_took_ms: Some(906),
                acked_lost: 1,
                applied_twice: 0,
                mismatches: 2,
            }
        );
        assert!(summary_line(&s).starts_with(
            "4 of 6 runs with no client error (mismatch-refused replays, 2 of them, and sysbench's own conflicts excepted); \
             worst write pause 2100 ms; 1 acknowledged writes lost"
        ));

        let results = Results {
            command: "sluice bench failover".into(),
            started_at: String::new(),
            finished_at: None,
            error: None,
            sluice_version: String::new(),
            sysbench_version: String::new(),
            mariadb_version: None,
            machine: Machine::detect(),
            threads: 8,
            data: DataSet {
                tables: 4,
                table_size: 10_000,
            },
            kill_after_ms: 5000,
            after_ms: 2500,
            probe_writers: 2,
            binlog_format: crate::failover::BinlogFormat::Mixed,
            wrap_autocommit_writes: false,
            runs_planned: 10,
            sluice_command: None,
            prepare_command: None,
            summary: s,
            runs,
        };
        let md = document(&results).markdown();
        assert!(
            md.contains(
                "| 3 | replica1 | 903 | - | 1,800 | 12,345 | 2 (0 / 0) | 0 | 2,000 | 500 | 0 / 0 | 4 | \
                 3 | 1 (mismatch 1) | 0 | 0 | fail |"
            ),
            "{md}"
        );
        assert!(md.contains("| 5 | - | - | - | - |"), "{md}");
        assert!(
            md.contains("| 6 | 5 | 4 of 6 | 3 of 6 | 2,100 | 906 | 1 | 0 | 2 |"),
            "{md}"
        );
        assert!(md.contains("Run 5: not measured: no failover"), "{md}");
        assert!(
            md.contains("SIGKILLed after 5 s of load, the load kept on 2.5 s"),
            "{md}"
        );
    }
}
