//! Connection phase messages: the server's initial handshake (v10), the client's SSL
//! request and handshake response, and COM_CHANGE_USER, each parsed and serialized.

use crate::lenenc::{put_lenenc_bytes, put_lenenc_int, Reader};
use crate::{CapabilityFlags, ProtocolError, StatusFlags};
use bytes::{BufMut, BytesMut};

/// Connection attributes as (key, value) pairs, in the order the client sent them.
pub type Attributes = Vec<(Vec<u8>, Vec<u8>)>;

/// The server's first packet (`Protocol::HandshakeV10`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialHandshake {
    pub server_version: Vec<u8>,
    pub connection_id: u32,
    /// The full nonce (20 bytes for the plugins we speak), without the trailing NUL.
    pub scramble: Vec<u8>,
    pub capabilities: CapabilityFlags,
    pub charset: u8,
    pub status: StatusFlags,
    pub auth_plugin: Vec<u8>,
    /// MariaDB extended capabilities (see [`crate::flags::mariadb`]); zero from MySQL.
    pub mariadb_caps: u32,
}

impl InitialHandshake {
    pub fn parse(payload: &[u8]) -> Result<InitialHandshake, ProtocolError> {
        let mut r = Reader::new(payload);
        if r.u8("protocol version")? != 10 {
            return Err(ProtocolError::Malformed(
                "handshake: protocol version is not 10",
            ));
        }
        let server_version = r.null_terminated("server version")?.to_vec();
        let connection_id = r.u32("connection id")?;
        let mut scramble = r.take(8, "scramble")?.to_vec();
        r.u8("filler")?;
        let mut caps = r.u16("capabilities")? as u32;
        let mut charset = 0;
        let mut status = StatusFlags(0);
        let mut auth_plugin = Vec::new();
        let mut mariadb_caps = 0;
        if !r.is_empty() {
            charset = r.u8("charset")?;
            status = StatusFlags(r.u16("status")?);
            caps |= (r.u16("capabilities")? as u32) << 16;
            let data_len = r.u8("auth data length")? as usize;
            let reserved = r.take(10, "reserved")?;
            if caps & CapabilityFlags::LONG_PASSWORD == 0 {
                mariadb_caps =
                    u32::from_le_bytes([reserved[6], reserved[7], reserved[8], reserved[9]]);
            }
            if caps & CapabilityFlags::SECURE_CONNECTION != 0 {
                let n = data_len.saturating_sub(8).max(13);
                let part2 = r.take(n.min(r.remaining()), "scramble part 2")?;
                // The second part is NUL-terminated; the NUL is not part of the nonce.
                let part2 = part2.strip_suffix(&[0]).unwrap_or(part2);
                scramble.extend_from_slice(part2);
            }
            if caps & CapabilityFlags::PLUGIN_AUTH != 0 && !r.is_empty() {
                let rest = r.rest();
                let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                auth_plugin = rest[..end].to_vec();
            }
        }
        Ok(InitialHandshake {
            server_version,
            connection_id,
            scramble,
            capabilities: CapabilityFlags(caps),
            charset,
            status,
            auth_plugin,
            mariadb_caps,
        })
    }

    pub fn payload(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(128);
        b.put_u8(10);
        b.put_slice(&self.server_version);
        b.put_u8(0);
        b.put_u32_le(self.connection_id);
        b.put_slice(&self.scramble[..8]);
        b.put_u8(0);
        b.put_u16_le(self.capabilities.0 as u16);
        b.put_u8(self.charset);
        b.put_u16_le(self.status.0);
        b.put_u16_le((self.capabilities.0 >> 16) as u16);
        b.put_u8(self.scramble.len() as u8 + 1);
        b.put_slice(&[0; 6]);
        b.put_u32_le(self.mariadb_caps);
        b.put_slice(&self.scramble[8..]);
        b.put_u8(0);
        b.put_slice(&self.auth_plugin);
        b.put_u8(0);
        b
    }
}

