//! `sluice bench <scenario>`: end-to-end benchmarks of Sluice, driven from outside as a
//! separate process with real load generators (sysbench, mysqlslap) against real
//! servers, direct and through Sluice side by side. Not on the request path.
//!
//! One module per scenario: [`cache`] (the published caching-proxy benchmark; what
//! `sluice bench` alone runs), [`mux`] (multiplexing), [`routing`] (read scale-out),
//! [`galera`] (multi-master inserts and flow control), [`shard`] (one database over
//! several instances), [`zones`] (the nearest replica across availability zones),
//! [`failover`] (the primary killed under load), [`fleet`] (several instances),
//! [`upgrade`] (restarts that hand the sockets over, under load), and [`all`] (every
//! other scenario, one page). They share the flags of
//! [`CommonArgs`] (and [`ServerArgs`] where existing servers can be targeted) and one
//! report format, [`document`]. Underneath: [`topology`] starts or finds the servers,
//! [`sysbench`] and [`mysqlslap`] run and parse the load generators, [`report`] and
//! [`render`] hold and present the cache scenario's runs, [`chart`] draws SVG charts,
//! [`client`] is the benchmarks' own minimal MySQL client.
//!
//! Adding a scenario: a module with its `clap::Args` (flattening [`CommonArgs`]) and a
//! `run` returning [`Ran`], and a variant of [`Scenario`]; the compiler points at the
//! matches to extend, and `all` finds it through clap.

pub mod all;
pub mod cache;
mod chart;
mod client;
pub mod document;
pub mod failover;
pub mod fleet;
pub mod galera;
pub mod mux;
mod mysqlslap;
mod render;
mod report;
pub mod routing;
pub mod shard;
mod sysbench;
mod tool;
mod topology;
pub mod upgrade;
pub mod zones;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{FromArgMatches as _, Subcommand as _};

pub use document::Document;

/// `sluice bench [SCENARIO]`: with no scenario, the cache scenario, whose flags are then
/// given directly (`sluice bench --demo`).
#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub scenario: Option<Scenario>,
    #[command(flatten)]
    pub cache: cache::CacheArgs,
}

