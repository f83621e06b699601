//! Prepared statements never exhaust the server: what no session needs any more is
//! closed there, what Sluice keeps open on a server stays within a budget below the
//! server's `max_prepared_stmt_count`, and past it a prepare gets the server's own error
//! 1461 from Sluice while direct clients of that server go on preparing. Each test runs
//! multiplexed and with `multiplex = false`.

use crate::support::wire::{ErrPacket, RawConn};
use crate::support::*;
use std::time::Duration;

const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_QUIT: u8 = 0x01;
const COM_PING: u8 = 0x0e;

/// How long the server's count may take to fall once clients have left: the pool's
/// check of idle connections runs every `check_interval` (set to 1 s below).
const SETTLE: Duration = Duration::from_secs(20);

const TOKEN: &str = "prepared-token";

/// Sluice in front of `server`, and its admin API's address.
fn sluice(server: &MariaDb, multiplex: bool, extra: &[(&str, i64)]) -> (Sluice, String) {
    let mut config = Config::for_server(server)
        .admin(TOKEN)
        .pool("multiplex", multiplex)
        .pool("max_connections", 8)
        .pool("check_interval", "1s")
        .pool("write_hold", "0s");
    for (key, value) in extra {
        config = config.pool(key, *value);
    }
    let admin = config.admin_address().expect("admin API on");
    (Sluice::start(&config), admin)
}

fn login(sluice: &Sluice) -> RawConn {
    let c = RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, None)
        .unwrap_or_else(|e| panic!("login failed: {e:?}\n{}", sluice.log()));
    c.stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    c
}

/// A counter of the server's `SHOW GLOBAL STATUS`.
fn global_status(server: &MariaDb, name: &str) -> u64 {
    let value = server
        .global_status(name)
        .unwrap_or_else(|e| panic!("reading {name}: {e:#}"));
    value
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} = {value:?}"))
}

/// `Prepared_stmt_count`: the statements open on the whole server.
fn server_count(server: &MariaDb) -> u64 {
    global_status(server, "Prepared_stmt_count")
}

/// COM_STMT_PREPARE: the id, or the error packet the client got.
fn try_prepare(c: &mut RawConn, sql: &str) -> Result<u32, ErrPacket> {
    c.send_command(COM_STMT_PREPARE, sql.as_bytes()).unwrap();
    let first = c.read_message().unwrap();
    if first.first() == Some(&0xFF) {
        return Err(ErrPacket::parse(&first).expect("an error packet"));
    }
    assert!(first.first() == Some(&0) && first.len() >= 12, "{first:?}");
    let id = u32::from_le_bytes([first[1], first[2], first[3], first[4]]);
    let columns = u16::from_le_bytes([first[5], first[6]]);
    let params = u16::from_le_bytes([first[7], first[8]]);
    for count in [params, columns] {
        if count > 0 {
            // The definitions, then an EOF (the raw client does not deprecate it).
            for _ in 0..=count {
                c.read_message().unwrap();
            }
        }
    }
    Ok(id)
}

fn prepare(c: &mut RawConn, sql: &str) -> u32 {
    try_prepare(c, sql).unwrap_or_else(|e| panic!("prepare {sql}: {e:?}"))
}

fn close(c: &mut RawConn, id: u32) {
    c.send_command(COM_STMT_CLOSE, &id.to_le_bytes()).unwrap();
}

fn ping(c: &mut RawConn) {
    c.command(COM_PING, b"").unwrap().expect_ok();
}

fn quit(mut c: RawConn) {
    c.send_command(COM_QUIT, b"").unwrap();
}

/// `Com_stmt_prepare`: prepares the whole server has run.
fn prepares_run(server: &MariaDb) -> u64 {
    global_status(server, "Com_stmt_prepare")
}

fn settles_at(server: &MariaDb, most: u64) -> bool {
    wait_until(SETTLE, || server_count(server) <= most)
}

fn prepare_and_close_many(multiplex: bool) {
    let server = dedicated_server(MariaDbOptions::default());
    let (sluice, _) = sluice(&server, multiplex, &[]);
    let mut c = login(&sluice);
    let mut most = 0;
    for i in 0..400 {
        // The last 100 in a transaction, which keeps a multiplexed session's connection.
        if i == 300 {
            c.query("BEGIN").unwrap().expect_ok();
        }
        let id = prepare(&mut c, &format!("SELECT {i} + ? AS n{i}"));
        assert_eq!(c.execute_rows(id, &["1"]).unwrap(), 1);
        close(&mut c, id);
        if i % 25 == 24 {
            most = most.max(server_count(&server));
        }
    }
    c.query("COMMIT").unwrap().expect_ok();
    assert!(
        most <= 4,
        "{most} statements open on the server while the client kept at most one"
    );
    quit(c);
    assert!(
        settles_at(&server, 0),
        "{} statements still open on the server after the client left",
        server_count(&server)
    );
}

