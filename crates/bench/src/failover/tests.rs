use super::*;
use crate::report::Machine;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: FailoverArgs,
}

fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
    let cli = Cli::try_parse_from(std::iter::once("failover").chain(argv.iter().copied()))?;
    Plan::resolve(&cli.args)
}

#[test]
fn defaults_demo_sizes_and_bad_values() {
    let p = plan(&[]).unwrap();
    assert_eq!((p.runs, p.threads, p.probe_writers), (10, 8, 2));
    assert_eq!((p.data.tables, p.data.table_size), (4, 10_000));
    assert_eq!(
        (p.kill_after, p.after),
        (Duration::from_secs(5), Duration::from_secs(5))
    );
    assert_eq!(p.sysbench_secs, 5 + 5 + SYSBENCH_MARGIN_SECS);
    let p = plan(&["--demo", "--kill-after", "1500ms", "--after", "2s"]).unwrap();
    assert_eq!((p.runs, p.threads), (2, 4));
    assert_eq!((p.data.tables, p.data.table_size), (2, 1_000));
    // sysbench's --time is whole seconds: 3.5 s of load rounds up.
    assert_eq!(p.sysbench_secs, 4 + SYSBENCH_MARGIN_SECS);
    assert_eq!(plan(&["--runs", "1", "--threads", "2"]).unwrap().runs, 1);
    // Wrapping follows Sluice's default, on, unless turned off.
    assert!(plan(&[]).unwrap().wrap_autocommit_writes);
    assert!(
        plan(&["--wrap-autocommit-writes"])
            .unwrap()
            .wrap_autocommit_writes
    );
    let off = plan(&["--wrap-autocommit-writes", "false"]).unwrap();
    assert!(!off.wrap_autocommit_writes);
    assert!(plan(&["--runs", "0"]).is_err());
    assert!(plan(&["--threads", "2,4"]).is_err());
    assert!(plan(&["--kill-after", "0s"]).is_err());
    assert!(plan(&["--tables", "0"]).is_err());
}

#[test]
fn the_configuration_keeps_the_monitor_at_its_defaults() {
    let addresses: Vec<SocketAddr> = (0..3)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 3306 + i)))
        .collect();
    let text = sluice_config(&addresses, 6033, 6080, "t0ken", false);
    // Read as plain TOML: this crate does not depend on the proxy. That Sluice accepts
    // the file is checked by the integration test of `sluice bench failover`.
    let config: toml::Table = text.parse().unwrap();
    let servers = config["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3);
    assert_eq!(servers[0]["name"].as_str(), Some("primary"));
    assert_eq!(servers[2]["address"].as_str(), Some("127.0.0.1:3308"));
    assert_eq!(config["pool"]["multiplex"].as_bool(), Some(true));
    assert_eq!(config["routing"]["read_write_split"].as_bool(), Some(true));
    assert_eq!(
        config["failover"]["replication_user"].as_str(),
        Some(sandbox::REPL_USER)
    );
    assert_eq!(
        config["failover"]["wrap_autocommit_writes"].as_bool(),
        Some(false)
    );
    assert!(!config.contains_key("monitor"), "{text}");
    assert_eq!(config["admin"]["token"].as_str(), Some("t0ken"));
}

#[test]
fn instances_are_checked_and_size_the_servers() {
    let p = plan(&[]).unwrap();
    assert_eq!((p.instances, p.kill_instance), (1, false));
    // One instance: as many connections as before there could be several.
    assert_eq!(p.max_connections, 8 + 200);
    let p = plan(&["--instances", "3", "--kill-instance"]).unwrap();
    assert_eq!((p.instances, p.kill_instance), (3, true));
    assert_eq!(p.max_connections, 8 + 3 * 100 + 100);
    assert!(plan(&["--instances", "0"]).is_err());
    assert!(plan(&["--instances", "9"]).is_err());
    // Someone must be left to fail over.
    assert!(plan(&["--kill-instance"]).is_err());
    assert!(plan(&["--instances", "1", "--kill-instance"]).is_err());
    assert!(plan(&["--instances", "2", "--kill-instance"]).is_ok());
}

