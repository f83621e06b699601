//! Sharding on real servers: two MariaDB instances as two shards, `shop.orders`
//! placed by a hash of `id`, `shop.items` unsharded (on the default shard). Every
//! statement a key decides runs on exactly one server (each server's rows and
//! `Com_stmt_execute` say which), text and prepared alike; a read no key decides runs
//! on both and its rows come back together; a transaction stays on one shard (with
//! `cross_shard = "refuse"`; `sharding_xa.rs` has those over both); what
//! cannot be answered exactly from both shards gets error 1235 and changes nothing.

use crate::routing::{login, ok};
use crate::support::proxy::Server;
use crate::support::wire::{RawConn, Reply};
use crate::support::{dedicated_server, wait_until, Config, MariaDbOptions, Sluice};
use sluice_sandbox::MariaDb;
use std::collections::BTreeSet;
use std::time::Duration;

const SCHEMA: &str = "CREATE DATABASE shop; \
    CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(20)); \
    CREATE TABLE shop.items (id INT PRIMARY KEY)";

fn start() -> (MariaDb, MariaDb, Sluice) {
    let (a, b, sluice, _) = start_with_config();
    (a, b, sluice)
}

fn start_with_config() -> (MariaDb, MariaDb, Sluice, Config) {
    start_with(&[])
}

/// Two servers as shards `s1` and `s2` (`shop.orders` by a hash of `id`), with these
/// `[sharding]` settings besides.
pub fn start_with(sharding: &[(&str, &str)]) -> (MariaDb, MariaDb, Sluice, Config) {
    start_adjusted(sharding, |c| c)
}

/// [`start_with`], the configuration adjusted by `adjust` before Sluice starts.
pub fn start_adjusted(
    sharding: &[(&str, &str)],
    adjust: impl FnOnce(Config) -> Config,
) -> (MariaDb, MariaDb, Sluice, Config) {
    let (a, b) = (
        dedicated_server(MariaDbOptions::default()),
        dedicated_server(MariaDbOptions::default()),
    );
    for s in [&a, &b] {
        s.execute(SCHEMA).unwrap();
    }
    let mut config = Config::for_server(&a);
    config.servers = vec![Server::new("db1", a.addr()), Server::new("db2", b.addr())];
    for (shard, server) in [("s1", "db1"), ("s2", "db2")] {
        let mut t = toml::Table::new();
        t.insert("name".into(), shard.into());
        t.insert("servers".into(), toml::Value::Array(vec![server.into()]));
        config.shards.push(t);
    }
    let mut orders = toml::Table::new();
    orders.insert("table".into(), "shop.orders".into());
    orders.insert("key".into(), "id".into());
    config.sharding.insert(
        "tables".into(),
        toml::Value::Array(vec![toml::Value::Table(orders)]),
    );
    for (key, value) in sharding {
        config.sharding.insert((*key).into(), (*value).into());
    }
    let config = adjust(config.admin(crate::routing::ADMIN_TOKEN));
    let sluice = Sluice::start(&config);
    (a, b, sluice, config)
}

