//! How stale the caching Sluice is after a commit made straight on the database (not
//! through it): the time from the commit's OK to the first read through the Sluice that
//! sees the new value, which its binlog reader decides. The same loop through the
//! pass-through Sluice (or the database itself) is the baseline: one read's round trip.
//! Runs once per benchmark, after the sysbench steps, on a table of its own.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::Scenario;
use crate::client::{Client, Reply};
use crate::report::staleness::{Sample, Staleness, StalenessSeries};
use crate::topology::{Credentials, Target, Topology};

/// Flags of the staleness measurement.
#[derive(clap::Args, Debug, Clone)]
pub struct StalenessArgs {
    /// Samples of the cache's staleness after a direct commit, for the caching Sluice
    /// and for the baseline each [default: 200; demo: 50].
    #[arg(long, value_name = "N")]
    pub staleness_samples: Option<u32>,

    /// How long one sample waits for the new value before it counts as a timeout.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration,
        default_value = "5s")]
    pub staleness_timeout: Duration,

    /// Do not measure the cache's staleness after a direct commit.
    #[arg(long)]
    pub skip_staleness: bool,
}

/// The measurement as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Settings {
    pub(super) samples: u32,
    pub(super) timeout: Duration,
}

impl Settings {
    /// `None` when skipped, or when the cached scenario is not planned.
    pub(super) fn resolve(
        args: &StalenessArgs,
        demo: bool,
        scenarios: &[Scenario],
    ) -> anyhow::Result<Option<Settings>> {
        if args.skip_staleness || !scenarios.contains(&Scenario::Cached) {
            return Ok(None);
        }
        let samples = args
            .staleness_samples
            .unwrap_or(if demo { 50 } else { 200 });
        if samples == 0 || args.staleness_timeout.is_zero() {
            bail!(
                "--staleness-samples and --staleness-timeout must be above 0 (or --skip-staleness)"
            );
        }
        Ok(Some(Settings {
            samples,
            timeout: args.staleness_timeout,
        }))
    }
}

/// Timeouts in a row after which a series stops: a cache that missed an invalidation
/// keeps the old value for its TTL, and every later sample would wait out its timeout.
const STOP_AFTER_TIMEOUTS: u32 = 3;

/// The table the samples update, in the benchmark's database; dropped at the end.
const TABLE: &str = "sluice_staleness";

