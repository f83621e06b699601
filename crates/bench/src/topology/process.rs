//! The Sluice processes a benchmark starts, and the successors they start themselves at
//! a hand-over.

use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sluice_sandbox as sandbox;

use crate::tool::{shell_quote, tail, with_raised_nofile};

/// `sluice serve` started by the benchmark, under the sandbox's watchdog: it stops with
/// the benchmark however that ends (Ctrl-C, SIGTERM, SIGKILL), not only on a clean exit.
pub(crate) struct SluiceProcess {
    process: sandbox::Supervised,
    log: PathBuf,
    /// How it was started, as a shell would take it.
    pub(crate) command: String,
}

impl SluiceProcess {
    /// How long Sluice gets to start listening.
    const START_TIMEOUT: Duration = Duration::from_secs(20);
    /// How long a SIGKILLed Sluice gets to be gone.
    const KILL_TIMEOUT: Duration = Duration::from_secs(10);

    pub(crate) fn start(
        bin: &Path,
        config: &Path,
        port: u16,
        log: &Path,
    ) -> anyhow::Result<SluiceProcess> {
        let args = vec![
            "serve".to_string(),
            "--config".to_string(),
            config.to_string_lossy().into_owned(),
        ];
        let command = std::iter::once(bin.to_string_lossy().into_owned())
            .chain(args.iter().cloned())
            .map(|w| shell_quote(&w))
            .collect::<Vec<_>>()
            .join(" ");
        // The same bash line as every tool gets, so that the pid the watchdog reports
        // becomes Sluice's own when bash execs it.
        let raised = with_raised_nofile(bin, &args);
        let argv: Vec<std::ffi::OsString> = raised.get_args().map(|a| a.to_owned()).collect();
        let process =
            sandbox::Supervised::spawn_program(Path::new(raised.get_program()), &argv, None, log)
                .with_context(|| format!("starting Sluice ({command})"))?;
        let mut sluice = SluiceProcess {
            process,
            log: log.to_path_buf(),
            command,
        };

        let started = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Err(ended) = sluice.check() {
                bail!("Sluice did not start: {ended}");
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(sluice);
            }
            if started.elapsed() > Self::START_TIMEOUT {
                let msg = format!(
                    "Sluice did not listen on {addr} within {:?}; last lines of {}:\n{}",
                    Self::START_TIMEOUT,
                    sluice.log.display(),
                    sluice.log_tail()
                );
                sluice.stop();
                bail!(msg);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub(crate) fn check(&mut self) -> Result<(), String> {
        if self.process.running() {
            return Ok(());
        }
        Err(format!(
            "Sluice exited; last lines of {}:\n{}",
            self.log.display(),
            self.log_tail()
        ))
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        tail(&text, 10)
    }

    /// SIGKILL now, as a crash or a lost host would end it, and wait (at most
    /// [`Self::KILL_TIMEOUT`]) until it is gone. The watchdog still cleans up when the
    /// handle drops.
    pub(crate) fn kill(&self) -> anyhow::Result<()> {
        let pid = self.pid();
        sandbox::send_signal(pid, "KILL")?;
        let deadline = Instant::now() + Self::KILL_TIMEOUT;
        while sandbox::process_alive(pid) {
            if Instant::now() >= deadline {
                bail!(
                    "Sluice ({pid}) still alive {:?} after SIGKILL",
                    Self::KILL_TIMEOUT
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// SIGTERM for a graceful shutdown; the watchdog escalates to SIGKILL.
    pub(crate) fn stop(mut self) {
        self.process.stop();
    }
}

/// The watchdog of a successor: waits for its stdin to close (the benchmark dropping the
/// handle, or dying however it dies), then stops the process with SIGTERM, and SIGKILL
/// after 10 s, if it is still a Sluice started with `--take-over` (not a pid reused
/// since).
const SUCCESSOR_WATCHDOG: &str = r#"
pid=$1
read -r _ || true
alive() { [ -r "/proc/$pid/status" ] && ! grep -q '^State:[[:space:]]*[ZX]' "/proc/$pid/status"; }
alive || exit 0
tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- --take-over || exit 0
kill -TERM "$pid" 2>/dev/null
for ((i = 0; i < 100; i++)); do alive || exit 0; sleep 0.1; done
kill -KILL "$pid" 2>/dev/null
"#;

/// A Sluice that another Sluice started at a hand-over (SIGUSR2): not our child, so the
/// sandbox's watchdog does not know it. This one stops it when the handle drops or the
/// benchmark dies, as [`SluiceProcess`] is stopped.
pub(crate) struct Successor {
    pid: u32,
    watchdog: Option<Child>,
}

impl Successor {
    /// Watches `pid` from now on.
    pub(crate) fn adopt(pid: u32) -> anyhow::Result<Successor> {
        let watchdog = Command::new("bash")
            .arg("-c")
            .arg(SUCCESSOR_WATCHDOG)
            .arg("sluice-bench-successor-watchdog")
            .arg(pid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C aimed at the benchmark must not end the
            // watchdog before it has stopped the successor; the closing pipe does.
            .process_group(0)
            .spawn()
            .context("starting the watchdog of a successor Sluice")?;
        Ok(Successor {
            pid,
            watchdog: Some(watchdog),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// SIGTERM, SIGKILL after 10 s, and wait (bounded) until it is done.
    pub(crate) fn stop(&mut self) {
        let Some(mut watchdog) = self.watchdog.take() else {
            return;
        };
        if let Some(mut stdin) = watchdog.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        if !matches!(
            sandbox::wait_child(&mut watchdog, Duration::from_secs(15)),
            Ok(Some(_))
        ) {
            let _ = sandbox::send_signal(self.pid, "KILL");
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

impl Drop for Successor {
    fn drop(&mut self) {
        self.stop();
    }
}