/// The client's `SSLRequest`: the first 32 bytes of a handshake response, sent in clear
/// before the TLS handshake. Recognised by its length and the `CLIENT_SSL` bit.
pub const SSL_REQUEST_LEN: usize = 32;

/// The client's reply to the handshake (`Protocol::HandshakeResponse41`).
#[derive(Clone, PartialEq, Eq)]
pub struct HandshakeResponse {
    pub capabilities: CapabilityFlags,
    /// MariaDB extended capabilities, sent when `CLIENT_LONG_PASSWORD` is clear.
    pub mariadb_caps: u32,
    pub max_packet: u32,
    pub charset: u8,
    pub username: Vec<u8>,
    pub auth_response: Vec<u8>,
    pub database: Option<Vec<u8>>,
    pub auth_plugin: Option<Vec<u8>>,
    pub attributes: Attributes,
}

impl std::fmt::Debug for HandshakeResponse {
    // The auth response is derived from the password: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeResponse")
            .field("capabilities", &self.capabilities)
            .field("charset", &self.charset)
            .field("username", &String::from_utf8_lossy(&self.username))
            .field(
                "database",
                &self.database.as_deref().map(String::from_utf8_lossy),
            )
            .field(
                "auth_plugin",
                &self.auth_plugin.as_deref().map(String::from_utf8_lossy),
            )
            .finish_non_exhaustive()
    }
}

impl HandshakeResponse {
    /// Parses the fixed prefix shared by the SSL request and the full response:
    /// capabilities, MariaDB extended capabilities, max packet size, character set.
    pub fn parse_prefix(payload: &[u8]) -> Result<(CapabilityFlags, u32, u32, u8), ProtocolError> {
        let mut r = Reader::new(payload);
        let caps = CapabilityFlags(r.u32("capabilities")?);
        if !caps.contains(CapabilityFlags::PROTOCOL_41) {
            return Err(ProtocolError::Malformed(
                "handshake response: pre-4.1 clients are not supported",
            ));
        }
        let max_packet = r.u32("max packet")?;
        let charset = r.u8("charset")?;
        let reserved = r.take(23, "reserved")?;
        let mariadb_caps = if caps.contains(CapabilityFlags::LONG_PASSWORD) {
            0
        } else {
            u32::from_le_bytes([reserved[19], reserved[20], reserved[21], reserved[22]])
        };
        Ok((caps, mariadb_caps, max_packet, charset))
    }

    pub fn parse(payload: &[u8]) -> Result<HandshakeResponse, ProtocolError> {
        let (capabilities, mariadb_caps, max_packet, charset) = Self::parse_prefix(payload)?;
        let mut r = Reader::new(&payload[SSL_REQUEST_LEN..]);
        let username = r.null_terminated("username")?.to_vec();
        let auth_response = parse_auth_response(&mut r, capabilities)?;
        let database = if capabilities.contains(CapabilityFlags::CONNECT_WITH_DB) && !r.is_empty() {
            Some(r.null_terminated("database")?.to_vec())
        } else {
            None
        };
        let (auth_plugin, attributes) = parse_plugin_and_attributes(&mut r, capabilities)?;
        Ok(HandshakeResponse {
            capabilities,
            mariadb_caps,
            max_packet,
            charset,
            username,
            auth_response,
            // Empty means "not given", as servers read it.
            database: database.filter(|d| !d.is_empty()),
            auth_plugin,
            attributes,
        })
    }

