//! The failover scenario's probe clients, through Sluice: writers inserting one row per
//! autocommit statement, and a client running two-insert transactions. Each records
//! the ids the server acknowledged (with when) and every error it got; the ids are
//! looked for on the promoted server afterwards.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::client::{Client, Reply};

/// Between two statements of a probe: the probes sample write availability, they are
/// not the load.
const PAUSE: Duration = Duration::from_millis(5);
/// After a failed login, before the next attempt.
const RECONNECT_PAUSE: Duration = Duration::from_millis(50);
/// Longest wait for one reply: past Sluice's `failover.write_wait` (10 s by default),
/// after which a statement for the writer gets an error of Sluice's own.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Tables of the probes, created without a unique key so that a write applied twice
/// shows as two rows.
pub(super) const WRITES_TABLE: &str = "probe_acks";
pub(super) const TRX_TABLE: &str = "probe_trx";

/// Where the probes connect and as whom.
#[derive(Debug, Clone)]
pub(super) struct ProbeTarget {
    /// "host:port" of Sluice.
    pub addr: String,
    pub user: String,
    pub password: String,
    pub database: String,
}

/// What the probes saw.
#[derive(Debug, Default)]
pub(super) struct ProbeLog {
    /// Ids of autocommit inserts acknowledged, with when the OK arrived.
    pub acked_writes: Vec<(i64, Instant)>,
    /// Ids inserted by transactions whose COMMIT was acknowledged, with when.
    pub acked_trx: Vec<(i64, Instant)>,
    /// Of the writers: error replies, lost connections and failed logins.
    pub write_errors: u64,
    /// Of the transaction client: each failed transaction, each failed ROLLBACK and
    /// each failed login.
    pub trx_errors: u64,
    /// The text of every error, in the order seen: what was sent, then what came back.
    pub errors: Vec<String>,
}

impl ProbeLog {
    pub(super) fn merge(&mut self, other: ProbeLog) {
        self.acked_writes.extend(other.acked_writes);
        self.acked_trx.extend(other.acked_trx);
        self.write_errors += other.write_errors;
        self.trx_errors += other.trx_errors;
        self.errors.extend(other.errors);
    }

    /// Transactions committed.
    pub(super) fn transactions(&self) -> usize {
        self.acked_trx.len() / 2
    }
}

/// The running probes, each with the index of its target.
pub(super) struct Probes {
    stop: Arc<AtomicBool>,
    tasks: Vec<(usize, JoinHandle<ProbeLog>)>,
    targets: usize,
}

impl Probes {
    /// Starts `writers` writers and one transaction client on `runtime`, spread over
    /// `targets` in turn (the writers first, then the transaction client).
    pub(super) fn start(runtime: &Runtime, targets: &[ProbeTarget], writers: u32) -> Probes {
        assert!(!targets.is_empty(), "the probes need somewhere to connect");
        let stop = Arc::new(AtomicBool::new(false));
        // One sequence for every probe: an id names one acknowledged row in all tables.
        let ids = Arc::new(AtomicI64::new(1));
        let mut tasks = Vec::new();
        for n in 0..writers as usize {
            let at = n % targets.len();
            let probe = Probe::new(Kind::Writer, &targets[at], &ids, &stop);
            tasks.push((at, runtime.spawn(probe.write_loop())));
        }
        let at = writers as usize % targets.len();
        let probe = Probe::new(Kind::Transactions, &targets[at], &ids, &stop);
        tasks.push((at, runtime.spawn(probe.transaction_loop())));
        Probes {
            stop,
            tasks,
            targets: targets.len(),
        }
    }

    /// Stops the probes after their statement in flight (each waits at most
    /// [`STATEMENT_TIMEOUT`]) and returns what they saw, one log per target.
    pub(super) fn finish(self, runtime: &Runtime) -> Vec<ProbeLog> {
        self.stop.store(true, Ordering::Relaxed);
        let mut logs: Vec<ProbeLog> = (0..self.targets).map(|_| ProbeLog::default()).collect();
        for (at, task) in self.tasks {
            match runtime.block_on(task) {
                Ok(one) => logs[at].merge(one),
                Err(e) => logs[at].errors.push(format!("a probe task failed: {e}")),
            }
        }
        logs
    }
}

/// Which errors a probe's failed logins count among.
#[derive(Clone, Copy)]
enum Kind {
    Writer,
    Transactions,
}

/// One probe client: its connection (none until logged in, or after it was lost) and
/// its record.
struct Probe {
    kind: Kind,
    target: ProbeTarget,
    ids: Arc<AtomicI64>,
    stop: Arc<AtomicBool>,
    conn: Option<Client>,
    log: ProbeLog,
}

