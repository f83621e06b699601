//! Unix sockets on both sides: clients of Sluice's socket get what clients of MariaDB's
//! own socket get (the same login, TLS offered as the server offers it, `localhost` as
//! their host), and Sluice reaches a server over the server's socket for everything it
//! opens there (pool, monitor, binlog). The socket file is Sluice's: a stale one is
//! replaced, a live one stops a second Sluice, and it is gone after a clean shutdown.

use crate::support::cli::Client;
use crate::support::proxy::{run_sluice, Server, User};
use crate::support::*;
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "t0ken";

fn admin_get(address: &str, path: &str) -> serde_json::Value {
    admin_json(address, TOKEN, path)
}

/// A directory for socket files, short enough for `sun_path`.
fn socket_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sluice-sock-")
        .tempdir()
        .expect("creating a temp dir")
}

/// The client over `socket` as the test account.
fn over(socket: &Path) -> Client {
    Client::native(0).socket(socket)
}

/// The capability flags of the greeting a server sends on `socket`.
fn greeting_caps(socket: &Path) -> u32 {
    let mut s = UnixStream::connect(socket).expect("connecting to the socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut header = [0u8; 4];
    s.read_exact(&mut header).unwrap();
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).unwrap();
    // protocol version, version string, thread id, 8 nonce bytes, filler.
    let mut at = 1 + p[1..].iter().position(|&b| b == 0).unwrap() + 1 + 4 + 8 + 1;
    let low = u32::from(u16::from_le_bytes([p[at], p[at + 1]]));
    at += 2 + 1 + 2;
    let high = u32::from(u16::from_le_bytes([p[at], p[at + 1]]));
    low | high << 16
}

const CLIENT_SSL: u32 = 0x800;

/// One table of two rows in a fresh database `db`.
fn table(server: &MariaDb, db: &str) {
    fresh_database(server, db);
    server
        .execute(&format!(
            "CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20));\n\
             INSERT INTO `{db}`.t VALUES (1, 'one'), (2, 'two');"
        ))
        .unwrap();
}

/// Statements, text and binary prepared statements, the cache, the processlist view and
/// KILL, all over Sluice's socket with the `mariadb` CLI and mysql2.
#[test]
fn socket_clients_get_queries_prepared_statements_cache_and_kill() {
    let server = shared_server();
    table(server, "unixsock");
    let dir = socket_dir();
    let socket = dir.path().join("sluice.sock");
    let config = Config::for_server(server)
        .socket_listener(&socket)
        .cache_rule("points", "(?i)^SELECT v FROM t WHERE id", "1h")
        .admin(TOKEN);
    let address = config.admin_address().unwrap();
    let sluice = Sluice::start(&config);

    let status = over(&socket).arg("--execute=status").run();
    status.assert_success();
    assert!(
        status.stdout.contains("Localhost via UNIX socket"),
        "{}",
        status.stdout
    );
    let client = over(&socket).database("unixsock");
    for _ in 0..3 {
        assert_eq!(client.query_ok("SELECT v FROM t WHERE id = 1"), "one\n");
    }
    let stats = admin_get(&address, "/v1/cache/stats");
    let points = stats["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "points")
        .unwrap_or_else(|| panic!("no rule in {stats:#}"));
    assert_eq!(points["hits"], 2, "{stats:#}");

    assert_eq!(
        client.query_ok(
            "PREPARE s FROM 'SELECT v FROM t WHERE id = ?'; SET @i = 2; EXECUTE s USING @i;"
        ),
        "two\n"
    );
    mysql2_execute_over(&socket, "unixsock");

    // A long statement, seen as a `localhost` session, then killed from another client.
    let mut sleeper = over(&socket)
        .args(["--batch", "--execute=SELECT SLEEP(60)"])
        .spawn();
    let mut victim = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            let sessions = admin_get(&address, "/v1/sessions");
            victim = sessions
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["state"] != "idle")
                .map(|s| {
                    assert_eq!(s["client"], "localhost", "{s:#}");
                    s["id"].as_u64().unwrap()
                });
            victim.is_some()
        }),
        "no active session: {:#}",
        admin_get(&address, "/v1/sessions")
    );
    over(&socket).query_ok(&format!("KILL {}", victim.unwrap()));
    let ended = sandbox::wait_child(&mut sleeper, Duration::from_secs(10)).unwrap();
    let Some(ended) = ended else {
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        panic!("the killed client still runs");
    };
    assert!(!ended.success(), "the killed statement finished");
    drop(sluice);
}

