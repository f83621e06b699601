//! Before a multiplexed statement goes out: what it does to the session, which server
//! it goes to, a connection for it brought in line with the session, and its statement
//! id mapped to that connection's.

use super::user_vars::{assignments, user_var_sets};
use super::*;

/// Outcome of getting the statement in the client buffer ready to forward.
pub(in crate::frontend::session) enum Ready {
    /// Forward it.
    Go(Effects),
    /// Answered (or refused) already; the session goes on or not.
    Done(bool),
}

impl Session {
    /// Gets the command at the front of the client buffer ready to go to a backend
    /// connection: reads it whole when small, learns its effects, takes a connection if
    /// the session has none and brings it in line, and maps statement ids.
    pub(in crate::frontend::session) async fn mux_prepare(
        &mut self,
        stmt: &Statement,
        router: &std::sync::Arc<crate::router::Router>,
    ) -> Result<Ready, SessionError> {
        let (command, len) = (stmt.command, stmt.len);
        let whole = len <= MAX_BUFFERED;
        if whole {
            self.client.fill_to(HEADER_LEN + len).await?;
        }
        let visible = self.client.rbuf.len().min(HEADER_LEN + len);
        let fx = self.effects_of(stmt, visible);
        if may_answer_without_connection(command) {
            if let Some(done) = self.answered_without_connection(stmt).await? {
                return Ok(done);
            }
        }
        let is_stmt_command = matches!(
            command,
            Command::StmtExecute
                | Command::StmtFetch
                | Command::StmtReset
                | Command::StmtSendLongData
        );
        let client_id = stmt.client_id.filter(|_| is_stmt_command);
        if is_stmt_command
            && !client_id.is_some_and(|id| self.backing.muxed_mut().stmts.contains_key(&id))
        {
            return self.unknown_statement(command).await;
        }
        let needs_lid = fx.last_insert_id || may_insert(command, &self.client.rbuf[..visible]);
        let executed = client_id.filter(|_| command == Command::StmtExecute);
        let routed = match self.route(router, command, &fx, visible, executed) {
            Ok(r) => r,
            Err(err) => return self.refuse_and_release(&err).await,
        };
        self.stmt.timeout = routed.timeout;
        self.stmt.target = Some(routed.target.clone());
        self.stmt.spreads_writes = router.multi_writer();
        if let Err(failed) = self.acquire(needs_lid, router, routed.target).await {
            return self.refuse_and_release(&failed.answered()?).await;
        }
        if command == Command::StmtPrepare {
            if let Err(failed) = self.begin_prepare(visible).await {
                return self.refuse_and_release(&failed.answered()?).await;
            }
        }
        if let Some(id) = client_id {
            if let Some(done) = self.map_client_statement(stmt, id, whole).await? {
                return Ok(done);
            }
        }
        if let Some(err) = self.enter_tracking(&fx, executed).await {
            self.backing.close_conn();
            let seq = self.client.skip_packet().await?;
            self.client.write_err(seq, &err).await?;
            return Ok(Ready::Done(true));
        }
        self.backing.muxed_mut().observed = Observed::default();
        Ok(Ready::Go(fx))
    }

    /// What running the command does to state that can't move (`visible`: how much of
    /// the packet is in the buffer).
    fn effects_of(&mut self, stmt: &Statement, visible: usize) -> Effects {
        match stmt.command {
            Command::Query => {
                let mut fx =
                    crate::classify::effects::effects(&self.client.rbuf[HEADER_LEN + 1..visible]);
                fx.row_count |= self.stmt.row_count_answered;
                fx
            }
            // A prepared LOCK TABLES or GET_LOCK holds what the same text would.
            Command::StmtExecute => {
                match stmt
                    .client_id
                    .and_then(|id| self.backing.muxed_mut().stmts.get(&id))
                {
                    Some(prepared) => prepared.effects.as_deref().cloned().unwrap_or_default(),
                    None => Effects::default(),
                }
            }
            _ => Effects::default(),
        }
    }

