//! Sharding: which shards the rows a statement reads or writes live on
//! (docs/ARCHITECTURE.md, "Sharding"). A [`ShardMap`] is built once from the
//! configuration; [`ShardMap::place`] is pure, given the statement's tables and, for
//! each sharded table, the key values that decide its rows (`classify::keys`).

pub mod config;
pub mod gather;
pub mod merge;
pub mod plan;
pub mod xa;

use crate::classify::keys::canon::{canonical, Canon};
use crate::classify::keys::{KeyColumn, Keys, Value};
use crate::classify::sql::TableRef;
use crate::router::Router;
use config::{KeyType, Method, ShardConfig, ShardingConfig};
use sluice_wire::statement::Bound;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Hash buckets of a hashed table: a bucket, not a row, is what moves when shards are
/// added, and the number never changes once rows are placed.
pub const BUCKETS: u64 = 1024;

/// The shards as the request path sees them: the placement map and each shard's router
/// (its own members, monitor, pools and writer), in configuration order.
pub struct Shards {
    pub map: ShardMap,
    pub routers: Vec<Arc<Router>>,
    /// Each shard's `auto_increment_increment` and `auto_increment_offset`, as its
    /// writer last reported them.
    pub auto_increment: parking_lot::Mutex<Vec<Option<(u64, u64)>>>,
    /// What a transaction reaching a second shard does, and the XA transactions this
    /// process coordinates.
    pub cross_shard: config::CrossShard,
    pub xa: xa::Coordinator,
}

impl Shards {
    pub fn new(
        map: ShardMap,
        routers: Vec<Arc<Router>>,
        cross_shard: config::CrossShard,
        instance: &str,
    ) -> Shards {
        let auto_increment = parking_lot::Mutex::new(vec![None; routers.len()]);
        Shards {
            map,
            routers,
            auto_increment,
            cross_shard,
            xa: xa::Coordinator::new(instance),
        }
    }

    /// Records shard `index`'s settings and warns when ids generated on two shards
    /// could be the same.
    pub fn note_auto_increment(&self, index: usize, increment: u64, offset: u64) {
        let mut all = self.auto_increment.lock();
        let changed = all[index] != Some((increment, offset));
        all[index] = Some((increment, offset));
        if changed && !ids_apart(&all) {
            tracing::warn!(
                shard = self.map.names()[index],
                increment,
                offset,
                shards = all.len(),
                "ids generated on two shards can be the same: give every shard's servers \
                 auto_increment_increment = the number of shards (or more) and \
                 auto_increment_offset = a different value on each"
            );
        }
    }

    /// Whether the shards' auto-increment settings, where known, keep generated ids
    /// apart.
    pub fn auto_increment_apart(&self) -> bool {
        ids_apart(&self.auto_increment.lock())
    }
}

/// Whether ids generated with these settings (`None`: not known yet) never collide:
/// the same increment, at least the number of shards, and offsets distinct modulo it.
fn ids_apart(settings: &[Option<(u64, u64)>]) -> bool {
    let known: Vec<(u64, u64)> = settings.iter().flatten().copied().collect();
    let Some(&(increment, _)) = known.first() else {
        return true;
    };
    let offsets: BTreeSet<u64> = known.iter().map(|&(_, o)| o % increment.max(1)).collect();
    known.iter().all(|&(i, _)| i == increment)
        && increment as usize >= settings.len()
        && offsets.len() == known.len()
}

/// Where a statement goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// One shard, by its index in the configuration.
    One(usize),
    /// Several, not all (sorted).
    Several(Vec<usize>),
    /// Every shard: no key decided.
    All,
}

enum Rule {
    Hash,
    /// (exclusive upper bound, shard), in key order; the last has no bound.
    Range(Vec<(Option<i64>, usize)>),
    List(HashMap<Canon, usize>),
}

struct Sharded {
    key: String,
    key_type: KeyType,
    rule: Rule,
    /// The key's position among the table's columns, learnt from a server
    /// ([`ShardMap::learn_position`]); `usize::MAX` until then.
    position: AtomicUsize,
}

