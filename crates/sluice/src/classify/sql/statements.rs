//! One statement at a time: what its first words make it, and for a write, the tables it
//! names. Apart from the scan and from combining several statements because each kind of
//! statement has a short grammar of its own (INSERT, ALTER, RENAME...), read only as far as
//! the cache needs. The readers of (qualified) table names are here too; the scan uses them.

use super::analysis::{sorted, Analysis, TableRef};
use super::lexer::{ident_text, Kind, Tok, Toks, Upper};
use super::scan::{Frame, Scan};

/// How deep statements may nest (`EXPLAIN ANALYZE ...`, `SET STATEMENT ... FOR ...`) before the
/// text counts as an unknown write; bounds recursion on hostile input.
const MAX_NESTING: u8 = 4;

fn unknown_write() -> Analysis {
    Analysis::Write { tables: None }
}

/// A write of `tables`; none found means the parse went wrong, so everything may be written.
fn writes(tables: Vec<TableRef>) -> Analysis {
    if tables.is_empty() {
        return unknown_write();
    }
    Analysis::Write {
        tables: Some(sorted(tables)),
    }
}

pub(super) fn statement(ts: &mut Toks, schema: Option<&str>, nesting: u8) -> Analysis {
    if nesting > MAX_NESTING {
        return unknown_write();
    }
    if ts.peek_is(b'(') {
        let mut ahead = ts.clone();
        while ahead.peek_is(b'(') {
            ahead.next();
        }
        return match ahead.peek_up().get() {
            b"SELECT" | b"WITH" | b"VALUES" | b"TABLE" => read(ts, schema),
            _ => unknown_write(),
        };
    }
    let first = ts.peek_up();
    if matches!(first.get(), b"SELECT" | b"TABLE" | b"VALUES") {
        return read(ts, schema);
    }
    ts.next();
    match first.get() {
        b"WITH" => with(ts, schema),
        b"INSERT" | b"REPLACE" => insert(ts, schema),
        b"UPDATE" => update(ts, schema),
        b"DELETE" => delete(ts, schema),
        b"LOAD" => load(ts, schema),
        b"TRUNCATE" => {
            ts.eat(b"TABLE");
            one_table(ts, schema)
        }
        b"CREATE" => create(ts, schema),
        b"ALTER" => alter(ts, schema),
        b"DROP" => drop(ts, schema),
        b"RENAME" => rename(ts, schema),
        b"OPTIMIZE" | b"REPAIR" => maintenance(ts, schema),
        b"ANALYZE" => match ts.peek_up().get() {
            b"TABLE" | b"TABLES" | b"NO_WRITE_TO_BINLOG" | b"LOCAL" => maintenance(ts, schema),
            // MariaDB's ANALYZE runs the statement to report on its execution.
            _ => executed(ts, schema, nesting),
        },
        b"EXPLAIN" | b"DESCRIBE" | b"DESC" => {
            if ts.eat(b"ANALYZE") {
                executed(ts, schema, nesting)
            } else {
                Analysis::Other
            }
        }
        b"SHOW" | b"HELP" | b"DO" | b"KILL" | b"CHECK" | b"CHECKSUM" | b"PREPARE"
        | b"DEALLOCATE" => Analysis::Other,
        b"BEGIN" => {
            ts.eat(b"WORK");
            // Anything else (MariaDB's BEGIN NOT ATOMIC) is a compound statement.
            if ts.peek().is_none() {
                Analysis::Transaction
            } else {
                unknown_write()
            }
        }
        // Not START SLAVE / REPLICA / GROUP_REPLICATION.
        b"START" if ts.eat(b"TRANSACTION") => Analysis::Transaction,
        b"COMMIT" | b"SAVEPOINT" => Analysis::Transaction,
        b"ROLLBACK" => {
            // ROLLBACK TO SAVEPOINT keeps the transaction open.
            while let Some(t) = ts.next() {
                if Upper::of(Some(t), ts.text()).get() == b"TO" {
                    return Analysis::Other;
                }
            }
            Analysis::Transaction
        }
        b"RELEASE" if ts.eat(b"SAVEPOINT") => Analysis::Transaction,
        b"SET" if ts.eat(b"STATEMENT") => {
            // MariaDB's SET STATEMENT var=value[, ...] FOR stmt runs stmt under those values.
            if skip_past(ts, b"FOR") {
                executed(ts, schema, nesting)
            } else {
                Analysis::SessionChange
            }
        }
        b"SET" | b"USE" => Analysis::SessionChange,
        _ => unknown_write(),
    }
}

