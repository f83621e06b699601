//! The session's side of the query cache, between classify and the backend: serve hits
//! from stored packets, fill misses while streaming, and turn the writes this session
//! commits into invalidations. Only runs when cache rules are configured.

use super::relay::Relayed;
use super::Session;
use crate::cache::table_keys::{self, TableKeys};
use crate::cache::{self, Candidate, Cause, Entry, Fill, KeyHash, Lookup, QueryCache, RowSet};
use crate::classify::keys::canon::Canon;
use crate::classify::sql::{self, Analysis, Hints, TableRef};
use crate::error::{BackendError, SessionError};
use crate::stats::Stats;
use bytes::{Buf, Bytes};
use sluice_wire::command::Command;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::session_track::StateChange;
use sluice_wire::statement::{Bound, Execute, PrepareOk};
use sluice_wire::tracker::{Event, Outcome, ResponseKind, ResponseTracker, Scanner};
use sluice_wire::{CapabilityFlags, StatusFlags};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

mod fill;
mod hit;
pub(super) mod parcel;
mod query;
mod step;
mod stmt;

pub(super) use step::CacheStep;

use super::MAX_BUFFERED;

/// Prepare responses are recorded up to this size to learn the statement id.
const PREPARE_RECORD: usize = 64 << 10;

/// Session settings that change a result or its encoding, read from the backend when
/// they may have changed. The first value is also the default schema.
pub(crate) const SETTINGS_PROBE: &str = "SELECT DATABASE(), @@character_set_client, \
    @@character_set_connection, @@character_set_results, @@collation_connection, \
    @@sql_mode, @@time_zone, @@lc_time_names, @@div_precision_increment, \
    @@group_concat_max_len, @@sql_select_limit, @@max_sort_length, \
    @@default_week_format, @@sql_auto_is_null";

/// A copy of a response as it streams, given up past `limit` bytes.
pub struct Recording {
    buf: Vec<u8>,
    limit: usize,
    abandoned: bool,
}

impl Recording {
    pub(super) fn new(limit: usize) -> Recording {
        Recording {
            buf: Vec::new(),
            limit,
            abandoned: false,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.push_parts(bytes, &[]);
    }

    /// Records `first` then `second`. The first bytes recorded size the buffer exactly:
    /// a response that arrives whole (most do) becomes its entry without a reallocation,
    /// and without the spare capacity that would make the entry's bytes one allocation
    /// more.
    pub fn push_parts(&mut self, first: &[u8], second: &[u8]) {
        let len = first.len() + second.len();
        if self.abandoned || len == 0 {
            return;
        }
        if self.buf.len() + len > self.limit {
            self.abandon();
            return;
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(len);
        }
        self.buf.extend_from_slice(first);
        self.buf.extend_from_slice(second);
    }

    pub fn abandon(&mut self) {
        self.abandoned = true;
        self.buf = Vec::new();
    }

    /// What was recorded, unless it outgrew its limit.
    pub(super) fn finished(self) -> Option<Vec<u8>> {
        (!self.abandoned).then_some(self.buf)
    }
}

/// What a prepared statement does, learnt when it was prepared.
enum StmtKind {
    /// A cacheable read of these tables.
    Read(Arc<[TableRef]>),
    /// Writes these tables (`None`: unknown ones).
    Write(Option<Vec<TableRef>>),
    /// May change session settings.
    SessionChange,
    /// Neither cached nor writing.
    Other,
}

struct Prepared {
    text: Bytes,
    params: u16,
    kind: StmtKind,
    /// Parameter types from the last execute that sent them; later executes may omit
    /// them and mean these.
    types: Option<Vec<u8>>,
    /// COM_STMT_SEND_LONG_DATA was used for the next execute: its parameters are not
    /// all in the execute packet, so it can't be keyed.
    long_data: bool,
    /// The server has been sent the types in `types`.
    server_has_types: bool,
    /// Its text's shape, for the digest statistics, once a miss worked it out.
    shape: Option<crate::classify::facts::Shape>,
    /// The cache rule its text found on its first miss: its text does not change.
    rule: Option<cache::RuleMemo>,
}

/// Writes this session made that are not yet committed.
#[derive(Default)]
struct Pending {
    tables: BTreeSet<TableRef>,
    /// Tables of which only rows of these keys were written.
    rows: BTreeMap<TableRef, BTreeSet<Canon>>,
    all: bool,
}

impl Pending {
    fn is_empty(&self) -> bool {
        !self.all && self.tables.is_empty() && self.rows.is_empty()
    }
}

/// Keys of one table a transaction's writes are remembered by; past this many, its
/// whole table is invalidated at commit instead.
const MAX_PENDING_KEYS: usize = 10_000;

pub struct CacheState {
    cache: Arc<QueryCache>,
    /// The session's part of every key: user, wire flags and settings. `None` until
    /// probed, and again after anything that may have changed the settings.
    prefix: Option<Vec<u8>>,
    /// The default schema; the outer `None` means unknown.
    schema: Option<Option<String>>,
    /// The settings probe failed: no caching until the settings change again.
    probe_failed: bool,
    pending: Pending,
    /// The session created a temporary table, which may shadow a real one: nothing it
    /// reads is cached or served from the cache until it resets.
    temp_tables: bool,
    stmts: crate::id_hash::IdMap<u32, Prepared>,
    /// The command in flight, or the last one, was answered from the cache.
    served: bool,
    /// The command in flight is a read the cache would store (a miss going to the server).
    reading: bool,
    /// The buffer lookups build their keys in, kept for the next.
    key: Vec<u8>,
}

impl CacheState {
    pub fn new(cache: Arc<QueryCache>) -> CacheState {
        CacheState {
            cache,
            prefix: None,
            schema: None,
            probe_failed: false,
            pending: Pending::default(),
            temp_tables: false,
            stmts: HashMap::default(),
            served: false,
            reading: false,
            key: Vec::new(),
        }
    }

