//! What a statement's trace span and slow-statement line say of it: begun with the
//! statement (its parent read from the text's sqlcommenter comment, its summary from the
//! digest), its stages added by the pipeline on the way, and finished with what the
//! statement did. Nothing here runs for a statement that is neither traced nor timed.

use super::in_flight::InFlight;
use crate::analytics::CacheUse;
use crate::trace::{self, Tracer, Value};
use sluice_wire::command::Command;
use std::time::Instant;

/// Longest `db.query.summary` and span name: the digest's start.
const SUMMARY_MAX: usize = 120;
/// Longest `db.query.text`.
const TEXT_MAX: usize = 4096;

/// Starts the statement's span when it is traced. `text`: a query's or a prepare's
/// text as it arrived (whole or its start), or an execute's prepared text.
/// `digested`: analytics will know the statement's digest text at its end, which then
/// names the span rather than the text lexed again here.
pub(super) fn begin(
    tracer: &Tracer,
    stmt: &mut InFlight,
    command: Command,
    text: Option<&[u8]>,
    digested: bool,
) {
    let found = text.and_then(trace::parent_in);
    let Some(mut span) = tracer.start_statement(found.map(|(p, _)| p)) else {
        return;
    };
    // Only a query's own text is in the packet to write over.
    if tracer.config().propagate && command == Command::Query {
        span.propagate_at = found.and_then(|(_, at)| at);
    }
    if let Some(text) = text {
        if !digested {
            span.set("db.query.summary", Value::Str(summary(text)));
        }
        if tracer.config().query_text {
            let shown = &text[..text.len().min(TEXT_MAX)];
            span.set(
                "db.query.text",
                Value::Str(String::from_utf8_lossy(shown).into_owned()),
            );
        }
    }
    span.set("sluice.command", Value::Static(command.name()));
    stmt.trace = Some(span);
}

/// The digest's start, as a statement's summary and its span's name.
pub(super) fn summary(text: &[u8]) -> String {
    let (digest, _) = crate::classify::sql::digest(&text[..text.len().min(4 * SUMMARY_MAX)]);
    cut(&digest)
}

/// A digest's start, at most `SUMMARY_MAX` characters.
fn cut(digest: &str) -> String {
    match digest.char_indices().nth(SUMMARY_MAX) {
        Some((i, _)) => format!("{}...", &digest[..i]),
        None => digest.to_owned(),
    }
}

/// What the statement did, for its span and its slow-statement line.
pub(super) struct Ended<'a> {
    pub session: u32,
    pub user: &'a str,
    pub schema: Option<&'a str>,
    pub digest: Option<u64>,
    pub error: bool,
    /// The code and SQL state of the error Sluice answered itself, if it did.
    pub answered_error: Option<(u16, [u8; 5])>,
    /// The prepared statement's text, for an execute's summary.
    pub prepared_text: Option<&'a [u8]>,
    /// The digest's text as analytics knows it: the summary of a traced statement whose
    /// span does not have one yet, and of a slow one.
    pub digest_text: Option<String>,
}

