//! The embedded database: one MariaDB, or a primary with replicas replicating from it
//! (`--replicas`), whose reads every Sluice of the run then splits.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use sluice_sandbox::{MariaDb, MariaDbOptions, ReplicaSet, ReplicaSetOptions};

/// How long the replicas may take to catch up with the primary after the data is made.
const CATCH_UP: Duration = Duration::from_secs(300);

pub enum Servers {
    One(MariaDb),
    Set(ReplicaSet),
}

impl Servers {
    /// Starts one server, or a primary and `replicas` replicas, each with `options`'
    /// connection limit and extra arguments.
    pub fn start(options: MariaDbOptions, replicas: usize) -> anyhow::Result<Servers> {
        if replicas == 0 {
            let one = MariaDb::start(options).context("starting the embedded MariaDB (sandbox)")?;
            return Ok(Servers::One(one));
        }
        let set = ReplicaSet::start(ReplicaSetOptions {
            replicas,
            max_connections: options.max_connections,
            extra_args: options.extra_args,
            ..ReplicaSetOptions::default()
        })
        .context("starting the embedded MariaDB primary and its replicas (sandbox)")?;
        Ok(Servers::Set(set))
    }

    /// The server writes go to: the only one, or the primary.
    pub fn primary(&self) -> &MariaDb {
        match self {
            Servers::One(db) => db,
            Servers::Set(set) => &set.primary,
        }
    }

    pub fn replica_addrs(&self) -> Vec<SocketAddr> {
        match self {
            Servers::One(_) => Vec::new(),
            Servers::Set(set) => set.replicas.iter().map(MariaDb::addr).collect(),
        }
    }

    /// Returns once every replica has applied what the primary logged so far.
    pub fn wait_replicas(&self) -> anyhow::Result<()> {
        match self {
            Servers::One(_) => Ok(()),
            Servers::Set(set) => set
                .wait_caught_up(CATCH_UP)
                .context("waiting for the replicas to catch up with the primary"),
        }
    }

    /// Each server's name as the Sluices know it with its `Com_select` count (`None`:
    /// unreadable), with replicas only: where the reads went.
    pub fn reads(&self) -> Vec<(String, Option<u64>)> {
        let Servers::Set(set) = self else {
            return Vec::new();
        };
        let count = |db: &MariaDb| {
            db.global_status("Com_select")
                .ok()
                .and_then(|v| v.trim().parse().ok())
        };
        let replicas = set.replicas.iter().enumerate();
        std::iter::once(("bench".to_owned(), count(&set.primary)))
            .chain(replicas.map(|(i, r)| (format!("replica{}", i + 1), count(r))))
            .collect()
    }

    /// How the servers read in the report's description.
    pub fn describe(&self) -> String {
        match self {
            Servers::One(db) => format!("embedded sandbox at {}", db.addr()),
            Servers::Set(set) => format!(
                "embedded sandbox primary at {} with {} replica(s) ({}), GTID replication",
                set.primary.addr(),
                set.replicas.len(),
                (set.replicas.iter())
                    .map(|r| r.addr().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    pub fn stop(self) {
        match self {
            Servers::One(db) => db.stop(),
            // Each server stops when the set is dropped.
            Servers::Set(set) => drop(set),
        }
    }
}
