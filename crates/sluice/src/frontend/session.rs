//! One client session: log in, lease a backend connection, then loop over commands —
//! classify, forward, and stream the response back as it arrives. Bad input gets a
//! MySQL error or a clean close and never touches another session.

use super::config::ListenerConfig;
use super::login::{self, AuthOutcome, LoggedIn};
use super::{ClientConn, Frontend, SessionEntry, SessionLive};
use crate::analytics::{CacheUse, SessionProbe};
use crate::auth::User;
use crate::backend::{on_schema, ConnParams, PoolKey, PooledConn};
use crate::classify::{classify, Action};
use crate::error::{code, BackendError, SessionError};
use crate::router::Target;
use crate::shutdown::Shutdown;
use crate::stats::Stats;
use bytes::Buf;
use sluice_wire::command::Command;
use sluice_wire::handshake::ChangeUser;
use sluice_wire::packet::MAX_PAYLOAD;
use sluice_wire::packet::{Header, HEADER_LEN};
use sluice_wire::response::{ErrPacket, OkPacket};
use sluice_wire::tracker::{Event, Outcome, RequestSpan, ResponseKind, ResponseTracker, Scanner};
use sluice_wire::{CapabilityFlags, ProtocolError, StatusFlags};
use std::sync::Arc;
use tokio::time::Instant;
use tracing::Instrument;

pub(super) mod cached;
mod globals;
mod identity;
mod kill;
pub mod mux;
mod prepared;
mod relay;
use relay::Relayed;
mod route;
mod tracking;

/// The statement id of a COM_STMT_* packet at the front of `buf`.
fn stmt_id(buf: &[u8]) -> Option<u32> {
    sluice_wire::statement::request_stmt_id(buf.get(HEADER_LEN..)?)
}

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
    backend: Option<PooledConn>,
    /// The session's side of the query cache, when one is configured.
    cache: Option<cached::CacheState>,
    /// Multiplexing state, when the session's connections are shared.
    mux: Option<mux::Mux>,
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
    /// The statement in flight.
    stmt: InFlight,
}

/// What the pipeline's stages learn of the statement in flight and tell each other:
/// made afresh for every command, so nothing of one statement reaches the next.
#[derive(Default)]
struct InFlight {
    /// A routing rule's time limit.
    timeout: Option<std::time::Duration>,
    /// Where it was routed.
    target: Option<crate::router::Target>,
    /// It may be sent again elsewhere if its server is lost before any of the
    /// response reached the client (plain reads outside transactions).
    retry_armed: bool,
    /// The server a read was lost on: its retry goes elsewhere (the pool may still
    /// hold connections to it that look fine).
    avoid: Option<Arc<crate::router::Member>>,
    /// A lost server ends only this statement, not the session: multiplexed, outside
    /// a transaction, holding nothing on that connection.
    survive_loss: bool,
    /// The error for a statement whose server was lost inside a transaction, when
    /// nothing can have been committed.
    loss_error: Option<ErrPacket>,
    /// What it got: its response, the server that answered, the cache's part, and the
    /// request's size.
    outcome: Outcome,
    served_by: Option<Arc<crate::backend::Server>>,
    cache_use: CacheUse,
    request_len: u64,
    /// Bytes written to the client before it.
    sent_before: u64,
    /// It started inside a transaction.
    in_transaction: bool,
    /// It reads the process list: its thread ids are translated.
    processlist: Option<identity::ProcesslistIds>,
    /// Its `CONNECTION_ID()` was replaced: never cached.
    identity_rewritten: bool,
    /// It may set a server global: new sessions read them again.
    may_set_global: bool,
}

/// Where the idle timer waits while no deadline is armed (its branch is off then).
const IDLE_PARKED: std::time::Duration = std::time::Duration::from_secs(86_400);

/// Statements longer than this are digested by their first bytes only (bulk inserts:
/// their digests fold the rows anyway).
const DIGEST_TEXT_MAX: usize = 64 << 10;

