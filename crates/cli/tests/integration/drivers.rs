//! Language drivers see the same thing directly and through Sluice: PyMySQL and Node's
//! mysql2 each run a fixed scenario (tests/clients/) and print one canonical JSON
//! document of everything they observed; the two documents must be equal.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::cli::finish;
use crate::support::{
    fresh_database, repo_root, shared_server, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER,
    OTHER_PASSWORD, OTHER_USER,
};

/// Run a driver script against 127.0.0.1:`port` into a freshly created `database`,
/// returning its JSON document.
fn run_driver(
    program: &Path,
    script: &Path,
    port: u16,
    database: &str,
    extra: &[&str],
) -> serde_json::Value {
    fresh_database(shared_server(), database);
    run_script(program, script, port, database, extra)
}

/// Runs a driver script against 127.0.0.1:`port` in `database`, which exists: its JSON
/// document.
pub(super) fn run_script(
    program: &Path,
    script: &Path,
    port: u16,
    database: &str,
    extra: &[&str],
) -> serde_json::Value {
    let mut command = Command::new(program);
    command
        .arg(script)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--user", NATIVE_USER, "--password", NATIVE_PASSWORD])
        .args(["--database", database])
        .args(extra)
        .current_dir(script.parent().unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap_or_else(|e| {
        panic!(
            "starting {}: {e}; run `make test`, which installs it",
            program.display()
        )
    });
    let output = finish(
        child,
        Vec::new(),
        Duration::from_secs(120),
        &format!("{command:?}"),
    );
    assert!(
        output.success(),
        "{} against port {port} failed (exit {:?}):\n{}",
        script.display(),
        output.code,
        output.stderr
    );
    serde_json::from_str(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{} printed no JSON document ({e}):\n{}",
            script.display(),
            output.stdout
        )
    })
}

/// Run the same script directly and through Sluice and require equal documents.
fn compare(program: PathBuf, script: PathBuf, database: &str, extra: &[&str]) {
    let server = shared_server();
    let mut sluice = Sluice::start(&Config::for_server(server));
    let direct = run_driver(&program, &script, server.port(), database, extra);
    let proxied = run_driver(&program, &script, sluice.port(), database, extra);
    sluice.assert_running();
    if direct != proxied {
        let direct = serde_json::to_string_pretty(&direct).unwrap();
        let proxied = serde_json::to_string_pretty(&proxied).unwrap();
        panic!(
            "{} observed something different through sluice: {}\n--- direct ---\n{direct}\n--- sluice ---\n{proxied}",
            script.display(),
            crate::support::first_difference(&direct, &proxied)
        );
    }
}

#[track_caller]
pub(super) fn require(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing ({what}); run `make test`, which installs the test clients",
        path.display()
    );
    path
}

#[test]
fn pymysql_sees_the_same_as_direct() {
    let root = repo_root();
    let python = require(
        root.join(".venv/bin/python"),
        "the Python virtual environment",
    );
    let script = require(
        root.join("tests/clients/python/compat.py"),
        "the PyMySQL scenario",
    );
    compare(python, script, "sluice_py", &[]);
}

#[test]
fn mysql2_sees_the_same_as_direct() {
    let root = repo_root();
    let script = require(
        root.join("tests/clients/node/compat.js"),
        "the mysql2 scenario",
    );
    require(
        root.join("tests/clients/node/node_modules/mysql2"),
        "the mysql2 package",
    );
    let node = sluice_sandbox::find_program(&["node", "nodejs"])
        .unwrap_or_else(|e| panic!("{e:#}; run `make test`, which installs Node.js"));
    // The scenario also switches users with COM_CHANGE_USER.
    compare(
        node,
        script,
        "sluice_node",
        &["--user2", OTHER_USER, "--password2", OTHER_PASSWORD],
    );
}

/// The mysql2 scenario `scenario` in database `database` sees through Sluice,
/// multiplexed and not, exactly what it sees directly.
fn mysql2_scenario_as_direct(scenario: &str, database: &str) {
    let root = repo_root();
    let script = require(
        root.join("tests/clients/node/compat.js"),
        "the mysql2 scenario",
    );
    let node = sluice_sandbox::find_program(&["node", "nodejs"])
        .unwrap_or_else(|e| panic!("{e:#}; run `make test`, which installs Node.js"));
    let server = shared_server();
    let args = ["--scenario", scenario];
    let direct = run_driver(&node, &script, server.port(), database, &args);
    for multiplex in [true, false] {
        let sluice = Sluice::start(&Config::for_server(server).pool("multiplex", multiplex));
        let proxied = run_driver(&node, &script, sluice.port(), database, &args);
        if direct != proxied {
            let direct = serde_json::to_string_pretty(&direct).unwrap();
            let proxied = serde_json::to_string_pretty(&proxied).unwrap();
            panic!(
                "multiplex = {multiplex}: {}\n--- direct ---\n{direct}\n--- sluice ---\n{proxied}",
                crate::support::first_difference(&direct, &proxied)
            );
        }
    }
}

/// mysql2 negotiates session tracking: the status flags and state changes it decodes
/// are the ones its own `session_track_*` settings give directly, multiplexed or not.
#[test]
fn mysql2_session_tracking_is_the_clients_own() {
    mysql2_scenario_as_direct("tracking", "sluice_node_track");
}

/// KILL as mysql2's pool code sends it (`KILL n; SELECT 1`), a prepared KILL, and a
/// connection killed while its query runs: the driver sees what it sees directly,
/// multiplexed or not.
#[test]
fn mysql2_kill_forms_act_as_on_the_server() {
    mysql2_scenario_as_direct("kill", "sluice_node_kill");
}
