//! Where entries live: a sharded map under a byte budget, evicting by GreedyDual-Size-
//! Frequency (an entry's worth is its hits times the backend time it saves, per byte),
//! so many small hot results outlive one big cold one. Never holds more than the budget.

use super::Entry;
use crate::id_hash::IdHasher;
use hashbrown::{Equivalent, HashMap, HashTable};
use parking_lot::Mutex;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

/// How keys are hashed: a key holds the whole statement text and the session's
/// settings, and the standard SipHash took some 1,500 instructions a key. aHash is as
/// resistant to chosen keys (its seeds are random per process) and several times
/// faster. A key is hashed once per use of the cache ([`Store::hashed`]): the shard,
/// the shard's map and the fills under way all take that one hash, where each hashed
/// the key again (ten times for a miss that fills). One seed per process, so that a
/// key's hash ([`KeyHash`]) holds for every store: a lookup that misses hands it to the
/// fill that follows.
static KEY_HASHER: std::sync::LazyLock<ahash::RandomState> =
    std::sync::LazyLock::new(ahash::RandomState::new);

/// The hash of a key, as a lookup that missed worked it out, for the fill that follows
/// it: a miss that fills hashes its key once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash(u64);

/// A key with its hash, to look up.
#[derive(Clone, Copy)]
pub struct Hashed<'a> {
    pub bytes: &'a [u8],
    hash: u64,
}

/// A key with its hash, as maps keep it.
#[derive(Clone)]
pub struct KeptKey {
    bytes: Arc<[u8]>,
    hash: u64,
}

impl<'a> Hashed<'a> {
    /// `key` with its hash worked out.
    pub fn new(key: &'a [u8]) -> Hashed<'a> {
        Hashed {
            bytes: key,
            hash: KEY_HASHER.hash_one(key),
        }
    }

    /// `key` with the hash a lookup of the same key worked out.
    pub fn with(key: &'a [u8], hash: KeyHash) -> Hashed<'a> {
        debug_assert_eq!(Hashed::new(key).hash, hash.0, "a key's hash is its own");
        Hashed {
            bytes: key,
            hash: hash.0,
        }
    }

    pub fn key_hash(&self) -> KeyHash {
        KeyHash(self.hash)
    }

    pub fn kept(&self) -> KeptKey {
        KeptKey {
            bytes: self.bytes.into(),
            hash: self.hash,
        }
    }
}

impl KeptKey {
    pub fn hashed(&self) -> Hashed<'_> {
        Hashed {
            bytes: &self.bytes,
            hash: self.hash,
        }
    }
}

// Maps of kept keys hash only the hash (compared whole on a match, never by hash).
impl Hash for KeptKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl Hash for Hashed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialEq for KeptKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.bytes == other.bytes
    }
}

impl Eq for KeptKey {}

impl Equivalent<KeptKey> for Hashed<'_> {
    fn equivalent(&self, key: &KeptKey) -> bool {
        self.hash == key.hash && *self.bytes == *key.bytes
    }
}

/// A map by kept key: what it hashes is the key's hash.
pub type KeptMap<V> = HashMap<KeptKey, V, BuildHasherDefault<IdHasher>>;

/// Bytes counted per entry on top of its key and response: map slot, queue node, the
/// entry's own fields and its dependency list.
pub const ENTRY_OVERHEAD: u64 = 256;

const SHARDS: usize = 8;

/// What an entry is charged against the budget.
pub fn charge(key: &[u8], entry: &Entry) -> u64 {
    key.len() as u64 + entry.response.len() as u64 + ENTRY_OVERHEAD + 16 * entry.deps_len() as u64
}

pub struct Store {
    shards: Box<[Mutex<Shard>]>,
    shard_budget: u64,
}

/// An entry's place in the eviction order: its priority's bits, then a sequence number
/// that breaks ties and is never reused in its shard, so that it names one slot.
type Order = (u64, u64);

#[derive(Default)]
struct Shard {
    /// Each key with its slot, placed by the hash the key carries.
    map: HashTable<(KeptKey, Slot)>,
    /// Eviction order, lowest priority first: each slot's order with its key's hash.
    /// Pruned lazily: a slot removed or queued again leaves its old item behind, which
    /// the eviction that pops it skips (its order no longer names a slot), and the queue
    /// is rebuilt from the map when such items outnumber the live ones. A removal or a
    /// replacement then never walks the queue, and an insert pushes at its tail: the
    /// ordered map this replaced cost a miss that fills two walks of a large tree.
    queue: BinaryHeap<Reverse<(Order, u64)>>,
    /// GDSF's inflation value: the priority of the last victim, so that entries that
    /// stopped being hit eventually fall below newcomers.
    clock: f64,
    bytes: u64,
    seq: u64,
}