/// A statement that runs another one (`ANALYZE stmt`, `EXPLAIN ANALYZE stmt`, `SET STATEMENT
/// ... FOR stmt`): what the inner one does, except that its read output (execution reports,
/// results under temporary settings) is not for the cache.
fn executed(ts: &mut Toks, schema: Option<&str>, nesting: u8) -> Analysis {
    if ts.eat(b"FORMAT") {
        if ts.peek_is(b'=') {
            ts.next();
        }
        ts.next();
    }
    match statement(ts, schema, nesting + 1) {
        Analysis::Read { .. } => Analysis::Other,
        inner => inner,
    }
}

fn read(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    let mut scan = Scan::new(schema, true);
    scan.run(ts, Frame::default(), |_, _| false);
    scan.into_read()
}

/// `WITH [RECURSIVE] cte [(cols)] AS (query) [, ...] main`: a read when main is a query; MySQL
/// also allows UPDATE and DELETE there.
fn with(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    let mut scan = Scan::new(schema, true);
    ts.eat(b"RECURSIVE");
    loop {
        if !ts.next().is_some_and(|t| is_name(t.kind)) {
            return unknown_write();
        }
        if ts.peek_is(b'(') {
            skip_parens(ts);
        }
        if !ts.eat(b"AS") || !ts.peek_is(b'(') {
            return unknown_write();
        }
        ts.next();
        scan.run(ts, Frame::default(), |t, _| t.kind == Kind::Punct(b')'));
        if ts.next().is_none() {
            return unknown_write();
        }
        // MariaDB's CYCLE cols RESTRICT.
        if ts.eat(b"CYCLE") && !skip_past(ts, b"RESTRICT") {
            return unknown_write();
        }
        if !ts.peek_is(b',') {
            break;
        }
        ts.next();
    }
    let main = ts.peek_up();
    match main.get() {
        b"UPDATE" | b"DELETE" => {
            ts.next();
            if main.get() == b"UPDATE" {
                update(ts, schema)
            } else {
                delete(ts, schema)
            }
        }
        b"SELECT" | b"TABLE" | b"VALUES" => {
            scan.run(ts, Frame::default(), |_, _| false);
            scan.into_read()
        }
        _ if ts.peek_is(b'(') => {
            scan.run(ts, Frame::default(), |_, _| false);
            scan.into_read()
        }
        _ => unknown_write(),
    }
}

/// INSERT/REPLACE: only the target is written, whatever an INSERT ... SELECT reads.
fn insert(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    while matches!(
        ts.peek_up().get(),
        b"LOW_PRIORITY" | b"DELAYED" | b"HIGH_PRIORITY" | b"IGNORE" | b"INTO"
    ) {
        ts.next();
    }
    one_table(ts, schema)
}

/// Every table in a multi-table UPDATE's list may be written.
fn update(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    while matches!(ts.peek_up().get(), b"LOW_PRIORITY" | b"IGNORE") {
        ts.next();
    }
    let mut scan = Scan::new(schema, false);
    scan.run(ts, Frame::TABLES, |_, up| up == b"SET");
    writes(scan.tables)
}

/// Both multi-table forms (`DELETE t1, t2 FROM refs`, `DELETE FROM t1, t2 USING refs`) name
/// aliases as targets, so every table named before WHERE counts as written.
fn delete(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    while matches!(ts.peek_up().get(), b"LOW_PRIORITY" | b"QUICK" | b"IGNORE") {
        ts.next();
    }
    let mut scan = Scan::new(schema, false);
    scan.run(ts, Frame::TABLES, |_, up| {
        matches!(up, b"WHERE" | b"ORDER" | b"LIMIT" | b"RETURNING")
    });
    writes(scan.tables)
}

/// LOAD DATA|XML ... INTO TABLE t.
fn load(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    if !matches!(ts.peek_up().get(), b"DATA" | b"XML") || !skip_past(ts, b"INTO") {
        return unknown_write();
    }
    ts.eat(b"TABLE");
    one_table(ts, schema)
}

/// CREATE TABLE and CREATE INDEX name their table; every other CREATE is unknown.
fn create(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    loop {
        let word = ts.peek_up();
        ts.next();
        match word.get() {
            b"OR" | b"REPLACE" | b"TEMPORARY" | b"UNIQUE" | b"FULLTEXT" | b"SPATIAL"
            | b"ONLINE" | b"OFFLINE" => {}
            b"TABLE" => {
                skip_if_exists(ts);
                return one_table(ts, schema);
            }
            b"INDEX" if skip_past(ts, b"ON") => return one_table(ts, schema),
            _ => return unknown_write(),
        }
    }
}

