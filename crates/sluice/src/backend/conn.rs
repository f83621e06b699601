//! One connection to a backend server: login (TLS, auth plugins, auth switch), the read
//! buffer the relay streams from, and the few commands Sluice sends on its own.

mod login;

use super::Server;
use crate::auth::BackendCredentials;
use crate::error::{BackendError, Failed, RefusedAsNone};
use crate::stream::Stream;
use bytes::{Buf, Bytes, BytesMut};
use sluice_wire::command::Command;
use sluice_wire::handshake::Attributes;
use sluice_wire::lenenc::Reader;
use sluice_wire::packet::{take_packet, write_packet, Packet};
use sluice_wire::response::{ErrPacket, OkPacket, ERR_HEADER, OK_HEADER};
use sluice_wire::resultset::{text_values, ColumnDef};
use sluice_wire::session_track::Tracking;
use sluice_wire::tracker::{ResponseKind, ResponseTracker, Step, HEAD_NEEDED};
use sluice_wire::{CapabilityFlags, ProtocolError, StatusFlags};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest packet Sluice decodes itself during login or its own commands.
const MAX_DECODED: usize = 1 << 20;

/// What a backend connection must look like to serve a given client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConnParams {
    /// The client's wire-format capability bits (`CapabilityFlags::WIRE_FORMAT`).
    pub wire_caps: u32,
    /// The client's MariaDB extended capabilities (content-only ones).
    pub mariadb_caps: u32,
    pub charset: u8,
    /// The connection reports every system variable change in its OK packets (for
    /// multiplexed sessions, which must know their state exactly).
    pub track_state: bool,
}

/// The values of a row of a text result (`None`: SQL NULL).
pub type Row = Vec<Option<Vec<u8>>>;

pub use super::vars::Vars;

/// The variables whose value on a fresh connection comes from the login (the client's
/// character set), not from their global value: restored to this, not to DEFAULT.
pub const LOGIN_VARS: [&str; 4] = [
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

/// The `session_track_*` variables a client can set, in the order
/// [`Tracking::from_values`] takes them.
const TRACKING_VARS: [&str; 4] = [
    "session_track_system_variables",
    "session_track_schema",
    "session_track_state_change",
    "session_track_transaction_info",
];

static NEXT_CONN_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub struct BackendConn {
    pub(crate) stream: Stream,
    /// Bytes read from the server and not yet forwarded or consumed.
    pub(crate) rbuf: BytesMut,
    pub server: Arc<Server>,
    /// The server's id for this connection (what `CONNECTION_ID()` returns).
    pub thread_id: u32,
    pub server_version: String,
    pub caps: CapabilityFlags,
    /// MariaDB's extended capabilities in force (the client's that the server offers).
    pub mariadb_caps: u32,
    pub status: StatusFlags,
    /// The default schema, when known.
    pub schema: Option<Vec<u8>>,
    /// Unique for the life of the process: which connection a session's
    /// `LAST_INSERT_ID()` lives on.
    pub id: u64,
    /// Session variables changed since login, as tracked (multiplexed sessions only).
    pub vars: Vars,
    /// The values of [`LOGIN_VARS`] right after login, when state is tracked.
    pub login_vars: Vec<Option<Vec<u8>>>,
    /// The server's global `wait_timeout` and `interactive_timeout` in seconds, read
    /// with [`LOGIN_VARS`]: what a multiplexed session's idle limit is by default.
    pub idle_timeouts: Option<(u64, u64)>,
    /// User variables multiplexed sessions set here, as the literals that set them
    /// (`NULL` once cleared for another session).
    pub user_vars: std::collections::BTreeMap<Box<[u8]>, String>,
    /// What `LAST_INSERT_ID()` returns here, when known (multiplexed sessions only).
    pub last_insert_id: Option<u64>,
    /// The prepared statements open here.
    pub stmts: super::ConnStmts,
    /// The server's global `session_track_*` settings, which a session starts with, read
    /// when tracking started (multiplexed sessions only).
    pub tracking_defaults: Option<Arc<Tracking>>,
    /// The values its session took from the server's globals at login or at its last
    /// reset, when state is tracked and the server lists its variables.
    pub globals: Option<Arc<super::Globals>>,
    /// Opened for the lease that holds it: its session values are the server's globals
    /// of a moment ago. Cleared when it first goes idle.
    pub fresh: bool,
    /// The grants of its account at its login (pooled connections), when known.
    pub grants: Option<super::Grants>,
}

impl std::fmt::Debug for BackendConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendConn")
            .field("server", &self.server.name)
            .field("thread_id", &self.thread_id)
            .finish_non_exhaustive()
    }
}