/// mysql2's `execute` (binary prepared statements) over `socket`.
fn mysql2_execute_over(socket: &Path, database: &str) {
    let root = repo_root();
    let node_dir = root.join("tests/clients/node");
    assert!(
        node_dir.join("node_modules/mysql2").exists(),
        "mysql2 is missing; run `make test`, which installs the test clients"
    );
    let node = sandbox::find_program(&["node", "nodejs"])
        .unwrap_or_else(|e| panic!("{e:#}; run `make test`, which installs Node.js"));
    let script = r#"
        const mysql = require('mysql2/promise');
        (async () => {
          const [socketPath, user, password, database] = process.argv.slice(1);
          const c = await mysql.createConnection({ socketPath, user, password, database });
          const out = [];
          for (const id of [1, 2, 1]) {
            const [rows] = await c.execute('SELECT v FROM t WHERE id = ?', [id]);
            out.push(rows[0].v);
          }
          await c.end();
          console.log(out.join(','));
        })().catch((e) => { console.error(e); process.exit(1); });
    "#;
    let child = Command::new(node)
        .args(["-e", script])
        .arg(socket)
        .args([NATIVE_USER, NATIVE_PASSWORD, database])
        .current_dir(node_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting node");
    let out = crate::support::cli::finish(child, Vec::new(), Duration::from_secs(60), "mysql2");
    assert!(out.success(), "mysql2 over the socket: {}", out.stderr);
    assert_eq!(out.stdout.trim(), "one,two,one");
}

/// The socket is a secure transport, as the server counts it: PyMySQL sends a
/// `caching_sha2_password` password in clear over it on the full path (where over plain
/// TCP it asks for the RSA key), and Sluice takes it; an ed25519 server account, which
/// needs its password sent in clear, logs in over it without TLS. A refused login names
/// `'user'@'localhost'`, as MariaDB's own socket does.
#[test]
fn the_socket_is_a_secure_transport_and_its_clients_are_localhost() {
    let server = shared_server();
    let dir = socket_dir();
    let socket = dir.path().join("sluice.sock");
    // Known only by its hash, the user takes the full path at its first login.
    let hash = server.execute("SELECT PASSWORD('sha2_pw')").unwrap();
    let sha2 = User {
        password: None,
        password_hash: Some(hash.lines().nth(1).unwrap().trim().to_owned()),
        ..User::sha2("sock_sha2", "")
    };
    let config = Config::for_server(server)
        .socket_listener(&socket)
        .user(sha2);
    let _sluice = Sluice::start(&config);

    let python = repo_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing; run `make test`, which installs the test clients",
        python.display()
    );
    let script = r#"
import sys, pymysql
c = pymysql.connect(unix_socket=sys.argv[1], user=sys.argv[2], password=sys.argv[3])
cur = c.cursor()
cur.execute("SELECT 6 * 7")
print(cur.fetchone()[0])
"#;
    let child = Command::new(python)
        .args(["-c", script])
        .arg(&socket)
        .args(["sock_sha2", "sha2_pw"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting python");
    let out = crate::support::cli::finish(child, Vec::new(), Duration::from_secs(60), "pymysql");
    assert!(out.success(), "PyMySQL over the socket: {}", out.stderr);
    assert_eq!(out.stdout.trim(), "42");

    let wrong = |socket: &Path| {
        Client::new(0, NATIVE_USER, "wrong")
            .socket(socket)
            .query("SELECT 1")
            .stderr
    };
    let through = wrong(&socket);
    assert_eq!(
        through.replace(&socket.display().to_string(), "SOCKET"),
        wrong(&server.socket()).replace(&server.socket().display().to_string(), "SOCKET")
    );
    assert!(through.contains("'app_native'@'localhost'"), "{through}");

    crate::accounts::create_ed25519_user(server, "sock_ed_server", "ed_server_pw");
    let accounts_socket = dir.path().join("accounts.sock");
    let _accounts = Sluice::start(
        &Config::for_server(server)
            .server_accounts()
            .socket_listener(&accounts_socket),
    );
    let ed = Client::new(0, "sock_ed_server", "ed_server_pw")
        .socket(&accounts_socket)
        .query("SELECT CURRENT_USER()");
    assert!(ed.success(), "{}", ed.stderr);
    assert_eq!(ed.stdout, "CURRENT_USER()\nsock_ed_server@%\n");
}

/// TLS over a Unix socket is what MariaDB 10.11 does there: offered when it has a
/// certificate (the greeting's CLIENT_SSL is the same as over TCP) and taken when the
/// client asks.
#[test]
fn tls_over_the_socket_is_offered_as_mariadb_offers_it() {
    let server = dedicated_server(MariaDbOptions {
        tls: true,
        ..Default::default()
    });
    let tls = server.tls().expect("the server has TLS files").clone();
    let dir = socket_dir();
    let plain_socket = dir.path().join("plain.sock");
    let tls_socket = dir.path().join("tls.sock");
    let plain = Sluice::start(&Config::for_server(&server).socket_listener(&plain_socket));
    let with_tls = Sluice::start(
        &Config::for_server(&server)
            .listener_tls(&tls, false)
            .socket_listener(&tls_socket),
    );

    assert_ne!(greeting_caps(&server.socket()) & CLIENT_SSL, 0);
    assert_ne!(greeting_caps(&tls_socket) & CLIENT_SSL, 0);
    assert_eq!(greeting_caps(&plain_socket) & CLIENT_SSL, 0);

    let ssl_line = |client: Client| {
        let out = client
            .args(["--ssl", &format!("--ssl-ca={}", tls.ca_cert.display())])
            .arg("--execute=status")
            .run();
        out.assert_success();
        out.stdout
            .lines()
            .find(|l| l.starts_with("SSL:"))
            .unwrap_or_default()
            .to_owned()
    };
    let direct = ssl_line(over(&server.socket()));
    let through = ssl_line(over(&tls_socket));
    assert!(direct.contains("Cipher in use"), "{direct}");
    assert!(through.contains("Cipher in use"), "{through}");
    drop((plain, with_tls));
}

/// Pool, monitor and binlog reader all reach the server over its socket: the server
/// sees Sluice's pooled connection from `localhost`, the monitor finds it up, the admin
/// API names it by its socket, and a write made directly on the server reaches the cache
/// through the binlog.
#[test]
fn sluice_reaches_a_server_over_its_socket() {
    let server = dedicated_server(MariaDbOptions::default());
    table(&server, "viasock");
    let binlog = crate::support::binlog_section();
    // The monitor watches only when there is a choice of server: the same server over
    // TCP is the second, a reader that gets nothing without the split.
    let mut config = Config::for_server(&server)
        .cache_rule("points", "(?i)^SELECT v FROM t WHERE id", "1h")
        .cache("binlog", binlog)
        .routing("read_write_split", false)
        .admin(TOKEN);
    config.servers = vec![
        Server::at_socket("db1", &server.socket()).set("role", "writer"),
        Server::new("db2", server.addr()).set("role", "reader"),
    ];
    let address = config.admin_address().unwrap();
    let sluice = Sluice::start(&config);

    let client = Client::native(sluice.port()).database("viasock");
    assert_eq!(client.query_ok("SELECT v FROM t WHERE id = 1"), "one\n");
    let from_localhost = server
        .execute(&format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE USER = '{NATIVE_USER}' AND HOST = 'localhost'"
        ))
        .unwrap();
    assert_ne!(from_localhost.lines().nth(1), Some("0"), "{from_localhost}");

    assert!(
        wait_until(Duration::from_secs(10), || {
            let servers = admin_get(&address, "/v1/servers");
            servers["servers"][0]["health"] == "up"
        }),
        "the monitor did not find the server up: {:#}",
        admin_get(&address, "/v1/servers")
    );
    let servers = admin_get(&address, "/v1/servers");
    assert_eq!(
        servers["servers"][0]["address"],
        server.socket().display().to_string()
    );

    assert!(
        wait_until(Duration::from_secs(10), || {
            admin_get(&address, "/v1/cache/stats")["binlog"] == "following"
        }),
        "the binlog reader did not start: {:#}",
        admin_get(&address, "/v1/cache/stats")
    );
    assert_eq!(client.query_ok("SELECT v FROM t WHERE id = 1"), "one\n");
    server
        .execute("UPDATE viasock.t SET v = 'uno' WHERE id = 1")
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || {
            client.query_ok("SELECT v FROM t WHERE id = 1") == "uno\n"
        }),
        "the cached row never saw the direct write"
    );
    drop(sluice);
}

