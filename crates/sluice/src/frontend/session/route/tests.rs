//! The route stage without a server: a statement and the session's state built here,
//! over routers whose members' states are set by hand. A server pool spawns its reaper:
//! the routers are built on a runtime.

use super::*;
use crate::classify::effects::effects;
use crate::router::config::{RouteRuleConfig, RoutingConfig, RuleError};
use crate::router::tests::{cluster, member, router};

/// A text query of a session outside a transaction, with no write of its own yet.
fn query(text: &str) -> (Effects, String) {
    (effects(text.as_bytes()), text.to_owned())
}

fn facts<'a>(command: Command, text: &'a str, fx: &'a Effects) -> ToRoute<'a> {
    ToRoute {
        command,
        text: Some(text.as_bytes()),
        fx,
        prepared_read: false,
        cursor: false,
        in_transaction: false,
        user: "app",
        schema: Some(b"shop"),
        client: "127.0.0.1".parse().unwrap(),
        home: None,
        last_gtid: None,
        cached: false,
    }
}

fn target(router: &Router, s: &ToRoute<'_>) -> Target {
    decide_route(router, &router.rules.load(), s, &mut TextFacts::default())
        .expect("not refused")
        .target
}

fn rule(name: &str, pattern: &str, f: impl FnOnce(&mut RouteRuleConfig)) -> RouteRuleConfig {
    let mut r = RouteRuleConfig {
        name: name.into(),
        pattern: Some(pattern.into()),
        digest: None,
        user: None,
        schema: None,
        client_address: None,
        route: None,
        error: None,
        timeout: None,
        consistency: None,
    };
    f(&mut r);
    r
}

#[tokio::test]
async fn one_server_and_no_rules_send_everything_to_the_writer_unread() {
    let alone = router(vec![member("only", |_| {})], RoutingConfig::default());
    let (fx, text) = query("SELECT c FROM t WHERE id = 1");
    let mut read = TextFacts::default();
    let routed = decide_route(
        &alone,
        &alone.rules.load(),
        &facts(Command::Query, &text, &fx),
        &mut read,
    )
    .unwrap();
    assert_eq!(routed.target, Target::Writer);
    // Nothing read the text: the cache reads it, if it asks.
    assert_eq!(format!("{read:?}"), format!("{:?}", TextFacts::default()));
}

#[tokio::test]
async fn plain_reads_go_to_readers_and_the_rest_to_the_writer() {
    let (_, _, _, set) = cluster(RoutingConfig::default());
    for sql in [
        "SELECT c FROM t WHERE id = 1",
        "select /* a comment */ count(*) from t",
    ] {
        let (fx, text) = query(sql);
        let s = facts(Command::Query, &text, &fx);
        assert_eq!(target(&set, &s), Target::Reader { need: None }, "{sql}");
    }
    for sql in [
        "UPDATE t SET c = 1",
        "SELECT c FROM t WHERE id = 1 FOR UPDATE",
        "SELECT GET_LOCK('x', 1)",
        "SELECT LAST_INSERT_ID()",
        "SELECT NEXTVAL(s)",
        "SELECT @a := 1",
        "SET @a = 1",
        "BEGIN",
    ] {
        let (fx, text) = query(sql);
        let s = facts(Command::Query, &text, &fx);
        assert_eq!(target(&set, &s), Target::Writer, "{sql}");
    }
}

#[tokio::test]
async fn a_transaction_stays_on_the_writer_and_reads_see_the_sessions_writes() {
    let (_, _, _, set) = cluster(RoutingConfig::default());
    let (fx, text) = query("SELECT c FROM t WHERE id = 1");
    let in_trx = ToRoute {
        in_transaction: true,
        ..facts(Command::Query, &text, &fx)
    };
    assert_eq!(target(&set, &in_trx), Target::Writer);
    let wrote = GtidPos::parse("0-1-42").unwrap();
    let after_write = ToRoute {
        last_gtid: Some(&wrote),
        ..facts(Command::Query, &text, &fx)
    };
    assert_eq!(
        target(&set, &after_write),
        Target::Reader {
            need: Some(wrote.clone())
        }
    );
    // A read that fills the shared cache must also see what the binlog reader saw.
    let seen = GtidPos::parse("0-1-50").unwrap();
    set.note_binlog(&seen);
    let filling = ToRoute {
        cached: true,
        ..after_write
    };
    assert_eq!(target(&set, &filling), Target::Reader { need: Some(seen) });
}

#[tokio::test]
async fn an_execute_routes_by_its_prepared_statement_and_a_cursor_pins_the_writer() {
    let (_, _, _, set) = cluster(RoutingConfig::default());
    let fx = Effects::default();
    let read = ToRoute {
        prepared_read: true,
        ..facts(Command::StmtExecute, "SELECT c FROM t WHERE id = ?", &fx)
    };
    assert_eq!(target(&set, &read), Target::Reader { need: None });
    let cursor = ToRoute {
        cursor: true,
        ..read
    };
    assert_eq!(target(&set, &cursor), Target::Writer);
    let write = ToRoute {
        prepared_read: false,
        ..cursor
    };
    assert_eq!(target(&set, &write), Target::Writer);
}

#[tokio::test]
async fn hints_and_rules_decide_before_the_statement_kind_and_a_refusal_is_counted() {
    let routing = RoutingConfig {
        rules: vec![
            rule("reports", "(?i)FROM reports", |r| {
                r.route = Some("writer".into());
                r.timeout = Some(Duration::from_secs(3));
            }),
            rule("no-drop", "(?i)^DROP", |r| {
                r.error = Some(RuleError {
                    code: 1148,
                    state: "42000".into(),
                    message: "not here".into(),
                });
            }),
        ],
        ..RoutingConfig::default()
    };
    let (_, _, _, set) = cluster(routing);
    let (fx, text) = query("SELECT * FROM reports");
    let routed = decide_route(
        &set,
        &set.rules.load(),
        &facts(Command::Query, &text, &fx),
        &mut TextFacts::default(),
    )
    .unwrap();
    assert_eq!(routed.target, Target::Writer);
    assert_eq!(routed.timeout, Some(Duration::from_secs(3)));
    let (fx, text) = query("/* sluice: writer */ SELECT c FROM t");
    assert_eq!(
        target(&set, &facts(Command::Query, &text, &fx)),
        Target::Writer
    );
    let (fx, text) = query("DROP TABLE t");
    let blocked = set.stats.blocked.load(std::sync::atomic::Ordering::Relaxed);
    let err = decide_route(
        &set,
        &set.rules.load(),
        &facts(Command::Query, &text, &fx),
        &mut TextFacts::default(),
    )
    .unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (1148, "not here"));
    assert_eq!(
        set.stats.blocked.load(std::sync::atomic::Ordering::Relaxed),
        blocked + 1
    );
}
