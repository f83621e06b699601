//! The normalized digest: statement text with literal values, spacing, comments and keyword
//! case folded, and its FNV-1a hash, which per-statement statistics and digest rules group
//! statements by. Apart from the analysis because it asks another question of the same
//! tokens (which statements are alike, not what one does) and runs on statements the cache
//! never analyzes. [`fnv1a`] lives here as the digest's hash; the keyword table hashes with
//! it too, and other modules reuse it for ids that must not change between runs.

use super::keywords::is_keyword;
use super::lexer::{code_token, Kind, Lexer, Upper};

/// Normalized text for grouping statements that differ only in literal values, spacing, comments
/// and keyword case, with its FNV-1a 64 hash (stable across runs and platforms). Whitespace runs
/// and comments become one space; no space is added where the text had none.
pub fn digest(sql: &[u8]) -> (String, u64) {
    let mut out = Vec::with_capacity(sql.len().min(4096));
    normalize(sql, &mut out);
    while matches!(out.last(), Some(b' ' | b';')) {
        out.pop();
    }
    let text = String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let hash = fnv1a(text.as_bytes());
    (text, hash)
}

/// The hash of [`digest`] without building its text: what per-statement statistics key by.
pub fn digest_hash(sql: &[u8]) -> u64 {
    let mut h = HashSink {
        hash: FNV_OFFSET,
        any: false,
        pending: 0,
        tail: [0; 16],
    };
    normalize(sql, &mut h);
    h.hash
}

/// Where [`normalize`] writes: a buffer, or a running hash.
trait Sink {
    fn push(&mut self, b: u8);
    fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }
    fn is_empty(&self) -> bool;
}

impl Sink for Vec<u8> {
    fn push(&mut self, b: u8) {
        Vec::push(self, b);
    }
    fn extend(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

/// FNV-1a over the normalized bytes. Trailing spaces and `;` are dropped from the text, so
/// they are held back until something else follows (a run longer than the buffer is hashed
/// as it comes: only pathological text differs from [`digest`]).
struct HashSink {
    hash: u64,
    any: bool,
    pending: usize,
    tail: [u8; 16],
}

impl Sink for HashSink {
    fn push(&mut self, b: u8) {
        self.any = true;
        if matches!(b, b' ' | b';') && self.pending < self.tail.len() {
            self.tail[self.pending] = b;
            self.pending += 1;
            return;
        }
        for i in 0..std::mem::take(&mut self.pending) {
            self.hash = fnv1a_step(self.hash, self.tail[i]);
        }
        self.hash = fnv1a_step(self.hash, b);
    }
    fn is_empty(&self) -> bool {
        !self.any
    }
}

fn normalize(sql: &[u8], out: &mut impl Sink) {
    let mut lex = Lexer::new(sql);
    let mut depth = 0usize;
    // Paren depth of a `VALUES` whose first row ends the next time this depth is reached.
    let mut rows_at: Option<usize> = None;
    while let Some(t) = code_token(&mut lex) {
        if t.space && !out.is_empty() {
            out.push(b' ');
        }
        match t.kind {
            Kind::Str(_) | Kind::Number | Kind::Param => out.push(b'?'),
            Kind::Word => {
                let up = Upper::of(Some(t), sql);
                if is_keyword(up.get()) {
                    out.extend(up.get());
                } else {
                    out.extend(&sql[t.start..t.end]);
                }
                match up.get() {
                    b"IN" => {
                        if let Some((after, space)) = literal_list(&lex) {
                            if space {
                                out.push(b' ');
                            }
                            out.extend(b"(...)");
                            lex = after;
                        }
                    }
                    b"VALUES" | b"VALUE" => rows_at = Some(depth),
                    _ => {}
                }
            }
            Kind::Punct(b'(') => {
                depth += 1;
                out.push(b'(');
            }
            Kind::Punct(b')') => {
                depth = depth.saturating_sub(1);
                out.push(b')');
                if rows_at == Some(depth) {
                    rows_at = None;
                    while let Some(after) = next_row(&lex) {
                        lex = after;
                    }
                }
            }
            _ => out.extend(&sql[t.start..t.end]),
        }
    }
}

/// After `IN`: a parenthesised list of literals only, returned as the lexer past its `)` and
/// whether the `(` had space before it.
fn literal_list<'a>(lex: &Lexer<'a>) -> Option<(Lexer<'a>, bool)> {
    let mut l = lex.clone();
    let open = code_token(&mut l)?;
    if open.kind != Kind::Punct(b'(') {
        return None;
    }
    loop {
        let mut t = code_token(&mut l)?;
        while matches!(t.kind, Kind::Punct(b'-' | b'+')) {
            t = code_token(&mut l)?;
        }
        let literal = match t.kind {
            Kind::Str(_) | Kind::Number | Kind::Param => true,
            Kind::Word => matches!(Upper::of(Some(t), l.s).get(), b"NULL" | b"TRUE" | b"FALSE"),
            _ => false,
        };
        if !literal {
            return None;
        }
        match code_token(&mut l)?.kind {
            Kind::Punct(b',') => {}
            Kind::Punct(b')') => return Some((l, open.space)),
            _ => return None,
        }
    }
}

/// After a `VALUES` row: a further `, [ROW] (...)` row, returned as the lexer past it.
fn next_row<'a>(lex: &Lexer<'a>) -> Option<Lexer<'a>> {
    let mut l = lex.clone();
    if code_token(&mut l)?.kind != Kind::Punct(b',') {
        return None;
    }
    let mut t = code_token(&mut l)?;
    if Upper::of(Some(t), l.s).get() == b"ROW" {
        t = code_token(&mut l)?;
    }
    if t.kind != Kind::Punct(b'(') {
        return None;
    }
    let mut depth = 1;
    while depth > 0 {
        match code_token(&mut l).map(|t| t.kind) {
            None => break,
            Some(Kind::Punct(b'(')) => depth += 1,
            Some(Kind::Punct(b')')) => depth -= 1,
            Some(_) => {}
        }
    }
    Some(l)
}

