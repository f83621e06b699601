//! The plan: how the flags resolve, and the order the runs take.

use super::*;
use clap::Parser;
use std::time::Duration;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: CacheArgs,
}

fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
    let cli = Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?;
    Plan::resolve(
        &cli.bench,
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_600),
    )
}

/// (workload, ps_mode, threads or inserts per transaction, repetition, scenario).
fn order(p: &Plan) -> Vec<(Workload, Option<PsMode>, u32, u32, Scenario)> {
    p.steps()
        .iter()
        .map(|s| match *s {
            Step::Sysbench {
                workload,
                ps_mode,
                threads,
                repetition,
                scenario,
            } => (workload, Some(ps_mode), threads, repetition, scenario),
            Step::Insert {
                per_trx,
                repetition,
                scenario,
            } => (Workload::Insert, None, per_trx, repetition, scenario),
        })
        .collect()
}

#[test]
fn defaults_follow_the_published_benchmark() {
    let p = plan(&[]).unwrap();
    assert!(p.embedded());
    assert_eq!(
        p.scenarios,
        [Scenario::Direct, Scenario::Passthrough, Scenario::Cached]
    );
    assert_eq!(
        p.workloads,
        [
            Workload::OltpReadOnly,
            Workload::OltpPointSelect,
            Workload::OltpReadWriteSplit,
            Workload::Insert
        ]
    );
    assert_eq!(p.ps_modes, [PsMode::Auto]);
    assert_eq!(p.threads, [1, 4, 8, 16, 32, 64, 128, 256]);
    assert_eq!(p.duration_secs, 30);
    assert_eq!((p.data.tables, p.data.table_size), (64, 10_000));
    assert_eq!(
        p.insert,
        Some(InsertSettings {
            clients: 16,
            rows: 100_000,
            per_trx: vec![1, 10, 100, 1000]
        })
    );
    assert_eq!(p.max_connections, 1124);
    assert_eq!(p.pool_max(), 272);
    assert_eq!(
        p.out_dir,
        std::path::Path::new("bench-results/cache-20240501T100000Z")
    );
    // 3 sysbench workloads x 8 steps x 3 scenarios, then 4 insert steps x 2.
    assert_eq!(p.steps().len(), 3 * 8 * 3 + 4 * 2);
    let o = order(&p);
    assert_eq!(
        o[72..],
        [
            (Workload::Insert, None, 1, 1, Scenario::Direct),
            (Workload::Insert, None, 1, 1, Scenario::Passthrough),
            (Workload::Insert, None, 10, 1, Scenario::Direct),
            (Workload::Insert, None, 10, 1, Scenario::Passthrough),
            (Workload::Insert, None, 100, 1, Scenario::Direct),
            (Workload::Insert, None, 100, 1, Scenario::Passthrough),
            (Workload::Insert, None, 1000, 1, Scenario::Direct),
            (Workload::Insert, None, 1000, 1, Scenario::Passthrough),
        ]
    );
}

#[test]
fn demo_is_short_and_explicit_flags_win() {
    let p = plan(&["--demo"]).unwrap();
    assert_eq!(
        p.workloads,
        [Workload::OltpReadOnly, Workload::OltpPointSelect]
    );
    assert_eq!(p.insert, None);
    assert_eq!(p.threads, [1, 4, 16]);
    assert_eq!(p.duration_secs, 5);
    assert_eq!((p.data.tables, p.data.table_size), (4, 10_000));
    // 2 workloads x 3 steps x 3 scenarios of 5 s: 90 s of load.
    assert_eq!(p.steps().len() as u64 * p.duration_secs, 90);
    let p = plan(&["--demo", "--threads", "2,2,8", "--duration", "1s"]).unwrap();
    assert_eq!(p.threads, [2, 8]);
    assert_eq!(p.duration_secs, 1);
    assert!(plan(&["--demo", "--mysql-port", "3306"]).is_err());
    assert!(plan(&["--demo", "--cached-port", "6034"]).is_err());
}

