//! The one SQL lexer behind everything that reads statement text: the cache's analysis and
//! digests here, and the KILL, identity, effects, key and shard scans elsewhere in the crate.
//! It stands alone so they all split text the same way (comments, executable comments,
//! quotes, names that start with digits) and none of them grows a lexer of its own.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Unquoted identifier or keyword.
    Word,
    /// `` `identifier` ``.
    Quoted,
    /// A string by its quote byte; also `x'..'`, `b'..'`, `N'..'` (as `'`).
    Str(u8),
    /// Decimal, `0x..` or `0b..` literal.
    Number,
    /// `?` placeholder.
    Param,
    /// `@name`.
    UserVar,
    /// `@@name`.
    SysVar,
    /// Any other single byte.
    Punct(u8),
    /// `/* */`, not executable.
    Block { closed: bool },
    /// `-- ` or `#` to the end of the line.
    Line,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Tok {
    pub(crate) kind: Kind,
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// Whitespace or a comment came right before it.
    pub(super) space: bool,
}

#[derive(Clone)]
pub(crate) struct Lexer<'a> {
    pub(super) s: &'a [u8],
    pos: usize,
    /// Inside `/*! ... */`, whose content is code and whose `*/` is skipped.
    in_exec: bool,
    /// End of the last identifier, so `db.1t` lexes `.` as a separator, not as `.1`.
    ident_end: usize,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(s: &'a [u8]) -> Self {
        Lexer {
            s,
            pos: 0,
            in_exec: false,
            ident_end: usize::MAX,
        }
    }

    /// The byte at `i`, 0 past the end (0 never continues any token).
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    /// Past whitespace and the opening and closing marks of executable comments, which
    /// separate tokens as whitespace does: whether there were any, `None` at the end.
    fn skip_space(&mut self) -> Option<bool> {
        let s = self.s;
        let mut space = false;
        loop {
            while self.pos < s.len() && is_space(s[self.pos]) {
                self.pos += 1;
                space = true;
            }
            let rest = s.get(self.pos..).filter(|r| !r.is_empty())?;
            if self.in_exec && rest.starts_with(b"*/") {
                self.pos += 2;
                self.in_exec = false;
                space = true;
            } else if !self.in_exec && (rest.starts_with(b"/*!") || rest.starts_with(b"/*M!")) {
                self.pos += if rest[2] == b'!' { 3 } else { 4 };
                // The optional server version: code for us whatever the version.
                let mut n = 0;
                while n < 6 && self.at(self.pos).is_ascii_digit() {
                    self.pos += 1;
                    n += 1;
                }
                self.in_exec = true;
                space = true;
            } else {
                return Some(space);
            }
        }
    }

    /// The next token, comments included.
    pub(super) fn next_raw(&mut self) -> Option<Tok> {
        let space = self.skip_space()?;
        let s = self.s;
        let start = self.pos;
        let b = s[start];
        let nb = self.at(start + 1);
        let kind = match b {
            b'/' if nb == b'*' => match find(s, start + 2, b"*/") {
                Some(i) => {
                    self.pos = i + 2;
                    Kind::Block { closed: true }
                }
                None => {
                    self.pos = s.len();
                    Kind::Block { closed: false }
                }
            },
            // `--` starts a comment only when followed by whitespace or a control byte.
            b'#' => self.line_comment(),
            b'-' if nb == b'-' && self.at(start + 2) <= b' ' => self.line_comment(),
            b'\'' | b'"' => {
                self.pos = quoted_end(s, start, b, true);
                Kind::Str(b)
            }
            b'`' => {
                self.pos = quoted_end(s, start, b'`', false);
                Kind::Quoted
            }
            b'x' | b'X' | b'b' | b'B' | b'n' | b'N' if nb == b'\'' => {
                self.pos = quoted_end(s, start + 1, b'\'', true);
                Kind::Str(b'\'')
            }
            b'0'..=b'9' => self.number_or_word(start),
            b'.' if nb.is_ascii_digit() && self.ident_end != start => {
                self.pos = self.fraction(start);
                Kind::Number
            }
            b'@' => {
                let mut i = start + 1;
                let kind = if nb == b'@' {
                    i += 1;
                    Kind::SysVar
                } else {
                    Kind::UserVar
                };
                match self.at(i) {
                    q @ (b'\'' | b'"' | b'`') => i = quoted_end(s, i, q, q != b'`'),
                    _ => {
                        while is_ident(self.at(i)) || self.at(i) == b'.' {
                            i += 1;
                        }
                    }
                }
                self.pos = i;
                kind
            }
            b'?' => {
                self.pos = start + 1;
                Kind::Param
            }
            _ if is_ident(b) => {
                self.pos = self.ident_run(start);
                Kind::Word
            }
            _ => {
                self.pos = start + 1;
                Kind::Punct(b)
            }
        };
        if matches!(kind, Kind::Word | Kind::Quoted) {
            self.ident_end = self.pos;
        }
        Some(Tok {
            kind,
            start,
            end: self.pos,
            space,
        })
    }

    fn line_comment(&mut self) -> Kind {
        self.pos = find(self.s, self.pos, b"\n").unwrap_or(self.s.len());
        Kind::Line
    }

    fn ident_run(&self, i: usize) -> usize {
        let rest = self.s.get(i..).unwrap_or_default();
        i + rest
            .iter()
            .position(|&b| !is_ident(b))
            .unwrap_or(rest.len())
    }

    /// From a `.` followed by digits: the fraction and an optional exponent.
    fn fraction(&self, dot: usize) -> usize {
        let mut i = dot + 1;
        while self.at(i).is_ascii_digit() {
            i += 1;
        }
        self.exponent(i)
    }

    fn exponent(&self, i: usize) -> usize {
        if !matches!(self.at(i), b'e' | b'E') {
            return i;
        }
        let mut j = i + 1;
        if matches!(self.at(j), b'+' | b'-') {
            j += 1;
        }
        if !self.at(j).is_ascii_digit() {
            return i;
        }
        while self.at(j).is_ascii_digit() {
            j += 1;
        }
        j
    }

    /// MySQL identifiers may start with digits (`1abc`), so a digit run is a number only when
    /// no identifier byte follows it.
    fn number_or_word(&mut self, start: usize) -> Kind {
        let radix = match (self.at(start), self.at(start + 1)) {
            (b'0', b'x' | b'X') => Some(16),
            (b'0', b'b' | b'B') => Some(2),
            _ => None,
        };
        if let Some(radix) = radix {
            let mut i = start + 2;
            while (self.at(i) as char).is_digit(radix) {
                i += 1;
            }
            if i > start + 2 && !is_ident(self.at(i)) {
                self.pos = i;
                return Kind::Number;
            }
        }
        let mut i = start;
        while self.at(i).is_ascii_digit() {
            i += 1;
        }
        let end = if self.at(i) == b'.' {
            self.fraction(i)
        } else {
            self.exponent(i)
        };
        if end > i || !is_ident(self.at(i)) {
            self.pos = end;
            Kind::Number
        } else {
            self.pos = self.ident_run(i);
            Kind::Word
        }
    }
}

