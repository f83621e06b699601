//! `sluice bench cache`, also what `sluice bench` alone runs: the end-to-end benchmark
//! of the published caching-proxy reports. The same workload runs straight at MariaDB
//! (direct), through Sluice with no cache rules (passthrough) and through Sluice caching
//! every read (cached), the scenarios taking turns at every step of a thread ramp; then
//! the mysqlslap insert series, direct and through Sluice. The report sets throughput,
//! total reads, latency and the proxy's CPU cost side by side.
//!
//! This module turns the flags into a [`Plan`]; [`measure`] runs it, filing every run in
//! a [`Report`](crate::report::Report) that [`render`](crate::render) presents.

mod measure;

pub use measure::run;

use std::fmt;
use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::report::{InsertSettings, Unavailable};
use crate::sysbench::{DataSet, PsMode, Workload};
use crate::topology::{self, SluiceTarget, Target};
use crate::{dedup, CommonArgs, Resolved, ServerArgs, Sizes};

/// Flags of `sluice bench cache` (and of `sluice bench` with no scenario).
///
/// By default the benchmark starts its own MariaDB (a sandbox) and two Sluice processes
/// (this binary, `serve`: one pass-through, one caching), creates the data with
/// `sysbench prepare`, runs every workload's thread ramp and the insert series, and
/// removes everything. With --mysql-*, --sluice-* or --cached-* host/port flags it targets
/// servers that already run instead, and starts nothing. Its defaults are in the
/// `Scenario::Cache` help.
#[derive(clap::Args, Debug, Clone)]
pub struct CacheArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub server: ServerArgs,

    /// Scenarios to run, in this order at every step [default: direct,passthrough,cached;
    /// with existing servers, those given]. `cached` needs a Sluice with a query cache;
    /// without one it is reported as not available.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenarios: Option<Vec<Scenario>>,

    /// Workloads, in order [default: oltp_read_only,oltp_point_select,
    /// oltp_read_write_split,insert; demo: oltp_read_only,oltp_point_select].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Option<Vec<Workload>>,

    /// sysbench --db-ps-mode values: auto (prepared statements) and/or disable (text
    /// protocol) [default: auto].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ps_modes: Option<Vec<PsMode>>,

    /// Transaction lengths of the insert series (inserts per COMMIT).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "1,10,100,1000"
    )]
    pub insert_trx: Vec<u32>,

    /// Rows each insert run writes, over all clients (the published run: 1000000).
    #[arg(long, default_value_t = 100_000)]
    pub insert_rows: u64,

    /// Concurrent mysqlslap clients of the insert series.
    #[arg(long, default_value_t = 16)]
    pub insert_clients: u32,

    /// Host of an existing Sluice with no cache rules, for the passthrough scenario, or
    /// the path of its Unix socket (`[[listeners]] socket`) [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub sluice_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub sluice_port: Option<u16>,

    /// Process id of that Sluice, to measure its CPU time per query (same machine).
    #[arg(long, value_name = "PID")]
    pub sluice_pid: Option<u32>,

    /// Host of an existing Sluice that caches every read, for the cached scenario, or the
    /// path of its Unix socket [default: 127.0.0.1].
    #[arg(long, value_name = "HOST", conflicts_with = "demo")]
    pub cached_host: Option<String>,

    /// Port of that Sluice [default: 3306].
    #[arg(long, value_name = "PORT", conflicts_with = "demo")]
    pub cached_port: Option<u16>,

    /// Process id of the caching Sluice, to measure its CPU time per query.
    #[arg(long, value_name = "PID")]
    pub cached_pid: Option<u32>,

    /// Schema the insert series creates, fills and drops: never one that holds data.
    #[arg(long, default_value = "sluice_slap")]
    pub insert_schema: String,

    /// The mysqlslap program.
    #[arg(long, default_value = "mysqlslap", value_name = "PATH")]
    pub mysqlslap: PathBuf,

    /// max_connections of the embedded MariaDB [default: 4 x the largest thread count
    /// + 100, at least 500].
    #[arg(long)]
    pub max_connections: Option<u32>,

    /// Use the sysbench tables already there: no prepare, no cleanup. Without it, an
    /// existing server first loses any leftover sysbench tables (sbtest1..N) of --mysql-db.
    #[arg(long)]
    pub skip_prepare: bool,

    /// Leave the sysbench tables in place at the end.
    #[arg(long)]
    pub keep_data: bool,

    /// The client, each Sluice and MariaDB on simulated hosts of their own: every hop
    /// between them (client to MariaDB, client to Sluice, Sluice to MariaDB) goes through
    /// a delay link of --hop each way, so that Sluice's extra hop shows as on a network.
    /// Embedded servers only.
    #[arg(long, conflicts_with_all = [
        "mysql_host", "mysql_port", "sluice_host", "sluice_port", "cached_host", "cached_port",
    ])]
    pub hosts: bool,

    /// One-way delay of each hop with --hosts ("100us", "0.5ms").
    #[arg(long, value_parser = humantime::parse_duration, default_value = "100us", requires = "hosts")]
    pub hop: std::time::Duration,
}

