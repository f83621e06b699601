//! Row images of row-based binlog events, kept per table and transaction so the cache
//! can read one column (a table's key) out of them and invalidate by row, not by table.
//! Images stay raw until asked for: most are never read, and walking them needs types.

use bytes::Bytes;
use sluice_wire::lenenc::Reader;
use std::fmt;
use std::sync::Arc;

/// Row-image bytes kept per table and transaction. Past it the table's images are
/// dropped and the cache treats the whole table as changed: the reader must not hold
/// a bulk load's rows in memory, and for a change of thousands of rows dropping the
/// table's entries costs less than checking every key.
pub const MAX_TABLE_IMAGE_BYTES: usize = 256 * 1024;

/// Row-image bytes kept per transaction over all its tables, so that a transaction
/// touching thousands of tables does not hold thousands of times the table bound.
/// Tables past it fall back to whole-table invalidation like tables over their own.
pub const MAX_GROUP_IMAGE_BYTES: usize = 4 * 1024 * 1024;

/// Column type codes of a table map (MySQL's `enum_field_types`).
pub mod types {
    pub const DECIMAL: u8 = 0;
    pub const TINY: u8 = 1;
    pub const SHORT: u8 = 2;
    pub const LONG: u8 = 3;
    pub const FLOAT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const NULL: u8 = 6;
    pub const TIMESTAMP: u8 = 7;
    pub const LONGLONG: u8 = 8;
    pub const INT24: u8 = 9;
    pub const DATE: u8 = 10;
    pub const TIME: u8 = 11;
    pub const DATETIME: u8 = 12;
    pub const YEAR: u8 = 13;
    pub const NEWDATE: u8 = 14;
    pub const VARCHAR: u8 = 15;
    pub const BIT: u8 = 16;
    pub const TIMESTAMP2: u8 = 17;
    pub const DATETIME2: u8 = 18;
    pub const TIME2: u8 = 19;
    /// MariaDB's `COMPRESSED` columns: laid out like BLOB and VARCHAR, the bytes
    /// compressed.
    pub const BLOB_COMPRESSED: u8 = 140;
    pub const VARCHAR_COMPRESSED: u8 = 141;
    pub const JSON: u8 = 245;
    pub const NEWDECIMAL: u8 = 246;
    pub const ENUM: u8 = 247;
    pub const SET: u8 = 248;
    pub const BLOB: u8 = 252;
    pub const VAR_STRING: u8 = 253;
    pub const STRING: u8 = 254;
    pub const GEOMETRY: u8 = 255;
}

use types::*;

/// A value of one column in a row image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnValue {
    Null,
    /// TINY, SHORT, INT24, LONG, LONGLONG (YEAR is not: it is `Other`): the raw
    /// little-endian bytes zero-extended, with the width in bytes. Signedness is not in
    /// the table map by default, so the caller decides.
    Int {
        raw: u64,
        width: u8,
    },
    /// VARCHAR, VAR_STRING, STRING (CHAR and BINARY, not ENUM or SET): the bytes after
    /// the length prefix, as the image holds them. Servers strip a CHAR's trailing
    /// spaces and a BINARY's trailing 0x00 bytes from images: 'b' in a BINARY(4) is
    /// `b"b"` here, not the `b"b\0\0\0"` a SELECT gives. A VARCHAR keeps its spaces.
    Bytes(Vec<u8>),
    /// Any other type (the caller never keys on these).
    Other,
}

impl ColumnValue {
    /// The integer, read as signed or unsigned; None for non-integers and NULL.
    pub fn integer(&self, signed: bool) -> Option<i128> {
        let ColumnValue::Int { raw, width } = *self else {
            return None;
        };
        if !(1..=8).contains(&width) {
            return None;
        }
        let bits = u32::from(width) * 8;
        let raw = if bits == 64 {
            raw
        } else {
            raw & ((1u64 << bits) - 1)
        };
        if signed && (raw >> (bits - 1)) & 1 == 1 {
            Some(i128::from(raw) - (1i128 << bits))
        } else {
            Some(i128::from(raw))
        }
    }
}

/// How a column's value is laid out in an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Fixed(usize),
    /// A little-endian length of this many bytes, then that many bytes.
    Prefixed(u8),
}

