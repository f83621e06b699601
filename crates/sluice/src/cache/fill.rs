//! Filling entries: the single flight (the first session to miss a key fetches it,
//! the others wait for it), what a fill depends on, and storing what it fetched.

use super::*;

/// Outcome of asking to fill an entry.
pub enum Fill {
    /// Not worth storing (see [`stats::Admission`]): go to the server as if uncached.
    Declined,
    /// This session fetches; others wait on it.
    Leader(FillTicket),
    /// Another session is fetching the same entry: wait, then look up again.
    Follower(Arc<Flight>),
}

/// Another session's fetch in progress.
#[derive(Default)]
pub struct Flight {
    pub(super) done: AtomicBool,
    /// Sessions that waited: the leader wakes them only when there are any (most fills
    /// have none, and waking nobody still took the notifier's lock).
    pub(super) waiters: AtomicUsize,
    notify: tokio::sync::Notify,
}

impl Flight {
    /// Waits until the leader stores its entry or gives up, at most `limit`.
    pub async fn wait(&self, limit: Duration) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Counted before `done` is read, and the leader sets `done` before it reads the
        // count (both sequentially consistent): either the leader sees this waiter and
        // wakes it, or this waiter sees the flight done.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if self.done.load(Ordering::SeqCst) {
            return;
        }
        let _ = tokio::time::timeout(limit, notified).await;
    }

    fn end(&self) {
        self.done.store(true, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }
}

/// The right to fill one key. Dropping it without [`QueryCache::store`] releases
/// the waiters, who then go to the server themselves.
pub struct FillTicket {
    cache: Arc<QueryCache>,
    key: store::KeptKey,
    rule: Arc<Rule>,
    digest: Arc<DigestStats>,
    snapshot: Option<Snapshot>,
    started: Instant,
    flight: Arc<Flight>,
    /// Result rows of the response stored (for statistics of later hits).
    pub rows: u64,
}

impl Drop for FillTicket {
    fn drop(&mut self) {
        self.cache.inflight.lock().remove(&self.key);
        self.flight.end();
    }
}

impl QueryCache {
    /// Asks to fill `key`: the first asker becomes the leader, who must then say what
    /// the result depends on ([`Self::depend_on`]) before its query is sent.
    pub fn begin_fill(
        self: &Arc<Self>,
        key: &[u8],
        hash: Option<KeyHash>,
        rule: Arc<Rule>,
        digest: Arc<DigestStats>,
    ) -> Fill {
        rule.stats.miss();
        digest.misses.fetch_add(1, Ordering::Relaxed);
        Stats::incr(&self.totals.misses);
        if !digest.admission.admit() {
            return Fill::Declined;
        }
        let key = match hash {
            Some(hash) => store::Hashed::with(key, hash),
            None => self.store.hashed(key),
        };
        let (key, flight) = {
            let mut inflight = self.inflight.lock();
            if let Some(f) = inflight.get(&key) {
                return Fill::Follower(f.clone());
            }
            // A leader may have stored the entry since this session's lookup missed:
            // then there is nothing to fetch, only to look up again.
            if self.store.contains(key) {
                let done = Flight::default();
                done.done.store(true, Ordering::Release);
                return Fill::Follower(Arc::new(done));
            }
            let key = key.kept();
            let flight = Arc::new(Flight::default());
            inflight.insert(key.clone(), flight.clone());
            (key, flight)
        };
        Fill::Leader(FillTicket {
            cache: self.clone(),
            key,
            rule,
            digest,
            snapshot: None,
            started: Instant::now(),
            flight,
            rows: 0,
        })
    }

    /// Captures the generations a fill's result depends on, now: those of `tables` (of
    /// `rows`' table, only those of its keys). Must happen before the query is sent.
    pub fn depend_on(&self, ticket: &mut FillTicket, tables: &[TableRef], rows: Option<&RowSet>) {
        ticket.snapshot = Some(self.gens.capture(tables, rows, self.reads_view(tables)));
    }

    /// Stores the response the leader recorded. Refused when a write to its tables
    /// committed since the generations were captured: the result may predate it.
    pub fn store(&self, mut ticket: FillTicket, response: Vec<u8>) -> bool {
        let Some(snapshot) = ticket.snapshot.take() else {
            debug_assert!(false, "a fill stored without its dependencies");
            return false;
        };
        let rule = ticket.rule.clone();
        if let Err(cause) = self.gens.check(&snapshot) {
            rule.stats.raced(cause);
            ticket.digest.admission.dropped(false);
            return false;
        }
        if !rule.active.load(Ordering::Relaxed) {
            return false;
        }
        let len = response.len();
        let filled_at = Instant::now();
        let changed = snapshot.last_binlog_change();
        let entry = Arc::new(Entry {
            response: Bytes::from(response),
            filled_at,
            rule: rule.clone(),
            digest: ticket.digest.clone(),
            snapshot,
            cost_micros: ticket.started.elapsed().as_micros() as u64,
            rows: ticket.rows,
            refreshing: AtomicBool::new(false),
            read: AtomicBool::new(false),
        });
        match self.store.insert(ticket.key.clone(), entry) {
            Ok(evicted) => {
                rule.stats.filled(len);
                ticket.digest.fills.fetch_add(1, Ordering::Relaxed);
                if let Some(changed) = changed {
                    let after = filled_at.saturating_duration_since(changed);
                    rule.stats.filled_after_change.record(after);
                    ticket.digest.filled_after_change.record(after);
                }
                for e in evicted.0 {
                    e.rule.stats.evicted(e.response.len());
                    Stats::incr(&self.totals.evictions);
                }
                true
            }
            Err(_) => {
                rule.stats.not_stored();
                false
            }
        }
    }

    /// A fill that produced nothing storable (an error, a warning, too large...).
    pub fn not_stored(&self, ticket: FillTicket) {
        ticket.rule.stats.not_stored();
    }

    /// A stale entry's refresh failed: let the next reader try.
    pub fn refresh_failed(&self, entry: &Entry) {
        entry.refreshing.store(false, Ordering::Release);
    }

    /// A fill ticket for refreshing a stale entry (no single flight: only the session
    /// that won `refresh` asks), depending on what the entry depended on.
    pub fn begin_refresh(self: &Arc<Self>, key: Vec<u8>, entry: &Entry) -> FillTicket {
        FillTicket {
            cache: self.clone(),
            key: self.store.hashed(&key).kept(),
            rule: entry.rule.clone(),
            digest: entry.digest.clone(),
            snapshot: Some(self.gens.recapture(&entry.snapshot)),
            started: Instant::now(),
            flight: Arc::new(Flight::default()),
            rows: entry.rows,
        }
    }
}