/// Where the load goes.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// Straight to the database.
    Direct,
    /// Through Sluice, no caching.
    Passthrough,
    /// Through Sluice with every read cached.
    Cached,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scenario::Direct => "direct",
            Scenario::Passthrough => "passthrough",
            Scenario::Cached => "cached",
        })
    }
}

/// The flags resolved into what will run.
#[derive(Debug, Clone)]
struct Plan {
    /// Every scenario asked for, in order.
    scenarios: Vec<Scenario>,
    /// Asked for but impossible here (no query cache): reported, never run.
    unavailable: Vec<Unavailable>,
    workloads: Vec<Workload>,
    ps_modes: Vec<PsMode>,
    threads: Vec<u32>,
    duration_secs: u64,
    repeat: u32,
    data: DataSet,
    insert: Option<InsertSettings>,
    out_dir: PathBuf,
    /// External targets; all `None` for the embedded topology.
    direct: Option<Target>,
    passthrough: Option<SluiceTarget>,
    cached: Option<SluiceTarget>,
    max_connections: u32,
    notes: Vec<String>,
}

impl Plan {
    fn resolve(args: &CacheArgs, now: SystemTime) -> anyhow::Result<Plan> {
        let mut notes = Vec::new();
        let target = |host: &Option<String>, port: Option<u16>| {
            (host.is_some() || port.is_some()).then(|| Target {
                host: host.clone().unwrap_or_else(|| "127.0.0.1".into()),
                port: port.unwrap_or(3306),
            })
        };
        let direct = target(&args.server.mysql_host, args.server.mysql_port);
        let sluice =
            |t: Option<Target>, pid: Option<u32>| t.map(|target| SluiceTarget { target, pid });
        let passthrough = sluice(target(&args.sluice_host, args.sluice_port), args.sluice_pid);
        let cached = sluice(target(&args.cached_host, args.cached_port), args.cached_pid);
        let external = direct.is_some() || passthrough.is_some() || cached.is_some();
        if args.sluice_pid.is_some() && passthrough.is_none() {
            bail!("--sluice-pid is for an existing Sluice (--sluice-host/--sluice-port)");
        }
        if args.cached_pid.is_some() && cached.is_none() {
            bail!("--cached-pid is for an existing caching Sluice (--cached-host/--cached-port)");
        }

        let scenarios = match &args.scenarios {
            Some(list) => dedup(list),
            None if external => [
                (Scenario::Direct, direct.is_some()),
                (Scenario::Passthrough, passthrough.is_some()),
                (Scenario::Cached, cached.is_some()),
            ]
            .into_iter()
            .filter_map(|(s, given)| given.then_some(s))
            .collect(),
            None => vec![Scenario::Direct, Scenario::Passthrough, Scenario::Cached],
        };
        if scenarios.is_empty() {
            bail!("--scenarios needs at least one scenario");
        }
        if external {
            let needs = [
                (
                    Scenario::Direct,
                    direct.is_some(),
                    "--mysql-host/--mysql-port",
                ),
                (
                    Scenario::Passthrough,
                    passthrough.is_some(),
                    "--sluice-host/--sluice-port",
                ),
                (
                    Scenario::Cached,
                    cached.is_some(),
                    "--cached-host/--cached-port",
                ),
            ];
            for (scenario, given, flags) in needs {
                if scenarios.contains(&scenario) && !given {
                    bail!("the {scenario} scenario needs {flags} when targeting existing servers");
                }
            }
        }

        let demo = args.common.demo;
        let default_workloads: &[Workload] = if demo {
            &[Workload::OltpReadOnly, Workload::OltpPointSelect]
        } else {
            &[
                Workload::OltpReadOnly,
                Workload::OltpPointSelect,
                Workload::OltpReadWriteSplit,
                Workload::Insert,
            ]
        };
        let workloads = dedup(args.workloads.as_deref().unwrap_or(default_workloads));
        let ps_modes = dedup(args.ps_modes.as_deref().unwrap_or(&[PsMode::Auto]));
        let Resolved {
            threads,
            duration,
            data,
        } = args.common.resolve(&Sizes {
            threads: [&[1, 4, 8, 16, 32, 64, 128, 256], &[1, 4, 16]],
            seconds: [30, 5],
            tables: [64, 4],
            table_size: [10_000, 10_000],
        })?;
        if workloads.is_empty() || ps_modes.is_empty() {
            bail!("--workloads and --ps-modes need at least one value each");
        }
        let insert = if workloads.contains(&Workload::Insert) {
            let per_trx = dedup(&args.insert_trx);
            if per_trx.is_empty() || per_trx.contains(&0) {
                bail!("--insert-trx needs one or more transaction lengths of at least 1");
            }
            if args.insert_clients == 0 || args.insert_rows < u64::from(args.insert_clients) {
                bail!("--insert-clients must be at least 1 and --insert-rows at least that many");
            }
            if !scenarios
                .iter()
                .any(|s| matches!(s, Scenario::Direct | Scenario::Passthrough))
            {
                bail!("the insert workload runs direct and passthrough: ask for either scenario");
            }
            if args.insert_schema == args.server.mysql_db {
                bail!("--insert-schema must differ from --mysql-db: mysqlslap drops its schema");
            }
            Some(InsertSettings {
                clients: args.insert_clients,
                rows: args.insert_rows,
                per_trx,
            })
        } else {
            None
        };
        let max_threads = *threads.iter().max().expect("not empty");
        let max_connections = args.max_connections.unwrap_or_else(|| {
            // Room for sysbench's connections, each Sluice's backend connections (which
            // may outlive a step in its pool) and the admin.
            max_threads.saturating_mul(4).saturating_add(100).max(500)
        });
        if let Some(note) = descriptor_shortage(max_threads, hard_nofile_limit()) {
            notes.push(note);
        }
        if ps_modes.contains(&PsMode::Auto) && workloads.iter().any(|w| w.is_sysbench()) {
            let needed = prepared_statements_needed(data.tables, max_threads);
            if external {
                notes.push(format!(
                    "with prepared statements, sysbench needs max_prepared_stmt_count of at \
                     least {needed} on the database ({} tables x {max_threads} threads x up to \
                     9 statements); a lower limit fails the run with error 1461",
                    data.tables
                ));
            } else if needed > topology::MAX_PREPARED_STMT_COUNT {
                notes.push(format!(
                    "with prepared statements, {} tables at {max_threads} threads need about \
                     {needed} server-side statements, more than MariaDB allows ({}): those \
                     steps will fail with error 1461; use fewer --tables or --ps-modes disable",
                    data.tables,
                    topology::MAX_PREPARED_STMT_COUNT
                ));
            }
        }
        if external && scenarios.contains(&Scenario::Direct) {
            notes.push(format!(
                "the existing database needs max_connections of at least {} for the top of \
                 the ramp, plus what each Sluice in front of it keeps open (not checked)",
                max_threads + 10
            ));
        }
        let out_dir = args
            .common
            .out
            .clone()
            .unwrap_or_else(|| args.common.out_dir("cache", now));
        Ok(Plan {
            scenarios,
            unavailable: Vec::new(),
            workloads,
            ps_modes,
            threads,
            duration_secs: duration.as_secs(),
            repeat: args.common.repeat,
            data,
            insert,
            out_dir,
            direct,
            passthrough,
            cached,
            max_connections,
            notes,
        })
    }

