//! What a statement does to session state that cannot move to another backend
//! connection: temporary tables, locks, user variables, cursors of SQL-level prepared
//! statements... A multiplexed session stays on its connection while it holds any.
//! System variables and the schema are not here: the server's session tracking reports
//! them exactly.
//!
//! Runs on every statement of a multiplexed session, so ordinary statements are let
//! through after a byte scan, and the rest take one pass of the SQL lexer.

use super::sql::{code_token, ident_text, Kind, Lexer, Tok};

/// What a statement does to session state that cannot move to another connection.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Effects {
    /// `CREATE [OR REPLACE] TEMPORARY TABLE [IF NOT EXISTS] name`: names, lowercased,
    /// schema qualifier dropped.
    pub temp_created: Vec<String>,
    /// `DROP [TEMPORARY] TABLE [IF EXISTS] a, b`: names, lowercased, qualifier dropped.
    pub tables_dropped: Vec<String>,
    pub get_lock: bool,
    pub release_lock: bool,
    pub release_all_locks: bool,
    /// `LOCK TABLE(S)`, `FLUSH TABLES ... WITH READ LOCK | FOR EXPORT`: Some(true);
    /// `UNLOCK TABLE(S)`: Some(false).
    pub table_locks: Option<bool>,
    pub calc_found_rows: bool,
    /// `XA START|BEGIN`: Some(true); `XA COMMIT|ROLLBACK`: Some(false).
    pub xa: Option<bool>,
    /// `BACKUP STAGE START|FLUSH|BLOCK_DDL|BLOCK_COMMIT`, `BACKUP LOCK t`: Some(true);
    /// `BACKUP STAGE END`, `BACKUP UNLOCK`: Some(false). Held by the connection until
    /// then (or its reset).
    pub backup: Option<bool>,
    /// `HANDLER t OPEN [AS a]` (the alias, else the table) / `HANDLER x CLOSE`.
    pub handler_opened: Vec<String>,
    pub handler_closed: Vec<String>,
    /// `PREPARE s FROM ...` / `DEALLOCATE | DROP PREPARE s`.
    pub sql_prepared: Vec<String>,
    pub sql_deallocated: Vec<String>,
    /// `SET TRANSACTION ...` without GLOBAL or SESSION: for the next transaction only.
    pub next_transaction: bool,
    /// User variables the statement may assign (`SET @a`, `@a :=`, `INTO @a`, `@a` as an
    /// argument of CALL), lowercased, deduplicated.
    pub user_vars_assigned: Vec<String>,
    /// Any `@name` appears.
    pub reads_user_vars: bool,
    pub last_insert_id: bool,
    pub row_count: bool,
    pub found_rows: bool,
    /// A `session_track_*` variable is set or read: the proxy relies on tracking, and
    /// the client must see its own settings.
    pub touches_session_tracking: bool,
    /// The last statement is `SAVEPOINT name`: under `autocommit = 0` it lives in a
    /// transaction the server does not report until a table is touched.
    pub savepoint: bool,
    /// The last statement is a `COMMIT` or `ROLLBACK` that leaves no transaction open
    /// (not `ROLLBACK TO`, not `AND CHAIN`).
    pub ends_transaction: bool,
}

impl Effects {
    /// What of these an execute of the same text does to the connection's locks and
    /// tables. Variables an execute sets or reads are learnt from the server's state
    /// report instead (it pins), as the text-side handling of them is for COM_QUERY.
    pub fn locks_only(self) -> Effects {
        Effects {
            temp_created: self.temp_created,
            tables_dropped: self.tables_dropped,
            get_lock: self.get_lock,
            release_lock: self.release_lock,
            release_all_locks: self.release_all_locks,
            table_locks: self.table_locks,
            calc_found_rows: self.calc_found_rows,
            xa: self.xa,
            backup: self.backup,
            handler_opened: self.handler_opened,
            handler_closed: self.handler_closed,
            next_transaction: self.next_transaction,
            savepoint: self.savepoint,
            ends_transaction: self.ends_transaction,
            ..Effects::default()
        }
    }

    /// Nothing that concerns the proxy (the common case).
    pub fn is_none(&self) -> bool {
        *self == Effects::default()
    }
}

