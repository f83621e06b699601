//! One client session: log in, lease a backend connection, then loop over commands —
//! classify, forward, and stream the response back as it arrives. Bad input gets a
//! MySQL error or a clean close and never touches another session.

use super::config::ListenerConfig;
use super::login;
use super::{ClientConn, Frontend, SessionEntry, SessionLive};
use crate::analytics::SessionProbe;
use crate::auth::User;
use crate::backend::PooledConn;
use crate::classify::{classify, Action};
use crate::error::{code, BackendError, SessionError};
use crate::router::Target;
use crate::shutdown::Shutdown;
use crate::stats::Stats;
use bytes::Buf;
use sluice_wire::command::{Command, Request};
use sluice_wire::packet::{Header, HEADER_LEN};
use sluice_wire::response::ErrPacket;
use sluice_wire::tracker::{Event, RequestSpan, ResponseKind, ResponseTracker, Scanner};
use sluice_wire::{CapabilityFlags, ProtocolError, StatusFlags};
use std::sync::Arc;
use tokio::time::Instant;

mod attach;
pub(super) mod cached;
mod globals;
mod grants;
mod identity;
mod in_flight;
mod kill;
pub(crate) use kill::{host_matches, stop_session};
mod moving;
pub use moving::arrive;
pub mod mux;
mod origin;
mod prepared;
mod relay;
mod route;
mod statement;
mod traced;
use in_flight::InFlight;
use statement::Statement;
mod tracking;

/// Statements up to this size are read whole before they are forwarded: so that the
/// cache can analyse and key them, and multiplexing know their effect on the session.
/// Larger ones stream, their effects read from their head.
const MAX_BUFFERED: usize = 1 << 20;

/// Bytes of a command's payload looked at to classify it.
const CLASSIFY_HEAD: usize = 64;

struct Session {
    fe: Arc<Frontend>,
    id: u32,
    client: ClientConn,
    user: Arc<User>,
    charset: u8,
    /// The client's connection attributes.
    attributes: Arc<sluice_wire::handshake::Attributes>,
    /// The session's side of the query cache, when one is configured: boxed, so that
    /// without a cache a session's task keeps 8 bytes for it, not 208.
    cache: Option<Box<cached::CacheState>>,
    /// How the session reaches its servers, with the connection it holds.
    backing: Backing,
    /// Told to end by a KILL from another session.
    kill: Arc<tokio::sync::Notify>,
    /// What the registry shows of this session's backend connection and pin.
    live: Arc<SessionLive>,
    /// The server `backend` is on.
    member: Option<Arc<crate::router::Member>>,
    /// The session's side of analytics (none when it is off).
    probe: Option<SessionProbe>,
    /// A multiplexed session's idle limit when it sets no `wait_timeout` of its own:
    /// the server's, learnt from the first connection it uses.
    idle_default: Option<std::time::Duration>,
    /// The statement in flight, while one is.
    stmt: in_flight::InFlightSlot,
    /// What the statement in flight's text says, read once for every stage that asks,
    /// and what the session's recent texts said, by shape (kept across statements).
    text: crate::classify::facts::TextFacts,
    /// The client's multi-statement option (its capability, then COM_SET_OPTION).
    multi_statements: bool,
    /// SQL prepared statements (`PREPARE name FROM 'KILL ...'`) that hold a KILL, by
    /// lowercase name: their `EXECUTE` is carried out by Sluice.
    kill_statements: std::collections::HashMap<String, crate::classify::kill::Kill>,
}

/// How a session reaches its servers, and the server connection it holds: chosen at
/// login, and again at COM_CHANGE_USER. A plain tag (rather than one folded into the
/// connection's spare values) keeps telling the variants apart to one compare on the
/// statement's path.
#[repr(u8)]
enum Backing {
    /// No connection and no state of the session's here: before the login's lease, or
    /// a dedicated session whose connection is gone (it ends at its next step, or a
    /// change of user attaches it again).
    Detached,
    /// One connection from login to quit: the session's state lives on the server.
    Dedicated(PooledConn),
    /// Connections taken statement by statement (`conn`, the one held now; one is kept
    /// while something pins it): the session's state lives in `mux`, and each
    /// connection is brought in line with it before it runs the session's statement.
    Multiplexed {
        mux: Box<mux::Mux>,
        conn: Option<PooledConn>,
    },
}