    /// The backend connection changed or was reset: nothing is known of it.
    pub fn reset(&mut self, schema: Option<&[u8]>) {
        self.flush();
        self.prefix = None;
        self.schema = Some(schema.map(|s| String::from_utf8_lossy(s).into_owned()));
        self.probe_failed = false;
        self.temp_tables = false;
        self.stmts.clear();
    }

    fn settings_changed(&mut self) {
        self.prefix = None;
        self.schema = None;
        self.probe_failed = false;
    }

    fn add_writes(&mut self, tables: Option<Vec<TableRef>>) {
        match tables {
            // An unqualified name with the schema unknown could be any table.
            Some(t) if self.schema.is_none() && t.iter().any(|t| t.schema.is_empty()) => {
                self.pending.all = true
            }
            Some(t) => self.pending.tables.extend(t),
            None => self.pending.all = true,
        }
    }

    /// A write statement (`params`: a prepared one's bound values): by key when its one
    /// table's key tells its rows, else by table.
    fn add_write(&mut self, sql: &[u8], tables: Option<Vec<TableRef>>, params: Option<&[Bound]>) {
        if table_keys::may_change_keys(sql) {
            match &tables {
                Some(t) => self.cache.keys.forget(t),
                None => self.cache.keys.forget_all(),
            }
        }
        if let Some([t]) = tables.as_deref() {
            let key = self.cache.keys.get(t).flatten();
            if let Some(rows) = key.and_then(|k| table_keys::rows_by_key(&k, t, sql, params, true))
            {
                let keys = self.pending.rows.entry(rows.table).or_default();
                keys.extend(rows.keys);
                if keys.len() > MAX_PENDING_KEYS {
                    self.pending.rows.remove(t);
                    self.pending.tables.insert(t.clone());
                }
                return;
            }
        }
        self.add_writes(tables);
    }

    /// A response is about to reach the client, ending with `status` (`None` for an
    /// error, which leaves the session's `previous` status as it was), its last packet
    /// `ok` when that is an OK packet the caller has whole. Session state the server
    /// reports changed makes the settings unknown, unless what it reports leaves them
    /// as they were ([`settings_may_have_changed`]); if no transaction is open, the
    /// writes the statement made (or committed) are bumped now. A response that never
    /// ends loses the backend, and so the session, whose drop bumps them.
    ///
    /// A result set's end carries no report, and MariaDB leaves the flag set on every
    /// result set after an OK that reported a change (any COMMIT reports `last_gtid`)
    /// until the next OK: on the end of a read the cache would store (no user variable,
    /// no `SET`, nothing the analysis sees changing the session) the flag is that
    /// leftover and is not taken for a change.
    pub fn response_ending(
        &mut self,
        status: Option<StatusFlags>,
        previous: StatusFlags,
        ok: Option<&[u8]>,
    ) {
        if status.is_some_and(|s| s.contains(StatusFlags::SESSION_STATE_CHANGED)) {
            let changed = match ok {
                Some(ok) => settings_may_have_changed(ok),
                None => !self.reading,
            };
            if changed {
                self.settings_changed();
            }
        }
        if !status.unwrap_or(previous).in_transaction() {
            self.flush();
        }
    }

