//! What clients and servers see of Sluice itself: a burst of connects is queued like the
//! server's (`back_log`), and the server can tell Sluice's connections and their clients
//! apart.

use crate::support::wire::Greeting;
use crate::support::{shared_server, Config, Sluice};
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Connects and reads the greeting: its protocol version byte parsed, or why not.
fn greeting(addr: SocketAddr) -> Result<Greeting, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(20)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let mut header = [0u8; 4];
    s.read_exact(&mut header).map_err(|e| e.to_string())?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut payload = vec![0; len];
    s.read_exact(&mut payload).map_err(|e| e.to_string())?;
    Greeting::parse(&payload)
}

/// The backlog of the socket listening on `port`, as `ss` shows it (its Send-Q).
fn listen_backlog(port: u16) -> Option<u32> {
    let out = Command::new("ss")
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().nth(2)?.parse().ok()
}

/// 500 clients connecting at the same instant all get a handshake, and the listening
/// socket has the configured backlog (default 1024), not the runtime's 128.
#[test]
fn a_burst_of_connects_all_get_a_handshake() {
    const CLIENTS: usize = 500;
    let sluice = Sluice::start(
        &Config::for_server(shared_server()).limit("max_client_connections", 2000i64),
    );
    match listen_backlog(sluice.port()) {
        Some(backlog) => assert_eq!(backlog, 1024, "listen backlog"),
        None => eprintln!("`ss` not available: backlog not checked"),
    }
    let addr = sluice.addr();
    let start = Arc::new(Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                greeting(addr)
            })
        })
        .collect();
    let failures: Vec<String> = threads
        .into_iter()
        .filter_map(|t| t.join().unwrap().err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {CLIENTS} connects failed, e.g. {:?}",
        failures.len(),
        failures.first()
    );
}
