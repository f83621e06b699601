//! The statement in flight as a value: what the pipeline's stages learn of it and tell
//! each other, held in a slot that exists only while a statement is in flight (an idle
//! session holds a null pointer, not the state).

use super::identity;
use crate::analytics::CacheUse;
use sluice_wire::response::ErrPacket;
use sluice_wire::tracker::Outcome;
use std::sync::Arc;

/// What the pipeline's stages learn of the statement in flight and tell each other:
/// made afresh for every command, so nothing of one statement reaches the next.
#[derive(Default)]
pub(super) struct InFlight {
    /// A routing rule's time limit.
    pub(super) timeout: Option<std::time::Duration>,
    /// Where it was routed.
    pub(super) target: Option<crate::router::Target>,
    /// The router that routed it spreads writes over several nodes (Galera), read once
    /// with the route rather than by the relay and the finish each.
    pub(super) spreads_writes: bool,
    /// It may be sent again elsewhere if its server is lost before any of the
    /// response reached the client (plain reads outside transactions).
    pub(super) retry_armed: bool,
    /// The server a read was lost on: its retry goes elsewhere (the pool may still
    /// hold connections to it that look fine).
    pub(super) avoid: Option<Arc<crate::router::Member>>,
    /// A certification conflict (1213) before any reply sends it again: an autocommit
    /// statement of a session whose writes spread over a Galera cluster.
    pub(super) conflict_retry: bool,
    /// A lost server ends only this statement, not the session: multiplexed, outside
    /// a transaction, holding nothing on that connection.
    pub(super) survive_loss: bool,
    /// The error for a statement whose server was lost inside a transaction, when
    /// nothing can have been committed.
    pub(super) loss_error: Option<ErrPacket>,
    /// What it got: its response, the server that answered, the cache's part, and the
    /// request's size.
    pub(super) outcome: Outcome,
    pub(super) served_by: Option<Arc<crate::backend::Server>>,
    pub(super) cache_use: CacheUse,
    /// What the cache's lookup before routing found, for the stage after the lease.
    pub(super) cache_step: super::cached::CacheStep,
    pub(super) request_len: u64,
    /// Bytes written to the client before it.
    pub(super) sent_before: u64,
    /// It started inside a transaction.
    pub(super) in_transaction: bool,
    /// With `[[shards]]`, it ran on several shards (a read put together, a split insert).
    pub(super) scattered: bool,
    /// It reads the process list: its thread ids are translated.
    pub(super) processlist: Option<identity::ProcesslistIds>,
    /// Its `CONNECTION_ID()` was replaced: never cached.
    pub(super) identity_rewritten: bool,
    /// An autocommit write sent inside a `BEGIN` ... `COMMIT` Sluice adds
    /// (`failover.wrap_autocommit_writes`), so that its own OK is in hand before it
    /// commits.
    pub(super) wrap_commit: bool,
    /// That write's OK payload, as the client is to get it, when its `COMMIT`'s reply
    /// was lost: what the client hears if the new writer has the commit.
    pub(super) held_ok: Option<Vec<u8>>,
    /// The answer the client sees, recorded for transaction replay's digest.
    pub(super) replay_record: Option<super::cached::Recording>,
    /// It may set a server global: new sessions read them again.
    pub(super) may_set_global: bool,
    /// What `ROW_COUNT()` in it reads, when Sluice answers it rather than the server
    /// (after a wrapped write).
    pub(super) prior_rows: Option<i64>,
    /// Its text's `ROW_COUNT()` was answered so: it still runs where the function
    /// would have, so that the writer's count is the one it leaves.
    pub(super) row_count_answered: bool,
    /// A statement prepared on its connection for this execute alone (its
    /// `ROW_COUNT()` answered), closed once it ran.
    pub(super) one_off: Option<u32>,
    /// Its trace span, when it is traced (`[tracing]`).
    pub(super) trace: Option<Box<crate::trace::StatementSpan>>,
    /// When it began, when `[log] slow_statement` is set.
    pub(super) started: Option<std::time::Instant>,
}

