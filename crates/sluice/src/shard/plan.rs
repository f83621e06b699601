//! Reads over several shards whose answers are read whole and then put together
//! ([`super::gather`]): the shape of such a read (its select list, `GROUP BY`,
//! `ORDER BY`, `LIMIT ... OFFSET`), and what each shard is asked instead of the
//! client's statement so that the rows can be put together exactly: `AVG(x)` also as
//! `SUM(x), COUNT(x)`, the limit raised by the offset, a grouped read's limit dropped.

use super::merge::{Agg, OrderKey, MAX_LIMIT};
use crate::classify::sql::{code_token, ident_text, is_one_of, Kind, Lexer, Tok};

/// What one column of the shards' answers holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// A value shown as a shard sent it: a `GROUP BY` key, or any column of rows that
    /// are not grouped.
    Plain,
    /// An aggregate, combined across shards.
    Agg(Agg),
    /// `AVG`, computed from the `SUM` and `COUNT` columns at these positions.
    Avg { sum: usize, count: usize },
    /// A `SUM` or `COUNT` asked of the shards for an `AVG`, not shown to the client.
    Part(Agg),
}

/// A read to run on every shard, whose whole answers are then put together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gather {
    /// The statement each shard runs.
    pub sql: Vec<u8>,
    /// Each column of the shards' answers; empty when every column is [`Column::Plain`].
    pub columns: Vec<Column>,
    /// Columns at the end of the shards' answers that the client does not see.
    pub hidden: usize,
    /// Rows combine into one when their values in these columns are equal; each with
    /// whether the server orders its groups descending. `Some(empty)`: every row is one
    /// group (aggregates without `GROUP BY`). `None`: rows do not combine.
    pub group: Option<Vec<(usize, bool)>>,
    /// The client's `ORDER BY` (result columns), each with whether it is descending.
    pub order: Vec<(OrderKey, bool)>,
    pub offset: u64,
    pub limit: Option<u64>,
    /// Rows a shard may send; an answer with more is refused, not cut.
    pub keep: usize,
}

/// One item of a select list that Sluice can put together.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// A column, by its name (the last part, lowercased).
    Column(String),
    Agg(Agg),
    /// `AVG(...)`, with the byte range of its argument.
    Avg(usize, usize),
}

/// The parts of a read this module understands, as byte offsets into it.
#[derive(Debug, Default)]
struct Shape {
    /// `None` when the select list is not made only of columns and aggregates.
    select: Option<Vec<Item>>,
    /// Where the outer `FROM` starts.
    from: usize,
    group: Option<Vec<(OrderKey, bool)>>,
    order: Vec<(OrderKey, bool)>,
    /// `(row count, offset)`.
    limit: Option<(u64, u64)>,
    /// Where the outer `ORDER BY`, else `LIMIT`, else the statement's end is.
    tail: usize,
    /// Where the outer `LIMIT` is, else the statement's end.
    limit_at: usize,
}

/// How to run `sql` on several shards and put its rows together; `Err(None)` when it
/// is not such a read (the caller names the shape), `Err(Some(why))` when it is one
/// that cannot be put together exactly.
pub fn gather(sql: &[u8]) -> Result<Gather, Option<&'static str>> {
    let shape = Shape::parse(sql).ok_or(None)?;
    let aggregated = shape
        .select
        .as_ref()
        .is_some_and(|s| s.iter().any(|i| !matches!(i, Item::Column(_))));
    match (&shape.group, aggregated) {
        (None, false) => sorted(sql, &shape),
        (None, true) => {
            if !shape.order.is_empty() || shape.limit.is_some() {
                return Err(None);
            }
            let items = shape.select.as_deref().unwrap_or_default();
            if items.iter().any(|i| matches!(i, Item::Column(_))) {
                return Err(None);
            }
            let mut g = with_aggregates(sql, &shape, items, Vec::new());
            g.keep = 1;
            Ok(g)
        }
        (Some(keys), _) => grouped(sql, &shape, keys),
    }
}

