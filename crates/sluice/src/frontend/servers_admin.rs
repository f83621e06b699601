//! What the admin API shows of the servers (role, health, lag, GTID, load and the
//! routing counters) and the operator's actions: switchover, enable, disable, drain.

use super::Frontend;
use crate::admin::{ServersAdmin, WarmFuture};
use crate::auth::BackendCredentials;
use crate::fleet::{Change, ServerState};
use crate::router::{Health, Member, Router};
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The servers' side of the admin API, reading through the frontend's router.
pub struct ServersHandle {
    pub fe: Arc<Frontend>,
    /// The account switchovers use (the monitor's).
    pub creds: Option<Arc<BackendCredentials>>,
}

fn role(router: &Router, m: &Arc<Member>) -> &'static str {
    if router.writer().is_some_and(|w| Arc::ptr_eq(&w, m)) {
        return "writer";
    }
    // Every synced node takes writes when they spread over the cluster.
    if router.multi_writer() && m.state.load().galera.is_some() && m.writable() {
        return "writer";
    }
    let s = m.state.load();
    if m.fenced.load(Ordering::Relaxed) {
        "fenced"
    } else if m.disabled.load(Ordering::Relaxed) {
        "disabled"
    } else if m.draining.load(Ordering::Relaxed) {
        if m.pool.leased() > 0 {
            "draining"
        } else {
            "drained"
        }
    } else if s.health == Health::Down {
        "down"
    } else if s.lagging {
        "lagging"
    } else if s.read_only == Some(true) || s.galera.as_ref().is_some_and(|g| g.synced()) {
        "reader"
    } else if s.health == Health::Unknown {
        "unknown"
    } else {
        // Writable but not the writer: kept out, it would take writes apart.
        "standby"
    }
}

fn member_json(router: &Router, m: &Arc<Member>) -> Value {
    let s = m.state.load();
    let c = &m.pool.server.counters;
    let (open, idle, leased, waiting) = m.pool.counts();
    let stmts = &m.pool.server.stmts;
    json!({
        "name": m.name(),
        "address": m.pool.server.endpoint.to_string(),
        "role": role(router, m),
        "configured_role": format!("{:?}", m.role).to_lowercase(),
        "health": s.health,
        "read_only": s.read_only,
        "weight": m.weight,
        "zone": m.zone,
        "groups": m.groups,
        "max_lag_seconds": m.max_lag.as_secs_f64(),
        "lag_seconds": s.replica.as_ref().and_then(|r| r.seconds_behind),
        "lagging": s.lagging,
        "replication": s.replica,
        "galera": s.galera,
        "gtid_current_pos": s.gtid.as_ref().map(|g| g.to_string()),
        "ping_ms": s.ping.map(|p| p.as_secs_f64() * 1000.0),
        "error": s.error,
        "missing_privileges": s.missing_privileges,
        "ttfb_ms": m.ttfb().as_secs_f64() * 1000.0,
        "reads": m.reads.load(Ordering::Relaxed),
        "writes": m.writes.load(Ordering::Relaxed),
        "connections": { "open": open, "idle": idle, "leased": leased, "waiting": waiting },
        "prepared_statements": {
            "open": stmts.open(),
            "budget": stmts.budget(),
            "server_limit": stmts.budget_known().then(|| stmts.server_limit()),
        },
        "fenced": m.fenced.load(Ordering::Relaxed),
        "disabled": m.disabled.load(Ordering::Relaxed),
        "draining": m.draining.load(Ordering::Relaxed),
        "queries": c.queries.load(Ordering::Relaxed),
        "errors": c.errors.load(Ordering::Relaxed),
        "bytes_sent": c.bytes_sent.load(Ordering::Relaxed),
        "bytes_received": c.bytes_received.load(Ordering::Relaxed),
        "mean_us": c.busy_us.load(Ordering::Relaxed).checked_div(c.queries.load(Ordering::Relaxed)).unwrap_or(0),
    })
}

impl Frontend {
    /// Each Galera node's paused share over the monitor's last interval, for the
    /// history (servers the monitor has not seen as Galera nodes are left out).
    pub fn galera_paused(&self) -> Vec<(String, f64)> {
        self.router
            .load()
            .members
            .iter()
            .filter_map(|m| {
                let s = m.state.load();
                let g = s.galera.as_ref()?;
                Some((m.name().to_owned(), g.flow.paused_share))
            })
            .collect()
    }
}

impl ServersHandle {
    /// Every server, with its shard's name when there are shards.
    fn members_json(&self) -> Vec<Value> {
        let Some(shards) = &self.fe.shards else {
            let router = self.fe.router.load_full();
            return router
                .members
                .iter()
                .map(|m| member_json(&router, m))
                .collect();
        };
        let mut out = Vec::new();
        for (name, router) in shards.map.names().iter().zip(&shards.routers) {
            for m in &router.members {
                let mut j = member_json(router, m);
                j["shard"] = json!(name);
                out.push(j);
            }
        }
        out
    }
}

