//! `CONNECTION_ID()` answers with the session's Sluice id, the one its handshake gave
//! and `KILL` acts on: the server would answer with the id of whichever of its threads
//! runs the statement. The call is replaced in the text by a literal the server types
//! exactly as it types the function (`INT UNSIGNED`, display width 10, not null), and a
//! select-list item that is the bare call keeps its column name through an alias.
//! `ROW_COUNT()` is answered the same way where Sluice knows the count the server no
//! longer does (after a write it wrapped in a transaction of its own).

use super::sql::{code_token, is_one_of, Kind, Lexer, Tok};

/// How a statement reads the server's process list, whose ids Sluice translates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processlist {
    /// `SHOW [FULL] PROCESSLIST`: the column `Id`.
    Show,
    /// Any other statement naming `PROCESSLIST`: columns from
    /// `information_schema.PROCESSLIST.ID`.
    Select,
}

/// Whether the statement reads the process list: a byte scan first, so ordinary
/// statements pay nothing more.
pub fn processlist(sql: &[u8]) -> Option<Processlist> {
    const NEEDLE: &[u8] = b"processlist";
    // Found by its `l`, rarer in SQL than its other letters.
    let at_l = 7;
    let named = memchr::memchr2_iter(b'l', b'L', sql).any(|i| {
        i >= at_l
            && sql
                .get(i - at_l..i - at_l + NEEDLE.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(NEEDLE))
    });
    if !named {
        return None;
    }
    let mut lex = Lexer::new(sql);
    let mut words = Vec::new();
    let mut named = false;
    while let Some(t) = code_token(&mut lex) {
        named |= names_processlist(sql, &t);
        if words.len() < 3 {
            words.push(t);
        }
    }
    if !named {
        return None;
    }
    let show = words.first().is_some_and(|t| is_one_of(sql, t, &["SHOW"]))
        && words[1..]
            .iter()
            .find(|t| !is_one_of(sql, t, &["FULL"]))
            .is_some_and(|t| is_one_of(sql, t, &["PROCESSLIST"]));
    Some(if show {
        Processlist::Show
    } else {
        Processlist::Select
    })
}

/// `PROCESSLIST`, quoted or not.
fn names_processlist(sql: &[u8], t: &Tok) -> bool {
    names_one_of(sql, t, &["PROCESSLIST"])
}

/// Where the server shows its own thread ids, which a `CONNECTION_ID()` in the same
/// statement is compared with: such statements are left to the server.
const THREAD_ID_SOURCES: &[&str] = &[
    "PROCESSLIST",
    "IS_USED_LOCK",
    "INNODB_TRX",
    "METADATA_LOCK_INFO",
    "PERFORMANCE_SCHEMA",
];

/// An unquoted word or a quoted identifier that is one of `words`.
fn names_one_of(sql: &[u8], t: &Tok, words: &[&str]) -> bool {
    let text = &sql[t.start..t.end];
    let name = match t.kind {
        Kind::Word => text,
        Kind::Quoted if text.len() > 2 => &text[1..text.len() - 1],
        _ => return false,
    };
    words
        .iter()
        .any(|w| name.eq_ignore_ascii_case(w.as_bytes()))
}

/// `sql` with every `CONNECTION_ID()` call replaced by `id`, or `None` when there is
/// none to replace. Calls in a definition the server stores (any `CREATE` or `ALTER`,
/// and whatever follows one in a multi-statement text) are left to the server. A
/// select-list item without an alias that contains a call keeps the server's name for
/// it, the item as written, through an alias. A statement that also reads one of the
/// server's own thread ids (`PROCESSLIST`, `IS_USED_LOCK()`...) is left as it is, so
/// that `WHERE ID = CONNECTION_ID()` still compares like with like.
pub fn rewrite_connection_id(sql: &[u8], id: u32) -> Option<Vec<u8>> {
    if !may_call(sql, b"connection_id") {
        return None;
    }
    let toks = tokens(sql);
    if toks.iter().any(|t| names_one_of(sql, t, THREAD_ID_SOURCES)) {
        return None;
    }
    let literal = format!("CAST({id:010} AS UNSIGNED)").into_bytes();
    rewrite_calls(sql, &toks, "CONNECTION_ID", toks.len(), &literal)
}

