//! Follows the primary's binlog as a replica would and reports which tables each
//! transaction changed, with their row images when it can keep them. It feeds cache
//! invalidation for writes that bypass Sluice.

mod config;
mod events;
pub mod origin;
pub mod rows;
pub mod scan;

pub use config::BinlogConfig;
pub use events::EventError;

use crate::auth::BackendCredentials;
use crate::backend::{BackendConn, ConnParams, Server};
use crate::error::{BackendError, Failed};
use crate::shutdown::Shutdown;
use bytes::{Bytes, BytesMut};
use events::Decoder;
use parking_lot::Mutex;
use serde::Serialize;
use sluice_wire::command::Command;
use sluice_wire::lenenc::Reader;
use sluice_wire::packet::{take_packet, write_packet};
use sluice_wire::response::{ErrPacket, ERR_HEADER, OK_HEADER};
use sluice_wire::{CapabilityFlags, ProtocolError};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::{debug, info, warn};

/// COM_REGISTER_SLAVE and COM_BINLOG_DUMP.
const COM_REGISTER_SLAVE: u8 = 0x15;
const COM_BINLOG_DUMP: u8 = 0x12;
/// `@mariadb_slave_capability`: GTID events are sent as they are.
const MARIA_SLAVE_CAPABILITY_GTID: u8 = 4;
/// Largest event accepted: a primary's `max_allowed_packet` cannot exceed 1 GiB, and the
/// dump thread sends events of up to that plus their header.
const MAX_EVENT: usize = (1 << 30) + (1 << 16);
/// Largest reply to Sluice's own setup statements.
const MAX_REPLY: usize = 1 << 20;
const ER_PARSE_ERROR: u16 = 1064;
/// Name Sluice reports in the primary's `SHOW SLAVE HOSTS`.
const REPORT_HOST: &[u8] = b"sluice";

/// One thing a transaction changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Rows of this table were inserted, updated or deleted (row-based binlog). `rows`
    /// holds their images when they were kept (None: over the size bound, compressed
    /// row events, a layout we can't walk...): the cache then treats the whole table as changed.
    Rows {
        schema: String,
        table: String,
        rows: Option<rows::RowImages>,
    },
    /// A statement logged as text: DDL, TRUNCATE, statement-based DML, account
    /// management... `schema` is the default schema it ran in (it may name others).
    /// The cache works out what it touches.
    Statement { schema: Option<String>, sql: String },
    /// Something changed that the binlog does not name readably: a compressed statement
    /// (`log_bin_compress`), a MySQL compressed transaction, an incident event, rows of
    /// a table no table map named. Only dropping everything is safe.
    Unknown {
        schema: Option<String>,
        reason: String,
    },
}

/// The changes of one transaction (or of one statement outside any), delivered once
/// the primary logged its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Each table once, in the order first changed; statements in log order.
    pub changes: Vec<Change>,
    /// Binlog timestamp (Unix seconds) of the group's last event: how far behind the
    /// primary this batch arrives, to the second.
    pub event_time: u32,
    /// MariaDB GTID of the transaction ("domain-server-sequence"), when there is one.
    pub gtid: Option<String>,
}

/// The reader's event decoder run over `events` (each as the primary sends it, after
/// the packet's status byte) until one fails: the batches it delivered, and the error
/// that would have ended the connection. The decoder is private to this module and
/// the fuzz targets live outside the crate; nothing else calls this.
#[doc(hidden)]
pub fn fuzz_decode<'a>(
    events: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<Batch>, Option<EventError>) {
    let mut decoder = Decoder::new();
    let mut batches = Vec::new();
    for event in events {
        match decoder.feed(event) {
            Ok((_, decoded)) => batches.extend(decoded.batch),
            Err(e) => return (batches, Some(e)),
        }
    }
    (batches, None)
}

/// Where the reader's findings go: the cache.
///
/// Calls come from the reader's task, one at a time, and must not block.
pub trait BinlogSink: Send + Sync {
    /// A transaction committed on the primary changed these things.
    fn changed(&self, batch: Batch);
    /// The reader is streaming: every change committed from now on will be reported.
    /// Changes made while it was down (since the last `down`, or before the first `up`)
    /// were not, and never will be: the cache must drop everything it holds when this
    /// is called, then may rely on `changed` again.
    fn up(&self);
    /// The reader lost the stream (or is stopping): changes are no longer reported
    /// until the next `up`, so the cache must fall back to expiring entries by age.
    fn down(&self, reason: &str);
}

