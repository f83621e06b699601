//! Writes over every node of a Galera cluster (`routing.galera_writers = "all"`): each
//! autocommit write and transaction goes to a synced node, every node takes some, a
//! session reads its own writes, a node out of sync gets nothing, and an autocommit
//! statement that loses a certification conflict is sent again where a transaction's
//! statement gets the server's error.

use crate::routing::{admin_get, login, ok, one, ADMIN_TOKEN};
use crate::support::proxy::Server;
use crate::support::wire::{RawConn, Reply};
use crate::support::{provision, running_statements, wait_until, Config, Sluice};
use sluice_sandbox::{GaleraCluster, MariaDb};
use std::collections::HashSet;
use std::time::Duration;

/// A cluster of `nodes` with the test accounts and a table `gw.t (id, v)` holding row 1.
fn cluster(nodes: usize) -> GaleraCluster {
    let cluster = GaleraCluster::start(nodes).expect("starting a Galera cluster");
    provision(&cluster.nodes[0]).expect("creating the test accounts");
    cluster.nodes[0]
        .execute(
            "CREATE DATABASE gw; \
             CREATE TABLE gw.t (id INT PRIMARY KEY, v INT NOT NULL); \
             INSERT INTO gw.t VALUES (1, 0)",
        )
        .unwrap();
    cluster.wait_synced(Duration::from_secs(30)).unwrap();
    cluster
}

/// Sluice over `nodes` ("node1"...), writes spread over every synced node.
fn config(nodes: &[MariaDb]) -> Config {
    let mut config = Config::for_server(&nodes[0])
        .monitor("interval", "200ms")
        .routing("galera_writers", "all")
        .admin(ADMIN_TOKEN);
    config.servers = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Server::new(&format!("node{}", i + 1), n.addr()))
        .collect();
    config
}

fn status(node: &MariaDb, name: &str) -> u64 {
    node.global_status(name).unwrap().parse().unwrap()
}

