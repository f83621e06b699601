//! Row-level cache invalidation against a real MariaDB: a read decided by a table's
//! primary key is invalidated only by writes to its keys (text and prepared, through
//! Sluice or read from the binlog), every write whose rows no key tells still reaches
//! the whole table, and an interleaved checker finds no read older than the writes
//! acknowledged before it began.

use crate::cache::{execute, prepare};
use crate::routing::{admin_get, ok};
use crate::support::proxy::Config;
use crate::support::wire::RawConn;
use crate::support::{
    dedicated_server, fresh_database, shared_server, wait_until, MariaDb, MariaDbOptions, Sluice,
    NATIVE_PASSWORD, NATIVE_USER,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROWS: i64 = 50;

fn config(server: &MariaDb, binlog: bool) -> Config {
    let config = Config::for_server(server).cache_rule("all-selects", "(?i)^\\s*SELECT", "1h");
    if !binlog {
        return config;
    }
    let mut table = toml::Table::new();
    table.insert("user".into(), NATIVE_USER.into());
    table.insert("password".into(), NATIVE_PASSWORD.into());
    config.cache("binlog", table)
}

/// `db.t (id INT PRIMARY KEY, v)` with rows 1..=50 ('v1'...), and `db.names` keyed by a
/// case-insensitive VARCHAR.
fn tables(server: &MariaDb, db: &str) {
    fresh_database(server, db);
    let values: Vec<String> = (1..=ROWS).map(|i| format!("({i}, 'v{i}')")).collect();
    server
        .execute(&format!(
            "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20));
             INSERT INTO {db}.t VALUES {};
             CREATE TABLE {db}.names (name VARCHAR(20) PRIMARY KEY, n INT)
               DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_general_ci;
             INSERT INTO {db}.names VALUES ('Bob', 1), ('Ann', 1);",
            values.join(", ")
        ))
        .unwrap();
}

fn login(sluice: &Sluice, db: &str) -> RawConn {
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    ok(&mut c, &format!("USE {db}"));
    c
}

/// Waits until the binlog reader follows the primary.
fn following(sluice: &Sluice, config: &Config) {
    let stats = || admin_get(sluice, config, "/v1/cache/stats");
    assert!(
        wait_until(Duration::from_secs(15), || stats()["binlog"] == "following"),
        "{}",
        stats()
    );
}

/// Waits until row `id` reads `want` through Sluice (a direct write seen in the binlog).
fn reads_soon(c: &mut RawConn, id: i64, want: Option<&str>, stats: impl Fn() -> serde_json::Value) {
    assert!(
        wait_until(Duration::from_secs(5), || read(c, id).as_deref() == want),
        "row {id} never read {want:?}: {}",
        stats()
    );
}

fn hits(sluice: &Sluice, config: &Config) -> u64 {
    admin_get(sluice, config, "/v1/cache/stats")["totals"]["hits"]
        .as_u64()
        .unwrap()
}

fn read(c: &mut RawConn, id: i64) -> Option<String> {
    let rows = c.query_rows(&format!("SELECT v FROM t WHERE id = {id}"));
    rows.first().map(|r| r[0].clone().unwrap())
}

/// Reads every row, as text; how many were hits, and the values.
fn read_all(c: &mut RawConn, sluice: &Sluice, config: &Config) -> (u64, Vec<Option<String>>) {
    let before = hits(sluice, config);
    let values = (1..=ROWS).map(|id| read(c, id)).collect();
    (hits(sluice, config) - before, values)
}

fn expected(changed: &[(i64, &str)]) -> Vec<Option<String>> {
    (1..=ROWS)
        .map(|id| match changed.iter().find(|(i, _)| *i == id) {
            Some((_, v)) => Some(v.to_string()),
            None => Some(format!("v{id}")),
        })
        .collect()
}

/// No binlog reader and an hour's TTL: only Sluice's own write path invalidates, and a
/// row changed straight on the server (unseen) shows which entries are still served.
#[test]
fn a_write_by_key_invalidates_only_the_entries_of_its_keys() {
    let server = shared_server();
    tables(server, "rowkeys");
    let config = config(server, false).admin(crate::routing::ADMIN_TOKEN);
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice, "rowkeys");
    let mut other = login(&sluice, "rowkeys");

    assert_eq!(read_all(&mut c, &sluice, &config), (0, expected(&[])));
    assert_eq!(
        read_all(&mut c, &sluice, &config),
        (ROWS as u64, expected(&[]))
    );

    // A text write by key: its row is read fresh, the other 49 are still hits.
    ok(&mut c, "UPDATE t SET v = 'x7' WHERE id = 7");
    assert_eq!(
        read_all(&mut c, &sluice, &config),
        (ROWS as u64 - 1, expected(&[(7, "x7")]))
    );

    // Prepared reads and a prepared write by key, its key bound as a string.
    let select = prepare(&mut c, "SELECT v FROM t WHERE id = ?");
    for id in 1..=ROWS {
        execute(&mut c, select, id, id == 1);
    }
    let update = c
        .prepare("UPDATE t SET v = CONCAT('p', id) WHERE id = ?")
        .unwrap();
    assert_eq!(c.execute_rows(update, &["8"]).unwrap(), 0);
    let before = hits(&sluice, &config);
    for id in 1..=ROWS {
        let want = match id {
            7 => "x7".to_string(),
            8 => "p8".to_string(),
            _ => format!("v{id}"),
        };
        assert_eq!(execute(&mut c, select, id, false), [want]);
    }
    assert_eq!(hits(&sluice, &config) - before, ROWS as u64 - 1);
    assert_eq!(read(&mut c, 8).as_deref(), Some("p8"));

    // A key read as absent, then inserted; one deleted.
    assert_eq!(read(&mut c, 51), None);
    assert_eq!(read(&mut c, 51), None);
    ok(&mut c, "INSERT INTO t (id, v) VALUES (51, 'new')");
    assert_eq!(read(&mut c, 51).as_deref(), Some("new"));
    ok(&mut c, "DELETE FROM t WHERE id IN (51, 3)");
    assert_eq!(read(&mut c, 51), None);
    assert_eq!(read(&mut c, 3), None);
    ok(&mut c, "INSERT INTO t (id, v) VALUES (3, 'v3')");

    // In a transaction: other sessions keep the old row until COMMIT.
    ok(&mut c, "BEGIN");
    ok(&mut c, "UPDATE t SET v = 'trx' WHERE id = 9");
    assert_eq!(read(&mut other, 9).as_deref(), Some("v9"));
    ok(&mut c, "COMMIT");
    assert_eq!(read(&mut other, 9).as_deref(), Some("trx"));

    // Entries are filled again; then writes whose rows no key tells reach every entry:
    // a value set straight on the server (unseen) shows through only after each.
    let changed = [(7, "x7"), (8, "p8"), (9, "trx")];
    read_all(&mut c, &sluice, &config);
    let mut cached = "v20".to_string();
    for (i, sql) in [
        "UPDATE t SET v = v WHERE id < 5",
        "UPDATE t SET v = v WHERE v = 'nothing'",
        "UPDATE t SET id = id WHERE id = 1",
        "DELETE FROM t WHERE id > 1000",
    ]
    .into_iter()
    .enumerate()
    {
        let unseen = format!("d{i}");
        server
            .execute(&format!(
                "UPDATE rowkeys.t SET v = '{unseen}' WHERE id = 20"
            ))
            .unwrap();
        assert_eq!(read(&mut c, 20), Some(cached.clone()), "before {sql}");
        ok(&mut c, sql);
        assert_eq!(read(&mut c, 20), Some(unseen.clone()), "{sql}");
        cached = unseen;
    }
    // And a write by another key leaves it cached.
    server
        .execute("UPDATE rowkeys.t SET v = 'v20' WHERE id = 20")
        .unwrap();
    ok(&mut c, "UPDATE t SET v = 'v21' WHERE id = 21");
    assert_eq!(read(&mut c, 20), Some(cached));
    ok(&mut c, "UPDATE t SET v = 'v20' WHERE id = 20");
    assert_eq!(read_all(&mut c, &sluice, &config).1, expected(&changed));

    // A case-insensitive string key: another spelling of the same key is the same row.
    let name = |c: &mut RawConn| crate::routing::one(c, "SELECT n FROM names WHERE name = 'bob'");
    assert_eq!(name(&mut c), "1");
    ok(&mut c, "UPDATE names SET n = 2 WHERE name = 'BOB '");
    assert_eq!(name(&mut c), "2");

    let stats = admin_get(&sluice, &config, "/v1/cache/stats");
    assert!(
        stats["totals"]["keys_invalidated"]["write"]
            .as_u64()
            .unwrap()
            >= 5,
        "{stats:#}"
    );
}

