//! The binlog reader against a real MariaDB primary: which tables each transaction
//! reports, reconnection after the primary kills the dump, a refused login, an encrypted
//! and compressed binlog without checksums, and how soon a commit reaches the sink.
//!
//! The shared server is written to by other tests too, so each test looks only at
//! changes in its own database and reads with its own replication account.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice::backend::{BackendConn, ConnParams, Server};
use sluice::binlog::{self, Batch, BinlogConfig, BinlogSink, BinlogStatus, Change};
use sluice::config::{Secret, TlsMode};
use sluice::shutdown::{self, ShutdownTrigger};

use crate::support::{
    dedicated_server, fresh_database, shared_server, wait_until, MariaDb, MariaDbOptions,
    NATIVE_PASSWORD, NATIVE_USER,
};

/// Bound on every wait for the reader.
const WAIT: Duration = Duration::from_secs(10);

/// What the sink was told, with when.
#[derive(Debug)]
enum Seen {
    Up,
    Down(String),
    Batch(Instant, Batch),
}

struct Collect(mpsc::Sender<Seen>);

impl BinlogSink for Collect {
    fn changed(&self, batch: Batch) {
        let _ = self.0.send(Seen::Batch(Instant::now(), batch));
    }
    fn up(&self) {
        let _ = self.0.send(Seen::Up);
    }
    fn down(&self, reason: &str) {
        let _ = self.0.send(Seen::Down(reason.to_owned()));
    }
}

/// A replication account with the privileges the reader needs.
pub(crate) fn replication_account(server: &MariaDb, user: &str, password: &str) {
    server
        .execute(&format!(
            "CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}';\n\
             GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'%';"
        ))
        .expect("creating the replication account");
}

fn server_of(db: &MariaDb) -> Arc<Server> {
    Arc::new(Server {
        name: "primary".into(),
        endpoint: sluice::stream::Endpoint::Tcp(db.addr().to_string()),
        tls: TlsMode::Disabled,
        tls_config: None,
        max_connections: 10,
        counters: Default::default(),
        stmts: Default::default(),
        globals: Default::default(),
        grants: Default::default(),
    })
}

/// `binlog::run` on a runtime of its own, with a sink that reports into a channel.
pub(crate) struct Reader {
    rt: tokio::runtime::Runtime,
    trigger: ShutdownTrigger,
    task: Option<tokio::task::JoinHandle<()>>,
    status: Arc<BinlogStatus>,
    seen: mpsc::Receiver<Seen>,
}

impl Reader {
    pub(crate) fn start(db: &MariaDb, cfg: BinlogConfig) -> Reader {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let (tx, seen) = mpsc::channel();
        let status = Arc::new(BinlogStatus::new());
        let (trigger, shutdown) = shutdown::channel();
        let task = rt.spawn(binlog::run(
            server_of(db),
            None,
            cfg,
            Arc::new(Collect(tx)),
            status.clone(),
            shutdown,
        ));
        Reader {
            rt,
            trigger,
            task: Some(task),
            status,
            seen,
        }
    }

    fn next(&self, timeout: Duration) -> Option<Seen> {
        self.seen.recv_timeout(timeout).ok()
    }

    #[track_caller]
    pub(crate) fn expect_up(&self) {
        match self.next(WAIT) {
            Some(Seen::Up) => {}
            other => panic!(
                "expected up, got {other:?}; status {:?}",
                self.status.snapshot()
            ),
        }
    }

    /// The next batch touching `schema`, with only its changes there, and when the sink
    /// got it. Panics on `down` or after [`WAIT`].
    #[track_caller]
    pub(crate) fn next_batch(&self, schema: &str) -> (Instant, Batch) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left) {
                Some(Seen::Batch(at, mut batch)) => {
                    batch.changes.retain(|c| in_schema(c, schema));
                    if !batch.changes.is_empty() {
                        return (at, batch);
                    }
                }
                other => panic!(
                    "waiting for a batch in {schema}: got {other:?}; status {:?}",
                    self.status.snapshot()
                ),
            }
        }
    }

    /// Stops the reader and returns how long it took.
    pub(crate) fn stop(mut self) -> Duration {
        let started = Instant::now();
        self.trigger.trigger();
        let task = self.task.take().expect("stopped once");
        self.rt
            .block_on(async { tokio::time::timeout(WAIT, task).await })
            .expect("the reader stops within the bound")
            .expect("the reader task does not panic");
        started.elapsed()
    }
}

