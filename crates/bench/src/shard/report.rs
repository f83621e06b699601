//! The shard scenario's results as a [`Document`]: tps and latency per instance count
//! beside the published curve, a reading of it, where the rows are, every run with what
//! each instance served and read from disk, and a chart of tps against instances.

use std::path::Path;

use super::{Results, Run, SummaryRow, DIRECT, SLUICE};
use crate::chart::{Chart, Series};
use crate::document::{Document, NamedChart, Section, Table};
use crate::mux::cell;
use crate::report::{median, status_fact, thousands};

/// REFERENCE §4: tps of MySQL instances on one 16-core server; it gives one instance
/// and the peak, at 6.
const PUBLISHED: &[(usize, f64)] = &[(1, 2_231.0), (6, 5_702.0)];

fn published(instances: usize) -> Option<f64> {
    PUBLISHED
        .iter()
        .find(|(n, _)| *n == instances)
        .map(|(_, tps)| *tps)
}

/// Fills in the summary, writes the report's files into `out`, and returns it.
pub(super) fn write(out: &Path, results: &mut Results) -> anyhow::Result<Document> {
    results.summary = summarize(&results.runs);
    let document = document(results);
    document.write(out)?;
    Ok(document)
}

fn summarize(runs: &[Run]) -> Vec<SummaryRow> {
    let mut keys: Vec<(usize, &'static str, u32)> = Vec::new();
    for run in runs {
        let key = (run.instances, run.path, run.threads);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let of = |instances: usize, path: &'static str, threads: u32| {
        runs.iter()
            .filter(move |r| r.instances == instances && r.path == path && r.threads == threads)
    };
    let med = |key: (usize, &'static str, u32), f: fn(&Run) -> Option<f64>| {
        median(of(key.0, key.1, key.2).filter_map(f).collect())
    };
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b.filter(|b| *b > 0.0)?);
    keys.into_iter()
        .map(|key @ (instances, path, threads)| {
            let tps = med(key, |r| r.tps);
            let one = med((1, SLUICE, threads), |r| r.tps);
            let (mut disk, mut statements) = (0, 0);
            for run in of(instances, path, threads).filter(|r| r.failure.is_none()) {
                for l in &run.per_instance {
                    disk += l.disk_reads.unwrap_or(0);
                    statements += l.stmt_executes.unwrap_or(0);
                }
            }
            let published_tps = published(instances).filter(|_| path == SLUICE);
            SummaryRow {
                instances,
                path,
                threads,
                tps,
                avg_ms: med(key, |r| r.avg_ms),
                p95_ms: med(key, |r| r.p95_ms),
                errors: of(instances, path, threads).filter_map(|r| r.errors).sum(),
                vs_one: ratio(tps, one),
                disk_reads_per_statement: (statements > 0).then(|| disk as f64 / statements as f64),
                published_tps,
                published_vs_one: ratio(published_tps, published(1)),
            }
        })
        .collect()
}

fn document(r: &Results) -> Document {
    let runs = runs_table(r);
    Document {
        title: "Sluice benchmark: shard (scale up, then out)".into(),
        facts: facts(r),
        detail: r.error.clone(),
        legend: Some(
            "tps: sysbench events per second (one point select each); avg and p95: its \
             latency per event, medians over the repetitions. vs 1: over one instance \
             through Sluice at the same threads. Disk reads per statement: pages the \
             instances read from disk (`Innodb_buffer_pool_reads`) over the statements \
             they executed (`Com_stmt_execute`), all instances together. Published: REFERENCE §4, MySQL \
             instances on one 16-core server, which gives one instance and the peak only."
                .into(),
        ),
        sections: vec![
            Section {
                title: "Scale out: throughput per instance count, ours beside the published".into(),
                tables: vec![summary_table(r)],
                notes: reading(r),
                charts: vec![tps_chart(r)],
            },
            Section {
                title: "Placement: each instance holds only its range of id".into(),
                tables: vec![placement_table(r)],
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
                            "{} instance(s), {}, {} threads, run {}: {f}",
                            run.instances, run.path, run.threads, run.repetition
                        ))
                    })
                    .collect(),
                charts: Vec::new(),
            },
        ],
        commands: commands(r),
        commands_note: Some(
            "sysbench's output of every run (and of each warm-up) is in `raw/`, each \
             topology's Sluice configuration in `sluice-N.toml` and its log beside it."
                .into(),
        ),
        csv: runs.csv(),
        json: serde_json::to_string_pretty(r).expect("the results serialize") + "\n",
    }
}