/// The benchmarks, one per subcommand of `sluice bench`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Scenario {
    /// The published caching-proxy benchmark: direct, through Sluice, and cached.
    ///
    /// sysbench and mysqlslap straight at MariaDB, through Sluice with no cache rules,
    /// and through Sluice caching every read, taking turns at every step of a thread
    /// ramp; on request (--scenarios ...,cached_by_table) also through Sluice caching
    /// the same reads with row-level invalidation off, and (dedicated) through Sluice
    /// with no cache rules and multiplexing off. By default it starts its own MariaDB and
    /// Sluice processes and removes them at the end; the --mysql-*, --sluice-*,
    /// --cached-* and --dedicated-* host/port flags target servers that already run
    /// instead.
    ///
    /// Defaults: threads 1,4,8,16,32,64,128,256; 30 s per step; 64 tables x 10,000
    /// rows. --demo (under 3 minutes on 2 cores): oltp_read_only and
    /// oltp_point_select, threads 1,4,16, 5 s per step, 4 tables.
    Cache(Box<cache::CacheArgs>),
    /// Multiplexing: many threads on a few dozen backend connections, idle clients.
    ///
    /// sysbench at hundreds to thousands of threads straight at MariaDB and through
    /// Sluice multiplexing onto --backend-connections, then --idle-clients idle clients
    /// held on Sluice while --active-threads work through it. Starts its own servers.
    ///
    /// Defaults: threads 256,1024; 30 s per run; 8 tables x 10,000 rows; 10,000 idle
    /// clients beside 256 threads. --demo: threads 64,256; 5 s; 2 tables x 1,000 rows;
    /// 1,000 idle clients beside 64 threads.
    Mux(Box<mux::MuxArgs>),
    /// Read scale-out: reads at a primary alone vs spread by Sluice over replicas.
    ///
    /// sysbench oltp_read_only straight at a primary and through Sluice in front of it
    /// and --replicas replicas, and where Sluice sent the reads against the --weights.
    /// Starts its own servers.
    ///
    /// Defaults: threads 16,64; 20 s per run; 8 tables x 10,000 rows. --demo: threads
    /// 4,16; 5 s; 2 tables x 1,000 rows.
    Routing(Box<routing::RoutingArgs>),
    /// Multi-master inserts: a single MariaDB against Galera clusters, and flow control.
    ///
    /// mysqlslap's clients insert into the published table at 1, 10, 100 and 1000
    /// inserts per transaction on a plain MariaDB and Galera clusters of each --nodes
    /// size, straight at one node and through Sluice with galera_writers = "all"; then a
    /// cluster with its last node throttled (gcs.fc_limit) and its table read-locked for
    /// a while, written through Sluice with galera_writers = "all" and "one", every
    /// node's flow-control counters sampled once a second. Starts its own servers; --threads,
    /// --duration, --tables and --table-size do not apply.
    ///
    /// Defaults: nodes 1,2,3; 100,000 rows per run; flow control on 3 nodes, 50,000
    /// rows, 8 s table lock. --demo (under 5 minutes on 2 cores): nodes 1,3; 20,000
    /// rows; 20,000 rows and a 3 s lock for flow control.
    Galera(Box<galera::GaleraArgs>),
    /// Scale up, then out: one sysbench database sharded over 1 to 8 instances.
    ///
    /// Each topology in turn: that many sandbox MariaDB instances, each with a small
    /// buffer pool and loaded with only its range of id in every table, Sluice in front
    /// with one shard per instance (RANGE on id); sysbench oltp_point_select
    /// (prepared, uniform ids) through Sluice after a warm-up, and with one instance
    /// straight at it too. tps and latency per instance count beside the published
    /// curve. Starts its own servers.
    ///
    /// Defaults: instances 1,2,4,6,8; 16 threads; 30 s per run after a 15 s warm-up;
    /// 4 tables x 50,000 rows; 16 MiB buffer pool each. --demo (under 5 minutes on 2
    /// cores): instances 1,2,4; 5 s after 5 s; 2 tables x 40,000 rows; 6 MiB.
    Shard(Box<shard::ShardArgs>),
    /// Nearest replica: reads in Sluice's zone against reads on a primary in another.
    ///
    /// A primary (zone b) and 3 replicas (replica1 in a, replica2 in b, replica3 in c),
    /// sysbench and Sluice in zone a, every server reached through a delay link of
    /// --intra-zone within a zone and --cross-zone across. sysbench oltp_read_only
    /// straight at the primary, then through Sluice with every read on the primary
    /// (read_write_split = false), on the replica of its zone (zone = "a") and spread
    /// over the replicas (no zone), each with the client beside Sluice and one
    /// intra-zone hop away. Starts its own servers.
    ///
    /// Defaults: threads 8,32; 20 s per run; 4 tables x 10,000 rows; 100us within a
    /// zone, 1ms across. --demo (under 5 minutes on 2 cores): threads 8; 5 s; 2 tables
    /// x 1,000 rows.
    Zones(Box<zones::ZonesArgs>),
    /// Failover: what clients see when the primary is killed under load.
    ///
    /// Each run: a fresh primary and 2 semi-synchronous replicas, Sluice in front
    /// (multiplexing, read/write split, the monitor at its defaults, failover on);
    /// sysbench oltp_read_write (prepared statements, errors ignored and counted) and
    /// probe clients (autocommit inserts, two-insert transactions) through Sluice; the
    /// primary SIGKILLed after --kill-after, the load kept on for --after once Sluice has
    /// promoted a replica. Reported per run: the failover's and the writes' pause, the
    /// errors clients got, Sluice's transaction replays, acknowledged writes lost and
    /// writes applied twice on the promoted server. Starts its own servers; --duration
    /// and --repeat do not apply (--runs repeats). With --instances N, N Sluice
    /// instances share the servers and the clients, and each run also reports the
    /// promotions, the servers left writable and the writer each instance routes to.
    ///
    /// Defaults: 10 runs; 8 threads; 4 tables x 10,000 rows; killed after 5 s, 5 s after
    /// the failover; 1 instance. --demo: 2 runs; 4 threads; 2 tables x 1,000 rows.
    Failover(Box<failover::FailoverArgs>),
    /// Several instances: what N Sluice instances cost the servers, and how fast they agree.
    ///
    /// For each count of --instances, that many Sluice processes with the same
    /// configuration in front of one replica set (a primary and 2 replicas), idle: the
    /// statements, writes and connections each server counts from them over --window;
    /// then, with more than one, a cache rule set through the first instance (time until
    /// every other has it) and a session on the last killed through the first (time to
    /// the KILL's OK), --samples times each. Starts its own servers; coordinated through
    /// the servers unless --etcd names an etcd.
    ///
    /// Defaults: instances 1,2,10; 30 s; 20 samples. --demo: instances 1,2; 5 s; 5
    /// samples.
    Fleet(Box<fleet::FleetArgs>),
    /// Upgrade: what clients see across restarts that hand the sockets over (SIGUSR2).
    ///
    /// One MariaDB and one Sluice with a `[handover] socket`, the query cache on and the
    /// admin API; sysbench oltp_read_write (prepared statements, errors ignored and
    /// counted) and probe clients (idle connections checking their id and a user
    /// variable, transactions spanning the hand-overs, a prepared statement,
    /// connect-query-disconnect) through it; --handovers times SIGUSR2 to the serving
    /// process, each --duration after the last successor was ready. Reported per
    /// hand-over: client errors, lost connections, changed ids and lost session state by
    /// kind of client, the longest stall, p99 before and during, the cache hit rate
    /// before and after, the old process's memory and whether it exited within
    /// --drain-timeout. With --dedicated, multiplexing is off and no session can move.
    /// Starts its own servers; --threads takes one count; --repeat does not apply.
    ///
    /// Defaults: 10 hand-overs 30 s apart; 16 threads; 4 tables x 10,000 rows; 10 s
    /// windows; drain_timeout 5 s. --demo (under 5 minutes on 2 cores): 10 s apart, 5 s
    /// windows, 2 tables x 1,000 rows.
    Upgrade(Box<upgrade::UpgradeArgs>),
    /// Every other scenario in turn, and one HTML page with all of them.
    ///
    /// The common flags go to every scenario (with --demo, each runs in its demo
    /// sizes); each writes its report in a directory of its name under --out, and
    /// --out/report.html holds them all.
    All(Box<all::AllArgs>),
}