struct Slot {
    entry: Arc<Entry>,
    order: Order,
    hits: u64,
    /// `hits` when `order` was computed: the queue is brought up to date lazily, by the
    /// eviction that finds an entry hit since (so a hit never touches the queue).
    queued_hits: u64,
    charge: u64,
}

/// Entries pushed out to make room or replaced, for the caller's statistics.
#[derive(Default)]
pub struct Evicted(pub Vec<Arc<Entry>>);

/// What [`Store::get_unless`] found under a key.
pub enum Found<D> {
    Absent,
    /// Kept, its hit counted.
    Kept(Arc<Entry>),
    /// Removed, for the reason the judge gave.
    Removed(Arc<Entry>, D),
}

impl Store {
    pub fn new(budget: u64) -> Store {
        Store {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_budget: budget / SHARDS as u64,
        }
    }

    /// The largest charge an entry may have.
    pub fn max_charge(&self) -> u64 {
        self.shard_budget
    }

    /// `key` with its hash, for every use of the store and the fills under way.
    pub fn hashed<'a>(&self, key: &'a [u8]) -> Hashed<'a> {
        Hashed::new(key)
    }

    /// The shard by bits of the hash the shard's map does not use to place a key (it
    /// takes the low bits for the bucket and the top seven for its control bytes).
    fn shard(&self, key: Hashed<'_>) -> &Mutex<Shard> {
        &self.shards[(key.hash >> 40) as usize % SHARDS]
    }

    /// The entry under `key`, counting the hit towards its priority.
    #[cfg(test)]
    pub fn get(&self, key: Hashed<'_>) -> Option<Arc<Entry>> {
        match self.get_unless(key, |_| None::<()>) {
            Found::Kept(entry) => Some(entry),
            _ => None,
        }
    }

    /// The entry under `key`, judged under its shard's lock: removed there when `dead`
    /// gives a reason (one lock and one probe for a lookup that finds an entry expired or
    /// invalidated, where it took a second of each to remove it), else kept with its hit
    /// counted towards its priority.
    pub fn get_unless<D>(
        &self,
        key: Hashed<'_>,
        dead: impl FnOnce(&Entry) -> Option<D>,
    ) -> Found<D> {
        let mut guard = self.shard(key).lock();
        let shard = &mut *guard;
        let Ok(mut found) = shard.map.find_entry(key.hash, |(k, _)| key.equivalent(k)) else {
            return Found::Absent;
        };
        if let Some(why) = dead(&found.get().1.entry) {
            let ((_, slot), _) = found.remove();
            shard.bytes -= slot.charge;
            shard.prune();
            return Found::Removed(slot.entry, why);
        }
        let slot = &mut found.get_mut().1;
        slot.hits += 1;
        Found::Kept(slot.entry.clone())
    }

    /// Stores `entry`, evicting the least valuable entries of its shard until it fits.
    /// Returns `Err` (and stores nothing) when it can never fit.
    pub fn insert(&self, key: KeptKey, entry: Arc<Entry>) -> Result<Evicted, Arc<Entry>> {
        let charge = charge(&key.bytes, &entry);
        if charge > self.shard_budget {
            return Err(entry);
        }
        let mut evicted = Evicted::default();
        let mut guard = self.shard(key.hashed()).lock();
        let shard = &mut *guard;
        if let Some(old) = shard.remove(key.hashed()) {
            evicted.0.push(old);
        }
        while shard.bytes + charge > self.shard_budget && shard.evict_one(&mut evicted) {}
        shard.seq += 1;
        let order = (priority(shard.clock, 1, &entry, charge), shard.seq);
        let hash = key.hash;
        let slot = Slot {
            entry,
            order,
            hits: 1,
            queued_hits: 1,
            charge,
        };
        shard.map.insert_unique(hash, (key, slot), |(k, _)| k.hash);
        shard.bytes += charge;
        shard.queue.push(Reverse((order, hash)));
        shard.prune();
        Ok(evicted)
    }

    /// Whether an entry is stored under `key` (without counting a hit).
    pub fn contains(&self, key: Hashed<'_>) -> bool {
        let shard = self.shard(key).lock();
        shard
            .map
            .find(key.hash, |(k, _)| key.equivalent(k))
            .is_some()
    }

    /// Removes the entry under `key` if it is still `expected` (another session may
    /// have refilled it meanwhile).
    #[cfg(test)]
    pub fn remove_if(&self, key: Hashed<'_>, expected: &Arc<Entry>) -> bool {
        let expected = |e: &Entry| std::ptr::eq(e, &**expected).then_some(());
        matches!(self.get_unless(key, expected), Found::Removed(..))
    }

    pub fn remove(&self, key: Hashed<'_>) -> Option<Arc<Entry>> {
        self.shard(key).lock().remove(key)
    }

    /// Every entry with its key and hits, most hit first: what a hand-over carries.
    pub fn entries(&self) -> Vec<(Vec<u8>, Arc<Entry>, u64)> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            all.extend(
                (shard.map.iter())
                    .map(|(k, slot)| (k.bytes.to_vec(), slot.entry.clone(), slot.hits)),
            );
        }
        all.sort_by_key(|e| std::cmp::Reverse(e.2));
        all
    }

    /// Removes every entry for which `drop` is true and returns them.
    pub fn remove_where(&self, mut drop: impl FnMut(&Entry) -> bool) -> Vec<Arc<Entry>> {
        let mut removed = Vec::new();
        for shard in self.shards.iter() {
            let mut guard = shard.lock();
            let shard = &mut *guard;
            for (_, slot) in shard.map.extract_if(|(_, slot)| drop(&slot.entry)) {
                shard.bytes -= slot.charge;
                removed.push(slot.entry);
            }
            shard.prune();
        }
        removed
    }

    /// (entries, bytes charged) right now.
    pub fn usage(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock();
            (n + s.map.len() as u64, b + s.bytes)
        })
    }
}

