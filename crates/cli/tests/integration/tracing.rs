//! Traces against a real receiver: Sluice exports to a Jaeger on loopback (OTLP/HTTP and
//! gRPC), and the spans Jaeger stores are read back through its query API. A statement's
//! span continues the caller's trace named in its sqlcommenter comment, its stages are
//! its children, and a receiver that goes away costs statements nothing.

use crate::support::proxy::Config;
use crate::support::wire::RawConn;
use crate::support::{
    fresh_database, shared_server, wait_until, Sluice, NATIVE_PASSWORD, NATIVE_USER,
};
use serde_json::Value;
use sluice_sandbox::jaeger::{span_parent, span_tag, Jaeger};
use std::time::{Duration, Instant};

pub(super) const WAIT: Duration = Duration::from_secs(20);

/// A caller's `traceparent`: trace `n`, span `00f067aa0ba902b7`, sampled or not.
pub(super) fn traceparent(n: u8, sampled: bool) -> (String, String) {
    let trace_id = format!("4bf92f3577b34da6a3ce929d0e0e47{n:02x}");
    let flags = if sampled { "01" } else { "00" };
    (format!("00-{trace_id}-00f067aa0ba902b7-{flags}"), trace_id)
}

/// Database `db` with table `t (id, v)` holding (1, 10) and (2, 20).
fn table_t(server: &sluice_sandbox::MariaDb, db: &str) {
    fresh_database(server, db);
    server
        .execute(&format!(
            "CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT); INSERT INTO {db}.t VALUES (1, 10), (2, 20);"
        ))
        .unwrap();
}

pub(super) fn commented(sql: &str, tp: &str) -> String {
    format!("{sql} /*controller='orders',traceparent='{tp}'*/")
}

/// The spans of trace `trace_id`: the statement's (no parent in the trace), then its
/// children, by start.
pub(super) fn trace_of<'a>(spans: &'a [Value], trace_id: &str) -> (&'a Value, Vec<&'a Value>) {
    let mut of: Vec<&Value> = spans.iter().filter(|s| s["traceID"] == trace_id).collect();
    of.sort_by_key(|s| s["startTime"].as_u64());
    let root = of
        .iter()
        .find(|s| span_parent(s) == Some("00f067aa0ba902b7"))
        .unwrap_or_else(|| panic!("no span of trace {trace_id} under the caller's: {of:#?}"));
    let root_id = root["spanID"].as_str().unwrap().to_owned();
    let children = of
        .iter()
        .copied()
        .filter(|s| span_parent(s) == Some(root_id.as_str()))
        .collect();
    (root, children)
}

/// The spans of `service` once `ready` holds of them (bounded by `WAIT`).
#[track_caller]
pub(super) fn spans_once(
    jaeger: &Jaeger,
    service: &str,
    sluice: &Sluice,
    ready: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut spans = Vec::new();
    let found = wait_until(WAIT, || {
        spans = jaeger.spans(service).unwrap_or_default();
        ready(&spans)
    });
    assert!(found, "spans: {spans:#?}\nsluice log:\n{}", sluice.log());
    spans
}

/// Whether `spans` hold trace `trace_id`'s statement, under the caller's span.
pub(super) fn has_root(spans: &[Value], trace_id: &str) -> bool {
    spans
        .iter()
        .any(|s| s["traceID"] == trace_id && span_parent(s) == Some("00f067aa0ba902b7"))
}

pub(super) fn names(children: &[&Value]) -> Vec<String> {
    let mut n: Vec<String> = children
        .iter()
        .map(|s| s["operationName"].as_str().unwrap().to_owned())
        .collect();
    n.sort();
    n
}

pub(super) fn tag<'a>(span: &'a Value, key: &str) -> &'a Value {
    span_tag(span, key).unwrap_or_else(|| panic!("no {key} on {span:#}"))
}

/// The spans of `spans` whose parent is `parent`, by start.
pub(super) fn children_of<'a>(spans: &'a [Value], parent: &Value) -> Vec<&'a Value> {
    let id = parent["spanID"].as_str().unwrap();
    let mut of: Vec<&Value> = spans
        .iter()
        .filter(|s| s["traceID"] == parent["traceID"] && span_parent(s) == Some(id))
        .collect();
    of.sort_by_key(|s| s["startTime"].as_u64());
    of
}

