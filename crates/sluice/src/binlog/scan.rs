//! Reads back what a server logged after a GTID position, and which connection of the
//! server it came from ran each transaction. A failover asks the replica it promoted,
//! to learn whose commits, among those no one was told of, it has.

use super::events::Decoder;
use super::{
    next_packet, protocol, BinlogError, COM_BINLOG_DUMP, MARIA_SLAVE_CAPABILITY_GTID, MAX_EVENT,
};
use crate::backend::BackendConn;
use bytes::BytesMut;
use sluice_wire::packet::write_packet;
use sluice_wire::response::{ErrPacket, ERR_HEADER};

/// COM_BINLOG_DUMP flag: end with an EOF packet at the end of the binlog instead of
/// waiting for more.
const DUMP_NON_BLOCK: u16 = 1;
/// Server id the dump announces. 0 is what one-shot binlog readers send: a primary
/// ends the dump of a replica with the same id, and no replica has 0.
const DUMP_SERVER_ID: u32 = 0;
/// Transactions read at most: the window between a lost commit and the failover is
/// short, and past this many a scan would cost more than it could tell.
const MAX_LOGGED: usize = 100_000;
const EOF_HEADER: u8 = 0xfe;

/// One transaction in the binlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged {
    pub domain: u32,
    /// The server it was first committed on.
    pub server: u32,
    pub seq: u64,
    /// The connection on `server` that ran it, as its statement events name it. None
    /// when it has none (row events only, in row-based logging) or they differ.
    pub thread: Option<u32>,
}

/// What a scan found: every transaction logged after its start, in log order.
#[derive(Debug, Clone, Default)]
pub struct Scanned {
    pub logged: Vec<Logged>,
}

/// The transactions `conn`'s server logged after `from` (a GTID position, as
/// `gtid_binlog_pos` shows one), up to the end of its binlog. Needs the REPLICATION
/// SLAVE privilege. The caller bounds it in time.
pub async fn logged_after(conn: &mut BackendConn, from: &str) -> Result<Scanned, BinlogError> {
    if !from
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b'-' || b == b',')
    {
        return Err(BinlogError::Unexpected {
            server: conn.server.name.clone(),
            what: format!("GTID position {from:?}"),
        });
    }
    for sql in [
        "SET @master_binlog_checksum = @@global.binlog_checksum".to_owned(),
        format!("SET @mariadb_slave_capability = {MARIA_SLAVE_CAPABILITY_GTID}"),
        format!("SET @slave_connect_state = '{from}'"),
        "SET @slave_gtid_strict_mode = 0".to_owned(),
        "SET @slave_gtid_ignore_duplicates = 0".to_owned(),
    ] {
        if let Err(err) = conn.query_scalar(&sql).await? {
            return Err(refused(conn, "a binlog scan setting", err));
        }
    }
    let mut dump = vec![COM_BINLOG_DUMP];
    dump.extend_from_slice(&4u32.to_le_bytes());
    dump.extend_from_slice(&DUMP_NON_BLOCK.to_le_bytes());
    dump.extend_from_slice(&DUMP_SERVER_ID.to_le_bytes());
    let mut out = BytesMut::with_capacity(dump.len() + 4);
    write_packet(&mut out, 0, &dump);
    conn.write_all(&out).await?;

    let mut decoder = Decoder::new();
    let mut scanned = Scanned::default();
    // Whether the current group's thread was seen yet, and differed.
    let mut mixed = false;
    loop {
        let packet = next_packet(conn, MAX_EVENT, None).await?;
        match packet.first() {
            Some(&0) => {}
            Some(&ERR_HEADER) => {
                let err = ErrPacket::parse(&packet).map_err(|e| protocol(conn, e))?;
                return Err(refused(conn, "the binlog scan", err));
            }
            Some(&EOF_HEADER) if packet.len() < 9 => return Ok(scanned),
            _ => {
                return Err(BinlogError::Unexpected {
                    server: conn.server.name.clone(),
                    what: "a binlog scan packet that is neither an event nor its end".into(),
                })
            }
        }
        let (_, decoded) = decoder
            .feed(&packet[1..])
            .map_err(|source| BinlogError::Event {
                server: conn.server.name.clone(),
                file: String::new(),
                position: 0,
                source,
            })?;
        if let Some(gtid) = decoded.gtid.as_deref().and_then(parse_gtid) {
            if scanned.logged.len() >= MAX_LOGGED {
                return Err(BinlogError::Unexpected {
                    server: conn.server.name.clone(),
                    what: format!("more than {MAX_LOGGED} transactions after {from}"),
                });
            }
            scanned.logged.push(gtid);
            mixed = false;
        }
        if let (Some(thread), Some(last)) = (decoded.thread, scanned.logged.last_mut()) {
            match last.thread {
                None if !mixed => last.thread = Some(thread),
                Some(seen) if seen != thread => {
                    last.thread = None;
                    mixed = true;
                }
                _ => {}
            }
        }
    }
}

/// "domain-server-seq", as the decoder names a GTID.
fn parse_gtid(text: &str) -> Option<Logged> {
    let mut parts = text.splitn(3, '-');
    Some(Logged {
        domain: parts.next()?.parse().ok()?,
        server: parts.next()?.parse().ok()?,
        seq: parts.next()?.parse().ok()?,
        thread: None,
    })
}

fn refused(conn: &BackendConn, what: &'static str, err: ErrPacket) -> BinlogError {
    BinlogError::Refused {
        server: conn.server.name.clone(),
        what,
        err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtids_as_the_decoder_names_them() {
        assert_eq!(
            parse_gtid("0-3-1200"),
            Some(Logged {
                domain: 0,
                server: 3,
                seq: 1200,
                thread: None
            })
        );
        assert_eq!(parse_gtid("0-3"), None);
        assert_eq!(parse_gtid("x-3-1"), None);
    }
}
