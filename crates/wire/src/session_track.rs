//! Session state in OK packets (`CLIENT_SESSION_TRACK`): which system variables, schema
//! and state a statement changed. A multiplexing proxy learns each session's state from
//! these instead of guessing from SQL, and rewrites the OK for clients that did not ask
//! for tracking, since the packet's layout depends on it.

use crate::lenenc::{put_lenenc_int, Reader};
use crate::response::{EOF_HEADER, OK_HEADER};
use crate::{ProtocolError, StatusFlags};
use bytes::{BufMut, BytesMut};

/// One entry of an OK packet's session-state block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateChange<'a> {
    /// `SESSION_TRACK_SYSTEM_VARIABLES`: a variable and its new value, as text.
    SystemVariable { name: &'a [u8], value: &'a [u8] },
    /// `SESSION_TRACK_SCHEMA`: the new default schema.
    Schema(&'a [u8]),
    /// `SESSION_TRACK_STATE_CHANGE`: something in the session changed.
    StateChanged,
    /// `SESSION_TRACK_GTIDS`, raw.
    Gtids(&'a [u8]),
    /// `SESSION_TRACK_TRANSACTION_CHARACTERISTICS`: the statement that would recreate them.
    TransactionCharacteristics(&'a [u8]),
    /// `SESSION_TRACK_TRANSACTION_STATE`: the eight-letter state.
    TransactionState(&'a [u8]),
    /// A type this code does not know, skipped whole.
    Other { kind: u8, data: &'a [u8] },
}

/// Every field of an OK packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullOk<'a> {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: StatusFlags,
    pub warnings: u16,
    pub info: &'a [u8],
    pub changes: Vec<StateChange<'a>>,
}

/// Parses an OK packet payload (header 0x00, or 0xFE for the OK that ends a result set
/// under `CLIENT_DEPRECATE_EOF`) as written for a client with or without
/// `CLIENT_SESSION_TRACK`.
pub fn parse_full_ok(payload: &[u8], session_track: bool) -> Result<FullOk<'_>, ProtocolError> {
    let mut r = Reader::new(payload);
    let header = r.u8("OK header")?;
    if header != OK_HEADER && header != EOF_HEADER {
        return Err(ProtocolError::Malformed("OK packet"));
    }
    let affected_rows = r.lenenc_int("affected rows")?;
    let last_insert_id = r.lenenc_int("last insert id")?;
    let status = StatusFlags(r.u16("status")?);
    let warnings = r.u16("warnings")?;
    let mut ok = FullOk {
        affected_rows,
        last_insert_id,
        status,
        warnings,
        info: &[],
        changes: Vec::new(),
    };
    if r.is_empty() {
        return Ok(ok);
    }
    if !session_track {
        ok.info = r.rest();
        return Ok(ok);
    }
    ok.info = r.lenenc_bytes("info")?;
    if status.contains(StatusFlags::SESSION_STATE_CHANGED) && !r.is_empty() {
        let block = r.lenenc_bytes("session state")?;
        let mut entries = Reader::new(block);
        while !entries.is_empty() {
            let kind = entries.u8("session state type")?;
            let data = entries.lenenc_bytes("session state data")?;
            ok.changes.push(entry(kind, data)?);
        }
    }
    Ok(ok)
}

fn entry(kind: u8, data: &[u8]) -> Result<StateChange<'_>, ProtocolError> {
    let mut d = Reader::new(data);
    Ok(match kind {
        0 => StateChange::SystemVariable {
            name: d.lenenc_bytes("variable name")?,
            value: d.lenenc_bytes("variable value")?,
        },
        1 => StateChange::Schema(d.lenenc_bytes("schema")?),
        2 => StateChange::StateChanged,
        3 => StateChange::Gtids(data),
        4 => StateChange::TransactionCharacteristics(d.lenenc_bytes("characteristics")?),
        5 => StateChange::TransactionState(d.lenenc_bytes("transaction state")?),
        kind => StateChange::Other { kind, data },
    })
}

/// The OK packet payload a server writes for a client without `CLIENT_SESSION_TRACK`,
/// from one written for a client with it: no session-state block and the flag cleared.
/// The info string stays length-coded when `lenenc_info` (MariaDB writes it so for every
/// client, and nothing when it is empty); otherwise it is the rest of the packet (MySQL).
pub fn translate_ok(payload: &[u8], lenenc_info: bool) -> Result<BytesMut, ProtocolError> {
    let ok = parse_full_ok(payload, true)?;
    Ok(untracked_ok(payload[0], &ok, lenenc_info))
}

/// [`translate_ok`] of an OK already parsed; `header` is its payload's first byte (an OK
/// or an EOF-style OK).
pub fn untracked_ok(header: u8, ok: &FullOk<'_>, lenenc_info: bool) -> BytesMut {
    let mut b = BytesMut::with_capacity(16 + ok.info.len());
    b.put_u8(header);
    put_lenenc_int(&mut b, ok.affected_rows);
    put_lenenc_int(&mut b, ok.last_insert_id);
    b.put_u16_le(ok.status.0 & !StatusFlags::SESSION_STATE_CHANGED);
    b.put_u16_le(ok.warnings);
    if lenenc_info && !ok.info.is_empty() {
        crate::lenenc::put_lenenc_bytes(&mut b, ok.info);
    } else {
        b.put_slice(ok.info);
    }
    b
}

/// A client's own `session_track_*` settings: what a server would report to it. A proxy
/// whose connection tracks everything passes on only this part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracking {
    /// `session_track_system_variables` as the server gives it: names separated by
    /// commas, or `*`.
    pub system_variables: Box<[u8]>,
    pub schema: bool,
    pub state_change: bool,
    /// `session_track_transaction_info`: `OFF`, `STATE` or `CHARACTERISTICS`. A proxy
    /// leaves it as the client set it on the connection, whose entries then pass.
    pub transaction_info: Box<[u8]>,
}

