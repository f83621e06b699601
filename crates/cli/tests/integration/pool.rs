//! The backend connection pool without multiplexing (each session holds one connection
//! from login to quit), seen from outside: a released connection is reset and reused, never carries a schema to the next client, is waited for within a bound, is
//! replaced when the server closes it, expires when idle, and is kept warm; malformed
//! client input is counted. Backend threads are watched in the server's process list.

use std::time::{Duration, Instant};

use crate::support::proxy::User;
use crate::support::wire::{
    expect_refusal, LoginError, RawConn, Refusal, Reply, COM_QUERY, COM_QUIT,
};
use crate::support::{
    fresh_database, shared_server, wait_until, Config, MariaDb, Sluice, NATIVE_PASSWORD,
    NATIVE_USER,
};

/// A Sluice config whose sessions keep their connection for their whole life.
fn session_pooling(server: &MariaDb) -> Config {
    Config::for_server(server).pool("multiplex", false)
}

/// How long a released connection must have been asleep, after its reset, before a test
/// takes it to be idle in the pool (the reset and Sluice's `SELECT DATABASE()` follow
/// each other within a millisecond or two).
const SETTLED_MS: f64 = 300.0;

/// Bound on every wait for the pool's background work.
const POOL_WAIT: Duration = Duration::from_secs(10);

/// Log in through `sluice` as [`NATIVE_USER`], panicking with Sluice's log on failure.
#[track_caller]
fn login(sluice: &Sluice, database: Option<&str>) -> RawConn {
    RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, database).unwrap_or_else(|e| {
        panic!(
            "login through sluice (database {database:?}) failed: {e:?}\nlog:\n{}",
            sluice.log()
        )
    })
}

/// The value of a query returning one row of one column.
#[track_caller]
fn scalar(conn: &mut RawConn, sql: &str) -> Option<String> {
    let rows = conn.query_rows(sql);
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0][0].clone()
}

/// The id of the backend thread serving `conn` (`CONNECTION_ID()` through Sluice is the
/// session's id; the server's own thread id shows in `@@pseudo_thread_id`).
#[track_caller]
fn backend_thread(conn: &mut RawConn) -> u64 {
    scalar(conn, "SELECT @@pseudo_thread_id")
        .and_then(|id| id.parse().ok())
        .expect("@@pseudo_thread_id is a number")
}

/// COM_QUIT, then wait for Sluice to close the socket: the session is over and its
/// backend connection on its way back to the pool.
#[track_caller]
fn quit(mut conn: RawConn) {
    conn.send_command(COM_QUIT, &[]).expect("sending COM_QUIT");
    match expect_refusal(&mut conn.stream, Duration::from_secs(10)) {
        Ok(Refusal::Closed) => {}
        other => panic!("COM_QUIT: expected a close, got {other:?}"),
    }
}

/// One backend thread as the server's process list shows it.
#[derive(Debug)]
struct ThreadState {
    command: String,
    /// Id of the last statement the thread ran (any command Sluice sends moves it on).
    query_id: u64,
    /// Milliseconds since that statement started.
    time_ms: f64,
}

/// The process-list entry of thread `id`, if the thread exists.
fn thread_state(server: &MariaDb, id: u64) -> Option<ThreadState> {
    let out = server
        .execute(&format!(
            "SELECT COMMAND, QUERY_ID, TIME_MS FROM information_schema.PROCESSLIST \
             WHERE ID = {id}"
        ))
        .expect("reading the process list");
    let line = out.lines().nth(1)?;
    let fields: Vec<&str> = line.split('\t').collect();
    match fields[..] {
        [command, query_id, time_ms] => Some(ThreadState {
            command: command.to_owned(),
            query_id: query_id.parse().expect("QUERY_ID is a number"),
            time_ms: time_ms.parse().expect("TIME_MS is a number"),
        }),
        _ => panic!("unexpected process list output: {out}"),
    }
}

/// Thread `id`'s last query id, read while its client is idle.
#[track_caller]
fn last_query_id(server: &MariaDb, id: u64) -> u64 {
    thread_state(server, id)
        .unwrap_or_else(|| panic!("backend thread {id} is not in the process list"))
        .query_id
}

/// Wait until backend thread `id`, whose client last ran query `query_id` and quit, has
/// been cleaned by Sluice (it ran something since) and has slept since: it is idle in
/// the pool.
#[track_caller]
fn wait_pooled(server: &MariaDb, sluice: &Sluice, id: u64, query_id: u64) {
    let mut last = None;
    let pooled = wait_until(POOL_WAIT, || {
        last = thread_state(server, id);
        last.as_ref().is_some_and(|t| {
            t.command == "Sleep" && t.query_id != query_id && t.time_ms >= SETTLED_MS
        })
    });
    assert!(
        pooled,
        "backend thread {id} never sat reset and idle in the pool; last seen {last:?}\n\
         log:\n{}",
        sluice.log()
    );
}

/// A config in front of the shared server whose only server, "db1", takes at most
/// `max` connections.
fn with_max_connections(max: u32) -> Config {
    let mut config = session_pooling(shared_server());
    config.servers[0].max_connections = Some(max);
    config
}

