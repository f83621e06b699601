//! The SQL text path every COM_QUERY takes: hints, the digest and its shortcuts, the
//! first word and the analysis the cache keys and invalidates by. Beyond "no panic",
//! what the functions' documentation promises of each other must hold for any bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice::classify::sql::{
    analyze, digest, digest_hash, digest_shape, first_word, fnv1a, hints, literal_template,
    strip_hints, Analysis, Hints, Literal, TableRef,
};
use std::borrow::Cow;

fuzz_target!(|data: &[u8]| {
    // The digest is "normalized text with its FNV-1a 64 hash".
    let (text, hash) = digest(data);
    assert_eq!(hash, fnv1a(text.as_bytes()));

    // digest_hash is "the hash of digest without building its text", except that a run
    // of more than 16 trailing spaces and `;` in the normalized text is hashed as it
    // comes. Each such byte needs a `;`, whitespace or a comment opener in the input,
    // so below that many of those the two must agree. Text that is not UTF-8 is left
    // out until the two agree on it too: digest hashes its text made valid UTF-8,
    // digest_hash the bytes as they are.
    let runs = data
        .iter()
        .filter(|&&b| {
            matches!(
                b,
                b';' | b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | b'/' | b'#' | b'-'
            )
        })
        .count();
    if runs <= 16 && std::str::from_utf8(data).is_ok() {
        assert_eq!(digest_hash(data), hash, "digest {text:?}");
    } else {
        let _ = digest_hash(data);
    }

    if let Some((shape, exact)) = digest_shape(data) {
        // "the FNV-1a hash of the exact text", and only for text it can vouch for:
        // outside its single-quoted strings, which it folds.
        assert_eq!(exact, fnv1a(data));
        let code = outside_strings(data).expect("a shape for an unterminated string");
        assert!(
            code.iter().all(
                |&b| (b.is_ascii_graphic() || b.is_ascii_whitespace() || b == 0x0b)
                    && !matches!(b, b'\'' | b'"' | b'`' | b'\\' | b'#')
            ),
            "a shape for quotes, backslashes, control or non-ASCII bytes outside strings"
        );
        assert!(
            !code.windows(2).any(|w| w == b"/*"),
            "a shape for a comment"
        );
        // "Two statements with the same shape have the same digest": the same text with
        // other digits and other whitespace, when the shape says it is the same.
        let other = respaced_renumbered(data);
        if digest_shape(&other).map(|(s, _)| s) == Some(shape) {
            assert_eq!(
                digest_hash(&other),
                digest_hash(data),
                "{:?} and {:?} share a shape, not a digest",
                String::from_utf8_lossy(data),
                String::from_utf8_lossy(&other)
            );
            // And the same analysis: what lets a session keep one by its shape.
            assert_eq!(
                analyze(&other, None),
                analyze(data, None),
                "{:?} and {:?} share a shape, not an analysis",
                String::from_utf8_lossy(data),
                String::from_utf8_lossy(&other)
            );
        }
    }

    // The literal template is the shape written out: there for the texts the shape is,
    // but those with a `?` of their own; its `?` are its literals, in order, each a digit
    // run or a whole single-quoted string of the text, and the text between them is the
    // text's own with spacing folded.
    let template = literal_template(data);
    let own_mark = outside_strings(data).is_some_and(|code| code.contains(&b'?'));
    assert_eq!(
        template.is_some(),
        digest_shape(data).is_some() && !own_mark,
        "a template where the shape is"
    );
    if let Some(t) = template {
        assert_eq!(t.key.len(), t.text_len + t.literals.len());
        let mut rebuilt = Vec::new();
        let mut at = 0;
        for (kind, span) in &t.literals {
            assert!(at <= span.start && span.start < span.end && span.end <= data.len());
            rebuilt.extend_from_slice(&data[at..span.start]);
            rebuilt.push(b'?');
            let lit = &data[span.clone()];
            match kind {
                Literal::Number => assert!(lit.iter().all(u8::is_ascii_digit)),
                Literal::Str => {
                    assert!(lit.len() >= 2 && lit[0] == b'\'' && lit[lit.len() - 1] == b'\'')
                }
            }
            at = span.end;
        }
        rebuilt.extend_from_slice(&data[at..]);
        assert_eq!(
            folded(&rebuilt),
            folded(t.text()),
            "the template of {:?}",
            String::from_utf8_lossy(data)
        );
    }

    let found = hints(data);
    let stripped = strip_hints(data);
    assert!(stripped.len() <= data.len());
    assert_eq!(
        matches!(stripped, Cow::Borrowed(_)),
        found == Hints::default()
    );
    // "The text without our hint comments": nothing left to strip.
    assert_eq!(hints(&stripped), Hints::default());
    assert!(matches!(strip_hints(&stripped), Cow::Borrowed(_)));
    // The stripped text is what the cache keys and analyses the statement by, "as if
    // the hint had never been typed": it must be the same statement. Comments count
    // as whitespace in the digest, so it doesn't change either (a hint right after
    // `--` leaves an empty comment, so that the `--` stays two minus signs).
    if found != Hints::default() {
        assert_eq!(
            digest(&stripped).0,
            text,
            "{:?} stripped to {:?}",
            String::from_utf8_lossy(data),
            String::from_utf8_lossy(&stripped)
        );
        assert_eq!(analyze(&stripped, Some("db")), analyze(data, Some("db")));
    }

    // "The statement's first word, uppercased, past hints".
    let word = first_word(data);
    assert!(word.iter().all(u8::is_ascii_uppercase));
    assert_eq!(first_word(&stripped), word);

    // The default schema only qualifies unqualified names (it is lowercased like them);
    // what the statement is does not depend on it.
    let plain = analyze(data, None);
    let qualified = analyze(data, Some("Db"));
    check(&plain);
    check(&qualified);
    match (&plain, &qualified) {
        (Analysis::Read { uncacheable: a, .. }, Analysis::Read { uncacheable: b, .. }) => {
            assert_eq!(a, b)
        }
        (Analysis::Write { tables: a }, Analysis::Write { tables: b }) => {
            assert_eq!(a.is_none(), b.is_none())
        }
        (a, b) => assert_eq!(std::mem::discriminant(a), std::mem::discriminant(b)),
    }
});

