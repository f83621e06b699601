//! `sluice bench fleet`: what several Sluice instances in front of the same servers cost
//! those servers, and how fast the instances agree.
//!
//! For each count of --instances: that many Sluice processes with the same
//! configuration (but their addresses) in front of one sandbox replica set, left idle
//! once every instance lists all the others in `GET /v1/fleet`. Each server's own
//! counters (`SHOW GLOBAL STATUS`) are read around --window: the statements the
//! instances send it (their monitors, the fleet's reads and writes), the writes among
//! them, and the connections they hold. Then, with more than one instance, a cache rule
//! is set through the first instance --samples times and the others' `GET
//! /v1/cache/rules` read until they have it, and a session held on the last instance is
//! killed through the first: the time each takes.
//!
//! Everything runs embedded and is removed at the end, on error too.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;
use sluice_sandbox::{self as sandbox, MariaDb, ReplicaSet, ReplicaSetOptions};

use crate::client::{Client, Reply};
use crate::document::{Document, Section, Table};
use crate::report::Machine;
use crate::topology::{toml_string, SluiceProcess};
use crate::{CommonArgs, Ran};

/// Flags of `sluice bench fleet` (its defaults are in the `Scenario::Fleet` help).
#[derive(clap::Args, Debug, Clone)]
pub struct FleetArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Instance counts, comma-separated [default: 1,2,10; demo: 1,2].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub instances: Option<Vec<usize>>,
    /// How long the servers' counters are read over, at each count [default: 30s;
    /// demo: 5s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub window: Option<Duration>,
    /// Rule changes and KILLs timed at each count [default: 20; demo: 5].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Coordinate through this etcd (`http://host:port`) rather than the servers.
    #[arg(long, value_name = "URL")]
    pub etcd: Option<String>,
}

/// The servers' counters read around the window.
const STATUS: [&str; 6] = [
    "Questions",
    "Com_insert",
    "Com_update",
    "Com_delete",
    "Com_replace",
    "Threads_connected",
];

/// How long a change or a KILL may take before the sample counts as failed.
const AGREE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Serialize)]
struct ServerCost {
    server: String,
    /// Statements per second the servers counted, the benchmark's own two reads
    /// excepted.
    statements_per_s: f64,
    /// Writes per minute (INSERT, UPDATE, DELETE, REPLACE).
    writes_per_min: f64,
    /// Connections held beyond those before the instances started.
    connections: i64,
}

#[derive(Debug, Clone, Serialize)]
struct Count {
    instances: usize,
    servers: Vec<ServerCost>,
    /// Milliseconds until every other instance had a rule set through the first.
    rule_ms: Vec<f64>,
    /// Milliseconds from a KILL sent through the first instance to its OK, for a
    /// session of the last.
    kill_ms: Vec<f64>,
    /// Killed sessions that were still answering afterwards.
    kills_missed: usize,
    failure: Option<String>,
}

#[derive(Debug, Serialize)]
struct Results {
    command: String,
    started_at: String,
    finished_at: Option<String>,
    error: Option<String>,
    machine: Machine,
    mariadb_version: Option<String>,
    engine: String,
    window_s: f64,
    counts: Vec<Count>,
}

pub fn run(args: &FleetArgs) -> Ran {
    let mut report = None;
    let result = run_into(args, &mut report);
    Ran { report, result }
}

