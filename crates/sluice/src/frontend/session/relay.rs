//! Relaying a command and its response between the client and the session's backend
//! connection: the streaming path every forwarded statement takes, with the few packets
//! Sluice reads or rewrites on the way (OK packets under multiplexing, process-list
//! rows), LOCAL INFILE, and the loss of the server mid-statement.

use super::cached::CacheState;
use super::mux::Mux;
use super::*;
use sluice_wire::statement::PrepareOk;
use sluice_wire::tracker::Outcome;
use std::time::Duration;

impl Session {
    /// Forwards the command at the front of the client buffer and streams its response.
    /// Returns false when the session must end (the backend was lost).
    pub(super) async fn relay(&mut self, kind: ResponseKind) -> Result<Relayed, SessionError> {
        self.relay_recording(kind, None).await
    }

    /// [`Self::relay`], keeping a copy of the response in `record` (up to its limit) for
    /// the cache.
    pub(super) async fn relay_recording(
        &mut self,
        kind: ResponseKind,
        record: Option<&mut cached::Recording>,
    ) -> Result<Relayed, SessionError> {
        // A read sent to a replica changes no rows there.
        if !matches!(self.stmt.target, Some(Target::Reader { .. })) {
            self.mark_origin(kind).await?;
        }
        if self.stmt.wrap_commit {
            return self.relay_wrapped().await;
        }
        let ttfb_of = self.balanced_member();
        let Some(backend) = self.backing.conn_mut() else {
            return Ok(Relayed::End);
        };
        let client = &mut self.client;
        if let Some(t) = self.stmt.trace.as_deref_mut() {
            t.server_sent = Some(std::time::Instant::now());
            if kind == ResponseKind::Query && client.rbuf.get(HEADER_LEN) == Some(&0x03) {
                super::traced::propagate(t, &mut client.rbuf);
            }
        }
        // The command itself: forwarded as it arrives, however large.
        let mut span = RequestSpan::new(0);
        if let Err(failed) = forward_packet(client, backend, &mut span, &self.fe).await {
            return self.request_not_sent(failed, span.next_seq()).await;
        }
        if kind == ResponseKind::None {
            return Ok(Relayed::Done);
        }
        self.stream_response(kind, record, span.next_seq(), ttfb_of)
            .await
    }

