//! Summaries, ratios and how every output file reads.

use super::*;
use crate::sysbench::parse_run;

pub(crate) fn report() -> Report {
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
        sysbench_version: Some("sysbench 1.0.20".into()),
        mysqlslap_version: None,
        topology: vec![],
        settings: Settings {
            scenarios: vec![Scenario::Direct, Scenario::Passthrough],
            unavailable: vec![],
            workloads: vec![Workload::OltpReadOnly],
            ps_modes: vec![PsMode::Auto],
            threads: vec![1, 16],
            duration_secs: 3,
            repeat: 3,
            data: DataSet {
                tables: 2,
                table_size: 1000,
            },
            insert: None,
        },
        notes: vec![],
        commands: Commands::default(),
        runs: vec![],
        inserts: vec![],
        summary: vec![],
        insert_summary: vec![],
        staleness: None,
    }
}

fn stats(qps: f64, avg: f64) -> RunStats {
    let mut s = parse_run(include_str!("../testdata/run_read_only_ps_auto.txt")).unwrap();
    s.queries_per_sec = qps;
    s.latency_avg_ms = avg;
    s
}

pub(crate) fn record(
    threads: u32,
    scenario: Scenario,
    rep: u32,
    outcome: Outcome<RunStats>,
) -> RunRecord {
    RunRecord {
        workload: Workload::OltpReadOnly,
        ps_mode: PsMode::Auto,
        threads,
        scenario,
        repetition: rep,
        command: format!("sysbench oltp_read_only --threads={threads} run # {scenario}"),
        output_file: None,
        spans: None,
        outcome,
    }
}

pub(crate) fn ok(qps: f64, avg: f64, cpu: Option<f64>) -> Outcome<RunStats> {
    Outcome::Ok {
        stats: stats(qps, avg),
        sluice_cpu_us_per_query: cpu,
    }
}

fn insert(per_trx: u32, scenario: Scenario, rows_per_sec: Option<f64>) -> InsertRecord {
    InsertRecord {
        per_trx,
        scenario,
        repetition: 1,
        command: format!("mysqlslap --commit={per_trx} # {scenario}"),
        output_file: None,
        outcome: match rows_per_sec {
            Some(r) => Outcome::Ok {
                stats: InsertStats {
                    rows: 16_000,
                    clients: 16,
                    seconds: 16_000.0 / r,
                    rows_per_sec: r,
                },
                sluice_cpu_us_per_query: (scenario != Scenario::Direct).then_some(12.5),
            },
            None => Outcome::Failed {
                error: "mysqlslap exited with status 1: Lost connection".into(),
            },
        },
    }
}

#[test]
fn medians_and_ratios() {
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
    assert_eq!(d.reads, Some(108990.0));
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
    assert_eq!(s.avg_latency_ratio_vs_direct, Some(4.0));
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
            reason: "its Sluice exited during an earlier run".into(),
        },
    ));
    r.status = Status::Aborted("interrupted".into());
    r.summarize();
    assert_eq!(r.runs_not_ok(), 2);
    let md = render::document(&r).markdown();
    assert!(
        md.contains("| 1 | 36,303 | FAILED | — |"),
        "throughput row: {md}"
    );
    assert!(
        md.contains("| 1 | 0.77 | FAILED | — |"),
        "latency row: {md}"
    );
    assert!(md.contains("| 16 | 50,000 | skipped | — |"), "{md}");
    assert!(
        md.contains("- passthrough at 1: FAILED: oltp_read_only: sysbench exited with status 1"),
        "{md}"
    );
    assert!(
        md.contains("- passthrough at 16: skipped: its Sluice exited during an earlier run"),
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
        "oltp_read_only,auto,1,,direct,1,0,36303.36,2593.10,108990,,0.77,1.12,0,,,,,"
    );
    assert!(
        lines[2].starts_with("oltp_read_only,auto,1,,passthrough,0,1,,,,,,,,,,,,FAILED:"),
        "{}",
        lines[2]
    );
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(json["runs"][1]["status"], "failed");
    assert_eq!(json["runs"][0]["stats"]["queries"], 108990);
    assert_eq!(json["runs"][0]["stats"]["reads"], 108990);
    assert_eq!(json["status"]["state"], "aborted");
}