impl Sharded {
    fn column<'a>(&'a self, t: &'a TableRef) -> KeyColumn<'a> {
        let position = self.position.load(Ordering::Relaxed);
        KeyColumn {
            schema: &t.schema,
            table: &t.table,
            column: &self.key,
            position: (position != usize::MAX).then_some(position),
        }
    }
}

/// Each shard with the indices of its rows of a multi-row insert.
pub type ShardRows = Vec<(usize, Vec<usize>)>;

/// The configured placement of every table and schema.
pub struct ShardMap {
    names: Vec<String>,
    default: usize,
    tables: HashMap<TableRef, Sharded>,
    schemas: HashMap<String, usize>,
}

impl ShardMap {
    /// Checks the sections against the servers' names; every problem is listed.
    pub fn new(
        shards: &[ShardConfig],
        sharding: &ShardingConfig,
        servers: &[String],
    ) -> Result<ShardMap, Vec<String>> {
        let mut errors = Vec::new();
        let names: Vec<String> = shards.iter().map(|s| s.name.clone()).collect();
        let index = |name: &str, errors: &mut Vec<String>, what: &str| {
            let i = names.iter().position(|n| n == name);
            if i.is_none() {
                errors.push(format!("{what}: no shard is named \"{name}\""));
            }
            i.unwrap_or(0)
        };
        check_shards(shards, servers, &mut errors);
        let default = sharding
            .default_shard
            .as_deref()
            .map_or(0, |d| index(d, &mut errors, "sharding.default_shard"));
        let mut tables = HashMap::new();
        for t in &sharding.tables {
            let what = format!("sharding.tables \"{}\"", t.table);
            let Some((schema, table)) = t.table.split_once('.') else {
                errors.push(format!("{what}: name it as schema.table"));
                continue;
            };
            let rule = match t.method {
                Method::Hash => Rule::Hash,
                Method::Range => Rule::Range(ranges(t, &what, &mut errors, &index)),
                Method::List => Rule::List(lists(t, &what, &mut errors, &index)),
            };
            if t.key.is_empty() {
                errors.push(format!("{what}: key is empty"));
            }
            let name = TableRef {
                schema: schema.to_ascii_lowercase(),
                table: table.to_ascii_lowercase(),
            };
            let sharded = Sharded {
                key: t.key.to_ascii_lowercase(),
                key_type: t.key_type,
                rule,
                position: AtomicUsize::new(usize::MAX),
            };
            if tables.insert(name, sharded).is_some() {
                errors.push(format!("{what}: listed twice"));
            }
        }
        let mut schemas = HashMap::new();
        for s in &sharding.schemas {
            let what = format!("sharding.schemas \"{}\"", s.schema);
            let shard = index(&s.shard, &mut errors, &what);
            if schemas
                .insert(s.schema.to_ascii_lowercase(), shard)
                .is_some()
            {
                errors.push(format!("{what}: listed twice"));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ShardMap {
            names,
            default,
            tables,
            schemas,
        })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Where unsharded tables live, and where a session starts.
    pub fn default_shard(&self) -> usize {
        self.default
    }

    /// The sharded tables and their key columns.
    pub fn sharded_tables(&self) -> impl Iterator<Item = (TableRef, &str)> {
        self.tables.iter().map(|(t, s)| (t.clone(), s.key.as_str()))
    }

    /// The key's position (from 0) among `t`'s columns, as a server reports it.
    pub fn learn_position(&self, t: &TableRef, position: usize) {
        if let Some(s) = self.tables.get(t) {
            s.position.store(position, Ordering::Relaxed);
        }
    }

    /// The shard of a table that is not sharded by a key: its schema's, or the default.
    fn home(&self, t: &TableRef) -> usize {
        self.schemas.get(&t.schema).copied().unwrap_or(self.default)
    }

    /// Where a statement touching `tables` goes, `keys` giving for each sharded table
    /// the values that decide its rows and `params` the bound parameters, if any. A
    /// statement that names no table goes to the default shard.
    pub fn place(
        &self,
        tables: &[TableRef],
        keys: impl Fn(&TableRef, &KeyColumn) -> Keys,
        params: Option<&[Bound]>,
    ) -> Placement {
        let mut shards = BTreeSet::new();
        for t in tables {
            let Some(sharded) = self.tables.get(t) else {
                shards.insert(self.home(t));
                continue;
            };
            let col = sharded.column(t);
            let Keys::Values(values) = keys(t, &col) else {
                return Placement::All;
            };
            for v in &values {
                match self.shard_of(sharded, v, params) {
                    Some(s) => shards.insert(s),
                    None => return Placement::All,
                };
            }
        }
        let shards: Vec<usize> = shards.into_iter().collect();
        match shards.as_slice() {
            [] => Placement::One(self.default),
            [one] => Placement::One(*one),
            all if all.len() == self.names.len() => Placement::All,
            some => Placement::Several(some.to_vec()),
        }
    }

    /// A multi-row insert into sharded table `t` cut into one per shard: each shard
    /// with the indices of its rows, in order; `None` unless every row's key decides
    /// its shard (or `t` is not sharded, or the statement not such an insert).
    pub fn split_insert(
        &self,
        t: &TableRef,
        sql: &[u8],
        default_schema: Option<&str>,
    ) -> Option<(crate::classify::keys::InsertRows, ShardRows)> {
        let sharded = self.tables.get(t)?;
        let rows = crate::classify::keys::insert_rows(sql, default_schema, &sharded.column(t))?;
        let mut by_shard: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, (_, v)) in rows.rows.iter().enumerate() {
            let shard = self.shard_of(sharded, v, None)?;
            match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, list)) => list.push(i),
                None => by_shard.push((shard, vec![i])),
            }
        }
        Some((rows, by_shard))
    }

    /// The shard a key value lives on; `None` when the value does not decide one.
    fn shard_of(&self, t: &Sharded, v: &Value, params: Option<&[Bound]>) -> Option<usize> {
        let canon = canonical(t.key_type, v, params)?;
        Some(match &t.rule {
            Rule::Hash => ((canon.stable_hash() % BUCKETS) % self.names.len() as u64) as usize,
            Rule::Range(ranges) => {
                let Canon::Int(k) = canon else { return None };
                ranges
                    .iter()
                    .find(|(below, _)| below.is_none_or(|b| k < i128::from(b)))?
                    .1
            }
            Rule::List(lists) => lists.get(&canon).copied().unwrap_or(self.default),
        })
    }
}

