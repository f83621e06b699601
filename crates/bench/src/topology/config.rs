//! The configuration of each embedded Sluice, by the part it takes in the cache
//! benchmark ([`Role`]), and whether a Sluice binary accepts it (`check-config`).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use super::Credentials;

/// What an embedded Sluice does with reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No cache rules.
    Passthrough,
    /// One rule caching every read, invalidated as this Sluice does by default.
    Cached,
    /// The same rule with `by_key = false`: any write to a table drops all its entries,
    /// as before row-level invalidation.
    CachedByTable,
    /// No cache rules and `multiplex = false`: each client keeps a backend connection of
    /// its own for its whole session, what multiplexing is set against.
    Dedicated,
    /// Passthrough with `[tracing]` at `sample_ratio` [`TRACED_RATIO`], exporting to a
    /// trace receiver, and the admin API on for its span counters.
    Traced,
    /// As traced, every statement traced (`sample_ratio = 1.0`).
    TracedAll,
}

/// `sample_ratio` of the traced scenario: this Sluice's default.
pub const TRACED_RATIO: f64 = 0.01;

impl Role {
    /// As the scenario is named in the report, its files and its hops.
    pub fn name(self) -> &'static str {
        match self {
            Role::Passthrough => "passthrough",
            Role::Cached => "cached",
            Role::CachedByTable => "cached-by-table",
            Role::Dedicated => "dedicated",
            Role::Traced => "traced",
            Role::TracedAll => "traced-all",
        }
    }

    /// Whether its Sluice caches reads.
    pub fn caches(self) -> bool {
        matches!(self, Role::Cached | Role::CachedByTable)
    }

    /// The share of statements its Sluice traces, when it traces.
    pub fn sample_ratio(self) -> Option<f64> {
        match self {
            Role::Traced => Some(TRACED_RATIO),
            Role::TracedAll => Some(1.0),
            _ => None,
        }
    }
}

/// The rule of the cached scenario: every SELECT, kept for longer than any run, as in
/// the published report ("all reads cached, TTL long enough to never expire").
const CACHE_ALL_SELECTS: &str = "(?i)^\\s*SELECT\\b";

/// Room for sysbench's hot rows and ranges at the published data size, so that the
/// cached scenario measures hits rather than evictions.
const CACHE_BUDGET: &str = "2GiB";

/// The configuration of an embedded Sluice in front of `backend`.
pub fn sluice_config(
    port: u16,
    (backend, replicas): (SocketAddr, &[SocketAddr]),
    creds: &Credentials,
    pool_max: u32,
    role: Role,
) -> String {
    let cached = role.caches();
    // Replicas: the monitor finds the writer, and reads outside transactions go to them.
    let replicas: String = (replicas.iter().enumerate())
        .map(|(i, r)| {
            format!(
                "[[servers]]\nname = \"replica{}\"\naddress = \"{r}\"\n\n",
                i + 1
            )
        })
        .collect();
    let mut text = format!(
        "# Written by `sluice bench` for its {} scenario.\n\
         [log]\nlevel = \"{}\"\n\n\
         [[listeners]]\naddress = \"127.0.0.1:{port}\"\n\n\
         [[users]]\nname = {}\npassword = {}\n\n\
         [[servers]]\nname = \"bench\"\naddress = \"{backend}\"\n\n{replicas}\
         [pool]\nmax_connections = {pool_max}\n{}",
        role.name(),
        // A caching Sluice logs its hit and miss counts every 10 s.
        if cached {
            "warn,sluice::server=info"
        } else {
            "warn"
        },
        toml_string(&creds.user),
        toml_string(&creds.password),
        // Only the dedicated Sluice names `multiplex`: passthrough keeps this Sluice's
        // default, so that the two set multiplexing against a connection per client.
        match role {
            Role::Dedicated => "multiplex = false\n",
            _ => "",
        },
    );
    if cached {
        // Only the by-table Sluice names `by_key`: the cached one keeps this Sluice's
        // default, so that a build from before the option still runs the cached scenario.
        let by_key = match role {
            Role::CachedByTable => "by_key = false\n",
            _ => "",
        };
        text.push_str(&format!(
            "\n[cache]\nmax_bytes = \"{CACHE_BUDGET}\"\nlog_interval = \"10s\"\n{by_key}\n\
             [[cache.rules]]\nname = \"every-select\"\nmatch = {}\nttl = \"1d\"\n",
            toml_string(CACHE_ALL_SELECTS)
        ));
    }
    text
}

