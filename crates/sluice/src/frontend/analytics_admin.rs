//! What the admin API shows of analytics, joined with what only the frontend knows
//! (sessions, pools, servers, the cache): the overview, history, digests, users, the
//! cache advisor and its one-call rule, and the Prometheus exposition.

mod metrics;

use super::Frontend;
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
        metrics::render(&self.fe)
    }
}
