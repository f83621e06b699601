//! The query cache against a real MariaDB: what is served from it and what never is,
//! whose entries are whose, invalidation by writes through Sluice, hints, prepared
//! statements, the byte budget, and a concurrent staleness checker.
//!
//! A hit is observed the way a user would notice it: a row changed directly on the
//! server (bypassing Sluice, with no binlog reader configured) still reads as before
//! through Sluice, until something invalidates the entry.

use crate::support::proxy::Config;
use crate::support::wire::{Cursor, RawConn};
use crate::support::{
    dedicated_server, fresh_database, shared_server, wait_until, Client, MariaDb, MariaDbOptions,
    Sluice, NATIVE_PASSWORD, NATIVE_USER, OTHER_PASSWORD, OTHER_USER,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Sluice caching every SELECT for an hour, in front of `server`.
fn caching_sluice(server: &MariaDb) -> Sluice {
    Sluice::start(&Config::for_server(server).cache_rule("all-selects", "(?i)^\\s*SELECT", "1h"))
}

/// The same, invalidating by table only (`by_key = false`): a write anywhere in a table
/// drops the entry of a row changed straight on the server, which shows it did.
/// Invalidation by key is tested in cache_rows.rs.
fn caching_sluice_by_table(server: &MariaDb) -> Sluice {
    Sluice::start(
        &Config::for_server(server)
            .cache_rule("all-selects", "(?i)^\\s*SELECT", "1h")
            .cache("by_key", false),
    )
}

/// Database `db` with table `t (id, v)` holding (1, 'a'), (2, 'b').
fn table(server: &MariaDb, db: &str) {
    fresh_database(server, db);
    server
        .execute(&format!(
            "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20), ts TIMESTAMP NULL);
             INSERT INTO {db}.t VALUES (1, 'a', '2020-01-01 00:00:00'), (2, 'b', NULL);"
        ))
        .unwrap();
}

fn direct(server: &MariaDb, sql: &str) {
    server.execute(sql).unwrap();
}

fn one(conn: &mut RawConn, sql: &str) -> String {
    let rows = conn.query_rows(sql);
    rows[0][0].clone().unwrap_or_else(|| "NULL".into())
}

fn login(sluice: &Sluice, db: &str) -> RawConn {
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    c.query(&format!("USE {db}")).unwrap().expect_ok();
    c
}

#[test]
fn reads_are_served_from_the_cache_until_a_write_through_sluice() {
    let server = shared_server();
    table(server, "cache_basic");
    let sluice = caching_sluice_by_table(server);
    let mut c = login(&sluice, "cache_basic");
    let read = "SELECT v FROM t WHERE id = 1";
    assert_eq!(one(&mut c, read), "a");
    direct(server, "UPDATE cache_basic.t SET v = 'direct' WHERE id = 1");
    assert_eq!(one(&mut c, read), "a", "served from the cache");
    // Another connection of the same user and settings shares the entry.
    let mut other = login(&sluice, "cache_basic");
    assert_eq!(one(&mut other, read), "a");

    // A write through Sluice, on any session, invalidates the table's entries.
    other
        .query("UPDATE t SET v = 'through' WHERE id = 2")
        .unwrap()
        .expect_ok();
    assert_eq!(one(&mut c, read), "direct");
    // Qualified and unqualified names are the same table.
    assert_eq!(one(&mut c, read), "direct");
    direct(
        server,
        "UPDATE cache_basic.t SET v = 'direct2' WHERE id = 1",
    );
    c.query("INSERT INTO cache_basic.t VALUES (3, 'c', NULL)")
        .unwrap()
        .expect_ok();
    assert_eq!(one(&mut c, read), "direct2");

    // Other write forms: REPLACE, DELETE, multi-table UPDATE, TRUNCATE, DDL.
    for write in [
        "REPLACE INTO t VALUES (3, 'r', NULL)",
        "DELETE FROM t WHERE id = 3",
        "UPDATE t AS x JOIN t AS y ON x.id = y.id SET x.ts = NULL WHERE x.id = 2",
        "ALTER TABLE t COMMENT 'changed'",
    ] {
        assert_eq!(one(&mut c, read), one(&mut c, read));
        direct(
            server,
            &format!(
                "UPDATE cache_basic.t SET v = '{}' WHERE id = 1",
                write.len()
            ),
        );
        c.query(write).unwrap().expect_ok();
        assert_eq!(one(&mut c, read), write.len().to_string(), "after {write}");
    }
    let count = "SELECT COUNT(*) FROM t";
    assert_eq!(one(&mut c, count), "2");
    c.query("TRUNCATE TABLE t").unwrap().expect_ok();
    assert_eq!(one(&mut c, count), "0");
}

#[test]
fn writes_in_a_transaction_invalidate_at_commit() {
    let server = shared_server();
    table(server, "cache_trx");
    let sluice = caching_sluice(server);
    let mut reader = login(&sluice, "cache_trx");
    let mut writer = login(&sluice, "cache_trx");
    let read = "SELECT v FROM t WHERE id = 1";
    assert_eq!(one(&mut reader, read), "a");

    writer.query("BEGIN").unwrap().expect_ok();
    writer
        .query("UPDATE t SET v = 'new' WHERE id = 1")
        .unwrap()
        .expect_ok();
    // Inside its transaction the writer sees its own change, never a cached row.
    assert_eq!(one(&mut writer, read), "new");
    // Others still see the committed row, which the entry holds.
    assert_eq!(one(&mut reader, read), "a");
    writer.query("COMMIT").unwrap().expect_ok();
    assert_eq!(one(&mut reader, read), "new");

    // autocommit=0: the write commits with COMMIT, and reads in between are not cached.
    writer.query("SET autocommit = 0").unwrap().expect_ok();
    writer
        .query("UPDATE t SET v = 'ac0' WHERE id = 1")
        .unwrap()
        .expect_ok();
    assert_eq!(one(&mut reader, read), "new");
    writer.query("COMMIT").unwrap().expect_ok();
    assert_eq!(one(&mut reader, read), "ac0");

    // A rolled-back write leaves the data as it was; the entry may go, never go stale.
    writer.query("BEGIN").unwrap().expect_ok();
    writer
        .query("UPDATE t SET v = 'rolled back' WHERE id = 1")
        .unwrap()
        .expect_ok();
    writer.query("ROLLBACK").unwrap().expect_ok();
    assert_eq!(one(&mut reader, read), "ac0");
}

#[test]
fn uncacheable_statements_always_reach_the_server() {
    let server = shared_server();
    table(server, "cache_never");
    let sluice = caching_sluice(server);
    let mut c = login(&sluice, "cache_never");
    let statements = [
        "SELECT v, NOW() FROM t WHERE id = 1",
        "SELECT v, RAND() FROM t WHERE id = 1",
        "SELECT v, UUID() FROM t WHERE id = 1",
        "SELECT v, CONNECTION_ID() FROM t WHERE id = 1",
        "SELECT v FROM t WHERE id = 1 FOR UPDATE",
        "SELECT v FROM t WHERE id = 1 LOCK IN SHARE MODE",
        "SELECT v, @x FROM t WHERE id = 1",
        "SELECT SQL_NO_CACHE v FROM t WHERE id = 1",
        "SELECT /*nocache*/ v FROM t WHERE id = 1",
        "SELECT v, CURRENT_USER() FROM t WHERE id = 1",
        "SELECT v, (SELECT COUNT(*) FROM information_schema.PROCESSLIST) > 0 FROM t WHERE id = 1",
    ];
    for (i, sql) in statements.iter().enumerate() {
        let before = one(&mut c, sql);
        direct(
            server,
            &format!("UPDATE cache_never.t SET v = 'v{i}' WHERE id = 1"),
        );
        let after = one(&mut c, sql);
        assert_eq!(after, format!("v{i}"), "{sql} was served from the cache");
        assert_ne!(before, after);
    }
    // Inside an explicit transaction nothing is served from or stored in the cache.
    let read = "SELECT v FROM t WHERE id = 2";
    assert_eq!(one(&mut c, read), "b");
    direct(server, "UPDATE cache_never.t SET v = 'trx' WHERE id = 2");
    c.query("BEGIN").unwrap().expect_ok();
    assert_eq!(one(&mut c, read), "trx");
    c.query("COMMIT").unwrap().expect_ok();

    // A temporary table shadowing t: the session caches nothing any more.
    let mut tmp = login(&sluice, "cache_never");
    let plain = "SELECT v FROM t WHERE id = 1 AND 1 = 1";
    let shared_value = one(&mut tmp, plain);
    tmp.query("CREATE TEMPORARY TABLE t (id INT, v VARCHAR(20))")
        .unwrap()
        .expect_ok();
    tmp.query("INSERT INTO t VALUES (1, 'temporary')")
        .unwrap()
        .expect_ok();
    assert_eq!(one(&mut tmp, plain), "temporary");
    assert_eq!(one(&mut c, plain), shared_value, "others are unaffected");
}

#[test]
fn a_rule_that_matches_writes_never_caches_them() {
    let server = shared_server();
    table(server, "cache_rule_writes");
    let sluice = Sluice::start(&Config::for_server(server).cache_rule("everything", ".", "1h"));
    let mut c = login(&sluice, "cache_rule_writes");
    for i in 0..3 {
        c.query(&format!("UPDATE t SET v = 'w{i}' WHERE id = 1"))
            .unwrap()
            .expect_ok();
        c.query("INSERT INTO t (id, v) VALUES (10, 'x') ON DUPLICATE KEY UPDATE v = 'y'")
            .unwrap()
            .expect_ok();
        assert_eq!(one(&mut c, "SELECT v FROM t WHERE id = 1"), format!("w{i}"));
    }
    assert_eq!(
        server
            .execute("SELECT v FROM cache_rule_writes.t WHERE id = 10")
            .unwrap(),
        "v\ny\n"
    );
}

#[test]
fn entries_are_per_user_schema_and_session_settings() {
    let server = shared_server();
    table(server, "cache_keys_a");
    table(server, "cache_keys_b");
    direct(server, "UPDATE cache_keys_b.t SET v = 'in b' WHERE id = 1");
    let sluice = caching_sluice(server);
    let read = "SELECT v FROM t WHERE id = 1";

    let mut first = login(&sluice, "cache_keys_a");
    assert_eq!(one(&mut first, read), "a");
    // Schema: the same text in another database is another entry.
    let mut in_b = login(&sluice, "cache_keys_b");
    assert_eq!(one(&mut in_b, read), "in b");
    in_b.query("USE cache_keys_a").unwrap().expect_ok();
    assert_eq!(one(&mut in_b, read), "a");

    direct(
        server,
        "UPDATE cache_keys_a.t SET v = 'changed' WHERE id = 1",
    );
    // User: another user never gets the first user's rows.
    let mut other = RawConn::login_ok(sluice.addr(), OTHER_USER, OTHER_PASSWORD);
    other.query("USE cache_keys_a").unwrap().expect_ok();
    assert_eq!(one(&mut other, read), "changed");
    // Same user and settings: served.
    assert_eq!(one(&mut first, read), "a");

    // Settings that change results or their encoding: each value its own entry.
    for set in [
        "SET NAMES latin1",
        "SET sql_mode = 'ANSI_QUOTES'",
        "SET time_zone = '+05:00'",
        "SET character_set_results = 'utf8mb3'",
    ] {
        let mut s = login(&sluice, "cache_keys_a");
        s.query(set).unwrap().expect_ok();
        assert_eq!(one(&mut s, read), "changed", "after {set}");
    }
    // The time zone really changes a TIMESTAMP's text: both must be right.
    let ts = "SELECT CAST(ts AS CHAR) FROM t WHERE id = 1";
    let mut utc = login(&sluice, "cache_keys_a");
    utc.query("SET time_zone = '+00:00'").unwrap().expect_ok();
    let mut east = login(&sluice, "cache_keys_a");
    east.query("SET time_zone = '+05:00'").unwrap().expect_ok();
    let at_utc = one(&mut utc, ts);
    let at_east = one(&mut east, ts);
    assert_ne!(at_utc, at_east);
    assert_eq!(one(&mut utc, ts), at_utc);
    assert_eq!(one(&mut east, ts), at_east);
}

#[test]
fn hints_bypass_and_wipe_an_entry() {
    let server = shared_server();
    table(server, "cache_hints");
    let sluice = caching_sluice(server);
    let mut c = login(&sluice, "cache_hints");
    let read = "SELECT v FROM t WHERE id = 1";
    assert_eq!(one(&mut c, read), "a");
    direct(server, "UPDATE cache_hints.t SET v = 'fresh' WHERE id = 1");
    assert_eq!(one(&mut c, read), "a");
    assert_eq!(
        one(&mut c, "SELECT /*nocache*/ v FROM t WHERE id = 1"),
        "fresh"
    );
    assert_eq!(one(&mut c, read), "a", "nocache leaves the entry alone");
    assert_eq!(
        one(&mut c, "SELECT /* wipe */ v FROM t WHERE id = 1"),
        "fresh"
    );
    assert_eq!(one(&mut c, read), "fresh", "wipe refreshed the entry");
    direct(
        server,
        "UPDATE cache_hints.t SET v = 'fresher' WHERE id = 1",
    );
    assert_eq!(one(&mut c, read), "fresh", "and it is cached again");
}

/// COM_STMT_PREPARE; returns the statement id.
pub(crate) fn prepare(c: &mut RawConn, sql: &str) -> u32 {
    c.send_command(0x16, sql.as_bytes()).unwrap();
    let ok = c.read_message().unwrap();
    assert_eq!(ok[0], 0, "prepare failed: {ok:?}");
    let id = u32::from_le_bytes(ok[1..5].try_into().unwrap());
    let columns = u16::from_le_bytes(ok[5..7].try_into().unwrap());
    let params = u16::from_le_bytes(ok[7..9].try_into().unwrap());
    // Definitions, each list followed by an EOF (this client has no DEPRECATE_EOF).
    for count in [params, columns] {
        if count > 0 {
            for _ in 0..=count {
                c.read_message().unwrap();
            }
        }
    }
    id
}

/// COM_STMT_EXECUTE with one BIGINT parameter; the first column of each row (a string).
pub(crate) fn execute(c: &mut RawConn, id: u32, param: i64, send_types: bool) -> Vec<String> {
    let mut body = id.to_le_bytes().to_vec();
    body.push(0); // no cursor
    body.extend_from_slice(&1u32.to_le_bytes());
    body.push(0); // null bitmap
    body.push(u8::from(send_types));
    if send_types {
        body.extend_from_slice(&[8, 0]); // MYSQL_TYPE_LONGLONG
    }
    body.extend_from_slice(&param.to_le_bytes());
    c.send_command(0x17, &body).unwrap();
    let first = c.read_message().unwrap();
    assert_ne!(
        first[0],
        0xff,
        "execute failed: {}",
        String::from_utf8_lossy(&first)
    );
    let columns = first[0] as usize;
    for _ in 0..=columns {
        c.read_message().unwrap();
    }
    let mut values = Vec::new();
    loop {
        let row = c.read_message().unwrap();
        if row[0] == 0xfe && row.len() < 9 {
            return values;
        }
        // Binary row: header, NULL bitmap ((columns + 2 + 7) / 8 bytes), values.
        let mut r = Cursor::new(&row[1 + (columns + 9) / 8..]);
        values.push(String::from_utf8_lossy(r.lenenc_bytes().unwrap()).into_owned());
    }
}

/// A hint right after `--` leaves two minus signs, as the server reads them, not a
/// comment: `SELECT 5 --/*wipe*/ 3` is 8, and its answer is not served to
/// `SELECT 5 -- 3`, which is 5.
#[test]
fn a_hint_after_two_minus_signs_keeps_its_statement() {
    let server = shared_server();
    table(server, "cache_minus");
    let sluice = caching_sluice(server);
    let mut c = login(&sluice, "cache_minus");
    assert_eq!(one(&mut c, "SELECT 5 --/*wipe*/ 3"), "8");
    assert_eq!(one(&mut c, "SELECT 5 -- 3"), "5");
    assert_eq!(one(&mut c, "SELECT 5 --/*nocache*/ 3"), "8");
}

#[test]
fn prepared_statements_are_cached_per_parameter_values() {
    prepared_statements_cached(true, "cache_ps");
}

/// The same with a connection per session: hits are answered before the session's own
/// connection sees them, so the types an answered execute bound must still reach it.
#[test]
fn prepared_statements_are_cached_per_parameter_values_dedicated() {
    prepared_statements_cached(false, "cache_ps_dedicated");
}

fn prepared_statements_cached(multiplex: bool, db: &str) {
    let server = shared_server();
    table(server, db);
    let sluice = Sluice::start(
        &Config::for_server(server)
            .cache_rule("all-selects", "(?i)^\\s*SELECT", "1h")
            .cache("by_key", false)
            .pool("multiplex", multiplex),
    );
    let mut c = login(&sluice, db);
    let id = prepare(&mut c, "SELECT v FROM t WHERE id = ?");
    assert_eq!(execute(&mut c, id, 1, true), ["a"]);
    assert_eq!(execute(&mut c, id, 2, false), ["b"]);
    direct(server, &format!("UPDATE {db}.t SET v = CONCAT(v, '!')"));
    assert_eq!(
        execute(&mut c, id, 1, false),
        ["a"],
        "served from the cache"
    );
    assert_eq!(execute(&mut c, id, 2, true), ["b"]);
    // Another connection, another statement id, same text and values: shared.
    let mut other = login(&sluice, db);
    let other_id = prepare(&mut other, "SELECT v FROM t WHERE id = ?");
    assert_eq!(execute(&mut other, other_id, 1, true), ["a"]);
    // A value not seen before reaches the server.
    direct(server, &format!("INSERT INTO {db}.t VALUES (3, 'c', NULL)"));
    // `other` bound its types only in an execute the cache answered: the server has
    // never seen them, and this execute leaves them out.
    assert_eq!(execute(&mut other, other_id, 3, false), ["c"]);
    assert_eq!(execute(&mut c, id, 3, false), ["c"]);
    // A prepared write invalidates like a text one.
    let update = prepare(&mut other, "UPDATE t SET v = 'ps write' WHERE id = ?");
    let mut body = update.to_le_bytes().to_vec();
    body.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 8, 0]);
    body.extend_from_slice(&1i64.to_le_bytes());
    other.command(0x17, &body).unwrap().expect_ok();
    assert_eq!(execute(&mut c, id, 1, false), ["ps write"]);
    assert_eq!(execute(&mut c, id, 2, false), ["b!"]);
    // The text protocol and the binary one never share an entry.
    assert_eq!(one(&mut c, "SELECT v FROM t WHERE id = 2"), "b!");
}

