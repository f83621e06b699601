//! One statement through the pipeline, in order: noted for analytics, screened, answered
//! from the cache, routed and relayed, then accounted for.

use super::in_flight::InFlight;
use super::relay::Relayed;
use super::{mux, route, Backing, Session, DIGEST_TEXT_MAX};
use crate::error::SessionError;
use crate::router::{Router, Target};
use crate::stats::Stats;
use sluice_wire::command::{Command, Request};
use sluice_wire::packet::{Header, HEADER_LEN, MAX_PAYLOAD};
use sluice_wire::tracker::ResponseKind;
use sluice_wire::StatusFlags;
use std::sync::Arc;

/// How many times an autocommit statement that lost a Galera certification conflict is
/// sent again before the client gets the conflict.
const MAX_CONFLICT_RETRIES: u32 = 3;

/// The command in flight as the client sent it: decoded once, when it arrived
/// ([`Request`]: the command, how its response is read, the client's statement id),
/// so that no stage reads those from the buffer again (where multiplexing may since
/// have put a connection's own statement id), and its payload's length as the packet
/// now stands in the buffer (a screen may rewrite the text, and multiplexing add to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Statement {
    pub(super) command: Command,
    pub(super) kind: ResponseKind,
    /// The statement a `COM_STMT_*` command names, by the client's id.
    pub(super) client_id: Option<u32>,
    pub(super) len: usize,
}

impl Statement {
    pub(super) fn new(request: Request, len: usize) -> Statement {
        Statement {
            command: request.command,
            kind: request.kind,
            client_id: request.stmt_id,
            len,
        }
    }

    /// The same statement, its packet now `len` bytes long.
    pub(super) fn with_len(self, len: usize) -> Statement {
        Statement { len, ..self }
    }

    /// The length in the packet header at the front of `buf`, when the packet was
    /// rewritten there (else this one's).
    pub(super) fn as_in(self, buf: &[u8]) -> Statement {
        self.with_len(Header::parse(buf).map_or(self.len, |h| h.len))
    }
}

impl Session {
    /// A statement of a multiplexed session, through the pipeline: classified, answered
    /// from the cache, or routed to a connection brought in line with the session.
    pub(super) async fn statement_multiplexed(
        &mut self,
        stmt: Statement,
    ) -> Result<bool, SessionError> {
        self.begin_statement(&stmt).await?;
        let stmt = stmt.with_len(self.screen_identity(&stmt).await?);
        let at = super::traced::mark(&self.stmt);
        let answered = self.answer_from_cache(&stmt).await?;
        self.stmt.cache_stage(at);
        let going_on = match answered {
            Some(answered) => answered.goes_on(),
            None => self.forward_multiplexed(stmt).await?,
        };
        self.end_statement();
        Ok(going_on)
    }

    /// A statement of a session with a connection of its own: answered from the cache,
    /// or relayed on that connection.
    pub(super) async fn statement_dedicated(
        &mut self,
        stmt: Statement,
    ) -> Result<bool, SessionError> {
        let set_option = stmt.command == Command::SetOption;
        let closing = stmt
            .client_id
            .filter(|_| stmt.command == Command::StmtClose);
        self.begin_statement(&stmt).await?;
        if self.dedicated_refusal(stmt.command).await? {
            self.end_statement();
            return Ok(true);
        }
        let stmt = stmt.with_len(self.screen_identity(&stmt).await?);
        let schema = self.schema_it_sets(&stmt);
        let at = super::traced::mark(&self.stmt);
        let answered = self.answer_from_cache(&stmt).await?;
        self.stmt.cache_stage(at);
        let relayed = match answered {
            Some(answered) => answered,
            None if self.cache.is_some() => self.forward_cached(&stmt).await?,
            None => self.relay(stmt.kind).await?,
        };
        let failed = self.stmt.outcome.error || self.client.answered_error.is_some();
        if let Some((schema, b)) = schema.filter(|_| !failed).zip(self.backing.conn_mut()) {
            b.schema = Some(schema);
        }
        let reset =
            stmt.command == Command::ResetConnection && self.client.answered_error.is_none();
        self.dedicated_closed(closing, reset);
        self.end_statement();
        if !relayed.goes_on() {
            return Ok(false);
        }
        if set_option {
            // COM_RESET_CONNECTION does not restore the multi-statement option, so this
            // connection no longer matches its pool key.
            if let Some(b) = self.backing.conn_mut() {
                b.mark_broken();
            }
        }
        Ok(true)
    }

