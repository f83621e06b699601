//! Accounts that live on the server: with no `[[users]]`, clients log in through Sluice
//! with the accounts, passwords and host restrictions the server has, and changes made on
//! the server take effect without touching Sluice. And MariaDB's `ed25519` plugin, on
//! both sides: Sluice logging in to an ed25519 account, and the `mariadb` CLI's
//! `client_ed25519` logging in to Sluice.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::cli::finish;
use crate::support::proxy::User;
use crate::support::wire::RawConn;
use crate::support::{
    repo_root, sandbox, shared_server, wait_until, Client, Config, MariaDb, Sluice,
    NATIVE_PASSWORD, NATIVE_USER,
};

/// How long a change on the server may take to reach Sluice in these tests (they set
/// `accounts.refresh` to 1s; a reload also follows logins Sluice cannot match).
const PROPAGATION: Duration = Duration::from_secs(10);

fn create_user(server: &MariaDb, account: &str, password: &str) {
    server
        .execute(&format!(
            "DROP USER IF EXISTS {account}; \
             CREATE USER {account} IDENTIFIED BY '{password}'; \
             GRANT SELECT ON *.* TO {account};"
        ))
        .unwrap();
}

fn current_user(port: u16, user: &str, password: &str) -> String {
    Client::new(port, user, password).query_ok("SELECT CURRENT_USER()")
}

fn denied(user: &str, yes: bool) -> String {
    format!(
        "ERROR 1045 (28000): Access denied for user '{user}'@'127.0.0.1' (using password: {})\n",
        if yes { "YES" } else { "NO" }
    )
}

/// `user` logs in through Sluice (multiplexed or not) as the server's own account.
fn server_account_logs_in(user: &str, multiplex: bool) {
    let server = shared_server();
    let sluice = Sluice::start(
        &Config::for_server(server)
            .server_accounts()
            .pool("multiplex", multiplex)
            // One connection: a login that shares the pool waits for it rather than
            // opening another.
            .pool("max_connections", 1),
    );
    let account = format!("'{user}'@'%'");
    let current = format!("{user}@%");
    // Created after Sluice read the accounts: an unknown user makes it read them again.
    create_user(server, &account, "app_pw");
    assert_eq!(
        current_user(sluice.port(), user, "app_pw"),
        format!("{current}\n")
    );
    let direct = Client::new(server.port(), user, "wrong").query("SELECT 1");
    let proxied = Client::new(sluice.port(), user, "wrong").query("SELECT 1");
    assert_eq!(direct.stderr, denied(user, true));
    assert_eq!(proxied.stderr, direct.stderr);
    // Its rights are its own: SELECT only.
    let write = Client::new(sluice.port(), user, "app_pw").query("CREATE DATABASE acct_no");
    assert!(
        write.stderr.contains("ERROR 1044 (42000)"),
        "{}",
        write.stderr
    );

    // COM_CHANGE_USER from a server account to another one.
    let mut conn = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    conn.change_user(user, "app_pw", None)
        .unwrap()
        .expect("change_user to a server account");
    let rows = conn.query_rows("SELECT CURRENT_USER()");
    assert_eq!(rows, vec![vec![Some(current.clone())]]);
    let refused = conn.change_user(user, "wrong", None).unwrap();
    assert_eq!(refused.unwrap_err().code, 1045);
    drop(conn);

    // Each login carries its own proof, yet a user's logins share pooled connections.
    let thread = || {
        let mut c = RawConn::login_ok(sluice.addr(), user, "app_pw");
        c.query_rows("SELECT @@pseudo_thread_id")
    };
    assert_eq!(thread(), thread());
}

#[test]
fn a_server_account_logs_in_as_itself_multiplexed() {
    server_account_logs_in("acct_app", true);
}

#[test]
fn a_server_account_logs_in_as_itself_dedicated() {
    server_account_logs_in("acct_app_d", false);
}

