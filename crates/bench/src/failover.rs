//! `sluice bench failover`: what clients see when the primary dies under load.
//!
//! Each run starts a fresh primary with two semi-synchronous replicas and Sluice in
//! front of them (multiplexing, read/write split, the monitor at its defaults, failover
//! with the replication account), loads it through Sluice with sysbench's stock
//! `oltp_read_write` (prepared statements, errors ignored and counted) beside the probe
//! clients ([`probe`]), SIGKILLs the primary after --kill-after, waits for Sluice to
//! promote a replica and keeps the load on for --after. Then it counts ([`tally`]) the
//! errors clients got, Sluice's transaction replays, the longest pause of acknowledged
//! writes, and whether every acknowledged probe write is on the promoted server, once.
//!
//! Everything runs embedded and is removed after each run, on error too; the report
//! ([`report`]) is written after every run. A run fails only when it could not be
//! measured (no failover within a bound, sysbench without its summary); what it
//! measured is reported as it is, whatever the target.
//!
//! With --instances N, N Sluice instances share the replica set and the clients
//! ([`fleet`]); the report adds what the fleet did: promotions, writable servers, the
//! writer each instance routes to.

mod clients;
mod fleet;
mod probe;
mod report;
pub(crate) mod tally;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;
use sluice_sandbox::{self as sandbox, ReplicaSet, ReplicaSetOptions};

use crate::document::Document;
use crate::report::Machine;
use crate::routing::{endpoint, last_line};
use crate::sysbench::{self, DataSet, RunStats, SysbenchCommand};
use crate::tool::Finished;
use crate::topology::{toml_string, MAX_PREPARED_STMT_COUNT};
use crate::{CommonArgs, Ran, Resolved, Sizes};
use fleet::{instance_file, thread_shares, FleetRun, FleetSummary, Instances};
use probe::{ProbeLog, ProbeTarget, Probes, TRX_TABLE, WRITES_TABLE};
use tally::{ErrorText, Replays};

/// Flags of `sluice bench failover` (its defaults are in the `Scenario::Failover`
/// help). --duration and --repeat do not apply: a run lasts --kill-after, the
/// failover and --after, and --runs repeats it.
#[derive(clap::Args, Debug, Clone)]
pub struct FailoverArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Runs, each on a fresh replica set and Sluice [default: 10; demo: 2].
    #[arg(long)]
    pub runs: Option<u32>,
    /// Load before the primary is killed.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub kill_after: Duration,
    /// Load after Sluice has promoted a replica.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub after: Duration,
    /// Probe clients inserting one row per autocommit statement (beside one client
    /// running two-insert transactions).
    #[arg(long, default_value_t = 2)]
    pub probe_writers: u32,
    /// The servers' `binlog_format`. MIXED, MariaDB's default, logs these statements
    /// with the connection that ran them, by which Sluice tells whose commits a
    /// promoted replica has; with ROW (before MariaDB 11.5) it can only tell when every
    /// commit there was acknowledged.
    #[arg(long, value_enum, default_value_t = BinlogFormat::Mixed)]
    pub binlog_format: BinlogFormat,
    /// Sluice's `failover.wrap_autocommit_writes` (on, as Sluice's default): the probes'
    /// autocommit inserts go inside a BEGIN ... COMMIT of Sluice's, so that one whose
    /// COMMIT's reply is lost but that the new writer has gets its own OK rather than
    /// error 1158. `--wrap-autocommit-writes false` measures without it.
    #[arg(long, num_args = 0..=1, default_value_t = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub wrap_autocommit_writes: bool,
    /// Sluice instances in front of the replica set, the same configuration but their
    /// addresses; sysbench's threads and the probes are spread over them.
    #[arg(long, default_value_t = 1)]
    pub instances: u32,
    /// SIGKILL the first Sluice instance together with the primary (with --instances 2
    /// or more): the others must carry out the failover. Its clients' errors are
    /// reported apart and not counted against the target.
    #[arg(long)]
    pub kill_instance: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum BinlogFormat {
    Mixed,
    Row,
    Statement,
}

impl BinlogFormat {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BinlogFormat::Mixed => "MIXED",
            BinlogFormat::Row => "ROW",
            BinlogFormat::Statement => "STATEMENT",
        }
    }
}

