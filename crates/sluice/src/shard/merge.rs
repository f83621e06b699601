//! Aggregates over several shards: `SELECT COUNT(..), SUM(..), MIN(..), MAX(..) FROM ...`
//! with no `GROUP BY`, each shard answering one row that is combined here, exactly or
//! not at all. Values are combined as the server computes them: integers and decimals
//! as exact numbers; a float sum (whose last digits depend on the order of additions)
//! or a string minimum (which depends on the collation) is refused.

use crate::classify::sql::{code_token, ident_text, Kind, Lexer};

/// One column of the select list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    Count,
    Sum,
    Min,
    Max,
}

/// The aggregates of a select list made of nothing else (each optionally aliased);
/// `None` for any other statement.
pub fn aggregates(sql: &[u8]) -> Option<Vec<Agg>> {
    let mut lex = Lexer::new(sql);
    let t = code_token(&mut lex)?;
    if !word_is(sql, t.kind, t.start, t.end, "SELECT") {
        return None;
    }
    let mut aggs = Vec::new();
    loop {
        let name = code_token(&mut lex)?;
        let agg = [
            ("COUNT", Agg::Count),
            ("SUM", Agg::Sum),
            ("MIN", Agg::Min),
            ("MAX", Agg::Max),
        ]
        .into_iter()
        .find(|(w, _)| word_is(sql, name.kind, name.start, name.end, w))?
        .1;
        if code_token(&mut lex)?.kind != Kind::Punct(b'(') {
            return None;
        }
        // The argument, up to its closing parenthesis: no DISTINCT, no subquery.
        let mut depth = 1;
        while depth > 0 {
            let t = code_token(&mut lex)?;
            match t.kind {
                Kind::Punct(b'(') => depth += 1,
                Kind::Punct(b')') => depth -= 1,
                _ if ["DISTINCT", "SELECT", "ALL"]
                    .iter()
                    .any(|w| word_is(sql, t.kind, t.start, t.end, w)) =>
                {
                    return None
                }
                _ => {}
            }
        }
        aggs.push(agg);
        let mut next = code_token(&mut lex)?;
        if word_is(sql, next.kind, next.start, next.end, "AS") {
            code_token(&mut lex)?;
            next = code_token(&mut lex)?;
        } else if matches!(next.kind, Kind::Word | Kind::Quoted)
            && !word_is(sql, next.kind, next.start, next.end, "FROM")
        {
            next = code_token(&mut lex)?;
        }
        if next.kind == Kind::Punct(b',') {
            continue;
        }
        return word_is(sql, next.kind, next.start, next.end, "FROM").then_some(aggs);
    }
}

fn word_is(sql: &[u8], kind: Kind, start: usize, end: usize, w: &str) -> bool {
    kind == Kind::Word && sql[start..end].eq_ignore_ascii_case(w.as_bytes())
}

/// A column an `ORDER BY` names: by name (its last part, lowercased) or 1-based position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderKey {
    Name(String),
    Position(usize),
}

/// `... ORDER BY k [ASC|DESC], ... LIMIT n` at the end of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLimit {
    /// The keys, each with whether it is descending.
    pub keys: Vec<(OrderKey, bool)>,
    pub limit: u64,
}

/// Rows a sorted read over several shards may keep per shard: each sends its first
/// `LIMIT`, all of which are held until every shard answered.
pub const MAX_LIMIT: u64 = 10_000;

