//! The `[[shards]]` and `[sharding]` sections: the server groups one logical database
//! is spread over, and where each table's rows (or each schema) live.

use serde::Deserialize;

/// One shard: a group of `[[servers]]` (by name) that is a cluster of its own.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardConfig {
    pub name: String,
    /// Names of `[[servers]]`; each server belongs to one shard.
    pub servers: Vec<String>,
}

/// `[sharding]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardingConfig {
    /// Where unsharded tables (and schemas no `[[sharding.schemas]]` places) live.
    /// Default: the first shard.
    pub default_shard: Option<String>,
    #[serde(default)]
    pub tables: Vec<TableConfig>,
    #[serde(default)]
    pub schemas: Vec<SchemaConfig>,
    /// What a transaction that reaches a second shard does.
    #[serde(default)]
    pub cross_shard: CrossShard,
    /// Names this Sluice in the XA transactions it coordinates, so that it recovers
    /// only its own after a crash. Default: the host name and the first listen address;
    /// Sluice instances in front of the same shards must have different names.
    pub instance: Option<String>,
}

/// `[sharding] cross_shard`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CrossShard {
    /// Each further shard joins as an XA branch, and COMMIT is a two-phase commit whose
    /// decision is recorded in the first shard's transaction.
    #[default]
    Xa,
    /// Error 1235: a transaction stays on one shard.
    Refuse,
}

/// `[[sharding.tables]]`: a table whose rows are placed by a key column.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    /// `schema.table`.
    pub table: String,
    /// The key column.
    pub key: String,
    /// What the key holds, for comparing values as the server does.
    #[serde(default)]
    pub key_type: KeyType,
    #[serde(default)]
    pub method: Method,
    /// `method = "range"`: shards in key order, each with the exclusive upper bound of
    /// its keys, the last without one.
    #[serde(default)]
    pub ranges: Vec<RangeConfig>,
    /// `method = "list"`: the key values each shard holds; other values go to the
    /// default shard.
    #[serde(default)]
    pub lists: Vec<ListConfig>,
}

pub use crate::classify::keys::canon::KeyType;

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// A stable hash of the key into 1,024 buckets, bucket `b` on shard `b % shards`.
    #[default]
    Hash,
    Range,
    List,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeConfig {
    pub shard: String,
    /// Keys below this (integer keys only); the last range has none.
    pub below: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListConfig {
    pub shard: String,
    pub values: Vec<toml::Value>,
}

/// `[[sharding.schemas]]`: every table of a schema on one shard.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaConfig {
    pub schema: String,
    pub shard: String,
}
