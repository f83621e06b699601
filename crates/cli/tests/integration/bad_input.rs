//! Malformed and abandoned client connections, sent over a raw socket: each gets a
//! well-formed ERR packet or a clean close in bounded time, and a healthy session on the
//! same Sluice keeps working throughout. Where a real server's behaviour is the model,
//! the same input is sent to MariaDB directly as a control.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use crate::support::wire::{expect_refusal, RawConn, Refusal, COM_QUERY};
use crate::support::{
    running_statements, shared_server, wait_until, Client, Config, Sluice, NATIVE_PASSWORD,
    NATIVE_USER,
};

/// Longest any refusal may take. The handshake timeout is set well below it, so a
/// Sluice that waits for bytes that never come still closes in time.
const REFUSAL_BOUND: Duration = Duration::from_secs(10);

struct Fixture {
    sluice: Sluice,
    /// A session logged in before the bad input, used after it.
    healthy: RawConn,
}

impl Fixture {
    fn new() -> Fixture {
        let config = Config::for_server(shared_server()).limit("handshake_timeout", "3s");
        let sluice = Sluice::start(&config);
        let mut healthy = RawConn::login_ok(sluice.addr(), NATIVE_USER, NATIVE_PASSWORD);
        assert_eq!(healthy.query_rows("SELECT 1"), [[Some("1".to_owned())]]);
        Fixture { sluice, healthy }
    }

    fn addr(&self) -> SocketAddr {
        self.sluice.addr()
    }

    /// The held session and a brand-new one both work, and the process is alive.
    #[track_caller]
    fn assert_healthy(&mut self) {
        self.sluice.assert_running();
        assert_eq!(
            self.healthy.query_rows("SELECT 'still here'"),
            [[Some("still here".to_owned())]],
            "the held session broke"
        );
        assert_eq!(
            Client::native(self.sluice.port()).query_ok("SELECT 1"),
            "1\n"
        );
    }
}

#[track_caller]
fn assert_refused(conn: &mut RawConn, what: &str) -> Refusal {
    match expect_refusal(&mut conn.stream, REFUSAL_BOUND) {
        Ok(refusal) => refusal,
        Err(problem) => panic!("{what}: {problem}"),
    }
}

#[test]
fn garbage_instead_of_a_handshake_response() {
    let mut fixture = Fixture::new();
    let mut conn = RawConn::connect(fixture.addr()).unwrap();
    conn.stream
        .write_all(b"GET / HTTP/1.1\r\nHost: sluice\r\n\r\n")
        .unwrap();
    fixture.assert_healthy();
    assert_refused(&mut conn, "HTTP request as a handshake response");
    fixture.assert_healthy();
}

#[test]
fn truncated_handshake_response_then_close() {
    let mut fixture = Fixture::new();
    let mut conn = RawConn::connect(fixture.addr()).unwrap();
    // Announces 100 bytes, sends 10, and stops sending.
    conn.stream
        .write_all(&[100, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        .unwrap();
    conn.shutdown_write();
    assert_refused(&mut conn, "truncated handshake response");
    fixture.assert_healthy();
}

#[test]
fn oversized_length_header_in_the_handshake() {
    let mut fixture = Fixture::new();
    let mut conn = RawConn::connect(fixture.addr()).unwrap();
    // A 16 MiB handshake response cannot be genuine; only 1 KiB of it ever comes.
    conn.stream.write_all(&[0xFF, 0xFF, 0xFF, 1]).unwrap();
    conn.stream.write_all(&[0u8; 1024]).unwrap();
    fixture.assert_healthy();
    assert_refused(&mut conn, "oversized handshake response");
    fixture.assert_healthy();
}

#[test]
fn wrong_sequence_id_in_the_handshake_response() {
    let send = |addr: SocketAddr| {
        let mut conn = RawConn::connect(addr).unwrap();
        let response = conn.handshake_response(NATIVE_USER, NATIVE_PASSWORD, None);
        conn.write_raw_packet(7, &response).unwrap();
        conn
    };
    // Control: MariaDB itself refuses packets out of order.
    let mut direct = send(shared_server().addr());
    assert_refused(&mut direct, "direct control");

    let mut fixture = Fixture::new();
    let mut conn = send(fixture.addr());
    assert_refused(&mut conn, "handshake response with sequence id 7");
    fixture.assert_healthy();
}

#[test]
fn wrong_sequence_id_on_a_command() {
    let send = |addr: SocketAddr| {
        let mut conn = RawConn::login_ok(addr, NATIVE_USER, NATIVE_PASSWORD);
        let mut payload = vec![COM_QUERY];
        payload.extend_from_slice(b"SELECT 1");
        conn.write_raw_packet(5, &payload).unwrap();
        conn
    };
    let mut direct = send(shared_server().addr());
    assert_refused(&mut direct, "direct control");

    let mut fixture = Fixture::new();
    let mut conn = send(fixture.addr());
    assert_refused(&mut conn, "COM_QUERY with sequence id 5");
    fixture.assert_healthy();
}

#[test]
fn truncated_command_then_close() {
    let mut fixture = Fixture::new();
    let mut conn = RawConn::login_ok(fixture.addr(), NATIVE_USER, NATIVE_PASSWORD);
    conn.stream
        .write_all(&[100, 0, 0, 0, COM_QUERY, b'S', b'E', b'L'])
        .unwrap();
    conn.shutdown_write();
    assert_refused(&mut conn, "truncated COM_QUERY");
    drop(conn);
    fixture.assert_healthy();
}

#[test]
fn client_vanishes_mid_query() {
    let server = shared_server();
    let mut fixture = Fixture::new();

    // Mid-result: the server is still producing rows when the client disappears.
    let streaming = "SELECT REPEAT('v', 1000) FROM mysql.seq_1_to_300000";
    let mut conn = RawConn::login_ok(fixture.addr(), NATIVE_USER, NATIVE_PASSWORD);
    conn.send_command(COM_QUERY, streaming.as_bytes()).unwrap();
    for _ in 0..10 {
        conn.read_packet().expect("the result starts");
    }
    drop(conn);

    // Mid-execution: nothing has been sent back yet.
    let sleeping = "SELECT SLEEP(2), 'vanished'";
    let mut conn = RawConn::login_ok(fixture.addr(), NATIVE_USER, NATIVE_PASSWORD);
    conn.send_command(COM_QUERY, sleeping.as_bytes()).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || running_statements(
            server, sleeping
        ) == 1),
        "the query never reached the server"
    );
    drop(conn);

    fixture.assert_healthy();
    // Whether Sluice closes the backend connection or drains it for reuse, the server
    // must not be left working for a client that is gone.
    assert!(
        wait_until(Duration::from_secs(20), || {
            running_statements(server, streaming) == 0 && running_statements(server, sleeping) == 0
        }),
        "statements of vanished clients are still running on the server"
    );
    fixture.assert_healthy();
}