/// ALTER TABLE t, plus a new name from RENAME and tables swapped in by partition exchange or
/// conversion (`... WITH TABLE t2`, `... TO TABLE t2`).
fn alter(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    while matches!(ts.peek_up().get(), b"ONLINE" | b"OFFLINE" | b"IGNORE") {
        ts.next();
    }
    if !ts.eat(b"TABLE") {
        return unknown_write();
    }
    skip_if_exists(ts);
    let Some(first) = next_table(ts, schema) else {
        return unknown_write();
    };
    let mut tables = vec![first];
    let mut depth = 0usize;
    while let Some(t) = ts.next() {
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => depth = depth.saturating_sub(1),
            Kind::Word if depth == 0 => match Upper::of(Some(t), ts.text()).get() {
                b"RENAME" => {
                    if matches!(
                        ts.peek_up().get(),
                        b"COLUMN" | b"INDEX" | b"KEY" | b"CONSTRAINT"
                    ) {
                        continue;
                    }
                    if !ts.eat(b"TO") {
                        ts.eat(b"AS");
                    }
                    tables.extend(next_table(ts, schema));
                }
                b"TABLE" => tables.extend(next_table(ts, schema)),
                _ => {}
            },
            _ => {}
        }
    }
    writes(tables)
}

fn drop(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    ts.eat(b"TEMPORARY");
    let object = ts.peek_up();
    ts.next();
    match object.get() {
        b"TABLE" | b"TABLES" => {
            skip_if_exists(ts);
            table_list(ts, schema)
        }
        b"INDEX" if skip_past(ts, b"ON") => one_table(ts, schema),
        b"PREPARE" => Analysis::Other,
        _ => unknown_write(),
    }
}

/// RENAME TABLE a TO b, c TO d: every name, old and new.
fn rename(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    if !matches!(ts.peek_up().get(), b"TABLE" | b"TABLES") {
        return unknown_write();
    }
    ts.next();
    skip_if_exists(ts);
    let mut tables = Vec::new();
    while let Some(t) = next_table(ts, schema) {
        tables.push(t);
        if ts.peek_is(b',') {
            ts.next();
        } else if !ts.eat(b"TO") {
            break;
        }
    }
    writes(tables)
}

/// OPTIMIZE/REPAIR/ANALYZE TABLE: no data change, but some rebuild the table, so treat as writes.
fn maintenance(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    while matches!(ts.peek_up().get(), b"NO_WRITE_TO_BINLOG" | b"LOCAL") {
        ts.next();
    }
    if !matches!(ts.peek_up().get(), b"TABLE" | b"TABLES") {
        return unknown_write();
    }
    ts.next();
    table_list(ts, schema)
}

/// `t1, t2, ...`
fn table_list(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    let mut tables = Vec::new();
    while let Some(t) = next_table(ts, schema) {
        tables.push(t);
        if !ts.peek_is(b',') {
            break;
        }
        ts.next();
    }
    writes(tables)
}

fn one_table(ts: &mut Toks, schema: Option<&str>) -> Analysis {
    match next_table(ts, schema) {
        Some(t) => writes(vec![t]),
        None => unknown_write(),
    }
}

fn skip_if_exists(ts: &mut Toks) {
    if ts.eat(b"IF") {
        ts.eat(b"NOT");
        ts.eat(b"EXISTS");
    }
}

/// Consumes tokens through the keyword `kw` outside parentheses; false if there is none.
fn skip_past(ts: &mut Toks, kw: &[u8]) -> bool {
    let mut depth = 0usize;
    while let Some(t) = ts.next() {
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => depth = depth.saturating_sub(1),
            Kind::Word if depth == 0 && Upper::of(Some(t), ts.text()).get() == kw => return true,
            _ => {}
        }
    }
    false
}

/// Consumes a parenthesised group starting at the next token.
fn skip_parens(ts: &mut Toks) {
    let mut depth = 0usize;
    while let Some(t) = ts.next() {
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 {
            return;
        }
    }
}

/// Tokens that can name a table; `"..."` too, as it does under ANSI_QUOTES.
pub(super) fn is_name(kind: Kind) -> bool {
    matches!(kind, Kind::Word | Kind::Quoted | Kind::Str(b'"'))
}