/// The `ORDER BY ... LIMIT n` ending `sql` (no `OFFSET`, `n` at most [`MAX_LIMIT`]),
/// when it ends that way at its top level.
pub fn order_limit(sql: &[u8]) -> Option<OrderLimit> {
    let mut lex = Lexer::new(sql);
    let mut toks = Vec::new();
    while let Some(t) = code_token(&mut lex) {
        if t.kind == Kind::Punct(b';') {
            break;
        }
        toks.push(t);
    }
    let word = |i: usize, w: &str| {
        toks.get(i)
            .is_some_and(|t| word_is(sql, t.kind, t.start, t.end, w))
    };
    let mut depth = 0i32;
    let mut order = None;
    for (i, t) in toks.iter().enumerate() {
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => depth -= 1,
            _ if depth == 0 && word(i, "ORDER") && word(i + 1, "BY") => order = Some(i + 2),
            _ => {}
        }
    }
    let start = order?;
    let limit_at = (start..toks.len()).find(|&i| word(i, "LIMIT"))?;
    // `LIMIT n` and nothing after it.
    if limit_at + 2 != toks.len() || toks[limit_at + 1].kind != Kind::Number {
        return None;
    }
    let t = toks[limit_at + 1];
    let limit: u64 = std::str::from_utf8(&sql[t.start..t.end])
        .ok()?
        .parse()
        .ok()?;
    if limit > MAX_LIMIT {
        return None;
    }
    let mut keys = Vec::new();
    let mut i = start;
    while i < limit_at {
        let t = toks[i];
        let mut key = match t.kind {
            Kind::Number => OrderKey::Position(
                std::str::from_utf8(&sql[t.start..t.end])
                    .ok()?
                    .parse()
                    .ok()?,
            ),
            Kind::Word | Kind::Quoted => OrderKey::Name(ident_text(sql, t)),
            _ => return None,
        };
        i += 1;
        // `table.column`: the column.
        while i + 1 < limit_at && toks[i].kind == Kind::Punct(b'.') {
            let t = toks[i + 1];
            if !matches!(t.kind, Kind::Word | Kind::Quoted) {
                return None;
            }
            key = OrderKey::Name(ident_text(sql, t));
            i += 2;
        }
        let mut desc = false;
        if word(i, "DESC") {
            desc = true;
            i += 1;
        } else if word(i, "ASC") {
            i += 1;
        }
        keys.push((key, desc));
        if i < limit_at {
            if toks[i].kind != Kind::Punct(b',') {
                return None;
            }
            i += 1;
        }
    }
    (!keys.is_empty()).then_some(OrderLimit { keys, limit })
}

/// How a column's text values compare as the server orders them; `None` when that
/// depends on a collation or a format Sluice does not reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Integers and decimals.
    Number,
    /// Binary strings, and dates and datetimes (whose text sorts as they do).
    Bytes,
}

impl Compare {
    pub fn of(column_type: u8, charset: u16) -> Option<Compare> {
        match column_type {
            t if exact(t) => Some(Compare::Number),
            // DATE, DATETIME, TIMESTAMP, NEWDATE.
            10 | 12 | 7 | 14 => Some(Compare::Bytes),
            // VARCHAR, VAR_STRING, STRING, BLOBs under the binary collation.
            15 | 253 | 254 | 249..=252 if charset == 63 => Some(Compare::Bytes),
            _ => None,
        }
    }

    /// The order of two values; NULL first, as the server sorts it ascending.
    pub fn cmp(self, a: Option<&[u8]>, b: Option<&[u8]>) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (a, b) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => match self {
                Compare::Bytes => a.cmp(b),
                Compare::Number => match (Num::parse(a), Num::parse(b)) {
                    (Some(x), Some(y)) => {
                        let scale = x.scale.max(y.scale);
                        match (x.rescaled(scale), y.rescaled(scale)) {
                            (Some(x), Some(y)) => x.cmp(&y),
                            _ => a.cmp(b),
                        }
                    }
                    _ => a.cmp(b),
                },
            },
        }
    }
}

/// An exact number: an integer scaled by 10^scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Num {
    value: i128,
    scale: u32,
}

