//! An honest reading of the zones figures, from the figures themselves: the ratio
//! beside the published one, what a read spent waiting on delays and on the machine,
//! how far the links kept their delays, and where the spread reads went.

use super::super::{Mode, Placement, Results, SummaryRow};
use super::{percent, published, tps_cell};
use crate::mux::cell;

/// The notes under the comparison table.
pub(super) fn notes(r: &Results) -> Vec<String> {
    let mut notes = Vec::new();
    notes.extend(ratios(r));
    for c in &r.comparison {
        notes.extend(budget(r, c.placement, c.threads));
    }
    notes.extend(cpu(r));
    notes.extend(threads(r));
    notes.extend(links(r));
    notes.extend(spread(r));
    notes
}

fn row(r: &Results, placement: Placement, mode: Mode, threads: u32) -> Option<&SummaryRow> {
    r.summary
        .iter()
        .find(|s| (s.placement, s.mode, s.threads) == (placement, mode, threads))
}

/// nearest ÷ primary at every thread count, per placement, beside the published.
fn ratios(r: &Results) -> Option<String> {
    let per = |placement: Placement| {
        let list: Vec<String> = r
            .comparison
            .iter()
            .filter(|c| c.placement == placement)
            .map(|c| format!("{} at {} threads", ratio(c.ratio), c.threads))
            .collect();
        (!list.is_empty()).then(|| {
            format!(
                "{} (published {:.2})",
                list.join(", "),
                published(placement)
            )
        })
    };
    let colocated = per(Placement::Colocated);
    let hop = per(Placement::ClientHop);
    if colocated.is_none() && hop.is_none() {
        return None;
    }
    Some(format!(
        "**nearest ÷ primary**: client beside Sluice {}; client one hop away {}. In a \
         closed loop (each sysbench thread waits for its answer) tps is threads ÷ latency, \
         so the ratio is how much shorter a read on the near replica is.",
        colocated.unwrap_or_else(|| "not measured".into()),
        hop.unwrap_or_else(|| "not measured".into()),
    ))
}

/// What one read of the primary and nearest runs took, how much of it was the
/// configured delay, and what share of a primary read nearest saved against the share
/// the published ratio means.
fn budget(r: &Results, placement: Placement, threads: u32) -> Option<String> {
    let p = row(r, placement, Mode::Primary, threads)?;
    let n = row(r, placement, Mode::Nearest, threads)?;
    let (p_ms, n_ms) = (p.ms_per_read?, n.ms_per_read?);
    let saved = p_ms - n_ms;
    let target = published(placement);
    Some(format!(
        "Client {}, {threads} threads: a read took {p_ms:.3} ms on the primary ({} ms of it \
         configured round trip) and {n_ms:.3} ms on the near replica ({} ms of it round \
         trip, {} ms the machine: sysbench, Sluice, the server and the relays). Nearest \
         saved {saved:.3} ms a read, {} of a primary read; the published {target:.2}x is a \
         saving of {}.",
        placement_words(placement),
        cell(p.round_trip_ms, 3),
        cell(n.round_trip_ms, 3),
        cell(n.round_trip_ms.map(|rt| n_ms - rt), 3),
        percent(Some(saved / p_ms)),
        percent(Some(1.0 - 1.0 / target)),
    ))
}

/// Whether the cores bounded the runs.
fn cpu(r: &Results) -> Option<String> {
    let busy = |mode: Mode| {
        let all: Vec<f64> = r
            .summary
            .iter()
            .filter(|s| s.mode == mode)
            .filter_map(|s| s.cpu_busy)
            .collect();
        Some((
            all.iter().copied().fold(f64::INFINITY, f64::min),
            all.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ))
        .filter(|_| !all.is_empty())
    };
    let (n_lo, n_hi) = busy(Mode::Nearest)?;
    let (p_lo, p_hi) = busy(Mode::Primary)?;
    let range = |lo: f64, hi: f64| match percent(Some(lo)) == percent(Some(hi)) {
        true => percent(Some(lo)),
        false => format!("{}–{}", percent(Some(lo)), percent(Some(hi))),
    };
    let reading = if n_hi >= 0.85 {
        "the near-replica runs were bound by CPU per read, not by the delay (sysbench, \
         Sluice, four servers and the relays' threads share two cores): once the cores \
         are busy, a shorter wait no longer buys more reads"
    } else {
        "the cores had room, so the delays, not the CPU, set the pace of these runs"
    };
    Some(format!(
        "CPU (both cores, everything on the machine): {} busy during the nearest runs, \
         {} during the primary runs; {reading}.",
        range(n_lo, n_hi),
        range(p_lo, p_hi)
    ))
}

