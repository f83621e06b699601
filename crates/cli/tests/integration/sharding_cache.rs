//! The query cache with shards: a read one shard answers is cached like any other, and
//! stays right when its rows change, whichever way they change: through Sluice on one
//! shard, in a transaction over both (Sluice commits it itself), as a multi-row insert
//! Sluice splits, or straight on a shard's server (that shard's binlog reader).

use crate::routing::{admin_get, ok, one};
use crate::sharding::{ids, shop, start_adjusted};
use crate::support::proxy::Config;
use crate::support::wait_until;
use std::time::Duration;

fn cached(config: Config) -> Config {
    config.cache_rule("all-selects", "(?i)^\\s*SELECT", "1h")
}

fn hits(sluice: &crate::support::Sluice, config: &Config) -> u64 {
    admin_get(sluice, config, "/v1/cache/stats")["totals"]["hits"]
        .as_u64()
        .unwrap()
}

/// No binlog reader here: an hour's TTL, so only Sluice's own write path can make an
/// entry stale, and each read right after a write shows whether it did.
#[test]
fn writes_through_sluice_on_one_shard_or_several_leave_no_stale_entry() {
    let (a, b, sluice, config) = start_adjusted(&[], cached);
    let mut c = shop(&sluice);
    for id in 1..=10 {
        ok(
            &mut c,
            &format!("INSERT INTO orders (id, v) VALUES ({id}, 'v{id}')"),
        );
    }
    let on_a = *ids(&a, "orders").iter().next().unwrap();
    let on_b = *ids(&b, "orders").iter().next().unwrap();
    let read = |c: &mut _, id: u32| one(c, &format!("SELECT v FROM orders WHERE id = {id}"));

    // Read twice: the second is a hit, for either shard's row.
    for id in [on_a, on_b] {
        assert_eq!(read(&mut c, id), format!("v{id}"));
        let before = hits(&sluice, &config);
        assert_eq!(read(&mut c, id), format!("v{id}"));
        assert_eq!(hits(&sluice, &config), before + 1);
    }

    // One shard's write.
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'one' WHERE id = {on_b}"),
    );
    assert_eq!(read(&mut c, on_b), "one");
    assert_eq!(read(&mut c, on_a), format!("v{on_a}"));

    // A transaction over both shards: nothing is seen changed before COMMIT, both rows
    // at once after it.
    ok(&mut c, "BEGIN");
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'xa' WHERE id = {on_a}"),
    );
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'xa' WHERE id = {on_b}"),
    );
    ok(&mut c, "COMMIT");
    assert_eq!(read(&mut c, on_a), "xa");
    assert_eq!(read(&mut c, on_b), "xa");

    // Rolled back over both: the entries filled meanwhile still hold the old rows.
    ok(&mut c, "BEGIN");
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'no' WHERE id = {on_a}"),
    );
    ok(
        &mut c,
        &format!("UPDATE orders SET v = 'no' WHERE id = {on_b}"),
    );
    ok(&mut c, "ROLLBACK");
    assert_eq!(read(&mut c, on_a), "xa");
    assert_eq!(read(&mut c, on_b), "xa");

    // A multi-row insert Sluice splits over both shards: rows read (and cached) as
    // absent before are there after.
    let fresh: Vec<u32> = (100..120).collect();
    for &id in &fresh {
        assert_eq!(
            c.query_rows(&format!("SELECT v FROM orders WHERE id = {id}")),
            Vec::<Vec<Option<String>>>::new()
        );
    }
    let values: Vec<String> = fresh.iter().map(|id| format!("({id}, 'n{id}')")).collect();
    ok(
        &mut c,
        &format!("INSERT INTO orders (id, v) VALUES {}", values.join(", ")),
    );
    assert!(ids(&a, "orders").contains(&100) != ids(&b, "orders").contains(&100));
    for &id in &fresh {
        assert_eq!(read(&mut c, id), format!("n{id}"));
    }
    assert_eq!(one(&mut c, "SELECT COUNT(*) FROM orders"), "30");
}

/// A binlog reader per shard, each following its shard's writer: a write made straight
/// on either server reaches the cache.
#[test]
fn direct_writes_on_any_shard_reach_the_cache_through_its_binlog() {
    let (a, b, sluice, config) = start_adjusted(&[], |c| {
        let binlog = crate::support::binlog_section();
        cached(c).cache("binlog", binlog)
    });
    let stats = || admin_get(&sluice, &config, "/v1/cache/stats");
    assert!(
        wait_until(Duration::from_secs(15), || stats()["binlog"] == "following"),
        "{}",
        stats()
    );
    let readers = stats()["binlog_readers"].clone();
    let servers: Vec<&str> = readers
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["db1", "db2"], "{readers}");

    let mut c = shop(&sluice);
    for id in 1..=10 {
        ok(
            &mut c,
            &format!("INSERT INTO orders (id, v) VALUES ({id}, 'v{id}')"),
        );
    }
    for (server, tag) in [(&a, "a"), (&b, "b")] {
        let id = *ids(server, "orders").iter().next().unwrap();
        let sql = format!("SELECT v FROM orders WHERE id = {id}");
        // The inserts' own binlog events may still drop the first entries filled, so
        // read until one is served from the cache.
        assert!(
            wait_until(Duration::from_secs(5), || {
                assert_eq!(one(&mut c, &sql), format!("v{id}"));
                let before = hits(&sluice, &config);
                assert_eq!(one(&mut c, &sql), format!("v{id}"));
                hits(&sluice, &config) == before + 1
            }),
            "never cached: {sql}"
        );
        server
            .execute(&format!(
                "UPDATE shop.orders SET v = 'direct-{tag}' WHERE id = {id}"
            ))
            .unwrap();
        assert!(
            wait_until(Duration::from_secs(5), || one(&mut c, &sql)
                == format!("direct-{tag}")),
            "a write straight on {tag} never reached the cache: {}",
            stats()
        );
    }
}