    fn embedded(&self) -> bool {
        self.direct.is_none() && self.passthrough.is_none() && self.cached.is_none()
    }

    fn runnable(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
            && !self.unavailable.iter().any(|u| u.scenario == scenario)
    }

    fn has_sysbench(&self) -> bool {
        self.workloads.iter().any(|w| w.is_sysbench())
    }

    /// Backend connections each embedded Sluice may open: one per sysbench thread (a
    /// session keeps its connection), a margin for connections still closing, and never
    /// fewer than the configuration default.
    fn pool_max(&self) -> u32 {
        let top = self.threads.iter().copied().max().unwrap_or(1);
        let clients = self.insert.as_ref().map_or(0, |i| i.clients);
        top.max(clients).saturating_add(16).max(100)
    }

    /// Every run, in the order they run. For each workload, ps-mode and thread count
    /// (or transaction length), the runnable scenarios take turns, `repeat` times, so
    /// drift of the machine over time hits them alike.
    fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        let scenarios: Vec<Scenario> = self
            .scenarios
            .iter()
            .copied()
            .filter(|s| self.runnable(*s))
            .collect();
        for &workload in &self.workloads {
            if workload == Workload::Insert {
                let Some(insert) = &self.insert else { continue };
                for &per_trx in &insert.per_trx {
                    for repetition in 1..=self.repeat {
                        for &scenario in scenarios.iter().filter(|s| **s != Scenario::Cached) {
                            steps.push(Step::Insert {
                                per_trx,
                                repetition,
                                scenario,
                            });
                        }
                    }
                }
                continue;
            }
            for &ps_mode in &self.ps_modes {
                for &threads in &self.threads {
                    for repetition in 1..=self.repeat {
                        for &scenario in &scenarios {
                            steps.push(Step::Sysbench {
                                workload,
                                ps_mode,
                                threads,
                                repetition,
                                scenario,
                            });
                        }
                    }
                }
            }
        }
        steps
    }
}

