//! Paths through the proxy that need more than one client to see: a result far larger
//! than memory, caching_sha2_password towards a backend that offers it, server-side
//! cursors, KILL with Sluice's connection ids, and LOAD DATA LOCAL INFILE.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::proxy::User;
use crate::support::wire::{RawConn, Reply, COM_QUERY};
use crate::support::*;

const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_FETCH: u8 = 0x1c;
const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x40;
const SERVER_STATUS_LAST_ROW_SENT: u16 = 0x80;

/// Peak resident memory of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("reading /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status")
}

/// A 300 MB result goes through while Sluice's peak memory grows by less than 16 MiB:
/// the result is streamed, never held. (docs/BENCHMARKS.md has the 1.1 GB run.)
#[test]
fn large_result_keeps_memory_bounded() {
    let server = shared_server();
    fresh_database(server, "streaming");
    let sluice = Sluice::start(&Config::for_server(server));
    // Warm up: one login and query so buffers and pools exist before the baseline.
    Client::native(sluice.port())
        .database("streaming")
        .query_ok("SELECT 1");
    let before = peak_rss_kib(sluice.pid());

    let rows = 300_000;
    // Through a pipe, so the 300 MB never sit in the test process either; `-q` makes
    // the client stream rather than buffer the result.
    let shell = format!(
        "mariadb --no-defaults -h127.0.0.1 -P{} -u{NATIVE_USER} -p{NATIVE_PASSWORD} -q -N streaming \
           -e 'SELECT REPEAT(\"x\", 1000) FROM seq_1_to_{rows}' | wc -c",
        sluice.port()
    );
    let out = Command::new("bash")
        .args(["-o", "pipefail", "-c", &shell])
        .output()
        .expect("running the mariadb client");
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a byte count");
    assert_eq!(
        bytes,
        rows * 1001,
        "every row (1000 bytes and a newline) arrived"
    );

    let after = peak_rss_kib(sluice.pid());
    assert!(
        after.saturating_sub(before) < 16 * 1024,
        "peak RSS grew from {before} KiB to {after} KiB while streaming {bytes} bytes"
    );
}

/// Hex of SHA1(SHA1(password)) with a leading '*', as `mysql.user` stores it.
fn native_hash(password: &str) -> String {
    let h = sluice_wire::auth::native_stored_hash(password.as_bytes());
    format!(
        "*{}",
        h.iter().map(|b| format!("{b:02X}")).collect::<String>()
    )
}

/// A Sluice whose users authenticate with caching_sha2_password, in front of MariaDB.
/// "sha2_fast" has a plain password (fast path known), "sha2_full" only a native hash,
/// so the first login must take the full path.
fn sha2_inner(tls: Option<&TlsFiles>) -> Sluice {
    let mut config = Config::for_server(shared_server())
        .user(User::sha2("sha2_fast", "fast_pw"))
        .user(User {
            password: None,
            password_hash: Some(native_hash("full_pw")),
            ..User::sha2("sha2_full", "unused")
        });
    if let Some(tls) = tls {
        config = config.listener_tls(tls, false);
    }
    Sluice::start(&config)
}

/// The backend side of caching_sha2_password, against Sluice's own server side (MariaDB
/// has no such plugin): an outer Sluice logs in to an inner one. The inner one starts
/// the handshake with mysql_native_password and switches, so the backend's handling
/// of an auth switch is exercised too.
#[test]
fn backend_login_with_caching_sha2_fast_and_rsa_paths() {
    let inner = sha2_inner(None);
    let outer_user = |name: &str, backend_user: &str, backend_password: &str| User {
        backend_user: Some(backend_user.to_owned()),
        backend_password: Some(backend_password.to_owned()),
        ..User::native(name, "outer_pw")
    };
    let outer = Sluice::start(
        &Config::new(inner.addr())
            .user(outer_user("via_fast", "sha2_fast", "fast_pw"))
            .user(outer_user("via_full", "sha2_full", "full_pw"))
            .user(outer_user("via_wrong", "sha2_full", "not_the_pw")),
    );
    for user in ["via_full", "via_fast", "via_full"] {
        let out = Client::new(outer.port(), user, "outer_pw").query_ok("SELECT CURRENT_USER()");
        assert!(out.contains(NATIVE_USER), "{user}: {out}");
    }
    let denied = Client::new(outer.port(), "via_wrong", "outer_pw").query("SELECT 1");
    assert!(!denied.success());
    assert!(
        denied
            .stderr
            .contains("ERROR 1045 (28000): Access denied for user 'sha2_full'"),
        "the inner Sluice's refusal reaches the client: {}",
        denied.stderr
    );
}

