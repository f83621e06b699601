//! The flow-control part of `sluice bench galera`: one cluster whose last node is
//! throttled (`gcs.fc_limit`, set at run time through `wsrep_provider_options`) and, for
//! the first seconds of every run, held under `FLUSH TABLES WITH READ LOCK` from a
//! connection the benchmark keeps open. The same insert run goes through Sluice with
//! `galera_writers = "all"`, then `"one"`, while every node's flow-control counters are
//! read once a second, straight from the nodes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use sluice_sandbox::{self as sandbox, MariaDb};

use super::{delta, read_all, Bench, FlowPlan, NodeStatus, Proxy, Servers, SlapOutcome};
use crate::mysqlslap::{InsertSpec, SlapStats};
use crate::report::thousands;

/// What Sluice is told in each run, in order.
const MODES: [&str; 2] = ["all", "one"];
/// How long FLUSH TABLES WITH READ LOCK may take: it waits for running statements.
const LOCK_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Serialize)]
pub(super) struct FlowResults {
    pub plan: FlowPlan,
    /// The throttled node's name.
    pub throttled: String,
    /// Its `wsrep_provider_options` after the change, as the server reports them.
    pub throttled_fc_limit: Option<String>,
    pub runs: Vec<FlowRun>,
}

/// One insert run of the flow-control part.
#[derive(Debug, Clone, Serialize)]
pub(super) struct FlowRun {
    /// `galera_writers`.
    pub writers: &'static str,
    /// The node Sluice's monitor had elected writer before the run.
    pub writer_at_start: Option<String>,
    pub rows_asked: u64,
    pub rows_inserted: Option<u64>,
    pub seconds: Option<f64>,
    pub rows_per_sec: Option<f64>,
    /// The whole mysqlslap run, its CREATE TABLE included: mysqlslap's own clock
    /// starts after it, and DDL waits for every node.
    pub wall_secs: Option<f64>,
    /// Seconds since the start when the lock was held and released (the end of the run
    /// if it was still held then).
    pub locked_from: Option<f64>,
    pub locked_until: Option<f64>,
    pub nodes: Vec<FlowNode>,
    /// Once a second, the counters since the start of the run.
    pub samples: Vec<Sample>,
    pub failure: Option<String>,
    pub command: String,
    pub output_file: String,
}

/// One node over a whole run.
#[derive(Debug, Clone, Serialize)]
pub(super) struct FlowNode {
    pub name: String,
    /// `wsrep_flow_control_paused_ns` over the run, in ms.
    pub paused_ms: Option<f64>,
    /// Pause requests it sent and received (`wsrep_flow_control_sent`/`_recv`).
    pub fc_sent: Option<u64>,
    pub fc_recv: Option<u64>,
    /// Write sets it replicated over the run (`wsrep_replicated`): the transactions it
    /// took from clients.
    pub write_sets: Option<u64>,
    /// The longest `wsrep_local_recv_queue` sampled.
    pub max_recv_queue: Option<u64>,
    /// Every `wsrep_local_state` sampled, in order, each once (4 synced, 2 donor or
    /// desynced, 3 joined).
    pub states: Vec<u64>,
}

/// The counters at one second of a run, node by node.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Sample {
    pub secs: f64,
    /// Since the start of the run.
    pub paused_ms: Vec<Option<f64>>,
    pub fc_sent: Vec<Option<u64>>,
    pub recv_queue: Vec<Option<u64>>,
    pub state: Vec<Option<u64>>,
}