/// The `[cache.binlog]` section of a caching Sluice: it tails the database's binlog as
/// the benchmark user, so that a write straight to the database (not through this
/// Sluice) drops the entries it changes. Each caching Sluice registers with a replica
/// server id of its own: the database drops a replica when another takes its id.
pub fn binlog_section(creds: &Credentials, role: Role) -> String {
    let server_id: u32 = match role {
        Role::CachedByTable => 4_026_531_842,
        _ => 4_026_531_841,
    };
    format!(
        "\n[cache.binlog]\nuser = {}\npassword = {}\nserver_id = {server_id}\n",
        toml_string(&creds.user),
        toml_string(&creds.password),
    )
}

/// Where a traced Sluice sends its spans and how its span counters are read.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// The OTLP/HTTP receiver, e.g. "http://127.0.0.1:4318".
    pub endpoint: String,
    /// The admin API's port on 127.0.0.1, for `/metrics`.
    pub admin_port: u16,
    pub admin_token: String,
}

/// The `[tracing]` and `[admin]` sections of a traced Sluice: statements sampled at
/// `ratio`, exported over OTLP/HTTP, and the admin API on loopback for the export
/// counters (`sluice_trace_spans_exported_total`, `sluice_trace_spans_dropped_total`).
pub fn tracing_section(ratio: f64, trace: &TraceSettings) -> String {
    format!(
        "\n[tracing]\nendpoint = {}\nsample_ratio = {ratio:?}\nservice_name = \"sluice-bench\"\n\n\
         [admin]\naddress = \"127.0.0.1:{}\"\ntoken = {}\n",
        toml_string(&trace.endpoint),
        trace.admin_port,
        toml_string(&trace.admin_token),
    )
}