/// A write straight on the server reaches the cache through the binlog's row images:
/// only its rows' entries go, a range write still takes the whole table.
#[test]
fn direct_writes_invalidate_by_the_keys_in_their_row_images() {
    let server = dedicated_server(MariaDbOptions::default());
    tables(&server, "rowbin");
    let config = config(&server, true).admin(crate::routing::ADMIN_TOKEN);
    let sluice = Sluice::start(&config);
    let stats = || admin_get(&sluice, &config, "/v1/cache/stats");
    following(&sluice, &config);
    let mut c = login(&sluice, "rowbin");
    // The first fills may race the inserts' own binlog events: read until all are hits.
    assert!(
        wait_until(Duration::from_secs(10), || read_all(
            &mut c, &sluice, &config
        )
        .0 == ROWS as u64),
        "never all cached: {}",
        stats()
    );
    server
        .execute("UPDATE rowbin.t SET v = 'direct' WHERE id = 7")
        .unwrap();
    reads_soon(&mut c, 7, Some("direct"), stats);
    // The binlog's second look (after the primary made it visible) may still drop an
    // entry of that key; every other row stays a hit.
    let (hit, values) = read_all(&mut c, &sluice, &config);
    assert_eq!(values, expected(&[(7, "direct")]));
    assert!(hit >= ROWS as u64 - 1, "{hit} hits: {}", stats());
    assert!(
        stats()["totals"]["keys_invalidated"]["binlog"]
            .as_u64()
            .unwrap()
            > 0,
        "{}",
        stats()
    );
    server
        .execute("UPDATE rowbin.t SET v = 'range' WHERE id BETWEEN 40 AND 42")
        .unwrap();
    reads_soon(&mut c, 41, Some("range"), stats);
    // MINIMAL row images hold only the key in a delete's before image.
    server
        .execute("SET SESSION binlog_row_image = 'MINIMAL'; DELETE FROM rowbin.t WHERE id = 30")
        .unwrap();
    reads_soon(&mut c, 30, None, stats);
}

