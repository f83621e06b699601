//! Session ids as the server would tell them: `CONNECTION_ID()` in a statement becomes
//! the Sluice id the handshake gave (see `classify::identity`), and process-list
//! results show Sluice sessions under their Sluice ids.

use super::kill::SCREEN_MAX;
use super::Session;
use crate::classify::identity::{self, Processlist};
use crate::error::SessionError;
use bytes::BytesMut;
use sluice_wire::packet::{split_packet, write_packet, HEADER_LEN, MAX_PAYLOAD};
use sluice_wire::resultset::{text_row, text_values, ColumnDef};
use sluice_wire::tracker::ResponseKind;
use std::collections::HashMap;

impl Session {
    /// Rewrites the COM_QUERY or COM_STMT_PREPARE at the front of the client buffer,
    /// whose payload is `len` bytes, if it calls `CONNECTION_ID()` (or a query calls a
    /// `ROW_COUNT()` Sluice answers, `mux/row_count.rs`), and notes whether
    /// its result's ids are to be translated. Returns the payload length to forward.
    pub(super) async fn screen_identity(
        &mut self,
        stmt: &super::Statement,
    ) -> Result<usize, SessionError> {
        let (kind, len) = (stmt.kind, stmt.len);
        self.stmt.processlist = None;
        self.stmt.identity_rewritten = false;
        self.stmt.may_set_global = false;
        if !matches!(kind, ResponseKind::Query | ResponseKind::Prepare) || len > SCREEN_MAX {
            return Ok(len);
        }
        self.client.fill_to(HEADER_LEN + len).await?;
        let text = &self.client.rbuf[HEADER_LEN + 1..HEADER_LEN + len];
        self.stmt.may_set_global = crate::classify::effects::may_set_global(text);
        self.stmt.processlist = match kind {
            ResponseKind::Query => identity::processlist(text).map(ProcesslistIds::new),
            _ => None,
        };
        let own_id = identity::rewrite_connection_id(text, self.id);
        let rows = match kind {
            // The count of a write Sluice wrapped, which the server no longer knows.
            ResponseKind::Query => (self.stmt.prior_rows)
                .and_then(|n| identity::rewrite_row_count(own_id.as_deref().unwrap_or(text), n)),
            _ => None,
        };
        self.stmt.row_count_answered = rows.is_some();
        let Some(rewritten) = rows.or(own_id) else {
            return Ok(len);
        };
        if 1 + rewritten.len() >= MAX_PAYLOAD {
            return Ok(len);
        }
        self.stmt.identity_rewritten = true;
        // What was read of the text before is not what the server will run.
        self.text.forget();
        Ok(self
            .client
            .rewrite_front(len, |payload| [&payload[..1], &rewritten[..]].concat()))
    }
}

/// The server's thread ids in a process-list result, told as the Sluice sessions
/// running on those threads: the session reading it finds its own row under the id it
/// knows, and every Sluice session under the id KILL acts on. Threads that serve no
/// Sluice session (other clients, idle pooled connections) keep the server's ids.
pub(super) struct ProcesslistIds {
    form: Processlist,
    /// Per column of the result being read: it holds thread ids.
    columns: Vec<bool>,
    /// Rows of the current result have started: the next column begins a new result.
    in_rows: bool,
    /// Thread id → session id on the server answering, taken at the first row.
    ids: Option<HashMap<u32, u32>>,
}

impl ProcesslistIds {
    pub(super) fn new(form: Processlist) -> ProcesslistIds {
        ProcesslistIds {
            form,
            columns: Vec::new(),
            in_rows: false,
            ids: None,
        }
    }

    /// A column definition packet (header included) of the result; `extended`: it
    /// carries MariaDB's extended metadata.
    pub(super) fn column(&mut self, packet: &[u8], extended: bool) {
        if std::mem::take(&mut self.in_rows) {
            self.columns.clear();
        }
        let holds_ids = split_packet(packet)
            .and_then(|(_, payload)| ColumnDef::parse(payload, extended).ok())
            .is_some_and(|c| match self.form {
                Processlist::Show => c.org_table.is_empty() && c.name.eq_ignore_ascii_case(b"Id"),
                Processlist::Select => {
                    c.schema.eq_ignore_ascii_case(b"information_schema")
                        && c.org_table.eq_ignore_ascii_case(b"PROCESSLIST")
                        && c.org_name.eq_ignore_ascii_case(b"ID")
                }
            });
        self.columns.push(holds_ids);
    }

    /// A row packet (header included): the packet to send instead, if any id in it is
    /// a Sluice session's. `sessions` gives the thread → session map, asked once.
    pub(super) fn row(
        &mut self,
        packet: &[u8],
        sessions: impl FnOnce() -> HashMap<u32, u32>,
    ) -> Option<Vec<u8>> {
        self.in_rows = true;
        if !self.columns.contains(&true) {
            return None;
        }
        let ids = self.ids.get_or_insert_with(sessions);
        let (seq, payload) = split_packet(packet)?;
        let mut values = text_values(payload).ok()?;
        let mut told = Vec::new();
        for (i, value) in values.iter().enumerate() {
            let session = value
                .filter(|_| self.columns.get(i) == Some(&true))
                .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u32>().ok())
                .and_then(|thread| ids.get(&thread));
            if let Some(session) = session {
                told.push((i, session.to_string()));
            }
        }
        if told.is_empty() {
            return None;
        }
        for (i, id) in &told {
            values[*i] = Some(id.as_bytes());
        }
        let mut out = BytesMut::new();
        write_packet(&mut out, seq, &text_row(&values));
        Some(out.to_vec())
    }
}