/// A released connection is reused by the next client of the same user, and
/// COM_RESET_CONNECTION has cleared what the first client left: user variables and
/// temporary tables.
#[test]
fn released_connection_is_reset_and_reused() {
    let server = shared_server();
    fresh_database(server, "pool_reuse");
    let sluice = Sluice::start(&session_pooling(server));

    let mut first = login(&sluice, None);
    first.query("SET @x = 42").unwrap().expect_ok();
    first
        .query("CREATE TEMPORARY TABLE pool_reuse.scratch (i INT)")
        .unwrap()
        .expect_ok();
    assert_eq!(scalar(&mut first, "SELECT @x"), Some("42".to_owned()));
    assert_eq!(
        scalar(&mut first, "SELECT COUNT(*) FROM pool_reuse.scratch"),
        Some("0".to_owned())
    );
    let thread = backend_thread(&mut first);
    let query_id = last_query_id(server, thread);
    quit(first);
    wait_pooled(server, &sluice, thread, query_id);

    let mut second = login(&sluice, None);
    assert_eq!(
        backend_thread(&mut second),
        thread,
        "the idle backend connection was not reused"
    );
    assert_eq!(
        scalar(&mut second, "SELECT @x"),
        None,
        "a user variable survived"
    );
    let err = second
        .query("SELECT COUNT(*) FROM pool_reuse.scratch")
        .unwrap();
    assert_eq!(
        err.expect_err().code,
        1146,
        "the temporary table survived: {err:?}"
    );
    quit(second);
}

/// No client inherits the default schema of an earlier one, whether it was chosen at
/// login or with `USE`. With room for one backend connection only, every client gets
/// the previous client's connection or its place.
#[test]
fn schema_does_not_leak_between_clients() {
    let server = shared_server();
    fresh_database(server, "pool_a");
    fresh_database(server, "pool_b");
    let sluice = Sluice::start(&with_max_connections(1));

    let mut a = login(&sluice, Some("pool_a"));
    assert_eq!(
        scalar(&mut a, "SELECT DATABASE()"),
        Some("pool_a".to_owned())
    );
    quit(a);

    let mut b = login(&sluice, None);
    assert_eq!(
        scalar(&mut b, "SELECT DATABASE()"),
        None,
        "a client without a database got the previous client's pool_a"
    );
    quit(b);

    // Schemas chosen with USE: Sluice must learn them when the connection comes back,
    // whether the next client wants the schema the connection was opened on...
    let mut c = login(&sluice, Some("pool_b"));
    assert_eq!(
        scalar(&mut c, "SELECT DATABASE()"),
        Some("pool_b".to_owned())
    );
    c.query("USE pool_a").unwrap().expect_ok();
    quit(c);

    let mut d = login(&sluice, Some("pool_b"));
    assert_eq!(
        scalar(&mut d, "SELECT DATABASE()"),
        Some("pool_b".to_owned()),
        "a client asking for pool_b got the schema an earlier client chose with USE"
    );
    quit(d);

    // ...or no schema at all.
    let mut e = login(&sluice, None);
    assert_eq!(scalar(&mut e, "SELECT DATABASE()"), None);
    e.query("USE pool_a").unwrap().expect_ok();
    quit(e);

    let mut f = login(&sluice, None);
    assert_eq!(
        scalar(&mut f, "SELECT DATABASE()"),
        None,
        "a client without a database got the schema an earlier client chose with USE"
    );
    quit(f);
}

/// With the server's one connection held, the next login fails after the acquire
/// timeout with Sluice's pool-timeout error; once the holder quits, logins work again.
#[test]
fn full_pool_times_out_then_recovers() {
    let config = with_max_connections(1).pool("acquire_timeout", "500ms");
    let sluice = Sluice::start(&config);
    let mut holder = login(&sluice, None);
    assert_eq!(scalar(&mut holder, "SELECT 1"), Some("1".to_owned()));

    let started = Instant::now();
    let refused = RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, None);
    let waited = started.elapsed();
    let err = match refused {
        Err(LoginError::Denied(err)) => err,
        Err(other) => panic!("expected an ERR packet, got {other:?}"),
        Ok(_) => panic!("a second client got in past max_connections = 1"),
    };
    assert_eq!((err.code, err.state.as_str()), (9001, "HY000"), "{err:?}");
    assert!(
        err.message.contains("db1") && err.message.contains("500ms"),
        "the message should name the server and the wait: {:?}",
        err.message
    );
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(5),
        "refused after {waited:?}, expected about 500ms"
    );

    assert_eq!(
        scalar(&mut holder, "SELECT 'held'"),
        Some("held".to_owned()),
        "the holder's session broke"
    );
    quit(holder);
    let mut next = login(&sluice, None);
    assert_eq!(scalar(&mut next, "SELECT 2"), Some("2".to_owned()));
    quit(next);
}

