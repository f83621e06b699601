//! The Prometheus exposition of `GET /metrics`. Each family is declared once below,
//! in the order it is written; each step writes one group of them.

use super::Connections;
use crate::admin::metrics::{self, Exposition, Family, DURATION_BUCKETS};
use crate::analytics::{Analytics, Kind, UserTotals};
use crate::frontend::Frontend;
use crate::router::{Health, Member, Router, RouterStats};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const QUERIES: Family = Family::counter("sluice_queries_total", "statements finished, by kind");
const QUERY_ERRORS: Family = Family::counter(
    "sluice_query_errors_total",
    "statements answered with an error",
);
const ROWS_SENT: Family =
    Family::counter("sluice_rows_sent_total", "result-set rows sent to clients");
const QUERY_DURATION: Family = Family::histogram(
    "sluice_query_duration_seconds",
    "statement time from its arrival to the end of its response",
);
const CACHE_MISSES: Family = Family::counter(
    "sluice_cache_misses_total",
    "statements a cache rule matched that the server answered",
);
const CACHE_ENTRIES: Family = Family::gauge("sluice_cache_entries", "query cache entries");
const CACHE_BYTES: Family = Family::gauge("sluice_cache_bytes", "bytes the query cache holds");
/// Per cache rule, the rule's name its label.
const CACHE_FRESHNESS: [Family; 2] = [
    Family::histogram(
        "sluice_cache_hit_age_seconds",
        "age of the entries the query cache served (time since their fill), by rule",
    ),
    Family::histogram(
        "sluice_cache_fill_after_change_seconds",
        "time from the last change of a table the binlog brought to the fill of an entry reading it, by rule",
    ),
];

/// A per-server family's value for a server, given the writers' names; none: no sample.
type ServerValue = fn(&Member, &[String]) -> Option<f64>;

/// A sample per server in each, the server's name its label.
const PER_SERVER: [(Family, ServerValue); 8] = [
    (
        Family::gauge(
            "sluice_server_up",
            "0 when the monitor finds the server down, else 1",
        ),
        |m, _| Some(f64::from(u8::from(m.state.load().health != Health::Down))),
    ),
    (
        Family::gauge("sluice_server_writer", "1 for the server taking writes"),
        |m, writers| Some(f64::from(u8::from(writers.iter().any(|w| w == m.name())))),
    ),
    (
        Family::gauge(
            "sluice_server_replication_lag_seconds",
            "replication lag the monitor saw (replicas only)",
        ),
        |m, _| {
            m.state
                .load()
                .replica
                .as_ref()
                .and_then(|r| r.seconds_behind)
                .map(|s| s as f64)
        },
    ),
    (
        Family::counter(
            "sluice_server_queries_total",
            "commands relayed to the server",
        ),
        |m, _| Some(count(&m.pool.server.counters.queries)),
    ),
    (
        Family::counter(
            "sluice_server_errors_total",
            "commands the server answered with an error",
        ),
        |m, _| Some(count(&m.pool.server.counters.errors)),
    ),
    (
        Family::counter(
            "sluice_server_sent_bytes_total",
            "bytes of commands sent to the server",
        ),
        |m, _| Some(count(&m.pool.server.counters.bytes_sent)),
    ),
    (
        Family::counter(
            "sluice_server_received_bytes_total",
            "bytes of responses from the server",
        ),
        |m, _| Some(count(&m.pool.server.counters.bytes_received)),
    ),
    (
        Family::gauge(
            "sluice_server_ttfb_seconds",
            "recent time to first byte of reads routed to the server",
        ),
        |m, _| Some(m.ttfb().as_secs_f64()),
    ),
];
const SERVER_CONNECTIONS: Family = Family::gauge(
    "sluice_server_connections",
    "backend connections per server, by state",
);

/// A replay counter of a router, summed over every shard's.
type ReplayCount = fn(&RouterStats) -> &AtomicU64;