impl Tracking {
    /// From the values of `session_track_system_variables`, `session_track_schema`,
    /// `session_track_state_change` and `session_track_transaction_info` as a `SELECT`
    /// of them gives them (booleans as `1`/`0`). `None` when one is missing.
    pub fn from_values(values: &[Option<Vec<u8>>]) -> Option<Tracking> {
        let text = |i: usize| values.get(i).cloned().flatten();
        let on = |i: usize| {
            text(i).is_some_and(|v| v.as_slice() == b"1" || v.eq_ignore_ascii_case(b"ON"))
        };
        Some(Tracking {
            system_variables: text(0)?.into(),
            schema: on(1),
            state_change: on(2),
            transaction_info: text(3)?.into(),
        })
    }

    pub fn tracks_variable(&self, name: &[u8]) -> bool {
        self.system_variables
            .split(|&b| b == b',')
            .map(<[u8]>::trim_ascii)
            .any(|v| v == b"*" || v.eq_ignore_ascii_case(name))
    }

    /// Whether the client would get this entry. Kinds the proxy does not turn on for
    /// itself (GTIDs, transaction state) are as the client's own settings made them.
    pub fn keeps(&self, change: &StateChange<'_>) -> bool {
        match change {
            StateChange::SystemVariable { name, .. } => self.tracks_variable(name),
            StateChange::Schema(_) => self.schema,
            StateChange::StateChanged => self.state_change,
            _ => true,
        }
    }

    /// Whether `ok` (as parsed by [`parse_full_ok`]) is already what the client would
    /// get, so the packet goes through untouched.
    pub fn passes(&self, ok: &FullOk<'_>) -> bool {
        ok.changes.iter().all(|c| self.keeps(c))
            && ok.status.contains(StatusFlags::SESSION_STATE_CHANGED) != ok.changes.is_empty()
    }
}

