//! The upgrade scenario's probe clients, one task each on the benchmark's runtime, all
//! through Sluice over plain TCP: idle connections that wake up now and then to check
//! they are still the same session, a client whose transactions span the hand-overs, a
//! client executing a prepared statement, and a client that connects, queries and
//! disconnects in a loop. Each records every operation it made (when, how long it
//! waited, what came of it); [`super::tally`] puts them in hand-over windows.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sluice_wire::statement::PrepareOk;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::client::{Client, Reply, Rows};

/// Longest wait for a login or a reply: past Sluice's drain bound and grace, so that a
/// session held in a draining process is seen ending, not given up on.
const TIMEOUT: Duration = Duration::from_secs(30);
/// After a failed login, before the next attempt.
const RECONNECT_PAUSE: Duration = Duration::from_millis(50);
/// How long each idle probe stays idle between two checks: from well under a second,
/// to catch a hand-over in the middle of a burst, to a few seconds.
const IDLE_PERIODS_MS: [u64; 4] = [250, 500, 1000, 2000];
/// Statements of one probe transaction (an insert and a check each), and the pause
/// between them: a transaction lasts about a second, so that hand-overs land in one.
const TRX_STEPS: i64 = 10;
const TRX_PAUSE: Duration = Duration::from_millis(100);
/// Between two executes of the prepared probe, and between two connections of the
/// connect probe: samples, not load.
const PREPARED_PAUSE: Duration = Duration::from_millis(10);
const CONNECT_PAUSE: Duration = Duration::from_millis(20);
/// The prepared probe checks its session id every this many executes.
const PREPARED_ID_EVERY: u64 = 10;
/// MariaDB's "Unknown prepared statement handler": the session lost its statement.
const ER_UNKNOWN_STMT_HANDLER: u16 = 1243;

/// The probes' own table, for the transaction probe's rows.
pub(super) const TRX_TABLE: &str = "upgrade_trx";

/// The kinds of client whose figures the report keeps apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Kind {
    /// sysbench's threads (their figures come from its reports each second).
    Sysbench,
    /// Long-lived connections, idle between checks of their id and a user variable.
    Idle,
    /// Transactions of about a second, back to back, checking their own rows.
    Transaction,
    /// A prepared statement executed over and over on one connection.
    Prepared,
    /// A new connection for each query.
    Connect,
}

impl Kind {
    pub(super) const ALL: [Kind; 5] = [
        Kind::Sysbench,
        Kind::Idle,
        Kind::Transaction,
        Kind::Prepared,
        Kind::Connect,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Sysbench => "sysbench",
            Kind::Idle => "idle",
            Kind::Transaction => "transaction",
            Kind::Prepared => "prepared",
            Kind::Connect => "connect",
        }
    }
}

/// What came of one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    Ok,
    /// An error reply or a failed login: the client saw an error.
    Error(String),
    /// The connection closed under the client, or gave no reply within [`TIMEOUT`].
    Lost(String),
    /// Answered, by a session of another id than the one this connection had.
    IdChanged {
        was: u64,
        now: u64,
    },
    /// Answered in the same session, without the state the client left there.
    StateLost(String),
}

/// One operation of a probe: a statement, or for the connect probe a whole connection.
#[derive(Debug, Clone)]
pub(super) struct Op {
    pub kind: Kind,
    pub at: Instant,
    /// How long the client waited for the answer.
    pub took: Duration,
    pub outcome: Outcome,
}

/// Where the probes connect and as whom.
#[derive(Debug, Clone)]
pub(super) struct ProbeTarget {
    /// "host:port" of Sluice.
    pub addr: String,
    pub user: String,
    pub password: String,
    pub database: String,
    /// Rows of `sbtest1`, which the prepared probe reads by id.
    pub table_size: u64,
}

/// The running probes.
pub(super) struct Probes {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<Vec<Op>>>,
}

