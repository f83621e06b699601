//! Merges over several shards are exact: the same seeded pseudo-random rows in a table
//! sharded over two servers (through Sluice) and in an unsharded copy on a third, and a
//! few hundred seeded pseudo-random reads of every shape Sluice puts together
//! (concatenated rows, aggregates, `GROUP BY`, `ORDER BY ... LIMIT ... OFFSET`, `AVG`,
//! under `WHERE` filters) answered by both. Sluice's answer must be the server's, row
//! for row (as multisets where the server's order is unspecified) and column
//! definition by column definition; a shape it does not merge must get error 1235.

use crate::routing::{login, ok};
use crate::support::proxy::Server;
use crate::support::wire::{ErrPacket, RawConn};
use crate::support::{
    dedicated_server, Config, MariaDbOptions, Sluice, NATIVE_PASSWORD, NATIVE_USER,
};
use sluice_sandbox::MariaDb;

const TABLE: &str = "CREATE DATABASE shop; \
    CREATE TABLE shop.t (id INT PRIMARY KEY, g INT, d DECIMAL(10,3), n BIGINT, \
    day DATE, b VARBINARY(8), s VARCHAR(16) CHARACTER SET utf8mb4, f DOUBLE, \
    q DECIMAL(5,2))";
const ROWS: i64 = 400;
const QUERIES: usize = 400;

/// A seeded xorshift: the same rows and queries on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// In `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One column definition, every field the client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Def {
    schema: Vec<u8>,
    table: Vec<u8>,
    name: Vec<u8>,
    org_name: Vec<u8>,
    charset: u16,
    length: u32,
    column_type: u8,
    flags: u16,
    decimals: u8,
}

type Rows = Vec<Vec<Option<Vec<u8>>>>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Rows(Vec<Def>, Rows),
    Err(u16, String),
}

/// A minimal reader of lenenc fields, for what the shared `Reply` leaves out.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn int(&mut self) -> u64 {
        let (first, rest) = self.0.split_first().expect("a field");
        let (n, width) = match first {
            0xFC => (u64::from(u16::from_le_bytes([rest[0], rest[1]])), 2),
            0xFD => (
                u64::from(u32::from_le_bytes([rest[0], rest[1], rest[2], 0])),
                3,
            ),
            0xFE => (u64::from_le_bytes(rest[..8].try_into().unwrap()), 8),
            &n => (u64::from(n), 0),
        };
        self.0 = &rest[width..];
        n
    }

    fn bytes(&mut self) -> Vec<u8> {
        let len = self.int() as usize;
        let (value, rest) = self.0.split_at(len);
        self.0 = rest;
        value.to_vec()
    }

    fn value(&mut self) -> Option<Vec<u8>> {
        if self.0.first() == Some(&0xFB) {
            self.0 = &self.0[1..];
            return None;
        }
        Some(self.bytes())
    }

    fn fixed(&mut self, n: usize) -> &'a [u8] {
        let (value, rest) = self.0.split_at(n);
        self.0 = rest;
        value
    }
}

fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xFE) && p.len() < 9
}

fn run(c: &mut RawConn, sql: &str) -> Answer {
    c.send_command(0x03, sql.as_bytes()).unwrap();
    let head = c.read_message().unwrap();
    if head.first() == Some(&0xFF) {
        let e = ErrPacket::parse(&head).unwrap();
        return Answer::Err(e.code, e.message);
    }
    let count = Fields(&head).int();
    let mut defs = Vec::new();
    for _ in 0..count {
        let p = c.read_message().unwrap();
        let mut f = Fields(&p);
        f.bytes();
        let (schema, table) = (f.bytes(), f.bytes());
        f.bytes();
        let (name, org_name) = (f.bytes(), f.bytes());
        f.int();
        let charset = u16::from_le_bytes(f.fixed(2).try_into().unwrap());
        let length = u32::from_le_bytes(f.fixed(4).try_into().unwrap());
        let column_type = f.fixed(1)[0];
        let flags = u16::from_le_bytes(f.fixed(2).try_into().unwrap());
        let decimals = f.fixed(1)[0];
        defs.push(Def {
            schema,
            table,
            name,
            org_name,
            charset,
            length,
            column_type,
            flags,
            decimals,
        });
    }
    assert!(is_eof(&c.read_message().unwrap()), "{sql}");
    let mut rows = Vec::new();
    loop {
        let p = c.read_message().unwrap();
        if is_eof(&p) {
            return Answer::Rows(defs, rows);
        }
        if p.first() == Some(&0xFF) {
            let e = ErrPacket::parse(&p).unwrap();
            return Answer::Err(e.code, e.message);
        }
        let mut f = Fields(&p);
        rows.push((0..defs.len()).map(|_| f.value()).collect());
    }
}

