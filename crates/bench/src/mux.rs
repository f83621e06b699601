//! `sluice bench-mux`: what multiplexing buys, measured end to end.
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
//! the end; results go to `results.md` and `results.json`.

use super::sysbench::{parse_run, DataSet, Endpoint, PsMode, RunSpec, SysbenchCommand, Workload};
use super::topology::{Credentials, EmbeddedOptions, Topology};
use anyhow::{bail, Context};
use serde::Serialize;
use sluice_wire::auth::native_scramble;
use sluice_wire::handshake::{HandshakeResponse, InitialHandshake};
use sluice_wire::packet::{take_packet, write_packet};
use sluice_wire::CapabilityFlags;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Flags of `sluice bench-mux`.
#[derive(clap::Args, Debug, Clone)]
pub struct MuxArgs {
    /// sysbench thread counts of the thread-thrashing part.
    #[arg(long, value_delimiter = ',', default_value = "256,1024")]
    pub threads: Vec<u32>,
    /// Backend connections Sluice multiplexes onto in the thread-thrashing part.
    #[arg(long, default_value_t = 32)]
    pub backend_connections: u32,
    /// Idle client connections held open in the second part.
    #[arg(long, default_value_t = 10_000)]
    pub idle_clients: u32,
    /// sysbench threads working while the idle clients are held.
    #[arg(long, default_value_t = 256)]
    pub active_threads: u32,
    /// Backend connections of the idle-clients part.
    #[arg(long, default_value_t = 64)]
    pub idle_backend_connections: u32,
    /// Duration of each sysbench run.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub duration: Duration,
    /// Runs per scenario and thread count, alternating direct and Sluice.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// sysbench tables and rows per table.
    #[arg(long, default_value_t = 8)]
    pub tables: u32,
    #[arg(long, default_value_t = 10_000)]
    pub table_size: u64,
    /// Output directory [default: bench-results/mux-<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The Sluice binary to start [default: this one].
    #[arg(long, value_name = "PATH")]
    pub sluice_bin: Option<PathBuf>,
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
    duration_secs: u64,
    backend_connections: u32,
    runs: Vec<ThreadRun>,
    idle: IdleRun,
}

const USER: &str = "sbtest";
const PASSWORD: &str = "sbtest-mux";
const ENV_RAISED: &str = "SLUICE_BENCH_MUX_NOFILE";

