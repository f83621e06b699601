//! Where the benchmark's load goes: an embedded topology (a sandbox MariaDB and Sluice as
//! a child process, both torn down at the end) or servers that already run. Also the
//! proxy's CPU clock, read from `/proc`.

use std::fs::File;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::sysbench::{shell_quote, tail, with_raised_nofile};
use crate::sandbox::{self, MariaDb, MariaDbOptions};

/// A host and port sysbench connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The benchmark user, created on the embedded server and given to Sluice.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub user: String,
    pub password: String,
    pub database: String,
}

/// What to start for an embedded run.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    pub max_connections: u32,
    /// Start Sluice too (false when only the direct scenario runs).
    pub with_sluice: bool,
    pub sluice_bin: PathBuf,
    /// Sluice's stdout and stderr go here.
    pub sluice_log: PathBuf,
}

/// The servers of one benchmark run. Dropping it stops whatever it started.
pub struct Topology {
    /// The database itself, for the direct scenario.
    pub direct: Option<Target>,
    /// Sluice, for the passthrough scenario.
    pub passthrough: Option<Target>,
    /// The Sluice process whose CPU time is measured, if known.
    pub sluice_pid: Option<u32>,
    /// How Sluice was started (embedded runs).
    pub sluice_command: Option<String>,
    pub mariadb_version: Option<String>,
    /// One line per server, for the report.
    pub description: Vec<String>,
    sluice: Option<SluiceProcess>,
    mariadb: Option<MariaDb>,
}

impl Topology {
    /// Starts a sandbox MariaDB with the benchmark user and database and, if asked, Sluice
    /// in front of it.
    pub fn embedded(opts: &EmbeddedOptions, creds: &Credentials) -> anyhow::Result<Topology> {
        let mariadb = MariaDb::start(MariaDbOptions {
            max_connections: opts.max_connections,
            ..MariaDbOptions::default()
        })
        .context("starting the embedded MariaDB server (sandbox)")?;
        let mut topology = Topology {
            direct: Some(Target {
                host: mariadb.addr().ip().to_string(),
                port: mariadb.port(),
            }),
            passthrough: None,
            sluice_pid: None,
            sluice_command: None,
            mariadb_version: None,
            description: Vec::new(),
            sluice: None,
            mariadb: None,
        };
        let backend = mariadb.addr();
        topology.mariadb = Some(mariadb);
        let db = topology.mariadb.as_ref().expect("just set");

        let user = sql_string(&creds.user);
        let password = sql_string(&creds.password);
        let database = sql_ident(&creds.database);
        // '%' alone loses to an anonymous ''@'localhost' account when the server
        // resolves 127.0.0.1 to localhost; the explicit 'localhost' account wins.
        let mut setup = vec![format!("CREATE DATABASE IF NOT EXISTS {database}")];
        for host in ["%", "localhost"] {
            setup.push(format!(
                "CREATE USER IF NOT EXISTS {user}@'{host}' IDENTIFIED BY {password}"
            ));
            setup.push(format!("GRANT ALL ON {database}.* TO {user}@'{host}'"));
        }
        for sql in &setup {
            db.execute(sql).with_context(|| {
                format!(
                    "setting up the benchmark user and database on the embedded MariaDB ({sql})"
                )
            })?;
        }
        topology.mariadb_version = db.execute("SELECT VERSION()").ok().and_then(|out| {
            out.lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .map(String::from)
        });
        topology.description.push(format!(
            "MariaDB {}: embedded sandbox at {backend}, max_connections={}",
            topology
                .mariadb_version
                .as_deref()
                .unwrap_or("(version unknown)"),
            opts.max_connections
        ));

        if opts.with_sluice {
            let sluice = SluiceProcess::start(&opts.sluice_bin, backend, creds, &opts.sluice_log)?;
            topology.passthrough = Some(Target {
                host: "127.0.0.1".into(),
                port: sluice.port,
            });
            topology.sluice_pid = Some(sluice.child.id());
            topology.sluice_command = Some(sluice.command.clone());
            topology.description.push(format!(
                "Sluice: child process (pid {}) on 127.0.0.1:{}, log {}",
                sluice.child.id(),
                sluice.port,
                opts.sluice_log.display()
            ));
            topology.sluice = Some(sluice);
        }
        Ok(topology)
    }

    /// Servers that already run; checks that each accepts TCP connections.
    pub fn external(
        direct: Option<Target>,
        passthrough: Option<Target>,
        sluice_pid: Option<u32>,
    ) -> anyhow::Result<Topology> {
        let mut description = Vec::new();
        if let Some(target) = &direct {
            check_reachable(target, "the direct target (--mysql-host/--mysql-port)")?;
            description.push(format!("database: existing server at {target}"));
        }
        if let Some(target) = &passthrough {
            check_reachable(target, "the Sluice target (--sluice-host/--sluice-port)")?;
            description.push(format!("Sluice: existing instance at {target}"));
        }
        if let Some(pid) = sluice_pid {
            cpu_ticks(pid)
                .with_context(|| format!("reading the CPU time of --sluice-pid {pid}"))?;
            description.push(format!("Sluice CPU time read from /proc/{pid}/stat"));
        }
        Ok(Topology {
            direct,
            passthrough,
            sluice_pid,
            sluice_command: None,
            mariadb_version: None,
            description,
            sluice: None,
            mariadb: None,
        })
    }

