//! Where the benchmark's load goes: an embedded topology (a sandbox MariaDB and up to
//! four Sluice child processes, pass-through, caching, caching by table and dedicated,
//! all torn down at the end) or servers that already run. Also the proxy's CPU clock,
//! read from `/proc`.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};

mod config;
pub mod haproxy;
mod process;
mod servers;
mod traced;

pub(crate) use config::toml_string;
pub use config::{check_support, sluice_config, Role, TRACED_RATIO};
pub(crate) use process::{SluiceProcess, Successor};
use servers::Servers;
use sluice_sandbox::link::{relay_cost, DelayLink, LinkSpec, LinkStats};
use sluice_sandbox::{self as sandbox, MariaDb, MariaDbOptions};
pub use traced::SpanCount;

/// A host and port sysbench connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.starts_with('/') {
            return write!(f, "{}", self.host);
        }
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The benchmark user, created on the embedded server and given to Sluice.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub user: String,
    pub password: String,
    /// The sysbench tables' database.
    pub database: String,
    /// The schema mysqlslap creates and drops.
    pub insert_schema: String,
}

/// What to start for an embedded run.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    pub max_connections: u32,
    /// Start a pass-through Sluice.
    pub passthrough: bool,
    /// Start a caching Sluice.
    pub cached: bool,
    /// Start a Sluice caching as `cached` does with `by_key = false`.
    pub cached_by_table: bool,
    /// Start a pass-through Sluice with `multiplex = false`.
    pub dedicated: bool,
    /// Start a pass-through Sluice tracing 1% of statements (traced) and one tracing
    /// every statement (traced_all), exporting to `otlp_endpoint` or, without one, to a
    /// Jaeger started for the run.
    pub traced: bool,
    pub traced_all: bool,
    pub otlp_endpoint: Option<String>,
    /// The caching Sluices tail the database's binlog (`[cache.binlog]`), so that a
    /// write straight to the database drops their entries.
    pub binlog: bool,
    /// HAProxy (the program) relaying TCP to the database, for the haproxy scenario.
    pub haproxy: Option<haproxy::Program>,
    /// Backend connections each Sluice may open: at least one per client thread, since
    /// a session keeps its backend connection for its whole life.
    pub pool_max: u32,
    pub sluice_bin: PathBuf,
    /// Where the Sluice configurations and logs go.
    pub dir: PathBuf,
    /// Appended to each Sluice configuration (more sections, e.g. `[limits]`).
    pub extra_config: String,
    /// Client, Sluice and MariaDB on hosts of their own: each hop between them (client
    /// to MariaDB, client to each Sluice, each Sluice to MariaDB) is a delay link.
    pub hop: Option<LinkSpec>,
    /// The CPUs MariaDB runs on; everything else the benchmark starts gets the others.
    pub server_cpus: Option<Vec<usize>>,
    /// Replicas behind the database, whose reads every Sluice splits (0: none). Not
    /// with `hop` or `server_cpus`.
    pub replicas: usize,
}

/// A Sluice the benchmark talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SluiceTarget {
    pub target: Target,
    /// The process whose CPU time is measured, if known.
    pub pid: Option<u32>,
}

/// The proxies of existing servers a topology is given, each when there is one.
#[derive(Debug, Clone, Default)]
pub struct Proxies {
    pub passthrough: Option<SluiceTarget>,
    pub cached: Option<SluiceTarget>,
    pub cached_by_table: Option<SluiceTarget>,
    pub dedicated: Option<SluiceTarget>,
    pub haproxy: Option<SluiceTarget>,
    pub traced: Option<SluiceTarget>,
    pub traced_all: Option<SluiceTarget>,
}

fn micros(d: Duration) -> String {
    format!("{} µs", d.as_micros())
}

/// The server's highest `max_prepared_stmt_count`, which the embedded MariaDB gets.
pub const MAX_PREPARED_STMT_COUNT: u64 = 1_048_576;

