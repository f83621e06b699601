//! Configuration: one serde tree read from TOML, command-line overrides, and a
//! `validate()` that reports every problem at once. Each subsystem owns its section's
//! type (`router::config`, `cache::config`, ...); this module only composes them, so it
//! sits above every subsystem and none of them imports it.

use crate::shard::config::{ShardConfig, ShardingConfig};
use crate::shard::ShardMap;
use serde::Deserialize;

pub use crate::admin::config::{AdminConfig, ADMIN_TOKEN_ENV};
pub use crate::analytics::AnalyticsConfig;
pub use crate::auth::accounts::AccountsConfig;
pub use crate::auth::config::{AuthPlugin, UserConfig};
pub use crate::backend::config::{PoolConfig, TlsMode};
pub use crate::cache::CacheConfig;
pub use crate::frontend::config::{LimitsConfig, ListenerConfig, ProtocolConfig};
pub use crate::router::config::{FailoverConfig, MonitorConfig, RoutingConfig, ServerConfig};
pub use crate::secret::Secret;
use std::path::Path;

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
    pub cache: CacheConfig,
    #[serde(default)]
    pub admin: AdminConfig,
    #[serde(default)]
    pub routing: RoutingConfig,
    #[serde(default)]
    pub monitor: MonitorConfig,
    #[serde(default)]
    pub failover: FailoverConfig,
    #[serde(default)]
    pub analytics: AnalyticsConfig,
    #[serde(default)]
    pub accounts: AccountsConfig,
    /// Server groups one logical database is spread over (docs/CONFIGURATION.md).
    #[serde(default)]
    pub shards: Vec<ShardConfig>,
    #[serde(default)]
    pub sharding: ShardingConfig,
    #[serde(default)]
    pub fleet: crate::fleet::FleetConfig,
    /// Where this process offers its listeners to the next one (`server/handover.rs`).
    #[serde(default)]
    pub handover: crate::server::handover::HandoverConfig,
    /// OpenTelemetry traces of statements (`trace.rs`); off unless an endpoint is set.
    #[serde(default)]
    pub tracing: crate::trace::TracingConfig,
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
    /// Statements that take longer than this are logged (at warn), with what their
    /// trace span would say of them, traced or not. None by default.
    #[serde(default, with = "humantime_serde")]
    pub slow_statement: Option<std::time::Duration>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: default_log_level(),
            slow_statement: None,
        }
    }
}

