//! The KILL forms Sluice carries out beyond a lone KILL statement, compared byte for
//! byte with the same client's exchange with the server directly: KILLs opening a
//! multi-statement (drivers' pools send `KILL n; SELECT 1`), `PREPARE s FROM 'KILL n'`
//! with `EXECUTE s`, and `EXECUTE IMMEDIATE 'KILL n'`; and a session killed while its
//! statement runs, whose client sees its connection closed as a direct one does. Each
//! test runs multiplexed and with `multiplex = false`.

use super::kill::{accounts, alive, sluice_for, OTHER_READER, READER};
use crate::support::cli::Client;
use crate::support::wire::{RawConn, SERVER_MORE_RESULTS_EXISTS};
use crate::support::*;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

const CLIENT_MULTI_STATEMENTS: u32 = 0x10000;

/// A raw login with the multi-statement option, as drivers' pools log in.
fn multi_login(addr: SocketAddr, (user, password): (&str, &str)) -> RawConn {
    let mut conn = RawConn::connect(addr).expect("connect");
    conn.extra_caps = CLIENT_MULTI_STATEMENTS;
    conn.authenticate(user, password, None).expect("login");
    conn
}

/// The packets (sequence id, payload) of a COM_QUERY's whole response, every result of
/// a multi-statement included; "closed" when the connection closes after them.
fn exchange(conn: &mut RawConn, sql: &str) -> Vec<(u8, Vec<u8>)> {
    conn.send_command(0x03, sql.as_bytes()).unwrap();
    let mut packets = Vec::new();
    loop {
        let (seq, first) = conn.read_packet().expect("a response");
        packets.push((seq, first.clone()));
        let status = match first.first() {
            Some(0xFF) => return packets,
            Some(0x00) => {
                // Affected rows and insert id are one byte each in these responses.
                u16::from_le_bytes([first[3], first[4]])
            }
            _ => {
                let mut status = 0;
                let mut eofs = 0;
                while eofs < 2 {
                    let (seq, p) = conn.read_packet().expect("a result");
                    if p.first() == Some(&0xFE) && p.len() < 9 {
                        eofs += 1;
                        status = u16::from_le_bytes([p[3], p[4]]);
                    }
                    let end = p.first() == Some(&0xFF);
                    packets.push((seq, p));
                    if end {
                        return packets;
                    }
                }
                status
            }
        };
        if status & SERVER_MORE_RESULTS_EXISTS == 0 {
            return packets;
        }
    }
}

/// Whether the peer closed the connection with nothing more sent.
fn closed(conn: &mut RawConn) -> bool {
    match conn.read_packet() {
        Ok(p) => panic!("expected the connection closed, got {p:?}"),
        Err(e) => matches!(
            e.kind(),
            ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
        ),
    }
}

/// `sql` (with `{id}` for the victim's id) by the same client, straight to the server
/// and through Sluice: the same packets, and the victim killed in both.
fn same_as_direct(direct: SocketAddr, through: SocketAddr, user: (&str, &str), sql: &str) {
    let mut answers = Vec::new();
    for addr in [direct, through] {
        let mut victim = RawConn::login_ok(addr, user.0, user.1);
        let mut killer = multi_login(addr, user);
        let sql = sql.replace("{id}", &victim.greeting.connection_id.to_string());
        answers.push(exchange(&mut killer, &sql));
        assert!(alive(&mut killer), "{sql}");
        assert!(
            wait_until(Duration::from_secs(10), || !alive(&mut victim)),
            "{sql}: the victim lives at {addr}"
        );
    }
    assert_eq!(
        answers[1], answers[0],
        "{sql}: through Sluice, then directly"
    );
}