/// One unlabelled sample in each.
const REPLAY_COUNTS: [(Family, ReplayCount); 3] = [
    (
        Family::counter(
            "sluice_transaction_replays_attempted_total",
            "transactions run again on a new writer after theirs was lost",
        ),
        |s| &s.replays_attempted,
    ),
    (
        Family::counter(
            "sluice_transaction_replays_succeeded_total",
            "replayed transactions whose every answer matched what the client saw",
        ),
        |s| &s.replays_succeeded,
    ),
    (
        Family::counter(
            "sluice_in_flight_commits_found_total",
            "COMMITs and wrapped autocommit writes whose reply was lost with the writer, found committed on the new one",
        ),
        |s| &s.commits_found,
    ),
];
const REPLAYS_REFUSED: Family = Family::counter(
    "sluice_transaction_replays_refused_total",
    "replays that could not go on, by why (the client got error 1213)",
);

/// A per-user family's value from the user's figures.
type UserValue = fn(&UserTotals) -> u64;

/// A sample per Sluice user in each, the user's name its label.
const PER_USER: [(Family, UserValue); 2] = [
    (
        Family::counter("sluice_user_queries_total", "statements per Sluice user"),
        |t| t.queries,
    ),
    (
        Family::counter(
            "sluice_user_errors_total",
            "statements answered with an error, per Sluice user",
        ),
        |t| t.errors,
    ),
];

const BACKEND_CONNECTIONS: Family = Family::gauge(
    "sluice_backend_connections",
    "backend connections, by state",
);
const SESSIONS_PINNED: Family = Family::gauge(
    "sluice_sessions_pinned",
    "multiplexed sessions pinned to a connection",
);
const MULTIPLEX_RATIO: Family = Family::gauge(
    "sluice_multiplex_ratio",
    "client sessions per backend connection",
);
const QUEUE_WAITING: Family = Family::gauge(
    "sluice_queue_waiting",
    "clients waiting for a backend connection",
);
const QUEUE_WAITS: Family = Family::counter(
    "sluice_queue_waits_total",
    "leases that had to wait in the queue",
);
const DIGESTS_TRACKED: Family = Family::gauge("sluice_digests_tracked", "statement digests kept");

/// The whole exposition: the process counters and the fleet's families, then the
/// families declared above, with Galera flow control after the servers' connections.
pub(super) fn render(fe: &Frontend) -> String {
    let mut e = Exposition::default();
    metrics::counters(&mut e, &fe.stats);
    if let Some(fleet) = fe.fleet.get() {
        fleet.metrics(&mut e);
    }
    statements(&mut e, &fe.analytics);
    cache_usage(&mut e, fe);
    let routers = fe.routers();
    servers(&mut e, &routers);
    replays(&mut e, &routers);
    users(&mut e, &fe.analytics);
    connections(&mut e, &fe.connections());
    e.only(&DIGESTS_TRACKED, fe.analytics.digests().len() as f64);
    e.finish()
}

/// What statements came to: how many of each kind, errors, rows, how long they took,
/// and the cache misses among them.
fn statements(e: &mut Exposition, a: &Analytics) {
    let t = a.totals();
    e.declare(&QUERIES);
    for k in Kind::ALL {
        e.sample(QUERIES.name, &[("kind", k.name())], t.kind(k) as f64);
    }
    e.only(&QUERY_ERRORS, t.errors as f64);
    e.only(&ROWS_SENT, t.rows as f64);
    durations(e, a);
    e.only(&CACHE_MISSES, t.cache_misses as f64);
}

/// The histogram of statement times: how many took up to each bound, then all of them.
fn durations(e: &mut Exposition, a: &Analytics) {
    let (latencies, sum_us) = a.digests().all_latencies();
    let buckets = DURATION_BUCKETS.map(|le| (le, latencies.count_between(0, (le * 1e6) as u64)));
    e.declare(&QUERY_DURATION).histogram(
        &QUERY_DURATION,
        &[],
        buckets,
        latencies.len(),
        sum_us as f64 / 1e6,
    );
}

