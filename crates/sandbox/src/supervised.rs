//! The watchdog every sandbox process runs under, and its handle.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::process::{mariadbd_path, process_alive, send_signal, wait_child};
use crate::STOP_TIMEOUT;

/// Tenths of a second the watchdog gives mariadbd between SIGTERM and SIGKILL.
pub(crate) const WATCHDOG_TERM_GRACE_TENTHS: u32 = 200;

/// The watchdog every server runs under. Arguments: the directory to delete after the
/// server exits (empty: none), the file for the server's own stdout and stderr, then the
/// server's command line. It prints the server's pid, then blocks reading stdin: a line
/// from us, or end of file when our process exits or dies, means "stop now". The line
/// `keep` leaves the directory in place, for a successor watchdog that restarts the
/// server on the same files.
pub(crate) const WATCHDOG: &str = r#"
remove=$1; out=$2; shift 2
"$@" </dev/null >"$out" 2>&1 &
server=$!
echo "$server"
exec >/dev/null
command=
read -r command || true
if [ "$command" = keep ]; then remove=; fi
kill -TERM "$server" 2>/dev/null
for ((i = 0; i < GRACE; i++)); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
kill -KILL "$server" 2>/dev/null
wait "$server" 2>/dev/null
if [ -n "$remove" ]; then rm -rf -- "$remove"; fi
"#;

/// A process under the watchdog: it is stopped (and its files removed) when this handle
/// is dropped and also when this whole process dies, however it dies. Dropping it stops
/// the process. mariadbd here, and the Sluice instances `sluice bench` starts.
pub struct Supervised {
    /// The watchdog shell; its stdin is the pipe whose closing stops the server.
    watchdog: Option<Child>,
    /// mariadbd's own pid (a child of the watchdog, not of us).
    pub(crate) pid: u32,
}

impl Supervised {
    /// Start `mariadbd args` under the watchdog. `remove` is deleted after the server
    /// exits; `out` receives what the server prints before its error log is open.
    pub(crate) fn spawn(
        args: &[OsString],
        remove: Option<&Path>,
        out: &Path,
    ) -> Result<Supervised> {
        Self::spawn_program(&mariadbd_path()?, args, remove, out)
    }

    /// Start `program args` under the watchdog, its stdout and stderr going to `out`.
    pub fn spawn_program(
        program: &Path,
        args: &[OsString],
        remove: Option<&Path>,
        out: &Path,
    ) -> Result<Supervised> {
        Self::spawn_with_env(program, args, &[], remove, out)
    }

    /// [`Supervised::spawn_program`] with extra environment variables for the program.
    pub(crate) fn spawn_with_env(
        program: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
        remove: Option<&Path>,
        out: &Path,
    ) -> Result<Supervised> {
        let script = WATCHDOG.replace("GRACE", &WATCHDOG_TERM_GRACE_TENTHS.to_string());
        let mut command = Command::new("bash");
        command
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg("-c")
            .arg(script)
            .arg("sluice-sandbox-watchdog")
            .arg(remove.map(Path::as_os_str).unwrap_or_default())
            .arg(out)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Own process group: a Ctrl-C aimed at the test runner must not kill the
            // watchdog before it has cleaned up; the closing pipe stops it instead.
            .process_group(0);
        let mut watchdog = command.spawn().context("starting bash for the watchdog")?;
        let stdout = watchdog.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let pid = match read.map(|_| line.trim().parse::<u32>()) {
            Ok(Ok(pid)) => pid,
            other => {
                let _ = watchdog.kill();
                let _ = watchdog.wait();
                bail!("the watchdog did not report the server's pid: {other:?}");
            }
        };
        Ok(Supervised {
            watchdog: Some(watchdog),
            pid,
        })
    }

    /// The supervised process's own pid (a child of the watchdog, not of us).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the supervised process still runs.
    pub fn running(&self) -> bool {
        self.watchdog.is_some() && process_alive(self.pid)
    }

    /// Stop the process and wait (bounded) for the watchdog to finish its cleanup.
    pub fn stop(&mut self) {
        self.stop_with(None);
    }

    /// Stop the process like [`Supervised::stop`] but keep the directory the watchdog
    /// would delete, so that a new watchdog can take it over.
    pub(crate) fn release(&mut self) {
        self.stop_with(Some("keep\n"));
    }

    pub(crate) fn stop_with(&mut self, line: Option<&str>) {
        let Some(mut watchdog) = self.watchdog.take() else {
            return;
        };
        // Closing the pipe is the stop signal; the watchdog escalates to SIGKILL itself.
        // A failed write means the watchdog is gone already, which the wait sees.
        let mut stdin = watchdog.stdin.take();
        if let (Some(stdin), Some(line)) = (stdin.as_mut(), line) {
            let _ = stdin.write_all(line.as_bytes());
        }
        drop(stdin);
        if !matches!(wait_child(&mut watchdog, STOP_TIMEOUT), Ok(Some(_))) {
            // The watchdog is wedged too: do its job, minus the file removal, which
            // the owner of the directory does after us.
            let _ = send_signal(self.pid, "KILL");
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}
