//! Prepared statements and the cache: a prepare is recorded to learn its id and what it
//! reads or writes, and an execute is keyed on its statement and bound parameters (types
//! sent now or remembered, the NULL bitmap, the values).

use super::*;

impl Session {
    pub(super) async fn prepare_tracked(
        &mut self,
        kind: ResponseKind,
        len: usize,
    ) -> Result<Relayed, SessionError> {
        if !self.client.read_whole(len, MAX_BUFFERED).await? {
            // Its executes will count as writes of unknown tables.
            return self.relay(kind).await;
        }
        let text = Bytes::copy_from_slice(&self.client.rbuf[HEADER_LEN + 1..HEADER_LEN + len]);
        let text = match sql::strip_hints(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(t) => Bytes::from(t),
        };
        let rewritten = self.stmt.identity_rewritten;
        // Kept for the prepare's own reply, which reads it again.
        let plain = self
            .text
            .analysis(&self.client.rbuf[HEADER_LEN + 1..HEADER_LEN + len])
            .clone();
        let schema = self.cache_state().known_schema();
        let mut analysis = own_id_uncacheable(plain.qualified(schema), rewritten);
        if self.cache_state().schema.is_none()
            && matches!(analysis, Analysis::Read { .. } | Analysis::Write { .. })
            && self.settings_known().await?
        {
            // No schema was known: it is still the plain analysis, qualified now.
            analysis = analysis.qualified(self.cache_state().known_schema());
        }
        // Names resolved against an unknown schema could be any table.
        let resolved = self.cache_state().schema.is_some();
        let kind_of = match analysis {
            Analysis::Read {
                tables,
                uncacheable: None,
            } if resolved => StmtKind::Read(tables.into()),
            Analysis::Write { tables } if resolved => StmtKind::Write(tables),
            Analysis::Write { .. } => StmtKind::Write(None),
            Analysis::SessionChange => StmtKind::SessionChange,
            _ => StmtKind::Other,
        };
        let mut record = Recording::new(PREPARE_RECORD);
        let going_on = self.relay_recording(kind, Some(&mut record)).await?;
        let ok = record.buf.get(HEADER_LEN..).and_then(PrepareOk::parse);
        if let Some(ok) = ok {
            self.cache_state().stmts.insert(
                ok.stmt_id,
                Prepared {
                    text,
                    params: ok.params,
                    kind: kind_of,
                    types: None,
                    long_data: false,
                    server_has_types: false,
                    shape: None,
                    rule: None,
                },
            );
        }
        Ok(going_on)
    }

    pub(super) async fn execute_cached(
        &mut self,
        kind: ResponseKind,
        len: usize,
        id: Option<u32>,
        step: CacheStep,
    ) -> Result<Relayed, SessionError> {
        if !self.client.read_whole(len, MAX_BUFFERED).await? {
            let writes = match id.and_then(|id| self.cache_state().stmts.get(&id)) {
                Some(Prepared {
                    kind: StmtKind::Read(_) | StmtKind::Other,
                    ..
                }) => None,
                Some(Prepared {
                    kind: StmtKind::Write(t),
                    ..
                }) => Some(t.clone()),
                _ => Some(None),
            };
            if let Some(w) = writes {
                self.cache_state().add_writes(w);
            }
            return self.relay(kind).await;
        }
        let len = id.map_or(len, |id| self.rebind_types(id, len));
        let params = id
            .and_then(|id| self.cache_state().stmts.get(&id))
            .map_or(0, |stmt| stmt.params);
        let carries_types =
            Execute::binds_types(&self.client.rbuf[HEADER_LEN..HEADER_LEN + len], params)
                == Some(true);
        let going_on = self.execute_buffered(kind, id, len, step).await?;
        // The server holds the types the client last bound when an execute carrying
        // them reached it, and no longer when the cache answered one.
        let state = self.cache_state();
        let served = state.served;
        if let Some(stmt) = id.and_then(|id| state.stmts.get_mut(&id)) {
            if carries_types {
                stmt.server_has_types = !served;
            }
        }
        Ok(going_on)
    }

    /// An execute that leaves the parameter types out means "as bound last time", but
    /// the last execute that carried them may have been answered by the cache and never
    /// reached the server: put the types back in before it goes there. Returns the
    /// packet's new length.
    fn rebind_types(&mut self, id: u32, len: usize) -> usize {
        let state = self.cache.as_mut().expect("only called with a cache");
        let Some(stmt) = state.stmts.get(&id) else {
            return len;
        };
        let (false, Some(types)) = (stmt.server_has_types, stmt.types.as_ref()) else {
            return len;
        };
        crate::frontend::session::prepared::bind_types(
            &mut self.client.rbuf,
            len,
            stmt.params,
            types,
        )
        .unwrap_or(len)
    }

