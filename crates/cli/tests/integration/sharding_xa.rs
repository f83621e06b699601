//! Transactions over two shards (`cross_shard = "xa"`, the default) on real servers:
//! they commit on both or neither, other sessions see nothing of them before COMMIT,
//! and what a crash of Sluice leaves prepared is finished by the next one: rolled back
//! when the decision was not recorded, committed when it was.

use crate::routing::ok;
use crate::sharding::{ids, refused, shop, start_with};
use crate::support::wire::{RawConn, Reply};
use crate::support::{sandbox, wait_until, NATIVE_PASSWORD, NATIVE_USER};
use sluice_sandbox::MariaDb;
use std::time::Duration;

const INSTANCE: &str = "xa-test";

pub(crate) fn value(server: &MariaDb, id: u32) -> String {
    server
        .query_value(&format!("SELECT v FROM shop.orders WHERE id = {id}"))
        .unwrap()
}

/// This instance's branches prepared on `server` (their `XA RECOVER` data).
pub(crate) fn prepared(server: &MariaDb) -> Vec<String> {
    let out = server.execute("XA RECOVER").unwrap();
    out.lines()
        .skip(1)
        .filter_map(|l| l.split('\t').nth(3).map(str::to_owned))
        .collect()
}

fn decisions(server: &MariaDb) -> u64 {
    server
        .query_value("SELECT COUNT(*) FROM sluice.xa_decision")
        .unwrap()
        .parse()
        .unwrap()
}

/// Rows 1..=10 over both shards; one id on each.
pub(crate) fn fill(c: &mut RawConn, a: &MariaDb, b: &MariaDb) -> (Vec<u32>, Vec<u32>) {
    for id in 1..=10 {
        ok(c, &format!("INSERT INTO orders (id, v) VALUES ({id}, 'v')"));
    }
    let (on_a, on_b) = (ids(a, "orders"), ids(b, "orders"));
    assert!(on_a.len() >= 2 && on_b.len() >= 2, "{on_a:?} {on_b:?}");
    (on_a.into_iter().collect(), on_b.into_iter().collect())
}

pub(crate) fn decision_table_made(a: &MariaDb, b: &MariaDb) -> bool {
    wait_until(Duration::from_secs(30), || {
        [a, b].iter().all(|s| {
            s.query_value(
                "SELECT COUNT(*) FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = 'sluice' AND TABLE_NAME = 'xa_decision'",
            )
            .is_ok_and(|n| n == "1")
        })
    })
}

#[test]
fn a_transaction_over_two_shards_commits_on_both_or_neither() {
    let (a, b, sluice, _) = start_with(&[("instance", INSTANCE)]);
    assert!(decision_table_made(&a, &b), "{}", sluice.log());
    let mut c = shop(&sluice);
    let (on_a, on_b) = fill(&mut c, &a, &b);
    let (x, y) = (on_a[0], on_b[0]);

    // Writes on both, committed: both see them at once, and nothing stays prepared.
    ok(&mut c, "BEGIN");
    ok(&mut c, &format!("UPDATE orders SET v = 'c' WHERE id = {x}"));
    ok(&mut c, &format!("UPDATE orders SET v = 'c' WHERE id = {y}"));
    // Not before COMMIT, on either.
    assert_eq!((value(&a, x), value(&b, y)), ("v".into(), "v".into()));
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'c2' WHERE id = {x}"),
    );
    ok(&mut c, "COMMIT");
    assert_eq!((value(&a, x), value(&b, y)), ("c2".into(), "c".into()));
    assert!(prepared(&a).is_empty() && prepared(&b).is_empty());
    // The decision was recorded on the shard the transaction began on.
    assert_eq!((decisions(&a), decisions(&b)), (1, 0));

    // Rolled back: neither; beginning on the other shard, and prepared statements.
    let update = c.prepare("UPDATE orders SET v = ? WHERE id = ?").unwrap();
    ok(&mut c, "START TRANSACTION");
    c.execute_rows(update, &["r", &y.to_string()]).unwrap();
    c.execute_rows(update, &["r", &x.to_string()]).unwrap();
    ok(&mut c, "ROLLBACK");
    assert_eq!((value(&a, x), value(&b, y)), ("c2".into(), "c".into()));

    // Reads only: each shard commits alone, no decision is recorded.
    ok(&mut c, "BEGIN");
    assert_eq!(
        crate::routing::one(&mut c, &format!("SELECT v FROM orders WHERE id = {x}")),
        "c2"
    );
    assert_eq!(
        crate::routing::one(&mut c, &format!("SELECT v FROM orders WHERE id = {y}")),
        "c"
    );
    ok(&mut c, "COMMIT");
    assert_eq!((decisions(&a), decisions(&b)), (1, 0));

    // What would end or split one shard's part alone is refused, and the transaction
    // goes on; under autocommit = 0 too.
    ok(&mut c, "SET autocommit = 0");
    ok(&mut c, &format!("UPDATE orders SET v = 'z' WHERE id = {y}"));
    ok(&mut c, &format!("UPDATE orders SET v = 'z' WHERE id = {x}"));
    for sql in ["SAVEPOINT s", "CREATE TABLE t2 (a INT)", "COMMIT AND CHAIN"] {
        let (code, message) = refused(&mut c, sql);
        assert_eq!(code, 1235, "{sql}: {message}");
        assert!(message.contains("ends or splits"), "{message}");
    }
    ok(&mut c, "COMMIT");
    ok(&mut c, "SET autocommit = 1");
    assert_eq!((value(&a, x), value(&b, y)), ("z".into(), "z".into()));
    assert_eq!((decisions(&a), decisions(&b)), (1, 1));

    // A failed statement inside does not end the transaction, as on a server.
    ok(&mut c, "BEGIN");
    ok(&mut c, &format!("UPDATE orders SET v = 'f' WHERE id = {x}"));
    let (code, _) = refused(
        &mut c,
        &format!("INSERT INTO orders (id, v) VALUES ({y}, 'dup')"),
    );
    assert_eq!(code, 1062);
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'f' WHERE id = {}", on_b[1]),
    );
    ok(&mut c, "COMMIT");
    assert_eq!((value(&a, x), value(&b, on_b[1])), ("f".into(), "f".into()));
    assert!(prepared(&a).is_empty() && prepared(&b).is_empty());
}

