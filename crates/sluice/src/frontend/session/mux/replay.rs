//! Transaction replay: while a multiplexed session's transaction runs on the writer,
//! what it needs to run it again (each statement as the client sent it, and a digest of
//! the answer the client saw). When the writer is lost before a statement's reply, the
//! transaction runs again on the new writer, and goes on only if every answer there
//! matches what the client already saw; otherwise the client gets the error it got
//! before replay existed.
//!
//! Text statements and executes of prepared statements (prepared again on the new
//! writer) are logged; a transaction with anything that changes the session, a cursor,
//! or more than `failover.replay_max_bytes` of statements is not replayed. A statement that may
//! have committed (a COMMIT, an autocommit write) is sent again only when the new
//! writer surely lacks it (`router/commits.rs`); a ROLLBACK, or a statement that can't
//! have committed anything, is simply sent again.

use super::super::cached::{fetch, Recording};
use super::super::{Session, Statement};
use crate::error::{Failed, SessionError};
use crate::router::commits::{InDoubt, Outcome};
use crate::router::{Router, Target};
use crate::stats::Stats;
use sluice_wire::command::Command;
use sluice_wire::digest::response_digest;
use sluice_wire::flags::StatusFlags;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::response::{ErrPacket, OkPacket};
use sluice_wire::statement::{set_stmt_id, Execute};
use sluice_wire::tracker::ResponseKind;

/// Most bytes of one answer recorded to digest; a larger one makes its transaction not
/// replayable.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// One statement of the transaction and the digest of the answer the client saw.
struct Logged {
    request: Vec<u8>,
    digest: u64,
    /// An execute: the client's statement id, and the parameter types it ran with when
    /// its packet does not carry them (they were bound by an earlier execute).
    execute: Option<(u32, Option<Vec<u8>>)>,
}

/// The transaction open on the writer, as far as it can be run again.
#[derive(Default)]
pub(in crate::frontend::session) struct ReplayLog {
    entries: Vec<Logged>,
    bytes: usize,
    /// Why this transaction can't be replayed, once something made it so.
    refused: Option<&'static str>,
    /// The server the transaction's connection was lost on while the session was idle
    /// (or given back to let a switchover go on): its next statement replays it on
    /// another writer first.
    pub lost_on: Option<std::sync::Arc<crate::router::Member>>,
    /// Follows the switchovers begun on the session's router, once it had a transaction
    /// to move.
    switching: Option<tokio::sync::watch::Receiver<u64>>,
}

/// What losing the writer before the reply to the statement in flight leads to.
pub(in crate::frontend::session) enum OnLoss {
    /// Its transaction runs again on the new writer, then it is sent there.
    Replay,
    /// Nothing it did can have stayed (a ROLLBACK, or what opens a transaction): it is
    /// sent again on the new writer.
    Resend,
    /// It may have committed (a COMMIT, an autocommit write): it is sent again, after
    /// its transaction for a COMMIT, only when the new writer surely lacks it; a COMMIT
    /// the new writer has is answered as committed.
    IfAbsent { lost: InDoubt, commit: bool },
}

/// A loss to carry over to the new writer, and what the client gets if it can't be.
pub(in crate::frontend::session) struct Pending {
    pub plan: OnLoss,
    pub err: ErrPacket,
    /// Holds other writer statements back until it is carried over, from when the
    /// session's statement waits for the new writer (an idle transaction, which may not
    /// come back for long, holds nothing).
    pub ticket: Option<crate::router::commits::Ticket>,
    /// A wrapped autocommit write's own OK payload, as the client is to get it, when
    /// only its COMMIT's reply was lost (`mux/wrap.rs`): the answer if the new writer
    /// has the commit.
    pub held: Option<Vec<u8>>,
}

/// Longest a writer statement waits for the replays pending after a failover: past it,
/// a replay blocked on a row lock that a waiting statement's transaction holds goes on
/// once that transaction does.
const REPLAY_GATE: std::time::Duration = std::time::Duration::from_millis(500);

