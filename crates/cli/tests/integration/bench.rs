//! `sluice bench` end to end: the real binary drives real sysbench and mysqlslap against
//! real servers and writes its report. Short runs: these check that every workload,
//! scenario and output works and that failures are reported, not the figures (those
//! come from `sluice bench` itself, see docs/BENCHMARKS.md).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use sluice_sandbox::wait_child;

use crate::support::proxy::{User, SLUICE_BIN};
use crate::support::{dedicated_server, free_port, Config, MariaDbOptions, Sluice};

/// Runs `sluice bench cache ARGS --out DIR`, killing it after `limit`.
pub(crate) fn bench(args: &[&str], out: &Path, limit: Duration) -> Output {
    run_bench(&[&["cache"], args].concat(), out, limit)
}

/// Runs `sluice bench ARGS --out DIR`, killing it after `limit`.
fn run_bench(args: &[&str], out: &Path, limit: Duration) -> Output {
    let mut child = Command::new(SLUICE_BIN)
        .arg("bench")
        .args(args)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting sluice bench");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out_reader =
        std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err_reader =
        std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let status = wait_child(&mut child, limit).unwrap();
    if status.is_none() {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let output = Output {
        status,
        stdout: out_reader.join().unwrap().into_bytes(),
        stderr: err_reader.join().unwrap().into_bytes(),
    };
    assert!(
        status.code().is_some(),
        "sluice bench ran over {limit:?} or was killed:\n{}",
        text(&output)
    );
    output
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub(crate) fn results(out: &Path) -> Value {
    let json = std::fs::read_to_string(out.join("results.json")).expect("results.json written");
    serde_json::from_str(&json).expect("results.json is JSON")
}

/// The process the report's topology line starting with `prefix` names (its `(pid N)`)
/// is gone: stopped with the benchmark.
#[track_caller]
pub(crate) fn stopped_with_the_benchmark(results: &Value, prefix: &str, t: &str) {
    let line = rows(results, "topology")
        .iter()
        .filter_map(Value::as_str)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in the topology: {t}"));
    let pid: u32 = line
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "{prefix} ({pid}) still runs after the benchmark"
    );
}

pub(crate) fn rows<'a>(results: &'a Value, key: &str) -> &'a Vec<Value> {
    results[key].as_array().expect("an array")
}

