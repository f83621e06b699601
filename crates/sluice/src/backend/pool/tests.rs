use super::*;
use crate::auth::BackendCredentials;
use crate::backend::config::TlsMode;
use crate::backend::ConnParams;
use crate::backend::ServerSpec;
use crate::secret::Secret;
use crate::stream::Endpoint;

/// A pool of at most `max` connections to a server nobody listens on: these tests
/// only move slots, which need no connection.
fn pool(max: u32) -> Arc<ServerPool> {
    let cfg = PoolConfig {
        queue_timeout: Duration::from_secs(5),
        ..PoolConfig::default()
    };
    let spec = ServerSpec {
        name: "db1".into(),
        endpoint: Endpoint::Tcp("127.0.0.1:9".into()),
        tls: TlsMode::Disabled,
        tls_ca: None,
        tls_verify: None,
        max_connections: Some(max),
    };
    let server = Server::from_config(&spec, &cfg).expect("a server without TLS");
    ServerPool::new(Arc::new(server), cfg, Arc::new(Stats::default()))
}

fn key() -> PoolKey {
    let creds = BackendCredentials {
        user: "app".into(),
        password: Secret("secret".into()),
        native_stage1: None,
    };
    let params = ConnParams {
        wire_caps: 0,
        mariadb_caps: 0,
        charset: 45,
        track_state: true,
    };
    PoolKey::new(Arc::new(creds), params)
}

fn any(_: &BackendConn) -> u32 {
    0
}

/// The race a sequential client meets under multiplexing: its next statement finds the
/// only connection still leased by the session that answered it, which gives it back
/// before the new statement waits. The caller is queued by the look that found the
/// server full, so the connection given back goes to it.
#[tokio::test]
async fn a_slot_freed_just_after_the_server_was_full_goes_to_the_caller() {
    let pool = pool(1);
    let key = key();
    assert!(matches!(
        pool.try_take(&key, None, &any, 0, true),
        Taken::Slot
    ));
    let Taken::Queued(id, rx) = pool.try_take(&key, None, &any, 0, true) else {
        panic!("a full server queues the caller");
    };
    pool.closed();
    // Missed, the caller would wait out the queue timeout and get an error.
    assert!(matches!(pool.wait(&key, id, rx).await, Ok(Grant::Slot)));
    assert_eq!(pool.counts(), (1, 0, 0, 0));
}

/// Looking without queueing leaves no waiter behind, and a full queue refuses.
#[tokio::test]
async fn only_a_caller_that_asks_is_queued_and_the_queue_is_bounded() {
    let pool = pool(1);
    let key = key();
    assert!(matches!(
        pool.try_take(&key, None, &any, 0, true),
        Taken::Slot
    ));
    assert!(matches!(
        pool.try_take(&key, None, &any, 0, false),
        Taken::Full
    ));
    assert_eq!(pool.counts().3, 0);
    let mut queued = Vec::new();
    for _ in 0..pool.cfg.max_queue {
        match pool.try_take(&key, None, &any, 0, true) {
            Taken::Queued(id, rx) => queued.push((id, rx)),
            _ => panic!("room in the queue"),
        }
    }
    assert!(matches!(
        pool.try_take(&key, None, &any, 0, true),
        Taken::QueueFull
    ));
    // Slots given back go to the queue in order.
    pool.closed();
    let (_, first) = queued.remove(0);
    assert!(matches!(first.await, Ok(Grant::Slot)));
}
