//! `sluice bench galera`: multi-master inserts on Galera, the published insert
//! benchmark (REFERENCE §2) redone on sandbox clusters, then what flow control does to
//! writes when one node lags.
//!
//! The insert series: a plain MariaDB, then Galera clusters of each --nodes size, one
//! topology at a time (started, measured, torn down). On each, mysqlslap's 16 clients
//! insert into the published table at 1, 10, 100 and 1000 inserts per transaction,
//! straight at the first node and through Sluice listing every node with
//! `galera_writers = "all"`, taking turns. Every node's `Com_insert` is read around
//! each run: the sum must be the rows asked for, and the spread says where the writes
//! went.
//!
//! The flow-control part ([`flow`]): a cluster whose last node is throttled and, for a
//! while, has mysqlslap's table read-locked (`LOCK TABLES`), written through Sluice with
//! `galera_writers = "all"` and then `"one"`, every node's flow-control counters sampled
//! once a second.
//!
//! Sluice runs as a child process with a written configuration and is read through its
//! admin API only, as a user would run it; the report ([`report`]) is rewritten after
//! every run.

mod flow;
mod lock;
mod report;
mod servers;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;
use sluice_sandbox::{self as sandbox, MariaDb};

pub(crate) use servers::parse_status;
#[cfg(test)]
use servers::sluice_config;
use servers::{delta, read_all, NodeStatus, Proxy, Servers};

use crate::document::Document;
use crate::mysqlslap::{self, InsertSpec, SlapCommand, SlapStats};
use crate::report::{thousands, Machine};
use crate::routing::last_line;
use crate::sysbench::Endpoint;
use crate::{CommonArgs, Ran, DIRECT, SLUICE};

/// Flags of `sluice bench galera` (its defaults are in the `Scenario::Galera` help).
/// The common --threads, --duration, --tables and --table-size do not apply: mysqlslap
/// runs a number of rows, not a time.
#[derive(clap::Args, Debug, Clone)]
pub struct GaleraArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Galera cluster sizes of the insert series, after the plain MariaDB [default:
    /// 1,2,3; demo: 1,3].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub nodes: Option<Vec<usize>>,
    /// Rows each insert run writes, over all clients (the published run: 1000000)
    /// [default: 100000; demo: 20000].
    #[arg(long)]
    pub rows: Option<u64>,
    /// Transaction lengths (inserts per COMMIT).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "1,10,100,1000"
    )]
    pub trx: Vec<u32>,
    /// Concurrent mysqlslap clients.
    #[arg(long, default_value_t = 16)]
    pub clients: u32,
    /// Nodes of the flow-control part; 0 skips it.
    #[arg(long, default_value_t = 3)]
    pub flow_nodes: usize,
    /// Rows of each flow-control run [default: 50000; demo: 20000].
    #[arg(long)]
    pub flow_rows: Option<u64>,
    /// Inserts per transaction in the flow-control runs.
    #[arg(long, default_value_t = 10)]
    pub flow_trx: u32,
    /// How long mysqlslap's table is read-locked on the throttled node in each
    /// flow-control run, from just before the first insert; "0s" never takes the lock
    /// [default: 8s; demo: 3s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub flow_lock: Option<Duration>,
    /// `gcs.fc_limit` of the throttled node (the last one): write sets it may queue
    /// before it asks the cluster to pause.
    #[arg(long, default_value_t = 1)]
    pub fc_limit: u32,
    /// Backend connections Sluice may open to each node.
    #[arg(long, default_value_t = 32)]
    pub backend_connections: u32,
    /// Schema mysqlslap creates, fills and drops.
    #[arg(long, default_value = "sluice_slap")]
    pub schema: String,
    /// The mysqlslap program.
    #[arg(long, default_value = "mysqlslap", value_name = "PATH")]
    pub mysqlslap: PathBuf,
}