impl ReplayLog {
    /// Whether a transaction is logged and can be run again.
    pub fn usable(&self) -> bool {
        !self.entries.is_empty() && self.refused.is_none()
    }

    /// The transaction ended (or none is open).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
        self.refused = None;
        self.lost_on = None;
    }

    /// The statement just answered, still inside the transaction (or the one that
    /// opened it). `answer`: the digest of the client's answer, `None` when it could
    /// not be had.
    fn add(
        &mut self,
        request: &[u8],
        answer: Option<u64>,
        execute: Option<(u32, Option<Vec<u8>>)>,
        limit: usize,
    ) {
        if self.refused.is_some() {
            return;
        }
        self.bytes += request.len();
        match answer {
            _ if self.bytes > limit => self.refuse("too_large"),
            None => self.refuse("answer_unrecorded"),
            Some(digest) => self.entries.push(Logged {
                request: request.to_vec(),
                digest,
                execute,
            }),
        }
    }

    /// What follows the switchovers begun, once the session had a transaction to move.
    pub fn switch_watch(&mut self) -> Option<&mut tokio::sync::watch::Receiver<u64>> {
        self.switching.as_mut()
    }

    pub fn refuse(&mut self, why: &'static str) {
        self.refused.get_or_insert(why);
        self.entries.clear();
    }
}

/// Whether a statement, by its first word, can run again on another server with the
/// same effect given the same data: plain reads, row changes and the statements that
/// open a transaction. Anything that changes the session, locks, or depends on time or
/// chance in a way a replay can't reproduce is left out.
fn replayable(word: &[u8]) -> bool {
    matches!(
        word,
        b"SELECT"
            | b"INSERT"
            | b"UPDATE"
            | b"DELETE"
            | b"REPLACE"
            | b"BEGIN"
            | b"START"
            | b"SAVEPOINT"
            | b"VALUES"
            | b"TABLE"
            | b"WITH"
    )
}

fn replayable_text(statement: &[u8]) -> bool {
    replayable(&crate::classify::sql::first_word(statement))
}

/// Whether a text statement opens a transaction (its answer is the first logged). Read
/// for every autocommit statement on the writer, so it is looked at without the lexer.
/// Behind a comment it is not seen, as [`replayable_text`] does not see past one: such
/// a transaction is not replayed.
fn opens_transaction(statement: &[u8]) -> bool {
    let text = statement.trim_ascii_start();
    ["BEGIN", "START"].iter().any(|w| {
        text.get(..w.len())
            .is_some_and(|t| t.eq_ignore_ascii_case(w.as_bytes()))
            && text
                .get(w.len())
                .is_none_or(|b| !b.is_ascii_alphanumeric() && *b != b'_')
    })
}

/// Whether a statement is a plain `COMMIT` or `ROLLBACK` (`[WORK]`, nothing more: not
/// to a savepoint, and not one that chains or releases).
fn plain_end(statement: &[u8]) -> bool {
    let mut words = statement
        .split(|b| b.is_ascii_whitespace() || *b == b';')
        .filter(|w| !w.is_empty());
    words
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case(b"COMMIT") || w.eq_ignore_ascii_case(b"ROLLBACK"))
        && words.all(|w| w.eq_ignore_ascii_case(b"WORK"))
}

/// Commands that neither change data nor the session: a transaction they run in can
/// still be replayed without them.
fn leaves_transaction_alone(command: Command) -> bool {
    use Command::*;
    matches!(
        command,
        Ping | StmtPrepare | StmtClose | StmtReset | Statistics | FieldList
    )
}