/// Statement-leading keywords that may have effects of their own.
const LEADING: [&[u8]; 15] = [
    b"SAVEPOINT",
    b"COMMIT",
    b"ROLLBACK",
    b"BACKUP",
    b"CREATE",
    b"DROP",
    b"LOCK",
    b"UNLOCK",
    b"FLUSH",
    b"XA",
    b"HANDLER",
    b"PREPARE",
    b"DEALLOCATE",
    b"SET",
    b"CALL",
];

/// The effects of every statement in `sql`.
pub fn effects(sql: &[u8]) -> Effects {
    if plain(sql) {
        return Effects::default();
    }
    scan(sql)
}

/// Every statement of `sql`, token by token.
fn scan(sql: &[u8]) -> Effects {
    let mut fx = Effects::default();
    let mut lex = Lexer::new(sql);
    let mut stmt: Vec<Tok> = Vec::with_capacity(32);
    loop {
        let t = code_token(&mut lex);
        match t {
            Some(t) if t.kind != Kind::Punct(b';') => stmt.push(t),
            _ => {
                statement(sql, &stmt, &mut fx);
                stmt.clear();
                if t.is_none() {
                    break;
                }
            }
        }
    }
    fx.user_vars_assigned.sort();
    fx.user_vars_assigned.dedup();
    fx
}

/// No `@`, no `;`, no word of interest (each has a `_`: the functions,
/// `SQL_CALC_FOUND_ROWS`, `session_track_*`), and a first word that can't have effects
/// of its own: nothing to look for.
fn plain(sql: &[u8]) -> bool {
    if memchr::memchr2(b'@', b';', sql).is_some() || names_word_of_interest(sql) {
        return false;
    }
    let start = sql
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(sql.len());
    let rest = &sql[start..];
    if !rest.first().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let end = rest
        .iter()
        .position(|b| !b.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    let first = &rest[..end];
    !LEADING.iter().any(|k| first.eq_ignore_ascii_case(k))
}

/// Words [`scan`] acts on, by a part that holds a `_` (`RELEASE_` stands for
/// `RELEASE_LOCK` and `RELEASE_ALL_LOCKS`, `FOUND_ROWS` for `SQL_CALC_FOUND_ROWS` too),
/// with where that `_` is in them.
const OF_INTEREST: [(&[u8], usize); 6] = [
    (b"GET_LOCK", 3),
    (b"RELEASE_", 7),
    (b"LAST_INSERT_ID", 4),
    (b"ROW_COUNT", 3),
    (b"FOUND_ROWS", 5),
    (b"SESSION_TRACK", 7),
];

/// Whether one of [`OF_INTEREST`] is anywhere in the text (in a name, a string, a
/// comment: found where the lexer would not look is only a scan for nothing). Found
/// from each `_`, so that the names of an application's columns (`user_id`) do not
/// cost a scan of the whole text.
fn names_word_of_interest(sql: &[u8]) -> bool {
    memchr::memchr_iter(b'_', sql).any(|i| {
        OF_INTEREST.iter().any(|&(word, at)| {
            i >= at
                && sql
                    .get(i - at..i - at + word.len())
                    .is_some_and(|w| w.eq_ignore_ascii_case(word))
        })
    })
}

fn word(sql: &[u8], t: Option<&Tok>, kw: &[u8]) -> bool {
    t.is_some_and(|t| t.kind == Kind::Word && sql[t.start..t.end].eq_ignore_ascii_case(kw))
}

fn punct(t: Option<&Tok>, b: u8) -> bool {
    t.is_some_and(|t| t.kind == Kind::Punct(b))
}

fn is_name(t: &Tok) -> bool {
    matches!(t.kind, Kind::Word | Kind::Quoted)
}

/// The name at `toks[i]`, qualifier dropped (`db.t` gives `t`); and the index after it.
fn name_at(sql: &[u8], toks: &[Tok], i: usize) -> Option<(String, usize)> {
    let t = toks.get(i).filter(|t| is_name(t))?;
    if punct(toks.get(i + 1), b'.') {
        if let Some(n) = toks.get(i + 2).filter(|t| is_name(t)) {
            return Some((ident_text(sql, *n), i + 3));
        }
    }
    Some((ident_text(sql, *t), i + 1))
}

/// A user variable's name without the `@`, lowercased (quoted forms unquoted).
fn user_var(sql: &[u8], t: &Tok) -> String {
    let raw = &sql[t.start + 1..t.end];
    let inner = match raw.first() {
        Some(q @ (b'`' | b'\'' | b'"')) => raw[1..].strip_suffix(&[*q]).unwrap_or(&raw[1..]),
        _ => raw,
    };
    String::from_utf8_lossy(inner).to_ascii_lowercase()
}

/// The effects of one statement: how it ends a transaction, what its leading form
/// does, and what its words do wherever they are.
fn statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    if toks.is_empty() {
        return;
    }
    transaction_end(sql, toks, fx);
    leading_form(sql, toks, fx);
    anywhere(sql, toks, fx);
}

