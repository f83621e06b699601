//! The zones scenario's results as a [`Document`]: nearest ÷ primary beside the
//! published ratios with a reading of it ([`reading`]), every mode's throughput and
//! latency, where the reads went, the links, every run, and a chart of tps against
//! threads.

mod reading;

use std::path::Path;

use super::{
    Comparison, Mode, Placement, ReadShare, ReadsRow, Results, Run, ServerInfo, ServerLoad,
    SummaryRow, LEGS,
};
use crate::chart::{Chart, Series};
use crate::document::{Document, NamedChart, Section, Table};
use crate::mux::cell;
use crate::report::{median, status_fact, thousands};

/// REFERENCE §3: nearest ÷ primary, client on the SQL node and one hop away.
fn published(placement: Placement) -> f64 {
    match placement {
        Placement::Colocated => 1.5,
        Placement::ClientHop => 1.3,
    }
}

/// Fills in the summaries, writes the report's files into `out`, and returns it.
pub(super) fn write(out: &Path, results: &mut Results) -> anyhow::Result<Document> {
    results.summary = summarize(results);
    results.comparison = compare(&results.summary);
    results.reads = reads(&results.runs);
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

/// (placement, mode, threads) of every summary row: by placement, threads, then mode.
fn keys(runs: &[Run]) -> Vec<(Placement, Mode, u32)> {
    let threads = crate::dedup(&runs.iter().map(|r| r.threads).collect::<Vec<_>>());
    let mut keys = Vec::new();
    for placement in [Placement::Colocated, Placement::ClientHop] {
        for &t in &threads {
            for &(mode, p) in &LEGS {
                let key = (p, mode, t);
                if p == placement && runs.iter().any(|r| (r.placement, r.mode, r.threads) == key) {
                    keys.push(key);
                }
            }
        }
    }
    keys
}

fn of(runs: &[Run], key: (Placement, Mode, u32)) -> impl Iterator<Item = &Run> {
    runs.iter()
        .filter(move |r| (r.placement, r.mode, r.threads) == key)
}

fn summarize(r: &Results) -> Vec<SummaryRow> {
    keys(&r.runs)
        .into_iter()
        .map(|key @ (placement, mode, threads)| {
            let med = |f: fn(&Run) -> Option<f64>| median(of(&r.runs, key).filter_map(f).collect());
            let (tps, qps, avg_ms) = (med(|r| r.tps), med(|r| r.qps), med(|r| r.avg_ms));
            let queries_per_tx = match (qps, tps) {
                (Some(q), Some(t)) if t > 0.0 => Some(q / t),
                _ => None,
            };
            SummaryRow {
                placement,
                mode,
                threads,
                tps,
                qps,
                avg_ms,
                p95_ms: med(|r| r.p95_ms),
                errors: of(&r.runs, key).filter_map(|r| r.errors).sum(),
                ms_per_read: avg_ms.zip(queries_per_tx).map(|(a, q)| a / q),
                round_trip_ms: round_trip_ms(r, key),
                cpu_busy: med(|r| r.cpu_busy),
            }
        })
        .collect()
}

/// The delays one read of `key` waits for: a round trip to each server weighted by its
/// share of the SELECTs, and with the client hop that link's round trip too.
fn round_trip_ms(r: &Results, key: (Placement, Mode, u32)) -> Option<f64> {
    let shares = shares(of(&r.runs, key));
    let total: u64 = shares.iter().sum();
    if total == 0 || r.servers.len() != shares.len() {
        return None;
    }
    let servers: f64 = r
        .servers
        .iter()
        .zip(&shares)
        .map(|(s, &n)| 2.0 * s.one_way_us * n as f64 / total as f64)
        .sum();
    let hop = match key.0 {
        Placement::ClientHop => 2.0 * r.intra_zone_us,
        Placement::Colocated => 0.0,
    };
    Some((servers + hop) / 1e3)
}

/// Each server's SELECTs over the successful `runs`, summed.
fn shares<'a>(runs: impl Iterator<Item = &'a Run>) -> Vec<u64> {
    let mut sums: Vec<u64> = Vec::new();
    for run in runs.filter(|r| r.failure.is_none()) {
        sums.resize(sums.len().max(run.servers.len()), 0);
        for (sum, l) in sums.iter_mut().zip(&run.servers) {
            *sum += l.selects.unwrap_or(0);
        }
    }
    sums
}