/// The servers as Sluice knows them, the primary first; replica N is `set.replicas[N-1]`.
const NAMES: [&str; 3] = ["primary", "replica1", "replica2"];
/// Database of the sysbench and probe tables.
const DATABASE: &str = crate::routing::DATABASE;
/// How long Sluice gets to promote a replica after the kill before the run is failed.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);
/// How often `/v1/servers` is asked whether the writer changed.
const POLL: Duration = Duration::from_millis(50);
/// sysbench runs this much longer than --kill-after and --after together, so that it
/// is still running when the probes stop after a failover of a few seconds.
const SYSBENCH_MARGIN_SECS: u64 = 3;
/// Distinct error texts kept per run and per kind of client.
const ERROR_TEXTS: usize = 5;
/// Ids of lost or doubled writes kept per run.
const IDS_KEPT: usize = 10;
/// Most --instances: each takes 100 connections of every server, and the fleet's
/// slots and the two cores the target is stated for run out well before.
const MAX_INSTANCES: u32 = 8;

/// The flags checked and resolved.
#[derive(Debug, Clone)]
struct Plan {
    runs: u32,
    threads: u32,
    data: DataSet,
    kill_after: Duration,
    after: Duration,
    probe_writers: u32,
    binlog_format: BinlogFormat,
    wrap_autocommit_writes: bool,
    instances: u32,
    kill_instance: bool,
    /// sysbench's --time, whole seconds.
    sysbench_secs: u64,
    /// Of every server: sysbench's threads, each instance's pool (100 per server by
    /// default) and room for the probes, the monitors and the admin.
    max_connections: u32,
}

impl Plan {
    fn resolve(args: &FailoverArgs) -> anyhow::Result<Plan> {
        let c = &args.common;
        let Resolved { threads, data, .. } = c.resolve(&Sizes {
            threads: [&[8], &[4]],
            // Unused: --kill-after and --after say how long a run lasts.
            seconds: [1, 1],
            tables: [4, 2],
            table_size: [10_000, 1_000],
        })?;
        let [threads] = threads[..] else {
            bail!("--threads takes one thread count here: sysbench's load during the failover");
        };
        let runs = args.runs.unwrap_or(if c.demo { 2 } else { 10 });
        if runs == 0 {
            bail!("--runs must be at least 1");
        }
        if args.kill_after.is_zero() || args.after.is_zero() {
            bail!("--kill-after and --after must be longer than 0s");
        }
        if args.instances == 0 || args.instances > MAX_INSTANCES {
            bail!("--instances must be from 1 to {MAX_INSTANCES}");
        }
        if args.kill_instance && args.instances < 2 {
            bail!("--kill-instance needs --instances 2 or more: one must survive to fail over");
        }
        let load = args.kill_after + args.after;
        Ok(Plan {
            runs,
            threads,
            data,
            kill_after: args.kill_after,
            after: args.after,
            probe_writers: args.probe_writers,
            binlog_format: args.binlog_format,
            wrap_autocommit_writes: args.wrap_autocommit_writes,
            instances: args.instances,
            kill_instance: args.kill_instance,
            sysbench_secs: load.as_secs()
                + u64::from(load.subsec_nanos() > 0)
                + SYSBENCH_MARGIN_SECS,
            max_connections: threads
                .saturating_add(100 * args.instances)
                .saturating_add(100),
        })
    }
}

/// sysbench's summary of a run, the part this report reads.
#[derive(Debug, Clone, Serialize)]
struct SysbenchFigures {
    transactions: u64,
    tps: f64,
    ignored_errors: u64,
    /// Of the ignored errors, those of sysbench's intermediate reports before the kill:
    /// the workload's own (deadlocks between its threads), a baseline.
    errors_before_kill: u64,
    /// Of the ignored errors, the server's own conflicts between sysbench's threads
    /// (its deadlock, duplicate-key and lock-wait errors, by their text), which a run
    /// straight at MariaDB gets too: not the failover's.
    conflicts: u64,
    reconnects: u64,
}

impl SysbenchFigures {
    fn new(s: &RunStats, errors_before_kill: u64, conflicts: u64) -> Self {
        SysbenchFigures {
            transactions: s.transactions,
            tps: s.transactions_per_sec,
            ignored_errors: s.ignored_errors,
            errors_before_kill,
            conflicts,
            reconnects: s.reconnects,
        }
    }

