//! The cache advisor: ranks cacheable read digests by the server time a cache rule
//! would save, estimated as frequency × mean server latency × expected hit rate. The
//! hit rate comes from each digest's simulated cache: how often an exact statement came
//! back before any of its tables was written (through Sluice or in the binlog).

use super::digests::hex;
use super::{unix_now, Analytics};
use serde::Serialize;

/// One digest worth caching, with the figures behind the estimate.
#[derive(Clone, Debug, Serialize)]
pub struct Candidate {
    pub id: String,
    pub text: String,
    pub schema: Option<String>,
    pub tables: Vec<String>,
    pub count: u64,
    pub per_second: f64,
    /// Mean time of the executions a server answered.
    pub mean_us: u64,
    pub expected_hit_rate: f64,
    pub writes_per_second: f64,
    pub saving_us_per_second: f64,
    pub saving_share: f64,
    pub cached: bool,
    pub rule: Option<String>,
}

/// The ranking, and how long the process has been observing.
pub struct Advice {
    pub window_seconds: f64,
    pub candidates: Vec<Candidate>,
}

impl Analytics {
    /// The `limit` best candidates, best first. Digests with no expected hits are left
    /// out: caching them would only cost memory.
    pub fn advise(&self, limit: usize) -> Advice {
        let now = unix_now();
        let mut all_backend_us = 0f64;
        let mut candidates = Vec::new();
        self.digests().for_each(|id, e| {
            all_backend_us += e.backend_us as f64;
            let Some(rate) = e.expected_hit_rate() else {
                return;
            };
            if !e.cacheable || rate <= 0.0 {
                return;
            }
            // Observed since first seen (at least a second): the rate stays honest for
            // digests that stopped.
            let window = (now.saturating_sub(e.first_seen) + 1) as f64;
            let mean_us = e.backend_us.checked_div(e.backend_count).unwrap_or(0);
            let per_second = e.count as f64 / window;
            candidates.push(Candidate {
                id: hex(id),
                text: e.text.to_string(),
                schema: e.schema.clone(),
                tables: e
                    .tables
                    .iter()
                    .map(|t| format!("{}.{}", t.schema, t.table))
                    .collect(),
                count: e.count,
                per_second,
                mean_us,
                expected_hit_rate: rate,
                writes_per_second: e.table_writes() as f64 / window,
                saving_us_per_second: per_second * mean_us as f64 * rate,
                // Filled below, once the total is known.
                saving_share: e.backend_us as f64 * rate,
                cached: e.cache_hits > 0,
                rule: None,
            });
        });
        for c in &mut candidates {
            c.saving_share = if all_backend_us > 0.0 {
                (c.saving_share / all_backend_us).min(1.0)
            } else {
                0.0
            };
        }
        candidates.sort_by(|a, b| b.saving_us_per_second.total_cmp(&a.saving_us_per_second));
        candidates.truncate(limit);
        Advice {
            window_seconds: (now.saturating_sub(self.started_unix) + 1) as f64,
            candidates,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::{AnalyticsConfig, CacheUse, Finished, UserStats};
    use crate::classify::sql;
    use sluice_wire::tracker::Outcome;
    use std::time::Duration;

    fn run(a: &Analytics, user: &UserStats, text: &str, us: u64) {
        let f = Finished {
            digest: sql::digest_hash(text.as_bytes()),
            text: Some(text.as_bytes()),
            schema: Some("shop"),
            user,
            exact: sql::fnv1a(text.as_bytes()),
            elapsed: Duration::from_micros(us),
            outcome: Outcome::default(),
            server: Some("db1"),
            cache: CacheUse::None,
            in_transaction: false,
            scattered: false,
            bytes_in: 0,
            bytes_out: 0,
        };
        assert!(a.record(&f));
    }

    #[test]
    fn ranks_by_time_saved_and_leaves_out_what_never_repeats() {
        let a = Analytics::new(&AnalyticsConfig::default());
        let user = UserStats::default();
        for i in 0..100 {
            // Ten distinct statements, each repeated ten times: 90% would hit.
            run(
                &a,
                &user,
                &format!("SELECT * FROM items WHERE id = {}", i % 10),
                1000,
            );
            // Always the same statement, but its table is written before every read.
            run(&a, &user, "UPDATE prices SET p = p + 1", 100);
            run(&a, &user, "SELECT p FROM prices", 5000);
            // Same text each time, cheap: ranked below the item lookups.
            run(&a, &user, "SELECT COUNT(*) FROM orders", 100);
            // Never cacheable.
            run(&a, &user, "SELECT NOW() FROM orders", 100);
        }
        let advice = a.advise(10);
        let texts: Vec<&str> = advice.candidates.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "SELECT * FROM items WHERE id = ?",
                "SELECT COUNT(*) FROM orders"
            ]
        );
        let best = &advice.candidates[0];
        assert!((best.expected_hit_rate - 0.9).abs() < 1e-9);
        assert_eq!(best.mean_us, 1000);
        assert_eq!(best.tables, vec!["shop.items"]);
        let orders = &advice.candidates[1];
        assert!((orders.expected_hit_rate - 0.99).abs() < 1e-9);
        assert!(best.saving_share > orders.saving_share);
    }
}
