//! `sluice bench-routing` end to end, in miniature: the real binary starts a primary
//! with two replicas and Sluice in front of them, drives sysbench both ways and writes
//! its results. This checks that both scenarios are measured and that the reads
//! through Sluice land on the replicas, not the figures (those come from the
//! benchmark itself, see docs/BENCHMARKS.md).

use std::time::Duration;

use serde_json::Value;

use crate::support::proxy::{run_sluice_within, SLUICE_BIN};

#[test]
fn the_routing_benchmark_sends_reads_to_the_replicas() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    // Generous: servers start slower while other tests load the machine.
    let output = run_sluice_within(
        &[
            "bench-routing",
            "--threads",
            "4",
            "--duration",
            "3s",
            "--tables",
            "1",
            "--table-size",
            "500",
            "--sluice-bin",
            SLUICE_BIN,
            "--out",
            out_dir,
        ],
        Duration::from_secs(180),
    );
    assert_eq!(
        output.code,
        Some(0),
        "--- stdout\n{}\n--- stderr\n{}",
        output.stdout,
        output.stderr
    );
    let json = std::fs::read_to_string(out.path().join("results.json")).expect("results.json");
    let r: Value = serde_json::from_str(&json).expect("results.json is JSON");
    assert!(r["error"].is_null(), "{r}");
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{r}");
    for scenario in ["direct", "sluice"] {
        let run = runs.iter().find(|x| x["scenario"] == scenario).unwrap();
        assert!(run["qps"].as_f64().unwrap() > 0.0, "{run}");
        assert_eq!(run["errors"], 0, "{run}");
    }
    let through = runs.iter().find(|x| x["scenario"] == "sluice").unwrap();
    let reads = |name: &str| {
        through["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["reads"].as_u64())
            .unwrap_or_else(|| panic!("no reads counted for {name}: {through}"))
    };
    assert_eq!(reads("primary"), 0, "{through}");
    assert!(reads("replica1") > 0, "{through}");
    assert!(reads("replica2") > 0, "{through}");

    let summary = &r["summary"][0];
    assert!(summary["ratio"].as_f64().unwrap() > 0.0, "{summary}");
    let balance = r["balance"].as_array().unwrap();
    assert_eq!(balance.len(), 3, "{r}");
    assert_eq!(balance[1]["expected_share"], 0.5, "{r}");
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    assert!(md.contains("| 4 | replica2 | reader | 1 | 50.0% |"), "{md}");

    // The benchmark crate cannot validate the configuration it writes (it does not
    // depend on the proxy); the proxy's own check does it here.
    let config = out.path().join("sluice.toml");
    let check = run_sluice_within(
        &["check-config", config.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(check.code, Some(0), "{}", check.stderr);
}
