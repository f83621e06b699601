//! Our cache hints, `/*nocache*/` and `/*wipe*/` comments typed into a statement: found, and
//! stripped so a hinted statement shares the cache key of the plain one. Apart from the
//! analysis because hints belong to the text, not to what the statement does: the cache
//! reads them first, on text it may never analyze. [`first_word`] lives here as it reads a
//! statement past them.

use super::lexer::{is_space, Kind, Lexer, Tok};
use std::borrow::Cow;

/// Cache hints a client put in the statement text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    pub nocache: bool,
    pub wipe: bool,
    /// A sqlcommenter comment ([`super::commenter`]): no hint, but left out of the
    /// cache's key like one, since its `traceparent` differs for every request.
    pub commented: bool,
}

/// Hints in block comments anywhere in the text: `/*nocache*/`, `/* wipe */` (case-insensitive).
/// Optimizer hints (`/*+ ... */`) and executable comments (`/*! ... */`) are not ours.
pub fn hints(sql: &[u8]) -> Hints {
    let mut found = Hints::default();
    if !has_block_comment(sql) {
        return found;
    }
    let commenter = super::commenter(sql).map(|c| c.comment);
    let mut lex = Lexer::new(sql);
    while let Some(t) = lex.next_raw() {
        match hint_in(sql, t, commenter.as_ref()) {
            Some(Hint::NoCache) => found.nocache = true,
            Some(Hint::Wipe) => found.wipe = true,
            Some(Hint::Commenter) => found.commented = true,
            None => {}
        }
    }
    found
}

/// The text without our hint comments, so `SELECT /*wipe*/ 1` and `SELECT 1` share a cache key.
/// Whitespace next to a removed hint is dropped as if the hint had never been typed.
pub fn strip_hints(sql: &[u8]) -> Cow<'_, [u8]> {
    if !has_block_comment(sql) {
        return Cow::Borrowed(sql);
    }
    let commenter = super::commenter(sql).map(|c| c.comment);
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut lex = Lexer::new(sql);
    while let Some(t) = lex.next_raw() {
        if hint_in(sql, t, commenter.as_ref()).is_none() {
            continue;
        }
        let out = out.get_or_insert_with(|| Vec::with_capacity(sql.len()));
        out.extend_from_slice(&sql[copied..t.start]);
        if out.last() == Some(&b'-') {
            // `5 --/*wipe*/ 3` is two minus signs to the server; without the comment,
            // `5 -- 3` would end in a comment, another statement. An empty one keeps
            // them apart.
            out.extend_from_slice(b"/**/");
            copied = t.end;
            continue;
        }
        let mut after = t.end;
        while sql.get(after).is_some_and(|&b| is_space(b)) {
            after += 1;
        }
        if after == sql.len() {
            while out.last().is_some_and(|&b| is_space(b)) {
                out.pop();
            }
            copied = after;
        } else if is_space(out.last().copied().unwrap_or(b' ')) {
            copied = after;
        } else if after > t.end {
            copied = t.end;
        } else {
            // `a/*wipe*/b` must not become `ab`.
            out.push(b' ');
            copied = t.end;
        }
    }
    match out {
        None => Cow::Borrowed(sql),
        Some(mut out) => {
            out.extend_from_slice(&sql[copied..]);
            Cow::Owned(out)
        }
    }
}

/// The statement's first word, uppercased, past hints, whitespace and opening
/// parentheses: what it is, at a glance.
pub fn first_word(statement: &[u8]) -> Vec<u8> {
    strip_hints(statement)
        .iter()
        .skip_while(|b| b.is_ascii_whitespace() || **b == b'(')
        .take_while(|b| b.is_ascii_alphabetic())
        .map(u8::to_ascii_uppercase)
        .collect()
}

enum Hint {
    NoCache,
    Wipe,
    /// The statement's sqlcommenter comment, as the lexer reads it (not a `/*` inside
    /// a string).
    Commenter,
}

/// Hints live in comments, so text without `/*` needs no lexing at all.
/// A search for each `/` (vectorised), not a substring search: that one's set-up costs
/// more than most statements' length.
fn has_block_comment(sql: &[u8]) -> bool {
    memchr::memchr_iter(b'/', sql).any(|i| sql.get(i + 1) == Some(&b'*'))
}