#[test]
fn an_unavailable_scenario_reads_na_everywhere() {
    let mut r = report();
    r.settings.scenarios.push(Scenario::Cached);
    r.settings.unavailable.push(Unavailable {
        scenario: Scenario::Cached,
        reason: "this Sluice has no query cache yet".into(),
    });
    r.runs
        .push(record(1, Scenario::Direct, 1, ok(1000.0, 1.0, None)));
    r.runs.push(record(
        1,
        Scenario::Passthrough,
        1,
        ok(800.0, 1.25, Some(20.0)),
    ));
    r.status = Status::Finished;
    r.summarize();
    // Never attempted: not a failure.
    assert_eq!(r.runs_not_ok(), 0);
    let sections = render::sections(&r);
    let md = render::document(&r).markdown();
    assert!(
        md.contains(
            "| threads | direct | passthrough | cached | passthrough ÷ direct | cached ÷ direct \
             | cached ÷ passthrough |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| 1 | 1,000 | 800 | n/a | 0.80 | — | — |"),
        "{md}"
    );
    // One note for the whole ramp, not one per step.
    assert_eq!(
        md.matches("cached: n/a: this Sluice has no query cache yet")
            .count(),
        sections.len()
    );
    assert!(md.contains("cached: not available: this Sluice has no query cache yet"));
    // Charts leave the unavailable scenario out rather than drawing an empty line.
    assert!(sections[0].charts[0]
        .chart
        .series
        .iter()
        .all(|s| s.name != "cached"));
}

#[test]
fn a_cache_is_set_against_passthrough_too() {
    let mut r = report();
    r.settings.scenarios.push(Scenario::Cached);
    for (scenario, qps) in [
        (Scenario::Direct, 1000.0),
        (Scenario::Passthrough, 800.0),
        (Scenario::Cached, 1200.0),
    ] {
        r.runs.push(record(16, scenario, 1, ok(qps, 1.0, None)));
    }
    r.summarize();
    let row = |sc| r.row(Workload::OltpReadOnly, PsMode::Auto, 16, sc).unwrap();
    assert_eq!(row(Scenario::Cached).qps_ratio_vs_passthrough, Some(1.5));
    assert_eq!(row(Scenario::Cached).qps_ratio_vs_direct, Some(1.2));
    // Only a cache is measured against the proxy without one.
    assert_eq!(row(Scenario::Passthrough).qps_ratio_vs_passthrough, None);
    assert_eq!(row(Scenario::Direct).qps_ratio_vs_passthrough, None);
    let md = render::document(&r).markdown();
    assert!(
        md.contains("| 16 | 1,000 | 800 | 1,200 | 0.80 | 1.20 | 1.50 |"),
        "{md}"
    );
    // Latency has ratios to direct only.
    assert!(
        md.contains("| 16 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 |\n"),
        "{md}"
    );
    assert!(
        r.csv()
            .contains("\noltp_read_only,auto,16,,cached,1,0,1200.00,"),
        "{}",
        r.csv()
    );
    assert!(r.csv().contains(",1.2000,1.0000,1.5000,\n"), "{}", r.csv());
}

