//! Private MariaDB servers on loopback for the integration tests, `make demo` and
//! `sluice bench`: not on the request path, but what every test of it runs against.
//!
//! [`MariaDb::start`] gives a real `mariadbd` with its own temporary data directory, a
//! free 127.0.0.1 port, the binary log on, optional TLS, and an admin account
//! ([`ADMIN_USER`]). Nothing here reads the machine's MariaDB configuration files
//! (`--no-defaults` everywhere), and no server outlives the process that started it:
//! each runs under a small shell watchdog that stops it and deletes its files as soon as
//! our end of a pipe closes, which the kernel does for us even when we are killed.
//!
//! A server can be killed or stopped and started again on the same files and port
//! ([`MariaDb::restart`]), and several make a topology (the `replication` module): a
//! GTID primary with replicas ([`ReplicaSet`]) or a Galera cluster ([`GaleraCluster`]).
//!
//! Beside the servers, the same watchdog runs [`Jaeger`], the OpenTelemetry trace
//! receiver the tracing tests read Sluice's spans back from (the `jaeger` module).

pub mod cpus;
mod install;
pub mod jaeger;
pub mod link;
mod process;
mod replication;
mod supervised;
mod tls;

use install::{
    copy_dir, process_lifetime_dir, root_socket_client, run_client, template, wait_ready,
    StartError,
};
pub use jaeger::Jaeger;
pub use process::{client_path, find_program, free_port, process_alive, send_signal, wait_child};
use process::{mariadbd_path, tail, user_args, wait_process_exit};
pub use replication::{
    GaleraCluster, ReplicaSet, ReplicaSetOptions, REPL_PASSWORD, REPL_USER, SEMI_SYNC_TIMEOUT_MS,
};
pub use supervised::Supervised;
pub use tls::{generate_tls, TlsFiles};

use std::ffi::OsString;
use std::fs;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

/// Admin account created on every sandbox server, usable over TCP from anywhere.
pub const ADMIN_USER: &str = "sluice_admin";
/// Password of [`ADMIN_USER`].
pub const ADMIN_PASSWORD: &str = "sluice_admin";

/// How long a fresh server may take to accept its first connection.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`MariaDb::stop`] waits for the watchdog, which itself escalates from
/// SIGTERM to SIGKILL after [`WATCHDOG_TERM_GRACE_TENTHS`].
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Environment variable naming a directory searched first for the MariaDB programs.
pub const BIN_DIR_ENV: &str = "SLUICE_MARIADB_BIN_DIR";

/// What [`MariaDb::start`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MariaDbOptions {
    /// Serve TLS with a certificate from [`generate_tls`] (default false).
    pub tls: bool,
    /// `--max-connections` (default 2000).
    pub max_connections: u32,
    /// Appended last to mariadbd's command line, so they override our defaults. They are
    /// not given to the install step: options fixed at install time (page size, lower
    /// case table names) cannot be changed this way.
    pub extra_args: Vec<String>,
    /// `--server-id`, which replication needs unique per server (default 1).
    pub server_id: u32,
    /// `--log-slave-updates`: replicated transactions go to this server's binlog too,
    /// so that its replicas (or its own after a promotion) see them (default false).
    pub log_slave_updates: bool,
    /// `--gtid-strict-mode=ON` (default false).
    pub gtid_strict_mode: bool,
    /// Semi-synchronous replication in both roles, so that it still holds after a
    /// replica is promoted: master and slave sides enabled, a primary waits at most
    /// [`SEMI_SYNC_TIMEOUT_MS`] for an acknowledgement, and only while some semi-sync
    /// replica is connected (default false).
    pub semi_sync: bool,
    /// `--read-only=ON`, as replicas run (default false).
    pub read_only: bool,
}

impl Default for MariaDbOptions {
    fn default() -> Self {
        MariaDbOptions {
            tls: false,
            max_connections: 2000,
            extra_args: Vec::new(),
            server_id: 1,
            log_slave_updates: false,
            gtid_strict_mode: false,
            semi_sync: false,
            read_only: false,
        }
    }
}

