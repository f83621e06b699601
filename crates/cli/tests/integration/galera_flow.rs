//! Galera flow control seen through Sluice, on a real two-node cluster: a node whose
//! applier is held back (a table lock it must wait for) fills its receive queue and
//! asks the cluster to pause; the servers API, `/metrics`, `sluice admin servers` and
//! the history name that node, Sluice sends it no new reads or writes meanwhile, and
//! once it is released its figures return to zero.

use crate::routing::{admin_get, ADMIN_TOKEN};
use crate::support::proxy::Server;
use crate::support::wire::{RawConn, Reply};
use crate::support::{
    provision, sluice_admin, wait_until, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER,
};
use serde_json::Value;
use sluice_sandbox::GaleraCluster;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the monitor checks: a pause request shows in `sent` for one interval,
/// which the test's polls (every 50 ms or so) must not miss.
const INTERVAL: &str = "500ms";
/// Bound on every wait for the monitor to see a change.
const WAIT: Duration = Duration::from_secs(10);

/// `galera.flow` of server `name` as the servers API shows it.
fn flow(sluice: &Sluice, config: &Config, name: &str) -> Value {
    flow_in(&admin_get(sluice, config, "/v1/servers"), name)
}

fn flow_in(servers: &Value, name: &str) -> Value {
    servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["galera"]["flow"].clone())
        .unwrap_or(Value::Null)
}

