//! The `[cache]` section: rules that choose what is cached and for how long, the byte
//! budget, and how invalidation reaches Sluice. Checked by `validate()` with the rest.

use serde::{Deserialize, Deserializer, Serialize};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Turns the cache on or off. Default: on when there is at least one rule. `true`
    /// with no rules starts an empty cache that rules can be added to at runtime (the
    /// admin API, the cache advisor).
    pub enabled: Option<bool>,
    /// Ordered rules; the first that matches a statement decides. Nothing is cached
    /// without a rule. Default: none (the cache is off).
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// Most bytes all entries may take (keys, stored packets and bookkeeping), as a
    /// number of bytes or a string such as "256MiB". Default "256MiB".
    #[serde(default = "default_max_bytes", deserialize_with = "bytes_size")]
    pub max_bytes: u64,
    /// Largest result kept; bigger results are still streamed to the client but not
    /// stored. Default "1MiB"; never more than an eighth of `max_bytes`.
    #[serde(default = "default_max_entry_bytes", deserialize_with = "bytes_size")]
    pub max_entry_bytes: u64,
    /// How long a miss waits for another session already fetching the same entry
    /// before going to the server itself. Default "2s".
    #[serde(default = "default_fill_wait", with = "humantime_serde")]
    pub fill_wait: Duration,
    /// Interval of the cache statistics line in the log; "0s" turns it off. Default "60s".
    #[serde(default = "default_log_interval", with = "humantime_serde")]
    pub log_interval: Duration,
    /// File of queries to pre-populate the cache with at start (see docs/CONFIGURATION.md).
    pub warm_file: Option<PathBuf>,
    /// Follow the primary's binlog to invalidate on writes that bypass Sluice.
    pub binlog: Option<crate::binlog::BinlogConfig>,
    /// Invalidate by key: an entry whose rows a table's primary key decides (`WHERE id
    /// = ?`, `id IN (...)`) is dropped only by writes to those keys (through Sluice or in
    /// the binlog's row images); `false` drops every entry of a table on any write to
    /// it. Default true.
    #[serde(default = "default_by_key")]
    pub by_key: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: None,
            rules: Vec::new(),
            max_bytes: default_max_bytes(),
            max_entry_bytes: default_max_entry_bytes(),
            fill_wait: default_fill_wait(),
            log_interval: default_log_interval(),
            warm_file: None,
            binlog: None,
            by_key: default_by_key(),
        }
    }
}

fn default_by_key() -> bool {
    true
}
fn default_max_bytes() -> u64 {
    256 << 20
}
fn default_max_entry_bytes() -> u64 {
    1 << 20
}
fn default_fill_wait() -> Duration {
    Duration::from_secs(2)
}
fn default_log_interval() -> Duration {
    Duration::from_secs(60)
}

/// One caching rule. A statement matches when every condition given holds.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Name used in statistics and admin calls; unique.
    pub name: String,
    /// Regular expression searched in the statement text.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Regular expression searched in the normalized digest (literals as `?`,
    /// whitespace folded, comments removed, keywords upper case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Only statements of this Sluice user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Only statements run with this default schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// How long an entry may be served, e.g. "30s" or "1d".
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// After the TTL, how long a stale entry may still be served while one session
    /// refreshes it. Default "0s" (off).
    #[serde(default, with = "humantime_serde")]
    pub stale_while_revalidate: Duration,
}

impl CacheConfig {
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(!self.rules.is_empty())
    }

    /// The largest entry admitted, after the budget's own limit.
    pub fn entry_limit(&self) -> u64 {
        self.max_entry_bytes.min(self.max_bytes / 8)
    }

    /// Every problem in the section.
    pub fn validate(&self) -> Vec<String> {
        let mut p = validate_rules(&self.rules);
        if self.max_bytes < 64 << 10 {
            p.push(format!(
                "cache.max_bytes: {} bytes is too small (at least 64KiB)",
                self.max_bytes
            ));
        }
        if self.max_entry_bytes == 0 {
            p.push("cache.max_entry_bytes must be at least 1".into());
        }
        if let Some(f) = &self.warm_file {
            if !f.is_file() {
                p.push(format!("cache.warm_file: {} does not exist", f.display()));
            }
        }
        p
    }
}

