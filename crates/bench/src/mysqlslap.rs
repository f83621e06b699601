//! mysqlslap as the load generator of the insert benchmark: the command line that
//! reproduces the published multi-master insert run (clients inserting into one InnoDB
//! table, 1 to 1000 inserts per transaction, reported as rows/s), running it with a
//! deadline and its output kept on disk, the parser for its `Benchmark` summary, and the
//! checks that tell a complete run from one that only looks complete.
//!
//! How mysqlslap 1.0 (the MariaDB 10.11 client) behaves, established with real runs
//! against MariaDB 10.11: `SHOW GLOBAL STATUS` before and after, rows counted with
//! `--no-drop`, and the general query log.
//!
//! - `--number-of-queries=T --concurrency=C` gives every client `T / C` queries, rounded
//!   down: 25 over 3 clients ran 3 x 8 = 24 inserts. The summary's "Average number of
//!   queries per client" is that limit, not a count of what succeeded. Below one per
//!   client the limit is 0, which mysqlslap takes as "the query list once": 10 over 16
//!   clients ran 16 inserts and reported 0 per client.
//! - `--commit=N` really makes transactions of N inserts: each client sends
//!   `SET AUTOCOMMIT=0`, then `COMMIT` after every N inserts and once more before it
//!   disconnects. 16 clients x 1000 inserts: Com_insert +16000, Com_commit +16016, +1616
//!   and +32 for N = 1, 10 and 1000, i.e. 16 x (1000/N + 1); Handler_commit rose by the
//!   inserts plus one per non-empty transaction (16000, 1600, 16), so the closing COMMIT
//!   is empty when N divides the per-client count; InnoDB's fsyncs fell from about 2450
//!   to 390 to 100. When N does not divide it the last transaction is shorter
//!   (1,000,000 inserts over 16 clients at N = 1000: 62 transactions of 1000 and one of
//!   500 per client).
//! - A failed INSERT makes mysqlslap print `Cannot run query ...` and exit with status 0,
//!   without a summary. A client that cannot connect (10 tries, 100 ms apart) just stops:
//!   the others finish, and mysqlslap prints a full summary and exits 0. With 3
//!   connections allowed, 11 of 16 clients failed, 20,000 of 64,000 inserts ran, and the
//!   summary still said 16 clients x 4000. So a run counts only with status 0, a summary
//!   and no error line.
//! - Without `--no-drop` it drops the schema before creating it as well as at the end
//!   (`DROP SCHEMA IF EXISTS`, Com_drop_db +2 per run): a schema left behind by a killed
//!   run never gets in the way, and anything else kept in that schema is lost.
//! - Without `--create` and with `--no-drop` it sends no DDL at all (the general log
//!   shows each client's connect to the schema, its inserts and commits, and its quit),
//!   so an existing table can be locked or watched from before the first insert.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::sysbench::Endpoint;
use super::tool::{self, run_logged, with_raised_nofile, Finished};

/// The table of the published run. Its columns were `f`, `d`, `t`, `c` and `v`; only the
/// names differ, and the INSERT lists no columns, so the statements stay equivalent.
pub const CREATE_TABLE: &str = "CREATE TABLE t1 (id INT UNSIGNED NOT NULL AUTO_INCREMENT \
     PRIMARY KEY, random_value FLOAT, created_date DATE, created_time TIME, \
     tag CHAR(8), note VARCHAR(1024)) ENGINE=InnoDB";

/// The statement every client repeats, as published.
pub const INSERT: &str = "INSERT INTO t1 VALUES (DEFAULT, RAND(), CURRENT_DATE, \
     CURRENT_TIME, 'pokemon', 'drizzl')";

/// One insert run. The published one: 16 clients, 1,000,000 inserts, each of
/// 1, 10, 100 and 1000 inserts per transaction in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsertSpec {
    pub clients: u32,
    /// Inserts over all clients; mysqlslap runs [`InsertSpec::inserts`] of them.
    pub total_inserts: u64,
    /// Inserts per transaction (`--commit`). 0 leaves autocommit on: no COMMIT at all,
    /// one implicit transaction per insert.
    pub per_trx: u32,
}