/// The embedded topology (its own MariaDB and Sluice processes) with every workload: a
/// miniature of `make demo` plus the insert series. Every direct and passthrough cell is
/// measured; the cached scenario either runs too or, when this Sluice has no query
/// cache, is reported as not available in every cell without failing the run.
#[test]
fn embedded_run_measures_every_workload_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let output = bench(
        &[
            "--workloads",
            "read_only,point_select,read_write,insert",
            "--threads",
            "1,4",
            "--duration",
            "1s",
            "--tables",
            "2",
            "--table-size",
            "1000",
            "--insert-trx",
            "1,50",
            "--insert-rows",
            "2000",
            "--insert-clients",
            "4",
            "--sluice-bin",
            SLUICE_BIN,
        ],
        &out,
        Duration::from_secs(300),
    );
    assert!(output.status.success(), "{}", text(&output));
    let r = results(&out);
    assert_eq!(r["status"]["state"], "finished", "{}", text(&output));

    let cached_unavailable = rows(&r["settings"], "unavailable")
        .iter()
        .any(|u| u["scenario"] == "cached");
    let summary = rows(&r, "summary");
    // 3 workloads x 2 thread counts x 3 scenarios.
    assert_eq!(summary.len(), 18);
    for row in summary {
        let measured = row["qps"].as_f64().is_some_and(|q| q > 0.0);
        if row["scenario"] == "cached" && cached_unavailable {
            assert!(!measured, "{row}");
            assert!(
                row["missing"].as_str().unwrap().starts_with("n/a: "),
                "{row}"
            );
            continue;
        }
        assert!(measured, "no throughput: {row}\n{}", text(&output));
        assert!(row["reads"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["p95_latency_ms"].as_f64().is_some(), "{row}");
        // Deadlocks between the read-write transactions are the server's doing (sysbench
        // ignores and counts them, direct as well); reads alone never fail.
        if row["workload"] != "oltp_read_write_split" {
            assert_eq!(row["errors"], 0, "{row}");
        }
        if row["scenario"] == "direct" {
            assert!(row["sluice_cpu_us_per_query"].is_null(), "{row}");
        } else {
            // The embedded Sluice is a child process: its CPU time is read from /proc.
            assert!(row["sluice_cpu_us_per_query"].as_f64().is_some(), "{row}");
            assert!(row["qps_ratio_vs_direct"].as_f64().is_some(), "{row}");
        }
    }
    // The read-write workload wrote, and only it did.
    for run in rows(&r, "runs") {
        let writes = run["stats"]["writes"].as_u64().unwrap();
        assert_eq!(
            writes > 0,
            run["workload"] == "oltp_read_write_split",
            "{run}"
        );
    }

    let inserts = rows(&r, "insert_summary");
    assert_eq!(inserts.len(), 4, "{inserts:?}");
    for row in inserts {
        assert_ne!(row["scenario"], "cached");
        assert!(row["rows_per_sec"].as_f64().unwrap() > 0.0, "{row}");
    }

    // Every output file, and the charts of every section.
    for file in [
        "results.md",
        "results.csv",
        "report.html",
        "oltp_read_write_split.lua",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let charts = std::fs::read_dir(out.join("charts")).unwrap().count();
    assert_eq!(charts, 3 * 3 + 1);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 10);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 18 + 4);
    // The terminal gets the tables and where the report is.
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("**Throughput (queries/s)**"), "{stdout}");
    assert!(stdout.contains("**Total reads**"), "{stdout}");
    assert!(
        stdout.contains("**95th percentile latency (ms)**"),
        "{stdout}"
    );
    assert!(stdout.contains("report.html"), "{stdout}");
    // The embedded servers are gone.
    let logs = std::fs::read_to_string(out.join("sluice-passthrough.log")).unwrap();
    assert!(!logs.contains("panicked"), "{logs}");
}

/// The before/after of row-level invalidation in miniature: a third Sluice, caching as
/// the cached one does with `by_key = false`, takes its turn at the step and is in every
/// result. One client, so the read-write transactions cannot deadlock each other and
/// every run must be free of errors.
#[test]
fn caching_by_table_takes_its_turn_beside_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let output = bench(
        &[
            "--scenarios",
            "direct,passthrough,cached,cached_by_table",
            "--workloads",
            "oltp_read_write_split",
            "--threads",
            "1",
            "--duration",
            "2s",
            "--tables",
            "1",
            "--table-size",
            "100",
            "--sluice-bin",
            SLUICE_BIN,
        ],
        &out,
        Duration::from_secs(120),
    );
    let t = text(&output);
    assert!(output.status.success(), "{t}");
    let r = results(&out);
    assert_eq!(r["status"]["state"], "finished", "{t}");
    assert_eq!(rows(&r["settings"], "unavailable").len(), 0, "{t}");
    let runs = rows(&r, "runs");
    let order: Vec<&str> = runs
        .iter()
        .map(|x| x["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["direct", "passthrough", "cached", "cached_by_table"]
    );
    let run = &runs[3];
    assert_eq!(run["status"], "ok", "{run}");
    assert_eq!(run["stats"]["ignored_errors"], 0, "{run}");
    assert!(run["stats"]["writes"].as_u64().unwrap() > 0, "{run}");
    let row = rows(&r, "summary")
        .iter()
        .find(|x| x["scenario"] == "cached_by_table")
        .unwrap_or_else(|| panic!("no cached_by_table summary: {t}"));
    assert!(row["qps"].as_f64().is_some_and(|q| q > 0.0), "{row}");
    assert!(row["qps_ratio_vs_passthrough"].as_f64().is_some(), "{row}");
    assert!(row["sluice_cpu_us_per_query"].as_f64().is_some(), "{row}");
    // Its own Sluice, with the option that makes it differ from cached.
    let config = std::fs::read_to_string(out.join("sluice-cached-by-table.toml")).unwrap();
    assert!(config.contains("by_key = false"), "{config}");
    let log = std::fs::read_to_string(out.join("sluice-cached-by-table.log")).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("cached-by-table ÷ passthrough"), "{md}");
}

