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

/// `sluice admin fleet`: this instance, then every instance as a table; instances whose
/// configuration differs from this one's are marked.
pub fn format_fleet(fleet: &Value) -> String {
    let mine = fleet["slot"].as_u64();
    let members = fleet["members"].as_array().cloned().unwrap_or_default();
    let my_hash = members
        .iter()
        .find(|m| m["slot"].as_u64() == mine)
        .and_then(|m| m["config_hash"].as_str())
        .unwrap_or("");
    let mut out = format!(
        "fleet {} ({}), this instance: {} (slot {}), writer named: {}\n",
        fleet["name"].as_str().unwrap_or("-"),
        fleet["mode"].as_str().unwrap_or("-"),
        fleet["instance"].as_str().unwrap_or("-"),
        mine.map_or("-".into(), |s| s.to_string()),
        fleet["named_writer"].as_str().unwrap_or("(none)"),
    );
    if let Some(t) = fleet["trouble"].as_str() {
        out.push_str(&format!("trouble: {t}\n"));
    }
    out.push_str(&format!(
        "{:>4} {:<28} {:<22} {:<8} {:<13} {:>8} {:<12} {:>10}  {}\n",
        "slot",
        "instance",
        "address",
        "version",
        "config",
        "sessions",
        "duties",
        "contact",
        "state"
    ));
    for m in &members {
        let text = |k: &str| m[k].as_str().unwrap_or("-").to_owned();
        let hash = text("config_hash");
        let drift = if hash != my_hash { "*" } else { "" };
        let duties: Vec<&str> = m["duties"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!(
            "{:>4} {:<28} {:<22} {:<8} {:<13} {:>8} {:<12} {:>10}  {}\n",
            m["slot"].as_u64().unwrap_or(0),
            text("name"),
            text("address"),
            text("version"),
            format!("{hash}{drift}"),
            m["sessions"].as_u64().unwrap_or(0),
            if duties.is_empty() {
                "-".into()
            } else {
                duties.join(",")
            },
            m["last_contact_ms"]
                .as_u64()
                .map_or("-".into(), |ms| format!("{:.1}s ago", ms as f64 / 1000.0)),
            if m["live"].as_bool() == Some(true) {
                "live"
            } else {
                "gone"
            },
        ));
    }
    if members
        .iter()
        .any(|m| m["config_hash"].as_str() != Some(my_hash))
    {
        out.push_str("* configuration differs from this instance's\n");
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

    #[test]
    fn fleet_marks_drift_and_gone_instances() {
        let fleet = serde_json::json!({
            "name": "sluice", "mode": "servers", "instance": "a", "slot": 0,
            "named_writer": "db1",
            "members": [
                {"slot": 0, "name": "a", "address": "10.0.0.1:3306", "version": "0.1.0",
                 "config_hash": "aaaa", "sessions": 3, "duties": ["leader"], "live": true,
                 "last_contact_ms": 1500},
                {"slot": 1, "name": "b", "address": "10.0.0.2:3306", "version": "0.1.0",
                 "config_hash": "bbbb", "sessions": 0, "duties": [], "live": false}
            ]
        });
        let text = format_fleet(&fleet);
        assert!(text.contains("writer named: db1"), "{text}");
        assert!(
            text.contains("leader") && text.contains("1.5s ago"),
            "{text}"
        );
        assert!(text.contains("bbbb*") && text.contains("gone"), "{text}");
        assert!(!text.contains("aaaa*"), "{text}");
    }
}
