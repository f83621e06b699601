//! Live analytics against a real MariaDB: exact per-digest, per-user and global figures
//! for a known workload (text and prepared statements, errors, cache hits), every admin
//! endpoint refusing strangers and answering as its OpenAPI document says, Prometheus
//! text, history that survives a restart, and the cache advisor ranking a workload and
//! enabling a rule that the next statements hit.

use crate::support::http::{Client, Response};
use crate::support::proxy::Config;
use crate::support::wire::{RawConn, Reply};
use crate::support::{shared_server, wait_until, Sluice, NATIVE_PASSWORD, NATIVE_USER};
use serde_json::{json, Value};
use sluice::config::Secret;
use std::collections::BTreeSet;
use std::time::Duration;

pub const TOKEN: &str = "analytics-t0ken";

/// Sluice in front of the shared server with the admin API, an empty cache that rules
/// can be added to, and a history file in `dir`.
pub fn config(dir: &std::path::Path) -> Config {
    config_for(shared_server(), dir)
}

fn config_for(server: &crate::support::MariaDb, dir: &std::path::Path) -> Config {
    Config::for_server(server)
        .admin(TOKEN)
        .cache("enabled", true)
        .analytics("history_file", dir.join("history.json").to_str().unwrap())
}

pub fn client(config: &Config, token: Option<&str>) -> Client {
    Client::new(
        config.admin_address().expect("admin configured"),
        token.map(|t| Secret(t.into())),
    )
}

#[track_caller]
pub fn get(config: &Config, path: &str) -> Value {
    crate::support::admin_json(
        &config.admin_address().expect("admin configured"),
        TOKEN,
        path,
    )
}

#[track_caller]
fn post(config: &Config, path: &str, body: Value) -> (u16, Value) {
    let r = client(config, Some(TOKEN))
        .send_json("POST", path, &body)
        .unwrap_or_else(|e| panic!("{path}: {e:?}"));
    (r.status, r.json().unwrap_or(Value::Null))
}

#[track_caller]
fn login(sluice: &Sluice) -> RawConn {
    RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, None)
        .unwrap_or_else(|e| panic!("login failed: {e:?}\n{}", sluice.log()))
}

#[track_caller]
fn rows(conn: &mut RawConn, sql: &str) -> usize {
    match conn.query(sql) {
        Ok(Reply::ResultSet { rows, .. }) => rows.len(),
        other => panic!("{sql}: {other:?}"),
    }
}

#[track_caller]
fn ok(conn: &mut RawConn, sql: &str) -> u64 {
    match conn.query(sql) {
        Ok(Reply::Ok { affected_rows, .. }) => affected_rows,
        other => panic!("{sql}: {other:?}"),
    }
}

/// The digest listed with exactly this text.
#[track_caller]
fn digest<'a>(digests: &'a Value, text: &str) -> &'a Value {
    digests["digests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["text"] == text)
        .unwrap_or_else(|| panic!("no digest {text:?} in {digests:#}"))
}

fn schema_of(name: &str) -> String {
    format!("an_{name}_{}", std::process::id())
}

/// Creates `schema`.items with ids 1..=10 (through Sluice: these statements count too,
/// which the tests forget with a reset).
fn items(conn: &mut RawConn, schema: &str) {
    ok(conn, &format!("DROP DATABASE IF EXISTS {schema}"));
    ok(conn, &format!("CREATE DATABASE {schema}"));
    ok(
        conn,
        &format!("CREATE TABLE {schema}.items (id INT PRIMARY KEY, name VARCHAR(20))"),
    );
    let values: Vec<String> = (1..=10).map(|i| format!("({i}, 'item{i}')")).collect();
    ok(
        conn,
        &format!("INSERT INTO {schema}.items VALUES {}", values.join(",")),
    );
}

