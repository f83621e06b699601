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

mod finish;
mod lease;
pub(super) mod parcel;
mod pins;
pub(super) mod replay;
mod row_count;
mod scatter;
mod shard;
mod split;
mod user_vars;
mod wrap;
mod xa;
pub(super) use lease::Ready;
pub use pins::PinReason;
use pins::Pins;
pub(super) use shard::Placed;

use super::prepared::close_on;
use super::{Session, Statement};
use crate::backend::{PoolKey, StmtRef, Vars, LOGIN_VARS};
use crate::classify::effects::Effects;
use crate::error::{code, Failed, SessionError};
use crate::stats::Stats;
use sluice_wire::command::Command;
use sluice_wire::packet::split_packet;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::response::{ErrPacket, OkPacket};
use sluice_wire::session_track::{parse_full_ok, untracked_ok, StateChange};
use sluice_wire::statement::{self, Execute, PrepareOk};
use sluice_wire::tracker::ResponseKind;
use sluice_wire::ProtocolError;
use sluice_wire::StatusFlags;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use super::MAX_BUFFERED;

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
    /// Sessions pinned, by reason (indexed by `reason as usize`, as [`PinReason::ALL`]).
    pub pins: [AtomicU64; PinReason::COUNT],
}

impl MuxStats {
    pub fn pin(&self, reason: PinReason) {
        Stats::incr(&self.pins[reason as usize]);
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
    /// What executing it does to unmovable state, when anything (most statements do
    /// nothing of the kind, and an execute takes a copy: of nothing, then).
    effects: Option<Box<Effects>>,
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
    /// What `ROW_COUNT()` reads next when the server no longer knows it: the count of
    /// a write Sluice wrapped in a transaction (`mux/wrap.rs`), whose COMMIT left 0.
    /// Kept over the commands that leave the server's count as it is.
    pub wrapped_rows: Option<i64>,
    /// By the client's id, looked up for every command naming one. Ids are Sluice's
    /// own, handed out in turn: hashed with one multiplication, and no per-map keys.
    stmts: crate::id_hash::IdMap<u32, ClientStmt>,
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
    /// The Galera node that took the session's last write when writes spread over every
    /// node: its reads go there, where that write is committed.
    pub home: Option<std::sync::Arc<crate::router::Member>>,
    /// With `[[shards]]`: the shard the session is on (`None`: the default shard), what
    /// it keeps for the others it used, and a `BEGIN` not sent yet (`mux/shard.rs`).
    pub shard: Option<usize>,
    shard_state: crate::id_hash::IdMap<usize, shard::ShardState>,
    deferred_begin: Option<Box<[u8]>>,
    /// A transaction over several shards (`mux/xa.rs`), and whether the transaction
    /// open wrote anything (a statement other than a plain read reached a server).
    /// Boxed: 80 bytes every multiplexed session kept, for sharded transactions only.
    spread: Option<Box<xa::Spread>>,
    trx_wrote: bool,
    /// When the session started (its login, or its last reset or change of user), and
    /// the grants its account had then (learnt at its first statement): it runs only
    /// on connections that logged in with them (`session/grants.rs`).
    pub started: std::time::Instant,
    pub grants: Option<crate::backend::Grants>,
    /// Under `autocommit = 0`, a SAVEPOINT ran since the last COMMIT or ROLLBACK: the
    /// server holds a transaction its status may not report yet.
    unreported_transaction: bool,
    /// The client's own `session_track_*` settings, once a connection told the defaults.
    pub(super) tracking: Option<std::sync::Arc<sluice_wire::session_track::Tracking>>,
    /// The statement in flight runs with the client's tracking settings on the
    /// connection: its OK packets are already the client's.
    pub(super) own_tracking: bool,
    /// The values its variables it never set have: those the server's globals gave the
    /// session's first connection (`session/globals.rs`).
    pub globals: Option<std::sync::Arc<crate::backend::Globals>>,
    /// The transaction open on the writer, kept to run it again on a new writer.
    pub(in crate::frontend::session) replay: replay::ReplayLog,
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
            wrapped_rows: None,
            stmts: HashMap::default(),
            next_stmt: 1,
            translate_ok,
            lenenc_info,
            preparing: None,
            prepared: None,
            bound: None,
            observed: Observed::default(),
            pinned_since: None,
            last_gtid: None,
            home: None,
            shard: None,
            shard_state: Default::default(),
            deferred_begin: None,
            spread: None,
            trx_wrote: false,
            unreported_transaction: false,
            started: std::time::Instant::now(),
            grants: None,
            tracking: None,
            own_tracking: false,
            globals: None,
            replay: replay::ReplayLog::default(),
        }
    }

    /// Back to a fresh login's state (COM_RESET_CONNECTION, COM_CHANGE_USER).
    /// Whether the session's next statement starts a transaction of its own: none is
    /// open and autocommit is on.
    pub(super) fn autocommits(&self) -> bool {
        !self.status.in_transaction() && !self.autocommit_off()
    }

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
        if status.in_transaction() || self.spread.is_some() || self.unreported_transaction {
            return Some(PinReason::Transaction);
        }
        if let Some(r) = self.pins.reason() {
            return Some(r);
        }
        if self
            .vars
            .get(b"sql_log_bin".as_slice())
            .is_some_and(|v| v.eq_ignore_ascii_case(b"OFF") || v == b"0")
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
                        self.vars.insert(&name, value);
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

    /// Learns the session state the OK of a `COMMIT` Sluice added after an autocommit
    /// write reports (its `last_gtid`), leaving what the write itself did as observed.
    pub fn observe_added_commit(&mut self, packet: &[u8]) -> Result<(), ProtocolError> {
        let Some((_, payload)) = split_packet(packet) else {
            return Err(ProtocolError::Malformed("OK packet"));
        };
        let ok = parse_full_ok(payload, true)?;
        for change in &ok.changes {
            self.track(change);
        }
        if !ok.changes.is_empty() {
            self.observed.state_changed = true;
        }
        Ok(())
    }

    /// The session's `LAST_INSERT_ID()` is `id`, known without its connection (which
    /// was lost).
    pub fn set_last_insert_id(&mut self, id: u64) {
        self.last_insert_id = id;
        self.lid_dirty = false;
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

    /// A statement ended: one-statement pins that it consumed are cleared, and whether
    /// the server holds a transaction it does not report is updated.
    fn statement_done(&mut self, fx: &Effects, status: StatusFlags) {
        if !fx.calc_found_rows {
            self.pins.found_rows = false;
        }
        if !fx.next_transaction && !status.in_transaction() {
            self.pins.next_transaction = false;
        }
        // Under `autocommit = 0` the server's transaction begins with the statement after
        // the SET, but its status says so only once a table is touched: a SAVEPOINT
        // before that is state there that moving would lose (1305 on RELEASE, a
        // ROLLBACK TO that undoes nothing). Statements that touch no table and set no
        // savepoint leave nothing a later one could miss.
        if !self.autocommit_off() || fx.ends_transaction {
            self.unreported_transaction = false;
        } else if fx.savepoint {
            self.unreported_transaction = true;
        }
    }

    /// The session's `autocommit` is off.
    fn autocommit_off(&self) -> bool {
        self.vars
            .get(b"autocommit".as_slice())
            .is_some_and(|v| v.eq_ignore_ascii_case(b"OFF") || v == b"0")
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
    for (name, value) in want.iter() {
        if have.get(name) != Some(value) {
            add(&mut sql, name, &literal(name, value));
        }
    }
    for (name, _) in have.iter() {
        if want.contains_key(name) {
            continue;
        }
        let login = LOGIN_VARS
            .iter()
            .position(|v| v.as_bytes() == name)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
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
        m.vars.insert("sql_log_bin", "OFF");
        assert_eq!(m.pin_reason(idle), Some(PinReason::SqlLogBin));
        m.vars.remove(b"sql_log_bin".as_slice());

        // autocommit = 0: a SAVEPOINT lives in a transaction the server reports only
        // once a table is touched; it holds until COMMIT or ROLLBACK, or autocommit on.
        let no_autocommit = StatusFlags(0);
        let off = |m: &mut Mux, v: &[u8]| {
            m.vars.insert("autocommit", v);
        };
        off(&mut m, b"OFF");
        m.statement_done(&Effects::default(), no_autocommit);
        assert_eq!(m.pin_reason(no_autocommit), None, "nothing to lose yet");
        let savepoint = Effects {
            savepoint: true,
            ..Default::default()
        };
        m.statement_done(&savepoint, no_autocommit);
        assert_eq!(m.pin_reason(no_autocommit), Some(PinReason::Transaction));
        m.statement_done(&Effects::default(), no_autocommit);
        assert_eq!(m.pin_reason(no_autocommit), Some(PinReason::Transaction));
        let commit = Effects {
            ends_transaction: true,
            ..Default::default()
        };
        m.statement_done(&commit, no_autocommit);
        assert_eq!(m.pin_reason(no_autocommit), None);
        m.statement_done(&savepoint, no_autocommit);
        off(&mut m, b"ON");
        m.statement_done(&Effects::default(), idle);
        assert_eq!(m.pin_reason(idle), None, "autocommit on commits");
        // With autocommit on and no transaction, the server keeps no savepoint.
        m.statement_done(&savepoint, idle);
        assert_eq!(m.pin_reason(idle), None);
        off(&mut m, b"OFF");
        m.statement_done(&savepoint, no_autocommit);
        assert_eq!(m.pin_reason(no_autocommit), Some(PinReason::Transaction));
    }
}