/// Existing servers. A failed data setup stops the run with sysbench's own words. Then
/// direct works and Sluice cannot log in to its backend: the run goes on, writes what it
/// measured, marks every missing cell with the reason, and exits with an error that says
/// how many runs failed.
#[test]
fn failed_runs_are_marked_and_the_rest_is_kept() {
    let server = dedicated_server(MariaDbOptions::default());
    server
        .execute("CREATE DATABASE IF NOT EXISTS sbtest")
        .unwrap();
    let broken = User {
        backend_password: Some("not the password".into()),
        ..User::native("bench", "bench_pw")
    };
    let mut sluice = Sluice::start(&Config::for_server(&server).user(broken));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let db_port = server.port().to_string();
    let sluice_port = sluice.port().to_string();
    let pid = sluice.pid().to_string();
    let args = [
        "--mysql-port",
        &db_port,
        "--sluice-port",
        &sluice_port,
        "--sluice-pid",
        &pid,
        "--mysql-user",
        "bench",
        "--mysql-password",
        "bench_pw",
        "--workloads",
        "point_select",
        "--threads",
        "2",
        "--duration",
        "1s",
        "--tables",
        "1",
        "--table-size",
        "100",
    ];
    let output = bench(&args, &out, Duration::from_secs(120));
    sluice.assert_running();
    // The bench user does not exist on the server itself yet: setting up the data (first
    // removing leftover tables) fails, and the message says so in sysbench's words.
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(
        all.contains("(sysbench cleanup): sysbench exited with status 1"),
        "{all}"
    );
    assert!(
        all.contains("error 1045: Access denied for user 'bench'"),
        "{all}"
    );
    assert_eq!(results(&out)["status"]["state"], "aborted");
    // With the user created, direct works while Sluice still fails to log in.
    server
        .execute(
            "CREATE USER IF NOT EXISTS 'bench'@'%' IDENTIFIED BY 'bench_pw'; \
             GRANT ALL ON sbtest.* TO 'bench'@'%'",
        )
        .unwrap();
    let output = bench(&args, &out, Duration::from_secs(120));
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(all.contains("1 of 2 runs failed or were skipped"), "{all}");
    let r = results(&out);
    assert_eq!(r["status"]["state"], "finished");
    let summary = rows(&r, "summary");
    assert_eq!(summary.len(), 2);
    assert!(summary[0]["qps"].as_f64().unwrap() > 0.0, "{all}");
    let missing = summary[1]["missing"].as_str().unwrap();
    assert!(missing.starts_with("FAILED: "), "{missing}");
    // sysbench's own words about the failed login reach the report.
    let runs = rows(&r, "runs");
    let error = runs[1]["error"].as_str().unwrap();
    assert!(error.contains("sysbench exited with status"), "{error}");
    assert!(error.contains("error 1045"), "{error}");
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("| 2 | "), "{md}");
    assert!(md.contains("FAILED"), "{md}");
    // The password given on the command line is not in any report file.
    for file in ["results.md", "results.json", "results.csv", "report.html"] {
        let body = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(!body.contains("bench_pw"), "{file} shows the password");
    }
}