/// What `values` makes of a column's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int(u8),
    Bytes,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Column {
    ty: u8,
    /// None when the size of a value cannot be worked out: unknown types, odd
    /// metadata, or metadata lost to an earlier unknown type. Images cannot be walked
    /// past a value of such a column.
    layout: Option<Layout>,
    kind: Kind,
}

/// The columns a table map describes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TableColumns {
    columns: Vec<Column>,
}

/// Metadata bytes a table map holds for a column of this type; None for types whose
/// metadata is unknown, which leaves the columns after them unreadable too.
fn metadata_len(ty: u8) -> Option<usize> {
    match ty {
        DECIMAL | TINY | SHORT | LONG | NULL | TIMESTAMP | LONGLONG | INT24 | DATE | TIME
        | DATETIME | YEAR | NEWDATE => Some(0),
        FLOAT | DOUBLE | BLOB | GEOMETRY | JSON | TIMESTAMP2 | DATETIME2 | TIME2
        | BLOB_COMPRESSED => Some(1),
        VARCHAR | BIT | NEWDECIMAL | STRING | VAR_STRING | ENUM | SET | VARCHAR_COMPRESSED => {
            Some(2)
        }
        _ => None,
    }
}

impl TableColumns {
    /// Decodes what a table map body holds after the table name's terminator: column
    /// count, types and metadata (the null bitmap and optional metadata after them are
    /// not needed). None when they are inconsistent.
    pub(super) fn parse(data: &[u8]) -> Option<TableColumns> {
        let mut r = Reader::new(data);
        let count = usize::try_from(r.lenenc_int("column count").ok()?).ok()?;
        let column_types = r.take(count, "column types").ok()?;
        let meta_len = usize::try_from(r.lenenc_int("metadata length").ok()?).ok()?;
        let mut meta = Reader::new(r.take(meta_len, "metadata").ok()?);
        let mut columns = Vec::with_capacity(count);
        let mut known = true;
        for &ty in column_types {
            let column_meta = match metadata_len(ty).filter(|_| known) {
                Some(n) => Some(meta.take(n, "column metadata").ok()?),
                None => {
                    known = false;
                    None
                }
            };
            columns.push(Column::new(ty, column_meta));
        }
        if known && !meta.is_empty() {
            return None;
        }
        Some(TableColumns { columns })
    }
}

impl Column {
    fn new(map_type: u8, meta: Option<&[u8]>) -> Column {
        let (ty, layout) = match meta {
            Some(meta) => shape(map_type, meta),
            None => (map_type, None),
        };
        let kind = match ty {
            TINY => Kind::Int(1),
            SHORT => Kind::Int(2),
            INT24 => Kind::Int(3),
            LONG => Kind::Int(4),
            LONGLONG => Kind::Int(8),
            VARCHAR | VAR_STRING | STRING => Kind::Bytes,
            _ => Kind::Other,
        };
        Column { ty, layout, kind }
    }

    /// Reads this column's value out of an image: its bytes after any length prefix.
    fn read<'a>(&self, r: &mut Reader<'a>) -> Option<&'a [u8]> {
        let len = match self.layout? {
            Layout::Fixed(n) => n,
            Layout::Prefixed(n) => {
                let prefix = r.take(usize::from(n), "value length").ok()?;
                let mut le = [0u8; 8];
                le[..prefix.len()].copy_from_slice(prefix);
                usize::try_from(u64::from_le_bytes(le)).ok()?
            }
        };
        r.take(len, "value").ok()
    }

    fn value(&self, bytes: &[u8]) -> ColumnValue {
        match self.kind {
            Kind::Int(width) => {
                let mut le = [0u8; 8];
                let n = bytes.len().min(8);
                le[..n].copy_from_slice(&bytes[..n]);
                ColumnValue::Int {
                    raw: u64::from_le_bytes(le),
                    width,
                }
            }
            Kind::Bytes => ColumnValue::Bytes(bytes.to_vec()),
            Kind::Other => ColumnValue::Other,
        }
    }
}

