//! A live session moving to the successor process at a hand-over: between two
//! statements, holding no connection and nothing that pins one, a multiplexed session's
//! whole state is Sluice's own (`mux/parcel.rs`, `cached/parcel.rs`), so it goes across
//! as a value with its client's socket, and the client goes on where it was: the same
//! connection, the same `CONNECTION_ID()`, its variables, schema and prepared statements.
//! What the servers held of it is nothing: the successor brings whichever connection it
//! leases in line with the state, as for any statement.
//!
//! What stays: TLS on the client hop (the keys live in this process's rustls state),
//! dedicated sessions (their state is on their server connection), sessions of an
//! instance in a fleet (their ids name its slot), and sessions pinned (a transaction,
//! temporary tables, locks) until they are not, within the drain bound.

use super::cached::parcel::CacheParcel;
use super::mux::parcel::MuxParcel;
use super::{login, mux, Backing, Registered, Session};
use crate::error::SessionError;
use crate::frontend::{ClientConn, Departure, Frontend};
use crate::shutdown::Shutdown;
use crate::stats::Stats;
use crate::stream::{Peer, Socket, Stream};
use serde::{Deserialize, Serialize};
use sluice_wire::CapabilityFlags;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;

#[derive(Debug, Serialize, Deserialize)]
struct Parcel {
    id: u32,
    /// `None`: a client of Sluice's Unix socket.
    peer: Option<SocketAddr>,
    caps: u32,
    mariadb_caps: u32,
    user: String,
    charset: u8,
    attributes: Vec<(Vec<u8>, Vec<u8>)>,
    multi_statements: bool,
    idle_default_ms: Option<u64>,
    /// What the client sent that this process read and did not serve yet: the next
    /// command, when the client did not wait for the last answer.
    unread: Vec<u8>,
    mux: MuxParcel,
    cache: Option<CacheParcel>,
}

impl Session {
    /// Sends the session to the successor, if it can go now: true, and the session
    /// ends here without a word to its client, whose socket the successor holds.
    pub(super) async fn move_out(&mut self) -> Result<bool, SessionError> {
        let Some(departures) = self.fe.departures.lock().clone() else {
            return Ok(false);
        };
        // In a fleet, a session's id names the instance that holds it (its slot, in the
        // top byte): the successor holds another slot, so KILL through a peer would
        // look for a moved session in the wrong place, and the old slot, once free,
        // could give its id to another session.
        if self.fe.fleet.get().is_some()
            || !matches!(self.client.stream, Stream::Plain(_))
            || !self.kill_statements.is_empty()
            || !self.backing.is_multiplexed()
            || self.cache.as_ref().is_some_and(|c| !c.movable())
        {
            return Ok(false);
        }
        if self.backing.conn().is_some() {
            // Kept after a write (read-your-writes hold): let go now, unless pinned.
            self.end_hold().await?;
            if self.backing.conn().is_some() {
                return Ok(false);
            }
        }
        if self.backing.muxed().unmovable().is_some() {
            return Ok(false);
        }
        let parcel = match serde_json::to_vec(&self.pack()) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "hand-over: this session's state could not be written");
                return Ok(false);
            }
        };
        let stream = std::mem::replace(&mut self.client.stream, Stream::Closed);
        let socket = into_fd(stream)?;
        match departures.send(Departure { parcel, socket }) {
            Ok(()) => {
                Stats::incr(&self.fe.stats.sessions_moved_out);
                tracing::debug!("moved to the successor process");
                Ok(true)
            }
            Err(std::sync::mpsc::SendError(d)) => {
                // The hand-over's connection is gone: the session stays here.
                self.client.stream = from_fd(d.socket, &self.client.peer)?;
                Ok(false)
            }
        }
    }

    fn pack(&self) -> Parcel {
        Parcel {
            id: self.id,
            peer: match self.client.peer {
                Peer::Tcp(a) => Some(a),
                Peer::Local => None,
            },
            caps: self.client.caps.0,
            mariadb_caps: self.client.mariadb_caps,
            user: self.user.name.clone(),
            charset: self.charset,
            attributes: (*self.attributes).clone(),
            multi_statements: self.multi_statements,
            idle_default_ms: self.idle_default.map(|d| d.as_millis() as u64),
            unread: self.client.rbuf.to_vec(),
            mux: self.backing.muxed().pack(),
            cache: self.cache.as_ref().map(|c| c.pack()),
        }
    }
}

/// The socket under a plain connection, out of the runtime.
fn into_fd(stream: Stream) -> std::io::Result<OwnedFd> {
    match stream {
        Stream::Plain(Socket::Tcp(s)) => Ok(s.into_std()?.into()),
        Stream::Plain(Socket::Unix(s)) => Ok(s.into_std()?.into()),
        _ => Err(std::io::Error::other("only a plain connection moves")),
    }
}