fn default_log_level() -> String {
    "info".into()
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
    /// Take the listeners of the Sluice running on `[handover] socket` rather than
    /// binding them.
    pub take_over: bool,
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
                .map(|a| {
                    let at = ListenerConfig::at(a);
                    ListenerConfig {
                        address: at.address.clone(),
                        socket: at.socket.clone(),
                        ..template.clone().unwrap_or(at)
                    }
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

    /// The placement of rows over `[[shards]]`, when sharding is configured.
    pub fn shard_map(&self) -> Option<Result<ShardMap, Vec<String>>> {
        let configured = !self.shards.is_empty()
            || !self.sharding.tables.is_empty()
            || !self.sharding.schemas.is_empty()
            || self.sharding.default_shard.is_some();
        configured.then(|| {
            let names: Vec<String> = self.servers.iter().map(|s| s.display_name()).collect();
            ShardMap::new(&self.shards, &self.sharding, &names)
        })
    }

    /// The configuration of shard `index` on its own: its servers only.
    pub fn for_shard(&self, index: usize) -> Config {
        let mut config = self.clone();
        let members = &self.shards[index].servers;
        config
            .servers
            .retain(|s| members.contains(&s.display_name()));
        config
    }

    fn validate_sharding(&self, p: &mut Vec<String>) {
        let Some(map) = self.shard_map() else {
            return;
        };
        if let Err(errors) = map {
            p.extend(errors);
        }
        if !self.pool.multiplex {
            p.push("[[shards]] need [pool] multiplex = true: statements go to the shard their rows are on, one by one".into());
        }
        if self
            .cache
            .binlog
            .as_ref()
            .is_some_and(|b| b.server.is_some())
        {
            p.push("[cache.binlog] server can't be named with [[shards]]: a reader follows each shard's writer".into());
        }
    }

    /// Every problem in the configuration, each naming where it is.
    pub fn validate(&self) -> Vec<String> {
        let mut p = Vec::new();
        self.validate_sharding(&mut p);
        p.extend(self.fleet.validate());
        p.extend(self.listener_problems());
        p.extend(self.accounts.validate(
            !self.users.is_empty(),
            self.monitor.user.is_some() && self.monitor.password.is_some(),
        ));
        p.extend(self.user_problems());
        p.extend(self.server_problems());
        let groups: Vec<String> = self
            .servers
            .iter()
            .flat_map(|s| s.groups.iter().cloned())
            .collect();
        p.extend(self.routing.validate(&groups));
        p.extend(self.monitor.validate());
        p.extend(self.failover.validate());
        p.extend(self.size_problems());
        p.extend(self.cache.validate());
        self.analytics.validate(&mut p);
        self.tracing.validate(&mut p);
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
        p.extend(self.admin.validate());
        p
    }

    /// `[[listeners]]`: at least one, each well formed.
    fn listener_problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.listeners.is_empty() {
            p.push(
                "no [[listeners]]: give at least one address or socket to accept clients on".into(),
            );
        }
        for (i, l) in self.listeners.iter().enumerate() {
            p.extend(check_listener(&format!("listeners[{i}]"), l));
        }
        p
    }

    /// `[[users]]`: each named once, with a password or a hash it can be checked against.
    fn user_problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (i, u) in self.users.iter().enumerate() {
            if u.name.is_empty() {
                p.push(format!("users[{i}].name is empty"));
            }
            let at = format!("users[{i}] ({:?})", u.name);
            if !names.insert(u.name.as_str()) {
                p.push(format!("{at}: user defined twice"));
            }
            p.extend(check_password(&at, u));
        }
        p
    }

    /// `[[servers]]`: at least one, each well formed and apart from the others, and
    /// roles that leave exactly one server able to take writes.
    fn server_problems(&self) -> Vec<String> {
        use crate::router::config::RoleConfig;
        let mut p = Vec::new();
        if self.servers.is_empty() {
            p.push("no [[servers]]: give at least one backend address".into());
        }
        let mut server_names = std::collections::HashSet::new();
        let mut addresses = std::collections::HashSet::new();
        for (i, s) in self.servers.iter().enumerate() {
            let at = format!("servers[{i}] ({})", s.display_name());
            if !server_names.insert(s.display_name()) {
                p.push(format!("{at}: another server has the same name"));
            }
            if !addresses.insert(s.endpoint().to_string().to_ascii_lowercase()) {
                p.push(format!(
                    "{at}: another server has the same address {}",
                    s.endpoint()
                ));
            }
            p.extend(check_server(&at, s));
        }
        let writers = self
            .servers
            .iter()
            .filter(|s| s.role == RoleConfig::Writer)
            .count();
        if writers > 1 {
            p.push(format!(
                "{writers} servers have role = \"writer\": at most one may (use \"auto\" to let the monitor choose)"
            ));
        }
        if self.servers.len() > 1 && !self.servers.iter().any(|s| s.role != RoleConfig::Reader) {
            p.push("every server has role = \"reader\": no server could take writes".into());
        }
        p
    }

    /// `[pool]` and `[limits]`: sizes that leave room for a connection.
    fn size_problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.pool.max_connections == 0 {
            p.push("pool.max_connections must be at least 1".into());
        }
        if self.pool.min_idle > self.pool.max_connections {
            p.push("pool.min_idle is larger than pool.max_connections".into());
        }
        if self.limits.max_client_connections == 0 {
            p.push("limits.max_client_connections must be at least 1".into());
        }
        p
    }
}

