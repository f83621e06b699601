//! How the admin API's answers are printed: tables, key/value sections, and the
//! `top` overview.

use super::*;

/// `sluice admin top`: a screen every `every`, until interrupted or `iterations`.
pub(super) fn top(
    args: &AdminArgs,
    every: Duration,
    iterations: Option<u64>,
    digests: usize,
) -> Result<String, Failure> {
    use std::io::{IsTerminal, Write};
    let mut client = client(args)?;
    client.io_timeout = args.timeout.unwrap_or(Duration::from_secs(10));
    let terminal = std::io::stdout().is_terminal();
    let mut shown = 0u64;
    loop {
        let overview = call(&client, "GET", "/v1/overview", None)?;
        let servers = call(&client, "GET", "/v1/servers", None)?;
        let top = call(
            &client,
            "GET",
            &format!("/v1/digests?sort=total_time&limit={digests}"),
            None,
        )?;
        let screen = format_top(&overview, &servers, &top);
        let mut out = std::io::stdout().lock();
        // Home and clear, like top; a pipe gets frames one after another.
        let _ = if terminal {
            write!(out, "\x1b[H\x1b[2J{screen}")
        } else {
            writeln!(out, "{screen}")
        };
        let _ = out.flush();
        shown += 1;
        if iterations.is_some_and(|n| shown >= n) {
            return Ok(String::new());
        }
        std::thread::sleep(every);
    }
}

pub(super) fn ms(us: &Value) -> String {
    format!("{:.2}", us.as_f64().unwrap_or(0.0) / 1000.0)
}

pub(super) fn rate(bytes: u64) -> String {
    match bytes {
        b if b >= 10 << 20 => format!("{:.1} MiB/s", b as f64 / (1 << 20) as f64),
        b if b >= 10 << 10 => format!("{:.1} KiB/s", b as f64 / 1024.0),
        b => format!("{b} B/s"),
    }
}

/// One screen of `top`.
pub(super) fn format_top(overview: &Value, servers: &Value, digests: &Value) -> String {
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let last = &overview["last"];
    let uptime = n(overview, "uptime_seconds");
    let mut out = format!(
        "sluice {}  up {}h{:02}m{:02}s  writer {}  clients {}  backends {} in use / {} idle  pinned {}  queued {}\n",
        overview["version"].as_str().unwrap_or("?"),
        uptime / 3600,
        uptime / 60 % 60,
        uptime % 60,
        overview["writer"].as_str().unwrap_or("(none)"),
        n(overview, "clients"),
        n(overview, "backends_in_use"),
        n(overview, "backends_idle"),
        n(overview, "pinned"),
        n(overview, "queued"),
    );
    out.push_str(&format!(
        "queries/s {}  (select {} insert {} update {} delete {} transaction {} other {})  errors/s {}\n",
        n(last, "queries"),
        n(last, "select"),
        n(last, "insert"),
        n(last, "update"),
        n(last, "delete"),
        n(last, "transaction"),
        n(last, "other"),
        n(last, "errors"),
    ));
    let (hits, misses) = (n(last, "cache_hits"), n(last, "cache_misses"));
    out.push_str(&format!(
        "latency ms  p50 {}  p95 {}  p99 {}  max {}   in {}  out {}   cache hits/s {} misses/s {}{}\n\n",
        ms(&last["p50_us"]),
        ms(&last["p95_us"]),
        ms(&last["p99_us"]),
        ms(&last["max_us"]),
        rate(n(last, "bytes_in")),
        rate(n(last, "bytes_out")),
        hits,
        misses,
        if hits + misses > 0 {
            format!(" ({:.1}%)", 100.0 * hits as f64 / (hits + misses) as f64)
        } else {
            String::new()
        },
    ));
    out.push_str(&format!(
        "{:<16} {:<9} {:<8} {:>6} {:>10} {:>8} {:>8} {:>6} {:>6}\n",
        "SERVER", "ROLE", "HEALTH", "LAG s", "QUERIES", "ERRORS", "MEAN ms", "USED", "IDLE"
    ));
    for s in servers["servers"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:<16} {:<9} {:<8} {:>6} {:>10} {:>8} {:>8} {:>6} {:>6}\n",
            s["name"].as_str().unwrap_or("-"),
            s["role"].as_str().unwrap_or("-"),
            s["health"].as_str().unwrap_or("-"),
            s["lag_seconds"]
                .as_f64()
                .map_or("-".into(), |l| format!("{l:.0}")),
            n(s, "queries"),
            n(s, "errors"),
            ms(&s["mean_us"]),
            n(&s["connections"], "leased"),
            n(&s["connections"], "idle"),
        ));
    }
    out.push('\n');
    out.push_str(&format_digests(digests));
    out
}