impl BackendConn {
    /// Opens and logs in a connection. The caller bounds it with the connect timeout.
    pub async fn connect(
        server: Arc<Server>,
        creds: &BackendCredentials,
        params: &ConnParams,
        database: Option<&[u8]>,
    ) -> Result<BackendConn, BackendError> {
        BackendConn::connect_as(server, creds, params, database, None).await
    }

    /// [`Self::connect`] with a client's connection attributes, for a connection that
    /// serves only sessions with the same ones; otherwise Sluice's own.
    pub async fn connect_as(
        server: Arc<Server>,
        creds: &BackendCredentials,
        params: &ConnParams,
        database: Option<&[u8]>,
        attributes: Option<&Attributes>,
    ) -> Result<BackendConn, BackendError> {
        let socket = server
            .endpoint
            .connect()
            .await
            .map_err(|source| BackendError::Connect {
                server: server.name.clone(),
                address: server.endpoint.to_string(),
                source,
            })?;
        let stmts = super::ConnStmts::new(server.stmts.clone());
        let mut conn = BackendConn {
            stream: Stream::Plain(socket),
            rbuf: BytesMut::with_capacity(64 * 1024),
            server,
            thread_id: 0,
            server_version: String::new(),
            caps: CapabilityFlags(0),
            mariadb_caps: 0,
            status: StatusFlags(0),
            schema: database.map(<[u8]>::to_vec),
            id: NEXT_CONN_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            vars: Vars::new(),
            login_vars: Vec::new(),
            idle_timeouts: None,
            last_insert_id: Some(0),
            user_vars: std::collections::BTreeMap::new(),
            stmts,
            tracking_defaults: None,
            globals: None,
            fresh: true,
            grants: None,
        };
        conn.login(creds, params, database, attributes).await?;
        if params.track_state && conn.caps.contains(CapabilityFlags::SESSION_TRACK) {
            conn.start_tracking().await?;
        }
        Ok(conn)
    }

    fn io_err(&self, source: std::io::Error) -> BackendError {
        BackendError::Io {
            server: self.server.name.clone(),
            source,
        }
    }

    fn proto_err(&self, source: ProtocolError) -> BackendError {
        BackendError::Protocol {
            server: self.server.name.clone(),
            source,
        }
    }

    /// Reads more bytes from the server into the read buffer. Zero means it closed.
    pub async fn read_more(&mut self) -> Result<usize, BackendError> {
        if self.rbuf.capacity() - self.rbuf.len() < 8 * 1024 {
            self.rbuf.reserve(64 * 1024);
        }
        match self.stream.read_buf(&mut self.rbuf).await {
            Ok(0) => Err(self.io_err(std::io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => Ok(n),
            Err(e) => Err(self.io_err(e)),
        }
    }

    pub(crate) async fn read_packet(&mut self) -> Result<Packet, BackendError> {
        loop {
            match take_packet(&mut self.rbuf, MAX_DECODED) {
                Ok(Some(p)) => return Ok(p),
                Ok(None) => {
                    self.read_more().await?;
                }
                Err(e) => return Err(self.proto_err(e)),
            }
        }
    }

    pub async fn write_all(&mut self, bytes: &[u8]) -> Result<(), BackendError> {
        match self.stream.write_all(bytes).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.io_err(e)),
        }
    }

