//! The connection phase towards a client: handshake, optional TLS upgrade, and the
//! authentication exchange for `mysql_native_password` and `caching_sha2_password`
//! (fast path, full path over TLS, and RSA key exchange), with auth switch when the
//! client starts with another plugin than its account uses.

use super::{ClientConn, Frontend};
use crate::auth::User;
use crate::config::{AuthPlugin, ListenerConfig};
use crate::error::{code, SessionError};
use crate::stats::Stats;
use crate::stream::Stream;
use sluice_wire::auth as wauth;
use sluice_wire::handshake::{HandshakeResponse, InitialHandshake, SSL_REQUEST_LEN};
use sluice_wire::response::ErrPacket;
use sluice_wire::{CapabilityFlags, ProtocolError, StatusFlags};
use std::sync::Arc;

/// A client that proved who it is.
pub struct LoggedIn {
    pub user: Arc<User>,
    pub charset: u8,
    pub database: Option<Vec<u8>>,
    /// The client's connection attributes, in its order.
    pub attributes: Arc<sluice_wire::handshake::Attributes>,
    /// Sequence id for the packet that answers the login (OK or ERR).
    pub next_seq: u8,
}

/// How an authentication exchange ended.
pub enum AuthOutcome {
    Accepted {
        user: Arc<User>,
        next_seq: u8,
    },
    /// Refused; the error has been prepared but not sent.
    Refused {
        err: ErrPacket,
        next_seq: u8,
    },
}

pub fn access_denied(user: &[u8], client: &ClientConn, used_password: bool) -> ErrPacket {
    ErrPacket::new(
        code::ER_ACCESS_DENIED_ERROR,
        "28000",
        format!(
            "Access denied for user '{}'@'{}' (using password: {})",
            String::from_utf8_lossy(user),
            client.peer.ip(),
            if used_password { "YES" } else { "NO" }
        ),
    )
}

/// Runs the connection phase up to (not including) the final OK.
pub async fn login(
    fe: &Arc<Frontend>,
    client: &mut ClientConn,
    listener: &ListenerConfig,
    tls: Option<&tokio_rustls::TlsAcceptor>,
    connection_id: u32,
) -> Result<Option<LoggedIn>, SessionError> {
    let identity = fe.identity.load_full();
    let (advertised, advertised_mariadb) = fe.advertised_caps(listener);
    let nonce = wauth::new_scramble();
    let hello = InitialHandshake {
        server_version: identity.version.as_bytes().to_vec(),
        connection_id,
        scramble: nonce.to_vec(),
        capabilities: advertised,
        charset: identity.charset,
        status: StatusFlags(StatusFlags::AUTOCOMMIT),
        auth_plugin: listener.default_auth_plugin.name().as_bytes().to_vec(),
        mariadb_caps: advertised_mariadb,
    };
    client.write_packet(0, &hello.payload()).await?;

    let limit = fe.limits.max_decoded_packet;
    let mut packet = client.read_packet(limit).await?;
    if packet.seq != 1 {
        return Err(ProtocolError::Sequence {
            got: packet.seq,
            expected: 1,
        }
        .into());
    }
    let (prefix_caps, _, _, _) = HandshakeResponse::parse_prefix(&packet.payload)?;
    if packet.payload.len() == SSL_REQUEST_LEN && prefix_caps.contains(CapabilityFlags::SSL) {
        let Some(acceptor) = tls else {
            return Err(ProtocolError::Malformed("TLS requested but not offered").into());
        };
        let Some(tcp) = client.stream.take_plain() else {
            return Err(ProtocolError::Malformed("TLS requested twice").into());
        };
        // Clients send their TLS ClientHello right behind the SSL request without waiting,
        // so part of it may already sit in our buffer: hand it to rustls first.
        let early = client.rbuf.split();
        let stream = acceptor
            .accept_with(tcp, |tls| {
                let mut rest = &early[..];
                while !rest.is_empty() {
                    if tls.read_tls(&mut rest).is_err() {
                        break;
                    }
                    // A bad record fails the handshake that follows; nothing to do here.
                    let _ = tls.process_new_packets();
                }
            })
            .await
            .map_err(|e| SessionError::ClientTls(e.to_string()))?;
        client.stream = Stream::Accepted(Box::new(stream));
        packet = client.read_packet(limit).await?;
        if packet.seq != 2 {
            return Err(ProtocolError::Sequence {
                got: packet.seq,
                expected: 2,
            }
            .into());
        }
    }
    let response = HandshakeResponse::parse(&packet.payload)?;
    client.caps = CapabilityFlags(response.capabilities.0 & advertised.0);
    client.mariadb_caps = response.mariadb_caps & advertised_mariadb;
    let mut seq = packet.last_seq.wrapping_add(1);

    if listener.require_tls && !client.stream.is_tls() {
        Stats::incr(&fe.stats.auth_failures);
        let err = ErrPacket::new(
            code::ER_SECURE_TRANSPORT_REQUIRED,
            "HY000",
            "Connections using insecure transport are prohibited: this listener requires TLS",
        );
        client.write_err(seq, &err).await?;
        return Ok(None);
    }

    let client_plugin = response
        .auth_plugin
        .as_deref()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_else(|| wauth::NATIVE_PASSWORD.to_string());
    let outcome = authenticate(
        fe,
        client,
        &response.username,
        &client_plugin,
        response.auth_response.clone(),
        &nonce,
        seq,
        false,
    )
    .await?;
    match outcome {
        AuthOutcome::Accepted { user, next_seq } => {
            seq = next_seq;
            Ok(Some(LoggedIn {
                user,
                charset: response.charset,
                database: response.database.clone(),
                attributes: Arc::new(response.attributes.clone()),
                next_seq: seq,
            }))
        }
        AuthOutcome::Refused { err, next_seq } => {
            Stats::incr(&fe.stats.auth_failures);
            tracing::info!(user = %String::from_utf8_lossy(&response.username), client = %client.peer, "login refused");
            client.write_err(next_seq, &err).await?;
            Ok(None)
        }
    }
}

