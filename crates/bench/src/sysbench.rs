//! sysbench as the load generator of `sluice bench`: the command lines it runs (prepare,
//! run, cleanup), running one with a deadline and its output kept on disk, and the parser
//! for what sysbench 1.0 prints.

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::tool::{self, run_logged, with_raised_nofile, Finished};

/// What a step runs: a sysbench Lua script, or the mysqlslap insert series.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// One primary-key `SELECT` per event.
    #[value(name = "oltp_point_select", alias = "point_select")]
    #[serde(rename = "oltp_point_select")]
    OltpPointSelect,
    /// Fourteen reads per event: point selects and four kinds of range query.
    #[value(name = "oltp_read_only", alias = "read_only")]
    #[serde(rename = "oltp_read_only")]
    OltpReadOnly,
    /// oltp_read_write's 14 reads outside any transaction, then its 4 writes inside one
    /// (the published report's read-write variant; a Lua script shipped with Sluice).
    #[value(name = "oltp_read_write_split", alias = "read_write")]
    #[serde(rename = "oltp_read_write_split")]
    OltpReadWriteSplit,
    /// The multi-master insert benchmark: mysqlslap, one table, a series of transaction
    /// lengths instead of a thread ramp.
    #[value(name = "insert")]
    #[serde(rename = "insert")]
    Insert,
}

/// The Lua script of [`Workload::OltpReadWriteSplit`]: sysbench finds `oltp_common`
/// on its own search path, so the script can run from any directory.
pub const READ_WRITE_SPLIT_LUA: &str = include_str!("oltp_read_write_split.lua");

impl Workload {
    /// The name the report and the flags use.
    pub fn name(self) -> &'static str {
        match self {
            Workload::OltpPointSelect => "oltp_point_select",
            Workload::OltpReadOnly => "oltp_read_only",
            Workload::OltpReadWriteSplit => "oltp_read_write_split",
            Workload::Insert => "insert",
        }
    }

    /// The script argument sysbench takes: a bundled script's name, or a file that
    /// `sluice bench` writes into the directory sysbench runs in. `None` for mysqlslap.
    pub fn script(self) -> Option<&'static str> {
        match self {
            Workload::OltpPointSelect => Some("oltp_point_select"),
            Workload::OltpReadOnly => Some("oltp_read_only"),
            Workload::OltpReadWriteSplit => Some("oltp_read_write_split.lua"),
            Workload::Insert => None,
        }
    }

    /// Whether sysbench drives it (a thread ramp) rather than mysqlslap.
    pub fn is_sysbench(self) -> bool {
        self.script().is_some()
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// sysbench's `--db-ps-mode`: server-side prepared statements or plain text queries.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum PsMode {
    /// Prepared statements (`COM_STMT_PREPARE` / `COM_STMT_EXECUTE`), sysbench's default.
    Auto,
    /// Text protocol (`COM_QUERY`) only.
    Disable,
}

impl PsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PsMode::Auto => "auto",
            PsMode::Disable => "disable",
        }
    }

    /// How the report names the mode.
    pub fn describe(self) -> &'static str {
        match self {
            PsMode::Auto => "prepared statements",
            PsMode::Disable => "text protocol",
        }
    }
}

impl fmt::Display for PsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where sysbench connects and as whom.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub database: String,
    /// Print the password in command lines. True only for the embedded run's throwaway
    /// credentials, so a report never carries a real password.
    pub show_password: bool,
}

impl Endpoint {
    /// The Unix socket to connect to: a host given as a path (starting with `/`).
    pub fn socket(&self) -> Option<&str> {
        self.host.starts_with('/').then_some(self.host.as_str())
    }
}

/// The tables sysbench creates and reads.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DataSet {
    pub tables: u32,
    pub table_size: u64,
}