/// How long Sluice's monitor gets to see every node up and elect a writer.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a cluster gets to be synced again after a run.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// One topology of the insert series: 0 nodes is the plain MariaDB.
fn topology_name(nodes: usize) -> String {
    match nodes {
        0 => "MariaDB".into(),
        n => format!("Galera {n}"),
    }
}

/// The flags checked, defaults filled in.
#[derive(Debug, Clone)]
struct Plan {
    /// Cluster sizes, the plain server (0) first.
    topologies: Vec<usize>,
    rows: u64,
    per_trx: Vec<u32>,
    clients: u32,
    repeat: u32,
    flow: Option<FlowPlan>,
}

#[derive(Debug, Clone, Serialize)]
struct FlowPlan {
    nodes: usize,
    rows: u64,
    per_trx: u32,
    lock_secs: u64,
    fc_limit: u32,
}

impl Plan {
    fn resolve(args: &GaleraArgs) -> anyhow::Result<Plan> {
        let demo = args.common.demo;
        let nodes =
            args.nodes
                .clone()
                .unwrap_or_else(|| if demo { vec![1, 3] } else { vec![1, 2, 3] });
        if nodes.contains(&0) {
            bail!("--nodes needs cluster sizes of at least 1");
        }
        let per_trx = crate::dedup(&args.trx);
        if per_trx.is_empty() || per_trx.contains(&0) {
            bail!("--trx needs one or more transaction lengths of at least 1");
        }
        let rows = args.rows.unwrap_or(if demo { 20_000 } else { 100_000 });
        if args.clients == 0 || rows < u64::from(args.clients) {
            bail!("--clients must be at least 1 and --rows at least that many");
        }
        if args.common.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        if args.backend_connections == 0 {
            bail!("--backend-connections must be at least 1");
        }
        let flow = match args.flow_nodes {
            0 => None,
            1 => bail!("--flow-nodes needs at least 2 nodes (one of them throttled), or 0"),
            n => {
                let lock = args
                    .flow_lock
                    .unwrap_or(Duration::from_secs(if demo { 3 } else { 8 }));
                if lock.subsec_nanos() != 0 {
                    bail!("--flow-lock must be whole seconds");
                }
                let rows = args.flow_rows.unwrap_or(if demo { 20_000 } else { 50_000 });
                if rows < u64::from(args.clients) || args.flow_trx == 0 {
                    bail!("--flow-rows must be at least --clients, --flow-trx at least 1");
                }
                Some(FlowPlan {
                    nodes: n,
                    rows,
                    per_trx: args.flow_trx,
                    lock_secs: lock.as_secs(),
                    fc_limit: args.fc_limit,
                })
            }
        };
        let mut topologies = vec![0];
        topologies.extend(crate::dedup(&nodes));
        Ok(Plan {
            topologies,
            rows,
            per_trx,
            clients: args.clients,
            repeat: args.common.repeat,
            flow,
        })
    }

    /// (per_trx, repetition, path) of every run on one topology.
    fn runs(&self) -> Vec<(u32, u32, &'static str)> {
        crate::alternating(&self.per_trx, self.repeat)
    }
}

/// One mysqlslap run of the insert series.
#[derive(Debug, Clone, Serialize)]
struct InsertRun {
    topology: String,
    /// Galera nodes; 0 for the plain server.
    nodes: usize,
    per_trx: u32,
    repetition: u32,
    path: &'static str,
    /// Rows mysqlslap was asked for.
    rows_asked: u64,
    /// Rows the servers executed: the sum of every node's `Com_insert` over the run.
    rows_inserted: Option<u64>,
    seconds: Option<f64>,
    rows_per_sec: Option<f64>,
    /// What each node took from clients over the run (see [`SlapOutcome`]): where the
    /// writes went.
    local_per_node: Vec<Option<u64>>,
    /// The whole mysqlslap run, its CREATE and DROP included.
    wall_secs: Option<f64>,
    failure: Option<String>,
    command: String,
    /// mysqlslap's output, relative to the output directory.
    output_file: String,
}