/// Runs the flow-control part on a cluster of its own.
pub(super) fn run(bench: &mut Bench, plan: &FlowPlan) -> anyhow::Result<()> {
    eprintln!(
        "flow control: starting a {}-node Galera cluster",
        plan.nodes
    );
    let servers = Servers::start(plan.nodes)?;
    let nodes = servers.nodes();
    let throttled = nodes.len() - 1;
    nodes[throttled]
        .execute(&format!(
            "SET GLOBAL wsrep_provider_options = 'gcs.fc_limit={}'",
            plan.fc_limit
        ))
        .context("throttling the last node (gcs.fc_limit)")?;
    let options = nodes[throttled]
        .execute("SELECT @@wsrep_provider_options")
        .unwrap_or_default();
    bench.results.flow = Some(FlowResults {
        plan: plan.clone(),
        throttled: format!("node{}", throttled + 1),
        throttled_fc_limit: options
            .split(';')
            .map(str::trim)
            .find(|o| o.starts_with("gcs.fc_limit"))
            .map(String::from),
        runs: Vec::new(),
    });
    for writers in MODES {
        let config = bench.out.join(format!("sluice-flow-{writers}.toml"));
        let proxy = Proxy::start(bench, &nodes, writers, &config)?;
        let run = one_run(bench, plan, writers, &proxy, &nodes);
        eprintln!("    {}", describe(&run));
        bench
            .results
            .flow
            .as_mut()
            .expect("set above")
            .runs
            .push(run);
        super::report::write(bench.out, &mut bench.results)?;
        drop(proxy);
        servers
            .settle()
            .context("flow control: the cluster did not settle after a run")?;
    }
    eprintln!("flow control: stopping the cluster");
    Ok(())
}

fn one_run(
    bench: &Bench,
    plan: &FlowPlan,
    writers: &'static str,
    proxy: &Proxy,
    nodes: &[&MariaDb],
) -> FlowRun {
    let spec = InsertSpec {
        clients: bench.plan.clients,
        total_inserts: plan.rows,
        per_trx: plan.per_trx,
    };
    let writer_at_start = proxy.writer();
    eprintln!(
        "flow control, galera_writers = \"{writers}\": {} rows, {} per transaction, node{} \
         locked for {} s (Sluice's writer: {})",
        thousands(spec.inserts()),
        plan.per_trx,
        nodes.len(),
        plan.lock_secs,
        writer_at_start.as_deref().unwrap_or("none")
    );
    let output_file = format!("raw/flow-{writers}.txt");
    let baseline = read_all(nodes);
    let mut samples = Vec::new();
    let throttled = nodes[nodes.len() - 1];
    // Taken before the clients start, so that every run has its locked phase however
    // fast the machine; released at the first sample past --flow-lock.
    let mut lock_error = None;
    let mut lock = match plan.lock_secs {
        0 => None,
        _ => ReadLock::take(throttled)
            .map_err(|e| lock_error = Some(format!("{e:#}")))
            .ok(),
    };
    let locked_from = lock.is_some().then_some(0.0);
    samples.push(sample(0.0, &baseline, &read_all(nodes)));
    let started = std::time::Instant::now();
    let mut locked_until = None;
    let lock_end = plan.lock_secs as f64;
    let (command, outcome) = bench.slap(
        &spec,
        proxy.addr(),
        nodes,
        &output_file,
        |elapsed, nodes| {
            let Some(elapsed) = elapsed else {
                // The nodes can only agree on the rows once the locked one applies again.
                if let Some(held) = lock.take() {
                    locked_until = Some(started.elapsed().as_secs_f64());
                    if let Err(e) = held.release() {
                        lock_error = Some(format!("{e:#}"));
                    }
                }
                return;
            };
            let secs = elapsed.as_secs_f64();
            if secs >= lock_end {
                if let Some(held) = lock.take() {
                    if let Err(e) = held.release() {
                        lock_error = Some(format!("{e:#}"));
                    }
                    locked_until = Some(secs);
                }
            }
            samples.push(sample(secs, &baseline, &read_all(nodes)));
        },
    );
    let after = read_all(nodes);
    let failure = outcome
        .failure(spec.inserts())
        .or_else(|| lock_error.map(|e| format!("holding the read lock: {e}")));
    FlowRun {
        writers,
        writer_at_start,
        rows_asked: spec.inserts(),
        rows_inserted: outcome.inserted(),
        seconds: outcome.stats.as_ref().ok().map(|s| s.avg_secs),
        rows_per_sec: outcome
            .stats
            .as_ref()
            .ok()
            .and_then(SlapStats::rows_per_sec),
        wall_secs: outcome.wall_secs,
        locked_from,
        locked_until,
        nodes: node_totals(&baseline, &after, &outcome, &samples),
        samples,
        failure,
        command,
        output_file,
    }
}

fn counter(status: &Option<NodeStatus>, name: &str) -> Option<u64> {
    status.as_ref().and_then(|s| s.get(name))
}