fn run_into(args: &FleetArgs, document: &mut Option<Document>) -> anyhow::Result<()> {
    let demo = args.common.demo;
    let counts =
        args.instances
            .clone()
            .unwrap_or_else(|| if demo { vec![1, 2] } else { vec![1, 2, 10] });
    if counts.iter().any(|&n| n == 0 || n > 200) {
        bail!("--instances: each count between 1 and 200");
    }
    let window = args
        .window
        .unwrap_or(Duration::from_secs(if demo { 5 } else { 30 }));
    let samples = args.samples.unwrap_or(if demo { 5 } else { 20 });
    let started = SystemTime::now();
    let out = args.common.out_dir("fleet", started);
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating {}", out.display()))?;
    let mut results = Results {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        finished_at: None,
        error: None,
        machine: Machine::detect(),
        mariadb_version: None,
        engine: match &args.etcd {
            Some(url) => format!("etcd at {url}"),
            None => "the servers".into(),
        },
        window_s: window.as_secs_f64(),
        counts: Vec::new(),
    };
    let measured = measure(args, &counts, window, samples, &out, &mut results);
    results.finished_at = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    results.error = measured.as_ref().err().map(|e| format!("{e:#}"));
    let written = write(&out, &results)?;
    print!("{}", crate::document::markdown_sections(&written.sections));
    println!("\nreport: {}", out.join("report.html").display());
    *document = Some(written);
    measured?;
    if let Some(c) = results.counts.iter().find(|c| c.failure.is_some()) {
        bail!(
            "{} instances: {}",
            c.instances,
            c.failure.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

fn measure(
    args: &FleetArgs,
    counts: &[usize],
    window: Duration,
    samples: usize,
    out: &Path,
    results: &mut Results,
) -> anyhow::Result<()> {
    let bin = args.common.sluice_bin()?;
    eprintln!("starting a primary and 2 replicas");
    let set = ReplicaSet::start(ReplicaSetOptions::default())
        .context("starting the sandbox replica set")?;
    results.mariadb_version = set
        .primary
        .execute("SELECT VERSION()")?
        .lines()
        .last()
        .map(str::to_owned);
    for &n in counts {
        eprintln!("{n} instance(s)");
        let mut count = Count {
            instances: n,
            servers: Vec::new(),
            rule_ms: Vec::new(),
            kill_ms: Vec::new(),
            kills_missed: 0,
            failure: None,
        };
        if let Err(e) = measure_count(args, &bin, &set, n, window, samples, out, &mut count) {
            count.failure = Some(format!("{e:#}"));
        }
        eprintln!("  {}", describe(&count));
        results.counts.push(count);
        write(out, results)?;
    }
    Ok(())
}

/// One server's counters, by name.
fn status(server: &MariaDb) -> anyhow::Result<Vec<i64>> {
    let list = STATUS.map(|s| format!("'{s}'")).join(",");
    let text = server.execute(&format!(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ({list})"
    ))?;
    let read: std::collections::HashMap<&str, i64> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('\t')?;
            Some((k, v.trim().parse().ok()?))
        })
        .collect();
    Ok(STATUS
        .iter()
        .map(|s| read.get(s).copied().unwrap_or(0))
        .collect())
}

struct Instance {
    process: SluiceProcess,
    port: u16,
    admin: String,
}

#[allow(clippy::too_many_arguments)]
fn measure_count(
    args: &FleetArgs,
    bin: &Path,
    set: &ReplicaSet,
    n: usize,
    window: Duration,
    samples: usize,
    out: &Path,
    count: &mut Count,
) -> anyhow::Result<()> {
    let servers: Vec<&MariaDb> = set.servers().collect();
    let before: Vec<Vec<i64>> = servers
        .iter()
        .map(|s| status(s))
        .collect::<Result<_, _>>()?;
    let token = format!("fleet-bench-{}", std::process::id());
    let mut instances = Vec::new();
    for i in 0..n {
        let (port, admin_port) = (sandbox::free_port(), sandbox::free_port());
        let config = config(set, port, admin_port, &token, args.etcd.as_deref());
        let dir = out.join(format!("raw/{n}-{i}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("sluice.toml"), &config)?;
        let process =
            SluiceProcess::start(bin, &dir.join("sluice.toml"), port, &dir.join("sluice.log"))?;
        instances.push(Instance {
            process,
            port,
            admin: format!("127.0.0.1:{admin_port}"),
        });
    }
    let agent = agent();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !instances.iter().all(|i| live(&agent, i, &token) == Some(n)) {
        if Instant::now() > deadline {
            bail!("the instances did not all list each other within 60 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let t0: Vec<Vec<i64>> = servers
        .iter()
        .map(|s| status(s))
        .collect::<Result<_, _>>()?;
    let began = Instant::now();
    std::thread::sleep(window);
    let t1: Vec<Vec<i64>> = servers
        .iter()
        .map(|s| status(s))
        .collect::<Result<_, _>>()?;
    let secs = began.elapsed().as_secs_f64();
    for i in 0..servers.len() {
        let d = |k: usize| t1[i][k] - t0[i][k];
        count.servers.push(ServerCost {
            server: if i == 0 {
                "primary".into()
            } else {
                format!("replica{i}")
            },
            // The benchmark's own SHOW STATUS is one statement of the window.
            statements_per_s: (d(0) - 1).max(0) as f64 / secs,
            writes_per_min: (d(1) + d(2) + d(3) + d(4)) as f64 * 60.0 / secs,
            connections: t1[i][5] - before[i][5],
        });
    }
    if n > 1 {
        agreement(&agent, &instances, &token, samples, count)?;
    }
    for i in instances {
        i.process.stop();
    }
    Ok(())
}

/// Times rule changes and KILLs across the instances.
fn agreement(
    agent: &ureq::Agent,
    instances: &[Instance],
    token: &str,
    samples: usize,
    count: &mut Count,
) -> anyhow::Result<()> {
    let (first, last) = (&instances[0], &instances[instances.len() - 1]);
    for s in 0..samples {
        let name = format!("bench_{s}");
        let rules =
            serde_json::json!([{ "name": name, "match": format!("^SELECT {s}$"), "ttl": "1m" }]);
        let sent = Instant::now();
        let answer = agent
            .put(format!("http://{}/v1/cache/rules", first.admin))
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .send(rules.to_string())?;
        if answer.status() != 200 {
            bail!("PUT /v1/cache/rules answered {}", answer.status());
        }
        let has = |i: &Instance| {
            get(agent, i, token, "/v1/cache/rules").is_some_and(|r| {
                r.as_array()
                    .is_some_and(|a| a.iter().any(|r| r["name"] == name))
            })
        };
        while !instances[1..].iter().all(has) {
            if sent.elapsed() > AGREE_TIMEOUT {
                bail!("a rule set through one instance did not reach the others in 10 s");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        count.rule_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let user = (sandbox::ADMIN_USER, sandbox::ADMIN_PASSWORD);
        let mut killer =
            Client::connect(&format!("127.0.0.1:{}", first.port), user.0, user.1).await?;
        for _ in 0..samples {
            let mut victim =
                Client::connect(&format!("127.0.0.1:{}", last.port), user.0, user.1).await?;
            victim.ping().await?;
            let id = newest_session(agent, last, token).context("the victim's session id")?;
            let sent = Instant::now();
            match killer.query(&format!("KILL {id}")).await? {
                Reply::Ok { .. } => count.kill_ms.push(sent.elapsed().as_secs_f64() * 1000.0),
                other => bail!("KILL {id} through another instance: {other:?}"),
            }
            if matches!(victim.ping().await, Ok(true)) {
                count.kills_missed += 1;
            }
        }
        Ok::<_, anyhow::Error>(())
    })
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .build()
        .into()
}

fn get(agent: &ureq::Agent, i: &Instance, token: &str, path: &str) -> Option<serde_json::Value> {
    let mut r = agent
        .get(format!("http://{}{path}", i.admin))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .ok()?;
    serde_json::from_str(&r.body_mut().read_to_string().ok()?).ok()
}

/// How many live instances this one lists.
fn live(agent: &ureq::Agent, i: &Instance, token: &str) -> Option<usize> {
    let fleet = get(agent, i, token, "/v1/fleet")?;
    Some(
        fleet["members"]
            .as_array()?
            .iter()
            .filter(|m| m["live"] == true)
            .count(),
    )
}

/// The highest session id the instance holds: the connection just made.
fn newest_session(agent: &ureq::Agent, i: &Instance, token: &str) -> Option<u64> {
    get(agent, i, token, "/v1/sessions")?
        .as_array()?
        .iter()
        .filter_map(|s| s["id"].as_u64())
        .max()
}

fn config(set: &ReplicaSet, port: u16, admin_port: u16, token: &str, etcd: Option<&str>) -> String {
    let mut text = format!(
        "# Written by `sluice bench fleet`.\n\
         [log]\nlevel = \"warn\"\n\n\
         [[listeners]]\naddress = \"127.0.0.1:{port}\"\n\n\
         [[users]]\nname = {}\npassword = {}\n",
        toml_string(sandbox::ADMIN_USER),
        toml_string(sandbox::ADMIN_PASSWORD),
    );
    for (i, server) in set.servers().enumerate() {
        let name = if i == 0 {
            "primary".to_owned()
        } else {
            format!("replica{i}")
        };
        let _ = write!(
            text,
            "\n[[servers]]\nname = \"{name}\"\naddress = \"{}\"\n",
            server.addr()
        );
    }
    let _ = write!(
        text,
        "\n[[cache.rules]]\nname = \"start\"\nmatch = \"^SELECT 1$\"\nttl = \"10s\"\n\n\
         [admin]\naddress = \"127.0.0.1:{admin_port}\"\ntoken = {}\n",
        toml_string(token)
    );
    if let Some(url) = etcd {
        let _ = write!(text, "\n[fleet]\netcd = [{}]\n", toml_string(url));
    }
    text
}

fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = ((v.len() - 1) as f64 * q).round() as usize;
    Some(v[at])
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn describe(c: &Count) -> String {
    if let Some(f) = &c.failure {
        return format!("FAILED: {f}");
    }
    let total: f64 = c.servers.iter().map(|s| s.statements_per_s).sum();
    format!(
        "{:.1} statements/s on the servers in all; rule p50 {} ms, KILL p50 {} ms",
        total,
        ms(quantile(&c.rule_ms, 0.5)),
        ms(quantile(&c.kill_ms, 0.5))
    )
}

fn write(out: &Path, r: &Results) -> anyhow::Result<Document> {
    let mut cost = Table::new(
        "What the instances cost each server, idle",
        &[
            "instances",
            "server",
            "statements/s",
            "writes/min",
            "connections held",
        ],
    );
    let mut agree = Table::new(
        "How fast the instances agree",
        &[
            "instances",
            "rule on all, p50 ms",
            "max ms",
            "KILL across, p50 ms",
            "max ms",
            "killed sessions still answering",
        ],
    );
    let mut csv = String::from("instances,server,statements_per_s,writes_per_min,connections\n");
    for c in &r.counts {
        for s in &c.servers {
            cost.rows.push(vec![
                c.instances.to_string(),
                s.server.clone(),
                format!("{:.1}", s.statements_per_s),
                format!("{:.1}", s.writes_per_min),
                s.connections.to_string(),
            ]);
            let _ = writeln!(
                csv,
                "{},{},{:.2},{:.2},{}",
                c.instances, s.server, s.statements_per_s, s.writes_per_min, s.connections
            );
        }
        if c.instances > 1 {
            agree.rows.push(vec![
                c.instances.to_string(),
                ms(quantile(&c.rule_ms, 0.5)),
                ms(quantile(&c.rule_ms, 1.0)),
                ms(quantile(&c.kill_ms, 0.5)),
                ms(quantile(&c.kill_ms, 1.0)),
                c.kills_missed.to_string(),
            ]);
        }
    }
    let mut notes = Vec::new();
    for c in r.counts.iter().filter(|c| c.failure.is_some()) {
        notes.push(format!("{} instances: {}", c.instances, describe(c)));
    }
    let document = Document {
        title: "Sluice benchmark: fleet (what several instances cost the servers)".into(),
        facts: vec![
            format!("Started {}; coordinated through {}", r.started_at, r.engine),
            format!("MariaDB {}", r.mariadb_version.as_deref().unwrap_or("?")),
            format!(
                "Counters read over {:.0} s at each count, every instance idle",
                r.window_s
            ),
        ],
        detail: r.error.clone(),
        legend: Some(
            "statements/s: what the server counted (Questions) from the instances' monitors \
             and the fleet, per server; writes/min: the fleet's own rows; connections held: \
             beyond those before the instances started"
                .into(),
        ),
        sections: vec![Section {
            title: "Fleet".into(),
            tables: vec![cost, agree],
            notes,
            charts: Vec::new(),
        }],
        commands: vec![("Benchmark".into(), vec![r.command.clone()])],
        commands_note: None,
        csv,
        json: serde_json::to_string_pretty(r)?,
    };
    document.write(out)?;
    Ok(document)
}
