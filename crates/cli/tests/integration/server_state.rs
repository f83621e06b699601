//! What a session leaves on the server, and how it ends, as with a direct connection:
//! state a reset does not clear never reaches the next client of a pooled connection;
//! pinning does not depend on the protocol (text or prepared); idle sessions time out
//! by their `wait_timeout`; and a connection the server closes closes the client. Each
//! test runs multiplexed and with `multiplex = false`.

use crate::support::wire::{RawConn, Reply};
use crate::support::*;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

/// One backend connection, so the next client gets the one the last client used.
pub(super) fn one_connection(server: &MariaDb, multiplex: bool) -> Sluice {
    Sluice::start(
        &Config::for_server(server)
            .pool("multiplex", multiplex)
            .pool("max_connections", 1)
            .pool("queue_timeout", "5s")
            .pool("write_hold", "0s"),
    )
}

fn login(sluice: &Sluice) -> RawConn {
    RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, Some("statedb"))
        .unwrap_or_else(|e| panic!("login failed: {e:?}\n{}", sluice.log()))
}

fn ok(conn: &mut RawConn, sql: &str) {
    match conn.query(sql) {
        Ok(Reply::Ok { .. }) | Ok(Reply::ResultSet { .. }) => {}
        other => panic!("{sql}: {other:?}"),
    }
}

fn backup_stage_is_not_left_to_the_next_client(multiplex: bool) {
    let server = dedicated_server(MariaDbOptions::default());
    fresh_database(&server, "statedb");
    let sluice = one_connection(&server, multiplex);
    for first in [
        "BACKUP STAGE START",
        "BACKUP LOCK statedb.t0",
        "LOCK TABLES mysql.user READ",
    ] {
        let mut holder = login(&sluice);
        ok(&mut holder, first);
        ok(&mut holder, "SELECT 1");
        holder.send_command(0x01, b"").unwrap(); // COM_QUIT
        drop(holder);
        let mut next = login(&sluice);
        next.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        match next.query("CREATE TABLE IF NOT EXISTS t1 (a INT)") {
            Ok(Reply::Ok { .. }) => {}
            other => panic!("after {first} and quit, the next client got {other:?}"),
        }
        ok(&mut next, "DROP TABLE t1");
    }
}

#[test]
fn backup_stage_is_not_left_to_the_next_client_multiplexed() {
    backup_stage_is_not_left_to_the_next_client(true);
}

#[test]
fn backup_stage_is_not_left_to_the_next_client_dedicated() {
    backup_stage_is_not_left_to_the_next_client(false);
}

/// `LOCK TABLE t1 WRITE` then `DROP TABLE t1`, both prepared: they must run on one
/// connection (mysqltest `main.temp_table` with `--ps-protocol`), or the DROP waits
/// forever for the lock.
#[test]
fn prepared_lock_tables_pins_like_text() {
    let server = shared_server();
    fresh_database(server, "pslock");
    let sluice = Sluice::start(
        &Config::for_server(server)
            .pool("max_connections", 4)
            .pool("write_hold", "0s"),
    );
    let mut conn =
        RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, Some("pslock")).expect("login");
    ok(&mut conn, "CREATE TABLE t1 (a INT)");
    // Another session keeps a connection busy in between, so the next lease is another.
    let mut other =
        RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, Some("pslock")).expect("login");
    let lock = conn.prepare("LOCK TABLE t1 WRITE").unwrap();
    conn.execute_rows(lock, &[]).unwrap();
    ok(&mut other, "BEGIN");
    ok(&mut other, "SELECT 1");
    conn.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let drop_table = conn.prepare("DROP TABLE t1").unwrap();
    conn.execute_rows(drop_table, &[])
        .expect("DROP TABLE ran on the connection holding the lock");
    ok(&mut other, "COMMIT");
    ok(&mut conn, "UNLOCK TABLES");
}

/// Reads until the peer closes; how long that took, or None if it stayed open.
fn closed_within(conn: &mut RawConn, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    conn.stream.set_read_timeout(Some(limit)).unwrap();
    match conn.read_packet() {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
        // MariaDB closes an idle connection without a word; anything else is fine too
        // as long as the connection is gone after it.
        Err(_) => Some(started.elapsed()),
        Ok(_) => match conn.read_packet() {
            Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Some(started.elapsed())
            }
            _ => None,
        },
    }
}

fn idle_session_times_out(multiplex: bool) {
    let server = shared_server();
    // Other tests log in to it at the same time: made once, never dropped here.
    server
        .execute("CREATE DATABASE IF NOT EXISTS statedb")
        .unwrap();
    let sluice = one_connection(server, multiplex);
    let mut conn = login(&sluice);
    ok(&mut conn, "SET SESSION wait_timeout = 1");
    let closed = closed_within(&mut conn, Duration::from_secs(8));
    assert!(
        closed.is_some_and(|d| d >= Duration::from_millis(800)),
        "idle past wait_timeout = 1: {closed:?}"
    );
    // A session that keeps talking is not timed out.
    let mut busy = login(&sluice);
    ok(&mut busy, "SET SESSION wait_timeout = 2");
    for _ in 0..4 {
        assert!(closed_within(&mut busy, Duration::from_millis(700)).is_none());
        ok(&mut busy, "SELECT 1");
    }
}

