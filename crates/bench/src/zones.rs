//! `sluice bench zones`: reads from the nearest replica (REFERENCE §3). There, three
//! synchronous replicas sat in three availability zones, and letting each SQL node read
//! from the replica of its own zone instead of the primary gave +50% sysbench read-only
//! throughput with the client on the SQL node, +30% with the client one hop away.
//!
//! One machine has no zones, so every server is reached through a delay link
//! ([`sluice_sandbox::link`]) of --intra-zone one-way delay within a zone and
//! --cross-zone across: the primary in zone b, replica1 in a, replica2 in b, replica3 in
//! c; sysbench and Sluice in zone a. Replication between the servers stays direct: only
//! what the client and Sluice send is delayed. sysbench `oltp_read_only --skip_trx=on`
//! runs straight at the primary (`direct`), and through Sluice with every read on the
//! primary (`read_write_split = false`: the published baseline, `primary`), on the
//! replica of its zone (`[routing] zone = "a"`, `nearest`) and balanced over the
//! replicas with no zone (`spread`); each Sluice mode with the client beside Sluice
//! (`colocated`) and behind an intra-zone link (`client_hop`).
//!
//! Every run gets links and a Sluice of its own ([`setup`]), so that its link figures
//! (how late the relays delivered) are its own. Around it ([`measure`]), each server's
//! `Com_select`, less what Sluice's monitor runs there (measured once with Sluice idle),
//! and Sluice's counters say where the reads went. The report ([`report`]) sets the ratio
//! nearest ÷ primary beside the published one and is rewritten after every run.

mod measure;
mod report;
mod setup;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;
use sluice_sandbox::link::{relay_cost, LinkSpec};

use setup::{Deployment, Servers};

use crate::document::Document;
use crate::mux::cell;
use crate::report::{thousands, Machine};
use crate::routing::{delta, Snapshot};
use crate::sysbench::{self, DataSet};
use crate::{CommonArgs, Ran, Resolved, Sizes};

/// Flags of `sluice bench zones` (its defaults are in the `Scenario::Zones` help).
#[derive(clap::Args, Debug, Clone)]
pub struct ZonesArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// One-way delay between two hosts of the same zone ("100us", "1ms").
    #[arg(long, value_parser = humantime::parse_duration, default_value = "100us", value_name = "DURATION")]
    pub intra_zone: Duration,
    /// One-way delay between two hosts in different zones.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1ms", value_name = "DURATION")]
    pub cross_zone: Duration,
    /// Each chunk's delay varies by up to this much either way, on every link; at
    /// most --intra-zone.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s", value_name = "DURATION")]
    pub jitter: Duration,
    /// Backend connections Sluice may open to each server (it multiplexes onto them).
    #[arg(long, default_value_t = 64)]
    pub backend_connections: u32,
}

/// The zone of the client and of Sluice.
const HOME: &str = "a";

/// The replica set's servers and their zones, the primary first (the sandbox's order).
const SERVERS: [(&str, &str); 4] = [
    ("primary", "b"),
    ("replica1", "a"),
    ("replica2", "b"),
    ("replica3", "c"),
];

/// How long Sluice is watched idle to learn what its monitor alone runs on each server:
/// several of its checks, 500 ms apart.
const IDLE_WINDOW: Duration = Duration::from_secs(3);

/// Round trips `relay_cost` takes the median of.
const RELAY_SAMPLES: usize = 2_000;

/// Where the reads of a run are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    /// sysbench straight at the primary, across zones.
    Direct,
    /// Through Sluice, every statement on the primary (`read_write_split = false`).
    Primary,
    /// Through Sluice, reads on the replica of Sluice's zone.
    Nearest,
    /// Through Sluice, reads balanced over the replicas, no zone given.
    Spread,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Primary => "primary",
            Mode::Nearest => "nearest",
            Mode::Spread => "spread",
        }
    }
}

/// Where the client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Placement {
    /// On Sluice's host (direct runs: in zone a, with no Sluice between).
    Colocated,
    /// One intra-zone link before Sluice.
    ClientHop,
}

