//! Multiplexing against a real MariaDB: sessions share a pool of one or two backend
//! connections and still see exactly what they would see on connections of their own.
//!
//! With a single backend connection every statement of every session runs on the same
//! server thread, so any state Sluice failed to carry, restore or pin would show at
//! once. Pins are observed from outside: while one session is pinned, another session's
//! statement waits in the queue and, past a short queue timeout, gets error 9001.

use crate::support::wire::{expect_refusal, Cursor, RawConn, Refusal, Reply};
use crate::support::{
    fresh_database, shared_server, wait_until, Client, Config, MariaDb, Sluice, NATIVE_PASSWORD,
    NATIVE_USER, OTHER_PASSWORD, OTHER_USER,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sluice's error for a statement that waited too long for a backend connection.
const POOL_TIMEOUT: u16 = 9001;

/// A multiplexing Sluice with `connections` backend connections and a short queue.
fn sluice(server: &MariaDb, connections: u32) -> Sluice {
    Sluice::start(&config(server, connections))
}

fn config(server: &MariaDb, connections: u32) -> Config {
    Config::for_server(server)
        .pool("multiplex", true)
        .pool("max_connections", i64::from(connections))
        .pool("queue_timeout", "1s")
        .pool("write_hold", "0s")
}

#[track_caller]
fn login(sluice: &Sluice, db: Option<&str>) -> RawConn {
    RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, db)
        .unwrap_or_else(|e| panic!("login failed: {e:?}\n{}", sluice.log()))
}

#[track_caller]
fn direct(server: &MariaDb, db: Option<&str>) -> RawConn {
    RawConn::login(server.addr(), NATIVE_USER, NATIVE_PASSWORD, db)
        .unwrap_or_else(|e| panic!("direct login failed: {e:?}"))
}

#[track_caller]
fn ok(conn: &mut RawConn, sql: &str) {
    match conn.query(sql) {
        Ok(Reply::Ok { .. }) => {}
        other => panic!("{sql}: {other:?}"),
    }
}

#[track_caller]
fn one(conn: &mut RawConn, sql: &str) -> String {
    let rows = conn.query_rows(sql);
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0][0].clone().unwrap_or_else(|| "NULL".into())
}

/// Whether another session can run a statement now: false when it waited out the queue
/// (the backend connection is held by a pinned session).
#[track_caller]
fn free(other: &mut RawConn) -> bool {
    match other.query("SELECT 1").unwrap() {
        Reply::ResultSet { .. } => true,
        Reply::Err(e) if e.code == POOL_TIMEOUT => false,
        reply => panic!("unexpected {reply:?}"),
    }
}

