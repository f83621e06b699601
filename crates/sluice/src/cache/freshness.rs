//! How fresh what the cache serves is: the age of each hit (how long ago its entry was
//! filled), and for tables followed through the binlog, how long after the table's last
//! change an entry was filled. Each is a histogram of fixed buckets kept in atomics, per
//! rule and per digest, so recording one costs a few uncontended additions on the hit
//! path and no lock.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Upper bounds of the buckets, in seconds, as `/metrics` writes them: from a
/// millisecond (a hit right after its fill) to the TTLs rules use (minutes).
pub const AGE_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0,
];

const BOUNDS_US: [u64; 14] = {
    let mut out = [0u64; 14];
    let mut i = 0;
    while i < AGE_BUCKETS.len() {
        out[i] = (AGE_BUCKETS[i] * 1e6) as u64;
        i += 1;
    }
    out
};

/// One count a bucket, and one more for the ages past the last bound.
const SLOTS: usize = AGE_BUCKETS.len() + 1;

/// A histogram of durations.
#[derive(Default)]
pub struct AgeHistogram {
    counts: [AtomicU64; SLOTS],
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl AgeHistogram {
    pub fn record(&self, age: Duration) {
        let us = u64::try_from(age.as_micros()).unwrap_or(u64::MAX);
        let slot = BOUNDS_US.partition_point(|&bound| bound < us);
        self.counts[slot].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
        // Read first: the maximum rarely moves, and a read leaves the line shared.
        if us > self.max_us.load(Relaxed) {
            self.max_us.fetch_max(us, Relaxed);
        }
    }

    pub fn snapshot(&self) -> Ages {
        Ages {
            counts: std::array::from_fn(|i| self.counts[i].load(Relaxed)),
            sum_us: self.sum_us.load(Relaxed),
            max_us: self.max_us.load(Relaxed),
        }
    }
}

/// A histogram's figures at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ages {
    counts: [u64; SLOTS],
    sum_us: u64,
    max_us: u64,
}

impl Ages {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.sum_us)
    }

    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }

    /// Adds `other`'s figures to these: a histogram over several.
    pub fn merge(&mut self, other: &Ages) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Each bucket's bound in seconds with how many ages were at most that (cumulative,
    /// as Prometheus counts them); the ages past the last bound are only in the count.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let mut total = 0;
        AGE_BUCKETS.iter().zip(self.counts).map(move |(&le, n)| {
            total += n;
            (le, total)
        })
    }

    /// The age at quantile `q` (0 to 1), interpolated within its bucket as Prometheus'
    /// `histogram_quantile` does, and never past the largest age seen.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * count as f64).max(1.0);
        let mut below = 0u64;
        for (i, &n) in self.counts.iter().enumerate() {
            if n == 0 || ((below + n) as f64) < rank {
                below += n;
                continue;
            }
            let low = if i == 0 { 0 } else { BOUNDS_US[i - 1] };
            let high = BOUNDS_US
                .get(i)
                .copied()
                .unwrap_or(self.max_us)
                .min(self.max_us);
            let share = (rank - below as f64) / n as f64;
            let us = low as f64 + (high.saturating_sub(low)) as f64 * share;
            return Some(Duration::from_micros((us as u64).min(self.max_us)));
        }
        Some(Duration::from_micros(self.max_us))
    }

    /// The figures for `GET /v1/cache/stats`, in milliseconds.
    pub fn to_json(&self) -> Value {
        let ms = |d: Option<Duration>| d.map(|d| round_ms(d.as_micros() as f64 / 1e3));
        let count = self.count();
        json!({
            "count": count,
            "avg_ms": (count > 0).then(|| round_ms(self.sum_us as f64 / 1e3 / count as f64)),
            "p50_ms": ms(self.quantile(0.5)),
            "p99_ms": ms(self.quantile(0.99)),
            "max_ms": (count > 0).then(|| round_ms(self.max_us as f64 / 1e3)),
        })
    }
}

fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// When a table last changed, as an atomic: [`crate::clock`]'s microseconds plus one,
/// zero for never.
#[derive(Default)]
pub struct ChangedAt(AtomicU64);

impl ChangedAt {
    pub fn now(&self) {
        self.0.fetch_max(crate::clock::micros() + 1, Relaxed);
    }

    pub fn get(&self) -> Option<Instant> {
        match self.0.load(Relaxed) {
            0 => None,
            us => Some(crate::clock::at(us - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn buckets_quantiles_and_the_maximum() {
        let h = AgeHistogram::default();
        assert_eq!(h.snapshot().quantile(0.5), None);
        assert_eq!(h.snapshot().to_json()["p50_ms"], Value::Null);
        // 90 ages of 3 ms, 9 of 70 ms, one of 20 s.
        for _ in 0..90 {
            h.record(ms(3));
        }
        for _ in 0..9 {
            h.record(ms(70));
        }
        h.record(ms(20_000));
        let a = h.snapshot();
        assert_eq!(a.count(), 100);
        let p50 = a.quantile(0.5).unwrap();
        assert!(p50 > ms(1) && p50 <= ms(5), "{p50:?}");
        let p99 = a.quantile(0.99).unwrap();
        assert!(p99 > ms(50) && p99 <= ms(100), "{p99:?}");
        assert_eq!(a.quantile(1.0), Some(ms(20_000)));
        let cumulative: Vec<(f64, u64)> = a.cumulative().collect();
        assert_eq!(cumulative[0], (0.001, 0));
        assert_eq!(cumulative[1], (0.005, 90));
        assert_eq!(cumulative[5], (0.1, 99));
        assert_eq!(cumulative.last(), Some(&(300.0, 100)));
        let j = a.to_json();
        assert_eq!(j["count"], 100);
        assert_eq!(j["max_ms"], 20_000.0);
        assert_eq!(j["avg_ms"], (90.0 * 3.0 + 9.0 * 70.0 + 20_000.0) / 100.0);
    }

    #[test]
    fn an_age_past_every_bound_is_counted_and_bounds_the_quantile() {
        let h = AgeHistogram::default();
        h.record(Duration::from_secs(3600));
        let a = h.snapshot();
        assert_eq!(a.cumulative().last(), Some((300.0, 0)));
        assert_eq!(a.quantile(0.5), Some(Duration::from_secs(3600)));
        // A quantile never says more than the largest age seen.
        let h = AgeHistogram::default();
        h.record(ms(2));
        assert_eq!(h.snapshot().quantile(0.99), Some(ms(2)));
    }

    #[test]
    fn merged_figures_add_up() {
        let (a, b) = (AgeHistogram::default(), AgeHistogram::default());
        a.record(ms(1));
        b.record(ms(400));
        let mut all = a.snapshot();
        all.merge(&b.snapshot());
        assert_eq!(all.count(), 2);
        assert_eq!(all.sum(), ms(401));
        assert_eq!(all.quantile(1.0), Some(ms(400)));
    }

    #[test]
    fn a_change_time_survives_the_atomic() {
        let c = ChangedAt::default();
        assert_eq!(c.get(), None);
        let before = Instant::now();
        c.now();
        let at = c.get().unwrap();
        assert!(at >= before - Duration::from_micros(1) && at <= Instant::now());
    }
}