    /// The default schema the statement at the front of the client buffer makes, if it
    /// is `COM_INIT_DB` or a text `USE`: on a connection of its own, the server's session
    /// tracking may not reach Sluice (the client may not have asked for it), and analytics
    /// and traces name the schema a statement ran in.
    fn schema_it_sets(&self, stmt: &Statement) -> Option<Vec<u8>> {
        let body = self
            .client
            .rbuf
            .get(HEADER_LEN + 1..HEADER_LEN + stmt.len)?;
        match stmt.command {
            Command::InitDb => Some(body.to_vec()),
            Command::Query => crate::classify::sql::use_target(body),
            _ => None,
        }
    }

    /// Notes what analytics needs of the command at the front of the client buffer
    /// (reading the rest of a statement's text in first, when it is not too long).
    pub(super) async fn begin_statement(&mut self, stmt: &Statement) -> Result<(), SessionError> {
        let len = stmt.len;
        self.stmt.start(InFlight {
            request_len: (HEADER_LEN + len) as u64,
            sent_before: self.client.sent,
            ..InFlight::default()
        });
        self.text.forget();
        self.client.answered_error = None;
        self.stmt.prior_rows =
            (self.backing.mux_mut()).and_then(|m| m.take_wrapped_rows(stmt.command));
        if self.fe.slow_statement.is_some() {
            self.stmt.started = Some(std::time::Instant::now());
        }
        let tracer = self.fe.tracer.as_deref();
        if self.probe.is_none() && tracer.is_none() {
            return Ok(());
        }
        self.stmt.in_transaction = self.last_status().in_transaction();
        let texted = matches!(stmt.command, Command::Query | Command::StmtPrepare);
        if texted && len < MAX_PAYLOAD && len <= DIGEST_TEXT_MAX {
            self.client.fill_to(HEADER_LEN + len).await?;
        }
        let end = (HEADER_LEN + len).min(self.client.rbuf.len());
        let body = &self.client.rbuf[HEADER_LEN + 1..end];
        // The id is only there when the packet holds it whole (`Request::parse`): a
        // truncated one is the server's to refuse.
        let id = stmt.client_id;
        if let Some(tracer) = tracer {
            // An execute continues the trace its prepared text names, as sqlcommenter
            // puts it there.
            let text = match (texted, id, &self.probe) {
                (true, _, _) => Some(body),
                (false, Some(id), Some(p)) if stmt.command == Command::StmtExecute => {
                    p.prepared_text(id)
                }
                _ => None,
            };
            let digested = self.probe.is_some()
                && matches!(stmt.command, Command::Query | Command::StmtExecute);
            super::traced::begin(tracer, &mut self.stmt, stmt.command, text, digested);
        }
        let Some(probe) = self.probe.as_mut() else {
            return Ok(());
        };
        match stmt.command {
            Command::Query => {
                // Kept for the cache's statistics, which look the digest up by it too.
                let shape = self.text.shape(body);
                probe.query(body, shape, self.stmt.request_len)
            }
            Command::StmtPrepare => probe.prepare(body),
            Command::StmtExecute => {
                if let Some(id) = id {
                    probe.execute(id, &body[4..], self.stmt.request_len);
                }
            }
            Command::StmtClose => {
                if let Some(id) = id {
                    probe.closed(id);
                }
            }
            Command::ResetConnection => probe.forget_prepared(),
            _ => {}
        }
        Ok(())
    }

