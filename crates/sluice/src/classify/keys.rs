//! Which values of one column decide the rows a statement reads or writes: what sharding
//! places a statement by, and what row-level cache invalidation keys entries and writes
//! by (docs/ARCHITECTURE.md, "Sharding").
//!
//! The answer is a promise: when [`key_values`] gives [`Keys::Values`], every row of the
//! table the statement reads or writes has one of those key values, as the server would
//! compare them. Anything this module cannot vouch for is [`Keys::Any`]: several
//! statements, joins, unions and subqueries, `OR` at the top of a `WHERE`, an expression
//! where a value should be, an `INSERT` without a column list or without the key in it,
//! `INSERT ... SELECT`. Comparing values (numbers against strings, a case-insensitive
//! collation, trailing spaces) is the caller's business: values are returned as written.

pub mod canon;

use super::sql::{code_token, ident_text, Kind, Lexer, Tok};
use std::ops::Range;

/// The column: a table's key, names in lowercase ASCII as [`ident_text`] gives them.
#[derive(Clone, Copy, Debug)]
pub struct KeyColumn<'a> {
    pub schema: &'a str,
    pub table: &'a str,
    pub column: &'a str,
    /// Where the key is among the table's columns (from 0), when known: what an
    /// `INSERT` without a column list is read by.
    pub position: Option<usize>,
}

/// A value the statement gives the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A number literal as written, with its sign (`-5`, `1.50`, `0x1F`).
    Number(String),
    /// A string literal's content, quotes and escapes undone.
    Str(Vec<u8>),
    Null,
    /// The `n`th `?` of the statement (from 0): a prepared statement's bound parameter.
    Param(usize),
}

/// What decides the statement's rows of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keys {
    /// Only rows whose key is one of these, in the order written (for an `INSERT`, one
    /// per row).
    Values(Vec<Value>),
    /// The key does not decide: any row of the table may be read or written.
    Any,
}

/// The key values that decide the rows `sql` touches in `col`'s table (unqualified names
/// are in `default_schema`), and whether the statement assigns the key itself (an
/// `UPDATE ... SET key = ...`, or `ON DUPLICATE KEY UPDATE key = ...`), which moves rows
/// from one key to another.
pub fn key_values(sql: &[u8], default_schema: Option<&str>, col: &KeyColumn) -> (Keys, bool) {
    let Some(toks) = one_statement(sql) else {
        return (Keys::Any, false);
    };
    let p = Parser {
        sql,
        toks: &toks,
        schema: default_schema.map(str::to_ascii_lowercase),
        col,
    };
    p.statement()
}

/// A multi-row `INSERT ... VALUES` cut where its rows are (byte ranges of the
/// statement), so that it can be split into one statement per shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertRows {
    /// Up to the first row: `INSERT INTO t (cols) VALUES `.
    pub head: Range<usize>,
    /// Each row, its parentheses included, with its key value.
    pub rows: Vec<(Range<usize>, Value)>,
    /// After the last row (`ON DUPLICATE KEY UPDATE ...`) to the statement's end.
    pub tail: Range<usize>,
}

/// [`InsertRows`] of `sql` when it is an `INSERT` or `REPLACE` of rows with `col`'s key
/// given in each (no `RETURNING`: one result per statement could not be put together).
pub fn insert_rows(
    sql: &[u8],
    default_schema: Option<&str>,
    col: &KeyColumn,
) -> Option<InsertRows> {
    let toks = one_statement(sql)?;
    let p = Parser {
        sql,
        toks: &toks,
        schema: default_schema.map(str::to_ascii_lowercase),
        col,
    };
    if !p.word_in(0, &["INSERT", "REPLACE"]) || p.any_word("RETURNING") || p.any_word("SELECT") {
        return None;
    }
    let (first, position) = p.values_at(p.insert_table_end()?)?;
    let spans = p.row_spans(first, position)?;
    let last = spans.last()?.1;
    let end = toks.last()?.end;
    Some(InsertRows {
        head: 0..toks[first].start,
        rows: spans
            .into_iter()
            .map(|(open, close, v)| (toks[open].start..toks[close].end, v))
            .collect(),
        tail: toks[last].end..end,
    })
}