/// One `sysbench ...` invocation.
#[derive(Debug, Clone)]
pub struct SysbenchCommand {
    program: PathBuf,
    args: Vec<String>,
    /// Print `--mysql-password=****` instead of the password.
    hide_password: bool,
    /// Where sysbench runs: the directory holding a script Sluice ships.
    dir: Option<PathBuf>,
}

impl SysbenchCommand {
    fn new(program: &Path, script: &str, endpoint: &Endpoint, data: DataSet) -> Self {
        let (host, port) = match endpoint.socket() {
            Some(path) => (
                "--mysql-host=localhost".to_string(),
                format!("--mysql-socket={path}"),
            ),
            None => (
                format!("--mysql-host={}", endpoint.host),
                format!("--mysql-port={}", endpoint.port),
            ),
        };
        let args = vec![
            script.to_string(),
            "--db-driver=mysql".to_string(),
            host,
            port,
            format!("--mysql-user={}", endpoint.user),
            format!("--mysql-password={}", endpoint.password),
            format!("--mysql-db={}", endpoint.database),
            format!("--tables={}", data.tables),
            format!("--table-size={}", data.table_size),
        ];
        let hide_password = !endpoint.show_password && !endpoint.password.is_empty();
        SysbenchCommand {
            program: program.to_path_buf(),
            args,
            hide_password,
            dir: None,
        }
    }

    /// `sysbench oltp_read_only ... prepare`: creates and fills the tables. sysbench
    /// spreads the tables over `threads` connections.
    pub fn prepare(program: &Path, endpoint: &Endpoint, data: DataSet, threads: u32) -> Self {
        let mut cmd = Self::new(program, "oltp_read_only", endpoint, data);
        cmd.args.push(format!("--threads={}", threads.max(1)));
        cmd.args.push("prepare".to_string());
        cmd
    }

    /// `sysbench oltp_read_only ... cleanup`: drops the tables.
    pub fn cleanup(program: &Path, endpoint: &Endpoint, data: DataSet) -> Self {
        let mut cmd = Self::new(program, "oltp_read_only", endpoint, data);
        cmd.args.push("cleanup".to_string());
        cmd
    }

    /// One measured step, run in `dir` (which holds the scripts Sluice ships). Reads run
    /// outside transactions (`--skip_trx=on`), as in the published reports.
    pub fn run(program: &Path, endpoint: &Endpoint, step: &RunSpec, dir: &Path) -> Self {
        let script = step
            .workload
            .script()
            .expect("the plan gives sysbench only sysbench workloads");
        let mut cmd = Self::new(program, script, endpoint, step.data);
        cmd.dir = Some(dir.to_path_buf());
        cmd.args.extend([
            format!("--threads={}", step.threads),
            format!("--time={}", step.duration_secs),
            format!("--report-interval={}", step.report_interval_secs),
            "--skip_trx=on".to_string(),
            format!("--db-ps-mode={}", step.ps_mode),
            "run".to_string(),
        ]);
        cmd
    }

    /// `sysbench SCRIPT ... OPTIONS run`, run in `dir`: a load that is none of the
    /// [`Workload`]s, such as stock `oltp_read_write` with its transactions (the
    /// failover scenario), whose options the caller gives whole.
    pub fn run_script(
        program: &Path,
        script: &str,
        endpoint: &Endpoint,
        data: DataSet,
        options: &[String],
        dir: &Path,
    ) -> Self {
        let mut cmd = Self::new(program, script, endpoint, data);
        cmd.dir = Some(dir.to_path_buf());
        cmd.args.extend(options.iter().cloned());
        cmd.args.push("run".to_string());
        cmd
    }

    /// One more option, before the trailing `run`/`prepare`/`cleanup` word.
    pub fn with_arg(mut self, arg: &str) -> Self {
        let at = self.args.len().saturating_sub(1);
        self.args.insert(at, arg.to_string());
        self
    }

    /// The command line as a shell would take it, password hidden unless it is the
    /// embedded run's throwaway one.
    pub fn display(&self) -> String {
        let secret = self.hide_password.then_some("--mysql-password=");
        tool::command_line(&self.program, &self.args, secret)
    }

