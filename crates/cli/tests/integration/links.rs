//! The sandbox's delay links (what the zone and host benchmarks put between simulated
//! hosts): a link adds the delay it is given, each way, on top of what relaying costs by
//! itself, and carries the MySQL protocol unchanged.

use crate::support::{dedicated_server, fresh_database, MariaDbOptions};
use crate::sysbench::{deadlocks, statistic, sysbench};
use sluice_sandbox::link::{relay_cost, round_trip, round_trips, DelayLink, EchoServer, LinkSpec};
use std::time::Duration;

/// One try through a fresh link of `one_way`: whether the median round trip is the delay
/// there and back plus the relay's `cost`, within 10% of the delay; never early.
fn measure_link(echo: &EchoServer, one_way: Duration, cost: Duration) -> (bool, String) {
    let link = DelayLink::start(echo.addr(), LinkSpec::delay(one_way)).unwrap();
    let mut times = round_trips(link.addr(), 50).unwrap();
    let stats = link.stats();
    assert_eq!((stats.bytes_forward, stats.bytes_back), (55, 55));
    times.sort();
    assert!(
        times[0] >= 2 * one_way,
        "{:?} for {one_way:?} each way",
        times[0]
    );
    let median = times[times.len() / 2];
    let expected = 2 * one_way + cost;
    let seen = format!(
        "median {median:?}, expected {expected:?} (relay's own cost {cost:?}), late \
         {:?} a crossing on average, {:?} at worst",
        stats.mean_late, stats.worst_late
    );
    (median.abs_diff(expected) <= 2 * one_way / 10, seen)
}

/// Delays of milliseconds, so that what other tests' load adds to a wake-up (a few
/// hundred microseconds at worst here) stays inside the 10%; the benchmarks' shorter
/// delays are reported with the lateness each link measured.
#[test]
fn a_link_adds_the_delay_it_is_given() {
    let echo = EchoServer::start().unwrap();
    let cost = relay_cost(200).unwrap();
    for millis in [2, 5] {
        let one_way = Duration::from_millis(millis);
        // A few tries: a burst of load elsewhere can stall the client or the echo too;
        // a link adding the wrong delay fails them all.
        let mut seen = Vec::new();
        let ok = (0..5).any(|_| {
            let (ok, what) = measure_link(&echo, one_way, cost);
            seen.push(what);
            ok
        });
        assert!(
            ok,
            "{one_way:?} each way, every try off:\n{}",
            seen.join("\n")
        );
    }
}

#[test]
fn jitter_varies_the_delay_but_keeps_the_order() {
    let echo = EchoServer::start().unwrap();
    let spec = LinkSpec {
        one_way: Duration::from_micros(800),
        jitter: Duration::from_micros(400),
    };
    let link = DelayLink::start(echo.addr(), spec).unwrap();
    // Many chunks in flight at once: what comes back is what went, in order.
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(link.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let sent: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let writer = {
        let mut w = s.try_clone().unwrap();
        let sent = sent.clone();
        std::thread::spawn(move || {
            for piece in sent.chunks(997) {
                w.write_all(piece).unwrap();
            }
        })
    };
    let mut got = vec![0u8; sent.len()];
    s.read_exact(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == sent, "bytes came back changed or out of order");
    let rtt = round_trip(link.addr(), 50).unwrap();
    assert!(
        rtt >= Duration::from_micros(800) && rtt < Duration::from_millis(20),
        "{rtt:?}"
    );
}

#[test]
fn sysbench_runs_through_a_link_without_an_error() {
    let server = dedicated_server(MariaDbOptions::default());
    let database = "sbtest";
    fresh_database(&server, database);
    let (code, output) = sysbench(server.port(), database, &[], "prepare");
    assert_eq!(code, Some(0), "sysbench prepare failed:\n{output}");
    let link =
        DelayLink::start(server.addr(), LinkSpec::delay(Duration::from_micros(200))).unwrap();
    let before = deadlocks(&server);
    let args = [
        "--threads=4".to_owned(),
        "--time=5".to_owned(),
        "--report-interval=0".to_owned(),
    ];
    let (code, output) = sysbench(link.port(), database, &args, "run");
    assert_eq!(code, Some(0), "{output}");
    assert!(!output.contains("FATAL"), "{output}");
    assert!(statistic(&output, "transactions").unwrap() > 0, "{output}");
    let ignored = statistic(&output, "ignored errors").unwrap();
    assert!(ignored <= deadlocks(&server) - before, "{output}");
    assert_eq!(statistic(&output, "reconnects"), Some(0), "{output}");
    let stats = link.stats();
    assert!(stats.connections >= 4, "{stats:?}");
    assert!(stats.bytes_forward > 0 && stats.bytes_back > 0, "{stats:?}");
}
