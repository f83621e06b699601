//! The upgrade scenario's results as a [`Document`]: one row per hand-over and a total
//! (client errors, lost connections, changed ids, lost session state, the longest stall,
//! p99 before and during, the cache hit rate before and after, the old process's memory
//! and release), the clients by kind over the whole load, and the failures' texts.

use std::path::Path;

use super::probe::Kind;
use super::{clean, of_kind, Handover, Results};
use crate::document::{Document, Section, Table};
use crate::report::{status_fact, thousands};

/// Writes the report's files into `out` and returns it.
pub(super) fn write(out: &Path, results: &mut Results) -> anyhow::Result<Document> {
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

fn document(r: &Results) -> Document {
    let handovers = handovers_table(r);
    Document {
        title: "Sluice benchmark: upgrade".into(),
        facts: facts(r),
        detail: r.error.clone(),
        legend: Some(LEGEND.to_string()),
        sections: vec![
            Section {
                title: "Hand-overs under load".into(),
                tables: vec![handovers.clone()],
                notes: notes(r),
                charts: Vec::new(),
            },
            Section {
                title: "Clients by kind, the whole load".into(),
                tables: vec![kinds_table(r)],
                notes: failure_notes(r),
                charts: Vec::new(),
            },
        ],
        commands: commands(r),
        commands_note: Some(
            "sysbench's output, Sluice's configuration (as the last process read it) and the \
             log every process of the chain wrote are in `raw/`."
                .into(),
        ),
        csv: handovers.csv(),
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

const LEGEND: &str = "Each hand-over: SIGUSR2 to the serving Sluice, which starts a successor \
    that takes the listening sockets over and says ready; the old process then stops \
    accepting, sends the sessions that can move and drains the rest. Ready: from the \
    SIGUSR2 to the old process logging that the successor accepts. Client errors, \
    connections lost, ids changed, state lost: counted from this SIGUSR2 to the next \
    (the last: to the end of the load), so that each event counts once, by kind of \
    client; client errors are every failed operation (error replies, failed logins, lost \
    connections; sysbench: its ignored errors but its conflicts), connections lost those \
    that closed under their client (sysbench: its reconnects); sysbench conflicts: the \
    server's own deadlock, lock-wait and duplicate-key errors between sysbench's threads, \
    told by their text, which a run straight at MariaDB gets too; an id changed when `CONNECTION_ID()` \
    answered differently on the same connection; state lost when a session answered \
    without what its client left there (a user variable, an open transaction's own rows, \
    a prepared statement). Stall: the longest wait of a probe operation in flight between \
    the SIGUSR2 and 2 s after ready (around), and in the window before (before). p99: the probes' waits begun in the window before \
    the SIGUSR2 (as long as the hit rate's) and in the hand-over (the SIGUSR2 to 2 s after \
    ready); sysbench's: its worst one-second p99 in the same windows (before: the seconds \
    that ended before the SIGUSR2). Hit rate: cache hits \
    over lookups of the old process over the window before the SIGUSR2, and of the \
    successor over the window after it was ready. Old RSS: the old process's resident \
    memory just before the SIGUSR2. Released: the old process's exit, in seconds after \
    ready, and whether it came within the drain bound (and 1 s). Moved: sessions the \
    successor took over.";

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
            "One MariaDB and one Sluice on this machine ({}, the query cache on every \
             SELECT, `[handover] drain_timeout = \"{}s\"`); sysbench oltp_read_write \
             with {} threads (prepared statements, --mysql-ignore-errors=all) on {} tables \
             x {} rows, and the probe clients (4 idle connections, one transaction client, \
             one prepared-statement client, one connect-query-disconnect client), all \
             through Sluice over plain TCP; {} hand-overs, each {} s after the last one was \
             ready; windows of {} s.",
            if r.dedicated {
                "multiplexing off (`multiplex = false`): no session can move"
            } else {
                "multiplexing"
            },
            seconds(r.drain_timeout_ms),
            r.threads,
            r.data.tables,
            thousands(r.data.table_size),
            r.handovers_planned,
            seconds(r.spacing_ms),
            seconds(r.window_ms),
        ),
        format!(
            "Targets (stated, not asserted): 0 client errors and 0 connections lost for \
             plain-TCP clients in every hand-over; longest stall under 100 ms; hit rate \
             after within 10% of before. {} of {} hand-overs done.",
            r.runs.len(),
            r.handovers_planned
        ),
        format!("**{}**", summary_line(r)),
    ]
}