    /// Runs the command with stdout and stderr going to `log` (sysbench prints its
    /// errors on stdout, so both land in one file), killing it at `deadline`. While it
    /// runs, `on_tick` is called about once a second with the time so far and the last
    /// intermediate report sysbench printed.
    pub fn execute(
        &self,
        log: &Path,
        deadline: Duration,
        mut on_tick: impl FnMut(Duration, Option<&Interval>),
    ) -> anyhow::Result<Finished> {
        run_logged(self.command(), &self.program, log, deadline, |elapsed| {
            on_tick(elapsed, last_interval(log).as_ref())
        })
    }

    /// The command, not started: for a run the caller stops itself.
    pub fn command(&self) -> Command {
        let mut command = with_raised_nofile(&self.program, &self.args);
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        command
    }

    /// Runs the command to completion and fails, with sysbench's own words, unless it
    /// exited 0. For prepare and cleanup.
    pub fn execute_checked(
        &self,
        what: &str,
        log: &Path,
        deadline: Duration,
    ) -> anyhow::Result<()> {
        let finished = self.execute(log, deadline, |_, _| {})?;
        check(&finished, what, log)
    }
}

/// Ok when sysbench exited 0; otherwise an error naming `what`, how sysbench ended, its
/// `FATAL` lines and the tail of its output.
pub fn check(finished: &Finished, what: &str, log: &Path) -> anyhow::Result<()> {
    match finished.status {
        Some(status) if status.success() => Ok(()),
        _ => bail!("{}", failure(finished, what, log)),
    }
}

/// A message for a run that did not succeed.
pub fn failure(finished: &Finished, what: &str, log: &Path) -> String {
    let fatal = fatal_lines(&finished.output);
    finished.failure_message(what, "sysbench", &finished.how(), &fatal, log)
}

/// What one step runs.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    pub workload: Workload,
    pub ps_mode: PsMode,
    pub threads: u32,
    pub duration_secs: u64,
    pub report_interval_secs: u64,
    pub data: DataSet,
}

/// sysbench's final statistics for one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    /// Reads sent (`queries performed: read`): the report's "total reads".
    pub reads: u64,
    /// Writes sent (INSERT, UPDATE, DELETE).
    pub writes: u64,
    /// All queries sent (reads, writes, other).
    pub queries: u64,
    pub queries_per_sec: f64,
    /// Events: one script iteration (1 query for point_select, 14 for read_only).
    pub transactions: u64,
    pub transactions_per_sec: f64,
    /// Errors sysbench counted and carried on after (`ignored errors`).
    pub ignored_errors: u64,
    pub reconnects: u64,
    pub total_time_secs: f64,
    /// Per-event latency.
    pub latency_min_ms: f64,
    pub latency_avg_ms: f64,
    pub latency_max_ms: f64,
    /// The percentile sysbench reported (`--percentile`, 95 unless changed).
    pub latency_percentile: u32,
    pub latency_percentile_ms: f64,
}