    /// Commands Sluice answers itself when the session holds no connection: a close,
    /// a ping, a reset, a statement reset (the commands of
    /// [`may_answer_without_connection`]). `None`: the command goes on to a server.
    async fn answered_without_connection(
        &mut self,
        stmt: &Statement,
    ) -> Result<Option<Ready>, SessionError> {
        match stmt.command {
            Command::StmtClose => {
                // Dropping the statement's reference to its text lets the connections
                // close theirs, unless another session's statement refers to it too.
                if let Some(id) = stmt.client_id {
                    let mux = self.backing.muxed_mut();
                    mux.stmts.remove(&id);
                    mux.pins.cursors.remove(&id);
                    if let Some(c) = self.cache.as_mut() {
                        c.forget_statement(id);
                    }
                }
                self.client.skip_packet().await?;
            }
            Command::Ping if self.backing.conn().is_none() => {
                // Sluice is up and a connection will be found when there is work.
                let status = self.backing.muxed_mut().status;
                self.answer_ok(status).await?;
            }
            Command::ResetConnection if self.backing.conn().is_none() => {
                let (key, schema) = {
                    let m = self.backing.muxed_mut();
                    (m.key.clone(), m.schema.clone())
                };
                self.backing.muxed_mut().reset(key, schema);
                if let Some(c) = self.cache.as_mut() {
                    c.reset(None);
                }
                self.answer_ok(StatusFlags(StatusFlags::AUTOCOMMIT)).await?;
            }
            Command::StmtReset if self.backing.conn().is_none() => {
                // Nothing of it lives on a connection: no cursor, no long data.
                let known = stmt
                    .client_id
                    .is_some_and(|id| self.backing.muxed_mut().stmts.contains_key(&id));
                if !known {
                    return self.unknown_statement(Command::StmtReset).await.map(Some);
                }
                let status = self.backing.muxed_mut().status;
                self.answer_ok(status).await?;
            }
            _ => return Ok(None),
        }
        Ok(Some(Ready::Done(true)))
    }

    /// The command in the buffer is answered OK with `status`, without a server.
    async fn answer_ok(&mut self, status: StatusFlags) -> Result<(), SessionError> {
        let seq = self.client.skip_packet().await?;
        let ok = OkPacket {
            status,
            ..Default::default()
        };
        self.client.write_ok(seq, &ok).await?;
        Ok(())
    }

    /// A `COM_STMT_*` naming an id never handed out: the server's answer, without
    /// asking it (a long data packet gets none).
    async fn unknown_statement(&mut self, command: Command) -> Result<Ready, SessionError> {
        let what = match command {
            Command::StmtExecute => "mysqld_stmt_execute",
            Command::StmtFetch => "mysqld_stmt_fetch",
            Command::StmtReset => "mysqld_stmt_reset",
            _ => "mysqld_stmt_send_long_data",
        };
        let seq = self.client.skip_packet().await?;
        if command != Command::StmtSendLongData {
            self.client.write_err(seq, &unknown_statement(what)).await?;
        }
        Ok(Ready::Done(true))
    }

    /// The command is answered with `err` instead of running, and a connection the
    /// session no longer needs goes back.
    async fn refuse_and_release(&mut self, err: &ErrPacket) -> Result<Ready, SessionError> {
        let seq = self.client.skip_packet().await?;
        self.client.write_err(seq, err).await?;
        self.release_if_free().await?;
        Ok(Ready::Done(true))
    }

    /// A COM_STMT_PREPARE about to run: the id the client will know it by, and room for
    /// it on the connection. `Err`: no room (the server's limit would refuse it).
    async fn begin_prepare(&mut self, visible: usize) -> Result<(), Failed> {
        let text: Box<[u8]> = self.client.rbuf[HEADER_LEN + 1..visible].into();
        let key = stmt_key(self.backing.muxed_mut().schema.as_deref(), &text);
        // Preparing a text this connection has replaces its statement: no room needed.
        let replaces = self.backing.conn().is_some_and(|b| b.stmts.contains(&key));
        if !replaces {
            self.room_for_statement(false).await?;
        }
        let mux = self.backing.muxed_mut();
        let id = mux.next_stmt;
        mux.next_stmt = mux.next_stmt.wrapping_add(1).max(1);
        mux.preparing = Some(Preparing { key, text, id });
        mux.prepared = None;
        Ok(())
    }

