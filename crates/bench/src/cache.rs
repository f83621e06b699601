//! `sluice bench cache`, also what `sluice bench` alone runs: the end-to-end benchmark
//! of the published caching-proxy reports. The same workload runs straight at MariaDB
//! (direct), through Sluice with no cache rules (passthrough) and through Sluice caching
//! every read (cached), the scenarios taking turns at every step of a thread ramp; then
//! the mysqlslap insert series, direct and through Sluice. The report sets throughput,
//! total reads, latency and the proxy's CPU cost side by side. On request a fourth
//! scenario (cached_by_table) caches as cached does with row-level invalidation turned
//! off, so that one interleaved run compares the cache before and after it; and a
//! pass-through Sluice with multiplexing off (dedicated), a backend connection per
//! client, which sets what multiplexing costs against what it replaces; and pass-through
//! Sluices tracing 1% (traced) and every statement (traced_all) to a real receiver, set
//! against passthrough (tracing off). When the cached scenario runs, the report also says
//! how stale its cache is after a commit made straight on the database ([`staleness`]).
//!
//! This module turns the flags into a [`Plan`]; [`measure`] runs it, filing every run in
//! a [`Report`](crate::report::Report) that [`render`](crate::render) presents.

mod available;
mod cpu;
mod measure;
mod progress;
pub mod staleness;
mod targets;
mod traced;

pub use measure::run;

use std::fmt;
use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::report::{InsertSettings, Unavailable};
use crate::sysbench::{DataSet, PsMode, Workload};
use crate::topology::{self, Role, SluiceTarget, Target, Topology};
use crate::{dedup, CommonArgs, Resolved, ServerArgs, Sizes};
use targets::Targets;