    /// The response to the command just sent, streamed to the client as it arrives
    /// (`seq`: its first packet's sequence id), with what Sluice reads on the way.
    async fn stream_response(
        &mut self,
        kind: ResponseKind,
        mut record: Option<&mut cached::Recording>,
        seq: u8,
        mut ttfb_of: Option<Arc<crate::router::Member>>,
    ) -> Result<Relayed, SessionError> {
        let (mut mux, Some(backend)) = self.backing.parts() else {
            return Ok(Relayed::End);
        };
        let client = &mut self.client;
        let mut cache = self.cache.as_deref_mut();
        // Split from the session's other parts once: the slot hands out one borrow.
        let stmt = &mut *self.stmt;
        let conflict_retry = stmt.conflict_retry;
        let mut scanner = Scanner::new(ResponseTracker::new(kind, backend.caps), seq);
        scanner.intercept_ok(mux.is_some());
        let mut processlist = stmt.processlist.as_mut();
        scanner.intercept_rows(processlist.is_some());
        let (fe, id) = (&self.fe, self.id);
        let mut first = true;
        // The response's last OK was intercepted and told to the cache.
        let mut ended_with_ok = false;
        let mut received = 0u64;
        let sent_at = Instant::now();
        loop {
            let scanned = scanner.scan(&backend.rbuf);
            let (n, event) = scanned.map_err(|e| broke_protocol(backend, e))?;
            if let (Some(Event::Done(status)), false) = (event, ended_with_ok) {
                response_ending(cache.as_deref_mut(), backend, n, status);
            }
            if first && conflict_retry && lost_conflict(event, &backend.rbuf[..n]) {
                // Nothing reached the client and nothing committed: the caller sends
                // the statement again.
                if let Some(r) = record.as_deref_mut() {
                    r.abandon();
                }
                backend.advance(n);
                return Ok(Relayed::Conflict);
            }
            let processes = processlist.as_deref_mut();
            let (m, c) = (mux.as_deref_mut(), cache.as_deref_mut());
            let read = intercepted(event, m, c, processes, backend, n, (fe, id))?;
            ended_with_ok |= read.last_ok;
            let ok_len = read.len;
            if n + ok_len > 0 {
                if self.live.killed() {
                    return Ok(killed_mid_statement(client, backend).await);
                }
                if std::mem::take(&mut first) {
                    first_reply(mux.as_deref_mut(), self.probe.as_mut(), kind, backend, n);
                    if let Some(t) = stmt.trace.as_deref_mut() {
                        t.server_first = Some(std::time::Instant::now());
                    }
                }
                if let (Some(Event::Done(_)), Some(t)) = (event, stmt.trace.as_deref_mut()) {
                    if scanner.outcome().error {
                        super::traced::server_error(t, &backend.rbuf[..n]);
                    }
                }
                let (before, ok) = backend.rbuf[..n + ok_len].split_at(n);
                let ok = read.translated.as_deref().unwrap_or(ok);
                let copies = [record.as_deref_mut(), stmt.replay_record.as_mut()];
                for r in copies.into_iter().flatten() {
                    r.push_parts(before, ok);
                }
                let written = if read.translated.is_some() {
                    client.stream_write_two(before, ok).await
                } else {
                    client.stream_write(&backend.rbuf[..n + ok_len]).await
                };
                passed_on(written, backend, fe, n + ok_len)?;
                received += (n + ok_len) as u64;
            }
            match event {
                Some(Event::Ok { .. } | Event::Column { .. } | Event::Row { .. }) => {}
                Some(Event::Done(status)) => {
                    let took = sent_at.elapsed();
                    stmt.relayed(scanner.outcome(), backend, received, took, fe);
                    if let (Some(t), Some(server)) = (stmt.trace.as_deref_mut(), &stmt.served_by) {
                        t.server_done(&server.endpoint.to_string());
                    }
                    client.flush().await?;
                    return response_done(backend, mux, status);
                }
                Some(Event::LocalInfile) => {
                    let copies = [record.as_deref_mut(), stmt.replay_record.as_mut()];
                    copies.into_iter().flatten().for_each(|r| r.abandon());
                    client.flush().await?;
                    let next =
                        relay_local_infile(client, backend, scanner.next_seq(), &self.fe).await?;
                    scanner.resume(next);
                }
                None => {
                    // What was written must reach the client before we wait (TLS buffers).
                    client.flush().await?;
                    if let Err(e) = backend.read_more().await {
                        let seq = scanner.next_seq();
                        return self.lost_mid_response(e, first, seq, record).await;
                    }
                    if let Some(m) = ttfb_of.take() {
                        m.observe_ttfb(sent_at.elapsed());
                    }
                }
            }
        }
    }

    /// The server was lost while the response was awaited: sent again elsewhere when
    /// armed to be and nothing reached the client (`first`), else the client is told.
    async fn lost_mid_response(
        &mut self,
        e: BackendError,
        first: bool,
        seq: u8,
        record: Option<&mut cached::Recording>,
    ) -> Result<Relayed, SessionError> {
        let backend = self.backing.conn_mut().expect("relaying on it");
        if self.live.killed() {
            return Ok(killed_mid_statement(&mut self.client, backend).await);
        }
        backend.mark_broken();
        Stats::incr(&self.fe.stats.backend_errors);
        if self.stmt.retry_armed && first {
            tracing::debug!(error = %e, "server lost before any reply");
            if let Some(r) = record {
                r.abandon();
            }
            return Ok(Relayed::LostBeforeReply);
        }
        // Mid-result, the client's framing can't be trusted to go on.
        let survive = self.stmt.survive_loss && first;
        let err = self.stmt.loss_error.take();
        lost_backend(&mut self.client, e, seq, survive, err).await
    }

    /// The server the statement's latency is measured for: readers are balanced by it,
    /// and so are writes spread over a Galera cluster's nodes.
    #[inline]
    fn balanced_member(&self) -> Option<Arc<crate::router::Member>> {
        let balanced = match &self.stmt.target {
            Some(Target::Reader { .. } | Target::Group(_) | Target::Node(_)) => true,
            Some(Target::Writer) => self.stmt.spreads_writes,
            None => false,
        };
        self.member.clone().filter(|_| balanced)
    }

