//! The query cache as the admin API sees it: JSON in and out, with warm-up run through
//! the frontend's pools as a client of each user would.

use super::{warm, Frontend};
use crate::admin::{CacheAdmin, Invalidate, WarmFuture};
use crate::cache::{RuleConfig, Scope};
use crate::classify::sql::TableRef;
use crate::fleet::Change;
use std::path::PathBuf;
use std::sync::Arc;

pub struct CacheHandle {
    pub fe: Arc<Frontend>,
    /// The configured `cache.warm_file`, warmed when no file is named.
    pub warm_file: Option<PathBuf>,
}

impl CacheHandle {
    fn cache(&self) -> &Arc<crate::cache::QueryCache> {
        self.fe
            .cache
            .as_ref()
            .expect("a handle exists only with a cache")
    }
}

impl CacheAdmin for CacheHandle {
    fn stats(&self) -> serde_json::Value {
        self.cache().stats_json()
    }

    fn rules(&self) -> serde_json::Value {
        serde_json::to_value(self.cache().rule_configs()).unwrap_or_default()
    }

    fn set_rules(&self, rules: serde_json::Value) -> Result<(), Vec<String>> {
        set_rules(self.cache(), rules.clone())?;
        self.fe.publish(Change::CacheRules { rules });
        Ok(())
    }

    fn invalidate(&self, what: Invalidate) -> Result<u64, String> {
        let dropped = invalidate(self.cache(), what.clone())?;
        self.fe.publish(Change::Invalidate { what });
        Ok(dropped)
    }

    fn warm(&self, file: Option<PathBuf>) -> WarmFuture {
        let fe = self.fe.clone();
        let file = file.or_else(|| self.warm_file.clone());
        Box::pin(async move {
            let file = file.ok_or("no file named and no cache.warm_file configured")?;
            let groups = warm::load(&file)?;
            let report = warm::run(&fe, &groups).await;
            serde_json::to_value(report).map_err(|e| e.to_string())
        })
    }
}

/// Replaces the cache rules (through this instance's API or a peer's).
pub(super) fn set_rules(
    cache: &crate::cache::QueryCache,
    rules: serde_json::Value,
) -> Result<(), Vec<String>> {
    let rules: Vec<RuleConfig> = serde_json::from_value(rules)
        .map_err(|e| vec![format!("rules must be an array of rule objects: {e}")])?;
    cache.set_rules(rules)
}

/// Drops entries (through this instance's API or a peer's); returns how many.
pub(super) fn invalidate(
    cache: &crate::cache::QueryCache,
    what: Invalidate,
) -> Result<u64, String> {
    let scope = match what {
        Invalidate::All => Scope::All,
        Invalidate::Rule(name) => Scope::Rule(name),
        Invalidate::Table { schema, table } => Scope::Table(TableRef {
            schema: schema.to_ascii_lowercase(),
            table: table.to_ascii_lowercase(),
        }),
        Invalidate::Digest(d) => Scope::Digest(d),
    };
    cache.invalidate(&scope)
}