impl Num {
    pub(super) fn parse(text: &[u8]) -> Option<Num> {
        let text = std::str::from_utf8(text).ok()?;
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let negative = whole.starts_with('-');
        let digits = whole.trim_start_matches('-');
        if digits.is_empty() && fraction.is_empty()
            || !digits
                .bytes()
                .chain(fraction.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let magnitude: i128 = format!("{digits}{fraction}").parse().ok()?;
        Some(Num {
            value: if negative { -magnitude } else { magnitude },
            scale: fraction.len() as u32,
        })
    }

    /// The integer it is, when its fraction is all zeros (`7.00`).
    pub(super) fn integer(self) -> Option<i128> {
        let unit = 10i128.checked_pow(self.scale)?;
        (self.value % unit == 0).then(|| self.value / unit)
    }

    fn rescaled(self, scale: u32) -> Option<i128> {
        self.value
            .checked_mul(10i128.checked_pow(scale - self.scale)?)
    }

    fn text(self) -> Vec<u8> {
        let digits = self.value.unsigned_abs().to_string();
        let scale = self.scale as usize;
        let digits = format!("{digits:0>width$}", width = scale + 1);
        let (whole, fraction) = digits.split_at(digits.len() - scale);
        let sign = if self.value < 0 { "-" } else { "" };
        match scale {
            0 => format!("{sign}{whole}"),
            _ => format!("{sign}{whole}.{fraction}"),
        }
        .into_bytes()
    }
}

/// Whether a column of this `MYSQL_TYPE_*` holds exact numbers.
fn exact(column_type: u8) -> bool {
    // TINY, SHORT, LONG, LONGLONG, INT24, YEAR, DECIMAL, NEWDECIMAL.
    matches!(column_type, 1 | 2 | 3 | 8 | 9 | 13 | 0 | 246)
}

/// The shards' rows combined, column by column.
pub struct Merger {
    aggs: Vec<Agg>,
    values: Vec<Option<Num>>,
}

impl Merger {
    pub fn new(aggs: Vec<Agg>) -> Merger {
        let values = vec![None; aggs.len()];
        Merger { aggs, values }
    }

    /// Takes in one shard's row, its columns of types `types`. `Err` names why the
    /// combination could not be exact.
    pub fn add(&mut self, types: &[u8], row: &[Option<&[u8]>]) -> Result<(), &'static str> {
        if types.len() != self.aggs.len() || row.len() != self.aggs.len() {
            return Err("aggregates whose columns differ between shards");
        }
        for (i, agg) in self.aggs.iter().enumerate() {
            if !exact(types[i]) {
                return Err("an aggregate over several shards of a column that is not an integer or a decimal");
            }
            let Some(text) = row[i] else { continue };
            let n = Num::parse(text).ok_or("an aggregate value that is not a number")?;
            let merged = match self.values[i] {
                None => n,
                Some(acc) => {
                    combine(*agg, acc, n).ok_or("an aggregate too large to combine exactly")?
                }
            };
            self.values[i] = Some(merged);
        }
        Ok(())
    }

    /// The combined row's values: `NULL` where no shard had one (a `SUM`, `MIN` or
    /// `MAX` over no rows), `0` for a `COUNT` no shard counted.
    pub fn row(&self) -> Vec<Option<Vec<u8>>> {
        self.aggs
            .iter()
            .zip(&self.values)
            .map(|(agg, v)| match (agg, v) {
                (_, Some(n)) => Some(n.text()),
                (Agg::Count, None) => Some(b"0".to_vec()),
                (_, None) => None,
            })
            .collect()
    }
}