#[test]
fn scenarios_alternate_within_a_step() {
    let p = plan(&[
        "--threads",
        "1,8",
        "--repeat",
        "2",
        "--workloads",
        "point_select",
        "--ps-modes",
        "auto,disable",
        "--scenarios",
        "direct,passthrough",
    ])
    .unwrap();
    let order: Vec<(Option<PsMode>, u32, u32, Scenario)> = order(&p)
        .into_iter()
        .map(|(_, p, t, r, s)| (p, t, r, s))
        .collect();
    use PsMode::*;
    use Scenario::*;
    assert_eq!(
        order,
        [
            (Some(Auto), 1, 1, Direct),
            (Some(Auto), 1, 1, Passthrough),
            (Some(Auto), 1, 2, Direct),
            (Some(Auto), 1, 2, Passthrough),
            (Some(Auto), 8, 1, Direct),
            (Some(Auto), 8, 1, Passthrough),
            (Some(Auto), 8, 2, Direct),
            (Some(Auto), 8, 2, Passthrough),
            (Some(Disable), 1, 1, Direct),
            (Some(Disable), 1, 1, Passthrough),
            (Some(Disable), 1, 2, Direct),
            (Some(Disable), 1, 2, Passthrough),
            (Some(Disable), 8, 1, Direct),
            (Some(Disable), 8, 1, Passthrough),
            (Some(Disable), 8, 2, Direct),
            (Some(Disable), 8, 2, Passthrough),
        ]
    );
}

#[test]
fn unavailable_scenarios_are_reported_not_run() {
    let mut p = plan(&["--workloads", "read_only,insert", "--threads", "4"]).unwrap();
    p.unavailable.push(Unavailable {
        scenario: Scenario::Cached,
        reason: "no query cache".into(),
    });
    assert!(!p.runnable(Scenario::Cached));
    assert!(p.scenarios.contains(&Scenario::Cached));
    let scenarios: Vec<Scenario> = order(&p).iter().map(|s| s.4).collect();
    assert!(!scenarios.contains(&Scenario::Cached), "{scenarios:?}");
    // 1 thread step x 2 scenarios, 4 insert steps x 2.
    assert_eq!(scenarios.len(), 2 + 8);
}

#[test]
fn external_targets() {
    let p = plan(&["--mysql-host", "db.example", "--workloads", "read_only"]).unwrap();
    assert!(!p.embedded());
    assert_eq!(p.scenarios, [Scenario::Direct]);
    assert_eq!(
        p.direct,
        Some(Target {
            host: "db.example".into(),
            port: 3306
        })
    );
    assert_eq!(p.workloads, [Workload::OltpReadOnly]);
    assert!(p.notes.iter().any(|n| n.contains("max_connections")));
    let p = plan(&[
        "--mysql-port",
        "3307",
        "--sluice-port",
        "6033",
        "--cached-port",
        "6034",
        "--cached-pid",
        "42",
    ])
    .unwrap();
    assert_eq!(
        p.scenarios,
        [Scenario::Direct, Scenario::Passthrough, Scenario::Cached]
    );
    assert_eq!(
        p.passthrough,
        Some(SluiceTarget {
            target: Target {
                host: "127.0.0.1".into(),
                port: 6033
            },
            pid: None
        })
    );
    assert_eq!(p.cached.as_ref().and_then(|c| c.pid), Some(42));
    let err = plan(&["--mysql-port", "3307", "--scenarios", "passthrough"]).unwrap_err();
    assert!(err.to_string().contains("--sluice-host"), "{err}");
    let err = plan(&["--mysql-port", "3307", "--scenarios", "cached"]).unwrap_err();
    assert!(err.to_string().contains("--cached-host"), "{err}");
    assert!(plan(&["--sluice-pid", "42"]).is_err());
    assert!(plan(&["--cached-pid", "42"]).is_err());
}

