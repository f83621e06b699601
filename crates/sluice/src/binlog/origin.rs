//! Which server connection ran a row-logged transaction. Under row-based logging
//! MariaDB (before 11.5) logs a DML transaction as row events that name no connection,
//! but it logs the statement behind them as sent (`Annotate_rows`, on by default). So
//! Sluice starts the text of each row-changing statement it sends to a server with a
//! comment naming the connection it goes on (the server's own thread id, which
//! statement events carry under mixed logging), and a failover's binlog scan reads it
//! back to settle commits in doubt (`binlog/scan.rs`, `router/commits.rs`).
//!
//! The comment is at the very start and holds no newline, so that a server's error
//! message ("near '...' at line N") reads as it would without it; the statement's text
//! where the server shows it (the process list, its logs, its binlog) carries it.

/// The comment's opening, then the thread id and [`CLOSE`].
const OPEN: &[u8] = b"/*sluice:";
const CLOSE: &[u8] = b"*/ ";

/// Whether a statement's text changes rows when it runs, by its first word: the
/// statements whose transaction a failover may have to find in the binlog.
pub fn changes_rows(text: &[u8]) -> bool {
    matches!(
        crate::classify::sql::first_word(text).as_slice(),
        b"INSERT" | b"UPDATE" | b"DELETE" | b"REPLACE"
    )
}

/// `text` as sent on the server connection `thread`: with the comment when it changes
/// rows, `None` when it goes as it is.
pub fn mark(text: &[u8], thread: u32) -> Option<Vec<u8>> {
    if !changes_rows(text) {
        return None;
    }
    let id = thread.to_string();
    let mut out = Vec::with_capacity(OPEN.len() + id.len() + CLOSE.len() + text.len());
    out.extend_from_slice(OPEN);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(CLOSE);
    out.extend_from_slice(text);
    Some(out)
}

/// The thread id an `Annotate_rows` event's statement text names, when Sluice sent it.
pub fn thread_named(annotation: &[u8]) -> Option<u32> {
    let rest = annotation.strip_prefix(OPEN)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 10 || !rest[digits..].starts_with(CLOSE) {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_changing_statements_name_their_connection() {
        for s in [
            "INSERT INTO t VALUES (1)",
            "update t set a = 1 where id = ?",
            "DELETE FROM t",
            "REPLACE INTO t VALUES (2)",
        ] {
            let marked = mark(s.as_bytes(), 4_000_000_123).unwrap();
            assert!(marked.ends_with(s.as_bytes()), "{s}");
            assert!(!marked.contains(&b'\n'));
            assert_eq!(thread_named(&marked), Some(4_000_000_123), "{s}");
        }
        for s in [
            "SELECT 1",
            "BEGIN",
            "COMMIT",
            "CREATE TABLE t (a int)",
            "/* x */ INSERT",
        ] {
            assert_eq!(mark(s.as_bytes(), 7), None, "{s}");
        }
    }

    #[test]
    fn only_the_leading_comment_counts() {
        for s in [
            "INSERT INTO t VALUES (1)",
            "/*sluice:*/ INSERT",
            "/*sluice:12 */ INSERT",
            "/*sluice:99999999999*/ INSERT",
            " /*sluice:12*/ INSERT",
            "INSERT /*sluice:12*/ INTO t VALUES (1)",
        ] {
            assert_eq!(thread_named(s.as_bytes()), None, "{s}");
        }
        assert_eq!(
            thread_named(b"/*sluice:12*/ INSERT /*sluice:13*/"),
            Some(12)
        );
    }
}
