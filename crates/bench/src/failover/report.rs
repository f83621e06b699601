//! The failover scenario's results as a [`Document`]: one row per run (the failover,
//! the write pause, the errors clients got, Sluice's replays, acknowledged writes lost
//! or doubled), the runs summed up against the target, and the errors' texts.

use std::fmt::Write as _;
use std::path::Path;

use super::fleet::FleetSummary;
use super::{Results, Run, Summary};
use crate::document::{Document, Section, Table};
use crate::report::{status_fact, thousands};

/// Fills in the summary, writes the report's files into `out`, and returns it.
pub(super) fn write(out: &Path, results: &mut Results) -> anyhow::Result<Document> {
    results.summary = summarize(&results.runs, results.instances);
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

pub(super) fn document(r: &Results) -> Document {
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
                .to_string()
                + if r.instances > 1 { FLEET_LEGEND } else { "" },
        ),
        sections: vec![Section {
            title: "Primary killed under load".into(),
            tables: vec![summary_table(r), runs.clone()],
            notes: notes(&r.runs),
            charts: Vec::new(),
        }],
        commands: commands(r),
        commands_note: Some(if r.instances > 1 {
            "Each run's sysbench output, Sluice configuration and Sluice log are in `raw/`, \
             one per instance (`sluice-runR-I.log` for run R, instance I)."
                .into()
        } else {
            "Each run's sysbench output, Sluice configuration and Sluice log are in `raw/`.".into()
        }),
        csv: runs.csv(),
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

/// What the fleet's columns mean, after the single-instance legend.
const FLEET_LEGEND: &str = " Promotions: the sum over the instances of the promotions each \
    performed (`stats.failovers` of its `/v1/servers`, read until unchanged for 2 s), with \
    which instance did them. Writable: the servers still running that answer \
    `@@read_only = 0` at the end. Writers: the writer each instance routes writes to at \
    the end (`writer` of its `/v1/servers`), one name when all agree. A run passes only \
    with one promotion, one writable server and one writer for all.";

/// The Sluice instances as the facts word them.
fn sluice_fact(r: &Results) -> String {
    if r.instances == 1 {
        return "Sluice in front".into();
    }
    format!(
        "{} Sluice instances in front, the same configuration but their addresses, the \
         clients spread over them (one sysbench each with its share of the threads, the \
         probes in turn){}, each with",
        r.instances,
        if r.kill_instance {
            "; the first instance SIGKILLed with the primary, its clients' errors reported \
             apart"
        } else {
            ""
        }
    )
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
             binlog_format={}) on this machine, {} (multiplexing, read/write split, the monitor at its \
             defaults, failover on{}); sysbench oltp_read_write with {} threads (prepared \
             statements, --mysql-ignore-errors=all) on {} tables x {} rows, {} probe writers \
             and one probe transaction client, all through Sluice; the primary SIGKILLed after \
             {} s of load, the load kept on {} s after the failover.",
            r.binlog_format.name(),
            sluice_fact(r),
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
        format!("{} {} of {} runs done.", target(r), r.runs.len(), r.runs_planned),
        format!("**{}**", summary_line(&r.summary)),
    ]
}

fn target(r: &Results) -> &'static str {
    if r.instances > 1 {
        "Target: 1 promotion and 0 lost in every run, no client error in at least 9 of 10 \
         (transactions whose results differ on replay excepted, counted)."
    } else {
        "Target: 0 errors reach clients in at least 9 of 10 runs (transactions whose \
         results differ on replay excepted, counted), 0 acknowledged writes lost, 0 \
         writes applied twice; write pause at most 2.5 s with the default monitor."
    }
}

/// "8 of 10 runs with no client error (...); worst write pause ...", and with several
/// instances "...; 10 of 10 runs with one promotion ...".
fn summary_line(s: &Summary) -> String {
    let mut line = single_summary_line(s);
    if let Some(f) = &s.fleet {
        line.push_str(&format!(
            " {} of {} measured runs with exactly one promotion ({} in all), {} with one \
             writable server at the end, {} with every instance routing writes to the same \
             writer.",
            f.one_promotion, s.measured, f.promotions, f.one_writable, f.same_writer
        ));
    }
    line
}

fn single_summary_line(s: &Summary) -> String {
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
        let what = match r.instances {
            1 => "Sluice (the last run's)",
            _ => "Sluice (the last run's first instance; the others read their own file)",
        };
        commands.push((what.to_string(), vec![c.clone()]));
    }
    if let Some(c) = &r.prepare_command {
        commands.push((
            "Data (prepare, the last run's)".to_string(),
            vec![c.clone()],
        ));
    }
    crate::report::run_commands(
        commands,
        r.runs.iter().flat_map(|run| match &run.fleet {
            Some(f) => f.sysbench_commands.iter().map(String::as_str).collect(),
            None => run
                .sysbench_command
                .as_deref()
                .into_iter()
                .collect::<Vec<_>>(),
        }),
        &r.command,
    )
}

fn summary_table(r: &Results) -> Table {
    let s = &r.summary;
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
    if let Some(f) = &s.fleet {
        fleet_summary_columns(&mut t, f, s.measured, r.kill_instance);
    }
    t
}

