//! How fresh the cache's answers are, against a real MariaDB with the binlog followed:
//! the age of each hit, and how long after a change made straight on the server the
//! entry reading it was filled again, per rule and digest in `GET /v1/cache/stats` and
//! as histograms in `/metrics`. Each figure is checked against the window the test
//! itself timed around the statements concerned.

use crate::support::proxy::Config;
use crate::support::wire::RawConn;
use crate::support::{
    binlog_section, fresh_database, shared_server, wait_until, NATIVE_PASSWORD, NATIVE_USER,
};
use serde_json::Value;
use std::time::{Duration, Instant};

const TOKEN: &str = "t0ken";
const READ: &str = "SELECT v FROM t WHERE id = 1";

fn stats(address: &str) -> Value {
    crate::support::admin_json(address, TOKEN, "/v1/cache/stats")
}

fn rule<'a>(stats: &'a Value, name: &str) -> &'a Value {
    (stats["rules"].as_array().unwrap().iter())
        .find(|r| r["rule"] == name)
        .unwrap_or_else(|| panic!("no rule {name} in {stats:#}"))
}

fn digest<'a>(stats: &'a Value, text: &str) -> &'a Value {
    (stats["digests"].as_array().unwrap().iter())
        .find(|d| d["text"] == text)
        .unwrap_or_else(|| panic!("no digest {text} in {stats:#}"))
}

fn ms(v: &Value) -> Duration {
    let ms = v.as_f64().unwrap_or_else(|| panic!("not a figure: {v}"));
    Duration::from_secs_f64(ms / 1e3)
}

/// The value the read returns through `conn`, and the window it ran in.
fn read(conn: &mut RawConn) -> (String, Instant, Instant) {
    let start = Instant::now();
    let rows = conn.query_rows(READ);
    (rows[0][0].clone().unwrap(), start, Instant::now())
}

/// A figure in milliseconds (rounded to the microsecond) within a window timed around
/// what it measures: it may not be longer, nor shorter than what surely elapsed.
#[track_caller]
fn within(figure: &Value, at_least: Duration, at_most: Duration) {
    let (got, slack) = (ms(figure), Duration::from_micros(1));
    assert!(
        got + slack >= at_least && got <= at_most + slack,
        "{got:?} outside {at_least:?}..={at_most:?}"
    );
}