#[test]
fn clients_and_files_are_spread_over_the_instances() {
    use fleet::{instance_file, thread_shares};
    assert_eq!(thread_shares(8, 1), [8]);
    assert_eq!(thread_shares(8, 2), [4, 4]);
    assert_eq!(thread_shares(8, 3), [3, 3, 2]);
    // Every instance gets a client, even with fewer threads than instances.
    assert_eq!(thread_shares(2, 3), [1, 1, 1]);
    assert_eq!(
        instance_file("raw/sluice-run2.log", 1, 1),
        "raw/sluice-run2.log"
    );
    assert_eq!(
        instance_file("raw/sluice-run2.log", 3, 3),
        "raw/sluice-run2-3.log"
    );
    assert_eq!(instance_file("out", 2, 2), "out-2");
}

#[test]
fn read_only_answers_are_parsed() {
    use fleet::parse_read_only;
    assert_eq!(parse_read_only("@@read_only\n0\n"), Some(false));
    assert_eq!(parse_read_only("@@read_only\n1\n"), Some(true));
    assert_eq!(parse_read_only("@@read_only\n"), None);
    assert_eq!(parse_read_only("@@read_only\nON\n"), None);
}

/// `/v1/servers` as an instance answers it after a run, the part read here.
fn servers(
    writer: &str,
    failovers: u64,
    took_ms: Option<u64>,
    mismatches: u64,
) -> serde_json::Value {
    serde_json::json!({
        "writer": writer,
        "stats": {
            "failovers": failovers,
            "replays_attempted": 3,
            "replays_succeeded": 3 - mismatches,
            "replays_refused": mismatches,
            "replays_refused_by": {"mismatch": mismatches},
        },
        "last_failover": took_ms.map(|ms| serde_json::json!({"took_ms": ms})),
    })
}

#[test]
fn the_fleet_is_read_from_every_instance() {
    // Instance 1 killed, instance 2 promoted, instance 3 followed.
    let readings = vec![
        None,
        Some(servers("replica1", 1, Some(31), 1)),
        Some(servers("replica1", 0, Some(2), 0)),
    ];
    let mut f = FleetRun::default();
    f.record(&readings, true, vec!["replica1".into()]);
    assert_eq!(f.failovers, [None, Some(1), Some(0)]);
    assert_eq!(f.promotions, Some(1));
    assert_eq!(f.promoted_by(), [2]);
    assert_eq!(f.same_writer(), Some(true));
    assert!(f.holds());
    assert_eq!(f.promotions_cell(), "1 (instance 2)");
    assert_eq!(f.writers_cell(), "replica1");
    // The figure of the instance that promoted, not of the one that followed.
    assert_eq!(fleet::failover_took_ms(&readings), Some(31));
    let replays = fleet::replays_of(&readings);
    assert_eq!((replays.attempted, replays.mismatches()), (6, 1));

    // Two promotions, two writers, both replicas writable: all of it shows.
    let readings = vec![
        Some(servers("replica1", 1, Some(30), 0)),
        Some(servers("replica2", 1, Some(40), 0)),
    ];
    let mut f = FleetRun::default();
    f.record(&readings, false, vec!["replica1".into(), "replica2".into()]);
    assert_eq!(f.promotions, Some(2));
    assert_eq!(f.promotions_cell(), "2 (instances 1, 2)");
    assert_eq!(f.same_writer(), Some(false));
    assert_eq!(f.writers_cell(), "1: replica1, 2: replica2");
    assert!(!f.holds());
    assert_eq!(fleet::failover_took_ms(&readings), Some(40));

    // One instance: its own figure, whatever its count says.
    let one = vec![Some(servers("replica2", 1, Some(25), 0))];
    assert_eq!(fleet::failover_took_ms(&one), Some(25));

    // Nobody answered: nothing to say.
    let mut f = FleetRun::default();
    f.record(&[None, None], true, Vec::new());
    assert_eq!((f.promotions, f.same_writer()), (None, None));
    assert_eq!(f.promotions_cell(), "-");
}

/// A measured run of a fleet of three, as `one_run` leaves it.
fn fleet_run(n: u32, promotions: [u64; 3], writers: [&str; 3], writable: &[&str]) -> Run {
    let readings: Vec<Option<serde_json::Value>> = promotions
        .iter()
        .zip(writers)
        .map(|(p, w)| Some(servers(w, *p, Some(30), 0)))
        .collect();
    let mut fleet = FleetRun::default();
    fleet.record(
        &readings,
        true,
        writable.iter().map(|w| w.to_string()).collect(),
    );
    let mut run = Run {
        run: n,
        new_writer: Some("replica1".into()),
        failover_took_ms: Some(30),
        write_pause_ms: Some(1900),
        client_errors: Some(0),
        acked_lost: Some(0),
        applied_twice: Some(0),
        fleet: Some(fleet),
        ..Run::default()
    };
    run.judge();
    run
}

