//! The admin API over real HTTP on loopback, served by `sluice::admin::serve` with a fake
//! cache that records its calls; the real `sluice admin` command against it; and
//! `sluice check-config` on `[admin]` mistakes.

use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::support::http::{Client, Response};
use serde_json::{json, Value};
use sluice::admin::{self, AdminState, CacheAdmin, Invalidate, WarmFuture};
use sluice::config::{AdminConfig, Secret};
use sluice::shutdown::{self, ShutdownTrigger};
use sluice::stats::Stats;

use crate::support::cli::{finish, CliOutput};
use crate::support::proxy::{run_sluice, SLUICE_BIN};

const TOKEN: &str = "test-admin-token-0123456789";

/// Stands in for the query cache: fixed statistics, rules kept in memory, every call
/// recorded so tests can tell what reached it.
#[derive(Default)]
struct FakeCache {
    calls: Mutex<Vec<String>>,
    rules: Mutex<Value>,
}

impl FakeCache {
    fn record(&self, call: impl Into<String>) {
        self.calls.lock().unwrap().push(call.into());
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn stats_json() -> Value {
        json!({
            "enabled": true,
            "totals": {"hits": 1234, "misses": 56, "entries": 78, "bytes": 90123},
            "binlog": {"state": "following", "file": "bin.000007", "position": 4242},
            "rules": [
                {"name": "hot_products", "hits": 1000, "misses": 6, "ttl": "30s"},
                {"name": "user_lookup", "hits": 234, "misses": 50, "ttl": "5m"},
            ],
            "digests": [
                {"digest": "d1", "hits": 7, "text": "SELECT name FROM users WHERE id = ?"},
                {"digest": "d2", "hits": 999, "text": "SELECT * FROM products WHERE category = ?"},
                {"digest": "d3", "hits": 228, "text": "SELECT 1"},
            ],
        })
    }
}

impl CacheAdmin for FakeCache {
    fn stats(&self) -> Value {
        self.record("stats");
        FakeCache::stats_json()
    }

    fn rules(&self) -> Value {
        self.record("rules");
        self.rules.lock().unwrap().clone()
    }

    fn set_rules(&self, rules: Value) -> Result<(), Vec<String>> {
        self.record(format!("set_rules {rules}"));
        let problems: Vec<String> = rules
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, r)| r.get("name").and_then(Value::as_str).is_none())
            .map(|(i, _)| format!("rules[{i}]: name is missing"))
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        *self.rules.lock().unwrap() = rules;
        Ok(())
    }

    fn invalidate(&self, what: Invalidate) -> Result<u64, String> {
        self.record(format!(
            "invalidate {}",
            serde_json::to_string(&what).unwrap()
        ));
        match what {
            Invalidate::All => Ok(10),
            Invalidate::Rule(name) if name == "missing" => Err("no rule named missing".into()),
            Invalidate::Rule(_) => Ok(3),
            Invalidate::Table { .. } => Ok(2),
            Invalidate::Digest(_) => Ok(1),
        }
    }

    fn warm(&self, file: Option<std::path::PathBuf>) -> WarmFuture {
        self.record(format!("warm {file:?}"));
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            match file {
                Some(f) if f.ends_with("unreadable.sql") => {
                    Err(format!("cannot read {}", f.display()))
                }
                file => Ok(json!({"file": file, "queries": 5, "cached": 4, "failed": 1})),
            }
        })
    }
}

/// An admin server on a loopback port of its own, on its own runtime.
struct AdminServer {
    runtime: Option<tokio::runtime::Runtime>,
    address: String,
    trigger: ShutdownTrigger,
    task: Option<tokio::task::JoinHandle<()>>,
    cache: Arc<FakeCache>,
}