/// Serves one accepted client until it quits, fails, or shutdown stops it between
/// statements.
pub async fn run(
    fe: Arc<Frontend>,
    client: ClientConn,
    listener: Arc<ListenerConfig>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: Shutdown,
) {
    let id = fe.next_connection_id();
    let span = tracing::info_span!("session", id, client = %client.peer);
    let _registered = Registered {
        fe: fe.clone(),
        id,
        user: None,
    };
    let mut registered = _registered;
    serve(fe, id, client, listener, tls, shutdown, &mut registered)
        .instrument(span)
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
    mut client: ClientConn,
    listener: Arc<ListenerConfig>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: Shutdown,
    registered: &mut Registered,
) {
    let login = tokio::time::timeout(
        fe.limits.handshake_timeout,
        login::login(&fe, &mut client, &listener, tls.as_ref(), id),
    );
    let logged_in = tokio::select! {
        r = login => match r {
            Ok(Ok(Some(l))) => l,
            Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                count_client_error(&fe, &e);
                tracing::debug!(error = %e, "login failed");
                answer_protocol_error(&mut client, &e, 2).await;
                return;
            }
            Err(_) => {
                tracing::debug!("login timed out");
                return;
            }
        },
        _ = shutdown.stopping() => return,
    };
    let user = logged_in.user.clone();
    let max = user
        .max_connections
        .unwrap_or(fe.limits.max_user_connections);
    if !fe.user_connected(&user.name, max) {
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
        return;
    }
    registered.user = Some(user.name.clone());
    let user_name = user.name.clone();
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
    let mut session = Session {
        fe: fe.clone(),
        id,
        client,
        user,
        charset: logged_in.charset,
        attributes: logged_in.attributes.clone(),
        backend: None,
        cache: fe.cache.clone().map(cached::CacheState::new),
        mux: None,
        kill,
        live,
        member: None,
        probe: fe
            .analytics
            .enabled()
            .then(|| SessionProbe::new(fe.analytics.user(&user_name))),
        idle_default: None,
        stmt: InFlight::default(),
    };
    if !session.finish_login(logged_in).await {
        return;
    }
    tracing::debug!(user = %session.user.name, "logged in");
    if fe.cache.is_some() {
        let params = session.key(&session.user).params;
        fe.client_logged_in(&session.user.name, &params);
    }
    match session.command_loop(&mut shutdown).await {
        Ok(()) => tracing::debug!("session ended"),
        Err(e) => {
            count_client_error(&fe, &e);
            tracing::debug!(error = %e, side = ?e.side(), "session ended with an error");
        }
    }
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
    /// The pool key of connections that speak exactly the client's wire format.
    fn key(&self, user: &User) -> PoolKey {
        PoolKey::new(user.backend.clone(), self.params(false))
    }

    /// The key of a connection the session owns: it carries the client's attributes
    /// when configured so (the server keeps those of the login only).
    fn own_key(&self, user: &User) -> PoolKey {
        let key = self.key(user);
        if self.fe.pool_config.forward_attributes && !self.attributes.is_empty() {
            return key.with_attributes(self.attributes.clone());
        }
        key
    }

    fn params(&self, multiplexed: bool) -> ConnParams {
        let mut wire_caps = self.client.caps.0 & CapabilityFlags::WIRE_FORMAT;
        if multiplexed {
            wire_caps |= CapabilityFlags::SESSION_TRACK;
        }
        ConnParams {
            wire_caps,
            mariadb_caps: self.client.mariadb_caps,
            charset: self.charset,
            track_state: multiplexed,
        }
    }

    /// The pool key a multiplexed session's connections have: the client's format with
    /// session tracking on (OK packets are rewritten for clients that lack it).
    fn mux_key(&self, user: &User) -> PoolKey {
        PoolKey::new(user.backend.clone(), self.params(true))
    }

    /// Whether this session's connections are shared: configured, and the servers
    /// report session state.
    fn multiplexed(&self) -> bool {
        self.fe.pool_config.multiplex
            && self
                .fe
                .identity
                .load()
                .caps
                .contains(CapabilityFlags::SESSION_TRACK)
    }

    /// The status flags the client last saw.
    fn last_status(&self) -> StatusFlags {
        match (&self.backend, &self.mux) {
            (Some(b), _) => b.status,
            (None, Some(m)) => m.status,
            (None, None) => StatusFlags::default(),
        }
    }

    /// Leases the backend connection and answers the login with OK, or with the error
    /// that prevented it. Returns whether the session goes on.
    async fn finish_login(&mut self, l: LoggedIn) -> bool {
        match self.attach(self.user.clone(), l.database.as_deref()).await {
            Ok(Ok(())) => {
                let status = self.last_status();
                let ok = OkPacket {
                    status,
                    ..Default::default()
                };
                if self.client.write_ok(l.next_seq, &ok).await.is_err() {
                    return false;
                }
                self.release_if_free().await.is_ok()
            }
            Ok(Err(err)) => {
                let _ = self.client.write_err(l.next_seq, &err).await;
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "no backend connection for a client");
                let _ = self.client.write_err(l.next_seq, &e.to_err_packet()).await;
                false
            }
        }
    }

    /// Leases a backend connection for `user` on `schema`. The inner error is the
    /// server's answer to selecting the schema (unknown database...).
    async fn attach(
        &mut self,
        user: Arc<User>,
        schema: Option<&[u8]>,
    ) -> Result<Result<(), ErrPacket>, BackendError> {
        self.backend = None;
        if self.multiplexed() {
            return self.attach_multiplexed(user, schema).await;
        }
        let key = self.own_key(&user);
        let router = self.fe.router.load_full();
        let leased = router
            .lease(&Target::Writer, &[], &key, schema, on_schema(schema), 1)
            .await
            .map(|(conn, _)| conn);
        let mut conn = match leased {
            Ok(c) => c,
            Err(BackendError::Rejected { err, .. }) => return Ok(Err(err)),
            Err(e) => return Err(e),
        };
        // A connection that waited in the pool has the session values of the globals of
        // its login or last reset; a reset now gives it those of this moment, as a new
        // server session gets (the server re-reads its globals on a reset).
        if !conn.fresh {
            if let Err(err) = conn
                .simple_command(&[Command::ResetConnection as u8])
                .await?
            {
                conn.mark_broken();
                return Ok(Err(err));
            }
        }
        if let Err(err) = conn.ensure_schema(schema).await? {
            return Ok(Err(err));
        }
        self.mux = None;
        self.live.attach(&conn.server, conn.thread_id);
        if let Some(e) = self.fe.sessions.lock().get_mut(&self.id) {
            e.user = user.name.clone();
            e.login = user.backend.clone();
        }
        self.user = user;
        self.backend = Some(conn);
        if let Some(c) = self.cache.as_mut() {
            c.reset(schema);
        }
        Ok(Ok(()))
    }

    /// A multiplexed session starts with a fresh state and no connection. A schema asked
    /// for is checked on a connection if one is free right now; otherwise the first
    /// statement's `COM_INIT_DB` checks it (a login never waits in the queue).
    async fn attach_multiplexed(
        &mut self,
        user: Arc<User>,
        schema: Option<&[u8]>,
    ) -> Result<Result<(), ErrPacket>, BackendError> {
        let key = self.mux_key(&user);
        let translate = !self.client.caps.contains(CapabilityFlags::SESSION_TRACK);
        // MariaDB (which does not set CLIENT_LONG_PASSWORD) length-codes the info string
        // of an OK for every client; MySQL only for clients that track session state.
        let mariadb = self.fe.identity.load().caps.0 & CapabilityFlags::LONG_PASSWORD == 0;
        let owned = schema.map(<[u8]>::to_vec);
        match self.mux.as_mut() {
            Some(m) => m.reset(key.clone(), owned),
            None => self.mux = Some(mux::Mux::new(key.clone(), owned, translate, mariadb)),
        }
        if let Some(e) = self.fe.sessions.lock().get_mut(&self.id) {
            e.user = user.name.clone();
            e.login = user.backend.clone();
        }
        self.user = user;
        if let Some(c) = self.cache.as_mut() {
            c.reset(schema);
        }
        // Unless the pool is busy, the login proves the server is there, takes the
        // backend login, and knows the schema.
        let router = self.fe.router.load_full();
        let mut conn = match router.try_lease_writer(&key, schema).await {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(Ok(())),
            Err(BackendError::Rejected { err, .. }) => return Ok(Err(err)),
            Err(e) => return Err(e),
        };
        if let Err(err) = conn.ensure_schema(schema).await? {
            return Ok(Err(err));
        }
        self.backend = Some(conn);
        if let Err(e) = self.align_globals().await {
            if let Some(b) = self.backend.as_mut() {
                b.mark_broken();
            }
            self.backend = None;
            return Err(e);
        }
        self.publish();
        Ok(Ok(()))
    }

    async fn command_loop(&mut self, shutdown: &mut Shutdown) -> Result<(), SessionError> {
        // One registration for the whole session, not one per statement.
        let kill = self.kill.clone();
        let mut killed = std::pin::pin!(kill.notified());
        // One idle timer for the whole session, moved only when it fires before the
        // session's deadline: a statement pushes the deadline later without touching
        // the timer.
        let mut idle_timer = std::pin::pin!(tokio::time::sleep(IDLE_PARKED));
        let mut idle_armed: Option<Instant> = None;
        let mut idle_since = Instant::now();
        let mut served = false;
        loop {
            if shutdown.is_stopping() {
                return Ok(());
            }
            if std::mem::take(&mut served) {
                idle_since = Instant::now();
            }
            let hold = self.mux.as_ref().and_then(|m| m.hold_until);
            let idle = self.idle_limit().map(|d| idle_since + d);
            match (idle, idle_armed) {
                (Some(at), Some(armed)) if armed <= at => {}
                (Some(at), _) => {
                    idle_timer.as_mut().reset(at);
                    idle_armed = Some(at);
                }
                (None, _) => idle_armed = None,
            }
            let holding = self.backend.is_some();
            let header = tokio::select! {
                h = self.client.peek_header(CLASSIFY_HEAD) => h?,
                _ = shutdown.stopping() => return Ok(()),
                _ = &mut killed => return Ok(()),
                _ = sleep_until(hold), if hold.is_some() => {
                    self.end_hold().await?;
                    continue;
                }
                // As the server closes a connection idle past its wait_timeout.
                _ = &mut idle_timer, if idle_armed.is_some() => {
                    if idle.is_some_and(|at| Instant::now() >= at) {
                        tracing::debug!("idle past wait_timeout");
                        return Ok(());
                    }
                    // Armed for an earlier deadline: the session was busy since.
                    idle_armed = None;
                    continue;
                }
                _ = backend_closed(self.backend.as_mut()), if holding => {
                    if self.server_closed_idle() {
                        return Ok(());
                    }
                    continue;
                }
            };
            served = true;
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
                Action::Forward(kind) => self.screen_kill(kind, header.len).await?,
                other => other,
            };
            match action {
                Action::Quit => return Ok(()),
                Action::Refuse(err) => {
                    Stats::incr(&self.fe.stats.commands_refused);
                    let seq = self.client.skip_packet().await?;
                    self.client.write_err(seq, &err).await?;
                }
                Action::Forward(kind) if self.mux.is_some() => {
                    self.begin_statement(header.len).await?;
                    let len = self.screen_identity(kind, header.len).await?;
                    let going_on = match self.answer_from_cache(len).await? {
                        Some(answered) => answered.goes_on(),
                        None => self.forward_multiplexed(kind, len).await?,
                    };
                    self.end_statement();
                    if !going_on {
                        return Ok(());
                    }
                }
                Action::Forward(kind) => {
                    let command = Command::from_byte(self.client.rbuf[HEADER_LEN]);
                    let set_option = command == Some(Command::SetOption);
                    let closing =
                        stmt_id(&self.client.rbuf).filter(|_| command == Some(Command::StmtClose));
                    self.begin_statement(header.len).await?;
                    if self.dedicated_refusal().await? {
                        self.end_statement();
                        continue;
                    }
                    let len = self.screen_identity(kind, header.len).await?;
                    let relayed = match self.answer_from_cache(len).await? {
                        Some(answered) => answered,
                        None if self.cache.is_some() => {
                            let id = stmt_id(&self.client.rbuf);
                            self.forward_cached(kind, len, id).await?
                        }
                        None => self.relay(kind).await?,
                    };
                    let reset =
                        command == Some(Command::ResetConnection) && !self.client.answered_error;
                    self.dedicated_closed(closing, reset);
                    self.end_statement();
                    if !relayed.goes_on() {
                        return Ok(());
                    }
                    if set_option {
                        // COM_RESET_CONNECTION does not restore the multi-statement
                        // option, so this connection no longer matches its pool key.
                        if let Some(b) = self.backend.as_mut() {
                            b.mark_broken();
                        }
                    }
                }
                Action::ChangeUser => {
                    if !self.change_user().await? {
                        return Ok(());
                    }
                }
                Action::Kill(k) => {
                    if !self.kill(k).await? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// How long a multiplexed session may stay idle: its own `wait_timeout`, else the
    /// server's default for its kind of client. A dedicated session's connection is
    /// closed by the server itself, which [`Self::server_closed_idle`] follows.
    fn idle_limit(&mut self) -> Option<std::time::Duration> {
        let mux = self.mux.as_ref()?;
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
                _ => self.backend.as_ref()?.idle_timeouts?,
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
    fn server_closed_idle(&mut self) -> bool {
        let Some(mut backend) = self.backend.take() else {
            return false;
        };
        backend.mark_broken();
        let state_there = match &self.mux {
            None => true,
            Some(m) => m.pin_reason(backend.status).is_some(),
        };
        tracing::debug!(
            state_there,
            "the server closed the session's idle connection"
        );
        drop(backend);
        if let Some(m) = self.mux.as_mut() {
            m.hold_until = None;
        }
        self.publish();
        state_there
    }

    /// Notes what analytics needs of the command at the front of the client buffer
    /// (reading the rest of a statement's text in first, when it is not too long).
    async fn begin_statement(&mut self, len: usize) -> Result<(), SessionError> {
        self.stmt = InFlight {
            request_len: (HEADER_LEN + len) as u64,
            sent_before: self.client.sent,
            ..InFlight::default()
        };
        self.client.answered_error = false;
        if self.probe.is_none() {
            return Ok(());
        }
        self.stmt.in_transaction = self.last_status().in_transaction();
        let command = Command::from_byte(self.client.rbuf[4]);
        if matches!(command, Some(Command::Query | Command::StmtPrepare))
            && len < MAX_PAYLOAD
            && len <= DIGEST_TEXT_MAX
        {
            while self.client.rbuf.len() < HEADER_LEN + len {
                self.client.read_more().await?;
            }
        }
        let end = (HEADER_LEN + len).min(self.client.rbuf.len());
        let body = &self.client.rbuf[HEADER_LEN + 1..end];
        let probe = self.probe.as_mut().expect("checked above");
        // Only an id inside this packet: a truncated one is the server's to refuse.
        let id = stmt_id(&self.client.rbuf).filter(|_| body.len() >= 4);
        match command {
            Some(Command::Query) => probe.query(body, self.stmt.request_len),
            Some(Command::StmtPrepare) => probe.prepare(body),
            Some(Command::StmtExecute) => {
                if let Some(id) = id {
                    probe.execute(id, &body[4..], self.stmt.request_len);
                }
            }
            Some(Command::StmtClose) => {
                if let Some(id) = id {
                    probe.closed(id);
                }
            }
            Some(Command::ResetConnection) => probe.forget_prepared(),
            _ => {}
        }
        Ok(())
    }

    /// The command ended (however it went): counts what went to the client and reports
    /// the statement to analytics.
    fn end_statement(&mut self) {
        if std::mem::take(&mut self.stmt.may_set_global) {
            if let Some(server) = &self.stmt.served_by {
                server.globals.changed();
            }
        }
        let bytes_out = self.client.sent - self.stmt.sent_before;
        Stats::add(&self.fe.stats.bytes_to_clients, bytes_out);
        let Some(probe) = self.probe.as_mut() else {
            return;
        };
        probe.preparing = None;
        if probe.current.is_none() {
            return;
        }
        let mut outcome = self.stmt.outcome;
        outcome.error |= self.client.answered_error;
        let schema = match (&self.mux, &self.backend) {
            (Some(m), _) => m.schema.as_deref(),
            (None, Some(b)) => b.schema.as_deref(),
            (None, None) => None,
        };
        let schema = schema.and_then(|s| std::str::from_utf8(s).ok());
        probe.finish(
            &self.fe.analytics,
            schema,
            outcome,
            self.stmt.served_by.as_ref().map(|s| s.name.as_str()),
            self.stmt.cache_use,
            self.stmt.in_transaction,
            bytes_out,
        );
    }

    /// A command of a multiplexed session: on a connection brought in line with the
    /// session, then the connection goes back unless something keeps it.
    async fn forward_multiplexed(
        &mut self,
        kind: ResponseKind,
        len: usize,
    ) -> Result<bool, SessionError> {
        let command = Command::from_byte(self.client.rbuf[4]);
        let client_id = stmt_id(&self.client.rbuf);
        // A plain read that loses its server before any reply can run again elsewhere:
        // keep the client's bytes as they came (ids are rewritten on the way).
        let router = self.fe.router.load_full();
        let copy = if router.splits() && self.cache.is_none() && len <= mux::MAX_BUFFERED {
            while self.client.rbuf.len() < HEADER_LEN + len {
                self.client.read_more().await?;
            }
            Some(self.client.rbuf[..HEADER_LEN + len].to_vec())
        } else {
            None
        };
        let mut attempts = 0;
        let fx = loop {
            let fx = match self.mux_prepare(len, &router).await? {
                mux::Ready::Go(fx) => fx,
                mux::Ready::Done(going_on) => return Ok(going_on),
            };
            let timer = match (self.stmt.timeout.take(), &self.backend, &self.member) {
                (Some(after), Some(b), Some(m)) => Some(route::statement_timeout(
                    &router,
                    m.clone(),
                    self.key(&self.user),
                    b.thread_id,
                    after,
                )),
                _ => None,
            };
            self.arm_for_loss(command, client_id, copy.is_some() && attempts < 2);
            let relayed = if self.cache.is_some() {
                let len = Header::parse(&self.client.rbuf).map_or(len, |h| h.len);
                self.forward_cached(kind, len, client_id).await?
            } else {
                self.relay(kind).await?
            };
            if let Some(t) = timer {
                t.abort();
            }
            if let Some(b) = self.backend.as_mut() {
                if b.is_broken() && relayed.goes_on() {
                    // The transaction died with its server: the session is outside one.
                    b.status = StatusFlags(b.status.0 & !StatusFlags::IN_TRANS);
                }
            }
            if relayed == Relayed::LostBeforeReply {
                // Nothing reached the client: the same bytes go to another server.
                attempts += 1;
                Stats::incr(&router.stats.retried_reads);
                if let Some(b) = self.backend.as_mut() {
                    b.mark_broken();
                }
                self.backend = None;
                self.stmt.avoid = self.member.take();
                self.publish();
                let copy = copy.as_ref().expect("armed only with a copy");
                let rest = self.client.rbuf.split();
                self.client.rbuf.extend_from_slice(copy);
                self.client.rbuf.extend_from_slice(&rest);
                tracing::info!("read retried on another server after its server was lost");
                continue;
            }
            if !relayed.goes_on() {
                return Ok(false);
            }
            break fx;
        };
        if command == Some(Command::SetOption) {
            // The multi-statement option is part of the pool key, and a reset does not
            // restore it: the session keeps this connection, which serves no one after.
            if let Some(b) = self.backend.as_mut() {
                b.retire();
            }
            self.mux_pin_option();
        }
        self.mux_finish(&fx, command, client_id).await?;
        Ok(true)
    }

    /// COM_CHANGE_USER: authenticate the new user here, then give the session a clean
    /// backend connection for that user and schema.
    async fn change_user(&mut self) -> Result<bool, SessionError> {
        let packet = self
            .client
            .read_packet(self.fe.limits.max_decoded_packet)
            .await?;
        let request = match ChangeUser::parse(&packet.payload, self.client.caps) {
            Ok(r) => r,
            Err(e) => {
                self.client
                    .write_err(
                        packet.last_seq.wrapping_add(1),
                        &ErrPacket::new(
                            code::ER_HANDSHAKE_ERROR,
                            "08S01",
                            format!("Bad handshake ({e})"),
                        ),
                    )
                    .await?;
                return Ok(false);
            }
        };
        let plugin = request
            .auth_plugin
            .as_deref()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_else(|| sluice_wire::auth::NATIVE_PASSWORD.into());
        // Clients scramble with the nonce of the initial handshake, which the session
        // does not keep: an auth switch with a fresh nonce makes them answer again.
        let outcome = login::authenticate(
            &self.fe,
            &mut self.client,
            &request.username,
            &plugin,
            request.auth_response.clone(),
            &[],
            packet.last_seq.wrapping_add(1),
            true,
        )
        .await?;
        match outcome {
            AuthOutcome::Accepted { user, next_seq } => {
                if let Some(cs) = request.charset {
                    self.charset = cs as u8;
                }
                let previous = self.user.name.clone();
                match self.attach(user, request.database.as_deref()).await {
                    Ok(Ok(())) => {
                        if previous != self.user.name {
                            self.fe.user_disconnected(&previous);
                            // Counted without a limit: the login already passed.
                            self.fe.user_connected(&self.user.name, 0);
                        }
                        let status = self.last_status();
                        let ok = OkPacket {
                            status,
                            ..Default::default()
                        };
                        self.client.write_ok(next_seq, &ok).await?;
                        if self.mux.is_some() {
                            self.release_if_free().await?;
                        }
                        Ok(true)
                    }
                    Ok(Err(err)) => {
                        self.client.write_err(next_seq, &err).await?;
                        Ok(false)
                    }
                    Err(e) => {
                        self.client.write_err(next_seq, &e.to_err_packet()).await?;
                        Ok(false)
                    }
                }
            }
            AuthOutcome::Refused { err, next_seq } => {
                Stats::incr(&self.fe.stats.auth_failures);
                self.client.write_err(next_seq, &err).await?;
                Ok(false)
            }
        }
    }
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

/// Waits until `at`, or forever without one (the branch is disabled then anyway).
async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}