/// What cannot start says what is missing, and nothing is left running.
#[test]
fn missing_tools_and_unreachable_servers_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let closed = free_port().to_string();
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--sysbench",
                "/nonexistent/sysbench",
                "--workloads",
                "read_only",
            ],
            "sysbench not found",
        ),
        (
            &[
                "--mysqlslap",
                "/nonexistent/mysqlslap",
                "--workloads",
                "insert",
            ],
            "mysqlslap not found",
        ),
        (
            &["--mysql-port", &closed, "--workloads", "read_only"],
            "cannot reach the direct target",
        ),
        (
            &["--threads", "0"],
            "--threads needs one or more thread counts",
        ),
    ];
    for (i, (args, expected)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("case{i}"));
        let output = bench(args, &out, Duration::from_secs(60));
        let all = text(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {all}");
        assert!(
            all.contains(expected),
            "{args:?}: expected {expected:?} in\n{all}"
        );
        assert!(!all.contains("panicked"), "{all}");
    }
}

/// A benchmark killed outright (SIGKILL: no cleanup code runs) leaves no Sluice and no
/// MariaDB behind: both run under the sandbox's watchdog.
/// With `--hosts`, every hop is a delay link: a direct query crosses one (client to
/// MariaDB), a pass-through one two (client to Sluice, Sluice to MariaDB), a cache hit
/// one. Delays are never shorter than asked, so latencies have floors to check.
#[test]
fn over_simulated_hosts_each_hop_costs_its_delay() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hosts");
    let output = bench(
        &[
            "--hosts",
            "--hop",
            "2ms",
            "--threads",
            "1",
            "--duration",
            "2s",
            "--tables",
            "1",
            "--table-size",
            "100",
            "--workloads",
            "oltp_point_select",
            "--sluice-bin",
            SLUICE_BIN,
        ],
        &out,
        Duration::from_secs(120),
    );
    let t = text(&output);
    assert!(output.status.success(), "{t}");
    let r = results(&out);
    let topology = r["topology"].to_string();
    assert!(
        topology.contains("delay link of 2000 µs each way"),
        "{topology}"
    );
    let notes = r["notes"].to_string();
    for hop in [
        "Sluice to MariaDB",
        "client to MariaDB",
        "client to Sluice (passthrough)",
        "client to Sluice (cached)",
    ] {
        assert!(notes.contains(&format!("Hop {hop}:")), "{hop}: {notes}");
    }
    let avg = |scenario: &str| {
        let run = rows(&r, "runs")
            .iter()
            .find(|x| x["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no {scenario} run: {t}"));
        assert_eq!(run["status"], "ok", "{run}");
        assert_eq!(run["stats"]["ignored_errors"], 0, "{run}");
        run["stats"]["latency_avg_ms"].as_f64().unwrap()
    };
    let (direct, passthrough, cached) = (avg("direct"), avg("passthrough"), avg("cached"));
    assert!(direct >= 4.0, "one hop there and back: {direct} ms");
    assert!(
        passthrough >= 8.0,
        "two hops there and back: {passthrough} ms"
    );
    assert!(
        cached >= 4.0 && cached < passthrough,
        "{cached} ms, {passthrough} ms"
    );
}

#[test]
fn a_killed_benchmark_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let mut child = Command::new(SLUICE_BIN)
        .args([
            "bench",
            "--workloads",
            "point_select",
            "--scenarios",
            "direct,passthrough",
            "--threads",
            "1",
            "--duration",
            "60s",
            "--tables",
            "1",
            "--table-size",
            "100",
            "--sluice-bin",
            SLUICE_BIN,
            "--out",
        ])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting sluice bench");
    // The report names the Sluice child's pid once the topology is up.
    let mut pid = None;
    let found = crate::support::wait_until(Duration::from_secs(60), || {
        let Ok(text) = std::fs::read_to_string(out.join("results.json")) else {
            return false;
        };
        pid = text
            .split("child process (pid ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .and_then(|p| p.parse::<u32>().ok());
        pid.is_some()
    });
    assert!(found, "the benchmark never reported its Sluice");
    let pid = pid.unwrap();
    assert!(sluice_sandbox::process_alive(pid));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        crate::support::wait_process_gone(pid, Duration::from_secs(30)),
        "Sluice (pid {pid}) outlived the killed benchmark"
    );
}