/// One run of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Sysbench {
        workload: Workload,
        ps_mode: PsMode,
        threads: u32,
        /// 1-based.
        repetition: u32,
        scenario: Scenario,
    },
    Insert {
        per_trx: u32,
        repetition: u32,
        scenario: Scenario,
    },
}

impl Step {
    fn scenario(&self) -> Scenario {
        match *self {
            Step::Sysbench { scenario, .. } | Step::Insert { scenario, .. } => scenario,
        }
    }
}

/// Server-side prepared statements sysbench holds at once: up to 9 per table (the reads
/// and writes of oltp_common) in every thread.
fn prepared_statements_needed(tables: u32, threads: u32) -> u64 {
    u64::from(tables) * u64::from(threads) * 9
}

/// The open-files hard limit of this process (children cannot go above it), from
/// `/proc/self/limits`; `None` when unlimited or unreadable.
fn hard_nofile_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    // "Max open files  <soft>  <hard>  files"
    fields.get(fields.len().checked_sub(2)?)?.parse().ok()
}

/// A note when the open-files hard limit is too low for `threads` clients: each Sluice
/// holds a client and a backend socket per thread, sysbench one per thread.
fn descriptor_shortage(threads: u32, hard_limit: Option<u64>) -> Option<String> {
    let needed = u64::from(threads) * 2 + 100;
    let limit = hard_limit?;
    (limit < needed).then(|| {
        format!(
            "the open-files hard limit here is {limit}, and {threads} threads need about \
             {needed} descriptors in Sluice (a client and a backend socket per thread): the \
             top of the ramp may fail with connection errors; raise the hard limit (`ulimit \
             -Hn` as root, or LimitNOFILE= for a service) to run it"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: CacheArgs,
    }

    fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?;
        Plan::resolve(
            &cli.bench,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_600),
        )
    }

    /// (workload, ps_mode, threads or inserts per transaction, repetition, scenario).
    fn order(p: &Plan) -> Vec<(Workload, Option<PsMode>, u32, u32, Scenario)> {
        p.steps()
            .iter()
            .map(|s| match *s {
                Step::Sysbench {
                    workload,
                    ps_mode,
                    threads,
                    repetition,
                    scenario,
                } => (workload, Some(ps_mode), threads, repetition, scenario),
                Step::Insert {
                    per_trx,
                    repetition,
                    scenario,
                } => (Workload::Insert, None, per_trx, repetition, scenario),
            })
            .collect()
    }

    #[test]
    fn defaults_follow_the_published_benchmark() {
        let p = plan(&[]).unwrap();
        assert!(p.embedded());
        assert_eq!(
            p.scenarios,
            [Scenario::Direct, Scenario::Passthrough, Scenario::Cached]
        );
        assert_eq!(
            p.workloads,
            [
                Workload::OltpReadOnly,
                Workload::OltpPointSelect,
                Workload::OltpReadWriteSplit,
                Workload::Insert
            ]
        );
        assert_eq!(p.ps_modes, [PsMode::Auto]);
        assert_eq!(p.threads, [1, 4, 8, 16, 32, 64, 128, 256]);
        assert_eq!(p.duration_secs, 30);
        assert_eq!((p.data.tables, p.data.table_size), (64, 10_000));
        assert_eq!(
            p.insert,
            Some(InsertSettings {
                clients: 16,
                rows: 100_000,
                per_trx: vec![1, 10, 100, 1000]
            })
        );
        assert_eq!(p.max_connections, 1124);
        assert_eq!(p.pool_max(), 272);
        assert_eq!(
            p.out_dir,
            std::path::Path::new("bench-results/cache-20240501T100000Z")
        );
        // 3 sysbench workloads x 8 steps x 3 scenarios, then 4 insert steps x 2.
        assert_eq!(p.steps().len(), 3 * 8 * 3 + 4 * 2);
        let o = order(&p);
        assert_eq!(
            o[72..],
            [
                (Workload::Insert, None, 1, 1, Scenario::Direct),
                (Workload::Insert, None, 1, 1, Scenario::Passthrough),
                (Workload::Insert, None, 10, 1, Scenario::Direct),
                (Workload::Insert, None, 10, 1, Scenario::Passthrough),
                (Workload::Insert, None, 100, 1, Scenario::Direct),
                (Workload::Insert, None, 100, 1, Scenario::Passthrough),
                (Workload::Insert, None, 1000, 1, Scenario::Direct),
                (Workload::Insert, None, 1000, 1, Scenario::Passthrough),
            ]
        );
    }

    #[test]
    fn demo_is_short_and_explicit_flags_win() {
        let p = plan(&["--demo"]).unwrap();
        assert_eq!(
            p.workloads,
            [Workload::OltpReadOnly, Workload::OltpPointSelect]
        );
        assert_eq!(p.insert, None);
        assert_eq!(p.threads, [1, 4, 16]);
        assert_eq!(p.duration_secs, 5);
        assert_eq!((p.data.tables, p.data.table_size), (4, 10_000));
        // 2 workloads x 3 steps x 3 scenarios of 5 s: 90 s of load.
        assert_eq!(p.steps().len() as u64 * p.duration_secs, 90);
        let p = plan(&["--demo", "--threads", "2,2,8", "--duration", "1s"]).unwrap();
        assert_eq!(p.threads, [2, 8]);
        assert_eq!(p.duration_secs, 1);
        assert!(plan(&["--demo", "--mysql-port", "3306"]).is_err());
        assert!(plan(&["--demo", "--cached-port", "6034"]).is_err());
    }

    #[test]
    fn scenarios_alternate_within_a_step() {
        let p = plan(&[
            "--threads",
            "1,8",
            "--repeat",
            "2",
            "--workloads",
            "point_select",
            "--ps-modes",
            "auto,disable",
            "--scenarios",
            "direct,passthrough",
        ])
        .unwrap();
        let order: Vec<(Option<PsMode>, u32, u32, Scenario)> = order(&p)
            .into_iter()
            .map(|(_, p, t, r, s)| (p, t, r, s))
            .collect();
        use PsMode::*;
        use Scenario::*;
        assert_eq!(
            order,
            [
                (Some(Auto), 1, 1, Direct),
                (Some(Auto), 1, 1, Passthrough),
                (Some(Auto), 1, 2, Direct),
                (Some(Auto), 1, 2, Passthrough),
                (Some(Auto), 8, 1, Direct),
                (Some(Auto), 8, 1, Passthrough),
                (Some(Auto), 8, 2, Direct),
                (Some(Auto), 8, 2, Passthrough),
                (Some(Disable), 1, 1, Direct),
                (Some(Disable), 1, 1, Passthrough),
                (Some(Disable), 1, 2, Direct),
                (Some(Disable), 1, 2, Passthrough),
                (Some(Disable), 8, 1, Direct),
                (Some(Disable), 8, 1, Passthrough),
                (Some(Disable), 8, 2, Direct),
                (Some(Disable), 8, 2, Passthrough),
            ]
        );
    }

    #[test]
    fn unavailable_scenarios_are_reported_not_run() {
        let mut p = plan(&["--workloads", "read_only,insert", "--threads", "4"]).unwrap();
        p.unavailable.push(Unavailable {
            scenario: Scenario::Cached,
            reason: "no query cache".into(),
        });
        assert!(!p.runnable(Scenario::Cached));
        assert!(p.scenarios.contains(&Scenario::Cached));
        let scenarios: Vec<Scenario> = order(&p).iter().map(|s| s.4).collect();
        assert!(!scenarios.contains(&Scenario::Cached), "{scenarios:?}");
        // 1 thread step x 2 scenarios, 4 insert steps x 2.
        assert_eq!(scenarios.len(), 2 + 8);
    }

    #[test]
    fn external_targets() {
        let p = plan(&["--mysql-host", "db.example", "--workloads", "read_only"]).unwrap();
        assert!(!p.embedded());
        assert_eq!(p.scenarios, [Scenario::Direct]);
        assert_eq!(
            p.direct,
            Some(Target {
                host: "db.example".into(),
                port: 3306
            })
        );
        assert_eq!(p.workloads, [Workload::OltpReadOnly]);
        assert!(p.notes.iter().any(|n| n.contains("max_connections")));
        let p = plan(&[
            "--mysql-port",
            "3307",
            "--sluice-port",
            "6033",
            "--cached-port",
            "6034",
            "--cached-pid",
            "42",
        ])
        .unwrap();
        assert_eq!(
            p.scenarios,
            [Scenario::Direct, Scenario::Passthrough, Scenario::Cached]
        );
        assert_eq!(
            p.passthrough,
            Some(SluiceTarget {
                target: Target {
                    host: "127.0.0.1".into(),
                    port: 6033
                },
                pid: None
            })
        );
        assert_eq!(p.cached.as_ref().and_then(|c| c.pid), Some(42));
        let err = plan(&["--mysql-port", "3307", "--scenarios", "passthrough"]).unwrap_err();
        assert!(err.to_string().contains("--sluice-host"), "{err}");
        let err = plan(&["--mysql-port", "3307", "--scenarios", "cached"]).unwrap_err();
        assert!(err.to_string().contains("--cached-host"), "{err}");
        assert!(plan(&["--sluice-pid", "42"]).is_err());
        assert!(plan(&["--cached-pid", "42"]).is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(plan(&["--threads", "0"]).is_err());
        assert!(plan(&["--duration", "1500ms"]).is_err());
        assert!(plan(&["--duration", "0s"]).is_err());
        assert!(plan(&["--repeat", "0"]).is_err());
        assert!(plan(&["--tables", "0"]).is_err());
        assert!(plan(&["--workloads", "oltp_write_only"]).is_err());
        assert!(plan(&["--ps-modes", "sometimes"]).is_err());
        assert!(plan(&["--insert-trx", "0,10"]).is_err());
        assert!(plan(&["--insert-clients", "0"]).is_err());
        assert!(plan(&["--insert-rows", "3"]).is_err());
        assert!(plan(&["--insert-schema", "sbtest"]).is_err());
        assert!(plan(&["--workloads", "insert", "--scenarios", "cached"]).is_err());
        // Without the insert workload its flags are not checked.
        assert!(plan(&["--workloads", "read_only", "--insert-rows", "3"]).is_ok());
        let p = plan(&["--duration", "2m", "--ps-modes", "disable"]).unwrap();
        assert_eq!(p.duration_secs, 120);
        assert_eq!(p.ps_modes, [PsMode::Disable]);
    }

    #[test]
    fn large_ramps_are_checked_against_the_descriptor_limit() {
        assert_eq!(descriptor_shortage(2048, Some(65536)), None);
        assert_eq!(descriptor_shortage(2048, None), None);
        let note = descriptor_shortage(2048, Some(1024)).unwrap();
        assert!(note.contains("1024") && note.contains("4196"), "{note}");
        let p = plan(&["--threads", "1,2048"]).unwrap();
        assert_eq!(p.max_connections, 8292);
        // 64 x 2048 x 9 prepared statements are more than any MariaDB allows.
        assert!(
            p.notes.iter().any(|n| n.contains("error 1461")),
            "{:?}",
            p.notes
        );
        assert!(!plan(&["--threads", "1,256"])
            .unwrap()
            .notes
            .iter()
            .any(|n| n.contains("1461")));
        assert_eq!(p.pool_max(), 2064);
        // This process can read its own limit.
        assert!(hard_nofile_limit().is_some_and(|l| l > 0));
    }
}
