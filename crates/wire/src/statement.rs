//! The binary-protocol statement packets a proxy reads or rewrites: the prepare-OK that
//! answers `COM_STMT_PREPARE`, and the `COM_STMT_EXECUTE` request (its statement id,
//! cursor flag and bound parameters). Every `COM_STMT_*` request starts with the
//! command byte and a 4-byte statement id.
//!
//! Payloads here are packet payloads (no 4-byte header), command byte first.

use crate::command::Command;

/// The statement id of a `COM_STMT_*` request payload.
pub fn request_stmt_id(payload: &[u8]) -> Option<u32> {
    let b = payload.get(1..5)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Replaces the statement id of a `COM_STMT_*` request payload (or a prepare-OK, whose
/// id sits at the same offset). Does nothing to a payload too short to hold one.
pub fn set_stmt_id(payload: &mut [u8], id: u32) {
    if let Some(b) = payload.get_mut(1..5) {
        b.copy_from_slice(&id.to_le_bytes());
    }
}

/// The first packet of a successful prepare's response:
/// `0x00, stmt_id u32, columns u16, params u16, 0x00, warnings u16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrepareOk {
    pub stmt_id: u32,
    pub columns: u16,
    pub params: u16,
}

impl PrepareOk {
    /// Bytes of the payload read: through the parameter count.
    pub const LEN: usize = 9;

    /// Reads a prepare-OK; `None` for anything else (an error, a short packet).
    pub fn parse(payload: &[u8]) -> Option<PrepareOk> {
        let p = payload.get(..Self::LEN)?;
        (p[0] == 0).then(|| PrepareOk {
            stmt_id: u32::from_le_bytes([p[1], p[2], p[3], p[4]]),
            columns: u16::from_le_bytes([p[5], p[6]]),
            params: u16::from_le_bytes([p[7], p[8]]),
        })
    }
}

/// `COM_STMT_EXECUTE` flags: the `CURSOR_TYPE_*` bits.
pub const CURSOR_TYPE_NO_CURSOR: u8 = 0;

/// A `COM_STMT_EXECUTE` payload, read for a statement of `params` parameters:
/// `0x17, stmt_id u32, flags u8, iterations u32`, then with parameters the NULL bitmap
/// (`(params + 7) / 8` bytes), the new-params-bound flag, the types (2 bytes each) when
/// that flag is 1, and the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Execute<'a> {
    pub stmt_id: u32,
    /// Cursor type (`CURSOR_TYPE_*`); MariaDB adds parameter-array bits above.
    pub flags: u8,
    pub null_bitmap: &'a [u8],
    /// The parameter types, when this execute binds them; without them it means the
    /// types of the last execute of the statement that carried some.
    pub types: Option<&'a [u8]>,
    pub values: &'a [u8],
}

impl<'a> Execute<'a> {
    /// Offset of the NULL bitmap: command, id, flags, iteration count.
    const BITMAP_AT: usize = 1 + 4 + 1 + 4;

    /// Offset of the new-params-bound flag for `params` parameters.
    pub fn types_flag_at(params: u16) -> usize {
        Self::BITMAP_AT + (params as usize).div_ceil(8)
    }

    /// Bytes from the start of the payload through the types, when they are bound:
    /// what must be at hand to read or rewrite everything but the values.
    pub fn head_len(params: u16) -> usize {
        Self::types_flag_at(params) + 1 + 2 * params as usize
    }

