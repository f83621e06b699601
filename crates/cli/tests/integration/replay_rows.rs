//! Wrapped autocommit writes (`failover.wrap_autocommit_writes`) under row-based
//! logging: `ROW_COUNT()` right after one reads the write's own count, as text and
//! prepared, exactly as directly; and a commit in doubt is matched to the connection
//! that ran it, which the statement text Sluice sent names in the binlog.

use super::drivers::{require, run_script};
use super::failover::wait_failover;
use super::replay::{acknowledge_nothing, on_every_replica, start_configured};
use super::replay_wrap::{commits, without_timings};
use super::routing::{admin_get, login};
use crate::support::repo_root;
use crate::support::wire::Reply;

/// `ROW_COUNT()` after every kind of wrapped write, in expressions, in a variable, in a
/// multi-statement and through `PREPARE`/`EXECUTE`, with the server's column types, as
/// the `mariadb` client prints them directly and through Sluice.
#[test]
fn row_count_after_a_wrapped_write_reads_as_directly() {
    let (set, _config, sluice) = start_configured(
        "ROW",
        "CREATE TABLE rp.direct (id INT AUTO_INCREMENT PRIMARY KEY, a INT); \
         CREATE TABLE rp.proxied LIKE rp.direct",
        |c| c.failover("wrap_autocommit_writes", true),
    );
    let script = |table: &str| {
        format!(
            "INSERT INTO {table} (a) VALUES (1), (2);\n\
             SELECT ROW_COUNT();\n\
             UPDATE {table} SET a = a + 1;\n\
             SELECT ROW_COUNT() AS n, ROW_COUNT() + 1, -ROW_COUNT();\n\
             UPDATE {table} SET a = a WHERE id = 1;\n\
             SELECT ROW_COUNT();\n\
             SELECT ROW_COUNT();\n\
             INSERT INTO {table} (id, a) VALUES (1, 1);\n\
             SELECT ROW_COUNT();\n\
             DELETE FROM {table} WHERE id = 2;\n\
             SET @n = ROW_COUNT();\n\
             SELECT @n;\n\
             INSERT INTO {table} (a) VALUES (7);\n\
             SELECT a FROM {table} WHERE id = ROW_COUNT() + 2;\n\
             REPLACE INTO {table} (id, a) VALUES (1, 5);\n\
             DELIMITER //\n\
             SELECT ROW_COUNT(); SELECT ROW_COUNT() //\n\
             DELIMITER ;\n\
             PREPARE s FROM 'SELECT ROW_COUNT() AS p';\n\
             INSERT INTO {table} (a) VALUES (8), (9);\n\
             EXECUTE s;\n\
             DEALLOCATE PREPARE s;\n\
             INSERT INTO {table} (a) VALUES (10);\n\
             SELECT ROW_COUNT();\n"
        )
    };
    let run = |port: u16, table: &str| {
        let out = crate::support::Client::native(port)
            .database("rp")
            .args(["--table", "-vvv", "--force", "--column-type-info"])
            .stdin(script(table))
            .run();
        let text = |t: &str| without_timings(&t.replace(table, "T"));
        (text(&out.stdout), text(&out.stderr))
    };
    let direct = run(set.primary.port(), "direct");
    let before = commits(&set.primary);
    let proxied = run(sluice.port(), "proxied");
    assert_eq!(proxied, direct);
    assert!(direct.0.contains("LONGLONG"), "{}", direct.0);
    // Every write but the one while `s` was prepared went inside a COMMIT of Sluice's.
    let wrapped = commits(&set.primary) - before;
    assert!(wrapped >= 8, "{wrapped}");
}