/// PyMySQL logs in as `user`, prints `CURRENT_USER()`, or the error's code.
fn pymysql_current_user(port: u16, user: &str, password: &str) -> String {
    let python = repo_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing; run `make deps`",
        python.display()
    );
    let script = "import sys, pymysql\n\
        try:\n\
        \x20   c = pymysql.connect(host='127.0.0.1', port=int(sys.argv[1]), user=sys.argv[2], password=sys.argv[3])\n\
        \x20   cur = c.cursor(); cur.execute('SELECT CURRENT_USER()'); print(cur.fetchone()[0])\n\
        except pymysql.err.OperationalError as e:\n\
        \x20   print(e.args[0])\n";
    let child = Command::new(python)
        .args(["-c", script, &port.to_string(), user, password])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting python");
    let out = finish(child, Vec::new(), Duration::from_secs(60), "pymysql login");
    assert!(out.success(), "{}", out.stderr);
    out.stdout.trim().to_owned()
}

#[test]
fn pymysql_logs_in_with_a_server_account() {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server).server_accounts());
    create_user(server, "'acct_py'@'%'", "py_pw");
    assert_eq!(
        pymysql_current_user(sluice.port(), "acct_py", "py_pw"),
        "acct_py@%"
    );
    assert_eq!(pymysql_current_user(sluice.port(), "acct_py", "no"), "1045");
}

#[test]
fn drops_and_password_changes_on_the_server_take_effect() {
    let server = shared_server();
    let sluice = Sluice::start(
        &Config::for_server(server)
            .server_accounts()
            .accounts("refresh", "1s"),
    );
    create_user(server, "'acct_changes'@'%'", "first_pw");
    assert_eq!(
        current_user(sluice.port(), "acct_changes", "first_pw"),
        "acct_changes@%\n"
    );

    server
        .execute("ALTER USER 'acct_changes'@'%' IDENTIFIED BY 'second_pw'")
        .unwrap();
    // A proof that matches no longer makes Sluice read the accounts again at once.
    assert_eq!(
        current_user(sluice.port(), "acct_changes", "second_pw"),
        "acct_changes@%\n"
    );
    let old = Client::new(sluice.port(), "acct_changes", "first_pw").query("SELECT 1");
    assert_eq!(old.stderr, denied("acct_changes", true));

    server.execute("DROP USER 'acct_changes'@'%'").unwrap();
    assert!(
        wait_until(PROPAGATION, || {
            Client::new(sluice.port(), "acct_changes", "second_pw")
                .query("SELECT 1")
                .stderr
                == denied("acct_changes", true)
        }),
        "a dropped account still logs in through Sluice"
    );
}

#[test]
fn the_documented_grant_is_enough_and_reads_share_one_connection() {
    let server = shared_server();
    server
        .execute(
            "DROP USER IF EXISTS 'acct_reader'@'%'; \
             CREATE USER 'acct_reader'@'%' IDENTIFIED BY 'reader_pw'; \
             GRANT SELECT ON mysql.global_priv TO 'acct_reader'@'%';",
        )
        .unwrap();
    let config = Config::for_server(server)
        .server_accounts()
        .accounts("user", "acct_reader")
        .accounts("password", "reader_pw")
        .accounts("refresh", "200ms")
        .monitor("user", NATIVE_USER)
        .monitor("password", NATIVE_PASSWORD);
    let sluice = Sluice::start(&config);
    let reader_threads = || {
        server
            .execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'acct_reader'")
            .unwrap()
            .lines()
            .skip(1)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let before = reader_threads();
    assert_eq!(before.len(), 1, "{before:?}");
    create_user(server, "'acct_short'@'%'", "short_pw");
    assert_eq!(
        current_user(sluice.port(), "acct_short", "short_pw"),
        "acct_short@%\n"
    );
    server.execute("DROP USER 'acct_short'@'%'").unwrap();
    // Only a periodic read can notice the drop.
    assert!(wait_until(PROPAGATION, || {
        Client::new(sluice.port(), "acct_short", "short_pw")
            .query("SELECT 1")
            .stderr
            == denied("acct_short", true)
    }));
    assert_eq!(
        reader_threads(),
        before,
        "the reads did not reuse their connection"
    );
}

#[test]
fn host_restricted_accounts_keep_meaning_the_clients_address() {
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server).server_accounts());
    // Only from elsewhere: refused here, directly as through Sluice.
    create_user(server, "'acct_far'@'10.9.9.%'", "far_pw");
    let direct = Client::new(server.port(), "acct_far", "far_pw").query("SELECT 1");
    let proxied = Client::new(sluice.port(), "acct_far", "far_pw").query("SELECT 1");
    assert_eq!(direct.stderr, denied("acct_far", true));
    assert_eq!(proxied.stderr, direct.stderr);
    // The most specific host wins, as in the server: the 127.0.0.1 account's password.
    create_user(server, "'acct_near'@'%'", "any_pw");
    create_user(server, "'acct_near'@'127.0.0.1'", "near_pw");
    assert_eq!(
        current_user(sluice.port(), "acct_near", "near_pw"),
        "acct_near@127.0.0.1\n"
    );
    let other = Client::new(sluice.port(), "acct_near", "any_pw").query("SELECT 1");
    assert_eq!(other.stderr, denied("acct_near", true));
}