impl Scenario {
    /// The subcommand's name.
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Cache(_) => "cache",
            Scenario::Mux(_) => "mux",
            Scenario::Routing(_) => "routing",
            Scenario::Galera(_) => "galera",
            Scenario::Shard(_) => "shard",
            Scenario::Zones(_) => "zones",
            Scenario::Failover(_) => "failover",
            Scenario::Fleet(_) => "fleet",
            Scenario::Upgrade(_) => "upgrade",
            Scenario::All(_) => "all",
        }
    }

    fn common_mut(&mut self) -> &mut CommonArgs {
        match self {
            Scenario::Cache(a) => &mut a.common,
            Scenario::Mux(a) => &mut a.common,
            Scenario::Routing(a) => &mut a.common,
            Scenario::Galera(a) => &mut a.common,
            Scenario::Shard(a) => &mut a.common,
            Scenario::Zones(a) => &mut a.common,
            Scenario::Failover(a) => &mut a.common,
            Scenario::Fleet(a) => &mut a.common,
            Scenario::Upgrade(a) => &mut a.common,
            Scenario::All(a) => &mut a.common,
        }
    }

    /// Runs the scenario; blocks until done.
    pub fn run(self) -> Ran {
        match self {
            Scenario::Cache(a) => cache::run(&a),
            Scenario::Mux(a) => mux::run(&a),
            Scenario::Routing(a) => routing::run(&a),
            Scenario::Galera(a) => galera::run(&a),
            Scenario::Shard(a) => shard::run(&a),
            Scenario::Zones(a) => zones::run(&a),
            Scenario::Failover(a) => failover::run(&a),
            Scenario::Fleet(a) => fleet::run(&a),
            Scenario::Upgrade(a) => upgrade::run(&a),
            Scenario::All(a) => all::run(&a),
        }
    }

    /// Every scenario but `all`, each with its defaults and `common` (its `out` a
    /// directory of that scenario's name under `common.out`).
    fn each(common: &CommonArgs, out: &std::path::Path) -> Vec<Scenario> {
        let command = Scenario::augment_subcommands(clap::Command::new("bench"));
        let names: Vec<String> = command
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .filter(|name| name != "all")
            .collect();
        names
            .iter()
            .map(|name| {
                let matches = Scenario::augment_subcommands(clap::Command::new("bench"))
                    .get_matches_from(["bench", name]);
                let mut scenario =
                    Scenario::from_arg_matches(&matches).expect("every flag has a default");
                *scenario.common_mut() = CommonArgs {
                    out: Some(out.join(name)),
                    ..common.clone()
                };
                scenario
            })
            .collect()
    }
}

