//! The place stage (docs/ARCHITECTURE.md, "Sharding"): with `[[shards]]`, which shard
//! the statement at the front of the client buffer goes to, before it is routed within
//! that shard. A statement goes to the one shard its rows live on; one that names no
//! table stays on the session's shard. What would need several shards is refused with
//! error 1235 naming why, never answered from one of them.
//!
//! A transaction runs on one shard. `BEGIN` is answered here and sent to the server with
//! the transaction's first statement, on that statement's shard, so that a transaction
//! is placed by what it does rather than by where the session happened to be.

use super::*;
use crate::classify::keys::key_values;
use crate::classify::sql::{self, Analysis, TableRef};
use crate::router::gtid::GtidPos;
use crate::router::{Member, Router};
use crate::shard::config::CrossShard;
use crate::shard::{Merge, Placement, Shards};
use sluice_wire::statement::Bound;
use std::sync::Arc;

/// What the place stage decided.
pub(in crate::frontend::session) enum Placed {
    /// Route the statement within this router's shard.
    On(Arc<Router>),
    /// Answered (or refused) here; the session goes on or not.
    Done(bool),
    /// A read to run on each of these shards, its rows put together so.
    Scatter(Arc<Shards>, Vec<usize>, Merge),
}

/// Where a statement over tables goes, from its key values.
enum Placing {
    /// To this one shard: the place stage goes on with it.
    One(usize),
    /// Several shards, or answered here: how the place stage ends.
    Placed(Placed),
}

/// A statement read for placing over shards: its payload (what an execute binds is read
/// from it), the text the shards see, and an execute's parameter types and cursor.
struct ShardedStatement {
    payload: Vec<u8>,
    text: Vec<u8>,
    types: Option<(Vec<u8>, u16)>,
    cursor: bool,
}

impl ShardedStatement {
    /// An execute's bound values.
    fn params(&self) -> Option<Vec<Bound<'_>>> {
        let (types, params) = self.types.as_ref()?;
        Execute::parse(&self.payload, *params).and_then(|e| e.bound(types))
    }
}

/// What decides a statement's shard: its text and values, the default schema, its
/// tables, and whether it writes.
struct Where<'a> {
    read: &'a ShardedStatement,
    schema: Option<&'a str>,
    tables: Vec<TableRef>,
    writes: bool,
}

/// What a session keeps per shard it has used besides its current one: its reads must
/// see its writes there too.
#[derive(Default)]
pub(in crate::frontend::session) struct ShardState {
    last_gtid: Option<GtidPos>,
    home: Option<Arc<Member>>,
}

/// Error 1235 (`ER_NOT_SUPPORTED_YET`, as the server words it), naming what needs
/// more than one shard.
pub(super) fn not_yet(what: &str) -> ErrPacket {
    ErrPacket::new(
        code::ER_NOT_SUPPORTED_YET,
        "42000",
        format!("This version of Sluice doesn't yet support '{what}'"),
    )
}

impl Session {
    /// The router of the shard the session is on (the one cluster's without shards).
    pub(in crate::frontend::session) fn session_router(&self) -> Arc<Router> {
        match &self.fe.shards {
            Some(s) => {
                let shard = self.backing.mux().and_then(|m| m.shard);
                s.routers[shard.unwrap_or(s.map.default_shard())].clone()
            }
            None => self.fe.router.load_full(),
        }
    }

