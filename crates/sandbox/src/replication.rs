//! Replication topologies out of sandbox servers, for the routing and failover tests
//! and benchmarks: a primary with GTID replicas ([`ReplicaSet`]), the replication
//! chores a failover test does by hand ([`MariaDb::point_to`] and friends), and a
//! Galera cluster ([`GaleraCluster`]).
//!
//! Every server of a topology starts from the same template data directory, so they all
//! share the admin account and start with empty GTID positions.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};

use super::{
    copy_dir, free_port, process_alive, process_lifetime_dir, root_socket_client, run_client,
    template, user_args, wait_child, wait_ready, Launch, MariaDb, MariaDbOptions, StartError,
    Supervised, START_TIMEOUT,
};

/// Replication account created on every server of a [`ReplicaSet`].
pub const REPL_USER: &str = "sluice_repl";
/// Password of [`REPL_USER`].
pub const REPL_PASSWORD: &str = "repl-secret";

/// How long a semi-sync primary waits for a replica's acknowledgement before it
/// commits without one and switches semi-sync off (MariaDB's default, 10 s): long
/// enough that a test never sees that happen by accident on a loaded 2-core machine,
/// short enough that a test whose replicas hang (SIGSTOP) is slowed down rather than
/// stuck. Replicas that disconnect cost nothing: with none connected, a primary does
/// not wait at all.
pub const SEMI_SYNC_TIMEOUT_MS: u32 = 10_000;

/// `--slave-net-timeout` on replica set servers: a replica notices a primary that
/// stopped answering (SIGSTOP, a dropped network) after this many seconds rather than
/// after MariaDB's default minute. Heartbeats (every second) keep an idle link alive.
const SLAVE_NET_TIMEOUT_SECS: u32 = 5;

/// Database and table of the write [`ReplicaSet::start`] checks every replica for.
const MARKER_DATABASE: &str = "sluice_sandbox";
const MARKER_TABLE: &str = "sluice_sandbox.marker";

/// What [`ReplicaSet::start`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSetOptions {
    /// Number of replicas (default 2).
    pub replicas: usize,
    /// Semi-synchronous replication on every server, see [`MariaDbOptions::semi_sync`]
    /// (default false).
    pub semi_sync: bool,
    /// `--max-connections` of every server (default 2000).
    pub max_connections: u32,
    /// Appended to every server's command line, after the topology's own options
    /// (`--gtid-strict-mode=ON`, for example).
    pub extra_args: Vec<String>,
}

impl Default for ReplicaSetOptions {
    fn default() -> Self {
        ReplicaSetOptions {
            replicas: 2,
            semi_sync: false,
            max_connections: 2000,
            extra_args: Vec::new(),
        }
    }
}

/// A primary and its replicas, replicating with MariaDB GTIDs.
///
/// Server ids are 1 for the primary and 2, 3, … for the replicas. Every server has the
/// binlog with `--log-slave-updates` and the [`REPL_USER`] account, so any of them can
/// be promoted; replicas run `--read-only=ON`. The check write leaves a database
/// `sluice_sandbox` on every server. Dropping the set stops every server.
#[derive(Debug)]
pub struct ReplicaSet {
    pub primary: MariaDb,
    pub replicas: Vec<MariaDb>,
}

