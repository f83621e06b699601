//! Writes that bypass Sluice, as the binlog reader reports them, turned into cache
//! invalidations; and the cache's fallback to TTL-only expiry while the reader is down.

use super::{Cause, QueryCache};
use crate::binlog::{Batch, BinlogSink, Change};
use crate::classify::sql::{self, Analysis, TableRef};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The primary writes a transaction to its binlog before its storage engine makes it
/// visible, so a read that starts just after the first invalidation can still see the
/// old rows and cache them. A second invalidation this much later drops such entries.
const SETTLE: Duration = Duration::from_millis(100);

pub struct BinlogInvalidator {
    pub cache: Arc<QueryCache>,
    batches: AtomicU64,
    /// This reader is streaming (the cache counts its readers up).
    up: AtomicBool,
}

impl BinlogInvalidator {
    pub fn new(cache: Arc<QueryCache>) -> BinlogInvalidator {
        BinlogInvalidator {
            cache,
            batches: AtomicU64::new(0),
            up: AtomicBool::new(false),
        }
    }

    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }
}

/// The tables a batch changed; `None` when it may have changed anything.
pub fn changed_tables(batch: &Batch) -> Option<Vec<TableRef>> {
    let mut tables = Vec::new();
    for change in &batch.changes {
        match change {
            Change::Rows { schema, table, .. } => tables.push(TableRef {
                schema: schema.to_ascii_lowercase(),
                table: table.to_ascii_lowercase(),
            }),
            Change::Statement { schema, sql } => {
                match sql::analyze(sql.as_bytes(), schema.as_deref()) {
                    Analysis::Write { tables: Some(t) }
                        if schema.is_some() || t.iter().all(|t| !t.schema.is_empty()) =>
                    {
                        tables.extend(t)
                    }
                    Analysis::Write { .. } => return None,
                    // BEGIN, SET, and reads logged for their side effects change no rows
                    // a cached read could see.
                    _ => {}
                }
            }
            Change::Unknown { .. } => return None,
        }
    }
    Some(tables)
}

impl BinlogSink for BinlogInvalidator {
    fn changed(&self, batch: Batch) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        let cache = self.cache.clone();
        match changed_tables(&batch) {
            Some(tables) if tables.is_empty() => {}
            Some(tables) => {
                cache.invalidate_tables(&tables, Cause::Binlog);
                tokio::spawn(async move {
                    tokio::time::sleep(SETTLE).await;
                    cache.invalidate_tables(&tables, Cause::Binlog);
                });
            }
            None => {
                cache.invalidate_all(Cause::Binlog);
                tokio::spawn(async move {
                    tokio::time::sleep(SETTLE).await;
                    cache.invalidate_all(Cause::Binlog);
                });
            }
        }
    }

    fn up(&self) {
        // Whatever was written while the reader was away was never reported.
        self.cache.invalidate_all(Cause::Binlog);
        if !self.up.swap(true, Ordering::Relaxed) {
            self.cache.reader_state(true);
        }
    }

    fn down(&self, reason: &str) {
        tracing::warn!(
            reason,
            "binlog reader down: cache entries now expire by TTL only"
        );
        if self.up.swap(false, Ordering::Relaxed) {
            self.cache.reader_state(false);
        }
    }
}