    /// The command could not be sent whole: its server was lost (sent again elsewhere
    /// when armed to be), or its client.
    async fn request_not_sent(
        &mut self,
        failed: Forward,
        seq: u8,
    ) -> Result<Relayed, SessionError> {
        match failed {
            Forward::Backend(e) if self.stmt.retry_armed => {
                tracing::debug!(error = %e, "server lost before the statement was sent");
                Ok(Relayed::LostBeforeReply)
            }
            Forward::Backend(e) => {
                let err = self.stmt.loss_error.take();
                lost_backend(&mut self.client, e, seq, self.stmt.survive_loss, err).await
            }
            Forward::Client(e) => {
                Stats::incr(&self.fe.stats.client_aborts);
                Err(e)
            }
        }
    }
}

impl InFlight {
    /// The response ended: what it was, who answered, and the server's counts.
    #[inline]
    fn relayed(
        &mut self,
        outcome: Outcome,
        backend: &PooledConn,
        received: u64,
        took: Duration,
        fe: &Frontend,
    ) {
        self.outcome = outcome;
        Stats::add(&fe.stats.bytes_to_backends, self.request_len);
        let counters = &backend.server.counters;
        counters.relayed(self.request_len, received, took, outcome.error);
        self.served_by = Some(backend.server.clone());
    }
}

/// A packet of the response Sluice reads (or rewrites) before the client gets it.
#[derive(Default)]
struct Intercepted {
    /// Its length, written after the bytes before it.
    len: usize,
    /// What the client gets instead, when it is rewritten.
    translated: Option<Vec<u8>>,
    /// It is the response's last OK, told to the cache.
    last_ok: bool,
}

/// The response ends with `status` (`None`: an error) in the `n` bytes scanned: the
/// cache hears of it before the client can see its statement end, so that anything the
/// client tells others ("committed") already holds for the cache. (An OK the
/// multiplexer intercepted was told already, with its session state.) The OK is only
/// read when there is a change to judge.
#[inline]
fn response_ending(
    cache: Option<&mut CacheState>,
    backend: &PooledConn,
    n: usize,
    status: Option<StatusFlags>,
) {
    let Some(c) = cache else {
        return;
    };
    let changed = status.is_some_and(|s| s.contains(StatusFlags::SESSION_STATE_CHANGED));
    let tracked = backend.caps.contains(CapabilityFlags::SESSION_TRACK);
    let ok = (changed && tracked)
        .then(|| sole_ok(&backend.rbuf[..n]))
        .flatten();
    c.response_ending(status, backend.status, ok);
}

/// What Sluice reads of the packet after the `n` bytes scanned, by the event: an OK
/// packet under multiplexing (told to the cache too), a column or row of the process
/// list; nothing otherwise.
#[inline]
fn intercepted(
    event: Option<Event>,
    mux: Option<&mut Mux>,
    cache: Option<&mut CacheState>,
    processlist: Option<&mut identity::ProcesslistIds>,
    backend: &mut PooledConn,
    n: usize,
    who: (&Frontend, u32),
) -> Result<Intercepted, SessionError> {
    match event {
        Some(Event::Ok { len }) => {
            let m = mux.expect("OK packets are intercepted when multiplexing");
            ok_read(m, cache, backend, n, len)
        }
        Some(Event::Column { len } | Event::Row { len }) => {
            Ok(process_list_read(processlist, event, backend, n, len, who))
        }
        _ => Ok(Intercepted::default()),
    }
}

/// A column definition or row (`len` bytes after the `n` scanned) of a statement that
/// reads the process list: its thread ids are the sessions' the client knows.
fn process_list_read(
    processlist: Option<&mut identity::ProcesslistIds>,
    event: Option<Event>,
    backend: &PooledConn,
    n: usize,
    len: usize,
    (fe, session): (&Frontend, u32),
) -> Intercepted {
    let mut read = Intercepted {
        len,
        ..Intercepted::default()
    };
    let Some(p) = processlist else {
        return read;
    };
    let packet = &backend.rbuf[n..n + len];
    if matches!(event, Some(Event::Column { .. })) {
        p.column(packet, backend.extended_metadata());
    } else {
        let own = (backend.thread_id, session);
        read.translated = p.row(packet, || fe.sessions_on(&backend.server, own));
    }
    read
}

