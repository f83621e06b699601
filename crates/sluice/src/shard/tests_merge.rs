//! Reads over several shards: which shapes are put together, what each shard is asked,
//! and the rows that come out.

use super::gather::{put_together, ColumnInfo, Row};
use super::merge::{Agg, Compare, Num, OrderKey};
use super::plan::{gather, Column, Gather};
use super::{merging, Merge};

fn gathered(sql: &str) -> Gather {
    match merging(sql.as_bytes()) {
        Ok(Merge::Gathered(g)) => g,
        other => panic!("{sql}: {other:?}"),
    }
}

fn refused(sql: &str) -> &'static str {
    match merging(sql.as_bytes()) {
        Err(why) => why,
        other => panic!("{sql}: {other:?}"),
    }
}

fn col(name: &str, column_type: u8, charset: u16) -> ColumnInfo {
    ColumnInfo {
        name: name.as_bytes().to_vec(),
        column_type,
        charset,
    }
}

fn row(values: &[Option<&str>]) -> Row {
    values
        .iter()
        .map(|v| v.map(|s| s.as_bytes().to_vec()))
        .collect()
}

fn text(rows: &[Row]) -> Vec<Vec<Option<String>>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| v.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                .collect()
        })
        .collect()
}

#[test]
fn aggregates_without_group_by_ask_every_shard_for_one_row() {
    let g = gathered("SELECT COUNT(*), MAX(id) AS top, AVG(v) a FROM orders WHERE v = 'x'");
    assert_eq!(
        g.columns,
        [
            Column::Agg(Agg::Count),
            Column::Agg(Agg::Max),
            Column::Avg { sum: 3, count: 4 },
            Column::Part(Agg::Sum),
            Column::Part(Agg::Count),
        ]
    );
    assert_eq!(g.hidden, 2);
    let two = gathered("SELECT AVG(a), AVG(b) FROM t");
    assert_eq!(
        two.columns[..2],
        [
            Column::Avg { sum: 2, count: 3 },
            Column::Avg { sum: 4, count: 5 }
        ]
    );
    assert_eq!(g.group, Some(Vec::new()));
    assert_eq!(
        String::from_utf8(g.sql).unwrap(),
        "SELECT COUNT(*), MAX(id) AS top, AVG(v) a , SUM(v), COUNT(v) FROM orders WHERE v = 'x'"
    );
    assert_eq!(merging(b"SELECT * FROM orders"), Ok(Merge::Concat));
}

#[test]
fn group_by_result_columns_merges_groups() {
    let g = gathered(
        "SELECT t.g, COUNT(*) n, AVG(x) FROM t WHERE x > 0 GROUP BY g ORDER BY n DESC, 1 LIMIT 2 OFFSET 1",
    );
    assert_eq!(g.group, Some(vec![(0, false)]));
    assert_eq!(
        g.order,
        [
            (OrderKey::Name("n".into()), true),
            (OrderKey::Position(1), false)
        ]
    );
    assert_eq!((g.limit, g.offset), (Some(2), 1));
    // Every group from every shard: the limit applies to the merged groups.
    assert_eq!(
        String::from_utf8(g.sql).unwrap(),
        "SELECT t.g, COUNT(*) n, AVG(x) , SUM(x), COUNT(x) FROM t WHERE x > 0 GROUP BY g "
    );
    let g = gathered("SELECT a, b, SUM(x) FROM t GROUP BY 2 DESC, a");
    assert_eq!(g.group, Some(vec![(1, true), (0, false)]));
    assert_eq!(g.limit, None);
    for (sql, why) in [
        ("SELECT COUNT(*) FROM t GROUP BY g", "does not show"),
        ("SELECT g AS k, COUNT(*) FROM t GROUP BY k", "does not show"),
        ("SELECT g, h, COUNT(*) FROM t GROUP BY g", "neither grouped"),
        (
            "SELECT g, COUNT(*) FROM t GROUP BY g HAVING COUNT(*) > 1",
            "HAVING",
        ),
        (
            "SELECT g, COUNT(*) FROM t GROUP BY g WITH ROLLUP",
            "GROUP BY",
        ),
        ("SELECT g, COUNT(*) FROM t GROUP BY g + 1", "GROUP BY"),
        ("SELECT g, COUNT(DISTINCT x) FROM t GROUP BY g", "DISTINCT"),
        ("SELECT g, GROUP_CONCAT(x) FROM t GROUP BY g", "GROUP BY"),
        ("SELECT *, COUNT(*) FROM t GROUP BY g", "GROUP BY"),
        (
            "SELECT g, COUNT(*) FROM t JOIN u ON u.id = t.id GROUP BY g",
            "joins",
        ),
        (
            "SELECT g, COUNT(*) FROM t WHERE id IN (SELECT id FROM u) GROUP BY g",
            "subqueries",
        ),
        ("SELECT DISTINCT g, COUNT(*) FROM t GROUP BY g", "DISTINCT"),
        (
            "SELECT g, COUNT(*) FROM t GROUP BY g ORDER BY COUNT(*)",
            "GROUP BY",
        ),
    ] {
        let got = refused(sql);
        assert!(got.contains(why), "{sql}: {got}");
    }
}