impl Session {
    /// Before a statement is relayed on the writer: when it is a text statement or an
    /// execute inside a transaction, or may open one, its bytes (returned) and its
    /// answer (recorded by the relay) are kept for the log. Anything else costs nothing
    /// here.
    pub(in crate::frontend::session) async fn start_replay_entry(
        &mut self,
        stmt: &Statement,
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let (command, client_id, len) = (stmt.command, stmt.client_id, stmt.len);
        let in_trx = self.backing.held_in_transaction();
        let on_writer = matches!(self.stmt.target, Some(Target::Writer));
        let mux = self.backing.muxed();
        // Drivers prepare BEGIN too (sysbench does).
        let opens = || match command {
            Command::Query => opens_transaction(&self.client.rbuf[HEADER_LEN + 1..]),
            _ => client_id
                .and_then(|id| mux.stmt_route(id))
                .is_some_and(|(text, _)| opens_transaction(text)),
        };
        let logs = matches!(command, Command::Query | Command::StmtExecute)
            && on_writer
            && len <= super::MAX_BUFFERED
            && (in_trx || !mux.autocommits() || opens());
        if !logs {
            return Ok(None);
        }
        let copy = self.whole_request().await?;
        if copy.is_some() {
            self.stmt.replay_record = Some(Recording::new(MAX_ANSWER_BYTES));
        }
        Ok(copy)
    }

    /// The command at the front of the client buffer, whole, when it is one packet no
    /// larger than the mux keeps.
    pub(in crate::frontend::session) async fn whole_request(
        &mut self,
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let len =
            sluice_wire::packet::Header::parse(&self.client.rbuf).map_or(usize::MAX, |h| h.len);
        if len > super::MAX_BUFFERED {
            return Ok(None);
        }
        self.client.fill_to(HEADER_LEN + len).await?;
        Ok(Some(self.client.rbuf[..HEADER_LEN + len].to_vec()))
    }

    /// Arms the statement about to be relayed for the loss of its writer: what that
    /// would lead to (returned; only while it may be sent `again`), with `copy` holding
    /// what the retry loop then sends; and, unless it follows its own replay
    /// (`carried`), lets the replays pending after a failover go first.
    pub(in crate::frontend::session) async fn arm_replay(
        &mut self,
        router: &Router,
        stmt: &Statement,
        logged: &Option<Vec<u8>>,
        copy: &mut Option<Vec<u8>>,
        again: bool,
        carried: bool,
    ) -> Result<Option<OnLoss>, SessionError> {
        let (command, client_id) = (stmt.command, stmt.client_id);
        let mut on_loss = match again {
            true => self.plan_for_loss(router, stmt, logged.is_some()),
            false => None,
        };
        if on_loss.is_some() {
            if copy.is_none() {
                *copy = match logged {
                    Some(l) => Some(l.clone()),
                    None => self.whole_request().await?,
                };
            }
            on_loss = on_loss.filter(|_| copy.is_some());
            self.stmt.retry_armed |= on_loss.is_some();
        }
        let in_doubt = matches!(on_loss, Some(OnLoss::IfAbsent { commit: false, .. }));
        self.stmt.wrap_commit = in_doubt
            && router.failover.wrap_autocommit_writes
            && match command {
                Command::Query => {
                    let text = copy.as_deref().and_then(|c| c.get(HEADER_LEN + 1..));
                    text.is_some_and(|t| self.wraps(t))
                }
                _ => {
                    let stmts = &self.backing.muxed().stmts;
                    let text = client_id.and_then(|id| stmts.get(&id)).map(|s| &s.text);
                    text.is_some_and(|t| self.wraps(t))
                }
            };
        if !carried && matches!(self.stmt.target, Some(Target::Writer)) {
            router.replay_gate.wait(REPLAY_GATE).await;
        }
        Ok(on_loss)
    }

    /// The statement in flight was lost before any reply, armed with `plan`: what the
    /// retry loop carries to the new writer, holding other writer statements back
    /// until then.
    pub(in crate::frontend::session) fn pending_replay(
        &mut self,
        router: &Router,
        plan: OnLoss,
    ) -> Pending {
        let err = match &plan {
            OnLoss::IfAbsent { lost, .. } => {
                router.commits.lost_in_flight(&lost.floor);
                crate::error::lost_connection(self.member.as_ref().map_or("", |m| m.name()))
            }
            _ => (self.stmt.loss_error.take()).unwrap_or_else(super::super::route::rolled_back),
        };
        let ticket = Some(router.replay_gate.enter());
        let held = self.stmt.held_ok.take();
        Pending {
            plan,
            err,
            ticket,
            held,
        }
    }

