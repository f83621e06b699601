//! The table scan under every read and multi-table write: table names from FROM, JOIN and
//! USING lists at any parenthesis depth and, for reads, the first reason a result cannot be
//! cached. Apart from the per-statement parsers because it is one state machine that SELECT,
//! WITH, UPDATE and DELETE all run, and the one place that decides what makes a read
//! uncacheable.

use super::analysis::{sorted, Analysis, TableRef};
use super::keywords::{is_system_schema, volatile};
use super::lexer::{Kind, Tok, Toks, Upper};
use super::statements::{is_name, qualified};

/// Table-list state of one parenthesis level.
#[derive(Clone, Copy, Default)]
pub(super) struct Frame {
    /// In a FROM/JOIN/USING table list, where a `,` starts another table.
    in_from: bool,
    /// The next name is a table.
    expect: bool,
}

impl Frame {
    pub(super) const TABLES: Frame = Frame {
        in_from: true,
        expect: true,
    };
}

/// Collects table names from FROM/JOIN lists at every parenthesis level and, for reads, the
/// first reason the result cannot be cached. Errs towards extra tables: a missed one would
/// leave stale results in the cache, an extra one only invalidates more often.
pub(super) struct Scan<'x> {
    schema: Option<&'x str>,
    /// Look for uncacheable constructs (reads only).
    check: bool,
    pub(super) tables: Vec<TableRef>,
    reason: Option<&'static str>,
    base: Frame,
    /// Levels opened inside the scanned text; a Vec, not recursion, so nesting depth is free.
    frames: Vec<Frame>,
    /// The previous token was FOR: `USE INDEX FOR JOIN|ORDER BY|GROUP BY` are index hints.
    after_for: bool,
}

impl<'x> Scan<'x> {
    pub(super) fn new(schema: Option<&'x str>, check: bool) -> Self {
        Scan {
            schema,
            check,
            tables: Vec::new(),
            reason: None,
            base: Frame::default(),
            frames: Vec::new(),
            after_for: false,
        }
    }

    pub(super) fn into_read(self) -> Analysis {
        Analysis::Read {
            tables: sorted(self.tables),
            uncacheable: self.reason,
        }
    }

    fn top(&mut self) -> &mut Frame {
        match self.frames.last_mut() {
            Some(frame) => frame,
            None => &mut self.base,
        }
    }

    fn flag(&mut self, reason: &'static str) {
        if self.check && self.reason.is_none() {
            self.reason = Some(reason);
        }
    }

    /// Scans to the end of the statement, or up to a token outside parentheses that `stop`
    /// accepts (given the token and its keyword form), which is left unconsumed.
    pub(super) fn run(&mut self, ts: &mut Toks, base: Frame, stop: impl Fn(Tok, &[u8]) -> bool) {
        self.base = base;
        self.frames.clear();
        self.after_for = false;
        while let Some(t) = ts.peek() {
            let up = Upper::of(Some(t), ts.text());
            if self.frames.is_empty() && stop(t, up.get()) {
                return;
            }
            ts.next();
            let after_for = std::mem::take(&mut self.after_for);
            match t.kind {
                Kind::Punct(b'(') => {
                    let top = self.top();
                    // Where a table belongs, `(` opens a derived table or a nested join.
                    let inner = if top.expect {
                        top.expect = false;
                        Frame::TABLES
                    } else {
                        Frame::default()
                    };
                    self.frames.push(inner);
                }
                Kind::Punct(b')') => {
                    self.frames.pop();
                }
                Kind::Punct(b',') => {
                    let top = self.top();
                    top.expect = top.in_from;
                }
                Kind::Word => self.word(ts, t, up.get(), after_for),
                Kind::Quoted | Kind::Str(b'"') if self.top().expect => self.table(ts, t),
                Kind::Quoted => self.stored_call(ts),
                Kind::UserVar => self.flag("user variable"),
                Kind::SysVar => self.flag("system variable"),
                _ => self.top().expect = false,
            }
        }
    }

