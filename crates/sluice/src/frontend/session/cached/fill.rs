//! Entries served, refreshed and filled: a hit written to the client, a stale entry
//! fetched again after it was served, a miss filled while its response streams (one
//! session fills, the others wait for it).

use super::*;
use crate::error::{Failed, RefusedAsNone};

/// A read's key on its way to the fill, with the hash its lookup worked out when one
/// did (a miss hashes its key once).
pub(super) struct Missed {
    pub(super) key: Vec<u8>,
    pub(super) hash: Option<KeyHash>,
    /// The client's id of the prepared statement it executes, whose rule is kept.
    pub(super) stmt: Option<u32>,
}

impl Session {
    /// Serves `key` from the cache if it holds a usable entry. Returns None on a miss,
    /// with the request still in the client buffer.
    pub(super) async fn try_serve(
        &mut self,
        key: &[u8],
        request: &Bytes,
        kind: ResponseKind,
    ) -> Result<Option<Relayed>, SessionError> {
        let cache = self.cache_state().cache.clone();
        let (entry, refresh) = match cache.lookup(key) {
            Lookup::Miss => return Ok(None),
            Lookup::Hit(e) => (e, false),
            Lookup::Stale { entry, refresh } => (entry, refresh),
        };
        self.serve(request, &entry).await?;
        if refresh {
            return self
                .refresh(key.to_vec(), &entry, request, kind)
                .await
                .map(Some);
        }
        Ok(Some(Relayed::Done))
    }

    /// Answers the request at the front of the client buffer with `entry`.
    pub(super) async fn serve(
        &mut self,
        request: &[u8],
        entry: &Entry,
    ) -> Result<(), SessionError> {
        self.client.rbuf.advance(request.len());
        self.client.write_all(&entry.response).await?;
        self.cache_state().served = true;
        Stats::incr(&self.fe.stats.cache_hits);
        self.stmt.cache_use = crate::analytics::CacheUse::Hit;
        self.stmt.outcome.rows = entry.rows;
        self.stmt.cache_decided();
        Ok(())
    }

    /// A stale entry whose refresh the lookup before routing gave this session: served,
    /// then fetched again on the connection now in line with the session.
    pub(super) async fn revalidate(
        &mut self,
        key: Vec<u8>,
        refresh: step::Refresh,
        request: &Bytes,
        kind: ResponseKind,
    ) -> Result<Relayed, SessionError> {
        let entry = refresh.take();
        let served = self.serve(request, &entry).await;
        if let Err(e) = served {
            self.cache_state().cache.refresh_failed(&entry);
            return Err(e);
        }
        self.refresh(key, &entry, request, kind).await
    }

    /// Stale-while-revalidate: after serving the stale copy, fetch a fresh one on this
    /// session's connection (whose settings are the entry's) without a client waiting.
    pub(super) async fn refresh(
        &mut self,
        key: Vec<u8>,
        stale: &Entry,
        request: &Bytes,
        kind: ResponseKind,
    ) -> Result<Relayed, SessionError> {
        let cache = self.cache_state().cache.clone();
        let ticket = cache.begin_refresh(key, stale);
        let limit = cache.entry_limit();
        let translate = self
            .backing
            .mux()
            .and_then(|m| m.translate_ok.then_some(m.lenenc_info));
        let Some(backend) = self.backing.conn_mut() else {
            return Ok(Relayed::End);
        };
        match fetch(backend, request, kind, limit, translate).await {
            Ok(Some((response, outcome))) if storable(&outcome, backend.status) => {
                cache.store(ticket, response);
            }
            Ok(_) => {
                cache.refresh_failed(stale);
                cache.not_stored(ticket);
            }
            Err(e) => {
                cache.refresh_failed(stale);
                backend.mark_broken();
                tracing::warn!(error = %e, "backend lost while refreshing a cache entry");
                return Ok(Relayed::End);
            }
        }
        Ok(Relayed::Done)
    }