/// Waits until the admin API shows every node of `names` as a writer.
#[track_caller]
fn wait_writers(sluice: &Sluice, config: &Config, names: &[&str]) {
    let writers = || {
        let servers = admin_get(sluice, config, "/v1/servers");
        servers["servers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["role"] == "writer")
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect::<HashSet<_>>()
    };
    let want: HashSet<String> = names.iter().map(|n| (*n).to_owned()).collect();
    assert!(
        wait_until(Duration::from_secs(15), || writers() == want),
        "writers {:?}, wanted {want:?}\n{}",
        writers(),
        admin_get(sluice, config, "/v1/servers")
    );
}

#[test]
fn writes_spread_over_every_synced_node_and_a_session_reads_its_own() {
    let cluster = cluster(3);
    let config = config(&cluster.nodes);
    let sluice = Sluice::start(&config);
    wait_writers(&sluice, &config, &["node1", "node2", "node3"]);
    let ports: Vec<String> = cluster.nodes.iter().map(|n| n.port().to_string()).collect();
    let before: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| status(n, "wsrep_local_commits"))
        .collect();

    // Each session writes and reads back at once: the read runs where the write
    // committed (another node may not have applied it yet). A session keeps the node
    // of its write for the write hold; new sessions spread, by weight and latency: a
    // node that is slow on a loaded machine gets fewer, but one pick in 16 ignores
    // latency, so every node gets some of 240.
    for i in 0..240 {
        let mut c = login(&sluice);
        let id = 1000 + i;
        ok(&mut c, &format!("INSERT INTO gw.t VALUES ({id}, {i})"));
        assert_eq!(
            one(
                &mut c,
                &format!("SELECT COUNT(*) FROM gw.t WHERE id = {id}")
            ),
            "1",
            "a session did not read its write {id}"
        );
    }
    // A transaction stays on one node, whatever the load.
    let c = &mut login(&sluice);
    ok(c, "BEGIN");
    let port = one(c, "SELECT @@port");
    for i in 0..5 {
        ok(c, &format!("INSERT INTO gw.t VALUES ({}, 0)", 2000 + i));
        assert_eq!(one(c, "SELECT @@port"), port, "a transaction moved");
    }
    ok(c, "COMMIT");
    assert!(ports.contains(&port));

    let grew: Vec<u64> = cluster
        .nodes
        .iter()
        .zip(&before)
        .map(|(n, b)| status(n, "wsrep_local_commits") - b)
        .collect();
    assert!(
        grew.iter().all(|g| *g >= 1),
        "every node takes writes: {grew:?}"
    );
    assert!(grew.iter().sum::<u64>() >= 241, "{grew:?}");

    // A node out of sync gets nothing, neither writes nor reads.
    cluster.nodes[2]
        .execute("SET GLOBAL wsrep_desync = ON")
        .unwrap();
    wait_writers(&sluice, &config, &["node1", "node2"]);
    let commits = status(&cluster.nodes[2], "wsrep_local_commits");
    let mut fresh = login(&sluice);
    for i in 0..40 {
        ok(
            &mut fresh,
            &format!("INSERT INTO gw.t VALUES ({}, 0)", 3000 + i),
        );
        let mut reader = login(&sluice);
        assert_ne!(
            one(&mut reader, "SELECT @@port"),
            ports[2],
            "a read on the desynced node"
        );
    }
    assert_eq!(
        status(&cluster.nodes[2], "wsrep_local_commits"),
        commits,
        "a write committed on the desynced node"
    );
    cluster.nodes[2]
        .execute("SET GLOBAL wsrep_desync = OFF")
        .unwrap();
    wait_writers(&sluice, &config, &["node1", "node2", "node3"]);

    // Cut off from the others, node3 is outside the primary component: wsrep_ready is
    // OFF and it refuses queries, so for Sluice it is down.
    cluster.nodes[2]
        .execute("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'")
        .unwrap();
    let role = |name: &str| {
        admin_get(&sluice, &config, "/v1/servers")["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["role"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert!(
        wait_until(Duration::from_secs(20), || role("node3") == "down"),
        "{}",
        admin_get(&sluice, &config, "/v1/servers")
    );
    // The other two form the primary component again once their new view is in; until
    // then they refuse writes themselves (1180), whoever sends them.
    assert!(wait_until(Duration::from_secs(20), || {
        cluster.nodes[..2].iter().all(|n| {
            n.execute("SHOW STATUS LIKE 'wsrep_cluster_size'")
                .is_ok_and(|out| out.lines().nth(1).is_some_and(|l| l.ends_with("\t2")))
        })
    }));
    for i in 0..20 {
        let mut c = login(&sluice);
        ok(
            &mut c,
            &format!("INSERT INTO gw.t VALUES ({}, 0)", 4000 + i),
        );
        assert_ne!(one(&mut c, "SELECT @@port"), ports[2]);
    }
    cluster.nodes[2]
        .execute("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'")
        .unwrap();
    cluster.wait_synced(Duration::from_secs(30)).unwrap();
    wait_writers(&sluice, &config, &["node1", "node2", "node3"]);
}

/// node2 only reads through Sluice, so that Sluice's writes run on node1 while node2
/// commits a conflicting write directly: the applier then aborts Sluice's statement (the
/// server's own retry of autocommit statements is off, so the conflict reaches Sluice).
#[test]
fn a_conflict_on_an_autocommit_write_is_retried_and_one_in_a_transaction_reaches_the_client() {
    let cluster = cluster(2);
    let (node1, node2) = (&cluster.nodes[0], &cluster.nodes[1]);
    node1
        .execute("SET GLOBAL wsrep_retry_autocommit = 0")
        .unwrap();
    let mut config = config(&cluster.nodes);
    config.servers[1] = config.servers[1].clone().set("role", "reader");
    let sluice = Sluice::start(&config);
    wait_writers(&sluice, &config, &["node1"]);
    let retries = || {
        admin_get(&sluice, &config, "/v1/servers")["stats"]["certification_retries"]
            .as_u64()
            .unwrap()
    };

    // Holds row 1's lock on node1 until the conflicting write from node2 aborts it.
    let slow = "UPDATE gw.t SET v = v + 1 WHERE id = 1 AND SLEEP(3) = 0";
    let conflict_while = |c: &mut RawConn, sql: &str| {
        c.send_command(0x03, sql.as_bytes()).unwrap();
        assert!(
            wait_until(Duration::from_secs(10), || running_statements(node1, sql)
                == 1),
            "the slow update never ran on node1"
        );
        node2
            .execute("UPDATE gw.t SET v = v + 100 WHERE id = 1")
            .unwrap();
        c.read_reply().expect("an answer")
    };

    let mut c = login(&sluice);
    match conflict_while(&mut c, slow) {
        Reply::Ok { .. } => {}
        other => panic!("the autocommit update after a conflict: {other:?}"),
    }
    assert_eq!(retries(), 1);
    // Applied once, after the conflicting write.
    assert_eq!(one(&mut c, "SELECT v FROM gw.t WHERE id = 1"), "101");

    // In a transaction, the server's error, as directly; nothing is sent again.
    ok(&mut c, "BEGIN");
    match conflict_while(&mut c, slow) {
        Reply::Err(e) => assert_eq!(e.code, 1213, "{e:?}"),
        other => panic!("the update in a transaction after a conflict: {other:?}"),
    }
    let _ = c.query("ROLLBACK");
    assert_eq!(retries(), 1);
}
