//! The throttle of the flow-control part: `LOCK TABLES <schema>.t1 READ` on one node,
//! held for a bounded time by a client the benchmark keeps.
//!
//! Why a table lock: Galera's applier on that node must wait for it before it applies
//! the others' inserts (an applier waits for an explicit lock rather than aborting its
//! holder), so the node stays synced (`wsrep_local_state` 4) while its receive queue
//! fills past `gcs.fc_limit`, and it asks the whole cluster to pause: the lagging node
//! flow control exists for. `FLUSH TABLES WITH READ LOCK` would not do: MariaDB 10.11
//! desyncs a node under it (state 2), a desynced node sends no flow control at all, and
//! DDL replicated to it meanwhile fails ("Aborting TOI: Replication paused on node for
//! FTWRL").
//!
//! The benchmark creates the table itself before mysqlslap starts (mysqlslap then only
//! inserts, see [`crate::mysqlslap::SlapCommand::insert_into_existing`]), so the lock is
//! granted before the first insert however fast the machine. The client first reads the
//! table with `wsrep_sync_wait`, which waits inside the server until the node has
//! applied the CREATE TABLE, takes the lock, holds it with a server-side `SLEEP` for
//! exactly the time asked and releases it. Markers on its output say when each happened.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sluice_sandbox::{self as sandbox, MariaDb};

/// The table mysqlslap fills (see [`crate::mysqlslap::CREATE_TABLE`]).
pub(super) const TABLE: &str = "t1";
/// How long LOCK TABLES may wait for transactions already writing to the table there.
const LOCK_WAIT_SECS: u32 = 10;
/// How long the lock may take to be granted: the causal wait (Galera's own bound,
/// `repl.causal_read_timeout`, is 30 s) and then the lock's.
const TAKE_TIMEOUT: Duration = Duration::from_secs(45);
/// How long the client gets to end once the lock is released or abandoned.
const END_TIMEOUT: Duration = Duration::from_secs(20);

const LOCKED: &str = "sluice-bench-locked";
const UNLOCKED: &str = "sluice-bench-unlocked";

/// What the client printed, and when.
enum Event {
    Connection(u64),
    Locked,
    Unlocked,
}

/// The client holding (or about to hold) the lock. Dropping it kills the client.
pub(super) struct TableLock {
    child: Child,
    events: mpsc::Receiver<(Event, Instant)>,
    connection: Option<u64>,
    pub(super) locked: Option<Instant>,
    pub(super) unlocked: Option<Instant>,
    hold: Duration,
}

/// The client's script: the causal wait for the table, the lock, the hold, the release.
fn script(schema: &str, hold: Duration) -> String {
    format!(
        "SELECT CONNECTION_ID();\n\
         SET SESSION wsrep_sync_wait = 1;\n\
         SELECT 1 FROM `{schema}`.`{TABLE}` LIMIT 0;\n\
         SET SESSION wsrep_sync_wait = 0;\n\
         SET SESSION lock_wait_timeout = {LOCK_WAIT_SECS};\n\
         LOCK TABLES `{schema}`.`{TABLE}` READ;\n\
         SELECT '{LOCKED}';\n\
         DO SLEEP({});\n\
         UNLOCK TABLES;\n\
         SELECT '{UNLOCKED}';\n",
        hold.as_secs_f64()
    )
}