    /// Reads an execute of a statement with `params` parameters; `None` when it is not
    /// one or is truncated.
    pub fn parse(payload: &'a [u8], params: u16) -> Option<Execute<'a>> {
        if payload.first() != Some(&(Command::StmtExecute as u8)) || payload.len() < Self::BITMAP_AT
        {
            return None;
        }
        let stmt_id = request_stmt_id(payload)?;
        let flags = payload[5];
        if params == 0 {
            return Some(Execute {
                stmt_id,
                flags,
                null_bitmap: &[],
                types: None,
                values: &payload[Self::BITMAP_AT..],
            });
        }
        let flag_at = Self::types_flag_at(params);
        let null_bitmap = payload.get(Self::BITMAP_AT..flag_at)?;
        let (types, values_at) = match *payload.get(flag_at)? {
            1 => {
                let end = flag_at + 1 + 2 * params as usize;
                (Some(payload.get(flag_at + 1..end)?), end)
            }
            _ => (None, flag_at + 1),
        };
        Some(Execute {
            stmt_id,
            flags,
            null_bitmap,
            types,
            values: &payload[values_at..],
        })
    }

    /// The execute asks for a cursor (its rows are then fetched by `COM_STMT_FETCH`).
    pub fn opens_cursor(&self) -> bool {
        self.flags != CURSOR_TYPE_NO_CURSOR
    }

    /// Whether an execute payload binds its parameter types; `None` without parameters
    /// or when truncated.
    pub fn binds_types(payload: &[u8], params: u16) -> Option<bool> {
        if params == 0 {
            return None;
        }
        payload.get(Self::types_flag_at(params)).map(|&f| f == 1)
    }

    /// The payload of an execute sent without types, with `types` bound in: for a server
    /// statement that never received the types the client bound elsewhere. `None` when
    /// the payload does not leave the types out.
    pub fn with_types(payload: &[u8], params: u16, types: &[u8]) -> Option<Vec<u8>> {
        if Self::binds_types(payload, params) != Some(false) {
            return None;
        }
        let flag_at = Self::types_flag_at(params);
        let mut out = Vec::with_capacity(payload.len() + types.len());
        out.extend_from_slice(&payload[..flag_at]);
        out.push(1);
        out.extend_from_slice(types);
        out.extend_from_slice(&payload[flag_at + 1..]);
        Some(out)
    }
}

/// One bound parameter's value, as the binary protocol carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound<'a> {
    Null,
    /// `TINY`, `SHORT`, `YEAR`, `INT24`, `LONG`, `LONGLONG`, signed.
    Int(i64),
    /// The same types with the unsigned flag.
    UInt(u64),
    Float(f32),
    Double(f64),
    /// Strings, blobs, `DECIMAL` (as text), `JSON`, `BIT`, `ENUM`, `SET`, `GEOMETRY`.
    Bytes(&'a [u8]),
    /// `DATE`, `DATETIME`, `TIMESTAMP`, `TIME`: their packed bytes after the length.
    Temporal(&'a [u8]),
}

impl<'a> Execute<'a> {
    /// Every parameter's value, read with `types` (this execute's, or the ones last
    /// bound): `None` when the values do not match the types (truncated, or a type this
    /// protocol does not send).
    pub fn bound(&self, types: &[u8]) -> Option<Vec<Bound<'a>>> {
        let params = types.len() / 2;
        let mut r = crate::lenenc::Reader::new(self.values);
        let mut out = Vec::with_capacity(params);
        for i in 0..params {
            if self.null_bitmap.get(i / 8)? & (1 << (i % 8)) != 0 {
                out.push(Bound::Null);
                continue;
            }
            let (ty, unsigned) = (types[2 * i], types[2 * i + 1] & 0x80 != 0);
            let int = |v: i64, u: u64| {
                if unsigned {
                    Bound::UInt(u)
                } else {
                    Bound::Int(v)
                }
            };
            let what = "bound parameter";
            let v = match ty {
                // NULL type: no bytes.
                0x06 => Bound::Null,
                0x01 => {
                    let b = r.u8(what).ok()?;
                    int(b as i8 as i64, b as u64)
                }
                0x02 | 0x0d => {
                    let b = r.u16(what).ok()?;
                    int(b as i16 as i64, b as u64)
                }
                0x03 | 0x09 => {
                    let b = r.u32(what).ok()?;
                    int(b as i32 as i64, b as u64)
                }
                0x08 => {
                    let b = r.u64(what).ok()?;
                    int(b as i64, b)
                }
                0x04 => Bound::Float(f32::from_bits(r.u32(what).ok()?)),
                0x05 => Bound::Double(f64::from_bits(r.u64(what).ok()?)),
                0x07 | 0x0a | 0x0b | 0x0c => {
                    let n = r.u8(what).ok()?;
                    Bound::Temporal(r.take(n as usize, what).ok()?)
                }
                0x0f | 0x10 | 0xf5..=0xfe => Bound::Bytes(r.lenenc_bytes(what).ok()?),
                _ => return None,
            };
            out.push(v);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_values_by_type() {
        // Four parameters: LONGLONG -5, unsigned TINY 200, NULL (bitmap), VARCHAR "ab".
        let mut p = vec![0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0b0000_0100, 1];
        p.extend_from_slice(&[0x08, 0, 0x01, 0x80, 0x0f, 0, 0xfd, 0]);
        p.extend_from_slice(&(-5i64).to_le_bytes());
        p.push(200);
        p.extend_from_slice(&[2, b'a', b'b']);
        let e = Execute::parse(&p, 4).unwrap();
        let types = e.types.unwrap();
        assert_eq!(
            e.bound(types).unwrap(),
            [
                Bound::Int(-5),
                Bound::UInt(200),
                Bound::Null,
                Bound::Bytes(b"ab")
            ]
        );
        // Truncated values, and a type the protocol never sends.
        assert_eq!(
            Execute::parse(&p[..p.len() - 1], 4).unwrap().bound(types),
            None
        );
        assert_eq!(e.bound(&[0x08, 0, 0x01, 0x80, 0x0f, 0, 0x20, 0]), None);
    }

    // command, id 7, flags, iterations, null bitmap, new-params-bound, type, value
    const WITH_TYPES: [u8; 18] = [0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 0, 9, 0, 0, 0];
    const WITHOUT: [u8; 16] = [0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 9, 0, 0, 0];

    #[test]
    fn execute_fields() {
        let e = Execute::parse(&WITH_TYPES, 1).unwrap();
        assert_eq!(e.stmt_id, 7);
        assert_eq!(e.null_bitmap, &[0]);
        assert_eq!(e.types, Some(&[3, 0][..]));
        assert_eq!(e.values, &[9, 0, 0, 0]);
        assert!(!e.opens_cursor());
        let e = Execute::parse(&WITHOUT, 1).unwrap();
        assert_eq!((e.types, e.values), (None, &[9, 0, 0, 0][..]));
        let none = Execute::parse(&WITHOUT[..10], 0).unwrap();
        assert_eq!((none.null_bitmap, none.values), (&[][..], &[][..]));
        assert!(
            Execute::parse(&WITH_TYPES[..13], 1).is_none(),
            "truncated types"
        );
        assert!(Execute::parse(&WITHOUT[..9], 0).is_none());
        assert!(Execute::parse(&[0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0).is_none());
        assert_eq!(Execute::head_len(1), 14);
        assert_eq!(Execute::head_len(9), 10 + 2 + 1 + 18);
    }

    #[test]
    fn types_are_put_back() {
        assert_eq!(Execute::binds_types(&WITH_TYPES, 1), Some(true));
        assert_eq!(Execute::binds_types(&WITHOUT, 1), Some(false));
        assert_eq!(Execute::binds_types(&WITHOUT, 0), None);
        assert_eq!(
            Execute::with_types(&WITHOUT, 1, &[3, 0]).unwrap(),
            WITH_TYPES.to_vec()
        );
        assert!(Execute::with_types(&WITH_TYPES, 1, &[3, 0]).is_none());
    }

    #[test]
    fn prepare_ok_and_ids() {
        let mut ok = [0u8, 5, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0];
        assert_eq!(
            PrepareOk::parse(&ok),
            Some(PrepareOk {
                stmt_id: 5,
                columns: 2,
                params: 3
            })
        );
        set_stmt_id(&mut ok, 0x0102_0304);
        assert_eq!(PrepareOk::parse(&ok).unwrap().stmt_id, 0x0102_0304);
        assert!(PrepareOk::parse(&ok[..8]).is_none());
        assert!(PrepareOk::parse(&[0xff, 1, 2, 3, 4, 5, 6, 7, 8]).is_none());
        assert_eq!(request_stmt_id(&WITHOUT), Some(7));
        assert_eq!(request_stmt_id(&WITHOUT[..4]), None);
        set_stmt_id(&mut [0u8; 3], 1);
    }
}
