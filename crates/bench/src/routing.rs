//! `sluice bench routing`: how far reads scale out when Sluice spreads them over
//! replicas.
//!
//! sysbench `oltp_read_only --skip_trx=on` runs straight at the primary (every read on
//! one server) and through Sluice in front of the primary and its replicas (plain reads
//! outside transactions go to the replicas, by weight and observed latency), taking
//! turns at each thread count. Around every run through Sluice, its admin API
//! (`/v1/servers`) and each server's `Com_select` say where the reads went, which the
//! report sets against the share the weights promise.
//!
//! Everything runs embedded (a sandbox replica set and a Sluice child) and is removed at
//! the end, on error too; the report ([`report`]) is written after every run. What is
//! read from Sluice and the servers around a run ([`counters`]) serves the zones
//! scenario too.

mod counters;
mod report;

pub(crate) use counters::{
    delta, last_line, server_entry, servers_json, wait_for_routing, AdminApi, Snapshot,
};

use crate::document::Document;
use crate::mux::{cell, outcome, spec};
use crate::report::{thousands, Machine};
use crate::sysbench::{self, parse_run, DataSet, Endpoint, RunStats, SysbenchCommand};
use crate::topology::{toml_string, SluiceProcess, MAX_PREPARED_STMT_COUNT};
use crate::{CommonArgs, Ran, Resolved, Sizes, DIRECT, SLUICE};
use anyhow::{bail, Context};
use serde::Serialize;
use sluice_sandbox::{self as sandbox, MariaDb, ReplicaSet, ReplicaSetOptions};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// Flags of `sluice bench routing` (its defaults are in the `Scenario::Routing` help).
#[derive(clap::Args, Debug, Clone)]
pub struct RoutingArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Replicas behind the primary.
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// Read weight of each replica, comma-separated, one per replica [default: 1 each].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub weights: Option<Vec<u32>>,
    /// Backend connections Sluice may open to each server (it multiplexes onto them).
    #[arg(long, default_value_t = 64)]
    pub backend_connections: u32,
}

/// Database of the sysbench tables.
pub(crate) const DATABASE: &str = "sbtest";

/// The flags checked and resolved.
#[derive(Debug, Clone)]
struct Plan {
    /// Names and read weights, the primary first.
    servers: Vec<(String, u32)>,
    threads: Vec<u32>,
    duration: Duration,
    repeat: u32,
    data: DataSet,
    backend_connections: u32,
    /// Of every sandbox server: the direct runs' clients, Sluice's pool (which keeps
    /// its connections between runs) and room for the admin and the monitor.
    max_connections: u32,
}

impl Plan {
    fn resolve(args: &RoutingArgs) -> anyhow::Result<Plan> {
        if args.replicas == 0 {
            bail!("--replicas must be at least 1: reads scale out to replicas");
        }
        let weights = args
            .weights
            .clone()
            .unwrap_or_else(|| vec![1; args.replicas]);
        if weights.len() != args.replicas {
            bail!(
                "--weights needs one weight per replica: {} given for {} replicas",
                weights.len(),
                args.replicas
            );
        }
        if weights.contains(&0) {
            bail!("--weights must be at least 1 each (Sluice refuses a weight of 0)");
        }
        let c = &args.common;
        let Resolved {
            threads,
            duration,
            data,
        } = c.resolve(&Sizes {
            threads: [&[16, 64], &[4, 16]],
            seconds: [20, 5],
            tables: [8, 2],
            table_size: [10_000, 1_000],
        })?;
        if args.backend_connections == 0 {
            bail!("--backend-connections must be at least 1");
        }
        let mut servers = vec![("primary".to_string(), 1)];
        servers.extend(
            weights
                .iter()
                .enumerate()
                .map(|(i, w)| (format!("replica{}", i + 1), *w)),
        );
        let top = threads.iter().copied().max().expect("not empty");
        Ok(Plan {
            servers,
            threads,
            duration,
            repeat: c.repeat,
            data,
            backend_connections: args.backend_connections,
            max_connections: top
                .saturating_add(args.backend_connections)
                .saturating_add(100),
        })
    }