/// What the reader is doing, shared with stats and admin. Updates are atomics, or an
/// uncontended lock for what changes at most once per transaction.
pub struct BinlogStatus {
    connected: AtomicBool,
    events: AtomicU64,
    batches: AtomicU64,
    reconnects: AtomicU64,
    errors: AtomicU64,
    position: AtomicU64,
    last_event_time: AtomicU32,
    detail: Mutex<Detail>,
    /// Where it started reading, while it has read every event since without a break:
    /// what the entries a hand-over carries must have been kept right up to.
    unbroken_from: Mutex<Unbroken>,
}

enum Unbroken {
    NotYet,
    From(String, u64),
    Broken,
}

struct Detail {
    server: String,
    since: SystemTime,
    last_error: Option<String>,
    file: Option<String>,
    gtid: Option<String>,
}

/// A copy of [`BinlogStatus`] at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BinlogSnapshot {
    pub server: String,
    /// Streaming the binlog: the cache is kept right by it.
    pub connected: bool,
    /// Unix time (seconds) of the last connect or disconnect, or of the reader's start.
    pub since: u64,
    /// The last failure (to connect, or of the stream), kept after reconnecting.
    pub last_error: Option<String>,
    /// The primary's binlog file and the end of the last event read in it.
    pub file: Option<String>,
    pub position: u64,
    /// The last GTID read.
    pub gtid: Option<String>,
    /// Events read, heartbeats included.
    pub events: u64,
    /// Batches delivered to the sink.
    pub batches: u64,
    /// Times the stream was started again after the first.
    pub reconnects: u64,
    /// Failed connection attempts and lost streams.
    pub errors: u64,
    /// Binlog timestamp (Unix seconds) of the last event the primary logged (not of
    /// heartbeats): with the current time, how far behind the reader is.
    pub last_event_time: Option<u32>,
}

impl Default for BinlogStatus {
    fn default() -> Self {
        Self::new()
    }
}

impl BinlogStatus {
    pub fn new() -> BinlogStatus {
        BinlogStatus {
            connected: AtomicBool::new(false),
            events: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            position: AtomicU64::new(0),
            last_event_time: AtomicU32::new(0),
            detail: Mutex::new(Detail {
                server: String::new(),
                since: SystemTime::now(),
                last_error: None,
                file: None,
                gtid: None,
            }),
            unbroken_from: Mutex::new(Unbroken::NotYet),
        }
    }

    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Where it started reading, if it has read every event since.
    pub fn unbroken_from(&self) -> Option<(String, u64)> {
        match &*self.unbroken_from.lock() {
            Unbroken::From(file, pos) => Some((file.clone(), *pos)),
            _ => None,
        }
    }

    /// The server and where it has read up to, while it follows.
    pub fn read_up_to(&self) -> Option<(String, String, u64)> {
        if !self.connected.load(Ordering::Acquire) {
            return None;
        }
        let d = self.detail.lock();
        let file = d.file.clone()?;
        Some((
            d.server.clone(),
            file,
            self.position.load(Ordering::Relaxed),
        ))
    }

    pub fn snapshot(&self) -> BinlogSnapshot {
        let d = self.detail.lock();
        let time = self.last_event_time.load(Ordering::Relaxed);
        BinlogSnapshot {
            server: d.server.clone(),
            connected: self.connected.load(Ordering::Acquire),
            since: d
                .since
                .duration_since(UNIX_EPOCH)
                .map_or(0, |t| t.as_secs()),
            last_error: d.last_error.clone(),
            file: d.file.clone(),
            position: self.position.load(Ordering::Relaxed),
            gtid: d.gtid.clone(),
            events: self.events.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            last_event_time: (time != 0).then_some(time),
        }
    }

    fn set_connected(&self, connected: bool) {
        self.detail.lock().since = SystemTime::now();
        self.connected.store(connected, Ordering::Release);
    }
}

