//! `sluice admin servers`: the servers as a table, then what needs a line of its own
//! (missing privileges, Galera flow control, the last failover).

use serde_json::Value;

/// Servers as a table, one line each, after the writer.
pub fn format_servers(servers: &Value) -> String {
    let mut out = format!(
        "writer: {}\n{:<16} {:<8} {:<8} {:>6} {:>8} {:>10} {:>10} {:>8}  {}\n",
        servers["writer"].as_str().unwrap_or("(none)"),
        "server",
        "role",
        "health",
        "weight",
        "lag s",
        "reads",
        "writes",
        "ttfb ms",
        "error"
    );
    for s in servers["servers"].as_array().into_iter().flatten() {
        let text = |k: &str| s[k].as_str().unwrap_or("-").to_owned();
        out.push_str(&format!(
            "{:<16} {:<8} {:<8} {:>6} {:>8} {:>10} {:>10} {:>8.2}  {}\n",
            text("name"),
            text("role"),
            text("health"),
            s["weight"].as_u64().unwrap_or(0),
            s["lag_seconds"]
                .as_u64()
                .map_or("-".into(), |l| l.to_string()),
            s["reads"].as_u64().unwrap_or(0),
            s["writes"].as_u64().unwrap_or(0),
            s["ttfb_ms"].as_f64().unwrap_or(0.0),
            text("error")
        ));
    }
    // After the table: a missing privilege is what makes the next failover fail.
    for s in servers["servers"].as_array().into_iter().flatten() {
        let missing: Vec<&str> = s["missing_privileges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !missing.is_empty() {
            out.push_str(&format!(
                "{}: the monitor account lacks {} (failover and switchover need it)\n",
                s["name"].as_str().unwrap_or("?"),
                missing.join(", ")
            ));
        }
    }
    out.push_str(&galera_lines(servers));
    if let Some(last) = servers["last_failover"].as_object() {
        let text = |k: &str| last.get(k).and_then(Value::as_str).unwrap_or("-");
        out.push_str(&format!(
            "last {}: {} -> {} at {}: {}\n",
            text("kind"),
            text("from"),
            text("to"),
            text("at"),
            text("outcome")
        ));
    }
    out
}

/// A line per Galera node: its state and its part in flow control over the monitor's
/// last interval. The node sending flow control is named, being the one the whole
/// cluster waits for.
fn galera_lines(servers: &Value) -> String {
    let mut out = String::new();
    for s in servers["servers"].as_array().into_iter().flatten() {
        let g = &s["galera"];
        if !g.is_object() {
            continue;
        }
        let f = &g["flow"];
        let n = |k: &str| f[k].as_u64().unwrap_or(0);
        let state = match g["local_state"].as_u64() {
            Some(4) => "synced".to_owned(),
            Some(2) => "donor/desynced".to_owned(),
            Some(other) => format!("state {other}"),
            None => "state unknown".to_owned(),
        };
        out.push_str(&format!(
            "{}: galera {state}, flow control paused {:.1}%, sent {}, received {}, recv queue {}{}\n",
            s["name"].as_str().unwrap_or("?"),
            f["paused_share"].as_f64().unwrap_or(0.0) * 100.0,
            n("sent"),
            n("received"),
            n("recv_queue"),
            if n("sent") > 0 || f["requested"] == true {
                " (sending flow control: the cluster waits for this node)"
            } else {
                ""
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn galera_nodes_get_a_flow_control_line() {
        let servers = json!({
            "writer": "n1",
            "servers": [
                {"name": "n1", "role": "writer", "health": "up", "galera": {
                    "local_state": 4,
                    "flow": {"paused_share": 0.25, "sent": 0, "received": 3, "recv_queue": 0},
                }},
                {"name": "n2", "role": "reader", "health": "up", "galera": {
                    "local_state": 4,
                    "flow": {"paused_share": 0.25, "sent": 0, "received": 3, "recv_queue": 17, "requested": true},
                }},
                {"name": "plain", "role": "reader", "health": "up", "galera": null},
            ],
        });
        let text = format_servers(&servers);
        assert!(
            text.contains(
                "n1: galera synced, flow control paused 25.0%, sent 0, received 3, recv queue 0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "n2: galera synced, flow control paused 25.0%, sent 0, received 3, \
                 recv queue 17 (sending flow control: the cluster waits for this node)\n"
            ),
            "{text}"
        );
        assert!(!text.contains("plain: galera"), "{text}");
    }
}