fn kill_in_a_multi_statement(multiplex: bool) {
    let server = shared_server();
    accounts(server);
    let sluice = sluice_for(server, multiplex);
    let (direct, through) = (server.addr(), sluice.addr());
    // The KILL's OK with more results to come, then the rest run by the server.
    for sql in [
        "KILL {id}; SELECT 1",
        "KILL CONNECTION {id} ;SELECT 1 AS a; SELECT 2 AS b",
        "KILL QUERY {id}; KILL {id}; DO 1",
    ] {
        same_as_direct(direct, through, READER, sql);
    }

    // An error stops the multi-statement there, as the server stops at its first.
    let mut killer = multi_login(through, READER);
    let refused = exchange(&mut killer, "KILL 3999999; SELECT 1");
    let mut direct_killer = multi_login(direct, READER);
    assert_eq!(
        refused,
        exchange(&mut direct_killer, "KILL 3999999; SELECT 1")
    );
    // Another account's session: the server's privilege rule.
    let mut other = RawConn::login_ok(through, OTHER_READER.0, OTHER_READER.1);
    let sql = format!("KILL {}; SELECT 1", other.greeting.connection_id);
    let denied = exchange(&mut killer, &sql);
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(&denied[0].1[..3], &[0xFF, 0x47, 0x04], "1095: {denied:?}");
    assert!(alive(&mut other) && alive(&mut killer));

    // Its own connection: 1927 and closed, as directly.
    let mut own = Vec::new();
    for addr in [direct, through] {
        let mut conn = multi_login(addr, READER);
        let sql = format!("KILL {}; SELECT 1", conn.greeting.connection_id);
        let answer = exchange(&mut conn, &sql);
        assert!(closed(&mut conn), "{addr}");
        own.push((answer[0].0, answer[0].1[..3].to_vec()));
    }
    assert_eq!(own[1], own[0]);
    assert_eq!(own[0].1, [0xFF, 0x87, 0x07]);

    // A real client: the mariadb CLI sends what is between delimiters in one packet.
    let mut victim = RawConn::login_ok(through, NATIVE_USER, NATIVE_PASSWORD);
    let id = victim.greeting.connection_id;
    let out = Client::native(sluice.port()).query_ok(&format!(
        "delimiter //\nKILL {id}; SELECT 'went on' AS after//\n"
    ));
    assert!(out.contains("went on"), "{out}");
    assert!(wait_until(Duration::from_secs(10), || !alive(&mut victim)));
}

#[test]
fn kill_in_a_multi_statement_multiplexed() {
    kill_in_a_multi_statement(true);
}

#[test]
fn kill_in_a_multi_statement_dedicated() {
    kill_in_a_multi_statement(false);
}

fn kill_through_dynamic_sql(multiplex: bool) {
    let server = shared_server();
    accounts(server);
    let sluice = sluice_for(server, multiplex);
    let (direct, through) = (server.addr(), sluice.addr());
    // Prepared and executed by one client, the same packets as directly at each step.
    let mut answers = Vec::new();
    for addr in [direct, through] {
        let mut victim = RawConn::login_ok(addr, READER.0, READER.1);
        let mut killer = RawConn::login_ok(addr, READER.0, READER.1);
        let id = victim.greeting.connection_id;
        let mut steps = Vec::new();
        for sql in [
            format!("PREPARE Kill_S FROM 'KILL {id}'"),
            "EXECUTE kill_s USING 1".to_owned(),
            "EXECUTE kill_s".to_owned(),
        ] {
            steps.push(exchange(&mut killer, &sql));
        }
        assert!(
            wait_until(Duration::from_secs(10), || !alive(&mut victim)),
            "the victim lives at {addr}"
        );
        // Then the name is forgotten, by the server as by Sluice.
        for sql in ["DEALLOCATE PREPARE kill_s", "EXECUTE kill_s"] {
            steps.push(exchange(&mut killer, sql));
        }
        let mut victim = RawConn::login_ok(addr, READER.0, READER.1);
        let sql = format!("EXECUTE IMMEDIATE 'KILL {}'", victim.greeting.connection_id);
        steps.push(exchange(&mut killer, &sql));
        assert!(wait_until(Duration::from_secs(10), || !alive(&mut victim)));
        assert!(alive(&mut killer));
        answers.push(steps);
    }
    assert_eq!(answers[1], answers[0], "through Sluice, then directly");

    // The server's privilege rule, and a prepared KILL of one's own connection.
    let mut other = RawConn::login_ok(through, OTHER_READER.0, OTHER_READER.1);
    let mut killer = RawConn::login_ok(through, READER.0, READER.1);
    let id = other.greeting.connection_id;
    killer
        .query(&format!("PREPARE k FROM 'KILL {id}'"))
        .unwrap()
        .expect_ok();
    assert_eq!(killer.query("EXECUTE k").unwrap().expect_err().code, 1095);
    assert!(alive(&mut other));
    let own = killer.greeting.connection_id;
    killer
        .query(&format!("PREPARE k FROM 'KILL {own}'"))
        .unwrap()
        .expect_ok();
    assert_eq!(killer.query("EXECUTE k").unwrap().expect_err().code, 1927);
    assert!(closed(&mut killer));

    // A real client.
    let mut victim = RawConn::login_ok(through, NATIVE_USER, NATIVE_PASSWORD);
    let id = victim.greeting.connection_id;
    Client::native(sluice.port()).query_ok(&format!("PREPARE s FROM 'KILL {id}'; EXECUTE s"));
    assert!(wait_until(Duration::from_secs(10), || !alive(&mut victim)));
}