/// Digests as a table, the text last (truncated to the terminal's usual width).
pub(super) fn format_digests(digests: &Value) -> String {
    let mut out = format!(
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>7}  {}\n",
        "DIGEST", "COUNT", "MEAN ms", "P95 ms", "P99 ms", "ROWS", "ERRORS", "HITS", "TEXT"
    );
    for d in digests["digests"].as_array().into_iter().flatten() {
        let n = |k: &str| d[k].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>7}  {}\n",
            d["id"].as_str().unwrap_or("-"),
            n("count"),
            ms(&d["mean_us"]),
            ms(&d["p95_us"]),
            ms(&d["p99_us"]),
            n("rows_sent"),
            n("errors"),
            n("cache_hits"),
            truncate(d["text"].as_str().unwrap_or("")),
        ));
    }
    out
}

pub(super) fn format_users(users: &Value) -> String {
    let mut out = format!(
        "{:<16} {:>8} {:>10} {:>8} {:>10} {:>9} {:>12} {:>12}\n",
        "USER", "SESSIONS", "QUERIES", "ERRORS", "ROWS", "HITS", "BYTES IN", "BYTES OUT"
    );
    for u in users["users"].as_array().into_iter().flatten() {
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "{:<16} {:>8} {:>10} {:>8} {:>10} {:>9} {:>12} {:>12}\n",
            u["name"].as_str().unwrap_or("-"),
            n("sessions"),
            n("queries"),
            n("errors"),
            n("rows_sent"),
            n("cache_hits"),
            n("bytes_in"),
            n("bytes_out"),
        ));
    }
    out
}

pub(super) fn format_advice(advice: &Value) -> String {
    let mut out = String::new();
    if advice["cache"] == false {
        out.push_str("no query cache: set [cache] enabled = true and restart to act on this\n");
    }
    out.push_str(&format!(
        "{:<16} {:>9} {:>9} {:>8} {:>9} {:>10} {:>7}  {}\n",
        "DIGEST", "PER SEC", "MEAN ms", "HIT %", "WRITES/s", "SAVES ms/s", "CACHED", "TEXT"
    ));
    for c in advice["candidates"].as_array().into_iter().flatten() {
        let f = |k: &str| c[k].as_f64().unwrap_or(0.0);
        out.push_str(&format!(
            "{:<16} {:>9.1} {:>9} {:>8.1} {:>9.2} {:>10.1} {:>7}  {}\n",
            c["id"].as_str().unwrap_or("-"),
            f("per_second"),
            ms(&c["mean_us"]),
            100.0 * f("expected_hit_rate"),
            f("writes_per_second"),
            f("saving_us_per_second") / 1000.0,
            if c["cached"] == true { "yes" } else { "no" },
            truncate(c["text"].as_str().unwrap_or("")),
        ));
    }
    out
}