impl InsertSpec {
    /// The clients mysqlslap starts: at least one, since `--concurrency=0` makes it
    /// loop forever over 1, 2, 3... clients.
    pub fn clients(&self) -> u32 {
        self.clients.max(1)
    }

    /// What each client inserts: the total divided evenly, rounded down as mysqlslap
    /// does, and at least one (a limit of 0 would run one insert but report none).
    pub fn inserts_per_client(&self) -> u64 {
        (self.total_inserts / u64::from(self.clients())).max(1)
    }

    /// The inserts the run really makes, and the `--number-of-queries` it gets, so the
    /// command line states the exact figure.
    pub fn inserts(&self) -> u64 {
        self.inserts_per_client()
            .saturating_mul(u64::from(self.clients()))
    }
}

/// One `mysqlslap ...` invocation.
#[derive(Debug, Clone)]
pub struct SlapCommand {
    program: PathBuf,
    args: Vec<String>,
    /// Print `--password=****` instead of the password.
    hide_password: bool,
    spec: InsertSpec,
    /// Why the command must not run at all.
    refusal: Option<String>,
}

impl SlapCommand {
    /// The insert run of `spec` in `schema`, which mysqlslap creates, fills and drops
    /// (before the run as well as after): never the benchmark's database, so
    /// `endpoint.database` is refused, and otherwise unused.
    pub fn insert(program: &Path, endpoint: &Endpoint, spec: &InsertSpec, schema: &str) -> Self {
        Self::build(program, endpoint, spec, schema, true)
    }

    /// The insert run of `spec` into the table `t1` ([`CREATE_TABLE`]) the caller has
    /// already created in `schema`, left in place afterwards (`--no-drop`): mysqlslap
    /// then sends no DDL at all, so the caller can hold locks on the table from before the
    /// first insert.
    pub fn insert_into_existing(
        program: &Path,
        endpoint: &Endpoint,
        spec: &InsertSpec,
        schema: &str,
    ) -> Self {
        Self::build(program, endpoint, spec, schema, false)
    }

    fn build(
        program: &Path,
        endpoint: &Endpoint,
        spec: &InsertSpec,
        schema: &str,
        create: bool,
    ) -> Self {
        // A host given as a path is a Unix socket; otherwise the run must go over TCP,
        // never the socket `localhost` can otherwise mean (a --port already implies it).
        let (host, port, protocol) = match endpoint.socket() {
            Some(path) => (
                "--host=localhost".to_string(),
                format!("--socket={path}"),
                "--protocol=socket".to_string(),
            ),
            None => (
                format!("--host={}", endpoint.host),
                format!("--port={}", endpoint.port),
                "--protocol=tcp".to_string(),
            ),
        };
        let mut args = vec![
            // Only honoured as the first argument. No option file's [client] section
            // (socket, TLS, another password) may change the run.
            "--no-defaults".to_string(),
            host,
            port,
            format!("--user={}", endpoint.user),
            // Always with `=`, even empty: a bare --password asks on the terminal.
            format!("--password={}", endpoint.password),
            protocol,
            // This client uses TLS whenever the server offers it, sysbench by default not:
            // keep both benchmarks, and both scenarios, on the plain protocol, with no
            // TLS handshakes inside the timed phase (clients connect after the clock
            // starts).
            "--skip-ssl".to_string(),
            // Every client connects to it; with --create, mysqlslap creates it (CREATE
            // SCHEMA) and drops it at the end.
            format!("--create-schema={schema}"),
        ];
        if create {
            // Split into statements at newlines (the default delimiter), as --query is,
            // so each stays on one line; a string naming an existing file would be read
            // as one.
            args.push(format!("--create={CREATE_TABLE}"));
        }
        args.extend([
            format!("--query={INSERT}"),
            format!("--concurrency={}", spec.clients()),
            // Divided among the clients, not per client (whatever --help says).
            format!("--number-of-queries={}", spec.inserts()),
            format!("--commit={}", spec.per_trx),
            // One timed run, so the summary's average is that run's time. Repeats are the
            // caller's, alternating scenarios as the sysbench steps do; a second iteration
            // would only drop and re-create the table in between.
            "--iterations=1".to_string(),
        ]);
        if !create {
            // Without --create, --no-drop is all it takes for mysqlslap to leave the
            // schema alone: it connects every client to it and only inserts.
            args.push("--no-drop".to_string());
        }
        let refusal = if !plain_schema_name(schema) {
            Some(format!(
                "`{schema}` cannot be mysqlslap's schema: it puts the name between backticks \
                 without escaping it; use 1 to 64 letters, digits and underscores"
            ))
        } else if schema.eq_ignore_ascii_case(&endpoint.database) {
            Some(format!(
                "refusing to give mysqlslap `{schema}`, the benchmark's database: mysqlslap \
                 drops its schema before and after the run"
            ))
        } else {
            None
        };
        SlapCommand {
            program: program.to_path_buf(),
            args,
            hide_password: !endpoint.show_password && !endpoint.password.is_empty(),
            spec: *spec,
            refusal,
        }
    }

