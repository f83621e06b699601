//! Transaction replay: while a multiplexed session's transaction runs on the writer,
//! what it needs to run it again (each statement as the client sent it, and a digest of
//! the answer the client saw). When the writer is lost before a statement's reply, the
//! transaction runs again on the new writer, and goes on only if every answer there
//! matches what the client already saw; otherwise the client gets the error it got
//! before replay existed.
//!
//! This first form replays text-protocol transactions of plain statements (reads and
//! row changes). A transaction with a prepared execute, a statement that changes the
//! session, or more than [`MAX_LOG_BYTES`] of statements is not replayed; nor is a
//! COMMIT whose outcome is unknown (the server may have committed it before it went).

use super::super::cached::{fetch, Recording};
use super::super::Session;
use crate::error::SessionError;
use crate::stats::Stats;
use sluice_wire::digest::response_digest;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::tracker::ResponseKind;

/// Most bytes of statements a transaction keeps for replay; past it, it is not replayed.
const MAX_LOG_BYTES: usize = 1 << 20;

/// Most bytes of one answer recorded to digest; a larger one makes its transaction not
/// replayable.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// One statement of the transaction and the digest of the answer the client saw.
struct Logged {
    request: Vec<u8>,
    digest: u64,
}

/// The transaction open on the writer, as far as it can be run again.
#[derive(Default)]
pub(in crate::frontend::session) struct ReplayLog {
    entries: Vec<Logged>,
    bytes: usize,
    /// Why this transaction can't be replayed, once something made it so.
    refused: Option<&'static str>,
    /// The server the transaction's connection was lost on while the session was idle:
    /// its next statement replays it on another writer first.
    pub lost_on: Option<std::sync::Arc<crate::router::Member>>,
}

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
    fn add(&mut self, request: &[u8], answer: Option<u64>) {
        if self.refused.is_some() {
            return;
        }
        self.bytes += request.len();
        match answer {
            _ if self.bytes > MAX_LOG_BYTES => self.refuse("too_large"),
            None => self.refuse("answer_unrecorded"),
            Some(digest) => self.entries.push(Logged {
                request: request.to_vec(),
                digest,
            }),
        }
    }

    pub fn refuse(&mut self, why: &'static str) {
        self.refused.get_or_insert(why);
        self.entries.clear();
    }
}