    /// `other`'s figures added to these: the sysbench processes of several instances.
    fn add(&mut self, other: &SysbenchFigures) {
        self.transactions += other.transactions;
        self.tps += other.tps;
        self.ignored_errors += other.ignored_errors;
        self.errors_before_kill += other.errors_before_kill;
        self.conflicts += other.conflicts;
        self.reconnects += other.reconnects;
    }
}

/// One run: a replica set, Sluice, the load, the kill and what came of it.
#[derive(Debug, Clone, Serialize, Default)]
struct Run {
    /// 1-based.
    run: u32,
    /// Why the run could not be measured, if it could not.
    failure: Option<String>,
    /// The server Sluice promoted.
    new_writer: Option<String>,
    /// What Sluice says the failover took (`last_failover.took_ms` of `/v1/servers`).
    failover_took_ms: Option<u64>,
    /// From the kill to `/v1/servers` naming another writer (asked every 50 ms): the
    /// monitor's time to find the primary down, and the failover.
    failover_seen_ms: Option<u64>,
    /// The longest time without an acknowledged probe write across the failover.
    write_pause_ms: Option<u64>,
    sysbench: Option<SysbenchFigures>,
    probe_writes_acked: u64,
    probe_write_errors: u64,
    probe_transactions: u64,
    probe_trx_errors: u64,
    replays: Replays,
    /// sysbench's ignored errors and reconnects, and the probes' errors.
    client_errors: Option<u64>,
    /// Acknowledged probe writes missing on the promoted server.
    acked_lost: Option<u64>,
    /// Probe writes found more than once on the promoted server.
    applied_twice: Option<u64>,
    /// No client error but those of transactions refused replay for a mismatch, no
    /// acknowledged write lost, none applied twice; `None` when not measured.
    passed: Option<bool>,
    lost_ids: Vec<i64>,
    twice_ids: Vec<i64>,
    /// The probes' errors, by text.
    probe_errors: Vec<ErrorText>,
    /// The errors sysbench named in its output, by text.
    sysbench_errors: Vec<ErrorText>,
    sysbench_command: Option<String>,
    /// sysbench's output and Sluice's log and configuration, relative to the output
    /// directory.
    sysbench_output: String,
    sluice_log: String,
    sluice_config: String,
    /// With several instances: what the fleet did.
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<FleetRun>,
}

impl Run {
    /// Client errors the target counts: all but those of replays refused because the
    /// transaction's results differed on the new writer, and the workload's own
    /// conflicts.
    fn unexcepted_errors(&self) -> Option<u64> {
        let conflicts = self.sysbench.as_ref().map_or(0, |s| s.conflicts);
        Some(
            self.client_errors?
                .saturating_sub(self.replays.mismatches())
                .saturating_sub(conflicts),
        )
    }

    fn judge(&mut self) {
        self.passed = match (
            &self.failure,
            self.unexcepted_errors(),
            self.acked_lost,
            self.applied_twice,
        ) {
            (None, Some(errors), Some(lost), Some(twice)) => Some(
                errors == 0
                    && lost == 0
                    && twice == 0
                    && self.fleet.as_ref().is_none_or(FleetRun::holds),
            ),
            _ => None,
        };
    }
}

/// The runs taken together.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
struct Summary {
    runs: usize,
    measured: usize,
    /// Runs in which no client error reached a client, mismatch-refused replays
    /// excepted.
    without_client_error: usize,
    passed: usize,
    worst_write_pause_ms: Option<u64>,
    worst_failover_took_ms: Option<u64>,
    acked_lost: u64,
    applied_twice: u64,
    mismatches: u64,
    /// With several instances.
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<FleetSummary>,
}

#[derive(Debug, Clone, Serialize)]
struct Results {
    command: String,
    started_at: String,
    finished_at: Option<String>,
    /// Why the benchmark stopped early, if it did.
    error: Option<String>,
    sluice_version: String,
    sysbench_version: String,
    mariadb_version: Option<String>,
    machine: Machine,
    threads: u32,
    data: DataSet,
    kill_after_ms: u64,
    after_ms: u64,
    probe_writers: u32,
    binlog_format: BinlogFormat,
    wrap_autocommit_writes: bool,
    #[serde(skip_serializing_if = "one")]
    instances: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    kill_instance: bool,
    runs_planned: u32,
    sluice_command: Option<String>,
    prepare_command: Option<String>,
    runs: Vec<Run>,
    summary: Summary,
}