    fn word(&mut self, ts: &mut Toks, t: Tok, up: &[u8], after_for: bool) {
        let expect = self.top().expect;
        match up {
            b"FROM" => *self.top() = Frame::TABLES,
            b"JOIN" | b"STRAIGHT_JOIN" if !after_for => *self.top() = Frame::TABLES,
            // DELETE ... USING t1, t2 lists tables; JOIN ... USING (col) does not.
            b"USING" if !ts.peek_is(b'(') => *self.top() = Frame::TABLES,
            // TABLE t, as a statement or a subquery.
            b"TABLE" => self.top().expect = true,
            b"LATERAL" if expect => {}
            b"DUAL" => self.top().expect = false,
            b"SELECT" | b"VALUES" | b"WITH" | b"WHERE" | b"HAVING" | b"LIMIT" | b"UNION"
            | b"EXCEPT" | b"INTERSECT" | b"WINDOW" | b"RETURNING" | b"SET" => {
                *self.top() = Frame::default()
            }
            b"GROUP" | b"ORDER" if !after_for => *self.top() = Frame::default(),
            b"INTO" => {
                *self.top() = Frame::default();
                // Assigns variables or writes a file: its effect is not a result to replay.
                self.flag("SELECT ... INTO");
            }
            b"FOR" => {
                self.after_for = true;
                match ts.peek_up().get() {
                    b"UPDATE" => self.flag("FOR UPDATE"),
                    b"SHARE" => self.flag("FOR SHARE"),
                    _ => {}
                }
            }
            // A name followed by `(` where a table belongs is a table function (JSON_TABLE).
            _ if expect && ts.peek_is(b'(') => self.top().expect = false,
            _ if expect => self.table(ts, t),
            _ => self.volatile_word(ts, up),
        }
    }

    fn volatile_word(&mut self, ts: &mut Toks, up: &[u8]) {
        if !self.check || self.reason.is_some() {
            return;
        }
        match up {
            b"SQL_NO_CACHE" => self.flag("SQL_NO_CACHE"),
            // The server must run it for a later FOUND_ROWS() to be right.
            b"SQL_CALC_FOUND_ROWS" => self.flag("SQL_CALC_FOUND_ROWS"),
            b"LOCK" if ts.peek_up().get() == b"IN" => self.flag("LOCK IN SHARE MODE"),
            b"NEXT" | b"PREVIOUS" if ts.peek_up().get() == b"VALUE" => {
                self.flag("sequence NEXT/PREVIOUS VALUE FOR")
            }
            _ => match volatile(up, ts.peek_is(b'(')) {
                Some(reason) => self.flag(reason),
                None => self.stored_call(ts),
            },
        }
    }

    /// `db.f(...)`: only stored functions can be qualified, and they may read any table or
    /// return anything. (Unqualified stored functions look like built-ins and are missed.)
    fn stored_call(&mut self, ts: &mut Toks) {
        if self.check
            && self.reason.is_none()
            && ts.peek_is(b'.')
            && ts.peek_after(1).is_some_and(|t| is_name(t.kind))
            && ts
                .peek_after(2)
                .is_some_and(|t| t.kind == Kind::Punct(b'('))
        {
            self.flag("stored function");
        }
    }

    fn table(&mut self, ts: &mut Toks, first: Tok) {
        self.top().expect = false;
        let table = qualified(ts, first, self.schema);
        if is_system_schema(&table.schema) {
            self.flag("system schema");
        }
        self.tables.push(table);
    }
}

#[cfg(test)]
mod tests {
    use crate::classify::sql::analysis::tests::{
        cacheable, contains_all, list, read, uncacheable, written,
    };
    use crate::classify::sql::{analyze, Analysis};

    #[test]
    fn joins_and_table_list_items() {
        assert_eq!(
            cacheable(
                "SELECT * FROM a JOIN b ON a.id = b.id LEFT OUTER JOIN c USING (id) \
                 CROSS JOIN d NATURAL JOIN e, f STRAIGHT_JOIN g RIGHT JOIN h ON (1) \
                 INNER JOIN i ON a.x IN (1, 2), j"
            ),
            list(&["db.a", "db.b", "db.c", "db.d", "db.e", "db.f", "db.g", "db.h", "db.i", "db.j"])
        );
        assert_eq!(
            cacheable(
                "SELECT * FROM t1 AS x USE INDEX (i1, i2) FORCE INDEX FOR JOIN (i3), \
                 t2 y IGNORE INDEX FOR ORDER BY (i4), t3 PARTITION (p0, p1) z, t4 \
                 WHERE x.a = 1 GROUP BY a, b ORDER BY c, d LIMIT 1, 2"
            ),
            list(&["db.t1", "db.t2", "db.t3", "db.t4"])
        );
        assert_eq!(
            cacheable(
                "SELECT * FROM t1 LEFT JOIN (t2, t3 JOIN t4 ON 1) ON t2.a = t1.a JOIN ((t5))"
            ),
            list(&["db.t1", "db.t2", "db.t3", "db.t4", "db.t5"])
        );
        assert_eq!(
            cacheable(
                "SELECT * FROM t1, JSON_TABLE(t1.doc, '$[*]' COLUMNS (x INT PATH '$.x')) AS jt"
            ),
            list(&["db.t1"])
        );
        assert_eq!(cacheable("SELECT 1 FROM DUAL"), list(&[]));
        assert_eq!(cacheable("SELECT 1"), list(&[]));
        assert_eq!(cacheable("select 1 + 2, 'x', VERSION()"), list(&[]));
    }

