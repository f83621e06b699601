//! What one failover run's records come to: the write pause from the probes'
//! acknowledgements, acknowledged writes missing or doubled on the promoted server,
//! Sluice's replay counters, and the errors clients saw, grouped by text. No I/O.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use crate::sysbench::parse_interval;

/// The longest time between two consecutive acknowledged writes (`acks`, in any order)
/// across the failover: of the gaps ending after the primary was killed and starting
/// before the failover was seen done. An OK in flight at the kill may land just after
/// it, so the gap spanning the kill instant alone could be that short one rather than
/// the pause. `None` when no write was acknowledged after the kill.
pub(super) fn write_pause(
    acks: &[Instant],
    killed: Instant,
    recovered: Instant,
) -> Option<Duration> {
    let mut acks = acks.to_vec();
    acks.sort();
    acks.windows(2)
        .filter(|w| w[1] > killed && w[0] < recovered)
        .map(|w| w[1] - w[0])
        .max()
}

/// The ids of a one-column `SELECT` as the mariadb CLI prints it in batch mode: a
/// header line, then one id per line.
pub(super) fn parse_ids(batch: &str) -> anyhow::Result<Vec<i64>> {
    batch
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().with_context(|| format!("not an id: {l:?}")))
        .collect()
}

/// Acknowledged ids not `present`, in order.
pub(super) fn lost(acked: impl IntoIterator<Item = i64>, present: &[i64]) -> Vec<i64> {
    let present: HashSet<i64> = present.iter().copied().collect();
    let mut lost: Vec<i64> = acked
        .into_iter()
        .filter(|id| !present.contains(id))
        .collect();
    lost.sort_unstable();
    lost
}

/// Ids found more than once, in order.
pub(super) fn applied_twice(present: &[i64]) -> Vec<i64> {
    let mut counts: HashMap<i64, u32> = HashMap::new();
    for id in present {
        *counts.entry(*id).or_insert(0) += 1;
    }
    let mut twice: Vec<i64> = counts
        .into_iter()
        .filter(|&(_, n)| n > 1)
        .map(|(id, _)| id)
        .collect();
    twice.sort_unstable();
    twice
}

/// Sluice's transaction replays over a run (`stats` of `/v1/servers`; each run has a
/// Sluice of its own, so the counters start at 0).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(super) struct Replays {
    pub attempted: u64,
    pub succeeded: u64,
    pub refused: u64,
    /// Refusals by reason; "mismatch": an answer differed on the new writer.
    pub refused_by: BTreeMap<String, u64>,
}

/// Reason of a refused replay whose transaction's results differed on the new writer:
/// the client's error then is the one a direct connection would give, which the target
/// excepts.
pub(super) const MISMATCH: &str = "mismatch";

