//! A session's side of the server's prepared-statement budget (`backend::prepared`):
//! a prepare is refused with the server's own error 1461 when Sluice's statements on
//! that server reach the budget and none can be closed, instead of letting the server
//! run out for all its clients; a dedicated session's statements are counted as the
//! server opens and closes them.

use super::Session;
use crate::backend::{PooledConn, Sweep};
use crate::error::{code, Failed, SessionError};
use sluice_wire::command::Command;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::response::ErrPacket;
use sluice_wire::statement::{Execute, PrepareOk};

/// MariaDB's answer past `max_prepared_stmt_count`, with Sluice's budget as the limit
/// the client ran into.
pub(super) fn budget_reached(budget: usize) -> ErrPacket {
    ErrPacket::new(
        code::ER_MAX_PREPARED_STMT_COUNT_REACHED,
        "42000",
        format!(
            "Can't create more than max_prepared_stmt_count statements (current value: {budget})"
        ),
    )
}

/// Closes statements on the server; a connection that can't be written to is broken.
pub(super) async fn close_on(backend: &mut PooledConn, ids: &[u32]) -> Result<(), SessionError> {
    if let Err(e) = backend.close_statements(ids).await {
        backend.mark_broken();
        return Err(e.into());
    }
    Ok(())
}

/// Puts `types` into the execute at the front of `rbuf` (`len` bytes of payload) that
/// was sent without them, for a server statement that never had them bound (its last
/// execute with types was answered by the cache, or ran on another connection).
/// Returns the payload's new length; `None` when the execute carries types already.
pub(super) fn bind_types(
    rbuf: &mut bytes::BytesMut,
    len: usize,
    params: u16,
    types: &[u8],
) -> Option<usize> {
    let rebuilt = Execute::with_types(&rbuf[HEADER_LEN..HEADER_LEN + len], params, types)?;
    let rest = &rbuf[HEADER_LEN + len..];
    let mut out = bytes::BytesMut::with_capacity(HEADER_LEN + rebuilt.len() + rest.len());
    sluice_wire::packet::write_packet(&mut out, 0, &rebuilt);
    out.extend_from_slice(rest);
    *rbuf = out;
    Some(rebuilt.len())
}

/// A dedicated session's prepare got its answer, the first bytes of which are `head`:
/// an OK opened a statement on the server.
pub(super) fn note_dedicated_prepare(backend: &mut PooledConn, n: usize) {
    let ok = backend.rbuf[..n]
        .get(HEADER_LEN..)
        .and_then(PrepareOk::parse);
    if let Some(ok) = ok {
        backend.stmts.opened(ok.stmt_id);
    }
}

impl Session {
    /// Whether the session's connection may open one more statement on its server:
    /// under the budget, or once statements no client refers to are closed (on this
    /// connection, then on the server's idle ones), then the idle connections' copies of
    /// statements another connection also has. `all`: the idle connections' other
    /// statements may go too (their sessions prepare them again where they next run),
    /// for a statement an execute needs, which can't be refused as a prepare can.
    pub(super) async fn room_for_statement(&mut self, all: bool) -> Result<(), Failed> {
        let Some(backend) = self.backing.conn_mut() else {
            return Ok(());
        };
        if !backend.stmts.server().budget_known() {
            // Neither the monitor nor a multiplexed connection has read it yet.
            match backend.read_statement_limit().await {
                Ok(()) => {}
                Err(e) => {
                    backend.mark_broken();
                    return Err(Failed::Answered(e.to_err_packet()));
                }
            }
        }
        if !backend.stmts.server().full() {
            return Ok(());
        }
        let ids = backend.stmts.sweep(Sweep::Unreferenced);
        close_on(backend, &ids).await?;
        let pool = backend.pool().clone();
        let stages: &[Sweep] = if all {
            &[Sweep::Unreferenced, Sweep::Copies, Sweep::All]
        } else {
            &[Sweep::Unreferenced, Sweep::Copies]
        };
        for stage in stages {
            if !backend.stmts.server().full() {
                break;
            }
            pool.close_idle_statements(*stage).await;
        }
        let server = backend.stmts.server();
        if server.full() {
            tracing::debug!(
                server = %backend.server.name,
                open = server.open(),
                budget = server.budget(),
                "prepared statement budget reached"
            );
            return Err(Failed::Answered(budget_reached(server.budget())));
        }
        Ok(())
    }

    /// Before a multiplexed session's connection goes back: closes on the server the
    /// statements no client refers to any more, so that an idle connection holds none.
    /// A connection that can't be written to is marked broken, and so closed. Entered
    /// when the connection's statements need a sweep.
    pub(super) async fn close_unreferenced(&mut self) {
        let Some(backend) = self.backing.conn_mut() else {
            return;
        };
        let ids = backend.stmts.sweep(Sweep::Unreferenced);
        if let Err(e) = close_on(backend, &ids).await {
            tracing::debug!(error = %e, "closing unused statements failed");
        }
    }

    /// Before a dedicated session's command goes to its connection: a prepare past the
    /// budget is answered here (true: answered). Its statements are the server's own.
    pub(super) async fn dedicated_refusal(
        &mut self,
        command: Command,
    ) -> Result<bool, SessionError> {
        if command != Command::StmtPrepare {
            return Ok(false);
        }
        match self.room_for_statement(false).await {
            Ok(()) => Ok(false),
            Err(failed) => {
                let err = failed.answered()?;
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, &err).await?;
                Ok(true)
            }
        }
    }

    /// After a dedicated session's command: what it closed on the server. `closing` is
    /// the id of a COM_STMT_CLOSE, `reset` says a COM_RESET_CONNECTION succeeded.
    pub(super) fn dedicated_closed(&mut self, closing: Option<u32>, reset: bool) {
        let Some(backend) = self.backing.conn_mut() else {
            return;
        };
        if let Some(id) = closing {
            backend.stmts.closed(id);
        }
        if reset {
            backend.stmts.forget_all();
        }
    }
}
