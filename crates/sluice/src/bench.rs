//! `sluice bench`: the end-to-end performance benchmark. sysbench drives the same workload
//! straight at MariaDB (direct) and through Sluice (passthrough), alternating the two at
//! every step of a thread ramp, and the report sets throughput, latency and the proxy's
//! CPU cost per query side by side. Not on the request path: it exercises it from outside.
//!
//! [`topology`] starts or finds the servers, [`sysbench`] runs and parses the load
//! generator, [`report`] keeps every run and renders Markdown, CSV and JSON.

mod report;
mod sysbench;
mod topology;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use report::{Commands, Machine, Outcome, Report, RunRecord, Settings, Status};
use sysbench::{DataSet, Endpoint, PsMode, RunSpec, SysbenchCommand, Workload};
use topology::{Credentials, EmbeddedOptions, Target, Topology};

/// Flags of `sluice bench`.
///
/// By default the benchmark starts its own MariaDB (a sandbox) and Sluice (this binary,
/// `serve`), creates the data with `sysbench prepare`, runs the thread ramp and removes
/// everything. With --mysql-host/--mysql-port and/or --sluice-host/--sluice-port it
/// targets servers that already run instead, and starts nothing.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// A short run (under 3 minutes on 2 cores): embedded servers, both workloads,
    /// prepared statements only, threads 1,4,16, 5 s per step, 4 tables x 10,000 rows.
    /// Flags given explicitly still apply.
    #[arg(long, conflicts_with_all = ["mysql_host", "mysql_port", "sluice_host", "sluice_port"])]
    pub demo: bool,

    /// Scenarios to run, in this order at every step [default: direct,passthrough;
    /// with existing servers, those given]. `cached` is not available yet and is skipped.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenarios: Option<Vec<Scenario>>,

    /// sysbench workloads [default: oltp_point_select,oltp_read_only].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Option<Vec<Workload>>,

    /// sysbench --db-ps-mode values [default: auto,disable; demo: auto].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ps_modes: Option<Vec<PsMode>>,

    /// Thread ramp, comma-separated [default: 1,16,64; demo: 1,4,16].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub threads: Option<Vec<u32>>,

    /// Duration of each sysbench run, whole seconds ("20s", "10m") [default: 20s; demo: 5s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,

    /// Runs per scenario at each step, alternating scenarios; the report shows medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,

    /// Number of sysbench tables [default: 8; demo: 4].
    #[arg(long)]
    pub tables: Option<u32>,

    /// Rows per table [default: 10000].
    #[arg(long)]
    pub table_size: Option<u64>,

    /// Output directory [default: bench-results/<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Host of an existing database server for the direct scenario. This or any of the
    /// next three flags targets existing servers instead of starting any [default:
    /// 127.0.0.1].
    #[arg(long, value_name = "HOST")]
    pub mysql_host: Option<String>,

    /// Port of that database server [default: 3306].
    #[arg(long, value_name = "PORT")]
    pub mysql_port: Option<u16>,

    /// Host of an existing Sluice for the passthrough scenario [default: 127.0.0.1].
    #[arg(long, value_name = "HOST")]
    pub sluice_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT")]
    pub sluice_port: Option<u16>,

    /// Process id of the existing Sluice, to measure its CPU time per query (same machine).
    #[arg(long, value_name = "PID")]
    pub sluice_pid: Option<u32>,

    /// User sysbench connects as (created on the embedded server).
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

    /// The sysbench program.
    #[arg(long, default_value = "sysbench", value_name = "PATH")]
    pub sysbench: PathBuf,

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
    /// sysbench straight to the database.
    Direct,
    /// sysbench through Sluice, no caching.
    Passthrough,
    /// sysbench through Sluice with every read cached (not available yet).
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
    scenarios: Vec<Scenario>,
    workloads: Vec<Workload>,
    ps_modes: Vec<PsMode>,
    threads: Vec<u32>,
    duration_secs: u64,
    repeat: u32,
    data: DataSet,
    out_dir: PathBuf,
    /// External targets; both `None` for the embedded topology.
    direct: Option<Target>,
    passthrough: Option<Target>,
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
        let passthrough = target(&args.sluice_host, args.sluice_port);
        let external = direct.is_some() || passthrough.is_some();
        if !external && args.sluice_pid.is_some() {
            bail!("--sluice-pid is for an existing Sluice (--sluice-host/--sluice-port)");
        }

        let mut scenarios = match &args.scenarios {
            Some(list) => dedup(list),
            None if external => {
                let mut s = Vec::new();
                if direct.is_some() {
                    s.push(Scenario::Direct);
                }
                if passthrough.is_some() {
                    s.push(Scenario::Passthrough);
                }
                s
            }
            None => vec![Scenario::Direct, Scenario::Passthrough],
        };
        if scenarios.contains(&Scenario::Cached) {
            scenarios.retain(|s| *s != Scenario::Cached);
            notes.push("caching is not available yet: the cached scenario was skipped".to_string());
        }
        if scenarios.is_empty() {
            bail!("no scenario left to run (caching is not available yet)");
        }
        if external {
            if scenarios.contains(&Scenario::Direct) && direct.is_none() {
                bail!("the direct scenario needs --mysql-host/--mysql-port when targeting existing servers");
            }
            if scenarios.contains(&Scenario::Passthrough) && passthrough.is_none() {
                bail!("the passthrough scenario needs --sluice-host/--sluice-port when targeting existing servers");
            }
        }

        let demo = args.demo;
        let workloads = dedup(
            args.workloads
                .as_deref()
                .unwrap_or(&[Workload::OltpPointSelect, Workload::OltpReadOnly]),
        );
        let default_ps: &[PsMode] = if demo {
            &[PsMode::Auto]
        } else {
            &[PsMode::Auto, PsMode::Disable]
        };
        let ps_modes = dedup(args.ps_modes.as_deref().unwrap_or(default_ps));
        let default_threads: &[u32] = if demo { &[1, 4, 16] } else { &[1, 16, 64] };
        let threads = dedup(args.threads.as_deref().unwrap_or(default_threads));
        if threads.is_empty() || threads.contains(&0) {
            bail!("--threads needs one or more thread counts of at least 1");
        }
        if workloads.is_empty() || ps_modes.is_empty() {
            bail!("--workloads and --ps-modes need at least one value each");
        }
        let duration = args
            .duration
            .unwrap_or(Duration::from_secs(if demo { 5 } else { 20 }));
        if duration.subsec_nanos() != 0 || duration.as_secs() == 0 {
            bail!("--duration must be a whole number of seconds, at least 1s (sysbench --time)");
        }
        if args.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        let data = DataSet {
            tables: args.tables.unwrap_or(if demo { 4 } else { 8 }),
            table_size: args.table_size.unwrap_or(10_000),
        };
        if data.tables == 0 || data.table_size == 0 {
            bail!("--tables and --table-size must be at least 1");
        }
        let max_threads = *threads.iter().max().expect("not empty");
        // Room for sysbench's connections, Sluice's backend connections (which may
        // outlive a step in its pool) and the admin.
        let max_connections = args
            .max_connections
            .unwrap_or_else(|| max_threads.saturating_mul(4).saturating_add(100).max(500));
        let out_dir = args
            .out
            .clone()
            .unwrap_or_else(|| Path::new("bench-results").join(compact_timestamp(now)));
        Ok(Plan {
            scenarios,
            workloads,
            ps_modes,
            threads,
            duration_secs: duration.as_secs(),
            repeat: args.repeat,
            data,
            out_dir,
            direct,
            passthrough,
            max_connections,
            notes,
        })
    }

    fn embedded(&self) -> bool {
        self.direct.is_none() && self.passthrough.is_none()
    }

    /// Every sysbench run, in the order they run: for each workload, ps-mode and thread
    /// count, the scenarios take turns, `repeat` times, so drift of the machine over time
    /// hits them alike.
    fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        for &workload in &self.workloads {
            for &ps_mode in &self.ps_modes {
                for &threads in &self.threads {
                    for repetition in 1..=self.repeat {
                        for &scenario in &self.scenarios {
                            steps.push(Step {
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

/// One sysbench run of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    workload: Workload,
    ps_mode: PsMode,
    threads: u32,
    /// 1-based.
    repetition: u32,
    scenario: Scenario,
}

/// Progress lines: where in the plan we are, time spent and a guess at the time left.
struct Progress {
    started: Instant,
    total: usize,
    clk_tck: u64,
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
}

/// Runs the benchmark; blocks until done. Results are written (and rewritten after
/// every run) to the output directory; an error after measuring began still leaves the
/// partial report there.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let started_at = SystemTime::now();
    let plan = Plan::resolve(&args, started_at)?;
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    let sysbench_version = sysbench::version(&args.sysbench)?;
    let out = plan.out_dir.clone();
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating the output directory {}", out.display()))?;
    eprintln!(
        "sluice bench: {} sysbench runs planned; results in {}",
        plan.steps().len(),
        out.display()
    );

    let mut report = Report {
        started_at: humantime::format_rfc3339_seconds(started_at).to_string(),
        finished_at: None,
        status: Status::Running,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
        machine: Machine::detect(),
        sysbench_version,
        topology: Vec::new(),
        settings: Settings {
            scenarios: plan.scenarios.clone(),
            workloads: plan.workloads.clone(),
            ps_modes: plan.ps_modes.clone(),
            threads: plan.threads.clone(),
            duration_secs: plan.duration_secs,
            repeat: plan.repeat,
            data: plan.data,
        },
        notes: plan.notes.clone(),
        commands: Commands::default(),
        runs: Vec::new(),
        summary: Vec::new(),
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
    .measure();

    report.finished_at = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    report.status = match &result {
        Err(e) => Status::Aborted(format!("{e:#}")),
        Ok(()) if interrupted.load(Ordering::SeqCst) => {
            Status::Aborted("interrupted (Ctrl-C)".into())
        }
        Ok(()) => Status::Finished,
    };
    let paths = report.write(&out)?;
    if report.runs.is_empty() {
        // Nothing measured: the error says why; the directory holds the logs.
        eprintln!("nothing measured; logs in {}", out.display());
        return result;
    }
    println!("{}", report.markdown_tables().trim_end());
    println!();
    println!("Report:");
    for path in &paths {
        println!("  {}", path.display());
    }
    println!(
        "  {} (sysbench output of every run)",
        out.join("raw").display()
    );
    result?;
    if interrupted.load(Ordering::SeqCst) {
        bail!("interrupted; partial results in {}", out.display());
    }
    let not_ok = report
        .runs
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Ok { .. }))
        .count();
    if not_ok > 0 {
        bail!(
            "{not_ok} of {} runs failed or were skipped; details in {}",
            report.runs.len(),
            paths[0].display()
        );
    }
    Ok(())
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
    fn measure(&mut self) -> anyhow::Result<()> {
        let (args, plan) = (self.args, self.plan);
        let creds = Credentials {
            user: args.mysql_user.clone(),
            password: args.mysql_password.clone(),
            database: args.mysql_db.clone(),
        };
        let mut topology = if plan.embedded() {
            let with_sluice = plan.scenarios.contains(&Scenario::Passthrough);
            eprintln!(
                "starting MariaDB{} (max_connections={})",
                if with_sluice { " and Sluice" } else { "" },
                plan.max_connections
            );
            let sluice_bin = match &args.sluice_bin {
                Some(bin) => bin.clone(),
                None => std::env::current_exe().context("locating the sluice binary")?,
            };
            Topology::embedded(
                &EmbeddedOptions {
                    max_connections: plan.max_connections,
                    with_sluice,
                    sluice_bin,
                    sluice_log: self.out.join("sluice.log"),
                },
                &creds,
            )?
        } else {
            Topology::external(
                plan.direct.clone(),
                plan.passthrough.clone(),
                args.sluice_pid,
            )?
        };
        for line in &topology.description {
            eprintln!("  {line}");
        }
        self.report.topology = topology.description.clone();
        self.report.commands.sluice = topology.sluice_command.clone();

        // The data goes in straight through the database when there is one to reach.
        let data_target = topology
            .direct
            .clone()
            .or_else(|| topology.passthrough.clone())
            .expect("a plan has at least one scenario with a target");
        let data_endpoint = self.endpoint(&data_target, &creds);
        let prepare_threads = plan
            .data
            .tables
            .min(std::thread::available_parallelism().map_or(1, |n| n.get()) as u32);
        let prepare =
            SysbenchCommand::prepare(&args.sysbench, &data_endpoint, plan.data, prepare_threads);
        let cleanup = SysbenchCommand::cleanup(&args.sysbench, &data_endpoint, plan.data);
        if !args.skip_prepare {
            self.report.commands.prepare = Some(prepare.display());
            if !args.keep_data {
                self.report.commands.cleanup = Some(cleanup.display());
            }
        }
        self.report.write(self.out)?;

        if !args.skip_prepare {
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

        let result = self.run_steps(&mut topology, &creds);

        if !args.skip_prepare && !args.keep_data {
            eprintln!("cleaning up the sysbench tables");
            if let Err(e) = cleanup.execute_checked(
                "removing the sysbench tables (sysbench cleanup)",
                &self.out.join("raw/cleanup.txt"),
                Duration::from_secs(600),
            ) {
                eprintln!("warning: {e:#}");
                self.report
                    .notes
                    .push(format!("cleanup failed: {}", first_line(&format!("{e:#}"))));
            }
        }
        if plan.embedded() {
            eprintln!("stopping the embedded servers");
        }
        drop(topology);
        result
    }

    fn endpoint(&self, target: &Target, creds: &Credentials) -> Endpoint {
        Endpoint {
            host: target.host.clone(),
            port: target.port,
            user: creds.user.clone(),
            password: creds.password.clone(),
            database: creds.database.clone(),
            show_password: self.plan.embedded(),
        }
    }

    /// Every run of the plan, in order; each is recorded and the report rewritten.
    fn run_steps(&mut self, topology: &mut Topology, creds: &Credentials) -> anyhow::Result<()> {
        let steps = self.plan.steps();
        let progress = Progress {
            started: Instant::now(),
            total: steps.len(),
            clk_tck: topology::clock_ticks_per_sec(),
        };
        let mut sluice_gone = false;
        for (index, step) in steps.iter().enumerate() {
            let record = self.run_step(step, index, &progress, topology, creds, &mut sluice_gone);
            self.report.runs.push(record);
            self.report.write(self.out)?;
        }
        Ok(())
    }

    /// One step: sysbench against one scenario's target, or the reason it did not run.
    fn run_step(
        &self,
        step: &Step,
        index: usize,
        progress: &Progress,
        topology: &mut Topology,
        creds: &Credentials,
        sluice_gone: &mut bool,
    ) -> RunRecord {
        let spec = RunSpec {
            workload: step.workload,
            ps_mode: step.ps_mode,
            threads: step.threads,
            duration_secs: self.plan.duration_secs,
            report_interval_secs: if self.plan.duration_secs >= 10 { 5 } else { 1 },
            data: self.plan.data,
        };
        let target = match step.scenario {
            Scenario::Direct => topology.direct.clone(),
            Scenario::Passthrough => topology.passthrough.clone(),
            Scenario::Cached => None,
        };
        let command = target
            .as_ref()
            .map(|t| SysbenchCommand::run(&self.args.sysbench, &self.endpoint(t, creds), &spec));
        let mut record = RunRecord {
            workload: step.workload,
            ps_mode: step.ps_mode,
            threads: step.threads,
            scenario: step.scenario,
            repetition: step.repetition,
            command: command.as_ref().map(|c| c.display()).unwrap_or_default(),
            output_file: None,
            outcome: Outcome::Skipped {
                reason: String::new(),
            },
        };
        let label = format!(
            "{} {} ps={} threads={} {}{}",
            progress.prefix(index),
            step.workload,
            step.ps_mode,
            step.threads,
            step.scenario,
            if self.plan.repeat > 1 {
                format!(" #{}", step.repetition)
            } else {
                String::new()
            }
        );
        let skip = |reason: &str| Outcome::Skipped {
            reason: reason.to_string(),
        };
        let command = match command {
            _ if self.interrupted.load(Ordering::SeqCst) => {
                record.outcome = skip("interrupted (Ctrl-C)");
                return record;
            }
            None => {
                record.outcome = skip("no server to run it against");
                eprintln!("{label}: skipped, no server to run it against");
                return record;
            }
            Some(_) if step.scenario == Scenario::Passthrough && *sluice_gone => {
                record.outcome = skip("Sluice exited during an earlier run");
                eprintln!("{label}: skipped, Sluice is gone");
                return record;
            }
            Some(command) => command,
        };

        eprintln!("{label}: running {} s", self.plan.duration_secs);
        let file = format!(
            "raw/{}-ps_{}-t{}-{}-r{}.txt",
            step.workload, step.ps_mode, step.threads, step.scenario, step.repetition
        );
        let pid = match step.scenario {
            Scenario::Passthrough => topology.sluice_pid,
            _ => None,
        };
        record.outcome = self.one_run(
            &command,
            &spec,
            &self.out.join(&file),
            pid,
            progress.clk_tck,
        );
        record.output_file = Some(file);
        if let Outcome::Failed { error } = &mut record.outcome {
            if step.scenario == Scenario::Passthrough {
                if let Err(ended) = topology.check_sluice() {
                    error.push_str(&format!("\n  {ended}"));
                    *sluice_gone = true;
                }
            }
        }
        if self.interrupted.load(Ordering::SeqCst) {
            record.outcome = skip("interrupted (Ctrl-C)");
        }
        eprintln!("    {}", describe(&record.outcome));
        record
    }

    /// One sysbench run, with Sluice's CPU clock read around it when `sluice_pid` is set.
    fn one_run(
        &self,
        command: &SysbenchCommand,
        spec: &RunSpec,
        log: &Path,
        sluice_pid: Option<u32>,
        clk_tck: u64,
    ) -> Outcome {
        // Connecting hundreds of threads, and a slow proxy, take time of their own.
        let deadline = Duration::from_secs(spec.duration_secs + 60 + u64::from(spec.threads) / 10);
        let cpu_before = sluice_pid.and_then(|pid| topology::cpu_ticks(pid).ok());
        let mut next_tick = 10;
        let finished = command.execute(log, deadline, |elapsed, last| {
            if elapsed.as_secs() >= next_tick {
                next_tick += 10;
                if let Some(i) = last {
                    eprintln!(
                        "    {}s: {} qps, p95 {:.2} ms, {} errors/s",
                        i.at_secs,
                        report::thousands(i.qps.round() as u64),
                        i.latency_percentile_ms,
                        i.errors_per_sec
                    );
                }
            }
        });
        let cpu_after = sluice_pid.and_then(|pid| topology::cpu_ticks(pid).ok());
        let what = format!(
            "{} ps={} threads={}",
            spec.workload, spec.ps_mode, spec.threads
        );
        let finished = match finished {
            Ok(f) => f,
            Err(e) => {
                return Outcome::Failed {
                    error: format!("{what}: {e:#}"),
                }
            }
        };
        if finished.interrupted() {
            self.interrupted.store(true, Ordering::SeqCst);
            return Outcome::Skipped {
                reason: "interrupted (Ctrl-C)".into(),
            };
        }
        if finished.status.is_some_and(|s| s.success()) {
            match sysbench::parse_run(&finished.output) {
                Ok(stats) => {
                    let sluice_cpu_us_per_query = match (cpu_before, cpu_after) {
                        (Some(b), Some(a)) if stats.queries > 0 => Some(
                            a.saturating_sub(b) as f64 * 1e6
                                / clk_tck as f64
                                / stats.queries as f64,
                        ),
                        _ => None,
                    };
                    Outcome::Ok {
                        stats,
                        sluice_cpu_us_per_query,
                    }
                }
                Err(e) => Outcome::Failed {
                    error: format!(
                        "{what}: sysbench exited 0 but its output has no complete summary ({e:#}); \
                         see {}",
                        log.display()
                    ),
                },
            }
        } else {
            Outcome::Failed {
                error: finished.failure(&what, log),
            }
        }
    }
}

/// A progress line's account of one run.
fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Ok {
            stats,
            sluice_cpu_us_per_query,
        } => format!(
            "{} qps, avg {:.2} ms, p{} {:.2} ms{}, {} errors",
            report::thousands(stats.queries_per_sec.round() as u64),
            stats.latency_avg_ms,
            stats.latency_percentile,
            stats.latency_percentile_ms,
            sluice_cpu_us_per_query
                .map(|c| format!(", Sluice {c:.1} µs CPU/query"))
                .unwrap_or_default(),
            stats.ignored_errors
        ),
        Outcome::Failed { error } => format!("FAILED: {error}"),
        Outcome::Skipped { reason } => format!("skipped: {reason}"),
    }
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

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
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

    #[test]
    fn defaults() {
        let p = plan(&[]).unwrap();
        assert!(p.embedded());
        assert_eq!(p.scenarios, [Scenario::Direct, Scenario::Passthrough]);
        assert_eq!(
            p.workloads,
            [Workload::OltpPointSelect, Workload::OltpReadOnly]
        );
        assert_eq!(p.ps_modes, [PsMode::Auto, PsMode::Disable]);
        assert_eq!(p.threads, [1, 16, 64]);
        assert_eq!(p.duration_secs, 20);
        assert_eq!((p.data.tables, p.data.table_size), (8, 10_000));
        assert_eq!(p.max_connections, 500);
        assert_eq!(plan(&["--threads", "1,256"]).unwrap().max_connections, 1124);
        assert_eq!(p.out_dir, Path::new("bench-results/20240501T100000Z"));
        assert_eq!(p.steps().len(), 2 * 2 * 3 * 2);
    }

    #[test]
    fn demo_is_short_and_explicit_flags_win() {
        let p = plan(&["--demo"]).unwrap();
        assert_eq!(p.ps_modes, [PsMode::Auto]);
        assert_eq!(p.threads, [1, 4, 16]);
        assert_eq!(p.duration_secs, 5);
        assert_eq!((p.data.tables, p.data.table_size), (4, 10_000));
        // 12 runs of 5 s.
        assert_eq!(p.steps().len() as u64 * p.duration_secs, 60);
        let p = plan(&["--demo", "--threads", "2,2,8", "--duration", "1s"]).unwrap();
        assert_eq!(p.threads, [2, 8]);
        assert_eq!(p.duration_secs, 1);
        assert!(plan(&["--demo", "--mysql-port", "3306"]).is_err());
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
        ])
        .unwrap();
        let order: Vec<(PsMode, u32, u32, Scenario)> = p
            .steps()
            .iter()
            .map(|s| (s.ps_mode, s.threads, s.repetition, s.scenario))
            .collect();
        use PsMode::*;
        use Scenario::*;
        assert_eq!(
            order,
            [
                (Auto, 1, 1, Direct),
                (Auto, 1, 1, Passthrough),
                (Auto, 1, 2, Direct),
                (Auto, 1, 2, Passthrough),
                (Auto, 8, 1, Direct),
                (Auto, 8, 1, Passthrough),
                (Auto, 8, 2, Direct),
                (Auto, 8, 2, Passthrough),
                (Disable, 1, 1, Direct),
                (Disable, 1, 1, Passthrough),
                (Disable, 1, 2, Direct),
                (Disable, 1, 2, Passthrough),
                (Disable, 8, 1, Direct),
                (Disable, 8, 1, Passthrough),
                (Disable, 8, 2, Direct),
                (Disable, 8, 2, Passthrough),
            ]
        );
    }

    #[test]
    fn cached_is_accepted_but_skipped() {
        let p = plan(&["--scenarios", "direct,cached"]).unwrap();
        assert_eq!(p.scenarios, [Scenario::Direct]);
        assert!(p.notes[0].contains("caching is not available yet"));
        let err = plan(&["--scenarios", "cached"]).unwrap_err().to_string();
        assert!(err.contains("caching is not available yet"), "{err}");
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
        let p = plan(&["--mysql-port", "3307", "--sluice-port", "6033"]).unwrap();
        assert_eq!(p.scenarios, [Scenario::Direct, Scenario::Passthrough]);
        assert_eq!(
            p.passthrough,
            Some(Target {
                host: "127.0.0.1".into(),
                port: 6033
            })
        );
        let err = plan(&["--mysql-port", "3307", "--scenarios", "passthrough"]).unwrap_err();
        assert!(err.to_string().contains("--sluice-host"), "{err}");
        assert!(plan(&["--sluice-pid", "42"]).is_err());
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
        let p = plan(&["--duration", "2m", "--ps-modes", "disable"]).unwrap();
        assert_eq!(p.duration_secs, 120);
        assert_eq!(p.ps_modes, [PsMode::Disable]);
    }

    #[test]
    fn formatting() {
        assert_eq!(clock(Duration::from_secs(65)), "1:05");
        assert_eq!(
            compact_timestamp(SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_600)),
            "20240501T100000Z"
        );
    }
}