/// The one span named `name` among `spans`.
#[track_caller]
pub(super) fn named<'a>(spans: &[&'a Value], name: &str) -> &'a Value {
    let mut found = spans.iter().filter(|s| s["operationName"] == name);
    let one = found
        .next()
        .unwrap_or_else(|| panic!("no {name} in {spans:#?}"));
    assert!(found.next().is_none(), "more than one {name} in {spans:#?}");
    one
}

/// A span's duration, in microseconds.
pub(super) fn micros(span: &Value) -> u64 {
    span["duration"].as_u64().unwrap()
}

/// Each child lies within its parent's time.
pub(super) fn within(root: &Value, children: &[&Value]) {
    let start = root["startTime"].as_u64().unwrap();
    let end = start + root["duration"].as_u64().unwrap();
    for c in children {
        let cs = c["startTime"].as_u64().unwrap();
        let ce = cs + c["duration"].as_u64().unwrap();
        assert!(start <= cs && ce <= end, "{c:#} outside {root:#}");
    }
}

/// A miss, a hit, a write and a failed statement, each under its caller's span; a
/// statement whose caller did not record its own is not traced.
#[test]
fn statements_continue_the_callers_trace_with_their_stages() {
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let server = shared_server();
    table_t(server, "traced");
    let service = "sluice-traced";
    let config = Config::for_server(server)
        .cache_rule("t-reads", "(?i)^SELECT v FROM t\\b", "1h")
        .tracing("endpoint", jaeger.otlp_http_endpoint())
        .tracing("sample_ratio", 1.0)
        .tracing("service_name", service);
    let sluice = Sluice::start(&config);
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    c.query("USE traced").unwrap().expect_ok();

    let (miss, miss_id) = traceparent(1, true);
    let (hit, hit_id) = traceparent(2, true);
    let (write, write_id) = traceparent(3, true);
    let (failed, failed_id) = traceparent(4, true);
    let (unsampled, unsampled_id) = traceparent(5, false);
    let read = "SELECT v FROM t WHERE id = 1";
    assert_eq!(
        c.query_rows(&commented(read, &miss))[0][0].as_deref(),
        Some("10")
    );
    // Another traceparent, the same cache key: a hit.
    assert_eq!(
        c.query_rows(&commented(read, &hit))[0][0].as_deref(),
        Some("10")
    );
    c.query(&commented("INSERT INTO t VALUES (3, 30)", &write))
        .unwrap()
        .expect_ok();
    c.query_rows(&commented(read, &unsampled));
    let err = c
        .query(&commented("SELECT * FROM no_such_table", &failed))
        .unwrap();
    assert_eq!(err.expect_err().code, 1146);
    // A span goes after its children, and the statements one after another: once the
    // last statement's span is in, every span before it is.
    let spans = spans_once(&jaeger, service, &sluice, |s| has_root(s, &failed_id));

    let (root, children) = trace_of(&spans, &miss_id);
    assert_eq!(root["operationName"], "SELECT v FROM t WHERE id = ?");
    assert_eq!(tag(root, "db.system.name"), "mariadb");
    assert_eq!(tag(root, "db.namespace"), "traced");
    assert_eq!(tag(root, "sluice.cache"), "miss");
    assert_eq!(tag(root, "db.response.returned_rows"), 1);
    assert_eq!(tag(root, "span.kind"), "server");
    assert!(
        span_tag(root, "db.query.text").is_none(),
        "text only when configured"
    );
    assert_eq!(names(&children), ["cache fill", "cache lookup", "lease"]);
    within(root, &children);
    // The lease: the wait for the pool's connection (idle there: no queue to speak of).
    let lease = named(&children, "lease");
    let in_lease = children_of(&spans, lease);
    let queue = named(&in_lease, "queue wait");
    assert_eq!(
        tag(queue, "server.address"),
        &Value::from(server.addr().to_string())
    );
    within(lease, &in_lease);
    // The fill holds the round trip whose response it stored.
    let fill = named(&children, "cache fill");
    assert_eq!(tag(fill, "sluice.cache.stored"), true);
    assert!(
        tag(fill, "sluice.cache.bytes").as_i64().unwrap() > 0,
        "{fill:#}"
    );
    let in_fill = children_of(&spans, fill);
    within(fill, &in_fill);
    let round_trip = named(&in_fill, "server round trip");
    assert_eq!(
        tag(round_trip, "server.address"),
        &Value::from(server.addr().to_string())
    );
    assert_eq!(tag(round_trip, "span.kind"), "client");
    // It ends at the response's last byte, after its first.
    let first_byte = tag(round_trip, "sluice.server.first_byte_us")
        .as_u64()
        .unwrap();
    assert!(first_byte <= micros(round_trip), "{round_trip:#}");

    let (root, children) = trace_of(&spans, &hit_id);
    assert_eq!(tag(root, "sluice.cache"), "hit");
    assert!(
        !names(&children).contains(&"server round trip".to_owned()),
        "a hit does not reach the server: {children:#?}"
    );
    assert!(names(&children).contains(&"cache lookup".to_owned()));

    let (root, children) = trace_of(&spans, &write_id);
    assert_eq!(root["operationName"], "INSERT INTO t VALUES (?, ?)");
    assert!(names(&children).contains(&"server round trip".to_owned()));
    assert!(
        span_tag(root, "db.response.status_code").is_none(),
        "{root:#}"
    );

    // The server's error code and SQL state; its message, which may hold values, not.
    let (root, _) = trace_of(&spans, &failed_id);
    assert_eq!(tag(root, "error"), true);
    assert_eq!(tag(root, "otel.status_code"), "ERROR");
    assert_eq!(tag(root, "db.response.status_code"), "1146");
    assert_eq!(tag(root, "error.type"), "1146");
    assert_eq!(tag(root, "sluice.sql_state"), "42S02");
    assert_eq!(
        tag(root, "otel.status_description"),
        "the server answered error 1146 (42S02)"
    );

    assert!(
        spans.iter().all(|s| s["traceID"] != unsampled_id.as_str()),
        "a caller that did not record its span gets none from Sluice"
    );
}