/// The type (the real one for STRING-coded ENUM and SET) and value layout of a column,
/// from its table-map type and metadata.
fn shape(ty: u8, meta: &[u8]) -> (u8, Option<Layout>) {
    let m0 = meta.first().copied().unwrap_or(0);
    let m1 = meta.get(1).copied().unwrap_or(0);
    let fixed = |n: usize| (ty, Some(Layout::Fixed(n)));
    let fsp = usize::from(m0).div_ceil(2);
    match ty {
        NULL => fixed(0),
        TINY | YEAR => fixed(1),
        SHORT => fixed(2),
        INT24 | DATE | TIME | NEWDATE => fixed(3),
        LONG | TIMESTAMP => fixed(4),
        LONGLONG | DATETIME => fixed(8),
        // The metadata repeats the size; one that does not is not a layout we know.
        FLOAT if m0 == 4 => fixed(4),
        DOUBLE if m0 == 8 => fixed(8),
        VARCHAR | VARCHAR_COMPRESSED => (ty, Some(prefix_for(u16::from_le_bytes([m0, m1])))),
        // Written as (bits in the last byte, whole bytes): see the real-server test.
        BIT if m0 < 8 => fixed(usize::from(m1) + usize::from(m0).div_ceil(8)),
        TIMESTAMP2 if m0 <= 6 => fixed(4 + fsp),
        DATETIME2 if m0 <= 6 => fixed(5 + fsp),
        TIME2 if m0 <= 6 => fixed(3 + fsp),
        NEWDECIMAL => (ty, decimal_size(m0, m1).map(Layout::Fixed)),
        BLOB | GEOMETRY | JSON | BLOB_COMPRESSED if (1..=4).contains(&m0) => {
            (ty, Some(Layout::Prefixed(m0)))
        }
        STRING | VAR_STRING | ENUM | SET => string_shape(ty, m0, m1),
        _ => (ty, None),
    }
}

/// A CHAR's, ENUM's or SET's metadata: the real type, then a length. A CHAR of more
/// than 255 bytes has the top bits of its length folded, inverted, into bits 4-5 of
/// the type byte (MySQL bug #37426), which real types always have set.
fn string_shape(ty: u8, real: u8, len: u8) -> (u8, Option<Layout>) {
    if real & 0x30 != 0x30 {
        if real | 0x30 != STRING {
            return (ty, None);
        }
        let max = (u16::from((real & 0x30) ^ 0x30) << 4) | u16::from(len);
        return (STRING, Some(prefix_for(max)));
    }
    match real {
        ENUM if (1..=2).contains(&len) => (ENUM, Some(Layout::Fixed(usize::from(len)))),
        SET if (1..=8).contains(&len) => (SET, Some(Layout::Fixed(usize::from(len)))),
        STRING | VAR_STRING => (real, Some(prefix_for(u16::from(len)))),
        _ => (ty, None),
    }
}

/// Length prefix of a string of at most `max` bytes.
fn prefix_for(max: u16) -> Layout {
    Layout::Prefixed(if max < 256 { 1 } else { 2 })
}

/// Bytes of a DECIMAL(precision, scale) in binary form: 4 per 9 digits, the leftover
/// digits of the integer and fraction parts each in the fewest bytes that hold them.
fn decimal_size(precision: u8, scale: u8) -> Option<usize> {
    const DIG2BYTES: [usize; 9] = [0, 1, 1, 2, 2, 3, 3, 4, 4];
    if scale > precision {
        return None;
    }
    let part = |digits: u8| usize::from(digits / 9) * 4 + DIG2BYTES[usize::from(digits % 9)];
    Some(part(precision - scale) + part(scale))
}

/// Which image a rows event holds per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RowsKind {
    /// The new row.
    Write,
    /// The row before, then the row after.
    Update,
    /// The row removed.
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RowsEvent {
    kind: RowsKind,
    /// From the column count on, without the checksum.
    body: Bytes,
}

/// The row images one transaction wrote to one table (all its row events for that table).
#[derive(Clone, PartialEq, Eq)]
pub struct RowImages {
    columns: Arc<TableColumns>,
    events: Vec<RowsEvent>,
    bytes: usize,
}

