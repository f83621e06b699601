//! SQL text analysis for the query cache: what a statement reads or writes, whether its result
//! may be cached, our cache hints and a normalized digest. Runs on every COM_QUERY the cache
//! sees, before it is forwarded, so it is a single hand-written lexer pass with no I/O.
//!
//! Split by the question each part answers, over the one lexer they share: the hints, the
//! digest, the word lists, and what statements do (a whole request, one statement, the
//! table scan). What other modules use is re-exported here: they name `classify::sql::x`
//! whichever file `x` is in.

mod analysis;
mod commenter;
mod digest;
mod hints;
mod keywords;
mod lexer;
mod scan;
mod shape;
mod statements;

pub use analysis::{analyze, Analysis, TableRef};
pub use commenter::{commenter, Commenter};
pub use digest::{digest, digest_hash, fnv1a};
pub use hints::{first_word, hints, strip_hints, Hints};
pub(crate) use lexer::{code_token, ident_text, is_one_of, Kind, Lexer, Tok};
pub use shape::{digest_shape, literal_template, Literal, Template};
pub use statements::use_target;

// Every entry point at once on hostile text, so it sits above the files it spans.
#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::borrow::Cow;

    pub(in crate::classify) const CORPUS: &[&str] = &[
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
