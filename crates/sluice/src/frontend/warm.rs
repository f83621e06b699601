//! Pre-population: fill the cache from a file of queries, per user and schema, as if
//! a client of that user had run them. Entries are keyed like a real session's, so the
//! wire flags come from a client of that user that has logged in: a file given at start
//! is warmed for each user when its first client logs in.
//!
//! File format: one statement per line; `#` and `--` lines are comments;
//! `@user NAME` and `@schema NAME` set who runs the lines that follow (the schema may
//! be `-` for none).

use super::session::cached::{fetch, session_key, storable, SETTINGS_PROBE};
use super::Frontend;
use crate::auth::User;
use crate::backend::{ConnParams, PoolKey, PooledConn};
use crate::cache::{self, Candidate, Fill, FillTicket, QueryCache};
use crate::classify::sql::{self, Analysis};
use sluice_wire::command::Command;
use sluice_wire::packet::write_packet;
use sluice_wire::tracker::ResponseKind;
use std::path::Path;
use std::sync::Arc;

/// Statements for one user and schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmGroup {
    pub user: String,
    pub schema: Option<String>,
    pub queries: Vec<String>,
}

/// What a warm-up did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct WarmReport {
    pub stored: u64,
    /// Not cacheable, no rule matched, or already cached.
    pub skipped: u64,
    /// Errors from the server, results that can't be stored, users without a client yet.
    pub failed: u64,
    pub problems: Vec<String>,
}

/// Reads a warm file into groups.
pub fn parse(text: &str) -> Result<Vec<WarmGroup>, String> {
    let mut groups: Vec<WarmGroup> = Vec::new();
    let mut user: Option<String> = None;
    let mut schema: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("--") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("@user") {
            user = Some(rest.trim().to_owned()).filter(|u| !u.is_empty());
            continue;
        }
        if let Some(rest) = line.strip_prefix("@schema") {
            let s = rest.trim();
            schema = (s != "-" && !s.is_empty()).then(|| s.to_owned());
            continue;
        }
        let Some(u) = &user else {
            return Err(format!(
                "line {}: a query before any `@user NAME` line",
                i + 1
            ));
        };
        let query = line.trim_end_matches(';').trim().to_owned();
        match groups.last_mut() {
            Some(g) if &g.user == u && g.schema == schema => g.queries.push(query),
            _ => groups.push(WarmGroup {
                user: u.clone(),
                schema: schema.clone(),
                queries: vec![query],
            }),
        }
    }
    Ok(groups)
}

pub fn load(path: &Path) -> Result<Vec<WarmGroup>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Warms every group whose user has had a client, with that client's wire flags.
pub async fn run(fe: &Arc<Frontend>, groups: &[WarmGroup]) -> WarmReport {
    let mut report = WarmReport::default();
    for g in groups {
        let Some(params) = fe.client_params(&g.user) else {
            report.failed += g.queries.len() as u64;
            report.problems.push(format!(
                "user {:?}: no client of this user has logged in yet, so its wire format is unknown",
                g.user
            ));
            continue;
        };
        warm_group(fe, g, params, &mut report).await;
    }
    report
}

/// Warms one group over a pooled connection of its user.
pub async fn warm_group(
    fe: &Arc<Frontend>,
    g: &WarmGroup,
    params: ConnParams,
    report: &mut WarmReport,
) {
    let Some(cache) = fe.cache.clone() else {
        return;
    };
    let Some(user) = fe.users.load().get(&g.user) else {
        return fail_group(g, report, format!("user {:?} is not configured", g.user));
    };
    let (wire, mariadb) = (params.wire_caps, params.mariadb_caps);
    let mut conn = match connect(fe, g, &user, params).await {
        Ok(conn) => conn,
        Err(problem) => return fail_group(g, report, problem),
    };
    let values = match conn.query_row(SETTINGS_PROBE).await {
        Ok(Some(v)) => v,
        other => {
            let broken = other.err().and_then(|failed| failed.answered().err());
            let problem = format!("user {:?}: settings unknown ({broken:?})", g.user);
            return fail_group(g, report, problem);
        }
    };
    let (prefix, schema) = session_key(&user.name, wire, mariadb, &values);
    if cache.views_unknown() {
        if let Ok(answer) = conn
            .query_scalar(crate::cache::QueryCache::VIEWS_QUERY)
            .await
        {
            cache.set_views(answer.as_deref());
        }
    }
    let session = WarmSession {
        user: &user.name,
        prefix: &prefix,
        schema: schema.as_deref(),
    };
    for q in &g.queries {
        if !warm_query(&cache, &mut conn, &session, q, report).await {
            return;
        }
    }
}

