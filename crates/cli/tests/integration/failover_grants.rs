//! Failover and switchover with the monitor account the docs describe, and with one
//! that lacks a privilege: Sluice names what is missing, a switchover that fails
//! part-way puts the servers back as they were, and a failover still leaves a writer.

use super::routing::{admin_get, config, login, replica_set, ADMIN_TOKEN};
use crate::support::wire::{RawConn, Reply};
use crate::support::{repo_root, sluice_admin, wait_until, Config, Sluice};
use sluice_sandbox::{MariaDb, ReplicaSet, REPL_PASSWORD, REPL_USER};
use std::time::{Duration, Instant};

/// The grants CONFIGURATION.md lists for the monitor's account.
const DOCUMENTED: &str = "SLAVE MONITOR, READ_ONLY ADMIN, REPLICATION SLAVE ADMIN, RELOAD";
/// The list the docs gave before, which MariaDB 10.11 refuses `RESET SLAVE ALL` to.
const WITHOUT_RELOAD: &str = "SLAVE MONITOR, READ_ONLY ADMIN, REPLICATION SLAVE ADMIN";
const MONITOR_USER: &str = "sluice_monitor";
const MONITOR_PASSWORD: &str = "monitor-pw";

/// Creates the monitor account with `grants` on the primary (replicated to the
/// replicas), and Sluice's configuration using it.
fn with_monitor_account(set: &ReplicaSet, grants: &str) -> Config {
    set.primary
        .execute(&format!(
            "CREATE USER '{MONITOR_USER}'@'%' IDENTIFIED BY '{MONITOR_PASSWORD}';\n\
             GRANT {grants} ON *.* TO '{MONITOR_USER}'@'%';\n\
             CREATE DATABASE fg; CREATE TABLE fg.t (id INT PRIMARY KEY);"
        ))
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    config(set)
        .monitor("user", MONITOR_USER)
        .monitor("password", MONITOR_PASSWORD)
        .failover("replication_user", REPL_USER)
        .failover("replication_password", REPL_PASSWORD)
}

/// Inserts `id` through `c` until the write is acknowledged (a write waits for a
/// writer up to `failover.write_wait`, then gets 9002); how long it took.
fn write_until_acked(sluice: &Sluice, c: &mut RawConn, id: u32, within: Duration) -> Duration {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < within {
        match c.query(&format!("INSERT INTO fg.t VALUES ({id})")) {
            Ok(Reply::Ok { .. }) => return started.elapsed(),
            Ok(other) => last = format!("{other:?}"),
            Err(e) => {
                last = e.to_string();
                *c = login(sluice);
            }
        }
    }
    panic!(
        "no write acknowledged within {within:?}: {last}\n{}",
        sluice.log()
    );
}

fn servers(sluice: &Sluice, config: &Config) -> serde_json::Value {
    admin_get(sluice, config, "/v1/servers")
}

/// Waits until the admin API names the writer `name`.
#[track_caller]
fn wait_writer(sluice: &Sluice, config: &Config, name: &str) {
    assert!(
        wait_until(Duration::from_secs(20), || servers(sluice, config)
            ["writer"]
            == name),
        "{name} never became the writer: {}\n{}",
        servers(sluice, config),
        sluice.log()
    );
}

/// Waits until the last writer change recorded is a failover (it is recorded once the
/// other replicas are repointed, a little after writes go to the new writer); its
/// record.
#[track_caller]
fn wait_failover_record(sluice: &Sluice, config: &Config) -> serde_json::Value {
    assert!(
        wait_until(Duration::from_secs(10), || servers(sluice, config)
            ["last_failover"]["kind"]
            == "failover"),
        "no failover recorded: {}\n{}",
        servers(sluice, config),
        sluice.log()
    );
    servers(sluice, config)["last_failover"].clone()
}

