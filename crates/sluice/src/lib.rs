//! Sluice: a transparent traffic manager for MySQL and MariaDB.
//!
//! The request path, in the order a statement travels it:
//! [`server`] accepts → [`frontend`] (handshake, auth, TLS, command loop) →
//! [`classify`] (what the command is and how its response ends) →
//! [`backend`] (pool lease, backend connection, streamed response).
//! Around it: [`config`], [`auth`] (user list and verification), [`tls`], [`stats`],
//! [`shutdown`], [`error`], [`binlog`] (follows the primary's binlog so that the cache
//! sees writes that bypass Sluice); and the tools that exercise it: [`sandbox`] (local
//! MariaDB instances for tests, demo and benchmarks) and [`bench`].

pub mod auth;
pub mod backend;
pub mod bench;
pub mod binlog;
pub mod classify;
pub mod config;
pub mod error;
pub mod frontend;
pub mod sandbox;
pub mod server;
pub mod shutdown;
pub mod stats;
pub mod stream;
pub mod tls;
