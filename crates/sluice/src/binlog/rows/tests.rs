//! Row images built by hand the way a server writes them, walked to a key column.

use super::*;

/// A length-encoded integer as binlog events write counts.
fn lenenc(n: usize) -> Vec<u8> {
    if n < 251 {
        vec![n as u8]
    } else {
        let mut b = vec![0xfc];
        b.extend_from_slice(&(n as u16).to_le_bytes());
        b
    }
}

/// A table map's column part: count, types, metadata, null bitmap.
pub(in crate::binlog) fn map_bytes(columns: &[(u8, &[u8])]) -> Vec<u8> {
    let mut b = lenenc(columns.len());
    b.extend(columns.iter().map(|c| c.0));
    let meta: Vec<u8> = columns.iter().flat_map(|c| c.1.iter().copied()).collect();
    b.extend(lenenc(meta.len()));
    b.extend(meta);
    b.extend(vec![0xff; columns.len().div_ceil(8)]);
    b
}

fn table(columns: &[(u8, &[u8])]) -> Arc<TableColumns> {
    Arc::new(TableColumns::parse(&map_bytes(columns)).expect("a valid table map"))
}

fn bitmap(width: usize, set: &[usize]) -> Vec<u8> {
    let mut b = vec![0u8; width.div_ceil(8)];
    for &i in set {
        b[i / 8] |= 1 << (i % 8);
    }
    b
}

/// One image of the present columns, in order: None is NULL, Some the value's bytes as
/// written (length prefix included).
pub(in crate::binlog) fn image(values: &[Option<&[u8]>]) -> Vec<u8> {
    let mut b = vec![0u8; values.len().div_ceil(8)];
    for (i, v) in values.iter().enumerate() {
        match v {
            None => b[i / 8] |= 1 << (i % 8),
            Some(bytes) => b.extend_from_slice(bytes),
        }
    }
    b
}

/// A rows body from its column count on: the present bitmap (two for updates), then
/// the images.
pub(in crate::binlog) fn body(
    width: usize,
    present: &[usize],
    after: Option<&[usize]>,
    images: &[Vec<u8>],
) -> Vec<u8> {
    let mut b = lenenc(width);
    b.extend(bitmap(width, present));
    if let Some(after) = after {
        b.extend(bitmap(width, after));
    }
    for i in images {
        b.extend_from_slice(i);
    }
    b
}

fn all(width: usize) -> Vec<usize> {
    (0..width).collect()
}

fn images(columns: &Arc<TableColumns>, kind: RowsKind, body: &[u8]) -> RowImages {
    RowImages::new(columns.clone(), kind, body).expect("under the bound")
}

fn int(raw: u64, width: u8) -> ColumnValue {
    ColumnValue::Int { raw, width }
}

fn bytes(b: &[u8]) -> ColumnValue {
    ColumnValue::Bytes(b.to_vec())
}

/// A value of `n` bytes that a wrong size would misread as something else.
fn filler(n: usize) -> Vec<u8> {
    vec![0xa5; n]
}

fn prefixed(prefix: usize, content: &[u8]) -> Vec<u8> {
    let mut b = content.len().to_le_bytes()[..prefix].to_vec();
    b.extend_from_slice(content);
    b
}