fn missing_privileges(sluice: &Sluice, config: &Config, server: &str) -> serde_json::Value {
    servers(sluice, config)["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .map(|s| s["missing_privileges"].clone())
        .unwrap_or_default()
}

fn replica_of(server: &MariaDb) -> Option<String> {
    server.replica_status().unwrap().get("Master_Port").cloned()
}

#[test]
fn with_exactly_the_documented_grants_failover_and_switchover_complete() {
    let docs = std::fs::read_to_string(repo_root().join("docs/CONFIGURATION.md")).unwrap();
    assert!(
        docs.contains(&format!("GRANT {DOCUMENTED} ON *.* TO")),
        "CONFIGURATION.md lists other grants than this test uses"
    );
    let set = replica_set(false);
    let config = with_monitor_account(&set, DOCUMENTED);
    let sluice = Sluice::start(&config);
    for name in ["primary", "replica1", "replica2"] {
        assert_eq!(
            missing_privileges(&sluice, &config, name),
            serde_json::json!([])
        );
    }
    assert!(
        !sluice.log().contains("lacks privileges"),
        "{}",
        sluice.log()
    );
    let mut c = login(&sluice);
    write_until_acked(&sluice, &mut c, 1, Duration::from_secs(5));

    set.primary.kill().unwrap();
    let gap = write_until_acked(&sluice, &mut c, 2, Duration::from_secs(20));
    let last = wait_failover_record(&sluice, &config);
    let after = servers(&sluice, &config);
    println!(
        "failover with the documented grants: writes back after {gap:?} (took {}ms)",
        last["took_ms"]
    );
    assert_eq!(last["outcome"], "ok", "{last}\n{}", sluice.log());
    assert_eq!(last["notes"], serde_json::json!([]), "{last}");
    let (writer, other) = match after["writer"].as_str().unwrap() {
        "replica1" => (&set.replicas[0], ("replica2", &set.replicas[1])),
        "replica2" => (&set.replicas[1], ("replica1", &set.replicas[0])),
        w => panic!("writer {w}"),
    };
    assert_eq!(writer.query_value("SELECT @@read_only").unwrap(), "0");
    assert_eq!(replica_of(writer), None, "RESET SLAVE ALL ran");
    assert!(wait_until(Duration::from_secs(10), || replica_of(other.1)
        == Some(writer.port().to_string())));

    // The same account moves the writer back by hand.
    let address = config.admin_address().unwrap();
    let moved = sluice_admin(&address, ADMIN_TOKEN, &["switchover", "--to", other.0]);
    assert_eq!(moved.code, Some(0), "{}{}", moved.stdout, moved.stderr);
    assert_eq!(servers(&sluice, &config)["writer"], other.0);
    assert_eq!(writer.query_value("SELECT @@read_only").unwrap(), "1");
    assert_eq!(replica_of(writer), Some(other.1.port().to_string()));
    write_until_acked(&sluice, &mut c, 3, Duration::from_secs(5));
}

#[test]
fn a_missing_privilege_is_named_and_a_failed_switchover_leaves_everything_as_it_was() {
    let set = replica_set(false);
    let config = with_monitor_account(&set, WITHOUT_RELOAD);
    let sluice = Sluice::start(&config);

    // Named at start, in the API and in `sluice admin servers`.
    assert!(
        wait_until(Duration::from_secs(5), || {
            let log = sluice.log();
            log.contains("lacks privileges") && log.contains("RELOAD")
        }),
        "{}",
        sluice.log()
    );
    assert_eq!(
        missing_privileges(&sluice, &config, "replica2"),
        serde_json::json!(["RELOAD"])
    );
    let address = config.admin_address().unwrap();
    let table = sluice_admin(&address, ADMIN_TOKEN, &["servers"]);
    assert!(
        table
            .stdout
            .contains("replica2: the monitor account lacks RELOAD"),
        "{}",
        table.stdout
    );

    // A switchover that fails at RESET SLAVE ALL puts both servers back.
    let failed = sluice_admin(&address, ADMIN_TOKEN, &["switchover", "--to", "replica2"]);
    assert_eq!(failed.code, Some(1), "{}{}", failed.stdout, failed.stderr);
    assert!(
        failed.stderr.contains("RESET SLAVE ALL") && failed.stderr.contains("RELOAD"),
        "{}",
        failed.stderr
    );
    assert_eq!(set.primary.query_value("SELECT @@read_only").unwrap(), "0");
    let candidate = &set.replicas[1];
    assert_eq!(candidate.query_value("SELECT @@read_only").unwrap(), "1");
    candidate
        .wait_replicating(Duration::from_secs(10))
        .expect("replication restarted on the candidate");
    assert_eq!(replica_of(candidate), Some(set.primary.port().to_string()));
    let last = servers(&sluice, &config)["last_failover"].clone();
    assert_eq!(last["kind"], "switchover", "{last}");
    assert!(
        last["failed_step"]
            .as_str()
            .is_some_and(|s| s.starts_with("replica2: RESET SLAVE ALL")),
        "{last}"
    );
    assert_eq!(
        last["undone"],
        serde_json::json!([
            "replica2: SET GLOBAL read_only = 1",
            "replica2: START SLAVE",
            "primary: SET GLOBAL read_only = 0"
        ]),
        "{last}"
    );
    assert_eq!(last["not_undone"], serde_json::json!([]), "{last}");
    wait_writer(&sluice, &config, "primary");
    let mut c = login(&sluice);
    write_until_acked(&sluice, &mut c, 1, Duration::from_secs(5));
    // What was written reaches the candidate: it replicates as before.
    candidate
        .wait_for_gtid(
            &set.primary.gtid_binlog_pos().unwrap(),
            Duration::from_secs(10),
        )
        .unwrap();

    // A failover with the same account still leaves a writer: the promoted replica
    // keeps its stopped replication settings, and the record says so.
    set.primary.kill().unwrap();
    let gap = write_until_acked(&sluice, &mut c, 2, Duration::from_secs(20));
    let last = wait_failover_record(&sluice, &config);
    println!("failover without RELOAD: writes back after {gap:?}; {last}");
    assert_eq!(last["outcome"], "ok", "{last}");
    assert!(
        last["notes"][0]
            .as_str()
            .is_some_and(|n| n.contains("RESET SLAVE ALL")),
        "{last}"
    );
    let writer = match last["to"].as_str().unwrap() {
        "replica1" => &set.replicas[0],
        _ => &set.replicas[1],
    };
    assert_eq!(writer.query_value("SELECT @@read_only").unwrap(), "0");
    // It stays the writer through the monitor's next checks, which see those settings
    // (every 200 ms): a second of writes, each answered at once.
    let until = Instant::now() + Duration::from_secs(1);
    let mut id = 3;
    while Instant::now() < until {
        let started = Instant::now();
        match c.query(&format!("INSERT INTO fg.t VALUES ({id})")) {
            Ok(Reply::Ok { .. }) => {}
            other => panic!("write {id}: {other:?}\n{}", sluice.log()),
        }
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "write {id} waited"
        );
        assert_eq!(servers(&sluice, &config)["writer"], last["to"]);
        id += 1;
    }
}