    pub(crate) async fn write_packet(
        &mut self,
        seq: u8,
        payload: &[u8],
    ) -> Result<(), BackendError> {
        let mut out = BytesMut::with_capacity(payload.len() + 4);
        write_packet(&mut out, seq, payload);
        self.write_all(&out).await
    }

    /// The connection itself failed when a command Sluice can't do without was
    /// refused: the server's refusal becomes [`BackendError::Rejected`].
    pub(crate) fn rejected(&self, failed: Failed<BackendError>) -> BackendError {
        match failed.answered() {
            Ok(err) => BackendError::Rejected {
                server: self.server.name.clone(),
                err,
            },
            Err(e) => e,
        }
    }

    /// Sends a one-packet command Sluice issues itself and returns the single-packet
    /// response (OK or ERR), updating the status flags.
    pub async fn simple_command(
        &mut self,
        payload: &[u8],
    ) -> Result<OkPacket, Failed<BackendError>> {
        self.write_packet(0, payload).await?;
        let p = self.read_packet().await?;
        match p.payload.first() {
            Some(&ERR_HEADER) => Err(Failed::Answered(
                ErrPacket::parse(&p.payload).map_err(|e| self.proto_err(e))?,
            )),
            _ => {
                let ok = OkPacket::parse(&p.payload).map_err(|e| self.proto_err(e))?;
                self.status = ok.status;
                Ok(ok)
            }
        }
    }

    /// Asks the server to report every system variable and schema change, and learns
    /// the values the login gave to the variables that don't restore to DEFAULT.
    pub(crate) async fn start_tracking(&mut self) -> Result<(), BackendError> {
        self.track_everything().await?;
        let probe = format!(
            "SELECT @@{}, @@global.wait_timeout, @@global.interactive_timeout, \
             @@global.max_prepared_stmt_count, @@global.{}",
            LOGIN_VARS.join(", @@"),
            TRACKING_VARS.join(", @@global.")
        );
        match self.query_row(&probe).await {
            Ok(Some(mut values)) => {
                let mut globals = values.split_off(LOGIN_VARS.len().min(values.len()));
                let limits: Vec<_> = globals.drain(..3.min(globals.len())).collect();
                self.server
                    .stmts
                    .learn_limit(limits.get(2).and_then(Option::as_deref));
                let secs = |i: usize| {
                    let v = limits.get(i)?.as_deref()?;
                    std::str::from_utf8(v).ok()?.parse().ok()
                };
                self.idle_timeouts = secs(0).zip(secs(1));
                self.tracking_defaults = Tracking::from_values(&globals).map(Arc::new);
                self.login_vars = values;
            }
            Ok(None) => {}
            Err(failed) => return Err(self.rejected(failed)),
        }
        self.read_globals().await
    }

    /// Asks the server to report every system variable, schema and state change.
    pub(crate) async fn track_everything(&mut self) -> Result<(), BackendError> {
        let set = "SET SESSION session_track_system_variables='*', session_track_schema=ON, \
                   session_track_state_change=ON";
        match self.simple_query(set).await {
            Ok(_) => Ok(()),
            Err(failed) => Err(self.rejected(failed)),
        }
    }

    /// The connection's own `session_track_*` settings. `Ok(None)`: the server has not
    /// all of them.
    pub async fn tracking_settings(&mut self) -> Result<Option<Tracking>, Failed<BackendError>> {
        let probe = format!("SELECT @@session.{}", TRACKING_VARS.join(", @@session."));
        let row = self.query_row(&probe).await?;
        Ok(row.and_then(|values| Tracking::from_values(&values)))
    }