/// Parses the summary sysbench 1.0 prints at the end of `run`. Fails, naming what is
/// missing, when the output has no complete summary (sysbench died, or was never run).
pub fn parse_run(output: &str) -> anyhow::Result<RunStats> {
    let mut queries = None;
    let (mut reads, mut writes) = (None, None);
    let mut transactions = None;
    let mut ignored_errors = None;
    let mut reconnects = None;
    let mut total_time = None;
    let (mut min, mut avg, mut max, mut pct) = (None, None, None, None);
    let mut in_latency = false;

    for line in output.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.ends_with(':') && !line.contains("  ") {
            // Section heading ("SQL statistics:", "Latency (ms):", ...) or sub-heading.
            in_latency = line.starts_with("Latency");
            continue;
        }
        if let Some(rest) = line.strip_prefix("read:") {
            reads = Some(count(rest).context("the `read:` line")?);
        } else if let Some(rest) = line.strip_prefix("write:") {
            writes = Some(count(rest).context("the `write:` line")?);
        } else if let Some(rest) = line.strip_prefix("queries:") {
            queries = Some(count_and_rate(rest).context("the `queries:` line")?);
        } else if let Some(rest) = line.strip_prefix("transactions:") {
            transactions = Some(count_and_rate(rest).context("the `transactions:` line")?);
        } else if let Some(rest) = line.strip_prefix("ignored errors:") {
            ignored_errors = Some(
                count_and_rate(rest)
                    .context("the `ignored errors:` line")?
                    .0,
            );
        } else if let Some(rest) = line.strip_prefix("reconnects:") {
            reconnects = Some(count_and_rate(rest).context("the `reconnects:` line")?.0);
        } else if let Some(rest) = line.strip_prefix("total time:") {
            let secs = rest.trim().trim_end_matches('s');
            total_time = Some(number(secs).context("the `total time:` line")?);
        } else if in_latency {
            if let Some(rest) = line.strip_prefix("min:") {
                min = Some(number(rest)?);
            } else if let Some(rest) = line.strip_prefix("avg:") {
                avg = Some(number(rest)?);
            } else if let Some(rest) = line.strip_prefix("max:") {
                max = Some(number(rest)?);
            } else if let Some((head, rest)) = line.split_once("th percentile:") {
                let p: u32 = head.trim().parse().context("the percentile line")?;
                pct = Some((p, number(rest)?));
            }
        }
    }

    let missing = |name: &str| anyhow::anyhow!("sysbench output has no `{name}` statistic");
    let (queries, queries_per_sec) = queries.ok_or_else(|| missing("queries"))?;
    let (transactions, transactions_per_sec) =
        transactions.ok_or_else(|| missing("transactions"))?;
    let (latency_percentile, latency_percentile_ms) =
        pct.ok_or_else(|| missing("latency percentile"))?;
    Ok(RunStats {
        reads: reads.ok_or_else(|| missing("read"))?,
        writes: writes.ok_or_else(|| missing("write"))?,
        queries,
        queries_per_sec,
        transactions,
        transactions_per_sec,
        ignored_errors: ignored_errors.ok_or_else(|| missing("ignored errors"))?,
        reconnects: reconnects.ok_or_else(|| missing("reconnects"))?,
        total_time_secs: total_time.ok_or_else(|| missing("total time"))?,
        latency_min_ms: min.ok_or_else(|| missing("latency min"))?,
        latency_avg_ms: avg.ok_or_else(|| missing("latency avg"))?,
        latency_max_ms: max.ok_or_else(|| missing("latency max"))?,
        latency_percentile,
        latency_percentile_ms,
    })
}

fn count(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    s.parse().with_context(|| format!("bad count {s:?}"))
}

/// `  108990 (36303.36 per sec.)` → (108990, 36303.36).
fn count_and_rate(s: &str) -> anyhow::Result<(u64, f64)> {
    let s = s.trim();
    let (count, rest) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
    let count = count
        .parse()
        .with_context(|| format!("bad count {count:?}"))?;
    let rate = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix("per sec.)"))
        .with_context(|| format!("no rate in {s:?}"))?;
    Ok((count, number(rate)?))
}

fn number(s: &str) -> anyhow::Result<f64> {
    let s = s.trim();
    s.parse().with_context(|| format!("bad number {s:?}"))
}

/// One intermediate report line (`--report-interval`).
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub at_secs: u64,
    pub threads: u32,
    pub tps: f64,
    pub qps: f64,
    pub latency_percentile_ms: f64,
    pub errors_per_sec: f64,
    /// Connections sysbench had to open again (0 where the line has no figure).
    pub reconnects_per_sec: f64,
}