/// A multiplexed session keeps its connection for `write_hold` after a write, then
/// gives it back: one timer serves the hold and the idle limit. Another client gets the
/// only connection once the hold ends, and the writer is still closed at its
/// `wait_timeout`.
#[test]
fn a_write_hold_ends_and_then_the_idle_limit_closes_the_session() {
    let server = shared_server();
    server
        .execute("CREATE DATABASE IF NOT EXISTS statedb")
        .unwrap();
    server
        .execute("CREATE TABLE IF NOT EXISTS statedb.hold_then_idle (id INT)")
        .unwrap();
    let sluice = Sluice::start(
        &Config::for_server(server)
            .pool("max_connections", 1)
            .pool("queue_timeout", "5s")
            .pool("write_hold", "400ms"),
    );
    let mut writer = login(&sluice);
    ok(&mut writer, "SET SESSION wait_timeout = 2");
    ok(&mut writer, "INSERT INTO hold_then_idle VALUES (1)");
    let wrote = Instant::now();
    let mut reader = login(&sluice);
    ok(&mut reader, "SELECT 1");
    let waited = wrote.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "the reader had the connection after {waited:?}"
    );
    let closed = closed_within(&mut writer, Duration::from_secs(8));
    assert!(
        closed.is_some() && wrote.elapsed() >= Duration::from_millis(1800),
        "idle past wait_timeout = 2: {closed:?} after {:?}",
        wrote.elapsed()
    );
}

#[test]
fn idle_session_times_out_multiplexed() {
    idle_session_times_out(true);
}

#[test]
fn idle_session_times_out_dedicated() {
    idle_session_times_out(false);
}

/// `idle_transaction_timeout`: the server closes a connection idle in a transaction;
/// the client's connection closes too, promptly, instead of a later error.
fn server_side_close_is_a_close(multiplex: bool) {
    let server = shared_server();
    // Other tests log in to it at the same time: made once, never dropped here.
    server
        .execute("CREATE DATABASE IF NOT EXISTS statedb")
        .unwrap();
    let sluice = one_connection(server, multiplex);
    let mut conn = login(&sluice);
    ok(&mut conn, "SET SESSION idle_transaction_timeout = 1");
    ok(&mut conn, "BEGIN");
    ok(&mut conn, "SELECT 1");
    let closed = closed_within(&mut conn, Duration::from_secs(8));
    assert!(
        closed.is_some(),
        "the server closed the transaction's connection"
    );
    // The pool's one connection is usable by the next client.
    let mut next = login(&sluice);
    ok(&mut next, "SELECT 1");
}

#[test]
fn server_side_close_is_a_close_multiplexed() {
    server_side_close_is_a_close(true);
}

#[test]
fn server_side_close_is_a_close_dedicated() {
    server_side_close_is_a_close(false);
}

/// The session values a new session takes from the server's globals.
const INHERITED: &str = "SELECT @@session.sql_mode, @@session.wait_timeout, \
                         @@session.time_zone, @@session.max_statement_time, \
                         @@session.tx_isolation, @@session.collation_server";

fn inherited(conn: &mut RawConn) -> Vec<Option<String>> {
    conn.query_rows(INHERITED).remove(0)
}

