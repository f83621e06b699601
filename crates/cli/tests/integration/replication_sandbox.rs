//! The sandbox's replication topologies, checked against MariaDB directly before any
//! routing or failover test relies on them: a GTID primary with replicas (lagging,
//! crashing, re-pointing, semi-sync) and a Galera cluster.

use std::time::{Duration, Instant};

use sluice_sandbox::{
    self as sandbox, GaleraCluster, MariaDb, ReplicaSet, ReplicaSetOptions, REPL_USER,
};

use crate::support::wait_until;

/// Bound on every wait for replication in these tests.
const WAIT: Duration = Duration::from_secs(10);
/// A restarted Galera node catches up (IST) and syncs: seconds, more on a loaded machine.
const REJOIN: Duration = Duration::from_secs(60);

fn start_set(options: ReplicaSetOptions) -> ReplicaSet {
    let started = Instant::now();
    let set = ReplicaSet::start(options).expect("starting a replica set");
    eprintln!("replica set started in {:?}", started.elapsed());
    set
}

fn value(server: &MariaDb, sql: &str) -> String {
    server
        .query_value(sql)
        .unwrap_or_else(|e| panic!("{sql} on {}: {e:#}", server.addr()))
}

fn count(server: &MariaDb, table: &str) -> String {
    value(server, &format!("SELECT COUNT(*) FROM {table}"))
}

#[test]
fn replicas_see_writes_on_the_primary() {
    let set = start_set(ReplicaSetOptions::default());
    assert_eq!(set.replicas.len(), 2);

    let ids: Vec<String> = set
        .servers()
        .map(|s| value(s, "SELECT @@server_id"))
        .collect();
    assert_eq!(ids, ["1", "2", "3"]);
    assert_eq!(value(&set.primary, "SELECT @@read_only"), "0");
    for replica in &set.replicas {
        assert_eq!(value(replica, "SELECT @@read_only"), "1");
        assert_eq!(value(replica, "SELECT @@log_slave_updates"), "1");
        let status = replica.replica_status().unwrap();
        assert_eq!(status["Slave_IO_Running"], "Yes", "{status:?}");
        assert_eq!(status["Slave_SQL_Running"], "Yes", "{status:?}");
        assert_eq!(status["Using_Gtid"], "Slave_Pos", "{status:?}");
        assert_eq!(status["Master_User"], REPL_USER, "{status:?}");
        assert_eq!(status["Master_Port"], set.primary.port().to_string());
    }
    assert!(set.primary.replica_status().unwrap().is_empty());

    set.primary
        .execute(
            "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); \
             INSERT INTO app.t VALUES (1), (2), (3);",
        )
        .unwrap();
    set.wait_caught_up(WAIT).unwrap();
    for replica in &set.replicas {
        assert_eq!(count(replica, "app.t"), "3");
    }
    // Every server has the same history: nothing was written outside replication.
    let primary_pos = set.primary.gtid_current_pos().unwrap();
    assert!(primary_pos.starts_with("0-1-"), "{primary_pos}");
    for replica in &set.replicas {
        assert_eq!(replica.gtid_current_pos().unwrap(), primary_pos);
    }
}

#[test]
fn a_stopped_sql_thread_falls_behind_and_catches_up() {
    let set = start_set(ReplicaSetOptions::default());
    let (lagging, other) = (&set.replicas[0], &set.replicas[1]);
    set.primary
        .execute("CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY);")
        .unwrap();
    set.wait_caught_up(WAIT).unwrap();

    lagging.stop_replica_sql_thread().unwrap();
    set.primary
        .execute("INSERT INTO app.t VALUES (1), (2);")
        .unwrap();
    let position = set.primary.gtid_binlog_pos().unwrap();
    other.wait_for_gtid(&position, WAIT).unwrap();
    assert_eq!(count(other, "app.t"), "2");

    let err = set
        .wait_caught_up(Duration::from_millis(300))
        .expect_err("a replica that does not apply is not caught up");
    assert!(format!("{err:#}").contains("SQL thread No"), "{err:#}");
    assert_eq!(count(lagging, "app.t"), "0");
    let status = lagging.replica_status().unwrap();
    assert_eq!(status["Slave_SQL_Running"], "No", "{status:?}");
    // Still receiving: the IO thread has fetched what it did not apply.
    assert_eq!(status["Slave_IO_Running"], "Yes", "{status:?}");
    assert!(
        wait_until(WAIT, || lagging.replica_status().unwrap()["Gtid_IO_Pos"]
            == position),
        "the IO thread did not receive {position}"
    );

    lagging.start_replica_sql_thread().unwrap();
    set.wait_caught_up(WAIT).unwrap();
    assert_eq!(count(lagging, "app.t"), "2");
}

