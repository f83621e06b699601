//! Sluice's end-to-end benchmarks, run by the `sluice` binary from outside the proxy:
//! `bench cache` (this root, also plain `bench`), `bench mux` ([`mux`]) and `bench routing`
//! ([`routing`]).
//!
//! `sluice bench`: the end-to-end benchmark of the published caching-proxy reports. The
//! same workload runs straight at MariaDB (direct), through Sluice with no cache rules
//! (passthrough) and through Sluice caching every read (cached), the scenarios taking
//! turns at every step of a thread ramp; then the mysqlslap insert series, direct and
//! through Sluice. The report sets throughput, total reads, latency and the proxy's CPU
//! cost side by side. Not on the request path: it exercises it from outside.
//!
//! [`topology`] starts or finds the servers, [`sysbench`] and [`mysqlslap`] run and parse
//! the load generators, [`report`] keeps every run and its summary, [`render`] and
//! [`chart`] turn them into tables, charts, Markdown and HTML.

mod chart;
pub mod mux;
mod mysqlslap;
mod render;
mod report;
pub mod routing;
mod sysbench;
mod tool;
mod topology;

use std::fmt;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use mysqlslap::{InsertSpec, SlapCommand};
use report::{
    Commands, InsertRecord, InsertSettings, InsertStats, Machine, Outcome, Report, RunRecord,
    Settings, Status, Unavailable,
};
use sysbench::{DataSet, Endpoint, Interval, PsMode, RunSpec, SysbenchCommand, Workload};
use topology::{Credentials, EmbeddedOptions, SluiceTarget, Target, Topology};

/// Flags of `sluice bench`.
///
/// By default the benchmark starts its own MariaDB (a sandbox) and two Sluice processes
/// (this binary, `serve`: one pass-through, one caching), creates the data with
/// `sysbench prepare`, runs every workload's thread ramp and the insert series, and
/// removes everything. With --mysql-*, --sluice-* or --cached-* host/port flags it targets
/// servers that already run instead, and starts nothing.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// A short run (under 3 minutes on 2 cores): embedded servers, all three scenarios,
    /// oltp_read_only and oltp_point_select, threads 1,4,16, 5 s per step, 4 tables x
    /// 10,000 rows. Flags given explicitly still apply.
    #[arg(long, conflicts_with_all = [
        "mysql_host", "mysql_port", "sluice_host", "sluice_port", "cached_host", "cached_port"
    ])]
    pub demo: bool,

    /// Scenarios to run, in this order at every step [default: direct,passthrough,cached;
    /// with existing servers, those given]. `cached` needs a Sluice with a query cache;
    /// without one it is reported as not available.
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

    /// Thread ramp, comma-separated, up to 2048 or more [default:
    /// 1,4,8,16,32,64,128,256; demo: 1,4,16].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub threads: Option<Vec<u32>>,

    /// Duration of each sysbench run, whole seconds ("30s", "10m") [default: 30s; demo: 5s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,

    /// Runs per scenario at each step, alternating scenarios; the report shows medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,

    /// Number of sysbench tables [default: 64; demo: 4].
    #[arg(long)]
    pub tables: Option<u32>,

    /// Rows per table [default: 10000].
    #[arg(long)]
    pub table_size: Option<u64>,

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

    /// Output directory [default: bench-results/<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Host of an existing database server for the direct scenario, or the path of its
    /// Unix socket (starting with `/`; the port is then unused). This or any other
    /// host/port flag targets existing servers instead of starting any [default:
    /// 127.0.0.1].
    #[arg(long, value_name = "HOST")]
    pub mysql_host: Option<String>,

    /// Port of that database server [default: 3306].
    #[arg(long, value_name = "PORT")]
    pub mysql_port: Option<u16>,

    /// Host of an existing Sluice with no cache rules, for the passthrough scenario, or
    /// the path of its Unix socket (`[[listeners]] socket`) [default: 127.0.0.1].
    #[arg(long, value_name = "HOST")]
    pub sluice_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT")]
    pub sluice_port: Option<u16>,

    /// Process id of that Sluice, to measure its CPU time per query (same machine).
    #[arg(long, value_name = "PID")]
    pub sluice_pid: Option<u32>,

    /// Host of an existing Sluice that caches every read, for the cached scenario, or the
    /// path of its Unix socket [default: 127.0.0.1].
    #[arg(long, value_name = "HOST")]
    pub cached_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT")]
    pub cached_port: Option<u16>,

    /// Process id of the caching Sluice, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub cached_pid: Option<u32>,

    /// User the load generators connect as (created on the embedded server).
    #[arg(long, default_value = "sbtest")]
    pub mysql_user: String,

    /// That user's password.
    #[arg(
        long,
        default_value = "sbtest",
        env = "SLUICE_BENCH_PASSWORD",
        hide_env_values = true
    )]
    pub mysql_password: String,

    /// Database holding the sysbench tables.
    #[arg(long, default_value = "sbtest")]
    pub mysql_db: String,

    /// Schema the insert series creates, fills and drops: never one that holds data.
    #[arg(long, default_value = "sluice_slap")]
    pub insert_schema: String,

    /// The sysbench program.
    #[arg(long, default_value = "sysbench", value_name = "PATH")]
    pub sysbench: PathBuf,

    /// The mysqlslap program.
    #[arg(long, default_value = "mysqlslap", value_name = "PATH")]
    pub mysqlslap: PathBuf,

    /// The Sluice binary the embedded run starts [default: this program].
    #[arg(long, value_name = "PATH")]
    pub sluice_bin: Option<PathBuf>,

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
}