impl ReplicaSet {
    /// Start a primary and `opts.replicas` replicas (in parallel), create the
    /// replication account on each, point the replicas at the primary and return once
    /// every replica's IO and SQL threads run and a write on the primary has reached
    /// each of them. With semi-sync, also once the primary counts every replica as a
    /// semi-sync client.
    pub fn start(opts: ReplicaSetOptions) -> Result<ReplicaSet> {
        let server_options = |index: usize| -> Result<MariaDbOptions> {
            let mut extra_args = vec![format!("--slave-net-timeout={SLAVE_NET_TIMEOUT_SECS}")];
            extra_args.extend(opts.extra_args.iter().cloned());
            Ok(MariaDbOptions {
                server_id: u32::try_from(index + 1).context("too many replicas")?,
                max_connections: opts.max_connections,
                extra_args,
                log_slave_updates: true,
                semi_sync: opts.semi_sync,
                read_only: index > 0,
                ..MariaDbOptions::default()
            })
        };
        let options = (0..=opts.replicas)
            .map(server_options)
            .collect::<Result<Vec<_>>>()?;
        let mut servers = start_parallel(options.len(), |index| {
            let server = MariaDb::start(options[index].clone())?;
            server.create_replication_account()?;
            Ok(server)
        })?
        .into_iter();
        let primary = servers.next().expect("the primary was started");
        let set = ReplicaSet {
            primary,
            replicas: servers.collect(),
        };

        let deadline = Instant::now() + START_TIMEOUT;
        for replica in &set.replicas {
            replica.point_to(&set.primary)?;
        }
        for replica in &set.replicas {
            replica.wait_replicating(deadline.saturating_duration_since(Instant::now()))?;
        }
        if opts.semi_sync {
            set.wait_semi_sync_clients(deadline)?;
        }
        set.primary.execute(&format!(
            "CREATE DATABASE IF NOT EXISTS {MARKER_DATABASE};\n\
             CREATE TABLE IF NOT EXISTS {MARKER_TABLE} \
               (id INT PRIMARY KEY, written_at DATETIME(6) NOT NULL);\n\
             REPLACE INTO {MARKER_TABLE} VALUES (1, NOW(6));"
        ))?;
        set.wait_caught_up(deadline.saturating_duration_since(Instant::now()))?;
        for replica in &set.replicas {
            let rows = replica.query_value(&format!("SELECT COUNT(*) FROM {MARKER_TABLE}"))?;
            ensure!(
                rows == "1",
                "the check write on the primary is not on the replica at {}",
                replica.addr()
            );
        }
        Ok(set)
    }

    /// The primary, then the replicas.
    pub fn servers(&self) -> impl Iterator<Item = &MariaDb> {
        std::iter::once(&self.primary).chain(&self.replicas)
    }

    /// Wait until every running replica has applied everything in the primary's binary
    /// log (its `@@gtid_binlog_pos`), for at most `timeout` in all. A replica whose SQL
    /// thread is stopped is not caught up. Replicas whose process is down are skipped.
    pub fn wait_caught_up(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let position = self.primary.gtid_binlog_pos()?;
        for replica in self.replicas.iter().filter(|replica| replica.running()) {
            replica
                .wait_for_gtid(
                    &position,
                    deadline.saturating_duration_since(Instant::now()),
                )
                .with_context(|| {
                    format!(
                        "replica at {} catching up with the primary at {}",
                        replica.addr(),
                        self.primary.addr()
                    )
                })?;
        }
        Ok(())
    }

