//! `sluice bench failover --instances N`: several Sluice instances (a fleet) in front of
//! the same replica set, as operators run them behind a balancer. This starts them
//! (same configuration but their addresses), spreads the clients over them, SIGKILLs the
//! first one with the primary when asked, and reads afterwards what the fleet did:
//! promotions by instance, servers left writable, the writer each instance routes to.
//! With one instance none of this is read and the report is the single-instance one.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;
use sluice_sandbox::{self as sandbox, MariaDb, ReplicaSet};

use super::tally::{ErrorText, Replays};
use super::{sluice_config, Bench, Results, Run, NAMES, POLL};
use crate::routing::{admin_token, servers_json, wait_for_routing, AdminApi};
use crate::topology::SluiceProcess;

/// How long the instances get to see each other in `/v1/fleet` after they start.
const FLEET_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The readings after a run count as settled when unchanged this long: four checks of
/// the monitor at its default interval, and the others follow a new writer within one.
const SETTLED_FOR: Duration = Duration::from_secs(2);
/// How long the readings get to settle before they are taken as they are.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// What a run with several instances adds to the single-instance figures.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub(super) struct FleetRun {
    /// Each instance's `stats.failovers` after the run (the promotions it performed),
    /// first instance first; `None` for one killed or not answering.
    pub failovers: Vec<Option<u64>>,
    /// Their sum; `None` when no instance answered.
    pub promotions: Option<u64>,
    /// The writer each instance routes writes to at the end (`writer` of its
    /// `/v1/servers`); `None` for one killed or not answering.
    pub writers: Vec<Option<String>>,
    /// Whether the readings stayed the same for [`SETTLED_FOR`] before
    /// [`SETTLE_TIMEOUT`]; `false`: they are the last ones taken.
    pub settled: bool,
    /// The servers still running that answer `@@read_only = 0`.
    pub writable: Vec<String>,
    /// The instance SIGKILLed with the primary (1-based), with --kill-instance.
    pub killed_instance: Option<u32>,
    /// The errors that instance's clients got (its sysbench's and its probes'): not
    /// counted among the run's client errors.
    pub killed_instance_errors: Option<u64>,
    /// Their texts.
    pub killed_instance_texts: Vec<ErrorText>,
    /// Each instance's sysbench command line, first instance first.
    pub sysbench_commands: Vec<String>,
}

impl FleetRun {
    /// What the readings after the run say (every instance's `/v1/servers`, `None` for
    /// one killed or not answering), and the `writable` servers.
    pub(super) fn record(
        &mut self,
        readings: &[Option<Value>],
        settled: bool,
        writable: Vec<String>,
    ) {
        self.failovers = readings
            .iter()
            .map(|r| r.as_ref().and_then(|j| j["stats"]["failovers"].as_u64()))
            .collect();
        let answered: Vec<u64> = self.failovers.iter().flatten().copied().collect();
        self.promotions = (!answered.is_empty()).then(|| answered.iter().sum());
        self.writers = readings
            .iter()
            .map(|r| {
                r.as_ref()
                    .and_then(|j| j["writer"].as_str().map(String::from))
            })
            .collect();
        self.settled = settled;
        self.writable = writable;
    }

    /// The instances (1-based) that promoted a replica.
    pub(super) fn promoted_by(&self) -> Vec<u32> {
        (1..)
            .zip(&self.failovers)
            .filter(|(_, n)| n.is_some_and(|n| n > 0))
            .map(|(i, _)| i)
            .collect()
    }

    /// Whether every instance still running routes writes to the same writer; `None`
    /// when none answered.
    pub(super) fn same_writer(&self) -> Option<bool> {
        let mut answered = self
            .writers
            .iter()
            .zip(&self.failovers)
            .filter(|(_, f)| f.is_some())
            .map(|(w, _)| w);
        let first = answered.next()?;
        Some(first.is_some() && answered.all(|w| w == first))
    }

    /// What the target asks of a fleet: one promotion, one writable server, one writer
    /// for all.
    pub(super) fn holds(&self) -> bool {
        self.promotions == Some(1) && self.writable.len() == 1 && self.same_writer() == Some(true)
    }

    /// "1 (instance 2)", "2 (instances 1, 3)", "0".
    pub(super) fn promotions_cell(&self) -> String {
        let Some(n) = self.promotions else {
            return "-".into();
        };
        let by: Vec<String> = self.promoted_by().iter().map(u32::to_string).collect();
        match by.len() {
            0 => n.to_string(),
            1 => format!("{n} (instance {})", by[0]),
            _ => format!("{n} (instances {})", by.join(", ")),
        }
    }

    /// "replica1" when all agree, else each instance's: "1: replica1, 2: replica2".
    pub(super) fn writers_cell(&self) -> String {
        if self.same_writer() == Some(true) {
            if let Some(Some(w)) = self.writers.iter().find(|w| w.is_some()) {
                return w.clone();
            }
        }
        let each: Vec<String> = (1..)
            .zip(&self.writers)
            .zip(&self.failovers)
            .map(|((i, w), f)| match (w, f) {
                (_, None) => format!("{i}: -"),
                (Some(w), _) => format!("{i}: {w}"),
                (None, _) => format!("{i}: none"),
            })
            .collect();
        each.join(", ")
    }
}