/// Two shards and Sluice before them, and the unsharded server, all holding the rows.
fn start(rng: &mut Rng) -> (Vec<MariaDb>, Sluice, RawConn) {
    let servers: Vec<MariaDb> = (0..3)
        .map(|_| dedicated_server(MariaDbOptions::default()))
        .collect();
    for s in &servers {
        s.execute(TABLE).unwrap();
    }
    let mut config = Config::for_server(&servers[0]);
    config.servers = vec![
        Server::new("db1", servers[0].addr()),
        Server::new("db2", servers[1].addr()),
    ];
    for (shard, server) in [("s1", "db1"), ("s2", "db2")] {
        let mut t = toml::Table::new();
        t.insert("name".into(), shard.into());
        t.insert("servers".into(), toml::Value::Array(vec![server.into()]));
        config.shards.push(t);
    }
    let mut t = toml::Table::new();
    t.insert("table".into(), "shop.t".into());
    t.insert("key".into(), "id".into());
    config.sharding.insert(
        "tables".into(),
        toml::Value::Array(vec![toml::Value::Table(t)]),
    );
    let sluice = Sluice::start(&config);
    let mut c = login(&sluice);
    ok(&mut c, "USE shop");
    let mut all = Vec::new();
    for id in 1..=ROWS {
        let row = format!("({id}, {})", values(rng));
        ok(
            &mut c,
            &format!("INSERT INTO t (id, g, d, n, day, b, s, f, q) VALUES {row}"),
        );
        all.push(row);
    }
    // Averages that end exactly half way at their scale (1/32 = 0.03125 at 4 decimals,
    // 0.001/32 at 7), spread over both shards: the server rounds them away from zero.
    for i in 0..64 {
        let sign = if i < 32 { "" } else { "-" };
        let (n, d) = match i % 32 {
            0 => (format!("{sign}1"), format!("{sign}0.001")),
            _ => ("0".into(), "0".into()),
        };
        let row = format!(
            "({}, {}, {d}, {n}, NULL, NULL, NULL, NULL, NULL)",
            1001 + i,
            100 + i / 32
        );
        ok(
            &mut c,
            &format!("INSERT INTO t (id, g, d, n, day, b, s, f, q) VALUES {row}"),
        );
        all.push(row);
    }
    servers[2]
        .execute(&format!("INSERT INTO shop.t VALUES {}", all.join(", ")))
        .unwrap();
    for s in &servers[..2] {
        let n: i64 = s
            .query_value("SELECT COUNT(*) FROM shop.t")
            .unwrap()
            .parse()
            .unwrap();
        assert!(n > ROWS / 4, "each shard holds a share of the rows: {n}");
    }
    (servers, sluice, c)
}

/// One row's values after its id: NULLs, negatives, duplicates of every kind.
fn values(rng: &mut Rng) -> String {
    let null_or = |rng: &mut Rng, v: String| if rng.chance(12) { "NULL".into() } else { v };
    let g = rng.range(-4, 5).to_string();
    let d = rng.range(-99_999, 99_999);
    let d = format!(
        "{}{}.{:03}",
        if d < 0 { "-" } else { "" },
        d.abs() / 1000,
        d.abs() % 1000
    );
    let n = rng.range(-4_000_000_000_000, 4_000_000_000_000).to_string();
    let day = match rng.range(0, 40) {
        k @ 0..=30 => format!("'2024-01-{:02}'", k + 1),
        k => format!("'2024-02-{:02}'", k - 30),
    };
    let bytes: Vec<String> = (0..rng.range(0, 3))
        .map(|_| rng.pick(&["00", "41", "61", "7f", "ff"]).to_string())
        .collect();
    let b = format!("X'{}'", bytes.concat());
    let s = format!("'{}'", rng.pick(&["a", "A", "b", "B ", "é", "e", "ab"]));
    let f = format!("{}e-1", rng.range(-1000, 1000));
    let q = rng.pick(&["-1.5", "0", "2.25", "10", "-0.01"]).to_string();
    [
        null_or(rng, g),
        null_or(rng, d),
        null_or(rng, n),
        null_or(rng, day),
        null_or(rng, b),
        null_or(rng, s),
        null_or(rng, f),
        null_or(rng, q),
    ]
    .join(", ")
}

