//! SQL text analysis for the query cache: what a statement reads or writes, whether its result
//! may be cached, our cache hints and a normalized digest. Runs on every COM_QUERY the cache
//! sees, before it is forwarded, so it is a single hand-written lexer pass with no I/O.

use super::lexer::{ident_text, Kind, Tok, Toks, Upper};
use super::scan::{Frame, Scan};

/// A table as `schema.table`, both lowercased ASCII; schema is the session default when unqualified.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableRef {
    pub schema: String,
    pub table: String,
}

/// What a statement does, as far as the cache is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Analysis {
    /// A single read-only statement; `tables` (sorted, deduplicated) are every table name it
    /// reads, plus possibly harmless extras such as CTE names. `uncacheable` is why its result
    /// can never be cached, if it cannot. `SELECT ... INTO` (variables, OUTFILE, DUMPFILE) is
    /// an uncacheable Read: it writes no table, so there is nothing to invalidate.
    Read {
        tables: Vec<TableRef>,
        uncacheable: Option<&'static str>,
    },
    /// Changes data or schema: the tables written, or `None` when they cannot be known.
    Write { tables: Option<Vec<TableRef>> },
    /// BEGIN, START TRANSACTION, COMMIT, ROLLBACK, SAVEPOINT, RELEASE SAVEPOINT.
    Transaction,
    /// SET (any form) and USE: may change how later results are computed or encoded.
    SessionChange,
    /// Known not to write and not a cacheable read: SHOW, EXPLAIN, DO, empty statements...
    Other,
}

