//! An upgrade: this process starts its successor (the binary at its path, with its
//! arguments and `--take-over`) and learns how the take-over ended, for whoever asked:
//! SIGUSR2 (the log says), `POST /v1/upgrade` and `sluice upgrade` (which wait for the
//! answer; the latter is what `systemctl reload` runs). One attempt at a time: a request
//! while one runs waits for that one.

use super::handover::{OfferEvents, Successor};
use crate::frontend::Frontend;
use parking_lot::{Condvar, Mutex};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How an upgrade ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The new process (`pid`) accepts on the listeners; this one moves its sessions
    /// there and stops.
    HandedOver {
        pid: u32,
    },
    Failed(String),
}

impl Outcome {
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Outcome::HandedOver { pid } => serde_json::json!({"upgraded": true, "pid": pid}),
            Outcome::Failed(e) => serde_json::json!({"upgraded": false, "error": e}),
        }
    }
}

enum State {
    Idle,
    Running { pid: u32 },
    Ended { pid: u32, outcome: Outcome },
}

pub struct Upgrades {
    /// Read at start: an upgrade replaces the file, and the successor is the new one at
    /// the same path.
    exe: Result<PathBuf, String>,
    /// `[handover] socket` is set.
    enabled: bool,
    ready_timeout: Duration,
    fe: Arc<Frontend>,
    state: Mutex<State>,
    changed: Condvar,
}

impl Upgrades {
    pub(super) fn new(fe: &Arc<Frontend>, enabled: bool, ready_timeout: Duration) -> Upgrades {
        Upgrades {
            exe: std::env::current_exe().map_err(|e| e.to_string()),
            enabled,
            ready_timeout,
            fe: fe.clone(),
            state: Mutex::new(State::Idle),
            changed: Condvar::new(),
        }
    }

    /// Starts a successor unless one is starting already: its pid.
    pub fn begin(self: &Arc<Self>) -> Result<u32, String> {
        if !self.enabled {
            return Err("no [handover] socket configured: no successor started".into());
        }
        let mut state = self.state.lock();
        match &*state {
            State::Running { pid } => return Ok(*pid),
            State::Ended {
                outcome: Outcome::HandedOver { pid },
                ..
            } => return Err(format!("this process already handed over to {pid}")),
            _ => {}
        }
        let exe = self.exe.clone()?;
        let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        if !args.iter().any(|a| a == "--take-over") {
            args.push("--take-over".into());
        }
        // Its output goes where this process's does: the journal, or the log file.
        let mut child = std::process::Command::new(&exe)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", exe.display()))?;
        let pid = child.id();
        *state = State::Running { pid };
        tracing::info!(pid, "started a successor to take the listeners over");
        let upgrades = Arc::downgrade(self);
        std::thread::spawn(move || {
            // Reaped whenever it exits while this process runs: a failed start ends the
            // attempt.
            let status = child.wait();
            if let Some(u) = upgrades.upgrade() {
                let why = match status {
                    Ok(s) => {
                        format!("the new process exited ({s}) before taking over; its log says why")
                    }
                    Err(e) => format!("the new process could not be waited for: {e}"),
                };
                u.end(Some(pid), Outcome::Failed(why));
            }
        });
        Ok(pid)
    }

    /// Starts a successor (or joins the one starting) and waits for how it ended.
    pub fn run(self: &Arc<Self>) -> Outcome {
        let pid = match self.begin() {
            Ok(pid) => pid,
            Err(e) => return Outcome::Failed(e),
        };
        // The successor's own start (its servers, its pools) comes before the
        // hand-over's `ready_timeout`.
        let deadline = Instant::now() + self.ready_timeout + Duration::from_secs(30);
        let mut state = self.state.lock();
        loop {
            match &*state {
                State::Ended { pid: p, outcome } if *p == pid => return outcome.clone(),
                State::Running { pid: p } if *p == pid => {}
                _ => return Outcome::Failed("another upgrade took its place".into()),
            }
            if self.changed.wait_until(&mut state, deadline).timed_out() {
                return Outcome::Failed(format!(
                    "the new process ({pid}) did not take over in time"
                ));
            }
        }
    }

    /// The attempt of `pid` (the running one, when unknown) ended.
    fn end(&self, pid: Option<u32>, outcome: Outcome) {
        let mut state = self.state.lock();
        let State::Running { pid: running } = *state else {
            return;
        };
        if pid.is_some_and(|p| p != running) {
            return;
        }
        if let Outcome::Failed(why) = &outcome {
            tracing::warn!(pid = running, error = %why, "upgrade failed: this process goes on serving everything");
        }
        *state = State::Ended {
            pid: running,
            outcome,
        };
        self.changed.notify_all();
    }

    /// The offer's hand-over completed, to `successor`.
    pub(super) fn handed_over(&self, successor: &Successor) {
        if let Some(pid) = successor.pid {
            self.end(Some(pid), Outcome::HandedOver { pid });
        }
    }
}

impl OfferEvents for Arc<Upgrades> {
    fn next_id(&self) -> u32 {
        self.fe.id_counter()
    }

    fn failed(&self, pid: Option<u32>, reason: &str) {
        // Only a failure of the process this one started ends its attempt: anything
        // else on the socket (a stray client) does not.
        if pid.is_some() {
            self.end(pid, Outcome::Failed(reason.to_owned()));
        }
    }

    fn upgrade_asked(&self, mut stream: UnixStream) {
        let upgrades = self.clone();
        std::thread::spawn(move || {
            let outcome = upgrades.run();
            let mut line = outcome.to_json().to_string();
            line.push('\n');
            let _ = stream.write_all(line.as_bytes());
        });
    }
}
