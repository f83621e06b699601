//! KILL through Sluice acts as on the server: only a session's own user, or an account
//! with CONNECTION ADMIN, may end it; ids are Sluice's session ids in every form the
//! server accepts; and no form ever reaches the server with the client's number, where
//! it would name some other thread. Each test runs multiplexed and with
//! `multiplex = false`.

use crate::support::cli::Client;
use crate::support::proxy::User;
use crate::support::wire::{RawConn, Reply};
use crate::support::*;
use std::time::Duration;

pub(super) const READER: (&str, &str) = ("kill_reader", "reader_pw");
pub(super) const OTHER_READER: (&str, &str) = ("kill_reader2", "reader2_pw");
const ADMIN: (&str, &str) = ("kill_admin", "admin_pw");

/// Three accounts: two with only SELECT on one schema, one with CONNECTION ADMIN. Made
/// once per process, on the shared server: the KILL tests run side by side there, and one
/// recreating the schema under another fails it.
pub(super) fn accounts(server: &MariaDb) {
    static MADE: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if *made {
        return;
    }
    let mut sql = String::from("CREATE DATABASE IF NOT EXISTS killdb;\n");
    for (user, pw) in [READER, OTHER_READER, ADMIN] {
        sql.push_str(&format!(
            "CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{pw}';\n\
             GRANT SELECT ON killdb.* TO '{user}'@'%';\n"
        ));
    }
    sql.push_str(&format!(
        "GRANT CONNECTION ADMIN ON *.* TO '{}'@'%';",
        ADMIN.0
    ));
    server.execute(&sql).unwrap();
    *made = true;
}

pub(super) fn sluice_for(server: &MariaDb, multiplex: bool) -> Sluice {
    let mut config = Config::for_server(server).pool("multiplex", multiplex);
    for (user, pw) in [READER, OTHER_READER, ADMIN] {
        config = config.user(User::native(user, pw));
    }
    Sluice::start(&config)
}

/// Whether the session still answers.
pub(super) fn alive(conn: &mut RawConn) -> bool {
    matches!(conn.query("SELECT 1"), Ok(Reply::ResultSet { .. }))
}