/// Finishes the statement's span, and logs it when it took longer than `slow`.
pub(super) fn end(fe: &super::Frontend, stmt: &mut InFlight, e: Ended<'_>) {
    let took = stmt.started.map(|s| s.elapsed());
    let slow = match (fe.slow_statement, took) {
        (Some(limit), Some(took)) => took >= limit,
        _ => false,
    };
    if slow {
        crate::stats::Stats::incr(&fe.stats.slow_statements);
    }
    let Some(mut span) = stmt.trace.take() else {
        if slow {
            log_slow(stmt, &e, None, took.unwrap_or_default());
        }
        return;
    };
    if let Some((start, end)) = span.cache_lookup {
        let outcome = Value::Static(cache_outcome(stmt.cache_use));
        span.stages.push(trace::Stage {
            name: "cache lookup",
            start,
            end,
            attributes: vec![("sluice.cache", outcome)],
            id: None,
            parent: None,
        });
    }
    span.set("db.system.name", Value::Static("mariadb"));
    if let Some(schema) = e.schema {
        span.set("db.namespace", Value::Str(schema.into()));
    }
    if let Some(server) = &stmt.served_by {
        span.set("server.address", Value::Str(server.endpoint.to_string()));
    }
    if let Some(d) = e.digest {
        span.set("sluice.digest", Value::Str(format!("{d:016x}")));
    }
    span.set("sluice.session.id", Value::Int(i64::from(e.session)));
    span.set("db.user", Value::Str(e.user.into()));
    span.set("sluice.cache", Value::Static(cache_outcome(stmt.cache_use)));
    span.set(
        "db.response.returned_rows",
        Value::Int(stmt.outcome.rows as i64),
    );
    if stmt.outcome.affected > 0 {
        span.set(
            "sluice.affected_rows",
            Value::Int(stmt.outcome.affected as i64),
        );
    }
    let mut name = span.attributes.iter().find_map(|(k, v)| match (k, v) {
        (&"db.query.summary", Value::Str(s)) => Some(s.clone()),
        _ => None,
    });
    if name.is_none() {
        let s = match (&e.digest_text, e.prepared_text) {
            (Some(d), _) => Some(cut(d)),
            (None, Some(text)) => Some(summary(text)),
            (None, None) => None,
        };
        if let Some(s) = s {
            span.set("db.query.summary", Value::Str(s.clone()));
            name = Some(s);
        }
    }
    // Sluice's own answer (a pool timeout, a refused statement), when it gave one, is
    // the one the statement ended with.
    let (who, answered) = match (e.answered_error, span.server_error) {
        (Some(own), _) => ("Sluice", Some(own)),
        (None, server) => ("the server", server),
    };
    let answered = answered.map(|(code, state)| {
        (
            code.to_string(),
            String::from_utf8_lossy(&state).into_owned(),
        )
    });
    if let Some((code, state)) = &answered {
        span.set("db.response.status_code", Value::Str(code.clone()));
        span.set("error.type", Value::Str(code.clone()));
        span.set("sluice.sql_state", Value::Str(state.clone()));
    }
    // The message may hold the statement's values: its code and state only.
    let error = e.error.then(|| match &answered {
        Some((code, state)) => format!("{who} answered error {code} ({state})"),
        None => "the statement returned an error".to_owned(),
    });
    if slow {
        log_slow(stmt, &e, Some(&span), took.unwrap_or_default());
    }
    let Some(tracer) = fe.tracer.as_deref() else {
        return;
    };
    tracer.finish(*span, name.unwrap_or_else(|| "statement".into()), error);
}

fn cache_outcome(c: CacheUse) -> &'static str {
    match c {
        CacheUse::Hit => "hit",
        CacheUse::Miss => "miss",
        CacheUse::None => "none",
    }
}

