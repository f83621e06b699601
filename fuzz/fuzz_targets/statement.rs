//! Everything else that reads a client's command or statement text before it is sent
//! on: the command classifier, KILL, CONNECTION_ID() and ROW_COUNT() rewriting, session
//! effects, key values for sharding and row-level invalidation, routing hints, the
//! shard planner and the origin comment. The first byte picks a few knobs (a KILL's
//! target id, the key column's position and type); the rest is the text.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice::binlog::origin;
use sluice::cache::table_keys::may_change_keys;
use sluice::classify::keys::canon::{canonical, KeyType};
use sluice::classify::keys::{insert_rows, key_values, KeyColumn, Keys, Value};
use sluice::classify::kill::{self, KillScan};
use sluice::classify::{classify, effects, identity, Action};
use sluice::router::rules;
use sluice::shard;

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, sql)) = data.split_first() else {
        return;
    };

    // A command payload as the client sent it: the command byte, then its arguments.
    match classify(data) {
        Action::Kill(k) => {
            assert_eq!(data[0], 0x0c);
            let id = u32::from_le_bytes([data[1], data[2], data[3], data[4]]);
            assert_eq!(k.target, kill::KillTarget::Session(u64::from(id)));
        }
        Action::Quit | Action::ChangeUser => assert!(matches!(data[0], 0x01 | 0x11)),
        _ => {}
    }

    // "Taken only when the text contains the word at all."
    let scan = kill::scan(sql);
    if !kill::may_kill(sql) {
        assert_eq!(scan, KillScan::None);
    }
    match &scan {
        KillScan::Leading(kills) => {
            assert!(!kills.is_empty());
            let mut before = 0;
            for (_, end) in kills {
                // "the offset of the `;` that ends it", which the session cuts the text at.
                assert!(*end >= before && *end <= sql.len());
                assert!(*end == sql.len() || sql[*end] == b';', "{end}");
                before = *end + 1;
            }
        }
        KillScan::Prepare { name, text, .. } => {
            // "the byte range of the string literal"
            assert!(text.start < text.end && text.end <= sql.len());
            assert!(matches!(sql[text.start], b'\'' | b'"'));
            assert!(!name.bytes().any(|b| b.is_ascii_uppercase()));
        }
        _ => {}
    }
    let (count, uses) = kill::name_uses(sql);
    assert!(uses.len() <= count);
    for u in &uses {
        let name = match u {
            kill::NameUse::Execute { name, .. } | kill::NameUse::Forget(name) => name,
        };
        assert!(!name.bytes().any(|b| b.is_ascii_uppercase()), "{name:?}");
    }

    if identity::processlist(sql).is_some() {
        let lower = sql.to_ascii_lowercase();
        assert!(lower.windows(11).any(|w| w == b"processlist"));
    }
    let id = u32::from(knobs) * 0x0101_0101;
    // "None when there is none to replace."
    if let Some(out) = identity::rewrite_connection_id(sql, id) {
        assert_ne!(out, sql);
    }
    let rows = i64::from(knobs as i8) - 1;
    if let Some(out) = identity::rewrite_row_count(sql, rows) {
        assert_ne!(out, sql);
    }

    let fx = effects::effects(sql);
    let vars = &fx.user_vars_assigned;
    // "lowercased, deduplicated"
    assert!(
        vars.iter()
            .all(|v| !v.bytes().any(|b| b.is_ascii_uppercase())),
        "{vars:?}"
    );
    for (i, v) in vars.iter().enumerate() {
        assert!(!vars[..i].contains(v), "{vars:?}");
    }
    let _ = effects::may_set_global(sql);
    let _ = rules::hint(sql);
    let plain = sluice::classify::sql::analyze(sql, None);
    let _ = rules::is_plain_read(sql, &fx, &plain);
    let _ = plain.qualified(Some("Db"));
    let _ = may_change_keys(sql);

    let col = KeyColumn {
        schema: "db",
        table: "t",
        column: "id",
        position: (knobs & 0x80 != 0).then_some(usize::from(knobs & 3)),
    };
    let key_type = match knobs >> 2 & 3 {
        0 => KeyType::Integer,
        1 => KeyType::Ci,
        _ => KeyType::Binary,
    };
    let params = sql.iter().filter(|&&b| b == b'?').count();
    let check_value = |v: &Value| {
        if let Value::Param(n) = v {
            // "The nth `?` of the statement"
            assert!(*n < params, "{n} of {params}");
        }
        let _ = canonical(key_type, v, None);
    };
    if let (Keys::Values(values), _) = key_values(sql, Some("Db"), &col) {
        values.iter().for_each(check_value);
    }
    if let Some(cut) = insert_rows(sql, Some("db"), &col) {
        // Byte ranges the shard splitter copies the statement by, in order.
        assert!(cut.head.start <= cut.head.end);
        let mut at = cut.head.end;
        for (range, value) in &cut.rows {
            assert!(at <= range.start && range.start < range.end, "{cut:?}");
            at = range.end;
            check_value(value);
        }
        assert!(
            at <= cut.tail.start && cut.tail.start <= cut.tail.end,
            "{cut:?}"
        );
        assert!(cut.tail.end <= sql.len(), "{cut:?}");
    }

    let _ = shard::unmergeable(sql);
    let _ = shard::merging(sql);
    let _ = shard::plan::gather(sql);

    // What Sluice sends names the connection the way the binlog scan reads it back.
    let thread = u32::from_le_bytes([knobs, knobs ^ 0x5a, knobs, 0]);
    match origin::mark(sql, thread) {
        Some(marked) => {
            assert!(origin::changes_rows(sql));
            assert_eq!(origin::thread_named(&marked), Some(thread));
        }
        None => assert!(!origin::changes_rows(sql)),
    }
    let _ = origin::thread_named(sql);
});
