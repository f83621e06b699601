use super::*;
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
