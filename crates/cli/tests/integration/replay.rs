//! Transaction replay: a multiplexed session's transaction open on the primary when the
//! primary is SIGKILLed goes on on the promoted replica, run again there up to the
//! statement in flight, when every answer there is the one the client saw; a
//! transaction whose answers differ there gets the error it always got (1213, rolled
//! back), and the counts of both are in the API.

use super::failover::{failover_config, wait_failover};
use super::routing::{admin_get, login, one, replica_set, replica_set_with};
use crate::support::wire::{RawConn, Reply};
use crate::support::{Config, Sluice};
use sluice_sandbox::ReplicaSet;
use std::time::Duration;

/// A primary with two replicas (semi-synchronous) holding `rp.t` with row (1, 10), and
/// Sluice in front of them with failover on.
fn start() -> (ReplicaSet, Config, Sluice) {
    start_logging("ROW")
}

/// [`start`] with this `binlog_format`. Autocommit writes go on their own, as with
/// `failover.wrap_autocommit_writes = false`: what these tests look at is how a write
/// whose own OK is not in hand is settled (`replay_wrap.rs` has the wrapped ones).
fn start_logging(format: &str) -> (ReplicaSet, Config, Sluice) {
    start_configured(format, "", |c| c.failover("wrap_autocommit_writes", false))
}

/// [`start_logging`], running `sql` on the primary first and changing Sluice's
/// configuration with `configure`.
pub(super) fn start_configured(
    format: &str,
    sql: &str,
    configure: impl FnOnce(Config) -> Config,
) -> (ReplicaSet, Config, Sluice) {
    let set = replica_set_with(true, vec![format!("--binlog-format={format}")]);
    set.primary
        .execute(&format!(
            "CREATE DATABASE rp; CREATE TABLE rp.t (id BIGINT PRIMARY KEY, v INT); \
             INSERT INTO rp.t VALUES (1, 10); {sql}"
        ))
        .unwrap();
    set.wait_caught_up(Duration::from_secs(30)).unwrap();
    let config = configure(failover_config(&set));
    let sluice = Sluice::start(&config);
    (set, config, sluice)
}

#[test]
fn an_open_transaction_goes_on_on_the_new_writer() {
    let (set, config, sluice) = start();

    let mut kept = inserted_in_transaction(&sluice);
    assert_eq!(one(&mut kept, "SELECT SUM(v) FROM rp.t"), "30");
    // Its answer names the server: it can't be the same on another one.
    let mut differs = login(&sluice);
    differs.query("BEGIN").unwrap().expect_ok();
    assert_eq!(one(&mut differs, "SELECT @@server_id"), "1");

    set.primary.kill().unwrap();
    // Sent while the primary is gone: it waits for the new writer, where the
    // transaction runs again first.
    kept.query("INSERT INTO rp.t VALUES (3, 30)")
        .unwrap_or_else(|e| panic!("{e}\n{}", sluice.log()))
        .expect_ok();
    assert_eq!(one(&mut kept, "SELECT SUM(v) FROM rp.t"), "60");
    kept.query("COMMIT").unwrap().expect_ok();
    let (writer, new) = wait_failover(&sluice, &config, &set);

    let rows = new.execute("SELECT id, v FROM rp.t ORDER BY id").unwrap();
    assert_eq!(
        rows.lines().skip(1).collect::<Vec<_>>(),
        ["1\t10", "2\t20", "3\t30"],
        "on {writer}"
    );
    match differs
        .query("SELECT 1")
        .unwrap_or_else(|e| panic!("{e}\n{}", sluice.log()))
    {
        Reply::Err(e) => assert_eq!(e.code, 1213, "{e:?}"),
        other => panic!("{other:?}\n{}", sluice.log()),
    }
    // The session goes on, outside a transaction, on the new writer.
    differs.query("BEGIN").unwrap().expect_ok();
    assert_ne!(one(&mut differs, "SELECT @@server_id"), "1");
    differs.query("ROLLBACK").unwrap().expect_ok();

    let stats = &admin_get(&sluice, &config, "/v1/servers")["stats"];
    assert_eq!(stats["replays_attempted"], 2, "{stats}");
    assert_eq!(stats["replays_succeeded"], 1, "{stats}");
    assert_eq!(stats["replays_refused"], 1, "{stats}");
    assert_eq!(stats["replays_refused_by"]["mismatch"], 1, "{stats}");
    let client = crate::support::http::Client::new(
        config.admin_address().unwrap(),
        Some(sluice::config::Secret(super::routing::ADMIN_TOKEN.into())),
    );
    let metrics = String::from_utf8(client.get("/metrics").unwrap().body).unwrap();
    for line in [
        "sluice_transaction_replays_attempted_total 2",
        "sluice_transaction_replays_succeeded_total 1",
        "sluice_transaction_replays_refused_total{reason=\"mismatch\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}\n{metrics}");
    }
}

