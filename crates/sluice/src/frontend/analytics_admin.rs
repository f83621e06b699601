//! What the admin API shows of analytics, joined with what only the frontend knows
//! (sessions, pools, servers, the cache): the overview, history, digests, users, the
//! cache advisor and its one-call rule, and the Prometheus exposition.

use super::Frontend;
use crate::admin::metrics::{self, Exposition, Type, DURATION_BUCKETS};
use crate::admin::AnalyticsAdmin;
use crate::analytics::digests::{parse_id, Sort};
use crate::analytics::history::Gauges;
use crate::analytics::{unix_now, Kind};
use crate::cache::RuleConfig;
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub struct AnalyticsHandle {
    pub fe: Arc<Frontend>,
}

/// Connections and sessions right now.
struct Connections {
    clients: u64,
    in_use: u64,
    idle: u64,
    waiting: u64,
    waits_total: u64,
    pinned: u64,
}

impl Frontend {
    fn connections(&self) -> Connections {
        let pinned = self
            .sessions
            .lock()
            .values()
            .filter(|s| s.live.pinned().is_some())
            .count() as u64;
        let mut c = Connections {
            clients: self.stats.client_connections_active.load(Ordering::Relaxed),
            in_use: 0,
            idle: 0,
            waiting: 0,
            waits_total: 0,
            pinned,
        };
        for p in self.routers().iter().flat_map(|r| r.pools()) {
            let (_, idle, leased, waiting) = p.counts();
            c.in_use += leased as u64;
            c.idle += idle as u64;
            c.waiting += waiting as u64;
            c.waits_total += p.queue.waits.load(Ordering::Relaxed);
        }
        c
    }

    /// What the history samples each second from outside analytics.
    pub fn gauges(&self) -> Gauges {
        let c = self.connections();
        Gauges {
            bytes_in_total: self.stats.bytes_from_clients.load(Ordering::Relaxed),
            bytes_out_total: self.stats.bytes_to_clients.load(Ordering::Relaxed),
            queue_waits_total: c.waits_total,
            clients: c.clients,
            backends_in_use: c.in_use,
            backends_idle: c.idle,
            pinned: c.pinned,
            queued: c.waiting,
            galera_paused: self.galera_paused(),
        }
    }
}

impl AnalyticsHandle {
    fn rule_name(id: &str) -> String {
        format!("advisor-{id}")
    }
}

