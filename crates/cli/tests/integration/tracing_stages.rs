//! The stages of a statement's span that only a busy pool, shards or a failover bring
//! out, read back from a real Jaeger: the wait in the pool's queue and the session's
//! sync inside the lease, one child per shard of a scattered read, and the replay of a
//! transaction on the new writer.

use super::tracing::{
    children_of, commented, has_root, micros, named, names, spans_once, tag, trace_of, traceparent,
    within,
};
use crate::support::wire::RawConn;
use crate::support::{
    admin_json, fresh_database, shared_server, wait_until, Config, Sluice, NATIVE_PASSWORD,
    NATIVE_USER,
};
use serde_json::Value;
use sluice_sandbox::jaeger::Jaeger;
use std::time::{Duration, Instant};

const TOKEN: &str = "trace-t0ken";

/// A traced Sluice (every span sampled by its caller only) with one backend connection,
/// which `holder`, a session of `holder_db`, holds in a transaction, as the pool says;
/// `waiter` is a session of `waiter_db`, whose next statement must wait for it.
struct HeldPool {
    jaeger: Jaeger,
    sluice: Sluice,
    admin: String,
    holder: RawConn,
    waiter: RawConn,
}

impl HeldPool {
    fn start(service: &str, queue_timeout: &str, waiter_db: &str, holder_db: &str) -> HeldPool {
        let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
        let server = shared_server();
        fresh_database(server, waiter_db);
        if holder_db != waiter_db {
            fresh_database(server, holder_db);
        }
        let config = Config::for_server(server)
            .pool("multiplex", true)
            .pool("max_connections", 1)
            .pool("queue_timeout", queue_timeout)
            .pool("write_hold", "0s")
            .tracing("endpoint", jaeger.otlp_http_endpoint())
            .tracing("service_name", service)
            .tracing("sample_ratio", 0.0)
            .admin(TOKEN);
        let admin = config.admin_address().unwrap();
        let sluice = Sluice::start(&config);
        let login = |db: &str| {
            RawConn::login(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD, Some(db))
                .unwrap_or_else(|e| panic!("{e:?}\n{}", sluice.log()))
        };
        let waiter = login(waiter_db);
        let mut holder = login(holder_db);
        holder.query("BEGIN").unwrap().expect_ok();
        holder.query_rows("SELECT 1");
        let pool = || admin_json(&admin, TOKEN, "/v1/pool");
        assert!(
            wait_until(Duration::from_secs(10), || pool()["sessions_pinned"] == 1),
            "{}",
            pool()
        );
        HeldPool {
            jaeger,
            sluice,
            admin,
            holder,
            waiter,
        }
    }
}

/// One backend connection, held by a transaction: another session's statement waits in
/// the pool's queue for as long as the transaction goes on, then syncs its schema onto
/// the connection. Both are children of its lease, the queue wait as long as the wait.
#[test]
fn a_statement_behind_a_held_connection_shows_its_queue_wait_and_sync() {
    let service = "sluice-queue-wait";
    let held = HeldPool::start(service, "10s", "traced_queue_a", "traced_queue_b");
    let (jaeger, sluice, server) = (&held.jaeger, &held.sluice, shared_server());
    let (mut holder, mut waiter) = (held.holder, held.waiter);
    let pool = || admin_json(&held.admin, TOKEN, "/v1/pool");

    let (tp, trace_id) = traceparent(0x61, true);
    let sent = Instant::now();
    let waiting = std::thread::spawn(move || {
        let rows = waiter.query_rows(&commented("SELECT DATABASE()", &tp));
        (rows, sent.elapsed())
    });
    let queued = wait_until(Duration::from_secs(10), || {
        pool()["servers"][0]["queue"]["waiting"] == 1
    });
    assert!(queued, "the statement never queued: {}", pool());
    // The transaction goes on for 300 ms more, the statement waiting all along.
    holder.query_rows("SELECT SLEEP(0.3)");
    holder.query("COMMIT").unwrap().expect_ok();
    let (rows, took) = waiting.join().unwrap();
    assert_eq!(rows[0][0].as_deref(), Some("traced_queue_a"));

    let spans = spans_once(jaeger, service, sluice, |s| has_root(s, &trace_id));
    let (root, children) = trace_of(&spans, &trace_id);
    let lease = named(&children, "lease");
    let in_lease = children_of(&spans, lease);
    assert_eq!(names(&in_lease), ["queue wait", "session sync"]);
    within(lease, &in_lease);
    let queue = named(&in_lease, "queue wait");
    let waited = Duration::from_micros(micros(queue));
    assert!(
        waited >= Duration::from_millis(300) && waited <= took,
        "queue wait {waited:?}, the statement took {took:?}: {queue:#}"
    );
    assert_eq!(tag(queue, "sluice.pool.opened"), false);
    assert_eq!(
        tag(queue, "server.address"),
        &Value::from(server.addr().to_string())
    );
    // The sync follows the wait: the connection comes from the other schema.
    let sync = named(&in_lease, "session sync");
    let queue_end = queue["startTime"].as_u64().unwrap() + micros(queue);
    assert!(sync["startTime"].as_u64().unwrap() >= queue_end, "{sync:#}");
    within(root, &children);
}

