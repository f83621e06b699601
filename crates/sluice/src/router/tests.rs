use super::*;
use crate::backend::config::{PoolConfig, TlsMode};
use crate::backend::Server;
use crate::binlog::scan::Logged;
use commits::{InDoubt, Outcome};
use config::ServerConfig;

pub(crate) fn member(name: &str, f: impl FnOnce(&mut ServerConfig)) -> Arc<Member> {
    let mut cfg = ServerConfig::at(&format!("127.0.0.1:{}", 1000 + name.len()));
    cfg.name = Some(name.into());
    f(&mut cfg);
    let server = Arc::new(Server {
        name: name.into(),
        endpoint: cfg.endpoint(),
        tls: TlsMode::Disabled,
        tls_config: None,
        max_connections: 4,
        counters: Default::default(),
        stmts: Default::default(),
        globals: Default::default(),
        grants: Default::default(),
    });
    let pool = ServerPool::new(server, PoolConfig::default(), Default::default());
    Router::member(pool, &cfg, &RoutingConfig::default(), None)
}

fn set(m: &Member, f: impl FnOnce(&mut ServerState)) {
    let mut s = (*m.state.load_full()).clone();
    f(&mut s);
    m.state.store(Arc::new(s));
}

fn primary(m: &Member) {
    set(m, |s| {
        s.health = Health::Up;
        s.read_only = Some(false);
        s.replica = None;
    });
}

fn replica(m: &Member) {
    set(m, |s| {
        s.health = Health::Up;
        s.read_only = Some(true);
        s.replica = Some(ReplicaState {
            sql_running: true,
            ..Default::default()
        });
    });
}

pub(crate) fn router(members: Vec<Arc<Member>>, routing: RoutingConfig) -> Router {
    Router::new(
        members,
        routing,
        MonitorConfig::default(),
        FailoverConfig::default(),
    )
    .unwrap()
}

/// Members a (primary), b and c (replicas), and a router over them.
pub(crate) fn cluster(routing: RoutingConfig) -> (Arc<Member>, Arc<Member>, Arc<Member>, Router) {
    let (a, b, c) = (
        member("a", |_| {}),
        member("b", |_| {}),
        member("c", |_| {}),
    );
    primary(&a);
    replica(&b);
    replica(&c);
    let r = router(vec![a.clone(), b.clone(), c.clone()], routing);
    (a, b, c, r)
}

fn name(p: Option<Pick>) -> String {
    p.map(|p| p.member.name().to_owned()).unwrap_or_default()
}

#[tokio::test]
async fn the_writable_server_is_elected_and_kept_while_it_can_write() {
    let (a, b, c) = (
        member("a", |_| {}),
        member("b", |_| {}),
        member("c", |_| {}),
    );
    let r = router(
        vec![a.clone(), b.clone(), c.clone()],
        RoutingConfig::default(),
    );
    assert!(r.writer().is_none(), "nothing known yet");
    replica(&a);
    primary(&b);
    replica(&c);
    assert_eq!(r.elect().unwrap().name(), "b");
    // A second writable server (an old primary back) does not take over.
    primary(&a);
    assert_eq!(r.elect().unwrap().name(), "b");
    set(&b, |s| s.health = Health::Down);
    assert_eq!(r.elect().unwrap().name(), "a");
    a.fenced.store(true, Ordering::Relaxed);
    assert!(r.elect().is_none(), "replicas wait for a failover");
}

#[tokio::test]
async fn reads_go_to_healthy_in_lag_readers_and_fall_back_to_the_writer() {
    let (a, b, c, r) = cluster(RoutingConfig::default());
    let read = Target::Reader { need: None };
    for _ in 0..50 {
        assert_ne!(name(r.pick(&read)), "a");
    }
    set(&b, |s| s.lagging = true);
    for _ in 0..20 {
        assert_eq!(name(r.pick(&read)), "c");
    }
    set(&c, |s| s.health = Health::Down);
    assert_eq!(
        name(r.pick(&read)),
        "a",
        "the writer reads when no reader can"
    );
    assert_eq!(name(r.pick(&Target::Writer)), "a");
    assert_eq!(name(r.pick_excluding(&read, std::slice::from_ref(&a))), "");

    let always = router(
        vec![a.clone(), b.clone(), c.clone()],
        RoutingConfig {
            writer_reads: WriterReads::Always,
            ..Default::default()
        },
    );
    assert!(
        (0..200).any(|_| name(always.pick(&read)) == "a"),
        "the writer is one of the readers"
    );

    let never = router(
        vec![a.clone(), b.clone(), c.clone()],
        RoutingConfig {
            writer_reads: WriterReads::Never,
            ..Default::default()
        },
    );
    assert!(never.pick(&read).is_none());
}