/// Rows 1..=n as one multi-row insert; its OK's affected rows.
fn insert_many(c: &mut RawConn, from: u32, to: u32) -> Result<u64, (u16, String)> {
    let rows: Vec<String> = (from..=to).map(|id| format!("('m{id}', {id})")).collect();
    let sql = format!("INSERT INTO orders (v, id) VALUES {}", rows.join(", "));
    match c.query(&sql).unwrap() {
        Reply::Ok { affected_rows, .. } => Ok(affected_rows),
        Reply::Err(e) => Err((e.code, e.message)),
        other => panic!("{other:?}"),
    }
}

fn count(server: &MariaDb) -> u64 {
    server
        .query_value("SELECT COUNT(*) FROM shop.orders")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_multi_row_insert_over_both_shards_is_split_and_all_or_nothing() {
    let (a, b, sluice, _) = start_with(&[("instance", INSTANCE)]);
    assert!(decision_table_made(&a, &b), "{}", sluice.log());
    let mut c = shop(&sluice);
    assert_eq!(insert_many(&mut c, 1, 40), Ok(40));
    let (on_a, on_b) = (ids(&a, "orders"), ids(&b, "orders"));
    assert!(!on_a.is_empty() && !on_b.is_empty(), "{on_a:?} {on_b:?}");
    assert_eq!(on_a.len() + on_b.len(), 40);
    assert!(on_a.is_disjoint(&on_b));
    // Each row where a single-row insert of it would have gone.
    for id in [1u32, 2, 3] {
        let holder = if on_a.contains(&id) { &a } else { &b };
        assert_eq!(value(holder, id), format!("m{id}"));
    }
    assert!(prepared(&a).is_empty() && prepared(&b).is_empty());

    // One duplicate on either shard: nothing of the statement stays anywhere.
    let dup_a = *on_a.iter().next().unwrap();
    let dup_b = *on_b.iter().next().unwrap();
    for dup in [dup_a, dup_b] {
        let rows = format!("('n', 100), ('n', 101), ('n', 102), ('n', 103), ('n', {dup})");
        let sql = format!("INSERT INTO orders (v, id) VALUES {rows}");
        let (code, _) = refused(&mut c, &sql);
        assert_eq!(code, 1062, "{sql}");
        assert_eq!(count(&a) + count(&b), 40, "{sql}");
    }
    // In the client's transaction: part of it, and rolled back with it.
    ok(&mut c, "BEGIN");
    assert_eq!(insert_many(&mut c, 200, 210), Ok(11));
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'in' WHERE id = {dup_a}"),
    );
    ok(&mut c, "ROLLBACK");
    assert_eq!(count(&a) + count(&b), 40);
    assert_eq!(value(&a, dup_a), format!("m{dup_a}"));
    ok(&mut c, "BEGIN");
    assert_eq!(insert_many(&mut c, 200, 210), Ok(11));
    ok(&mut c, "COMMIT");
    assert_eq!(count(&a) + count(&b), 51);
    // The mariadb client's bulk form, with a trailing semicolon.
    let out = sluice_client(
        &sluice,
        "INSERT INTO shop.orders VALUES (300, 'x'), (301, 'y'), (302, 'z');",
    );
    assert!(out.is_ok(), "{out:?}");
    assert_eq!(count(&a) + count(&b), 54);
}

