//! The `[[listeners]]`, `[limits]` and `[protocol]` sections: where clients connect,
//! how many and for how long, and what the greeting offers them. Checked by
//! `validate()` with the rest of the configuration.

use crate::auth::config::AuthPlugin;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Address clients connect to, e.g. "127.0.0.1:6033". Either this or `socket`.
    #[serde(default)]
    pub address: String,
    /// A Unix socket clients on this machine connect to, e.g. "/run/sluice.sock".
    /// Sluice creates it (replacing a stale one nobody listens on) and removes it when
    /// it stops. Either this or `address`.
    pub socket: Option<PathBuf>,
    /// Permissions of the socket file, in octal. Default "0777", as MariaDB's socket:
    /// the login decides who gets in.
    #[serde(default = "default_socket_mode")]
    pub socket_mode: String,
    /// PEM certificate chain; with `tls_key`, clients may upgrade to TLS.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Refuse clients that do not upgrade to TLS. Default false.
    #[serde(default)]
    pub require_tls: bool,
    /// Plugin named in the initial handshake. Default "mysql_native_password".
    #[serde(default)]
    pub default_auth_plugin: AuthPlugin,
    /// PEM RSA private key for `caching_sha2_password` full authentication without TLS.
    /// Default: a key generated at start.
    pub rsa_key: Option<PathBuf>,
    /// Pending connections the kernel queues before Sluice accepts them (`listen(2)`'s
    /// backlog, capped by `net.core.somaxconn`). Default 1024.
    #[serde(default = "default_backlog")]
    pub backlog: u32,
}

fn default_socket_mode() -> String {
    "0777".into()
}

/// Above MariaDB's own `back_log` (autosized to `max_connections`, 151 by default): one
/// Sluice takes the connects a whole fleet of clients would spread over its servers.
fn default_backlog() -> u32 {
    1024
}

impl ListenerConfig {
    /// A listener on `address` (a path starting with `/`: a Unix socket) with every
    /// other setting at its default.
    pub fn at(address: &str) -> ListenerConfig {
        let socket = address.starts_with('/').then(|| PathBuf::from(address));
        ListenerConfig {
            address: if socket.is_some() {
                String::new()
            } else {
                address.into()
            },
            socket,
            socket_mode: default_socket_mode(),
            tls_cert: None,
            tls_key: None,
            require_tls: false,
            default_auth_plugin: AuthPlugin::Native,
            rsa_key: None,
            backlog: default_backlog(),
        }
    }

    /// `socket_mode` as permission bits; `None` if it is not an octal mode.
    pub fn socket_mode_bits(&self) -> Option<u32> {
        u32::from_str_radix(self.socket_mode.trim_start_matches("0o"), 8)
            .ok()
            .filter(|m| *m <= 0o777)
    }

    /// The address or the socket's path, for logs and errors.
    pub fn describe(&self) -> String {
        match &self.socket {
            Some(path) => path.display().to_string(),
            None => self.address.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most client connections at once; more get error 1040. Default 10000.
    #[serde(default = "default_max_clients")]
    pub max_client_connections: u32,
    /// Most client connections of one user at once (0: no limit); a user's own
    /// `max_connections` wins. More get error 1203. Default 0.
    #[serde(default)]
    pub max_user_connections: u32,
    /// Time a client has to complete its login. Default "10s".
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    pub handshake_timeout: Duration,
    /// On SIGTERM/SIGINT, how long running statements may finish. Default "30s".
    #[serde(default = "default_shutdown_grace", with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// Largest packet Sluice itself decodes from a client (handshake, COM_CHANGE_USER).
    /// Forwarded statements are streamed and limited only by the server. Default 16 MiB.
    #[serde(default = "default_max_decoded_packet")]
    pub max_decoded_packet: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_client_connections: default_max_clients(),
            max_user_connections: 0,
            handshake_timeout: default_handshake_timeout(),
            shutdown_grace: default_shutdown_grace(),
            max_decoded_packet: default_max_decoded_packet(),
        }
    }
}

fn default_max_clients() -> u32 {
    10_000
}
fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_shutdown_grace() -> Duration {
    Duration::from_secs(30)
}
fn default_max_decoded_packet() -> usize {
    16 << 20
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolConfig {
    /// Offer LOAD DATA LOCAL INFILE to clients, so that the server's own `local_infile`
    /// decides (the risk, the server asking a client for a file, is the same with a
    /// proxy relaying it). False refuses it for every server. Default true.
    #[serde(default = "default_local_infile")]
    pub local_infile: bool,
    /// Version string announced to clients. Default: the first backend's own version.
    pub server_version: Option<String>,
}

impl Default for ProtocolConfig {
    fn default() -> ProtocolConfig {
        ProtocolConfig {
            local_infile: default_local_infile(),
            server_version: None,
        }
    }
}

fn default_local_infile() -> bool {
    true
}