/// Runs the benchmark, printing the tables and where the files are.
pub fn run(args: MuxArgs) -> anyhow::Result<()> {
    // Ten thousand sockets need the open-files limit raised in this very process: run
    // again through bash's ulimit once.
    if std::env::var_os(ENV_RAISED).is_none() && nofile_soft_limit() < 4 * 1024 {
        let exe = std::env::current_exe()?;
        let mut argv: Vec<String> = std::env::args().skip(1).collect();
        argv.insert(0, exe.to_string_lossy().into_owned());
        let status = std::process::Command::new("bash")
            .arg("-c")
            .arg("ulimit -n 65535 2>/dev/null || ulimit -n \"$(ulimit -Hn)\"; exec \"$@\"")
            .arg("bash")
            .args(&argv)
            .env(ENV_RAISED, "1")
            .status()?;
        if !status.success() {
            bail!("the benchmark failed (see above)");
        }
        return Ok(());
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "bench-results/mux-{}",
            super::compact_timestamp(std::time::SystemTime::now())
        ))
    });
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating {}", out.display()))?;
    std::fs::create_dir_all(out.join("idle"))?;
    let sluice_bin = match &args.sluice_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?,
    };
    let sysbench = which("sysbench").context("sysbench is not installed")?;
    let creds = Credentials {
        user: USER.into(),
        password: PASSWORD.into(),
        database: "sbtest".into(),
        insert_schema: "sluice_slap".into(),
    };
    let data = DataSet {
        tables: args.tables,
        table_size: args.table_size,
    };
    let mut results = Results {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        duration_secs: args.duration.as_secs(),
        backend_connections: args.backend_connections,
        runs: Vec::new(),
        idle: IdleRun::default(),
    };

    let top = args.threads.iter().copied().max().unwrap_or(1);
    let limits = "\n[limits]\nmax_client_connections = 20000\n".to_string();
    println!(
        "starting MariaDB and Sluice (pool of {} connections)...",
        args.backend_connections
    );
    let topology = Topology::embedded(
        &EmbeddedOptions {
            max_connections: top.max(args.active_threads) + 100,
            passthrough: true,
            cached: false,
            pool_max: args.backend_connections,
            sluice_bin: sluice_bin.clone(),
            dir: out.clone(),
            extra_config: limits.clone(),
        },
        &creds,
    )?;
    prepare(&topology, &sysbench, data, &out)?;
    for &threads in &args.threads {
        for round in 0..args.repeat {
            for scenario in ["direct", "sluice"] {
                println!("{scenario}: {threads} threads, run {}", round + 1);
                let run = thread_run(
                    &topology,
                    &sysbench,
                    data,
                    (scenario, threads, round),
                    &args,
                    &out,
                );
                results.runs.push(run);
                write_results(&out, &results)?;
            }
        }
    }
    drop(topology);

    println!(
        "starting MariaDB and Sluice (pool of {} connections) for {} idle clients...",
        args.idle_backend_connections, args.idle_clients
    );
    let topology = Topology::embedded(
        &EmbeddedOptions {
            max_connections: args.active_threads.max(args.idle_backend_connections) + 100,
            passthrough: true,
            cached: false,
            pool_max: args.idle_backend_connections,
            sluice_bin,
            dir: out.join("idle"),
            extra_config: limits,
        },
        &creds,
    );
    results.idle = match topology {
        Ok(topology) => match prepare(&topology, &sysbench, data, &out) {
            Ok(()) => idle_run(&topology, &sysbench, data, &args, &out),
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
    write_results(&out, &results)?;
    print!("{}", markdown(&results));
    println!("\nresults: {}", out.join("results.md").display());
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
) -> (anyhow::Result<super::sysbench::RunStats>, Sample) {
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
    args: &MuxArgs,
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
        spec(threads, args.duration, data),
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
    args: &MuxArgs,
    out: &Path,
) -> IdleRun {
    let mut run = IdleRun {
        clients: args.idle_clients,
        active_threads: args.active_threads,
        backend_limit: args.idle_backend_connections,
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
    if let Err(e) = runtime.block_on(IdleClient::connect(&addr)) {
        run.failure = Some(format!("logging in through Sluice: {e:#}"));
        return run;
    }
    std::thread::sleep(Duration::from_secs(1));
    run.sluice_rss_before_mib = memory(pid).map(|m| m.0).unwrap_or(0.0);
    println!("opening {} idle client connections...", args.idle_clients);
    let clients = runtime.block_on(async {
        let mut tasks = Vec::new();
        let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(200));
        for _ in 0..args.idle_clients {
            let addr = addr.clone();
            let gate = gate.clone();
            tasks.push(tokio::spawn(async move {
                let _permit = gate.acquire_owned().await.ok()?;
                IdleClient::connect(&addr).await.ok()
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
        run.logged_in, args.active_threads
    );
    let (stats, s) = sampled_run(
        topology,
        sysbench,
        &endpoint(&sluice.target.host, sluice.target.port),
        spec(args.active_threads, args.duration, data),
        out.join("raw/idle-clients-sysbench.txt"),
    );
    run.server_connections = s.connections;
    (run.qps, run.p95_ms, run.errors, run.failure) = outcome(stats);
    let mut clients = clients;
    let sample: Vec<&mut IdleClient> = clients.iter_mut().step_by(100).collect();
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
    stats: anyhow::Result<super::sysbench::RunStats>,
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

/// A logged-in client connection that stays idle.
struct IdleClient {
    stream: tokio::net::TcpStream,
    buf: bytes::BytesMut,
}

impl IdleClient {
    async fn connect(addr: &str) -> anyhow::Result<IdleClient> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let mut c = IdleClient {
            stream,
            buf: bytes::BytesMut::with_capacity(256),
        };
        let (seq, greeting) = c.read().await?;
        let hs = InitialHandshake::parse(&greeting).map_err(|e| anyhow::anyhow!("{e}"))?;
        let caps = CapabilityFlags(
            CapabilityFlags::PROTOCOL_41
                | CapabilityFlags::SECURE_CONNECTION
                | CapabilityFlags::PLUGIN_AUTH
                | CapabilityFlags::LONG_PASSWORD
                | CapabilityFlags::TRANSACTIONS,
        );
        let response = HandshakeResponse {
            capabilities: caps,
            mariadb_caps: 0,
            max_packet: 1 << 24,
            charset: 45,
            username: USER.as_bytes().to_vec(),
            auth_response: native_scramble(
                PASSWORD.as_bytes(),
                &hs.scramble[..20.min(hs.scramble.len())],
            ),
            database: None,
            auth_plugin: Some(b"mysql_native_password".to_vec()),
            attributes: Vec::new(),
        };
        c.write(seq.wrapping_add(1), &response.payload()).await?;
        let (_, answer) = c.read().await?;
        match answer.first() {
            Some(0) => Ok(c),
            _ => bail!("login refused: {}", String::from_utf8_lossy(&answer)),
        }
    }

    async fn ping(&mut self) -> anyhow::Result<bool> {
        self.write(0, &[0x0e]).await?;
        let (_, answer) = tokio::time::timeout(Duration::from_secs(10), self.read()).await??;
        Ok(answer.first() == Some(&0))
    }

    async fn read(&mut self) -> anyhow::Result<(u8, Vec<u8>)> {
        loop {
            if let Some(p) = take_packet(&mut self.buf, 1 << 20)? {
                return Ok((p.seq, p.payload.to_vec()));
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                bail!("closed by Sluice");
            }
        }
    }

    async fn write(&mut self, seq: u8, payload: &[u8]) -> anyhow::Result<()> {
        let mut out = bytes::BytesMut::with_capacity(payload.len() + 4);
        write_packet(&mut out, seq, payload);
        self.stream.write_all(&out).await?;
        Ok(())
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

fn nofile_soft_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(1024)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

fn write_results(out: &Path, results: &Results) -> anyhow::Result<()> {
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(results)?,
    )?;
    std::fs::write(out.join("results.md"), markdown(results))?;
    Ok(())
}

pub(crate) fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "FAILED".into(), |v| format!("{v:.digits$}"))
}

/// The tables, as Markdown.
fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Thread thrashing: oltp_read_only --skip_trx=on, {} s per run, Sluice onto {} backend connections\n",
        r.duration_secs, r.backend_connections
    );
    let _ = writeln!(
        s,
        "| threads | scenario | qps | p95 ms | errors | server connections | server Memory_used MiB | server RSS MiB | server peak so far MiB | Sluice RSS MiB |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for run in &r.runs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            run.threads,
            run.scenario,
            cell(run.qps, 0),
            cell(run.p95_ms, 1),
            run.errors.map_or("-".into(), |e| e.to_string()),
            run.server_connections.map_or("-".into(), |c| c.to_string()),
            cell(run.server_memory_used_mib, 0),
            cell(run.server_rss_mib, 0),
            cell(run.server_hwm_mib, 0),
            run.sluice_rss_mib.map_or("-".into(), |m| format!("{m:.0}")),
        );
    }
    let mut threads: Vec<u32> = r.runs.iter().map(|x| x.threads).collect();
    threads.dedup();
    let _ = writeln!(s, "\n| threads | Sluice / direct (median qps) |\n|---|---|");
    for t in threads {
        let med = |scenario: &str| {
            let mut v: Vec<f64> = r
                .runs
                .iter()
                .filter(|x| x.threads == t && x.scenario == scenario)
                .filter_map(|x| x.qps)
                .collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        let ratio = match (med("sluice"), med("direct")) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "n/a".into(),
        };
        let _ = writeln!(s, "| {t} | {ratio} |");
    }
    let i = &r.idle;
    let _ = writeln!(s, "\n## Idle clients\n");
    if let Some(f) = &i.failure {
        let _ = writeln!(s, "FAILED: {f}\n");
    }
    let _ = writeln!(
        s,
        "| idle clients logged in | Sluice RSS before → after | per idle client | active threads | qps | p95 ms | errors | server connections (limit) | idle clients answering a ping |\n|---|---|---|---|---|---|---|---|---|"
    );
    let _ = writeln!(
        s,
        "| {} of {} | {:.1} → {:.1} MiB | {:.1} KiB | {} | {} | {} | {} | {} ({}) | {} of {} |",
        i.logged_in,
        i.clients,
        i.sluice_rss_before_mib,
        i.sluice_rss_after_mib,
        i.bytes_per_idle_client / 1024.0,
        i.active_threads,
        cell(i.qps, 0),
        cell(i.p95_ms, 1),
        i.errors.map_or("-".into(), |e| e.to_string()),
        i.server_connections.map_or("-".into(), |c| c.to_string()),
        i.backend_limit,
        i.pings_answered,
        i.pings_sent,
    );
    s
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
    fn tables_show_ratios_and_failures() {
        let run = |scenario, qps| ThreadRun {
            scenario,
            threads: 256,
            qps,
            p95_ms: Some(1.5),
            errors: Some(0),
            server_rss_mib: Some(300.0),
            server_hwm_mib: Some(310.0),
            server_memory_used_mib: Some(50.0),
            server_connections: Some(33),
            sluice_rss_mib: None,
            failure: None,
        };
        let r = Results {
            command: "sluice bench-mux".into(),
            duration_secs: 30,
            backend_connections: 32,
            runs: vec![run("direct", Some(1000.0)), run("sluice", Some(1200.0))],
            idle: IdleRun {
                clients: 10,
                logged_in: 10,
                bytes_per_idle_client: 8192.0,
                failure: Some("sysbench failed".into()),
                ..IdleRun::default()
            },
        };
        let md = markdown(&r);
        assert!(md.contains("| 256 | 1.20 |"), "{md}");
        assert!(md.contains("| 10 of 10 |"), "{md}");
        assert!(md.contains("8.0 KiB"), "{md}");
        assert!(md.contains("FAILED: sysbench failed"), "{md}");
        let mut r = r;
        r.runs[1].qps = None;
        assert!(markdown(&r).contains("| 256 | n/a |"));
    }
}