/// Parses `[ 3s ] thds: 2 tps: 2250.02 qps: 31496.24 (r/w/o: ...) lat (ms,95%): 1.23
/// err/s: 0.00 reconn/s: 0.00`.
pub fn parse_interval(line: &str) -> Option<Interval> {
    let rest = line.trim().strip_prefix('[')?;
    let (at, rest) = rest.split_once("s ]")?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let after = |key: &str| -> Option<&str> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1).copied()
    };
    Some(Interval {
        at_secs: at.trim().parse().ok()?,
        threads: after("thds:")?.parse().ok()?,
        tps: after("tps:")?.parse().ok()?,
        qps: after("qps:")?.parse().ok()?,
        latency_percentile_ms: words
            .iter()
            .position(|w| w.starts_with("(ms,"))
            .and_then(|i| words.get(i + 1))?
            .parse()
            .ok()?,
        errors_per_sec: after("err/s:")?.parse().ok()?,
        reconnects_per_sec: after("reconn/s:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0),
    })
}

/// The last intermediate report in a sysbench log written so far.
fn last_interval(log: &Path) -> Option<Interval> {
    let mut file = File::open(log).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    text.lines().rev().find_map(parse_interval)
}

/// sysbench's fold of repeated messages: `(last message repeated N times)`, N.
pub fn repeated(line: &str) -> Option<usize> {
    line.strip_prefix("(last message repeated ")?
        .strip_suffix(" times)")?
        .parse()
        .ok()
}

/// The error a line of sysbench's output names (`--verbosity=5` names each error it
/// ignores), worded the same whichever way sysbench printed it; `None` for any other
/// line.
pub fn error_text(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    if let Some(rest) = line.strip_prefix("DEBUG: Ignoring error ") {
        let rest = rest.trim_end_matches(',');
        return Some(match rest.split_once(' ') {
            Some((code, message)) => format!("error {code}: {message}"),
            None => format!("error {rest}"),
        });
    }
    (lower.contains("error")
        && !line.starts_with("DEBUG:")
        && !lower.starts_with("ignored errors:"))
    .then(|| line.to_string())
}

/// sysbench's `FATAL:` lines, each once, in order.
pub fn fatal_lines(output: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for line in output.lines() {
        if let Some(rest) = line.trim().strip_prefix("FATAL:") {
            let rest = rest.trim().to_string();
            if !seen.contains(&rest) {
                seen.push(rest);
            }
        }
    }
    seen
}