/// Why the rows of `sql`, a read run on several shards, could not be put together by
/// concatenating each shard's rows; `None` when they can. Only shapes known to concatenate
/// exactly pass: anything ordering, grouping, limiting, de-duplicating or aggregating
/// across rows (at any depth, since a subquery's `LIMIT` is per shard too) is named.
pub fn unmergeable(sql: &[u8]) -> Option<&'static str> {
    shape_problem(sql, Allow::default())
}

/// How the rows of a read run on several shards are put together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// Every shard's rows, one shard after the other, as they come.
    Concat,
    /// Every shard's whole answer to its own statement, then put together
    /// ([`gather::put_together`]): aggregates combined, groups merged, rows sorted and
    /// cut at the limit.
    Gathered(plan::Gather),
}

/// How to put together the rows of `sql`, a read run on several shards; `Err` names
/// what cannot be put together exactly.
pub fn merging(sql: &[u8]) -> Result<Merge, &'static str> {
    let Some(why) = shape_problem(sql, Allow::default()) else {
        return Ok(Merge::Concat);
    };
    let g = plan::gather(sql).map_err(|specific| {
        // The most telling name: the first word no plan takes (HAVING, DISTINCT), else
        // what the plan saw, else GROUP BY itself (`WITH ROLLUP`, an expression), else the first.
        let all = Allow {
            aggregates: true,
            order: true,
            group: true,
        };
        let ungrouped = Allow {
            group: false,
            ..all
        };
        shape_problem(sql, all)
            .or(specific)
            .or_else(|| shape_problem(sql, ungrouped))
            .unwrap_or(why)
    })?;
    // Words the plan took apart at the top level; anywhere else they are still refused
    // by the checks that follow (joins, subqueries, HAVING, ...).
    let allow = Allow {
        order: true,
        aggregates: g.group.is_some(),
        group: g.group.as_ref().is_some_and(|k| !k.is_empty()),
    };
    match shape_problem(sql, allow) {
        None => Ok(Merge::Gathered(g)),
        Some(problem) => Err(problem),
    }
}

