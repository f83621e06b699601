//! Two Sluice instances in a fleet in front of a primary and two replicas, one of them
//! cut off from some servers by a partition (gates between it and them; the servers
//! still reach each other, and the other instance reaches everything). The cut-off
//! instance loses the writer but never promotes: not when it reaches only a minority of
//! the servers, and not when it reaches a majority whose replicas still replicate from
//! the writer. The other instance's writes go on throughout, and once the partition
//! heals the cut-off instance writes to the same writer as before.

use super::failover::failover_config;
use super::routing::{admin_get, replica_set, ADMIN_TOKEN};
use super::writer_lock::{writable, writer, writer_of};
use crate::support::gate::Gate;
use crate::support::proxy::Server;
use crate::support::{free_port, wait_until, Config, Sluice};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Cuts the first instance off from the servers numbered in `cut` (0 the primary, 1
/// and 2 the replicas) and checks that nothing is promoted, and that `refusal` is what
/// that instance says of the lost writer.
fn cut_off_from(cut: &[usize], refusal: &str) {
    let set = replica_set(true);
    set.primary
        .execute("CREATE DATABASE wl; CREATE TABLE wl.acks (id BIGINT PRIMARY KEY)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    let servers = [&set.primary, &set.replicas[0], &set.replicas[1]];
    let gates: Vec<Gate> = servers.iter().map(|s| Gate::new(s.addr())).collect();
    let direct = failover_config(&set).fleet("enabled", true);
    let mut gated = direct.clone().admin(ADMIN_TOKEN);
    gated.listeners[0].address = format!("127.0.0.1:{}", free_port());
    gated.servers = direct
        .servers
        .iter()
        .zip(&gates)
        .map(|(s, g)| Server::new(&s.name, g.addr()))
        .collect();
    let configs = [gated, direct];
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = instances
        .iter()
        .enumerate()
        .map(|(i, s)| writer(s.addr(), i as i64 + 1, 2, stop.clone(), acked.clone()))
        .collect();
    let through = |i: i64, since: Instant| {
        acked
            .lock()
            .unwrap()
            .iter()
            .any(|(id, t)| (id - 1) % 2 == i && *t > since)
    };
    let start = Instant::now();
    assert!(wait_until(Duration::from_secs(10), || through(0, start)
        && through(1, start)));

    let cut_at = Instant::now();
    for &i in cut {
        gates[i].close();
    }
    let (a, b) = (&instances[0], &instances[1]);
    let primary_down_for_a = || {
        admin_get(a, &configs[0], "/v1/servers")["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "primary" && m["health"] == "down")
    };
    assert!(
        wait_until(Duration::from_secs(20), primary_down_for_a),
        "{}",
        a.log()
    );
    assert!(
        wait_until(Duration::from_secs(20), || a.log().contains(refusal)),
        "the cut-off instance did not say why it does not fail over:\n{}",
        a.log()
    );
    // The other instance wrote on through the partition, to the same writer.
    let seen = Instant::now();
    assert!(wait_until(Duration::from_secs(10), || through(1, seen)));
    assert_eq!(writer_of(b, &configs[1]).as_deref(), Some("primary"));
    assert!(
        set.replicas.iter().all(|r| !writable(r)),
        "a replica was promoted by the cut-off instance:\n{}",
        a.log()
    );

    for g in &gates {
        g.open();
    }
    // A write held by the closed gate is acknowledged once it opens: the instance
    // writes again only once its monitor has seen the writer back.
    assert!(
        wait_until(Duration::from_secs(30), || writer_of(a, &configs[0])
            .as_deref()
            == Some("primary")),
        "the cut-off instance takes the writer back once the partition heals:\n{}",
        a.log()
    );
    let healed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(30), || through(0, healed)),
        "the cut-off instance writes again once the partition heals:\n{}",
        a.log()
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(writer_of(a, &configs[0]).as_deref(), Some("primary"));
    assert!(set.primary.execute("SELECT 1").is_ok() && writable(&set.primary));
    assert!(set.replicas.iter().all(|r| !writable(r)));
    let failovers = |i: usize| {
        admin_get(&instances[i], &configs[i], "/v1/servers")["stats"]["failovers"]
            .as_u64()
            .unwrap_or(0)
    };
    assert_eq!(failovers(0) + failovers(1), 0);
    assert!(cut_at.elapsed() < Duration::from_secs(120));
}

/// It reaches one server of three: a majority of all the servers, the lost writer
/// counted, is out of its reach.
#[test]
fn an_instance_reaching_a_minority_of_the_servers_never_promotes() {
    cut_off_from(
        &[0, 1],
        "this instance reaches 1 of the 3 servers and needs 2",
    );
}

/// It reaches both replicas, a majority, but they still replicate from the writer:
/// only this instance lost it.
#[test]
fn an_instance_cut_off_from_the_writer_alone_never_promotes() {
    cut_off_from(&[0], "still replicate from it: only this instance lost it");
}

/// The gate itself: closed, a query through it gets no answer; opened, the answer
/// held comes through.
#[test]
fn a_closed_gate_holds_traffic_until_opened() {
    let server = crate::support::shared_server();
    let gate = Gate::new(server.addr());
    let config = Config::new(gate.addr());
    let sluice = Sluice::start(&config);
    let mut c = crate::support::wire::RawConn::login(
        sluice.addr(),
        crate::support::NATIVE_USER,
        crate::support::NATIVE_PASSWORD,
        None,
    )
    .unwrap();
    assert!(c.query("SELECT 1").is_ok());
    gate.close();
    let (tx, rx) = std::sync::mpsc::channel();
    let asking = std::thread::spawn(move || {
        let _ = tx.send(c.query("SELECT 2").is_ok());
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "an answer crossed a closed gate"
    );
    gate.open();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true));
    asking.join().unwrap();
}

/// A set of three whose writer is lost after a replica: by default no failover (one
/// server of three is no majority), and the instance says why; with `failover.quorum
/// = "majority_of_running"`, the last replica is promoted.
fn lose_a_replica_then_the_writer(quorum: Option<&str>) -> (bool, String) {
    let set = replica_set(true);
    let mut config = failover_config(&set);
    if let Some(q) = quorum {
        config = config.failover("quorum", q);
    }
    let sluice = Sluice::start(&config);
    let health = |name: &str| {
        admin_get(&sluice, &config, "/v1/servers")["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| m["health"].as_str().unwrap_or("").to_owned())
    };
    assert!(wait_until(Duration::from_secs(10), || health("replica2")
        .as_deref()
        == Some("up")));
    set.replicas[0].kill().unwrap();
    assert!(wait_until(Duration::from_secs(10), || health("replica1")
        .as_deref()
        == Some("down")));
    set.primary.kill().unwrap();
    let promoted = wait_until(Duration::from_secs(20), || {
        writer_of(&sluice, &config).as_deref() == Some("replica2")
            || sluice
                .log()
                .contains("writer unreachable, not failing over")
    });
    assert!(promoted, "{}", sluice.log());
    (writable(&set.replicas[1]), sluice.log())
}

#[test]
fn a_set_of_three_that_lost_two_servers_waits_unless_told_otherwise() {
    let (promoted, log) = lose_a_replica_then_the_writer(None);
    assert!(!promoted, "{log}");
    assert!(
        log.contains("this instance reaches 1 of the 3 servers and needs 2"),
        "{log}"
    );
    let (promoted, log) = lose_a_replica_then_the_writer(Some("majority_of_running"));
    assert!(promoted, "{log}");
}