/// Whether a text statement can run again on another server with the same effect,
/// given the same data: plain reads, row changes and the statements that open a
/// transaction. Anything that changes the session, locks, or depends on time or chance
/// in a way a replay can't reproduce is left out by what its first word is.
fn replayable_text(statement: &[u8]) -> bool {
    let word = crate::classify::sql::first_word(statement);
    matches!(
        word.as_slice(),
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

/// Whether a text statement ends the transaction: its outcome can't be had again.
fn ends_transaction(statement: &[u8]) -> bool {
    let word = crate::classify::sql::first_word(statement);
    matches!(word.as_slice(), b"COMMIT" | b"ROLLBACK" | b"END" | b"XA")
}

impl Session {
    /// Before a text statement is relayed: when it runs on the writer inside a
    /// transaction, or may open one, its bytes (returned) and its answer (recorded by
    /// the relay) are kept for the log. Anything else costs nothing here.
    pub(in crate::frontend::session) async fn start_replay_entry(
        &mut self,
        len: usize,
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let in_trx = self
            .backend
            .as_ref()
            .is_some_and(|b| b.status.in_transaction());
        let on_writer = matches!(self.stmt.target, Some(crate::router::Target::Writer));
        let logs = on_writer
            && len <= super::MAX_BUFFERED
            && (in_trx
                || !self.backing.muxed().autocommits()
                || opens_transaction(&self.client.rbuf[HEADER_LEN + 1..]));
        if !logs {
            return Ok(None);
        }
        while self.client.rbuf.len() < HEADER_LEN + len {
            self.client.read_more().await?;
        }
        self.stmt.replay_record = Some(Recording::new(MAX_ANSWER_BYTES));
        Ok(Some(self.client.rbuf[..HEADER_LEN + len].to_vec()))
    }

    /// Whether losing the writer before the reply to the statement at the front of the
    /// client buffer replays its transaction: one is open and can run again, and the
    /// statement is not what ends it (a COMMIT's own outcome can't be known, so it is
    /// never sent again).
    pub(in crate::frontend::session) fn replay_would_follow(&self) -> bool {
        self.backend
            .as_ref()
            .is_some_and(|b| b.status.in_transaction())
            && self.backing.muxed().replay.usable()
            && !ends_transaction(&self.client.rbuf[HEADER_LEN + 1..])
    }

    /// After a statement the log was armed for: logs it when the session's connection
    /// is in a transaction afterwards, or forgets the transaction when it is not.
    pub(in crate::frontend::session) fn log_for_replay(
        &mut self,
        request: Option<&[u8]>,
        recording: Option<Recording>,
    ) {
        let in_trx = self
            .backend
            .as_ref()
            .is_some_and(|b| b.status.in_transaction() && !b.is_broken());
        let caps = self.client.caps;
        let log = &mut self.backing.muxed_mut().replay;
        if !in_trx {
            log.clear();
            return;
        }
        match (request, recording.map(Recording::finished)) {
            (Some(request), Some(Some(answer))) => {
                let text = request.get(HEADER_LEN + 1..);
                if !text.is_some_and(replayable_text) {
                    log.refuse("statement");
                    return;
                }
                let digest = response_digest(&answer, ResponseKind::Query, caps).ok();
                log.add(request, digest);
            }
            (Some(_), Some(None)) => log.refuse("answer_too_large"),
            _ => log.refuse("statement"),
        }
    }

    /// On the new writer's connection, just leased and brought in line with the
    /// session: runs the logged transaction again. `Ok(Err(why))`: an answer differed
    /// or the connection failed too; the transaction is rolled back there and the log
    /// forgotten.
    pub(in crate::frontend::session) async fn replay_transaction(
        &mut self,
    ) -> Result<Result<(), &'static str>, SessionError> {
        let entries = std::mem::take(&mut self.backing.muxed_mut().replay.entries);
        let translate = self
            .backing
            .mux()
            .and_then(|m| m.translate_ok.then_some(m.lenenc_info));
        let caps = self.client.caps;
        let Some(backend) = self.backend.as_mut() else {
            return Ok(Err("no_writer"));
        };
        let mut outcome = Ok(());
        for e in &entries {
            match fetch(
                backend,
                &e.request,
                ResponseKind::Query,
                MAX_ANSWER_BYTES,
                translate,
            )
            .await
            {
                Ok(Some(answer)) => {
                    let same = response_digest(&answer, ResponseKind::Query, caps)
                        .is_ok_and(|d| d == e.digest);
                    if !same {
                        outcome = Err("mismatch");
                        break;
                    }
                }
                Ok(None) => {
                    outcome = Err("answer_too_large");
                    break;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "the new writer was lost during a replay");
                    backend.mark_broken();
                    outcome = Err("lost_again");
                    break;
                }
            }
        }
        let log = &mut self.backing.muxed_mut().replay;
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
                    if backend.simple_command(b"\x03ROLLBACK").await.is_err() {
                        backend.mark_broken();
                    }
                }
                Ok(Err(why))
            }
        }
    }

    /// Runs the logged transaction on the connection just leased on the new writer,
    /// counted in `router`'s stats. False: it could not be, and the statement in flight
    /// is over, answered with `err`.
    pub(in crate::frontend::session) async fn replay_on_new_writer(
        &mut self,
        router: &crate::router::Router,
        err: &sluice_wire::response::ErrPacket,
    ) -> Result<bool, SessionError> {
        Stats::incr(&router.stats.replays_attempted);
        let outcome = self.replay_transaction().await?;
        count_replay(&router.stats, outcome);
        match outcome {
            Ok(()) => {
                tracing::info!("transaction replayed on the new writer after its writer was lost");
                Ok(true)
            }
            Err(why) => {
                tracing::warn!(why, "transaction lost with its writer, not replayed");
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, err).await?;
                self.release_if_free().await?;
                Ok(false)
            }
        }
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
mod tests {
    use super::*;

    #[test]
    fn a_log_past_its_bound_or_with_an_unknown_answer_is_refused() {
        let mut log = ReplayLog::default();
        log.add(b"\x05\0\0\0\x03BEGIN", Some(1));
        assert!(log.usable());
        log.add(&vec![b'x'; MAX_LOG_BYTES], Some(2));
        assert!(!log.usable());
        assert_eq!(log.refused, Some("too_large"));
        log.clear();
        log.add(b"\x05\0\0\0\x03BEGIN", None);
        assert!(!log.usable());
        log.clear();
        assert!(log.refused.is_none() && log.entries.is_empty());
    }

    #[test]
    fn what_opens_a_transaction_is_told_without_the_lexer() {
        for s in ["BEGIN", " begin work", "START TRANSACTION", "begin;"] {
            assert!(opens_transaction(s.as_bytes()), "{s}");
        }
        // Behind a comment it is not seen: the transaction is then not replayed.
        for s in [
            "BEGINNING",
            "SELECT 1",
            "STARTS",
            "",
            "/* x */ BEGIN",
            "-- BEGIN\nSELECT 1",
        ] {
            assert!(!opens_transaction(s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn only_plain_statements_replay() {
        for s in [
            "SELECT 1",
            " insert into t values (1)",
            "BEGIN",
            "start transaction",
        ] {
            assert!(replayable_text(s.as_bytes()), "{s}");
        }
        for s in [
            "SET @a = 1",
            "LOCK TABLES t WRITE",
            "CREATE TEMPORARY TABLE t (a int)",
            "USE db",
            "COMMIT",
        ] {
            assert!(!replayable_text(s.as_bytes()), "{s}");
        }
    }
}