    /// The place stage for a multiplexed statement with `[[shards]]` (one cluster has
    /// no such stage): the shard, or shards, its tables and key values decide.
    pub(in crate::frontend::session) async fn place(
        &mut self,
        stmt: &Statement,
        shards: Arc<Shards>,
    ) -> Result<Placed, SessionError> {
        let current = self
            .backing
            .muxed()
            .shard
            .unwrap_or(shards.map.default_shard());
        if !matches!(stmt.command, Command::Query | Command::StmtExecute) {
            return Ok(Placed::On(shards.routers[current].clone()));
        }
        if stmt.len > MAX_BUFFERED {
            return self
                .refuse(not_yet("a statement over 1 MiB with [[shards]]"))
                .await;
        }
        let Some(read) = self.sharded_statement(stmt).await? else {
            // An unknown id: the usual answer comes from the next stage.
            return Ok(Placed::On(shards.routers[current].clone()));
        };
        let text = &read.text;
        if let Some(done) = self.spread_statement(&shards, text).await? {
            return Ok(Placed::Done(done));
        }
        if let Some(done) = self.deferred_transaction(text).await? {
            return Ok(Placed::Done(done));
        }
        let held_in_trx = self.backing.held_in_transaction();
        let mux = self.backing.muxed_mut();
        if !held_in_trx && mux.deferred_begin.is_none() && mux.spread.is_none() {
            mux.trx_wrote = false;
        }
        let schema = self
            .backing
            .muxed()
            .schema
            .as_deref()
            .map(|s| String::from_utf8_lossy(s).into_owned());
        let analysis = sql::analyze(text, schema.as_deref());
        let writes = !matches!(analysis, Analysis::Read { .. });
        let tables: Vec<TableRef> = match analysis {
            Analysis::Read { tables, .. } => tables,
            Analysis::Write { tables: Some(t) } => t,
            Analysis::Write { tables: None } => {
                let why = "a write whose tables Sluice cannot tell, with [[shards]]";
                return self.refuse(not_yet(why)).await;
            }
            _ => Vec::new(),
        };
        let target = match tables.is_empty() {
            true => current,
            false => {
                let at = Where {
                    read: &read,
                    schema: schema.as_deref(),
                    tables,
                    writes,
                };
                match self.shard_for(stmt, &shards, at).await? {
                    Placing::One(target) => target,
                    Placing::Placed(placed) => return Ok(placed),
                }
            }
        };
        if target != current && !self.move_to_shard(&shards, current, target).await? {
            let in_trx =
                self.backing.muxed().spread.is_some() || self.backing.held_in_transaction();
            if !in_trx || shards.cross_shard == CrossShard::Refuse {
                return self
                    .refuse(not_yet("a transaction over more than one shard"))
                    .await;
            }
            self.spread_to(&shards, current, target);
        }
        if writes {
            self.backing.muxed_mut().trx_wrote = true;
        }
        Ok(Placed::On(shards.routers[target].clone()))
    }

    /// The statement's text as the shards see it (a prepared statement's, for an
    /// execute), with what an execute binds; `None` for an execute of a statement this
    /// session does not know.
    async fn sharded_statement(
        &mut self,
        stmt: &Statement,
    ) -> Result<Option<ShardedStatement>, SessionError> {
        let len = stmt.len;
        self.client.fill_to(HEADER_LEN + len).await?;
        // A copy, so that what is read from it outlives the answers written meanwhile.
        let payload = self.client.rbuf[HEADER_LEN..HEADER_LEN + len].to_vec();
        if stmt.command != Command::StmtExecute {
            let text = payload[1..].to_vec();
            return Ok(Some(ShardedStatement {
                payload,
                text,
                types: None,
                cursor: false,
            }));
        }
        let mux = self.backing.muxed();
        let Some(prepared) = stmt.client_id.and_then(|id| mux.stmts.get(&id)) else {
            return Ok(None);
        };
        let execute = Execute::parse(&payload, prepared.params);
        let cursor = execute.as_ref().is_some_and(|e| e.opens_cursor());
        let types = execute
            .and_then(|e| e.types.map(<[u8]>::to_vec))
            .or_else(|| prepared.types.clone())
            .map(|t| (t, prepared.params));
        let text = prepared.text.to_vec();
        Ok(Some(ShardedStatement {
            payload,
            text,
            types,
            cursor,
        }))
    }

