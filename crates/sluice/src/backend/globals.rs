//! The values a new session takes from the server's globals, per connection: a
//! multiplexed session's variables it never set are those of the connection it started
//! on, so a connection that predates a `SET GLOBAL` must not give its values to a
//! session that starts after it, and one that follows it must not give the new values
//! to a session that started before.

use super::conn::{BackendConn, Vars, LOGIN_VARS};
use crate::error::{BackendError, RefusedAsNone};
use parking_lot::Mutex;
use sluice_wire::command::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Session variables whose value does not simply come from the global of the same name,
/// or that a session can't set back without a privilege or at all: left out.
fn inherited(name: &str) -> bool {
    const SKIPPED: &[&str] = &[
        // Set by the login (the client's character set) or by the schema.
        "character_set_database",
        "collation_database",
        // Read-only in a session.
        "max_allowed_packet",
        "max_user_connections",
        "net_buffer_length",
        "max_relay_log_size",
        "sql_slave_skip_counter",
        // Need SUPER or BINLOG ADMIN to set in a session.
        "server_id",
        "gtid_domain_id",
        "sql_log_bin",
        "sql_log_off",
        "innodb_tmpdir",
        // Reads as DEFAULT, which it can't be set to.
        "system_versioning_asof",
    ];
    !LOGIN_VARS.contains(&name)
        && !SKIPPED.contains(&name)
        // Sluice's own settings on multiplexed connections; followed apart.
        && !name.starts_with("session_track_")
        && !name.starts_with("binlog_")
        && !name.starts_with("wsrep_")
}

/// The inherited variables of one server and the statements that read them, built once.
pub struct Names {
    names: Vec<Box<[u8]>>,
    /// A digest of the session values, then each of them.
    session_sql: String,
    /// The same digest of the global values: one short row for the check every new
    /// session makes (a row of every value costs its column definitions, per session).
    global_sql: String,
}

/// Inherited values as a session started with them: one per distinct set of values seen
/// on a server, shared by the connections and sessions that started with it.
#[derive(Debug)]
pub struct Globals {
    /// Increases with every new set of values seen on any server.
    pub generation: u64,
    pub values: Vars,
    /// The server's digest of the values (see [`Names`]).
    digest: Option<Vec<u8>>,
}

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

impl Globals {
    /// Values a session brought from the process before a hand-over: a generation of
    /// this process's, which no connection here has, so the first one it uses is
    /// compared with them value by value.
    pub fn carried(values: Vars) -> Globals {
        Globals {
            generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed),
            values,
            digest: None,
        }
    }
}

/// What Sluice knows of one server's globals: which variables are inherited (learnt
/// from the first connection that starts tracking) and the latest values seen.
#[derive(Default)]
pub struct GlobalsWatch {
    /// `Some(None)`: the server can't tell (no `information_schema.SYSTEM_VARIABLES`).
    names: Mutex<Option<Option<Arc<Names>>>>,
    current: Mutex<Option<Arc<Globals>>>,
    /// The server's digest of its globals as last read, and when the read began:
    /// logins within [`RECHECK`] of it take it as is rather than ask again.
    checked: Mutex<Option<(Instant, Option<Vec<u8>>)>>,
}

/// How long a read of a server's globals answers for new sessions. The read costs the
/// server about as much as a short query per login (it reads every inherited global),
/// which would double the cost of a connect-per-request client; a `SET GLOBAL` made
/// through Sluice is seen at once anyway ([`GlobalsWatch::changed`]), so this bounds only
/// how late a change made on the server directly reaches new sessions.
pub const RECHECK: Duration = Duration::from_millis(100);

impl GlobalsWatch {
    /// The shared snapshot of these values: the latest one when they are the same,
    /// else a new one that becomes the latest.
    fn intern(&self, values: Vars, digest: Option<Vec<u8>>) -> Arc<Globals> {
        let mut current = self.current.lock();
        if let Some(c) = current.as_ref().filter(|c| c.values == values) {
            return c.clone();
        }
        let g = Arc::new(Globals {
            generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed),
            values,
            digest,
        });
        *current = Some(g.clone());
        g
    }

    /// A statement that may have changed the server's globals ran: the next login reads
    /// them again.
    pub fn changed(&self) {
        *self.checked.lock() = None;
    }

    /// The server's digest read since `now - RECHECK`, if any.
    fn recent(&self, now: Instant) -> Option<Option<Vec<u8>>> {
        self.checked
            .lock()
            .as_ref()
            .filter(|(at, _)| now.duration_since(*at) < RECHECK)
            .map(|(_, digest)| digest.clone())
    }

    /// Whether `g` is the latest set of values seen on this server.
    pub fn is_current(&self, g: &Arc<Globals>) -> bool {
        self.current
            .lock()
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, g))
    }
}

