//! What the router is told about one statement before it picks a server: the
//! operator's ordered rules (regex on text or digest, user, schema, client network),
//! a `/* sluice: ... */` hint in the text, and whether the statement only reads.
//! Pure functions, no I/O.

use super::config::{Consistency, RouteRuleConfig};
use crate::classify::effects::Effects;
use crate::classify::sql::{self, Analysis};
use regex::bytes::Regex;
use sluice_wire::response::ErrPacket;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where a statement is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Writer,
    Readers,
    /// Servers that list this group in their `groups`.
    Group(Arc<str>),
}

impl Route {
    fn parse(s: &str) -> Route {
        match s {
            "writer" => Route::Writer,
            "readers" => Route::Readers,
            g => Route::Group(g.into()),
        }
    }
}

/// What the rules (and a hint) decided for a statement; `None` fields: the defaults.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    pub route: Option<Route>,
    pub error: Option<ErrPacket>,
    pub timeout: Option<Duration>,
    pub consistency: Option<Consistency>,
}

struct Rule {
    name: String,
    pattern: Option<Regex>,
    digest: Option<Regex>,
    user: Option<String>,
    schema: Option<Vec<u8>>,
    network: Option<(IpAddr, u8)>,
    route: Option<Route>,
    error: Option<ErrPacket>,
    timeout: Option<Duration>,
    consistency: Option<Consistency>,
    hits: AtomicU64,
}

/// The compiled rule list.
#[derive(Default)]
pub struct Rules {
    rules: Vec<Rule>,
    needs_digest: bool,
    /// Some rule answers its statements with an error.
    refusing: bool,
}

/// A statement as the rules see it.
pub struct Statement<'a> {
    pub text: &'a [u8],
    pub user: &'a str,
    pub schema: Option<&'a [u8]>,
    pub client: IpAddr,
}