    /// Runs a statement Sluice issues itself whose answer is a single OK or ERR.
    pub async fn simple_query(&mut self, sql: &str) -> Result<OkPacket, Failed<BackendError>> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(Command::Query as u8);
        payload.extend_from_slice(sql.as_bytes());
        self.simple_command(&payload).await
    }

    /// Sends a command that gets no response (COM_STMT_CLOSE).
    pub async fn send_only(&mut self, payload: &[u8]) -> Result<(), BackendError> {
        self.write_packet(0, payload).await
    }

    /// Closes statements on the server (COM_STMT_CLOSE gets no answer).
    pub async fn close_statements(&mut self, ids: &[u32]) -> Result<(), BackendError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.write_all(&super::prepared::close_packets(ids)).await
    }

    /// Reads the server's `max_prepared_stmt_count`, which the statement budget follows.
    pub async fn read_statement_limit(&mut self) -> Result<(), BackendError> {
        let probe = "SELECT @@global.max_prepared_stmt_count";
        if let Some(v) = self.query_scalar(probe).await.refused_as_none()? {
            self.server.stmts.learn_limit(v.as_deref());
        }
        Ok(())
    }

    /// COM_STMT_PREPARE issued by Sluice: the statement id and parameter count, or the
    /// server's error. The rest of the response is read and dropped.
    pub async fn prepare(&mut self, sql: &[u8]) -> Result<(u32, u16), Failed<BackendError>> {
        let packets = self
            .command_packets(Command::StmtPrepare, sql, ResponseKind::Prepare)
            .await?;
        let first = packets.into_iter().next().expect("one packet was read");
        if first.first() == Some(&ERR_HEADER) {
            let err = ErrPacket::parse(&first).map_err(|e| self.proto_err(e))?;
            return Err(Failed::Answered(err));
        }
        match sluice_wire::statement::PrepareOk::parse(&first) {
            Some(ok) => Ok((ok.stmt_id, ok.params)),
            None => Err(self
                .proto_err(ProtocolError::Malformed("prepare OK"))
                .into()),
        }
    }

    /// COM_RESET_CONNECTION: rolls back, drops temporary tables and locks, resets session
    /// variables and prepared statements, keeping the login.
    pub async fn reset(&mut self) -> Result<bool, BackendError> {
        let reset = self.simple_command(&[Command::ResetConnection as u8]);
        Ok(reset.await.refused_as_none()?.is_some())
    }

    /// COM_INIT_DB; the server's error (unknown database...) is returned as is.
    pub async fn init_db(&mut self, db: &[u8]) -> Result<(), Failed<BackendError>> {
        let mut payload = Vec::with_capacity(db.len() + 1);
        payload.push(Command::InitDb as u8);
        payload.extend_from_slice(db);
        self.simple_command(&payload).await?;
        self.schema = Some(db.to_vec());
        Ok(())
    }

    /// Makes `db` the default schema unless it already is (or none is asked for).
    pub async fn ensure_schema(&mut self, db: Option<&[u8]>) -> Result<(), Failed<BackendError>> {
        match db {
            Some(db) if self.schema.as_deref() != Some(db) => self.init_db(db).await,
            _ => Ok(()),
        }
    }

    /// Runs a query Sluice issues itself and returns the first column of the first row
    /// of its result (`None` for SQL NULL or no rows).
    pub async fn query_scalar(
        &mut self,
        sql: &str,
    ) -> Result<Option<Vec<u8>>, Failed<BackendError>> {
        let row = self.query_row(sql).await?;
        Ok(row.and_then(|values| values.into_iter().next().flatten()))
    }

    /// Runs a query Sluice issues itself and returns the values of the first row of its
    /// result (`None`: no rows; a `None` value is SQL NULL).
    pub async fn query_row(&mut self, sql: &str) -> Result<Option<Row>, Failed<BackendError>> {
        let packets = self.query_packets(sql).await?;
        self.decoded(first_row(&packets, self.caps))
    }

    /// Runs a query Sluice issues itself and returns the first column of every row
    /// (`SHOW GRANTS` and the like, one line per row; SQL NULL is left out).
    pub async fn query_column(&mut self, sql: &str) -> Result<Vec<Vec<u8>>, Failed<BackendError>> {
        let packets = self.query_packets(sql).await?;
        self.decoded(first_column(&packets, self.caps))
    }

    /// Runs a query Sluice issues itself and returns every row of its result (the whole
    /// result is held in memory: for small results only).
    pub async fn query_rows(&mut self, sql: &str) -> Result<Vec<Row>, Failed<BackendError>> {
        let packets = self.query_packets(sql).await?;
        self.decoded(text_rows(&packets, self.caps, usize::MAX))
    }

    /// [`Self::query_row`] with each column's type (the `MYSQL_TYPE_*` byte).
    #[allow(clippy::type_complexity)]
    pub async fn query_typed_row(
        &mut self,
        sql: &str,
    ) -> Result<Option<Vec<(u8, Option<Vec<u8>>)>>, Failed<BackendError>> {
        let packets = self.query_packets(sql).await?;
        self.first_row_with(&packets, column_types)
    }

    /// [`Self::query_row`] with each column's name (`SHOW SLAVE STATUS` and the like,
    /// whose columns are found by name).
    #[allow(clippy::type_complexity)]
    pub async fn query_named_row(
        &mut self,
        sql: &str,
    ) -> Result<Option<Vec<(String, Option<Vec<u8>>)>>, Failed<BackendError>> {
        let packets = self.query_packets(sql).await?;
        self.first_row_with(&packets, column_names)
    }

    /// The values of the first row of a text result, each with what `describe` tells of
    /// its column.
    #[allow(clippy::type_complexity)]
    fn first_row_with<T>(
        &self,
        packets: &[Bytes],
        describe: fn(&[Bytes], bool) -> Result<Vec<T>, ProtocolError>,
    ) -> Result<Option<Vec<(T, Option<Vec<u8>>)>>, Failed<BackendError>> {
        let row = match first_row(packets, self.caps) {
            Err(Failed::Broken(e)) => return Err(self.proto_err(e).into()),
            // A server's error is answered only once the columns could be read too.
            row => row,
        };
        let described =
            describe(packets, self.extended_metadata()).map_err(|e| self.proto_err(e))?;
        Ok(self
            .decoded(row)?
            .map(|values| described.into_iter().zip(values).collect()))
    }

    /// A response Sluice read itself: one it could not decode is the connection's
    /// failure, the server's error its answer.
    fn decoded<T>(&self, r: Result<T, Failed<ProtocolError>>) -> Result<T, Failed<BackendError>> {
        r.map_err(|failed| failed.map_broken(|e| self.proto_err(e)))
    }

    /// Sends a query and reads every packet of its response.
    async fn query_packets(&mut self, sql: &str) -> Result<Vec<Bytes>, BackendError> {
        self.command_packets(Command::Query, sql.as_bytes(), ResponseKind::Query)
            .await
    }

    /// Sends `command` with `body` and reads every packet of its response.
    async fn command_packets(
        &mut self,
        command: Command,
        body: &[u8],
        kind: ResponseKind,
    ) -> Result<Vec<Bytes>, BackendError> {
        let mut payload = Vec::with_capacity(body.len() + 1);
        payload.push(command as u8);
        payload.extend_from_slice(body);
        self.write_packet(0, &payload).await?;
        let mut tracker = ResponseTracker::new(kind, self.caps);
        let mut packets = Vec::new();
        loop {
            let p = self.read_packet().await?;
            let head = &p.payload[..p.payload.len().min(HEAD_NEEDED)];
            let step = tracker
                .feed(head, p.payload.len())
                .map_err(|e| self.proto_err(e))?;
            packets.push(p.payload);
            match step {
                Step::Continue => {}
                Step::Done(status) => {
                    if let Some(s) = status {
                        self.status = s;
                    }
                    break;
                }
                Step::LocalInfile => {
                    return Err(
                        self.proto_err(ProtocolError::Malformed("unexpected LOCAL INFILE request"))
                    )
                }
            }
        }
        Ok(packets)
    }

    /// Whether column definitions here carry MariaDB's extended metadata.
    pub fn extended_metadata(&self) -> bool {
        self.mariadb_caps & sluice_wire::flags::mariadb::EXTENDED_TYPE_INFO != 0
    }

    /// Whether this idle connection is still usable: nothing to read and not closed.
    pub fn looks_healthy(&self) -> bool {
        self.rbuf.is_empty() && !self.stream.peer_gone_or_talking()
    }

    /// Drops bytes the relay has forwarded.
    pub fn advance(&mut self, n: usize) {
        self.rbuf.advance(n);
    }
}

