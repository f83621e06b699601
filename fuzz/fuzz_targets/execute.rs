//! Prepared statements on the wire: a client's `COM_STMT_EXECUTE` (its parameter types
//! and values, which the cache keys by and sharding and row-level invalidation read
//! key values from) and the server's prepare-OK. The first byte picks the statement's
//! parameter count and the key column's type; the rest is the payload.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice::cache::table_keys::{rows_by_key, Shapes, TableKey};
use sluice::classify::keys::canon::{bound, KeyType};
use sluice::classify::sql::TableRef;
use sluice_wire::statement::{request_stmt_id, set_stmt_id, Execute, PrepareOk};

/// Statements whose `?` decide the key of `t` (column `id`), by parameter count.
const STATEMENTS: [&str; 4] = [
    "SELECT v FROM t WHERE id = ?",
    "UPDATE t SET v = ? WHERE id = ?",
    "SELECT v FROM t WHERE id IN (?, ?, ?)",
    "INSERT INTO t (id, v) VALUES (?, ?), (?, ?)",
];

fuzz_target!(|data: &[u8]| {
    let Some((&control, payload)) = data.split_first() else {
        return;
    };
    let which = usize::from(control & 3);
    // The statement's own count, or any count: the one Sluice holds may be wrong for
    // the payload the client sent.
    let params: u16 = match control & 4 {
        0 => [1, 2, 3, 4][which],
        _ => u16::from(control >> 3),
    };

    if let Some(ok) = PrepareOk::parse(payload) {
        assert_eq!(payload[0], 0);
        assert_eq!(Some(ok.stmt_id), request_stmt_id(payload));
    }
    let mut renamed = payload.to_vec();
    set_stmt_id(&mut renamed, 0xdead_beef);
    if payload.len() >= 5 {
        assert_eq!(request_stmt_id(&renamed), Some(0xdead_beef));
        assert_eq!(renamed[5..], payload[5..]);
    } else {
        assert_eq!(renamed, payload);
    }

    let Some(execute) = Execute::parse(payload, params) else {
        return;
    };
    assert_eq!(Some(execute.stmt_id), request_stmt_id(payload));
    assert!(payload.ends_with(execute.values));
    if params > 0 {
        // "the NULL bitmap ((params + 7) / 8 bytes) ... the types (2 bytes each)"
        assert_eq!(execute.null_bitmap.len(), usize::from(params).div_ceil(8));
        if let Some(types) = execute.types {
            assert_eq!(types.len(), 2 * usize::from(params));
        }
        assert_eq!(
            Execute::binds_types(payload, params),
            Some(execute.types.is_some())
        );
    }

    // The types this execute carries, else the ones a previous one bound: the same
    // bytes at the front of the values, as a client that lies might send.
    let types = match execute.types {
        Some(t) => t.to_vec(),
        None => {
            let n = (2 * usize::from(params)).min(execute.values.len());
            execute.values[..n].to_vec()
        }
    };
    if execute.types.is_none() && types.len() == 2 * usize::from(params) {
        if let Some(with) = Execute::with_types(payload, params, &types) {
            // "with `types` bound in": the same execute, now carrying them.
            let again = Execute::parse(&with, params).expect("an execute with its types");
            assert_eq!(again.types, Some(types.as_slice()));
            assert_eq!(again.values, execute.values);
            assert_eq!(again.null_bitmap, execute.null_bitmap);
        }
    }
    let Some(values) = execute.bound(&types) else {
        return;
    };
    assert_eq!(values.len(), types.len() / 2);
    let key_type = match control >> 6 {
        0 | 1 => KeyType::Integer,
        2 => KeyType::Ci,
        _ => KeyType::Binary,
    };
    for v in &values {
        let _ = bound(key_type, v);
    }
    let key = TableKey {
        column: "id".into(),
        position: 0,
        key_type,
        signed: control & 0x20 == 0,
        columns: 2,
        triggers: false,
        other_unique: control & 0x10 != 0,
        prepared: Shapes::default(),
    };
    let t = TableRef {
        schema: "db".into(),
        table: "t".into(),
    };
    let sql = STATEMENTS[which].as_bytes();
    let write = which % 2 == 1;
    if let Some(rows) = rows_by_key(&key, &t, sql, Some(&values), write) {
        assert_eq!(rows.table, t);
    }
});