/// Flags of `sluice bench cache` (and of `sluice bench` with no scenario).
///
/// By default the benchmark starts its own MariaDB (a sandbox) and two Sluice processes
/// (this binary, `serve`: one pass-through, one caching; one more for each of
/// cached_by_table and dedicated when asked for), creates the data with `sysbench
/// prepare`, runs every workload's thread ramp and the insert series, and removes
/// everything. With --mysql-*, --sluice-*, --cached-*, --dedicated-* or --haproxy-*
/// host/port flags it targets servers that already run instead, and starts nothing. Its
/// defaults are in the `Scenario::Cache` help.
#[derive(clap::Args, Debug, Clone)]
pub struct CacheArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub server: ServerArgs,

    /// Scenarios to run, in this order at every step [default: direct,passthrough,cached;
    /// with existing servers, those given]. `cached` needs a Sluice with a query cache;
    /// `cached_by_table` (only when asked for) caches the same reads with `by_key = false`,
    /// any write to a table dropping all its entries, and needs a Sluice that has that
    /// option. `dedicated` (only when asked for) is passthrough with `multiplex = false` in
    /// `[pool]`, a backend connection per client, the baseline passthrough's CPU per
    /// statement is set against. `haproxy` (only when asked for) relays TCP through HAProxy
    /// (--haproxy), the baseline Sluice's CPU per statement is set against. `traced` and
    /// `traced_all` (only when asked for) are passthrough with `[tracing]` at
    /// `sample_ratio` 0.01 and 1.0, exporting to a Jaeger the benchmark starts (or
    /// --otlp-endpoint), their CPU per statement set against passthrough's. A scenario
    /// that cannot run here is reported as not available.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenarios: Option<Vec<Scenario>>,

    /// Workloads, in order [default: oltp_read_only,oltp_point_select,
    /// oltp_read_write_split,insert; demo: oltp_read_only,oltp_point_select].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Option<Vec<Workload>>,

    /// sysbench --db-ps-mode values: auto (prepared statements) and/or disable (text
    /// protocol) [default: auto].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ps_modes: Option<Vec<PsMode>>,

    /// Transaction lengths of the insert series (inserts per COMMIT).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "1,10,100,1000"
    )]
    pub insert_trx: Vec<u32>,

    /// Rows each insert run writes, over all clients (the published run: 1000000).
    #[arg(long, default_value_t = 100_000)]
    pub insert_rows: u64,

    /// Concurrent mysqlslap clients of the insert series.
    #[arg(long, default_value_t = 16)]
    pub insert_clients: u32,

    /// Host of an existing Sluice with no cache rules, for the passthrough scenario, or
    /// the path of its Unix socket (`[[listeners]] socket`) [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub sluice_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub sluice_port: Option<u16>,

    /// Process id of that Sluice, to measure its CPU time per query (same machine).
    #[arg(long, value_name = "PID")]
    pub sluice_pid: Option<u32>,

    /// Host of an existing Sluice that caches every read, for the cached scenario, or the
    /// path of its Unix socket [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub cached_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub cached_port: Option<u16>,

    /// Process id of the caching Sluice, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub cached_pid: Option<u32>,

    /// Host of an existing Sluice that caches every read with `by_key = false` in its
    /// `[cache]` section, for the cached_by_table scenario, or the path of its Unix
    /// socket [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub cached_by_table_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub cached_by_table_port: Option<u16>,

    /// Process id of that Sluice, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub cached_by_table_pid: Option<u32>,

    /// Host of an existing Sluice with no cache rules and `multiplex = false` in its
    /// `[pool]` section, for the dedicated scenario, or the path of its Unix socket
    /// [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub dedicated_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub dedicated_port: Option<u16>,

    /// Process id of that Sluice, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub dedicated_pid: Option<u32>,

    /// The HAProxy program the haproxy scenario starts in front of the database.
    #[arg(long, default_value = "haproxy", value_name = "PATH")]
    pub haproxy: PathBuf,

    /// Host of an existing TCP proxy in front of the database, for the haproxy scenario
    /// [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub haproxy_host: Option<String>,

    /// Port of that proxy [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub haproxy_port: Option<u16>,

    /// Process id of that proxy, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub haproxy_pid: Option<u32>,

    /// OTLP/HTTP endpoint of an existing trace receiver for the embedded traced
    /// Sluices ("http://127.0.0.1:4318") [default: a Jaeger the benchmark starts, from
    /// the workspace's .tools/bin (`make deps`) or $PATH].
    #[arg(long, value_name = "URL", conflicts_with_all = ["traced_host", "traced_port",
        "traced_all_host", "traced_all_port"])]
    pub otlp_endpoint: Option<String>,

    /// Host of an existing pass-through Sluice with `[tracing]` at some sample_ratio
    /// (1% for the figures of docs/BENCHMARKS.md), for the traced scenario, or the path
    /// of its Unix socket [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub traced_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub traced_port: Option<u16>,

    /// Process id of that Sluice, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub traced_pid: Option<u32>,

    /// Host of an existing pass-through Sluice tracing every statement
    /// (`sample_ratio = 1.0`), for the traced_all scenario, or the path of its Unix
    /// socket [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub traced_all_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub traced_all_port: Option<u16>,

    /// Process id of that Sluice, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub traced_all_pid: Option<u32>,

    #[command(flatten)]
    pub staleness: staleness::StalenessArgs,

    /// Schema the insert series creates, fills and drops: never one that holds data.
    #[arg(long, default_value = "sluice_slap")]
    pub insert_schema: String,

    /// The mysqlslap program.
    #[arg(long, default_value = "mysqlslap", value_name = "PATH")]
    pub mysqlslap: PathBuf,

    /// max_connections of the embedded MariaDB [default: 4 x the largest thread count
    /// + 100, at least 500].
    #[arg(long)]
    pub max_connections: Option<u32>,

    /// Use the sysbench tables already there: no prepare, no cleanup. Without it, an
    /// existing server first loses any leftover sysbench tables (sbtest1..N) of --mysql-db.
    #[arg(long)]
    pub skip_prepare: bool,

    /// Leave the sysbench tables in place at the end.
    #[arg(long)]
    pub keep_data: bool,

    /// The client, each Sluice and MariaDB on simulated hosts of their own: every hop
    /// between them (client to MariaDB, client to Sluice, Sluice to MariaDB) goes through
    /// a delay link of --hop each way, so that Sluice's extra hop shows as on a network.
    /// Embedded servers only.
    #[arg(long, conflicts_with_all = [
        "mysql_host", "mysql_port", "sluice_host", "sluice_port", "cached_host", "cached_port",
        "cached_by_table_host", "cached_by_table_port", "dedicated_host", "dedicated_port",
        "haproxy_host", "haproxy_port", "traced_host", "traced_port", "traced_all_host",
        "traced_all_port",
    ])]
    pub hosts: bool,

    /// One-way delay of each hop with --hosts ("100us", "0.5ms").
    #[arg(long, value_parser = humantime::parse_duration, default_value = "100us", requires = "hosts")]
    pub hop: std::time::Duration,

    /// CPUs of the embedded MariaDB ("0", "0-1"), as `taskset -c` takes them; sysbench,
    /// mysqlslap and every Sluice run on the others. The database then has cores of its
    /// own, as on a machine of its own, instead of sharing every core with the load
    /// generator and the proxy. Embedded servers only.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus, conflicts_with_all = [
        "mysql_host", "mysql_port", "sluice_host", "sluice_port", "cached_host", "cached_port",
        "cached_by_table_host", "cached_by_table_port", "dedicated_host", "dedicated_port",
        "haproxy_host", "haproxy_port", "traced_host", "traced_port", "traced_all_host",
        "traced_all_port",
    ])]
    pub server_cpus: Option<CpuList>,

    /// Replicas behind the embedded MariaDB, replicating from it: every Sluice then splits
    /// reads over them as configured by default (reads outside transactions to the
    /// replicas), while direct and haproxy stay on the primary. Embedded servers only,
    /// without --hosts and --server-cpus.
    #[arg(long, default_value_t = 0, conflicts_with_all = [
        "hosts", "server_cpus",
        "mysql_host", "mysql_port", "sluice_host", "sluice_port", "cached_host", "cached_port",
        "cached_by_table_host", "cached_by_table_port", "dedicated_host", "dedicated_port",
        "haproxy_host", "haproxy_port", "traced_host", "traced_port", "traced_all_host",
        "traced_all_port",
    ])]
    pub replicas: usize,
}

