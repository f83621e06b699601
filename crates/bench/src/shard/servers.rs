//! The instances of one topology of `sluice bench shard`: started together, each loaded
//! with its range of every sysbench table, their placement and counters read; and the
//! Sluice child that shows them as one database.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};
use serde::Serialize;
use sluice_sandbox::{self as sandbox, MariaDb, MariaDbOptions};

use super::{endpoint, id_range, Bench, InstanceLoad, Plan, DATABASE};
use crate::galera::parse_status;
use crate::routing::last_line;
use crate::sysbench::{DataSet, Endpoint};
use crate::topology::{toml_string, SluiceProcess, MAX_PREPARED_STMT_COUNT};

/// The servers of one topology, `db1`, `db2`... in order. Dropping it stops them.
pub(super) struct Instances {
    servers: Vec<MariaDb>,
}

/// The counters read around each run, in one query per instance.
const STATUS_NAMES: &[&str] = &[
    "com_stmt_execute",
    "com_select",
    "innodb_buffer_pool_reads",
    "innodb_buffer_pool_read_requests",
    "innodb_buffer_pool_pages_data",
    "innodb_buffer_pool_pages_total",
];

/// One instance's counters by lower-case name; `None` where the read failed.
pub(super) type Counters = Option<HashMap<String, u64>>;

impl Instances {
    /// Starts `n` sandbox servers at once, each with the plan's buffer pool.
    pub(super) fn start(n: usize, plan: &Plan) -> anyhow::Result<Instances> {
        let options = MariaDbOptions {
            max_connections: plan.max_connections(),
            extra_args: vec![
                format!("--innodb-buffer-pool-size={}M", plan.buffer_pool_mib),
                // Sluice keeps sysbench's statements prepared on each backend connection.
                format!("--max-prepared-stmt-count={MAX_PREPARED_STMT_COUNT}"),
                // Nothing here replicates or tails the binlog; loading skips writing it.
                "--skip-log-bin".into(),
                // A cold start each time: no buffer pool carried over from a dump.
                "--innodb-buffer-pool-load-at-startup=OFF".into(),
            ],
            ..MariaDbOptions::default()
        };
        let started: Vec<anyhow::Result<MariaDb>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .map(|_| scope.spawn(|| MariaDb::start(options.clone())))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("starting a server does not panic"))
                .collect()
        });
        let mut servers = Vec::with_capacity(n);
        for (i, server) in started.into_iter().enumerate() {
            // The ones that did start are stopped when `servers` drops.
            servers.push(server.with_context(|| format!("starting sandbox instance db{}", i + 1))?);
        }
        Ok(Instances { servers })
    }

    /// The last line `sql` gives on instance `i`.
    pub(super) fn scalar(&self, i: usize, sql: &str) -> Option<String> {
        last_line(&self.servers[i].execute(sql).ok()?)
    }

    /// sysbench straight at instance `i`.
    pub(super) fn endpoint(&self, i: usize) -> Endpoint {
        let addr = self.servers[i].addr();
        endpoint(addr.ip().to_string(), addr.port())
    }

    /// Creates the sysbench tables on every instance, at the same time, each holding
    /// only its range of `id`.
    pub(super) fn load(&self, data: DataSet) -> anyhow::Result<()> {
        let n = self.servers.len();
        std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .servers
                .iter()
                .enumerate()
                .map(|(i, server)| {
                    scope.spawn(move || {
                        server
                            .execute(&load_sql(data, id_range(i, n, data.table_size)))
                            .with_context(|| format!("loading db{}", i + 1))
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("loading does not panic")?;
            }
            Ok(())
        })
    }

    /// What each instance holds of each table, checked against its range: the load
    /// is verified, not trusted.
    pub(super) fn placement(&self, data: DataSet) -> anyhow::Result<Vec<Placement>> {
        let n = self.servers.len();
        let mut placement = Vec::new();
        for (i, server) in self.servers.iter().enumerate() {
            let (lo, hi) = id_range(i, n, data.table_size);
            for t in 1..=data.tables {
                let sql = format!("SELECT COUNT(*), MIN(id), MAX(id) FROM {DATABASE}.sbtest{t}");
                let line = last_line(&server.execute(&sql)?).unwrap_or_default();
                let numbers: Vec<u64> = line
                    .split_whitespace()
                    .filter_map(|v| v.parse().ok())
                    .collect();
                let p = Placement {
                    instance: format!("db{}", i + 1),
                    table: format!("sbtest{t}"),
                    ids: (lo, hi),
                    rows: numbers.first().copied().unwrap_or(0),
                    held: (numbers.len() == 3).then(|| (numbers[1], numbers[2])),
                };
                if p.rows != hi - lo + 1 || p.held != Some((lo, hi)) {
                    bail!(
                        "{} holds {} rows of {} with ids {:?}, not ids {lo}..={hi}",
                        p.instance,
                        p.rows,
                        p.table,
                        p.held
                    );
                }
                placement.push(p);
            }
        }
        Ok(placement)
    }

    /// Data and indexes of the sysbench tables over all instances, MiB.
    pub(super) fn data_mib(&self) -> Option<f64> {
        let sql = format!(
            "SELECT SUM(DATA_LENGTH + INDEX_LENGTH) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = '{DATABASE}'"
        );
        self.sum_mib(&sql)
    }

    /// The buffer pools of all instances together, as the servers sized them, MiB.
    pub(super) fn buffer_pool_mib(&self) -> Option<f64> {
        self.sum_mib("SELECT @@innodb_buffer_pool_size")
    }

    fn sum_mib(&self, sql: &str) -> Option<f64> {
        let mut bytes = 0.0;
        for i in 0..self.servers.len() {
            bytes += self.scalar(i, sql)?.parse::<f64>().ok()?;
        }
        Some(bytes / (1024.0 * 1024.0))
    }

    /// Every instance's counters, in order.
    pub(super) fn counters(&self) -> Vec<Counters> {
        let names: Vec<String> = STATUS_NAMES.iter().map(|n| format!("'{n}'")).collect();
        let sql = format!(
            "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE LOWER(VARIABLE_NAME) IN ({})",
            names.join(",")
        );
        self.servers
            .iter()
            .map(|s| s.execute(&sql).ok().map(|out| parse_status(&out)))
            .collect()
    }

    fn addresses(&self) -> Vec<SocketAddr> {
        self.servers.iter().map(MariaDb::addr).collect()
    }
}