/// Problems in a rule list: used for the file and for rules changed at runtime.
pub fn validate_rules(rules: &[RuleConfig]) -> Vec<String> {
    let mut p = Vec::new();
    let mut names = std::collections::HashSet::new();
    for (i, r) in rules.iter().enumerate() {
        let at = format!("cache.rules[{i}] ({:?})", r.name);
        if r.name.is_empty() {
            p.push(format!("cache.rules[{i}].name is empty"));
        }
        if !names.insert(r.name.as_str()) {
            p.push(format!("{at}: rule name used twice"));
        }
        if r.pattern.is_none() && r.digest.is_none() {
            p.push(format!(
                "{at}: needs `match` (a regex on the text) or `digest` (a regex on the digest)"
            ));
        }
        for (field, re) in [("match", &r.pattern), ("digest", &r.digest)] {
            if let Some(re) = re {
                if let Err(e) = regex::bytes::Regex::new(re) {
                    p.push(format!("{at}.{field}: invalid regular expression: {e}"));
                }
            }
        }
        if r.ttl.is_zero() {
            p.push(format!("{at}.ttl must be more than 0"));
        }
    }
    p
}

/// A byte count as a number or a string with a unit: "512", "64KiB", "256MiB", "1GiB",
/// "100MB".
pub(crate) fn bytes_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Number(n) => Ok(n),
        Raw::Text(s) => parse_bytes(&s).map_err(serde::de::Error::custom),
    }
}

pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a size such as \"256MiB\""))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1000 * 1000,
        "mib" => 1 << 20,
        "g" | "gb" => 1000 * 1000 * 1000,
        "gib" => 1 << 30,
        other => return Err(format!("{other:?} is not a size unit (B, KiB, MiB, GiB)")),
    };
    Ok((number * factor as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("512"), Ok(512));
        assert_eq!(parse_bytes("64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("1.5 MiB"), Ok(3 << 19));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
    }

    #[test]
    fn rules_parse_and_bad_ones_are_explained() {
        let c: CacheConfig = toml::from_str(
            r#"
            max_bytes = "64MiB"
            [[rules]]
            name = "every-select"
            match = "(?i)^\\s*SELECT\\b"
            ttl = "1d"
            [[rules]]
            name = "points"
            digest = "WHERE id = \\?"
            user = "app"
            ttl = "5s"
            stale_while_revalidate = "1s"
            "#,
        )
        .unwrap();
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(c.max_bytes, 64 << 20);
        assert_eq!(c.rules[0].ttl, Duration::from_secs(86400));
        assert_eq!(c.rules[1].stale_while_revalidate, Duration::from_secs(1));

        let bad: CacheConfig = toml::from_str(
            r#"
            max_bytes = 10
            [[rules]]
            name = "a"
            match = "SELECT ("
            ttl = "0s"
            [[rules]]
            name = "a"
            ttl = "1s"
            "#,
        )
        .unwrap();
        let p = bad.validate();
        assert!(
            p.iter().any(|x| x.contains("invalid regular expression")),
            "{p:#?}"
        );
        assert!(
            p.iter().any(|x| x.contains("ttl must be more than 0")),
            "{p:#?}"
        );
        assert!(p.iter().any(|x| x.contains("used twice")), "{p:#?}");
        assert!(p.iter().any(|x| x.contains("needs `match`")), "{p:#?}");
        assert!(p.iter().any(|x| x.contains("too small")), "{p:#?}");
        assert!(toml::from_str::<CacheConfig>(
            "[[rules]]\nname='x'\nmatch='a'\nttl='1s'\nttll='2s'"
        )
        .is_err());
    }
}
