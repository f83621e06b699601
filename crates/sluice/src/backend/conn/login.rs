//! The login to a server: its greeting, the capabilities and TLS both sides agree on,
//! the handshake response and the auth exchange (`mysql_native_password`,
//! `caching_sha2_password` with its full path, `client_ed25519`, cleartext over TLS).

use super::{BackendConn, ConnParams};
use crate::auth::BackendCredentials;
use crate::backend::config::TlsMode;
use crate::error::BackendError;
use crate::stream::{Endpoint, Stream};
use sluice_wire::auth as wauth;
use sluice_wire::handshake::{Attributes, HandshakeResponse, InitialHandshake};
use sluice_wire::response::{ErrPacket, OkPacket, ERR_HEADER, OK_HEADER};
use sluice_wire::{CapabilityFlags, ProtocolError};

/// Capabilities Sluice always uses with backends, whatever the client negotiated:
/// they only affect the login exchange, not the layout of later packets.
const LOGIN_CAPS: u32 = CapabilityFlags::LONG_PASSWORD
    | CapabilityFlags::PROTOCOL_41
    | CapabilityFlags::SECURE_CONNECTION
    | CapabilityFlags::PLUGIN_AUTH
    | CapabilityFlags::PLUGIN_AUTH_LENENC_CLIENT_DATA
    | CapabilityFlags::CONNECT_ATTRS;

/// What the server records of a connection's client (`session_connect_attrs`): Sluice's
/// own name, so that an operator tells its connections apart, or a client's forwarded
/// ones with `proxy=sluice` added.
fn login_attributes(client: Option<&Attributes>) -> Attributes {
    let pair = |k: &str, v: &str| (k.as_bytes().to_vec(), v.as_bytes().to_vec());
    match client {
        Some(attrs) => {
            let mut a = attrs.clone();
            a.push(pair("proxy", "sluice"));
            a
        }
        None => vec![
            pair("_client_name", "sluice"),
            pair("_client_version", env!("CARGO_PKG_VERSION")),
            pair("program_name", "sluice"),
        ],
    }
}

impl BackendConn {
    /// Logs in as `creds`: the server's greeting, the capabilities both sides agree on
    /// (and TLS), the handshake response, then the auth exchange.
    pub(super) async fn login(
        &mut self,
        creds: &BackendCredentials,
        params: &ConnParams,
        database: Option<&[u8]>,
        attributes: Option<&Attributes>,
    ) -> Result<(), BackendError> {
        let (hs, mut seq) = self.read_greeting().await?;
        let use_tls = self.wants_tls(&hs)?;
        let caps = self.agree_caps(&hs, params, database.is_some(), use_tls);
        let offered = String::from_utf8_lossy(&hs.auth_plugin).into_owned();
        let nonce = hs.scramble.clone();
        let mut response = HandshakeResponse {
            capabilities: caps,
            mariadb_caps: self.mariadb_caps,
            max_packet: 1 << 30,
            charset: params.charset,
            username: creds.user.as_bytes().to_vec(),
            auth_response: Vec::new(),
            database: database.map(<[u8]>::to_vec),
            auth_plugin: None,
            attributes: login_attributes(attributes),
        };
        if use_tls {
            self.write_packet(seq, &response.ssl_request_payload())
                .await?;
            seq = seq.wrapping_add(1);
            self.start_tls().await?;
        }
        let (plugin, auth) = self.auth_data(&offered, creds, &nonce);
        response.auth_response = auth;
        response.auth_plugin = Some(plugin.as_bytes().to_vec());
        self.write_packet(seq, &response.payload()).await?;
        self.auth_exchange(creds, plugin, nonce).await
    }