fn from_fd(socket: OwnedFd, peer: &Peer) -> std::io::Result<Stream> {
    let socket = match peer {
        Peer::Tcp(_) => {
            let s = std::net::TcpStream::from(socket);
            s.set_nonblocking(true)?;
            Socket::Tcp(tokio::net::TcpStream::from_std(s)?)
        }
        Peer::Local => {
            let s = std::os::unix::net::UnixStream::from(socket);
            s.set_nonblocking(true)?;
            Socket::Unix(tokio::net::UnixStream::from_std(s)?)
        }
    };
    Ok(Stream::Plain(socket))
}

/// Serves a session the process before sent at a hand-over (`parcel`, and its client's
/// `socket`) until it ends, as if it had logged in here. One that cannot be taken (its
/// user is not configured here, multiplexing is off here, its id is taken) is closed,
/// as the server closes a connection it cannot keep, and counted.
pub async fn arrive(fe: Arc<Frontend>, parcel: Vec<u8>, socket: OwnedFd, mut shutdown: Shutdown) {
    let p: Parcel = match serde_json::from_slice(&parcel) {
        Ok(p) => p,
        Err(e) => {
            Stats::incr(&fe.stats.sessions_not_moved);
            tracing::warn!(error = %e, "hand-over: a session's state could not be read: its client is disconnected");
            return;
        }
    };
    let peer = p.peer.map_or(Peer::Local, Peer::Tcp);
    let tag = crate::log_context::SessionTag {
        id: p.id,
        client: peer,
    };
    crate::log_context::tagged(tag, async move {
        let Some(mut session) = Box::pin(adopt(&fe, p, peer, socket)).await else {
            Stats::incr(&fe.stats.sessions_not_moved);
            return;
        };
        Stats::incr(&fe.stats.sessions_moved_in);
        let _registered = Registered {
            fe: fe.clone(),
            id: session.id,
            user: Some(session.user.name.clone()),
        };
        tracing::debug!(user = %session.user.name, "taken over from the process before");
        if let Err(e) = session.command_loop(&mut shutdown).await {
            super::count_client_error(&fe, &e);
            tracing::debug!(error = %e, side = ?e.side(), "session ended with an error");
        }
    })
    .await;
}

/// The session of `p`, registered here; `None` (and the socket closed) when it cannot
/// be served here.
async fn adopt(fe: &Arc<Frontend>, p: Parcel, peer: Peer, socket: OwnedFd) -> Option<Session> {
    let Some(user) = login::find_user(fe, &p.user, &peer).await else {
        tracing::warn!(user = %p.user, "hand-over: a session's user is not configured here: its client is disconnected");
        return None;
    };
    if fe.sessions.lock().contains_key(&p.id) {
        tracing::warn!("hand-over: a session's id is taken here: its client is disconnected");
        return None;
    }
    let stream = match from_fd(socket, &peer) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "hand-over: a session's socket is unusable");
            return None;
        }
    };
    let mut client = ClientConn::new(stream, peer);
    client.caps = CapabilityFlags(p.caps);
    client.mariadb_caps = p.mariadb_caps;
    client.rbuf.extend_from_slice(&p.unread);
    let logged_in = login::LoggedIn {
        user: user.clone(),
        charset: p.charset,
        database: None,
        attributes: fe.attribute_sets.share(&p.attributes),
        next_seq: 0,
    };
    // Admitted by the process before: counted here, past any per-user limit.
    fe.user_connected(&user.name, 0);
    let mut session = Session::open(fe, p.id, client, &logged_in);
    if !session.multiplexed() {
        tracing::warn!("hand-over: a multiplexed session came, and sessions are not multiplexed here: its client is disconnected");
        fe.sessions.lock().remove(&p.id);
        fe.user_disconnected(&user.name);
        return None;
    }
    session.multi_statements = p.multi_statements;
    session.idle_default = p.idle_default_ms.map(std::time::Duration::from_millis);
    let key = session.mux_key(&user);
    let router = fe.router.load();
    let mux = mux::Mux::unpack(p.mux, key, &mut session.text, |name| {
        router.by_name(name).cloned()
    });
    session.backing = Backing::Multiplexed {
        mux: Box::new(mux),
        conn: None,
    };
    if let (Some(cache), Some(parcel)) = (session.cache.as_mut(), p.cache) {
        cache.unpack(parcel);
    }
    if fe.cache.is_some() {
        let params = session.key(&user).params;
        fe.client_logged_in(&user.name, &params);
    }
    Some(session)
}
