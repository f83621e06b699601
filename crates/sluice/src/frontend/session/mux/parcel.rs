//! A multiplexed session's state as it goes to a successor process at a hand-over
//! (`session/moving.rs`): everything `Mux` keeps that outlives a statement, taken only
//! when the session holds no connection and nothing pins it, so that what the servers
//! hold of it is nothing and the new process can bring any connection in line with it.

use super::{ClientStmt, Mux};
use crate::backend::{PoolKey, Vars};
use crate::classify::effects::Effects;
use crate::classify::facts::TextFacts;
use serde::{Deserialize, Serialize};
use sluice_wire::session_track::Tracking;
use sluice_wire::StatusFlags;
use std::sync::Arc;

#[derive(Debug, Serialize, Deserialize)]
pub(in crate::frontend::session) struct MuxParcel {
    schema: Option<Vec<u8>>,
    vars: Vec<(Vec<u8>, Vec<u8>)>,
    user_vars: Vec<(Vec<u8>, String)>,
    status: u16,
    last_insert_id: u64,
    wrapped_rows: Option<i64>,
    stmts: Vec<StmtParcel>,
    next_stmt: u32,
    translate_ok: bool,
    lenenc_info: bool,
    /// Read-your-writes: the session's latest write, as `domain-server-seq,...`.
    last_gtid: Option<String>,
    /// The Galera node of its last write, by name, when writes spread.
    home: Option<String>,
    /// How long ago it started (login or last reset): its grants are checked against
    /// connections' logins by it.
    started_ms_ago: u64,
    tracking: Option<TrackingParcel>,
    /// The values the session's unset variables have: its first connection's globals.
    globals: Option<Vec<(Vec<u8>, Vec<u8>)>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StmtParcel {
    id: u32,
    key: Vec<u8>,
    text: Vec<u8>,
    params: u16,
    types: Option<Vec<u8>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TrackingParcel {
    system_variables: Vec<u8>,
    schema: bool,
    state_change: bool,
    transaction_info: Vec<u8>,
}

fn pairs(vars: &Vars) -> Vec<(Vec<u8>, Vec<u8>)> {
    vars.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect()
}

fn vars(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Vars {
    let mut vars = Vars::new();
    for (n, v) in pairs {
        vars.insert(n, v);
    }
    vars
}

impl Mux {
    /// Why the session's state can't leave this process now, if anything holds it
    /// here: a pin (a transaction, temporary tables, locks...), or a statement's part
    /// not finished, or state of several shards.
    pub(in crate::frontend::session) fn unmovable(&self) -> Option<&'static str> {
        if let Some(r) = self.pin_reason(self.status) {
            return Some(r.as_str());
        }
        if self.preparing.is_some() || self.prepared.is_some() || self.bound.is_some() {
            return Some("a statement in flight");
        }
        if self.lid_dirty || self.hold_until.is_some() {
            return Some("a connection held");
        }
        if self.shard.is_some()
            || !self.shard_state.is_empty()
            || self.deferred_begin.is_some()
            || self.spread.is_some()
        {
            return Some("shards");
        }
        None
    }

    /// The session's state, once [`Mux::unmovable`] says nothing holds it here.
    pub(in crate::frontend::session) fn pack(&self) -> MuxParcel {
        let mut stmts: Vec<StmtParcel> = self
            .stmts
            .iter()
            .map(|(id, s)| StmtParcel {
                id: *id,
                key: s.key.key().to_vec(),
                text: s.text.to_vec(),
                params: s.params,
                types: s.types.clone(),
            })
            .collect();
        stmts.sort_by_key(|s| s.id);
        MuxParcel {
            schema: self.schema.clone(),
            vars: pairs(&self.vars),
            user_vars: (self.user_vars.iter())
                .map(|(n, v)| (n.to_vec(), v.clone()))
                .collect(),
            status: self.status.0,
            last_insert_id: self.last_insert_id,
            wrapped_rows: self.wrapped_rows,
            stmts,
            next_stmt: self.next_stmt,
            translate_ok: self.translate_ok,
            lenenc_info: self.lenenc_info,
            last_gtid: self.last_gtid.as_ref().map(|g| g.to_string()),
            home: self.home.as_ref().map(|m| m.name().to_owned()),
            started_ms_ago: self.started.elapsed().as_millis() as u64,
            tracking: self.tracking.as_ref().map(|t| TrackingParcel {
                system_variables: t.system_variables.to_vec(),
                schema: t.schema,
                state_change: t.state_change,
                transaction_info: t.transaction_info.to_vec(),
            }),
            globals: self.globals.as_ref().map(|g| pairs(&g.values)),
        }
    }

    /// The state a session brought from the process before: its statements held
    /// again here (each connection prepares them where an execute lands), and its grants
    /// learnt again at its next statement. `home`: the node of that name here.
    pub(in crate::frontend::session) fn unpack(
        p: MuxParcel,
        key: PoolKey,
        facts: &mut TextFacts,
        home: impl Fn(&str) -> Option<Arc<crate::router::Member>>,
    ) -> Mux {
        let mut mux = Mux::new(key, p.schema, p.translate_ok, p.lenenc_info);
        mux.vars = vars(p.vars);
        mux.user_vars = (p.user_vars.into_iter())
            .map(|(n, v)| (n.into_boxed_slice(), v))
            .collect();
        mux.status = StatusFlags(p.status);
        mux.last_insert_id = p.last_insert_id;
        mux.wrapped_rows = p.wrapped_rows;
        for s in p.stmts {
            let effects = crate::classify::effects::effects(&s.text);
            let plain_read =
                crate::router::rules::is_plain_read(&s.text, &effects, facts.analysis(&s.text));
            let names_tracking = effects.touches_session_tracking;
            let effects = effects.locks_only();
            mux.stmts.insert(
                s.id,
                ClientStmt {
                    key: crate::backend::refs().hold(s.key.into_boxed_slice()),
                    text: s.text.into_boxed_slice(),
                    params: s.params,
                    types: s.types,
                    plain_read,
                    effects: (effects != Effects::default()).then(|| Box::new(effects)),
                    names_tracking,
                },
            );
        }
        mux.next_stmt = p.next_stmt.max(1);
        mux.last_gtid = p
            .last_gtid
            .as_deref()
            .and_then(crate::router::gtid::GtidPos::parse);
        mux.home = p.home.as_deref().and_then(home);
        mux.started = std::time::Instant::now()
            .checked_sub(std::time::Duration::from_millis(p.started_ms_ago))
            .unwrap_or_else(std::time::Instant::now);
        mux.tracking = p.tracking.map(|t| {
            Arc::new(Tracking {
                system_variables: t.system_variables.into_boxed_slice(),
                schema: t.schema,
                state_change: t.state_change,
                transaction_info: t.transaction_info.into_boxed_slice(),
            })
        });
        mux.globals = p
            .globals
            .map(|g| Arc::new(crate::backend::Globals::carried(vars(g))));
        mux
    }
}
