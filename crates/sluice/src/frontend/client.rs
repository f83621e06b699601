//! The client's socket: a read buffer the relay streams from and helpers to send the
//! packets Sluice writes itself (handshake, OK, ERR).

use crate::error::SessionError;
use crate::stream::{Peer, Stream};
use bytes::{Buf, BytesMut};
use sluice_wire::packet::{take_packet, write_packet, Header, Packet, HEADER_LEN, MAX_PAYLOAD};
use sluice_wire::response::{ok_payload, ErrPacket, OkPacket, OK_HEADER};
use sluice_wire::CapabilityFlags;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct ClientConn {
    pub stream: Stream,
    pub rbuf: BytesMut,
    pub peer: Peer,
    /// Capabilities negotiated with this client.
    pub caps: CapabilityFlags,
    /// MariaDB extended capabilities negotiated with this client.
    pub mariadb_caps: u32,
    /// Bytes written to the client so far.
    pub sent: u64,
    /// The code and SQL state of the error packet Sluice itself answered with, if it did
    /// (cleared by the session per statement): responses relayed from a server are
    /// tracked apart.
    pub answered_error: Option<(u16, [u8; 5])>,
    /// The sequence id the answer to the next skipped request must carry instead of the
    /// one after the request's: set while that answer continues a result already begun
    /// (a read over several shards whose later shard cannot be had).
    pub continue_at: Option<u8>,
}

impl ClientConn {
    /// Replaces the command packet at the front of the buffer (`len` bytes of payload,
    /// all read in) with one whose payload `rewrite` makes of its payload, the bytes
    /// after it kept. Returns the new payload's length.
    pub fn rewrite_front(&mut self, len: usize, rewrite: impl FnOnce(&[u8]) -> Vec<u8>) -> usize {
        let rest = self.rbuf.split_off(sluice_wire::packet::HEADER_LEN + len);
        let payload = rewrite(&self.rbuf[sluice_wire::packet::HEADER_LEN..]);
        self.rbuf.clear();
        write_packet(&mut self.rbuf, 0, &payload);
        self.rbuf.unsplit(rest);
        payload.len()
    }

    pub fn new(stream: Stream, peer: Peer) -> ClientConn {
        ClientConn {
            stream,
            // No buffer until the client sends: see `spare`.
            rbuf: BytesMut::new(),
            peer,
            caps: CapabilityFlags(0),
            mariadb_caps: 0,
            sent: 0,
            answered_error: None,
            continue_at: None,
        }
    }

    /// TLS, or Sluice's Unix socket: a transport a password may cross in clear, as the
    /// server counts them (`require_secure_transport`, `caching_sha2_password`).
    pub fn secure(&self) -> bool {
        self.stream.is_tls() || self.peer.is_local()
    }

    /// Reads more bytes; a closed connection is an `UnexpectedEof` error.
    pub async fn read_more(&mut self) -> Result<usize, SessionError> {
        if self.rbuf.capacity() == 0 {
            return self.read_into_spare().await;
        }
        if self.rbuf.capacity() - self.rbuf.len() < 4 * 1024 {
            self.rbuf.reserve(64 * 1024);
        }
        match self.stream.read_buf(&mut self.rbuf).await? {
            0 => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
            n => Ok(n),
        }
    }

    /// A read with no buffer held while it waits, so that an idle client holds none: a
    /// spare is taken for each attempt and given back when the read must wait (its
    /// waker is registered all the same, and a short read still marks the socket
    /// drained, as the read it replaces did).
    async fn read_into_spare(&mut self) -> Result<usize, SessionError> {
        let (stream, rbuf) = (&mut self.stream, &mut self.rbuf);
        let n = std::future::poll_fn(|cx| {
            let mut buf = spare::take();
            let polled =
                tokio_util::io::poll_read_buf(std::pin::Pin::new(&mut *stream), cx, &mut buf);
            match polled {
                std::task::Poll::Ready(Ok(n)) if n > 0 => *rbuf = buf,
                _ => spare::give(buf),
            }
            polled
        })
        .await?;
        match n {
            0 => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
            n => Ok(n),
        }
    }

