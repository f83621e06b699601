//! A session's side of analytics: what it knows of the statement in flight, of its
//! prepared statements, and of the digests it has already reported.

use super::digests::DigestInfo;
use super::pending::{Buffer, Text};
use super::{Analytics, CacheUse, Finished, IdMap, UserStats};
use crate::classify::facts::ShapeMemo;
use sluice_wire::tracker::Outcome;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// A session's side of analytics: its user's figures, the digests it has already
/// reported (so their text is not copied again), its prepared statements' digests,
/// the statement in flight, and the statements finished since the last drain.
pub struct SessionProbe {
    pub user: Arc<UserStats>,
    /// Digests the store has, or will have from this session's buffer, with what
    /// recording their statements needs.
    seen: IdMap<u64, Arc<DigestInfo>>,
    /// Registered at the first statement's end (the first time the probe meets its
    /// analytics); drained and unregistered when the probe is dropped.
    buffer: Option<Buffer>,
    /// Shape → digest of recent plain statements (see
    /// [`crate::classify::sql::digest_shape`]).
    shapes: ShapeMemo<u64>,
    prepared: IdMap<u32, Arc<Prepared>>,
    /// A COM_STMT_PREPARE in flight: its digest, bound to the id of the server's answer.
    pub preparing: Option<Arc<Prepared>>,
    pub current: Option<Statement>,
}

/// A prepared statement's digest and text.
pub struct Prepared {
    pub digest: u64,
    pub text: Box<[u8]>,
}

/// The statement in flight.
pub struct Statement {
    pub digest: u64,
    pub exact: u64,
    /// Its text, kept only when this session had not reported its digest yet.
    pub text: Option<Vec<u8>>,
    pub prepared: Option<Arc<Prepared>>,
    pub started: Instant,
    pub bytes_in: u64,
}

/// Bounds on what one session remembers.
const SEEN_MAX: usize = 1024;
const PREPARED_MAX: usize = 16_384;

impl SessionProbe {
    #[cfg(test)]
    pub(super) fn buffer(&self) -> Option<&Buffer> {
        self.buffer.as_ref()
    }

    pub fn new(user: Arc<UserStats>) -> SessionProbe {
        user.sessions.fetch_add(1, Ordering::Relaxed);
        SessionProbe {
            user,
            seen: Default::default(),
            buffer: None,
            shapes: ShapeMemo::default(),
            prepared: Default::default(),
            preparing: None,
            current: None,
        }
    }

    /// A COM_QUERY of `text` starts.
    pub fn query(&mut self, text: &[u8], shape: crate::classify::facts::Shape, bytes_in: u64) {
        use crate::classify::sql;
        let (digest, exact) = match shape {
            Some((shape, exact)) => match self.shapes.get_mut(shape) {
                Some(digest) => (*digest, exact),
                None => {
                    let digest = sql::digest_hash(text);
                    self.shapes.insert(shape, digest);
                    (digest, exact)
                }
            },
            None => (sql::digest_hash(text), sql::fnv1a(text)),
        };
        let known = self.seen.contains_key(&digest);
        self.current = Some(Statement {
            digest,
            exact,
            text: (!known).then(|| text.to_vec()),
            prepared: None,
            started: Instant::now(),
            bytes_in,
        });
    }

    /// A COM_STMT_PREPARE of `text` is sent; [`Self::prepared`] binds it to its id.
    pub fn prepare(&mut self, text: &[u8]) {
        self.preparing = Some(Arc::new(Prepared {
            digest: crate::classify::sql::digest_hash(text),
            text: text.into(),
        }));
    }

    /// The client was told statement `id` is prepared.
    pub fn prepared(&mut self, id: u32) {
        if let Some(p) = self.preparing.take() {
            if self.prepared.len() >= PREPARED_MAX && !self.prepared.contains_key(&id) {
                return;
            }
            self.prepared.insert(id, p);
        }
    }