impl Shard {
    fn remove(&mut self, key: Hashed<'_>) -> Option<Arc<Entry>> {
        let found = self.map.find_entry(key.hash, |(k, _)| key.equivalent(k));
        let ((_, slot), _) = found.ok()?.remove();
        self.bytes -= slot.charge;
        self.prune();
        Some(slot.entry)
    }

    /// Rebuilds the queue from the map once left-behind items outnumber live ones, so
    /// that it stays within twice the entries (the rebuild reads only the map's own
    /// memory, and is paid for by as many removals as there are entries).
    fn prune(&mut self) {
        if self.queue.len() > 2 * self.map.len() + 64 {
            let live = self.map.iter().map(|(k, s)| Reverse((s.order, k.hash)));
            self.queue = live.collect();
        }
    }

    /// Evicts the least valuable entry into `evicted` (or queues again one hit since it
    /// was queued). False when nothing is left to evict.
    fn evict_one(&mut self, evicted: &mut Evicted) -> bool {
        let Some(Reverse((order, hash))) = self.queue.pop() else {
            return false;
        };
        let Ok(mut found) = self.map.find_entry(hash, |(_, s)| s.order == order) else {
            // Left behind by a removal or a requeue.
            return true;
        };
        let slot = &mut found.get_mut().1;
        if slot.hits != slot.queued_hits {
            // Hit since it was queued: back in the queue at the priority its hits give
            // it now (GDSF would take the clock of its last hit, no later than now's: a
            // difference that only favours recent hits).
            self.seq += 1;
            slot.order = (
                priority(self.clock, slot.hits, &slot.entry, slot.charge),
                self.seq,
            );
            slot.queued_hits = slot.hits;
            self.queue.push(Reverse((slot.order, hash)));
            return true;
        }
        self.clock = f64::from_bits(order.0);
        let ((_, slot), _) = found.remove();
        self.bytes -= slot.charge;
        evicted.0.push(slot.entry);
        true
    }
}

