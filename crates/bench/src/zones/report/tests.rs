use super::super::{LinkLoad, ServerLoad};
use super::*;
use crate::report::Machine;
use crate::sysbench::DataSet;

const ONE_WAY_US: [f64; 4] = [1000.0, 100.0, 1000.0, 1000.0];

fn servers() -> Vec<ServerInfo> {
    ["primary", "replica1", "replica2", "replica3"]
        .iter()
        .zip(["b", "a", "b", "c"])
        .zip(ONE_WAY_US)
        .enumerate()
        .map(|(i, ((name, zone), one_way_us))| ServerInfo {
            name: name.to_string(),
            zone: zone.to_string(),
            address: "127.0.0.1:1".into(),
            one_way_us,
            role: if i == 0 { "writer" } else { "reader" }.into(),
            idle_selects_per_sec: Some(2.0),
        })
        .collect()
}

/// A run of `tps` transactions a second, 14 reads each, its SELECTs as given.
fn run(mode: Mode, placement: Placement, threads: u32, tps: f64, selects: [u64; 4]) -> Run {
    Run {
        mode,
        placement,
        threads,
        repetition: 1,
        tps: Some(tps),
        qps: Some(tps * 14.0),
        avg_ms: Some(f64::from(threads) * 1000.0 / tps),
        p95_ms: Some(5.0),
        errors: Some(0),
        failure: None,
        command: String::new(),
        output_file: String::new(),
        wall_secs: 5.0,
        cpu_busy: Some(0.9),
        servers: ["primary", "replica1", "replica2", "replica3"]
            .iter()
            .zip(selects)
            .map(|(name, n)| ServerLoad {
                name: name.to_string(),
                reads: (mode != Mode::Direct).then_some(n),
                writes: (mode != Mode::Direct).then_some(0),
                com_select: Some(n + 10),
                selects: Some(n),
                ttfb_ms: (mode != Mode::Direct).then_some(1.0),
            })
            .collect(),
        reads_to_readers: None,
        reads_to_writer: None,
        links: LinkLoad {
            links: 4,
            chunks: 1000,
            mean_late_us: Some(12.0),
            worst_late_us: Some(900.0),
        },
    }
}

fn results(runs: Vec<Run>) -> Results {
    Results {
        command: "sluice bench zones".into(),
        started_at: String::new(),
        finished_at: None,
        error: None,
        sluice_version: String::new(),
        sysbench_version: String::new(),
        mariadb_version: Some("10.11".into()),
        machine: Machine::detect(),
        duration_secs: 5,
        repeat: 1,
        data: DataSet {
            tables: 2,
            table_size: 1_000,
        },
        backend_connections: 64,
        intra_zone_us: 100.0,
        cross_zone_us: 1000.0,
        jitter_us: 0.0,
        relay_cost_us: Some(25.0),
        servers: servers(),
        sluice_commands: Vec::new(),
        prepare_command: None,
        runs,
        summary: Vec::new(),
        comparison: Vec::new(),
        reads: Vec::new(),
    }
}