impl Placement {
    fn name(self) -> &'static str {
        match self {
            Placement::Colocated => "colocated",
            Placement::ClientHop => "client_hop",
        }
    }
}

/// Every mode and placement, in the order they take turns at each step: the two the
/// published ratio compares side by side.
const LEGS: [(Mode, Placement); 7] = [
    (Mode::Direct, Placement::Colocated),
    (Mode::Primary, Placement::Colocated),
    (Mode::Nearest, Placement::Colocated),
    (Mode::Spread, Placement::Colocated),
    (Mode::Primary, Placement::ClientHop),
    (Mode::Nearest, Placement::ClientHop),
    (Mode::Spread, Placement::ClientHop),
];

/// The flags checked and resolved.
#[derive(Debug, Clone)]
struct Plan {
    threads: Vec<u32>,
    duration: Duration,
    repeat: u32,
    data: DataSet,
    backend_connections: u32,
    intra_zone: Duration,
    cross_zone: Duration,
    jitter: Duration,
    /// Of every sandbox server: the direct runs' clients, Sluice's pool and room for
    /// the monitor and the benchmark's own queries.
    max_connections: u32,
}

impl Plan {
    fn resolve(args: &ZonesArgs) -> anyhow::Result<Plan> {
        let Resolved {
            threads,
            duration,
            data,
        } = args.common.resolve(&Sizes {
            threads: [&[8, 32], &[8]],
            seconds: [20, 5],
            tables: [4, 2],
            table_size: [10_000, 1_000],
        })?;
        if args.backend_connections == 0 {
            bail!("--backend-connections must be at least 1");
        }
        if args.jitter > args.intra_zone {
            bail!(
                "--jitter must be at most --intra-zone ({:?}): a link never delivers early",
                args.intra_zone
            );
        }
        let top = threads.iter().copied().max().expect("not empty");
        Ok(Plan {
            threads,
            duration,
            repeat: args.common.repeat,
            data,
            backend_connections: args.backend_connections,
            intra_zone: args.intra_zone,
            cross_zone: args.cross_zone,
            jitter: args.jitter,
            max_connections: top
                .saturating_add(args.backend_connections)
                .saturating_add(100),
        })
    }

    /// (threads, repetition, leg) of every run, in order.
    fn runs(&self) -> Vec<(u32, u32, (Mode, Placement))> {
        crate::alternating_over(&self.threads, self.repeat, &LEGS)
    }

    /// The one-way delay between zone [`HOME`] and `zone`.
    fn one_way(&self, zone: &str) -> Duration {
        if zone == HOME {
            self.intra_zone
        } else {
            self.cross_zone
        }
    }

    /// The link from zone [`HOME`] to a host in `zone`.
    fn link(&self, zone: &str) -> LinkSpec {
        LinkSpec {
            one_way: self.one_way(zone),
            jitter: self.jitter,
        }
    }
}

/// A server as the benchmark set it up.
#[derive(Debug, Clone, Serialize)]
struct ServerInfo {
    name: String,
    zone: String,
    /// Where it listens; Sluice and sysbench reach it only through links.
    address: String,
    /// The delay each way between zone a (client, Sluice) and it.
    one_way_us: f64,
    /// What Sluice's monitor made of it: "writer", "reader".
    role: String,
    /// SELECTs it ran per second with Sluice idle: Sluice's monitor and the benchmark's
    /// own counter reads, taken off every run's `Com_select`.
    idle_selects_per_sec: Option<f64>,
}

/// What one server did during one run.
#[derive(Debug, Clone, Serialize)]
struct ServerLoad {
    name: String,
    /// Reads Sluice sent it (the `reads` of `/v1/servers`); none for direct runs.
    reads: Option<u64>,
    /// What Sluice sent it as writes: with the split off, every statement.
    writes: Option<u64>,
    /// `Com_select` over the run, whoever sent them.
    com_select: Option<u64>,
    /// `Com_select` less what Sluice idle runs there over as long: the run's reads.
    selects: Option<u64>,
    /// Sluice's time to first byte of its statements there, after the run.
    ttfb_ms: Option<f64>,
}