    /// The text statement `id` was prepared from, when this session prepared it.
    pub fn prepared_text(&self, id: u32) -> Option<&[u8]> {
        self.prepared.get(&id).map(|p| &p.text[..])
    }

    pub fn closed(&mut self, id: u32) {
        self.prepared.remove(&id);
    }

    /// The server forgot every prepared statement (reset, change of user).
    pub fn forget_prepared(&mut self) {
        self.prepared.clear();
    }

    /// A COM_STMT_EXECUTE of statement `id` with `params` (the packet after the id).
    pub fn execute(&mut self, id: u32, params: &[u8], bytes_in: u64) {
        let Some(p) = self.prepared.get(&id) else {
            return;
        };
        self.current = Some(Statement {
            digest: p.digest,
            exact: p.digest ^ crate::classify::sql::fnv1a(params).rotate_left(1),
            text: None,
            prepared: Some(p.clone()),
            started: Instant::now(),
            bytes_in,
        });
    }

    /// The digest text of the statement in flight, from what this session or the store
    /// knows of it, else worked out from its text.
    pub fn digest_text(&self, analytics: &Analytics) -> Option<String> {
        let c = self.current.as_ref()?;
        if let Some(info) = self.seen.get(&c.digest) {
            return Some(info.text().to_owned());
        }
        if let Some(info) = analytics.recorder.digests.info(c.digest) {
            return Some(info.text().to_owned());
        }
        let text = c
            .text
            .as_deref()
            .or(c.prepared.as_deref().map(|p| &p.text[..]))?;
        Some(crate::classify::sql::digest(text).0)
    }

    /// The statement in flight ended: reports it. `schema` is the session's.
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        &mut self,
        analytics: &Analytics,
        schema: Option<&str>,
        outcome: Outcome,
        server: Option<&str>,
        cache: CacheUse,
        in_transaction: bool,
        scattered: bool,
        bytes_out: u64,
    ) {
        let Some(s) = self.current.take() else {
            return;
        };
        let f = Finished {
            digest: s.digest,
            // Handed over with the statement's text (see below).
            text: None,
            schema,
            user: &self.user,
            exact: s.exact,
            elapsed: s.started.elapsed(),
            outcome,
            server,
            cache,
            in_transaction,
            scattered,
            bytes_in: s.bytes_in,
            bytes_out,
        };
        let text = match (s.text, s.prepared) {
            (Some(t), _) => Some(Text::Owned(t)),
            (None, Some(p)) => Some(Text::Prepared(p)),
            (None, None) => None,
        };
        if !self.seen.contains_key(&s.digest) {
            if let Some(info) = analytics.recorder.digests.info(s.digest) {
                remember(&mut self.seen, s.digest, info);
            }
        }
        let buffer = self
            .buffer
            .get_or_insert_with(|| analytics.recorder.register(&self.user));
        let mut pending = buffer.pending.lock();
        // Borrowed, not cloned per statement: every session running the digest shares
        // its count.
        let info = self.seen.get(&s.digest);
        let full = pending.add(&f, text, info);
        if info.is_none() || full {
            // Neither this session nor the store's table knows the digest (it is new
            // to the process, most often): recorded at once, so that its writes are
            // counted and its tables' generation read as it ends, and its info learnt
            // for its next statements.
            buffer.recorder.drain(&mut pending);
        }
        for (d, info) in pending.learned.drain(..) {
            remember(&mut self.seen, d, info);
        }
    }
}

fn remember(seen: &mut IdMap<u64, Arc<DigestInfo>>, digest: u64, info: Arc<DigestInfo>) {
    if seen.len() >= SEEN_MAX && !seen.contains_key(&digest) {
        seen.clear();
    }
    seen.insert(digest, info);
}

impl Drop for SessionProbe {
    fn drop(&mut self) {
        self.user.sessions.fetch_sub(1, Ordering::Relaxed);
    }
}
