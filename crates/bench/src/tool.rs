//! Running a load generator (sysbench, mysqlslap): a child process with its open-files
//! limit raised, all its output kept in a log file, a deadline, and the words a report
//! needs about how it ended and how to run it again.

use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The open-files soft limit children get: enough for thousands of connections.
const NOFILE: u32 = 65535;

/// A command that runs `program args` with the open-files soft limit raised to
/// [`NOFILE`] (or to the hard limit, if that is lower). Thread ramps to hundreds of
/// connections exhaust the usual 1024 otherwise, in sysbench and in the proxy. A program
/// that does not exist shows as exit status 127 (bash's answer), not a spawn error.
pub fn with_raised_nofile(program: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -n {NOFILE} 2>/dev/null || ulimit -n \"$(ulimit -Hn)\"; exec \"$0\" \"$@\""
        ))
        .arg(program)
        .args(args);
    cmd
}

/// Open files this process may need itself: the multiplexing scenario holds thousands
/// of idle client sockets in process.
const OWN_NOFILE: u64 = 4 * 1024;
/// Set in the environment once this process has raised its own limit.
const ENV_RAISED: &str = "SLUICE_BENCH_NOFILE";

/// Makes sure this process's own open-files soft limit is at least [`OWN_NOFILE`]: if it
/// is lower, replaces the process (same pid, same arguments) by itself run under bash's
/// `ulimit -n`, once. Raising it in process would take unsafe code.
pub fn raise_own_nofile() -> anyhow::Result<()> {
    if std::env::var_os(ENV_RAISED).is_some() || nofile_soft_limit() >= OWN_NOFILE {
        return Ok(());
    }
    let exe = std::env::current_exe().context("locating this program")?;
    let error = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -n {NOFILE} 2>/dev/null || ulimit -n \"$(ulimit -Hn)\"; exec \"$@\""
        ))
        .arg("bash")
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(ENV_RAISED, "1")
        .exec();
    Err(anyhow::Error::new(error).context("running again under a raised open-files limit"))
}

/// This process's open-files soft limit, from `/proc/self/limits`.
fn nofile_soft_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(1024)
}

/// Runs `command` (made by [`with_raised_nofile`]) with stdout and stderr both going to
/// `log`, killing it at `deadline`; `on_tick` is called about once a second with the
/// time so far.
pub fn run_logged(
    mut command: Command,
    program: &Path,
    log: &Path,
    deadline: Duration,
    mut on_tick: impl FnMut(Duration),
) -> anyhow::Result<Finished> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| {
            format!(
                "cannot start `{}` (through bash, to raise its open-files limit)",
                program.display()
            )
        })?;
    let started = Instant::now();
    let mut last_tick = started;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
            on_tick(started.elapsed());
        }
    };
    let output = std::fs::read_to_string(log).with_context(|| {
        format!(
            "reading the output of {} in {}",
            program.display(),
            log.display()
        )
    })?;
    Ok(Finished {
        status,
        elapsed: started.elapsed(),
        output,
    })
}

/// The end of one tool process.
#[derive(Debug)]
pub struct Finished {
    /// `None` when it was killed at its deadline.
    pub status: Option<ExitStatus>,
    pub elapsed: Duration,
    pub output: String,
}

impl Finished {
    /// Whether the tool died of SIGINT: the user pressed Ctrl-C, which the terminal
    /// sends to the tool as well as to us.
    pub fn interrupted(&self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.status.and_then(|s| s.signal()) == Some(2)
    }

    /// How it ended, when that was not a success: "exited with status 1", ...
    pub fn how(&self) -> String {
        match self.status {
            None => format!("did not finish within {:.0?} and was killed", self.elapsed),
            Some(status) => match status.code() {
                Some(code) => format!("exited with status {code}"),
                None => format!("was killed by a signal ({status})"),
            },
        }
    }