/// Multiplexed sessions share connections, whose statement ids are not the ones the
/// clients were given: the cache knows statements by the client's id. Parameter types
/// bound by an execute the cache answered never reached the connection.
#[test]
fn prepared_statements_are_cached_across_multiplexed_sessions() {
    let server = shared_server();
    table(server, "cache_ps_mux");
    let config = Config::for_server(server)
        .cache_rule("all-selects", "(?i)^\\s*SELECT", "1h")
        .pool("max_connections", 1);
    let sluice = Sluice::start(&config);
    let mut a = login(&sluice, "cache_ps_mux");
    let mut b = login(&sluice, "cache_ps_mux");
    let sql = "SELECT v FROM t WHERE id = ?";
    let a_id = prepare(&mut a, sql);
    assert_eq!(execute(&mut a, a_id, 1, true), ["a"]);
    // On the one connection, b's prepare replaces the statement: the connection knows
    // it as 2, b as 1.
    let b_id = prepare(&mut b, sql);
    assert_eq!(a_id, b_id);
    direct(server, "UPDATE cache_ps_mux.t SET v = CONCAT(v, '!')");
    assert_eq!(
        execute(&mut b, b_id, 1, true),
        ["a"],
        "served from the entry a filled"
    );
    // b's types went no further than the cache: a's execute, which leaves them out,
    // must carry them to the new statement.
    assert_eq!(execute(&mut a, a_id, 2, false), ["b!"]);
    assert_eq!(execute(&mut b, b_id, 1, false), ["a"]);
}