/// Why a binlog connection ended or could not start.
#[derive(Debug, thiserror::Error)]
pub enum BinlogError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("server '{server}' refused {what}: {err}")]
    Refused {
        server: String,
        what: &'static str,
        err: ErrPacket,
    },
    #[error("starting to read the binlog of server '{server}' took longer than {after:?}")]
    StartTimeout { server: String, after: Duration },
    #[error("server '{server}' does not write a binlog (log_bin is off)")]
    BinlogOff { server: String },
    #[error("server '{server}' sent nothing for {after:?}, not even a heartbeat")]
    Silent { server: String, after: Duration },
    #[error("server '{server}' ended the binlog stream")]
    Ended { server: String },
    #[error("unexpected reply from server '{server}': {what}")]
    Unexpected { server: String, what: String },
    #[error("binlog event of server '{server}' after {file}:{position}: {source}")]
    Event {
        server: String,
        file: String,
        position: u64,
        source: EventError,
    },
}

/// A backend failure during a statement of the binlog session ends that session, as
/// with [`BinlogError`]'s own `From`.
impl From<BackendError> for Failed<BinlogError> {
    fn from(e: BackendError) -> Self {
        Failed::Broken(e.into())
    }
}

/// Follows `server`'s binlog until shutdown: connect, start the dump at the current end
/// of the binlog, deliver a [`Batch`] per transaction, and after any failure (the
/// primary gone, killed, silent, a malformed event) reconnect every
/// `cfg.reconnect_interval`.
///
/// The sink hears `up()` once a dump has started and `down(reason)` whenever a started
/// dump ends, including at shutdown. A new dump starts at the primary's current end of
/// binlog, not where the last one stopped: the changes in between are never reported,
/// which is why the cache drops everything on `up()`. Every wait also watches
/// `shutdown`, so the task ends promptly. With `cfg.enabled` false it returns at once.
///
/// Wiring: pick the server with [`BinlogConfig::pick_server`], share one
/// [`BinlogStatus`] with stats, and spawn this with the cache as the sink.
/// Which server to read from, asked again before every (re)connection: the writer
/// can move.
pub type ServerSource = Box<dyn Fn() -> Option<Arc<Server>> + Send + Sync>;

pub async fn run(
    server: Arc<Server>,
    source: Option<ServerSource>,
    cfg: BinlogConfig,
    sink: Arc<dyn BinlogSink>,
    status: Arc<BinlogStatus>,
    mut shutdown: Shutdown,
) {
    if !cfg.enabled {
        return;
    }
    status.detail.lock().server = server.name.clone();
    let mut reader = ReaderTask {
        server,
        cfg,
        sink,
        status,
        up: false,
        started: 0,
        last_logged: None,
    };
    loop {
        if shutdown.is_stopping() {
            break;
        }
        if let Some(now) = source.as_ref().and_then(|f| f()) {
            if !Arc::ptr_eq(&now, &reader.server) {
                info!(from = %reader.server.name, to = %now.name, "binlog reader follows the writer");
                reader.status.detail.lock().server = now.name.clone();
                reader.server = now;
            }
        }
        match reader.session(&mut shutdown).await {
            Ok(()) => break,
            Err(e) => reader.failed(&e),
        }
        tokio::select! {
            _ = shutdown.stopping() => break,
            _ = tokio::time::sleep(reader.cfg.reconnect_interval) => {}
        }
    }
    reader.set_down("Sluice is shutting down");
    info!(server = %reader.server.name, "binlog reader stopped");
}

struct ReaderTask {
    server: Arc<Server>,
    cfg: BinlogConfig,
    sink: Arc<dyn BinlogSink>,
    status: Arc<BinlogStatus>,
    up: bool,
    /// Dumps started so far.
    started: u64,
    /// The last connection failure logged at warn level, so that a primary down for an
    /// hour does not log every retry.
    last_logged: Option<String>,
}

/// Where in the primary's binlog the stream is.
struct Position {
    file: String,
    pos: u64,
}

impl ReaderTask {
    /// One connection: returns Ok only when shutdown was asked for.
    async fn session(&mut self, shutdown: &mut Shutdown) -> Result<(), BinlogError> {
        let limit = self.cfg.connect_timeout;
        let (mut conn, first, mut at) = tokio::select! {
            _ = shutdown.stopping() => return Ok(()),
            started = tokio::time::timeout(limit, self.start()) => match started {
                Ok(started) => started?,
                Err(_) => {
                    return Err(BinlogError::StartTimeout {
                        server: self.server.name.clone(),
                        after: limit,
                    })
                }
            },
        };
        self.set_up(&at);
        let mut decoder = Decoder::new();
        self.handle(&mut decoder, &mut at, &first)?;
        let silence = self.cfg.silence_limit();
        loop {
            let packet = tokio::select! {
                _ = shutdown.stopping() => return Ok(()),
                packet = next_packet(&mut conn, MAX_EVENT, silence) => packet?,
            };
            self.handle(&mut decoder, &mut at, &packet)?;
        }
    }

