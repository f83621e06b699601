//! Pooling and rewriting never change what a statement means: a session's user
//! variables keep their types when it moves between connections, savepoints keep their
//! connection, `CONNECTION_ID()` is never frozen into a stored definition, and privilege
//! changes reach new sessions as they reach new direct connections. Each test runs
//! multiplexed and with `multiplex = false`, with the client it names, and compares
//! with the same statements run directly.

use crate::support::cli::Interactive;
use crate::support::wire::{RawConn, Reply};
use crate::support::*;

/// One backend connection, so that another session's statement always runs on the
/// connection this session's last statement ran on.
fn one_connection(server: &MariaDb, multiplex: bool) -> Sluice {
    Sluice::start(
        &Config::for_server(server)
            .pool("multiplex", multiplex)
            .pool("max_connections", 1)
            .pool("queue_timeout", "10s")
            .pool("write_hold", "0s"),
    )
}

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
