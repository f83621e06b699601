//! Multiplexing: a session holds a backend connection only while it needs one — during
//! a statement and its response, inside a transaction, and while it holds state that
//! can't move (pins). Otherwise its connection goes back to the pool after each
//! statement, and the next statement runs on whichever connection is free, first brought
//! in line with the session's state: schema and system variables, known exactly from
//! the server's session tracking rather than guessed from SQL.
//!
//! Prepared statements get session-level ids; each connection keeps its own backend
//! statements by schema and text, prepared again lazily where an execute lands, and
//! closed once no session's statement refers to that text (`backend::prepared`).

use super::prepared::close_on;
use super::stmt_id;
use super::Session;
use crate::backend::{PoolKey, StmtRef, Vars, LOGIN_VARS};
use crate::classify::effects::Effects;
use crate::error::{code, SessionError};
use crate::stats::Stats;
use sluice_wire::command::Command;
use sluice_wire::packet::split_packet;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::response::{ErrPacket, OkPacket};
use sluice_wire::session_track::{parse_full_ok, untracked_ok, StateChange};
use sluice_wire::statement::{self, Execute, PrepareOk};
use sluice_wire::ProtocolError;
use sluice_wire::StatusFlags;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

/// Statements up to this size are read whole before they are forwarded, so their effect
/// on the session can be known. Larger ones stream, their effects read from their head.
pub(super) const MAX_BUFFERED: usize = 1 << 20;

/// Why a session keeps its backend connection between statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinReason {
    Transaction,
    TemporaryTable,
    NamedLock,
    TableLock,
    FoundRows,
    Xa,
    Backup,
    Handler,
    SqlPrepared,
    NextTransaction,
    UserVariables,
    Cursor,
    LongData,
    SessionTracking,
    SqlLogBin,
    FixedVariable,
    WriteHold,
    UnknownState,
}

impl PinReason {
    pub const ALL: [PinReason; 18] = [
        PinReason::Transaction,
        PinReason::TemporaryTable,
        PinReason::NamedLock,
        PinReason::TableLock,
        PinReason::FoundRows,
        PinReason::Xa,
        PinReason::Backup,
        PinReason::Handler,
        PinReason::SqlPrepared,
        PinReason::NextTransaction,
        PinReason::UserVariables,
        PinReason::Cursor,
        PinReason::LongData,
        PinReason::SessionTracking,
        PinReason::SqlLogBin,
        PinReason::FixedVariable,
        PinReason::WriteHold,
        PinReason::UnknownState,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PinReason::Transaction => "transaction",
            PinReason::TemporaryTable => "temporary_table",
            PinReason::NamedLock => "named_lock",
            PinReason::TableLock => "table_lock",
            PinReason::FoundRows => "found_rows",
            PinReason::Xa => "xa",
            PinReason::Backup => "backup_lock",
            PinReason::Handler => "handler",
            PinReason::SqlPrepared => "sql_prepared_statement",
            PinReason::NextTransaction => "next_transaction_characteristics",
            PinReason::UserVariables => "user_variables",
            PinReason::Cursor => "cursor",
            PinReason::LongData => "long_data",
            PinReason::SessionTracking => "session_tracking_changed",
            PinReason::SqlLogBin => "sql_log_bin",
            PinReason::FixedVariable => "fixed_variable",
            PinReason::WriteHold => "write_hold",
            PinReason::UnknownState => "session_state_changed",
        }
    }
}

/// Multiplexing figures of the whole process.
#[derive(Default)]
pub struct MuxStats {
    /// Times a statement had to take a connection from the pool.
    pub leases: AtomicU64,
    /// Times a connection went back to the pool between statements.
    pub releases: AtomicU64,
    /// Leases whose connection needed bringing in line, and the statements that took.
    pub syncs: AtomicU64,
    pub sync_statements: AtomicU64,
    /// Statements prepared again on another connection.
    pub reprepares: AtomicU64,
    /// Sessions pinned, by reason (indexed like [`PinReason::ALL`]).
    pub pins: [AtomicU64; 18],
}

impl MuxStats {
    pub fn pin(&self, reason: PinReason) {
        let i = PinReason::ALL
            .iter()
            .position(|r| *r == reason)
            .expect("listed");
        Stats::incr(&self.pins[i]);
    }
}

/// State that can't move to another connection, cleared by the statements that end it.
#[derive(Default, Debug)]
struct Pins {
    temp_tables: BTreeSet<String>,
    named_locks: u32,
    table_locks: bool,
    found_rows: bool,
    xa: bool,
    backup: bool,
    handlers: BTreeSet<String>,
    sql_prepared: BTreeSet<String>,
    next_transaction: bool,
    user_vars: bool,
    cursors: BTreeSet<u32>,
    long_data: bool,
    tracking: bool,
    fixed_variable: bool,
    /// The server said the session's state changed in a way neither tracking nor the
    /// statement's text explains (a temporary table created by a procedure...).
    unknown_state: bool,
}

impl Pins {
    fn reason(&self) -> Option<PinReason> {
        Some(if !self.temp_tables.is_empty() {
            PinReason::TemporaryTable
        } else if self.named_locks > 0 {
            PinReason::NamedLock
        } else if self.table_locks {
            PinReason::TableLock
        } else if self.xa {
            PinReason::Xa
        } else if self.backup {
            PinReason::Backup
        } else if !self.handlers.is_empty() {
            PinReason::Handler
        } else if !self.sql_prepared.is_empty() {
            PinReason::SqlPrepared
        } else if self.user_vars {
            PinReason::UserVariables
        } else if !self.cursors.is_empty() {
            PinReason::Cursor
        } else if self.long_data {
            PinReason::LongData
        } else if self.tracking {
            PinReason::SessionTracking
        } else if self.fixed_variable {
            PinReason::FixedVariable
        } else if self.unknown_state {
            PinReason::UnknownState
        } else if self.found_rows {
            PinReason::FoundRows
        } else if self.next_transaction {
            PinReason::NextTransaction
        } else {
            return None;
        })
    }
}