/// A filter of the rows (sometimes none, sometimes matching nothing).
fn filter(rng: &mut Rng) -> String {
    let k = rng.range(-4, 5);
    let options = [
        String::new(),
        format!(" WHERE g > {k}"),
        format!(" WHERE d < {}.5", k * 20),
        format!(" WHERE id % 3 = {}", k.rem_euclid(3)),
        " WHERE b IS NOT NULL".into(),
        format!(" WHERE day >= DATE '2024-01-{:02}'", 10 + k),
        " WHERE g IS NULL".into(),
        " WHERE id < 0".into(),
        format!(" WHERE n > 0 AND g <> {k}"),
    ];
    rng.pick(&options).clone()
}

/// How the server's order of an answer is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Specified,
    Unspecified,
}

fn aggregate(rng: &mut Rng, i: usize) -> String {
    let f = rng.pick(&["COUNT", "SUM", "MIN", "MAX", "AVG", "COUNT"]);
    let arg = rng.pick(&["g", "d", "n", "id", "q", "t.g"]);
    let arg = if *f == "COUNT" && rng.chance(30) {
        "*"
    } else {
        arg
    };
    match rng.next() % 3 {
        0 => format!("{f}({arg})"),
        1 => format!("{f}({arg}) AS a{i}"),
        _ => format!("{}({arg}) a{i}", f.to_lowercase()),
    }
}

/// A read of a shape Sluice merges, and whether the server's order is specified.
fn supported(rng: &mut Rng) -> (String, Order) {
    let w = filter(rng);
    match rng.next() % 5 {
        0 => (
            format!("SELECT id, g, d, day, b, s, f, q FROM t{w}"),
            Order::Unspecified,
        ),
        1 => {
            let aggs: Vec<String> = (0..rng.range(1, 5))
                .map(|i| aggregate(rng, i as usize))
                .collect();
            (
                format!("SELECT {} FROM t{w}", aggs.join(", ")),
                Order::Specified,
            )
        }
        2 | 3 => grouped(rng, &w),
        _ => {
            let key = rng.pick(&["g", "d", "n", "day", "b", "id", "q"]);
            let desc = if rng.chance(50) { " DESC" } else { "" };
            let id = if rng.chance(50) { "id" } else { "1" };
            let limit = match rng.next() % 3 {
                0 => format!("LIMIT {}", rng.range(0, 30)),
                1 => format!("LIMIT {} OFFSET {}", rng.range(1, 20), rng.range(0, 150)),
                _ => format!("LIMIT {}, {}", rng.range(0, 150), rng.range(1, 20)),
            };
            (
                format!(
                    "SELECT id, g, d, n, day, b, s, q FROM t{w} ORDER BY {key}{desc}, {id} {limit}"
                ),
                Order::Specified,
            )
        }
    }
}

/// `GROUP BY` on one or two keys, sometimes ordered by an aggregate (the keys breaking
/// ties, so that the order is the server's), limited, offset.
fn grouped(rng: &mut Rng, w: &str) -> (String, Order) {
    let keys: Vec<&str> = match rng.next() % 5 {
        0 => vec![*rng.pick(&["g", "t.g"])],
        1 => vec!["day"],
        2 => vec!["b"],
        3 => vec!["q"],
        _ => vec![*rng.pick(&["g", "b", "q"]), "day"],
    };
    let aggs: Vec<String> = (0..rng.range(1, 4))
        .map(|i| aggregate(rng, i as usize))
        .collect();
    let mut sql = format!(
        "SELECT {}, {} FROM t{w} GROUP BY {}",
        keys.join(", "),
        aggs.join(", "),
        keys.join(", ")
    );
    if rng.chance(40) {
        let desc = if rng.chance(50) { " DESC" } else { "" };
        let positions: Vec<String> = (1..=keys.len()).map(|p| p.to_string()).collect();
        sql.push_str(&format!(
            " ORDER BY {}{desc}, {}",
            keys.len() + 1,
            positions.join(", ")
        ));
    }
    match rng.next() % 3 {
        0 => sql.push_str(&format!(" LIMIT {}", rng.range(1, 10))),
        1 => sql.push_str(&format!(
            " LIMIT {} OFFSET {}",
            rng.range(1, 10),
            rng.range(0, 20)
        )),
        _ => {}
    }
    (sql, Order::Specified)
}