/// The servers of one benchmark run. Dropping it stops whatever it started.
pub struct Topology {
    /// The database itself, for the direct scenario.
    pub direct: Option<Target>,
    /// Sluice without cache rules.
    pub passthrough: Option<SluiceTarget>,
    /// Sluice caching every read.
    pub cached: Option<SluiceTarget>,
    /// Sluice caching every read, invalidating by table.
    pub cached_by_table: Option<SluiceTarget>,
    /// Sluice without cache rules or multiplexing.
    pub dedicated: Option<SluiceTarget>,
    /// A TCP proxy in front of the database (its pid read like a Sluice's).
    pub haproxy: Option<SluiceTarget>,
    /// Pass-through Sluices tracing 1% and every statement.
    pub traced: Option<SluiceTarget>,
    pub traced_all: Option<SluiceTarget>,
    /// How each Sluice was started (embedded runs).
    pub sluice_commands: Vec<String>,
    pub mariadb_version: Option<String>,
    /// One line per server, for the report.
    pub description: Vec<String>,
    /// What the report must warn about (limits the machine imposed).
    pub notes: Vec<String>,
    sluices: Vec<SluiceProcess>,
    haproxy_process: Option<haproxy::Haproxy>,
    /// Where the traced Sluices export, and each one's span counters.
    tracing: traced::Tracing,
    servers: Option<Servers>,
    /// The hops between simulated hosts, by what they join.
    links: Vec<(String, DelayLink)>,
    /// The benchmark's own CPUs before --server-cpus took some for MariaDB, given back
    /// when the servers stop (`sluice bench all` runs more benchmarks after).
    cpus_before: Option<Vec<usize>>,
}

/// --server-cpus: MariaDB's CPUs and the others, which the benchmark keeps.
struct CpuSplit {
    before: Vec<usize>,
    server: Vec<usize>,
}

impl CpuSplit {
    /// Pins this process to the CPUs `server` leaves.
    fn pin_self(server: &[usize]) -> anyhow::Result<CpuSplit> {
        use sluice_sandbox::cpus;
        let before = cpus::allowed()?;
        if let Some(c) = server.iter().find(|c| !before.contains(c)) {
            anyhow::bail!(
                "--server-cpus: CPU {c} is not one this process may use ({})",
                cpus::format_list(&before)
            );
        }
        let rest: Vec<usize> = before
            .iter()
            .copied()
            .filter(|c| !server.contains(c))
            .collect();
        if rest.is_empty() {
            anyhow::bail!(
                "--server-cpus: {} leaves no CPU for sysbench and Sluice (this process may use {})",
                cpus::format_list(server),
                cpus::format_list(&before)
            );
        }
        cpus::pin(std::process::id(), &rest).context("pinning the benchmark's own threads")?;
        Ok(CpuSplit {
            before,
            server: server.to_vec(),
        })
    }

    /// As the kernel has them, read back: MariaDB's (`pid`) and the benchmark's own.
    fn describe(&self, pid: u32) -> anyhow::Result<String> {
        use sluice_sandbox::cpus::{allowed, format_list, of};
        Ok(format!(
            "CPUs: MariaDB on {}, the load generators and every Sluice on {} (--server-cpus {})",
            format_list(&of(pid)?),
            format_list(&allowed()?),
            format_list(&self.server),
        ))
    }
}

impl Topology {
    /// Starts a sandbox MariaDB with the benchmark user and database and, if asked, Sluice
    /// in front of it.
    pub fn embedded(opts: &EmbeddedOptions, creds: &Credentials) -> anyhow::Result<Topology> {
        // Pinned before anything starts, so that every process and thread the benchmark
        // starts from here on inherits the CPUs left to it.
        let pinned = match &opts.server_cpus {
            Some(server) => Some(CpuSplit::pin_self(server)?),
            None => None,
        };
        let servers = Servers::start(
            MariaDbOptions {
                max_connections: opts.max_connections,
                // sysbench prepares up to 9 statements per table in every thread: 64
                // tables at 64 threads already pass the default limit of 16,382 (1461).
                extra_args: vec![format!(
                    "--max-prepared-stmt-count={MAX_PREPARED_STMT_COUNT}"
                )],
                ..MariaDbOptions::default()
            },
            opts.replicas,
        )?;
        let mariadb = servers.primary();
        let mut topology = Topology {
            direct: Some(Target {
                host: mariadb.addr().ip().to_string(),
                port: mariadb.port(),
            }),
            passthrough: None,
            cached: None,
            cached_by_table: None,
            dedicated: None,
            traced: None,
            traced_all: None,
            haproxy: None,
            sluice_commands: Vec::new(),
            mariadb_version: None,
            description: Vec::new(),
            notes: Vec::new(),
            sluices: Vec::new(),
            haproxy_process: None,
            tracing: traced::Tracing::default(),
            servers: None,
            links: Vec::new(),
            cpus_before: pinned.as_ref().map(|p| p.before.clone()),
        };
        if let Some(split) = &pinned {
            sluice_sandbox::cpus::pin(mariadb.pid(), &split.server)
                .context("pinning the embedded MariaDB to --server-cpus")?;
            topology.description.push(split.describe(mariadb.pid())?);
        }
        let mut backend = mariadb.addr();
        if let Some(hop) = opts.hop {
            topology.hosts(hop, mariadb.addr())?;
            backend = topology.links[0].1.addr();
        }
        let (described, replicas) = (servers.describe(), servers.replica_addrs());
        let servers = topology.servers.insert(servers);
        let db = servers.primary();

        create_user(db, creds)?;
        // The account replicates: the replicas have it before Sluice connects to them.
        servers.wait_replicas()?;
        let scalar = |sql: &str| {
            db.execute(sql).ok().and_then(|out| {
                out.lines()
                    .map(str::trim)
                    .rfind(|l| !l.is_empty())
                    .map(String::from)
            })
        };
        topology.mariadb_version = scalar("SELECT VERSION()");
        // The server lowers max_connections by itself when it cannot get the file
        // descriptors for them: the top of the ramp would then fail with 1040.
        let granted = scalar("SELECT @@max_connections").and_then(|v| v.parse::<u32>().ok());
        if let Some(granted) = granted.filter(|g| *g < opts.max_connections) {
            topology.notes.push(format!(
                "MariaDB accepted max_connections={granted} of the {} asked for (too few \
                 file descriptors): steps with more clients than that will fail",
                opts.max_connections
            ));
        }
        topology.description.push(format!(
            "MariaDB {}: {described}, max_connections={}",
            topology
                .mariadb_version
                .as_deref()
                .unwrap_or("(version unknown)"),
            granted.unwrap_or(opts.max_connections)
        ));

        topology.start_proxies(opts, creds, backend, &replicas)?;
        Ok(topology)
    }