/// Direct and through Sluice on one topology at one transaction length, medians.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct SummaryRow {
    topology: String,
    nodes: usize,
    per_trx: u32,
    direct_rows_per_sec: Option<f64>,
    sluice_rows_per_sec: Option<f64>,
    /// Over the plain server direct at the same transaction length.
    direct_vs_single: Option<f64>,
    sluice_vs_single: Option<f64>,
    /// REFERENCE §2, where it gives this cell.
    published_rows_per_sec: Option<f64>,
    published_vs_single: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct Results {
    command: String,
    started_at: String,
    finished_at: Option<String>,
    error: Option<String>,
    sluice_version: String,
    mysqlslap_version: String,
    mariadb_version: Option<String>,
    machine: Machine,
    clients: u32,
    rows_per_run: u64,
    repeat: u32,
    topologies: Vec<String>,
    /// Each topology's Sluice configuration file, relative to the output directory.
    sluice_configs: Vec<String>,
    runs: Vec<InsertRun>,
    summary: Vec<SummaryRow>,
    flow: Option<flow::FlowResults>,
}

/// Runs the benchmark, printing the tables and where the report is.
pub fn run(args: &GaleraArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

fn run_into(args: &GaleraArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let plan = Plan::resolve(args)?;
    let started = SystemTime::now();
    let out = args.common.out_dir("galera", started);
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
            mysqlslap_version: mysqlslap::version(&args.mysqlslap)?,
            mariadb_version: None,
            machine: Machine::detect(),
            clients: plan.clients,
            rows_per_run: plan.rows,
            repeat: plan.repeat,
            topologies: plan.topologies.iter().map(|&n| topology_name(n)).collect(),
            sluice_configs: Vec::new(),
            runs: Vec::new(),
            summary: Vec::new(),
            flow: None,
        },
    };
    *document = Some(report::write(&out, &mut bench.results)?);
    let measured = bench.measure();
    crate::report::conclude(&out, &mut bench.results, measured, document, report::write)
}

/// The run's state: flags, plan, where files go, what was measured so far.
struct Bench<'a> {
    args: &'a GaleraArgs,
    plan: &'a Plan,
    sluice_bin: PathBuf,
    out: &'a Path,
    results: Results,
}