/// Whether a count is 1: a single instance's results keep the fields they always had.
fn one(n: &u32) -> bool {
    *n == 1
}

/// Runs the benchmark, printing the table and where the report is.
pub fn run(args: &FailoverArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

/// [`run`], leaving the latest report in `document`.
fn run_into(args: &FailoverArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let plan = Plan::resolve(args)?;
    let started = SystemTime::now();
    let out = args.common.out_dir("failover", started);
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating {}", out.display()))?;
    let mut results = Results {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        finished_at: None,
        error: None,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
        sysbench_version: sysbench::version(&args.common.sysbench)?,
        mariadb_version: None,
        machine: Machine::detect(),
        threads: plan.threads,
        data: plan.data,
        kill_after_ms: plan.kill_after.as_millis() as u64,
        after_ms: plan.after.as_millis() as u64,
        probe_writers: plan.probe_writers,
        binlog_format: plan.binlog_format,
        wrap_autocommit_writes: plan.wrap_autocommit_writes,
        instances: plan.instances,
        kill_instance: plan.kill_instance,
        runs_planned: plan.runs,
        sluice_command: None,
        prepare_command: None,
        runs: Vec::new(),
        summary: Summary::default(),
    };
    *document = Some(report::write(&out, &mut results)?);
    let measured = measure(args, &plan, &out, &mut results);
    crate::report::conclude(&out, &mut results, measured, document, report::write)
}

/// What every run needs.
struct Bench<'a> {
    args: &'a FailoverArgs,
    plan: &'a Plan,
    sluice_bin: PathBuf,
    out: &'a Path,
    /// Where the probes run.
    runtime: tokio::runtime::Runtime,
}

/// Every run in turn, the report rewritten after each.
fn measure(
    args: &FailoverArgs,
    plan: &Plan,
    out: &Path,
    results: &mut Results,
) -> anyhow::Result<()> {
    let bench = Bench {
        args,
        plan,
        sluice_bin: args.common.sluice_bin()?,
        out,
        runtime: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("starting the probes' runtime")?,
    };
    for n in 1..=plan.runs {
        eprintln!("[{n}/{}] {}", plan.runs, plan.describe());
        let mut run = Run {
            run: n,
            sysbench_output: format!("raw/sysbench-run{n}.txt"),
            sluice_log: format!("raw/sluice-run{n}.log"),
            sluice_config: format!("raw/sluice-run{n}.toml"),
            fleet: (plan.instances > 1).then(|| FleetRun {
                killed_instance: plan.kill_instance.then_some(1),
                ..FleetRun::default()
            }),
            ..Run::default()
        };
        if let Err(e) = bench.one_run(&mut run, results) {
            run.failure = Some(format!("{e:#}"));
        }
        run.judge();
        eprintln!("    {}", report::progress_line(&run));
        results.runs.push(run);
        report::write(out, results)?;
    }
    Ok(())
}

impl Plan {
    /// A progress line's account of what each run does.
    fn describe(&self) -> String {
        let mut s = String::from("a primary and 2 replicas, ");
        if self.instances > 1 {
            let _ = write!(s, "{} Sluice instances; ", self.instances);
        }
        let _ = write!(
            s,
            "sysbench with {} threads and {} probe writers through Sluice; primary ",
            self.threads, self.probe_writers
        );
        if self.kill_instance {
            s.push_str("and the first instance ");
        }
        let _ = write!(
            s,
            "killed after {:?}, load on {:?} after the failover",
            self.kill_after, self.after
        );
        s
    }
}

/// The load of one run while it goes on: sysbench in threads of their own, one per
/// instance, the probes on the runtime.
struct Load {
    started: Instant,
    sysbench: Vec<JoinHandle<anyhow::Result<Finished>>>,
    probes: Probes,
}

/// What came of the kill: the failover, and the load around it, stopped.
struct Killed {
    /// The server Sluice promoted, and when `/v1/servers` first named it.
    new_writer: String,
    recovered: Instant,
    killed: Instant,
    /// The kill's time from sysbench's start.
    killed_after: Duration,
    /// One per instance, first instance first.
    sysbench: Vec<anyhow::Result<Finished>>,
    probes: Vec<ProbeLog>,
}