pub(super) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

pub(super) fn fnv1a_step(h: u64, b: u8) -> u64 {
    (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
}

/// FNV-1a 64: the digest ids, stable across runs and platforms.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| fnv1a_step(h, b))
}

#[cfg(test)]
mod tests {
    use super::super::shape::{digest_shape, literal_template};
    use super::*;

    #[test]
    fn digest_normalizes() {
        let a = digest(b"SELECT c FROM sbtest1 WHERE id=4995");
        let b = digest(b"SELECT c FROM sbtest1 WHERE id=17");
        assert_eq!(a.0, "SELECT c FROM sbtest1 WHERE id=?");
        assert_eq!(a, b);
        // Pinned: the hash must not change between builds, runs or platforms.
        assert_eq!(a.1, 0xbe86_e8d6_561e_af20);
        assert_eq!(
            digest(b"select  c\n\tfrom sbtest1 /* x */ where id = 5 ;").0,
            "SELECT c FROM sbtest1 WHERE id = ?"
        );
        let x = digest(b"SELECT * FROM t WHERE id IN (1, 2, 3) AND b NOT IN ('a')");
        let y = digest(b"SELECT * FROM t WHERE id IN (4) AND b NOT IN ('b', 'c', NULL, -1, ?)");
        assert_eq!(x.0, "SELECT * FROM t WHERE id IN (...) AND b NOT IN (...)");
        assert_eq!(x, y);
        assert_eq!(digest(b"a IN(1,2)").0, "a IN(...)");
        assert_eq!(
            digest(b"SELECT * FROM t WHERE id IN (SELECT id FROM u WHERE x = 5) OR id IN (a, 2)").0,
            "SELECT * FROM t WHERE id IN (SELECT id FROM u WHERE x = ?) OR id IN (a, ?)"
        );
        let r1 = digest(b"INSERT INTO t (a, b) VALUES (1, 'x')");
        let r3 = digest(b"INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'),(3,'z')");
        assert_eq!(r1.0, "INSERT INTO t (a, b) VALUES (?, ?)");
        assert_eq!(r1, r3);
        assert_eq!(
            digest(
                b"INSERT INTO t VALUES (1, (2)), (3, (4)) \
                  ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b)"
            )
            .0,
            "INSERT INTO t VALUES (?, (?)) ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b)"
        );
        assert_eq!(digest(b"VALUES ROW(1, 2), ROW(3, 4)").0, "VALUES ROW(?, ?)");
        assert_eq!(
            digest(b"SELECT NULL, true, False, MyCol, `MyTable`.`X` FROM `MyTable` # c").0,
            "SELECT NULL, TRUE, FALSE, MyCol, `MyTable`.`X` FROM `MyTable`"
        );
        assert_eq!(
            digest(b"select 'it''s', \"q\\\"x\", -3, @v, @@sql_mode").0,
            "SELECT ?, ?, -?, @v, @@sql_mode"
        );
        assert_eq!(
            digest(b"SELECT /*!40001 SQL_NO_CACHE */ c FROM t").0,
            "SELECT SQL_NO_CACHE c FROM t"
        );
        assert_eq!(digest(b"SELECT /*wipe*/ 1"), digest(b"SELECT 1"));
        assert_eq!(digest(b"SELECT 1; SELECT 2;").0, "SELECT ?; SELECT ?");
        assert_eq!(digest(b"").0, "");
        assert_eq!(
            digest(b"SELECT '\xff' FROM \xfe").0,
            "SELECT ? FROM \u{fffd}"
        );
    }