/// An OK packet intercepted under multiplexing (`len` bytes after the `n` scanned): read
/// for the session's state, rewritten if the client needs it, and, when it ends the
/// response, told to the cache before the client can see it.
#[inline]
fn ok_read(
    mux: &mut Mux,
    cache: Option<&mut CacheState>,
    backend: &mut PooledConn,
    n: usize,
    len: usize,
) -> Result<Intercepted, SessionError> {
    let (translated, status) = match mux.observe_ok(&backend.rbuf[n..n + len]) {
        Ok(read) => read,
        Err(e) => return Err(broke_protocol(backend, e)),
    };
    let mut last_ok = false;
    if let (false, Some(c)) = (status.more_results(), cache) {
        let ok = &backend.rbuf[n + HEADER_LEN..n + len];
        c.response_ending(Some(status), backend.status, Some(ok));
        last_ok = true;
    }
    Ok(Intercepted {
        len,
        translated,
        last_ok,
    })
}

/// The response's first bytes (`n`), before the client gets them: a prepare's OK names
/// the statement by the id the client is to know, and analytics learns that id.
#[inline]
fn first_reply(
    mux: Option<&mut Mux>,
    probe: Option<&mut SessionProbe>,
    kind: ResponseKind,
    backend: &mut PooledConn,
    n: usize,
) {
    if let Some(m) = mux {
        m.patch_prepare_ok(&mut backend.rbuf[..n]);
    } else if kind == ResponseKind::Prepare {
        prepared::note_dedicated_prepare(backend, n);
    }
    if let (ResponseKind::Prepare, Some(p)) = (kind, probe) {
        // Its executes are attributed to the prepared text's digest.
        let ok = backend.rbuf[..n]
            .get(HEADER_LEN..)
            .and_then(PrepareOk::parse);
        if let Some(ok) = ok {
            p.prepared(ok.stmt_id);
        }
    }
}

/// `len` bytes of the response were written to the client (or its connection failed,
/// which leaves the server's connection mid-response).
#[inline]
fn passed_on(
    written: std::io::Result<()>,
    backend: &mut PooledConn,
    fe: &Frontend,
    len: usize,
) -> Result<(), SessionError> {
    if let Err(e) = written {
        backend.mark_broken();
        Stats::incr(&fe.stats.client_aborts);
        return Err(e.into());
    }
    Stats::add(&fe.stats.bytes_from_backends, len as u64);
    backend.advance(len);
    Ok(())
}

/// The response reached the client whole: the connection's status (and what
/// multiplexing saw of it) is the one it ended with, and nothing may follow it.
#[inline]
fn response_done(
    backend: &mut PooledConn,
    mux: Option<&mut Mux>,
    status: Option<StatusFlags>,
) -> Result<Relayed, SessionError> {
    if let Some(m) = mux {
        m.observed.status = status;
    }
    if let Some(s) = status {
        backend.status = s;
    }
    if !backend.rbuf.is_empty() {
        backend.mark_broken();
        return Err(BackendError::Protocol {
            server: backend.server.name.clone(),
            source: ProtocolError::Malformed("data after the end of a response"),
        }
        .into());
    }
    Ok(Relayed::Done)
}

/// Whether the response ended (`event`) as one ERR packet saying the statement lost a
/// conflict.
#[inline]
fn lost_conflict(event: Option<Event>, response: &[u8]) -> bool {
    matches!(event, Some(Event::Done(_))) && certification_conflict(response)
}

/// Whether `response` is exactly one ERR packet saying the statement lost a conflict
/// (1213: Galera's certification failure, or an InnoDB deadlock), after which an
/// autocommit statement left nothing behind.
fn certification_conflict(response: &[u8]) -> bool {
    sluice_wire::packet::split_packet(response).is_some_and(|(_, payload)| {
        ErrPacket::parse(payload).is_ok_and(|e| e.code == code::ER_LOCK_DEADLOCK)
    })
}

/// Why a client packet could not be forwarded.
pub(super) enum Forward {
    Backend(BackendError),
    Client(SessionError),
}