    /// Gives the read buffer back to the thread's spares when nothing is in it: called
    /// as the session waits for its next command, so that an idle client holds no
    /// buffer (16 KiB, most of an idle client's memory).
    pub fn release_idle(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > 0 {
            spare::give(std::mem::take(&mut self.rbuf));
        }
    }

    /// Puts `bytes` (a request read before) back at the front of the buffer, before what
    /// the client sent since, to be sent again.
    pub fn put_back(&mut self, bytes: &[u8]) {
        let rest = self.rbuf.split();
        self.rbuf.extend_from_slice(bytes);
        self.rbuf.extend_from_slice(&rest);
    }

    /// Reads until the buffer holds at least `bytes` (a statement's whole packet, or
    /// the part a stage looks at).
    #[inline]
    pub async fn fill_to(&mut self, bytes: usize) -> Result<(), SessionError> {
        while self.rbuf.len() < bytes {
            self.read_more().await?;
        }
        Ok(())
    }

    /// Reads the rest of a command of `len` bytes into the buffer, unless it is too
    /// large to hold (over `max`, or a payload continued in more packets): false then,
    /// and it streams.
    #[inline]
    pub async fn read_whole(&mut self, len: usize, max: usize) -> Result<bool, SessionError> {
        if len >= MAX_PAYLOAD || len > max {
            return Ok(false);
        }
        self.fill_to(HEADER_LEN + len).await?;
        Ok(true)
    }

    /// Waits until the buffer holds a chunk header and the first `want` payload bytes
    /// (fewer if the chunk is shorter). Returns the header.
    pub async fn peek_header(&mut self, want: usize) -> Result<Header, SessionError> {
        loop {
            if let Some(h) = Header::parse(&self.rbuf) {
                if self.rbuf.len() >= 4 + h.len.min(want) {
                    return Ok(h);
                }
            }
            self.read_more().await?;
        }
    }

    /// Reads one whole logical packet of at most `limit` bytes.
    pub async fn read_packet(&mut self, limit: usize) -> Result<Packet, SessionError> {
        loop {
            if let Some(p) = take_packet(&mut self.rbuf, limit)? {
                return Ok(p);
            }
            self.read_more().await?;
        }
    }

    /// Skips one logical packet without keeping it (for refused commands of any size).
    pub async fn skip_packet(&mut self) -> Result<u8, SessionError> {
        let mut span =
            sluice_wire::tracker::RequestSpan::new(Header::parse(&self.rbuf).map_or(0, |h| h.seq));
        loop {
            let (n, done) = span.scan(&self.rbuf)?;
            self.rbuf.advance(n);
            if done {
                return Ok(self.continue_at.take().unwrap_or(span.next_seq()));
            }
            self.read_more().await?;
        }
    }

    /// Writes without flushing: the relay flushes when it waits or finishes.
    pub async fn stream_write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sent += bytes.len() as u64;
        self.stream.write_all(bytes).await
    }

    /// [`Self::stream_write`] of two pieces in one system call where it can.
    pub async fn stream_write_two(&mut self, a: &[u8], b: &[u8]) -> std::io::Result<()> {
        self.sent += (a.len() + b.len()) as u64;
        let mut bufs = [std::io::IoSlice::new(a), std::io::IoSlice::new(b)];
        let mut rest: &mut [std::io::IoSlice<'_>] = &mut bufs;
        while !rest.is_empty() {
            let n = self.stream.write_vectored(rest).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            std::io::IoSlice::advance_slices(&mut rest, n);
        }
        Ok(())
    }

    pub async fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush().await
    }

    pub async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sent += bytes.len() as u64;
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    pub async fn write_packet(&mut self, seq: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut out = BytesMut::with_capacity(payload.len() + 4);
        write_packet(&mut out, seq, payload);
        self.write_all(&out).await
    }

    pub async fn write_err(&mut self, seq: u8, err: &ErrPacket) -> std::io::Result<()> {
        self.answered_error = Some((err.code, err.state));
        self.write_packet(seq, &err.payload()).await
    }

    pub async fn write_ok(&mut self, seq: u8, ok: &OkPacket) -> std::io::Result<()> {
        self.write_packet(seq, &ok_payload(ok, self.caps, OK_HEADER))
            .await
    }
}

