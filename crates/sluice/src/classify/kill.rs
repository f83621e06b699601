//! `KILL` in every form the server accepts. Connection ids a client knows are Sluice's,
//! so a KILL is never forwarded as written: the server would act on its own thread with
//! that number, whoever holds it. One lexer pass, taken only when the text contains the
//! word at all.

use super::sql::{code_token, Kind, Lexer, Tok};

/// What a `KILL [HARD|SOFT] [CONNECTION|QUERY [ID]] ...` statement asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// `KILL QUERY`: stop the statement, keep the connection.
    pub query_only: bool,
    pub target: KillTarget,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillTarget {
    /// A connection id: Sluice's session id.
    Session(u64),
    /// `USER name[@host]`: every session of that account.
    User { name: String, host: Option<String> },
    /// `USER CURRENT_USER[()]`: the killer's own account.
    CurrentUser,
    /// `QUERY ID n`: the server's query id (what `information_schema.PROCESSLIST` shows).
    QueryId(u64),
}

/// Where a KILL appears in a statement text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillScan {
    /// No KILL statement anywhere.
    None,
    /// The text is exactly one KILL that Sluice can carry out.
    Alone(Kill),
    /// KILLs by id opening a multi-statement, each with the offset of the `;` that ends
    /// it: the statements after the last one are the server's to run.
    Leading(Vec<(Kill, usize)>),
    /// `PREPARE name FROM 'KILL ...'`: `text` is the byte range of the string literal.
    Prepare {
        name: String,
        kill: Kill,
        text: std::ops::Range<usize>,
    },
    /// `EXECUTE IMMEDIATE 'KILL ...'`.
    Immediate(Kill),
    /// A KILL Sluice cannot carry out as the server would (after another statement of a
    /// multi-statement, `KILL USER` in one, dynamic SQL it can't read, or an id that is
    /// an expression): refused, never sent.
    Unsupported(&'static str),
}

/// Whether `sql` may contain the keyword KILL: a byte scan, so ordinary statements pay
/// nothing more.
pub fn may_kill(sql: &[u8]) -> bool {
    // The rare 'k' is looked for first, with a vectorised search.
    memchr::memchr2_iter(b'k', b'K', sql).any(|i| {
        sql.get(i + 1..i + 4)
            .is_some_and(|r| r.eq_ignore_ascii_case(b"ill"))
    })
}

/// A text's statements as code tokens, each with the offset where it ends (its `;`, or
/// the end of the text); empty statements left out.
fn statements(sql: &[u8]) -> Vec<(Vec<Tok>, usize)> {
    let mut lex = Lexer::new(sql);
    let mut statements: Vec<(Vec<Tok>, usize)> = vec![(Vec::new(), sql.len())];
    while let Some(t) = code_token(&mut lex) {
        let last = statements.last_mut().expect("never empty");
        if t.kind == Kind::Punct(b';') {
            last.1 = t.start;
            statements.push((Vec::new(), sql.len()));
        } else {
            last.0.push(t);
        }
    }
    statements.retain(|(s, _)| !s.is_empty());
    statements
}

/// Finds KILL statements in a COM_QUERY text (or a prepared statement's text).
pub fn scan(sql: &[u8]) -> KillScan {
    if !may_kill(sql) {
        return KillScan::None;
    }
    let statements = statements(sql);
    let mut leading = Vec::new();
    let mut other_before = false;
    for (toks, end) in &statements {
        if word(sql, toks.first(), b"KILL") {
            if other_before {
                return KillScan::Unsupported("KILL after another statement of a multi-statement");
            }
            match parse(sql, &toks[1..]) {
                Some(k) => leading.push((k, *end)),
                None => return KillScan::Unsupported("KILL with an id that is not a number"),
            }
            continue;
        }
        other_before = true;
        match dynamic(sql, toks) {
            KillScan::None => {}
            _ if statements.len() > 1 => {
                return KillScan::Unsupported("KILL through dynamic SQL in a multi-statement")
            }
            found => return found,
        }
    }
    match leading.len() {
        0 => KillScan::None,
        _ if statements.len() == 1 => KillScan::Alone(leading.remove(0).0),
        // Its OK carries a count of sessions, which nothing sent in its place can give.
        _ if leading.iter().any(|(k, _)| {
            matches!(k.target, KillTarget::User { .. } | KillTarget::CurrentUser)
        }) =>
        {
            KillScan::Unsupported("KILL USER in a multi-statement")
        }
        _ => KillScan::Leading(leading),
    }
}

