//! Text statements on the connection in hand: a read is served, refreshed or filled as
//! the lookup before routing decided (or looked up here when it could not), a write is
//! noted for invalidation at commit.

use super::*;

impl Session {
    /// A text statement on the connection in hand: a read is served, filled or
    /// refreshed as `step` (the lookup before routing) says, or looked up here when it
    /// was not; a write is noted for invalidation at commit.
    pub(super) async fn query_cached(
        &mut self,
        kind: ResponseKind,
        len: usize,
        step: CacheStep,
    ) -> Result<Relayed, SessionError> {
        if !self.client.read_whole(len, MAX_BUFFERED).await? {
            return self.relay_unanalysed(kind).await;
        }
        let request = Bytes::copy_from_slice(&self.client.rbuf[..HEADER_LEN + len]);
        let text = &request[HEADER_LEN + 1..];
        // A statement the lookup keyed had no hints: its text is its key's.
        let hints = match step {
            CacheStep::Unasked => sql::hints(text),
            _ => Hints::default(),
        };
        let stripped: Cow<'_, [u8]> = if hints == Hints::default() {
            Cow::Borrowed(text)
        } else {
            sql::strip_hints(text)
        };
        let status = self.status();
        let eligible = eligible(self.cache_state(), status, hints);
        let mut hash = None;
        let key = match step {
            _ if !eligible => None,
            CacheStep::Revalidate(keyed, refresh) => {
                return self.revalidate(keyed.key, refresh, &request, kind).await;
            }
            CacheStep::Missed(keyed) => {
                hash = Some(keyed.hash);
                Some(keyed.key)
            }
            CacheStep::Unasked => {
                let state = self.cache_state();
                let key = state
                    .prefix
                    .as_ref()
                    .map(|p| cache::key(p, Command::Query as u8, &stripped, &[]));
                match &key {
                    Some(key) if hints.wipe => {
                        state.cache.wipe(key);
                    }
                    Some(key) => {
                        if let Some(r) = self.try_serve(key, &request, kind).await? {
                            return Ok(r);
                        }
                    }
                    None => {}
                }
                key
            }
        };
        let looked_up = Looked {
            key,
            hash,
            eligible,
            wipe: hints.wipe,
        };
        self.query_analysed(&request, &stripped, looked_up, kind)
            .await
    }

    /// A text statement the cache did not answer, by what it does: a read that may be
    /// cached is filled, a write noted, a change of settings makes them unknown.
    async fn query_analysed(
        &mut self,
        request: &Bytes,
        stripped: &[u8],
        looked_up: Looked,
        kind: ResponseKind,
    ) -> Result<Relayed, SessionError> {
        let Looked {
            key,
            hash,
            eligible,
            wipe,
        } = looked_up;
        // What routing read of the text, when it did (hints are comments: the text
        // with them reads as the text without).
        let text = &request[HEADER_LEN + 1..];
        let mut analysis = self.analysis_of(text);
        let state = self.cache_state();
        let unresolved = state.schema.is_none();
        let known = state.prefix.is_some() && !unresolved;
        let needs_settings = match &*analysis {
            Analysis::Read {
                uncacheable: None, ..
            } => eligible,
            Analysis::Write { tables: Some(_) } => unresolved,
            _ => false,
        };
        // Known settings (the usual case) need no probe, and leave nothing to qualify.
        if needs_settings && !known && self.settings_known().await? && unresolved {
            // No schema was known: it is still the plain analysis, qualified now.
            analysis = self.analysis_of(text);
        }
        match &*analysis {
            Analysis::Read {
                tables,
                uncacheable: None,
            } if eligible => {
                let state = self.cache_state();
                let (key, hash) = match (key, &state.prefix) {
                    (Some(key), _) => (key, hash),
                    (None, Some(prefix)) => {
                        let key = cache::key(prefix, Command::Query as u8, stripped, &[]);
                        (key, None)
                    }
                    (None, None) => return self.relay(kind).await,
                };
                if unresolved && !wipe {
                    // Settings were just learnt: the entry may exist after all.
                    if let Some(r) = self.try_serve(&key, request, kind).await? {
                        return Ok(r);
                    }
                }
                self.read_missed(
                    fill::Missed {
                        key,
                        hash,
                        stmt: None,
                    },
                    stripped,
                    tables,
                    request,
                    kind,
                    None,
                )
                .await
            }
            Analysis::Write { tables } => {
                if creates_temporary(stripped) {
                    self.cache_state().temp_tables = true;
                }
                self.cache_state().add_write(stripped, tables.clone(), None);
                self.relay(kind).await
            }
            Analysis::SessionChange => {
                let going_on = self.relay(kind).await?;
                self.cache_state().settings_changed();
                Ok(going_on)
            }
            _ => self.relay(kind).await,
        }
    }

    /// What `text` does as this session reads it: its tables in the session's default
    /// schema, uncacheable if its `CONNECTION_ID()` was replaced (it reads as constant
    /// but is not).
    fn analysis_of(&mut self, text: &[u8]) -> Arc<Analysis> {
        let schema = self.cache.as_ref().and_then(|state| state.known_schema());
        let analysis = self.text.qualified(text, schema);
        if !self.stmt.identity_rewritten {
            return analysis;
        }
        Arc::new(own_id_uncacheable(Analysis::clone(&analysis), true))
    }

    /// A statement too large to analyse whole streams through. Unless it starts as a
    /// lone read, its writes could be anywhere in it: everything is invalidated.
    async fn relay_unanalysed(&mut self, kind: ResponseKind) -> Result<Relayed, SessionError> {
        let head_end = self.client.rbuf.len().min(MAX_BUFFERED);
        let lone_read = !self.client.caps.contains(CapabilityFlags::MULTI_STATEMENTS)
            && matches!(
                sql::analyze(&self.client.rbuf[HEADER_LEN + 1..head_end], None),
                Analysis::Read { .. }
            );
        if !lone_read {
            self.cache_state().add_writes(None);
        }
        self.relay(kind).await
    }
}

/// What a text statement's lookup on the connection in hand left for its analysis.
struct Looked {
    /// Its key, when one was built (the session's settings known).
    key: Option<Vec<u8>>,
    /// The key's hash, when the lookup before routing worked it out.
    hash: Option<KeyHash>,
    eligible: bool,
    /// A hint dropped its entry: a read fills it afresh.
    wipe: bool,
}