fn next_table(ts: &mut Toks, schema: Option<&str>) -> Option<TableRef> {
    let first = ts.peek().filter(|t| is_name(t.kind))?;
    ts.next();
    Some(qualified(ts, first, schema))
}

/// The table named by `first` and, if it is a schema, the `.name` after it.
pub(super) fn qualified(ts: &mut Toks, first: Tok, schema: Option<&str>) -> TableRef {
    let s = ts.text();
    if ts.peek_is(b'.') && ts.peek_after(1).is_some_and(|t| is_name(t.kind)) {
        ts.next();
        if let Some(name) = ts.next() {
            return TableRef {
                schema: ident_text(s, first),
                table: ident_text(s, name),
            };
        }
    }
    TableRef {
        schema: schema.map(str::to_ascii_lowercase).unwrap_or_default(),
        table: ident_text(s, first),
    }
}

/// The schema `USE db` makes the default, when the text is that one statement (a `;`
/// and comments may follow, nothing else). `None` for anything else, a multi-statement
/// text included: what runs after the `USE` may change the schema again.
pub fn use_target(sql: &[u8]) -> Option<Vec<u8>> {
    let mut ts = Toks::new(sql);
    if Upper::of(ts.next(), sql).get() != b"USE" {
        return None;
    }
    let name = ts
        .next()
        .filter(|t| matches!(t.kind, Kind::Word | Kind::Quoted))?;
    if ts.next().is_some() {
        return None;
    }
    // Past the statement's `;`, only comments and more `;` may follow.
    let mut rest = super::lexer::Lexer::new(&sql[name.end..]);
    let only_ends =
        std::iter::from_fn(|| super::code_token(&mut rest)).all(|t| t.kind == Kind::Punct(b';'));
    only_ends.then(|| super::ident_text(sql, name).into_bytes())
}

#[cfg(test)]
mod tests {
    use crate::classify::sql::analysis::tests::{
        cacheable, contains_all, kind, list, names, written,
    };
    use crate::classify::sql::{analyze, use_target, Analysis, TableRef};

    #[test]
    fn the_schema_a_use_statement_names() {
        let to = |sql: &str| use_target(sql.as_bytes()).map(|s| String::from_utf8(s).unwrap());
        assert_eq!(to("USE shop").as_deref(), Some("shop"));
        assert_eq!(to("  use `my db`;").as_deref(), Some("my db"));
        assert_eq!(to("USE `a``b` /* note */ ;;").as_deref(), Some("a`b"));
        assert_eq!(to("/* lead */ USE x -- trailing").as_deref(), Some("x"));
        assert_eq!(
            to("USE x; SELECT 1"),
            None,
            "a later statement may change it"
        );
        assert_eq!(to("USE x y"), None);
        assert_eq!(to("USE 'x'"), None, "not a name: the server refuses it");
        assert_eq!(to("USER x"), None);
        assert_eq!(to("SELECT 1"), None);
        assert_eq!(to("USE"), None);
    }

    #[test]
    fn names_quoting_and_schemas() {
        assert_eq!(
            cacheable(
                "SELECT * FROM `Shop`.`Order Items` oi JOIN Shop . Users u ON 1 \
                 JOIN \"ansi\".\"T\" JOIN `we``ird` JOIN tablé JOIN $t JOIN db2.1t JOIN SBTEST1"
            ),
            list(&[
                "shop.order items",
                "shop.users",
                "ansi.t",
                "db.we`ird",
                "db.tablé",
                "db.$t",
                "db2.1t",
                "db.sbtest1"
            ])
        );
        match analyze(b"SELECT * FROM t", None) {
            Analysis::Read { tables, .. } => assert_eq!(
                tables,
                vec![TableRef {
                    schema: String::new(),
                    table: "t".into()
                }]
            ),
            other => panic!("{other:?}"),
        }
        match analyze(b"SELECT * FROM t, T, `t`", Some("MyDB")) {
            Analysis::Read { tables, .. } => assert_eq!(names(&tables), list(&["mydb.t"])),
            other => panic!("{other:?}"),
        }
        let sql = "SELECT * FROM t WHERE EXTRACT(YEAR FROM d) = 2020 AND x = 'FROM y'";
        contains_all(&cacheable(sql), &["db.t"], sql);
        let sql = "SELECT CONVERT(a USING utf8mb4), CAST(b AS CHAR CHARACTER SET latin1) FROM t, u";
        contains_all(&cacheable(sql), &["db.t", "db.u"], sql);
        assert_eq!(
            cacheable(&format!(
                "SELECT * FROM {}t{}",
                "(".repeat(50),
                ")".repeat(50)
            )),
            list(&["db.t"])
        );
    }

