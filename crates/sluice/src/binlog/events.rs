//! Decoding of the few binlog events cache invalidation needs, and their grouping into
//! transactions. No I/O: the reader feeds it one event at a time.

use super::rows::{RowImages, RowsKind, TableColumns, MAX_GROUP_IMAGE_BYTES};
use super::{Batch, Change};
use sluice_wire::lenenc::Reader;
use sluice_wire::ProtocolError;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Event type codes (MySQL's, then MariaDB's from 160 on).
/// The INTVAR event type that carries `INSERT_ID` (the other, 1, is `LAST_INSERT_ID`).
const INSERT_ID_EVENT: u8 = 2;

pub(super) mod kind {
    pub const QUERY: u8 = 2;
    pub const STOP: u8 = 3;
    pub const ROTATE: u8 = 4;
    pub const INTVAR: u8 = 5;
    pub const FORMAT_DESCRIPTION: u8 = 15;
    pub const XID: u8 = 16;
    pub const TABLE_MAP: u8 = 19;
    /// Pre-GA row events of MySQL 5.1: same layout as v1.
    pub const WRITE_ROWS_V0: u8 = 20;
    pub const UPDATE_ROWS_V0: u8 = 21;
    pub const DELETE_ROWS_V0: u8 = 22;
    pub const WRITE_ROWS_V1: u8 = 23;
    pub const UPDATE_ROWS_V1: u8 = 24;
    pub const DELETE_ROWS_V1: u8 = 25;
    pub const INCIDENT: u8 = 26;
    pub const HEARTBEAT: u8 = 27;
    pub const WRITE_ROWS_V2: u8 = 30;
    pub const UPDATE_ROWS_V2: u8 = 31;
    pub const DELETE_ROWS_V2: u8 = 32;
    pub const XA_PREPARE: u8 = 38;
    /// MySQL 8's heartbeat.
    pub const HEARTBEAT_V2: u8 = 41;
    /// MySQL 8 JSON partial updates: a rows event.
    pub const PARTIAL_UPDATE_ROWS: u8 = 39;
    /// MySQL 8 compressed transaction: its row events are inside, compressed.
    pub const TRANSACTION_PAYLOAD: u8 = 40;
    pub const ANNOTATE_ROWS: u8 = 160;
    pub const BINLOG_CHECKPOINT: u8 = 161;
    pub const GTID: u8 = 162;
    pub const GTID_LIST: u8 = 163;
    pub const START_ENCRYPTION: u8 = 164;
    pub const QUERY_COMPRESSED: u8 = 165;
    /// MariaDB's compressed row events (v1 and v2 layouts): only the row images are
    /// compressed, the table id is readable.
    pub const WRITE_ROWS_COMPRESSED_FIRST: u8 = 166;
    pub const WRITE_ROWS_COMPRESSED_LAST: u8 = 171;
}

pub(super) const HEADER_LEN: usize = 19;
pub(super) const CHECKSUM_LEN: usize = 4;

/// Header flags.
const ARTIFICIAL_F: u16 = 0x20;
const IGNORABLE_F: u16 = 0x80;
/// Rows event flag: last row event of its statement.
const STMT_END_F: u16 = 1;
/// GTID event flag: the group is this one event, no COMMIT or XID follows.
const GTID_STANDALONE: u8 = 1;

/// Statements kept per group: a statement-based transaction can hold millions, and
/// past this many the cache could only drop everything anyway.
const MAX_STATEMENTS: usize = 1000;

/// Checksum algorithm byte of a format description.
const CHECKSUM_OFF: u8 = 0;
const CHECKSUM_CRC32: u8 = 1;

/// Why an event could not be decoded. Any of these ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("event truncated while reading {0}")]
    Truncated(&'static str),
    #[error("malformed event: {0}")]
    Malformed(String),
    #[error("checksum mismatch in an event of type {kind}")]
    Checksum { kind: u8 },
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl From<ProtocolError> for EventError {
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Truncated(what) => EventError::Truncated(what),
            other => EventError::Malformed(other.to_string()),
        }
    }
}

/// The common header of every v4 event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub timestamp: u32,
    pub kind: u8,
    pub server_id: u32,
    pub size: u32,
    /// End of this event in the primary's binlog file; 0 for events not in the file.
    pub log_pos: u32,
    pub flags: u16,
}

