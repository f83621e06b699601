//! The time series: a point per second for the last hour and per minute for the last
//! day, sampled from the totals and the other subsystems' gauges, and written to a
//! local file (atomically, at an interval and at shutdown) so history survives
//! restarts. Its size is bounded by the two rings.

use super::{latency_histogram, unix_now, Analytics, Kind};
use crate::shutdown::Shutdown;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub const SECONDS_KEPT: usize = 3600;
pub const MINUTES_KEPT: usize = 1440;
const FILE_VERSION: u32 = 1;

/// One interval's figures: counts over the interval, gauges at its end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Start of the interval, unix seconds.
    pub t: u64,
    pub queries: u64,
    pub select: u64,
    pub insert: u64,
    pub update: u64,
    pub delete: u64,
    pub transaction: u64,
    pub other: u64,
    pub errors: u64,
    pub rows: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub clients: u64,
    pub backends_in_use: u64,
    pub backends_idle: u64,
    pub pinned: u64,
    pub queued: u64,
    pub queue_waits: u64,
    /// Each Galera node's flow-control paused share, 0 to 1: the monitor's figure
    /// for a second, the mean of its seconds for a minute. Absent without Galera
    /// nodes (and in files written before it was kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flow_paused: BTreeMap<String, f64>,
}

/// What other subsystems report at each sample: running totals and gauges.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    pub bytes_in_total: u64,
    pub bytes_out_total: u64,
    pub queue_waits_total: u64,
    pub clients: u64,
    pub backends_in_use: u64,
    pub backends_idle: u64,
    pub pinned: u64,
    pub queued: u64,
    /// Paused share per Galera node (server name), over the monitor's last interval.
    pub galera_paused: Vec<(String, f64)>,
}

/// Running totals at the previous sample, to take differences from.
#[derive(Clone, Copy, Default)]
struct Previous {
    kinds: [u64; 6],
    errors: u64,
    rows: u64,
    cache_hits: u64,
    cache_misses: u64,
    bytes_in: u64,
    bytes_out: u64,
    queue_waits: u64,
}

#[derive(Default)]
pub struct History {
    pub seconds: VecDeque<Point>,
    pub minutes: VecDeque<Point>,
    /// The minute being summed, with its latencies.
    minute: Option<(Point, Histogram<u64>)>,
    /// The minute's paused shares so far per node: sum and seconds, for the mean.
    minute_flow: BTreeMap<String, (f64, u32)>,
    previous: Option<Previous>,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    seconds: Vec<Point>,
    minutes: Vec<Point>,
}

impl History {
    /// Reads a history file; a missing file is an empty history. Points older than
    /// their ring's reach are dropped.
    pub fn load(path: &Path) -> std::io::Result<History> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(History::default()),
            Err(e) => return Err(e),
        };
        let file: File = serde_json::from_slice(&bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if file.version != FILE_VERSION {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "history file version {} is not {FILE_VERSION}",
                    file.version
                ),
            ));
        }
        let now = unix_now();
        let keep = |points: Vec<Point>, reach: u64, max: usize| {
            let mut kept: VecDeque<Point> = points
                .into_iter()
                .filter(|p| p.t + reach > now && p.t <= now)
                .collect();
            while kept.len() > max {
                kept.pop_front();
            }
            kept
        };
        let mut minutes = keep(file.minutes, 60 * MINUTES_KEPT as u64, MINUTES_KEPT);
        // The minute that was in progress goes on summing (its percentiles restart).
        let minute = match minutes.back() {
            Some(m) if m.t == now - now % 60 => {
                minutes.pop_back().map(|m| (m, latency_histogram()))
            }
            _ => None,
        };
        Ok(History {
            seconds: keep(file.seconds, SECONDS_KEPT as u64, SECONDS_KEPT),
            minutes,
            minute,
            minute_flow: BTreeMap::new(),
            previous: None,
        })
    }

    /// Writes the history to `path` through a temporary file and a rename, so a crash
    /// leaves the old file or the new one, never half of one.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let file = File {
            version: FILE_VERSION,
            seconds: self.seconds.iter().cloned().collect(),
            minutes: self
                .minutes
                .iter()
                .cloned()
                .chain(self.current_minute())
                .collect(),
        };
        let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    }

    /// Points of `range` newer than `since`.
    pub fn points(&self, minutes: bool, since: Option<u64>) -> Vec<Point> {
        let ring = if minutes {
            &self.minutes
        } else {
            &self.seconds
        };
        let since = since.unwrap_or(0);
        let start = ring.partition_point(|p| p.t <= since);
        ring.range(start..).cloned().collect()
    }

    pub fn last(&self) -> Option<&Point> {
        self.seconds.back()
    }

    /// Adds the second starting at `t`.
    fn push_second(&mut self, point: Point, latencies: &Histogram<u64>) {
        if self.seconds.back().is_some_and(|p| p.t >= point.t) {
            // The clock went back: keep the series ordered.
            return;
        }
        if self.seconds.len() == SECONDS_KEPT {
            self.seconds.pop_front();
        }
        let minute_start = point.t - point.t % 60;
        if self
            .minute
            .as_ref()
            .is_some_and(|(m, _)| m.t != minute_start)
        {
            self.close_minute();
        }
        let (m, hist) = self.minute.get_or_insert_with(|| {
            (
                Point {
                    t: minute_start,
                    ..Point::default()
                },
                latency_histogram(),
            )
        });
        hist.add(latencies).expect("same bounds");
        sum_into(m, &point);
        m.p50_us = hist.value_at_quantile(0.5);
        m.p95_us = hist.value_at_quantile(0.95);
        m.p99_us = hist.value_at_quantile(0.99);
        m.max_us = hist.max();
        for (server, share) in &point.flow_paused {
            let (sum, n) = self.minute_flow.entry(server.clone()).or_default();
            *sum += share;
            *n += 1;
            m.flow_paused.insert(server.clone(), *sum / f64::from(*n));
        }
        self.seconds.push_back(point);
    }

    fn close_minute(&mut self) {
        self.minute_flow.clear();
        if let Some((m, _)) = self.minute.take() {
            if self.minutes.back().is_some_and(|p| p.t >= m.t) {
                return;
            }
            if self.minutes.len() == MINUTES_KEPT {
                self.minutes.pop_front();
            }
            self.minutes.push_back(m);
        }
    }

    /// The minute in progress, as it stands (for a day's chart that ends now).
    pub fn current_minute(&self) -> Option<Point> {
        self.minute.as_ref().map(|(m, _)| m.clone())
    }
}

