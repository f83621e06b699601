//! A minimal MySQL client for the benchmarks' own connections: log in with
//! `mysql_native_password`, ping, send a text query and read its reply to the end (with
//! its values when asked), prepare and execute a statement. The mux scenario holds
//! thousands of these idle; the failover and upgrade scenarios' probes run through them.
//! Not on the request path.

use std::time::Duration;

use anyhow::{bail, Context};
use bytes::BytesMut;
use sluice_wire::auth::native_scramble;
use sluice_wire::handshake::{HandshakeResponse, InitialHandshake};
use sluice_wire::lenenc::Reader;
use sluice_wire::packet::{take_packet, write_packet};
use sluice_wire::response::{
    ErrPacket, OkPacket, EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER,
};
use sluice_wire::resultset::text_values;
use sluice_wire::statement::PrepareOk;
use sluice_wire::CapabilityFlags;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest reply packet read: the benchmarks' own statements answer in a few bytes.
const MAX_PACKET: usize = 1 << 20;

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_PING: u8 = 0x0e;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
/// `MYSQL_TYPE_LONGLONG`: every parameter the benchmarks bind is an integer.
const TYPE_LONGLONG: u8 = 0x08;

/// The values of a result's rows, as text (`None` for SQL NULL).
pub(crate) type Rows = Vec<Vec<Option<String>>>;

/// What a statement got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Ok {
        affected_rows: u64,
    },
    Err(ErrPacket),
    /// A result set, read to its end: the number of rows.
    Rows(u64),
}

/// A logged-in connection.
pub(crate) struct Client {
    stream: TcpStream,
    buf: BytesMut,
}