/// Read buffers between commands, kept per thread: a session takes one when its client
/// sends and gives it back once the command is consumed, so that the buffers in use
/// follow the commands in flight rather than the clients connected. A take and a give
/// are a thread-local pop and push, where each statement would otherwise allocate and
/// free 16 KiB.
mod spare {
    use bytes::BytesMut;
    use std::cell::RefCell;

    /// A new buffer's size: most commands fit, and a larger one grows it.
    const SIZE: usize = 16 * 1024;
    /// Spares a thread keeps: as many as sessions it serves at once, about.
    const KEEP: usize = 64;
    /// Larger buffers (after a large packet) are freed rather than kept.
    const KEEP_MAX: usize = 128 * 1024;

    thread_local! {
        static SPARES: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    }

    pub fn take() -> BytesMut {
        SPARES
            .with(|s| s.borrow_mut().pop())
            .unwrap_or_else(|| BytesMut::with_capacity(SIZE))
    }

    pub fn give(mut buf: BytesMut) {
        // Reclaims the room consumed commands left at the front (no copy: it is empty).
        buf.clear();
        buf.reserve(SIZE);
        if buf.capacity() > KEEP_MAX {
            return;
        }
        SPARES.with(|s| {
            let mut spares = s.borrow_mut();
            if spares.len() < KEEP {
                spares.push(buf);
            }
        });
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_buffer_given_back_is_taken_again_whole() {
            let mut buf = take();
            assert!(buf.capacity() >= SIZE);
            buf.extend_from_slice(&[1; 1000]);
            let _ = buf.split_to(1000);
            let start = buf.as_ptr() as usize - 1000;
            give(buf);
            let again = take();
            assert!(again.is_empty());
            assert!(again.capacity() >= SIZE, "{}", again.capacity());
            // The same memory, its consumed front reclaimed.
            assert_eq!(again.as_ptr() as usize, start);
        }

        #[test]
        fn large_buffers_are_freed_and_the_spares_are_bounded() {
            let mut big = BytesMut::with_capacity(KEEP_MAX * 2);
            big.extend_from_slice(b"x");
            big.clear();
            give(big);
            for _ in 0..KEEP * 2 {
                give(BytesMut::with_capacity(SIZE));
            }
            let count = SPARES.with(|s| s.borrow().len());
            assert!(count <= KEEP, "{count}");
            assert!(SPARES.with(|s| s.borrow().iter().all(|b| b.capacity() <= KEEP_MAX)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::Socket;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    /// A client that waits holds no buffer: one is taken when its bytes arrive, and given
    /// back once they are consumed.
    #[tokio::test]
    async fn a_waiting_client_holds_no_buffer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut sender = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (socket, addr) = listener.accept().await.unwrap();
        let mut conn = ClientConn::new(Stream::Plain(Socket::Tcp(socket)), Peer::Tcp(addr));
        assert_eq!(conn.rbuf.capacity(), 0);
        // Nothing sent: the read is still waiting when given up, with no buffer taken.
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), conn.read_more()).await;
        assert!(waited.is_err(), "a read returned with nothing sent");
        assert_eq!(conn.rbuf.capacity(), 0);
        sender.write_all(&[1, 0, 0, 0, 14]).await.unwrap();
        let n = conn.read_more().await.unwrap();
        assert_eq!(n, 5);
        assert!(conn.rbuf.capacity() >= 16 * 1024);
        // Not empty: kept.
        conn.release_idle();
        assert_eq!(conn.rbuf.len(), 5);
        conn.rbuf.advance(5);
        conn.release_idle();
        assert_eq!(conn.rbuf.capacity(), 0);
    }
}