/// The socket file's life: a stale one is replaced at start, a second Sluice on the same
/// path refuses to start and leaves it alone, and a clean shutdown removes it.
#[test]
fn the_socket_file_is_replaced_when_stale_refused_when_live_and_removed_at_exit() {
    let server = shared_server();
    let dir = socket_dir();
    let socket = dir.path().join("sluice.sock");
    // What a killed process leaves behind: the file, with nothing listening.
    drop(UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());

    let config = Config::for_server(server).socket_listener(&socket);
    let mut first = Sluice::start(&config);
    assert_eq!(over(&socket).query_ok("SELECT 'first'"), "first\n");

    let second_dir = tempfile::tempdir().unwrap();
    let second_config = second_dir.path().join("sluice.toml");
    Config::for_server(server)
        .socket_listener(&socket)
        .write(&second_config);
    let second = run_sluice(&["serve", "--config", second_config.to_str().unwrap()]);
    assert!(!second.success(), "a second Sluice started: {second:?}");
    let said = format!("{}{}", second.stdout, second.stderr);
    assert!(
        said.contains(&format!(
            "another process is listening on {}",
            socket.display()
        )),
        "{said}"
    );
    assert_eq!(
        over(&socket).query_ok("SELECT 'still first'"),
        "still first\n"
    );

    assert!(first.stop().success(), "{}", first.log());
    assert!(!socket.exists(), "the socket file outlived Sluice");
}