fn sluice_client(sluice: &crate::support::Sluice, sql: &str) -> Result<String, String> {
    let out = crate::support::Client::native(sluice.port())
        .args(["-e", sql])
        .run();
    if out.success() {
        Ok(out.stdout)
    } else {
        Err(out.stderr)
    }
}

#[test]
fn refused_by_configuration_a_transaction_stays_on_one_shard() {
    let (a, b, sluice, _) = start_with(&[("cross_shard", "refuse")]);
    let mut c = shop(&sluice);
    let (on_a, on_b) = fill(&mut c, &a, &b);
    ok(&mut c, "BEGIN");
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'c' WHERE id = {}", on_a[0]),
    );
    let (code, message) = refused(
        &mut c,
        &format!("UPDATE orders SET v = 'c' WHERE id = {}", on_b[0]),
    );
    assert_eq!(code, 1235, "{message}");
    assert!(message.contains("more than one shard"), "{message}");
    ok(&mut c, "COMMIT");
    assert_eq!(value(&a, on_a[0]), "c");
    assert_eq!(value(&b, on_b[0]), "v");
    let (code, message) = insert_many(&mut c, 100, 120).unwrap_err();
    assert_eq!(code, 1235, "{message}");
    assert!(message.contains("multi-row insert"), "{message}");
}

/// Updates `x` (on `a`) and `y` (on `b`) in one transaction through `sluice` on `c`,
/// and SIGKILLs `sluice` once its COMMIT has prepared `b`'s branch while the decision
/// waits (its table locked here): what a crash mid-commit leaves. The branch's data.
pub(crate) fn crash_mid_commit(
    sluice: &mut crate::support::Sluice,
    c: &mut RawConn,
    a: &MariaDb,
    b: &MariaDb,
    x: u32,
    y: u32,
) -> String {
    let mut locker = RawConn::login(a.addr(), NATIVE_USER, NATIVE_PASSWORD, None).unwrap();
    ok(&mut locker, "LOCK TABLES sluice.xa_decision WRITE");
    ok(c, "BEGIN");
    for id in [x, y] {
        ok(c, &format!("UPDATE orders SET v = 'lost' WHERE id = {id}"));
    }
    c.send_command(0x03, b"COMMIT").unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || prepared(b).len() == 1),
        "{}",
        sluice.log()
    );
    let waiting = || {
        a.query_value(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE INFO LIKE 'INSERT INTO sluice.xa_decision%'",
        )
        .is_ok_and(|n| n == "1")
    };
    assert!(wait_until(Duration::from_secs(20), waiting));
    let gtrid = prepared(b)[0].clone();
    sandbox::send_signal(sluice.pid(), "KILL").unwrap();
    assert!(sluice.wait_exit(Duration::from_secs(10)).is_some());
    ok(&mut locker, "UNLOCK TABLES");
    gtrid
}

/// Sluice is killed while the first shard's commit waits for the decision table
/// (locked here), after the other shard's branch was prepared: the next Sluice rolls
/// that branch back. A branch prepared with its decision recorded (what a crash after
/// the first shard's commit leaves) is committed.
#[test]
fn prepared_branches_left_by_a_crash_are_finished_by_the_next_sluice() {
    let (a, b, mut sluice, config) = start_with(&[("instance", INSTANCE)]);
    assert!(decision_table_made(&a, &b), "{}", sluice.log());
    let mut c = shop(&sluice);
    let (on_a, on_b) = fill(&mut c, &a, &b);
    let (x, y, y2) = (on_a[0], on_b[0], on_b[1]);

    let gtrid = crash_mid_commit(&mut sluice, &mut c, &a, &b, x, y);

    // What a crash after the decision leaves: a branch of the same instance prepared on
    // b, decided on a (shard 0).
    // The data is the transaction id and then the branch's: shard b's, "1".
    let mut parts: Vec<&str> = gtrid[..gtrid.len() - 1].split(':').collect();
    assert_eq!(parts.len(), 5, "{gtrid}");
    parts[3] = "0";
    parts[4] = "424242";
    let decided = parts.join(":");
    a.execute(&format!(
        "INSERT INTO sluice.xa_decision (gtrid) VALUES ('{decided}')"
    ))
    .unwrap();
    b.execute(&format!(
        "XA START '{decided}','1'; UPDATE shop.orders SET v = 'kept' WHERE id = {y2}; \
         XA END '{decided}','1'; XA PREPARE '{decided}','1'"
    ))
    .unwrap();
    assert_eq!(prepared(&b).len(), 2);

    let _again = crate::support::Sluice::start(&config);
    assert!(
        wait_until(Duration::from_secs(30), || prepared(&b).is_empty()),
        "still prepared: {:?}",
        prepared(&b)
    );
    assert_eq!(value(&b, y), "v");
    assert_eq!(value(&b, y2), "kept");
    // The first shard's part died with Sluice's connection.
    assert!(wait_until(Duration::from_secs(20), || value(&a, x) == "v"));
    assert!(prepared(&a).is_empty());
}