/// Over gRPC: the receiver stopped mid-run costs no statement an error or a stall, and
/// the spans it could not take are counted as dropped.
#[test]
fn a_receiver_that_goes_away_costs_statements_nothing() {
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let server = shared_server();
    let service = "sluice-receiver-gone";
    let config = Config::for_server(server)
        .tracing("endpoint", jaeger.otlp_grpc_endpoint())
        .tracing("protocol", "grpc")
        .tracing("sample_ratio", 1.0)
        .tracing("service_name", service)
        .tracing("timeout", "1s")
        .admin("tok");
    let admin = config.admin_address().unwrap();
    let sluice = Sluice::start(&config);
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    c.query_rows("SELECT 1");
    jaeger
        .wait_for_spans(service, 1, WAIT)
        .unwrap_or_else(|e| panic!("over gRPC: {e:#}\nsluice log:\n{}", sluice.log()));
    jaeger.stop();

    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for i in 0..300 {
        let at = Instant::now();
        assert_eq!(
            c.query_rows(&format!("SELECT {i}"))[0][0],
            Some(i.to_string())
        );
        slowest = slowest.max(at.elapsed());
    }
    // Generous for a loaded machine: an export waiting on the receiver would add its
    // whole timeout (1 s) to a statement.
    assert!(
        slowest < Duration::from_millis(900),
        "slowest statement {slowest:?}"
    );
    let metrics =
        crate::support::http::Client::new(admin, Some(sluice::config::Secret("tok".into())));
    let dropped = || {
        let m = metrics.get("/metrics").expect("the admin API answers");
        String::from_utf8_lossy(&m.body)
            .lines()
            .find_map(|l| l.strip_prefix("sluice_trace_spans_dropped_total "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        wait_until(WAIT, || dropped() > 0),
        "no span counted as dropped {:?} after the receiver stopped\n{}",
        started.elapsed(),
        sluice.log()
    );
}

/// With `propagate`, the server gets the statement naming Sluice's round trip as its
/// parent: the text the server runs (its own process-list row) carries that span's id in
/// place of the caller's, the same length, and the rest of the statement as sent.
#[test]
fn propagate_sends_sluices_span_on_to_the_server() {
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let server = shared_server();
    let service = "sluice-propagate";
    let config = Config::for_server(server)
        .tracing("endpoint", jaeger.otlp_http_endpoint())
        .tracing("service_name", service)
        .tracing("sample_ratio", 0.0)
        .tracing("propagate", true);
    let sluice = Sluice::start(&config);
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let (tp, trace_id) = traceparent(6, true);
    let sql = commented(
        "SELECT INFO FROM information_schema.PROCESSLIST WHERE INFO LIKE '%propagate-marker-6%'",
        &tp,
    );
    let seen = c.query_rows(&sql)[0][0]
        .clone()
        .expect("the statement's own row");
    let spans = spans_once(&jaeger, service, &sluice, |spans| {
        spans
            .iter()
            .any(|s| s["operationName"] == "server round trip")
    });
    let round_trip = spans
        .iter()
        .find(|s| s["operationName"] == "server round trip")
        .unwrap();
    assert_eq!(round_trip["traceID"], trace_id.as_str());
    let id = round_trip["spanID"].as_str().unwrap();
    let expected = sql.replace("00f067aa0ba902b7", id);
    assert_eq!(
        seen, expected,
        "the server ran the statement naming Sluice's span"
    );
}

/// `[log] slow_statement` without any tracing: a statement over the threshold is one
/// JSON line with its digest's start (no values), and counted; one under it is neither.
#[test]
fn a_slow_statement_is_logged_with_its_facts_and_counted() {
    let server = shared_server();
    let mut config = Config::for_server(server).admin("tok");
    config.log.slow_statement = Some("150ms".into());
    config.log.format = "json".into();
    let admin = config.admin_address().unwrap();
    let sluice = Sluice::start(&config);
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    c.query_rows("SELECT 1");
    c.query_rows("SELECT SLEEP(0.3), 'secret-value'");
    let metrics =
        crate::support::http::Client::new(admin, Some(sluice::config::Secret("tok".into())));
    let body = String::from_utf8_lossy(&metrics.get("/metrics").unwrap().body).into_owned();
    assert!(
        body.lines().any(|l| l == "sluice_slow_statements_total 1"),
        "{body}"
    );
    let mut line = None;
    assert!(wait_until(WAIT, || {
        line = sluice
            .log()
            .lines()
            .find(|l| l.contains("slow statement"))
            .map(str::to_owned);
        line.is_some()
    }));
    let line: Value = serde_json::from_str(&line.unwrap()).expect("a JSON line");
    let fields = &line["fields"];
    assert_eq!(fields["summary"], "SELECT SLEEP(?), ?", "{line}");
    assert_eq!(fields["user"], NATIVE_USER);
    assert!(fields["took_ms"].as_f64().unwrap() >= 150.0, "{line}");
    assert!(
        !line.to_string().contains("secret-value"),
        "no values logged: {line}"
    );
    assert_eq!(
        sluice.log().matches("slow statement").count(),
        1,
        "only the slow one:\n{}",
        sluice.log()
    );
}

/// Runs `program script args...` from the script's directory; its stdout as JSON.
fn run_client(program: std::path::PathBuf, script: std::path::PathBuf, args: &[String]) -> Value {
    let mut command = std::process::Command::new(program);
    command
        .arg(&script)
        .args(args)
        .current_dir(script.parent().unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().expect("starting the client");
    let what = script.display().to_string();
    let out = crate::support::cli::finish(child, Vec::new(), Duration::from_secs(60), &what);
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    serde_json::from_str(out.stdout.trim()).expect("JSON")
}

/// The traceparent comments PyMySQL and mysql2 send (text queries, and mysql2's
/// prepared statement, whose executes continue the trace its prepare names) are
/// continued: each statement's span is under the caller's span, in the caller's trace.
#[test]
fn pymysql_and_mysql2_traces_are_continued() {
    let root = crate::support::repo_root();
    let python = super::drivers::require(
        root.join(".venv/bin/python"),
        "the Python virtual environment",
    );
    let node = sluice_sandbox::find_program(&["node", "nodejs"])
        .unwrap_or_else(|e| panic!("{e:#}; run `make test`, which installs Node.js"));
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let server = shared_server();
    table_t(server, "traced_drivers");
    let service = "sluice-drivers";
    let config = Config::for_server(server)
        .tracing("endpoint", jaeger.otlp_http_endpoint())
        .tracing("service_name", service)
        .tracing("sample_ratio", 0.0);
    let sluice = Sluice::start(&config);
    let common = |extra: &[&str]| -> Vec<String> {
        let port = sluice.port().to_string();
        let mut a: Vec<String> = [
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--user",
            NATIVE_USER,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(
            [
                "--password",
                NATIVE_PASSWORD,
                "--database",
                "traced_drivers",
            ]
            .map(String::from),
        );
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let span = "00f067aa0ba902b7";
    let (_, py_a) = traceparent(0x21, true);
    let (_, py_b) = traceparent(0x22, true);
    let out = run_client(
        python,
        root.join("tests/clients/python/tracing.py"),
        &common(&["--span", span, "--trace", &py_a, "--trace", &py_b]),
    );
    assert_eq!(out["rows"], serde_json::json!([["10"], ["20"]]), "{out}");
    let (_, js_query) = traceparent(0x31, true);
    let (_, js_execute) = traceparent(0x32, true);
    let traces = format!("{js_query},{js_execute}");
    let out = run_client(
        node,
        root.join("tests/clients/node/tracing.js"),
        &common(&["--span", span, "--traces", &traces]),
    );
    assert_eq!(out["query"], serde_json::json!(["10"]), "{out}");
    assert_eq!(out["execute"], serde_json::json!(["20"]), "{out}");

    let wanted = [&py_a, &py_b, &js_query, &js_execute];
    let spans = spans_once(&jaeger, service, &sluice, |spans| {
        wanted.iter().all(|id| has_root(spans, id))
    });
    for id in [&py_a, &py_b, &js_query] {
        let (root, children) = trace_of(&spans, id);
        assert_eq!(
            root["operationName"], "SELECT v FROM t WHERE id = ?",
            "{root:#}"
        );
        assert_eq!(tag(root, "sluice.command"), "COM_QUERY");
        assert!(names(&children).contains(&"server round trip".to_owned()));
    }
    // mysql2's execute: its prepare and its execute, both under the caller's span.
    let commands: Vec<&Value> = spans
        .iter()
        .filter(|s| s["traceID"] == js_execute.as_str() && span_parent(s) == Some(span))
        .map(|s| tag(s, "sluice.command"))
        .collect();
    assert!(
        commands.contains(&&Value::from("COM_STMT_PREPARE")),
        "{commands:?}"
    );
    assert!(
        commands.contains(&&Value::from("COM_STMT_EXECUTE")),
        "{commands:?}"
    );
}

/// A read routed to a replica right after the session's write waits there for the
/// write's GTID: a `gtid wait` stage on that replica, caught up, inside the read's span.
#[test]
fn a_routed_read_after_a_write_shows_its_gtid_wait() {
    use super::routing::{config, login, replica_set};

    let set = replica_set(false);
    set.primary
        .execute("CREATE DATABASE traced_ryw; CREATE TABLE traced_ryw.t (id INT PRIMARY KEY)")
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let service = "sluice-gtid-wait";
    // No write hold: the read after the write is routed, not kept on the writer's
    // connection.
    let config = config(&set)
        .pool("write_hold", "0s")
        .routing("max_lag", "60s")
        .tracing("endpoint", jaeger.otlp_http_endpoint())
        .tracing("service_name", service)
        .tracing("sample_ratio", 0.0);
    let sluice = Sluice::start(&config);
    // Both replicas are readers before the first read.
    super::routing::wait_role(&sluice, &config, "replica1", "reader", 20);
    super::routing::wait_role(&sluice, &config, "replica2", "reader", 20);
    let mut c = login(&sluice);
    let (write, _) = traceparent(0x41, true);
    let (read, read_id) = traceparent(0x42, true);
    c.query(&commented("INSERT INTO traced_ryw.t VALUES (1)", &write))
        .unwrap()
        .expect_ok();
    let rows = c.query_rows(&commented(
        "SELECT COUNT(*) FROM traced_ryw.t WHERE id = 1",
        &read,
    ));
    assert_eq!(
        rows[0][0].as_deref(),
        Some("1"),
        "the read sees the session's write"
    );
    let spans = spans_once(&jaeger, service, &sluice, |s| has_root(s, &read_id));
    let (root, children) = trace_of(&spans, &read_id);
    // Part of the lease: the replica's connection is not the read's until it caught up.
    let lease = named(&children, "lease");
    let in_lease = children_of(&spans, lease);
    let wait = named(&in_lease, "gtid wait");
    within(lease, &in_lease);
    assert_eq!(tag(wait, "sluice.gtid.caught_up"), true);
    let replicas: Vec<String> = set.replicas.iter().map(|r| r.addr().to_string()).collect();
    let waited_on = tag(wait, "server.address").as_str().unwrap().to_owned();
    assert!(
        replicas.contains(&waited_on),
        "{waited_on} is not a replica: {replicas:?}"
    );
    assert_eq!(
        tag(root, "server.address").as_str(),
        Some(waited_on.as_str())
    );
    within(root, &children);
}

/// A traced session: its span from connect to quit, under it its login's, both naming
/// the session's id and user; a refused login's span says why.
#[test]
fn a_session_and_its_login_are_spans() {
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let server = shared_server();
    let service = "sluice-sessions";
    let config = Config::for_server(server)
        .tracing("endpoint", jaeger.otlp_http_endpoint())
        .tracing("service_name", service)
        .tracing("sample_ratio", 1.0);
    let sluice = Sluice::start(&config);
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    let id = c.query_rows("SELECT CONNECTION_ID()")[0][0]
        .clone()
        .unwrap();
    c.send_command(crate::support::wire::COM_QUIT, &[]).unwrap();
    drop(c);
    assert!(RawConn::login(sluice.addr(), NATIVE_USER, "wrong", None).is_err());
    let spans = spans_once(&jaeger, service, &sluice, |spans| {
        let n = |name: &str| spans.iter().filter(|s| s["operationName"] == name).count();
        n("session") >= 2 && n("login") >= 2
    });
    let session = spans
        .iter()
        .find(|s| s["operationName"] == "session" && span_tag(s, "error").is_none())
        .expect("the session that logged in");
    assert_eq!(tag(session, "sluice.session.id").to_string(), id);
    assert_eq!(tag(session, "db.user"), NATIVE_USER);
    let session_id = session["spanID"].as_str().unwrap();
    let login = spans
        .iter()
        .find(|s| s["operationName"] == "login" && span_parent(s) == Some(session_id))
        .expect("its login, under it");
    assert!(span_tag(login, "error").is_none(), "{login:#}");
    within(session, &[login]);
    let refused = spans
        .iter()
        .find(|s| s["operationName"] == "login" && span_tag(s, "error").is_some())
        .expect("the refused login");
    assert_eq!(tag(refused, "otel.status_code"), "ERROR");
}

/// Multiplexing off: a session with a connection of its own continues the caller's
/// trace the same way (no lease to wait for). A malformed `traceparent` is no parent:
/// the statement runs as it would directly and, sampled, starts a trace of its own.
#[test]
fn a_dedicated_session_is_traced_and_a_bad_traceparent_starts_its_own_trace() {
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let server = shared_server();
    table_t(server, "traced_dedicated");
    let service = "sluice-dedicated";
    let config = Config::for_server(server)
        .pool("multiplex", false)
        .tracing("endpoint", jaeger.otlp_http_endpoint())
        .tracing("service_name", service)
        .tracing("sample_ratio", 1.0);
    let sluice = Sluice::start(&config);
    let mut c = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
    c.query("USE traced_dedicated").unwrap().expect_ok();
    let (tp, trace_id) = traceparent(0x51, true);
    let read = "SELECT v FROM t WHERE id = 2";
    assert_eq!(
        c.query_rows(&commented(read, &tp))[0][0].as_deref(),
        Some("20")
    );
    let bad = read.replace("id = 2", "id = 1") + " /*traceparent='00-not-a-trace-id-01'*/";
    assert_eq!(c.query_rows(&bad)[0][0].as_deref(), Some("10"));
    let spans = spans_once(&jaeger, service, &sluice, |spans| {
        has_root(spans, &trace_id)
            && spans.iter().any(|s| {
                span_tag(s, "db.response.returned_rows").is_some() && span_parent(s).is_none()
            })
    });
    let (root, children) = trace_of(&spans, &trace_id);
    assert_eq!(names(&children), ["server round trip"], "{children:#?}");
    within(root, &children);
    // The bad one: a statement span with no parent, in a trace that is not the caller's.
    assert!(spans.iter().any(|s| {
        span_parent(s).is_none()
            && s["operationName"] == "SELECT v FROM t WHERE id = ?"
            && s["traceID"] != trace_id.as_str()
    }));
}