/// Where the load goes.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// Straight to the database.
    Direct,
    /// Through Sluice, no caching.
    Passthrough,
    /// Through Sluice with every read cached.
    Cached,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scenario::Direct => "direct",
            Scenario::Passthrough => "passthrough",
            Scenario::Cached => "cached",
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
    max_connections: u32,
    notes: Vec<String>,
}

impl Plan {
    fn resolve(args: &BenchArgs, now: SystemTime) -> anyhow::Result<Plan> {
        let mut notes = Vec::new();
        let target = |host: &Option<String>, port: Option<u16>| {
            (host.is_some() || port.is_some()).then(|| Target {
                host: host.clone().unwrap_or_else(|| "127.0.0.1".into()),
                port: port.unwrap_or(3306),
            })
        };
        let direct = target(&args.mysql_host, args.mysql_port);
        let sluice =
            |t: Option<Target>, pid: Option<u32>| t.map(|target| SluiceTarget { target, pid });
        let passthrough = sluice(target(&args.sluice_host, args.sluice_port), args.sluice_pid);
        let cached = sluice(target(&args.cached_host, args.cached_port), args.cached_pid);
        let external = direct.is_some() || passthrough.is_some() || cached.is_some();
        if args.sluice_pid.is_some() && passthrough.is_none() {
            bail!("--sluice-pid is for an existing Sluice (--sluice-host/--sluice-port)");
        }
        if args.cached_pid.is_some() && cached.is_none() {
            bail!("--cached-pid is for an existing caching Sluice (--cached-host/--cached-port)");
        }

        let scenarios = match &args.scenarios {
            Some(list) => dedup(list),
            None if external => [
                (Scenario::Direct, direct.is_some()),
                (Scenario::Passthrough, passthrough.is_some()),
                (Scenario::Cached, cached.is_some()),
            ]
            .into_iter()
            .filter_map(|(s, given)| given.then_some(s))
            .collect(),
            None => vec![Scenario::Direct, Scenario::Passthrough, Scenario::Cached],
        };
        if scenarios.is_empty() {
            bail!("--scenarios needs at least one scenario");
        }
        if external {
            let needs = [
                (
                    Scenario::Direct,
                    direct.is_some(),
                    "--mysql-host/--mysql-port",
                ),
                (
                    Scenario::Passthrough,
                    passthrough.is_some(),
                    "--sluice-host/--sluice-port",
                ),
                (
                    Scenario::Cached,
                    cached.is_some(),
                    "--cached-host/--cached-port",
                ),
            ];
            for (scenario, given, flags) in needs {
                if scenarios.contains(&scenario) && !given {
                    bail!("the {scenario} scenario needs {flags} when targeting existing servers");
                }
            }
        }

        let demo = args.demo;
        let default_workloads: &[Workload] = if demo {
            &[Workload::OltpReadOnly, Workload::OltpPointSelect]
        } else {
            &[
                Workload::OltpReadOnly,
                Workload::OltpPointSelect,
                Workload::OltpReadWriteSplit,
                Workload::Insert,
            ]
        };
        let workloads = dedup(args.workloads.as_deref().unwrap_or(default_workloads));
        let ps_modes = dedup(args.ps_modes.as_deref().unwrap_or(&[PsMode::Auto]));
        let default_threads: &[u32] = if demo {
            &[1, 4, 16]
        } else {
            &[1, 4, 8, 16, 32, 64, 128, 256]
        };
        let threads = dedup(args.threads.as_deref().unwrap_or(default_threads));
        if threads.is_empty() || threads.contains(&0) {
            bail!("--threads needs one or more thread counts of at least 1");
        }
        if workloads.is_empty() || ps_modes.is_empty() {
            bail!("--workloads and --ps-modes need at least one value each");
        }
        let duration = args
            .duration
            .unwrap_or(Duration::from_secs(if demo { 5 } else { 30 }));
        if duration.subsec_nanos() != 0 || duration.as_secs() == 0 {
            bail!("--duration must be a whole number of seconds, at least 1s (sysbench --time)");
        }
        if args.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        let data = DataSet {
            tables: args.tables.unwrap_or(if demo { 4 } else { 64 }),
            table_size: args.table_size.unwrap_or(10_000),
        };
        if data.tables == 0 || data.table_size == 0 {
            bail!("--tables and --table-size must be at least 1");
        }
        let insert = if workloads.contains(&Workload::Insert) {
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
            if args.insert_schema == args.mysql_db {
                bail!("--insert-schema must differ from --mysql-db: mysqlslap drops its schema");
            }
            Some(InsertSettings {
                clients: args.insert_clients,
                rows: args.insert_rows,
                per_trx,
            })
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
            .out
            .clone()
            .unwrap_or_else(|| Path::new("bench-results").join(compact_timestamp(now)));
        Ok(Plan {
            scenarios,
            unavailable: Vec::new(),
            workloads,
            ps_modes,
            threads,
            duration_secs: duration.as_secs(),
            repeat: args.repeat,
            data,
            insert,
            out_dir,
            direct,
            passthrough,
            cached,
            max_connections,
            notes,
        })
    }

    fn embedded(&self) -> bool {
        self.direct.is_none() && self.passthrough.is_none() && self.cached.is_none()
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
                        for &scenario in scenarios.iter().filter(|s| **s != Scenario::Cached) {
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

/// Where in the plan we are: a line per run, and on a terminal a live status line.
struct Progress {
    started: Instant,
    total: usize,
    clk_tck: u64,
    live: bool,
    /// Off a terminal: the run time at which the next progress line is due.
    next_line_secs: std::cell::Cell<u64>,
}

impl Progress {
    /// `[ 5/24 1:40, ~6:40 left]` for the run at 0-based `index`.
    fn prefix(&self, index: usize) -> String {
        let elapsed = self.started.elapsed();
        let left = match index {
            0 => String::new(),
            done => {
                let per_run = elapsed.as_secs_f64() / done as f64;
                let left = per_run * (self.total - done) as f64;
                format!(", ~{} left", clock(Duration::from_secs_f64(left)))
            }
        };
        format!(
            "[{:>width$}/{} {}{left}]",
            index + 1,
            self.total,
            clock(elapsed),
            width = self.total.to_string().len()
        )
    }

    /// Called about once a second while a tool runs: on a terminal, the status line is
    /// rewritten in place; elsewhere (a log file, CI) a line is printed every 10 s.
    fn tick(&self, elapsed: Duration, planned_secs: Option<u64>, last: Option<&Interval>) {
        let secs = elapsed.as_secs();
        let of = planned_secs.map(|p| format!("/{p}s")).unwrap_or_default();
        let live = last
            .map(|i| {
                format!(
                    ", {} qps, p95 {:.2} ms, {} errors/s",
                    report::thousands(i.qps.round() as u64),
                    i.latency_percentile_ms,
                    i.errors_per_sec
                )
            })
            .unwrap_or_default();
        if self.live {
            eprint!("\r\x1b[K    {secs}s{of}{live}");
            let _ = std::io::stderr().flush();
        } else if secs >= self.next_line_secs.get() {
            self.next_line_secs.set(secs + 10);
            eprintln!("    {secs}s{of}{live}");
        }
    }

    /// Ends the status line before the run's result is printed.
    fn done(&self) {
        self.next_line_secs.set(10);
        if self.live {
            eprint!("\r\x1b[K");
        }
    }
}

/// Runs the benchmark; blocks until done. Results are written (and rewritten after
/// every run) to the output directory; an error after measuring began still leaves the
/// partial report there.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let started_at = SystemTime::now();
    let mut plan = Plan::resolve(&args, started_at)?;
    let sysbench_version = if plan.has_sysbench() {
        Some(sysbench::version(&args.sysbench)?)
    } else {
        None
    };
    let mysqlslap_version = if plan.insert.is_some() {
        Some(mysqlslap::version(&args.mysqlslap)?)
    } else {
        None
    };
    let out = plan.out_dir.clone();
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating the output directory {}", out.display()))?;
    if plan.embedded() && plan.scenarios.contains(&Scenario::Cached) {
        let bin = sluice_bin(&args)?;
        if let Err(reason) = topology::check_cache_support(&bin, &out, &credentials(&args)) {
            plan.unavailable.push(Unavailable {
                scenario: Scenario::Cached,
                reason,
            });
        }
    }
    for u in &plan.unavailable {
        eprintln!(
            "note: the {} scenario is not available: {}",
            u.scenario, u.reason
        );
    }
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    if plan.has_sysbench() {
        std::fs::write(
            out.join("oltp_read_write_split.lua"),
            sysbench::READ_WRITE_SPLIT_LUA,
        )
        .with_context(|| format!("writing the Lua script into {}", out.display()))?;
    }
    let steps = plan.steps();
    if steps.is_empty() {
        bail!("nothing to run: every scenario asked for is unavailable");
    }
    eprintln!(
        "sluice bench: {} runs planned; results in {}",
        steps.len(),
        out.display()
    );

    let mut report = Report {
        started_at: humantime::format_rfc3339_seconds(started_at).to_string(),
        finished_at: None,
        status: Status::Running,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
        machine: Machine::detect(),
        sysbench_version,
        mysqlslap_version,
        topology: Vec::new(),
        settings: Settings {
            scenarios: plan.scenarios.clone(),
            unavailable: plan.unavailable.clone(),
            workloads: plan.workloads.clone(),
            ps_modes: plan.ps_modes.clone(),
            threads: plan.threads.clone(),
            duration_secs: plan.duration_secs,
            repeat: plan.repeat,
            data: plan.data,
            insert: plan.insert.clone(),
        },
        notes: plan.notes.clone(),
        commands: Commands::default(),
        runs: Vec::new(),
        inserts: Vec::new(),
        summary: Vec::new(),
        insert_summary: Vec::new(),
    };
    report.write(&out)?;

    let interrupted = watch_interrupt();
    let result = Bench {
        args: &args,
        plan: &plan,
        out: &out,
        report: &mut report,
        interrupted: &interrupted,
    }
    .measure(&steps);

    report.finished_at = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    report.status = match &result {
        Err(e) => Status::Aborted(format!("{e:#}")),
        Ok(()) if interrupted.load(Ordering::SeqCst) => {
            Status::Aborted("interrupted (Ctrl-C)".into())
        }
        Ok(()) => Status::Finished,
    };
    let paths = report.write(&out)?;
    if report.runs_total() == 0 {
        // Nothing measured: the error says why; the directory holds the logs.
        eprintln!("nothing measured; logs in {}", out.display());
        return result;
    }
    let sections = render::sections(&report);
    println!("{}", render::markdown_sections(&sections).trim_end());
    println!();
    println!("Report:");
    for path in &paths {
        println!("  {}", path.display());
    }
    println!("  {} (SVG charts)", out.join("charts").display());
    println!("  {} (output of every run)", out.join("raw").display());
    result?;
    if interrupted.load(Ordering::SeqCst) {
        bail!("interrupted; partial results in {}", out.display());
    }
    let not_ok = report.runs_not_ok();
    if not_ok > 0 {
        bail!(
            "{not_ok} of {} runs failed or were skipped; details in {}",
            report.runs_total(),
            paths[0].display()
        );
    }
    Ok(())
}

fn sluice_bin(args: &BenchArgs) -> anyhow::Result<PathBuf> {
    match &args.sluice_bin {
        Some(bin) => Ok(bin.clone()),
        None => std::env::current_exe().context("locating the sluice binary"),
    }
}

fn credentials(args: &BenchArgs) -> Credentials {
    Credentials {
        user: args.mysql_user.clone(),
        password: args.mysql_password.clone(),
        database: args.mysql_db.clone(),
        insert_schema: args.insert_schema.clone(),
    }
}

/// One benchmark run in progress.
struct Bench<'a> {
    args: &'a BenchArgs,
    plan: &'a Plan,
    out: &'a Path,
    report: &'a mut Report,
    interrupted: &'a AtomicBool,
}

impl Bench<'_> {
    /// Starts or checks the servers, prepares the data, runs every step, cleans up.
    fn measure(&mut self, steps: &[Step]) -> anyhow::Result<()> {
        let (args, plan) = (self.args, self.plan);
        let creds = credentials(args);
        let mut topology = if plan.embedded() {
            let passthrough = plan.runnable(Scenario::Passthrough);
            let cached = plan.runnable(Scenario::Cached);
            eprintln!(
                "starting MariaDB (max_connections={}){}",
                plan.max_connections,
                match (passthrough, cached) {
                    (true, true) => " and two Sluice instances (passthrough, cached)",
                    (true, false) => " and Sluice (passthrough)",
                    (false, true) => " and Sluice (cached)",
                    (false, false) => "",
                }
            );
            Topology::embedded(
                &EmbeddedOptions {
                    max_connections: plan.max_connections,
                    passthrough,
                    cached,
                    pool_max: plan.pool_max(),
                    sluice_bin: sluice_bin(args)?,
                    dir: self.out.to_path_buf(),
                    extra_config: String::new(),
                },
                &creds,
            )?
        } else {
            Topology::external(
                plan.direct.clone(),
                plan.passthrough.clone(),
                plan.cached.clone(),
            )?
        };
        for line in &topology.description {
            eprintln!("  {line}");
        }
        for note in &topology.notes {
            eprintln!("note: {note}");
        }
        self.report.topology = topology.description.clone();
        self.report.notes.extend(topology.notes.iter().cloned());
        self.report.commands.sluice = topology.sluice_commands.clone();

        // The data goes in straight through the database when there is one to reach.
        let data_target = topology
            .direct
            .clone()
            .or_else(|| topology.passthrough.as_ref().map(|s| s.target.clone()))
            .or_else(|| topology.cached.as_ref().map(|s| s.target.clone()))
            .expect("a plan has at least one scenario with a target");
        let data_endpoint = self.endpoint(&data_target, &creds.database);
        let prepare_threads = plan
            .data
            .tables
            .min(std::thread::available_parallelism().map_or(1, |n| n.get()) as u32);
        let prepare =
            SysbenchCommand::prepare(&args.sysbench, &data_endpoint, plan.data, prepare_threads);
        let cleanup = SysbenchCommand::cleanup(&args.sysbench, &data_endpoint, plan.data);
        let manage_data = plan.has_sysbench() && !args.skip_prepare;
        if manage_data {
            self.report.commands.prepare = Some(prepare.display());
            if !args.keep_data {
                self.report.commands.cleanup = Some(cleanup.display());
            }
        }
        self.report.write(self.out)?;

        if manage_data {
            if !plan.embedded() {
                cleanup.execute_checked(
                    "removing leftover sysbench tables before prepare (sysbench cleanup)",
                    &self.out.join("raw/cleanup-before.txt"),
                    Duration::from_secs(600),
                )?;
            }
            eprintln!(
                "preparing {} tables x {} rows on {data_target}",
                plan.data.tables, plan.data.table_size
            );
            let t = Instant::now();
            prepare.execute_checked(
                "preparing the data (sysbench prepare)",
                &self.out.join("raw/prepare.txt"),
                Duration::from_secs(3600),
            )?;
            eprintln!("  prepared in {:.1}s", t.elapsed().as_secs_f64());
        }

        let result = self.run_steps(steps, &mut topology, &creds);

        if manage_data && !args.keep_data {
            eprintln!("cleaning up the sysbench tables");
            if let Err(e) = cleanup.execute_checked(
                "removing the sysbench tables (sysbench cleanup)",
                &self.out.join("raw/cleanup.txt"),
                Duration::from_secs(600),
            ) {
                eprintln!("warning: {e:#}");
                self.report.notes.push(format!(
                    "cleanup failed: {}",
                    report::first_line(&format!("{e:#}"))
                ));
            }
        }
        if plan.embedded() {
            eprintln!("stopping the embedded servers");
        }
        drop(topology);
        result
    }

    fn endpoint(&self, target: &Target, database: &str) -> Endpoint {
        Endpoint {
            host: target.host.clone(),
            port: target.port,
            user: self.args.mysql_user.clone(),
            password: self.args.mysql_password.clone(),
            database: database.to_string(),
            show_password: self.plan.embedded(),
        }
    }

    /// Every run of the plan, in order; each is recorded and the report rewritten.
    fn run_steps(
        &mut self,
        steps: &[Step],
        topology: &mut Topology,
        creds: &Credentials,
    ) -> anyhow::Result<()> {
        let progress = Progress {
            started: Instant::now(),
            total: steps.len(),
            clk_tck: topology::clock_ticks_per_sec(),
            live: std::io::stderr().is_terminal(),
            next_line_secs: std::cell::Cell::new(10),
        };
        // Scenarios whose Sluice exited: their later runs are skipped, not attempted.
        let mut gone: Vec<Scenario> = Vec::new();
        for (index, step) in steps.iter().enumerate() {
            let target = match step.scenario() {
                Scenario::Direct => topology.direct.clone().map(|t| (t, None)),
                Scenario::Passthrough => topology.passthrough.clone().map(|s| (s.target, s.pid)),
                Scenario::Cached => topology.cached.clone().map(|s| (s.target, s.pid)),
            };
            let label = self.label(step, index, &progress);
            let skip = match &target {
                _ if self.interrupted.load(Ordering::SeqCst) => Some("interrupted (Ctrl-C)"),
                None => Some("no server to run it against"),
                Some(_) if gone.contains(&step.scenario()) => {
                    Some("its Sluice exited during an earlier run")
                }
                Some(_) => None,
            };
            let (command, output_file, outcome) = match (skip, target) {
                (None, Some((target, pid))) => {
                    let (command, file, outcome) =
                        self.run_one(step, &label, &target, pid, &progress, creds);
                    let outcome = match outcome {
                        Measured::Failed(mut error) if pid.is_some() => {
                            if let Err(ended) = topology.check_sluice(pid) {
                                error.push_str(&format!("\n  {ended}"));
                                gone.push(step.scenario());
                            }
                            Measured::Failed(error)
                        }
                        other => other,
                    };
                    (command, Some(file), outcome)
                }
                (skip, _) => {
                    let reason = skip.unwrap_or_default().to_string();
                    if !self.interrupted.load(Ordering::SeqCst) {
                        eprintln!("{label}: skipped, {reason}");
                    }
                    (String::new(), None, Measured::Skipped(reason))
                }
            };
            self.record(step, command, output_file, outcome);
            self.report.write(self.out)?;
        }
        Ok(())
    }

    fn label(&self, step: &Step, index: usize, progress: &Progress) -> String {
        let (what, repetition) = match *step {
            Step::Sysbench {
                workload,
                ps_mode,
                threads,
                repetition,
                scenario,
            } => (
                format!("{workload} ps={ps_mode} threads={threads} {scenario}"),
                repetition,
            ),
            Step::Insert {
                per_trx,
                repetition,
                scenario,
            } => (format!("insert trx={per_trx} {scenario}"), repetition),
        };
        let repetition = if self.plan.repeat > 1 {
            format!(" #{repetition}")
        } else {
            String::new()
        };
        format!("{} {what}{repetition}", progress.prefix(index))
    }

    /// Runs one step against `target`: (command line, output file, what it measured).
    fn run_one(
        &self,
        step: &Step,
        label: &str,
        target: &Target,
        sluice_pid: Option<u32>,
        progress: &Progress,
        creds: &Credentials,
    ) -> (String, String, Measured) {
        match *step {
            Step::Sysbench {
                workload,
                ps_mode,
                threads,
                repetition,
                scenario,
            } => {
                let spec = RunSpec {
                    workload,
                    ps_mode,
                    threads,
                    duration_secs: self.plan.duration_secs,
                    report_interval_secs: 1,
                    data: self.plan.data,
                };
                let command = SysbenchCommand::run(
                    &self.args.sysbench,
                    &self.endpoint(target, &creds.database),
                    &spec,
                    self.out,
                );
                let file =
                    format!("raw/{workload}-ps_{ps_mode}-t{threads}-{scenario}-r{repetition}.txt");
                eprintln!("{label}: running {} s", spec.duration_secs);
                let outcome =
                    self.sysbench_run(&command, &spec, &self.out.join(&file), sluice_pid, progress);
                (command.display(), file, outcome)
            }
            Step::Insert {
                per_trx,
                repetition,
                scenario,
            } => {
                let insert = self
                    .plan
                    .insert
                    .as_ref()
                    .expect("insert steps come with settings");
                let spec = InsertSpec {
                    clients: insert.clients,
                    total_inserts: insert.rows,
                    per_trx,
                };
                let command = SlapCommand::insert(
                    &self.args.mysqlslap,
                    &self.endpoint(target, &creds.database),
                    &spec,
                    &creds.insert_schema,
                );
                let file = format!("raw/insert-trx{per_trx}-{scenario}-r{repetition}.txt");
                eprintln!(
                    "{label}: {} rows, {} clients",
                    report::thousands(spec.inserts()),
                    spec.clients()
                );
                let outcome =
                    self.insert_run(&command, &spec, &self.out.join(&file), sluice_pid, progress);
                (command.display(), file, outcome)
            }
        }
    }

    /// One sysbench run, with Sluice's CPU clock read around it when `sluice_pid` is set.
    fn sysbench_run(
        &self,
        command: &SysbenchCommand,
        spec: &RunSpec,
        log: &Path,
        sluice_pid: Option<u32>,
        progress: &Progress,
    ) -> Measured {
        // Connecting hundreds of threads, and a slow proxy, take time of their own.
        let deadline = Duration::from_secs(spec.duration_secs + 60 + u64::from(spec.threads) / 10);
        let cpu = CpuClock::start(sluice_pid);
        let finished = command.execute(log, deadline, |elapsed, last| {
            progress.tick(elapsed, Some(spec.duration_secs), last)
        });
        progress.done();
        let cpu_ticks = cpu.ticks();
        let what = format!(
            "{} ps={} threads={}",
            spec.workload, spec.ps_mode, spec.threads
        );
        let finished = match finished {
            Ok(f) => f,
            Err(e) => return Measured::Failed(format!("{what}: {e:#}")),
        };
        if finished.interrupted() {
            self.interrupted.store(true, Ordering::SeqCst);
            return Measured::Skipped("interrupted (Ctrl-C)".into());
        }
        if !finished.status.is_some_and(|s| s.success()) {
            return Measured::Failed(sysbench::failure(&finished, &what, log));
        }
        match sysbench::parse_run(&finished.output) {
            Ok(stats) => {
                let cpu = cpu_ticks.and_then(|t| per_unit(t, progress.clk_tck, stats.queries));
                Measured::Sysbench(stats, cpu)
            }
            Err(e) => Measured::Failed(format!(
                "{what}: sysbench exited 0 but its output has no complete summary ({e:#}); see {}",
                log.display()
            )),
        }
    }

    /// One mysqlslap insert run, with Sluice's CPU clock read around it.
    fn insert_run(
        &self,
        command: &SlapCommand,
        spec: &InsertSpec,
        log: &Path,
        sluice_pid: Option<u32>,
        progress: &Progress,
    ) -> Measured {
        // Even a slow machine inserts a few hundred rows a second.
        let deadline = Duration::from_secs(120 + spec.total_inserts / 200);
        let cpu = CpuClock::start(sluice_pid);
        let finished = command.execute(log, deadline, |elapsed| progress.tick(elapsed, None, None));
        progress.done();
        let cpu_ticks = cpu.ticks();
        let what = format!("insert trx={}", spec.per_trx);
        let finished = match finished {
            Ok(f) => f,
            Err(e) => return Measured::Failed(format!("{what}: {e:#}")),
        };
        if finished.interrupted() {
            self.interrupted.store(true, Ordering::SeqCst);
            return Measured::Skipped("interrupted (Ctrl-C)".into());
        }
        let slap = match command.check(&finished, &what, log) {
            Ok(slap) => slap,
            Err(e) => return Measured::Failed(format!("{e:#}")),
        };
        let Some(rows_per_sec) = slap.rows_per_sec() else {
            return Measured::Failed(format!(
                "{what}: mysqlslap reported 0 seconds, too short to measure; raise --insert-rows"
            ));
        };
        let stats = InsertStats {
            rows: slap.inserts(),
            clients: slap.clients,
            seconds: slap.avg_secs,
            rows_per_sec,
        };
        let cpu = cpu_ticks.and_then(|t| per_unit(t, progress.clk_tck, stats.rows));
        Measured::Insert(stats, cpu)
    }

    /// Adds a run to the report and prints its result.
    fn record(&mut self, step: &Step, command: String, output_file: Option<String>, m: Measured) {
        if !matches!(&m, Measured::Skipped(r) if r.starts_with("interrupted")) {
            eprintln!("    {}", m.describe());
        }
        match *step {
            Step::Sysbench {
                workload,
                ps_mode,
                threads,
                repetition,
                scenario,
            } => self.report.runs.push(RunRecord {
                workload,
                ps_mode,
                threads,
                scenario,
                repetition,
                command,
                output_file,
                outcome: match m {
                    Measured::Sysbench(stats, cpu) => Outcome::Ok {
                        stats,
                        sluice_cpu_us_per_query: cpu,
                    },
                    other => other.not_ok(),
                },
            }),
            Step::Insert {
                per_trx,
                repetition,
                scenario,
            } => self.report.inserts.push(InsertRecord {
                per_trx,
                scenario,
                repetition,
                command,
                output_file,
                outcome: match m {
                    Measured::Insert(stats, cpu) => Outcome::Ok {
                        stats,
                        sluice_cpu_us_per_query: cpu,
                    },
                    other => other.not_ok(),
                },
            }),
        }
    }
}

/// What one run produced, before it is filed in the report.
enum Measured {
    Sysbench(sysbench::RunStats, Option<f64>),
    Insert(InsertStats, Option<f64>),
    Failed(String),
    Skipped(String),
}

impl Measured {
    fn not_ok<S>(self) -> Outcome<S> {
        match self {
            Measured::Failed(error) => Outcome::Failed { error },
            Measured::Skipped(reason) => Outcome::Skipped { reason },
            // A measurement of the other kind cannot happen: the step decides the tool.
            Measured::Sysbench(..) | Measured::Insert(..) => Outcome::Failed {
                error: "internal error: measurement of the wrong kind".into(),
            },
        }
    }