impl Backing {
    #[inline]
    fn is_multiplexed(&self) -> bool {
        matches!(self, Backing::Multiplexed { .. })
    }

    #[inline]
    fn mux(&self) -> Option<&mux::Mux> {
        match self {
            Backing::Multiplexed { mux, .. } => Some(mux),
            _ => None,
        }
    }

    #[inline]
    fn mux_mut(&mut self) -> Option<&mut mux::Mux> {
        match self {
            Backing::Multiplexed { mux, .. } => Some(mux),
            _ => None,
        }
    }

    /// The multiplexed state, for the stages that only a multiplexed session's
    /// statements reach (the command loop dispatches on the backing).
    #[inline]
    fn muxed(&self) -> &mux::Mux {
        self.mux().expect("reached only by multiplexed sessions")
    }

    #[inline]
    fn muxed_mut(&mut self) -> &mut mux::Mux {
        self.mux_mut()
            .expect("reached only by multiplexed sessions")
    }

    /// The server connection the session holds now.
    #[inline]
    fn conn(&self) -> Option<&PooledConn> {
        match self {
            Backing::Dedicated(conn) => Some(conn),
            Backing::Multiplexed { conn, .. } => conn.as_ref(),
            Backing::Detached => None,
        }
    }

    #[inline]
    fn conn_mut(&mut self) -> Option<&mut PooledConn> {
        match self {
            Backing::Dedicated(conn) => Some(conn),
            Backing::Multiplexed { conn, .. } => conn.as_mut(),
            Backing::Detached => None,
        }
    }

    /// The multiplexed state, if any, and the connection held now, borrowed together.
    #[inline]
    fn parts(&mut self) -> (Option<&mut mux::Mux>, Option<&mut PooledConn>) {
        match self {
            Backing::Dedicated(conn) => (None, Some(conn)),
            Backing::Multiplexed { mux, conn } => (Some(mux), conn.as_mut()),
            Backing::Detached => (None, None),
        }
    }

    /// The multiplexed state and the connection held now, borrowed together.
    #[inline]
    fn mux_and_conn(&mut self) -> Option<(&mut mux::Mux, Option<&mut PooledConn>)> {
        match self {
            Backing::Multiplexed { mux, conn } => Some((mux, conn.as_mut())),
            _ => None,
        }
    }

    /// The multiplexed state and the connection it holds, for the steps that run only
    /// once a statement has its connection.
    #[inline]
    fn muxed_with_conn(&mut self) -> (&mut mux::Mux, &mut PooledConn) {
        match self {
            Backing::Multiplexed {
                mux,
                conn: Some(conn),
            } => (mux, conn),
            _ => unreachable!("reached only by multiplexed sessions holding a connection"),
        }
    }

    /// Whether the connection held now is inside a transaction.
    #[inline]
    fn held_in_transaction(&self) -> bool {
        self.conn().is_some_and(|b| b.status.in_transaction())
    }

    /// Lets go of the connection held now: a multiplexed session keeps its state and
    /// takes another at its next statement; a dedicated one is left detached.
    #[inline]
    fn take_conn(&mut self) -> Option<PooledConn> {
        match self {
            Backing::Multiplexed { conn, .. } => conn.take(),
            Backing::Dedicated(_) => match std::mem::replace(self, Backing::Detached) {
                Backing::Dedicated(conn) => Some(conn),
                _ => unreachable!("matched above"),
            },
            Backing::Detached => None,
        }
    }

    /// Drops the connection held now (back to its pool, or closed when broken).
    #[inline]
    fn drop_conn(&mut self) {
        drop(self.take_conn());
    }

    /// Closes the connection held now: what it was left in is not worth finding out,
    /// so it does not go back to its pool.
    #[inline]
    fn close_conn(&mut self) {
        if let Some(mut conn) = self.take_conn() {
            conn.mark_broken();
        }
    }

