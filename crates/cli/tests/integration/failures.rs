//! Backend failures: a server that is not there, and a server that dies in the middle
//! of a result. The client gets an error in bounded time, and Sluice keeps running.

use std::time::Duration;

use sluice_sandbox::wait_child;

use crate::support::{
    dedicated_server, free_port, running_statements, wait_until, Client, Config, MariaDbOptions,
    Sluice,
};

#[test]
fn unreachable_backend_gives_an_error_naming_it() {
    let port = free_port(); // nothing listens there
    let backend = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut config = Config::new(backend);
    config = config.pool("connect_timeout", "2s");
    let mut sluice = Sluice::start(&config);
    for attempt in 1..=2 {
        let out = Client::native(sluice.port())
            .timeout(Duration::from_secs(30))
            .query("SELECT 1");
        assert_ne!(out.code, Some(0), "attempt {attempt}: {out:?}");
        assert!(
            out.stderr.starts_with("ERROR "),
            "attempt {attempt}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&backend.to_string()),
            "attempt {attempt}: the error does not name the server {backend}: {}",
            out.stderr
        );
        sluice.assert_running();
    }
}

#[test]
fn backend_killed_mid_result_fails_the_client_promptly() {
    let backend = dedicated_server(MariaDbOptions::default());
    let mut sluice = Sluice::start(&Config::for_server(&backend));
    // About 10 GB of rows, streamed (--quick) and thrown away: it cannot finish first.
    let sql = "SELECT REPEAT('x', 1000) FROM mysql.seq_1_to_10000000";
    let mut client = Client::native(sluice.port())
        .args(["--quick", "--batch", "--skip-column-names"])
        .arg(format!("--execute={sql}"))
        .spawn_discarding_output();
    assert!(
        wait_until(Duration::from_secs(15), || running_statements(
            &backend, sql
        ) == 1),
        "the streaming query never reached the server"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        client.try_wait().unwrap().is_none(),
        "the client finished before the kill"
    );

    backend.kill().expect("killing mariadbd");
    let status = wait_child(&mut client, Duration::from_secs(15)).unwrap();
    let Some(status) = status else {
        let _ = client.kill();
        panic!("the client still waits 15 s after its server died");
    };
    let stderr = std::io::read_to_string(client.stderr.take().unwrap()).unwrap();
    assert!(
        !status.success(),
        "the client exited 0 after losing its server"
    );
    assert!(stderr.contains("ERROR "), "{stderr}");
    sluice.assert_running();

    // With the server gone, a new client gets an error, not a hang, and Sluice lives on.
    let out = Client::native(sluice.port())
        .timeout(Duration::from_secs(30))
        .query("SELECT 1");
    assert_ne!(out.code, Some(0), "{out:?}");
    sluice.assert_running();
}