    /// A progress line's account of one run.
    fn describe(&self) -> String {
        let cpu = |c: &Option<f64>, unit: &str| {
            c.map(|c| format!(", Sluice {c:.1} µs CPU/{unit}"))
                .unwrap_or_default()
        };
        match self {
            Measured::Sysbench(stats, c) => format!(
                "{} qps, avg {:.2} ms, p{} {:.2} ms{}, {} errors",
                report::thousands(stats.queries_per_sec.round() as u64),
                stats.latency_avg_ms,
                stats.latency_percentile,
                stats.latency_percentile_ms,
                cpu(c, "query"),
                stats.ignored_errors
            ),
            Measured::Insert(stats, c) => format!(
                "{} rows/s, {:.2} s{}",
                report::thousands(stats.rows_per_sec.round() as u64),
                stats.seconds,
                cpu(c, "insert")
            ),
            Measured::Failed(error) => format!("FAILED: {error}"),
            Measured::Skipped(reason) => format!("skipped: {reason}"),
        }
    }
}

/// A process's CPU clock read before a run, for the ticks it used during it.
struct CpuClock {
    pid: Option<u32>,
    before: Option<u64>,
}

impl CpuClock {
    fn start(pid: Option<u32>) -> CpuClock {
        CpuClock {
            pid,
            before: pid.and_then(|p| topology::cpu_ticks(p).ok()),
        }
    }