/// What the run was and where, one line each.
fn facts(r: &Results) -> Vec<String> {
    let counts: Vec<String> = r.instance_counts.iter().map(|n| n.to_string()).collect();
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
            "oltp_point_select, prepared statements, uniformly drawn ids \
             (--rand-type=uniform), {} s per run after a {} s warm-up through Sluice; one \
             logical database of {} tables x {} rows.{}",
            r.duration_secs,
            r.warmup_secs,
            r.data.tables,
            thousands(r.data.table_size),
            if r.repeat > 1 {
                format!(" Medians of {} runs each.", r.repeat)
            } else {
                String::new()
            }
        ),
        format!(
            "Instances: {}, one topology at a time, all on this machine. Each a sandbox \
             MariaDB with a {} MiB InnoDB buffer pool, alone in its shard; Sluice places \
             every table by RANGE on id, contiguous ranges of equal size, and multiplexes \
             onto up to {} connections per instance. With one instance, sysbench also ran \
             straight at it (direct), taking turns with Sluice.",
            counts.join(", "),
            r.buffer_pool_mib_each,
            r.backend_connections
        ),
        "Data: each instance loaded with only its range by the server itself (INSERT ... \
         SELECT from the Sequence engine, rows of sysbench's shape, the k index built \
         after), then counted: the placement table. The buffer pools grow with the \
         instances: adding an instance adds memory as well as a server."
            .into(),
    ];
    facts.extend(r.topologies.iter().map(|t| {
        format!(
            "{} instance(s): data and indexes {} MiB, buffer pools {} MiB together; loaded \
             in {:.1} s.",
            t.instances,
            cell(t.data_mib, 1),
            cell(t.buffer_pool_mib, 1),
            t.load_secs
        )
    }));
    facts
}

/// An honest reading of the curve, from the figures themselves.
fn reading(r: &Results) -> Vec<String> {
    let through: Vec<&SummaryRow> = r.summary.iter().filter(|s| s.path == SLUICE).collect();
    let mut notes = Vec::new();
    let peak = through
        .iter()
        .filter(|s| s.tps.is_some())
        .max_by(|a, b| a.tps.partial_cmp(&b.tps).expect("tps are numbers"));
    if let Some(peak) = peak {
        notes.push(format!(
            "Ours peaks at {} instance(s), {} tps, {} one instance through Sluice; the \
             published curve peaks at 6 instances, 5,702 tps, 2.56x one instance (2,231 \
             tps).",
            peak.instances,
            thousands(peak.tps.unwrap_or(0.0).round() as u64),
            peak.vs_one
                .map_or("n/a times".into(), |x| format!("{x:.2}x"))
        ));
    }
    let miss = |n: usize| {
        through
            .iter()
            .find(|s| s.instances == n)
            .and_then(|s| s.disk_reads_per_statement)
    };
    if let (Some(first), Some(last)) = (through.first(), through.last()) {
        let (from, to) = (miss(first.instances), miss(last.instances));
        if first.instances != last.instances {
            let meaning = match (from, to) {
                (Some(a), Some(b)) if a > 0.05 && a > 2.0 * b => {
                    ": the instances' buffer pools together hold more of the data, so much \
                     of what more instances gain here is memory, not CPU."
                }
                (Some(a), _) if a <= 0.05 => {
                    ": the data fit in memory from the start, so these figures measure \
                     the cores shared by more processes, not memory added."
                }
                (Some(a), Some(b)) if b < 0.8 * a => {
                    ": the buffer pools together hold more of the data, yet many reads \
                     still go to disk."
                }
                _ => ": more instances did not bring the data into memory.",
            };
            notes.push(format!(
                "Disk reads per statement: {} with {} instance(s), {} with {}{meaning}",
                cell(from, 2),
                first.instances,
                cell(to, 2),
                last.instances
            ));
        }
    }
    if let (Some(direct), Some(one)) = (
        r.summary.iter().find(|s| s.path == DIRECT),
        through.iter().find(|s| s.instances == 1),
    ) {
        if let (Some(d), Some(s)) = (direct.tps, one.tps) {
            notes.push(format!(
                "Sluice's own cost, one instance: {} tps direct, {} through Sluice ({:.2}x); \
                 avg latency {} ms against {} ms.",
                thousands(d.round() as u64),
                thousands(s.round() as u64),
                s / d,
                cell(direct.avg_ms, 2),
                cell(one.avg_ms, 2)
            ));
        }
    }
    notes.push(format!(
        "On {} logical CPUs, sysbench, Sluice and every instance share the same cores: \
         once the data fits in the buffer pools together, another instance adds no CPU, \
         only processes competing for it, so the curve flattens or falls where the \
         published one (16 cores, one server's CPU and memory shared by up to 8 instances) \
         kept rising to 6. The shape to compare is the rise while memory is short, not \
         the height.",
        r.machine.logical_cpus
    ));
    notes
}

/// Every command line, grouped.
fn commands(r: &Results) -> Vec<(String, Vec<String>)> {
    let mut commands = Vec::new();
    if !r.sluice_commands.is_empty() {
        commands.push(("Sluice".to_string(), r.sluice_commands.clone()));
    }
    crate::report::run_commands(
        commands,
        r.runs.iter().map(|run| run.command.as_str()),
        &r.command,
    )
}