/// Words of a read over several shards that the merge takes care of.
#[derive(Debug, Default, Clone, Copy)]
struct Allow {
    aggregates: bool,
    /// `ORDER BY`, `LIMIT`, `OFFSET`.
    order: bool,
    group: bool,
}

/// Words that make a read over several shards answer otherwise than one server would,
/// and how the refusal names them.
const SHAPE_WORDS: &[(&str, &str)] = &[
    ("ORDER", "ORDER BY over several shards"),
    ("GROUP", "GROUP BY over several shards"),
    ("LIMIT", "LIMIT over several shards"),
    ("OFFSET", "LIMIT over several shards"),
    ("FETCH", "LIMIT over several shards"),
    ("DISTINCT", "DISTINCT over several shards"),
    ("DISTINCTROW", "DISTINCT over several shards"),
    ("HAVING", "HAVING over several shards"),
    ("UNION", "UNION over several shards"),
    ("INTERSECT", "INTERSECT over several shards"),
    ("EXCEPT", "EXCEPT over several shards"),
    ("OVER", "window functions over several shards"),
    ("WINDOW", "window functions over several shards"),
    ("INTO", "SELECT ... INTO over several shards"),
    ("JOIN", "joins over several shards"),
];

/// Aggregate functions: each shard's aggregate is not the aggregate of all the rows.
const AGGREGATES: &[&str] = &[
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "GROUP_CONCAT",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
];

/// What in `sql`, besides what `allow` lets through, makes its rows from several shards
/// differ from one server's answer: a word of [`SHAPE_WORDS`], an aggregate, a join, a
/// subquery.
fn shape_problem(sql: &[u8], allow: Allow) -> Option<&'static str> {
    use crate::classify::sql::{code_token, Kind, Lexer};
    let mut lex = Lexer::new(sql);
    let mut previous: Option<(Kind, usize, usize)> = None;
    let mut froms = 0;
    let mut depth = 0usize;
    // In the table list after the outer FROM.
    let mut in_from = false;
    while let Some(t) = code_token(&mut lex) {
        let word = |(k, a, b): (Kind, usize, usize)| -> &[u8] {
            if k == Kind::Word {
                &sql[a..b]
            } else {
                &[]
            }
        };
        let this = word((t.kind, t.start, t.end));
        if let Some(why) = refused_word(this, allow) {
            return Some(why);
        }
        let is = |words: &[&str]| {
            words
                .iter()
                .any(|w| this.eq_ignore_ascii_case(w.as_bytes()))
        };
        if this.eq_ignore_ascii_case(b"FROM") {
            froms += 1;
            in_from = depth == 0;
        } else if depth == 0 && in_from && is(&["WHERE", "GROUP", "ORDER", "LIMIT", "HAVING"]) {
            // The table list ends; a comma after it is not a join.
            in_from = false;
        }
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => depth = depth.saturating_sub(1),
            _ => {}
        }
        if t.kind == Kind::Punct(b'(')
            && !allow.aggregates
            && previous.is_some_and(|p| is_aggregate(word(p)))
        {
            return Some("aggregate functions over several shards");
        }
        if t.kind == Kind::Punct(b',') && in_from && depth == 0 {
            // `FROM a, b`: a join written with commas (or a list after the FROM, which
            // only joins have).
            return Some("joins over several shards");
        }
        previous = Some((t.kind, t.start, t.end));
    }
    (froms > 1).then_some("subqueries over several shards")
}

