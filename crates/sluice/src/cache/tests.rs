use super::*;

pub fn rule(name: &str, pattern: &str, ttl: Duration) -> RuleConfig {
    RuleConfig {
        name: name.into(),
        pattern: Some(pattern.into()),
        digest: None,
        user: None,
        schema: None,
        ttl,
        stale_while_revalidate: Duration::ZERO,
    }
}

pub fn entry_of(size: usize, cost: u64) -> Arc<Entry> {
    Arc::new(Entry {
        response: Bytes::from(vec![0u8; size]),
        filled_at: Instant::now(),
        rule: Arc::new(Rule::compile(rule("t", "x", Duration::from_secs(1))).unwrap()),
        digest: Arc::new(DigestStats::new(String::new(), 0)),
        snapshot: Snapshot::empty(),
        cost_micros: cost,
        rows: 0,
        refreshing: AtomicBool::new(false),
        read: AtomicBool::new(false),
    })
}

fn cache() -> Arc<QueryCache> {
    QueryCache::new(&CacheConfig {
        rules: vec![rule("all", "(?i)^select", Duration::from_secs(60))],
        ..Default::default()
    })
    .unwrap()
}

fn t(name: &str) -> TableRef {
    TableRef {
        schema: "db".into(),
        table: name.into(),
    }
}

/// A statement every test rule matches.
const ANY: Candidate<'static> = Candidate {
    text: b"select 1",
    user: "u",
    schema: None,
    shape: None,
};

/// Asks to fill `key` for a statement every test rule matches.
fn begin(c: &Arc<QueryCache>, key: &[u8]) -> Fill {
    let (rule, digest) = c.rule_for(&ANY).unwrap();
    c.begin_fill(key, None, rule, digest)
}