fn summary_table(r: &Results) -> Table {
    let mut t = Table::new(
        "tps and latency per instance count",
        &[
            "instances",
            "path",
            "threads",
            "tps",
            "vs 1",
            "avg ms",
            "p95 ms",
            "errors",
            "disk reads / statement",
            "published tps",
            "published vs 1",
        ],
    );
    for row in &r.summary {
        t.rows.push(vec![
            row.instances.to_string(),
            row.path.to_string(),
            row.threads.to_string(),
            tps_cell(row.tps),
            ratio_cell(row.vs_one),
            cell(row.avg_ms, 2),
            cell(row.p95_ms, 2),
            row.errors.to_string(),
            cell(row.disk_reads_per_statement, 2),
            row.published_tps
                .map_or("-".into(), |v| thousands(v.round() as u64)),
            ratio_cell(row.published_vs_one),
        ]);
    }
    t
}

fn placement_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Rows per instance, counted after loading",
        &[
            "instances",
            "instance",
            "table",
            "ids asked",
            "rows held",
            "ids held",
            "COUNT(*) through Sluice",
        ],
    );
    for topology in &r.topologies {
        for p in &topology.placement {
            let table: usize = p.table.trim_start_matches("sbtest").parse().unwrap_or(0);
            let through = topology
                .rows_through_sluice
                .get(table.wrapping_sub(1))
                .copied()
                .flatten();
            t.rows.push(vec![
                topology.instances.to_string(),
                p.instance.clone(),
                p.table.clone(),
                format!("{}..={}", p.ids.0, p.ids.1),
                thousands(p.rows),
                p.held.map_or("-".into(), |(lo, hi)| format!("{lo}..={hi}")),
                through.map_or("n/a".into(), thousands),
            ]);
        }
    }
    t
}

fn runs_table(r: &Results) -> Table {
    let mut t = Table::new(
        "Each sysbench run, in order",
        &[
            "instances",
            "path",
            "threads",
            "run",
            "tps",
            "avg ms",
            "p95 ms",
            "errors",
            "statements executed per instance",
            "disk reads per instance",
        ],
    );
    for run in &r.runs {
        let per = |f: fn(&super::InstanceLoad) -> Option<u64>| {
            run.per_instance
                .iter()
                .map(|l| format!("{} {}", l.name, f(l).map_or("-".into(), thousands)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        t.rows.push(vec![
            run.instances.to_string(),
            run.path.to_string(),
            run.threads.to_string(),
            run.repetition.to_string(),
            tps_cell(run.tps),
            cell(run.avg_ms, 2),
            cell(run.p95_ms, 2),
            run.errors.map_or("-".into(), |e| e.to_string()),
            per(|l| l.stmt_executes),
            per(|l| l.disk_reads),
        ]);
    }
    t
}

fn tps_chart(r: &Results) -> NamedChart {
    let ours = Series {
        name: "Sluice (ours)".into(),
        points: r
            .summary
            .iter()
            .filter(|s| s.path == SLUICE)
            .filter_map(|s| Some((s.instances as f64, s.tps?)))
            .collect(),
    };
    let theirs = Series {
        name: "published (16 cores)".into(),
        points: PUBLISHED.iter().map(|&(n, tps)| (n as f64, tps)).collect(),
    };
    NamedChart {
        file_stem: "shard-tps".into(),
        chart: Chart {
            title: "Scale out: throughput against instances".into(),
            x_label: "instances".into(),
            y_label: "transactions/s".into(),
            series: vec![ours, theirs],
        },
    }
}

fn ratio_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}x"))
}

fn tps_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "FAILED".into(), |v| thousands(v.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::super::InstanceLoad;
    use super::*;

    fn run(instances: usize, path: &'static str, tps: f64, disk: u64) -> Run {
        Run {
            instances,
            path,
            threads: 16,
            repetition: 1,
            tps: Some(tps),
            avg_ms: Some(4.0),
            p95_ms: Some(9.0),
            errors: Some(0),
            failure: None,
            command: String::new(),
            output_file: String::new(),
            per_instance: (1..=instances)
                .map(|i| InstanceLoad {
                    name: format!("db{i}"),
                    stmt_executes: Some(100),
                    selects: Some(3),
                    disk_reads: Some(disk),
                    read_requests: Some(1000),
                    pool_pages: None,
                })
                .collect(),
        }
    }

    #[test]
    fn the_summary_sets_ours_beside_the_published() {
        let runs = vec![
            run(1, DIRECT, 2000.0, 500),
            run(1, SLUICE, 1000.0, 500),
            run(2, SLUICE, 1500.0, 100),
            run(6, SLUICE, 2500.0, 0),
        ];
        let s = summarize(&runs);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].path, DIRECT);
        assert_eq!(s[0].published_tps, None);
        assert_eq!(s[0].vs_one, Some(2.0));
        assert_eq!(s[1].published_tps, Some(2231.0));
        assert_eq!(s[1].vs_one, Some(1.0));
        assert_eq!(s[2].disk_reads_per_statement, Some(1.0));
        assert_eq!(s[3].disk_reads_per_statement, Some(0.0));
        assert_eq!(s[3].vs_one, Some(2.5));
        assert!((s[3].published_vs_one.unwrap() - 5702.0 / 2231.0).abs() < 1e-9);
    }
}
