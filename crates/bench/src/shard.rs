//! `sluice bench shard`: scale up, then out (REFERENCE §4). One logical sysbench
//! database split by Sluice over 1, 2, 4, 6 and 8 MariaDB instances on this machine,
//! each with a small InnoDB buffer pool, so that one instance cannot hold the data and
//! every instance added brings memory as well as a server.
//!
//! One topology at a time ([`servers`]): the instances start, each is loaded with only
//! its contiguous range of `id` in every table (placement checked by counting), Sluice
//! starts with one shard per instance and RANGE placement on `id`, a warm-up run fills
//! the buffer pools, then sysbench `oltp_point_select` (prepared statements, uniform
//! keys) runs through Sluice; with one instance, straight at it too, taking turns.
//! Every instance's statement and buffer-pool counters are read around each run. The
//! report ([`report`]) sets the curve beside the published one and is rewritten after
//! every run.

mod report;
mod servers;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;

use servers::{instance_load, Instances, Placement, Proxy};

use crate::document::Document;
use crate::mux::cell;
use crate::report::{thousands, Machine};
use crate::sysbench::{self, parse_run, DataSet, Endpoint, PsMode, RunSpec, Workload};
use crate::{CommonArgs, Ran, Resolved, Sizes, DIRECT, SLUICE};

/// Flags of `sluice bench shard` (its defaults are in the `Scenario::Shard` help).
#[derive(clap::Args, Debug, Clone)]
pub struct ShardArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Instance counts, one topology each [default: 1,2,4,6,8; demo: 1,2,4].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub instances: Option<Vec<usize>>,
    /// InnoDB buffer pool of every instance, in MiB [default: 16; demo: 6].
    #[arg(long, value_name = "MIB")]
    pub buffer_pool_mib: Option<u32>,
    /// Warm-up through Sluice before each topology's measured runs, whole seconds
    /// [default: 15s; demo: 5s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub warmup: Option<Duration>,
    /// Backend connections Sluice may open to each instance (it multiplexes onto them).
    #[arg(long, default_value_t = 32)]
    pub backend_connections: u32,
}

/// Database of the sysbench tables, on every instance.
const DATABASE: &str = "sbtest";

/// The flags checked, defaults filled in.
#[derive(Debug, Clone)]
struct Plan {
    instances: Vec<usize>,
    threads: Vec<u32>,
    duration: Duration,
    warmup: Duration,
    repeat: u32,
    data: DataSet,
    buffer_pool_mib: u32,
    backend_connections: u32,
}

impl Plan {
    fn resolve(args: &ShardArgs) -> anyhow::Result<Plan> {
        let c = &args.common;
        let Resolved {
            threads,
            duration,
            data,
        } = c.resolve(&Sizes {
            threads: [&[16], &[16]],
            seconds: [30, 5],
            tables: [4, 2],
            table_size: [50_000, 40_000],
        })?;
        let instances = crate::dedup(args.instances.as_deref().unwrap_or(if c.demo {
            &[1, 2, 4]
        } else {
            &[1, 2, 4, 6, 8]
        }));
        if instances.is_empty() || instances.contains(&0) {
            bail!("--instances needs one or more instance counts of at least 1");
        }
        if instances.iter().any(|&n| n as u64 > data.table_size) {
            bail!("--table-size must give every instance at least one row of each table");
        }
        // The demo warms up no longer than it runs: a short look stays short.
        let warmup = args.warmup.unwrap_or(match c.demo {
            true => duration.min(Duration::from_secs(5)),
            false => Duration::from_secs(15),
        });
        if warmup.subsec_nanos() != 0 {
            bail!("--warmup must be whole seconds (0s for none)");
        }
        let buffer_pool_mib = args.buffer_pool_mib.unwrap_or(if c.demo { 6 } else { 16 });
        // The smallest buffer pool MariaDB takes with 16 KiB pages.
        if buffer_pool_mib < 6 {
            bail!("--buffer-pool-mib must be at least 6");
        }
        if args.backend_connections == 0 {
            bail!("--backend-connections must be at least 1");
        }
        Ok(Plan {
            instances,
            threads,
            duration,
            warmup,
            repeat: c.repeat,
            data,
            buffer_pool_mib,
            backend_connections: args.backend_connections,
        })
    }

    /// (threads, repetition, path) of every run on a topology of `instances`: with one
    /// instance direct and Sluice take turns; with more, only Sluice sees one database.
    fn runs(&self, instances: usize) -> Vec<(u32, u32, &'static str)> {
        let runs = crate::alternating(&self.threads, self.repeat);
        if instances == 1 {
            return runs;
        }
        runs.into_iter().filter(|r| r.2 == SLUICE).collect()
    }

