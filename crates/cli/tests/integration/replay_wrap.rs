//! `failover.wrap_autocommit_writes`: autocommit writes sent inside a BEGIN ... COMMIT of
//! Sluice's answer exactly as on their own, and one whose COMMIT's reply is lost with
//! the primary, but that the new writer has, gets its own OK.

use super::failover::wait_failover;
use super::replay::{acknowledge_nothing, on_every_replica, start_configured};
use super::routing::{admin_get, login, one};
use crate::support::wire::{RawConn, Reply, CLIENT_SESSION_TRACK};
use crate::support::{NATIVE_PASSWORD, NATIVE_USER};

/// With `failover.wrap_autocommit_writes`, an autocommit INSERT goes inside a BEGIN ...
/// COMMIT of Sluice's. The primary logged and sent it, then was killed waiting for an
/// acknowledgement: the new writer has it, and the client gets the INSERT's own OK (its
/// row, the id it generated), after which `LAST_INSERT_ID()` is that id, as on one
/// server. It is not applied twice.
#[test]
fn a_wrapped_autocommit_write_the_new_writer_has_gets_its_own_ok() {
    let (set, config, sluice) = start_configured(
        "MIXED",
        "CREATE TABLE rp.a (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
        |c| c.failover("wrap_autocommit_writes", true),
    );
    // Acknowledged through Sluice: where the commits in doubt start.
    let mut before = login(&sluice);
    before
        .query("INSERT INTO rp.a (v) VALUES (1), (2)")
        .unwrap()
        .expect_ok();
    acknowledge_nothing(&set);
    let mut inserting = login(&sluice);
    let insert = std::thread::spawn(move || {
        let reply = inserting.query("INSERT INTO rp.a (v) VALUES (3)")?;
        let id = inserting.query("SELECT LAST_INSERT_ID()")?;
        Ok((reply, id.text_rows()))
    });
    on_every_replica(&set, "SELECT COUNT(*) FROM rp.a", "3");
    assert!(!insert.is_finished());
    set.primary.kill().unwrap();
    let (reply, id): (Reply, _) = insert
        .join()
        .unwrap()
        .unwrap_or_else(|e: std::io::Error| panic!("{e}\n{}", sluice.log()));
    match reply {
        Reply::Ok {
            affected_rows,
            last_insert_id,
            status,
        } => {
            assert_eq!((affected_rows, last_insert_id), (1, 3));
            assert_eq!(status & 1, 0, "no transaction open: {status:#x}");
        }
        other => panic!("{other:?}\n{}", sluice.log()),
    }
    assert_eq!(id, [[Some("3".to_string())]]);
    let (_, new) = wait_failover(&sluice, &config, &set);
    let rows = new.execute("SELECT id, v FROM rp.a ORDER BY id").unwrap();
    assert_eq!(
        rows.lines().skip(1).collect::<Vec<_>>(),
        ["1\t1", "2\t2", "3\t3"]
    );
    let stats = admin_get(&sluice, &config, "/v1/servers")["stats"].clone();
    assert_eq!(stats["commits_found"], 1, "{stats}");
    assert_eq!(stats["replays_refused"], 0, "{stats}");
}

/// Wrapped, autocommit writes answer as they do on their own: rows, generated ids,
/// warnings, `UPDATE`'s info, errors, and no transaction left open, as the `mariadb`
/// client prints them directly and through Sluice; and they did go inside a COMMIT.
#[test]
fn wrapped_autocommit_writes_answer_as_on_their_own() {
    let (set, _config, sluice) = start_configured(
        "ROW",
        "CREATE TABLE rp.direct (id INT AUTO_INCREMENT PRIMARY KEY, a TINYINT, u INT UNIQUE); \
         CREATE TABLE rp.proxied LIKE rp.direct",
        |c| c.failover("wrap_autocommit_writes", true),
    );
    let script = |table: &str| {
        format!(
            "INSERT INTO {table} (a, u) VALUES (1, 1);\n\
             SELECT LAST_INSERT_ID(), @@in_transaction;\n\
             INSERT INTO {table} (a, u) VALUES (2, 2), (3, 3);\n\
             SELECT LAST_INSERT_ID();\n\
             INSERT IGNORE INTO {table} (a, u) VALUES (1000, 4);\n\
             INSERT INTO {table} (a, u) VALUES (5, 1);\n\
             SELECT @@in_transaction;\n\
             UPDATE {table} SET a = a + 1 WHERE id <= 2;\n\
             DELETE FROM {table} WHERE id = 3;\n\
             INSERT INTO {table} (id, a, u) VALUES (100, 1, 100);\n\
             SELECT LAST_INSERT_ID();\n\
             REPLACE INTO {table} (id, a, u) VALUES (100, 2, 100);\n\
             SELECT * FROM {table} ORDER BY id;\n"
        )
    };
    let run = |port: u16, table: &str| {
        let out = crate::support::Client::native(port)
            .database("rp")
            .args(["--batch", "-vvv", "--force", "--show-warnings"])
            .stdin(script(table))
            .run();
        // What differs by nature: the table's name and the time each statement took.
        let text = |t: &str| without_timings(&t.replace(table, "T"));
        (text(&out.stdout), text(&out.stderr))
    };
    let commits = || commits(&set.primary);
    let direct = run(set.primary.port(), "direct");
    let before = commits();
    let proxied = run(sluice.port(), "proxied");
    assert_eq!(proxied, direct);
    assert!(direct.0.contains("1 warning") && direct.0.contains("Rows matched: 2"));
    assert!(direct.1.contains("ERROR 1062"), "{direct:?}");
    // One COMMIT per write (8), the one that failed too.
    assert!(commits() - before >= 8, "{}", commits() - before);
    // Executes of a prepared write as well.
    let mut conn = login(&sluice);
    let id = conn
        .prepare("INSERT INTO rp.proxied (a, u) VALUES (?, ?)")
        .unwrap();
    let before = commits();
    assert_eq!(conn.execute_rows(id, &["7", "7"]).unwrap(), 0);
    // A duplicate key (1062: 0x0426 after the ERR header).
    let duplicate = conn.execute_rows(id, &["8", "7"]).unwrap_err();
    assert!(
        duplicate.to_string().contains("[255, 38, 4,"),
        "{duplicate}"
    );
    assert!(commits() - before >= 2, "{}", commits() - before);
    assert_eq!(one(&mut conn, "SELECT @@in_transaction"), "0");
    assert_eq!(
        one(&mut conn, "SELECT COUNT(*) FROM rp.proxied WHERE u = 7"),
        "1"
    );
}

