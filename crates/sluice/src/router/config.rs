//! The `[[servers]]`, `[routing]`, `[monitor]` and `[failover]` sections: the servers
//! and their roles, how statements are sent to the writer or the readers, how servers
//! are watched, and what happens when the writer fails. Checked by `validate()` with the rest of the configuration.

use crate::backend::config::TlsMode;
use crate::secret::Secret;
use crate::stream::Endpoint;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// What a server is for, as configured. The monitor decides `Auto` servers by their
/// `read_only` flag (and, for Galera nodes, by their sync state).
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RoleConfig {
    /// Writer when `read_only` is off, reader when on (default).
    #[default]
    Auto,
    /// Always the writer (never promoted away from, never demoted).
    Writer,
    /// Only ever a reader, and never promoted by failover.
    Reader,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Name used in logs and errors. Default: the address (or the socket's path).
    pub name: Option<String>,
    /// "host:port" of a MySQL or MariaDB server. Either this or `socket`.
    #[serde(default)]
    pub address: String,
    /// The server's Unix socket, e.g. "/run/mysqld/mysqld.sock", for a server on the
    /// same machine: every connection Sluice opens to it goes there (no TLS). Either
    /// this or `address`.
    pub socket: Option<PathBuf>,
    /// Most backend connections to this server. Default: `pool.max_connections`.
    pub max_connections: Option<u32>,
    #[serde(default)]
    pub tls: TlsMode,
    /// PEM CA bundle to verify the server's certificate.
    pub tls_ca: Option<PathBuf>,
    /// Verify the server certificate (needs `tls_ca`). Default: true when `tls_ca` is set.
    pub tls_verify: Option<bool>,
    /// "auto" (default: writer when `read_only` is off), "writer" or "reader".
    #[serde(default)]
    pub role: RoleConfig,
    /// Share of reads among readers of equal latency. Default 1.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Zone (rack, availability zone) the server is in; see `routing.zone`.
    pub zone: Option<String>,
    /// Replication lag past which it gets no reads. Default `routing.max_lag`.
    #[serde(default, with = "humantime_serde::option")]
    pub max_lag: Option<Duration>,
    /// Named groups routing rules can send statements to.
    #[serde(default)]
    pub groups: Vec<String>,
}

fn default_weight() -> u32 {
    1
}

impl ServerConfig {
    /// A server at `address` (a path starting with `/`: its Unix socket) with every
    /// other setting at its default.
    pub fn at(address: &str) -> ServerConfig {
        let socket = address.starts_with('/').then(|| PathBuf::from(address));
        ServerConfig {
            name: None,
            address: if socket.is_some() {
                String::new()
            } else {
                address.into()
            },
            socket,
            max_connections: None,
            tls: TlsMode::Disabled,
            tls_ca: None,
            tls_verify: None,
            role: Default::default(),
            weight: default_weight(),
            zone: None,
            max_lag: None,
            groups: Vec::new(),
        }
    }
}

impl ServerConfig {
    pub fn display_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.endpoint().to_string())
    }

    /// Where connections to the server go: its socket when one is given.
    pub fn endpoint(&self) -> Endpoint {
        match &self.socket {
            Some(path) => Endpoint::Unix(path.clone()),
            None => Endpoint::Tcp(self.address.clone()),
        }
    }

    /// What the backend needs to reach the server.
    pub fn backend_spec(&self) -> crate::backend::ServerSpec<'_> {
        crate::backend::ServerSpec {
            name: self.display_name(),
            endpoint: self.endpoint(),
            tls: self.tls,
            tls_ca: self.tls_ca.as_deref(),
            tls_verify: self.tls_verify,
            max_connections: self.max_connections,
        }
    }
}

/// How strongly a read must see writes made before it.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    /// Any in-lag reader: a session may not see its own latest write.
    None,
    /// A session's reads see its own writes (default).
    #[default]
    Session,
    /// Reads see every write made through this Sluice before they started.
    Global,
}

/// Which nodes of a Galera cluster take writes.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GaleraWriters {
    /// One synced node at a time takes every write (default); it moves when that node
    /// leaves the synced state.
    #[default]
    One,
    /// Every synced node: each transaction (and each autocommit write) goes to one
    /// chosen by load and latency, away from nodes sending flow control.
    All,
}

