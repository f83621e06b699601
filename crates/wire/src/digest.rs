//! What two servers' answers to the same statement share when their data is the same:
//! a digest of a whole response that leaves out what a server says about itself rather
//! than about the data. Transaction replay compares the digest of each answer the
//! client saw with the new server's answer to the same statement.
//!
//! Kept: column counts and definitions, every row (text or binary), an OK's affected
//! rows and insert id, an ERR's code and SQL state, and how results follow each other.
//! Left out: status flags, warning counts, an OK's info text and session-state changes
//! (the GTID a commit got, for one), which differ between servers for the same result.

use crate::flags::CapabilityFlags;
use crate::packet::{Header, HEADER_LEN, MAX_PAYLOAD};
use crate::response::{ErrPacket, OkPacket, EOF_HEADER, ERR_HEADER};
use crate::tracker::{ResponseKind, ResponseTracker, Step, HEAD_NEEDED};
use crate::ProtocolError;
use std::borrow::Cow;
use std::hash::{BuildHasher, Hash, Hasher};

/// Fixed, so that digests compare within the process; the hash only needs to be fast
/// and well spread (answers are compared with themselves, not kept or shown).
const SEEDS: [u64; 4] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
];

/// The digest of `response`, the whole answer to one command of `kind` as a client with
/// `caps` receives it. An incomplete or malformed response is an error.
pub fn response_digest(
    response: &[u8],
    kind: ResponseKind,
    caps: CapabilityFlags,
) -> Result<u64, ProtocolError> {
    let mut tracker = ResponseTracker::new(kind, caps);
    let [a, b, c, d] = SEEDS;
    let mut hash = ahash::RandomState::with_seeds(a, b, c, d).build_hasher();
    let mut rest = response;
    loop {
        let Some((payload, used)) = logical_packet(rest)? else {
            return Err(ProtocolError::Malformed(
                "response ends before it is complete",
            ));
        };
        rest = &rest[used..];
        let head = &payload[..payload.len().min(HEAD_NEEDED)];
        // The packet's first chunk length, as the tracker takes it.
        let len = payload.len().min(MAX_PAYLOAD);
        let is_ok = tracker.is_ok_packet(head, len);
        let step = tracker.feed(head, len)?;
        match payload.first().copied() {
            _ if is_ok => {
                let ok = OkPacket::parse(&payload)?;
                (b'o', ok.affected_rows, ok.last_insert_id).hash(&mut hash);
            }
            Some(ERR_HEADER) => {
                let err = ErrPacket::parse(&payload)?;
                (b'e', err.code, err.state).hash(&mut hash);
            }
            // An EOF: a terminator or the end of column definitions, status only.
            Some(EOF_HEADER) if payload.len() < 9 => b'f'.hash(&mut hash),
            _ => (b'p', &payload[..]).hash(&mut hash),
        }
        match step {
            Step::Continue => {}
            Step::Done(_) if rest.is_empty() => return Ok(hash.finish()),
            Step::Done(_) => return Err(ProtocolError::Malformed("data after the response")),
            // The client's file is not part of what is compared: such a statement
            // can't be replayed anyway, as the file is gone with the client's turn.
            Step::LocalInfile => return Err(ProtocolError::Malformed("LOCAL INFILE")),
        }
    }
}

/// A logical packet's payload and the bytes its chunks took.
type Whole<'a> = (Cow<'a, [u8]>, usize);