/// The column definitions of a text result, each decoded by `decode` (empty for an OK
/// or ERR).
fn columns<T>(
    packets: &[Bytes],
    extended: bool,
    decode: impl Fn(ColumnDef<'_>) -> T,
) -> Result<Vec<T>, ProtocolError> {
    let Some(first) = packets.first() else {
        return Ok(Vec::new());
    };
    if matches!(first.first(), Some(&ERR_HEADER) | Some(&OK_HEADER)) {
        return Ok(Vec::new());
    }
    let count = Reader::new(first).lenenc_int("column count")? as usize;
    packets
        .iter()
        .skip(1)
        .take(count)
        .map(|def| ColumnDef::parse(def, extended).map(&decode))
        .collect()
}

/// The column types of a text result (empty for an OK or ERR).
fn column_types(packets: &[Bytes], extended: bool) -> Result<Vec<u8>, ProtocolError> {
    columns(packets, extended, |c| c.column_type)
}

/// The column names of a text result (empty for an OK or ERR).
fn column_names(packets: &[Bytes], extended: bool) -> Result<Vec<String>, ProtocolError> {
    columns(packets, extended, |c| {
        String::from_utf8_lossy(c.name).into_owned()
    })
}

/// The first value of every row of a text result (SQL NULL left out), or the server's
/// error.
fn first_column(
    packets: &[Bytes],
    caps: CapabilityFlags,
) -> Result<Vec<Vec<u8>>, Failed<ProtocolError>> {
    let rows = text_rows(packets, caps, usize::MAX)?;
    Ok(rows
        .into_iter()
        .filter_map(|row| row.into_iter().next().flatten())
        .collect())
}

/// The values of the first row of a text result, or the server's error.
fn first_row(
    packets: &[Bytes],
    caps: CapabilityFlags,
) -> Result<Option<Row>, Failed<ProtocolError>> {
    Ok(text_rows(packets, caps, 1)?.into_iter().next())
}

/// The values of up to `limit` rows of a text result, or the server's error.
fn text_rows(
    packets: &[Bytes],
    caps: CapabilityFlags,
    limit: usize,
) -> Result<Vec<Row>, Failed<ProtocolError>> {
    let Some(first) = packets.first() else {
        return Err(ProtocolError::Malformed("empty response").into());
    };
    match first.first() {
        Some(&ERR_HEADER) => return Err(Failed::Answered(ErrPacket::parse(first)?)),
        Some(&OK_HEADER) => return Ok(Vec::new()),
        _ => {}
    }
    let columns = Reader::new(first).lenenc_int("column count")? as usize;
    let eof = usize::from(!caps.contains(CapabilityFlags::DEPRECATE_EOF));
    let mut rows = Vec::new();
    for row in packets.iter().skip(1 + columns + eof).take(limit) {
        if row.first() == Some(&0xfe) && row.len() < 0xff_ffff {
            break;
        }
        if row.first() == Some(&ERR_HEADER) {
            return Err(Failed::Answered(ErrPacket::parse(row)?));
        }
        let values = text_values(row)?;
        if values.len() < columns {
            return Err(ProtocolError::Truncated("row value").into());
        }
        rows.push(
            values
                .into_iter()
                .take(columns)
                .map(|v| v.map(<[u8]>::to_vec))
                .collect(),
        );
    }
    Ok(rows)
}
