//! Running the cache scenario's plan: the servers started or found, the data prepared,
//! every step measured with progress on the terminal, the report rewritten after each
//! run, and everything started removed at the end (or on Ctrl-C).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};

use super::cpu::{per_unit, CpuClock};
use super::progress::Progress;
use super::traced::{self, SpanClock};
use super::{available, staleness, CacheArgs, Plan, Scenario, Step};
use crate::document::{self, Document};
use crate::mysqlslap::{self, InsertSpec, SlapCommand};
use crate::report::{
    self, Commands, InsertRecord, InsertStats, Machine, Outcome, Report, RunRecord, Settings,
    Status,
};
use crate::sysbench::{self, Endpoint, RunSpec, SysbenchCommand};
use crate::topology::{self, Credentials, EmbeddedOptions, Proxies, SpanCount, Target, Topology};
use crate::Ran;

/// Runs the benchmark; blocks until done. Results are written (and rewritten after
/// every run) to the output directory; an error after measuring began still leaves the
/// partial report there.
pub fn run(args: &CacheArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

/// [`run`], leaving the final report in `document` once there is one.
fn run_into(args: &CacheArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let started_at = SystemTime::now();
    let mut plan = Plan::resolve(args, started_at)?;
    let sysbench_version = if plan.has_sysbench() {
        Some(sysbench::version(&args.common.sysbench)?)
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
    if plan.embedded() {
        available::check_cache_support(&mut plan, args)?;
        available::check_haproxy(&mut plan, args);
        available::check_tracing(&mut plan, args)?;
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
        staleness: None,
    };
    report.write(&out)?;

    let interrupted = watch_interrupt();
    let result = Bench {
        args,
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
    let written = report.document();
    let paths = written.write(&out)?;
    let sections = document::markdown_sections(&written.sections);
    *document = Some(written);
    if report.runs_total() == 0 {
        // Nothing measured: the error says why; the directory holds the logs.
        eprintln!("nothing measured; logs in {}", out.display());
        return result;
    }
    println!("{}", sections.trim_end());
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

pub(super) fn credentials(args: &CacheArgs) -> Credentials {
    Credentials {
        user: args.server.mysql_user.clone(),
        password: args.server.mysql_password.clone(),
        database: args.server.mysql_db.clone(),
        insert_schema: args.insert_schema.clone(),
    }
}

/// One benchmark run in progress.
struct Bench<'a> {
    args: &'a CacheArgs,
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
        let mut topology = self.topology(&creds)?;
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
            .or_else(|| {
                use Scenario::*;
                [Passthrough, Dedicated, Cached, CachedByTable, Haproxy]
                    .into_iter()
                    .find_map(|s| s.proxy_in(&topology).map(|s| s.target.clone()))
            })
            .expect("a plan has at least one scenario with a target");
        let data_endpoint = self.endpoint(&data_target, &creds.database);
        let prepare_threads = plan
            .data
            .tables
            .min(std::thread::available_parallelism().map_or(1, |n| n.get()) as u32);
        let prepare = SysbenchCommand::prepare(
            &args.common.sysbench,
            &data_endpoint,
            plan.data,
            prepare_threads,
        );
        let cleanup = SysbenchCommand::cleanup(&args.common.sysbench, &data_endpoint, plan.data);
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
        // Replicas have the data before any read is sent to them.
        topology.wait_replicas()?;

        let reads_before = topology.reads_by_server();
        let result = self.run_steps(steps, &mut topology, &creds);
        self.note_reads_by_server(&reads_before, &topology);
        let result = self.after_steps(result, &topology, &creds);
        for (name, s) in topology.link_stats() {
            // How far a busy machine kept the hops from their delay.
            self.report.notes.push(format!(
                "Hop {name}: {} connections, {} chunks passed on {} µs late on average, \
                 {} µs at worst",
                s.connections,
                s.chunks,
                s.mean_late.as_micros(),
                s.worst_late.as_micros()
            ));
        }

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

    /// What follows the steps: the traced Sluices' span counters as notes; when the
    /// steps went through and the plan asks for it, how stale the caching Sluice is
    /// after a direct commit, filed in the report, which is written again.
    fn after_steps(
        &mut self,
        steps: anyhow::Result<()>,
        topology: &Topology,
        creds: &Credentials,
    ) -> anyhow::Result<()> {
        let notes = traced::totals(topology, &self.plan.scenarios);
        self.report.notes.extend(notes);
        steps?;
        let Some(settings) = &self.plan.staleness else {
            return Ok(());
        };
        if self.interrupted.load(Ordering::SeqCst) {
            return Ok(());
        }
        let found = staleness::measure(settings, topology, creds);
        if let Some(missing) = &found.missing {
            eprintln!("staleness not measured: {missing}");
        }
        self.report.staleness = Some(found);
        self.report.write(self.out)?;
        Ok(())
    }

    /// With --replicas, a note of where the steps' reads went: each server's `Com_select`
    /// over them, every scenario's together (direct and haproxy only on the primary).
    fn note_reads_by_server(&mut self, before: &[(String, Option<u64>)], topology: &Topology) {
        let after = topology.reads_by_server();
        if after.is_empty() {
            return;
        }
        let reads: Vec<String> = (after.iter().zip(before))
            .map(|((name, a), (_, b))| match a.zip(*b) {
                Some((a, b)) => format!("{name} {}", a.saturating_sub(b)),
                None => format!("{name} (unreadable)"),
            })
            .collect();
        self.report.notes.push(format!(
            "Reads each server ran over the steps (Com_select), every scenario's together: {}",
            reads.join(", ")
        ));
    }

    /// The servers of the run: started (embedded), or checked (external).
    fn topology(&self, creds: &Credentials) -> anyhow::Result<Topology> {
        let (args, plan) = (self.args, self.plan);
        if !plan.embedded() {
            let proxies = Proxies {
                passthrough: plan.passthrough.clone(),
                cached: plan.cached.clone(),
                cached_by_table: plan.cached_by_table.clone(),
                dedicated: plan.dedicated.clone(),
                haproxy: plan.haproxy.clone(),
                traced: plan.traced.clone(),
                traced_all: plan.traced_all.clone(),
            };
            return Topology::external(plan.direct.clone(), proxies);
        }
        let sluices: Vec<String> = [
            Scenario::Passthrough,
            Scenario::Cached,
            Scenario::CachedByTable,
            Scenario::Dedicated,
            Scenario::Traced,
            Scenario::TracedAll,
        ]
        .into_iter()
        .filter(|s| plan.runnable(*s))
        .map(|s| s.to_string())
        .collect();
        eprintln!(
            "starting MariaDB (max_connections={}){}",
            plan.max_connections,
            match sluices.len() {
                0 => String::new(),
                1 => format!(" and Sluice ({})", sluices[0]),
                n => format!(" and {n} Sluice instances ({})", sluices.join(", ")),
            }
        );
        Topology::embedded(
            &EmbeddedOptions {
                max_connections: plan.max_connections,
                passthrough: plan.runnable(Scenario::Passthrough),
                cached: plan.runnable(Scenario::Cached),
                cached_by_table: plan.runnable(Scenario::CachedByTable),
                dedicated: plan.runnable(Scenario::Dedicated),
                traced: plan.runnable(Scenario::Traced),
                traced_all: plan.runnable(Scenario::TracedAll),
                otlp_endpoint: plan.otlp_endpoint.clone(),
                binlog: true,
                haproxy: plan
                    .haproxy_program
                    .clone()
                    .filter(|_| plan.runnable(Scenario::Haproxy)),
                pool_max: plan.pool_max(),
                sluice_bin: args.common.sluice_bin()?,
                dir: self.out.to_path_buf(),
                extra_config: String::new(),
                hop: args
                    .hosts
                    .then(|| sluice_sandbox::link::LinkSpec::delay(args.hop)),
                server_cpus: args.server_cpus.as_ref().map(|c| c.0.clone()),
                replicas: args.replicas,
            },
            creds,
        )
    }

    fn endpoint(&self, target: &Target, database: &str) -> Endpoint {
        Endpoint {
            host: target.host.clone(),
            port: target.port,
            user: self.args.server.mysql_user.clone(),
            password: self.args.server.mysql_password.clone(),
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
        let progress = Progress::new(steps.len(), topology::clock_ticks_per_sec());
        // Scenarios whose proxy exited: their later runs are skipped, not attempted.
        let mut gone: Vec<Scenario> = Vec::new();
        for (index, step) in steps.iter().enumerate() {
            let target = match step.scenario() {
                Scenario::Direct => topology.direct.clone().map(|t| (t, None)),
                proxied => proxied
                    .proxy_in(topology)
                    .map(|s| (s.target.clone(), s.pid)),
            };
            let label = self.label(step, index, &progress);
            let skip = match &target {
                _ if self.interrupted.load(Ordering::SeqCst) => {
                    Some("interrupted (Ctrl-C)".to_string())
                }
                None => Some("no server to run it against".to_string()),
                Some(_) if gone.contains(&step.scenario()) => Some(format!(
                    "its {} exited during an earlier run",
                    step.scenario().proxy().unwrap_or("server")
                )),
                Some(_) => None,
            };
            let mut spans = None;
            let (command, output_file, outcome) = match (skip, target) {
                (None, Some((target, pid))) => {
                    let counted = SpanClock::start(topology, step.scenario());
                    let (command, file, outcome) =
                        self.run_one(step, &label, &target, pid, &progress, creds);
                    spans = counted.since(topology);
                    let outcome = match outcome {
                        Measured::Failed(mut error) if pid.is_some() => {
                            if let Err(ended) = topology.check_proxy(pid) {
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
            self.record(step, command, output_file, outcome, spans);
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
                    &self.args.common.sysbench,
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
    fn record(
        &mut self,
        step: &Step,
        command: String,
        output_file: Option<String>,
        m: Measured,
        spans: Option<SpanCount>,
    ) {
        if !matches!(&m, Measured::Skipped(r) if r.starts_with("interrupted")) {
            eprintln!(
                "    {}",
                m.describe(step.scenario().proxy().unwrap_or("Sluice"))
            );
            if let Some(s) = spans {
                eprintln!("    {} spans exported, {} dropped", s.exported, s.dropped);
            }
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
                spans,
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

    /// A progress line's account of one run, whose CPU time is `proxy`'s.
    fn describe(&self, proxy: &str) -> String {
        let cpu = |c: &Option<f64>, unit: &str| {
            c.map(|c| format!(", {proxy} {c:.1} µs CPU/{unit}"))
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