/// Counters summed, gauges taken from the later point.
fn sum_into(m: &mut Point, p: &Point) {
    m.queries += p.queries;
    m.select += p.select;
    m.insert += p.insert;
    m.update += p.update;
    m.delete += p.delete;
    m.transaction += p.transaction;
    m.other += p.other;
    m.errors += p.errors;
    m.rows += p.rows;
    m.bytes_in += p.bytes_in;
    m.bytes_out += p.bytes_out;
    m.cache_hits += p.cache_hits;
    m.cache_misses += p.cache_misses;
    m.queue_waits += p.queue_waits;
    m.clients = p.clients;
    m.backends_in_use = p.backends_in_use;
    m.backends_idle = p.backends_idle;
    m.pinned = p.pinned;
    m.queued = p.queued;
}

impl Analytics {
    /// Takes the sample of the second starting at `t`.
    pub fn sample(&self, t: u64, g: Gauges) {
        super::COARSE_NOW.store(unix_now(), std::sync::atomic::Ordering::Relaxed);
        // The second's statements are in the figures before they are taken.
        let latencies = self.digests().take_interval();
        let totals = self.totals();
        let now = Previous {
            kinds: Kind::ALL.map(|k| totals.kind(k)),
            errors: totals.errors,
            rows: totals.rows,
            cache_hits: totals.cache_hits,
            cache_misses: totals.cache_misses,
            bytes_in: g.bytes_in_total,
            bytes_out: g.bytes_out_total,
            queue_waits: g.queue_waits_total,
        };
        let mut h = self.history.lock();
        let before = h.previous.replace(now).unwrap_or(now);
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let kinds: [u64; 6] = std::array::from_fn(|i| d(now.kinds[i], before.kinds[i]));
        let point = Point {
            t,
            queries: kinds.iter().sum(),
            select: kinds[0],
            insert: kinds[1],
            update: kinds[2],
            delete: kinds[3],
            transaction: kinds[4],
            other: kinds[5],
            errors: d(now.errors, before.errors),
            rows: d(now.rows, before.rows),
            bytes_in: d(now.bytes_in, before.bytes_in),
            bytes_out: d(now.bytes_out, before.bytes_out),
            cache_hits: d(now.cache_hits, before.cache_hits),
            cache_misses: d(now.cache_misses, before.cache_misses),
            p50_us: latencies.value_at_quantile(0.5),
            p95_us: latencies.value_at_quantile(0.95),
            p99_us: latencies.value_at_quantile(0.99),
            max_us: latencies.max(),
            clients: g.clients,
            backends_in_use: g.backends_in_use,
            backends_idle: g.backends_idle,
            pinned: g.pinned,
            queued: g.queued,
            queue_waits: d(now.queue_waits, before.queue_waits),
            flow_paused: g.galera_paused.into_iter().collect(),
        };
        h.push_second(point, &latencies);
    }

    /// Writes the history file, if one is configured.
    pub fn save_history(&self) {
        let Some(path) = &self.cfg.history_file else {
            return;
        };
        // Serialized under the lock (a few ms at most), written outside it.
        if let Err(e) = self.history.lock().save(path) {
            tracing::warn!(file = %path.display(), error = %e, "history file not written");
        }
    }
}