    /// Holds `conn`: the multiplexed session's connection for now, or a detached
    /// session's dedicated one.
    #[inline]
    fn hold(&mut self, new: PooledConn) {
        match self {
            Backing::Multiplexed { conn, .. } => *conn = Some(new),
            _ => *self = Backing::Dedicated(new),
        }
    }
}

/// Where the idle timer waits while no deadline is armed (its branch is off then).
const IDLE_PARKED: std::time::Duration = std::time::Duration::from_secs(86_400);

/// Statements longer than this are digested by their first bytes only (bulk inserts:
/// their digests fold the rows anyway).
const DIGEST_TEXT_MAX: usize = 64 << 10;

/// Serves one accepted client until it quits, fails, or shutdown stops it between
/// statements. The client comes boxed: an async fn keeps each argument twice (as passed
/// and as its local), and this one and `serve` kept four dead copies of the connection
/// in every session's task, for as long as the session lived.
pub async fn run(
    fe: Arc<Frontend>,
    client: Box<ClientConn>,
    listener: Arc<ListenerConfig>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: Shutdown,
) {
    let id = fe.next_connection_id();
    let tag = crate::log_context::SessionTag {
        id,
        client: client.peer,
    };
    let _registered = Registered {
        fe: fe.clone(),
        id,
        user: None,
    };
    let mut registered = _registered;
    crate::log_context::tagged(
        tag,
        serve(fe, id, client, listener, tls, shutdown, &mut registered),
    )
    .await;
}

/// Removes the session from the registry, and from its user's count, however it ends.
struct Registered {
    fe: Arc<Frontend>,
    id: u32,
    user: Option<String>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.fe.sessions.lock().remove(&self.id);
        if let Some(u) = &self.user {
            self.fe.user_disconnected(u);
        }
    }
}

async fn serve(
    fe: Arc<Frontend>,
    id: u32,
    mut client: Box<ClientConn>,
    listener: Arc<ListenerConfig>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: Shutdown,
    registered: &mut Registered,
) {
    let traced = (fe.tracer.as_deref()).and_then(|t| traced::SessionTrace::begin(t, &client.peer));
    let refused = |traced: Option<Box<traced::SessionTrace>>, why: &str| {
        if let (Some(t), Some(tracer)) = (traced, fe.tracer.as_deref()) {
            t.login(tracer, id, None, Some(why.to_owned()));
            t.end(tracer, id, None, Some(why.to_owned()));
        }
    };
    let login = tokio::time::timeout(
        fe.limits.handshake_timeout,
        // Boxed, as every step before the command loop: the task keeps room for its
        // largest state for as long as the session lives.
        Box::pin(login::login(&fe, &mut client, &listener, tls.as_ref(), id)),
    );
    let logged_in = tokio::select! {
        r = login => match r {
            Ok(Ok(Some(l))) => l,
            Ok(Ok(None)) => return refused(traced, "login refused"),
            Ok(Err(e)) => {
                count_client_error(&fe, &e);
                tracing::debug!(error = %e, "login failed");
                answer_protocol_error(&mut client, &e, 2).await;
                return refused(traced, &e.to_string());
            }
            Err(_) => {
                tracing::debug!("login timed out");
                return refused(traced, "login timed out");
            }
        },
        _ = shutdown.stopping() => return,
    };
    if !Box::pin(admitted(&fe, &mut client, &logged_in)).await {
        return refused(traced, "not admitted");
    }
    registered.user = Some(logged_in.user.name.clone());
    // Unboxed in a call of its own: a box moved out of in place is freed only when its
    // variable goes, at the session's end.
    let mut session = Session::open(&fe, id, unbox(client), &logged_in);
    if !Box::pin(session.finish_login(logged_in)).await {
        return refused(traced, "login not finished");
    }
    tracing::debug!(user = %session.user.name, "logged in");
    if let (Some(t), Some(tracer)) = (&traced, fe.tracer.as_deref()) {
        t.login(tracer, id, Some(&session.user.name), None);
    }
    if fe.cache.is_some() {
        let params = session.key(&session.user).params;
        fe.client_logged_in(&session.user.name, &params);
    }
    let error = match session.command_loop(&mut shutdown).await {
        Ok(()) => {
            tracing::debug!("session ended");
            None
        }
        Err(e) => {
            count_client_error(&fe, &e);
            tracing::debug!(error = %e, side = ?e.side(), "session ended with an error");
            Some(e.to_string())
        }
    };
    if let (Some(t), Some(tracer)) = (traced, fe.tracer.as_deref()) {
        t.end(tracer, id, Some(&session.user.name), error);
    }
}