    /// The server's greeting, kept on the connection (thread id, version, status), and
    /// the sequence id to answer it with.
    async fn read_greeting(&mut self) -> Result<(InitialHandshake, u8), BackendError> {
        let first = self.read_packet().await?;
        if first.payload.first() == Some(&ERR_HEADER) {
            // "Too many connections", "Host is blocked"... before any login.
            let err = ErrPacket::parse(&first.payload).map_err(|e| self.proto_err(e))?;
            return Err(BackendError::Rejected {
                server: self.server.name.clone(),
                err,
            });
        }
        let hs = InitialHandshake::parse(&first.payload).map_err(|e| self.proto_err(e))?;
        self.thread_id = hs.connection_id;
        self.server_version = String::from_utf8_lossy(&hs.server_version).into_owned();
        self.status = hs.status;
        Ok((hs, first.last_seq.wrapping_add(1)))
    }

    /// Whether to log in over TLS: as the server's `tls` says, given what it offers.
    fn wants_tls(&self, hs: &InitialHandshake) -> Result<bool, BackendError> {
        match self.server.tls {
            TlsMode::Disabled => Ok(false),
            TlsMode::Preferred => Ok(hs.capabilities.contains(CapabilityFlags::SSL)),
            TlsMode::Required => {
                if !hs.capabilities.contains(CapabilityFlags::SSL) {
                    return Err(BackendError::Tls {
                        server: self.server.name.clone(),
                        reason: "the server does not offer TLS and tls = \"required\"".into(),
                    });
                }
                Ok(true)
            }
        }
    }

    /// The capabilities to log in with: what Sluice and the client need that the server
    /// has. Kept on the connection, with the MariaDB ones.
    fn agree_caps(
        &mut self,
        hs: &InitialHandshake,
        params: &ConnParams,
        with_database: bool,
        use_tls: bool,
    ) -> CapabilityFlags {
        let mut want = LOGIN_CAPS | params.wire_caps;
        if with_database {
            want |= CapabilityFlags::CONNECT_WITH_DB;
        }
        if use_tls {
            want |= CapabilityFlags::SSL;
        }
        let mut caps = want & (hs.capabilities.0 | CapabilityFlags::LONG_PASSWORD);
        let mariadb_caps = params.mariadb_caps & hs.mariadb_caps;
        if hs.capabilities.0 & CapabilityFlags::LONG_PASSWORD == 0 && mariadb_caps != 0 {
            // MariaDB reads the extended word only from clients that clear this bit.
            caps &= !CapabilityFlags::LONG_PASSWORD;
        }
        self.caps = CapabilityFlags(caps);
        self.mariadb_caps = mariadb_caps;
        self.caps
    }

    /// The auth exchange after the handshake response, `plugin` answered with so far: a
    /// bounded number of rounds of switch / more-data packets, until the server's OK.
    async fn auth_exchange(
        &mut self,
        creds: &BackendCredentials,
        mut plugin: String,
        mut nonce: Vec<u8>,
    ) -> Result<(), BackendError> {
        for _ in 0..6 {
            let p = self.read_packet().await?;
            let next = p.last_seq.wrapping_add(1);
            match p.payload.first().copied() {
                Some(OK_HEADER) => {
                    let ok = OkPacket::parse(&p.payload).map_err(|e| self.proto_err(e))?;
                    self.status = ok.status;
                    return Ok(());
                }
                Some(ERR_HEADER) => {
                    let err = ErrPacket::parse(&p.payload).map_err(|e| self.proto_err(e))?;
                    return Err(BackendError::Rejected {
                        server: self.server.name.clone(),
                        err,
                    });
                }
                Some(wauth::AUTH_SWITCH) => {
                    let (new_plugin, new_nonce) =
                        wauth::parse_auth_switch(&p.payload).ok_or_else(|| {
                            self.proto_err(ProtocolError::Malformed("auth switch request"))
                        })?;
                    nonce = new_nonce;
                    let (chosen, data) = self.auth_data(&new_plugin, creds, &nonce);
                    if chosen != new_plugin {
                        return Err(BackendError::Unsupported {
                            server: self.server.name.clone(),
                            what: format!("a login with auth plugin {new_plugin}"),
                        });
                    }
                    plugin = chosen;
                    self.write_packet(next, &data).await?;
                }
                Some(wauth::AUTH_MORE_DATA) if plugin == wauth::CACHING_SHA2_PASSWORD => {
                    match p.payload.get(1).copied() {
                        Some(wauth::SHA2_FAST_AUTH_OK) => {}
                        Some(wauth::SHA2_PERFORM_FULL_AUTH) => {
                            self.sha2_full_auth(creds, &nonce, next).await?;
                        }
                        _ => {
                            return Err(self
                                .proto_err(ProtocolError::Malformed("caching_sha2_password data")))
                        }
                    }
                }
                _ => return Err(self.proto_err(ProtocolError::Malformed("login response"))),
            }
        }
        Err(self.proto_err(ProtocolError::Malformed("login did not finish")))
    }