/// Both nodes' `galera.flow` from one answer.
fn flows(sluice: &Sluice, config: &Config) -> (Value, Value) {
    let servers = admin_get(sluice, config, "/v1/servers");
    (flow_in(&servers, "node1"), flow_in(&servers, "node2"))
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The value of the sample `name{server="server"}` in a Prometheus exposition.
fn sample(text: &str, name: &str, server: &str) -> Option<f64> {
    let prefix = format!("{name}{{server=\"{server}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
}

/// Inserts into `gfc.t` on `node` one autocommit statement after another until told to
/// stop; each commit waits while the cluster is paused.
struct Writer {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Writer {
    fn start(node: std::net::SocketAddr) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let mut conn = RawConn::login_ok(node, NATIVE_USER, NATIVE_PASSWORD);
        let thread = std::thread::spawn({
            let (stop, done) = (stop.clone(), done.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    match conn.query("INSERT INTO gfc.t (v) VALUES (1)") {
                        Ok(Reply::Ok { .. }) => done.fetch_add(1, Ordering::Relaxed),
                        other => return Err(format!("{other:?}")),
                    };
                }
                Ok(())
            }
        });
        Writer {
            stop,
            done,
            thread: Some(thread),
        }
    }

    fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let result = self.thread.take().unwrap().join().unwrap();
        result.expect("the writer's inserts all succeed");
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Write sets `node` has taken from its own clients (`wsrep_replicated`).
fn replicated(node: &sluice_sandbox::MariaDb) -> u64 {
    node.query_value(
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
         WHERE VARIABLE_NAME = 'WSREP_REPLICATED'",
    )
    .unwrap()
    .parse()
    .unwrap()
}

const WRITE: &str = "INSERT INTO gfc.w (v) VALUES (1)";

/// `count` autocommit inserts into `gfc.w` through Sluice, each from a session of its
/// own and all at once, so Sluice picks a node for each. Each thread ends once the
/// cluster has committed its insert (not while it is paused).
fn start_writes(sluice: &Sluice, count: usize) -> Vec<std::thread::JoinHandle<()>> {
    (0..count)
        .map(|_| {
            let mut c = crate::routing::login(sluice);
            std::thread::spawn(move || crate::routing::ok(&mut c, WRITE))
        })
        .collect()
}

fn join(writes: Vec<std::thread::JoinHandle<()>>) {
    for t in writes {
        t.join().expect("an insert through Sluice failed");
    }
}

/// The inserts of [`start_writes`] running on any node.
fn writes_running(cluster: &GaleraCluster) -> usize {
    cluster
        .nodes
        .iter()
        .map(|n| {
            n.query_value(&format!(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{WRITE}'"
            ))
            .unwrap()
            .parse::<usize>()
            .unwrap()
        })
        .sum()
}

/// Every node's flow-control status variables, for failure messages.
fn flow_status(cluster: &GaleraCluster) -> String {
    cluster
        .nodes
        .iter()
        .map(|n| {
            n.execute("SHOW GLOBAL STATUS WHERE Variable_name LIKE 'wsrep_flow%' OR Variable_name LIKE 'wsrep_local_recv_queue%'")
                .unwrap_or_else(|e| e.to_string())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two synced nodes with the test accounts and table `gfc.t`, node2 pausing the cluster
/// as soon as two write sets wait there, and Sluice in front ("node1", "node2").
fn start() -> (GaleraCluster, Sluice, Config) {
    let cluster = GaleraCluster::start(2).expect("starting a two-node Galera cluster");
    provision(&cluster.nodes[0]).expect("creating the test accounts");
    cluster.nodes[0]
        .execute(
            "CREATE DATABASE gfc; CREATE TABLE gfc.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT); \
             CREATE TABLE gfc.w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
        )
        .unwrap();
    cluster.wait_synced(Duration::from_secs(30)).unwrap();
    // The pause comes at the second queued write set instead of the seventeenth: the
    // limit is a provider option settable at runtime.
    let node2 = &cluster.nodes[1];
    node2
        .execute("SET GLOBAL wsrep_provider_options = 'gcs.fc_limit=1'")
        .unwrap();
    let options = node2
        .query_value("SELECT @@wsrep_provider_options")
        .unwrap();
    assert!(options.contains("gcs.fc_limit = 1;"), "{options}");

    let mut config = Config::for_server(&cluster.nodes[0])
        .monitor("interval", INTERVAL)
        .routing("galera_writers", "all")
        .admin(ADMIN_TOKEN);
    config.servers = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Server::new(&format!("node{}", i + 1), n.addr()))
        .collect();
    let sluice = Sluice::start(&config);
    assert!(
        wait_until(WAIT, || flow(&sluice, &config, "node2").is_object()),
        "{}",
        admin_get(&sluice, &config, "/v1/servers")
    );
    (cluster, sluice, config)
}

/// While node2 holds the cluster paused: `/metrics`, `sluice admin servers` and the
/// history say so, and name node2.
fn seen_in_metrics_cli_and_history(sluice: &Sluice, config: &Config) {
    let address = config.admin_address().unwrap();
    let client = crate::support::http::Client::new(
        address.clone(),
        Some(sluice::config::Secret(ADMIN_TOKEN.into())),
    );
    let text = String::from_utf8(client.get("/metrics").unwrap().body).unwrap();
    let metric = |name: &str, server: &str| {
        sample(&text, name, server).unwrap_or_else(|| panic!("no {name} for {server}:\n{text}"))
    };
    assert!(metric("sluice_galera_flow_control_paused_ratio", "node2") > 0.5);
    assert_eq!(metric("sluice_galera_flow_control_requested", "node2"), 1.0);
    assert_eq!(metric("sluice_galera_flow_control_requested", "node1"), 0.0);
    assert!(metric("sluice_galera_recv_queue", "node2") > 0.0);
    assert!(metric("sluice_galera_flow_control_paused_seconds_total", "node1") > 0.0);
    for name in [
        "sluice_galera_flow_control_sent",
        "sluice_galera_flow_control_received",
    ] {
        metric(name, "node1");
        metric(name, "node2");
    }

    let table = sluice_admin(&address, ADMIN_TOKEN, &["servers"]);
    let line = |node: &str| {
        table
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{node}: galera")))
            .unwrap_or_else(|| panic!("no Galera line for {node}:\n{}", table.stdout))
            .to_owned()
    };
    assert!(
        line("node2").contains("the cluster waits for this node"),
        "{}",
        table.stdout
    );
    assert!(!line("node1").contains("waits for"), "{}", table.stdout);

    // The history's seconds carry each node's paused share.
    assert!(
        wait_until(WAIT, || {
            let h = admin_get(sluice, config, "/v1/history?range=hour");
            h["points"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| number(&p["flow_paused"]["node2"]) > 0.5)
        }),
        "{}",
        admin_get(sluice, config, "/v1/history?range=hour")
    );
}

#[test]
fn a_node_holding_its_applier_back_is_seen_sending_flow_control() {
    let (cluster, sluice, config) = start();
    let node2 = &cluster.nodes[1];
    for node in ["node1", "node2"] {
        let f = flow(&sluice, &config, node);
        assert_eq!(f["sent"], 0, "{node}: {f}");
        assert_eq!(f["requested"], false, "{node}: {f}");
    }

    // Both nodes take reads (and writes) while neither holds the cluster back.
    let reads_on_node2 = || {
        let port = node2.port().to_string();
        (0..40)
            .filter(|_| {
                let mut c = crate::routing::login(&sluice);
                crate::routing::one(&mut c, "SELECT @@port") == port
            })
            .count()
    };
    assert!(reads_on_node2() > 0, "node2 takes no reads");
    let node2_writes = replicated(node2);
    join(start_writes(&sluice, 20));
    assert!(replicated(node2) > node2_writes, "node2 takes no writes");

    // node2's applier waits for the table lock (a lock Galera does not break for it,
    // and that does not desync the node as a global read lock would): writes through
    // node1 queue there until node2 asks the cluster to pause.
    let mut lock = RawConn::login_ok(node2.addr(), NATIVE_USER, NATIVE_PASSWORD);
    match lock.query("LOCK TABLES gfc.t READ") {
        Ok(Reply::Ok { .. }) => {}
        other => panic!("LOCK TABLES: {other:?}"),
    }
    let writer = Writer::start(cluster.nodes[0].addr());
    let mut sent_seen = 0;
    let mut node1_sent = 0;
    let paused = wait_until(WAIT, || {
        let (f1, f2) = flows(&sluice, &config);
        // `sent` counts the one request that started the pause, in the interval it
        // fell in: seen only by looking at every interval.
        sent_seen = sent_seen.max(f2["sent"].as_u64().unwrap_or(0));
        node1_sent = node1_sent.max(f1["sent"].as_u64().unwrap_or(0));
        sent_seen > 0
            && f2["requested"] == true
            && f2["recv_queue"].as_u64().unwrap_or(0) > 0
            && number(&f2["paused_share"]) > 0.5
    });
    assert!(
        paused,
        "node2 never showed as sending flow control: {}\n{}",
        admin_get(&sluice, &config, "/v1/servers"),
        flow_status(&cluster)
    );
    // The pause is the whole cluster's; the request is node2's alone.
    let f1 = flow(&sluice, &config, "node1");
    assert_eq!(
        (node1_sent, &f1["requested"]),
        (0, &Value::Bool(false)),
        "{f1}"
    );
    assert_eq!(f1["recv_queue"], 0, "{f1}");
    assert!(number(&f1["paused_share"]) > 0.5, "{f1}");

    seen_in_metrics_cli_and_history(&sluice, &config);
    // The node the cluster waits for gets no new work while the other can take it.
    assert_eq!(
        reads_on_node2(),
        0,
        "reads still go to the node sending flow control"
    );
    // Writes sent now wait for the pause to end wherever they go, but are routed at
    // once, while node2 still asks for it: all to node1.
    let node2_writes = replicated(node2);
    let writes = start_writes(&sluice, 8);
    assert!(
        wait_until(WAIT, || writes_running(&cluster) == 8),
        "the inserts never reached a node: {} running",
        writes_running(&cluster)
    );

    // Released: the queue drains, writes go on, and with the writes stopped every
    // figure returns to zero.
    let before = writer.done();
    match lock.query("UNLOCK TABLES") {
        Ok(Reply::Ok { .. }) => {}
        other => panic!("UNLOCK TABLES: {other:?}"),
    }
    assert!(
        wait_until(WAIT, || writer.done() > before + 10),
        "writes never resumed: {} then {}",
        before,
        writer.done()
    );
    join(writes);
    assert_eq!(
        replicated(node2),
        node2_writes,
        "writes went to the node sending flow control"
    );
    writer.finish();
    let quiet = |f: &Value| {
        f["sent"] == 0
            && f["received"] == 0
            && f["requested"] == false
            && f["recv_queue"] == 0
            && number(&f["paused_share"]) == 0.0
    };
    assert!(
        wait_until(WAIT, || {
            let (f1, f2) = flows(&sluice, &config);
            quiet(&f1) && quiet(&f2)
        }),
        "{}",
        admin_get(&sluice, &config, "/v1/servers")
    );
}