/// The OK packet payload a server with the client's `tracking` settings writes, from one
/// written for a connection that tracks everything. As MariaDB does (`net_send_ok`), the
/// state-changed flag and the session-state block are there only when some entry is,
/// and the info string is written when it is not empty or a block follows.
pub fn filter_ok(payload: &[u8], tracking: &Tracking) -> Result<BytesMut, ProtocolError> {
    let ok = parse_full_ok(payload, true)?;
    let mut block = BytesMut::new();
    if ok.status.contains(StatusFlags::SESSION_STATE_CHANGED) {
        let mut r = Reader::new(payload);
        r.u8("OK header")?;
        r.lenenc_int("affected rows")?;
        r.lenenc_int("last insert id")?;
        r.take(4, "status and warnings")?;
        r.lenenc_bytes("info")?;
        let mut entries = Reader::new(r.lenenc_bytes("session state")?);
        while !entries.is_empty() {
            let kind = entries.u8("session state type")?;
            let data = entries.lenenc_bytes("session state data")?;
            if tracking.keeps(&entry(kind, data)?) {
                block.put_u8(kind);
                crate::lenenc::put_lenenc_bytes(&mut block, data);
            }
        }
    }
    let changed = !block.is_empty();
    let mut status = ok.status.0 & !StatusFlags::SESSION_STATE_CHANGED;
    if changed {
        status |= StatusFlags::SESSION_STATE_CHANGED;
    }
    let mut b = BytesMut::with_capacity(24 + ok.info.len() + block.len());
    b.put_u8(payload[0]);
    put_lenenc_int(&mut b, ok.affected_rows);
    put_lenenc_int(&mut b, ok.last_insert_id);
    b.put_u16_le(status);
    b.put_u16_le(ok.warnings);
    if changed || !ok.info.is_empty() {
        crate::lenenc::put_lenenc_bytes(&mut b, ok.info);
    }
    if changed {
        crate::lenenc::put_lenenc_bytes(&mut b, &block);
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lenenc::put_lenenc_bytes;

    /// An OK as MariaDB writes it for a tracking client.
    fn tracked(status: u16, info: &[u8], entries: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_u8(0);
        put_lenenc_int(&mut b, 3);
        put_lenenc_int(&mut b, 7);
        b.put_u16_le(status);
        b.put_u16_le(1);
        put_lenenc_bytes(&mut b, info);
        if status & StatusFlags::SESSION_STATE_CHANGED != 0 {
            let mut block = BytesMut::new();
            for (kind, data) in entries {
                block.put_u8(*kind);
                put_lenenc_bytes(&mut block, data);
            }
            put_lenenc_bytes(&mut b, &block);
        }
        b.to_vec()
    }

    fn var(name: &str, value: &str) -> (u8, Vec<u8>) {
        let mut d = BytesMut::new();
        put_lenenc_bytes(&mut d, name.as_bytes());
        put_lenenc_bytes(&mut d, value.as_bytes());
        (0, d.to_vec())
    }

    fn lenenc(s: &str) -> Vec<u8> {
        let mut d = BytesMut::new();
        put_lenenc_bytes(&mut d, s.as_bytes());
        d.to_vec()
    }

    #[test]
    fn variables_schema_and_state_are_read() {
        let p = tracked(
            0xc002,
            b"",
            &[
                var(
                    "sql_mode",
                    "REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI",
                ),
                (1, lenenc("other")),
                var("character_set_results", ""),
                (2, b"1".to_vec()),
                (9, b"whatever".to_vec()),
            ],
        );
        let ok = parse_full_ok(&p, true).unwrap();
        assert_eq!(
            (ok.affected_rows, ok.last_insert_id, ok.warnings),
            (3, 7, 1)
        );
        assert_eq!(
            ok.changes,
            vec![
                StateChange::SystemVariable {
                    name: b"sql_mode",
                    value: b"REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI"
                },
                StateChange::Schema(b"other"),
                StateChange::SystemVariable {
                    name: b"character_set_results",
                    value: b""
                },
                StateChange::StateChanged,
                StateChange::Other {
                    kind: 9,
                    data: b"whatever"
                },
            ]
        );
    }

    #[test]
    fn translation_drops_tracking_and_keeps_the_info() {
        let p = tracked(0xc002, b"Rows matched: 1", &[var("time_zone", "+01:00")]);
        // MySQL: the info is the rest of the packet.
        let t = translate_ok(&p, false).unwrap();
        let ok = parse_full_ok(&t, false).unwrap();
        assert_eq!(ok.status.0, 0x8002);
        assert_eq!(ok.info, b"Rows matched: 1");
        assert!(ok.changes.is_empty());
        assert_eq!(&t[t.len() - 15..], b"Rows matched: 1");
        // MariaDB: length-coded, as it writes it for every client.
        let t = translate_ok(&p, true).unwrap();
        assert_eq!(&t[t.len() - 16..], b"\x0fRows matched: 1");
        // Empty info: nothing after the warnings, as a server writes it.
        for lenenc in [false, true] {
            let t = translate_ok(&tracked(0x0002, b"", &[]), lenenc).unwrap();
            assert_eq!(t.len(), 1 + 1 + 1 + 2 + 2);
        }
        // The 0xFE-headed OK that ends a result set keeps its header.
        let mut end = tracked(0x0002, b"", &[]);
        end[0] = 0xfe;
        assert_eq!(translate_ok(&end, true).unwrap()[0], 0xfe);
        // A bare OK (nothing after the warnings) reads and translates.
        let bare = &tracked(0x0002, b"", &[])[..7];
        assert_eq!(parse_full_ok(bare, true).unwrap().info, b"");
        assert_eq!(translate_ok(bare, true).unwrap().len(), 7);
    }

    #[test]
    fn truncated_packets_are_errors_not_panics() {
        let p = tracked(
            0xc002,
            b"info",
            &[
                var("sql_mode", "ANSI"),
                (1, lenenc("db")),
                (2, b"1".to_vec()),
            ],
        );
        for end in 0..p.len() {
            let _ = parse_full_ok(&p[..end], true);
            let _ = translate_ok(&p[..end], true);
        }
        assert!(parse_full_ok(&p[..p.len() - 1], true).is_err());
        assert!(parse_full_ok(&[0xff, 1, 2], true).is_err());
    }

    fn client(vars: &str, schema: bool, state_change: bool) -> Tracking {
        Tracking {
            system_variables: vars.as_bytes().into(),
            schema,
            state_change,
            transaction_info: b"OFF".as_slice().into(),
        }
    }

    #[test]
    fn settings_are_read_from_their_values() {
        let v = |s: &str| Some(s.as_bytes().to_vec());
        let t = Tracking::from_values(&[v("autocommit,time_zone"), v("1"), v("0"), v("OFF")]);
        assert_eq!(t, Some(client("autocommit,time_zone", true, false)));
        assert!(t.unwrap().tracks_variable(b"TIME_ZONE"));
        assert_eq!(Tracking::from_values(&[v("*"), v("1"), v("0")]), None);
    }

    #[test]
    fn filtering_keeps_what_the_client_tracks() {
        let p = tracked(
            0x4002,
            b"",
            &[
                var("sql_mode", "ANSI"),
                var("time_zone", "+01:00"),
                (1, lenenc("db")),
                (2, lenenc("1")),
            ],
        );
        let defaults = client("autocommit, time_zone", false, false);
        let ok = parse_full_ok(&p, true).unwrap();
        assert!(!defaults.passes(&ok));
        let f = filter_ok(&p, &defaults).unwrap();
        assert_eq!(
            f[..],
            tracked(0x4002, b"", &[var("time_zone", "+01:00")])[..]
        );
        // Everything tracked: the same bytes.
        let all = client("*", true, true);
        assert!(all.passes(&ok));
        assert_eq!(filter_ok(&p, &all).unwrap()[..], p[..]);
        // Nothing left: no flag, no block, and no empty info string.
        let none = client("", false, false);
        let f = filter_ok(&p, &none).unwrap();
        assert_eq!(f[..], tracked(0x0002, b"", &[])[..7]);
        // The info string stays.
        let p = tracked(0x4002, b"Rows matched: 1", &[(2, lenenc("1"))]);
        let f = filter_ok(&p, &none).unwrap();
        assert_eq!(f[..], tracked(0x0002, b"Rows matched: 1", &[])[..]);
        // Nothing to filter, nothing flagged: passes as is.
        let plain = tracked(0x0002, b"", &[]);
        assert!(none.passes(&parse_full_ok(&plain, true).unwrap()));
        for end in 0..p.len() {
            let _ = filter_ok(&p[..end], &defaults);
        }
    }
}