#[test]
fn a_fleet_run_passes_with_one_promotion_one_writable_server_and_one_writer() {
    let runs = vec![
        fleet_run(1, [0, 1, 0], ["replica1"; 3], &["replica1"]),
        fleet_run(
            2,
            [1, 1, 0],
            ["replica1", "replica2", "replica2"],
            &["replica1", "replica2"],
        ),
        fleet_run(
            3,
            [1, 0, 0],
            ["replica1", "replica1", "primary"],
            &["replica1"],
        ),
    ];
    let passed: Vec<Option<bool>> = runs.iter().map(|r| r.passed).collect();
    assert_eq!(passed, [Some(true), Some(false), Some(false)]);
    let s = FleetSummary::of(3, &runs);
    assert_eq!(
        s,
        FleetSummary {
            instances: 3,
            one_promotion: 2,
            one_writable: 2,
            same_writer: 1,
            promotions: 4,
            killed_instance_errors: 0,
        }
    );
}

#[test]
fn the_report_adds_the_fleet_columns_with_several_instances() {
    let mut killed = fleet_run(2, [0, 1, 0], ["replica1"; 3], &["replica1"]);
    if let Some(f) = &mut killed.fleet {
        f.failovers[0] = None;
        f.writers[0] = None;
        f.killed_instance = Some(1);
        f.killed_instance_errors = Some(57);
        f.killed_instance_texts = vec![tally::ErrorText {
            text: "login: connection refused".into(),
            count: 57,
        }];
    }
    let mut results = empty_results(3, true);
    results.runs = vec![
        fleet_run(1, [0, 0, 1], ["replica2"; 3], &["replica2"]),
        killed,
    ];
    results.summary = report::summarize(&results.runs, 3);
    let md = report::document(&results).markdown();
    assert!(
        md.contains("| promotions | writable servers | writer per instance | killed instance's client errors | result |"),
        "{md}"
    );
    assert!(
        md.contains("| 1 (instance 3) | 1 | replica2 | - | pass |"),
        "{md}"
    );
    assert!(
        md.contains("| 1 (instance 2) | 1 | replica1 | 57 | pass |"),
        "{md}"
    );
    assert!(md.contains("| 2 of 2 | 2 of 2 | 2 of 2 | 2 | 57 |"), "{md}");
    assert!(
        md.contains("Target: 1 promotion and 0 lost in every run"),
        "{md}"
    );
    assert!(md.contains("3 Sluice instances in front"), "{md}");
    assert!(
        md.contains(
            "Run 2, the killed instance's clients (57x, excepted): login: connection refused"
        ),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&report::document(&results).json).unwrap();
    assert_eq!(json["instances"], 3);
    assert_eq!(
        json["runs"][1]["fleet"]["failovers"],
        serde_json::json!([null, 1, 0])
    );

    // One instance: none of it, in the report or in its JSON.
    let mut single = empty_results(1, false);
    single.runs = vec![Run {
        fleet: None,
        ..fleet_run(1, [0, 1, 0], ["replica1"; 3], &["replica1"])
    }];
    single.summary = report::summarize(&single.runs, 1);
    let document = report::document(&single);
    assert!(!document.markdown().contains("promotion"));
    assert!(!document.csv.contains("writable"));
    let json: serde_json::Value = serde_json::from_str(&document.json).unwrap();
    assert!(json.get("instances").is_none() && json.get("kill_instance").is_none());
    assert!(json["runs"][0].get("fleet").is_none() && json["summary"].get("fleet").is_none());
}

/// Results with nothing run, for reports of a few hand-made runs.
pub(super) fn empty_results(instances: u32, kill_instance: bool) -> Results {
    Results {
        command: "sluice bench failover".into(),
        started_at: String::new(),
        finished_at: None,
        error: None,
        sluice_version: String::new(),
        sysbench_version: String::new(),
        mariadb_version: None,
        machine: Machine::detect(),
        threads: 8,
        data: DataSet {
            tables: 4,
            table_size: 10_000,
        },
        kill_after_ms: 5000,
        after_ms: 5000,
        probe_writers: 2,
        binlog_format: BinlogFormat::Mixed,
        wrap_autocommit_writes: false,
        instances,
        kill_instance,
        runs_planned: 2,
        sluice_command: None,
        prepare_command: None,
        runs: Vec::new(),
        summary: Summary::default(),
    }
}