    fn wait_semi_sync_clients(&self, deadline: Instant) -> Result<()> {
        let wanted = self.replicas.len().to_string();
        loop {
            let clients = self.primary.global_status("Rpl_semi_sync_master_clients")?;
            if clients == wanted {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "the primary at {} counts {clients} semi-sync replicas, not {wanted}",
                    self.primary.addr()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Run `start(0..count)` in parallel threads: on a 2-core machine most of a server's
/// start is waiting for InnoDB, which overlaps well. The first error wins; the servers
/// that did start are dropped (stopped) then.
fn start_parallel(
    count: usize,
    start: impl Fn(usize) -> Result<MariaDb> + Sync,
) -> Result<Vec<MariaDb>> {
    let start = &start;
    let results: Vec<Result<MariaDb>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..count)
            .map(|index| scope.spawn(move || start(index)))
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("a thread starting a server panicked")))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// Replication chores on single servers.
impl MariaDb {
    /// The first column of the first row `sql` returns, as the `mariadb` client prints
    /// it (`NULL` for null). Fails when there is no row.
    pub fn query_value(&self, sql: &str) -> Result<String> {
        let mut client = self.admin_client()?;
        client.args(["--batch", "--skip-column-names"]);
        let out = run_client(client, sql)
            .with_context(|| format!("querying {}: {sql:.200}", self.addr()))?;
        let line = out
            .lines()
            .next()
            .with_context(|| format!("no row from {}: {sql:.200}", self.addr()))?;
        let value = line.split('\t').next().unwrap_or_default();
        Ok(unescape_batch(value))
    }

    /// The value of global status variable `name` (`Rpl_semi_sync_master_status`, …).
    pub fn global_status(&self, name: &str) -> Result<String> {
        self.query_value(&format!(
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = '{}'",
            name.replace('\'', "''")
        ))
        .with_context(|| format!("reading status variable {name}"))
    }

    /// `@@gtid_current_pos`: the last GTID per domain this server applied or wrote.
    pub fn gtid_current_pos(&self) -> Result<String> {
        self.query_value("SELECT @@GLOBAL.gtid_current_pos")
    }

    /// `@@gtid_binlog_pos`: the last GTID per domain in this server's binary log.
    pub fn gtid_binlog_pos(&self) -> Result<String> {
        self.query_value("SELECT @@GLOBAL.gtid_binlog_pos")
    }

    /// `STOP SLAVE SQL_THREAD`: the replica keeps receiving but stops applying.
    pub fn stop_replica_sql_thread(&self) -> Result<()> {
        self.execute("STOP SLAVE SQL_THREAD").map(drop)
    }

    /// `START SLAVE SQL_THREAD`.
    pub fn start_replica_sql_thread(&self) -> Result<()> {
        self.execute("START SLAVE SQL_THREAD").map(drop)
    }

    /// `SHOW SLAVE STATUS` as column name → value (`Slave_IO_Running`, `Gtid_IO_Pos`,
    /// `Last_SQL_Error`, …); empty if the server is not a replica.
    pub fn replica_status(&self) -> Result<HashMap<String, String>> {
        let out = self.execute("SHOW SLAVE STATUS")?;
        let mut lines = out.lines();
        let (Some(header), Some(row)) = (lines.next(), lines.next()) else {
            return Ok(HashMap::new());
        };
        Ok(header
            .split('\t')
            .zip(row.split('\t'))
            .map(|(name, value)| (name.to_owned(), unescape_batch(value)))
            .collect())
    }

    /// Make this server a read-only replica of `primary`, replicating with GTIDs from
    /// where this server stands, and start replicating: `STOP SLAVE`, `CHANGE MASTER TO`
    /// `primary` with `MASTER_USE_GTID=slave_pos`, `START SLAVE`. Its `gtid_slave_pos`
    /// is first set to its `gtid_current_pos` (what `MASTER_USE_GTID=current_pos`
    /// would use), so that a former primary, whose history is in its binlog rather
    /// than in `gtid_slave_pos`, can be repointed too. Reconnection attempts are one
    /// second apart, so that a replica resumes quickly after its primary restarts.
    pub fn point_to(&self, primary: &MariaDb) -> Result<()> {
        self.execute(&format!(
            "STOP SLAVE;\n\
             SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_current_pos;\n\
             CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, \
               MASTER_USER='{REPL_USER}', MASTER_PASSWORD='{REPL_PASSWORD}', \
               MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, \
               MASTER_HEARTBEAT_PERIOD=1;\n\
             SET GLOBAL read_only = ON;\n\
             START SLAVE;",
            port = primary.port()
        ))
        .with_context(|| format!("pointing {} to {}", self.addr(), primary.addr()))
        .map(drop)
    }

    /// Wait until this replica has applied GTID position `position` (`MASTER_GTID_WAIT`),
    /// for at most `timeout`.
    pub fn wait_for_gtid(&self, position: &str, timeout: Duration) -> Result<()> {
        let result = self.query_value(&format!(
            "SELECT MASTER_GTID_WAIT('{}', {:.3})",
            position.replace('\'', "''"),
            timeout.as_secs_f64()
        ))?;
        if result == "0" {
            return Ok(());
        }
        let status = self.replica_status().unwrap_or_default();
        let field = |name: &str| status.get(name).map_or("?", String::as_str);
        bail!(
            "{} has not applied GTID {position} within {timeout:?} (MASTER_GTID_WAIT \
             returned {result}); it is at {}, IO thread {}, SQL thread {}, last error: {}",
            self.addr(),
            self.gtid_current_pos().unwrap_or_default(),
            field("Slave_IO_Running"),
            field("Slave_SQL_Running"),
            [field("Last_IO_Error"), field("Last_SQL_Error")]
                .join(" ")
                .trim()
        )
    }

    /// Wait until this replica's IO and SQL threads both run, for at most `timeout`.
    pub fn wait_replicating(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.replica_status()?;
            let running = |name: &str| status.get(name).is_some_and(|value| value == "Yes");
            if running("Slave_IO_Running") && running("Slave_SQL_Running") {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let mut status: Vec<_> = status.into_iter().collect();
                status.sort();
                bail!(
                    "replication on {} is not running after {timeout:?}: {status:?}",
                    self.addr()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// [`REPL_USER`] on this server only: kept out of the binlog, every server of a
    /// topology gets its own, and GTID positions stay empty until the first real write.
    fn create_replication_account(&self) -> Result<()> {
        self.execute(&format!(
            "SET SESSION sql_log_bin = 0;\n\
             CREATE USER '{REPL_USER}'@'%' IDENTIFIED BY '{REPL_PASSWORD}';\n\
             GRANT REPLICATION SLAVE, REPLICATION SLAVE ADMIN, BINLOG MONITOR, SLAVE MONITOR \
               ON *.* TO '{REPL_USER}'@'%';"
        ))
        .context("creating the replication account")
        .map(drop)
    }
}

/// Undo the escaping of `mariadb --batch` output (`\t`, `\n`, `\\`, `\0`).
fn unescape_batch(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('0') => out.push('\0'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// A Galera cluster on loopback, every node a [`MariaDb`] with its own ports for
/// clients, group communication and incremental state transfer (IST).
///
/// Nodes start from one data directory prepared per process (a one-node cluster
/// bootstrapped once and shut down cleanly), so a joining node only ever needs what
/// happened since, which Galera sends by IST from its cache: no full state transfer
/// (SST), so neither mariabackup nor rsync (whose SST also fails when tests run as
/// root: its daemon drops to `nobody`, who cannot write the data directory). The
/// server still runs a state transfer script for the handshake; a tiny one of ours
/// (`wsrep_sst_sluice_sandbox`) does it through the joiner's data directory. A node
/// that would need a full SST (it missed more than its donor's 32 MB cache holds)
/// fails to join instead.
///
/// [`MariaDb::restart`] works on nodes as long as another node runs: the restarted node
/// rejoins by IST, from where InnoDB says it stopped after a [`MariaDb::kill`]. The
/// first node bootstraps only on its first start; restarted, it joins the others.
#[derive(Debug)]
pub struct GaleraCluster {
    pub nodes: Vec<MariaDb>,
}

/// The `wsrep_sst_method` of sandbox nodes, and the suffix of its script's name.
const SST_METHOD: &str = "sluice_sandbox";

/// The state transfer script run by nodes, as joiner and as donor. Both sides only
/// ever agree on a position: the donor writes it into a file in the joiner's data
/// directory (the "address" the joiner announced), and the joiner reports it back to its
/// server once it appears. IST itself is Galera's business.
const SST_SCRIPT: &str = r#"#!/usr/bin/env bash
# Galera state transfer for Sluice's sandbox nodes, which share one machine and one
# starting data directory: only the incremental kind (IST) ever happens.
role= address= datadir= gtid= bypass=0 parent=
while [ $# -gt 0 ]; do
  case $1 in
    --role) role=$2; shift 2 ;;
    --address) address=$2; shift 2 ;;
    --datadir) datadir=$2; shift 2 ;;
    --gtid) gtid=$2; shift 2 ;;
    --parent) parent=$2; shift 2 ;;
    --bypass) bypass=1; shift ;;
    --mysqld-args) break ;;
    *) shift ;;
  esac
