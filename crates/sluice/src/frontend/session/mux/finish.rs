//! After a multiplexed statement's response: what the server said it changed is taken
//! into the session, and the connection goes back unless something keeps it.

use super::user_vars::carry_user_vars;
use super::*;
use crate::classify::facts::TextFacts;

impl Session {
    /// After the statement's response: learn what it did, and give the connection back
    /// unless something keeps it.
    pub(in crate::frontend::session) async fn mux_finish(
        &mut self,
        fx: &Effects,
        stmt: &Statement,
    ) -> Result<(), SessionError> {
        let (command, client_id) = (stmt.command, stmt.client_id);
        if self.stmt.one_off.is_some() {
            self.close_one_off().await?;
        }
        let served = self.cache.as_ref().is_some_and(|c| c.served());
        let spread_write =
            self.stmt.target == Some(crate::router::Target::Writer) && self.stmt.spreads_writes;
        if spread_write {
            self.backing.muxed_mut().home = self.member.clone();
        }
        let Some((mux, Some(backend))) = self.backing.mux_and_conn() else {
            return Ok(());
        };
        let observed = std::mem::take(&mut mux.observed);
        if let Some(types) = mux.bound.take().filter(|_| !served) {
            let key = client_id
                .and_then(|id| mux.stmts.get(&id))
                .map(|s| s.key.key());
            if let Some(b) = key.and_then(|k| backend.stmts.get_mut(k)) {
                b.types = Some(types);
            }
        }
        if observed.state_changed {
            backend.vars = mux.vars.clone();
            backend.schema = mux.schema.clone();
        }
        if let Some(gtid) = &observed.last_gtid {
            let router = self.session_router();
            self.note_gtid(&router, gtid);
        }
        let (mux, backend) = self.backing.muxed_with_conn();
        let status = backend.status;
        mux.status = status;
        mux.apply_effects(fx, observed.status.is_some());
        mux.statement_done(fx, status);
        // A lost connection is dropped with whatever tracking it had.
        if (observed.tracking_changed || mux.own_tracking) && !backend.is_broken() {
            match super::super::tracking::leave(backend, mux).await {
                Ok(keep) => mux.pins.tracking = keep,
                Err(e) => {
                    backend.mark_broken();
                    return Err(e);
                }
            }
        }
        mux.own_tracking = false;
        if observed.fixed_variable {
            mux.pins.fixed_variable = true;
        }
        if !fx.user_vars_assigned.is_empty() {
            carry_user_vars(backend, mux, &fx.user_vars_assigned).await?;
        }
        // What the text explains (temporary tables, user variables, SQL prepared
        // statements, handlers) is tracked as such; anything else can't move.
        if observed.bare_state_change && !explains_state_change(fx) {
            mux.pins.unknown_state = true;
        }
        // An insert id in the OK may be generated (the function's new value) or given
        // (no change): the value is read from the connection before leaving it. So is
        // one `LAST_INSERT_ID(expr)` may have set.
        if observed.last_insert_id != 0 || observed.last_insert_id_set || fx.last_insert_id {
            mux.lid_dirty = true;
            backend.last_insert_id = None;
        }
        if leaves_state(command) {
            let floor = self.fe.pool_config.max_prepared_per_connection as usize;
            let text = &mut self.text;
            after_command(backend, mux, stmt, &observed, text, floor).await?;
        }
        let wrote = observed.affected_rows > 0 || observed.last_insert_id != 0;
        // Not while others wait for a connection: they come first.
        if wrote
            && backend.pool().counts().3 == 0
            && !status.in_transaction()
            && !self.fe.pool_config.write_hold.is_zero()
        {
            mux.hold_until = Some(Instant::now() + self.fe.pool_config.write_hold);
        } else {
            mux.hold_until = None;
        }
        if let Some(shards) = self.fe.shards.clone() {
            self.check_spread(&shards).await;
        }
        self.release_if_free().await
    }

    /// Gives the connection back unless the session must keep it; a broken one is
    /// closed. Before leaving, the connection's `LAST_INSERT_ID()` is read if a
    /// statement may have changed it.
    pub(in crate::frontend::session) async fn release_if_free(
        &mut self,
    ) -> Result<(), SessionError> {
        let Some((_, Some(backend))) = self.backing.mux_and_conn() else {
            return Ok(());
        };
        if backend.is_broken() {
            self.backing.drop_conn();
            self.publish();
            return Ok(());
        }
        // Whether the connection goes back or stays (a long transaction), it keeps no
        // statement that no session uses.
        if self.backing.conn().is_some_and(|b| b.stmts.needs_sweep()) {
            self.close_unreferenced().await;
        }
        let (mux, backend) = self.backing.muxed_with_conn();
        let reason = mux.pin_reason(backend.status);
        if reason != mux.pinned_since {
            if let Some(r) = reason {
                self.fe.mux_stats.pin(r);
            }
            mux.pinned_since = reason;
            self.publish();
            let mux = self.backing.muxed_mut();
            if reason.is_some() || mux.hold_until.is_some() {
                return Ok(());
            }
        } else if reason.is_some() || mux.hold_until.is_some() {
            return Ok(());
        }
        let (mux, backend) = self.backing.muxed_with_conn();
        if mux.lid_dirty {
            match backend.query_scalar("SELECT LAST_INSERT_ID()").await {
                Ok(v) => {
                    mux.last_insert_id = v
                        .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
                        .unwrap_or(0);
                    mux.lid_dirty = false;
                    backend.last_insert_id = Some(mux.last_insert_id);
                }
                Err(Failed::Answered(err)) => {
                    tracing::debug!(%err, "LAST_INSERT_ID() unreadable: keeping the connection");
                    return Ok(());
                }
                Err(Failed::Broken(e)) => {
                    // The server went away after answering: the session goes on without
                    // it (the value died with the connection; the last one known stays).
                    tracing::debug!(error = %e, "LAST_INSERT_ID() lost with its server");
                    mux.lid_dirty = false;
                    backend.mark_broken();
                    self.backing.drop_conn();
                    self.publish();
                    return Ok(());
                }
            }
            // Reading it leaves the value where it was on this connection.
        }
        let backend = self.backing.take_conn().expect("checked");
        backend.release();
        Stats::incr(&self.fe.mux_stats.releases);
        self.publish();
        Ok(())
    }

