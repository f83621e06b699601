//! Sluice: a transparent traffic manager for MySQL and MariaDB.
//!
//! The request path, in the order a statement travels it:
//! [`server`] accepts → [`frontend`] (handshake, auth, TLS, command loop) →
//! [`classify`] (what the command is and how its response ends; for SQL, what it
//! reads and writes) → [`cache`] (hits answered from stored packets) →
//! [`router`] (writer or a reader, by rules, transaction state and load) →
//! [`backend`] (pool lease, backend connection, streamed response).
//! [`monitor`] watches every server and moves the writer when it fails.
//! Around it: [`config`] (which composes the sections each subsystem owns, with
//! [`secret`] below them all), [`stream`] (TCP or Unix socket, plain or TLS),
//! [`auth`] (user list and verification), [`tls`], [`stats`],
//! [`shutdown`], [`error`]; [`analytics`] (what every statement did, per digest, user
//! and server, its history and the cache advisor); [`binlog`] (follows the primary's binlog so that the cache
//! sees writes that bypass Sluice); [`admin`] (the HTTP JSON admin API and
//! `sluice admin`). The `sluice` binary, the benchmarks and the local MariaDB sandbox
//! live in crates of their own (`sluice-cli`, `sluice-bench`, `sluice-sandbox`) that this
//! one never imports.

pub mod admin;
pub mod analytics;
pub mod auth;
pub mod backend;
pub mod binlog;
pub mod cache;
pub mod classify;
pub mod clock;
pub mod config;
pub mod error;
pub mod fleet;
pub mod frontend;
pub mod id_hash;
pub mod log_context;
pub mod monitor;
pub mod router;
pub mod secret;
pub mod server;
pub mod shard;
pub mod shutdown;
pub mod stats;
pub mod stream;
pub mod tls;
pub mod trace;
