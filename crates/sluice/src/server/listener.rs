//! Where clients connect: a TCP address or a Unix socket file, one per `[[listeners]]`.
//! A socket file is Sluice's while it runs: a stale one is replaced at start, a live one
//! (another process listening) stops the start, and it is removed at shutdown.

use super::handover::{Inherited, Named};
use crate::config::Config;
use crate::error::code;
use crate::frontend::config::ListenerConfig;
use crate::frontend::{self, ClientConn, Frontend};
use crate::shutdown::{self, Drain, Shutdown};
use crate::stats::Stats;
use crate::stream::{Peer, Socket, Stream};
use sluice_wire::response::ErrPacket;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {address}: {source}")]
    Tcp { address: String, source: io::Error },
    #[error("another process is listening on {}: is another Sluice or server using this socket?", .path.display())]
    SocketInUse { path: PathBuf },
    #[error("{} exists and is not a socket; not replacing it", .path.display())]
    NotASocket { path: PathBuf },
    #[error("cannot listen on socket {}: {source}", .path.display())]
    Unix { path: PathBuf, source: io::Error },
    #[error("listener socket_mode {mode:?} is not an octal mode")]
    Mode { mode: String },
}

pub enum Listener {
    Tcp(TcpListener),
    Unix {
        listener: UnixListener,
        /// Removes the file when the listener goes.
        file: SocketFile,
    },
}

impl Listener {
    pub async fn bind(cfg: &ListenerConfig) -> Result<Listener, ListenError> {
        match &cfg.socket {
            None => {
                let tcp = listen_tcp(&cfg.address, cfg.backlog)
                    .await
                    .map_err(|source| ListenError::Tcp {
                        address: cfg.address.clone(),
                        source,
                    })?;
                Ok(Listener::Tcp(tcp))
            }
            Some(path) => {
                let mode = cfg.socket_mode_bits().ok_or_else(|| ListenError::Mode {
                    mode: cfg.socket_mode.clone(),
                })?;
                let unix = |source| ListenError::Unix {
                    path: path.clone(),
                    source,
                };
                clear_stale(path).await?;
                let listener = listen_unix(path, cfg.backlog).map_err(unix)?;
                // Owned from here on, so a failure below removes the file again.
                let file = SocketFile::new(path).map_err(unix)?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                    .map_err(unix)?;
                Ok(Listener::Unix { listener, file })
            }
        }
    }

    /// The listener `cfg` names, on a socket the previous process listened on and handed
    /// over (`handover.rs`): already bound, with its file's mode as that process set it.
    pub fn inherited(cfg: &ListenerConfig, socket: OwnedFd) -> io::Result<Listener> {
        match &cfg.socket {
            None => {
                let std = std::net::TcpListener::from(socket);
                std.set_nonblocking(true)?;
                Ok(Listener::Tcp(TcpListener::from_std(std)?))
            }
            Some(path) => {
                let std = std::os::unix::net::UnixListener::from(socket);
                std.set_nonblocking(true)?;
                let listener = UnixListener::from_std(std)?;
                Ok(Listener::Unix {
                    listener,
                    file: SocketFile::new(path)?,
                })
            }
        }
    }

    /// How the hand-over names this listener.
    pub fn handover_name(cfg: &ListenerConfig) -> super::handover::Named {
        match &cfg.socket {
            None => super::handover::Named::Tcp(cfg.address.clone()),
            Some(path) => super::handover::Named::Unix(path.clone()),
        }
    }

    /// A copy of the listening socket, for handing over.
    pub fn socket_copy(&self) -> io::Result<OwnedFd> {
        match self {
            Listener::Tcp(l) => l.as_fd().try_clone_to_owned(),
            Listener::Unix { listener, .. } => listener.as_fd().try_clone_to_owned(),
        }
    }

    pub async fn accept(&self) -> io::Result<(Socket, Peer)> {
        match self {
            Listener::Tcp(l) => {
                let (tcp, peer) = l.accept().await?;
                let _ = tcp.set_nodelay(true);
                Ok((Socket::Tcp(tcp), Peer::Tcp(peer)))
            }
            Listener::Unix { listener, .. } => {
                let (unix, _) = listener.accept().await?;
                Ok((Socket::Unix(unix), Peer::Local))
            }
        }
    }

    /// The bound address, or the socket's path.
    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map_or_else(|e| e.to_string(), |a| a.to_string()),
            Listener::Unix { file, .. } => file.path.display().to_string(),
        }
    }
}

/// Binds a listening socket with the configured backlog (`TcpListener::bind` picks its
/// own, too small for a burst of connects).
async fn listen_tcp(address: &str, backlog: u32) -> io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(address).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        // As std's bind does: a restart may bind while old connections are in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(backlog)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("the address resolves to nothing")))
}

/// Through socket2 for the backlog, as for TCP (std's Unix bind uses 128).
fn listen_unix(path: &Path, backlog: u32) -> io::Result<UnixListener> {
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    socket.bind(&socket2::SockAddr::unix(path)?)?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    UnixListener::from_std(std::os::unix::net::UnixListener::from(
        std::os::fd::OwnedFd::from(socket),
    ))
}

/// A socket file left by a process that is gone is removed; one something still listens
/// on is refused, as MariaDB refuses to start on a socket in use.
async fn clear_stale(path: &Path) -> Result<(), ListenError> {
    let unix = |source| ListenError::Unix {
        path: path.to_owned(),
        source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(unix(e)),
        Ok(m) => m,
    };
    if !meta.file_type().is_socket() {
        return Err(ListenError::NotASocket {
            path: path.to_owned(),
        });
    }
    match tokio::net::UnixStream::connect(path).await {
        Ok(_) => Err(ListenError::SocketInUse {
            path: path.to_owned(),
        }),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "removing a stale socket file nothing listens on");
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(unix(e)),
                _ => Ok(()),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        // Anything else (no permission, a full backlog) says nothing about whether the
        // socket is alive: leave it be.
        Err(e) => Err(unix(e)),
    }
}