/// A statement the client prepared, under the id Sluice gave it.
#[derive(Debug)]
struct ClientStmt {
    /// Schema and text: what a connection's backend statement is found by. Held, so
    /// that the connections' statements of that text stay open.
    key: StmtRef,
    text: Box<[u8]>,
    params: u16,
    /// The parameter types the client last bound.
    types: Option<Vec<u8>>,
    /// A plain read, which may run on a replica.
    plain_read: bool,
    /// What executing it does to unmovable state.
    effects: Effects,
    /// It names a `session_track_*` variable: executes run with the client's tracking.
    names_tracking: bool,
}

impl ClientStmt {
    /// The client bound `types` in an execute; later executes without types mean them.
    fn note_types(&mut self, types: &[u8]) {
        // Drivers send the same types with every execute.
        if self.types.as_deref() != Some(types) {
            self.types = Some(types.to_vec());
        }
    }
}

/// A COM_STMT_PREPARE in flight: the backend statement key, the text, and the id the
/// client will know it by.
pub(super) struct Preparing {
    key: Box<[u8]>,
    text: Box<[u8]>,
    id: u32,
}

/// What the response to the statement in flight did, from its OK packets.
#[derive(Default, Debug)]
pub(super) struct Observed {
    /// The final status, absent after an error.
    pub status: Option<StatusFlags>,
    pub affected_rows: u64,
    pub last_insert_id: u64,
    /// `insert_id` or `timestamp`-like variables were set: pin.
    pub fixed_variable: bool,
    pub tracking_changed: bool,
    pub last_insert_id_set: bool,
    /// The GTID the statement's transaction was logged with (`last_gtid` tracking).
    pub last_gtid: Option<Vec<u8>>,
    /// Session state (variables, schema) changed: the connection's copy follows.
    pub state_changed: bool,
    /// The server reported a state change with no variable or schema behind it.
    pub bare_state_change: bool,
}

/// The multiplexing state of one session.
pub(super) struct Mux {
    pub key: PoolKey,
    pub schema: Option<Vec<u8>>,
    pub vars: Vars,
    /// The session's user variables, as literals that recreate them with their type
    /// and collation: carried to whichever connection runs its next statement.
    user_vars: std::collections::BTreeMap<Box<[u8]>, String>,
    pins: Pins,
    /// Status flags of the last response (what the client believes).
    pub status: StatusFlags,
    /// The session's `LAST_INSERT_ID()`, unless `lid_dirty`.
    last_insert_id: u64,
    /// A statement may have changed it on the connection held now: read it there before
    /// leaving.
    lid_dirty: bool,
    /// After a write, keep the connection while idle until then.
    pub hold_until: Option<Instant>,
    stmts: HashMap<u32, ClientStmt>,
    next_stmt: u32,
    /// The client did not negotiate CLIENT_SESSION_TRACK: OK packets are rewritten, with
    /// the info string length-coded when this holds (MariaDB's way).
    pub translate_ok: bool,
    pub lenenc_info: bool,
    /// A COM_STMT_PREPARE in flight: its key, text and the id the client will see.
    pub preparing: Option<Preparing>,
    /// The backend id and parameter count the prepare in flight got.
    pub prepared: Option<(u32, u16)>,
    /// Parameter types the execute in flight binds on its connection's statement. The
    /// connection holds them only once the execute reaches it: the cache may answer
    /// instead.
    bound: Option<Vec<u8>>,
    pub observed: Observed,
    /// Whether the last lease needed no state change.
    pub pinned_since: Option<PinReason>,
    /// The session's latest write, which its reads must see (read-your-writes).
    pub last_gtid: Option<crate::router::gtid::GtidPos>,
    /// The client's own `session_track_*` settings, once a connection told the defaults.
    pub(super) tracking: Option<sluice_wire::session_track::Tracking>,
    /// The statement in flight runs with the client's tracking settings on the
    /// connection: its OK packets are already the client's.
    pub(super) own_tracking: bool,
    /// The values its variables it never set have: those the server's globals gave the
    /// session's first connection (`session/globals.rs`).
    pub globals: Option<std::sync::Arc<crate::backend::Globals>>,
}

impl Mux {
    pub fn new(
        key: PoolKey,
        schema: Option<Vec<u8>>,
        translate_ok: bool,
        lenenc_info: bool,
    ) -> Mux {
        Mux {
            key,
            schema,
            vars: Vars::new(),
            user_vars: std::collections::BTreeMap::new(),
            pins: Pins::default(),
            status: StatusFlags(StatusFlags::AUTOCOMMIT),
            last_insert_id: 0,
            lid_dirty: false,
            hold_until: None,
            stmts: HashMap::new(),
            next_stmt: 1,
            translate_ok,
            lenenc_info,
            preparing: None,
            prepared: None,
            bound: None,
            observed: Observed::default(),
            pinned_since: None,
            last_gtid: None,
            tracking: None,
            own_tracking: false,
            globals: None,
        }
    }

    /// Back to a fresh login's state (COM_RESET_CONNECTION, COM_CHANGE_USER).
    pub fn reset(&mut self, key: PoolKey, schema: Option<Vec<u8>>) {
        *self = Mux::new(key, schema, self.translate_ok, self.lenenc_info);
    }

    /// A prepared statement's text, and whether it is a plain read.
    pub(super) fn stmt_route(&self, id: u32) -> Option<(&[u8], bool)> {
        self.stmts.get(&id).map(|s| (&s.text[..], s.plain_read))
    }

