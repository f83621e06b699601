//! `sluice bench galera` end to end, in miniature: the real binary starts a plain
//! MariaDB and a two-node Galera cluster, runs mysqlslap straight at them and through
//! Sluice, then the flow-control part on a second two-node cluster with one node
//! throttled and its table read-locked. This checks that every run inserted exactly the
//! rows asked for, that the throttled node really sent flow control, and that the report
//! is complete, not the figures (those come from the benchmark itself, see
//! docs/BENCHMARKS.md).

use std::time::Duration;

use serde_json::Value;

use crate::support::proxy::{run_sluice_within, SLUICE_BIN};

#[test]
fn the_galera_benchmark_inserts_every_row_and_reports_flow_control() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    // Generous: clusters start slower while other tests load the machine.
    let output = run_sluice_within(
        &[
            "bench",
            "galera",
            "--nodes",
            "2",
            "--rows",
            "320",
            "--trx",
            "1,100",
            "--flow-nodes",
            "2",
            "--flow-rows",
            "800",
            "--flow-lock",
            "1s",
            "--sluice-bin",
            SLUICE_BIN,
            "--out",
            out_dir,
        ],
        Duration::from_secs(240),
    );
    assert_eq!(
        output.code,
        Some(0),
        "--- stdout\n{}\n--- stderr\n{}",
        output.stdout,
        output.stderr
    );
    for file in ["results.md", "results.json", "results.csv", "report.html"] {
        assert!(out.path().join(file).is_file(), "no {file}");
    }
    for chart in ["galera-inserts.svg", "galera-flow-paused.svg"] {
        assert!(
            out.path().join("charts").join(chart).is_file(),
            "no {chart}"
        );
    }
    let json = std::fs::read_to_string(out.path().join("results.json")).expect("results.json");
    let r: Value = serde_json::from_str(&json).expect("results.json is JSON");
    assert!(r["error"].is_null(), "{r}");

    // MariaDB and Galera 2, two transaction lengths, direct and through Sluice.
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * 2 * 2, "{r}");
    for run in runs {
        assert!(run["failure"].is_null(), "{run}");
        assert_eq!(run["rows_asked"], 320, "{run}");
        assert_eq!(run["rows_inserted"], 320, "{run}");
        assert!(run["rows_per_sec"].as_f64().unwrap() > 0.0, "{run}");
        let nodes = if run["topology"] == "MariaDB" { 1 } else { 2 };
        let local = run["local_per_node"].as_array().unwrap();
        assert_eq!(local.len(), nodes, "{run}");
        // Every write went somewhere: at least the rows' transactions.
        let total: u64 = local.iter().map(|n| n.as_u64().unwrap()).sum();
        let per_trx = run["per_trx"].as_u64().unwrap();
        assert!(total >= 320 / per_trx, "{run}");
    }
    let summary = r["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 4, "{r}");
    let single = summary
        .iter()
        .find(|s| s["nodes"] == 0 && s["per_trx"] == 1)
        .unwrap();
    assert_eq!(single["direct_vs_single"], 1.0, "{single}");
    assert_eq!(single["published_rows_per_sec"], 8340.0, "{single}");

    let flow = &r["flow"];
    assert_eq!(flow["throttled"], "node2", "{flow}");
    assert!(
        flow["throttled_fc_limit"]
            .as_str()
            .is_some_and(|o| o.replace(' ', "") == "gcs.fc_limit=1"),
        "{flow}"
    );
    let flow_runs = flow["runs"].as_array().unwrap();
    let writers: Vec<&str> = flow_runs
        .iter()
        .map(|x| x["writers"].as_str().unwrap())
        .collect();
    assert_eq!(writers, ["all", "one"], "{flow}");
    for run in flow_runs {
        assert!(run["failure"].is_null(), "{run}");
        assert_eq!(run["rows_inserted"], 800, "{run}");
        // Granted before mysqlslap started, released by its holder a second later (as
        // the benchmark reads the holder's output lines, either may be seen a little late).
        let from = run["locked_from"].as_f64().unwrap();
        let until = run["locked_until"].as_f64().unwrap();
        assert!(until - from >= 0.9, "{run}");
        let nodes = run["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 2, "{run}");
        // The locked node stayed synced and asked the cluster to pause, and the other
        // node was paused: flow control, not a desynced node.
        assert_eq!(nodes[1]["states"], serde_json::json!([4]), "{run}");
        assert!(nodes[1]["fc_sent"].as_u64().unwrap() > 0, "{run}");
        assert!(nodes[0]["fc_recv"].as_u64().unwrap() > 0, "{run}");
        assert!(nodes[0]["paused_ms"].as_f64().unwrap() > 0.0, "{run}");
        assert!(!run["samples"].as_array().unwrap().is_empty(), "{run}");
    }
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    assert!(md.contains("| MariaDB | 1 | "), "{md}");
    assert!(md.contains("Flow control: one node throttled"), "{md}");

    // The benchmark crate cannot validate the configurations it writes (it does not
    // depend on the proxy); the proxy's own check does it here.
    for config in [
        "sluice-galera2.toml",
        "sluice-flow-all.toml",
        "sluice-flow-one.toml",
    ] {
        let path = out.path().join(config);
        let check = run_sluice_within(
            &["check-config", path.to_str().unwrap()],
            Duration::from_secs(10),
        );
        assert_eq!(check.code, Some(0), "{config}: {}", check.stderr);
    }
}
