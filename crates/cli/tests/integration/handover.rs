//! A restart with `--take-over`: the new process takes the running one's listening
//! sockets (client listener and admin API) over a Unix socket, and no connection is
//! refused meanwhile; a new process that fails leaves the old one serving. Sessions go
//! across with their state and id once nothing holds them in the old process.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::support::wire::RawConn;
use crate::support::{shared_server, wait_until, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER};

/// Clients logging in and running a statement, one after another, until stopped:
/// (successes, failures with what each got).
struct Connecting {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    task: thread::JoinHandle<Vec<String>>,
}

impl Connecting {
    fn start(addr: std::net::SocketAddr) -> Connecting {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let task = {
            let (stop, ok) = (stop.clone(), ok.clone());
            thread::spawn(move || {
                let mut failures = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let outcome = RawConn::login(addr, NATIVE_USER, NATIVE_PASSWORD, None)
                        .map_err(|e| format!("login: {e:?}"))
                        .and_then(|mut c| c.query("SELECT 1").map_err(|e| format!("query: {e}")));
                    match outcome {
                        Ok(reply) if reply.text_rows() == vec![vec![Some("1".to_owned())]] => {
                            ok.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(_) => failures.push("SELECT 1 did not answer 1".to_owned()),
                        Err(e) => failures.push(e),
                    }
                }
                failures
            })
        };
        Connecting { stop, ok, task }
    }

    /// Waits until `more` more clients got through.
    fn wait_for(&self, more: usize) {
        let target = self.ok.load(Ordering::SeqCst) + more;
        assert!(
            wait_until(Duration::from_secs(20), || self.ok.load(Ordering::SeqCst)
                >= target),
            "clients stopped getting through"
        );
    }

    fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        let failures = self.task.join().unwrap();
        (self.ok.load(Ordering::SeqCst), failures)
    }
}

/// `sluice serve --config CONFIG --take-over`: it takes the listeners of the Sluice
/// serving on 127.0.0.1:`port`.
fn successor(config: &std::path::Path, port: u16) -> Sluice {
    Sluice::start_with_args(
        &["serve", "--config", config.to_str().unwrap(), "--take-over"],
        port,
    )
}

fn config_with_handover() -> (Config, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("handover.sock");
    let config = Config::for_server(shared_server())
        .handover("socket", socket.to_str().unwrap())
        .admin("handover-test-token-0123456789");
    (config, dir)
}

#[test]
fn a_restart_with_take_over_refuses_no_connection() {
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    let port = old.port();
    let clients = Connecting::start(old.addr());
    clients.wait_for(20);

    let config_path = old.config_path();
    let mut new = successor(&config_path, port);
    let status = old.wait_exit(Duration::from_secs(20)).unwrap_or_else(|| {
        panic!(
            "the old process still runs after the hand-over:\n{}",
            old.log()
        )
    });
    assert!(status.success(), "old exited with {status}:\n{}", old.log());
    // Clients go on getting through, to the new process alone now.
    clients.wait_for(20);
    let (ok, failures) = clients.finish();
    assert!(
        failures.is_empty(),
        "{} of {} clients failed during the hand-over: {failures:?}\nold:\n{}\nnew:\n{}",
        failures.len(),
        ok + failures.len(),
        old.log(),
        new.log()
    );
    new.assert_running();
    assert!(
        new.log().contains("took the listeners over"),
        "{}",
        new.log()
    );
    assert!(
        old.log().contains("the new process accepts clients"),
        "{}",
        old.log()
    );
    // The admin API came across too: answered by the new process.
    let admin = config.admin_address().expect("admin configured");
    let token = sluice::config::Secret("handover-test-token-0123456789".to_owned());
    let body = crate::support::http::Client::new(admin, Some(token))
        .get("/v1/stats")
        .expect("the admin API answers after the hand-over");
    assert_eq!(body.status, 200, "{body:?}");

    // And the new process offers its listeners to the next one in turn.
    let mut third = successor(&config_path, port);
    assert!(
        new.wait_exit(Duration::from_secs(20)).is_some(),
        "the second hand-over did not happen:\n{}",
        new.log()
    );
    let mut conn = RawConn::login_ok(third.addr(), NATIVE_USER, NATIVE_PASSWORD);
    assert_eq!(
        conn.query_rows("SELECT 1"),
        vec![vec![Some("1".to_owned())]]
    );
    third.assert_running();
}

