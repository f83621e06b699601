//! sysbench through Sluice for the whole upgrade run: started once, its threads
//! waited for, stopped (killed) when the hand-overs are done, its output kept.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::sysbench::{self, SysbenchCommand};

/// How long sysbench gets to connect its threads.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// sysbench running in the background, killed when stopped or dropped.
pub(super) struct RunningSysbench {
    child: Option<Child>,
    log: PathBuf,
    /// When its threads started: its reports' seconds count from here.
    pub(super) started: Instant,
}

impl RunningSysbench {
    pub(super) fn start(command: SysbenchCommand, log: &Path) -> anyhow::Result<RunningSysbench> {
        let file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = command
            .command()
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .context("starting sysbench")?;
        let mut running = RunningSysbench {
            child: Some(child),
            log: log.to_path_buf(),
            started: Instant::now(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains("Threads started!") {
                running.started = Instant::now();
                return Ok(running);
            }
            let exited = running.child.as_mut().map(|c| c.try_wait());
            if let Some(Ok(Some(status))) = exited {
                bail!(
                    "sysbench ended before its threads started ({status}): {}",
                    sysbench::fatal_lines(&text).join("; ")
                );
            }
            if Instant::now() > deadline {
                bail!("sysbench's threads did not start within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it; its output, and how it ended if it ended by itself.
    pub(super) fn stop(mut self) -> (String, Option<String>) {
        let mut ended = None;
        if let Some(mut child) = self.child.take() {
            if let Ok(Some(status)) = child.try_wait() {
                ended = Some(format!("sysbench ended by itself ({status})"));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        if let Some(e) = &mut ended {
            let fatal = sysbench::fatal_lines(&text);
            if !fatal.is_empty() {
                e.push_str(&format!(": {}", fatal.join("; ")));
            }
        }
        (text, ended)
    }
}

impl Drop for RunningSysbench {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