#[tokio::test]
async fn reads_follow_weights_zone_and_the_gtid_they_need() {
    let a = member("a", |_| {});
    let b = member("b", |c| c.weight = 1);
    let c = member("c", |c| {
        c.weight = 3;
        c.zone = Some("z2".into());
    });
    primary(&a);
    replica(&b);
    replica(&c);
    let r = router(
        vec![a.clone(), b.clone(), c.clone()],
        RoutingConfig::default(),
    );
    let read = Target::Reader { need: None };
    let on_c = (0..4000).filter(|_| name(r.pick(&read)) == "c").count();
    assert!((2700..3300).contains(&on_c), "weight 3 of 4: {on_c}");

    let zoned = router(
        vec![a.clone(), b.clone(), c.clone()],
        RoutingConfig {
            zone: Some("z2".into()),
            ..Default::default()
        },
    );
    for _ in 0..20 {
        assert_eq!(name(zoned.pick(&read)), "c");
    }

    let need = GtidPos::parse("0-1-10").unwrap();
    b.note_applied(&GtidPos::parse("0-1-10").unwrap());
    c.note_applied(&GtidPos::parse("0-1-9").unwrap());
    let with_need = Target::Reader {
        need: Some(need.clone()),
    };
    for _ in 0..20 {
        let p = r.pick(&with_need).unwrap();
        assert_eq!(p.member.name(), "b", "only b has applied it");
        assert!(p.wait_for.is_none());
    }
    let further = Target::Reader {
        need: GtidPos::parse("0-1-11"),
    };
    let p = r.pick(&further).unwrap();
    assert_eq!(
        p.wait_for,
        GtidPos::parse("0-1-11"),
        "a reader waits for it"
    );
    let no_wait = router(
        vec![a.clone(), b.clone(), c.clone()],
        RoutingConfig {
            consistency_wait: Duration::ZERO,
            ..Default::default()
        },
    );
    assert_eq!(name(no_wait.pick(&further)), "a", "or the writer answers");
}

#[tokio::test]
async fn reads_need_the_sessions_write_or_every_write_through_sluice() {
    let (_a, _b, _c, r) = cluster(RoutingConfig::default());
    let mine = GtidPos::parse("0-1-7").unwrap();
    assert_eq!(r.needed_gtid(Consistency::None, Some(&mine)), None);
    assert_eq!(
        r.needed_gtid(Consistency::Session, Some(&mine)),
        Some(mine.clone())
    );
    assert_eq!(r.needed_gtid(Consistency::Session, None), None);
    assert_eq!(r.needed_gtid(Consistency::Global, None), None);
    r.note_write(&GtidPos::parse("0-1-9").unwrap());
    r.note_write(&GtidPos::parse("0-1-8").unwrap());
    assert_eq!(
        r.needed_gtid(Consistency::Global, None),
        GtidPos::parse("0-1-9"),
        "the latest write of any session"
    );
}

#[tokio::test]
async fn a_slow_reader_loses_its_share() {
    let (_a, b, c, r) = cluster(RoutingConfig::default());
    for _ in 0..40 {
        b.observe_ttfb(Duration::from_millis(20));
        c.observe_ttfb(Duration::from_micros(400));
    }
    let read = Target::Reader { need: None };
    let on_b = (0..1000).filter(|_| name(r.pick(&read)) == "b").count();
    assert!(
        on_b < 80,
        "50 times slower: chosen only to be measured, {on_b}"
    );
    for _ in 0..60 {
        b.observe_ttfb(Duration::from_micros(400));
    }
    let on_b = (0..1000).filter(|_| name(r.pick(&read)) == "b").count();
    assert!(
        (400..600).contains(&on_b),
        "fast again: half the reads, {on_b}"
    );
}