    /// The plugin we answer with and its data. Unknown plugins are answered with
    /// `mysql_native_password`, which a server then switches away from or refuses.
    fn auth_data(
        &self,
        plugin: &str,
        creds: &BackendCredentials,
        nonce: &[u8],
    ) -> (String, Vec<u8>) {
        let pw = creds.password.0.as_bytes();
        // Credentials learnt from a client's native proof have no password: only
        // mysql_native_password can use them.
        match plugin {
            wauth::CACHING_SHA2_PASSWORD if creds.has_password() => {
                (plugin.into(), wauth::sha2_scramble(pw, nonce))
            }
            wauth::CLEAR_PASSWORD if self.stream.is_tls() && creds.has_password() => {
                let mut p = pw.to_vec();
                p.push(0);
                (plugin.into(), p)
            }
            wauth::CLIENT_ED25519 if creds.has_password() => {
                (plugin.into(), wauth::ed25519_sign(pw, nonce))
            }
            _ => (
                wauth::NATIVE_PASSWORD.into(),
                creds.native_response(&nonce[..nonce.len().min(20)]),
            ),
        }
    }

    /// `caching_sha2_password` full authentication: the password in clear over TLS, or
    /// RSA-encrypted with the server's public key.
    async fn sha2_full_auth(
        &mut self,
        creds: &BackendCredentials,
        nonce: &[u8],
        seq: u8,
    ) -> Result<(), BackendError> {
        let pw = creds.password.0.as_bytes();
        if self.stream.is_tls() {
            let mut p = pw.to_vec();
            p.push(0);
            return self.write_packet(seq, &p).await;
        }
        self.write_packet(seq, &[wauth::SHA2_REQUEST_PUBLIC_KEY])
            .await?;
        let key = self.read_packet().await?;
        if key.payload.first() != Some(&wauth::AUTH_MORE_DATA) {
            return Err(self.proto_err(ProtocolError::Malformed("public key response")));
        }
        let encrypted =
            crate::auth::rsa_encrypt_password(&key.payload[1..], pw, nonce).map_err(|e| {
                BackendError::Tls {
                    server: self.server.name.clone(),
                    reason: format!("RSA public key of the server: {e}"),
                }
            })?;
        self.write_packet(key.last_seq.wrapping_add(1), &encrypted)
            .await
    }

    async fn start_tls(&mut self) -> Result<(), BackendError> {
        let tls_err = |reason: String| BackendError::Tls {
            server: self.server.name.clone(),
            reason,
        };
        let config = self
            .server
            .tls_config
            .clone()
            .ok_or_else(|| tls_err("no TLS configuration".into()))?;
        let Endpoint::Tcp(address) = &self.server.endpoint else {
            // Refused by the configuration's checks; a socket is local, as in the server.
            return Err(tls_err("no TLS over a Unix socket".into()));
        };
        let name = crate::tls::server_name(address).map_err(|e| tls_err(e.to_string()))?;
        let socket = self
            .stream
            .take_plain()
            .ok_or_else(|| tls_err("already encrypted".into()))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, socket)
            .await
            .map_err(|e| tls_err(e.to_string()))?;
        self.stream = Stream::Connected(Box::new(tls));
        Ok(())
    }
}
