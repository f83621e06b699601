//! Connection attributes, one copy per distinct set. A client sends its attributes at
//! login (driver, version, process id, program) and the sessions of one application
//! process send the same ones: a pool of 100 connections kept 100 copies, 215 bytes
//! each for PyMySQL's, for as long as each session lived.

use parking_lot::Mutex;
use sluice_wire::handshake::Attributes;
use std::collections::HashSet;
use std::sync::Arc;

/// Below this many sets, no sweep: a handful of dead sets cost less than the sweeps.
const FIRST_SWEEP: usize = 64;

/// The attribute sets sessions hold now (and, until the next sweep, sets no session
/// holds any more).
pub struct AttributeSets {
    sets: Mutex<Sets>,
}

struct Sets {
    /// By content: an `Arc` hashes and compares as what it points to.
    held: HashSet<Arc<Attributes>, ahash::RandomState>,
    /// Sweep the sets no session holds once this many are kept: twice the number held
    /// at the last sweep, so that the sweeps cost a constant share of the logins.
    sweep_at: usize,
}

impl Default for AttributeSets {
    fn default() -> Self {
        AttributeSets {
            sets: Mutex::new(Sets {
                held: HashSet::default(),
                sweep_at: FIRST_SWEEP,
            }),
        }
    }
}

impl AttributeSets {
    /// The shared copy of `attributes`: the one other sessions hold, or a new one.
    pub fn share(&self, attributes: &Attributes) -> Arc<Attributes> {
        let mut sets = self.sets.lock();
        if let Some(held) = sets.held.get(attributes) {
            return held.clone();
        }
        if sets.held.len() >= sets.sweep_at {
            // Held here only: no session has these any more.
            sets.held.retain(|a| Arc::strong_count(a) > 1);
            sets.sweep_at = FIRST_SWEEP.max(2 * sets.held.len());
        }
        let shared = Arc::new(attributes.clone());
        sets.held.insert(shared.clone());
        shared
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.sets.lock().held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pid: u32) -> Attributes {
        vec![
            (b"_client_name".to_vec(), b"pymysql".to_vec()),
            (b"_pid".to_vec(), pid.to_string().into_bytes()),
        ]
    }

    #[test]
    fn sessions_with_the_same_attributes_share_one_copy() {
        let sets = AttributeSets::default();
        let a = sets.share(&set(1));
        let b = sets.share(&set(1));
        let c = sets.share(&set(2));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!((&*a, &*c), (&set(1), &set(2)));
        assert_eq!(sets.kept(), 2);
    }

    #[test]
    fn sets_no_session_holds_are_swept_as_new_ones_come() {
        let sets = AttributeSets::default();
        let kept: Vec<_> = (0..10).map(|pid| sets.share(&set(pid))).collect();
        for pid in 10..10 + FIRST_SWEEP as u32 {
            drop(sets.share(&set(pid)));
        }
        // The sweep ran once the first 64 were kept: only the held ten survived it.
        assert!(sets.kept() < 10 + FIRST_SWEEP, "{}", sets.kept());
        for _ in 0..1000 {
            drop(sets.share(&set(99_999)));
        }
        let again = sets.share(&set(3));
        assert!(Arc::ptr_eq(&again, &kept[3]), "a held set is never swept");
        drop(kept);
        for pid in 100_000..100_000 + 4 * FIRST_SWEEP as u32 {
            drop(sets.share(&set(pid)));
        }
        assert!(sets.kept() <= 2 * FIRST_SWEEP, "{}", sets.kept());
    }
}
