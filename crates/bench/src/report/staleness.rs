//! The cache's staleness after a direct commit, as the report files it: per target (the
//! caching Sluice, then the baseline) the time from a commit made straight on the
//! database to the first read through the target that sees it, and how it renders (a
//! section of its own, and staleness.csv).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::cache::Scenario;
use crate::document::{csv_field, Section, Table};

/// What the staleness measurement found; `missing` says why there is nothing.
#[derive(Debug, Clone, Serialize)]
pub struct Staleness {
    /// Samples each target was to take.
    pub samples: u32,
    /// How long one sample waits for the new value before it counts as a timeout.
    pub timeout_ms: u64,
    /// The caching Sluice first, then the baseline (pass-through, or the database).
    pub series: Vec<StalenessSeries>,
    pub missing: Option<String>,
}

/// One target's samples, summarized.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StalenessSeries {
    /// Where the reads went.
    pub scenario: Scenario,
    /// Samples whose read saw the new value.
    pub seen: u32,
    /// Samples that did not see it within the timeout.
    pub timeouts: u32,
    /// Why the series stopped before all its samples, if it did.
    pub stopped: Option<String>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// One read's round trip just before each commit (the median): a cache hit through
    /// the caching Sluice, what a sample cannot go under.
    pub read_p50_ms: Option<f64>,
    /// Reads per sample that still returned the old value after the commit.
    pub stale_reads_mean: Option<f64>,
    pub stale_reads_max: Option<u64>,
}

/// One sample that saw the new value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// From the commit's OK to the reply of the first read with the new value.
    pub staleness: Duration,
    /// Reads that returned the old value before it.
    pub stale_reads: u64,
    /// The round trip of the last read before the commit.
    pub read: Duration,
}

impl StalenessSeries {
    /// The figures of `samples` (those that saw the value) and `timeouts`.
    pub fn new(
        scenario: Scenario,
        samples: &[Sample],
        timeouts: u32,
        stopped: Option<String>,
    ) -> StalenessSeries {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut staleness: Vec<f64> = samples.iter().map(|s| ms(s.staleness)).collect();
        staleness.sort_by(f64::total_cmp);
        let mut reads: Vec<f64> = samples.iter().map(|s| ms(s.read)).collect();
        reads.sort_by(f64::total_cmp);
        let stale: Vec<u64> = samples.iter().map(|s| s.stale_reads).collect();
        StalenessSeries {
            scenario,
            seen: samples.len() as u32,
            timeouts,
            stopped,
            p50_ms: percentile(&staleness, 0.50),
            p99_ms: percentile(&staleness, 0.99),
            max_ms: staleness.last().copied(),
            read_p50_ms: percentile(&reads, 0.50),
            stale_reads_mean: (!stale.is_empty())
                .then(|| stale.iter().sum::<u64>() as f64 / stale.len() as f64),
            stale_reads_max: stale.iter().max().copied(),
        }
    }
}

/// The nearest-rank percentile `p` (0 to 1) of `sorted`.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

const TITLE: &str = "Cache staleness after a direct commit";

/// The report's section.
pub fn section(s: &Staleness) -> Section {
    let num = |v: Option<f64>, decimals: usize| {
        v.map_or_else(|| "—".to_string(), |v| format!("{v:.decimals$}"))
    };
    let rows = s
        .series
        .iter()
        .map(|r| {
            vec![
                r.scenario.to_string(),
                r.seen.to_string(),
                r.timeouts.to_string(),
                num(r.p50_ms, 2),
                num(r.p99_ms, 2),
                num(r.max_ms, 2),
                num(r.read_p50_ms, 3),
                match (r.stale_reads_mean, r.stale_reads_max) {
                    (Some(mean), Some(max)) => format!("{mean:.1} / {max}"),
                    _ => "—".to_string(),
                },
            ]
        })
        .collect();
    let mut notes = vec![format!(
        "A sample: a row is read through the target until the read is a cache hit, \
         updated straight on the database (autocommit, not through Sluice), then read \
         again in a loop until a read returns the new value; its staleness runs from the \
         update's OK to that read's reply, at most {} ms (a timeout). The caching \
         Sluice learns of the write from the database's binlog; the baseline sees it as \
         soon as the server it reads from has it (the database itself, or with --replicas \
         the replica it sent the read to). {} samples a target, after one not counted.",
        s.timeout_ms, s.samples
    )];
    notes.extend(
        s.series
            .iter()
            .filter_map(|r| Some(format!("{}: {}", r.scenario, r.stopped.as_ref()?))),
    );
    if let Some(missing) = &s.missing {
        notes.push(format!("not measured: {missing}"));
    }
    Section {
        title: TITLE.to_string(),
        tables: vec![Table {
            title: "From a direct commit to the first read that sees it (ms)".into(),
            header: [
                "through",
                "samples",
                "timeouts",
                "p50",
                "p99",
                "max",
                "one read before the commit (p50)",
                "stale reads per sample (mean / max)",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }],
        notes,
        charts: Vec::new(),
    }
}

/// staleness.csv: one row per target.
pub fn csv(s: &Staleness) -> String {
    let mut out = String::from(
        "through,samples_seen,timeouts,p50_ms,p99_ms,max_ms,read_p50_ms,stale_reads_mean,\
         stale_reads_max,stopped\n",
    );
    let num = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    for r in &s.series {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            r.scenario,
            r.seen,
            r.timeouts,
            num(r.p50_ms),
            num(r.p99_ms),
            num(r.max_ms),
            num(r.read_p50_ms),
            num(r.stale_reads_mean),
            r.stale_reads_max.map(|m| m.to_string()).unwrap_or_default(),
            csv_field(r.stopped.as_deref().unwrap_or("")),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64, stale_reads: u64) -> Sample {
        Sample {
            staleness: Duration::from_millis(ms),
            stale_reads,
            read: Duration::from_micros(100),
        }
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 0.5), Some(50.0));
        assert_eq!(percentile(&sorted, 0.99), Some(99.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn a_series_orders_its_figures_and_renders() {
        let samples: Vec<Sample> = [5, 1, 3, 2, 4].iter().map(|&ms| sample(ms, ms)).collect();
        let series = StalenessSeries::new(Scenario::Cached, &samples, 1, None);
        assert_eq!(series.seen, 5);
        assert_eq!(series.timeouts, 1);
        assert_eq!(series.p50_ms, Some(3.0));
        assert_eq!(series.p99_ms, Some(5.0));
        assert_eq!(series.max_ms, Some(5.0));
        assert_eq!(series.stale_reads_mean, Some(3.0));
        assert_eq!(series.stale_reads_max, Some(5));
        let none = StalenessSeries::new(Scenario::Passthrough, &[], 3, Some("stopped".into()));
        assert_eq!(none.p50_ms, None);
        let staleness = Staleness {
            samples: 5,
            timeout_ms: 2000,
            series: vec![series, none],
            missing: None,
        };
        let section = section(&staleness);
        assert_eq!(section.tables[0].rows[0][0], "cached");
        assert_eq!(section.tables[0].rows[0][3], "3.00");
        assert_eq!(section.tables[0].rows[1][3], "—");
        assert!(section.notes.iter().any(|n| n == "passthrough: stopped"));
        let csv = csv(&staleness);
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.lines().nth(1).unwrap().starts_with("cached,5,1,3.000,"));
    }
}
