//! The harness every integration test uses: real MariaDB servers from
//! [`sandbox`], the real `sluice` binary ([`proxy`]), the real `mariadb` client
//! ([`cli`]), a raw protocol socket for what no well-behaved client sends ([`wire`]) and
//! a raw HTTP client for the admin API ([`http`]).
//!
//! One MariaDB server is shared by the whole test process ([`shared_server`]); tests keep
//! out of each other's way by using their own database names. Tests that stop, kill or
//! reconfigure a server start a dedicated one ([`dedicated_server`]).

// Each test module uses a different part of the harness.
#![allow(dead_code, unused_imports)]

pub mod cli;
pub mod gate;
pub mod http;
pub mod proxy;
pub mod wire;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use sluice_sandbox::{self as sandbox, free_port, MariaDb, MariaDbOptions, TlsFiles};

pub use cli::{CliOutput, Client};
pub use proxy::{Config, Sluice};

/// mysql_native_password account present on every test backend, with all privileges.
pub const NATIVE_USER: &str = "app_native";
pub const NATIVE_PASSWORD: &str = "native_pw";
/// A second account, for switching users (COM_CHANGE_USER) and per-user checks.
pub const OTHER_USER: &str = "app_other";
pub const OTHER_PASSWORD: &str = "other_pw";

/// Create the test accounts on `server`. Idempotent.
pub fn provision(server: &MariaDb) -> anyhow::Result<()> {
    let mut sql = String::new();
    for (user, password) in [(NATIVE_USER, NATIVE_PASSWORD), (OTHER_USER, OTHER_PASSWORD)] {
        sql.push_str(&format!(
            "CREATE USER IF NOT EXISTS '{user}'@'%' \
               IDENTIFIED VIA mysql_native_password USING PASSWORD('{password}');\n\
             GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%';\n"
        ));
    }
    server.execute(&sql)?;
    Ok(())
}

/// The MariaDB server shared by every test in this process, started and provisioned on
/// first use. It is never dropped; its watchdog removes it when the process exits.
pub fn shared_server() -> &'static MariaDb {
    static SHARED: OnceLock<MariaDb> = OnceLock::new();
    SHARED.get_or_init(|| dedicated_server(MariaDbOptions::default()))
}

/// A server of this test's own, provisioned like the shared one. Panics on failure:
/// nothing a test could do without it.
pub fn dedicated_server(options: MariaDbOptions) -> MariaDb {
    let server = MariaDb::start(options).expect("starting a sandbox MariaDB server");
    provision(&server).expect("creating the test accounts");
    server
}

/// Drop and create database `name` on `server`, empty.
pub fn fresh_database(server: &MariaDb, name: &str) {
    server
        .execute(&format!(
            "DROP DATABASE IF EXISTS `{name}`; CREATE DATABASE `{name}`;"
        ))
        .unwrap_or_else(|e| panic!("recreating database {name}: {e:#}"));
}

/// The repository root (for tests/sql, tests/clients and the Python venv).
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .expect("the repository root exists")
}

/// A `[cache.binlog]` section reading the binlog as the test account.
pub fn binlog_section() -> toml::Table {
    let mut binlog = toml::Table::new();
    binlog.insert("user".into(), NATIVE_USER.into());
    binlog.insert("password".into(), NATIVE_PASSWORD.into());
    binlog
}

/// Poll `condition` every 50 ms until it holds or `timeout` passes; whether it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until process `pid` has exited, at most `timeout`; whether it did.
pub fn wait_process_gone(pid: u32, timeout: Duration) -> bool {
    wait_until(timeout, || !sandbox::process_alive(pid))
}

/// Number of statements currently running on `server` whose text is exactly `sql`.
/// Exact match, so the polling query (which contains the text) never counts itself.
pub fn running_statements(server: &MariaDb, sql: &str) -> usize {
    let escaped = sql.replace('\\', "\\\\").replace('\'', "''");
    let out = server
        .execute(&format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = '{escaped}'"
        ))
        .expect("reading the process list");
    out.lines()
        .nth(1)
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected process list output: {out}"))
}

/// Runs the ignored test `name` of this binary in a child process (it starts
/// something, prints a line beginning with `marker`, then sleeps) and returns the child
/// with the rest of that line. A child that printed no such line is killed.
pub fn spawn_orphan_helper(name: &str, marker: &str) -> (std::process::Child, Option<String>) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut helper = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args(["--exact", name, "--ignored", "--nocapture"])
        .env("SLUICE_ORPHAN_HELPER", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the helper test process");
    let stdout = helper.stdout.take().expect("piped stdout");
    let line = BufReader::new(stdout).lines().find_map(|line| {
        line.ok()
            .and_then(|l| l.strip_prefix(marker).map(str::to_owned))
    });
    if line.is_none() {
        let _ = helper.kill();
        let _ = helper.wait();
    }
    (helper, line)
}

/// A readable first difference between two texts, for assertion messages.
pub fn first_difference(left: &str, right: &str) -> String {
    for (number, (l, r)) in left.lines().zip(right.lines()).enumerate() {
        if l != r {
            return format!("line {}:\n  direct: {l}\n  sluice: {r}", number + 1);
        }
    }
    format!(
        "one is a prefix of the other: {} lines direct, {} through sluice",
        left.lines().count(),
        right.lines().count()
    )
}

/// GET `path` from the admin API at `address` with `token`; the JSON answer, which must
/// be a 200.
#[track_caller]
pub fn admin_json(address: &str, token: &str, path: &str) -> serde_json::Value {
    admin_call(address, token, "GET", path, None)
}

/// `method path` with a JSON `body` to the admin API at `address` with `token`; the JSON
/// answer, which must be a 200.
#[track_caller]
pub fn admin_call(
    address: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> serde_json::Value {
    let client = http::Client::new(address, Some(sluice::config::Secret(token.into())));
    let response = match body {
        Some(b) => client.send_json(method, path, b),
        None => client.request(method, path, None),
    }
    .unwrap_or_else(|e| panic!("admin API at {address}: {e:?}"));
    assert_eq!(
        response.status,
        200,
        "{method} {path}: {}",
        String::from_utf8_lossy(&response.body)
    );
    response.json().unwrap()
}

/// `sluice admin --address ADDRESS --token TOKEN ARGS...`.
pub fn sluice_admin(address: &str, token: &str, args: &[&str]) -> CliOutput {
    let mut all = vec!["admin", "--address", address, "--token", token];
    all.extend_from_slice(args);
    proxy::run_sluice(&all)
}