    #[test]
    fn fnv1a_matches_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        let (text, hash) = digest(b"SELECT 1");
        assert_eq!(hash, fnv1a(text.as_bytes()));
    }

    #[test]
    fn digest_hash_agrees_with_digest() {
        for sql in [
            "SELECT 1",
            "",
            " ; ",
            "select  c from t where id = 5 ;  ",
            "INSERT INTO t VALUES (1,'a'),(2,'b');",
            "SELECT * FROM t WHERE a IN (1, 2, 3) AND b = ? -- x",
            "SELECT ';' ; ;",
            "/* c */ UPDATE t SET a=a+1 WHERE id IN (4)",
        ] {
            assert_eq!(
                digest_hash(sql.as_bytes()),
                digest(sql.as_bytes()).1,
                "{sql:?}"
            );
        }
    }

    #[test]
    fn statements_of_one_shape_have_one_digest() {
        // Templates with number slots (#) and string slots ($) filled at random, and the
        // ways the lexer may read digits and quotes otherwise: names, decimals, exponents,
        // hex, variables, signs, prefixed strings, strings in names and after them.
        let templates = [
            "SELECT c FROM t WHERE a = '$' AND b = #",
            "SELECT * FROM t WHERE a IN ('$', '$') AND b LIKE '$%'",
            "INSERT INTO t (a, b) VALUES ('$', #), ('$$', #)",
            "SELECT x'$', N'$', _utf8mb4'$' COLLATE utf8mb4_bin, '$''$' FROM t#",
            "SELECT '$'#, #'$', '$' '$', @@x'$', t# '$' FROM t",
            "UPDATE t SET a = '$' WHERE id = #",
            "SELECT '$' FROM t WHERE b = '$;$' ; SELECT #",
            "SELECT c FROM sbtest# WHERE id=#",
            "SELECT c FROM sbtest1 WHERE id = # ORDER BY c LIMIT #",
            "select * from t where a in (#, #, #) and b between # and #",
            "INSERT INTO t VALUES (#,#),(#,#)",
            "SELECT #.# FROM t",
            "SELECT t#.c#, #e# , 0x#F, 0b#, @#, @@x#, -#, +# FROM t#",
            "SELECT #abc, a#b, `x`.#, x.#, #.x FROM t",
            "UPDATE t SET a=a+# WHERE id IN (#)",
            "SELECT ? , :#, $#, #$ FROM t;",
            "  SELECT\t#\n FROM t ;  ",
        ];
        let mut seed = 7u64;
        let mut digit = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % 10) as u8
        };
        // What strings hold: escapes, doubled quotes, and what would be code outside one.
        const PIECES: [&str; 14] = [
            "a", "Zz", "\\'", "''", "\\\\", ";", "-- ", "/*", "#", "é", "\"", "`", "@", "?",
        ];
        let mut written_by_shape = std::collections::HashMap::new();
        let mut by_shape: std::collections::HashMap<u64, (u64, super::super::Analysis, String)> =
            Default::default();
        let mut shaped = 0;
        for template in templates {
            for _ in 0..200 {
                let mut sql = String::new();
                for ch in template.chars() {
                    if ch == '#' {
                        for _ in 0..=digit() % 3 {
                            sql.push((b'0' + digit()) as char);
                        }
                    } else if ch == '$' {
                        for _ in 0..digit() % 4 {
                            sql.push_str(PIECES[(digit() as usize * 7 + digit() as usize) % 14]);
                        }
                    } else {
                        sql.push(ch);
                    }
                }
                let written = literal_template(sql.as_bytes());
                let Some((shape, exact)) = digest_shape(sql.as_bytes()) else {
                    assert_eq!(written, None, "{sql:?}");
                    continue;
                };
                shaped += 1;
                assert_eq!(exact, fnv1a(sql.as_bytes()));
                // One shape, one template: what a template tells holds for its shape.
                if let Some(written) = written {
                    let first = written_by_shape.entry(shape).or_insert(written.key.clone());
                    assert_eq!(*first, written.key, "{sql:?}");
                }
                let digest = digest_hash(sql.as_bytes());
                let analysis = super::super::analyze(sql.as_bytes(), None);
                let (first, analysed, example) =
                    by_shape
                        .entry(shape)
                        .or_insert((digest, analysis.clone(), sql.clone()));
                assert_eq!(
                    *first, digest,
                    "{example:?} and {sql:?} share a shape, not a digest"
                );
                // What lets a session keep a text's analysis by its shape.
                assert_eq!(
                    *analysed, analysis,
                    "{example:?} and {sql:?} share a shape, not an analysis"
                );
            }
        }
        assert!(shaped > 2900, "{shaped}");
        // Point selects of one table share one shape whatever the id.
        let shape = |s: &str| digest_shape(s.as_bytes()).map(|(s, _)| s);
        assert_eq!(
            shape("SELECT c FROM t WHERE id=1"),
            shape("SELECT c FROM t WHERE id=98765")
        );
        assert_ne!(
            shape("SELECT c FROM t1 WHERE id=1"),
            shape("SELECT c FROM t2 WHERE id=1")
        );
        // So do reads of one table whatever the strings they compare with.
        assert_eq!(
            shape("SELECT c FROM t WHERE name = 'ann' AND id = 1"),
            shape("SELECT c FROM t WHERE name = 'O''Brien \\'é\\'' AND id = 2")
        );
        assert_ne!(shape("SELECT 'a'"), shape("SELECT 'a', 'b'"));
        for other in [
            "SELECT 1 -- x",
            "SELECT /* x */ 1",
            "SELECT `a`",
            "SELECT \"a\"",
            "SELECT é",
            "SELECT @'a'",
            "SELECT t.'a'",
            "SELECT 'unterminated",
            "SELECT 'escaped at the end\\'",
        ] {
            assert_eq!(shape(other), None, "{other}");
        }
    }
}