fn in_schema(change: &Change, schema: &str) -> bool {
    match change {
        Change::Rows { schema: s, .. } => s == schema,
        Change::Statement { schema: s, .. } | Change::Unknown { schema: s, .. } => {
            s.as_deref() == Some(schema)
        }
    }
}

/// A batch as a sorted list: table names, "sql: <statement>", "unknown: <reason>".
fn describe(batch: &Batch) -> Vec<String> {
    let set: BTreeSet<String> = batch
        .changes
        .iter()
        .map(|c| match c {
            Change::Rows { table, .. } => table.clone(),
            Change::Statement { sql, .. } => format!("sql: {sql}"),
            Change::Unknown { reason, .. } => format!("unknown: {reason}"),
        })
        .collect();
    set.into_iter().collect()
}

/// Whether `got` matches `expected` one to one, where an expected "sql: ..." or
/// "unknown: ..." entry only needs to be a prefix.
fn matches(got: &[String], expected: &[&str]) -> bool {
    got.len() == expected.len()
        && expected.iter().all(|e| {
            got.iter().any(|g| {
                if e.starts_with("sql: ") || e.starts_with("unknown: ") {
                    g.starts_with(e)
                } else {
                    g == e
                }
            })
        })
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

#[test]
fn each_transaction_reports_exactly_its_tables() {
    let db = shared_server();
    let schema = "binlog_tables";
    fresh_database(db, schema);
    replication_account(db, "binlog_tables", "binlog_tables_pw");
    db.execute(&format!(
        "USE {schema};\n\
         CREATE TABLE t1 (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;\n\
         CREATE TABLE t2 (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;\n\
         CREATE TABLE t3 (id INT PRIMARY KEY) ENGINE=InnoDB;\n\
         CREATE TABLE audit (id INT AUTO_INCREMENT PRIMARY KEY, t3_id INT) ENGINE=InnoDB;\n\
         CREATE TABLE m (id INT) ENGINE=MyISAM;\n\
         CREATE TABLE big (b LONGBLOB) ENGINE=InnoDB;\n\
         CREATE TRIGGER t3_audit AFTER INSERT ON t3 FOR EACH ROW \
           INSERT INTO audit (t3_id) VALUES (NEW.id);\n\
         INSERT INTO t1 VALUES (1, 1), (2, 2);\n\
         INSERT INTO t2 VALUES (1, 1), (2, 2);"
    ))
    .expect("creating the tables");

    let mut cfg = BinlogConfig::new("binlog_tables", Secret("binlog_tables_pw".into()));
    cfg.server_id = 4_000_000_001;
    let reader = Reader::start(db, cfg);
    reader.expect_up();

    // Each statement, then exactly what the transaction changed in this schema.
    let steps: &[(&str, &[&str])] = &[
        ("INSERT INTO t1 VALUES (3, 3)", &["t1"]),
        (
            "BEGIN; INSERT INTO t2 VALUES (3, 3); UPDATE t1 SET v = v + 1 WHERE id = 1; \
             DELETE FROM t2 WHERE id = 3; COMMIT",
            &["t1", "t2"],
        ),
        (
            "UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.v = t1.v + 10, t2.v = t2.v + 10",
            &["t1", "t2"],
        ),
        ("INSERT INTO t3 VALUES (1)", &["audit", "t3"]),
        // A rolled-back InnoDB transaction is not logged at all: the next batch is the
        // next step's.
        ("BEGIN; INSERT INTO t1 VALUES (10, 10); ROLLBACK", &[]),
        ("INSERT INTO m VALUES (1)", &["m"]),
        // A MyISAM change cannot be rolled back, so it is logged and reported; the
        // rolled-back InnoDB change is not.
        (
            "BEGIN; INSERT INTO m VALUES (2); INSERT INTO t1 VALUES (11, 11); ROLLBACK",
            &["m"],
        ),
        ("TRUNCATE TABLE t2", &["sql: TRUNCATE TABLE t2"]),
        ("CREATE TABLE t4 (id INT)", &["sql: CREATE TABLE t4"]),
        ("ALTER TABLE t4 ADD COLUMN c INT", &["sql: ALTER TABLE t4"]),
        ("DROP TABLE t4", &["sql: DROP TABLE `t4`"]),
        // A row event larger than one 16 MiB protocol packet.
        (
            "INSERT INTO big VALUES (REPEAT('x', 17 * 1024 * 1024))",
            &["big"],
        ),
        ("DELETE FROM t1 WHERE id = 2", &["t1"]),
    ];
    let mut gtids = Vec::new();
    for (sql, expected) in steps {
        db.execute(&format!("USE {schema}; {sql};"))
            .unwrap_or_else(|e| panic!("{sql}: {e:#}"));
        if expected.is_empty() {
            continue;
        }
        let (_, batch) = reader.next_batch(schema);
        let got = describe(&batch);
        assert!(
            matches(&got, expected),
            "{sql}: expected {expected:?}, got {got:?}"
        );
        assert!(
            (batch.event_time as i64 - now_unix()).abs() <= 5,
            "{sql}: event time {} is not now",
            batch.event_time
        );
        let gtid = batch
            .gtid
            .clone()
            .unwrap_or_else(|| panic!("{sql}: no GTID"));
        assert!(gtid.starts_with("0-1-"), "{sql}: GTID {gtid}");
        gtids.push(gtid);
    }
    let distinct: BTreeSet<_> = gtids.iter().collect();
    assert_eq!(distinct.len(), gtids.len(), "one GTID per batch: {gtids:?}");
    // Nothing more of this schema arrives.
    let deadline = Instant::now() + Duration::from_millis(500);
    while let Some(seen) = reader.next(deadline.saturating_duration_since(Instant::now())) {
        if let Seen::Batch(_, mut batch) = seen {
            batch.changes.retain(|c| in_schema(c, schema));
            assert!(batch.changes.is_empty(), "unexpected batch {batch:?}");
        }
    }

    let status = reader.status.snapshot();
    assert!(status.connected, "{status:?}");
    assert_eq!(status.reconnects, 0, "{status:?}");
    assert!(status.gtid.is_some(), "{status:?}");
    assert!(
        status.file.as_deref().is_some_and(|f| f.contains("-bin.")),
        "{status:?}"
    );
    assert!(status.batches >= steps.len() as u64 - 1, "{status:?}");
    assert!(status.last_event_time.is_some(), "{status:?}");
    let stopped_in = reader.stop();
    assert!(
        stopped_in < Duration::from_secs(2),
        "stopping took {stopped_in:?}"
    );
}

#[test]
fn a_killed_dump_goes_down_then_up_and_changes_keep_coming() {
    let db = shared_server();
    let schema = "binlog_reconnect";
    let user = "binlog_killed";
    fresh_database(db, schema);
    replication_account(db, user, "binlog_killed_pw");
    db.execute(&format!(
        "USE {schema}; CREATE TABLE t (id INT PRIMARY KEY);"
    ))
    .expect("creating the table");

    let mut cfg = BinlogConfig::new(user, Secret("binlog_killed_pw".into()));
    cfg.server_id = 4_000_000_002;
    cfg.reconnect_interval = Duration::from_millis(200);
    let reader = Reader::start(db, cfg);
    reader.expect_up();
    db.execute(&format!("INSERT INTO {schema}.t VALUES (1)"))
        .expect("inserting");
    assert_eq!(describe(&reader.next_batch(schema).1), ["t"]);

    let ids = db
        .execute(&format!(
            "SELECT ID FROM information_schema.PROCESSLIST \
             WHERE USER = '{user}' AND COMMAND LIKE 'Binlog Dump%'"
        ))
        .expect("reading the process list");
    let ids: Vec<&str> = ids.lines().skip(1).collect();
    assert_eq!(ids.len(), 1, "one dump thread: {ids:?}");
    db.execute(&format!("KILL {}", ids[0]))
        .expect("killing the dump");

    // Other tests write to the shared server: their batches may come first.
    let deadline = Instant::now() + WAIT;
    loop {
        match reader.next(deadline.saturating_duration_since(Instant::now())) {
            Some(Seen::Down(reason)) => {
                assert!(!reason.is_empty());
                break;
            }
            Some(Seen::Batch(..)) => continue,
            other => panic!("expected down, got {other:?}"),
        }
    }
    reader.expect_up();
    let status = reader.status.snapshot();
    assert!(status.connected, "{status:?}");
    assert_eq!(status.reconnects, 1, "{status:?}");
    assert!(status.errors >= 1, "{status:?}");
    assert!(status.last_error.is_some(), "{status:?}");

    db.execute(&format!("INSERT INTO {schema}.t VALUES (2)"))
        .expect("inserting");
    assert_eq!(describe(&reader.next_batch(schema).1), ["t"]);
    reader.stop();
}

#[test]
fn a_wrong_password_is_reported_and_retried_until_shutdown() {
    let db = shared_server();
    replication_account(db, "binlog_refused", "the_right_one");
    let mut cfg = BinlogConfig::new("binlog_refused", Secret("not_the_password".into()));
    cfg.server_id = 4_000_000_003;
    cfg.reconnect_interval = Duration::from_millis(100);
    let reader = Reader::start(db, cfg);
    assert!(
        wait_until(WAIT, || reader.status.snapshot().errors >= 3),
        "{:?}",
        reader.status.snapshot()
    );
    let status = reader.status.snapshot();
    assert!(!status.connected, "{status:?}");
    let error = status.last_error.clone().unwrap_or_default();
    assert!(error.contains("Access denied"), "{status:?}");
    assert!(!error.contains("not_the_password"), "{status:?}");
    assert_eq!(status.reconnects, 0, "{status:?}");
    assert!(
        reader.next(Duration::ZERO).is_none(),
        "the sink heard nothing"
    );
    let stopped_in = reader.stop();
    assert!(
        stopped_in < Duration::from_secs(1),
        "stopping took {stopped_in:?}"
    );
}

#[test]
fn encrypted_compressed_binlog_without_checksums_is_read() {
    let dir = tempfile::tempdir().expect("a directory for the key file");
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, format!("1;{}\n", "a1".repeat(32))).expect("writing the key file");
    let db = dedicated_server(MariaDbOptions {
        extra_args: vec![
            "--plugin-load-add=file_key_management".into(),
            format!("--file-key-management-filename={}", keys.display()),
            "--encrypt-binlog=ON".into(),
            "--binlog-checksum=NONE".into(),
            "--log-bin-compress=ON".into(),
        ],
        ..MariaDbOptions::default()
    });
    let schema = "binlog_encrypted";
    fresh_database(&db, schema);
    replication_account(&db, "binlog_enc", "binlog_enc_pw");
    db.execute(&format!(
        "USE {schema}; CREATE TABLE t (id INT PRIMARY KEY, pad TEXT);"
    ))
    .expect("creating the table");

    let mut cfg = BinlogConfig::new("binlog_enc", Secret("binlog_enc_pw".into()));
    cfg.reconnect_interval = Duration::from_millis(200);
    let reader = Reader::start(&db, cfg);
    reader.expect_up();

    let steps: &[(&str, &[&str])] = &[
        ("INSERT INTO t VALUES (1, 'short')", &["t"]),
        // Larger than log_bin_compress_min_len: a compressed row event.
        ("INSERT INTO t VALUES (2, REPEAT('y', 2000))", &["t"]),
        (
            "CREATE TABLE short_ddl (id INT)",
            &["sql: CREATE TABLE short_ddl"],
        ),
    ];
    for (sql, expected) in steps {
        db.execute(&format!("USE {schema}; {sql};"))
            .unwrap_or_else(|e| panic!("{sql}: {e:#}"));
        let batch = reader.next_batch(schema).1;
        let got = describe(&batch);
        assert!(
            matches(&got, expected),
            "{sql}: expected {expected:?}, got {got:?}"
        );
        // The images of a compressed row event are not kept; an encrypted one's are.
        if let [Change::Rows { rows, .. }] = &batch.changes[..] {
            assert_eq!(rows.is_some(), !sql.contains("REPEAT"), "{sql}: {rows:?}");
        }
    }
    // A statement long enough to be compressed cannot be read, and says so.
    let long_ddl = format!(
        "CREATE TABLE long_ddl (id INT) COMMENT '{}'",
        "z".repeat(400)
    );
    db.execute(&format!("USE {schema}; {long_ddl};"))
        .expect("the long statement");
    let got = describe(&reader.next_batch(schema).1);
    assert!(
        matches(&got, &["unknown: a compressed statement"]),
        "{got:?}"
    );

    // A new binlog file, then one with checksums: read on, no reconnect.
    let before = reader.status.snapshot().file;
    db.execute("FLUSH BINARY LOGS")
        .expect("rotating the binlog");
    db.execute(&format!(
        "INSERT INTO {schema}.t VALUES (3, 'after rotate')"
    ))
    .expect("inserting");
    assert_eq!(describe(&reader.next_batch(schema).1), ["t"]);
    db.execute("SET GLOBAL binlog_checksum = CRC32")
        .expect("turning checksums on");
    db.execute(&format!("INSERT INTO {schema}.t VALUES (4, 'checksummed')"))
        .expect("inserting");
    assert_eq!(describe(&reader.next_batch(schema).1), ["t"]);
    let status = reader.status.snapshot();
    assert_ne!(status.file, before, "{status:?}");
    assert_eq!(status.reconnects, 0, "{status:?}");
    assert_eq!(status.errors, 0, "{status:?}");
    reader.stop();
}