/// The payload of the logical packet at the front of `buf` and the bytes it takes;
/// borrowed unless it spans several chunks. `None`: `buf` ends inside it.
fn logical_packet(buf: &[u8]) -> Result<Option<Whole<'_>>, ProtocolError> {
    let Some(h) = Header::parse(buf) else {
        return Ok(None);
    };
    let end = HEADER_LEN + h.len;
    if buf.len() < end {
        return Ok(None);
    }
    if !h.continues() {
        return Ok(Some((Cow::Borrowed(&buf[HEADER_LEN..end]), end)));
    }
    let mut payload = buf[HEADER_LEN..end].to_vec();
    let mut at = end;
    loop {
        let Some(next) = Header::parse(&buf[at..]) else {
            return Ok(None);
        };
        let chunk_end = at + HEADER_LEN + next.len;
        if buf.len() < chunk_end {
            return Ok(None);
        }
        payload.extend_from_slice(&buf[at + HEADER_LEN..chunk_end]);
        at = chunk_end;
        if !next.continues() {
            return Ok(Some((Cow::Owned(payload), at)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::write_packet;
    use bytes::BytesMut;

    fn response(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = BytesMut::new();
        for (i, p) in payloads.iter().enumerate() {
            write_packet(&mut out, (i + 1) as u8, p);
        }
        out.to_vec()
    }

    fn ok(affected: u8, insert_id: u8, status: u16, warnings: u16, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0x00, affected, insert_id];
        p.extend_from_slice(&status.to_le_bytes());
        p.extend_from_slice(&warnings.to_le_bytes());
        p.extend_from_slice(rest);
        p
    }

    fn eof(status: u16, warnings: u16) -> Vec<u8> {
        let mut p = vec![0xfe];
        p.extend_from_slice(&warnings.to_le_bytes());
        p.extend_from_slice(&status.to_le_bytes());
        p
    }

    fn column(name: &str) -> Vec<u8> {
        let mut p = Vec::new();
        for s in ["def", "test", "t", "t", name, name] {
            p.push(s.len() as u8);
            p.extend_from_slice(s.as_bytes());
        }
        p.extend_from_slice(&[0x0c, 0x21, 0x00, 0x0b, 0, 0, 0, 0xfd, 0, 0, 0, 0, 0]);
        p
    }

    fn text_row(values: &[&str]) -> Vec<u8> {
        let mut p = Vec::new();
        for v in values {
            p.push(v.len() as u8);
            p.extend_from_slice(v.as_bytes());
        }
        p
    }

    fn query(payloads: &[&[u8]]) -> u64 {
        response_digest(
            &response(payloads),
            ResponseKind::Query,
            CapabilityFlags(CapabilityFlags::PROTOCOL_41),
        )
        .unwrap()
    }

    #[test]
    fn an_ok_is_its_affected_rows_and_insert_id() {
        let a = query(&[&ok(1, 7, 0x0003, 0, b"")]);
        // Other status flags, warnings and an info text: the same result.
        assert_eq!(a, query(&[&ok(1, 7, 0x4002, 2, b"\x05Rows:")]));
        assert_ne!(a, query(&[&ok(2, 7, 0x0003, 0, b"")]));
        assert_ne!(a, query(&[&ok(1, 8, 0x0003, 0, b"")]));
    }

    #[test]
    fn a_result_set_is_its_columns_and_rows() {
        let set = |rows: &[Vec<u8>], status: u16| {
            let mut p: Vec<Vec<u8>> = vec![vec![1], column("id"), eof(status, 0)];
            p.extend(rows.iter().cloned());
            p.push(eof(status, 1));
            let refs: Vec<&[u8]> = p.iter().map(|v| &v[..]).collect();
            query(&refs)
        };
        let a = set(&[text_row(&["1"]), text_row(&["2"])], 0x0002);
        assert_eq!(a, set(&[text_row(&["1"]), text_row(&["2"])], 0x0003));
        assert_ne!(a, set(&[text_row(&["1"]), text_row(&["3"])], 0x0002));
        assert_ne!(
            a,
            set(&[text_row(&["2"]), text_row(&["1"])], 0x0002),
            "order counts"
        );
        assert_ne!(a, set(&[text_row(&["1"])], 0x0002));
    }

    #[test]
    fn an_ok_terminator_is_read_as_an_ok() {
        // CLIENT_DEPRECATE_EOF: no EOF after the columns, and an OK-formatted terminator
        // (0xfe) whose session state (a commit's GTID here) differs between servers.
        let caps = CapabilityFlags(CapabilityFlags::PROTOCOL_41 | CapabilityFlags::DEPRECATE_EOF);
        let set = |value: &str, gtid: &[u8]| {
            let mut end = ok(0, 0, 0x4002, 0, gtid);
            end[0] = 0xfe;
            let row = text_row(&[value]);
            let r = response(&[&[1], &column("id"), &row, &end]);
            response_digest(&r, ResponseKind::Query, caps).unwrap()
        };
        assert_eq!(
            set("1", b"\x00\x08\x03\x06\x000-1-5"),
            set("1", b"\x00\x08\x03\x06\x000-2-9")
        );
        assert_ne!(set("1", b""), set("2", b""));
    }

    #[test]
    fn an_error_is_its_code_and_state() {
        let err = |code: u16, message: &str| {
            let mut p = vec![0xff];
            p.extend_from_slice(&code.to_le_bytes());
            p.extend_from_slice(b"#23000");
            p.extend_from_slice(message.as_bytes());
            p
        };
        let a = query(&[&err(1062, "Duplicate entry '1' for key 'PRIMARY'")]);
        assert_eq!(
            a,
            query(&[&err(1062, "Duplicate entry '1' for key 'PRIMARY'")])
        );
        assert_ne!(a, query(&[&err(1048, "Column 'c' cannot be null")]));
        assert_ne!(a, query(&[&ok(0, 0, 0, 0, b"")]));
    }

    #[test]
    fn a_row_over_several_chunks_is_read_whole() {
        let caps = CapabilityFlags(CapabilityFlags::PROTOCOL_41);
        let set = |last: u8, status: u16| {
            let mut row = vec![0xfc, 0x10, 0x00, 0x01];
            row.resize(MAX_PAYLOAD + 10, b'x');
            *row.last_mut().unwrap() = last;
            let mut out = BytesMut::new();
            let mut seq = 1;
            for p in [&[1][..], &column("id"), &eof(status, 0)] {
                seq = write_packet(&mut out, seq, p);
            }
            seq = write_packet(&mut out, seq, &row);
            write_packet(&mut out, seq, &eof(status, 0));
            response_digest(&out, ResponseKind::Query, caps).unwrap()
        };
        assert_eq!(set(b'a', 2), set(b'a', 3));
        assert_ne!(set(b'a', 2), set(b'b', 2));
    }

    #[test]
    fn incomplete_or_trailing_responses_are_refused() {
        let whole = response(&[
            &[1],
            &column("id"),
            &eof(0, 0),
            &text_row(&["1"]),
            &eof(0, 0),
        ]);
        let caps = CapabilityFlags(CapabilityFlags::PROTOCOL_41);
        assert!(response_digest(&whole, ResponseKind::Query, caps).is_ok());
        let cut = &whole[..whole.len() - 3];
        assert!(response_digest(cut, ResponseKind::Query, caps).is_err());
        let mut more = whole.clone();
        more.extend_from_slice(&response(&[&ok(0, 0, 0, 0, b"")]));
        assert!(response_digest(&more, ResponseKind::Query, caps).is_err());
    }
}
