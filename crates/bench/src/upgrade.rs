//! `sluice bench upgrade`: what clients see when Sluice restarts without refusing a
//! connection (`[handover] socket`, SIGUSR2), ten times under load.
//!
//! A sandbox MariaDB and one Sluice started by the benchmark, with a hand-over socket,
//! the query cache on (every SELECT) and the admin API; sysbench `oltp_read_write`
//! (prepared statements) and the probe clients ([`probe`]: idle connections, a
//! transaction spanning the hand-overs, a prepared statement, connect-query-disconnect)
//! through it. Every --duration, SIGUSR2 to the process serving then, and a bounded
//! wait for its successor to be ready ([`serving`]: which process serves is read from
//! the log they share). Each hand-over gives its successor a configuration that
//! differs only in the admin API's port, so that each process's own cache counters and
//! session counts are read from its own port (the API does not say which process
//! answered when two share one).
//!
//! Per hand-over ([`tally`]): the client errors, lost connections, changed connection
//! ids and lost session state of each kind of client, the longest stall, the p99
//! latency around it against the window before, the cache hit rate after against
//! before, the old process's memory and whether it exited within the drain bound.
//! Everything runs embedded and is stopped at the end, successors included, on error
//! too; the report ([`report`]) is written at the start and the end.

mod load;
mod probe;
mod report;
mod serving;
mod tally;

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;
use sluice_sandbox as sandbox;

use crate::client::{Client, Reply};
use crate::document::Document;
use crate::report::Machine;
use crate::routing::{admin_token, AdminApi};
use crate::sysbench::{self, parse_interval, DataSet, Endpoint, Interval, SysbenchCommand};
use crate::topology::{self, Credentials, EmbeddedOptions, Role, Topology};
use crate::{CommonArgs, Ran, Resolved, Sizes};
use load::RunningSysbench;
use probe::{Kind, Op, ProbeTarget, Probes, TRX_TABLE};
use serving::{Ready, Serving};
use tally::{Reports, Seen};

/// Flags of `sluice bench upgrade` (its defaults are in the `Scenario::Upgrade` help).
/// --duration is the time from one hand-over's successor being ready to the next
/// SIGUSR2; --threads takes one count; --repeat does not apply.
#[derive(clap::Args, Debug, Clone)]
pub struct UpgradeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Hand-overs in the run.
    #[arg(long, default_value_t = 10)]
    pub handovers: u32,
    /// The windows the cache hit rate is read over, before the SIGUSR2 and after the
    /// successor is ready, and the p99 latency's window before [default: 10s, or half
    /// of --duration if that is shorter].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub window: Option<Duration>,
    /// Sluice's `[handover] drain_timeout`: how long sessions that cannot move may go
    /// on in the old process.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub drain_timeout: Duration,
    /// Sluice without multiplexing (`multiplex = false`): each session keeps a backend
    /// connection of its own and cannot move at a hand-over; it goes on in the old
    /// process, and what is left at the drain bound is ended.
    #[arg(long)]
    pub dedicated: bool,
}

/// The account the load and the probes use, created on the embedded server.
const USER: &str = "sbtest";
const PASSWORD: &str = "sbtest-upgrade";
const DATABASE: &str = "sbtest";
/// The "during" window of a hand-over runs from the SIGUSR2 to this long after the
/// successor is ready: sessions move right after it, a transaction's at its COMMIT (the
/// probe's last about a second).
const SETTLE: Duration = Duration::from_secs(2);
/// An old process counts as released within the drain bound if it exits this soon
/// after it: the bound ends the sessions left, then the process stops.
const RELEASE_SLACK: Duration = Duration::from_secs(1);
/// Sluice's defaults the benchmark keeps: `[handover] ready_timeout` and `[limits]
/// shutdown_grace`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Distinct failure texts kept for the report.
const FAILURE_TEXTS: usize = 10;

/// The flags checked, with the scenario's defaults filled in.
#[derive(Debug, Clone)]
struct Plan {
    handovers: u32,
    threads: u32,
    /// From a successor ready to the next SIGUSR2.
    spacing: Duration,
    window: Duration,
    drain_timeout: Duration,
    dedicated: bool,
    data: DataSet,
}