    /// The command line as a shell would take it, password hidden unless it is the
    /// embedded run's throwaway one.
    pub fn display(&self) -> String {
        let secret = self.hide_password.then_some("--password=");
        tool::command_line(&self.program, &self.args, secret)
    }

    /// Runs the command with stdout and stderr going to `log` (the summary comes on
    /// stdout, errors on stderr), killing it at `deadline`. mysqlslap prints nothing
    /// until it ends, so there is no progress to report. A killed run leaves its schema
    /// behind, for the next run to drop.
    pub fn execute(
        &self,
        log: &Path,
        deadline: Duration,
        on_tick: impl FnMut(Duration),
    ) -> anyhow::Result<Finished> {
        if let Some(why) = &self.refusal {
            bail!("{why}");
        }
        // Through bash, which raises the open-files limit and then becomes mysqlslap, so
        // a missing mysqlslap shows as exit status 127 rather than a spawn error.
        let command = with_raised_nofile(&self.program, &self.args);
        run_logged(command, &self.program, log, deadline, on_tick)
    }

    /// The statistics of a run that did everything asked of it; otherwise an error from
    /// [`SlapCommand::failure`]. Exit status 0 and a summary are not enough (see the
    /// module notes): no error line may appear, and the summary must report the clients
    /// and inserts per client of the command line.
    pub fn check(&self, finished: &Finished, what: &str, log: &Path) -> anyhow::Result<SlapStats> {
        let exited_ok = finished.status.is_some_and(|s| s.success());
        let clean = error_lines(&finished.output, &self.program).is_empty();
        match parse(&finished.output) {
            Ok(stats) if exited_ok && clean => {
                if stats.clients != self.spec.clients()
                    || stats.queries_per_client != self.spec.inserts_per_client()
                {
                    bail!(
                        "{what}: mysqlslap reported {} clients x {} inserts, but was asked \
                         for {} x {}\n  its output is in {}",
                        stats.clients,
                        stats.queries_per_client,
                        self.spec.clients(),
                        self.spec.inserts_per_client(),
                        log.display()
                    );
                }
                Ok(stats)
            }
            _ => bail!("{}", self.failure(finished, what, log)),
        }
    }

    /// A message for a run that did not succeed: `what`, how mysqlslap ended, its error
    /// lines and the tail of its output.
    pub fn failure(&self, finished: &Finished, what: &str, log: &Path) -> String {
        let errors = error_lines(&finished.output, &self.program);
        let how = match finished.status.and_then(|s| s.code()) {
            Some(0) if !errors.is_empty() => "exited with status 0 but reported errors".into(),
            Some(0) => match parse(&finished.output) {
                Err(e) => format!("exited with status 0 but {e:#}"),
                Ok(_) => "exited with status 0".into(),
            },
            // bash's answer when the program it was to become does not exist.
            Some(127) => "could not be run (exit status 127): is it installed? It comes with \
                          the MariaDB client programs (Debian package `mariadb-client`)"
                .into(),
            _ => finished.how(),
        };
        finished.failure_message(what, "mysqlslap", &how, &errors, log)
    }
}