    /// The client's statement `id` in the command becomes the connection's own (prepared
    /// here first if needed). `Some`: the command was answered instead (a reset of a
    /// statement never run here, or a failure to prepare it).
    async fn map_client_statement(
        &mut self,
        stmt: &Statement,
        id: u32,
        whole: bool,
    ) -> Result<Option<Ready>, SessionError> {
        let (command, len) = (stmt.command, stmt.len);
        if !whole && command == Command::StmtExecute {
            // Streamed: only its head, up to the parameter types, is looked at.
            let params = self
                .backing
                .muxed_mut()
                .stmts
                .get(&id)
                .map_or(0, |s| s.params);
            let head = Execute::head_len(params).min(len);
            self.client.fill_to(HEADER_LEN + head).await?;
        }
        match self.map_statement(id, command, len).await {
            Ok(true) if command == Command::StmtExecute => {
                self.execute_with_row_count(id).await?;
                Ok(None)
            }
            Ok(true) => Ok(None),
            Ok(false) => {
                let status = self.backing.muxed_mut().status;
                self.answer_ok(status).await?;
                self.release_if_free().await?;
                Ok(Some(Ready::Done(true)))
            }
            Err(failed) => self.refuse_and_release(&failed.answered()?).await.map(Some),
        }
    }

    /// Brings the connection's session tracking in line for the statement (`executed`:
    /// the client's id of the statement an execute runs). `Some`: the connection
    /// can't be used, with the error the client gets.
    async fn enter_tracking(&mut self, fx: &Effects, executed: Option<u32>) -> Option<ErrPacket> {
        let (mux, backend) = self.backing.muxed_with_conn();
        let names_tracking = fx.touches_session_tracking
            || executed.is_some_and(|id| mux.stmts.get(&id).is_some_and(|s| s.names_tracking));
        let entered = super::super::tracking::enter(backend, mux, names_tracking).await;
        entered.err().map(|failed| failed.to_err_packet())
    }

    /// Makes sure the session has a connection whose state is its own. Answered: the
    /// connection could not be had, or brought in line.
    /// `needs_lid`: the statement reads or may change `LAST_INSERT_ID()`, so the
    /// connection must hold the session's value first.
    pub(super) async fn acquire(
        &mut self,
        needs_lid: bool,
        router: &std::sync::Arc<crate::router::Router>,
        target: crate::router::Target,
    ) -> Result<(), Failed> {
        if self.backing.conn().is_some() {
            self.leave_for(router, &target).await?;
        }
        if self.backing.conn().is_none() {
            self.lease_for(router, target).await?;
        }
        // The usual case, a connection this session just gave back or one like it,
        // is told apart without entering either step.
        let (globals, state) = {
            let (mux, backend) = self.backing.muxed_with_conn();
            (
                super::super::globals::globals_match(backend, mux),
                in_line(backend, mux, needs_lid),
            )
        };
        if globals && state {
            return Ok(());
        }
        let at = super::super::traced::mark(&self.stmt);
        let synced = self.sync_session(globals, needs_lid).await;
        self.stmt.stage("session sync", at, Vec::new());
        synced
    }

    /// The server's globals (when they changed since the connection's login) and the
    /// session's own state brought onto the connection in hand.
    async fn sync_session(&mut self, globals: bool, needs_lid: bool) -> Result<(), Failed> {
        if !globals {
            if let Err(e) = self.align_globals().await {
                self.backing.close_conn();
                return Err(Failed::Answered(e.to_err_packet()));
            }
        }
        self.bring_in_line(needs_lid).await
    }

    /// A connection kept only by a write hold on another server than the one the
    /// statement must go to is given back first; a pinned one stays, whatever the
    /// statement (the state it holds can't move). During a switchover, a connection on
    /// the writer is given back too, so that the old writer drains and the statement
    /// waits for the new one.
    async fn leave_for(
        &mut self,
        router: &crate::router::Router,
        target: &crate::router::Target,
    ) -> Result<(), SessionError> {
        let switching = router.paused.load(std::sync::atomic::Ordering::Acquire);
        if !switching && self.held_fits(router, target) {
            return Ok(());
        }
        let Some((mux, Some(backend))) = self.backing.mux_and_conn() else {
            return Ok(());
        };
        if mux.pin_reason(backend.status).is_none() {
            mux.hold_until = None;
            self.release_if_free().await?;
        }
        Ok(())
    }

    /// Whether the connection in hand is on a server `target` may run on. A read may run
    /// on the writer, where the session's own writes are; a statement a rule sends to a
    /// group, or one for another Galera node, may not run where a write left the session.
    fn held_fits(&self, router: &crate::router::Router, target: &crate::router::Target) -> bool {
        use crate::router::{NodeRef, Target};
        let here = self.member.as_ref();
        match target {
            Target::Writer => self.on_writer(router),
            Target::Reader { .. } => true,
            Target::Group(g) => here.is_some_and(|m| m.groups.iter().any(|x| **x == **g)),
            Target::Node(NodeRef(node)) => here.is_some_and(|m| std::sync::Arc::ptr_eq(m, node)),
        }
    }