    /// The shard a statement over `at.tables` goes to, or how it went when it goes to
    /// several (a read put together, a multi-row insert split) or is refused.
    async fn shard_for(
        &mut self,
        stmt: &Statement,
        shards: &Arc<Shards>,
        at: Where<'_>,
    ) -> Result<Placing, SessionError> {
        let Where {
            read,
            schema,
            tables,
            writes,
        } = at;
        let text = &read.text;
        let params = read.params();
        let placement = shards.map.place(
            &tables,
            |_, col| key_values(text, schema, col).0,
            params.as_deref(),
        );
        let targets: Vec<usize> = match placement {
            Placement::One(i) => vec![i],
            Placement::Several(list) => list,
            Placement::All => (0..shards.routers.len()).collect(),
        };
        let split = match (writes, stmt.command, tables.as_slice()) {
            (true, Command::Query, [table]) if targets.len() > 1 => {
                shards.map.split_insert(table, text, schema)
            }
            _ => None,
        };
        if let Some((cut, parts)) = split {
            self.stmt.scattered = true;
            let table = tables[0].clone();
            let going_on = self.split_insert(shards, text, cut, parts, table).await?;
            return Ok(Placing::Placed(Placed::Done(going_on)));
        }
        if let [one] = targets.as_slice() {
            return Ok(Placing::One(*one));
        }
        let merging = self.scatter_merging(shards, stmt.command, !writes, text, read.cursor);
        Ok(Placing::Placed(match merging {
            Ok(merge) => Placed::Scatter(shards.clone(), targets, merge),
            Err(why) => self.refuse(not_yet(why)).await?,
        }))
    }