#[test]
fn a_killed_primary_restarts_with_its_data_and_replicas_reconnect() {
    let mut set = start_set(ReplicaSetOptions::default());
    set.primary
        .execute(
            "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); \
             INSERT INTO app.t VALUES (1);",
        )
        .unwrap();
    set.wait_caught_up(WAIT).unwrap();

    let port = set.primary.port();
    let old_pid = set.primary.pid();
    set.primary.kill().unwrap();
    assert!(!set.primary.running());
    assert!(set.primary.execute("SELECT 1").is_err());
    let started = Instant::now();
    set.primary.restart().unwrap();
    eprintln!("primary restarted in {:?}", started.elapsed());
    assert!(set.primary.running());
    assert_ne!(set.primary.pid(), old_pid);
    assert_eq!(set.primary.port(), port);
    assert_eq!(count(&set.primary, "app.t"), "1");

    // Replicas retry every second and pick up where they were.
    set.primary
        .execute("INSERT INTO app.t VALUES (2);")
        .unwrap();
    set.wait_caught_up(WAIT).unwrap();
    for replica in &set.replicas {
        assert_eq!(count(replica, "app.t"), "2");
        replica.wait_replicating(WAIT).unwrap();
    }

    // A clean stop of a replica keeps its files too, and it resumes replicating.
    let replica = &mut set.replicas[1];
    replica.stop_process().unwrap();
    assert!(!replica.running());
    set.primary
        .execute("INSERT INTO app.t VALUES (3);")
        .unwrap();
    set.replicas[1].restart().unwrap();
    set.wait_caught_up(WAIT).unwrap();
    assert_eq!(count(&set.replicas[1], "app.t"), "3");
    // Restarting a running server is refused rather than starting a second one.
    assert!(set.replicas[1].restart().is_err());
}

#[test]
fn point_to_repoints_replicas_to_a_promoted_one() {
    // Strict mode: re-pointing must not rely on MariaDB papering over GTID gaps.
    let set = start_set(ReplicaSetOptions {
        extra_args: vec!["--gtid-strict-mode=ON".into()],
        ..ReplicaSetOptions::default()
    });
    assert_eq!(value(&set.primary, "SELECT @@gtid_strict_mode"), "1");
    set.primary
        .execute(
            "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); \
             INSERT INTO app.t VALUES (1);",
        )
        .unwrap();
    set.wait_caught_up(WAIT).unwrap();

    // Promote the first replica by hand, as a failover would.
    let promoted = &set.replicas[0];
    promoted
        .execute("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0;")
        .unwrap();
    assert!(promoted.replica_status().unwrap().is_empty());
    let other = &set.replicas[1];
    other.point_to(promoted).unwrap();
    // The former primary joins as a replica too, with its history in its binlog.
    set.primary.point_to(promoted).unwrap();

    promoted.execute("INSERT INTO app.t VALUES (2);").unwrap();
    let position = promoted.gtid_binlog_pos().unwrap();
    assert!(position.contains("0-2-"), "{position}");
    for server in [other, &set.primary] {
        server.wait_replicating(WAIT).unwrap();
        server.wait_for_gtid(&position, WAIT).unwrap();
        assert_eq!(count(server, "app.t"), "2");
        let status = server.replica_status().unwrap();
        assert_eq!(status["Master_Port"], promoted.port().to_string());
        assert_eq!(value(server, "SELECT @@read_only"), "1");
    }
}