/// Measures the caching Sluice, then the baseline; what could not be measured is said in
/// the result, never an error.
pub(super) fn measure(settings: &Settings, topology: &Topology, creds: &Credentials) -> Staleness {
    let mut found = Staleness {
        samples: settings.samples,
        timeout_ms: settings.timeout.as_millis() as u64,
        series: Vec::new(),
        missing: None,
    };
    let run = || -> anyhow::Result<Vec<StalenessSeries>> {
        let targets = Targets::of(topology)?;
        eprintln!(
            "measuring staleness after a direct commit: {} samples through {}",
            settings.samples,
            targets
                .through
                .iter()
                .map(|(s, _)| s.to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the staleness probe's runtime")?;
        runtime.block_on(run_all(settings, &targets, creds))
    };
    match run() {
        Ok(series) => found.series = series,
        Err(e) => found.missing = Some(format!("{e:#}")),
    }
    found
}

/// Where the commit goes and where the reads go, as "host:port".
struct Targets {
    direct: String,
    /// The caching Sluice, then the baseline.
    through: Vec<(Scenario, String)>,
}

impl Targets {
    fn of(topology: &Topology) -> anyhow::Result<Targets> {
        let addr = |t: &Target| match t.host.starts_with('/') {
            true => bail!("{t} is a Unix socket; the staleness probe connects over TCP"),
            false => Ok(format!("{}:{}", t.host, t.port)),
        };
        let Some(direct) = &topology.direct else {
            bail!("the commit goes straight to the database: give --mysql-host/--mysql-port");
        };
        let Some(cached) = &topology.cached else {
            bail!("no caching Sluice ran");
        };
        let baseline = match &topology.passthrough {
            Some(p) => (Scenario::Passthrough, addr(&p.target)?),
            None => (Scenario::Direct, addr(direct)?),
        };
        Ok(Targets {
            direct: addr(direct)?,
            through: vec![(Scenario::Cached, addr(&cached.target)?), baseline],
        })
    }
}

async fn run_all(
    settings: &Settings,
    targets: &Targets,
    creds: &Credentials,
) -> anyhow::Result<Vec<StalenessSeries>> {
    let mut writer = Client::connect(&targets.direct, &creds.user, &creds.password)
        .await
        .with_context(|| format!("connecting to the database at {}", targets.direct))?;
    let table = format!("`{}`.`{TABLE}`", creds.database.replace('`', "``"));
    for sql in [
        format!("CREATE TABLE IF NOT EXISTS {table} (id INT PRIMARY KEY, v BIGINT NOT NULL)"),
        format!("REPLACE INTO {table} VALUES (1, 0)"),
    ] {
        expect_ok(&mut writer, &sql).await?;
    }
    let mut value = 0;
    let mut series = Vec::new();
    for (scenario, addr) in &targets.through {
        let probe = Probe {
            settings,
            table: &table,
            addr,
            creds,
        };
        series.push(match probe.series(&mut writer, &mut value).await {
            Ok((samples, timeouts, stopped)) => {
                StalenessSeries::new(*scenario, &samples, timeouts, stopped)
            }
            Err(e) => StalenessSeries::new(*scenario, &[], 0, Some(format!("failed: {e:#}"))),
        });
    }
    let _ = writer.query(&format!("DROP TABLE IF EXISTS {table}")).await;
    writer.quit().await;
    Ok(series)
}

/// The samples through one target.
struct Probe<'a> {
    settings: &'a Settings,
    /// The table, qualified and quoted.
    table: &'a str,
    /// Where the reads go.
    addr: &'a str,
    creds: &'a Credentials,
}

impl Probe<'_> {
    /// The samples that saw the new value, the timeouts, and why the series stopped
    /// early if it did. `value` is the row's value, raised by every sample.
    async fn series(
        &self,
        writer: &mut Client,
        value: &mut i64,
    ) -> anyhow::Result<(Vec<Sample>, u32, Option<String>)> {
        let mut reader = Client::connect(self.addr, &self.creds.user, &self.creds.password)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        let (mut samples, mut timeouts, mut in_a_row) = (Vec::new(), 0, 0);
        // The first sample is not counted: it finds the caches and connections cold.
        for n in 0..=self.settings.samples {
            *value += 1;
            let outcome = self.sample(&mut reader, writer, *value).await?;
            match outcome {
                _ if n == 0 => {}
                Some(sample) => {
                    samples.push(sample);
                    in_a_row = 0;
                }
                None => {
                    timeouts += 1;
                    in_a_row += 1;
                }
            }
            if in_a_row == STOP_AFTER_TIMEOUTS {
                let stopped = format!(
                    "stopped after {STOP_AFTER_TIMEOUTS} timeouts in a row, at sample {n} of {}",
                    self.settings.samples
                );
                return Ok((samples, timeouts, Some(stopped)));
            }
        }
        reader.quit().await;
        Ok((samples, timeouts, None))
    }

    /// One sample: the row read until the read is a hit, `value` committed straight on
    /// the database, then read until it shows; `None` after the timeout.
    async fn sample(
        &self,
        reader: &mut Client,
        writer: &mut Client,
        value: i64,
    ) -> anyhow::Result<Option<Sample>> {
        let read_sql = format!("SELECT v FROM {} WHERE id = 1", self.table);
        // The first read may fill the entry; the second is then a hit.
        read_value(reader, &read_sql).await?;
        let before = Instant::now();
        read_value(reader, &read_sql).await?;
        let read = before.elapsed();
        let update = format!("UPDATE {} SET v = {value} WHERE id = 1", self.table);
        match writer.query(&update).await? {
            Reply::Ok { affected_rows: 1 } => {}
            other => bail!("{update} answered {other:?}"),
        }
        let committed = Instant::now();
        let mut stale_reads = 0;
        loop {
            if read_value(reader, &read_sql).await? == value {
                return Ok(Some(Sample {
                    staleness: committed.elapsed(),
                    stale_reads,
                    read,
                }));
            }
            if committed.elapsed() >= self.settings.timeout {
                return Ok(None);
            }
            stale_reads += 1;
        }
    }
}

async fn expect_ok(client: &mut Client, sql: &str) -> anyhow::Result<()> {
    match client.query(sql).await? {
        Reply::Ok { .. } => Ok(()),
        other => bail!("{sql} answered {other:?}"),
    }
}

/// The one value `sql` reads.
async fn read_value(client: &mut Client, sql: &str) -> anyhow::Result<i64> {
    let (reply, rows) = client.query_values(sql).await?;
    let text = match (&reply, rows.first().and_then(|r| r.first())) {
        (Reply::Rows(1), Some(Some(text))) => text,
        _ => bail!("{sql} answered {reply:?} {rows:?}"),
    };
    text.parse()
        .with_context(|| format!("{sql} answered {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: StalenessArgs,
    }

    fn resolve(
        argv: &[&str],
        demo: bool,
        scenarios: &[Scenario],
    ) -> anyhow::Result<Option<Settings>> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?;
        Settings::resolve(&cli.args, demo, scenarios)
    }

    #[test]
    fn measured_when_the_cached_scenario_runs_unless_skipped() {
        let all = [Scenario::Direct, Scenario::Passthrough, Scenario::Cached];
        let settings = resolve(&[], false, &all).unwrap().unwrap();
        assert_eq!(settings.samples, 200);
        assert_eq!(settings.timeout, Duration::from_secs(5));
        assert_eq!(resolve(&[], true, &all).unwrap().unwrap().samples, 50);
        let asked = resolve(
            &["--staleness-samples", "20", "--staleness-timeout", "500ms"],
            true,
            &all,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            asked,
            Settings {
                samples: 20,
                timeout: Duration::from_millis(500)
            }
        );
        assert_eq!(resolve(&["--skip-staleness"], false, &all).unwrap(), None);
        let no_cache = [Scenario::Direct, Scenario::Passthrough];
        assert_eq!(resolve(&[], false, &no_cache).unwrap(), None);
        assert!(resolve(&["--staleness-samples", "0"], false, &all).is_err());
    }
}