/// `PREPARE s FROM '...KILL...'` or `EXECUTE IMMEDIATE '...KILL...'`: the string is a
/// statement the server would run with its own thread numbers. Only the plain forms
/// with one KILL as their string are carried out.
fn dynamic(sql: &[u8], toks: &[Tok]) -> KillScan {
    let prepare =
        word(sql, toks.first(), b"PREPARE") && toks.iter().any(|t| word(sql, Some(t), b"FROM"));
    let immediate = word(sql, toks.first(), b"EXECUTE") && word(sql, toks.get(1), b"IMMEDIATE");
    if !prepare && !immediate {
        return KillScan::None;
    }
    let inner = |t: &Tok| match t.kind {
        Kind::Str(_) if t.end > t.start + 1 => scan(&sql[t.start + 1..t.end - 1]),
        _ => KillScan::None,
    };
    let Some(string) = toks.iter().find(|t| inner(t) != KillScan::None) else {
        return KillScan::None;
    };
    let plain = match prepare {
        true => toks.len() == 4 && word(sql, toks.get(2), b"FROM"),
        false => toks.len() == 3,
    };
    match inner(string) {
        KillScan::Alone(kill) if plain && prepare => match name_text(sql, &toks[1]) {
            Some(name) => KillScan::Prepare {
                name: name.to_ascii_lowercase(),
                kill,
                text: string.start..string.end,
            },
            None => KillScan::Unsupported("KILL through dynamic SQL"),
        },
        KillScan::Alone(kill) if plain => KillScan::Immediate(kill),
        _ => KillScan::Unsupported("KILL through dynamic SQL"),
    }
}

/// What a statement does with an SQL prepared statement's name, for the names Sluice
/// knows hold a KILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameUse {
    /// `EXECUTE name [USING ...]`.
    Execute { name: String, using: bool },
    /// `DEALLOCATE PREPARE name`, `DROP PREPARE name`, or `PREPARE name FROM ...`
    /// (which replaces it, even when the new text fails to prepare).
    Forget(String),
}

/// The prepared statement names a text's statements execute or forget, and how many
/// statements it holds.
pub fn name_uses(sql: &[u8]) -> (usize, Vec<NameUse>) {
    let statements = statements(sql);
    let uses = statements
        .iter()
        .filter_map(|(toks, _)| {
            let first = toks.first();
            let (name, execute) = if word(sql, first, b"EXECUTE") {
                (toks.get(1), true)
            } else if word(sql, first, b"PREPARE") {
                (toks.get(1), false)
            } else if (word(sql, first, b"DEALLOCATE") || word(sql, first, b"DROP"))
                && word(sql, toks.get(1), b"PREPARE")
            {
                (toks.get(2), false)
            } else {
                return None;
            };
            let name = name_text(sql, name?)?.to_ascii_lowercase();
            Some(match execute {
                true => NameUse::Execute {
                    name,
                    using: toks.len() > 2,
                },
                false => NameUse::Forget(name),
            })
        })
        .collect();
    (statements.len(), uses)
}