#[test]
fn a_new_process_that_fails_leaves_the_old_one_serving() {
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    // The new process takes the sockets, then fails: a second listener it is to bind
    // is taken by someone else.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut failing = config.clone();
    failing.listeners.push(failing.listeners[0].clone());
    failing.listeners[1].address = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("failing.toml");
    failing.write(&path);
    let out = crate::support::proxy::run_sluice_within(
        &["serve", "--config", path.to_str().unwrap(), "--take-over"],
        Duration::from_secs(30),
    );
    assert!(!out.success(), "the failing process started: {out:?}");
    assert!(
        wait_until(Duration::from_secs(10), || old
            .log()
            .contains("hand-over failed")),
        "the old process did not notice:\n{}",
        old.log()
    );
    old.assert_running();
    let mut conn = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    assert_eq!(
        conn.query_rows("SELECT 1"),
        vec![vec![Some("1".to_owned())]]
    );
    // The old process drains (up to `drain_timeout`) once it hands over: this session
    // quits first.
    drop(conn);
    // And it still offers its listeners to the next process, which succeeds.
    let config_path = old.config_path();
    let mut next = successor(&config_path, old.port());
    assert!(
        old.wait_exit(Duration::from_secs(20)).is_some(),
        "{}",
        old.log()
    );
    next.assert_running();
}

#[test]
fn take_over_without_a_running_sluice_does_not_start() {
    let (config, dir) = config_with_handover();
    let path = dir.path().join("sluice.toml");
    config.write(&path);
    let out = crate::support::proxy::run_sluice_within(
        &["serve", "--config", path.to_str().unwrap(), "--take-over"],
        Duration::from_secs(30),
    );
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr.contains("no running Sluice to take over from"),
        "{out:?}"
    );
}

/// A successor that took `old`'s listeners over, once `old` began moving its sessions.
fn handed_over(old: &Sluice) -> Sluice {
    let new = successor(&old.config_path(), old.port());
    assert!(
        wait_until(Duration::from_secs(10), || old
            .log()
            .contains("sessions move once they can")),
        "{}",
        old.log()
    );
    new
}

/// Runs `sql`, which must answer OK.
#[track_caller]
fn exec(conn: &mut RawConn, sql: &str) {
    conn.query(sql).unwrap().expect_ok();
}

/// The first row's cells of `sql`'s answer.
fn row(conn: &mut RawConn, sql: &str) -> Vec<Option<String>> {
    conn.query_rows(sql).into_iter().next().unwrap_or_default()
}

#[test]
fn an_idle_session_moves_to_the_new_process_with_its_state_and_id() {
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    let mut held = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    exec(&mut held, "CREATE DATABASE IF NOT EXISTS handover_moves");
    exec(&mut held, "USE handover_moves");
    exec(
        &mut held,
        "SET @kept = 'moved', sql_mode = 'ANSI_QUOTES', time_zone = '+03:00'",
    );
    let stmt = held.prepare("SELECT CONCAT(?, '-', @kept)").unwrap();
    let before = row(
        &mut held,
        "SELECT CONNECTION_ID(), DATABASE(), @@sql_mode, @@time_zone",
    );
    let config_path = old.config_path();
    let mut new = successor(&config_path, old.port());
    // Nothing holds it here: it goes, and the old process, holding nothing, ends.
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "the old process kept a session that could move:\n{}",
        old.log()
    );
    assert!(old.log().contains("moved=1"), "{}", old.log());
    // The same connection, with the same id and the state it had.
    let after = row(
        &mut held,
        "SELECT CONNECTION_ID(), DATABASE(), @@sql_mode, @@time_zone",
    );
    assert_eq!(before, after, "{}", new.log());
    assert_eq!(
        row(&mut held, "SELECT @kept"),
        vec![Some("moved".to_owned())]
    );
    // The prepared statement, under the id the client knows, prepared again where it
    // runs now.
    let rows = held.execute_binary_rows(stmt, &["x"]).unwrap();
    assert_eq!(rows.len(), 1, "{}", new.log());
    assert!(rows[0].windows(7).any(|w| w == b"x-moved"), "{:?}", rows[0]);
    // KILL finds it under its id in the new process.
    let mut other = RawConn::login_ok(new.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let id = before[0].clone().unwrap();
    other.query(&format!("KILL {id}")).unwrap().expect_ok();
    assert!(
        held.query("SELECT 1").is_err(),
        "the moved session was not killed"
    );
    new.assert_running();
}