    /// Writes whose tables are all known, with those tables.
    const KNOWN_WRITES: &[(&str, &[&str])] = &[
        (
            "INSERT LOW_PRIORITY IGNORE INTO db2.t (a) SELECT a FROM src",
            &["db2.t"],
        ),
        ("INSERT INTO t SET a = 1", &["db.t"]),
        ("INSERT t VALUES (1)", &["db.t"]),
        (
            "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a) + 1",
            &["db.t"],
        ),
        ("REPLACE DELAYED INTO `T` VALUES (1)", &["db.t"]),
        (
            "UPDATE t1, t2 SET t1.a = t2.a WHERE t1.id = t2.id",
            &["db.t1", "db.t2"],
        ),
        (
            "UPDATE LOW_PRIORITY IGNORE t1 AS a JOIN s.t2 b ON a.id = b.id SET a.x = 1",
            &["db.t1", "s.t2"],
        ),
        (
            "UPDATE t1 SET a = (SELECT MAX(b) FROM t3) WHERE c IN (SELECT c FROM t4)",
            &["db.t1"],
        ),
        (
            "DELETE QUICK IGNORE FROM t WHERE id IN (SELECT id FROM u)",
            &["db.t"],
        ),
        ("DELETE FROM s.t AS x ORDER BY id LIMIT 10", &["s.t"]),
        ("DELETE t1.* FROM t1", &["db.t1"]),
        (
            "LOAD DATA LOCAL INFILE 'data.csv' REPLACE INTO TABLE s.t FIELDS TERMINATED BY ','",
            &["s.t"],
        ),
        ("LOAD DATA CONCURRENT INFILE 'x' INTO TABLE t", &["db.t"]),
        (
            "LOAD XML INFILE 'x' INTO TABLE t ROWS IDENTIFIED BY '<row>'",
            &["db.t"],
        ),
        ("TRUNCATE TABLE t", &["db.t"]),
        ("truncate t2", &["db.t2"]),
        (
            "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(10))",
            &["db.t"],
        ),
        (
            "CREATE TEMPORARY TABLE IF NOT EXISTS t2 LIKE t1",
            &["db.t2"],
        ),
        ("CREATE TABLE t3 AS SELECT * FROM t1 JOIN t4", &["db.t3"]),
        ("CREATE OR REPLACE TABLE s.t4 (a INT)", &["s.t4"]),
        ("CREATE UNIQUE INDEX i USING BTREE ON t5 (a, b)", &["db.t5"]),
        ("DROP INDEX `PRIMARY` ON t6", &["db.t6"]),
        ("ALTER TABLE t7 ADD COLUMN c INT, ADD INDEX (c)", &["db.t7"]),
        ("ALTER TABLE t8 RENAME TO s.t9", &["db.t8", "s.t9"]),
        ("ALTER TABLE t8 RENAME t9", &["db.t8", "db.t9"]),
        (
            "ALTER TABLE t10 RENAME COLUMN a TO b, RENAME INDEX i TO j",
            &["db.t10"],
        ),
        (
            "ALTER ONLINE TABLE t11 EXCHANGE PARTITION p WITH TABLE t12",
            &["db.t11", "db.t12"],
        ),
        ("DROP TABLE a, b", &["db.a", "db.b"]),
        (
            "DROP TEMPORARY TABLE IF EXISTS s.a, `B` CASCADE",
            &["s.a", "db.b"],
        ),
        (
            "RENAME TABLE a TO b, s.c TO d",
            &["db.a", "db.b", "s.c", "db.d"],
        ),
        ("OPTIMIZE TABLE a, b", &["db.a", "db.b"]),
        ("REPAIR NO_WRITE_TO_BINLOG TABLE a QUICK", &["db.a"]),
        ("ANALYZE LOCAL TABLE a", &["db.a"]),
        ("ANALYZE DELETE FROM t WHERE a = 1", &["db.t"]),
        ("EXPLAIN ANALYZE UPDATE t SET a = 1", &["db.t"]),
        (
            "SET STATEMENT max_statement_time = 1 FOR UPDATE t SET a = 1",
            &["db.t"],
        ),
    ];

