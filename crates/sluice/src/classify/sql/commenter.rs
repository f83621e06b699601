//! The sqlcommenter comment of a statement: `/*key='value',...*/` before or after the
//! SQL, as ORMs and drivers that follow sqlcommenter write it, with the caller's trace
//! context (`traceparent`) among its pairs. Found here, with the hints, because it
//! belongs to the text: it is left out of the cache's key (a `traceparent` differs for
//! every request), and the tracer reads the caller's span from it.

/// Where a statement's sqlcommenter comment is, and the `traceparent` it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commenter {
    /// Its `traceparent` value, decoded.
    pub traceparent: Option<Vec<u8>>,
    /// Where that value starts in the text, when it is written as it reads (not
    /// URL-encoded): where another span id can be written over the caller's.
    pub traceparent_at: Option<usize>,
    /// The comment's bytes in the text, `/*` to `*/`.
    pub comment: std::ops::Range<usize>,
}

/// The sqlcommenter comment leading or ending `sql` (after spaces and a final `;`), when
/// it is one: `/*key='value',...*/`, values URL-encoded. A comment of another kind
/// (optimizer hints `/*+`, executable `/*!`, a note in words) is not one.
pub fn commenter(sql: &[u8]) -> Option<Commenter> {
    let start = sql.iter().position(|b| !b.is_ascii_whitespace())?;
    let leading = sql[start..]
        .starts_with(b"/*")
        .then(|| find_end(sql, start))
        .flatten()
        .map(|end| start..end);
    let trailing = || {
        let mut end = sql.len();
        while end > 0 && (sql[end - 1].is_ascii_whitespace() || sql[end - 1] == b';') {
            end -= 1;
        }
        if end < 4 || !sql[..end].ends_with(b"*/") {
            return None;
        }
        let open = memchr::memmem::rfind(&sql[..end - 2], b"/*")?;
        Some(open..end)
    };
    let comment = leading
        .filter(|r| pairs(&sql[r.start + 2..r.end - 2]).is_some())
        .or_else(|| trailing().filter(|r| pairs(&sql[r.start + 2..r.end - 2]).is_some()))?;
    let body = &sql[comment.start + 2..comment.end - 2];
    let raw = pairs(body)?
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(b"traceparent"))
        .map(|(_, v)| v);
    let traceparent = raw.map(url_decoded);
    // The value borrows from `sql`: its offset is the distance between the two.
    let traceparent_at = raw
        .filter(|v| traceparent.as_deref() == Some(*v))
        .map(|v| v.as_ptr() as usize - sql.as_ptr() as usize);
    Some(Commenter {
        traceparent,
        traceparent_at,
        comment,
    })
}

/// The end (past `*/`) of the block comment opening at `open`.
fn find_end(sql: &[u8], open: usize) -> Option<usize> {
    memchr::memmem::find(&sql[open + 2..], b"*/").map(|i| open + 2 + i + 2)
}

/// The `key='value'` pairs of a comment's body, or `None` when it is not such a list.
fn pairs(body: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let body = body.trim_ascii();
    if body.is_empty() || matches!(body[0], b'+' | b'!') {
        return None;
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let eq = rest.iter().position(|&b| b == b'=')?;
        let key = rest[..eq].trim_ascii();
        let valid_key = !key.is_empty()
            && key
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'%'));
        if !valid_key {
            return None;
        }
        let after = rest[eq + 1..].trim_ascii_start();
        let (&b'\'', value) = after.split_first()? else {
            return None;
        };
        let close = value.iter().position(|&b| b == b'\'')?;
        out.push((key, &value[..close]));
        rest = value[close + 1..].trim_ascii_start();
        match rest.split_first() {
            None => return Some(out),
            Some((b',', more)) => rest = more.trim_ascii_start(),
            Some(_) => return None,
        }
    }
}

/// `%XX` escapes decoded (sqlcommenter URL-encodes values); others kept as they are.
fn url_decoded(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        match (v[i], v.get(i + 1..i + 3).and_then(hex_byte)) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn hex_nibble(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex_byte(two: &[u8]) -> Option<u8> {
    Some(hex_nibble(*two.first()?)? << 4 | hex_nibble(*two.get(1)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn sqlcommenter_comments_are_found_leading_or_trailing() {
        let trailing = format!("SELECT * FROM t WHERE id = 1 /*action='run',traceparent='{TP}'*/;");
        let c = commenter(trailing.as_bytes()).expect("a sqlcommenter comment");
        assert_eq!(c.traceparent.as_deref(), Some(TP.as_bytes()));
        let at = c.traceparent_at.expect("written as it reads");
        assert_eq!(&trailing[at..at + TP.len()], TP);
        assert_eq!(
            &trailing[c.comment.clone()],
            format!("/*action='run',traceparent='{TP}'*/")
        );

        let encoded = TP.replace('-', "%2D");
        let leading = format!("  /*traceparent='{encoded}', route='%2Fusers'*/ SELECT 1");
        let c = commenter(leading.as_bytes()).expect("leading");
        assert_eq!(c.traceparent.as_deref(), Some(TP.as_bytes()));
        assert_eq!(c.traceparent_at, None, "encoded: not written over");
        assert_eq!(
            &leading[c.comment.clone()],
            format!("/*traceparent='{encoded}', route='%2Fusers'*/")
        );

        // A list without traceparent is still one (its comment leaves the cache key).
        let c = commenter(b"SELECT 1 /*controller='index'*/").expect("no traceparent");
        assert_eq!(c.traceparent, None);
    }

    #[test]
    fn other_comments_are_not_sqlcommenter_ones() {
        for sql in [
            "SELECT /*+ MAX_EXECUTION_TIME(10) */ 1",
            "/*!40101 SET NAMES utf8 */",
            "SELECT 1 /* a note in words */",
            "SELECT 1 /*nocache*/",
            "/*a='1' b='2'*/ SELECT 1",
            "SELECT 1",
            "SELECT '/*x=''y''*/'",
        ] {
            assert_eq!(commenter(sql.as_bytes()), None, "{sql}");
        }
    }
}
