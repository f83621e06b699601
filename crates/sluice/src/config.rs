//! Configuration: one serde tree read from TOML, command-line overrides, and a
//! `validate()` that reports every problem at once. Each subsystem gets its own section.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub log: LogConfig,
    #[serde(default)]
    pub listeners: Vec<ListenerConfig>,
    #[serde(default)]
    pub users: Vec<UserConfig>,
    #[serde(default)]
    pub servers: Vec<ServerConfig>,
    #[serde(default)]
    pub pool: PoolConfig,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default)]
    pub protocol: ProtocolConfig,
    #[serde(default)]
    pub cache: crate::cache::CacheConfig,
    #[serde(default)]
    pub admin: AdminConfig,
    #[serde(default)]
    pub routing: crate::router::config::RoutingConfig,
    #[serde(default)]
    pub monitor: crate::router::config::MonitorConfig,
    #[serde(default)]
    pub failover: crate::router::config::FailoverConfig,
    #[serde(default)]
    pub analytics: crate::analytics::AnalyticsConfig,
    #[serde(default)]
    pub accounts: crate::auth::accounts::AccountsConfig,
}

#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (default).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// "text" (default) or "json".
    #[serde(default)]
    pub format: LogFormat,
    /// A tracing filter such as "info" or "sluice=debug". Default "info".
    #[serde(default = "default_log_level")]
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: default_log_level(),
        }
    }
}

fn default_log_level() -> String {
    "info".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Address clients connect to, e.g. "127.0.0.1:6033".
    pub address: String,
    /// PEM certificate chain; with `tls_key`, clients may upgrade to TLS.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Refuse clients that do not upgrade to TLS. Default false.
    #[serde(default)]
    pub require_tls: bool,
    /// Plugin named in the initial handshake. Default "mysql_native_password".
    #[serde(default = "default_plugin")]
    pub default_auth_plugin: AuthPlugin,
    /// PEM RSA private key for `caching_sha2_password` full authentication without TLS.
    /// Default: a key generated at start.
    pub rsa_key: Option<PathBuf>,
    /// Pending connections the kernel queues before Sluice accepts them (`listen(2)`'s
    /// backlog, capped by `net.core.somaxconn`). Default 1024.
    #[serde(default = "default_backlog")]
    pub backlog: u32,
}

/// Above MariaDB's own `back_log` (autosized to `max_connections`, 151 by default): one
/// Sluice takes the connects a whole fleet of clients would spread over its servers.
fn default_backlog() -> u32 {
    1024
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum AuthPlugin {
    #[serde(rename = "mysql_native_password")]
    Native,
    #[serde(rename = "caching_sha2_password")]
    CachingSha2,
    /// MariaDB's `ed25519` (`client_ed25519` in the protocol).
    #[serde(rename = "client_ed25519", alias = "ed25519")]
    Ed25519,
}

impl AuthPlugin {
    pub fn name(self) -> &'static str {
        match self {
            AuthPlugin::Native => sluice_wire::auth::NATIVE_PASSWORD,
            AuthPlugin::CachingSha2 => sluice_wire::auth::CACHING_SHA2_PASSWORD,
            AuthPlugin::Ed25519 => sluice_wire::auth::CLIENT_ED25519,
        }
    }
}

fn default_plugin() -> AuthPlugin {
    AuthPlugin::Native
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    /// Plain password. Either this or `password_hash`.
    pub password: Option<Secret>,
    /// Stored form, as in `mysql.user`: "*" and 40 hex digits (`mysql_native_password`),
    /// or the base64 public key for `client_ed25519`.
    pub password_hash: Option<String>,
    /// Plugin this user authenticates with. Default "mysql_native_password".
    #[serde(default = "default_plugin")]
    pub auth_plugin: AuthPlugin,
    /// Account Sluice logs in as on the backends. Default: `name`.
    pub backend_user: Option<String>,
    /// Password for `backend_user`. Default: `password`.
    pub backend_password: Option<Secret>,
    /// Most client connections of this user at once; more get error 1203. Default:
    /// `limits.max_user_connections`.
    pub max_connections: Option<u32>,
}

impl std::fmt::Debug for UserConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserConfig")
            .field("name", &self.name)
            .field("auth_plugin", &self.auth_plugin)
            .field("backend_user", &self.backend_user)
            .finish_non_exhaustive()
    }
}

