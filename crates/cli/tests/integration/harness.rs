//! The harness itself, checked against MariaDB directly: if these fail, no other test
//! result means anything.

use std::time::{Duration, Instant};

use crate::support::wire::RawConn;
use crate::support::{
    dedicated_server, fresh_database, sandbox, shared_server, wait_process_gone, Client,
    MariaDbOptions, NATIVE_PASSWORD, NATIVE_USER, OTHER_USER,
};

#[test]
fn sandbox_server_starts_serves_and_cleans_up() {
    let started = Instant::now();
    let server = sandbox::MariaDb::start(MariaDbOptions {
        server_id: 7,
        max_connections: 123,
        ..MariaDbOptions::default()
    })
    .expect("starting a server");
    eprintln!("sandbox server started in {:?}", started.elapsed());
    let pid = server.pid();
    let datadir = server.datadir().to_path_buf();
    assert!(sandbox::process_alive(pid));
    assert!(datadir.join("error.log").exists());

    let variables = server
        .execute(
            "SELECT @@log_bin, @@binlog_format, @@server_id, @@max_connections, \
             @@max_allowed_packet, @@local_infile, @@bind_address, @@port, CURRENT_USER()",
        )
        .expect("querying variables");
    let values: Vec<&str> = variables.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(
        values,
        [
            "1",
            "ROW",
            "7",
            "123",
            "1073741824",
            "1",
            "127.0.0.1",
            &server.port().to_string(),
            "sluice_admin@%",
        ]
    );
    // The Sequence engine, which the failure tests use for endless results.
    assert_eq!(
        server
            .execute("SELECT COUNT(*) FROM mysql.seq_1_to_5")
            .unwrap(),
        "COUNT(*)\n5\n"
    );
    // Errors carry the client's stderr.
    let err = server.execute("SELECT * FROM no_such_db.t").unwrap_err();
    assert!(format!("{err:#}").contains("ERROR 1146"), "{err:#}");

    server.stop();
    assert!(!sandbox::process_alive(pid), "mariadbd {pid} still running");
    assert!(!datadir.exists(), "{} still exists", datadir.display());
}

#[test]
fn test_accounts_and_cli_helper_work_directly() {
    let server = shared_server();
    let out = Client::native(server.port()).query_ok("SELECT CURRENT_USER(), 1 + 1");
    assert_eq!(out, "app_native@%\t2\n");
    let out = Client::new(server.port(), OTHER_USER, "other_pw").query_ok("SELECT CURRENT_USER()");
    assert_eq!(out, "app_other@%\n");

    let denied = Client::new(server.port(), NATIVE_USER, "wrong").query("SELECT 1");
    assert_eq!(denied.code, Some(1));
    assert_eq!(
        denied.stderr,
        "ERROR 1045 (28000): Access denied for user 'app_native'@'127.0.0.1' (using password: YES)\n"
    );

    fresh_database(server, "harness_db");
    let out = Client::native(server.port())
        .database("harness_db")
        .query_ok("CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); SELECT SUM(a) FROM t;");
    assert_eq!(out, "3\n");
}

#[test]
fn raw_client_speaks_the_protocol_directly() {
    let server = shared_server();
    let mut conn = RawConn::login_ok(server.addr(), NATIVE_USER, NATIVE_PASSWORD);
    assert_eq!(
        conn.query_rows("SELECT 1, NULL, 'x'"),
        vec![vec![Some("1".to_owned()), None, Some("x".to_owned())]]
    );
    let err = conn.query("SELEC 1").unwrap();
    assert_eq!(err.expect_err().code, 1064);
    assert_eq!(err.expect_err().state, "42000");
    // A 20 MB value comes back whole through the 16 MiB packet continuation logic.
    let rows = conn.query_rows("SELECT LENGTH(REPEAT('a', 20000000)), REPEAT('a', 20000000)");
    assert_eq!(rows[0][0].as_deref(), Some("20000000"));
    assert_eq!(rows[0][1].as_ref().map(String::len), Some(20_000_000));

    let wrong = RawConn::login(server.addr(), NATIVE_USER, "nope", None);
    match wrong {
        Err(crate::support::wire::LoginError::Denied(err)) => {
            assert_eq!((err.code, err.state.as_str()), (1045, "28000"), "{err:?}")
        }
        other => panic!("expected access denied, got {:?}", other.err()),
    }
}

#[test]
fn tls_server_verifies_with_the_generated_ca() {
    let server = dedicated_server(MariaDbOptions {
        tls: true,
        ..MariaDbOptions::default()
    });
    let tls = server.tls().expect("TLS files").clone();
    let verified = Client::native(server.port())
        .args([
            "--ssl",
            "--ssl-verify-server-cert",
            &format!("--ssl-ca={}", tls.ca_cert.display()),
        ])
        .query_ok("SHOW SESSION STATUS LIKE 'Ssl_version'");
    assert!(verified.starts_with("Ssl_version\tTLSv1."), "{verified}");

    // The CLI's status command shows the cipher: what the client-side TLS tests read.
    let status = Client::native(server.port())
        .args(["--ssl", &format!("--ssl-ca={}", tls.ca_cert.display())])
        .arg("--execute=status")
        .run();
    status.assert_success();
    assert!(
        status.stdout.contains("Cipher in use is"),
        "{}",
        status.stdout
    );

    // A CA that did not sign the server's certificate must be refused.
    let other = tempfile::tempdir().unwrap();
    let other_ca = sandbox::generate_tls(other.path()).unwrap().ca_cert;
    let refused = Client::native(server.port())
        .args([
            "--ssl",
            "--ssl-verify-server-cert",
            &format!("--ssl-ca={}", other_ca.display()),
        ])
        .query("SELECT 1");
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(refused.stderr.contains("ERROR 2026"), "{}", refused.stderr);
}

/// Run by [`servers_do_not_outlive_a_killed_test_process`] in a child process: start a
/// server, report it, and wait to be killed.
#[test]
#[ignore = "helper run by servers_do_not_outlive_a_killed_test_process"]
fn orphan_helper() {
    if std::env::var_os("SLUICE_ORPHAN_HELPER").is_none() {
        return;
    }
    let server = sandbox::MariaDb::start(MariaDbOptions::default()).unwrap();
    println!("SERVER {} {}", server.pid(), server.datadir().display());
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn servers_do_not_outlive_a_killed_test_process() {
    let (mut helper, line) =
        crate::support::spawn_orphan_helper("harness::orphan_helper", "SERVER ");
    let line = line.expect("the helper reports its server");
    let mut fields = line.split(' ');
    let pid: u32 = fields.next().unwrap().parse().unwrap();
    let datadir = std::path::PathBuf::from(fields.next().unwrap());
    assert!(sandbox::process_alive(pid));

    // SIGKILL: no destructor runs; only the watchdog's closing pipe can clean up.
    helper.kill().unwrap();
    helper.wait().unwrap();
    assert!(
        wait_process_gone(pid, Duration::from_secs(30)),
        "mariadbd {pid} survived its test process"
    );
    assert!(
        crate::support::wait_until(Duration::from_secs(10), || !datadir.exists()),
        "{} survived its test process",
        datadir.display()
    );
}
