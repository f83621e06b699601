//! Writes that bypass Sluice, as the binlog reader reports them, turned into cache
//! invalidations; and the cache's fallback to TTL-only expiry while the reader is down.

use super::table_keys::{self, TableKeys};
use super::{Cause, QueryCache, RowSet};
use crate::binlog::rows::RowImages;
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

/// What a batch changed.
#[derive(Debug, Default, PartialEq)]
pub struct Changed {
    /// Tables whose changed rows no key tells.
    pub tables: Vec<TableRef>,
    /// Tables of which only rows of these keys changed.
    pub rows: Vec<RowSet>,
}

/// What a batch changed, its row images read by each table's key as `keys` knows it;
/// `None` when it may have changed anything. DDL makes `keys` forget its tables.
pub fn changed(batch: &Batch, keys: &TableKeys) -> Option<Changed> {
    let mut out = Changed::default();
    for change in &batch.changes {
        match change {
            Change::Rows {
                schema,
                table,
                rows,
            } => {
                let t = TableRef {
                    schema: schema.to_ascii_lowercase(),
                    table: table.to_ascii_lowercase(),
                };
                match rows.as_ref().and_then(|images| by_key(&t, images, keys)) {
                    Some(r) => out.rows.push(r),
                    None => out.tables.push(t),
                }
            }
            Change::Statement { schema, sql } => {
                let ddl = table_keys::may_change_keys(sql.as_bytes());
                match sql::analyze(sql.as_bytes(), schema.as_deref()) {
                    Analysis::Write { tables: Some(t) }
                        if schema.is_some() || t.iter().all(|t| !t.schema.is_empty()) =>
                    {
                        if ddl {
                            keys.forget(&t);
                        }
                        out.tables.extend(t)
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
    Some(out)
}

/// The tables a batch changed, whatever rows; `None` when it may have changed anything.
pub fn changed_tables(batch: &Batch) -> Option<Vec<TableRef>> {
    changed(batch, &TableKeys::default()).map(|c| c.tables)
}

/// The keys a table's row images hold, when its key is known and the images have the
/// layout it was learnt with.
fn by_key(t: &TableRef, images: &RowImages, keys: &TableKeys) -> Option<RowSet> {
    let key = keys.get(t).flatten()?;
    if !key.matches_map(images.column_count(), images.column_type(key.position)) {
        return None;
    }
    let keys = images
        .values(key.position)?
        .iter()
        .map(|v| key.image_value(v))
        .collect::<Option<Vec<_>>>()?;
    Some(RowSet {
        table: t.clone(),
        keys,
    })
}

impl QueryCache {
    fn invalidate_changed(&self, changed: &Changed, cause: Cause) {
        if !changed.tables.is_empty() {
            self.invalidate_tables(&changed.tables, cause);
        }
        for r in &changed.rows {
            self.invalidate_rows(r, cause);
        }
    }
}

impl BinlogSink for BinlogInvalidator {
    fn changed(&self, batch: Batch) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        let cache = self.cache.clone();
        match changed(&batch, &cache.keys) {
            Some(c) if c.tables.is_empty() && c.rows.is_empty() => {}
            Some(c) => {
                let rows = c.rows.iter().map(|r| &r.table);
                cache.gens.binlog_changed(c.tables.iter().chain(rows));
                cache.invalidate_changed(&c, Cause::Binlog);
                tokio::spawn(async move {
                    tokio::time::sleep(SETTLE).await;
                    cache.invalidate_changed(&c, Cause::Binlog);
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