/// What one instance did between two counter reads.
pub(super) fn instance_load(name: String, before: &Counters, after: &Counters) -> InstanceLoad {
    let delta = |key: &str| {
        let get = |c: &Counters| c.as_ref().and_then(|c| c.get(key).copied());
        Some(get(after)?.saturating_sub(get(before)?))
    };
    InstanceLoad {
        name,
        stmt_executes: delta("com_stmt_execute"),
        selects: delta("com_select"),
        disk_reads: delta("innodb_buffer_pool_reads"),
        read_requests: delta("innodb_buffer_pool_read_requests"),
        pool_pages: after.as_ref().and_then(|c| {
            Some((
                *c.get("innodb_buffer_pool_pages_data")?,
                *c.get("innodb_buffer_pool_pages_total")?,
            ))
        }),
    }
}

/// One instance's share of one table: the ids it should hold and what it holds.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Placement {
    pub(super) instance: String,
    pub(super) table: String,
    /// First and last id of its range.
    pub(super) ids: (u64, u64),
    pub(super) rows: u64,
    /// Its smallest and largest id.
    pub(super) held: Option<(u64, u64)>,
}

/// sysbench's table, filled with rows `ids` of the shape sysbench's `prepare` writes
/// (`k` drawn over the whole table, `c` and `pad` groups of random digits), by the
/// server itself from the Sequence engine instead of a client sending every row; the
/// secondary index built afterwards, as sysbench does.
fn load_sql(data: DataSet, (lo, hi): (u64, u64)) -> String {
    let digits = |groups: usize| {
        let group = "LPAD(FLOOR(RAND() * 100000000000), 11, '0')";
        format!("CONCAT_WS('-'{})", format!(", {group}").repeat(groups))
    };
    // The Sequence engine's tables exist in whatever database is current.
    let mut sql = format!("CREATE DATABASE IF NOT EXISTS {DATABASE};\nUSE {DATABASE};\n");
    for t in 1..=data.tables {
        let _ = write!(
            sql,
            "CREATE TABLE {DATABASE}.sbtest{t} (id INTEGER NOT NULL AUTO_INCREMENT, \
             k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, \
             pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)) ENGINE = InnoDB;\n\
             INSERT INTO {DATABASE}.sbtest{t} (id, k, c, pad) SELECT seq, \
             FLOOR(1 + RAND() * {size}), {c}, {pad} FROM seq_{lo}_to_{hi};\n\
             CREATE INDEX k_{t} ON {DATABASE}.sbtest{t}(k);\n",
            size = data.table_size,
            c = digits(10),
            pad = digits(5),
        );
    }
    sql
}

