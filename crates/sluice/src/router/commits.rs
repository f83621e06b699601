//! Whether a commit whose reply was lost with its writer is on the new writer.
//!
//! Each commit acknowledged through Sluice reports its GTID (`last_gtid` tracking),
//! and a failover notes what the new writer received of the old one. A commit sent
//! while `floor` was the latest GTID acknowledged can only be on the new writer as a
//! GTID past `floor` that no one was told of. When every GTID between `floor` and what
//! the new writer received was acknowledged to someone, it is not there, and running
//! it again there applies it once.
//!
//! Otherwise the failover reads those unacknowledged transactions back from the new
//! writer's binlog, with the old primary's connection that ran each (statement events
//! name it: statement-based and mixed logging). The lost commit is there when exactly
//! one of them was run by its connection, and surely not when all of them were run by
//! others. Anything else (a transaction whose events name no connection, a writer that
//! is not the one promoted, a floor older than what is kept or than the scan) leaves
//! the outcome unknown.

use super::gtid::GtidPos;
use super::Member;
use crate::binlog::scan::Logged;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// The earliest floor of the commits lost in flight since the last promotion: where
    /// the next failover's binlog scan starts.
    in_doubt: Option<GtidPos>,
    promoted: Option<Promotion>,
}

/// The last failover's new writer, what it had received of the old one, and what its
/// binlog holds after the scan's start.
struct Promotion {
    writer: Arc<Member>,
    received: GtidPos,
    scanned: Option<Scan>,
}

struct Scan {
    from: GtidPos,
    /// By domain and sequence number.
    logged: HashMap<(u32, u64), Logged>,
}

/// What became of a commit lost in flight with its writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Surely not on the new writer: it can run again there.
    Absent,
    /// On the new writer: it committed, as `gtid`, with the auto-increment value its
    /// transaction's first `INSERT_ID` event gave (none: it generated none, or the log
    /// can't say).
    Committed {
        gtid: GtidPos,
        insert_id: Option<u64>,
    },
    Unknown,
}

/// A commit (or autocommit write) whose reply was lost with its writer.
#[derive(Debug, Clone)]
pub struct InDoubt {
    /// The latest GTID acknowledged when it was sent.
    pub floor: GtidPos,
    /// The connection id of the old writer's connection it was sent on.
    pub thread: u32,
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

    /// A failover promoted a server that has `has` of the old writer: acknowledged
    /// commits past it were lost (asynchronous replication), and the new writer will
    /// log its own under the same sequence numbers, which must not pass for them.
    pub fn forget_beyond(&self, has: &GtidPos) {
        let mut inner = self.inner.lock();
        inner.acked.retain(|domain, kept| {
            let Some(top) = has.sequence(*domain) else {
                return false;
            };
            kept.retain(|seq| *seq <= top);
            true
        });
    }

    /// A commit sent while `floor` was the latest acknowledged lost its reply: the next
    /// failover looks for what it can't tell apart from the acknowledged ones.
    pub fn lost_in_flight(&self, floor: &GtidPos) {
        let mut inner = self.inner.lock();
        match &mut inner.in_doubt {
            Some(earliest) => earliest.meet(floor),
            None => inner.in_doubt = Some(floor.clone()),
        }
    }

    /// Whether a commit lost its reply since the last failover settled them.
    pub fn in_doubt(&self) -> bool {
        self.inner.lock().in_doubt.is_some()
    }

    /// Where a failover whose new writer `received` this of the old one must read the
    /// new writer's binlog from, to settle the commits lost in flight since the last
    /// one. None: there is nothing acknowledgements can't settle.
    pub fn scan_from(&self, received: &GtidPos) -> Option<GtidPos> {
        let mut inner = self.inner.lock();
        let from = inner.in_doubt.take()?;
        let mut settled = true;
        for (domain, top) in received.sequences() {
            match unacked(&inner.acked, domain, from.sequence(domain), top) {
                // Older than what is kept: no scan can tell either.
                None => return None,
                Some(missing) => settled &= missing.is_empty(),
            }
        }
        (!settled && !from.is_empty()).then_some(from)
    }

    /// A failover made `writer` the writer, with `received` of the lost one, and read
    /// its binlog after `scanned.0` (None: it did not, or could not).
    pub fn promoted(
        &self,
        writer: &Arc<Member>,
        received: GtidPos,
        scanned: Option<(GtidPos, Vec<Logged>)>,
    ) {
        let scanned = scanned.map(|(from, logged)| Scan {
            from,
            logged: logged.into_iter().map(|l| ((l.domain, l.seq), l)).collect(),
        });
        self.inner.lock().promoted = Some(Promotion {
            writer: writer.clone(),
            received,
            scanned,
        });
    }

    /// Whether `lost` is on `writer`.
    pub fn outcome(&self, writer: &Arc<Member>, lost: &InDoubt) -> Outcome {
        let inner = self.inner.lock();
        let Some(p) = &inner.promoted else {
            return Outcome::Unknown;
        };
        if !Arc::ptr_eq(&p.writer, writer) {
            return Outcome::Unknown;
        }
        let mut found = Vec::new();
        for (domain, top) in p.received.sequences() {
            let low = lost.floor.sequence(domain);
            let Some(missing) = unacked(&inner.acked, domain, low, top) else {
                return Outcome::Unknown;
            };
            if missing.is_empty() {
                continue;
            }
            let Some(scan) = &p.scanned else {
                return Outcome::Unknown;
            };
            if scan.from.sequence(domain) > low {
                return Outcome::Unknown;
            }
            let server = p.received.server(domain);
            for seq in missing {
                match scan.logged.get(&(domain, seq)) {
                    Some(l) if Some(l.server) == server && l.thread.is_some() => {
                        if l.thread == Some(lost.thread) {
                            found.push(l);
                        }
                    }
                    _ => return Outcome::Unknown,
                }
            }
        }
        match found[..] {
            [] => Outcome::Absent,
            [l] => Outcome::Committed {
                gtid: GtidPos::of(l.domain, l.server, l.seq),
                insert_id: l.insert_id,
            },
            _ => Outcome::Unknown,
        }
    }
}

/// The sequence numbers of `domain` after `low` up to `top` that no one was told of;
/// None when that can't be known (older than what is kept).
fn unacked(
    acked: &BTreeMap<u32, BTreeSet<u64>>,
    domain: u32,
    low: Option<u64>,
    top: u64,
) -> Option<Vec<u64>> {
    let low = low.unwrap_or(0);
    if top <= low {
        return Some(Vec::new());
    }
    if top - low > KEPT as u64 {
        return None;
    }
    let kept = acked.get(&domain);
    if kept.is_some_and(|k| k.len() >= KEPT && k.first().is_some_and(|f| *f > low + 1)) {
        return None;
    }
    Some(
        (low + 1..=top)
            .filter(|s| !kept.is_some_and(|k| k.contains(s)))
            .collect(),
    )
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
