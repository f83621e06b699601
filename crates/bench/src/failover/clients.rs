//! What a run's clients saw, read into its record: the probes' acknowledged writes
//! looked for on the promoted server, each sysbench's summary, and the errors; with
//! --kill-instance, the killed instance's clients' errors apart from the others.

use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_sandbox::MariaDb;

use super::probe::{ProbeLog, TRX_TABLE, WRITES_TABLE};
use super::{fleet::instance_file, tally, Bench, Killed, Run, SysbenchFigures};
use super::{DATABASE, ERROR_TEXTS, IDS_KEPT};
use crate::sysbench::{self, parse_run};
use crate::tool::Finished;

impl Bench<'_> {
    /// What the clients saw into `run`: the probes' writes against the `promoted`
    /// server, sysbench's summaries, and the errors. The killed instance's clients'
    /// errors (with --kill-instance) go apart; their acknowledged writes still count.
    pub(super) fn tally_clients(
        &self,
        run: &mut Run,
        k: Killed,
        promoted: &MariaDb,
    ) -> anyhow::Result<()> {
        let mut logs = k.probes;
        let mut sysbench = k.sysbench;
        let mut killed = self
            .plan
            .kill_instance
            .then(|| (logs.remove(0), sysbench.remove(0)));
        let mut probes = ProbeLog::default();
        for log in logs {
            probes.merge(log);
        }
        // What the killed instance acknowledged before it died must still be there.
        if let Some((log, _)) = &mut killed {
            probes.acked_writes.append(&mut log.acked_writes);
            probes.acked_trx.append(&mut log.acked_trx);
        }
        tally_probes(run, &probes, promoted, k.killed, k.recovered)?;
        let first = u32::from(killed.is_some()) + 1;
        let mut texts = Vec::new();
        for (number, finished) in (first..).zip(sysbench) {
            let output = instance_file(&run.sysbench_output, number, self.plan.instances);
            let (figures, errors) = self.sysbench_figures(&output, finished, k.killed_after)?;
            texts.extend(errors);
            match &mut run.sysbench {
                Some(all) => all.add(&figures),
                None => run.sysbench = Some(figures),
            }
        }
        run.sysbench_errors = tally::error_texts(&texts, ERROR_TEXTS);
        run.client_errors = Some(
            run.sysbench
                .as_ref()
                .map_or(0, |s| s.ignored_errors + s.reconnects)
                + run.probe_write_errors
                + run.probe_trx_errors,
        );
        if let (Some((log, finished)), Some(f)) = (killed, &mut run.fleet) {
            let (count, mut texts) = killed_sysbench_errors(finished);
            f.killed_instance_errors = Some(count + log.write_errors + log.trx_errors);
            texts.extend(log.errors);
            f.killed_instance_texts = tally::error_texts(&texts, ERROR_TEXTS);
        }
        Ok(())
    }

    /// The summary of one sysbench (its output in `output`, relative to the output
    /// directory) and the errors it named, or why there is none; `killed_after`: the
    /// kill's time from sysbench's start.
    fn sysbench_figures(
        &self,
        output: &str,
        finished: anyhow::Result<Finished>,
        killed_after: Duration,
    ) -> anyhow::Result<(SysbenchFigures, Vec<String>)> {
        let finished = finished?;
        let texts = tally::sysbench_errors(&finished.output);
        let log = self.out.join(output);
        let what = format!("oltp_read_write threads={}", self.plan.threads);
        sysbench::check(&finished, &what, &log)?;
        let stats = parse_run(&finished.output).with_context(|| {
            format!(
                "{what}: sysbench exited 0 but its output has no complete summary; see {}",
                log.display()
            )
        })?;
        let before = tally::sysbench_errors_before(&finished.output, killed_after);
        let conflicts = texts.iter().filter(|t| tally::workload_conflict(t)).count();
        Ok((
            SysbenchFigures::new(&stats, before, conflicts as u64),
            texts,
        ))
    }
}

/// The errors the killed instance's sysbench met, however it ended (it may stop at its
/// first failed reconnect): the count and their texts.
fn killed_sysbench_errors(finished: anyhow::Result<Finished>) -> (u64, Vec<String>) {
    match finished {
        Ok(f) => {
            let texts = tally::sysbench_errors(&f.output);
            let count = parse_run(&f.output)
                .map_or(texts.len() as u64, |s| s.ignored_errors + s.reconnects);
            (count, texts)
        }
        Err(e) => (0, vec![format!("sysbench: {e:#}")]),
    }
}

/// What the probes saw, and their writes as the promoted server has them.
fn tally_probes(
    run: &mut Run,
    probes: &ProbeLog,
    promoted: &MariaDb,
    killed: Instant,
    recovered: Instant,
) -> anyhow::Result<()> {
    run.probe_writes_acked = probes.acked_writes.len() as u64;
    run.probe_write_errors = probes.write_errors;
    run.probe_transactions = probes.transactions() as u64;
    run.probe_trx_errors = probes.trx_errors;
    run.probe_errors = tally::error_texts(&probes.errors, ERROR_TEXTS);
    let acks: Vec<Instant> = probes
        .acked_writes
        .iter()
        .chain(&probes.acked_trx)
        .map(|(_, at)| *at)
        .collect();
    run.write_pause_ms = tally::write_pause(&acks, killed, recovered).map(|d| d.as_millis() as u64);

    let ids_of = |table: &str| -> anyhow::Result<Vec<i64>> {
        let batch = promoted
            .execute(&format!("SELECT id FROM {DATABASE}.{table}"))
            .context("reading the probe writes on the promoted server")?;
        tally::parse_ids(&batch)
    };
    let writes = ids_of(WRITES_TABLE)?;
    let trx = ids_of(TRX_TABLE)?;
    let ids = |acked: &[(i64, Instant)]| acked.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    let mut lost = tally::lost(ids(&probes.acked_writes), &writes);
    lost.extend(tally::lost(ids(&probes.acked_trx), &trx));
    let mut twice = tally::applied_twice(&writes);
    twice.extend(tally::applied_twice(&trx));
    run.acked_lost = Some(lost.len() as u64);
    run.applied_twice = Some(twice.len() as u64);
    run.lost_ids = lost.into_iter().take(IDS_KEPT).collect();
    run.twice_ids = twice.into_iter().take(IDS_KEPT).collect();
    Ok(())
}
