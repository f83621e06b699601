//! The galera scenario's results as a [`Document`]: our insert rates beside the
//! published ones, every run with where its writes went, and the flow-control part
//! (per node paused time, pause requests, where the writes went; a chart of paused
//! time over each run).

use std::path::Path;

use super::flow::FlowResults;
use super::{InsertRun, Results, SummaryRow};
use crate::chart::{Chart, Series};
use crate::document::{Document, NamedChart, Section, Table};
use crate::report::{median, status_fact, thousands};
use crate::{DIRECT, SLUICE};

/// REFERENCE §2, rows/s at 16 clients: (Galera nodes, 0 for the single server; inserts
/// per transaction; rows/s). It gives only the 1 and 100 inserts per transaction cells.
const PUBLISHED: &[(usize, u32, f64)] = &[
    (0, 1, 8_340.0),
    (1, 1, 4_122.0),
    (2, 1, 4_728.0),
    (3, 1, 5_807.0),
    (0, 100, 17_304.0),
    (1, 100, 15_081.0),
    (2, 100, 22_147.0),
    (3, 100, 24_737.0),
];

fn published(nodes: usize, per_trx: u32) -> Option<f64> {
    PUBLISHED
        .iter()
        .find(|(n, t, _)| *n == nodes && *t == per_trx)
        .map(|(_, _, rate)| *rate)
}