fn summary_line(r: &Results) -> String {
    let done: Vec<&Handover> = r.runs.iter().filter(|h| h.failure.is_none()).collect();
    let clean_ones = done.iter().filter(|h| clean(h)).count();
    let released = done.iter().filter(|h| h.released == Some(true)).count();
    let hit_kept = done
        .iter()
        .filter(
            |h| matches!((h.hit_rate_before, h.hit_rate_after), (Some(b), Some(a)) if a >= b * 0.9),
        )
        .count();
    format!(
        "{clean_ones} of {} hand-overs without a client error or a lost connection; \
         longest stall {}; hit rate after within 10% of before in {hit_kept}; old process \
         released within the drain bound in {released}.",
        done.len(),
        r.longest_stall_ms
            .map_or_else(|| "not measured".into(), |ms| format!("{ms:.0} ms")),
    )
}

fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        format!("{:.1}", ms as f64 / 1000.0)
    }
}

const HEADER: [&str; 13] = [
    "hand-over",
    "ready (ms)",
    "client errors",
    "connections lost",
    "ids changed",
    "state lost",
    "sysbench conflicts",
    "longest stall before / around (ms)",
    "probe p99 before / during (ms)",
    "sysbench p99 before / during (ms)",
    "hit rate before / after",
    "old RSS (MiB)",
    "released (s after ready)",
];

fn handovers_table(r: &Results) -> Table {
    let mut header = HEADER.to_vec();
    header.push("moved");
    let mut t = Table::new("Each hand-over", &header);
    if let Some(before) = &r.before_first {
        let mut row = vec!["before the first".to_string(), "-".into()];
        row.extend(seen_cells(before));
        row.extend(std::iter::repeat_n(
            "-".to_string(),
            HEADER.len() + 1 - row.len(),
        ));
        t.rows.push(row);
    }
    for h in &r.runs {
        t.rows.push(handover_row(h));
    }
    if let Some(total) = &r.total {
        let mut row = vec!["total".to_string(), "-".into()];
        row.extend(seen_cells(total));
        row.push(format!("- / {}", ms(r.longest_stall_ms, 0)));
        row.extend(std::iter::repeat_n("-".to_string(), 4));
        let released = r.runs.iter().filter(|h| h.released == Some(true)).count();
        row.push(format!("{released} of {} in bound", r.runs.len()));
        let moved: u64 = r.runs.iter().filter_map(|h| h.moved_in).sum();
        row.push(moved.to_string());
        t.rows.push(row);
    }
    t
}

fn seen_cells(s: &super::Seen) -> [String; 5] {
    [
        s.errors.cell(),
        s.lost.cell(),
        s.ids_changed.cell(),
        s.state_lost.cell(),
        s.sysbench_conflicts.to_string(),
    ]
}

fn handover_row(h: &Handover) -> Vec<String> {
    let mut row = vec![h.number.to_string()];
    if let Some(f) = &h.failure {
        row.push(format!("FAILED: {}", f.lines().next().unwrap_or("")));
        row.extend(std::iter::repeat_n("-".to_string(), HEADER.len() - 1));
        return row;
    }
    row.push(h.ready_ms.map_or("-".into(), |v| v.to_string()));
    row.extend(seen_cells(&h.seen));
    if h.sysbench_ended {
        row[2].push_str("; **sysbench ended**");
    }
    row.push(pair(
        ms(h.longest_stall_before_ms, 0),
        match (h.longest_stall_ms, h.longest_stall_kind) {
            (Some(v), Some(k)) => format!("{v:.0} ({})", k.name()),
            _ => "-".into(),
        },
    ));
    row.push(pair(
        ms(h.probe_p99_before_ms, 1),
        ms(h.probe_p99_during_ms, 1),
    ));
    row.push(pair(
        ms(h.sysbench_p99_before_ms, 1),
        ms(h.sysbench_p99_during_ms, 1),
    ));
    row.push(pair(percent(h.hit_rate_before), percent(h.hit_rate_after)));
    row.push(ms(h.old_rss_mib, 1));
    row.push(match (h.old_exit_ms, h.released) {
        (Some(e), Some(true)) => format!("{:.1}, in bound", e as f64 / 1000.0),
        (Some(e), _) => format!("{:.1}, **past the bound**", e as f64 / 1000.0),
        (None, Some(_)) => "**still running**".into(),
        (None, None) => "-".into(),
    });
    row.push(h.moved_in.map_or("-".into(), |v| v.to_string()));
    row
}