/// What a scenario leaves behind: its report as far as it got (already written to its
/// directory), and whether it succeeded.
pub struct Ran {
    pub report: Option<Document>,
    pub result: anyhow::Result<()>,
}

/// Flags every scenario takes, with the same meaning in each. Where the default differs
/// by scenario, the scenario's help and docs/BENCHMARKS.md give it.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// A short run with small sizes, for a first look; flags given explicitly still
    /// apply.
    #[arg(long)]
    pub demo: bool,

    /// sysbench thread counts, comma-separated [default: per scenario].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub threads: Option<Vec<u32>>,

    /// Duration of each sysbench run, whole seconds ("30s", "10m") [default: per
    /// scenario].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,

    /// Runs of each scenario at each step, alternating; the report shows medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,

    /// Number of sysbench tables [default: per scenario].
    #[arg(long)]
    pub tables: Option<u32>,

    /// Rows per sysbench table [default: 10000; demo: per scenario].
    #[arg(long)]
    pub table_size: Option<u64>,

    /// Report directory [default: bench-results/<scenario>-<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// The sysbench program.
    #[arg(long, default_value = "sysbench", value_name = "PATH")]
    pub sysbench: PathBuf,

    /// The Sluice binary the benchmark starts [default: this program].
    #[arg(long, value_name = "PATH")]
    pub sluice_bin: Option<PathBuf>,
}

impl CommonArgs {
    /// --out, or `bench-results/<scenario>-<timestamp>`.
    pub fn out_dir(&self, scenario: &str, now: SystemTime) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            PathBuf::from("bench-results").join(format!("{scenario}-{}", compact_timestamp(now)))
        })
    }

    /// The Sluice binary to start: --sluice-bin, else this program.
    pub fn sluice_bin(&self) -> anyhow::Result<PathBuf> {
        match &self.sluice_bin {
            Some(bin) => Ok(bin.clone()),
            None => anyhow::Context::context(std::env::current_exe(), "locating the sluice binary"),
        }
    }
}

/// Flags naming an existing database server and the account the load generators use,
/// for the scenarios that can target servers already running.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Host of an existing database server for the direct scenario, or the path of its
    /// Unix socket (starting with `/`; the port is then unused). This or any other
    /// host/port flag targets existing servers instead of starting any [default:
    /// 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub mysql_host: Option<String>,

    /// Port of that database server [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub mysql_port: Option<u16>,

    /// User the load generators connect as (created on an embedded server).
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
}

/// Runs `sluice bench [SCENARIO]`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    run_scenario(
        args.scenario
            .unwrap_or_else(|| Scenario::Cache(Box::new(args.cache))),
    )
}

/// Runs one scenario as its own command.
pub fn run_scenario(scenario: Scenario) -> anyhow::Result<()> {
    tool::raise_own_nofile()?;
    scenario.run().result
}

/// Runs a scenario called by its old subcommand name (`bench-mux`), saying once, on
/// stderr, what to use instead. The old names go in the release after the one that
/// introduced `sluice bench <scenario>`.
pub fn run_renamed(old: &str, scenario: Scenario) -> anyhow::Result<()> {
    tool::raise_own_nofile()?;
    eprintln!(
        "note: `sluice {old}` is deprecated; use `sluice bench {}`",
        scenario.name()
    );
    scenario.run().result
}

/// `2024-05-01T10:00:00Z` → `20240501T100000Z`: a directory name without colons.
fn compact_timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace(['-', ':'], "")
}