/// Type, metadata, a value as written and what `values` makes of it: every layout the
/// walker knows, with the edges of each.
fn samples() -> Vec<(u8, Vec<u8>, Vec<u8>, ColumnValue)> {
    let other = |ty: u8, meta: &[u8], n: usize| (ty, meta.to_vec(), filler(n), ColumnValue::Other);
    let mut s = vec![
        (TINY, vec![], vec![0xfe], int(0xfe, 1)),
        (SHORT, vec![], vec![0x34, 0x12], int(0x1234, 2)),
        (INT24, vec![], vec![1, 2, 0x83], int(0x83_0201, 3)),
        (LONG, vec![], vec![0xff; 4], int(0xffff_ffff, 4)),
        (
            LONGLONG,
            vec![],
            vec![0xfe; 8],
            int(0xfefe_fefe_fefe_fefe, 8),
        ),
        other(FLOAT, &[4], 4),
        other(DOUBLE, &[8], 8),
        other(NULL, &[], 0),
        other(TIMESTAMP, &[], 4),
        other(DATE, &[], 3),
        other(TIME, &[], 3),
        other(DATETIME, &[], 8),
        other(YEAR, &[], 1),
        other(NEWDATE, &[], 3),
        (VARCHAR, vec![10, 0], prefixed(1, b"abc"), bytes(b"abc")),
        (VARCHAR, vec![255, 0], prefixed(1, b"abc"), bytes(b"abc")),
        (VARCHAR, vec![0, 1], prefixed(2, b"abc"), bytes(b"abc")),
        (
            VARCHAR,
            vec![0x2c, 1],
            prefixed(2, &[0x20; 300]),
            bytes(&[0x20; 300]),
        ),
        (VARCHAR, vec![0, 0], prefixed(1, b""), bytes(b"")),
        // (bits in the last byte, whole bytes)
        other(BIT, &[5, 1], 2),
        other(BIT, &[1, 0], 1),
        other(BIT, &[0, 1], 1),
        other(BIT, &[7, 7], 8),
        other(BIT, &[0, 8], 8),
        other(NEWDECIMAL, &[20, 6], 10),
        other(NEWDECIMAL, &[65, 30], 30),
        other(NEWDECIMAL, &[9, 0], 4),
        other(NEWDECIMAL, &[10, 10], 5),
        other(NEWDECIMAL, &[1, 0], 1),
        other(NEWDECIMAL, &[38, 38], 17),
        (BLOB, vec![1], prefixed(1, b"blob"), ColumnValue::Other),
        (BLOB, vec![2], prefixed(2, &[7; 300]), ColumnValue::Other),
        (BLOB, vec![3], prefixed(3, b"x"), ColumnValue::Other),
        (BLOB, vec![4], prefixed(4, b"xyz"), ColumnValue::Other),
        (GEOMETRY, vec![4], prefixed(4, &[1; 25]), ColumnValue::Other),
        (JSON, vec![4], prefixed(4, b"{}"), ColumnValue::Other),
        (
            BLOB_COMPRESSED,
            vec![2],
            prefixed(2, b"zz"),
            ColumnValue::Other,
        ),
        (
            VARCHAR_COMPRESSED,
            vec![100, 0],
            prefixed(1, b"z"),
            ColumnValue::Other,
        ),
        (
            VARCHAR_COMPRESSED,
            vec![0, 4],
            prefixed(2, b"z"),
            ColumnValue::Other,
        ),
        // CHAR(10); CHAR(255); then CHAR of 256 and 1020 bytes, length folded.
        (STRING, vec![STRING, 10], prefixed(1, b"hi"), bytes(b"hi")),
        (STRING, vec![STRING, 255], prefixed(1, b"hi"), bytes(b"hi")),
        (STRING, vec![0xee, 0x00], prefixed(2, b"hi"), bytes(b"hi")),
        (
            STRING,
            vec![0xce, 0xfc],
            prefixed(2, &[9; 400]),
            bytes(&[9; 400]),
        ),
        (
            VAR_STRING,
            vec![VAR_STRING, 20],
            prefixed(1, b"v"),
            bytes(b"v"),
        ),
        other(STRING, &[ENUM, 1], 1),
        other(STRING, &[ENUM, 2], 2),
        other(ENUM, &[ENUM, 2], 2),
        other(STRING, &[SET, 1], 1),
        other(STRING, &[SET, 3], 3),
        other(STRING, &[SET, 8], 8),
    ];
    for fsp in 0..=6u8 {
        let extra = usize::from(fsp).div_ceil(2);
        s.push(other(TIMESTAMP2, &[fsp], 4 + extra));
        s.push(other(DATETIME2, &[fsp], 5 + extra));
        s.push(other(TIME2, &[fsp], 3 + extra));
    }
    s
}