/// Takes the connection out of its box and frees the box here, at login.
#[allow(clippy::boxed_local)] // The box is what this frees.
fn unbox(client: Box<ClientConn>) -> ClientConn {
    *client
}

fn count_client_error(fe: &Frontend, e: &SessionError) {
    match e {
        SessionError::ClientProtocol(_) => Stats::incr(&fe.stats.client_protocol_errors),
        SessionError::Backend(_) => Stats::incr(&fe.stats.backend_errors),
        _ => {}
    }
}

/// Tells the client why its connection is being closed when its input was malformed.
async fn answer_protocol_error(client: &mut ClientConn, e: &SessionError, seq: u8) {
    let err = match e {
        SessionError::ClientProtocol(ProtocolError::Sequence { .. }) => ErrPacket::new(
            code::ER_NET_PACKETS_OUT_OF_ORDER,
            "08S01",
            "Got packets out of order",
        ),
        SessionError::ClientProtocol(ProtocolError::TooLarge { .. }) => ErrPacket::new(
            code::ER_NET_PACKET_TOO_LARGE,
            "08S01",
            "Got a packet bigger than 'max_allowed_packet' bytes",
        ),
        SessionError::ClientProtocol(p) => ErrPacket::new(
            code::ER_HANDSHAKE_ERROR,
            "08S01",
            format!("Bad handshake ({p})"),
        ),
        _ => return,
    };
    let _ = client.write_err(seq, &err).await;
}

impl Session {
    /// The status flags the client last saw.
    fn last_status(&self) -> StatusFlags {
        match &self.backing {
            Backing::Dedicated(b) | Backing::Multiplexed { conn: Some(b), .. } => b.status,
            Backing::Multiplexed { mux, conn: None } => mux.status,
            Backing::Detached => StatusFlags::default(),
        }
    }