    #[test]
    fn writes_of_known_tables() {
        for &(sql, tables) in KNOWN_WRITES {
            assert_eq!(written(sql), Some(list(tables)), "{sql}");
        }
        for (sql, want) in [
            (
                "DELETE t1, t2 FROM t1 INNER JOIN t2 INNER JOIN t3 WHERE t1.id = t2.id",
                &["db.t1", "db.t2"][..],
            ),
            (
                "DELETE FROM t1, t2 USING t1 INNER JOIN t2 INNER JOIN t3 WHERE t1.id = t2.id",
                &["db.t1", "db.t2"],
            ),
            (
                "DELETE a FROM sbtest1 AS a JOIN sbtest2 b ON a.id = b.id WHERE a.id = 1",
                &["db.sbtest1"],
            ),
            (
                "DELETE LOW_PRIORITY x.*, y FROM s.t1 x, t2 y",
                &["s.t1", "db.t2"],
            ),
        ] {
            contains_all(&written(sql).unwrap(), want, sql);
        }
    }

    #[test]
    fn writes_of_unknown_tables() {
        for sql in [
            "CREATE DATABASE x",
            "DROP SCHEMA IF EXISTS x",
            "ALTER DATABASE x CHARACTER SET utf8mb4",
            "CREATE VIEW v AS SELECT * FROM t",
            "CREATE OR REPLACE DEFINER = root@localhost VIEW v AS SELECT 1",
            "DROP VIEW v",
            "ALTER VIEW v AS SELECT 2",
            "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
            "CREATE PROCEDURE p() BEGIN UPDATE t SET a = 1; SELECT 1; END",
            "DROP FUNCTION f",
            "CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO DELETE FROM t",
            "CREATE SEQUENCE s",
            "GRANT SELECT ON *.* TO 'u'@'%'",
            "REVOKE ALL ON db.* FROM u",
            "FLUSH TABLES",
            "CALL p(1)",
            "HANDLER t OPEN",
            "LOCK TABLES t WRITE",
            "UNLOCK TABLES",
            "XA START 'x'",
            "BEGIN NOT ATOMIC UPDATE t SET a = 1; END",
            "EXECUTE s USING @a",
            "START SLAVE",
            "RENAME USER a TO b",
            "IF 1 THEN SELECT 1; END IF",
            "FOO BAR",
            "(UPDATE t SET a = 1)",
            "UPDATE SET",
            "INSERT INTO",
            "ALTER TABLE",
            "CREATE INDEX i",
            "SELECT 1; CALL p()",
        ] {
            assert_eq!(written(sql), None, "{sql}");
        }
    }

    #[test]
    fn transactions_sessions_and_others() {
        for sql in [
            "BEGIN",
            "begin work;",
            "START TRANSACTION READ ONLY",
            "START TRANSACTION WITH CONSISTENT SNAPSHOT",
            "COMMIT",
            "COMMIT WORK AND NO CHAIN NO RELEASE",
            "ROLLBACK AND CHAIN",
            "rollback",
            "SAVEPOINT a",
            "RELEASE SAVEPOINT a",
        ] {
            assert_eq!(kind(sql), Analysis::Transaction, "{sql}");
        }
        for sql in [
            "SET NAMES utf8mb4",
            "SET CHARACTER SET latin1",
            "SET @@session.sql_mode = ''",
            "SET SESSION wait_timeout = 10",
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "SET @a = (SELECT MAX(id) FROM t)",
            "set autocommit=0",
            "USE db2",
            "USE `db`",
        ] {
            assert_eq!(kind(sql), Analysis::SessionChange, "{sql}");
        }
        for sql in [
            "",
            "   ",
            ";",
            "-- nothing\n",
            "/* nothing */",
            "SHOW TABLES",
            "SHOW CREATE TABLE t",
            "DESCRIBE t",
            "DESC t",
            "EXPLAIN SELECT * FROM t",
            "EXPLAIN FORMAT=JSON DELETE FROM t",
            "EXPLAIN ANALYZE SELECT * FROM t",
            "ANALYZE FORMAT=JSON SELECT * FROM t",
            "DO 1",
            "HELP 'select'",
            "CHECK TABLE t",
            "CHECKSUM TABLE t",
            "KILL 5",
            "PREPARE s FROM 'SELECT 1'",
            "DEALLOCATE PREPARE s",
            "DROP PREPARE s",
            "ROLLBACK TO SAVEPOINT a",
            "ROLLBACK WORK TO a",
            "SET STATEMENT max_statement_time = 1 FOR SELECT * FROM t",
        ] {
            assert_eq!(kind(sql), Analysis::Other, "{sql}");
        }
        assert_eq!(
            written(&"EXPLAIN ANALYZE ".repeat(10_000)),
            None,
            "deep nesting is bounded"
        );
    }
}
