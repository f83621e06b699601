//! A text's shape: the text with its number literals and single-quoted strings set apart
//! and its spacing folded, read in one pass without the lexer. Two texts of one shape
//! differ only in those literals' values, so what was worked out for one (its digest,
//! its analysis, which key values decide its rows) holds for the other with its own
//! literals. [`digest_shape`] hashes the shape; [`literal_template`] writes it out with
//! the literals as `?`, beside where each literal is in the text.

use super::digest::{fnv1a_step, FNV_OFFSET};
use super::lexer::closed_end;

/// What the walk over a text tells its sink, in order.
trait ShapeSink {
    /// A byte kept as written (a space stands for a whole run of spacing).
    fn kept(&mut self, b: u8);
    /// A number literal: the digit run at `sql[start..end]`.
    fn number(&mut self, sql: &[u8], start: usize, end: usize);
    /// A single-quoted string, quotes included, at `sql[start..end]`.
    fn string(&mut self, sql: &[u8], start: usize, end: usize);
    /// A byte of the exact text outside the literals (every byte, spacing too).
    fn exact(&mut self, b: u8);
    /// False when the sink can't stand for a text holding `b` outside strings.
    fn accepts(&self, _b: u8) -> bool {
        true
    }
}

/// Walks `sql` into `sink`; `None` for anything the shape can't vouch for (double
/// quotes, backticks, comments, backslashes and control or non-ASCII bytes outside
/// strings, a string right after `@` or `.`, an unterminated one).
///
/// A digit run counts as a number only where the lexer surely reads one: not inside or
/// right after a name or a string, not next to a `.` (decimals, qualified names) or
/// after `@`, not right before a quote. A string is one where the lexer reads one, ended
/// by the lexer's own rule (doubled quotes, backslash escapes). Every other byte is
/// kept, so the shape is never coarser than the digest.
#[inline(always)]
fn walk(sql: &[u8], sink: &mut impl ShapeSink) -> Option<()> {
    // What each byte is to the shape: one table lookup per byte.
    const PLAIN: u8 = 0;
    const SPACE: u8 = 1;
    const DIGIT: u8 = 2;
    const NAME: u8 = 3;
    const REFUSE: u8 = 4;
    const MAYBE_COMMENT: u8 = 5;
    const QUOTE: u8 = 6;
    const CLASS: [u8; 256] = {
        let mut c = [REFUSE; 256];
        let mut b = 0x20;
        while b < 0x7f {
            c[b] = PLAIN;
            b += 1;
        }
        let mut b = 0;
        while b < 256 {
            let u = b as u8;
            if u.is_ascii_alphabetic() || u == b'_' || u == b'$' {
                c[b] = NAME;
            } else if u.is_ascii_digit() {
                c[b] = DIGIT;
            }
            b += 1;
        }
        c[b' ' as usize] = SPACE;
        c[b'\t' as usize] = SPACE;
        c[b'\n' as usize] = SPACE;
        c[b'\r' as usize] = SPACE;
        c[0x0b] = SPACE;
        c[0x0c] = SPACE;
        c[b'\'' as usize] = QUOTE;
        c[b'"' as usize] = REFUSE;
        c[b'`' as usize] = REFUSE;
        c[b'\\' as usize] = REFUSE;
        c[b'#' as usize] = REFUSE;
        c[b'/' as usize] = MAYBE_COMMENT;
        c[b'-' as usize] = MAYBE_COMMENT;
        c
    };
    // The class of the byte before, and whether it was `.` or `@`.
    let mut prev = SPACE;
    let mut prev_joins = false;
    let mut i = 0;
    while i < sql.len() {
        let b = sql[i];
        let class = CLASS[b as usize];
        match class {
            REFUSE => return None,
            MAYBE_COMMENT if sql.get(i + 1) == Some(&(if b == b'/' { b'*' } else { b'-' })) => {
                return None
            }
            DIGIT if prev != NAME && prev != DIGIT && !prev_joins => {
                let mut j = i;
                while j < sql.len() && CLASS[sql[j] as usize] == DIGIT {
                    sink.exact(sql[j]);
                    j += 1;
                }
                let after = sql.get(j).copied().unwrap_or(b' ');
                if matches!(CLASS[after as usize], NAME | REFUSE | QUOTE) || after == b'.' {
                    for &d in &sql[i..j] {
                        sink.kept(d);
                    }
                } else {
                    sink.number(sql, i, j);
                }
                prev = DIGIT;
                prev_joins = false;
                i = j;
                continue;
            }
            // Its content folds to one marker, as the digest folds it to `?`. After `@`
            // it names a variable; after `.`, nothing the shape vouches for.
            QUOTE => {
                if prev_joins {
                    return None;
                }
                let end = closed_end(sql, i, b'\'', true)?;
                sink.string(sql, i, end);
                // Digits right after it are kept as written.
                prev = NAME;
                i = end;
                continue;
            }
            SPACE => {
                if prev != SPACE {
                    sink.kept(b' ');
                }
            }
            _ if !sink.accepts(b) => return None,
            _ => sink.kept(b),
        }
        sink.exact(b);
        prev = class;
        prev_joins = b == b'.' || b == b'@';
        i += 1;
    }
    Some(())
}