fn combine(agg: Agg, a: Num, b: Num) -> Option<Num> {
    let scale = a.scale.max(b.scale);
    let (x, y) = (a.rescaled(scale)?, b.rescaled(scale)?);
    let value = match agg {
        Agg::Count | Agg::Sum => x.checked_add(y)?,
        Agg::Min => x.min(y),
        Agg::Max => x.max(y),
    };
    Some(Num { value, scale })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_lists_of_aggregates_only() {
        use Agg::*;
        assert_eq!(
            aggregates(b"SELECT COUNT(*), sum(x) AS s, MIN(y) m, MAX(`z`) FROM t WHERE a = 1"),
            Some(vec![Count, Sum, Min, Max])
        );
        for sql in [
            "SELECT COUNT(DISTINCT x) FROM t",
            "SELECT COUNT(*), x FROM t",
            "SELECT AVG(x) FROM t",
            "SELECT COUNT(*) + 1 FROM t",
            "SELECT SUM((SELECT 1)) FROM t",
            "SELECT 1",
        ] {
            assert_eq!(aggregates(sql.as_bytes()), None, "{sql}");
        }
    }

    #[test]
    fn exact_numbers_combine_exactly() {
        let mut m = Merger::new(vec![Agg::Count, Agg::Sum, Agg::Min, Agg::Max]);
        let types = [8, 246, 3, 246];
        m.add(
            &types,
            &[Some(b"3"), Some(b"10.50"), Some(b"-4"), Some(b"2.5")],
        )
        .unwrap();
        m.add(&types, &[Some(b"0"), None, None, None]).unwrap();
        m.add(
            &types,
            &[Some(b"2"), Some(b"-0.75"), Some(b"7"), Some(b"12.25")],
        )
        .unwrap();
        let row = m.row();
        let text: Vec<Option<&str>> = row
            .iter()
            .map(|v| v.as_deref().map(|b| std::str::from_utf8(b).unwrap()))
            .collect();
        assert_eq!(text, [Some("5"), Some("9.75"), Some("-4"), Some("12.25")]);
        let empty = Merger::new(vec![Agg::Count, Agg::Sum]);
        assert_eq!(empty.row(), vec![Some(b"0".to_vec()), None]);
    }

    #[test]
    fn order_by_and_limit_at_the_end() {
        let o =
            order_limit(b"SELECT id, v FROM t WHERE x = 1 ORDER BY t.v DESC, 1 LIMIT 5").unwrap();
        assert_eq!(
            o.keys,
            [
                (OrderKey::Name("v".into()), true),
                (OrderKey::Position(1), false)
            ]
        );
        assert_eq!(o.limit, 5);
        for sql in [
            "SELECT * FROM t ORDER BY id",
            "SELECT * FROM t ORDER BY id LIMIT 5 OFFSET 5",
            "SELECT * FROM t ORDER BY id LIMIT 5, 5",
            "SELECT * FROM t ORDER BY id + 1 LIMIT 5",
            "SELECT * FROM t ORDER BY id LIMIT 100000",
            "SELECT * FROM t ORDER BY id LIMIT 5 FOR UPDATE",
            "SELECT * FROM t LIMIT 5",
        ] {
            assert_eq!(order_limit(sql.as_bytes()), None, "{sql}");
        }
    }

    #[test]
    fn values_order_as_the_server_orders_them() {
        use std::cmp::Ordering::*;
        let n = Compare::of(3, 63).unwrap();
        assert_eq!(n.cmp(Some(b"9"), Some(b"10")), Less);
        assert_eq!(n.cmp(Some(b"-1.5"), Some(b"-1.25")), Less);
        assert_eq!(n.cmp(None, Some(b"-100")), Less);
        assert_eq!(Compare::of(12, 8), Some(Compare::Bytes), "DATETIME");
        assert_eq!(Compare::of(253, 45), None, "utf8mb4 VARCHAR");
        assert_eq!(Compare::of(253, 63), Some(Compare::Bytes), "VARBINARY");
        assert_eq!(Compare::of(5, 63), None, "DOUBLE");
    }

    #[test]
    fn inexact_columns_are_refused() {
        let mut m = Merger::new(vec![Agg::Sum]);
        assert!(m.add(&[5], &[Some(b"0.1")]).is_err(), "DOUBLE");
        let mut m = Merger::new(vec![Agg::Min]);
        assert!(m.add(&[253], &[Some(b"abc")]).is_err(), "VARCHAR");
        assert_eq!(Num::parse(b"-0.05").unwrap().text(), b"-0.05");
        assert_eq!(Num::parse(b"12").unwrap().text(), b"12");
    }
}