/// A password: never printed, never logged.
#[derive(Clone, Deserialize, PartialEq, Eq, Hash)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

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
pub struct ServerConfig {
    /// Name used in logs and errors. Default: the address.
    pub name: Option<String>,
    /// "host:port" of a MySQL or MariaDB server.
    pub address: String,
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
    pub role: crate::router::config::RoleConfig,
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
    /// A server at `address` with every other setting at its default.
    pub fn at(address: &str) -> ServerConfig {
        ServerConfig {
            name: None,
            address: address.into(),
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
        self.name.clone().unwrap_or_else(|| self.address.clone())
    }
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
    /// Backend prepared statements kept per connection for multiplexed sessions; the
    /// least recently used is closed past it. Default 256.
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

/// Settings given on the command line, which win over the file's.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Vec<String>,
    pub backends: Vec<String>,
    /// "name:password" pairs.
    pub users: Vec<String>,
    pub log_format: Option<LogFormat>,
    pub log_level: Option<String>,
}

impl Config {
    /// Reads and parses a TOML file (no validation).
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Config> {
        Ok(toml::from_str(text)?)
    }

    /// Applies command-line settings: each kind given replaces the file's list.
    pub fn apply(&mut self, o: &Overrides) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if !o.listen.is_empty() {
            let template = self.listeners.first().cloned();
            self.listeners = o
                .listen
                .iter()
                .map(|a| ListenerConfig {
                    address: a.clone(),
                    ..template.clone().unwrap_or_else(|| ListenerConfig {
                        address: String::new(),
                        tls_cert: None,
                        tls_key: None,
                        require_tls: false,
                        default_auth_plugin: AuthPlugin::Native,
                        rsa_key: None,
                        backlog: default_backlog(),
                    })
                })
                .collect();
        }
        if !o.backends.is_empty() {
            self.servers = o.backends.iter().map(|a| ServerConfig::at(a)).collect();
        }
        if !o.users.is_empty() {
            self.users.clear();
            for u in &o.users {
                match u.split_once(':') {
                    Some((name, pw)) if !name.is_empty() => self.users.push(UserConfig {
                        name: name.into(),
                        password: Some(Secret(pw.into())),
                        password_hash: None,
                        auth_plugin: AuthPlugin::Native,
                        backend_user: None,
                        backend_password: None,
                        max_connections: None,
                    }),
                    _ => problems.push(format!(
                        "--user must be NAME:PASSWORD, got {:?}",
                        u.split(':').next().unwrap_or_default()
                    )),
                }
            }
        }
        if let Some(f) = o.log_format {
            self.log.format = f;
        }
        if let Some(l) = &o.log_level {
            self.log.level = l.clone();
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Every problem in the configuration, each naming where it is.
    pub fn validate(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.listeners.is_empty() {
            p.push("no [[listeners]]: give at least one address to accept clients on".into());
        }
        for (i, l) in self.listeners.iter().enumerate() {
            let at = format!("listeners[{i}]");
            if l.address.parse::<SocketAddr>().is_err() {
                p.push(format!(
                    "{at}.address: {:?} is not an IP:port address",
                    l.address
                ));
            }
            match (&l.tls_cert, &l.tls_key) {
                (Some(c), Some(k)) => {
                    for f in [c, k] {
                        if !f.is_file() {
                            p.push(format!("{at}: TLS file {} does not exist", f.display()));
                        }
                    }
                }
                (None, None) => {
                    if l.require_tls {
                        p.push(format!("{at}.require_tls needs tls_cert and tls_key"));
                    }
                }
                _ => p.push(format!("{at}: tls_cert and tls_key go together")),
            }
            if l.default_auth_plugin == AuthPlugin::Ed25519 {
                // Its 32-byte nonce does not fit the greeting; ed25519 users are switched to.
                p.push(format!(
                    "{at}.default_auth_plugin: client_ed25519 cannot be the greeting's plugin"
                ));
            }
            if l.backlog == 0 {
                p.push(format!("{at}.backlog must be at least 1"));
            }
            if let Some(k) = &l.rsa_key {
                if !k.is_file() {
                    p.push(format!("{at}.rsa_key: {} does not exist", k.display()));
                }
            }
        }
        p.extend(self.accounts.validate(
            !self.users.is_empty(),
            self.monitor.user.is_some() && self.monitor.password.is_some(),
        ));
        let mut names = std::collections::HashSet::new();
        for (i, u) in self.users.iter().enumerate() {
            let at = format!("users[{i}] ({:?})", u.name);
            if u.name.is_empty() {
                p.push(format!("users[{i}].name is empty"));
            }
            if !names.insert(u.name.as_str()) {
                p.push(format!("{at}: user defined twice"));
            }
            match (&u.password, &u.password_hash) {
                (None, None) => p.push(format!("{at}: needs password or password_hash")),
                (Some(_), Some(_)) => {
                    p.push(format!("{at}: give password or password_hash, not both"))
                }
                (None, Some(h)) => {
                    let (valid, expected) = if u.auth_plugin == AuthPlugin::Ed25519 {
                        (
                            crate::auth::parse_ed25519_key(h).is_some(),
                            "a base64 ed25519 public key (ED25519_PASSWORD())",
                        )
                    } else {
                        (
                            crate::auth::parse_native_hash(h).is_some(),
                            "\"*\" and 40 hex digits (mysql_native_password)",
                        )
                    };
                    if !valid {
                        p.push(format!("{at}.password_hash: expected {expected}"));
                    }
                    if u.backend_password.is_none() {
                        p.push(format!(
                            "{at}: with password_hash, backend_password is needed to log in to the servers"
                        ));
                    }
                }
                (Some(_), None) => {}
            }
        }
        if self.servers.is_empty() {
            p.push("no [[servers]]: give at least one backend address".into());
        }
        let mut server_names = std::collections::HashSet::new();
        let mut addresses = std::collections::HashSet::new();
        let mut writers = 0;
        for (i, s) in self.servers.iter().enumerate() {
            let at = format!("servers[{i}] ({})", s.display_name());
            if !server_names.insert(s.display_name()) {
                p.push(format!("{at}: another server has the same name"));
            }
            if !addresses.insert(s.address.to_ascii_lowercase()) {
                p.push(format!(
                    "{at}: another server has the same address {}",
                    s.address
                ));
            }
            if s.weight == 0 {
                p.push(format!("{at}.weight must be at least 1"));
            }
            if s.role == crate::router::config::RoleConfig::Writer {
                writers += 1;
            }
            if !valid_host_port(&s.address) {
                p.push(format!("{at}.address: {:?} is not host:port", s.address));
            }
            if s.max_connections == Some(0) {
                p.push(format!("{at}.max_connections must be at least 1"));
            }
            if let Some(ca) = &s.tls_ca {
                if !ca.is_file() {
                    p.push(format!("{at}.tls_ca: {} does not exist", ca.display()));
                }
            }
            if s.tls_verify == Some(true) && s.tls_ca.is_none() {
                p.push(format!("{at}: tls_verify needs tls_ca"));
            }
        }
        if writers > 1 {
            p.push(format!(
                "{writers} servers have role = \"writer\": at most one may (use \"auto\" to let the monitor choose)"
            ));
        }
        if self.servers.len() > 1
            && !self
                .servers
                .iter()
                .any(|s| s.role != crate::router::config::RoleConfig::Reader)
        {
            p.push("every server has role = \"reader\": no server could take writes".into());
        }
        let groups: Vec<String> = self
            .servers
            .iter()
            .flat_map(|s| s.groups.iter().cloned())
            .collect();
        p.extend(self.routing.validate(&groups));
        p.extend(self.monitor.validate());
        p.extend(self.failover.validate());
        if self.pool.max_connections == 0 {
            p.push("pool.max_connections must be at least 1".into());
        }
        if self.pool.min_idle > self.pool.max_connections {
            p.push("pool.min_idle is larger than pool.max_connections".into());
        }
        if self.limits.max_client_connections == 0 {
            p.push("limits.max_client_connections must be at least 1".into());
        }
        p.extend(self.cache.validate());
        self.analytics.validate(&mut p);
        if let Some(b) = &self.cache.binlog {
            let names: Vec<String> = self.servers.iter().map(|s| s.display_name()).collect();
            p.extend(b.validate(&names).into_iter().map(|e| format!("cache.{e}")));
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            p.push(format!(
                "log.level: {:?} is not a valid filter",
                self.log.level
            ));
        }
        let admin = &self.admin;
        match admin.address.parse::<SocketAddr>() {
            Err(_) => p.push(format!(
                "admin.address: {:?} is not an IP:port address",
                admin.address
            )),
            Ok(a) if !a.ip().is_loopback() && !admin.allow_remote => p.push(format!(
                "admin.address: {a} is not a loopback address; the admin API is plain HTTP, \
                 set admin.allow_remote = true to serve it to other hosts anyway"
            )),
            Ok(_) => {}
        }
        if let Err(e) = admin.configured_token() {
            p.push(e);
        }
        p
    }
}

fn valid_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

/// Environment variable holding the admin token when the file gives none.
pub const ADMIN_TOKEN_ENV: &str = "SLUICE_ADMIN_TOKEN";

/// The admin HTTP API. Off unless a token is configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Address the admin API listens on. Default "127.0.0.1:6080".
    #[serde(default = "default_admin_address")]
    pub address: String,
    /// Bearer token clients must present. Either this or `token_file`; without both, the
    /// `SLUICE_ADMIN_TOKEN` environment variable; without any, the admin API is off.
    pub token: Option<Secret>,
    /// File holding the token (surrounding whitespace ignored).
    pub token_file: Option<PathBuf>,
    /// Allow a non-loopback `address`. Default false: the API is plain HTTP.
    #[serde(default)]
    pub allow_remote: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            address: default_admin_address(),
            token: None,
            token_file: None,
            allow_remote: false,
        }
    }
}