/// What the query cache holds (nothing without one).
fn cache_usage(e: &mut Exposition, fe: &Frontend) {
    let (entries, bytes) = fe.cache.as_ref().map_or((0, 0), |c| c.usage());
    e.only(&CACHE_ENTRIES, entries as f64);
    e.only(&CACHE_BYTES, bytes as f64);
    let rules = fe.cache.as_ref().map(|c| c.freshness()).unwrap_or_default();
    for (i, family) in CACHE_FRESHNESS.iter().enumerate() {
        e.declare(family);
        for (rule, hits, fills) in &rules {
            let ages = if i == 0 { hits } else { fills };
            let sum = ages.sum().as_secs_f64();
            e.histogram(
                family,
                &[("rule", rule)],
                ages.cumulative(),
                ages.count(),
                sum,
            );
        }
    }
}

/// Every shard's servers (the one cluster's without shards): the per-server families,
/// their connections by state, and Galera flow control.
fn servers(e: &mut Exposition, routers: &[Arc<Router>]) {
    let writers: Vec<String> = routers
        .iter()
        .filter_map(|r| r.writer().map(|w| w.name().to_owned()))
        .collect();
    let members: Vec<_> = routers
        .iter()
        .flat_map(|r| r.members.iter().cloned())
        .collect();
    for (family, value) in &PER_SERVER {
        e.declare(family);
        for m in &members {
            if let Some(v) = value(m, &writers) {
                e.sample(family.name, &[("server", m.name())], v);
            }
        }
    }
    e.declare(&SERVER_CONNECTIONS);
    for m in &members {
        let (_, idle, leased, _) = m.pool.counts();
        for (state, n) in [("in_use", leased), ("idle", idle)] {
            e.sample(
                SERVER_CONNECTIONS.name,
                &[("server", m.name()), ("state", state)],
                n as f64,
            );
        }
    }
    metrics::galera_flow(e, &members);
}

/// Transactions replayed on a new writer after theirs was lost, over every shard, and
/// why the refused ones could not go on.
fn replays(e: &mut Exposition, routers: &[Arc<Router>]) {
    for (family, counter) in &REPLAY_COUNTS {
        let n: u64 = routers
            .iter()
            .map(|r| counter(&r.stats).load(Ordering::Relaxed))
            .sum();
        e.only(family, n as f64);
    }
    e.declare(&REPLAYS_REFUSED);
    let mut refused = BTreeMap::new();
    for r in routers {
        for (why, n) in r.stats.replays_refused_by.lock().iter() {
            *refused.entry(*why).or_insert(0u64) += n;
        }
    }
    for (why, n) in refused {
        e.sample(REPLAYS_REFUSED.name, &[("reason", why)], n as f64);
    }
}

/// The per-user families, a sample for each Sluice user.
fn users(e: &mut Exposition, a: &Analytics) {
    let users = a.users();
    for (family, value) in &PER_USER {
        e.declare(family);
        for (u, t) in &users {
            e.sample(family.name, &[("user", &u.name)], value(t) as f64);
        }
    }
}

/// Backend connections by state, and how client sessions share and wait for them.
fn connections(e: &mut Exposition, c: &Connections) {
    e.declare(&BACKEND_CONNECTIONS);
    e.sample(
        BACKEND_CONNECTIONS.name,
        &[("state", "in_use")],
        c.in_use as f64,
    );
    e.sample(
        BACKEND_CONNECTIONS.name,
        &[("state", "idle")],
        c.idle as f64,
    );
    e.only(&SESSIONS_PINNED, c.pinned as f64);
    let backends = c.in_use + c.idle;
    let ratio = if backends == 0 {
        0.0
    } else {
        c.clients as f64 / backends as f64
    };
    e.only(&MULTIPLEX_RATIO, ratio);
    e.only(&QUEUE_WAITING, c.waiting as f64);
    e.only(&QUEUE_WAITS, c.waits_total as f64);
}

/// A server counter's value now.
fn count(c: &AtomicU64) -> f64 {
    c.load(Ordering::Relaxed) as f64
}