/// The fleet's columns of the summary: runs with one promotion, one writable server,
/// one writer; promotions in all; the killed instance's clients' errors.
fn fleet_summary_columns(t: &mut Table, f: &FleetSummary, measured: usize, killed: bool) {
    let of = |n: usize| format!("{n} of {measured}");
    let mut columns = vec![
        ("one promotion", of(f.one_promotion)),
        ("one writable server", of(f.one_writable)),
        ("one writer for all", of(f.same_writer)),
        ("promotions", f.promotions.to_string()),
    ];
    if killed {
        columns.push((
            "killed instance's client errors",
            thousands(f.killed_instance_errors),
        ));
    }
    add_columns(t, columns.into_iter().map(|(h, c)| (h, vec![c])));
}

/// `columns` (a header and a cell per row) inserted before the table's last column, or
/// after the last when it has no "result" column.
fn add_columns<'a>(t: &mut Table, columns: impl Iterator<Item = (&'a str, Vec<String>)>) {
    let at = match t.header.last().map(String::as_str) {
        Some("result") => t.header.len() - 1,
        _ => t.header.len(),
    };
    for (n, (header, cells)) in columns.enumerate() {
        t.header.insert(at + n, header.to_string());
        for (row, cell) in t.rows.iter_mut().zip(cells) {
            row.insert(at + n, cell);
        }
    }
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
    if r.instances > 1 {
        fleet_run_columns(&mut t, &r.runs, r.kill_instance);
    }
    t
}

/// The fleet's columns of each run, before its result.
fn fleet_run_columns(t: &mut Table, runs: &[Run], killed: bool) {
    let cells = |f: &dyn Fn(&super::fleet::FleetRun) -> String| -> Vec<String> {
        runs.iter()
            .map(|run| match &run.fleet {
                Some(fleet) if fleet.promotions.is_some() => f(fleet),
                _ => "-".into(),
            })
            .collect()
    };
    let mut columns = vec![
        ("promotions", cells(&|f| f.promotions_cell())),
        ("writable servers", cells(&|f| f.writable.len().to_string())),
        ("writer per instance", cells(&|f| f.writers_cell())),
    ];
    if killed {
        columns.push((
            "killed instance's client errors",
            cells(&|f| opt(f.killed_instance_errors)),
        ));
    }
    add_columns(t, columns.into_iter());
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
        if let Some(f) = &run.fleet {
            if f.promotions.is_some() && !f.settled {
                notes.push(format!(
                    "Run {}: the promotions and writers were still changing 20 s after the \
                     run; the last ones read are shown.",
                    run.run
                ));
            }
            if f.writable.len() > 1 {
                notes.push(format!(
                    "Run {}: writable servers at the end: {}",
                    run.run,
                    f.writable.join(", ")
                ));
            }
            for e in &f.killed_instance_texts {
                notes.push(format!(
                    "Run {}, the killed instance's clients ({}x, excepted): {}",
                    run.run, e.count, e.text
                ));
            }
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

/// A progress line's account of one run.
pub(super) fn progress_line(run: &Run) -> String {
    let mut s = String::new();
    if let Some(writer) = &run.new_writer {
        let _ = write!(
            s,
            "failover to {writer} in {} ms; ",
            run.failover_took_ms.map_or("?".into(), |ms| ms.to_string())
        );
    }
    if let Some(pause) = run.write_pause_ms {
        let _ = write!(s, "write pause {pause} ms; ");
    }
    if let Some(f) = run.fleet.as_ref().filter(|f| f.promotions.is_some()) {
        let _ = write!(
            s,
            "promotions {}; writable servers {}; writers {}; ",
            f.promotions_cell(),
            f.writable.len(),
            f.writers_cell()
        );
        if let Some(errors) = f.killed_instance_errors {
            let _ = write!(
                s,
                "{errors} errors of the killed instance's clients (excepted); "
            );
        }
    }
    if let Some(errors) = run.client_errors {
        let _ = write!(
            s,
            "{errors} client errors ({} of them replays refused for a mismatch); ",
            run.replays.mismatches()
        );
    }
    if let (Some(lost), Some(twice)) = (run.acked_lost, run.applied_twice) {
        let _ = write!(
            s,
            "{lost} acknowledged writes lost, {twice} applied twice; "
        );
    }
    match (&run.failure, run.passed) {
        (Some(f), _) => {
            let _ = write!(s, "FAILED: {f}");
        }
        (None, Some(true)) => s.push_str("pass"),
        (None, _) => s.push_str("fail"),
    }
    s
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), thousands)
}

pub(super) fn summarize(runs: &[Run], instances: u32) -> Summary {
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
        fleet: (instances > 1).then(|| FleetSummary::of(instances, runs)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tally::Replays;
    use super::super::SysbenchFigures;
    use super::*;

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
        let s = summarize(&runs, 1);
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
                fleet: None,
            }
        );
        assert!(summary_line(&s).starts_with(
            "4 of 6 runs with no client error (mismatch-refused replays, 2 of them, and sysbench's own conflicts excepted); \
             worst write pause 2100 ms; 1 acknowledged writes lost"
        ));

        let results = Results {
            after_ms: 2500,
            runs_planned: 10,
            summary: s,
            runs,
            ..crate::failover::tests::empty_results(1, false)
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
