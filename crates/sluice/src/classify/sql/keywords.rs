//! Word lists the digest and the read analysis match against: the keywords the digest
//! upper-cases, with the table that looks them up, and the function and schema names that
//! make a read's result uncacheable. Apart from the code that uses them because they are
//! data, hundreds of lines that grow with server versions, and reading them is not reading
//! the logic.

use super::digest::fnv1a;

/// Words the digest upper-cases: reserved words and common keywords and functions. Folding a
/// column or table that happens to share a name only merges digests that differ in case.
const KEYWORDS: &[&str] = &[
    "ACCESSIBLE",
    "ACTION",
    "ADD",
    "AFTER",
    "AGAINST",
    "ALGORITHM",
    "ALL",
    "ALTER",
    "ANALYZE",
    "AND",
    "ANY",
    "AS",
    "ASC",
    "ASENSITIVE",
    "AT",
    "ATOMIC",
    "AUTOCOMMIT",
    "AUTO_INCREMENT",
    "AVG",
    "BEFORE",
    "BEGIN",
    "BETWEEN",
    "BIGINT",
    "BINARY",
    "BLOB",
    "BOOLEAN",
    "BOTH",
    "BY",
    "CALL",
    "CASCADE",
    "CASE",
    "CAST",
    "CHAIN",
    "CHANGE",
    "CHAR",
    "CHARACTER",
    "CHARSET",
    "CHECK",
    "CHECKSUM",
    "COALESCE",
    "COLLATE",
    "COLUMN",
    "COLUMNS",
    "COMMENT",
    "COMMIT",
    "COMMITTED",
    "CONCAT",
    "CONDITION",
    "CONSTRAINT",
    "CONTINUE",
    "CONVERT",
    "COUNT",
    "CREATE",
    "CROSS",
    "CUBE",
    "CUME_DIST",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "CURSOR",
    "DATABASE",
    "DATABASES",
    "DATE",
    "DATETIME",
    "DATE_ADD",
    "DATE_SUB",
    "DAY",
    "DAY_HOUR",
    "DAY_MICROSECOND",
    "DAY_MINUTE",
    "DAY_SECOND",
    "DEALLOCATE",
    "DEC",
    "DECIMAL",
    "DECLARE",
    "DEFAULT",
    "DEFINER",
    "DELAYED",
    "DELETE",
    "DENSE_RANK",
    "DESC",
    "DESCRIBE",
    "DETERMINISTIC",
    "DISTINCT",
    "DISTINCTROW",
    "DIV",
    "DO",
    "DOUBLE",
    "DROP",
    "DUAL",
    "DUPLICATE",
    "EACH",
    "ELSE",
    "ELSEIF",
    "EMPTY",
    "ENCLOSED",
    "END",
    "ENGINE",
    "ENUM",
    "ESCAPED",
    "EXCEPT",
    "EXECUTE",
    "EXISTS",
    "EXIT",
    "EXPLAIN",
    "EXTENDED",
    "EXTRACT",
    "FALSE",
    "FETCH",
    "FIELDS",
    "FIRST",
    "FIRST_VALUE",
    "FLOAT",
    "FLOAT4",
    "FLOAT8",
    "FLUSH",
    "FOR",
    "FORCE",
    "FOREIGN",
    "FORMAT",
    "FROM",
    "FULL",
    "FULLTEXT",
    "FUNCTION",
    "GENERATED",
    "GET",
    "GLOBAL",
    "GRANT",
    "GROUP",
    "GROUPING",
    "GROUPS",
    "GROUP_CONCAT",
    "HANDLER",
    "HAVING",
    "HELP",
    "HIGH_PRIORITY",
    "HOUR",
    "HOUR_MICROSECOND",
    "HOUR_MINUTE",
    "HOUR_SECOND",
    "IF",
    "IFNULL",
    "IGNORE",
    "IN",
    "INDEX",
    "INFILE",
    "INNER",
    "INOUT",
    "INSENSITIVE",
    "INSERT",
    "INT",
    "INT1",
    "INT2",
    "INT3",
    "INT4",
    "INT8",
    "INTEGER",
    "INTERSECT",
    "INTERVAL",
    "INTO",
    "INVOKER",
    "IS",
    "ISOLATION",
    "ITERATE",
    "JOIN",
    "JSON_TABLE",
    "KEY",
    "KEYS",
    "KILL",
    "LAG",
    "LAST",
    "LAST_VALUE",
    "LATERAL",
    "LEAD",
    "LEADING",
    "LEAVE",
    "LEFT",
    "LENGTH",
    "LEVEL",
    "LIKE",
    "LIMIT",
    "LINEAR",
    "LINES",
    "LOAD",
    "LOCAL",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "LOCK",
    "LOCKED",
    "LONG",
    "LONGBLOB",
    "LONGTEXT",
    "LOOP",
    "LOWER",
    "LOW_PRIORITY",
    "MATCH",
    "MAX",
    "MAXVALUE",
    "MEDIUMBLOB",
    "MEDIUMINT",
    "MEDIUMTEXT",
    "MIDDLEINT",
    "MIN",
    "MINUTE",
    "MINUTE_MICROSECOND",
    "MINUTE_SECOND",
    "MOD",
    "MODE",
    "MODIFIES",
    "MONTH",
    "NAMES",
    "NATURAL",
    "NEXT",
    "NO",
    "NOT",
    "NOW",
    "NOWAIT",
    "NO_WRITE_TO_BINLOG",
    "NTH_VALUE",
    "NTILE",
    "NULL",
    "NUMERIC",
    "OF",
    "OFFSET",
    "ON",
    "ONLY",
    "OPTIMIZE",
    "OPTION",
    "OPTIONALLY",
    "OR",
    "ORDER",
    "OUT",
    "OUTER",
    "OUTFILE",
    "OVER",
    "PARTITION",
    "PERCENT_RANK",
    "PRECISION",
    "PREPARE",
    "PREVIOUS",
    "PRIMARY",
    "PROCEDURE",
    "PURGE",
    "QUARTER",
    "QUICK",
    "RANGE",
    "RANK",
    "READ",
    "READS",
    "READ_WRITE",
    "REAL",
    "RECURSIVE",
    "REFERENCES",
    "REGEXP",
    "RELEASE",
    "RENAME",
    "REPAIR",
    "REPEAT",
    "REPEATABLE",
    "REPLACE",
    "REQUIRE",
    "RESIGNAL",
    "RESTRICT",
    "RETURN",
    "RETURNING",
    "REVOKE",
    "RIGHT",
    "RLIKE",
    "ROLLBACK",
    "ROLLUP",
    "ROW",
    "ROWS",
    "ROW_NUMBER",
    "SAVEPOINT",
    "SCHEMA",
    "SCHEMAS",
    "SECOND",
    "SECOND_MICROSECOND",
    "SECURITY",
    "SELECT",
    "SENSITIVE",
    "SEPARATOR",
    "SEQUENCE",
    "SERIALIZABLE",
    "SESSION",
    "SET",
    "SHARE",
    "SHOW",
    "SIGNAL",
    "SIGNED",
    "SKIP",
    "SMALLINT",
    "SNAPSHOT",
    "SOME",
    "SPATIAL",
    "SPECIFIC",
    "SQL",
    "SQLEXCEPTION",
    "SQLSTATE",
    "SQLWARNING",
    "SQL_BIG_RESULT",
    "SQL_CACHE",
    "SQL_CALC_FOUND_ROWS",
    "SQL_NO_CACHE",
    "SQL_SMALL_RESULT",
    "SSL",
    "START",
    "STARTING",
    "STORED",
    "STRAIGHT_JOIN",
    "SUBSTRING",
    "SUM",
    "SYSTEM",
    "TABLE",
    "TABLES",
    "TEMPORARY",
    "TERMINATED",
    "THEN",
    "TIME",
    "TIMESTAMP",
    "TINYBLOB",
    "TINYINT",
    "TINYTEXT",
    "TO",
    "TRAILING",
    "TRANSACTION",
    "TRIGGER",
    "TRIM",
    "TRUE",
    "TRUNCATE",
    "UNCOMMITTED",
    "UNDO",
    "UNION",
    "UNIQUE",
    "UNKNOWN",
    "UNLOCK",
    "UNSIGNED",
    "UPDATE",
    "UPPER",
    "USAGE",
    "USE",
    "USING",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
    "VALUE",
    "VALUES",
    "VARBINARY",
    "VARCHAR",
    "VARCHARACTER",
    "VARIABLES",
    "VARYING",
    "VIEW",
    "VIRTUAL",
    "WAIT",
    "WARNINGS",
    "WEEK",
    "WHEN",
    "WHERE",
    "WHILE",
    "WINDOW",
    "WITH",
    "WORK",
    "WRITE",
    "XA",
    "XOR",
    "YEAR",
    "YEAR_MONTH",
    "ZEROFILL",
];