    /// Logs in, prepares the session as a replica and starts the dump. Returns the
    /// connection with the dump's first packet, which proves the primary accepted it.
    async fn start(&self) -> Result<(BackendConn, Bytes, Position), BinlogError> {
        let creds = BackendCredentials::new(self.cfg.user.clone(), self.cfg.password.clone());
        let params = ConnParams {
            wire_caps: CapabilityFlags::TRANSACTIONS,
            mariadb_caps: 0,
            charset: 45,
            track_state: false,
        };
        let mut conn = BackendConn::connect(self.server.clone(), &creds, &params, None).await?;
        // Announces that this replica understands checksums: the primary then sends
        // events exactly as its binlog holds them.
        self.set(
            &mut conn,
            "SET @master_binlog_checksum = @@global.binlog_checksum",
        )
        .await?;
        self.set(
            &mut conn,
            &format!("SET @mariadb_slave_capability = {MARIA_SLAVE_CAPABILITY_GTID}"),
        )
        .await?;
        if !self.cfg.heartbeat.is_zero() {
            let ns = self.cfg.heartbeat.as_nanos().min(u128::from(u64::MAX));
            self.set(&mut conn, &format!("SET @master_heartbeat_period = {ns}"))
                .await?;
        }
        // The cache starts empty and starts over on every reconnect, so older events
        // concern nothing it holds.
        let mut reply = query_row(&mut conn, "SHOW MASTER STATUS").await;
        if matches!(&reply, Err(Failed::Answered(err)) if err.code == ER_PARSE_ERROR) {
            // MySQL 8.4 renamed it.
            reply = query_row(&mut conn, "SHOW BINARY LOG STATUS").await;
        }
        let row = match reply {
            Ok(Some(row)) => row,
            Ok(None) => {
                return Err(BinlogError::BinlogOff {
                    server: self.server.name.clone(),
                })
            }
            Err(failed) => return Err(self.refused("SHOW MASTER STATUS", failed.answered()?)),
        };
        let (Some(Some(file)), Some(Some(pos))) = (row.first(), row.get(1)) else {
            return Err(self.unexpected("SHOW MASTER STATUS without file and position"));
        };
        let pos: u32 = pos
            .parse()
            .map_err(|_| self.unexpected(format!("binlog position {pos:?}")))?;
        let file = file.clone();
        {
            let mut unbroken = self.status.unbroken_from.lock();
            *unbroken = match *unbroken {
                Unbroken::NotYet => Unbroken::From(file.clone(), u64::from(pos)),
                _ => Unbroken::Broken,
            };
        }

        let mut register = vec![COM_REGISTER_SLAVE];
        register.extend_from_slice(&self.cfg.server_id.to_le_bytes());
        register.push(REPORT_HOST.len() as u8);
        register.extend_from_slice(REPORT_HOST);
        register.extend_from_slice(&[0, 0]); // no user, no password reported
        register.extend_from_slice(&0u16.to_le_bytes()); // port
        register.extend_from_slice(&0u32.to_le_bytes()); // replication rank
        register.extend_from_slice(&0u32.to_le_bytes()); // primary id
        if let Err(failed) = conn.simple_command(&register).await {
            let err = failed.answered()?;
            return Err(self.refused("to register Sluice as a replica", err));
        }

        // Flags 0: block at the end of the binlog, waiting for more.
        send_dump(&mut conn, pos, 0, self.cfg.server_id, &file).await?;
        let first = next_packet(&mut conn, MAX_EVENT, None).await?;
        if first.first() == Some(&ERR_HEADER) {
            let err = ErrPacket::parse(&first).map_err(|e| protocol(&conn, e))?;
            return Err(self.refused("the binlog dump", err));
        }
        Ok((
            conn,
            first,
            Position {
                file,
                pos: u64::from(pos),
            },
        ))
    }

    async fn set(&self, conn: &mut BackendConn, sql: &str) -> Result<(), BinlogError> {
        set_variable(conn, sql).await
    }

