//! `sluice bench all`: every other scenario in turn with the same common flags, each
//! writing its own report in a directory of its name under --out, then one HTML page
//! holding every scenario's report. A scenario that fails does not stop the others; the
//! page says it failed, and so does the exit status.

use std::time::SystemTime;

use anyhow::{bail, Context};

use crate::document::{html_page, Document};
use crate::{CommonArgs, Ran, Scenario};

/// Flags of `sluice bench all`: the common flags, passed on to every scenario (with
/// --demo, each runs in its demo sizes).
#[derive(clap::Args, Debug, Clone)]
pub struct AllArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs every scenario, then writes the page and prints where it is.
pub fn run(args: &AllArgs) -> Ran {
    Ran {
        report: None,
        result: run_all(args),
    }
}

fn run_all(args: &AllArgs) -> anyhow::Result<()> {
    let started = SystemTime::now();
    let out = args.common.out_dir("all", started);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut intro = vec![format!(
        "Started {}; every scenario with the same flags: `{}`.",
        humantime::format_rfc3339_seconds(started),
        std::env::args().collect::<Vec<_>>().join(" ")
    )];
    let mut documents: Vec<Document> = Vec::new();
    let mut failed = Vec::new();
    for scenario in Scenario::each(&args.common, &out) {
        let name = scenario.name();
        let dir = out.join(name);
        println!("\n== sluice bench {name} ==");
        let Ran { report, result } = scenario.run();
        match result {
            Ok(()) => intro.push(format!(
                "{name}: finished; its files are in `{}`.",
                dir.display()
            )),
            Err(e) => {
                eprintln!("sluice bench {name}: {e:#}");
                intro.push(format!(
                    "{name}: **failed**: {}; its files are in `{}`.",
                    format!("{e:#}").lines().next().unwrap_or(""),
                    dir.display()
                ));
                failed.push(name);
            }
        }
        documents.extend(report);
    }
    let page = out.join("report.html");
    let documents: Vec<&Document> = documents.iter().collect();
    std::fs::write(&page, html_page("Sluice benchmarks", &intro, &documents))
        .with_context(|| format!("writing {}", page.display()))?;
    println!("\nReport of every scenario: {}", page.display());
    if !failed.is_empty() {
        bail!("{} failed; see {}", failed.join(", "), page.display());
    }
    Ok(())
}
