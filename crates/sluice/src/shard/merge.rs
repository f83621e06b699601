//! Values of several shards' rows as the server compares and combines them: exact
//! numbers (integers and decimals) by value, dates and binary strings by bytes, and
//! `COUNT`, `SUM`, `MIN`, `MAX` and `AVG` of exact numbers computed exactly. A float
//! sum (whose last digits depend on the order of additions) or a string under a
//! collation has no [`Compare`] and no combination: the read is refused.

/// One column of the select list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    Count,
    Sum,
    Min,
    Max,
}

/// A column an `ORDER BY` names: by name (its last part, lowercased) or 1-based position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderKey {
    Name(String),
    Position(usize),
}

/// Rows a read over several shards may hold per shard: each shard's answer is held
/// until every shard answered.
pub const MAX_LIMIT: u64 = 10_000;

/// How a column's text values compare as the server orders them; `None` when that
/// depends on a collation or a format Sluice does not reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Integers and decimals.
    Number,
    /// Binary strings, and dates and datetimes (whose text sorts as they do).
    Bytes,
}

impl Compare {
    pub fn of(column_type: u8, charset: u16) -> Option<Compare> {
        match column_type {
            t if exact(t) => Some(Compare::Number),
            // DATE, DATETIME, TIMESTAMP, NEWDATE.
            10 | 12 | 7 | 14 => Some(Compare::Bytes),
            // VARCHAR, VAR_STRING, STRING, BLOBs under the binary collation.
            15 | 253 | 254 | 249..=252 if charset == 63 => Some(Compare::Bytes),
            _ => None,
        }
    }

    /// The order of two values; NULL first, as the server sorts it ascending.
    pub fn cmp(self, a: Option<&[u8]>, b: Option<&[u8]>) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (a, b) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => match self {
                Compare::Bytes => a.cmp(b),
                // By the digits, not as i128: a DECIMAL(65) has more than fit, and a
                // fallback to bytes for those alone would not be an order at all
                // (`2` < `10` < `1e39` in bytes < `2` in bytes), which `sort_by` may
                // panic on. Text that is no number (no server sends it for these
                // types) goes after the numbers, so that the whole stays an order.
                Compare::Number => match (Decimal::of(a), Decimal::of(b)) {
                    (Some(x), Some(y)) => x.cmp(&y),
                    (Some(_), None) => Ordering::Less,
                    (None, Some(_)) => Ordering::Greater,
                    (None, None) => a.cmp(b),
                },
            },
        }
    }
}

/// A decimal's text as its value orders: the sign, the integer digits without leading
/// zeros and the fraction digits without trailing zeros (zero is never negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal<'a> {
    negative: bool,
    whole: &'a [u8],
    fraction: &'a [u8],
}

impl<'a> Decimal<'a> {
    /// `[-]digits[.digits]`, at least one digit; `None` for anything else.
    fn of(text: &'a [u8]) -> Option<Decimal<'a>> {
        let (negative, text) = match text.strip_prefix(b"-") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = match text.iter().position(|&b| b == b'.') {
            Some(dot) => (&text[..dot], &text[dot + 1..]),
            None => (text, &[][..]),
        };
        if whole.is_empty() && fraction.is_empty()
            || !whole.iter().chain(fraction).all(u8::is_ascii_digit)
        {
            return None;
        }
        let whole = &whole[whole.iter().take_while(|&&b| b == b'0').count()..];
        let significant = fraction
            .iter()
            .rposition(|&b| b != b'0')
            .map_or(0, |i| i + 1);
        let fraction = &fraction[..significant];
        Some(Decimal {
            negative: negative && !(whole.is_empty() && fraction.is_empty()),
            whole,
            fraction,
        })
    }
}

impl Ord for Decimal<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // More integer digits is larger; then digit by digit, the fraction included
        // (without trailing zeros, a shorter fraction that is a prefix is smaller).
        let magnitude = (self.whole.len(), self.whole, self.fraction).cmp(&(
            other.whole.len(),
            other.whole,
            other.fraction,
        ));
        match (self.negative, other.negative) {
            (false, false) => magnitude,
            (true, true) => magnitude.reverse(),
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
        }
    }
}

impl PartialOrd for Decimal<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// An exact number: an integer scaled by 10^scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Num {
    value: i128,
    scale: u32,
}

impl Num {
    pub(super) fn parse(text: &[u8]) -> Option<Num> {
        let text = std::str::from_utf8(text).ok()?;
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let negative = whole.starts_with('-');
        let digits = whole.trim_start_matches('-');
        if digits.is_empty() && fraction.is_empty()
            || !digits
                .bytes()
                .chain(fraction.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let magnitude: i128 = format!("{digits}{fraction}").parse().ok()?;
        Some(Num {
            value: if negative { -magnitude } else { magnitude },
            scale: fraction.len() as u32,
        })
    }

    /// The integer it is, when its fraction is all zeros (`7.00`).
    pub(super) fn integer(self) -> Option<i128> {
        let unit = 10i128.checked_pow(self.scale)?;
        (self.value % unit == 0).then(|| self.value / unit)
    }

    /// `sum / count` with `scale` decimals, rounded half away from zero as the server's
    /// `AVG` of an exact number is; `None` when too large to compute exactly.
    pub(super) fn average(sum: Num, count: i128, scale: u32) -> Option<Num> {
        if count <= 0 {
            return None;
        }
        let (mut numerator, mut denominator) = (sum.value, count);
        if scale >= sum.scale {
            numerator = numerator.checked_mul(10i128.checked_pow(scale - sum.scale)?)?;
        } else {
            denominator = denominator.checked_mul(10i128.checked_pow(sum.scale - scale)?)?;
        }
        let (q, r) = (numerator / denominator, numerator % denominator);
        let away = r.unsigned_abs().checked_mul(2)? >= denominator.unsigned_abs();
        let value = match (away, numerator < 0) {
            (false, _) => q,
            (true, false) => q.checked_add(1)?,
            (true, true) => q.checked_sub(1)?,
        };
        Some(Num { value, scale })
    }

    pub(super) fn scale(self) -> u32 {
        self.scale
    }

    fn rescaled(self, scale: u32) -> Option<i128> {
        self.value
            .checked_mul(10i128.checked_pow(scale - self.scale)?)
    }

    pub(super) fn text(self) -> Vec<u8> {
        let digits = self.value.unsigned_abs().to_string();
        let scale = self.scale as usize;
        let digits = format!("{digits:0>width$}", width = scale + 1);
        let (whole, fraction) = digits.split_at(digits.len() - scale);
        let sign = if self.value < 0 { "-" } else { "" };
        match scale {
            0 => format!("{sign}{whole}"),
            _ => format!("{sign}{whole}.{fraction}"),
        }
        .into_bytes()
    }
}

/// Whether a column of this `MYSQL_TYPE_*` holds exact numbers.
pub(super) fn exact(column_type: u8) -> bool {
    // TINY, SHORT, LONG, LONGLONG, INT24, YEAR, DECIMAL, NEWDECIMAL.
    matches!(column_type, 1 | 2 | 3 | 8 | 9 | 13 | 0 | 246)
}

pub(super) fn combine(agg: Agg, a: Num, b: Num) -> Option<Num> {
    let scale = a.scale.max(b.scale);
    let (x, y) = (a.rescaled(scale)?, b.rescaled(scale)?);
    let value = match agg {
        Agg::Count | Agg::Sum => x.checked_add(y)?,
        Agg::Min => x.min(y),
        Agg::Max => x.max(y),
    };
    Some(Num { value, scale })
}