/// A hit is answered before routing: a multiplexed session whose settings differ from
/// its pool's connection (each lease would bring one in line with a `SET`) takes no
/// lease and sends nothing to a server for a read the cache answers, text or prepared;
/// a pinned session (an open transaction) and a statement a routing rule refuses still
/// go the whole way.
#[test]
fn hits_take_no_connection_and_reach_no_server() {
    // A server of its own: its statement counters move only for this test (and
    // Sluice's monitor, which never prepares and reads a couple of times a second).
    let server = &dedicated_server(MariaDbOptions::default());
    table(server, "cache_no_lease");
    let mut refuse = toml::Table::new();
    refuse.insert("name".into(), "no-secrets".into());
    refuse.insert("match".into(), "(?i)FROM secrets".into());
    let mut err = toml::Table::new();
    err.insert("code".into(), 1142.into());
    err.insert("state".into(), "42000".into());
    err.insert(
        "message".into(),
        "secrets are not read through Sluice".into(),
    );
    refuse.insert("error".into(), err.into());
    let config = Config::for_server(server)
        .cache_rule("all-selects", "(?i)^\\s*SELECT", "1h")
        .pool("multiplex", true)
        .routing_rule(refuse)
        .admin("t0ken");
    let sluice = Sluice::start(&config);
    let admin = config.admin_address().unwrap();
    let mut c = login(&sluice, "cache_no_lease");
    c.query("SET SESSION div_precision_increment = 7")
        .unwrap()
        .expect_ok();
    let read = "SELECT v FROM t WHERE id = 1";
    let id = prepare(&mut c, "SELECT v FROM t WHERE id = ?");
    assert_eq!(one(&mut c, read), "a");
    assert_eq!(execute(&mut c, id, 2, true), ["b"]);
    let counters = |admin: &str| {
        let pool = admin_get(admin, "/v1/pool");
        (
            pool["leases"].as_u64().unwrap(),
            pool["syncs"].as_u64().unwrap(),
        )
    };
    let before = counters(&admin);
    let (questions, executes) = (com_select(server), status(server, "Com_stmt_execute"));
    for _ in 0..20 {
        assert_eq!(one(&mut c, read), "a");
        assert_eq!(execute(&mut c, id, 2, false), ["b"]);
    }
    assert_eq!(counters(&admin), before, "hits lease and sync nothing");
    assert_eq!(
        status(server, "Com_stmt_execute"),
        executes,
        "prepared hits reach no server"
    );
    // The 20 text reads would count 20; the counter's own read and the monitor's few
    // may count.
    let selects = com_select(server) - questions;
    assert!(selects < 10, "text hits reach no server: {selects} SELECTs");
    // The settings still key the entries: back to the default, a different entry.
    c.query("SET SESSION div_precision_increment = DEFAULT")
        .unwrap()
        .expect_ok();
    direct(
        server,
        "UPDATE cache_no_lease.t SET v = 'moved' WHERE id = 1",
    );
    assert_eq!(one(&mut c, read), "moved");
    // In a transaction, reads are the server's.
    c.query("BEGIN").unwrap().expect_ok();
    direct(
        server,
        "UPDATE cache_no_lease.t SET v = 'in trx' WHERE id = 1",
    );
    assert_eq!(one(&mut c, read), "in trx");
    c.query("COMMIT").unwrap().expect_ok();
    // A refusing rule stops a statement the cache could answer.
    direct(
        server,
        "CREATE TABLE cache_no_lease.secrets (id INT); INSERT INTO cache_no_lease.secrets VALUES (1)",
    );
    let answer = c.query("SELECT id FROM secrets").unwrap();
    assert_eq!(answer.expect_err().code, 1142);
}