/// Entries a write always drops before they are read again stop being stored: after a
/// while most misses of such a digest go to the server without filling, and every
/// answer stays right.
#[test]
fn entries_writes_drop_unread_stop_being_stored() {
    let server = shared_server();
    tables(server, "rowadmit");
    let config = config(server, false).admin(crate::routing::ADMIN_TOKEN);
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice, "rowadmit");
    for round in 1..=300 {
        // A range read (the whole table counts), then a write to it.
        assert_eq!(
            crate::routing::one(&mut c, "SELECT COUNT(*) FROM t WHERE v LIKE 'w%'"),
            (round - 1).min(ROWS).to_string()
        );
        let id = 1 + (round - 1) % ROWS;
        ok(
            &mut c,
            &format!("UPDATE t SET v = 'w{round}' WHERE id = {id}"),
        );
    }
    let stats = admin_get(&sluice, &config, "/v1/cache/stats");
    let digest = stats["digests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["text"].as_str().unwrap().contains("LIKE"))
        .unwrap_or_else(|| panic!("{stats:#}"));
    let declined = digest["not_admitted"].as_u64().unwrap();
    assert!(declined > 150, "{digest:#}");
    assert!(digest["fills"].as_u64().unwrap() < 120, "{digest:#}");
}

/// A COMMIT's OK reports `last_gtid` and MariaDB then flags every result set as having
/// changed the session until the next OK: neither is a change of the settings entries
/// are keyed by, so a session's hits after each transaction need no server statement.
#[test]
fn transactions_leave_the_session_settings_known() {
    settings_known_across_transactions(true);
}

/// The same with a connection per session: the COMMIT's OK reaches the cache whole.
#[test]
fn transactions_leave_the_session_settings_known_dedicated() {
    settings_known_across_transactions(false);
}

fn settings_known_across_transactions(multiplex: bool) {
    let server = dedicated_server(MariaDbOptions::default());
    tables(&server, "rowtrx");
    let config = config(&server, false)
        .pool("multiplex", multiplex)
        .admin(crate::routing::ADMIN_TOKEN);
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice, "rowtrx");
    assert_eq!(read(&mut c, 1).as_deref(), Some("v1"));
    let before = crate::cache::status(&server, "Com_select");
    for round in 0..20 {
        ok(&mut c, "BEGIN");
        ok(&mut c, &format!("UPDATE t SET v = 'r{round}' WHERE id = 2"));
        ok(&mut c, "COMMIT");
        assert_eq!(read(&mut c, 1).as_deref(), Some("v1"));
        assert_eq!(read(&mut c, 1).as_deref(), Some("v1"));
    }
    // The count's own statement is one.
    let selects = crate::cache::status(&server, "Com_select") - before;
    assert!(
        selects <= 2,
        "{selects} SELECTs reached the server for 40 hits"
    );
    // A setting that is in the key still makes the session probe again.
    ok(&mut c, "SET time_zone = '+01:00'");
    assert_eq!(read(&mut c, 1).as_deref(), Some("v1"));
}