impl Rules {
    /// Compiles rules already checked by `validate`; a bad one is an error naming it.
    pub fn new(configs: &[RouteRuleConfig]) -> Result<Rules, String> {
        let mut rules = Vec::with_capacity(configs.len());
        for c in configs {
            let re = |r: &Option<String>| {
                r.as_deref()
                    .map(Regex::new)
                    .transpose()
                    .map_err(|e| format!("routing rule {:?}: {e}", c.name))
            };
            let network = match &c.client_address {
                Some(a) => Some(parse_network(a).ok_or_else(|| {
                    format!("routing rule {:?}: bad client_address {a:?}", c.name)
                })?),
                None => None,
            };
            rules.push(Rule {
                name: c.name.clone(),
                pattern: re(&c.pattern)?,
                digest: re(&c.digest)?,
                user: c.user.clone(),
                schema: c.schema.as_ref().map(|s| s.as_bytes().to_vec()),
                network,
                route: c.route.as_deref().map(Route::parse),
                error: c
                    .error
                    .as_ref()
                    .map(|e| ErrPacket::new(e.code, &e.state, e.message.clone())),
                timeout: c.timeout,
                consistency: c.consistency,
                hits: AtomicU64::new(0),
            });
        }
        let needs_digest = rules.iter().any(|r| r.digest.is_some());
        let refusing = rules.iter().any(|r| r.error.is_some());
        Ok(Rules {
            rules,
            needs_digest,
            refusing,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether the rule that decides `s` answers it with an error, without counting the
    /// match: for a statement that may be answered before it is routed (a cache hit),
    /// which a refusing rule must still stop.
    pub fn refuses(&self, s: &Statement<'_>) -> bool {
        if !self.refusing {
            return false;
        }
        self.first_match(s).is_some_and(|r| r.error.is_some())
    }

    /// Whether any rule answers with an error: without, [`Self::refuses`] is false
    /// whatever the statement, and its caller need not work the statement out.
    pub fn any_refusing(&self) -> bool {
        self.refusing
    }

    /// The rule that decides `s`: the first whose conditions all hold.
    fn first_match(&self, s: &Statement<'_>) -> Option<&Rule> {
        if self.rules.is_empty() {
            return None;
        }
        let digest = self.needs_digest.then(|| sql::digest(s.text).0);
        self.rules.iter().find(|r| r.matches(s, digest.as_deref()))
    }

    /// The first matching rule's decision, then a hint in the text over its route.
    pub fn decide(&self, s: &Statement<'_>) -> Decision {
        let mut d = Decision::default();
        if let Some(rule) = self.first_match(s) {
            rule.hits.fetch_add(1, Ordering::Relaxed);
            d = Decision {
                route: rule.route.clone(),
                error: rule.error.clone(),
                timeout: rule.timeout,
                consistency: rule.consistency,
            };
        }
        if let Some(route) = hint(s.text) {
            d.route = Some(route);
        }
        d
    }

    /// Rule names and how many statements each matched.
    pub fn hits(&self) -> Vec<(String, u64)> {
        self.rules
            .iter()
            .map(|r| (r.name.clone(), r.hits.load(Ordering::Relaxed)))
            .collect()
    }
}

impl Rule {
    fn matches(&self, s: &Statement<'_>, digest: Option<&str>) -> bool {
        if self.user.as_deref().is_some_and(|u| u != s.user) {
            return false;
        }
        if let Some(schema) = &self.schema {
            if s.schema != Some(schema.as_slice()) {
                return false;
            }
        }
        if let Some((net, bits)) = self.network {
            if !in_network(s.client, net, bits) {
                return false;
            }
        }
        if let Some(p) = &self.pattern {
            if !p.is_match(s.text) {
                return false;
            }
        }
        if let (Some(p), Some(d)) = (&self.digest, digest) {
            if !p.is_match(d.as_bytes()) {
                return false;
            }
        }
        true
    }
}

/// `10.0.0.0/8`, `::1/128` or a bare address (all its bits).
pub fn parse_network(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, bits) = match s.split_once('/') {
        Some((a, b)) => (
            a.trim().parse::<IpAddr>().ok()?,
            Some(b.trim().parse::<u8>().ok()?),
        ),
        None => (s.trim().parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let bits = bits.unwrap_or(max);
    (bits <= max).then_some((addr, bits))
}

fn in_network(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let ip = match (ip, net) {
        // A v4 client on a dual-stack listener arrives as ::ffff:a.b.c.d.
        (IpAddr::V6(v6), IpAddr::V4(_)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => return false,
        },
        _ => ip,
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// `/* sluice: writer */`, `/* sluice: readers */` (or `reader`), `/* sluice: group=name */`
/// anywhere in the text, case-insensitive.
pub fn hint(text: &[u8]) -> Option<Route> {
    let at = memfind(text, b"/*")?;
    let rest = &text[at..];
    let lower: Vec<u8> = rest.iter().take(512).map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(i) = memfind(&lower[from..], b"/*") {
        let start = from + i + 2;
        let end = memfind(&lower[start..], b"*/").map(|e| start + e)?;
        let body = std::str::from_utf8(&lower[start..end]).ok()?.trim();
        if let Some(h) = body.strip_prefix("sluice:") {
            let h = h.trim();
            return match h {
                "writer" | "primary" | "master" => Some(Route::Writer),
                "reader" | "readers" | "replica" => Some(Route::Readers),
                _ => {
                    let name = h.strip_prefix("group=")?.trim();
                    // The group name as written, not lowercased.
                    let original = &rest[start..end];
                    let original = std::str::from_utf8(original).ok()?;
                    let at = original.to_ascii_lowercase().find(name)?;
                    Some(Route::Group(original[at..at + name.len()].into()))
                }
            };
        }
        from = end + 2;
    }
    None
}

/// Where two-byte `needle` first is: a vectorised search for its first byte (a full
/// substring searcher costs more to set up than these short texts take to scan).
fn memfind(hay: &[u8], needle: &[u8; 2]) -> Option<usize> {
    memchr::memchr_iter(needle[0], hay).find(|&i| hay.get(i + 1) == Some(&needle[1]))
}

/// Whether the text names one of MariaDB's sequence functions (`NEXTVAL`, `SETVAL`,
/// `LASTVAL`, any case): all three end in `VAL`, found first.
fn names_sequence_function(text: &[u8]) -> bool {
    memchr::memchr2_iter(b'v', b'V', text).any(|i| {
        let val = text
            .get(i..i + 3)
            .is_some_and(|v| v.eq_ignore_ascii_case(b"VAL"));
        val && [b"NEXT".as_slice(), b"SET", b"LAST"]
            .iter()
            .any(|p| i >= p.len() && text[i - p.len()..i].eq_ignore_ascii_case(p))
    })
}

/// Whether a statement may run on a replica: a plain read that takes no lock, writes
/// nothing, and needs nothing only its own connection holds. `analysis`: its text's
/// (with or without a default schema), which the caller may already have.
pub fn is_plain_read(text: &[u8], fx: &Effects, analysis: &Analysis) -> bool {
    if fx.get_lock
        || fx.release_lock
        || fx.release_all_locks
        || fx.last_insert_id
        || fx.row_count
        || fx.found_rows
        || fx.calc_found_rows
        || !fx.user_vars_assigned.is_empty()
        || !fx.temp_created.is_empty()
        || fx.table_locks.is_some()
        || fx.xa.is_some()
        || !fx.sql_prepared.is_empty()
        || !fx.handler_opened.is_empty()
    {
        return false;
    }
    // MariaDB's sequence functions (NEXTVAL changes the sequence; LASTVAL is the
    // session's own last value) look like plain function calls.
    if names_sequence_function(text) {
        return false;
    }
    match analysis {
        Analysis::Read { uncacheable, .. } => !matches!(
            uncacheable,
            Some(
                "FOR UPDATE"
                    | "FOR SHARE"
                    | "LOCK IN SHARE MODE"
                    | "SELECT ... INTO"
                    | "sequence NEXT/PREVIOUS VALUE FOR"
                    | "stored function"
                    | "SQL_CALC_FOUND_ROWS"
            )
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::effects::effects;

    fn read(sql: &str) -> bool {
        let sql = sql.as_bytes();
        is_plain_read(sql, &effects(sql), &sql::analyze(sql, None))
    }

    #[test]
    fn sequence_functions_are_found_in_any_case_and_nothing_else_is() {
        for sql in [
            "SELECT NEXTVAL(s)",
            "select lastval(s)",
            "SELECT SetVal(s, 5)",
            "SELECT x FROM t WHERE y = nextval(s)",
        ] {
            assert!(names_sequence_function(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "SELECT val FROM t",
            "SELECT interval FROM evals",
            "VAL",
            "SET",
        ] {
            assert!(!names_sequence_function(sql.as_bytes()), "{sql}");
        }
        assert_eq!(memfind(b"a/b/*c", b"/*"), Some(3));
        assert_eq!(memfind(b"a/", b"/*"), None);
    }

    #[test]
    fn reads_and_what_is_not_one() {
        assert!(read("SELECT c FROM sbtest1 WHERE id=10"));
        assert!(read("select 1"));
        assert!(read("WITH a AS (SELECT 1) SELECT * FROM a"));
        assert!(read("SELECT NOW()"));
        for sql in [
            "INSERT INTO t VALUES (1)",
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t LOCK IN SHARE MODE",
            "SELECT GET_LOCK('a', 1)",
            "SELECT LAST_INSERT_ID()",
            "SELECT FOUND_ROWS()",
            "SELECT SQL_CALC_FOUND_ROWS * FROM t",
            "SELECT NEXTVAL(s)",
            "SELECT lastval(s)",
            "SELECT db.f(1)",
            "SELECT 1 INTO @a",
            "SELECT @a := 1",
            "SHOW MASTER STATUS",
            "BEGIN",
            "SET @a = 1",
            "CALL p()",
        ] {
            assert!(!read(sql), "{sql}");
        }
    }

    #[test]
    fn hints_name_a_route() {
        assert_eq!(hint(b"SELECT /* sluice: writer */ 1"), Some(Route::Writer));
        assert_eq!(hint(b"/*Sluice:Readers*/ SELECT 1"), Some(Route::Readers));
        assert_eq!(
            hint(b"SELECT 1 /* sluice: group=Reporting */"),
            Some(Route::Group("Reporting".into()))
        );
        assert_eq!(hint(b"SELECT /* writer */ 1"), None);
        assert_eq!(hint(b"SELECT 1"), None);
        assert_eq!(hint(b"SELECT /* unclosed"), None);
    }

    #[test]
    fn networks() {
        let (n, b) = parse_network("10.1.0.0/16").unwrap();
        assert!(in_network("10.1.2.3".parse().unwrap(), n, b));
        assert!(!in_network("10.2.2.3".parse().unwrap(), n, b));
        let (n, b) = parse_network("127.0.0.1").unwrap();
        assert!(in_network("127.0.0.1".parse().unwrap(), n, b));
        assert!(in_network("::ffff:127.0.0.1".parse().unwrap(), n, b));
        assert!(parse_network("10.0.0.0/33").is_none());
        assert!(parse_network("nowhere").is_none());
        let (n, b) = parse_network("0.0.0.0/0").unwrap();
        assert!(in_network("8.8.8.8".parse().unwrap(), n, b));
    }

    #[test]
    fn first_matching_rule_decides_and_a_hint_overrides_its_route() {
        let cfg: Vec<RouteRuleConfig> = toml::from_str::<toml::Value>(
            r#"
            [[r]]
            name = "reports"
            match = "(?i)^SELECT .* FROM report"
            route = "readers"
            timeout = "2s"
            [[r]]
            name = "no-drop"
            match = "(?i)^DROP"
            error = { message = "no drops here" }
            [[r]]
            name = "app-writer"
            user = "app"
            client_address = "10.0.0.0/8"
            route = "writer"
            "#,
        )
        .unwrap()["r"]
            .clone()
            .try_into()
            .unwrap();
        let rules = Rules::new(&cfg).unwrap();
        let st = |text: &'static str, user: &'static str, ip: &str| Statement {
            text: text.as_bytes(),
            user,
            schema: None,
            client: ip.parse().unwrap(),
        };
        let d = rules.decide(&st("SELECT * FROM report_x", "u", "127.0.0.1"));
        assert_eq!(d.route, Some(Route::Readers));
        assert_eq!(d.timeout, Some(Duration::from_secs(2)));
        let d = rules.decide(&st("drop table t", "u", "127.0.0.1"));
        assert_eq!(d.error.unwrap().code, 1148);
        assert_eq!(
            rules.decide(&st("SELECT 1", "app", "10.9.9.9")).route,
            Some(Route::Writer)
        );
        assert_eq!(rules.decide(&st("SELECT 1", "app", "11.9.9.9")).route, None);
        let d = rules.decide(&st(
            "SELECT /* sluice: writer */ * FROM report",
            "u",
            "127.0.0.1",
        ));
        assert_eq!(d.route, Some(Route::Writer));
        assert_eq!(rules.hits()[0], ("reports".into(), 2));
    }
}