    /// Of every instance: the direct runs' clients, Sluice's pool and room for the
    /// benchmark's own queries.
    fn max_connections(&self) -> u32 {
        let top = self.threads.iter().copied().max().expect("not empty");
        top.saturating_add(self.backend_connections)
            .saturating_add(50)
    }
}

/// What one instance did during one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct InstanceLoad {
    name: String,
    /// Prepared statements it executed (`Com_stmt_execute`): sysbench's point selects.
    stmt_executes: Option<u64>,
    /// `Com_select`: text SELECTs, the benchmark's own counter reads among them.
    selects: Option<u64>,
    /// Pages read from disk (`Innodb_buffer_pool_reads`).
    disk_reads: Option<u64>,
    /// Page reads asked of the buffer pool (`Innodb_buffer_pool_read_requests`).
    read_requests: Option<u64>,
    /// Pages of its buffer pool holding data, and all its pages, after the run.
    pool_pages: Option<(u64, u64)>,
}

/// One sysbench run.
#[derive(Debug, Clone, Serialize)]
struct Run {
    instances: usize,
    path: &'static str,
    threads: u32,
    /// 1-based.
    repetition: u32,
    tps: Option<f64>,
    avg_ms: Option<f64>,
    p95_ms: Option<f64>,
    errors: Option<u64>,
    failure: Option<String>,
    command: String,
    /// sysbench's output, relative to the output directory.
    output_file: String,
    per_instance: Vec<InstanceLoad>,
}

/// One topology as it was set up: where each instance's rows are, what it holds.
#[derive(Debug, Clone, Serialize)]
struct TopologyInfo {
    instances: usize,
    /// The Sluice configuration, relative to the output directory.
    sluice_config: String,
    /// Every instance and table: the id range asked for and what it holds.
    placement: Vec<Placement>,
    /// What `SELECT COUNT(*)` of each table through Sluice said (every shard's count
    /// combined); the table size when Sluice shows one database.
    rows_through_sluice: Vec<Option<u64>>,
    /// Data and indexes of the sysbench tables over all instances, MiB.
    data_mib: Option<f64>,
    /// The buffer pools of all instances together, as the servers report them, MiB.
    buffer_pool_mib: Option<f64>,
    load_secs: f64,
}

/// One instance count and path at one thread count, medians over the repetitions.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct SummaryRow {
    instances: usize,
    path: &'static str,
    threads: u32,
    tps: Option<f64>,
    avg_ms: Option<f64>,
    p95_ms: Option<f64>,
    /// Summed over the repetitions.
    errors: u64,
    /// Over one instance through Sluice at the same thread count.
    vs_one: Option<f64>,
    /// Pages the instances read from disk per statement they executed, all together:
    /// about 1 when nearly every point select misses the buffer pool, 0 when the data
    /// is in memory.
    disk_reads_per_statement: Option<f64>,
    /// REFERENCE §4, where it gives this instance count.
    published_tps: Option<f64>,
    published_vs_one: Option<f64>,
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
    duration_secs: u64,
    warmup_secs: u64,
    repeat: u32,
    data: DataSet,
    buffer_pool_mib_each: u32,
    backend_connections: u32,
    instance_counts: Vec<usize>,
    sluice_commands: Vec<String>,
    topologies: Vec<TopologyInfo>,
    runs: Vec<Run>,
    summary: Vec<SummaryRow>,
}

/// Runs the benchmark, printing the tables and where the report is.
pub fn run(args: &ShardArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

/// [`run`], leaving the latest report in `document`.
fn run_into(args: &ShardArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let plan = Plan::resolve(args)?;
    let started = SystemTime::now();
    let out = args.common.out_dir("shard", started);
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating {}", out.display()))?;
    let mut bench = Bench {
        args,
        plan: &plan,
        sluice_bin: args.common.sluice_bin()?,
        out: &out,
        results: Results {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            started_at: humantime::format_rfc3339_seconds(started).to_string(),
            finished_at: None,
            error: None,
            sluice_version: env!("CARGO_PKG_VERSION").to_string(),
            sysbench_version: sysbench::version(&args.common.sysbench)?,
            mariadb_version: None,
            machine: Machine::detect(),
            duration_secs: plan.duration.as_secs(),
            warmup_secs: plan.warmup.as_secs(),
            repeat: plan.repeat,
            data: plan.data,
            buffer_pool_mib_each: plan.buffer_pool_mib,
            backend_connections: plan.backend_connections,
            instance_counts: plan.instances.clone(),
            sluice_commands: Vec::new(),
            topologies: Vec::new(),
            runs: Vec::new(),
            summary: Vec::new(),
        },
    };
    *document = Some(report::write(&out, &mut bench.results)?);
    let measured = bench.measure();
    crate::report::conclude(&out, &mut bench.results, measured, document, report::write)
}

/// The run's state: flags, plan, where files go, what was measured so far.
struct Bench<'a> {
    args: &'a ShardArgs,
    plan: &'a Plan,
    sluice_bin: PathBuf,
    out: &'a Path,
    results: Results,
}