/// `ORDER BY ... LIMIT n [OFFSET m]` of plain rows: each shard's first `n + m`.
fn sorted(sql: &[u8], shape: &Shape) -> Result<Gather, Option<&'static str>> {
    let (n, m) = shape.limit.ok_or(None)?;
    let fetch = n.checked_add(m).filter(|&f| f <= MAX_LIMIT).ok_or(None)?;
    if shape.order.is_empty() {
        return Err(None);
    }
    let mut text = sql[..shape.limit_at].to_vec();
    text.extend_from_slice(format!("LIMIT {fetch}").as_bytes());
    Ok(Gather {
        sql: text,
        columns: Vec::new(),
        hidden: 0,
        group: None,
        order: shape.order.clone(),
        offset: m,
        limit: Some(n),
        keep: fetch as usize,
    })
}

/// `GROUP BY` on result columns, every other column an aggregate: each shard's groups
/// (all of them: a limit applies to the merged groups).
fn grouped(
    sql: &[u8],
    shape: &Shape,
    keys: &[(OrderKey, bool)],
) -> Result<Gather, Option<&'static str>> {
    const HIDDEN: &str = "GROUP BY over several shards on a column the result does not show";
    let items = shape.select.as_deref().ok_or(Some(
        "GROUP BY over several shards of a select list with other than columns and aggregates",
    ))?;
    let mut group = Vec::new();
    let mut names = Vec::new();
    for (key, desc) in keys {
        let index = match key {
            OrderKey::Position(p) => p
                .checked_sub(1)
                .filter(|&i| matches!(items.get(i), Some(Item::Column(_)))),
            // A name in GROUP BY is the table's column before any alias, so only a
            // column shown under its own name can be matched.
            OrderKey::Name(n) => items.iter().position(|i| *i == Item::Column(n.clone())),
        }
        .ok_or(Some(HIDDEN))?;
        if let Item::Column(name) = &items[index] {
            names.push(name.clone());
        }
        group.push((index, *desc));
    }
    if items
        .iter()
        .any(|i| matches!(i, Item::Column(n) if !names.contains(n)))
    {
        return Err(Some(
            "a column over several shards that is neither grouped by nor aggregated",
        ));
    }
    let mut g = with_aggregates(sql, shape, items, group);
    g.order = shape.order.clone();
    if let Some((n, m)) = shape.limit {
        g.limit = Some(n);
        g.offset = m;
    }
    Ok(g)
}

/// The statement with `SUM` and `COUNT` of each `AVG`'s argument added to its select
/// list (after the client's columns, so that positions keep their meaning), cut before
/// its `ORDER BY` and `LIMIT`.
fn with_aggregates(sql: &[u8], shape: &Shape, items: &[Item], group: Vec<(usize, bool)>) -> Gather {
    let mut columns = Vec::new();
    let mut extra = Vec::new();
    for item in items {
        columns.push(match item {
            Item::Column(_) => Column::Plain,
            Item::Agg(a) => Column::Agg(*a),
            &Item::Avg(a, b) => {
                let sum = items.len() + 2 * extra.len();
                let arg = String::from_utf8_lossy(&sql[a..b]);
                extra.push(format!(", SUM({arg}), COUNT({arg})"));
                Column::Avg {
                    sum,
                    count: sum + 1,
                }
            }
        });
    }
    let hidden = extra.len() * 2;
    columns
        .extend((0..extra.len()).flat_map(|_| [Column::Part(Agg::Sum), Column::Part(Agg::Count)]));
    let mut text = sql[..shape.from].to_vec();
    for e in &extra {
        text.extend_from_slice(e.as_bytes());
    }
    text.push(b' ');
    text.extend_from_slice(&sql[shape.from..shape.tail]);
    Gather {
        sql: text,
        columns,
        hidden,
        group: Some(group),
        order: Vec::new(),
        offset: 0,
        limit: None,
        keep: MAX_LIMIT as usize,
    }
}