    /// An execute of statement `id` (the client's) was answered without a connection:
    /// the types it binds are the ones later executes without types mean.
    pub(super) fn note_execute(&mut self, id: u32, payload: &[u8]) {
        let Some(stmt) = self.stmts.get_mut(&id) else {
            return;
        };
        if let Some(types) = Execute::parse(payload, stmt.params).and_then(|e| e.types) {
            stmt.note_types(types);
        }
    }

    /// Why the session must keep its connection, given the server's last status.
    pub fn pin_reason(&self, status: StatusFlags) -> Option<PinReason> {
        if status.in_transaction() {
            return Some(PinReason::Transaction);
        }
        if let Some(r) = self.pins.reason() {
            return Some(r);
        }
        if self
            .vars
            .get(b"sql_log_bin".as_slice())
            .is_some_and(|v| v.eq_ignore_ascii_case(b"OFF") || v.as_ref() == b"0")
        {
            return Some(PinReason::SqlLogBin);
        }
        None
    }

    /// Applies one session-tracking entry of an OK packet the session's statement got.
    pub fn track(&mut self, change: &StateChange<'_>) {
        match change {
            StateChange::SystemVariable { name, value } => {
                let name = name.to_ascii_lowercase();
                match name.as_slice() {
                    b"session_track_system_variables"
                    | b"session_track_schema"
                    | b"session_track_state_change"
                    | b"session_track_transaction_info"
                    | b"session_track_gtids" => self.observed.tracking_changed = true,
                    b"last_insert_id" => self.observed.last_insert_id_set = true,
                    b"last_gtid" => self.observed.last_gtid = Some(value.to_vec()),
                    // Read-only: reported, never set.
                    b"in_transaction" | b"warning_count" | b"error_count" | b"external_user"
                    | b"proxy_user" => {}
                    b"insert_id" | b"timestamp" | b"rand_seed1" | b"rand_seed2"
                    | b"pseudo_thread_id" | b"identity" => self.observed.fixed_variable = true,
                    _ => {
                        self.vars.insert(name.into(), (*value).into());
                    }
                }
            }
            // Empty: no schema (a procedure of another schema returned to none).
            StateChange::Schema(name) => {
                self.schema = (!name.is_empty()).then(|| name.to_vec());
            }
            _ => {}
        }
    }

    /// Notes what a statement did to unmovable state. `ok`: it did not fail.
    pub fn apply_effects(&mut self, fx: &Effects, ok: bool) {
        let p = &mut self.pins;
        for t in &fx.tables_dropped {
            p.temp_tables.remove(t);
        }
        for h in &fx.handler_closed {
            p.handlers.remove(h);
        }
        for s in &fx.sql_deallocated {
            p.sql_prepared.remove(s);
        }
        if fx.release_all_locks {
            p.named_locks = 0;
        } else if fx.release_lock {
            p.named_locks = p.named_locks.saturating_sub(1);
        }
        if fx.table_locks == Some(false) {
            p.table_locks = false;
        }
        if fx.xa == Some(false) {
            p.xa = false;
        }
        if fx.backup == Some(false) {
            p.backup = false;
        }
        if !ok {
            return;
        }
        p.temp_tables.extend(fx.temp_created.iter().cloned());
        p.handlers.extend(fx.handler_opened.iter().cloned());
        p.sql_prepared.extend(fx.sql_prepared.iter().cloned());
        if fx.get_lock {
            p.named_locks += 1;
        }
        if fx.table_locks == Some(true) {
            p.table_locks = true;
        }
        if fx.xa == Some(true) {
            p.xa = true;
        }
        if fx.backup == Some(true) {
            p.backup = true;
        }
        if fx.calc_found_rows {
            p.found_rows = true;
        }
        if fx.next_transaction {
            p.next_transaction = true;
        }
    }

    /// Learns what an OK packet of the statement's response says (affected rows, last
    /// insert id, session state changes). Returns the packet rewritten for a client
    /// without CLIENT_SESSION_TRACK, when it is one, and the OK's status.
    #[allow(clippy::type_complexity)]
    pub fn observe_ok(
        &mut self,
        packet: &[u8],
    ) -> Result<(Option<Vec<u8>>, StatusFlags), ProtocolError> {
        let Some((seq, payload)) = split_packet(packet) else {
            return Err(ProtocolError::Malformed("OK packet"));
        };
        let ok = parse_full_ok(payload, true)?;
        self.observed.affected_rows = ok.affected_rows;
        if ok.last_insert_id != 0 {
            self.observed.last_insert_id = ok.last_insert_id;
        }
        for change in &ok.changes {
            self.track(change);
        }
        if !ok.changes.is_empty() {
            self.observed.state_changed = true;
        }
        let explained = ok.changes.iter().any(|c| {
            matches!(
                c,
                StateChange::SystemVariable { .. } | StateChange::Schema(_)
            )
        });
        if !explained && ok.changes.contains(&StateChange::StateChanged) {
            self.observed.bare_state_change = true;
        }
        if !self.translate_ok {
            return Ok((
                super::tracking::for_client(self, seq, payload, &ok)?,
                ok.status,
            ));
        }
        let t = untracked_ok(payload[0], &ok, self.lenenc_info);
        let mut out = bytes::BytesMut::with_capacity(t.len() + HEADER_LEN);
        sluice_wire::packet::write_packet(&mut out, seq, &t);
        Ok((Some(out.to_vec()), ok.status))
    }

    /// In the first bytes of a prepare's response, puts the id the client will know the
    /// statement by in place of the connection's, and notes the connection's.
    pub fn patch_prepare_ok(&mut self, bytes: &mut [u8]) {
        let Some(Preparing { id: client_id, .. }) = &self.preparing else {
            return;
        };
        let Some(ok) = bytes.get(HEADER_LEN..).and_then(PrepareOk::parse) else {
            return;
        };
        statement::set_stmt_id(&mut bytes[HEADER_LEN..], *client_id);
        self.prepared = Some((ok.stmt_id, ok.params));
    }