#[test]
fn a_known_workload_is_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_of("exact");
    let cfg = config(dir.path()).cache_rule(
        "item_names",
        &format!("SELECT name FROM {schema}\\.items WHERE id ="),
        "1m",
    );
    let sluice = Sluice::start(&cfg);
    let mut conn = login(&sluice);
    items(&mut conn, &schema);
    let (status, reset) = post(&cfg, "/v1/digests/reset", json!({}));
    assert_eq!(status, 200);
    assert!(reset["reset"].as_u64().unwrap() >= 4, "{reset}");
    let before = get(&cfg, "/v1/overview");
    let user_before = get(&cfg, "/v1/users");

    // 5 point reads under a cache rule: 1 miss, then 4 hits; 1 row each.
    for _ in 0..5 {
        assert_eq!(
            rows(
                &mut conn,
                &format!("SELECT name FROM {schema}.items WHERE id = 3")
            ),
            1
        );
    }
    // 3 range reads: 3 + 5 + 7 rows.
    for n in [4, 6, 8] {
        rows(
            &mut conn,
            &format!("SELECT id FROM {schema}.items WHERE id < {n}"),
        );
    }
    // 2 errors.
    for _ in 0..2 {
        assert!(matches!(
            conn.query(&format!("SELECT nope FROM {schema}.items")),
            Ok(Reply::Err(_))
        ));
    }
    // 1 update of 3 rows.
    assert_eq!(
        ok(
            &mut conn,
            &format!("UPDATE {schema}.items SET name = 'x' WHERE id > 7")
        ),
        3
    );
    // A prepared statement executed 4 times: 2 rows each.
    let stmt = conn
        .prepare(&format!(
            "SELECT id, name FROM {schema}.items WHERE id BETWEEN ? AND ?"
        ))
        .unwrap();
    for (lo, hi) in [("1", "2"), ("3", "4"), ("5", "6"), ("1", "2")] {
        assert_eq!(conn.execute_rows(stmt, &[lo, hi]).unwrap(), 2);
    }

    let digests = get(&cfg, "/v1/digests?sort=count&limit=50");
    let point = digest(
        &digests,
        &format!("SELECT name FROM {schema}.items WHERE id = ?"),
    );
    assert_eq!(
        (
            &point["count"],
            &point["rows_sent"],
            &point["errors"],
            &point["cache_hits"],
            &point["cache_misses"]
        ),
        (&json!(5), &json!(5), &json!(0), &json!(4), &json!(1)),
        "{point:#}"
    );
    // Only the miss reached the server.
    assert_eq!(point["servers"], json!({"db1": 1}));
    assert_eq!(point["kind"], "select");
    assert_eq!(point["tables"], json!([format!("{schema}.items")]));
    let range = digest(
        &digests,
        &format!("SELECT id FROM {schema}.items WHERE id < ?"),
    );
    assert_eq!(
        (&range["count"], &range["rows_sent"]),
        (&json!(3), &json!(15))
    );
    let failing = digest(&digests, &format!("SELECT nope FROM {schema}.items"));
    assert_eq!(
        (&failing["count"], &failing["errors"], &failing["rows_sent"]),
        (&json!(2), &json!(2), &json!(0))
    );
    let update = digest(
        &digests,
        &format!("UPDATE {schema}.items SET name = ? WHERE id > ?"),
    );
    assert_eq!(
        (&update["count"], &update["rows_affected"], &update["kind"]),
        (&json!(1), &json!(3), &json!("update"))
    );
    let prepared = digest(
        &digests,
        &format!("SELECT id, name FROM {schema}.items WHERE id BETWEEN ? AND ?"),
    );
    assert_eq!(
        (&prepared["count"], &prepared["rows_sent"]),
        (&json!(4), &json!(8))
    );
    for d in [point, range, failing, update, prepared] {
        let (min, p50, p99, max) = (
            d["min_us"].as_u64().unwrap(),
            d["p50_us"].as_u64().unwrap(),
            d["p99_us"].as_u64().unwrap(),
            d["max_us"].as_u64().unwrap(),
        );
        assert!(min > 0 && min <= max, "{d}");
        // HDR values are within 1% of what was recorded.
        assert!(p50 * 100 >= min * 99 && p99 * 99 <= max * 100, "{d}");
        assert!(d["total_us"].as_u64().unwrap() >= min * d["count"].as_u64().unwrap());
        assert_eq!(d["users"], json!([NATIVE_USER]));
    }
    let one = get(
        &cfg,
        &format!("/v1/digests/{}", point["id"].as_str().unwrap()),
    );
    assert_eq!(one["count"], 5);

    // Globally and for the user: 15 statements, 2 errors, 28 rows, 4 hits, 1 miss.
    let after = get(&cfg, "/v1/overview");
    let delta =
        |k: &str| after["totals"][k].as_u64().unwrap() - before["totals"][k].as_u64().unwrap();
    assert_eq!(
        [
            delta("queries"),
            delta("select"),
            delta("update"),
            delta("errors"),
            delta("rows")
        ],
        [15, 14, 1, 2, 28],
        "{after:#}"
    );
    assert_eq!([delta("cache_hits"), delta("cache_misses")], [4, 1]);
    let user = |v: &Value, k: &str| {
        v["users"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == NATIVE_USER)
            .map_or(0, |u| u[k].as_u64().unwrap())
    };
    let user_after = get(&cfg, "/v1/users");
    let user_delta = |k: &str| user(&user_after, k) - user(&user_before, k);
    assert_eq!(
        [
            user_delta("queries"),
            user_delta("errors"),
            user_delta("rows_sent"),
            user_delta("cache_hits")
        ],
        [15, 2, 28, 4]
    );
    assert_eq!(user(&user_after, "sessions"), 1);

    // The server's counters saw the 10 statements it answered (and the prepare).
    let servers = get(&cfg, "/v1/servers");
    let db1 = &servers["servers"][0];
    assert!(db1["queries"].as_u64().unwrap() >= 11, "{db1}");
    assert!(db1["bytes_received"].as_u64().unwrap() > 0);

    // Prometheus: the same totals, well formed.
    let metrics = client(&cfg, Some(TOKEN)).get("/metrics").unwrap();
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8(metrics.body).unwrap();
    check_exposition(&text);
    let sample = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert_eq!(
        sample("sluice_queries_total{kind=\"update\"}") as u64,
        after["totals"]["update"].as_u64().unwrap()
    );
    assert_eq!(
        sample("sluice_query_duration_seconds_count") as u64,
        after["totals"]["queries"].as_u64().unwrap()
    );
    assert_eq!(sample("sluice_server_up{server=\"db1\"}"), 1.0);
    assert!(!text.contains("items"), "SQL text must not become a label");
    // Every metric the example Grafana dashboard queries is exported.
    let grafana =
        std::fs::read_to_string(crate::support::repo_root().join("docs/grafana-dashboard.json"))
            .unwrap();
    let grafana: Value = serde_json::from_str(&grafana).expect("the Grafana dashboard is JSON");
    fn exprs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(e)) = o.get("expr") {
                    out.push(e);
                }
                o.values().for_each(|v| exprs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    exprs(&grafana, &mut all);
    let mut queried = BTreeSet::new();
    for expr in all {
        for (i, _) in expr.match_indices("sluice_") {
            let name: String = expr[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            queried.insert(name);
        }
    }
    assert!(queried.len() >= 15, "{queried:?}");
    for name in &queried {
        // A family may have no sample yet (no replica, no lag), but it is announced.
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{name}{{"))
                || l.starts_with(&format!("{name} "))
                || l.starts_with(&format!("# TYPE {name} "))),
            "the Grafana dashboard queries {name}, which /metrics does not export"
        );
    }

    // Within a couple of seconds the history has the workload's second.
    assert!(wait_until(Duration::from_secs(5), || {
        let h = get(&cfg, "/v1/history?range=hour");
        h["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["queries"].as_u64().unwrap())
            .sum::<u64>()
            >= 15
    }));
    ok(&mut conn, &format!("DROP DATABASE {schema}"));
}

/// Every sample line is `name{labels} value` of a family announced with HELP and TYPE.
fn check_exposition(text: &str) {
    let mut families = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            families.insert(parts.next().unwrap().to_owned());
            assert!(
                matches!(parts.next(), Some("counter" | "gauge" | "histogram")),
                "{line}"
            );
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("{line}"));
        let name = &line[..name_end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| families.contains(*f)))
            .unwrap_or(name);
        assert!(families.contains(family), "{line}: family not announced");
        let value = line.rsplit(' ').next().unwrap();
        assert!(
            value.parse::<f64>().is_ok() || value == "+Inf",
            "{line}: bad value"
        );
    }
}