    /// One packet of the dump.
    fn handle(
        &self,
        decoder: &mut Decoder,
        at: &mut Position,
        packet: &[u8],
    ) -> Result<(), BinlogError> {
        match packet.first() {
            Some(&OK_HEADER) => {}
            Some(&ERR_HEADER) => {
                let err = ErrPacket::parse(packet).map_err(|e| BackendError::Protocol {
                    server: self.server.name.clone(),
                    source: e,
                })?;
                return Err(self.refused("to go on with the binlog dump", err));
            }
            Some(0xfe) if packet.len() < 9 => {
                return Err(BinlogError::Ended {
                    server: self.server.name.clone(),
                })
            }
            _ => return Err(self.unexpected("a dump packet that is not an event")),
        }
        let (header, out) = decoder
            .feed(&packet[1..])
            .map_err(|source| BinlogError::Event {
                server: self.server.name.clone(),
                file: at.file.clone(),
                position: at.pos,
                source,
            })?;
        let status = &self.status;
        status.events.fetch_add(1, Ordering::Relaxed);
        if header.log_pos != 0 {
            at.pos = u64::from(header.log_pos);
            status.position.store(at.pos, Ordering::Relaxed);
            if header.timestamp != 0 && header.kind != events::kind::FORMAT_DESCRIPTION {
                status
                    .last_event_time
                    .store(header.timestamp, Ordering::Relaxed);
            }
        }
        if let Some((file, pos)) = out.rotate {
            status.detail.lock().file = Some(file.clone());
            status.position.store(pos, Ordering::Relaxed);
            *at = Position { file, pos };
        }
        if let Some(gtid) = out.gtid {
            status.detail.lock().gtid = Some(gtid);
        }
        if let Some(batch) = out.batch {
            debug!(
                server = %self.server.name,
                changes = %summary(&batch.changes),
                event_time = batch.event_time,
                gtid = batch.gtid.as_deref().unwrap_or(""),
                "binlog batch"
            );
            status.batches.fetch_add(1, Ordering::Relaxed);
            self.sink.changed(batch);
        }
        Ok(())
    }

