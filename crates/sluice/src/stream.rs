//! A TCP connection that may have been upgraded to TLS, on the client side (we accepted
//! it) or the backend side (we opened it). One type so the relay code is written once.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub enum Stream {
    Plain(TcpStream),
    /// TLS we terminate: a client connected to us.
    Accepted(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// TLS we initiated: our connection to a backend.
    Connected(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// Taken apart for a TLS upgrade, or shut.
    Closed,
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "connection closed")
}

impl Stream {
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Plain(s) => Some(s),
            Stream::Accepted(s) => Some(s.get_ref().0),
            Stream::Connected(s) => Some(s.get_ref().0),
            Stream::Closed => None,
        }
    }

    /// Takes the plain TCP stream out for a TLS upgrade, leaving `Closed`.
    pub fn take_plain(&mut self) -> Option<TcpStream> {
        match std::mem::replace(self, Stream::Closed) {
            Stream::Plain(tcp) => Some(tcp),
            other => {
                *self = other;
                None
            }
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Accepted(_) | Stream::Connected(_))
    }

    /// Whether the peer has closed or sent something unasked, without blocking or
    /// consuming: for idle pooled connections, where any readable byte means trouble.
    pub fn peer_gone_or_talking(&self) -> bool {
        // The socket is non-blocking (tokio made it so): no data means WouldBlock.
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let Some(tcp) = self.tcp() else {
            return true;
        };
        match socket2::SockRef::from(tcp).peek(&mut probe) {
            Ok(_) => true,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Accepted(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Connected(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Accepted(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Connected(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Accepted(s) => Pin::new(s).poll_flush(cx),
            Stream::Connected(s) => Pin::new(s).poll_flush(cx),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Accepted(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Connected(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Accepted(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Connected(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Accepted(s) => s.is_write_vectored(),
            Stream::Connected(s) => s.is_write_vectored(),
            Stream::Closed => false,
        }
    }
}