#[test]
fn closed_statements_are_closed_on_the_server_multiplexed() {
    prepare_and_close_many(true);
}

#[test]
fn closed_statements_are_closed_on_the_server_dedicated() {
    prepare_and_close_many(false);
}

/// The server allows 40 statements; Sluice keeps to half of that by default. Sessions
/// holding 20 between them: the next prepare through Sluice gets 1461, a direct client
/// still prepares; once one statement is closed, a prepare through Sluice succeeds.
fn budget_is_half_the_servers_limit(multiplex: bool) {
    let server = dedicated_server(MariaDbOptions::default());
    server
        .execute("SET GLOBAL max_prepared_stmt_count = 40")
        .unwrap();
    let (sluice, admin) = sluice(&server, multiplex, &[]);
    let mut sessions: Vec<(RawConn, Vec<u32>)> = Vec::new();
    for s in 0..4 {
        let mut c = login(&sluice);
        let ids = (0..5)
            .map(|i| prepare(&mut c, &format!("SELECT ? AS s{s}_{i}")))
            .collect();
        // The session is done with its last prepare once it answers the next command.
        ping(&mut c);
        sessions.push((c, ids));
    }
    let servers = admin_json(&admin, TOKEN, "/v1/servers");
    assert_eq!(
        servers["servers"][0]["prepared_statements"],
        serde_json::json!({"open": 20, "budget": 20, "server_limit": 40})
    );
    let mut late = login(&sluice);
    let err = try_prepare(&mut late, "SELECT ? AS late").expect_err("past the budget");
    assert_eq!(
        (err.code, err.state.as_str()),
        (1461, "42000"),
        "{}",
        err.message
    );
    assert!(
        err.message
            .starts_with("Can't create more than max_prepared_stmt_count statements"),
        "{}",
        err.message
    );
    let mut direct = RawConn::login(server.addr(), NATIVE_USER, NATIVE_PASSWORD, None).unwrap();
    let id = prepare(&mut direct, "SELECT ? AS direct");
    assert_eq!(direct.execute_rows(id, &["x"]).unwrap(), 1);
    quit(direct);
    // Every statement held is still usable.
    for (c, ids) in &mut sessions {
        for id in ids.iter() {
            assert_eq!(c.execute_rows(*id, &["1"]).unwrap(), 1);
        }
    }
    let (c, ids) = &mut sessions[0];
    close(c, ids.remove(0));
    // COM_STMT_CLOSE has no answer: a ping's says the close was handled.
    ping(c);
    let id = prepare(&mut late, "SELECT ? AS late");
    assert_eq!(late.execute_rows(id, &["1"]).unwrap(), 1);
    quit(late);
    for (c, _) in sessions {
        quit(c);
    }
    assert!(
        settles_at(&server, 0),
        "{} statements still open on the server after the clients left",
        server_count(&server)
    );
}

#[test]
fn budget_is_half_the_servers_limit_multiplexed() {
    budget_is_half_the_servers_limit(true);
}

#[test]
fn budget_is_half_the_servers_limit_dedicated() {
    budget_is_half_the_servers_limit(false);
}

/// One session keeps a statement while another prepares the same text and many others
/// and closes them all, with a budget of 10: the first one's statement stays usable, and
/// what is left on the server afterwards is that one statement (multiplexed, on one
/// connection: each connection an execute lands on has its own copy).
fn statement_in_use_survives(multiplex: bool) {
    let server = dedicated_server(MariaDbOptions::default());
    let connections = if multiplex { 1 } else { 2 };
    let (sluice, _) = sluice(
        &server,
        multiplex,
        &[
            ("max_prepared_statements", 10),
            ("max_connections", connections),
        ],
    );
    let text = "SELECT ? AS kept";
    let mut keeper = login(&sluice);
    let kept = prepare(&mut keeper, text);
    assert_eq!(keeper.execute_rows(kept, &["a"]).unwrap(), 1);
    let mut other = login(&sluice);
    let same = prepare(&mut other, text);
    assert_eq!(other.execute_rows(same, &["b"]).unwrap(), 1);
    close(&mut other, same);
    for i in 0..60 {
        let id = prepare(&mut other, &format!("SELECT ? AS other{i}"));
        assert_eq!(other.execute_rows(id, &["1"]).unwrap(), 1);
        close(&mut other, id);
        assert_eq!(keeper.execute_rows(kept, &["a"]).unwrap(), 1);
    }
    quit(other);
    assert!(
        settles_at(&server, 1),
        "{} statements open on the server with one in use",
        server_count(&server)
    );
    assert_eq!(keeper.execute_rows(kept, &["a"]).unwrap(), 1);
    quit(keeper);
    assert!(
        settles_at(&server, 0),
        "{} statements still open on the server after the clients left",
        server_count(&server)
    );
}