    async fn command_loop(&mut self, shutdown: &mut Shutdown) -> Result<(), SessionError> {
        // One registration for the whole session, not one per statement.
        let kill = self.kill.clone();
        let mut killed = std::pin::pin!(kill.notified());
        // One timer for the whole session, for its idle limit and the end of its hold
        // on a connection, moved only when it fires before the session's deadline: a
        // statement pushes the deadline later without touching the timer.
        let mut idle_timer = std::pin::pin!(tokio::time::sleep(IDLE_PARKED));
        let mut idle_armed: Option<Instant> = None;
        let mut idle_since = Instant::now();
        let mut served = false;
        loop {
            if shutdown.is_stopping() {
                return Ok(());
            }
            // After a hand-over: to the successor, as soon as nothing holds it here.
            let moving = shutdown.is_moving();
            if moving && Box::pin(self.move_out()).await? {
                return Ok(());
            }
            if std::mem::take(&mut served) {
                idle_since = Instant::now();
            }
            let hold = self
                .backing
                .mux()
                .and_then(|m| m.hold_until)
                .map(Instant::from_std);
            let idle = self.idle_limit().map(|d| idle_since + d);
            let first = match (hold, idle) {
                (Some(h), Some(i)) => Some(h.min(i)),
                (h, i) => h.or(i),
            };
            arm_idle(idle_timer.as_mut(), first, &mut idle_armed);
            let holding = self.backing.conn().is_some();
            // A transaction a switchover can move to the new writer is moved rather
            // than left to keep the old one busy.
            let movable = holding && self.movable();
            if movable && self.switching() {
                Box::pin(self.move_for_switchover()).await?;
                continue;
            }
            let (mux, held) = self.backing.parts();
            // Boxed, and made only while a transaction could move: the session's task
            // would otherwise keep room for it through every idle wait.
            let switch = mux
                .and_then(|m| m.replay.switch_watch())
                .filter(|_| movable)
                .map(|rx| Box::pin(mux::replay::switch_begun(rx)));
            self.client.release_idle();
            let header = tokio::select! {
                h = self.client.peek_header(CLASSIFY_HEAD) => h?,
                _ = shutdown.stopping_or_moving(moving) => {
                    if shutdown.is_stopping() {
                        return Ok(());
                    }
                    continue;
                }
                _ = &mut killed => {
                    // The killer stops its thread on the server next: the connection
                    // must not go back to the pool for another session to find dead.
                    if let Some(b) = self.backing.conn_mut() {
                        b.mark_broken();
                    }
                    return Ok(());
                }
                _ = &mut idle_timer, if idle_armed.is_some() => {
                    // Fired: armed again, for whichever deadline is next.
                    idle_armed = None;
                    let now = Instant::now();
                    if hold.is_some_and(|at| now >= at) {
                        Box::pin(self.end_hold()).await?;
                        continue;
                    }
                    // As the server closes a connection idle past its wait_timeout.
                    if idle.is_some_and(|at| now >= at) {
                        tracing::debug!("idle past wait_timeout");
                        return Ok(());
                    }
                    // Armed for an earlier deadline: the session was busy since.
                    continue;
                }
                _ = backend_closed(held), if holding => {
                    if Box::pin(self.server_closed_idle()).await {
                        return Ok(());
                    }
                    continue;
                }
                _ = async move { match switch {
                    Some(begun) => begun.await,
                    None => std::future::pending().await,
                } }, if movable => continue,
            };
            served = true;
            // Boxed: a command's future is the largest state of the session's task,
            // and an idle session would otherwise keep room for it (ten kilobytes a
            // client) between statements.
            let going_on = boxed_in_place(|| self.command(header)).await?;
            self.stmt.release();
            if !going_on {
                return Ok(());
            }
        }
    }