/// Whether the writer also serves reads.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WriterReads {
    /// Only when no reader can take the read (default).
    #[default]
    Fallback,
    /// Always one of the readers, balanced like the others.
    Always,
    /// Never: reads with no reader available wait for one, then fail.
    Never,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    /// Send reads outside transactions to readers. Default true (it changes nothing
    /// with a single server).
    #[serde(default = "default_true")]
    pub read_write_split: bool,
    /// Zone Sluice runs in: readers of the same zone are preferred while one is healthy.
    pub zone: Option<String>,
    /// Default for every rule: "none", "session" (read-your-writes, default) or "global".
    #[serde(default)]
    pub consistency: Consistency,
    /// How long a read may wait on a replica for the GTID it must see before it goes to
    /// the writer instead. "0s": straight to the writer. Default "1s".
    #[serde(default = "default_consistency_wait", with = "humantime_serde")]
    pub consistency_wait: Duration,
    /// Replicas further behind than this (`Seconds_Behind_Master`) get no reads.
    /// A server's own `max_lag` wins. Default "10s".
    #[serde(default = "default_max_lag", with = "humantime_serde")]
    pub max_lag: Duration,
    /// "fallback" (default), "always" or "never".
    #[serde(default)]
    pub writer_reads: WriterReads,
    /// "one" (default) or "all": which Galera nodes take writes.
    #[serde(default)]
    pub galera_writers: GaleraWriters,
    /// Ordered; the first rule that matches a statement decides.
    #[serde(default)]
    pub rules: Vec<RouteRuleConfig>,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            read_write_split: true,
            zone: None,
            consistency: Consistency::default(),
            consistency_wait: default_consistency_wait(),
            max_lag: default_max_lag(),
            writer_reads: WriterReads::default(),
            galera_writers: GaleraWriters::default(),
            rules: Vec::new(),
        }
    }
}

/// One routing rule. A statement matches when every condition given holds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRuleConfig {
    /// Name used in logs and statistics; unique.
    pub name: String,
    /// Regular expression searched in the statement text.
    #[serde(rename = "match")]
    pub pattern: Option<String>,
    /// Regular expression searched in the normalized digest.
    pub digest: Option<String>,
    /// Only statements of this Sluice user.
    pub user: Option<String>,
    /// Only statements run with this default schema.
    pub schema: Option<String>,
    /// Only clients from this address or network ("10.0.0.0/8", "127.0.0.1").
    pub client_address: Option<String>,
    /// Where matching statements go: "writer", "readers", or a group named in some
    /// server's `groups`.
    pub route: Option<String>,
    /// Refuse matching statements with this error instead of running them.
    pub error: Option<RuleError>,
    /// Cancel matching statements that run longer than this (KILL QUERY); the client
    /// gets error 1317.
    #[serde(default, with = "humantime_serde::option")]
    pub timeout: Option<Duration>,
    /// Overrides `routing.consistency` for matching reads.
    pub consistency: Option<Consistency>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleError {
    /// MySQL error code. Default 1148 (ER_NOT_ALLOWED_COMMAND).
    #[serde(default = "default_rule_error_code")]
    pub code: u16,
    /// SQLSTATE, five characters. Default "42000".
    #[serde(default = "default_rule_error_state")]
    pub state: String,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorConfig {
    /// Time between two checks of a server. Default "500ms".
    #[serde(default = "default_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// Limit for one check (connect, ping, status queries). Default "1s".
    #[serde(default = "default_check_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Failed checks in a row before a server is down. Default 3.
    #[serde(default = "default_down_after")]
    pub down_after: u32,
    /// Good checks in a row before a down server is up again. Default 2.
    #[serde(default = "default_up_after")]
    pub up_after: u32,
    /// Account the monitor logs in with (needs REPLICATION CLIENT / SLAVE MONITOR, and
    /// for failover SUPER or READ_ONLY ADMIN and REPLICATION SLAVE ADMIN). Default: the
    /// first user's backend account.
    pub user: Option<String>,
    pub password: Option<Secret>,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            interval: default_interval(),
            timeout: default_check_timeout(),
            down_after: default_down_after(),
            up_after: default_up_after(),
            user: None,
            password: None,
        }
    }
}

/// What a returning old primary becomes.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OldPrimary {
    /// Kept out of routing until an operator acts (default): it may hold transactions
    /// the new primary never got.
    #[default]
    Fence,
    /// Made read-only and pointed at the new primary as a replica.
    Rejoin,
}