fn compare(summary: &[SummaryRow]) -> Vec<Comparison> {
    let tps = |placement, mode, threads| {
        summary
            .iter()
            .find(|s| (s.placement, s.mode, s.threads) == (placement, mode, threads))
            .and_then(|s| s.tps)
    };
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b.filter(|b| *b > 0.0)?);
    let mut keys: Vec<(Placement, u32)> = Vec::new();
    for s in summary.iter().filter(|s| s.mode != Mode::Direct) {
        if !keys.contains(&(s.placement, s.threads)) {
            keys.push((s.placement, s.threads));
        }
    }
    keys.into_iter()
        .map(|(placement, threads)| {
            let primary_tps = tps(placement, Mode::Primary, threads);
            let nearest_tps = tps(placement, Mode::Nearest, threads);
            let spread_tps = tps(placement, Mode::Spread, threads);
            Comparison {
                placement,
                threads,
                primary_tps,
                nearest_tps,
                ratio: ratio(nearest_tps, primary_tps),
                published_ratio: published(placement),
                spread_tps,
                spread_ratio: ratio(spread_tps, primary_tps),
                direct_tps: tps(placement, Mode::Direct, threads),
            }
        })
        .collect()
}

fn reads(runs: &[Run]) -> Vec<ReadsRow> {
    keys(runs)
        .into_iter()
        .map(|key @ (placement, mode, threads)| {
            let ok: Vec<&Run> = of(runs, key).filter(|r| r.failure.is_none()).collect();
            let selects = shares(ok.iter().copied());
            let total_selects: u64 = selects.iter().sum();
            let names: Vec<String> = ok
                .first()
                .map(|r| r.servers.iter().map(|l| l.name.clone()).collect())
                .unwrap_or_default();
            let sent = |l: &ServerLoad| Some(l.reads? + l.writes?);
            let statements: Vec<Option<u64>> = (0..names.len())
                .map(|i| ok.iter().map(|r| sent(&r.servers[i])).sum())
                .collect();
            let total_statements: Option<u64> = statements.iter().copied().sum();
            let share = |n: u64, all: u64| (all > 0).then(|| n as f64 / all as f64);
            ReadsRow {
                placement,
                mode,
                threads,
                servers: names
                    .into_iter()
                    .enumerate()
                    .map(|(i, name)| ReadShare {
                        name,
                        selects: selects[i],
                        share: share(selects[i], total_selects),
                        statements: statements[i],
                        statements_share: statements[i]
                            .zip(total_statements)
                            .and_then(|(n, a)| share(n, a)),
                        ttfb_ms: median(ok.iter().filter_map(|r| r.servers[i].ttfb_ms).collect()),
                    })
                    .collect(),
            }
        })
        .collect()
}