/// Two rows of (`sample`, key) and the key's values read back.
fn key_after(ty: u8, meta: &[u8], value: &[u8]) -> Option<Vec<ColumnValue>> {
    let t = table(&[(ty, meta), (LONG, &[])]);
    let rows = [
        image(&[Some(value), Some(&7u32.to_le_bytes())]),
        image(&[Some(value), Some(&8u32.to_le_bytes())]),
    ];
    images(&t, RowsKind::Write, &body(2, &all(2), None, &rows)).values(1)
}

#[test]
fn a_key_after_each_type_is_read() {
    for (ty, meta, value, _) in samples() {
        assert_eq!(
            key_after(ty, &meta, &value),
            Some(vec![int(7, 4), int(8, 4)]),
            "type {ty} metadata {meta:?}"
        );
        // One byte more or less is noticed, so the size above is the one walked.
        let mut longer = value.clone();
        longer.push(0);
        assert_ne!(
            key_after(ty, &meta, &longer),
            Some(vec![int(7, 4), int(8, 4)]),
            "type {ty} metadata {meta:?} with a byte more"
        );
    }
}

#[test]
fn a_key_after_every_type_at_once_and_each_value() {
    let samples = samples();
    let mut columns: Vec<(u8, &[u8])> = samples.iter().map(|s| (s.0, &s.1[..])).collect();
    columns.push((LONGLONG, &[]));
    let t = table(&columns);
    let width = columns.len();
    let key = width - 1;
    let mut rows = Vec::new();
    for k in [u64::MAX, 1, 1 << 40] {
        let key_bytes = k.to_le_bytes();
        let mut values: Vec<Option<&[u8]>> = samples.iter().map(|s| Some(&s.2[..])).collect();
        values.push(Some(&key_bytes));
        rows.push(image(&values));
    }
    let rows = images(&t, RowsKind::Write, &body(width, &all(width), None, &rows));
    assert_eq!(rows.column_count(), width);
    assert_eq!(
        rows.values(key),
        Some(vec![int(u64::MAX, 8), int(1, 8), int(1 << 40, 8)])
    );
    for (i, (ty, meta, _, expected)) in samples.iter().enumerate() {
        assert_eq!(
            rows.values(i),
            Some(vec![expected.clone(); 3]),
            "type {ty} metadata {meta:?}"
        );
    }
}

#[test]
fn types_reported_are_the_real_ones() {
    let t = table(&[
        (LONG, &[]),
        (STRING, &[STRING, 10]),
        (STRING, &[0xce, 0xfc]),
        (STRING, &[ENUM, 1]),
        (STRING, &[SET, 2]),
        (VARCHAR, &[10, 0]),
        (YEAR, &[]),
        (DECIMAL, &[]),
    ]);
    let rows = images(&t, RowsKind::Write, &body(8, &all(8), None, &[]));
    let types: Vec<_> = (0..9).map(|i| rows.column_type(i)).collect();
    let expected = [LONG, STRING, STRING, ENUM, SET, VARCHAR, YEAR, DECIMAL];
    assert_eq!(types[..8], expected.map(Some));
    assert_eq!(types[8], None);
    assert_eq!(rows.values(0), Some(vec![]), "no rows, no values");
}

#[test]
fn values_of_unknown_layout_cannot_be_walked_past() {
    for (ty, meta) in [
        (DECIMAL, vec![]),
        (TIMESTAMP2, vec![7]),
        (BLOB, vec![0]),
        (BLOB, vec![5]),
        (BIT, vec![8, 0]),
        (NEWDECIMAL, vec![5, 6]),
        (FLOAT, vec![8]),
        (STRING, vec![1, 5]),
        (STRING, vec![VARCHAR, 5]),
        (STRING, vec![ENUM, 3]),
        (STRING, vec![SET, 9]),
        (STRING, vec![LONG | 0x30, 5]),
    ] {
        let t = table(&[(LONG, &[]), (ty, &meta), (LONG, &[])]);
        let row = |key: u32, middle: Option<&[u8]>| {
            image(&[Some(&key.to_le_bytes()), middle, Some(&key.to_le_bytes())])
        };
        let walkable = body(3, &all(3), None, &[row(1, None), row(2, None)]);
        let rows = images(&t, RowsKind::Write, &walkable);
        assert_eq!(rows.column_type(1), Some(ty));
        // A NULL needs no size: all is read.
        assert_eq!(
            rows.values(2),
            Some(vec![int(1, 4), int(2, 4)]),
            "{ty} {meta:?}"
        );
        assert_eq!(rows.values(1), Some(vec![ColumnValue::Null; 2]));
        let stuck = body(3, &all(3), None, &[row(1, Some(&[1, 2])), row(2, None)]);
        let rows = images(&t, RowsKind::Write, &stuck);
        assert_eq!(rows.values(2), None, "{ty} {meta:?}");
        // Nor before it: where the next row starts is not known.
        assert_eq!(rows.values(0), None, "{ty} {meta:?}");
    }
}

