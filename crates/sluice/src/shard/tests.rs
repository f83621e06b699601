use super::config::{ListConfig, RangeConfig, SchemaConfig, TableConfig};
use super::*;
use crate::classify::keys::key_values;

fn shards(n: usize) -> Vec<ShardConfig> {
    (0..n)
        .map(|i| ShardConfig {
            name: format!("s{i}"),
            servers: vec![format!("db{i}")],
        })
        .collect()
}

fn servers(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("db{i}")).collect()
}

fn table(name: &str, key: &str, method: Method) -> TableConfig {
    TableConfig {
        table: name.into(),
        key: key.into(),
        key_type: KeyType::Integer,
        method,
        ranges: Vec::new(),
        lists: Vec::new(),
    }
}

fn map(n: usize, sharding: ShardingConfig) -> ShardMap {
    ShardMap::new(&shards(n), &sharding, &servers(n)).unwrap()
}

fn t(schema: &str, table: &str) -> TableRef {
    TableRef {
        schema: schema.into(),
        table: table.into(),
    }
}

/// Places `sql` (reading or writing `tables`) with its own key values.
fn place(m: &ShardMap, sql: &str, tables: &[TableRef], params: Option<&[Bound]>) -> Placement {
    m.place(
        tables,
        |_, col| key_values(sql.as_bytes(), Some("shop"), col).0,
        params,
    )
}

#[test]
fn hashed_keys_spread_and_stay_put() {
    let m = map(
        3,
        ShardingConfig {
            tables: vec![table("shop.orders", "id", Method::Hash)],
            ..Default::default()
        },
    );
    let orders = [t("shop", "orders")];
    let mut seen = BTreeSet::new();
    for id in 0..60 {
        let sql = format!("SELECT * FROM orders WHERE id = {id}");
        let Placement::One(s) = place(&m, &sql, &orders, None) else {
            panic!("{sql}");
        };
        // The same key, written otherwise or bound, goes to the same shard.
        for same in [
            format!("SELECT * FROM orders WHERE id = '{id}'"),
            format!("DELETE FROM orders WHERE id = {id}.0"),
        ] {
            assert_eq!(place(&m, &same, &orders, None), Placement::One(s), "{same}");
        }
        let bound = [Bound::Int(id)];
        assert_eq!(
            place(
                &m,
                "SELECT * FROM orders WHERE id = ?",
                &orders,
                Some(&bound)
            ),
            Placement::One(s)
        );
        seen.insert(s);
    }
    assert_eq!(seen.len(), 3, "60 keys over 3 shards");
    // What does not decide: every shard.
    for sql in [
        "SELECT * FROM orders",
        "SELECT * FROM orders WHERE id = 5.5",
        "SELECT * FROM orders WHERE id = ' 5'",
        "INSERT INTO orders (id) VALUES (NULL)",
        "SELECT * FROM orders WHERE id = ?",
    ] {
        assert_eq!(place(&m, sql, &orders, None), Placement::All, "{sql}");
    }
}

#[test]
fn several_keys_and_tables() {
    let m = map(
        4,
        ShardingConfig {
            tables: vec![table("shop.orders", "id", Method::Hash)],
            default_shard: Some("s2".into()),
            schemas: vec![SchemaConfig {
                schema: "tenant1".into(),
                shard: "s3".into(),
            }],
            ..ShardingConfig::default()
        },
    );
    let orders = [t("shop", "orders")];
    let one = |id: u32| match place(
        &m,
        &format!("SELECT * FROM orders WHERE id = {id}"),
        &orders,
        None,
    ) {
        Placement::One(s) => s,
        other => panic!("{other:?}"),
    };
    let (a, b) = (0..100)
        .flat_map(|x| (0..100).map(move |y| (x, y)))
        .find(|&(x, y)| one(x) != one(y))
        .unwrap();
    let mut expect = vec![one(a), one(b)];
    expect.sort();
    assert_eq!(
        place(
            &m,
            &format!("SELECT * FROM orders WHERE id IN ({a}, {b})"),
            &orders,
            None
        ),
        Placement::Several(expect)
    );
    // Unsharded tables: their schema's shard, else the default; no table: the default.
    assert_eq!(
        place(&m, "SELECT 1", &[t("tenant1", "x")], None),
        Placement::One(3)
    );
    assert_eq!(
        place(&m, "SELECT 1", &[t("shop", "items")], None),
        Placement::One(2)
    );
    assert_eq!(place(&m, "SELECT NOW()", &[], None), Placement::One(2));
    assert_eq!(
        place(
            &m,
            "SELECT 1",
            &[t("tenant1", "x"), t("shop", "items")],
            None
        ),
        Placement::Several(vec![2, 3])
    );
}

