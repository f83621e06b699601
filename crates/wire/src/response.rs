//! OK, ERR and EOF packets: the few server responses whose fields the proxy reads or writes.

use crate::lenenc::{put_lenenc_bytes, put_lenenc_int, Reader};
use crate::{CapabilityFlags, ProtocolError, StatusFlags};
use bytes::{BufMut, BytesMut};

pub const OK_HEADER: u8 = 0x00;
pub const EOF_HEADER: u8 = 0xfe;
pub const ERR_HEADER: u8 = 0xff;
pub const LOCAL_INFILE_HEADER: u8 = 0xfb;

/// The fields of an OK packet (or of an OK sent with the EOF header under
/// `CLIENT_DEPRECATE_EOF`) up to the status and warnings.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OkPacket {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: StatusFlags,
    pub warnings: u16,
}

impl OkPacket {
    pub fn parse(payload: &[u8]) -> Result<OkPacket, ProtocolError> {
        let mut r = Reader::new(payload);
        let h = r.u8("OK header")?;
        if h != OK_HEADER && h != EOF_HEADER {
            return Err(ProtocolError::Malformed("OK packet"));
        }
        let affected_rows = r.lenenc_int("affected rows")?;
        let last_insert_id = r.lenenc_int("last insert id")?;
        // Pre-4.1 servers may stop here; every server we talk to sends status.
        let status = StatusFlags(if r.remaining() >= 2 {
            r.u16("status")?
        } else {
            0
        });
        let warnings = if r.remaining() >= 2 {
            r.u16("warnings")?
        } else {
            0
        };
        Ok(OkPacket {
            affected_rows,
            last_insert_id,
            status,
            warnings,
        })
    }
}

/// Rewrites the status flags of an OK packet payload in place: what a statement run
/// inside a transaction the proxy opened reports once that transaction has committed.
pub fn set_ok_status(payload: &mut [u8], status: StatusFlags) -> Result<(), ProtocolError> {
    let mut r = Reader::new(payload);
    let h = r.u8("OK header")?;
    if h != OK_HEADER {
        return Err(ProtocolError::Malformed("OK packet"));
    }
    r.lenenc_int("affected rows")?;
    r.lenenc_int("last insert id")?;
    let at = payload.len() - r.remaining();
    r.u16("status")?;
    payload[at..at + 2].copy_from_slice(&status.0.to_le_bytes());
    Ok(())
}

/// Builds an OK packet payload as a MySQL server would for the given capabilities.
pub fn ok_payload(ok: &OkPacket, caps: CapabilityFlags, header: u8) -> BytesMut {
    let mut b = BytesMut::with_capacity(16);
    b.put_u8(header);
    put_lenenc_int(&mut b, ok.affected_rows);
    put_lenenc_int(&mut b, ok.last_insert_id);
    if caps.contains(CapabilityFlags::PROTOCOL_41) {
        b.put_u16_le(ok.status.0);
        b.put_u16_le(ok.warnings);
    } else if caps.contains(CapabilityFlags::TRANSACTIONS) {
        b.put_u16_le(ok.status.0);
    }
    if caps.contains(CapabilityFlags::SESSION_TRACK) {
        // An empty info string, and no session state (the flag is never set by us).
        put_lenenc_bytes(&mut b, b"");
    }
    b
}

/// A server error: code, SQL state and message, as the client will show them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrPacket {
    pub code: u16,
    pub state: [u8; 5],
    pub message: String,
}

impl ErrPacket {
    pub fn new(code: u16, state: &str, message: impl Into<String>) -> ErrPacket {
        let mut s = [b'H', b'Y', b'0', b'0', b'0'];
        if state.len() == 5 {
            s.copy_from_slice(state.as_bytes());
        }
        ErrPacket {
            code,
            state: s,
            message: message.into(),
        }
    }

    pub fn parse(payload: &[u8]) -> Result<ErrPacket, ProtocolError> {
        let mut r = Reader::new(payload);
        if r.u8("ERR header")? != ERR_HEADER {
            return Err(ProtocolError::Malformed("ERR packet"));
        }
        let code = r.u16("error code")?;
        let mut state = *b"HY000";
        if r.remaining() >= 6 && payload[3] == b'#' {
            r.u8("state marker")?;
            state.copy_from_slice(r.take(5, "sql state")?);
        }
        Ok(ErrPacket {
            code,
            state,
            message: String::from_utf8_lossy(r.rest()).into_owned(),
        })
    }

    pub fn state_str(&self) -> &str {
        std::str::from_utf8(&self.state).unwrap_or("HY000")
    }