/// `sluice bench mux` in miniature: its own servers, both parts, every figure present and
/// plausible (a few idle clients, a pool of two).
#[test]
fn the_multiplexing_benchmark_measures_both_parts() {
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(SLUICE_BIN)
        .args([
            "bench",
            "mux",
            "--threads",
            "4",
            "--backend-connections",
            "2",
            "--idle-clients",
            "50",
            "--active-threads",
            "4",
            "--idle-backend-connections",
            "3",
            "--duration",
            "2s",
            "--tables",
            "1",
            "--table-size",
            "100",
            "--sluice-bin",
            SLUICE_BIN,
            "--out",
        ])
        .arg(out.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting sluice bench mux");
    let status = wait_child(&mut child, Duration::from_secs(240)).unwrap();
    if status.is_none() {
        let _ = child.kill();
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let r = results(out.path());
    let runs = rows(&r, "runs");
    assert_eq!(runs.len(), 2, "{r}");
    for run in runs {
        assert!(run["qps"].as_f64().unwrap() > 0.0, "{run}");
        assert_eq!(run["errors"], 0, "{run}");
        assert!(
            run["server_memory_used_mib"].as_f64().unwrap() > 0.0,
            "{run}"
        );
    }
    let through = runs.iter().find(|x| x["scenario"] == "sluice").unwrap();
    assert!(
        through["server_connections"].as_u64().unwrap() <= 2,
        "{through}"
    );
    let idle = &r["idle"];
    assert_eq!(idle["logged_in"], 50, "{idle}");
    assert!(
        idle["bytes_per_idle_client"].as_f64().unwrap() > 0.0,
        "{idle}"
    );
    assert!(idle["server_connections"].as_u64().unwrap() <= 3, "{idle}");
    assert_eq!(idle["pings_sent"], 1, "{idle}");
    assert_eq!(idle["pings_answered"], 1, "{idle}");
    assert!(idle["failure"].is_null(), "{idle}");
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    assert!(md.contains("| 4 | sluice |"), "{md}");
    assert!(md.contains("50 of 50"), "{md}");
}

/// `sluice bench <benchmark>` and the names it replaced all parse: each form's help,
/// and the flags without a benchmark name still meaning `cache`.
#[test]
fn bench_commands_parse_in_the_new_and_the_old_forms() {
    use crate::support::proxy::run_sluice_within;
    for args in [
        &["bench", "--help"][..],
        &["bench", "cache", "--help"],
        &["bench", "mux", "--help"],
        &["bench", "routing", "--help"],
        &["bench", "all", "--help"],
        &["bench-mux", "--help"],
        &["bench-routing", "--help"],
    ] {
        let out = run_sluice_within(args, Duration::from_secs(10));
        assert_eq!(out.code, Some(0), "sluice {args:?}: {out:?}");
        assert!(
            out.stdout.contains("Usage: sluice"),
            "sluice {args:?}: {out:?}"
        );
    }
    let help = run_sluice_within(&["bench", "--help"], Duration::from_secs(10)).stdout;
    for name in ["cache", "mux", "routing", "all", "--demo"] {
        assert!(help.contains(name), "{name} missing from: {help}");
    }
    // Flags of one benchmark are refused by another, which shows the name was taken.
    let out = run_sluice_within(
        &["bench", "mux", "--workloads", "insert"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    let out = run_sluice_within(&["bench", "--demo", "mux"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{out:?}");
}

/// The subcommands `bench-mux` and `bench-routing` still run their scenario for one
/// release, with a note on stderr naming the new form. Bad flags make them stop right
/// after choosing the scenario, which is all this checks.
#[test]
fn the_old_benchmark_names_still_work_with_a_note() {
    for (old, new) in [
        ("bench-mux", "bench mux"),
        ("bench-routing", "bench routing"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let output = Command::new(SLUICE_BIN)
            .args([old, "--threads", "0", "--out"])
            .arg(out.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let t = text(&output);
        assert_eq!(output.status.code(), Some(1), "{t}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let note = format!("note: `sluice {old}` is deprecated; use `sluice {new}`\n");
        assert!(stderr.starts_with(&note), "{t}");
        assert_eq!(stderr.matches("deprecated").count(), 1, "{t}");
        assert!(stderr.contains("--threads needs one or more"), "{t}");
        // Hidden from the help, which shows the new form.
        let help = Command::new(SLUICE_BIN).arg("--help").output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(!help.contains(old) && help.contains("bench"), "{help}");
    }
}

/// `sluice bench all` in its smallest form: every scenario runs (cache, mux, routing,
/// galera, shard, zones, failover, fleet, upgrade), each writes its own report in its own
/// directory, and one HTML page holds them all.
#[test]
fn every_scenario_runs_and_lands_on_one_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all");
    let output = run_bench(
        &[
            "all",
            "--demo",
            "--threads",
            "2",
            "--duration",
            "1s",
            "--tables",
            "1",
            "--table-size",
            "100",
            "--sluice-bin",
            SLUICE_BIN,
        ],
        &out,
        Duration::from_secs(540),
    );
    let t = text(&output);
    assert!(output.status.success(), "{t}");
    let page_path = out.join("report.html");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(&format!(
            "Report of every scenario: {}",
            page_path.display()
        )),
        "{t}"
    );
    let page = std::fs::read_to_string(&page_path).expect("the page of every scenario");
    for (name, title) in [
        ("cache", "Sluice benchmark: cache"),
        ("mux", "Sluice benchmark: mux"),
        ("routing", "Sluice benchmark: routing"),
        ("galera", "Sluice benchmark: Galera"),
        ("shard", "Sluice benchmark: shard"),
        ("zones", "Sluice benchmark: zones"),
        ("failover", "Sluice benchmark: failover"),
        ("fleet", "Sluice benchmark: fleet"),
        ("upgrade", "Sluice benchmark: upgrade"),
    ] {
        assert!(
            page.contains(&format!("<h2>{title}")),
            "{name} missing from the page"
        );
        for file in ["results.md", "results.json", "results.csv", "report.html"] {
            assert!(out.join(name).join(file).is_file(), "{name}/{file}");
        }
    }
    assert_eq!(page.matches("<article>").count(), 9);
    assert!(page.matches("<svg").count() >= 6, "charts inline");
    for name in [
        "cache", "mux", "routing", "galera", "shard", "zones", "failover", "fleet", "upgrade",
    ] {
        assert!(page.contains(&format!("<li>{name}: finished;")), "{page}");
    }
}

/// --server-cpus: the embedded MariaDB runs on the CPUs given and everything else the
/// benchmark starts on the others, as the report says from what the kernel reports for
/// each. Needs two CPUs; with one there is nothing to split and the benchmark refuses.
#[test]
fn the_database_gets_cpus_of_its_own() {
    let allowed = sluice_sandbox::cpus::allowed().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let server = allowed[0].to_string();
    let output = bench(
        &[
            "--scenarios",
            "direct,passthrough",
            "--workloads",
            "oltp_point_select",
            "--threads",
            "1",
            "--duration",
            "1s",
            "--tables",
            "1",
            "--table-size",
            "100",
            "--server-cpus",
            &server,
            "--sluice-bin",
            SLUICE_BIN,
        ],
        &out,
        Duration::from_secs(120),
    );
    let t = text(&output);
    if allowed.len() < 2 {
        assert!(!output.status.success(), "{t}");
        assert!(t.contains("leaves no CPU"), "{t}");
        return;
    }
    assert!(output.status.success(), "{t}");
    let rest = sluice_sandbox::cpus::format_list(&allowed[1..]);
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(
        md.contains(&format!(
            "CPUs: MariaDB on {server}, the load generators and every Sluice on {rest}"
        )),
        "{md}"
    );
    let r = results(&out);
    assert_eq!(r["status"]["state"], "finished", "{t}");
}

/// HAProxy beside Sluice in one interleaved run: it relays every statement of the
/// workload, its CPU time per query is read as Sluice's is and each Sluice's is set
/// against it, and it is stopped at the end; a Sluice without multiplexing (dedicated)
/// takes its turn too, passthrough's CPU per query set against it. Without HAProxy, the
/// scenario is reported as not available and the others run.
#[test]
fn haproxy_takes_its_turn_as_the_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    // One small step: point selects on one table of 100 rows.
    let small = [
        "--workloads",
        "oltp_point_select",
        "--tables",
        "1",
        "--table-size",
        "100",
        "--sluice-bin",
        SLUICE_BIN,
    ];
    let output = bench(
        &[
            &[
                "--scenarios",
                "direct,haproxy,passthrough,dedicated",
                "--threads",
                "2",
                "--duration",
                "2s",
            ][..],
            &small,
        ]
        .concat(),
        &out,
        Duration::from_secs(120),
    );
    let t = text(&output);
    assert!(output.status.success(), "{t}");
    let r = results(&out);
    assert_eq!(r["status"]["state"], "finished", "{t}");
    let order: Vec<&str> = rows(&r, "runs")
        .iter()
        .map(|x| x["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["direct", "haproxy", "passthrough", "dedicated"]);
    let summary = |scenario: &str| {
        rows(&r, "summary")
            .iter()
            .find(|x| x["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no {scenario} summary: {t}"))
            .clone()
    };
    // Ran: some queries, and no errors.
    let ran = |row: &Value| {
        assert!(row["qps"].as_f64().is_some_and(|q| q > 0.0), "{row}");
        assert_eq!(row["errors"], 0, "{row}");
    };
    let haproxy = summary("haproxy");
    ran(&haproxy);
    assert!(
        haproxy["sluice_cpu_us_per_query"]
            .as_f64()
            .is_some_and(|c| c > 0.0),
        "{haproxy}"
    );
    let passthrough = summary("passthrough");
    assert!(
        passthrough["cpu_ratio_vs_haproxy"]
            .as_f64()
            .is_some_and(|c| c > 0.0),
        "{passthrough}"
    );
    ran(&summary("dedicated"));
    assert!(
        passthrough["cpu_ratio_vs_dedicated"]
            .as_f64()
            .is_some_and(|c| c > 0.0),
        "{passthrough}"
    );
    let config = std::fs::read_to_string(out.join("haproxy.cfg")).unwrap();
    assert!(config.contains("mode tcp"), "{config}");
    let config = std::fs::read_to_string(out.join("sluice-dedicated.toml")).unwrap();
    assert!(config.contains("multiplex = false"), "{config}");
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("passthrough CPU ÷ haproxy"), "{md}");
    assert!(md.contains("multiplexed CPU ÷ dedicated"), "{md}");
    // Stopped with the benchmark: the pid the report gives is gone.
    stopped_with_the_benchmark(&r, "HAProxy", &t);

    let out = dir.path().join("without");
    let output = bench(
        &[
            &[
                "--scenarios",
                "direct,haproxy",
                "--haproxy",
                "/nonexistent/haproxy",
                "--threads",
                "1",
                "--duration",
                "1s",
            ][..],
            &small,
        ]
        .concat(),
        &out,
        Duration::from_secs(120),
    );
    let t = text(&output);
    assert!(output.status.success(), "{t}");
    let r = results(&out);
    let unavailable = rows(&r["settings"], "unavailable");
    assert_eq!(unavailable.len(), 1, "{t}");
    assert_eq!(unavailable[0]["scenario"], "haproxy", "{t}");
    let reason = unavailable[0]["reason"].as_str().unwrap();
    assert!(reason.contains("apt-get install haproxy"), "{reason}");
    let order: Vec<&str> = rows(&r, "runs")
        .iter()
        .map(|x| x["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["direct"], "{t}");
}