    async fn execute_buffered(
        &mut self,
        kind: ResponseKind,
        id: Option<u32>,
        len: usize,
        step: CacheStep,
    ) -> Result<Relayed, SessionError> {
        let request = Bytes::copy_from_slice(&self.client.rbuf[..HEADER_LEN + len]);
        let status = self.status();
        let state = self.cache_state();
        let eligible = eligible(state, status, Hints::default());
        let Some(stmt) = id.and_then(|id| state.stmts.get_mut(&id)) else {
            // Not prepared through the cache's eyes (too large to analyse): unknown.
            self.cache_state().add_writes(None);
            return self.relay(kind).await;
        };
        // Learns the types the execute carries, for the executes that leave them out (a
        // read the lookup keyed has done so already).
        let params = match step {
            CacheStep::Unasked => bound_params(&request[HEADER_LEN..], stmt),
            _ => None,
        };
        let long_data = std::mem::take(&mut stmt.long_data);
        match &stmt.kind {
            StmtKind::Read(tables) => {
                let tables = tables.clone();
                let (key, hash) = match step {
                    _ if !eligible => return self.relay(kind).await,
                    CacheStep::Revalidate(keyed, refresh) => {
                        return self.revalidate(keyed.key, refresh, &request, kind).await;
                    }
                    CacheStep::Missed(keyed) => (keyed.key, Some(keyed.hash)),
                    CacheStep::Unasked => {
                        let keyed = self.execute_key(id, params, &request, kind, long_data);
                        match keyed.await? {
                            Err(relayed) => return Ok(relayed),
                            Ok(key) => (key, None),
                        }
                    }
                };
                let stmt = id.and_then(|id| self.cache_state().stmts.get_mut(&id));
                let text = stmt.as_ref().map(|s| s.text.clone()).unwrap_or_default();
                if let Some(s) = stmt {
                    // Worked out on its first miss only: its text does not change.
                    let shape = *s.shape.get_or_insert_with(|| sql::digest_shape(&text));
                    self.text.know_shape(&text, shape);
                }
                let stmt = id.and_then(|id| self.cache_state().stmts.get(&id));
                let values = stmt.and_then(|s| bound_values(&request, s));
                let missed = fill::Missed {
                    key,
                    hash,
                    stmt: id,
                };
                self.read_missed(missed, &text, &tables, &request, kind, values.as_deref())
                    .await
            }
            StmtKind::Write(tables) => {
                let tables = tables.clone();
                let text = stmt.text.clone();
                // Values sent apart (COM_STMT_SEND_LONG_DATA) are not in the packet.
                let values = (!long_data).then(|| bound_values(&request, stmt)).flatten();
                self.cache_state()
                    .add_write(&text, tables, values.as_deref());
                self.relay(kind).await
            }
            StmtKind::SessionChange => {
                let going_on = self.relay(kind).await?;
                self.cache_state().settings_changed();
                Ok(going_on)
            }
            StmtKind::Other => self.relay(kind).await,
        }
    }

    /// The key of a cacheable read's execute the lookup before routing did not key
    /// (its session's settings were unknown then), served here when the cache holds it.
    /// `Err(how it ended)` when it was answered or relayed uncached.
    async fn execute_key(
        &mut self,
        id: Option<u32>,
        params: Option<Vec<u8>>,
        request: &Bytes,
        kind: ResponseKind,
        long_data: bool,
    ) -> Result<Result<Vec<u8>, Relayed>, SessionError> {
        let Some(stmt) = id.and_then(|id| self.cache_state().stmts.get(&id)) else {
            return self.relay(kind).await.map(Err);
        };
        let cursor =
            Execute::parse(&request[HEADER_LEN..], stmt.params).is_some_and(|e| e.opens_cursor());
        let (Some(params), false, false) = (params, cursor, long_data) else {
            return self.relay(kind).await.map(Err);
        };
        let text = stmt.text.clone();
        if !self.settings_known().await? {
            return self.relay(kind).await.map(Err);
        }
        let prefix = self.cache_state().prefix.as_ref().expect("known");
        let key = cache::key(prefix, Command::StmtExecute as u8, &text, &params);
        if let Some(r) = self.try_serve(&key, request, kind).await? {
            return Ok(Err(r));
        }
        Ok(Ok(key))
    }
}

/// An execute's parameter values, read with the types it carries or last carried.
fn bound_values<'a>(request: &'a [u8], stmt: &Prepared) -> Option<Vec<Bound<'a>>> {
    let execute = Execute::parse(&request[HEADER_LEN..], stmt.params)?;
    let types = execute.types.or(stmt.types.as_deref())?;
    execute.bound(types)
}

/// The key material of an execute's parameters: their types (sent now or remembered),
/// the NULL bitmap and the values. None when they can't be known.
fn bound_params(payload: &[u8], stmt: &mut Prepared) -> Option<Vec<u8>> {
    let execute = Execute::parse(payload, stmt.params)?;
    let mut key = Vec::new();
    push_bound_params(&mut key, &execute, stmt).then_some(key)
}

/// [`bound_params`] appended to `out`; false (and `out` unchanged or partly written)
/// when they can't be known.
pub(super) fn push_bound_params(
    out: &mut Vec<u8>,
    execute: &Execute<'_>,
    stmt: &mut Prepared,
) -> bool {
    if stmt.params == 0 {
        return true;
    }
    if let Some(types) = execute.types {
        if stmt.types.as_deref() != Some(types) {
            stmt.types = Some(types.to_vec());
        }
    }
    let Some(types) = stmt.types.as_ref() else {
        return false;
    };
    push_field(out, types);
    push_field(out, execute.null_bitmap);
    out.extend_from_slice(execute.values);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_parameters_key_on_types_and_values() {
        let mut stmt = Prepared {
            text: Bytes::from_static(b"SELECT c FROM t WHERE id=?"),
            params: 1,
            kind: StmtKind::Read(Arc::from([])),
            types: None,
            long_data: false,
            server_has_types: false,
            shape: None,
            rule: None,
        };
        // command, id, flags, iterations, null bitmap, new-params-bound, type, value
        let first = [0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 0, 7, 0, 0, 0];
        let again = [0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 7, 0, 0, 0];
        let other = [0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 8, 0, 0, 0];
        let k1 = bound_params(&first, &mut stmt).unwrap();
        assert_eq!(bound_params(&again, &mut stmt).unwrap(), k1);
        assert_ne!(bound_params(&other, &mut stmt).unwrap(), k1);
        stmt.types = None;
        assert!(
            bound_params(&again, &mut stmt).is_none(),
            "types never sent"
        );
        assert!(bound_params(&first[..12], &mut stmt).is_none(), "truncated");
    }
}