#[test]
fn interleaved_sessions_see_what_they_would_see_directly() {
    let server = shared_server();
    for db in ["mux_a", "mux_b"] {
        fresh_database(server, db);
        server
            .execute(&format!(
                "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20), ts TIMESTAMP NULL);
                 INSERT INTO {db}.t VALUES (1, '{db}', '2020-06-01 12:00:00');"
            ))
            .unwrap();
    }
    let sluice = sluice(server, 2);
    // Each session changes its state its own way, then all run the same reads.
    let setups: [&[&str]; 6] = [
        &["USE mux_a", "SET sql_mode = 'ANSI'"],
        &["USE mux_b", "SET time_zone = '+05:30'"],
        &["USE mux_a", "SET NAMES latin1", "SET time_zone = '-03:00'"],
        &[
            "USE mux_b",
            "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET sql_mode = 'NO_BACKSLASH_ESCAPES'",
        ],
        &[
            "SET character_set_results = NULL",
            "SET div_precision_increment = 9",
        ],
        &[
            "USE mux_a",
            "SET autocommit = 0",
            "SET group_concat_max_len = 5",
        ],
    ];
    let reads = [
        "SELECT DATABASE()",
        "SELECT @@sql_mode",
        "SELECT @@time_zone",
        "SELECT @@character_set_client, @@character_set_results, @@collation_connection",
        "SELECT @@tx_isolation, @@autocommit",
        "SELECT 'a' || 'b'",
        "SELECT 1/3",
        "SELECT GROUP_CONCAT('abcdefgh')",
        "SELECT 'x\\\\y'",
        "SELECT CONVERT(ts, CHAR), UNIX_TIMESTAMP(ts) FROM mux_a.t",
        "SELECT v FROM t",
    ];
    let mut through: Vec<RawConn> = (0..setups.len()).map(|_| login(&sluice, None)).collect();
    let mut straight: Vec<RawConn> = (0..setups.len()).map(|_| direct(server, None)).collect();
    let transcript = |conns: &mut Vec<RawConn>| -> Vec<String> {
        let mut out = Vec::new();
        for step in 0..3 {
            for (i, c) in conns.iter_mut().enumerate() {
                if let Some(sql) = setups[i].get(step) {
                    out.push(format!("{i} {sql} -> {:?}", c.query(sql).unwrap()));
                }
            }
        }
        // Interleaved: every session runs each read in turn, so consecutive statements
        // of one session land on connections other sessions just changed.
        for sql in reads {
            for (i, c) in conns.iter_mut().enumerate() {
                out.push(format!("{i} {sql} -> {:?}", c.query(sql).unwrap()));
            }
        }
        out
    };
    let expected = transcript(&mut straight);
    let got = transcript(&mut through);
    for (e, g) in expected.iter().zip(&got) {
        assert_eq!(g, e, "\nlog:\n{}", sluice.log());
    }
    assert_eq!(got.len(), expected.len());
}

#[test]
fn session_variables_follow_the_session_not_the_connection() {
    let server = shared_server();
    let sluice = sluice(server, 1);
    let mut a = login(&sluice, None);
    let mut b = login(&sluice, None);
    ok(&mut a, "SET sql_mode = 'ANSI_QUOTES', time_zone = '+02:00'");
    assert_eq!(one(&mut b, "SELECT @@time_zone"), "SYSTEM");
    ok(&mut b, "SET sort_buffer_size = 1048576");
    assert_eq!(one(&mut a, "SELECT @@sql_mode"), "ANSI_QUOTES");
    assert_eq!(one(&mut a, "SELECT @@time_zone"), "+02:00");
    assert_eq!(
        one(&mut a, "SELECT @@sort_buffer_size"),
        one(&mut direct(server, None), "SELECT @@sort_buffer_size")
    );
    assert_eq!(one(&mut b, "SELECT @@sort_buffer_size"), "1048576");
    // Back to the default is tracked as well.
    ok(&mut a, "SET time_zone = DEFAULT");
    assert_eq!(one(&mut b, "SELECT @@sort_buffer_size"), "1048576");
    assert_eq!(one(&mut a, "SELECT @@time_zone"), "SYSTEM");
    // A stored procedure that changes a variable is seen too: tracking, not SQL text.
    fresh_database(server, "mux_proc");
    server
        .execute("CREATE PROCEDURE mux_proc.p() SET SESSION div_precision_increment = 2")
        .unwrap();
    ok(&mut a, "CALL mux_proc.p()");
    assert_eq!(one(&mut b, "SELECT 1/3"), "0.3333");
    assert_eq!(one(&mut a, "SELECT 1/3"), "0.33");
    // COM_RESET_CONNECTION gives the session a fresh state.
    a.reset_connection().unwrap().expect_ok();
    assert_eq!(
        one(&mut a, "SELECT @@sql_mode"),
        one(&mut direct(server, None), "SELECT @@sql_mode")
    );
    assert!(free(&mut b));
}