/// `sysbench --version`, or an error that says how to get sysbench.
pub fn version(program: &Path) -> anyhow::Result<String> {
    tool::version(
        program,
        &["--version"],
        "sysbench",
        &format!(
            "sysbench not found (`{}`): install sysbench 1.0 (the `sysbench` package of most \
             distributions) or pass --sysbench PATH",
            program.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from sysbench 1.0.20 against MariaDB 10.11 (2 tables x 1,000 rows,
    // 2 threads, 3 s), unedited.
    const POINT_SELECT_AUTO: &str = include_str!("testdata/run_point_select_ps_auto.txt");
    const POINT_SELECT_DISABLE: &str = include_str!("testdata/run_point_select_ps_disable.txt");
    const READ_ONLY_AUTO: &str = include_str!("testdata/run_read_only_ps_auto.txt");
    const READ_ONLY_DISABLE: &str = include_str!("testdata/run_read_only_ps_disable.txt");
    // A table renamed away mid-run with --mysql-ignore-errors=1146.
    const IGNORED_ERRORS: &str = include_str!("testdata/run_ignored_errors.txt");
    // The server killed sysbench's connections mid-run.
    const LOST_CONNECTION: &str = include_str!("testdata/run_lost_connection.txt");
    const CONNECTION_REFUSED: &str = include_str!("testdata/run_connection_refused.txt");
    const ACCESS_DENIED: &str = include_str!("testdata/run_access_denied.txt");
    const MISSING_TABLE: &str = include_str!("testdata/run_missing_table.txt");
    const PREPARE_OK: &str = include_str!("testdata/prepare_ok.txt");
    const PREPARE_TABLE_EXISTS: &str = include_str!("testdata/prepare_table_exists.txt");

    #[test]
    fn parses_read_only_summary() {
        let stats = parse_run(READ_ONLY_AUTO).unwrap();
        assert_eq!(
            stats,
            RunStats {
                reads: 108990,
                writes: 0,
                queries: 108990,
                queries_per_sec: 36303.36,
                transactions: 7785,
                transactions_per_sec: 2593.10,
                ignored_errors: 0,
                reconnects: 0,
                total_time_secs: 3.0018,
                latency_min_ms: 0.59,
                latency_avg_ms: 0.77,
                latency_max_ms: 5.29,
                latency_percentile: 95,
                latency_percentile_ms: 1.12,
            }
        );
        // read_only sends 14 queries per event.
        assert_eq!(stats.queries, stats.transactions * 14);
    }

    #[test]
    fn parses_point_select_summaries() {
        let auto = parse_run(POINT_SELECT_AUTO).unwrap();
        let disable = parse_run(POINT_SELECT_DISABLE).unwrap();
        for stats in [&auto, &disable] {
            // One query per event.
            assert_eq!(stats.queries, stats.transactions);
            assert_eq!(stats.latency_percentile, 95);
            assert!(stats.latency_min_ms <= stats.latency_avg_ms);
            assert!(stats.latency_avg_ms <= stats.latency_max_ms);
        }
        assert_eq!(disable.queries, 154735);
        assert_eq!(disable.queries_per_sec, 51547.02);
        assert_eq!(disable.latency_avg_ms, 0.04);
        assert_eq!(disable.latency_percentile_ms, 0.07);
        assert_eq!(disable.total_time_secs, 3.0015);
        assert_ne!(auto, disable);
        let ro = parse_run(READ_ONLY_DISABLE).unwrap();
        assert_eq!(ro.queries, ro.transactions * 14);
    }

    #[test]
    fn parses_the_read_write_split_summary() {
        // Captured through Sluice: 4 threads, 30 s, 64 tables x 10,000 rows.
        let stats = parse_run(include_str!("testdata/run_read_write_split_ps_auto.txt")).unwrap();
        // 14 reads outside transactions, then BEGIN, 4 writes, COMMIT per event.
        assert_eq!(stats.reads, stats.transactions * 14);
        assert_eq!(stats.writes, stats.transactions * 4);
        assert_eq!(stats.queries, stats.transactions * 20);
        assert_eq!(stats.queries_per_sec, 14737.39);
        assert_eq!(stats.ignored_errors, 0);
    }

    #[test]
    fn counts_ignored_errors() {
        let stats = parse_run(IGNORED_ERRORS).unwrap();
        assert_eq!(stats.ignored_errors, 53863);
        assert_eq!(stats.queries, 168851);
        assert_eq!(stats.latency_percentile_ms, 0.12);
    }

    #[test]
    fn output_without_summary_is_an_error() {
        for (name, text) in [
            ("lost connection", LOST_CONNECTION),
            ("refused", CONNECTION_REFUSED),
            ("access denied", ACCESS_DENIED),
            ("missing table", MISSING_TABLE),
            ("prepare", PREPARE_OK),
            ("empty", ""),
        ] {
            assert!(parse_run(text).is_err(), "{name} parsed as a complete run");
        }
        // A summary cut short (sysbench killed while printing) is incomplete too.
        let cut = &READ_ONLY_AUTO[..READ_ONLY_AUTO.find("95th percentile").unwrap()];
        let err = parse_run(cut).unwrap_err().to_string();
        assert!(err.contains("percentile"), "{err}");
    }

    #[test]
    fn fatal_lines_name_the_cause_once() {
        let refused = fatal_lines(CONNECTION_REFUSED);
        assert_eq!(
            refused,
            vec![
                "unable to connect to MySQL server on host '127.0.0.1', port 1, aborting...",
                "error 2002: Can't connect to server on '127.0.0.1' (115)",
                "`thread_init' function failed: /usr/share/sysbench/oltp_common.lua:349: \
                 connection creation failed",
                "Thread initialization failed!",
            ]
        );
        assert!(fatal_lines(ACCESS_DENIED)
            .iter()
            .any(|l| l.contains("error 1045")));
        assert!(fatal_lines(MISSING_TABLE)
            .iter()
            .any(|l| l.contains("sbtest3")));
        assert!(fatal_lines(LOST_CONNECTION)
            .iter()
            .any(|l| l.contains("error 2013")));
        assert!(fatal_lines(PREPARE_TABLE_EXISTS)
            .iter()
            .any(|l| l.contains("1050")));
        assert!(fatal_lines(READ_ONLY_AUTO).is_empty());
        assert!(fatal_lines(PREPARE_OK).is_empty());
    }

    #[test]
    fn parses_intermediate_reports() {
        let intervals: Vec<Interval> = READ_ONLY_AUTO.lines().filter_map(parse_interval).collect();
        assert_eq!(intervals.len(), 3);
        assert_eq!(
            intervals[2],
            Interval {
                at_secs: 3,
                threads: 2,
                tps: 2250.02,
                qps: 31496.24,
                latency_percentile_ms: 1.23,
                errors_per_sec: 0.0,
                reconnects_per_sec: 0.0,
            }
        );
        let errs: Vec<f64> = IGNORED_ERRORS
            .lines()
            .filter_map(parse_interval)
            .map(|i| i.errors_per_sec)
            .collect();
        assert_eq!(errs, vec![0.0, 0.0, 25017.34, 28853.16]);
        // The run that lost its connections printed one report before dying.
        assert_eq!(
            LOST_CONNECTION.lines().filter_map(parse_interval).count(),
            1
        );
        assert!(parse_interval("Threads started!").is_none());
    }

    #[test]
    fn command_lines() {
        let endpoint = Endpoint {
            host: "127.0.0.1".into(),
            port: 3306,
            user: "sbtest".into(),
            password: "s3cret pw".into(),
            database: "sbtest".into(),
            show_password: false,
        };
        let spec = RunSpec {
            workload: Workload::OltpReadOnly,
            ps_mode: PsMode::Disable,
            threads: 16,
            duration_secs: 20,
            report_interval_secs: 5,
            data: DataSet {
                tables: 8,
                table_size: 10_000,
            },
        };
        let run = SysbenchCommand::run(Path::new("sysbench"), &endpoint, &spec, Path::new("out"));
        assert_eq!(run.dir.as_deref(), Some(Path::new("out")));
        assert_eq!(
            run.display(),
            "sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 \
             --mysql-port=3306 --mysql-user=sbtest --mysql-password=**** --mysql-db=sbtest \
             --tables=8 --table-size=10000 --threads=16 --time=20 --report-interval=5 \
             --skip_trx=on --db-ps-mode=disable run"
        );
        assert!(run.args.contains(&"--mysql-password=s3cret pw".to_string()));

        let shown = Endpoint {
            show_password: true,
            ..endpoint
        };
        let prepare = SysbenchCommand::prepare(Path::new("sysbench"), &shown, spec.data, 4);
        let text = prepare.display();
        assert!(text.contains("'--mysql-password=s3cret pw'"), "{text}");
        assert!(text.ends_with("--threads=4 prepare"), "{text}");

        // A host given as a path is a Unix socket.
        let socket = Endpoint {
            host: "/run/sluice.sock".into(),
            ..shown
        };
        let run = SysbenchCommand::run(Path::new("sysbench"), &socket, &spec, Path::new("out"));
        let text = run.display();
        assert!(
            text.contains("--mysql-host=localhost --mysql-socket=/run/sluice.sock --mysql-user"),
            "{text}"
        );
        assert!(!text.contains("--mysql-port"), "{text}");
    }
}