/// `sql` with every `ROW_COUNT()` call of its first statement replaced by `rows`, the
/// count the previous statement left, or `None` when there is none to replace. The
/// literal is typed as the server types the function (`BIGINT`, display width 21, not
/// null); later statements of a multi-statement text read the ones before them, and
/// stored definitions are left as [`rewrite_connection_id`] leaves them.
pub fn rewrite_row_count(sql: &[u8], rows: i64) -> Option<Vec<u8>> {
    if !may_call(sql, b"row_count") {
        return None;
    }
    let toks = tokens(sql);
    let first_ends = (toks.iter().position(|t| t.kind == Kind::Punct(b';'))).unwrap_or(toks.len());
    // A negative literal of 20 digits is what the server types as it types the
    // function (width 21, precision 20), and the ABS keeps a count's negation an
    // integer, as the function's is. A constant -1 (after an error) negates to a
    // DECIMAL where the function's negation stays BIGINT: that alone differs.
    // A zero so written is read as a positive literal, one digit short: `- 0` keeps
    // the width.
    let literal = match rows {
        r if r < 0 => format!("CAST(-{:020} AS SIGNED)", r.unsigned_abs()),
        0 => format!("CAST(ABS(-{:019} - 0) AS SIGNED)", 0),
        r => format!("CAST(ABS(-{r:020}) AS SIGNED)"),
    };
    rewrite_calls(sql, &toks, "ROW_COUNT", first_ends, literal.as_bytes())
}

/// Whether `sql` may call `name` (lowercase): the text before each `(` is looked at, so
/// ordinary statements pay a vectorised byte search and little more.
fn may_call(sql: &[u8], name: &[u8]) -> bool {
    memchr::memchr_iter(b'(', sql)
        .any(|i| i >= name.len() && sql[i - name.len()..i].eq_ignore_ascii_case(name))
}

fn tokens(sql: &[u8]) -> Vec<Tok> {
    let mut lex = Lexer::new(sql);
    let mut toks: Vec<Tok> = Vec::new();
    while let Some(t) = code_token(&mut lex) {
        toks.push(t);
    }
    toks
}

/// `sql` with the calls of the built-in `name()` among `toks[..until]` replaced by
/// `literal`, select-list items keeping their names through aliases.
fn rewrite_calls(
    sql: &[u8],
    toks: &[Tok],
    name: &str,
    until: usize,
    literal: &[u8],
) -> Option<Vec<u8>> {
    // The server keeps the text of a definition (a column's DEFAULT, a view, a routine,
    // a trigger, an event) and evaluates it later, on other connections: a literal put
    // there would be one moment's value forever. From the first CREATE or ALTER on
    // (both reserved words, so never a bare name), calls are the server's.
    let stored_from = toks
        .iter()
        .position(|t| t.kind == Kind::Word && is_one_of(sql, t, &["CREATE", "ALTER"]))
        .unwrap_or(toks.len())
        .min(until);
    let calls: Vec<usize> = (0..stored_from)
        .filter(|&i| is_call(sql, toks, i, name))
        .collect();
    if calls.is_empty() {
        return None;
    }
    // (from, to, replacement) by byte offset: the calls, and the aliases after items.
    let mut edits: Vec<(usize, usize, Vec<u8>)> = calls
        .iter()
        .map(|&i| (toks[i].start, toks[i + 2].end, literal.to_vec()))
        .collect();
    for (first, last) in select_items(sql, toks) {
        let holds_call = calls.iter().any(|&c| c >= first && c + 2 <= last);
        let text = &sql[toks[first].start..toks[last].end];
        if !holds_call || has_alias(sql, toks, first, last) || text.len() > NAME_MAX {
            continue;
        }
        let mut alias = b" AS `".to_vec();
        for &b in text {
            if b == b'`' {
                alias.push(b'`');
            }
            alias.push(b);
        }
        alias.push(b'`');
        edits.push((toks[last].end, toks[last].end, alias));
    }
    edits.sort_by_key(|&(from, to, _)| (from, to));
    let mut out = Vec::with_capacity(sql.len() + 64 * edits.len());
    let mut copied = 0;
    for (from, to, with) in edits {
        out.extend_from_slice(&sql[copied..from]);
        out.extend_from_slice(&with);
        copied = to;
    }
    out.extend_from_slice(&sql[copied..]);
    Some(out)
}

