//! What the clients saw, window by window: the probes' operations and sysbench's
//! reports each second, counted per hand-over (from its SIGUSR2 to the next one's, so
//! that every event counts once, however late it shows), and the latencies and stalls
//! around each hand-over set against the window before it. No I/O: the figures of a run
//! are computed from what was recorded.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::probe::{Kind, Op, Outcome};
use crate::failover::tally::workload_conflict;
use crate::sysbench::{parse_interval, Interval};

/// Counts by kind of client, kinds without any left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(super) struct ByKind(pub BTreeMap<Kind, u64>);

impl ByKind {
    pub(super) fn add(&mut self, kind: Kind, n: u64) {
        if n > 0 {
            *self.0.entry(kind).or_default() += n;
        }
    }

    pub(super) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The count of one kind.
    pub(super) fn get(&self, kind: Kind) -> u64 {
        self.0.get(&kind).copied().unwrap_or(0)
    }

    /// "0", or "3 (idle 2, sysbench 1)".
    pub(super) fn cell(&self) -> String {
        let total = self.total();
        if total == 0 {
            return "0".into();
        }
        let each: Vec<String> = self
            .0
            .iter()
            .map(|(k, n)| format!("{} {n}", k.name()))
            .collect();
        format!("{total} ({})", each.join(", "))
    }
}

/// What clients saw over one stretch of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(super) struct Seen {
    /// Operations of the probes, and sysbench's transactions.
    pub operations: ByKind,
    /// Every failed operation: error replies, failed logins, lost connections; of
    /// sysbench's, all but its conflicts.
    pub errors: ByKind,
    /// sysbench's errors that are the server's own conflicts between its threads
    /// (deadlocks, lock waits, duplicate keys), which a run straight at MariaDB gets
    /// too: not counted among the errors.
    pub sysbench_conflicts: u64,
    /// Connections that closed under their client (sysbench: its reconnects).
    pub lost: ByKind,
    pub ids_changed: ByKind,
    pub state_lost: ByKind,
}

/// The seconds sysbench reported, placed in time: the first report covers the second
/// after `start`.
pub(super) struct Reports<'a> {
    pub start: Instant,
    pub intervals: &'a [Interval],
    /// The errors it named, each with the second of the report that followed it.
    pub errors: &'a [(u64, String)],
}

/// The errors sysbench names at `--verbosity=5` (`DEBUG: Ignoring error 1213 <message>`,
/// and errors it does not ignore on lines of their own), each with the second of the
/// next report. It folds repeats of a message into `(last message repeated N times)`,
/// printed only when another message comes: those count in the second they are printed
/// in, and the repeats still folded when sysbench was stopped (its reports' total past
/// the errors named) are its last message's, in the last second.
pub(super) fn sysbench_errors(output: &str) -> Vec<(u64, String)> {
    let mut errors: Vec<(u64, String)> = Vec::new();
    let mut second = 1;
    let mut last: Option<String> = None;
    for line in output.lines().map(str::trim) {
        if let Some(i) = parse_interval(line) {
            second = i.at_secs + 1;
            continue;
        }
        if let Some(n) = crate::sysbench::repeated(line) {
            if let Some(text) = &last {
                errors.extend(std::iter::repeat_n((second, text.clone()), n));
            }
            continue;
        }
        let Some(text) = crate::sysbench::error_text(line) else {
            last = None;
            continue;
        };
        errors.push((second, text.clone()));
        last = Some(text);
    }
    let reported: f64 = output
        .lines()
        .filter_map(parse_interval)
        .map(|i| i.errors_per_sec)
        .sum();
    let folded = (reported.round() as usize).saturating_sub(errors.len());
    if let Some(text) = last {
        errors.extend(std::iter::repeat_n((second, text), folded));
    }
    errors
}

impl Reports<'_> {
    /// The reports whose second began in `[from, to)`.
    fn within(&self, from: Instant, to: Instant) -> impl Iterator<Item = &Interval> {
        let start = self.start;
        self.intervals.iter().filter(move |i| {
            let began = start + Duration::from_secs(i.at_secs.saturating_sub(1));
            began >= from && began < to
        })
    }

    /// The worst second's latency percentile among the reports overlapping
    /// `[from, to)`.
    pub(super) fn worst_percentile_ms(&self, from: Instant, to: Instant) -> Option<f64> {
        let start = self.start;
        self.intervals
            .iter()
            .filter(|i| {
                let began = start + Duration::from_secs(i.at_secs.saturating_sub(1));
                began < to && began + Duration::from_secs(1) > from
            })
            .map(|i| i.latency_percentile_ms)
            .reduce(f64::max)
    }
}