done
name=sluice_sst_position
case $role in
  joiner)
    dir=${datadir%/}
    rm -f -- "$dir/$name"
    echo "ready METHOD:$dir"
    for ((i = 0; i < 3000; i++)); do
      if [ -f "$dir/$name" ]; then
        cat -- "$dir/$name"
        rm -f -- "$dir/$name"
        exit 0
      fi
      if [ -n "$parent" ] && ! kill -0 "$parent" 2>/dev/null; then exit 1; fi
      sleep 0.05
    done
    echo "sandbox state transfer: no donor within 150 s" >&2
    exit 1 ;;
  donor)
    if [ "$bypass" != 1 ]; then
      echo "sandbox state transfer: a full copy from $gtid is needed; only IST is supported" >&2
      exit 1
    fi
    dir=${address#METHOD:}
    printf '%s\n' "$gtid" >"$dir/$name.tmp" && mv -f -- "$dir/$name.tmp" "$dir/$name" || exit 1
    echo "done $gtid" ;;
  *)
    echo "sandbox state transfer: unknown role '$role'" >&2
    exit 1 ;;
esac
"#;

/// Where distributions install the Galera 4 provider.
const GALERA_PROVIDERS: &[&str] = &[
    "/usr/lib/galera/libgalera_smm.so",
    "/usr/lib/galera-4/libgalera_smm.so",
    "/usr/lib64/galera-4/libgalera_smm.so",
    "/usr/lib64/galera/libgalera_smm.so",
];