pub fn fill(c: &Arc<QueryCache>, key: &[u8], tables: &[TableRef]) -> FillTicket {
    if c.views_unknown() {
        c.set_views(Some(br#"[["db", "v"]]"#));
    }
    let (rule, digest) = c.rule_for(&ANY).unwrap();
    match c.begin_fill(key, None, rule, digest) {
        Fill::Leader(mut t) => {
            c.depend_on(&mut t, tables, None);
            t
        }
        Fill::Follower(_) | Fill::Declined => panic!("expected to lead"),
    }
}

#[test]
fn a_write_after_capture_makes_the_fill_unstorable_and_entries_stale() {
    let c = cache();
    let ticket = fill(&c, b"k1", &[t("a")]);
    c.invalidate_tables([&t("a")], Cause::Write);
    assert!(!c.store(ticket, vec![1, 2, 3]), "raced a write");
    assert!(matches!(c.lookup(b"k1"), Lookup::Miss));

    let ticket = fill(&c, b"k1", &[t("a"), t("b")]);
    assert!(c.store(ticket, vec![1, 2, 3]));
    assert!(matches!(c.lookup(b"k1"), Lookup::Hit(_)));
    c.invalidate_tables([&t("c")], Cause::Write);
    assert!(matches!(c.lookup(b"k1"), Lookup::Hit(_)));
    c.invalidate_tables([&t("b")], Cause::Binlog);
    assert!(matches!(c.lookup(b"k1"), Lookup::Miss));
    let rule = &c.rules.load()[0];
    assert_eq!(rule.stats.invalidated_by(Cause::Binlog), 1);
    assert_eq!(rule.stats.raced_by(Cause::Write), 1);
}

#[test]
fn second_asker_follows_and_is_released_when_the_leader_gives_up() {
    let c = cache();
    let leader = fill(&c, b"k", &[]);
    let Fill::Follower(flight) = begin(&c, b"k") else {
        panic!("expected to follow");
    };
    drop(leader);
    // A miss that reaches begin_fill after the entry was stored follows a flight
    // that is already over, and looks up again.
    let stored = fill(&c, b"stored", &[]);
    assert!(c.store(stored, vec![1]));
    let Fill::Follower(over) = begin(&c, b"stored") else {
        panic!("the entry is there: nothing to lead");
    };
    assert!(over.done.load(Ordering::Acquire));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    rt.block_on(flight.wait(Duration::from_secs(5)));
    assert!(started.elapsed() < Duration::from_secs(1));
    drop(fill(&c, b"k", &[]));
}

/// A follower already waiting is woken when the leader ends, not at its time limit.
#[test]
fn a_waiting_follower_is_woken_when_the_leader_ends() {
    let c = cache();
    let leader = fill(&c, b"k", &[]);
    let Fill::Follower(flight) = begin(&c, b"k") else {
        panic!("expected to follow");
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let waiting = flight.clone();
        let started = Instant::now();
        let follower = tokio::spawn(async move { waiting.wait(Duration::from_secs(5)).await });
        while flight.waiters.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        drop(leader);
        follower.await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
    });
}

#[test]
fn rules_match_by_text_user_and_schema_and_survive_unchanged_reloads() {
    let c = cache();
    let mut scoped = rule("scoped", "sbtest", Duration::from_secs(5));
    scoped.user = Some("app".into());
    scoped.schema = Some("shop".into());
    c.set_rules(vec![
        scoped.clone(),
        rule("all", "(?i)^select", Duration::from_secs(60)),
    ])
    .unwrap();
    let q = |user, schema| Candidate {
        text: b"SELECT * FROM sbtest1",
        user,
        schema,
        shape: None,
    };
    assert_eq!(
        c.rule_for(&q("app", Some("shop"))).unwrap().0.name(),
        "scoped"
    );
    assert_eq!(
        c.rule_for(&q("other", Some("shop"))).unwrap().0.name(),
        "all"
    );
    assert_eq!(c.rule_for(&q("app", None)).unwrap().0.name(), "all");
    let ticket = fill(&c, b"kept", &[]);
    assert!(c.store(ticket, vec![1]));
    c.set_rules(vec![rule("all", "(?i)^select", Duration::from_secs(60))])
        .unwrap();
    assert!(matches!(c.lookup(b"kept"), Lookup::Hit(_)));
    c.set_rules(vec![rule("all", "(?i)^select", Duration::from_secs(61))])
        .unwrap();
    assert!(matches!(c.lookup(b"kept"), Lookup::Miss));
    assert!(c
        .set_rules(vec![rule("bad", "(", Duration::from_secs(1))])
        .is_err());
}

/// A cache of one rule for every SELECT, with this TTL and a stale window of an hour.
pub fn stale_while_revalidate(ttl: Duration) -> Arc<QueryCache> {
    let mut r = rule("swr", "(?i)^select", ttl);
    r.stale_while_revalidate = Duration::from_secs(3600);
    QueryCache::new(&CacheConfig {
        rules: vec![r],
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn ttl_and_stale_while_revalidate() {
    let c = stale_while_revalidate(Duration::from_millis(30));
    let ticket = fill(&c, b"k", &[]);
    assert!(c.store(ticket, vec![1]));
    std::thread::sleep(Duration::from_millis(40));
    let Lookup::Stale {
        refresh: true,
        entry,
    } = c.lookup(b"k")
    else {
        panic!("stale, refresh")
    };
    assert!(matches!(
        c.lookup(b"k"),
        Lookup::Stale { refresh: false, .. }
    ));
    c.refresh_failed(&entry);
    assert!(matches!(
        c.lookup(b"k"),
        Lookup::Stale { refresh: true, .. }
    ));
}

#[test]
fn reads_through_views_depend_on_every_write() {
    let c = cache();
    let ticket = fill(&c, b"view", &[t("v")]);
    assert!(c.store(ticket, vec![1]));
    let ticket = fill(&c, b"table", &[t("a")]);
    assert!(c.store(ticket, vec![1]));
    c.invalidate_tables([&t("unrelated")], Cause::Binlog);
    assert!(matches!(c.lookup(b"view"), Lookup::Miss));
    assert!(matches!(c.lookup(b"table"), Lookup::Hit(_)));
    // Views unknown (after DDL): every read depends on every write.
    c.invalidate_all(Cause::Write);
    assert!(c.views_unknown());
    assert!(c.reads_view(&[t("a")]));
    c.set_views(Some(b"not json"));
    assert!(c.views_unknown());
    c.set_views(None);
    assert!(!c.reads_view(&[t("v")]), "no views at all");
}

#[test]
fn admin_scopes() {
    let c = cache();
    for (k, table) in [(&b"k1"[..], "a"), (b"k2", "b"), (b"k3", "b")] {
        let ticket = fill(&c, k, &[t(table)]);
        assert!(c.store(ticket, vec![0; 10]));
    }
    assert_eq!(c.invalidate(&Scope::Table(t("b"))), Ok(2));
    assert!(matches!(c.lookup(b"k1"), Lookup::Hit(_)));
    assert_eq!(c.invalidate(&Scope::Rule("all".into())), Ok(1));
    assert!(c.invalidate(&Scope::Rule("nope".into())).is_err());
    let ticket = fill(&c, b"k4", &[]);
    assert!(c.store(ticket, vec![0; 10]));
    assert_eq!(c.invalidate(&Scope::All), Ok(1));
    assert_eq!(c.store.usage(), (0, 0));
}

#[test]
fn a_fill_takes_the_hash_its_lookup_made_and_another_cache_finds_it_the_same() {
    // One seed per process: a hash worked out for one cache holds for another (a
    // session's cache replaced by a reload between its lookup and its fill).
    let (a, b) = (cache(), cache());
    let hashed = Hashed::new(b"k");
    assert!(matches!(a.lookup_hashed(hashed), Lookup::Miss));
    let (rule, digest) = b.rule_for(&ANY).unwrap();
    let Fill::Leader(mut ticket) = b.begin_fill(b"k", Some(hashed.key_hash()), rule, digest) else {
        panic!("expected to lead");
    };
    b.depend_on(&mut ticket, &[], None);
    assert!(b.store(ticket, vec![1]));
    // Stored under the key's own hash: a plain lookup, which hashes again, finds it.
    assert!(matches!(b.lookup(b"k"), Lookup::Hit(_)));
    assert!(matches!(a.lookup(b"k"), Lookup::Miss));
}

#[test]
fn a_remembered_rule_holds_until_the_rules_the_user_or_the_schema_change() {
    let c = cache();
    let in_db = RuleConfig {
        schema: Some("db".into()),
        ..rule("db only", "(?i)^select", Duration::from_secs(60))
    };
    c.set_rules(vec![in_db]).unwrap();
    let q = |schema| Candidate { schema, ..ANY };
    let name =
        |found: Option<(Arc<Rule>, Arc<DigestStats>)>| found.map(|(r, _)| r.config.name.clone());
    let mut memo = None;
    assert_eq!(
        name(c.rule_for_remembered(&q(Some("db")), &mut memo)),
        Some("db only".into())
    );
    // Kept: the same answer without matching again.
    assert_eq!(
        name(c.rule_for_remembered(&q(Some("db")), &mut memo)),
        Some("db only".into())
    );
    // Another schema: matched again, and no rule takes it.
    assert_eq!(
        name(c.rule_for_remembered(&q(Some("other")), &mut memo)),
        None
    );
    assert_eq!(
        name(c.rule_for_remembered(&q(Some("db")), &mut memo)),
        Some("db only".into())
    );
    // Rules replaced: the remembered one no longer counts.
    c.set_rules(vec![rule("all", "(?i)^select", Duration::from_secs(60))])
        .unwrap();
    assert_eq!(
        name(c.rule_for_remembered(&q(Some("db")), &mut memo)),
        Some("all".into())
    );
    let other_user = Candidate {
        user: "v",
        ..q(Some("db"))
    };
    c.set_rules(vec![RuleConfig {
        user: Some("u".into()),
        ..rule("u only", "(?i)^select", Duration::from_secs(60))
    }])
    .unwrap();
    assert_eq!(
        name(c.rule_for_remembered(&q(Some("db")), &mut memo)),
        Some("u only".into())
    );
    assert_eq!(name(c.rule_for_remembered(&other_user, &mut memo)), None);
}