fn pair(a: String, b: String) -> String {
    format!("{a} / {b}")
}

fn ms(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn kinds_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Clients by kind",
        &[
            "client",
            "operations",
            "client errors",
            "connections lost",
            "ids changed",
            "state lost",
            "conflicts (not errors)",
        ],
    );
    let Some(total) = &r.total else {
        return t;
    };
    for kind in Kind::ALL {
        let mut row = vec![match (kind, r.sysbench_ended_after_s) {
            (Kind::Sysbench, Some(s)) => format!("sysbench (ended by itself after {s} s)"),
            _ => kind.name().to_string(),
        }];
        row.extend(of_kind(total, kind).map(thousands));
        row.push(match kind {
            Kind::Sysbench => thousands(total.sysbench_conflicts),
            _ => "-".into(),
        });
        t.rows.push(row);
    }
    t
}

fn notes(r: &Results) -> Vec<String> {
    let mut notes = vec![
        format!(
            "drain_timeout was {} s: sessions that cannot move (TLS, dedicated, pinned past \
             the bound) go on in the old process that long, then are ended between \
             statements; an idle one's client sees its connection lost at its next \
             statement. Every client here is plain TCP and {}.",
            seconds(r.drain_timeout_ms),
            if r.dedicated {
                "dedicated (multiplexing off): none can move"
            } else {
                "multiplexed"
            }
        ),
        "Which process serves is read from the log the chain shares: the serving process \
         logs the pid of the successor it starts, then that the successor accepts; only it \
         gets the SIGUSR2. Each successor's configuration differs from its predecessor's \
         only in the admin API's port, so that the cache and session counters are read \
         from each process's own port."
            .to_string(),
    ];
    if r.runs
        .iter()
        .any(|h| h.moved_in.is_none() && h.failure.is_none())
    {
        notes.push(
            "moved is blank where the successor's admin API did not report \
             `sluice_sessions_moved_in_total` (a Sluice that does not move sessions)."
                .into(),
        );
    }
    if let Some(f) = &r.sysbench_failure {
        notes.push(format!("sysbench stopped before the end: {f}"));
    }
    notes
}

fn failure_notes(r: &Results) -> Vec<String> {
    if r.total.is_none() {
        return Vec::new();
    }
    if r.failures.is_empty() {
        return vec!["No probe saw a failure.".into()];
    }
    r.failures
        .iter()
        .map(|(text, n)| format!("{n} x {text}"))
        .collect()
}

fn commands(r: &Results) -> Vec<(String, Vec<String>)> {
    let mut commands = Vec::new();
    if let Some(c) = &r.sluice_command {
        commands.push((
            "Sluice (the first process; each successor is its predecessor's command with \
             --take-over)"
                .to_string(),
            vec![c.clone()],
        ));
    }
    if let Some(c) = &r.prepare_command {
        commands.push(("Data (prepare)".to_string(), vec![c.clone()]));
    }
    crate::report::run_commands(
        commands,
        r.sysbench_command.as_deref().into_iter(),
        &r.command,
    )
}

/// The progress line of one hand-over.
pub(super) fn progress_line(h: &Handover) -> String {
    if let Some(f) = &h.failure {
        return format!(
            "hand-over {}: FAILED: {}",
            h.number,
            f.lines().next().unwrap_or("")
        );
    }
    format!(
        "hand-over {}: pid {} -> {}, ready in {} ms, hit rate {} -> {}, moved {}",
        h.number,
        h.old_pid,
        h.new_pid.map_or("-".into(), |p| p.to_string()),
        h.ready_ms.map_or("-".into(), |v| v.to_string()),
        percent(h.hit_rate_before),
        percent(h.hit_rate_after),
        h.moved_in.map_or("-".into(), |v| v.to_string()),
    )
}