/// Environment variable naming the Galera provider library, tried before the usual
/// places ([`GALERA_PROVIDERS`]).
const GALERA_PROVIDER_ENV: &str = "SLUICE_GALERA_PROVIDER";

fn galera_provider() -> Result<PathBuf> {
    let configured = std::env::var_os(GALERA_PROVIDER_ENV).map(PathBuf::from);
    configured
        .into_iter()
        .chain(GALERA_PROVIDERS.iter().map(PathBuf::from))
        .find(|path| path.is_file())
        .with_context(|| {
            format!(
                "no Galera provider in ${GALERA_PROVIDER_ENV} or {GALERA_PROVIDERS:?}; \
                 install the galera-4 package"
            )
        })
}

/// Galera's message cache per node, where IST is served from: ample for tests, and
/// small because Galera writes the whole file when it creates it.
const GCACHE_SIZE: &str = "32M";

/// How soon the other nodes give up on a node that stopped answering (a killed one):
/// until then, every commit in the cluster waits. Galera's defaults (suspect after 5 s,
/// evict after 15 s) are for real networks; loopback answers in microseconds, and
/// these still leave a loaded 2-core machine seconds to spare.
const FAILURE_DETECTION: &str =
    "evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S";

/// How many times [`GaleraCluster::rejoin`] starts a node whose state transfer aborted.
const REJOIN_ATTEMPTS: u32 = 5;

/// What a joiner logs when it gives up because its donor left the primary component.
const STATE_TRANSFER_ABORTED: &str = "Will never receive state";

/// What an error log holds past `from` bytes: all of it when it is shorter than that,
/// as after a full state transfer, which empties the data directory the log is in.
fn since(log: &str, from: usize) -> &str {
    log.get(from..).unwrap_or(log)
}

/// The data directory Galera nodes start from, and the directory holding the state
/// transfer script; prepared once per process.
struct GaleraTemplate {
    data: PathBuf,
    bin: PathBuf,
    _cleanup: Child,
}

static GALERA_TEMPLATE: Mutex<Option<GaleraTemplate>> = Mutex::new(None);

fn galera_template(provider: &Path) -> Result<(PathBuf, PathBuf)> {
    let mut galera = GALERA_TEMPLATE
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(galera) = galera.as_ref() {
        return Ok((galera.data.clone(), galera.bin.clone()));
    }
    let (root, cleanup) = process_lifetime_dir("sluice-galera-template-")?;
    // From here on, dropping `cleanup` (on error) deletes the directory.
    let data = root.join("data");
    let bin = root.join("bin");
    fs::create_dir_all(&bin)?;
    let script = bin.join(format!("wsrep_sst_{SST_METHOD}"));
    fs::write(&script, SST_SCRIPT.replace("METHOD", SST_METHOD))
        .with_context(|| format!("writing {}", script.display()))?;
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755))?;
    copy_dir(&template()?, &data)?;
    bootstrap_galera_data(&root, &data, provider)?;
    *galera = Some(GaleraTemplate {
        data: data.clone(),
        bin: bin.clone(),
        _cleanup: cleanup,
    });
    Ok((data, bin))
}