#[test]
fn ratios_round_trips_and_shares() {
    use Mode::*;
    use Placement::*;
    let mut r = results(vec![
        run(Direct, Colocated, 8, 250.0, [1000, 0, 0, 0]),
        run(Primary, Colocated, 8, 240.0, [1000, 0, 0, 0]),
        run(Nearest, Colocated, 8, 720.0, [0, 3000, 0, 0]),
        run(Spread, Colocated, 8, 480.0, [0, 1200, 400, 400]),
        run(Primary, ClientHop, 8, 220.0, [900, 0, 0, 0]),
        run(Nearest, ClientHop, 8, 500.0, [0, 2000, 0, 0]),
        run(Spread, ClientHop, 8, 400.0, [0, 1000, 500, 500]),
    ]);
    r.summary = summarize(&r);
    r.comparison = compare(&r.summary);
    r.reads = reads(&r.runs);

    assert_eq!(r.summary.len(), 7);
    assert_eq!(
        (r.summary[0].mode, r.summary[4].placement),
        (Direct, ClientHop)
    );
    let primary = &r.summary[1];
    // 8 threads at 240 tps: 33.3 ms a transaction, 14 reads: 2.38 ms a read.
    assert!((primary.ms_per_read.unwrap() - 8000.0 / 240.0 / 14.0).abs() < 1e-9);
    assert!((primary.round_trip_ms.unwrap() - 2.0).abs() < 1e-9);
    assert!((r.summary[2].round_trip_ms.unwrap() - 0.2).abs() < 1e-9);
    // Spread: 60% of the reads 0.2 ms away, 40% 2 ms away.
    assert!((r.summary[3].round_trip_ms.unwrap() - (0.6 * 0.2 + 0.4 * 2.0)).abs() < 1e-9);
    // One hop more: 0.2 ms on top.
    assert!((r.summary[5].round_trip_ms.unwrap() - 0.4).abs() < 1e-9);

    assert_eq!(r.comparison.len(), 2);
    let colocated = &r.comparison[0];
    assert_eq!(colocated.ratio, Some(3.0));
    assert_eq!(colocated.spread_ratio, Some(2.0));
    assert_eq!(colocated.direct_tps, Some(250.0));
    assert_eq!(colocated.published_ratio, 1.5);
    let hop = &r.comparison[1];
    assert!((hop.ratio.unwrap() - 500.0 / 220.0).abs() < 1e-9);
    assert_eq!((hop.published_ratio, hop.direct_tps), (1.3, None));

    let spread = r
        .reads
        .iter()
        .find(|row| row.mode == Spread && row.placement == Colocated)
        .unwrap();
    assert_eq!(spread.servers[1].share, Some(0.6));
    assert_eq!(spread.servers[1].statements_share, Some(0.6));
    assert_eq!(spread.servers[2].selects, 400);

    let md = document(&r).markdown();
    assert!(
        md.contains("| colocated | 8 | 240 | 720 | 3.00 | 1.50 | 480 | 2.00 | 250 |"),
        "{md}"
    );
    assert!(
        md.contains("| client_hop | 8 | 220 | 500 | 2.27 | 1.30 | 400 | 1.82 | — |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| colocated | spread | 8 | 0.0% (0) | 60.0% (1,200) | 20.0% (400) | 20.0% (400) \
             | 0 / 1,200 / 400 / 400 | — / 1.00 / 1.00 / 1.00 |"
        ),
        "{md}"
    );
    assert!(
        md.contains("client beside Sluice 3.00 at 8 threads (published 1.50)"),
        "{md}"
    );
    assert!(
        md.contains("latency-aware balancing already favours the near replica"),
        "{md}"
    );
    assert!(md.contains("bound by CPU per read"), "{md}");
    // 2.381 ms on the primary, 0.794 ms on the near replica: two thirds saved.
    assert!(
        md.contains("saved 1.587 ms a read, 66.7% of a primary read; the published 1.50x is a saving of 33.3%"),
        "{md}"
    );
    assert!(md.contains("25.0 µs per round trip"), "{md}");
    assert!(
        md.contains("waited about 24 µs more than configured"),
        "{md}"
    );
    assert!(md.contains("| primary | b | 1000 | writer | 2.0 |"), "{md}");
}

#[test]
fn failures_and_a_falling_ratio_read_as_such() {
    use Mode::*;
    use Placement::*;
    let mut failed = run(Nearest, Colocated, 32, 0.0, [0; 4]);
    (failed.tps, failed.qps, failed.failure) = (None, None, Some("sysbench died".into()));
    let mut r = results(vec![
        run(Primary, Colocated, 8, 200.0, [1000, 0, 0, 0]),
        run(Nearest, Colocated, 8, 600.0, [0, 3000, 0, 0]),
        run(Spread, Colocated, 8, 300.0, [0, 400, 300, 300]),
        run(Primary, Colocated, 16, 400.0, [1000, 0, 0, 0]),
        run(Nearest, Colocated, 16, 700.0, [0, 3000, 0, 0]),
        run(Primary, Colocated, 32, 500.0, [1000, 0, 0, 0]),
        failed,
    ]);
    r.summary = summarize(&r);
    r.comparison = compare(&r.summary);
    r.reads = reads(&r.runs);
    let md = document(&r).markdown();
    assert!(
        md.contains("| colocated | 32 | 500 | FAILED | n/a |"),
        "{md}"
    );
    assert!(
        md.contains("nearest colocated, 32 threads, run 1: sysbench died"),
        "{md}"
    );
    assert!(
        md.contains("the ratio falls from 3.00 at 8 threads to 1.75 at 16"),
        "{md}"
    );
    assert!(
        md.contains("replica1 ran 40.0% of the SELECTs (primary 0.0%, replica2 30.0%, replica3 30.0%) where equal weights give 33.3%: latency-aware balancing favours the near replica only a little"),
        "{md}"
    );
}
