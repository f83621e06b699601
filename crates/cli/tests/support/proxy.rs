//! The `sluice` binary under test: its TOML configuration and a process handle.
//!
//! The process runs next to a small watchdog (a shell reading a pipe from us) that sends
//! it SIGTERM, then SIGKILL, and deletes its temporary directory when the test process
//! exits or dies, so no proxy outlives the tests however they end.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use sluice_sandbox::{self as sandbox, free_port, MariaDb};

/// The binary built from this package.
pub const SLUICE_BIN: &str = env!("CARGO_BIN_EXE_sluice");

/// How long Sluice may take to accept TCP connections after it starts.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(20);

/// Sluice's configuration file, as the tests write it. Optional fields left `None` are
/// omitted, so Sluice's own defaults apply.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub log: Log,
    pub listeners: Vec<Listener>,
    pub users: Vec<User>,
    pub servers: Vec<Server>,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub pool: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub limits: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub protocol: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub cache: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub admin: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub routing: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub monitor: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub failover: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub analytics: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub accounts: toml::Table,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<toml::Table>,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub sharding: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub fleet: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub handover: toml::Table,
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    pub tracing: toml::Table,
}

#[derive(Debug, Clone, Serialize)]
pub struct Log {
    pub format: String,
    pub level: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_statement: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Listener {
    /// Empty for a socket listener.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_tls: Option<bool>,
    /// Plugin named in the greeting ("mysql_native_password" or "caching_sha2_password").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_auth_plugin: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct User {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_plugin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_password: Option<String>,
}

impl User {
    /// A user whose name and password are the backend's too.
    pub fn native(name: &str, password: &str) -> User {
        User {
            name: name.to_owned(),
            password: Some(password.to_owned()),
            password_hash: None,
            auth_plugin: Some("mysql_native_password".to_owned()),
            backend_user: None,
            backend_password: None,
        }
    }

