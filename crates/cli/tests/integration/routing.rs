//! Routing against a real primary with two replicas: reads outside transactions spread
//! over the replicas by weight, writes and transactions stay on the primary, rules and
//! hints override, Sluice's zone is preferred, lagging replicas leave the read set and
//! come back, and a session always reads its own writes. Which server answered is told
//! by `@@server_id` (1 for the primary, 2 and 3 for the replicas).

use crate::support::proxy::Server;
use crate::support::wire::{RawConn, Reply};
use crate::support::{provision, wait_until, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER};
use sluice_sandbox::{ReplicaSet, ReplicaSetOptions};
use std::collections::HashMap;
use std::time::Duration;

pub const ADMIN_TOKEN: &str = "routing-t0ken";

/// A primary and two replicas with the test accounts, caught up.
pub fn replica_set(semi_sync: bool) -> ReplicaSet {
    replica_set_with(semi_sync, Vec::new())
}

/// [`replica_set`], each server started with `extra_args` too.
pub fn replica_set_with(semi_sync: bool, extra_args: Vec<String>) -> ReplicaSet {
    let set = ReplicaSet::start(ReplicaSetOptions {
        semi_sync,
        extra_args,
        ..ReplicaSetOptions::default()
    })
    .expect("starting a primary and two replicas");
    provision(&set.primary).expect("creating the test accounts");
    set.wait_caught_up(Duration::from_secs(20))
        .expect("replicas catch up");
    set
}

/// Sluice in front of the set: "primary", "replica1", "replica2", checked every 200 ms.
pub fn config(set: &ReplicaSet) -> Config {
    let mut c = Config::for_server(&set.primary)
        .monitor("interval", "200ms")
        .admin(ADMIN_TOKEN);
    c.servers = vec![Server::new("primary", set.primary.addr())];
    for (i, r) in set.replicas.iter().enumerate() {
        c.servers
            .push(Server::new(&format!("replica{}", i + 1), r.addr()));
    }
    c
}

#[track_caller]
pub fn login(sluice: &Sluice) -> RawConn {
    RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, None)
        .unwrap_or_else(|e| panic!("login failed: {e:?}\n{}", sluice.log()))
}

#[track_caller]
pub fn one(conn: &mut RawConn, sql: &str) -> String {
    match conn.query(sql) {
        Ok(r @ Reply::ResultSet { .. }) => {
            let rows = r.text_rows();
            assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
            rows[0][0].clone().unwrap_or_else(|| "NULL".into())
        }
        other => panic!("{sql}: {other:?}"),
    }
}

#[track_caller]
pub fn ok(conn: &mut RawConn, sql: &str) {
    match conn.query(sql) {
        Ok(Reply::Ok { .. }) => {}
        other => panic!("{sql}: {other:?}"),
    }
}

/// Runs `sql` (which selects `@@server_id`) `n` times; how many answers came from each
/// server id.
pub fn answers(conn: &mut RawConn, sql: &str, n: usize) -> HashMap<String, usize> {
    let mut by = HashMap::new();
    for _ in 0..n {
        *by.entry(one(conn, sql)).or_default() += 1;
    }
    by
}

pub fn admin_get(sluice: &Sluice, config: &Config, path: &str) -> serde_json::Value {
    let address = config.admin_address().expect("admin configured");
    let client = crate::support::http::Client::new(
        address,
        Some(sluice::config::Secret(ADMIN_TOKEN.into())),
    );
    let response = client
        .get(path)
        .unwrap_or_else(|e| panic!("admin API: {e:?}\n{}", sluice.log()));
    assert_eq!(response.status, 200, "{path}");
    response.json().unwrap()
}