    /// Starts what `opts` asks for in front of `backend` (and each Sluice in front of
    /// `replicas` too): the trace receiver for the traced Sluices, each Sluice, HAProxy.
    fn start_proxies(
        &mut self,
        opts: &EmbeddedOptions,
        creds: &Credentials,
        backend: SocketAddr,
        replicas: &[SocketAddr],
    ) -> anyhow::Result<()> {
        if opts.traced || opts.traced_all {
            self.tracing = traced::Tracing::start(opts.otlp_endpoint.as_deref())?;
            self.description.push(self.tracing.describe());
        }
        for (wanted, role) in [
            (opts.passthrough, Role::Passthrough),
            (opts.cached, Role::Cached),
            (opts.cached_by_table, Role::CachedByTable),
            (opts.dedicated, Role::Dedicated),
            (opts.traced, Role::Traced),
            (opts.traced_all, Role::TracedAll),
        ] {
            if wanted {
                self.start_sluice(opts, creds, (backend, replicas), role)?;
            }
        }
        if let Some(program) = &opts.haproxy {
            self.start_haproxy(opts, program, backend)?;
        }
        Ok(())
    }

    /// Starts the Sluice of `role` in front of `servers` (the database, then any
    /// replicas), behind a delay link of its own with --hosts.
    fn start_sluice(
        &mut self,
        opts: &EmbeddedOptions,
        creds: &Credentials,
        servers: (SocketAddr, &[SocketAddr]),
        role: Role,
    ) -> anyhow::Result<()> {
        let name = role.name();
        let port = sandbox::free_port();
        let config = opts.dir.join(format!("sluice-{name}.toml"));
        let mut text = sluice_config(port, servers, creds, opts.pool_max, role);
        if opts.binlog && role.caches() {
            text.push_str(&config::binlog_section(creds, role));
        }
        let trace = role
            .sample_ratio()
            .map(|ratio| (ratio, self.tracing.settings()));
        if let Some((ratio, trace)) = &trace {
            text.push_str(&config::tracing_section(*ratio, trace));
        }
        text.push_str(&opts.extra_config);
        std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
        let log = opts.dir.join(format!("sluice-{name}.log"));
        let sluice = SluiceProcess::start(&opts.sluice_bin, &config, port, &log)?;
        let target = self.client_side(
            port,
            sluice.pid(),
            opts.hop,
            format!("client to Sluice ({name})"),
        )?;
        self.description.push(format!(
            "Sluice ({name}): child process (pid {}) on 127.0.0.1:{port}, configuration {}, \
             log {}",
            sluice.pid(),
            config.display(),
            log.display()
        ));
        self.sluice_commands.push(sluice.command.clone());
        let slot = match role {
            Role::Passthrough => &mut self.passthrough,
            Role::Cached => &mut self.cached,
            Role::CachedByTable => &mut self.cached_by_table,
            Role::Dedicated => &mut self.dedicated,
            Role::Traced => &mut self.traced,
            Role::TracedAll => &mut self.traced_all,
        };
        if let Some((_, trace)) = trace {
            self.tracing.watch(role, &trace);
        }
        *slot = Some(target);
        self.sluices.push(sluice);
        Ok(())
    }