    /// A statement Sluice answered itself wrote `tables` (`None`: it may have written
    /// any) and left the session with `status`: as [`Self::response_ending`].
    pub(super) fn wrote(&mut self, tables: Option<Vec<TableRef>>, status: StatusFlags) {
        self.add_writes(tables);
        self.response_ending(Some(status), status, None);
    }

    /// The session's writes committed (or it is outside a transaction): make every
    /// entry that read those tables stale.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        if pending.all {
            self.cache.invalidate_all(Cause::Write);
            return;
        }
        if !pending.tables.is_empty() {
            self.cache.invalidate_tables(&pending.tables, Cause::Write);
        }
        for (table, keys) in pending.rows {
            if !pending.tables.contains(&table) {
                let rows = RowSet {
                    table,
                    keys: keys.into_iter().collect(),
                };
                self.cache.invalidate_rows(&rows, Cause::Write);
            }
        }
    }

    /// A key done with goes back as the buffer the next lookup builds its key in
    /// (a miss took the buffer with its key).
    fn keep_key_buffer(&mut self, key: Vec<u8>) {
        if key.capacity() > self.key.capacity() {
            self.key = key;
        }
    }

    /// The command in flight, or the last one, was answered from the cache.
    pub(super) fn served(&self) -> bool {
        self.served
    }

    /// The client closed a prepared statement that never reached the cache's path.
    pub(super) fn forget_statement(&mut self, id: u32) {
        self.stmts.remove(&id);
    }

    fn known_schema(&self) -> Option<&str> {
        self.schema.as_ref().and_then(|s| s.as_deref())
    }
}

impl Drop for CacheState {
    /// A session can end with writes not yet bumped (its backend lost mid-commit): they
    /// may have committed, and a needless invalidation costs only a refill.
    fn drop(&mut self) {
        self.flush();
    }
}

/// Why a statement is not served from the cache before it is even looked up.
fn eligible(state: &CacheState, status: StatusFlags, hints: Hints) -> bool {
    !hints.nocache
        && status.contains(StatusFlags::AUTOCOMMIT)
        && !status.in_transaction()
        && !state.temp_tables
        && !state.probe_failed
        && state.cache.has_rules()
}

impl Session {
    fn cache_state(&mut self) -> &mut CacheState {
        self.cache.as_mut().expect("only called with a cache")
    }

    fn status(&self) -> StatusFlags {
        self.last_status()
    }

    /// Forwards a command with the cache in the path. Returns false when the session
    /// must end, as [`Session::relay`] does. The cache knows prepared statements by the
    /// client's id (`stmt.client_id`), whatever id multiplexing put in the packet.
    pub(super) async fn forward_cached(
        &mut self,
        stmt: &super::Statement,
    ) -> Result<Relayed, SessionError> {
        let (kind, len, client_id) = (stmt.kind, stmt.len, stmt.client_id);
        if let Some(t) = self.stmt.trace.as_deref_mut() {
            t.cache_at = Some(std::time::Instant::now());
        }
        let step = std::mem::take(&mut self.stmt.cache_step);
        let state = self.cache_state();
        state.served = false;
        state.reading = false;
        let step = step.still_for(state);
        let going_on = match stmt.command {
            Command::Query => self.query_cached(kind, len, step).await?,
            Command::StmtPrepare => self.prepare_tracked(kind, len).await?,
            Command::StmtExecute => self.execute_cached(kind, len, client_id, step).await?,
            c @ (Command::StmtClose | Command::StmtReset | Command::StmtSendLongData) => {
                let id = client_id;
                let state = self.cache_state();
                if let Some(id) = id {
                    match c {
                        Command::StmtClose => {
                            state.stmts.remove(&id);
                        }
                        _ => {
                            if let Some(s) = state.stmts.get_mut(&id) {
                                s.long_data = c == Command::StmtSendLongData;
                            }
                        }
                    }
                }
                self.relay(kind).await?
            }
            Command::Ping | Command::Statistics | Command::FieldList => self.relay(kind).await?,
            Command::ResetConnection => {
                let going_on = self.relay(kind).await?;
                let state = self.cache_state();
                state.reset(None);
                state.schema = None;
                going_on
            }
            // COM_INIT_DB, COM_SET_OPTION and the rest: the settings may differ after.
            _ => {
                let going_on = self.relay(kind).await?;
                self.cache_state().settings_changed();
                going_on
            }
        };
        Ok(going_on)
    }