/// A cheap stand-in for the digest's hash on plain statements: a hash of the text with
/// each number literal and each single-quoted string replaced by a marker and
/// whitespace runs folded, and the FNV-1a hash of the exact text. Two statements with
/// the same shape have the same digest (and the same tokens but for their literals'
/// values), so a session remembers shape → digest and lexes each shape once. `None`
/// where [`walk`] refuses: those take the digest's own hash.
pub fn digest_shape(sql: &[u8]) -> Option<(u64, u64)> {
    struct Hashes {
        shape: u64,
        exact: u64,
    }
    impl ShapeSink for Hashes {
        #[inline(always)]
        fn kept(&mut self, b: u8) {
            self.shape = fnv1a_step(self.shape, b);
        }
        #[inline(always)]
        fn number(&mut self, _: &[u8], _: usize, _: usize) {
            self.shape = fnv1a_step(self.shape, 0x01);
        }
        #[inline(always)]
        fn string(&mut self, sql: &[u8], start: usize, end: usize) {
            for &c in &sql[start..end] {
                self.exact = fnv1a_step(self.exact, c);
            }
            self.shape = fnv1a_step(self.shape, 0x02);
        }
        #[inline(always)]
        fn exact(&mut self, b: u8) {
            self.exact = fnv1a_step(self.exact, b);
        }
    }
    let mut h = Hashes {
        shape: FNV_OFFSET,
        exact: FNV_OFFSET,
    };
    walk(sql, &mut h)?;
    Some((h.shape, h.exact))
}

/// Which literal a `?` of a [`Template`] stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Literal {
    /// A digit run.
    Number,
    /// A single-quoted string, quotes included.
    Str,
}

/// A text's shape written out: its spacing folded, each literal `?`, so that texts of
/// one shape have one template, and a template is lexed as a prepared statement's text
/// is. `literals` say where in the text each `?` was, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Template {
    /// The template's text, then one byte per literal (`N` or `S`): texts whose
    /// literals are of other kinds are other templates.
    pub key: Vec<u8>,
    /// The length of the text in `key`.
    pub text_len: usize,
    pub literals: Vec<(Literal, std::ops::Range<usize>)>,
}

impl Template {
    pub fn text(&self) -> &[u8] {
        &self.key[..self.text_len]
    }
}

/// The template of `sql`; `None` where [`digest_shape`] is, and for a text with a `?` of
/// its own outside strings (its template's `?`s would not all be its literals).
pub fn literal_template(sql: &[u8]) -> Option<Template> {
    struct Writer {
        text: Vec<u8>,
        literals: Vec<(Literal, std::ops::Range<usize>)>,
    }
    impl ShapeSink for Writer {
        #[inline(always)]
        fn kept(&mut self, b: u8) {
            self.text.push(b);
        }
        #[inline(always)]
        fn number(&mut self, _: &[u8], start: usize, end: usize) {
            self.text.push(b'?');
            self.literals.push((Literal::Number, start..end));
        }
        #[inline(always)]
        fn string(&mut self, _: &[u8], start: usize, end: usize) {
            self.text.push(b'?');
            self.literals.push((Literal::Str, start..end));
        }
        #[inline(always)]
        fn exact(&mut self, _: u8) {}
        #[inline(always)]
        fn accepts(&self, b: u8) -> bool {
            b != b'?'
        }
    }
    // Room for the kinds after the text, and for the literals of most statements.
    let mut w = Writer {
        text: Vec::with_capacity(sql.len() + 16),
        literals: Vec::with_capacity(8),
    };
    walk(sql, &mut w)?;
    let text_len = w.text.len();
    let mut key = w.text;
    key.extend(w.literals.iter().map(|(kind, _)| match kind {
        Literal::Number => b'N',
        Literal::Str => b'S',
    }));
    Some(Template {
        key,
        text_len,
        literals: w.literals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_the_shape_written_out() {
        let t = literal_template(b"SELECT c FROM t  WHERE id=42 AND name = 'O''Brien'").unwrap();
        assert_eq!(t.text(), b"SELECT c FROM t WHERE id=? AND name = ?");
        assert_eq!(&t.key[t.text_len..], b"NS");
        let sql = b"SELECT c FROM t  WHERE id=42 AND name = 'O''Brien'";
        let spans: Vec<&[u8]> = t.literals.iter().map(|(_, r)| &sql[r.clone()]).collect();
        assert_eq!(spans, [&b"42"[..], b"'O''Brien'"]);
        // Texts of one shape have one template; kinds of literal tell templates apart.
        let other = literal_template(b"SELECT c FROM t WHERE id=7 AND name = 'x'").unwrap();
        assert_eq!(other.key, t.key);
        let swapped = literal_template(b"SELECT c FROM t WHERE id='7' AND name = 'x'").unwrap();
        assert_ne!(swapped.key, t.key);
        // Digits the lexer may read otherwise are kept as written.
        let kept = literal_template(b"SELECT 1.5, x1, 2e3, t.5 FROM t").unwrap();
        assert_eq!(kept.text(), b"SELECT 1.5, x1, 2e3, t.5 FROM t");
        assert!(kept.literals.is_empty());
        for refused in [
            &b"SELECT ? FROM t"[..],
            b"SELECT 1 -- x",
            b"SELECT `a` FROM t",
            b"SELECT 'unterminated",
        ] {
            assert_eq!(literal_template(refused), None);
        }
        // A `?` inside a string is part of the literal.
        assert!(literal_template(b"SELECT 'what?'").is_some());
    }
}
