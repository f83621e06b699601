//! What Sluice reads from the shards' servers besides their health: where each sharded
//! table's key is among its columns (from the default shard; what an `INSERT` without a
//! column list is placed by), and each shard's `auto_increment_increment` and
//! `auto_increment_offset` (ids generated on two shards must never collide). Read at
//! start and every [`EVERY`] after, so that a table created (or altered) later is known
//! soon.

use super::params;
use super::BackendCredentials;
use crate::backend::BackendConn;
use crate::shard::Shards;
use crate::shutdown::Shutdown;
use std::sync::Arc;
use std::time::Duration;

const EVERY: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(5);

pub fn spawn(shards: Arc<Shards>, creds: Arc<BackendCredentials>, mut shutdown: Shutdown) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = learn(&shards, &creds) => {}
                _ = shutdown.stopping() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(EVERY) => {}
                _ = shutdown.stopping() => return,
            }
        }
    });
}

/// A connection to shard `index`'s writer (or a server of it that is up).
pub(super) async fn connect(
    shards: &Shards,
    index: usize,
    creds: &BackendCredentials,
) -> Option<BackendConn> {
    let router = &shards.routers[index];
    let member = router
        .writer()
        .or_else(|| router.members.iter().find(|m| m.usable()).cloned())
        .or_else(|| router.members.first().cloned())?;
    let params = params();
    let connect = BackendConn::connect(member.pool.server.clone(), creds, &params, None);
    match tokio::time::timeout(TIMEOUT, connect).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::debug!(server = member.name(), error = %e, "shard settings unread");
            None
        }
        Err(_) => None,
    }
}

async fn learn(shards: &Shards, creds: &BackendCredentials) {
    for index in 0..shards.routers.len() {
        let Some(mut conn) = connect(shards, index, creds).await else {
            continue;
        };
        let sql = "SELECT @@auto_increment_increment, @@auto_increment_offset";
        if let Ok(Ok(Some(row))) = tokio::time::timeout(TIMEOUT, conn.query_row(sql)).await {
            let number = |i: usize| -> Option<u64> {
                std::str::from_utf8(row.get(i)?.as_deref()?)
                    .ok()?
                    .parse()
                    .ok()
            };
            if let (Some(increment), Some(offset)) = (number(0), number(1)) {
                shards.note_auto_increment(index, increment, offset);
            }
        }
    }
    let Some(mut conn) = connect(shards, shards.map.default_shard(), creds).await else {
        return;
    };
    for (table, key) in shards.map.sharded_tables() {
        let sql = format!(
            "SELECT ORDINAL_POSITION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{}' \
             AND TABLE_NAME = '{}' AND COLUMN_NAME = '{}'",
            escape(&table.schema),
            escape(&table.table),
            escape(key)
        );
        let read = tokio::time::timeout(TIMEOUT, conn.query_scalar(&sql)).await;
        if let Ok(Ok(Some(v))) = read {
            if let Some(ordinal) = std::str::from_utf8(&v)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
            {
                shards.map.learn_position(&table, ordinal.saturating_sub(1));
            }
        }
    }
}

/// Inside single quotes (names come from the configuration).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\'', "''")
}