    /// The command ended (however it went): counts what went to the client and reports
    /// the statement to analytics.
    pub(super) fn end_statement(&mut self) {
        if std::mem::take(&mut self.stmt.may_set_global) {
            if let Some(server) = &self.stmt.served_by {
                server.globals.changed();
            }
        }
        let bytes_out = self.client.sent - self.stmt.sent_before;
        Stats::add(&self.fe.stats.bytes_to_clients, bytes_out);
        if self.stmt.trace.is_some() || self.stmt.started.is_some() {
            self.end_traced();
        }
        let Some(probe) = self.probe.as_mut() else {
            return;
        };
        probe.preparing = None;
        if probe.current.is_none() {
            return;
        }
        let mut outcome = self.stmt.outcome;
        outcome.error |= self.client.answered_error.is_some();
        let schema = match &self.backing {
            Backing::Multiplexed { mux, .. } => mux.schema.as_deref(),
            Backing::Dedicated(b) => b.schema.as_deref(),
            Backing::Detached => None,
        };
        let schema = schema.and_then(|s| std::str::from_utf8(s).ok());
        probe.finish(
            &self.fe.analytics,
            schema,
            outcome,
            self.stmt.served_by.as_ref().map(|s| s.name.as_str()),
            self.stmt.cache_use,
            self.stmt.in_transaction,
            self.stmt.scattered,
            bytes_out,
        );
    }

    /// The statement's span finished and its slow-statement line written, before
    /// analytics takes its digest.
    fn end_traced(&mut self) {
        let schema = match &self.backing {
            Backing::Multiplexed { mux, .. } => mux.schema.as_deref(),
            Backing::Dedicated(b) => b.schema.as_deref(),
            Backing::Detached => None,
        };
        let current = self.probe.as_ref().and_then(|p| p.current.as_ref());
        let slow = match (self.fe.slow_statement, self.stmt.started) {
            (Some(limit), Some(at)) => at.elapsed() >= limit,
            _ => false,
        };
        let wanted = slow || self.stmt.trace.is_some();
        let digest_text = match (wanted, &self.probe) {
            (true, Some(p)) => p.digest_text(&self.fe.analytics),
            _ => None,
        };
        let ended = super::traced::Ended {
            digest_text,
            session: self.id,
            user: &self.user.name,
            schema: schema.and_then(|s| std::str::from_utf8(s).ok()),
            digest: current.map(|c| c.digest),
            error: self.stmt.outcome.error || self.client.answered_error.is_some(),
            answered_error: self.client.answered_error,
            prepared_text: current
                .and_then(|c| c.prepared.as_deref())
                .map(|p| &p.text[..]),
        };
        super::traced::end(&self.fe, &mut self.stmt, ended);
    }

