//! Hand-over of the listening sockets to a new Sluice process, so that a restart refuses
//! no connection: the running process offers them on a Unix socket (`[handover]
//! socket`); a new one started with `--take-over` receives them with `SCM_RIGHTS`,
//! accepts on them, and says it is ready; the old one then stops accepting and drains
//! as at SIGTERM. Until the new one says ready, the old one serves everything: a new
//! process that fails (its configuration, a port, a crash) leaves it as it was.
//!
//! The exchange, one connection at a time: the new process sends `{"take_over": 1}`;
//! the old answers with one message holding the list of its listeners and their file
//! descriptors, in the same order; the new answers `{"ready": true}` once it accepts on
//! them, or closes the connection.
//!
//! Then the sessions: the old process sends each one that can move as a frame, a
//! four-byte length with the client's socket attached, then that many bytes of its
//! state; a frame of length zero says it sends no more. The sockets ride on the length
//! alone, which the new side reads with a buffer of exactly that size, so that one
//! read never takes two sockets' bytes.

use anyhow::Context;
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most listening sockets handed over (client listeners and the admin API's).
const MAX_SOCKETS: usize = 64;
/// The list of listeners, as JSON, is at most this long.
const MAX_MESSAGE: usize = 64 << 10;

/// `[handover]`: where a running Sluice offers its listeners to the next one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoverConfig {
    /// The Unix socket the running process listens on for its successor; none: no
    /// hand-over (a restart closes the listeners and refuses connections meanwhile).
    pub socket: Option<PathBuf>,
    /// How long the old process waits for the new one to say it is ready before it
    /// gives up and goes on serving.
    #[serde(default = "default_ready_timeout", with = "humantime_serde")]
    pub ready_timeout: Duration,
    /// After a hand-over, how long the sessions left in the old process may go on
    /// before they are ended between statements, as at SIGTERM.
    #[serde(default = "default_drain_timeout", with = "humantime_serde")]
    pub drain_timeout: Duration,
}

impl Default for HandoverConfig {
    fn default() -> Self {
        HandoverConfig {
            socket: None,
            ready_timeout: default_ready_timeout(),
            drain_timeout: default_drain_timeout(),
        }
    }
}

fn default_ready_timeout() -> Duration {
    Duration::from_secs(60)
}

fn default_drain_timeout() -> Duration {
    Duration::from_secs(30)
}

/// A listening socket as the message names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Named {
    /// A `[[listeners]]` TCP address, as configured.
    Tcp(String),
    /// A `[[listeners]]` socket file.
    Unix(PathBuf),
    /// The admin API's address, as configured.
    Admin(String),
}

#[derive(Serialize, Deserialize)]
struct Offer {
    listeners: Vec<Named>,
    /// Where the new process's connection ids start: past the old one's, so that the
    /// sessions it takes over keep theirs.
    #[serde(default)]
    next_id: u32,
}

/// The connection ids the old process may still give while both accept (until the new
/// one says ready): the new one starts past them.
const IDS_IN_BETWEEN: u32 = 1 << 16;

/// A session's state is at most this long (its prepared statements' texts make most
/// of it).
const MAX_SESSION: usize = 64 << 20;

/// The listening sockets a new process received, by name: each taken by the listener
/// configured with that name, the rest closed when this goes.
#[derive(Default)]
pub struct Inherited {
    sockets: HashMap<Named, OwnedFd>,
    /// The old process, waiting for `ready`; then sending sessions.
    to_old: Option<UnixStream>,
    /// The old process's next connection id.
    next_id: u32,
}

impl Inherited {
    /// Takes the listening sockets from the Sluice listening on `socket`.
    pub fn take(socket: &Path) -> anyhow::Result<Inherited> {
        let mut stream = UnixStream::connect(socket).with_context(|| {
            format!(
                "no running Sluice to take over from at {}",
                socket.display()
            )
        })?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.write_all(b"{\"take_over\":1}\n")?;
        let (offer, fds) = receive(&stream).context("receiving the listeners")?;
        if offer.listeners.len() != fds.len() {
            anyhow::bail!(
                "the running Sluice named {} listeners and sent {} sockets",
                offer.listeners.len(),
                fds.len()
            );
        }
        stream.set_read_timeout(None)?;
        Ok(Inherited {
            sockets: offer.listeners.into_iter().zip(fds).collect(),
            to_old: Some(stream),
            next_id: offer.next_id,
        })
    }