/// The last `bytes=used/budget` the cache logged.
fn logged_usage(sluice: &Sluice) -> Option<(u64, u64)> {
    let log = sluice.log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("query cache") && l.contains("bytes="))?;
    let field = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("bytes="))?;
    let (used, budget) = field.trim_end_matches(',').split_once('/')?;
    Some((used.parse().ok()?, budget.parse().ok()?))
}

#[test]
fn the_byte_budget_holds_under_results_many_times_larger() {
    let server = shared_server();
    table(server, "cache_budget");
    let budget = 256 * 1024;
    let sluice = Sluice::start(
        &Config::for_server(server)
            .cache_rule("all", "(?i)^SELECT", "1h")
            .cache("max_bytes", budget)
            .cache("log_interval", "200ms"),
    );
    let mut c = login(&sluice, "cache_budget");
    // 600 distinct results of about 4 KiB: ten times the budget.
    for round in 0..2 {
        for i in 0..600 {
            let v = one(
                &mut c,
                &format!("SELECT REPEAT('x', 4000 + {i}) FROM t WHERE id = 1"),
            );
            assert_eq!(v.len(), 4000 + i, "round {round}");
        }
    }
    // The most recent results are still served (the cache works under pressure).
    direct(server, "DELETE FROM cache_budget.t WHERE id = 1");
    let hits = (590..600)
        .filter(|i| {
            let rows = c.query_rows(&format!(
                "SELECT REPEAT('x', 4000 + {i}) FROM t WHERE id = 1"
            ));
            !rows.is_empty()
        })
        .count();
    assert!(hits > 0, "no recent entry survived");
    assert!(
        wait_until(Duration::from_secs(5), || logged_usage(&sluice).is_some()),
        "no cache line in the log:\n{}",
        sluice.log()
    );
    let (used, logged_budget) = logged_usage(&sluice).unwrap();
    assert_eq!(logged_budget, budget as u64);
    assert!(
        used <= budget as u64 && used > budget as u64 / 2,
        "{used} bytes used"
    );
}