/// What the links of one run did: the servers' and, with the client hop, the client's.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct LinkLoad {
    links: usize,
    /// Chunks relayed during the run.
    chunks: u64,
    /// How late a chunk was delivered after its due time, mean over the run's chunks.
    mean_late_us: Option<f64>,
    /// The latest any chunk was, over the links' life (the run and Sluice's start).
    worst_late_us: Option<f64>,
}

/// One sysbench run.
#[derive(Debug, Clone, Serialize)]
struct Run {
    mode: Mode,
    placement: Placement,
    threads: u32,
    /// 1-based.
    repetition: u32,
    tps: Option<f64>,
    qps: Option<f64>,
    avg_ms: Option<f64>,
    p95_ms: Option<f64>,
    errors: Option<u64>,
    failure: Option<String>,
    command: String,
    /// sysbench's output, relative to the output directory.
    output_file: String,
    /// Seconds between the counter reads around the run.
    wall_secs: f64,
    /// Share of the machine's CPU time busy over the run, everything on it counted.
    cpu_busy: Option<f64>,
    /// In [`SERVERS`] order.
    servers: Vec<ServerLoad>,
    reads_to_readers: Option<u64>,
    reads_to_writer: Option<u64>,
    links: LinkLoad,
}

/// One mode and placement at one thread count, medians over the repetitions.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct SummaryRow {
    placement: Placement,
    mode: Mode,
    threads: u32,
    tps: Option<f64>,
    qps: Option<f64>,
    avg_ms: Option<f64>,
    p95_ms: Option<f64>,
    /// Summed over the repetitions.
    errors: u64,
    /// The transaction's latency over its queries: the time of one read.
    ms_per_read: Option<f64>,
    /// The configured delays one read waits for: a round trip to where the reads went
    /// (by their share of the SELECTs), plus the client hop's.
    round_trip_ms: Option<f64>,
    cpu_busy: Option<f64>,
}

/// Nearest against primary at one placement and thread count.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct Comparison {
    placement: Placement,
    threads: u32,
    primary_tps: Option<f64>,
    nearest_tps: Option<f64>,
    /// nearest ÷ primary.
    ratio: Option<f64>,
    /// REFERENCE §3: 1.5 colocated, 1.3 one hop away.
    published_ratio: f64,
    spread_tps: Option<f64>,
    spread_ratio: Option<f64>,
    /// Straight at the primary (colocated only: there is no Sluice to be away from).
    direct_tps: Option<f64>,
}

/// Where the reads of one mode and placement went at one thread count, all
/// repetitions together.
#[derive(Debug, Clone, Serialize, PartialEq)]
struct ReadsRow {
    placement: Placement,
    mode: Mode,
    threads: u32,
    servers: Vec<ReadShare>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
struct ReadShare {
    name: String,
    /// `Com_select` less Sluice idle's.
    selects: u64,
    share: Option<f64>,
    /// What Sluice sent it, reads and writes, preparations included.
    statements: Option<u64>,
    statements_share: Option<f64>,
    /// Median over the runs.
    ttfb_ms: Option<f64>,
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
    intra_zone_us: f64,
    cross_zone_us: f64,
    jitter_us: f64,
    /// What one link costs by itself per round trip (no delay), µs.
    relay_cost_us: Option<f64>,
    servers: Vec<ServerInfo>,
    sluice_commands: Vec<String>,
    prepare_command: Option<String>,
    runs: Vec<Run>,
    summary: Vec<SummaryRow>,
    comparison: Vec<Comparison>,
    reads: Vec<ReadsRow>,
}

/// Runs the benchmark, printing the tables and where the report is.
pub fn run(args: &ZonesArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

/// [`run`], leaving the latest report in `document`.
fn run_into(args: &ZonesArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let plan = Plan::resolve(args)?;
    let started = SystemTime::now();
    let out = args.common.out_dir("zones", started);
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating {}", out.display()))?;
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
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
            repeat: plan.repeat,
            data: plan.data,
            backend_connections: plan.backend_connections,
            intra_zone_us: micros(plan.intra_zone),
            cross_zone_us: micros(plan.cross_zone),
            jitter_us: micros(plan.jitter),
            relay_cost_us: None,
            servers: Vec::new(),
            sluice_commands: Vec::new(),
            prepare_command: None,
            runs: Vec::new(),
            summary: Vec::new(),
            comparison: Vec::new(),
            reads: Vec::new(),
        },
    };
    *document = Some(report::write(&out, &mut bench.results)?);
    let measured = bench.measure();
    crate::report::conclude(&out, &mut bench.results, measured, document, report::write)
}

