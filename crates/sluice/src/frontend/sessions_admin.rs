//! The admin interface's view of client sessions and backend pools: who is connected,
//! who holds a backend connection and why, and how well statements are multiplexed.

use super::{Frontend, PinReason};
use crate::admin::SessionsAdmin;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub struct SessionsHandle {
    pub fe: Arc<Frontend>,
}

impl SessionsAdmin for SessionsHandle {
    fn sessions(&self) -> Value {
        let sessions = self.fe.sessions.lock();
        let mut rows: Vec<Value> = sessions
            .iter()
            .map(|(id, s)| {
                let (attached, pinned) = (s.live.attached(), s.live.pinned());
                let state = match (attached, pinned) {
                    (true, Some(_)) => "pinned",
                    (true, None) => "active",
                    (false, _) => "idle",
                };
                json!({
                    "id": id,
                    "user": s.user,
                    "client": s.client.to_string(),
                    "multiplexed": s.multiplexed,
                    "attributes": s
                        .attributes
                        .iter()
                        .map(|(k, v)| {
                            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                            (text(k), Value::String(text(v)))
                        })
                        .collect::<serde_json::Map<String, Value>>(),
                    "state": state,
                    "pinned": pinned,
                    "backend": attached.then(|| json!({
                        "server": s.live.server_name(),
                        "thread_id": s.live.thread_id(),
                    })),
                })
            })
            .collect();
        rows.sort_by_key(|r| r["id"].as_u64());
        Value::Array(rows)
    }

    fn pool(&self) -> Value {
        let (clients, attached, pinned) = {
            let sessions = self.fe.sessions.lock();
            let attached = sessions.values().filter(|s| s.live.attached()).count();
            let pinned = sessions
                .values()
                .filter(|s| s.live.pinned().is_some())
                .count();
            (sessions.len(), attached, pinned)
        };
        let router = self.fe.router.load_full();
        let mut backend_open = 0;
        let servers: Vec<Value> = router
            .pools()
            .map(|p| {
                let (open, idle, leased, waiting) = p.counts();
                backend_open += open;
                let q = &p.queue;
                let waits = q.waits.load(Ordering::Relaxed);
                let wait_us = q.wait_micros.load(Ordering::Relaxed);
                json!({
                    "server": p.server.name,
                    "max_connections": p.server.max_connections,
                    "open": open,
                    "idle": idle,
                    "leased": leased,
                    "queue": {
                        "waiting": waiting,
                        "waits": waits,
                        "wait_ms_total": wait_us as f64 / 1000.0,
                        "wait_ms_avg": if waits == 0 { 0.0 } else { wait_us as f64 / waits as f64 / 1000.0 },
                        "wait_ms_max": q.max_wait_micros.load(Ordering::Relaxed) as f64 / 1000.0,
                        "timeouts": q.timeouts.load(Ordering::Relaxed),
                        "rejected": q.rejected.load(Ordering::Relaxed),
                    },
                })
            })
            .collect();
        let m = &self.fe.mux_stats;
        let pins: serde_json::Map<String, Value> = PinReason::ALL
            .iter()
            .zip(m.pins.iter())
            .map(|(r, n)| {
                (
                    r.as_str().to_owned(),
                    Value::from(n.load(Ordering::Relaxed)),
                )
            })
            .collect();
        json!({
            "multiplex": self.fe.pool_config.multiplex,
            "client_sessions": clients,
            "sessions_holding_a_connection": attached,
            "sessions_pinned": pinned,
            "backend_connections": backend_open,
            // Client sessions per open backend connection: what multiplexing saves.
            "multiplexing_ratio": if backend_open == 0 { 0.0 } else { clients as f64 / backend_open as f64 },
            "leases": m.leases.load(Ordering::Relaxed),
            "releases": m.releases.load(Ordering::Relaxed),
            "syncs": m.syncs.load(Ordering::Relaxed),
            "sync_statements": m.sync_statements.load(Ordering::Relaxed),
            "reprepares": m.reprepares.load(Ordering::Relaxed),
            "pins_by_reason": pins,
            "servers": servers,
        })
    }
}