#[test]
fn a_session_in_a_transaction_moves_once_it_ends() {
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    let mut held = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    exec(&mut held, "CREATE DATABASE IF NOT EXISTS handover_moves");
    exec(
        &mut held,
        "CREATE TABLE IF NOT EXISTS handover_moves.t (id INT PRIMARY KEY)",
    );
    let id = row(&mut held, "SELECT CONNECTION_ID()");
    exec(&mut held, "BEGIN");
    exec(&mut held, "REPLACE INTO handover_moves.t VALUES (1)");
    let mut new = handed_over(&old);
    // In its transaction it stays: the old process waits for it.
    assert_eq!(
        row(&mut held, "SELECT @@in_transaction"),
        vec![Some("1".to_owned())]
    );
    old.assert_running();
    exec(&mut held, "COMMIT");
    // Its next statement finds it in the new process.
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "the session did not move at the end of its transaction:\n{}",
        old.log()
    );
    assert_eq!(row(&mut held, "SELECT CONNECTION_ID()"), id);
    assert_eq!(
        row(
            &mut held,
            "SELECT COUNT(*) FROM handover_moves.t WHERE id = 1"
        ),
        vec![Some("1".to_owned())]
    );
    new.assert_running();
}

#[test]
fn a_session_that_cannot_move_goes_on_in_the_old_process_until_it_quits() {
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    let mut held = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    exec(&mut held, "CREATE DATABASE IF NOT EXISTS handover_moves");
    // A temporary table lives on the server connection: the session stays with it.
    exec(
        &mut held,
        "CREATE TEMPORARY TABLE handover_moves.kept (v TEXT)",
    );
    exec(
        &mut held,
        "INSERT INTO handover_moves.kept VALUES ('in the old process')",
    );
    let mut new = handed_over(&old);
    assert_eq!(
        held.query_rows("SELECT v FROM handover_moves.kept"),
        vec![vec![Some("in the old process".to_owned())]]
    );
    old.assert_running();
    // The admin API is the new process's alone: none of its answers lists the session
    // the old one still serves.
    let id = row(&mut held, "SELECT CONNECTION_ID()")[0].clone().unwrap();
    let address = config.admin_address().unwrap();
    for _ in 0..20 {
        let sessions =
            crate::support::admin_json(&address, "handover-test-token-0123456789", "/v1/sessions");
        assert!(
            !sessions.to_string().contains(&format!("\"id\":{id},")),
            "the old process answered: {sessions}"
        );
    }
    drop(held);
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "the old process did not end with its last session:\n{}",
        old.log()
    );
    new.assert_running();
}

/// Kills a process the test did not start itself (a successor Sluice started by
/// another), however the test ends.
struct Reaped(u32);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .status();
    }
}

#[test]
fn sigusr2_starts_a_successor_that_takes_over() {
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    let clients = Connecting::start(old.addr());
    clients.wait_for(10);
    old.signal("USR2");
    let mut successor = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            successor = old
                .log()
                .lines()
                .find(|l| l.contains("started a successor"))
                .and_then(|l| l.split("pid=").nth(1))
                .and_then(|p| p.split_whitespace().next()?.parse::<u32>().ok());
            successor.is_some()
        }),
        "no successor started:\n{}",
        old.log()
    );
    let successor = Reaped(successor.unwrap());
    let status = old.wait_exit(Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| s.success()),
        "the old process did not hand over and exit: {status:?}\n{}",
        old.log()
    );
    clients.wait_for(10);
    let (ok, failures) = clients.finish();
    assert!(failures.is_empty(), "{failures:?} of {ok}\n{}", old.log());
    assert!(crate::support::sandbox::process_alive(successor.0));
}

/// The pid of the last successor any process in `log` started.
fn last_successor(log: &str) -> Option<u32> {
    log.lines()
        .rev()
        .filter(|l| l.contains("started a successor"))
        .filter_map(|l| l.split("pid=").nth(1))
        .find_map(|p| p.split_whitespace().next()?.parse().ok())
}

