//! The cache's side of a session that moves to a successor process at a hand-over: what
//! its prepared statements read or write, so that their executes are served from the
//! cache there as here. Taken only when nothing is pending (no transaction) and no
//! temporary table hides a real one: the session's state holds nothing else.

use super::{CacheState, Prepared, StmtKind};
use crate::classify::sql::TableRef;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
pub(in crate::frontend::session) struct CacheParcel {
    /// The default schema as the cache knew it; `None`: unknown.
    schema: Option<Option<String>>,
    stmts: Vec<StmtParcel>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StmtParcel {
    id: u32,
    text: Vec<u8>,
    params: u16,
    kind: KindParcel,
    types: Option<Vec<u8>>,
    server_has_types: bool,
}

type Tables = Vec<(String, String)>;

#[derive(Debug, Serialize, Deserialize)]
enum KindParcel {
    Read(Tables),
    Write(Option<Tables>),
    SessionChange,
    Other,
}

fn tables<'a>(t: impl IntoIterator<Item = &'a TableRef>) -> Tables {
    t.into_iter()
        .map(|t| (t.schema.clone(), t.table.clone()))
        .collect()
}

fn refs(t: Tables) -> Vec<TableRef> {
    t.into_iter()
        .map(|(schema, table)| TableRef { schema, table })
        .collect()
}

impl CacheState {
    /// Whether what the session keeps here is only what [`CacheState::pack`] takes.
    pub(in crate::frontend::session) fn movable(&self) -> bool {
        !self.temp_tables && self.pending.is_empty() && !self.stmts.values().any(|p| p.long_data)
    }

    pub(in crate::frontend::session) fn pack(&self) -> CacheParcel {
        let mut stmts: Vec<StmtParcel> = (self.stmts.iter())
            .map(|(id, p)| StmtParcel {
                id: *id,
                text: p.text.to_vec(),
                params: p.params,
                kind: match &p.kind {
                    StmtKind::Read(t) => KindParcel::Read(tables(t.iter())),
                    StmtKind::Write(t) => KindParcel::Write(t.as_ref().map(tables)),
                    StmtKind::SessionChange => KindParcel::SessionChange,
                    StmtKind::Other => KindParcel::Other,
                },
                types: p.types.clone(),
                server_has_types: p.server_has_types,
            })
            .collect();
        stmts.sort_by_key(|s| s.id);
        CacheParcel {
            schema: self.schema.clone(),
            stmts,
        }
    }

    /// Takes a moved session's side of the cache; its settings are probed again at its
    /// first read (the key prefix depends on this process's view of them).
    pub(in crate::frontend::session) fn unpack(&mut self, p: CacheParcel) {
        self.schema = p.schema;
        for s in p.stmts {
            let kind = match s.kind {
                KindParcel::Read(t) => StmtKind::Read(refs(t).into()),
                KindParcel::Write(t) => StmtKind::Write(t.map(refs)),
                KindParcel::SessionChange => StmtKind::SessionChange,
                KindParcel::Other => StmtKind::Other,
            };
            self.stmts.insert(
                s.id,
                Prepared {
                    text: Bytes::from(s.text),
                    params: s.params,
                    kind,
                    types: s.types,
                    long_data: false,
                    server_has_types: s.server_has_types,
                    shape: None,
                    rule: None,
                },
            );
        }
    }
}