/// Classifies statement text. `default_schema` qualifies unqualified table names (`None`: they
/// get schema ""). Several `;`-separated statements are combined: any Write wins (tables
/// unioned, `None` if any is unknown), then SessionChange, then Transaction; all reads give a
/// Read that is uncacheable ("multiple statements"); anything else is Other. One trailing `;`
/// is not a statement.
pub fn analyze(sql: &[u8], default_schema: Option<&str>) -> Analysis {
    let mut ts = Toks::new(sql);
    let mut all = Combined::default();
    loop {
        let empty = ts.peek().is_none();
        let one = if empty {
            Analysis::Other
        } else {
            statement(&mut ts, default_schema, 0)
        };
        let more = ts.end_statement();
        if !(empty && !more && all.count > 0) {
            all.add(one);
        }
        if !more {
            return all.finish();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statement classification

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

pub(super) fn sorted(mut tables: Vec<TableRef>) -> Vec<TableRef> {
    tables.sort_unstable();
    tables.dedup();
    tables
}

fn statement(ts: &mut Toks, schema: Option<&str>, nesting: u8) -> Analysis {
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

/// Per-statement results of multi-statement text, combined as `analyze` documents.
#[derive(Default)]
struct Combined {
    count: usize,
    /// `Some(None)`: some statement writes tables that are not known.
    writes: Option<Option<Vec<TableRef>>>,
    session: bool,
    transaction: bool,
    other: bool,
    reads: Option<(Vec<TableRef>, Option<&'static str>)>,
}

impl Combined {
    fn add(&mut self, one: Analysis) {
        self.count += 1;
        match one {
            Analysis::Write { tables } => {
                self.writes = Some(match (self.writes.take(), tables) {
                    (None, tables) => tables,
                    (Some(Some(mut all)), Some(tables)) => {
                        all.extend(tables);
                        Some(all)
                    }
                    _ => None,
                })
            }
            Analysis::SessionChange => self.session = true,
            Analysis::Transaction => self.transaction = true,
            Analysis::Other => self.other = true,
            Analysis::Read {
                tables,
                uncacheable,
            } => match &mut self.reads {
                Some((all, _)) => all.extend(tables),
                None => self.reads = Some((tables, uncacheable)),
            },
        }
    }

    fn finish(self) -> Analysis {
        if let Some(tables) = self.writes {
            return Analysis::Write {
                tables: tables.map(sorted),
            };
        }
        if self.session {
            return Analysis::SessionChange;
        }
        if self.transaction {
            return Analysis::Transaction;
        }
        match self.reads {
            Some((tables, uncacheable)) if !self.other => Analysis::Read {
                tables: sorted(tables),
                // Several result sets in one response: not what the cache stores.
                uncacheable: if self.count > 1 {
                    Some("multiple statements")
                } else {
                    uncacheable
                },
            },
            _ => Analysis::Other,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::classify::sql::{digest, fnv1a, hints, strip_hints, Hints};
    use std::borrow::Cow;

    pub(in crate::classify::sql) fn names(tables: &[TableRef]) -> Vec<String> {
        let mut names: Vec<String> = tables
            .iter()
            .map(|t| format!("{}.{}", t.schema, t.table))
            .collect();
        names.sort();
        names
    }

    pub(in crate::classify::sql) fn list(items: &[&str]) -> Vec<String> {
        let mut items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
        items.sort();
        items
    }

    pub(in crate::classify::sql) fn read(sql: &str) -> (Vec<String>, Option<&'static str>) {
        match analyze(sql.as_bytes(), Some("db")) {
            Analysis::Read {
                tables,
                uncacheable,
            } => (names(&tables), uncacheable),
            other => panic!("{sql}: {other:?}"),
        }
    }

    /// The tables of a cacheable read.
    pub(in crate::classify::sql) fn cacheable(sql: &str) -> Vec<String> {
        let (tables, uncacheable) = read(sql);
        assert_eq!(uncacheable, None, "{sql}");
        tables
    }

    pub(in crate::classify::sql) fn uncacheable(sql: &str) -> &'static str {
        read(sql)
            .1
            .unwrap_or_else(|| panic!("{sql} should be uncacheable"))
    }

    pub(in crate::classify::sql) fn written(sql: &str) -> Option<Vec<String>> {
        match analyze(sql.as_bytes(), Some("db")) {
            Analysis::Write { tables } => tables.map(|t| names(&t)),
            other => panic!("{sql}: {other:?}"),
        }
    }

    pub(in crate::classify::sql) fn kind(sql: &str) -> Analysis {
        analyze(sql.as_bytes(), Some("db"))
    }

    pub(in crate::classify::sql) fn contains_all(got: &[String], want: &[&str], sql: &str) {
        for w in want {
            assert!(
                got.iter().any(|g| g == w),
                "{sql}: {w} missing from {got:?}"
            );
        }
    }

    #[test]
    fn sysbench_statements() {
        for sql in [
            "SELECT c FROM sbtest1 WHERE id=4995",
            "SELECT c FROM sbtest1 WHERE id = 17",
            "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100",
            "SELECT c FROM sbtest1 WHERE id BETWEEN 10 AND 109 ORDER BY c",
        ] {
            assert_eq!(cacheable(sql), list(&["db.sbtest1"]), "{sql}");
        }
        assert_eq!(
            cacheable("SELECT DISTINCT c FROM sbtest3 WHERE id BETWEEN 1 AND 100 ORDER BY c"),
            list(&["db.sbtest3"])
        );
        assert_eq!(
            cacheable("SELECT SUM(k) FROM sbtest7 WHERE id BETWEEN 5 AND 104"),
            list(&["db.sbtest7"])
        );
        assert_eq!(
            written("UPDATE sbtest1 SET k=k+1 WHERE id=5"),
            Some(list(&["db.sbtest1"]))
        );
        assert_eq!(
            written("UPDATE sbtest4 SET c='0733-9887-31' WHERE id=5"),
            Some(list(&["db.sbtest4"]))
        );
        assert_eq!(
            written("DELETE FROM sbtest2 WHERE id=7"),
            Some(list(&["db.sbtest2"]))
        );
        assert_eq!(
            written(
                "INSERT INTO sbtest2 (id, k, c, pad) VALUES (7, 5003, \
                 '83868641912-28773972837-60736120486', '67847967377-48000963322')"
            ),
            Some(list(&["db.sbtest2"]))
        );
        assert_eq!(kind("BEGIN"), Analysis::Transaction);
        assert_eq!(kind("COMMIT"), Analysis::Transaction);
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

    #[test]
    fn writes_of_known_tables() {
        for (sql, tables) in [
            (
                "INSERT LOW_PRIORITY IGNORE INTO db2.t (a) SELECT a FROM src",
                &["db2.t"][..],
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
        ] {
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

    #[test]
    fn multiple_statements_combine() {
        assert_eq!(
            read("SELECT * FROM a; SELECT * FROM b"),
            (list(&["db.a", "db.b"]), Some("multiple statements"))
        );
        assert_eq!(cacheable("SELECT * FROM a;"), list(&["db.a"]));
        assert_eq!(cacheable("SELECT * FROM a ; -- done\n"), list(&["db.a"]));
        assert_eq!(cacheable("SELECT ';' FROM a"), list(&["db.a"]));
        assert_eq!(kind("SELECT 1;;"), Analysis::Other);
        assert_eq!(kind("; SELECT 1"), Analysis::Other);
        assert_eq!(
            written("SELECT * FROM a; UPDATE b SET x = 1"),
            Some(list(&["db.b"]))
        );
        assert_eq!(
            written("UPDATE a SET x = 1; DELETE FROM b; INSERT INTO a VALUES (1)"),
            Some(list(&["db.a", "db.b"]))
        );
        assert_eq!(written("UPDATE a SET x = 1; CALL p(); DELETE FROM b"), None);
        assert_eq!(
            written("SET NAMES utf8; DROP TABLE t"),
            Some(list(&["db.t"]))
        );
        assert_eq!(kind("SET NAMES utf8; SELECT 1"), Analysis::SessionChange);
        assert_eq!(kind("BEGIN; SELECT 1; COMMIT"), Analysis::Transaction);
        assert_eq!(kind("SHOW TABLES; SELECT 1"), Analysis::Other);
    }

    const CORPUS: &[&str] = &[
        "SELECT c FROM sbtest1 WHERE id=4995",
        "SELECT a, (SELECT MAX(b) FROM t2 WHERE t2.x = t1.x) AS m FROM t1 WHERE EXISTS (SELECT 1)",
        "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) CYCLE n RESTRICT \
         SELECT * FROM c",
        "/*!50001 CREATE ALGORITHM=UNDEFINED */ /*M!100100 VIEW v AS SELECT 1 */",
        "INSERT INTO t (a, b) VALUES (1, 'x\\'y'), (2, \"z\"\"\") \
         ON DUPLICATE KEY UPDATE a = VALUES(a)",
        "DELETE t1, t2 FROM t1 JOIN t2 USING (id) WHERE t1.id IN (1, 2)",
        "UPDATE `a``b`.`c` SET x = @v WHERE y = x'4142' AND z = b'01' OR w = 0x1f -- c\n",
        "SELECT /*nocache*/ /* wipe */ 1; SET NAMES utf8; # x\n",
        "LOAD DATA LOCAL INFILE 'f' INTO TABLE t; RENAME TABLE a TO b, c TO d",
        "ALTER TABLE t RENAME TO u, EXCHANGE PARTITION p WITH TABLE v",
        "SET STATEMENT a=1 FOR ANALYZE FORMAT=JSON EXPLAIN ANALYZE DELETE FROM t",
        "SELECT * FROM t1, JSON_TABLE(t1.doc, '$[*]' COLUMNS (x INT PATH '$.x')) jt FOR UPDATE",
        "SELECT 1e10, .5, 1.e3, db.1t, `x`.`y`(1), NEXT VALUE FOR s, @`q`, @@GLOBAL.x",
    ];

    fn exercise(sql: &[u8]) {
        let h = hints(sql);
        let stripped = strip_hints(sql);
        assert!(stripped.len() <= sql.len());
        assert_eq!(matches!(stripped, Cow::Borrowed(_)), h == Hints::default());
        let (text, hash) = digest(sql);
        assert_eq!(hash, fnv1a(text.as_bytes()));
        let _ = analyze(sql, Some("Db"));
        let _ = analyze(sql, None);
        let _ = analyze(&stripped, None);
        let _ = crate::classify::kill::scan(sql);
        let _ = crate::classify::identity::processlist(sql);
        let _ = crate::classify::identity::rewrite_connection_id(sql, u32::MAX);
    }

    #[test]
    fn never_panics_on_prefixes_or_random_bytes() {
        for sql in CORPUS {
            let sql = sql.as_bytes();
            for end in 0..=sql.len() {
                exercise(&sql[..end]);
                exercise(&sql[end..]);
            }
            // Normal text digests to a fixed point.
            let (text, _) = digest(sql);
            assert_eq!(digest(text.as_bytes()).0, text);
        }
        // Deterministic xorshift64: no extra crates, same inputs every run.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        const ALPHABET: &[u8] = b" \t\n'\"`\\/*!+-#;,.()@?=0123456789xXbBnNeEM_$\x80\xff\0\
                                  abcSELECTFROMJOINWHEREINTOUPDATEDELETEVALUESWITHTABLEUSINGSETFOR";
        const WORDS: &[&str] = &[
            "SELECT ",
            "FROM ",
            "JOIN ",
            "(",
            ")",
            ",",
            "/*",
            "*/",
            "/*!",
            "/*M!50001",
            "'",
            "\"",
            "`",
            "--",
            "-- ",
            "#",
            "\n",
            ";",
            "@",
            "@@",
            "IN (",
            "VALUES (",
            "WITH ",
            "AS ",
            "CONNECTION_ID()",
            "PROCESSLIST",
            "KILL ",
            "UPDATE ",
            "DELETE ",
            "SET ",
            "t.",
            "1",
            "x'",
            "/*nocache*/",
            "/*wipe*/",
            " ",
            "USING ",
            "FOR ",
            "EXPLAIN ANALYZE ",
            "INTO ",
            "TABLE ",
            "ROW",
            "NEXT VALUE FOR ",
            "\\",
        ];
        let mut buf = Vec::new();
        for round in 0..4000 {
            buf.clear();
            let len = (rand() % 48) as usize;
            for _ in 0..len {
                let r = rand();
                match round % 3 {
                    0 => buf.push(r as u8),
                    1 => buf.push(ALPHABET[(r % ALPHABET.len() as u64) as usize]),
                    _ => buf.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes()),
                }
            }
            exercise(&buf);
        }
    }
}