impl Plan {
    fn resolve(args: &UpgradeArgs) -> anyhow::Result<Plan> {
        let Resolved {
            threads,
            duration,
            data,
        } = args.common.resolve(&Sizes {
            threads: [&[16], &[16]],
            seconds: [30, 10],
            tables: [4, 2],
            table_size: [10_000, 1_000],
        })?;
        let [threads] = threads[..] else {
            bail!("--threads takes one thread count here: sysbench's load across the hand-overs");
        };
        let window = args
            .window
            .unwrap_or_else(|| Duration::from_secs(10).min(duration / 2));
        if args.handovers == 0 {
            bail!("--handovers must be at least 1");
        }
        if window.is_zero() || window > duration {
            bail!("--window must be longer than 0s and at most --duration");
        }
        if args.drain_timeout.is_zero() {
            bail!("--drain-timeout must be longer than 0s");
        }
        Ok(Plan {
            handovers: args.handovers,
            threads,
            spacing: duration,
            window,
            drain_timeout: args.drain_timeout,
            dedicated: args.dedicated,
            data,
        })
    }
}

/// One hand-over and what came of it.
#[derive(Debug, Clone, Serialize, Default)]
struct Handover {
    /// 1-based.
    number: u32,
    /// Why it could not be measured, if it could not.
    failure: Option<String>,
    old_pid: u32,
    new_pid: Option<u32>,
    /// From the SIGUSR2 to the old process logging that the successor is ready.
    ready_ms: Option<u64>,
    /// The old process's resident memory just before the SIGUSR2.
    old_rss_mib: Option<f64>,
    /// From ready to the old process's exit; `None` if it still ran at the watch's end.
    old_exit_ms: Option<u64>,
    /// Whether it exited within the drain bound (and a second).
    released: Option<bool>,
    /// Sessions the successor took over (its `sluice_sessions_moved_in_total`).
    moved_in: Option<u64>,
    /// The old process's cache hit rate over the window before the SIGUSR2, and the
    /// successor's over the window after it was ready.
    hit_rate_before: Option<f64>,
    hit_rate_after: Option<f64>,
    /// What clients saw from this SIGUSR2 to the next (or the end of the load).
    seen: Seen,
    /// sysbench ended by itself in that stretch: its clients' figures stop there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    sysbench_ended: bool,
    /// The longest wait of a probe in flight from the SIGUSR2 to [`SETTLE`] after ready.
    longest_stall_ms: Option<f64>,
    longest_stall_kind: Option<Kind>,
    /// The same over the window before the SIGUSR2, to set it against.
    longest_stall_before_ms: Option<f64>,
    /// The probes' p99 latency over the window before and during the hand-over.
    probe_p99_before_ms: Option<f64>,
    probe_p99_during_ms: Option<f64>,
    /// sysbench's worst one-second p99 in the same windows.
    sysbench_p99_before_ms: Option<f64>,
    sysbench_p99_during_ms: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Results {
    command: String,
    started_at: String,
    finished_at: Option<String>,
    error: Option<String>,
    sluice_version: String,
    sysbench_version: String,
    mariadb_version: Option<String>,
    machine: Machine,
    threads: u32,
    data: DataSet,
    handovers_planned: u32,
    spacing_ms: u64,
    window_ms: u64,
    settle_ms: u64,
    drain_timeout_ms: u64,
    /// Multiplexing off: no session can move.
    dedicated: bool,
    sluice_command: Option<String>,
    sysbench_command: Option<String>,
    prepare_command: Option<String>,
    /// What clients saw before the first SIGUSR2 (after sysbench started).
    before_first: Option<Seen>,
    runs: Vec<Handover>,
    /// The whole load, by kind of client.
    total: Option<Seen>,
    longest_stall_ms: Option<f64>,
    /// The probes' failures by text, most frequent first.
    failures: Vec<(String, u64)>,
    /// How sysbench ended, if it ended before the benchmark stopped it, and its last
    /// report's second then.
    sysbench_failure: Option<String>,
    sysbench_ended_after_s: Option<u64>,
}

/// Runs the benchmark, printing the table and where the report is.
pub fn run(args: &UpgradeArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

/// [`run`], leaving the latest report in `document`.
fn run_into(args: &UpgradeArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let plan = Plan::resolve(args)?;
    let started = SystemTime::now();
    let out = args.common.out_dir("upgrade", started);
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
        handovers_planned: plan.handovers,
        spacing_ms: plan.spacing.as_millis() as u64,
        window_ms: plan.window.as_millis() as u64,
        settle_ms: SETTLE.as_millis() as u64,
        drain_timeout_ms: plan.drain_timeout.as_millis() as u64,
        dedicated: plan.dedicated,
        sluice_command: None,
        sysbench_command: None,
        prepare_command: None,
        before_first: None,
        runs: Vec::new(),
        total: None,
        longest_stall_ms: None,
        failures: Vec::new(),
        sysbench_failure: None,
        sysbench_ended_after_s: None,
    };
    *document = Some(report::write(&out, &mut results)?);
    let measured = measure(args, &plan, &out, &mut results);
    crate::report::conclude(&out, &mut results, measured, document, report::write)
}

/// The servers, the load and the hand-overs; everything started is stopped on return.
fn measure(
    args: &UpgradeArgs,
    plan: &Plan,
    out: &Path,
    results: &mut Results,
) -> anyhow::Result<()> {
    let creds = Credentials {
        user: USER.into(),
        password: PASSWORD.into(),
        database: DATABASE.into(),
        insert_schema: "sluice_slap".into(),
    };
    let pool = plan.threads + 32;
    eprintln!("starting MariaDB...");
    let topology = Topology::embedded(
        &EmbeddedOptions {
            max_connections: pool + 100,
            passthrough: false,
            cached: false,
            cached_by_table: false,
            dedicated: false,
            traced: false,
            traced_all: false,
            otlp_endpoint: None,
            binlog: false,
            haproxy: None,
            pool_max: pool,
            sluice_bin: args.common.sluice_bin()?,
            dir: out.join("raw"),
            extra_config: String::new(),
            hop: None,
            server_cpus: None,
            replicas: 0,
        },
        &creds,
    )?;
    results.mariadb_version = topology.mariadb_version.clone();
    let direct = topology.direct.clone().context("no database")?;
    let backend = format!("{}:{}", direct.host, direct.port);
    prepare(args, plan, &direct_endpoint(&direct), out, results)?;

    let bench = Bench::new(args, plan, out, backend, &creds)?;
    std::fs::write(&bench.config, bench.config_text(bench.first_admin_port))
        .with_context(|| format!("writing {}", bench.config.display()))?;
    eprintln!("starting Sluice with a hand-over socket...");
    let (serving, command) = Serving::start(
        &args.common.sluice_bin()?,
        &bench.config,
        bench.port,
        &out.join("raw/sluice.log"),
    )?;
    results.sluice_command = Some(command);
    let measured = bench.under_load(serving, results);
    drop(topology);
    measured
}

fn direct_endpoint(direct: &topology::Target) -> Endpoint {
    Endpoint {
        host: direct.host.clone(),
        port: direct.port,
        user: USER.into(),
        password: PASSWORD.into(),
        database: DATABASE.into(),
        show_password: true,
    }
}

/// sysbench's tables and the probes' own, straight on MariaDB.
fn prepare(
    args: &UpgradeArgs,
    plan: &Plan,
    direct: &Endpoint,
    out: &Path,
    results: &mut Results,
) -> anyhow::Result<()> {
    let threads = plan
        .data
        .tables
        .min(std::thread::available_parallelism().map_or(1, |n| n.get()) as u32);
    let prepare = SysbenchCommand::prepare(&args.common.sysbench, direct, plan.data, threads);
    results.prepare_command = Some(prepare.display());
    eprintln!(
        "preparing {} tables x {} rows...",
        plan.data.tables, plan.data.table_size
    );
    prepare.execute_checked(
        "preparing the data (sysbench prepare)",
        &out.join("raw/prepare.txt"),
        Duration::from_secs(3600),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let addr = format!("{}:{}", direct.host, direct.port);
        let mut c = Client::connect(&addr, USER, PASSWORD).await?;
        let sql = format!(
            "CREATE TABLE {DATABASE}.{TRX_TABLE} (txn BIGINT NOT NULL, n INT NOT NULL, \
             KEY (txn)) ENGINE=InnoDB"
        );
        match c.query(&sql).await? {
            Reply::Ok { .. } => Ok(()),
            other => bail!("creating the probes' table: {other:?}"),
        }
    })
}

