//! `sluice bench shard` end to end, in miniature: the real binary starts one instance,
//! then three, loads each with its range of the table, drives sysbench through Sluice
//! (and straight at the single instance) and writes its report. This checks the facts
//! the figures rest on (placement, every instance serving, no errors, one database
//! through Sluice), not the figures themselves (see docs/BENCHMARKS.md).

use std::time::Duration;

use serde_json::Value;

use crate::support::proxy::{run_sluice_within, SLUICE_BIN};

#[test]
fn the_shard_benchmark_spreads_one_database_over_its_instances() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    // Generous: servers start slower while other tests load the machine.
    let output = run_sluice_within(
        &[
            "bench",
            "shard",
            "--instances",
            "1,3",
            "--threads",
            "4",
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--tables",
            "2",
            "--table-size",
            "3000",
            "--buffer-pool-mib",
            "6",
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

    // Each instance holds only its range of every table, and Sluice shows one table.
    let topologies = r["topologies"].as_array().unwrap();
    assert_eq!(topologies.len(), 2, "{r}");
    let three = &topologies[1];
    assert_eq!(three["instances"], 3, "{three}");
    let placement = three["placement"].as_array().unwrap();
    assert_eq!(placement.len(), 3 * 2, "{three}");
    for p in placement {
        let instance: u64 = p["instance"].as_str().unwrap()[2..].parse().unwrap();
        let (lo, hi) = (1 + (instance - 1) * 1000, instance * 1000);
        assert_eq!(p["rows"], 1000, "{p}");
        assert_eq!(p["held"], serde_json::json!([lo, hi]), "{p}");
    }
    for t in topologies {
        assert_eq!(
            t["rows_through_sluice"],
            serde_json::json!([3000, 3000]),
            "{t}"
        );
    }

    // Every run measured, none with errors; through Sluice every instance served.
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{r}");
    for (instances, path) in [(1, "direct"), (1, "sluice"), (3, "sluice")] {
        let run = runs
            .iter()
            .find(|x| x["instances"] == instances && x["path"] == path)
            .unwrap_or_else(|| panic!("no {path} run on {instances}: {r}"));
        assert!(run["tps"].as_f64().unwrap() > 0.0, "{run}");
        assert_eq!(run["errors"], 0, "{run}");
        assert!(run["failure"].is_null(), "{run}");
        let per_instance = run["per_instance"].as_array().unwrap();
        assert_eq!(per_instance.len(), instances, "{run}");
        for load in per_instance {
            assert!(load["stmt_executes"].as_u64().unwrap() > 0, "{run}");
        }
    }
    let summary = r["summary"].as_array().unwrap();
    let one = summary
        .iter()
        .find(|s| s["instances"] == 1 && s["path"] == "sluice")
        .unwrap();
    assert_eq!(one["published_tps"], 2231.0, "{one}");

    // The other report files are there and readable.
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    assert!(md.contains("| 3 | sluice | 4 |"), "{md}");
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.contains("shard"), "{html}");
    assert!(out.path().join("results.csv").exists());

    // The benchmark crate cannot validate the configuration it writes (it does not
    // depend on the proxy); the proxy's own check does it here.
    for n in [1, 3] {
        let config = out.path().join(format!("sluice-{n}.toml"));
        let check = run_sluice_within(
            &["check-config", config.to_str().unwrap()],
            Duration::from_secs(10),
        );
        assert_eq!(check.code, Some(0), "{}", check.stderr);
    }
}