/// Item texts longer than this keep the name the server gives the rewritten text: an
/// alias is at most 256 characters.
const NAME_MAX: usize = 200;

/// Whether tokens `i..=i+2` are a call of the built-in `name()`.
fn is_call(sql: &[u8], toks: &[Tok], i: usize, name: &str) -> bool {
    is_one_of(sql, &toks[i], &[name])
        && toks
            .get(i + 1)
            .is_some_and(|p| p.kind == Kind::Punct(b'(') && p.start == toks[i].end)
        && toks.get(i + 2).is_some_and(|p| p.kind == Kind::Punct(b')'))
        // `db.ROW_COUNT()` is a stored function of that name.
        && !(i > 0 && toks[i - 1].kind == Kind::Punct(b'.'))
}

/// Keywords that may come between `SELECT` and its first item.
const SELECT_OPTIONS: &[&str] = &[
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

/// Keywords that end a select list.
const LIST_ENDS: &[&str] = &[
    "FROM",
    "INTO",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "WINDOW",
    "FOR",
    "LOCK",
    "PROCEDURE",
];

/// Words after which the next token is an operand, not an alias.
const OPERATORS: &[&str] = &[
    "AND", "OR", "XOR", "NOT", "DIV", "MOD", "IS", "LIKE", "REGEXP", "RLIKE", "IN", "BETWEEN",
    "WHEN", "THEN", "ELSE", "CASE", "BINARY", "INTERVAL", "ESCAPE", "SOUNDS", "COLLATE",
];

/// A select list being read: the paren depth of its `SELECT`, and the first token of
/// the item being read.
struct List {
    depth: usize,
    first: Option<usize>,
}

/// The items of every select list, inner ones included, as (first token, last token).
fn select_items(sql: &[u8], toks: &[Tok]) -> Vec<(usize, usize)> {
    let mut open: Vec<List> = Vec::new();
    let mut items = Vec::new();
    let mut depth = 0usize;
    for (i, t) in toks.iter().enumerate() {
        let list = open.last_mut().filter(|l| l.depth == depth);
        if let Some(list) = list {
            let ends =
                matches!(t.kind, Kind::Punct(b',' | b')' | b';')) || is_one_of(sql, t, LIST_ENDS);
            if ends {
                if let Some(first) = list.first.take() {
                    items.push((first, i - 1));
                }
                if t.kind != Kind::Punct(b',') {
                    open.pop();
                }
            } else if list.first.is_none()
                && !is_one_of(sql, t, SELECT_OPTIONS)
                && !is_one_of(sql, t, &["SELECT"])
            {
                list.first = Some(i);
            }
        }
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => {
                depth = depth.saturating_sub(1);
                open.retain(|l| l.depth <= depth);
            }
            Kind::Punct(b';') => {
                depth = 0;
                open.clear();
            }
            Kind::Word if is_one_of(sql, t, &["SELECT"]) => open.push(List { depth, first: None }),
            _ => {}
        }
    }
    if let Some(list) = open.last_mut().filter(|l| l.depth == depth) {
        if let Some(first) = list.first.take() {
            items.push((first, toks.len() - 1));
        }
    }
    items
}

