//! The flow-control part of `sluice bench galera`: one cluster whose last node is
//! throttled: `gcs.fc_limit` (set at run time through `wsrep_provider_options`) makes it
//! ask for a pause as soon as a write set or two wait in its receive queue, and for the
//! first seconds of every run mysqlslap's table is read-locked there ([`TableLock`]), so
//! its applier stops while it stays synced. The same insert run goes through Sluice with
//! `galera_writers = "all"`, then `"one"`, while every node's flow-control counters are
//! read once a second, straight from the nodes.
//!
//! Flow control pauses every node's commits while the throttled node asks for it,
//! whatever the proxy does. What Sluice can change is where new work goes: with "all"
//! it spreads transactions over the synced nodes but steers them away from a node that
//! asks for a pause, so that node takes fewer of them than its share (its
//! `wsrep_replicated`), and no local writes or reads lengthen its backlog; with "one"
//! every write goes to the elected writer.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use sluice_sandbox::MariaDb;

use super::lock::TableLock;
use super::{delta, read_all, Bench, FlowPlan, NodeStatus, Proxy, Servers, SlapOutcome};
use crate::mysqlslap::InsertSpec;
use crate::report::thousands;

/// What Sluice is told in each run, in order.
const MODES: [&str; 2] = ["all", "one"];

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
    /// Seconds since the start when the table lock was granted and released.
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
    /// Its part of all nodes' write sets (an even spread is 1 / nodes).
    pub write_share: Option<f64>,
    /// Samples in which it was asking the cluster to pause
    /// (`wsrep_flow_control_requested`).
    pub requested_samples: usize,
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
    /// Whether it was asking for a pause (`wsrep_flow_control_requested`, 1 or 0).
    pub requested: Vec<Option<u64>>,
    /// Write sets it replicated since the start of the run.
    pub write_sets: Vec<Option<u64>>,
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
        create_table(nodes[0], &bench.args.schema)?;
        let run = one_run(bench, plan, writers, &proxy, &nodes);
        nodes[0]
            .execute(&format!("DROP SCHEMA `{}`", bench.args.schema))
            .context("flow control: dropping the benchmark's schema")?;
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

/// mysqlslap's table in a schema of its own, created by the benchmark so that the
/// throttled node's table can be locked before the first insert. A schema left by a
/// killed run is dropped first, as mysqlslap itself does.
fn create_table(node: &MariaDb, schema: &str) -> anyhow::Result<()> {
    node.execute(&format!(
        "DROP SCHEMA IF EXISTS `{schema}`; CREATE SCHEMA `{schema}`; USE `{schema}`; {};",
        crate::mysqlslap::CREATE_TABLE
    ))
    .context("flow control: creating mysqlslap's table")?;
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
    let mut samples = vec![sample(0.0, &baseline, &baseline)];
    let throttled = nodes[nodes.len() - 1];
    let started = Instant::now();
    // Granted before mysqlslap starts, so every run has its locked phase however fast
    // the machine; released by the client itself once the hold is over.
    let mut lock = match plan.lock_secs {
        0 => Ok(None),
        secs => TableLock::take(
            throttled,
            &bench.args.schema,
            Duration::from_secs(secs),
            &bench.out.join(format!("raw/flow-{writers}-lock.txt")),
        )
        .map(Some),
    };
    let (command, outcome) = bench.slap(
        &spec,
        proxy.addr(),
        nodes,
        &output_file,
        true,
        |elapsed, nodes| {
            if elapsed.is_some() {
                let secs = started.elapsed().as_secs_f64();
                samples.push(sample(secs, &baseline, &read_all(nodes)));
            }
        },
    );
    let after = read_all(nodes);
    let since = |at: Option<Instant>| at.map(|at| at.duration_since(started).as_secs_f64());
    let (locked_from, locked_until, lock_error) = match &mut lock {
        Ok(Some(held)) => {
            let finished = held.finish(throttled);
            (
                since(held.locked),
                since(held.unlocked),
                finished.err().map(|e| format!("{e:#}")),
            )
        }
        Ok(None) => (None, None, None),
        Err(e) => (None, None, Some(format!("{e:#}"))),
    };
    let failure = outcome
        .failure(spec.inserts())
        .or_else(|| lock_error.map(|e| format!("the table lock: {e}")));
    FlowRun {
        writers,
        writer_at_start,
        rows_asked: spec.inserts(),
        rows_inserted: outcome.inserted(),
        seconds: outcome.seconds(),
        rows_per_sec: outcome.rows_per_sec(),
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
        requested: current("wsrep_flow_control_requested"),
        write_sets: since("wsrep_replicated"),
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
    let total: u64 = outcome.local_per_node.iter().flatten().sum();
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
                write_share: outcome.local_per_node[i]
                    .filter(|_| total > 0)
                    .map(|n| n as f64 / total as f64),
                requested_samples: samples.iter().filter(|s| s.requested[i] == Some(1)).count(),
                max_recv_queue: samples.iter().filter_map(|s| s.recv_queue[i]).max(),
                states,
            }
        })
        .collect()
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