pub(super) fn is_keyword(up: &[u8]) -> bool {
    !up.is_empty() && KeywordTable::get().contains(up)
}

/// [`KEYWORDS`] in an open-addressed table built once: every word of every statement is
/// looked up (digests run per statement), where a binary search of a few hundred
/// strings cost more than the rest of the lexer. A `phf` set was measured three to four
/// times slower per lookup (SipHash costs more than FNV-1a over short words), so the
/// table stays hand-written.
struct KeywordTable {
    slots: Box<[Option<&'static [u8]>]>,
    mask: usize,
}

impl KeywordTable {
    fn get() -> &'static KeywordTable {
        static TABLE: std::sync::OnceLock<KeywordTable> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| {
            let size = (KEYWORDS.len() * 4).next_power_of_two();
            let mut t = KeywordTable {
                slots: vec![None; size].into_boxed_slice(),
                mask: size - 1,
            };
            for k in KEYWORDS {
                let mut i = fnv1a(k.as_bytes()) as usize & t.mask;
                while t.slots[i].is_some() {
                    i = (i + 1) & t.mask;
                }
                t.slots[i] = Some(k.as_bytes());
            }
            t
        })
    }

    fn contains(&self, word: &[u8]) -> bool {
        let mut i = fnv1a(word) as usize & self.mask;
        while let Some(k) = self.slots[i] {
            if k == word {
                return true;
            }
            i = (i + 1) & self.mask;
        }
        false
    }
}