    /// Reads the settings that key this session's entries. False when they can't be
    /// known (the session then caches nothing until they change).
    async fn probe_settings(&mut self) -> Result<bool, SessionError> {
        let Some(backend) = self.backing.conn_mut() else {
            return Ok(false);
        };
        let row = match backend.query_row(SETTINGS_PROBE).await {
            Ok(row) => Ok(row),
            Err(failed) => Err(failed.answered()?),
        };
        let wire = self.client.caps.0 & CapabilityFlags::WIRE_FORMAT;
        let mariadb = self.client.mariadb_caps;
        let user = self.user.name.clone();
        let state = self.cache_state();
        match row {
            Ok(Some(values)) if !values.is_empty() => {
                let (prefix, schema) = session_key(&user, wire, mariadb, &values);
                state.schema = Some(schema);
                state.prefix = Some(prefix);
                Ok(true)
            }
            other => {
                tracing::debug!(result = ?other.err(), "session settings unknown: not caching");
                state.probe_failed = true;
                Ok(false)
            }
        }
    }

    /// Makes sure the settings (and so the default schema) are known, probing if
    /// needed. False when they can't be.
    async fn settings_known(&mut self) -> Result<bool, SessionError> {
        let state = self.cache_state();
        if state.prefix.is_some() && state.schema.is_some() {
            return Ok(true);
        }
        if state.probe_failed {
            return Ok(false);
        }
        self.probe_settings().await
    }
}

/// Whether an OK packet's session-state block (its payload, as a client with
/// `CLIENT_SESSION_TRACK` receives it) may mean a setting in the key changed: the schema,
/// a variable [`SETTINGS_PROBE`] reads, or a change the server did not name (variable
/// tracking may be off). A COMMIT's `last_gtid` changes no result.
pub(crate) fn settings_may_have_changed(ok: &[u8]) -> bool {
    const KEYED: &[&str] = &[
        "character_set_client",
        "character_set_connection",
        "character_set_results",
        "collation_connection",
        "sql_mode",
        "time_zone",
        "lc_time_names",
        "div_precision_increment",
        "group_concat_max_len",
        "sql_select_limit",
        "max_sort_length",
        "default_week_format",
        "sql_auto_is_null",
    ];
    let Ok(ok) = sluice_wire::session_track::parse_full_ok(ok, true) else {
        return true;
    };
    let (mut named, mut unnamed) = (false, false);
    for change in &ok.changes {
        match change {
            StateChange::Schema(_) => return true,
            StateChange::SystemVariable { name, .. } => {
                if KEYED
                    .iter()
                    .any(|k| name.eq_ignore_ascii_case(k.as_bytes()))
                {
                    return true;
                }
                named = true;
            }
            StateChange::StateChanged => unnamed = true,
            _ => {}
        }
    }
    ok.changes.is_empty() || unnamed && !named
}