/// The fleet's figures over all runs.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub(super) struct FleetSummary {
    pub instances: u32,
    /// Runs measured with exactly one promotion in all.
    pub one_promotion: usize,
    /// Runs measured with one writable server at the end.
    pub one_writable: usize,
    /// Runs measured in which every instance still running named the same writer.
    pub same_writer: usize,
    /// Promotions over all runs.
    pub promotions: u64,
    /// Errors of the killed instance's clients, over all runs (excepted).
    pub killed_instance_errors: u64,
}

impl FleetSummary {
    pub(super) fn of(instances: u32, runs: &[Run]) -> FleetSummary {
        let fleets: Vec<&FleetRun> = runs
            .iter()
            .filter(|r| r.passed.is_some())
            .filter_map(|r| r.fleet.as_ref())
            .collect();
        FleetSummary {
            instances,
            one_promotion: fleets.iter().filter(|f| f.promotions == Some(1)).count(),
            one_writable: fleets.iter().filter(|f| f.writable.len() == 1).count(),
            same_writer: fleets
                .iter()
                .filter(|f| f.same_writer() == Some(true))
                .count(),
            promotions: runs
                .iter()
                .filter_map(|r| r.fleet.as_ref()?.promotions)
                .sum(),
            killed_instance_errors: runs
                .iter()
                .filter_map(|r| r.fleet.as_ref()?.killed_instance_errors)
                .sum(),
        }
    }
}

/// Clients spread over `instances`: `threads` shared out, the first ones taking what
/// does not divide evenly, at least one each.
pub(super) fn thread_shares(threads: u32, instances: u32) -> Vec<u32> {
    let (each, rest) = (threads / instances, threads % instances);
    (0..instances)
        .map(|i| (each + u32::from(i < rest)).max(1))
        .collect()
}

/// A run's file for instance `number` (1-based) of `instances`: `base` itself with one
/// instance, so that a single-instance run's files keep their names.
pub(super) fn instance_file(base: &str, number: u32, instances: u32) -> String {
    if instances == 1 {
        return base.to_string();
    }
    match base.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}-{number}.{ext}"),
        None => format!("{base}-{number}"),
    }
}

/// `SELECT @@read_only` as the mariadb CLI prints it in batch mode: a header, then 0
/// or 1.
pub(super) fn parse_read_only(batch: &str) -> Option<bool> {
    match batch.lines().nth(1)?.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// One Sluice instance of a run.
pub(super) struct Instance {
    /// `None` once killed.
    process: Option<SluiceProcess>,
    pub admin: AdminApi,
    pub addr: SocketAddr,
}

/// The Sluice instances of a run, the first one first. They stop when this drops.
pub(super) struct Instances {
    pub list: Vec<Instance>,
}

impl Instances {
    /// The instances still running (not killed by the benchmark).
    pub(super) fn survivors(&self) -> impl Iterator<Item = &Instance> {
        self.list.iter().filter(|i| i.process.is_some())
    }

    /// SIGKILLs the first instance, as a crash of its host would end it.
    pub(super) fn kill_first(&mut self) -> anyhow::Result<()> {
        let first = self.list.first_mut().context("no instance to kill")?;
        if let Some(p) = first.process.take() {
            p.kill().context("killing the first Sluice instance")?;
        }
        Ok(())
    }

    /// An error naming the first instance that exited by itself.
    pub(super) fn check(&mut self) -> anyhow::Result<()> {
        let several = self.list.len() > 1;
        for (number, instance) in (1..).zip(&mut self.list) {
            if let Some(p) = &mut instance.process {
                match p.check() {
                    Err(ended) if several => bail!("Sluice instance {number}: {ended}"),
                    Err(ended) => bail!("{ended}"),
                    Ok(()) => {}
                }
            }
        }
        Ok(())
    }

    pub(super) fn stop(self) {
        for instance in self.list {
            if let Some(p) = instance.process {
                p.stop();
            }
        }
    }
}

impl Bench<'_> {
    /// --instances Sluice processes in front of `set`, routing and, with more than
    /// one, seeing each other. Those started stop if a later one fails.
    pub(super) fn start_instances(
        &self,
        set: &ReplicaSet,
        run: &Run,
        results: &mut Results,
    ) -> anyhow::Result<Instances> {
        let n = self.plan.instances;
        let token = admin_token("failover");
        let addresses: Vec<SocketAddr> = set.servers().map(MariaDb::addr).collect();
        let mut instances = Instances { list: Vec::new() };
        for number in 1..=n {
            let (port, admin_port) = (sandbox::free_port(), sandbox::free_port());
            let config = self.out.join(instance_file(&run.sluice_config, number, n));
            let text = sluice_config(
                &addresses,
                port,
                admin_port,
                &token,
                self.plan.wrap_autocommit_writes,
            );
            std::fs::write(&config, text)
                .with_context(|| format!("writing {}", config.display()))?;
            let log = self.out.join(instance_file(&run.sluice_log, number, n));
            let sluice = SluiceProcess::start(&self.sluice_bin, &config, port, &log)?;
            if number == 1 {
                results.sluice_command = Some(sluice.command.clone());
            }
            instances.list.push(Instance {
                process: Some(sluice),
                admin: AdminApi::new(format!("127.0.0.1:{admin_port}"), token.clone()),
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
            });
        }
        for instance in &instances.list {
            wait_for_routing(&instance.admin, &NAMES)?;
            if n > 1 {
                wait_for_fleet(&instance.admin, n)?;
            }
        }
        Ok(instances)
    }
}