impl Header {
    pub fn parse(event: &[u8]) -> Result<Header, EventError> {
        let mut r = Reader::new(event);
        Ok(Header {
            timestamp: r.u32("event timestamp")?,
            kind: r.u8("event type")?,
            server_id: r.u32("event server id")?,
            size: r.u32("event size")?,
            log_pos: r.u32("event log position")?,
            flags: r.u16("event flags")?,
        })
    }
}

/// What one event meant for the reader.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Decoded {
    /// A transaction (or standalone statement) finished with these changes.
    pub batch: Option<Batch>,
    /// The stream moved to this binlog file and position.
    pub rotate: Option<(String, u64)>,
    /// A new GTID ("domain-server-seq") started a group.
    pub gtid: Option<String>,
    /// A statement event, or the statement behind row events as Sluice sent it
    /// (`binlog/origin.rs`): the id of the connection that ran it on the server it came
    /// from (replicas log it unchanged), which ties its group to that connection.
    pub thread: Option<u32>,
    /// An `INSERT_ID` variable event: the first auto-increment value the next statement
    /// generated (its `LAST_INSERT_ID()` afterwards), in statement-based logging.
    pub insert_id: Option<u64>,
}

/// What the current binlog file's format description said.
struct Format {
    crc32: bool,
    /// Post-header length per event type (index: type - 1).
    post_header: Vec<u8>,
}

/// Changes collected since the current group started.
#[derive(Default)]
struct Group {
    /// Inside BEGIN/GTID ... COMMIT/XID: changes wait for the end.
    open: bool,
    changes: Vec<Change>,
    /// Where each table's `Change::Rows` is in `changes`.
    seen: HashMap<(String, String), usize>,
    statements: usize,
    /// Row-image bytes taken in, against [`MAX_GROUP_IMAGE_BYTES`].
    image_bytes: usize,
    unknown: bool,
    time: u32,
    gtid: Option<String>,
}

impl Group {
    fn add(&mut self, change: Change) {
        match change {
            Change::Rows {
                schema,
                table,
                rows,
            } => return self.add_rows(schema, table, rows),
            // One is enough: it already means "drop everything".
            Change::Unknown { .. } if self.unknown => return,
            Change::Unknown { .. } => self.unknown = true,
            Change::Statement { .. } if self.statements >= MAX_STATEMENTS => {
                return self.add(Change::Unknown {
                    schema: None,
                    reason: format!("a transaction of more than {MAX_STATEMENTS} statements"),
                });
            }
            Change::Statement { .. } => self.statements += 1,
        }
        self.changes.push(change);
    }

    /// Lists each table once, its images those of all its row events in the group.
    fn add_rows(&mut self, schema: String, table: String, rows: Option<RowImages>) {
        let rows =
            rows.filter(|r| self.image_bytes.saturating_add(r.len()) <= MAX_GROUP_IMAGE_BYTES);
        if let Some(r) = &rows {
            self.image_bytes += r.len();
        }
        let key = (schema, table);
        if let Some(&at) = self.seen.get(&key) {
            if let Some(Change::Rows { rows: kept, .. }) = self.changes.get_mut(at) {
                *kept = match (kept.take(), rows) {
                    (Some(all), Some(more)) => all.merged(more),
                    _ => None,
                };
            }
            return;
        }
        self.seen.insert(key.clone(), self.changes.len());
        let (schema, table) = key;
        self.changes.push(Change::Rows {
            schema,
            table,
            rows,
        });
    }

    /// Ends the group: its batch, if anything changed.
    fn finish(&mut self) -> Option<Batch> {
        let group = std::mem::take(self);
        if group.changes.is_empty() {
            return None;
        }
        Some(Batch {
            changes: group.changes,
            event_time: group.time,
            gtid: group.gtid,
        })
    }
}

/// A table a table map named, by its id.
struct MappedTable {
    schema: String,
    table: String,
    /// None when the map's column part could not be read: the table's row images are
    /// not kept, the table is still reported.
    columns: Option<Arc<TableColumns>>,
}