    /// A command of a multiplexed session: on a connection brought in line with the
    /// session, then the connection goes back unless something keeps it.
    pub(super) async fn forward_multiplexed(
        &mut self,
        stmt: Statement,
    ) -> Result<bool, SessionError> {
        // Decided at start: one cluster has no place stage and no transaction of its
        // own to begin late.
        // Placing and scattering are boxed: they are this future's largest states, which
        // every statement's future would otherwise carry (and copy when the command is
        // boxed), sharded or not.
        let sharded = self.fe.shards.clone();
        let router = match sharded.clone() {
            None => self.fe.router.load_full(),
            Some(shards) => match Box::pin(self.place(&stmt, shards)).await? {
                mux::Placed::On(router) => router,
                mux::Placed::Done(going_on) => return Ok(going_on),
                mux::Placed::Scatter(shards, targets, merge) => {
                    self.stmt.scattered = true;
                    return Box::pin(self.scatter(&stmt, &shards, &targets, merge)).await;
                }
            },
        };
        let retries = self.retries(&router, &stmt);
        let copy = match retries.reads || retries.conflicts {
            true => self.whole_request().await?,
            false => None,
        };
        let mut attempt = self.first_attempt(&router, copy);
        let fx = loop {
            let lease = self.stmt.open_stage();
            let ready = self.mux_prepare(&stmt, &router).await?;
            self.stmt.close_stage(lease, "lease", Vec::new);
            let fx = match ready {
                mux::Ready::Go(fx) => fx,
                mux::Ready::Done(going_on) => return Ok(going_on),
            };
            let deferred = match sharded {
                Some(_) => self.begin_deferred().await,
                None => Ok(()),
            };
            if let Err(failed) = deferred {
                let err = failed.answered()?;
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, &err).await?;
                self.release_if_free().await?;
                return Ok(true);
            }
            // The statement in flight follows its replayed transaction at once, unless it
            // commits: other writer statements let pending replays go first.
            let mut carried = false;
            if let Some(pending) = attempt.pending.take() {
                carried = !matches!(pending.plan, mux::replay::OnLoss::IfAbsent { .. });
                if !self.replay_on_new_writer(&router, pending).await? {
                    return Ok(true);
                }
            }
            let retries = retries.routed(self.stmt.target.as_ref());
            let (relayed, logged) = self
                .relay_attempt(&router, &stmt, retries, &mut attempt, carried)
                .await?;
            match relayed {
                Relayed::LostBeforeReply => {
                    self.again_after_loss(&router, &mut attempt);
                    continue;
                }
                Relayed::Conflict => {
                    // Another node committed a conflicting write first; this one left
                    // nothing behind, and runs again now that the winner is applied here.
                    attempt.conflicts += 1;
                    Stats::incr(&self.fe.stats.certification_retries);
                    self.client.put_back(attempt.copy());
                    tracing::debug!(
                        conflicts = attempt.conflicts,
                        "autocommit statement retried after a certification conflict"
                    );
                    continue;
                }
                r if !r.goes_on() => return Ok(false),
                _ => {}
            }
            if retries.replays {
                let answer = self.stmt.replay_record.take();
                let limit = router.failover.replay_max_bytes as usize;
                self.log_for_replay(&stmt, logged.as_deref(), answer, limit);
            }
            break fx;
        };
        if stmt.command == Command::SetOption {
            // The multi-statement option is part of the pool key, and a reset does not
            // restore it: the session keeps this connection, which serves no one after.
            if let Some(b) = self.backing.conn_mut() {
                b.retire();
            }
            self.mux_pin_option();
        }
        self.mux_finish(&fx, &stmt).await?;
        Ok(true)
    }

    /// What may send the statement again, decided once before it runs.
    #[inline]
    fn retries(&self, router: &Router, stmt: &Statement) -> Retries {
        let session = SessionFacts {
            autocommits: self.backing.muxed().autocommits(),
            cached: self.cache.is_some(),
            sharded: self.fe.shards.is_some(),
        };
        Retries::decide(router, stmt.command, session)
    }

    /// Before the first try: `copy`, the client's bytes as they came when they may be
    /// sent again (ids are rewritten on the way), and the replay of a transaction whose
    /// server went away while the session was idle.
    fn first_attempt(&mut self, router: &Router, copy: Option<Vec<u8>>) -> Attempt {
        let mut attempt = Attempt {
            copy,
            ..Attempt::default()
        };
        if let Some(lost) = self.backing.muxed_mut().replay.lost_on.take() {
            attempt.pending = Some(mux::replay::Pending {
                plan: mux::replay::OnLoss::Replay,
                err: route::rolled_back(),
                ticket: Some(router.replay_gate.enter()),
                held: None,
            });
            self.stmt.avoid = Some(lost);
        }
        attempt
    }

    /// Before the statement goes out: what losing its server will mean. A plain read
    /// outside a transaction may run again elsewhere (`retry`: a copy of it is kept and
    /// attempts remain). State beyond a transaction (locks, temporary tables...) dies
    /// with its server, so the session must end as it would directly; a transaction
    /// alone ends with an error the client can act on.
    fn arm_for_loss(&mut self, stmt: &Statement, retry: bool) {
        let in_trx = self.backing.held_in_transaction();
        self.stmt.retry_armed =
            retry && !in_trx && matches!(self.stmt.target, Some(Target::Reader { .. }));
        let mux = self.backing.muxed();
        self.stmt.survive_loss = mux.pin_reason(sluice_wire::StatusFlags(0)).is_none();
        self.stmt.loss_error = None;
        if in_trx && self.stmt.survive_loss {
            let text = match stmt.command {
                Command::Query => self
                    .client
                    .rbuf
                    .get(HEADER_LEN + 1..)
                    .map(|t| &t[..t.len().min(64)]),
                Command::StmtExecute => stmt
                    .client_id
                    .and_then(|id| mux.stmt_route(id))
                    .map(|(t, _)| t),
                _ => None,
            };
            self.stmt.loss_error = text.and_then(route::transaction_lost);
        }
    }

    /// One try on the connection in hand: armed for what losing its server would lead
    /// to, relayed (through the cache when there is one), under the rule's time limit.
    /// Returns how it went, and the bytes kept for the replay log.
    async fn relay_attempt(
        &mut self,
        router: &Arc<Router>,
        stmt: &Statement,
        retries: Retries,
        attempt: &mut Attempt,
        carried: bool,
    ) -> Result<(Relayed, Option<Vec<u8>>), SessionError> {
        let logged = match retries.replays {
            true => self.start_replay_entry(stmt).await?,
            false => None,
        };
        let timer = match (self.stmt.timeout.take(), self.backing.conn(), &self.member) {
            (Some(after), Some(b), Some(m)) => Some(route::statement_timeout(
                router,
                m.clone(),
                self.key(&self.user),
                b.thread_id,
                after,
            )),
            _ => None,
        };
        let again = attempt.lost < 2;
        self.arm_for_loss(stmt, retries.reads && attempt.copy.is_some() && again);
        attempt.on_loss = match retries.replays {
            true => {
                let copy = &mut attempt.copy;
                (self.arm_replay(router, stmt, &logged, copy, again, carried)).await?
            }
            false => None,
        };
        // Only while its connection is outside a transaction too.
        self.stmt.conflict_retry = retries.conflicts
            && attempt.copy.is_some()
            && attempt.conflicts < MAX_CONFLICT_RETRIES
            && self
                .backing
                .conn()
                .is_some_and(|b| !b.status.in_transaction());
        // Boxed: through the cache is this future's largest state, which every
        // statement's future would carry (and copy) with a cache or without.
        let relayed = if self.cache.is_some() {
            Box::pin(self.forward_cached(&stmt.as_in(&self.client.rbuf))).await?
        } else {
            self.relay(stmt.kind).await?
        };
        if let Some(t) = timer {
            t.abort();
        }
        if let Some(b) = self.backing.conn_mut() {
            if b.is_broken() && relayed.goes_on() {
                if retries.replays
                    && relayed != Relayed::LostBeforeReply
                    && b.status.in_transaction()
                {
                    self.unreplayable_lost(router);
                }
                // The transaction died with its server: the session is outside one.
                let b = self.backing.conn_mut().expect("checked above");
                b.status = StatusFlags(b.status.0 & !StatusFlags::IN_TRANS);
            }
        }
        Ok((relayed, logged))
    }

    /// The server was lost before any reply reached the client: the same bytes go to
    /// another server (a read), or after the transaction's replay (a writer statement).
    fn again_after_loss(&mut self, router: &Router, attempt: &mut Attempt) {
        attempt.lost += 1;
        if let Some(plan) = attempt.on_loss.take() {
            attempt.pending = Some(self.pending_replay(router, plan));
        } else {
            Stats::incr(&router.stats.retried_reads);
            tracing::info!("read retried on another server after its server was lost");
        }
        self.backing.close_conn();
        self.stmt.avoid = self.member.take();
        self.publish();
        self.client.put_back(attempt.copy());
    }
}