/// A read Sluice must refuse: its answer from two shards could not be exact.
fn unsupported(rng: &mut Rng) -> String {
    let w = filter(rng);
    let shapes = [
        format!("SELECT s, COUNT(*) FROM t{w} GROUP BY s"),
        format!("SELECT id, s FROM t{w} ORDER BY s, id LIMIT 5"),
        format!("SELECT AVG(f) FROM t{w}"),
        format!("SELECT SUM(f) FROM t{w}"),
        format!("SELECT g, AVG(f) FROM t{w} GROUP BY g"),
        format!("SELECT MIN(s) FROM t{w}"),
        format!("SELECT g, COUNT(*) FROM t{w} GROUP BY g HAVING COUNT(*) > 2"),
        format!("SELECT COUNT(DISTINCT g) FROM t{w}"),
        format!("SELECT g, COUNT(*) FROM t{w} GROUP BY g WITH ROLLUP"),
        format!("SELECT id FROM t{w} ORDER BY id"),
        format!("SELECT id FROM t{w} LIMIT 5"),
        format!("SELECT DISTINCT g FROM t{w}"),
        format!("SELECT g, d, COUNT(*) FROM t{w} GROUP BY g"),
        format!("SELECT COUNT(*) FROM t{w} GROUP BY g"),
        format!("SELECT g, STD(d) FROM t{w} GROUP BY g"),
    ];
    rng.pick(&shapes).clone()
}

fn sorted(rows: &Rows) -> Rows {
    let mut rows = rows.clone();
    rows.sort();
    rows
}

/// Rows as text, for messages.
fn shown(rows: &Rows) -> Vec<Vec<Option<String>>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| v.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                .collect()
        })
        .collect()
}

#[test]
fn merged_answers_are_the_unsharded_servers() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (servers, _sluice, mut through) = start(&mut rng);
    let mut direct = RawConn::login_ok(servers[2].addr(), NATIVE_USER, NATIVE_PASSWORD);
    ok(&mut direct, "USE shop");
    let halves = "SELECT g, AVG(n), AVG(d) FROM t WHERE g >= 100 GROUP BY g";
    let want = run(&mut direct, halves);
    let Answer::Rows(_, rows) = &want else {
        panic!("{want:?}")
    };
    let text = |v: &str| Some(v.to_string());
    assert_eq!(
        shown(rows),
        [
            [text("100"), text("0.0313"), text("0.0000313")],
            [text("101"), text("-0.0313"), text("-0.0000313")]
        ],
        "the server's AVG rounds half away from zero"
    );
    assert_eq!(run(&mut through, halves), want, "{halves}");
    let mut refused = 0;
    // Answers that had rows to put together, by what the statement does.
    let features = ["GROUP BY", "AVG", "OFFSET", "LIMIT", "ORDER BY", "WHERE"];
    let mut merged = [0usize; 6];
    for i in 0..QUERIES {
        if rng.chance(15) {
            let sql = unsupported(&mut rng);
            match run(&mut through, &sql) {
                Answer::Err(1235, _) => refused += 1,
                other => panic!("#{i} {sql}: Sluice answered {other:?}"),
            }
            continue;
        }
        let (sql, order) = supported(&mut rng);
        let expected = run(&mut direct, &sql);
        let got = run(&mut through, &sql);
        match (&expected, &got) {
            (Answer::Rows(want_defs, want), Answer::Rows(defs, rows)) => {
                assert_eq!(defs, want_defs, "#{i} {sql}: column definitions");
                match order {
                    Order::Specified => assert_eq!(shown(rows), shown(want), "#{i} {sql}"),
                    Order::Unspecified => {
                        assert_eq!(shown(&sorted(rows)), shown(&sorted(want)), "#{i} {sql}")
                    }
                }
                for (n, f) in merged.iter_mut().zip(features) {
                    *n += usize::from(!want.is_empty() && sql.to_uppercase().contains(f));
                }
            }
            _ => panic!("#{i} {sql}: the server answered {expected:?}, Sluice {got:?}"),
        }
    }
    assert!(refused > 20, "{refused} refused");
    assert!(merged.iter().all(|&n| n > 20), "{features:?}: {merged:?}");
}
