//! `sluice bench mux`: what multiplexing buys, measured end to end.
//!
//! 1. **Thread thrashing**: sysbench `oltp_read_only --skip_trx=on` at a few hundred to a
//!    thousand threads, straight at MariaDB (one server thread per client) and through
//!    Sluice multiplexing onto a few dozen backend connections, alternating; with the
//!    server's memory and connection count sampled mid-run.
//! 2. **Idle clients**: ten thousand logged-in, idle client connections held open on
//!    Sluice (its memory per idle client is the figure), while a few hundred sysbench
//!    threads work through it; the server's connection count shows the backend bound
//!    held, and the idle clients still answer a ping at the end.
//!
//! Everything runs embedded (a sandbox MariaDB and Sluice children) and is removed at
//! the end; the report ([`report`]) is written after every run.

mod report;

use crate::client::Client;
use crate::document::Document;
use crate::report::Machine;
use crate::sysbench::{
    self, parse_run, DataSet, Endpoint, PsMode, RunSpec, SysbenchCommand, Workload,
};
use crate::topology::{Credentials, EmbeddedOptions, Topology};
use crate::{CommonArgs, Ran, Resolved, Sizes};
use anyhow::{bail, Context};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Flags of `sluice bench mux` (its defaults are in the `Scenario::Mux` help).
#[derive(clap::Args, Debug, Clone)]
pub struct MuxArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Backend connections Sluice multiplexes onto in the thread-thrashing part.
    #[arg(long, default_value_t = 32)]
    pub backend_connections: u32,
    /// Idle client connections held open in the second part [default: 10000; demo:
    /// 1000].
    #[arg(long)]
    pub idle_clients: Option<u32>,
    /// sysbench threads working while the idle clients are held [default: 256; demo:
    /// 64].
    #[arg(long)]
    pub active_threads: Option<u32>,
    /// Backend connections of the idle-clients part.
    #[arg(long, default_value_t = 64)]
    pub idle_backend_connections: u32,
}

/// The flags with the scenario's defaults (or demo sizes) filled in.
#[derive(Debug, Clone)]
struct Plan {
    threads: Vec<u32>,
    duration: Duration,
    repeat: u32,
    data: DataSet,
    backend_connections: u32,
    idle_clients: u32,
    active_threads: u32,
    idle_backend_connections: u32,
}

impl Plan {
    fn resolve(args: &MuxArgs) -> anyhow::Result<Plan> {
        let c = &args.common;
        let demo = c.demo;
        let Resolved {
            threads,
            duration,
            data,
        } = c.resolve(&Sizes {
            threads: [&[256, 1024], &[64, 256]],
            seconds: [30, 5],
            tables: [8, 2],
            table_size: [10_000, 1_000],
        })?;
        let plan = Plan {
            threads,
            duration,
            repeat: c.repeat,
            data,
            backend_connections: args.backend_connections,
            idle_clients: args
                .idle_clients
                .unwrap_or(if demo { 1_000 } else { 10_000 }),
            active_threads: args.active_threads.unwrap_or(if demo { 64 } else { 256 }),
            idle_backend_connections: args.idle_backend_connections,
        };
        if plan.backend_connections == 0 || plan.idle_backend_connections == 0 {
            bail!("--backend-connections and --idle-backend-connections must be at least 1");
        }
        if plan.active_threads == 0 {
            bail!("--active-threads must be at least 1");
        }
        Ok(plan)
    }
}

/// One sysbench run of the thread-thrashing part.
#[derive(Debug, Clone, Serialize)]
struct ThreadRun {
    scenario: &'static str,
    threads: u32,
    qps: Option<f64>,
    p95_ms: Option<f64>,
    errors: Option<u64>,
    /// The server's resident memory and its peak so far (all runs), mid-run, in MiB.
    server_rss_mib: Option<f64>,
    server_hwm_mib: Option<f64>,
    /// What the server says its threads use now (`Memory_used`), mid-run, in MiB: unlike
    /// RSS, it falls again after a run with many connections.
    server_memory_used_mib: Option<f64>,
    /// `Threads_connected` on the server mid-run (includes the sampling connection).
    server_connections: Option<u64>,
    sluice_rss_mib: Option<f64>,
    failure: Option<String>,
}

/// The idle-clients part.
#[derive(Debug, Clone, Serialize, Default)]
struct IdleRun {
    clients: u32,
    logged_in: u32,
    sluice_rss_before_mib: f64,
    sluice_rss_after_mib: f64,
    bytes_per_idle_client: f64,
    active_threads: u32,
    qps: Option<f64>,
    p95_ms: Option<f64>,
    errors: Option<u64>,
    server_connections: Option<u64>,
    backend_limit: u32,
    pings_answered: u32,
    pings_sent: u32,
    failure: Option<String>,
}