/// What the run needs while the load goes on.
struct Bench<'a> {
    args: &'a UpgradeArgs,
    plan: &'a Plan,
    out: &'a Path,
    config: PathBuf,
    backend: String,
    creds: Credentials,
    port: u16,
    first_admin_port: u16,
    token: String,
    socket: PathBuf,
    runtime: tokio::runtime::Runtime,
}

/// A hand-over's times, for the tally after the load.
struct Times {
    signalled: Instant,
    ready: Option<Instant>,
}

impl<'a> Bench<'a> {
    fn new(
        args: &'a UpgradeArgs,
        plan: &'a Plan,
        out: &'a Path,
        backend: String,
        creds: &Credentials,
    ) -> anyhow::Result<Bench<'a>> {
        Ok(Bench {
            args,
            plan,
            out,
            config: out.join("raw/sluice.toml"),
            backend,
            creds: creds.clone(),
            port: sandbox::free_port(),
            first_admin_port: sandbox::free_port(),
            token: admin_token("upgrade"),
            socket: handover_socket(out)?,
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("starting the probes' runtime")?,
        })
    }

    /// The configuration of every process of the chain but for its admin port.
    fn config_text(&self, admin_port: u16) -> String {
        let backend = self.backend.parse().expect("an address we formatted");
        let pool = self.plan.threads + 32;
        let mut base =
            topology::sluice_config(self.port, (backend, &[]), &self.creds, pool, Role::Cached);
        if self.plan.dedicated {
            base = base.replacen("[pool]\n", "[pool]\nmultiplex = false\n", 1);
        }
        sluice_config(
            base,
            &self.socket,
            self.plan.drain_timeout,
            admin_port,
            &self.token,
        )
    }

    fn admin(&self, port: u16) -> AdminApi {
        AdminApi::new(format!("127.0.0.1:{port}"), self.token.clone())
    }

    /// sysbench and the probes through Sluice, the hand-overs, then the tally; the load
    /// and every Sluice process are stopped however this returns.
    fn under_load(&self, mut serving: Serving, results: &mut Results) -> anyhow::Result<()> {
        let sysbench = self.start_sysbench(results)?;
        let loaded = sysbench.started;
        let target = ProbeTarget {
            addr: format!("127.0.0.1:{}", self.port),
            user: USER.into(),
            password: PASSWORD.into(),
            database: DATABASE.into(),
            table_size: self.plan.data.table_size,
        };
        let probes = Probes::start(&self.runtime, &target);
        let mut times = Vec::new();
        let mut watchers = Vec::new();
        let measured = self.hand_overs(&mut serving, loaded, results, &mut times, &mut watchers);
        let ended = Instant::now();
        let ops = probes.finish(&self.runtime);
        let (output, sysbench_failure) = sysbench.stop();
        let intervals: Vec<Interval> = output.lines().filter_map(parse_interval).collect();
        let errors = tally::sysbench_errors(&output);
        if sysbench_failure.is_some() {
            results.sysbench_ended_after_s = Some(intervals.last().map_or(0, |i| i.at_secs));
        }
        results.sysbench_failure = sysbench_failure;
        for (index, watcher) in watchers {
            let exited: Option<Duration> = watcher.join().unwrap_or(None);
            let h: &mut Handover = &mut results.runs[index];
            h.old_exit_ms = exited.map(|d| d.as_millis() as u64);
            h.released = Some(exited.is_some_and(|d| d <= self.plan.drain_timeout + RELEASE_SLACK));
        }
        serving.stop();
        // The last process leaves its hand-over socket for a successor that never comes.
        let _ = std::fs::remove_file(&self.socket);
        let reports = Reports {
            start: loaded,
            intervals: &intervals,
            errors: &errors,
        };
        self.tally(results, &ops, &reports, &times, (loaded, ended));
        measured
    }

    /// Every hand-over in turn, each after --duration of load since the last one was
    /// ready (the first after --duration of load), then --duration more of load.
    fn hand_overs(
        &self,
        serving: &mut Serving,
        loaded: Instant,
        results: &mut Results,
        times: &mut Vec<Times>,
        watchers: &mut Vec<(usize, JoinHandle<Option<Duration>>)>,
    ) -> anyhow::Result<()> {
        let mut admin_port = self.first_admin_port;
        let mut since = loaded;
        for number in 1..=self.plan.handovers {
            let signal_at = since + self.plan.spacing;
            let mut h = Handover {
                number,
                ..Handover::default()
            };
            h.hit_rate_before = self.window_before(admin_port, signal_at);
            h.old_pid = serving.pid();
            h.old_rss_mib = serving::rss_mib(h.old_pid);
            let next_port = sandbox::free_port();
            std::fs::write(&self.config, self.config_text(next_port))?;
            let signalled = Instant::now();
            match serving.hand_over(READY_TIMEOUT + Duration::from_secs(10)) {
                Ok(ready) => {
                    admin_port = next_port;
                    since = ready.ready;
                    times.push(Times {
                        signalled: ready.signalled,
                        ready: Some(ready.ready),
                    });
                    let bound = self.plan.drain_timeout + SHUTDOWN_GRACE + Duration::from_secs(5);
                    watchers.push((
                        results.runs.len(),
                        serving::watch_exit(h.old_pid, ready.ready, bound),
                    ));
                    self.after(&mut h, &ready, admin_port);
                }
                Err(e) => {
                    times.push(Times {
                        signalled,
                        ready: None,
                    });
                    since = Instant::now();
                    h.failure = Some(format!("{e:#}"));
                    // The old process goes on serving, with its admin port.
                    std::fs::write(&self.config, self.config_text(admin_port))?;
                }
            }
            eprintln!("  {}", report::progress_line(&h));
            results.runs.push(h);
            serving.check()?;
        }
        sleep_until(since + self.plan.spacing);
        Ok(())
    }

    /// Waits until `signal_at`, reading the serving process's cache counters --window
    /// before it and at it; its hit rate over that window.
    fn window_before(&self, admin_port: u16, signal_at: Instant) -> Option<f64> {
        let admin = self.admin(admin_port);
        sleep_until(signal_at.checked_sub(self.plan.window).unwrap_or(signal_at));
        let start = cache_counts(&admin);
        sleep_until(signal_at);
        let end = cache_counts(&admin);
        tally::hit_rate(start?, end?)
    }

    /// The successor's figures over the window after it was ready.
    fn after(&self, h: &mut Handover, ready: &Ready, admin_port: u16) {
        h.new_pid = Some(ready.successor);
        h.ready_ms = Some((ready.ready - ready.signalled).as_millis() as u64);
        let admin = self.admin(admin_port);
        let start = cache_counts_when_up(&admin);
        sleep_until(ready.ready + self.plan.window);
        let end = cache_counts(&admin);
        h.hit_rate_after = start.zip(end).and_then(|(s, e)| tally::hit_rate(s, e));
        h.moved_in = admin
            .get_json("/v1/stats")
            .ok()
            .and_then(|j| j["sluice_sessions_moved_in_total"].as_u64());
    }

    /// sysbench through Sluice, until stopped; returns once its threads started.
    fn start_sysbench(&self, results: &mut Results) -> anyhow::Result<RunningSysbench> {
        let plan = self.plan;
        // Longer than any run: it is stopped when the hand-overs are done.
        let secs = plan.spacing.as_secs().max(1) * u64::from(plan.handovers + 2) + 3600;
        let options = [
            format!("--threads={}", plan.threads),
            format!("--time={secs}"),
            "--report-interval=1".to_string(),
            "--percentile=99".to_string(),
            "--mysql-ignore-errors=all".to_string(),
            "--db-ps-mode=auto".to_string(),
            // The level at which sysbench names each error it ignores, by which its own
            // conflicts are told from what the hand-overs cause.
            "--verbosity=5".to_string(),
        ];
        let endpoint = Endpoint {
            host: "127.0.0.1".into(),
            port: self.port,
            user: USER.into(),
            password: PASSWORD.into(),
            database: DATABASE.into(),
            show_password: true,
        };
        let command = SysbenchCommand::run_script(
            &self.args.common.sysbench,
            "oltp_read_write",
            &endpoint,
            plan.data,
            &options,
            self.out,
        );
        results.sysbench_command = Some(command.display());
        RunningSysbench::start(command, &self.out.join("raw/sysbench.txt"))
    }

    /// The figures of the clients, window by window.
    fn tally(
        &self,
        results: &mut Results,
        ops: &[Op],
        reports: &Reports<'_>,
        times: &[Times],
        (loaded, ended): (Instant, Instant),
    ) {
        if let Some(first) = times.first() {
            results.before_first = Some(tally::seen(ops, reports, loaded, first.signalled));
        }
        for (i, (h, t)) in results.runs.iter_mut().zip(times).enumerate() {
            let next = times.get(i + 1).map_or(ended, |n| n.signalled);
            h.seen = tally::seen(ops, reports, t.signalled, next);
            let before = t.signalled.checked_sub(self.plan.window).unwrap_or(loaded);
            let settled = t.ready.unwrap_or(t.signalled) + SETTLE;
            h.probe_p99_before_ms = tally::p99_ms(ops, before, t.signalled);
            h.probe_p99_during_ms = tally::p99_ms(ops, t.signalled, settled);
            // Only the seconds that ended before the signal: the one it fell in is the
            // hand-over's.
            let last_whole = t
                .signalled
                .checked_sub(Duration::from_secs(1))
                .unwrap_or(loaded);
            h.sysbench_p99_before_ms = reports.worst_percentile_ms(before, last_whole);
            h.sysbench_p99_during_ms = reports.worst_percentile_ms(t.signalled, settled);
            let stall = tally::longest_stall(ops, t.signalled, settled);
            h.longest_stall_ms = stall.map(|(d, _)| d.as_secs_f64() * 1000.0);
            h.longest_stall_kind = stall.map(|(_, k)| k);
            h.longest_stall_before_ms = tally::longest_stall(ops, before, t.signalled)
                .map(|(d, _)| d.as_secs_f64() * 1000.0);
        }
        if let Some(after) = results.sysbench_ended_after_s {
            let at = loaded + Duration::from_secs(after);
            let during = times.iter().rposition(|t| t.signalled <= at);
            if let Some(h) = during.and_then(|i| results.runs.get_mut(i)) {
                h.sysbench_ended = true;
            }
        }
        results.total = Some(tally::seen(ops, reports, loaded, ended));
        results.longest_stall_ms = results
            .runs
            .iter()
            .filter_map(|h| h.longest_stall_ms)
            .reduce(f64::max);
        results.failures = tally::failure_texts(ops, FAILURE_TEXTS);
    }
}