/// Turns a stream of events into per-transaction batches of changed tables.
pub(super) struct Decoder {
    format: Option<Format>,
    tables: HashMap<u64, MappedTable>,
    /// Tables of the current statement that a rows event changed.
    written: HashSet<u64>,
    group: Group,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            format: None,
            tables: HashMap::new(),
            written: HashSet::new(),
            group: Group::default(),
        }
    }

    /// Decodes one event (the packet payload after its 0x00 status byte).
    pub fn feed(&mut self, event: &[u8]) -> Result<(Header, Decoded), EventError> {
        let header = Header::parse(event)?;
        if header.size as usize != event.len() {
            return Err(EventError::Malformed(format!(
                "event of type {} says it has {} bytes but has {}",
                header.kind,
                header.size,
                event.len()
            )));
        }
        if header.kind == kind::FORMAT_DESCRIPTION {
            let decoded = self.format_description(event)?;
            return Ok((header, decoded));
        }
        let event = self.strip_checksum(&header, event)?;
        if header.timestamp != 0 {
            self.group.time = self.group.time.max(header.timestamp);
        }
        let decoded = self.decode(&header, &event[HEADER_LEN..])?;
        Ok((header, decoded))
    }

    /// What an event other than a format description means, from its body.
    fn decode(&mut self, header: &Header, body: &[u8]) -> Result<Decoded, EventError> {
        let mut out = Decoded::default();
        match header.kind {
            kind::ROTATE => {
                let mut r = Reader::new(body);
                let position = r.u64("rotate position")?;
                let file = String::from_utf8_lossy(r.rest()).into_owned();
                out.rotate = Some((file, position));
            }
            kind::TABLE_MAP => {
                let (id, mapped) = self.table_map(body)?;
                self.tables.insert(id, mapped);
            }
            kind::WRITE_ROWS_V0..=kind::DELETE_ROWS_V0
            | kind::WRITE_ROWS_V1
            | kind::UPDATE_ROWS_V1
            | kind::DELETE_ROWS_V1
            | kind::WRITE_ROWS_V2
            | kind::UPDATE_ROWS_V2
            | kind::DELETE_ROWS_V2
            | kind::PARTIAL_UPDATE_ROWS
            | kind::WRITE_ROWS_COMPRESSED_FIRST..=kind::WRITE_ROWS_COMPRESSED_LAST => {
                out.batch = self.rows(header.kind, body)?;
            }
            kind::QUERY | kind::QUERY_COMPRESSED => {
                out.thread = Reader::new(body).u32("query thread id").ok();
                out.batch = self.query(header.kind, body)?;
            }
            kind::INTVAR => {
                let mut r = Reader::new(body);
                if r.u8("intvar type")? == INSERT_ID_EVENT {
                    out.insert_id = Some(r.u64("intvar value")?);
                }
            }
            kind::XID | kind::XA_PREPARE => out.batch = self.group.finish(),
            kind::GTID => self.gtid(header, body, &mut out)?,
            kind::INCIDENT => {
                out.batch =
                    self.cut_short("the primary logged an incident: changes may be missing");
            }
            kind::TRANSACTION_PAYLOAD => {
                out.batch =
                    self.cut_short("a compressed transaction (binlog_transaction_compression)");
            }
            kind::START_ENCRYPTION if header.flags & IGNORABLE_F == 0 => {
                // A primary decrypts before sending and marks this event ignorable; one
                // that is not means the events after it are still encrypted.
                return Err(EventError::Unsupported(
                    "encrypted binlog events (START_ENCRYPTION not marked ignorable)".into(),
                ));
            }
            // The statement behind row events: nothing for the cache, but it may name
            // the connection that ran it, as statement events do.
            kind::ANNOTATE_ROWS => out.thread = super::origin::thread_named(body),
            // Binlog bookkeeping, liveness: nothing for the cache.
            kind::BINLOG_CHECKPOINT | kind::GTID_LIST | kind::HEARTBEAT | kind::HEARTBEAT_V2 => {}
            kind::STOP => {
                // The primary stopped: a group cut off by it never completes.
                out.batch = self.group.finish();
            }
            _ => {}
        }
        Ok(out)
    }

    /// A GTID event starts the next group: its GTID, and whether it is one statement
    /// or waits for its end event.
    fn gtid(&mut self, header: &Header, body: &[u8], out: &mut Decoded) -> Result<(), EventError> {
        let mut r = Reader::new(body);
        let seq = r.u64("GTID sequence number")?;
        let domain = r.u32("GTID domain")?;
        let flags = r.u8("GTID flags")?;
        // A group left open means its end event never came: deliver rather than merge
        // it into an unrelated transaction.
        let leftover = self.group.finish();
        let gtid = format!("{domain}-{}-{seq}", header.server_id);
        self.group.open = flags & GTID_STANDALONE == 0;
        self.group.gtid = Some(gtid.clone());
        self.group.time = header.timestamp;
        out.gtid = Some(gtid);
        out.batch = leftover;
        Ok(())
    }

    /// Ends the group with a change the binlog does not name readably, for `reason`.
    fn cut_short(&mut self, reason: &str) -> Option<Batch> {
        self.group.add(Change::Unknown {
            schema: None,
            reason: reason.into(),
        });
        self.group.finish()
    }

    /// Post-header length of events of `kind`, from the format description.
    fn post_header_len(&self, kind: u8, default: u8) -> usize {
        let len = self
            .format
            .as_ref()
            .and_then(|f| f.post_header.get(usize::from(kind).wrapping_sub(1)))
            .copied()
            .unwrap_or(default);
        usize::from(len)
    }

    /// The event without its trailing checksum, which is verified.
    fn strip_checksum<'a>(&self, header: &Header, event: &'a [u8]) -> Result<&'a [u8], EventError> {
        if event.len() < HEADER_LEN {
            return Err(EventError::Truncated("event header"));
        }
        let artificial = header.flags & ARTIFICIAL_F != 0
            || header.kind == kind::HEARTBEAT
            || header.kind == kind::HEARTBEAT_V2
            || self.format.is_none();
        if artificial {
            // Events the primary makes up (fake rotate, heartbeat) use whatever checksum
            // setting its dump thread had last, which is not necessarily this file's.
            return Ok(if has_valid_checksum(event) {
                &event[..event.len() - CHECKSUM_LEN]
            } else {
                event
            });
        }
        let crc32 = self.format.as_ref().is_some_and(|f| f.crc32);
        if !crc32 {
            return Ok(event);
        }
        if event.len() < HEADER_LEN + CHECKSUM_LEN {
            return Err(EventError::Truncated("event checksum"));
        }
        if !has_valid_checksum(event) {
            return Err(EventError::Checksum { kind: header.kind });
        }
        Ok(&event[..event.len() - CHECKSUM_LEN])
    }

    fn format_description(&mut self, event: &[u8]) -> Result<Decoded, EventError> {
        let body = &event[HEADER_LEN..];
        let mut r = Reader::new(body);
        let version = r.u16("binlog version")?;
        if version != 4 {
            return Err(EventError::Unsupported(format!(
                "binlog format version {version}"
            )));
        }
        let server_version = r.take(50, "server version")?;
        let _created = r.u32("creation time")?;
        let header_len = r.u8("common header length")?;
        if usize::from(header_len) != HEADER_LEN {
            return Err(EventError::Unsupported(format!(
                "event headers of {header_len} bytes"
            )));
        }
        let rest = r.rest();
        let (post_header, crc32) = if checksum_aware(server_version) {
            // Such servers always end this event with the algorithm byte and a 4-byte
            // slot, filled only when the algorithm is CRC32.
            if rest.len() < 1 + CHECKSUM_LEN {
                return Err(EventError::Truncated("checksum algorithm"));
            }
            let alg = rest[rest.len() - CHECKSUM_LEN - 1];
            let crc32 = match alg {
                CHECKSUM_OFF => false,
                CHECKSUM_CRC32 => true,
                other => {
                    return Err(EventError::Unsupported(format!(
                        "binlog checksum algorithm {other}"
                    )))
                }
            };
            if crc32 && !has_valid_checksum(event) {
                return Err(EventError::Checksum {
                    kind: kind::FORMAT_DESCRIPTION,
                });
            }
            (&rest[..rest.len() - CHECKSUM_LEN - 1], crc32)
        } else {
            (rest, false)
        };
        self.format = Some(Format {
            crc32,
            post_header: post_header.to_vec(),
        });
        // Table ids are only valid within one file.
        self.tables.clear();
        Ok(Decoded {
            batch: self.group.finish(),
            ..Decoded::default()
        })
    }

    /// Table id of a table map or rows event post-header: 4 bytes in 6-byte post-headers
    /// of old servers, 6 bytes otherwise.
    fn table_id(r: &mut Reader<'_>, post_header_len: usize) -> Result<u64, EventError> {
        if post_header_len < 6 {
            return Err(EventError::Malformed(format!(
                "post-header of {post_header_len} bytes is too short for a table id"
            )));
        }
        let id = if post_header_len == 6 {
            u64::from(r.u32("table id")?)
        } else {
            let b = r.take(6, "table id")?;
            let mut id = [0u8; 8];
            id[..6].copy_from_slice(b);
            u64::from_le_bytes(id)
        };
        Ok(id)
    }

    fn table_map(&self, body: &[u8]) -> Result<(u64, MappedTable), EventError> {
        let post = self.post_header_len(kind::TABLE_MAP, 8);
        let mut r = Reader::new(body);
        let id = Self::table_id(&mut r, post)?;
        r.take(
            post - if post == 6 { 4 } else { 6 },
            "table map post-header",
        )?;
        let schema_len = r.u8("schema name length")?;
        let schema = r.take(usize::from(schema_len), "schema name")?;
        r.u8("schema name terminator")?;
        let table_len = r.u8("table name length")?;
        let table = r.take(usize::from(table_len), "table name")?;
        // A column part that does not parse costs the table its row images (it is then
        // invalidated whole), not the stream.
        let columns = match r.rest().split_first() {
            Some((0, columns)) => TableColumns::parse(columns).map(Arc::new),
            _ => None,
        };
        Ok((
            id,
            MappedTable {
                schema: String::from_utf8_lossy(schema).into_owned(),
                table: String::from_utf8_lossy(table).into_owned(),
                columns,
            },
        ))
    }

    fn rows(&mut self, event_kind: u8, body: &[u8]) -> Result<Option<Batch>, EventError> {
        let v2 = matches!(
            event_kind,
            kind::WRITE_ROWS_V2..=kind::DELETE_ROWS_V2 | kind::PARTIAL_UPDATE_ROWS
        );
        let post = self.post_header_len(event_kind, if v2 { 10 } else { 8 });
        let mut r = Reader::new(body);
        let id = Self::table_id(&mut r, post)?;
        let flags = r.u16("rows event flags")?;
        self.written.insert(id);
        match self.tables.get(&id) {
            Some(mapped) => {
                let rows = mapped
                    .columns
                    .as_ref()
                    .and_then(|columns| row_images(event_kind, post, columns, r));
                self.group.add(Change::Rows {
                    schema: mapped.schema.clone(),
                    table: mapped.table.clone(),
                    rows,
                })
            }
            None => self.group.add(Change::Unknown {
                schema: None,
                reason: format!("a row event for table id {id}, which no table map named"),
            }),
        }
        if flags & STMT_END_F == 0 {
            return Ok(None);
        }
        // A table mapped but not written is one a foreign key's cascade may have changed:
        // the primary logs the statement's change to the parent only, and the child's
        // rows only through the table map (no row images to read keys from).
        let mut cascaded: Vec<&MappedTable> = self
            .tables
            .iter()
            .filter(|(id, _)| !self.written.contains(id))
            .map(|(_, mapped)| mapped)
            .collect();
        cascaded.sort_by(|a, b| (&a.schema, &a.table).cmp(&(&b.schema, &b.table)));
        let cascaded: Vec<Change> = cascaded
            .into_iter()
            .map(|mapped| Change::Rows {
                schema: mapped.schema.clone(),
                table: mapped.table.clone(),
                rows: None,
            })
            .collect();
        for change in cascaded {
            self.group.add(change);
        }
        // The primary maps tables again for every statement.
        self.tables.clear();
        self.written.clear();
        Ok(if self.group.open {
            None
        } else {
            self.group.finish()
        })
    }

    fn query(&mut self, event_kind: u8, body: &[u8]) -> Result<Option<Batch>, EventError> {
        let post = self.post_header_len(event_kind, 13);
        if post < 13 {
            return Err(EventError::Malformed(format!(
                "query post-header of {post} bytes"
            )));
        }
        let mut r = Reader::new(body);
        let _thread = r.u32("query thread id")?;
        let _exec_time = r.u32("query execution time")?;
        let db_len = r.u8("query schema length")?;
        let _error_code = r.u16("query error code")?;
        let status_len = r.u16("query status variables length")?;
        r.take(post - 13, "query post-header")?;
        r.take(usize::from(status_len), "query status variables")?;
        let db = r.take(usize::from(db_len), "query schema")?;
        r.u8("query schema terminator")?;
        let schema = (!db.is_empty()).then(|| String::from_utf8_lossy(db).into_owned());
        if event_kind == kind::QUERY_COMPRESSED {
            // Only long statements are compressed, so this is never BEGIN or COMMIT.
            self.group.add(Change::Unknown {
                schema,
                reason: "a compressed statement (log_bin_compress)".into(),
            });
            return Ok(if self.group.open {
                None
            } else {
                self.group.finish()
            });
        }
        let sql = String::from_utf8_lossy(r.rest());
        match classify(&sql) {
            Boundary::Begin => {
                // After a GTID event the group is already open and keeps its GTID.
                let leftover = if self.group.changes.is_empty() {
                    None
                } else {
                    self.group.finish()
                };
                self.group.open = true;
                Ok(leftover)
            }
            Boundary::End => Ok(self.group.finish()),
            Boundary::Ignore => Ok(None),
            Boundary::EndWith => {
                self.group.add(Change::Statement {
                    schema,
                    sql: sql.into_owned(),
                });
                Ok(self.group.finish())
            }
            Boundary::None => {
                self.group.add(Change::Statement {
                    schema,
                    sql: sql.into_owned(),
                });
                Ok(if self.group.open {
                    None
                } else {
                    self.group.finish()
                })
            }
        }
    }
}