/// The words after KILL. `None`: a form whose id Sluice cannot know without evaluating
/// an expression.
fn parse(sql: &[u8], toks: &[Tok]) -> Option<Kill> {
    let mut i = 0;
    if word(sql, toks.get(i), b"HARD") || word(sql, toks.get(i), b"SOFT") {
        i += 1;
    }
    let mut query_only = false;
    if word(sql, toks.get(i), b"CONNECTION") {
        i += 1;
    } else if word(sql, toks.get(i), b"QUERY") {
        query_only = true;
        i += 1;
        if word(sql, toks.get(i), b"ID") {
            let id = number(sql, toks.get(i + 1))?;
            return (toks.len() == i + 2).then_some(Kill {
                query_only,
                target: KillTarget::QueryId(id),
            });
        }
    }
    if word(sql, toks.get(i), b"USER") {
        let rest = &toks[i + 1..];
        let call = rest.len() == 3
            && rest[1].kind == Kind::Punct(b'(')
            && rest[2].kind == Kind::Punct(b')');
        if word(sql, rest.first(), b"CURRENT_USER") && (rest.len() == 1 || call) {
            return Some(Kill {
                query_only,
                target: KillTarget::CurrentUser,
            });
        }
        let (name, host) = account(sql, &toks[i + 1..])?;
        return Some(Kill {
            query_only,
            target: KillTarget::User { name, host },
        });
    }
    let id = number(sql, toks.get(i))?;
    (toks.len() == i + 1).then_some(Kill {
        query_only,
        target: KillTarget::Session(id),
    })
}

/// `name`, `'name'@'host'`, `` `name`@host ``...; `CURRENT_USER[()]` is not handled here.
fn account(sql: &[u8], toks: &[Tok]) -> Option<(String, Option<String>)> {
    let name = name_text(sql, toks.first()?)?;
    match toks.get(1) {
        None => Some((name, None)),
        // `u@h` lexes as a name and a user variable.
        Some(t) if t.kind == Kind::UserVar && toks.len() == 2 => {
            let host = unquote(&sql[t.start + 1..t.end]);
            Some((name, Some(host)))
        }
        Some(t) if t.kind == Kind::Punct(b'@') && toks.len() == 3 => {
            Some((name, Some(name_text(sql, &toks[2])?)))
        }
        _ => None,
    }
}

fn name_text(sql: &[u8], t: &Tok) -> Option<String> {
    match t.kind {
        Kind::Word | Kind::Quoted | Kind::Str(_) => Some(unquote(&sql[t.start..t.end])),
        _ => None,
    }
}

fn unquote(raw: &[u8]) -> String {
    let inner = match raw.first() {
        Some(q @ (b'`' | b'\'' | b'"')) if raw.len() >= 2 && raw.last() == Some(q) => {
            &raw[1..raw.len() - 1]
        }
        _ => raw,
    };
    String::from_utf8_lossy(inner).into_owned()
}

fn number(sql: &[u8], t: Option<&Tok>) -> Option<u64> {
    let t = t.filter(|t| t.kind == Kind::Number)?;
    std::str::from_utf8(&sql[t.start..t.end]).ok()?.parse().ok()
}