/// The session part of keys, from the user, the client's wire flags and the values of
/// [`SETTINGS_PROBE`]; with the default schema those values name.
pub(crate) fn session_key(
    user: &str,
    wire: u32,
    mariadb: u32,
    values: &[Option<Vec<u8>>],
) -> (Vec<u8>, Option<String>) {
    let mut prefix = Vec::with_capacity(128);
    push_field(&mut prefix, user.as_bytes());
    prefix.extend_from_slice(&wire.to_le_bytes());
    prefix.extend_from_slice(&mariadb.to_le_bytes());
    for v in values {
        match v {
            Some(b) => push_field(&mut prefix, b),
            None => prefix.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
    }
    let schema = values
        .first()
        .cloned()
        .flatten()
        .map(|s| String::from_utf8_lossy(&s).into_owned());
    (prefix, schema)
}

fn push_field(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// A read whose `CONNECTION_ID()` Sluice replaced by the session's id looks constant,
/// but it is not cached, as the text the client sent would not be.
fn own_id_uncacheable(analysis: Analysis, rewritten: bool) -> Analysis {
    match analysis {
        Analysis::Read {
            tables,
            uncacheable: None,
        } if rewritten => Analysis::Read {
            tables,
            uncacheable: Some("CONNECTION_ID()"),
        },
        other => other,
    }
}

/// `CREATE [OR REPLACE] TEMPORARY TABLE ...`.
fn creates_temporary(text: &[u8]) -> bool {
    let head = &text[..text.len().min(128)];
    let upper: Vec<u8> = head.to_ascii_uppercase();
    let words: Vec<&[u8]> = upper
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .take(4)
        .collect();
    words.first() == Some(&&b"CREATE"[..]) && words.contains(&&b"TEMPORARY"[..])
}

/// Whether a response, as its relay's scanner saw it (`outcome`), may be stored: one
/// complete result set (not an OK, an error or a file request) without warnings (a
/// replay could not show them), the session still outside any transaction. Read from
/// the scan the relay made anyway, not by walking the recorded packets again.
pub(crate) fn storable(outcome: &Outcome, status: StatusFlags) -> bool {
    status.contains(StatusFlags::AUTOCOMMIT)
        && !status.in_transaction()
        && !status.more_results()
        && outcome.one_clean_result_set()
}

/// Sends `request` and reads its whole response without a client (a background
/// refresh), with what its scan saw of it. `None` when it is larger than `limit`. With
/// `translate`, OK packets are recorded without session tracking, for a client that did
/// not negotiate it (the info string length-coded when it holds true).
pub(crate) async fn fetch(
    backend: &mut crate::backend::PooledConn,
    request: &[u8],
    kind: ResponseKind,
    limit: usize,
    translate: Option<bool>,
) -> Result<Option<(Vec<u8>, Outcome)>, BackendError> {
    backend.write_all(request).await?;
    let mut scanner = Scanner::new(ResponseTracker::new(kind, backend.caps), 1);
    let lenenc_info = translate.unwrap_or(false);
    scanner.intercept_ok(translate.is_some());
    let mut record = Recording::new(limit);
    loop {
        let (n, event) = scanner
            .scan(&backend.rbuf)
            .map_err(|source| BackendError::Protocol {
                server: backend.server.name.clone(),
                source,
            })?;
        record.push(&backend.rbuf[..n]);
        backend.advance(n);
        match event {
            Some(Event::Ok { len }) => {
                let translated = sluice_wire::packet::split_packet(&backend.rbuf[..len])
                    .ok_or(sluice_wire::ProtocolError::Malformed("OK packet"))
                    .and_then(|(seq, p)| {
                        Ok((
                            seq,
                            sluice_wire::session_track::translate_ok(p, lenenc_info)?,
                        ))
                    })
                    .map_err(|source| BackendError::Protocol {
                        server: backend.server.name.clone(),
                        source,
                    })?;
                let mut packet = bytes::BytesMut::new();
                sluice_wire::packet::write_packet(&mut packet, translated.0, &translated.1);
                record.push(&packet);
                backend.advance(len);
            }
            Some(Event::Done(status)) => {
                if let Some(s) = status {
                    backend.status = s;
                }
                let outcome = scanner.outcome();
                return Ok((!record.abandoned).then_some((record.buf, outcome)));
            }
            Some(Event::LocalInfile) => {
                return Err(BackendError::Protocol {
                    server: backend.server.name.clone(),
                    source: sluice_wire::ProtocolError::Malformed("LOCAL INFILE request to a read"),
                })
            }
            // Never reported: rows are not intercepted here, they are recorded as they pass.
            Some(Event::Column { .. } | Event::Row { .. }) => {
                return Err(BackendError::Protocol {
                    server: backend.server.name.clone(),
                    source: sluice_wire::ProtocolError::Malformed("an intercepted row"),
                })
            }
            None => {
                backend.read_more().await?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::packet::write_packet;
    use sluice_wire::response::eof_payload;

    #[test]
    fn a_recording_holds_what_it_was_given_up_to_its_limit() {
        let mut whole = Recording::new(100);
        whole.push_parts(b"rows", b"ok");
        let buf = whole.finished().expect("within its limit");
        assert_eq!(buf, b"rowsok");
        assert_eq!(
            buf.capacity(),
            buf.len(),
            "a response that came whole is sized exactly"
        );
        let mut parts = Recording::new(100);
        for part in [&b"ab"[..], b"", b"cde", b"f"] {
            parts.push(part);
        }
        assert_eq!(parts.finished().unwrap(), b"abcdef");
        let mut over = Recording::new(5);
        over.push_parts(b"abc", b"");
        over.push_parts(b"de", b"f");
        assert!(over.abandoned && over.finished().is_none());
    }

    fn packets(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = bytes::BytesMut::new();
        for (i, p) in payloads.iter().enumerate() {
            write_packet(&mut out, i as u8 + 1, p);
        }
        out.to_vec()
    }

    /// What the relay's scan of `bytes` (a text query's response) saw.
    fn scanned(bytes: &[u8]) -> Outcome {
        let tracker = ResponseTracker::new(ResponseKind::Query, CapabilityFlags(0));
        let mut scanner = Scanner::new(tracker, 1);
        let _ = scanner.scan(bytes);
        scanner.outcome()
    }

    #[test]
    fn only_clean_result_sets_are_stored() {
        let ok = StatusFlags(StatusFlags::AUTOCOMMIT);
        let eof = eof_payload(0, ok);
        let rows = packets(&[&[1], b"coldef", &eof, b"\x011", &eof]);
        assert!(storable(&scanned(&rows), ok));
        assert!(!storable(
            &scanned(&rows),
            StatusFlags(StatusFlags::AUTOCOMMIT | StatusFlags::IN_TRANS)
        ));
        assert!(!storable(&scanned(&rows), StatusFlags(0)), "autocommit off");
        let warned = packets(&[&[1], b"coldef", &eof, b"\x011", &eof_payload(1, ok)]);
        assert!(!storable(&scanned(&warned), ok));
        let failed = packets(&[&[1], b"coldef", &eof, b"\x011", b"\xff\x01\x02#HY000boom"]);
        assert!(!storable(&scanned(&failed), ok));
        let okay = packets(&[b"\x00\x00\x00\x02\x00\x00\x00"]);
        assert!(!storable(&scanned(&okay), ok));
        assert!(
            !storable(&scanned(&rows[..rows.len() - 2]), ok),
            "truncated"
        );
    }

    /// An OK payload with these session-state entries (type, data).
    fn ok_with(entries: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut block = Vec::new();
        for (kind, data) in entries {
            block.push(*kind);
            block.push(data.len() as u8);
            block.extend_from_slice(data);
        }
        let status = StatusFlags::AUTOCOMMIT | StatusFlags::SESSION_STATE_CHANGED;
        let mut ok = vec![0, 0, 0];
        ok.extend_from_slice(&status.to_le_bytes());
        ok.extend_from_slice(&[0, 0, 0]);
        ok.push(block.len() as u8);
        ok.extend_from_slice(&block);
        ok
    }

    fn variable(name: &str, value: &str) -> (u8, Vec<u8>) {
        let mut d = vec![name.len() as u8];
        d.extend_from_slice(name.as_bytes());
        d.push(value.len() as u8);
        d.extend_from_slice(value.as_bytes());
        (0, d)
    }

    #[test]
    fn only_changes_to_keyed_settings_make_them_unknown() {
        let commit = ok_with(&[variable("last_gtid", "0-1-7")]);
        assert!(!settings_may_have_changed(&commit));
        let sql_mode = ok_with(&[variable("sql_mode", "ANSI"), (2, vec![1, b'1'])]);
        assert!(settings_may_have_changed(&sql_mode));
        let schema = ok_with(&[(1, vec![2, b'd', b'b'])]);
        assert!(settings_may_have_changed(&schema));
        // Something changed and no variable is named: tracking may be off.
        assert!(settings_may_have_changed(&ok_with(&[(2, vec![1, b'1'])])));
        assert!(settings_may_have_changed(b"\xff\x01"), "not an OK");
    }

    #[test]
    fn temporary_tables_are_noticed() {
        assert!(creates_temporary(b"CREATE TEMPORARY TABLE t (a int)"));
        assert!(creates_temporary(
            b"create or replace temporary table t (a int)"
        ));
        assert!(!creates_temporary(b"CREATE TABLE temporary_things (a int)"));
    }
}
