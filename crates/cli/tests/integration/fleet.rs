//! Sluice instances with the same servers act as one proxy: they find each other (with
//! no `[fleet]` section, through the servers; or through a real etcd), give session ids
//! unique across them, carry out a KILL of a peer's session there, and apply runtime
//! changes made through any of them.

use super::routing::{admin_get, config, replica_set, ADMIN_TOKEN};
use crate::support::proxy::User;
use crate::support::wire::{RawConn, Reply};
use crate::support::{
    admin_call, free_port, wait_until, Config, Sluice, NATIVE_PASSWORD, NATIVE_USER,
};
use sluice_sandbox::{MariaDb, ReplicaSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WEAK_USER: &str = "fleet_weak";
const WEAK_PASSWORD: &str = "weak_pw";

/// `n` configurations alike but for their listener and admin addresses, in a fleet
/// (the harness keeps instances out of one by default).
fn alike(first: &Config, n: usize) -> Vec<Config> {
    (0..n)
        .map(|i| {
            let mut c = first.clone().fleet("enabled", true);
            if i > 0 {
                c = c.admin(ADMIN_TOKEN);
                c.listeners[0].address = format!("127.0.0.1:{}", free_port());
            }
            c
        })
        .collect()
}

fn fleet_of(sluice: &Sluice, config: &Config) -> serde_json::Value {
    admin_get(sluice, config, "/v1/fleet")
}

fn live_slots(view: &serde_json::Value) -> Vec<u64> {
    view["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["live"] == true)
        .filter_map(|m| m["slot"].as_u64())
        .collect()
}

/// Waits until every instance lists all `n` live, and returns their slots.
fn joined(instances: &[Sluice], configs: &[Config]) -> Vec<u64> {
    let n = instances.len();
    let all_see_all = || {
        instances
            .iter()
            .zip(configs)
            .all(|(s, c)| live_slots(&fleet_of(s, c)).len() == n)
    };
    let logs = || {
        instances
            .iter()
            .map(|s| s.log())
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    assert!(
        wait_until(Duration::from_secs(20), all_see_all),
        "the instances did not find each other\n{}",
        logs()
    );
    instances
        .iter()
        .zip(configs)
        .map(|(s, c)| fleet_of(s, c)["slot"].as_u64().expect("a slot"))
        .collect()
}

fn login(sluice: &Sluice, user: &str, password: &str) -> RawConn {
    RawConn::login(sluice.addr(), user, password, None)
        .unwrap_or_else(|e| panic!("login: {e:?}\n{}", sluice.log()))
}

fn connection_id(c: &mut RawConn) -> u32 {
    match c.query("SELECT CONNECTION_ID()").expect("CONNECTION_ID()") {
        Reply::ResultSet { rows, .. } => String::from_utf8(rows[0][0].clone().unwrap())
            .unwrap()
            .parse()
            .unwrap(),
        other => panic!("CONNECTION_ID(): {other:?}"),
    }
}

fn error_code(reply: Reply) -> Option<u16> {
    match reply {
        Reply::Err(e) => Some(e.code),
        _ => None,
    }
}

/// Whether the session on `c` was ended: its next statement gets no answer.
fn ended(c: &mut RawConn) -> bool {
    match c.query("SELECT 1") {
        Err(_) => true,
        Ok(Reply::Err(e)) => e.code == 1927 || e.code == 2013 || e.code == 2006,
        Ok(_) => false,
    }
}

/// Sets the cache rules through `config`'s instance to one rule, `name`, for `pattern`.
fn put_rule(config: &Config, name: &str, pattern: &str) {
    let rules = serde_json::json!([{ "name": name, "match": pattern, "ttl": "30s" }]);
    let admin = config.admin_address().unwrap();
    admin_call(&admin, ADMIN_TOKEN, "PUT", "/v1/cache/rules", Some(&rules));
}

/// The names of the cache rules in force on `config`'s instance.
fn rule_names(config: &Config) -> Vec<String> {
    let admin = config.admin_address().unwrap();
    admin_call(&admin, ADMIN_TOKEN, "GET", "/v1/cache/rules", None)
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect()
}

fn with_weak_user(set: &ReplicaSet, config: Config) -> Config {
    set.primary
        .execute(&format!(
            "CREATE USER IF NOT EXISTS '{WEAK_USER}'@'%' IDENTIFIED VIA mysql_native_password \
             USING PASSWORD('{WEAK_PASSWORD}'); GRANT SELECT ON *.* TO '{WEAK_USER}'@'%'"
        ))
        .unwrap();
    set.wait_caught_up(Duration::from_secs(20)).unwrap();
    config
        .user(User::native(WEAK_USER, WEAK_PASSWORD))
        .cache_rule("start", "^SELECT 1$", "10s")
}

/// What every mode must do: ids unique across instances, KILL across them with the
/// server's rules, runtime changes everywhere.
fn acts_as_one(configs: &[Config]) {
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    let slots = joined(&instances, configs);
    assert_ne!(slots[0], slots[1], "each instance its own slot");

    // Session ids: unique, each instance's slot in the top byte.
    let mut a = login(&instances[0], NATIVE_USER, NATIVE_PASSWORD);
    let mut b = login(&instances[1], NATIVE_USER, NATIVE_PASSWORD);
    let (id_a, id_b) = (connection_id(&mut a), connection_id(&mut b));
    assert_ne!(id_a, id_b);
    assert_eq!(u64::from(id_a >> 24), slots[0], "{id_a}");
    assert_eq!(u64::from(id_b >> 24), slots[1], "{id_b}");

    // KILL through A of B's session ends B's session, not one of A's.
    let mut victim = login(&instances[1], NATIVE_USER, NATIVE_PASSWORD);
    let victim_id = connection_id(&mut victim);
    let answer = a.query(&format!("KILL {victim_id}")).unwrap();
    assert!(matches!(answer, Reply::Ok { .. }), "{answer:?}");
    assert!(
        ended(&mut victim),
        "B's session goes on after a KILL through A"
    );
    assert!(!ended(&mut b), "another session of B was ended");
    assert!(!ended(&mut a), "the killer's session was ended");

    // An id of B's slot that B does not hold: 1094, as the server answers.
    let unknown = (slots[1] as u32) << 24 | 0x00ab_cdef;
    let answer = a.query(&format!("KILL {unknown}")).unwrap();
    assert_eq!(error_code(answer), Some(1094));

    // An account without the privilege may not kill another account's session on B...
    let mut weak = login(&instances[0], WEAK_USER, WEAK_PASSWORD);
    let answer = weak.query(&format!("KILL {id_b}")).unwrap();
    assert_eq!(error_code(answer), Some(1095));
    assert!(!ended(&mut b));
    // ... and may its own there.
    let mut weak_b = login(&instances[1], WEAK_USER, WEAK_PASSWORD);
    let weak_b_id = connection_id(&mut weak_b);
    let answer = weak.query(&format!("KILL QUERY {weak_b_id}")).unwrap();
    assert!(matches!(answer, Reply::Ok { .. }), "{answer:?}");

    // KILL USER through A reaches the account's sessions on B too.
    let answer = a.query(&format!("KILL USER {WEAK_USER}")).unwrap();
    assert!(
        matches!(
            answer,
            Reply::Ok {
                affected_rows: 2,
                ..
            }
        ),
        "{answer:?}"
    );
    assert!(ended(&mut weak_b) && ended(&mut weak));

    // A cache rule set through A is in force on B.
    let admin = |i: usize| configs[i].admin_address().unwrap();
    put_rule(&configs[0], "fleet_rule", "^SELECT 2");
    let put_at = Instant::now();
    let has_rule = || rule_names(&configs[1]).iter().any(|r| r == "fleet_rule");
    assert!(
        wait_until(Duration::from_secs(5), has_rule),
        "the rule did not reach B\n{}",
        instances[1].log()
    );
    eprintln!("rule in force on B after {:?}", put_at.elapsed());

    // A server disabled through B is out of routing on A.
    admin_call(
        &admin(1),
        ADMIN_TOKEN,
        "POST",
        "/v1/servers/replica2/disable",
        None,
    );
    let role_on_a = || {
        admin_get(&instances[0], &configs[0], "/v1/servers")["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "replica2")
            .map(|s| s["role"].as_str().unwrap_or("").to_owned())
    };
    assert!(
        wait_until(Duration::from_secs(5), || role_on_a().as_deref()
            == Some("disabled")),
        "replica2 still {:?} on A",
        role_on_a()
    );

    // Every instance is listed, with its address and configuration hash.
    let view = fleet_of(&instances[0], &configs[0]);
    let members = view["members"].as_array().unwrap();
    for c in configs {
        assert!(
            members
                .iter()
                .any(|m| m["address"] == c.listeners[0].address.as_str()),
            "{view}"
        );
    }
}

/// No `[fleet]` section: the instances coordinate through the servers.
#[test]
fn instances_with_the_same_servers_act_as_one() {
    let set = replica_set(false);
    let first = with_weak_user(&set, config(&set));
    acts_as_one(&alike(&first, 2));
}

/// A real etcd on loopback, stopped with the test.
struct Etcd {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Etcd {
    fn start() -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{client}");
        let child = Command::new("etcd")
            .args([
                "--name",
                "sluice-test",
                "--data-dir",
                dir.path().to_str().unwrap(),
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
                "--initial-cluster",
                &format!("sluice-test=http://127.0.0.1:{peer}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd (Debian's etcd-server) is installed by scripts/deps.sh");
        let up = wait_until(Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", client)).is_ok()
        });
        assert!(up, "etcd did not start");
        Etcd {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Etcd {
    /// `c` in a fleet of `name` coordinated through this etcd.
    fn fleet(&self, c: Config, name: &str) -> Config {
        c.fleet("enabled", true)
            .fleet("etcd", vec![self.url.clone()])
            .fleet("name", name)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `[fleet] etcd`: the same, through etcd.
#[test]
fn instances_sharing_an_etcd_act_as_one() {
    let etcd = Etcd::start();
    let set = replica_set(false);
    let first = etcd.fleet(with_weak_user(&set, config(&set)), "t1");
    let configs = alike(&first, 2);
    acts_as_one(&configs);
}

/// With etcd: the primary SIGKILLed under writes through both instances gives one
/// promotion, one writable server, and every acknowledged write on it.
#[test]
fn two_instances_with_etcd_fail_over_once() {
    let etcd = Etcd::start();
    crate::writer_lock::fail_over_with(2, false, |c| etcd.fleet(c, "t4"));
}

/// With etcd: the primary and an instance SIGKILLed together; the two left fail over
/// once.
#[test]
fn three_instances_with_etcd_one_killed_with_the_primary_fail_over_once() {
    let etcd = Etcd::start();
    crate::writer_lock::fail_over_with(3, true, |c| etcd.fleet(c, "t5"));
}

/// With etcd, an instance that can't reach it never promotes: the primary lost while
/// etcd is down leaves the writer unchanged, and once etcd is back, one instance fails
/// over for all.
#[test]
fn without_etcd_no_instance_promotes() {
    let mut etcd = Etcd::start();
    let set = replica_set(true);
    let first = etcd.fleet(super::failover::failover_config(&set), "t2");
    let configs = alike(&first, 2);
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    joined(&instances, &configs);
    etcd.child.kill().unwrap();
    etcd.child.wait().unwrap();
    set.primary.kill().unwrap();
    let down_on_all = || {
        instances.iter().zip(&configs).all(|(s, c)| {
            admin_get(s, c, "/v1/servers")["servers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == "primary" && m["health"] == "down")
        })
    };
    assert!(wait_until(Duration::from_secs(20), down_on_all));
    // Several monitor intervals (200 ms) after both saw the primary down.
    let refused = |s: &Sluice| {
        s.log()
            .contains("only the instance holding the `writer` duty")
    };
    assert!(
        wait_until(Duration::from_secs(10), || instances.iter().all(refused)),
        "{}",
        instances[0].log()
    );
    let writable = |r: &MariaDb| {
        r.execute("SELECT @@read_only")
            .is_ok_and(|o| o.lines().last() == Some("0"))
    };
    assert!(
        set.replicas.iter().all(|r| !writable(r)),
        "a replica was promoted without etcd"
    );
}

/// An instance killed with a cross-shard commit half done, and never started again: the
/// instance left finishes its prepared branch once the dead one's etcd lease is over.
#[test]
fn a_dead_instances_prepared_branches_are_finished_by_a_survivor() {
    use crate::sharding_xa::{decision_table_made, fill, prepared, value};
    let etcd = Etcd::start();
    let fleet = |c: Config| etcd.fleet(c, "t3").fleet("lease", "2s");
    let (a, b, dying, config) = crate::sharding::start_adjusted(&[("instance", "xa-dying")], fleet);
    assert!(decision_table_made(&a, &b), "{}", dying.log());
    let mut other = config.clone().admin(ADMIN_TOKEN);
    other.listeners[0].address = format!("127.0.0.1:{}", free_port());
    other
        .sharding
        .insert("instance".into(), "xa-survivor".into());
    let configs = [config.clone(), other.clone()];
    let survivor = Sluice::start(&other);
    let mut instances = [dying, survivor];
    joined(&instances, &configs);

    // As in sharding_xa: the decision waits on a lock, the other shard's branch is
    // prepared, and the instance dies.
    let mut c = crate::sharding::shop(&instances[0]);
    let (on_a, on_b) = fill(&mut c, &a, &b);
    let (x, y) = (on_a[0], on_b[0]);
    crate::sharding_xa::crash_mid_commit(&mut instances[0], &mut c, &a, &b, x, y);

    // Lease (2 s), twice that to be sure, and the recovery's 10 s round.
    assert!(
        wait_until(Duration::from_secs(60), || prepared(&b).is_empty()),
        "the dead instance's branch is still prepared: {:?}\n{}",
        prepared(&b),
        instances[1].log()
    );
    assert_eq!(value(&b, y), "v", "no decision was recorded: rolled back");
    assert!(wait_until(Duration::from_secs(20), || value(&a, x) == "v"));
}

/// A switchover asked of one instance: the other holds its writes while it runs and
/// sends them to the new writer after, so its clients see no error.
#[test]
fn a_switchover_through_one_instance_moves_every_instances_writes_without_an_error() {
    use crate::failover::{prepare, Load};
    let set = replica_set(false);
    prepare(&set);
    let configs = alike(&super::failover::failover_config(&set), 2);
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    joined(&instances, &configs);
    let load = Load::start(&instances[1], false);
    assert!(wait_until(Duration::from_secs(20), || load.acked() > 50));
    let before = load.acked();
    let report = admin_call(
        &configs[0].admin_address().unwrap(),
        ADMIN_TOKEN,
        "POST",
        "/v1/servers/switchover",
        Some(&serde_json::json!({ "to": "replica2" })),
    );
    assert_eq!(report["outcome"], "ok", "{report}");
    let writer_on_b =
        || admin_get(&instances[1], &configs[1], "/v1/servers")["writer"] == "replica2";
    assert!(wait_until(Duration::from_secs(5), writer_on_b));
    assert!(wait_until(Duration::from_secs(20), || load.acked() > before + 50));
    let (probe, _) = load.finish();
    probe.assert_no_errors();
    // Every write acknowledged through B is on the new writer: none went to the old one
    // after it stopped being the writer (the test account's SUPER passes read_only).
    let acked: Vec<i64> = probe.acked.iter().map(|(id, _)| *id).collect();
    let lost = crate::writer_lock::missing_on(&set.replicas[1], "fo.acks", &acked);
    assert!(
        lost.is_empty(),
        "acknowledged writes not on the new writer: {lost:?}"
    );
}

/// `sluice bench fleet` in miniature: two instances idle, then rule changes and KILLs
/// timed across them; each change and KILL arrives, and the servers' counts are read.
#[test]
fn the_fleet_benchmark_measures_cost_and_agreement() {
    use crate::support::proxy::{run_sluice_within, SLUICE_BIN};
    let out = tempfile::tempdir().unwrap();
    let output = run_sluice_within(
        &[
            "bench",
            "fleet",
            "--instances",
            "2",
            "--window",
            "2s",
            "--samples",
            "3",
            "--sluice-bin",
            SLUICE_BIN,
            "--out",
            out.path().to_str().unwrap(),
        ],
        Duration::from_secs(180),
    );
    assert_eq!(output.code, Some(0), "{}\n{}", output.stdout, output.stderr);
    let json = std::fs::read_to_string(out.path().join("results.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let count = &r["counts"][0];
    assert_eq!(count["instances"], 2, "{r}");
    assert_eq!(count["rule_ms"].as_array().unwrap().len(), 3, "{r}");
    assert_eq!(count["kill_ms"].as_array().unwrap().len(), 3, "{r}");
    assert_eq!(count["kills_missed"], 0, "{r}");
    let primary = &count["servers"][0];
    assert!(primary["statements_per_s"].as_f64().unwrap() > 0.0, "{r}");
    assert!(primary["connections"].as_i64().unwrap() >= 2, "{r}");
}

/// Instances of two fleets (`[fleet] name`) in front of the same servers share nothing:
/// each is slot 0 of its own and lists only itself.
#[test]
fn fleets_with_other_names_share_nothing() {
    let set = replica_set(false);
    let mut configs = alike(&config(&set), 2);
    configs[0] = configs[0].clone().fleet("name", "shop");
    configs[1] = configs[1].clone().fleet("name", "billing");
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    for (s, c) in instances.iter().zip(&configs) {
        let joined_alone = || {
            let view = fleet_of(s, c);
            view["slot"] == 0 && live_slots(&view) == [0]
        };
        assert!(
            wait_until(Duration::from_secs(20), joined_alone),
            "{}",
            fleet_of(s, c)
        );
    }
}

/// A change made while the servers have no writer (the fleet's tables are out of
/// reach) reaches the other instances once there is one again: a cache rule set
/// through A with the primary gone, and a replica made the writer by hand.
#[test]
fn a_change_made_without_a_writer_reaches_the_others_once_there_is_one() {
    let set = replica_set(false);
    let first = config(&set).cache_rule("start", "^SELECT 1$", "10s");
    let configs: Vec<Config> = alike(&first, 2)
        .into_iter()
        .map(|c| c.failover("enabled", false))
        .collect();
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    joined(&instances, &configs);
    set.primary.kill().unwrap();
    let no_writer =
        |i: usize| admin_get(&instances[i], &configs[i], "/v1/servers")["writer"].is_null();
    assert!(wait_until(Duration::from_secs(20), || no_writer(0) && no_writer(1)));
    put_rule(&configs[0], "late_rule", "^SELECT 3");
    set.replicas[0]
        .execute("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0")
        .unwrap();
    let has_rule = || rule_names(&configs[1]).iter().any(|r| r == "late_rule");
    assert!(
        wait_until(Duration::from_secs(20), has_rule),
        "the rule made without a writer did not reach B\n{}\n---\n{}",
        instances[0].log(),
        instances[1].log()
    );
}

/// Dedicated sessions (`multiplex = false`) across instances: a KILL QUERY through A
/// interrupts the statement B's session runs on its own connection and leaves the
/// session; a KILL through A ends it.
#[test]
fn a_kill_through_one_instance_reaches_a_dedicated_session_of_another() {
    let set = replica_set(false);
    let configs: Vec<Config> = alike(&config(&set), 2)
        .into_iter()
        .map(|c| c.pool("multiplex", false))
        .collect();
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    joined(&instances, &configs);
    let mut a = login(&instances[0], NATIVE_USER, NATIVE_PASSWORD);
    let mut victim = login(&instances[1], NATIVE_USER, NATIVE_PASSWORD);
    let victim_id = connection_id(&mut victim);
    const SLEEP: &str = "SELECT SLEEP(60)";
    let sleeping = std::thread::spawn(move || {
        let started = Instant::now();
        let reply = victim.query(SLEEP);
        (victim, reply, started.elapsed())
    });
    let servers = || std::iter::once(&set.primary).chain(&set.replicas);
    let running = || {
        servers()
            .map(|s| crate::support::running_statements(s, SLEEP))
            .sum::<usize>()
    };
    assert!(wait_until(Duration::from_secs(10), || running() == 1));
    let answer = a.query(&format!("KILL QUERY {victim_id}")).unwrap();
    assert!(matches!(answer, Reply::Ok { .. }), "{answer:?}");
    let (mut victim, reply, took) = sleeping.join().unwrap();
    assert!(
        took < Duration::from_secs(30),
        "the statement ran on: {reply:?}"
    );
    assert_eq!(running(), 0);
    assert!(!ended(&mut victim), "KILL QUERY ended the session");

    let answer = a.query(&format!("KILL {victim_id}")).unwrap();
    assert!(matches!(answer, Reply::Ok { .. }), "{answer:?}");
    assert!(
        ended(&mut victim),
        "the session goes on after a KILL through A"
    );
    assert!(!ended(&mut a));
}

/// `sluice_fleet_messages_rejected_total{reason}` as the instance's `/metrics` has it.
fn rejected(config: &Config, reason: &str) -> f64 {
    let client = crate::support::http::Client::new(
        config.admin_address().expect("admin configured"),
        Some(sluice::config::Secret(ADMIN_TOKEN.into())),
    );
    let text = String::from_utf8(client.get("/metrics").expect("/metrics").body).unwrap();
    let sample = format!("sluice_fleet_messages_rejected_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&sample))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {sample}in\n{text}"))
}

/// Instances with another `[fleet] secret` are still members (slots are locks, not
/// messages) but act on none of each other's messages: a cache rule set through one
/// is dropped by the other, counted and logged without the secret.
#[test]
fn instances_with_other_secrets_ignore_each_others_changes() {
    let set = replica_set(false);
    let secrets = ["fleet-secret-of-a", "fleet-secret-of-b"];
    // A rule to start from: with none, there is no cache to set rules of.
    let first = config(&set).cache_rule("start", "^SELECT 1$", "10s");
    let configs: Vec<Config> = alike(&first, 2)
        .into_iter()
        .zip(secrets)
        .map(|(c, s)| c.fleet("secret", s))
        .collect();
    let instances: Vec<Sluice> = configs.iter().map(Sluice::start).collect();
    let slots = joined(&instances, &configs);
    assert_eq!(rejected(&configs[1], "bad_signature"), 0.0);

    put_rule(&configs[0], "fleet_rule", "^SELECT 2");
    // B has read A's message once it has counted it.
    assert!(
        wait_until(Duration::from_secs(10), || rejected(
            &configs[1],
            "bad_signature"
        ) >= 1.0),
        "B did not count A's message as rejected\n{}",
        instances[1].log()
    );
    assert!(rule_names(&configs[0]).contains(&"fleet_rule".to_owned()));
    assert!(
        !rule_names(&configs[1]).contains(&"fleet_rule".to_owned()),
        "B applied a change signed with another key\n{}",
        instances[1].log()
    );
    assert_eq!(rejected(&configs[1], "unsigned"), 0.0);
    assert_eq!(
        rejected(&configs[0], "bad_signature"),
        0.0,
        "A rejected its own"
    );

    let log = instances[1].log();
    let warning = log
        .lines()
        .find(|l| l.contains("fleet message was dropped"))
        .unwrap_or_else(|| panic!("no warning\n{log}"));
    assert!(
        warning.contains(&format!("origin={}", slots[0])),
        "{warning}"
    );
    assert!(warning.contains("bad_signature"), "{warning}");
    for s in secrets {
        assert!(!log.contains(s), "the secret is in B's log");
        assert!(!instances[0].log().contains(s), "the secret is in A's log");
    }
}
