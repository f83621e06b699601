//! The cache stage of the statement pipeline: a read is looked up once, right after
//! classify. One the cache holds an answer for (current, or stale within its rule's
//! window and refreshed by another session) is answered from the stored packets: no
//! routing, no lease, no backend connection brought in line, no server round trip.
//! Otherwise the lookup's finding goes on with the statement as a [`CacheStep`] (a miss
//! with its key, or a stale entry this session refreshes), and everything else (writes,
//! statements the lookup can't key) goes on down the pipeline to
//! [`Session::forward_cached`].

use super::step::{CacheStep, Keyed, Refresh};
use super::{eligible, stmt::push_bound_params, CacheState, StmtKind, MAX_BUFFERED};
use crate::analytics::CacheUse;
use crate::cache::{self, Lookup};
use crate::classify::sql::{self, Hints};
use crate::error::SessionError;
use crate::frontend::session::relay::Relayed;
use crate::frontend::session::{Session, Statement};

use crate::stats::Stats;
use bytes::Buf;
use sluice_wire::command::Command;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::statement::Execute;
use std::borrow::Cow;

impl Session {
    /// Answers the command at the front of the client buffer (`len` bytes of payload)
    /// from the cache when it is a read that an entry answers. `Some(how it ended)` when
    /// answered; `None` when the command goes on down the pipeline, untouched in the
    /// buffer, with what the lookup found in `self.stmt.cache_step`.
    pub(in crate::frontend::session) async fn answer_from_cache(
        &mut self,
        stmt: &Statement,
    ) -> Result<Option<Relayed>, SessionError> {
        let len = stmt.len;
        let execute = stmt.command == Command::StmtExecute;
        if !execute && stmt.command != Command::Query {
            return Ok(None);
        }
        // The client's id: the packet holds it until multiplexing maps it.
        let id = stmt.client_id;
        let Some(state) = self.cache.as_ref() else {
            return Ok(None);
        };
        let status = self.last_status();
        // A statement whose CONNECTION_ID() was replaced reads as constant but is not.
        if state.prefix.is_none()
            || state.schema.is_none()
            || self.stmt.identity_rewritten
            || !eligible(state, status, Hints::default())
        {
            return Ok(None);
        }
        // A session holding state on its connection (a cursor, long data, locks...)
        // goes the whole way: what the server holds for it must see its statements.
        if self
            .backing
            .mux()
            .is_some_and(|m| m.pin_reason(status).is_some())
        {
            return Ok(None);
        }
        if !self.client.read_whole(len, MAX_BUFFERED).await? {
            return Ok(None);
        }
        let state = self.cache.as_mut().expect("checked above");
        let mut key = std::mem::take(&mut state.key);
        let payload = &self.client.rbuf[HEADER_LEN..HEADER_LEN + len];
        let keyed = if execute {
            id.and_then(|id| execute_key(state, id, payload, &mut key))
        } else {
            query_key(state, payload, &mut key)
        };
        let Some(carries_types) = keyed else {
            state.key = key;
            return Ok(None);
        };
        if self.refused_by_rule(stmt) {
            self.cache.as_mut().expect("checked above").key = key;
            return Ok(None);
        }
        let state = self.cache.as_mut().expect("checked above");
        let prefix_len = state.prefix.as_ref().map_or(0, Vec::len);
        let hashed = crate::cache::Hashed::new(&key);
        let hash = hashed.key_hash();
        let entry = match state.cache.lookup_hashed(hashed) {
            Lookup::Hit(entry)
            | Lookup::Stale {
                entry,
                refresh: false,
            } => {
                state.key = key;
                entry
            }
            Lookup::Stale {
                entry,
                refresh: true,
            } => {
                let refresh = Refresh::new(state.cache.clone(), entry);
                self.stmt.cache_step = CacheStep::Revalidate(
                    Keyed {
                        key,
                        prefix_len,
                        hash,
                    },
                    refresh,
                );
                return Ok(None);
            }
            Lookup::Miss => {
                self.stmt.cache_step = CacheStep::Missed(Keyed {
                    key,
                    prefix_len,
                    hash,
                });
                return Ok(None);
            }
        };
        if let (true, Some(id)) = (execute, id) {
            self.executed_from_cache(id, len, carries_types);
        }
        self.client.rbuf.advance(HEADER_LEN + len);
        self.client.write_all(&entry.response).await?;
        self.cache.as_mut().expect("checked above").served = true;
        Stats::incr(&self.fe.stats.cache_hits);
        self.stmt.cache_use = CacheUse::Hit;
        self.stmt.outcome.rows = entry.rows;
        Ok(Some(Relayed::Done))
    }