#[test]
fn caching_by_table_appears_wherever_cached_does() {
    let mut r = report();
    r.settings.scenarios = vec![
        Scenario::Direct,
        Scenario::Passthrough,
        Scenario::Cached,
        Scenario::CachedByTable,
    ];
    r.settings.workloads = vec![Workload::OltpReadOnly, Workload::Insert];
    r.settings.insert = Some(InsertSettings {
        clients: 16,
        rows: 16_000,
        per_trx: vec![1],
    });
    for (scenario, qps, cpu) in [
        (Scenario::Direct, 1000.0, None),
        (Scenario::Passthrough, 800.0, Some(20.0)),
        (Scenario::Cached, 1200.0, Some(12.0)),
        (Scenario::CachedByTable, 600.0, Some(30.0)),
    ] {
        r.runs.push(record(16, scenario, 1, ok(qps, 1.0, cpu)));
    }
    r.summarize();
    let row = |sc| r.row(Workload::OltpReadOnly, PsMode::Auto, 16, sc).unwrap();
    let by_table = row(Scenario::CachedByTable);
    assert_eq!(by_table.qps_ratio_vs_direct, Some(0.6));
    assert_eq!(by_table.qps_ratio_vs_passthrough, Some(0.75));
    // A cache has no part in the insert series.
    assert_eq!(
        r.settings.insert_scenarios(),
        [Scenario::Direct, Scenario::Passthrough]
    );
    let sections = render::sections(&r);
    let md = crate::document::markdown_sections(&sections);
    assert!(
        md.contains(
            "| threads | direct | passthrough | cached | cached-by-table | passthrough ÷ \
             direct | cached ÷ direct | cached-by-table ÷ direct | cached ÷ passthrough | \
             cached-by-table ÷ passthrough |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| 16 | 1,000 | 800 | 1,200 | 600 | 0.80 | 1.20 | 0.60 | 1.50 | 0.75 |"),
        "{md}"
    );
    assert!(
        md.contains("| cached-by-table: Sluice CPU µs/query |"),
        "{md}"
    );
    assert!(
        md.contains("| 20.0 | 12.0 | 30.0 | 0 | 0 | 0 | 0 |"),
        "{md}"
    );
    for chart in &sections[0].charts {
        let names: Vec<&str> = chart.chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["direct", "passthrough", "cached", "cached-by-table"],
            "{}",
            chart.file_stem
        );
    }
    let csv = r.csv();
    assert!(
        csv.contains("\noltp_read_only,auto,16,,cached-by-table,1,0,600.00,"),
        "{csv}"
    );
    assert!(csv.contains(",0.6000,1.0000,0.7500,\n"), "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(json["settings"]["scenarios"][3], "cached_by_table");
    // Threads 1 (not run), then 16: direct, passthrough, cached, cached_by_table.
    assert_eq!(json["summary"][7]["scenario"], "cached_by_table");
    assert_eq!(json["summary"][7]["qps_ratio_vs_passthrough"], 0.75);
    let facts = render::document(&r).facts.join("\n");
    assert!(facts.contains("`by_key = false`"), "{facts}");
}

#[test]
fn insert_series_summary_and_table() {
    let mut r = report();
    r.settings.workloads = vec![Workload::Insert];
    r.settings.scenarios = vec![Scenario::Direct, Scenario::Passthrough, Scenario::Cached];
    r.settings.insert = Some(InsertSettings {
        clients: 16,
        rows: 16_000,
        per_trx: vec![1, 10],
    });
    r.inserts.push(insert(1, Scenario::Direct, Some(8000.0)));
    r.inserts
        .push(insert(1, Scenario::Passthrough, Some(6000.0)));
    r.inserts.push(insert(10, Scenario::Direct, Some(16000.0)));
    r.inserts.push(insert(10, Scenario::Passthrough, None));
    r.summarize();
    assert!(r.summary.is_empty());
    // No cached rows: a cache has nothing to serve to inserts.
    assert_eq!(r.insert_summary.len(), 4);
    let p = r.insert_row(1, Scenario::Passthrough).unwrap();
    assert_eq!(p.ratio_vs_direct, Some(0.75));
    assert_eq!(p.sluice_cpu_us_per_insert, Some(12.5));
    assert_eq!(p.seconds, Some(16_000.0 / 6000.0));
    assert!(r
        .insert_row(10, Scenario::Passthrough)
        .unwrap()
        .missing
        .as_deref()
        .unwrap()
        .starts_with("FAILED: mysqlslap exited"));
    let sections = render::sections(&r);
    assert_eq!(sections.len(), 1);
    let md = crate::document::markdown_sections(&sections);
    assert!(
        md.contains("| 1 | 8,000 | 6,000 | 0.75 | 2.00 | 2.67 | 12.5 |"),
        "{md}"
    );
    assert!(
        md.contains("| 10 | 16,000 | FAILED | — | 1.00 | FAILED | FAILED |"),
        "{md}"
    );
    let csv = r.csv();
    assert!(
        csv.contains("\ninsert,,16,1,passthrough,1,0,,,,6000.00,2666.67,,,12.50,0.7500,,,\n"),
        "{csv}"
    );
}