/// `SET GLOBAL` by another client, then a new session through Sluice: it sees the new
/// values, as a new direct connection does, although the pool's one connection predates
/// them; a session already open keeps the old ones, and its own SET still wins. Made
/// through Sluice, the change is seen by the very next login; made on the server
/// directly, within a moment.
fn new_sessions_start_from_current_globals(multiplex: bool) {
    // Its own server: the globals changed here would upset other tests.
    let server = dedicated_server(MariaDbOptions::default());
    fresh_database(&server, "statedb");
    // Dedicated sessions hold a connection each: the two open ones, and the one the new
    // sessions reuse.
    let connections = if multiplex { 1 } else { 3 };
    let sluice = Sluice::start(
        &Config::for_server(&server)
            .pool("multiplex", multiplex)
            .pool("max_connections", connections)
            .pool("queue_timeout", "5s")
            .pool("write_hold", "0s"),
    );
    let mut old = login(&sluice);
    let before = inherited(&mut old);
    let mut old_own = login(&sluice);
    ok(&mut old_own, "SET SESSION time_zone = '-03:00'");
    // The pool's one connection is idle again, and known to Sluice from before.
    drop(login(&sluice));

    // Through Sluice, as a test suite run through it does: seen by the next login at once.
    let mut setter = login(&sluice);
    ok(
        &mut setter,
        "SET GLOBAL sql_mode = 'ANSI_QUOTES', GLOBAL wait_timeout = 1234, \
         GLOBAL time_zone = '+05:00', GLOBAL max_statement_time = 5, \
         GLOBAL tx_isolation = 'SERIALIZABLE', \
         GLOBAL collation_server = 'utf8mb4_unicode_ci'",
    );
    drop(setter);
    let direct = {
        let mut d = RawConn::login(server.addr(), NATIVE_USER, NATIVE_PASSWORD, Some("statedb"))
            .expect("direct login");
        inherited(&mut d)
    };
    let want = |s: &str| Some(s.to_owned());
    let new_values = [
        "ANSI_QUOTES",
        "1234",
        "+05:00",
        "5.000000",
        "SERIALIZABLE",
        "utf8mb4_unicode_ci",
    ];
    assert_eq!(direct, new_values.map(want));

    let mut new = login(&sluice);
    assert_eq!(inherited(&mut new), direct, "a new session through Sluice");
    // Its own SET wins over the new global; what it did not set follows the new globals.
    ok(&mut new, "SET SESSION sql_mode = 'NO_ZERO_DATE'");
    let mut new_own = direct.clone();
    new_own[0] = want("NO_ZERO_DATE");
    assert_eq!(inherited(&mut new), new_own);
    // Sessions that were open keep what they started with (as on the server), even on a
    // connection that has the new globals.
    assert_eq!(inherited(&mut old), before, "a session opened before");
    let mut old_own_values = before.clone();
    old_own_values[2] = want("-03:00");
    assert_eq!(inherited(&mut old_own), old_own_values);
    assert_eq!(inherited(&mut new), new_own);
    drop(new);
    let mut again = login(&sluice);
    assert_eq!(inherited(&mut again), direct, "another new session");
    assert_eq!(inherited(&mut old), before, "the old session, again");
    // A reset re-reads the globals, on the server and through Sluice.
    old.reset_connection()
        .expect("COM_RESET_CONNECTION")
        .expect_ok();
    assert_eq!(inherited(&mut old), direct, "the old session after a reset");
    drop(old);
    drop(old_own);

    // Made on the server directly: new sessions see it within a moment (a read of the
    // globals answers for logins in the next 100 ms).
    server
        .execute("SET GLOBAL wait_timeout = 4321")
        .expect("SET GLOBAL");
    let seen = wait_until(Duration::from_secs(5), || {
        inherited(&mut login(&sluice))[1].as_deref() == Some("4321")
    });
    assert!(seen, "a direct SET GLOBAL never reached new sessions");

    server
        .execute(
            "SET GLOBAL sql_mode = DEFAULT, GLOBAL wait_timeout = DEFAULT, \
             GLOBAL time_zone = DEFAULT, GLOBAL max_statement_time = DEFAULT, \
             GLOBAL tx_isolation = DEFAULT, GLOBAL collation_server = DEFAULT",
        )
        .expect("restoring the globals");
}

#[test]
fn new_sessions_start_from_current_globals_multiplexed() {
    new_sessions_start_from_current_globals(true);
}

#[test]
fn new_sessions_start_from_current_globals_dedicated() {
    new_sessions_start_from_current_globals(false);
}

/// A multiplexed session that logs in while the pool's one connection is busy learns
/// the globals on its first statement's connection, which predates the `SET GLOBAL`:
/// its values, and the idle limit its `wait_timeout` sets.
#[test]
fn a_session_logged_in_without_a_connection_starts_from_current_globals() {
    let server = dedicated_server(MariaDbOptions::default());
    fresh_database(&server, "statedb");
    let sluice = one_connection(&server, true);
    let mut holder = login(&sluice);
    let before = inherited(&mut holder);
    ok(
        &mut holder,
        "SET GLOBAL sql_mode = 'ANSI_QUOTES', GLOBAL time_zone = '+05:00', \
         GLOBAL wait_timeout = 2",
    );
    ok(&mut holder, "BEGIN");
    ok(&mut holder, "SELECT 1");
    let mut new = login(&sluice);
    ok(&mut holder, "COMMIT");
    let values = inherited(&mut new);
    assert_eq!(values[0].as_deref(), Some("ANSI_QUOTES"));
    assert_eq!(values[1].as_deref(), Some("2"));
    assert_eq!(values[2].as_deref(), Some("+05:00"));
    // The session opened before keeps its values, its wait_timeout among them. Read
    // now: the pool's connection, renewed, has the new wait_timeout of 2 s itself.
    assert_eq!(inherited(&mut holder), before, "the session opened before");
    let closed = closed_within(&mut new, Duration::from_secs(8));
    assert!(
        closed.is_some_and(|d| d >= Duration::from_millis(1800)),
        "idle past the new global wait_timeout = 2: {closed:?}"
    );
    server
        .execute(
            "SET GLOBAL sql_mode = DEFAULT, GLOBAL time_zone = DEFAULT, \
             GLOBAL wait_timeout = DEFAULT",
        )
        .expect("restoring the globals");
}