/// The run's state: flags, plan, where files go, what was measured so far.
struct Bench<'a> {
    args: &'a ZonesArgs,
    plan: &'a Plan,
    sluice_bin: PathBuf,
    out: &'a Path,
    results: Results,
}

impl Bench<'_> {
    /// Measures the relay, starts and loads the servers, learns what Sluice idle runs on
    /// them, then every run in turn. Whatever was started is stopped on the way out,
    /// error or not (the handles stop them on drop).
    fn measure(&mut self) -> anyhow::Result<()> {
        eprintln!("measuring the relay's own cost ({RELAY_SAMPLES} round trips, no delay)");
        let cost = relay_cost(RELAY_SAMPLES).context("measuring the relay's own cost")?;
        self.results.relay_cost_us = Some(cost.as_secs_f64() * 1e6);
        eprintln!(
            "starting a primary and {} replicas (max_connections={})",
            SERVERS.len() - 1,
            self.plan.max_connections
        );
        let servers = Servers::start(self.plan)?;
        self.results.mariadb_version = servers.version();
        eprintln!(
            "preparing {} tables x {} rows on the primary",
            self.plan.data.tables,
            thousands(self.plan.data.table_size)
        );
        let t = Instant::now();
        let prepare = servers.prepare(&self.args.common.sysbench, self.plan.data, self.out)?;
        self.results.prepare_command = Some(prepare);
        eprintln!(
            "  prepared and replicated in {:.1}s",
            t.elapsed().as_secs_f64()
        );
        self.idle(&servers)?;
        report::write(self.out, &mut self.results)?;

        let runs = self.plan.runs();
        for (index, &(threads, repetition, leg)) in runs.iter().enumerate() {
            eprintln!(
                "[{}/{}] {} {}: {threads} threads, run {repetition}, {} s",
                index + 1,
                runs.len(),
                leg.0.name(),
                leg.1.name(),
                self.plan.duration.as_secs()
            );
            let run = self.one_run(&servers, threads, repetition, leg)?;
            eprintln!("    {}", measure::describe(&run));
            self.results.runs.push(run);
            report::write(self.out, &mut self.results)?;
        }
        eprintln!("stopping the replica set");
        drop(servers);
        Ok(())
    }

    /// Starts Sluice as the nearest runs have it, notes the roles its monitor gives, and
    /// counts the SELECTs each server runs while nobody else uses it.
    fn idle(&mut self, servers: &Servers) -> anyhow::Result<()> {
        eprintln!(
            "watching Sluice idle for {} s: what its monitor runs on each server",
            IDLE_WINDOW.as_secs()
        );
        let deployment = self.deploy(servers, Mode::Nearest, Placement::Colocated, "idle")?;
        let databases = servers.databases();
        let names = names();
        let before = Snapshot::take(&names, &databases, None);
        let t = Instant::now();
        std::thread::sleep(IDLE_WINDOW);
        let after = Snapshot::take(&names, &databases, None);
        let secs = t.elapsed().as_secs_f64();
        self.results.servers = SERVERS
            .iter()
            .enumerate()
            .map(|(i, (name, zone))| ServerInfo {
                name: name.to_string(),
                zone: zone.to_string(),
                address: databases[i].addr().to_string(),
                one_way_us: self.plan.one_way(zone).as_secs_f64() * 1e6,
                role: deployment.roles[i].clone(),
                idle_selects_per_sec: delta(before.com_select[i], after.com_select[i])
                    .map(|n| n as f64 / secs),
            })
            .collect();
        for s in &self.results.servers {
            eprintln!(
                "  {} (zone {}, {} µs each way) at {}: {}, {} SELECT/s idle",
                s.name,
                s.zone,
                s.one_way_us,
                s.address,
                s.role,
                cell(s.idle_selects_per_sec, 1)
            );
        }
        Ok(())
    }

    /// Links, and a Sluice for every mode but direct, as `leg` needs them; its
    /// configuration in `sluice-<mode>.toml` (the last run's), its log in `raw/`.
    fn deploy(
        &mut self,
        servers: &Servers,
        mode: Mode,
        placement: Placement,
        stem: &str,
    ) -> anyhow::Result<Deployment> {
        if mode == Mode::Direct {
            return Deployment::direct(self.plan, servers);
        }
        let config = self.out.join(format!("sluice-{}.toml", mode.name()));
        let log = self.out.join(format!("raw/{stem}-sluice.log"));
        let deployment = Deployment::sluice(self, servers, (mode, placement), &config, &log)?;
        let command = deployment.command.clone().unwrap_or_default();
        if !self.results.sluice_commands.contains(&command) {
            self.results.sluice_commands.push(command);
        }
        Ok(deployment)
    }
}