/// Fills in the summary, writes the report's files into `out`, and returns it.
pub(super) fn write(out: &Path, results: &mut Results) -> anyhow::Result<Document> {
    results.summary = summarize(&results.runs);
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

fn summarize(runs: &[InsertRun]) -> Vec<SummaryRow> {
    let mut keys: Vec<(usize, u32, String)> = Vec::new();
    for run in runs {
        let key = (run.nodes, run.per_trx, run.topology.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let rate = |nodes: usize, per_trx: u32, path: &str| {
        median(
            runs.iter()
                .filter(|r| r.nodes == nodes && r.per_trx == per_trx && r.path == path)
                .filter(|r| r.failure.is_none())
                .filter_map(|r| r.rows_per_sec)
                .collect(),
        )
    };
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b.filter(|b| *b > 0.0)?);
    keys.into_iter()
        .map(|(nodes, per_trx, topology)| {
            let single = rate(0, per_trx, DIRECT);
            let direct = rate(nodes, per_trx, DIRECT);
            let sluice = rate(nodes, per_trx, SLUICE);
            let published_rate = published(nodes, per_trx);
            SummaryRow {
                topology,
                nodes,
                per_trx,
                direct_rows_per_sec: direct,
                sluice_rows_per_sec: sluice,
                direct_vs_single: ratio(direct, single),
                sluice_vs_single: ratio(sluice, single),
                published_rows_per_sec: published_rate,
                published_vs_single: ratio(published_rate, published(0, per_trx)),
            }
        })
        .collect()
}

fn document(r: &Results) -> Document {
    let runs = runs_table(r);
    let mut sections = vec![
        Section {
            title: "Inserts: rows/s, ours beside the published".into(),
            tables: vec![summary_table(r)],
            notes: failures(r),
            charts: vec![rate_chart(r)],
        },
        Section {
            title: "Every insert run".into(),
            tables: vec![runs.clone()],
            notes: Vec::new(),
            charts: Vec::new(),
        },
    ];
    let mut csv = runs.csv();
    if let Some(flow) = &r.flow {
        let table = flow_table(flow);
        csv.push('\n');
        csv.push_str(&table.csv());
        sections.push(Section {
            title: "Flow control: one node throttled and its table locked".into(),
            tables: vec![table],
            notes: flow_notes(flow),
            charts: vec![paused_chart(flow)],
        });
    }
    let mut slap: Vec<String> = Vec::new();
    let flow_commands = r
        .flow
        .iter()
        .flat_map(|f| f.runs.iter().map(|x| &x.command));
    for c in r.runs.iter().map(|x| &x.command).chain(flow_commands) {
        if !slap.contains(c) {
            slap.push(c.clone());
        }
    }
    Document {
        title: "Sluice benchmark: Galera multi-master inserts".into(),
        facts: facts(r),
        detail: r.error.clone(),
        legend: Some(
            "rows/s: rows over mysqlslap's wall time for the run, medians over the \
             repetitions. x single: over the plain MariaDB straight, at the same \
             transaction length. Direct: every client on the first node. Sluice: Sluice \
             in front of every node with galera_writers = \"all\". Rows inserted: every \
             node's Com_insert over the run (a Galera node counts the rows it applies for \
             the others too), once all nodes agree; it must be the rows asked for. Local \
             writes per node: on Galera, the write sets each node replicated \
             (wsrep_replicated: the transactions, and mysqlslap's DDL, it took from \
             clients); on the plain server, its inserts. Published: REFERENCE §2, which gives \
             the 1 and 100 inserts per transaction cells only."
                .into(),
        ),
        sections,
        commands: vec![
            ("mysqlslap".to_string(), slap),
            ("This benchmark".to_string(), vec![r.command.clone()]),
        ],
        commands_note: Some(format!(
            "mysqlslap's output of every run is in `raw/`, Sluice's configurations in {}.",
            r.sluice_configs
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        csv,
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

fn facts(r: &Results) -> Vec<String> {
    let mut facts = vec![
        status_fact(&r.started_at, r.finished_at.as_deref(), r.error.as_deref()),
        r.machine.fact(),
        format!(
            "Load generator: {}. Sluice {}. MariaDB {}.",
            r.mysqlslap_version,
            r.sluice_version,
            r.mariadb_version.as_deref().unwrap_or("(version unknown)")
        ),
        format!(
            "{} rows per run, {} clients, the published table and INSERT; topologies: {}.{}",
            thousands(r.rows_per_run),
            r.clients,
            r.topologies.join(", "),
            if r.repeat > 1 {
                format!(" Medians of {} runs each.", r.repeat)
            } else {
                String::new()
            }
        ),
        "The published run inserted 1,000,000 rows per run on separate machines; these \
         runs are sized for a small machine, where every node, Sluice and the clients \
         share the same cores and one node's work is taken from the others: they can \
         show the costs, not write scaling."
            .to_string(),
    ];
    if let Some(flow) = &r.flow {
        facts.push(format!(
            "Flow control: {} nodes, {} throttled ({}), mysqlslap's table held there \
             under LOCK TABLES ... READ for {} s from just before the first insert of each \
             run (its applier waits, the node stays synced); {} rows at {} per \
             transaction through Sluice with galera_writers = \"all\", then \"one\".",
            flow.plan.nodes,
            flow.throttled,
            flow.throttled_fc_limit
                .as_deref()
                .unwrap_or("gcs.fc_limit unread"),
            flow.plan.lock_secs,
            thousands(flow.plan.rows),
            flow.plan.per_trx
        ));
    }
    facts
}

fn failures(r: &Results) -> Vec<String> {
    r.runs
        .iter()
        .filter_map(|run| {
            Some(format!(
                "{}, {} per transaction, run {}, {}: {}",
                run.topology,
                run.per_trx,
                run.repetition,
                run.path,
                run.failure.as_ref()?
            ))
        })
        .collect()
}

fn rate(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| thousands(v.round() as u64))
}

fn times(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.2}"))
}

fn summary_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Rows/s at 16 clients: direct, through Sluice, published",
        &[
            "topology",
            "inserts/trx",
            "direct rows/s",
            "x single",
            "Sluice rows/s",
            "x single",
            "published rows/s",
            "x single",
        ],
    );
    t.title = format!(
        "Rows/s at {} clients: direct, through Sluice, published",
        r.clients
    );
    for row in &r.summary {
        t.rows.push(vec![
            row.topology.clone(),
            row.per_trx.to_string(),
            rate(row.direct_rows_per_sec),
            times(row.direct_vs_single),
            rate(row.sluice_rows_per_sec),
            times(row.sluice_vs_single),
            rate(row.published_rows_per_sec),
            times(row.published_vs_single),
        ]);
    }
    t
}

fn runs_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Every insert run",
        &[
            "topology",
            "inserts/trx",
            "run",
            "path",
            "rows asked",
            "rows inserted",
            "seconds",
            "rows/s",
            "local writes per node",
        ],
    );
    for run in &r.runs {
        t.rows.push(vec![
            run.topology.clone(),
            run.per_trx.to_string(),
            run.repetition.to_string(),
            run.path.to_string(),
            thousands(run.rows_asked),
            run.rows_inserted.map_or("?".into(), thousands),
            run.seconds.map_or("FAILED".into(), |s| format!("{s:.2}")),
            rate(run.rows_per_sec),
            per_node(&run.local_per_node),
        ]);
    }
    t
}