impl MariaDbOptions {
    /// The mariadbd options for the replication settings above.
    fn replication_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.log_slave_updates {
            args.push("--log-slave-updates".to_owned());
        }
        if self.gtid_strict_mode {
            args.push("--gtid-strict-mode=ON".to_owned());
        }
        if self.semi_sync {
            args.extend([
                "--rpl-semi-sync-master-enabled=ON".to_owned(),
                "--rpl-semi-sync-slave-enabled=ON".to_owned(),
                format!("--rpl-semi-sync-master-timeout={SEMI_SYNC_TIMEOUT_MS}"),
                // A commit becomes visible only once a replica has it: no transaction
                // reads what a failover may lose (AFTER_COMMIT, the default, shows it
                // to others while waiting for the replica).
                "--rpl-semi-sync-master-wait-point=AFTER_SYNC".to_owned(),
                // With the default (ON), a replica's own master side, which nobody
                // acknowledges, makes its SQL thread wait the full timeout on every
                // transaction it applies.
                "--rpl-semi-sync-master-wait-no-slave=OFF".to_owned(),
            ]);
        }
        if self.read_only {
            args.push("--read-only=ON".to_owned());
        }
        args
    }
}

/// A running sandbox server. Dropping it (or [`MariaDb::stop`]) stops the server and
/// deletes its data directory.
pub struct MariaDb {
    /// Temporary directory holding `data/`, `tls/`, the socket and the pid file; the
    /// watchdog deletes it after the server exits.
    root: PathBuf,
    datadir: PathBuf,
    port: u16,
    tls: Option<TlsFiles>,
    server: Supervised,
    /// mariadbd's command line and extra environment, kept for [`MariaDb::restart`].
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

/// How [`MariaDb::start_with`] starts a server, beyond its [`MariaDbOptions`].
struct Launch<'a> {
    /// Copied into the new data directory.
    template: &'a Path,
    /// The port to listen on; `None`: a free one, and another if it is taken meanwhile.
    port: Option<u16>,
    /// Appended to the command line of the first start only, not of restarts.
    first_start_args: Vec<String>,
    /// Environment variables for mariadbd (and the scripts it runs).
    env: Vec<(OsString, OsString)>,
}