    /// A caching_sha2_password user of Sluice that logs in to the backend as
    /// [`super::NATIVE_USER`].
    pub fn sha2(name: &str, password: &str) -> User {
        User {
            auth_plugin: Some("caching_sha2_password".to_owned()),
            backend_user: Some(super::NATIVE_USER.to_owned()),
            backend_password: Some(super::NATIVE_PASSWORD.to_owned()),
            ..User::native(name, password)
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Server {
    pub name: String,
    /// Empty for a server reached over its socket.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_verify: Option<bool>,
    /// Routing settings of the server (role, weight, zone, max_lag, groups).
    #[serde(flatten)]
    pub extra: toml::Table,
}

impl Server {
    pub fn new(name: &str, address: SocketAddr) -> Server {
        Server {
            name: name.to_owned(),
            address: address.to_string(),
            socket: None,
            max_connections: None,
            tls: None,
            tls_ca: None,
            tls_verify: None,
            extra: toml::Table::new(),
        }
    }

    /// A server reached over its Unix socket.
    pub fn at_socket(name: &str, socket: &Path) -> Server {
        Server {
            address: String::new(),
            socket: Some(socket.to_owned()),
            ..Server::new(name, SocketAddr::from(([127, 0, 0, 1], 0)))
        }
    }

    /// Set a routing setting of the server (`weight`, `zone`, `role`...).
    pub fn set(mut self, key: &str, value: impl Into<toml::Value>) -> Server {
        self.extra.insert(key.to_owned(), value.into());
        self
    }
}

impl Config {
    /// One plain listener on a free port, the backend `backend` as server "db1", and the
    /// users [`super::NATIVE_USER`] and [`super::OTHER_USER`] passed through as they are.
    pub fn new(backend: SocketAddr) -> Config {
        Config {
            log: Log {
                format: "text".to_owned(),
                level: "info".to_owned(),
                slow_statement: None,
            },
            listeners: vec![Listener {
                address: format!("127.0.0.1:{}", free_port()),
                socket: None,
                tls_cert: None,
                tls_key: None,
                require_tls: None,
                default_auth_plugin: None,
            }],
            users: vec![
                User::native(super::NATIVE_USER, super::NATIVE_PASSWORD),
                User::native(super::OTHER_USER, super::OTHER_PASSWORD),
            ],
            servers: vec![Server::new("db1", backend)],
            pool: toml::Table::new(),
            limits: toml::Table::new(),
            protocol: toml::Table::new(),
            cache: toml::Table::new(),
            admin: toml::Table::new(),
            routing: toml::Table::new(),
            monitor: toml::Table::new(),
            failover: toml::Table::new(),
            analytics: toml::Table::new(),
            accounts: toml::Table::new(),
            shards: Vec::new(),
            sharding: toml::Table::new(),
            // Tests run side by side against the same servers, which would make their
            // instances one fleet: each others' runtime changes, and the fleet's own
            // statements in the servers' counters. The fleet's tests turn it on.
            fleet: toml::Table::from_iter([("enabled".to_owned(), false.into())]),
            handover: toml::Table::new(),
            tracing: toml::Table::new(),
        }
    }

    /// Set `[tracing] key = value`.
    pub fn tracing(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.tracing.insert(key.to_owned(), value.into());
        self
    }

    /// Set `[routing] key = value`.
    pub fn routing(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.routing.insert(key.to_owned(), value.into());
        self
    }

    /// Set `[monitor] key = value`.
    pub fn monitor(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.monitor.insert(key.to_owned(), value.into());
        self
    }

    /// Set `[accounts] key = value`.
    pub fn accounts(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.accounts.insert(key.to_owned(), value.into());
        self
    }

    /// No `[[users]]`: clients log in with the servers' own accounts, which Sluice reads
    /// as [`super::NATIVE_USER`].
    pub fn server_accounts(mut self) -> Config {
        self.users.clear();
        self.accounts("user", super::NATIVE_USER)
            .accounts("password", super::NATIVE_PASSWORD)
    }

    /// Set `[fleet] key = value`.
    pub fn fleet(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.fleet.insert(key.to_owned(), value.into());
        self
    }

    /// Set `[handover] key = value`.
    pub fn handover(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.handover.insert(key.to_owned(), value.into());
        self
    }

    /// Set `[failover] key = value`.
    pub fn failover(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.failover.insert(key.to_owned(), value.into());
        self
    }

    /// Add a `[[routing.rules]]` table.
    pub fn routing_rule(mut self, rule: toml::Table) -> Config {
        let rules = self
            .routing
            .entry("rules")
            .or_insert_with(|| toml::Value::Array(Vec::new()));
        if let toml::Value::Array(a) = rules {
            a.push(toml::Value::Table(rule));
        }
        self
    }

    /// [`Config::new`] in front of a sandbox server.
    pub fn for_server(backend: &MariaDb) -> Config {
        Config::new(backend.addr())
    }

    pub fn user(mut self, user: User) -> Config {
        self.users.push(user);
        self
    }

    /// Serve TLS to clients with these files.
    pub fn listener_tls(mut self, tls: &sandbox::TlsFiles, require: bool) -> Config {
        let listener = &mut self.listeners[0];
        listener.tls_cert = Some(tls.server_cert.clone());
        listener.tls_key = Some(tls.server_key.clone());
        listener.require_tls = Some(require);
        self
    }

    /// Also accept clients on the Unix socket `path`, with the first listener's TLS
    /// settings. [`Sluice::start`] waits for it too.
    pub fn socket_listener(mut self, path: &Path) -> Config {
        let listener = Listener {
            address: String::new(),
            socket: Some(path.to_owned()),
            ..self.listeners[0].clone()
        };
        self.listeners.push(listener);
        self
    }

    /// The Unix sockets Sluice listens on.
    pub fn sockets(&self) -> Vec<PathBuf> {
        self.listeners
            .iter()
            .filter_map(|l| l.socket.clone())
            .collect()
    }

    /// Set `[limits] key = value` ("3s"-style durations are strings).
    pub fn limit(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.limits.insert(key.to_owned(), value.into());
        self
    }

    /// Set `[pool] key = value`.
    pub fn pool(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.pool.insert(key.to_owned(), value.into());
        self
    }

    /// Add a `[[cache.rules]]` entry.
    pub fn cache_rule(self, name: &str, pattern: &str, ttl: &str) -> Config {
        let mut rule = toml::Table::new();
        rule.insert("name".into(), name.into());
        rule.insert("match".into(), pattern.into());
        rule.insert("ttl".into(), ttl.into());
        self.cache_rule_table(rule)
    }

    /// Add a `[[cache.rules]]` entry given whole.
    pub fn cache_rule_table(mut self, rule: toml::Table) -> Config {
        let rules = self
            .cache
            .entry("rules")
            .or_insert_with(|| toml::Value::Array(Vec::new()));
        rules
            .as_array_mut()
            .expect("cache.rules is an array")
            .push(toml::Value::Table(rule));
        self
    }

    /// Set `[analytics] key = value`.
    pub fn analytics(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.analytics.insert(key.to_owned(), value.into());
        self
    }

    /// Set `[cache] key = value`.
    pub fn cache(mut self, key: &str, value: impl Into<toml::Value>) -> Config {
        self.cache.insert(key.to_owned(), value.into());
        self
    }

    /// Turn the admin API on, on a free loopback port, with `token`.
    pub fn admin(mut self, token: &str) -> Config {
        self.admin.insert(
            "address".into(),
            format!("127.0.0.1:{}", free_port()).into(),
        );
        self.admin.insert("token".into(), token.into());
        self
    }

    /// The admin API's address, when turned on.
    pub fn admin_address(&self) -> Option<String> {
        self.admin
            .get("address")
            .and_then(|a| a.as_str())
            .map(str::to_owned)
    }

    /// The listener's port.
    pub fn port(&self) -> u16 {
        self.listeners[0]
            .address
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .expect("the first listener has a port")
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("the config serializes")
    }

    /// Write the configuration to `path`.
    pub fn write(&self, path: &Path) {
        fs::write(path, self.to_toml())
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// A running `sluice` process. Dropping it stops it (SIGTERM, then SIGKILL after 5 s).
pub struct Sluice {
    child: Child,
    /// Our end of the watchdog's pipe: a "forget" line means the process has exited and
    /// been waited for; closing it otherwise means "kill it".
    watchdog_stdin: Option<ChildStdin>,
    watchdog: Child,
    port: u16,
    dir: tempfile::TempDir,
    status: Option<ExitStatus>,
}

impl Sluice {
    /// `sluice serve --config FILE` with `config` written to a temporary file; returns
    /// once its listener accepts TCP connections.
    #[track_caller]
    pub fn start(config: &Config) -> Sluice {
        let mut config = config.clone();
        // The listener's free port can be taken by another process before Sluice binds
        // it; a new port is then tried, while the log of the failure is kept for
        // debugging if every attempt fails.
        let mut failures = Vec::new();
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("sluice-test-")
                .tempdir()
                .expect("creating a temp dir");
            let path = dir.path().join("sluice.toml");
            config.write(&path);
            let args = vec![OsString::from("serve"), "--config".into(), path.into()];
            match Sluice::spawn_in(dir, args, config.port(), &config.sockets()) {
                Ok(sluice) => return sluice,
                Err((log, port_taken)) => {
                    failures.push(log);
                    if !port_taken {
                        break;
                    }
                    config.listeners[0].address = format!("127.0.0.1:{}", free_port());
                }
            }
        }
        panic!(
            "sluice did not start listening:\n{}\nconfig:\n{}",
            failures.join("\n---\n"),
            config.to_toml()
        );
    }

    /// `sluice` with arbitrary arguments (for example `serve --listen ...`) that should
    /// make it listen on 127.0.0.1:`port`.
    #[track_caller]
    pub fn start_with_args(args: &[&str], port: u16) -> Sluice {
        let dir = tempfile::Builder::new()
            .prefix("sluice-test-")
            .tempdir()
            .expect("creating a temp dir");
        let os_args = args.iter().map(OsString::from).collect();
        match Sluice::spawn_in(dir, os_args, port, &[]) {
            Ok(sluice) => sluice,
            Err((log, _)) => panic!("sluice {args:?} did not start listening:\n{log}"),
        }
    }

    /// Spawn and wait for the listener (and the Unix `sockets`); on failure, the log and
    /// whether the port was taken.
    fn spawn_in(
        dir: tempfile::TempDir,
        args: Vec<OsString>,
        port: u16,
        sockets: &[PathBuf],
    ) -> Result<Sluice, (String, bool)> {
        let log_path = dir.path().join("sluice.log");
        let log = fs::File::create(&log_path).expect("creating the log file");
        let child = Command::new(SLUICE_BIN)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("cloning a file handle"))
            .stderr(log)
            // Own process group: signals sent to the test runner's terminal are not for it.
            .process_group(0)
            .spawn()
            .expect("starting sluice");
        let watchdog = watchdog(child.id(), dir.path());
        let mut sluice = Sluice {
            child,
            watchdog_stdin: None,
            watchdog,
            port,
            dir,
            status: None,
        };
        sluice.watchdog_stdin = sluice.watchdog.stdin.take();

        let deadline = Instant::now() + LISTEN_TIMEOUT;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Some(status) = sluice.try_status() {
                let log = format!(
                    "sluice exited with {status} before listening:\n{}",
                    sluice.log()
                );
                let port_taken = log.contains("in use");
                return Err((log, port_taken));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                && sockets
                    .iter()
                    .all(|s| std::os::unix::net::UnixStream::connect(s).is_ok())
            {
                return Ok(sluice);
            }
            if Instant::now() >= deadline {
                let log = format!(
                    "sluice not listening on {addr} after {LISTEN_TIMEOUT:?}:\n{}",
                    sluice.log()
                );
                return Err((log, false));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The directory holding the config file and the log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The config file given with `--config`, for rewriting before a SIGHUP.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("sluice.toml")
    }

    /// Everything Sluice has printed so far (stdout and stderr).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("sluice.log")).unwrap_or_default()
    }

    /// Send a signal by name ("TERM", "HUP", "KILL", ...).
    #[track_caller]
    pub fn signal(&self, signal: &str) {
        assert!(
            self.status.is_none(),
            "sluice already exited; cannot send SIG{signal}"
        );
        sandbox::send_signal(self.pid(), signal).expect("sending a signal to sluice");
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.try_status().is_none()
    }

    /// Panic with the log unless the process is still running.
    #[track_caller]
    pub fn assert_running(&mut self) {
        if let Some(status) = self.try_status() {
            panic!(
                "sluice exited unexpectedly with {status}; log:\n{}",
                self.log()
            );
        }
    }

    fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("polling sluice");
            if self.status.is_some() {
                self.forget_watchdog();
            }
        }
        self.status
    }

    /// Wait for the process to exit by itself, at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status =
                sandbox::wait_child(&mut self.child, timeout).expect("waiting for sluice");
            if self.status.is_some() {
                self.forget_watchdog();
            }
        }
        self.status
    }

