use super::*;

#[test]
fn a_log_past_its_bound_or_with_an_unknown_answer_is_refused() {
    let mut log = ReplayLog::default();
    log.add(b"\x05\0\0\0\x03BEGIN", Some(1), None, 1 << 20);
    assert!(log.usable());
    log.add(&vec![b'x'; 1 << 20], Some(2), None, 1 << 20);
    assert!(!log.usable());
    assert_eq!(log.refused, Some("too_large"));
    log.clear();
    log.add(b"\x05\0\0\0\x03BEGIN", None, None, 1 << 20);
    assert!(!log.usable());
    log.clear();
    assert!(log.refused.is_none() && log.entries.is_empty());
}

#[test]
fn what_opens_a_transaction_is_told_without_the_lexer() {
    for s in ["BEGIN", " begin work", "START TRANSACTION", "begin;"] {
        assert!(opens_transaction(s.as_bytes()), "{s}");
    }
    // Behind a comment it is not seen: the transaction is then not replayed.
    for s in [
        "BEGINNING",
        "SELECT 1",
        "STARTS",
        "",
        "/* x */ BEGIN",
        "-- BEGIN\nSELECT 1",
    ] {
        assert!(!opens_transaction(s.as_bytes()), "{s}");
    }
}

#[test]
fn only_a_plain_commit_or_rollback_is_sent_again() {
    for s in ["COMMIT", "commit work;", " ROLLBACK ", "rollback\nWORK"] {
        assert!(plain_end(s.as_bytes()), "{s}");
    }
    for s in [
        "COMMIT AND CHAIN",
        "COMMIT RELEASE",
        "ROLLBACK TO SAVEPOINT a",
        "ROLLBACK TO a",
        "COMMITS",
        "BEGIN",
    ] {
        assert!(!plain_end(s.as_bytes()), "{s}");
    }
}

#[test]
fn only_plain_statements_replay() {
    for s in [
        "SELECT 1",
        " insert into t values (1)",
        "BEGIN",
        "start transaction",
    ] {
        assert!(replayable_text(s.as_bytes()), "{s}");
    }
    for s in [
        "SET @a = 1",
        "LOCK TABLES t WRITE",
        "CREATE TEMPORARY TABLE t (a int)",
        "USE db",
        "COMMIT",
    ] {
        assert!(!replayable_text(s.as_bytes()), "{s}");
    }
}