#[test]
fn a_type_of_unknown_metadata_hides_the_layout_of_the_columns_after_it() {
    let t = table(&[(LONG, &[]), (20, &[]), (LONG, &[])]);
    assert_eq!(t.columns[2].layout, None);
    let row = |k: u32| image(&[Some(&k.to_le_bytes()), None, Some(&k.to_le_bytes())]);
    let rows = images(
        &t,
        RowsKind::Write,
        &body(3, &all(3), None, &[row(4), row(5)]),
    );
    assert_eq!(rows.column_type(2), Some(LONG));
    assert_eq!(rows.values(2), None);
    // Its metadata may have been in the block: it is not checked against what is left.
    let mut map = map_bytes(&[(LONG, &[]), (249, &[]), (VARCHAR, &[5, 0])]);
    assert!(TableColumns::parse(&map).is_some());
    // Known types whose metadata does not add up to the block are refused.
    map = map_bytes(&[(LONG, &[]), (VARCHAR, &[5, 0, 0])]);
    assert_eq!(TableColumns::parse(&map), None);
    map = map_bytes(&[(LONG, &[]), (VARCHAR, &[5])]);
    assert_eq!(TableColumns::parse(&map), None);
}

#[test]
fn nulls_count_only_present_columns() {
    // Nine columns so that the null bitmap of a full image takes two bytes.
    let mut columns: Vec<(u8, &[u8])> = vec![(VARCHAR, &[20, 0]); 8];
    columns.push((LONG, &[]));
    let t = table(&columns);
    let mut full: Vec<Option<&[u8]>> = vec![None; 8];
    full[3] = Some(b"\x02ab");
    full.push(Some(&[9, 0, 0, 0]));
    let mut null_key = full.clone();
    null_key[8] = None;
    let rows = [image(&full), image(&null_key)];
    let rows = images(&t, RowsKind::Write, &body(9, &all(9), None, &rows));
    assert_eq!(rows.values(8), Some(vec![int(9, 4), ColumnValue::Null]));
    assert_eq!(rows.values(3), Some(vec![bytes(b"ab"); 2]));
    // Only columns 3 and 8 present: a one-byte null bitmap for two columns.
    let some = [
        image(&[Some(b"\x01x"), Some(&[3, 0, 0, 0])]),
        image(&[None, None]),
    ];
    let rows = images(&t, RowsKind::Delete, &body(9, &[3, 8], None, &some));
    assert_eq!(rows.values(8), Some(vec![int(3, 4), ColumnValue::Null]));
    assert_eq!(rows.values(0), None, "column 0 is not in the images");
}

/// (a LONG, b VARCHAR(10), key LONGLONG)
fn abk() -> Arc<TableColumns> {
    table(&[(LONG, &[]), (VARCHAR, &[10, 0]), (LONGLONG, &[])])
}