    /// Leases a connection for `target` when the session has none: the one nearest the
    /// session's state, whose grants fit, on a replica caught up with what the session
    /// must see (else on the writer).
    async fn lease_for(
        &mut self,
        router: &crate::router::Router,
        mut target: crate::router::Target,
    ) -> Result<(), Failed> {
        while self.backing.conn().is_none() {
            let m = self.backing.muxed();
            // Same schema and variables: nothing to send before the statement.
            let same_globals = |c: &crate::backend::BackendConn| match (&c.globals, &m.globals) {
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                _ => true,
            };
            let score = |c: &crate::backend::BackendConn| {
                u32::from(c.schema == m.schema) * 2 + u32::from(c.vars == m.vars && same_globals(c))
            };
            let at = super::super::traced::mark(&self.stmt);
            let leased = router
                .lease(
                    &target,
                    self.stmt.avoid.as_slice(),
                    &m.key,
                    m.schema.as_deref(),
                    score,
                    3,
                )
                .await;
            let pick = match leased {
                Ok((conn, pick)) => {
                    if at.is_some() {
                        let attributes = queue_wait(&conn);
                        self.stmt.stage("queue wait", at, attributes);
                    }
                    Stats::incr(&self.fe.mux_stats.leases);
                    self.backing.hold(conn);
                    pick
                }
                Err(e) => {
                    tracing::debug!(error = %e, "no backend connection for a statement");
                    return Err(Failed::Answered(e.to_err_packet()));
                }
            };
            self.publish();
            let serve = {
                let (mux, backend) = self.backing.muxed_with_conn();
                super::super::grants::grants_serve(backend, mux)
            };
            let fit = match serve {
                true => Ok(true),
                false => self.mux_grants_fit().await,
            };
            match fit {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    self.backing.close_conn();
                    return Err(Failed::Answered(e.to_err_packet()));
                }
            }
            if let Some(need) = &pick.wait_for {
                if !self.wait_for_gtid(router, &pick.member, need).await {
                    // Not caught up in time: the writer has it.
                    if let Some(b) = self.backing.take_conn() {
                        b.release();
                    }
                    target = crate::router::Target::Writer;
                    continue;
                }
            }
            super::super::route::count(router, &pick.member, &target);
            self.member = Some(pick.member);
        }
        Ok(())
    }

    /// The connection's schema, variables, user variables and `LAST_INSERT_ID()` made
    /// the session's, in at most two statements.
    async fn bring_in_line(&mut self, needs_lid: bool) -> Result<(), Failed> {
        let (mux, backend) = self.backing.muxed_with_conn();
        let mut statements = 0;
        if backend.schema != mux.schema {
            if let Some(db) = mux.schema.clone() {
                statements += 1;
                if let Err(failed) = backend.init_db(&db).await {
                    if failed.is_broken() {
                        self.backing.close_conn();
                    }
                    return Err(Failed::Answered(failed.to_err_packet()));
                }
            }
        }
        let (mux, backend) = self.backing.muxed_with_conn();
        let lid = lid_to_set(backend, mux, needs_lid);
        let user_sets = user_var_sets(&mux.user_vars, &backend.user_vars);
        let sync = sync_statement(
            &mux.vars,
            &backend.vars,
            &backend.login_vars,
            backend.globals.as_deref(),
            lid,
        );
        let sync = match (sync, user_sets.is_empty()) {
            (sync, true) => sync,
            (Some(sql), false) => Some(format!("{sql}, {}", assignments(&user_sets))),
            (None, false) => Some(format!("SET {}", assignments(&user_sets))),
        };
        if let Some(sql) = sync {
            statements += 1;
            match backend.simple_query(&sql).await {
                Ok(_) => {
                    backend.vars = mux.vars.clone();
                    if lid.is_some() {
                        backend.last_insert_id = lid;
                    }
                    for (name, literal) in user_sets {
                        backend.user_vars.insert(name, literal);
                    }
                }
                Err(failed) => {
                    if let Failed::Answered(err) = &failed {
                        tracing::warn!(%err, "could not bring a backend connection in line with a session");
                    }
                    self.backing.close_conn();
                    return Err(Failed::Answered(failed.to_err_packet()));
                }
            }
        }
        if statements > 0 {
            Stats::incr(&self.fe.mux_stats.syncs);
            Stats::add(&self.fe.mux_stats.sync_statements, statements);
        }
        Ok(())
    }

    /// Rewrites the client's statement id in the command at the front of the buffer to
    /// this connection's backend statement, preparing it here first if needed, and puts
    /// the parameter types back in an execute when the backend statement lacks them.
    /// False: a reset of a statement this connection never ran, answered OK here.
    async fn map_statement(
        &mut self,
        id: u32,
        command: Command,
        len: usize,
    ) -> Result<bool, Failed> {
        self.backing.muxed_mut().bound = None;
        let mut prepared = false;
        loop {
            let (mux, backend) = self.backing.muxed_with_conn();
            let key = mux.stmts.get(&id).expect("checked by the caller").key.key();
            // One lookup of the connection's statement on the usual path, where it is
            // there already: its id and the types it has bound are read together.
            if let Some(here) = backend.stmts.touch(key) {
                let (here_id, here_types) = (here.id, here.types.as_deref());
                return bind_here(
                    mux,
                    id,
                    here_id,
                    here_types,
                    &mut self.client.rbuf,
                    len,
                    command,
                )
                .map(|()| true);
            }
            if command == Command::StmtReset {
                return Ok(false);
            }
            assert!(!prepared, "a statement just prepared here is found here");
            self.prepare_here(id).await?;
            prepared = true;
        }
    }
}

