//! The servers of one topology of `sluice bench galera`, their status counters, and the
//! Sluice child in front of them with the admin API it is read through.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use sluice_sandbox::{self as sandbox, GaleraCluster, MariaDb, MariaDbOptions};

use super::{Bench, READY_TIMEOUT, SYNC_TIMEOUT};
use crate::routing::{server_entry, servers_json, AdminApi};
use crate::topology::{toml_string, SluiceProcess};

/// The servers of one topology. Dropping it stops them.
pub(super) enum Servers {
    Plain(Box<MariaDb>),
    Galera(GaleraCluster),
}

impl Servers {
    pub(super) fn start(nodes: usize) -> anyhow::Result<Servers> {
        Ok(match nodes {
            0 => Servers::Plain(Box::new(
                MariaDb::start(MariaDbOptions::default())
                    .context("starting the sandbox MariaDB")?,
            )),
            n => Servers::Galera(
                GaleraCluster::start(n)
                    .with_context(|| format!("starting a {n}-node Galera cluster"))?,
            ),
        })
    }

    pub(super) fn nodes(&self) -> Vec<&MariaDb> {
        match self {
            Servers::Plain(db) => vec![&**db],
            Servers::Galera(cluster) => cluster.nodes.iter().collect(),
        }
    }

    /// Waits until a cluster has applied everything (a no-op for the plain server), so
    /// that one run's backlog does not slow the next.
    pub(super) fn settle(&self) -> anyhow::Result<()> {
        match self {
            Servers::Plain(_) => Ok(()),
            Servers::Galera(cluster) => cluster.wait_synced(SYNC_TIMEOUT),
        }
    }
}

/// The server's status counters this benchmark reads, by lower-case name.
pub(super) struct NodeStatus(HashMap<String, u64>);

/// Read together in one query: with a client process per query, fewer is better.
const STATUS_NAMES: &[&str] = &[
    "com_insert",
    "wsrep_replicated",
    "wsrep_flow_control_paused_ns",
    "wsrep_flow_control_sent",
    "wsrep_flow_control_recv",
    "wsrep_local_recv_queue",
    "wsrep_local_state",
    "wsrep_flow_control_requested",
];

impl NodeStatus {
    pub(super) fn read(node: &MariaDb) -> anyhow::Result<NodeStatus> {
        let names: Vec<String> = STATUS_NAMES.iter().map(|n| format!("'{n}'")).collect();
        let out = node.execute(&format!(
            "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE LOWER(VARIABLE_NAME) IN ({})",
            names.join(",")
        ))?;
        Ok(NodeStatus(parse_status(&out)))
    }

    pub(super) fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }
}

/// `name<TAB>value` lines of batch output (the header and non-numbers skipped). A flag
/// counts as a number: `wsrep_flow_control_requested` says "true" or "false" (Galera
/// 26.4), other flags ON or OFF.
pub(crate) fn parse_status(out: &str) -> HashMap<String, u64> {
    out.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once('\t')?;
            let value = value.trim();
            let number = match value.to_ascii_lowercase().as_str() {
                "true" | "on" => 1,
                "false" | "off" => 0,
                _ => value.parse().ok()?,
            };
            Some((name.trim().to_string(), number))
        })
        .collect()
}

pub(super) fn read_all(nodes: &[&MariaDb]) -> Vec<Option<NodeStatus>> {
    nodes.iter().map(|n| NodeStatus::read(n).ok()).collect()
}

pub(super) fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// A Sluice child in front of `nodes` and the admin API it is read through. Dropping it
/// stops the process.
pub(super) struct Proxy {
    pub(super) process: SluiceProcess,
    port: u16,
    admin: AdminApi,
}

impl Proxy {
    /// Writes the configuration to `config`, starts Sluice and waits until its monitor
    /// sees every node up and has elected a writer.
    pub(super) fn start(
        bench: &Bench,
        nodes: &[&MariaDb],
        galera_writers: &str,
        config: &Path,
    ) -> anyhow::Result<Proxy> {
        let port = sandbox::free_port();
        let admin_port = sandbox::free_port();
        let token = format!(
            "bench-galera-{:x}{:x}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let addresses: Vec<SocketAddr> = nodes.iter().map(|n| n.addr()).collect();
        let text = sluice_config(
            &addresses,
            galera_writers,
            (port, admin_port),
            &token,
            bench.args.backend_connections,
        );
        std::fs::write(config, text).with_context(|| format!("writing {}", config.display()))?;
        let log = config.with_extension("log");
        let process = SluiceProcess::start(&bench.sluice_bin, config, port, &log)?;
        let proxy = Proxy {
            process,
            port,
            admin: AdminApi::new(format!("127.0.0.1:{admin_port}"), token),
        };
        proxy.wait_ready(nodes.len())?;
        Ok(proxy)
    }

    fn wait_ready(&self, nodes: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let last = servers_json(&self.admin);
            if let Ok(json) = &last {
                let up = (1..=nodes)
                    .filter(|i| {
                        server_entry(json, &format!("node{i}")).is_some_and(|s| s["health"] == "up")
                    })
                    .count();
                // A lone server is never monitored: it is the writer from the start.
                if (up == nodes || nodes == 1) && !json["writer"].is_null() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                let said = match last {
                    Ok(json) => json.to_string(),
                    Err(e) => format!("{e:#}"),
                };
                bail!(
                    "Sluice did not see every node up with a writer within \
                     {READY_TIMEOUT:?}; /v1/servers said: {said}"
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub(super) fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The node Sluice's monitor elected writer, if any.
    pub(super) fn writer(&self) -> Option<String> {
        let json = servers_json(&self.admin).ok()?;
        json["writer"].as_str().map(String::from)
    }
}

/// The Sluice configuration: every node, named node1, node2..., writes spread as
/// `galera_writers` says.
pub(super) fn sluice_config(
    addresses: &[SocketAddr],
    galera_writers: &str,
    (port, admin_port): (u16, u16),
    token: &str,
    backend_connections: u32,
) -> String {
    let mut text = format!(
        "# Written by `sluice bench galera`.\n\
         [log]\nlevel = \"warn\"\n\n\
         [[listeners]]\naddress = \"127.0.0.1:{port}\"\n\n\
         [[users]]\nname = {}\npassword = {}\n",
        toml_string(sandbox::ADMIN_USER),
        toml_string(sandbox::ADMIN_PASSWORD),
    );
    for (i, address) in addresses.iter().enumerate() {
        let _ = write!(
            text,
            "\n[[servers]]\nname = \"node{}\"\naddress = \"{address}\"\n",
            i + 1
        );
    }
    // Out of any fleet: the rows check counts every INSERT the nodes executed
    // (`Com_insert`), and a fleet member's own registration would be one.
    let _ = write!(
        text,
        "\n[pool]\nmax_connections = {backend_connections}\nmultiplex = true\n\n\
         [routing]\ngalera_writers = {}\n\n\
         [monitor]\ninterval = \"500ms\"\n\n\
         [fleet]\nenabled = false\n\n\
         [admin]\naddress = \"127.0.0.1:{admin_port}\"\ntoken = {}\n",
        toml_string(galera_writers),
        toml_string(token)
    );
    text
}