    /// The command whose header just arrived: classified, screened, then answered by
    /// Sluice or sent down the statement pipeline. False when the session ends.
    async fn command(&mut self, header: Header) -> Result<bool, SessionError> {
        if header.seq != 0 {
            let e = SessionError::ClientProtocol(ProtocolError::Sequence {
                got: header.seq,
                expected: 0,
            });
            answer_protocol_error(&mut self.client, &e, header.seq.wrapping_add(1)).await;
            return Err(e);
        }
        Stats::incr(&self.fe.stats.commands);
        let head_len = header.len.min(CLASSIFY_HEAD);
        let action = match classify(&self.client.rbuf[4..4 + head_len]) {
            Action::Forward(request) => self.screen_kill(request, header.len).await?,
            other => other,
        };
        if !matches!(action, Action::Forward(_)) {
            self.forget_wrapped_rows();
        }
        // The screen may have rewritten the text.
        let len = Header::parse(&self.client.rbuf).map_or(header.len, |h| h.len);
        match action {
            Action::Quit => Ok(false),
            Action::Refuse(err) => {
                Stats::incr(&self.fe.stats.commands_refused);
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, &err).await?;
                Ok(true)
            }
            Action::Forward(request) => self.statement(Statement::new(request, len)).await,
            Action::KillLeading(kills) => match self.kill_leading(kills, len).await? {
                kill::Leading::Answered(going_on) => Ok(going_on),
                kill::Leading::Run(len) => {
                    // What is left of the COM_QUERY's text.
                    let rest = Request {
                        command: Command::Query,
                        kind: ResponseKind::Query,
                        stmt_id: None,
                    };
                    self.statement(Statement::new(rest, len)).await
                }
            },
            Action::ChangeUser => {
                // The server drops the session's prepared statements.
                self.kill_statements.clear();
                self.change_user().await
            }
            Action::Kill(k) => self.kill(k).await,
        }
    }

    /// A forwarded command, by the session's backing. Returns whether the session goes
    /// on.
    async fn statement(&mut self, stmt: Statement) -> Result<bool, SessionError> {
        match self.backing {
            Backing::Multiplexed { .. } => self.statement_multiplexed(stmt).await,
            Backing::Dedicated(_) | Backing::Detached => self.statement_dedicated(stmt).await,
        }
    }

    /// How long a multiplexed session may stay idle: its own `wait_timeout`, else the
    /// server's default for its kind of client. A dedicated session's connection is
    /// closed by the server itself, which [`Self::server_closed_idle`] follows.
    fn idle_limit(&mut self) -> Option<std::time::Duration> {
        let mux = self.backing.mux()?;
        if let Some(v) = mux.vars.get(b"wait_timeout".as_slice()) {
            let secs: f64 = std::str::from_utf8(v).ok()?.parse().ok()?;
            return Some(std::time::Duration::from_secs_f64(secs.max(1.0)));
        }
        if self.idle_default.is_none() {
            // The globals the session started with, else those its connection read.
            let secs = |name: &[u8]| {
                let v = mux.globals.as_ref()?.values.get(name)?;
                std::str::from_utf8(v).ok()?.parse().ok()
            };
            let (wait, interactive) = match (secs(b"wait_timeout"), secs(b"interactive_timeout")) {
                (Some(w), Some(i)) => (w, i),
                _ => self.backing.conn()?.idle_timeouts?,
            };
            let interactive_client = self.client.caps.contains(CapabilityFlags::INTERACTIVE);
            let secs = if interactive_client {
                interactive
            } else {
                wait
            };
            self.idle_default = Some(std::time::Duration::from_secs(secs.max(1)));
        }
        self.idle_default
    }

    /// The server closed (or wrote to) the connection the session holds between
    /// statements: a timeout, a KILL from elsewhere, a restart. When the session's state
    /// lived there (a dedicated connection, an open transaction, a pin) the session ends
    /// now, as a direct connection would; otherwise it only loses that connection.
    async fn server_closed_idle(&mut self) -> bool {
        let Some(mut backend) = self.backing.take_conn() else {
            return false;
        };
        backend.mark_broken();
        let state_there = match &self.backing {
            Backing::Multiplexed { mux, .. } => mux.pin_reason(backend.status).is_some(),
            Backing::Dedicated(_) | Backing::Detached => true,
        };
        // A server that went away (it closed the connection without a word and takes
        // no new one: a crash, not a KILL or a timeout) leaves a transaction, if that
        // is all the session had there, that can run again on the next writer at the
        // session's next statement.
        let silent = backend.rbuf.is_empty();
        let member = self.member.clone();
        let candidate = self.backing.mux().is_some_and(|m| {
            state_there
                && silent
                && m.replay.usable()
                && m.pin_reason(sluice_wire::StatusFlags(0)).is_none()
        });
        let replay_later = match member {
            Some(m) if candidate => {
                let gone = !server_answers(&m.pool.server.endpoint).await;
                if gone {
                    if let Some(mux) = self.backing.mux_mut() {
                        mux.replay.lost_on = Some(m);
                    }
                }
                gone
            }
            _ => false,
        };
        let state_there = state_there && !replay_later;
        tracing::debug!(
            state_there,
            replay_later,
            "the server closed the session's idle connection"
        );
        drop(backend);
        if let Some(m) = self.backing.mux_mut() {
            m.hold_until = None;
        }
        self.publish();
        state_there
    }
}

/// Whether the user may have one more session (`max_user_connections`, the user's own
/// or the default); if not, the client is told as the server tells it.
async fn admitted(fe: &Frontend, client: &mut ClientConn, logged_in: &login::LoggedIn) -> bool {
    let user = &logged_in.user;
    let max = user
        .max_connections
        .unwrap_or(fe.limits.max_user_connections);
    if fe.user_connected(&user.name, max) {
        return true;
    }
    Stats::incr(&fe.stats.client_connections_refused);
    let err = ErrPacket::new(
        code::ER_TOO_MANY_USER_CONNECTIONS,
        "42000",
        format!(
            "User {} already has more than 'max_user_connections' active connections",
            user.name
        ),
    );
    let _ = client.write_err(logged_in.next_seq, &err).await;
    false
}