#[test]
fn commit_to_sink_delay() {
    const WRITES: usize = 200;
    let db = shared_server();
    let schema = "binlog_delay";
    fresh_database(db, schema);
    replication_account(db, "binlog_delay", "binlog_delay_pw");
    db.execute(&format!(
        "USE {schema}; CREATE TABLE t (id INT PRIMARY KEY);"
    ))
    .expect("creating the table");
    let mut cfg = BinlogConfig::new("binlog_delay", Secret("binlog_delay_pw".into()));
    cfg.server_id = 4_000_000_004;
    let reader = Reader::start(db, cfg);
    reader.expect_up();

    let server = server_of(db);
    let creds = sluice::auth::BackendCredentials::new(NATIVE_USER, Secret(NATIVE_PASSWORD.into()));
    let params = ConnParams {
        wire_caps: 0,
        mariadb_caps: 0,
        charset: 45,
        track_state: false,
    };
    let mut conn = reader
        .rt
        .block_on(BackendConn::connect(
            server,
            &creds,
            &params,
            Some(schema.as_bytes()),
        ))
        .expect("a direct connection");
    let mut run = |sql: &str| {
        reader
            .rt
            .block_on(conn.query_scalar(sql))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    };

    // From sending the COMMIT (or autocommitted INSERT) and from its OK, to the sink.
    let mut from_sent = Vec::with_capacity(WRITES);
    let mut from_ok = Vec::with_capacity(WRITES);
    for i in 0..WRITES {
        let commit = if i % 2 == 0 {
            format!("INSERT INTO t VALUES ({i})")
        } else {
            run("BEGIN");
            run(&format!("INSERT INTO t VALUES ({i})"));
            "COMMIT".to_owned()
        };
        let sent = Instant::now();
        run(&commit);
        let ok = Instant::now();
        let (at, batch) = reader.next_batch(schema);
        assert_eq!(describe(&batch), ["t"], "write {i}");
        from_sent.push(at.duration_since(sent).as_secs_f64() * 1000.0);
        let after_ok = match at.checked_duration_since(ok) {
            Some(d) => d.as_secs_f64(),
            None => -ok.duration_since(at).as_secs_f64(),
        };
        from_ok.push(after_ok * 1000.0);
    }
    for (what, mut ms) in [
        ("commit sent -> sink", from_sent),
        ("commit OK received -> sink", from_ok),
    ] {
        ms.sort_by(f64::total_cmp);
        eprintln!(
            "binlog delay over {WRITES} commits, {what}: min {:.3} ms, median {:.3} ms, \
             p99 {:.3} ms, max {:.3} ms",
            ms[0],
            ms[WRITES / 2],
            ms[WRITES * 99 / 100],
            ms[WRITES - 1]
        );
    }
    drop(conn);
    reader.stop();
}

