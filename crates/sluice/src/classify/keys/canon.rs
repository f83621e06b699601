//! Key values in the form the server compares them in: what sharding places rows by and
//! what row-level cache invalidation keys entries and writes by. Two values with the same
//! [`Canon`] may be equal to the server; two with different ones never are.

use super::Value;
use crate::classify::sql::fnv1a;
use serde::Deserialize;
use sluice_wire::statement::Bound;

/// How the key column compares values.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    /// An integer column (any size, signed or not).
    #[default]
    Integer,
    /// A string under a binary collation (`_bin`, `binary`): values as bytes.
    Binary,
    /// A string under an ASCII case-insensitive, pad-space collation (`_general_ci`,
    /// `_ci` for ASCII keys): values compared lowercased, trailing spaces ignored;
    /// a value with bytes outside printable ASCII could equal other spellings (or be
    /// ignorable in a Unicode collation), so it decides nothing.
    Ci,
}

/// A key value in the form the server compares it in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Canon {
    Int(i128),
    Bytes(Vec<u8>),
}

impl Canon {
    /// A hash that is the same in every process and release: shards place rows by it.
    pub fn stable_hash(&self) -> u64 {
        match self {
            Canon::Int(i) => fnv1a(i.to_string().as_bytes()),
            Canon::Bytes(b) => fnv1a(b),
        }
    }
}

/// Integers a string or a double compared with an integer column stay exact below: the
/// server compares those as doubles.
const EXACT_DOUBLE: i128 = 1 << 53;

/// A value as the key column holds it; `None` when the server would compare it in a way
/// that matches other values too, or when it generates one (`NULL` into an
/// auto-increment key).
pub fn canonical(key_type: KeyType, v: &Value, params: Option<&[Bound]>) -> Option<Canon> {
    match (key_type, v) {
        (_, Value::Null) => None,
        (_, Value::Param(i)) => bound(key_type, params?.get(*i)?),
        (KeyType::Integer, Value::Number(n)) => number_literal(n.as_bytes()).map(Canon::Int),
        (KeyType::Integer, Value::Str(s)) => number_in_string(s).map(Canon::Int),
        // A string column compared with a number is compared as numbers.
        (KeyType::Binary | KeyType::Ci, Value::Number(_)) => None,
        (KeyType::Binary, Value::Str(s)) => Some(Canon::Bytes(s.clone())),
        (KeyType::Ci, Value::Str(s)) => ci(s),
    }
}

/// A bound parameter as the key column holds it (as [`canonical`]).
pub fn bound(key_type: KeyType, b: &Bound) -> Option<Canon> {
    match (key_type, b) {
        (KeyType::Integer, Bound::Int(i)) => Some(Canon::Int(i128::from(*i))),
        (KeyType::Integer, Bound::UInt(u)) => Some(Canon::Int(i128::from(*u))),
        (KeyType::Integer, Bound::Bytes(s)) => number_in_string(s).map(Canon::Int),
        (KeyType::Integer, Bound::Double(d))
            if d.fract() == 0.0 && d.abs() < EXACT_DOUBLE as f64 =>
        {
            Some(Canon::Int(*d as i128))
        }
        (KeyType::Binary, Bound::Bytes(s)) => Some(Canon::Bytes(s.to_vec())),
        (KeyType::Ci, Bound::Bytes(s)) => ci(s),
        _ => None,
    }
}

/// A number literal that is an integer (`-12`, `0x1F`, `7.00`); `7.5` or `1e3` is not.
fn number_literal(s: &[u8]) -> Option<i128> {
    if let Some(hex) = s.strip_prefix(b"0x") {
        return i128::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok();
    }
    decimal_integer(s)
}

/// A string compared with an integer column: the server reads it as a double, so only
/// plain decimal integers within a double's exact range are one value. `'0x1F'` is 0 to
/// the server (with a warning), `' 7'` and `'7abc'` are read with warnings: none decides.
fn number_in_string(s: &[u8]) -> Option<i128> {
    decimal_integer(s).filter(|v| v.abs() < EXACT_DOUBLE)
}