    /// (threads, repetition, scenario) of every run, in order.
    fn runs(&self) -> Vec<(u32, u32, &'static str)> {
        crate::alternating(&self.threads, self.repeat)
    }

    /// The servers' names, the primary first.
    fn names(&self) -> Vec<&str> {
        self.servers.iter().map(|(name, _)| name.as_str()).collect()
    }
}

/// A server of the replica set as Sluice was told about it.
#[derive(Debug, Clone, Serialize)]
struct ServerInfo {
    name: String,
    address: String,
    weight: u32,
    /// What Sluice's monitor made of it before the first run: "writer", "reader", ...
    role: String,
}

/// What one server did during one run.
#[derive(Debug, Clone, Serialize)]
struct ServerLoad {
    name: String,
    /// Reads Sluice sent it (the `reads` counter of `/v1/servers`); none for direct runs.
    reads: Option<u64>,
    /// SELECT statements the server ran (its `Com_select`), whoever sent them.
    com_select: Option<u64>,
}

/// One sysbench run.
#[derive(Debug, Clone, Serialize)]
struct Run {
    scenario: &'static str,
    threads: u32,
    /// 1-based.
    repetition: u32,
    qps: Option<f64>,
    p95_ms: Option<f64>,
    errors: Option<u64>,
    failure: Option<String>,
    command: String,
    /// sysbench's output, relative to the output directory.
    output_file: String,
    /// In configuration order, the primary first.
    servers: Vec<ServerLoad>,
    /// Sluice's routing counters over the run.
    reads_to_readers: Option<u64>,
    reads_to_writer: Option<u64>,
}

/// Direct against Sluice at one thread count, medians over the repetitions.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct SummaryRow {
    threads: u32,
    direct_qps: Option<f64>,
    sluice_qps: Option<f64>,
    /// Sluice ÷ direct: the read scale-out.
    ratio: Option<f64>,
    direct_p95_ms: Option<f64>,
    sluice_p95_ms: Option<f64>,
    /// Summed over the repetitions.
    direct_errors: u64,
    sluice_errors: u64,
}

/// Where the reads through Sluice went at one thread count, all repetitions together.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct BalanceRow {
    threads: u32,
    name: String,
    role: String,
    weight: u32,
    /// The weight over the sum of the readers' weights; 0 for anything but a reader.
    expected_share: f64,
    /// Of the reads Sluice counted.
    reads: u64,
    observed_share: Option<f64>,
    /// Of the SELECT statements the servers counted.
    com_select: u64,
    com_select_share: Option<f64>,
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
    repeat: u32,
    data: DataSet,
    backend_connections: u32,
    servers: Vec<ServerInfo>,
    sluice_command: Option<String>,
    prepare_command: Option<String>,
    runs: Vec<Run>,
    summary: Vec<SummaryRow>,
    balance: Vec<BalanceRow>,
}