impl Shape {
    fn parse(sql: &[u8]) -> Option<Shape> {
        let mut lex = Lexer::new(sql);
        let mut toks = Vec::new();
        while let Some(t) = code_token(&mut lex) {
            if t.kind == Kind::Punct(b';') {
                break;
            }
            toks.push(t);
        }
        if !is_one_of(sql, toks.first()?, &["SELECT"]) {
            return None;
        }
        let end = toks.last().map_or(0, |t| t.end);
        // The outer clauses: (token index, which).
        let mut depth = 0i32;
        let mut outer = Vec::new();
        for (i, t) in toks.iter().enumerate() {
            match t.kind {
                Kind::Punct(b'(') => depth += 1,
                Kind::Punct(b')') => depth -= 1,
                _ if depth == 0 => {
                    let by = toks.get(i + 1).is_some_and(|n| is_one_of(sql, n, &["BY"]));
                    for w in ["FROM", "LIMIT"] {
                        if is_one_of(sql, t, &[w]) {
                            outer.push((i, w));
                        }
                    }
                    for w in ["GROUP", "ORDER"] {
                        if by && is_one_of(sql, t, &[w]) {
                            outer.push((i, w));
                        }
                    }
                }
                _ => {}
            }
        }
        let find = |w: &str| outer.iter().find(|(_, x)| *x == w).map(|&(i, _)| i);
        let from = find("FROM")?;
        let mut shape = Shape {
            select: select_list(sql, &toks[1..from]),
            from: toks[from].start,
            tail: end,
            limit_at: end,
            ..Shape::default()
        };
        // The clauses after FROM that are understood, in the order SQL writes them,
        // each running to the next; anything else in between is left in the FROM part.
        let group = find("GROUP");
        let order = find("ORDER");
        let limit = find("LIMIT");
        let ends = [group, order, limit, Some(toks.len())];
        let next = |after: usize| ends.iter().flatten().copied().find(|&e| e > after);
        if let Some(g) = group {
            shape.group = Some(key_list(sql, &toks[g + 2..next(g)?])?);
        }
        if let Some(o) = order {
            shape.order = key_list(sql, &toks[o + 2..next(o)?])?;
            shape.tail = toks[o].start;
        }
        if let Some(l) = limit {
            shape.limit = Some(limit_clause(sql, &toks[l + 1..])?);
            shape.limit_at = toks[l].start;
            shape.tail = shape.tail.min(toks[l].start);
        }
        // Out of order (`LIMIT` before `ORDER BY`), or a clause the list hides.
        let at: Vec<usize> = [group, order, limit].into_iter().flatten().collect();
        if at.windows(2).any(|w| w[0] > w[1]) || outer.len() != 1 + at.len() {
            return None;
        }
        Some(shape)
    }
}

/// `k [ASC|DESC], ...`: each a result column's name or position. `None` for anything
/// else (an expression, `WITH ROLLUP`, `HAVING`, a locking clause).
fn key_list(sql: &[u8], toks: &[Tok]) -> Option<Vec<(OrderKey, bool)>> {
    let mut keys = Vec::new();
    for item in toks.split(|t| t.kind == Kind::Punct(b',')) {
        let (first, rest) = item.split_first()?;
        let mut key = match first.kind {
            Kind::Number => OrderKey::Position(text(sql, first)?.parse().ok()?),
            Kind::Word | Kind::Quoted => OrderKey::Name(ident_text(sql, *first)),
            _ => return None,
        };
        let mut rest = rest;
        // `table.column`: the column.
        while let [dot, name, after @ ..] = rest {
            if dot.kind != Kind::Punct(b'.') || !matches!(name.kind, Kind::Word | Kind::Quoted) {
                break;
            }
            key = OrderKey::Name(ident_text(sql, *name));
            rest = after;
        }
        let desc = match rest {
            [] => false,
            [w] if is_one_of(sql, w, &["ASC"]) => false,
            [w] if is_one_of(sql, w, &["DESC"]) => true,
            _ => return None,
        };
        keys.push((key, desc));
    }
    (!keys.is_empty()).then_some(keys)
}

