//! A shard is a cluster of its own: its primary killed, one of its replicas takes over,
//! while the other shard serves on without one error.

use crate::routing::{admin_get, config, login, ok, replica_set};
use crate::sharding::ids;
use crate::support::proxy::Server;
use crate::support::wire::Reply;
use crate::support::{dedicated_server, wait_until, MariaDbOptions, Sluice};
use sluice_sandbox::{REPL_PASSWORD, REPL_USER};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SCHEMA: &str = "CREATE DATABASE shop; \
    CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(20))";

#[test]
fn a_failover_inside_one_shard_leaves_the_other_serving() {
    let set = replica_set(true);
    let other = dedicated_server(MariaDbOptions::default());
    set.primary.execute(SCHEMA).unwrap();
    other.execute(SCHEMA).unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();

    let mut config = config(&set)
        .failover("replication_user", REPL_USER)
        .failover("replication_password", REPL_PASSWORD);
    config.servers.push(Server::new("other", other.addr()));
    for (shard, servers) in [
        ("s1", vec!["primary", "replica1", "replica2"]),
        ("s2", vec!["other"]),
    ] {
        let mut t = toml::Table::new();
        t.insert("name".into(), shard.into());
        let servers = servers.into_iter().map(toml::Value::from).collect();
        t.insert("servers".into(), toml::Value::Array(servers));
        config.shards.push(t);
    }
    let mut orders = toml::Table::new();
    orders.insert("table".into(), "shop.orders".into());
    orders.insert("key".into(), "id".into());
    config.sharding.insert(
        "tables".into(),
        toml::Value::Array(vec![toml::Value::Table(orders)]),
    );
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice);
    ok(&mut c, "USE shop");
    for id in 1..=20 {
        ok(&mut c, &format!("INSERT INTO orders VALUES ({id}, 'v')"));
    }
    let on_other: Vec<u32> = ids(&other, "orders").into_iter().collect();
    let on_set: Vec<u32> = ids(&set.primary, "orders").into_iter().collect();
    assert!(
        !on_other.is_empty() && !on_set.is_empty(),
        "{on_other:?} {on_set:?}"
    );

    // A transaction over both shards: the session's reads on the replicated shard see
    // what it committed there though the replicas have not applied it.
    for r in &set.replicas {
        r.execute("STOP SLAVE SQL_THREAD").unwrap();
    }
    ok(&mut c, "BEGIN");
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'both' WHERE id = {}", on_set[0]),
    );
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'both' WHERE id = {}", on_other[0]),
    );
    ok(&mut c, "COMMIT");
    assert_eq!(
        crate::routing::one(
            &mut c,
            &format!("SELECT v FROM orders WHERE id = {}", on_set[0])
        ),
        "both"
    );
    assert_eq!(
        set.replicas[0]
            .query_value(&format!(
                "SELECT v FROM shop.orders WHERE id = {}",
                on_set[0]
            ))
            .unwrap(),
        "v"
    );
    for r in &set.replicas {
        r.execute("START SLAVE SQL_THREAD").unwrap();
    }
    set.wait_caught_up(Duration::from_secs(20)).unwrap();

    // The other shard's traffic while the first one fails over.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let worker = {
        let (stop, done, errors) = (stop.clone(), done.clone(), errors.clone());
        let (addr, id) = (sluice.addr(), on_other[0]);
        std::thread::spawn(move || {
            let mut c = crate::support::wire::RawConn::login(
                addr,
                crate::support::NATIVE_USER,
                crate::support::NATIVE_PASSWORD,
                Some("shop"),
            )
            .unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let sql = if n.is_multiple_of(2) {
                    format!("UPDATE orders SET v = 'w{n}' WHERE id = {id}")
                } else {
                    format!("SELECT v FROM orders WHERE id = {id}")
                };
                match c.query(&sql) {
                    Ok(Reply::Ok { .. } | Reply::ResultSet { .. }) => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    other => errors.lock().unwrap().push(format!("{sql}: {other:?}")),
                }
            }
        })
    };
    assert!(wait_until(Duration::from_secs(10), || done
        .load(Ordering::Relaxed)
        > 20));
    set.primary.kill().unwrap();
    let writer = || {
        admin_get(&sluice, &config, "/v1/servers")["shards"][0]["writer"]
            .as_str()
            .map(str::to_owned)
    };
    assert!(
        wait_until(Duration::from_secs(30), || writer()
            .is_some_and(|w| w != "primary")),
        "no failover in shard s1: {}",
        sluice.log()
    );
    let during = done.load(Ordering::Relaxed);
    // The failed-over shard takes writes again through Sluice.
    let id = on_set[0];
    assert!(
        wait_until(Duration::from_secs(20), || c
            .query(&format!("UPDATE orders SET v = 'after' WHERE id = {id}"))
            .is_ok_and(|r| matches!(r, Reply::Ok { .. }))),
        "{}",
        sluice.log()
    );
    assert!(wait_until(Duration::from_secs(10), || done
        .load(Ordering::Relaxed)
        > during + 20));
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    let errors = errors.lock().unwrap();
    assert!(errors.is_empty(), "the other shard failed: {errors:?}");
    // Its writer never moved.
    let s = admin_get(&sluice, &config, "/v1/servers");
    assert_eq!(s["shards"][1]["writer"], "other", "{s}");
    let new = if writer().as_deref() == Some("replica1") {
        &set.replicas[0]
    } else {
        &set.replicas[1]
    };
    assert_eq!(
        new.query_value(&format!("SELECT v FROM shop.orders WHERE id = {id}"))
            .unwrap(),
        "after"
    );
}

/// A read over both shards whose second shard is down: the first shard's rows have
/// gone out when the second can't be had, so its error ends that result, numbered
/// after the rows as a server's error mid-result is; the session goes on.
#[test]
fn a_shard_down_ends_a_read_over_several_with_its_error() {
    let (a, b, sluice, _) = crate::sharding::start_with(&[]);
    let mut c = crate::sharding::shop(&sluice);
    for id in 1..=20 {
        ok(
            &mut c,
            &format!("INSERT INTO orders (id, v) VALUES ({id}, 'o{id}')"),
        );
    }
    let on_a = ids(&a, "orders");
    assert!(!on_a.is_empty() && !ids(&b, "orders").is_empty());
    b.kill().unwrap();
    // The RawConn checks every packet's sequence id. The first read may find a pooled
    // connection to the dead server (its error comes from the relay); the later ones
    // can't get a connection at all (it comes from the lease).
    for _ in 0..3 {
        match c.query("SELECT id, v FROM orders") {
            Ok(Reply::Err(e)) => assert!(e.code >= 1000, "{e:?}"),
            other => panic!("a read over a dead shard: {other:?}"),
        }
    }
    let id = on_a.iter().next().unwrap();
    let rows = c.query_rows(&format!("SELECT v FROM orders WHERE id = {id}"));
    assert_eq!(rows, vec![vec![Some(format!("o{id}"))]]);
}