/// `[-]digits[.zeros]`, exactly an integer.
fn decimal_integer(s: &[u8]) -> Option<i128> {
    let (negative, s) = match s.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (whole, fraction) = match s.iter().position(|&b| b == b'.') {
        Some(dot) => (&s[..dot], &s[dot + 1..]),
        None => (s, &[][..]),
    };
    if whole.is_empty() || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if !fraction.iter().all(|&b| b == b'0') {
        return None;
    }
    let magnitude: i128 = std::str::from_utf8(whole).ok()?.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// A printable ASCII string as a case-insensitive pad-space collation compares it. Also
/// a safe coarsening of any other collation of an ASCII-compatible character set: values
/// it merges may be different to the server (a needless invalidation), never the reverse.
pub fn ci(s: &[u8]) -> Option<Canon> {
    if !s.iter().all(|b| (0x20..0x7f).contains(b)) {
        return None;
    }
    let end = s.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    Some(Canon::Bytes(s[..end].to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Value {
        Value::Number(s.into())
    }

    fn s(v: &str) -> Value {
        Value::Str(v.as_bytes().to_vec())
    }

    #[test]
    fn integers_as_the_server_compares_them() {
        let int = |v: &Value| canonical(KeyType::Integer, v, None);
        assert_eq!(int(&n("-12")), Some(Canon::Int(-12)));
        assert_eq!(int(&n("7.00")), Some(Canon::Int(7)));
        assert_eq!(int(&n("0x1F")), Some(Canon::Int(31)));
        assert_eq!(int(&n("7.5")), None);
        for inexact in ["1e3", "", "-", ".5", "1.05"] {
            assert_eq!(int(&n(inexact)), None, "{inexact:?}");
        }
        assert_eq!(int(&s("42")), Some(Canon::Int(42)));
        // The server reads these strings as 0 or with a warning.
        assert_eq!(int(&s("0x1F")), None);
        assert_eq!(int(&s(" 7")), None);
        assert_eq!(int(&s("7abc")), None);
        // Compared as doubles: past 2^53 a string may equal several integers.
        assert_eq!(int(&s("9007199254740993")), None);
        assert_eq!(
            int(&n("9007199254740993")),
            Some(Canon::Int(9007199254740993))
        );
        assert_eq!(int(&Value::Null), None);
    }

    #[test]
    fn bound_parameters() {
        let p = [
            Bound::Int(-3),
            Bound::UInt(u64::MAX),
            Bound::Bytes(b"12"),
            Bound::Double(4.0),
            Bound::Double(4.5),
        ];
        let int = |i| canonical(KeyType::Integer, &Value::Param(i), Some(&p));
        assert_eq!(int(0), Some(Canon::Int(-3)));
        assert_eq!(int(1), Some(Canon::Int(u64::MAX as i128)));
        assert_eq!(int(2), Some(Canon::Int(12)));
        assert_eq!(int(3), Some(Canon::Int(4)));
        assert_eq!(int(4), None);
        assert_eq!(int(9), None, "no such parameter");
        assert_eq!(canonical(KeyType::Integer, &Value::Param(0), None), None);
    }

    #[test]
    fn case_insensitive_strings() {
        let ci = |v: &str| canonical(KeyType::Ci, &s(v), None);
        assert_eq!(ci("Alice  "), Some(Canon::Bytes(b"alice".to_vec())));
        assert_eq!(ci("alice"), ci("ALICE"));
        assert_eq!(ci("caf\u{e9}"), None);
        assert_eq!(ci("a\u{1}"), None, "control bytes may be ignorable");
        assert_eq!(canonical(KeyType::Ci, &n("5"), None), None);
        assert_eq!(
            canonical(KeyType::Binary, &s("Ab "), None),
            Some(Canon::Bytes(b"Ab ".to_vec()))
        );
    }
}