/// Functions whose result depends on the clock, randomness, the session or server state. The
/// `bare` ones also work without parentheses; the others need `call` (a `(` follows).
pub(super) fn volatile(up: &[u8], call: bool) -> Option<&'static str> {
    macro_rules! reasons {
        (bare: $($bare:literal)*; call: $($called:literal)*) => {
            match std::str::from_utf8(up).unwrap_or_default() {
                $($bare => Some(concat!("non-deterministic function ", $bare, "()")),)*
                $($called if call => Some(concat!("non-deterministic function ", $called, "()")),)*
                _ => None,
            }
        };
    }
    reasons!(
        bare: "CURRENT_DATE" "CURRENT_ROLE" "CURRENT_TIME" "CURRENT_TIMESTAMP" "CURRENT_USER"
            "LOCALTIME" "LOCALTIMESTAMP" "UTC_DATE" "UTC_TIME" "UTC_TIMESTAMP";
        call: "BENCHMARK" "CONNECTION_ID" "CURDATE" "CURTIME" "DATABASE" "FOUND_ROWS" "GET_LOCK"
            "IS_FREE_LOCK" "IS_USED_LOCK" "LASTVAL" "LAST_INSERT_ID" "LOAD_FILE"
            "MASTER_GTID_WAIT" "MASTER_POS_WAIT" "NEXTVAL" "NOW" "RAND" "RANDOM_BYTES"
            "RELEASE_ALL_LOCKS" "RELEASE_LOCK" "ROW_COUNT" "SCHEMA" "SESSION_USER" "SETVAL"
            "SLEEP" "SOURCE_POS_WAIT" "SYSDATE" "SYSTEM_USER" "SYS_GUID" "UNIX_TIMESTAMP" "USER"
            "UUID" "UUID_SHORT" "WAIT_FOR_EXECUTED_GTID_SET"
    )
}

/// Schemas whose content is server or session state rather than data written by statements.
pub(super) fn is_system_schema(schema: &str) -> bool {
    matches!(
        schema,
        "information_schema" | "performance_schema" | "mysql" | "sys"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_table_holds_exactly_the_keywords() {
        for k in KEYWORDS {
            assert!(is_keyword(k.as_bytes()), "{k}");
        }
        for w in ["", "SELEC", "SELECTS", "sbtest1", "select", "ID", "C"] {
            assert_eq!(is_keyword(w.as_bytes()), KEYWORDS.contains(&w), "{w}");
        }
    }

    #[test]
    fn keywords_are_sorted_and_unique() {
        assert!(KEYWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(KEYWORDS.iter().all(|k| k.len() <= 32));
        assert!(is_keyword(b"SELECT") && is_keyword(b"ZEROFILL") && !is_keyword(b"SBTEST1"));
    }
}