/// Where the hand-over socket goes: in the report's directory when its path fits a Unix
/// socket's (108 bytes), else in the temporary directory under this process's id.
fn handover_socket(out: &Path) -> anyhow::Result<PathBuf> {
    let in_out = std::env::current_dir()?.join(out).join("raw/handover.sock");
    if in_out.as_os_str().len() < 100 {
        return Ok(in_out);
    }
    Ok(std::env::temp_dir().join(format!("sluice-bench-upgrade-{}.sock", std::process::id())))
}

/// The configuration of an embedded caching Sluice (`base`), with the hand-over socket,
/// the drain bound, the admin API and no fleet: sysbench's and the probes' sessions are
/// the only ones it holds.
fn sluice_config(
    base: String,
    socket: &Path,
    drain_timeout: Duration,
    admin_port: u16,
    token: &str,
) -> String {
    format!(
        "{base}\n[handover]\nsocket = {}\ndrain_timeout = \"{}\"\n\n\
         [admin]\naddress = \"127.0.0.1:{admin_port}\"\ntoken = {}\n\n\
         [fleet]\nenabled = false\n",
        topology::toml_string(&socket.to_string_lossy()),
        humantime::format_duration(drain_timeout),
        topology::toml_string(token),
    )
}

/// (hits, misses) of the process behind `admin`'s port.
fn cache_counts(admin: &AdminApi) -> Option<(u64, u64)> {
    let stats: Value = admin.get_json("/v1/cache/stats").ok()?;
    let totals = &stats["totals"];
    Some((totals["hits"].as_u64()?, totals["misses"].as_u64()?))
}

/// [`cache_counts`] of a process just ready, whose admin API may take a moment more
/// to answer: asked until it does, for at most 2 s.
fn cache_counts_when_up(admin: &AdminApi) -> Option<(u64, u64)> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let counts = cache_counts(admin);
        if counts.is_some() || Instant::now() >= deadline {
            return counts;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sleeps until `at` (the load's schedule, not a wait for anything).
fn sleep_until(at: Instant) {
    if let Some(left) = at.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

/// Counts of one kind of client, for the report's columns.
fn of_kind(seen: &Seen, kind: Kind) -> [u64; 5] {
    [
        seen.operations.get(kind),
        seen.errors.get(kind),
        seen.lost.get(kind),
        seen.ids_changed.get(kind),
        seen.state_lost.get(kind),
    ]
}

/// Whether no plain-TCP client (every client of this benchmark) saw an error or lost
/// its connection in a hand-over's stretch, and sysbench ran through it.
fn clean(h: &Handover) -> bool {
    h.seen.errors.total() == 0 && h.seen.lost.total() == 0 && !h.sysbench_ended
}

crate::report::ending_by_runs!(Results);

#[cfg(test)]
mod tests;
