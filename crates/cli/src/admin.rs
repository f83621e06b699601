//! `sluice admin ...`: calls the admin API and prints the answers for people (tables) or
//! scripts (`--json`). Exit status 0 on success, 1 on an error answer, 2 when unreachable.

mod client;
mod servers;

use client::{Client, Error, Response};
use serde_json::{json, Value};
use servers::format_servers;
use sluice::config::{AdminConfig, Config, Secret};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Talk to a running Sluice's admin API.
#[derive(clap::Args)]
pub struct AdminArgs {
    /// Admin API address, host:port. Default: [admin] address from --config, else 127.0.0.1:6080.
    #[arg(long, value_name = "ADDR", global = true)]
    address: Option<String>,
    /// Admin token. Default: from --config's [admin], else $SLUICE_ADMIN_TOKEN.
    /// (A token on the command line is visible to other local users.)
    #[arg(long, global = true)]
    token: Option<String>,
    /// Sluice's configuration file, to read the [admin] address and token from.
    #[arg(short, long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// Longest wait for an answer, e.g. "30s". Default 30s (1h for `cache warm`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, global = true)]
    timeout: Option<Duration>,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(clap::Subcommand)]
enum AdminCommand {
    /// Process counters (connections, commands, bytes...).
    Stats {
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// The query cache.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Client sessions: user, state, why pinned, backend connection.
    Sessions {
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Backend pools and multiplexing: connections, ratio, pins by reason, queue.
    Pool {
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Servers: role, health, lag, reads and writes routed, and the writer.
    Servers {
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Move the writer to another server without losing writes.
    Switchover {
        /// The server to promote [default: the most advanced replica].
        #[arg(long)]
        to: Option<String>,
    },
    /// Put a server back into routing (also clears a failover's fence and a drain).
    Enable { server: String },
    /// Take a server out of routing.
    Disable { server: String },
    /// Stop routing new work to a server and close its idle connections; what runs
    /// there finishes.
    Drain { server: String },
    /// Read the configuration file again (users, servers, cache rules), as SIGHUP does.
    Reload,
    /// Statement digests: count, latency percentiles, rows, errors, cache hits.
    Digests {
        /// Order: total_time, count, errors, p99, rows or last_seen.
        #[arg(long, default_value = "total_time")]
        sort: String,
        /// How many to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Per-user figures: sessions, statements, errors, rows, bytes, cache hits.
    Users {
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Cache candidates: read digests ranked by the server time a cache rule would
    /// save. Enable one with `sluice admin cache enable DIGEST`.
    Advisor {
        /// How many to show.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// A live view refreshed like top: rates, latency, servers, top digests.
    Top {
        /// Seconds between refreshes.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        every: Duration,
        /// Stop after this many screens [default: until interrupted].
        #[arg(short = 'n', long)]
        iterations: Option<u64>,
        /// Digests shown.
        #[arg(long, default_value_t = 10)]
        digests: usize,
    },
}

#[derive(clap::Subcommand)]
enum CacheCommand {
    /// Totals, then per rule, then the digests with the most hits.
    Stats {
        /// Print the raw JSON answer.
        #[arg(long)]
        json: bool,
        /// How many digests to show.
        #[arg(long, default_value_t = 20)]
        top: usize,
    },
    /// Print the rules in force, as JSON.
    Rules,
    /// Replace the rules: a JSON array, or a TOML file with [[rules]] or [[cache.rules]].
    SetRules {
        /// FILE.json or FILE.toml.
        file: PathBuf,
    },
    /// Drop cached entries.
    Invalidate(InvalidateArgs),
    /// Cache one statement digest from now on (a rule named advisor-DIGEST, first).
    Enable {
        /// The digest's 16-hex-digit id, as `sluice admin advisor` or `digests` show.
        digest: String,
        /// How long entries may be served.
        #[arg(long, default_value = "5m")]
        ttl: String,
    },
    /// Pre-populate the cache from a file of queries.
    Warm {
        /// Absolute path of the file on the Sluice host. Default: the configured file.
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct InvalidateArgs {
    /// Every entry.
    #[arg(long)]
    all: bool,
    /// Entries stored under this rule.
    #[arg(long, value_name = "NAME")]
    rule: Option<String>,
    /// Entries that read this table.
    #[arg(long, value_name = "SCHEMA.TABLE")]
    table: Option<String>,
    /// Entries of one statement digest (hex hash or normalized text).
    #[arg(long, value_name = "DIGEST")]
    digest: Option<String>,
}

/// Why a command failed, which decides the exit status.
enum Failure {
    /// The server answered with an error, or the request could not be made: exit 1.
    Refused(String),
    /// No answer: exit 2.
    Unreachable(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        match e {
            Error::Protocol { .. } => Failure::Refused(e.to_string()),
            Error::Connect { .. } | Error::Io { .. } => Failure::Unreachable(e.to_string()),
        }
    }
}

/// Runs `sluice admin ...`; prints the result or the error.
pub fn run(args: AdminArgs) -> ExitCode {
    let outcome = match args.command {
        AdminCommand::Top {
            every,
            iterations,
            digests,
        } => top(&args, every, iterations, digests),
        _ => execute(args),
    };
    match outcome {
        Ok(output) => {
            print!("{output}");
            ExitCode::SUCCESS
        }
        Err(Failure::Refused(message)) => {
            eprintln!("sluice admin: {message}");
            ExitCode::from(1)
        }
        Err(Failure::Unreachable(message)) => {
            eprintln!("sluice admin: {message}");
            ExitCode::from(2)
        }
    }
}

fn execute(args: AdminArgs) -> Result<String, Failure> {
    let mut client = client(&args)?;
    let warm = matches!(args.command, AdminCommand::Cache(CacheCommand::Warm { .. }));
    client.io_timeout = args
        .timeout
        .unwrap_or(Duration::from_secs(if warm { 3600 } else { 30 }));
    match args.command {
        AdminCommand::Stats { json } => {
            let stats = call(&client, "GET", "/v1/stats", None)?;
            Ok(if json {
                pretty(&stats)
            } else {
                key_values(&flatten(&stats))
            })
        }
        AdminCommand::Cache(command) => cache(&client, command),
        AdminCommand::Sessions { json } => {
            let sessions = call(&client, "GET", "/v1/sessions", None)?;
            Ok(if json {
                pretty(&sessions)
            } else {
                format_sessions(&sessions)
            })
        }
        AdminCommand::Pool { json } => {
            let pool = call(&client, "GET", "/v1/pool", None)?;
            Ok(if json {
                pretty(&pool)
            } else {
                key_values(&flatten(&pool))
            })
        }
        AdminCommand::Servers { json } => {
            let servers = call(&client, "GET", "/v1/servers", None)?;
            Ok(if json {
                pretty(&servers)
            } else {
                format_servers(&servers)
            })
        }
        AdminCommand::Switchover { to } => {
            let body = serde_json::json!({ "to": to });
            Ok(pretty(&call(
                &client,
                "POST",
                "/v1/servers/switchover",
                Some(body),
            )?))
        }
        AdminCommand::Enable { server } => {
            let path = format!("/v1/servers/{}/enable", path_segment(&server));
            Ok(pretty(&call(&client, "POST", &path, None)?))
        }
        AdminCommand::Disable { server } => {
            let path = format!("/v1/servers/{}/disable", path_segment(&server));
            Ok(pretty(&call(&client, "POST", &path, None)?))
        }
        AdminCommand::Drain { server } => {
            let path = format!("/v1/servers/{}/drain", path_segment(&server));
            Ok(pretty(&call(&client, "POST", &path, None)?))
        }
        AdminCommand::Reload => Ok(pretty(&call(&client, "POST", "/v1/config/reload", None)?)),
        AdminCommand::Digests { sort, limit, json } => {
            let path = format!("/v1/digests?sort={}&limit={limit}", path_segment(&sort));
            let digests = call(&client, "GET", &path, None)?;
            Ok(if json {
                pretty(&digests)
            } else {
                format_digests(&digests)
            })
        }
        AdminCommand::Users { json } => {
            let users = call(&client, "GET", "/v1/users", None)?;
            Ok(if json {
                pretty(&users)
            } else {
                format_users(&users)
            })
        }
        AdminCommand::Advisor { limit, json } => {
            let advice = call(&client, "GET", &format!("/v1/advisor?limit={limit}"), None)?;
            Ok(if json {
                pretty(&advice)
            } else {
                format_advice(&advice)
            })
        }
        AdminCommand::Top { .. } => unreachable!("handled by run"),
    }
}

/// `sluice admin top`: a screen every `every`, until interrupted or `iterations`.
fn top(
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

fn ms(us: &Value) -> String {
    format!("{:.2}", us.as_f64().unwrap_or(0.0) / 1000.0)
}

fn rate(bytes: u64) -> String {
    match bytes {
        b if b >= 10 << 20 => format!("{:.1} MiB/s", b as f64 / (1 << 20) as f64),
        b if b >= 10 << 10 => format!("{:.1} KiB/s", b as f64 / 1024.0),
        b => format!("{b} B/s"),
    }
}

/// One screen of `top`.
pub fn format_top(overview: &Value, servers: &Value, digests: &Value) -> String {
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
fn format_digests(digests: &Value) -> String {
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

fn format_users(users: &Value) -> String {
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

fn format_advice(advice: &Value) -> String {
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
fn path_segment(name: &str) -> String {
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
fn format_sessions(sessions: &Value) -> String {
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

fn cache(client: &Client, command: CacheCommand) -> Result<String, Failure> {
    match command {
        CacheCommand::Stats { json, top } => {
            let stats = call(client, "GET", "/v1/cache/stats", None)?;
            Ok(if json {
                pretty(&stats)
            } else {
                format_cache_stats(&stats, top)
            })
        }
        CacheCommand::Rules => Ok(pretty(&call(client, "GET", "/v1/cache/rules", None)?)),
        CacheCommand::SetRules { file } => {
            let rules = load_rules(&file).map_err(Failure::Refused)?;
            let count = rules.as_array().map_or(0, Vec::len);
            call(client, "PUT", "/v1/cache/rules", Some(rules))?;
            Ok(format!("rules replaced: {count} rule(s) in force\n"))
        }
        CacheCommand::Invalidate(what) => {
            let body = if what.all {
                json!({ "all": true })
            } else if let Some(rule) = what.rule {
                json!({ "rule": rule })
            } else if let Some(table) = what.table {
                json!({ "table": table })
            } else {
                json!({ "digest": what.digest.unwrap_or_default() })
            };
            let answer = call(client, "POST", "/v1/cache/invalidate", Some(body))?;
            let n = &answer["invalidated"];
            Ok(format!(
                "invalidated {n} entr{}\n",
                if n == 1 { "y" } else { "ies" }
            ))
        }
        CacheCommand::Enable { digest, ttl } => {
            let body = json!({ "digest": digest, "ttl": ttl });
            let answer = call(client, "POST", "/v1/advisor/enable", Some(body))?;
            Ok(format!(
                "cache rule {} added: {} (ttl {})\n",
                answer["rule"]["name"].as_str().unwrap_or("?"),
                answer["rule"]["digest"].as_str().unwrap_or("?"),
                answer["rule"]["ttl"].as_str().unwrap_or("?"),
            ))
        }
        CacheCommand::Warm { file } => {
            let body = match file {
                Some(f) => json!({ "file": f.to_string_lossy() }),
                None => json!({}),
            };
            Ok(pretty(&call(client, "POST", "/v1/cache/warm", Some(body))?))
        }
    }
}

fn client(args: &AdminArgs) -> Result<Client, Failure> {
    let config = match &args.config {
        Some(path) => Some(
            Config::load(path)
                .map_err(|e| Failure::Refused(format!("{e:#}")))?
                .admin,
        ),
        None => None,
    };
    let address = args
        .address
        .clone()
        .or_else(|| config.as_ref().map(|c| c.address.clone()))
        .unwrap_or_else(|| AdminConfig::default().address);
    // "http://host:port/" works too: people paste URLs.
    let address = address
        .strip_prefix("http://")
        .unwrap_or(&address)
        .trim_end_matches('/')
        .to_owned();
    // Explicit beats ambient: --token, then the named file, then the environment.
    let token = match &args.token {
        Some(t) => Some(Secret(t.clone())),
        None => config
            .unwrap_or_default()
            .resolved_token()
            .map_err(Failure::Refused)?,
    };
    let Some(token) = token else {
        return Err(Failure::Refused(format!(
            "no admin token: give --token, set {}, or --config with an [admin] token",
            sluice::config::ADMIN_TOKEN_ENV
        )));
    };
    Ok(Client::new(address, Some(token)))
}

/// One request; a non-2xx answer becomes a failure carrying the server's message.
fn call(client: &Client, method: &str, path: &str, body: Option<Value>) -> Result<Value, Failure> {
    let response = match &body {
        Some(body) => client.send_json(method, path, body)?,
        None => client.request(method, path, None)?,
    };
    if !(200..300).contains(&response.status) {
        return Err(Failure::Refused(error_message(&response)));
    }
    response.json().map_err(|e| {
        Failure::Refused(format!(
            "{} answered {} with invalid JSON: {e}",
            client.address, response.status
        ))
    })
}

fn error_message(response: &Response) -> String {
    let status = format!("{} {}", response.status, response.reason);
    let Ok(body) = response.json() else {
        let text = String::from_utf8_lossy(&response.body);
        return format!(
            "{status}: {}",
            text.trim().chars().take(500).collect::<String>()
        );
    };
    let mut message = match body.get("error").and_then(Value::as_str) {
        Some(error) => format!("{status}: {error}"),
        None => format!("{status}: {body}"),
    };
    for e in body
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        message.push_str("\n  - ");
        message.push_str(
            e.as_str()
                .map_or_else(|| e.to_string(), str::to_owned)
                .as_str(),
        );
    }
    message
}

/// Rules from a JSON file (an array, or an object with "rules") or a TOML file
/// ([[rules]] or [[cache.rules]], as in Sluice's own configuration).
fn load_rules(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let is_toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    let document = if is_toml {
        let table: toml::Table =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::to_value(table).map_err(|e| format!("{}: {e}", path.display()))?
    } else {
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?
    };
    let rules = match &document {
        Value::Array(_) => Some(&document),
        Value::Object(o) => o
            .get("rules")
            .or_else(|| o.get("cache").and_then(|c| c.get("rules"))),
        _ => None,
    };
    match rules {
        Some(rules @ Value::Array(_)) => Ok(rules.clone()),
        _ => Err(format!(
            "{}: no rules found: expected a JSON array, [[rules]] or [[cache.rules]]",
            path.display()
        )),
    }
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

/// Readable cache statistics, whatever their exact shape: top-level scalars and objects
/// (`totals` first) as name/value lists, arrays of objects as tables, `rules` before
/// `digests`, the digests sorted by hits and cut to `top`.
pub fn format_cache_stats(stats: &Value, top: usize) -> String {
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
    }
    out
}

/// An array whose elements are all objects (an empty one too).
fn is_table(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|a| a.iter().all(Value::is_object))
}

fn section(out: &mut String, heading: &str, body: &str) {
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

fn title(key: &str) -> String {
    let words = key.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => words,
    }
}

/// Name/value pairs of an object, nested objects as dotted names.
fn flatten(value: &Value) -> Vec<(String, String)> {
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

fn key_values(pairs: &[(String, String)]) -> String {
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

/// Longest cell printed; digest texts can be whole statements.
const MAX_CELL: usize = 60;

fn table(rows: &[&serde_json::Map<String, Value>]) -> String {
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

fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

fn truncate(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX_CELL {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(MAX_CELL - 1).collect();
        cut.push('…');
        cut
    }
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.parse::<f64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_stats_table() {
        let stats = json!({
            "enabled": true,
            "totals": {"hits": 1234, "misses": 56, "bytes": 7890},
            "binlog": {"state": "following", "position": {"file": "bin.000003", "offset": 42}},
            "rules": [
                {"name": "hot", "hits": 1000, "ttl": "30s"},
                {"name": "cold", "hits": 234, "ttl": "5m", "tables": ["a", "b"]},
            ],
            "digests": [
                {"digest": "aa", "hits": 3, "text": "SELECT * FROM t WHERE id = ?"},
                {"digest": "bb", "hits": 900, "text": "SELECT name FROM users WHERE id = ? AND status = ? ORDER BY created DESC"},
                {"digest": "cc", "hits": 50, "text": "SELECT 1"},
            ],
        });
        let text = format_cache_stats(&stats, 2);
        let totals = text.find("Totals").unwrap();
        let rules = text.find("Rules").unwrap();
        let digests = text.find("Top 2 digests by hits (of 3)").unwrap();
        assert!(totals < rules && rules < digests, "{text}");
        assert!(text.contains("  hits    1234\n"), "{text}");
        assert!(text.contains("position.offset  42"), "{text}");
        assert!(text.contains("  name  hits  ttl\n"), "{text}");
        assert!(text.contains("  hot   1000  30s\n"), "{text}");
        assert!(text.contains("  cold   234  5m\n"), "{text}");
        // Sorted by hits, cut to the top 2, long text last and truncated.
        let bb = text.find("  bb").unwrap();
        let cc = text.find("  cc").unwrap();
        assert!(bb < cc && !text.contains("  aa"), "{text}");
        assert!(text.contains("…"), "{text}");
        assert!(text.contains("enabled  true"), "{text}");
    }

    #[test]
    fn unexpected_shapes_still_print() {
        assert_eq!(format_cache_stats(&json!([1, 2]), 5), "[\n  1,\n  2\n]\n");
        let text = format_cache_stats(&json!({"rules": [], "note": null}), 5);
        assert!(text.contains("Rules\n  (none)"), "{text}");
        assert!(text.contains("note  -"), "{text}");
    }

    #[test]
    fn rules_files() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let expected = json!([{"name": "a", "ttl": "10s"}]);
        for (name, text) in [
            ("r.json", r#"[{"name":"a","ttl":"10s"}]"#),
            ("o.json", r#"{"rules":[{"name":"a","ttl":"10s"}]}"#),
            ("r.toml", "[[rules]]\nname = \"a\"\nttl = \"10s\"\n"),
            ("c.toml", "[[cache.rules]]\nname = \"a\"\nttl = \"10s\"\n"),
        ] {
            assert_eq!(
                load_rules(&write(name, text)),
                Ok(expected.clone()),
                "{name}"
            );
        }
        assert!(load_rules(&write("n.toml", "[x]\ny = 1\n")).is_err());
        assert!(load_rules(&write("b.json", "{")).is_err());
        assert!(load_rules(&dir.path().join("missing.json")).is_err());
    }

    #[test]
    fn error_messages_carry_the_server_text() {
        let response = Response {
            status: 400,
            reason: "Bad Request".into(),
            body: br#"{"error":"rules refused","errors":["a: bad ttl","b: no name"]}"#.to_vec(),
        };
        assert_eq!(
            error_message(&response),
            "400 Bad Request: rules refused\n  - a: bad ttl\n  - b: no name"
        );
    }
}
