use super::*;

#[test]
fn invalidate_bodies() {
    let parse = |s: &str| parse_invalidate(&serde_json::from_str(s).unwrap());
    assert_eq!(parse(r#"{"all":true}"#), Ok(Invalidate::All));
    assert_eq!(
        parse(r#"{"rule":"hot"}"#),
        Ok(Invalidate::Rule("hot".into()))
    );
    assert_eq!(
        parse(r#"{"table":"`shop`.orders"}"#),
        Ok(Invalidate::Table {
            schema: "shop".into(),
            table: "orders".into()
        })
    );
    assert_eq!(
        parse(r#"{"digest":"ab12"}"#),
        Ok(Invalidate::Digest("ab12".into()))
    );
    for bad in [
        r#"{"all":false}"#,
        r#"{"table":"orders"}"#,
        r#"{"table":".orders"}"#,
        r#"{"rule":""}"#,
        r#"{"rule":3}"#,
        r#"{"all":true,"rule":"x"}"#,
        r#"{}"#,
        r#"[]"#,
        r#"{"colour":"red"}"#,
    ] {
        assert!(parse(bad).is_err(), "{bad} was accepted");
    }
}

#[test]
fn bearer_header() {
    assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
    assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
    assert_eq!(bearer(b"Basic abc"), None);
    assert_eq!(bearer(b"Bear"), None);
}

#[test]
fn token_comparison() {
    let key = TokenKey::new(&Secret("s3cret".into()));
    assert!(key.matches(b"s3cret"));
    assert!(!key.matches(b"s3cres"));
    assert!(!key.matches(b"s3cret-and-more"));
    assert!(!key.matches(b""));
}

#[test]
fn start_serves_only_with_a_token() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let state = || AdminState {
        fleet: None,
        cache: None,
        sessions: None,
        servers: None,
        analytics: None,
        reload: None,
        upgrade: None,
        stats: Arc::new(Stats::default()),
    };
    let (trigger, shutdown) = crate::shutdown::channel();
    let mut cfg = AdminConfig {
        address: "127.0.0.1:0".into(),
        ..AdminConfig::default()
    };
    if std::env::var_os(config::ADMIN_TOKEN_ENV).is_none() {
        let off = runtime.block_on(start(&cfg, state(), shutdown.clone(), None));
        assert!(off.unwrap().is_none());
    }
    cfg.token = Some(Secret("t".into()));
    let started = runtime
        .block_on(start(&cfg, state(), shutdown, None))
        .unwrap()
        .expect("a token turns the API on");
    let (address, task) = (started.address, started.task);
    let answer = {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .write_all(
                b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n",
            )
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    trigger.trigger();
    runtime.block_on(task).unwrap();
}