fn k(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

#[test]
fn updates_give_before_and_after_values() {
    let t = abk();
    let one = 1u32.to_le_bytes();
    let rows = [
        image(&[Some(&one), Some(b"\x01x"), Some(&k(10))]),
        image(&[Some(&one), Some(b"\x01y"), Some(&k(11))]),
        image(&[Some(&one), None, Some(&k(20))]),
        image(&[Some(&one), Some(b"\x01z"), Some(&k(20))]),
    ];
    let full = images(
        &t,
        RowsKind::Update,
        &body(3, &all(3), Some(&all(3)), &rows),
    );
    let keys = [10, 11, 20, 20].map(|v| int(v, 8));
    assert_eq!(full.values(2), Some(keys.to_vec()));
    assert_eq!(
        full.values(1),
        Some(vec![
            bytes(b"x"),
            bytes(b"y"),
            ColumnValue::Null,
            bytes(b"z")
        ])
    );
}

#[test]
fn minimal_images_hold_only_some_columns() {
    let t = abk();
    // UPDATE ... SET b: the key before, b after.
    let rows = [
        image(&[Some(&k(10))]),
        image(&[Some(b"\x01y")]),
        image(&[Some(&k(20))]),
        image(&[None]),
    ];
    let update = images(&t, RowsKind::Update, &body(3, &[2], Some(&[1]), &rows));
    assert_eq!(update.values(2), Some(vec![int(10, 8), int(20, 8)]));
    assert_eq!(update.values(1), None, "b is not in the before image");
    // UPDATE ... SET key: the key before and after.
    let rows = [image(&[Some(&k(10))]), image(&[Some(&k(12))])];
    let update = images(&t, RowsKind::Update, &body(3, &[2], Some(&[2]), &rows));
    assert_eq!(update.values(2), Some(vec![int(10, 8), int(12, 8)]));
    // DELETE: the key only.
    let rows = [image(&[Some(&k(5))]), image(&[Some(&k(6))])];
    let delete = images(&t, RowsKind::Delete, &body(3, &[2], None, &rows));
    assert_eq!(delete.values(2), Some(vec![int(5, 8), int(6, 8)]));
    assert_eq!(delete.values(0), None);
    // An INSERT that left the key out (to its default) cannot be keyed.
    let rows = [image(&[Some(&1u32.to_le_bytes()), Some(b"\x01a")])];
    let write = images(&t, RowsKind::Write, &body(3, &[0, 1], None, &rows));
    assert_eq!(write.values(2), None);
    assert_eq!(write.values(1), Some(vec![bytes(b"a")]));
}

#[test]
fn a_cut_body_gives_whole_rows_or_nothing() {
    let samples = samples();
    let mut columns: Vec<(u8, &[u8])> = samples.iter().map(|s| (s.0, &s.1[..])).collect();
    columns.push((LONGLONG, &[]));
    let t = table(&columns);
    let width = columns.len();
    let mut rows = Vec::new();
    for key in 0..3u64 {
        let key_bytes = key.to_le_bytes();
        let mut values: Vec<Option<&[u8]>> = samples.iter().map(|s| Some(&s.2[..])).collect();
        values.push(Some(&key_bytes));
        rows.push(image(&values));
        rows.push(image(&values));
    }
    for kind in [RowsKind::Write, RowsKind::Update] {
        let after = (kind == RowsKind::Update).then(|| all(width));
        let full = body(width, &all(width), after.as_deref(), &rows);
        let keys: Vec<_> = [0, 0, 1, 1, 2, 2].map(|k| int(k, 8)).to_vec();
        let per_row = if kind == RowsKind::Update { 2 } else { 1 };
        let head = full.len() - rows.iter().map(Vec::len).sum::<usize>();
        for cut in 0..full.len() {
            let got = images(&t, kind, &full[..cut]).values(width - 1);
            let done = cut
                .checked_sub(head)
                .filter(|n| n % (rows[0].len() * per_row) == 0)
                .map(|n| n / rows[0].len());
            assert_eq!(
                got,
                done.map(|n| keys[..n].to_vec()),
                "{kind:?} cut at {cut}"
            );
        }
    }
}

/// A deterministic stream of bytes.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u8 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u8
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next()).collect()
    }
}