    /// What losing the writer before the reply to the statement at the front of the
    /// client buffer would lead to; `None`: the client gets the error, as without
    /// replay. `logged`: it is being kept for the log.
    fn plan_for_loss(&self, router: &Router, stmt: &Statement, logged: bool) -> Option<OnLoss> {
        let (command, kind, client_id) = (stmt.command, stmt.kind, stmt.client_id);
        if !matches!(self.stmt.target, Some(Target::Writer)) || !self.stmt.survive_loss {
            return None;
        }
        let mux = self.backing.muxed();
        let text: &[u8] = match (command, kind) {
            (Command::Query, _) => self.client.rbuf.get(HEADER_LEN + 1..)?,
            (Command::StmtExecute, ResponseKind::Execute { cursor: false }) => {
                &mux.stmts.get(&client_id?)?.text
            }
            _ => return None,
        };
        let word = crate::classify::sql::first_word(text);
        let in_trx = self.backing.held_in_transaction();
        if in_trx {
            return match word.as_slice() {
                b"COMMIT" if plain_end(text) && mux.replay.usable() => {
                    Some(self.in_doubt(router, true))
                }
                b"ROLLBACK" if plain_end(text) => Some(OnLoss::Resend),
                w if replayable(w) && logged && mux.replay.usable() => Some(OnLoss::Replay),
                _ => None,
            };
        }
        match word.as_slice() {
            w if !replayable(w) => None,
            b"BEGIN" | b"START" => Some(OnLoss::Resend),
            // It opens a transaction: nothing of it can have committed.
            _ if !mux.autocommits() => Some(OnLoss::Resend),
            _ => Some(self.in_doubt(router, false)),
        }
    }

    /// The plan for a statement on the held connection that may commit.
    fn in_doubt(&self, router: &Router, commit: bool) -> OnLoss {
        let lost = InDoubt {
            floor: router.commit_floor(self.member.as_ref()),
            thread: self.backing.conn().map_or(0, |b| b.thread_id),
        };
        OnLoss::IfAbsent { lost, commit }
    }

    /// After a command on the writer: logs it when the session's connection is in a
    /// transaction afterwards (or makes that transaction not replayable, when it can't
    /// be logged), or forgets the transaction when there is none.
    pub(in crate::frontend::session) fn log_for_replay(
        &mut self,
        stmt: &Statement,
        request: Option<&[u8]>,
        recording: Option<Recording>,
        limit: usize,
    ) {
        let (command, kind, client_id) = (stmt.command, stmt.kind, stmt.client_id);
        let in_trx = self
            .backing
            .conn()
            .is_some_and(|b| b.status.in_transaction() && !b.is_broken());
        let caps = self.client.caps;
        let mux = self.backing.muxed_mut();
        if !in_trx {
            mux.replay.clear();
            return;
        }
        if leaves_transaction_alone(command) {
            return;
        }
        let (Some(request), Some(answer)) = (request, recording.map(Recording::finished)) else {
            mux.replay.refuse("statement");
            return;
        };
        let Some(answer) = answer else {
            mux.replay.refuse("answer_too_large");
            return;
        };
        let execute = match (command, kind) {
            (Command::Query, _) if replayable_text(&request[HEADER_LEN + 1..]) => None,
            (Command::StmtExecute, ResponseKind::Execute { cursor: false }) => {
                match client_id.and_then(|id| Some((id, mux.stmts.get(&id)?))) {
                    Some((id, stmt)) if replayable_text(&stmt.text) => {
                        // Without types in the packet, it ran with the ones bound before.
                        let bound = Execute::binds_types(&request[HEADER_LEN..], stmt.params);
                        let types = stmt.types.clone().filter(|_| bound == Some(false));
                        Some((id, types))
                    }
                    _ => {
                        mux.replay.refuse("statement");
                        return;
                    }
                }
            }
            _ => {
                mux.replay.refuse("statement");
                return;
            }
        };
        let digest = response_digest(&answer, kind, caps).ok();
        mux.replay.add(request, digest, execute, limit);
    }