/// A delete cascading through a foreign key changes the child's rows, which neither the
/// statement nor the binlog's row events name: the child table's map in the binlog does,
/// and its entries go (with the binlog's delay, also for a write through Sluice).
#[test]
fn a_foreign_key_cascade_reaches_the_child_tables_entries() {
    let server = dedicated_server(MariaDbOptions::default());
    fresh_database(&server, "rowfk");
    server
        .execute(
            "CREATE TABLE rowfk.p (id INT PRIMARY KEY);
             CREATE TABLE rowfk.c (id INT PRIMARY KEY, p INT,
               FOREIGN KEY (p) REFERENCES rowfk.p (id) ON DELETE CASCADE);
             INSERT INTO rowfk.p VALUES (1), (2);
             INSERT INTO rowfk.c VALUES (10, 1), (20, 2);",
        )
        .unwrap();
    let config = config(&server, true).admin(crate::routing::ADMIN_TOKEN);
    let sluice = Sluice::start(&config);
    let stats = || admin_get(&sluice, &config, "/v1/cache/stats");
    following(&sluice, &config);
    let mut c = login(&sluice, "rowfk");
    let child = |c: &mut RawConn| c.query_rows("SELECT p FROM c WHERE id = 10").len();
    assert!(
        wait_until(Duration::from_secs(10), || {
            let before = hits(&sluice, &config);
            child(&mut c) == 1 && hits(&sluice, &config) == before + 1
        }),
        "never cached: {}",
        stats()
    );
    ok(&mut c, "DELETE FROM p WHERE id = 1");
    assert!(
        wait_until(Duration::from_secs(5), || child(&mut c) == 0),
        "the cascaded delete never reached the child's entry: {}",
        stats()
    );
}

/// Who writes a row of the checker's table, and how.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Writer {
    Text,
    Prepared,
    /// Straight on the server: seen through the binlog.
    Direct,
}

/// The commit instants of each row's values: `history[id][n]` is when value n + 1 was
/// acknowledged.
type History = Arc<Vec<parking_lot::Mutex<Vec<Instant>>>>;

fn write_loop(
    writer: Writer,
    addr: SocketAddr,
    ids: Vec<i64>,
    history: History,
    stop: Arc<AtomicBool>,
) {
    let mut c = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
    ok(&mut c, "USE rowstale");
    let stmt = c.prepare("UPDATE c SET n = n + 1 WHERE id = ?").unwrap();
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for &id in &ids {
            round += 1;
            let in_trx = round.is_multiple_of(3);
            if in_trx {
                ok(&mut c, "BEGIN");
            }
            match writer {
                Writer::Prepared => {
                    c.execute_rows(stmt, &[&id.to_string()]).unwrap();
                }
                _ => ok(&mut c, &format!("UPDATE c SET n = n + 1 WHERE id = {id}")),
            }
            if in_trx {
                ok(&mut c, "COMMIT");
            }
            history[id as usize].lock().push(Instant::now());
        }
        // About 60 writes a second from each writer.
        std::thread::sleep(Duration::from_millis(16 * ids.len() as u64));
    }
}

/// Readers through Sluice, text and prepared, reading random rows: each value read is
/// checked against the values acknowledged before the read began; how far behind it is
/// recorded (zero for most).
fn read_loop(
    prepared: bool,
    addr: SocketAddr,
    history: History,
    owner: Arc<Vec<Writer>>,
    stop: Arc<AtomicBool>,
    lags: Arc<parking_lot::Mutex<Vec<(Writer, Duration)>>>,
    reads: Arc<AtomicU64>,
) {
    let mut c = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
    ok(&mut c, "USE rowstale");
    // As a string: the test client reads binary rows of strings only.
    let stmt = prepare(&mut c, "SELECT CAST(n AS CHAR) FROM c WHERE id = ?");
    let mut seed = if prepared { 7u64 } else { 11 };
    while !stop.load(Ordering::Relaxed) {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let id = 1 + (seed >> 33) as i64 % ROWS;
        let began = Instant::now();
        let n: usize = if prepared {
            execute(&mut c, stmt, id, true)[0].parse().unwrap()
        } else {
            crate::routing::one(&mut c, &format!("SELECT n FROM c WHERE id = {id}"))
                .parse()
                .unwrap()
        };
        if let Some(&next) = history[id as usize].lock().get(n) {
            if next < began {
                lags.lock().push((owner[id as usize], began - next));
            }
        }
        reads.fetch_add(1, Ordering::Relaxed);
    }
}