impl Client {
    /// Connects to `addr` ("host:port") and logs in as `user` with no default database.
    pub(crate) async fn connect(addr: &str, user: &str, password: &str) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).await?;
        // Probes measure time between writes: no Nagle delay on a statement.
        stream.set_nodelay(true)?;
        let mut c = Client {
            stream,
            buf: BytesMut::with_capacity(256),
        };
        let (seq, greeting) = c.read().await?;
        let hs = InitialHandshake::parse(&greeting).map_err(|e| anyhow::anyhow!("{e}"))?;
        // No MULTI_RESULTS and no DEPRECATE_EOF: every reply is one result, its columns
        // closed by an EOF packet, which is all `ReplyReader` knows.
        let caps = CapabilityFlags(
            CapabilityFlags::PROTOCOL_41
                | CapabilityFlags::SECURE_CONNECTION
                | CapabilityFlags::PLUGIN_AUTH
                | CapabilityFlags::LONG_PASSWORD
                | CapabilityFlags::TRANSACTIONS,
        );
        let response = HandshakeResponse {
            capabilities: caps,
            mariadb_caps: 0,
            max_packet: 1 << 24,
            charset: 45,
            username: user.as_bytes().to_vec(),
            auth_response: native_scramble(
                password.as_bytes(),
                &hs.scramble[..20.min(hs.scramble.len())],
            ),
            database: None,
            auth_plugin: Some(b"mysql_native_password".to_vec()),
            attributes: Vec::new(),
        };
        c.write(seq.wrapping_add(1), &response.payload()).await?;
        let (_, answer) = c.read().await?;
        match answer.first() {
            Some(&OK_HEADER) => Ok(c),
            Some(&ERR_HEADER) => bail!(
                "login refused: {}",
                ErrPacket::parse(&answer).map_or_else(|e| e.to_string(), |e| e.to_string())
            ),
            _ => bail!("login refused: {}", String::from_utf8_lossy(&answer)),
        }
    }

    /// Whether the server answers a ping with OK within 10 s.
    pub(crate) async fn ping(&mut self) -> anyhow::Result<bool> {
        self.write(0, &[COM_PING]).await?;
        let (_, answer) = tokio::time::timeout(Duration::from_secs(10), self.read()).await??;
        Ok(answer.first() == Some(&OK_HEADER))
    }

    /// Sends `sql` as COM_QUERY and reads the whole reply. An error reply is a
    /// [`Reply::Err`]; an error means the connection failed or the reply made no sense,
    /// and the connection is not to be used again.
    pub(crate) async fn query(&mut self, sql: &str) -> anyhow::Result<Reply> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(COM_QUERY);
        payload.extend_from_slice(sql.as_bytes());
        self.write(0, &payload).await?;
        self.reply(ReplyReader::default())
            .await
            .map(|(reply, _)| reply)
    }

    /// [`Client::query`], with the values of the rows when the reply is a result set.
    pub(crate) async fn query_values(&mut self, sql: &str) -> anyhow::Result<(Reply, Rows)> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(COM_QUERY);
        payload.extend_from_slice(sql.as_bytes());
        self.write(0, &payload).await?;
        let reader = ReplyReader {
            keep_rows: true,
            ..ReplyReader::default()
        };
        let (reply, kept) = self.reply(reader).await?;
        let rows = kept
            .iter()
            .map(|row| {
                let values = text_values(row).map_err(|e| anyhow::anyhow!("a text row: {e}"))?;
                Ok(values
                    .into_iter()
                    .map(|v| v.map(|v| String::from_utf8_lossy(v).into_owned()))
                    .collect())
            })
            .collect::<anyhow::Result<Rows>>()?;
        Ok((reply, rows))
    }

    /// Prepares `sql` (COM_STMT_PREPARE); the server's refusal as `Err` inside.
    pub(crate) async fn prepare(
        &mut self,
        sql: &str,
    ) -> anyhow::Result<Result<PrepareOk, ErrPacket>> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(COM_STMT_PREPARE);
        payload.extend_from_slice(sql.as_bytes());
        self.write(0, &payload).await?;
        let (_, first) = self.read().await?;
        if first.first() == Some(&ERR_HEADER) {
            return Ok(Err(ErrPacket::parse(&first).context("an ERR packet")?));
        }
        let ok = PrepareOk::parse(&first).context("not a prepare-OK")?;
        // Without DEPRECATE_EOF each list of definitions ends with an EOF packet.
        for count in [ok.params, ok.columns] {
            if count > 0 {
                for _ in 0..=count {
                    self.read().await?;
                }
            }
        }
        Ok(Ok(ok))
    }

    /// Executes a prepared statement (COM_STMT_EXECUTE) with `params` bound as BIGINT,
    /// reading the whole reply; binary rows are counted, not decoded.
    pub(crate) async fn execute(
        &mut self,
        stmt: &PrepareOk,
        params: &[i64],
    ) -> anyhow::Result<Reply> {
        self.write(0, &execute_payload(stmt.stmt_id, params))
            .await?;
        self.reply(ReplyReader::default())
            .await
            .map(|(reply, _)| reply)
    }

    /// Says goodbye (COM_QUIT) and closes the connection, as a polite client does.
    pub(crate) async fn quit(mut self) {
        let _ = self.write(0, &[COM_QUIT]).await;
        let _ = self.stream.shutdown().await;
    }

    async fn reply(&mut self, mut reader: ReplyReader) -> anyhow::Result<(Reply, Vec<Vec<u8>>)> {
        loop {
            let (_, packet) = self.read().await?;
            if let Some(reply) = reader.push(&packet)? {
                return Ok((reply, reader.kept));
            }
        }
    }

    async fn read(&mut self) -> anyhow::Result<(u8, Vec<u8>)> {
        loop {
            if let Some(p) = take_packet(&mut self.buf, MAX_PACKET)? {
                return Ok((p.seq, p.payload.to_vec()));
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                bail!("connection closed by the server");
            }
        }
    }

    async fn write(&mut self, seq: u8, payload: &[u8]) -> anyhow::Result<()> {
        let mut out = BytesMut::with_capacity(payload.len() + 4);
        write_packet(&mut out, seq, payload);
        self.stream.write_all(&out).await?;
        Ok(())
    }
}

/// `COM_STMT_EXECUTE` of statement `id`, no cursor, one iteration, every parameter a
/// non-NULL BIGINT with its type sent.
fn execute_payload(id: u32, params: &[i64]) -> Vec<u8> {
    let mut p = vec![COM_STMT_EXECUTE];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    if !params.is_empty() {
        p.resize(p.len() + params.len().div_ceil(8), 0);
        p.push(1);
        for _ in params {
            p.extend_from_slice(&[TYPE_LONGLONG, 0]);
        }
        for v in params {
            p.extend_from_slice(&v.to_le_bytes());
        }
    }
    p
}

/// Where a reply to COM_QUERY is, packet by packet (without DEPRECATE_EOF): an OK, an
/// ERR, or a column count, that many column definitions and an EOF, then rows up to an
/// EOF (or an ERR, when the statement fails midway).
#[derive(Debug, Default)]
struct ReplyReader {
    state: ReplyState,
    rows: u64,
    /// Keep the rows' payloads in `kept` (small results only).
    keep_rows: bool,
    kept: Vec<Vec<u8>>,
}

#[derive(Debug, Default)]
enum ReplyState {
    #[default]
    First,
    /// Column definitions still to come.
    Columns(u64),
    /// The EOF after the column definitions.
    ColumnsEnd,
    Rows,
}