/// Sends SIGCONT to a stopped server when dropped, so that a failing test leaves no
/// frozen process behind.
struct Frozen(u32);

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = sluice_sandbox::send_signal(self.0, "CONT");
    }
}

#[test]
fn heartbeats_keep_a_quiet_stream_and_a_silent_primary_is_noticed() {
    let db = dedicated_server(MariaDbOptions::default());
    replication_account(&db, "binlog_hb", "binlog_hb_pw");
    let mut cfg = BinlogConfig::new("binlog_hb", Secret("binlog_hb_pw".into()));
    cfg.heartbeat = Duration::from_millis(200);
    cfg.reconnect_interval = Duration::from_millis(200);
    cfg.connect_timeout = Duration::from_secs(1);
    let reader = Reader::start(&db, cfg);
    reader.expect_up();

    // Nothing is written: only heartbeats arrive, and they keep the stream up for
    // longer than the silence limit (2 x 200 ms + 1 s).
    let events = reader.status.snapshot().events;
    assert!(
        reader.next(Duration::from_secs(2)).is_none(),
        "the stream stays up"
    );
    let heartbeats = reader.status.snapshot().events - events;
    assert!(heartbeats >= 5, "{heartbeats} heartbeats in 2 s");

    sluice_sandbox::send_signal(db.pid(), "STOP").expect("stopping the server");
    let frozen = Frozen(db.pid());
    let stopped = Instant::now();
    match reader.next(WAIT) {
        Some(Seen::Down(reason)) => {
            assert!(reason.contains("sent nothing"), "{reason}");
        }
        other => panic!("expected down, got {other:?}"),
    }
    let noticed = stopped.elapsed();
    assert!(
        noticed < Duration::from_secs(3),
        "a silent primary noticed after {noticed:?}"
    );
    drop(frozen);
    reader.expect_up();
    assert_eq!(reader.status.snapshot().reconnects, 1);
    reader.stop();
}