#[test]
fn kill_through_dynamic_sql_multiplexed() {
    kill_through_dynamic_sql(true);
}

#[test]
fn kill_through_dynamic_sql_dedicated() {
    kill_through_dynamic_sql(false);
}

/// `KILL` of a session whose statement runs: the server closes the connection without
/// a word (MariaDB sends no error packet to a client killed mid-statement), and the
/// `mariadb` client reports 2013; `KILL QUERY` ends the statement with 1317 and the
/// session goes on.
fn killed_while_running(multiplex: bool) {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server).pool("multiplex", multiplex));
    for (addr, place) in [(server.addr(), "direct"), (sluice.addr(), "sluice")] {
        let mut victim = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
        let mut killer = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
        let sleeper = format!("SELECT SLEEP(30) AS killed_{place}_{multiplex}");
        victim.send_command(0x03, sleeper.as_bytes()).unwrap();
        assert!(wait_until(Duration::from_secs(10), || running_statements(
            server, &sleeper
        ) == 1));
        let id = victim.greeting.connection_id;
        killer.query(&format!("KILL {id}")).unwrap().expect_ok();
        assert!(closed(&mut victim), "{place}");

        let mut victim = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
        let sleeper = format!("SELECT SLEEP(30) AS stopped_{place}_{multiplex}");
        victim.send_command(0x03, sleeper.as_bytes()).unwrap();
        assert!(wait_until(Duration::from_secs(10), || running_statements(
            server, &sleeper
        ) == 1));
        let id = victim.greeting.connection_id;
        killer
            .query(&format!("KILL QUERY {id}"))
            .unwrap()
            .expect_ok();
        let stopped = victim.read_reply().expect("an answer");
        assert_eq!(stopped.expect_err().code, 1317, "{place}");
        assert!(alive(&mut victim), "{place}");
    }

    // The real client, killed mid-statement through Sluice.
    let sleeper = format!("SELECT SLEEP(30) AS cli_killed_{multiplex}");
    let client = Client::native(sluice.port());
    let run = std::thread::spawn({
        let sleeper = sleeper.clone();
        move || client.query(&sleeper)
    });
    assert!(wait_until(Duration::from_secs(10), || running_statements(
        server, &sleeper
    ) == 1));
    let mut killer = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let rows = killer.query_rows(&format!(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = '{sleeper}'"
    ));
    let id = rows[0][0].clone().expect("an id");
    killer.query(&format!("KILL {id}")).unwrap().expect_ok();
    let out = run.join().unwrap();
    assert!(out.stderr.contains("ERROR 2013 (HY000)"), "{}", out.stderr);
}

#[test]
fn killed_while_running_multiplexed() {
    killed_while_running(true);
}

#[test]
fn killed_while_running_dedicated() {
    killed_while_running(false);
}