fn default_admin_address() -> String {
    "127.0.0.1:6080".into()
}

impl AdminConfig {
    /// The token to serve with: `token`, else `token_file`'s content, else the
    /// `SLUICE_ADMIN_TOKEN` environment variable (an empty one counts as unset).
    /// `None`: the admin API stays off.
    pub fn resolved_token(&self) -> Result<Option<Secret>, String> {
        if let Some(token) = self.configured_token()? {
            return Ok(Some(token));
        }
        match std::env::var(ADMIN_TOKEN_ENV) {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => check_admin_token(v.trim(), ADMIN_TOKEN_ENV).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(format!("{ADMIN_TOKEN_ENV} is not valid UTF-8"))
            }
        }
    }

    /// The token the file gives (`token` or `token_file`), ignoring the environment.
    pub fn configured_token(&self) -> Result<Option<Secret>, String> {
        match (&self.token, &self.token_file) {
            (Some(_), Some(_)) => Err("admin: give token or token_file, not both".into()),
            (Some(t), None) => check_admin_token(&t.0, "admin.token").map(Some),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!("admin.token_file: cannot read {}: {e}", path.display())
                })?;
                check_admin_token(text.trim(), "admin.token_file").map(Some)
            }
            (None, None) => Ok(None),
        }
    }
}