/// Why `word` (empty when not a word) is refused over several shards, unless `allow`
/// lets it through.
fn refused_word(word: &[u8], allow: Allow) -> Option<&'static str> {
    let is = |words: &[&str]| {
        words
            .iter()
            .any(|w| word.eq_ignore_ascii_case(w.as_bytes()))
    };
    let allowed = allow.order && is(&["ORDER", "LIMIT", "OFFSET"]) || allow.group && is(&["GROUP"]);
    SHAPE_WORDS
        .iter()
        .find(|(w, _)| word.eq_ignore_ascii_case(w.as_bytes()))
        .filter(|_| !allowed)
        .map(|(_, why)| *why)
}

/// Whether `name` is an aggregate function's.
fn is_aggregate(name: &[u8]) -> bool {
    AGGREGATES
        .iter()
        .any(|a| name.eq_ignore_ascii_case(a.as_bytes()))
}

fn check_shards(shards: &[ShardConfig], servers: &[String], errors: &mut Vec<String>) {
    if shards.is_empty() {
        errors.push("sharding needs at least one [[shards]]".into());
    }
    let mut owner: HashMap<&str, &str> = HashMap::new();
    for (i, s) in shards.iter().enumerate() {
        if shards[..i].iter().any(|o| o.name == s.name) {
            errors.push(format!("shards \"{}\": the name is used twice", s.name));
        }
        if s.servers.is_empty() {
            errors.push(format!("shards \"{}\": no servers", s.name));
        }
        for server in &s.servers {
            if !servers.contains(server) {
                errors.push(format!(
                    "shards \"{}\": no [[servers]] is named \"{server}\"",
                    s.name
                ));
            } else if let Some(other) = owner.insert(server, &s.name) {
                errors.push(format!(
                    "server \"{server}\" is in shards \"{other}\" and \"{}\"",
                    s.name
                ));
            }
        }
    }
    for server in servers {
        if !shards.is_empty() && !owner.contains_key(server.as_str()) {
            errors.push(format!("server \"{server}\" is in no [[shards]]"));
        }
    }
}

type Index<'a> = dyn Fn(&str, &mut Vec<String>, &str) -> usize + 'a;

fn ranges(
    t: &config::TableConfig,
    what: &str,
    errors: &mut Vec<String>,
    index: &Index,
) -> Vec<(Option<i64>, usize)> {
    if t.key_type != KeyType::Integer {
        errors.push(format!("{what}: ranges need an integer key"));
    }
    if t.ranges.last().is_none_or(|r| r.below.is_some()) {
        errors.push(format!("{what}: the last range must have no `below`"));
    }
    let mut previous = None;
    let mut out = Vec::new();
    for (i, r) in t.ranges.iter().enumerate() {
        if i + 1 < t.ranges.len() && r.below.is_none() {
            errors.push(format!("{what}: only the last range may have no `below`"));
        }
        if let (Some(p), Some(b)) = (previous, r.below) {
            if b <= p {
                errors.push(format!("{what}: ranges must be in increasing order"));
            }
        }
        previous = r.below.or(previous);
        out.push((r.below, index(&r.shard, errors, what)));
    }
    out
}

fn lists(
    t: &config::TableConfig,
    what: &str,
    errors: &mut Vec<String>,
    index: &Index,
) -> HashMap<Canon, usize> {
    let mut out = HashMap::new();
    for l in &t.lists {
        let shard = index(&l.shard, errors, what);
        for v in &l.values {
            let value = match v {
                toml::Value::Integer(i) => Value::Number(i.to_string()),
                toml::Value::String(s) => Value::Str(s.as_bytes().to_vec()),
                other => {
                    errors.push(format!("{what}: {other} is not a key value"));
                    continue;
                }
            };
            let Some(canon) = canonical(t.key_type, &value, None) else {
                errors.push(format!("{what}: {v} is not a {:?} key", t.key_type));
                continue;
            };
            if out.insert(canon, shard).is_some() {
                errors.push(format!("{what}: {v} is listed twice"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_merge;