/// A scenario's sizes where the common flags leave them out, without and with --demo.
pub(crate) struct Sizes {
    pub threads: [&'static [u32]; 2],
    pub seconds: [u64; 2],
    pub tables: [u32; 2],
    pub table_size: [u64; 2],
}

/// The common flags' sizes, a scenario's defaults filled in, checked.
pub(crate) struct Resolved {
    pub threads: Vec<u32>,
    pub duration: Duration,
    pub data: sysbench::DataSet,
}

impl CommonArgs {
    /// Thread ramp, run length and data size, with `sizes` where no flag gives them.
    pub(crate) fn resolve(&self, sizes: &Sizes) -> anyhow::Result<Resolved> {
        let pick = usize::from(self.demo);
        let threads = dedup(self.threads.as_deref().unwrap_or(sizes.threads[pick]));
        if threads.is_empty() || threads.contains(&0) {
            anyhow::bail!("--threads needs one or more thread counts of at least 1");
        }
        let duration = self
            .duration
            .unwrap_or(Duration::from_secs(sizes.seconds[pick]));
        if duration.subsec_nanos() != 0 || duration.as_secs() == 0 {
            anyhow::bail!(
                "--duration must be a whole number of seconds, at least 1s (sysbench --time)"
            );
        }
        if self.repeat == 0 {
            anyhow::bail!("--repeat must be at least 1");
        }
        let data = sysbench::DataSet {
            tables: self.tables.unwrap_or(sizes.tables[pick]),
            table_size: self.table_size.unwrap_or(sizes.table_size[pick]),
        };
        if data.tables == 0 || data.table_size == 0 {
            anyhow::bail!("--tables and --table-size must be at least 1");
        }
        Ok(Resolved {
            threads,
            duration,
            data,
        })
    }
}

/// The two paths the mysqlslap and routing scenarios compare.
const DIRECT: &str = "direct";
const SLUICE: &str = "sluice";

/// (step, repetition, path) of every run in order: at each step (threads, transaction
/// length...) direct and Sluice take turns, so drift of the machine over time hits both
/// alike.
fn alternating(steps: &[u32], repeat: u32) -> Vec<(u32, u32, &'static str)> {
    alternating_over(steps, repeat, &[DIRECT, SLUICE])
}

/// [`alternating`] over any set of paths, each taking its turn in the order given.
fn alternating_over<T: Copy>(steps: &[u32], repeat: u32, paths: &[T]) -> Vec<(u32, u32, T)> {
    let mut runs = Vec::new();
    for &step in steps {
        for repetition in 1..=repeat {
            for &path in paths {
                runs.push((step, repetition, path));
            }
        }
    }
    runs
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

    fn parse(argv: &[&str]) -> Result<BenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied())).map(|c| c.bench)
    }

    #[test]
    fn no_scenario_is_the_cache_scenario() {
        let args = parse(&["--demo", "--threads", "2"]).unwrap();
        assert!(args.scenario.is_none());
        assert!(args.cache.common.demo);
        assert_eq!(args.cache.common.threads, Some(vec![2]));
        let args = parse(&["cache", "--demo"]).unwrap();
        assert!(matches!(args.scenario, Some(Scenario::Cache(a)) if a.common.demo));
        assert!(parse(&["--demo", "mux"]).is_err());
    }

    #[test]
    fn common_flags_mean_the_same_in_every_scenario() {
        for name in [
            "cache", "mux", "routing", "galera", "shard", "zones", "failover", "upgrade", "all",
        ] {
            let mut args = parse(&[
                name,
                "--demo",
                "--threads",
                "2,4",
                "--duration",
                "3s",
                "--repeat",
                "2",
                "--out",
                "x",
            ])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let scenario = args.scenario.as_mut().unwrap();
            assert_eq!(scenario.name(), name);
            let common = scenario.common_mut();
            assert!(common.demo);
            assert_eq!(common.threads, Some(vec![2, 4]));
            assert_eq!(common.duration, Some(Duration::from_secs(3)));
            assert_eq!(common.repeat, 2);
            assert_eq!(common.out, Some(PathBuf::from("x")));
        }
    }

    #[test]
    fn all_runs_every_other_scenario_in_its_own_directory() {
        let common = parse(&["all", "--demo"]).unwrap().scenario.unwrap();
        let Scenario::All(all) = common else {
            panic!("not all")
        };
        let each = Scenario::each(&all.common, std::path::Path::new("out"));
        let names: Vec<&str> = each.iter().map(Scenario::name).collect();
        assert_eq!(
            names,
            [
                "cache", "mux", "routing", "galera", "shard", "zones", "failover", "fleet",
                "upgrade"
            ]
        );
        for mut scenario in each {
            let name = scenario.name();
            let common = scenario.common_mut();
            assert!(common.demo);
            assert_eq!(common.out, Some(PathBuf::from("out").join(name)));
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(
            compact_timestamp(SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_600)),
            "20240501T100000Z"
        );
    }
}