/// A classic EOF packet: its header and at most 8 more bytes (a row starting with 0xfe
/// is longer).
fn is_eof(payload: &[u8]) -> bool {
    payload.first() == Some(&EOF_HEADER) && payload.len() < 9
}

impl ReplyReader {
    /// Takes the next packet; the reply once it is complete.
    fn push(&mut self, payload: &[u8]) -> anyhow::Result<Option<Reply>> {
        if payload.first() == Some(&ERR_HEADER) {
            return Ok(Some(Reply::Err(
                ErrPacket::parse(payload).context("an ERR packet")?,
            )));
        }
        match self.state {
            ReplyState::First => match payload.first() {
                Some(&OK_HEADER) => {
                    let ok = OkPacket::parse(payload).context("an OK packet")?;
                    return Ok(Some(Reply::Ok {
                        affected_rows: ok.affected_rows,
                    }));
                }
                Some(&LOCAL_INFILE_HEADER) => bail!("the server asked for a local file"),
                _ => {
                    let columns = Reader::new(payload)
                        .lenenc_int("column count")
                        .context("a result set's column count")?;
                    self.state = ReplyState::Columns(columns);
                }
            },
            ReplyState::Columns(0) | ReplyState::ColumnsEnd => {
                if !is_eof(payload) {
                    bail!("no EOF after the column definitions");
                }
                self.state = ReplyState::Rows;
            }
            ReplyState::Columns(n) => {
                self.state = match n - 1 {
                    0 => ReplyState::ColumnsEnd,
                    left => ReplyState::Columns(left),
                };
            }
            ReplyState::Rows if is_eof(payload) => return Ok(Some(Reply::Rows(self.rows))),
            ReplyState::Rows => {
                self.rows += 1;
                if self.keep_rows {
                    self.kept.push(payload.to_vec());
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(packets: &[&[u8]]) -> Vec<Option<Reply>> {
        let mut reader = ReplyReader::default();
        packets.iter().map(|p| reader.push(p).unwrap()).collect()
    }

    #[test]
    fn replies_are_read_to_their_end() {
        // INSERT: OK, 1 row affected, autocommit status.
        assert_eq!(
            read_all(&[&[0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00]]),
            [Some(Reply::Ok { affected_rows: 1 })]
        );
        let err = b"\xff\xbd\x04#40001Deadlock found";
        match &read_all(&[err])[0] {
            Some(Reply::Err(e)) => {
                assert_eq!((e.code, e.state_str()), (1213, "40001"));
                assert_eq!(e.message, "Deadlock found");
            }
            other => panic!("{other:?}"),
        }
        // One column, two rows (the second starting with 0xfe, as a long value would),
        // then EOF.
        let eof: &[u8] = &[0xfe, 0x00, 0x00, 0x02, 0x00];
        let long_row = [&[0xfe][..], &[b'x'; 9]].concat();
        let replies = read_all(&[&[0x01], b"column definition", eof, b"\x011", &long_row, eof]);
        assert_eq!(replies[..5], [None, None, None, None, None]);
        assert_eq!(replies[5], Some(Reply::Rows(2)));
        // A statement failing midway ends its result with an ERR.
        let replies = read_all(&[&[0x02], b"a", b"b", eof, b"\x011\x012", err]);
        assert!(matches!(replies[5], Some(Reply::Err(_))), "{replies:?}");
    }

    #[test]
    fn rows_are_kept_when_asked() {
        let mut reader = ReplyReader {
            keep_rows: true,
            ..ReplyReader::default()
        };
        let eof: &[u8] = &[0xfe, 0x00, 0x00, 0x02, 0x00];
        for p in [&[0x02][..], b"a", b"b", eof, b"\x0242\xfb"] {
            assert_eq!(reader.push(p).unwrap(), None);
        }
        assert_eq!(reader.push(eof).unwrap(), Some(Reply::Rows(1)));
        let values = text_values(&reader.kept[0]).unwrap();
        assert_eq!(values, [Some(&b"42"[..]), None]);
    }

    #[test]
    fn an_execute_binds_bigints() {
        assert_eq!(execute_payload(7, &[]), [0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0]);
        let p = execute_payload(7, &[-2]);
        assert_eq!(p[10..14], [0, 1, TYPE_LONGLONG, 0]);
        assert_eq!(p[14..], (-2i64).to_le_bytes());
    }

    #[test]
    fn a_result_without_its_eof_is_an_error() {
        let mut reader = ReplyReader::default();
        reader.push(&[0x01]).unwrap();
        reader.push(b"column").unwrap();
        assert!(reader.push(b"\x01a row").is_err());
    }
}
