//! Packet framing: a 3-byte length, a sequence id, then the payload.
//!
//! Payloads of `MAX_PAYLOAD` bytes or more are split into full-size chunks followed by a
//! shorter one (possibly empty). This is the only place that knows that rule; everything
//! else deals in logical packets or forwards chunks untouched.

use crate::ProtocolError;
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The largest payload one chunk can carry; a chunk of exactly this size continues.
pub const MAX_PAYLOAD: usize = 0xff_ffff;
pub const HEADER_LEN: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub len: usize,
    pub seq: u8,
}

impl Header {
    /// Reads a chunk header from the front of `buf`, if four bytes are there.
    #[inline]
    pub fn parse(buf: &[u8]) -> Option<Header> {
        if buf.len() < HEADER_LEN {
            return None;
        }
        Some(Header {
            len: buf[0] as usize | (buf[1] as usize) << 8 | (buf[2] as usize) << 16,
            seq: buf[3],
        })
    }

    /// Whether another chunk of the same logical packet follows this one.
    #[inline]
    pub fn continues(self) -> bool {
        self.len == MAX_PAYLOAD
    }
}

/// The sequence id and payload of the single-chunk packet that fills `buf` exactly.
pub fn split_packet(buf: &[u8]) -> Option<(u8, &[u8])> {
    let h = Header::parse(buf)?;
    (buf.len() == HEADER_LEN + h.len && !h.continues()).then(|| (h.seq, &buf[HEADER_LEN..]))
}

/// One logical packet, reassembled from its chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Sequence id of the first chunk.
    pub seq: u8,
    /// Sequence id of the last chunk: the next packet in the exchange uses this plus one.
    pub last_seq: u8,
    pub payload: Bytes,
}

/// Takes one whole logical packet from the front of `buf`.
///
/// `Ok(None)` means more bytes are needed (nothing is consumed). Fails when the payload
/// would exceed `limit` (checked before the bytes arrive, so a hostile length can't make
/// us buffer) or when chunks of one packet are out of sequence.
pub fn take_packet(buf: &mut BytesMut, limit: usize) -> Result<Option<Packet>, ProtocolError> {
    let mut offset = 0;
    let mut total = 0usize;
    let mut first_seq = None;
    let mut last_seq = 0u8;
    loop {
        let Some(h) = Header::parse(&buf[offset..]) else {
            return Ok(None);
        };
        if let Some(first) = first_seq {
            let expected = last_seq.wrapping_add(1);
            if h.seq != expected {
                return Err(ProtocolError::Sequence {
                    got: h.seq,
                    expected,
                });
            }
            let _ = first;
        } else {
            first_seq = Some(h.seq);
        }
        last_seq = h.seq;
        total += h.len;
        if total > limit {
            return Err(ProtocolError::TooLarge { len: total, limit });
        }
        if buf.len() < offset + HEADER_LEN + h.len {
            return Ok(None);
        }
        offset += HEADER_LEN + h.len;
        if !h.continues() {
            break;
        }
    }
    let seq = first_seq.unwrap_or(0);
    let mut frame = buf.split_to(offset);
    if offset == HEADER_LEN + total {
        frame.advance(HEADER_LEN);
        return Ok(Some(Packet {
            seq,
            last_seq,
            payload: frame.freeze(),
        }));
    }
    let mut payload = BytesMut::with_capacity(total);
    while !frame.is_empty() {
        let h = Header::parse(&frame).expect("whole chunks were checked above");
        frame.advance(HEADER_LEN);
        payload.put_slice(&frame.split_to(h.len));
    }
    Ok(Some(Packet {
        seq,
        last_seq,
        payload: payload.freeze(),
    }))
}

/// Appends `payload` as one logical packet starting at sequence id `seq`, split into
/// chunks as the protocol requires. Returns the sequence id of the next packet.
pub fn write_packet(out: &mut BytesMut, mut seq: u8, payload: &[u8]) -> u8 {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_PAYLOAD);
        out.reserve(HEADER_LEN + n);
        out.put_uint_le(n as u64, 3);
        out.put_u8(seq);
        out.put_slice(&rest[..n]);
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_PAYLOAD {
            return seq;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_packet_round_trip() {
        let mut b = BytesMut::new();
        assert_eq!(write_packet(&mut b, 3, b"hello"), 4);
        assert_eq!(&b[..4], &[5, 0, 0, 3]);
        let p = take_packet(&mut b, 1 << 20).unwrap().unwrap();
        assert_eq!((p.seq, p.last_seq, &p.payload[..]), (3, 3, &b"hello"[..]));
        assert!(b.is_empty());
    }

    #[test]
    fn exact_max_payload_gets_empty_trailer() {
        let payload = vec![7u8; MAX_PAYLOAD];
        let mut b = BytesMut::new();
        assert_eq!(write_packet(&mut b, 0, &payload), 2);
        assert_eq!(b.len(), 2 * HEADER_LEN + MAX_PAYLOAD);
        let p = take_packet(&mut b, 1 << 30).unwrap().unwrap();
        assert_eq!(p.payload.len(), MAX_PAYLOAD);
        assert_eq!((p.seq, p.last_seq), (0, 1));
    }

    #[test]
    fn large_packet_reassembles() {
        let payload: Vec<u8> = (0..MAX_PAYLOAD * 2 + 10).map(|i| i as u8).collect();
        let mut b = BytesMut::new();
        assert_eq!(write_packet(&mut b, 255, &payload), 2);
        let p = take_packet(&mut b, 1 << 30).unwrap().unwrap();
        assert_eq!(&p.payload[..], &payload[..]);
        assert_eq!((p.seq, p.last_seq), (255, 1));
    }

    #[test]
    fn partial_input_needs_more() {
        let mut b = BytesMut::new();
        write_packet(&mut b, 0, b"abcdef");
        let mut part = BytesMut::from(&b[..7]);
        assert_eq!(take_packet(&mut part, 100).unwrap(), None);
        assert_eq!(part.len(), 7);
    }

    #[test]
    fn oversized_length_is_refused_before_buffering() {
        let mut b = BytesMut::from(&[0xff, 0xff, 0x7f, 0][..]);
        assert!(matches!(
            take_packet(&mut b, 1024),
            Err(ProtocolError::TooLarge { .. })
        ));
    }

    #[test]
    fn chunk_out_of_sequence_is_refused() {
        let mut b = BytesMut::new();
        b.put_uint_le(MAX_PAYLOAD as u64, 3);
        b.put_u8(0);
        b.put_slice(&vec![0u8; MAX_PAYLOAD]);
        b.put_slice(&[1, 0, 0, 5, 9]);
        assert!(matches!(
            take_packet(&mut b, 1 << 30),
            Err(ProtocolError::Sequence {
                got: 5,
                expected: 1
            })
        ));
    }
}