/// What may send a statement again, decided before it runs (as Pingora's `RetryType`).
#[derive(Clone, Copy, Debug)]
struct Retries {
    /// A plain read whose server is lost before any reply runs elsewhere.
    reads: bool,
    /// An autocommit statement that loses a Galera certification conflict runs again.
    conflicts: bool,
    /// A statement on the writer is logged for transaction replay, or sent again on a
    /// new writer (`mux/replay.rs`).
    replays: bool,
}

impl Retries {
    /// What may send a `command` of a session so placed again on `router`.
    #[inline]
    fn decide(router: &Router, command: Command, session: SessionFacts) -> Retries {
        Retries {
            // A cached read may be being recorded: it is never sent twice.
            reads: router.splits() && !session.cached,
            conflicts: router.multi_writer()
                && matches!(command, Command::Query | Command::StmtExecute)
                && session.autocommits,
            // Only where the writer can move (a failover, a switchover): one server
            // alone has nothing to replay on.
            replays: router.failover.transaction_replay
                && router.members.len() > 1
                && !router.multi_writer()
                && !session.sharded,
        }
    }

    /// Once the statement is routed: transaction replay follows the writer, and a
    /// statement another server answers has nothing to log, arm or replay (a session in
    /// a transaction is held on the writer).
    fn routed(self, target: Option<&Target>) -> Retries {
        Retries {
            replays: self.replays && target == Some(&Target::Writer),
            ..self
        }
    }
}