    /// How a statement over several shards is run on each and its rows put together
    /// (see [`crate::shard::merging`]): a read whose rows concatenate, merge in order or
    /// whose aggregates combine exactly (prepared: concatenate only). In a transaction,
    /// each shard's part runs in it (XA branches). `Err` names why it cannot be.
    fn scatter_merging(
        &self,
        shards: &Shards,
        command: Command,
        read: bool,
        text: &[u8],
        cursor: bool,
    ) -> Result<Merge, &'static str> {
        if !read {
            return Err("a write over several shards (no shard key decides where its rows are)");
        }
        if self.in_transaction() && shards.cross_shard == CrossShard::Refuse {
            return Err("a read over several shards in a transaction");
        }
        let merge = crate::shard::merging(text)?;
        if command == Command::StmtExecute {
            // A cursor's rows come by COM_STMT_FETCH, from one server.
            if cursor {
                return Err("a prepared read over several shards with a cursor");
            }
            if !matches!(merge, Merge::Concat) {
                return Err("a prepared read over several shards whose rows need merging");
            }
        }
        Ok(merge)
    }

    /// The session is in a transaction: begun (or about to be), a connection holding
    /// one, or every statement under `autocommit = 0`.
    pub(super) fn in_transaction(&self) -> bool {
        let mux = self.backing.muxed();
        !mux.autocommits() || mux.spread.is_some() || self.backing.held_in_transaction()
    }

    /// `BEGIN`/`START TRANSACTION` outside a transaction is answered here and kept for
    /// the transaction's first statement; `COMMIT`/`ROLLBACK` of a transaction that
    /// never reached a server are answered here too. `None`: not such a statement.
    async fn deferred_transaction(&mut self, text: &[u8]) -> Result<Option<bool>, SessionError> {
        let word = sql::first_word(text);
        let held_in_trx = self.backing.held_in_transaction();
        let mux = self.backing.muxed_mut();
        // Not `BEGIN NOT ATOMIC`, a compound statement.
        let starts = word == b"BEGIN" && !contains_word(text, b"ATOMIC")
            || word == b"START" && sql::analyze(text, None) == Analysis::Transaction;
        // Not `ROLLBACK TO SAVEPOINT`; `AND CHAIN` starts another transaction, so it goes
        // to a server with the BEGIN before it.
        let ends = matches!(word.as_slice(), b"COMMIT" | b"ROLLBACK")
            && !contains_word(text, b"TO")
            && !contains_word(text, b"CHAIN");
        let reply = if starts && !held_in_trx && mux.deferred_begin.is_none() {
            mux.deferred_begin = Some(text.into());
            StatusFlags(mux.status.0 | StatusFlags::IN_TRANS)
        } else if ends && mux.deferred_begin.is_some() && !held_in_trx {
            mux.deferred_begin = None;
            StatusFlags(mux.status.0 & !StatusFlags::IN_TRANS)
        } else {
            return Ok(None);
        };
        mux.status = reply;
        let seq = self.client.skip_packet().await?;
        let ok = OkPacket {
            status: reply,
            ..Default::default()
        };
        self.client.write_ok(seq, &ok).await?;
        Ok(Some(true))
    }

    /// Leaves shard `from` for `to`: the connection held goes back first, unless a
    /// transaction or state that can't move keeps it (false). What the session's reads
    /// must see is kept per shard.
    pub(super) async fn move_to_shard(
        &mut self,
        shards: &Shards,
        from: usize,
        to: usize,
    ) -> Result<bool, SessionError> {
        if self.backing.conn().is_some() {
            self.backing.muxed_mut().hold_until = None;
            self.release_if_free().await?;
            if self.backing.conn().is_some() {
                return Ok(false);
            }
        }
        // A transaction (explicit, or any statement under autocommit = 0) keeps its
        // connection until it ends, so reaching here it has ended or not begun.
        self.switch_shard(shards, from, to);
        Ok(true)
    }

    /// The session is on shard `to` now: what its reads must see on `from` is kept for
    /// when it comes back.
    pub(super) fn switch_shard(&mut self, shards: &Shards, from: usize, to: usize) {
        let mux = self.backing.muxed_mut();
        let left = ShardState {
            last_gtid: mux.last_gtid.take(),
            home: mux.home.take(),
        };
        mux.shard_state.insert(from, left);
        let back = mux.shard_state.remove(&to).unwrap_or_default();
        mux.last_gtid = back.last_gtid;
        mux.home = back.home;
        mux.shard = Some(to);
        tracing::trace!(
            from = shards.map.names()[from],
            to = shards.map.names()[to],
            "session moves to another shard"
        );
    }

    /// A write committed on shard `shard` with GTID `gtid` (Sluice's own commit): the
    /// session's reads there must see it, whether it is on that shard now or not.
    pub(super) fn note_shard_gtid(&mut self, shards: &Shards, shard: usize, gtid: &[u8]) {
        let current = self
            .backing
            .muxed()
            .shard
            .unwrap_or(shards.map.default_shard());
        if shard == current {
            self.note_gtid(&shards.routers[shard], gtid);
            return;
        }
        let Some(pos) = std::str::from_utf8(gtid).ok().and_then(GtidPos::parse) else {
            return;
        };
        if pos.is_empty() {
            return;
        }
        shards.routers[shard].note_write(&pos);
        let state = self
            .backing
            .muxed_mut()
            .shard_state
            .entry(shard)
            .or_default();
        state
            .last_gtid
            .get_or_insert_with(GtidPos::default)
            .merge(&pos);
    }

    /// Answers the statement at the front of the client buffer with `err`.
    async fn refuse(&mut self, err: ErrPacket) -> Result<Placed, SessionError> {
        let seq = self.client.skip_packet().await?;
        self.client.write_err(seq, &err).await?;
        Ok(Placed::Done(true))
    }

    /// The deferred `BEGIN`, sent on the connection just brought in line for the
    /// transaction's first statement. The server's refusal goes to the client instead
    /// of the statement.
    pub(in crate::frontend::session) async fn begin_deferred(&mut self) -> Result<(), Failed> {
        let Some(begin) = self.backing.muxed_mut().deferred_begin.take() else {
            return Ok(());
        };
        let backend = self.backing.conn_mut().expect("acquired");
        let mut payload = Vec::with_capacity(begin.len() + 1);
        payload.push(Command::Query as u8);
        payload.extend_from_slice(&begin);
        let err = match backend.simple_command(&payload).await {
            Ok(_) => return Ok(()),
            Err(failed) => backend.answer_for(failed),
        };
        if let Some(shards) = self.fe.shards.clone() {
            self.spread_failed(&shards).await;
        }
        Err(Failed::Answered(err))
    }
}

pub(super) fn contains_word(text: &[u8], word: &[u8]) -> bool {
    text.split(|b| !b.is_ascii_alphanumeric() && *b != b'_')
        .any(|w| w.eq_ignore_ascii_case(word))
}
