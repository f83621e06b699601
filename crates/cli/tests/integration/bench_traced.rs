//! `sluice bench cache` beyond its thread ramp: the traced scenarios (pass-through
//! Sluices tracing 1% and every statement to a real Jaeger the benchmark starts, set
//! against passthrough with tracing off) and the cache's staleness after a commit made
//! straight on the database. Short runs against real servers; the figures themselves
//! are in docs/BENCHMARKS.md.

use std::time::Duration;

use serde_json::Value;

use crate::bench::{bench, results, rows, stopped_with_the_benchmark, text};
use crate::support::proxy::SLUICE_BIN;

/// One small step: point selects on one table of 100 rows.
const SMALL: [&str; 8] = [
    "--workloads",
    "oltp_point_select",
    "--tables",
    "1",
    "--table-size",
    "100",
    "--sluice-bin",
    SLUICE_BIN,
];

/// A short run of `flags` and [`SMALL`]'s step, which must finish: its report's
/// directory (kept with `dir`), its results and its output.
fn small_run(dir: &tempfile::TempDir, flags: &[&str]) -> (std::path::PathBuf, Value, String) {
    let out = dir.path().join("report");
    let args = [flags, &SMALL].concat();
    let output = bench(&args, &out, Duration::from_secs(180));
    let t = text(&output);
    assert!(output.status.success(), "{t}");
    let r = results(&out);
    assert_eq!(r["status"]["state"], "finished", "{t}");
    (out, r, t)
}

/// The summary row of `scenario` (one step in these runs).
fn summary(r: &Value, scenario: &str) -> Value {
    rows(r, "summary")
        .iter()
        .find(|x| x["scenario"] == scenario)
        .unwrap_or_else(|| panic!("no {scenario} summary: {r}"))
        .clone()
}