#[test]
fn statement_in_use_survives_multiplexed() {
    statement_in_use_survives(true);
}

#[test]
fn statement_in_use_survives_dedicated() {
    statement_in_use_survives(false);
}

/// Multiplexed, a statement two sessions hold is open on both connections they ran it
/// on; with a budget of 2 spent on those two copies, a third statement still prepares:
/// one copy is closed, and both sessions' statements stay usable.
#[test]
fn copies_of_a_statement_in_use_make_room_multiplexed() {
    let server = dedicated_server(MariaDbOptions::default());
    let (sluice, _) = sluice(
        &server,
        true,
        &[("max_prepared_statements", 2), ("max_connections", 2)],
    );
    let text = "SELECT ? AS copied";
    let mut a = login(&sluice);
    let mut b = login(&sluice);
    // A's transaction keeps its connection, so B's prepare opens the other one.
    a.query("BEGIN").unwrap().expect_ok();
    let b_copy = prepare(&mut b, text);
    ping(&mut b);
    let a_copy = prepare(&mut a, text);
    a.query("COMMIT").unwrap().expect_ok();
    assert_eq!(server_count(&server), 2, "one copy on each connection");
    let other = prepare(&mut b, "SELECT ? AS other");
    assert_eq!(a.execute_rows(a_copy, &["1"]).unwrap(), 1);
    assert_eq!(b.execute_rows(b_copy, &["1"]).unwrap(), 1);
    assert_eq!(b.execute_rows(other, &["1"]).unwrap(), 1);
    assert!(server_count(&server) <= 2);
    quit(a);
    quit(b);
    assert!(
        settles_at(&server, 0),
        "{} statements still open on the server after the clients left",
        server_count(&server)
    );
}

/// Multiplexed, a session running more statements than `max_prepared_per_connection`
/// in turn keeps them all on its connection while the server's budget has room for
/// them (the connection's share of it: the budget over `max_connections`), so executes
/// don't prepare again; with a budget whose share is below that floor, the floor holds
/// and the least recently used statements are closed.
#[test]
fn a_connection_keeps_its_share_of_the_budget_multiplexed() {
    let server = dedicated_server(MariaDbOptions::default());
    let statements = 40;
    let run = |budget: i64| {
        let (sluice, _) = sluice(
            &server,
            true,
            &[
                ("max_prepared_per_connection", 16),
                ("max_prepared_statements", budget),
                ("max_connections", 8),
            ],
        );
        let mut c = login(&sluice);
        let ids: Vec<u32> = (0..statements)
            .map(|i| prepare(&mut c, &format!("SELECT {i} + ? AS n{i}")))
            .collect();
        let round = |c: &mut RawConn| {
            for id in &ids {
                assert_eq!(c.execute_rows(*id, &["1"]).unwrap(), 1);
            }
        };
        round(&mut c);
        let before = prepares_run(&server);
        round(&mut c);
        round(&mut c);
        let again = prepares_run(&server) - before;
        let open = server_count(&server);
        quit(c);
        assert!(
            settles_at(&server, 0),
            "{} statements still open on the server after the client left",
            server_count(&server)
        );
        (again, open)
    };
    // A share of 50 statements per connection.
    let (again, open) = run(400);
    assert_eq!(
        again, 0,
        "prepared again in two rounds of {statements} executes"
    );
    assert!(open >= statements, "{open} statements open");
    // A share of 8: the floor of 16 per connection holds.
    let (again, open) = run(64);
    assert!(
        again >= statements,
        "{again} prepares in two rounds of {statements} executes over 16 statements"
    );
    assert!(open <= 16, "{open} statements open, 16 kept per connection");
}
