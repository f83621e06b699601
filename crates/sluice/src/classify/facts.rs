//! What the text of the statement in flight says, read once however many stages ask:
//! routing asks whether it is a plain read, the cache which tables it reads or writes,
//! sharding where they are. Each used to lex the text again.

use super::sql::{analyze, digest_shape, Analysis};

/// A text's shape and the hash of its exact bytes ([`digest_shape`]): `None` when the
/// shape cannot vouch for the digest and the text is to be digested in full.
pub type Shape = Option<(u64, u64)>;

/// What one statement's text says, worked out when a stage first asks and kept for the
/// stages after it. Made afresh for each statement (it lives on the statement in
/// flight), and forgotten when the text is rewritten.
#[derive(Debug, Default)]
pub struct TextFacts {
    /// [`analyze`] with no default schema ([`Analysis::qualified`] gives a session's
    /// view), and the length of the text it read.
    analysis: Option<(usize, Analysis)>,
    /// The text's shape, which analytics and the cache's statistics both look a
    /// digest up by.
    shape: Option<(usize, Shape)>,
}

impl TextFacts {
    /// What `text` does, tables unqualified by any default schema. Worked out again when
    /// more or less of the text is in hand than when it was first asked (a statement
    /// too large to hold is read by its head).
    pub fn analysis(&mut self, text: &[u8]) -> &Analysis {
        if !self.holds_for(text) {
            self.analysis = Some((text.len(), analyze(text, None)));
        }
        &self.analysis.as_ref().expect("just set").1
    }

    /// The same, taken by the last stage that asks: no copy of its tables.
    pub fn take_analysis(&mut self, text: &[u8]) -> Analysis {
        match self.analysis.take() {
            Some((len, a)) if len == text.len() => a,
            _ => analyze(text, None),
        }
    }

    /// The text's [`Shape`], under the same rule as [`Self::analysis`].
    pub fn shape(&mut self, text: &[u8]) -> Shape {
        match self.shape {
            Some((len, shape)) if len == text.len() => shape,
            _ => {
                let shape = digest_shape(text);
                self.shape = Some((text.len(), shape));
                shape
            }
        }
    }

    /// `text`'s shape, worked out before this statement (a prepared statement's, for
    /// its execute).
    pub fn know_shape(&mut self, text: &[u8], shape: Shape) {
        self.shape = Some((text.len(), shape));
    }

    /// The text's shape if a stage worked it out already; never works it out.
    pub fn known_shape(&self, text: &[u8]) -> Option<Shape> {
        self.shape
            .filter(|(len, _)| *len == text.len())
            .map(|(_, shape)| shape)
    }

    fn holds_for(&self, text: &[u8]) -> bool {
        self.analysis
            .as_ref()
            .is_some_and(|(len, _)| *len == text.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::sql::strip_hints;

    #[test]
    fn asked_twice_is_read_once_and_a_longer_text_is_read_again() {
        let mut facts = TextFacts::default();
        let whole = b"SELECT * FROM t JOIN u USING (id)";
        let head = &whole[..15];
        assert_eq!(facts.analysis(head), &analyze(head, None));
        assert!(facts.holds_for(head));
        assert_eq!(facts.analysis(whole), &analyze(whole, None));
        assert_eq!(facts.take_analysis(whole), analyze(whole, None));
        assert!(!facts.holds_for(whole));
        assert_eq!(facts.take_analysis(whole), analyze(whole, None));
        assert_eq!(facts.known_shape(head), None);
        assert_eq!(facts.shape(head), digest_shape(head));
        assert_eq!(facts.known_shape(head), Some(digest_shape(head)));
        assert_eq!(facts.shape(whole), digest_shape(whole));
        assert_eq!(facts.known_shape(head), None);
    }

    /// The cache keys a statement by its text without our hints, and analyses the
    /// text as sent: a hint is a comment, so both read the same.
    #[test]
    fn hints_do_not_change_what_a_text_does() {
        for sql in [
            "SELECT /*nocache*/ * FROM t",
            "SELECT/* wipe */c FROM a.t WHERE id = 5 --/*wipe*/ 3",
            "/*wipe*/ UPDATE t SET x = 1 /* nocache */",
            "SELECT 1 /*nocache*/; SELECT * FROM t",
        ] {
            let stripped = strip_hints(sql.as_bytes());
            assert_eq!(
                TextFacts::default().take_analysis(sql.as_bytes()),
                analyze(&stripped, None),
                "{sql}"
            );
        }
    }
}
