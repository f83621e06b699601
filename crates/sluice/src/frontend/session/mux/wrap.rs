//! Autocommit writes sent inside a transaction Sluice opens and commits around them
//! (`failover.wrap_autocommit_writes`). `BEGIN`, the write and `COMMIT` go to the
//! writer in one round trip; the write's own OK reaches the client once the COMMIT's
//! has come, with the status it would have had on its own.
//!
//! Why: an autocommit write's OK exists only after it committed, so when its writer is
//! lost before the reply and the new writer has the commit, all Sluice could say is
//! that the outcome is unknown (1158). Wrapped, the OK is in hand before the commit:
//! if only the COMMIT's reply is lost and the new writer has the commit, the client
//! gets that OK (`mux/replay.rs`).
//!
//! The cost, documented: the server runs two more commands per write. `ROW_COUNT()` in
//! the statement after would read the COMMIT's 0: Sluice answers it with the write's
//! own count (`mux/row_count.rs`).

use super::super::relay::{broke_protocol, lost_backend, Relayed};
use super::super::Session;
use crate::error::SessionError;
use crate::stats::Stats;
use bytes::{Buf, BytesMut};
use sluice_wire::packet::{split_packet, write_packet, Header, Packet, HEADER_LEN};
use sluice_wire::response::{set_ok_status, OkPacket, ERR_HEADER, OK_HEADER};
use sluice_wire::tracker::Outcome;
use sluice_wire::{ProtocolError, StatusFlags};
use tokio::time::Instant;

const BEGIN: &[u8] = b"\x06\x00\x00\x00\x03BEGIN";
const COMMIT: &[u8] = b"\x07\x00\x00\x00\x03COMMIT";

/// Whether a statement's text, by itself, can go inside a transaction with the same
/// effect and answer as on its own: one row-changing statement (not several, not one
/// returning rows).
pub(super) fn wrappable_text(text: &[u8]) -> bool {
    let word = crate::classify::sql::first_word(text);
    matches!(
        word.as_slice(),
        b"INSERT" | b"UPDATE" | b"DELETE" | b"REPLACE"
    ) && memchr::memchr(b';', text).is_none()
        && !memchr::memchr2_iter(b'r', b'R', text).any(|i| {
            text.get(i..i + b"RETURNING".len())
                .is_some_and(|w| w.eq_ignore_ascii_case(b"RETURNING"))
        })
}

/// The write's reply, once read.
enum Reply {
    /// Its OK as the client gets it (and as the server wrote it, with the status
    /// changed), the status it tells, its affected rows, and whether it says it
    /// committed on its own (its BEGIN failed).
    Ok {
        bytes: Vec<u8>,
        payload: Vec<u8>,
        status: StatusFlags,
        affected: u64,
        committed: bool,
    },
    Err(Vec<u8>),
}

impl Session {
    /// Whether the autocommit write about to be relayed (`text`), armed to be settled
    /// after a loss, goes inside a transaction of Sluice's: only where nothing the
    /// client can see tells the difference (its session tracking reports no
    /// transaction state, `in_transaction` or GTID, a COMMIT starts no new transaction,
    /// and it holds no SQL-level prepared statement).
    pub(in crate::frontend::session) fn wraps(&self, text: &[u8]) -> bool {
        let Some(mux) = self.backing.mux() else {
            return false;
        };
        let tracking_sees_it = !mux.translate_ok
            && mux.tracking.as_ref().is_none_or(|t| {
                t.state_change
                    || !t.transaction_info.eq_ignore_ascii_case(b"OFF")
                    || t.tracks_variable(b"last_gtid")
                    || t.tracks_variable(b"in_transaction")
            });
        let chains = mux
            .vars
            .get(b"completion_type".as_slice())
            .is_some_and(|v| !(v.eq_ignore_ascii_case(b"NO_CHAIN") || v == b"0"));
        // Its `EXECUTE` may read `ROW_COUNT()` in a text Sluice never sees, which
        // would read the COMMIT's count.
        let sql_prepared = !mux.pins.sql_prepared.is_empty();
        !tracking_sees_it && !chains && !sql_prepared && wrappable_text(text)
    }