#[test]
fn sysbench_style_select_results_match_direct_and_are_reused() {
    let server = shared_server();
    table(server, "cache_cli");
    let sluice = caching_sluice(server);
    let sql = "SELECT id, v, ts FROM t ORDER BY id; SELECT COUNT(*), SUM(id) FROM t;";
    let direct_out = Client::native(server.port())
        .database("cache_cli")
        .query(sql);
    let first = Client::native(sluice.port())
        .database("cache_cli")
        .query(sql);
    let again = Client::native(sluice.port())
        .database("cache_cli")
        .query(sql);
    first.assert_same_as(&direct_out);
    again.assert_same_as(&direct_out);
}

/// GET an admin path as JSON.
fn admin_get(address: &str, path: &str) -> serde_json::Value {
    crate::support::admin_json(address, "t0ken", path)
}

fn admin_post(address: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    crate::support::admin_call(address, "t0ken", "POST", path, Some(&body))
}

fn rule_stats<'a>(stats: &'a serde_json::Value, rule: &str) -> &'a serde_json::Value {
    stats["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == rule)
        .unwrap_or_else(|| panic!("no rule {rule} in {stats:#}"))
}

#[test]
fn stats_and_admin_invalidation_and_warm_up() {
    let server = shared_server();
    table(server, "cache_admin");
    let warm = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        warm.path(),
        format!("@user {NATIVE_USER}\n@schema cache_admin\nSELECT v FROM t WHERE id = 2\n"),
    )
    .unwrap();
    let config = Config::for_server(server)
        .cache_rule("points", "(?i)^SELECT v FROM t WHERE id", "1h")
        .cache_rule("others", "(?i)^SELECT", "1h")
        .admin("t0ken");
    let address = config.admin_address().unwrap();
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice, "cache_admin");
    let read = "SELECT v FROM t WHERE id = 1";
    for _ in 0..5 {
        assert_eq!(one(&mut c, read), "a");
    }
    let stats = admin_get(&address, "/v1/cache/stats");
    let points = rule_stats(&stats, "points");
    assert_eq!(points["misses"], 1, "{stats:#}");
    assert_eq!(points["hits"], 4, "{stats:#}");
    assert_eq!(points["fills"], 1);
    assert_eq!(points["entries"], 1);
    assert!(stats["totals"]["bytes"].as_u64().unwrap() > 0);
    let digest = stats["digests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["text"].as_str().unwrap().contains("WHERE id = ?"))
        .unwrap_or_else(|| panic!("no digest in {stats:#}"));
    assert_eq!(digest["hits"], 4);

    // Admin invalidation: by table, then the entry is filled again.
    direct(server, "UPDATE cache_admin.t SET v = 'x' WHERE id = 1");
    let dropped = admin_post(
        &address,
        "/v1/cache/invalidate",
        serde_json::json!({"table": "cache_admin.t"}),
    );
    assert_eq!(dropped["invalidated"], 1);
    assert_eq!(one(&mut c, read), "x");
    // By rule and by digest.
    direct(server, "UPDATE cache_admin.t SET v = 'y' WHERE id = 1");
    admin_post(
        &address,
        "/v1/cache/invalidate",
        serde_json::json!({"rule": "points"}),
    );
    assert_eq!(one(&mut c, read), "y");
    direct(server, "UPDATE cache_admin.t SET v = 'z' WHERE id = 1");
    let d = digest["digest"].as_str().unwrap();
    admin_post(
        &address,
        "/v1/cache/invalidate",
        serde_json::json!({"digest": d}),
    );
    assert_eq!(one(&mut c, read), "z");

    // Warm-up on demand, with this user's wire flags: the entry is there before any
    // client asks for it.
    let report = admin_post(
        &address,
        "/v1/cache/warm",
        serde_json::json!({"file": warm.path()}),
    );
    assert_eq!(report["stored"], 1, "{report:#}");
    direct(
        server,
        "UPDATE cache_admin.t SET v = 'after warm' WHERE id = 2",
    );
    assert_eq!(one(&mut c, "SELECT v FROM t WHERE id = 2"), "b");

    // Rules changed at runtime: a rule that no longer exists drops its entries.
    let client =
        crate::support::http::Client::new(&address, Some(sluice::config::Secret("t0ken".into())));
    let response = client
        .send_json(
            "PUT",
            "/v1/cache/rules",
            &serde_json::json!([{"name": "others", "match": "(?i)^SELECT", "ttl": "1h"}]),
        )
        .unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(one(&mut c, "SELECT v FROM t WHERE id = 2"), "after warm");
    let response = client
        .send_json(
            "PUT",
            "/v1/cache/rules",
            &serde_json::json!([{"name": "bad", "match": "(", "ttl": "1h"}]),
        )
        .unwrap();
    assert_eq!(response.status, 400);
}

