//! User variables follow a multiplexed session from connection to connection: read back
//! as typed literals after a statement assigns them, set again where the next one runs.

use super::*;

/// Reads the values the statement gave to `names` on the session's connection, as
/// literals that recreate them elsewhere; when they can't be read, the session is pinned.
pub(super) async fn carry_user_vars(
    backend: &mut crate::backend::PooledConn,
    mux: &mut Mux,
    names: &[String],
) -> Result<(), SessionError> {
    let mut sql = String::from("SELECT ");
    for (i, name) in names.iter().enumerate() {
        let v = user_var_ref(name.as_bytes());
        // HEX: a string's own bytes, not converted to the session's result charset.
        let sep = if i > 0 { ", " } else { "" };
        let _ = write!(sql, "{sep}{v}, HEX({v}), COLLATION({v})");
    }
    let row = match backend.query_typed_row(&sql).await {
        Ok(Some(row)) if row.len() == 3 * names.len() => row,
        Err(Failed::Broken(e)) => {
            backend.mark_broken();
            return Err(e.into());
        }
        other => {
            tracing::debug!(
                ?other,
                "user variables unreadable: the session keeps its connection"
            );
            mux.pins.user_vars = true;
            return Ok(());
        }
    };
    for (name, cols) in names.iter().zip(row.chunks(3)) {
        let (kind, value) = &cols[0];
        let hex = cols[1].1.as_deref().unwrap_or_default();
        let collation = cols[2].1.as_deref().unwrap_or(b"binary");
        let literal = user_var_literal(*kind, value.as_deref(), hex, collation);
        let name: Box<[u8]> = name.as_bytes().into();
        backend.user_vars.insert(name.clone(), literal.clone());
        mux.user_vars.insert(name, literal);
    }
    Ok(())
}

/// `@name`, quoted so that any name is safe.
pub(super) fn user_var_ref(name: &[u8]) -> String {
    format!("@`{}`", String::from_utf8_lossy(name).replace('`', "``"))
}

/// The SQL that recreates a user variable read back as `value` with column type `kind`,
/// its bytes in `hex` and `collation`: integers and decimals as written (their literals
/// have those types), doubles with an exponent, strings as hex with their character set
/// and collation.
pub(super) fn user_var_literal(
    kind: u8,
    value: Option<&[u8]>,
    hex: &[u8],
    collation: &[u8],
) -> String {
    const DECIMAL: u8 = 0;
    const TINY: u8 = 1;
    const SHORT: u8 = 2;
    const LONG: u8 = 3;
    const FLOAT: u8 = 4;
    const DOUBLE: u8 = 5;
    const LONGLONG: u8 = 8;
    const INT24: u8 = 9;
    const NEWDECIMAL: u8 = 246;
    let Some(value) = value else {
        return "NULL".into();
    };
    let text = String::from_utf8_lossy(value);
    match kind {
        TINY | SHORT | LONG | LONGLONG | INT24 | DECIMAL | NEWDECIMAL if is_number(&text) => {
            text.into_owned()
        }
        FLOAT | DOUBLE if text.parse::<f64>().is_ok() => {
            if text.contains(['e', 'E']) {
                text.into_owned()
            } else {
                format!("{text}e0")
            }
        }
        _ => {
            let hex = String::from_utf8_lossy(hex);
            let collation = String::from_utf8_lossy(collation);
            if collation == "binary" || !collation.contains('_') {
                format!("_binary X'{hex}'")
            } else {
                let charset = collation.split('_').next().unwrap_or("binary");
                format!("_{charset} X'{hex}' COLLATE {collation}")
            }
        }
    }
}

/// Whether `text` is an integer or decimal literal (`-12`, `1.50`): anything else would
/// not recreate the value, or not parse (`.`), and goes as its bytes.
fn is_number(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b.is_ascii_digit())
}

/// The user variables a connection must get for a session: the session's that differ,
/// and NULL for those another session left there.
pub(super) fn user_var_sets(
    want: &std::collections::BTreeMap<Box<[u8]>, String>,
    have: &std::collections::BTreeMap<Box<[u8]>, String>,
) -> Vec<(Box<[u8]>, String)> {
    // Most sessions never set one: checked before every multiplexed statement.
    if want.is_empty() && have.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(Box<[u8]>, String)> = want
        .iter()
        .filter(|(n, v)| have.get(*n) != Some(*v))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    out.extend(
        have.iter()
            .filter(|(n, v)| !want.contains_key(*n) && v.as_str() != "NULL")
            .map(|(n, _)| (n.clone(), "NULL".to_owned())),
    );
    out
}

pub(super) fn assignments(sets: &[(Box<[u8]>, String)]) -> String {
    sets.iter()
        .map(|(n, v)| format!("{}={v}", user_var_ref(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_variables_are_recreated_with_their_type() {
        assert_eq!(
            user_var_literal(8, Some(b"-42"), b"2D3432", b"binary"),
            "-42"
        );
        assert_eq!(user_var_literal(246, Some(b"1.50"), b"", b"binary"), "1.50");
        assert_eq!(user_var_literal(246, Some(b"-0.5"), b"", b"binary"), "-0.5");
        // Not a number whatever the type said: its bytes, never a literal that won't parse.
        for odd in [&b"."[..], b"-", b"1-2", b"1.2.3", b""] {
            assert_eq!(
                user_var_literal(246, Some(odd), b"2E", b"binary"),
                "_binary X'2E'"
            );
        }
        assert_eq!(user_var_literal(5, Some(b"0.25"), b"", b"binary"), "0.25e0");
        assert_eq!(user_var_literal(5, Some(b"1e300"), b"", b"binary"), "1e300");
        assert_eq!(user_var_literal(6, None, b"", b"binary"), "NULL");
        // The text as converted for the client is not used: the hex of its own bytes is.
        assert_eq!(
            user_var_literal(253, Some(b"\xe9'"), b"C3A927", b"utf8mb4_unicode_ci"),
            "_utf8mb4 X'C3A927' COLLATE utf8mb4_unicode_ci"
        );
        assert_eq!(
            user_var_literal(252, Some(b"\x00\xff"), b"00FF", b"binary"),
            "_binary X'00FF'"
        );
        assert_eq!(user_var_ref(b"a`b"), "@`a``b`");
        let want: std::collections::BTreeMap<Box<[u8]>, String> =
            [(b"a".as_slice().into(), "1".to_owned())].into();
        let have: std::collections::BTreeMap<Box<[u8]>, String> = [
            (b"a".as_slice().into(), "2".to_owned()),
            (b"other".as_slice().into(), "'x'".to_owned()),
            (b"gone".as_slice().into(), "NULL".to_owned()),
        ]
        .into();
        assert_eq!(
            assignments(&user_var_sets(&want, &have)),
            "@`a`=1, @`other`=NULL"
        );
        assert!(user_var_sets(&want, &want).is_empty());
    }
}