/// One listener, `at` naming it: an address or a socket, TLS files that go together and
/// exist, a greeting plugin that fits the greeting.
fn check_listener(at: &str, l: &ListenerConfig) -> Vec<String> {
    let mut p = Vec::new();
    match &l.socket {
        None if l.address.parse::<std::net::SocketAddr>().is_err() => p.push(format!(
            "{at}.address: {:?} is not an IP:port address",
            l.address
        )),
        None => {}
        Some(_) if !l.address.is_empty() => {
            p.push(format!("{at}: give address or socket, not both"))
        }
        Some(path) => p.extend(check_socket_path(&format!("{at}.socket"), path)),
    }
    if l.socket_mode_bits().is_none() {
        p.push(format!(
            "{at}.socket_mode: {:?} is not an octal mode such as \"0777\"",
            l.socket_mode
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
    p
}

/// One user's password, `at` naming the user: a password or a hash of its plugin's
/// form, not both; with a hash, a backend password to log in to the servers with.
fn check_password(at: &str, u: &UserConfig) -> Vec<String> {
    let mut p = Vec::new();
    match (&u.password, &u.password_hash) {
        (None, None) => p.push(format!("{at}: needs password or password_hash")),
        (Some(_), Some(_)) => p.push(format!("{at}: give password or password_hash, not both")),
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
    p
}

/// One server on its own, `at` naming it: an address or a socket (and no TLS over a
/// socket), a weight and a connection cap of at least 1, a CA file that exists.
fn check_server(at: &str, s: &ServerConfig) -> Vec<String> {
    let mut p = Vec::new();
    if s.weight == 0 {
        p.push(format!("{at}.weight must be at least 1"));
    }
    match &s.socket {
        None if !valid_host_port(&s.address) => {
            p.push(format!("{at}.address: {:?} is not host:port", s.address))
        }
        None => {}
        Some(_) if !s.address.is_empty() => {
            p.push(format!("{at}: give address or socket, not both"))
        }
        Some(path) => {
            p.extend(check_socket_path(&format!("{at}.socket"), path));
            // A socket is local: the server itself needs no TLS there either.
            if s.tls != TlsMode::Disabled || s.tls_ca.is_some() {
                p.push(format!(
                    "{at}: no TLS over a Unix socket; remove tls and tls_ca"
                ));
            }
        }
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
    p
}

/// sun_path holds 108 bytes with its terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

fn check_socket_path(at: &str, path: &std::path::Path) -> Option<String> {
    let len = path.as_os_str().len();
    if len == 0 {
        Some(format!("{at} is empty"))
    } else if len > MAX_SOCKET_PATH {
        Some(format!(
            "{at}: {} is {len} bytes, longer than a Unix socket path may be ({MAX_SOCKET_PATH})",
            path.display()
        ))
    } else {
        None
    }
}

fn valid_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
    fn unix_sockets_on_both_sides() {
        let c = Config::parse(
            r#"
            [[listeners]]
            socket = "/run/sluice.sock"
            socket_mode = "0660"
            [[users]]
            name = "app"
            password = "secret"
            [[servers]]
            socket = "/run/mysqld/mysqld.sock"
            "#,
        )
        .unwrap();
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(c.listeners[0].socket_mode_bits(), Some(0o660));
        assert_eq!(c.servers[0].display_name(), "/run/mysqld/mysqld.sock");

        let c = Config::parse(
            r#"
            [[listeners]]
            address = "127.0.0.1:6033"
            socket = "/run/sluice.sock"
            [[listeners]]
            socket = "/run/other.sock"
            socket_mode = "rw"
            [[users]]
            name = "app"
            password = "secret"
            [[servers]]
            address = "127.0.0.1:3306"
            socket = "/run/mysqld/mysqld.sock"
            [[servers]]
            name = "far"
            socket = "/run/mysqld/other.sock"
            tls = "required"
            "#,
        )
        .unwrap();
        let p = c.validate();
        assert!(p
            .iter()
            .any(|x| x.contains("listeners[0]: give address or socket")));
        assert!(p.iter().any(|x| x.contains("listeners[1].socket_mode")));
        assert!(p
            .iter()
            .any(|x| x.contains("servers[0]") && x.contains("not both")));
        assert!(p.iter().any(|x| x.contains("servers[1] (far): no TLS")));
        assert_eq!(p.len(), 4, "{p:#?}");

        let mut c = Config::default();
        c.apply(&Overrides {
            listen: vec!["127.0.0.1:1".into(), "/run/sluice.sock".into()],
            backends: vec!["/run/mysqld/mysqld.sock".into()],
            users: vec!["app:pw".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(
            c.listeners[1].socket.as_deref(),
            Some(Path::new("/run/sluice.sock"))
        );
        assert!(c.listeners[1].address.is_empty());
        assert!(c.servers[0].endpoint().is_unix());
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