/// The Sluice child in front of the instances. Dropping it stops the process.
pub(super) struct Proxy {
    process: Option<SluiceProcess>,
    port: u16,
}

impl Proxy {
    /// Writes the configuration to `config` and starts Sluice with it.
    pub(super) fn start(
        bench: &Bench,
        instances: &Instances,
        config: &Path,
    ) -> anyhow::Result<Proxy> {
        let port = sandbox::free_port();
        let text = sluice_config(
            &instances.addresses(),
            bench.plan.data,
            port,
            bench.plan.backend_connections,
        );
        std::fs::write(config, text).with_context(|| format!("writing {}", config.display()))?;
        let log = config.with_extension("log");
        let process = SluiceProcess::start(&bench.sluice_bin, config, port, &log)?;
        Ok(Proxy {
            process: Some(process),
            port,
        })
    }

    pub(super) fn command(&self) -> &str {
        &self.process.as_ref().expect("running").command
    }

    pub(super) fn endpoint(&self) -> Endpoint {
        endpoint("127.0.0.1".into(), self.port)
    }

    /// Whether Sluice still runs; the error says how it ended.
    pub(super) fn check(&mut self) -> Result<(), String> {
        self.process.as_mut().expect("running").check()
    }

    /// `SELECT COUNT(*)` of `table` through Sluice, which asks every shard and adds
    /// their counts up.
    pub(super) fn count_rows(&self, table: &str) -> Option<u64> {
        let output = Command::new(sandbox::client_path().ok()?)
            .arg("--no-defaults")
            .args([
                "--protocol=TCP",
                "--host=127.0.0.1",
                &format!("--port={}", self.port),
                &format!("--user={}", sandbox::ADMIN_USER),
                &format!("--password={}", sandbox::ADMIN_PASSWORD),
                &format!("--database={DATABASE}"),
                "--connect-timeout=10",
                "--batch",
                "--skip-column-names",
                "-e",
                &format!("SELECT COUNT(*) FROM {table}"),
            ])
            .output()
            .ok()?;
        if !output.status.success() {
            return None;
        }
        last_line(&String::from_utf8_lossy(&output.stdout))?
            .parse()
            .ok()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            process.stop();
        }
    }
}