    /// Where this process's connection ids start (1 when it took nothing over).
    pub fn first_id(&self) -> u32 {
        match self.to_old {
            Some(_) => self.next_id.saturating_add(IDS_IN_BETWEEN).max(1),
            None => 1,
        }
    }

    /// The socket the old process listened on as `name`, if it handed one over.
    pub fn claim(&mut self, name: &Named) -> Option<OwnedFd> {
        self.sockets.remove(name)
    }

    /// Tells the old process this one accepts on every listener: it stops accepting,
    /// sends its sessions and drains. Sockets no listener claimed are closed. Returns
    /// the connection the sessions come on (none without a take-over).
    pub fn ready(&mut self) -> anyhow::Result<Option<UnixStream>> {
        self.sockets.clear();
        let Some(mut old) = self.to_old.take() else {
            return Ok(None);
        };
        old.write_all(b"{\"ready\":true}\n")
            .context("telling the old process this one is ready")?;
        Ok(Some(old))
    }
}

/// Old side: sends one session, its state and its client's socket.
pub fn send_session(
    stream: &UnixStream,
    state: &[u8],
    socket: BorrowedFd<'_>,
) -> anyhow::Result<()> {
    if state.is_empty() || state.len() > MAX_SESSION {
        anyhow::bail!("a session's state of {} bytes", state.len());
    }
    let len = (state.len() as u32).to_be_bytes();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [socket];
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        anyhow::bail!("no room for the socket");
    }
    let sent = sendmsg(
        stream,
        &[IoSlice::new(&len)],
        &mut control,
        SendFlags::empty(),
    )?;
    (&*stream).write_all(&len[sent..])?;
    (&*stream).write_all(state)?;
    Ok(())
}

/// Old side: no more sessions come (and, after the cache's entries, no more of them).
pub fn end_sessions(stream: &UnixStream) -> std::io::Result<()> {
    (&*stream).write_all(&0u32.to_be_bytes())
}

/// Old side: one frame of the cache's section (after the sessions): no socket rides on
/// it.
pub fn send_data(stream: &UnixStream, data: &[u8]) -> anyhow::Result<()> {
    if data.is_empty() || data.len() > MAX_SESSION {
        anyhow::bail!("a frame of {} bytes", data.len());
    }
    (&*stream).write_all(&(data.len() as u32).to_be_bytes())?;
    (&*stream).write_all(data)?;
    Ok(())
}

/// New side: the next frame of the cache's section; `None` at its end, or when the old
/// side went away.
pub fn receive_data(stream: &UnixStream) -> anyhow::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match (&*stream).read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let n = u32::from_be_bytes(len) as usize;
    if n == 0 {
        return Ok(None);
    }
    if n > MAX_SESSION {
        anyhow::bail!("a frame of {n} bytes");
    }
    let mut data = vec![0u8; n];
    (&*stream).read_exact(&mut data)?;
    Ok(Some(data))
}

/// New side: the next session (its state and its client's socket); `None` once the
/// old side sent its last one, or went away.
pub fn receive_session(stream: &UnixStream) -> anyhow::Result<Option<(Vec<u8>, OwnedFd)>> {
    let mut len = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut len)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut socket = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for fd in fds {
                // One per frame; any other is closed as it goes.
                socket.get_or_insert(fd);
            }
        }
    }
    if received.bytes == 0 {
        return Ok(None);
    }
    (&*stream).read_exact(&mut len[received.bytes..])?;
    let n = u32::from_be_bytes(len) as usize;
    if n == 0 {
        return Ok(None);
    }
    if n > MAX_SESSION {
        anyhow::bail!("a session's state of {n} bytes");
    }
    let Some(socket) = socket else {
        anyhow::bail!("a session came without its socket");
    };
    let mut state = vec![0u8; n];
    (&*stream).read_exact(&mut state)?;
    Ok(Some((state, socket)))
}

/// What the old side's offer tells the rest of the process, and asks of it.
pub trait OfferEvents: Send + Sync {
    /// This process's connection id counter.
    fn next_id(&self) -> u32;
    /// A process (`pid`, when known) that asked for the listeners did not take over.
    fn failed(&self, pid: Option<u32>, reason: &str);
    /// A client asked for an upgrade (`sluice upgrade`): it waits for its answer, one
    /// line of JSON, on `stream`.
    fn upgrade_asked(&self, stream: UnixStream);
}