/// Whether the statement is a `SAVEPOINT`, and whether it ends the transaction.
fn transaction_end(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    let has = |k: &[u8]| toks.iter().any(|t| word(sql, Some(t), k));
    fx.savepoint = kw(0, b"SAVEPOINT");
    // `AND NO CHAIN` ends the transaction; `AND CHAIN` opens the next one at once.
    let chains = toks
        .windows(2)
        .any(|w| word(sql, Some(&w[0]), b"AND") && word(sql, Some(&w[1]), b"CHAIN"));
    fx.ends_transaction = (kw(0, b"COMMIT") || kw(0, b"ROLLBACK")) && !has(b"TO") && !chains;
}

/// What the statement's leading keywords make it do: temporary tables, table and
/// backup locks, XA, handlers, SQL-level prepared statements, SET and CALL.
fn leading_form(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    if kw(0, b"CREATE") {
        create_statement(sql, toks, fx);
    } else if kw(0, b"DROP") {
        drop_statement(sql, toks, fx);
    } else if kw(0, b"LOCK") && (kw(1, b"TABLE") || kw(1, b"TABLES")) {
        fx.table_locks = Some(true);
    } else if kw(0, b"UNLOCK") && (kw(1, b"TABLE") || kw(1, b"TABLES")) {
        fx.table_locks = Some(false);
    } else if kw(0, b"FLUSH") {
        flush_statement(sql, toks, fx);
    } else if kw(0, b"BACKUP") {
        backup_statement(sql, toks, fx);
    } else if kw(0, b"XA") {
        xa_statement(sql, toks, fx);
    } else if kw(0, b"HANDLER") {
        handler_statement(sql, toks, fx);
    } else if kw(0, b"PREPARE") {
        if let Some((n, _)) = name_at(sql, toks, 1) {
            fx.sql_prepared.push(n);
        }
    } else if kw(0, b"DEALLOCATE") && kw(1, b"PREPARE") {
        if let Some((n, _)) = name_at(sql, toks, 2) {
            fx.sql_deallocated.push(n);
        }
    } else if kw(0, b"SET") {
        set_statement(sql, toks, fx);
    } else if kw(0, b"CALL") {
        // OUT and INOUT parameters write the variables given for them.
        for t in toks.iter().filter(|t| t.kind == Kind::UserVar) {
            fx.user_vars_assigned.push(user_var(sql, t));
        }
    }
}

/// `CREATE [OR REPLACE] TEMPORARY TABLE [IF NOT EXISTS] name`.
fn create_statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    let mut i = 1;
    if kw(i, b"OR") && kw(i + 1, b"REPLACE") {
        i += 2;
    }
    if kw(i, b"TEMPORARY") && kw(i + 1, b"TABLE") {
        i += 2;
        if kw(i, b"IF") && kw(i + 1, b"NOT") && kw(i + 2, b"EXISTS") {
            i += 3;
        }
        if let Some((n, _)) = name_at(sql, toks, i) {
            fx.temp_created.push(n);
        }
    }
}