    /// How the client reaches a proxy listening on `port`: directly, or with --hosts
    /// through a delay link of its own, named `link` in the report.
    fn client_side(
        &mut self,
        port: u16,
        pid: u32,
        hop: Option<LinkSpec>,
        link: String,
    ) -> anyhow::Result<SluiceTarget> {
        let mut target = SluiceTarget {
            target: Target {
                host: "127.0.0.1".into(),
                port,
            },
            pid: Some(pid),
        };
        if let Some(hop) = hop {
            let listen = SocketAddr::from(([127, 0, 0, 1], port));
            let delay = DelayLink::start(listen, hop).context("starting a delay link")?;
            target.target.port = delay.port();
            self.links.push((link, delay));
        }
        Ok(target)
    }

    /// Puts MariaDB on a simulated host of its own: Sluice reaches it through one link
    /// (the first), the client through another; the client-side links to each Sluice
    /// follow as they start.
    fn hosts(&mut self, hop: LinkSpec, mariadb: SocketAddr) -> anyhow::Result<()> {
        let to_db = DelayLink::start(mariadb, hop).context("starting a delay link")?;
        let direct = DelayLink::start(mariadb, hop).context("starting a delay link")?;
        self.direct = Some(Target {
            host: "127.0.0.1".into(),
            port: direct.port(),
        });
        self.links.push(("Sluice to MariaDB".into(), to_db));
        self.links.push(("client to MariaDB".into(), direct));
        let cost = relay_cost(500).context("measuring a delay link's own cost")?;
        self.description.push(format!(
            "Hosts: the client, each Sluice and MariaDB on simulated hosts of their own; \
             every hop between them a delay link of {} each way{} (round trip {} plus the \
             relay's own {} µs, measured)",
            micros(hop.one_way),
            match hop.jitter.is_zero() {
                true => String::new(),
                false => format!(" ± {}", micros(hop.jitter)),
            },
            micros(2 * hop.one_way),
            cost.as_micros()
        ));
        Ok(())
    }

    /// How each hop between simulated hosts kept its delay, by what it joins.
    pub fn link_stats(&self) -> Vec<(String, LinkStats)> {
        self.links
            .iter()
            .map(|(name, link)| (name.clone(), link.stats()))
            .collect()
    }

    /// The embedded MariaDB's process id, to read its memory.
    pub fn mariadb_pid(&self) -> Option<u32> {
        self.servers.as_ref().map(|s| s.primary().pid())
    }

    /// Runs SQL on the embedded MariaDB as its administrator; the last line of output.
    /// Returns once the replicas (with --replicas) have what the primary logged so far.
    pub fn wait_replicas(&self) -> anyhow::Result<()> {
        self.servers.as_ref().map_or(Ok(()), Servers::wait_replicas)
    }

    /// With --replicas, each server's `Com_select` count now: where reads went.
    pub fn reads_by_server(&self) -> Vec<(String, Option<u64>)> {
        self.servers
            .as_ref()
            .map(Servers::reads)
            .unwrap_or_default()
    }

    pub fn admin_scalar(&self, sql: &str) -> Option<String> {
        let out = self.servers.as_ref()?.primary().execute(sql).ok()?;
        out.lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .map(String::from)
    }