    pub fn payload(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(9 + self.message.len());
        b.put_u8(ERR_HEADER);
        b.put_u16_le(self.code);
        b.put_u8(b'#');
        b.put_slice(&self.state);
        b.put_slice(self.message.as_bytes());
        b
    }
}

impl std::fmt::Display for ErrPacket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ERROR {} ({}): {}",
            self.code,
            self.state_str(),
            self.message
        )
    }
}

/// An EOF packet (`0xfe`, warnings, status) in its classic five-byte form.
pub fn eof_payload(warnings: u16, status: StatusFlags) -> [u8; 5] {
    let w = warnings.to_le_bytes();
    let s = status.0.to_le_bytes();
    [EOF_HEADER, w[0], w[1], s[0], s[1]]
}

/// Status flags and warning count of a terminating packet (classic EOF or
/// OK-with-EOF-header), read in one pass.
pub fn terminator(payload: &[u8]) -> Result<(StatusFlags, u16), ProtocolError> {
    if payload.first() != Some(&EOF_HEADER) {
        return Err(ProtocolError::Malformed("EOF packet"));
    }
    if payload.len() == 5 {
        let warnings = u16::from_le_bytes([payload[1], payload[2]]);
        return Ok((
            StatusFlags(u16::from_le_bytes([payload[3], payload[4]])),
            warnings,
        ));
    }
    OkPacket::parse(payload).map(|ok| (ok.status, ok.warnings))
}

/// Status flags of a terminating packet (classic EOF or OK-with-EOF-header).
pub fn terminator_status(payload: &[u8]) -> Result<StatusFlags, ProtocolError> {
    terminator(payload).map(|(status, _)| status)
}

/// Warning count of a terminating packet (classic EOF or OK-with-EOF-header).
pub fn terminator_warnings(payload: &[u8]) -> Result<u16, ProtocolError> {
    terminator(payload).map(|(_, warnings)| warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ok_gets_new_status_flags_and_keeps_the_rest() {
        let ok = OkPacket {
            affected_rows: 300,
            last_insert_id: 1 << 20,
            status: StatusFlags(StatusFlags::IN_TRANS | StatusFlags::AUTOCOMMIT),
            warnings: 2,
        };
        let mut p = ok_payload(
            &ok,
            CapabilityFlags(CapabilityFlags::PROTOCOL_41),
            OK_HEADER,
        )
        .to_vec();
        set_ok_status(&mut p, StatusFlags(StatusFlags::AUTOCOMMIT)).unwrap();
        let back = OkPacket::parse(&p).unwrap();
        assert_eq!(back.status, StatusFlags(StatusFlags::AUTOCOMMIT));
        assert_eq!(
            (back.affected_rows, back.last_insert_id, back.warnings),
            (300, 1 << 20, 2)
        );
        let mut err = ErrPacket::new(1062, "23000", "dup").payload().to_vec();
        assert!(set_ok_status(&mut err, StatusFlags(0)).is_err());
        assert!(set_ok_status(&mut [0u8, 1][..], StatusFlags(0)).is_err());
    }

    #[test]
    fn err_round_trip() {
        let e = ErrPacket::new(1045, "28000", "Access denied for user 'a'@'h'");
        let p = e.payload();
        assert_eq!(ErrPacket::parse(&p).unwrap(), e);
        assert_eq!(
            e.to_string(),
            "ERROR 1045 (28000): Access denied for user 'a'@'h'"
        );
    }

    #[test]
    fn ok_round_trip() {
        let ok = OkPacket {
            affected_rows: 3,
            last_insert_id: 70000,
            status: StatusFlags(StatusFlags::AUTOCOMMIT | StatusFlags::IN_TRANS),
            warnings: 2,
        };
        let caps = CapabilityFlags(CapabilityFlags::PROTOCOL_41 | CapabilityFlags::SESSION_TRACK);
        let p = ok_payload(&ok, caps, OK_HEADER);
        assert_eq!(OkPacket::parse(&p).unwrap(), ok);
        let p = ok_payload(&ok, caps, EOF_HEADER);
        assert_eq!(terminator_status(&p).unwrap(), ok.status);
    }

    #[test]
    fn classic_eof_status() {
        let p = eof_payload(1, StatusFlags(StatusFlags::MORE_RESULTS_EXISTS));
        assert!(terminator_status(&p).unwrap().more_results());
        assert_eq!(terminator_warnings(&p).unwrap(), 1);
        let ok = OkPacket {
            warnings: 3,
            ..Default::default()
        };
        let p = ok_payload(
            &ok,
            CapabilityFlags(CapabilityFlags::PROTOCOL_41),
            EOF_HEADER,
        );
        assert_eq!(terminator_warnings(&p).unwrap(), 3);
        assert!(terminator_warnings(&[0x00, 0, 0]).is_err());
    }
}