/// MariaDB's ed25519 plugin, installed once on the shared server.
pub(crate) fn with_ed25519(server: &MariaDb) {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let have = server
            .execute(
                "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'",
            )
            .unwrap();
        if have.lines().nth(1) != Some("1") {
            server.execute("INSTALL SONAME 'auth_ed25519'").unwrap();
        }
    });
}

pub(crate) fn create_ed25519_user(server: &MariaDb, name: &str, password: &str) {
    with_ed25519(server);
    server
        .execute(&format!(
            "DROP USER IF EXISTS '{name}'@'%'; \
             CREATE USER '{name}'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('{password}'); \
             GRANT SELECT ON *.* TO '{name}'@'%';"
        ))
        .unwrap();
}

#[test]
fn sluice_logs_in_to_an_ed25519_account() {
    let server = shared_server();
    create_ed25519_user(server, "acct_ed_backend", "ed_backend_pw");
    let user = User {
        backend_user: Some("acct_ed_backend".to_owned()),
        backend_password: Some("ed_backend_pw".to_owned()),
        ..User::native("acct_front", "front_pw")
    };
    let sluice = Sluice::start(&Config::for_server(server).user(user));
    assert_eq!(
        current_user(sluice.port(), "acct_front", "front_pw"),
        "acct_ed_backend@%\n"
    );
}

#[test]
fn the_mariadb_client_logs_in_with_client_ed25519() {
    let server = shared_server();
    let user = User {
        auth_plugin: Some("client_ed25519".to_owned()),
        ..User::native("acct_ed_front", "ed_front_pw")
    };
    let user = User {
        backend_user: Some(NATIVE_USER.to_owned()),
        backend_password: Some(NATIVE_PASSWORD.to_owned()),
        ..user
    };
    let sluice = Sluice::start(&Config::for_server(server).user(user));
    let out =
        Client::new(sluice.port(), "acct_ed_front", "ed_front_pw").query("SELECT CURRENT_USER()");
    assert!(out.success(), "{}", out.stderr);
    assert_eq!(out.stdout, "CURRENT_USER()\napp_native@%\n");
    let wrong = Client::new(sluice.port(), "acct_ed_front", "ed_front_px").query("SELECT 1");
    assert_eq!(wrong.stderr, denied("acct_ed_front", true));
    assert!(
        sluice.log().contains("login refused"),
        "the refusal is not logged"
    );
}

#[test]
fn an_ed25519_server_account_logs_in_over_tls_only() {
    let server = shared_server();
    create_ed25519_user(server, "acct_ed_server", "ed_server_pw");
    let certs = tempfile::tempdir().unwrap();
    let tls = sandbox::generate_tls(certs.path()).unwrap();
    let sluice = Sluice::start(
        &Config::for_server(server)
            .server_accounts()
            .listener_tls(&tls, false),
    );
    let client = |password: &str| {
        Client::new(sluice.port(), "acct_ed_server", password).args([
            "--ssl",
            "--ssl-verify-server-cert",
            &format!("--ssl-ca={}", tls.ca_cert.display()),
        ])
    };
    let out = client("ed_server_pw").query("SELECT CURRENT_USER()");
    assert!(out.success(), "{}", out.stderr);
    assert_eq!(out.stdout, "CURRENT_USER()\nacct_ed_server@%\n");
    let wrong = client("ed_server_px").query("SELECT 1");
    assert_eq!(wrong.stderr, denied("acct_ed_server", true));
    // Without TLS Sluice could check a signature but not log in to the server.
    let plain = Client::new(sluice.port(), "acct_ed_server", "ed_server_pw")
        .arg("--skip-ssl")
        .query("SELECT 1");
    assert_eq!(plain.stderr, denied("acct_ed_server", true));
}
