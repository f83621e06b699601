//! Two Sluice instances in front of one replica set, the same configuration and no
//! coordination configured: the primary killed under writes through both gives one
//! promotion and one writable server, and both instances route writes to it.

use super::failover::failover_config;
use super::routing::{admin_get, replica_set, ADMIN_TOKEN};
use crate::support::wire::{RawConn, Reply};
use crate::support::{free_port, wait_until, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER};
use sluice_sandbox::MariaDb;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Inserts ids `first, first + step, ...` through `addr` until stopped; the ids
/// acknowledged, with when.
fn writer(
    addr: std::net::SocketAddr,
    first: i64,
    step: i64,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(i64, Instant)>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut conn: Option<RawConn> = None;
        let mut id = first;
        while !stop.load(Ordering::Relaxed) {
            if conn.is_none() {
                conn = RawConn::login(addr, NATIVE_USER, NATIVE_PASSWORD, None).ok();
            }
            if let Some(c) = conn.as_mut() {
                match c.query(&format!("INSERT INTO wl.acks VALUES ({id})")) {
                    Ok(Reply::Ok { .. }) => acked.lock().unwrap().push((id, Instant::now())),
                    Ok(_) => {}
                    Err(_) => conn = None,
                }
            }
            id += step;
            // Paces the writes; the writer's own loop, not a synchronisation.
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

fn writable(server: &MariaDb) -> bool {
    server
        .execute("SELECT @@read_only")
        .is_ok_and(|out| out.lines().last() == Some("0"))
}

fn writer_of(sluice: &Sluice, config: &Config) -> Option<String> {
    admin_get(sluice, config, "/v1/servers")["writer"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn two_instances_fail_over_once_to_one_writer() {
    let set = replica_set(true);
    set.primary
        .execute("CREATE DATABASE wl; CREATE TABLE wl.acks (id BIGINT PRIMARY KEY)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    let config_a = failover_config(&set);
    let mut config_b = config_a.clone().admin(ADMIN_TOKEN);
    config_b.listeners[0].address = format!("127.0.0.1:{}", free_port());
    let a = Sluice::start(&config_a);
    let b = Sluice::start(&config_b);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let threads = [
        writer(a.addr(), 1, 2, stop.clone(), acked.clone()),
        writer(b.addr(), 2, 2, stop.clone(), acked.clone()),
    ];
    let through = |parity: i64| {
        let acked = acked.clone();
        move |since: Instant| {
            acked
                .lock()
                .unwrap()
                .iter()
                .any(|(id, t)| id % 2 == parity && *t > since)
        }
    };
    let (via_a, via_b) = (through(1), through(0));
    let start = Instant::now();
    assert!(wait_until(Duration::from_secs(10), || via_a(start) && via_b(start)));

    let killed_at = Instant::now();
    set.primary.kill().unwrap();
    let moved = |s: &Sluice, c: &Config| writer_of(s, c).is_some_and(|w| w != "primary");
    assert!(
        wait_until(Duration::from_secs(30), || moved(&a, &config_a)
            && moved(&b, &config_b)
            && writer_of(&a, &config_a) == writer_of(&b, &config_b)
            && via_a(killed_at)
            && via_b(killed_at)),
        "the instances did not agree on a writer taking writes through both\nA: {}\nB: {}\n\
         --- A ---\n{}\n--- B ---\n{}",
        admin_get(&a, &config_a, "/v1/servers"),
        admin_get(&b, &config_b, "/v1/servers"),
        a.log(),
        b.log()
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }

    let failovers = |s: &Sluice, c: &Config| {
        admin_get(s, c, "/v1/servers")["stats"]["failovers"]
            .as_u64()
            .unwrap_or(0)
    };
    // The promoting instance counts its failover once the other replica is repointed,
    // after writes already go to the new writer.
    let total = || failovers(&a, &config_a) + failovers(&b, &config_b);
    wait_until(Duration::from_secs(20), || total() > 0);
    assert_eq!(
        total(),
        1,
        "one promotion in all\n--- A ---\n{}\n--- B ---\n{}",
        a.log(),
        b.log()
    );
    let writers: Vec<&MariaDb> = set.replicas.iter().filter(|r| writable(r)).collect();
    assert_eq!(writers.len(), 1, "one writable server");
    let name = writer_of(&a, &config_a).unwrap();
    let new = match name.as_str() {
        "replica1" => &set.replicas[0],
        "replica2" => &set.replicas[1],
        other => panic!("writer {other}"),
    };
    assert!(
        std::ptr::eq(new, writers[0]),
        "both route writes to {name}, the writable one"
    );
    // Every write acknowledged through either instance is on it.
    let on_new: std::collections::HashSet<i64> = new
        .execute("SELECT id FROM wl.acks")
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let lost: Vec<i64> = acked
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !on_new.contains(id))
        .collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}