    #[test]
    fn subqueries_derived_tables_unions_and_ctes() {
        assert_eq!(
            cacheable(
                "SELECT a, (SELECT MAX(b) FROM t2 WHERE t2.x = t1.x) AS m FROM t1 \
                 WHERE EXISTS (SELECT 1 FROM t3) AND y IN (SELECT y FROM t4 JOIN t5 ON t4.k = t5.k)"
            ),
            list(&["db.t1", "db.t2", "db.t3", "db.t4", "db.t5"])
        );
        assert_eq!(
            cacheable(
                "SELECT * FROM (SELECT * FROM (SELECT id FROM t1) AS a JOIN t2 USING (id)) AS d, t3"
            ),
            list(&["db.t1", "db.t2", "db.t3"])
        );
        assert_eq!(
            cacheable("SELECT * FROM t1, LATERAL (SELECT * FROM t2 WHERE t2.a = t1.a) AS l"),
            list(&["db.t1", "db.t2"])
        );
        assert_eq!(
            cacheable(
                "SELECT a FROM t1 UNION ALL SELECT a FROM t2 \
                 UNION (SELECT a FROM t3 ORDER BY a LIMIT 1) \
                 EXCEPT SELECT a FROM t4 INTERSECT TABLE t5"
            ),
            list(&["db.t1", "db.t2", "db.t3", "db.t4", "db.t5"])
        );
        assert_eq!(
            cacheable("(SELECT a FROM t1) UNION (SELECT b FROM s.t2)"),
            list(&["db.t1", "s.t2"])
        );
        assert_eq!(cacheable("((SELECT 1))"), list(&[]));
        assert_eq!(cacheable("TABLE t ORDER BY a LIMIT 3"), list(&["db.t"]));
        assert_eq!(cacheable("VALUES ROW(1, 2), ROW(3, 4)"), list(&[]));
        assert_eq!(
            cacheable("SELECT * FROM (VALUES ROW(1)) AS v, (TABLE t9) AS w"),
            list(&["db.t9"])
        );

        let sql = "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5), \
                   d AS (SELECT * FROM t1 JOIN (SELECT * FROM t3) x) \
                   SELECT * FROM c JOIN d JOIN t2";
        contains_all(&cacheable(sql), &["db.t1", "db.t2", "db.t3"], sql);
        let sql = "WITH c AS (SELECT * FROM t1) (SELECT * FROM c) UNION (SELECT * FROM t2)";
        contains_all(&cacheable(sql), &["db.t1", "db.t2"], sql);
        assert_eq!(
            uncacheable("WITH c AS (SELECT NOW() AS n) SELECT * FROM c"),
            "non-deterministic function NOW()"
        );
        let sql = "WITH c AS (SELECT id FROM t2) UPDATE t1 JOIN c ON t1.id = c.id SET t1.x = 1";
        contains_all(&written(sql).unwrap(), &["db.t1"], sql);
        assert_eq!(
            written("WITH c AS (SELECT 1) DELETE FROM t1 WHERE id IN (SELECT * FROM c)"),
            Some(list(&["db.t1"]))
        );
        assert_eq!(
            written("WITH c AS (SELECT 1) INSERT INTO t VALUES (1)"),
            None
        );
        assert_eq!(written("WITH c AS SELECT 1"), None);
        assert_eq!(written("WITH c AS (SELECT 1"), None);
    }

    /// Functions whose call makes a read uncacheable.
    const VOLATILE_CALLS: &[&str] = &[
        "NOW",
        "CURRENT_TIMESTAMP",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURDATE",
        "CURTIME",
        "SYSDATE",
        "UTC_DATE",
        "UTC_TIME",
        "UTC_TIMESTAMP",
        "LOCALTIME",
        "LOCALTIMESTAMP",
        "UNIX_TIMESTAMP",
        "RAND",
        "UUID",
        "UUID_SHORT",
        "SYS_GUID",
        "CONNECTION_ID",
        "CURRENT_USER",
        "USER",
        "SESSION_USER",
        "SYSTEM_USER",
        "CURRENT_ROLE",
        "DATABASE",
        "SCHEMA",
        "LAST_INSERT_ID",
        "ROW_COUNT",
        "FOUND_ROWS",
        "GET_LOCK",
        "RELEASE_LOCK",
        "IS_FREE_LOCK",
        "IS_USED_LOCK",
        "RELEASE_ALL_LOCKS",
        "SLEEP",
        "BENCHMARK",
        "MASTER_POS_WAIT",
        "MASTER_GTID_WAIT",
        "NEXTVAL",
        "LASTVAL",
        "SETVAL",
        "LOAD_FILE",
    ];

