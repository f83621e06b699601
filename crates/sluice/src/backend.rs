//! Backend side of the request path: servers, their connection pools, and the
//! connections themselves (login, TLS, simple commands Sluice issues on its own).

pub mod config;
mod conn;
mod globals;
mod grants;
mod pool;
mod prepared;
mod vars;

pub use conn::{BackendConn, ConnParams, Vars, LOGIN_VARS};
pub use globals::{keep_inherited, Globals, GlobalsWatch};
pub use grants::{Grants, GrantsWatch};
pub use pool::{on_schema, probe, PoolKey, PooledConn, QueueStats, ServerPool};
pub use prepared::{refs, BackendStmt, ConnStmts, ServerStmts, StmtRef, Sweep};

use crate::stream::Endpoint;
use config::{PoolConfig, TlsMode};
use std::path::Path;
use std::sync::Arc;

/// A backend server as the pools see it.
pub struct Server {
    pub name: String,
    /// `host:port` or a Unix socket; its text names the server in errors and the admin
    /// API.
    pub endpoint: Endpoint,
    pub tls: TlsMode,
    pub tls_config: Option<Arc<rustls::ClientConfig>>,
    pub max_connections: u32,
    /// Statements relayed to it and their traffic, for analytics.
    pub counters: crate::analytics::ServerCounters,
    /// The prepared statements Sluice has open there, and its budget.
    pub stmts: Arc<ServerStmts>,
    /// Its globals as connections last saw them.
    pub globals: GlobalsWatch,
    /// Its accounts' grants as connections last read them.
    pub grants: GrantsWatch,
}

/// How to reach one server: the backend's part of a `[[servers]]` entry (the router
/// owns the entry, with the server's role and weight).
pub struct ServerSpec<'a> {
    pub name: String,
    pub endpoint: Endpoint,
    pub tls: TlsMode,
    pub tls_ca: Option<&'a Path>,
    /// Verify the certificate. Default: when `tls_ca` is given.
    pub tls_verify: Option<bool>,
    /// Default: `pool.max_connections`.
    pub max_connections: Option<u32>,
}

impl Server {
    pub fn from_config(c: &ServerSpec<'_>, pool: &PoolConfig) -> anyhow::Result<Server> {
        let tls_config = match c.tls {
            TlsMode::Disabled => None,
            _ => Some(crate::tls::client_config(
                c.tls_ca,
                c.tls_verify.unwrap_or(c.tls_ca.is_some()),
            )?),
        };
        Ok(Server {
            name: c.name.clone(),
            endpoint: c.endpoint.clone(),
            tls: c.tls,
            tls_config,
            max_connections: c.max_connections.unwrap_or(pool.max_connections),
            counters: Default::default(),
            stmts: Arc::new(ServerStmts::new(pool.max_prepared_statements)),
            globals: Default::default(),
            grants: Default::default(),
        })
    }
}