impl BackendConn {
    async fn inherited_names(&mut self) -> Result<Option<Arc<Names>>, BackendError> {
        if let Some(known) = self.server.globals.names.lock().clone() {
            return Ok(known);
        }
        let sql = "SELECT LOWER(VARIABLE_NAME) FROM information_schema.SYSTEM_VARIABLES \
                   WHERE VARIABLE_SCOPE = 'SESSION' ORDER BY 1";
        let names = match self.query_column(sql).await {
            Ok(rows) => {
                let names: Vec<Box<[u8]>> = rows
                    .into_iter()
                    .filter(|n| std::str::from_utf8(n).is_ok_and(inherited))
                    .map(Vec::into_boxed_slice)
                    .collect();
                let list = |scope: &str| {
                    let refs: Vec<String> = names
                        .iter()
                        .map(|n| format!("@@{scope}.{}", String::from_utf8_lossy(n)))
                        .collect();
                    refs.join(", ")
                };
                let digest = |scope: &str| format!("MD5(CONCAT_WS(0x1f, {}))", list(scope));
                let session_sql = format!("SELECT {}, {}", digest("session"), list("session"));
                let global_sql = format!("SELECT {}", digest("global"));
                (!names.is_empty()).then(|| {
                    Arc::new(Names {
                        session_sql,
                        global_sql,
                        names,
                    })
                })
            }
            Err(failed) => {
                let err = failed.answered()?;
                tracing::debug!(server = %self.server.name, %err, "session variables not listed: new sessions inherit the connection's");
                None
            }
        };
        *self.server.globals.names.lock() = Some(names.clone());
        Ok(names)
    }

    /// Learns the inherited values of this connection, right after its login or reset
    /// (before anything set them): its [`BackendConn::globals`].
    pub(crate) async fn read_globals(&mut self) -> Result<(), BackendError> {
        self.globals = None;
        let Some(names) = self.inherited_names().await? else {
            return Ok(());
        };
        let row = self.query_row(&names.session_sql).await.refused_as_none()?;
        if let Some(Some(mut row)) = row {
            let digest = if row.is_empty() { None } else { row.remove(0) };
            // SQL NULL values are left out: such a variable goes back to DEFAULT.
            let values = names
                .names
                .iter()
                .zip(row)
                .filter_map(|(n, v)| Some((n.clone(), v?.into_boxed_slice())))
                .collect();
            self.globals = Some(self.server.globals.intern(values, digest));
        }
        Ok(())
    }

    /// Whether the server's globals now differ from what this connection started with:
    /// a new session would not get this connection's values.
    pub async fn globals_moved(&mut self) -> Result<bool, BackendError> {
        let (Some(mine), Some(Some(names))) = (
            self.globals.clone(),
            self.server.globals.names.lock().clone(),
        ) else {
            return Ok(false);
        };
        let started = Instant::now();
        let now = match self.server.globals.recent(started) {
            Some(digest) => digest,
            None => match self
                .query_scalar(&names.global_sql)
                .await
                .refused_as_none()?
            {
                Some(digest) => {
                    *self.server.globals.checked.lock() = Some((started, digest.clone()));
                    digest
                }
                None => return Ok(false),
            },
        };
        Ok(mine.digest.is_some() && now != mine.digest)
    }

    /// Gives this connection the session values a new session would get now
    /// (COM_RESET_CONNECTION re-reads the globals), dropping what sessions left on it.
    pub async fn renew(&mut self) -> Result<(), BackendError> {
        let reset = self.simple_command(&[Command::ResetConnection as u8]);
        if let Err(failed) = reset.await {
            return Err(self.rejected(failed));
        }
        self.stmts.forget_all();
        self.vars.clear();
        self.user_vars.clear();
        self.last_insert_id = Some(0);
        // The reset turned tracking off.
        self.start_tracking().await
    }

    /// Whether a newer set of globals than this connection's has been seen on its server.
    pub fn globals_stale(&self) -> bool {
        self.globals
            .as_ref()
            .is_some_and(|g| !self.server.globals.is_current(g))
    }
}

/// Makes the values `from` gave to variables a session never set explicit, where `to`
/// differs: the session keeps them on a connection that started with `to`.
pub fn keep_inherited(vars: &mut Vars, from: &Globals, to: &Globals) {
    for (name, value) in from.values.iter() {
        if to.values.get(name) != Some(value) && !vars.contains_key(name) {
            vars.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globals(pairs: &[(&str, &str)]) -> Globals {
        Globals {
            generation: 0,
            digest: None,
            values: pairs
                .iter()
                .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
                .collect(),
        }
    }

    #[test]
    fn a_session_keeps_what_it_started_with_unless_it_set_it() {
        let old = globals(&[
            ("sql_mode", "STRICT"),
            ("wait_timeout", "28800"),
            ("a", "1"),
        ]);
        let new = globals(&[("sql_mode", "ANSI"), ("wait_timeout", "1234"), ("a", "1")]);
        let mut vars = Vars::new();
        vars.insert("wait_timeout", "5");
        keep_inherited(&mut vars, &old, &new);
        let got: Vec<(&[u8], &[u8])> = vars.iter().collect();
        assert_eq!(
            got,
            vec![(&b"sql_mode"[..], &b"STRICT"[..]), (b"wait_timeout", b"5")]
        );
    }

    #[test]
    fn what_the_handshake_or_a_privilege_sets_is_not_inherited() {
        assert!(inherited("sql_mode"));
        assert!(inherited("time_zone"));
        assert!(!inherited("character_set_client"));
        assert!(!inherited("session_track_schema"));
        assert!(!inherited("binlog_row_image"));
        assert!(!inherited("sql_log_bin"));
    }
}