/// A CPU list given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

fn parse_cpus(text: &str) -> Result<CpuList, String> {
    sluice_sandbox::cpus::parse_list(text)
        .map(CpuList)
        .map_err(|e| format!("{e:#}"))
}

/// Where the load goes.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// Straight to the database.
    Direct,
    /// Through Sluice, no caching.
    Passthrough,
    /// As passthrough, with `multiplex = false`: each client keeps a backend connection
    /// of its own (only when asked for).
    Dedicated,
    /// Through Sluice with every read cached.
    Cached,
    /// As cached, with `by_key = false`: any write to a table drops all its entries.
    #[value(name = "cached_by_table", alias = "cached-by-table")]
    #[serde(rename = "cached_by_table")]
    CachedByTable,
    /// Through HAProxy relaying TCP to the same database: the baseline a statement's cost
    /// through Sluice is set against (only when asked for).
    Haproxy,
    /// As passthrough, tracing 1% of statements (`sample_ratio = 0.01`) to a real
    /// receiver (only when asked for).
    Traced,
    /// As passthrough, tracing every statement (only when asked for).
    #[value(name = "traced_all", alias = "traced-all")]
    #[serde(rename = "traced_all")]
    TracedAll,
}

impl Scenario {
    /// Whether the scenario's Sluice caches reads: its throughput is also set against
    /// pass-through's, and it has no part in the insert series (nothing to serve there).
    pub fn caches(self) -> bool {
        matches!(self, Scenario::Cached | Scenario::CachedByTable)
    }

    /// Whether the scenario's Sluice traces statements: its CPU per statement and its
    /// throughput are set against pass-through's (tracing off).
    pub fn traces(self) -> bool {
        matches!(self, Scenario::Traced | Scenario::TracedAll)
    }

