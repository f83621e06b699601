//! HAProxy as the baseline of `sluice bench cache --scenarios haproxy`: a plain TCP relay
//! in front of the same database, measured in the same interleaved run as Sluice, so that
//! what a statement costs through Sluice is set against what relaying its bytes costs a
//! well-tuned TCP proxy on the same machine at the same time.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sluice_sandbox as sandbox;

use super::EmbeddedOptions;

/// Where Debian installs it, for a PATH without the sbin directories.
const DEBIAN_PATH: &str = "/usr/sbin/haproxy";

/// How long HAProxy gets to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// An HAProxy program that runs, with its version.
#[derive(Debug, Clone)]
pub struct Program {
    pub path: PathBuf,
    pub version: String,
}

/// The program to run for `asked`: itself when it runs, else Debian's when `asked` is the
/// bare name and that one runs. The error says how to get one.
pub fn find(asked: &Path) -> anyhow::Result<Program> {
    let mut tried = vec![asked.to_path_buf()];
    if asked == Path::new("haproxy") {
        tried.push(PathBuf::from(DEBIAN_PATH));
    }
    for path in tried {
        if let Ok(version) = version(&path) {
            return Ok(Program { path, version });
        }
    }
    bail!(
        "HAProxy not found ({}): install it (Debian: apt-get install haproxy) or name it with \
         --haproxy",
        asked.display()
    )
}

/// The first line of `haproxy -v`, e.g. "HAProxy version 2.6.12-1+deb12u4 2026/10/17".
fn version(program: &Path) -> anyhow::Result<String> {
    let out = Command::new(program)
        .arg("-v")
        .output()
        .with_context(|| format!("running {} -v", program.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next() {
        Some(line) if out.status.success() && line.starts_with("HAProxy") => {
            Ok(line.split(" - ").next().unwrap_or(line).trim().to_string())
        }
        _ => bail!("{} -v did not print HAProxy's version", program.display()),
    }
}

/// The configuration: one TCP listener relaying to `backend`, as one would put HAProxy
/// in front of MySQL. Threads are left to HAProxy (one per CPU it may use), logging is
/// off, and the timeouts are longer than any run so that no idle client is cut.
pub fn config(port: u16, backend: SocketAddr, maxconn: u32) -> String {
    format!(
        "# Written by sluice bench: a TCP relay to the database, the baseline beside Sluice.\n\
         global\n    \
             maxconn {maxconn}\n\
         \n\
         defaults\n    \
             mode tcp\n    \
             maxconn {maxconn}\n    \
             timeout connect 5s\n    \
             timeout client 1h\n    \
             timeout server 1h\n\
         \n\
         listen mysql\n    \
             bind 127.0.0.1:{port}\n    \
             server database {backend}\n"
    )
}

/// HAProxy started by the benchmark, under the sandbox's watchdog (stopped with the
/// benchmark however that ends).
pub struct Haproxy {
    process: sandbox::Supervised,
    log: PathBuf,
    /// How it was started, as a shell would take it.
    pub command: String,
    pub version: String,
}

impl Haproxy {
    /// Writes the configuration into `dir` and starts `program` in the foreground on
    /// `port`; returns once it accepts connections.
    pub fn start(
        program: &Program,
        dir: &Path,
        port: u16,
        backend: SocketAddr,
        maxconn: u32,
    ) -> anyhow::Result<Haproxy> {
        let version = program.version.clone();
        let program = program.path.as_path();
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, self::config(port, backend, maxconn))
            .with_context(|| format!("writing {}", config.display()))?;
        let log = dir.join("haproxy.log");
        // -db: in the foreground, one process (its threads within), whose CPU time is
        // the whole relay's.
        let args: Vec<std::ffi::OsString> = vec!["-db".into(), "-f".into(), config.clone().into()];
        let command = format!("{} -db -f {}", program.display(), config.display());
        let process = sandbox::Supervised::spawn_program(program, &args, None, &log)
            .with_context(|| format!("starting HAProxy ({command})"))?;
        let haproxy = Haproxy {
            process,
            log,
            command,
            version,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let started = Instant::now();
        loop {
            haproxy.check()?;
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(haproxy);
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "HAProxy did not listen on {addr} within {START_TIMEOUT:?}; its output ({}):\n{}",
                    haproxy.log.display(),
                    haproxy.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Whether it still runs; the error gives its output.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.process.running() {
            return Ok(());
        }
        bail!(
            "HAProxy exited; its output ({}):\n{}",
            self.log.display(),
            self.output()
        )
    }

    fn output(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        self.process.stop();
    }
}

impl super::Topology {
    /// Starts HAProxy relaying TCP to `backend`, behind a delay link of its own with
    /// --hosts, as a Sluice is.
    pub(super) fn start_haproxy(
        &mut self,
        opts: &EmbeddedOptions,
        program: &Program,
        backend: SocketAddr,
    ) -> anyhow::Result<()> {
        let port = sandbox::free_port();
        // Room for every client at the top of the ramp, as the database has.
        let maxconn = opts.max_connections;
        let haproxy = Haproxy::start(program, &opts.dir, port, backend, maxconn)?;
        let target = self.client_side(port, haproxy.pid(), opts.hop, "client to HAProxy".into())?;
        self.description.push(format!(
            "{}: child process (pid {}) on 127.0.0.1:{port}, TCP mode, one thread per CPU, \
             configuration {}",
            haproxy.version,
            haproxy.pid(),
            opts.dir.join("haproxy.cfg").display()
        ));
        self.sluice_commands.push(haproxy.command.clone());
        self.haproxy = Some(target);
        self.haproxy_process = Some(haproxy);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_relays_the_port_to_the_database_over_tcp() {
        let text = config(6033, "127.0.0.1:3306".parse().unwrap(), 4000);
        for line in [
            "mode tcp",
            "bind 127.0.0.1:6033",
            "server database 127.0.0.1:3306",
            "maxconn 4000",
            "timeout client 1h",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        // Nothing that would make HAProxy look into the protocol or log each connection.
        assert!(
            !text.contains("mode http") && !text.contains("log "),
            "{text}"
        );
    }

    #[test]
    fn a_missing_program_is_named_with_how_to_install_it() {
        let e = find(Path::new("/nonexistent/haproxy")).unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("/nonexistent/haproxy"), "{msg}");
        assert!(msg.contains("apt-get install haproxy"), "{msg}");
    }
}