/// What mysqlslap puts between backticks without escaping: keep to names that need none.
fn plain_schema_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// mysqlslap's `Benchmark` summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlapStats {
    /// Wall time of the timed phase, averaged over the iterations (one, here).
    pub avg_secs: f64,
    pub min_secs: f64,
    pub max_secs: f64,
    pub clients: u32,
    /// The per-client limit mysqlslap set, not a count of queries that succeeded.
    pub queries_per_client: u64,
    /// Printed only when mysqlslap ran with --engine.
    pub engine: Option<String>,
}

impl SlapStats {
    /// The inserts the summary stands for.
    pub fn inserts(&self) -> u64 {
        u64::from(self.clients).saturating_mul(self.queries_per_client)
    }

    /// Inserted rows per second: inserts over the average time. mysqlslap times an
    /// iteration from waking its client threads until the last has finished: each
    /// client's connect, `SET AUTOCOMMIT=0`, inserts and COMMITs, final COMMIT and
    /// disconnect, but not the CREATE TABLE or the schema drop. With one iteration the
    /// average is that one wall time, so this is the rate of the whole run, slowest
    /// client included. The clock has millisecond resolution; `None` when it read 0.
    pub fn rows_per_sec(&self) -> Option<f64> {
        (self.avg_secs > 0.0).then(|| self.inserts() as f64 / self.avg_secs)
    }
}

const AVG: &str = "Average number of seconds to run all queries";
const MIN: &str = "Minimum number of seconds to run all queries";
const MAX: &str = "Maximum number of seconds to run all queries";
const CLIENTS: &str = "Number of clients running queries";
const PER_CLIENT: &str = "Average number of queries per client";

/// Parses the `Benchmark` summary mysqlslap prints at the end (the last one, should
/// there be several: one per --concurrency value). Fails, naming what is missing, when
/// there is no complete summary. Only the summary is read: a complete one does not make
/// a successful run (see [`SlapCommand::check`]).
pub fn parse(output: &str) -> anyhow::Result<SlapStats> {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    let start = lines
        .iter()
        .rposition(|l| *l == "Benchmark")
        .context("mysqlslap's output has no `Benchmark` summary")?;
    let (mut avg, mut min, mut max) = (None, None, None);
    let (mut clients, mut per_client, mut engine) = (None, None, None);
    for line in &lines[start + 1..] {
        if let Some(name) = line.strip_prefix("Running for engine ") {
            engine = Some(name.trim().to_string());
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let context = || format!("the `{key}` line of mysqlslap's summary");
        match key {
            AVG => avg = Some(seconds(value).with_context(context)?),
            MIN => min = Some(seconds(value).with_context(context)?),
            MAX => max = Some(seconds(value).with_context(context)?),
            CLIENTS => clients = Some(integer(value).with_context(context)?),
            PER_CLIENT => per_client = Some(integer(value).with_context(context)?),
            _ => {}
        }
    }
    let missing = |key: &str| anyhow::anyhow!("mysqlslap's Benchmark summary has no `{key}` line");
    Ok(SlapStats {
        avg_secs: avg.ok_or_else(|| missing(AVG))?,
        min_secs: min.ok_or_else(|| missing(MIN))?,
        max_secs: max.ok_or_else(|| missing(MAX))?,
        clients: clients.ok_or_else(|| missing(CLIENTS))?,
        queries_per_client: per_client.ok_or_else(|| missing(PER_CLIENT))?,
        engine,
    })
}

/// `0.774 seconds` → 0.774.
fn seconds(s: &str) -> anyhow::Result<f64> {
    let s = s.trim();
    let number = s.strip_suffix("seconds").unwrap_or(s).trim();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => bail!("bad number of seconds {s:?}"),
    }
}

fn integer<T: std::str::FromStr>(s: &str) -> anyhow::Result<T> {
    let s = s.trim();
    s.parse().map_err(|_| anyhow::anyhow!("bad count {s:?}"))
}

