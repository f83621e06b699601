//! What the zones scenario starts: the replica set (once, loaded with the sysbench
//! tables), and for each run its links and, but for direct runs, its Sluice. Also the
//! machine's CPU clock, read from `/proc/stat`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use sluice_sandbox::link::{DelayLink, LinkStats};
use sluice_sandbox::{self as sandbox, MariaDb, ReplicaSet, ReplicaSetOptions};

use super::{Bench, Mode, Placement, Plan, HOME, SERVERS};
use crate::routing::{admin_token, endpoint, last_line, wait_for_routing, AdminApi, DATABASE};
use crate::sysbench::{DataSet, SysbenchCommand};
use crate::topology::{toml_string, SluiceProcess, MAX_PREPARED_STMT_COUNT};

/// The primary and its replicas, in [`SERVERS`] order. Dropping it stops them.
pub(super) struct Servers {
    set: ReplicaSet,
}

impl Servers {
    pub(super) fn start(plan: &Plan) -> anyhow::Result<Servers> {
        let set = ReplicaSet::start(ReplicaSetOptions {
            replicas: SERVERS.len() - 1,
            semi_sync: false,
            max_connections: plan.max_connections,
            // sysbench prepares up to 9 statements per table in every thread, and
            // Sluice keeps them on each backend connection.
            extra_args: vec![format!(
                "--max-prepared-stmt-count={MAX_PREPARED_STMT_COUNT}"
            )],
        })
        .context("starting the sandbox replica set")?;
        Ok(Servers { set })
    }

    pub(super) fn databases(&self) -> Vec<&MariaDb> {
        self.set.servers().collect()
    }

    pub(super) fn version(&self) -> Option<String> {
        last_line(&self.set.primary.execute("SELECT VERSION()").ok()?)
    }

    /// Creates the sysbench tables on the primary, straight (the links are for the
    /// measured traffic), and waits until every replica has them; the command it ran.
    pub(super) fn prepare(
        &self,
        sysbench: &Path,
        data: DataSet,
        out: &Path,
    ) -> anyhow::Result<String> {
        self.set
            .primary
            .execute(&format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"))
            .context("creating the sysbench database on the primary")?;
        let threads = data
            .tables
            .min(std::thread::available_parallelism().map_or(1, |n| n.get()) as u32);
        let prepare =
            SysbenchCommand::prepare(sysbench, &endpoint(self.set.primary.addr()), data, threads);
        prepare.execute_checked(
            "preparing the data on the primary (sysbench prepare)",
            &out.join("raw/prepare.txt"),
            Duration::from_secs(3600),
        )?;
        self.set
            .wait_caught_up(Duration::from_secs(600))
            .context("waiting for the replicas to apply the sysbench tables")?;
        Ok(prepare.display())
    }
}

/// What one run reaches the servers through. Dropping it stops Sluice, then closes
/// the links.
pub(super) struct Deployment {
    sluice: Option<SluiceProcess>,
    admin: Option<AdminApi>,
    /// The servers' links, then the client's.
    links: Vec<DelayLink>,
    /// Where sysbench connects.
    entry: SocketAddr,
    /// What Sluice's monitor made of each server, in [`SERVERS`] order.
    pub(super) roles: Vec<String>,
    /// How Sluice was started.
    pub(super) command: Option<String>,
}

impl Deployment {
    /// sysbench straight at the primary, through a link from zone a to the primary's.
    pub(super) fn direct(plan: &Plan, servers: &Servers) -> anyhow::Result<Deployment> {
        let link = DelayLink::start(servers.set.primary.addr(), plan.link(SERVERS[0].1))
            .context("starting the link to the primary")?;
        Ok(Deployment {
            sluice: None,
            admin: None,
            entry: link.addr(),
            links: vec![link],
            roles: Vec::new(),
            command: None,
        })
    }

    /// A link from zone a to every server, Sluice in front of them (configured for
    /// `mode`, written to `config`), and with the client hop a link in front of Sluice;
    /// back once Sluice's monitor has seen the primary as the writer and every replica
    /// as a reader.
    pub(super) fn sluice(
        bench: &Bench,
        servers: &Servers,
        (mode, placement): (Mode, Placement),
        config: &Path,
        log: &Path,
    ) -> anyhow::Result<Deployment> {
        let plan = bench.plan;
        let mut links = Vec::new();
        for (db, (name, zone)) in servers.databases().iter().zip(SERVERS) {
            links.push(
                DelayLink::start(db.addr(), plan.link(zone))
                    .with_context(|| format!("starting the link to {name}"))?,
            );
        }
        let port = sandbox::free_port();
        let admin_port = sandbox::free_port();
        let token = admin_token("zones");
        let addresses: Vec<SocketAddr> = links.iter().map(DelayLink::addr).collect();
        let text = sluice_config(
            mode,
            &addresses,
            (port, admin_port),
            &token,
            plan.backend_connections,
        );
        std::fs::write(config, text).with_context(|| format!("writing {}", config.display()))?;
        let sluice = SluiceProcess::start(&bench.sluice_bin, config, port, log)?;
        let command = Some(sluice.command.clone());
        let admin = AdminApi::new(format!("127.0.0.1:{admin_port}"), token);
        // From here on, an error stops what was started as `deployment` drops.
        let mut deployment = Deployment {
            sluice: Some(sluice),
            admin: None,
            entry: SocketAddr::from(([127, 0, 0, 1], port)),
            links,
            roles: Vec::new(),
            command,
        };
        deployment.roles = wait_for_routing(&admin, &super::names())?;
        deployment.admin = Some(admin);
        if placement == Placement::ClientHop {
            let link = DelayLink::start(deployment.entry, plan.link(HOME))
                .context("starting the client's link")?;
            deployment.entry = link.addr();
            deployment.links.push(link);
        }
        Ok(deployment)
    }