/// The state the admin API reports for server `name`.
pub fn server_role(sluice: &Sluice, config: &Config, name: &str) -> String {
    let servers = admin_get(sluice, config, "/v1/servers");
    servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["role"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Waits up to `seconds` for the admin API to report `role` for server `name`.
#[track_caller]
pub fn wait_role(sluice: &Sluice, config: &Config, name: &str, role: &str, seconds: u64) {
    assert!(
        wait_until(Duration::from_secs(seconds), || server_role(
            sluice, config, name
        ) == role),
        "{name} never became {role}: {}",
        admin_get(sluice, config, "/v1/servers")
    );
}

#[test]
fn reads_spread_by_weight_writes_and_transactions_stay_on_the_primary() {
    let set = replica_set(false);
    set.primary
        .execute("CREATE DATABASE rt; CREATE TABLE rt.t (id INT PRIMARY KEY, v INT)")
        .unwrap();
    let mut config = config(&set);
    config.servers[1] = config.servers[1].clone().set("weight", 1);
    config.servers[2] = config.servers[2].clone().set("weight", 3);
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice);

    // About 75% by weight; more when the other replica answers slower, and less when
    // this one does by a factor of three, which a machine busy with other tests can
    // decide for a while (the exact split by weight is a unit test of the router). An
    // even split, weights ignored, would be 50% ± 5 every time: up to three rounds.
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let reads = answers(&mut c, "SELECT @@server_id", 400);
        assert_eq!(reads.get("1"), None, "no read on the primary: {reads:?}");
        let heavy = *reads.get("3").unwrap_or(&0) >= 240;
        rounds.push(reads);
        if heavy {
            break;
        }
    }
    assert!(
        rounds
            .last()
            .is_some_and(|r| *r.get("3").unwrap_or(&0) >= 240),
        "weight 3 of 4 should take about 75% of reads: {rounds:?}"
    );

    // Writes, locking reads and whole transactions run on the primary.
    ok(&mut c, "INSERT INTO rt.t VALUES (1, 1)");
    assert_eq!(one(&mut c, "SELECT @@server_id FROM rt.t FOR UPDATE"), "1");
    ok(&mut c, "BEGIN");
    assert_eq!(one(&mut c, "SELECT @@server_id"), "1");
    ok(&mut c, "UPDATE rt.t SET v = 2");
    assert_eq!(one(&mut c, "SELECT v FROM rt.t WHERE id = 1"), "2");
    ok(&mut c, "COMMIT");
    // autocommit=0: every statement is in a transaction.
    ok(&mut c, "SET autocommit = 0");
    assert_eq!(one(&mut c, "SELECT @@server_id"), "1");
    ok(&mut c, "COMMIT");
    ok(&mut c, "SET autocommit = 1");
    assert_ne!(one(&mut c, "SELECT @@server_id"), "1");

    // A hint sends one read to the writer.
    assert_eq!(one(&mut c, "SELECT /* sluice: writer */ @@server_id"), "1");

    // Prepared reads go to replicas too; the statement moves with them.
    let servers = admin_get(&sluice, &config, "/v1/servers");
    assert_eq!(servers["writer"], "primary", "{servers}");
    let reads_on: Vec<u64> = servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reads"].as_u64().unwrap())
        .collect();
    assert_eq!(reads_on[0], 0, "{servers}");
    assert!(reads_on[1] + reads_on[2] >= 400, "{servers}");
}