impl Replays {
    pub(super) fn from_servers(json: &Value) -> Replays {
        let stats = &json["stats"];
        let n = |key: &str| stats[key].as_u64().unwrap_or(0);
        Replays {
            attempted: n("replays_attempted"),
            succeeded: n("replays_succeeded"),
            refused: n("replays_refused"),
            refused_by: stats["replays_refused_by"]
                .as_object()
                .map(|by| {
                    by.iter()
                        .map(|(why, count)| (why.clone(), count.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// `other`'s counters added to these: the replays of several instances.
    pub(super) fn add(&mut self, other: &Replays) {
        self.attempted += other.attempted;
        self.succeeded += other.succeeded;
        self.refused += other.refused;
        for (why, n) in &other.refused_by {
            *self.refused_by.entry(why.clone()).or_insert(0) += n;
        }
    }

    pub(super) fn mismatches(&self) -> u64 {
        self.refused_by.get(MISMATCH).copied().unwrap_or(0)
    }

    /// "3 (mismatch 2, lost_again 1)", or the count alone.
    pub(super) fn refused_cell(&self) -> String {
        if self.refused_by.is_empty() {
            return self.refused.to_string();
        }
        let by: Vec<String> = self
            .refused_by
            .iter()
            .map(|(why, n)| format!("{why} {n}"))
            .collect();
        format!("{} ({})", self.refused, by.join(", "))
    }
}

/// An error text and how often it was seen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct ErrorText {
    pub text: String,
    pub count: u64,
}

/// The first `keep` distinct texts among `errors`, in the order first seen, each with
/// its count over all of them.
pub(super) fn error_texts(errors: &[String], keep: usize) -> Vec<ErrorText> {
    let mut texts: Vec<ErrorText> = Vec::new();
    for e in errors {
        if let Some(t) = texts.iter_mut().find(|t| &t.text == e) {
            t.count += 1;
        } else if texts.len() < keep {
            texts.push(ErrorText {
                text: e.clone(),
                count: 1,
            });
        }
    }
    texts
}

/// The errors sysbench names in its output, one entry per error. At `--verbosity=5` it
/// logs `DEBUG: Ignoring error 1213 <message>, ` for each error it ignores, folding
/// repeats of a line into `(last message repeated N times)`; errors it does not ignore
/// come on lines of their own (`FATAL: ...`). Its intermediate reports are printed
/// around that folding: a repeat may follow reports that came after its line.
pub(super) fn sysbench_errors(output: &str) -> Vec<String> {
    let mut errors: Vec<String> = Vec::new();
    let mut last_was_error = false;
    for line in output.lines().map(str::trim) {
        if line.is_empty() || parse_interval(line).is_some() {
            continue;
        }
        if let Some(n) = crate::sysbench::repeated(line) {
            if let Some(last) = errors.last().filter(|_| last_was_error).cloned() {
                errors.extend(std::iter::repeat_n(last, n));
            }
            continue;
        }
        let Some(text) = crate::sysbench::error_text(line) else {
            last_was_error = false;
            continue;
        };
        errors.push(text);
        last_was_error = true;
    }
    errors
}

/// Whether an error sysbench names is the server's own conflict between its threads
/// (a deadlock, a duplicate key, a lock wait timeout), as MariaDB words it: Sluice's
/// own errors say "Sluice:", and a lost connection is none of these.
pub(crate) fn workload_conflict(text: &str) -> bool {
    [
        "error 1213: Deadlock found",
        "error 1062: Duplicate entry",
        "error 1205: Lock wait timeout exceeded",
    ]
    .iter()
    .any(|p| text.starts_with(p))
}

/// N of sysbench's `(last message repeated N times)`.
/// The errors of sysbench's intermediate reports (`--report-interval=1`) that end at
/// least a second before `killed_after` from sysbench's start: none of them met the
/// failover. sysbench starts its clock once its threads have connected, well within
/// that second.
pub(super) fn sysbench_errors_before(output: &str, killed_after: Duration) -> u64 {
    let errors: f64 = output
        .lines()
        .filter_map(parse_interval)
        .filter(|i| (i.at_secs + 1) as f64 <= killed_after.as_secs_f64())
        .map(|i| i.errors_per_sec)
        .sum();
    errors.round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_pause_is_the_longest_gap_across_the_failover() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let killed = at(1000);
        let recovered = at(2500);
        // Every 10 ms until the kill, one OK in flight landing 2 ms after it, then
        // nothing until 2300 ms, and a hiccup after the failover that is not its pause.
        let mut acks: Vec<Instant> = (0..=99).map(|i| at(i * 10)).collect();
        acks.extend([at(1002), at(2300), at(2310), at(2600), at(4000)]);
        acks.reverse();
        assert_eq!(
            write_pause(&acks, killed, recovered),
            Some(Duration::from_millis(1298))
        );
        // Nothing after the kill: no pause can be told.
        let before: Vec<Instant> = (0..=99).map(|i| at(i * 10)).collect();
        assert_eq!(write_pause(&before, killed, recovered), None);
        assert_eq!(write_pause(&[], killed, recovered), None);
    }

    #[test]
    fn lost_and_doubled_ids() {
        let present = parse_ids("id\n1\n2\n2\n4\n5\n5\n5\n").unwrap();
        assert_eq!(present, [1, 2, 2, 4, 5, 5, 5]);
        assert_eq!(lost([5, 3, 1, 6], &present), [3, 6]);
        assert_eq!(applied_twice(&present), [2, 5]);
        assert!(applied_twice(&[1, 2, 3]).is_empty());
        assert_eq!(parse_ids("").unwrap(), Vec::<i64>::new());
        assert!(parse_ids("id\nx\n").is_err());
    }

    #[test]
    fn replays_come_from_the_servers_view() {
        let json = json!({"writer": "replica1", "stats": {
            "replays_attempted": 5, "replays_succeeded": 2, "replays_refused": 3,
            "replays_refused_by": {"mismatch": 2, "lost_again": 1}
        }});
        let r = Replays::from_servers(&json);
        assert_eq!((r.attempted, r.succeeded, r.refused), (5, 2, 3));
        assert_eq!(r.mismatches(), 2);
        assert_eq!(r.refused_cell(), "3 (lost_again 1, mismatch 2)");
        let none = Replays::from_servers(&json!({"stats": {}}));
        assert_eq!(none, Replays::default());
        assert_eq!(none.refused_cell(), "0");
    }

    #[test]
    fn errors_are_grouped_by_text() {
        let errors: Vec<String> = ["a", "b", "a", "c", "a", "b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let texts = error_texts(&errors, 2);
        assert_eq!(
            texts,
            [
                ErrorText {
                    text: "a".into(),
                    count: 3
                },
                ErrorText {
                    text: "b".into(),
                    count: 2
                }
            ]
        );
    }

    #[test]
    fn sysbench_errors_before_the_kill_come_from_its_reports() {
        let output = "Threads started!\n\
            [ 1s ] thds: 2 tps: 221.62 qps: 4474.42 (r/w/o: 3137.68/889.49/447.24) lat (ms,95%): 11.65 err/s: 2.00 reconn/s: 0.00\n\
            [ 2s ] thds: 2 tps: 201.05 qps: 4033.93 (r/w/o: 2827.65/804.19/402.09) lat (ms,95%): 15.55 err/s: 1.00 reconn/s: 0.00\n\
            [ 3s ] thds: 2 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,95%): 0.00 err/s: 4.00 reconn/s: 0.00\n";
        // Killed 3.5 s in: the first two reports ended a second before.
        assert_eq!(
            sysbench_errors_before(output, Duration::from_millis(3500)),
            3
        );
        assert_eq!(
            sysbench_errors_before(output, Duration::from_millis(1900)),
            0
        );
    }

    #[test]
    fn every_error_sysbench_ignored_is_named() {
        // Captured from sysbench 1.0.20 through Sluice, primary killed 5 s in
        // (oltp_read_write, 2 threads, 1 table x 100 rows, --verbosity=5), unedited.
        let output = include_str!("../testdata/run_read_write_failover.txt");
        let errors = sysbench_errors(output);
        let stats = crate::sysbench::parse_run(output).unwrap();
        assert_eq!(errors.len() as u64, stats.ignored_errors);
        let texts = error_texts(&errors, 5);
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].text.starts_with("error 1213: Deadlock found"));
        assert_eq!(texts[0].count, 20);
        assert!(texts[1]
            .text
            .starts_with("error 1213: Sluice: the server was lost"));
        assert_eq!(texts[1].count, 2);
        // The workload's deadlocks are its own; Sluice's 1213 is the failover's.
        assert_eq!(errors.iter().filter(|e| workload_conflict(e)).count(), 20);
    }

    #[test]
    fn sysbench_names_the_errors_it_met() {
        // As sysbench 1.0.20 prints them at --verbosity=5 (through Sluice, primary
        // killed), its intermediate reports and summary left out.
        let output = "Threads started!\n\n\
            DEBUG: Ignoring error 1213 Deadlock found when trying to get lock; try restarting transaction, \n\
            DEBUG: Ignoring error 1213 Sluice: the server was lost during the transaction, which was rolled back; try restarting transaction, \n\
            (last message repeated 2 times)\n\
            DEBUG: Worker thread (#0) initialized\n\
            (last message repeated 3 times)\n\
            FATAL: mysql_stmt_execute() returned error 2013 (Lost connection to server during query) for query 'COMMIT'\n\
            Time limit exceeded, exiting...\n\
            (last message repeated 3 times)\n\
            Done.\n\
            ignored errors:                      4      (0.10 per sec.)\n";
        let lost = "error 1213: Sluice: the server was lost during the transaction, which was \
                    rolled back; try restarting transaction";
        assert_eq!(
            sysbench_errors(output),
            [
                "error 1213: Deadlock found when trying to get lock; try restarting transaction",
                lost,
                lost,
                lost,
                "FATAL: mysql_stmt_execute() returned error 2013 (Lost connection to server \
                 during query) for query 'COMMIT'",
            ]
        );
    }
}