/// GDSF priority: the clock plus hits × cost ÷ size. Non-negative, so the bit pattern of
/// the float orders like the float itself.
fn priority(clock: f64, hits: u64, entry: &Entry, charge: u64) -> u64 {
    let value = clock + hits as f64 * entry.cost_micros.max(1) as f64 / charge.max(1) as f64;
    value.to_bits()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::entry_of;

    fn key(store: &Store, i: usize) -> KeptKey {
        store.hashed(format!("key-{i}").as_bytes()).kept()
    }

    fn shard_of(store: &Store, k: &KeptKey) -> *const Mutex<Shard> {
        store.shard(k.hashed())
    }

    #[test]
    fn budget_is_never_exceeded_and_big_entries_are_refused() {
        let store = Store::new(80_000);
        for i in 0..2000 {
            let size = 100 + (i * 37) % 3000;
            let _ = store.insert(key(&store, i), entry_of(size, 50));
            let (_, bytes) = store.usage();
            assert!(bytes <= 80_000, "{bytes} bytes after {i} inserts");
        }
        assert!(store
            .insert(key(&store, 9999), entry_of(20_000, 50))
            .is_err());
    }

    #[test]
    fn small_hot_entries_outlive_a_big_cold_one() {
        let store = Store::new(8 * 40_000);
        let big = store.hashed(b"big").kept();
        // Find keys in the same shard as `big` so they compete for one budget.
        let same: Vec<KeptKey> = (0..10_000)
            .map(|i| key(&store, i))
            .filter(|k| shard_of(&store, k) == shard_of(&store, &big))
            .take(40)
            .collect();
        store.insert(big.clone(), entry_of(20_000, 100)).unwrap();
        for k in &same[..10] {
            store.insert(k.clone(), entry_of(1000, 100)).unwrap();
            for _ in 0..5 {
                store.get(k.hashed()).unwrap();
            }
        }
        // More small entries arrive: the big cold entry goes before the hot small ones.
        for k in &same[10..20] {
            store.insert(k.clone(), entry_of(1000, 100)).unwrap();
        }
        assert!(
            store.get(big.hashed()).is_none(),
            "the big cold entry should be gone"
        );
        for k in &same[..10] {
            assert!(store.get(k.hashed()).is_some());
        }
    }

    /// Keys are compared whole: two keys with one hash (as a forged or unlucky pair
    /// would have) are two entries, each found by its own bytes only.
    #[test]
    fn keys_with_one_hash_are_still_two_keys() {
        let store = Store::new(1 << 20);
        let mine = store.hashed(b"user=alice|SELECT * FROM orders");
        let theirs = Hashed {
            bytes: b"user=bob|SELECT * FROM orders",
            hash: mine.hash,
        };
        store.insert(mine.kept(), entry_of(10, 1)).unwrap();
        assert!(store.get(theirs).is_none());
        assert!(!store.contains(theirs));
        let second = entry_of(20, 1);
        store.insert(theirs.kept(), second.clone()).unwrap();
        assert!(Arc::ptr_eq(&store.get(theirs).unwrap(), &second));
        assert!(!Arc::ptr_eq(&store.get(mine).unwrap(), &second));
        assert_eq!(store.usage().0, 2);
    }

    /// Removals and replacements leave their queue items behind: the queue stays within
    /// twice the entries, and eviction skips what was left behind, so the budget holds and
    /// only live entries are evicted, each once.
    #[test]
    fn the_queue_is_pruned_and_eviction_skips_what_removals_left() {
        let store = Store::new(8 * 200_000);
        let keys: Vec<KeptKey> = (0..4000).map(|i| key(&store, i)).collect();
        for round in 0..3 {
            for k in &keys {
                store.insert(k.clone(), entry_of(10, 1 + round)).unwrap();
            }
        }
        for k in keys.iter().step_by(2) {
            assert!(store.remove(k.hashed()).is_some());
        }
        for shard in store.shards.iter() {
            let shard = shard.lock();
            assert!(shard.queue.len() <= 2 * shard.map.len() + 64);
            assert!(shard.queue.len() >= shard.map.len());
        }
        let (entries, _) = store.usage();
        assert_eq!(entries, 2000);
        // Entries that fill the budget: every old one goes, each evicted once.
        let mut evicted = Vec::new();
        for i in 0..4000 {
            let fresh = key(&store, 10_000 + i);
            evicted.extend(store.insert(fresh, entry_of(300, 1_000)).unwrap().0);
            assert!(store.usage().1 <= 8 * 200_000);
        }
        let mut seen = std::collections::HashSet::new();
        assert!(evicted.iter().all(|e| seen.insert(Arc::as_ptr(e))));
        for k in keys.iter().skip(1).step_by(2) {
            assert!(
                store.get(k.hashed()).is_none(),
                "old cheap entries go first"
            );
        }
    }

    #[test]
    fn replace_and_conditional_remove() {
        let store = Store::new(1 << 20);
        let first = entry_of(10, 1);
        store.insert(key(&store, 1), first.clone()).unwrap();
        let second = entry_of(20, 1);
        let evicted = store.insert(key(&store, 1), second.clone()).unwrap();
        assert!(Arc::ptr_eq(&evicted.0[0], &first));
        let one = key(&store, 1);
        assert!(!store.remove_if(one.hashed(), &first));
        assert!(store.remove_if(one.hashed(), &second));
        assert_eq!(store.usage(), (0, 0));
    }
}