impl Bench<'_> {
    /// Every topology of the insert series in turn, then the flow-control part.
    fn measure(&mut self) -> anyhow::Result<()> {
        for &nodes in &self.plan.topologies.clone() {
            self.topology(nodes)?;
        }
        if let Some(flow) = self.plan.flow.clone() {
            flow::run(self, &flow)?;
        }
        Ok(())
    }

    fn topology(&mut self, nodes: usize) -> anyhow::Result<()> {
        let name = topology_name(nodes);
        eprintln!("starting {name}");
        let servers = Servers::start(nodes)?;
        let members = servers.nodes();
        if self.results.mariadb_version.is_none() {
            self.results.mariadb_version = members[0]
                .execute("SELECT VERSION()")
                .ok()
                .and_then(|v| last_line(&v));
        }
        let stem = format!("sluice-{}", name.to_lowercase().replace(' ', ""));
        let config = self.out.join(format!("{stem}.toml"));
        let mut proxy = Proxy::start(self, &members, "all", &config)?;
        self.results.sluice_configs.push(format!("{stem}.toml"));
        let runs = self.plan.runs();
        for (index, &(per_trx, repetition, path)) in runs.iter().enumerate() {
            eprintln!(
                "[{name} {}/{}] {path}: {} rows, {per_trx} per transaction, run {repetition}",
                index + 1,
                runs.len(),
                thousands(self.plan.rows)
            );
            let target = if path == DIRECT {
                members[0].addr()
            } else {
                proxy.addr()
            };
            let spec = InsertSpec {
                clients: self.plan.clients,
                total_inserts: self.plan.rows,
                per_trx,
            };
            let output_file = format!(
                "raw/{}-{path}-trx{per_trx}-r{repetition}.txt",
                name.to_lowercase().replace(' ', "")
            );
            let (command, outcome) =
                self.slap(&spec, target, &members, &output_file, false, |_, _| {});
            let run = InsertRun {
                topology: name.clone(),
                nodes,
                per_trx,
                repetition,
                path,
                rows_asked: spec.inserts(),
                rows_inserted: outcome.inserted(),
                seconds: outcome.seconds(),
                rows_per_sec: outcome.rows_per_sec(),
                local_per_node: outcome.local_per_node.clone(),
                wall_secs: outcome.wall_secs,
                failure: outcome.failure(spec.inserts()),
                command,
                output_file,
            };
            eprintln!("    {}", describe(&run));
            let sluice_failed = run.failure.is_some() && path == SLUICE;
            self.results.runs.push(run);
            if sluice_failed {
                if let Err(ended) = proxy.process.check() {
                    bail!("{ended}");
                }
            }
            report::write(self.out, &mut self.results)?;
            servers
                .settle()
                .with_context(|| format!("{name}: the cluster did not settle after a run"))?;
        }
        eprintln!("stopping Sluice and {name}");
        drop(proxy);
        drop(servers);
        Ok(())
    }

    /// One mysqlslap run at `target`, into a table it creates and drops, or into the one
    /// the caller created (`existing_table`), every node's counters read around it; `on_tick`
    /// gets the time since the start and the nodes about once a second, and `None` as
    /// soon as mysqlslap has ended, before the rows are counted.
    fn slap(
        &self,
        spec: &InsertSpec,
        target: SocketAddr,
        nodes: &[&MariaDb],
        output_file: &str,
        existing_table: bool,
        mut on_tick: impl FnMut(Option<Duration>, &[&MariaDb]),
    ) -> (String, SlapOutcome) {
        let endpoint = Endpoint {
            host: target.ip().to_string(),
            port: target.port(),
            user: sandbox::ADMIN_USER.into(),
            password: sandbox::ADMIN_PASSWORD.into(),
            // Only what mysqlslap's schema must differ from.
            database: "sbtest".into(),
            show_password: true,
        };
        let (program, schema) = (&self.args.mysqlslap, &self.args.schema);
        let command = if existing_table {
            SlapCommand::insert_into_existing(program, &endpoint, spec, schema)
        } else {
            SlapCommand::insert(program, &endpoint, spec, schema)
        };
        let log = self.out.join(output_file);
        let before = read_all(nodes);
        // Even a throttled cluster on a small machine inserts a hundred rows a second.
        let deadline = Duration::from_secs(120 + spec.total_inserts / 100);
        let finished = command.execute(&log, deadline, |elapsed| on_tick(Some(elapsed), nodes));
        on_tick(None, nodes);
        let wall_secs = finished.as_ref().ok().map(|f| f.elapsed.as_secs_f64());
        let (inserted, after) = agreed_inserts(nodes, &before);
        // Write sets a Galera node replicated are the transactions it took from
        // clients; a plain server's own inserts are all local.
        let local = if nodes.len() > 1
            || after
                .iter()
                .flatten()
                .any(|s| s.get("wsrep_replicated").is_some())
        {
            "wsrep_replicated"
        } else {
            "com_insert"
        };
        let local_per_node = before
            .iter()
            .zip(&after)
            .map(|(b, a)| {
                let get = |s: &Option<NodeStatus>| s.as_ref().and_then(|s| s.get(local));
                delta(get(b), get(a))
            })
            .collect();
        let what = format!("insert trx={}", spec.per_trx);
        let stats = finished.and_then(|f| command.check(&f, &what, &log));
        let outcome = SlapOutcome {
            stats,
            inserted,
            local_per_node,
            wall_secs,
        };
        (command.display(), outcome)
    }
}