impl<'a> Bench<'a> {
    /// One run, filling in `run` as far as it gets. The replica set and Sluice stop
    /// when their handles drop, however this returns.
    fn one_run(&self, run: &mut Run, results: &mut Results) -> anyhow::Result<()> {
        let set = ReplicaSet::start(ReplicaSetOptions {
            replicas: NAMES.len() - 1,
            semi_sync: true,
            max_connections: self.plan.max_connections,
            // sysbench prepares its statements in every thread, and Sluice keeps them on
            // each backend connection: the default limit is soon reached.
            extra_args: vec![
                format!("--max-prepared-stmt-count={MAX_PREPARED_STMT_COUNT}"),
                format!("--binlog-format={}", self.plan.binlog_format.name()),
            ],
        })
        .context("starting the sandbox replica set")?;
        if results.mariadb_version.is_none() {
            results.mariadb_version = last_line(&set.primary.execute("SELECT VERSION()")?);
        }
        self.prepare(&set, run, results)?;
        let mut sluices = self.start_instances(&set, run, results)?;

        let k = self.kill_under_load(&set, &mut sluices, run)?;
        run.failover_seen_ms = Some((k.recovered - k.killed).as_millis() as u64);
        run.new_writer = Some(k.new_writer.clone());
        let (readings, settled) = fleet::read_after(&sluices);
        if readings.iter().all(Option::is_none) {
            bail!("no Sluice instance answered /v1/servers after the run");
        }
        run.replays = fleet::replays_of(&readings);
        run.failover_took_ms = fleet::failover_took_ms(&readings);
        sluices.check()?;
        if let Some(f) = &mut run.fleet {
            f.record(&readings, settled, fleet::writable_servers(&set)?);
        }
        sluices.stop();

        let index = NAMES
            .iter()
            .position(|n| *n == k.new_writer)
            .with_context(|| {
                format!(
                    "Sluice promoted a server it was not given: {}",
                    k.new_writer
                )
            })?;
        let promoted = set.servers().nth(index).expect("one server per name");
        self.tally_clients(run, k, promoted)
    }

    /// The load through the instances for --kill-after, the primary killed (and with
    /// --kill-instance the first instance), the failover waited for, the load on for
    /// --after; then the load stopped (always, once started, even when no failover
    /// came).
    fn kill_under_load(
        &self,
        set: &ReplicaSet,
        sluices: &mut Instances,
        run: &mut Run,
    ) -> anyhow::Result<Killed> {
        let addrs: Vec<SocketAddr> = sluices.list.iter().map(|i| i.addr).collect();
        let load = self.start_load(&addrs, run);
        // The load's length, not a wait for anything.
        std::thread::sleep(self.plan.kill_after);
        let killed = Instant::now();
        let killed_after = killed - load.started;
        let failover = set
            .primary
            .kill()
            .context("killing the primary")
            .and_then(|()| match self.plan.kill_instance {
                true => sluices.kill_first(),
                false => Ok(()),
            })
            .and_then(|()| {
                let admins: Vec<_> = sluices.survivors().map(|i| &i.admin).collect();
                fleet::wait_for_failover(&admins, FAILOVER_TIMEOUT)
            });
        if failover.is_ok() {
            std::thread::sleep(self.plan.after);
        }
        let (sysbench, probes) = self.finish_load(load);
        let (new_writer, recovered) = failover?;
        Ok(Killed {
            new_writer,
            recovered,
            killed,
            killed_after,
            sysbench,
            probes,
        })
    }

    /// The probe tables and sysbench's tables on the primary, replicated.
    fn prepare(&self, set: &ReplicaSet, run: &Run, results: &mut Results) -> anyhow::Result<()> {
        set.primary
            .execute(&format!(
                "CREATE DATABASE IF NOT EXISTS {DATABASE};\n\
                 CREATE TABLE {DATABASE}.{WRITES_TABLE} (id BIGINT NOT NULL, KEY (id));\n\
                 CREATE TABLE {DATABASE}.{TRX_TABLE} (id BIGINT NOT NULL, KEY (id));"
            ))
            .context("creating the database and the probe tables on the primary")?;
        let data = self.plan.data;
        let threads = data
            .tables
            .min(std::thread::available_parallelism().map_or(1, |n| n.get()) as u32);
        let prepare = SysbenchCommand::prepare(
            &self.args.common.sysbench,
            &endpoint(set.primary.addr()),
            data,
            threads,
        );
        results.prepare_command = Some(prepare.display());
        prepare.execute_checked(
            "preparing the data on the primary (sysbench prepare)",
            &self.out.join(format!("raw/prepare-run{}.txt", run.run)),
            Duration::from_secs(3600),
        )?;
        set.wait_caught_up(Duration::from_secs(600))
            .context("waiting for the replicas to apply the sysbench tables")
    }