    /// On the new writer's connection, just leased and brought in line with the
    /// session: runs the logged transaction again. `Ok(Err(why))`: an answer differed
    /// or the connection failed too; the transaction is rolled back there and the log
    /// forgotten.
    pub(in crate::frontend::session) async fn replay_transaction(
        &mut self,
    ) -> Result<Result<(), &'static str>, SessionError> {
        let entries = std::mem::take(&mut self.backing.muxed_mut().replay.entries);
        let mut outcome = Ok(());
        for e in &entries {
            outcome = self.replay_one(e).await?;
            if outcome.is_err() {
                break;
            }
        }
        let Some((mux, Some(backend))) = self.backing.mux_and_conn() else {
            self.backing.muxed_mut().replay.clear();
            return Ok(Err("no_writer"));
        };
        let log = &mut mux.replay;
        match outcome {
            Ok(()) => {
                log.entries = entries;
                Ok(Ok(()))
            }
            Err(why) => {
                log.clear();
                if !backend.is_broken() && backend.status.in_transaction() {
                    // What replayed so far must not stay: the client is told its
                    // transaction was rolled back.
                    let rollback = backend.simple_command(b"\x03ROLLBACK").await;
                    if let Err(Failed::Broken(_)) = rollback {
                        backend.mark_broken();
                    }
                }
                Ok(Err(why))
            }
        }
    }

    /// Runs one logged statement on the held connection; `Ok(Err(why))`: its answer
    /// differs from the one the client saw, or it could not be run.
    async fn replay_one(&mut self, e: &Logged) -> Result<Result<(), &'static str>, SessionError> {
        let translate = self
            .backing
            .mux()
            .and_then(|m| m.translate_ok.then_some(m.lenenc_info));
        let caps = self.client.caps;
        let mut request = std::borrow::Cow::Borrowed(&e.request[..]);
        let mut kind = ResponseKind::Query;
        let mut bound = None;
        if let Some((id, types)) = &e.execute {
            kind = ResponseKind::Execute { cursor: false };
            let bid = match self.statement_here(*id).await {
                Ok(bid) => bid,
                Err(failed) => {
                    failed.answered()?;
                    return Ok(Err("statement"));
                }
            };
            let params = self.backing.muxed().stmts.get(id).map_or(0, |s| s.params);
            let mut payload = e.request[HEADER_LEN..].to_vec();
            set_stmt_id(&mut payload, bid);
            if let Some(t) = types.as_deref() {
                payload = Execute::with_types(&payload, params, t).unwrap_or(payload);
            }
            bound = Execute::parse(&payload, params).and_then(|x| x.types.map(<[u8]>::to_vec));
            let mut packet = bytes::BytesMut::with_capacity(HEADER_LEN + payload.len());
            sluice_wire::packet::write_packet(&mut packet, 0, &payload);
            request = std::borrow::Cow::Owned(packet.to_vec());
        }
        let Some((mux, Some(backend))) = self.backing.mux_and_conn() else {
            return Ok(Err("no_writer"));
        };
        match fetch(backend, &request, kind, MAX_ANSWER_BYTES, translate).await {
            Ok(Some((answer, _))) => {
                if !response_digest(&answer, kind, caps).is_ok_and(|d| d == e.digest) {
                    return Ok(Err("mismatch"));
                }
            }
            Ok(None) => return Ok(Err("answer_too_large")),
            Err(err) => {
                tracing::warn!(error = %err, "the new writer was lost during a replay");
                backend.mark_broken();
                return Ok(Err("lost_again"));
            }
        }
        // Later executes without types on this connection mean the ones just bound.
        if let (Some((id, _)), Some(types)) = (&e.execute, bound) {
            if let Some(stmt) = mux.stmts.get(id) {
                if let Some(b) = backend.stmts.get_mut(stmt.key.key()) {
                    b.types = Some(types);
                }
            }
        }
        Ok(Ok(()))
    }

    /// Carries a statement lost with its writer over to the connection just leased on
    /// the new writer, counted in `router`'s stats: its transaction replayed, or the
    /// check that it did not commit made. False: it could not be, and the statement in
    /// flight is over, answered with the pending error.
    pub(in crate::frontend::session) async fn replay_on_new_writer(
        &mut self,
        router: &Router,
        pending: Pending,
    ) -> Result<bool, SessionError> {
        Stats::incr(&router.stats.replays_attempted);
        let at = super::super::traced::mark(&self.stmt);
        let Pending {
            plan,
            mut err,
            ticket,
            held,
        } = pending;
        let logged = self.backing.muxed().replay.entries.len();
        let outcome = match &plan {
            OnLoss::Replay => self.replay_transaction().await?,
            OnLoss::Resend => {
                self.backing.muxed_mut().replay.clear();
                Ok(())
            }
            OnLoss::IfAbsent { lost, commit } => {
                let outcome = (self.member.as_ref())
                    .map_or(Outcome::Unknown, |m| router.commits.outcome(m, lost));
                match outcome {
                    Outcome::Absent if self.backing.muxed().replay.usable() => {
                        // Its COMMIT surely did not happen: if the transaction can't go
                        // on, the client learns it was rolled back, not that the outcome
                        // is unknown.
                        err = super::super::route::rolled_back();
                        self.replay_transaction().await?
                    }
                    Outcome::Absent => {
                        self.backing.muxed_mut().replay.clear();
                        Ok(())
                    }
                    Outcome::Committed { gtid, insert_id } if *commit || held.is_some() => {
                        self.backing.muxed_mut().replay.clear();
                        count_replay(&router.stats, Ok(()));
                        Stats::incr(&router.stats.commits_found);
                        drop(ticket);
                        // Acknowledged now: the session's reads must see it.
                        self.note_gtid_pos(router, &gtid);
                        self.replay_stage(at, &plan, logged, Err("found committed"));
                        match held {
                            Some(ok) => self.answer_held(ok, insert_id).await?,
                            None => self.answer_committed().await?,
                        }
                        return Ok(false);
                    }
                    // An autocommit write the new writer has, not wrapped: what its OK
                    // said (rows, insert id, warnings) can't be known.
                    Outcome::Committed { .. } => {
                        self.backing.muxed_mut().replay.clear();
                        Err("committed_write")
                    }
                    Outcome::Unknown => {
                        self.backing.muxed_mut().replay.clear();
                        Err("outcome_unknown")
                    }
                }
            }
        };
        count_replay(&router.stats, outcome);
        self.replay_stage(at, &plan, logged, outcome);
        // Carried over (or not): the other writer statements need not wait for it.
        drop(ticket);
        match outcome {
            Ok(()) => {
                tracing::info!(
                    "statement carried over to the new writer after its writer was lost"
                );
                Ok(true)
            }
            Err(why) => {
                tracing::warn!(why, "statement lost with its writer, not carried over");
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, &err).await?;
                self.release_if_free().await?;
                Ok(false)
            }
        }
    }
}

