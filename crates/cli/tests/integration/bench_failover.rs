//! `sluice bench failover` end to end, in miniature: the real binary starts a primary
//! with two replicas and Sluice in front, loads it with sysbench and the probes, kills
//! the primary and writes its results. This checks that a failover happened and was
//! measured, and that no acknowledged probe write was lost or applied twice; not the
//! errors clients got, nor the pause (those are what the benchmark reports, see
//! docs/BENCHMARKS.md). With two instances, that the fleet promoted one replica, once.

use std::time::Duration;

use serde_json::Value;

use crate::support::proxy::{run_sluice_within, SLUICE_BIN};

/// Runs the benchmark in miniature (one run, small sizes, `extra` flags) into `out`;
/// what it printed, once it has succeeded.
fn miniature(out: &std::path::Path, extra: &[&str], within: Duration) -> String {
    let mut args = vec!["bench", "failover", "--demo"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--runs",
        "1",
        "--threads",
        "2",
        "--tables",
        "1",
        "--table-size",
        "100",
        "--kill-after",
        "2s",
        "--after",
        "2s",
        "--sluice-bin",
        SLUICE_BIN,
        "--out",
        out.to_str().unwrap(),
    ]);
    let output = run_sluice_within(&args, within);
    let said = format!(
        "--- stdout\n{}\n--- stderr\n{}",
        output.stdout, output.stderr
    );
    assert_eq!(output.code, Some(0), "{said}");
    said
}

#[test]
fn the_failover_benchmark_kills_the_primary_and_counts_the_writes() {
    let out = tempfile::tempdir().unwrap();
    // Generous: servers start slower while other tests load the machine.
    let said = miniature(out.path(), &[], Duration::from_secs(180));
    for file in ["results.md", "results.json", "results.csv", "report.html"] {
        assert!(out.path().join(file).is_file(), "{file} missing\n{said}");
    }
    for file in ["sysbench-run1.txt", "sluice-run1.log", "sluice-run1.toml"] {
        assert!(
            out.path().join("raw").join(file).is_file(),
            "raw/{file} missing\n{said}"
        );
    }
    let json = std::fs::read_to_string(out.path().join("results.json")).expect("results.json");
    let r: Value = serde_json::from_str(&json).expect("results.json is JSON");
    assert!(r["error"].is_null(), "{r}");
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{r}");
    let run = &runs[0];
    assert!(run["failure"].is_null(), "{run}");
    let writer = run["new_writer"].as_str().unwrap_or_default();
    assert!(
        ["replica1", "replica2"].contains(&writer),
        "the failover happened: {run}"
    );
    assert!(run["failover_took_ms"].as_u64().is_some(), "{run}");
    assert!(run["write_pause_ms"].as_u64().is_some(), "{run}");
    assert!(run["probe_writes_acked"].as_u64().unwrap() > 0, "{run}");
    assert!(run["probe_transactions"].as_u64().unwrap() > 0, "{run}");
    assert!(
        run["sysbench"]["transactions"].as_u64().unwrap() > 0,
        "{run}"
    );
    assert_eq!(run["acked_lost"], 0, "{run}");
    assert_eq!(run["applied_twice"], 0, "{run}");
    assert!(run["passed"].is_boolean(), "{run}");
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    assert!(md.contains("runs with no client error"), "{md}");

    // The benchmark crate cannot validate the configuration it writes (it does not
    // depend on the proxy); the proxy's own check does it here.
    let config = out.path().join("raw/sluice-run1.toml");
    let check = run_sluice_within(
        &["check-config", config.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(check.code, Some(0), "{}", check.stderr);
}

#[test]
fn the_failover_benchmark_with_two_instances_counts_one_promotion() {
    let out = tempfile::tempdir().unwrap();
    // The same miniature as above, with a second Sluice and its sysbench.
    let said = miniature(out.path(), &["--instances", "2"], Duration::from_secs(240));
    for file in [
        "sysbench-run1-2.txt",
        "sluice-run1-1.log",
        "sluice-run1-2.toml",
    ] {
        assert!(
            out.path().join("raw").join(file).is_file(),
            "raw/{file} missing\n{said}"
        );
    }
    let json = std::fs::read_to_string(out.path().join("results.json")).expect("results.json");
    let r: Value = serde_json::from_str(&json).expect("results.json is JSON");
    assert_eq!(r["instances"], 2, "{r}");
    let run = &r["runs"][0];
    assert!(run["failure"].is_null(), "{run}");
    let fleet = &run["fleet"];
    assert_eq!(fleet["promotions"], 1, "one promotion in all: {run}");
    assert_eq!(
        fleet["writable"].as_array().map(Vec::len),
        Some(1),
        "one writable server: {run}"
    );
    assert_eq!(fleet["writable"][0], run["new_writer"], "{run}");
    assert_eq!(run["acked_lost"], 0, "{run}");
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    assert!(md.contains("| promotions | writable servers |"), "{md}");
    assert!(
        md.contains("1 of 1 measured runs with exactly one promotion"),
        "{md}"
    );
}