/// The socket file Sluice created. Dropped, it removes the file, unless something has
/// replaced it meanwhile (the file is then not ours).
pub struct SocketFile {
    path: PathBuf,
    /// Device and inode of the file as created.
    id: (u64, u64),
}

impl SocketFile {
    fn new(path: &Path) -> io::Result<SocketFile> {
        let meta = std::fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_owned(),
            id: (meta.dev(), meta.ino()),
        })
    }
}

/// This process handed its listeners to a successor: their socket files are the
/// successor's now, and stay when this process's listeners go.
static HANDED_OVER: AtomicBool = AtomicBool::new(false);

/// Keeps every socket file from here on (see [`HANDED_OVER`]).
pub fn keep_socket_files() {
    HANDED_OVER.store(true, Ordering::SeqCst);
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if HANDED_OVER.load(Ordering::SeqCst) {
            return;
        }
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the socket file");
            }
        }
    }
}

/// Binds every listener, then accepts clients on each (a task each). Every listener is
/// bound before any accepts: if one fails, the others (and their socket files) go with
/// the error.
/// Returns the accept tasks, and a copy of each listening socket for the next hand-over.
pub(super) async fn start_listeners(
    fe: &Arc<Frontend>,
    config: &Config,
    limit: &Arc<Semaphore>,
    shutdown: &Shutdown,
    drain: &Drain,
    inherited: &mut Inherited,
) -> anyhow::Result<(Vec<tokio::task::JoinHandle<()>>, Vec<(Named, OwnedFd)>)> {
    let mut bound = Vec::new();
    let mut sockets = Vec::new();
    for l in &config.listeners {
        let name = Listener::handover_name(l);
        let listener = match inherited.claim(&name) {
            Some(socket) => Listener::inherited(l, socket)?,
            None => Listener::bind(l).await?,
        };
        sockets.push((name, listener.socket_copy()?));
        let tls = match (&l.tls_cert, &l.tls_key) {
            (Some(c), Some(k)) => Some(tokio_rustls::TlsAcceptor::from(crate::tls::server_config(
                c, k,
            )?)),
            _ => None,
        };
        tracing::info!(address = %listener.describe(), tls = tls.is_some(), "listening");
        bound.push((listener, l, tls));
    }
    let mut accept_tasks = Vec::new();
    for (listener, l, tls) in bound {
        accept_tasks.push(tokio::spawn(accept_loop(
            listener,
            Arc::new(l.clone()),
            tls,
            fe.clone(),
            limit.clone(),
            shutdown.clone(),
            drain.guard(),
        )));
    }
    Ok((accept_tasks, sockets))
}

async fn accept_loop(
    listener: Listener,
    config: Arc<ListenerConfig>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    fe: Arc<Frontend>,
    limit: Arc<Semaphore>,
    mut shutdown: Shutdown,
    drain: shutdown::DrainGuard,
) {
    loop {
        let (socket, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.stopping() => return,
        };
        Stats::incr(&fe.stats.client_connections);
        let client = Box::new(ClientConn::new(Stream::Plain(socket), peer));
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            Stats::incr(&fe.stats.client_connections_refused);
            tokio::spawn(refuse(*client));
            continue;
        };
        let (fe, config, tls, shutdown, guard) = (
            fe.clone(),
            config.clone(),
            tls.clone(),
            shutdown.clone(),
            drain.clone(),
        );
        tokio::spawn(async move {
            let _permit = permit;
            let _guard = guard;
            Stats::incr(&fe.stats.client_connections_active);
            frontend::run(fe.clone(), client, config, tls, shutdown).await;
            Stats::decr(&fe.stats.client_connections_active);
        });
    }
}

/// Over the client limit: answer as MySQL does, with error 1040 instead of a handshake.
async fn refuse(mut client: ClientConn) {
    let err = ErrPacket::new(code::ER_CON_COUNT_ERROR, "08004", "Too many connections");
    let _ = client.write_err(0, &err).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket_listener(path: &Path) -> ListenerConfig {
        ListenerConfig::at(path.to_str().unwrap())
    }

    #[tokio::test]
    async fn a_socket_file_lives_as_long_as_its_listener() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let cfg = ListenerConfig {
            socket_mode: "0660".into(),
            ..socket_listener(&path)
        };
        let listener = Listener::bind(&cfg).await.unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o660);

        // Alive: a second bind is refused and leaves the file alone.
        let second = Listener::bind(&cfg).await;
        assert!(matches!(second, Err(ListenError::SocketInUse { .. })));
        assert!(path.exists());

        drop(listener);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn stale_sockets_are_replaced_and_other_files_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        // A socket file nobody listens on, as a killed process leaves it.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let listener = Listener::bind(&socket_listener(&path)).await.unwrap();
        let client = tokio::net::UnixStream::connect(&path).await.unwrap();
        let (_, peer) = listener.accept().await.unwrap();
        assert_eq!(peer, Peer::Local);
        drop((client, listener));

        let file = dir.path().join("plain");
        std::fs::write(&file, "keep").unwrap();
        let refused = Listener::bind(&socket_listener(&file)).await;
        assert!(matches!(refused, Err(ListenError::NotASocket { .. })));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }
}