    pub fn payload(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(128);
        self.put_prefix(&mut b);
        b.put_slice(&self.username);
        b.put_u8(0);
        if self
            .capabilities
            .contains(CapabilityFlags::PLUGIN_AUTH_LENENC_CLIENT_DATA)
        {
            put_lenenc_bytes(&mut b, &self.auth_response);
        } else if self
            .capabilities
            .contains(CapabilityFlags::SECURE_CONNECTION)
        {
            b.put_u8(self.auth_response.len() as u8);
            b.put_slice(&self.auth_response);
        } else {
            // Old clients: NUL-terminated (found by the handshake fuzz target).
            b.put_slice(&self.auth_response);
            b.put_u8(0);
        }
        if self.capabilities.contains(CapabilityFlags::CONNECT_WITH_DB) {
            b.put_slice(self.database.as_deref().unwrap_or_default());
            b.put_u8(0);
        }
        if self.capabilities.contains(CapabilityFlags::PLUGIN_AUTH) {
            b.put_slice(self.auth_plugin.as_deref().unwrap_or_default());
            b.put_u8(0);
        }
        if self.capabilities.contains(CapabilityFlags::CONNECT_ATTRS) {
            let mut attrs = BytesMut::new();
            for (k, v) in &self.attributes {
                put_lenenc_bytes(&mut attrs, k);
                put_lenenc_bytes(&mut attrs, v);
            }
            put_lenenc_int(&mut b, attrs.len() as u64);
            b.put_slice(&attrs);
        }
        b
    }

    /// The SSL request that must precede this response when TLS is wanted.
    pub fn ssl_request_payload(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(SSL_REQUEST_LEN);
        self.put_prefix(&mut b);
        b
    }

    fn put_prefix(&self, b: &mut BytesMut) {
        b.put_u32_le(self.capabilities.0);
        b.put_u32_le(self.max_packet);
        b.put_u8(self.charset);
        b.put_slice(&[0; 19]);
        b.put_u32_le(self.mariadb_caps);
    }
}

/// The client's auth data: length-encoded, after one length byte, or NUL-terminated,
/// depending on what was negotiated.
fn parse_auth_response(
    r: &mut Reader<'_>,
    caps: CapabilityFlags,
) -> Result<Vec<u8>, ProtocolError> {
    Ok(
        if caps.contains(CapabilityFlags::PLUGIN_AUTH_LENENC_CLIENT_DATA) {
            r.lenenc_bytes("auth response")?.to_vec()
        } else if caps.contains(CapabilityFlags::SECURE_CONNECTION) {
            let n = r.u8("auth response length")? as usize;
            r.take(n, "auth response")?.to_vec()
        } else {
            r.null_terminated("auth response")?.to_vec()
        },
    )
}

/// The optional tail shared by the handshake response and COM_CHANGE_USER: plugin name
/// (an empty one means none) and connection attributes.
fn parse_plugin_and_attributes(
    r: &mut Reader<'_>,
    caps: CapabilityFlags,
) -> Result<(Option<Vec<u8>>, Attributes), ProtocolError> {
    let plugin = if caps.contains(CapabilityFlags::PLUGIN_AUTH) && !r.is_empty() {
        Some(r.null_terminated("auth plugin")?.to_vec()).filter(|p| !p.is_empty())
    } else {
        None
    };
    let attributes = if caps.contains(CapabilityFlags::CONNECT_ATTRS) && !r.is_empty() {
        parse_attributes(r)?
    } else {
        Vec::new()
    };
    Ok((plugin, attributes))
}

fn parse_attributes(r: &mut Reader<'_>) -> Result<Attributes, ProtocolError> {
    let blob = r.lenenc_bytes("connect attributes")?;
    let mut a = Reader::new(blob);
    let mut out = Vec::new();
    while !a.is_empty() {
        let k = a.lenenc_bytes("attribute key")?.to_vec();
        let v = a.lenenc_bytes("attribute value")?.to_vec();
        out.push((k, v));
    }
    Ok(out)
}

/// COM_CHANGE_USER, after its command byte.
#[derive(Clone, PartialEq, Eq)]
pub struct ChangeUser {
    pub username: Vec<u8>,
    pub auth_response: Vec<u8>,
    pub database: Option<Vec<u8>>,
    pub charset: Option<u16>,
    pub auth_plugin: Option<Vec<u8>>,
    pub attributes: Attributes,
}

impl std::fmt::Debug for ChangeUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeUser")
            .field("username", &String::from_utf8_lossy(&self.username))
            .finish_non_exhaustive()
    }
}