#[test]
fn bad_values_are_refused() {
    assert!(plan(&["--threads", "0"]).is_err());
    assert!(plan(&["--duration", "1500ms"]).is_err());
    assert!(plan(&["--duration", "0s"]).is_err());
    assert!(plan(&["--repeat", "0"]).is_err());
    assert!(plan(&["--tables", "0"]).is_err());
    assert!(plan(&["--workloads", "oltp_write_only"]).is_err());
    assert!(plan(&["--ps-modes", "sometimes"]).is_err());
    assert!(plan(&["--insert-trx", "0,10"]).is_err());
    assert!(plan(&["--insert-clients", "0"]).is_err());
    assert!(plan(&["--insert-rows", "3"]).is_err());
    assert!(plan(&["--insert-schema", "sbtest"]).is_err());
    assert!(plan(&["--workloads", "insert", "--scenarios", "cached"]).is_err());
    // Without the insert workload its flags are not checked.
    assert!(plan(&["--workloads", "read_only", "--insert-rows", "3"]).is_ok());
    let p = plan(&["--duration", "2m", "--ps-modes", "disable"]).unwrap();
    assert_eq!(p.duration_secs, 120);
    assert_eq!(p.ps_modes, [PsMode::Disable]);
}

#[test]
fn large_ramps_are_checked_against_the_descriptor_limit() {
    assert_eq!(descriptor_shortage(2048, Some(65536)), None);
    assert_eq!(descriptor_shortage(2048, None), None);
    let note = descriptor_shortage(2048, Some(1024)).unwrap();
    assert!(note.contains("1024") && note.contains("4196"), "{note}");
    let p = plan(&["--threads", "1,2048"]).unwrap();
    assert_eq!(p.max_connections, 8292);
    // 64 x 2048 x 9 prepared statements are more than any MariaDB allows.
    assert!(
        p.notes.iter().any(|n| n.contains("error 1461")),
        "{:?}",
        p.notes
    );
    assert!(!plan(&["--threads", "1,256"])
        .unwrap()
        .notes
        .iter()
        .any(|n| n.contains("1461")));
    assert_eq!(p.pool_max(), 2064);
    // This process can read its own limit.
    assert!(hard_nofile_limit().is_some_and(|l| l > 0));
}

#[test]
fn caching_by_table_runs_only_when_asked_for() {
    assert!(!plan(&[])
        .unwrap()
        .scenarios
        .contains(&Scenario::CachedByTable));
    assert!(!plan(&["--demo"])
        .unwrap()
        .scenarios
        .contains(&Scenario::CachedByTable));
    let p = plan(&[
        "--scenarios",
        "direct,passthrough,cached,cached_by_table",
        "--workloads",
        "read_write,insert",
        "--threads",
        "16,64",
        "--insert-trx",
        "10",
    ])
    .unwrap();
    assert!(p.embedded());
    use Scenario::*;
    assert_eq!(p.scenarios, [Direct, Passthrough, Cached, CachedByTable]);
    let o = order(&p);
    // Every step: four turns; the insert series: direct and passthrough only.
    assert_eq!(o.len(), 2 * 4 + 2);
    let at_16: Vec<Scenario> = o.iter().filter(|s| s.2 == 16).map(|s| s.4).collect();
    assert_eq!(at_16, [Direct, Passthrough, Cached, CachedByTable]);
    assert_eq!(
        o[8..],
        [
            (Workload::Insert, None, 10, 1, Direct),
            (Workload::Insert, None, 10, 1, Passthrough),
        ]
    );
    // The spelling of its Display is taken too.
    let p = plan(&["--scenarios", "cached-by-table,passthrough"]).unwrap();
    assert_eq!(p.scenarios, [CachedByTable, Passthrough]);
    assert!(plan(&["--workloads", "insert", "--scenarios", "cached_by_table"]).is_err());
}

#[test]
fn caching_by_table_names_itself_apart_from_cached() {
    assert_eq!(Scenario::CachedByTable.to_string(), "cached-by-table");
    assert_eq!(
        serde_json::to_string(&Scenario::CachedByTable).unwrap(),
        "\"cached_by_table\""
    );
    assert!(Scenario::CachedByTable.caches() && Scenario::Cached.caches());
    assert!(!Scenario::Passthrough.caches() && !Scenario::Direct.caches());
}