/// What the probes and sysbench saw in `[from, to)`: each probe operation by when it
/// began, each of sysbench's seconds by when it began.
pub(super) fn seen(ops: &[Op], reports: &Reports<'_>, from: Instant, to: Instant) -> Seen {
    let mut seen = Seen::default();
    for op in ops.iter().filter(|op| op.at >= from && op.at < to) {
        seen.operations.add(op.kind, 1);
        match &op.outcome {
            Outcome::Ok => {}
            Outcome::Error(_) => seen.errors.add(op.kind, 1),
            Outcome::Lost(_) => {
                seen.errors.add(op.kind, 1);
                seen.lost.add(op.kind, 1);
            }
            Outcome::IdChanged { .. } => seen.ids_changed.add(op.kind, 1),
            Outcome::StateLost(_) => seen.state_lost.add(op.kind, 1),
        }
    }
    let mut seconds = Vec::new();
    let mut errors = 0;
    for i in reports.within(from, to) {
        seconds.push(i.at_secs);
        seen.operations.add(Kind::Sysbench, i.tps.round() as u64);
        errors += i.errors_per_sec.round() as u64;
        seen.lost
            .add(Kind::Sysbench, i.reconnects_per_sec.round() as u64);
    }
    // The reports' rates say how many errors there were; every one named as something
    // else than a conflict is counted as an error, the rest as conflicts (the repeats
    // sysbench folds are placed late in time, so per second only the texts that are
    // not conflicts can be trusted to be where they are).
    let others = reports
        .errors
        .iter()
        .filter(|(s, text)| seconds.contains(s) && !workload_conflict(text))
        .count() as u64;
    seen.sysbench_conflicts = errors.saturating_sub(others);
    seen.errors.add(Kind::Sysbench, others);
    seen
}

/// The longest wait of any probe operation in flight at some time in `[from, to)`, and
/// the kind of client that waited.
pub(super) fn longest_stall(ops: &[Op], from: Instant, to: Instant) -> Option<(Duration, Kind)> {
    ops.iter()
        .filter(|op| op.at < to && op.at + op.took >= from)
        .map(|op| (op.took, op.kind))
        .max_by_key(|(took, _)| *took)
}

/// The 99th percentile of the waits of the probe operations begun in `[from, to)`, in
/// milliseconds.
pub(super) fn p99_ms(ops: &[Op], from: Instant, to: Instant) -> Option<f64> {
    let waits: Vec<f64> = ops
        .iter()
        .filter(|op| op.at >= from && op.at < to)
        .map(|op| op.took.as_secs_f64() * 1000.0)
        .collect();
    percentile(waits, 0.99)
}