    /// COM_SET_OPTION changed the multi-statement option: the connection is kept.
    pub(in crate::frontend::session) fn mux_pin_option(&mut self) {
        self.backing.muxed_mut().pins.fixed_variable = true;
    }

    /// The write hold ran out while the client was idle.
    pub(in crate::frontend::session) async fn end_hold(&mut self) -> Result<(), SessionError> {
        self.backing.muxed_mut().hold_until = None;
        self.release_if_free().await
    }

    /// Updates the session's row in the registry the admin interface and KILL read.
    pub(in crate::frontend::session) fn publish(&self) {
        match self.backing.conn() {
            Some(b) => self.live.attach(&b.server, b.thread_id),
            None => self.live.detach(),
        }
        self.live
            .pin(self.backing.mux().and_then(|m| m.pinned_since));
    }
}

/// Whether the statement's text says what state it changed, so that the server's bare
/// "state changed" needs no pin of its own.
fn explains_state_change(fx: &Effects) -> bool {
    !fx.temp_created.is_empty()
        || !fx.tables_dropped.is_empty()
        || !fx.user_vars_assigned.is_empty()
        || !fx.sql_prepared.is_empty()
        || !fx.sql_deallocated.is_empty()
        || !fx.handler_opened.is_empty()
        || !fx.handler_closed.is_empty()
}

/// The commands [`after_command`] acts on: checked first so that every other statement
/// skips that step.
fn leaves_state(command: Command) -> bool {
    matches!(
        command,
        Command::StmtPrepare | Command::StmtExecute | Command::StmtFetch | Command::ResetConnection
    )
}

/// What the command itself leaves on the session and its connection: a statement
/// prepared, a cursor opened or read to its end, a reset (what the reply showed and
/// what its text says; `floor`: the statements a connection may keep at least).
async fn after_command(
    backend: &mut crate::backend::PooledConn,
    mux: &mut Mux,
    stmt: &Statement,
    observed: &Observed,
    text: &mut TextFacts,
    floor: usize,
) -> Result<(), SessionError> {
    let status = backend.status;
    match (stmt.command, stmt.client_id) {
        (Command::StmtPrepare, _) => {
            if let (Some(preparing), Some(prepared)) = (mux.preparing.take(), mux.prepared.take()) {
                prepared_here(backend, mux, preparing, text, prepared, floor).await?;
            }
            mux.preparing = None;
        }
        (Command::StmtExecute, Some(id)) => {
            mux.pins.long_data = false;
            if status.contains(StatusFlags::CURSOR_EXISTS) {
                mux.pins.cursors.insert(id);
            } else {
                mux.pins.cursors.remove(&id);
            }
        }
        (Command::StmtFetch, Some(id))
            if status.contains(StatusFlags::LAST_ROW_SENT) || observed.status.is_none() =>
        {
            mux.pins.cursors.remove(&id);
        }
        (Command::ResetConnection, _) => {
            let (key, schema) = (mux.key.clone(), mux.schema.clone());
            mux.reset(key, schema);
            backend.vars.clear();
            backend.stmts.forget_all();
            backend.user_vars.clear();
            backend.last_insert_id = Some(0);
            // The reset turned tracking off on this connection.
            if let Err(e) = backend.start_tracking().await {
                backend.mark_broken();
                return Err(e.into());
            }
            mux.globals = backend.globals.clone();
        }
        _ => {}
    }
    Ok(())
}

/// A statement the server prepared on this connection (`bid`, with `params`): the
/// connection keeps it (closing others past its budget) and the session knows it by the
/// id the client was given.
async fn prepared_here(
    backend: &mut crate::backend::PooledConn,
    mux: &mut Mux,
    Preparing { key, text, id }: Preparing,
    facts: &mut TextFacts,
    (bid, params): (u32, u16),
    floor: usize,
) -> Result<(), SessionError> {
    let max = (backend.stmts.server()).per_connection(floor, backend.server.max_connections);
    // Held before the connection's statement exists, so that no sweep sees it
    // unreferenced.
    let key = crate::backend::refs().hold(key);
    let mut closing = if backend.stmts.contains(key.key()) {
        Vec::new()
    } else {
        backend.stmts.evict_to(max)
    };
    closing.extend(backend.stmts.insert(key.key().into(), bid, params));
    let effects = crate::classify::effects::effects(&text);
    // Routing read the same text, when the session's reads are split.
    let plain_read = crate::router::rules::is_plain_read(&text, &effects, facts.analysis(&text));
    let names_tracking = effects.touches_session_tracking;
    let effects = effects.locks_only();
    mux.stmts.insert(
        id,
        ClientStmt {
            key,
            text,
            params,
            types: None,
            plain_read,
            effects: (effects != Effects::default()).then(|| Box::new(effects)),
            names_tracking,
        },
    );
    close_on(backend, &closing).await?;
    Ok(())
}