/// `DROP [TEMPORARY] TABLE[S] [IF EXISTS] a, b` and `DROP PREPARE s`.
fn drop_statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    let mut i = 1;
    if kw(i, b"TEMPORARY") {
        i += 1;
    }
    if kw(i, b"TABLE") || kw(i, b"TABLES") {
        i += 1;
        if kw(i, b"IF") && kw(i + 1, b"EXISTS") {
            i += 2;
        }
        while let Some((n, next)) = name_at(sql, toks, i) {
            fx.tables_dropped.push(n);
            if !punct(toks.get(next), b',') {
                break;
            }
            i = next + 1;
        }
    } else if kw(1, b"PREPARE") {
        if let Some((n, _)) = name_at(sql, toks, 2) {
            fx.sql_deallocated.push(n);
        }
    }
}

/// `FLUSH TABLES ... WITH READ LOCK | FOR EXPORT` locks tables.
fn flush_statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let tail: Vec<&Tok> = toks.iter().rev().take(3).collect();
    let (a, b, c) = (
        tail.get(2).copied(),
        tail.get(1).copied(),
        tail.first().copied(),
    );
    let read_lock = word(sql, a, b"WITH") && word(sql, b, b"READ") && word(sql, c, b"LOCK");
    let export = word(sql, b, b"FOR") && word(sql, c, b"EXPORT");
    if read_lock || export {
        fx.table_locks = Some(true);
    }
}

/// `BACKUP STAGE ...`, `BACKUP LOCK t`, `BACKUP UNLOCK`.
fn backup_statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    if kw(1, b"STAGE") {
        fx.backup = Some(!kw(2, b"END"));
    } else if kw(1, b"LOCK") {
        fx.backup = Some(true);
    } else if kw(1, b"UNLOCK") {
        fx.backup = Some(false);
    }
}

/// `XA START|BEGIN` opens an XA transaction, `XA COMMIT|ROLLBACK` ends it.
fn xa_statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    if kw(1, b"START") || kw(1, b"BEGIN") {
        fx.xa = Some(true);
    } else if kw(1, b"COMMIT") || kw(1, b"ROLLBACK") {
        fx.xa = Some(false);
    }
}

/// `HANDLER t OPEN [AS a]` (the alias, else the table) and `HANDLER x CLOSE`.
fn handler_statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    let Some((table, i)) = name_at(sql, toks, 1) else {
        return;
    };
    if kw(i, b"OPEN") {
        let alias = if kw(i + 1, b"AS") { i + 2 } else { i + 1 };
        match toks.get(alias).filter(|t| is_name(t)) {
            Some(a) => fx.handler_opened.push(ident_text(sql, *a)),
            None => fx.handler_opened.push(table),
        }
    } else if kw(i, b"CLOSE") {
        fx.handler_closed.push(table);
    }
}

/// What words do anywhere in the statement: functions, `SQL_CALC_FOUND_ROWS`,
/// assignments and `INTO @var`, mentions of session tracking.
fn anywhere(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let mut into = false;
    for (i, t) in toks.iter().enumerate() {
        match t.kind {
            Kind::Word => {
                let w = &sql[t.start..t.end];
                if w.eq_ignore_ascii_case(b"SQL_CALC_FOUND_ROWS") {
                    fx.calc_found_rows = true;
                } else if w.eq_ignore_ascii_case(b"INTO") {
                    into = true;
                    continue;
                } else if punct(toks.get(i + 1), b'(') {
                    function_call(w, fx);
                }
                into = false;
            }
            Kind::UserVar => {
                fx.reads_user_vars = true;
                let assigned =
                    into || (punct(toks.get(i + 1), b':') && punct(toks.get(i + 2), b'='));
                if assigned {
                    fx.user_vars_assigned.push(user_var(sql, t));
                }
                // `INTO @a, @b` goes on over commas.
                if !(into && punct(toks.get(i + 1), b',')) {
                    into = false;
                }
            }
            Kind::Punct(b',') => {}
            // Read anywhere (`SELECT @@session_track_...`, `SHOW VARIABLES LIKE
            // 'session_track%'`): the statement must see the client's own values.
            Kind::SysVar if sysvar_name(sql, t).starts_with("session_track_") => {
                fx.touches_session_tracking = true;
                into = false;
            }
            Kind::Str(_)
                if sql[t.start..t.end]
                    .windows(13)
                    .any(|w| w.eq_ignore_ascii_case(b"session_track")) =>
            {
                fx.touches_session_tracking = true;
                into = false;
            }
            _ => into = false,
        }
    }
}