    /// A statement ended: one-statement pins that it consumed are cleared.
    fn statement_done(&mut self, fx: &Effects, status: StatusFlags) {
        if !fx.calc_found_rows {
            self.pins.found_rows = false;
        }
        if !fx.next_transaction && !status.in_transaction() {
            self.pins.next_transaction = false;
        }
    }
}

/// The SET statement that brings a connection's variables (`have`) to the session's
/// (`want`): changed ones set to the session's value, extra ones back to their login
/// value (`DEFAULT` would be the server's global of now, which may have moved since
/// the connection and the session started). None when nothing differs.
pub(super) fn sync_statement(
    want: &Vars,
    have: &Vars,
    login_vars: &[Option<Vec<u8>>],
    globals: Option<&crate::backend::Globals>,
    last_insert_id: Option<u64>,
) -> Option<String> {
    let mut sql = String::new();
    let add = |sql: &mut String, name: &[u8], value: &str| {
        sql.push_str(if sql.is_empty() { "SET SESSION " } else { ", " });
        sql.push_str(&String::from_utf8_lossy(name));
        sql.push('=');
        sql.push_str(value);
    };
    for (name, value) in want {
        if have.get(name) != Some(value) {
            add(&mut sql, name, &literal(name, value));
        }
    }
    for name in have.keys() {
        if want.contains_key(name) {
            continue;
        }
        let login = LOGIN_VARS
            .iter()
            .position(|v| v.as_bytes() == name.as_ref())
            .map(|i| login_vars.get(i).and_then(Option::as_deref));
        let inherited = globals.and_then(|g| g.values.get(name));
        let value = match (login, inherited) {
            (Some(Some(v)), _) => literal(name, v),
            (Some(None), _) => "NULL".to_owned(),
            (None, Some(v)) => literal(name, v),
            (None, None) => "DEFAULT".to_owned(),
        };
        add(&mut sql, name, &value);
    }
    if let Some(id) = last_insert_id {
        add(&mut sql, b"last_insert_id", &id.to_string());
    }
    (!sql.is_empty()).then_some(sql)
}

/// A tracked value as SQL: numbers bare, text quoted (hex when it holds a quote or a
/// backslash, whose meaning depends on sql_mode), and an empty character set as NULL.
fn literal(name: &[u8], value: &[u8]) -> String {
    if value.is_empty() && name.starts_with(b"character_set_") {
        return "NULL".into();
    }
    let numeric = !value.is_empty()
        && value
            .iter()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (*b == b'-' && i == 0) || *b == b'.')
        && value.iter().filter(|b| **b == b'.').count() <= 1
        && value.iter().any(u8::is_ascii_digit);
    if numeric {
        return String::from_utf8_lossy(value).into_owned();
    }
    if value.iter().any(|b| matches!(b, b'\'' | b'\\' | 0)) || std::str::from_utf8(value).is_err() {
        let mut s = String::with_capacity(3 + value.len() * 2);
        s.push_str("X'");
        for b in value {
            let _ = write!(s, "{b:02X}");
        }
        s.push('\'');
        return s;
    }
    format!("'{}'", String::from_utf8_lossy(value))
}