#[tokio::test]
async fn galera_nodes_write_one_at_a_time_and_read_when_synced() {
    let nodes: Vec<Arc<Member>> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| member(n, |_| {}))
        .collect();
    for n in &nodes {
        set(n, |s| {
            s.health = Health::Up;
            s.read_only = Some(false);
            s.galera = Some(GaleraState {
                local_state: 4,
                ready: true,
                cluster_status: "Primary".into(),
                cluster_size: 3,
                ..GaleraState::default()
            });
        });
    }
    let r = router(nodes.clone(), RoutingConfig::default());
    assert_eq!(r.elect().unwrap().name(), "n1");
    for _ in 0..20 {
        assert_ne!(name(r.pick(&Target::Reader { need: None })), "n1");
    }
    // A read after a write goes to the writer node: the others apply it later.
    let need = Target::Reader {
        need: GtidPos::parse("0-1-5"),
    };
    nodes[1].note_applied(&GtidPos::parse("0-1-9").unwrap());
    assert_eq!(name(r.pick(&need)), "n1");
    // n1 leaves sync (donor, or desynced): the writer moves to a synced node.
    set(&nodes[0], |s| s.galera.as_mut().unwrap().local_state = 2);
    assert_eq!(r.elect().unwrap().name(), "n2");
    set(&nodes[0], |s| s.galera.as_mut().unwrap().local_state = 4);
    assert_eq!(r.elect().unwrap().name(), "n2", "and stays there");
}

pub(crate) fn synced_nodes(names: &[&str]) -> Vec<Arc<Member>> {
    let nodes: Vec<Arc<Member>> = names.iter().map(|n| member(n, |_| {})).collect();
    for n in &nodes {
        set(n, |s| {
            s.health = Health::Up;
            s.read_only = Some(false);
            s.galera = Some(GaleraState {
                local_state: 4,
                ready: true,
                cluster_status: "Primary".into(),
                cluster_size: names.len() as u32,
                ..GaleraState::default()
            });
        });
    }
    nodes
}

#[tokio::test]
async fn galera_writes_spread_over_synced_nodes_away_from_flow_control() {
    let nodes = synced_nodes(&["n1", "n2", "n3"]);
    let routing = RoutingConfig {
        galera_writers: GaleraWriters::All,
        ..RoutingConfig::default()
    };
    let r = router(nodes.clone(), routing);
    r.elect();
    assert!(r.multi_writer());
    let picks = |target: &Target| {
        let mut seen = std::collections::HashMap::new();
        for _ in 0..300 {
            *seen.entry(name(r.pick(target)).to_owned()).or_insert(0) += 1;
        }
        seen
    };
    let writes = picks(&Target::Writer);
    assert!(
        writes.values().all(|n| *n >= 50) && writes.len() == 3,
        "{writes:?}"
    );
    let reads = picks(&Target::Reader { need: None });
    assert_eq!(reads.len(), 3, "the elected writer reads too: {reads:?}");

    // n2 sends flow control: neither writes nor reads go there while others can.
    set(&nodes[1], |s| s.galera.as_mut().unwrap().flow.sent = 3);
    for target in [Target::Writer, Target::Reader { need: None }] {
        assert!(!picks(&target).contains_key("n2"), "{target:?}");
    }
    // A node out of sync takes nothing; a session's node takes its reads while synced.
    set(&nodes[2], |s| s.galera.as_mut().unwrap().local_state = 2);
    let home = Target::Node(NodeRef(nodes[2].clone()));
    assert_eq!(picks(&Target::Writer).keys().collect::<Vec<_>>(), ["n1"]);
    assert_ne!(name(r.pick(&home)), "n3");
    set(&nodes[2], |s| s.galera.as_mut().unwrap().local_state = 4);
    assert_eq!(picks(&home).keys().collect::<Vec<_>>(), ["n3"]);

    // Every node sends flow control: all of them still take work.
    for n in &nodes {
        set(n, |s| s.galera.as_mut().unwrap().flow.sent = 1);
    }
    assert_eq!(picks(&Target::Writer).len(), 3);
}