/// How a statement went.
enum Sent {
    Ok,
    /// An error reply or a lost connection, as the report words it.
    Failed(String),
}

impl Probe {
    fn new(
        kind: Kind,
        target: &ProbeTarget,
        ids: &Arc<AtomicI64>,
        stop: &Arc<AtomicBool>,
    ) -> Probe {
        Probe {
            kind,
            target: target.clone(),
            ids: ids.clone(),
            stop: stop.clone(),
            conn: None,
            log: ProbeLog::default(),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Inserts one row per autocommit statement until stopped.
    async fn write_loop(mut self) -> ProbeLog {
        while !self.stopped() {
            let id = self.ids.fetch_add(1, Ordering::Relaxed);
            let sql = format!(
                "INSERT INTO {}.{WRITES_TABLE} VALUES ({id})",
                self.target.database
            );
            match self.send(&sql).await {
                None => {}
                Some(Sent::Ok) => self.log.acked_writes.push((id, Instant::now())),
                Some(Sent::Failed(e)) => {
                    self.log.write_errors += 1;
                    self.log.errors.push(format!("INSERT: {e}"));
                }
            }
            tokio::time::sleep(PAUSE).await;
        }
        self.log
    }

    /// Runs `BEGIN; INSERT id; INSERT id+1; COMMIT` until stopped; after an error,
    /// ROLLBACK on the same connection if it is still there.
    async fn transaction_loop(mut self) -> ProbeLog {
        while !self.stopped() {
            let id = self.ids.fetch_add(2, Ordering::Relaxed);
            let table = format!("{}.{TRX_TABLE}", self.target.database);
            let statements = [
                ("BEGIN", "BEGIN".to_string()),
                ("INSERT", format!("INSERT INTO {table} VALUES ({id})")),
                ("INSERT", format!("INSERT INTO {table} VALUES ({})", id + 1)),
                ("COMMIT", "COMMIT".to_string()),
            ];
            let mut failed = None;
            for (what, sql) in &statements {
                match self.send(sql).await {
                    Some(Sent::Ok) => {}
                    None => break,
                    Some(Sent::Failed(e)) => {
                        failed = Some(format!("{what} in a transaction: {e}"));
                        break;
                    }
                }
            }
            match failed {
                None if self.conn.is_some() => {
                    let at = Instant::now();
                    self.log.acked_trx.extend([(id, at), (id + 1, at)]);
                }
                None => {}
                Some(e) => {
                    self.log.trx_errors += 1;
                    self.log.errors.push(e);
                    if self.conn.is_some() {
                        if let Some(Sent::Failed(e)) = self.send("ROLLBACK").await {
                            self.log.trx_errors += 1;
                            self.log.errors.push(format!("ROLLBACK: {e}"));
                        }
                    }
                }
            }
            tokio::time::sleep(PAUSE).await;
        }
        self.log
    }

    /// Sends one statement on the probe's connection, logging in first if it has none.
    /// `None` when it could not log in (that error is recorded here).
    async fn send(&mut self, sql: &str) -> Option<Sent> {
        if self.conn.is_none() {
            let t = &self.target;
            let login = tokio::time::timeout(
                STATEMENT_TIMEOUT,
                Client::connect(&t.addr, &t.user, &t.password),
            )
            .await;
            match login {
                Ok(Ok(c)) => self.conn = Some(c),
                Ok(Err(e)) => return self.login_failed(format!("{e:#}")).await,
                Err(_) => return self.login_failed("no answer within 30 s".into()).await,
            }
        }
        let conn = self.conn.as_mut().expect("logged in above");
        match tokio::time::timeout(STATEMENT_TIMEOUT, conn.query(sql)).await {
            Ok(Ok(Reply::Ok { .. })) => Some(Sent::Ok),
            Ok(Ok(Reply::Err(e))) => Some(Sent::Failed(e.to_string())),
            Ok(Ok(Reply::Rows(_))) => Some(Sent::Failed("a result set instead of OK".into())),
            Ok(Err(e)) => {
                self.conn = None;
                Some(Sent::Failed(format!("connection lost: {e:#}")))
            }
            Err(_) => {
                self.conn = None;
                Some(Sent::Failed("no reply within 30 s".into()))
            }
        }
    }

    /// A login that failed is an error the client saw.
    async fn login_failed(&mut self, why: String) -> Option<Sent> {
        match self.kind {
            Kind::Writer => self.log.write_errors += 1,
            Kind::Transactions => self.log.trx_errors += 1,
        }
        self.log.errors.push(format!("login: {why}"));
        tokio::time::sleep(RECONNECT_PAUSE).await;
        None
    }
}
