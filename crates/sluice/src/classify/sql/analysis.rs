//! What statement text does, as the cache sees it: [`analyze`], its answer ([`Analysis`],
//! [`TableRef`]) and how the answers of `;`-separated statements combine. Apart from the
//! per-statement parsers and the scan so that the rules for a whole request, which decide
//! what the cache may do with it, read in one short file. Its tests hold the helpers the
//! other files' tests read analyses through.

use super::keywords::is_system_schema;
use super::lexer::Toks;
use super::statements::statement;

/// A table as `schema.table`, both lowercased ASCII; schema is the session default when unqualified.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
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

impl Analysis {
    /// This analysis of text read with no default schema (`analyze(sql, None)`), as it
    /// would have been read with `default_schema`: what the session's schema changes is
    /// only which tables unqualified names are, and whether a read is of a system
    /// schema. So one lexer pass serves routing, which needs no schema, and the cache,
    /// which does. (A name qualified by the empty schema, `` ``.t ``, would read as
    /// unqualified here: the server refuses it, so no result or write of it exists.)
    pub fn qualified(self, default_schema: Option<&str>) -> Analysis {
        let Some(default) = default_schema else {
            return self;
        };
        let default = default.to_ascii_lowercase();
        let qualify = |tables: Vec<TableRef>| -> (Vec<TableRef>, bool) {
            let mut changed = false;
            let tables = tables
                .into_iter()
                .map(|mut t| {
                    if t.schema.is_empty() {
                        t.schema.clone_from(&default);
                        changed = true;
                    }
                    t
                })
                .collect();
            match changed {
                true => (sorted(tables), true),
                false => (tables, false),
            }
        };
        match self {
            Analysis::Read {
                tables,
                uncacheable,
            } => {
                let (tables, changed) = qualify(tables);
                let system = changed && is_system_schema(&default);
                Analysis::Read {
                    tables,
                    uncacheable: uncacheable.or(system.then_some("system schema")),
                }
            }
            Analysis::Write {
                tables: Some(tables),
            } => Analysis::Write {
                tables: Some(qualify(tables).0),
            },
            other => other,
        }
    }
}

pub(super) fn sorted(mut tables: Vec<TableRef>) -> Vec<TableRef> {
    tables.sort_unstable();
    tables.dedup();
    tables
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

    /// Reading text once with no schema, then qualifying, is reading it with the
    /// schema: what lets routing and the cache share one analysis.
    #[test]
    fn qualifying_later_is_reading_with_the_schema() {
        let mut corpus: Vec<&str> = crate::classify::sql::tests::CORPUS.to_vec();
        corpus.extend([
            "SELECT * FROM t",
            "SELECT * FROM tables",
            "SELECT * FROM b.t JOIN t USING (id) JOIN `B`.u",
            "SELECT * FROM mysql.user",
            "SELECT * FROM t; SELECT * FROM mysql.user",
            "SELECT /*wipe*/ * FROM t /* nocache */ WHERE x = 1",
            "UPDATE t JOIN mysql.db d SET t.x = 1",
            "INSERT INTO t SELECT * FROM u",
            "WITH c AS (SELECT * FROM t) SELECT * FROM c JOIN x.y",
            "DROP TABLE a, b.c, a",
            "CALL p()",
        ]);
        for sql in corpus {
            for schema in [None, Some("Db"), Some("information_schema"), Some("MySQL")] {
                let direct = analyze(sql.as_bytes(), schema);
                let later = analyze(sql.as_bytes(), None).qualified(schema);
                match (&direct, &later) {
                    // Only which of several reasons is named may differ.
                    (
                        Analysis::Read {
                            tables: a,
                            uncacheable: x,
                        },
                        Analysis::Read {
                            tables: b,
                            uncacheable: y,
                        },
                    ) => assert!(a == b && x.is_some() == y.is_some(), "{sql} {schema:?}"),
                    _ => assert_eq!(direct, later, "{sql} {schema:?}"),
                }
            }
        }
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
}