/// Waits (at most [`FLEET_READY_TIMEOUT`]) until the instance's `/v1/fleet` lists
/// `instances` live members: the fleet has formed before the primary is killed.
fn wait_for_fleet(admin: &AdminApi, instances: u32) -> anyhow::Result<()> {
    let deadline = Instant::now() + FLEET_READY_TIMEOUT;
    loop {
        let last = admin.get_json("/v1/fleet");
        if let Ok(json) = &last {
            let live = json["members"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
            if live == instances as usize {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            let last = match last {
                Ok(json) => json.to_string(),
                Err(e) => format!("{e:#}"),
            };
            bail!(
                "the {instances} Sluice instances did not all see each other within \
                 {FLEET_READY_TIMEOUT:?}; /v1/fleet said: {last}"
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Waits (at most `timeout`) until one of `admins` names a writer other than the
/// primary; that writer, and when it was first seen.
pub(super) fn wait_for_failover(
    admins: &[&AdminApi],
    timeout: Duration,
) -> anyhow::Result<(String, Instant)> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut said = Vec::new();
        for admin in admins {
            let last = servers_json(admin);
            if let Ok(json) = &last {
                if let Some(writer) = json["writer"].as_str().filter(|w| *w != NAMES[0]) {
                    return Ok((writer.to_string(), Instant::now()));
                }
            }
            said.push(match last {
                Ok(json) => json.to_string(),
                Err(e) => format!("{e:#}"),
            });
        }
        if Instant::now() >= deadline {
            bail!(
                "no failover: Sluice named no writer other than the primary within \
                 {timeout:?} of the kill; /v1/servers said: {}",
                said.join("; ")
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Every instance's `/v1/servers` after the run, first instance first (`None`: killed
/// or not answering): once with one instance; with several, once the promotions and
/// writers have stayed the same for [`SETTLED_FOR`] (at most [`SETTLE_TIMEOUT`]), and
/// whether they did.
pub(super) fn read_after(instances: &Instances) -> (Vec<Option<Value>>, bool) {
    let read = || -> Vec<Option<Value>> {
        instances
            .list
            .iter()
            .map(|i| i.process.as_ref().and_then(|_| servers_json(&i.admin).ok()))
            .collect()
    };
    let key = |readings: &[Option<Value>]| -> Vec<(Option<u64>, Option<String>)> {
        readings
            .iter()
            .map(|r| {
                let r = r.as_ref();
                (
                    r.and_then(|j| j["stats"]["failovers"].as_u64()),
                    r.and_then(|j| j["writer"].as_str().map(String::from)),
                )
            })
            .collect()
    };
    let mut readings = read();
    if instances.list.len() == 1 {
        return (readings, true);
    }
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let mut since = Instant::now();
    loop {
        if since.elapsed() >= SETTLED_FOR {
            return (readings, true);
        }
        if Instant::now() >= deadline {
            return (readings, false);
        }
        std::thread::sleep(POLL);
        let next = read();
        if key(&next) != key(&readings) {
            since = Instant::now();
        }
        readings = next;
    }
}

/// The replays over every instance that answered.
pub(super) fn replays_of(readings: &[Option<Value>]) -> Replays {
    let mut all = Replays::default();
    for json in readings.iter().flatten() {
        all.add(&Replays::from_servers(json));
    }
    all
}

/// What the failover took as the instance that performed it says; with one instance,
/// its own figure, as before.
pub(super) fn failover_took_ms(readings: &[Option<Value>]) -> Option<u64> {
    let took = |j: &Value| j["last_failover"]["took_ms"].as_u64();
    if let [Some(only)] = readings {
        return took(only);
    }
    readings
        .iter()
        .flatten()
        .filter(|j| j["stats"]["failovers"].as_u64().is_some_and(|n| n > 0))
        .filter_map(took)
        .max()
}

/// The names of the servers still running that are writable (`@@read_only = 0`): the
/// primary was killed, so that is every replica a promotion left writable.
pub(super) fn writable_servers(set: &ReplicaSet) -> anyhow::Result<Vec<String>> {
    let mut writable = Vec::new();
    for (name, server) in NAMES.iter().zip(set.servers()).skip(1) {
        let batch = server
            .execute("SELECT @@read_only")
            .with_context(|| format!("asking {name} whether it is read-only"))?;
        match parse_read_only(&batch) {
            Some(false) => writable.push(name.to_string()),
            Some(true) => {}
            None => bail!("{name} answered SELECT @@read_only with {batch:?}"),
        }
    }
    Ok(writable)
}