fn hint_in(sql: &[u8], t: Tok, commenter: Option<&std::ops::Range<usize>>) -> Option<Hint> {
    if t.kind != (Kind::Block { closed: true }) {
        return None;
    }
    if commenter.is_some_and(|c| (c.start, c.end) == (t.start, t.end)) {
        return Some(Hint::Commenter);
    }
    let body = sql.get(t.start + 2..t.end.checked_sub(2)?)?.trim_ascii();
    if body.eq_ignore_ascii_case(b"nocache") {
        Some(Hint::NoCache)
    } else if body.eq_ignore_ascii_case(b"wipe") {
        Some(Hint::Wipe)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_found_in_comments_only() {
        let h = |s: &str| hints(s.as_bytes());
        let nocache = Hints {
            nocache: true,
            ..Hints::default()
        };
        let wipe = Hints {
            wipe: true,
            ..Hints::default()
        };
        assert_eq!(h("SELECT /*nocache*/ 1"), nocache);
        assert_eq!(h("SELECT 1 /* NoCache */"), nocache);
        assert_eq!(h("/*\twipe\n*/SELECT 1"), wipe);
        assert_eq!(
            h("SELECT /*WIPE*/ 1 /*nocache*/"),
            Hints {
                nocache: true,
                wipe: true,
                commented: false,
            }
        );
        for none in [
            "SELECT 1",
            "SELECT /*+ nocache */ 1",
            "SELECT /*+nocache*/ 1",
            "SELECT '/*nocache*/'",
            "SELECT \"/*wipe*/\"",
            "SELECT 1 -- /*wipe*/",
            "SELECT 1 # /*wipe*/",
            "SELECT /*!nocache*/ 1",
            "SELECT /* nocache please */ 1",
            "SELECT /*nocache",
            "SELECT /*no cache*/ 1",
        ] {
            assert_eq!(h(none), Hints::default(), "{none}");
        }
    }

    #[test]
    fn strip_hints_removes_only_our_comments() {
        let strip = |s: &str| String::from_utf8(strip_hints(s.as_bytes()).into_owned()).unwrap();
        for (with, without) in [
            ("SELECT /*wipe*/ 1", "SELECT 1"),
            ("/*nocache*/ SELECT 1", "SELECT 1"),
            ("SELECT 1 /*nocache*/", "SELECT 1"),
            ("SELECT 1 /*nocache*/ \n", "SELECT 1"),
            ("SELECT/*wipe*/1", "SELECT 1"),
            ("SELECT/*wipe*/ 1", "SELECT 1"),
            ("SELECT /*wipe*/1", "SELECT 1"),
            ("SELECT /*nocache*/ /* WIPE */ 1", "SELECT 1"),
            ("SELECT /*wipe*/ 1 /* keep */", "SELECT 1 /* keep */"),
            ("SELECT '/*wipe*/', /*wipe*/ 2", "SELECT '/*wipe*/', 2"),
            // Two minus signs stay two minus signs, not the start of a comment: the
            // server reads `5 --/*wipe*/ 3` as 5 - -3.
            ("SELECT 5 --/*wipe*/ 3", "SELECT 5 --/**/ 3"),
            ("SELECT 5 --/*wipe*/", "SELECT 5 --/**/"),
            (
                "SELECT 1 --/*nocache*/ 1; DELETE FROM t",
                "SELECT 1 --/**/ 1; DELETE FROM t",
            ),
        ] {
            assert_eq!(strip(with), without, "{with}");
        }
        for keep in [
            "SELECT 1",
            "SELECT /* other */ 1",
            "SELECT '/*wipe*/'",
            "SELECT /*+ wipe */ 1",
        ] {
            assert!(
                matches!(strip_hints(keep.as_bytes()), Cow::Borrowed(_)),
                "{keep}"
            );
        }
    }

    #[test]
    fn a_hint_after_two_minus_signs_leaves_the_same_statement() {
        let text = b"SELECT 5 --/*wipe*/ 3";
        let stripped = strip_hints(text);
        assert_eq!(
            crate::classify::sql::digest(&stripped).0,
            crate::classify::sql::digest(text).0
        );
        assert!(matches!(strip_hints(&stripped), Cow::Borrowed(_)));
    }

    #[test]
    fn a_sqlcommenter_comment_leaves_the_key_like_a_hint() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        for (sql, plain) in [
            (
                format!("SELECT c FROM t WHERE id = 1 /*traceparent='{tp}'*/"),
                "SELECT c FROM t WHERE id = 1",
            ),
            (
                format!("/*route='%2Fa',traceparent='{tp}'*/ SELECT 1"),
                "SELECT 1",
            ),
            (
                format!("SELECT 1 /*nocache*/ /*traceparent='{tp}'*/"),
                "SELECT 1",
            ),
        ] {
            let h = hints(sql.as_bytes());
            assert!(h.commented, "{sql}");
            assert_eq!(&*strip_hints(sql.as_bytes()), plain.as_bytes(), "{sql}");
        }
        // Only a comment the server would read as one: not text in a string, not a
        // comment of another kind.
        for keep in [
            "SELECT 'a /*traceparent=''x''*/'",
            "SELECT \"/*k='v'*/\" /*+ BKA(t) */",
            "SELECT 1 /* a note */",
        ] {
            assert!(!hints(keep.as_bytes()).commented, "{keep}");
            assert!(
                matches!(strip_hints(keep.as_bytes()), Cow::Borrowed(_)),
                "{keep}"
            );
        }
    }
}