#[test]
fn history_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path()).analytics("save_interval", "1s");
    let mut sluice = Sluice::start(&cfg);
    let mut conn = login(&sluice);
    for _ in 0..20 {
        rows(&mut conn, "SELECT 1");
    }
    let counted = |cfg: &Config| -> u64 {
        get(cfg, "/v1/history?range=hour")["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["queries"].as_u64().unwrap())
            .sum()
    };
    assert!(wait_until(Duration::from_secs(5), || counted(&cfg) >= 20));
    drop(conn);
    sluice.stop();
    let file = dir.path().join("history.json");
    assert!(file.is_file(), "history written at shutdown");

    let sluice = Sluice::start(&cfg);
    assert!(
        counted(&cfg) >= 20,
        "the points before the restart are back:\n{}",
        sluice.log()
    );
    let day = get(&cfg, "/v1/history?range=day");
    assert_eq!(day["interval_seconds"], 60);
    let in_minutes: u64 = day["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["queries"].as_u64().unwrap())
        .sum();
    assert!(in_minutes >= 20, "{day:#}");
}

#[test]
fn the_advisor_ranks_a_workload_and_its_rule_makes_hits() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_of("advice");
    let cfg = config(dir.path());
    let sluice = Sluice::start(&cfg);
    let mut conn = login(&sluice);
    items(&mut conn, &schema);
    ok(
        &mut conn,
        &format!("CREATE TABLE {schema}.prices (id INT PRIMARY KEY, p INT)"),
    );
    ok(
        &mut conn,
        &format!("INSERT INTO {schema}.prices VALUES (1, 1)"),
    );
    for i in 0..60 {
        // Five item lookups, each repeated: 55 of 60 could have been hits.
        rows(
            &mut conn,
            &format!("SELECT name FROM {schema}.items WHERE id = {}", i % 5 + 1),
        );
        // The same read each time, but its table is written before every read.
        ok(
            &mut conn,
            &format!("UPDATE {schema}.prices SET p = p + 1 WHERE id = 1"),
        );
        rows(
            &mut conn,
            &format!("SELECT p FROM {schema}.prices WHERE id = 1"),
        );
    }
    let advice = get(&cfg, "/v1/advisor");
    assert_eq!(advice["cache"], true);
    let candidates = advice["candidates"].as_array().unwrap();
    let texts: Vec<&str> = candidates
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    let lookup = format!("SELECT name FROM {schema}.items WHERE id = ?");
    assert!(texts.contains(&lookup.as_str()), "{advice:#}");
    assert!(
        !texts.iter().any(|t| t.contains("prices")),
        "a read whose table is always written is no candidate: {advice:#}"
    );
    let best = candidates
        .iter()
        .find(|c| c["text"] == lookup.as_str())
        .unwrap();
    let rate = best["expected_hit_rate"].as_f64().unwrap();
    assert!((rate - 55.0 / 60.0).abs() < 1e-9, "{best}");
    assert_eq!(best["cached"], false);

    // Enabling from the advisor: the next lookups are answered from the cache.
    let id = best["id"].as_str().unwrap();
    let (status, enabled) = post(
        &cfg,
        "/v1/advisor/enable",
        json!({"digest": id, "ttl": "10m"}),
    );
    assert_eq!(status, 200, "{enabled}");
    assert_eq!(enabled["rule"]["name"], format!("advisor-{id}"));
    for _ in 0..3 {
        for i in 1..=5 {
            rows(
                &mut conn,
                &format!("SELECT name FROM {schema}.items WHERE id = {i}"),
            );
        }
    }
    let d = get(&cfg, &format!("/v1/digests/{id}"));
    assert_eq!(
        (&d["cache_misses"], &d["cache_hits"]),
        (&json!(5), &json!(10)),
        "{d:#}"
    );
    let advice = get(&cfg, "/v1/advisor");
    let now = advice["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap();
    assert_eq!(
        (&now["cached"], &now["rule"]),
        (&json!(true), &json!(format!("advisor-{id}")))
    );
    let rules = get(&cfg, "/v1/cache/rules");
    assert_eq!(rules[0]["name"], format!("advisor-{id}"));

    // Refusals: unknown digest, a digest that is not a cacheable read, bad bodies.
    let update = get(&cfg, "/v1/digests?sort=count")["digests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "update")
        .unwrap()["id"]
        .clone();
    assert_eq!(
        post(
            &cfg,
            "/v1/advisor/enable",
            json!({"digest": "0123456789abcdef"})
        )
        .0,
        404
    );
    assert_eq!(
        post(&cfg, "/v1/advisor/enable", json!({"digest": update})).0,
        409
    );
    assert_eq!(
        post(
            &cfg,
            "/v1/advisor/enable",
            json!({"digest": id, "ttl": "soon"})
        )
        .0,
        400
    );
    assert_eq!(post(&cfg, "/v1/advisor/enable", json!({})).0, 400);
    ok(&mut conn, &format!("DROP DATABASE {schema}"));
}

/// The OpenAPI document's schema for `status` of `method path`, as a validator that
/// resolves its references within the document.
fn validator(doc: &Value, path: &str, method: &str, status: u16) -> Option<jsonschema::Validator> {
    let response = &doc["paths"][path][method]["responses"][status.to_string()];
    let schema = response["content"]["application/json"]["schema"].clone();
    if schema.is_null() {
        return None;
    }
    let mut root = schema;
    let root_obj = root.as_object_mut().unwrap();
    root_obj.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    root_obj.insert("components".into(), doc["components"].clone());
    Some(jsonschema::draft202012::new(&root).unwrap_or_else(|e| panic!("{path} {method}: {e}")))
}

#[track_caller]
fn conforms(doc: &Value, path: &str, method: &str, r: &Response) {
    let body: Value = r
        .json()
        .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e:?})"));
    let v = validator(doc, path, method, r.status).unwrap_or_else(|| {
        panic!(
            "{method} {path}: status {} not documented: {body}",
            r.status
        )
    });
    let errors: Vec<String> = v
        .iter_errors(&body)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path} {}: {errors:#?}\n{body:#}",
        r.status
    );
}