/// Run `data` as a one-node cluster until it is synced, then shut it down cleanly:
/// its `grastate.dat` and InnoDB then agree on a cluster position that every node
/// copied from it starts at, which is what lets joiners catch up by IST alone.
fn bootstrap_galera_data(root: &Path, data: &Path, provider: &Path) -> Result<()> {
    let socket = root.join("bootstrap.sock");
    let error_log = root.join("bootstrap.err");
    let tmpdir = root.join("tmp");
    fs::create_dir_all(&tmpdir)?;
    let gcomm_port = free_port();
    let mut args: Vec<OsString> = vec!["--no-defaults".into()];
    args.extend(user_args());
    args.extend(
        [
            format!("--datadir={}", data.display()),
            format!("--socket={}", socket.display()),
            format!("--pid-file={}", root.join("bootstrap.pid").display()),
            format!("--log-error={}", error_log.display()),
            format!("--tmpdir={}", tmpdir.display()),
            "--skip-networking".into(),
            "--skip-log-bin".into(),
            "--innodb-buffer-pool-size=64M".into(),
            "--wsrep-on=ON".into(),
            format!("--wsrep-provider={}", provider.display()),
            "--wsrep-cluster-address=gcomm://".into(),
            format!(
                "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{gcomm_port};\
                 gcache.size={GCACHE_SIZE}"
            ),
            format!("--wsrep-node-address=127.0.0.1:{gcomm_port}"),
            "--binlog-format=ROW".into(),
            "--innodb-autoinc-lock-mode=2".into(),
        ]
        .map(OsString::from),
    );
    let out = root.join("bootstrap.out");
    let mut server = Supervised::spawn(&args, None, &out)?;
    wait_ready(server.pid, &error_log, 0, &out, || {
        let state = run_client(
            root_socket_client(&socket)?,
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE'",
        )?;
        ensure!(state.lines().nth(1) == Some("4"), "not synced yet");
        Ok(())
    })
    .map_err(StartError::into_inner)
    .context("bootstrapping the Galera template")?;
    server.stop();
    ensure!(
        !process_alive(server.pid),
        "the Galera bootstrap server did not stop"
    );
    let grastate = fs::read_to_string(data.join("grastate.dat")).unwrap_or_default();
    ensure!(
        !grastate.contains("seqno:   -1") && grastate.contains("uuid:"),
        "the Galera bootstrap server left no cluster position:\n{grastate}"
    );
    // Each node writes its own cache; the cluster view file would make nodes look for
    // the bootstrap node.
    for name in ["galera.cache", "gvwstate.dat"] {
        let _ = fs::remove_file(data.join(name));
    }
    Ok(())
}

/// Galera's id for "no cluster", which a node's `grastate.dat` keeps until the node
/// first saves its state after joining.
const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// `grastate` with the cluster id `uuid` in place of the nil one, or `None` when it
/// already names a cluster. A node killed after it joined but before it first saved
/// its state keeps the nil id, and Galera then ignores the position InnoDB recovered
/// (`--wsrep-start-position`) and asks for a full state transfer; InnoDB's position
/// names the cluster, so the node can say so itself and rejoin by IST.
fn with_cluster_uuid(grastate: &str, uuid: &str) -> Option<String> {
    let mut named = false;
    let text: Vec<String> = grastate
        .lines()
        .map(|line| match line.strip_prefix("uuid:") {
            Some(value) if value.trim() == NIL_UUID => {
                named = true;
                format!("uuid:    {uuid}")
            }
            _ => line.to_owned(),
        })
        .collect();
    named.then(|| text.join("\n") + "\n")
}

/// The argument that makes a sandbox server a Galera node.
const WSREP_ON: &str = "--wsrep-on=ON";