/// `serve --listen` takes a socket path (anything starting with `/`) next to addresses.
#[test]
fn serve_listen_takes_a_socket_path() {
    let server = shared_server();
    let dir = socket_dir();
    let socket: PathBuf = dir.path().join("cli.sock");
    let port = free_port();
    let backend = server.addr().to_string();
    let user = format!("{NATIVE_USER}:{NATIVE_PASSWORD}");
    let tcp = format!("127.0.0.1:{port}");
    let mut sluice = Sluice::start_with_args(
        &[
            "serve",
            "--listen",
            &tcp,
            "--listen",
            socket.to_str().unwrap(),
            "--backend",
            &backend,
            "--user",
            &user,
        ],
        port,
    );
    assert!(
        wait_until(Duration::from_secs(10), || UnixStream::connect(&socket)
            .is_ok()),
        "not listening on {}: {}",
        socket.display(),
        sluice.log()
    );
    assert_eq!(
        over(&socket).query_ok("SELECT 'via --listen'"),
        "via --listen\n"
    );
    assert!(sluice.stop().success());
    assert!(!socket.exists());
}

/// sysbench pointed at Sluice's socket (`--mysql-socket`), as the benchmark's Unix-socket
/// cells run it: point selects, prepared, with no error.
#[test]
fn sysbench_runs_over_the_socket() {
    let server = shared_server();
    fresh_database(server, "sbsock");
    let dir = socket_dir();
    let socket = dir.path().join("sluice.sock");
    let sluice = Sluice::start(&Config::for_server(server).socket_listener(&socket));
    let sysbench = |target: &[String], action: &[&str]| {
        let child = Command::new("sysbench")
            .args(["oltp_point_select", "--db-driver=mysql"])
            .args(target)
            .arg(format!("--mysql-user={NATIVE_USER}"))
            .arg(format!("--mysql-password={NATIVE_PASSWORD}"))
            .args(["--mysql-db=sbsock", "--tables=1", "--table-size=1000"])
            .args(action)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("sysbench could not be started ({e}); run `make test`, which installs it")
            });
        let out =
            crate::support::cli::finish(child, Vec::new(), Duration::from_secs(60), "sysbench");
        assert!(
            out.success(),
            "sysbench {action:?}: {}{}",
            out.stdout,
            out.stderr
        );
        out.stdout
    };
    let direct = [
        "--mysql-host=127.0.0.1".to_owned(),
        format!("--mysql-port={}", server.port()),
    ];
    sysbench(&direct, &["prepare"]);
    let over_socket = [
        "--mysql-host=localhost".to_owned(),
        format!("--mysql-socket={}", socket.display()),
    ];
    let out = sysbench(
        &over_socket,
        &["--threads=4", "--time=3", "--db-ps-mode=auto", "run"],
    );
    let errors = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("ignored errors:"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no error count in:\n{out}"));
    assert_eq!(errors, "0", "{out}");
    assert!(out.contains("queries:"), "{out}");
    drop(sluice);
}