#[test]
fn every_endpoint_refuses_strangers_and_answers_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path()).cache_rule("ones", "^SELECT 1", "1m");
    let sluice = Sluice::start(&cfg);
    let mut conn = login(&sluice);
    for _ in 0..3 {
        rows(&mut conn, "SELECT 1");
        rows(&mut conn, "SELECT @@version_comment FROM DUAL");
    }
    let authed = client(&cfg, Some(TOKEN));
    let doc: Value = authed.get("/v1/openapi.json").unwrap().json().unwrap();
    assert_eq!(doc["openapi"].as_str().unwrap().get(..3), Some("3.1"));

    // Without the token, or with a wrong one: 401 and nothing but the error.
    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            operations.push((path.clone(), method.clone()));
        }
    }
    assert!(operations.len() >= 24, "{operations:?}");
    for (path, method) in &operations {
        let concrete = path
            .replace("{name}", "db1")
            .replace("{id}", "0123456789abcdef");
        for token in [None, Some("wrong")] {
            let r = client(&cfg, token)
                .request(&method.to_uppercase(), &concrete, Some(b"{}"))
                .unwrap();
            assert_eq!(r.status, 401, "{method} {concrete} with {token:?}");
            let body: Value = r.json().unwrap();
            assert_eq!(
                body.as_object().unwrap().keys().collect::<Vec<_>>(),
                vec!["error"],
                "{body}"
            );
            assert!(doc["paths"][path][method]["responses"]["401"].is_object());
        }
    }

    // With it, every GET answers as documented.
    let digest_id = get(&cfg, "/v1/digests")["digests"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let get_paths = [
        ("/v1/stats", "/v1/stats"),
        ("/v1/overview", "/v1/overview"),
        ("/v1/history", "/v1/history"),
        ("/v1/history", "/v1/history?range=day&since=0"),
        ("/v1/digests", "/v1/digests?sort=p99&limit=5"),
        ("/v1/digests/{id}", &format!("/v1/digests/{digest_id}")),
        ("/v1/digests/{id}", "/v1/digests/0123456789abcdef"),
        ("/v1/users", "/v1/users"),
        ("/v1/advisor", "/v1/advisor"),
        ("/v1/cache/stats", "/v1/cache/stats"),
        ("/v1/cache/rules", "/v1/cache/rules"),
        ("/v1/sessions", "/v1/sessions"),
        ("/v1/pool", "/v1/pool"),
        ("/v1/servers", "/v1/servers"),
        // In no fleet here (the harness's default): its 404 is documented too.
        ("/v1/fleet", "/v1/fleet"),
        ("/v1/history", "/v1/history?range=week"),
        ("/v1/digests", "/v1/digests?sort=colour"),
    ];
    let mut covered = BTreeSet::new();
    for (path, concrete) in get_paths {
        let r = authed.get(concrete).unwrap();
        conforms(&doc, path, "get", &r);
        covered.insert((path.to_owned(), "get".to_owned()));
    }
    let metrics = authed.get("/metrics").unwrap();
    assert_eq!(metrics.status, 200);
    assert!(metrics
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/plain")));
    covered.insert(("/metrics".into(), "get".into()));
    covered.insert(("/v1/openapi.json".into(), "get".into()));

    // And every action, with good and bad bodies.
    let rules = get(&cfg, "/v1/cache/rules");
    let actions: Vec<(&str, &str, String, Value)> = vec![
        ("/v1/cache/rules", "put", "/v1/cache/rules".into(), rules),
        (
            "/v1/cache/rules",
            "put",
            "/v1/cache/rules".into(),
            json!([{"name": "x"}]),
        ),
        (
            "/v1/cache/invalidate",
            "post",
            "/v1/cache/invalidate".into(),
            json!({"all": true}),
        ),
        (
            "/v1/cache/invalidate",
            "post",
            "/v1/cache/invalidate".into(),
            json!({"colour": 1}),
        ),
        (
            "/v1/cache/warm",
            "post",
            "/v1/cache/warm".into(),
            json!({"file": "relative"}),
        ),
        (
            "/v1/advisor/enable",
            "post",
            "/v1/advisor/enable".into(),
            json!({"digest": "0123456789abcdef"}),
        ),
        (
            "/v1/servers/switchover",
            "post",
            "/v1/servers/switchover".into(),
            json!({"to": "nobody"}),
        ),
        (
            "/v1/servers/{name}/disable",
            "post",
            "/v1/servers/db1/disable".into(),
            json!({}),
        ),
        (
            "/v1/servers/{name}/enable",
            "post",
            "/v1/servers/db1/enable".into(),
            json!({}),
        ),
        (
            "/v1/servers/{name}/enable",
            "post",
            "/v1/servers/nobody/enable".into(),
            json!({}),
        ),
        (
            "/v1/servers/{name}/drain",
            "post",
            "/v1/servers/db1/drain".into(),
            json!({}),
        ),
        (
            "/v1/servers/{name}/drain",
            "post",
            "/v1/servers/nobody/drain".into(),
            json!({}),
        ),
        (
            "/v1/config/reload",
            "post",
            "/v1/config/reload".into(),
            json!({}),
        ),
        (
            "/v1/digests/reset",
            "post",
            "/v1/digests/reset".into(),
            json!({}),
        ),
        // Without [handover] socket: refused, with the reason (handover.rs tests the
        // upgrade itself).
        ("/v1/upgrade", "post", "/v1/upgrade".into(), json!({})),
    ];
    for (path, method, concrete, body) in actions {
        let r = authed
            .send_json(&method.to_uppercase(), &concrete, &body)
            .unwrap();
        conforms(&doc, path, method, &r);
        covered.insert((path.to_owned(), method.to_owned()));
    }
    // The writer can't be drained; an unknown server is not found.
    let r = authed
        .request("POST", "/v1/servers/db1/drain", None)
        .unwrap();
    assert_eq!(r.status, 409);
    // A configuration that does not load is refused with its problems, and nothing
    // changes.
    std::fs::write(
        sluice.config_path(),
        "[[listeners]]\naddress = \"nowhere\"\n",
    )
    .unwrap();
    let r = authed.request("POST", "/v1/config/reload", None).unwrap();
    assert_eq!(r.status, 409);
    conforms(&doc, "/v1/config/reload", "post", &r);
    assert_eq!(rows(&mut conn, "SELECT 1"), 1);

    let all: BTreeSet<(String, String)> = operations.into_iter().collect();
    let missed: Vec<_> = all.difference(&covered).collect();
    assert!(missed.is_empty(), "operations not exercised: {missed:?}");
}

/// `sluice admin ARGS...` against `cfg`'s admin API.
fn admin_cli(cfg: &Config, args: &[&str]) -> crate::support::CliOutput {
    crate::support::sluice_admin(&cfg.admin_address().unwrap(), TOKEN, args)
}

#[test]
fn sluice_admin_shows_digests_users_advice_and_top() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_of("cli");
    let cfg = config(dir.path());
    let sluice = Sluice::start(&cfg);
    let mut conn = login(&sluice);
    items(&mut conn, &schema);
    for i in 0..30 {
        rows(
            &mut conn,
            &format!("SELECT name FROM {schema}.items WHERE id = {}", i % 3 + 1),
        );
    }
    let lookup = format!("SELECT name FROM {schema}.items WHERE id = ?");

    let out = admin_cli(&cfg, &["digests", "--sort", "count", "--limit", "5"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.ends_with(&lookup))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[1], "30", "{line}");
    let id = fields[0].to_owned();
    assert_eq!(
        admin_cli(&cfg, &["digests", "--sort", "colour"]).code,
        Some(1)
    );

    let out = admin_cli(&cfg, &["users"]);
    assert!(
        out.stdout.lines().any(|l| l.starts_with(NATIVE_USER)),
        "{}",
        out.stdout
    );

    let out = admin_cli(&cfg, &["advisor"]);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    // 27 of 30 were repeats: 90% expected hits, not cached yet.
    assert!(line.contains(" 90.0 ") && line.contains(" no "), "{line}");

    let out = admin_cli(&cfg, &["cache", "enable", &id, "--ttl", "1m"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("advisor-{id}")),
        "{}",
        out.stdout
    );
    let out = admin_cli(&cfg, &["cache", "enable", "0123456789abcdef"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("no digest"), "{}", out.stderr);

    // Two screens of top, a moment apart, through a pipe: frames one after another.
    let out = admin_cli(&cfg, &["top", "-n", "2", "--every", "200ms"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.matches("queries/s").count(), 2, "{}", out.stdout);
    assert!(
        out.stdout.contains("db1") && out.stdout.contains(&lookup),
        "{}",
        out.stdout
    );

    // Drain refuses the writer; reload re-reads the file.
    let out = admin_cli(&cfg, &["drain", "db1"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("writer"), "{}", out.stderr);
    let out = admin_cli(&cfg, &["reload"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("\"reloaded\": true"), "{}", out.stdout);
    ok(&mut conn, &format!("DROP DATABASE {schema}"));
}

/// sysbench `oltp_read_only` with `args` against 127.0.0.1:`port`, in the background.
fn sysbench(port: u16, database: &str, args: &[&str]) -> std::process::Child {
    std::process::Command::new("sysbench")
        .args([
            "oltp_read_only",
            "--db-driver=mysql",
            "--mysql-host=127.0.0.1",
        ])
        .arg(format!("--mysql-port={port}"))
        .arg(format!("--mysql-user={NATIVE_USER}"))
        .arg(format!("--mysql-password={NATIVE_PASSWORD}"))
        .arg(format!("--mysql-db={database}"))
        .args(["--tables=1", "--table-size=1000"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("sysbench could not start ({e}); `make test` installs it"))
}

/// Kills a background client when the test ends, however it ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The dashboard in Debian's Chromium (driven by playwright-core) while sysbench runs:
/// the page loads, a wrong token gets the token form, the live charts receive points,
/// the servers show, the advisor lists sysbench's point select, and enabling it from the
/// page makes the next point selects cache hits. Screenshots are kept in
/// target/test-artifacts/dashboard/.
#[test]
fn the_dashboard_works_in_headless_chromium_under_sysbench() {
    let root = crate::support::repo_root();
    let script = root.join("tests/clients/node/dashboard.js");
    assert!(
        root.join("tests/clients/node/node_modules/playwright-core")
            .is_dir(),
        "playwright-core is missing: run `make test`, which installs it"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).is_file(),
        "{chromium} is missing: run `make test`, which installs Debian's chromium"
    );
    let node = sluice_sandbox::find_program(&["node", "nodejs"])
        .unwrap_or_else(|e| panic!("{e:#}; run `make test`, which installs Node.js"));

    // A server of its own: sysbench's tables and prepared statements stay out of the
    // other tests' way (and theirs out of this one's).
    let server = crate::support::dedicated_server(Default::default());
    let server = &server;
    let database = format!("dashboard_{}", std::process::id());
    crate::support::fresh_database(server, &database);
    let status = sysbench(server.port(), &database, &["prepare"])
        .wait()
        .unwrap();
    assert!(status.success(), "sysbench prepare failed");
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_for(server, dir.path());
    let sluice = Sluice::start(&cfg);
    let _load = Reaped(sysbench(
        sluice.port(),
        &database,
        &[
            // Light (about 1,400 statements/s): the page, not the load, is under
            // test, and other tests run beside this one.
            "--threads=1",
            "--time=120",
            "--skip_trx=on",
            "--rate=100",
            "run",
        ],
    ));
    let point_select = "SELECT c FROM sbtest1 WHERE id=?";
    assert!(
        wait_until(Duration::from_secs(20), || {
            get(&cfg, "/v1/advisor")["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["text"] == point_select)
        }),
        "the advisor never listed sysbench's point select:\n{:#}",
        get(&cfg, "/v1/advisor")
    );

    let artifacts = root.join("target/test-artifacts/dashboard");
    let _ = std::fs::remove_dir_all(&artifacts);
    std::fs::create_dir_all(&artifacts).unwrap();
    let address = cfg.admin_address().unwrap();
    let out = std::process::Command::new(node)
        .current_dir(root.join("tests/clients/node"))
        .arg(&script)
        .args(["--url", &format!("http://{address}"), "--token", TOKEN])
        .arg("--out")
        .arg(&artifacts)
        .args(["--expect-digest", point_select, "--timeout-ms", "90000"])
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node runs the dashboard script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no JSON report:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(
        report["ok"],
        true,
        "{report:#}\nscreenshots in {}",
        artifacts.display()
    );
    assert!(report["live_points"].as_u64().unwrap() >= 3, "{report}");
    assert_eq!(report["servers"], json!(["db1"]));
    let id = report["enabled"]["digest"].as_str().unwrap().to_owned();
    assert_eq!(
        get(&cfg, &format!("/v1/digests/{id}"))["text"],
        point_select
    );
    // The freshness section shows the rule's hits with their ages (a duration each).
    let fresh = &report["freshness"];
    assert_eq!(fresh["rule"], format!("advisor-{id}"), "{report:#}");
    for q in ["p50", "p99", "max"] {
        let shown = fresh[q].as_str().unwrap();
        assert!(
            shown.ends_with(" ms") || shown.ends_with(" µs") || shown.ends_with(" s"),
            "{q}: {shown:?} in {report:#}"
        );
    }
    for shot in ["dashboard.png", "advisor.png", "freshness.png"] {
        assert!(artifacts.join(shot).is_file(), "{shot} was not saved");
    }
    // The rule the page enabled: sysbench's next point selects are answered from the cache.
    assert!(
        wait_until(Duration::from_secs(30), || {
            get(&cfg, &format!("/v1/digests/{id}"))["cache_hits"]
                .as_u64()
                .unwrap()
                >= 50
        }),
        "{:#}\n{}",
        get(&cfg, &format!("/v1/digests/{id}")),
        sluice
            .log()
            .lines()
            .filter(|l| !l.contains("admin request"))
            .take(80)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let rules = get(&cfg, "/v1/cache/rules");
    assert_eq!(rules[0]["name"], format!("advisor-{id}"));
}

/// Statement packets cut short (an execute or close without a whole statement id, a
/// prepare of nothing) get an error or a clean close, and analytics goes on for everyone.
#[test]
fn truncated_statement_packets_harm_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut sluice = Sluice::start(&cfg);
    for (command, body) in [
        (0x17u8, &[0x01u8][..]),
        (0x17, &[][..]),
        (0x19, &[0x02, 0x00][..]),
        (0x16, &[][..]),
        (0x03, &[][..]),
    ] {
        let mut c = login(&sluice);
        c.send_command(command, body).unwrap();
        // COM_STMT_CLOSE has no answer; the others get an error or a clean close.
        if command != 0x19 {
            match c.read_reply() {
                Ok(Reply::Err(_)) | Err(_) => {}
                Ok(other) => panic!("{command:#x}: {other:?}"),
            }
        } else {
            assert_eq!(rows(&mut c, "SELECT 2 FROM DUAL"), 1);
        }
        sluice.assert_running();
    }
    let mut c = login(&sluice);
    assert_eq!(rows(&mut c, "SELECT 1 FROM DUAL"), 1);
    let digests = get(&cfg, "/v1/digests?sort=count");
    assert!(
        digest(&digests, "SELECT ? FROM DUAL")["count"]
            .as_u64()
            .unwrap()
            >= 1
    );
}