/// The code tokens of the only statement in `sql`; `None` when there are several.
fn one_statement(sql: &[u8]) -> Option<Vec<Tok>> {
    let mut lex = Lexer::new(sql);
    let mut toks = Vec::with_capacity(32);
    while let Some(t) = code_token(&mut lex) {
        if t.kind == Kind::Punct(b';') {
            // Only more `;` may follow.
            while let Some(t) = code_token(&mut lex) {
                if t.kind != Kind::Punct(b';') {
                    return None;
                }
            }
            break;
        }
        toks.push(t);
    }
    Some(toks)
}

/// Words that end a `WHERE` clause at its own parenthesis level.
const WHERE_ENDS: &[&str] = &[
    "ORDER",
    "GROUP",
    "HAVING",
    "LIMIT",
    "FOR",
    "LOCK",
    "WINDOW",
    "INTO",
    "PROCEDURE",
    "RETURNING",
];

/// Words after a table name that make the statement read or write more than one table.
const JOINS: &[&str] = &[
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "NATURAL",
    "STRAIGHT_JOIN",
    "FULL",
    "OUTER",
    "USING",
];

struct Parser<'a> {
    sql: &'a [u8],
    toks: &'a [Tok],
    schema: Option<String>,
    col: &'a KeyColumn<'a>,
}

/// A table reference: where it starts and ends, and the alias it may be called by.
struct TableAt {
    end: usize,
    alias: Option<String>,
}

