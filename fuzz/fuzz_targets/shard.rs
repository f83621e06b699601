//! A read over several shards put together from the shards' answers: the servers'
//! column types and text values are outside bytes, combined, compared and sorted by
//! Sluice. Input: a byte picking the statement, a byte per column picking its type,
//! then the values as a text-protocol row (split into rows of the column count).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice::shard::gather::{put_together, ColumnInfo};
use sluice::shard::merge::Compare;
use sluice::shard::{merging, Merge};
use sluice_wire::resultset::text_values;
use std::cmp::Ordering;

const STATEMENTS: [&str; 4] = [
    "SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC, g LIMIT 2 OFFSET 1",
    "SELECT a, b FROM t ORDER BY b DESC, a LIMIT 5",
    "SELECT g, SUM(v), AVG(v), MIN(v), MAX(v) FROM t GROUP BY g ORDER BY g",
    "SELECT COUNT(*), SUM(v), AVG(v) FROM t",
];

/// The names a server gives each statement's columns, which its ORDER BY finds them
/// by (columns past these, added by Sluice's rewrite, keep made-up names).
const NAMES: [&[&str]; 4] = [
    &["g", "n"],
    &["a", "b"],
    &["g", "SUM(v)", "AVG(v)", "MIN(v)", "MAX(v)"],
    &["COUNT(*)", "SUM(v)", "AVG(v)"],
];

/// Column types a server sends: integers, DECIMAL, DOUBLE, strings, DATETIME, BLOB.
const TYPES: [u8; 8] = [3, 8, 246, 5, 253, 254, 12, 252];

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let pick = usize::from(which) % STATEMENTS.len();
    let sql = STATEMENTS[pick];
    let Ok(Merge::Gathered(g)) = merging(sql.as_bytes()) else {
        panic!("{sql} is planned to be gathered");
    };
    let width = match g.columns.len() {
        0 => 2,
        n => n,
    };
    if rest.len() < width {
        return;
    }
    let (types, values) = rest.split_at(width);
    let defs: Vec<ColumnInfo> = types
        .iter()
        .enumerate()
        .map(|(i, &t)| ColumnInfo {
            name: NAMES[pick]
                .get(i)
                .map_or_else(|| format!("c{i}"), |n| (*n).to_owned())
                .into_bytes(),
            column_type: TYPES[usize::from(t) % TYPES.len()],
            charset: if t & 0x80 != 0 { 45 } else { 63 },
        })
        .collect();
    let Ok(values) = text_values(values) else {
        return;
    };
    // Rows are sorted by these comparisons, which must be an order (`sort_by` may
    // panic on one that is not, and sorts wrongly at best).
    if let [a, b, c, ..] = values[..] {
        for compare in [Compare::Number, Compare::Bytes] {
            let cmp = |x: Option<&[u8]>, y: Option<&[u8]>| compare.cmp(x, y);
            for (x, y) in [(a, b), (b, c), (a, c)] {
                assert_eq!(cmp(x, y), cmp(y, x).reverse(), "{compare:?} {x:?} {y:?}");
            }
            for (x, y, z) in [
                (a, b, c),
                (a, c, b),
                (b, a, c),
                (b, c, a),
                (c, a, b),
                (c, b, a),
            ] {
                if cmp(x, y) != Ordering::Greater && cmp(y, z) != Ordering::Greater {
                    assert_ne!(
                        cmp(x, z),
                        Ordering::Greater,
                        "{compare:?} orders {x:?} <= {y:?} <= {z:?} but {x:?} > {z:?}"
                    );
                }
            }
        }
    }
    let rows: Vec<Vec<Option<Vec<u8>>>> = values
        .chunks(width)
        .map(|r| r.iter().map(|v| v.map(<[u8]>::to_vec)).collect())
        .collect();
    if let Ok(out) = put_together(&g, &defs, rows) {
        let shown = width - g.hidden;
        assert!(out.iter().all(|r| r.len() == shown));
        if let Some(limit) = g.limit {
            assert!(out.len() as u64 <= limit);
        }
    }
});