/// The nearest-rank percentile `p` (0 to 1) of `values`.
pub(super) fn percentile(mut values: Vec<f64>, p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = (p * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

/// Cache hits and misses counted by one process between two readings: the hit rate
/// over that window, `None` without a lookup.
pub(super) fn hit_rate(start: (u64, u64), end: (u64, u64)) -> Option<f64> {
    let hits = end.0.checked_sub(start.0)?;
    let misses = end.1.checked_sub(start.1)?;
    (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64)
}

/// The first `max` distinct texts of the probes' failures, with how often each came,
/// most frequent first.
pub(super) fn failure_texts(ops: &[Op], max: usize) -> Vec<(String, u64)> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for op in ops {
        let text = match &op.outcome {
            Outcome::Ok => continue,
            Outcome::Error(e) => format!("{}: error: {e}", op.kind.name()),
            Outcome::Lost(e) => format!("{}: connection lost: {e}", op.kind.name()),
            Outcome::IdChanged { was, now } => {
                format!("{}: CONNECTION_ID() {was}, then {now}", op.kind.name())
            }
            Outcome::StateLost(e) => format!("{}: state lost: {e}", op.kind.name()),
        };
        *counts.entry(text).or_default() += 1;
    }
    let mut texts: Vec<(String, u64)> = counts.into_iter().collect();
    texts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    texts.truncate(max);
    texts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(base: Instant, at_ms: u64, took_ms: u64, kind: Kind, outcome: Outcome) -> Op {
        Op {
            kind,
            at: base + Duration::from_millis(at_ms),
            took: Duration::from_millis(took_ms),
            outcome,
        }
    }

    fn interval(at_secs: u64, p99: f64, errors: f64, reconnects: f64) -> Interval {
        Interval {
            at_secs,
            threads: 16,
            tps: 100.0,
            qps: 2000.0,
            latency_percentile_ms: p99,
            errors_per_sec: errors,
            reconnects_per_sec: reconnects,
        }
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        assert_eq!(percentile(vec![], 0.99), None);
        assert_eq!(percentile(vec![5.0], 0.99), Some(5.0));
        let hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(hundred.clone(), 0.99), Some(99.0));
        assert_eq!(percentile(hundred, 0.5), Some(50.0));
        assert_eq!(percentile(vec![1.0, 2.0, 3.0], 0.99), Some(3.0));
    }

    #[test]
    fn events_count_in_the_window_they_began_in() {
        let base = Instant::now();
        let ops = vec![
            op(base, 100, 1, Kind::Idle, Outcome::Ok),
            op(base, 1_500, 2, Kind::Idle, Outcome::Lost("closed".into())),
            op(
                base,
                1_600,
                3,
                Kind::Transaction,
                Outcome::Error("1205".into()),
            ),
            op(
                base,
                1_700,
                250,
                Kind::Prepared,
                Outcome::StateLost("1243".into()),
            ),
            op(
                base,
                1_800,
                1,
                Kind::Idle,
                Outcome::IdChanged { was: 1, now: 2 },
            ),
            op(base, 2_500, 1, Kind::Connect, Outcome::Ok),
        ];
        let intervals = [interval(1, 3.0, 0.0, 0.0), interval(2, 40.0, 3.0, 1.0)];
        let errors = [
            (
                2,
                "error 1213: Deadlock found when trying to get lock".to_string(),
            ),
            (
                2,
                "error 2013: Lost connection to server during query".to_string(),
            ),
        ];
        let reports = Reports {
            start: base,
            intervals: &intervals,
            errors: &errors,
        };
        let ms = |n| base + Duration::from_millis(n);
        let s = seen(&ops, &reports, ms(1_000), ms(2_000));
        assert_eq!(s.errors.cell(), "3 (sysbench 1, idle 1, transaction 1)");
        assert_eq!(s.sysbench_conflicts, 2);
        assert_eq!(s.lost.cell(), "2 (sysbench 1, idle 1)");
        assert_eq!(s.ids_changed.get(Kind::Idle), 1);
        assert_eq!(s.state_lost.cell(), "1 (prepared 1)");
        assert_eq!(s.operations.get(Kind::Sysbench), 100);
        assert_eq!(
            seen(&ops, &reports, ms(2_000), ms(3_000)).errors.cell(),
            "0"
        );
        // The prepared probe's 250 ms wait began before the window and ended in it.
        assert_eq!(
            longest_stall(&ops, ms(1_900), ms(2_000)),
            Some((Duration::from_millis(250), Kind::Prepared))
        );
        assert_eq!(longest_stall(&ops, ms(3_000), ms(4_000)), None);
        assert_eq!(reports.worst_percentile_ms(ms(500), ms(1_500)), Some(40.0));
        assert_eq!(reports.worst_percentile_ms(ms(0), ms(900)), Some(3.0));
        assert_eq!(p99_ms(&ops, ms(1_000), ms(2_000)), Some(250.0));
        let texts = failure_texts(&ops, 10);
        assert_eq!(texts.len(), 4);
        assert!(texts
            .iter()
            .any(|(t, n)| t == "idle: connection lost: closed" && *n == 1));
    }

    #[test]
    fn sysbench_errors_fall_in_the_second_of_the_next_report() {
        let output = "Threads started!\n\
            DEBUG: Ignoring error 1213 Deadlock found when trying to get lock, \n\
            (last message repeated 2 times)\n\
            [ 1s ] thds: 16 tps: 10.00 qps: 200.00 (r/w/o: 1/1/1) lat (ms,99%): 5.00 err/s: 3.00 reconn/s: 0.00\n\
            FATAL: mysql_drv_query() returned error 2013 (Lost connection to server during query)\n\
            [ 2s ] thds: 16 tps: 10.00 qps: 200.00 (r/w/o: 1/1/1) lat (ms,99%): 5.00 err/s: 1.00 reconn/s: 1.00\n";
        let errors = sysbench_errors(output);
        assert_eq!(errors.len(), 4);
        // Repeats still folded at the end: the reports count 3 more than named.
        let folded = output.replace("err/s: 1.00", "err/s: 4.00");
        let errors = sysbench_errors(&folded);
        assert_eq!(errors.len(), 7);
        assert!(errors[4..]
            .iter()
            .all(|(s, t)| *s == 3 && t.contains("2013")));
        assert!(errors[..3]
            .iter()
            .all(|(s, t)| *s == 1 && workload_conflict(t)));
        assert_eq!(errors[3].0, 2);
        assert!(!workload_conflict(&errors[3].1));
    }

    #[test]
    fn hit_rates_need_lookups_of_one_process() {
        assert_eq!(hit_rate((10, 10), (40, 20)), Some(0.75));
        assert_eq!(hit_rate((10, 10), (10, 10)), None);
        // Counters that went back were read from another process.
        assert_eq!(hit_rate((10, 10), (5, 20)), None);
    }
}