impl Bench<'_> {
    /// Every topology in turn, each started, measured and torn down before the next.
    fn measure(&mut self) -> anyhow::Result<()> {
        for &n in &self.plan.instances {
            self.topology(n)?;
        }
        Ok(())
    }

    fn topology(&mut self, n: usize) -> anyhow::Result<()> {
        eprintln!(
            "starting {n} instance(s), {} MiB buffer pool each",
            self.plan.buffer_pool_mib
        );
        let instances = Instances::start(n, self.plan)?;
        if self.results.mariadb_version.is_none() {
            self.results.mariadb_version = instances.scalar(0, "SELECT VERSION()");
        }
        eprintln!(
            "  loading {} tables x {} rows, each instance its range of id",
            self.plan.data.tables,
            thousands(self.plan.data.table_size)
        );
        let load_started = std::time::Instant::now();
        instances.load(self.plan.data)?;
        let load_secs = load_started.elapsed().as_secs_f64();
        let placement = instances.placement(self.plan.data)?;
        let config_file = format!("sluice-{n}.toml");
        let config = self.out.join(&config_file);
        let mut proxy = Proxy::start(self, &instances, &config)?;
        self.results.sluice_commands.push(proxy.command().into());
        let info = TopologyInfo {
            instances: n,
            sluice_config: config_file,
            placement,
            rows_through_sluice: (1..=self.plan.data.tables)
                .map(|t| proxy.count_rows(&format!("sbtest{t}")))
                .collect(),
            data_mib: instances.data_mib(),
            buffer_pool_mib: instances.buffer_pool_mib(),
            load_secs,
        };
        eprintln!(
            "  loaded in {load_secs:.1} s; data {} MiB, buffer pools {} MiB",
            cell(info.data_mib, 1),
            cell(info.buffer_pool_mib, 1)
        );
        self.results.topologies.push(info);
        report::write(self.out, &mut self.results)?;
        if !self.plan.warmup.is_zero() {
            eprintln!("  warming up through Sluice for {:?}", self.plan.warmup);
            let warmup = self.sysbench(proxy.endpoint(), self.plan.threads[0], self.plan.warmup);
            let log = self.out.join(format!("raw/warmup-{n}.txt"));
            let stats = self.run_sysbench(&warmup, &log, self.plan.warmup);
            stats.with_context(|| format!("warming up {n} instance(s) through Sluice"))?;
        }
        let runs = self.plan.runs(n);
        for (index, &(threads, repetition, path)) in runs.iter().enumerate() {
            eprintln!(
                "[{n} instance(s) {}/{}] {path}: {threads} threads, run {repetition}, {} s",
                index + 1,
                runs.len(),
                self.plan.duration.as_secs()
            );
            let endpoint = match path {
                DIRECT => instances.endpoint(0),
                _ => proxy.endpoint(),
            };
            let run = self.one_run(&instances, endpoint, (n, threads, repetition, path));
            eprintln!("    {}", describe(&run));
            let failed = run.failure.is_some();
            self.results.runs.push(run);
            report::write(self.out, &mut self.results)?;
            if failed && path == SLUICE {
                if let Err(ended) = proxy.check() {
                    bail!("{ended}");
                }
            }
        }
        eprintln!("stopping Sluice and {n} instance(s)");
        drop(proxy);
        drop(instances);
        Ok(())
    }

    /// One measured run at `endpoint`, every instance's counters read around it.
    fn one_run(
        &self,
        instances: &Instances,
        endpoint: Endpoint,
        (n, threads, repetition, path): (usize, u32, u32, &'static str),
    ) -> Run {
        let command = self.sysbench(endpoint, threads, self.plan.duration);
        let output_file = format!("raw/{n}-{path}-t{threads}-r{repetition}.txt");
        let log = self.out.join(&output_file);
        let before = instances.counters();
        let stats = self.run_sysbench(&command, &log, self.plan.duration);
        let after = instances.counters();
        let mut run = Run {
            instances: n,
            path,
            threads,
            repetition,
            tps: None,
            avg_ms: None,
            p95_ms: None,
            errors: None,
            failure: None,
            command: command.display(),
            output_file,
            per_instance: before
                .iter()
                .zip(&after)
                .enumerate()
                .map(|(i, (b, a))| instance_load(format!("db{}", i + 1), b, a))
                .collect(),
        };
        match stats {
            Ok(s) => {
                run.tps = Some(s.transactions_per_sec);
                run.avg_ms = Some(s.latency_avg_ms);
                run.p95_ms = Some(s.latency_percentile_ms);
                run.errors = Some(s.ignored_errors);
            }
            Err(e) => run.failure = Some(format!("{e:#}")),
        }
        run
    }

    /// sysbench `oltp_point_select` with prepared statements and uniformly drawn keys
    /// (sysbench's default draws 75% of them from 1% of the rows, which would leave
    /// the buffer pool nothing to miss and most shards idle).
    fn sysbench(
        &self,
        endpoint: Endpoint,
        threads: u32,
        duration: Duration,
    ) -> sysbench::SysbenchCommand {
        let spec = RunSpec {
            workload: Workload::OltpPointSelect,
            ps_mode: PsMode::Auto,
            threads,
            duration_secs: duration.as_secs().max(1),
            report_interval_secs: 1,
            data: self.plan.data,
        };
        sysbench::SysbenchCommand::run(&self.args.common.sysbench, &endpoint, &spec, self.out)
            .with_arg("--rand-type=uniform")
    }

    fn run_sysbench(
        &self,
        command: &sysbench::SysbenchCommand,
        log: &Path,
        duration: Duration,
    ) -> anyhow::Result<sysbench::RunStats> {
        // Connecting the threads, and a loaded machine, take time of their own.
        let finished = command.execute(log, duration + Duration::from_secs(90), |_, _| {})?;
        sysbench::check(&finished, "oltp_point_select", log)?;
        parse_run(&finished.output).with_context(|| {
            format!(
                "sysbench exited 0 but its output has no complete summary; see {}",
                log.display()
            )
        })
    }
}

