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
        let fx = match command {
            Command::Query => {
                let mut fx =
                    crate::classify::effects::effects(&self.client.rbuf[HEADER_LEN + 1..visible]);
                fx.row_count |= self.stmt.row_count_answered;
                fx
            }
            // A prepared LOCK TABLES or GET_LOCK holds what the same text would.
            Command::StmtExecute => {
                let id = stmt.client_id;
                match id.and_then(|id| self.backing.muxed_mut().stmts.get(&id)) {
                    Some(stmt) => stmt.effects.clone(),
                    None => Effects::default(),
                }
            }
            _ => Effects::default(),
        };
        match command {
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
                return Ok(Ready::Done(true));
            }
            Command::Ping if self.backend.is_none() => {
                // Sluice is up and a connection will be found when there is work.
                let seq = self.client.skip_packet().await?;
                let ok = OkPacket {
                    status: self.backing.muxed_mut().status,
                    ..Default::default()
                };
                self.client.write_ok(seq, &ok).await?;
                return Ok(Ready::Done(true));
            }
            Command::ResetConnection if self.backend.is_none() => {
                let seq = self.client.skip_packet().await?;
                let (key, schema) = {
                    let m = self.backing.muxed_mut();
                    (m.key.clone(), m.schema.clone())
                };
                self.backing.muxed_mut().reset(key, schema);
                if let Some(c) = self.cache.as_mut() {
                    c.reset(None);
                }
                let ok = OkPacket {
                    status: StatusFlags(StatusFlags::AUTOCOMMIT),
                    ..Default::default()
                };
                self.client.write_ok(seq, &ok).await?;
                return Ok(Ready::Done(true));
            }
            Command::StmtReset if self.backend.is_none() => {
                // Nothing of it lives on a connection: no cursor, no long data.
                let known = stmt
                    .client_id
                    .is_some_and(|id| self.backing.muxed_mut().stmts.contains_key(&id));
                let seq = self.client.skip_packet().await?;
                if known {
                    let ok = OkPacket {
                        status: self.backing.muxed_mut().status,
                        ..Default::default()
                    };
                    self.client.write_ok(seq, &ok).await?;
                } else {
                    self.client
                        .write_err(seq, &unknown_statement("mysqld_stmt_reset"))
                        .await?;
                }
                return Ok(Ready::Done(true));
            }
            _ => {}
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
            // An id never handed out: the server's answer, without asking it.
            let what = match command {
                Command::StmtExecute => "mysqld_stmt_execute",
                Command::StmtFetch => "mysqld_stmt_fetch",
                Command::StmtReset => "mysqld_stmt_reset",
                _ => "mysqld_stmt_send_long_data",
            };
            let no_reply = command == Command::StmtSendLongData;
            let seq = self.client.skip_packet().await?;
            if !no_reply {
                self.client.write_err(seq, &unknown_statement(what)).await?;
            }
            return Ok(Ready::Done(true));
        }
        let needs_lid = fx.last_insert_id || may_insert(command, &self.client.rbuf[..visible]);
        let executed = client_id.filter(|_| command == Command::StmtExecute);
        let routed = match self.route(router, command, &fx, visible, executed) {
            Ok(r) => r,
            Err(err) => {
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, &err).await?;
                self.release_if_free().await?;
                return Ok(Ready::Done(true));
            }
        };
        self.stmt.timeout = routed.timeout;
        self.stmt.target = Some(routed.target.clone());
        match self.acquire(needs_lid, router, routed.target).await? {
            Ok(()) => {}
            Err(answer) => {
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, &answer).await?;
                self.release_if_free().await?;
                return Ok(Ready::Done(true));
            }
        }
        if command == Command::StmtPrepare {
            let text: Box<[u8]> = self.client.rbuf[HEADER_LEN + 1..visible].into();
            let key = stmt_key(self.backing.muxed_mut().schema.as_deref(), &text);
            // Preparing a text this connection has replaces its statement: no room needed.
            let replaces = self
                .backend
                .as_ref()
                .is_some_and(|b| b.stmts.contains(&key));
            if !replaces {
                if let Err(err) = self.room_for_statement(false).await? {
                    let seq = self.client.skip_packet().await?;
                    self.client.write_err(seq, &err).await?;
                    self.release_if_free().await?;
                    return Ok(Ready::Done(true));
                }
            }
            let mux = self.backing.muxed_mut();
            let id = mux.next_stmt;
            mux.next_stmt = mux.next_stmt.wrapping_add(1).max(1);
            mux.preparing = Some(Preparing { key, text, id });
            mux.prepared = None;
        }
        if let Some(id) = client_id {
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
            match self.map_statement(id, command, len).await? {
                Ok(true) if command == Command::StmtExecute => {
                    self.execute_with_row_count(id).await?;
                }
                Ok(true) => {}
                Ok(false) => {
                    let seq = self.client.skip_packet().await?;
                    let ok = OkPacket {
                        status: self.backing.muxed_mut().status,
                        ..Default::default()
                    };
                    self.client.write_ok(seq, &ok).await?;
                    self.release_if_free().await?;
                    return Ok(Ready::Done(true));
                }
                Err(err) => {
                    let seq = self.client.skip_packet().await?;
                    self.client.write_err(seq, &err).await?;
                    self.release_if_free().await?;
                    return Ok(Ready::Done(true));
                }
            }
        }
        let backend = self.backend.as_mut().expect("acquired");
        let mux = self.backing.muxed_mut();
        let names_tracking = fx.touches_session_tracking
            || executed.is_some_and(|id| mux.stmts.get(&id).is_some_and(|s| s.names_tracking));
        let entered = super::super::tracking::enter(backend, mux, names_tracking).await;
        let refused = match entered {
            Ok(Ok(())) => None,
            Ok(Err(err)) => Some(err),
            Err(e) => Some(e.to_err_packet()),
        };
        if let Some(err) = refused {
            backend.mark_broken();
            self.backend = None;
            let seq = self.client.skip_packet().await?;
            self.client.write_err(seq, &err).await?;
            return Ok(Ready::Done(true));
        }
        self.backing.muxed_mut().observed = Observed::default();
        Ok(Ready::Go(fx))
    }

    /// Makes sure the session has a connection whose state is its own. The inner error
    /// is for the client (the connection could not be had, or brought in line).
    /// `needs_lid`: the statement reads or may change `LAST_INSERT_ID()`, so the
    /// connection must hold the session's value first.
    pub(super) async fn acquire(
        &mut self,
        needs_lid: bool,
        router: &std::sync::Arc<crate::router::Router>,
        mut target: crate::router::Target,
    ) -> Result<Result<(), ErrPacket>, SessionError> {
        use crate::router::Target;
        // A connection kept only by a write hold on another server than the one the
        // statement must go to is given back first; a pinned one stays, whatever the
        // statement (the state it holds can't move).
        // During a switchover, a connection on the writer is given back too, so that
        // the old writer drains and the statement waits for the new one.
        let switching = router.paused.load(std::sync::atomic::Ordering::Acquire);
        if self.backend.is_some()
            && (switching || target == Target::Writer && !self.on_writer(router))
        {
            let pinned = {
                let m = self.backing.muxed();
                let status = self.backend.as_ref().expect("checked").status;
                m.pin_reason(status).is_some()
            };
            if !pinned {
                self.backing.muxed_mut().hold_until = None;
                self.release_if_free().await?;
            }
        }
        while self.backend.is_none() {
            let m = self.backing.muxed();
            // Same schema and variables: nothing to send before the statement.
            let same_globals = |c: &crate::backend::BackendConn| match (&c.globals, &m.globals) {
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                _ => true,
            };
            let score = |c: &crate::backend::BackendConn| {
                u32::from(c.schema == m.schema) * 2 + u32::from(c.vars == m.vars && same_globals(c))
            };
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
                    Stats::incr(&self.fe.mux_stats.leases);
                    self.backend = Some(conn);
                    pick
                }
                Err(e) => {
                    tracing::debug!(error = %e, "no backend connection for a statement");
                    return Ok(Err(e.to_err_packet()));
                }
            };
            self.publish();
            match self.mux_grants_fit().await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    if let Some(b) = self.backend.as_mut() {
                        b.mark_broken();
                    }
                    self.backend = None;
                    return Ok(Err(e.to_err_packet()));
                }
            }
            if let Some(need) = &pick.wait_for {
                if !self.wait_for_gtid(router, &pick.member, need).await {
                    // Not caught up in time: the writer has it.
                    if let Some(b) = self.backend.take() {
                        b.release();
                    }
                    target = Target::Writer;
                    continue;
                }
            }
            super::super::route::count(router, &pick.member, &target);
            self.member = Some(pick.member);
        }
        if let Err(e) = self.align_globals().await {
            if let Some(b) = self.backend.as_mut() {
                b.mark_broken();
            }
            self.backend = None;
            return Ok(Err(e.to_err_packet()));
        }
        let backend = self.backend.as_mut().expect("just taken");
        let mux = self.backing.muxed_mut();
        let mut statements = 0;
        if backend.schema != mux.schema {
            if let Some(db) = mux.schema.clone() {
                statements += 1;
                match backend.init_db(&db).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => return Ok(Err(err)),
                    Err(e) => {
                        backend.mark_broken();
                        self.backend = None;
                        return Ok(Err(e.to_err_packet()));
                    }
                }
            }
        }
        let lid =
            (needs_lid && !mux.lid_dirty && backend.last_insert_id != Some(mux.last_insert_id))
                .then_some(mux.last_insert_id);
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
                Ok(Ok(_)) => {
                    backend.vars = mux.vars.clone();
                    if lid.is_some() {
                        backend.last_insert_id = lid;
                    }
                    for (name, literal) in user_sets {
                        backend.user_vars.insert(name, literal);
                    }
                }
                Ok(Err(err)) => {
                    tracing::warn!(%err, "could not bring a backend connection in line with a session");
                    backend.mark_broken();
                    self.backend = None;
                    return Ok(Err(err));
                }
                Err(e) => {
                    backend.mark_broken();
                    self.backend = None;
                    return Ok(Err(e.to_err_packet()));
                }
            }
        }
        if statements > 0 {
            Stats::incr(&self.fe.mux_stats.syncs);
            Stats::add(&self.fe.mux_stats.sync_statements, statements);
        }
        Ok(Ok(()))
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
    ) -> Result<Result<bool, ErrPacket>, SessionError> {
        let found = {
            let mux = self.backing.muxed();
            let key = mux.stmts.get(&id).expect("checked by the caller").key.key();
            let backend = self.backend.as_mut().expect("acquired");
            backend.stmts.touch(key).map(|b| b.id)
        };
        self.backing.muxed_mut().bound = None;
        let backend_id = match found {
            Some(id) => id,
            None if command == Command::StmtReset => return Ok(Ok(false)),
            None => match self.prepare_here(id).await? {
                Ok(bid) => bid,
                Err(err) => return Ok(Err(err)),
            },
        };
        let backend = self.backend.as_mut().expect("acquired");
        let mux = self.backing.muxed_mut();
        let stmt = mux.stmts.get_mut(&id).expect("checked by the caller");
        put_stmt_id(&mut self.client.rbuf, backend_id);
        match command {
            Command::StmtExecute => {
                let bstmt = backend.stmts.get(stmt.key.key()).expect("just found");
                let seen = len.min(self.client.rbuf.len() - HEADER_LEN);
                let payload = &self.client.rbuf[HEADER_LEN..HEADER_LEN + seen];
                match Execute::binds_types(payload, stmt.params) {
                    Some(true) => {
                        let types = Execute::parse(payload, stmt.params).and_then(|e| e.types);
                        if let Some(t) = types {
                            stmt.note_types(t);
                            if bstmt.types.as_deref() != Some(t) {
                                mux.bound = Some(t.to_vec());
                            }
                        }
                    }
                    Some(false) if bstmt.types != stmt.types => {
                        if let Some(types) = stmt.types.clone() {
                            if seen < len {
                                // Too large to rebuild; rare: a huge execute that relies
                                // on types bound by an execute that ran elsewhere.
                                return Ok(Err(ErrPacket::new(
                                    code::ER_NET_PACKET_TOO_LARGE,
                                    "08S01",
                                    "Sluice: an execute over 1 MiB must carry its \
                                     parameter types when multiplexed",
                                )));
                            }
                            super::super::prepared::bind_types(
                                &mut self.client.rbuf,
                                len,
                                stmt.params,
                                &types,
                            );
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
        Ok(Ok(true))
    }
}

impl Session {
    /// The backend statement of the client's statement `id` on the held connection,
    /// prepared there first if it has none.
    pub(super) async fn statement_here(
        &mut self,
        id: u32,
    ) -> Result<Result<u32, ErrPacket>, SessionError> {
        let found = {
            let Some(stmt) = self.backing.muxed().stmts.get(&id) else {
                return Ok(Err(unknown_statement("EXECUTE")));
            };
            let backend = self.backend.as_mut().expect("acquired");
            backend.stmts.touch(stmt.key.key()).map(|b| b.id)
        };
        match found {
            Some(bid) => Ok(Ok(bid)),
            None => self.prepare_here(id).await,
        }
    }

    /// Prepares the client's statement `id` on the held connection, which lacks it.
    async fn prepare_here(&mut self, id: u32) -> Result<Result<u32, ErrPacket>, SessionError> {
        if let Err(err) = self.room_for_statement(true).await? {
            return Ok(Err(err));
        }
        let floor = self.fe.pool_config.max_prepared_per_connection as usize;
        let backend = self.backend.as_mut().expect("acquired");
        let stmt = (self.backing.muxed_mut().stmts)
            .get_mut(&id)
            .expect("checked by the caller");
        Stats::incr(&self.fe.mux_stats.reprepares);
        let marked = crate::binlog::origin::mark(&stmt.text, backend.thread_id)
            .filter(|_| self.fe.shards.is_none() && self.fe.router.load().settles_lost_commits());
        let prepared = match backend
            .prepare(marked.as_deref().unwrap_or(&stmt.text))
            .await
        {
            Ok(r) => r,
            // Nothing of the client's command was sent: it gets an error and the
            // session goes on (its server may just have died).
            Err(e) => {
                backend.mark_broken();
                return Ok(Err(e.to_err_packet()));
            }
        };
        let (bid, params) = match prepared {
            Ok(p) => p,
            Err(err) => return Ok(Err(err)),
        };
        stmt.params = params;
        let max = (backend.stmts.server()).per_connection(floor, backend.server.max_connections);
        let evicted = backend.stmts.evict_to(max);
        backend.stmts.insert(stmt.key.key().into(), bid, params);
        close_on(backend, &evicted).await?;
        Ok(Ok(bid))
    }
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