impl ChangeUser {
    /// Parses the payload including its leading command byte.
    pub fn parse(payload: &[u8], caps: CapabilityFlags) -> Result<ChangeUser, ProtocolError> {
        let mut r = Reader::new(payload);
        r.u8("command")?;
        let username = r.null_terminated("username")?.to_vec();
        // COM_CHANGE_USER never uses the length-encoded form.
        let lengths = CapabilityFlags(caps.0 & !CapabilityFlags::PLUGIN_AUTH_LENENC_CLIENT_DATA);
        let auth_response = parse_auth_response(&mut r, lengths)?;
        let database = Some(r.null_terminated("database")?.to_vec()).filter(|d| !d.is_empty());
        let charset = if r.remaining() >= 2 {
            Some(r.u16("charset")?)
        } else {
            None
        };
        let (auth_plugin, attributes) = parse_plugin_and_attributes(&mut r, caps)?;
        Ok(ChangeUser {
            username,
            auth_response,
            database,
            charset,
            auth_plugin,
            attributes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> CapabilityFlags {
        CapabilityFlags(
            CapabilityFlags::PROTOCOL_41
                | CapabilityFlags::SECURE_CONNECTION
                | CapabilityFlags::PLUGIN_AUTH
                | CapabilityFlags::PLUGIN_AUTH_LENENC_CLIENT_DATA
                | CapabilityFlags::CONNECT_WITH_DB
                | CapabilityFlags::CONNECT_ATTRS
                | CapabilityFlags::LONG_PASSWORD,
        )
    }

    #[test]
    fn initial_handshake_round_trip() {
        let h = InitialHandshake {
            server_version: b"5.5.5-10.11.6-MariaDB".to_vec(),
            connection_id: 42,
            scramble: (1..=20).collect(),
            capabilities: caps(),
            charset: 45,
            status: StatusFlags(StatusFlags::AUTOCOMMIT),
            auth_plugin: b"mysql_native_password".to_vec(),
            mariadb_caps: 0,
        };
        assert_eq!(InitialHandshake::parse(&h.payload()).unwrap(), h);
        let mariadb = InitialHandshake {
            capabilities: CapabilityFlags(caps().0 & !CapabilityFlags::LONG_PASSWORD),
            mariadb_caps: crate::flags::mariadb::EXTENDED_TYPE_INFO,
            ..h
        };
        assert_eq!(
            InitialHandshake::parse(&mariadb.payload()).unwrap(),
            mariadb
        );
    }

    #[test]
    fn response_round_trip() {
        let r = HandshakeResponse {
            capabilities: caps(),
            mariadb_caps: 0,
            max_packet: 1 << 24,
            charset: 33,
            username: b"app".to_vec(),
            auth_response: vec![9; 20],
            database: Some(b"shop".to_vec()),
            auth_plugin: Some(b"mysql_native_password".to_vec()),
            attributes: vec![(b"_client_name".to_vec(), b"test".to_vec())],
        };
        assert_eq!(HandshakeResponse::parse(&r.payload()).unwrap(), r);
        assert_eq!(r.ssl_request_payload().len(), SSL_REQUEST_LEN);
        let mariadb = HandshakeResponse {
            capabilities: CapabilityFlags(caps().0 & !CapabilityFlags::LONG_PASSWORD),
            mariadb_caps: crate::flags::mariadb::EXTENDED_TYPE_INFO,
            ..r
        };
        assert_eq!(
            HandshakeResponse::parse(&mariadb.payload()).unwrap(),
            mariadb
        );
    }

    #[test]
    fn response_without_secure_connection_round_trips() {
        let r = HandshakeResponse {
            capabilities: CapabilityFlags(
                CapabilityFlags::PROTOCOL_41 | CapabilityFlags::LONG_PASSWORD,
            ),
            mariadb_caps: 0,
            max_packet: 0,
            charset: 0,
            username: vec![1, 2],
            auth_response: b"pw".to_vec(),
            database: None,
            auth_plugin: None,
            attributes: Vec::new(),
        };
        assert_eq!(HandshakeResponse::parse(&r.payload()).unwrap(), r);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for len in 0..64 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = HandshakeResponse::parse(&junk);
            let _ = InitialHandshake::parse(&junk);
            let _ = ChangeUser::parse(&junk, caps());
        }
    }
}