impl TableLock {
    /// Starts the client on `node` and returns once it holds the lock on the table in
    /// `schema` (a name of letters, digits and underscores), which the caller has
    /// created; the client releases it `hold` after it was granted. Its errors go to
    /// `log`.
    pub(super) fn take(
        node: &MariaDb,
        schema: &str,
        hold: Duration,
        log: &Path,
    ) -> anyhow::Result<TableLock> {
        let stderr = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut client = node.admin_client()?;
        // Unbuffered: each marker must come out as soon as its statement is done.
        client
            .args(["--batch", "--unbuffered", "--skip-column-names"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = client.spawn().context("starting the mariadb client")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut stdin = child.stdin.take().context("no stdin")?;
        let (tx, events) = mpsc::channel();
        // The whole script at once: the client runs it statement by statement and ends
        // after the last (or at the first error).
        let sent = stdin
            .write_all(script(schema, hold).as_bytes())
            .and_then(|()| stdin.flush());
        drop(stdin);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let event = match line.trim() {
                    LOCKED => Event::Locked,
                    UNLOCKED => Event::Unlocked,
                    other => match other.parse() {
                        Ok(id) => Event::Connection(id),
                        Err(_) => continue,
                    },
                };
                if tx.send((event, Instant::now())).is_err() {
                    break;
                }
            }
        });
        let mut lock = TableLock {
            child,
            events,
            connection: None,
            locked: None,
            unlocked: None,
            hold,
        };
        sent.context("sending the lock's statements")?;
        let deadline = Instant::now() + TAKE_TIMEOUT;
        while lock.locked.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            match lock.events.recv_timeout(left) {
                Ok((event, at)) => lock.take_event(event, at),
                // The client ended (an error) or the bound passed: finish() says which,
                // and kills a client still waiting.
                Err(_) => {
                    lock.finish(node)?;
                    bail!("the table lock was not granted");
                }
            }
        }
        Ok(lock)
    }

    /// Takes in what the client has printed so far.
    pub(super) fn poll(&mut self) {
        while let Ok((event, at)) = self.events.try_recv() {
            self.take_event(event, at);
        }
    }

    fn take_event(&mut self, event: Event, at: Instant) {
        match event {
            Event::Connection(id) => self.connection = Some(id),
            Event::Locked => self.locked = Some(at),
            Event::Unlocked => self.unlocked = Some(at),
        }
    }

    /// Once the run is over: waits for a held lock's release (at most the rest of its
    /// hold), or ends a client that never got it, killing its connection on `node` so no
    /// pending lock outlives the run. `Err` says what went wrong; the times stay set.
    pub(super) fn finish(&mut self, node: &MariaDb) -> anyhow::Result<()> {
        self.poll();
        if let Some(locked) = self.locked {
            let deadline = locked + self.hold + END_TIMEOUT;
            while self.unlocked.is_none() {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.events.recv_timeout(left) {
                    Ok((event, at)) => self.take_event(event, at),
                    Err(_) => break,
                }
            }
        }
        if self.unlocked.is_none() {
            if let Some(id) = self.connection {
                // Ends its wait for the table or the lock now rather than at the bound.
                let _ = node.execute(&format!("KILL CONNECTION {id}"));
            }
            let _ = self.child.kill();
        }
        let status = sandbox::wait_child(&mut self.child, END_TIMEOUT)?;
        match (self.locked, self.unlocked, status) {
            (Some(_), Some(_), Some(s)) if s.success() => Ok(()),
            (None, _, _) => bail!(
                "LOCK TABLES {TABLE} READ was never granted on {} (its client's errors are \
                 in the lock log)",
                node.addr()
            ),
            (Some(_), None, _) => bail!(
                "the table lock on {} was not released within {:?} of being taken",
                node.addr(),
                self.hold + END_TIMEOUT
            ),
            (_, _, Some(s)) => bail!("the client holding the table lock {s}"),
            (_, _, None) => bail!("the client holding the table lock did not end"),
        }
    }
}

impl Drop for TableLock {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_on_mysqlslaps_table_and_bounded() {
        assert!(crate::mysqlslap::CREATE_TABLE.starts_with(&format!("CREATE TABLE {TABLE} ")));
        let s = script("sluice_slap", Duration::from_secs(3));
        assert!(s.contains("LOCK TABLES `sluice_slap`.`t1` READ;\n"), "{s}");
        assert!(
            s.contains("wsrep_sync_wait = 1;\nSELECT 1 FROM `sluice_slap`.`t1` LIMIT 0;\n"),
            "{s}"
        );
        assert!(s.contains("DO SLEEP(3);\nUNLOCK TABLES;"), "{s}");
        assert!(s.contains("lock_wait_timeout = 10;"), "{s}");
    }
}