/// How long the nodes get to apply every row after a run.
const APPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// The rows every node executed since `before` (`Com_insert` counts the rows a Galera
/// node applies for the others as well as its own), once all nodes agree, and the
/// counters then; `Err` says how far apart they were at [`APPLY_TIMEOUT`].
fn agreed_inserts(
    nodes: &[&MariaDb],
    before: &[Option<NodeStatus>],
) -> (Result<u64, String>, Vec<Option<NodeStatus>>) {
    let deadline = Instant::now() + APPLY_TIMEOUT;
    loop {
        let now = read_all(nodes);
        let counts: Vec<Option<u64>> = before
            .iter()
            .zip(&now)
            .map(|(b, n)| {
                let get = |s: &Option<NodeStatus>| s.as_ref().and_then(|s| s.get("com_insert"));
                delta(get(b), get(n))
            })
            .collect();
        if let Some(Some(first)) = counts.first() {
            if counts.iter().all(|c| *c == Some(*first)) {
                return (Ok(*first), now);
            }
        }
        if Instant::now() >= deadline {
            let shown: Vec<String> = counts
                .iter()
                .map(|c| c.map_or("?".into(), thousands))
                .collect();
            return (
                Err(format!(
                    "the nodes did not agree on the rows inserted within {APPLY_TIMEOUT:?} \
                     (Com_insert per node: {})",
                    shown.join(" / ")
                )),
                now,
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What one mysqlslap run gave.
struct SlapOutcome {
    stats: anyhow::Result<SlapStats>,
    /// The rows every node has (see [`agreed_inserts`]).
    inserted: Result<u64, String>,
    /// What each node took from clients: write sets it replicated on Galera, its
    /// inserts on a plain server.
    local_per_node: Vec<Option<u64>>,
    /// mysqlslap's whole run, its CREATE and DROP included, which its own timer leaves
    /// out.
    wall_secs: Option<f64>,
}

impl SlapOutcome {
    fn inserted(&self) -> Option<u64> {
        self.inserted.as_ref().ok().copied()
    }

    /// mysqlslap's own time for the run.
    fn seconds(&self) -> Option<f64> {
        self.stats.as_ref().ok().map(|s| s.avg_secs)
    }

    fn rows_per_sec(&self) -> Option<f64> {
        self.stats.as_ref().ok().and_then(SlapStats::rows_per_sec)
    }

    /// Why the run does not count: mysqlslap failed, or the servers do not hold the
    /// rows asked for.
    fn failure(&self, asked: u64) -> Option<String> {
        match (&self.stats, &self.inserted) {
            (Err(e), _) => Some(format!("{e:#}")),
            (Ok(_), Err(e)) => Some(e.clone()),
            (Ok(_), Ok(n)) if *n != asked => Some(format!(
                "the servers executed {} inserts (Com_insert), not the {} asked for",
                thousands(*n),
                thousands(asked)
            )),
            _ => None,
        }
    }
}

/// A progress line's account of one run.
fn describe(run: &InsertRun) -> String {
    if let Some(f) = &run.failure {
        return format!("FAILED: {f}");
    }
    let spread: Vec<String> = run
        .local_per_node
        .iter()
        .map(|n| n.map_or("?".into(), thousands))
        .collect();
    format!(
        "{} rows/s in {:.2} s; local writes per node: {}",
        thousands(run.rows_per_sec.unwrap_or(0.0).round() as u64),
        run.seconds.unwrap_or(0.0),
        spread.join(" / ")
    )
}

impl crate::report::Ending for Results {
    fn ended(&mut self, at: String, error: Option<String>) {
        self.finished_at = Some(at);
        self.error = error;
    }

    fn counts(&self) -> (usize, usize) {
        let flow = self.flow.as_ref().map_or(&[][..], |f| &f.runs[..]);
        let failed = self.runs.iter().filter(|r| r.failure.is_some()).count()
            + flow.iter().filter(|r| r.failure.is_some()).count();
        (self.runs.len() + flow.len(), failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GaleraArgs,
    }

    fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
        let cli = Cli::try_parse_from(std::iter::once("galera").chain(argv.iter().copied()))?;
        Plan::resolve(&cli.args)
    }

    #[test]
    fn defaults_demo_and_bad_values() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.topologies, [0, 1, 2, 3]);
        assert_eq!(p.per_trx, [1, 10, 100, 1000]);
        assert_eq!((p.rows, p.clients), (100_000, 16));
        let flow = p.flow.as_ref().unwrap();
        assert_eq!((flow.nodes, flow.lock_secs, flow.fc_limit), (3, 8, 1));
        assert_eq!(p.runs().len(), 8);
        assert_eq!(p.runs()[..2], [(1, 1, DIRECT), (1, 1, SLUICE)]);
        let p = plan(&["--demo"]).unwrap();
        assert_eq!(p.topologies, [0, 1, 3]);
        assert_eq!(p.rows, 20_000);
        assert_eq!(p.flow.unwrap().lock_secs, 3);
        let p = plan(&["--nodes", "2,2", "--flow-nodes", "0", "--repeat", "3"]).unwrap();
        assert_eq!(p.topologies, [0, 2]);
        assert!(p.flow.is_none());
        assert_eq!(p.runs().len(), 4 * 3 * 2);
        assert!(plan(&["--nodes", "0"]).is_err());
        assert!(plan(&["--trx", "0"]).is_err());
        assert!(plan(&["--rows", "3"]).is_err());
        assert!(plan(&["--flow-nodes", "1"]).is_err());
        assert!(plan(&["--flow-lock", "1500ms"]).is_err());
    }

    #[test]
    fn the_configuration_lists_every_node() {
        let addresses: Vec<SocketAddr> = (0..3)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 3306 + i)))
            .collect();
        let text = sluice_config(&addresses, "all", (6033, 6080), "t0ken", 32);
        // Plain TOML: this crate does not depend on the proxy. The integration test of
        // `sluice bench galera` has Sluice check the files the benchmark wrote.
        let config: toml::Table = text.parse().unwrap();
        let servers = config["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 3);
        assert_eq!(servers[2]["name"].as_str(), Some("node3"));
        assert_eq!(servers[1]["address"].as_str(), Some("127.0.0.1:3307"));
        assert_eq!(config["routing"]["galera_writers"].as_str(), Some("all"));
        assert_eq!(config["pool"]["max_connections"].as_integer(), Some(32));
    }

    #[test]
    fn status_counters_come_from_batch_output() {
        let s = parse_status(
            "lower(VARIABLE_NAME)\tVARIABLE_VALUE\ncom_insert\t1200\nwsrep_local_state\t4\n\
             wsrep_cluster_status\tPrimary\nwsrep_flow_control_requested\ttrue\n",
        );
        assert_eq!(s.get("com_insert"), Some(&1200));
        assert_eq!(s.get("wsrep_local_state"), Some(&4));
        assert_eq!(s.get("wsrep_flow_control_requested"), Some(&1));
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn a_run_counts_only_with_every_row_inserted() {
        let ok = |inserted: Result<u64, String>| SlapOutcome {
            stats: Ok(mysqlslap::parse(
                "Benchmark\n\tAverage number of seconds to run all queries: 1.000 seconds\n\
                 \tMinimum number of seconds to run all queries: 1.000 seconds\n\
                 \tMaximum number of seconds to run all queries: 1.000 seconds\n\
                 \tNumber of clients running queries: 16\n\
                 \tAverage number of queries per client: 100\n",
            )
            .unwrap()),
            inserted,
            local_per_node: Vec::new(),
            wall_secs: None,
        };
        assert_eq!(ok(Ok(1600)).failure(1600), None);
        let short = ok(Ok(1500)).failure(1600).unwrap();
        assert!(short.contains("1,500 inserts"), "{short}");
        let apart = ok(Err("apart".into()));
        assert_eq!(apart.inserted(), None);
        assert_eq!(apart.failure(1600).as_deref(), Some("apart"));
    }
}
