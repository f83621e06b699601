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

#[cfg(test)]
mod tests {
    use super::*;

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