    pub(super) fn entry(&self) -> SocketAddr {
        self.entry
    }

    pub(super) fn admin(&self) -> Option<&AdminApi> {
        self.admin.as_ref()
    }

    pub(super) fn link_stats(&self) -> Vec<LinkStats> {
        self.links.iter().map(DelayLink::stats).collect()
    }

    /// Whether Sluice, if there is one, still runs; the error says how it ended.
    pub(super) fn check(&mut self) -> Result<(), String> {
        match &mut self.sluice {
            Some(s) => s.check(),
            None => Ok(()),
        }
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        if let Some(sluice) = self.sluice.take() {
            sluice.stop();
        }
    }
}

/// The Sluice configuration of one mode: every server at its link's address with its
/// zone, the monitor finding the writer, and the admin API the counters are read from.
/// `primary` turns the split off; `nearest` gives Sluice zone a; `spread` gives no zone.
fn sluice_config(
    mode: Mode,
    addresses: &[SocketAddr],
    (port, admin_port): (u16, u16),
    token: &str,
    backend_connections: u32,
) -> String {
    let mut text = format!(
        "# Written by `sluice bench zones` for its {} runs.\n\
         [log]\nlevel = \"warn\"\n\n\
         [[listeners]]\naddress = \"127.0.0.1:{port}\"\n\n\
         [[users]]\nname = {}\npassword = {}\n",
        mode.name(),
        toml_string(sandbox::ADMIN_USER),
        toml_string(sandbox::ADMIN_PASSWORD),
    );
    for ((name, zone), address) in SERVERS.iter().zip(addresses) {
        let _ = write!(
            text,
            "\n[[servers]]\nname = {}\naddress = \"{address}\"\nzone = {}\n",
            toml_string(name),
            toml_string(zone)
        );
    }
    let _ = write!(
        text,
        "\n[pool]\nmax_connections = {backend_connections}\nmultiplex = true\n\n\
         [routing]\nread_write_split = {}\n",
        mode != Mode::Primary
    );
    if mode == Mode::Nearest {
        let _ = writeln!(text, "zone = {}", toml_string(HOME));
    }
    let _ = write!(
        text,
        "\n[monitor]\ninterval = \"500ms\"\n\n\
         [admin]\naddress = \"127.0.0.1:{admin_port}\"\ntoken = {}\n",
        toml_string(token)
    );
    text
}

/// The machine's CPU time so far, all CPUs, in clock ticks: busy and in all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CpuTimes {
    busy: u64,
    total: u64,
}

impl CpuTimes {
    pub(super) fn read() -> Option<CpuTimes> {
        parse_cpu_line(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of the CPU time between two readings that was busy.
    pub(super) fn busy_share(before: Option<CpuTimes>, after: Option<CpuTimes>) -> Option<f64> {
        let (b, a) = (before?, after?);
        let total = a.total.checked_sub(b.total).filter(|t| *t > 0)?;
        Some(a.busy.saturating_sub(b.busy) as f64 / total as f64)
    }
}

/// The first line of `/proc/stat`: `cpu user nice system idle iowait irq softirq steal
/// ...`; idle and iowait are the time not busy. Guest time is already in user.
fn parse_cpu_line(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 5 {
        return None;
    }
    let total: u64 = fields.iter().sum();
    Some(CpuTimes {
        busy: total - fields[3] - fields[4],
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_configures_its_routing() {
        let addresses: Vec<SocketAddr> = (0..4)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 4000 + i)))
            .collect();
        let config = |mode| -> toml::Table {
            // Plain TOML: this crate does not depend on the proxy. The integration test
            // of `sluice bench zones` has Sluice check the files the benchmark wrote.
            sluice_config(mode, &addresses, (6033, 6080), "t0ken", 64)
                .parse()
                .unwrap()
        };
        let nearest = config(Mode::Nearest);
        let servers = nearest["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 4);
        assert_eq!(servers[1]["name"].as_str(), Some("replica1"));
        assert_eq!(servers[1]["zone"].as_str(), Some("a"));
        assert_eq!(servers[1]["address"].as_str(), Some("127.0.0.1:4001"));
        assert_eq!(servers[0]["zone"].as_str(), Some("b"));
        assert_eq!(nearest["routing"]["zone"].as_str(), Some("a"));
        assert_eq!(nearest["routing"]["read_write_split"].as_bool(), Some(true));
        assert_eq!(nearest["admin"]["token"].as_str(), Some("t0ken"));
        let spread = config(Mode::Spread);
        assert!(spread["routing"].get("zone").is_none());
        assert_eq!(spread["routing"]["read_write_split"].as_bool(), Some(true));
        let primary = config(Mode::Primary);
        assert_eq!(
            primary["routing"]["read_write_split"].as_bool(),
            Some(false)
        );
        assert_eq!(primary["pool"]["max_connections"].as_integer(), Some(64));
    }

    #[test]
    fn cpu_time_comes_from_proc_stat() {
        let before = parse_cpu_line("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5\n").unwrap();
        assert_eq!(
            before,
            CpuTimes {
                busy: 150,
                total: 1000
            }
        );
        let after = parse_cpu_line("cpu  220 0 80 850 100 0 0 0 0 0\n").unwrap();
        assert_eq!(CpuTimes::busy_share(Some(before), Some(after)), Some(0.6));
        assert_eq!(CpuTimes::busy_share(None, Some(after)), None);
        assert_eq!(parse_cpu_line("intr 1 2 3"), None);
        assert!(CpuTimes::read().is_some());
    }
}