    /// Forwards the request and records the response into the ticket's entry.
    pub(super) async fn fill(
        &mut self,
        mut ticket: cache::FillTicket,
        kind: ResponseKind,
    ) -> Result<Relayed, SessionError> {
        let cache = self.cache_state().cache.clone();
        let fill = self.stmt.open_stage();
        let mut record = Recording::new(cache.entry_limit());
        let going_on = self.relay_recording(kind, Some(&mut record)).await?;
        ticket.rows = self.stmt.outcome.rows;
        let stored = going_on == Relayed::Done
            && !record.abandoned
            && storable(&self.stmt.outcome, self.status());
        let bytes = record.buf.len() as i64;
        if stored {
            cache.store(ticket, record.buf);
        } else {
            cache.not_stored(ticket);
        }
        self.stmt.close_stage(fill, "cache fill", || {
            use crate::trace::Value;
            vec![
                ("sluice.cache.stored", Value::Bool(stored)),
                ("sluice.cache.bytes", Value::Int(bytes)),
            ]
        });
        Ok(going_on)
    }

    /// A cacheable read that missed: find its rule, then fill (or wait for the session
    /// already filling it). `params` are a prepared statement's bound values.
    pub(super) async fn read_missed(
        &mut self,
        Missed { key, hash, stmt }: Missed,
        text: &[u8],
        tables: &[TableRef],
        request: &Bytes,
        kind: ResponseKind,
        params: Option<&[Bound<'_>]>,
    ) -> Result<Relayed, SessionError> {
        let state = self.cache.as_mut().expect("only called with a cache");
        let cache = state.cache.clone();
        // A prepared statement's rule is matched on its first miss and kept.
        let prepared = stmt.and_then(|id| state.stmts.get_mut(&id));
        let mut memo = prepared.map(|p| p.rule.take());
        let candidate = Candidate {
            text,
            user: &self.user.name,
            schema: state.known_schema(),
            // Analytics' shape of a query's text, or its prepared statement's.
            shape: self.text.known_shape(text),
        };
        let found = match memo.as_mut() {
            Some(memo) => cache.rule_for_remembered(&candidate, memo),
            None => cache.rule_for(&candidate),
        };
        if let (Some(id), Some(memo)) = (stmt, memo) {
            if let Some(p) = self.cache_state().stmts.get_mut(&id) {
                p.rule = memo;
            }
        }
        let Some((rule, digest)) = found else {
            return self.relay(kind).await;
        };
        self.cache_state().reading = true;
        self.stmt.cache_use = crate::analytics::CacheUse::Miss;
        self.stmt.cache_decided();
        if cache.views_unknown() {
            if let Some(backend) = self.backing.conn_mut() {
                match backend.query_scalar(QueryCache::VIEWS_QUERY).await {
                    Ok(answer) => cache.set_views(answer.as_deref()),
                    // Left unknown: this entry depends on every write.
                    Err(Failed::Answered(err)) => tracing::debug!(%err, "views unknown"),
                    Err(Failed::Broken(e)) => return Err(e.into()),
                }
            }
        }
        let relayed = match cache.begin_fill(&key, hash, rule, digest) {
            Fill::Declined => self.relay(kind).await?,
            Fill::Leader(mut ticket) => {
                // Only the leader learns the table's key: waiters need none.
                let rows = self.read_by_key(text, tables, params).await?;
                cache.depend_on(&mut ticket, tables, rows.as_ref());
                self.fill(ticket, kind).await?
            }
            Fill::Follower(flight) => {
                flight.wait(cache.fill_wait).await;
                match self.try_serve(&key, request, kind).await? {
                    Some(r) => r,
                    None => self.relay(kind).await?,
                }
            }
        };
        self.cache_state().keep_key_buffer(key);
        Ok(relayed)
    }

    /// The keys of its one table that decide a read's result, when they do; the table's
    /// key is learnt from the server the first time.
    pub(super) async fn read_by_key(
        &mut self,
        text: &[u8],
        tables: &[TableRef],
        params: Option<&[Bound<'_>]>,
    ) -> Result<Option<RowSet>, SessionError> {
        let cache = self.cache_state().cache.clone();
        let ([t], true) = (tables, cache.by_key) else {
            return Ok(None);
        };
        let key = match cache.keys.get(t) {
            Some(key) => key,
            None => {
                let answer = match (TableKeys::query(t), self.backing.conn_mut()) {
                    (Some(q), Some(backend)) => {
                        backend.query_scalar(&q).await.refused_as_none()?.flatten()
                    }
                    _ => None,
                };
                cache.keys.learn(t, answer.as_deref());
                cache.keys.get(t).flatten()
            }
        };
        Ok(key.and_then(|k| table_keys::rows_by_key(&k, t, text, params, false)))
    }
}
