//! Length-encoded integers and strings, and a small cursor over a payload.

use crate::ProtocolError;
use bytes::{BufMut, BytesMut};

/// Reads protocol fields from a payload, failing with [`ProtocolError::Truncated`] at the end.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
    pub fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.pos..];
        self.pos = self.buf.len();
        r
    }
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        if self.remaining() < n {
            return Err(ProtocolError::Truncated(what));
        }
        let r = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(r)
    }
    pub fn u8(&mut self, what: &'static str) -> Result<u8, ProtocolError> {
        Ok(self.take(1, what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, ProtocolError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u24(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        let b = self.take(3, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], 0]))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A length-encoded integer. `0xfb` (NULL) and `0xff` are not integers here.
    pub fn lenenc_int(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        match self.u8(what)? {
            b @ 0..=0xfa => Ok(b as u64),
            0xfc => self.u16(what).map(u64::from),
            0xfd => self.u24(what).map(u64::from),
            0xfe => self.u64(what),
            _ => Err(ProtocolError::Malformed(what)),
        }
    }
    pub fn lenenc_bytes(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        let n = self.lenenc_int(what)?;
        let n = usize::try_from(n).map_err(|_| ProtocolError::Malformed(what))?;
        self.take(n, what)
    }
    /// Bytes up to (not including) a NUL, which is consumed.
    pub fn null_terminated(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        let rest = &self.buf[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(ProtocolError::Truncated(what))?;
        self.pos += end + 1;
        Ok(&rest[..end])
    }
}

pub fn put_lenenc_int(buf: &mut BytesMut, v: u64) {
    match v {
        0..=0xfa => buf.put_u8(v as u8),
        0xfb..=0xffff => {
            buf.put_u8(0xfc);
            buf.put_u16_le(v as u16);
        }
        0x1_0000..=0xff_ffff => {
            buf.put_u8(0xfd);
            buf.put_uint_le(v, 3);
        }
        _ => {
            buf.put_u8(0xfe);
            buf.put_u64_le(v);
        }
    }
}

pub fn put_lenenc_bytes(buf: &mut BytesMut, b: &[u8]) {
    put_lenenc_int(buf, b.len() as u64);
    buf.put_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trip() {
        for v in [
            0u64,
            250,
            251,
            0xffff,
            0x1_0000,
            0xff_ffff,
            0x100_0000,
            u64::MAX,
        ] {
            let mut b = BytesMut::new();
            put_lenenc_int(&mut b, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.lenenc_int("v").unwrap(), v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn truncated_and_null_are_errors() {
        assert_eq!(
            Reader::new(&[0xfc, 1]).lenenc_int("x"),
            Err(ProtocolError::Truncated("x"))
        );
        assert_eq!(
            Reader::new(&[0xfb]).lenenc_int("x"),
            Err(ProtocolError::Malformed("x"))
        );
        assert!(Reader::new(b"abc").null_terminated("s").is_err());
    }
}