fn document(r: &Results) -> Document {
    let runs = runs_table(r);
    Document {
        title: "Sluice benchmark: zones (the nearest replica)".into(),
        facts: facts(r),
        detail: r.error.clone(),
        legend: Some(
            "tps: sysbench transactions per second, 14 reads each (oltp_read_only \
             --skip_trx=on); qps: its queries per second; avg and p95: its latency per \
             transaction; medians over the repetitions. Published: REFERENCE §3, nearest \
             replica ÷ primary, +50% with the client on the SQL node and +30% with it one \
             hop away. ms per read: the transaction's latency over its queries. Round \
             trip per read: the configured delays a read waits for, to each server by its \
             share of the SELECTs, plus the client hop's. CPU busy: of both cores, \
             everything on the machine counted. SELECTs: each server's `Com_select` over \
             the run less what it runs with Sluice idle (its monitor); statements Sluice \
             sent: its `/v1/servers` reads and writes per server (with the split off, \
             every statement is a write), which also count the statement preparations it \
             routes; ttfb: its time to first byte there, which its balancing weighs. Late: how long after its due time a link passed a chunk on, the mean \
             over the run's chunks and the worst since the links started: the delay \
             actually kept under the machine's load."
                .into(),
        ),
        sections: vec![
            Section {
                title: "Nearest replica against the primary, beside the published".into(),
                tables: vec![comparison_table(r)],
                notes: reading::notes(r),
                charts: vec![tps_chart(r)],
            },
            Section {
                title: "Every mode: throughput, latency, and what a read waits for".into(),
                tables: vec![summary_table(r)],
                notes: Vec::new(),
                charts: Vec::new(),
            },
            Section {
                title: "Where the reads went".into(),
                tables: vec![reads_table(r)],
                notes: Vec::new(),
                charts: Vec::new(),
            },
            Section {
                title: "Links: the configured delays".into(),
                tables: vec![servers_table(&r.servers)],
                notes: Vec::new(),
                charts: Vec::new(),
            },
            Section {
                title: "Every run".into(),
                tables: vec![runs.clone()],
                notes: r
                    .runs
                    .iter()
                    .filter_map(|run| {
                        let f = run.failure.as_ref()?;
                        Some(format!(
                            "{} {}, {} threads, run {}: {f}",
                            run.mode.name(),
                            run.placement.name(),
                            run.threads,
                            run.repetition
                        ))
                    })
                    .collect(),
                charts: Vec::new(),
            },
        ],
        commands: commands(r),
        commands_note: Some(
            "sysbench's output of every run and each run's Sluice log are in `raw/`; \
             each mode's Sluice configuration (its last run's link ports) in \
             `sluice-<mode>.toml`."
                .into(),
        ),
        csv: runs.csv(),
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

/// What the run was and where, one line each.
fn facts(r: &Results) -> Vec<String> {
    let zones: Vec<String> = r
        .servers
        .iter()
        .map(|s| format!("{} in zone {}", s.name, s.zone))
        .collect();
    let idle: Vec<String> = r
        .servers
        .iter()
        .map(|s| cell(s.idle_selects_per_sec, 1))
        .collect();
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
            "oltp_read_only --skip_trx=on, prepared statements, {} s per run; {} tables x {} \
             rows.{}",
            r.duration_secs,
            r.data.tables,
            thousands(r.data.table_size),
            if r.repeat > 1 {
                format!(" Medians of {} runs each.", r.repeat)
            } else {
                String::new()
            }
        ),
        format!(
            "Zones: {}; sysbench and Sluice in zone a. Replication (GTID, asynchronous, \
             caught up before the runs, which write nothing) runs directly between the \
             servers; everything the client and Sluice send goes through delay links.",
            if zones.is_empty() {
                "(not started)".to_string()
            } else {
                zones.join(", ")
            }
        ),
        format!(
            "Delays, one way: **{} µs within a zone, {} µs across zones**{}; the client \
             hop is one more intra-zone link, in front of Sluice. The relay's own cost \
             (two more socket hops and thread wake-ups, no delay): **{} µs per round \
             trip**, on top of the delays.",
            r.intra_zone_us,
            r.cross_zone_us,
            if r.jitter_us > 0.0 {
                format!(", each chunk ± up to {} µs", r.jitter_us)
            } else {
                String::new()
            },
            cell(r.relay_cost_us, 1)
        ),
        format!(
            "direct: sysbench straight at the primary (zone a to b). primary: through \
             Sluice with read_write_split = false. nearest: through Sluice with [routing] \
             zone = \"a\". spread: through Sluice, split on, no zone: reads balanced by \
             weight (1 each) and latency. Every run has links and a Sluice of its own \
             (multiplexing onto up to {} connections per server), started before it and \
             stopped after.",
            r.backend_connections
        ),
        format!(
            "Sluice's monitor checks every server each 500 ms; what the servers ran with \
             Sluice idle ({} SELECT/s on {}) is taken off each Sluice run's `Com_select`.",
            idle.join(" / "),
            r.servers
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(" / ")
        ),
    ]
}

/// Every command line, grouped.
fn commands(r: &Results) -> Vec<(String, Vec<String>)> {
    let mut commands = Vec::new();
    if !r.sluice_commands.is_empty() {
        commands.push(("Sluice".to_string(), r.sluice_commands.clone()));
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

fn comparison_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Transactions per second: reads on the primary (across zones) and on the replica of \
         Sluice's zone",
        &[
            "client",
            "threads",
            "primary tps",
            "nearest tps",
            "nearest / primary",
            "published",
            "spread tps",
            "spread / primary",
            "direct tps",
        ],
    );
    for c in &r.comparison {
        t.rows.push(vec![
            c.placement.name().into(),
            c.threads.to_string(),
            tps_cell(c.primary_tps),
            tps_cell(c.nearest_tps),
            ratio_cell(c.ratio),
            format!("{:.2}", c.published_ratio),
            tps_cell(c.spread_tps),
            ratio_cell(c.spread_ratio),
            match c.placement {
                Placement::Colocated => tps_cell(c.direct_tps),
                Placement::ClientHop => "—".into(),
            },
        ]);
    }
    t
}

fn summary_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Medians per mode, client placement and threads",
        &[
            "client",
            "mode",
            "threads",
            "tps",
            "qps",
            "avg ms",
            "p95 ms",
            "ms per read",
            "round trip per read, ms",
            "CPU busy",
            "errors",
        ],
    );
    for s in &r.summary {
        t.rows.push(vec![
            s.placement.name().into(),
            s.mode.name().into(),
            s.threads.to_string(),
            tps_cell(s.tps),
            tps_cell(s.qps),
            cell(s.avg_ms, 2),
            cell(s.p95_ms, 2),
            cell(s.ms_per_read, 3),
            s.round_trip_ms
                .map_or_else(|| "n/a".into(), |v| format!("{v:.3}")),
            percent(s.cpu_busy),
            s.errors.to_string(),
        ]);
    }
    t
}