    /// SIGTERM, then wait up to 30 s (SIGKILL after that); the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        if self.try_status().is_none() {
            let _ = sandbox::send_signal(self.pid(), "TERM");
            if self.wait_exit(Duration::from_secs(30)).is_none() {
                let _ = self.child.kill();
                self.status = Some(self.child.wait().expect("waiting for sluice"));
                self.forget_watchdog();
            }
        }
        self.status.expect("sluice has exited")
    }

    /// The process has been waited for, so its pid may be reused: the watchdog must not
    /// signal it any more.
    fn forget_watchdog(&mut self) {
        if let Some(mut stdin) = self.watchdog_stdin.take() {
            let _ = stdin.write_all(b"forget\n");
        }
        let _ = self.watchdog.wait();
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = sandbox::send_signal(self.pid(), "TERM");
            if self.wait_exit(Duration::from_secs(5)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.forget_watchdog();
            }
        }
    }
}

/// A watchdog for the `sluice` process `pid`: a "forget" line on its stdin means the
/// process has exited and been waited for; its stdin closing otherwise (the test process
/// died) means "stop it": SIGTERM, SIGKILL after 5 s, then `dir` removed.
pub fn watchdog(pid: u32, dir: &Path) -> Child {
    Command::new("bash")
        .args([
            "-c",
            r#"read -r line || true
               [ "$line" = forget ] && exit 0
               kill -TERM "$1" 2>/dev/null
               for ((i = 0; i < 50; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
               kill -KILL "$1" 2>/dev/null
               rm -rf -- "$2""#,
            "sluice-test-watchdog",
            &pid.to_string(),
        ])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("starting the watchdog")
}

/// `sluice ARGS...` run to completion (at most 30 s): exit code, stdout, stderr.
#[track_caller]
pub fn run_sluice(args: &[&str]) -> super::CliOutput {
    run_sluice_within(args, Duration::from_secs(30))
}

/// [`run_sluice`] for commands that take longer (the benchmarks).
pub fn run_sluice_within(args: &[&str], timeout: Duration) -> super::CliOutput {
    let child = Command::new(SLUICE_BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting sluice");
    super::cli::finish(child, Vec::new(), timeout, &format!("sluice {args:?}"))
}