/// The queue's timeout: Sluice itself answers error 9001, and the span says so with
/// the code and SQL state the client got, as it does for a server's error.
#[test]
fn an_error_sluice_answers_itself_carries_its_code() {
    let service = "sluice-queue-timeout";
    let db = "traced_queue_timeout";
    let held = HeldPool::start(service, "200ms", db, db);
    let (jaeger, sluice) = (&held.jaeger, &held.sluice);
    let (mut holder, mut waiter) = (held.holder, held.waiter);

    let (tp, trace_id) = traceparent(0x62, true);
    let reply = waiter.query(&commented("SELECT 1", &tp)).unwrap();
    let err = reply.expect_err();
    assert_eq!(err.code, 9001, "{}", err.message);
    let state = err.state.clone();

    let spans = spans_once(jaeger, service, sluice, |s| has_root(s, &trace_id));
    let (root, _) = trace_of(&spans, &trace_id);
    assert_eq!(tag(root, "otel.status_code"), "ERROR");
    assert_eq!(tag(root, "db.response.status_code"), "9001");
    assert_eq!(tag(root, "error.type"), "9001");
    assert_eq!(tag(root, "sluice.sql_state"), &Value::from(state.clone()));
    assert_eq!(
        tag(root, "otel.status_description"),
        &Value::from(format!("Sluice answered error 9001 ({state})"))
    );
    holder.query("COMMIT").unwrap().expect_ok();
}

/// A read no key decides runs on both shards: one `shard` child each, naming the shard,
/// its server and the rows it sent, with the lease of that shard's connection under it.
#[test]
fn a_scattered_read_has_a_child_per_shard() {
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let service = "sluice-scatter";
    let endpoint = jaeger.otlp_http_endpoint();
    let (a, b, sluice, _) = super::sharding::start_adjusted(&[], |c| {
        c.tracing("endpoint", endpoint)
            .tracing("service_name", service)
            .tracing("sample_ratio", 0.0)
    });
    let mut c = crate::routing::login(&sluice);
    for id in 1..=12 {
        c.query(&format!("INSERT INTO shop.orders VALUES ({id}, 'o{id}')"))
            .unwrap()
            .expect_ok();
    }
    let on = |s: &sluice_sandbox::MariaDb| super::sharding::ids(s, "orders").len() as i64;
    let (on_a, on_b) = (on(&a), on(&b));
    assert!(
        on_a > 0 && on_b > 0,
        "both shards hold rows: {on_a}, {on_b}"
    );
    let (tp, trace_id) = traceparent(0x71, true);
    let rows = c.query_rows(&commented("SELECT id, v FROM shop.orders", &tp));
    assert_eq!(rows.len(), 12);

    let spans = spans_once(&jaeger, service, &sluice, |s| has_root(s, &trace_id));
    let (root, children) = trace_of(&spans, &trace_id);
    assert_eq!(names(&children), ["shard", "shard"], "{children:#?}");
    within(root, &children);
    let shard = |name: &str| {
        *children
            .iter()
            .find(|s| tag(s, "sluice.shard") == name)
            .unwrap_or_else(|| panic!("no shard {name}: {children:#?}"))
    };
    for (name, server, count) in [("s1", &a, on_a), ("s2", &b, on_b)] {
        let part = shard(name);
        assert_eq!(
            tag(part, "server.address"),
            &Value::from(server.addr().to_string())
        );
        assert_eq!(tag(part, "db.response.returned_rows"), count, "{part:#}");
        let inside = children_of(&spans, part);
        named(&inside, "lease");
        within(part, &inside);
    }
    assert_eq!(tag(root, "db.response.returned_rows"), 12);
}

/// The writer is killed under an open transaction: the session's next statement runs
/// the transaction again on the new writer first, a `replay` child naming that server
/// and what it ran.
#[test]
fn a_replayed_transaction_is_a_child_of_the_statement_that_carried_it() {
    let jaeger = Jaeger::start().expect("starting Jaeger (make deps builds it)");
    let service = "sluice-replay";
    let endpoint = jaeger.otlp_http_endpoint();
    let (set, _config, sluice) = super::replay::start_configured("ROW", "", |c| {
        c.failover("wrap_autocommit_writes", false)
            .tracing("endpoint", endpoint)
            .tracing("service_name", service)
            .tracing("sample_ratio", 0.0)
    });
    let mut kept = crate::routing::login(&sluice);
    kept.query("BEGIN").unwrap().expect_ok();
    kept.query("INSERT INTO rp.t VALUES (2, 20)")
        .unwrap()
        .expect_ok();
    set.primary.kill().unwrap();
    let (tp, trace_id) = traceparent(0x81, true);
    kept.query(&commented("INSERT INTO rp.t VALUES (3, 30)", &tp))
        .unwrap_or_else(|e| panic!("{e}\n{}", sluice.log()))
        .expect_ok();
    kept.query("COMMIT").unwrap().expect_ok();

    let spans = spans_once(&jaeger, service, &sluice, |s| has_root(s, &trace_id));
    let (root, children) = trace_of(&spans, &trace_id);
    within(root, &children);
    let replay = named(&children, "replay");
    assert_eq!(tag(replay, "sluice.replay.plan"), "transaction");
    assert_eq!(tag(replay, "sluice.replay.outcome"), "carried");
    // BEGIN and the INSERT before the statement.
    assert_eq!(tag(replay, "sluice.replay.statements"), 2, "{replay:#}");
    let replicas: Vec<String> = set.replicas.iter().map(|r| r.addr().to_string()).collect();
    let on = tag(replay, "server.address").as_str().unwrap();
    assert!(replicas.iter().any(|r| r == on), "{on} is not a replica");
    // Then the statement itself, on the same server.
    let round_trip = named(&children, "server round trip");
    assert_eq!(tag(round_trip, "server.address").as_str(), Some(on));
    assert!(round_trip["startTime"].as_u64() >= replay["startTime"].as_u64());
}
