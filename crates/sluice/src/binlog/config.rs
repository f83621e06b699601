//! `[binlog]`: the section, its defaults and its checks.

use crate::backend::Server;
use crate::secret::Secret;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// `[binlog]`: how Sluice follows the primary's binlog.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BinlogConfig {
    /// Read the primary's binlog to invalidate the cache on writes that bypass Sluice.
    /// Default true. Whether a reader runs at all is the caller's choice (only with a
    /// cache); this section only says how.
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// The `[[servers]]` entry (by name) to read from. Default: the writer, followed
    /// through failovers and switchovers (the first server until one is known).
    pub server: Option<String>,
    /// Account with the REPLICATION SLAVE privilege, and BINLOG MONITOR (MariaDB 10.5+;
    /// REPLICATION CLIENT before) for `SHOW MASTER STATUS`.
    pub user: String,
    pub password: Secret,
    /// Replica server id Sluice registers with. It must differ from the primary's and
    /// every other replica's: a primary drops a replica when another connects with the
    /// same id. Default 4026531841.
    #[serde(default = "default_server_id")]
    pub server_id: u32,
    /// Wait between reconnect attempts. Default "1s".
    #[serde(default = "default_reconnect_interval", with = "humantime_serde")]
    pub reconnect_interval: Duration,
    /// How often the primary sends a heartbeat when it has no events to send. Silence
    /// for twice this plus one second ends the connection. "0s" turns heartbeats (and
    /// so the detection of a silently dead primary) off. Default "1s".
    #[serde(default = "default_heartbeat", with = "humantime_serde")]
    pub heartbeat: Duration,
    /// Limit for connecting, logging in and starting the dump. Default "5s".
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
}

fn default_enabled() -> bool {
    true
}
fn default_server_id() -> u32 {
    4_026_531_841
}
fn default_reconnect_interval() -> Duration {
    Duration::from_secs(1)
}
fn default_heartbeat() -> Duration {
    Duration::from_secs(1)
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

impl BinlogConfig {
    /// A configuration with every default and this account.
    pub fn new(user: impl Into<String>, password: Secret) -> BinlogConfig {
        BinlogConfig {
            enabled: default_enabled(),
            server: None,
            user: user.into(),
            password,
            server_id: default_server_id(),
            reconnect_interval: default_reconnect_interval(),
            heartbeat: default_heartbeat(),
            connect_timeout: default_connect_timeout(),
        }
    }

    /// Every problem in this section, each naming its field, in the style of
    /// `Config::validate`. `servers` are the configured server names.
    pub fn validate(&self, servers: &[String]) -> Vec<String> {
        let mut p = Vec::new();
        if self.user.is_empty() {
            p.push("binlog.user is empty".into());
        }
        if self.server_id == 0 {
            p.push("binlog.server_id must not be 0: the primary would end the dump at once".into());
        }
        if let Some(name) = &self.server {
            if !servers.contains(name) {
                p.push(format!(
                    "binlog.server: no [[servers]] entry is named {name:?}"
                ));
            }
        }
        if self.reconnect_interval.is_zero() {
            p.push("binlog.reconnect_interval must be more than 0".into());
        }
        if self.connect_timeout.is_zero() {
            p.push("binlog.connect_timeout must be more than 0".into());
        }
        // MariaDB's upper bound for MASTER_HEARTBEAT_PERIOD.
        if self.heartbeat > Duration::from_secs(4_294_967) {
            p.push("binlog.heartbeat is longer than a primary accepts (4294967s)".into());
        }
        p
    }

    /// The server to read from: the one named by `server`, or the first.
    pub fn pick_server(&self, servers: &[Arc<Server>]) -> Option<Arc<Server>> {
        match &self.server {
            Some(name) => servers.iter().find(|s| &s.name == name).cloned(),
            None => servers.first().cloned(),
        }
    }

    /// How long the stream may stay silent before the primary is taken for dead.
    pub(super) fn silence_limit(&self) -> Option<Duration> {
        (!self.heartbeat.is_zero()).then(|| self.heartbeat * 2 + Duration::from_secs(1))
    }
}