/// How the ratio moved with the threads, per placement, where it fell.
fn threads(r: &Results) -> Vec<String> {
    let mut notes = Vec::new();
    for placement in [Placement::Colocated, Placement::ClientHop] {
        let rows: Vec<_> = r
            .comparison
            .iter()
            .filter(|c| c.placement == placement && c.ratio.is_some())
            .collect();
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            continue;
        };
        if first.threads == last.threads || last.ratio >= first.ratio {
            continue;
        }
        let busy = row(r, placement, Mode::Nearest, last.threads).and_then(|s| s.cpu_busy);
        notes.push(format!(
            "Client {}: the ratio falls from {} at {} threads to {} at {}. The primary runs \
             gained more from the added threads (tps {} to {}) than the near-replica runs \
             ({} to {}, CPU {} busy): more threads overlap more of the primary's round \
             trips, while the near-replica runs, the cores already busy, could not turn \
             more threads into more reads.",
            placement_words(placement),
            ratio(first.ratio),
            first.threads,
            ratio(last.ratio),
            last.threads,
            tps_cell(first.primary_tps),
            tps_cell(last.primary_tps),
            tps_cell(first.nearest_tps),
            tps_cell(last.nearest_tps),
            percent(busy),
        ));
    }
    notes
}

/// How well the links kept their delays, and what a relay costs by itself.
fn links(r: &Results) -> Option<String> {
    let ok: Vec<_> = r.runs.iter().filter(|run| run.failure.is_none()).collect();
    let chunks: u64 = ok.iter().map(|run| run.links.chunks).sum();
    if chunks == 0 {
        return None;
    }
    let late: f64 = ok
        .iter()
        .filter_map(|run| Some(run.links.mean_late_us? * run.links.chunks as f64))
        .sum();
    let worst = ok
        .iter()
        .filter_map(|run| run.links.worst_late_us)
        .fold(0.0, f64::max);
    let mean = late / chunks as f64;
    Some(format!(
        "Links: chunks were passed on {mean:.1} µs after their due time on average over \
         every run (worst {worst:.0} µs), against delays of {} and {} µs: a read, whose \
         question and answer each cross a link, waited about {:.0} µs more than configured \
         per link it crossed (one colocated and direct, two with the client hop). With no \
         delay at all, a link costs {} µs per round trip (its socket hops and thread \
         wake-ups).",
        r.intra_zone_us,
        r.cross_zone_us,
        2.0 * mean,
        cell(r.relay_cost_us, 1)
    ))
}

/// Where the spread runs' reads went, and whether latency-aware balancing already
/// favours the near replica.
fn spread(r: &Results) -> Vec<String> {
    let mut notes = Vec::new();
    for row in r.reads.iter().filter(|row| row.mode == Mode::Spread) {
        let Some(near) = row.servers.iter().find(|s| s.name == "replica1") else {
            continue;
        };
        let Some(share) = near.share else { continue };
        let replicas = row.servers.len().saturating_sub(1).max(1);
        let fair = 1.0 / replicas as f64;
        let others: Vec<String> = row
            .servers
            .iter()
            .filter(|s| s.name != "replica1")
            .map(|s| format!("{} {}", s.name, percent(s.share)))
            .collect();
        let verdict = if share >= fair + 0.15 {
            "latency-aware balancing already favours the near replica, but only nearest \
             sends it every read"
        } else if share > fair + 0.03 {
            "latency-aware balancing favours the near replica only a little"
        } else {
            "latency-aware balancing does not favour the near replica here"
        };
        let vs = r
            .comparison
            .iter()
            .find(|c| c.placement == row.placement && c.threads == row.threads);
        notes.push(format!(
            "spread, client {}, {} threads: replica1 ran {} of the SELECTs ({}) where equal weights \
             give {}: {verdict} (spread ÷ primary {}, nearest ÷ primary {}).",
            placement_words(row.placement),
            row.threads,
            percent(Some(share)),
            others.join(", "),
            percent(Some(fair)),
            ratio(vs.and_then(|c| c.spread_ratio)),
            ratio(vs.and_then(|c| c.ratio)),
        ));
    }
    notes
}

/// Where the client is, after the word "client".
fn placement_words(placement: Placement) -> &'static str {
    match placement {
        Placement::Colocated => "beside Sluice",
        Placement::ClientHop => "one hop away",
    }
}

fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.2}"))
}