/// A call of function `name`: the locks it takes or frees, the figures of the last
/// statement it reads.
fn function_call(name: &[u8], fx: &mut Effects) {
    let is = |f: &[u8]| name.eq_ignore_ascii_case(f);
    if is(b"GET_LOCK") {
        fx.get_lock = true;
    } else if is(b"RELEASE_LOCK") {
        fx.release_lock = true;
    } else if is(b"RELEASE_ALL_LOCKS") {
        fx.release_all_locks = true;
    } else if is(b"LAST_INSERT_ID") {
        fx.last_insert_id = true;
    } else if is(b"ROW_COUNT") {
        fx.row_count = true;
    } else if is(b"FOUND_ROWS") {
        fx.found_rows = true;
    }
}

/// `SET [GLOBAL|SESSION|LOCAL] a = x, @b = y, ...` and `SET TRANSACTION ...`.
fn set_statement(sql: &[u8], toks: &[Tok], fx: &mut Effects) {
    let kw = |i: usize, k: &[u8]| word(sql, toks.get(i), k);
    if kw(1, b"TRANSACTION") {
        fx.next_transaction = true;
        return;
    }
    // Each assignment starts after SET or after a comma at parenthesis depth 0.
    let mut depth = 0i32;
    let mut start = true;
    for (i, t) in toks.iter().enumerate().skip(1) {
        match t.kind {
            Kind::Punct(b'(') => depth += 1,
            Kind::Punct(b')') => depth -= 1,
            Kind::Punct(b',') if depth == 0 => {
                start = true;
                continue;
            }
            _ => {}
        }
        if !start {
            continue;
        }
        start = false;
        match t.kind {
            Kind::UserVar => fx.user_vars_assigned.push(user_var(sql, t)),
            Kind::SysVar if sysvar_name(sql, t).starts_with("session_track_") => {
                fx.touches_session_tracking = true;
            }
            Kind::Word => {
                let mut j = i;
                let w = &sql[t.start..t.end];
                if ["GLOBAL", "SESSION", "LOCAL"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k.as_bytes()))
                {
                    j += 1;
                }
                if let Some(n) = toks.get(j).filter(|t| is_name(t)) {
                    if ident_text(sql, *n).starts_with("session_track_") {
                        fx.touches_session_tracking = true;
                    }
                }
            }
            _ => {}
        }
    }
}