/// [`Session::map_statement`] once the connection's statement `here_id` is known: the
/// client's id in the command replaced by it, the parameter types put back in an
/// execute when the connection's statement has others (`here_types`), and what the
/// command leaves on the session noted.
fn bind_here(
    mux: &mut Mux,
    id: u32,
    here_id: u32,
    here_types: Option<&[u8]>,
    rbuf: &mut bytes::BytesMut,
    len: usize,
    command: Command,
) -> Result<(), Failed> {
    let stmt = mux.stmts.get_mut(&id).expect("checked by the caller");
    put_stmt_id(rbuf, here_id);
    match command {
        Command::StmtExecute => {
            let seen = len.min(rbuf.len() - HEADER_LEN);
            let payload = &rbuf[HEADER_LEN..HEADER_LEN + seen];
            match Execute::binds_types(payload, stmt.params) {
                Some(true) => {
                    let types = Execute::parse(payload, stmt.params).and_then(|e| e.types);
                    if let Some(t) = types {
                        stmt.note_types(t);
                        if here_types != Some(t) {
                            mux.bound = Some(t.to_vec());
                        }
                    }
                }
                Some(false) if here_types != stmt.types.as_deref() => {
                    if let Some(types) = stmt.types.clone() {
                        if seen < len {
                            // Too large to rebuild; rare: a huge execute that relies
                            // on types bound by an execute that ran elsewhere.
                            return Err(Failed::Answered(ErrPacket::new(
                                code::ER_NET_PACKET_TOO_LARGE,
                                "08S01",
                                "Sluice: an execute over 1 MiB must carry its \
                                 parameter types when multiplexed",
                            )));
                        }
                        super::super::prepared::bind_types(rbuf, len, stmt.params, &types);
                        mux.bound = Some(types);
                    }
                }
                _ => {}
            }
        }
        Command::StmtSendLongData => mux.pins.long_data = true,
        Command::StmtReset => {
            mux.pins.long_data = false;
            mux.pins.cursors.remove(&id);
        }
        _ => {}
    }
    Ok(())
}

/// What a statement's `queue wait` says of the connection it waited for: its server,
/// and whether it was opened for it (the wait then holds the connect and login).
fn queue_wait(conn: &crate::backend::BackendConn) -> Vec<(&'static str, crate::trace::Value)> {
    use crate::trace::Value;
    vec![
        (
            "server.address",
            Value::Str(conn.server.endpoint.to_string()),
        ),
        ("sluice.pool.opened", Value::Bool(conn.fresh)),
    ]
}

/// Whether the connection already holds the session's schema, variables, user variables
/// and, when the statement needs it, `LAST_INSERT_ID()`: [`Session::bring_in_line`] would
/// send nothing.
fn in_line(backend: &crate::backend::BackendConn, mux: &Mux, needs_lid: bool) -> bool {
    backend.schema == mux.schema
        && backend.vars == mux.vars
        && mux.user_vars.is_empty()
        && backend.user_vars.is_empty()
        && lid_to_set(backend, mux, needs_lid).is_none()
}