#[tokio::test]
async fn the_writers_own_position_raises_the_floor_of_its_commits_only() {
    let (a, b, _, r) = cluster(RoutingConfig::default());
    let pos = |t: &str| GtidPos::parse(t).unwrap();
    assert_eq!(name_of(r.writer()), "a");
    r.note_write(&pos("0-1-10"));
    // Read on a replica: not the writer's.
    r.note_writer_position(&b, pos("0-1-50"));
    assert_eq!(r.commit_floor(Some(&a)), pos("0-1-10"));
    // Read on the writer: what it had logged, for statements sent to it.
    r.note_writer_position(&a, pos("0-1-40,1-1-5"));
    assert_eq!(r.commit_floor(Some(&a)), pos("0-1-40,1-1-5"));
    // Not for a statement on another server, whose sequence numbers are its own.
    assert_eq!(r.commit_floor(Some(&b)), pos("0-1-10"));
    assert_eq!(r.commit_floor(None), pos("0-1-10"));
    // What was acknowledged since still counts.
    r.note_write(&pos("0-1-45"));
    assert_eq!(r.commit_floor(Some(&a)), pos("0-1-45,1-1-5"));
}

/// Asynchronous replication lost acknowledged commits 9 and 10 in a failover to b,
/// which logs its own 9 and 10 next: when b is lost in turn with its 9 in doubt, that
/// 9 must not pass for the old, acknowledged one.
#[tokio::test]
async fn commits_acknowledged_and_lost_in_a_failover_do_not_hide_the_new_writers() {
    let (_, b, c, r) = cluster(RoutingConfig::default());
    let pos = |t: &str| GtidPos::parse(t).unwrap();
    for seq in 1..=10 {
        r.note_write(&pos(&format!("0-1-{seq}")));
    }
    r.promoted(&b, pos("0-1-8"), None);
    assert_eq!(r.commit_floor(Some(&b)), pos("0-1-8"));
    // On b: 9 is acknowledged, then a commit sent with 9 as the floor loses its reply.
    r.note_write(&pos("0-2-9"));
    let lost = InDoubt {
        floor: r.commit_floor(Some(&b)),
        thread: 7,
    };
    r.commits.lost_in_flight(&lost.floor);
    // c has b's 10, which no one was told of: it may be that commit.
    r.commits.promoted(&c, pos("0-2-10"), None);
    assert_eq!(r.commits.outcome(&c, &lost), Outcome::Unknown);
}

fn name_of(m: Option<Arc<Member>>) -> String {
    m.map(|m| m.name().to_owned()).unwrap_or_default()
}

#[tokio::test]
async fn a_lost_commit_is_absent_only_when_every_later_gtid_was_acknowledged() {
    let (a, b, c, r) = cluster(RoutingConfig::default());
    let pos = |t: &str| GtidPos::parse(t).unwrap();
    for seq in 1..=10 {
        r.note_write(&pos(&format!("0-1-{seq}")));
    }
    // Sent while 0-1-10 was the latest acknowledged, on connection 7.
    let lost = InDoubt {
        floor: r.commit_floor(None),
        thread: 7,
    };
    assert_eq!(lost.floor, pos("0-1-10"));
    let outcome = |m: &Arc<Member>| r.commits.outcome(m, &lost);
    // Nothing was promoted yet: unknown.
    assert_eq!(outcome(&b), Outcome::Unknown);
    r.note_write(&pos("0-1-11"));
    r.commits.promoted(&b, pos("0-1-11"), None);
    // Every GTID b has past the floor was acknowledged to someone.
    assert_eq!(outcome(&b), Outcome::Absent);
    // Not on another server than the one promoted.
    assert_eq!(outcome(&c), Outcome::Unknown);
    assert_eq!(outcome(&a), Outcome::Unknown);
    // b has one no one was told of, and its binlog was not read: it may be the lost
    // commit.
    r.commits.promoted(&b, pos("0-1-12"), None);
    assert_eq!(outcome(&b), Outcome::Unknown);
    // Nor in a domain never acknowledged.
    r.commits.promoted(&b, pos("0-1-11,1-2-3"), None);
    assert_eq!(outcome(&b), Outcome::Unknown);
    // A floor at or past what b has: surely absent.
    r.commits.promoted(&b, pos("0-1-10"), None);
    assert_eq!(outcome(&b), Outcome::Absent);
}

