//! The process: SIGTERM lets running statements finish, then exits 0 within the grace
//! period; SIGHUP reloads the configuration file without a restart; and no Sluice
//! outlives the test process that started it.

use std::thread;
use std::time::{Duration, Instant};

use crate::support::proxy::User;
use crate::support::wire::RawConn;
use crate::support::{
    running_statements, sandbox, shared_server, wait_process_gone, wait_until, Client, Config,
    Sluice, NATIVE_PASSWORD, NATIVE_USER,
};

#[test]
fn sigterm_lets_a_running_query_finish_then_exits_zero() {
    let server = shared_server();
    let config = Config::for_server(server).limit("shutdown_grace", "10s");
    let mut sluice = Sluice::start(&config);
    let sql = "SELECT SLEEP(2), 'drained by sigterm'";
    let client = Client::native(sluice.port())
        .args(["--batch", "--skip-column-names"])
        .stdin(sql);
    let running = thread::spawn(move || client.run());
    assert!(
        wait_until(Duration::from_secs(10), || running_statements(server, sql)
            == 1),
        "the query never reached the server"
    );

    let signalled = Instant::now();
    sluice.signal("TERM");
    let out = running.join().unwrap();
    assert!(
        out.success(),
        "the running query was cut off: {out:?}\nlog:\n{}",
        sluice.log()
    );
    assert_eq!(out.stdout, "0\tdrained by sigterm\n");
    let status = sluice
        .wait_exit(Duration::from_secs(15))
        .unwrap_or_else(|| {
            panic!(
                "sluice still running 15 s after SIGTERM; log:\n{}",
                sluice.log()
            )
        });
    assert!(
        status.success(),
        "sluice exited with {status}; log:\n{}",
        sluice.log()
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(12),
        "took {:?}",
        signalled.elapsed()
    );
}

#[test]
fn sighup_reloads_users_without_a_restart() {
    let server = shared_server();
    let mut config = Config::for_server(server);
    let mut sluice = Sluice::start(&config);
    let mut held = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);

    let late = Client::new(sluice.port(), "app_late", "late_pw");
    let before = late.query("SELECT 1");
    assert_eq!(before.code, Some(1), "an unknown user got in: {before:?}");

    config = config.user(User {
        backend_user: Some(NATIVE_USER.to_owned()),
        backend_password: Some(NATIVE_PASSWORD.to_owned()),
        ..User::native("app_late", "late_pw")
    });
    config.write(&sluice.config_path());
    let pid = sluice.pid();
    sluice.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(10), || late.query("SELECT 1").success()),
        "the new user cannot log in 10 s after SIGHUP; log:\n{}",
        sluice.log()
    );
    assert_eq!(late.query_ok("SELECT CURRENT_USER()"), "app_native@%\n");
    sluice.assert_running();
    assert_eq!(sluice.pid(), pid);
    // Sessions from before the reload carry on.
    assert_eq!(held.query_rows("SELECT 3"), [[Some("3".to_owned())]]);
}

/// Run by [`sluice_does_not_outlive_a_killed_test_process`] in a child process.
#[test]
#[ignore = "helper run by sluice_does_not_outlive_a_killed_test_process"]
fn orphan_sluice_helper() {
    if std::env::var_os("SLUICE_ORPHAN_HELPER").is_none() {
        return;
    }
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server));
    println!(
        "PIDS {} {} {}",
        sluice.pid(),
        server.pid(),
        sluice.dir().display()
    );
    thread::sleep(Duration::from_secs(120));
}

#[test]
fn sluice_does_not_outlive_a_killed_test_process() {
    let (mut helper, line) =
        crate::support::spawn_orphan_helper("lifecycle::orphan_sluice_helper", "PIDS ");
    let Some(line) = line else {
        panic!("the helper did not start sluice");
    };
    let fields: Vec<&str> = line.split(' ').collect();
    let pids: Vec<u32> = fields[..2].iter().map(|p| p.parse().unwrap()).collect();
    let dir = std::path::PathBuf::from(fields[2]);
    assert!(pids.iter().all(|&pid| sandbox::process_alive(pid)));
    helper.kill().unwrap();
    helper.wait().unwrap();
    for pid in pids {
        assert!(
            wait_process_gone(pid, Duration::from_secs(30)),
            "process {pid} survived its test process"
        );
    }
    assert!(
        wait_until(Duration::from_secs(10), || !dir.exists()),
        "{} survived its test process",
        dir.display()
    );
}