#[test]
fn garbage_never_panics() {
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let samples = samples();
    let mut columns: Vec<(u8, &[u8])> = samples.iter().map(|s| (s.0, &s.1[..])).collect();
    columns.push((LONGLONG, &[]));
    let t = table(&columns);
    let width = columns.len();
    let values: Vec<Option<&[u8]>> = samples.iter().map(|s| Some(&s.2[..])).collect();
    let valid = body(width, &all(width), Some(&all(width)), &[image(&values)]);
    for round in 0..3000 {
        let kind = [RowsKind::Write, RowsKind::Update, RowsKind::Delete][round % 3];
        // Random maps (of random bytes, or of random columns) and bodies, and a valid
        // body with a few bytes changed.
        let n = usize::from(noise.next());
        let map = if round % 2 == 0 {
            noise.bytes(n)
        } else {
            let picked: Vec<(u8, &[u8])> = (0..n % 12)
                .map(|_| columns[usize::from(noise.next()) % columns.len()])
                .collect();
            map_bytes(&picked)
        };
        if let Some(random) = TableColumns::parse(&map) {
            let mut body = lenenc(random.columns.len());
            let n = usize::from(noise.next()) * 4;
            body.extend(noise.bytes(n));
            let rows = images(&Arc::new(random), kind, &body);
            for i in 0..rows.column_count() + 2 {
                let _ = rows.values(i);
                let _ = rows.column_type(i);
            }
        }
        let mut changed = valid.clone();
        for _ in 0..1 + round % 4 {
            let at = usize::from(noise.next()) * changed.len() / 256;
            changed[at] = noise.next();
        }
        let rows = images(&t, kind, &changed);
        for i in [0, 14, 20, width - 1, width] {
            let _ = rows.values(i);
        }
    }
}

#[test]
fn images_past_the_bound_are_not_kept() {
    let t = abk();
    assert!(RowImages::new(t.clone(), RowsKind::Write, &[0; MAX_TABLE_IMAGE_BYTES + 1]).is_none());
    let half = MAX_TABLE_IMAGE_BYTES / 2;
    let first = images(&t, RowsKind::Write, &vec![0; half]);
    let kept = first.merged(images(&t, RowsKind::Delete, &vec![0; half]));
    let kept = kept.expect("at the bound");
    assert_eq!(kept.len(), MAX_TABLE_IMAGE_BYTES);
    assert_eq!(kept.merged(images(&t, RowsKind::Delete, &[0])), None);
    // Images of another layout of the table cannot be read with the first one's.
    let first = images(&t, RowsKind::Write, &[0]);
    let other = table(&[(LONG, &[]), (VARCHAR, &[10, 1]), (LONGLONG, &[])]);
    assert_eq!(
        first.clone().merged(images(&other, RowsKind::Write, &[0])),
        None
    );
    let both = first.merged(images(&abk(), RowsKind::Write, &[1]));
    assert_eq!(both.map(|b| b.events.len()), Some(2));
}

#[test]
fn integers_as_signed_or_unsigned() {
    let cases: &[(u64, u8, i128, i128)] = &[
        (0xff, 1, 255, -1),
        (0x7f, 1, 127, 127),
        (0x8000, 2, 32768, -32768),
        (0x80_0000, 3, 8_388_608, -8_388_608),
        (0xff_ffff, 3, 16_777_215, -1),
        (0xffff_fffe, 4, 4_294_967_294, -2),
        (u64::MAX, 8, u64::MAX as i128, -1),
        (1 << 63, 8, 1 << 63, i128::from(i64::MIN)),
        (42, 8, 42, 42),
        // Bits above the width are not the value's.
        (0x1_0000_0001, 4, 1, 1),
    ];
    for &(raw, width, unsigned, signed) in cases {
        let v = int(raw, width);
        assert_eq!(v.integer(false), Some(unsigned), "{v:?}");
        assert_eq!(v.integer(true), Some(signed), "{v:?}");
    }
    for v in [
        int(1, 0),
        int(1, 9),
        ColumnValue::Null,
        bytes(b"1"),
        ColumnValue::Other,
    ] {
        assert_eq!(v.integer(false), None, "{v:?}");
        assert_eq!(v.integer(true), None, "{v:?}");
    }
}

#[test]
fn debug_output_stays_short() {
    let rows = images(&abk(), RowsKind::Write, &[0; 5000]);
    let text = format!("{rows:?}");
    assert!(text.len() < 100, "{text}");
    assert!(text.contains("5000"), "{text}");
}