#[test]
fn hit_ages_and_fills_after_a_direct_change_are_measured() {
    let server = shared_server();
    let db = "freshness";
    fresh_database(server, db);
    server
        .execute(&format!(
            "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20));
             INSERT INTO {db}.t VALUES (1, 'a');"
        ))
        .unwrap();
    let config = Config::for_server(server)
        .cache_rule("points", "(?i)^SELECT v FROM t WHERE id", "1h")
        .cache("binlog", binlog_section())
        .admin(TOKEN);
    let address = config.admin_address().unwrap();
    let sluice = crate::support::Sluice::start(&config);
    assert!(
        wait_until(Duration::from_secs(10), || stats(&address)["binlog"]
            == "following"),
        "the binlog reader did not start: {:#}",
        stats(&address)
    );
    let mut conn = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    conn.query(&format!("USE {db}")).unwrap().expect_ok();

    // A miss fills the entry; no change of the table was seen yet, so the fill has no
    // "after change" figure. Two hits follow. The entry may be stored after its reader
    // has its answer, but before the first hit ends (it was a hit): so the second hit's
    // age, the larger, is at least the time from the first's end to the second's start,
    // and at most the time from the miss's start to the second's end.
    let (v, fill_start, _) = read(&mut conn);
    assert_eq!(v, "a");
    let (_, _, first_hit_end) = read(&mut conn);
    let (_, hit_start, hit_end) = read(&mut conn);
    let s = stats(&address);
    let points = rule(&s, "points");
    assert_eq!(points["hits"], 2, "{s:#}");
    let ages = &points["hit_age"];
    assert_eq!(ages["count"], 2, "{s:#}");
    within(
        &ages["max_ms"],
        hit_start - first_hit_end,
        hit_end - fill_start,
    );
    assert!(ms(&ages["p50_ms"]) <= ms(&ages["p99_ms"]));
    assert!(ms(&ages["p99_ms"]) <= ms(&ages["max_ms"]));
    assert_eq!(points["filled_after_change"]["count"], 0, "{s:#}");
    assert_eq!(points["filled_after_change"]["p50_ms"], Value::Null);
    let d = digest(&s, "SELECT v FROM t WHERE id = ?");
    assert_eq!(d["hit_age"]["count"], 2, "{d:#}");
    assert_eq!(d["filled_after_change"]["count"], 0, "{d:#}");

    // A change straight on the server reaches Sluice only through the binlog. The first
    // read that sees it fills the entry again (as may one more after the reader's second
    // invalidation), each at most as long after the change as since the commit began.
    let commit_start = Instant::now();
    server
        .execute(&format!("UPDATE {db}.t SET v = 'b' WHERE id = 1"))
        .unwrap();
    let mut last = commit_start;
    let refilled = |s: &Value| rule(s, "points")["filled_after_change"]["count"].as_u64();
    assert!(
        wait_until(Duration::from_secs(10), || {
            let (v, _, end) = read(&mut conn);
            last = end;
            v == "b" && refilled(&stats(&address)) >= Some(1)
        }),
        "the direct change never reached the cache: {:#}",
        stats(&address)
    );
    let s = stats(&address);
    let points = rule(&s, "points");
    let after = &points["filled_after_change"];
    within(&after["max_ms"], Duration::ZERO, last - commit_start);
    assert!(ms(&after["p50_ms"]) <= ms(&after["max_ms"]), "{after}");
    let d = digest(&s, "SELECT v FROM t WHERE id = ?");
    assert_eq!(d["filled_after_change"]["count"], after["count"], "{d:#}");
    assert!(points["invalidated"]["binlog"].as_u64() >= Some(1), "{s:#}");
    let fills = after["count"].as_u64().unwrap().to_string();

    // The same figures as Prometheus histograms, labelled by rule.
    let metrics =
        crate::support::http::Client::new(&address, Some(sluice::config::Secret(TOKEN.into())));
    let body = String::from_utf8_lossy(&metrics.get("/metrics").unwrap().body).into_owned();
    let hits = (rule(&s, "points")["hits"].as_u64().unwrap()).to_string();
    for line in [
        "# TYPE sluice_cache_hit_age_seconds histogram".to_owned(),
        format!("sluice_cache_hit_age_seconds_count{{rule=\"points\"}} {hits}"),
        format!("sluice_cache_hit_age_seconds_bucket{{rule=\"points\",le=\"+Inf\"}} {hits}"),
        "# TYPE sluice_cache_fill_after_change_seconds histogram".to_owned(),
        format!("sluice_cache_fill_after_change_seconds_count{{rule=\"points\"}} {fills}"),
        format!(
            "sluice_cache_fill_after_change_seconds_bucket{{rule=\"points\",le=\"300\"}} {fills}"
        ),
    ] {
        assert!(body.lines().any(|l| l == line), "no {line:?} in:\n{body}");
    }
    // `sluice admin cache stats` prints them in a table of their own.
    let out = crate::support::sluice_admin(&address, TOKEN, &["cache", "stats"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let words = |line: &str| {
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let table: Vec<Vec<String>> = (out.stdout.lines())
        .skip_while(|l| *l != "Freshness of the rules above (ms)")
        .skip(1)
        .take(2)
        .map(words)
        .collect();
    let header =
        "rule hits age_p50 age_p99 age_max after_change_p50 after_change_p99 after_change_max";
    assert_eq!(table.first(), Some(&words(header)), "{}", out.stdout);
    assert_eq!(
        table[1][..2],
        ["points".to_owned(), hits.clone()],
        "{}",
        out.stdout
    );

    // Buckets count up to their bound: never fewer below a larger one.
    let buckets: Vec<u64> = body
        .lines()
        .filter(|l| l.starts_with("sluice_cache_hit_age_seconds_bucket{rule=\"points\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(buckets.len(), 15, "{body}");
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
}
