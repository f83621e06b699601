//! The replication stream as a primary sends it: events decoded into batches, their row
//! images read by a table key, and the batches turned into cache invalidations, as the
//! binlog reader and the cache do. Decoding must refuse what it cannot read, never
//! panic, and what it delivers must keep the promises the cache relies on.
//!
//! Input: a control byte, then events, each as a little-endian u16 length and that many
//! bytes. The target writes each event's size field (a wrong one is refused before
//! anything else is read) and, with checksums on, appends a valid CRC-32, so that the
//! fuzzer's bytes reach the decoders behind those checks.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice::binlog::rows::ColumnValue;
use sluice::binlog::{fuzz_decode, Change};
use sluice::cache::invalidation::changed;
use sluice::cache::table_keys::TableKeys;
use sluice::classify::sql::TableRef;

const HEADER_LEN: usize = 19;
const FORMAT_DESCRIPTION: u8 = 15;

fuzz_target!(|data: &[u8]| {
    let Some((&control, mut rest)) = data.split_first() else {
        return;
    };
    let crc32 = control & 1 != 0;
    let mut events = Vec::new();
    if control & 2 != 0 {
        // Without a format description first the decoder reads events as a server
        // before 5.6 wrote them; with one, as the server it names.
        let old = control & 0x40 != 0;
        events.push(format_description(crc32, if old { 6 } else { 8 }));
    }
    let mut last: &[u8] = &[];
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let body = &rest[2..];
        last = &body[..len.min(body.len())];
        rest = &body[last.len()..];
        events.push(framed(last, crc32));
    }
    let (batches, _error) = fuzz_decode(events.iter().map(Vec::as_slice));

    let position = usize::from(control >> 2 & 3);
    let integer_key = control & 0x10 != 0;
    for batch in &batches {
        // A group delivers a batch only if something changed.
        assert!(!batch.changes.is_empty());
        let keys = TableKeys::default();
        for change in &batch.changes {
            let Change::Rows {
                schema,
                table,
                rows: Some(images),
            } = change
            else {
                continue;
            };
            let columns = images.column_count();
            for p in 0..=columns {
                assert_eq!(images.column_type(p).is_some(), p < columns);
                for v in images.values(p).unwrap_or_default() {
                    if let ColumnValue::Int { width, .. } = v {
                        let bits = u32::from(width) * 8;
                        // "The integer, read as signed or unsigned", of its width.
                        if let Some(u) = v.integer(false) {
                            assert!((0..1i128 << bits).contains(&u), "{v:?}");
                        }
                        if let Some(s) = v.integer(true) {
                            let half = 1i128 << (bits - 1);
                            assert!((-half..half).contains(&s), "{v:?}");
                        }
                    }
                }
            }
            let t = TableRef {
                schema: schema.to_ascii_lowercase(),
                table: table.to_ascii_lowercase(),
            };
            let answer = match control & 0x80 {
                0 => key_answer(columns, position + 1, integer_key),
                // The server's answer as the fuzzer writes it: the last event's bytes.
                _ => last.to_vec(),
            };
            keys.learn(&t, Some(&answer));
        }
        // Every table a batch changed is invalidated, by key or whole.
        if let Some(c) = changed(batch, &keys) {
            for change in &batch.changes {
                if let Change::Rows { schema, table, .. } = change {
                    let t = TableRef {
                        schema: schema.to_ascii_lowercase(),
                        table: table.to_ascii_lowercase(),
                    };
                    assert!(
                        c.tables.contains(&t) || c.rows.iter().any(|r| r.table == t),
                        "{t:?} changed but not invalidated"
                    );
                }
            }
        }
    }
});

/// `event` with its size field set to what it will be, and a valid checksum when on.
fn framed(event: &[u8], crc32: bool) -> Vec<u8> {
    let mut e = event.to_vec();
    if e.len() < HEADER_LEN {
        return e;
    }
    let size = e.len() + if crc32 { 4 } else { 0 };
    e[9..13].copy_from_slice(&(size as u32).to_le_bytes());
    if crc32 {
        let sum = crc32fast::hash(&e);
        e.extend_from_slice(&sum.to_le_bytes());
    }
    e
}

/// A MariaDB 10.11 format description, with 4-byte table ids when `table_post` is 6
/// (servers before 5.1.16).
fn format_description(crc32: bool, table_post: u8) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&4u16.to_le_bytes());
    let mut version = [0u8; 50];
    let name = b"10.11.19-MariaDB-log";
    version[..name.len()].copy_from_slice(name);
    body.extend_from_slice(&version);
    body.extend_from_slice(&0u32.to_le_bytes());
    body.push(HEADER_LEN as u8);
    let mut post = [0u8; 171];
    post[2 - 1] = 13; // QUERY
    post[4 - 1] = 8; // ROTATE
    post[19 - 1] = table_post; // TABLE_MAP
    for k in 20..=25 {
        post[k - 1] = table_post; // rows v0 and v1
    }
    for k in 30..=32 {
        post[k - 1] = 10; // rows v2
    }
    post[39 - 1] = 10; // PARTIAL_UPDATE_ROWS
    post[162 - 1] = 19; // GTID
    post[165 - 1] = 13; // QUERY_COMPRESSED
    for k in 166..=171 {
        post[k - 1] = if k < 169 { 10 } else { 8 };
    }
    body.extend_from_slice(&post);
    body.push(u8::from(crc32));
    let mut e = vec![0u8; HEADER_LEN];
    e[4] = FORMAT_DESCRIPTION;
    e.extend_from_slice(&body);
    // The format description always ends with a checksum slot, filled or not.
    let size = e.len() + 4;
    e[9..13].copy_from_slice(&(size as u32).to_le_bytes());
    let sum = if crc32 { crc32fast::hash(&e) } else { 0 };
    e.extend_from_slice(&sum.to_le_bytes());
    e
}

/// What the server would answer `TableKeys::query` with for a table of `columns`
/// columns whose primary key is column `ordinal` (from 1).
fn key_answer(columns: usize, ordinal: usize, integer: bool) -> Vec<u8> {
    let (data_type, column_type, charset) = match integer {
        true => ("bigint", "bigint(20)", "null"),
        false => ("varchar", "varchar(20)", "\"utf8mb4\""),
    };
    format!(
        r#"{{"namesakes": 1, "columns": {columns}, "keys": [["PRIMARY", "id", {ordinal}, "{data_type}", "{column_type}", {charset}]], "triggers": 0}}"#
    )
    .into_bytes()
}