    /// A routing rule would refuse the statement: it is not answered before routing,
    /// which gives the rule's error. Only multiplexed sessions are routed.
    fn refused_by_rule(&self, stmt: &Statement) -> bool {
        let Some(mux) = self.backing.mux() else {
            return false;
        };
        let router = self.fe.router.load();
        let rules = router.rules.load();
        if !rules.any_refusing() {
            return false;
        }
        let payload = &self.client.rbuf[HEADER_LEN..HEADER_LEN + stmt.len];
        let text = if stmt.command == Command::StmtExecute {
            match stmt.client_id.and_then(|id| mux.stmt_route(id)) {
                Some((text, _)) => text,
                // A statement multiplexing does not know: left to the pipeline, which
                // answers it with the server's error.
                None => return true,
            }
        } else {
            &payload[1..]
        };
        rules.refuses(&crate::router::rules::Statement {
            text,
            user: &self.user.name,
            schema: mux.schema.as_deref(),
            client: self.client.peer.ip(),
        })
    }

    /// An execute answered by the cache still binds the types it carries, for the
    /// executes after it that leave them out; the server's statement never saw them.
    fn executed_from_cache(&mut self, id: u32, len: usize, carries_types: bool) {
        let payload = &self.client.rbuf[HEADER_LEN..HEADER_LEN + len];
        if carries_types {
            let state = self.cache.as_mut().expect("only called with a cache");
            if let Some(stmt) = state.stmts.get_mut(&id) {
                stmt.server_has_types = false;
            }
        }
        if let Some(mux) = self.backing.mux_mut() {
            mux.note_execute(id, payload);
        }
    }
}

/// The cache key of a text statement into `key`; `None` when it is not to be looked up
/// (hints that skip or wipe the cache). `Some(false)`: keyed (carries no types).
fn query_key(state: &CacheState, payload: &[u8], key: &mut Vec<u8>) -> Option<bool> {
    let text = &payload[1..];
    // A vectorised search for "/*" first: most statements have no comment.
    let hints = sql::hints(text);
    if hints.nocache || hints.wipe {
        return None;
    }
    let stripped: Cow<'_, [u8]> = if hints == Hints::default() {
        Cow::Borrowed(text)
    } else {
        sql::strip_hints(text)
    };
    let prefix = state.prefix.as_deref()?;
    cache::key_head(key, prefix, Command::Query as u8, &stripped);
    Some(false)
}

/// The cache key of an execute into `key`; `None` when it is not a cacheable read whose
/// parameters are all in the packet. `Some(carries_types)` when keyed.
fn execute_key(state: &mut CacheState, id: u32, payload: &[u8], key: &mut Vec<u8>) -> Option<bool> {
    let prefix = state.prefix.as_deref()?;
    let stmt = state.stmts.get_mut(&id)?;
    if !matches!(stmt.kind, StmtKind::Read(_)) || stmt.long_data {
        return None;
    }
    let execute = Execute::parse(payload, stmt.params)?;
    if execute.opens_cursor() {
        return None;
    }
    cache::key_head(key, prefix, Command::StmtExecute as u8, &stmt.text);
    push_bound_params(key, &execute, stmt).then_some(execute.types.is_some())
}