pub fn ids(server: &MariaDb, table: &str) -> BTreeSet<u32> {
    let out = server
        .execute(&format!("SELECT id FROM shop.{table}"))
        .unwrap();
    out.lines()
        .skip(1)
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

/// `Com_stmt_execute`: Sluice's monitor sends plain queries (so `Com_select` moves by
/// itself), never prepared statements.
fn executes(server: &MariaDb) -> u64 {
    server
        .query_value(
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = 'COM_STMT_EXECUTE'",
        )
        .unwrap()
        .parse()
        .unwrap()
}

/// The server's error for `sql` through `c`: its code and message.
pub fn refused(c: &mut RawConn, sql: &str) -> (u16, String) {
    match c.query(sql) {
        Ok(r @ Reply::Err(_)) => {
            let e = r.expect_err();
            (e.code, e.message.clone())
        }
        other => panic!("{sql}: {other:?}"),
    }
}

pub fn shop(sluice: &Sluice) -> RawConn {
    let mut c = login(sluice);
    ok(&mut c, "USE shop");
    c
}

#[test]
fn statements_go_to_the_shard_their_key_decides() {
    let (a, b, sluice) = start();
    let mut c = shop(&sluice);
    for id in 1..=20 {
        ok(
            &mut c,
            &format!("INSERT INTO orders (id, v) VALUES ({id}, 'o{id}')"),
        );
    }
    let stmt = c
        .prepare("INSERT INTO orders (v, id) VALUES ('p', ?)")
        .unwrap();
    for id in 21..=30 {
        assert_eq!(c.execute_rows(stmt, &[&id.to_string()]).unwrap(), 0);
    }
    let (on_a, on_b) = (ids(&a, "orders"), ids(&b, "orders"));
    assert!(on_a.is_disjoint(&on_b), "{on_a:?} {on_b:?}");
    assert_eq!(on_a.union(&on_b).count(), 30, "{on_a:?} {on_b:?}");
    assert!(!on_a.is_empty() && !on_b.is_empty(), "{on_a:?} {on_b:?}");

    // Each read by key runs on the server holding the row (only it has the row), and
    // the other shard sees nothing of it.
    let select = c.prepare("SELECT v FROM orders WHERE id = ?").unwrap();
    for id in [1u32, 2, 3, 25, 26] {
        let (holder, other) = if on_a.contains(&id) {
            (&a, &b)
        } else {
            (&b, &a)
        };
        let before = (executes(holder), executes(other));
        let rows = c.query_rows(&format!("SELECT v FROM orders WHERE id = {id}"));
        assert_eq!(
            rows,
            vec![vec![Some(if id > 20 {
                "p".to_string()
            } else {
                format!("o{id}")
            })]]
        );
        assert_eq!(
            c.execute_rows(select, &[&id.to_string()]).unwrap(),
            1,
            "{id}"
        );
        assert_eq!(
            (executes(holder), executes(other)),
            (before.0 + 1, before.1),
            "{id}"
        );
    }

    // Without a column list, the key's position is learnt from the servers.
    assert!(
        wait_until(Duration::from_secs(15), || {
            matches!(
                c.query("INSERT INTO orders VALUES (100, 'x')"),
                Ok(Reply::Ok { .. })
            )
        }),
        "a column-less insert was never placed"
    );
    assert!(ids(&a, "orders").contains(&100) != ids(&b, "orders").contains(&100));

    // A read no key decides runs on every shard, and every row comes back once.
    let all: BTreeSet<u32> = c
        .query_rows("SELECT id FROM orders WHERE v LIKE 'o%'")
        .into_iter()
        .map(|r| r[0].as_deref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(all, (1..=20).collect::<BTreeSet<u32>>());
    let (x, y) = (*on_a.first().unwrap(), *on_b.first().unwrap());
    let two = c.query_rows(&format!("SELECT id, v FROM orders WHERE id IN ({x}, {y})"));
    assert_eq!(two.len(), 2, "{two:?}");
    let none = c.query_rows("SELECT id FROM orders WHERE v = 'nothing'");
    assert!(none.is_empty(), "{none:?}");

    // Aggregates without GROUP BY: each shard's row, combined exactly.
    let agg = c
        .query_rows("SELECT COUNT(*), SUM(id), MIN(id), MAX(id) AS top FROM orders WHERE id <> 13");
    let expect: Vec<u64> = (1..=30).chain([100]).filter(|&i| i != 13).collect();
    let text = |v: u64| Some(v.to_string());
    assert_eq!(
        agg,
        vec![vec![
            text(expect.len() as u64),
            text(expect.iter().sum()),
            text(1),
            text(100),
        ]]
    );
    // ORDER BY ... LIMIT: each shard's first rows, merged in order.
    let top = c.query_rows("SELECT id, v FROM orders WHERE id < 100 ORDER BY id DESC LIMIT 4");
    let ids_of = |rows: Vec<Vec<Option<String>>>| -> Vec<u32> {
        rows.iter()
            .map(|r| r[0].as_deref().unwrap().parse().unwrap())
            .collect()
    };
    assert_eq!(ids_of(top), [30, 29, 28, 27]);
    let low = c.query_rows("SELECT v, id AS n FROM orders ORDER BY n LIMIT 3");
    assert_eq!(
        low.iter()
            .map(|r| r[1].clone().unwrap())
            .collect::<Vec<_>>(),
        ["1", "2", "3"]
    );
    for (sql, why) in [
        (
            "SELECT id, v FROM orders ORDER BY v LIMIT 3",
            "depends on its collation",
        ),
        (
            "SELECT id FROM orders ORDER BY v LIMIT 3",
            "the result does not show",
        ),
    ] {
        let (code, message) = refused(&mut c, sql);
        assert_eq!(code, 1235, "{message}");
        assert!(message.contains(why), "{sql}: {message}");
    }
    let empty = c.query_rows("SELECT COUNT(*), SUM(id), MAX(id) FROM orders WHERE v = 'none'");
    assert_eq!(empty, vec![vec![text(0), None, None]]);

    // An unsharded table lives on the default shard (the first).
    ok(&mut c, "INSERT INTO items VALUES (7)");
    assert_eq!(ids(&a, "items"), BTreeSet::from([7]));
    assert!(ids(&b, "items").is_empty());
}

#[test]
fn what_needs_both_shards_is_refused_and_changes_nothing() {
    let (a, b, sluice, _) = start_with(&[("cross_shard", "refuse")]);
    let mut c = shop(&sluice);
    for id in 1..=10 {
        ok(
            &mut c,
            &format!("INSERT INTO orders (id, v) VALUES ({id}, 'v')"),
        );
    }
    let (on_a, on_b) = (ids(&a, "orders"), ids(&b, "orders"));
    let (x, y) = (*on_a.first().unwrap(), *on_b.first().unwrap());
    for (sql, why) in [
        (
            "SELECT STD(id) FROM orders",
            "aggregate functions over several shards",
        ),
        (
            "SELECT COUNT(*), v FROM orders",
            "aggregate functions over several shards",
        ),
        (
            "SELECT MIN(v) FROM orders",
            "a column that is not an integer or a decimal",
        ),
        (
            "SELECT * FROM orders ORDER BY id",
            "ORDER BY over several shards",
        ),
        ("SELECT v FROM orders LIMIT 3", "LIMIT over several shards"),
        ("UPDATE orders SET v = 'w'", "a write over several shards"),
        (
            "DELETE FROM orders WHERE v = 'v'",
            "a write over several shards",
        ),
    ] {
        let (code, message) = refused(&mut c, sql);
        assert_eq!(code, 1235, "{sql}: {message}");
        assert!(message.contains(why), "{sql}: {message}");
    }
    // Prepared, rows from both shards come together; what needs them merged does not.
    let stmt = c.prepare("SELECT id FROM orders WHERE v = ?").unwrap();
    assert_eq!(c.execute_rows(stmt, &["v"]).unwrap(), 10);
    let stmt = c
        .prepare("SELECT id FROM orders WHERE v = ? ORDER BY id LIMIT 3")
        .unwrap();
    // The harness reports the error packet's bytes.
    let e = c.execute_rows(stmt, &["v"]).unwrap_err().to_string();
    let bytes: Vec<u8> = e
        .trim_start_matches("execute failed: [")
        .trim_end_matches(']')
        .split(", ")
        .map(|b| b.parse().unwrap())
        .collect();
    let err = crate::support::wire::ErrPacket::parse(&bytes).unwrap();
    assert_eq!(err.code, 1235, "{err:?}");
    assert!(
        err.message
            .contains("a prepared read over several shards whose rows need merging"),
        "{err:?}"
    );

    // A transaction stays on the shard of its first statement.
    let same = on_a.iter().nth(1).copied().unwrap();
    ok(&mut c, "BEGIN");
    ok(&mut c, &format!("UPDATE orders SET v = 't' WHERE id = {x}"));
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 't' WHERE id = {same}"),
    );
    let (code, message) = refused(&mut c, &format!("UPDATE orders SET v = 't' WHERE id = {y}"));
    assert_eq!(code, 1235, "{message}");
    assert!(message.contains("more than one shard"), "{message}");
    ok(&mut c, "ROLLBACK");
    for server in [&a, &b] {
        assert_eq!(
            server
                .query_value("SELECT COUNT(*) FROM shop.orders WHERE v <> 'v'")
                .unwrap(),
            "0"
        );
    }
    ok(&mut c, "START TRANSACTION");
    ok(&mut c, &format!("UPDATE orders SET v = 'c' WHERE id = {y}"));
    ok(&mut c, "COMMIT");
    assert_eq!(
        b.query_value(&format!("SELECT v FROM shop.orders WHERE id = {y}"))
            .unwrap(),
        "c"
    );
    // Under autocommit = 0 every statement is in a transaction, which ends at COMMIT:
    // the next one may be on the other shard.
    ok(&mut c, "SET autocommit = 0");
    ok(&mut c, &format!("UPDATE orders SET v = 'e' WHERE id = {x}"));
    let (code, _) = refused(&mut c, &format!("UPDATE orders SET v = 'e' WHERE id = {y}"));
    assert_eq!(code, 1235);
    ok(&mut c, "COMMIT");
    ok(&mut c, &format!("UPDATE orders SET v = 'e' WHERE id = {y}"));
    ok(&mut c, "COMMIT");
    ok(&mut c, "SET autocommit = 1");
    for (server, id) in [(&a, x), (&b, y)] {
        let v = server
            .query_value(&format!("SELECT v FROM shop.orders WHERE id = {id}"))
            .unwrap();
        assert_eq!(v, "e", "{id}");
    }
    // A transaction that never named a table ends without reaching a server.
    ok(&mut c, "BEGIN");
    ok(&mut c, "COMMIT");
    ok(&mut c, &format!("UPDATE orders SET v = 'd' WHERE id = {x}"));
    assert_eq!(
        a.query_value(&format!("SELECT v FROM shop.orders WHERE id = {x}"))
            .unwrap(),
        "d"
    );
}

/// mysql2 negotiates CLIENT_DEPRECATE_EOF: the rows put together from both shards end
/// with the OK-style terminator it expects.
#[test]
fn mysql2_reads_rows_put_together_from_both_shards() {
    let root = crate::support::repo_root();
    let script = root.join("tests/clients/node/sharding.js");
    let node = sluice_sandbox::find_program(&["node", "nodejs"])
        .unwrap_or_else(|e| panic!("{e:#}; run `make test`, which installs Node.js"));
    let (_a, _b, sluice) = start();
    let mut c = shop(&sluice);
    for id in 1..=20 {
        ok(
            &mut c,
            &format!("INSERT INTO orders (id, v) VALUES ({id}, 'o{id}')"),
        );
    }
    let mut command = std::process::Command::new(node);
    command
        .arg(&script)
        .args(["--host", "127.0.0.1", "--port", &sluice.port().to_string()])
        .args(["--user", crate::support::NATIVE_USER])
        .args(["--password", crate::support::NATIVE_PASSWORD])
        .args(["--database", "shop"])
        .current_dir(script.parent().unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().expect("starting node");
    let out = crate::support::cli::finish(child, Vec::new(), Duration::from_secs(60), "node");
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let r: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    assert_eq!(
        r["ids"],
        serde_json::json!((1..=20).collect::<Vec<u32>>()),
        "{r}"
    );
    assert_eq!(r["prepared_ids"], r["ids"], "{r}");
    assert_eq!(r["by_key"], serde_json::json!(["o7"]), "{r}");
    assert_eq!(
        (&r["count"], &r["top"]),
        (&serde_json::json!(20), &serde_json::json!(20)),
        "{r}"
    );
    assert_eq!(r["refused"]["errno"], 1235, "{r}");
    assert_eq!(r["refused"]["sqlState"], "42000", "{r}");
    assert_eq!(r["after"], 2, "{r}");
}

/// PyMySQL keeps autocommit off: every statement is in a transaction, so its reads over
/// both shards run in it (a branch on each), see its own writes there, and go with it.
#[test]
fn pymysql_in_its_transactions_reads_over_both_shards() {
    let root = crate::support::repo_root();
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "no Python environment; run `make test`, which makes it"
    );
    let script = root.join("tests/clients/python/sharding.py");
    let (a, b, sluice) = start();
    let mut c = shop(&sluice);
    for id in 1..=20 {
        ok(
            &mut c,
            &format!("INSERT INTO orders (id, v) VALUES ({id}, 'o{id}')"),
        );
    }
    let (x, y) = (
        *ids(&a, "orders").first().unwrap(),
        *ids(&b, "orders").first().unwrap(),
    );
    let mut command = std::process::Command::new(python);
    command
        .arg(&script)
        .args(["--host", "127.0.0.1", "--port", &sluice.port().to_string()])
        .args(["--user", crate::support::NATIVE_USER])
        .args(["--password", crate::support::NATIVE_PASSWORD])
        .args(["--database", "shop", "--ids", &format!("{x},{y}")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().expect("starting python");
    let out = crate::support::cli::finish(child, Vec::new(), Duration::from_secs(60), "python");
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let r: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let both = serde_json::json!([x.min(y), x.max(y)]);
    assert_eq!(r["autocommit"], false, "{r}");
    assert_eq!(r["count"], serde_json::json!([20, 20]), "{r}");
    assert_eq!(
        r["ids"],
        serde_json::json!((1..=20).collect::<Vec<u32>>()),
        "{r}"
    );
    assert_eq!(r["own_writes"], both, "{r}");
    assert_eq!(r["after_rollback"], 0, "{r}");
    assert_eq!(r["committed"], both, "{r}");
    for (server, id) in [(&a, x), (&b, y)] {
        let v = server
            .query_value(&format!("SELECT v FROM shop.orders WHERE id = {id}"))
            .unwrap();
        assert_eq!(v, "py");
    }
}

/// The servers API lists each shard, and says whether ids the shards' servers generate
/// can collide: not with the servers' defaults, yes once each has its own offset.
#[test]
fn shards_are_listed_and_their_generated_ids_checked() {
    let (a, b, sluice, config) = start_with_config();
    let servers = || crate::routing::admin_get(&sluice, &config, "/v1/servers");
    let s = servers();
    let shards = s["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 2, "{s}");
    assert_eq!(shards[0]["name"], "s1", "{s}");
    assert_eq!(shards[1]["servers"], serde_json::json!(["db2"]), "{s}");
    let listed = s["servers"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{s}");
    assert_eq!(listed[1]["shard"], "s2", "{s}");
    assert!(
        wait_until(Duration::from_secs(15), || servers()["shard_ids_apart"]
            == false),
        "{}",
        servers()
    );
    for (server, offset) in [(&a, 1), (&b, 2)] {
        server
            .execute(&format!(
                "SET GLOBAL auto_increment_increment = 2, auto_increment_offset = {offset}"
            ))
            .unwrap();
    }
    assert!(
        wait_until(Duration::from_secs(15), || servers()["shard_ids_apart"]
            == true),
        "{}",
        servers()
    );
    assert_eq!(servers()["shards"][1]["auto_increment_offset"], 2);

    // Each shard's traffic, and the digests that ran on every shard flagged.
    let before: Vec<u64> = (0..2)
        .map(|i| servers()["shards"][i]["queries"].as_u64().unwrap())
        .collect();
    let mut c = shop(&sluice);
    for _ in 0..3 {
        crate::routing::one(&mut c, "SELECT COUNT(*) FROM orders");
    }
    ok(&mut c, "INSERT INTO orders (id, v) VALUES (1, 'a')");
    crate::routing::one(&mut c, "SELECT v FROM orders WHERE id = 1");
    let after: Vec<u64> = (0..2)
        .map(|i| servers()["shards"][i]["queries"].as_u64().unwrap())
        .collect();
    assert!(
        after[0] >= before[0] + 3 && after[1] >= before[1] + 3,
        "{before:?} {after:?}"
    );
    let d = crate::routing::admin_get(&sluice, &config, "/v1/digests");
    let scattered = |text: &str| {
        d["digests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["text"].as_str().is_some_and(|t| t.contains(text)))
            .map(|x| x["scattered"].as_u64().unwrap())
    };
    assert_eq!(scattered("COUNT"), Some(3), "{d}");
    assert_eq!(scattered("WHERE id"), Some(0), "{d}");
}
