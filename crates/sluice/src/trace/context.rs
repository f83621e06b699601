//! A trace's context as W3C Trace Context writes it (`traceparent`), read from where an
//! application puts it in a statement: its sqlcommenter comment
//! ([`crate::classify::sql::commenter`]).

/// `version-traceid-parentid-flags`: 2, 32, 16 and 2 lowercase hex digits.
const TRACEPARENT_LEN: usize = 55;

/// The caller's span a statement continues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The caller recorded its span (`sampled` flag): this one is recorded too.
    pub sampled: bool,
}

impl TraceParent {
    /// A `traceparent` value. Version 00 is read exactly; a later version by its first
    /// four fields, as the specification asks. All-zero ids are invalid.
    pub fn parse(value: &[u8]) -> Option<TraceParent> {
        let value = value.trim_ascii();
        if value.len() < TRACEPARENT_LEN {
            return None;
        }
        let version = hex_byte(&value[0..2])?;
        if version == 0xff
            || (version == 0 && value.len() != TRACEPARENT_LEN)
            || (version != 0 && value.get(TRACEPARENT_LEN).is_some_and(|&b| b != b'-'))
        {
            return None;
        }
        if value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex::decode_to_slice(&value[3..35], &mut trace_id).ok()?;
        hex::decode_to_slice(&value[36..52], &mut span_id).ok()?;
        let flags = hex_byte(&value[53..55])?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The header value naming `span_id` of this trace as the parent.
    pub fn header(trace_id: &[u8; 16], span_id: &[u8; 8], sampled: bool) -> String {
        let flags = if sampled { "01" } else { "00" };
        format!(
            "00-{}-{}-{flags}",
            hex::encode(trace_id),
            hex::encode(span_id)
        )
    }
}

/// The caller's span named by the `traceparent` of `sql`'s sqlcommenter comment.
/// With it, where its value starts in `sql` when another span id can be written there.
pub fn parent_in(sql: &[u8]) -> Option<(TraceParent, Option<usize>)> {
    let c = crate::classify::sql::commenter(sql)?;
    let parent = TraceParent::parse(c.traceparent.as_deref()?)?;
    Some((parent, c.traceparent_at))
}

/// Writes `span_id` over the parent id of the `traceparent` at `at` in `text`, when the
/// value there is still that of trace `trace_id` (the text may have been rewritten since
/// it was read). True when written.
pub fn rewrite_parent(text: &mut [u8], at: usize, trace_id: &[u8; 16], span_id: &[u8; 8]) -> bool {
    let Some(value) = text.get_mut(at..at + TRACEPARENT_LEN) else {
        return false;
    };
    let mut id = [0u8; 16];
    if hex::decode_to_slice(&value[3..35], &mut id).is_err() || &id != trace_id {
        return false;
    }
    value[36..52].copy_from_slice(hex::encode(span_id).as_bytes());
    true
}

/// Two hex digits (either case) as a byte.
fn hex_byte(two: &[u8]) -> Option<u8> {
    let mut b = [0u8; 1];
    hex::decode_to_slice(two, &mut b).ok()?;
    Some(b[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_is_read_and_written_back_the_same() {
        let p = TraceParent::parse(TP.as_bytes()).expect("valid");
        assert!(p.sampled);
        assert_eq!(p.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert_eq!(TraceParent::header(&p.trace_id, &p.span_id, true), TP);
        let unsampled = TP.replace("-01", "-00");
        assert!(!TraceParent::parse(unsampled.as_bytes()).unwrap().sampled);
    }

    #[test]
    fn invalid_traceparents_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad.as_bytes()), None, "{bad}");
        }
        // A later version may carry more fields after a dash.
        let later = format!("{}-whatever", TP.replacen("00", "01", 1));
        assert!(TraceParent::parse(later.as_bytes()).is_some());
    }

    #[test]
    fn a_statements_parent_is_its_comments_traceparent() {
        let sql = format!("SELECT 1 /*traceparent='{TP}'*/");
        let (parent, at) = parent_in(sql.as_bytes()).expect("a parent");
        assert_eq!(Some(parent), TraceParent::parse(TP.as_bytes()));
        let mut text = sql.clone().into_bytes();
        let at = at.expect("written as it reads");
        assert!(rewrite_parent(&mut text, at, &parent.trace_id, &[0xab; 8]));
        let written = TP.replace("00f067aa0ba902b7", "abababababababab");
        assert_eq!(
            text,
            format!("SELECT 1 /*traceparent='{written}'*/").into_bytes()
        );
        // Another trace's value, or none at all, is left alone.
        assert!(!rewrite_parent(&mut text, at, &[1; 16], &[0xcd; 8]));
        assert!(!rewrite_parent(
            &mut text,
            at + 1,
            &parent.trace_id,
            &[0xcd; 8]
        ));
        assert_eq!(parent_in(b"SELECT 1 /*traceparent='00-bad'*/"), None);
        assert_eq!(parent_in(b"SELECT 1"), None);
    }
}