/// One line, with the span's attributes (or the same facts for a statement not traced).
fn log_slow(
    stmt: &InFlight,
    e: &Ended<'_>,
    span: Option<&trace::StatementSpan>,
    took: std::time::Duration,
) {
    let named = span.and_then(|s| {
        s.attributes.iter().find_map(|(k, v)| match (k, v) {
            (&"db.query.summary", Value::Str(s)) => Some(s.clone()),
            _ => None,
        })
    });
    let named = named
        .or_else(|| e.digest_text.as_deref().map(cut))
        .or_else(|| e.prepared_text.map(summary));
    let trace_id = span.map(|s| hex(&s.trace_id));
    tracing::warn!(
        took_ms = took.as_secs_f64() * 1e3,
        user = e.user,
        schema = e.schema.unwrap_or_default(),
        summary = named.as_deref().unwrap_or_default(),
        digest = e.digest.map(|d| format!("{d:016x}")).unwrap_or_default(),
        server = stmt
            .served_by
            .as_ref()
            .map(|s| s.endpoint.to_string())
            .unwrap_or_default(),
        cache = cache_outcome(stmt.cache_use),
        rows = stmt.outcome.rows,
        error = e.error,
        trace_id = trace_id.as_deref().unwrap_or_default(),
        "slow statement"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl InFlight {
    /// Opens a stage holding the stages recorded until [`Self::close_stage`], when the
    /// statement is traced.
    #[inline]
    pub(super) fn open_stage(&mut self) -> Option<trace::Open> {
        self.trace.as_deref_mut().map(trace::StatementSpan::open)
    }

    /// Closes a stage [`Self::open_stage`] opened; `attributes` are only made when the
    /// statement is traced.
    #[inline]
    pub(super) fn close_stage(
        &mut self,
        open: Option<trace::Open>,
        name: &'static str,
        attributes: impl FnOnce() -> Vec<(&'static str, Value)>,
    ) {
        if let (Some(open), Some(span)) = (open, self.trace.as_deref_mut()) {
            span.close(open, name, attributes());
        }
    }
}

/// The server's error packet that ends `chunk` (the bytes of the response read last),
/// noted on the statement's span: its code and SQL state. An ERR packet is the last of
/// its response, and never longer than its fixed part and a 512-byte message; its
/// start is the one place before the end whose header's length reaches the end
/// exactly. Not found when the packet straddles two reads.
pub(super) fn server_error(span: &mut trace::StatementSpan, chunk: &[u8]) {
    if let Some(err) = err_at_end(chunk) {
        span.server_error = Some(err);
    }
}

fn err_at_end(chunk: &[u8]) -> Option<(u16, [u8; 5])> {
    use sluice_wire::packet::{Header, HEADER_LEN};
    let end = chunk.len();
    let from = end.saturating_sub(HEADER_LEN + 9 + 1024);
    let payload = (from..end.saturating_sub(HEADER_LEN + 3)).find_map(|at| {
        let h = Header::parse(&chunk[at..])?;
        let payload = &chunk[at + HEADER_LEN..];
        (h.len == payload.len() && payload.first() == Some(&0xff)).then_some(payload)
    })?;
    let err = sluice_wire::response::ErrPacket::parse(payload).ok()?;
    Some((err.code, err.state))
}

impl super::Session {
    /// A statement lost with its writer was carried over to the new one (`outcome`,
    /// else why not) by `plan`, begun `at`: a `replay` stage on the new writer, with the
    /// statements of its transaction logged for it.
    pub(super) fn replay_stage(
        &mut self,
        at: Option<Instant>,
        plan: &super::mux::replay::OnLoss,
        logged: usize,
        outcome: Result<(), &'static str>,
    ) {
        use super::mux::replay::OnLoss;
        if at.is_none() {
            return;
        }
        let server = self.backing.conn().map(|b| b.server.endpoint.to_string());
        let mut a = vec![
            (
                "sluice.replay.plan",
                Value::Static(match plan {
                    OnLoss::Replay => "transaction",
                    OnLoss::Resend => "statement",
                    OnLoss::IfAbsent { commit: true, .. } => "commit in doubt",
                    OnLoss::IfAbsent { commit: false, .. } => "write in doubt",
                }),
            ),
            ("sluice.replay.statements", Value::Int(logged as i64)),
            (
                "sluice.replay.outcome",
                Value::Static(outcome.err().unwrap_or("carried")),
            ),
        ];
        if let Some(server) = server {
            a.push(("server.address", Value::Str(server)));
        }
        self.stmt.stage("replay", at, a);
    }
}

/// Notes the start of a stage, when the statement is traced.
#[inline]
pub(super) fn mark(stmt: &InFlight) -> Option<Instant> {
    stmt.trace.as_ref().map(|_| Instant::now())
}

/// With `propagate`: the statement about to go to the server names Sluice's round trip
/// as its parent in its `traceparent`, written over the caller's span id in `packet` (a
/// COM_QUERY, header first). The length stays the same; a statement rewritten since its
/// text was read is left as it is.
pub(super) fn propagate(span: &trace::StatementSpan, packet: &mut [u8]) {
    let Some(at) = span.propagate_at else { return };
    let Some(text) = packet.get_mut(sluice_wire::packet::HEADER_LEN + 1..) else {
        return;
    };
    trace::rewrite_parent(text, at, &span.trace_id, &span.server_span_id);
}

/// A traced session: its own span (sent at its end) and its login's (sent once logged
/// in, or refused), sampled at the ratio as a statement without a caller is.
pub(super) struct SessionTrace {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    start: Instant,
    start_unix_nanos: u64,
    client: String,
}

impl SessionTrace {
    /// Boxed: the session's task keeps it for as long as the client is connected.
    pub(super) fn begin(
        tracer: &Tracer,
        client: &crate::stream::Peer,
    ) -> Option<Box<SessionTrace>> {
        Some(Box::new(SessionTrace {
            trace_id: tracer.sample_new()?,
            span_id: trace::new_span_id(),
            start: Instant::now(),
            start_unix_nanos: trace::unix_nanos_now(),
            client: client.to_string(),
        }))
    }

    fn span(&self, name: &str, span_id: [u8; 8], parent: Option<[u8; 8]>) -> trace::Finished {
        let took = self.start.elapsed().as_nanos() as u64;
        trace::Finished {
            name: name.to_owned(),
            trace_id: self.trace_id,
            span_id,
            parent,
            kind: trace::Kind::Server,
            start_unix_nanos: self.start_unix_nanos,
            end_unix_nanos: self.start_unix_nanos.saturating_add(took),
            attributes: Vec::new(),
            error: None,
        }
    }

    /// The login of session `id` ended: as `user`, or refused (`error`).
    pub(super) fn login(
        &self,
        tracer: &Tracer,
        id: u32,
        user: Option<&str>,
        error: Option<String>,
    ) {
        let mut span = self.span("login", trace::new_span_id(), Some(self.span_id));
        span.kind = trace::Kind::Internal;
        span.attributes = self.attributes(id, user);
        span.error = error;
        tracer.record(span);
    }

    /// Session `id` ended (`error`: how, when not by the client's choice).
    pub(super) fn end(self, tracer: &Tracer, id: u32, user: Option<&str>, error: Option<String>) {
        let mut span = self.span("session", self.span_id, None);
        span.attributes = self.attributes(id, user);
        span.error = error;
        tracer.record(span);
    }

    fn attributes(&self, id: u32, user: Option<&str>) -> Vec<(&'static str, Value)> {
        let mut a = vec![
            ("db.system.name", Value::Static("mariadb")),
            ("sluice.session.id", Value::Int(i64::from(id))),
            ("client.address", Value::Str(self.client.clone())),
        ];
        if let Some(user) = user {
            a.push(("db.user", Value::Str(user.to_owned())));
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::err_at_end;
    use sluice_wire::packet::write_packet;
    use sluice_wire::response::ErrPacket;

    /// The error packet ending a chunk is found after rows, whatever its message holds.
    #[test]
    fn the_error_ending_a_response_is_read_from_its_last_bytes() {
        let mut chunk = bytes::BytesMut::new();
        let seq = write_packet(&mut chunk, 1, b"\x01\x02ab");
        let err = ErrPacket::new(1146, "42S02", "Table 'x.\u{ff}\x05\x00\x00' doesn't exist");
        let mut payload = vec![0xff];
        payload.extend_from_slice(&err.code.to_le_bytes());
        payload.push(b'#');
        payload.extend_from_slice(&err.state);
        payload.extend_from_slice(err.message.as_bytes());
        write_packet(&mut chunk, seq, &payload);
        assert_eq!(err_at_end(&chunk), Some((1146, *b"42S02")));
        assert_eq!(err_at_end(&chunk[..chunk.len() - 1]), None, "cut short");
        assert_eq!(err_at_end(b""), None);
    }
}