#[test]
fn an_existing_sluice_caching_by_table_needs_its_flags() {
    let p = plan(&[
        "--mysql-port",
        "3307",
        "--sluice-port",
        "6033",
        "--cached-port",
        "6034",
        "--cached-by-table-port",
        "6035",
        "--cached-by-table-pid",
        "43",
    ])
    .unwrap();
    assert!(!p.embedded());
    use Scenario::*;
    assert_eq!(p.scenarios, [Direct, Passthrough, Cached, CachedByTable]);
    assert_eq!(
        p.cached_by_table,
        Some(SluiceTarget {
            target: Target {
                host: "127.0.0.1".into(),
                port: 6035
            },
            pid: Some(43)
        })
    );
    // Given alone, it is the one scenario run, and the plan is not embedded.
    let p = plan(&[
        "--cached-by-table-host",
        "/run/sluice-bt.sock",
        "--workloads",
        "read_only",
    ])
    .unwrap();
    assert!(!p.embedded());
    assert_eq!(p.scenarios, [CachedByTable]);
    let err = plan(&[
        "--mysql-port",
        "3307",
        "--scenarios",
        "direct,cached_by_table",
    ])
    .unwrap_err();
    assert!(err.to_string().contains("--cached-by-table-host"), "{err}");
    // The other caching Sluice's flags are not its own.
    let err = plan(&[
        "--cached-port",
        "6034",
        "--scenarios",
        "cached,cached_by_table",
    ])
    .unwrap_err();
    assert!(err.to_string().contains("--cached-by-table-port"), "{err}");
    let err = plan(&["--cached-by-table-pid", "43"]).unwrap_err();
    assert!(err.to_string().contains("--cached-by-table-host"), "{err}");
    assert!(plan(&["--demo", "--cached-by-table-port", "6035"]).is_err());
    assert!(plan(&["--hosts", "--cached-by-table-port", "6035"]).is_err());
}

#[test]
fn server_cpus_take_a_cpu_list_for_embedded_servers_only() {
    let cli = Cli::try_parse_from(["bench", "--server-cpus", "0,2-3"]).unwrap();
    assert_eq!(cli.bench.server_cpus, Some(CpuList(vec![0, 2, 3])));
    assert!(Cli::try_parse_from(["bench"])
        .unwrap()
        .bench
        .server_cpus
        .is_none());
    for bad in ["", "one", "3-1"] {
        assert!(plan(&["--server-cpus", bad]).is_err(), "{bad:?}");
    }
    let err = plan(&["--server-cpus", "0", "--mysql-port", "3307"]).unwrap_err();
    assert!(err.to_string().contains("--mysql-port"), "{err}");
}

#[test]
fn haproxy_runs_only_when_asked_for_and_takes_its_turn() {
    use Scenario::*;
    assert!(!plan(&[]).unwrap().scenarios.contains(&Haproxy));
    let p = plan(&[
        "--scenarios",
        "direct,haproxy,passthrough",
        "--workloads",
        "oltp_point_select",
        "--threads",
        "16",
        "--repeat",
        "2",
    ])
    .unwrap();
    assert!(p.embedded());
    let scenarios: Vec<Scenario> = order(&p).into_iter().map(|s| s.4).collect();
    assert_eq!(
        scenarios,
        [Direct, Haproxy, Passthrough, Direct, Haproxy, Passthrough]
    );
    // It relays whatever comes, inserts included: it has its turn in that series too.
    let p = plan(&["--scenarios", "direct,haproxy", "--workloads", "insert"]).unwrap();
    assert_eq!(p.insert.as_ref().unwrap().per_trx, [1, 10, 100, 1000]);
    assert!(order(&p).iter().any(|s| s.4 == Haproxy));
    assert!(Passthrough.is_sluice() && Cached.is_sluice() && CachedByTable.is_sluice());
    assert!(!Haproxy.is_sluice() && !Direct.is_sluice());
    assert_eq!(Haproxy.proxy(), Some("HAProxy"));
    assert_eq!(Direct.proxy(), None);
}

#[test]
fn an_existing_tcp_proxy_needs_its_flags() {
    use Scenario::*;
    let p = plan(&[
        "--mysql-port",
        "3307",
        "--sluice-port",
        "6033",
        "--haproxy-port",
        "3310",
        "--haproxy-pid",
        "44",
    ])
    .unwrap();
    assert!(!p.embedded());
    assert_eq!(p.scenarios, [Direct, Passthrough, Haproxy]);
    assert_eq!(
        p.haproxy,
        Some(SluiceTarget {
            target: Target {
                host: "127.0.0.1".into(),
                port: 3310
            },
            pid: Some(44)
        })
    );
    let err = plan(&["--mysql-port", "3307", "--scenarios", "direct,haproxy"]).unwrap_err();
    assert!(err.to_string().contains("--haproxy-host"), "{err}");
    let err = plan(&["--haproxy-pid", "44"]).unwrap_err();
    assert!(err.to_string().contains("--haproxy-host"), "{err}");
    assert!(plan(&["--demo", "--haproxy-port", "3310"]).is_err());
    assert!(plan(&["--hosts", "--haproxy-port", "3310"]).is_err());
}