impl Probes {
    /// Starts every probe on `runtime`.
    pub(super) fn start(runtime: &Runtime, target: &ProbeTarget) -> Probes {
        let stop = Arc::new(AtomicBool::new(false));
        // User-variable tokens and transaction numbers, unique over all probes.
        let numbers = Arc::new(AtomicI64::new(1));
        let probe = || Probe {
            target: target.clone(),
            stop: stop.clone(),
            numbers: numbers.clone(),
            ops: Vec::new(),
        };
        let mut tasks: Vec<JoinHandle<Vec<Op>>> = IDLE_PERIODS_MS
            .iter()
            .map(|&ms| runtime.spawn(probe().idle_loop(Duration::from_millis(ms))))
            .collect();
        tasks.push(runtime.spawn(probe().transaction_loop()));
        tasks.push(runtime.spawn(probe().prepared_loop()));
        tasks.push(runtime.spawn(probe().connect_loop()));
        Probes { stop, tasks }
    }

    /// Stops the probes after their operation in flight and returns every operation,
    /// in the order they began.
    pub(super) fn finish(self, runtime: &Runtime) -> Vec<Op> {
        self.stop.store(true, Ordering::Relaxed);
        let mut ops = Vec::new();
        for task in self.tasks {
            match runtime.block_on(task) {
                Ok(one) => ops.extend(one),
                Err(e) => ops.push(Op {
                    kind: Kind::Idle,
                    at: Instant::now(),
                    took: Duration::ZERO,
                    outcome: Outcome::Error(format!("a probe task failed: {e}")),
                }),
            }
        }
        ops.sort_by_key(|op| op.at);
        ops
    }
}

/// A probe's connection and what it left in its session.
struct Session {
    conn: Client,
    id: u64,
    /// The value of `@probe` it set.
    token: i64,
    /// The prepared probe's statement.
    stmt: Option<PrepareOk>,
}

/// What a statement got: its answer, or how the connection failed.
enum Sent {
    Answer(Reply, Rows),
    Failed(String),
}

/// One probe client and its record.
struct Probe {
    target: ProbeTarget,
    stop: Arc<AtomicBool>,
    numbers: Arc<AtomicI64>,
    ops: Vec<Op>,
}

impl Probe {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn record(&mut self, kind: Kind, at: Instant, outcome: Outcome) {
        self.ops.push(Op {
            kind,
            at,
            took: at.elapsed(),
            outcome,
        });
    }

    /// Logs in, sets `@probe` and learns the session's id; the login is an operation
    /// of its own. `None` (recorded) when any of it failed.
    async fn open(&mut self, kind: Kind) -> Option<Session> {
        let at = Instant::now();
        let t = &self.target;
        let conn =
            match tokio::time::timeout(TIMEOUT, Client::connect(&t.addr, &t.user, &t.password))
                .await
            {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return self.login_failed(kind, at, format!("login: {e:#}")).await,
                Err(_) => return self.login_failed(kind, at, "login: no answer".into()).await,
            };
        let token = self.numbers.fetch_add(1, Ordering::Relaxed);
        let mut session = Session {
            conn,
            id: 0,
            token,
            stmt: None,
        };
        let sql = format!("SET @probe = {token}");
        match send(&mut session, &sql).await {
            Sent::Answer(Reply::Ok { .. }, _) => {}
            Sent::Answer(other, _) => {
                return self
                    .login_failed(kind, at, format!("{sql}: {other:?}"))
                    .await
            }
            Sent::Failed(e) => return self.login_failed(kind, at, format!("{sql}: {e}")).await,
        }
        match send(&mut session, "SELECT CONNECTION_ID()").await {
            Sent::Answer(Reply::Rows(1), rows) => match number(&rows, 0) {
                Some(id) => session.id = id,
                None => {
                    return self
                        .login_failed(kind, at, format!("CONNECTION_ID(): {rows:?}"))
                        .await
                }
            },
            Sent::Answer(other, _) => {
                return self
                    .login_failed(kind, at, format!("CONNECTION_ID(): {other:?}"))
                    .await
            }
            Sent::Failed(e) => {
                return self
                    .login_failed(kind, at, format!("CONNECTION_ID(): {e}"))
                    .await
            }
        }
        self.record(kind, at, Outcome::Ok);
        Some(session)
    }

    async fn login_failed(&mut self, kind: Kind, at: Instant, why: String) -> Option<Session> {
        self.record(kind, at, Outcome::Error(why));
        tokio::time::sleep(RECONNECT_PAUSE).await;
        None
    }

    /// The outcome of a check that reads `CONNECTION_ID()` in column 0; the session
    /// takes a new id as its own so that one change is counted once.
    fn check_id(session: &mut Session, rows: &Rows) -> Option<Outcome> {
        let now = number(rows, 0)?;
        if now == session.id {
            return None;
        }
        let was = std::mem::replace(&mut session.id, now);
        Some(Outcome::IdChanged { was, now })
    }

