//! Several Sluice instances in front of one replica set, the same configuration and no
//! coordination configured: the primary killed under writes through all of them (and an
//! instance with it) gives one promotion and one writable server, and every instance
//! left routes writes to it.

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
pub(crate) fn writer(
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

pub(crate) fn writable(server: &MariaDb) -> bool {
    server
        .execute("SELECT @@read_only")
        .is_ok_and(|out| out.lines().last() == Some("0"))
}

pub(crate) fn writer_of(sluice: &Sluice, config: &Config) -> Option<String> {
    admin_get(sluice, config, "/v1/servers")["writer"]
        .as_str()
        .map(str::to_owned)
}

/// `n` instances with the same configuration, writes through each (ids `i + 1`, step
/// `n`), the primary SIGKILLed, and with it the first instance when `kill_first`: the
/// survivors agree on one writer, the only writable server, promoted once, holding
/// every write acknowledged through any instance.
pub(crate) fn fail_over_with(n: usize, kill_first: bool, adjust: impl Fn(Config) -> Config) {
    let set = replica_set(true);
    set.primary
        .execute("CREATE DATABASE wl; CREATE TABLE wl.acks (id BIGINT PRIMARY KEY)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    let first = adjust(failover_config(&set));
    let configs: Vec<Config> = (0..n)
        .map(|i| {
            if i == 0 {
                return first.clone();
            }
            let mut c = first.clone().admin(ADMIN_TOKEN);
            c.listeners[0].address = format!("127.0.0.1:{}", free_port());
            c
        })
        .collect();
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let step = n as i64;
    let threads: Vec<_> = instances
        .iter()
        .enumerate()
        .map(|(i, s)| writer(s.addr(), i as i64 + 1, step, stop.clone(), acked.clone()))
        .collect();
    let through = |i: usize, since: Instant| {
        acked
            .lock()
            .unwrap()
            .iter()
            .any(|(id, t)| (id - 1) % step == i as i64 && *t > since)
    };
    let start = Instant::now();
    assert!(wait_until(Duration::from_secs(10), || (0..n)
        .all(|i| through(i, start))));

    let killed_at = Instant::now();
    set.primary.kill().unwrap();
    if kill_first {
        sluice_sandbox::send_signal(instances[0].pid(), "KILL").unwrap();
    }
    let survivors: Vec<usize> = (usize::from(kill_first)..n).collect();
    let writer_at = |i: usize| writer_of(&instances[i], &configs[i]);
    let logs = || {
        survivors
            .iter()
            .map(|&i| format!("--- instance {i} ---\n{}", instances[i].log()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        wait_until(Duration::from_secs(30), || {
            let w = writer_at(survivors[0]);
            w.as_deref().is_some_and(|w| w != "primary")
                && survivors
                    .iter()
                    .all(|&i| writer_at(i) == w && through(i, killed_at))
        }),
        "the survivors did not agree on a writer taking writes through each\n{}",
        logs()
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }

    let failovers = |i: usize| {
        admin_get(&instances[i], &configs[i], "/v1/servers")["stats"]["failovers"]
            .as_u64()
            .unwrap_or(0)
    };
    // The promoting instance counts its failover once the other replica is repointed,
    // after writes already go to the new writer.
    let total = || survivors.iter().map(|&i| failovers(i)).sum::<u64>();
    wait_until(Duration::from_secs(20), || total() > 0);
    assert_eq!(total(), 1, "one promotion in all\n{}", logs());
    let writers: Vec<&MariaDb> = set.replicas.iter().filter(|r| writable(r)).collect();
    assert_eq!(writers.len(), 1, "one writable server");
    let name = writer_at(survivors[0]).unwrap();
    let new = match name.as_str() {
        "replica1" => &set.replicas[0],
        "replica2" => &set.replicas[1],
        other => panic!("writer {other}"),
    };
    assert!(
        std::ptr::eq(new, writers[0]),
        "all route writes to {name}, the writable one"
    );
    // Every write acknowledged through any instance is on it.
    let acked: Vec<i64> = acked.lock().unwrap().iter().map(|(id, _)| *id).collect();
    let lost = missing_on(new, "wl.acks", &acked);
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

/// The ids of `acked` that `table` (of one `id` column) on `server` lacks.
pub(crate) fn missing_on(server: &MariaDb, table: &str, acked: &[i64]) -> Vec<i64> {
    let on: std::collections::HashSet<i64> = server
        .execute(&format!("SELECT id FROM {table}"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.trim().parse().unwrap())
        .collect();
    acked
        .iter()
        .copied()
        .filter(|id| !on.contains(id))
        .collect()
}

#[test]
fn two_instances_fail_over_once_to_one_writer() {
    // The product's default: in a fleet, coordinated through the servers.
    fail_over_with(2, false, |c| c.fleet("enabled", true));
}

/// The primary and an instance SIGKILLed together: the two left complete the failover
/// between them, once.
#[test]
fn three_instances_one_killed_with_the_primary_fail_over_once() {
    fail_over_with(3, true, |c| c.fleet("enabled", true));
}