    /// `what: TOOL HOW: error | error` and the tail of the output, for a report.
    pub fn failure_message(
        &self,
        what: &str,
        tool: &str,
        how: &str,
        errors: &[String],
        log: &Path,
    ) -> String {
        let mut msg = format!("{what}: {tool} {how}");
        if !errors.is_empty() {
            msg.push_str(&format!(": {}", errors.join(" | ")));
        }
        msg.push_str(&format!(
            "\n  last lines of its output ({}):\n{}",
            log.display(),
            indent(&tail(&self.output, 8), "    ")
        ));
        msg
    }
}

/// `program --version`-style probe: its first words when it answers and they contain
/// `looks_like`; otherwise an error (`not_found` when there is no such program).
pub fn version(
    program: &Path,
    args: &[&str],
    looks_like: &str,
    not_found: &str,
) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow::anyhow!("{not_found}")
            } else {
                anyhow::anyhow!("cannot start `{}`: {e}", program.display())
            }
        })?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !text.contains(looks_like) {
        bail!(
            "`{} {}` did not answer like {looks_like} ({}): {}",
            program.display(),
            args.join(" "),
            out.status,
            tail(
                &format!("{text}\n{}", String::from_utf8_lossy(&out.stderr)),
                4
            )
        );
    }
    Ok(text)
}

/// The command line as a shell would take it, with the value of the argument starting
/// with `secret` (a password option) replaced by `****` when one is given.
pub fn command_line(program: &Path, args: &[String], secret: Option<&str>) -> String {
    let mut words = vec![shell_quote(&program.to_string_lossy())];
    for arg in args {
        match secret {
            Some(prefix) if arg.starts_with(prefix) => words.push(format!("{prefix}****")),
            _ => words.push(shell_quote(arg)),
        }
    }
    words.join(" ")
}

/// The last `n` non-empty lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return "(nothing)".to_string();
    }
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Quotes a word for a POSIX shell when it needs it.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/@%+".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_tail() {
        assert_eq!(shell_quote("--threads=4"), "--threads=4");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(tail("a\n\nb\nc\n\n", 2), "b\nc");
        assert_eq!(tail("\n", 2), "(nothing)");
    }

    #[test]
    fn command_lines_hide_the_secret() {
        let args = vec!["--user=u".to_string(), "--password=a b".to_string()];
        let shown = command_line(Path::new("/usr/bin/tool"), &args, None);
        assert_eq!(shown, "/usr/bin/tool --user=u '--password=a b'");
        let hidden = command_line(Path::new("tool"), &args, Some("--password="));
        assert_eq!(hidden, "tool --user=u --password=****");
    }

    #[test]
    fn missing_and_foreign_programs_are_named() {
        let err = version(
            Path::new("/nonexistent/tool"),
            &["--version"],
            "tool",
            "no tool",
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "no tool");
        // `true` answers, but not like the tool.
        let err = version(Path::new("true"), &[], "sysbench", "-").unwrap_err();
        assert!(
            err.to_string().contains("did not answer like sysbench"),
            "{err}"
        );
    }

    #[test]
    fn a_run_past_its_deadline_is_killed_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let cmd = with_raised_nofile(Path::new("sleep"), &["5".to_string()]);
        let finished = run_logged(
            cmd,
            Path::new("sleep"),
            &log,
            Duration::from_millis(300),
            |_| {},
        )
        .unwrap();
        assert!(finished.status.is_none());
        assert!(
            finished.how().starts_with("did not finish within"),
            "{}",
            finished.how()
        );
        let cmd = with_raised_nofile(Path::new("sh"), &["-c".into(), "echo oops; exit 3".into()]);
        let finished =
            run_logged(cmd, Path::new("sh"), &log, Duration::from_secs(10), |_| {}).unwrap();
        assert_eq!(finished.how(), "exited with status 3");
        let msg = finished.failure_message("step", "sh", &finished.how(), &["bad".into()], &log);
        assert!(
            msg.starts_with("step: sh exited with status 3: bad\n"),
            "{msg}"
        );
        assert!(msg.contains("    oops"), "{msg}");
    }
}
