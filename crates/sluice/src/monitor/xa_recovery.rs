//! Finishing the cross-shard transactions a crash (of Sluice, or of the connection to a
//! branch's server) left prepared (`crate::shard::xa`): at start, and every [`EVERY`]
//! after, each shard's writer is asked for its prepared XA branches (`XA RECOVER`);
//! those of this Sluice instance that no commit of this process is working on are
//! committed when their coordinator shard holds the decision row, and rolled back when
//! it does not. Also creates the decision table where it is missing, and deletes
//! decisions no branch needs any more. The branches of an instance of the fleet that
//! is gone for good are finished the same way, by the one instance holding the fleet's
//! leader duty ([`Orphans`]).

use super::shard_keys::connect;
use super::BackendCredentials;
use crate::backend::BackendConn;
use crate::error::Failed;
use crate::shard::xa::{parse_any, xid, Coordinator, Prepared, CREATE_DECISIONS, DECISIONS};
use crate::shard::Shards;
use crate::shutdown::Shutdown;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

const EVERY: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(5);

/// How old a decision must be before it may be deleted: older than any commit in
/// flight (whose branches might be prepared after `XA RECOVER` was read).
const KEEP_DECISIONS: &str = "INTERVAL 10 MINUTE";

/// The instances (as their transaction ids name them) whose prepared branches this one
/// finishes too: gone from the fleet for good, while this one holds its leader duty.
pub type Orphans = Arc<dyn Fn() -> HashSet<String> + Send + Sync>;

pub fn spawn(
    shards: Arc<Shards>,
    creds: Arc<BackendCredentials>,
    orphans: Orphans,
    mut shutdown: Shutdown,
) {
    tokio::spawn(async move {
        let mut tables = vec![false; shards.routers.len()];
        loop {
            let orphans = orphans();
            tokio::select! {
                _ = recover(&shards, &creds, &orphans, &mut tables) => {}
                _ = shutdown.stopping() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(EVERY) => {}
                _ = shutdown.stopping() => return,
            }
        }
    });
}

async fn run(conn: &mut BackendConn, sql: &str) -> Option<Vec<Vec<Option<Vec<u8>>>>> {
    match tokio::time::timeout(TIMEOUT, conn.query_rows(sql)).await {
        Ok(Ok(rows)) => Some(rows),
        Ok(Err(Failed::Answered(err))) => {
            tracing::warn!(%err, sql, "XA recovery statement failed");
            None
        }
        _ => None,
    }
}

/// One pass over every shard; `tables[i]`: shard `i` has the decision table.
async fn recover(
    shards: &Shards,
    creds: &BackendCredentials,
    orphans: &HashSet<String>,
    tables: &mut [bool],
) {
    let mut conns: HashMap<usize, BackendConn> = HashMap::new();
    let mut prepared: Vec<(usize, Prepared)> = Vec::new();
    for (index, made_here) in tables.iter_mut().enumerate() {
        let Some(mut conn) = connect(shards, index, creds).await else {
            continue;
        };
        if !*made_here {
            let mut made = true;
            for sql in CREATE_DECISIONS {
                made &= run(&mut conn, sql).await.is_some();
            }
            if !made {
                tracing::warn!(
                    shard = shards.map.names()[index],
                    "could not create {DECISIONS}: transactions over several shards that \
                     write will fail until it exists"
                );
            }
            *made_here = made;
        }
        if let Some(rows) = run(&mut conn, "XA RECOVER").await {
            prepared.extend(rows.iter().filter_map(|r| {
                let p = shards.xa.parse_recovered(r).or_else(|| {
                    let (instance, p) = parse_any(r)?;
                    orphans.contains(&instance).then_some(p)
                })?;
                Some((index, p))
            }));
        }
        conns.insert(index, conn);
    }
    let reached_all = conns.len() == shards.routers.len();
    let pending: HashSet<String> = prepared.iter().map(|(_, p)| p.gtrid.clone()).collect();
    let mut decided: HashMap<String, bool> = HashMap::new();
    for (index, p) in prepared {
        // A commit of this process marks its transaction before the first prepare and
        // unmarks it once done or given up: not marked, what is left is ours to finish.
        if shards.xa.in_flight(&p.gtrid) {
            continue;
        }
        let decision = match decided.get(&p.gtrid) {
            Some(d) => *d,
            None => {
                let Some(coordinator) = conns.get_mut(&p.coordinator) else {
                    continue;
                };
                let sql = format!("SELECT 1 FROM {DECISIONS} WHERE gtrid = '{}'", p.gtrid);
                let Some(rows) = run(coordinator, &sql).await else {
                    continue;
                };
                decided.insert(p.gtrid.clone(), !rows.is_empty());
                !rows.is_empty()
            }
        };
        let verb = if decision { "COMMIT" } else { "ROLLBACK" };
        let Some(conn) = conns.get_mut(&index) else {
            continue;
        };
        if run(conn, &format!("XA {verb} {}", xid(&p.gtrid, index)))
            .await
            .is_some()
        {
            tracing::info!(
                shard = shards.map.names()[index],
                gtrid = p.gtrid,
                outcome = verb,
                "prepared XA branch left by an interrupted commit finished"
            );
        }
    }
    if reached_all {
        let mut patterns = vec![shards.xa.own_pattern()];
        patterns.extend(orphans.iter().map(|o| Coordinator::pattern_of(o)));
        for pattern in patterns {
            forget_decisions(&pattern, &mut conns, &pending, tables).await;
        }
    }
}

/// Deletes an instance's old decisions (ids `LIKE pattern`) that no prepared branch
/// refers to.
async fn forget_decisions(
    pattern: &str,
    conns: &mut HashMap<usize, BackendConn>,
    pending: &HashSet<String>,
    tables: &[bool],
) {
    let keep: Vec<String> = pending.iter().map(|g| format!("'{g}'")).collect();
    let not_pending = if keep.is_empty() {
        String::new()
    } else {
        format!(" AND gtrid NOT IN ({})", keep.join(","))
    };
    for (index, conn) in conns.iter_mut() {
        if !tables[*index] {
            continue;
        }
        let sql = format!(
            "DELETE FROM {DECISIONS} WHERE gtrid LIKE '{pattern}' \
             AND decided_at < NOW() - {KEEP_DECISIONS}{not_pending}"
        );
        run(conn, &sql).await;
    }
}
