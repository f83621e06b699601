//! Commands other than COM_QUERY, over a raw socket: unknown and refused command bytes,
//! COM_PING, COM_RESET_CONNECTION and COM_CHANGE_USER. Each scenario runs directly
//! against MariaDB as a control and through Sluice, with the same expectations.

use std::net::SocketAddr;

use crate::support::wire::{RawConn, Reply, COM_BINLOG_DUMP, COM_PING};
use crate::support::{
    fresh_database, shared_server, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER, OTHER_PASSWORD,
    OTHER_USER,
};

/// A command byte no MySQL or MariaDB version defines.
const COM_UNDEFINED: u8 = 0x40;

fn text(value: &str) -> Option<String> {
    Some(value.to_owned())
}

#[track_caller]
fn assert_unknown_command(reply: Reply, what: &str) {
    let err = reply.expect_err();
    assert_eq!(
        (err.code, err.state.as_str()),
        (1047, "08S01"),
        "{what}: {err:?}"
    );
}

#[test]
fn unknown_command_is_refused_and_the_session_goes_on() {
    let check = |addr: SocketAddr, what: &str| {
        let mut conn = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
        assert_unknown_command(conn.command(COM_UNDEFINED, b"").unwrap(), what);
        assert_eq!(conn.query_rows("SELECT 1"), [[text("1")]], "{what}");
        assert_unknown_command(conn.command(0xEE, b"trailing bytes").unwrap(), what);
        conn.command(COM_PING, b"").unwrap().expect_ok();
        assert_eq!(conn.query_rows("SELECT 2"), [[text("2")]], "{what}");
    };
    check(shared_server().addr(), "direct control");
    let mut sluice = Sluice::start(&Config::for_server(shared_server()));
    check(sluice.addr(), "through sluice");
    sluice.assert_running();
}

#[test]
fn binlog_dump_is_refused_by_sluice() {
    let mut sluice = Sluice::start(&Config::for_server(shared_server()));
    let mut conn = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    // binlog position 4, no flags, server id 99, no file name.
    let mut body = 4u32.to_le_bytes().to_vec();
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&99u32.to_le_bytes());
    assert_unknown_command(
        conn.command(COM_BINLOG_DUMP, &body).unwrap(),
        "COM_BINLOG_DUMP",
    );
    assert_eq!(conn.query_rows("SELECT 1"), [[text("1")]]);
    sluice.assert_running();
}

#[test]
fn reset_connection_clears_session_state() {
    fresh_database(shared_server(), "sluice_reset");
    let check = |addr: SocketAddr, what: &str| {
        let mut conn =
            match RawConn::login(addr, NATIVE_USER, NATIVE_PASSWORD, Some("sluice_reset")) {
                Ok(conn) => conn,
                Err(e) => panic!("{what}: login failed: {e:?}"),
            };
        conn.query("SET @a = 1").unwrap().expect_ok();
        conn.query("CREATE TEMPORARY TABLE reset_tmp (x INT)")
            .unwrap()
            .expect_ok();
        assert_eq!(conn.query_rows("SELECT @a"), [[text("1")]], "{what}");
        conn.reset_connection().unwrap().expect_ok();
        assert_eq!(
            conn.query_rows("SELECT @a"),
            [[None]],
            "{what}: user variable survived"
        );
        let err = conn.query("SELECT * FROM reset_tmp").unwrap();
        assert_eq!(
            err.expect_err().code,
            1146,
            "{what}: temporary table survived: {err:?}"
        );
        // What a reset keeps: the account and the current database.
        assert_eq!(
            conn.query_rows("SELECT CURRENT_USER(), DATABASE()"),
            [[text("app_native@%"), text("sluice_reset")]],
            "{what}"
        );
    };
    check(shared_server().addr(), "direct control");
    let mut sluice = Sluice::start(&Config::for_server(shared_server()));
    check(sluice.addr(), "through sluice");
    sluice.assert_running();
}

#[test]
fn change_user_switches_accounts_and_resets_state() {
    let check = |addr: SocketAddr, what: &str| {
        let mut conn = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
        conn.query("SET @a = 1").unwrap().expect_ok();
        conn.change_user(OTHER_USER, OTHER_PASSWORD, Some("mysql"))
            .unwrap()
            .unwrap_or_else(|err| panic!("{what}: change user refused: {err:?}"));
        assert_eq!(
            conn.query_rows("SELECT CURRENT_USER(), DATABASE(), @a"),
            [[text("app_other@%"), text("mysql"), None]],
            "{what}"
        );
        conn.change_user(NATIVE_USER, NATIVE_PASSWORD, None)
            .unwrap()
            .unwrap_or_else(|err| panic!("{what}: change back refused: {err:?}"));
        assert_eq!(
            conn.query_rows("SELECT CURRENT_USER(), DATABASE()"),
            [[text("app_native@%"), None]],
            "{what}"
        );

        // A wrong password is refused the way a login is.
        let mut conn = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
        let refused = conn.change_user(OTHER_USER, "wrong", None).unwrap();
        let err = refused.expect_err("a wrong password was accepted");
        assert_eq!(
            (err.code, err.state.as_str()),
            (1045, "28000"),
            "{what}: {err:?}"
        );
        assert!(
            err.message
                .starts_with("Access denied for user 'app_other'@'127.0.0.1'"),
            "{what}: {err:?}"
        );
    };
    check(shared_server().addr(), "direct control");
    let mut sluice = Sluice::start(&Config::for_server(shared_server()));
    check(sluice.addr(), "through sluice");
    sluice.assert_running();
}
