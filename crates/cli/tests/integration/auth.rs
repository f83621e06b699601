//! Client authentication at Sluice: refusals look exactly like MariaDB's, and both
//! mysql_native_password and caching_sha2_password users get in (the latter with and
//! without TLS; without TLS the client fetches Sluice's RSA key for the full exchange).

use std::process::{Command, Stdio};
use std::time::Duration;

use sha1::{Digest, Sha1};

use crate::support::cli::finish;
use crate::support::proxy::User;
use crate::support::{
    fresh_database, repo_root, sandbox, shared_server, Client, Config, Sluice, NATIVE_PASSWORD,
    NATIVE_USER,
};

const SHA2_USER: &str = "app_sha2";
const SHA2_PASSWORD: &str = "sha2_pw";

#[test]
fn refusals_match_mariadb_exactly() {
    let server = shared_server();
    let mut sluice = Sluice::start(&Config::for_server(server));
    let cases = [
        (
            NATIVE_USER,
            "wrong_pw",
            "'app_native'@'127.0.0.1' (using password: YES)",
        ),
        (
            "nobody",
            "whatever",
            "'nobody'@'127.0.0.1' (using password: YES)",
        ),
        (
            NATIVE_USER,
            "",
            "'app_native'@'127.0.0.1' (using password: NO)",
        ),
    ];
    for (user, password, tail) in cases {
        let direct = Client::new(server.port(), user, password).query("SELECT 1");
        let proxied = Client::new(sluice.port(), user, password).query("SELECT 1");
        let expected = format!("ERROR 1045 (28000): Access denied for user {tail}\n");
        assert_eq!(direct.stderr, expected, "the direct control changed");
        assert_eq!(
            proxied.stderr, expected,
            "user {user:?} password {password:?}"
        );
        assert_eq!(proxied.code, Some(1));
        assert!(proxied.stdout.is_empty());
    }
    // Refusals are routine: the proxy goes on serving.
    sluice.assert_running();
    assert_eq!(Client::native(sluice.port()).query_ok("SELECT 1"), "1\n");
}

#[test]
fn caching_sha2_user_logs_in_without_tls() {
    let server = shared_server();
    let sluice =
        Sluice::start(&Config::for_server(server).user(User::sha2(SHA2_USER, SHA2_PASSWORD)));
    // The first login takes the full path (RSA key from Sluice, since there is no TLS);
    // the second may take the fast path from Sluice's cache. Both must work.
    for attempt in 1..=2 {
        let out = Client::new(sluice.port(), SHA2_USER, SHA2_PASSWORD)
            .arg("--skip-ssl")
            .query("SELECT CURRENT_USER()");
        assert!(out.success(), "attempt {attempt}: {}", out.stderr);
        assert_eq!(
            out.stdout, "CURRENT_USER()\napp_native@%\n",
            "attempt {attempt}"
        );
    }
    let wrong = Client::new(sluice.port(), SHA2_USER, "nope")
        .arg("--skip-ssl")
        .query("SELECT 1");
    assert_eq!(
        wrong.stderr,
        "ERROR 1045 (28000): Access denied for user 'app_sha2'@'127.0.0.1' (using password: YES)\n"
    );
}

#[test]
fn caching_sha2_user_logs_in_over_tls() {
    let server = shared_server();
    let certs = tempfile::tempdir().unwrap();
    let tls = sandbox::generate_tls(certs.path()).unwrap();
    let sluice = Sluice::start(
        &Config::for_server(server)
            .listener_tls(&tls, false)
            .user(User::sha2(SHA2_USER, SHA2_PASSWORD)),
    );
    for attempt in 1..=2 {
        let out = Client::new(sluice.port(), SHA2_USER, SHA2_PASSWORD)
            .args([
                "--ssl",
                "--ssl-verify-server-cert",
                &format!("--ssl-ca={}", tls.ca_cert.display()),
            ])
            .query("SELECT CURRENT_USER()");
        assert!(out.success(), "attempt {attempt}: {}", out.stderr);
        assert_eq!(
            out.stdout, "CURRENT_USER()\napp_native@%\n",
            "attempt {attempt}"
        );
    }
}

#[test]
fn sha2_default_plugin_still_admits_native_users() {
    let server = shared_server();
    let mut config = Config::for_server(server).user(User::sha2(SHA2_USER, SHA2_PASSWORD));
    config.listeners[0].default_auth_plugin = Some("caching_sha2_password".to_owned());
    let sluice = Sluice::start(&config);
    // The client answers the greeting with the wrong plugin's scramble for one of the
    // two users: Sluice must switch it to the user's own plugin.
    let native = Client::native(sluice.port())
        .arg("--skip-ssl")
        .query_ok("SELECT CURRENT_USER()");
    assert_eq!(native, "app_native@%\n");
    let sha2 = Client::new(sluice.port(), SHA2_USER, SHA2_PASSWORD)
        .arg("--skip-ssl")
        .query_ok("SELECT CURRENT_USER()");
    assert_eq!(sha2, "app_native@%\n");
}

#[test]
fn pymysql_caching_sha2_matches_direct_native_login() {
    let root = repo_root();
    let python = root.join(".venv/bin/python");
    let script = root.join("tests/clients/python/compat.py");
    assert!(
        python.exists() && script.exists(),
        "{} or {} is missing; run `make test`, which installs the test clients",
        python.display(),
        script.display()
    );
    let server = shared_server();
    fresh_database(server, "sluice_sha2");
    let sluice =
        Sluice::start(&Config::for_server(server).user(User::sha2(SHA2_USER, SHA2_PASSWORD)));
    let run = |port: u16, user: &str, password: &str| {
        let child = Command::new(&python)
            .arg(&script)
            .args([
                "--port",
                &port.to_string(),
                "--user",
                user,
                "--password",
                password,
            ])
            .args(["--database", "sluice_sha2", "--scenario", "sha2"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting python");
        let out = finish(
            child,
            Vec::new(),
            Duration::from_secs(60),
            "compat.py --scenario sha2",
        );
        assert!(out.success(), "port {port} user {user}: {}", out.stderr);
        serde_json::from_str::<serde_json::Value>(&out.stdout).expect("a JSON document")
    };
    let direct = run(server.port(), NATIVE_USER, NATIVE_PASSWORD);
    // PyMySQL without TLS: full authentication with RSA (the `cryptography` package).
    let proxied = run(sluice.port(), SHA2_USER, SHA2_PASSWORD);
    assert_eq!(direct, proxied);
}

#[test]
fn password_hash_users_log_in() {
    let server = shared_server();
    let hash = format!(
        "*{}",
        Sha1::digest(Sha1::digest(b"hashed_pw"))
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<String>()
    );
    let user = User {
        name: "app_hashed".to_owned(),
        password: None,
        password_hash: Some(hash),
        auth_plugin: Some("mysql_native_password".to_owned()),
        backend_user: Some(NATIVE_USER.to_owned()),
        backend_password: Some(NATIVE_PASSWORD.to_owned()),
    };
    let sluice = Sluice::start(&Config::for_server(server).user(user));
    let out =
        Client::new(sluice.port(), "app_hashed", "hashed_pw").query_ok("SELECT CURRENT_USER()");
    assert_eq!(out, "app_native@%\n");
    let wrong = Client::new(sluice.port(), "app_hashed", "hashed_pw2").query("SELECT 1");
    assert_eq!(wrong.code, Some(1), "{wrong:?}");
    assert!(
        wrong.stderr.starts_with("ERROR 1045 (28000)"),
        "{}",
        wrong.stderr
    );
}