    fn set_up(&mut self, at: &Position) {
        self.started += 1;
        if self.started > 1 {
            self.status.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        {
            let mut d = self.status.detail.lock();
            d.file = Some(at.file.clone());
        }
        self.status.position.store(at.pos, Ordering::Relaxed);
        self.status.set_connected(true);
        self.up = true;
        self.last_logged = None;
        info!(
            server = %self.server.name,
            file = %at.file,
            position = at.pos,
            server_id = self.cfg.server_id,
            "binlog reader connected"
        );
        self.sink.up();
    }

    fn set_down(&mut self, reason: &str) {
        if !self.up {
            return;
        }
        self.up = false;
        self.status.set_connected(false);
        self.sink.down(reason);
    }

    fn failed(&mut self, e: &BinlogError) {
        let message = e.to_string();
        self.status.errors.fetch_add(1, Ordering::Relaxed);
        self.status.detail.lock().last_error = Some(message.clone());
        if self.up {
            warn!(server = %self.server.name, error = %message, "binlog reader disconnected; reconnecting");
            self.set_down(&message);
        } else if self.last_logged.as_deref() != Some(message.as_str()) {
            warn!(server = %self.server.name, error = %message, "binlog reader cannot start; retrying");
            self.last_logged = Some(message);
        } else {
            debug!(server = %self.server.name, error = %message, "binlog reader cannot start; retrying");
        }
    }

    fn refused(&self, what: &'static str, err: ErrPacket) -> BinlogError {
        BinlogError::Refused {
            server: self.server.name.clone(),
            what,
            err,
        }
    }

    fn unexpected(&self, what: impl Into<String>) -> BinlogError {
        BinlogError::Unexpected {
            server: self.server.name.clone(),
            what: what.into(),
        }
    }
}

/// Runs one of the `SET` statements that make a session a replica.
async fn set_variable(conn: &mut BackendConn, sql: &str) -> Result<(), BinlogError> {
    match conn.query_scalar(sql).await {
        Ok(_) => Ok(()),
        Err(failed) => Err(BinlogError::Refused {
            server: conn.server.name.clone(),
            what: "a replica session setting",
            err: failed.answered()?,
        }),
    }
}

/// Sends COM_BINLOG_DUMP: from `file` at `pos` (an empty file: where the session's
/// `@slave_connect_state` says), with `flags`, as replica `server_id`.
async fn send_dump(
    conn: &mut BackendConn,
    pos: u32,
    flags: u16,
    server_id: u32,
    file: &str,
) -> Result<(), BinlogError> {
    let mut dump = vec![COM_BINLOG_DUMP];
    dump.extend_from_slice(&pos.to_le_bytes());
    dump.extend_from_slice(&flags.to_le_bytes());
    dump.extend_from_slice(&server_id.to_le_bytes());
    dump.extend_from_slice(file.as_bytes());
    let mut out = BytesMut::with_capacity(dump.len() + 4);
    write_packet(&mut out, 0, &dump);
    conn.write_all(&out).await?;
    Ok(())
}

/// "schema.table, ..." for logs.
fn summary(changes: &[Change]) -> String {
    let parts: Vec<String> = changes
        .iter()
        .map(|c| match c {
            Change::Rows { schema, table, .. } => format!("{schema}.{table}"),
            Change::Statement { sql, .. } => {
                format!("statement {:?}", sql.chars().take(60).collect::<String>())
            }
            Change::Unknown { reason, .. } => format!("unknown ({reason})"),
        })
        .collect();
    parts.join(", ")
}

fn protocol(conn: &BackendConn, source: ProtocolError) -> BackendError {
    BackendError::Protocol {
        server: conn.server.name.clone(),
        source,
    }
}

/// The next whole packet from the server; `silence` bounds each wait for bytes.
async fn next_packet(
    conn: &mut BackendConn,
    limit: usize,
    silence: Option<Duration>,
) -> Result<Bytes, BinlogError> {
    loop {
        match take_packet(&mut conn.rbuf, limit) {
            Ok(Some(p)) => return Ok(p.payload),
            Ok(None) => {}
            Err(e) => return Err(protocol(conn, e).into()),
        }
        match silence {
            Some(after) => match tokio::time::timeout(after, conn.read_more()).await {
                Ok(read) => {
                    read?;
                }
                Err(_) => {
                    return Err(BinlogError::Silent {
                        server: conn.server.name.clone(),
                        after,
                    })
                }
            },
            None => {
                conn.read_more().await?;
            }
        }
    }
}

/// Runs a statement and returns the first row of its text result (`None` without rows
/// or without a result set), or the server's error. `query_scalar` gives only the first
/// column, and `SHOW MASTER STATUS` cannot be wrapped in a SELECT.
async fn query_row(
    conn: &mut BackendConn,
    sql: &str,
) -> Result<Option<Vec<Option<String>>>, Failed<BinlogError>> {
    let mut payload = Vec::with_capacity(sql.len() + 1);
    payload.push(Command::Query as u8);
    payload.extend_from_slice(sql.as_bytes());
    let mut out = BytesMut::with_capacity(payload.len() + 4);
    write_packet(&mut out, 0, &payload);
    conn.write_all(&out).await?;

    let first = next_packet(conn, MAX_REPLY, None).await?;
    match first.first() {
        Some(&ERR_HEADER) => {
            let err = ErrPacket::parse(&first).map_err(|e| protocol(conn, e))?;
            return Err(Failed::Answered(err));
        }
        Some(&OK_HEADER) => return Ok(None),
        _ => {}
    }
    let columns = Reader::new(&first)
        .lenenc_int("column count")
        .map_err(|e| protocol(conn, e))?;
    for _ in 0..columns {
        next_packet(conn, MAX_REPLY, None).await?;
    }
    if !conn.caps.contains(CapabilityFlags::DEPRECATE_EOF) {
        next_packet(conn, MAX_REPLY, None).await?;
    }
    let mut first_row = None;
    loop {
        let p = next_packet(conn, MAX_REPLY, None).await?;
        match p.first() {
            Some(&ERR_HEADER) => {
                let err = ErrPacket::parse(&p).map_err(|e| protocol(conn, e))?;
                return Err(Failed::Answered(err));
            }
            Some(0xfe) if p.len() < 0xff_ffff => return Ok(first_row),
            _ if first_row.is_none() => {
                let mut r = Reader::new(&p);
                let mut values = Vec::new();
                for _ in 0..columns {
                    if p.get(p.len() - r.remaining()) == Some(&0xfb) {
                        r.u8("NULL").map_err(|e| protocol(conn, e))?;
                        values.push(None);
                        continue;
                    }
                    let v = r.lenenc_bytes("value").map_err(|e| protocol(conn, e))?;
                    values.push(Some(String::from_utf8_lossy(v).into_owned()));
                }
                first_row = Some(values);
            }
            _ => {}
        }
    }
}