    /// sysbench and the probes through the Sluice instances at `addrs`: one sysbench
    /// per instance with its share of the threads (one process per instance tells whose
    /// clients got which errors), the probes spread over them in turn.
    fn start_load(&self, addrs: &[SocketAddr], run: &mut Run) -> Load {
        let plan = self.plan;
        let started = Instant::now();
        let mut sysbench = Vec::new();
        for ((number, addr), threads) in (1..)
            .zip(addrs)
            .zip(thread_shares(plan.threads, plan.instances))
        {
            let options = [
                format!("--threads={threads}"),
                format!("--time={}", plan.sysbench_secs),
                "--report-interval=1".to_string(),
                "--mysql-ignore-errors=all".to_string(),
                "--db-ps-mode=auto".to_string(),
                // The level at which sysbench names each error it ignores (code and
                // message), and little else.
                "--verbosity=5".to_string(),
            ];
            let command = SysbenchCommand::run_script(
                &self.args.common.sysbench,
                "oltp_read_write",
                &endpoint(*addr),
                plan.data,
                &options,
                self.out,
            );
            if number == 1 {
                run.sysbench_command = Some(command.display());
            }
            if let Some(f) = &mut run.fleet {
                f.sysbench_commands.push(command.display());
            }
            let log = self
                .out
                .join(instance_file(&run.sysbench_output, number, plan.instances));
            // Connecting and preparing take a while of their own.
            let deadline = Duration::from_secs(plan.sysbench_secs + 60);
            sysbench.push(std::thread::spawn(move || {
                command.execute(&log, deadline, |_, _| {})
            }));
        }
        let targets: Vec<ProbeTarget> = addrs
            .iter()
            .map(|addr| ProbeTarget {
                addr: addr.to_string(),
                user: sandbox::ADMIN_USER.into(),
                password: sandbox::ADMIN_PASSWORD.into(),
                database: DATABASE.into(),
            })
            .collect();
        let probes = Probes::start(&self.runtime, &targets, plan.probe_writers);
        Load {
            started,
            sysbench,
            probes,
        }
    }

    /// Stops the probes and waits for every sysbench (each bounded by its own
    /// deadline).
    fn finish_load(&self, load: Load) -> (Vec<anyhow::Result<Finished>>, Vec<ProbeLog>) {
        let probes = load.probes.finish(&self.runtime);
        let finished = load
            .sysbench
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(anyhow::anyhow!("the thread running sysbench panicked"))
                })
            })
            .collect();
        (finished, probes)
    }
}

/// The Sluice configuration: the three servers, multiplexing, the read/write split,
/// failover with the replication account, the monitor at its defaults (the target is
/// stated for them), and the admin API the outcome is read from.
fn sluice_config(
    addresses: &[SocketAddr],
    port: u16,
    admin_port: u16,
    token: &str,
    wrap_autocommit_writes: bool,
) -> String {
    let mut text = format!(
        "# Written by `sluice bench failover`.\n\
         [log]\nlevel = \"info\"\n\n\
         [[listeners]]\naddress = \"127.0.0.1:{port}\"\n\n\
         [[users]]\nname = {}\npassword = {}\n",
        toml_string(sandbox::ADMIN_USER),
        toml_string(sandbox::ADMIN_PASSWORD),
    );
    for (name, address) in NAMES.iter().zip(addresses) {
        let _ = write!(
            text,
            "\n[[servers]]\nname = {}\naddress = \"{address}\"\n",
            toml_string(name)
        );
    }
    let _ = write!(
        text,
        "\n[pool]\nmultiplex = true\n\n\
         [routing]\nread_write_split = true\n\n\
         [failover]\nreplication_user = {}\nreplication_password = {}\n\
         wrap_autocommit_writes = {wrap_autocommit_writes}\n\n\
         [admin]\naddress = \"127.0.0.1:{admin_port}\"\ntoken = {}\n",
        toml_string(sandbox::REPL_USER),
        toml_string(sandbox::REPL_PASSWORD),
        toml_string(token)
    );
    text
}

crate::report::ending_by_runs!(Results);

#[cfg(test)]
mod tests;