/// The process that took the listeners over, and the connection its sessions go on.
#[derive(Debug)]
pub struct Successor {
    pub stream: UnixStream,
    /// Its process id, as the kernel gives it for the socket's peer.
    pub pid: Option<u32>,
}

/// The old side: offers `listeners` (name, a copy of the listening socket) to each
/// process that connects to `server` (made by [`bind`] on `path`), one at a time, and
/// returns once one of them said it is ready. Run on a thread of its own: it blocks.
pub fn offer(
    (mut server, path): (UnixListener, &Path),
    listeners: &[(Named, OwnedFd)],
    ready_timeout: Duration,
    events: &dyn OfferEvents,
) -> anyhow::Result<Successor> {
    let file_of = |path: &Path| std::fs::symlink_metadata(path).ok().map(|m| m.ino());
    let mut ours = file_of(path);
    loop {
        let stream = match server.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "hand-over: accepting a successor failed");
                continue;
            }
        };
        let pid = rustix::net::sockopt::socket_peercred(&stream)
            .ok()
            .map(|c| c.pid.as_raw_nonzero().get() as u32);
        let asked = stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(anyhow::Error::from)
            .and_then(|()| read_line(&mut BufReader::new(&stream)));
        let outcome = match asked {
            Ok(hello) if hello.get("upgrade").is_some() => {
                events.upgrade_asked(stream);
                continue;
            }
            Ok(hello) if hello.get("take_over").is_some() => {
                hand_over(&stream, listeners, ready_timeout, events.next_id())
            }
            Ok(hello) => Err(anyhow::anyhow!(
                "a process asked something else than a take-over: {hello}"
            )),
            Err(e) => Err(e),
        };
        match outcome {
            // The socket file stays: the successor listens on it for the next one.
            Ok(()) => {
                stream.set_read_timeout(None)?;
                return Ok(Successor { stream, pid });
            }
            Err(e) => {
                let reason = format!("{e:#}");
                tracing::warn!(error = %reason, "hand-over failed: this process goes on serving everything");
                events.failed(pid, &reason);
                // A successor binds the path before it says ready (so that the next
                // upgrade finds it at once): one that failed may have taken it. Only
                // then is it bound again: clients already queued on this socket stay.
                if file_of(path) != ours {
                    match bind(path, true) {
                        Ok(s) => {
                            server = s;
                            ours = file_of(path);
                        }
                        Err(e) => {
                            tracing::warn!(error = %format!("{e:#}"), "hand-over: the socket could not be taken back")
                        }
                    }
                }
            }
        }
    }
}

/// `sluice upgrade`: asks the Sluice offering on `path` to start a successor, and waits
/// (at most `timeout`) for how its take-over ended: `{"upgraded": true, "pid": N}`, or
/// `{"upgraded": false, "error": "..."}`.
pub fn ask_upgrade(path: &Path, timeout: Duration) -> anyhow::Result<serde_json::Value> {
    let mut stream = UnixStream::connect(path)
        .with_context(|| format!("no running Sluice offers a hand-over at {}", path.display()))?;
    stream.write_all(b"{\"upgrade\":1}\n")?;
    stream.set_read_timeout(Some(timeout))?;
    read_line(&mut BufReader::new(&stream)).context("waiting for the upgrade's outcome")
}

/// Listens on `path`, replacing a stale socket file (no process behind it), or the
/// previous process's (`replace`: this process took over from the one that listened
/// there, which is stopping).
pub fn bind(path: &Path, replace: bool) -> anyhow::Result<UnixListener> {
    if !replace && UnixStream::connect(path).is_ok() {
        anyhow::bail!(
            "another process listens on the hand-over socket {}",
            path.display()
        );
    }
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)
        .with_context(|| format!("cannot listen on the hand-over socket {}", path.display()))?;
    // Whoever connects gets the listening sockets: this process's user only.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict the hand-over socket {}", path.display()))?;
    Ok(listener)
}