/// The writer dies while a statement of the transaction waits for a row lock there:
/// the statement is lost before any reply, and runs on the new writer after the
/// transaction so far.
#[test]
fn a_statement_in_flight_when_the_writer_dies_runs_on_the_new_one() {
    let (set, config, sluice) = start();

    // A direct client of the primary holds row 1.
    let mut holder = on_primary(&set);
    holder.query("BEGIN").unwrap().expect_ok();
    holder
        .query("SELECT v FROM rp.t WHERE id = 1 FOR UPDATE")
        .unwrap();

    let mut c = login(&sluice);
    c.query("BEGIN").unwrap().expect_ok();
    c.query("INSERT INTO rp.t VALUES (2, 20)")
        .unwrap()
        .expect_ok();
    let waiting = std::thread::spawn(move || {
        let r = c.query("UPDATE rp.t SET v = 11 WHERE id = 1");
        (c, r)
    });
    // The update waits for the lock on the primary.
    assert!(crate::support::wait_until(Duration::from_secs(10), || {
        set.primary
            .execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE '%UPDATE rp.t%' AND ID <> CONNECTION_ID()",
            )
            .is_ok_and(|out| out.lines().nth(1) == Some("1"))
    }));
    set.primary.kill().unwrap();
    let (mut c, reply) = waiting.join().unwrap();
    match reply.unwrap_or_else(|e| panic!("{e}\n{}", sluice.log())) {
        Reply::Ok { affected_rows, .. } => assert_eq!(affected_rows, 1),
        other => panic!("{other:?}\n{}", sluice.log()),
    }
    c.query("COMMIT").unwrap().expect_ok();
    let (writer, new) = wait_failover(&sluice, &config, &set);
    let rows = new.execute("SELECT id, v FROM rp.t ORDER BY id").unwrap();
    assert_eq!(
        rows.lines().skip(1).collect::<Vec<_>>(),
        ["1\t11", "2\t20"],
        "on {writer}"
    );
    let stats = &admin_get(&sluice, &config, "/v1/servers")["stats"];
    assert_eq!(stats["replays_succeeded"], 1, "{stats}");
    drop(holder);
}

/// A transaction of prepared statements replays too, BEGIN and COMMIT included (as
/// sysbench prepares them): its executes are prepared again on the new writer, under the
/// ids the client knows.
#[test]
fn a_prepared_transaction_goes_on_on_the_new_writer() {
    let (set, config, sluice) = start();

    let mut c = login(&sluice);
    let begin = c.prepare("BEGIN").unwrap();
    let commit = c.prepare("COMMIT").unwrap();
    let insert = c.prepare("INSERT INTO rp.t VALUES (?, ?)").unwrap();
    let read = c.prepare("SELECT v FROM rp.t WHERE id <= ?").unwrap();
    assert_eq!(c.execute_rows(begin, &[]).unwrap(), 0);
    assert_eq!(c.execute_rows(insert, &["2", "20"]).unwrap(), 0);
    assert_eq!(c.execute_rows(read, &["2"]).unwrap(), 2);

    set.primary.kill().unwrap();
    assert_eq!(
        c.execute_rows(insert, &["3", "30"])
            .unwrap_or_else(|e| panic!("{e}\n{}", sluice.log())),
        0
    );
    assert_eq!(c.execute_rows(read, &["3"]).unwrap(), 3);
    assert_eq!(c.execute_rows(commit, &[]).unwrap(), 0);
    let (writer, new) = wait_failover(&sluice, &config, &set);
    let rows = new.execute("SELECT id, v FROM rp.t ORDER BY id").unwrap();
    assert_eq!(
        rows.lines().skip(1).collect::<Vec<_>>(),
        ["1\t10", "2\t20", "3\t30"],
        "on {writer}"
    );
    let stats = &admin_get(&sluice, &config, "/v1/servers")["stats"];
    assert_eq!(stats["replays_succeeded"], 1, "{stats}");
}