/// Runs `pin` on session A, checks B waits while A holds its state and that the state
/// works for A, then runs `unpin` and checks B is served again.
#[track_caller]
fn pinned_until(
    sluice: &Sluice,
    a: &mut RawConn,
    b: &mut RawConn,
    pin: &[&str],
    check: (&str, &str),
    unpin: &[&str],
) {
    for sql in pin {
        let reply = a.query(sql).unwrap();
        assert!(!matches!(reply, Reply::Err(_)), "{sql}: {reply:?}");
    }
    assert!(
        !free(b),
        "B ran while A was pinned by {pin:?}\n{}",
        sluice.log()
    );
    assert_eq!(one(a, check.0), check.1, "{pin:?}");
    for sql in unpin {
        let reply = a.query(sql).unwrap();
        assert!(!matches!(reply, Reply::Err(_)), "{sql}: {reply:?}");
    }
    assert!(free(b), "B still waits after {unpin:?}\n{}", sluice.log());
}

#[test]
fn unmovable_state_pins_the_session_until_it_is_cleared() {
    let server = shared_server();
    fresh_database(server, "mux_pin");
    server
        .execute("CREATE TABLE mux_pin.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();
    let sluice = sluice(server, 1);
    let mut a = login(&sluice, Some("mux_pin"));
    let mut b = login(&sluice, Some("mux_pin"));
    assert!(free(&mut b));
    pinned_until(
        &sluice,
        &mut a,
        &mut b,
        &[
            "CREATE TEMPORARY TABLE tmp (x INT)",
            "INSERT INTO tmp VALUES (7)",
        ],
        ("SELECT x FROM tmp", "7"),
        &["DROP TEMPORARY TABLE tmp"],
    );
    pinned_until(
        &sluice,
        &mut a,
        &mut b,
        &["SELECT GET_LOCK('mux_lock', 1)"],
        ("SELECT IS_USED_LOCK('mux_lock') = CONNECTION_ID()", "1"),
        &["SELECT RELEASE_LOCK('mux_lock')"],
    );
    pinned_until(
        &sluice,
        &mut a,
        &mut b,
        &["LOCK TABLES t WRITE", "INSERT INTO t (v) VALUES (1)"],
        ("SELECT COUNT(*) FROM t", "1"),
        &["UNLOCK TABLES"],
    );
    pinned_until(
        &sluice,
        &mut a,
        &mut b,
        &["BEGIN", "INSERT INTO t (v) VALUES (2)"],
        ("SELECT COUNT(*) FROM t", "2"),
        &["ROLLBACK"],
    );
}

#[test]
fn user_variables_are_carried_with_their_types_and_never_leak() {
    let server = shared_server();
    let sluice = sluice(server, 1);
    let mut a = login(&sluice, None);
    let mut b = login(&sluice, None);
    let mut straight = direct(server, None);
    let setup = [
        "SET @i = 41 + 1, @d = 1.50, @f = 0.25e0, @n = NULL",
        "SET NAMES latin1",
        "SET @s = _utf8mb4 'Éclair' COLLATE utf8mb4_unicode_ci, @bin = X'00FF'",
        "SELECT 7, 'into' INTO @x, @y",
        "SELECT @z := 'assigned'",
        "SET NAMES utf8mb4",
    ];
    for sql in setup {
        let through = a.query(sql).unwrap();
        assert!(!matches!(through, Reply::Err(_)), "{sql}: {through:?}");
        let reply = straight.query(sql).unwrap();
        assert!(!matches!(reply, Reply::Err(_)), "{sql}: {reply:?}");
        // Another session runs on the one connection in between, every time.
        assert!(free(&mut b), "user variables must not pin A ({sql})");
    }
    let checks = [
        "SELECT @i, @i / 5, @d, @d * 3, @f, @f + 1, @n IS NULL",
        "SELECT @s, COLLATION(@s), @s = 'eclair', LENGTH(@s)",
        "SELECT HEX(@bin), COLLATION(@bin), @x + 1, @y, @z",
    ];
    for sql in checks {
        assert_eq!(
            format!("{:?}", a.query(sql).unwrap()),
            format!("{:?}", straight.query(sql).unwrap()),
            "{sql}\n{}",
            sluice.log()
        );
        // B never sees A's variables on the shared connection.
        let rows = b.query_rows("SELECT @i, @s, @x, @z");
        assert_eq!(
            rows,
            vec![vec![None, None, None, None]],
            "A's variables leaked to B"
        );
    }
    // B's own variable does not reach A either, and changing one is carried.
    ok(&mut b, "SET @i = 'b'");
    ok(&mut a, "SET @i = @i + 1");
    assert_eq!(one(&mut a, "SELECT @i"), "43");
    assert_eq!(one(&mut b, "SELECT @i"), "b");
}

#[test]
fn state_only_the_server_sees_pins_too() {
    let server = shared_server();
    fresh_database(server, "mux_hidden");
    server
        .execute("CREATE PROCEDURE mux_hidden.mk() CREATE TEMPORARY TABLE mux_hidden.made (a INT)")
        .unwrap();
    let sluice = sluice(server, 1);
    let mut a = login(&sluice, Some("mux_hidden"));
    let mut b = login(&sluice, Some("mux_hidden"));
    // Nothing in "CALL mk()" says a temporary table appears; the server's state-change
    // report does.
    ok(&mut a, "CALL mk()");
    assert!(
        !free(&mut b),
        "the procedure's temporary table must keep A's connection"
    );
    assert_eq!(one(&mut a, "SELECT COUNT(*) FROM made"), "0");
    let sessions_free = {
        drop(a);
        wait_until(Duration::from_secs(5), || free(&mut b))
    };
    assert!(sessions_free);
    // The same through a prepared statement, whose text Sluice does not read.
    let mut c = login(&sluice, Some("mux_hidden"));
    let id = prepare(&mut c, "SET @via_execute = ?");
    assert_eq!(execute_ok(&mut c, id, 7), Ok(()));
    assert!(
        !free(&mut b),
        "a user variable set by an execute keeps the connection"
    );
    assert_eq!(one(&mut c, "SELECT @via_execute"), "7");
}

#[test]
fn a_session_with_autocommit_off_holds_its_connection_only_inside_transactions() {
    let server = shared_server();
    fresh_database(server, "mux_ac");
    server
        .execute("CREATE TABLE mux_ac.t (id INT PRIMARY KEY) ENGINE=InnoDB")
        .unwrap();
    let sluice = sluice(server, 1);
    let mut a = login(&sluice, Some("mux_ac"));
    let mut b = login(&sluice, Some("mux_ac"));
    ok(&mut a, "SET autocommit = 0");
    assert!(free(&mut b), "no transaction is open yet");
    ok(&mut a, "INSERT INTO t VALUES (1)");
    assert!(!free(&mut b), "the insert opened a transaction");
    assert_eq!(one(&mut a, "SELECT COUNT(*) FROM t"), "1");
    ok(&mut a, "COMMIT");
    assert!(free(&mut b));
    assert_eq!(one(&mut b, "SELECT COUNT(*) FROM t"), "1");
    assert_eq!(one(&mut a, "SELECT @@autocommit"), "0");
    assert_eq!(one(&mut b, "SELECT @@autocommit"), "1");
    ok(&mut a, "COMMIT");
}

#[test]
fn found_rows_and_sql_prepared_statements_stay_on_their_connection() {
    let server = shared_server();
    fresh_database(server, "mux_fr");
    server
        .execute(
            "CREATE TABLE mux_fr.t (id INT PRIMARY KEY);
             INSERT INTO mux_fr.t VALUES (1), (2), (3), (4), (5);",
        )
        .unwrap();
    let sluice = sluice(server, 1);
    let mut a = login(&sluice, Some("mux_fr"));
    let mut b = login(&sluice, Some("mux_fr"));
    let rows = a.query_rows("SELECT SQL_CALC_FOUND_ROWS id FROM t LIMIT 2");
    assert_eq!(rows.len(), 2);
    assert!(
        !free(&mut b),
        "FOUND_ROWS() must follow on the same connection"
    );
    assert_eq!(one(&mut a, "SELECT FOUND_ROWS()"), "5");
    assert!(free(&mut b));

    pinned_until(
        &sluice,
        &mut a,
        &mut b,
        &["PREPARE s FROM 'SELECT COUNT(*) FROM t WHERE id > ?'"],
        ("EXECUTE s USING 3", "2"),
        &["DEALLOCATE PREPARE s"],
    );
}

#[test]
fn last_insert_id_survives_a_move_to_another_connection() {
    let server = shared_server();
    fresh_database(server, "mux_lid");
    server
        .execute(
            "CREATE TABLE mux_lid.a (id INT AUTO_INCREMENT PRIMARY KEY, v INT);
             CREATE TABLE mux_lid.b (id INT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000;",
        )
        .unwrap();
    let sluice = sluice(server, 1);
    let mut a = login(&sluice, Some("mux_lid"));
    let mut b = login(&sluice, Some("mux_lid"));
    assert_eq!(one(&mut a, "SELECT LAST_INSERT_ID()"), "0");
    ok(&mut a, "INSERT INTO a (v) VALUES (1)");
    ok(&mut a, "INSERT INTO a (v) VALUES (2)");
    ok(&mut b, "INSERT INTO b (v) VALUES (1)");
    ok(&mut b, "INSERT INTO b (v) VALUES (2)");
    assert_eq!(one(&mut a, "SELECT LAST_INSERT_ID()"), "2");
    assert_eq!(one(&mut b, "SELECT LAST_INSERT_ID()"), "1001");
    // An explicit id does not change it; LAST_INSERT_ID(expr) does.
    ok(&mut a, "INSERT INTO a VALUES (50, 3)");
    assert_eq!(one(&mut b, "SELECT 1"), "1");
    assert_eq!(one(&mut a, "SELECT LAST_INSERT_ID()"), "2");
    ok(
        &mut a,
        "UPDATE a SET v = LAST_INSERT_ID(v + 100) WHERE id = 1",
    );
    assert_eq!(one(&mut b, "SELECT LAST_INSERT_ID()"), "1001");
    assert_eq!(one(&mut a, "SELECT LAST_INSERT_ID()"), "101");
    // And it is usable inside another statement.
    ok(&mut a, "INSERT INTO b (v) VALUES (LAST_INSERT_ID())");
    assert_eq!(
        one(&mut a, "SELECT v FROM b WHERE id = LAST_INSERT_ID()"),
        "101"
    );
}

/// COM_STMT_PREPARE over the raw protocol: the statement id.
fn prepare(conn: &mut RawConn, sql: &str) -> u32 {
    conn.send_command(0x16, sql.as_bytes()).unwrap();
    let first = conn.read_message().unwrap();
    assert_eq!(first[0], 0, "prepare failed: {first:?}");
    let id = u32::from_le_bytes(first[1..5].try_into().unwrap());
    let columns = u16::from_le_bytes([first[5], first[6]]);
    let params = u16::from_le_bytes([first[7], first[8]]);
    // Definitions, each list followed by an EOF (this client does not deprecate EOF).
    for count in [params, columns] {
        if count > 0 {
            for _ in 0..=count {
                conn.read_message().unwrap();
            }
        }
    }
    id
}

/// COM_STMT_EXECUTE of a one-column statement with one BIGINT parameter (types sent
/// only when `bind`), answered as text rows.
fn execute(conn: &mut RawConn, id: u32, param: i64, bind: bool) -> Result<Vec<String>, u16> {
    let mut body = Vec::new();
    body.extend_from_slice(&id.to_le_bytes());
    body.push(0);
    body.extend_from_slice(&1u32.to_le_bytes());
    body.push(0); // NULL bitmap
    body.push(u8::from(bind));
    if bind {
        body.extend_from_slice(&[8, 0]);
    }
    body.extend_from_slice(&param.to_le_bytes());
    conn.send_command(0x17, &body).unwrap();
    let first = conn.read_message().unwrap();
    if first[0] == 0xFF {
        return Err(u16::from_le_bytes([first[1], first[2]]));
    }
    let columns = first[0] as usize;
    assert_eq!(columns, 1);
    for _ in 0..=columns {
        conn.read_message().unwrap();
    }
    let mut values = Vec::new();
    loop {
        let row = conn.read_message().unwrap();
        if row[0] == 0xFE && row.len() < 9 {
            return Ok(values);
        }
        // 0x00, NULL bitmap (1 byte for one column), the value as a length-coded string.
        let mut r = Cursor::new(&row[2..]);
        values.push(String::from_utf8_lossy(r.lenenc_bytes().unwrap()).into_owned());
    }
}

/// COM_STMT_EXECUTE of a statement that answers OK, with one BIGINT parameter.
fn execute_ok(conn: &mut RawConn, id: u32, param: i64) -> Result<(), u16> {
    let mut body = Vec::new();
    body.extend_from_slice(&id.to_le_bytes());
    body.push(0);
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&[0, 1, 8, 0]);
    body.extend_from_slice(&param.to_le_bytes());
    conn.send_command(0x17, &body).unwrap();
    let first = conn.read_message().unwrap();
    match first[0] {
        0 => Ok(()),
        _ => Err(u16::from_le_bytes([first[1], first[2]])),
    }
}

#[test]
fn prepared_statements_move_between_connections() {
    let server = shared_server();
    fresh_database(server, "mux_ps");
    server
        .execute(
            "CREATE TABLE mux_ps.t (id INT PRIMARY KEY, v VARCHAR(10));
             INSERT INTO mux_ps.t VALUES (1, 'one'), (2, 'two'), (3, 'three');",
        )
        .unwrap();
    let sluice = sluice(server, 2);
    let mut a = login(&sluice, Some("mux_ps"));
    let mut b = login(&sluice, Some("mux_ps"));
    let mut c = login(&sluice, Some("mux_ps"));
    let sa = prepare(&mut a, "SELECT v FROM t WHERE id = ?");
    let sb = prepare(&mut b, "SELECT CONCAT(v, '!') FROM t WHERE id = ?");
    assert_ne!(sa, 0);
    for round in 0..6i64 {
        let id = round % 3 + 1;
        // B and C keep the two connections busy in turns, so A lands everywhere.
        assert_eq!(one(&mut c, "SELECT 1"), "1");
        let want = ["one", "two", "three"][(id - 1) as usize];
        assert_eq!(
            execute(&mut a, sa, id, round == 0),
            Ok(vec![want.to_owned()])
        );
        assert_eq!(
            execute(&mut b, sb, id, round % 2 == 0),
            Ok(vec![format!("{want}!")])
        );
    }
    // Closed statements are gone for the client, whatever the connections keep.
    a.send_command(0x19, &sa.to_le_bytes()).unwrap();
    assert_eq!(execute(&mut a, sa, 1, true), Err(1243));
    assert_eq!(execute(&mut b, sb, 1, false), Ok(vec!["one!".to_owned()]));
}

#[test]
fn a_surge_waits_in_order_and_past_the_limit_gets_a_clear_error() {
    let server = shared_server();
    fresh_database(server, "mux_fifo");
    server
        .execute("CREATE TABLE mux_fifo.t (seq INT AUTO_INCREMENT PRIMARY KEY, client INT)")
        .unwrap();
    let config = Config::for_server(server)
        .pool("multiplex", true)
        .pool("max_connections", 1)
        .pool("queue_timeout", "5s")
        .admin(ADMIN_TOKEN);
    let sluice = Sluice::start(&config);
    let admin = config.admin_address().unwrap();
    let mut holder = login(&sluice, None);
    ok(&mut holder, "BEGIN");
    // The pin is recorded just after the OK reaches the client.
    let pinned = wait_until(Duration::from_secs(5), || {
        admin_get(&admin, "/v1/pool")["sessions_pinned"] == 1
    });
    assert!(pinned, "{}", admin_get(&admin, "/v1/pool"));
    let sessions = admin_get(&admin, "/v1/sessions");
    assert_eq!(sessions[0]["pinned"], "transaction", "{sessions}");
    assert_eq!(sessions[0]["state"], "pinned", "{sessions}");
    // Five clients queue, one after the other, behind the open transaction. The order
    // they ran in is the order of their rows' ids.
    let ran = Arc::new(Mutex::new(0));
    let mut waiting = Vec::new();
    for i in 0..5 {
        let mut c = login(&sluice, None);
        let ran = ran.clone();
        waiting.push(std::thread::spawn(move || {
            ok(
                &mut c,
                &format!("INSERT INTO mux_fifo.t (client) VALUES ({i})"),
            );
            *ran.lock().unwrap() += 1;
            c
        }));
        let queued = wait_until(Duration::from_secs(5), || {
            admin_get(&admin, "/v1/pool")["servers"][0]["queue"]["waiting"] == i + 1
        });
        assert!(queued, "client {i} never queued");
    }
    assert_eq!(*ran.lock().unwrap(), 0, "nobody ran during the transaction");
    ok(&mut holder, "COMMIT");
    let clients: Vec<RawConn> = waiting.into_iter().map(|t| t.join().unwrap()).collect();
    let order: Vec<String> = holder
        .query_rows("SELECT client FROM mux_fifo.t ORDER BY seq")
        .into_iter()
        .map(|r| r[0].clone().unwrap())
        .collect();
    assert_eq!(order, ["0", "1", "2", "3", "4"], "first come, first served");
    drop(clients);
    let pool = admin_get(&admin, "/v1/pool");
    let queue = &pool["servers"][0]["queue"];
    assert!(queue["waits"].as_u64().unwrap() >= 5, "{pool}");
    assert!(queue["wait_ms_max"].as_f64().unwrap() > 0.0, "{pool}");
    assert_eq!(pool["backend_connections"], 1, "{pool}");
    assert_eq!(pool["pins_by_reason"]["transaction"], 1, "{pool}");

    // Past the queue timeout: error 9001, and the next statement works again.
    let short = sluice_with_short_queue(server);
    let mut holder = login(&short, None);
    let mut late = login(&short, None);
    ok(&mut holder, "BEGIN");
    let started = Instant::now();
    let err = late.query("SELECT 1").unwrap().expect_err().clone();
    assert_eq!(err.code, POOL_TIMEOUT, "{err:?}");
    assert_eq!(err.state, "HY000");
    assert!(err.message.contains("no connection"), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(250));
    ok(&mut holder, "COMMIT");
    assert_eq!(one(&mut late, "SELECT 2"), "2");
}

const ADMIN_TOKEN: &str = "mux-t0ken";

/// GET an admin path as JSON.
fn admin_get(address: &str, path: &str) -> serde_json::Value {
    crate::support::admin_json(address, ADMIN_TOKEN, path)
}

fn sluice_with_short_queue(server: &MariaDb) -> Sluice {
    sluice(server, 1)
}

#[test]
fn clients_that_vanish_leave_nothing_dirty_behind() {
    let server = shared_server();
    fresh_database(server, "mux_gone");
    server
        .execute("CREATE TABLE mux_gone.t (id INT PRIMARY KEY) ENGINE=InnoDB")
        .unwrap();
    let sluice = Sluice::start(
        &Config::for_server(server)
            .pool("multiplex", true)
            .pool("max_connections", 1)
            .pool("queue_timeout", "5s"),
    );
    // Mid-transaction, with a temporary table and a lock: gone without a word.
    let mut a = login(&sluice, Some("mux_gone"));
    ok(&mut a, "CREATE TEMPORARY TABLE tmp (x INT)");
    ok(&mut a, "BEGIN");
    ok(&mut a, "INSERT INTO t VALUES (1)");
    // A client queued behind it gives up and disconnects while waiting.
    let mut queued = login(&sluice, Some("mux_gone"));
    queued.send_command(0x03, b"SELECT 1").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    drop(queued);
    drop(a);
    let mut c = login(&sluice, Some("mux_gone"));
    assert_eq!(one(&mut c, "SELECT COUNT(*) FROM t"), "0", "rolled back");
    assert_eq!(one(&mut c, "SELECT @@in_transaction"), "0");
    let tmp = c.query("SELECT * FROM tmp").unwrap();
    assert_eq!(
        tmp.expect_err().code,
        1146,
        "the temporary table went with its session"
    );
    ok(&mut c, "INSERT INTO t VALUES (2)");
    assert_eq!(one(&mut c, "SELECT COUNT(*) FROM t"), "1");
}

#[test]
fn client_connection_limits_answer_1040_and_1203() {
    let server = shared_server();
    let per_user = Sluice::start(&Config::for_server(server).limit("max_user_connections", 2));
    let _a = login(&per_user, None);
    let _b = login(&per_user, None);
    match RawConn::login(per_user.addr(), NATIVE_USER, NATIVE_PASSWORD, None) {
        Err(crate::support::wire::LoginError::Denied(e)) => {
            assert_eq!((e.code, e.state.as_str()), (1203, "42000"), "{e:?}")
        }
        Err(other) => panic!("third client of one user: {other:?}"),
        Ok(_) => panic!("a third client of one user logged in"),
    }
    // Another user is not limited by the first one's count.
    let _c = RawConn::login(per_user.addr(), OTHER_USER, OTHER_PASSWORD, None).unwrap();

    let global = Sluice::start(&Config::for_server(server).limit("max_client_connections", 2));
    let _d = login(&global, None);
    let _e = RawConn::login(global.addr(), OTHER_USER, OTHER_PASSWORD, None).unwrap();
    let mut stream = std::net::TcpStream::connect(global.addr()).unwrap();
    match expect_refusal(&mut stream, Duration::from_secs(10)) {
        Ok(Refusal::Err(e)) => assert_eq!(e.code, 1040, "{e:?}"),
        other => panic!("third client: {other:?}"),
    }
}

#[test]
fn kill_ends_a_session_that_holds_no_connection() {
    let server = shared_server();
    let sluice = sluice(server, 1);
    let mut idle = login(&sluice, None);
    let mut killer = login(&sluice, None);
    assert_eq!(one(&mut idle, "SELECT 1"), "1");
    // KILL QUERY of a session with nothing running is a no-op; KILL ends it.
    ok(
        &mut killer,
        &format!("KILL QUERY {}", idle.greeting.connection_id),
    );
    assert_eq!(one(&mut idle, "SELECT 2"), "2");
    ok(
        &mut killer,
        &format!("KILL {}", idle.greeting.connection_id),
    );
    match expect_refusal(&mut idle.stream, Duration::from_secs(10)) {
        Ok(Refusal::Closed) => {}
        other => panic!("the killed session: {other:?}"),
    }
    assert!(free(&mut killer));
}

#[test]
fn the_mariadb_client_and_sysbench_work_on_two_connections() {
    let server = shared_server();
    fresh_database(server, "mux_cli");
    let sluice = sluice(server, 2);
    let script = "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10));
        SET @x = 'kept';
        INSERT INTO t (v) VALUES (@x);
        SELECT LAST_INSERT_ID(), v FROM t;
        CREATE TEMPORARY TABLE tt AS SELECT * FROM t;
        SELECT COUNT(*) FROM tt;
        SET sql_mode = 'ANSI';
        SELECT 'a' || 'b';";
    let through = Client::native(sluice.port())
        .database("mux_cli")
        .stdin(script)
        .run();
    fresh_database(server, "mux_cli");
    let straight = Client::native(server.port())
        .database("mux_cli")
        .stdin(script)
        .run();
    through.assert_same_as(&straight);
}
