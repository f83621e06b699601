//! Where each sharded table's key is among its columns, read from the servers of the
//! default shard: what an `INSERT` without a column list is placed by. Read at start and
//! every [`EVERY`] after, so that a table created (or altered) later is known soon.

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

async fn learn(shards: &Shards, creds: &BackendCredentials) {
    let router = &shards.routers[shards.map.default_shard()];
    let member = router
        .writer()
        .or_else(|| router.members.iter().find(|m| m.usable()).cloned())
        .or_else(|| router.members.first().cloned());
    let Some(member) = member else { return };
    let params = params();
    let connect = BackendConn::connect(member.pool.server.clone(), creds, &params, None);
    let mut conn = match tokio::time::timeout(TIMEOUT, connect).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::debug!(server = member.name(), error = %e, "sharded tables' columns unread");
            return;
        }
        Err(_) => return,
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
        if let Ok(Ok(Ok(Some(v)))) = read {
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