pub(super) fn is_space(b: u8) -> bool {
    CLASS[b as usize] == SPACE
}

/// Identifier bytes; any non-ASCII byte counts so UTF-8 names stay whole.
fn is_ident(b: u8) -> bool {
    CLASS[b as usize] == IDENT
}

const OTHER: u8 = 0;
const SPACE: u8 = 1;
const IDENT: u8 = 2;

/// What each byte is to the lexer, by one lookup: the tests of each class, made per byte
/// of every name, were a third of the lexer's time.
const CLASS: [u8; 256] = {
    let mut c = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        let u = b as u8;
        if u.is_ascii_alphanumeric() || u == b'_' || u == b'$' || u >= 0x80 {
            c[b] = IDENT;
        } else if matches!(u, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            c[b] = SPACE;
        }
        b += 1;
    }
    c
};

fn find(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    s.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// End of a quoted token opening at `open`: doubled quotes, and backslash escapes in strings.
/// Unterminated quotes run to the end of the text.
fn quoted_end(s: &[u8], open: usize, q: u8, escapes: bool) -> usize {
    closed_end(s, open, q, escapes).unwrap_or(s.len())
}

/// [`quoted_end`] of a quote that closes: `None` when it runs to the end of the text
/// unterminated. One scan for both, so that what the digest's shape folds as one string
/// is the lexer's string.
pub(super) fn closed_end(s: &[u8], open: usize, q: u8, escapes: bool) -> Option<usize> {
    let mut i = open + 1;
    while let Some(&c) = s.get(i) {
        if escapes && c == b'\\' {
            i += 2;
        } else if c == q {
            if s.get(i + 1) == Some(&q) {
                i += 2;
            } else {
                return Some(i + 1);
            }
        } else {
            i += 1;
        }
    }
    None
}

/// Whether `t` is an unquoted word that is one of `words` (any case).
pub(crate) fn is_one_of(sql: &[u8], t: &Tok, words: &[&str]) -> bool {
    t.kind == Kind::Word
        && words
            .iter()
            .any(|w| sql[t.start..t.end].eq_ignore_ascii_case(w.as_bytes()))
}

/// The next token that is not a comment; comments count as whitespace.
pub(crate) fn code_token(lex: &mut Lexer) -> Option<Tok> {
    let mut space = false;
    loop {
        let mut t = lex.next_raw()?;
        if matches!(t.kind, Kind::Block { .. } | Kind::Line) {
            space = true;
        } else {
            t.space |= space;
            return Some(t);
        }
    }
}

/// An ASCII-uppercased copy of a short unquoted word, for keyword matching without allocating.
/// Anything else is empty, which matches no keyword.
pub(super) struct Upper {
    buf: [u8; 32],
    len: usize,
}

impl Upper {
    pub(super) fn of(t: Option<Tok>, s: &[u8]) -> Self {
        let mut up = Upper {
            buf: [0; 32],
            len: 0,
        };
        if let Some(t) = t.filter(|t| t.kind == Kind::Word && t.end - t.start <= 32) {
            up.len = t.end - t.start;
            up.buf[..up.len].copy_from_slice(&s[t.start..t.end]);
            up.buf[..up.len].make_ascii_uppercase();
        }
        up
    }

    pub(super) fn get(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Statement-bounded token stream with one token of lookahead.
#[derive(Clone)]
pub(super) struct Toks<'a> {
    lex: Lexer<'a>,
    ahead: Option<Tok>,
}

impl<'a> Toks<'a> {
    pub(super) fn new(s: &'a [u8]) -> Self {
        Toks {
            lex: Lexer::new(s),
            ahead: None,
        }
    }

    pub(super) fn text(&self) -> &'a [u8] {
        self.lex.s
    }

    /// The next token of the current statement; `None` at its `;` or the end of the text.
    pub(super) fn peek(&mut self) -> Option<Tok> {
        if self.ahead.is_none() {
            self.ahead = code_token(&mut self.lex);
        }
        self.ahead.filter(|t| t.kind != Kind::Punct(b';'))
    }

    pub(super) fn next(&mut self) -> Option<Tok> {
        let t = self.peek();
        if t.is_some() {
            self.ahead = None;
        }
        t
    }

    /// The token `n` places after the next one.
    pub(super) fn peek_after(&self, n: usize) -> Option<Tok> {
        let mut c = self.clone();
        for _ in 0..n {
            c.next()?;
        }
        c.peek()
    }

    pub(super) fn peek_up(&mut self) -> Upper {
        let t = self.peek();
        Upper::of(t, self.text())
    }

    pub(super) fn peek_is(&mut self, b: u8) -> bool {
        self.peek().is_some_and(|t| t.kind == Kind::Punct(b))
    }

    /// Consumes the next token if it is the keyword `kw`.
    pub(super) fn eat(&mut self, kw: &[u8]) -> bool {
        let hit = self.peek_up().get() == kw;
        if hit {
            self.next();
        }
        hit
    }

    /// Skips the rest of the statement and its `;`; false at the end of the text.
    pub(super) fn end_statement(&mut self) -> bool {
        while self.next().is_some() {}
        self.ahead.take().is_some()
    }
}

/// An identifier's name: quotes removed, doubled quotes undone, ASCII lowercased.
pub(crate) fn ident_text(s: &[u8], t: Tok) -> String {
    let raw = &s[t.start..t.end];
    let mut name = Vec::with_capacity(raw.len());
    match t.kind {
        Kind::Quoted | Kind::Str(_) => {
            let q = raw[0];
            let body = &raw[1..];
            let body = body.strip_suffix(&[q]).unwrap_or(body);
            let mut i = 0;
            while let Some(&b) = body.get(i) {
                name.push(b);
                i += if b == q && body.get(i + 1) == Some(&q) {
                    2
                } else {
                    1
                };
            }
        }
        _ => name.extend_from_slice(raw),
    }
    name.make_ascii_lowercase();
    String::from_utf8(name).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use crate::classify::sql::analysis::tests::{cacheable, kind, list, uncacheable, written};
    use crate::classify::sql::{digest, Analysis};

    /// The class table says what the server's lexer does of each byte: names take
    /// ASCII letters, digits, `_`, `$` and every byte of a UTF-8 sequence; whitespace is
    /// the six ASCII spaces; every other byte is neither.
    #[test]
    fn every_byte_has_the_servers_class() {
        use super::{is_ident, is_space, Kind, Lexer};
        for b in 0..=255u8 {
            let name = b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
            let space = matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
            assert_eq!((is_ident(b), is_space(b)), (name, space), "byte {b:#04x}");
        }
        // A name runs to the first byte that is not a name's, wherever it stands.
        let text = "sélect_1$x+ y".as_bytes();
        let t = Lexer::new(text).next_raw().unwrap();
        assert_eq!(
            (t.kind, &text[t.start..t.end]),
            (Kind::Word, "sélect_1$x".as_bytes())
        );
        let t = Lexer::new(b"abc").next_raw().unwrap();
        assert_eq!((t.start, t.end), (0, 3), "a name that ends the text");
    }

    #[test]
    fn lexer_edge_cases() {
        assert_eq!(
            cacheable("SELECT '--', \"/*\", '#', 'a\\'b FROM x', 'c''d FROM y' FROM t"),
            list(&["db.t"])
        );
        assert_eq!(
            cacheable("SELECT 1 -- FROM a\n FROM b # FROM c\n JOIN /* FROM d */ e"),
            list(&["db.b", "db.e"])
        );
        // `--` not followed by whitespace is two minus signs.
        assert_eq!(digest(b"SELECT 1--1 FROM t").0, "SELECT ?--? FROM t");
        assert_eq!(digest(b"SELECT 1 --\tcomment").0, "SELECT ?");
        assert_eq!(
            digest(
                b"SELECT x'4A', X'4a', b'101', 0x1F, 0b11, 1e10, 1.5E-3, .5, 3., N'n', _utf8'u'"
            )
            .0,
            "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, _utf8?"
        );
        assert_eq!(
            digest(b"SELECT 1abc, 0xZZ, a1, t.1x FROM t").0,
            "SELECT 1abc, 0xZZ, a1, t.1x FROM t"
        );
        // Unterminated tokens run to the end without panicking.
        assert_eq!(digest(b"SELECT 'abc").0, "SELECT ?");
        assert_eq!(digest(b"SELECT `abc").0, "SELECT `abc");
        assert_eq!(digest(b"SELECT 1 /* abc").0, "SELECT ?");
        assert_eq!(digest(b"SELECT 'a\\").0, "SELECT ?");
        assert_eq!(
            cacheable("SELECT * FROM `unterminated"),
            list(&["db.unterminated"])
        );
    }

    #[test]
    fn executable_comments_are_code() {
        assert_eq!(
            kind("/*!40101 SET NAMES utf8mb4 */"),
            Analysis::SessionChange
        );
        assert_eq!(
            written("/*!40000 ALTER TABLE t1 DISABLE KEYS */;"),
            Some(list(&["db.t1"]))
        );
        assert_eq!(
            uncacheable("SELECT /*!40001 SQL_NO_CACHE */ * FROM t"),
            "SQL_NO_CACHE"
        );
        assert_eq!(cacheable("/*M!100100 SELECT * FROM t */"), list(&["db.t"]));
        assert_eq!(cacheable("/*!SELECT*/ 1 FROM t"), list(&["db.t"]));
        assert_eq!(
            cacheable("SELECT * FROM a /*!50001 JOIN b ON a.id = b.id */ WHERE 1"),
            list(&["db.a", "db.b"])
        );
        assert_eq!(
            written(
                "/*!50001 CREATE ALGORITHM=UNDEFINED */ \
                 /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ \
                 /*!50001 VIEW `v` AS select 1 AS `1` */"
            ),
            None
        );
        // A `*/` outside an executable comment is just two operators.
        assert_eq!(digest(b"SELECT 2*/**/3").0, "SELECT ?* ?");
    }
}
