//! Pooling and rewriting never change what a statement means: a session's user
//! variables keep their types when it moves between connections, savepoints keep their
//! connection, `CONNECTION_ID()` is never frozen into a stored definition, and privilege
//! changes reach new sessions as they reach new direct connections. Each test runs
//! multiplexed and with `multiplex = false`, with the client it names, and compares
//! with the same statements run directly.

use super::server_state::one_connection;
use crate::support::cli::Interactive;
use crate::support::wire::{RawConn, Reply};
use crate::support::*;

/// Another session runs `sql` (and quits), on the connection the last one used.
fn meanwhile(sluice: &Sluice, database: &str, sql: &str) {
    let mut other = RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, Some(database))
        .unwrap_or_else(|e| panic!("login failed: {e:?}\n{}", sluice.log()));
    match other.query(sql) {
        Ok(Reply::Ok { .. } | Reply::ResultSet { .. }) => {}
        other => panic!("{sql}: {other:?}"),
    }
}

/// The variables of every type: strings of several character sets (one that reads as
/// a number, one a lone `.`), integers, an unsigned one, a decimal, a double, NULL.
const VARIABLES: &str = "SET @a = '0012', @b = '.', @c = 12, @d = 1.50, @e = 0.25e0, \
    @f = NULL, @g = _latin1 X'E9' COLLATE latin1_german1_ci, @h = -7, \
    @i = 18446744073709551615, @j = _binary X'00FF', @k = 'caf\u{e9}';";

/// What the variables are: a table created from them shows each one's type, character
/// set and collation; their values are printed as the client shows them.
fn describe(session: &mut Interactive, table: &str) -> Vec<String> {
    let mut out = session.run(
        "SELECT @a, @b, @c, @d, @e, @f, HEX(@g), COLLATION(@g), @h, @i, HEX(@j), \
         @k, COLLATION(@k);",
    );
    session.run(&format!(
        "CREATE TABLE {table} AS SELECT @a a, @b b, @c c, @d d, @e e, @f f, @g g, @h h, \
         @i i, @j j, @k k;"
    ));
    out.extend(
        session
            .run(&format!("SHOW CREATE TABLE {table};"))
            .into_iter()
            .map(|l| l.replace(table, "t")),
    );
    session.run(&format!("DROP TABLE {table};"));
    out
}

fn user_variables_keep_their_type(multiplex: bool) {
    let server = shared_server();
    let db = if multiplex {
        "uvtype_mux"
    } else {
        "uvtype_ded"
    };
    fresh_database(server, db);
    let sluice = one_connection(server, multiplex);
    // The `mariadb` client negotiates MariaDB's extended metadata.
    let mut direct = Interactive::start(&Client::native(server.port()).database(db));
    let mut proxied = Interactive::start(&Client::native(sluice.port()).database(db));
    let charset = "SET NAMES utf8mb4;";
    for s in [&mut direct, &mut proxied] {
        assert!(s.run(charset).is_empty());
        assert!(s.run(VARIABLES).is_empty());
    }
    // Another session takes the connection and leaves its own variables there (a
    // dedicated session keeps its connection: the other waits for none).
    if multiplex {
        meanwhile(&sluice, db, "SET @a = 5, @b = 6");
    }
    let want = describe(&mut direct, "uv_direct");
    let got = describe(&mut proxied, "uv_proxied");
    assert_eq!(got, want, "{}", sluice.log());
    assert!(
        want.iter().any(|l| l.contains("0012")),
        "the direct run shows the string: {want:?}"
    );
}

#[test]
fn user_variables_keep_their_type_multiplexed() {
    user_variables_keep_their_type(true);
}

#[test]
fn user_variables_keep_their_type_dedicated() {
    user_variables_keep_their_type(false);
}

/// Definitions that call `CONNECTION_ID()`, and what the server keeps of each.
const DEFINITIONS: &str = "
CREATE TABLE t (id INT, a INT DEFAULT CONNECTION_ID(), b BIGINT DEFAULT (CONNECTION_ID() + 1));
ALTER TABLE t ADD c INT DEFAULT CONNECTION_ID();
CREATE VIEW v AS SELECT CONNECTION_ID() AS c;
CREATE PROCEDURE p() SELECT CONNECTION_ID() AS c;
CREATE FUNCTION f() RETURNS INT NO SQL RETURN CONNECTION_ID();
CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.id = CONNECTION_ID();
CREATE EVENT e ON SCHEDULE AT '2030-01-01 00:00:00' DO INSERT INTO t (id) VALUES (CONNECTION_ID());
PREPARE s FROM 'CREATE TABLE t2 (a INT DEFAULT CONNECTION_ID())';
EXECUTE s;
SHOW CREATE TABLE t;
SHOW CREATE TABLE t2;
SELECT VIEW_DEFINITION FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE();
SELECT ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES
  WHERE ROUTINE_SCHEMA = DATABASE() ORDER BY 1;
SELECT ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE();
SELECT EVENT_DEFINITION FROM information_schema.EVENTS WHERE EVENT_SCHEMA = DATABASE();
DROP EVENT e; DROP TRIGGER tr; DROP FUNCTION f; DROP PROCEDURE p; DROP VIEW v;
DROP TABLE t, t2;
";

