//! Row-changing statements name the server connection they run on, in a comment the
//! binlog keeps (`binlog/origin.rs`): under row-based logging that is how a failover
//! tells whose commit in doubt the new writer has.

use super::Session;
use crate::binlog::origin;
use crate::error::SessionError;
use sluice_wire::packet::{Header, HEADER_LEN, MAX_PAYLOAD};
use sluice_wire::tracker::ResponseKind;

/// Longest statement text marked: a larger one goes as it is, and a commit of it in
/// doubt stays so.
const MARKED_MAX: usize = 1 << 20;

impl Session {
    /// Starts the text of the query or prepare at the front of the client buffer with
    /// the comment naming the held connection, when it changes rows and a failover may
    /// have to find its transaction. The client's own copy of the text (for the cache,
    /// replay, its prepared statement's key) was taken before.
    pub(super) async fn mark_origin(&mut self, kind: ResponseKind) -> Result<(), SessionError> {
        // First what costs nothing: one cluster whose lost commits may need settling.
        let settles = self.fe.shards.is_none() && self.fe.router.load().settles_lost_commits();
        if !settles {
            return Ok(());
        }
        let Some(thread) = self.backing.conn().map(|b| b.thread_id) else {
            return Ok(());
        };
        let Some(len) = Header::parse(&self.client.rbuf).map(|h| h.len) else {
            return Ok(());
        };
        // COM_QUERY and COM_STMT_PREPARE, the commands with a text.
        let text_command = matches!(kind, ResponseKind::Query | ResponseKind::Prepare);
        if !text_command || len > MARKED_MAX {
            return Ok(());
        }
        let seen = self.client.rbuf.len().min(HEADER_LEN + len);
        if !origin::changes_rows(&self.client.rbuf[HEADER_LEN + 1..seen]) {
            return Ok(());
        }
        self.client.fill_to(HEADER_LEN + len).await?;
        let text = &self.client.rbuf[HEADER_LEN + 1..HEADER_LEN + len];
        let Some(marked) = origin::mark(text, thread) else {
            return Ok(());
        };
        if 1 + marked.len() < MAX_PAYLOAD {
            self.client
                .rewrite_front(len, |payload| [&payload[..1], &marked[..]].concat());
        }
        Ok(())
    }
}