impl MariaDb {
    /// For a Galera node that crashed (its `grastate.dat` has no position): the cluster
    /// position InnoDB recovers, which the node must be told at start to rejoin by IST
    /// instead of asking for a full state transfer. `mariadbd --wsrep-recover` finds it,
    /// as the scripts around a packaged server do. `None` for other servers.
    pub(super) fn galera_recovered_position(&self) -> Result<Option<String>> {
        if !self.args.iter().any(|arg| arg == WSREP_ON) {
            return Ok(None);
        }
        let grastate = fs::read_to_string(self.datadir.join("grastate.dat")).unwrap_or_default();
        if !grastate.lines().any(|line| {
            line.strip_prefix("seqno:")
                .is_some_and(|seqno| seqno.trim() == "-1")
        }) {
            return Ok(None);
        }
        let log = self.root.join("wsrep-recover.log");
        let mut recover = Command::new(super::mariadbd_path()?);
        recover
            .args(&self.args)
            .arg("--wsrep-recover")
            .arg(format!("--log-error={}", log.display()))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = recover
            .spawn()
            .context("starting mariadbd --wsrep-recover")?;
        let status = wait_child(&mut child, START_TIMEOUT)?;
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let text = fs::read_to_string(&log).unwrap_or_default();
        let position = text.lines().rev().find_map(|line| {
            line.split_once("WSREP: Recovered position: ")
                .map(|(_, position)| position.trim().to_owned())
        });
        match position {
            Some(position) if !position.ends_with(":-1") => {
                let (uuid, _) = position.rsplit_once(':').unwrap_or((&position, ""));
                if let Some(named) = with_cluster_uuid(&grastate, uuid) {
                    fs::write(self.datadir.join("grastate.dat"), named)
                        .context("writing the recovered cluster id into grastate.dat")?;
                }
                Ok(Some(position))
            }
            _ => bail!(
                "mariadbd --wsrep-recover found no cluster position ({status:?}):\n{}",
                super::tail(&log, 4000)
            ),
        }
    }
}

impl GaleraCluster {
    /// Start a cluster of `nodes` nodes (the first bootstraps it, the others join in
    /// parallel) and wait until every node is synced (`wsrep_local_state` 4) and sees
    /// all of them (`wsrep_cluster_size`).
    pub fn start(nodes: usize) -> Result<GaleraCluster> {
        ensure!(nodes > 0, "a Galera cluster needs at least one node");
        let provider = galera_provider()?;
        let (data, bin) = galera_template(&provider)?;
        let ports: Vec<(u16, u16, u16)> = (0..nodes)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let cluster_address = ports
            .iter()
            .map(|(_, gcomm, _)| format!("127.0.0.1:{gcomm}"))
            .collect::<Vec<_>>()
            .join(",");
        // Our state transfer script first: mariadbd finds `wsrep_sst_<method>` on PATH.
        let mut path = OsString::from(bin.as_os_str());
        if let Some(inherited) = std::env::var_os("PATH") {
            path.push(":");
            path.push(inherited);
        }
        let start_node = |index: usize| -> Result<MariaDb> {
            let (port, gcomm, ist) = ports[index];
            let options = MariaDbOptions {
                server_id: u32::try_from(index + 1).context("too many nodes")?,
                extra_args: vec![
                    WSREP_ON.into(),
                    format!("--wsrep-provider={}", provider.display()),
                    "--wsrep-cluster-name=sluice-sandbox".into(),
                    format!("--wsrep-cluster-address=gcomm://{cluster_address}"),
                    format!(
                        "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{gcomm};\
                         ist.recv_addr=127.0.0.1:{ist};gcache.size={GCACHE_SIZE};\
                         {FAILURE_DETECTION}"
                    ),
                    format!("--wsrep-node-address=127.0.0.1:{gcomm}"),
                    format!("--wsrep-node-incoming-address=127.0.0.1:{port}"),
                    format!("--wsrep-node-name=node{}", index + 1),
                    format!("--wsrep-sst-method={SST_METHOD}"),
                    "--binlog-format=ROW".into(),
                    "--innodb-autoinc-lock-mode=2".into(),
                    // Names the binlog explicitly: with wsrep on, a bare --log-bin names
                    // it after the pid file.
                    "--log-bin=mariadb-bin".into(),
                ],
                ..MariaDbOptions::default()
            };
            let first_start_args = if index == 0 {
                vec!["--wsrep-new-cluster".to_owned()]
            } else {
                Vec::new()
            };
            MariaDb::start_with(
                &options,
                &Launch {
                    template: &data,
                    port: Some(port),
                    first_start_args,
                    env: vec![("PATH".into(), path.clone())],
                },
            )
            .with_context(|| format!("starting Galera node {}", index + 1))
        };
        // The others join the cluster the first one forms.
        let mut cluster = GaleraCluster {
            nodes: Vec::with_capacity(nodes),
        };
        for index in 0..nodes {
            cluster.nodes.push(start_node(index)?);
            cluster.wait_synced(START_TIMEOUT)?;
        }
        Ok(cluster)
    }

