//! The session's own id, as the server would tell it: `CONNECTION_ID()` in a statement
//! becomes the Sluice id the handshake gave (see `classify::identity`).

use super::Session;
use crate::classify::identity;
use crate::error::SessionError;
use sluice_wire::packet::{write_packet, HEADER_LEN, MAX_PAYLOAD};
use sluice_wire::tracker::ResponseKind;

/// Statement texts past this length are sent as written (documented): rewriting means
/// holding the whole statement, and long ones are bulk loads, not identity questions.
const REWRITE_MAX: usize = 1 << 20;

impl Session {
    /// Rewrites the COM_QUERY or COM_STMT_PREPARE at the front of the client buffer,
    /// whose payload is `len` bytes, if it calls `CONNECTION_ID()`. Returns the payload
    /// length to forward.
    pub(super) async fn own_connection_id(
        &mut self,
        kind: ResponseKind,
        len: usize,
    ) -> Result<usize, SessionError> {
        if !matches!(kind, ResponseKind::Query | ResponseKind::Prepare) || len > REWRITE_MAX {
            return Ok(len);
        }
        while self.client.rbuf.len() < HEADER_LEN + len {
            self.client.read_more().await?;
        }
        let text = &self.client.rbuf[HEADER_LEN + 1..HEADER_LEN + len];
        let Some(rewritten) = identity::rewrite_connection_id(text, self.id) else {
            return Ok(len);
        };
        let mut payload = Vec::with_capacity(1 + rewritten.len());
        payload.push(self.client.rbuf[HEADER_LEN]);
        payload.extend_from_slice(&rewritten);
        if payload.len() >= MAX_PAYLOAD {
            return Ok(len);
        }
        let rest = self.client.rbuf.split_off(HEADER_LEN + len);
        self.client.rbuf.clear();
        write_packet(&mut self.client.rbuf, 0, &payload);
        self.client.rbuf.unsplit(rest);
        Ok(payload.len())
    }
}