/// Checks a client's proof for `username`, switching plugins when needed. `data` is
/// what the client sent for `client_plugin` against `nonce`; `seq` is the next id.
/// With `force_switch`, the client is always asked to answer a fresh nonce (its first
/// answer was made against a nonce we no longer have).
#[allow(clippy::too_many_arguments)]
pub async fn authenticate(
    fe: &Arc<Frontend>,
    client: &mut ClientConn,
    username: &[u8],
    client_plugin: &str,
    mut data: Vec<u8>,
    nonce: &[u8],
    mut seq: u8,
    force_switch: bool,
) -> Result<AuthOutcome, SessionError> {
    let limit = fe.limits.max_decoded_packet;
    let user = std::str::from_utf8(username)
        .ok()
        .and_then(|n| fe.users.load().get(n));
    let Some(user) = user else {
        return Ok(AuthOutcome::Refused {
            err: access_denied(username, client, !data.is_empty()),
            next_seq: seq,
        });
    };
    let mut nonce = nonce.to_vec();
    if force_switch
        || client_plugin != user.plugin.name()
        || !client.caps.contains(CapabilityFlags::PLUGIN_AUTH)
    {
        if !client.caps.contains(CapabilityFlags::PLUGIN_AUTH) && user.plugin != AuthPlugin::Native
        {
            return Ok(AuthOutcome::Refused {
                err: access_denied(username, client, !data.is_empty()),
                next_seq: seq,
            });
        }
        if client.caps.contains(CapabilityFlags::PLUGIN_AUTH) {
            nonce = wauth::new_scramble().to_vec();
            client
                .write_packet(seq, &wauth::auth_switch_payload(user.plugin.name(), &nonce))
                .await?;
            let p = client.read_packet(limit).await?;
            check_seq(p.seq, seq.wrapping_add(1))?;
            seq = p.last_seq.wrapping_add(1);
            data = p.payload.to_vec();
        }
    }
    let used_password = !data.is_empty();
    let accepted = match user.plugin {
        AuthPlugin::Native => user.verify_native(&nonce, &data),
        AuthPlugin::CachingSha2 => match user.verify_sha2_fast(&nonce, &data) {
            Some(true) => {
                client
                    .write_packet(seq, &[wauth::AUTH_MORE_DATA, wauth::SHA2_FAST_AUTH_OK])
                    .await?;
                seq = seq.wrapping_add(1);
                true
            }
            Some(false) if !data.is_empty() => false,
            _ => {
                let (ok, next) = sha2_full_auth(fe, client, &user, &nonce, seq).await?;
                seq = next;
                ok
            }
        },
    };
    if accepted {
        Ok(AuthOutcome::Accepted {
            user,
            next_seq: seq,
        })
    } else {
        Ok(AuthOutcome::Refused {
            err: access_denied(username, client, used_password),
            next_seq: seq,
        })
    }
}

fn check_seq(got: u8, expected: u8) -> Result<(), SessionError> {
    if got == expected {
        Ok(())
    } else {
        Err(ProtocolError::Sequence { got, expected }.into())
    }
}

/// The full `caching_sha2_password` path: the client sends its password in clear over
/// TLS, or asks for our public key and sends it RSA-encrypted.
async fn sha2_full_auth(
    fe: &Arc<Frontend>,
    client: &mut ClientConn,
    user: &User,
    nonce: &[u8],
    mut seq: u8,
) -> Result<(bool, u8), SessionError> {
    let limit = fe.limits.max_decoded_packet;
    client
        .write_packet(seq, &[wauth::AUTH_MORE_DATA, wauth::SHA2_PERFORM_FULL_AUTH])
        .await?;
    let p = client.read_packet(limit).await?;
    check_seq(p.seq, seq.wrapping_add(1))?;
    seq = p.last_seq.wrapping_add(1);
    if client.stream.is_tls() {
        let pw = p.payload.strip_suffix(&[0]).unwrap_or(&p.payload);
        return Ok((user.verify_cleartext(pw), seq));
    }
    if p.payload[..] != [wauth::SHA2_REQUEST_PUBLIC_KEY] {
        // A password in clear over plain TCP is refused, as MySQL does.
        return Ok((false, seq));
    }
    let Some(key) = fe.rsa_key().await else {
        return Ok((false, seq));
    };
    let mut msg = vec![wauth::AUTH_MORE_DATA];
    msg.extend_from_slice(key.public_pem().as_bytes());
    client.write_packet(seq, &msg).await?;
    let p = client.read_packet(limit).await?;
    check_seq(p.seq, seq.wrapping_add(1))?;
    seq = p.last_seq.wrapping_add(1);
    let ok = key
        .decrypt_password(&p.payload, nonce)
        .is_some_and(|pw| user.verify_cleartext(&pw));
    Ok((ok, seq))
}