    /// The embedded Sluice's part, for the scenarios that have one.
    pub fn role(self) -> Option<Role> {
        match self {
            Scenario::Direct | Scenario::Haproxy => None,
            Scenario::Passthrough => Some(Role::Passthrough),
            Scenario::Dedicated => Some(Role::Dedicated),
            Scenario::Cached => Some(Role::Cached),
            Scenario::CachedByTable => Some(Role::CachedByTable),
            Scenario::Traced => Some(Role::Traced),
            Scenario::TracedAll => Some(Role::TracedAll),
        }
    }

    /// Whether the load goes through a Sluice.
    pub fn is_sluice(self) -> bool {
        !matches!(self, Scenario::Direct | Scenario::Haproxy)
    }

    /// The program whose CPU time the scenario measures, if any.
    pub fn proxy(self) -> Option<&'static str> {
        match self {
            Scenario::Direct => None,
            Scenario::Haproxy => Some("HAProxy"),
            _ => Some("Sluice"),
        }
    }

    /// The proxy the scenario's load goes through in `topology`, if it has one there.
    fn proxy_in(self, topology: &Topology) -> Option<&SluiceTarget> {
        match self {
            Scenario::Direct => None,
            Scenario::Passthrough => topology.passthrough.as_ref(),
            Scenario::Dedicated => topology.dedicated.as_ref(),
            Scenario::Cached => topology.cached.as_ref(),
            Scenario::CachedByTable => topology.cached_by_table.as_ref(),
            Scenario::Haproxy => topology.haproxy.as_ref(),
            Scenario::Traced => topology.traced.as_ref(),
            Scenario::TracedAll => topology.traced_all.as_ref(),
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scenario::Direct => "direct",
            Scenario::Passthrough => "passthrough",
            Scenario::Dedicated => "dedicated",
            Scenario::Cached => "cached",
            Scenario::CachedByTable => "cached-by-table",
            Scenario::Haproxy => "haproxy",
            Scenario::Traced => "traced",
            Scenario::TracedAll => "traced-all",
        })
    }
}

/// The flags resolved into what will run.
#[derive(Debug, Clone)]
struct Plan {
    /// Every scenario asked for, in order.
    scenarios: Vec<Scenario>,
    /// Asked for but impossible here (no query cache): reported, never run.
    unavailable: Vec<Unavailable>,
    workloads: Vec<Workload>,
    ps_modes: Vec<PsMode>,
    threads: Vec<u32>,
    duration_secs: u64,
    repeat: u32,
    data: DataSet,
    insert: Option<InsertSettings>,
    out_dir: PathBuf,
    /// External targets; all `None` for the embedded topology.
    direct: Option<Target>,
    passthrough: Option<SluiceTarget>,
    cached: Option<SluiceTarget>,
    cached_by_table: Option<SluiceTarget>,
    dedicated: Option<SluiceTarget>,
    haproxy: Option<SluiceTarget>,
    traced: Option<SluiceTarget>,
    traced_all: Option<SluiceTarget>,
    /// The receiver the embedded traced Sluices export to, when not a Jaeger of our own.
    otlp_endpoint: Option<String>,
    /// The HAProxy the embedded run starts, once found.
    haproxy_program: Option<crate::topology::haproxy::Program>,
    max_connections: u32,
    /// The staleness measurement, when the cached scenario runs and it is not skipped.
    staleness: Option<staleness::Settings>,
    notes: Vec<String>,
}