/// Full authentication over TLS sends the password itself; the backend side must only
/// do that on an encrypted connection.
#[test]
fn backend_login_with_caching_sha2_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let tls = sandbox::generate_tls(dir.path()).unwrap();
    let inner = sha2_inner(Some(&tls));
    let mut config = Config::new(inner.addr()).user(User {
        backend_user: Some("sha2_full".to_owned()),
        backend_password: Some("full_pw".to_owned()),
        ..User::native("via_tls", "outer_pw")
    });
    config.servers[0].tls = Some("required".to_owned());
    config.servers[0].tls_ca = Some(tls.ca_cert.clone());
    config.servers[0].address = format!("localhost:{}", inner.port());
    let outer = Sluice::start(&config);
    let out = Client::new(outer.port(), "via_tls", "outer_pw").query_ok("SELECT CURRENT_USER()");
    assert!(out.contains(NATIVE_USER), "{out}");
}

/// Prepare, execute with a read-only cursor, fetch in pieces, then a plain query: the
/// binary rows are those MariaDB sends directly, and the session stays in step.
fn cursor_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawConn::login(addr, NATIVE_USER, NATIVE_PASSWORD, Some("cursors"))
        .unwrap_or_else(|e| panic!("login to {addr}: {e:?}"));
    c.send_command(
        COM_STMT_PREPARE,
        b"SELECT n, CONCAT('row ', n) FROM t ORDER BY n",
    )
    .unwrap();
    let ok = c.read_message().unwrap();
    assert_eq!(ok[0], 0, "prepare OK: {ok:?}");
    let stmt = ok[1..5].to_vec();
    let columns = u16::from_le_bytes([ok[5], ok[6]]);
    for _ in 0..columns + 1 {
        c.read_message().unwrap(); // column definitions and their EOF
    }
    let mut execute = stmt.clone();
    execute.push(1); // CURSOR_TYPE_READ_ONLY
    execute.extend_from_slice(&1u32.to_le_bytes());
    c.send_command(COM_STMT_EXECUTE, &execute).unwrap();
    assert_eq!(c.read_message().unwrap(), vec![2], "column count");
    for _ in 0..columns {
        c.read_message().unwrap();
    }
    let eof = c.read_message().unwrap();
    assert_eq!(eof[0], 0xfe);
    assert_ne!(
        u16::from_le_bytes([eof[3], eof[4]]) & SERVER_STATUS_CURSOR_EXISTS,
        0
    );

    let mut rows = Vec::new();
    for _ in 0..10 {
        let mut fetch = stmt.clone();
        fetch.extend_from_slice(&3u32.to_le_bytes());
        c.send_command(COM_STMT_FETCH, &fetch).unwrap();
        loop {
            let p = c.read_message().unwrap();
            if p[0] == 0xfe && p.len() < 9 {
                let status = u16::from_le_bytes([p[3], p[4]]);
                if status & SERVER_STATUS_LAST_ROW_SENT != 0 {
                    assert_eq!(
                        c.query_rows("SELECT 'in step'"),
                        vec![vec![Some("in step".to_owned())]]
                    );
                    return rows;
                }
                break;
            }
            rows.push(p);
        }
    }
    panic!("the cursor never reported its last row");
}

#[test]
fn server_side_cursors_fetch_through_sluice() {
    let server = shared_server();
    fresh_database(server, "cursors");
    server
        .execute("CREATE TABLE cursors.t (n INT PRIMARY KEY); INSERT INTO cursors.t SELECT seq FROM cursors.seq_1_to_10;")
        .unwrap();
    let sluice = Sluice::start(&Config::for_server(server));
    let direct = cursor_session(server.addr());
    assert_eq!(direct.len(), 10);
    assert_eq!(cursor_session(sluice.addr()), direct);
}

/// `KILL QUERY id` names Sluice's connection id (what the client's greeting said); it
/// must stop that session's statement on its backend thread, and an unknown id is an
/// error rather than a kill of some unrelated backend thread.
#[test]
fn kill_query_uses_sluice_connection_ids() {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server));
    let mut victim = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let id = victim.greeting.connection_id;
    let sql = "SELECT SLEEP(30) AS kill_test";
    victim.send_command(COM_QUERY, sql.as_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(10), || running_statements(
        server, sql
    ) == 1));

    let started = Instant::now();
    Client::native(sluice.port()).query_ok(&format!("KILL QUERY {id}"));
    let reply = victim.read_reply().expect("the victim gets an answer");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the statement was stopped"
    );
    match reply {
        // MariaDB answers an interrupted SLEEP with 1, or with error 1317.
        Reply::ResultSet { .. } => assert_eq!(reply.text_rows(), vec![vec![Some("1".to_owned())]]),
        Reply::Err(e) => assert_eq!(e.code, 1317, "{e:?}"),
        other => panic!("unexpected reply {other:?}"),
    }
    assert_eq!(
        victim.query_rows("SELECT 'alive'"),
        vec![vec![Some("alive".to_owned())]]
    );

    let unknown = Client::native(sluice.port()).query("KILL QUERY 987654");
    assert!(
        unknown.stderr.contains("ERROR 1094 (HY000)")
            && unknown.stderr.contains("Unknown thread id: 987654"),
        "{}",
        unknown.stderr
    );
}