impl InFlight {
    /// A stage of the statement's span from `at` until now, when it is traced.
    #[inline]
    pub(super) fn stage(
        &mut self,
        name: &'static str,
        at: Option<std::time::Instant>,
        attributes: Vec<(&'static str, crate::trace::Value)>,
    ) {
        if let (Some(at), Some(span)) = (at, self.trace.as_deref_mut()) {
            span.stage(name, at, attributes);
        }
    }

    /// The cache's lookup after the lease decided (a hit served, a miss to fill).
    #[inline]
    pub(super) fn cache_decided(&mut self) {
        let at = self.trace.as_deref_mut().and_then(|t| t.cache_at.take());
        self.cache_stage(at);
    }

    /// A lookup of the cache that began at `at` decided now, when it found an entry or
    /// a rule matched: part of the span's `cache lookup` stage.
    #[inline]
    pub(super) fn cache_stage(&mut self, at: Option<std::time::Instant>) {
        let Some(at) = at else { return };
        let looked = self.cache_use != CacheUse::None
            || matches!(
                self.cache_step,
                super::cached::CacheStep::Missed(_) | super::cached::CacheStep::Revalidate(..)
            );
        if let (true, Some(span)) = (looked, self.trace.as_deref_mut()) {
            let first = span.cache_lookup.map_or(at, |(first, _)| first);
            span.cache_lookup = Some((first, std::time::Instant::now()));
        }
    }
}

/// Where the statement in flight is kept: on the heap while one is, and nowhere between
/// statements, so that an idle session does not keep its 384 bytes. Read while none is
/// in flight (a command answered without the pipeline), it is a fresh statement's state;
/// written, it is made.
#[derive(Default)]
pub(super) struct InFlightSlot(Option<Box<InFlight>>);

/// What the slot reads as while empty: a statement's state as it starts.
static NONE_IN_FLIGHT: std::sync::LazyLock<InFlight> = std::sync::LazyLock::new(InFlight::default);

impl InFlightSlot {
    /// A new statement's state, in place of the last one's.
    #[inline]
    pub(super) fn start(&mut self, new: InFlight) {
        match &mut self.0 {
            Some(held) => **held = new,
            None => self.0 = Some(Box::new(new)),
        }
    }

    /// Frees the last statement's state, once its command is answered.
    #[inline]
    pub(super) fn release(&mut self) {
        self.0 = None;
    }

    #[cfg(test)]
    pub(super) fn is_held(&self) -> bool {
        self.0.is_some()
    }
}

impl std::ops::Deref for InFlightSlot {
    type Target = InFlight;

    #[inline]
    fn deref(&self) -> &InFlight {
        self.0.as_deref().unwrap_or(&NONE_IN_FLIGHT)
    }
}

impl std::ops::DerefMut for InFlightSlot {
    #[inline]
    fn deref_mut(&mut self) -> &mut InFlight {
        self.0.get_or_insert_with(Box::default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_kept_only_while_in_flight_and_each_starts_afresh() {
        let mut slot = InFlightSlot::default();
        assert!(!slot.is_held());
        // Read between statements: a statement's state as it starts, made by no one.
        assert_eq!(slot.request_len, 0);
        assert!(!slot.is_held());
        slot.start(InFlight {
            request_len: 40,
            ..InFlight::default()
        });
        slot.in_transaction = true;
        assert!(slot.is_held() && slot.in_transaction && slot.request_len == 40);
        slot.start(InFlight {
            request_len: 9,
            ..InFlight::default()
        });
        assert!(
            !slot.in_transaction,
            "nothing of one statement reaches the next"
        );
        slot.release();
        assert!(!slot.is_held());
        assert_eq!(slot.request_len, 0);
        // Written outside a statement (a command answered without the pipeline), it is
        // made, and freed again at the command's end.
        slot.may_set_global = true;
        assert!(slot.is_held());
        slot.release();
        assert!(!slot.is_held() && !slot.may_set_global);
    }
}
