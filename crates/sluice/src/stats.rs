//! Process-wide counters. Names are the metric names they will be exported under
//! (unit suffixes included); handles are plain atomics, cheap on the hot path.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($field:ident => $name:literal : $help:literal,)*) => {
        /// Counters of the whole process.
        #[derive(Default, Debug)]
        pub struct Stats { $(pub $field: AtomicU64,)* }

        impl Stats {
            /// (metric name, help, value) for every counter.
            pub fn snapshot(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$(($name, $help, self.$field.load(Ordering::Relaxed)),)*]
            }
        }
    };
}

counters! {
    client_connections => "sluice_client_connections_total": "client connections accepted",
    client_connections_active => "sluice_client_connections_active": "client connections open now",
    client_connections_refused => "sluice_client_connections_refused_total": "clients refused by the connection limit",
    sessions_moved_out => "sluice_sessions_moved_out_total": "sessions sent to a successor process at a hand-over",
    sessions_moved_in => "sluice_sessions_moved_in_total": "sessions taken from the process before at a hand-over",
    sessions_not_moved => "sluice_sessions_not_moved_total": "sessions ended at a hand-over because they could not move (TLS, dedicated, held past the drain bound, refused by the successor)",
    spans_exported => "sluice_trace_spans_exported_total": "spans the trace receiver accepted",
    spans_dropped => "sluice_trace_spans_dropped_total": "spans dropped because the export queue was full or the receiver failed",
    slow_statements => "sluice_slow_statements_total": "statements over [log] slow_statement, each logged",
    auth_failures => "sluice_auth_failures_total": "client logins refused",
    client_protocol_errors => "sluice_client_protocol_errors_total": "malformed, oversized or out-of-order client packets",
    client_aborts => "sluice_client_aborts_total": "clients that vanished mid-statement",
    commands => "sluice_commands_total": "client commands handled",
    commands_refused => "sluice_commands_refused_total": "commands answered with an error by Sluice itself",
    backend_connects => "sluice_backend_connects_total": "backend connections opened",
    backend_connect_errors => "sluice_backend_connect_errors_total": "failed backend connection attempts",
    backend_errors => "sluice_backend_errors_total": "backend connections lost or broken mid-statement",
    backend_resets => "sluice_backend_resets_total": "backend connections cleaned for reuse",
    pool_timeouts => "sluice_pool_timeouts_total": "clients that waited too long for a backend connection",
    bytes_from_backends => "sluice_backend_received_bytes_total": "bytes read from backends",
    bytes_to_backends => "sluice_backend_sent_bytes_total": "bytes of client commands sent to backends",
    bytes_from_clients => "sluice_client_received_bytes_total": "bytes read from clients",
    bytes_to_clients => "sluice_client_sent_bytes_total": "bytes written to clients",
    cache_hits => "sluice_cache_hits_total": "statements answered from the query cache",
    certification_retries => "sluice_galera_certification_retries_total": "autocommit statements sent again after a Galera certification conflict",
}

impl Stats {
    pub fn incr(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
    pub fn decr(counter: &AtomicU64) {
        counter.fetch_sub(1, Ordering::Relaxed);
    }
}
