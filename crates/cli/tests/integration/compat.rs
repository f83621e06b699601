//! The `mariadb` CLI running the compatibility batch (tests/sql/compat.sql) prints the
//! same thing, byte for byte, directly and through Sluice.

use std::time::Duration;

use crate::support::{fresh_database, repo_root, shared_server, Client, Config, Sluice};

const DATABASE: &str = "sluice_compat";

#[test]
fn compat_sql_batch_matches_direct() {
    let path = repo_root().join("tests/sql/compat.sql");
    let script = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the compatibility batch belongs there)",
            path.display()
        )
    });
    let server = shared_server();
    // ROW_COUNT() right after a write reads the writing connection only within
    // `pool.write_hold` (20 ms by default, OPERATIONS.md): on a loaded machine the CLI's
    // next statement can come later than that, which is not what this batch checks.
    let sluice = Sluice::start(&Config::for_server(server).pool("write_hold", "2s"));

    // Sequentially, each into a freshly created database of the same name, so that the
    // two runs see identical starting states.
    let run = |port: u16| {
        fresh_database(server, DATABASE);
        Client::native(port)
            .database(DATABASE)
            .args(["--batch", "--force", "--show-warnings"])
            .stdin(script.clone())
            .timeout(Duration::from_secs(120))
            .run()
    };
    let direct = run(server.port());
    let proxied = run(sluice.port());

    // Guard against a vacuous pass: the batch must have produced output and its
    // deliberate errors.
    assert!(
        direct.stdout.lines().count() > 20,
        "direct run printed little:\n{direct:?}"
    );
    assert!(
        direct.stderr.contains("ERROR"),
        "direct run reported no errors:\n{direct:?}"
    );
    proxied.assert_same_as(&direct);
    assert_eq!(direct.code, proxied.code);
}