/// Counts every query of the group as failed, for `problem`.
fn fail_group(g: &WarmGroup, report: &mut WarmReport, problem: String) {
    report.failed += g.queries.len() as u64;
    report.problems.push(problem);
}

/// A writer connection of the group's user on the group's schema, else the problem.
async fn connect(
    fe: &Arc<Frontend>,
    g: &WarmGroup,
    user: &User,
    params: ConnParams,
) -> Result<PooledConn, String> {
    let key = PoolKey::new(user.backend.clone(), params);
    let router = fe.router.load_full();
    let schema = g.schema.as_deref().map(str::as_bytes);
    let mut conn = router
        .lease(
            &crate::router::Target::Writer,
            &[],
            &key,
            schema,
            crate::backend::on_schema(schema),
            1,
        )
        .await
        .map(|(conn, _)| conn)
        .map_err(|e| format!("user {:?}: {e}", g.user))?;
    if let Some(db) = &g.schema {
        if conn.schema.as_deref() != Some(db.as_bytes()) {
            if let Err(why) = conn.init_db(db.as_bytes()).await {
                return Err(format!("schema {db:?}: {why}"));
            }
        }
    }
    Ok(conn)
}

/// Whose session the group's statements are cached for: the user, the session part
/// of the cache key, the schema.
struct WarmSession<'a> {
    user: &'a str,
    prefix: &'a [u8],
    schema: Option<&'a str>,
}

/// Runs `q` and stores its result when a rule wants it. False when the connection
/// broke, which ends the group.
async fn warm_query(
    cache: &Arc<QueryCache>,
    conn: &mut PooledConn,
    session: &WarmSession<'_>,
    q: &str,
    report: &mut WarmReport,
) -> bool {
    let Some(ticket) = fill_ticket(cache, session, q.as_bytes()) else {
        report.skipped += 1;
        return true;
    };
    let request = query_request(q.as_bytes());
    match fetch(
        conn,
        &request,
        ResponseKind::Query,
        cache.entry_limit(),
        None,
    )
    .await
    {
        Ok(Some((response, outcome))) if storable(&outcome, conn.status) => {
            if cache.store(ticket, response) {
                report.stored += 1;
            } else {
                report.skipped += 1;
            }
        }
        Ok(_) => {
            cache.not_stored(ticket);
            report.failed += 1;
            report
                .problems
                .push(format!("{q:?}: an error, a warning or too large a result"));
        }
        Err(e) => {
            conn.mark_broken();
            report.failed += 1;
            report.problems.push(format!("{q:?}: {e}"));
            return false;
        }
    }
    true
}

/// The ticket to fill the cache with `text`'s result; none when it is not a cacheable
/// read, no rule wants it, or it is cached or being fetched already.
fn fill_ticket(
    cache: &Arc<QueryCache>,
    session: &WarmSession<'_>,
    text: &[u8],
) -> Option<FillTicket> {
    let Analysis::Read {
        tables,
        uncacheable: None,
    } = sql::analyze(text, session.schema)
    else {
        return None;
    };
    let candidate = Candidate {
        text,
        user: session.user,
        schema: session.schema,
        shape: None,
    };
    let (rule, digest) = cache.rule_for(&candidate)?;
    let key = cache::key(session.prefix, Command::Query as u8, text, &[]);
    let Fill::Leader(mut ticket) = cache.begin_fill(&key, None, rule, digest) else {
        return None;
    };
    cache.depend_on(&mut ticket, &tables, None);
    Some(ticket)
}

/// `text` as a COM_QUERY packet.
fn query_request(text: &[u8]) -> bytes::BytesMut {
    let mut request = bytes::BytesMut::with_capacity(text.len() + 5);
    let mut payload = Vec::with_capacity(text.len() + 1);
    payload.push(Command::Query as u8);
    payload.extend_from_slice(text);
    write_packet(&mut request, 0, &payload);
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_user_and_schema_lines() {
        let groups = parse(
            "# warm-up\n@user app\n@schema shop\nSELECT 1;\n-- c\nSELECT 2\n@schema -\nSELECT 3\n",
        )
        .unwrap();
        assert_eq!(
            groups,
            [
                WarmGroup {
                    user: "app".into(),
                    schema: Some("shop".into()),
                    queries: vec!["SELECT 1".into(), "SELECT 2".into()],
                },
                WarmGroup {
                    user: "app".into(),
                    schema: None,
                    queries: vec!["SELECT 3".into()],
                },
            ]
        );
        assert!(parse("SELECT 1").unwrap_err().contains("line 1"));
    }
}