    /// Relays the write at the front of the client buffer inside `BEGIN` ... `COMMIT`.
    pub(in crate::frontend::session) async fn relay_wrapped(
        &mut self,
    ) -> Result<Relayed, SessionError> {
        let Some((mux, Some(backend))) = self.backing.mux_and_conn() else {
            return Ok(Relayed::End);
        };
        // Armed with a copy of it, it is whole in the buffer; read on all the same
        // rather than send a part.
        let len = loop {
            match Header::parse(&self.client.rbuf) {
                Some(h) if self.client.rbuf.len() >= HEADER_LEN + h.len => {
                    break HEADER_LEN + h.len
                }
                _ => self.client.read_more().await?,
            };
        };
        let mut out = Vec::with_capacity(BEGIN.len() + len + COMMIT.len());
        out.extend_from_slice(BEGIN);
        out.extend_from_slice(&self.client.rbuf[..len]);
        out.extend_from_slice(COMMIT);
        self.client.rbuf.advance(len);
        Stats::add(&self.fe.stats.bytes_from_clients, len as u64);
        let sent_at = Instant::now();
        if let Err(e) = backend.write_all(&out).await {
            backend.mark_broken();
            return self.lost_wrapped(e, None).await;
        }
        let mut received = 0u64;
        // BEGIN's answer is Sluice's own. Should it fail, the write runs on its own,
        // which its status then says.
        match backend.read_packet().await {
            Ok(p) => received += (HEADER_LEN + p.payload.len()) as u64,
            Err(e) => return self.lost_wrapped(e, None).await,
        }
        let write = match backend.read_packet().await {
            Ok(p) => p,
            Err(e) => return self.lost_wrapped(e, None).await,
        };
        received += (HEADER_LEN + write.payload.len()) as u64;
        let reply = match read_write_reply(mux, &write) {
            Ok(r) => r,
            Err(e) => return Err(broke_protocol(backend, e)),
        };
        let commit = match backend.read_packet().await {
            Ok(p) => p,
            Err(e) => return self.lost_wrapped(e, Some(reply)).await,
        };
        received += (HEADER_LEN + commit.payload.len()) as u64;
        let reply = match commit.payload.first() {
            Some(&OK_HEADER) => {
                let packet = with_header(&commit);
                match OkPacket::parse(&commit.payload) {
                    Ok(ok) => backend.status = ok.status,
                    Err(e) => return Err(broke_protocol(backend, e)),
                }
                if let Err(e) = mux.observe_added_commit(&packet) {
                    return Err(broke_protocol(backend, e));
                }
                reply
            }
            // It did not commit: the client gets why, as it would have on its own.
            Some(&ERR_HEADER) => {
                // What the failed COMMIT left open is not worth finding out.
                backend.mark_broken();
                match reply {
                    Reply::Ok { .. } => Reply::Err(with_header(&commit)),
                    err => err,
                }
            }
            _ => {
                let e = ProtocolError::Malformed("a COMMIT's reply that is neither OK nor ERR");
                return Err(broke_protocol(backend, e));
            }
        };
        Stats::add(&self.fe.stats.bytes_from_backends, received);
        let error = matches!(reply, Reply::Err(_));
        backend
            .server
            .counters
            .relayed(self.stmt.request_len, received, sent_at.elapsed(), error);
        self.deliver(reply).await
    }

    /// The writer was lost during a wrapped write, after its reply if `reply`.
    async fn lost_wrapped(
        &mut self,
        e: crate::error::BackendError,
        reply: Option<Reply>,
    ) -> Result<Relayed, SessionError> {
        let backend = self
            .backing
            .conn_mut()
            .expect("wrapped writes have a connection");
        backend.mark_broken();
        Stats::incr(&self.fe.stats.backend_errors);
        match reply {
            // Only its COMMIT's reply is missing: the OK is kept for the client, should
            // the new writer have the commit.
            Some(Reply::Ok {
                bytes,
                committed: false,
                ..
            }) => {
                tracing::debug!(error = %e, "server lost before a wrapped write's COMMIT replied");
                self.stmt.held_ok = split_packet(&bytes).map(|(_, payload)| payload.to_vec());
                Ok(Relayed::LostBeforeReply)
            }
            // It failed, or committed on its own: its reply is the answer.
            Some(reply) => {
                tracing::debug!(error = %e, "server lost after a wrapped write's reply");
                self.deliver(reply).await
            }
            None if self.stmt.retry_armed => {
                tracing::debug!(error = %e, "server lost before a wrapped write's reply");
                Ok(Relayed::LostBeforeReply)
            }
            None => {
                let err = self.stmt.loss_error.take();
                let survive = self.stmt.survive_loss;
                lost_backend(&mut self.client, e, 1, survive, err).await
            }
        }
    }