impl fmt::Debug for RowImages {
    // The images themselves can be 256 KiB: logs and test failures get their size.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowImages")
            .field("columns", &self.columns.columns.len())
            .field("events", &self.events.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl RowImages {
    /// The images of one rows event: `body` from its column count on. None past
    /// [`MAX_TABLE_IMAGE_BYTES`].
    pub(super) fn new(columns: Arc<TableColumns>, kind: RowsKind, body: &[u8]) -> Option<Self> {
        (body.len() <= MAX_TABLE_IMAGE_BYTES).then(|| RowImages {
            columns,
            events: vec![RowsEvent {
                kind,
                body: Bytes::copy_from_slice(body),
            }],
            bytes: body.len(),
        })
    }

    /// Row-image bytes held.
    pub(super) fn len(&self) -> usize {
        self.bytes
    }

    /// These images, then those of a later event of the same table. None when the
    /// table map changed between them or the bound would be passed.
    pub(super) fn merged(mut self, later: RowImages) -> Option<RowImages> {
        let same = Arc::ptr_eq(&self.columns, &later.columns) || self.columns == later.columns;
        let bytes = self.bytes + later.bytes;
        if !same || bytes > MAX_TABLE_IMAGE_BYTES {
            return None;
        }
        self.events.extend(later.events);
        self.bytes = bytes;
        Some(self)
    }

    /// Columns in the table map (the cache checks it against what it learnt of the table).
    pub fn column_count(&self) -> usize {
        self.columns.columns.len()
    }

    /// The type code (see [`types`]) of the column at `position`: the table map's,
    /// except ENUM and SET columns, which the map codes as STRING (254) with the real
    /// type in their metadata, give ENUM (247) and SET (248). A CHAR or BINARY gives
    /// STRING.
    pub fn column_type(&self, position: usize) -> Option<u8> {
        self.columns.columns.get(position).map(|c| c.ty)
    }

    /// Every row's value of the column at `position` (from 0): for WRITE rows the image,
    /// for DELETE the before image, for UPDATE the before image and also the after image
    /// when the after image holds that column (with binlog_row_image=MINIMAL an after
    /// image without it means the column was not changed). In log order, an UPDATE's
    /// before value right before its after value.
    ///
    /// None when any image that must hold the column does not (columns-present bitmap),
    /// or the images can't be walked: truncated data, or a non-NULL value of a column
    /// whose size can't be computed (unknown type or metadata) anywhere in an image,
    /// since the next row starts after it.
    pub fn values(&self, position: usize) -> Option<Vec<ColumnValue>> {
        let mut out = Vec::new();
        for event in &self.events {
            self.walk(event, position, &mut out)?;
        }
        Some(out)
    }

    fn walk(&self, event: &RowsEvent, position: usize, out: &mut Vec<ColumnValue>) -> Option<()> {
        let mut r = Reader::new(&event.body);
        let width = usize::try_from(r.lenenc_int("column count").ok()?).ok()?;
        // More columns than the table map has could not be typed.
        if width > self.columns.columns.len() {
            return None;
        }
        let bitmap_len = width.div_ceil(8);
        let present = present_columns(r.take(bitmap_len, "columns present").ok()?, width);
        let after = match event.kind {
            RowsKind::Update => Some(present_columns(
                r.take(bitmap_len, "columns present after").ok()?,
                width,
            )),
            _ => None,
        };
        if !present.contains(&position) {
            return None;
        }
        // Each before image takes at least its null bitmap's byte, as `position` is
        // present: the loop ends.
        while !r.is_empty() {
            out.push(self.image(&mut r, &present, position)??);
            if let Some(after) = &after {
                if let Some(value) = self.image(&mut r, after, position)? {
                    out.push(value);
                }
            }
        }
        Some(())
    }

    /// Walks one image of the `present` columns: the value at `position`, if present.
    fn image(
        &self,
        r: &mut Reader<'_>,
        present: &[usize],
        position: usize,
    ) -> Option<Option<ColumnValue>> {
        let nulls = r.take(present.len().div_ceil(8), "null bitmap").ok()?;
        let mut found = None;
        for (n, &i) in present.iter().enumerate() {
            if bit(nulls, n) {
                if i == position {
                    found = Some(ColumnValue::Null);
                }
                continue;
            }
            let column = self.columns.columns.get(i)?;
            let bytes = column.read(r)?;
            if i == position {
                found = Some(column.value(bytes));
            }
        }
        Some(found)
    }
}

/// Positions of the columns a present bitmap sets, among the first `width`.
fn present_columns(bitmap: &[u8], width: usize) -> Vec<usize> {
    (0..width).filter(|&i| bit(bitmap, i)).collect()
}

fn bit(bitmap: &[u8], i: usize) -> bool {
    bitmap.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
}

#[cfg(test)]
pub(super) mod tests;