/// A server name as one URL path segment (percent-encoded beyond the unreserved set).
pub(super) fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Sessions as a table, one line each.
pub(super) fn format_sessions(sessions: &Value) -> String {
    let mut out = format!(
        "{:>8}  {:<16} {:<22} {:<7} {:<24} {:<16} {}\n",
        "id", "user", "client", "state", "pinned", "backend", "program"
    );
    for s in sessions.as_array().into_iter().flatten() {
        let text = |k: &str| s[k].as_str().unwrap_or("-").to_owned();
        let backend = match &s["backend"] {
            Value::Object(b) => format!(
                "{}#{}",
                b.get("server").and_then(Value::as_str).unwrap_or("?"),
                b.get("thread_id").and_then(Value::as_u64).unwrap_or(0)
            ),
            _ => "-".into(),
        };
        // The client's own name for itself, as the server would show it.
        let attrs = &s["attributes"];
        let program = ["program_name", "_client_name"]
            .iter()
            .find_map(|k| attrs[*k].as_str())
            .unwrap_or("-");
        out.push_str(&format!(
            "{:>8}  {:<16} {:<22} {:<7} {:<24} {:<16} {}\n",
            s["id"].as_u64().unwrap_or(0),
            text("user"),
            text("client"),
            text("state"),
            text("pinned"),
            backend,
            program
        ));
    }
    out
}

pub(super) fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

/// Readable cache statistics, whatever their exact shape: top-level scalars and objects
/// (`totals` first) as name/value lists, arrays of objects as tables, `rules` before
/// `digests`, the digests sorted by hits and cut to `top`.
pub(super) fn format_cache_stats(stats: &Value, top: usize) -> String {
    let Value::Object(fields) = stats else {
        return pretty(stats);
    };
    let mut out = String::new();
    let scalars: Vec<(String, String)> = fields
        .iter()
        .filter(|(_, v)| !v.is_object() && !is_table(v))
        .map(|(k, v)| (k.clone(), cell(v)))
        .collect();
    if !scalars.is_empty() {
        section(&mut out, "Cache", &key_values(&scalars));
    }
    let mut objects: Vec<&String> = fields
        .iter()
        .filter(|(_, v)| v.is_object())
        .map(|(k, _)| k)
        .collect();
    objects.sort_by_key(|k| (k.as_str() != "totals", k.as_str()));
    for key in objects {
        section(&mut out, &title(key), &key_values(&flatten(&fields[key])));
    }
    let mut tables: Vec<&String> = fields
        .iter()
        .filter(|(_, v)| is_table(v))
        .map(|(k, _)| k)
        .collect();
    let rank = |k: &str| match k {
        "rules" => 0,
        "digests" => 1,
        _ => 2,
    };
    tables.sort_by_key(|k| (rank(k), k.as_str()));
    for key in tables {
        let mut rows: Vec<&serde_json::Map<String, Value>> = fields[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .collect();
        let mut heading = title(key);
        if key == "digests" {
            rows.sort_by_key(|r| {
                std::cmp::Reverse(r.get("hits").and_then(Value::as_u64).unwrap_or(0))
            });
            if rows.len() > top {
                heading = format!("Top {top} digests by hits (of {})", rows.len());
                rows.truncate(top);
            }
        }
        section(&mut out, &heading, &table(&rows));
        if rows.iter().any(|r| r.contains_key("hit_age")) {
            let id = if key == "digests" { "digest" } else { "rule" };
            let heading = format!("Freshness of the {key} above (ms)");
            let (columns, rows) = freshness(&rows, id);
            let columns: Vec<&String> = columns.iter().collect();
            let rows: Vec<_> = rows.iter().collect();
            section(&mut out, &heading, &table_of(&rows, &columns));
        }
    }
    out
}

/// A row per rule or digest with the ages of its hits and how long after a change its
/// entries were filled (the nested figures the tables above leave out), and the
/// columns in the order they read best.
fn freshness(
    rows: &[&serde_json::Map<String, Value>],
    id: &str,
) -> (Vec<String>, Vec<serde_json::Map<String, Value>>) {
    let figures = [("hit_age", "age"), ("filled_after_change", "after_change")];
    let mut columns = vec![id.to_owned(), "hits".to_owned()];
    for (_, name) in figures {
        columns.extend(["p50", "p99", "max"].map(|q| format!("{name}_{q}")));
    }
    let rows = rows
        .iter()
        .map(|r| {
            let mut row = serde_json::Map::new();
            row.insert(id.into(), r.get(id).cloned().unwrap_or(Value::Null));
            row.insert("hits".into(), r.get("hits").cloned().unwrap_or(Value::Null));
            for (field, name) in figures {
                for q in ["p50", "p99", "max"] {
                    let v = &r.get(field).unwrap_or(&Value::Null)[format!("{q}_ms")];
                    row.insert(format!("{name}_{q}"), v.clone());
                }
            }
            row
        })
        .collect();
    (columns, rows)
}

pub(super) fn is_table(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|a| a.iter().all(Value::is_object))
}

