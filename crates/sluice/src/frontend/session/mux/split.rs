//! A multi-row `INSERT` whose rows live on several shards: one insert per shard with its
//! rows (in the order written), all inside one transaction over those shards (the
//! client's, or one begun for the statement and committed with it), so that the
//! statement is all or nothing as on one server. The client gets one OK with the sum
//! of the rows.

use super::*;
use crate::classify::keys::InsertRows;
use crate::router::Target;
use crate::shard::config::CrossShard;
use crate::shard::{ShardRows, Shards};
use std::sync::Arc;

/// The statement of shard's rows `rows` (indices into `cut.rows`).
fn part(text: &[u8], cut: &InsertRows, rows: &[usize]) -> Vec<u8> {
    let mut sql = Vec::with_capacity(text.len());
    sql.push(Command::Query as u8);
    sql.extend_from_slice(&text[cut.head.clone()]);
    for (n, &i) in rows.iter().enumerate() {
        if n > 0 {
            sql.push(b',');
        }
        sql.extend_from_slice(&text[cut.rows[i].0.clone()]);
    }
    sql.extend_from_slice(&text[cut.tail.clone()]);
    sql
}

impl Session {
    /// Runs the split insert at the front of the client buffer and answers it.
    pub(super) async fn split_insert(
        &mut self,
        shards: &Arc<Shards>,
        text: &[u8],
        cut: InsertRows,
        parts: ShardRows,
        table: crate::classify::sql::TableRef,
    ) -> Result<bool, SessionError> {
        if shards.cross_shard == CrossShard::Refuse {
            let err = super::shard::not_yet("a multi-row insert over several shards");
            let seq = self.client.skip_packet().await?;
            self.client.write_err(seq, &err).await?;
            return Ok(true);
        }
        let seq = self.client.skip_packet().await?;
        let mux = self.backing.muxed_mut();
        let own = mux.autocommits() && mux.deferred_begin.is_none() && mux.spread.is_none();
        if own {
            mux.deferred_begin = Some(b"BEGIN".as_slice().into());
        }
        mux.trx_wrote = true;
        let mut total = OkPacket::default();
        let mut failed = None;
        for (shard, rows) in &parts {
            match self
                .insert_part(shards, *shard, &part(text, &cut, rows))
                .await
            {
                Ok(ok) => {
                    total.affected_rows += ok.affected_rows;
                    if total.last_insert_id == 0 {
                        total.last_insert_id = ok.last_insert_id;
                    }
                    total.warnings = total.warnings.saturating_add(ok.warnings);
                }
                Err(part_failed) => {
                    failed = Some(part_failed.answered()?);
                    break;
                }
            }
        }
        let outcome = match failed {
            Some(err) => {
                self.split_failed(shards, own).await;
                Err(err)
            }
            None if own => self.split_commit(shards).await,
            None => Ok(()),
        };
        let mux = self.backing.muxed_mut();
        mux.status = match (&outcome, own) {
            (_, true) => StatusFlags(mux.status.0 & !StatusFlags::IN_TRANS),
            (Ok(()), false) => StatusFlags(mux.status.0 | StatusFlags::IN_TRANS),
            (Err(_), false) => mux.status,
        };
        total.status = mux.status;
        if let Some(c) = self.cache.as_mut() {
            c.wrote(Some(vec![table]), total.status);
        }
        match outcome {
            Ok(()) => self.client.write_ok(seq, &total).await?,
            Err(err) => self.client.write_err(seq, &err).await?,
        }
        self.release_if_free().await?;
        Ok(true)
    }

    /// One shard's insert, inside the transaction.
    async fn insert_part(
        &mut self,
        shards: &Arc<Shards>,
        shard: usize,
        payload: &[u8],
    ) -> Result<OkPacket, Failed> {
        let current = self
            .backing
            .muxed()
            .shard
            .unwrap_or(shards.map.default_shard());
        if shard != current && !self.move_to_shard(shards, current, shard).await? {
            self.spread_to(shards, current, shard);
        }
        let router = shards.routers[shard].clone();
        self.acquire(false, &router, Target::Writer).await?;
        self.begin_deferred().await?;
        let backend = self.backing.conn_mut().expect("acquired");
        let sent = backend.simple_command(payload).await;
        sent.map_err(|failed| Failed::Answered(backend.answer_for(failed)))
    }

    /// A part failed: what the other parts did is undone. In the client's transaction
    /// with one shard so far, the server already undid the failed statement alone.
    async fn split_failed(&mut self, shards: &Arc<Shards>, own: bool) {
        if self.backing.muxed().spread.is_some() {
            self.spread_failed(shards).await;
            return;
        }
        self.backing.muxed_mut().deferred_begin = None;
        if own {
            if let Some(backend) = self.backing.conn_mut() {
                if let Err(Failed::Broken(e)) = backend.simple_command(b"\x03ROLLBACK").await {
                    tracing::debug!(error = %e, "rolling back a split insert");
                    backend.mark_broken();
                }
            }
        }
    }

    /// Commits the transaction begun for the statement.
    async fn split_commit(&mut self, shards: &Arc<Shards>) -> Result<(), ErrPacket> {
        if self.backing.muxed().spread.is_some() {
            return self.commit_spread(shards).await;
        }
        let Some(backend) = self.backing.conn_mut() else {
            return Ok(());
        };
        match backend.simple_command(b"\x03COMMIT").await {
            Ok(_) => Ok(()),
            Err(failed) => Err(backend.answer_for(failed)),
        }
    }
}