/// An idle connection the server has closed is never handed out: the next client gets
/// a new one and sees no error.
#[test]
fn idle_connection_killed_by_the_server_is_replaced() {
    let server = shared_server();
    let sluice = Sluice::start(&session_pooling(server));

    let mut a = login(&sluice, None);
    let thread = backend_thread(&mut a);
    let query_id = last_query_id(server, thread);
    quit(a);
    wait_pooled(server, &sluice, thread, query_id);

    server
        .execute(&format!("KILL {thread}"))
        .expect("killing the idle backend thread");
    // KILL returns before the thread has closed its socket; gone from the list, it has.
    assert!(
        wait_until(POOL_WAIT, || thread_state(server, thread).is_none()),
        "backend thread {thread} survived KILL"
    );

    let mut b = login(&sluice, None);
    let reply = b
        .query("SELECT 'after kill'")
        .expect("the first query after the kill");
    assert_eq!(
        reply,
        Reply::ResultSet {
            columns: vec!["after kill".to_owned()],
            rows: vec![vec![Some(b"after kill".to_vec())]],
        },
        "log:\n{}",
        sluice.log()
    );
    let new_thread = backend_thread(&mut b);
    assert_ne!(
        new_thread, thread,
        "the session runs on the killed thread's id"
    );
    quit(b);
}

/// An idle connection is closed once it has been idle for `idle_timeout`.
#[test]
fn idle_connection_expires() {
    let server = shared_server();
    let config = session_pooling(server)
        .pool("idle_timeout", "1s")
        .pool("check_interval", "200ms");
    let sluice = Sluice::start(&config);

    let mut a = login(&sluice, None);
    let thread = backend_thread(&mut a);
    let query_id = last_query_id(server, thread);
    let quit_at = Instant::now();
    quit(a);
    wait_pooled(server, &sluice, thread, query_id);

    assert!(
        wait_until(POOL_WAIT, || thread_state(server, thread).is_none()),
        "idle backend thread {thread} still open {:?} after its client quit\nlog:\n{}",
        quit_at.elapsed(),
        sluice.log()
    );
    let gone_after = quit_at.elapsed();
    assert!(
        gone_after >= Duration::from_millis(800),
        "closed {gone_after:?} after its client quit, before idle_timeout"
    );
}

/// Once a client has used a backend login, Sluice keeps `min_idle` connections of it
/// open. The backend account is one only this test uses, so every connection of it in
/// the server's process list is Sluice's.
#[test]
fn min_idle_connections_are_kept_open() {
    let server = shared_server();
    let (user, password) = ("pool_warm", "warm_pw");
    server
        .execute(&format!(
            "CREATE USER IF NOT EXISTS '{user}'@'%' \
               IDENTIFIED VIA mysql_native_password USING PASSWORD('{password}');"
        ))
        .expect("creating the test's own account");
    let config = session_pooling(server)
        .user(User::native(user, password))
        .pool("min_idle", 2)
        .pool("check_interval", "200ms");
    let sluice = Sluice::start(&config);

    let mut conn = RawConn::login(sluice.addr(), user, password, None)
        .unwrap_or_else(|e| panic!("login as {user} failed: {e:?}\nlog:\n{}", sluice.log()));
    assert_eq!(scalar(&mut conn, "SELECT 1"), Some("1".to_owned()));
    quit(conn);

    let count_sql = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
         WHERE USER = '{user}' AND COMMAND = 'Sleep'"
    );
    let mut sleeping = 0;
    let warm = wait_until(POOL_WAIT, || {
        let out = server
            .execute(&count_sql)
            .expect("reading the process list");
        sleeping = out
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected process list output: {out}"));
        sleeping >= 2
    });
    assert!(
        warm,
        "{sleeping} idle connection(s) of {user} after {POOL_WAIT:?}, expected min_idle = 2\n\
         log:\n{}",
        sluice.log()
    );
}

/// Garbage instead of a handshake response and a command with the wrong sequence id
/// each count as a client protocol error, reported in the final counts at shutdown.
#[test]
fn client_protocol_errors_are_counted() {
    let mut sluice = Sluice::start(&session_pooling(shared_server()));

    let mut garbage = RawConn::connect(sluice.addr()).expect("connecting to sluice");
    garbage.write_raw_packet(1, b"garbage").unwrap();
    let refusal = expect_refusal(&mut garbage.stream, Duration::from_secs(10));
    assert!(refusal.is_ok(), "garbage handshake response: {refusal:?}");

    let mut out_of_order = login(&sluice, None);
    let mut payload = vec![COM_QUERY];
    payload.extend_from_slice(b"SELECT 1");
    out_of_order.write_raw_packet(5, &payload).unwrap();
    let refusal = expect_refusal(&mut out_of_order.stream, Duration::from_secs(10));
    assert!(refusal.is_ok(), "COM_QUERY with sequence id 5: {refusal:?}");

    let status = sluice.stop();
    let log = sluice.log();
    assert!(status.success(), "sluice exited with {status}; log:\n{log}");
    let metric = "sluice_client_protocol_errors_total";
    let line = log
        .lines()
        .find(|l| l.contains("final count") && l.contains(metric))
        .unwrap_or_else(|| panic!("no final count of {metric} in the log:\n{log}"));
    let value: u64 = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("value="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {line:?}"));
    assert!(
        value >= 2,
        "{metric} = {value}, expected at least 2: {line}"
    );
}