/// `n`, `n OFFSET m` or `m, n`, and nothing after: `(n, m)`.
fn limit_clause(sql: &[u8], toks: &[Tok]) -> Option<(u64, u64)> {
    let number = |t: &Tok| -> Option<u64> {
        (t.kind == Kind::Number).then_some(())?;
        text(sql, t)?.parse().ok()
    };
    match toks {
        [n] => Some((number(n)?, 0)),
        [n, w, m] if is_one_of(sql, w, &["OFFSET"]) => Some((number(n)?, number(m)?)),
        [m, c, n] if c.kind == Kind::Punct(b',') => Some((number(n)?, number(m)?)),
        _ => None,
    }
}

fn text<'a>(sql: &'a [u8], t: &Tok) -> Option<&'a str> {
    std::str::from_utf8(&sql[t.start..t.end]).ok()
}

/// The select list's items, when each is a column or one of the aggregates Sluice
/// combines, optionally aliased.
fn select_list(sql: &[u8], toks: &[Tok]) -> Option<Vec<Item>> {
    // Options that change what the statement does (or that could be taken for a
    // column): left to the shapes that do not read the select list.
    const OPTIONS: &[&str] = &[
        "ALL",
        "DISTINCT",
        "DISTINCTROW",
        "HIGH_PRIORITY",
        "STRAIGHT_JOIN",
        "SQL_SMALL_RESULT",
        "SQL_BIG_RESULT",
        "SQL_BUFFER_RESULT",
        "SQL_CACHE",
        "SQL_NO_CACHE",
        "SQL_CALC_FOUND_ROWS",
    ];
    if is_one_of(sql, toks.first()?, OPTIONS) {
        return None;
    }
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => depth -= 1,
            Kind::Punct(b',') if depth == 0 => {
                items.push(item(sql, &toks[start..i])?);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(item(sql, &toks[start..])?);
    Some(items)
}

fn item(sql: &[u8], toks: &[Tok]) -> Option<Item> {
    let name = |t: &Tok| matches!(t.kind, Kind::Word | Kind::Quoted);
    let (value, rest) = match toks {
        [f, open, ..] if f.kind == Kind::Word && open.kind == Kind::Punct(b'(') => {
            let agg = [
                ("COUNT", Some(Agg::Count)),
                ("SUM", Some(Agg::Sum)),
                ("MIN", Some(Agg::Min)),
                ("MAX", Some(Agg::Max)),
                ("AVG", None),
            ]
            .into_iter()
            .find(|(w, _)| is_one_of(sql, f, &[w]))?
            .1;
            let mut depth = 0;
            let close = toks.iter().position(|t| {
                match t.kind {
                    Kind::Punct(b'(') => depth += 1,
                    Kind::Punct(b')') => depth -= 1,
                    _ => {}
                }
                depth == 0 && t.kind == Kind::Punct(b')')
            })?;
            // DISTINCT, ALL or a subquery in the argument: not combined.
            let inner = &toks[2..close];
            if inner.is_empty()
                || inner
                    .iter()
                    .any(|t| is_one_of(sql, t, &["DISTINCT", "ALL", "SELECT"]))
            {
                return None;
            }
            let value = match agg {
                Some(a) => Item::Agg(a),
                None => Item::Avg(open.end, toks[close].start),
            };
            (value, &toks[close + 1..])
        }
        [first, ..] if name(first) => {
            let mut last = *first;
            let mut rest = &toks[1..];
            while let [dot, n, after @ ..] = rest {
                if dot.kind != Kind::Punct(b'.') || !name(n) {
                    break;
                }
                last = *n;
                rest = after;
            }
            (Item::Column(ident_text(sql, last)), rest)
        }
        _ => return None,
    };
    let alias = |t: &Tok| name(t) || matches!(t.kind, Kind::Str(_));
    match rest {
        [] => Some(value),
        [a] if alias(a) && !is_one_of(sql, a, &["AS"]) => Some(value),
        [word, a] if is_one_of(sql, word, &["AS"]) && alias(a) => Some(value),
        _ => None,
    }
}