impl Plan {
    fn resolve(args: &CacheArgs, now: SystemTime) -> anyhow::Result<Plan> {
        let mut notes = Vec::new();
        let targets = Targets::from_args(args)?;
        let external = targets.external();
        let scenarios = targets.scenarios(args.scenarios.as_deref())?;

        let demo = args.common.demo;
        let workloads = dedup(args.workloads.as_deref().unwrap_or(default_workloads(demo)));
        let ps_modes = dedup(args.ps_modes.as_deref().unwrap_or(&[PsMode::Auto]));
        let Resolved {
            threads,
            duration,
            data,
        } = args.common.resolve(&Sizes {
            threads: [&[1, 4, 8, 16, 32, 64, 128, 256], &[1, 4, 16]],
            seconds: [30, 5],
            tables: [64, 4],
            table_size: [10_000, 10_000],
        })?;
        if workloads.is_empty() || ps_modes.is_empty() {
            bail!("--workloads and --ps-modes need at least one value each");
        }
        let insert = if workloads.contains(&Workload::Insert) {
            Some(insert_settings(args, &scenarios)?)
        } else {
            None
        };
        let max_threads = *threads.iter().max().expect("not empty");
        let max_connections = args.max_connections.unwrap_or_else(|| {
            // Room for sysbench's connections, each Sluice's backend connections (which
            // may outlive a step in its pool) and the admin.
            max_threads.saturating_mul(4).saturating_add(100).max(500)
        });
        if let Some(note) = descriptor_shortage(max_threads, hard_nofile_limit()) {
            notes.push(note);
        }
        if ps_modes.contains(&PsMode::Auto) && workloads.iter().any(|w| w.is_sysbench()) {
            let needed = prepared_statements_needed(data.tables, max_threads);
            if external {
                notes.push(format!(
                    "with prepared statements, sysbench needs max_prepared_stmt_count of at \
                     least {needed} on the database ({} tables x {max_threads} threads x up to \
                     9 statements); a lower limit fails the run with error 1461",
                    data.tables
                ));
            } else if needed > topology::MAX_PREPARED_STMT_COUNT {
                notes.push(format!(
                    "with prepared statements, {} tables at {max_threads} threads need about \
                     {needed} server-side statements, more than MariaDB allows ({}): those \
                     steps will fail with error 1461; use fewer --tables or --ps-modes disable",
                    data.tables,
                    topology::MAX_PREPARED_STMT_COUNT
                ));
            }
        }
        if external && scenarios.contains(&Scenario::Direct) {
            notes.push(format!(
                "the existing database needs max_connections of at least {} for the top of \
                 the ramp, plus what each Sluice in front of it keeps open (not checked)",
                max_threads + 10
            ));
        }
        let out_dir = args
            .common
            .out
            .clone()
            .unwrap_or_else(|| args.common.out_dir("cache", now));
        let stale = staleness::Settings::resolve(&args.staleness, demo, &scenarios)?;
        Ok(Plan {
            scenarios,
            unavailable: Vec::new(),
            workloads,
            ps_modes,
            threads,
            duration_secs: duration.as_secs(),
            repeat: args.common.repeat,
            data,
            insert,
            out_dir,
            direct: targets.direct,
            passthrough: targets.passthrough,
            cached: targets.cached,
            cached_by_table: targets.cached_by_table,
            dedicated: targets.dedicated,
            haproxy: targets.haproxy,
            traced: targets.traced,
            traced_all: targets.traced_all,
            otlp_endpoint: args.otlp_endpoint.clone(),
            haproxy_program: None,
            max_connections,
            staleness: stale,
            notes,
        })
    }

    fn embedded(&self) -> bool {
        self.direct.is_none()
            && self.passthrough.is_none()
            && self.cached.is_none()
            && self.cached_by_table.is_none()
            && self.dedicated.is_none()
            && self.haproxy.is_none()
            && self.traced.is_none()
            && self.traced_all.is_none()
    }

    fn runnable(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
            && !self.unavailable.iter().any(|u| u.scenario == scenario)
    }

    fn has_sysbench(&self) -> bool {
        self.workloads.iter().any(|w| w.is_sysbench())
    }

    /// Backend connections each embedded Sluice may open: one per sysbench thread (a
    /// session keeps its connection), a margin for connections still closing, and never
    /// fewer than the configuration default.
    fn pool_max(&self) -> u32 {
        let top = self.threads.iter().copied().max().unwrap_or(1);
        let clients = self.insert.as_ref().map_or(0, |i| i.clients);
        top.max(clients).saturating_add(16).max(100)
    }