/// The COMMITs `server` has run (`Com_commit`): one per wrapped write.
pub(super) fn commits(server: &sluice_sandbox::MariaDb) -> u64 {
    let out = server
        .execute("SHOW GLOBAL STATUS LIKE 'Com_commit'")
        .unwrap();
    let n = out.lines().nth(1).and_then(|l| l.split('\t').nth(1));
    n.unwrap().parse().unwrap()
}

/// `text` without the `(0.001 sec)` the `mariadb` client prints after each statement.
pub(super) fn without_timings(text: &str) -> String {
    text.lines()
        .map(|l| match l.rfind(" (") {
            Some(at) if l.ends_with(" sec)") => &l[..at],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A client whose session tracking would show the transaction around a wrapped write
/// (`in_transaction`, state changes, transaction state) gets its writes sent on their
/// own; every tracking client gets the OK packets the server writes for it, byte for
/// byte, wrapped or not.
#[test]
fn session_tracking_clients_get_the_oks_of_writes_on_their_own() {
    let (set, _config, sluice) = start_configured(
        "ROW",
        "CREATE TABLE rp.direct (id INT PRIMARY KEY, v INT); \
         CREATE TABLE rp.proxied LIKE rp.direct",
        |c| c.failover("wrap_autocommit_writes", true),
    );
    let settings = [
        "SET SESSION session_track_schema = ON",
        "SET SESSION session_track_system_variables = 'in_transaction'",
        "SET SESSION session_track_state_change = ON",
        "SET SESSION session_track_transaction_info = STATE",
    ];
    let commits = || commits(&set.primary);
    let run = |addr, table: &str| {
        let mut conn = RawConn::connect(addr).expect("connect");
        conn.extra_caps = CLIENT_SESSION_TRACK;
        conn.authenticate(NATIVE_USER, NATIVE_PASSWORD, Some("rp"))
            .unwrap_or_else(|e| panic!("login to {addr} failed: {e:?}"));
        let (mut oks, mut wrapped) = (Vec::new(), Vec::new());
        for (i, setting) in settings.iter().enumerate() {
            conn.query_packet(setting).unwrap();
            let before = commits();
            for sql in [
                format!("INSERT INTO {table} VALUES ({i}, 1)"),
                format!("UPDATE {table} SET v = v + 1 WHERE id = {i}"),
                format!("DELETE FROM {table} WHERE id = {i}"),
            ] {
                let ok = conn.query_packet(&sql).unwrap();
                let hex: String = ok.iter().map(|b| format!("{b:02x}")).collect();
                oks.push(format!("{setting}; {} -> {hex}", sql.replace(table, "T")));
            }
            wrapped.push(commits() - before);
            conn.query_packet(
                "SET SESSION session_track_system_variables = DEFAULT, \
                 session_track_state_change = DEFAULT, session_track_schema = DEFAULT, \
                 session_track_transaction_info = DEFAULT",
            )
            .unwrap();
        }
        (oks, wrapped)
    };
    let (direct, _) = run(set.primary.addr(), "direct");
    let (proxied, wrapped) = run(sluice.addr(), "proxied");
    assert_eq!(proxied, direct);
    // Only the first setting's writes went inside a COMMIT of Sluice's.
    assert_eq!(wrapped, [3, 0, 0, 0]);
}