#[test]
fn rules_route_block_and_prefer_the_zone() {
    let set = replica_set(false);
    let mut rule_group = toml::Table::new();
    rule_group.insert("name".into(), "reports".into());
    rule_group.insert("match".into(), "(?i)report".into());
    rule_group.insert("route".into(), "reporting".into());
    let mut rule_writer = toml::Table::new();
    rule_writer.insert("name".into(), "fresh".into());
    rule_writer.insert("match".into(), "(?i)fresh_read".into());
    rule_writer.insert("route".into(), "writer".into());
    let mut rule_block = toml::Table::new();
    rule_block.insert("name".into(), "no-drop".into());
    rule_block.insert("match".into(), "(?i)^\\s*DROP".into());
    let mut err = toml::Table::new();
    err.insert("code".into(), 1227.into());
    err.insert("state".into(), "42000".into());
    err.insert(
        "message".into(),
        "DROP is not allowed through this proxy".into(),
    );
    rule_block.insert("error".into(), err.into());
    let mut rule_timeout = toml::Table::new();
    rule_timeout.insert("name".into(), "slow".into());
    rule_timeout.insert("match".into(), "seq_1_to_".into());
    rule_timeout.insert("timeout".into(), "300ms".into());
    let mut config = config(&set)
        .routing("zone", "b")
        .routing_rule(rule_timeout)
        .routing_rule(rule_group)
        .routing_rule(rule_writer)
        .routing_rule(rule_block);
    config.servers[1] = config.servers[1].clone().set("zone", "a");
    config.servers[2] = config.servers[2]
        .clone()
        .set("zone", "b")
        .set("groups", toml::Value::Array(vec!["reporting".into()]));
    config.servers[0] = config.servers[0].clone().set("zone", "a");
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice);

    // Zone "b" has replica2 (server id 3): every plain read goes there.
    let reads = answers(&mut c, "SELECT @@server_id", 50);
    assert_eq!(reads.get("3"), Some(&50), "{reads:?}");
    assert_eq!(one(&mut c, "SELECT @@server_id AS fresh_read"), "1");
    assert_eq!(one(&mut c, "SELECT @@server_id AS report"), "3");
    // After a write the session keeps the writer's connection a moment (`write_hold`):
    // a read its rule sends to a group still goes there, not to the held connection.
    set.primary
        .execute("CREATE DATABASE held; CREATE TABLE held.t (id INT PRIMARY KEY)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    for i in 0..5 {
        assert!(matches!(
            c.query(&format!("INSERT INTO held.t VALUES ({i})"))
                .unwrap(),
            Reply::Ok { .. }
        ));
        assert_eq!(one(&mut c, "SELECT @@server_id AS report"), "3");
    }
    match c.query("DROP TABLE IF EXISTS nothing.here").unwrap() {
        Reply::Err(e) => {
            assert_eq!((e.code, e.state.as_str()), (1227, "42000"));
            assert!(e.message.contains("not allowed"), "{e:?}");
        }
        other => panic!("DROP should be refused: {other:?}"),
    }
    // The session goes on after a refusal.
    assert_eq!(one(&mut c, "SELECT 1"), "1");

    // A rule's timeout cancels a long statement on the server it runs on.
    let started = std::time::Instant::now();
    match c
        .query("SELECT COUNT(*) FROM mysql.seq_1_to_1000000000 WHERE SHA1(seq) = 'x'")
        .unwrap()
    {
        Reply::Err(e) => assert_eq!(e.code, 1317, "{e:?}"),
        other => panic!("the statement should have been cancelled: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(one(&mut c, "SELECT 2"), "2");

    // Without a healthy server in its zone, reads go to the others.
    set.replicas[1].stop_replica_sql_thread().unwrap();
    wait_role(&sluice, &config, "replica2", "lagging", 10);
    let reads = answers(&mut c, "SELECT @@server_id", 20);
    assert_eq!(reads.get("2"), Some(&20), "{reads:?}");
    set.replicas[1].start_replica_sql_thread().unwrap();

    // Caught up, it has every read of its zone again; down, the others have them.
    wait_role(&sluice, &config, "replica2", "reader", 10);
    let reads = answers(&mut c, "SELECT @@server_id", 20);
    assert_eq!(reads.get("3"), Some(&20), "{reads:?}");
    set.replicas[1].kill().unwrap();
    let reads = answers(&mut c, "SELECT @@server_id", 20);
    assert_eq!(reads.get("2"), Some(&20), "{reads:?}");
}

#[test]
fn a_lagging_replica_leaves_the_read_set_and_comes_back() {
    let set = replica_set(false);
    set.primary
        .execute("CREATE DATABASE lag; CREATE TABLE lag.t (id INT PRIMARY KEY)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    let config = config(&set).routing("max_lag", "1s");
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice);
    let both = answers(&mut c, "SELECT @@server_id", 200);
    assert!(both.contains_key("2") && both.contains_key("3"), "{both:?}");

    // Replica 2 applies events 3 s late: after a write it is behind by more than 1 s.
    let r2 = &set.replicas[1];
    r2.execute("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 3; START SLAVE")
        .unwrap();
    for i in 0..5 {
        set.primary
            .execute(&format!("INSERT INTO lag.t VALUES ({i})"))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    wait_role(&sluice, &config, "replica2", "lagging", 10);
    let lagging = answers(&mut c, "SELECT @@server_id", 40);
    assert_eq!(
        lagging.get("2"),
        Some(&40),
        "only replica1 reads: {lagging:?}"
    );

    // No delay any more: it catches up and takes reads again.
    r2.execute("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE")
        .unwrap();
    wait_role(&sluice, &config, "replica2", "reader", 15);
    let back = answers(&mut c, "SELECT @@server_id", 200);
    assert!(back.contains_key("3"), "replica2 reads again: {back:?}");

    // A stopped SQL thread means not applying at all: out at once.
    r2.stop_replica_sql_thread().unwrap();
    wait_role(&sluice, &config, "replica2", "lagging", 10);
    r2.start_replica_sql_thread().unwrap();
}

#[test]
fn a_session_reads_its_own_writes_through_lagging_replicas() {
    let set = replica_set(false);
    set.primary
        .execute("CREATE DATABASE ryw; CREATE TABLE ryw.t (id INT PRIMARY KEY)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    // Both replicas apply 2 s late, but stay in the read set (limit 60 s).
    for r in &set.replicas {
        r.execute("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 2; START SLAVE")
            .unwrap();
    }
    // No write hold: the read right after a write must be routed, not kept on the
    // writer's connection.
    let config = config(&set)
        .pool("write_hold", "0s")
        .routing("max_lag", "60s")
        .routing("consistency_wait", "300ms");
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice);
    for i in 0..20 {
        ok(&mut c, &format!("INSERT INTO ryw.t VALUES ({i})"));
        assert_eq!(
            one(
                &mut c,
                &format!("SELECT COUNT(*) FROM ryw.t WHERE id = {i}")
            ),
            "1",
            "read {i} missed the session's own write"
        );
    }
    // Those reads went to the primary after waiting on a replica in vain.
    let servers = admin_get(&sluice, &config, "/v1/servers");
    assert!(
        servers["stats"]["gtid_wait_timeouts"].as_u64().unwrap() >= 1,
        "{servers}"
    );

    // The same through a Sluice that doesn't care: some read misses its write, which
    // shows the check above is not vacuous.
    let careless_config = self::config(&set)
        .pool("write_hold", "0s")
        .routing("max_lag", "60s")
        .routing("consistency", "none");
    let careless = Sluice::start(&careless_config);
    let mut d = login(&careless);
    let mut missed = 0;
    for i in 100..110 {
        ok(&mut d, &format!("INSERT INTO ryw.t VALUES ({i})"));
        if one(
            &mut d,
            &format!("SELECT COUNT(*) FROM ryw.t WHERE id = {i}"),
        ) == "0"
        {
            missed += 1;
        }
    }
    assert!(missed > 0, "replicas 2 s late never missed a write?");

    // Without delay, a replica that caught up answers the session's reads after a
    // successful wait, not the primary.
    for r in &set.replicas {
        r.execute("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE")
            .unwrap();
    }
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    let mut on_replica = 0;
    for i in 200..220 {
        ok(&mut c, &format!("INSERT INTO ryw.t VALUES ({i})"));
        assert_eq!(
            one(
                &mut c,
                &format!("SELECT COUNT(*) FROM ryw.t WHERE id = {i}")
            ),
            "1"
        );
        if one(&mut c, "SELECT @@server_id") != "1" {
            on_replica += 1;
        }
    }
    assert!(
        on_replica >= 5,
        "reads after writes go to replicas that caught up: {on_replica} of 20"
    );
}

/// A Galera cluster behind Sluice: writes go to one synced node at a time, reads to the
/// others; a node that leaves sync (desynced, or killed) loses the writes to another
/// synced node, with no promotion, and writes through Sluice go on.
#[test]
fn galera_writes_go_to_one_synced_node_and_move_when_it_leaves_sync() {
    use sluice_sandbox::GaleraCluster;
    let mut cluster = GaleraCluster::start(3).expect("starting a three-node Galera cluster");
    provision(&cluster.nodes[0]).expect("creating the test accounts");
    cluster.nodes[0]
        .execute("CREATE DATABASE gal; CREATE TABLE gal.t (id INT PRIMARY KEY)")
        .unwrap();
    cluster.wait_synced(Duration::from_secs(30)).unwrap();
    let ports: Vec<String> = cluster.nodes.iter().map(|n| n.port().to_string()).collect();
    let mut config = Config::for_server(&cluster.nodes[0])
        .monitor("interval", "200ms")
        .admin(ADMIN_TOKEN);
    config.servers = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Server::new(&format!("node{}", i + 1), n.addr()))
        .collect();
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice);
    let writer = || admin_get(&sluice, &config, "/v1/servers")["writer"].clone();
    assert_eq!(writer(), "node1");
    ok(&mut c, "BEGIN");
    assert_eq!(one(&mut c, "SELECT @@port"), ports[0]);
    ok(&mut c, "COMMIT");
    let reads = answers(&mut c, "SELECT @@port", 40);
    assert!(
        !reads.contains_key(&ports[0]),
        "the writer only writes: {reads:?}"
    );
    assert_eq!(reads.values().sum::<usize>(), 40);

    // node1 leaves sync: writes move to node2 and stay there when node1 is back.
    cluster.nodes[0]
        .execute("SET GLOBAL wsrep_desync = ON")
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || writer() == "node2"),
        "{}",
        admin_get(&sluice, &config, "/v1/servers")
    );
    let reads = answers(&mut c, "SELECT @@port", 20);
    assert_eq!(
        reads.get(&ports[2]),
        Some(&20),
        "only node3 reads: {reads:?} {ports:?}\n{}",
        admin_get(&sluice, &config, "/v1/servers")
    );
    // After its own write, a session reads on the writer node: the others apply
    // writesets after the writer committed them.
    ok(&mut c, "INSERT INTO gal.t VALUES (1)");
    let reads = answers(&mut c, "SELECT IF(COUNT(*) = 1, @@port, 0) FROM gal.t", 10);
    assert_eq!(reads.get(&ports[1]), Some(&10), "{reads:?} {ports:?}");
    cluster.nodes[0]
        .execute("SET GLOBAL wsrep_desync = OFF")
        .unwrap();
    wait_role(&sluice, &config, "node1", "reader", 10);
    assert_eq!(writer(), "node2");

    // node2 dies: node1 (synced, first in order) takes the writes, no promotion needed.
    cluster.nodes[1].kill().unwrap();
    for i in 2..40 {
        match c.query(&format!("INSERT INTO gal.t VALUES ({i})")).unwrap() {
            Reply::Ok { .. } => {}
            // The statement in flight on the dead node, or Galera's own pause while
            // the cluster notices it.
            Reply::Err(e) if [1158, 1213, 1047].contains(&e.code) => {}
            other => panic!("insert {i}: {other:?}"),
        }
    }
    assert!(wait_until(Duration::from_secs(15), || writer() == "node1"));
    ok(&mut c, "INSERT INTO gal.t VALUES (100)");
    let servers = admin_get(&sluice, &config, "/v1/servers");
    assert_eq!(servers["stats"]["failovers"], 0, "{servers}");
    let _ = cluster.nodes[1].restart();
}