/// The shape: 50 rows, two writers through Sluice (text, prepared) at about 60
/// writes a second each, six readers through Sluice doing point selects (text and
/// prepared); and a third writer straight on the server, on rows of its own. No read may
/// miss a write Sluice acknowledged before it began; a direct write may be missed only
/// for the binlog's delay. The hit ratio is printed.
#[test]
fn interleaved_writers_and_readers_see_every_acknowledged_write() {
    let server = dedicated_server(MariaDbOptions::default());
    fresh_database(&server, "rowstale");
    let values: Vec<String> = (1..=ROWS).map(|i| format!("({i}, 0)")).collect();
    server
        .execute(&format!(
            "CREATE TABLE rowstale.c (id INT PRIMARY KEY, n INT NOT NULL);
             INSERT INTO rowstale.c VALUES {};",
            values.join(", ")
        ))
        .unwrap();
    let config = config(&server, true).admin(crate::routing::ADMIN_TOKEN);
    let sluice = Sluice::start(&config);
    let stats = || admin_get(&sluice, &config, "/v1/cache/stats");
    following(&sluice, &config);
    // Rows 1-3 straight on the server, the rest shared by the two writers through Sluice.
    let mut owner = vec![Writer::Text; ROWS as usize + 1];
    let mut assigned: Vec<(Writer, Vec<i64>)> = Vec::new();
    for (w, ids) in [
        (Writer::Direct, 1..=3),
        (Writer::Text, 4..=27),
        (Writer::Prepared, 28..=ROWS),
    ] {
        let ids: Vec<i64> = ids.collect();
        for &id in &ids {
            owner[id as usize] = w;
        }
        assigned.push((w, ids));
    }
    let owner = Arc::new(owner);
    let history: History = Arc::new(
        (0..=ROWS)
            .map(|_| parking_lot::Mutex::new(Vec::new()))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let lags = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let reads = Arc::new(AtomicU64::new(0));
    let hits_before = stats()["totals"]["hits"].as_u64().unwrap();
    let mut threads = Vec::new();
    for (w, ids) in assigned {
        let addr = if w == Writer::Direct {
            server.addr()
        } else {
            sluice.addr()
        };
        let (history, stop) = (history.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            write_loop(w, addr, ids, history, stop)
        }));
    }
    for r in 0..6 {
        let (history, owner, stop, lags, reads) = (
            history.clone(),
            owner.clone(),
            stop.clone(),
            lags.clone(),
            reads.clone(),
        );
        let addr = sluice.addr();
        threads.push(std::thread::spawn(move || {
            read_loop(r % 2 == 1, addr, history, owner, stop, lags, reads)
        }));
    }
    // At least 3 s of writes and 20,000 reads, at most 20 s.
    let started = Instant::now();
    while (reads.load(Ordering::Relaxed) < 20_000 || started.elapsed() < Duration::from_secs(3))
        && started.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let reads = reads.load(Ordering::Relaxed);
    let hits = stats()["totals"]["hits"].as_u64().unwrap() - hits_before;
    let lags = lags.lock().clone();
    let through: Vec<_> = lags.iter().filter(|(w, _)| *w != Writer::Direct).collect();
    let direct_max = lags
        .iter()
        .filter(|(w, _)| *w == Writer::Direct)
        .map(|(_, l)| *l)
        .max();
    let writes: usize = history.iter().map(|h| h.lock().len()).sum();
    eprintln!(
        "{reads} reads ({hits} hits, {:.1}%), {writes} writes; trailing a write through \
         Sluice: {}; a direct write: {} (max {direct_max:?})",
        100.0 * hits as f64 / reads as f64,
        through.len(),
        lags.len() - through.len(),
    );
    assert!(reads > 2_000, "too few reads: {reads}");
    assert!(writes > 100, "too few writes: {writes}");
    assert_eq!(through, Vec::<&(Writer, Duration)>::new(), "stale reads");
    assert!(
        direct_max.is_none_or(|l| l < Duration::from_secs(1)),
        "a read trailed a direct write by {direct_max:?}"
    );
    assert!(
        hits > reads / 2,
        "{hits} hits of {reads} reads: {}",
        stats()
    );
}