/// Writes that may have committed when the writer died: a COMMIT and an autocommit
/// INSERT. Without `direct`, a global read lock holds both on the primary before its
/// binlog. With `direct`, the INSERT waits for a row lock there, while the COMMIT and,
/// after both were sent, a write made on the primary around Sluice reach the binlog and
/// every replica and wait for an acknowledgement that never comes: the new writer has
/// two GTIDs no client of Sluice was told of. Returns the replies, the rows the new
/// writer has, and Sluice's stats.
fn writes_in_flight(
    format: &str,
    direct: bool,
    names_server: bool,
) -> (Reply, Reply, Vec<String>, serde_json::Value) {
    let (set, config, sluice) = start_logging(format);
    let mut holder = on_primary(&set);
    // Acknowledged through Sluice: what a later commit is told apart from.
    let mut before = login(&sluice);
    before
        .query("INSERT INTO rp.t VALUES (5, 50)")
        .unwrap()
        .expect_ok();
    let (mut committing, mut inserting) = two_writers(&sluice);
    if names_server {
        assert_eq!(one(&mut committing, "SELECT @@server_id"), "1");
    }
    if direct {
        acknowledge_nothing(&set);
        holder.query("BEGIN").unwrap().expect_ok();
        holder
            .query("INSERT INTO rp.t VALUES (3, 99)")
            .unwrap()
            .expect_ok();
    } else {
        holder
            .query("FLUSH TABLES WITH READ LOCK")
            .unwrap()
            .expect_ok();
    }
    let commit = std::thread::spawn(move || committing.query("COMMIT"));
    let insert = std::thread::spawn(move || inserting.query("INSERT INTO rp.t VALUES (3, 30)"));
    assert!(crate::support::wait_until(Duration::from_secs(10), || {
        set.primary
            .execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE (INFO = 'COMMIT' OR INFO LIKE '%INSERT INTO rp.t VALUES (3, 30)%') \
                 AND ID <> CONNECTION_ID()",
            )
            .is_ok_and(|out| out.lines().nth(1) == Some("2"))
    }));
    // Made after both were sent: no position of the primary read before them covers it.
    let around = direct.then(|| {
        let mut conn = on_primary(&set);
        let write = std::thread::spawn(move || conn.query("INSERT INTO rp.t VALUES (9, 90)"));
        on_every_replica(&set, "SELECT COUNT(*) FROM rp.t WHERE id IN (2, 9)", "2");
        write
    });
    let [commit, insert] = kill_primary_then_join(&set, &sluice, [commit, insert]);
    if let Some(write) = around {
        // Its connection died with the primary.
        let _ = write.join().unwrap();
    }
    let (_, new) = wait_failover(&sluice, &config, &set);
    let rows = new.execute("SELECT id FROM rp.t ORDER BY id").unwrap();
    let rows = rows.lines().skip(1).map(String::from).collect();
    let stats = admin_get(&sluice, &config, "/v1/servers")["stats"].clone();
    drop(holder);
    (commit, insert, rows, stats)
}

/// A session through Sluice in a transaction that inserted (2, 20).
fn inserted_in_transaction(sluice: &Sluice) -> RawConn {
    let mut conn = login(sluice);
    conn.query("BEGIN").unwrap().expect_ok();
    conn.query("INSERT INTO rp.t VALUES (2, 20)")
        .unwrap()
        .expect_ok();
    conn
}

/// Two sessions through Sluice: one in a transaction that inserted (2, 20), about to
/// commit, and one about to insert in autocommit.
fn two_writers(sluice: &Sluice) -> (RawConn, RawConn) {
    (inserted_in_transaction(sluice), login(sluice))
}

/// SIGKILLs the primary, then waits for the clients' statements in flight: their replies.
fn kill_primary_then_join<const N: usize>(
    set: &ReplicaSet,
    sluice: &Sluice,
    clients: [std::thread::JoinHandle<std::io::Result<Reply>>; N],
) -> [Reply; N] {
    set.primary.kill().unwrap();
    clients.map(|c| {
        c.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{e}\n{}", sluice.log()))
    })
}