/// Loads `file` with LOAD DATA LOCAL INFILE through `port`, the client allowing it or not.
fn load_local(port: u16, file: &std::path::Path, client_allows: bool) -> CliOutput {
    Client::native(port)
        .database("infile")
        .arg(format!("--local-infile={}", u8::from(client_allows)))
        .query(&format!(
            "DROP TABLE IF EXISTS li; CREATE TABLE li (a INT, b VARCHAR(20)); \
             LOAD DATA LOCAL INFILE '{}' INTO TABLE li FIELDS TERMINATED BY ','; \
             SELECT COUNT(*), SUM(a), MAX(b) FROM li",
            file.display()
        ))
}

/// LOAD DATA LOCAL INFILE follows the server's `local_infile` by default: it loads when
/// the server allows it, and is refused as directly when the server does not; with
/// `local_infile = false` Sluice refuses it as a client that disabled it would be.
#[test]
fn load_data_local_infile_follows_the_server_and_configuration() {
    let server = shared_server();
    fresh_database(server, "infile");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.csv");
    let body: String = (1..=50_000).map(|i| format!("{i},name-{i:06}\n")).collect();
    std::fs::write(&file, body).unwrap();

    let allowed = Sluice::start(&Config::for_server(server));
    let out = load_local(allowed.port(), &file, true);
    assert!(out.success(), "{}", out.stderr);
    assert!(
        out.stdout.contains("50000\t1250025000\tname-050000"),
        "{}",
        out.stdout
    );

    let mut config = Config::for_server(server);
    config.protocol.insert("local_infile".into(), false.into());
    let refused = Sluice::start(&config);
    let through = load_local(refused.port(), &file, true);
    let direct = load_local(server.port(), &file, false);
    assert!(!through.success());
    assert_eq!(
        through.stderr, direct.stderr,
        "same refusal as a client without local infile"
    );

    // A server that refuses LOCAL INFILE refuses it through Sluice, with its own error.
    let off = dedicated_server(MariaDbOptions {
        extra_args: vec!["--local-infile=0".into()],
        ..Default::default()
    });
    fresh_database(&off, "infile");
    let sluice = Sluice::start(&Config::for_server(&off));
    let through = load_local(sluice.port(), &file, true);
    let direct = load_local(off.port(), &file, true);
    assert!(!direct.success(), "{}", direct.stdout);
    assert_eq!(through.stderr, direct.stderr, "the server's own refusal");
}

/// mysqlslap's generated mixed load (it creates, fills, queries and drops its own
/// schema) runs through Sluice without an error.
#[test]
fn mysqlslap_mixed_load_runs_through_sluice() {
    let sluice = Sluice::start(&Config::for_server(shared_server()));
    let out = Command::new("mysqlslap")
        .args([
            "--no-defaults",
            "-h127.0.0.1",
            &format!("-P{}", sluice.port()),
            &format!("-u{NATIVE_USER}"),
            &format!("-p{NATIVE_PASSWORD}"),
            "--create-schema=slap_through_sluice",
            "--auto-generate-sql",
            "--auto-generate-sql-load-type=mixed",
            "--concurrency=8",
            "--number-of-queries=800",
            "--iterations=2",
        ])
        .output()
        .expect("running mysqlslap");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mysqlslap failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Number of clients running queries: 8"),
        "{stdout}"
    );
}

/// Commands a client sends before the answers to the earlier ones (pipelined, in one
/// write), then a command larger than any kept read buffer, then small ones again: each
/// is answered in order, as the server answers them, with multiplexing on and off. An
/// idle session gives its read buffer back only when nothing is left in it.
#[test]
fn pipelined_and_large_commands_are_each_answered() {
    for multiplex in [true, false] {
        let config = Config::for_server(shared_server()).pool("multiplex", multiplex);
        let sluice = Sluice::start(&config);
        let mut conn = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
        let mut frames = Vec::new();
        for n in 1..=3 {
            let payload = [&[COM_QUERY][..], format!("SELECT {n}").as_bytes()].concat();
            frames.extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
            frames.push(0);
            frames.extend_from_slice(&payload);
        }
        std::io::Write::write_all(&mut conn.stream, &frames).unwrap();
        for n in 1..=3 {
            let rows = conn.read_next_reply().unwrap().text_rows();
            assert_eq!(rows, [[Some(n.to_string())]], "multiplex = {multiplex}");
        }
        let long = "x".repeat(300 * 1024);
        let rows = conn.query_rows(&format!("SELECT LENGTH('{long}')"));
        assert_eq!(
            rows,
            [[Some((300 * 1024).to_string())]],
            "multiplex = {multiplex}"
        );
        for n in 4..=5 {
            let rows = conn.query_rows(&format!("SELECT {n}"));
            assert_eq!(rows, [[Some(n.to_string())]], "multiplex = {multiplex}");
        }
    }
}