/// What of the session decides how a statement may be sent again.
#[derive(Clone, Copy, Debug)]
struct SessionFacts {
    /// Outside a transaction, with autocommit on.
    autocommits: bool,
    /// The query cache is on.
    cached: bool,
    /// `[[shards]]` are configured.
    sharded: bool,
}

/// The tries of one statement.
#[derive(Default)]
struct Attempt {
    /// The client's bytes as they came, to send again.
    copy: Option<Vec<u8>>,
    /// Tries whose server was lost before any reply.
    lost: u32,
    /// Tries that lost a certification conflict.
    conflicts: u32,
    /// What losing the writer during this try leads to.
    on_loss: Option<mux::replay::OnLoss>,
    /// A replay to run before the next try.
    pending: Option<mux::replay::Pending>,
}

impl Attempt {
    /// The copy a retry sends: there is one whenever a retry was armed.
    fn copy(&self) -> &[u8] {
        self.copy.as_deref().expect("armed only with a copy")
    }
}

#[cfg(test)]
mod tests {
    //! A server pool spawns its reaper: the routers are built on a runtime.
    use super::*;
    use crate::router::config::{GaleraWriters, RoutingConfig};
    use crate::router::tests::{cluster, member, router, synced_nodes};

    const PLAIN: SessionFacts = SessionFacts {
        autocommits: true,
        cached: false,
        sharded: false,
    };

    #[tokio::test]
    async fn a_replica_set_retries_reads_and_replays_writer_statements() {
        let (_, _, _, set) = cluster(RoutingConfig::default());
        let r = Retries::decide(&set, Command::Query, PLAIN);
        assert!(r.reads && r.replays && !r.conflicts, "{r:?}");
        // A read the cache may be recording is never sent twice.
        let cached = SessionFacts {
            cached: true,
            ..PLAIN
        };
        assert!(!Retries::decide(&set, Command::Query, cached).reads);
        // Over shards, a transaction is not replayed.
        let sharded = SessionFacts {
            sharded: true,
            ..PLAIN
        };
        assert!(!Retries::decide(&set, Command::StmtExecute, sharded).replays);
        // Routed to a replica, the read is still sent again elsewhere if its server is
        // lost, but has no part in a transaction's replay.
        let on_replica = r.routed(Some(&Target::Reader { need: None }));
        assert!(on_replica.reads && !on_replica.replays, "{on_replica:?}");
        assert!(r.routed(Some(&Target::Writer)).replays);
        assert!(!r.routed(None).replays);
    }

    #[tokio::test]
    async fn one_server_has_nowhere_else_to_send_a_statement() {
        let alone = router(vec![member("only", |_| {})], RoutingConfig::default());
        let r = Retries::decide(&alone, Command::Query, PLAIN);
        assert!(!r.reads && !r.replays && !r.conflicts, "{r:?}");
    }

    #[tokio::test]
    async fn writes_spread_over_galera_retry_conflicts_of_autocommit_statements_only() {
        let routing = RoutingConfig {
            galera_writers: GaleraWriters::All,
            ..RoutingConfig::default()
        };
        let cluster = router(synced_nodes(&["n1", "n2", "n3"]), routing);
        for command in [Command::Query, Command::StmtExecute] {
            let r = Retries::decide(&cluster, command, PLAIN);
            assert!(r.conflicts && !r.replays, "{command:?}: {r:?}");
        }
        assert!(!Retries::decide(&cluster, Command::StmtPrepare, PLAIN).conflicts);
        let in_transaction = SessionFacts {
            autocommits: false,
            ..PLAIN
        };
        assert!(!Retries::decide(&cluster, Command::Query, in_transaction).conflicts);
        // One node at a time takes the writes: nothing to conflict with.
        let one = router(synced_nodes(&["n1", "n2"]), RoutingConfig::default());
        assert!(!Retries::decide(&one, Command::Query, PLAIN).conflicts);
    }
}