/// A rule caching every SELECT for 300 ms, then serving it stale for an hour while it
/// is refreshed.
fn swr_rule() -> toml::Table {
    let mut rule = toml::Table::new();
    rule.insert("name".into(), "swr".into());
    rule.insert("match".into(), "(?i)^SELECT".into());
    rule.insert("ttl".into(), "300ms".into());
    rule.insert("stale_while_revalidate".into(), "1h".into());
    rule
}

#[test]
fn stale_while_revalidate_serves_the_old_entry_once_then_the_fresh_one() {
    let server = shared_server();
    table(server, "cache_swr");
    let sluice = Sluice::start(&Config::for_server(server).cache_rule_table(swr_rule()));
    let mut c = login(&sluice, "cache_swr");
    let read = "SELECT v FROM t WHERE id = 1";
    assert_eq!(one(&mut c, read), "a");
    direct(server, "UPDATE cache_swr.t SET v = 'new' WHERE id = 1");
    assert_eq!(one(&mut c, read), "a", "within the TTL");
    std::thread::sleep(Duration::from_millis(400));
    // Past the TTL: the stale entry answers at once, and this session refreshes it.
    assert_eq!(one(&mut c, read), "a", "stale, served while revalidating");
    // The refresh runs on this session's connection after the answer: its next
    // statement waits for it.
    assert_eq!(
        one(&mut c, "SELECT 42 FROM DUAL WHERE 0 = 1 UNION SELECT 42"),
        "42"
    );
    let mut other = login(&sluice, "cache_swr");
    assert_eq!(one(&mut other, read), "new", "the refreshed entry");
    direct(server, "UPDATE cache_swr.t SET v = 'newer' WHERE id = 1");
    assert_eq!(
        one(&mut other, read),
        "new",
        "and it is a fresh entry again"
    );
}

/// The one string column of an execute's first row (a binary row: header, NULL bitmap,
/// then the value with its length).
fn one_executed(conn: &mut RawConn, id: u32, params: &[&str]) -> String {
    let rows = conn.execute_binary_rows(id, params).unwrap();
    let value = &rows[0][2..];
    String::from_utf8(value[1..1 + value[0] as usize].to_vec()).unwrap()
}

/// As above for a prepared statement, on a session with a connection of its own and on
/// a multiplexed one: the stale entry answers, the refresh waits for a connection in
/// line with the session, and the next session reads what it fetched.
#[test]
fn stale_while_revalidate_refreshes_prepared_reads_too() {
    let server = shared_server();
    table(server, "cache_swr_ps");
    for multiplex in [false, true] {
        let id = if multiplex { 1 } else { 2 };
        let config = Config::for_server(server)
            .cache_rule_table(swr_rule())
            .pool("multiplex", multiplex);
        let sluice = Sluice::start(&config);
        let mut c = login(&sluice, "cache_swr_ps");
        let read = c.prepare("SELECT v FROM t WHERE id = ?").unwrap();
        let first = one_executed(&mut c, read, &[&id.to_string()]);
        direct(
            server,
            &format!("UPDATE cache_swr_ps.t SET v = 'new{multiplex}' WHERE id = {id}"),
        );
        assert_eq!(
            one_executed(&mut c, read, &[&id.to_string()]),
            first,
            "within the TTL"
        );
        // Past the TTL: the entry's age, not a synchronisation.
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            one_executed(&mut c, read, &[&id.to_string()]),
            first,
            "stale, served while revalidating"
        );
        assert_eq!(
            one(&mut c, "SELECT 42 FROM DUAL WHERE 0 = 1 UNION SELECT 42"),
            "42"
        );
        let mut other = login(&sluice, "cache_swr_ps");
        let again = other.prepare("SELECT v FROM t WHERE id = ?").unwrap();
        assert_eq!(
            one_executed(&mut other, again, &[&id.to_string()]),
            format!("new{multiplex}"),
            "the refreshed entry (multiplexed: {multiplex})"
        );
    }
}

