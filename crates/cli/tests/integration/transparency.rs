//! What clients and servers see of Sluice itself: a burst of connects is queued like the
//! server's (`back_log`), and the server can tell Sluice's connections and their clients
//! apart.

use crate::support::wire::{Greeting, RawConn, CLIENT_CONNECT_ATTRS};
use crate::support::{
    admin_json, dedicated_server, shared_server, sluice_admin, Config, MariaDb, MariaDbOptions,
    Sluice, NATIVE_PASSWORD, NATIVE_USER,
};
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

/// A client with its own connection attributes, logged in and holding its session.
#[track_caller]
fn client_with_attributes(addr: SocketAddr, program: &str) -> RawConn {
    let mut conn = RawConn::connect(addr).expect("connect");
    conn.extra_caps = CLIENT_CONNECT_ATTRS;
    conn.attributes = vec![
        ("_client_name".into(), "rawtest".into()),
        ("program_name".into(), program.into()),
    ];
    conn.authenticate(NATIVE_USER, NATIVE_PASSWORD, None)
        .unwrap_or_else(|e| panic!("login to {addr} failed: {e:?}"));
    conn
}

/// The attributes the server recorded for each connection of a program (`program_name`):
/// one "name=value,..." line per connection.
fn server_attributes(server: &MariaDb, program: &str) -> Vec<String> {
    let out = server
        .execute(&format!(
            "SELECT GROUP_CONCAT(CONCAT(ATTR_NAME, '=', ATTR_VALUE) ORDER BY ORDINAL_POSITION) \
             FROM performance_schema.session_connect_attrs WHERE PROCESSLIST_ID IN \
             (SELECT PROCESSLIST_ID FROM performance_schema.session_connect_attrs \
              WHERE ATTR_NAME = 'program_name' AND ATTR_VALUE = '{program}') \
             GROUP BY PROCESSLIST_ID"
        ))
        .unwrap();
    out.lines().skip(1).map(str::to_owned).collect()
}

/// Without multiplexing the server sees the client's own attributes (and `proxy=sluice`);
/// Sluice's shared connections say `program_name=sluice`; a multiplexed session's
/// attributes are in Sluice's session list.
#[test]
fn the_server_and_the_session_list_tell_clients_and_sluice_apart() {
    let server = dedicated_server(MariaDbOptions {
        extra_args: vec!["--performance-schema=ON".into()],
        ..Default::default()
    });
    let dedicated = Sluice::start(&Config::for_server(&server).pool("multiplex", false));
    let mut client = client_with_attributes(dedicated.addr(), "attr-dedicated");
    client.query_rows("SELECT 1");
    assert_eq!(
        server_attributes(&server, "attr-dedicated"),
        ["_client_name=rawtest,program_name=attr-dedicated,proxy=sluice"]
    );

    let config = Config::for_server(&server).admin("t0ken");
    let address = config.admin_address().unwrap();
    let shared = Sluice::start(&config);
    let mut client = client_with_attributes(shared.addr(), "attr-shared");
    client.query_rows("SELECT 1");
    assert!(server_attributes(&server, "attr-shared").is_empty());
    let own = server_attributes(&server, "sluice");
    assert!(
        !own.is_empty()
            && own
                .iter()
                .all(|a| a.starts_with("_client_name=sluice,_client_version=")),
        "{own:?}"
    );
    let sessions = admin_json(&address, "t0ken", "/v1/sessions");
    let mine: Vec<_> = sessions
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["attributes"]["program_name"] == "attr-shared")
        .collect();
    assert_eq!(mine.len(), 1, "{sessions:#}");
    assert_eq!(mine[0]["attributes"]["_client_name"], "rawtest");
    assert_eq!(mine[0]["multiplexed"], true);
    let listed = sluice_admin(&address, "t0ken", &["sessions"]);
    assert!(listed.stdout.contains("program"), "{}", listed.stdout);
    assert!(listed.stdout.contains("attr-shared"), "{}", listed.stdout);
}