    /// Idle for `period`, then `SELECT CONNECTION_ID(), @probe`, until stopped.
    async fn idle_loop(mut self, period: Duration) -> Vec<Op> {
        let mut session = None;
        while !self.stopped() {
            let Some(s) = session.as_mut() else {
                session = self.open(Kind::Idle).await;
                continue;
            };
            tokio::time::sleep(period).await;
            let at = Instant::now();
            let outcome = match send(s, "SELECT CONNECTION_ID(), @probe").await {
                Sent::Failed(e) => Outcome::Lost(e),
                Sent::Answer(Reply::Rows(1), rows) => match Self::check_id(s, &rows) {
                    Some(changed) => changed,
                    None if number(&rows, 1) == Some(s.token as u64) => Outcome::Ok,
                    None => Outcome::StateLost(format!(
                        "@probe is {:?}, not {}",
                        rows[0].get(1),
                        s.token
                    )),
                },
                Sent::Answer(other, _) => unexpected(other),
            };
            if matches!(outcome, Outcome::Lost(_)) {
                session = None;
            }
            self.record(Kind::Idle, at, outcome);
        }
        self.ops
    }

    /// Transactions of [`TRX_STEPS`] inserts, each followed by a check that the
    /// transaction still sees its own rows (and the session its id), until stopped.
    async fn transaction_loop(mut self) -> Vec<Op> {
        let mut session = None;
        while !self.stopped() {
            let Some(s) = session.as_mut() else {
                session = self.open(Kind::Transaction).await;
                continue;
            };
            let txn = self.numbers.fetch_add(1, Ordering::Relaxed);
            let table = format!("{}.{TRX_TABLE}", self.target.database);
            let mut statements = vec![("BEGIN".to_string(), None)];
            for n in 0..TRX_STEPS {
                statements.push((format!("INSERT INTO {table} VALUES ({txn}, {n})"), None));
                statements.push((
                    format!("SELECT CONNECTION_ID(), COUNT(*) FROM {table} WHERE txn = {txn}"),
                    Some(n as u64 + 1),
                ));
            }
            statements.push(("COMMIT".to_string(), None));
            let mut failed = false;
            for (sql, rows_seen) in &statements {
                let at = Instant::now();
                let outcome = match (send(s, sql).await, rows_seen) {
                    (Sent::Failed(e), _) => Outcome::Lost(e),
                    (Sent::Answer(Reply::Ok { .. }, _), None) => Outcome::Ok,
                    (Sent::Answer(Reply::Rows(1), rows), Some(want)) => {
                        match Self::check_id(s, &rows) {
                            Some(changed) => changed,
                            None if number(&rows, 1) == Some(*want) => Outcome::Ok,
                            None => Outcome::StateLost(format!(
                                "the open transaction sees {:?} of its {want} rows",
                                rows[0].get(1)
                            )),
                        }
                    }
                    (Sent::Answer(other, _), _) => unexpected(other),
                };
                failed = outcome != Outcome::Ok;
                self.record(Kind::Transaction, at, outcome);
                if failed {
                    break;
                }
                if rows_seen.is_some() {
                    tokio::time::sleep(TRX_PAUSE).await;
                }
            }
            if failed {
                // Not recorded: the failure that led here was.
                if let Sent::Failed(_) = send(s, "ROLLBACK").await {
                    session = None;
                }
            }
        }
        self.ops
    }

