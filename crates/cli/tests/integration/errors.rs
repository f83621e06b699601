//! Errors and warnings from the server reach the client unchanged: code, SQL state and
//! message, as the `mariadb` CLI prints them, identical directly and through Sluice.

use crate::support::{fresh_database, shared_server, Client, Config, Sluice};

const DATABASE: &str = "sluice_errors";

#[test]
fn server_errors_pass_through_unchanged() {
    let server = shared_server();
    fresh_database(server, DATABASE);
    Client::native(server.port())
        .database(DATABASE)
        .query_ok("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1);");
    let mut sluice = Sluice::start(&Config::for_server(server));

    let cases = [
        (
            "INSERT INTO t VALUES (1)",
            "ERROR 1062 (23000) at line 1: Duplicate entry '1' for key 'PRIMARY'\n",
        ),
        (
            "SELEC 1",
            "ERROR 1064 (42000) at line 1: You have an error in your SQL syntax",
        ),
        (
            "SELECT * FROM missing_table",
            "ERROR 1146 (42S02) at line 1: Table 'sluice_errors.missing_table' doesn't exist\n",
        ),
    ];
    for (sql, expected) in cases {
        let direct = Client::native(server.port()).database(DATABASE).query(sql);
        let proxied = Client::native(sluice.port()).database(DATABASE).query(sql);
        assert!(
            direct.stderr.contains(expected),
            "direct control for {sql}: {}",
            direct.stderr
        );
        assert_eq!(direct.stderr, proxied.stderr, "{sql}");
        assert_eq!(direct.stdout, proxied.stdout, "{sql}");
        assert_eq!(proxied.code, Some(1), "{sql}");
    }

    // A session goes on after an error, and warnings come through as well.
    let batch = "SELECT 1 AS a;\nSELEC 2;\nINSERT INTO t VALUES (1);\nSELECT 1/0 AS b;\n\
                 SELECT CAST('12abc' AS SIGNED) AS c;\nSELECT COUNT(*) AS n FROM t;\n";
    let run = |port: u16| {
        Client::native(port)
            .database(DATABASE)
            .args(["--batch", "--force", "--show-warnings"])
            .stdin(batch)
            .run()
    };
    let direct = run(server.port());
    let proxied = run(sluice.port());
    assert!(
        direct.stdout.contains("Warning (Code 1365): Division by 0"),
        "{}",
        direct.stdout
    );
    proxied.assert_same_as(&direct);
    sluice.assert_running();
}