/// The servers' names in [`SERVERS`] order.
fn names() -> Vec<&'static str> {
    SERVERS.iter().map(|(name, _)| *name).collect()
}

crate::report::ending_by_runs!(Results);

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ZonesArgs,
    }

    fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
        let cli = Cli::try_parse_from(std::iter::once("zones").chain(argv.iter().copied()))?;
        Plan::resolve(&cli.args)
    }

    #[test]
    fn defaults_demo_and_bad_values() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.threads, [8, 32]);
        assert_eq!(p.duration, Duration::from_secs(20));
        assert_eq!((p.data.tables, p.data.table_size), (4, 10_000));
        assert_eq!(p.intra_zone, Duration::from_micros(100));
        assert_eq!(p.cross_zone, Duration::from_millis(1));
        assert_eq!(p.jitter, Duration::ZERO);
        assert_eq!(p.max_connections, 32 + 64 + 100);
        let runs = p.runs();
        assert_eq!(runs.len(), 2 * LEGS.len());
        assert_eq!(runs[0], (8, 1, (Mode::Direct, Placement::Colocated)));
        assert_eq!(runs[7], (32, 1, (Mode::Direct, Placement::Colocated)));
        let p = plan(&["--demo", "--repeat", "2"]).unwrap();
        assert_eq!(p.threads, [8]);
        assert_eq!(p.duration, Duration::from_secs(5));
        assert_eq!((p.data.tables, p.data.table_size), (2, 1_000));
        assert_eq!(p.runs().len(), 2 * LEGS.len());
        let p = plan(&[
            "--intra-zone",
            "50us",
            "--cross-zone",
            "2ms",
            "--jitter",
            "20us",
        ])
        .unwrap();
        assert_eq!(p.one_way("a"), Duration::from_micros(50));
        assert_eq!(p.one_way("c"), Duration::from_millis(2));
        assert_eq!(p.link("b").jitter, Duration::from_micros(20));
        assert!(plan(&["--jitter", "200us"]).is_err());
        assert!(plan(&["--cross-zone", "fast"]).is_err());
        assert!(plan(&["--backend-connections", "0"]).is_err());
        assert!(plan(&["--threads", "0"]).is_err());
    }

    #[test]
    fn the_zones_put_one_replica_beside_sluice() {
        let home: Vec<&str> = SERVERS
            .iter()
            .filter(|(_, zone)| *zone == HOME)
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(home, ["replica1"]);
        assert_ne!(SERVERS[0].1, HOME, "the primary is across zones");
    }
}