/// The row images of a rows event, `r` at the end of its table id and flags. None for
/// events whose images are compressed or partial, and for what does not parse: the
/// event was read as far as the table before images were kept, and stays so.
fn row_images(
    event_kind: u8,
    post_header_len: usize,
    columns: &Arc<TableColumns>,
    mut r: Reader<'_>,
) -> Option<RowImages> {
    let rows_kind = match event_kind {
        kind::WRITE_ROWS_V0 | kind::WRITE_ROWS_V1 | kind::WRITE_ROWS_V2 => RowsKind::Write,
        kind::UPDATE_ROWS_V0 | kind::UPDATE_ROWS_V1 | kind::UPDATE_ROWS_V2 => RowsKind::Update,
        kind::DELETE_ROWS_V0 | kind::DELETE_ROWS_V1 | kind::DELETE_ROWS_V2 => RowsKind::Delete,
        _ => return None,
    };
    let id_len = if post_header_len == 6 { 4 } else { 6 };
    let mut post_left = post_header_len.checked_sub(id_len + 2)?;
    if matches!(event_kind, kind::WRITE_ROWS_V2..=kind::DELETE_ROWS_V2) {
        // v2 post-headers end with the length of the extra data after them, itself
        // included.
        let extra = usize::from(r.u16("extra data length").ok()?);
        post_left = post_left.checked_sub(2)?;
        r.take(post_left, "rows post-header").ok()?;
        r.take(extra.checked_sub(2)?, "extra data").ok()?;
    } else {
        r.take(post_left, "rows post-header").ok()?;
    }
    RowImages::new(columns.clone(), rows_kind, r.rest())
}