/// Whose locks make a change of the writer safe (`failover.quorum`).
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Quorum {
    /// A majority of all the set's servers, the lost writer counted (default): an
    /// instance cut off from most servers never promotes, and a set of three that lost
    /// two waits for one to return.
    #[default]
    MajorityOfAll,
    /// A majority of the servers this instance sees running: failover goes on down to
    /// the last replica, but two instances partitioned from different servers can both
    /// promote. Only for a single instance where no other may run.
    MajorityOfRunning,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailoverConfig {
    /// Promote a replica when the writer is down. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// "fence" (default) or "rejoin".
    #[serde(default)]
    pub old_primary: OldPrimary,
    /// How long new statements for the writer wait for one during a failover or
    /// switchover before they get error 9002. Default "10s".
    #[serde(default = "default_write_wait", with = "humantime_serde")]
    pub write_wait: Duration,
    /// Longest a switchover waits for transactions on the old writer to end, and for
    /// the new one to catch up. Default "5s".
    #[serde(default = "default_switchover_timeout", with = "humantime_serde")]
    pub switchover_timeout: Duration,
    /// Account replicas use to replicate from a promoted server (CHANGE MASTER TO
    /// MASTER_USER). Default: the monitor's account.
    pub replication_user: Option<String>,
    pub replication_password: Option<Secret>,
    /// Run a multiplexed session's transaction again on the new writer when its writer
    /// is lost or switched over, and a statement that may have committed when the new
    /// writer surely lacks it. Default true.
    #[serde(default = "default_true")]
    pub transaction_replay: bool,
    /// Most bytes of statements one transaction keeps for replay; a larger one is not
    /// replayed. A number of bytes or a string such as "1MiB". Default "1MiB".
    #[serde(
        default = "default_replay_max_bytes",
        deserialize_with = "crate::cache::config::bytes_size"
    )]
    pub replay_max_bytes: u64,
    /// Send an autocommit INSERT, UPDATE, DELETE or REPLACE on the writer inside a
    /// BEGIN ... COMMIT of Sluice's, so that when the writer is lost before the COMMIT's
    /// reply and the new writer has the commit, the client gets the write's own OK
    /// rather than error 1158. Costs the server two more commands per such write;
    /// `ROW_COUNT()` right after one is answered by Sluice with the write's count.
    /// Default true.
    #[serde(default = "default_true")]
    pub wrap_autocommit_writes: bool,
    /// "majority_of_all" (default) or "majority_of_running", see [`Quorum`].
    #[serde(default)]
    pub quorum: Quorum,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        FailoverConfig {
            enabled: true,
            old_primary: OldPrimary::default(),
            write_wait: default_write_wait(),
            switchover_timeout: default_switchover_timeout(),
            replication_user: None,
            replication_password: None,
            transaction_replay: true,
            replay_max_bytes: default_replay_max_bytes(),
            wrap_autocommit_writes: true,
            quorum: Quorum::default(),
        }
    }
}

fn default_replay_max_bytes() -> u64 {
    1 << 20
}

fn default_true() -> bool {
    true
}
fn default_consistency_wait() -> Duration {
    Duration::from_secs(1)
}
fn default_max_lag() -> Duration {
    Duration::from_secs(10)
}
fn default_rule_error_code() -> u16 {
    1148
}
fn default_rule_error_state() -> String {
    "42000".into()
}
fn default_interval() -> Duration {
    Duration::from_millis(500)
}
fn default_check_timeout() -> Duration {
    Duration::from_secs(1)
}
fn default_down_after() -> u32 {
    3
}
fn default_up_after() -> u32 {
    2
}
fn default_write_wait() -> Duration {
    Duration::from_secs(10)
}
fn default_switchover_timeout() -> Duration {
    Duration::from_secs(5)
}

impl RoutingConfig {
    /// Every problem in the section; `groups` are the group names servers declare.
    pub fn validate(&self, groups: &[String]) -> Vec<String> {
        let mut p = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (i, r) in self.rules.iter().enumerate() {
            let at = format!("routing.rules[{i}] ({:?})", r.name);
            if r.name.is_empty() {
                p.push(format!("routing.rules[{i}].name is empty"));
            }
            if !names.insert(r.name.as_str()) {
                p.push(format!("{at}: rule name used twice"));
            }
            for (field, re) in [("match", &r.pattern), ("digest", &r.digest)] {
                if let Some(re) = re {
                    if let Err(e) = regex::bytes::Regex::new(re) {
                        p.push(format!("{at}.{field}: {e}"));
                    }
                }
            }
            if let Some(a) = &r.client_address {
                if super::rules::parse_network(a).is_none() {
                    p.push(format!(
                        "{at}.client_address: {a:?} is not an IP address or IP/prefix network"
                    ));
                }
            }
            match (&r.route, &r.error) {
                (Some(_), Some(_)) => p.push(format!("{at}: give route or error, not both")),
                (None, None) if r.timeout.is_none() && r.consistency.is_none() => p.push(format!(
                    "{at}: does nothing (give route, error, timeout or consistency)"
                )),
                _ => {}
            }
            if let Some(route) = &r.route {
                if route != "writer" && route != "readers" && !groups.contains(route) {
                    p.push(format!(
                        "{at}.route: {route:?} is not \"writer\", \"readers\" or a group some server is in"
                    ));
                }
            }
            if let Some(e) = &r.error {
                if e.state.len() != 5 || !e.state.is_ascii() {
                    p.push(format!("{at}.error.state must be five ASCII characters"));
                }
                if e.code == 0 {
                    p.push(format!("{at}.error.code must not be 0"));
                }
            }
            if r.timeout == Some(Duration::ZERO) {
                p.push(format!("{at}.timeout must be more than 0s"));
            }
        }
        p
    }
}

impl MonitorConfig {
    pub fn validate(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.interval < Duration::from_millis(10) {
            p.push("monitor.interval must be at least 10ms".into());
        }
        if self.timeout.is_zero() {
            p.push("monitor.timeout must be more than 0s".into());
        }
        if self.down_after == 0 || self.up_after == 0 {
            p.push("monitor.down_after and monitor.up_after must be at least 1".into());
        }
        if self.user.is_some() != self.password.is_some() {
            p.push("monitor: user and password go together".into());
        }
        p
    }
}

impl FailoverConfig {
    pub fn validate(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.replication_user.is_some() != self.replication_password.is_some() {
            p.push("failover: replication_user and replication_password go together".into());
        }
        p
    }
}