#[test]
fn semi_sync_is_on_for_primary_and_replicas() {
    let set = start_set(ReplicaSetOptions {
        semi_sync: true,
        ..ReplicaSetOptions::default()
    });
    let primary = &set.primary;
    assert_eq!(
        primary
            .global_status("Rpl_semi_sync_master_status")
            .unwrap(),
        "ON"
    );
    assert_eq!(
        primary
            .global_status("Rpl_semi_sync_master_clients")
            .unwrap(),
        "2"
    );
    for replica in &set.replicas {
        assert_eq!(
            replica.global_status("Rpl_semi_sync_slave_status").unwrap(),
            "ON"
        );
    }
    // Both sides everywhere, so that a promoted replica is a semi-sync primary too.
    for server in set.servers() {
        assert_eq!(
            value(
                server,
                "SELECT CONCAT(@@rpl_semi_sync_master_enabled, @@rpl_semi_sync_slave_enabled, \
                 ' ', @@rpl_semi_sync_master_timeout)"
            ),
            format!("ONON {}", sandbox::SEMI_SYNC_TIMEOUT_MS)
        );
    }

    let acknowledged = |s: &MariaDb| -> u64 {
        s.global_status("Rpl_semi_sync_master_yes_tx")
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = acknowledged(primary);
    let started = Instant::now();
    primary
        .execute("CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY);")
        .unwrap();
    // Far below the timeout: replicas acknowledge, nobody waits for it to run out.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(acknowledged(primary) >= before + 2);
    // Replicas apply without waiting for acknowledgements to their own master side,
    // which nobody sends them.
    let started = Instant::now();
    set.wait_caught_up(WAIT).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for replica in &set.replicas {
        assert_eq!(count(replica, "app.t"), "0");
    }
}

#[test]
fn galera_nodes_see_each_others_writes() {
    let started = Instant::now();
    let cluster = GaleraCluster::start(3).expect("starting a Galera cluster");
    eprintln!("Galera cluster started in {:?}", started.elapsed());
    for node in &cluster.nodes {
        assert_eq!(node.global_status("wsrep_local_state").unwrap(), "4");
        assert_eq!(node.global_status("wsrep_cluster_size").unwrap(), "3");
        assert_eq!(node.global_status("wsrep_ready").unwrap(), "ON");
    }

    cluster.nodes[0]
        .execute(
            "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); \
             INSERT INTO app.t VALUES (1), (2);",
        )
        .unwrap();
    for node in &cluster.nodes[1..] {
        // wsrep_sync_wait: read only after this node applied what the cluster committed.
        assert_eq!(
            value(
                node,
                "SET SESSION wsrep_sync_wait = 1; SELECT COUNT(*) FROM app.t"
            ),
            "2"
        );
    }
    // Writes on any node, not only the first.
    cluster.nodes[2]
        .execute("INSERT INTO app.t VALUES (3);")
        .unwrap();
    assert_eq!(
        value(
            &cluster.nodes[0],
            "SET SESSION wsrep_sync_wait = 1; SELECT COUNT(*) FROM app.t"
        ),
        "3"
    );
}

#[test]
fn galera_nodes_rejoin_after_a_crash_and_a_clean_stop() {
    let mut cluster = GaleraCluster::start(3).expect("starting a Galera cluster");
    cluster.nodes[0]
        .execute(
            "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); \
             INSERT INTO app.t VALUES (1);",
        )
        .unwrap();

    // A crashed node has no position in grastate.dat; restart recovers it from InnoDB
    // and the node catches up on what it missed by IST.
    cluster.nodes[1].kill().unwrap();
    cluster.nodes[0]
        .execute("INSERT INTO app.t VALUES (2);")
        .unwrap();
    let started = Instant::now();
    cluster.rejoin(1, REJOIN).unwrap();
    eprintln!("crashed node rejoined in {:?}", started.elapsed());
    assert_eq!(count(&cluster.nodes[1], "app.t"), "2");

    // The first node bootstraps only on its first start: restarted, it joins the others.
    cluster.nodes[0].stop_process().unwrap();
    cluster.nodes[1]
        .execute("INSERT INTO app.t VALUES (3);")
        .unwrap();
    let started = Instant::now();
    cluster.rejoin(0, REJOIN).unwrap();
    eprintln!("stopped node rejoined in {:?}", started.elapsed());
    assert_eq!(count(&cluster.nodes[0], "app.t"), "3");

    // A node killed after it joined but before it first saved its state keeps the nil
    // cluster id in grastate.dat (a race CI once lost); it still rejoins by IST, from
    // the position InnoDB recovers, and not by a full state transfer.
    cluster.nodes[2].kill().unwrap();
    let grastate = cluster.nodes[2].datadir().join("grastate.dat");
    let saved = std::fs::read_to_string(&grastate).unwrap();
    let nil = saved
        .lines()
        .map(|line| {
            if line.starts_with("uuid:") {
                "uuid:    00000000-0000-0000-0000-000000000000"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&grastate, nil + "\n").unwrap();
    cluster.nodes[0]
        .execute("INSERT INTO app.t VALUES (4);")
        .unwrap();
    cluster.rejoin(2, REJOIN).unwrap();
    assert_eq!(count(&cluster.nodes[2], "app.t"), "4");
    for node in &cluster.nodes {
        assert_eq!(node.global_status("wsrep_cluster_size").unwrap(), "3");
    }
}