fn per_node(values: &[Option<u64>]) -> String {
    values
        .iter()
        .map(|v| v.map_or("?".into(), thousands))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn flow_table(flow: &FlowResults) -> Table {
    let mut t = Table::new(
        "Per node, over each run",
        &[
            "galera_writers",
            "rows/s",
            "seconds",
            "node",
            "paused ms",
            "FC sent",
            "FC received",
            "write sets",
            "share",
            "asking pause",
            "max recv queue",
            "states",
        ],
    );
    for run in &flow.runs {
        for node in &run.nodes {
            t.rows.push(vec![
                run.writers.to_string(),
                rate(run.rows_per_sec),
                run.seconds.map_or("FAILED".into(), |s| format!("{s:.2}")),
                node.name.clone(),
                node.paused_ms.map_or("?".into(), |ms| format!("{ms:.0}")),
                node.fc_sent.map_or("?".into(), |n| n.to_string()),
                node.fc_recv.map_or("?".into(), |n| n.to_string()),
                node.write_sets.map_or("?".into(), thousands),
                node.write_share
                    .map_or("?".into(), |x| format!("{:.0}%", x * 100.0)),
                format!("{} of {}", node.requested_samples, run.samples.len()),
                node.max_recv_queue.map_or("?".into(), |n| n.to_string()),
                node.states
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("→"),
            ]);
        }
    }
    t
}

fn flow_notes(flow: &FlowResults) -> Vec<String> {
    let mut notes = vec![
        "paused ms: wsrep_flow_control_paused_ns over the run, the time replication on \
         that node stood still because some node asked for a pause; FC sent: the pause \
         requests the node made (it is the one lagging). write sets: the transactions \
         it took from clients (wsrep_replicated), and share: its part of all nodes' (an \
         even spread is one per node); with galera_writers = \"all\", Sluice steers new \
         transactions away from a node asking for a pause, so the throttled node's share \
         falls. asking pause: samples (once a second) in which it had \
         wsrep_flow_control_requested on. states: wsrep_local_state as sampled (4 \
         synced, 2 desynced or donor, 3 joined)."
            .to_string(),
    ];
    for run in &flow.runs {
        let lock = match (run.locked_from, run.locked_until) {
            (Some(a), Some(b)) => format!("table lock held from {a:.1} s to {b:.1} s"),
            (Some(a), None) => format!("table lock taken at {a:.1} s"),
            _ => "no table lock".to_string(),
        };
        notes.push(format!(
            "galera_writers = \"{}\": Sluice's writer before the run {}; {lock}; {} of {} \
             rows inserted.{}",
            run.writers,
            run.writer_at_start.as_deref().unwrap_or("none"),
            run.rows_inserted.map_or("?".into(), thousands),
            thousands(run.rows_asked),
            run.failure
                .as_ref()
                .map(|f| format!(" FAILED: {f}"))
                .unwrap_or_default()
        ));
    }
    notes
}

fn rate_chart(r: &Results) -> NamedChart {
    let mut series = Vec::new();
    let topologies: Vec<(usize, String)> = {
        let mut seen: Vec<(usize, String)> = Vec::new();
        for row in &r.summary {
            if !seen.iter().any(|(n, _)| *n == row.nodes) {
                seen.push((row.nodes, row.topology.clone()));
            }
        }
        seen
    };
    for (nodes, name) in topologies {
        for (path, value) in [
            (
                DIRECT,
                (|row: &SummaryRow| row.direct_rows_per_sec) as fn(&SummaryRow) -> _,
            ),
            (SLUICE, |row: &SummaryRow| row.sluice_rows_per_sec),
        ] {
            if nodes == 0 && path == SLUICE {
                continue;
            }
            series.push(Series {
                name: format!("{name} {path}"),
                points: r
                    .summary
                    .iter()
                    .filter(|row| row.nodes == nodes)
                    .filter_map(|row| Some((f64::from(row.per_trx), value(row)?)))
                    .collect(),
            });
        }
    }
    NamedChart {
        file_stem: "galera-inserts".into(),
        chart: Chart {
            title: "Inserts: rows/s against transaction length".into(),
            x_label: "inserts per transaction".into(),
            y_label: "rows/s".into(),
            series,
        },
    }
}

/// Paused time since the start of each run, node by node; both axes logarithmic (the
/// report's one kind of chart), so the seconds before the first pause are not drawn.
fn paused_chart(flow: &FlowResults) -> NamedChart {
    let mut series = Vec::new();
    for run in &flow.runs {
        for (i, node) in run.nodes.iter().enumerate() {
            series.push(Series {
                name: format!("{} ({})", node.name, run.writers),
                points: run
                    .samples
                    .iter()
                    .filter_map(|s| Some((s.secs, s.paused_ms[i]?)))
                    .collect(),
            });
        }
    }
    NamedChart {
        file_stem: "galera-flow-paused".into(),
        chart: Chart {
            title: "Flow control: paused time since the start of the run".into(),
            x_label: "seconds".into(),
            y_label: "paused ms".into(),
            series,
        },
    }
}