#[test]
fn busy_sessions_cross_three_hand_overs_without_an_error() {
    let (config, _dir) = config_with_handover();
    let first = Sluice::start(&config);
    let addr = first.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    // Each client keeps one connection and checks, statement after statement, that it
    // is the same session: its id, a user variable it counts with, a prepared statement.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (stop, done) = (stop.clone(), done.clone());
            thread::spawn(move || -> Result<usize, String> {
                let mut c = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
                let id = row(&mut c, "SELECT CONNECTION_ID()");
                let stmt = c.prepare("SELECT ? + 1").map_err(|e| e.to_string())?;
                let mut n = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    c.query(&format!("SET @n = {n}"))
                        .map_err(|e| format!("statement {n}: {e}"))?
                        .expect_ok();
                    let got = c
                        .query("SELECT CONNECTION_ID(), @n")
                        .map_err(|e| format!("statement {n}: {e}"))?
                        .text_rows();
                    let want = vec![vec![id[0].clone(), Some(n.to_string())]];
                    if got != want {
                        return Err(format!("statement {n}: {got:?}, not {want:?}"));
                    }
                    c.execute_rows(stmt, &["1"])
                        .map_err(|e| format!("execute {n}: {e}"))?;
                    n += 1;
                    done.fetch_add(1, Ordering::SeqCst);
                }
                Ok(n)
            })
        })
        .collect();
    let progress = |more: usize| {
        let target = done.load(Ordering::SeqCst) + more;
        wait_until(Duration::from_secs(20), || {
            done.load(Ordering::SeqCst) >= target
        })
    };
    assert!(progress(50), "the clients did not start");
    let mut serving = first.pid();
    let mut reaped = Vec::new();
    for round in 0..3 {
        crate::support::sandbox::send_signal(serving, "USR2").unwrap();
        let mut next = None;
        assert!(
            wait_until(Duration::from_secs(10), || {
                next = last_successor(&first.log()).filter(|&p| p != serving);
                next.is_some()
            }),
            "hand-over {round}: no successor:\n{}",
            first.log()
        );
        let next = next.unwrap();
        reaped.push(Reaped(next));
        // Every session moved: the old process holds nothing and ends.
        assert!(
            wait_until(Duration::from_secs(20), || {
                !crate::support::sandbox::process_alive(serving)
            }),
            "hand-over {round}: the old process kept sessions:\n{}",
            first.log()
        );
        serving = next;
        assert!(
            progress(50),
            "hand-over {round}: the clients stalled:\n{}",
            first.log()
        );
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        let outcome = c.join().unwrap();
        assert!(outcome.is_ok(), "{outcome:?}\n{}", first.log());
    }
    assert_eq!(
        first
            .log()
            .matches("sessions sent to the successor moved=8")
            .count(),
        3,
        "{}",
        first.log()
    );
}