#[test]
fn ranges_and_lists() {
    let mut ranged = table("shop.orders", "id", Method::Range);
    ranged.ranges = vec![
        RangeConfig {
            shard: "s0".into(),
            below: Some(100),
        },
        RangeConfig {
            shard: "s1".into(),
            below: Some(200),
        },
        RangeConfig {
            shard: "s2".into(),
            below: None,
        },
    ];
    let mut listed = table("shop.customers", "region", Method::List);
    listed.key_type = KeyType::Ci;
    listed.lists = vec![
        ListConfig {
            shard: "s1".into(),
            values: vec![toml::Value::String("EU".into())],
        },
        ListConfig {
            shard: "s2".into(),
            values: vec![toml::Value::String("us".into())],
        },
    ];
    let m = map(
        3,
        ShardingConfig {
            tables: vec![ranged, listed],
            ..Default::default()
        },
    );
    let orders = [t("shop", "orders")];
    for (id, shard) in [(-5, 0), (99, 0), (100, 1), (199, 1), (200, 2), (10_000, 2)] {
        let sql = format!("SELECT * FROM orders WHERE id = {id}");
        assert_eq!(
            place(&m, &sql, &orders, None),
            Placement::One(shard),
            "{sql}"
        );
    }
    let customers = [t("shop", "customers")];
    let region = |v: &str| {
        place(
            &m,
            &format!("SELECT * FROM customers WHERE region = '{v}'"),
            &customers,
            None,
        )
    };
    assert_eq!(region("eu"), Placement::One(1));
    assert_eq!(region("Eu  "), Placement::One(1));
    assert_eq!(region("US"), Placement::One(2));
    assert_eq!(
        region("asia"),
        Placement::One(0),
        "unlisted: the default shard"
    );
    assert_eq!(
        region("é"),
        Placement::All,
        "non-ASCII under a ci collation"
    );
}

#[test]
fn configuration_problems_are_all_listed() {
    let mut bad_range = table("shop.orders", "id", Method::Range);
    bad_range.ranges = vec![
        RangeConfig {
            shard: "s0".into(),
            below: Some(100),
        },
        RangeConfig {
            shard: "nowhere".into(),
            below: Some(50),
        },
    ];
    let sharding = ShardingConfig {
        default_shard: Some("s9".into()),
        tables: vec![bad_range, table("orders", "id", Method::Hash)],
        schemas: Vec::new(),
        ..ShardingConfig::default()
    };
    let mut configured = shards(2);
    configured[1].servers.push("db0".into());
    let errors = match ShardMap::new(&configured, &sharding, &servers(3)) {
        Err(e) => e,
        Ok(_) => panic!("accepted"),
    }
    .join("\n");
    for expected in [
        "server \"db0\" is in shards \"s0\" and \"s1\"",
        "server \"db2\" is in no [[shards]]",
        "sharding.default_shard: no shard is named \"s9\"",
        "the last range must have no `below`",
        "ranges must be in increasing order",
        "no shard is named \"nowhere\"",
        "sharding.tables \"orders\": name it as schema.table",
    ] {
        assert!(errors.contains(expected), "{expected}\n{errors}");
    }
}

#[test]
fn only_shapes_that_concatenate_exactly_are_scattered() {
    for sql in [
        "SELECT * FROM orders",
        "SELECT id, v FROM orders WHERE v LIKE 'a%' AND id > 5",
        "SELECT id, UPPER(v) FROM shop.orders WHERE v IN ('a', 'b') FOR UPDATE",
    ] {
        assert_eq!(unmergeable(sql.as_bytes()), None, "{sql}");
    }
    for (sql, why) in [
        ("SELECT * FROM orders ORDER BY id", "ORDER BY"),
        ("SELECT * FROM orders LIMIT 10", "LIMIT"),
        ("SELECT COUNT(*) FROM orders", "aggregate"),
        ("SELECT count (*) FROM orders", "aggregate"),
        ("SELECT DISTINCT v FROM orders", "DISTINCT"),
        ("SELECT v FROM orders GROUP BY v", "GROUP BY"),
        (
            "SELECT * FROM orders o JOIN items i ON i.id = o.id",
            "joins",
        ),
        ("SELECT * FROM orders, items", "joins"),
        (
            "SELECT * FROM orders WHERE id IN (SELECT id FROM items)",
            "subqueries",
        ),
        ("SELECT SUM(id) OVER () FROM orders", "aggregate"),
    ] {
        let got = unmergeable(sql.as_bytes());
        assert!(got.is_some_and(|g| g.contains(why)), "{sql}: {got:?}");
    }
}

#[test]
fn generated_ids_are_apart_only_with_one_increment_and_distinct_offsets() {
    assert!(ids_apart(&[Some((2, 1)), Some((2, 2))]));
    assert!(ids_apart(&[Some((3, 1)), None]), "not all known yet");
    assert!(!ids_apart(&[Some((1, 1)), Some((1, 1))]), "the defaults");
    assert!(!ids_apart(&[Some((2, 1)), Some((2, 3))]), "3 = 1 modulo 2");
    assert!(
        !ids_apart(&[Some((2, 1)), Some((3, 2))]),
        "different increments"
    );
    assert!(
        !ids_apart(&[Some((2, 1)), Some((2, 2)), Some((2, 3))]),
        "too small"
    );
}
