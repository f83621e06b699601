//! The Sluice processes a benchmark starts.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
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

    pub(super) fn pid(&self) -> u32 {
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
