//! Aggregates over several shards: `SELECT COUNT(..), SUM(..), MIN(..), MAX(..) FROM ...`
//! with no `GROUP BY`, each shard answering one row that is combined here, exactly or
//! not at all. Values are combined as the server computes them: integers and decimals
//! as exact numbers; a float sum (whose last digits depend on the order of additions)
//! or a string minimum (which depends on the collation) is refused.

use crate::classify::sql::{code_token, Kind, Lexer};

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

/// An exact number: an integer scaled by 10^scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Num {
    value: i128,
    scale: u32,
}

impl Num {
    fn parse(text: &[u8]) -> Option<Num> {
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
    fn inexact_columns_are_refused() {
        let mut m = Merger::new(vec![Agg::Sum]);
        assert!(m.add(&[5], &[Some(b"0.1")]).is_err(), "DOUBLE");
        let mut m = Merger::new(vec![Agg::Min]);
        assert!(m.add(&[253], &[Some(b"abc")]).is_err(), "VARCHAR");
        assert_eq!(Num::parse(b"-0.05").unwrap().text(), b"-0.05");
        assert_eq!(Num::parse(b"12").unwrap().text(), b"12");
    }
}