/// Streams the client packet at the front of the buffer to the backend as it arrives,
/// whatever its size. On failure the backend connection is marked broken: the server
/// may hold part of a packet.
pub(super) async fn forward_packet(
    client: &mut ClientConn,
    backend: &mut PooledConn,
    span: &mut RequestSpan,
    fe: &Frontend,
) -> Result<(), Forward> {
    loop {
        let (n, done) = span
            .scan(&client.rbuf)
            .map_err(|e| Forward::Client(e.into()))?;
        if n > 0 {
            if let Err(e) = backend.write_all(&client.rbuf[..n]).await {
                backend.mark_broken();
                return Err(Forward::Backend(e));
            }
            Stats::add(&fe.stats.bytes_from_clients, n as u64);
            client.rbuf.advance(n);
        }
        if done {
            return Ok(());
        }
        if let Err(e) = client.read_more().await {
            backend.mark_broken();
            return Err(Forward::Client(e));
        }
    }
}

/// The backend's response broke the protocol: its connection can't be trusted again.
pub(super) fn broke_protocol(backend: &mut PooledConn, source: ProtocolError) -> SessionError {
    backend.mark_broken();
    let err = BackendError::Protocol {
        server: backend.server.name.clone(),
        source,
    };
    tracing::warn!(error = %err, "closing session");
    err.into()
}

/// LOAD DATA LOCAL INFILE: the client streams the file in packets ending with an empty
/// one, which go to the server untouched. Returns the sequence id of the server's reply.
async fn relay_local_infile(
    client: &mut ClientConn,
    backend: &mut PooledConn,
    first_seq: u8,
    fe: &Frontend,
) -> Result<u8, SessionError> {
    let mut seq = first_seq;
    loop {
        let mut span = RequestSpan::new(seq);
        match forward_packet(client, backend, &mut span, fe).await {
            Ok(()) => {}
            Err(Forward::Backend(e)) => return Err(e.into()),
            Err(Forward::Client(e)) => return Err(e),
        }
        seq = span.next_seq();
        if span.first_len == 0 {
            return Ok(seq);
        }
    }
}

/// The session was killed while its statement ran: the server closes a killed
/// connection without an error packet, after what it had already sent (which is
/// flushed), and so does Sluice, before the answer of the statement it stopped.
async fn killed_mid_statement(client: &mut ClientConn, backend: &mut PooledConn) -> Relayed {
    backend.mark_broken();
    let _ = client.flush().await;
    tracing::debug!("killed during a statement");
    Relayed::End
}

/// The backend went away mid-statement: tell the client (if at a packet boundary the
/// error is well-formed for it) and end the session.
pub(super) async fn lost_backend(
    client: &mut ClientConn,
    e: BackendError,
    seq: u8,
    survive: bool,
    in_transaction: Option<ErrPacket>,
) -> Result<Relayed, SessionError> {
    tracing::warn!(error = %e, "backend lost during a statement");
    let err = in_transaction.unwrap_or_else(|| e.to_err_packet());
    let _ = client.write_err(seq, &err).await;
    // A multiplexed session outside a transaction lost nothing but this statement: its
    // next one runs on another connection. Otherwise, as with a server that went away,
    // the session ends.
    Ok(if survive { Relayed::Done } else { Relayed::End })
}

/// How a forwarded statement ended, as the relay saw it.
///
/// ```text
/// relay ──response reached the client (or an error for it)──► Done
///       ──server lost before any reply, retry armed──────────► LostBeforeReply ─► sent again elsewhere
///       ──lost a Galera certification conflict, retry armed──► Conflict ─► sent again
///       ──server lost with the session's state on it─────────► End
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Relayed {
    /// The statement is over for the client (answered, or told why not); the session
    /// goes on.
    Done,
    /// Its server was lost before any of the response reached the client, and it was
    /// armed to run again elsewhere: nothing was written, the caller sends it again.
    LostBeforeReply,
    /// Its autocommit statement lost a certification conflict before any of the
    /// response reached the client, and it was armed to run again: nothing was
    /// written, the caller sends it again.
    Conflict,
    /// The session ends: its server went away with state the client can't get back,
    /// or there was no server to send it to.
    End,
}

impl Relayed {
    /// Whether the session goes on after the statement.
    pub(super) fn goes_on(self) -> bool {
        self != Relayed::End
    }
}

/// The payload of `buf` when it is one OK packet, the whole of a response such as a
/// COMMIT's: what the cache reads the session's changes from.
fn sole_ok(buf: &[u8]) -> Option<&[u8]> {
    let (_, payload) = sluice_wire::packet::split_packet(buf)?;
    (payload.first() == Some(&0x00)).then_some(payload)
}