/// Samples every second until shutdown, saving the history at its interval and at the
/// end. `gauges` reads the other subsystems.
pub async fn run(
    analytics: Arc<Analytics>,
    gauges: Box<dyn Fn() -> Gauges + Send + Sync>,
    mut shutdown: Shutdown,
) {
    // Ticks at the start of each wall-clock second, so points line up across restarts.
    let mut last_save = tokio::time::Instant::now();
    let mut last_t = unix_now();
    analytics.sample(last_t.saturating_sub(1), gauges());
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let to_next = Duration::from_secs(1) - Duration::from_nanos(now.subsec_nanos() as u64);
        tokio::select! {
            _ = tokio::time::sleep(to_next) => {}
            _ = shutdown.stopping() => break,
        }
        let t = unix_now().saturating_sub(1);
        if t <= last_t && t != 0 {
            // Woke early (or the clock moved back): wait for the next second.
            if t < last_t.saturating_sub(5) {
                last_t = t;
            }
            continue;
        }
        last_t = t;
        analytics.sample(t, gauges());
        if last_save.elapsed() >= analytics.cfg.save_interval {
            last_save = tokio::time::Instant::now();
            let a = analytics.clone();
            let _ = tokio::task::spawn_blocking(move || a.save_history()).await;
        }
    }
    let a = analytics.clone();
    let _ = tokio::task::spawn_blocking(move || a.save_history()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: u64, queries: u64, clients: u64) -> Point {
        Point {
            t,
            queries,
            select: queries,
            clients,
            ..Point::default()
        }
    }

    #[test]
    fn seconds_roll_into_minutes() {
        let mut h = History::default();
        let mut lat = latency_histogram();
        lat.record(100).unwrap();
        for s in 0..125 {
            h.push_second(point(6000 + s, 2, s), &lat);
        }
        assert_eq!(h.seconds.len(), 125);
        assert_eq!(h.minutes.len(), 2);
        assert_eq!(h.minutes[0], {
            let mut m = point(6000, 120, 59);
            m.p50_us = 100;
            m.p95_us = 100;
            m.p99_us = 100;
            m.max_us = 100;
            m
        });
        assert_eq!(h.minutes[1].t, 6060);
        assert_eq!(h.current_minute().unwrap().queries, 10);
        assert_eq!(h.points(false, Some(6120)).len(), 4);
        assert_eq!(h.points(true, None).len(), 2);
        // Out of order: ignored.
        h.push_second(point(6001, 1, 0), &lat);
        assert_eq!(h.seconds.len(), 125);
    }

    #[test]
    fn flow_paused_per_second_and_the_minute_mean() {
        let mut h = History::default();
        let lat = latency_histogram();
        let with = |t: u64, shares: &[(&str, f64)]| Point {
            t,
            flow_paused: shares.iter().map(|(s, v)| (s.to_string(), *v)).collect(),
            ..Point::default()
        };
        h.push_second(with(6000, &[("n1", 0.0), ("n2", 0.5)]), &lat);
        h.push_second(with(6001, &[("n1", 0.2), ("n2", 1.0)]), &lat);
        h.push_second(with(6002, &[("n1", 0.4)]), &lat);
        assert_eq!(h.seconds[1].flow_paused["n2"], 1.0);
        let m = h.current_minute().unwrap();
        assert!((m.flow_paused["n1"] - 0.2).abs() < 1e-9, "{m:?}");
        assert!((m.flow_paused["n2"] - 0.75).abs() < 1e-9, "{m:?}");
        // A new minute starts its own mean.
        h.push_second(with(6060, &[("n1", 1.0)]), &lat);
        assert_eq!(h.current_minute().unwrap().flow_paused["n1"], 1.0);
        assert!((h.minutes[0].flow_paused["n1"] - 0.2).abs() < 1e-9);
        // Points without Galera nodes say nothing of it, and old files still load.
        let json = serde_json::to_value(point(1, 1, 1)).unwrap();
        assert!(json.get("flow_paused").is_none(), "{json}");
        let back: Point = serde_json::from_value(json).unwrap();
        assert!(back.flow_paused.is_empty());
    }

    #[test]
    fn bounded_rings() {
        let mut h = History::default();
        let lat = latency_histogram();
        for s in 0..(SECONDS_KEPT as u64 + 10) {
            h.push_second(point(s + 1, 1, 0), &lat);
        }
        assert_eq!(h.seconds.len(), SECONDS_KEPT);
        assert_eq!(h.seconds.front().unwrap().t, 11);
    }

    #[test]
    fn saved_and_loaded_with_old_points_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.json");
        let now = unix_now();
        let mut h = History::default();
        let lat = latency_histogram();
        for s in [now - 7200, now - 10, now - 9] {
            h.push_second(point(s, 3, 1), &lat);
        }
        h.close_minute();
        h.save(&path).unwrap();
        let back = History::load(&path).unwrap();
        assert_eq!(
            back.seconds.iter().map(|p| p.t).collect::<Vec<_>>(),
            vec![now - 10, now - 9]
        );
        assert!(!back.minutes.is_empty());
        assert!(History::load(&dir.path().join("none"))
            .unwrap()
            .seconds
            .is_empty());
        std::fs::write(&path, "{").unwrap();
        assert!(History::load(&path).is_err());
    }
}