/// The traced Sluices take their turn beside passthrough; the one tracing every
/// statement really exports (its /metrics counts spans the receiver accepted); each
/// one's CPU per query is set against passthrough's; the Jaeger the benchmark started
/// is gone with it.
#[test]
fn traced_scenarios_export_to_a_real_receiver() {
    sluice_sandbox::jaeger::jaeger_path().expect("Jaeger for the traced scenarios (make deps)");
    let dir = tempfile::tempdir().unwrap();
    let (out, r, t) = small_run(
        &dir,
        &[
            "--scenarios",
            "passthrough,traced,traced_all",
            "--threads",
            "2",
            "--duration",
            "2s",
        ],
    );
    assert_eq!(rows(&r["settings"], "unavailable").len(), 0, "{t}");
    let order: Vec<&str> = rows(&r, "runs")
        .iter()
        .map(|x| x["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["passthrough", "traced", "traced_all"]);

    let all = summary(&r, "traced_all");
    assert!(all["qps"].as_f64().is_some_and(|q| q > 0.0), "{all}");
    assert_eq!(all["errors"], 0, "{all}");
    // Every statement traced: at least a span for most of them (a full export queue
    // may drop some; they are counted, not hidden).
    assert!(
        all["spans_per_query"].as_f64().is_some_and(|s| s > 0.5),
        "traced_all exported too few spans: {all}\n{t}"
    );
    assert!(all["spans_dropped"].as_u64().is_some(), "{all}");
    for scenario in ["traced", "traced_all"] {
        let row = summary(&r, scenario);
        assert!(
            row["cpu_ratio_vs_passthrough"]
                .as_f64()
                .is_some_and(|c| c > 0.0),
            "{row}"
        );
        assert!(row["qps_ratio_vs_passthrough"].as_f64().is_some(), "{row}");
    }
    let one_percent = summary(&r, "traced");
    assert!(
        one_percent["spans_exported"].as_u64().is_some(),
        "{one_percent}"
    );
    let notes = rows(&r, "notes");
    let end = notes
        .iter()
        .filter_map(Value::as_str)
        .find(|n| n.starts_with("traced-all: Sluice's /metrics at the end"))
        .unwrap_or_else(|| panic!("no span totals among the notes: {t}"));
    assert!(!end.contains(": 0 spans exported"), "{end}");

    let config = std::fs::read_to_string(out.join("sluice-traced-all.toml")).unwrap();
    assert!(config.contains("sample_ratio = 1.0"), "{config}");
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("traced-all CPU ÷ passthrough"), "{md}");
    assert!(md.contains("traced-all: spans/query (dropped)"), "{md}");
    // The receiver stopped with the benchmark.
    stopped_with_the_benchmark(&r, "Trace receiver: Jaeger", &t);
}

/// With the cached scenario, the report says how long a commit made straight on the
/// database stays unseen through the caching Sluice (its binlog reader invalidates the
/// entry) and through passthrough: every sample sees the new value before its timeout
/// (a cache that never invalidated would time out), in every output.
#[test]
fn staleness_after_a_direct_commit_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let (out, r, t) = small_run(
        &dir,
        &[
            "--scenarios",
            "direct,passthrough,cached",
            "--threads",
            "1",
            "--duration",
            "1s",
            "--staleness-samples",
            "20",
            "--staleness-timeout",
            "3s",
        ],
    );
    let staleness = &r["staleness"];
    assert_eq!(staleness["missing"], Value::Null, "{t}");
    assert_eq!(staleness["samples"], 20, "{staleness}");
    let series = rows(staleness, "series");
    let through: Vec<&str> = series
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(through, ["cached", "passthrough"], "{staleness}");
    for s in series {
        assert_eq!(s["timeouts"], 0, "samples timed out: {s}\n{t}");
        assert_eq!(s["seen"], 20, "{s}");
        assert_eq!(s["stopped"], Value::Null, "{s}");
        let figure = |key: &str| s[key].as_f64().unwrap_or_else(|| panic!("no {key}: {s}"));
        let (p50, p99, max) = (figure("p50_ms"), figure("p99_ms"), figure("max_ms"));
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{s}");
        assert!(max < 3000.0, "{s}");
    }
    // Through passthrough the first read after the commit sees it.
    assert_eq!(series[1]["stale_reads_max"], 0, "{staleness}");

    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("Cache staleness after a direct commit"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Cache staleness after a direct commit"));
    let csv = std::fs::read_to_string(out.join("staleness.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.lines().nth(1).unwrap().starts_with("cached,20,0,"),
        "{csv}"
    );
    let config = std::fs::read_to_string(out.join("sluice-cached.toml")).unwrap();
    assert!(config.contains("[cache.binlog]"), "{config}");
}

/// With --replicas, the benchmark's database has replicas and every Sluice lists them:
/// the reads it splits reach them (their Com_select over the steps), while direct stays
/// on the primary.
#[test]
fn replicas_take_the_reads_sluice_splits() {
    let dir = tempfile::tempdir().unwrap();
    let (out, r, t) = small_run(
        &dir,
        &[
            "--replicas",
            "1",
            "--scenarios",
            "direct,passthrough",
            "--threads",
            "2",
            "--duration",
            "2s",
        ],
    );
    assert!(
        rows(&r, "topology")
            .iter()
            .filter_map(Value::as_str)
            .any(|l| l.contains("with 1 replica(s)")),
        "{t}"
    );
    let config = std::fs::read_to_string(out.join("sluice-passthrough.toml")).unwrap();
    assert!(config.contains("name = \"replica1\""), "{config}");
    let note = rows(&r, "notes")
        .iter()
        .filter_map(Value::as_str)
        .find(|n| n.starts_with("Reads each server ran"))
        .unwrap_or_else(|| panic!("no reads by server among the notes: {t}"))
        .to_owned();
    let count = |name: &str| -> u64 {
        let at = note
            .find(&format!("{name} "))
            .unwrap_or_else(|| panic!("{note}"));
        note[at + name.len() + 1..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{note}"))
    };
    let passthrough = summary(&r, "passthrough");
    assert!(passthrough["errors"] == 0, "{passthrough}");
    // Point selects outside transactions: through Sluice, most go to the replica.
    assert!(count("replica1") > 100, "{note}");
    assert!(count("bench") > 0, "{note}");
}