#[test]
fn write_produces_every_file_and_a_self_contained_page() {
    let mut r = report();
    r.runs
        .push(record(1, Scenario::Direct, 1, ok(1000.0, 1.0, None)));
    r.runs.push(record(
        1,
        Scenario::Passthrough,
        1,
        ok(800.0, 1.25, Some(20.0)),
    ));
    r.runs
        .push(record(16, Scenario::Direct, 1, ok(4000.0, 4.0, None)));
    r.runs.push(record(
        16,
        Scenario::Passthrough,
        1,
        ok(3000.0, 5.3, Some(25.0)),
    ));
    r.notes.push("a <note> & more".into());
    let dir = tempfile::tempdir().unwrap();
    let paths = r.write(dir.path()).unwrap();
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["results.md", "results.json", "results.csv", "report.html"]
    );
    let mut charts: Vec<String> = std::fs::read_dir(dir.path().join("charts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    charts.sort();
    assert_eq!(
        charts,
        [
            "oltp_read_only-auto-avg-latency.svg",
            "oltp_read_only-auto-p95-latency.svg",
            "oltp_read_only-auto-qps.svg"
        ]
    );
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    // Everything inline: no scripts, stylesheets or images fetched from anywhere.
    for outside in ["<script", "<link", "src=", "http://", "https://"] {
        let allowed = html.matches("http://www.w3.org/2000/svg").count();
        if outside == "http://" {
            assert_eq!(html.matches(outside).count(), allowed, "{outside}");
        } else {
            assert!(!html.contains(outside), "{outside}");
        }
    }
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(html.contains("<td>800</td>"), "{html}");
    assert!(html.contains("a &lt;note&gt; &amp; more"));
    assert!(!html.contains("<note>"));
    let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
    assert!(md.contains("![oltp_read_only, prepared statements: throughput](charts/oltp_read_only-auto-qps.svg)"), "{md}");
    let qps =
        std::fs::read_to_string(dir.path().join("charts/oltp_read_only-auto-qps.svg")).unwrap();
    assert!(qps.contains("passthrough") && qps.contains("direct"));
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

#[test]
fn each_sluice_is_set_against_haproxy_in_cpu_per_query() {
    let mut r = report();
    r.settings.scenarios = vec![
        Scenario::Direct,
        Scenario::Haproxy,
        Scenario::Passthrough,
        Scenario::Cached,
    ];
    for (scenario, qps, cpu) in [
        (Scenario::Direct, 1000.0, None),
        (Scenario::Haproxy, 900.0, Some(10.0)),
        (Scenario::Passthrough, 800.0, Some(20.0)),
        (Scenario::Cached, 1200.0, Some(5.0)),
    ] {
        r.runs.push(record(16, scenario, 1, ok(qps, 1.0, cpu)));
    }
    r.summarize();
    let row = |sc| r.row(Workload::OltpReadOnly, PsMode::Auto, 16, sc).unwrap();
    assert_eq!(row(Scenario::Passthrough).cpu_ratio_vs_haproxy, Some(2.0));
    assert_eq!(row(Scenario::Cached).cpu_ratio_vs_haproxy, Some(0.5));
    assert_eq!(row(Scenario::Haproxy).cpu_ratio_vs_haproxy, None);
    assert_eq!(row(Scenario::Direct).cpu_ratio_vs_haproxy, None);
    // HAProxy is not a cache: no ratio over pass-through for it.
    assert_eq!(row(Scenario::Haproxy).qps_ratio_vs_passthrough, None);
    assert_eq!(row(Scenario::Haproxy).qps_ratio_vs_direct, Some(0.9));
    let md = crate::document::markdown_sections(&render::sections(&r));
    assert!(
        md.contains("**CPU time per query of each proxy, and errors**"),
        "{md}"
    );
    assert!(
        md.contains(
            "| threads | haproxy: HAProxy CPU µs/query | passthrough: Sluice CPU µs/query | \
             cached: Sluice CPU µs/query | passthrough CPU ÷ haproxy | cached CPU ÷ haproxy |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| 16 | 10.0 | 20.0 | 5.0 | 2.00 | 0.50 |"),
        "{md}"
    );
    // Without HAProxy in the run, the table is as it was.
    let mut r = report();
    r.runs.push(record(
        16,
        Scenario::Passthrough,
        1,
        ok(800.0, 1.0, Some(20.0)),
    ));
    r.summarize();
    let md = crate::document::markdown_sections(&render::sections(&r));
    assert!(
        md.contains("**Sluice CPU time per query, and errors**"),
        "{md}"
    );
    assert!(!md.contains("÷ haproxy"), "{md}");
}

#[test]
fn multiplexing_is_set_against_a_dedicated_sluice_in_cpu_per_query() {
    let mut r = report();
    r.settings.threads = vec![1, 16];
    r.settings.scenarios = vec![
        Scenario::Direct,
        Scenario::Haproxy,
        Scenario::Passthrough,
        Scenario::Dedicated,
    ];
    for (threads, scenario, qps, cpu) in [
        (16, Scenario::Direct, 1000.0, None),
        (16, Scenario::Haproxy, 900.0, Some(10.0)),
        (16, Scenario::Passthrough, 800.0, Some(24.0)),
        (16, Scenario::Dedicated, 850.0, Some(20.0)),
        // Measured with no process to read: no ratio either.
        (1, Scenario::Passthrough, 100.0, Some(30.0)),
        (1, Scenario::Dedicated, 110.0, None),
    ] {
        r.runs.push(record(threads, scenario, 1, ok(qps, 1.0, cpu)));
    }
    r.summarize();
    let row = |t, sc| r.row(Workload::OltpReadOnly, PsMode::Auto, t, sc).unwrap();
    assert_eq!(
        row(16, Scenario::Passthrough).cpu_ratio_vs_dedicated,
        Some(1.2)
    );
    assert_eq!(row(1, Scenario::Passthrough).cpu_ratio_vs_dedicated, None);
    // Only the multiplexing Sluice is set against it.
    for sc in [Scenario::Direct, Scenario::Haproxy, Scenario::Dedicated] {
        assert_eq!(row(16, sc).cpu_ratio_vs_dedicated, None, "{sc}");
    }
    // A Sluice is set against HAProxy as ever, dedicated included.
    assert_eq!(row(16, Scenario::Dedicated).cpu_ratio_vs_haproxy, Some(2.0));
    assert_eq!(row(16, Scenario::Dedicated).qps_ratio_vs_direct, Some(0.85));
    assert_eq!(row(16, Scenario::Dedicated).qps_ratio_vs_passthrough, None);
    // Not a cache: it has its turn in the insert series.
    assert!(r.settings.insert_scenarios().contains(&Scenario::Dedicated));
    let md = crate::document::markdown_sections(&render::sections(&r));
    assert!(
        md.contains(
            "| threads | haproxy: HAProxy CPU µs/query | passthrough: Sluice CPU µs/query | \
             dedicated: Sluice CPU µs/query | passthrough CPU ÷ haproxy | dedicated CPU ÷ \
             haproxy | multiplexed CPU ÷ dedicated | direct: errors |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| 16 | 10.0 | 24.0 | 20.0 | 2.40 | 2.00 | 1.20 | 0 |"),
        "{md}"
    );
    assert!(md.contains("| 1 | — | 30.0 | — | — | — | — | — |"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    // Threads 1, then 16: direct, haproxy, passthrough, dedicated.
    assert_eq!(json["summary"][6]["scenario"], "passthrough");
    assert_eq!(json["summary"][6]["cpu_ratio_vs_dedicated"], 1.2);
    assert_eq!(
        json["summary"][2]["cpu_ratio_vs_dedicated"],
        serde_json::Value::Null
    );
    assert_eq!(json["summary"][7]["scenario"], "dedicated");
    assert_eq!(
        json["summary"][7]["cpu_ratio_vs_dedicated"],
        serde_json::Value::Null
    );
    let facts = render::document(&r).facts.join("\n");
    assert!(facts.contains("`multiplex = false`"), "{facts}");
    // Without dedicated in the run, no such column.
    r.settings.scenarios.retain(|s| *s != Scenario::Dedicated);
    r.runs.retain(|x| x.scenario != Scenario::Dedicated);
    r.summarize();
    let md = crate::document::markdown_sections(&render::sections(&r));
    assert!(!md.contains("÷ dedicated"), "{md}");
    assert_eq!(
        r.row(
            Workload::OltpReadOnly,
            PsMode::Auto,
            16,
            Scenario::Passthrough
        )
        .unwrap()
        .cpu_ratio_vs_dedicated,
        None
    );
}