impl Parser<'_> {
    fn word(&self, i: usize, w: &str) -> bool {
        self.toks.get(i).is_some_and(|t| {
            t.kind == Kind::Word && self.sql[t.start..t.end].eq_ignore_ascii_case(w.as_bytes())
        })
    }

    fn word_in(&self, i: usize, words: &[&str]) -> bool {
        words.iter().any(|w| self.word(i, w))
    }

    fn punct(&self, i: usize, b: u8) -> bool {
        self.toks.get(i).is_some_and(|t| t.kind == Kind::Punct(b))
    }

    fn statement(&self) -> (Keys, bool) {
        // A second SELECT is a subquery or a union: rows of the table may be read that
        // the outer WHERE does not decide.
        let selects = (0..self.toks.len())
            .filter(|&i| self.word(i, "SELECT"))
            .count();
        let first_select = self.word(0, "SELECT");
        if selects > usize::from(first_select) || self.any_word("UNION") {
            return (Keys::Any, false);
        }
        if first_select {
            (self.select(), false)
        } else if self.word(0, "UPDATE") {
            self.update()
        } else if self.word(0, "DELETE") {
            (self.delete(), false)
        } else if self.word_in(0, &["INSERT", "REPLACE"]) {
            self.insert()
        } else {
            (Keys::Any, false)
        }
    }

    fn any_word(&self, w: &str) -> bool {
        (0..self.toks.len()).any(|i| self.word(i, w))
    }

    /// `SELECT ... FROM <the table> [alias] [WHERE ...]`.
    fn select(&self) -> Keys {
        let Some(from) = self.at_depth0(0, "FROM") else {
            return Keys::Any;
        };
        match self.table(from + 1) {
            Some(t) => self.where_after(t.end, t.alias.as_deref()),
            None => Keys::Any,
        }
    }

    /// `UPDATE [LOW_PRIORITY] [IGNORE] <the table> [alias] SET ... [WHERE ...]`.
    fn update(&self) -> (Keys, bool) {
        let mut i = 1;
        while self.word_in(i, &["LOW_PRIORITY", "IGNORE"]) {
            i += 1;
        }
        let Some(t) = self.table(i) else {
            return (Keys::Any, false);
        };
        if !self.word(t.end, "SET") {
            return (Keys::Any, false);
        }
        let end = self.at_depth0(t.end, "WHERE").unwrap_or(self.toks.len());
        let sets_key = self.assigns_key(t.end + 1, end, t.alias.as_deref());
        (self.where_after(t.end, t.alias.as_deref()), sets_key)
    }

    /// `DELETE [LOW_PRIORITY] [QUICK] [IGNORE] FROM <the table> [alias] [WHERE ...]`; the
    /// multiple-table forms are `Any`.
    fn delete(&self) -> Keys {
        let mut i = 1;
        while self.word_in(i, &["LOW_PRIORITY", "QUICK", "IGNORE"]) {
            i += 1;
        }
        if !self.word(i, "FROM") {
            return Keys::Any;
        }
        match self.table(i + 1) {
            Some(t) => self.where_after(t.end, t.alias.as_deref()),
            None => Keys::Any,
        }
    }

    /// `INSERT|REPLACE [modifiers] [INTO] <the table> (cols) VALUES (...), ...` or
    /// `... SET col = v, ...`.
    fn insert(&self) -> (Keys, bool) {
        let Some(i) = self.insert_table_end() else {
            return (Keys::Any, false);
        };
        let duplicate = self.at_depth0(i, "DUPLICATE");
        // `ON DUPLICATE KEY UPDATE` then the assignments.
        let sets_key = duplicate.is_some_and(|d| self.assigns_key(d + 3, self.toks.len(), None));
        if self.word(i, "SET") {
            let end = duplicate.map_or(self.toks.len(), |d| d - 1);
            return (self.set_row(i + 1, end), sets_key);
        }
        match self.values_at(i) {
            Some((first, position)) => (self.rows(first, position), sets_key),
            None => (Keys::Any, false),
        }
    }

    /// After the table of an `INSERT` at `i`: `VALUES` (the key at its known position)
    /// or `(cols) VALUES`; the first row's `(` and the key's position in rows.
    fn values_at(&self, i: usize) -> Option<(usize, usize)> {
        if self.word_in(i, &["VALUES", "VALUE"]) {
            return Some((i + 1, self.col.position?));
        }
        let close = self.punct(i, b'(').then(|| self.matching(i)).flatten()?;
        let position = self.column_position(i + 1, close)?;
        self.word_in(close + 1, &["VALUES", "VALUE"])
            .then_some((close + 2, position))
    }

    /// `INSERT|REPLACE [modifiers] [INTO] <the table> [PARTITION (...)]`: the index after.
    fn insert_table_end(&self) -> Option<usize> {
        let mut i = 1;
        while self.word_in(i, &["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"]) {
            i += 1;
        }
        if self.word(i, "INTO") {
            i += 1;
        }
        let end = self.this_table(i)?;
        if self.word(end, "PARTITION") {
            return self.matching(end + 1).map(|close| close + 1);
        }
        Some(end)
    }

    /// The index of the first `w` at parenthesis depth 0 from `from`.
    fn at_depth0(&self, from: usize, w: &str) -> Option<usize> {
        let mut depth = 0i32;
        for i in from..self.toks.len() {
            match self.toks[i].kind {
                Kind::Punct(b'(') => depth += 1,
                Kind::Punct(b')') => depth -= 1,
                _ if depth == 0 && self.word(i, w) => return Some(i),
                _ => {}
            }
        }
        None
    }

    /// The index of the `)` closing the `(` at `open`.
    fn matching(&self, open: usize) -> Option<usize> {
        if !self.punct(open, b'(') {
            return None;
        }
        let mut depth = 0usize;
        for i in open..self.toks.len() {
            match self.toks[i].kind {
                Kind::Punct(b'(') => depth += 1,
                Kind::Punct(b')') => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        None
    }

    fn is_name(&self, i: usize) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| matches!(t.kind, Kind::Word | Kind::Quoted))
    }

    fn name(&self, i: usize) -> String {
        ident_text(self.sql, self.toks[i])
    }

    /// `[schema.]table` naming the key's table at `i`: the index after it.
    fn this_table(&self, i: usize) -> Option<usize> {
        if !self.is_name(i) {
            return None;
        }
        let (schema, table, end) = if self.punct(i + 1, b'.') && self.is_name(i + 2) {
            (Some(self.name(i)), self.name(i + 2), i + 3)
        } else {
            (self.schema.clone(), self.name(i), i + 1)
        };
        (schema.as_deref() == Some(self.col.schema) && table == self.col.table).then_some(end)
    }

    /// The key's table at `i` with its alias, when it is the only table there.
    fn table(&self, i: usize) -> Option<TableAt> {
        let mut end = self.this_table(i)?;
        let mut alias = None;
        if self.word(end, "AS") {
            end += 1;
        }
        if self.is_name(end) && !self.word_in(end, &["WHERE", "SET"]) && !self.ends_where(end) {
            alias = Some(self.name(end));
            end += 1;
        }
        if self.punct(end, b',') || self.word_in(end, JOINS) || self.punct(end, b'(') {
            return None;
        }
        Some(TableAt { end, alias })
    }

    fn ends_where(&self, i: usize) -> bool {
        self.word_in(i, WHERE_ENDS)
            || self.word_in(i, JOINS)
            || self.word_in(i, &["USE", "IGNORE", "FORCE", "PARTITION"])
    }

    /// The keys the `WHERE` after `from` decides (`Any` without one).
    fn where_after(&self, from: usize, alias: Option<&str>) -> Keys {
        let Some(w) = self.at_depth0(from, "WHERE") else {
            return Keys::Any;
        };
        let mut end = w + 1;
        let mut depth = 0i32;
        while end < self.toks.len() {
            match self.toks[end].kind {
                Kind::Punct(b'(') => depth += 1,
                Kind::Punct(b')') => depth -= 1,
                _ if depth == 0 && self.word_in(end, WHERE_ENDS) => break,
                _ => {}
            }
            end += 1;
        }
        self.condition(w + 1, end, alias)
    }

    /// A condition from `start` to `end`: the first conjunct at its top level that
    /// decides the key (rows must satisfy every conjunct, so any one of them bounds them).
    fn condition(&self, start: usize, end: usize, alias: Option<&str>) -> Keys {
        if start >= end {
            return Keys::Any;
        }
        // Whole condition in parentheses: look inside.
        if self.matching(start) == Some(end - 1) {
            return self.condition(start + 1, end - 1, alias);
        }
        let mut conjuncts = Vec::new();
        let mut depth = 0i32;
        // An AND that belongs to a `BETWEEN` or sits inside `CASE ... END` joins no
        // conjuncts.
        let mut between = false;
        let mut cases = 0usize;
        let mut from = start;
        let mut i = start;
        while i < end {
            match self.toks[i].kind {
                Kind::Punct(b'(') => depth += 1,
                Kind::Punct(b')') => depth -= 1,
                _ if depth != 0 => {}
                _ if self.word_in(i, &["OR", "XOR"]) => return Keys::Any,
                // `||` is OR unless PIPES_AS_CONCAT, `:=` binds looser than AND: either
                // way nothing to vouch for.
                Kind::Punct(b'|' | b':') => return Keys::Any,
                _ if self.word(i, "BETWEEN") => between = true,
                _ if self.word(i, "CASE") => cases += 1,
                _ if self.word(i, "END") => cases = cases.saturating_sub(1),
                _ if self.word(i, "AND") && between => between = false,
                _ if self.word(i, "AND") && cases == 0 => {
                    conjuncts.push((from, i));
                    from = i + 1;
                }
                Kind::Punct(b'&') if self.punct(i + 1, b'&') && cases == 0 && !between => {
                    conjuncts.push((from, i));
                    from = i + 2;
                    i += 1;
                }
                _ => {}
            }
            i += 1;
        }
        conjuncts.push((from, end));
        for (a, b) in conjuncts {
            if let Some(keys) = self.deciding(a, b, alias) {
                return keys;
            }
        }
        Keys::Any
    }

    /// `key = v`, `v = key` or `key IN (v, ...)` exactly from `a` to `b`.
    fn deciding(&self, a: usize, b: usize, alias: Option<&str>) -> Option<Keys> {
        if self.matching(a) == Some(b - 1) && b - a > 2 {
            return match self.condition(a + 1, b - 1, alias) {
                Keys::Any => None,
                keys => Some(keys),
            };
        }
        if let Some(after) = self.column_ref(a, alias) {
            if self.punct(after, b'=') && !self.punct(after + 1, b'>') {
                let (v, end) = self.value(after + 1)?;
                return (end == b).then(|| Keys::Values(vec![v]));
            }
            if self.word(after, "IN") {
                let close = self.matching(after + 1)?;
                if close + 1 != b {
                    return None;
                }
                return self.value_list(after + 2, close).map(Keys::Values);
            }
            return None;
        }
        let (v, end) = self.value(a)?;
        // `v = key`, and not `v <=> key` (`<` `=` `>`).
        if self.punct(end, b'=') && !self.punct(end - 1, b'<') {
            let after = self.column_ref(end + 1, alias)?;
            return (after == b).then(|| Keys::Values(vec![v]));
        }
        None
    }

    /// The key column at `i` (`key`, `table.key`, `alias.key`, `schema.table.key`): the
    /// index after it.
    fn column_ref(&self, i: usize, alias: Option<&str>) -> Option<usize> {
        let parts: Vec<usize> = {
            let mut parts = vec![i];
            while parts.len() < 3 && self.punct(parts[parts.len() - 1] + 1, b'.') {
                parts.push(parts[parts.len() - 1] + 2);
            }
            parts
        };
        if !parts.iter().all(|&p| self.is_name(p)) {
            return None;
        }
        let names: Vec<String> = parts.iter().map(|&p| self.name(p)).collect();
        let c = self.col;
        let ok = match names.as_slice() {
            [column] => column == c.column,
            [t, column] => {
                column == c.column && (alias.map_or(t == c.table, |a| t == a) || t == c.table)
            }
            [s, t, column] => s == c.schema && t == c.table && column == c.column,
            _ => false,
        };
        // Not a function call such as `id(...)`.
        let end = parts[parts.len() - 1] + 1;
        (ok && !self.punct(end, b'(')).then_some(end)
    }

    /// A literal or `?` at `i`: the value and the index after it.
    fn value(&self, i: usize) -> Option<(Value, usize)> {
        let t = *self.toks.get(i)?;
        let raw = &self.sql[t.start..t.end];
        match t.kind {
            Kind::Number => Some((Value::Number(text(raw)), i + 1)),
            Kind::Punct(sign @ (b'-' | b'+')) => {
                let n = self.toks.get(i + 1).filter(|n| n.kind == Kind::Number)?;
                let digits = text(&self.sql[n.start..n.end]);
                let v = if sign == b'-' {
                    format!("-{digits}")
                } else {
                    digits
                };
                Some((Value::Number(v), i + 2))
            }
            // Only single quotes: under ANSI_QUOTES a double-quoted word is a name.
            Kind::Str(b'\'') if raw.first() == Some(&b'\'') => {
                Some((Value::Str(unquote(raw)), i + 1))
            }
            Kind::Param => Some((Value::Param(self.param_index(i)), i + 1)),
            Kind::Word if raw.eq_ignore_ascii_case(b"NULL") => Some((Value::Null, i + 1)),
            Kind::Word if raw.eq_ignore_ascii_case(b"TRUE") => {
                Some((Value::Number("1".into()), i + 1))
            }
            Kind::Word if raw.eq_ignore_ascii_case(b"FALSE") => {
                Some((Value::Number("0".into()), i + 1))
            }
            // A character set introducer (`_utf8mb4'x'`): the string is the value.
            Kind::Word if raw.first() == Some(&b'_') => match self.toks.get(i + 1) {
                Some(n) if n.kind == Kind::Str(b'\'') && n.start == t.end => self.value(i + 1),
                _ => None,
            },
            _ => None,
        }
    }

    /// `v, v, ...` exactly from `a` to `b`.
    fn value_list(&self, a: usize, b: usize) -> Option<Vec<Value>> {
        let mut values = Vec::new();
        let mut i = a;
        loop {
            let (v, next) = self.value(i)?;
            values.push(v);
            if next == b {
                return Some(values);
            }
            if !self.punct(next, b',') {
                return None;
            }
            i = next + 1;
        }
    }

    /// Which `?` of the statement the token at `i` is.
    fn param_index(&self, i: usize) -> usize {
        self.toks[..i]
            .iter()
            .filter(|t| t.kind == Kind::Param)
            .count()
    }

    /// Where the key is in the column list from `a` to `b` (exclusive).
    fn column_position(&self, a: usize, b: usize) -> Option<usize> {
        let mut position = 0;
        let mut i = a;
        while i < b {
            let after = if self.is_name(i) && self.punct(i + 1, b'.') {
                i + 2
            } else {
                i
            };
            if !self.is_name(after) {
                return None;
            }
            if self.name(after) == self.col.column {
                return Some(position);
            }
            position += 1;
            i = after + 2;
        }
        None
    }

    /// `(row), (row) ...` from `i`: the value at `position` of each row.
    fn rows(&self, i: usize, position: usize) -> Keys {
        match self.row_spans(i, position) {
            Some(rows) => Keys::Values(rows.into_iter().map(|(_, _, v)| v).collect()),
            None => Keys::Any,
        }
    }

    /// The rows from the `(` at `i`: each row's first and last token and its key value.
    fn row_spans(&self, mut i: usize, position: usize) -> Option<Vec<(usize, usize, Value)>> {
        let mut rows = Vec::new();
        loop {
            let close = self.matching(i)?;
            rows.push((i, close, self.nth_value(i + 1, close, position)?));
            if self.punct(close + 1, b',') {
                i = close + 2;
            } else if close + 1 == self.toks.len()
                || self.word_in(close + 1, &["ON", "AS", "RETURNING"])
            {
                return Some(rows);
            } else {
                return None;
            }
        }
    }

    /// The `position`th comma-separated item from `a` to `b`, when it is a value.
    fn nth_value(&self, a: usize, b: usize, position: usize) -> Option<Value> {
        let mut item = 0;
        let mut start = a;
        let mut depth = 0i32;
        for i in a..=b {
            let at_end = i == b;
            match self.toks[i].kind {
                Kind::Punct(b'(') if !at_end => depth += 1,
                Kind::Punct(b')') if !at_end => depth -= 1,
                Kind::Punct(b',') if depth == 0 => {
                    if item == position {
                        return self.value(start).filter(|&(_, end)| end == i).map(|v| v.0);
                    }
                    item += 1;
                    start = i + 1;
                }
                _ if at_end && item == position => {
                    return self.value(start).filter(|&(_, end)| end == b).map(|v| v.0);
                }
                _ => {}
            }
        }
        None
    }

    /// `INSERT ... SET col = v, ...` from `a` to `b`: the key's value.
    fn set_row(&self, a: usize, b: usize) -> Keys {
        let mut i = a;
        while i < b {
            let Some(after) = self.column_ref(i, None) else {
                // Another column: skip to the next assignment.
                match self.next_comma(i, b) {
                    Some(c) => {
                        i = c + 1;
                        continue;
                    }
                    None => return Keys::Any,
                }
            };
            if !self.punct(after, b'=') {
                return Keys::Any;
            }
            return match self.value(after + 1) {
                Some((v, end)) if end == b || self.punct(end, b',') => Keys::Values(vec![v]),
                _ => Keys::Any,
            };
        }
        Keys::Any
    }

    fn next_comma(&self, from: usize, b: usize) -> Option<usize> {
        let mut depth = 0i32;
        for i in from..b {
            match self.toks[i].kind {
                Kind::Punct(b'(') => depth += 1,
                Kind::Punct(b')') => depth -= 1,
                Kind::Punct(b',') if depth == 0 => return Some(i),
                _ => {}
            }
        }
        None
    }

    /// Whether an assignment list from `a` to `b` assigns the key.
    fn assigns_key(&self, a: usize, b: usize, alias: Option<&str>) -> bool {
        let mut i = a;
        loop {
            if self
                .column_ref(i, alias)
                .is_some_and(|after| self.punct(after, b'='))
            {
                return true;
            }
            match self.next_comma(i, b) {
                Some(c) => i = c + 1,
                None => return false,
            }
        }
    }
}

/// A text's literal as the parser reads it: a digit run, or a single-quoted string with
/// its quotes (see [`crate::classify::sql::literal_template`]).
pub fn literal(kind: super::sql::Literal, raw: &[u8]) -> Value {
    match kind {
        super::sql::Literal::Number => Value::Number(text(raw)),
        super::sql::Literal::Str => Value::Str(unquote(raw)),
    }
}

fn text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// A quoted string's content: quotes removed, doubled quotes and backslash escapes undone
/// (the server's default `sql_mode`; under NO_BACKSLASH_ESCAPES a backslash is itself).
fn unquote(raw: &[u8]) -> Vec<u8> {
    let q = raw[0];
    let body = &raw[1..raw.len().saturating_sub(1).max(1)];
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        if b == q && body.get(i + 1) == Some(&q) {
            out.push(q);
            i += 2;
        } else if b == b'\\' && i + 1 < body.len() {
            out.push(match body[i + 1] {
                b'n' => b'\n',
                b't' => b'\t',
                b'r' => b'\r',
                b'0' => 0,
                b'Z' => 0x1a,
                other => other,
            });
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests;