/// What a staleness run saw.
struct Staleness {
    reads: u64,
    /// For each read that returned an older value than one whose write had committed
    /// (its writer had its OK) before the read began: how long before.
    lags: Vec<Duration>,
}

/// The staleness checker: one writer per row of `db.c (id, n)` on `writer`, setting
/// n = 1, 2, 3... (every third in an explicit transaction), and readers through
/// `reader` reading the rows, for `run`. Each write's commit instant is kept, so every
/// read can be checked against the writes that committed before it began.
fn check_staleness(writer: SocketAddr, reader: SocketAddr, db: &str, run: Duration) -> Staleness {
    const ROWS: usize = 3;
    let history: Arc<Vec<parking_lot::Mutex<Vec<Instant>>>> = Arc::new(
        (0..=ROWS)
            .map(|_| parking_lot::Mutex::new(Vec::new()))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let lags = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let reads = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for id in 1..=ROWS {
        let (history, stop, db) = (history.clone(), stop.clone(), db.to_owned());
        threads.push(std::thread::spawn(move || {
            let mut c = RawConn::login_ok(writer, NATIVE_USER, NATIVE_PASSWORD);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let in_trx = n.is_multiple_of(3);
                if in_trx {
                    c.query("BEGIN").unwrap().expect_ok();
                }
                c.query(&format!("UPDATE {db}.c SET n = {n} WHERE id = {id}"))
                    .unwrap()
                    .expect_ok();
                if in_trx {
                    c.query("COMMIT").unwrap().expect_ok();
                }
                history[id].lock().push(Instant::now());
                std::thread::sleep(Duration::from_millis(2));
            }
        }));
    }
    for first in 0..4usize {
        let (history, stop, lags, reads, db) = (
            history.clone(),
            stop.clone(),
            lags.clone(),
            reads.clone(),
            db.to_owned(),
        );
        threads.push(std::thread::spawn(move || {
            let mut c = RawConn::login_ok(reader, NATIVE_USER, NATIVE_PASSWORD);
            let mut i = first;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let id = 1 + i % ROWS;
                let began = Instant::now();
                let rows = c.query_rows(&format!("SELECT n FROM {db}.c WHERE id = {id}"));
                let n: usize = rows[0][0].as_deref().unwrap().parse().unwrap();
                // When value n + 1 committed, if before this read began.
                if let Some(&next) = history[id].lock().get(n) {
                    if next < began {
                        lags.lock().push(began - next);
                    }
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let mut lags = lags.lock().clone();
    lags.sort();
    Staleness {
        reads: reads.load(Ordering::Relaxed),
        lags,
    }
}

fn counter_table(server: &MariaDb, db: &str) {
    direct(
        server,
        &format!(
            "CREATE DATABASE {db}; CREATE TABLE {db}.c (id INT PRIMARY KEY, n INT NOT NULL);
             INSERT INTO {db}.c VALUES (1, 0), (2, 0), (3, 0);"
        ),
    );
}

fn com_select(server: &MariaDb) -> u64 {
    status(server, "Com_select")
}

/// A global status counter of `server`.
pub(crate) fn status(server: &MariaDb, name: &str) -> u64 {
    let out = server
        .execute(&format!("SHOW GLOBAL STATUS LIKE '{name}'"))
        .unwrap();
    out.lines()
        .nth(1)
        .unwrap()
        .split('\t')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

/// Writers and readers both through Sluice: not one read may be stale.
#[test]
fn no_stale_reads_under_concurrent_writes_through_sluice() {
    let server = dedicated_server(MariaDbOptions::default());
    counter_table(&server, "stale");
    let sluice = caching_sluice(&server);
    let before = com_select(&server);
    let seen = check_staleness(
        sluice.addr(),
        sluice.addr(),
        "stale",
        Duration::from_secs(4),
    );
    let backend_selects = com_select(&server) - before;
    eprintln!(
        "{} reads, {backend_selects} reached the server, {} stale",
        seen.reads,
        seen.lags.len()
    );
    assert_eq!(seen.lags, Vec::<Duration>::new(), "stale reads");
    assert!(
        seen.reads > 500,
        "too few reads to mean anything: {}",
        seen.reads
    );
    assert!(
        backend_selects < seen.reads,
        "the cache served nothing: {backend_selects} selects for {} reads",
        seen.reads
    );
}

/// Writers directly on the server (bypassing Sluice), readers through Sluice, with the
/// binlog reader on: a read may trail a committed write only by the binlog's delay. No
/// read may trail by a second; the distribution is printed.
#[test]
fn direct_writes_reach_the_cache_through_the_binlog() {
    let server = dedicated_server(MariaDbOptions::default());
    counter_table(&server, "binstale");
    let binlog = crate::support::binlog_section();
    let config = Config::for_server(&server)
        .cache_rule("all-selects", "(?i)^\\s*SELECT", "1h")
        .cache("binlog", binlog)
        .admin("t0ken");
    let address = config.admin_address().unwrap();
    let sluice = Sluice::start(&config);
    assert!(
        wait_until(Duration::from_secs(10), || {
            admin_get(&address, "/v1/cache/stats")["binlog"] == "following"
        }),
        "the binlog reader did not start: {:#}",
        admin_get(&address, "/v1/cache/stats")
    );
    let seen = check_staleness(
        server.addr(),
        sluice.addr(),
        "binstale",
        Duration::from_secs(4),
    );
    let at = |q: f64| {
        seen.lags
            .get(((seen.lags.len() as f64 - 1.0) * q) as usize)
            .copied()
    };
    eprintln!(
        "{} reads through Sluice; {} trailed a direct write that committed before they \
         began: p50 {:?}, p99 {:?}, max {:?}",
        seen.reads,
        seen.lags.len(),
        at(0.5),
        at(0.99),
        seen.lags.last()
    );
    assert!(seen.reads > 300, "too few reads: {}", seen.reads);
    assert!(
        seen.lags.last().is_none_or(|l| *l < Duration::from_secs(1)),
        "a read trailed a committed write by {:?}",
        seen.lags.last()
    );
    let stats = admin_get(&address, "/v1/cache/stats");
    assert!(
        stats["totals"]["tables_invalidated"]["binlog"]
            .as_u64()
            .unwrap()
            > 0,
        "{stats:#}"
    );
    // The advisor counts those writes against the reads of the table, though none went
    // through Sluice.
    let digests = admin_get(&address, "/v1/digests?sort=count&limit=100");
    let read = digests["digests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "select" && d["tables"] == serde_json::json!(["binstale.c"]))
        .unwrap_or_else(|| panic!("no read of binstale.c: {digests:#}"));
    assert!(read["table_writes"].as_u64().unwrap() > 0, "{read:#}");
}

#[test]
fn reads_through_a_view_see_writes_to_its_base_table() {
    let server = shared_server();
    table(server, "cache_views");
    direct(
        server,
        "CREATE VIEW cache_views.v AS SELECT id, UPPER(v) AS up FROM cache_views.t",
    );
    let sluice = caching_sluice(server);
    let mut c = login(&sluice, "cache_views");
    let read = "SELECT up FROM v WHERE id = 1";
    assert_eq!(one(&mut c, read), "A");
    // A write to the base table names t, not v.
    c.query("UPDATE t SET v = 'b' WHERE id = 1")
        .unwrap()
        .expect_ok();
    assert_eq!(one(&mut c, read), "B");
    // Entries of plain tables are unaffected by the view's dependency on every write.
    assert_eq!(one(&mut c, "SELECT v FROM t WHERE id = 2"), "b");
    direct(server, "UPDATE cache_views.t SET v = 'direct' WHERE id = 2");
    assert_eq!(
        one(&mut c, "SELECT v FROM t WHERE id = 2"),
        "b",
        "still cached"
    );
    // A view created through Sluice after entries exist is known at the next fill.
    c.query("CREATE VIEW w AS SELECT id, v FROM t")
        .unwrap()
        .expect_ok();
    assert_eq!(one(&mut c, "SELECT v FROM w WHERE id = 1"), "b");
    c.query("UPDATE t SET v = 'c' WHERE id = 1")
        .unwrap()
        .expect_ok();
    assert_eq!(one(&mut c, "SELECT v FROM w WHERE id = 1"), "c");
}

/// Eight clients ask for the same slow result at once: the server runs it once.
#[test]
fn concurrent_misses_make_one_backend_query() {
    let server = dedicated_server(MariaDbOptions::default());
    direct(&server, "CREATE DATABASE single");
    let sluice = caching_sluice(&server);
    // About half a second of work on the server, and deterministic (the Sequence
    // engine's virtual table, in a database of our own: system schemas aren't cached).
    let slow = "SELECT SUM(seq) FROM single.seq_1_to_3000000";
    let expected = server
        .execute(slow)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned();
    let ready = Arc::new(std::sync::Barrier::new(9));
    let go = Arc::new(std::sync::Barrier::new(9));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (addr, ready, go) = (sluice.addr(), ready.clone(), go.clone());
            std::thread::spawn(move || {
                let mut c = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
                // Learns the session's settings, the views and the table's key before
                // the count starts.
                assert_eq!(one(&mut c, "SELECT 1"), "1");
                assert_eq!(
                    one(
                        &mut c,
                        "SELECT seq FROM single.seq_1_to_3000000 WHERE seq = 1"
                    ),
                    "1"
                );
                ready.wait();
                go.wait();
                (one(&mut c, slow), c)
            })
        })
        .collect();
    ready.wait();
    let before = com_select(&server);
    go.wait();
    // Connections stay open until counted: a closed one is cleaned by the pool, which
    // runs statements of its own.
    let mut open = Vec::new();
    for c in clients {
        let (value, conn) = c.join().unwrap();
        assert_eq!(value, expected);
        open.push(conn);
    }
    assert_eq!(
        com_select(&server) - before,
        1,
        "the slow statement ran more than once"
    );
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let started = Instant::now();
    assert_eq!(one(&mut c, slow), expected);
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "not served from the cache"
    );
}

#[test]
fn results_over_the_entry_limit_stream_whole_and_are_not_kept() {
    let server = shared_server();
    table(server, "cache_large");
    let sluice = Sluice::start(
        &Config::for_server(server)
            .cache_rule("all", "(?i)^SELECT", "1h")
            .cache("max_entry_bytes", "16KiB"),
    );
    let mut c = login(&sluice, "cache_large");
    let large = "SELECT CONCAT(v, REPEAT('x', 100000)) FROM t WHERE id = 1";
    assert_eq!(one(&mut c, large).len(), 100_001);
    direct(server, "UPDATE cache_large.t SET v = 'z' WHERE id = 1");
    assert!(
        one(&mut c, large).starts_with('z'),
        "a large result was cached"
    );
    let small = "SELECT v FROM t WHERE id = 1";
    assert_eq!(one(&mut c, small), "z");
    direct(server, "UPDATE cache_large.t SET v = 'y' WHERE id = 1");
    assert_eq!(one(&mut c, small), "z", "small results are still cached");
}