impl ServersAdmin for ServersHandle {
    fn servers(&self) -> Value {
        let router = self.fe.router.load_full();
        let st = &router.stats;
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        json!({
            "writer": router.writer().map(|w| w.name().to_owned()),
            "switchover_in_progress": router.paused.load(Ordering::Relaxed),
            "read_write_split": router.splits(),
            "consistency": router.routing.consistency,
            "galera_writers": router.routing.galera_writers,
            "servers": self.members_json(),
            "shards": self.fe.shards.as_ref().map(|s| {
                let auto = s.auto_increment.lock().clone();
                s.map.names().iter().zip(&s.routers).zip(auto)
                    .map(|((name, r), auto)| json!({
                        "name": name,
                        "writer": r.writer().map(|w| w.name().to_owned()),
                        "servers": r.members.iter().map(|m| m.name().to_owned()).collect::<Vec<_>>(),
                        "auto_increment_increment": auto.map(|a| a.0),
                        "auto_increment_offset": auto.map(|a| a.1),
                        // The shard's traffic: what its servers relayed.
                        "queries": r.members.iter()
                            .map(|m| n(&m.pool.server.counters.queries)).sum::<u64>(),
                        "errors": r.members.iter()
                            .map(|m| n(&m.pool.server.counters.errors)).sum::<u64>(),
                    }))
                    .collect::<Vec<_>>()
            }),
            "shard_ids_apart": self.fe.shards.as_ref().map(|s| s.auto_increment_apart()),
            "rules": router.rules.load().hits().into_iter()
                .map(|(name, hits)| json!({"name": name, "hits": hits})).collect::<Vec<_>>(),
            "stats": {
                "reads_to_readers": n(&st.reads_to_readers),
                "reads_to_writer": n(&st.reads_to_writer),
                "gtid_waits": n(&st.gtid_waits),
                "gtid_wait_timeouts": n(&st.gtid_wait_timeouts),
                "retried_reads": n(&st.retried_reads),
                "replays_attempted": n(&st.replays_attempted),
                "replays_succeeded": n(&st.replays_succeeded),
                "replays_refused": n(&st.replays_refused),
                "replays_refused_by": *st.replays_refused_by.lock(),
                "commits_found": n(&st.commits_found),
                "certification_retries": n(&self.fe.stats.certification_retries),
                "writer_waits": n(&st.writer_waits),
                "writer_wait_timeouts": n(&st.writer_wait_timeouts),
                "failovers": n(&st.failovers),
                "switchovers": n(&st.switchovers),
                "blocked_by_rules": n(&st.blocked),
                "statement_timeouts": n(&st.timeouts),
            },
            "last_failover": *st.last_failover.lock(),
        })
    }

    fn switchover(&self, to: Option<String>) -> WarmFuture {
        let router = self.fe.router.load_full();
        let creds = self.creds.clone();
        Box::pin(async move {
            let creds = creds.ok_or("no account for the monitor: switchover is not possible")?;
            let record = crate::monitor::failover::switchover(&router, &creds, to.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            Ok(serde_json::to_value(record).unwrap_or_default())
        })
    }

    fn set_enabled(&self, server: &str, enabled: bool) -> Result<Value, String> {
        let state = match enabled {
            true => ServerState::Enabled,
            false => ServerState::Disabled,
        };
        let done = self
            .fe
            .set_server_state(server, state)
            .map_err(|(_, e)| e)?;
        self.fe.publish(Change::Server {
            name: server.to_owned(),
            state,
        });
        Ok(done)
    }

    fn drain(&self, server: &str) -> Result<Value, (StatusCode, String)> {
        let done = self.fe.set_server_state(server, ServerState::Drained)?;
        self.fe.publish(Change::Server {
            name: server.to_owned(),
            state: ServerState::Drained,
        });
        Ok(done)
    }
}

impl Frontend {
    /// The router `server` is a member of (the default one when none is).
    fn router_of(&self, server: &str) -> Arc<crate::router::Router> {
        self.routers()
            .into_iter()
            .find(|r| r.by_name(server).is_some())
            .unwrap_or_else(|| self.router.load_full())
    }

    /// Enables, disables or drains a server here (an operator's action, through this
    /// instance's API or a peer's).
    pub(super) fn set_server_state(
        &self,
        server: &str,
        state: ServerState,
    ) -> Result<Value, (StatusCode, String)> {
        let router = self.router_of(server);
        let m = router.by_name(server).ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                format!("no server is named {server:?}"),
            )
        })?;
        match state {
            ServerState::Enabled | ServerState::Disabled => {
                let enabled = state == ServerState::Enabled;
                m.disabled.store(!enabled, Ordering::Relaxed);
                if enabled {
                    m.fenced.store(false, Ordering::Relaxed);
                    m.draining.store(false, Ordering::Relaxed);
                }
                router.elect();
            }
            ServerState::Drained => {
                if router.writer().is_some_and(|w| Arc::ptr_eq(&w, m)) {
                    return Err((
                        StatusCode::CONFLICT,
                        format!("{server} is the writer: switch over to another server before draining it"),
                    ));
                }
                m.draining.store(true, Ordering::Relaxed);
                let closed = m.pool.close_idle();
                tracing::info!(server, closed, "server drained by the operator");
            }
        }
        Ok(member_json(&router, m))
    }
}