    fn ticks(&self) -> Option<u64> {
        let after = topology::cpu_ticks(self.pid?).ok()?;
        Some(after.saturating_sub(self.before?))
    }
}

/// CPU ticks spread over `units` (queries, rows), in µs each.
fn per_unit(ticks: u64, clk_tck: u64, units: u64) -> Option<f64> {
    (units > 0).then(|| ticks as f64 * 1e6 / clk_tck as f64 / units as f64)
}

/// Sets the returned flag on Ctrl-C, so the run stops after the current step and
/// still writes its report. A second Ctrl-C exits at once.
fn watch_interrupt() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&flag);
    // A thread of its own: the caller may already be inside a tokio runtime.
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                seen.store(true, Ordering::SeqCst);
                eprintln!("\ninterrupted: stopping after this run and writing the report (Ctrl-C again to quit now)");
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        });
    });
    flag
}

/// `2024-05-01T10:00:00Z` → `20240501T100000Z`: a directory name without colons.
fn compact_timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace(['-', ':'], "")
}

/// `m:ss`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

fn dedup<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out = Vec::new();
    for &item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?;
        Plan::resolve(
            &cli.bench,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_600),
        )
    }

    /// (workload, ps_mode, threads or inserts per transaction, repetition, scenario).
    fn order(p: &Plan) -> Vec<(Workload, Option<PsMode>, u32, u32, Scenario)> {
        p.steps()
            .iter()
            .map(|s| match *s {
                Step::Sysbench {
                    workload,
                    ps_mode,
                    threads,
                    repetition,
                    scenario,
                } => (workload, Some(ps_mode), threads, repetition, scenario),
                Step::Insert {
                    per_trx,
                    repetition,
                    scenario,
                } => (Workload::Insert, None, per_trx, repetition, scenario),
            })
            .collect()
    }

    #[test]
    fn defaults_follow_the_published_benchmark() {
        let p = plan(&[]).unwrap();
        assert!(p.embedded());
        assert_eq!(
            p.scenarios,
            [Scenario::Direct, Scenario::Passthrough, Scenario::Cached]
        );
        assert_eq!(
            p.workloads,
            [
                Workload::OltpReadOnly,
                Workload::OltpPointSelect,
                Workload::OltpReadWriteSplit,
                Workload::Insert
            ]
        );
        assert_eq!(p.ps_modes, [PsMode::Auto]);
        assert_eq!(p.threads, [1, 4, 8, 16, 32, 64, 128, 256]);
        assert_eq!(p.duration_secs, 30);
        assert_eq!((p.data.tables, p.data.table_size), (64, 10_000));
        assert_eq!(
            p.insert,
            Some(InsertSettings {
                clients: 16,
                rows: 100_000,
                per_trx: vec![1, 10, 100, 1000]
            })
        );
        assert_eq!(p.max_connections, 1124);
        assert_eq!(p.pool_max(), 272);
        assert_eq!(p.out_dir, Path::new("bench-results/20240501T100000Z"));
        // 3 sysbench workloads x 8 steps x 3 scenarios, then 4 insert steps x 2.
        assert_eq!(p.steps().len(), 3 * 8 * 3 + 4 * 2);
        let o = order(&p);
        assert_eq!(
            o[72..],
            [
                (Workload::Insert, None, 1, 1, Scenario::Direct),
                (Workload::Insert, None, 1, 1, Scenario::Passthrough),
                (Workload::Insert, None, 10, 1, Scenario::Direct),
                (Workload::Insert, None, 10, 1, Scenario::Passthrough),
                (Workload::Insert, None, 100, 1, Scenario::Direct),
                (Workload::Insert, None, 100, 1, Scenario::Passthrough),
                (Workload::Insert, None, 1000, 1, Scenario::Direct),
                (Workload::Insert, None, 1000, 1, Scenario::Passthrough),
            ]
        );
    }

    #[test]
    fn demo_is_short_and_explicit_flags_win() {
        let p = plan(&["--demo"]).unwrap();
        assert_eq!(
            p.workloads,
            [Workload::OltpReadOnly, Workload::OltpPointSelect]
        );
        assert_eq!(p.insert, None);
        assert_eq!(p.threads, [1, 4, 16]);
        assert_eq!(p.duration_secs, 5);
        assert_eq!((p.data.tables, p.data.table_size), (4, 10_000));
        // 2 workloads x 3 steps x 3 scenarios of 5 s: 90 s of load.
        assert_eq!(p.steps().len() as u64 * p.duration_secs, 90);
        let p = plan(&["--demo", "--threads", "2,2,8", "--duration", "1s"]).unwrap();
        assert_eq!(p.threads, [2, 8]);
        assert_eq!(p.duration_secs, 1);
        assert!(plan(&["--demo", "--mysql-port", "3306"]).is_err());
        assert!(plan(&["--demo", "--cached-port", "6034"]).is_err());
    }

    #[test]
    fn scenarios_alternate_within_a_step() {
        let p = plan(&[
            "--threads",
            "1,8",
            "--repeat",
            "2",
            "--workloads",
            "point_select",
            "--ps-modes",
            "auto,disable",
            "--scenarios",
            "direct,passthrough",
        ])
        .unwrap();
        let order: Vec<(Option<PsMode>, u32, u32, Scenario)> = order(&p)
            .into_iter()
            .map(|(_, p, t, r, s)| (p, t, r, s))
            .collect();
        use PsMode::*;
        use Scenario::*;
        assert_eq!(
            order,
            [
                (Some(Auto), 1, 1, Direct),
                (Some(Auto), 1, 1, Passthrough),
                (Some(Auto), 1, 2, Direct),
                (Some(Auto), 1, 2, Passthrough),
                (Some(Auto), 8, 1, Direct),
                (Some(Auto), 8, 1, Passthrough),
                (Some(Auto), 8, 2, Direct),
                (Some(Auto), 8, 2, Passthrough),
                (Some(Disable), 1, 1, Direct),
                (Some(Disable), 1, 1, Passthrough),
                (Some(Disable), 1, 2, Direct),
                (Some(Disable), 1, 2, Passthrough),
                (Some(Disable), 8, 1, Direct),
                (Some(Disable), 8, 1, Passthrough),
                (Some(Disable), 8, 2, Direct),
                (Some(Disable), 8, 2, Passthrough),
            ]
        );
    }

    #[test]
    fn unavailable_scenarios_are_reported_not_run() {
        let mut p = plan(&["--workloads", "read_only,insert", "--threads", "4"]).unwrap();
        p.unavailable.push(Unavailable {
            scenario: Scenario::Cached,
            reason: "no query cache".into(),
        });
        assert!(!p.runnable(Scenario::Cached));
        assert!(p.scenarios.contains(&Scenario::Cached));
        let scenarios: Vec<Scenario> = order(&p).iter().map(|s| s.4).collect();
        assert!(!scenarios.contains(&Scenario::Cached), "{scenarios:?}");
        // 1 thread step x 2 scenarios, 4 insert steps x 2.
        assert_eq!(scenarios.len(), 2 + 8);
    }

    #[test]
    fn external_targets() {
        let p = plan(&["--mysql-host", "db.example", "--workloads", "read_only"]).unwrap();
        assert!(!p.embedded());
        assert_eq!(p.scenarios, [Scenario::Direct]);
        assert_eq!(
            p.direct,
            Some(Target {
                host: "db.example".into(),
                port: 3306
            })
        );
        assert_eq!(p.workloads, [Workload::OltpReadOnly]);
        assert!(p.notes.iter().any(|n| n.contains("max_connections")));
        let p = plan(&[
            "--mysql-port",
            "3307",
            "--sluice-port",
            "6033",
            "--cached-port",
            "6034",
            "--cached-pid",
            "42",
        ])
        .unwrap();
        assert_eq!(
            p.scenarios,
            [Scenario::Direct, Scenario::Passthrough, Scenario::Cached]
        );
        assert_eq!(
            p.passthrough,
            Some(SluiceTarget {
                target: Target {
                    host: "127.0.0.1".into(),
                    port: 6033
                },
                pid: None
            })
        );
        assert_eq!(p.cached.as_ref().and_then(|c| c.pid), Some(42));
        let err = plan(&["--mysql-port", "3307", "--scenarios", "passthrough"]).unwrap_err();
        assert!(err.to_string().contains("--sluice-host"), "{err}");
        let err = plan(&["--mysql-port", "3307", "--scenarios", "cached"]).unwrap_err();
        assert!(err.to_string().contains("--cached-host"), "{err}");
        assert!(plan(&["--sluice-pid", "42"]).is_err());
        assert!(plan(&["--cached-pid", "42"]).is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(plan(&["--threads", "0"]).is_err());
        assert!(plan(&["--duration", "1500ms"]).is_err());
        assert!(plan(&["--duration", "0s"]).is_err());
        assert!(plan(&["--repeat", "0"]).is_err());
        assert!(plan(&["--tables", "0"]).is_err());
        assert!(plan(&["--workloads", "oltp_write_only"]).is_err());
        assert!(plan(&["--ps-modes", "sometimes"]).is_err());
        assert!(plan(&["--insert-trx", "0,10"]).is_err());
        assert!(plan(&["--insert-clients", "0"]).is_err());
        assert!(plan(&["--insert-rows", "3"]).is_err());
        assert!(plan(&["--insert-schema", "sbtest"]).is_err());
        assert!(plan(&["--workloads", "insert", "--scenarios", "cached"]).is_err());
        // Without the insert workload its flags are not checked.
        assert!(plan(&["--workloads", "read_only", "--insert-rows", "3"]).is_ok());
        let p = plan(&["--duration", "2m", "--ps-modes", "disable"]).unwrap();
        assert_eq!(p.duration_secs, 120);
        assert_eq!(p.ps_modes, [PsMode::Disable]);
    }

    #[test]
    fn large_ramps_are_checked_against_the_descriptor_limit() {
        assert_eq!(descriptor_shortage(2048, Some(65536)), None);
        assert_eq!(descriptor_shortage(2048, None), None);
        let note = descriptor_shortage(2048, Some(1024)).unwrap();
        assert!(note.contains("1024") && note.contains("4196"), "{note}");
        let p = plan(&["--threads", "1,2048"]).unwrap();
        assert_eq!(p.max_connections, 8292);
        // 64 x 2048 x 9 prepared statements are more than any MariaDB allows.
        assert!(
            p.notes.iter().any(|n| n.contains("error 1461")),
            "{:?}",
            p.notes
        );
        assert!(!plan(&["--threads", "1,256"])
            .unwrap()
            .notes
            .iter()
            .any(|n| n.contains("1461")));
        assert_eq!(p.pool_max(), 2064);
        // This process can read its own limit.
        assert!(hard_nofile_limit().is_some_and(|l| l > 0));
    }

    #[test]
    fn formatting() {
        assert_eq!(clock(Duration::from_secs(65)), "1:05");
        assert_eq!(
            compact_timestamp(SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_600)),
            "20240501T100000Z"
        );
        assert_eq!(per_unit(250, 100, 1000), Some(2500.0));
        assert_eq!(per_unit(250, 100, 0), None);
    }
}
