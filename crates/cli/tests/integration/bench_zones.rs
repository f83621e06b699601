//! `sluice bench zones` end to end, in miniature: the real binary starts a primary and
//! three replicas, reaches each through a delay link of its zone, and drives sysbench
//! straight at the primary and through a Sluice per mode, the client beside Sluice and
//! one hop away. This checks the facts the figures rest on (no errors, the nearest
//! runs' reads on the replica of Sluice's zone, the primary runs' on the primary, the
//! report and valid configurations), not the figures themselves (see
//! docs/BENCHMARKS.md).

use std::time::Duration;

use serde_json::Value;

use crate::support::proxy::{run_sluice_within, SLUICE_BIN};

/// The SELECTs each server ran in `run` (less what Sluice idle runs there), by name.
fn selects(run: &Value, name: &str) -> u64 {
    run["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["selects"].as_u64())
        .unwrap_or_else(|| panic!("no SELECTs counted on {name}: {run}"))
}

const SERVERS: [&str; 4] = ["primary", "replica1", "replica2", "replica3"];

#[test]
fn the_zones_benchmark_reads_from_the_replica_of_its_zone() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    // Generous: servers start slower while other tests load the machine.
    let output = run_sluice_within(
        &[
            "bench",
            "zones",
            "--threads",
            "2",
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
        Duration::from_secs(240),
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

    let servers = r["servers"].as_array().unwrap();
    let zones: Vec<(&str, &str)> = servers
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["zone"].as_str().unwrap()))
        .collect();
    assert_eq!(
        zones,
        [
            ("primary", "b"),
            ("replica1", "a"),
            ("replica2", "b"),
            ("replica3", "c")
        ]
    );
    assert_eq!(servers[0]["role"], "writer", "{r}");
    assert!(r["relay_cost_us"].as_f64().is_some(), "{r}");

    // Every mode and placement measured once, none with an error.
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 7, "{r}");
    for run in runs {
        assert!(run["failure"].is_null(), "{run}");
        assert_eq!(run["errors"], 0, "{run}");
        assert!(run["tps"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["links"]["chunks"].as_u64().unwrap() > 0, "{run}");
    }
    let through = |mode: &'static str| runs.iter().filter(move |x| x["mode"] == mode);
    assert_eq!(through("direct").count(), 1, "{r}");
    for mode in ["primary", "nearest", "spread"] {
        let placements: Vec<&str> = through(mode)
            .map(|x| x["placement"].as_str().unwrap())
            .collect();
        assert_eq!(placements, ["colocated", "client_hop"], "{mode}: {r}");
    }

    // nearest: the replica of Sluice's zone ran the reads; primary: the primary did.
    for run in through("nearest") {
        let all: u64 = SERVERS.iter().map(|name| selects(run, name)).sum();
        let near = selects(run, "replica1");
        assert!(near > 0, "{run}");
        assert!(near as f64 >= 0.99 * all as f64, "{run}");
    }
    for run in through("primary").chain(through("direct")) {
        let all: u64 = SERVERS.iter().map(|name| selects(run, name)).sum();
        let primary = selects(run, "primary");
        assert!(primary > 0, "{run}");
        assert!(primary as f64 >= 0.99 * all as f64, "{run}");
    }
    let comparison = r["comparison"].as_array().unwrap();
    assert_eq!(comparison.len(), 2, "{r}");
    assert_eq!(comparison[0]["published_ratio"], 1.5, "{r}");
    assert!(comparison[0]["ratio"].as_f64().unwrap() > 0.0, "{r}");

    // The report files are there and readable.
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    assert!(md.contains("nearest ÷ primary"), "{md}");
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.contains("<svg"), "{html}");
    assert!(out.path().join("results.csv").is_file());
    assert!(out.path().join("charts/zones-tps.svg").is_file());

    // The benchmark crate cannot validate the configurations it writes (it does not
    // depend on the proxy); the proxy's own check does it here.
    for mode in ["primary", "nearest", "spread"] {
        let config = out.path().join(format!("sluice-{mode}.toml"));
        let check = run_sluice_within(
            &["check-config", config.to_str().unwrap()],
            Duration::from_secs(10),
        );
        assert_eq!(check.code, Some(0), "{mode}: {}", check.stderr);
    }
}