/// The session's `LAST_INSERT_ID()` when the statement needs it and the connection holds
/// another value.
fn lid_to_set(backend: &crate::backend::BackendConn, mux: &Mux, needs_lid: bool) -> Option<u64> {
    (needs_lid && !mux.lid_dirty && backend.last_insert_id != Some(mux.last_insert_id))
        .then_some(mux.last_insert_id)
}

impl Session {
    /// The backend statement of the client's statement `id` on the held connection,
    /// prepared there first if it has none.
    pub(super) async fn statement_here(&mut self, id: u32) -> Result<u32, Failed> {
        let found = {
            let (mux, backend) = self.backing.mux_and_conn().expect("multiplexed");
            let Some(stmt) = mux.stmts.get(&id) else {
                return Err(Failed::Answered(unknown_statement("EXECUTE")));
            };
            let backend = backend.expect("acquired");
            backend.stmts.touch(stmt.key.key()).map(|b| b.id)
        };
        match found {
            Some(bid) => Ok(bid),
            None => self.prepare_here(id).await,
        }
    }

    /// Prepares the client's statement `id` on the held connection, which lacks it.
    async fn prepare_here(&mut self, id: u32) -> Result<u32, Failed> {
        self.room_for_statement(true).await?;
        let floor = self.fe.pool_config.max_prepared_per_connection as usize;
        let (mux, backend) = self.backing.muxed_with_conn();
        let stmt = (mux.stmts).get_mut(&id).expect("checked by the caller");
        Stats::incr(&self.fe.mux_stats.reprepares);
        let marked = crate::binlog::origin::mark(&stmt.text, backend.thread_id)
            .filter(|_| self.fe.shards.is_none() && self.fe.router.load().settles_lost_commits());
        let (bid, params) = match backend
            .prepare(marked.as_deref().unwrap_or(&stmt.text))
            .await
        {
            Ok(p) => p,
            // Nothing of the client's command was sent: it gets an error and the
            // session goes on (its server may just have died).
            Err(failed) => return Err(Failed::Answered(backend.answer_for(failed))),
        };
        stmt.params = params;
        let max = (backend.stmts.server()).per_connection(floor, backend.server.max_connections);
        let evicted = backend.stmts.evict_to(max);
        backend.stmts.insert(stmt.key.key().into(), bid, params);
        close_on(backend, &evicted).await?;
        Ok(bid)
    }
}

/// The commands [`Session::answered_without_connection`] may answer: checked first so
/// that every other statement skips that step.
fn may_answer_without_connection(command: Command) -> bool {
    matches!(
        command,
        Command::StmtClose | Command::Ping | Command::ResetConnection | Command::StmtReset
    )
}

/// Whether a command may generate an insert id (so `LAST_INSERT_ID()` must be the
/// session's before it runs): INSERT, REPLACE, LOAD DATA, CALL, a multi-statement, or an
/// execute (whose text was seen at prepare time; checked cheaply by assuming it may).
fn may_insert(command: Command, packet: &[u8]) -> bool {
    match command {
        Command::StmtExecute => true,
        Command::Query => {
            let text = packet.get(HEADER_LEN + 1..).unwrap_or_default();
            let start = text
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(text.len());
            let head = &text[start..text.len().min(start + 8)];
            let starts =
                |kw: &[u8]| head.len() >= kw.len() && head[..kw.len()].eq_ignore_ascii_case(kw);
            !head.first().is_some_and(u8::is_ascii_alphabetic)
                || starts(b"INSERT")
                || starts(b"REPLACE")
                || starts(b"LOAD")
                || starts(b"CALL")
                || text.contains(&b';')
        }
        _ => false,
    }
}

fn put_stmt_id(buf: &mut [u8], id: u32) {
    statement::set_stmt_id(&mut buf[HEADER_LEN..], id);
}

/// The key a connection's backend statement is found by: schema and text.
fn stmt_key(schema: Option<&[u8]>, text: &[u8]) -> Box<[u8]> {
    let schema = schema.unwrap_or(b"");
    let mut k = Vec::with_capacity(schema.len() + 1 + text.len());
    k.extend_from_slice(schema);
    k.push(0);
    k.extend_from_slice(text);
    k.into()
}

/// The server's error for a statement id it does not know.
fn unknown_statement(what: &str) -> ErrPacket {
    ErrPacket::new(
        code::ER_UNKNOWN_STMT_HANDLER,
        "HY000",
        format!("Unknown prepared statement handler given to {what}"),
    )
}