fn hand_over(
    stream: &UnixStream,
    listeners: &[(Named, OwnedFd)],
    ready_timeout: Duration,
    next_id: u32,
) -> anyhow::Result<()> {
    let mut reader = BufReader::new(stream);
    tracing::info!(
        listeners = listeners.len(),
        "hand-over: a new process asks for the listeners"
    );
    let offer = Offer {
        listeners: listeners.iter().map(|(n, _)| n.clone()).collect(),
        next_id,
    };
    let fds: Vec<BorrowedFd<'_>> = listeners.iter().map(|(_, fd)| fd.as_fd()).collect();
    send(stream, &offer, &fds)?;
    stream.set_read_timeout(Some(ready_timeout))?;
    let answer = read_line(&mut reader).context("waiting for the new process to be ready")?;
    if answer.get("ready") != Some(&serde_json::Value::Bool(true)) {
        anyhow::bail!("the new process answered {answer}");
    }
    tracing::info!(
        "hand-over: the new process accepts clients; this one stops accepting, sends its sessions there and drains"
    );
    Ok(())
}

/// One line of JSON; the peer closing first is an error.
fn read_line(reader: &mut BufReader<&UnixStream>) -> anyhow::Result<serde_json::Value> {
    let mut line = String::new();
    let n = reader
        .by_ref()
        .take(MAX_MESSAGE as u64)
        .read_line(&mut line)?;
    if n == 0 {
        anyhow::bail!("the other process closed the connection");
    }
    serde_json::from_str(&line).context("a message that is not JSON")
}

