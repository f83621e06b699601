//! Decoding of the few binlog events cache invalidation needs, and their grouping into
//! transactions. No I/O: the reader feeds it one event at a time.

use super::{Batch, Change};
use sluice_wire::lenenc::Reader;
use sluice_wire::ProtocolError;
use std::collections::{HashMap, HashSet};

/// Event type codes (MySQL's, then MariaDB's from 160 on).
pub(super) mod kind {
    pub const QUERY: u8 = 2;
    pub const STOP: u8 = 3;
    pub const ROTATE: u8 = 4;
    pub const FORMAT_DESCRIPTION: u8 = 15;
    pub const XID: u8 = 16;
    pub const TABLE_MAP: u8 = 19;
    /// Pre-GA row events of MySQL 5.1: same layout as v1.
    pub const WRITE_ROWS_V0: u8 = 20;
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
    seen: HashSet<(String, String)>,
    statements: usize,
    unknown: bool,
    time: u32,
    gtid: Option<String>,
}

impl Group {
    fn add(&mut self, change: Change) {
        match &change {
            Change::Rows { schema, table } => {
                if !self.seen.insert((schema.clone(), table.clone())) {
                    return;
                }
            }
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

/// Turns a stream of events into per-transaction batches of changed tables.
pub(super) struct Decoder {
    format: Option<Format>,
    tables: HashMap<u64, (String, String)>,
    group: Group,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            format: None,
            tables: HashMap::new(),
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
        let body = &event[HEADER_LEN..];
        let mut out = Decoded::default();
        if header.timestamp != 0 {
            self.group.time = self.group.time.max(header.timestamp);
        }
        match header.kind {
            kind::ROTATE => {
                let mut r = Reader::new(body);
                let position = r.u64("rotate position")?;
                let file = String::from_utf8_lossy(r.rest()).into_owned();
                out.rotate = Some((file, position));
            }
            kind::TABLE_MAP => {
                let (id, schema, table) = self.table_map(body)?;
                self.tables.insert(id, (schema, table));
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
                out.batch = self.query(header.kind, body)?;
            }
            kind::XID | kind::XA_PREPARE => out.batch = self.group.finish(),
            kind::GTID => {
                let mut r = Reader::new(body);
                let seq = r.u64("GTID sequence number")?;
                let domain = r.u32("GTID domain")?;
                let flags = r.u8("GTID flags")?;
                // A group left open means its end event never came: deliver rather
                // than merge it into an unrelated transaction.
                let leftover = self.group.finish();
                let gtid = format!("{domain}-{}-{seq}", header.server_id);
                self.group.open = flags & GTID_STANDALONE == 0;
                self.group.gtid = Some(gtid.clone());
                self.group.time = header.timestamp;
                out.gtid = Some(gtid);
                out.batch = leftover;
            }
            kind::INCIDENT => {
                self.group.add(Change::Unknown {
                    schema: None,
                    reason: "the primary logged an incident: changes may be missing".into(),
                });
                out.batch = self.group.finish();
            }
            kind::TRANSACTION_PAYLOAD => {
                self.group.add(Change::Unknown {
                    schema: None,
                    reason: "a compressed transaction (binlog_transaction_compression)".into(),
                });
                out.batch = self.group.finish();
            }
            kind::START_ENCRYPTION if header.flags & IGNORABLE_F == 0 => {
                // A primary decrypts before sending and marks this event ignorable; one
                // that is not means the events after it are still encrypted.
                return Err(EventError::Unsupported(
                    "encrypted binlog events (START_ENCRYPTION not marked ignorable)".into(),
                ));
            }
            // The statement behind row events, binlog bookkeeping, liveness: nothing
            // for the cache.
            kind::ANNOTATE_ROWS
            | kind::BINLOG_CHECKPOINT
            | kind::GTID_LIST
            | kind::HEARTBEAT
            | kind::HEARTBEAT_V2 => {}
            kind::STOP => {
                // The primary stopped: a group cut off by it never completes.
                out.batch = self.group.finish();
            }
            _ => {}
        }
        Ok((header, out))
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

    fn table_map(&self, body: &[u8]) -> Result<(u64, String, String), EventError> {
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
        Ok((
            id,
            String::from_utf8_lossy(schema).into_owned(),
            String::from_utf8_lossy(table).into_owned(),
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
        match self.tables.get(&id) {
            Some((schema, table)) => self.group.add(Change::Rows {
                schema: schema.clone(),
                table: table.clone(),
            }),
            None => self.group.add(Change::Unknown {
                schema: None,
                reason: format!("a row event for table id {id}, which no table map named"),
            }),
        }
        if flags & STMT_END_F == 0 {
            return Ok(None);
        }
        // The primary maps tables again for every statement.
        self.tables.clear();
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
mod tests {
    use super::*;

    /// Builds events the way a server writes them.
    struct Builder {
        crc32: bool,
    }

    impl Builder {
        fn event(&self, kind: u8, timestamp: u32, flags: u16, body: &[u8]) -> Vec<u8> {
            let size = HEADER_LEN + body.len() + if self.crc32 { CHECKSUM_LEN } else { 0 };
            let mut e = Vec::with_capacity(size);
            e.extend_from_slice(&timestamp.to_le_bytes());
            e.push(kind);
            e.extend_from_slice(&1u32.to_le_bytes());
            e.extend_from_slice(&(size as u32).to_le_bytes());
            e.extend_from_slice(&1000u32.to_le_bytes());
            e.extend_from_slice(&flags.to_le_bytes());
            e.extend_from_slice(body);
            if self.crc32 {
                let c = crc32fast::hash(&e);
                e.extend_from_slice(&c.to_le_bytes());
            }
            e
        }

        /// A MariaDB 10.11 format description; `table_map_post` and `rows_post` let
        /// tests mimic old servers' 4-byte table ids.
        fn fde_with(&self, version: &str, table_map_post: u8, rows_post: u8) -> Vec<u8> {
            let mut body = Vec::new();
            body.extend_from_slice(&4u16.to_le_bytes());
            let mut v = [0u8; 50];
            v[..version.len()].copy_from_slice(version.as_bytes());
            body.extend_from_slice(&v);
            body.extend_from_slice(&0u32.to_le_bytes());
            body.push(HEADER_LEN as u8);
            let mut post = vec![0u8; 171];
            post[usize::from(kind::QUERY) - 1] = 13;
            post[usize::from(kind::ROTATE) - 1] = 8;
            post[usize::from(kind::TABLE_MAP) - 1] = table_map_post;
            for k in kind::WRITE_ROWS_V1..=kind::DELETE_ROWS_V1 {
                post[usize::from(k) - 1] = rows_post;
            }
            for k in kind::WRITE_ROWS_V2..=kind::DELETE_ROWS_V2 {
                post[usize::from(k) - 1] = 10;
            }
            post[usize::from(kind::GTID) - 1] = 19;
            post[usize::from(kind::QUERY_COMPRESSED) - 1] = 13;
            for k in kind::WRITE_ROWS_COMPRESSED_FIRST..=kind::WRITE_ROWS_COMPRESSED_LAST {
                post[usize::from(k) - 1] = if k < 169 { 10 } else { 8 };
            }
            body.extend_from_slice(&post);
            body.push(if self.crc32 {
                CHECKSUM_CRC32
            } else {
                CHECKSUM_OFF
            });
            // The format description always has the 4-byte slot; built by hand here
            // because it is filled even when the algorithm is off.
            let size = HEADER_LEN + body.len() + CHECKSUM_LEN;
            let mut e = Vec::new();
            e.extend_from_slice(&0u32.to_le_bytes());
            e.push(kind::FORMAT_DESCRIPTION);
            e.extend_from_slice(&1u32.to_le_bytes());
            e.extend_from_slice(&(size as u32).to_le_bytes());
            e.extend_from_slice(&0u32.to_le_bytes());
            e.extend_from_slice(&0u16.to_le_bytes());
            e.extend_from_slice(&body);
            let c = if self.crc32 {
                crc32fast::hash(&e)
            } else {
                0xdead_beef
            };
            e.extend_from_slice(&c.to_le_bytes());
            e
        }

        fn fde(&self) -> Vec<u8> {
            self.fde_with("10.11.19-MariaDB-log", 8, 8)
        }

        fn table_map(&self, id: u64, schema: &str, table: &str) -> Vec<u8> {
            let mut b = id.to_le_bytes()[..6].to_vec();
            b.extend_from_slice(&1u16.to_le_bytes());
            b.push(schema.len() as u8);
            b.extend_from_slice(schema.as_bytes());
            b.push(0);
            b.push(table.len() as u8);
            b.extend_from_slice(table.as_bytes());
            b.push(0);
            // Column count, types, metadata, null bitmap: ignored by the decoder.
            b.extend_from_slice(&[1, 3, 0, 0]);
            self.event(kind::TABLE_MAP, 100, 0, &b)
        }

        fn rows(&self, kind: u8, id: u64, stmt_end: bool) -> Vec<u8> {
            let mut b = id.to_le_bytes()[..6].to_vec();
            b.extend_from_slice(&u16::from(stmt_end).to_le_bytes());
            if (kind::WRITE_ROWS_V2..=kind::DELETE_ROWS_V2).contains(&kind) {
                b.extend_from_slice(&2u16.to_le_bytes());
            }
            b.extend_from_slice(&[1, 0xff, 0, 5, 0, 0, 0]);
            self.event(kind, 101, 0, &b)
        }

        fn query(&self, schema: &str, sql: &str) -> Vec<u8> {
            let mut b = Vec::new();
            b.extend_from_slice(&7u32.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.push(schema.len() as u8);
            b.extend_from_slice(&0u16.to_le_bytes());
            let status = [0u8, 0, 0, 0, 0]; // Q_FLAGS2_CODE and its value
            b.extend_from_slice(&(status.len() as u16).to_le_bytes());
            b.extend_from_slice(&status);
            b.extend_from_slice(schema.as_bytes());
            b.push(0);
            b.extend_from_slice(sql.as_bytes());
            self.event(kind::QUERY, 102, 0, &b)
        }

        fn xid(&self) -> Vec<u8> {
            self.event(kind::XID, 103, 0, &42u64.to_le_bytes())
        }

        fn gtid(&self, seq: u64, domain: u32, flags: u8) -> Vec<u8> {
            let mut b = seq.to_le_bytes().to_vec();
            b.extend_from_slice(&domain.to_le_bytes());
            b.push(flags);
            b.extend_from_slice(&[0; 6]);
            self.event(kind::GTID, 99, 0, &b)
        }

        fn rotate(&self, file: &str, pos: u64, flags: u16) -> Vec<u8> {
            let mut b = pos.to_le_bytes().to_vec();
            b.extend_from_slice(file.as_bytes());
            self.event(kind::ROTATE, 0, flags, &b)
        }
    }

    const CRC: Builder = Builder { crc32: true };
    const PLAIN: Builder = Builder { crc32: false };

    fn rows(schema: &str, table: &str) -> Change {
        Change::Rows {
            schema: schema.into(),
            table: table.into(),
        }
    }

    fn decoder(b: &Builder) -> Decoder {
        let mut d = Decoder::new();
        d.feed(&b.rotate("mariadb-bin.000001", 4, ARTIFICIAL_F))
            .unwrap();
        d.feed(&b.fde()).unwrap();
        d
    }

    /// Feeds events, returning every batch delivered.
    fn feed_all(d: &mut Decoder, events: &[Vec<u8>]) -> Vec<Batch> {
        events
            .iter()
            .filter_map(|e| d.feed(e).unwrap().1.batch)
            .collect()
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32fast::hash(b""), 0);
    }

    #[test]
    fn transaction_with_v1_rows_is_one_batch() {
        for b in [CRC, PLAIN] {
            let mut d = decoder(&b);
            let batches = feed_all(
                &mut d,
                &[
                    b.gtid(7, 0, 0),
                    b.table_map(70, "shop", "orders"),
                    b.rows(kind::WRITE_ROWS_V1, 70, true),
                    b.table_map(71, "shop", "stock"),
                    b.rows(kind::UPDATE_ROWS_V1, 71, true),
                    b.table_map(70, "shop", "orders"),
                    b.rows(kind::DELETE_ROWS_V1, 70, true),
                    b.xid(),
                ],
            );
            assert_eq!(
                batches,
                vec![Batch {
                    changes: vec![rows("shop", "orders"), rows("shop", "stock")],
                    event_time: 103,
                    gtid: Some("0-1-7".into()),
                }],
                "checksum {}",
                b.crc32
            );
        }
    }

    #[test]
    fn v2_rows_and_begin_commit_boundaries() {
        for b in [CRC, PLAIN] {
            let mut d = decoder(&b);
            let batches = feed_all(
                &mut d,
                &[
                    b.query("", "BEGIN"),
                    b.table_map(5, "a", "t1"),
                    b.table_map(6, "b", "t2"),
                    b.rows(kind::WRITE_ROWS_V2, 5, false),
                    b.rows(kind::UPDATE_ROWS_V2, 6, true),
                    b.table_map(6, "b", "t2"),
                    b.rows(kind::DELETE_ROWS_V2, 6, true),
                    b.query("", "COMMIT"),
                ],
            );
            assert_eq!(batches.len(), 1);
            assert_eq!(batches[0].changes, vec![rows("a", "t1"), rows("b", "t2")]);
            assert_eq!(batches[0].gtid, None);
        }
    }

    #[test]
    fn rows_outside_a_transaction_are_delivered_at_statement_end() {
        let b = CRC;
        let mut d = decoder(&b);
        assert_eq!(
            d.feed(&b.table_map(1, "s", "myisam")).unwrap().1.batch,
            None
        );
        assert_eq!(
            d.feed(&b.rows(kind::WRITE_ROWS_V1, 1, false))
                .unwrap()
                .1
                .batch,
            None
        );
        let batch = d
            .feed(&b.rows(kind::WRITE_ROWS_V1, 1, true))
            .unwrap()
            .1
            .batch
            .unwrap();
        assert_eq!(batch.changes, vec![rows("s", "myisam")]);
    }

    #[test]
    fn standalone_gtid_delivers_the_ddl_at_once() {
        let b = CRC;
        let mut d = decoder(&b);
        let (_, g) = d.feed(&b.gtid(9, 2, GTID_STANDALONE)).unwrap();
        assert_eq!(g.gtid.as_deref(), Some("2-1-9"));
        let batch = d
            .feed(&b.query("shop", "ALTER TABLE orders ADD c INT"))
            .unwrap()
            .1
            .batch
            .unwrap();
        assert_eq!(
            batch,
            Batch {
                changes: vec![Change::Statement {
                    schema: Some("shop".into()),
                    sql: "ALTER TABLE orders ADD c INT".into()
                }],
                event_time: 102,
                gtid: Some("2-1-9".into()),
            }
        );
    }

    #[test]
    fn statements_inside_a_transaction_wait_for_its_end() {
        let b = CRC;
        let mut d = decoder(&b);
        let batches = feed_all(
            &mut d,
            &[
                b.gtid(1, 0, 0),
                b.query("", "INSERT INTO t VALUES (1)"),
                b.query("", "SAVEPOINT `a`"),
                b.query("", "ROLLBACK TO `a`"),
                b.xid(),
            ],
        );
        assert_eq!(
            batches
                .iter()
                .map(|b| b.changes.clone())
                .collect::<Vec<_>>(),
            vec![vec![Change::Statement {
                schema: None,
                sql: "INSERT INTO t VALUES (1)".into()
            }]]
        );
    }

    #[test]
    fn rollback_delivers_non_transactional_changes_and_empty_groups_nothing() {
        let b = CRC;
        let mut d = decoder(&b);
        let batches = feed_all(
            &mut d,
            &[
                b.query("", "BEGIN"),
                b.table_map(3, "s", "m"),
                b.rows(kind::WRITE_ROWS_V1, 3, true),
                b.query("", "ROLLBACK"),
                b.gtid(2, 0, 0),
                b.xid(),
            ],
        );
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].changes, vec![rows("s", "m")]);
    }

    #[test]
    fn xa_transactions_end_at_prepare_and_commit_is_reported() {
        let b = CRC;
        let mut d = decoder(&b);
        let batches = feed_all(
            &mut d,
            &[
                b.gtid(3, 0, 0),
                b.query("", "XA START X'31',X'',1"),
                b.table_map(3, "s", "t"),
                b.rows(kind::WRITE_ROWS_V1, 3, true),
                b.query("", "XA END X'31',X'',1"),
                b.event(kind::XA_PREPARE, 104, 0, &[0; 10]),
                b.gtid(4, 0, 0),
                b.query("", "XA COMMIT X'31',X'',1"),
            ],
        );
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].changes, vec![rows("s", "t")]);
        assert!(
            matches!(&batches[1].changes[..], [Change::Statement { sql, .. }] if sql.starts_with("XA COMMIT"))
        );
    }

    #[test]
    fn four_byte_table_ids_of_old_servers() {
        let mut tm = 9u32.to_le_bytes().to_vec();
        tm.extend_from_slice(&0u16.to_le_bytes());
        tm.extend_from_slice(&[1, b'd', 0, 1, b't', 0, 0]);
        // A 5.1 server writes no checksum: its format description has no algorithm byte.
        let plain = PLAIN;
        let mut d = Decoder::new();
        let mut fde = plain.fde_with("5.1.73-log", 6, 6);
        fde.truncate(fde.len() - 5);
        let size = fde.len() as u32;
        fde[9..13].copy_from_slice(&size.to_le_bytes());
        d.feed(&fde).unwrap();
        d.feed(&plain.event(kind::TABLE_MAP, 1, 0, &tm)).unwrap();
        let mut rows_ev = 9u32.to_le_bytes().to_vec();
        rows_ev.extend_from_slice(&STMT_END_F.to_le_bytes());
        rows_ev.extend_from_slice(&[1, 0xff, 0]);
        let batch = d
            .feed(&plain.event(kind::WRITE_ROWS_V1, 2, 0, &rows_ev))
            .unwrap()
            .1
            .batch
            .unwrap();
        assert_eq!(batch.changes, vec![rows("d", "t")]);
    }

    #[test]
    fn six_byte_table_ids_above_four_billion() {
        let b = CRC;
        let mut d = decoder(&b);
        let id = (1u64 << 40) + 5;
        d.feed(&b.table_map(id, "s", "big")).unwrap();
        d.feed(&b.table_map(5, "s", "small")).unwrap();
        let batch = d
            .feed(&b.rows(kind::WRITE_ROWS_V1, id, true))
            .unwrap()
            .1
            .batch
            .unwrap();
        assert_eq!(batch.changes, vec![rows("s", "big")]);
    }

    #[test]
    fn rows_for_an_unmapped_table_are_reported_as_unknown_once() {
        let b = CRC;
        let mut d = decoder(&b);
        let batches = feed_all(
            &mut d,
            &[
                b.gtid(1, 0, 0),
                b.rows(kind::WRITE_ROWS_V1, 77, true),
                b.rows(kind::WRITE_ROWS_V1, 78, true),
                b.xid(),
            ],
        );
        assert!(matches!(&batches[0].changes[..], [Change::Unknown { .. }]));
    }

    #[test]
    fn huge_statement_based_transactions_stay_bounded() {
        let b = CRC;
        let mut d = decoder(&b);
        d.feed(&b.gtid(1, 0, 0)).unwrap();
        for i in 0..MAX_STATEMENTS + 50 {
            let (_, out) = d
                .feed(&b.query("s", &format!("INSERT INTO t VALUES ({i})")))
                .unwrap();
            assert_eq!(out.batch, None);
        }
        let batch = d.feed(&b.xid()).unwrap().1.batch.unwrap();
        assert_eq!(batch.changes.len(), MAX_STATEMENTS + 1);
        assert!(matches!(batch.changes.last(), Some(Change::Unknown { .. })));
    }

    #[test]
    fn rotate_reports_the_new_file() {
        for b in [CRC, PLAIN] {
            let mut d = decoder(&b);
            let (_, out) = d.feed(&b.rotate("mariadb-bin.000002", 4, 0)).unwrap();
            assert_eq!(out.rotate, Some(("mariadb-bin.000002".into(), 4)));
        }
    }

    #[test]
    fn artificial_events_carry_a_checksum_or_not() {
        // Whatever the file's setting, a fake rotate is read right in both forms.
        for fake in [CRC, PLAIN] {
            let mut d = Decoder::new();
            let (_, out) = d
                .feed(&fake.rotate("mariadb-bin.000009", 1234, ARTIFICIAL_F))
                .unwrap();
            assert_eq!(out.rotate, Some(("mariadb-bin.000009".into(), 1234)));
        }
        let mut d = decoder(&PLAIN);
        let hb = CRC.event(kind::HEARTBEAT, 0, 0, b"mariadb-bin.000001");
        assert_eq!(d.feed(&hb).unwrap().1, Decoded::default());
    }

    #[test]
    fn skipped_and_mariadb_specific_events() {
        let b = CRC;
        let mut d = decoder(&b);
        for kind in [
            kind::ANNOTATE_ROWS,
            kind::BINLOG_CHECKPOINT,
            kind::GTID_LIST,
            kind::STOP + 100,
            kind::HEARTBEAT,
        ] {
            let (h, out) = d.feed(&b.event(kind, 1, 0, b"whatever")).unwrap();
            assert_eq!(h.kind, kind);
            assert_eq!(out, Decoded::default());
        }
        let ignorable = b.event(kind::START_ENCRYPTION, 1, IGNORABLE_F, &[1; 17]);
        assert_eq!(d.feed(&ignorable).unwrap().1, Decoded::default());
        let encrypted = b.event(kind::START_ENCRYPTION, 1, 0, &[1; 17]);
        assert!(matches!(
            d.feed(&encrypted),
            Err(EventError::Unsupported(_))
        ));
    }

    #[test]
    fn incidents_and_compressed_statements_are_unknown_changes() {
        let b = CRC;
        let mut d = decoder(&b);
        let batch = d
            .feed(&b.event(kind::INCIDENT, 5, 0, &[1, 0, 0]))
            .unwrap()
            .1
            .batch
            .unwrap();
        assert!(matches!(&batch.changes[..], [Change::Unknown { .. }]));
        let mut q = b.query("shop", "x");
        q[4] = kind::QUERY_COMPRESSED;
        let n = q.len() - CHECKSUM_LEN;
        let c = crc32fast::hash(&q[..n]);
        q[n..].copy_from_slice(&c.to_le_bytes());
        let batch = d.feed(&q).unwrap().1.batch.unwrap();
        assert!(matches!(
            &batch.changes[..],
            [Change::Unknown { schema: Some(s), .. }] if s == "shop"
        ));
    }

    #[test]
    fn compressed_row_events_name_their_table() {
        let b = CRC;
        let mut d = decoder(&b);
        d.feed(&b.table_map(4, "s", "z")).unwrap();
        // Post-header of 10 bytes (per the format description): table id, flags, and
        // the extra-data length; the row images after it stay compressed.
        let mut body = 4u64.to_le_bytes()[..6].to_vec();
        body.extend_from_slice(&STMT_END_F.to_le_bytes());
        body.extend_from_slice(&2u16.to_le_bytes());
        body.extend_from_slice(&[0x81, 9, 0x78, 0x9c]);
        let batch = d
            .feed(&b.event(kind::WRITE_ROWS_COMPRESSED_FIRST, 1, 0, &body))
            .unwrap()
            .1
            .batch
            .unwrap();
        assert_eq!(batch.changes, vec![rows("s", "z")]);
    }

    #[test]
    fn corrupted_checksum_is_an_error() {
        let b = CRC;
        let mut d = decoder(&b);
        let mut e = b.query("s", "DROP TABLE t");
        let at = e.len() - 6;
        e[at] ^= 1;
        assert_eq!(
            d.feed(&e).unwrap_err(),
            EventError::Checksum { kind: kind::QUERY }
        );
        let mut fde = b.fde();
        fde[30] ^= 1;
        assert!(matches!(
            Decoder::new().feed(&fde),
            Err(EventError::Checksum { .. })
        ));
    }

    #[test]
    fn truncated_or_inconsistent_input_is_an_error_not_a_panic() {
        for b in [CRC, PLAIN] {
            let events = [
                b.fde(),
                b.rotate("f", 4, 0),
                b.table_map(1, "schema", "table"),
                b.rows(kind::WRITE_ROWS_V2, 1, true),
                b.rows(kind::WRITE_ROWS_V1, 1, true),
                b.query("schema", "BEGIN"),
                b.gtid(1, 1, 0),
                b.xid(),
            ];
            for e in &events {
                for cut in 0..e.len() {
                    let mut d = decoder(&b);
                    // As sent, with a size field that does not match.
                    assert!(d.feed(&e[..cut]).is_err(), "cut {cut} of {e:?}");
                    // With a size field that matches but a body too short.
                    let mut short = e[..cut.max(HEADER_LEN)].to_vec();
                    if short.len() >= HEADER_LEN {
                        let n = short.len() as u32;
                        short[9..13].copy_from_slice(&n.to_le_bytes());
                        if b.crc32 && short.len() >= HEADER_LEN + CHECKSUM_LEN {
                            let at = short.len() - CHECKSUM_LEN;
                            let c = crc32fast::hash(&short[..at]);
                            short[at..].copy_from_slice(&c.to_le_bytes());
                        }
                        let _ = decoder(&b).feed(&short);
                    }
                }
            }
        }
    }

    #[test]
    fn bad_format_descriptions_are_refused() {
        let b = CRC;
        let mut fde = b.fde();
        fde[HEADER_LEN] = 3;
        let n = fde.len() - CHECKSUM_LEN;
        let c = crc32fast::hash(&fde[..n]);
        fde[n..].copy_from_slice(&c.to_le_bytes());
        assert!(matches!(
            Decoder::new().feed(&fde),
            Err(EventError::Unsupported(_))
        ));
    }

    #[test]
    fn statement_classification() {
        assert_eq!(classify("BEGIN"), Boundary::Begin);
        assert_eq!(classify("commit"), Boundary::End);
        assert_eq!(classify("ROLLBACK"), Boundary::End);
        assert_eq!(classify("COMMIT /* implicit */"), Boundary::End);
        assert_eq!(classify("ROLLBACK TO `sp`"), Boundary::Ignore);
        assert_eq!(classify("SAVEPOINT `sp`"), Boundary::Ignore);
        assert_eq!(classify("XA END X'31'"), Boundary::Ignore);
        assert_eq!(classify("XA ROLLBACK X'31'"), Boundary::EndWith);
        assert_eq!(classify("TRUNCATE TABLE t"), Boundary::None);
        assert_eq!(classify("BEGIN NOT ATOMIC SELECT 1; END"), Boundary::None);
    }

    #[test]
    fn version_checks() {
        assert!(checksum_aware(b"10.11.19-MariaDB-log\0\0"));
        assert!(checksum_aware(b"5.3.12-MariaDB"));
        assert!(checksum_aware(b"8.0.36"));
        assert!(checksum_aware(b"5.6.1"));
        assert!(!checksum_aware(b"5.6.0-log"));
        assert!(!checksum_aware(b"5.5.62"));
        assert!(!checksum_aware(b""));
    }
}
