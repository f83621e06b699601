use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: UpgradeArgs,
}

fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
    let cli = Cli::try_parse_from(std::iter::once("upgrade").chain(argv.iter().copied()))?;
    Plan::resolve(&cli.args)
}

#[test]
fn defaults_demo_sizes_and_bad_values() {
    let p = plan(&[]).unwrap();
    assert_eq!((p.handovers, p.threads), (10, 16));
    assert_eq!(p.spacing, Duration::from_secs(30));
    assert_eq!(p.window, Duration::from_secs(10));
    assert_eq!(p.drain_timeout, Duration::from_secs(5));
    assert_eq!((p.data.tables, p.data.table_size), (4, 10_000));
    let p = plan(&["--demo"]).unwrap();
    assert_eq!((p.handovers, p.threads), (10, 16));
    assert_eq!(
        (p.spacing, p.window),
        (Duration::from_secs(10), Duration::from_secs(5))
    );
    assert_eq!((p.data.tables, p.data.table_size), (2, 1_000));
    // The smallest run `sluice bench all` is tested with.
    let p = plan(&["--demo", "--duration", "1s", "--threads", "2"]).unwrap();
    assert_eq!(
        (p.spacing, p.window),
        (Duration::from_secs(1), Duration::from_millis(500))
    );
    assert!(plan(&["--threads", "4,8"]).is_err());
    assert!(plan(&["--handovers", "0"]).is_err());
    assert!(plan(&["--window", "31s"]).is_err());
    assert!(plan(&["--drain-timeout", "0s"]).is_err());
    assert!(plan(&["--dedicated"]).unwrap().dedicated);
}

#[test]
fn the_configuration_hands_over_caches_and_answers_the_admin() {
    let base = topology::sluice_config(
        6033,
        ("127.0.0.1:3306".parse().unwrap(), &[]),
        &Credentials {
            user: USER.into(),
            password: PASSWORD.into(),
            database: DATABASE.into(),
            insert_schema: "x".into(),
        },
        48,
        Role::Cached,
    );
    let text = sluice_config(
        base,
        Path::new("/run/x/handover.sock"),
        Duration::from_secs(5),
        6080,
        "t0ken",
    );
    // Read as plain TOML: this crate does not depend on the proxy; the benchmark's own
    // start is what proves Sluice takes it.
    let config: toml::Table = text.parse().unwrap();
    assert_eq!(
        config["handover"]["socket"].as_str(),
        Some("/run/x/handover.sock")
    );
    assert_eq!(config["handover"]["drain_timeout"].as_str(), Some("5s"));
    assert_eq!(config["admin"]["address"].as_str(), Some("127.0.0.1:6080"));
    assert_eq!(config["fleet"]["enabled"].as_bool(), Some(false));
    assert!(config["cache"]["rules"]
        .as_array()
        .is_some_and(|r| !r.is_empty()));
    // The hand-over lines the benchmark reads are logged at this level.
    assert!(config["log"]["level"]
        .as_str()
        .is_some_and(|l| l.contains("sluice::server=info")));
}

#[test]
fn the_table_has_a_row_per_hand_over_and_a_total() {
    let mut seen = Seen::default();
    seen.errors.add(Kind::Idle, 2);
    seen.lost.add(Kind::Idle, 2);
    let mut results = Results {
        command: "sluice bench upgrade --demo".into(),
        started_at: "2026-11-29T00:00:00Z".into(),
        finished_at: Some("2026-11-29T00:03:00Z".into()),
        error: None,
        sluice_version: "0.1.0".into(),
        sysbench_version: "sysbench 1.0.20".into(),
        mariadb_version: Some("11.8.3-MariaDB".into()),
        machine: Machine {
            cpu: "cpu".into(),
            logical_cpus: 2,
            memory: "8 GiB".into(),
            kernel: "Linux".into(),
        },
        threads: 16,
        data: DataSet {
            tables: 2,
            table_size: 1_000,
        },
        handovers_planned: 2,
        spacing_ms: 10_000,
        window_ms: 5_000,
        settle_ms: 2_000,
        drain_timeout_ms: 5_000,
        dedicated: false,
        sluice_command: None,
        sysbench_command: None,
        prepare_command: None,
        before_first: Some(Seen::default()),
        runs: vec![
            Handover {
                number: 1,
                old_pid: 10,
                new_pid: Some(11),
                ready_ms: Some(120),
                old_rss_mib: Some(30.5),
                old_exit_ms: Some(5_300),
                released: Some(true),
                moved_in: Some(20),
                hit_rate_before: Some(0.5),
                hit_rate_after: Some(0.25),
                seen: seen.clone(),
                longest_stall_ms: Some(42.0),
                longest_stall_kind: Some(Kind::Transaction),
                ..Handover::default()
            },
            Handover {
                number: 2,
                old_pid: 11,
                failure: Some("no successor started".into()),
                ..Handover::default()
            },
        ],
        total: Some(seen),
        longest_stall_ms: Some(42.0),
        failures: vec![("idle: connection lost: closed".into(), 2)],
        sysbench_failure: None,
        sysbench_ended_after_s: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let doc = report::write(dir.path(), &mut results).unwrap();
    let table = &doc.sections[0].tables[0];
    assert_eq!(table.header[2], "client errors");
    assert_eq!(table.rows.len(), 4, "{:?}", table.rows);
    assert!(
        table.rows.iter().all(|r| r.len() == table.header.len()),
        "{:?}",
        table.rows
    );
    assert_eq!(table.rows[0][0], "before the first");
    assert_eq!(table.rows[1][2], "2 (idle 2)");
    assert_eq!(table.rows[1][7], "- / 42 (transaction)");
    assert_eq!(table.rows[1][10], "50.0% / 25.0%");
    assert_eq!(table.rows[1][12], "5.3, in bound");
    assert!(table.rows[2][1].starts_with("FAILED"));
    assert_eq!(table.rows[3][0], "total");
    let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
    assert!(
        md.contains("0 of 1 hand-overs without a client error"),
        "{md}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap())
            .unwrap();
    assert_eq!(json["runs"][0]["seen"]["errors"]["idle"], 2);
}
