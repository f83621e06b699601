//! A client or backend connection, over TCP or a Unix socket, that may have been
//! upgraded to TLS, on the client side (we accepted it) or the backend side (we opened
//! it). One type so the relay code is written once. Also where a connection goes
//! ([`Endpoint`]) and where it came from ([`Peer`]).

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// The transport under a connection, before any TLS.
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    fn sock_ref(&self) -> socket2::SockRef<'_> {
        match self {
            Socket::Tcp(s) => socket2::SockRef::from(s),
            Socket::Unix(s) => socket2::SockRef::from(s),
        }
    }
}

/// Where a connection goes: a server's `host:port`, or its Unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(String),
    Unix(PathBuf),
}

impl Endpoint {
    /// Opens the connection (no deadline: callers put one around it).
    pub async fn connect(&self) -> io::Result<Socket> {
        match self {
            Endpoint::Tcp(address) => {
                let tcp = TcpStream::connect(address).await?;
                let _ = tcp.set_nodelay(true);
                Ok(Socket::Tcp(tcp))
            }
            Endpoint::Unix(path) => Ok(Socket::Unix(UnixStream::connect(path).await?)),
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Endpoint::Unix(_))
    }
}

/// `host:port`, or the socket's path: how servers are named in errors, the admin API and
/// metrics.
impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(address) => f.write_str(address),
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Where a client connected from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    /// Through Sluice's Unix socket: the client runs on this machine, and is shown as
    /// `localhost`, as the server shows its own socket's clients.
    Local,
}

impl Peer {
    /// The address routing rules match a client's network against: a socket client is
    /// on this machine, so loopback.
    pub fn ip(&self) -> IpAddr {
        match self {
            Peer::Tcp(a) => a.ip(),
            Peer::Local => IpAddr::V4(Ipv4Addr::LOCALHOST),
        }
    }

    /// The host part of `'user'@'host'` as the server would write it: the IP address, or
    /// `localhost` for a socket client.
    pub fn host(&self) -> String {
        match self {
            Peer::Tcp(a) => a.ip().to_string(),
            Peer::Local => "localhost".to_owned(),
        }
    }

    /// A Unix socket is a secure transport, as the server counts it: passwords may cross
    /// it in clear, and it satisfies `require_tls` (the server's
    /// `require_secure_transport`).
    pub fn is_local(&self) -> bool {
        matches!(self, Peer::Local)
    }
}

/// `ip:port`, or `localhost` (as a processlist's Host column shows them).
impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(a) => a.fmt(f),
            Peer::Local => f.write_str("localhost"),
        }
    }
}

pub enum Stream {
    Plain(Socket),
    /// TLS we terminate: a client connected to us.
    Accepted(Box<tokio_rustls::server::TlsStream<Socket>>),
    /// TLS we initiated: our connection to a backend.
    Connected(Box<tokio_rustls::client::TlsStream<Socket>>),
    /// Taken apart for a TLS upgrade, or shut.
    Closed,
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "connection closed")
}

impl Stream {
    pub fn socket(&self) -> Option<&Socket> {
        match self {
            Stream::Plain(s) => Some(s),
            Stream::Accepted(s) => Some(s.get_ref().0),
            Stream::Connected(s) => Some(s.get_ref().0),
            Stream::Closed => None,
        }
    }

    /// Takes the plain socket out for a TLS upgrade, leaving `Closed`.
    pub fn take_plain(&mut self) -> Option<Socket> {
        match std::mem::replace(self, Stream::Closed) {
            Stream::Plain(socket) => Some(socket),
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
        let Some(socket) = self.socket() else {
            return true;
        };
        match socket.sock_ref().peek(&mut probe) {
            Ok(_) => true,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        }
    }
}

/// Forwards each call to the TCP or Unix stream inside.
macro_rules! delegate {
    ($self:ident.$method:ident($($arg:expr),*)) => {
        match $self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).$method($($arg),*),
            Socket::Unix(s) => Pin::new(s).$method($($arg),*),
        }
    };
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self.poll_read(cx, buf))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self.poll_shutdown(cx))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        delegate!(self.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Socket::Tcp(s) => s.is_write_vectored(),
            Socket::Unix(s) => s.is_write_vectored(),
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