/// Whether the item `first..=last` ends with an alias (`expr AS name`, `expr name`).
fn has_alias(sql: &[u8], toks: &[Tok], first: usize, last: usize) -> bool {
    if last == first {
        return false;
    }
    let (before, end) = (&toks[last - 1], &toks[last]);
    if is_one_of(sql, before, &["AS"]) {
        return true;
    }
    let name = matches!(end.kind, Kind::Word | Kind::Quoted | Kind::Str(_))
        && !is_one_of(sql, end, &["END", "NULL", "TRUE", "FALSE"]);
    let operand_before = match before.kind {
        Kind::Punct(b')') | Kind::Number | Kind::Str(_) | Kind::Quoted => true,
        Kind::UserVar | Kind::SysVar => true,
        Kind::Word => !is_one_of(sql, before, OPERATORS),
        _ => false,
    };
    name && operand_before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(sql: &str) -> Option<String> {
        rewrite_connection_id(sql.as_bytes(), 42).map(|v| String::from_utf8(v).unwrap())
    }

    const LIT: &str = "CAST(0000000042 AS UNSIGNED)";

    #[test]
    fn select_items_keep_their_names() {
        assert_eq!(
            rewrite("SELECT CONNECTION_ID()").unwrap(),
            format!("SELECT {LIT} AS `CONNECTION_ID()`")
        );
        assert_eq!(
            rewrite("select connection_id( ), 1 from dual").unwrap(),
            format!("select {LIT} AS `connection_id( )`, 1 from dual")
        );
        assert_eq!(
            rewrite("SELECT SQL_NO_CACHE 1, CONNECTION_ID();").unwrap(),
            format!("SELECT SQL_NO_CACHE 1, {LIT} AS `CONNECTION_ID()`;")
        );
        assert_eq!(
            rewrite("SELECT CONNECTION_ID() + 1, 2").unwrap(),
            format!("SELECT {LIT} + 1 AS `CONNECTION_ID() + 1`, 2")
        );
        assert_eq!(
            rewrite("SELECT (SELECT CONNECTION_ID())").unwrap(),
            format!("SELECT (SELECT {LIT} AS `CONNECTION_ID()`) AS `(SELECT CONNECTION_ID())`")
        );
        assert_eq!(
            rewrite("SELECT a, LEAST(1, CONNECTION_ID()) FROM t").unwrap(),
            format!("SELECT a, LEAST(1, {LIT}) AS `LEAST(1, CONNECTION_ID())` FROM t")
        );
        assert_eq!(
            rewrite("SELECT CASE WHEN CONNECTION_ID() > 1 THEN 1 END").unwrap(),
            format!("SELECT CASE WHEN {LIT} > 1 THEN 1 END AS `CASE WHEN CONNECTION_ID() > 1 THEN 1 END`")
        );
        assert_eq!(
            rewrite("/*!SELECT*/ CONNECTION_ID()").unwrap(),
            format!("/*!SELECT*/ {LIT} AS `CONNECTION_ID()`")
        );
    }

    #[test]
    fn aliases_and_other_places_get_the_value_alone() {
        for (sql, want) in [
            ("SELECT CONNECTION_ID() AS id", "SELECT # AS id"),
            ("SELECT CONNECTION_ID() id", "SELECT # id"),
            ("SELECT CONNECTION_ID() + 1 'x'", "SELECT # + 1 'x'"),
            (
                "INSERT INTO t VALUES (CONNECTION_ID())",
                "INSERT INTO t VALUES (#)",
            ),
            (
                "SELECT a FROM t WHERE b = CONNECTION_ID()",
                "SELECT a FROM t WHERE b = #",
            ),
            ("DO CONNECTION_ID()", "DO #"),
        ] {
            assert_eq!(rewrite(sql).unwrap(), want.replace('#', LIT), "{sql}");
        }
    }

    #[test]
    fn what_is_not_a_call_is_left_alone() {
        assert_eq!(rewrite("SELECT 'CONNECTION_ID()'"), None);
        assert_eq!(rewrite("SELECT `CONNECTION_ID`()"), None);
        assert_eq!(rewrite("SELECT db.CONNECTION_ID()"), None);
        assert_eq!(rewrite("SELECT CONNECTION_ID (1)"), None);
        assert_eq!(rewrite("SELECT 1 -- CONNECTION_ID()"), None);
        assert_eq!(rewrite("SELECT 1"), None);
        assert_eq!(
            rewrite("SELECT * FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"),
            None
        );
        assert_eq!(rewrite("SELECT IS_USED_LOCK('l') = CONNECTION_ID()"), None);
        assert_eq!(
            rewrite(
                "SELECT 1 FROM `performance_schema`.threads WHERE PROCESSLIST_ID = CONNECTION_ID()"
            ),
            None
        );
    }

    /// A definition the server keeps evaluates the call when it runs, on whichever
    /// connection: rewritten, every row would record the creating session's id.
    #[test]
    fn stored_definitions_keep_the_call() {
        for sql in [
            "CREATE TABLE t (a INT DEFAULT CONNECTION_ID())",
            "create table t (a int default (connection_id()))",
            "ALTER TABLE t ALTER a SET DEFAULT CONNECTION_ID()",
            "ALTER TABLE t ADD b INT DEFAULT CONNECTION_ID()",
            "CREATE OR REPLACE VIEW v AS SELECT CONNECTION_ID() AS c",
            "ALTER VIEW v AS SELECT CONNECTION_ID()",
            "CREATE DEFINER=CURRENT_USER PROCEDURE p() BEGIN SET @x = 1; \
             SELECT CONNECTION_ID(); END",
            "CREATE FUNCTION f() RETURNS INT RETURN CONNECTION_ID()",
            "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = CONNECTION_ID()",
            "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO INSERT INTO t VALUES (CONNECTION_ID())",
            "ALTER EVENT e DO INSERT INTO t VALUES (CONNECTION_ID())",
            "/*!CREATE*/ TABLE t (a INT DEFAULT CONNECTION_ID())",
            "CREATE TABLE t AS SELECT CONNECTION_ID() AS c",
            "PREPARE s FROM 'SELECT CONNECTION_ID()'",
        ] {
            assert_eq!(rewrite(sql), None, "{sql}");
        }
        // What is read now, before a definition in the same text, is still the session's.
        assert_eq!(
            rewrite("SELECT CONNECTION_ID() AS c; CREATE TABLE t (a INT DEFAULT CONNECTION_ID())")
                .unwrap(),
            format!("SELECT {LIT} AS c; CREATE TABLE t (a INT DEFAULT CONNECTION_ID())")
        );
        // Quoted, a name is only a name.
        assert_eq!(
            rewrite("SELECT CONNECTION_ID() AS `create`").unwrap(),
            format!("SELECT {LIT} AS `create`")
        );
    }

    #[test]
    fn processlist_reads_are_recognised() {
        use Processlist::*;
        for (sql, want) in [
            ("SHOW PROCESSLIST", Some(Show)),
            ("show full processlist", Some(Show)),
            ("/* x */ SHOW FULL PROCESSLIST", Some(Show)),
            (
                "SELECT ID FROM information_schema.PROCESSLIST",
                Some(Select),
            ),
            (
                "SELECT * FROM information_schema.`PROCESSLIST`",
                Some(Select),
            ),
            ("SELECT 'processlist'", None),
            ("SELECT 1", None),
        ] {
            assert_eq!(processlist(sql.as_bytes()), want, "{sql}");
        }
    }

    #[test]
    fn row_count_is_read_in_the_first_statement_only() {
        let rewrite = |sql: &str, rows| {
            rewrite_row_count(sql.as_bytes(), rows).map(|v| String::from_utf8(v).unwrap())
        };
        let three = "CAST(ABS(-00000000000000000003) AS SIGNED)";
        assert_eq!(
            rewrite("SELECT ROW_COUNT()", 3).unwrap(),
            format!("SELECT {three} AS `ROW_COUNT()`")
        );
        assert_eq!(
            rewrite("select row_count() r, row_count() + 1", 3).unwrap(),
            format!("select {three} r, {three} + 1 AS `row_count() + 1`")
        );
        assert_eq!(
            rewrite("SET @n = ROW_COUNT()", -1).unwrap(),
            "SET @n = CAST(-00000000000000000001 AS SIGNED)"
        );
        // The second statement reads the first's count: the server's.
        assert_eq!(
            rewrite("SELECT ROW_COUNT(); SELECT ROW_COUNT()", 3).unwrap(),
            format!("SELECT {three} AS `ROW_COUNT()`; SELECT ROW_COUNT()")
        );
        for sql in [
            "SELECT ROW_COUNT",
            "SELECT 'ROW_COUNT()'",
            "SELECT d.ROW_COUNT()",
            "SELECT 1; SELECT ROW_COUNT()",
            "CREATE TABLE t (a INT DEFAULT ROW_COUNT())",
            "EXECUTE IMMEDIATE 'SELECT ROW_COUNT()'",
        ] {
            assert_eq!(rewrite(sql, 3), None, "{sql}");
        }
        let zero = rewrite_row_count(b"DO ROW_COUNT()", 0).unwrap();
        assert_eq!(zero, b"DO CAST(ABS(-0000000000000000000 - 0) AS SIGNED)");
        let big = rewrite_row_count(b"DO ROW_COUNT()", i64::MAX).unwrap();
        assert_eq!(big, b"DO CAST(ABS(-09223372036854775807) AS SIGNED)");
    }

    #[test]
    fn ids_of_any_size_keep_the_type() {
        let big = rewrite_connection_id(b"DO CONNECTION_ID()+0", u32::MAX).unwrap();
        assert_eq!(big, b"DO CAST(4294967295 AS UNSIGNED)+0");
    }
}