fn word(sql: &[u8], t: Option<&Tok>, kw: &[u8]) -> bool {
    t.is_some_and(|t| t.kind == Kind::Word && sql[t.start..t.end].eq_ignore_ascii_case(kw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alone(sql: &str) -> Kill {
        match scan(sql.as_bytes()) {
            KillScan::Alone(k) => k,
            other => panic!("{sql}: {other:?}"),
        }
    }

    fn session(id: u64, query_only: bool) -> Kill {
        Kill {
            query_only,
            target: KillTarget::Session(id),
        }
    }

    #[test]
    fn every_form_of_kill_by_id() {
        assert_eq!(alone("KILL 12"), session(12, false));
        assert_eq!(alone("  kill query 7 ;"), session(7, true));
        assert_eq!(alone("Kill Connection 3"), session(3, false));
        assert_eq!(alone("KILL HARD 4"), session(4, false));
        assert_eq!(alone("KILL SOFT QUERY 5"), session(5, true));
        assert_eq!(alone("/* tag */ KILL 6"), session(6, false));
        assert_eq!(alone("KILL /* x */ CONNECTION -- y\n 8"), session(8, false));
        assert_eq!(alone("/*!KILL 9*/"), session(9, false));
        assert_eq!(
            alone("KILL QUERY ID 77"),
            Kill {
                query_only: true,
                target: KillTarget::QueryId(77)
            }
        );
    }

    #[test]
    fn kill_user_forms() {
        let user = |name: &str, host: Option<&str>| KillTarget::User {
            name: name.into(),
            host: host.map(Into::into),
        };
        assert_eq!(alone("KILL USER app").target, user("app", None));
        assert_eq!(alone("KILL USER 'app'@'%'").target, user("app", Some("%")));
        assert_eq!(
            alone("KILL USER app@localhost").target,
            user("app", Some("localhost"))
        );
        assert_eq!(
            alone("KILL USER current_user()").target,
            KillTarget::CurrentUser
        );
        assert_eq!(
            alone("KILL QUERY USER CURRENT_USER").target,
            KillTarget::CurrentUser
        );
    }

    #[test]
    fn kills_that_are_refused_not_forwarded() {
        for sql in [
            "SELECT 1; KILL 5",
            "KILL 5; SELECT 1; KILL 6",
            "KILL USER app; SELECT 1",
            "KILL 5; KILL @id",
            "KILL @id",
            "KILL 5+1",
            "KILL ?",
            "PREPARE s FROM 'KILL ?'",
            "PREPARE s FROM 'KILL 5; SELECT 1'",
            "PREPARE s FROM 'KILL 5'; SELECT 1",
            "EXECUTE IMMEDIATE 'KILL 5' USING 1",
            "EXECUTE IMMEDIATE CONCAT('KILL ', 5)",
        ] {
            assert!(
                matches!(scan(sql.as_bytes()), KillScan::Unsupported(_)),
                "{sql}"
            );
        }
    }

    #[test]
    fn kills_opening_a_multi_statement() {
        let sql = "KILL 5; /* c */ kill query 6 ;SELECT 1; SELECT 2";
        let KillScan::Leading(kills) = scan(sql.as_bytes()) else {
            panic!("{sql}");
        };
        assert_eq!(kills.len(), 2);
        assert_eq!(kills[0], (session(5, false), 6));
        assert_eq!(kills[1], (session(6, true), 29));
        assert_eq!(&sql[kills[1].1..], ";SELECT 1; SELECT 2");
        // A trailing `;` alone makes no second statement.
        assert_eq!(scan(b"KILL 5;"), KillScan::Alone(session(5, false)));
    }

    #[test]
    fn kills_through_dynamic_sql() {
        let sql = "PREPARE `Kq` FROM 'KILL QUERY 5'";
        assert_eq!(
            scan(sql.as_bytes()),
            KillScan::Prepare {
                name: "kq".into(),
                kill: session(5, true),
                text: 18..32,
            }
        );
        assert_eq!(&sql[18..32], "'KILL QUERY 5'");
        assert_eq!(
            scan(b"EXECUTE IMMEDIATE \"KILL 7\""),
            KillScan::Immediate(session(7, false))
        );
    }

    #[test]
    fn names_of_prepared_statements() {
        let (n, uses) =
            name_uses(b"EXECUTE s; execute `T` USING @a; DEALLOCATE PREPARE u; DROP PREPARE v; PREPARE w FROM @x; SELECT 1");
        assert_eq!(n, 6);
        assert_eq!(
            uses,
            [
                NameUse::Execute {
                    name: "s".into(),
                    using: false
                },
                NameUse::Execute {
                    name: "t".into(),
                    using: true
                },
                NameUse::Forget("u".into()),
                NameUse::Forget("v".into()),
                NameUse::Forget("w".into()),
            ]
        );
        // Bad input gets no answer rather than a panic.
        for sql in ["EXECUTE", "DROP PREPARE", "PREPARE", ";;", ""] {
            let _ = name_uses(sql.as_bytes());
        }
    }

    #[test]
    fn not_kills() {
        for sql in [
            "SELECT 'KILL 1'",
            "SELECT skill FROM t",
            "UPDATE t SET killed = 1",
            "SELECT 1; SELECT 2",
            "PREPARE s FROM 'SELECT 1'",
        ] {
            assert_eq!(scan(sql.as_bytes()), KillScan::None, "{sql}");
        }
    }
}