/// The id range of instance `i` (0-based) of `n` in a table of `size` rows: contiguous,
/// the first rows on the first instance, sizes differing by at most one.
fn id_range(i: usize, n: usize, size: u64) -> (u64, u64) {
    let bound = |j: usize| size * j as u64 / n as u64;
    (bound(i) + 1, bound(i + 1))
}

/// Where sysbench connects: the sandbox administrator, whom every instance has and
/// Sluice forwards.
fn endpoint(host: String, port: u16) -> Endpoint {
    Endpoint {
        host,
        port,
        user: sluice_sandbox::ADMIN_USER.into(),
        password: sluice_sandbox::ADMIN_PASSWORD.into(),
        database: DATABASE.into(),
        show_password: true,
    }
}

/// A progress line's account of one run.
fn describe(run: &Run) -> String {
    if let Some(f) = &run.failure {
        return format!("FAILED: {f}");
    }
    let executes: Vec<String> = run
        .per_instance
        .iter()
        .map(|l| l.stmt_executes.map_or("?".into(), thousands))
        .collect();
    format!(
        "{} tps, avg {} ms, p95 {} ms, {} errors; executes per instance: {}",
        thousands(run.tps.unwrap_or(0.0).round() as u64),
        cell(run.avg_ms, 2),
        cell(run.p95_ms, 2),
        run.errors.unwrap_or(0),
        executes.join(" / ")
    )
}

crate::report::ending_by_runs!(Results);

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ShardArgs,
    }

    fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
        let cli = Cli::try_parse_from(std::iter::once("shard").chain(argv.iter().copied()))?;
        Plan::resolve(&cli.args)
    }

    #[test]
    fn defaults_demo_and_bad_values() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.instances, [1, 2, 4, 6, 8]);
        assert_eq!(p.threads, [16]);
        assert_eq!((p.data.tables, p.data.table_size), (4, 50_000));
        assert_eq!((p.buffer_pool_mib, p.warmup.as_secs()), (16, 15));
        assert_eq!(p.runs(1), [(16, 1, DIRECT), (16, 1, SLUICE)]);
        assert_eq!(p.runs(4), [(16, 1, SLUICE)]);
        assert_eq!(p.max_connections(), 16 + 32 + 50);
        let p = plan(&["--demo", "--repeat", "2"]).unwrap();
        assert_eq!(p.instances, [1, 2, 4]);
        assert_eq!((p.data.tables, p.data.table_size), (2, 40_000));
        assert_eq!(p.duration, Duration::from_secs(5));
        assert_eq!(p.runs(2).len(), 2);
        assert_eq!(p.runs(1).len(), 4);
        assert!(plan(&["--instances", "0"]).is_err());
        assert!(plan(&["--instances", "3", "--table-size", "2"]).is_err());
        assert!(plan(&["--buffer-pool-mib", "5"]).is_err());
        assert!(plan(&["--warmup", "1500ms"]).is_err());
        assert!(plan(&["--backend-connections", "0"]).is_err());
    }

    #[test]
    fn ranges_cover_every_id_once() {
        for n in 1..=8 {
            let mut next = 1;
            for i in 0..n {
                let (lo, hi) = id_range(i, n, 100_003);
                assert_eq!(lo, next);
                assert!(hi >= lo);
                next = hi + 1;
            }
            assert_eq!(next, 100_004);
        }
        assert_eq!(id_range(0, 2, 10), (1, 5));
        assert_eq!(id_range(1, 2, 10), (6, 10));
    }
}