fn reads_table(r: &Results) -> Table {
    let names: Vec<String> = r.servers.iter().map(|s| s.name.clone()).collect();
    let mut header: Vec<String> = vec!["client".into(), "mode".into(), "threads".into()];
    header.extend(names.iter().map(|n| format!("{n}: SELECTs")));
    header.push("statements Sluice sent each server".into());
    header.push("Sluice's ttfb per server, ms".into());
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "Share of the SELECTs each server ran (Com_select less Sluice idle's)",
        &header,
    );
    for row in &r.reads {
        let mut cells = vec![
            row.placement.name().to_string(),
            row.mode.name().to_string(),
            row.threads.to_string(),
        ];
        for name in &names {
            let s = row.servers.iter().find(|s| &s.name == name);
            cells.push(s.map_or("n/a".into(), |s| {
                format!("{} ({})", percent(s.share), thousands(s.selects))
            }));
        }
        let joined = |f: &dyn Fn(&ReadShare) -> String| {
            row.servers.iter().map(f).collect::<Vec<_>>().join(" / ")
        };
        if row.mode == Mode::Direct {
            cells.extend(["—".to_string(), "—".to_string()]);
        } else {
            cells.push(joined(&|s| s.statements.map_or("?".into(), thousands)));
            // A server sent nothing has no latency of its own to show.
            cells.push(joined(&|s| match (s.statements, s.ttfb_ms) {
                (Some(0), _) => "—".into(),
                (_, Some(v)) => format!("{v:.2}"),
                (_, None) => "n/a".into(),
            }));
        }
        t.rows.push(cells);
    }
    t
}

fn servers_table(servers: &[ServerInfo]) -> Table {
    let mut t = Table::new(
        "Each server as Sluice and sysbench reach it from zone a",
        &[
            "server",
            "zone",
            "one-way delay from zone a, µs",
            "role",
            "SELECT/s with Sluice idle",
        ],
    );
    for s in servers {
        t.rows.push(vec![
            s.name.clone(),
            s.zone.clone(),
            format!("{}", s.one_way_us),
            s.role.clone(),
            cell(s.idle_selects_per_sec, 1),
        ]);
    }
    t
}

fn runs_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Each sysbench run, in order",
        &[
            "client",
            "mode",
            "threads",
            "run",
            "tps",
            "qps",
            "avg ms",
            "p95 ms",
            "errors",
            "CPU busy",
            "SELECTs per server",
            "links",
            "late, mean µs",
            "late, worst µs",
        ],
    );
    for run in &r.runs {
        let selects: Vec<String> = run
            .servers
            .iter()
            .map(|l| l.selects.map_or("?".into(), thousands))
            .collect();
        t.rows.push(vec![
            run.placement.name().into(),
            run.mode.name().into(),
            run.threads.to_string(),
            run.repetition.to_string(),
            tps_cell(run.tps),
            tps_cell(run.qps),
            cell(run.avg_ms, 2),
            cell(run.p95_ms, 2),
            run.errors.map_or("-".into(), |e| e.to_string()),
            percent(run.cpu_busy),
            selects.join(" / "),
            run.links.links.to_string(),
            run.links
                .mean_late_us
                .map_or_else(|| "n/a".into(), |v| format!("{v:.1}")),
            run.links
                .worst_late_us
                .map_or_else(|| "n/a".into(), |v| format!("{v:.0}")),
        ]);
    }
    t
}

/// The chart's name of a mode and placement: `nearest`, `nearest+hop`.
fn series_name(mode: Mode, placement: Placement) -> String {
    match placement {
        Placement::Colocated => mode.name().to_string(),
        Placement::ClientHop => format!("{}+hop", mode.name()),
    }
}

fn tps_chart(r: &Results) -> NamedChart {
    let series = LEGS
        .iter()
        .map(|&(mode, placement)| Series {
            name: series_name(mode, placement),
            points: r
                .summary
                .iter()
                .filter(|s| s.mode == mode && s.placement == placement)
                .filter_map(|s| Some((f64::from(s.threads), s.tps?)))
                .collect(),
        })
        .collect();
    NamedChart {
        file_stem: "zones-tps".into(),
        chart: Chart {
            title: "Nearest replica: throughput".into(),
            x_label: "threads".into(),
            y_label: "transactions/s".into(),
            series,
        },
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{:.1}%", v * 100.0))
}

fn tps_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "FAILED".into(), |v| thousands(v.round() as u64))
}

fn ratio_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.2}"))
}

#[cfg(test)]
mod tests;