#[test]
fn pymysql_connections_keep_their_sessions_across_a_hand_over() {
    use std::io::{BufRead, BufReader, Read, Write};
    let root = crate::support::repo_root();
    let python = super::drivers::require(
        root.join(".venv/bin/python"),
        "the Python virtual environment",
    );
    let script = super::drivers::require(
        root.join("tests/clients/python/handover.py"),
        "the PyMySQL hand-over scenario",
    );
    crate::support::fresh_database(shared_server(), "sluice_py_handover");
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    let mut child = std::process::Command::new(python)
        .arg(&script)
        .args(["--host", "127.0.0.1", "--port", &old.port().to_string()])
        .args(["--user", NATIVE_USER, "--password", NATIVE_PASSWORD])
        .args(["--database", "sluice_py_handover"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    if line.trim() != "ready" {
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        panic!("the script did not get ready: {line:?}\n{err}");
    }
    let config_path = old.config_path();
    let mut new = successor(&config_path, old.port());
    // The idle connection goes at once; the one in a transaction waits for its end.
    // Either process may answer on the admin API's socket while both hold it.
    let address = config.admin_address().unwrap();
    let moved = || {
        let stats =
            crate::support::admin_json(&address, "handover-test-token-0123456789", "/v1/stats");
        stats["sluice_sessions_moved_in_total"]
            .as_u64()
            .unwrap_or(0)
            + stats["sluice_sessions_moved_out_total"]
                .as_u64()
                .unwrap_or(0)
            > 0
    };
    assert!(wait_until(Duration::from_secs(10), moved), "{}", old.log());
    old.assert_running();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{err}\n{}", old.log());
    let doc: serde_json::Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(doc["before"], doc["after"], "{doc}\n{}", old.log());
    assert_eq!(doc["rows"], serde_json::json!(["2"]), "{doc}");
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "the old process kept a session:\n{}",
        old.log()
    );
    new.assert_running();
}

#[test]
fn sluice_upgrade_waits_for_the_take_over_and_says_why_one_failed() {
    let (config, _dir) = config_with_handover();
    let mut old = Sluice::start(&config);
    let mut held = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    exec(&mut held, "SET @kept = 'upgraded'");
    let id = row(&mut held, "SELECT CONNECTION_ID()");
    let config_path = old.config_path();
    let path = config_path.to_str().unwrap();

    // The running process starts its successor with its own arguments, which read the
    // file again: one that now names a listener someone else holds fails.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut failing = config.clone();
    failing.listeners.push(failing.listeners[0].clone());
    failing.listeners[1].address = taken.local_addr().unwrap().to_string();
    failing.write(&config_path);
    let out = crate::support::proxy::run_sluice_within(
        &["upgrade", "--config", path],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, Some(1), "{out:?}\n{}", old.log());
    assert!(out.stderr.contains("\"upgraded\":false"), "{out:?}");
    old.assert_running();
    assert_eq!(
        row(&mut held, "SELECT @kept"),
        vec![Some("upgraded".into())]
    );

    // Through the admin API, with the file as it was: the successor takes over, and
    // the answer names it.
    config.write(&config_path);
    let answer = crate::support::admin_call(
        &config.admin_address().unwrap(),
        "handover-test-token-0123456789",
        "POST",
        "/v1/upgrade",
        None,
    );
    assert_eq!(answer["upgraded"], true, "{answer}");
    let pid = answer["pid"].as_u64().unwrap() as u32;
    let _successor = Reaped(pid);
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "{}",
        old.log()
    );
    assert_eq!(row(&mut held, "SELECT CONNECTION_ID(), @kept")[0], id[0]);

    // And `sluice upgrade` against the successor: it hands over in turn.
    let out = crate::support::proxy::run_sluice_within(
        &["upgrade", "--config", path],
        Duration::from_secs(120),
    );
    assert!(out.success(), "{out:?}\n{}", old.log());
    let answer: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let _next = Reaped(answer["pid"].as_u64().unwrap() as u32);
    assert!(
        wait_until(Duration::from_secs(20), || {
            !crate::support::sandbox::process_alive(pid)
        }),
        "{}",
        old.log()
    );
    assert_eq!(
        row(&mut held, "SELECT CONNECTION_ID(), @kept"),
        vec![id[0].clone(), Some("upgraded".into())]
    );
}