impl std::fmt::Debug for MariaDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MariaDb")
            .field("port", &self.port)
            .field("pid", &self.server.pid)
            .field("datadir", &self.datadir)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl MariaDb {
    /// Copy the installed template into a fresh temp data dir, start mariadbd on a free
    /// 127.0.0.1 port, and wait (at most 30 s) until the admin account can log in over
    /// TCP. `mariadb-install-db` runs only on the first call in a process.
    pub fn start(opts: MariaDbOptions) -> Result<MariaDb> {
        let template = template()?;
        Self::start_with(
            &opts,
            &Launch {
                template: &template,
                port: None,
                first_start_args: Vec::new(),
                env: Vec::new(),
            },
        )
    }

    fn start_with(opts: &MariaDbOptions, launch: &Launch) -> Result<MariaDb> {
        // A port chosen by the caller is part of a topology: another one would not help.
        let max_attempts = if launch.port.is_some() { 1 } else { 5 };
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Self::start_once(opts, launch) {
                Ok(server) => return Ok(server),
                Err(StartError::PortTaken(e)) if attempts < max_attempts => {
                    tracing::debug!(error = %e, "sandbox port taken, retrying on another");
                }
                Err(StartError::PortTaken(e) | StartError::Failed(e)) => return Err(e),
            }
        }
    }

    fn start_once(opts: &MariaDbOptions, launch: &Launch) -> Result<MariaDb, StartError> {
        let root = tempfile::Builder::new()
            .prefix("sluice-mariadb-")
            .tempdir()
            .context("creating the server directory")?;
        let datadir = root.path().join("data");
        let socket = root.path().join("mariadbd.sock");
        // sun_path holds 108 bytes; a long $TMPDIR would fail later with a vaguer error.
        if socket.as_os_str().len() > 100 {
            return Err(anyhow!(
                "socket path {} is too long for a unix socket; set TMPDIR to a shorter directory",
                socket.display()
            )
            .into());
        }
        copy_dir(launch.template, &datadir)?;
        let tls = if opts.tls {
            Some(generate_tls(&root.path().join("tls"))?)
        } else {
            None
        };
        let port = launch.port.unwrap_or_else(free_port);
        let error_log = datadir.join("error.log");
        let out = root.path().join("mariadbd.out");
        // A private tmpdir: servers sharing the machine's /tmp have lost their internal
        // temporary-table files to whatever else cleans it.
        let tmpdir = root.path().join("tmp");
        std::fs::create_dir_all(&tmpdir)?;

        let mut args: Vec<OsString> = vec!["--no-defaults".into()];
        args.extend(user_args());
        args.extend(
            [
                format!("--datadir={}", datadir.display()),
                format!("--socket={}", socket.display()),
                format!("--pid-file={}", root.path().join("mariadbd.pid").display()),
                format!("--tmpdir={}", tmpdir.display()),
                format!("--port={port}"),
                "--bind-address=127.0.0.1".into(),
                "--skip-name-resolve".into(),
                // Names every log after "mariadb" rather than the host name, which would
                // make the binlog's name depend on the machine.
                "--log-basename=mariadb".into(),
                format!("--log-error={}", error_log.display()),
                "--innodb-buffer-pool-size=256M".into(),
                // Sandbox data is disposable: syncing every commit would make tests and
                // benchmarks measure the disk instead of the server and the proxy.
                "--innodb-flush-log-at-trx-commit=2".into(),
                "--sync-binlog=0".into(),
                format!("--max-connections={}", opts.max_connections),
                "--max-allowed-packet=1G".into(),
                "--local-infile=1".into(),
                // The binlog is on because Sluice tails it to invalidate its cache.
                "--log-bin".into(),
                "--binlog-format=ROW".into(),
                format!("--server-id={}", opts.server_id),
            ]
            .map(OsString::from),
        );
        if let Some(tls) = &tls {
            args.push(format!("--ssl-ca={}", tls.ca_cert.display()).into());
            args.push(format!("--ssl-cert={}", tls.server_cert.display()).into());
            args.push(format!("--ssl-key={}", tls.server_key.display()).into());
        }
        args.extend(opts.replication_args().into_iter().map(OsString::from));
        args.extend(opts.extra_args.iter().map(OsString::from));
        let mut first_args = args.clone();
        first_args.extend(launch.first_start_args.iter().map(OsString::from));

        let program = mariadbd_path()?;

        // The watchdog owns the directory from here on.
        let root = root.keep();
        let spawned =
            Supervised::spawn_with_env(&program, &first_args, &launch.env, Some(&root), &out);
        let server = match spawned {
            Ok(server) => server,
            Err(e) => {
                let _ = fs::remove_dir_all(&root);
                return Err(e.into());
            }
        };
        let db = MariaDb {
            root,
            datadir,
            port,
            tls,
            server,
            args,
            env: launch.env.clone(),
        };
        // On failure `db` is dropped here, which stops the server and deletes its files.
        wait_ready(db.server.pid, &error_log, 0, &out, || {
            db.execute("SELECT 1").map(drop)
        })?;
        Ok(db)
    }

    /// Start the server again after [`MariaDb::kill`] or [`MariaDb::stop_process`]: same
    /// data directory, port and options, and wait (at most 30 s) until the admin account
    /// can log in, as [`MariaDb::start`] does. Fails if the server still runs, or if
    /// another process took its port meanwhile.
    pub fn restart(&mut self) -> Result<()> {
        if self.running() {
            bail!(
                "mariadbd {} on port {} still runs; kill or stop it before restarting it",
                self.server.pid,
                self.port
            );
        }
        let error_log = self.datadir.join("error.log");
        let log_from = fs::metadata(&error_log).map_or(0, |meta| meta.len());
        let out = self.root.join("mariadbd.out");
        let program = mariadbd_path()?;
        let mut args = self.args.clone();
        if let Some(position) = self.galera_recovered_position()? {
            args.push(format!("--wsrep-start-position={position}").into());
        }
        // The old watchdog still guards the files (it deletes them if we die); it hands
        // them over to the new one instead.
        self.server.release();
        self.server =
            Supervised::spawn_with_env(&program, &args, &self.env, Some(&self.root), &out)?;
        wait_ready(self.server.pid, &error_log, log_from, &out, || {
            self.execute("SELECT 1").map(drop)
        })
        .map_err(StartError::into_inner)
        .with_context(|| format!("restarting the server on port {}", self.port))
    }

    /// Stop the server process cleanly (SIGTERM, then SIGKILL if it is still running
    /// after 30 s) and wait until it is gone, keeping its files for
    /// [`MariaDb::restart`]. Does nothing if it is not running.
    pub fn stop_process(&mut self) -> Result<()> {
        let pid = self.server.pid;
        if !process_alive(pid) {
            return Ok(());
        }
        send_signal(pid, "TERM")?;
        if wait_process_exit(pid, STOP_TIMEOUT) {
            return Ok(());
        }
        tracing::warn!(
            pid,
            "mariadbd ignored SIGTERM for {STOP_TIMEOUT:?}, killing it"
        );
        self.kill()
    }

    /// Whether the server process runs (false after [`MariaDb::kill`] and
    /// [`MariaDb::stop_process`], until [`MariaDb::restart`]).
    pub fn running(&self) -> bool {
        self.server.running()
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port))
    }

    /// The TLS files the server uses, when started with `tls: true`.
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// The data directory (it holds `error.log` and the binary logs).
    pub fn datadir(&self) -> &Path {
        &self.datadir
    }

    /// The unix socket the server also listens on.
    pub fn socket(&self) -> PathBuf {
        self.root.join("mariadbd.sock")
    }

    /// mariadbd's process id.
    pub fn pid(&self) -> u32 {
        self.server.pid
    }

    /// The server's error log so far.
    pub fn error_log(&self) -> String {
        // Lossy: one byte that is not UTF-8 must not make the whole log read as empty.
        fs::read(self.datadir.join("error.log"))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// A `mariadb` client command logged in as the admin over TCP, to which callers add
    /// their own arguments.
    pub fn admin_client(&self) -> Result<Command> {
        let mut command = Command::new(client_path()?);
        command.arg("--no-defaults").args([
            "--protocol=TCP",
            "--host=127.0.0.1",
            &format!("--port={}", self.port),
            &format!("--user={ADMIN_USER}"),
            &format!("--password={ADMIN_PASSWORD}"),
            "--connect-timeout=10",
            "--max-allowed-packet=1G",
        ]);
        // Clients that verify certificates by default need the CA to trust ours.
        if let Some(tls) = &self.tls {
            command.arg(format!("--ssl-ca={}", tls.ca_cert.display()));
        }
        Ok(command)
    }

    /// Run SQL as the admin over TCP with the `mariadb` CLI in --batch mode; returns stdout; error includes stderr.
    pub fn execute(&self, sql: &str) -> Result<String> {
        let mut client = self.admin_client()?;
        client.arg("--batch");
        run_client(client, sql).with_context(|| format!("executing on {}: {sql:.200}", self.addr()))
    }

    /// SIGKILL the server now, as a crash would, and wait (at most 10 s) until it is
    /// gone. Its files stay until the handle is dropped.
    pub fn kill(&self) -> Result<()> {
        send_signal(self.server.pid, "KILL")?;
        if !wait_process_exit(self.server.pid, Duration::from_secs(10)) {
            bail!(
                "mariadbd {} still alive 10 s after SIGKILL",
                self.server.pid
            );
        }
        Ok(())
    }

    /// Stop the server (SIGTERM, wait bounded, then SIGKILL) and remove the data dir. Also done on Drop.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.server.stop();
        // Normally the watchdog has deleted it already; this covers a wedged watchdog.
        if self.root.exists() {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::process::{ephemeral_ports, non_ephemeral_ports};
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn free_ports_are_distinct() {
        let ports: HashSet<u16> = (0..50).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 50);
    }

    #[test]
    fn free_ports_stay_out_of_the_ephemeral_range() {
        let (low, high) = ephemeral_ports().expect("Linux tells its ephemeral range");
        let range = non_ephemeral_ports().expect("Linux's default range leaves room");
        assert!(range.end <= low || range.start > high, "{range:?}");
        for _ in 0..20 {
            assert!(range.contains(&free_port()));
        }
    }

    #[test]
    fn tls_files_are_pem() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate_tls(dir.path()).unwrap();
        let ca = fs::read_to_string(&files.ca_cert).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        let key = fs::read_to_string(&files.server_key).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
    }

    #[test]
    fn own_process_is_alive_and_a_bogus_pid_is_not() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(u32::MAX - 1));
    }
}
