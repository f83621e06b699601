//! The chain of Sluice processes of an upgrade run: the one the benchmark starts, then
//! each successor it starts itself at SIGUSR2. Which process serves is read from the
//! log they all share (a successor inherits its predecessor's stderr): the serving
//! process logs `started a successor ... pid=N` when it starts one, and `the new process
//! accepts clients` once that one said ready. Only the serving process gets the signal
//! and only one hand-over runs at a time, so the lines after the log's length at the
//! signal are that hand-over's. Every successor is watched ([`Successor`]) and stopped
//! with the benchmark.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sluice_sandbox as sandbox;

use crate::tool::tail;
use crate::topology::{SluiceProcess, Successor};

/// How often the log is read while waiting for a hand-over: the ready time is measured
/// to this resolution.
const POLL: Duration = Duration::from_millis(5);
/// How long the serving process gets to log the successor it started.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the log says of a hand-over so far.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct LogSays {
    /// The successor's pid, once the serving process has started it.
    pub successor: Option<u32>,
    /// The successor said it is ready: it accepts, the old process drains.
    pub ready: bool,
    /// The hand-over failed, in the old process's words.
    pub failed: Option<String>,
}

/// Reads the complete lines of the log written since the signal.
pub(super) fn read_log_says(text: &str) -> LogSays {
    let mut says = LogSays::default();
    // A line still being written is read again at the next poll.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    for line in complete.lines() {
        if line.contains("started a successor") && says.successor.is_none() {
            says.successor = line
                .split("pid=")
                .nth(1)
                .and_then(|p| p.split_whitespace().next()?.parse().ok());
        } else if line.contains("the new process accepts clients") {
            says.ready = true;
        } else if line.contains("hand-over failed")
            || line.contains("could not start a successor")
            || line.contains("no successor started")
        {
            says.failed.get_or_insert_with(|| line.trim().to_string());
        }
    }
    says
}

/// A hand-over that completed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ready {
    pub successor: u32,
    pub signalled: Instant,
    pub ready: Instant,
}

/// The processes of the chain; the last one serves. They stop when this drops.
pub(super) struct Serving {
    first: Option<SluiceProcess>,
    successors: Vec<Successor>,
    log: PathBuf,
}

impl Serving {
    pub(super) fn start(
        bin: &Path,
        config: &Path,
        port: u16,
        log: &Path,
    ) -> anyhow::Result<(Serving, String)> {
        let first = SluiceProcess::start(bin, config, port, log)?;
        let command = first.command.clone();
        Ok((
            Serving {
                first: Some(first),
                successors: Vec::new(),
                log: log.to_path_buf(),
            },
            command,
        ))
    }

    /// The process serving now.
    pub(super) fn pid(&self) -> u32 {
        match self.successors.last() {
            Some(s) => s.pid(),
            None => self.first.as_ref().map_or(0, SluiceProcess::pid),
        }
    }

    /// SIGUSR2 to the serving process, then waits until its successor is ready, for at
    /// most `timeout` (the configuration's `ready_timeout`, and a margin). When it fails,
    /// a successor that was started is stopped and the old process still serves.
    pub(super) fn hand_over(&mut self, timeout: Duration) -> anyhow::Result<Ready> {
        let successors = self.successors.len();
        let ready = self.signal_and_wait(timeout);
        if ready.is_err() {
            while self.successors.len() > successors {
                if let Some(mut s) = self.successors.pop() {
                    s.stop();
                }
            }
        }
        ready
    }

    fn signal_and_wait(&mut self, timeout: Duration) -> anyhow::Result<Ready> {
        let old = self.pid();
        let offset = std::fs::metadata(&self.log).map_or(0, |m| m.len());
        let signalled = Instant::now();
        sandbox::send_signal(old, "USR2").context("sending SIGUSR2 to the serving Sluice")?;
        let mut adopted = None;
        loop {
            let says = read_log_says(&self.log_since(offset));
            if let (Some(pid), None) = (says.successor, adopted) {
                self.successors.push(Successor::adopt(pid)?);
                adopted = Some(pid);
            }
            if let Some(why) = says.failed {
                bail!("{why}");
            }
            match adopted {
                Some(successor) if says.ready => {
                    return Ok(Ready {
                        successor,
                        signalled,
                        ready: Instant::now(),
                    })
                }
                Some(pid) if !sandbox::process_alive(pid) => {
                    bail!(
                        "the successor (pid {pid}) exited before it was ready; {}",
                        self.tail()
                    )
                }
                None if signalled.elapsed() > SPAWN_TIMEOUT => bail!(
                    "no successor started within {SPAWN_TIMEOUT:?} of SIGUSR2; {}",
                    self.tail()
                ),
                _ => {}
            }
            if !sandbox::process_alive(old) {
                bail!(
                    "the serving Sluice (pid {old}) exited during the hand-over; {}",
                    self.tail()
                );
            }
            if signalled.elapsed() > timeout {
                bail!(
                    "the successor was not ready within {timeout:?}; {}",
                    self.tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    fn log_since(&self, offset: u64) -> String {
        let Ok(mut file) = std::fs::File::open(&self.log) else {
            return String::new();
        };
        let mut text = String::new();
        if file.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        format!("last lines of {}:\n{}", self.log.display(), tail(&text, 10))
    }

    /// Whether the serving process still runs; the error has the log's last lines.
    pub(super) fn check(&self) -> anyhow::Result<()> {
        let pid = self.pid();
        if !sandbox::process_alive(pid) {
            bail!("the serving Sluice (pid {pid}) exited; {}", self.tail());
        }
        Ok(())
    }

    /// Stops every process of the chain still running, the newest first.
    pub(super) fn stop(mut self) {
        while let Some(mut s) = self.successors.pop() {
            s.stop();
        }
        if let Some(first) = self.first.take() {
            first.stop();
        }
    }
}

/// Waits, on a thread of its own, for process `pid` to exit, for at most `bound` after
/// `from`; how long after `from` it exited, or `None` if it still ran then.
pub(super) fn watch_exit(pid: u32, from: Instant, bound: Duration) -> JoinHandle<Option<Duration>> {
    std::thread::spawn(move || loop {
        if !sandbox::process_alive(pid) {
            return Some(from.elapsed());
        }
        if from.elapsed() > bound {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    })
}

/// VmRSS of a process, in MiB.
pub(super) fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_names_the_successor_and_when_it_is_ready() {
        let started = "2026-11-29T04:00:00Z  INFO sluice::server::stop: SIGUSR2: started a \
                       successor to take the listeners over pid=4242\n";
        let says = read_log_says(started);
        assert_eq!((says.successor, says.ready), (Some(4242), false));
        let ready = format!(
            "{started}2026-11-29T04:00:01Z  INFO sluice::server::handover: hand-over: the new \
             process accepts clients; this one stops accepting, sends its sessions there and \
             drains\n"
        );
        let says = read_log_says(&ready);
        assert_eq!((says.successor, says.ready), (Some(4242), true));
        // A line not yet finished is not read.
        let partial = format!("{started}... hand-over: the new process accepts clients");
        assert!(!read_log_says(&partial).ready);
        let failed = format!(
            "{started}2026-11-29T04:00:01Z  WARN sluice::server::handover: hand-over failed: \
             this process goes on serving everything error=bad config\n"
        );
        assert!(read_log_says(&failed)
            .failed
            .unwrap()
            .contains("bad config"));
    }
}