    /// Servers that already run; checks that each accepts TCP connections.
    pub fn external(direct: Option<Target>, proxies: Proxies) -> anyhow::Result<Topology> {
        let mut description = Vec::new();
        if let Some(target) = &direct {
            check_reachable(target, "the direct target (--mysql-host/--mysql-port)")?;
            description.push(format!("database: existing server at {target}"));
        }
        let Proxies {
            passthrough,
            cached,
            cached_by_table,
            dedicated,
            haproxy,
            traced,
            traced_all,
        } = proxies;
        for (sluice, name, flags) in [
            (&passthrough, "passthrough", "--sluice-host/--sluice-port"),
            (&cached, "cached", "--cached-host/--cached-port"),
            (
                &cached_by_table,
                "cached-by-table",
                "--cached-by-table-host/--cached-by-table-port",
            ),
            (&dedicated, "dedicated", "--dedicated-host/--dedicated-port"),
            (&haproxy, "haproxy", "--haproxy-host/--haproxy-port"),
            (&traced, "traced", "--traced-host/--traced-port"),
            (
                &traced_all,
                "traced-all",
                "--traced-all-host/--traced-all-port",
            ),
        ] {
            let Some(sluice) = sluice else { continue };
            let what = match name {
                "haproxy" => "TCP proxy (haproxy)".to_string(),
                _ => format!("Sluice ({name})"),
            };
            check_reachable(&sluice.target, &format!("the {what} ({flags})"))?;
            description.push(format!("{what}: existing instance at {}", sluice.target));
            if let Some(pid) = sluice.pid {
                cpu_ticks(pid)
                    .with_context(|| format!("reading the CPU time of the {what}, pid {pid}"))?;
                description.push(format!("{what} CPU time read from /proc/{pid}/stat"));
            }
        }
        Ok(Topology {
            direct,
            passthrough,
            cached,
            cached_by_table,
            dedicated,
            haproxy,
            traced,
            traced_all,
            sluice_commands: Vec::new(),
            mariadb_version: None,
            description,
            notes: Vec::new(),
            sluices: Vec::new(),
            haproxy_process: None,
            tracing: traced::Tracing::default(),
            servers: None,
            links: Vec::new(),
            cpus_before: None,
        })
    }

    /// The span counters of the traced Sluice of `role` (its `/metrics`), when this
    /// topology started it; `None` for the others and for existing servers.
    pub fn spans(&self, role: Role) -> Option<anyhow::Result<SpanCount>> {
        self.tracing.read(role)
    }

    /// Whether the proxy this topology started with `pid` (a Sluice or HAProxy) still
    /// runs; the error says which one ended and how, with the tail of its log. Always Ok
    /// for external ones.
    pub fn check_proxy(&mut self, pid: Option<u32>) -> Result<(), String> {
        if let Some(haproxy) = self.haproxy_process.as_ref() {
            if Some(haproxy.pid()) == pid {
                return haproxy.check().map_err(|e| format!("{e:#}"));
            }
        }
        match self.sluices.iter_mut().find(|s| Some(s.pid()) == pid) {
            Some(sluice) => sluice.check(),
            None => Ok(()),
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for sluice in self.sluices.drain(..) {
            sluice.stop();
        }
        drop(self.haproxy_process.take());
        if let Some(servers) = self.servers.take() {
            servers.stop();
        }
        if let Some(before) = self.cpus_before.take() {
            if let Err(e) = sluice_sandbox::cpus::pin(std::process::id(), &before) {
                eprintln!("warning: could not give the benchmark its CPUs back: {e:#}");
            }
        }
    }
}

fn check_reachable(target: &Target, what: &str) -> anyhow::Result<()> {
    if target.host.starts_with('/') {
        std::os::unix::net::UnixStream::connect(&target.host)
            .with_context(|| format!("cannot reach {what} at {target}"))?;
        return Ok(());
    }
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

/// Creates the benchmark's database and user on the embedded MariaDB `db`, with what
/// the benchmark does as that user: everything on its databases, and reading the binlog.
fn create_user(db: &MariaDb, creds: &Credentials) -> anyhow::Result<()> {
    let user = sql_string(&creds.user);
    let password = sql_string(&creds.password);
    let database = sql_ident(&creds.database);
    let insert_schema = sql_ident(&creds.insert_schema);
    // '%' alone loses to an anonymous ''@'localhost' account when the server
    // resolves 127.0.0.1 to localhost; the explicit 'localhost' account wins.
    let mut setup = vec![format!("CREATE DATABASE IF NOT EXISTS {database}")];
    for host in ["%", "localhost"] {
        setup.push(format!(
            "CREATE USER IF NOT EXISTS {user}@'{host}' IDENTIFIED BY {password}"
        ));
        for db in [&database, &insert_schema] {
            setup.push(format!("GRANT ALL ON {db}.* TO {user}@'{host}'"));
        }
        // What a caching Sluice's binlog reader needs (REPLICATION CLIENT is BINLOG
        // MONITOR from MariaDB 10.5 on, for SHOW MASTER STATUS).
        setup.push(format!(
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {user}@'{host}'"
        ));
    }
    for sql in &setup {
        db.execute(sql).with_context(|| {
            format!("setting up the benchmark user and database on the embedded MariaDB ({sql})")
        })?;
    }
    // What Sluice's monitor reads replicas' lag with (--replicas). A server before
    // MariaDB 10.5.9 has no such privilege: its monitor then says what it lacks.
    for host in ["%", "localhost"] {
        let _ = db.execute(&format!("GRANT SLAVE MONITOR ON *.* TO {user}@'{host}'"));
    }
    Ok(())
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