/// What an analysis documents of its tables.
fn check(a: &Analysis) {
    let tables: &[TableRef] = match a {
        Analysis::Read { tables, .. } => tables,
        Analysis::Write { tables: Some(t) } => t,
        _ => return,
    };
    for t in tables {
        // "both lowercased ASCII"
        assert!(!t.schema.bytes().any(|b| b.is_ascii_uppercase()), "{t:?}");
        assert!(!t.table.bytes().any(|b| b.is_ascii_uppercase()), "{t:?}");
    }
    if let Analysis::Read { tables, .. } = a {
        // "sorted, deduplicated"
        assert!(tables.windows(2).all(|w| w[0] < w[1]), "{tables:?}");
    }
}

/// `sql` without its single-quoted strings (doubled quotes and backslash escapes inside,
/// as the lexer reads them); `None` when one is unterminated.
fn outside_strings(sql: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(sql.len());
    let mut i = 0;
    while i < sql.len() {
        if sql[i] != b'\'' {
            out.push(sql[i]);
            i += 1;
            continue;
        }
        i += 1;
        loop {
            match sql.get(i)? {
                b'\\' => i += 2,
                b'\'' if sql.get(i + 1) == Some(&b'\'') => i += 2,
                b'\'' => break,
                _ => i += 1,
            }
        }
        i += 1;
        out.push(b' ');
    }
    Some(out)
}

/// `sql` with each digit run replaced by another of another length and each whitespace
/// run by other whitespace: what a shape is meant to see through.
fn respaced_renumbered(sql: &[u8]) -> Vec<u8> {
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let class = |b: u8| (b.is_ascii_digit(), space(b));
    let mut out = Vec::with_capacity(sql.len() + 8);
    let mut i = 0;
    while i < sql.len() {
        let b = sql[i];
        let run = sql[i..]
            .iter()
            .take_while(|&&c| class(c) == class(b))
            .count();
        let piece = &sql[i..i + run];
        if b.is_ascii_digit() {
            out.extend(piece.iter().map(|d| b'0' + (d - b'0' + 3) % 10));
            if run % 2 == 1 {
                out.push(b'5');
            }
        } else if space(b) {
            out.extend_from_slice(if run % 2 == 1 { b"\n\t " } else { b" " });
        } else {
            out.extend_from_slice(piece);
        }
        i += run;
    }
    out
}

/// `s` with each run of whitespace one space and none leading, as a shape folds it.
fn folded(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &b in s {
        let space = b.is_ascii_whitespace() || b == 0x0b;
        if !(space && matches!(out.last(), None | Some(&b' '))) {
            out.push(if space { b' ' } else { b });
        }
    }
    out
}
