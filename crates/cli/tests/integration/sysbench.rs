//! sysbench `oltp_read_write` through Sluice: 16 threads for 20 s must finish without a
//! single error that the server did not cause itself (a deadlock between two of the
//! transactions), with prepared statements (`--db-ps-mode=auto`) and without (`disable`).
//! This is a correctness test under concurrency, not a benchmark: `sluice bench` measures.
//!
//! The tables are prepared directly against MariaDB, then the run goes through Sluice:
//!
//! ```text
//! sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=PORT \
//!   --mysql-user=app_native --mysql-password=native_pw --mysql-db=DB \
//!   --tables=4 --table-size=10000 prepare                    # PORT = MariaDB
//! sysbench oltp_read_write ...same connection options... --tables=4 --table-size=10000 \
//!   --threads=16 --time=20 --db-ps-mode=auto|disable run      # PORT = Sluice
//! ```

use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_sandbox::wait_child;

use crate::support::{
    dedicated_server, fresh_database, Config, MariaDb, MariaDbOptions, Sluice, NATIVE_PASSWORD,
    NATIVE_USER,
};

const TABLES: u32 = 4;
const TABLE_SIZE: u32 = 10_000;
const THREADS: u32 = 16;
const SECONDS: u32 = 20;

/// `sysbench oltp_read_write ... <action>` against 127.0.0.1:`port`; (exit code, output).
pub(crate) fn sysbench(
    port: u16,
    database: &str,
    extra: &[String],
    action: &str,
) -> (Option<i32>, String) {
    let mut command = Command::new("sysbench");
    command
        .arg("oltp_read_write")
        .arg("--db-driver=mysql")
        .arg("--mysql-host=127.0.0.1")
        .arg(format!("--mysql-port={port}"))
        .arg(format!("--mysql-user={NATIVE_USER}"))
        .arg(format!("--mysql-password={NATIVE_PASSWORD}"))
        .arg(format!("--mysql-db={database}"))
        .arg(format!("--tables={TABLES}"))
        .arg(format!("--table-size={TABLE_SIZE}"))
        .args(extra)
        .arg(action)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap_or_else(|e| {
        panic!("sysbench could not be started ({e}); run `make test`, which installs it")
    });
    let mut child = child;
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let limit = Duration::from_secs(u64::from(SECONDS) + 60);
    let status = wait_child(&mut child, limit).unwrap();
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let output = format!("{}{}", out.join().unwrap(), err.join().unwrap());
    let status =
        status.unwrap_or_else(|| panic!("sysbench {action} ran over {limit:?}:\n{output}"));
    (status.code(), output)
}

/// The number on a statistics line such as `    ignored errors:   0   (0.00 per sec.)`.
pub(crate) fn statistic(output: &str, name: &str) -> Option<u64> {
    output.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix(name)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The server's count of transactions it rolled back to break a deadlock.
pub(crate) fn deadlocks(server: &MariaDb) -> u64 {
    let out = server
        .execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
        .expect("reading Innodb_deadlocks");
    out.lines()
        .nth(1)
        .and_then(|line| line.split('\t').nth(1))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected status output: {out}"))
}

fn oltp_read_write_through_sluice(ps_mode: &str) {
    // A server of its own, so that its deadlock counter belongs to this run alone.
    let server = dedicated_server(MariaDbOptions::default());
    let database = "sbtest";
    fresh_database(&server, database);
    let (code, output) = sysbench(server.port(), database, &[], "prepare");
    assert_eq!(code, Some(0), "sysbench prepare (direct) failed:\n{output}");

    let mut sluice = Sluice::start(&Config::for_server(&server));
    let run_args = [
        format!("--threads={THREADS}"),
        format!("--time={SECONDS}"),
        format!("--db-ps-mode={ps_mode}"),
        "--report-interval=0".to_owned(),
    ];
    let deadlocks_before = deadlocks(&server);
    let (code, output) = sysbench(sluice.port(), database, &run_args, "run");
    let deadlocks = deadlocks(&server) - deadlocks_before;
    sluice.assert_running();

    assert_eq!(
        code,
        Some(0),
        "sysbench run through sluice failed:\n{output}"
    );
    assert!(
        !output.contains("FATAL"),
        "sysbench reported a fatal error:\n{output}"
    );
    let transactions = statistic(&output, "transactions")
        .unwrap_or_else(|| panic!("no transactions line in:\n{output}"));
    assert!(transactions > 0, "no transaction completed:\n{output}");
    // sysbench counts, then retries, the errors it ignores by default (deadlock, lock
    // wait timeout). Concurrent read-write transactions can deadlock on any server,
    // more often on a loaded machine, so only errors the server itself did not cause
    // count against Sluice: every ignored error must be one of the server's deadlocks.
    let ignored = statistic(&output, "ignored errors")
        .unwrap_or_else(|| panic!("no 'ignored errors' line in:\n{output}"));
    assert!(
        ignored <= deadlocks,
        "{ignored} errors during the run, of which the server deadlocked {deadlocks}:\n{output}"
    );
    // Newer sysbench versions also print a plain "errors:" line.
    if let Some(errors) = statistic(&output, "errors") {
        assert!(errors <= deadlocks, "errors during the run:\n{output}");
    }
    assert_eq!(statistic(&output, "reconnects"), Some(0), "{output}");
}

#[test]
fn oltp_read_write_prepared_statements() {
    oltp_read_write_through_sluice("auto");
}

#[test]
fn oltp_read_write_text_protocol() {
    oltp_read_write_through_sluice("disable");
}

#[test]
fn statistic_lines_parse() {
    let sample = "    transactions:                        7785   (2593.10 per sec.)\n\
                  \x20   ignored errors:                      12     (0.00 per sec.)\n";
    assert_eq!(statistic(sample, "transactions"), Some(7785));
    assert_eq!(statistic(sample, "ignored errors"), Some(12));
    assert_eq!(statistic(sample, "errors"), None);
}