/// The new writer has nothing past what Sluice acknowledged: neither write can have
/// reached it, and both run there once.
#[test]
fn writes_in_flight_run_on_the_new_writer_when_it_surely_lacks_them() {
    let (commit, insert, rows, stats) = writes_in_flight("ROW", false, false);
    commit.expect_ok();
    match insert {
        Reply::Ok { affected_rows, .. } => assert_eq!(affected_rows, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(rows, ["1", "2", "3", "5"]);
    assert_eq!(stats["replays_succeeded"], 2, "{stats}");
}

/// The new writer has GTIDs no client of Sluice was told of, and with row-based
/// logging they name no connection: either may be either write, so neither is sent
/// again, and both clients get the lost connection's error (the COMMIT did commit).
#[test]
fn writes_in_flight_get_the_error_when_the_new_writer_may_have_them() {
    let (commit, insert, rows, stats) = writes_in_flight("ROW", true, false);
    for reply in [commit, insert] {
        match reply {
            Reply::Err(e) => assert_eq!((e.code, e.state.as_str()), (1158, "08S01"), "{e:?}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(rows, ["1", "2", "5", "9"]);
    assert_eq!(stats["replays_refused_by"]["outcome_unknown"], 2, "{stats}");
}

/// With statement-based or mixed logging, each transaction in the binlog names the
/// connection that ran it: the COMMIT is found there and answered, the write made
/// around Sluice is told apart from the INSERT, which the new writer surely lacks and
/// which runs there once.
#[test]
fn writes_in_flight_run_on_the_new_writer_when_what_it_has_is_others() {
    let (commit, insert, rows, stats) = writes_in_flight("MIXED", true, false);
    commit.expect_ok();
    match insert {
        Reply::Ok { affected_rows, .. } => assert_eq!(affected_rows, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(rows, ["1", "2", "3", "5", "9"]);
    assert_eq!(stats["replays_succeeded"], 2, "{stats}");
    assert_eq!(stats["commits_found"], 1, "{stats}");
}

/// A COMMIT and an autocommit INSERT through Sluice that the primary logged and sent to
/// its replicas, then waited on for a replica's acknowledgement that never came, when
/// it was killed: the new writer has both. Returns their replies, the rows the new
/// writer has, Sluice's stats and its `/metrics`.
fn never_acknowledged(
    (set, config, sluice): (ReplicaSet, Config, Sluice),
) -> (Reply, Reply, Vec<String>, serde_json::Value, String) {
    let mut before = login(&sluice);
    before
        .query("INSERT INTO rp.t VALUES (5, 50)")
        .unwrap()
        .expect_ok();
    acknowledge_nothing(&set);
    let (mut committing, mut inserting) = two_writers(&sluice);
    let commit = std::thread::spawn(move || committing.query("COMMIT"));
    let insert = std::thread::spawn(move || inserting.query("INSERT INTO rp.t VALUES (3, 30)"));
    // Both are on every replica, and still waiting on the primary.
    on_every_replica(&set, "SELECT COUNT(*) FROM rp.t WHERE id IN (2, 3)", "2");
    assert!(!commit.is_finished() && !insert.is_finished());
    let [commit, insert] = kill_primary_then_join(&set, &sluice, [commit, insert]);
    let (_, new) = wait_failover(&sluice, &config, &set);
    let rows = new.execute("SELECT id FROM rp.t ORDER BY id").unwrap();
    let rows = rows.lines().skip(1).map(String::from).collect();
    let stats = admin_get(&sluice, &config, "/v1/servers")["stats"].clone();
    let client = crate::support::http::Client::new(
        config.admin_address().unwrap(),
        Some(sluice::config::Secret(super::routing::ADMIN_TOKEN.into())),
    );
    let metrics = String::from_utf8(client.get("/metrics").unwrap().body).unwrap();
    // The sessions go on, out of any transaction.
    let mut after = login(&sluice);
    assert_eq!(one(&mut after, "SELECT COUNT(*) FROM rp.t"), "4");
    (commit, insert, rows, stats, metrics)
}

/// A direct client of the primary, around Sluice.
fn on_primary(set: &ReplicaSet) -> RawConn {
    RawConn::login(
        set.primary.addr(),
        crate::support::NATIVE_USER,
        crate::support::NATIVE_PASSWORD,
        None,
    )
    .unwrap()
}

/// Commits on the primary wait for a semi-sync acknowledgement however long, and the
/// replicas reconnect as asynchronous ones: they get every transaction and acknowledge
/// none.
pub(super) fn acknowledge_nothing(set: &ReplicaSet) {
    set.primary
        .execute(
            "SET GLOBAL rpl_semi_sync_master_wait_no_slave = ON, \
             rpl_semi_sync_master_timeout = 600000",
        )
        .unwrap();
    for r in &set.replicas {
        r.execute(
            "SET GLOBAL rpl_semi_sync_slave_enabled = OFF; \
             STOP SLAVE IO_THREAD; START SLAVE IO_THREAD",
        )
        .unwrap();
    }
}

/// Waits until `sql` reads `value` on every replica.
#[track_caller]
pub(super) fn on_every_replica(set: &ReplicaSet, sql: &str, value: &str) {
    for r in &set.replicas {
        assert!(crate::support::wait_until(Duration::from_secs(20), || {
            r.execute(sql)
                .is_ok_and(|out| out.lines().nth(1) == Some(value))
        }));
    }
}

#[track_caller]
fn assert_lost_connection(reply: Reply) {
    match reply {
        Reply::Err(e) => assert_eq!((e.code, e.state.as_str()), (1158, "08S01"), "{e:?}"),
        other => panic!("{other:?}"),
    }
}

/// The new writer's binlog names the connections that ran both: the COMMIT is
/// answered as committed; the INSERT gets the lost connection's error (what its OK said
/// can't be known), and neither runs twice.
#[test]
fn a_commit_the_new_writer_has_is_answered_as_committed() {
    let (commit, insert, rows, stats, metrics) = never_acknowledged(start_logging("MIXED"));
    commit.expect_ok();
    assert_lost_connection(insert);
    assert_eq!(rows, ["1", "2", "3", "5"]);
    assert_eq!(stats["replays_succeeded"], 1, "{stats}");
    assert_eq!(stats["commits_found"], 1, "{stats}");
    assert_eq!(stats["replays_refused_by"]["committed_write"], 1, "{stats}");
    let line = "sluice_in_flight_commits_found_total 1";
    assert!(metrics.lines().any(|l| l == line), "{line}\n{metrics}");
}

/// Just after Sluice started, before any commit was acknowledged through it: what the
/// monitor read of the primary's own position is where the commits in doubt start, so
/// the COMMIT the new writer has is still answered as committed, and the INSERT it
/// lacks still runs there once.
#[test]
fn commits_in_doubt_before_any_acknowledgement_are_settled() {
    let (set, config, sluice) = start_logging("MIXED");
    acknowledge_nothing(&set);
    let (mut committing, mut inserting) = two_writers(&sluice);
    let commit = std::thread::spawn(move || committing.query("COMMIT"));
    on_every_replica(&set, "SELECT COUNT(*) FROM rp.t WHERE id = 2", "1");
    // The INSERT waits for a row lock held on the primary, before its binlog: the new
    // writer surely lacks it.
    let mut holder = on_primary(&set);
    holder.query("BEGIN").unwrap().expect_ok();
    holder
        .query("INSERT INTO rp.t VALUES (3, 99)")
        .unwrap()
        .expect_ok();
    let insert = std::thread::spawn(move || inserting.query("INSERT INTO rp.t VALUES (3, 30)"));
    assert!(crate::support::wait_until(Duration::from_secs(10), || {
        set.primary
            .execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE '%INSERT INTO rp.t VALUES (3, 30)%' AND ID <> CONNECTION_ID()",
            )
            .is_ok_and(|out| out.lines().nth(1) == Some("1"))
    }));
    let [commit, insert] = kill_primary_then_join(&set, &sluice, [commit, insert]);
    drop(holder);
    commit.expect_ok();
    match insert {
        Reply::Ok { affected_rows, .. } => assert_eq!(affected_rows, 1),
        other => panic!("{other:?}\n{}", sluice.log()),
    }
    let (_, new) = wait_failover(&sluice, &config, &set);
    let rows = new.execute("SELECT id FROM rp.t ORDER BY id").unwrap();
    assert_eq!(rows.lines().skip(1).collect::<Vec<_>>(), ["1", "2", "3"]);
    let stats = admin_get(&sluice, &config, "/v1/servers")["stats"].clone();
    assert_eq!(stats["commits_found"], 1, "{stats}");
    assert_eq!(stats["replays_succeeded"], 2, "{stats}");
}

/// A COMMIT the new writer's binlog shows committed is acknowledged as any other: the
/// session's next read, sent to a replica that has not applied it (it replicates an
/// hour late), waits for it there and then runs on the writer, and sees the row.
#[test]
fn a_commit_found_on_the_new_writer_is_read_back_by_its_session() {
    let (set, config, sluice) = start_logging("MIXED");
    let mut before = login(&sluice);
    before
        .query("INSERT INTO rp.t VALUES (5, 50)")
        .unwrap()
        .expect_ok();
    set.wait_caught_up(Duration::from_secs(30)).unwrap();
    acknowledge_nothing(&set);
    // Receives all, applies nothing new: after the failover, the one replica to read.
    set.replicas[1]
        .execute("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 3600; START SLAVE")
        .unwrap();
    let mut committing = inserted_in_transaction(&sluice);
    let commit = std::thread::spawn(move || {
        let reply = committing.query("COMMIT")?;
        let read = committing.query("SELECT v FROM rp.t WHERE id = 2")?;
        Ok((reply, read.text_rows()))
    });
    on_every_replica(&set, "SELECT COUNT(*) FROM rp.t WHERE id = 5", "1");
    let received = |r: &sluice_sandbox::MariaDb| {
        let out = r.execute("SELECT @@gtid_slave_pos").unwrap_or_default();
        out.lines().nth(1).map(String::from)
    };
    // The first replica applied the COMMIT (it is promoted: as much received, first in
    // order); the second received it.
    let promoted = &set.replicas[0];
    assert!(crate::support::wait_until(Duration::from_secs(20), || {
        promoted
            .execute("SELECT COUNT(*) FROM rp.t WHERE id = 2")
            .is_ok_and(|out| out.lines().nth(1) == Some("1"))
    }));
    let delayed = &set.replicas[1];
    assert!(crate::support::wait_until(Duration::from_secs(20), || {
        let status = delayed.execute("SHOW SLAVE STATUS\\G").unwrap_or_default();
        let io = status
            .lines()
            .find_map(|l| l.trim().strip_prefix("Gtid_IO_Pos: ").map(String::from));
        io.is_some() && io == received(promoted)
    }));
    assert!(!commit.is_finished());
    set.primary.kill().unwrap();
    let (reply, read): (Reply, _) = commit
        .join()
        .unwrap()
        .unwrap_or_else(|e: std::io::Error| panic!("{e}\n{}", sluice.log()));
    reply.expect_ok();
    assert_eq!(read, [[Some("20".to_string())]], "{}", sluice.log());
    let (_, new) = wait_failover(&sluice, &config, &set);
    assert_eq!(new.port(), promoted.port());
    let stats = admin_get(&sluice, &config, "/v1/servers")["stats"].clone();
    assert_eq!(stats["commits_found"], 1, "{stats}");
}

/// The account a failover reads the new writer's binlog with lacks REPLICATION SLAVE:
/// nothing is guessed, both clients get the lost connection's error, and neither
/// write runs twice.
#[test]
fn a_commit_stays_unknown_when_the_new_writers_binlog_cant_be_read() {
    let started = start_configured(
        "MIXED",
        "CREATE USER no_dump@'%' IDENTIFIED BY 'no-dump'; GRANT SELECT ON *.* TO no_dump@'%'",
        |c| {
            c.failover("replication_user", "no_dump")
                .failover("replication_password", "no-dump")
        },
    );
    let (commit, insert, rows, stats, _) = never_acknowledged(started);
    assert_lost_connection(commit);
    assert_lost_connection(insert);
    assert_eq!(rows, ["1", "2", "3", "5"]);
    assert_eq!(stats["commits_found"], 0, "{stats}");
    assert_eq!(stats["replays_refused_by"]["outcome_unknown"], 2, "{stats}");
}

/// A switchover does not wait for transactions left open on the old writer (nor fail
/// when they outlast its timeout): they are rolled back there and run again on the new
/// writer, where they go on.
#[test]
fn a_switchover_moves_open_transactions_to_the_new_writer() {
    let (set, config, sluice) = start();

    let mut text = inserted_in_transaction(&sluice);
    let mut prepared = login(&sluice);
    let insert = prepared.prepare("INSERT INTO rp.t VALUES (?, ?)").unwrap();
    prepared.query("BEGIN").unwrap().expect_ok();
    assert_eq!(prepared.execute_rows(insert, &["3", "30"]).unwrap(), 0);

    let address = config.admin_address().unwrap();
    let response = crate::support::sluice_admin(
        &address,
        super::routing::ADMIN_TOKEN,
        &["switchover", "--to", "replica1"],
    );
    assert!(
        response.code == Some(0) && response.stdout.contains("\"outcome\": \"ok\""),
        "{}{}\n{}",
        response.stdout,
        response.stderr,
        sluice.log()
    );

    text.query("INSERT INTO rp.t VALUES (4, 40)")
        .unwrap_or_else(|e| panic!("{e}\n{}", sluice.log()))
        .expect_ok();
    assert_eq!(one(&mut text, "SELECT @@server_id"), "2");
    text.query("COMMIT").unwrap().expect_ok();
    assert_eq!(prepared.execute_rows(insert, &["5", "50"]).unwrap(), 0);
    prepared.query("COMMIT").unwrap().expect_ok();

    let rows = set.replicas[0]
        .execute("SELECT id, v FROM rp.t ORDER BY id")
        .unwrap();
    assert_eq!(
        rows.lines().skip(1).collect::<Vec<_>>(),
        ["1\t10", "2\t20", "3\t30", "4\t40", "5\t50"]
    );
    let stats = &admin_get(&sluice, &config, "/v1/servers")["stats"];
    assert_eq!(stats["replays_succeeded"], 2, "{stats}");
    assert_eq!(stats["replays_refused"], 0, "{stats}");
}

/// With `failover.transaction_replay = false`, a transaction lost with its writer is
/// lost as it was before replay existed: the session's connection is gone.
#[test]
fn replay_can_be_turned_off() {
    let set = replica_set(true);
    set.primary
        .execute("CREATE DATABASE rp; CREATE TABLE rp.t (id BIGINT PRIMARY KEY, v INT)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(30)).unwrap();
    let config = failover_config(&set).failover("transaction_replay", false);
    let sluice = Sluice::start(&config);

    let mut c = login(&sluice);
    c.query("BEGIN").unwrap().expect_ok();
    c.query("INSERT INTO rp.t VALUES (2, 20)")
        .unwrap()
        .expect_ok();
    set.primary.kill().unwrap();
    let reply = c.query("INSERT INTO rp.t VALUES (3, 30)");
    assert!(
        !matches!(reply, Ok(Reply::Ok { .. })),
        "{reply:?}\n{}",
        sluice.log()
    );
    let (_, new) = wait_failover(&sluice, &config, &set);
    let rows = new.execute("SELECT COUNT(*) FROM rp.t").unwrap();
    assert_eq!(rows.lines().nth(1), Some("0"));
    let stats = &admin_get(&sluice, &config, "/v1/servers")["stats"];
    assert_eq!(stats["replays_attempted"], 0, "{stats}");
}

/// A COMMIT lost in flight that surely did not happen, whose transaction's answers
/// differ on the new writer: rolled back, and the client is told so (1213), not that
/// the outcome is unknown.
#[test]
fn a_commit_that_surely_did_not_happen_is_rolled_back_when_its_replay_differs() {
    let (commit, insert, rows, stats) = writes_in_flight("ROW", false, true);
    match commit {
        Reply::Err(e) => assert_eq!((e.code, e.state.as_str()), (1213, "40001"), "{e:?}"),
        other => panic!("{other:?}"),
    }
    match insert {
        Reply::Ok { affected_rows, .. } => assert_eq!(affected_rows, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(rows, ["1", "3", "5"]);
    assert_eq!(stats["replays_refused_by"]["mismatch"], 1, "{stats}");
    assert_eq!(stats["replays_succeeded"], 1, "{stats}");
}