/// Whether `sluice_bin` can take the part of `role`: `sluice check-config` on its
/// configuration (a cache rule tailing the binlog; `by_key = false`; `[tracing]`). The
/// error is the reason to show in place of the scenario's results.
pub fn check_support(
    sluice_bin: &Path,
    dir: &Path,
    creds: &Credentials,
    role: Role,
) -> Result<(), String> {
    let config = dir.join(format!("sluice-{}-check.toml", role.name()));
    let mut text = sluice_config(
        1,
        (SocketAddr::from(([127, 0, 0, 1], 1)), &[]),
        creds,
        1,
        role,
    );
    if role.caches() {
        text.push_str(&binlog_section(creds, role));
    }
    if let Some(ratio) = role.sample_ratio() {
        let trace = TraceSettings {
            endpoint: "http://127.0.0.1:4318".into(),
            admin_port: 1,
            admin_token: "check".into(),
        };
        text.push_str(&tracing_section(ratio, &trace));
    }
    std::fs::write(&config, text).map_err(|e| format!("writing {}: {e}", config.display()))?;
    let out = Command::new(sluice_bin)
        .arg("check-config")
        .arg(&config)
        .stdin(Stdio::null())
        .output();
    let _ = std::fs::remove_file(&config);
    let out = out.map_err(|e| format!("running {} check-config: {e}", sluice_bin.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    // The line that says what is wrong, not the one naming the file and position.
    let lines: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let why = lines
        .iter()
        .find(|l| l.contains("unknown field") || l.starts_with("- "))
        .or(lines.last())
        .map_or("", |l| l.split(", expected").next().unwrap_or(l));
    Err(match role {
        Role::CachedByTable => format!(
            "this Sluice has no row-level invalidation to turn off (its configuration check \
             rejects `by_key = false`: {why})"
        ),
        Role::Traced | Role::TracedAll => format!(
            "this Sluice has no tracing (its configuration check rejects `[tracing]`: {why})"
        ),
        _ => format!(
            "this Sluice has no query cache yet (its configuration check rejects a cache \
             rule: {why})"
        ),
    })
}

/// A TOML basic string.
pub(crate) fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> Credentials {
        Credentials {
            user: "sbtest".into(),
            password: "pw".into(),
            database: "sbtest".into(),
            insert_schema: "sluice_slap".into(),
        }
    }

    fn backend() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 3306))
    }

    /// The configuration an embedded Sluice of `role` gets, parsed.
    fn config(role: Role) -> toml::Table {
        sluice_config(6033, (backend(), &[]), &creds(), 100, role)
            .parse()
            .unwrap()
    }

    #[test]
    fn only_the_by_table_sluice_turns_row_level_invalidation_off() {
        let cache = |t: &toml::Table| t.get("cache").and_then(|c| c.as_table()).cloned();
        assert_eq!(cache(&config(Role::Passthrough)), None);
        let cached = cache(&config(Role::Cached)).unwrap();
        assert_eq!(cached.get("by_key"), None);
        let by_table = cache(&config(Role::CachedByTable)).unwrap();
        assert_eq!(by_table.get("by_key"), Some(&toml::Value::Boolean(false)));
        // Otherwise the same cache: the same rule and budget.
        let without = |mut t: toml::Table| {
            t.remove("by_key");
            t
        };
        assert_eq!(without(by_table), cached);
    }

    #[test]
    fn only_the_dedicated_sluice_turns_multiplexing_off() {
        let pool = |t: &toml::Table| t["pool"].as_table().cloned().unwrap();
        let dedicated = config(Role::Dedicated);
        // One `[pool]` table, its pool size kept beside the setting.
        assert_eq!(
            pool(&dedicated).get("multiplex"),
            Some(&toml::Value::Boolean(false))
        );
        assert_eq!(
            pool(&dedicated).get("max_connections"),
            Some(&toml::Value::Integer(100))
        );
        // A pass-through Sluice otherwise: no cache, and its log as quiet.
        assert_eq!(dedicated.get("cache"), None);
        assert_eq!(dedicated["log"], config(Role::Passthrough)["log"]);
        for role in [Role::Passthrough, Role::Cached, Role::CachedByTable] {
            assert_eq!(pool(&config(role)).get("multiplex"), None, "{role:?}");
        }
        assert_eq!(Role::Dedicated.name(), "dedicated");
    }

    #[test]
    fn replicas_follow_the_database_in_the_server_list() {
        let replicas = [
            SocketAddr::from(([127, 0, 0, 1], 3307)),
            SocketAddr::from(([127, 0, 0, 1], 3308)),
        ];
        let text = sluice_config(6033, (backend(), &replicas), &creds(), 100, Role::Cached);
        let config: toml::Table = text.parse().unwrap();
        let servers: Vec<(&str, &str)> = (config["servers"].as_array().unwrap().iter())
            .map(|s| (s["name"].as_str().unwrap(), s["address"].as_str().unwrap()))
            .collect();
        assert_eq!(
            servers,
            [
                ("bench", "127.0.0.1:3306"),
                ("replica1", "127.0.0.1:3307"),
                ("replica2", "127.0.0.1:3308")
            ]
        );
        // Nothing else changes: the monitor finds the writer, reads split by default.
        let mut without = config.clone();
        without.remove("servers");
        let mut one: toml::Table =
            sluice_config(6033, (backend(), &[]), &creds(), 100, Role::Cached)
                .parse()
                .unwrap();
        one.remove("servers");
        assert_eq!(without, one);
    }

    #[test]
    fn each_caching_sluice_tails_the_binlog_under_an_id_of_its_own() {
        let creds = creds();
        let id = |role| {
            let text = sluice_config(6033, (backend(), &[]), &creds, 100, role)
                + &binlog_section(&creds, role);
            let config: toml::Table = text.parse().unwrap();
            let binlog = config["cache"]["binlog"].as_table().cloned().unwrap();
            assert_eq!(binlog["user"].as_str(), Some("sbtest"), "{role:?}");
            assert_eq!(binlog["password"].as_str(), Some("pw"), "{role:?}");
            // The rule is still there beside it.
            assert!(config["cache"]["rules"]
                .as_array()
                .is_some_and(|r| r.len() == 1));
            binlog["server_id"].as_integer().unwrap()
        };
        assert_ne!(id(Role::Cached), id(Role::CachedByTable));
    }

    #[test]
    fn a_traced_sluice_is_passthrough_with_tracing_and_its_counters() {
        let trace = TraceSettings {
            endpoint: "http://127.0.0.1:4318".into(),
            admin_port: 6080,
            admin_token: "t0ken".into(),
        };
        for (role, ratio) in [(Role::Traced, 0.01), (Role::TracedAll, 1.0)] {
            let text = sluice_config(6033, (backend(), &[]), &creds(), 100, role)
                + &tracing_section(role.sample_ratio().unwrap(), &trace);
            let traced: toml::Table = text.parse().unwrap();
            let tracing = traced["tracing"].as_table().unwrap();
            assert_eq!(tracing["endpoint"].as_str(), Some("http://127.0.0.1:4318"));
            assert_eq!(tracing["sample_ratio"].as_float(), Some(ratio));
            assert_eq!(traced["admin"]["address"].as_str(), Some("127.0.0.1:6080"));
            // Otherwise passthrough: the same pool, no cache, the same log.
            let passthrough = config(Role::Passthrough);
            assert_eq!(traced.get("cache"), None);
            assert_eq!(traced["pool"], passthrough["pool"]);
            assert_eq!(traced["log"], passthrough["log"]);
        }
        assert_eq!(Role::TracedAll.name(), "traced-all");
    }
}