impl Session {
    /// The session of a client just logged in, entered in the session list (where
    /// KILL and the process list find it).
    fn open(
        fe: &Arc<Frontend>,
        id: u32,
        client: ClientConn,
        logged_in: &login::LoggedIn,
    ) -> Session {
        let user = logged_in.user.clone();
        let kill = Arc::new(tokio::sync::Notify::new());
        let live = Arc::new(SessionLive::default());
        fe.sessions.lock().insert(
            id,
            SessionEntry {
                user: user.name.clone(),
                login: user.backend.clone(),
                client: client.peer,
                multiplexed: fe.pool_config.multiplex,
                attributes: logged_in.attributes.clone(),
                kill: kill.clone(),
                live: live.clone(),
            },
        );
        let multi_statements = client.caps.contains(CapabilityFlags::MULTI_STATEMENTS);
        let probe = fe
            .analytics
            .enabled()
            .then(|| SessionProbe::new(fe.analytics.user(&user.name)));
        Session {
            fe: fe.clone(),
            id,
            client,
            user,
            charset: logged_in.charset,
            attributes: logged_in.attributes.clone(),
            cache: fe
                .cache
                .clone()
                .map(|c| Box::new(cached::CacheState::new(c))),
            backing: Backing::Detached,
            kill,
            live,
            member: None,
            probe,
            idle_default: None,
            stmt: Default::default(),
            text: Default::default(),
            multi_statements,
            kill_statements: Default::default(),
        }
    }
}

/// Whether a server still greets a new connection (within half a second): one that
/// closed a connection on purpose does, one that went away does not. The greeting, not
/// the connect: a server being killed may still have its listening socket for a moment.
async fn server_answers(endpoint: &crate::stream::Endpoint) -> bool {
    use tokio::io::AsyncReadExt;
    let greets = async {
        let mut socket = endpoint.connect().await?;
        let mut byte = [0u8; 1];
        socket.read(&mut byte).await
    };
    let wait = std::time::Duration::from_millis(500);
    matches!(tokio::time::timeout(wait, greets).await, Ok(Ok(1)))
}

/// Resolves when the server sends anything on, or closes, a connection nobody is
/// waiting on a response from.
async fn backend_closed(backend: Option<&mut PooledConn>) {
    match backend {
        Some(b) => {
            let _ = b.read_more().await;
        }
        None => std::future::pending().await,
    }
}

/// The future `make` builds, built in its box: `Box::pin(make())` builds it on the stack
/// first and then copies all of its room to the heap, which for a command is kilobytes
/// per statement.
#[inline(always)]
fn boxed_in_place<F: std::future::Future>(make: impl FnOnce() -> F) -> std::pin::Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}

/// Points the session's one timer at the deadline `idle` when it would fire later
/// (`armed`: where it points now); a deadline that moved later leaves it alone, and the
/// timer that fires early is re-armed then.
#[inline]
fn arm_idle(
    timer: std::pin::Pin<&mut tokio::time::Sleep>,
    idle: Option<Instant>,
    armed: &mut Option<Instant>,
) {
    match (idle, *armed) {
        (Some(at), Some(was)) if was <= at => {}
        (Some(at), _) => {
            timer.reset(at);
            *armed = Some(at);
        }
        (None, _) => *armed = None,
    }
}

#[cfg(test)]
mod task_size {
    /// The size of what `f` returns (a future, for an async fn), without calling it.
    fn returned<A, B, C, D, E, R>(_f: fn(A, B, C, D, E) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A session's task keeps room for its largest state for as long as the client is
    /// connected, idle or not: the steps of a command and of the login are boxed, the
    /// connection is passed boxed, the cache's side is boxed and the statement in flight
    /// is kept only while one is, and the waits of an idle session are small, so that
    /// this stays near 1.7 KiB (it was 9.7 KiB, half of an idle client's memory).
    #[test]
    fn an_idle_session_task_stays_small() {
        let size = returned(super::run);
        assert!(size <= 1728, "a session's task is {size} bytes");
    }
}