#[test]
fn dedicated_runs_only_when_asked_for_and_goes_where_passthrough_goes() {
    use Scenario::*;
    assert!(!plan(&[]).unwrap().scenarios.contains(&Dedicated));
    assert!(!plan(&["--demo"]).unwrap().scenarios.contains(&Dedicated));
    let p = plan(&[
        "--scenarios",
        "direct,passthrough,dedicated,cached",
        "--workloads",
        "read_only,insert",
        "--threads",
        "16",
        "--insert-trx",
        "10",
    ])
    .unwrap();
    assert!(p.embedded());
    assert_eq!(p.scenarios, [Direct, Passthrough, Dedicated, Cached]);
    // Every step, and the insert series too: it serves inserts as passthrough does.
    assert_eq!(
        order(&p),
        [
            (Workload::OltpReadOnly, Some(PsMode::Auto), 16, 1, Direct),
            (
                Workload::OltpReadOnly,
                Some(PsMode::Auto),
                16,
                1,
                Passthrough
            ),
            (Workload::OltpReadOnly, Some(PsMode::Auto), 16, 1, Dedicated),
            (Workload::OltpReadOnly, Some(PsMode::Auto), 16, 1, Cached),
            (Workload::Insert, None, 10, 1, Direct),
            (Workload::Insert, None, 10, 1, Passthrough),
            (Workload::Insert, None, 10, 1, Dedicated),
        ]
    );
    assert!(Dedicated.is_sluice() && !Dedicated.caches());
    assert_eq!(Dedicated.proxy(), Some("Sluice"));
    assert_eq!(Dedicated.to_string(), "dedicated");
    assert_eq!(serde_json::to_string(&Dedicated).unwrap(), "\"dedicated\"");
}

#[test]
fn an_existing_dedicated_sluice_needs_its_flags() {
    use Scenario::*;
    let p = plan(&[
        "--mysql-port",
        "3307",
        "--sluice-port",
        "6033",
        "--dedicated-port",
        "6036",
        "--dedicated-pid",
        "45",
    ])
    .unwrap();
    assert!(!p.embedded());
    // Beside the Sluice it is set against.
    assert_eq!(p.scenarios, [Direct, Passthrough, Dedicated]);
    assert_eq!(
        p.dedicated,
        Some(SluiceTarget {
            target: Target {
                host: "127.0.0.1".into(),
                port: 6036
            },
            pid: Some(45)
        })
    );
    let p = plan(&[
        "--dedicated-host",
        "/run/sluice-dedicated.sock",
        "--workloads",
        "read_only",
    ])
    .unwrap();
    assert!(!p.embedded());
    assert_eq!(p.scenarios, [Dedicated]);
    let err = plan(&["--mysql-port", "3307", "--scenarios", "direct,dedicated"]).unwrap_err();
    assert!(err.to_string().contains("--dedicated-host"), "{err}");
    // The pass-through Sluice's flags are not its own.
    let err = plan(&[
        "--sluice-port",
        "6033",
        "--scenarios",
        "passthrough,dedicated",
    ])
    .unwrap_err();
    assert!(err.to_string().contains("--dedicated-port"), "{err}");
    let err = plan(&["--dedicated-pid", "45"]).unwrap_err();
    assert!(err.to_string().contains("--dedicated-host"), "{err}");
    assert!(plan(&["--demo", "--dedicated-port", "6036"]).is_err());
    assert!(plan(&["--hosts", "--dedicated-port", "6036"]).is_err());
    assert!(plan(&["--server-cpus", "0", "--dedicated-host", "db"]).is_err());
}