    /// Start node `index` again after [`MariaDb::kill`] or [`MariaDb::stop_process`] and
    /// wait, for at most `timeout`, until the cluster is synced with it. The survivors
    /// first agree among themselves. A joiner whose state transfer is cut short by a
    /// membership change (the survivors still evicting its previous instance) aborts
    /// with "Will never receive state"; Galera leaves it to the supervisor to start it
    /// again, and so does this, a bounded number of times, each once the others agree
    /// again without it.
    pub fn rejoin(&mut self, index: usize, timeout: Duration) -> Result<()> {
        self.wait_synced(timeout)?;
        let mut attempt = 1;
        loop {
            let node = &mut self.nodes[index];
            let log_from = node.error_log().len();
            match node.restart() {
                Ok(()) => break,
                Err(error)
                    if attempt < REJOIN_ATTEMPTS
                        && since(&node.error_log(), log_from).contains(STATE_TRANSFER_ABORTED) =>
                {
                    tracing::warn!(
                        node = index + 1,
                        attempt,
                        "Galera node's state transfer was cut short, starting it again: {error:#}"
                    );
                    // Joining again while the others still count the aborted instance
                    // would only be cut short by its eviction in turn.
                    self.wait_synced(timeout)?;
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
        self.wait_synced(timeout)
    }

    /// Wait until every running node is synced (`wsrep_local_state` 4) and counts as
    /// many members as there are running nodes, for at most `timeout`.
    pub fn wait_synced(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let running: Vec<&MariaDb> = self.nodes.iter().filter(|node| node.running()).collect();
        let size = running.len().to_string();
        for node in running {
            loop {
                let state = node.global_status("wsrep_local_state")?;
                let members = node.global_status("wsrep_cluster_size")?;
                if state == "4" && members == size {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!(
                        "Galera node at {} is in state {state} with {members} members, \
                         not synced (4) with {size}, after {timeout:?}",
                        node.addr()
                    );
                }
                thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashed_nodes_nil_cluster_id_is_replaced_by_the_recovered_one() {
        let uuid = "41463488-eb12-11f1-a540-7753de1b3bee";
        let nil = format!(
            "# GALERA saved state\nversion: 2.1\nuuid:    {NIL_UUID}\nseqno:   -1\n\
             safe_to_bootstrap: 0\n"
        );
        assert_eq!(
            with_cluster_uuid(&nil, uuid).unwrap(),
            format!(
                "# GALERA saved state\nversion: 2.1\nuuid:    {uuid}\nseqno:   -1\n\
                 safe_to_bootstrap: 0\n"
            )
        );
        let named = nil.replace(NIL_UUID, uuid);
        assert_eq!(with_cluster_uuid(&named, "other"), None);
    }

    #[test]
    fn a_log_read_past_its_end_is_read_whole() {
        assert_eq!(since("abcdef", 2), "cdef");
        assert_eq!(since("abc", 10), "abc");
    }

    #[test]
    fn batch_output_is_unescaped() {
        assert_eq!(unescape_batch(r"a\tb\nc\\d\0"), "a\tb\nc\\d\0");
        assert_eq!(unescape_batch("0-1-5,1-2-3"), "0-1-5,1-2-3");
        assert_eq!(unescape_batch("trailing\\"), "trailing\\");
    }

    #[test]
    fn sst_script_names_the_method() {
        let script = SST_SCRIPT.replace("METHOD", SST_METHOD);
        assert!(
            script.contains("echo \"ready sluice_sandbox:$dir\""),
            "{script}"
        );
        assert!(
            script.contains("dir=${address#sluice_sandbox:}"),
            "{script}"
        );
    }
}