#[tokio::test]
async fn a_lost_commit_is_found_by_the_connection_that_ran_it() {
    let (_, b, _, r) = cluster(RoutingConfig::default());
    let pos = |t: &str| GtidPos::parse(t).unwrap();
    for seq in 1..=10 {
        r.note_write(&pos(&format!("0-1-{seq}")));
    }
    let lost = |thread| InDoubt {
        floor: pos("0-1-10"),
        thread,
    };
    let logged = |seq, server, thread| Logged {
        domain: 0,
        server,
        seq,
        thread,
        insert_id: (seq == 13).then_some(500),
    };
    // Nothing lost in flight: no scan is asked for.
    assert_eq!(r.commits.scan_from(&pos("0-1-13")), None);
    r.commits.lost_in_flight(&pos("0-1-10"));
    r.commits.lost_in_flight(&pos("0-1-9"));
    // Acknowledged up to 0-1-10, 0-1-12 too: 11 and 13 are in doubt, from the earliest
    // floor on.
    r.note_write(&pos("0-1-12"));
    assert_eq!(r.commits.scan_from(&pos("0-1-13")), Some(pos("0-1-9")));
    // Asked once per failover.
    assert_eq!(r.commits.scan_from(&pos("0-1-13")), None);
    // Nor when more came after the floor than is kept: a scan could not tell either.
    r.commits.lost_in_flight(&pos("0-1-10"));
    assert_eq!(r.commits.scan_from(&pos("0-1-100000")), None);
    let scan = |l: Vec<Logged>| Some((pos("0-1-9"), l));
    r.commits.promoted(
        &b,
        pos("0-1-13"),
        scan(vec![
            logged(10, 1, Some(5)),
            logged(11, 1, Some(7)),
            logged(12, 1, Some(7)),
            logged(13, 1, Some(8)),
        ]),
    );
    // 11 was run by connection 7 and no one was told of it: 7's commit is there; 12
    // was acknowledged (a commit before it on that connection).
    let committed = |gtid: &str, insert_id| Outcome::Committed {
        gtid: pos(gtid),
        insert_id,
    };
    assert_eq!(r.commits.outcome(&b, &lost(7)), committed("0-1-11", None));
    // With what its INSERT_ID event said it generated.
    assert_eq!(
        r.commits.outcome(&b, &lost(8)),
        committed("0-1-13", Some(500))
    );
    assert_eq!(r.commits.outcome(&b, &lost(9)), Outcome::Absent);
    // A transaction whose events name no connection could be anyone's.
    let with = |l: Logged| scan(vec![logged(11, 1, Some(7)), l]);
    r.commits
        .promoted(&b, pos("0-1-13"), with(logged(13, 1, None)));
    assert_eq!(r.commits.outcome(&b, &lost(9)), Outcome::Unknown);
    // So could one first committed on another server: its connection ids are not the
    // old writer's.
    r.commits
        .promoted(&b, pos("0-1-13"), with(logged(13, 2, Some(9))));
    assert_eq!(r.commits.outcome(&b, &lost(9)), Outcome::Unknown);
    // Or one the scan did not see.
    r.commits
        .promoted(&b, pos("0-1-14"), with(logged(13, 1, Some(8))));
    assert_eq!(r.commits.outcome(&b, &lost(9)), Outcome::Unknown);
    // Two by the same connection: which one was lost can't be told.
    r.commits
        .promoted(&b, pos("0-1-13"), with(logged(13, 1, Some(7))));
    assert_eq!(r.commits.outcome(&b, &lost(7)), Outcome::Unknown);
    // A scan that starts after the floor does not cover it.
    r.commits.promoted(
        &b,
        pos("0-1-13"),
        Some((pos("0-1-11"), vec![logged(13, 1, Some(8))])),
    );
    assert_eq!(r.commits.outcome(&b, &lost(9)), Outcome::Unknown);
}

#[tokio::test]
async fn writer_statements_wait_for_pending_replays_within_a_bound() {
    let gate = Arc::new(commits::ReplayGate::default());
    // None pending: no wait at all.
    assert!(!gate.wait(Duration::from_secs(60)).await);
    let ticket = gate.enter();
    let waiter = {
        let gate = gate.clone();
        tokio::spawn(async move { gate.wait(Duration::from_secs(60)).await })
    };
    let second = gate.enter();
    // The waiter is waiting before the replays end.
    tokio::task::yield_now().await;
    drop(ticket);
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    drop(second);
    assert!(tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("released when the last replay is carried over")
        .unwrap());
    // A replay that never ends holds statements back only for the bound.
    let _stuck = gate.enter();
    let started = Instant::now();
    assert!(gate.wait(Duration::from_millis(50)).await);
    assert!(started.elapsed() >= Duration::from_millis(50));
}