/// What a statement in a query event means for transaction grouping.
#[derive(Debug, PartialEq, Eq)]
enum Boundary {
    Begin,
    /// COMMIT; also ROLLBACK, which the primary logs only when non-transactional
    /// tables were changed and those changes stay.
    End,
    /// Savepoints and XA END change nothing.
    Ignore,
    /// XA COMMIT / XA ROLLBACK of a transaction prepared earlier: ends a group and is
    /// itself a change the cache has to consider.
    EndWith,
    None,
}

fn classify(sql: &str) -> Boundary {
    let words: Vec<String> = sql
        .split_ascii_whitespace()
        .take(2)
        .map(str::to_ascii_uppercase)
        .collect();
    let first = words.first().map_or("", String::as_str);
    let second = words.get(1).map_or("", String::as_str);
    match (first, second) {
        ("BEGIN", "") => Boundary::Begin,
        ("XA", "START" | "BEGIN") => Boundary::Begin,
        ("ROLLBACK", "TO") | ("SAVEPOINT", _) | ("RELEASE", "SAVEPOINT") => Boundary::Ignore,
        ("COMMIT" | "ROLLBACK", _) => Boundary::End,
        ("XA", "END") => Boundary::Ignore,
        ("XA", "COMMIT" | "ROLLBACK") => Boundary::EndWith,
        _ => Boundary::None,
    }
}

/// Whether a server of this version writes the checksum algorithm in its format
/// description: MariaDB from 5.3, MySQL from 5.6.1.
fn checksum_aware(server_version: &[u8]) -> bool {
    let text = String::from_utf8_lossy(server_version);
    let text = text.trim_end_matches('\0');
    let mut parts = text
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let v = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    if text.contains("MariaDB") {
        v >= (5, 3, 0)
    } else {
        v >= (5, 6, 1)
    }
}

/// Whether the last four bytes of `event` are the CRC-32 (IEEE) of the rest.
fn has_valid_checksum(event: &[u8]) -> bool {
    if event.len() < HEADER_LEN + CHECKSUM_LEN {
        return false;
    }
    let (data, sum) = event.split_at(event.len() - CHECKSUM_LEN);
    crc32fast::hash(data) == u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]])
}

#[cfg(test)]
mod tests;