/// `@@session.name` or `@@name`, lowercased, scope dropped.
fn sysvar_name(sql: &[u8], t: &Tok) -> String {
    let raw = String::from_utf8_lossy(&sql[t.start + 2..t.end]).to_ascii_lowercase();
    match raw.rsplit_once('.') {
        Some((_, name)) => name.to_owned(),
        None => raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fx(sql: &str) -> Effects {
        effects(sql.as_bytes())
    }

    /// What the fast path calls plain, the scan finds nothing in: over statements with
    /// and without the words of interest, whole and cut at every byte.
    #[test]
    fn plain_text_has_no_effects() {
        let corpus = [
            "SELECT user_id, order_total FROM order_items WHERE user_id = 5",
            "SELECT GET_LOCK('a', 1)",
            "select release_all_locks()",
            "SELECT Release_Lock('a')",
            "SELECT LAST_INSERT_ID(), row_count(), FOUND_ROWS()",
            "SELECT SQL_CALC_FOUND_ROWS * FROM t_x LIMIT 1",
            "SHOW VARIABLES LIKE 'session_track%'",
            "SELECT t.last_insert_id2 FROM t WHERE a_b = 1",
            "SELECT .5ROW_COUNT()",
            "SELECT x /* get_lock( */ FROM t",
            "SET @a = 1",
            "CREATE TEMPORARY TABLE tmp_1 (id INT)",
            "SELECT 1; SELECT 2",
        ];
        for sql in corpus {
            let sql = sql.as_bytes();
            for end in 0..=sql.len() {
                for part in [&sql[..end], &sql[end..]] {
                    if plain(part) {
                        assert!(scan(part).is_none(), "{:?}", String::from_utf8_lossy(part));
                    }
                }
            }
        }
        assert!(plain(
            b"SELECT user_id, order_total FROM order_items WHERE user_id = 5"
        ));
        assert!(!plain(b"SELECT t.last_insert_id2 FROM t"));
        assert!(fx("SELECT get_lock('a', 1) FROM t_1").get_lock);
        assert!(fx("SELECT SQL_CALC_FOUND_ROWS a_b FROM t").calc_found_rows);
    }

    #[test]
    fn ordinary_statements_have_none() {
        for sql in [
            "SELECT c FROM sbtest1 WHERE id=5",
            "SELECT DISTINCT c FROM sbtest3 WHERE id BETWEEN 1 AND 100 ORDER BY c",
            "UPDATE sbtest1 SET k=k+1 WHERE id=5",
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES (1, 2, 'x', 'y')",
            "BEGIN",
            "SELECT user_id FROM orders WHERE order_id = 3",
            "SELECT 'GET_LOCK(' , '@x'",
            "/* LOCK TABLES */ SELECT 1",
            "SELECT get_lock_time FROM lock_tables",
            "SET sql_mode = 'ANSI'",
            "SET NAMES utf8mb4",
            "SELECT @@session.sql_mode",
        ] {
            let e = fx(sql);
            assert!(e.is_none(), "{sql}: {e:?}");
        }
    }

    #[test]
    fn savepoints_and_transaction_ends() {
        for sql in ["SAVEPOINT s1", "savepoint `a b`", "COMMIT; SAVEPOINT s2"] {
            let e = fx(sql);
            assert!(e.savepoint && !e.ends_transaction, "{sql}: {e:?}");
        }
        for sql in [
            "COMMIT",
            "commit work",
            "ROLLBACK",
            "ROLLBACK WORK AND NO CHAIN",
            "SAVEPOINT s; ROLLBACK",
        ] {
            let e = fx(sql);
            assert!(e.ends_transaction && !e.savepoint, "{sql}: {e:?}");
        }
        for sql in [
            "ROLLBACK TO SAVEPOINT s1",
            "ROLLBACK WORK TO s1",
            "RELEASE SAVEPOINT s1",
            "COMMIT AND CHAIN",
            "SELECT 1",
        ] {
            let e = fx(sql);
            assert!(!e.ends_transaction && !e.savepoint, "{sql}: {e:?}");
        }
    }

    #[test]
    fn temporary_tables_created_and_dropped() {
        assert_eq!(fx("CREATE TEMPORARY TABLE t1 (a INT)").temp_created, ["t1"]);
        assert_eq!(
            fx("create or replace temporary table if not exists db.`T 2` as select 1").temp_created,
            ["t 2"]
        );
        assert!(fx("CREATE TABLE t (a INT)").temp_created.is_empty());
        assert_eq!(
            fx("DROP TEMPORARY TABLE IF EXISTS db.t1, t2").tables_dropped,
            ["t1", "t2"]
        );
        assert_eq!(fx("drop table x").tables_dropped, ["x"]);
    }

    #[test]
    fn locks() {
        assert!(fx("SELECT GET_LOCK('a', 10)").get_lock);
        assert!(fx("DO get_lock ('a', 10)").get_lock);
        assert!(fx("SELECT RELEASE_LOCK('a')").release_lock);
        assert!(fx("SELECT RELEASE_ALL_LOCKS()").release_all_locks);
        assert_eq!(fx("LOCK TABLES t1 WRITE, t2 READ").table_locks, Some(true));
        assert_eq!(fx("lock table t read").table_locks, Some(true));
        assert_eq!(fx("UNLOCK TABLES").table_locks, Some(false));
        assert_eq!(fx("FLUSH TABLES WITH READ LOCK").table_locks, Some(true));
        assert_eq!(fx("FLUSH TABLES t FOR EXPORT").table_locks, Some(true));
        assert_eq!(fx("FLUSH TABLES").table_locks, None);
    }

    #[test]
    fn statement_scoped_state() {
        assert!(fx("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1").calc_found_rows);
        assert!(fx("SELECT FOUND_ROWS()").found_rows);
        assert!(fx("SELECT LAST_INSERT_ID()").last_insert_id);
        assert!(fx("SELECT ROW_COUNT()").row_count);
        assert_eq!(fx("XA START 'x'").xa, Some(true));
        assert_eq!(fx("XA COMMIT 'x'").xa, Some(false));
        assert_eq!(fx("XA END 'x'").xa, None);
        let h = fx("HANDLER db.t OPEN AS h");
        assert_eq!(h.handler_opened, ["h"]);
        assert_eq!(fx("HANDLER t OPEN").handler_opened, ["t"]);
        assert_eq!(fx("HANDLER h CLOSE").handler_closed, ["h"]);
        assert_eq!(fx("PREPARE s FROM 'SELECT 1'").sql_prepared, ["s"]);
        assert_eq!(fx("DEALLOCATE PREPARE s").sql_deallocated, ["s"]);
        assert_eq!(fx("DROP PREPARE s").sql_deallocated, ["s"]);
        assert!(fx("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").next_transaction);
        assert!(!fx("SET SESSION TRANSACTION READ ONLY").next_transaction);
        assert!(fx("SET session_track_schema = OFF").touches_session_tracking);
        assert!(fx("SET @@session.session_track_system_variables = ''").touches_session_tracking);
        assert!(fx("SELECT @@session_track_schema").touches_session_tracking);
        assert!(fx("SHOW VARIABLES LIKE 'session_track%'").touches_session_tracking);
        assert!(!fx("SELECT @@sql_mode").touches_session_tracking);
    }

    #[test]
    fn user_variables() {
        assert_eq!(
            fx("SET @a = 1, sql_mode = 'x', @B := 2").user_vars_assigned,
            ["a", "b"]
        );
        assert_eq!(fx("SELECT @c := 5").user_vars_assigned, ["c"]);
        assert_eq!(fx("SELECT 1, 2 INTO @d, @e").user_vars_assigned, ["d", "e"]);
        assert_eq!(fx("CALL p(@out, 3)").user_vars_assigned, ["out"]);
        assert_eq!(fx("SET @`q x` = 1").user_vars_assigned, ["q x"]);
        let read = fx("SELECT @a + 1");
        assert!(read.reads_user_vars && read.user_vars_assigned.is_empty());
    }

    #[test]
    fn every_statement_of_a_multi_statement_counts() {
        let e = fx("CREATE TEMPORARY TABLE t (a INT); SELECT GET_LOCK('x', 1); SET @v = 1");
        assert_eq!(e.temp_created, ["t"]);
        assert!(e.get_lock);
        assert_eq!(e.user_vars_assigned, ["v"]);
    }

    #[test]
    fn any_bytes_are_safe() {
        let mut seed = 7u64;
        for len in 0..400 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    b"@_;'\"`()=:, aZ.tempoRARYLOCK\\/*-#\n"[(seed >> 33) as usize % 34]
                })
                .collect();
            let _ = effects(&bytes);
        }
        for cut in 0..40 {
            let _ = effects(&b"CREATE TEMPORARY TABLE `x` (a INT); SET @`y"[..cut]);
        }
    }
}

/// Whether `sql` may change a server global (`SET GLOBAL`, `SET @@global.x`): any text
/// with the word in it, by a vectorised byte search, so ordinary statements pay little.
pub fn may_set_global(sql: &[u8]) -> bool {
    memchr::memchr2_iter(b'g', b'G', sql).any(|i| {
        sql.get(i..i + 6)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"global"))
    })
}

#[cfg(test)]
mod global_tests {
    use super::may_set_global;

    #[test]
    fn set_global_is_seen_in_every_spelling() {
        for sql in ["SET GLOBAL a = 1", "set @@global.a = 1", "SET @@GLOBAL.a=1"] {
            assert!(may_set_global(sql.as_bytes()), "{sql}");
        }
        assert!(!may_set_global(b"SET SESSION a = 1"));
        assert!(!may_set_global(b"SELECT glob FROM t"));
    }
}
