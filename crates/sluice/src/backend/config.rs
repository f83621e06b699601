//! The `[pool]` section and how Sluice reaches a server (TLS mode): the backend's part
//! of the configuration. Checked by `validate()` with the rest of the configuration.

use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plain TCP to the server (default).
    #[default]
    Disabled,
    /// TLS when the server offers it.
    Preferred,
    /// TLS or no connection.
    Required,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Most backend connections per server. Default 100.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// Idle connections kept open per server and user. Default 0.
    #[serde(default)]
    pub min_idle: u32,
    /// Idle connections older than this are closed. Default "10m".
    #[serde(default = "default_idle_timeout", with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Limit for TCP connect plus backend handshake. Default "5s".
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// How long a statement waits in the queue for a backend connection when every one
    /// is busy; past it the client gets error 9001. Default "10s".
    #[serde(
        default = "default_acquire_timeout",
        with = "humantime_serde",
        alias = "acquire_timeout"
    )]
    pub queue_timeout: Duration,
    /// Most statements waiting for a connection of one server; more are refused at once
    /// (error 9001). Default 10000.
    #[serde(default = "default_max_queue")]
    pub max_queue: u32,
    /// Multiplexing: a client holds a backend connection only during a statement, a
    /// transaction, or while it holds state that can't move; otherwise its statements
    /// may run on any connection, brought in line with its session state. Default true.
    #[serde(default = "default_true")]
    pub multiplex: bool,
    /// Without multiplexing, log in to the server with the client's connection
    /// attributes (and `proxy=sluice`), so that the server shows the client's program;
    /// such a connection is reused only by a client with the same attributes. Default
    /// true.
    #[serde(default = "default_true")]
    pub forward_attributes: bool,
    /// Backend prepared statements a connection keeps for multiplexed sessions at
    /// least; the least recently used is closed past it, or past the connection's
    /// share of the server's statement budget when that is larger. Default 256.
    #[serde(default = "default_prepared_per_connection")]
    pub max_prepared_per_connection: u32,
    /// Prepared statements Sluice keeps open on one server, across all its connections
    /// there; a prepare past it gets error 1461 unless statements no client uses can be
    /// closed. Default: half the server's `max_prepared_stmt_count`, as read from it.
    #[serde(default)]
    pub max_prepared_statements: Option<u32>,
    /// After a write through a multiplexed session, how long its connection is kept
    /// while the client is idle, so that `LAST_INSERT_ID()` and `ROW_COUNT()` in its next
    /// statement read the server's own values; not while others wait. Default "20ms".
    #[serde(default = "default_write_hold", with = "humantime_serde")]
    pub write_hold: Duration,
    /// How often idle connections are checked. Default "5s".
    #[serde(default = "default_check_interval", with = "humantime_serde")]
    pub check_interval: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_connections: default_max_connections(),
            min_idle: 0,
            idle_timeout: default_idle_timeout(),
            connect_timeout: default_connect_timeout(),
            queue_timeout: default_acquire_timeout(),
            max_queue: default_max_queue(),
            multiplex: true,
            forward_attributes: true,
            max_prepared_per_connection: default_prepared_per_connection(),
            max_prepared_statements: None,
            write_hold: default_write_hold(),
            check_interval: default_check_interval(),
        }
    }
}

fn default_max_connections() -> u32 {
    100
}
fn default_idle_timeout() -> Duration {
    Duration::from_secs(600)
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_acquire_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_max_queue() -> u32 {
    10_000
}
fn default_true() -> bool {
    true
}
fn default_prepared_per_connection() -> u32 {
    256
}
fn default_write_hold() -> Duration {
    Duration::from_millis(20)
}
fn default_check_interval() -> Duration {
    Duration::from_secs(5)
}