#[derive(Debug, Serialize)]
struct Results {
    command: String,
    started_at: String,
    finished_at: Option<String>,
    sluice_version: String,
    sysbench_version: String,
    machine: Machine,
    duration_secs: u64,
    backend_connections: u32,
    runs: Vec<ThreadRun>,
    idle: IdleRun,
}

const USER: &str = "sbtest";
const PASSWORD: &str = "sbtest-mux";

/// Runs the benchmark, printing the tables and where the report is.
pub fn run(args: &MuxArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

/// [`run`], leaving the latest report in `document`.
fn run_into(args: &MuxArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let plan = Plan::resolve(args)?;
    let started = std::time::SystemTime::now();
    let out = args.common.out_dir("mux", started);
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating {}", out.display()))?;
    std::fs::create_dir_all(out.join("idle"))?;
    let sluice_bin = args.common.sluice_bin()?;
    let sysbench = args.common.sysbench.clone();
    let sysbench_version = sysbench::version(&sysbench)?;
    let creds = Credentials {
        user: USER.into(),
        password: PASSWORD.into(),
        database: "sbtest".into(),
        insert_schema: "sluice_slap".into(),
    };
    let data = plan.data;
    let mut results = Results {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        finished_at: None,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
        sysbench_version,
        machine: Machine::detect(),
        duration_secs: plan.duration.as_secs(),
        backend_connections: plan.backend_connections,
        runs: Vec::new(),
        idle: IdleRun::default(),
    };
    let top = plan.threads.iter().copied().max().unwrap_or(1);
    // Out of any fleet: the server connections counted are the pool's (a fleet member
    // holds two more of its own: docs/BENCHMARKS.md, "Several instances").
    let limits =
        "\n[limits]\nmax_client_connections = 20000\n\n[fleet]\nenabled = false\n".to_string();
    println!(
        "starting MariaDB and Sluice (pool of {} connections)...",
        plan.backend_connections
    );
    let topology = Topology::embedded(
        &EmbeddedOptions {
            max_connections: top.max(plan.active_threads) + 100,
            passthrough: true,
            cached: false,
            cached_by_table: false,
            dedicated: false,
            traced: false,
            traced_all: false,
            otlp_endpoint: None,
            binlog: false,
            haproxy: None,
            pool_max: plan.backend_connections,
            sluice_bin: sluice_bin.clone(),
            dir: out.clone(),
            extra_config: limits.clone(),
            hop: None,
            server_cpus: None,
            replicas: 0,
        },
        &creds,
    )?;
    prepare(&topology, &sysbench, data, &out)?;
    for &threads in &plan.threads {
        for round in 0..plan.repeat {
            for scenario in ["direct", "sluice"] {
                println!("{scenario}: {threads} threads, run {}", round + 1);
                let run = thread_run(
                    &topology,
                    &sysbench,
                    data,
                    (scenario, threads, round),
                    &plan,
                    &out,
                );
                results.runs.push(run);
                *document = Some(report::write(&out, &results)?);
            }
        }
    }
    drop(topology);

    println!(
        "starting MariaDB and Sluice (pool of {} connections) for {} idle clients...",
        plan.idle_backend_connections, plan.idle_clients
    );
    let topology = Topology::embedded(
        &EmbeddedOptions {
            max_connections: plan.active_threads.max(plan.idle_backend_connections) + 100,
            passthrough: true,
            cached: false,
            cached_by_table: false,
            dedicated: false,
            traced: false,
            traced_all: false,
            otlp_endpoint: None,
            binlog: false,
            haproxy: None,
            pool_max: plan.idle_backend_connections,
            sluice_bin,
            dir: out.join("idle"),
            extra_config: limits,
            hop: None,
            server_cpus: None,
            replicas: 0,
        },
        &creds,
    );
    results.idle = match topology {
        Ok(topology) => match prepare(&topology, &sysbench, data, &out) {
            Ok(()) => idle_run(&topology, &sysbench, data, &plan, &out),
            Err(e) => IdleRun {
                failure: Some(format!("{e:#}")),
                ..IdleRun::default()
            },
        },
        Err(e) => IdleRun {
            failure: Some(format!("{e:#}")),
            ..IdleRun::default()
        },
    };
    results.finished_at =
        Some(humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string());
    let written = report::write(&out, &results)?;
    print!("{}", crate::document::markdown_sections(&written.sections));
    println!("\nreport: {}", out.join("report.html").display());
    println!("results: {}", out.join("results.md").display());
    *document = Some(written);
    Ok(())
}

fn prepare(topology: &Topology, sysbench: &Path, data: DataSet, out: &Path) -> anyhow::Result<()> {
    let direct = topology.direct.as_ref().context("no database")?;
    let endpoint = endpoint(&direct.host, direct.port);
    std::fs::create_dir_all(out.join("raw"))?;
    SysbenchCommand::prepare(sysbench, &endpoint, data, 4).execute_checked(
        "sysbench prepare",
        &out.join("raw/prepare.txt"),
        Duration::from_secs(600),
    )
}

fn endpoint(host: &str, port: u16) -> Endpoint {
    Endpoint {
        host: host.into(),
        port,
        user: USER.into(),
        password: PASSWORD.into(),
        database: "sbtest".into(),
        show_password: true,
    }
}

/// The read-only run both benchmarks measure: oltp_read_only outside transactions,
/// prepared statements, a report every second.
pub(crate) fn spec(threads: u32, duration: Duration, data: DataSet) -> RunSpec {
    RunSpec {
        workload: Workload::OltpReadOnly,
        ps_mode: PsMode::Auto,
        threads,
        duration_secs: duration.as_secs().max(1),
        report_interval_secs: 1,
        data,
    }
}

/// What the server and Sluice look like halfway through a run.
struct Sample {
    server_rss: Option<f64>,
    server_hwm: Option<f64>,
    memory_used: Option<f64>,
    connections: Option<u64>,
    sluice_rss: Option<f64>,
}

fn sample(topology: &Topology) -> Sample {
    let server = topology.mariadb_pid().and_then(|p| memory(p).ok());
    Sample {
        server_rss: server.map(|m| m.0),
        server_hwm: server.map(|m| m.1),
        memory_used: topology
            .admin_scalar("SHOW GLOBAL STATUS LIKE 'Memory_used'")
            .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .map(|b| b / 1024.0 / 1024.0),
        // Not counting the connection that asks.
        connections: topology
            .admin_scalar("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
            .and_then(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .map(|n| n.saturating_sub(1)),
        sluice_rss: topology
            .passthrough
            .as_ref()
            .and_then(|s| s.pid)
            .and_then(|p| memory(p).ok())
            .map(|m| m.0),
    }
}

/// Runs sysbench in the background, samples halfway, and waits for it.
fn sampled_run(
    topology: &Topology,
    sysbench: &Path,
    endpoint: &Endpoint,
    spec: RunSpec,
    log: PathBuf,
) -> (anyhow::Result<sysbench::RunStats>, Sample) {
    let cmd = SysbenchCommand::run(sysbench, endpoint, &spec, &std::env::temp_dir());
    let deadline = Duration::from_secs(spec.duration_secs + 120);
    let log_for_run = log.clone();
    let handle = std::thread::spawn(move || cmd.execute(&log_for_run, deadline, |_, _| {}));
    std::thread::sleep(Duration::from_secs(spec.duration_secs).mul_f64(0.6));
    let s = sample(topology);
    let stats = match handle.join() {
        Ok(Ok(finished)) => parse_run(&finished.output)
            .with_context(|| format!("sysbench output in {}", log.display())),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(anyhow::anyhow!("the sysbench thread panicked")),
    };
    (stats, s)
}

fn thread_run(
    topology: &Topology,
    sysbench: &Path,
    data: DataSet,
    (scenario, threads, round): (&'static str, u32, u32),
    plan: &Plan,
    out: &Path,
) -> ThreadRun {
    let target = match scenario {
        "direct" => topology.direct.clone(),
        _ => topology.passthrough.as_ref().map(|s| s.target.clone()),
    };
    let mut run = ThreadRun {
        scenario,
        threads,
        qps: None,
        p95_ms: None,
        errors: None,
        server_rss_mib: None,
        server_hwm_mib: None,
        server_memory_used_mib: None,
        server_connections: None,
        sluice_rss_mib: None,
        failure: None,
    };
    let Some(target) = target else {
        run.failure = Some("not started".into());
        return run;
    };
    let log = out.join(format!("raw/{scenario}-{threads}-{}.txt", round + 1));
    let (stats, s) = sampled_run(
        topology,
        sysbench,
        &endpoint(&target.host, target.port),
        spec(threads, plan.duration, data),
        log,
    );
    run.server_rss_mib = s.server_rss;
    run.server_hwm_mib = s.server_hwm;
    run.server_memory_used_mib = s.memory_used;
    run.server_connections = s.connections;
    run.sluice_rss_mib = (scenario == "sluice").then_some(s.sluice_rss).flatten();
    (run.qps, run.p95_ms, run.errors, run.failure) = outcome(stats);
    run
}

fn idle_run(
    topology: &Topology,
    sysbench: &Path,
    data: DataSet,
    plan: &Plan,
    out: &Path,
) -> IdleRun {
    let mut run = IdleRun {
        clients: plan.idle_clients,
        active_threads: plan.active_threads,
        backend_limit: plan.idle_backend_connections,
        ..IdleRun::default()
    };
    let Some(sluice) = topology.passthrough.clone() else {
        run.failure = Some("Sluice did not start".into());
        return run;
    };
    let pid = sluice.pid.expect("embedded");
    let addr = format!("{}:{}", sluice.target.host, sluice.target.port);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            run.failure = Some(e.to_string());
            return run;
        }
    };
    // One client first, so that the pool and the runtime are warm before measuring.
    if let Err(e) = runtime.block_on(Client::connect(&addr, USER, PASSWORD)) {
        run.failure = Some(format!("logging in through Sluice: {e:#}"));
        return run;
    }
    std::thread::sleep(Duration::from_secs(1));
    run.sluice_rss_before_mib = memory(pid).map(|m| m.0).unwrap_or(0.0);
    println!("opening {} idle client connections...", plan.idle_clients);
    let clients = runtime.block_on(async {
        let mut tasks = Vec::new();
        let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(200));
        for _ in 0..plan.idle_clients {
            let addr = addr.clone();
            let gate = gate.clone();
            tasks.push(tokio::spawn(async move {
                let _permit = gate.acquire_owned().await.ok()?;
                Client::connect(&addr, USER, PASSWORD).await.ok()
            }));
        }
        let mut clients = Vec::new();
        for t in tasks {
            if let Ok(Some(c)) = t.await {
                clients.push(c);
            }
        }
        clients
    });
    run.logged_in = clients.len() as u32;
    std::thread::sleep(Duration::from_secs(2));
    run.sluice_rss_after_mib = memory(pid).map(|m| m.0).unwrap_or(0.0);
    if run.logged_in > 0 {
        run.bytes_per_idle_client =
            (run.sluice_rss_after_mib - run.sluice_rss_before_mib) * 1024.0 * 1024.0
                / f64::from(run.logged_in);
    }
    println!(
        "{} idle clients logged in; sysbench with {} threads through the same Sluice...",
        run.logged_in, plan.active_threads
    );
    let (stats, s) = sampled_run(
        topology,
        sysbench,
        &endpoint(&sluice.target.host, sluice.target.port),
        spec(plan.active_threads, plan.duration, data),
        out.join("raw/idle-clients-sysbench.txt"),
    );
    run.server_connections = s.connections;
    (run.qps, run.p95_ms, run.errors, run.failure) = outcome(stats);
    let mut clients = clients;
    let sample: Vec<&mut Client> = clients.iter_mut().step_by(100).collect();
    run.pings_sent = sample.len() as u32;
    run.pings_answered = runtime.block_on(async {
        let mut n = 0;
        for c in sample {
            if c.ping().await.unwrap_or(false) {
                n += 1;
            }
        }
        n
    });
    drop(clients);
    run
}

/// qps, p95 latency, errors and the failure, from a sysbench run.
#[allow(clippy::type_complexity)]
pub(crate) fn outcome(
    stats: anyhow::Result<sysbench::RunStats>,
) -> (Option<f64>, Option<f64>, Option<u64>, Option<String>) {
    match stats {
        Ok(st) => (
            Some(st.queries_per_sec),
            Some(st.latency_percentile_ms),
            Some(st.ignored_errors),
            None,
        ),
        Err(e) => (None, None, None, Some(format!("{e:#}"))),
    }
}

/// (VmRSS, VmHWM) of a process, in MiB.
fn memory(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_memory(&status).context("no VmRSS/VmHWM in /proc/<pid>/status")
}

fn parse_memory(status: &str) -> Option<(f64, f64)> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

pub(crate) fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "FAILED".into(), |v| format!("{v:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_comes_from_proc_status() {
        let status = "Name:\tmariadbd\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n";
        assert_eq!(parse_memory(status), Some((100.0, 200.0)));
        assert_eq!(parse_memory("Name: x\n"), None);
    }

    #[test]
    fn defaults_and_demo_sizes() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: MuxArgs,
        }
        let plan = |argv: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("mux").chain(argv.iter().copied()))?;
            Plan::resolve(&cli.args)
        };
        let p = plan(&[]).unwrap();
        assert_eq!(p.threads, [256, 1024]);
        assert_eq!((p.idle_clients, p.active_threads), (10_000, 256));
        assert_eq!(p.duration, Duration::from_secs(30));
        let p = plan(&["--demo", "--idle-clients", "50"]).unwrap();
        assert_eq!(p.threads, [64, 256]);
        assert_eq!((p.idle_clients, p.active_threads), (50, 64));
        assert_eq!((p.data.tables, p.data.table_size), (2, 1_000));
        assert!(plan(&["--threads", "0"]).is_err());
        assert!(plan(&["--duration", "1500ms"]).is_err());
        assert!(plan(&["--backend-connections", "0"]).is_err());
    }
}