/// Whether a command may generate an insert id (so `LAST_INSERT_ID()` must be the
/// session's before it runs): INSERT, REPLACE, LOAD DATA, CALL, a multi-statement, or an
/// execute (whose text was seen at prepare time; checked cheaply by assuming it may).
fn may_insert(command: Option<Command>, packet: &[u8]) -> bool {
    match command {
        Some(Command::StmtExecute) => true,
        Some(Command::Query) => {
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

/// Outcome of getting the statement in the client buffer ready to forward.
pub(super) enum Ready {
    /// Forward it.
    Go(Effects),
    /// Answered (or refused) already; the session goes on or not.
    Done(bool),
}

impl Session {
    fn mux(&mut self) -> &mut Mux {
        self.mux.as_mut().expect("only called when multiplexing")
    }

    /// Gets the command at the front of the client buffer ready to go to a backend
    /// connection: reads it whole when small, learns its effects, takes a connection if
    /// the session has none and brings it in line, and maps statement ids.
    pub(super) async fn mux_prepare(
        &mut self,
        len: usize,
        router: &std::sync::Arc<crate::router::Router>,
    ) -> Result<Ready, SessionError> {
        let command = Command::from_byte(self.client.rbuf[HEADER_LEN]);
        let whole = len <= MAX_BUFFERED;
        if whole {
            while self.client.rbuf.len() < HEADER_LEN + len {
                self.client.read_more().await?;
            }
        }
        let visible = self.client.rbuf.len().min(HEADER_LEN + len);
        let fx = match command {
            Some(Command::Query) => {
                crate::classify::effects::effects(&self.client.rbuf[HEADER_LEN + 1..visible])
            }
            // A prepared LOCK TABLES or GET_LOCK holds what the same text would.
            Some(Command::StmtExecute) => {
                let id = stmt_id(&self.client.rbuf);
                match id.and_then(|id| self.mux().stmts.get(&id)) {
                    Some(stmt) => stmt.effects.clone(),
                    None => Effects::default(),
                }
            }
            _ => Effects::default(),
        };
        match command {
            Some(Command::StmtClose) => {
                // Dropping the statement's reference to its text lets the connections
                // close theirs, unless another session's statement refers to it too.
                if let Some(id) = stmt_id(&self.client.rbuf) {
                    let mux = self.mux();
                    mux.stmts.remove(&id);
                    mux.pins.cursors.remove(&id);
                    if let Some(c) = self.cache.as_mut() {
                        c.forget_statement(id);
                    }
                }
                self.client.skip_packet().await?;
                return Ok(Ready::Done(true));
            }
            Some(Command::Ping) if self.backend.is_none() => {
                // Sluice is up and a connection will be found when there is work.
                let seq = self.client.skip_packet().await?;
                let ok = OkPacket {
                    status: self.mux().status,
                    ..Default::default()
                };
                self.client.write_ok(seq, &ok).await?;
                return Ok(Ready::Done(true));
            }
            Some(Command::ResetConnection) if self.backend.is_none() => {
                let seq = self.client.skip_packet().await?;
                let (key, schema) = {
                    let m = self.mux();
                    (m.key.clone(), m.schema.clone())
                };
                self.mux().reset(key, schema);
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
            Some(Command::StmtReset) if self.backend.is_none() => {
                // Nothing of it lives on a connection: no cursor, no long data.
                let known =
                    stmt_id(&self.client.rbuf).is_some_and(|id| self.mux().stmts.contains_key(&id));
                let seq = self.client.skip_packet().await?;
                if known {
                    let ok = OkPacket {
                        status: self.mux().status,
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
            Some(
                Command::StmtExecute
                    | Command::StmtFetch
                    | Command::StmtReset
                    | Command::StmtSendLongData
            )
        );
        let client_id = if is_stmt_command {
            stmt_id(&self.client.rbuf)
        } else {
            None
        };
        if is_stmt_command && !client_id.is_some_and(|id| self.mux().stmts.contains_key(&id)) {
            // An id never handed out: the server's answer, without asking it.
            let what = match command {
                Some(Command::StmtExecute) => "mysqld_stmt_execute",
                Some(Command::StmtFetch) => "mysqld_stmt_fetch",
                Some(Command::StmtReset) => "mysqld_stmt_reset",
                _ => "mysqld_stmt_send_long_data",
            };
            let no_reply = command == Some(Command::StmtSendLongData);
            let seq = self.client.skip_packet().await?;
            if !no_reply {
                self.client.write_err(seq, &unknown_statement(what)).await?;
            }
            return Ok(Ready::Done(true));
        }
        let needs_lid = fx.last_insert_id || may_insert(command, &self.client.rbuf[..visible]);
        let stmt = client_id.filter(|_| command == Some(Command::StmtExecute));
        let routed = match self.route(router, command, &fx, visible, stmt) {
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
        if command == Some(Command::StmtPrepare) {
            let text: Box<[u8]> = self.client.rbuf[HEADER_LEN + 1..visible].into();
            let key = stmt_key(self.mux().schema.as_deref(), &text);
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
            let mux = self.mux();
            let id = mux.next_stmt;
            mux.next_stmt = mux.next_stmt.wrapping_add(1).max(1);
            mux.preparing = Some(Preparing { key, text, id });
            mux.prepared = None;
        }
        if let Some(id) = client_id {
            if !whole && command == Some(Command::StmtExecute) {
                // Streamed: only its head, up to the parameter types, is looked at.
                let params = self.mux().stmts.get(&id).map_or(0, |s| s.params);
                let head = Execute::head_len(params).min(len);
                while self.client.rbuf.len() < HEADER_LEN + head {
                    self.client.read_more().await?;
                }
            }
            match self.map_statement(id, command, len).await? {
                Ok(true) => {}
                Ok(false) => {
                    let seq = self.client.skip_packet().await?;
                    let ok = OkPacket {
                        status: self.mux().status,
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
        let mux = self.mux.as_mut().expect("multiplexing");
        let names_tracking = fx.touches_session_tracking
            || stmt.is_some_and(|id| mux.stmts.get(&id).is_some_and(|s| s.names_tracking));
        let entered = super::tracking::enter(backend, mux, names_tracking).await;
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
        self.mux().observed = Observed::default();
        Ok(Ready::Go(fx))
    }

    /// Makes sure the session has a connection whose state is its own. The inner error
    /// is for the client (the connection could not be had, or brought in line).
    /// `needs_lid`: the statement reads or may change `LAST_INSERT_ID()`, so the
    /// connection must hold the session's value first.
    async fn acquire(
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
                let m = self.mux.as_ref().expect("multiplexing");
                let status = self.backend.as_ref().expect("checked").status;
                m.pin_reason(status).is_some()
            };
            if !pinned {
                self.mux().hold_until = None;
                self.release_if_free().await?;
            }
        }
        while self.backend.is_none() {
            let m = self.mux.as_ref().expect("multiplexing");
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
            super::route::count(router, &pick.member, &target);
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
        let mux = self.mux.as_mut().expect("multiplexing");
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
        command: Option<Command>,
        len: usize,
    ) -> Result<Result<bool, ErrPacket>, SessionError> {
        let max = self.fe.pool_config.max_prepared_per_connection as usize;
        let found = {
            let mux = self.mux.as_ref().expect("multiplexing");
            let key = mux.stmts.get(&id).expect("checked by the caller").key.key();
            let backend = self.backend.as_mut().expect("acquired");
            backend.stmts.touch(key).map(|b| b.id)
        };
        if found.is_none() && command != Some(Command::StmtReset) {
            if let Err(err) = self.room_for_statement(true).await? {
                return Ok(Err(err));
            }
        }
        let backend = self.backend.as_mut().expect("acquired");
        let mux = self.mux.as_mut().expect("multiplexing");
        let stmt = mux.stmts.get_mut(&id).expect("checked by the caller");
        mux.bound = None;
        let backend_id = match found {
            Some(id) => id,
            None => {
                if command == Some(Command::StmtReset) {
                    return Ok(Ok(false));
                }
                Stats::incr(&self.fe.mux_stats.reprepares);
                let prepared = match backend.prepare(&stmt.text).await {
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
                let evicted = backend.stmts.evict_to(max);
                backend.stmts.insert(stmt.key.key().into(), bid, params);
                close_on(backend, &evicted).await?;
                bid
            }
        };
        put_stmt_id(&mut self.client.rbuf, backend_id);
        match command {
            Some(Command::StmtExecute) => {
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
                            super::prepared::bind_types(
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
            Some(Command::StmtSendLongData) => mux.pins.long_data = true,
            Some(Command::StmtReset) => {
                mux.pins.long_data = false;
                mux.pins.cursors.remove(&id);
            }
            _ => {}
        }
        Ok(Ok(true))
    }

    /// After the statement's response: learn what it did, and give the connection back
    /// unless something keeps it.
    pub(super) async fn mux_finish(
        &mut self,
        fx: &Effects,
        command: Option<Command>,
        client_id: Option<u32>,
    ) -> Result<(), SessionError> {
        let served = self.cache.as_ref().is_some_and(|c| c.served());
        let Some(backend) = self.backend.as_mut() else {
            return Ok(());
        };
        let mux = self.mux.as_mut().expect("multiplexing");
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
            let router = self.fe.router.load_full();
            self.note_gtid(&router, gtid);
        }
        let backend = self.backend.as_mut().expect("checked above");
        let mux = self.mux.as_mut().expect("multiplexing");
        let status = backend.status;
        mux.status = status;
        mux.apply_effects(fx, observed.status.is_some());
        mux.statement_done(fx, status);
        // A lost connection is dropped with whatever tracking it had.
        if (observed.tracking_changed || mux.own_tracking) && !backend.is_broken() {
            match super::tracking::leave(backend, mux).await {
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
        let text_explains = !fx.temp_created.is_empty()
            || !fx.tables_dropped.is_empty()
            || !fx.user_vars_assigned.is_empty()
            || !fx.sql_prepared.is_empty()
            || !fx.sql_deallocated.is_empty()
            || !fx.handler_opened.is_empty()
            || !fx.handler_closed.is_empty();
        if observed.bare_state_change && !text_explains {
            mux.pins.unknown_state = true;
        }
        // An insert id in the OK may be generated (the function's new value) or given
        // (no change): the value is read from the connection before leaving it. So is
        // one `LAST_INSERT_ID(expr)` may have set.
        if observed.last_insert_id != 0 || observed.last_insert_id_set || fx.last_insert_id {
            mux.lid_dirty = true;
            backend.last_insert_id = None;
        }
        match command {
            Some(Command::StmtPrepare) => {
                if let (Some(Preparing { key, text, id }), Some((bid, params))) =
                    (mux.preparing.take(), mux.prepared.take())
                {
                    let max = self.fe.pool_config.max_prepared_per_connection as usize;
                    // Held before the connection's statement exists, so that no sweep
                    // sees it unreferenced.
                    let key = crate::backend::refs().hold(key);
                    let mut closing = if backend.stmts.contains(key.key()) {
                        Vec::new()
                    } else {
                        backend.stmts.evict_to(max)
                    };
                    closing.extend(backend.stmts.insert(key.key().into(), bid, params));
                    let effects = crate::classify::effects::effects(&text);
                    let plain_read = crate::router::rules::is_plain_read(&text, &effects);
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
                            effects,
                            names_tracking,
                        },
                    );
                    close_on(backend, &closing).await?;
                }
                mux.preparing = None;
            }
            Some(Command::StmtExecute) => {
                if let Some(id) = client_id {
                    mux.pins.long_data = false;
                    if status.contains(StatusFlags::CURSOR_EXISTS) {
                        mux.pins.cursors.insert(id);
                    } else {
                        mux.pins.cursors.remove(&id);
                    }
                }
            }
            Some(Command::StmtFetch) => {
                if let Some(id) = client_id {
                    if status.contains(StatusFlags::LAST_ROW_SENT) || observed.status.is_none() {
                        mux.pins.cursors.remove(&id);
                    }
                }
            }
            Some(Command::ResetConnection) => {
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
        self.release_if_free().await
    }

    /// Gives the connection back unless the session must keep it; a broken one is
    /// closed. Before leaving, the connection's `LAST_INSERT_ID()` is read if a
    /// statement may have changed it.
    pub(super) async fn release_if_free(&mut self) -> Result<(), SessionError> {
        let (Some(backend), Some(_)) = (self.backend.as_mut(), self.mux.as_ref()) else {
            return Ok(());
        };
        if backend.is_broken() {
            self.backend = None;
            self.publish();
            return Ok(());
        }
        // Whether the connection goes back or stays (a long transaction), it keeps no
        // statement that no session uses.
        self.close_unreferenced().await;
        let backend = self.backend.as_mut().expect("checked");
        let mux = self.mux.as_mut().expect("multiplexing");
        let reason = mux.pin_reason(backend.status);
        if reason != mux.pinned_since {
            if let Some(r) = reason {
                self.fe.mux_stats.pin(r);
            }
            mux.pinned_since = reason;
            self.publish();
            let mux = self.mux.as_mut().expect("multiplexing");
            if reason.is_some() || mux.hold_until.is_some() {
                return Ok(());
            }
        } else if reason.is_some() || mux.hold_until.is_some() {
            return Ok(());
        }
        let backend = self.backend.as_mut().expect("checked");
        let mux = self.mux.as_mut().expect("multiplexing");
        if mux.lid_dirty {
            match backend.query_scalar("SELECT LAST_INSERT_ID()").await {
                Ok(Ok(v)) => {
                    mux.last_insert_id = v
                        .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
                        .unwrap_or(0);
                    mux.lid_dirty = false;
                    backend.last_insert_id = Some(mux.last_insert_id);
                }
                Ok(Err(err)) => {
                    tracing::debug!(%err, "LAST_INSERT_ID() unreadable: keeping the connection");
                    return Ok(());
                }
                Err(e) => {
                    // The server went away after answering: the session goes on without
                    // it (the value died with the connection; the last one known stays).
                    tracing::debug!(error = %e, "LAST_INSERT_ID() lost with its server");
                    mux.lid_dirty = false;
                    backend.mark_broken();
                    self.backend = None;
                    self.publish();
                    return Ok(());
                }
            }
            // Reading it leaves the value where it was on this connection.
        }
        let backend = self.backend.take().expect("checked");
        backend.release();
        Stats::incr(&self.fe.mux_stats.releases);
        self.publish();
        Ok(())
    }

    /// COM_SET_OPTION changed the multi-statement option: the connection is kept.
    pub(super) fn mux_pin_option(&mut self) {
        self.mux().pins.fixed_variable = true;
    }

    /// The write hold ran out while the client was idle.
    pub(super) async fn end_hold(&mut self) -> Result<(), SessionError> {
        self.mux().hold_until = None;
        self.release_if_free().await
    }

    /// Updates the session's row in the registry the admin interface and KILL read.
    pub(super) fn publish(&self) {
        match &self.backend {
            Some(b) => self.live.attach(&b.server, b.thread_id),
            None => self.live.detach(),
        }
        self.live
            .pin(self.mux.as_ref().and_then(|m| m.pinned_since));
    }
}

/// Reads the values the statement gave to `names` on the session's connection, as
/// literals that recreate them elsewhere; when they can't be read, the session is pinned.
async fn carry_user_vars(
    backend: &mut crate::backend::PooledConn,
    mux: &mut Mux,
    names: &[String],
) -> Result<(), SessionError> {
    let mut sql = String::from("SELECT ");
    for (i, name) in names.iter().enumerate() {
        let v = user_var_ref(name.as_bytes());
        // HEX: a string's own bytes, not converted to the session's result charset.
        let sep = if i > 0 { ", " } else { "" };
        let _ = write!(sql, "{sep}{v}, HEX({v}), COLLATION({v})");
    }
    let row = match backend.query_typed_row(&sql).await {
        Ok(Ok(Some(row))) if row.len() == 3 * names.len() => row,
        Ok(other) => {
            tracing::debug!(
                ?other,
                "user variables unreadable: the session keeps its connection"
            );
            mux.pins.user_vars = true;
            return Ok(());
        }
        Err(e) => {
            backend.mark_broken();
            return Err(e.into());
        }
    };
    for (name, cols) in names.iter().zip(row.chunks(3)) {
        let (kind, value) = &cols[0];
        let hex = cols[1].1.as_deref().unwrap_or_default();
        let collation = cols[2].1.as_deref().unwrap_or(b"binary");
        let literal = user_var_literal(*kind, value.as_deref(), hex, collation);
        let name: Box<[u8]> = name.as_bytes().into();
        backend.user_vars.insert(name.clone(), literal.clone());
        mux.user_vars.insert(name, literal);
    }
    Ok(())
}

/// `@name`, quoted so that any name is safe.
fn user_var_ref(name: &[u8]) -> String {
    format!("@`{}`", String::from_utf8_lossy(name).replace('`', "``"))
}

/// The SQL that recreates a user variable read back as `value` with column type `kind`,
/// its bytes in `hex` and `collation`: integers and decimals as written (their literals
/// have those types), doubles with an exponent, strings as hex with their character set
/// and collation.
fn user_var_literal(kind: u8, value: Option<&[u8]>, hex: &[u8], collation: &[u8]) -> String {
    const DECIMAL: u8 = 0;
    const TINY: u8 = 1;
    const SHORT: u8 = 2;
    const LONG: u8 = 3;
    const FLOAT: u8 = 4;
    const DOUBLE: u8 = 5;
    const LONGLONG: u8 = 8;
    const INT24: u8 = 9;
    const NEWDECIMAL: u8 = 246;
    let Some(value) = value else {
        return "NULL".into();
    };
    let text = String::from_utf8_lossy(value);
    match kind {
        TINY | SHORT | LONG | LONGLONG | INT24 | DECIMAL | NEWDECIMAL
            if !text.is_empty()
                && text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b'-' || b == b'.') =>
        {
            text.into_owned()
        }
        FLOAT | DOUBLE if text.parse::<f64>().is_ok() => {
            if text.contains(['e', 'E']) {
                text.into_owned()
            } else {
                format!("{text}e0")
            }
        }
        _ => {
            let hex = String::from_utf8_lossy(hex);
            let collation = String::from_utf8_lossy(collation);
            if collation == "binary" || !collation.contains('_') {
                format!("_binary X'{hex}'")
            } else {
                let charset = collation.split('_').next().unwrap_or("binary");
                format!("_{charset} X'{hex}' COLLATE {collation}")
            }
        }
    }
}

/// The user variables a connection must get for a session: the session's that differ,
/// and NULL for those another session left there.
fn user_var_sets(
    want: &std::collections::BTreeMap<Box<[u8]>, String>,
    have: &std::collections::BTreeMap<Box<[u8]>, String>,
) -> Vec<(Box<[u8]>, String)> {
    let mut out: Vec<(Box<[u8]>, String)> = want
        .iter()
        .filter(|(n, v)| have.get(*n) != Some(*v))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    out.extend(
        have.iter()
            .filter(|(n, v)| !want.contains_key(*n) && v.as_str() != "NULL")
            .map(|(n, _)| (n.clone(), "NULL".to_owned())),
    );
    out
}

fn assignments(sets: &[(Box<[u8]>, String)]) -> String {
    sets.iter()
        .map(|(n, v)| format!("{}={v}", user_var_ref(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The server's error for a statement id it does not know.
fn unknown_statement(what: &str) -> ErrPacket {
    ErrPacket::new(
        code::ER_UNKNOWN_STMT_HANDLER,
        "HY000",
        format!("Unknown prepared statement handler given to {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().into(), v.as_bytes().into()))
            .collect()
    }

    #[test]
    fn one_set_brings_a_connection_in_line() {
        let want = vars(&[("sql_mode", "ANSI_QUOTES"), ("time_zone", "+01:00")]);
        let have = vars(&[
            ("time_zone", "+01:00"),
            ("sort_buffer_size", "262144"),
            ("character_set_results", "latin1"),
        ]);
        let login = vec![
            Some(b"utf8mb4".to_vec()),
            Some(b"utf8mb4".to_vec()),
            None,
            Some(b"utf8mb4_general_ci".to_vec()),
        ];
        let sql = sync_statement(&want, &have, &login, None, None).unwrap();
        assert_eq!(
            sql,
            "SET SESSION sql_mode='ANSI_QUOTES', character_set_results=NULL, \
             sort_buffer_size=DEFAULT"
        );
        assert_eq!(sync_statement(&want, &want, &login, None, None), None);
        assert_eq!(
            sync_statement(&want, &want, &login, None, Some(7)).unwrap(),
            "SET SESSION last_insert_id=7"
        );
    }

    #[test]
    fn user_variables_are_recreated_with_their_type() {
        assert_eq!(
            user_var_literal(8, Some(b"-42"), b"2D3432", b"binary"),
            "-42"
        );
        assert_eq!(user_var_literal(246, Some(b"1.50"), b"", b"binary"), "1.50");
        assert_eq!(user_var_literal(5, Some(b"0.25"), b"", b"binary"), "0.25e0");
        assert_eq!(user_var_literal(5, Some(b"1e300"), b"", b"binary"), "1e300");
        assert_eq!(user_var_literal(6, None, b"", b"binary"), "NULL");
        // The text as converted for the client is not used: the hex of its own bytes is.
        assert_eq!(
            user_var_literal(253, Some(b"\xe9'"), b"C3A927", b"utf8mb4_unicode_ci"),
            "_utf8mb4 X'C3A927' COLLATE utf8mb4_unicode_ci"
        );
        assert_eq!(
            user_var_literal(252, Some(b"\x00\xff"), b"00FF", b"binary"),
            "_binary X'00FF'"
        );
        assert_eq!(user_var_ref(b"a`b"), "@`a``b`");
        let want: std::collections::BTreeMap<Box<[u8]>, String> =
            [(b"a".as_slice().into(), "1".to_owned())].into();
        let have: std::collections::BTreeMap<Box<[u8]>, String> = [
            (b"a".as_slice().into(), "2".to_owned()),
            (b"other".as_slice().into(), "'x'".to_owned()),
            (b"gone".as_slice().into(), "NULL".to_owned()),
        ]
        .into();
        assert_eq!(
            assignments(&user_var_sets(&want, &have)),
            "@`a`=1, @`other`=NULL"
        );
        assert!(user_var_sets(&want, &want).is_empty());
    }

    #[test]
    fn literals_survive_any_sql_mode() {
        assert_eq!(literal(b"sort_buffer_size", b"262144"), "262144");
        assert_eq!(literal(b"timestamp", b"5.000000"), "5.000000");
        assert_eq!(literal(b"auto_increment_offset", b"-1"), "-1");
        assert_eq!(literal(b"time_zone", b"+01:00"), "'+01:00'");
        assert_eq!(literal(b"sql_mode", b""), "''");
        assert_eq!(literal(b"character_set_results", b""), "NULL");
        assert_eq!(literal(b"x", b"a'b"), "X'612762'");
        assert_eq!(literal(b"x", b"a\\b"), "X'615C62'");
        assert_eq!(literal(b"x", b"."), "'.'");
        assert_eq!(literal(b"x", b"1.2.3"), "'1.2.3'");
    }

    #[test]
    fn pins_end_when_their_state_is_cleared() {
        let key = PoolKey::new(
            std::sync::Arc::new(crate::auth::BackendCredentials::new(
                "u",
                crate::secret::Secret(String::new()),
            )),
            crate::backend::ConnParams {
                wire_caps: 0,
                mariadb_caps: 0,
                charset: 45,
                track_state: true,
            },
        );
        let mut m = Mux::new(key, None, false, true);
        let idle = StatusFlags(StatusFlags::AUTOCOMMIT);
        let create = Effects {
            temp_created: vec!["t".into()],
            ..Default::default()
        };
        m.apply_effects(&create, false);
        assert_eq!(m.pin_reason(idle), None, "a failed CREATE leaves nothing");
        m.apply_effects(&create, true);
        assert_eq!(m.pin_reason(idle), Some(PinReason::TemporaryTable));
        let drop = Effects {
            tables_dropped: vec!["t".into()],
            ..Default::default()
        };
        m.apply_effects(&drop, true);
        assert_eq!(m.pin_reason(idle), None);

        let lock = Effects {
            get_lock: true,
            ..Default::default()
        };
        m.apply_effects(&lock, true);
        m.apply_effects(&lock, true);
        let release = Effects {
            release_lock: true,
            ..Default::default()
        };
        m.apply_effects(&release, true);
        assert_eq!(m.pin_reason(idle), Some(PinReason::NamedLock));
        m.apply_effects(&release, true);
        assert_eq!(m.pin_reason(idle), None);

        let calc = Effects {
            calc_found_rows: true,
            ..Default::default()
        };
        m.apply_effects(&calc, true);
        m.statement_done(&calc, idle);
        assert_eq!(m.pin_reason(idle), Some(PinReason::FoundRows));
        m.statement_done(&Effects::default(), idle);
        assert_eq!(m.pin_reason(idle), None);

        let in_trx = StatusFlags(StatusFlags::AUTOCOMMIT | StatusFlags::IN_TRANS);
        assert_eq!(m.pin_reason(in_trx), Some(PinReason::Transaction));
        m.vars
            .insert(b"sql_log_bin".as_slice().into(), b"OFF".as_slice().into());
        assert_eq!(m.pin_reason(idle), Some(PinReason::SqlLogBin));
    }
}