    /// Executes `SELECT c FROM sbtest1 WHERE id = ?` on one connection, checking the
    /// session's id now and then, until stopped.
    async fn prepared_loop(mut self) -> Vec<Op> {
        let mut session: Option<Session> = None;
        let mut n: u64 = 0;
        while !self.stopped() {
            let Some(s) = session.as_mut() else {
                session = self.open(Kind::Prepared).await;
                continue;
            };
            let at = Instant::now();
            let Some(stmt) = s.stmt else {
                let sql = format!(
                    "SELECT c FROM {}.sbtest1 WHERE id = ?",
                    self.target.database
                );
                let outcome = match tokio::time::timeout(TIMEOUT, s.conn.prepare(&sql)).await {
                    Ok(Ok(Ok(stmt))) => {
                        s.stmt = Some(stmt);
                        Outcome::Ok
                    }
                    Ok(Ok(Err(e))) => Outcome::Error(format!("prepare: {e}")),
                    Ok(Err(e)) => Outcome::Lost(format!("prepare: {e:#}")),
                    Err(_) => Outcome::Lost("prepare: no reply".into()),
                };
                if matches!(outcome, Outcome::Lost(_)) {
                    session = None;
                }
                self.record(Kind::Prepared, at, outcome);
                continue;
            };
            n += 1;
            let id = (n % self.target.table_size.max(1)) as i64 + 1;
            let outcome = match tokio::time::timeout(TIMEOUT, s.conn.execute(&stmt, &[id])).await {
                Ok(Ok(Reply::Rows(1))) => Outcome::Ok,
                Ok(Ok(Reply::Err(e))) if e.code == ER_UNKNOWN_STMT_HANDLER => {
                    s.stmt = None;
                    Outcome::StateLost(format!("execute: {e}"))
                }
                Ok(Ok(other)) => unexpected(other),
                Ok(Err(e)) => Outcome::Lost(format!("execute: {e:#}")),
                Err(_) => Outcome::Lost("execute: no reply".into()),
            };
            let mut lost = matches!(outcome, Outcome::Lost(_));
            self.record(Kind::Prepared, at, outcome);
            if !lost && n.is_multiple_of(PREPARED_ID_EVERY) {
                let at = Instant::now();
                let outcome = match send(s, "SELECT CONNECTION_ID()").await {
                    Sent::Failed(e) => Outcome::Lost(e),
                    Sent::Answer(Reply::Rows(1), rows) => {
                        Self::check_id(s, &rows).unwrap_or(Outcome::Ok)
                    }
                    Sent::Answer(other, _) => unexpected(other),
                };
                lost = matches!(outcome, Outcome::Lost(_));
                self.record(Kind::Prepared, at, outcome);
            }
            if lost {
                session = None;
            }
            tokio::time::sleep(PREPARED_PAUSE).await;
        }
        self.ops
    }

    /// Connects, runs `SELECT 1`, says goodbye, until stopped: one operation each.
    async fn connect_loop(mut self) -> Vec<Op> {
        while !self.stopped() {
            let at = Instant::now();
            let t = &self.target;
            let outcome =
                match tokio::time::timeout(TIMEOUT, Client::connect(&t.addr, &t.user, &t.password))
                    .await
                {
                    Ok(Ok(mut conn)) => {
                        match tokio::time::timeout(TIMEOUT, conn.query("SELECT 1")).await {
                            Ok(Ok(Reply::Rows(1))) => {
                                conn.quit().await;
                                Outcome::Ok
                            }
                            Ok(Ok(other)) => unexpected(other),
                            Ok(Err(e)) => Outcome::Lost(format!("{e:#}")),
                            Err(_) => Outcome::Lost("no reply".into()),
                        }
                    }
                    Ok(Err(e)) => Outcome::Error(format!("login: {e:#}")),
                    Err(_) => Outcome::Error("login: no answer".into()),
                };
            self.record(Kind::Connect, at, outcome);
            tokio::time::sleep(CONNECT_PAUSE).await;
        }
        self.ops
    }
}

/// Sends one text statement, bounded by [`TIMEOUT`].
async fn send(session: &mut Session, sql: &str) -> Sent {
    match tokio::time::timeout(TIMEOUT, session.conn.query_values(sql)).await {
        Ok(Ok((reply, rows))) => Sent::Answer(reply, rows),
        Ok(Err(e)) => Sent::Failed(format!("{sql}: {e:#}")),
        Err(_) => Sent::Failed(format!("{sql}: no reply within {TIMEOUT:?}")),
    }
}

/// An answer that is not what the statement gives: an error reply, or a shape the
/// statement cannot have.
fn unexpected(reply: Reply) -> Outcome {
    match reply {
        Reply::Err(e) => Outcome::Error(e.to_string()),
        other => Outcome::Error(format!("unexpected reply {other:?}")),
    }
}

/// Column `column` of the first row, as a number.
fn number(rows: &Rows, column: usize) -> Option<u64> {
    rows.first()?.get(column)?.as_deref()?.parse().ok()
}