/// mysqlslap's error lines, prefix removed, each once and in order, with a count when it
/// came more than once (every client that failed to connect prints its own).
///
/// mysqlslap starts its messages with the name it was run as, `program` here: through
/// bash's `exec`, exactly the path given. A name ending in `slap` (`mysqlslap`,
/// `mariadb-slap`) counts too. The deprecated-name notice of newer clients is no error.
pub fn error_lines(output: &str, program: &Path) -> Vec<String> {
    let program = program.to_string_lossy();
    let mut seen: Vec<(String, usize)> = Vec::new();
    for line in output.lines() {
        let Some((head, message)) = line.trim().split_once(": ") else {
            continue;
        };
        let name = head.rsplit('/').next().unwrap_or(head);
        let slap_name = name.ends_with("slap") && !head.contains(char::is_whitespace);
        if head != program && !slap_name {
            continue;
        }
        let message = message.trim();
        if message.starts_with("Deprecated program name") {
            continue;
        }
        match seen.iter_mut().find(|(m, _)| m == message) {
            Some((_, n)) => *n += 1,
            None => seen.push((message.to_string(), 1)),
        }
    }
    seen.into_iter()
        .map(|(m, n)| if n > 1 { format!("{m} ({n} times)") } else { m })
        .collect()
}

/// `mysqlslap --version`, or an error that says how to get mysqlslap.
pub fn version(program: &Path) -> anyhow::Result<String> {
    tool::version(
        program,
        &["--no-defaults", "--version"],
        "slap",
        &format!(
            "mysqlslap not found (`{}`): install the MariaDB client programs (the Debian and \
             Ubuntu package `mariadb-client`, which installs it as mysqlslap and \
             mariadb-slap) or pass --mysqlslap PATH",
            program.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    // Captured from mysqlslap 1.0 (MariaDB 10.11 client) against MariaDB 10.11 with the
    // command line of `SlapCommand::insert`, stdout and stderr in one file, unedited.
    // 16 clients, 16,000 inserts, 10 per transaction.
    const COMMIT10: &str = include_str!("testdata/slap_commit10.txt");
    // The same with one insert per transaction.
    const COMMIT1: &str = include_str!("testdata/slap_commit1.txt");
    // 16 clients, 16,000 inserts, 10 per transaction, through `sluice serve`.
    const THROUGH_SLUICE: &str = include_str!("testdata/slap_through_sluice.txt");
    // 4 clients, 4000 inserts, --iterations=3 --engine=InnoDB: distinct avg/min/max and
    // the engine line.
    const ITERATIONS3: &str = include_str!("testdata/slap_iterations3_engine.txt");
    // Nothing listening on the port (exit status 1).
    const REFUSED: &str = include_str!("testdata/slap_connection_refused.txt");
    // A wrong password (exit status 1).
    const ACCESS_DENIED: &str = include_str!("testdata/slap_access_denied.txt");
    // A user without the INSERT privilege: exit status 0, no summary.
    const INSERT_DENIED: &str = include_str!("testdata/slap_insert_denied.txt");
    // A user limited to 3 connections, 16 clients x 4000 inserts at 100 per transaction:
    // 11 clients never connected, 20,000 rows went in, exit status 0, full summary.
    const CONNECTION_LIMIT: &str = include_str!("testdata/slap_connection_limit.txt");

    fn endpoint() -> Endpoint {
        Endpoint {
            host: "127.0.0.1".into(),
            port: 3306,
            user: "slap".into(),
            password: "s3cret pw".into(),
            database: "sbtest".into(),
            show_password: false,
        }
    }

    fn spec(clients: u32, total_inserts: u64, per_trx: u32) -> InsertSpec {
        InsertSpec {
            clients,
            total_inserts,
            per_trx,
        }
    }

    fn command(spec: &InsertSpec) -> SlapCommand {
        SlapCommand::insert(Path::new("mysqlslap"), &endpoint(), spec, "sluice_slap")
    }

    fn finished(code: i32, output: &str) -> Finished {
        Finished {
            status: Some(ExitStatus::from_raw(code << 8)),
            elapsed: Duration::from_millis(1500),
            output: output.to_string(),
        }
    }

    #[test]
    fn parses_summary() {
        let stats = parse(COMMIT10).unwrap();
        assert_eq!(
            stats,
            SlapStats {
                avg_secs: 1.377,
                min_secs: 1.377,
                max_secs: 1.377,
                clients: 16,
                queries_per_client: 1000,
                engine: None,
            }
        );
        assert_eq!(stats.inserts(), 16_000);
        let rate = stats.rows_per_sec().unwrap();
        assert!((rate - 16_000.0 / 1.377).abs() < 1e-6, "{rate}");

        let one = parse(COMMIT1).unwrap();
        assert_eq!(one.avg_secs, 2.285);
        assert_eq!(one.inserts(), 16_000);
        let proxied = parse(THROUGH_SLUICE).unwrap();
        assert_eq!(proxied.avg_secs, 1.493);
        assert_eq!(proxied.inserts(), 16_000);
    }

    #[test]
    fn parses_several_iterations_and_engine() {
        let stats = parse(ITERATIONS3).unwrap();
        assert_eq!(stats.avg_secs, 0.257);
        assert_eq!(stats.min_secs, 0.245);
        assert_eq!(stats.max_secs, 0.279);
        assert_eq!(stats.clients, 4);
        assert_eq!(stats.queries_per_client, 1000);
        assert_eq!(stats.engine.as_deref(), Some("InnoDB"));
    }

    #[test]
    fn output_without_summary_is_an_error() {
        for (name, text) in [
            ("refused", REFUSED),
            ("access denied", ACCESS_DENIED),
            ("insert denied", INSERT_DENIED),
            ("empty", ""),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains("`Benchmark` summary"), "{name}: {err}");
        }
        // mysqlslap killed while printing.
        let cut = &COMMIT10[..COMMIT10.find("Number of clients").unwrap()];
        let err = parse(cut).unwrap_err().to_string();
        assert!(err.contains("`Number of clients running queries`"), "{err}");
        let garbled = COMMIT10.replace("1.377 seconds", "fast");
        let err = format!("{:#}", parse(&garbled).unwrap_err());
        assert!(err.contains("bad number of seconds"), "{err}");
        for bad in ["NaN seconds", "-1.000 seconds", "inf seconds"] {
            let text = COMMIT10.replace("1.377 seconds", bad);
            assert!(parse(&text).is_err(), "{bad}");
        }
        // A zero time parses, but gives no rate.
        let instant = parse(&COMMIT10.replace("1.377", "0.000")).unwrap();
        assert_eq!(instant.rows_per_sec(), None);
    }

    #[test]
    fn error_lines_name_the_cause() {
        let program = Path::new("mysqlslap");
        assert_eq!(
            error_lines(REFUSED, program),
            vec!["Error when connecting to server: Can't connect to server on '127.0.0.1' (115)"]
        );
        assert_eq!(
            error_lines(ACCESS_DENIED, program),
            vec![
                "Error when connecting to server: Access denied for user 'slap'@'127.0.0.1' \
                 (using password: YES)"
            ]
        );
        let denied = error_lines(INSERT_DENIED, program);
        assert_eq!(denied.len(), 1, "{denied:?}");
        assert!(denied[0].starts_with("Cannot run query INSERT INTO t1"));
        assert!(denied[0].ends_with("for table `sluice_slap`.`t1` (2 times)"));
        assert_eq!(
            error_lines(CONNECTION_LIMIT, program),
            vec![
                "Error when connecting to server: 1226 User 'slap_lim' has exceeded the \
                 'max_user_connections' resource (current value: 3) (11 times)"
            ]
        );
        for clean in [COMMIT10, COMMIT1, THROUGH_SLUICE, ITERATIONS3] {
            assert!(error_lines(clean, program).is_empty());
        }
        // mysqlslap names itself as it was started: a path, or another name.
        let line = "bin/mariadb-slap: Error when connecting to server: x\n";
        assert_eq!(
            error_lines(line, program),
            vec!["Error when connecting to server: x"]
        );
        let line = "./load-gen: Cannot run query X ERROR : y\n";
        assert!(error_lines(line, program).is_empty());
        assert_eq!(error_lines(line, Path::new("./load-gen")).len(), 1);
        // Written for the test: the notice newer clients print under their old name.
        let notice = "mysqlslap: Deprecated program name. It will be removed in a future \
                      release, use 'mariadb-slap' instead\n";
        assert!(error_lines(&format!("{notice}{COMMIT10}"), program).is_empty());
    }

    #[test]
    fn check_accepts_only_complete_runs() {
        let log = Path::new("slap.log");
        let cmd = command(&spec(16, 16_000, 10));
        let stats = cmd.check(&finished(0, COMMIT10), "insert", log).unwrap();
        assert_eq!(stats.inserts(), 16_000);
        assert!(cmd.check(&finished(0, THROUGH_SLUICE), "x", log).is_ok());

        // Exit status 0 and a summary, yet 11 clients never connected.
        let cmd = command(&spec(16, 64_000, 100));
        let err = cmd
            .check(&finished(0, CONNECTION_LIMIT), "insert, 100 per trx", log)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "insert, 100 per trx: mysqlslap exited with status 0 but reported errors: \
                 Error when connecting to server: 1226"
            ),
            "{err}"
        );
        assert!(err.contains("(11 times)"), "{err}");
        assert!(err.contains("slap.log"), "{err}");

        let err = cmd
            .check(&finished(0, INSERT_DENIED), "insert", log)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("status 0 but reported errors: Cannot run query"),
            "{err}"
        );

        let err = cmd
            .check(&finished(1, REFUSED), "insert", log)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "insert: mysqlslap exited with status 1: Error when connecting to server: \
                 Can't connect"
            ),
            "{err}"
        );
        let err = cmd
            .check(&finished(1, ACCESS_DENIED), "insert", log)
            .unwrap_err()
            .to_string();
        assert!(err.contains("Access denied for user 'slap'"), "{err}");

        // A summary that does not match the command line.
        let err = cmd
            .check(&finished(0, COMMIT10), "insert", log)
            .unwrap_err()
            .to_string();
        assert!(err.contains("16 clients x 1000 inserts"), "{err}");
        assert!(err.contains("asked for 16 x 4000"), "{err}");

        // Silent and summary-less, killed at the deadline, killed by a signal.
        let err = cmd.check(&finished(0, ""), "insert", log).unwrap_err();
        assert!(err
            .to_string()
            .contains("status 0 but mysqlslap's output has no"));
        let killed = Finished {
            status: None,
            elapsed: Duration::from_secs(30),
            output: String::new(),
        };
        let err = cmd.check(&killed, "insert", log).unwrap_err().to_string();
        assert!(err.contains("did not finish within 30"), "{err}");
        let signalled = Finished {
            status: Some(ExitStatus::from_raw(9)),
            elapsed: Duration::from_secs(1),
            output: COMMIT10.to_string(),
        };
        let err = cmd
            .check(&signalled, "insert", log)
            .unwrap_err()
            .to_string();
        assert!(err.contains("killed by a signal"), "{err}");
    }

    #[test]
    fn command_line() {
        let cmd = command(&spec(16, 1_000_000, 1000));
        assert_eq!(
            cmd.display(),
            "mysqlslap --no-defaults --host=127.0.0.1 --port=3306 --user=slap \
             --password=**** --protocol=tcp --skip-ssl --create-schema=sluice_slap \
             '--create=CREATE TABLE t1 (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
             random_value FLOAT, created_date DATE, created_time TIME, tag CHAR(8), \
             note VARCHAR(1024)) ENGINE=InnoDB' \
             '--query=INSERT INTO t1 VALUES (DEFAULT, RAND(), CURRENT_DATE, CURRENT_TIME, \
             '\\''pokemon'\\'', '\\''drizzl'\\'')' \
             --concurrency=16 --number-of-queries=1000000 --commit=1000 --iterations=1"
        );
        assert!(cmd.args.contains(&"--password=s3cret pw".to_string()));
        let socket = Endpoint {
            host: "/run/sluice.sock".into(),
            ..endpoint()
        };
        let over_socket = SlapCommand::insert(
            Path::new("mysqlslap"),
            &socket,
            &spec(16, 1_000, 10),
            "sluice_slap",
        );
        assert!(
            over_socket.display().starts_with(
                "mysqlslap --no-defaults --host=localhost --socket=/run/sluice.sock \
                 --user=slap --password=**** --protocol=socket"
            ),
            "{}",
            over_socket.display()
        );
        // mysqlslap cuts statements at newlines.
        assert!(!CREATE_TABLE.contains('\n') && !INSERT.contains('\n'));

        let shown = Endpoint {
            show_password: true,
            ..endpoint()
        };
        let cmd = SlapCommand::insert(
            Path::new("mysqlslap"),
            &shown,
            &spec(16, 16_000, 10),
            "sluice_slap",
        );
        assert!(cmd.display().contains("'--password=s3cret pw'"));
        let empty = Endpoint {
            password: String::new(),
            ..endpoint()
        };
        let cmd = SlapCommand::insert(Path::new("mysqlslap"), &empty, &spec(1, 1, 1), "s");
        assert!(cmd.display().contains(" --password= "), "{}", cmd.display());
    }

    #[test]
    fn inserts_are_divided_as_mysqlslap_does() {
        let s = spec(16, 1_000_000, 1000);
        assert_eq!((s.inserts_per_client(), s.inserts()), (62_500, 1_000_000));
        let s = spec(3, 25, 4);
        assert_eq!((s.inserts_per_client(), s.inserts()), (8, 24));
        // Never a limit of 0 (one insert each, reported as none) nor 0 clients (an
        // endless loop in mysqlslap).
        let s = spec(16, 10, 1);
        assert_eq!((s.inserts_per_client(), s.inserts()), (1, 16));
        let s = spec(0, 0, 0);
        assert_eq!((s.clients(), s.inserts()), (1, 1));
        let cmd = command(&s);
        assert!(cmd
            .display()
            .ends_with("--concurrency=1 --number-of-queries=1 --commit=0 --iterations=1"));
        let huge = spec(u32::MAX, u64::MAX, u32::MAX);
        assert_eq!(huge.inserts_per_client(), u64::MAX / u64::from(u32::MAX));
        assert_eq!(
            huge.inserts(),
            huge.inserts_per_client() * u64::from(u32::MAX)
        );
    }

    #[test]
    fn refuses_schemas_mysqlslap_would_mangle_or_drop() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("slap.log");
        let s = spec(16, 16_000, 10);
        for schema in ["", "a`b", "x y", &"s".repeat(65)] {
            let cmd = SlapCommand::insert(Path::new("mysqlslap"), &endpoint(), &s, schema);
            let err = cmd
                .execute(&log, Duration::from_secs(5), |_| {})
                .unwrap_err();
            assert!(
                err.to_string().contains("cannot be mysqlslap's schema"),
                "{err}"
            );
        }
        let cmd = SlapCommand::insert(Path::new("mysqlslap"), &endpoint(), &s, "sbtest");
        let err = cmd
            .execute(&log, Duration::from_secs(5), |_| {})
            .unwrap_err();
        assert!(err.to_string().contains("benchmark's database"), "{err}");
        assert!(!log.exists());
    }

    #[test]
    fn execute_reports_a_missing_program_and_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("slap.log");
        let cmd = SlapCommand::insert(
            Path::new("no-such-mysqlslap-program"),
            &endpoint(),
            &spec(2, 10, 1),
            "sluice_slap",
        );
        let done = cmd.execute(&log, Duration::from_secs(10), |_| {}).unwrap();
        assert_eq!(done.status.and_then(|s| s.code()), Some(127));
        let err = cmd.check(&done, "insert", &log).unwrap_err().to_string();
        assert!(err.contains("exit status 127"), "{err}");
        assert!(err.contains("mariadb-client"), "{err}");

        // A stand-in that never ends.
        let script = dir.path().join("slow-slap");
        std::fs::write(&script, "#!/bin/sh\nexec sleep 30\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let cmd = SlapCommand::insert(&script, &endpoint(), &spec(2, 10, 1), "sluice_slap");
        let done = cmd
            .execute(&log, Duration::from_millis(200), |_| {})
            .unwrap();
        assert!(done.status.is_none());
        assert!(done.elapsed < Duration::from_secs(10));
        let err = cmd.failure(&done, "insert", &log);
        assert!(err.contains("mysqlslap did not finish within"), "{err}");
    }

    #[test]
    fn version_names_the_package() {
        let err = version(Path::new("no-such-mysqlslap-program"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("mysqlslap not found"), "{err}");
        assert!(err.contains("mariadb-client"), "{err}");
    }
}
