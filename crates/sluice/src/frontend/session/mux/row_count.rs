//! `ROW_COUNT()` after a write Sluice wrapped in a transaction of its own
//! (`mux/wrap.rs`): the server's count is then the COMMIT's 0, so the statement after
//! reads the write's own count, as the server would have given it, from Sluice. A query
//! has its calls replaced by that literal (`classify::identity`); an execute of a
//! statement that calls it runs a copy prepared with the literal, closed after.

use super::super::prepared::bind_types;
use super::*;
use crate::classify::identity::rewrite_row_count;
use sluice_wire::statement::set_stmt_id;

impl super::Mux {
    /// The count `ROW_COUNT()` reads in the command at the front of the client buffer,
    /// when Sluice answers it. Commands that leave the server's count as it is (a
    /// prepare, a close, long data) keep it for the next.
    pub(in crate::frontend::session) fn take_wrapped_rows(
        &mut self,
        command: Command,
    ) -> Option<i64> {
        let keeps = matches!(
            command,
            Command::StmtPrepare | Command::StmtClose | Command::StmtSendLongData
        );
        match keeps {
            true => None,
            false => self.wrapped_rows.take(),
        }
    }
}

impl Session {
    /// A command Sluice answers itself (KILL, a refusal, COM_CHANGE_USER) sets the
    /// server's count anew.
    pub(in crate::frontend::session) fn forget_wrapped_rows(&mut self) {
        if let Some(mux) = self.backing.mux_mut() {
            mux.wrapped_rows = None;
        }
    }

    /// The execute of the client's statement `id` at the front of the client buffer
    /// (its statement id already the held connection's) reads `ROW_COUNT()` that Sluice answers: it goes to a copy of the
    /// statement prepared with the count in place of the calls, which has the same
    /// parameters and columns. Without a cursor only, which would outlive the copy.
    pub(in crate::frontend::session) async fn execute_with_row_count(
        &mut self,
        id: u32,
    ) -> Result<(), SessionError> {
        let Some(rows) = self.stmt.prior_rows else {
            return Ok(());
        };
        // Its types may have been put back in: the packet's length now.
        let Some(len) = sluice_wire::packet::Header::parse(&self.client.rbuf).map(|h| h.len) else {
            return Ok(());
        };
        let Some(mux) = self.backing.mux() else {
            return Ok(());
        };
        let Some(stmt) = mux.stmts.get(&id) else {
            return Ok(());
        };
        let (params, types) = (stmt.params, stmt.types.clone());
        let Some(text) = rewrite_row_count(&stmt.text, rows) else {
            return Ok(());
        };
        if self.client.rbuf.len() < HEADER_LEN + len {
            return Ok(());
        }
        let payload = &self.client.rbuf[HEADER_LEN..HEADER_LEN + len];
        if Execute::parse(payload, params).is_none_or(|e| e.flags != 0) {
            return Ok(());
        }
        let binds = Execute::binds_types(payload, params);
        let Some(backend) = self.backing.conn_mut() else {
            return Ok(());
        };
        let copy = match backend.prepare(&text).await {
            Ok((copy, _)) => copy,
            // The statement as the client prepared it answers then, with the server's
            // count.
            Err(Failed::Answered(err)) => {
                tracing::debug!(%err, "a copy answering ROW_COUNT() could not be prepared");
                return Ok(());
            }
            Err(Failed::Broken(e)) => {
                backend.mark_broken();
                return Err(e.into());
            }
        };
        self.stmt.one_off = Some(copy);
        set_stmt_id(&mut self.client.rbuf[HEADER_LEN..], copy);
        // The copy never had the types an earlier execute bound, nor does the client's
        // statement on this connection get the ones this execute binds.
        if let (Some(false), Some(types)) = (binds, types) {
            bind_types(&mut self.client.rbuf, len, params, &types);
        }
        self.backing.muxed_mut().bound = None;
        Ok(())
    }

    /// Closes the copy an execute ran on, once its answer is in.
    pub(in crate::frontend::session) async fn close_one_off(&mut self) -> Result<(), SessionError> {
        let (Some(copy), Some(backend)) = (self.stmt.one_off.take(), self.backing.conn_mut())
        else {
            return Ok(());
        };
        if backend.is_broken() {
            return Ok(());
        }
        close_on(backend, &[copy]).await
    }
}
