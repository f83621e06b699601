//! The command line: `sluice check-config` reports every problem of a file at once, and
//! `sluice serve` runs from flags alone.

use crate::support::proxy::run_sluice;
use crate::support::{
    free_port, shared_server, Client, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER,
};

fn write(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("sluice.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn check_config_lists_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        r#"
[[listeners]]
address = "not-an-address"

[[users]]
name = "nopw_one"

[[users]]
name = "nopw_two"

[[servers]]
name = "db1"
address = "nowhere:port"
"#,
    );
    let out = run_sluice(&["check-config", &path]);
    assert_ne!(out.code, Some(0), "a broken config passed: {out:?}");
    let report = format!("{}{}", out.stdout, out.stderr);
    for problem in ["not-an-address", "nopw_one", "nopw_two", "nowhere:port"] {
        assert!(
            report.contains(problem),
            "{problem} is not reported in:\n{report}"
        );
    }
}

#[test]
fn check_config_names_an_unknown_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = Config::new(shared_server().addr()).to_toml();
    text.push_str("\n[[users]]\nname = \"extra\"\npassword = \"x\"\ncolour = \"red\"\n");
    let path = write(&dir, &text);
    let out = run_sluice(&["check-config", &path]);
    assert_ne!(out.code, Some(0), "an unknown field passed: {out:?}");
    let report = format!("{}{}", out.stdout, out.stderr);
    assert!(
        report.contains("colour"),
        "the field is not named in:\n{report}"
    );
}

#[test]
fn check_config_accepts_a_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = Config::new(shared_server().addr())
        .pool("max_connections", 50)
        .pool("idle_timeout", "10m")
        .limit("handshake_timeout", "10s")
        .to_toml();
    let path = write(&dir, &text);
    let out = run_sluice(&["check-config", &path]);
    assert_eq!(
        out.code,
        Some(0),
        "a valid config was refused: {out:?}\n{text}"
    );
}

#[test]
fn serve_runs_from_command_line_flags() {
    let server = shared_server();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let backend = server.addr().to_string();
    let user = format!("{NATIVE_USER}:{NATIVE_PASSWORD}");
    let mut sluice = Sluice::start_with_args(
        &[
            "serve",
            "--listen",
            &listen,
            "--backend",
            &backend,
            "--user",
            &user,
        ],
        port,
    );
    assert_eq!(
        Client::native(port).query_ok("SELECT CURRENT_USER()"),
        "app_native@%\n"
    );
    // Only the user given on the command line exists.
    let other = Client::new(port, "app_other", "other_pw").query("SELECT 1");
    assert_eq!(other.code, Some(1), "{other:?}");
    sluice.assert_running();
}

#[test]
fn check_config_explains_bad_cache_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = Config::new(shared_server().addr()).to_toml();
    text.push_str(
        r#"
[cache]
max_bytes = "12 parsecs"
"#,
    );
    let out = run_sluice(&["check-config", &write(&dir, &text)]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("parsecs"), "{out:?}");

    let mut text = Config::new(shared_server().addr()).to_toml();
    text.push_str(
        r#"
[cache]
max_bytes = "1KiB"

[[cache.rules]]
name = "broken-regex"
match = "SELECT (unclosed"
ttl = "1m"

[[cache.rules]]
name = "no-ttl"
match = "SELECT"
ttl = "0s"

[[cache.rules]]
name = "broken-regex"
ttl = "1m"

[cache.binlog]
user = ""
password = "x"
server = "nope"
"#,
    );
    let out = run_sluice(&["check-config", &write(&dir, &text)]);
    assert_ne!(out.code, Some(0), "broken rules passed: {out:?}");
    for reason in [
        "cache.rules[0] (\"broken-regex\").match: invalid regular expression",
        "unclosed group",
        "ttl must be more than 0",
        "rule name used twice",
        "needs `match`",
        "cache.max_bytes",
        "binlog.user is empty",
        "no [[servers]] entry is named \"nope\"",
    ] {
        assert!(
            out.stderr.contains(reason),
            "{reason:?} not in:\n{}",
            out.stderr
        );
    }
    // A good cache section passes.
    let mut text = Config::new(shared_server().addr()).to_toml();
    text.push_str(
        "\n[cache]\nmax_bytes = \"64MiB\"\n[[cache.rules]]\nname = \"all\"\nmatch = \"(?i)^SELECT\"\nttl = \"1d\"\n",
    );
    let out = run_sluice(&["check-config", &write(&dir, &text)]);
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn check_config_explains_bad_sharding() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        r#"
[[listeners]]
address = "127.0.0.1:6033"

[[users]]
name = "app"
password = "pw"

[[servers]]
name = "db1"
address = "127.0.0.1:3306"

[[servers]]
name = "db2"
address = "127.0.0.1:3307"

[pool]
multiplex = false

[[shards]]
name = "s1"
servers = ["db1", "db3"]

[sharding]
default_shard = "s9"

[[sharding.tables]]
table = "orders"
key = "id"
"#,
    );
    let out = run_sluice(&["check-config", &path]);
    assert_ne!(out.code, Some(0), "a broken config passed: {out:?}");
    let report = format!("{}{}", out.stdout, out.stderr);
    for problem in [
        "no [[servers]] is named \"db3\"",
        "server \"db2\" is in no [[shards]]",
        "no shard is named \"s9\"",
        "name it as schema.table",
        "multiplex = true",
    ] {
        assert!(
            report.contains(problem),
            "{problem} is not reported in:\n{report}"
        );
    }
}

#[test]
fn check_config_explains_bad_replay_settings() {
    let dir = tempfile::tempdir().unwrap();
    for (key, value, named) in [
        (
            "replay_max_bytes",
            toml::Value::from("12 parsecs"),
            "parsecs",
        ),
        (
            "transaction_replay",
            toml::Value::from("yes"),
            "transaction_replay",
        ),
    ] {
        let text = Config::new(shared_server().addr())
            .failover(key, value)
            .to_toml();
        let out = run_sluice(&["check-config", &write(&dir, &text)]);
        assert_ne!(out.code, Some(0), "{key} passed: {out:?}");
        let report = format!("{}{}", out.stdout, out.stderr);
        assert!(report.contains(named), "{key}: {report}");
    }
    // Written as a size or a number of bytes, both accepted.
    for value in [toml::Value::from("256KiB"), toml::Value::from(65536)] {
        let text = Config::new(shared_server().addr())
            .failover("replay_max_bytes", value)
            .failover("transaction_replay", false)
            .to_toml();
        let out = run_sluice(&["check-config", &write(&dir, &text)]);
        assert_eq!(out.code, Some(0), "{out:?}");
    }
}
