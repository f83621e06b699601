//! The cache's decision for the statement in flight, made once before routing and kept
//! on it (as Pingora keeps its `CachePhase`): the stage after the lease acts on it
//! rather than parsing hints, building the key and looking the store up again.

use super::CacheState;
use crate::cache::{Entry, KeyHash, QueryCache};
use std::sync::Arc;

/// What the lookup before routing found, for a statement it did not answer.
#[derive(Default)]
pub(in crate::frontend::session) enum CacheStep {
    /// Not looked up (no cache, not a read it could answer, a hint, a session holding
    /// state on its connection, a statement too large): the stage after the lease
    /// decides alone, as it would without this step.
    #[default]
    Unasked,
    /// A cacheable read the store does not hold: its key, for the fill.
    Missed(Keyed),
    /// An entry past its TTL within its rule's stale-while-revalidate window, whose
    /// refresh this session won: served, then fetched again on a connection in line
    /// with the session, so it waits for the lease.
    Revalidate(Keyed, Refresh),
}

impl CacheStep {
    /// The step as it stands after the lease: a key built under session settings the
    /// session no longer has (its connection was reset, its settings changed) counts
    /// for nothing, and the statement is keyed again.
    pub(super) fn still_for(self, state: &CacheState) -> CacheStep {
        let holds = |k: &Keyed| {
            state
                .prefix
                .as_deref()
                .is_some_and(|p| p.len() == k.prefix_len && k.key.starts_with(p))
        };
        match &self {
            CacheStep::Missed(k) | CacheStep::Revalidate(k, _) if !holds(k) => CacheStep::Unasked,
            _ => self,
        }
    }
}

/// A statement's cache key and how much of it is the session's part.
pub(in crate::frontend::session) struct Keyed {
    pub(super) key: Vec<u8>,
    pub(super) prefix_len: usize,
    /// The hash the lookup worked out, for the fill (a key is hashed once).
    pub(super) hash: KeyHash,
}

/// The right to refresh a stale entry, given back if the statement never gets to it
/// (the lease failed, the session ended), so that the next reader refreshes instead.
pub(in crate::frontend::session) struct Refresh {
    cache: Arc<QueryCache>,
    pub(super) entry: Arc<Entry>,
    taken: bool,
}

impl Refresh {
    pub(super) fn new(cache: Arc<QueryCache>, entry: Arc<Entry>) -> Refresh {
        Refresh {
            cache,
            entry,
            taken: false,
        }
    }

    /// The refresh is under way: its end is the caller's to report.
    pub(super) fn take(mut self) -> Arc<Entry> {
        self.taken = true;
        self.entry.clone()
    }
}

impl Drop for Refresh {
    fn drop(&mut self) {
        if !self.taken {
            self.cache.refresh_failed(&self.entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::config::CacheConfig;
    use crate::cache::tests::{fill, stale_while_revalidate};
    use crate::cache::Lookup;
    use std::time::{Duration, Instant};

    fn keyed(prefix: &[u8], statement: &[u8]) -> Keyed {
        let key = crate::cache::key(prefix, 3, statement, &[]);
        Keyed {
            hash: crate::cache::Hashed::new(&key).key_hash(),
            key,
            prefix_len: prefix.len(),
        }
    }

    #[test]
    fn a_key_counts_only_under_the_settings_it_was_built_with() {
        let cache = QueryCache::new(&CacheConfig::default()).unwrap();
        let mut state = CacheState::new(cache);
        let missed = || CacheStep::Missed(keyed(b"user|utf8mb4", b"SELECT 1"));
        assert!(
            matches!(missed().still_for(&state), CacheStep::Unasked),
            "settings unknown"
        );
        state.prefix = Some(b"user|utf8mb4".to_vec());
        assert!(matches!(missed().still_for(&state), CacheStep::Missed(_)));
        state.prefix = Some(b"user|latin1".to_vec());
        assert!(
            matches!(missed().still_for(&state), CacheStep::Unasked),
            "settings changed"
        );
        // A shorter prefix the key happens to start with is other settings too.
        state.prefix = Some(b"user|utf8".to_vec());
        assert!(matches!(missed().still_for(&state), CacheStep::Unasked));
        assert!(matches!(
            CacheStep::Unasked.still_for(&state),
            CacheStep::Unasked
        ));
    }

    #[test]
    fn a_refresh_not_taken_goes_to_the_next_reader() {
        let cache = stale_while_revalidate(Duration::ZERO);
        let ticket = fill(&cache, b"k", &[]);
        assert!(cache.store(ticket, vec![1]));
        // Past a TTL of zero as soon as any time has passed.
        let stored = Instant::now();
        while stored.elapsed().is_zero() {}
        let stale = |cache: &Arc<QueryCache>| match cache.lookup(b"k") {
            Lookup::Stale { entry, refresh } => (entry, refresh),
            _ => panic!("a stale entry"),
        };
        let (entry, refresh) = stale(&cache);
        assert!(refresh);
        drop(Refresh::new(cache.clone(), entry));
        let (entry, refresh) = stale(&cache);
        assert!(refresh, "given back when its statement never got to it");
        let taken = Refresh::new(cache.clone(), entry).take();
        assert!(!stale(&cache).1, "under way: no one else refreshes");
        cache.refresh_failed(&taken);
        assert!(stale(&cache).1);
    }
}