    /// Whether the Sluice child this topology started is still running; the error says
    /// how it ended, with the tail of its log. Always Ok for an external Sluice.
    pub fn check_sluice(&mut self) -> Result<(), String> {
        match &mut self.sluice {
            Some(sluice) => sluice.check(),
            None => Ok(()),
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Some(sluice) = self.sluice.take() {
            sluice.stop();
        }
        if let Some(mariadb) = self.mariadb.take() {
            mariadb.stop();
        }
    }
}

/// `sluice serve` running as a child of the benchmark.
struct SluiceProcess {
    child: Child,
    port: u16,
    log: PathBuf,
    command: String,
}

impl SluiceProcess {
    /// How long Sluice gets to start listening.
    const START_TIMEOUT: Duration = Duration::from_secs(20);

    fn start(
        bin: &Path,
        backend: SocketAddr,
        creds: &Credentials,
        log: &Path,
    ) -> anyhow::Result<SluiceProcess> {
        let port = sandbox::free_port();
        let args = vec![
            "serve".to_string(),
            "--listen".to_string(),
            format!("127.0.0.1:{port}"),
            "--backend".to_string(),
            backend.to_string(),
            "--user".to_string(),
            format!("{}:{}", creds.user, creds.password),
        ];
        let command = std::iter::once(bin.to_string_lossy().into_owned())
            .chain(args.iter().cloned())
            .map(|w| shell_quote(&w))
            .collect::<Vec<_>>()
            .join(" ");
        let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = with_raised_nofile(bin, &args)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting Sluice ({command})"))?;
        let mut sluice = SluiceProcess {
            child,
            port,
            log: log.to_path_buf(),
            command,
        };

        let started = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Err(ended) = sluice.check() {
                bail!("Sluice did not start: {ended}");
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(sluice);
            }
            if started.elapsed() > Self::START_TIMEOUT {
                let msg = format!(
                    "Sluice did not listen on {addr} within {:?}; last lines of {}:\n{}",
                    Self::START_TIMEOUT,
                    sluice.log.display(),
                    sluice.log_tail()
                );
                sluice.stop();
                bail!(msg);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn check(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "Sluice exited ({status}); last lines of {}:\n{}",
                self.log.display(),
                self.log_tail()
            )),
            Err(e) => Err(format!("cannot check on Sluice: {e}")),
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        tail(&text, 10)
    }

    /// SIGTERM for a graceful shutdown, then SIGKILL if it has not exited in 5 s.
    fn stop(mut self) {
        if matches!(self.child.try_wait(), Ok(None))
            && sandbox::send_signal(self.child.id(), "TERM").is_ok()
            && matches!(
                sandbox::wait_child(&mut self.child, Duration::from_secs(5)),
                Ok(Some(_))
            )
        {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn check_reachable(target: &Target, what: &str) -> anyhow::Result<()> {
    let addrs: Vec<SocketAddr> = (target.host.as_str(), target.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {what} {target}"))?
        .collect();
    let mut last = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, Duration::from_secs(3)) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => bail!("cannot reach {what} at {target}: {e}"),
        None => bail!("{what} {target} resolves to no address"),
    }
}

/// User plus system CPU time of a process, all threads, in clock ticks: fields 14 and 15
/// of `/proc/<pid>/stat`.
pub fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_cpu_ticks(&stat).with_context(|| format!("unexpected contents of {path}"))
}

fn parse_cpu_ticks(stat: &str) -> anyhow::Result<u64> {
    // Field 2 is the command name in parentheses and may itself contain spaces and
    // parentheses; the fields after the last ')' start at field 3.
    let after = &stat[stat.rfind(')').context("no ')' after the command name")? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> anyhow::Result<u64> {
        let text = fields.get(n - 3).with_context(|| format!("no field {n}"))?;
        text.parse()
            .with_context(|| format!("field {n} is {text:?}"))
    };
    Ok(field(14)? + field(15)?)
}

/// Clock ticks per second (`getconf CLK_TCK`), 100 when that cannot be read.
pub fn clock_ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

fn sql_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_from_proc_stat() {
        // A real line from /proc/<pid>/stat, with a command name that has a space and
        // a parenthesis in it.
        let stat = "4242 (sluice (x) y) S 1 4242 4242 0 -1 4194560 1514 0 0 0 \
                    731 129 0 0 20 0 5 0 123456 123456789 2345 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat).unwrap(), 731 + 129);
        assert!(parse_cpu_ticks("4242 (sluice) S 1 2").is_err());
        assert!(parse_cpu_ticks("garbage").is_err());
    }

    #[test]
    fn own_cpu_time_is_readable() {
        let ticks = cpu_ticks(std::process::id()).unwrap();
        // Burn some CPU; the clock must not go backwards.
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_ticks(std::process::id()).unwrap() >= ticks);
        assert!(clock_ticks_per_sec() >= 1);
    }

    #[test]
    fn sql_quoting() {
        assert_eq!(sql_string("it's"), "'it''s'");
        assert_eq!(sql_string(r"a\b"), r"'a\\b'");
        assert_eq!(sql_ident("sb`t"), "`sb``t`");
    }
}