#[test]
fn order_by_limit_and_offset_ask_each_shard_for_both() {
    let g = gathered("SELECT id, v FROM t WHERE x = 1 ORDER BY t.v DESC, 1 LIMIT 5 OFFSET 3");
    assert_eq!(
        g.order,
        [
            (OrderKey::Name("v".into()), true),
            (OrderKey::Position(1), false)
        ]
    );
    assert_eq!((g.limit, g.offset, g.keep), (Some(5), 3, 8));
    assert_eq!(
        String::from_utf8(g.sql).unwrap(),
        "SELECT id, v FROM t WHERE x = 1 ORDER BY t.v DESC, 1 LIMIT 8"
    );
    let g = gathered("SELECT * FROM t ORDER BY id LIMIT 10, 5");
    assert_eq!((g.limit, g.offset, g.keep), (Some(5), 10, 15));
    assert_eq!(g.group, None);
    for (sql, why) in [
        ("SELECT * FROM t ORDER BY id", "ORDER BY"),
        ("SELECT * FROM t LIMIT 5", "LIMIT"),
        ("SELECT * FROM t ORDER BY id + 1 LIMIT 5", "ORDER BY"),
        (
            "SELECT * FROM t ORDER BY id LIMIT 9000 OFFSET 2000",
            "ORDER BY",
        ),
        ("SELECT * FROM t ORDER BY id LIMIT 5 FOR UPDATE", "ORDER BY"),
        ("SELECT COUNT(*) FROM t ORDER BY 1 LIMIT 1", "aggregate"),
        ("SELECT COUNT(*) + 1 FROM t ORDER BY 1 LIMIT 1", "aggregate"),
        ("SELECT DISTINCT v FROM t ORDER BY v LIMIT 2", "DISTINCT"),
        ("SELECT COUNT(*), v FROM t", "aggregate"),
    ] {
        let got = refused(sql);
        assert!(got.contains(why), "{sql}: {got}");
    }
    assert_eq!(gather(b"SELECT 1"), Err(None));
}

#[test]
fn groups_combine_and_come_in_key_order() {
    let g = gathered("SELECT g, COUNT(*), SUM(x), MIN(x), AVG(x) FROM t GROUP BY g");
    let defs = [
        col("g", 3, 63),
        col("count(*)", 8, 63),
        col("sum(x)", 246, 63),
        col("min(x)", 246, 63),
        col("avg(x)", 246, 63),
        col("sum(x)", 246, 63),
        col("count(x)", 8, 63),
    ];
    let rows = vec![
        // Shard one.
        row(&[None, Some("1"), None, None, None, None, Some("0")]),
        row(&[
            Some("2"),
            Some("2"),
            Some("3.5"),
            Some("1.5"),
            Some("1.750000"),
            Some("3.5"),
            Some("2"),
        ]),
        row(&[
            Some("10"),
            Some("1"),
            Some("-1.0"),
            Some("-1.0"),
            Some("-1.00000"),
            Some("-1.0"),
            Some("1"),
        ]),
        // Shard two.
        row(&[
            Some("2"),
            Some("1"),
            Some("0.5"),
            Some("0.5"),
            Some("0.500000"),
            Some("0.5"),
            Some("1"),
        ]),
        row(&[
            Some("9"),
            Some("3"),
            Some("1.0"),
            Some("0.1"),
            Some("0.333333"),
            Some("1.0"),
            Some("3"),
        ]),
    ];
    let out = put_together(&g, &defs, rows).unwrap();
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        text(&out),
        [
            vec![None, s("1"), None, None, None],
            vec![s("2"), s("3"), s("4.0"), s("0.5"), s("1.333333")],
            vec![s("9"), s("3"), s("1.0"), s("0.1"), s("0.333333")],
            vec![s("10"), s("1"), s("-1.0"), s("-1.0"), s("-1.00000")],
        ]
    );
    // Ordered by an aggregate, then cut.
    let g =
        gathered("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC, g LIMIT 2 OFFSET 1");
    let defs = [col("g", 3, 63), col("n", 8, 63)];
    let rows = vec![
        row(&[Some("1"), Some("5")]),
        row(&[Some("2"), Some("1")]),
        row(&[Some("3"), Some("2")]),
        row(&[Some("2"), Some("3")]),
    ];
    let out = put_together(&g, &defs, rows).unwrap();
    assert_eq!(text(&out), [vec![s("2"), s("4")], vec![s("3"), s("2")]]);
}

