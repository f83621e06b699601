//! Relaying a command and its response between the client and the session's backend
//! connection: the streaming path every forwarded statement takes, with the few packets
//! Sluice reads or rewrites on the way (OK packets under multiplexing, process-list
//! rows), LOCAL INFILE, and the loss of the server mid-statement.

use super::*;
use sluice_wire::statement::PrepareOk;

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
        mut record: Option<&mut cached::Recording>,
    ) -> Result<Relayed, SessionError> {
        self.mark_origin(kind).await?;
        if self.stmt.wrap_commit {
            return self.relay_wrapped().await;
        }
        let spreads_writes =
            matches!(self.stmt.target, Some(Target::Writer)) && self.spreads_writes();
        let Some(backend) = self.backend.as_mut() else {
            return Ok(Relayed::End);
        };
        let client = &mut self.client;
        let mut cache = self.cache.as_mut();
        // Latency is what readers are balanced by: measured for statements routed to them.
        // So are writes spread over a Galera cluster's nodes.
        let balanced = match &self.stmt.target {
            Some(Target::Reader { .. } | Target::Group(_) | Target::Node(_)) => true,
            Some(Target::Writer) => spreads_writes,
            None => false,
        };
        let mut ttfb_of = self.member.clone().filter(|_| balanced);
        let retry_armed = self.stmt.retry_armed;
        let conflict_retry = self.stmt.conflict_retry;

        // The command itself: forwarded as it arrives, however large.
        let mut span = RequestSpan::new(0);
        match forward_packet(client, backend, &mut span, &self.fe).await {
            Ok(()) => {}
            Err(Forward::Backend(e)) if retry_armed => {
                tracing::debug!(error = %e, "server lost before the statement was sent");
                return Ok(Relayed::LostBeforeReply);
            }
            Err(Forward::Backend(e)) => {
                let err = self.stmt.loss_error.take();
                return lost_backend(client, e, span.next_seq(), self.stmt.survive_loss, err).await;
            }
            Err(Forward::Client(e)) => {
                Stats::incr(&self.fe.stats.client_aborts);
                return Err(e);
            }
        }
        if kind == ResponseKind::None {
            return Ok(Relayed::Done);
        }

        let mut scanner = Scanner::new(ResponseTracker::new(kind, backend.caps), span.next_seq());
        let mut mux = self.backing.mux_mut();
        if mux.is_some() {
            scanner.intercept_ok(true);
        }
        let mut processlist = self.stmt.processlist.as_mut();
        scanner.intercept_rows(processlist.is_some());
        let (fe, id) = (&self.fe, self.id);
        let mut first = true;
        // The response's last OK was intercepted and told to the cache.
        let mut ended_with_ok = false;
        let mut received = 0u64;
        let sent_at = Instant::now();
        loop {
            let (n, event) = match scanner.scan(&backend.rbuf) {
                Ok(r) => r,
                Err(e) => return Err(broke_protocol(backend, e)),
            };
            let cache_now = cache.as_deref_mut().filter(|_| !ended_with_ok);
            if let (Some(Event::Done(status)), Some(c)) = (event, cache_now) {
                // Before the client can see its statement end: once it has, anything it
                // tells others ("committed") must already hold for the cache. (An OK the
                // multiplexer intercepted was already told, with its session state.)
                // Read only when there is a change to judge.
                let changed =
                    status.is_some_and(|s| s.contains(StatusFlags::SESSION_STATE_CHANGED));
                let tracked = backend.caps.contains(CapabilityFlags::SESSION_TRACK);
                let ok = (changed && tracked)
                    .then(|| sole_ok(&backend.rbuf[..n]))
                    .flatten();
                c.response_ending(status, backend.status, ok);
            }
            if first
                && conflict_retry
                && matches!(event, Some(Event::Done(_)))
                && certification_conflict(&backend.rbuf[..n])
            {
                // Nothing reached the client and nothing committed: the caller sends
                // the statement again.
                if let Some(r) = record.as_deref_mut() {
                    r.abandon();
                }
                backend.advance(n);
                return Ok(Relayed::Conflict);
            }
            // An intercepted OK packet (multiplexing) is read for the session's state,
            // rewritten if the client needs it, and written with the bytes before it.
            let mut ok_len = 0;
            let mut translated = None;
            if let Some(Event::Ok { len }) = event {
                let m = mux
                    .as_deref_mut()
                    .expect("OK packets are intercepted when multiplexing");
                let status = match m.observe_ok(&backend.rbuf[n..n + len]) {
                    Ok((t, status)) => {
                        translated = t;
                        status
                    }
                    Err(e) => return Err(broke_protocol(backend, e)),
                };
                if !status.more_results() {
                    if let Some(c) = cache.as_deref_mut() {
                        // The response's last packet: as for Done, before the client can
                        // see it.
                        let ok = &backend.rbuf[n + HEADER_LEN..n + len];
                        c.response_ending(Some(status), backend.status, Some(ok));
                        ended_with_ok = true;
                    }
                }
                ok_len = len;
            }
            if let Some(Event::Column { len } | Event::Row { len }) = event {
                let packet = &backend.rbuf[n..n + len];
                if let Some(p) = processlist.as_deref_mut() {
                    if matches!(event, Some(Event::Column { .. })) {
                        p.column(packet, backend.extended_metadata());
                    } else {
                        let own = (backend.thread_id, id);
                        translated = p.row(packet, || fe.sessions_on(&backend.server, own));
                    }
                }
                ok_len = len;
            }
            if n + ok_len > 0 && self.live.killed() {
                return Ok(killed_mid_statement(client, backend).await);
            }
            if n + ok_len > 0 {
                if std::mem::take(&mut first) {
                    if let Some(m) = mux.as_deref_mut() {
                        m.patch_prepare_ok(&mut backend.rbuf[..n]);
                    } else if kind == ResponseKind::Prepare {
                        prepared::note_dedicated_prepare(backend, n);
                    }
                    if let (ResponseKind::Prepare, Some(p)) = (kind, self.probe.as_mut()) {
                        // The id the client was given (after any rewrite): its executes
                        // are attributed to the prepared text's digest.
                        let ok = backend.rbuf[..n]
                            .get(HEADER_LEN..)
                            .and_then(PrepareOk::parse);
                        if let Some(ok) = ok {
                            p.prepared(ok.stmt_id);
                        }
                    }
                }
                let (before, ok) = backend.rbuf[..n + ok_len].split_at(n);
                let ok = translated.as_deref().unwrap_or(ok);
                if let Some(r) = record.as_deref_mut() {
                    r.push(before);
                    r.push(ok);
                }
                if let Some(r) = self.stmt.replay_record.as_mut() {
                    r.push(before);
                    r.push(ok);
                }
                let written = if translated.is_some() {
                    client.stream_write_two(before, ok).await
                } else {
                    client.stream_write(&backend.rbuf[..n + ok_len]).await
                };
                if let Err(e) = written {
                    backend.mark_broken();
                    Stats::incr(&self.fe.stats.client_aborts);
                    return Err(e.into());
                }
                Stats::add(&self.fe.stats.bytes_from_backends, (n + ok_len) as u64);
                received += (n + ok_len) as u64;
                backend.advance(n + ok_len);
            }
            match event {
                Some(Event::Ok { .. } | Event::Column { .. } | Event::Row { .. }) => {}
                Some(Event::Done(status)) => {
                    if let Some(m) = mux.as_deref_mut() {
                        m.observed.status = status;
                    }
                    self.stmt.outcome = scanner.outcome();
                    Stats::add(&self.fe.stats.bytes_to_backends, self.stmt.request_len);
                    backend.server.counters.relayed(
                        self.stmt.request_len,
                        received,
                        sent_at.elapsed(),
                        self.stmt.outcome.error,
                    );
                    self.stmt.served_by = Some(backend.server.clone());
                    client.flush().await?;
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
                    return Ok(Relayed::Done);
                }
                Some(Event::LocalInfile) => {
                    if let Some(r) = record.as_deref_mut() {
                        r.abandon();
                    }
                    if let Some(r) = self.stmt.replay_record.as_mut() {
                        r.abandon();
                    }
                    client.flush().await?;
                    let next =
                        relay_local_infile(client, backend, scanner.next_seq(), &self.fe).await?;
                    scanner.resume(next);
                }
                None => {
                    // What was written must reach the client before we wait (TLS buffers).
                    client.flush().await?;
                    if let Err(e) = backend.read_more().await {
                        if self.live.killed() {
                            return Ok(killed_mid_statement(client, backend).await);
                        }
                        backend.mark_broken();
                        Stats::incr(&self.fe.stats.backend_errors);
                        if retry_armed && first {
                            tracing::debug!(error = %e, "server lost before any reply");
                            if let Some(r) = record.as_deref_mut() {
                                r.abandon();
                            }
                            return Ok(Relayed::LostBeforeReply);
                        }
                        // Mid-result, the client's framing can't be trusted to go on.
                        let survive = self.stmt.survive_loss && first;
                        let err = self.stmt.loss_error.take();
                        return lost_backend(client, e, scanner.next_seq(), survive, err).await;
                    }
                    if let Some(m) = ttfb_of.take() {
                        m.observe_ttfb(sent_at.elapsed());
                    }
                }
            }
        }
    }
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
