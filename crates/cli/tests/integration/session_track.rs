//! A client that negotiated `CLIENT_SESSION_TRACK` gets, through Sluice, the OK packets a
//! server would write for it under its own `session_track_*` settings, byte for byte:
//! Sluice's connections track everything, and only the client's part reaches it. Each
//! statement runs directly and through Sluice (multiplexed and not) and the two answers
//! are compared whole.

use crate::support::wire::{RawConn, CLIENT_SESSION_TRACK};
use crate::support::{
    fresh_database, shared_server, Config, MariaDb, Sluice, NATIVE_PASSWORD, NATIVE_USER,
};
use std::net::SocketAddr;

/// Session-tracking status flag (`SERVER_SESSION_STATE_CHANGED`).
const STATE_CHANGED: u16 = 0x4000;

#[track_caller]
fn tracking_login(addr: SocketAddr, db: &str) -> RawConn {
    let mut conn = RawConn::connect(addr).expect("connect");
    conn.extra_caps = CLIENT_SESSION_TRACK;
    conn.authenticate(NATIVE_USER, NATIVE_PASSWORD, Some(db))
        .unwrap_or_else(|e| panic!("login to {addr} failed: {e:?}"));
    conn
}

/// The status flags of an OK payload.
fn status(ok: &[u8]) -> u16 {
    let mut i = 1;
    for _ in 0..2 {
        i += match ok[i] {
            0xfc => 3,
            0xfd => 4,
            0xfe => 9,
            _ => 1,
        };
    }
    u16::from_le_bytes([ok[i], ok[i + 1]])
}

/// The statements of the comparison, and what a statement's answer is compared by.
const SCRIPT: &[&str] = &[
    "SELECT @@session_track_system_variables, @@session_track_schema, \
     @@session_track_state_change",
    "SET @a=1",
    "CREATE TEMPORARY TABLE tmp (i INT)",
    "DROP TEMPORARY TABLE tmp",
    "SET SESSION sql_mode=ANSI",
    "SET time_zone='+01:00'",
    "USE track_b",
    "USE track_a",
    "SET SESSION session_track_system_variables='sql_mode'",
    "SELECT @@session_track_system_variables",
    "SET sql_mode='TRADITIONAL'",
    "SET time_zone='+02:00'",
    "SET SESSION session_track_state_change=ON",
    "SET @b=2",
    "CREATE TEMPORARY TABLE tmp2 (i INT)",
    "DROP TEMPORARY TABLE tmp2",
    "SET sql_mode=DEFAULT",
    "SET SESSION session_track_schema=OFF",
    "USE track_b",
    "SET SESSION session_track_system_variables='*'",
    "SET autocommit=0",
    "SET autocommit=1",
    "SET SESSION session_track_system_variables=DEFAULT, session_track_schema=DEFAULT, \
     session_track_state_change=DEFAULT",
    "SELECT @@session_track_system_variables, @@session_track_schema, \
     @@session_track_state_change",
    "SET SESSION sql_mode=ANSI",
    "USE track_a",
    "SET SESSION session_track_system_variables='no_such_variable'",
    "SHOW WARNINGS",
    "SELECT @@session_track_system_variables",
    "SHOW SESSION VARIABLES LIKE 'session_track%'",
    "SET SESSION session_track_transaction_info=STATE",
    "BEGIN",
    "INSERT INTO track_a.t VALUES (1)",
    "COMMIT",
    "SET SESSION session_track_transaction_info=DEFAULT",
    "BEGIN",
    "COMMIT",
];

/// Every answer of the script, as text: an OK or ERR payload in hex, a result's rows.
fn run_script(conn: &mut RawConn) -> Vec<String> {
    SCRIPT
        .iter()
        .map(|sql| {
            if sql.starts_with("SELECT") || sql.starts_with("SHOW") {
                format!("{sql} -> {:?}", conn.query_rows(sql))
            } else {
                let p = conn.query_packet(sql).unwrap();
                format!("{sql} -> status {:#06x} {}", status(&p), hex(&p))
            }
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn databases(server: &MariaDb) {
    for db in ["track_a", "track_b"] {
        fresh_database(server, db);
    }
    server.execute("CREATE TABLE track_a.t (i INT)").unwrap();
}

#[track_caller]
fn assert_same(direct: &[String], through: &[String], what: &str) {
    for (d, t) in direct.iter().zip(through) {
        assert_eq!(d, t, "{what}: first difference");
    }
    assert_eq!(direct.len(), through.len());
}

#[test]
fn tracking_clients_get_exactly_what_the_server_sends_them() {
    let server = shared_server();
    databases(server);
    let direct = run_script(&mut tracking_login(server.addr(), "track_a"));
    // The defaults report no user variable or sql_mode change, and nothing is flagged.
    for i in [1, 4] {
        assert!(!direct[i].contains(" status 0x4") && !direct[i].contains(" status 0xc"));
    }
    for multiplex in [true, false] {
        let sluice = Sluice::start(
            &Config::for_server(server)
                .pool("multiplex", multiplex)
                .pool("max_connections", 1i64)
                .pool("write_hold", "0s"),
        );
        let through = run_script(&mut tracking_login(sluice.addr(), "track_a"));
        assert_same(&direct, &through, &format!("multiplex = {multiplex}"));
        databases(server);
    }
}

#[test]
fn sessions_sharing_a_connection_each_get_their_own_tracking() {
    let server = shared_server();
    fresh_database(server, "track_shared");
    let sluice = Sluice::start(
        &Config::for_server(server)
            .pool("multiplex", true)
            .pool("max_connections", 1i64)
            .pool("write_hold", "0s"),
    );
    let mut narrow = tracking_login(sluice.addr(), "track_shared");
    let mut plain = tracking_login(sluice.addr(), "track_shared");
    let p = narrow
        .query_packet("SET SESSION session_track_system_variables='sql_mode'")
        .unwrap();
    assert_eq!(p[0], 0, "{p:?}");
    // The other session, on the same backend connection, still has the defaults.
    let p = plain.query_packet("SET sql_mode=ANSI").unwrap();
    assert_eq!(status(&p) & STATE_CHANGED, 0, "{}", hex(&p));
    assert_eq!(
        plain.query_rows("SELECT @@session_track_system_variables")[0][0].as_deref(),
        shared_default(server).as_deref()
    );
    let p = narrow.query_packet("SET sql_mode=ANSI").unwrap();
    assert_ne!(status(&p) & STATE_CHANGED, 0, "{}", hex(&p));
    assert!(hex(&p).contains(&hex(b"sql_mode")), "{}", hex(&p));
    let p = narrow.query_packet("SET time_zone='+03:00'").unwrap();
    assert_eq!(status(&p) & STATE_CHANGED, 0, "{}", hex(&p));
}

fn shared_default(server: &MariaDb) -> Option<String> {
    let mut c = RawConn::login_ok(server.addr(), NATIVE_USER, NATIVE_PASSWORD);
    c.query_rows("SELECT @@global.session_track_system_variables")[0][0].clone()
}
