//! The connection phase towards a client: handshake, optional TLS upgrade, and the
//! authentication exchange for `mysql_native_password`, `caching_sha2_password` (fast
//! path, full path over TLS, and RSA key exchange) and `client_ed25519`, with auth switch
//! when the client starts with another plugin than its account uses.

use super::config::ListenerConfig;
use super::{ClientConn, Frontend};
use crate::auth::accounts::source_server;
use crate::auth::{Exchange, Origin, Proof, User};
use crate::error::{code, SessionError};
use crate::secret::Secret;
use crate::stats::Stats;
use crate::stream::{Peer, Stream};
use sluice_wire::auth as wauth;
use sluice_wire::handshake::{HandshakeResponse, InitialHandshake, SSL_REQUEST_LEN};
use sluice_wire::packet::Packet;
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
            client.peer.host(),
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
    let nonce = wauth::new_scramble();
    let hello = greeting(fe, listener, connection_id, &nonce);
    client.write_packet(0, &hello.payload()).await?;
    let packet = handshake_response(client, tls, fe.limits.max_decoded_packet).await?;
    let response = HandshakeResponse::parse(&packet.payload)?;
    client.caps = CapabilityFlags(response.capabilities.0 & hello.capabilities.0);
    client.mariadb_caps = response.mariadb_caps & hello.mariadb_caps;
    let seq = packet.last_seq.wrapping_add(1);

    if listener.require_tls && !client.secure() {
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
        AuthOutcome::Accepted { user, next_seq } => Ok(Some(LoggedIn {
            user,
            charset: response.charset,
            database: response.database.clone(),
            attributes: fe.attribute_sets.share(&response.attributes),
            next_seq,
        })),
        AuthOutcome::Refused { err, next_seq } => {
            Stats::incr(&fe.stats.auth_failures);
            tracing::info!(user = %String::from_utf8_lossy(&response.username), "login refused");
            client.write_err(next_seq, &err).await?;
            Ok(None)
        }
    }
}

/// The greeting: the version and capabilities the servers have, as this listener
/// offers them, with `nonce` to scramble the password with.
fn greeting(
    fe: &Frontend,
    listener: &ListenerConfig,
    connection_id: u32,
    nonce: &[u8],
) -> InitialHandshake {
    let identity = fe.identity.load_full();
    let (advertised, advertised_mariadb) = fe.advertised_caps(listener);
    InitialHandshake {
        server_version: identity.version.as_bytes().to_vec(),
        connection_id,
        scramble: nonce.to_vec(),
        capabilities: advertised,
        charset: identity.charset,
        status: StatusFlags(StatusFlags::AUTOCOMMIT),
        auth_plugin: listener.default_auth_plugin.name().as_bytes().to_vec(),
        mariadb_caps: advertised_mariadb,
    }
}

/// The client's handshake response, read over TLS when the client asks for it first.
async fn handshake_response(
    client: &mut ClientConn,
    tls: Option<&tokio_rustls::TlsAcceptor>,
    limit: usize,
) -> Result<Packet, SessionError> {
    let packet = client.read_packet(limit).await?;
    check_seq(packet.seq, 1)?;
    let (prefix_caps, _, _, _) = HandshakeResponse::parse_prefix(&packet.payload)?;
    if packet.payload.len() != SSL_REQUEST_LEN || !prefix_caps.contains(CapabilityFlags::SSL) {
        return Ok(packet);
    }
    accept_tls(client, tls).await?;
    let packet = client.read_packet(limit).await?;
    check_seq(packet.seq, 2)?;
    Ok(packet)
}