/// The Sluice configuration: instance `dbN` alone in shard `sN`, every sysbench table
/// placed by RANGE on `id` with the same contiguous ranges the instances were loaded
/// with.
pub(super) fn sluice_config(
    addresses: &[SocketAddr],
    data: DataSet,
    port: u16,
    backend_connections: u32,
) -> String {
    let mut text = format!(
        "# Written by `sluice bench shard`.\n\
         [log]\nlevel = \"warn\"\n\n\
         [[listeners]]\naddress = \"127.0.0.1:{port}\"\n\n\
         [[users]]\nname = {}\npassword = {}\n",
        toml_string(sandbox::ADMIN_USER),
        toml_string(sandbox::ADMIN_PASSWORD),
    );
    for (i, address) in addresses.iter().enumerate() {
        let n = i + 1;
        let _ = write!(
            text,
            "\n[[servers]]\nname = \"db{n}\"\naddress = \"{address}\"\n\n\
             [[shards]]\nname = \"s{n}\"\nservers = [\"db{n}\"]\n"
        );
    }
    let _ = write!(
        text,
        "\n[pool]\nmax_connections = {backend_connections}\nmultiplex = true\n\n\
         [sharding]\ndefault_shard = \"s1\"\n"
    );
    let n = addresses.len();
    let ranges: Vec<String> = (0..n)
        .map(|i| {
            if i + 1 < n {
                let below = id_range(i, n, data.table_size).1 + 1;
                format!("{{ shard = \"s{}\", below = {below} }}", i + 1)
            } else {
                format!("{{ shard = \"s{}\" }}", i + 1)
            }
        })
        .collect();
    for t in 1..=data.tables {
        let _ = write!(
            text,
            "\n[[sharding.tables]]\ntable = \"{DATABASE}.sbtest{t}\"\nkey = \"id\"\n\
             method = \"range\"\nranges = [{}]\n",
            ranges.join(", ")
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_places_each_range_on_its_shard() {
        let addresses: Vec<SocketAddr> = (0..3)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 3306 + i)))
            .collect();
        let data = DataSet {
            tables: 2,
            table_size: 30,
        };
        // Plain TOML: this crate does not depend on the proxy. The integration test of
        // `sluice bench shard` has Sluice check the files the benchmark wrote.
        let config: toml::Table = sluice_config(&addresses, data, 6033, 32).parse().unwrap();
        assert_eq!(config["servers"].as_array().unwrap().len(), 3);
        let shards = config["shards"].as_array().unwrap();
        assert_eq!(shards[2]["servers"][0].as_str(), Some("db3"));
        assert_eq!(config["pool"]["multiplex"].as_bool(), Some(true));
        let tables = config["sharding"]["tables"].as_array().unwrap();
        assert_eq!(tables.len(), 2);
        assert_eq!(tables[1]["table"].as_str(), Some("sbtest.sbtest2"));
        let ranges = tables[0]["ranges"].as_array().unwrap();
        assert_eq!(ranges[0]["below"].as_integer(), Some(11));
        assert_eq!(ranges[1]["below"].as_integer(), Some(21));
        assert_eq!(ranges[2]["shard"].as_str(), Some("s3"));
        assert!(ranges[2].get("below").is_none());
    }

    #[test]
    fn loading_fills_only_the_range() {
        let sql = load_sql(
            DataSet {
                tables: 2,
                table_size: 100,
            },
            (51, 100),
        );
        assert!(sql.contains("FROM seq_51_to_100;"), "{sql}");
        assert!(
            sql.contains("CREATE INDEX k_2 ON sbtest.sbtest2(k)"),
            "{sql}"
        );
        assert!(sql.contains("FLOOR(1 + RAND() * 100)"), "{sql}");
    }

    #[test]
    fn a_run_counts_each_instance_between_reads() {
        let counters = |executes: u64| -> Counters {
            Some(HashMap::from([
                ("com_stmt_execute".to_string(), executes),
                ("innodb_buffer_pool_reads".to_string(), 7),
            ]))
        };
        let load = instance_load("db1".into(), &counters(10), &counters(25));
        assert_eq!(load.stmt_executes, Some(15));
        assert_eq!(load.disk_reads, Some(0));
        assert_eq!(load.selects, None);
        assert_eq!(
            instance_load("db2".into(), &None, &counters(1)).stmt_executes,
            None
        );
    }
}
