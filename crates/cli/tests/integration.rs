//! End-to-end tests: real `mariadbd` servers, the real `sluice` binary, and real clients
//! (the `mariadb` CLI, sysbench, PyMySQL, mysql2, and a raw protocol socket). Wherever a
//! result can be compared, the same thing is run directly against MariaDB and through
//! Sluice, and the two must match.
//!
//! One binary with a shared harness ([`support`]); one module per topic.

mod support;

#[path = "integration/accounts.rs"]
mod accounts;
#[path = "integration/admin.rs"]
mod admin;
#[path = "integration/analytics.rs"]
mod analytics;
#[path = "integration/auth.rs"]
mod auth;
#[path = "integration/bad_input.rs"]
mod bad_input;
#[path = "integration/bench.rs"]
mod bench;
#[path = "integration/bench_failover.rs"]
mod bench_failover;
#[path = "integration/bench_galera.rs"]
mod bench_galera;
#[path = "integration/bench_routing.rs"]
mod bench_routing;
#[path = "integration/bench_shard.rs"]
mod bench_shard;
#[path = "integration/bench_traced.rs"]
mod bench_traced;
#[path = "integration/bench_zones.rs"]
mod bench_zones;
#[path = "integration/binlog.rs"]
mod binlog;
#[path = "integration/binlog_rows.rs"]
mod binlog_rows;
#[path = "integration/cache.rs"]
mod cache;
#[path = "integration/cache_freshness.rs"]
mod cache_freshness;
#[path = "integration/cache_rows.rs"]
mod cache_rows;
#[path = "integration/check_config.rs"]
mod check_config;
#[path = "integration/commands.rs"]
mod commands;
#[path = "integration/compat.rs"]
mod compat;
#[path = "integration/dedicated_schema.rs"]
mod dedicated_schema;
#[path = "integration/drivers.rs"]
mod drivers;
#[path = "integration/errors.rs"]
mod errors;
#[path = "integration/failover.rs"]
mod failover;
#[path = "integration/failover_grants.rs"]
mod failover_grants;
#[path = "integration/failures.rs"]
mod failures;
#[path = "integration/fleet.rs"]
mod fleet;
#[path = "integration/galera_flow.rs"]
mod galera_flow;
#[path = "integration/galera_writers.rs"]
mod galera_writers;
#[path = "integration/handover.rs"]
mod handover;
#[path = "integration/harness.rs"]
mod harness;
#[path = "integration/kill.rs"]
mod kill;
#[path = "integration/kill_forms.rs"]
mod kill_forms;
#[path = "integration/large_packets.rs"]
mod large_packets;
#[path = "integration/lifecycle.rs"]
mod lifecycle;
#[path = "integration/links.rs"]
mod links;
#[path = "integration/meaning.rs"]
mod meaning;
#[path = "integration/multiplex.rs"]
mod multiplex;
#[path = "integration/partition.rs"]
mod partition;
#[path = "integration/pool.rs"]
mod pool;
#[path = "integration/prepared.rs"]
mod prepared;
#[path = "integration/proxy_paths.rs"]
mod proxy_paths;
#[path = "integration/replay.rs"]
mod replay;
#[path = "integration/replay_rows.rs"]
mod replay_rows;
#[path = "integration/replay_wrap.rs"]
mod replay_wrap;
#[path = "integration/replication_sandbox.rs"]
mod replication_sandbox;
#[path = "integration/routing.rs"]
mod routing;
#[path = "integration/server_state.rs"]
mod server_state;
#[path = "integration/service.rs"]
mod service;
#[path = "integration/session_track.rs"]
mod session_track;
#[path = "integration/sharding.rs"]
mod sharding;
#[path = "integration/sharding_cache.rs"]
mod sharding_cache;
#[path = "integration/sharding_exact.rs"]
mod sharding_exact;
#[path = "integration/sharding_failover.rs"]
mod sharding_failover;
#[path = "integration/sharding_xa.rs"]
mod sharding_xa;
#[path = "integration/sysbench.rs"]
mod sysbench;
#[path = "integration/tls.rs"]
mod tls;
#[path = "integration/tracing.rs"]
mod tracing;
#[path = "integration/tracing_stages.rs"]
mod tracing_stages;
#[path = "integration/transparency.rs"]
mod transparency;
#[path = "integration/unix_socket.rs"]
mod unix_socket;
#[path = "integration/writer_lock.rs"]
mod writer_lock;