    /// Those that do so without parentheses too.
    const VOLATILE_BARE: &[&str] = &[
        "CURRENT_TIMESTAMP",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_USER",
        "CURRENT_ROLE",
        "LOCALTIME",
        "LOCALTIMESTAMP",
        "UTC_DATE",
        "UTC_TIME",
        "UTC_TIMESTAMP",
    ];

    #[test]
    fn uncacheable_reads() {
        for (sql, reason) in [
            ("SELECT * FROM t WHERE id = 1 FOR UPDATE", "FOR UPDATE"),
            ("SELECT * FROM t FOR UPDATE SKIP LOCKED", "FOR UPDATE"),
            ("SELECT * FROM t FOR SHARE", "FOR SHARE"),
            ("SELECT * FROM t LOCK IN SHARE MODE", "LOCK IN SHARE MODE"),
            ("SELECT a INTO @x FROM t", "SELECT ... INTO"),
            ("SELECT a FROM t INTO OUTFILE 'out.txt'", "SELECT ... INTO"),
            ("SELECT a FROM t INTO DUMPFILE 'out.txt'", "SELECT ... INTO"),
            ("SELECT * FROM t WHERE a = @x", "user variable"),
            ("SELECT @`x`", "user variable"),
            ("SELECT @@session.sql_mode", "system variable"),
            ("SELECT @@version", "system variable"),
            ("SELECT SQL_NO_CACHE a FROM t", "SQL_NO_CACHE"),
            ("SELECT SQL_CALC_FOUND_ROWS a FROM t", "SQL_CALC_FOUND_ROWS"),
            (
                "SELECT NEXT VALUE FOR s",
                "sequence NEXT/PREVIOUS VALUE FOR",
            ),
            (
                "SELECT PREVIOUS VALUE FOR s",
                "sequence NEXT/PREVIOUS VALUE FOR",
            ),
            ("SELECT * FROM information_schema.tables", "system schema"),
            ("SELECT * FROM INFORMATION_SCHEMA.TABLES", "system schema"),
            ("SELECT * FROM performance_schema.threads", "system schema"),
            ("SELECT * FROM t JOIN mysql.user", "system schema"),
            ("SELECT * FROM `sys`.`x`", "system schema"),
            ("SELECT db.f(1) FROM t", "stored function"),
            ("SELECT `db`.`f` (1)", "stored function"),
            (
                "SELECT * FROM t WHERE a = (SELECT RAND())",
                "non-deterministic function RAND()",
            ),
            ("SELECT now ()", "non-deterministic function NOW()"),
            (
                "SELECT * FROM t WHERE d < CURRENT_TIMESTAMP",
                "non-deterministic function CURRENT_TIMESTAMP()",
            ),
            (
                "SELECT current_user",
                "non-deterministic function CURRENT_USER()",
            ),
        ] {
            assert_eq!(uncacheable(sql), reason, "{sql}");
        }
        for f in VOLATILE_CALLS {
            let sql = format!("SELECT a, {}(x) FROM t", f.to_lowercase());
            assert_eq!(
                uncacheable(&sql),
                format!("non-deterministic function {f}()"),
                "{sql}"
            );
        }
        for f in VOLATILE_BARE {
            let sql = format!("SELECT {f}");
            assert!(read(&sql).1.is_some(), "{sql}");
        }
        match analyze(b"SELECT * FROM user", Some("mysql")) {
            Analysis::Read { uncacheable, .. } => assert_eq!(uncacheable, Some("system schema")),
            other => panic!("{other:?}"),
        }
        // Names that only look like the above.
        for sql in [
            "SELECT now, user, `rand`(1) FROM t",
            "SELECT 'NOW()', \"@x\" FROM t -- @y FOR UPDATE",
            "SELECT VERSION(), ROWNUM(), t.database FROM t",
            "SELECT * FROM mysql_data.t, t.sys",
            "SELECT * FROM t FOR SYSTEM_TIME ALL",
            "SELECT * FROM t WHERE MATCH (a) AGAINST ('x' IN BOOLEAN MODE)",
        ] {
            cacheable(sql);
        }
    }
}