fn err_of(reply: std::io::Result<Reply>) -> (u16, String) {
    match reply {
        Ok(Reply::Err(e)) => (e.code, e.message.clone()),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn privilege_rules(multiplex: bool) {
    let server = shared_server();
    accounts(server);
    let sluice = sluice_for(server, multiplex);
    let mut victim = RawConn::login_ok(sluice.addr(), READER.0, READER.1);
    let id = victim.greeting.connection_id;
    let mut other = RawConn::login_ok(sluice.addr(), OTHER_READER.0, OTHER_READER.1);

    for sql in [format!("KILL {id}"), format!("KILL QUERY {id}")] {
        let (code, message) = err_of(other.query(&sql));
        assert_eq!(code, 1095, "{sql}: {message}");
        assert_eq!(message, format!("You are not owner of thread {id}"));
    }
    // As on the server: sessions it may not kill are passed over without an error.
    assert!(matches!(
        other.query(&format!("KILL USER {}", READER.0)),
        Ok(Reply::Ok { .. })
    ));
    assert!(
        alive(&mut victim),
        "a user without the privilege killed another's session"
    );
    assert!(alive(&mut other));

    // The session's own user may.
    let mut second = RawConn::login_ok(sluice.addr(), READER.0, READER.1);
    let second_id = second.greeting.connection_id;
    assert!(matches!(
        victim.query(&format!("KILL {second_id}")),
        Ok(Reply::Ok { .. })
    ));
    assert!(wait_until(Duration::from_secs(10), || !alive(&mut second)));

    // CONNECTION ADMIN may, KILL USER included.
    let mut admin = RawConn::login_ok(sluice.addr(), ADMIN.0, ADMIN.1);
    assert!(matches!(
        admin.query(&format!("KILL USER {}", OTHER_READER.0)),
        Ok(Reply::Ok { .. })
    ));
    assert!(wait_until(Duration::from_secs(10), || !alive(&mut other)));
    assert!(matches!(
        admin.query(&format!("KILL CONNECTION {id}")),
        Ok(Reply::Ok { .. })
    ));
    assert!(wait_until(Duration::from_secs(10), || !alive(&mut victim)));
    assert!(alive(&mut admin));
}

#[test]
fn kill_needs_the_servers_privilege_multiplexed() {
    privilege_rules(true);
}

#[test]
fn kill_needs_the_servers_privilege_dedicated() {
    privilege_rules(false);
}

/// A connection straight to the server, and its thread id there.
fn direct_bystander(server: &MariaDb) -> (RawConn, String) {
    let mut direct = RawConn::login_ok(server.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let thread = direct.query_rows("SELECT CONNECTION_ID()")[0][0]
        .clone()
        .expect("an id");
    (direct, thread)
}

fn no_form_reaches_the_server(multiplex: bool) {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server).pool("multiplex", multiplex));
    let (mut direct, thread) = direct_bystander(server);
    let mut victim = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let id = victim.greeting.connection_id;
    let client = Client::native(sluice.port());

    // Every form naming the bystander's server thread id: the id is no session of
    // Sluice's (1094), or the form is refused (1235), and the bystander lives.
    let single = [
        format!("KILL HARD {thread}"),
        format!("KILL SOFT {thread}"),
        format!("/* tag */ KILL {thread}"),
        format!("KILL CONNECTION {thread}"),
        format!("KILL HARD QUERY {thread}"),
    ];
    for sql in &single {
        let out = client.query(sql);
        assert!(
            out.stderr.contains("ERROR 1094 (HY000)")
                && out.stderr.contains(&format!("Unknown thread id: {thread}")),
            "{sql}: {}",
            out.stderr
        );
    }
    // One packet holding two statements (the CLI sends what is between delimiters), and
    // a prepared KILL: carried out by Sluice, on no session of its own.
    let multi = client.query(&format!("delimiter //\nKILL {thread}; SELECT 1//\n"));
    let prepared = client.query(&format!("PREPARE s FROM 'KILL {thread}'; EXECUTE s"));
    let immediate = client.query(&format!("EXECUTE IMMEDIATE 'KILL {thread}'"));
    for out in [&multi, &prepared, &immediate] {
        assert!(out.stderr.contains("ERROR 1094 (HY000)"), "{}", out.stderr);
    }
    // Forms whose id Sluice can't know are refused.
    for sql in [
        format!("SET @t = {thread}; KILL @t"),
        "PREPARE s FROM 'KILL ?'".to_owned(),
        format!("delimiter //\nSELECT 1; KILL {thread}//\n"),
    ] {
        let out = client.query(&sql);
        assert!(
            out.stderr.contains("ERROR 1235 (42000)"),
            "{sql}: {}",
            out.stderr
        );
    }
    let query_id = client.query("KILL QUERY ID 987654321");
    assert!(
        query_id.stderr.contains("ERROR 1957 (HY000)"),
        "{}",
        query_id.stderr
    );

    // A prepared KILL: drivers fall back to text on 1295.
    let mut raw = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    raw.send_command(0x16, b"KILL ?").unwrap();
    let reply = raw.read_reply().unwrap();
    assert_eq!(err_of(Ok(reply)).0, 1295);
    assert!(alive(&mut raw));

    assert!(
        alive(&mut direct),
        "a KILL through Sluice reached a server thread"
    );
    assert!(alive(&mut victim));

    // The same forms with the victim's Sluice id act on the victim.
    // Named per variant: both run at once on the shared server.
    let sleeper = &format!("SELECT SLEEP(30) AS kill_forms_{multiplex}");
    victim.send_command(0x03, sleeper.as_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(10), || running_statements(
        server, sleeper
    ) == 1));
    client.query_ok(&format!("/* tag */ KILL SOFT QUERY {id}"));
    match victim.read_reply().expect("the victim gets an answer") {
        Reply::ResultSet { .. } => {}
        Reply::Err(e) => assert_eq!(e.code, 1317, "{e:?}"),
        other => panic!("unexpected reply {other:?}"),
    }
    assert!(alive(&mut victim));
    client.query_ok(&format!("KILL HARD CONNECTION {id}"));
    assert!(wait_until(Duration::from_secs(10), || !alive(&mut victim)));
    assert!(alive(&mut direct));
}

#[test]
fn no_kill_form_reaches_the_server_multiplexed() {
    no_form_reaches_the_server(true);
}

#[test]
fn no_kill_form_reaches_the_server_dedicated() {
    no_form_reaches_the_server(false);
}

/// KILL of one's own connection: 1927 and the connection closes, as on the server;
/// KILL QUERY of one's own: 1317 and the session goes on.
#[test]
fn kill_of_ones_own_session() {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server));
    let mut conn = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let id = conn.greeting.connection_id;
    assert_eq!(err_of(conn.query(&format!("KILL QUERY {id}"))).0, 1317);
    assert!(alive(&mut conn));
    assert_eq!(err_of(conn.query(&format!("KILL {id}"))).0, 1927);
    assert!(!alive(&mut conn));
}

/// The metadata lines of `mariadb --column-type-info` (values and the status line
/// differ between connections).
fn column_types(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| {
            [
                "Field",
                "Catalog",
                "Database",
                "Table",
                "Org_",
                "Type",
                "Collation",
                "Length",
                "Max_length",
                "Decimals",
                "Flags",
            ]
            .iter()
            .any(|k| l.starts_with(k))
        })
        // Max_length is the widest value sent, which depends on the id.
        .filter(|l| !l.starts_with("Max_length"))
        .map(str::to_owned)
        .collect()
}