/// Turns the client's connection into TLS, after its SSL request.
async fn accept_tls(
    client: &mut ClientConn,
    tls: Option<&tokio_rustls::TlsAcceptor>,
) -> Result<(), SessionError> {
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
    Ok(())
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
    let refused = |client: &ClientConn, data: &[u8], seq| {
        Ok(AuthOutcome::Refused {
            err: access_denied(username, client, !data.is_empty()),
            next_seq: seq,
        })
    };
    let user = match std::str::from_utf8(username) {
        Ok(name) => find_user(fe, name, &client.peer).await,
        Err(_) => None,
    };
    let Some(mut user) = user else {
        return refused(client, &data, seq);
    };
    let Some(exchange) = user.exchange(client.secure()) else {
        tracing::warn!(user = %user.name, host = %user.host,
            "an ed25519 account can log in through Sluice only over TLS or the Unix socket: Sluice needs its password to log in to the server");
        return refused(client, &data, seq);
    };
    let plugin = match exchange {
        Exchange::Cleartext => wauth::CLEAR_PASSWORD,
        _ => user.plugin.name(),
    };
    let mut nonce = nonce.to_vec();
    let plugin_auth = client.caps.contains(CapabilityFlags::PLUGIN_AUTH);
    // The greeting's 20-byte nonce is not what ed25519 signs, nor is a password sent
    // unasked: those two always switch.
    if force_switch
        || client_plugin != plugin
        || !plugin_auth
        || matches!(exchange, Exchange::Ed25519 | Exchange::Cleartext)
    {
        if !plugin_auth && exchange != Exchange::Native {
            return refused(client, &data, seq);
        }
        if plugin_auth {
            nonce = match exchange {
                Exchange::Ed25519 => wauth::new_ed25519_nonce().to_vec(),
                Exchange::Cleartext => Vec::new(),
                _ => wauth::new_scramble().to_vec(),
            };
            client
                .write_packet(seq, &wauth::auth_switch_payload(plugin, &nonce))
                .await?;
            let p = client.read_packet(limit).await?;
            check_seq(p.seq, seq.wrapping_add(1))?;
            seq = p.last_seq.wrapping_add(1);
            data = p.payload.to_vec();
        }
    }
    let proof = if exchange == Exchange::CachingSha2 {
        let (ok, next) = sha2_exchange(fe, client, &user, &nonce, &data, seq).await?;
        seq = next;
        ok.then_some(Proof::Configured)
    } else {
        let mut proof = check(&user, exchange, &nonce, &data);
        if proof.is_none() && user.origin == Origin::Server {
            // The password may have changed on the server since the last read.
            fe.accounts
                .reload_for_login(source_server(&fe.router.load()))
                .await;
            if let Some(newer) = fe.accounts.find(&user.name, &client.peer) {
                if !newer.same_secret(&user) && newer.exchange(client.secure()) == Some(exchange) {
                    proof = check(&newer, exchange, &nonce, &data);
                    user = newer;
                }
            }
        }
        proof
    };
    match proof {
        Some(proof) => Ok(AuthOutcome::Accepted {
            user: user.logged_in(proof),
            next_seq: seq,
        }),
        None => refused(client, &data, seq),
    }
}

/// The account `name` logs in as from `ip`: `[[users]]` first, then the servers'
/// accounts, read again (rate-limited) before an unknown name is refused.
pub(super) async fn find_user(fe: &Arc<Frontend>, name: &str, client: &Peer) -> Option<Arc<User>> {
    if let Some(u) = fe.users.load().get(name) {
        return Some(u);
    }
    if !fe.accounts.enabled() {
        return None;
    }
    if let Some(u) = fe.accounts.find(name, client) {
        return Some(u);
    }
    fe.accounts
        .reload_for_login(source_server(&fe.router.load()))
        .await;
    fe.accounts.find(name, client)
}

/// Checks a proof that needs no further exchange with the client.
fn check(user: &User, exchange: Exchange, nonce: &[u8], data: &[u8]) -> Option<Proof> {
    match exchange {
        Exchange::Native => user.verify_native(nonce, data),
        Exchange::Ed25519 => user
            .verify_ed25519(nonce, data)
            .then_some(Proof::Configured),
        Exchange::Cleartext => {
            let pw = data.strip_suffix(&[0]).unwrap_or(data);
            // A password that is not UTF-8 cannot be carried to the server: refused.
            let pw = String::from_utf8(pw.to_vec()).ok()?;
            let ok = user.verify_cleartext(pw.as_bytes());
            ok.then_some(Proof::Password(Secret(pw)))
        }
        Exchange::CachingSha2 => None,
    }
}

/// `caching_sha2_password`: the fast path against the cached hash, else the full path.
async fn sha2_exchange(
    fe: &Arc<Frontend>,
    client: &mut ClientConn,
    user: &User,
    nonce: &[u8],
    data: &[u8],
    seq: u8,
) -> Result<(bool, u8), SessionError> {
    match user.verify_sha2_fast(nonce, data) {
        Some(true) => {
            client
                .write_packet(seq, &[wauth::AUTH_MORE_DATA, wauth::SHA2_FAST_AUTH_OK])
                .await?;
            Ok((true, seq.wrapping_add(1)))
        }
        Some(false) if !data.is_empty() => Ok((false, seq)),
        _ => sha2_full_auth(fe, client, user, nonce, seq).await,
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
/// TLS or the Unix socket (secure transports, as MySQL counts them), or asks for our
/// public key and sends it RSA-encrypted.
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
    if client.secure() {
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
