//! `sluice admin ...`: calls the admin API and prints the answers for people (tables) or
//! scripts (`--json`). Exit status 0 on success, 1 on an error answer, 2 when unreachable.

mod client;
mod format;
mod servers;
use format::*;

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
    /// The Sluice instances in front of the same servers: address, version,
    /// configuration hash, sessions, duties, last contact.
    Fleet {
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
    /// Start a new Sluice process that takes the listeners and the sessions over, and
    /// wait until it did (or say why not: this one then goes on serving).
    Upgrade,
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
        AdminCommand::Fleet { json } => {
            let fleet = call(&client, "GET", "/v1/fleet", None)?;
            Ok(if json {
                pretty(&fleet)
            } else {
                servers::format_fleet(&fleet)
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
        AdminCommand::Upgrade => Ok(pretty(&call(&client, "POST", "/v1/upgrade", None)?)),
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

/// Longest cell printed; digest texts can be whole statements.
const MAX_CELL: usize = 60;

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
    fn freshness_has_a_table_of_its_own() {
        let ages = |p50: f64| json!({"count": 3, "avg_ms": p50, "p50_ms": p50, "p99_ms": 9.5, "max_ms": 12.25});
        let none =
            json!({"count": 0, "avg_ms": null, "p50_ms": null, "p99_ms": null, "max_ms": null});
        let stats = json!({
            "rules": [{"rule": "hot", "hits": 3, "hit_age": ages(1.5), "filled_after_change": none}],
            "digests": [{"digest": "aa", "hits": 3, "text": "SELECT 1", "hit_age": ages(2.0), "filled_after_change": ages(4.0)}],
        });
        let text = format_cache_stats(&stats, 5);
        let rules = text.find("Freshness of the rules above (ms)").unwrap();
        let digests = text.find("Freshness of the digests above (ms)").unwrap();
        assert!(rules < digests, "{text}");
        assert!(
            text.contains("  rule  hits  age_p50  age_p99  age_max  after_change_p50"),
            "{text}"
        );
        assert!(
            text.contains("  hot      3      1.5      9.5    12.25                 -"),
            "{text}"
        );
        assert!(
            text.contains("  aa         3      2.0      9.5    12.25               4.0"),
            "{text}"
        );
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