#[test]
fn what_would_not_be_exact_is_refused() {
    let g = gathered("SELECT g, COUNT(*) FROM t GROUP BY g");
    let collated = [col("g", 253, 45), col("count(*)", 8, 63)];
    let err = put_together(&g, &collated, vec![row(&[Some("a"), Some("1")])]).unwrap_err();
    assert!(err.contains("collation"), "{err}");
    let binary = [col("g", 253, 63), col("count(*)", 8, 63)];
    let out = put_together(
        &g,
        &binary,
        vec![
            row(&[Some("b"), Some("1")]),
            row(&[Some("a"), Some("1")]),
            row(&[Some("b"), Some("2")]),
        ],
    )
    .unwrap();
    assert_eq!(out.len(), 2);
    let g = gathered("SELECT AVG(x) FROM t");
    let double = [
        col("avg(x)", 5, 63),
        col("sum(x)", 5, 63),
        col("count(x)", 8, 63),
    ];
    let err = put_together(
        &g,
        &double,
        vec![row(&[Some("0.5"), Some("0.5"), Some("1")])],
    );
    assert!(err.is_err(), "an AVG of floats");
    let g = gathered("SELECT SUM(x) FROM t");
    assert!(put_together(&g, &[col("sum(x)", 5, 63)], vec![row(&[Some("0.1")])]).is_err());
    assert!(put_together(&g, &[col("sum(x)", 253, 45)], vec![row(&[Some("a")])]).is_err());
    // Aggregates over no rows at all still make one row.
    let g = gathered("SELECT COUNT(*), SUM(x) FROM t");
    let out = put_together(&g, &[col("c", 8, 63), col("s", 246, 63)], Vec::new()).unwrap();
    assert_eq!(text(&out), [vec![Some("0".to_string()), None]]);
}

#[test]
fn averages_round_half_away_from_zero() {
    let avg = |sum: &str, count: i128, scale: u32| {
        String::from_utf8(
            Num::average(Num::parse(sum.as_bytes()).unwrap(), count, scale)
                .unwrap()
                .text(),
        )
        .unwrap()
    };
    assert_eq!(avg("5", 2, 4), "2.5000");
    assert_eq!(avg("2", 3, 4), "0.6667");
    assert_eq!(avg("-2", 3, 4), "-0.6667");
    assert_eq!(avg("1", 8, 4), "0.1250");
    assert_eq!(avg("1", 80000, 4), "0.0000");
    assert_eq!(avg("-1", 20000, 4), "-0.0001", "half away from zero");
    assert_eq!(avg("10.25", 2, 6), "5.125000");
    assert!(Num::average(Num::parse(b"1").unwrap(), 0, 4).is_none());
}

#[test]
fn values_order_as_the_server_orders_them() {
    use std::cmp::Ordering::*;
    let n = Compare::of(3, 63).unwrap();
    assert_eq!(n.cmp(Some(b"9"), Some(b"10")), Less);
    assert_eq!(n.cmp(Some(b"-1.5"), Some(b"-1.25")), Less);
    assert_eq!(n.cmp(None, Some(b"-100")), Less);
    assert_eq!(Compare::of(12, 8), Some(Compare::Bytes), "DATETIME");
    assert_eq!(Compare::of(253, 45), None, "utf8mb4 VARCHAR");
    assert_eq!(Compare::of(253, 63), Some(Compare::Bytes), "VARBINARY");
    assert_eq!(Compare::of(5, 63), None, "DOUBLE");
    assert_eq!(Num::parse(b"-0.05").unwrap().text(), b"-0.05");
    assert_eq!(Num::parse(b"12").unwrap().text(), b"12");
}

/// Found by the `shard` fuzz target: values past what an i128 holds (a DECIMAL(65) has
/// such) were compared as bytes, and only those, which is no order at all: `2` < `10`
/// as numbers, `10` < `1e39` and `1e39` < `2` as bytes. Rows came out of the sort in
/// the wrong order, and `sort_by` may panic on such a comparison.
#[test]
fn numbers_of_any_length_keep_an_order() {
    use std::cmp::Ordering::*;
    let n = Compare::Number;
    let big = format!("1{}", "0".repeat(39));
    let minus_big = format!("-{big}");
    let v = |s: &str| Some(s.as_bytes().to_vec());
    let cmp = |a: &str, b: &str| n.cmp(Some(a.as_bytes()), Some(b.as_bytes()));
    assert_eq!(cmp("10", &big), Less);
    assert_eq!(cmp("2", &big), Less);
    assert_eq!(cmp(&minus_big, "-2"), Less);
    assert_eq!(cmp(&big, &format!("{big}.5")), Less);
    assert_eq!(cmp("0.5", "0.51"), Less);
    assert_eq!(cmp("-0.0", "0"), Equal);
    assert_eq!(cmp("007", "7.000"), Equal);
    // The fuzzer's input: `5` <= `12.0` <= text no server sends for a number, which
    // therefore can't be below `5`.
    assert_eq!(cmp("5", "12.0"), Less);
    assert_eq!(cmp("12.0", "2\0\0"), Less);
    assert_eq!(cmp("5", "2\0\0"), Less);

    let g = gathered("SELECT a FROM t ORDER BY a LIMIT 10");
    let defs = [col("a", 246, 63)];
    let rows = [big.as_str(), "10", "2", "-3", minus_big.as_str(), "0.5"]
        .iter()
        .map(|s| vec![v(s)])
        .collect();
    let out = put_together(&g, &defs, rows).unwrap();
    let order: Vec<Option<String>> = text(&out).into_iter().map(|mut r| r.remove(0)).collect();
    assert_eq!(
        order,
        [minus_big.as_str(), "-3", "0.5", "2", "10", big.as_str()].map(|s| Some(s.to_owned()))
    );
}