/// Runs the benchmark, printing the tables and where the report is.
pub fn run(args: &RoutingArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

/// [`run`], leaving the latest report in `document`.
fn run_into(args: &RoutingArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let plan = Plan::resolve(args)?;
    let started = SystemTime::now();
    let out = args.common.out_dir("routing", started);
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating {}", out.display()))?;
    let sysbench_version = sysbench::version(&args.common.sysbench)?;
    let sluice_bin = args.common.sluice_bin()?;
    let mut results = Results {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        finished_at: None,
        error: None,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
        sysbench_version,
        mariadb_version: None,
        machine: Machine::detect(),
        duration_secs: plan.duration.as_secs(),
        repeat: plan.repeat,
        data: plan.data,
        backend_connections: plan.backend_connections,
        servers: Vec::new(),
        sluice_command: None,
        prepare_command: None,
        runs: Vec::new(),
        summary: Vec::new(),
        balance: Vec::new(),
    };
    *document = Some(report::write(&out, &mut results)?);

    let measured = measure(args, &plan, &sluice_bin, &out, &mut results);
    crate::report::conclude(&out, &mut results, measured, document, report::write)
}

/// Starts the servers and Sluice, prepares the data, runs every step. Whatever was
/// started is stopped on the way out, error or not (the handles stop them on drop).
fn measure(
    args: &RoutingArgs,
    plan: &Plan,
    sluice_bin: &Path,
    out: &Path,
    results: &mut Results,
) -> anyhow::Result<()> {
    eprintln!(
        "starting a primary and {} replicas (max_connections={})",
        plan.servers.len() - 1,
        plan.max_connections
    );
    let set = ReplicaSet::start(ReplicaSetOptions {
        replicas: plan.servers.len() - 1,
        semi_sync: false,
        max_connections: plan.max_connections,
        // sysbench prepares up to 9 statements per table in every thread, and Sluice
        // keeps them on each backend connection: the default limit is soon reached.
        extra_args: vec![format!(
            "--max-prepared-stmt-count={MAX_PREPARED_STMT_COUNT}"
        )],
    })
    .context("starting the sandbox replica set")?;
    let databases: Vec<&MariaDb> = set.servers().collect();
    results.mariadb_version = last_line(&set.primary.execute("SELECT VERSION()")?);
    set.primary
        .execute(&format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"))
        .context("creating the sysbench database on the primary")?;

    let prepare_threads = plan
        .data
        .tables
        .min(std::thread::available_parallelism().map_or(1, |n| n.get()) as u32);
    let prepare = SysbenchCommand::prepare(
        &args.common.sysbench,
        &endpoint(set.primary.addr()),
        plan.data,
        prepare_threads,
    );
    results.prepare_command = Some(prepare.display());
    eprintln!(
        "preparing {} tables x {} rows on the primary",
        plan.data.tables, plan.data.table_size
    );
    let t = Instant::now();
    prepare.execute_checked(
        "preparing the data on the primary (sysbench prepare)",
        &out.join("raw/prepare.txt"),
        Duration::from_secs(3600),
    )?;
    set.wait_caught_up(Duration::from_secs(600))
        .context("waiting for the replicas to apply the sysbench tables")?;
    eprintln!(
        "  prepared and replicated in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    let port = sandbox::free_port();
    let admin_port = sandbox::free_port();
    let token = admin_token("routing");
    let addresses: Vec<SocketAddr> = databases.iter().map(|d| d.addr()).collect();
    let config = out.join("sluice.toml");
    std::fs::write(
        &config,
        sluice_config(plan, &addresses, port, admin_port, &token),
    )
    .with_context(|| format!("writing {}", config.display()))?;
    let mut sluice = SluiceProcess::start(sluice_bin, &config, port, &out.join("sluice.log"))?;
    results.sluice_command = Some(sluice.command.clone());
    let admin = AdminApi::new(format!("127.0.0.1:{admin_port}"), token);
    let roles = wait_for_routing(&admin, &plan.names())?;
    results.servers = plan
        .servers
        .iter()
        .zip(&addresses)
        .zip(roles)
        .map(|(((name, weight), address), role)| ServerInfo {
            name: name.clone(),
            address: address.to_string(),
            weight: *weight,
            role,
        })
        .collect();
    for s in &results.servers {
        eprintln!(
            "  {} at {}: {}, weight {}",
            s.name, s.address, s.role, s.weight
        );
    }
    report::write(out, results)?;

    let runs = plan.runs();
    for (index, &(threads, repetition, scenario)) in runs.iter().enumerate() {
        eprintln!(
            "[{}/{}] {scenario}: {threads} threads, run {repetition}, {} s",
            index + 1,
            runs.len(),
            plan.duration.as_secs()
        );
        let target = match scenario {
            DIRECT => set.primary.addr(),
            _ => SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let through_sluice = (scenario == SLUICE).then_some(&admin);
        let run = one_run(
            args,
            plan,
            (threads, repetition, scenario),
            target,
            &databases,
            through_sluice,
            out,
        );
        eprintln!("    {}", describe(&run));
        let failed = run.failure.is_some();
        results.runs.push(run);
        report::write(out, results)?;
        if failed && scenario == SLUICE {
            if let Err(ended) = sluice.check() {
                bail!("{ended}");
            }
        }
    }
    eprintln!("stopping Sluice and the replica set");
    sluice.stop();
    drop(set);
    Ok(())
}

/// One sysbench run against `target`, with the counters read around it (Sluice's only
/// when `admin` is given).
fn one_run(
    args: &RoutingArgs,
    plan: &Plan,
    (threads, repetition, scenario): (u32, u32, &'static str),
    target: SocketAddr,
    databases: &[&MariaDb],
    admin: Option<&AdminApi>,
    out: &Path,
) -> Run {
    let spec = spec(threads, plan.duration, plan.data);
    let command = SysbenchCommand::run(&args.common.sysbench, &endpoint(target), &spec, out);
    let output_file = format!("raw/{scenario}-t{threads}-r{repetition}.txt");
    let log = out.join(&output_file);
    let names = plan.names();
    let before = Snapshot::take(&names, databases, admin);
    let stats = sysbench_run(&command, &log, threads, plan.duration);
    let after = Snapshot::take(&names, databases, admin);
    let reads = |i: usize| {
        let at = |s: &Snapshot| s.reads.as_ref().and_then(|r| r[i]);
        delta(at(&before), at(&after))
    };
    let mut run = Run {
        scenario,
        threads,
        repetition,
        qps: None,
        p95_ms: None,
        errors: None,
        failure: None,
        command: command.display(),
        output_file,
        servers: plan
            .servers
            .iter()
            .enumerate()
            .map(|(i, (name, _))| ServerLoad {
                name: name.clone(),
                reads: reads(i),
                com_select: delta(before.com_select[i], after.com_select[i]),
            })
            .collect(),
        reads_to_readers: delta(before.reads_to_readers, after.reads_to_readers),
        reads_to_writer: delta(before.reads_to_writer, after.reads_to_writer),
    };
    (run.qps, run.p95_ms, run.errors, run.failure) = outcome(stats);
    run
}

/// A measured `oltp_read_only` run: its summary, or why there is none.
pub(crate) fn sysbench_run(
    command: &SysbenchCommand,
    log: &Path,
    threads: u32,
    duration: Duration,
) -> anyhow::Result<RunStats> {
    // Connecting many threads, and a slow proxy, take time of their own.
    let deadline = duration + Duration::from_secs(60 + u64::from(threads) / 10);
    let finished = command.execute(log, deadline, |_, _| {})?;
    let what = format!("oltp_read_only threads={threads}");
    sysbench::check(&finished, &what, log)?;
    parse_run(&finished.output).with_context(|| {
        format!(
            "{what}: sysbench exited 0 but its output has no complete summary; see {}",
            log.display()
        )
    })
}

/// Where sysbench connects: the sandbox admin account, which every server of the set
/// has (replicated accounts would have to be created first), and Sluice forwards.
pub(crate) fn endpoint(target: SocketAddr) -> Endpoint {
    Endpoint {
        host: target.ip().to_string(),
        port: target.port(),
        user: sandbox::ADMIN_USER.into(),
        password: sandbox::ADMIN_PASSWORD.into(),
        database: DATABASE.into(),
        show_password: true,
    }
}

/// A token for this run's admin API, which only listens on loopback and dies with it.
pub(crate) fn admin_token(scenario: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("bench-{scenario}-{:x}{:x}", std::process::id(), nanos)
}

/// The Sluice configuration: every server with its weight, the monitor finding the
/// writer, and the admin API the counters are read from.
fn sluice_config(
    plan: &Plan,
    addresses: &[SocketAddr],
    port: u16,
    admin_port: u16,
    token: &str,
) -> String {
    let mut text = format!(
        "# Written by `sluice bench routing`.\n\
         [log]\nlevel = \"warn\"\n\n\
         [[listeners]]\naddress = \"127.0.0.1:{port}\"\n\n\
         [[users]]\nname = {}\npassword = {}\n",
        toml_string(sandbox::ADMIN_USER),
        toml_string(sandbox::ADMIN_PASSWORD),
    );
    for ((name, weight), address) in plan.servers.iter().zip(addresses) {
        let _ = write!(
            text,
            "\n[[servers]]\nname = {}\naddress = \"{address}\"\nweight = {weight}\n",
            toml_string(name)
        );
    }
    let _ = write!(
        text,
        "\n[pool]\nmax_connections = {}\nmultiplex = true\n\n\
         [routing]\nread_write_split = true\n\n\
         [monitor]\ninterval = \"500ms\"\n\n\
         [admin]\naddress = \"127.0.0.1:{admin_port}\"\ntoken = {}\n",
        plan.backend_connections,
        toml_string(token)
    );
    text
}

/// A progress line's account of one run.
fn describe(run: &Run) -> String {
    if let Some(f) = &run.failure {
        return format!("FAILED: {f}");
    }
    let mut s = format!(
        "{} qps, p95 {} ms, {} errors",
        thousands(run.qps.unwrap_or(0.0).round() as u64),
        cell(run.p95_ms, 2),
        run.errors.unwrap_or(0)
    );
    let reads: Vec<String> = run
        .servers
        .iter()
        .filter_map(|l| Some(format!("{} {}", l.name, thousands(l.reads?))))
        .collect();
    if !reads.is_empty() {
        let _ = write!(s, "; reads: {}", reads.join(", "));
    }
    s
}

crate::report::ending_by_runs!(Results);

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RoutingArgs,
    }

    fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
        let cli = Cli::try_parse_from(std::iter::once("routing").chain(argv.iter().copied()))?;
        Plan::resolve(&cli.args)
    }

    #[test]
    fn defaults_and_bad_values() {
        let p = plan(&[]).unwrap();
        assert_eq!(
            p.servers,
            [
                ("primary".to_string(), 1),
                ("replica1".to_string(), 1),
                ("replica2".to_string(), 1)
            ]
        );
        assert_eq!(p.threads, [16, 64]);
        assert_eq!(p.duration, Duration::from_secs(20));
        assert_eq!((p.data.tables, p.data.table_size), (8, 10_000));
        assert_eq!(p.max_connections, 64 + 64 + 100);
        assert_eq!(
            p.runs(),
            [
                (16, 1, DIRECT),
                (16, 1, SLUICE),
                (64, 1, DIRECT),
                (64, 1, SLUICE)
            ]
        );
        let p = plan(&["--replicas", "3", "--weights", "1,2,3", "--repeat", "2"]).unwrap();
        assert_eq!(p.servers[3], ("replica3".to_string(), 3));
        assert_eq!(p.runs().len(), 2 * 2 * 2);
        assert!(plan(&["--replicas", "0"]).is_err());
        assert!(plan(&["--weights", "1"]).is_err());
        assert!(plan(&["--weights", "1,0"]).is_err());
        assert!(plan(&["--threads", "0"]).is_err());
        assert!(plan(&["--duration", "1500ms"]).is_err());
        assert!(plan(&["--repeat", "0"]).is_err());
        assert!(plan(&["--tables", "0"]).is_err());
    }

    #[test]
    fn the_configuration_is_valid() {
        let p = plan(&["--weights", "1,3"]).unwrap();
        let addresses: Vec<SocketAddr> = (0..3)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 3306 + i)))
            .collect();
        let text = sluice_config(&p, &addresses, 6033, 6080, "t0ken");
        // Read as plain TOML: this crate does not depend on the proxy. That Sluice
        // accepts the file is checked by the integration test of `sluice bench routing`.
        let config: toml::Table = text.parse().unwrap();
        let servers = config["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 3);
        assert_eq!(servers[2]["weight"].as_integer(), Some(3));
        assert_eq!(servers[1]["address"].as_str(), Some("127.0.0.1:3307"));
        assert_eq!(config["pool"]["multiplex"].as_bool(), Some(true));
        assert_eq!(config["pool"]["max_connections"].as_integer(), Some(64));
        assert_eq!(config["admin"]["token"].as_str(), Some("t0ken"));
    }
}