/// Every way a session learns its id agrees with what KILL acts on: the handshake (the
/// client's own `status`), `CONNECTION_ID()` as a column, in an expression, with an
/// alias, in a prepared statement, and the column's name and type are the server's.
fn ids_agree(multiplex: bool) {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server).pool("multiplex", multiplex));
    // The real client: the handshake's id (`status`) against CONNECTION_ID().
    let out = Client::native(sluice.port())
        .query_ok("status; SELECT CONNECTION_ID() AS id, CONNECTION_ID() + 0 AS plus");
    let handshake = out
        .lines()
        .find_map(|l| l.strip_prefix("Connection id:"))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no connection id in {out}"));
    let selected: Vec<&str> = out.lines().last().unwrap().split('\t').collect();
    assert_eq!(selected, [handshake.as_str(), handshake.as_str()], "{out}");

    // Names and types, as the server gives them.
    let sql = "SELECT CONNECTION_ID(), connection_id( ) AS c, CONNECTION_ID() + 1, \
               (SELECT CONNECTION_ID())";
    let direct = Client::native(server.port())
        .args(["--column-type-info", "--table"])
        .query_ok(sql);
    let through = Client::native(sluice.port())
        .args(["--column-type-info", "--table"])
        .query_ok(sql);
    assert_eq!(column_types(&through), column_types(&direct), "{through}");
    assert!(through.contains("`CONNECTION_ID()`"), "{through}");

    // The id a session reads is the one another session kills it by.
    let mut victim = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let id = victim.greeting.connection_id.to_string();
    assert_eq!(
        victim.query_rows("SELECT CONNECTION_ID()")[0][0].as_deref(),
        Some(id.as_str())
    );
    // Prepared: the id compared on the server is the same one.
    let stmt = victim
        .prepare("SELECT 1 FROM DUAL WHERE CONNECTION_ID() = ?")
        .unwrap();
    assert_eq!(victim.execute_rows(stmt, &[&id]).unwrap(), 1);
    assert_eq!(victim.execute_rows(stmt, &["0"]).unwrap(), 0);
    let read = victim.query_rows("SELECT CONNECTION_ID()")[0][0]
        .clone()
        .unwrap();
    let mut killer = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    killer.query(&format!("KILL {read}")).unwrap().expect_ok();
    assert!(!alive(&mut victim));
    assert!(alive(&mut killer));
}

#[test]
fn every_id_a_session_learns_is_the_one_kill_acts_on_multiplexed() {
    ids_agree(true);
}

#[test]
fn every_id_a_session_learns_is_the_one_kill_acts_on_dedicated() {
    ids_agree(false);
}

/// The ids in the process list read through Sluice: a session finds its own row under
/// the id it knows, another Sluice session holding a connection under the id KILL acts
/// on, and a direct client under the server's id.
fn processlist_ids(multiplex: bool) {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server).pool("multiplex", multiplex));
    let (_direct, direct_thread) = direct_bystander(server);
    let mut reader = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let own = reader.greeting.connection_id.to_string();
    let mut holder = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let held = holder.greeting.connection_id.to_string();
    // A transaction keeps the holder on its connection, multiplexed or not.
    holder.query("BEGIN").unwrap().expect_ok();
    holder.query_rows("SELECT 1");

    let ids = |rows: Vec<Vec<Option<String>>>| -> Vec<String> {
        rows.into_iter().filter_map(|r| r[0].clone()).collect()
    };
    let rows = reader.query_rows("SHOW FULL PROCESSLIST");
    let own_row = rows.iter().find(|r| r[0].as_deref() == Some(own.as_str()));
    // Column 7 is Info: the row under the session's id is the one running this.
    assert_eq!(
        own_row.and_then(|r| r[7].as_deref()),
        Some("SHOW FULL PROCESSLIST"),
        "{rows:?}"
    );
    let shown = ids(rows);
    for id in [&own, &held, &direct_thread] {
        assert!(shown.contains(id), "{id} not in {shown:?}");
    }
    let mine = reader.query_rows(
        "SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()",
    );
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0][0].as_deref(), Some(own.as_str()));
    let listed =
        ids(reader
            .query_rows("SELECT p.ID AS id FROM information_schema.PROCESSLIST p ORDER BY p.ID"));
    assert!(
        listed.contains(&held) && listed.contains(&own),
        "{listed:?}"
    );

    // The id the list shows is the one KILL acts on.
    reader.query(&format!("KILL {held}")).unwrap().expect_ok();
    assert!(!alive(&mut holder));
    assert!(alive(&mut reader));
}

#[test]
fn processlist_shows_sluice_ids_multiplexed() {
    processlist_ids(true);
}

#[test]
fn processlist_shows_sluice_ids_dedicated() {
    processlist_ids(false);
}