fn connection_id_is_never_stored(multiplex: bool) {
    let server = shared_server();
    let db = if multiplex {
        "cidstored_mux"
    } else {
        "cidstored_ded"
    };
    fresh_database(server, db);
    let sluice = Sluice::start(&Config::for_server(server).pool("multiplex", multiplex));
    let proxied = Client::native(sluice.port())
        .database(db)
        .query(DEFINITIONS);
    proxied.assert_success();
    let direct = Client::native(server.port())
        .database(db)
        .query(DEFINITIONS);
    direct.assert_success();
    assert!(
        direct.stdout.contains("connection_id()"),
        "{}",
        direct.stdout
    );
    proxied.assert_same_as(&direct);
    // Read now, the id is still the session's own, as its handshake told it.
    let mut session = Interactive::start(&Client::native(sluice.port()).database(db));
    let id = session.value("SELECT CONNECTION_ID();");
    assert_eq!(session.value("SELECT CONNECTION_ID() + 0;"), id);
}

#[test]
fn connection_id_is_never_stored_multiplexed() {
    connection_id_is_never_stored(true);
}

#[test]
fn connection_id_is_never_stored_dedicated() {
    connection_id_is_never_stored(false);
}

/// A step of a session driven through the `mariadb` client, with another session
/// trying to take its connection in between.
enum Step {
    /// Statements of the session under test; what they print is compared.
    Own(&'static str),
    /// Another session's statement, sent while the session under test is idle: it runs
    /// at once if the connection is free, and waits for it if the session kept it.
    Other(&'static str),
}

/// Runs `steps` as one `mariadb` session against `port`, with `others` on `sluice`
/// (none directly): what the session printed, and the other sessions' threads.
fn run_steps(
    port: u16,
    db: &'static str,
    steps: &[Step],
    sluice: Option<(&Sluice, &str)>,
) -> (Vec<String>, Vec<std::thread::JoinHandle<String>>) {
    let mut session = Interactive::start(&Client::native(port).database(db));
    let mut printed = Vec::new();
    let mut others = Vec::new();
    for step in steps {
        match (step, sluice) {
            (Step::Own(sql), _) => printed.extend(session.run(sql)),
            (Step::Other(sql), Some((sluice, admin))) => {
                let queued = || {
                    admin_json(admin, "t", "/v1/overview")["queued"]
                        .as_u64()
                        .unwrap_or(0)
                };
                // Others sent before may still be waiting for the connection.
                let before = queued();
                let (addr, sql) = (sluice.addr(), sql.to_string());
                let other = std::thread::spawn(move || {
                    let mut c = RawConn::login(addr, NATIVE_USER, NATIVE_PASSWORD, Some(db))
                        .expect("the other session logs in");
                    format!("{:?}", c.query(&sql))
                });
                // Either it ran on the connection, or it waits for it: never both.
                let waiting = || queued() > before;
                assert!(
                    wait_until(std::time::Duration::from_secs(10), || other.is_finished()
                        || waiting()),
                    "the other session neither ran nor waited\n{}",
                    sluice.log()
                );
                others.push(other);
            }
            (Step::Other(_), None) => {}
        }
    }
    drop(session);
    (printed, others)
}

/// Savepoints and transactions the server does not report as open (`autocommit = 0`
/// with no table touched yet) keep their connection: another session waits for it.
fn savepoints_keep_their_connection(multiplex: bool) {
    use Step::*;
    let server = shared_server();
    let db = if multiplex {
        "savepoint_mux"
    } else {
        "savepoint_ded"
    };
    fresh_database(server, db);
    server
        .execute(&format!(
            "CREATE TABLE {db}.sp (a INT) ENGINE=InnoDB; CREATE TABLE {db}.sp2 (a INT)"
        ))
        .expect("tables");
    let steps = [
        Own("SET autocommit = 0;"),
        Own("SAVEPOINT s1;"),
        Other("SELECT 1"),
        Own("INSERT INTO sp VALUES (1);"),
        Own("RELEASE SAVEPOINT s1;"),
        Own("SAVEPOINT s2;"),
        Other("SELECT 2"),
        Own("INSERT INTO sp VALUES (2);"),
        Own("ROLLBACK TO SAVEPOINT s2;"),
        Own("COMMIT;"),
        Own("SELECT * FROM sp;"),
        Own("SET autocommit = 1;"),
        Own("START TRANSACTION;"),
        Own("SAVEPOINT s3;"),
        Other("SELECT 3"),
        Own("INSERT INTO sp2 VALUES (3);"),
        Own("ROLLBACK TO SAVEPOINT s3;"),
        Own("RELEASE SAVEPOINT s3;"),
        Own("COMMIT;"),
        Own("SELECT COUNT(*) FROM sp2;"),
        Own("DELETE FROM sp;"),
    ];
    // Dedicated, each session has a connection of its own: the other one gets another.
    let config = Config::for_server(server)
        .pool("multiplex", multiplex)
        .pool("max_connections", if multiplex { 1 } else { 2 })
        .pool("queue_timeout", "20s")
        .pool("write_hold", "0s")
        .admin("t");
    let sluice = Sluice::start(&config);
    let admin = config.admin_address().expect("admin on");
    let (direct, _) = run_steps(server.port(), db, &steps, None);
    assert_eq!(direct, ["1", "0"], "directly");
    let (proxied, others) = run_steps(sluice.port(), db, &steps, Some((&sluice, &admin)));
    assert_eq!(proxied, direct, "through Sluice\n{}", sluice.log());
    for other in others {
        let answer = other.join().expect("the other session");
        assert!(answer.contains("ResultSet"), "{answer}");
    }
}

#[test]
fn savepoints_keep_their_connection_multiplexed() {
    savepoints_keep_their_connection(true);
}

#[test]
fn savepoints_keep_their_connection_dedicated() {
    savepoints_keep_their_connection(false);
}

/// `SHOW ENGINE INNODB STATUS` needs the global PROCESS privilege: what it printed on
/// standard error (empty when allowed), the same directly and through Sluice.
fn process_denied(port: u16, user: &str) -> String {
    let out = Client::new(port, user, "g_pw").query("SHOW ENGINE INNODB STATUS");
    out.stderr.replace("'127.0.0.1'", "'<host>'")
}

/// The threads the server runs for `user` (Sluice's pooled connections among them).
fn threads_of(server: &MariaDb, user: &str) -> usize {
    server
        .execute(&format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{user}'"
        ))
        .expect("the process list")
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .parse()
        .expect("a count")
}

/// A new session through Sluice has exactly the rights a new direct connection has, at
/// once: a GRANT or REVOKE made on the server reaches the next session even though the
/// pool holds connections that logged in before it; grants the server applies to
/// running sessions (on a database) reach running sessions; and a dropped account's
/// pooled connections are closed. With the `mariadb` client.
fn privilege_changes_reach_new_sessions(multiplex: bool) {
    let server = shared_server();
    let (user, db) = if multiplex {
        ("g_mux", "grants_mux")
    } else {
        ("g_ded", "grants_ded")
    };
    fresh_database(server, db);
    server
        .execute(&format!(
            "DROP USER IF EXISTS {user}; CREATE USER {user} IDENTIFIED BY 'g_pw'; \
             GRANT SELECT ON mysql.* TO {user}; CREATE TABLE {db}.t (a INT); \
             INSERT INTO {db}.t VALUES (1);"
        ))
        .expect("the account");
    // Connections that carry a client's attributes serve only that client process
    // (each run of the `mariadb` client is one): shared here, as an application's
    // pool reconnecting from one process shares them.
    let sluice = Sluice::start(
        &Config::for_server(server)
            .server_accounts()
            .accounts("refresh", "1s")
            .pool("multiplex", multiplex)
            .pool("forward_attributes", false),
    );
    let denied = process_denied(server.port(), user);
    assert!(denied.contains("ERROR 1227"), "directly: {denied}");
    // A pooled connection logs in without PROCESS.
    assert_eq!(process_denied(sluice.port(), user), denied);

    server
        .execute(&format!("GRANT PROCESS ON *.* TO {user}"))
        .unwrap();
    assert_eq!(process_denied(server.port(), user), "");
    assert_eq!(process_denied(sluice.port(), user), "", "{}", sluice.log());

    // A session that began while the account had PROCESS.
    let mut running = Interactive::start(&Client::new(sluice.port(), user, "g_pw"));
    assert_eq!(running.run("SELECT 1;"), ["1"]);
    server
        .execute(&format!("REVOKE PROCESS ON *.* FROM {user}"))
        .unwrap();
    assert_eq!(process_denied(server.port(), user), denied);
    assert_eq!(
        process_denied(sluice.port(), user),
        denied,
        "{}",
        sluice.log()
    );
    if !multiplex {
        // Its own connection keeps the rights of its login, as on the server.
        let status = running.run("SHOW ENGINE INNODB STATUS;");
        assert!(!status.iter().any(|l| l.contains("ERROR")), "{status:?}");
    }

    // A database grant reaches a running session, as on the server.
    let read = format!("SELECT a FROM {db}.t;");
    let refused = running.run(&read);
    assert!(
        refused.iter().any(|l| l.contains("ERROR 1142")),
        "{refused:?}"
    );
    server
        .execute(&format!("GRANT SELECT ON {db}.* TO {user}"))
        .unwrap();
    assert_eq!(running.run(&read), ["1"]);
    drop(running);

    // Dropped: its pooled connections go, rather than keep its rights on the server.
    assert!(threads_of(server, user) > 0, "the pool keeps connections");
    server.execute(&format!("DROP USER {user}")).unwrap();
    assert!(
        wait_until(std::time::Duration::from_secs(10), || threads_of(
            server, user
        ) == 0),
        "a dropped account's connections stay open\n{}",
        sluice.log()
    );
}

#[test]
fn privilege_changes_reach_new_sessions_multiplexed() {
    privilege_changes_reach_new_sessions(true);
}

#[test]
fn privilege_changes_reach_new_sessions_dedicated() {
    privilege_changes_reach_new_sessions(false);
}