#[test]
fn sluice_upgrade_without_a_running_sluice_says_so() {
    let (config, dir) = config_with_handover();
    let path = dir.path().join("sluice.toml");
    config.write(&path);
    let out = crate::support::proxy::run_sluice_within(
        &["upgrade", "--config", path.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("no running Sluice"), "{out:?}");
}

/// The new process's count of cache hits (only it answers on the admin API once the
/// hand-over is done).
fn cache_hits(config: &Config) -> u64 {
    let stats = crate::support::admin_json(
        &config.admin_address().unwrap(),
        "handover-test-token-0123456789",
        "/v1/stats",
    );
    stats["sluice_cache_hits_total"].as_u64().unwrap_or(0)
}

#[test]
fn cache_entries_go_across_except_those_a_write_there_made_stale() {
    let (config, _dir) = config_with_handover();
    let config = config.cache_rule("selects", "(?i)^\\s*SELECT", "1h");
    let mut old = Sluice::start(&config);
    let mut reader = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    exec(&mut reader, "CREATE DATABASE IF NOT EXISTS handover_cache");
    for t in ["a", "b"] {
        exec(
            &mut reader,
            &format!("CREATE OR REPLACE TABLE handover_cache.{t} (v TEXT)"),
        );
        exec(
            &mut reader,
            &format!("INSERT INTO handover_cache.{t} VALUES ('one')"),
        );
    }
    let a = "SELECT v FROM handover_cache.a";
    let b = "SELECT v FROM handover_cache.b";
    for sql in [a, b, a, b] {
        assert_eq!(row(&mut reader, sql), vec![Some("one".into())]);
    }
    // Kept in the old process by a temporary table: the cache goes once it quits.
    let mut pinned = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    exec(
        &mut pinned,
        "CREATE TEMPORARY TABLE handover_cache.pin (v INT)",
    );
    let mut new = handed_over(&old);
    // The reader moved; a write it makes now is the new process's, before any entry
    // of the old one came.
    exec(&mut reader, "UPDATE handover_cache.b SET v = 'two'");
    drop(pinned);
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "{}",
        old.log()
    );
    assert!(
        wait_until(Duration::from_secs(10), || new
            .log()
            .contains("cache entries taken from the process before")),
        "{}",
        new.log()
    );
    let log = new.log();
    assert!(log.contains("taken=1 refused=1"), "{log}\n{}", old.log());
    // b's entry from before the write was refused: the row as it is now.
    assert_eq!(row(&mut reader, b), vec![Some("two".into())]);
    // a's came across: its first read in the new process is a hit.
    let hits = cache_hits(&config);
    assert_eq!(row(&mut reader, a), vec![Some("one".into())]);
    assert_eq!(cache_hits(&config), hits + 1, "{log}");
    new.assert_running();
}

/// PyMySQL over Sluice's Unix socket: `SET @kept`, print the id and the variable, wait
/// for a line, print them again.
const UNIX_CLIENT: &str = r#"
import sys, pymysql
c = pymysql.connect(unix_socket=sys.argv[1], user=sys.argv[2], password=sys.argv[3], autocommit=True)
cur = c.cursor()
cur.execute("SET @kept = 'over the socket'")
def show():
    cur.execute("SELECT CONNECTION_ID(), @kept")
    print("|".join(str(v) for v in cur.fetchone()), flush=True)
show()
sys.stdin.readline()
show()
"#;

#[test]
fn a_unix_socket_session_moves_too() {
    use std::io::{BufRead, BufReader, Read, Write};
    let python = super::drivers::require(
        crate::support::repo_root().join(".venv/bin/python"),
        "the Python virtual environment",
    );
    let (config, dir) = config_with_handover();
    // Short: a Unix socket's path has a small limit.
    let socket = dir.path().join("s.sock");
    let config = config.socket_listener(&socket);
    let mut old = Sluice::start(&config);
    let mut child = std::process::Command::new(python)
        .args(["-c", UNIX_CLIENT, socket.to_str().unwrap()])
        .args([NATIVE_USER, NATIVE_PASSWORD])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut before = String::new();
    stdout.read_line(&mut before).unwrap();
    assert!(before.ends_with("|over the socket\n"), "{before:?}");
    let mut new = handed_over(&old);
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "the socket's session did not move:\n{}",
        old.log()
    );
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut after = String::new();
    stdout.read_to_string(&mut after).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{err}\n{}", new.log());
    assert_eq!(after, before, "{}", new.log());
    new.assert_running();
}

#[test]
fn in_a_fleet_sessions_stay_with_the_slot_their_id_names() {
    let (config, _dir) = config_with_handover();
    let config = config.fleet("enabled", true);
    let mut old = Sluice::start(&config);
    let address = config.admin_address().unwrap();
    let slot = || {
        crate::support::admin_json(&address, "handover-test-token-0123456789", "/v1/fleet")["slot"]
            .as_u64()
    };
    assert!(
        wait_until(Duration::from_secs(20), || slot().is_some()),
        "{}",
        old.log()
    );
    let mut held = RawConn::login_ok(old.addr(), NATIVE_USER, NATIVE_PASSWORD);
    exec(&mut held, "SET @kept = 'here'");
    let mut new = handed_over(&old);
    // Its id names the old process's slot: it drains there rather than move.
    assert_eq!(row(&mut held, "SELECT @kept"), vec![Some("here".into())]);
    old.assert_running();
    drop(held);
    assert!(
        old.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "{}",
        old.log()
    );
    assert!(old.log().contains("moved=0"), "{}", old.log());
    new.assert_running();
}