#[test]
fn a_failover_that_cannot_make_a_writer_puts_the_candidates_back_and_the_old_primary_returns() {
    let mut set = replica_set(false);
    let config = with_monitor_account(&set, "SLAVE MONITOR, REPLICATION SLAVE ADMIN, RELOAD");
    let sluice = Sluice::start(&config);
    assert_eq!(
        missing_privileges(&sluice, &config, "replica1"),
        serde_json::json!(["READ_ONLY ADMIN"])
    );
    set.primary.kill().unwrap();
    // Every attempt fails at read_only = 0 and is undone; the attempt shows it.
    assert!(
        wait_until(Duration::from_secs(10), || servers(&sluice, &config)
            ["last_failover"]["failed_step"]
            .as_str()
            .is_some_and(|s| s.contains("SET GLOBAL read_only = 0"))),
        "{}\n{}",
        servers(&sluice, &config),
        sluice.log()
    );
    let last = servers(&sluice, &config)["last_failover"].clone();
    assert_eq!(last["kind"], "failover", "{last}");
    assert_eq!(
        last["undone"],
        serde_json::json!([format!("{}: START SLAVE", last["to"].as_str().unwrap())]),
        "{last}"
    );
    for replica in &set.replicas {
        assert_eq!(replica.query_value("SELECT @@read_only").unwrap(), "1");
        assert_eq!(replica_of(replica), Some(set.primary.port().to_string()));
    }
    // The old primary was not fenced: back, it is the writer again, and the replicas
    // that were put back follow it.
    set.primary.restart().unwrap();
    wait_writer(&sluice, &config, "primary");
    let mut c = login(&sluice);
    write_until_acked(&sluice, &mut c, 1, Duration::from_secs(10));
    for replica in &set.replicas {
        replica.wait_replicating(Duration::from_secs(10)).unwrap();
    }
}