impl Session {
    /// A transaction that could not be logged was lost with its writer: counted as a
    /// replay refused, with the reason it could not be logged.
    pub(in crate::frontend::session) fn unreplayable_lost(&mut self, router: &Router) {
        let log = &mut self.backing.muxed_mut().replay;
        if let Some(why) = log.refused.take() {
            Stats::incr(&router.stats.replays_attempted);
            count_replay(&router.stats, Err(why));
        }
    }

    /// Whether the session sits on the writer in a transaction it can run again
    /// elsewhere, holding nothing else there: a switchover moves it rather than wait for
    /// it. Follows the router's switchovers from the first time it is so.
    pub(in crate::frontend::session) fn movable(&mut self) -> bool {
        let in_trx = self.backing.held_in_transaction();
        let Some(mux) = self.backing.mux() else {
            return false;
        };
        if !in_trx
            || !mux.replay.usable()
            || mux.pin_reason(sluice_wire::StatusFlags(0)).is_some()
            || self.fe.shards.is_some()
        {
            return false;
        }
        if mux.replay.switching.is_none() {
            let rx = self.fe.router.load().switching.subscribe();
            self.backing.muxed_mut().replay.switching = Some(rx);
        }
        true
    }

    /// Whether a switchover is moving the writer away (seen, so that the next wait for
    /// one waits for the next).
    pub(in crate::frontend::session) fn switching(&mut self) -> bool {
        if let Some(rx) = self
            .backing
            .mux_mut()
            .and_then(|m| m.replay.switching.as_mut())
        {
            rx.borrow_and_update();
        }
        (self.fe.router.load())
            .paused
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// A switchover waits for the old writer's connections to be given back: the idle
    /// transaction is rolled back there and given up, and runs again on the new writer
    /// at the session's next statement.
    pub(in crate::frontend::session) async fn move_for_switchover(
        &mut self,
    ) -> Result<(), SessionError> {
        let Some(backend) = self.backing.conn_mut() else {
            return Ok(());
        };
        if backend.simple_command(b"\x03ROLLBACK").await.is_err() {
            backend.mark_broken();
        }
        let mux = self.backing.muxed_mut();
        mux.replay.lost_on = self.member.clone();
        mux.hold_until = None;
        tracing::debug!("transaction moved off the writer for a switchover");
        self.release_if_free().await
    }
}

/// Resolves when a switchover begins on the router `rx` follows.
pub(in crate::frontend::session) async fn switch_begun(rx: &mut tokio::sync::watch::Receiver<u64>) {
    if rx.changed().await.is_err() {
        // The router was replaced: its switchovers are over.
        std::future::pending::<()>().await;
    }
}

impl Session {
    /// A COMMIT whose reply was lost is on the new writer: the client hears it
    /// committed, as it did.
    async fn answer_committed(&mut self) -> Result<(), SessionError> {
        tracing::info!("a COMMIT lost with its writer is on the new writer: answered as committed");
        let mux = self.backing.muxed_mut();
        let status = StatusFlags(mux.status.0 & !StatusFlags::IN_TRANS);
        mux.status = status;
        if let Some(c) = self.cache.as_mut() {
            c.wrote(Some(Vec::new()), status);
        }
        let seq = self.client.skip_packet().await?;
        let ok = OkPacket {
            status,
            ..Default::default()
        };
        self.client.write_ok(seq, &ok).await?;
        self.release_if_free().await?;
        Ok(())
    }
}

impl Session {
    /// A wrapped autocommit write whose COMMIT's reply was lost is on the new writer:
    /// the client gets the OK the write got. `insert_id`: what the commit's binlog
    /// says it generated.
    async fn answer_held(
        &mut self,
        ok: Vec<u8>,
        insert_id: Option<u64>,
    ) -> Result<(), SessionError> {
        tracing::info!(
            "an autocommit write lost with its writer is on the new writer: answered with its own OK"
        );
        let parsed = OkPacket::parse(&ok).unwrap_or_default();
        let mux = self.backing.muxed_mut();
        mux.status = parsed.status;
        mux.wrapped_rows = Some(parsed.affected_rows as i64);
        // It set LAST_INSERT_ID() only if it generated the id its OK tells (an id
        // given in the statement is told too, and sets nothing).
        if let Some(id) = insert_id.filter(|&id| id != 0 && id == parsed.last_insert_id) {
            mux.set_last_insert_id(id);
        }
        if let Some(c) = self.cache.as_mut() {
            c.wrote(Some(Vec::new()), parsed.status);
        }
        let seq = self.client.skip_packet().await?;
        self.client.write_packet(seq, &ok).await?;
        self.release_if_free().await?;
        Ok(())
    }
}

/// Counts a replay's end.
fn count_replay(stats: &crate::router::RouterStats, outcome: Result<(), &'static str>) {
    match outcome {
        Ok(()) => Stats::incr(&stats.replays_succeeded),
        Err(why) => {
            Stats::incr(&stats.replays_refused);
            let mut by = stats.replays_refused_by.lock();
            *by.entry(why).or_insert(0) += 1;
        }
    }
}

#[cfg(test)]
mod tests;