    /// Gives the client the write's reply, after telling the cache it ended.
    async fn deliver(&mut self, reply: Reply) -> Result<Relayed, SessionError> {
        let (mux, backend) = self.backing.muxed_with_conn();
        let (bytes, status, affected) = match &reply {
            Reply::Ok {
                bytes,
                payload,
                status,
                affected,
                ..
            } => {
                let status = *status;
                if let Some(c) = self.cache.as_mut() {
                    c.response_ending(Some(status), backend.status, Some(payload));
                }
                (bytes, Some(status), *affected)
            }
            Reply::Err(bytes) => {
                if let Some(c) = self.cache.as_mut() {
                    c.response_ending(None, backend.status, None);
                }
                (bytes, None, 0)
            }
        };
        mux.observed.status = status;
        // The COMMIT after it left the server's count at 0; a write that failed leaves
        // -1.
        mux.wrapped_rows = Some(status.map_or(-1, |_| affected as i64));
        self.stmt.outcome = Outcome {
            rows: 0,
            affected,
            error: status.is_none(),
            // One OK, or the error: counted as the relay's scan counts them.
            results: u32::from(status.is_some()),
            ..Outcome::default()
        };
        Stats::add(&self.fe.stats.bytes_to_backends, self.stmt.request_len);
        self.stmt.served_by = Some(backend.server.clone());
        let written = match self.client.stream_write(bytes).await {
            Ok(()) => self.client.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            Stats::incr(&self.fe.stats.client_aborts);
            return Err(e.into());
        }
        Ok(Relayed::Done)
    }
}

/// A packet read whole, with its header again.
fn with_header(p: &Packet) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(HEADER_LEN + p.payload.len());
    write_packet(&mut out, p.seq, &p.payload);
    out.to_vec()
}

/// The write's reply, read: an OK gets the status it would have had on its own,
/// and is told to the session as the relay tells any OK.
fn read_write_reply(mux: &mut super::Mux, write: &Packet) -> Result<Reply, ProtocolError> {
    match write.payload.first() {
        Some(&OK_HEADER) => {
            let ok = OkPacket::parse(&write.payload)?;
            let status = StatusFlags(
                ok.status.0 & !(StatusFlags::IN_TRANS | StatusFlags::IN_TRANS_READONLY),
            );
            let mut payload = write.payload.to_vec();
            set_ok_status(&mut payload, status)?;
            let mut packet = BytesMut::with_capacity(HEADER_LEN + payload.len());
            write_packet(&mut packet, write.seq, &payload);
            let (translated, _) = mux.observe_ok(&packet)?;
            Ok(Reply::Ok {
                bytes: translated.unwrap_or_else(|| packet.to_vec()),
                payload,
                status,
                affected: ok.affected_rows,
                committed: !ok.status.in_transaction(),
            })
        }
        Some(&ERR_HEADER) => Ok(Reply::Err(with_header(write))),
        _ => Err(ProtocolError::Malformed(
            "a write's reply that is neither OK nor ERR",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_single_row_changing_statements_are_wrapped() {
        for s in [
            "INSERT INTO t VALUES (1)",
            " update t set a = 1",
            "DELETE FROM t WHERE id = 2",
            "REPLACE INTO t VALUES (3)",
            "INSERT INTO t SELECT * FROM u",
        ] {
            assert!(wrappable_text(s.as_bytes()), "{s}");
        }
        for s in [
            "SELECT 1",
            "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)",
            "INSERT INTO t VALUES (1) RETURNING id",
            "delete from t returning *",
            "CREATE TABLE t (a int)",
            "SET @a = 1",
            "CALL p()",
            "LOAD DATA INFILE 'x' INTO TABLE t",
        ] {
            assert!(!wrappable_text(s.as_bytes()), "{s}");
        }
    }
}