fn sample(secs: f64, baseline: &[Option<NodeStatus>], now: &[Option<NodeStatus>]) -> Sample {
    let since = |name: &str| -> Vec<Option<u64>> {
        baseline
            .iter()
            .zip(now)
            .map(|(b, n)| delta(counter(b, name), counter(n, name)))
            .collect()
    };
    let current =
        |name: &str| -> Vec<Option<u64>> { now.iter().map(|n| counter(n, name)).collect() };
    Sample {
        secs,
        paused_ms: since("wsrep_flow_control_paused_ns")
            .into_iter()
            .map(|ns| ns.map(|ns| ns as f64 / 1e6))
            .collect(),
        fc_sent: since("wsrep_flow_control_sent"),
        recv_queue: current("wsrep_local_recv_queue"),
        state: current("wsrep_local_state"),
    }
}

fn node_totals(
    baseline: &[Option<NodeStatus>],
    after: &[Option<NodeStatus>],
    outcome: &SlapOutcome,
    samples: &[Sample],
) -> Vec<FlowNode> {
    (0..baseline.len())
        .map(|i| {
            let d = |name: &str| delta(counter(&baseline[i], name), counter(&after[i], name));
            let mut states: Vec<u64> = Vec::new();
            for state in samples.iter().filter_map(|s| s.state[i]) {
                if states.last() != Some(&state) {
                    states.push(state);
                }
            }
            FlowNode {
                name: format!("node{}", i + 1),
                paused_ms: d("wsrep_flow_control_paused_ns").map(|ns| ns as f64 / 1e6),
                fc_sent: d("wsrep_flow_control_sent"),
                fc_recv: d("wsrep_flow_control_recv"),
                write_sets: outcome.local_per_node[i],
                max_recv_queue: samples.iter().filter_map(|s| s.recv_queue[i]).max(),
                states,
            }
        })
        .collect()
}

/// `FLUSH TABLES WITH READ LOCK` held on a node by a `mariadb` client the benchmark keeps
/// open. Dropping it kills the client, and the server releases the lock with the
/// connection.
struct ReadLock {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl ReadLock {
    /// Takes the lock and returns once the server has granted it (at most
    /// [`LOCK_TIMEOUT`]).
    fn take(node: &MariaDb) -> anyhow::Result<ReadLock> {
        let mut client = node.admin_client()?;
        // Unbuffered: the marker must come out as soon as the lock is granted.
        client
            .args(["--batch", "--unbuffered", "--skip-column-names"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = client.spawn().context("starting the mariadb client")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lock = ReadLock {
            stdin: child.stdin.take(),
            child,
        };
        let stdin = lock.stdin.as_mut().context("no stdin")?;
        stdin.write_all(b"FLUSH TABLES WITH READ LOCK;\nSELECT 'sluice-bench-locked';\n")?;
        stdin.flush()?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        loop {
            match rx.recv_timeout(LOCK_TIMEOUT) {
                Ok(line) if line.trim() == "sluice-bench-locked" => return Ok(lock),
                Ok(_) => {}
                Err(_) => bail!(
                    "FLUSH TABLES WITH READ LOCK on {} was not granted within {LOCK_TIMEOUT:?}",
                    node.addr()
                ),
            }
        }
    }

    /// UNLOCK TABLES, and the client's end.
    fn release(mut self) -> anyhow::Result<()> {
        let mut stdin = self.stdin.take().context("already released")?;
        stdin.write_all(b"UNLOCK TABLES;\n")?;
        drop(stdin);
        match sandbox::wait_child(&mut self.child, LOCK_TIMEOUT)? {
            Some(status) if status.success() => Ok(()),
            Some(status) => bail!("the client holding the read lock {status}"),
            None => bail!("the client holding the read lock did not end within {LOCK_TIMEOUT:?}"),
        }
    }
}

impl Drop for ReadLock {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn describe(run: &FlowRun) -> String {
    if let Some(f) = &run.failure {
        return format!("FAILED: {f}");
    }
    let nodes: Vec<String> = run
        .nodes
        .iter()
        .map(|n| {
            format!(
                "{} paused {:.0} ms, sent {}, write sets {}",
                n.name,
                n.paused_ms.unwrap_or(0.0),
                n.fc_sent.unwrap_or(0),
                n.write_sets.map_or("?".into(), thousands)
            )
        })
        .collect();
    format!(
        "{} rows/s; {}",
        thousands(run.rows_per_sec.unwrap_or(0.0).round() as u64),
        nodes.join("; ")
    )
}