fn send(stream: &UnixStream, offer: &Offer, fds: &[BorrowedFd<'_>]) -> anyhow::Result<()> {
    let mut body = serde_json::to_vec(offer)?;
    body.push(b'\n');
    if fds.len() > MAX_SOCKETS || body.len() > MAX_MESSAGE {
        anyhow::bail!("too many listeners to hand over ({})", fds.len());
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        anyhow::bail!("too many listeners to hand over ({})", fds.len());
    }
    let sent = sendmsg(
        stream,
        &[IoSlice::new(&body)],
        &mut control,
        SendFlags::empty(),
    )?;
    if sent != body.len() {
        // The sockets went with the first part: the rest goes as plain bytes.
        (&*stream).write_all(&body[sent..])?;
    }
    Ok(())
}

/// The offer and its sockets: one `recvmsg` for the sockets and the first bytes, plain
/// reads for the rest of the line.
fn receive(stream: &UnixStream) -> anyhow::Result<(Offer, Vec<OwnedFd>)> {
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(sockets) = message {
            fds.extend(sockets);
        }
    }
    let mut line = buf[..received.bytes].to_vec();
    if !line.ends_with(b"\n") {
        let mut reader = BufReader::new(stream);
        let mut rest = Vec::new();
        reader
            .by_ref()
            .take((MAX_MESSAGE - line.len()) as u64)
            .read_until(b'\n', &mut rest)?;
        line.extend_from_slice(&rest);
    }
    let offer = serde_json::from_slice(&line).context("the listeners' list is not JSON")?;
    Ok((offer, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    struct Quiet;

    impl OfferEvents for Quiet {
        fn next_id(&self) -> u32 {
            7
        }
        fn failed(&self, _: Option<u32>, _: &str) {}
        fn upgrade_asked(&self, _: UnixStream) {}
    }

    /// The old side offering `listeners` on `path`, on a thread of its own.
    fn offering(
        path: &Path,
        listeners: Vec<(Named, OwnedFd)>,
    ) -> std::thread::JoinHandle<anyhow::Result<()>> {
        let path = path.to_owned();
        std::thread::spawn(move || {
            offer(
                (bind(&path, false)?, &path),
                &listeners,
                Duration::from_secs(10),
                &Quiet,
            )
            .map(drop)
        })
    }

    /// The listeners taken from the side offering on `path`, once it does (5 s at most).
    fn taken(path: &Path) -> Inherited {
        (0..500)
            .find_map(|_| {
                Inherited::take(path).ok().or_else(|| {
                    std::thread::sleep(Duration::from_millis(10));
                    None
                })
            })
            .expect("the old side never offered")
    }

    #[test]
    fn a_listening_socket_goes_across_and_accepts_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handover.sock");
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = tcp.local_addr().unwrap();
        let copy = tcp.as_fd().try_clone_to_owned().unwrap();
        let listeners = vec![(Named::Tcp(address.to_string()), copy)];
        let old = offering(&path, listeners);
        let mut inherited = taken(&path);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "only this process's user may take the sockets"
        );
        let fd = inherited
            .claim(&Named::Tcp(address.to_string()))
            .expect("the TCP listener came across");
        assert!(inherited.claim(&Named::Admin("x".into())).is_none());
        let taken = TcpListener::from(fd);
        // The same socket: a connect to its address is accepted on the copy.
        let _client = TcpStream::connect(address).unwrap();
        let (_, peer) = taken.accept().unwrap();
        assert_eq!(peer.ip(), address.ip());
        inherited.ready().unwrap();
        old.join().unwrap().unwrap();
        drop(tcp);
        // The old process's copy closed: the new one still listens.
        let _again = TcpStream::connect(address).unwrap();
        taken.accept().unwrap();
    }

    #[test]
    fn a_successor_that_never_says_ready_leaves_the_old_side_offering() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handover.sock");
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let copy = tcp.as_fd().try_clone_to_owned().unwrap();
        let listeners = vec![(Named::Tcp("a".into()), copy)];
        let old = offering(&path, listeners);
        let first = taken(&path);
        // Gone before ready, as a new process that crashes.
        drop(first);
        let mut second = Inherited::take(&path).expect("offered again");
        assert!(second.claim(&Named::Tcp("a".into())).is_some());
        second.ready().unwrap();
        old.join().unwrap().unwrap();
    }

    #[test]
    fn a_peer_that_asks_something_else_gets_nothing_and_the_offer_stands() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handover.sock");
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let copy = tcp.as_fd().try_clone_to_owned().unwrap();
        let listeners = vec![(Named::Tcp("a".into()), copy)];
        let old = offering(&path, listeners);
        let connect = || {
            (0..200)
                .find_map(|_| {
                    UnixStream::connect(&path).ok().or_else(|| {
                        std::thread::sleep(Duration::from_millis(10));
                        None
                    })
                })
                .expect("the old side never listened")
        };
        for garbage in [&b"not json\n"[..], b"{\"take\":1}\n", b"\xff\xfe\n"] {
            let mut peer = connect();
            peer.write_all(garbage).unwrap();
            // Answered with nothing: the connection is closed without a socket sent.
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut peer, &mut got).unwrap();
            assert!(got.is_empty(), "{garbage:?} got {got:?}");
        }
        let mut taker = Inherited::take(&path).expect("still offered");
        assert!(taker.claim(&Named::Tcp("a".into())).is_some());
        taker.ready().unwrap();
        old.join().unwrap().unwrap();
    }

    #[test]
    fn sessions_go_across_one_frame_each_with_their_socket() {
        let (old, new) = UnixStream::pair().unwrap();
        let clients: Vec<TcpListener> = (0..3)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        for (i, c) in clients.iter().enumerate() {
            let state = format!("{{\"session\":{i}}}");
            send_session(&old, state.as_bytes(), c.as_fd()).unwrap();
        }
        end_sessions(&old).unwrap();
        for (i, c) in clients.iter().enumerate() {
            let (state, socket) = receive_session(&new).unwrap().expect("a session");
            assert_eq!(state, format!("{{\"session\":{i}}}").into_bytes());
            // Its own socket, not a neighbour's.
            let got = TcpListener::from(socket).local_addr().unwrap();
            assert_eq!(got, c.local_addr().unwrap());
        }
        assert!(receive_session(&new).unwrap().is_none());
    }

    #[test]
    fn a_frame_without_a_socket_or_too_long_is_refused() {
        let (old, new) = UnixStream::pair().unwrap();
        (&old).write_all(&5u32.to_be_bytes()).unwrap();
        (&old).write_all(b"hello").unwrap();
        assert!(receive_session(&new).is_err());
        let (old, new) = UnixStream::pair().unwrap();
        (&old).write_all(&u32::MAX.to_be_bytes()).unwrap();
        assert!(receive_session(&new).is_err());
        // The old side going away ends the sessions.
        let (old, new) = UnixStream::pair().unwrap();
        drop(old);
        assert!(receive_session(&new).unwrap().is_none());
    }

    #[test]
    fn the_socket_a_failed_successor_took_is_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handover.sock");
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let copy = tcp.as_fd().try_clone_to_owned().unwrap();
        let listeners = vec![(Named::Tcp("a".into()), copy)];
        let old = offering(&path, listeners);
        let first = taken(&path);
        // As a successor does before it says ready, then fails: the path is its.
        drop(bind(&path, true).unwrap());
        drop(first);
        let mut second = taken(&path);
        assert!(second.claim(&Named::Tcp("a".into())).is_some());
        second.ready().unwrap();
        old.join().unwrap().unwrap();
    }
}