impl AnalyticsAdmin for AnalyticsHandle {
    fn overview(&self) -> Value {
        let a = &self.fe.analytics;
        let t = a.totals();
        let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let mut totals = json!({
            "queries": t.queries(),
            "errors": t.errors,
            "rows": t.rows,
            "bytes_in": n(&self.fe.stats.bytes_from_clients),
            "bytes_out": n(&self.fe.stats.bytes_to_clients),
            "cache_hits": t.cache_hits,
            "cache_misses": t.cache_misses,
        });
        for k in Kind::ALL {
            totals[k.name()] = json!(t.kind(k));
        }
        let (hits, misses) = (t.cache_hits, t.cache_misses);
        let c = self.fe.connections();
        let backends = c.in_use + c.idle;
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_seconds": a.started.elapsed().as_secs(),
            "now": unix_now(),
            "analytics": a.enabled(),
            "totals": totals,
            "cache_hit_rate": (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
            "clients": c.clients,
            "backends_in_use": c.in_use,
            "backends_idle": c.idle,
            "multiplex_ratio": (backends > 0).then(|| c.clients as f64 / backends as f64),
            "pinned": c.pinned,
            "queued": c.waiting,
            "queue_waits": c.waits_total,
            "writer": self.fe.router.load().writer().map(|w| w.name().to_owned()),
            "digests": a.digests().len(),
            "last": a.history.lock().last().cloned(),
        })
    }

    fn history(&self, minutes: bool, since: Option<u64>) -> Value {
        let h = self.fe.analytics.history.lock();
        let mut points = h.points(minutes, since);
        if minutes {
            // The minute in progress, so a day's chart reaches now.
            if let Some(m) = h.current_minute() {
                if since.is_none_or(|s| m.t > s) && points.last().is_none_or(|p| p.t < m.t) {
                    points.push(m);
                }
            }
        }
        json!({
            "range": if minutes { "day" } else { "hour" },
            "interval_seconds": if minutes { 60 } else { 1 },
            "now": unix_now(),
            "points": points,
        })
    }

    fn digests(&self, sort: Sort, limit: usize) -> Value {
        let d = self.fe.analytics.digests();
        json!({
            "digests": d.top(sort, limit),
            "tracked": d.len(),
            "evicted": d.evicted.load(Ordering::Relaxed),
        })
    }

    fn digest(&self, id: &str) -> Option<Value> {
        self.fe.analytics.digests().get(parse_id(id)?)
    }

    fn reset_digests(&self) -> usize {
        self.fe.analytics.digests().reset()
    }

    fn users(&self) -> Value {
        let users: Vec<Value> = self
            .fe
            .analytics
            .users()
            .iter()
            .map(|(u, t)| {
                json!({
                    "name": u.name,
                    "sessions": u.sessions.load(Ordering::Relaxed).max(0),
                    "queries": t.queries,
                    "errors": t.errors,
                    "rows_sent": t.rows_sent,
                    "total_us": t.total_us,
                    "bytes_in": t.bytes_in,
                    "bytes_out": t.bytes_out,
                    "cache_hits": t.cache_hits,
                })
            })
            .collect();
        json!({ "users": users })
    }

    fn advisor(&self, limit: usize) -> Value {
        let advice = self.fe.analytics.advise(limit);
        let rules: Vec<String> = self
            .fe
            .cache
            .as_ref()
            .map(|c| c.rule_configs().into_iter().map(|r| r.name).collect())
            .unwrap_or_default();
        let candidates: Vec<Value> = advice
            .candidates
            .into_iter()
            .map(|mut c| {
                let name = Self::rule_name(&c.id);
                if rules.contains(&name) {
                    c.cached = true;
                    c.rule = Some(name);
                }
                serde_json::to_value(c).unwrap_or_default()
            })
            .collect();
        json!({
            "window_seconds": advice.window_seconds,
            "cache": self.fe.cache.is_some(),
            "candidates": candidates,
        })
    }

    fn enable_advice(&self, id: &str, ttl: Duration) -> Result<Value, (StatusCode, String)> {
        let digest = parse_id(id)
            .and_then(|id| {
                self.fe
                    .analytics
                    .digests()
                    .entry(id, |e| (e.text.clone(), e.cacheable))
            })
            .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no digest {id:?}")))?;
        let (text, cacheable) = digest;
        if !cacheable {
            return Err((
                StatusCode::CONFLICT,
                format!("{text:?} is not a read the cache may store"),
            ));
        }
        let cache = self.fe.cache.as_ref().ok_or((
            StatusCode::CONFLICT,
            "no query cache: set [cache] enabled = true (or give it a rule) and restart".into(),
        ))?;
        let name = Self::rule_name(id);
        let rule = RuleConfig {
            name: name.clone(),
            pattern: None,
            digest: Some(format!("^{}$", regex::escape(&text))),
            user: None,
            schema: None,
            ttl,
            stale_while_revalidate: Duration::ZERO,
        };
        let mut rules = cache.rule_configs();
        rules.retain(|r| r.name != name);
        // First, so that a broader rule placed earlier can't shadow the operator's choice.
        rules.insert(0, rule.clone());
        let count = rules.len();
        let shared = serde_json::to_value(&rules).unwrap_or_default();
        cache
            .set_rules(rules)
            .map_err(|p| (StatusCode::CONFLICT, p.join("; ")))?;
        self.fe
            .publish(crate::fleet::Change::CacheRules { rules: shared });
        tracing::info!(rule = %name, digest = %text, "cache rule enabled from the advisor");
        Ok(json!({
            "rule": {
                "name": name,
                "digest": rule.digest,
                "ttl": humantime::format_duration(ttl).to_string(),
            },
            "rules": count,
        }))
    }

    fn metrics(&self) -> String {
        let fe = &self.fe;
        let a = &fe.analytics;
        let mut e = Exposition::default();
        metrics::counters(&mut e, &fe.stats);
        if let Some(fleet) = fe.fleet.get() {
            fleet.metrics(&mut e);
        }
        let t = a.totals();

        e.family(
            "sluice_queries_total",
            Type::Counter,
            "statements finished, by kind",
        );
        for k in Kind::ALL {
            e.sample(
                "sluice_queries_total",
                &[("kind", k.name())],
                t.kind(k) as f64,
            );
        }
        e.single(
            "sluice_query_errors_total",
            Type::Counter,
            "statements answered with an error",
            t.errors as f64,
        );
        e.single(
            "sluice_rows_sent_total",
            Type::Counter,
            "result-set rows sent to clients",
            t.rows as f64,
        );
        let (latencies, sum_us) = a.digests().all_latencies();
        e.family(
            "sluice_query_duration_seconds",
            Type::Histogram,
            "statement time from its arrival to the end of its response",
        );
        for le in DURATION_BUCKETS {
            let upto = (le * 1e6) as u64;
            let count = latencies.count_between(0, upto);
            let label = format!("{le}");
            e.sample(
                "sluice_query_duration_seconds_bucket",
                &[("le", &label)],
                count as f64,
            );
        }
        e.sample(
            "sluice_query_duration_seconds_bucket",
            &[("le", "+Inf")],
            latencies.len() as f64,
        );
        e.sample(
            "sluice_query_duration_seconds_sum",
            &[],
            sum_us as f64 / 1e6,
        );
        e.sample(
            "sluice_query_duration_seconds_count",
            &[],
            latencies.len() as f64,
        );

        e.single(
            "sluice_cache_misses_total",
            Type::Counter,
            "statements a cache rule matched that the server answered",
            t.cache_misses as f64,
        );
        let (entries, bytes) = fe.cache.as_ref().map_or((0, 0), |c| c.usage());
        e.single(
            "sluice_cache_entries",
            Type::Gauge,
            "query cache entries",
            entries as f64,
        );
        e.single(
            "sluice_cache_bytes",
            Type::Gauge,
            "bytes the query cache holds",
            bytes as f64,
        );

        // Every shard's servers (the one cluster's without shards), each shard's writer.
        let routers = fe.routers();
        let writers: Vec<String> = routers
            .iter()
            .filter_map(|r| r.writer().map(|w| w.name().to_owned()))
            .collect();
        let members: Vec<_> = routers
            .iter()
            .flat_map(|r| r.members.iter().cloned())
            .collect();
        let per_server =
            |e: &mut Exposition,
             name: &str,
             kind: Type,
             help: &str,
             value: &dyn Fn(&crate::router::Member) -> Option<f64>| {
                e.family(name, kind, help);
                for m in &members {
                    if let Some(v) = value(m) {
                        e.sample(name, &[("server", m.name())], v);
                    }
                }
            };
        per_server(
            &mut e,
            "sluice_server_up",
            Type::Gauge,
            "0 when the monitor finds the server down, else 1",
            &|m| {
                Some(f64::from(u8::from(
                    m.state.load().health != crate::router::Health::Down,
                )))
            },
        );
        per_server(
            &mut e,
            "sluice_server_writer",
            Type::Gauge,
            "1 for the server taking writes",
            &|m| Some(f64::from(u8::from(writers.iter().any(|w| w == m.name())))),
        );
        per_server(
            &mut e,
            "sluice_server_replication_lag_seconds",
            Type::Gauge,
            "replication lag the monitor saw (replicas only)",
            &|m| {
                m.state
                    .load()
                    .replica
                    .as_ref()
                    .and_then(|r| r.seconds_behind)
                    .map(|s| s as f64)
            },
        );
        let counter =
            |f: fn(&crate::analytics::ServerCounters) -> &std::sync::atomic::AtomicU64| {
                move |m: &crate::router::Member| {
                    Some(f(&m.pool.server.counters).load(Ordering::Relaxed) as f64)
                }
            };
        per_server(
            &mut e,
            "sluice_server_queries_total",
            Type::Counter,
            "commands relayed to the server",
            &counter(|c| &c.queries),
        );
        per_server(
            &mut e,
            "sluice_server_errors_total",
            Type::Counter,
            "commands the server answered with an error",
            &counter(|c| &c.errors),
        );
        per_server(
            &mut e,
            "sluice_server_sent_bytes_total",
            Type::Counter,
            "bytes of commands sent to the server",
            &counter(|c| &c.bytes_sent),
        );
        per_server(
            &mut e,
            "sluice_server_received_bytes_total",
            Type::Counter,
            "bytes of responses from the server",
            &counter(|c| &c.bytes_received),
        );
        per_server(
            &mut e,
            "sluice_server_ttfb_seconds",
            Type::Gauge,
            "recent time to first byte of reads routed to the server",
            &|m| Some(m.ttfb().as_secs_f64()),
        );
        e.family(
            "sluice_server_connections",
            Type::Gauge,
            "backend connections per server, by state",
        );
        for m in members.iter() {
            let (_, idle, leased, _) = m.pool.counts();
            e.sample(
                "sluice_server_connections",
                &[("server", m.name()), ("state", "in_use")],
                leased as f64,
            );
            e.sample(
                "sluice_server_connections",
                &[("server", m.name()), ("state", "idle")],
                idle as f64,
            );
        }
        metrics::galera_flow(&mut e, &members);
        let replays = |f: fn(&crate::router::RouterStats) -> u64| -> f64 {
            routers.iter().map(|r| f(&r.stats)).sum::<u64>() as f64
        };
        e.single(
            "sluice_transaction_replays_attempted_total",
            Type::Counter,
            "transactions run again on a new writer after theirs was lost",
            replays(|s| {
                s.replays_attempted
                    .load(std::sync::atomic::Ordering::Relaxed)
            }),
        );
        e.single(
            "sluice_transaction_replays_succeeded_total",
            Type::Counter,
            "replayed transactions whose every answer matched what the client saw",
            replays(|s| {
                s.replays_succeeded
                    .load(std::sync::atomic::Ordering::Relaxed)
            }),
        );
        e.single(
            "sluice_in_flight_commits_found_total",
            Type::Counter,
            "COMMITs and wrapped autocommit writes whose reply was lost with the writer, found committed on the new one",
            replays(|s| s.commits_found.load(std::sync::atomic::Ordering::Relaxed)),
        );
        e.family(
            "sluice_transaction_replays_refused_total",
            Type::Counter,
            "replays that could not go on, by why (the client got error 1213)",
        );
        let mut refused = std::collections::BTreeMap::new();
        for r in routers.iter() {
            for (why, n) in r.stats.replays_refused_by.lock().iter() {
                *refused.entry(*why).or_insert(0u64) += n;
            }
        }
        for (why, n) in refused {
            e.sample(
                "sluice_transaction_replays_refused_total",
                &[("reason", why)],
                n as f64,
            );
        }

        let users = a.users();
        e.family(
            "sluice_user_queries_total",
            Type::Counter,
            "statements per Sluice user",
        );
        for (u, t) in &users {
            e.sample(
                "sluice_user_queries_total",
                &[("user", &u.name)],
                t.queries as f64,
            );
        }
        e.family(
            "sluice_user_errors_total",
            Type::Counter,
            "statements answered with an error, per Sluice user",
        );
        for (u, t) in &users {
            e.sample(
                "sluice_user_errors_total",
                &[("user", &u.name)],
                t.errors as f64,
            );
        }

        let c = fe.connections();
        e.family(
            "sluice_backend_connections",
            Type::Gauge,
            "backend connections, by state",
        );
        e.sample(
            "sluice_backend_connections",
            &[("state", "in_use")],
            c.in_use as f64,
        );
        e.sample(
            "sluice_backend_connections",
            &[("state", "idle")],
            c.idle as f64,
        );
        e.single(
            "sluice_sessions_pinned",
            Type::Gauge,
            "multiplexed sessions pinned to a connection",
            c.pinned as f64,
        );
        let backends = c.in_use + c.idle;
        let ratio = if backends == 0 {
            0.0
        } else {
            c.clients as f64 / backends as f64
        };
        e.single(
            "sluice_multiplex_ratio",
            Type::Gauge,
            "client sessions per backend connection",
            ratio,
        );
        e.single(
            "sluice_queue_waiting",
            Type::Gauge,
            "clients waiting for a backend connection",
            c.waiting as f64,
        );
        e.single(
            "sluice_queue_waits_total",
            Type::Counter,
            "leases that had to wait in the queue",
            c.waits_total as f64,
        );
        e.single(
            "sluice_digests_tracked",
            Type::Gauge,
            "statement digests kept",
            a.digests().len() as f64,
        );
        e.finish()
    }
}
