//! A minimal MySQL client for the benchmarks' own connections: log in with
//! `mysql_native_password` and ping. The mux scenario holds thousands of these idle.
//! Not on the request path.

use std::time::Duration;

use anyhow::bail;
use bytes::BytesMut;
use sluice_wire::auth::native_scramble;
use sluice_wire::handshake::{HandshakeResponse, InitialHandshake};
use sluice_wire::packet::{take_packet, write_packet};
use sluice_wire::response::{ErrPacket, ERR_HEADER, OK_HEADER};
use sluice_wire::CapabilityFlags;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest reply packet read: the benchmarks' own commands answer in a few bytes.
const MAX_PACKET: usize = 1 << 20;

const COM_PING: u8 = 0x0e;

/// A logged-in connection.
pub(crate) struct Client {
    stream: TcpStream,
    buf: BytesMut,
}

impl Client {
    /// Connects to `addr` ("host:port") and logs in as `user` with no default database.
    pub(crate) async fn connect(addr: &str, user: &str, password: &str) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).await?;
        let mut c = Client {
            stream,
            buf: BytesMut::with_capacity(256),
        };
        let (seq, greeting) = c.read().await?;
        let hs = InitialHandshake::parse(&greeting).map_err(|e| anyhow::anyhow!("{e}"))?;
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
