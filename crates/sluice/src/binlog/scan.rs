//! Reads back what a server logged after a GTID position, and which connection of the
//! server it came from ran each transaction. A failover asks the replica it promoted,
//! to learn whose commits, among those no one was told of, it has.

use super::events::Decoder;
use super::{
    next_packet, protocol, send_dump, set_variable, BinlogError, MARIA_SLAVE_CAPABILITY_GTID,
    MAX_EVENT,
};
use crate::backend::BackendConn;
use sluice_wire::response::{ErrPacket, ERR_HEADER};

/// COM_BINLOG_DUMP flag: end with an EOF packet at the end of the binlog instead of
/// waiting for more.
const DUMP_NON_BLOCK: u16 = 1;
/// COM_BINLOG_DUMP flag (MariaDB): send `Annotate_rows` events, which a primary
/// otherwise leaves out; under row-based logging they name Sluice's connections.
const DUMP_SEND_ANNOTATE_ROWS: u16 = 2;
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
    /// The connection on `server` that ran it, as its statement events name it (or the
    /// statements behind its row events, when Sluice sent them). None when nothing
    /// names one or they differ.
    pub thread: Option<u32>,
    /// The first auto-increment value its first `INSERT_ID` event says a statement of
    /// it generated: what that statement left `LAST_INSERT_ID()` at.
    pub insert_id: Option<u64>,
}

/// The transactions `conn`'s server logged after `from` (a GTID position, as
/// `gtid_binlog_pos` shows one), up to the end of its binlog. Needs the REPLICATION
/// SLAVE privilege. The caller bounds it in time. In log order.
pub async fn logged_after(conn: &mut BackendConn, from: &str) -> Result<Vec<Logged>, BinlogError> {
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
        set_variable(conn, &sql).await?;
    }
    send_dump(
        conn,
        4,
        DUMP_NON_BLOCK | DUMP_SEND_ANNOTATE_ROWS,
        DUMP_SERVER_ID,
        "",
    )
    .await?;

    let mut decoder = Decoder::new();
    let mut logged: Vec<Logged> = Vec::new();
    // Whether the current group's thread was seen yet, and differed.
    let mut mixed = false;
    loop {
        let packet = next_packet(conn, MAX_EVENT, None).await?;
        match packet.first() {
            Some(&0) => {}
            Some(&ERR_HEADER) => {
                let err = ErrPacket::parse(&packet).map_err(|e| protocol(conn, e))?;
                return Err(BinlogError::Refused {
                    server: conn.server.name.clone(),
                    what: "the binlog scan",
                    err,
                });
            }
            Some(&EOF_HEADER) if packet.len() < 9 => return Ok(logged),
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
            if logged.len() >= MAX_LOGGED {
                return Err(BinlogError::Unexpected {
                    server: conn.server.name.clone(),
                    what: format!("more than {MAX_LOGGED} transactions after {from}"),
                });
            }
            logged.push(gtid);
            mixed = false;
        }
        if let (Some(id), Some(last)) = (decoded.insert_id, logged.last_mut()) {
            last.insert_id.get_or_insert(id);
        }
        if let (Some(thread), Some(last)) = (decoded.thread, logged.last_mut()) {
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
        insert_id: None,
    })
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
                thread: None,
                insert_id: None,
            })
        );
        assert_eq!(parse_gtid("0-3"), None);
        assert_eq!(parse_gtid("x-3-1"), None);
    }
}