    /// Every run, in the order they run. For each workload, ps-mode and thread count
    /// (or transaction length), the runnable scenarios take turns, `repeat` times, so
    /// drift of the machine over time hits them alike.
    fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        let scenarios: Vec<Scenario> = self
            .scenarios
            .iter()
            .copied()
            .filter(|s| self.runnable(*s))
            .collect();
        for &workload in &self.workloads {
            if workload == Workload::Insert {
                let Some(insert) = &self.insert else { continue };
                for &per_trx in &insert.per_trx {
                    for repetition in 1..=self.repeat {
                        for &scenario in scenarios.iter().filter(|s| !s.caches()) {
                            steps.push(Step::Insert {
                                per_trx,
                                repetition,
                                scenario,
                            });
                        }
                    }
                }
                continue;
            }
            for &ps_mode in &self.ps_modes {
                for &threads in &self.threads {
                    for repetition in 1..=self.repeat {
                        for &scenario in &scenarios {
                            steps.push(Step::Sysbench {
                                workload,
                                ps_mode,
                                threads,
                                repetition,
                                scenario,
                            });
                        }
                    }
                }
            }
        }
        steps
    }
}

/// One run of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Sysbench {
        workload: Workload,
        ps_mode: PsMode,
        threads: u32,
        /// 1-based.
        repetition: u32,
        scenario: Scenario,
    },
    Insert {
        per_trx: u32,
        repetition: u32,
        scenario: Scenario,
    },
}

impl Step {
    fn scenario(&self) -> Scenario {
        match *self {
            Step::Sysbench { scenario, .. } | Step::Insert { scenario, .. } => scenario,
        }
    }
}

/// The workloads run when --workloads is not given.
fn default_workloads(demo: bool) -> &'static [Workload] {
    match demo {
        true => &[Workload::OltpReadOnly, Workload::OltpPointSelect],
        false => &[
            Workload::OltpReadOnly,
            Workload::OltpPointSelect,
            Workload::OltpReadWriteSplit,
            Workload::Insert,
        ],
    }
}

/// The insert series' settings, checked.
fn insert_settings(args: &CacheArgs, scenarios: &[Scenario]) -> anyhow::Result<InsertSettings> {
    let per_trx = dedup(&args.insert_trx);
    if per_trx.is_empty() || per_trx.contains(&0) {
        bail!("--insert-trx needs one or more transaction lengths of at least 1");
    }
    if args.insert_clients == 0 || args.insert_rows < u64::from(args.insert_clients) {
        bail!("--insert-clients must be at least 1 and --insert-rows at least that many");
    }
    if !scenarios
        .iter()
        .any(|s| matches!(s, Scenario::Direct | Scenario::Passthrough))
    {
        bail!("the insert workload runs direct and passthrough: ask for either scenario");
    }
    if args.insert_schema == args.server.mysql_db {
        bail!("--insert-schema must differ from --mysql-db: mysqlslap drops its schema");
    }
    Ok(InsertSettings {
        clients: args.insert_clients,
        rows: args.insert_rows,
        per_trx,
    })
}

/// Server-side prepared statements sysbench holds at once: up to 9 per table (the reads
/// and writes of oltp_common) in every thread.
fn prepared_statements_needed(tables: u32, threads: u32) -> u64 {
    u64::from(tables) * u64::from(threads) * 9
}

/// The open-files hard limit of this process (children cannot go above it), from
/// `/proc/self/limits`; `None` when unlimited or unreadable.
fn hard_nofile_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    // "Max open files  <soft>  <hard>  files"
    fields.get(fields.len().checked_sub(2)?)?.parse().ok()
}

/// A note when the open-files hard limit is too low for `threads` clients: each Sluice
/// holds a client and a backend socket per thread, sysbench one per thread.
fn descriptor_shortage(threads: u32, hard_limit: Option<u64>) -> Option<String> {
    let needed = u64::from(threads) * 2 + 100;
    let limit = hard_limit?;
    (limit < needed).then(|| {
        format!(
            "the open-files hard limit here is {limit}, and {threads} threads need about \
             {needed} descriptors in Sluice (a client and a backend socket per thread): the \
             top of the ramp may fail with connection errors; raise the hard limit (`ulimit \
             -Hn` as root, or LimitNOFILE= for a service) to run it"
        )
    })
}

#[cfg(test)]
mod tests;