/// mysql2 reads `ROW_COUNT()` after wrapped writes, text and prepared (prepared before
/// the write, between it and the read, with parameters), as it does directly.
#[test]
fn mysql2_reads_row_count_after_wrapped_writes_as_directly() {
    let root = repo_root();
    let script = require(
        root.join("tests/clients/node/compat.js"),
        "the mysql2 scenario",
    );
    let node = sluice_sandbox::find_program(&["node", "nodejs"])
        .unwrap_or_else(|e| panic!("{e:#}; run `make test`, which installs Node.js"));
    let (set, _config, sluice) = start_configured(
        "ROW",
        "CREATE DATABASE rc_direct; CREATE DATABASE rc_proxied",
        |c| c.failover("wrap_autocommit_writes", true),
    );
    let args = ["--scenario", "rowcount"];
    let direct = run_script(&node, &script, set.primary.port(), "rc_direct", &args);
    let before = commits(&set.primary);
    let proxied = run_script(&node, &script, sluice.port(), "rc_proxied", &args);
    if direct != proxied {
        let direct = serde_json::to_string_pretty(&direct).unwrap();
        let proxied = serde_json::to_string_pretty(&proxied).unwrap();
        panic!(
            "{}\n--- direct ---\n{direct}\n--- sluice ---\n{proxied}",
            crate::support::first_difference(&direct, &proxied)
        );
    }
    let wrapped = commits(&set.primary) - before;
    assert!(wrapped >= 16, "{wrapped}");
}

/// Under row-based logging, a COMMIT of prepared statements and a wrapped autocommit
/// INSERT that the primary logged and sent to its replicas, but never acknowledged
/// when it was killed, are both on the new writer: its binlog names the connections
/// that ran them (the text Sluice sent carries it), so the COMMIT is answered as
/// committed and the INSERT gets its own OK, after which `ROW_COUNT()` is its count.
/// Neither runs twice.
#[test]
fn under_row_logging_commits_in_doubt_are_matched_to_their_connection() {
    let (set, config, sluice) = start_configured(
        "ROW",
        "CREATE TABLE rp.a (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
        |c| c.failover("wrap_autocommit_writes", true),
    );
    login(&sluice)
        .query("INSERT INTO rp.t VALUES (5, 50)")
        .unwrap()
        .expect_ok();
    acknowledge_nothing(&set);
    // A transaction of prepared statements, as sysbench runs them.
    let mut committing = login(&sluice);
    committing.query("BEGIN").unwrap().expect_ok();
    let insert = committing
        .prepare("INSERT INTO rp.t VALUES (?, ?)")
        .unwrap();
    committing.execute_rows(insert, &["2", "20"]).unwrap();
    let mut inserting = login(&sluice);
    let commit = std::thread::spawn(move || committing.query("COMMIT"));
    let insert = std::thread::spawn(move || {
        let reply = inserting.query("INSERT INTO rp.a (v) VALUES (3), (4)")?;
        let count = inserting.query("SELECT ROW_COUNT()")?;
        Ok((reply, count.text_rows()))
    });
    on_every_replica(
        &set,
        "SELECT (SELECT COUNT(*) FROM rp.t WHERE id = 2) + (SELECT COUNT(*) FROM rp.a)",
        "3",
    );
    assert!(!commit.is_finished() && !insert.is_finished());
    set.primary.kill().unwrap();
    let commit = commit.join().unwrap();
    let insert: std::io::Result<(Reply, _)> = insert.join().unwrap();
    let (reply, count) = insert.unwrap_or_else(|e| panic!("{e}\n{}", sluice.log()));
    match commit {
        Ok(Reply::Ok { .. }) => {}
        other => panic!("{other:?}\n{}", sluice.log()),
    }
    match reply {
        Reply::Ok {
            affected_rows,
            status,
            ..
        } => {
            assert_eq!(affected_rows, 2);
            assert_eq!(status & 1, 0, "no transaction open: {status:#x}");
        }
        other => panic!("{other:?}\n{}", sluice.log()),
    }
    assert_eq!(count, [[Some("2".to_string())]]);
    let (_, new) = wait_failover(&sluice, &config, &set);
    let rows = new
        .execute("SELECT (SELECT GROUP_CONCAT(id ORDER BY id) FROM rp.t), COUNT(*) FROM rp.a")
        .unwrap();
    assert_eq!(rows.lines().nth(1), Some("1,2,5\t2"));
    let stats = admin_get(&sluice, &config, "/v1/servers")["stats"].clone();
    assert_eq!(stats["commits_found"], 2, "{stats}");
    assert_eq!(stats["replays_refused"], 0, "{stats}");
}