/// Tokens travel in an HTTP header, so only visible ASCII survives the trip intact.
fn check_admin_token(token: &str, what: &str) -> Result<Secret, String> {
    if token.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{what} may only contain visible ASCII characters (no spaces)"
        ));
    }
    Ok(Secret(token.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_example_parses_and_validates() {
        let c = Config::parse(
            r#"
            [log]
            format = "json"
            [[listeners]]
            address = "127.0.0.1:6033"
            [[users]]
            name = "app"
            password = "secret"
            auth_plugin = "caching_sha2_password"
            [[servers]]
            name = "db1"
            address = "127.0.0.1:3306"
            tls = "preferred"
            [pool]
            idle_timeout = "90s"
            [limits]
            shutdown_grace = "2s"
            "#,
        )
        .unwrap();
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(c.pool.idle_timeout, Duration::from_secs(90));
        assert_eq!(c.users[0].auth_plugin, AuthPlugin::CachingSha2);
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(Config::parse("[pool]\nmax_conections = 3\n").is_err());
    }

    #[test]
    fn every_problem_is_reported() {
        let c = Config::parse(
            r#"
            [[listeners]]
            address = "nowhere"
            [[users]]
            name = "a"
            [[users]]
            name = "b"
            password_hash = "abc"
            [[servers]]
            address = "db"
            "#,
        )
        .unwrap();
        let p = c.validate();
        assert!(p.len() >= 5, "{p:#?}");
        assert!(p.iter().any(|x| x.contains("listeners[0].address")));
        assert!(p.iter().any(|x| x.contains("needs password")));
        assert!(p.iter().any(|x| x.contains("password_hash")));
        assert!(p.iter().any(|x| x.contains("servers[0]")));
    }

    #[test]
    fn overrides_replace_lists() {
        let mut c = Config::default();
        c.apply(&Overrides {
            listen: vec!["127.0.0.1:1".into()],
            backends: vec!["127.0.0.1:2".into()],
            users: vec!["app:se:cret".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(c.users[0].password, Some(Secret("se:cret".into())));
        assert!(c
            .apply(&Overrides {
                users: vec!["nopassword".into()],
                ..Default::default()
            })
            .is_err());
    }
}