pub(super) fn section(out: &mut String, heading: &str, body: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(heading);
    out.push('\n');
    if body.is_empty() {
        out.push_str("  (none)\n");
    } else {
        out.push_str(body);
    }
}

pub(super) fn title(key: &str) -> String {
    let words = key.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => words,
    }
}

/// Name/value pairs of an object, nested objects as dotted names.
pub(super) fn flatten(value: &Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
        match value {
            Value::Object(o) => {
                for (k, v) in o {
                    let name = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&name, v, out);
                }
            }
            other => out.push((prefix.to_owned(), cell(other))),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}

pub(super) fn key_values(pairs: &[(String, String)]) -> String {
    let width = pairs
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let value_width = pairs
        .iter()
        .filter(|(_, v)| is_number(v))
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| {
            if is_number(v) {
                format!("  {k:<width$}  {v:>value_width$}\n")
            } else {
                format!("  {k:<width$}  {v}\n")
            }
        })
        .collect()
}

pub(super) fn table(rows: &[&serde_json::Map<String, Value>]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    // Identifiers lead, long free text trails, the rest (mostly counters) in between.
    const LEADING: [&str; 6] = ["name", "rule", "digest", "hash", "schema", "table"];
    let mut columns: Vec<&String> = Vec::new();
    for row in rows {
        for (k, v) in row.iter() {
            if !v.is_object() && !v.is_array() && !columns.contains(&k) {
                columns.push(k);
            }
        }
    }
    let long = |c: &str| {
        rows.iter()
            .any(|r| r.get(c).is_some_and(|v| cell(v).chars().count() > 40))
    };
    columns.sort_by_key(|c| {
        let lead = LEADING.iter().position(|l| *l == c.as_str());
        (long(c), lead.is_none(), lead, c.as_str())
    });
    table_of(rows, &columns)
}

/// `rows` as a table of these columns, in this order.
fn table_of(rows: &[&serde_json::Map<String, Value>], columns: &[&String]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            columns
                .iter()
                .map(|c| {
                    r.get(*c)
                        .map_or_else(|| "-".to_owned(), |v| truncate(&cell(v)))
                })
                .collect()
        })
        .collect();
    let numeric: Vec<bool> = (0..columns.len())
        .map(|i| cells.iter().all(|r| is_number(&r[i]) || r[i] == "-"))
        .collect();
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([columns[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, v) in values.enumerate() {
            let w = widths[i];
            if numeric[i] {
                text.push_str(&format!("  {v:>w$}"));
            } else {
                text.push_str(&format!("  {v:<w$}"));
            }
        }
        text.truncate(text.trim_end().len());
        text.push('\n');
        text
    };
    let mut out = line(&mut columns.iter().map(|c| c.as_str()));
    for row in &cells {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

pub(super) fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

pub(super) fn truncate(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX_CELL {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(MAX_CELL - 1).collect();
        cut.push('…');
        cut
    }
}

pub(super) fn is_number(text: &str) -> bool {
    !text.is_empty() && text.parse::<f64>().is_ok()
}
