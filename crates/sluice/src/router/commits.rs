//! Whether a commit whose reply was lost with its writer can be on the new writer.
//!
//! Each commit acknowledged through Sluice reports its GTID (`last_gtid` tracking),
//! and a failover notes what the new writer received of the old one. A commit sent
//! while `floor` was the latest GTID acknowledged can only be on the new writer as a
//! GTID past `floor` that no one was told of: when every GTID between `floor` and
//! what the new writer received was acknowledged to someone, it is not there, and
//! running it again there applies it once. Anything else (a writer that is not the
//! one promoted, a GTID written around Sluice or by a session whose reply was lost
//! too, a floor older than what is kept) leaves the outcome unknown.

use super::gtid::GtidPos;
use super::Member;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// How many acknowledged GTIDs are kept per replication domain: a commit sent before
/// the oldest kept can't be told apart.
const KEPT: usize = 1 << 16;

#[derive(Default)]
pub struct Commits {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The latest acknowledged sequence numbers, per domain.
    acked: BTreeMap<u32, BTreeSet<u64>>,
    /// The writer the last failover promoted, and what it had received of the old one.
    promoted: Option<(Arc<Member>, GtidPos)>,
}

impl Commits {
    /// A session was told its write committed with `gtid`.
    pub fn acknowledged(&self, gtid: &GtidPos) {
        let mut inner = self.inner.lock();
        for (domain, seq) in gtid.sequences() {
            let kept = inner.acked.entry(domain).or_default();
            kept.insert(seq);
            if kept.len() > KEPT {
                kept.pop_first();
            }
        }
    }

    /// A failover made `writer` the writer, with `received` of the lost one.
    pub fn promoted(&self, writer: &Arc<Member>, received: GtidPos) {
        self.inner.lock().promoted = Some((writer.clone(), received));
    }

    /// Whether a commit sent while `floor` was the latest GTID acknowledged is surely
    /// not on `writer`.
    pub fn absent_from(&self, writer: &Arc<Member>, floor: &GtidPos) -> bool {
        let inner = self.inner.lock();
        let Some((promoted, received)) = &inner.promoted else {
            return false;
        };
        if !Arc::ptr_eq(promoted, writer) {
            return false;
        }
        let absent = received.sequences().all(|(domain, top)| {
            let low = floor.sequence(domain).unwrap_or(0);
            if top <= low {
                return true;
            }
            let span = top - low;
            inner.acked.get(&domain).is_some_and(|kept| {
                span <= KEPT as u64 && kept.range(low + 1..=top).count() as u64 == span
            })
        });
        absent
    }
}

/// Sessions whose statement was lost with the writer and that wait to run their
/// transaction again on the new one. While any does, other statements for the writer
/// wait (bounded): each replay reads what its transaction read before, not what a
/// commit after the failover wrote, which would make its answers differ.
#[derive(Default)]
pub struct ReplayGate {
    pending: AtomicUsize,
    done: Notify,
}

/// A replay the gate waits for, until dropped.
pub struct Ticket(Arc<ReplayGate>);

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.done.notify_waiters();
        }
    }
}

impl ReplayGate {
    pub fn enter(self: &Arc<Self>) -> Ticket {
        self.pending.fetch_add(1, Ordering::AcqRel);
        Ticket(self.clone())
    }

    /// Waits until no replay is pending, at most `bound`. False: none was.
    pub async fn wait(&self, bound: Duration) -> bool {
        if self.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.pending.load(Ordering::Acquire) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return true;
            }
        }
    }
}