#[test]
fn tracing_runs_only_when_asked_for_and_takes_its_turn_beside_passthrough() {
    use Scenario::*;
    assert!(!plan(&[]).unwrap().scenarios.iter().any(|s| s.traces()));
    let p = plan(&[
        "--scenarios",
        "passthrough,traced,traced_all",
        "--workloads",
        "oltp_point_select,oltp_read_write_split",
        "--threads",
        "16",
        "--repeat",
        "2",
    ])
    .unwrap();
    assert!(p.embedded());
    assert_eq!(p.otlp_endpoint, None);
    let turns: Vec<(Workload, Scenario)> = order(&p).into_iter().map(|s| (s.0, s.4)).collect();
    let round = |w| [(w, Passthrough), (w, Traced), (w, TracedAll)];
    let point = round(Workload::OltpPointSelect);
    let split = round(Workload::OltpReadWriteSplit);
    assert_eq!(turns, [point, point, split, split].concat());
    // No cached scenario: nothing to measure the staleness of.
    assert_eq!(p.staleness, None);
    assert!(Traced.is_sluice() && !Traced.caches() && Traced.traces());
    assert!(!Passthrough.traces() && !Cached.traces());
    assert_eq!(TracedAll.to_string(), "traced-all");
    assert_eq!(serde_json::to_string(&TracedAll).unwrap(), "\"traced_all\"");
    assert_eq!(TracedAll.role(), Some(Role::TracedAll));
    assert_eq!(Role::Traced.sample_ratio(), Some(0.01));
    assert_eq!(Role::TracedAll.sample_ratio(), Some(1.0));
    assert_eq!(Role::Passthrough.sample_ratio(), None);
    // An existing receiver instead of a Jaeger of the benchmark's own.
    let p = plan(&[
        "--scenarios",
        "passthrough,traced",
        "--otlp-endpoint",
        "http://127.0.0.1:4318",
    ])
    .unwrap();
    assert!(p.embedded());
    assert_eq!(p.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
}

#[test]
fn existing_traced_sluices_need_their_flags() {
    use Scenario::*;
    let p = plan(&[
        "--sluice-port",
        "6033",
        "--traced-port",
        "6037",
        "--traced-pid",
        "46",
        "--traced-all-port",
        "6038",
    ])
    .unwrap();
    assert!(!p.embedded());
    assert_eq!(p.scenarios, [Passthrough, Traced, TracedAll]);
    assert_eq!(
        p.traced.as_ref().map(|t| (t.target.port, t.pid)),
        Some((6037, Some(46)))
    );
    assert_eq!(p.traced_all.as_ref().map(|t| t.target.port), Some(6038));
    let err = plan(&["--sluice-port", "6033", "--scenarios", "passthrough,traced"]).unwrap_err();
    assert!(err.to_string().contains("--traced-host"), "{err}");
    let err = plan(&["--sluice-port", "6033", "--scenarios", "traced_all"]).unwrap_err();
    assert!(err.to_string().contains("--traced-all-host"), "{err}");
    let err = plan(&["--traced-pid", "46"]).unwrap_err();
    assert!(err.to_string().contains("--traced-host"), "{err}");
    let err = plan(&["--traced-all-pid", "46"]).unwrap_err();
    assert!(err.to_string().contains("--traced-all-host"), "{err}");
    // An existing traced Sluice exports where its own configuration says.
    assert!(plan(&["--traced-port", "6037", "--otlp-endpoint", "http://x:4318"]).is_err());
    assert!(plan(&["--demo", "--traced-port", "6037"]).is_err());
    assert!(plan(&["--hosts", "--traced-all-port", "6038"]).is_err());
}

#[test]
fn staleness_is_measured_once_with_the_cached_scenario() {
    let p = plan(&[]).unwrap();
    assert_eq!(
        p.staleness,
        Some(staleness::Settings {
            samples: 200,
            timeout: Duration::from_secs(5)
        })
    );
    assert_eq!(plan(&["--demo"]).unwrap().staleness.unwrap().samples, 50);
    assert_eq!(plan(&["--skip-staleness"]).unwrap().staleness, None);
    let p = plan(&["--scenarios", "direct,passthrough"]).unwrap();
    assert_eq!(p.staleness, None);
    assert!(plan(&["--staleness-samples", "0"]).is_err());
}