impl AdminServer {
    fn start(with_cache: bool) -> AdminServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let cache = Arc::new(FakeCache::default());
        *cache.rules.lock().unwrap() = json!([{"name": "hot_products", "ttl": "30s"}]);
        let stats = Arc::new(Stats::default());
        stats.commands.store(4242, Ordering::Relaxed);
        stats.client_connections.store(17, Ordering::Relaxed);
        let state = AdminState {
            fleet: None,
            cache: with_cache.then(|| cache.clone() as Arc<dyn CacheAdmin>),
            sessions: None,
            servers: None,
            analytics: None,
            reload: None,
            upgrade: None,
            stats,
        };
        let config = AdminConfig {
            // Port 0: the test learns the real one from the listener, no race for it.
            address: "127.0.0.1:0".into(),
            ..AdminConfig::default()
        };
        let (trigger, shutdown) = shutdown::channel();
        let listener = runtime.block_on(admin::bind(&config)).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let task = runtime.spawn(async move {
            admin::serve(listener, Secret(TOKEN.into()), state, shutdown)
                .await
                .unwrap();
        });
        AdminServer {
            runtime: Some(runtime),
            address,
            trigger,
            task: Some(task),
            cache,
        }
    }

    fn client(&self, token: Option<&str>) -> Client {
        let mut client = Client::new(self.address.clone(), token.map(|t| Secret(t.into())));
        client.io_timeout = Duration::from_secs(10);
        client
    }

    fn authed(&self) -> Client {
        self.client(Some(TOKEN))
    }

    /// `sluice admin --address ADDR ARGS...` with nothing from the environment.
    fn cli(&self, args: &[&str]) -> CliOutput {
        let mut all = vec!["admin", "--address", &self.address];
        all.extend_from_slice(args);
        run_admin(&all, &[])
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.trigger.trigger();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

fn run_admin(args: &[&str], env: &[(&str, &str)]) -> CliOutput {
    let mut command = Command::new(SLUICE_BIN);
    command
        .args(args)
        .env_remove("SLUICE_ADMIN_TOKEN")
        .env_remove("SLUICE_CONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("starting sluice admin");
    finish(
        child,
        Vec::new(),
        Duration::from_secs(30),
        &format!("sluice {args:?}"),
    )
}

#[track_caller]
fn json_of(response: &Response) -> Value {
    response.json().unwrap_or_else(|e| {
        panic!(
            "{} with a body that is not JSON ({e}): {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        )
    })
}

#[track_caller]
fn expect(response: Response, status: u16) -> Value {
    let body = json_of(&response);
    assert_eq!(response.status, status, "{body}");
    assert!(
        response
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{:?}",
        response.headers
    );
    body
}

#[test]
fn admin_endpoints_reach_the_cache() {
    let server = AdminServer::start(true);
    let client = server.authed();

    let stats = expect(client.get("/v1/stats").unwrap(), 200);
    assert_eq!(stats["sluice_commands_total"], 4242, "{stats}");
    assert_eq!(stats["sluice_client_connections_total"], 17, "{stats}");

    assert_eq!(
        expect(client.get("/v1/cache/stats").unwrap(), 200),
        FakeCache::stats_json()
    );
    assert_eq!(
        expect(client.get("/v1/cache/rules").unwrap(), 200),
        json!([{"name": "hot_products", "ttl": "30s"}])
    );

    let rules = json!([{"name": "a", "ttl": "10s"}, {"name": "b", "ttl": "1m"}]);
    let answer = expect(
        client.send_json("PUT", "/v1/cache/rules", &rules).unwrap(),
        200,
    );
    assert_eq!(answer, json!({"rules": 2}));
    assert_eq!(expect(client.get("/v1/cache/rules").unwrap(), 200), rules);

    // Every problem comes back, and nothing changes.
    let bad = json!([{"ttl": "1s"}, {"name": "ok"}, {"ttl": "2s"}]);
    let answer = expect(
        client.send_json("PUT", "/v1/cache/rules", &bad).unwrap(),
        400,
    );
    assert_eq!(
        answer["errors"],
        json!(["rules[0]: name is missing", "rules[2]: name is missing"])
    );
    assert!(answer["error"].is_string(), "{answer}");
    assert_eq!(expect(client.get("/v1/cache/rules").unwrap(), 200), rules);
    let answer = expect(
        client
            .send_json("PUT", "/v1/cache/rules", &json!({"name": "x"}))
            .unwrap(),
        400,
    );
    assert!(
        answer["error"].as_str().unwrap().contains("array"),
        "{answer}"
    );

    for (body, count, recorded) in [
        (json!({"all": true}), 10, r#"invalidate "all""#),
        (json!({"rule": "hot"}), 3, r#"invalidate {"rule":"hot"}"#),
        (
            json!({"table": "shop.orders"}),
            2,
            r#"invalidate {"table":{"schema":"shop","table":"orders"}}"#,
        ),
        (
            json!({"digest": "abc123"}),
            1,
            r#"invalidate {"digest":"abc123"}"#,
        ),
    ] {
        let answer = expect(
            client
                .send_json("POST", "/v1/cache/invalidate", &body)
                .unwrap(),
            200,
        );
        assert_eq!(answer, json!({"invalidated": count}), "{body}");
        assert_eq!(server.cache.calls().last().unwrap(), recorded);
    }
    for body in [
        json!({"all": false}),
        json!({"table": "orders"}),
        json!({"rule": "a", "digest": "b"}),
        json!({"colour": "red"}),
    ] {
        let calls = server.cache.calls().len();
        let answer = expect(
            client
                .send_json("POST", "/v1/cache/invalidate", &body)
                .unwrap(),
            400,
        );
        assert!(answer["error"].is_string(), "{answer}");
        assert_eq!(
            server.cache.calls().len(),
            calls,
            "{body} reached the cache"
        );
    }
    // The cache's own refusal is passed on.
    let answer = expect(
        client
            .send_json("POST", "/v1/cache/invalidate", &json!({"rule": "missing"}))
            .unwrap(),
        400,
    );
    assert_eq!(answer["error"], "no rule named missing");

    let report = expect(
        client
            .send_json("POST", "/v1/cache/warm", &json!({}))
            .unwrap(),
        200,
    );
    assert_eq!(report["queries"], 5, "{report}");
    assert_eq!(server.cache.calls().last().unwrap(), "warm None");
    // No body at all means the configured file too.
    expect(client.request("POST", "/v1/cache/warm", None).unwrap(), 200);
    let report = expect(
        client
            .send_json(
                "POST",
                "/v1/cache/warm",
                &json!({"file": "/srv/queries.sql"}),
            )
            .unwrap(),
        200,
    );
    assert_eq!(report["file"], "/srv/queries.sql");
    assert_eq!(
        server.cache.calls().last().unwrap(),
        r#"warm Some("/srv/queries.sql")"#
    );
    let answer = expect(
        client
            .send_json(
                "POST",
                "/v1/cache/warm",
                &json!({"file": "/srv/unreadable.sql"}),
            )
            .unwrap(),
        400,
    );
    assert_eq!(answer["error"], "cannot read /srv/unreadable.sql");
    let answer = expect(
        client
            .send_json("POST", "/v1/cache/warm", &json!({"file": "relative.sql"}))
            .unwrap(),
        400,
    );
    assert!(
        answer["error"].as_str().unwrap().contains("absolute"),
        "{answer}"
    );
}

#[test]
fn admin_requires_the_token() {
    let server = AdminServer::start(true);
    let same_length = "x".repeat(TOKEN.len());
    let wrong_tokens = [
        None,
        Some(same_length.as_str()),
        Some("short"),
        Some("test-admin-token-0123456789-and-more"),
        Some(""),
    ];
    let requests: [(&str, &str, Option<&[u8]>); 7] = [
        ("GET", "/v1/stats", None),
        ("GET", "/v1/cache/stats", None),
        ("GET", "/v1/cache/rules", None),
        ("PUT", "/v1/cache/rules", Some(b"[]")),
        ("POST", "/v1/cache/invalidate", Some(br#"{"all":true}"#)),
        ("POST", "/v1/cache/warm", Some(b"{}")),
        ("GET", "/v1/no/such/path", None),
    ];
    for token in wrong_tokens {
        for (method, path, body) in requests {
            let response = server.client(token).request(method, path, body).unwrap();
            let answer = expect(response, 401);
            let keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["error"], "{method} {path} with {token:?}: {answer}");
        }
    }
    // Other schemes and a bare token are not a bearer token.
    for header in [
        format!("Basic {TOKEN}"),
        TOKEN.to_owned(),
        "Bearer".to_owned(),
    ] {
        let request = format!(
            "GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: {header}\r\nConnection: close\r\n\r\n"
        );
        let response = server.client(None).exchange(request.as_bytes()).unwrap();
        expect(response, 401);
    }
    assert_eq!(
        server.cache.calls(),
        Vec::<String>::new(),
        "the cache was reached without the token"
    );
    // The scheme is case-insensitive, as HTTP says.
    let request = format!(
        "GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    expect(
        server.client(None).exchange(request.as_bytes()).unwrap(),
        200,
    );
}

#[test]
fn admin_errors_are_json() {
    let server = AdminServer::start(true);
    let client = server.authed();

    let answer = expect(client.get("/v1/nothing").unwrap(), 404);
    assert!(answer["error"].is_string(), "{answer}");
    // The root leads to the dashboard.
    let root = client.get("/").unwrap();
    assert_eq!(root.status, 303);
    assert!(root
        .headers
        .iter()
        .any(|(k, v)| k == "location" && v == "/dashboard"));
    let answer = expect(
        client.request("DELETE", "/v1/cache/rules", None).unwrap(),
        405,
    );
    assert!(answer["error"].is_string(), "{answer}");

    for path in ["/v1/cache/rules", "/v1/cache/invalidate"] {
        let method = if path.ends_with("rules") {
            "PUT"
        } else {
            "POST"
        };
        let answer = expect(
            client
                .request(method, path, Some(b"{\"all\": tru"))
                .unwrap(),
            400,
        );
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains("invalid JSON"), "{error}");
        let answer = expect(client.request(method, path, Some(b"")).unwrap(), 400);
        assert!(answer["error"].is_string(), "{answer}");
    }

    let calls = server.cache.calls().len();
    // Announced too large: refused before the body is sent.
    let request = format!(
        "PUT /v1/cache/rules HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n[",
        100 << 20
    );
    let answer = expect(client.exchange(request.as_bytes()).unwrap(), 413);
    assert!(
        answer["error"].as_str().unwrap().contains("larger than"),
        "{answer}"
    );
    // Sent in chunks, so found too large only while reading.
    let mut request = format!(
        "PUT /v1/cache/rules HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    let chunk = vec![b' '; 64 << 10];
    for _ in 0..17 {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(&chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    expect(client.exchange(&request).unwrap(), 413);
    let mut huge = b"[".to_vec();
    while huge.len() < (1 << 20) + 1000 {
        huge.extend_from_slice(br#"{"name":"padding-padding-padding"},"#);
    }
    huge.extend_from_slice(br#"{"name":"last"}]"#);
    let answer = expect(
        client
            .request("PUT", "/v1/cache/rules", Some(&huge))
            .unwrap(),
        413,
    );
    assert!(
        answer["error"].as_str().unwrap().contains("larger than"),
        "{answer}"
    );
    assert_eq!(server.cache.calls().len(), calls);
    // The connection was closed, the server was not.
    expect(client.get("/v1/stats").unwrap(), 200);
}

#[test]
fn admin_without_a_cache() {
    let server = AdminServer::start(false);
    let client = server.authed();
    for (method, path, body) in [
        ("GET", "/v1/cache/stats", None),
        ("GET", "/v1/cache/rules", None),
        ("PUT", "/v1/cache/rules", Some(&b"[]"[..])),
        ("POST", "/v1/cache/invalidate", Some(br#"{"all":true}"#)),
        ("POST", "/v1/cache/warm", Some(b"{}")),
    ] {
        let answer = expect(client.request(method, path, body).unwrap(), 404);
        assert_eq!(answer, json!({"error": "no cache is configured"}), "{path}");
    }
    let stats = expect(client.get("/v1/stats").unwrap(), 200);
    assert_eq!(stats["sluice_commands_total"], 4242);
    let out = server.cli(&["--token", TOKEN, "cache", "stats"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no cache is configured"), "{out:?}");
}

#[test]
fn admin_stops_on_shutdown() {
    let mut server = AdminServer::start(true);
    expect(server.authed().get("/v1/stats").unwrap(), 200);
    server.trigger.trigger();
    let task = server.task.take().unwrap();
    let runtime = server.runtime.as_ref().unwrap();
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await })
        .expect("serve returned after shutdown")
        .unwrap();
    // The listening socket closes as the task ends; a connection racing that close may
    // be reset rather than refused, so the refusal is awaited briefly.
    let mut last = None;
    let refused = crate::support::wait_until(Duration::from_secs(2), || {
        let e = server.authed().get("/v1/stats").unwrap_err();
        let refused = matches!(e, crate::support::http::Error::Connect { .. });
        last = Some(e);
        refused
    });
    assert!(refused, "{:?}", last.map(|e| e.to_string()));
}

#[test]
fn admin_cli_prints_and_changes() {
    let server = AdminServer::start(true);
    let t = ["--token", TOKEN];

    let out = server.cli(&[&t[..], &["stats"]].concat());
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("sluice_commands_total") && l.trim_end().ends_with("4242")),
        "{}",
        out.stdout
    );

    let out = server.cli(&[&t[..], &["cache", "stats", "--top", "2"]].concat());
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = &out.stdout;
    for expected in [
        "Totals",
        "1234",
        "90123",
        "Binlog",
        "following",
        "Rules",
        "hot_products",
        "user_lookup",
        "Top 2 digests by hits (of 3)",
        "SELECT * FROM products WHERE category = ?",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    // Digests by hits: d2 (999) before d3 (228); d1 (7) is cut.
    let d2 = text.find("d2").unwrap();
    let d3 = text.find("d3").unwrap();
    assert!(d2 < d3 && !text.contains("d1 "), "{text}");
    assert!(text.find("Totals").unwrap() < text.find("Rules").unwrap());

    let out = server.cli(&[&t[..], &["cache", "stats", "--json"]].concat());
    assert_eq!(out.code, Some(0), "{out:?}");
    let parsed: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(parsed, FakeCache::stats_json());

    let out = server.cli(&[&t[..], &["cache", "rules"]].concat());
    assert_eq!(out.code, Some(0), "{out:?}");
    let parsed: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(parsed, json!([{"name": "hot_products", "ttl": "30s"}]));

    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("rules.toml");
    std::fs::write(
        &toml,
        "[[cache.rules]]\nname = \"from_toml\"\nttl = \"1m\"\ntables = [\"shop.orders\"]\n",
    )
    .unwrap();
    let out = server.cli(&[&t[..], &["cache", "set-rules", toml.to_str().unwrap()]].concat());
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("1 rule(s)"), "{out:?}");
    assert_eq!(
        *server.cache.rules.lock().unwrap(),
        json!([{"name": "from_toml", "ttl": "1m", "tables": ["shop.orders"]}])
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"[{"ttl": "1s"}]"#).unwrap();
    let out = server.cli(&[&t[..], &["cache", "set-rules", bad.to_str().unwrap()]].concat());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("rules[0]: name is missing"), "{out:?}");

    for (args, printed, recorded) in [
        (
            &["--all"][..],
            "invalidated 10 entries",
            r#"invalidate "all""#,
        ),
        (
            &["--rule", "hot"],
            "invalidated 3 entries",
            r#"invalidate {"rule":"hot"}"#,
        ),
        (
            &["--table", "shop.orders"],
            "invalidated 2 entries",
            r#"invalidate {"table":{"schema":"shop","table":"orders"}}"#,
        ),
        (
            &["--digest", "abc"],
            "invalidated 1 entry",
            r#"invalidate {"digest":"abc"}"#,
        ),
    ] {
        let out = server.cli(&[&t[..], &["cache", "invalidate"], args].concat());
        assert_eq!(out.code, Some(0), "{out:?}");
        assert_eq!(out.stdout.trim(), printed);
        assert_eq!(server.cache.calls().last().unwrap(), recorded);
    }
    let out = server.cli(&[&t[..], &["cache", "invalidate", "--rule", "missing"]].concat());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no rule named missing"), "{out:?}");
    // Exactly one of the choices.
    let out = server.cli(&[&t[..], &["cache", "invalidate"]].concat());
    assert_ne!(out.code, Some(0), "{out:?}");

    let out = server.cli(&[&t[..], &["cache", "warm", "--file", "/srv/q.sql"]].concat());
    assert_eq!(out.code, Some(0), "{out:?}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["file"], "/srv/q.sql");
    assert_eq!(
        server.cache.calls().last().unwrap(),
        r#"warm Some("/srv/q.sql")"#
    );
}

#[test]
fn admin_cli_finds_the_token_and_reports_failures() {
    let server = AdminServer::start(true);

    // From the environment, with the options after the subcommand.
    let out = run_admin(
        &["admin", "stats", "--address", &server.address],
        &[("SLUICE_ADMIN_TOKEN", TOKEN)],
    );
    assert_eq!(out.code, Some(0), "{out:?}");

    // From --config's [admin]: its address and its token file.
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[admin]\naddress = {:?}\ntoken_file = {:?}\n",
            server.address,
            token_file.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = run_admin(
        &[
            "admin",
            "--config",
            config.to_str().unwrap(),
            "stats",
            "--json",
        ],
        &[("SLUICE_ADMIN_TOKEN", "ignored-when-the-file-has-one")],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let stats: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(stats["sluice_commands_total"], 4242);

    let out = server.cli(&["--token", "wrong", "cache", "stats"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("401") && out.stderr.contains("wrong admin token"),
        "{out:?}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");

    let out = server.cli(&["cache", "stats"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no admin token"), "{out:?}");

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let out = run_admin(
        &["admin", "--address", &closed, "--token", TOKEN, "stats"],
        &[],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains(&closed), "{out:?}");
}

/// Collects what the process-wide tracing subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn admin_logs_requests_without_the_token() {
    // Process-wide (a thread-local one would miss the server's runtime threads); it also
    // sees the admin servers of tests running alongside, none of whose tokens may show.
    static LOG: OnceLock<Captured> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("sluice::admin=debug")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other subscriber");
        captured
    });
    let server = AdminServer::start(true);
    let wrong = "wrong-token-for-the-log-test";
    expect(server.authed().get("/v1/log-probe?secret=1").unwrap(), 404);
    expect(
        server.client(Some(wrong)).get("/v1/log-probe-401").unwrap(),
        401,
    );
    // The server logs a request once its answer is on its way: the client may read the
    // answer first.
    let logged = || String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    crate::support::wait_until(Duration::from_secs(10), || {
        let text = logged();
        text.contains(r#"path="/v1/log-probe" status=404"#)
            && text.contains(r#"path="/v1/log-probe-401" status=401"#)
    });
    let text = logged();
    assert!(
        text.contains(r#"method=GET path="/v1/log-probe" status=404"#),
        "{text}"
    );
    assert!(
        text.contains(r#"method=GET path="/v1/log-probe-401" status=401"#),
        "{text}"
    );
    for secret in [TOKEN, wrong, "secret=1"] {
        assert!(!text.contains(secret), "{secret} logged:\n{text}");
    }
}

fn check_config(admin: &str) -> CliOutput {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    std::fs::write(
        &path,
        format!(
            "[[listeners]]\naddress = \"127.0.0.1:6033\"\n\n\
             [[users]]\nname = \"app\"\npassword = \"pw\"\n\n\
             [[servers]]\naddress = \"127.0.0.1:3306\"\n\n\
             [admin]\n{admin}\n"
        ),
    )
    .unwrap();
    run_sluice(&["check-config", path.to_str().unwrap()])
}

#[test]
fn check_config_reports_admin_mistakes() {
    for (admin, problem) in [
        (
            "address = \"localhost\"",
            "admin.address: \"localhost\" is not an IP:port",
        ),
        ("address = \"0.0.0.0:6080\"", "not a loopback address"),
        ("address = \"192.0.2.1:6080\"", "admin.allow_remote"),
        ("token = \"\"", "admin.token is empty"),
        (
            "token = \"a\"\ntoken_file = \"/etc/hostname\"",
            "give token or token_file, not both",
        ),
        (
            "token_file = \"/nonexistent/admin-token\"",
            "cannot read /nonexistent/admin-token",
        ),
        ("tokn = \"x\"", "tokn"),
    ] {
        let out = check_config(admin);
        assert_ne!(out.code, Some(0), "{admin} passed: {out:?}");
        assert!(
            out.stderr.contains(problem),
            "{problem:?} not reported for {admin}:\n{}",
            out.stderr
        );
    }
    for admin in [
        "",
        "token = \"s3cret\"",
        "address = \"[::1]:6080\"\ntoken = \"s3cret\"",
        "address = \"0.0.0.0:6080\"\nallow_remote = true\ntoken = \"s3cret\"",
    ] {
        let out = check_config(admin);
        assert_eq!(out.code, Some(0), "{admin} was refused: {out:?}");
    }
    // The token is never echoed back.
    let out = check_config("token = \"has spaces in it\"");
    assert_ne!(out.code, Some(0));
    assert!(!out.stderr.contains("has spaces"), "{}", out.stderr);
}
