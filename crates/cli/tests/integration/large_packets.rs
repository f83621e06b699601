//! Payloads over the 16 MiB packet limit in both directions: a client statement that
//! spans several packets, and rows that do, including one that ends exactly on the
//! boundary (and so is followed by an empty packet).

use std::fmt::Write as _;
use std::time::Duration;

use rand::{RngCore, SeedableRng};
use sha1::{Digest, Sha1};

use crate::support::{fresh_database, shared_server, Client, Config, Sluice};

const DATABASE: &str = "sluice_large";

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        write!(out, "{b:02x}").unwrap();
    }
    out
}

#[test]
fn blobs_over_16_mib_round_trip() {
    let server = shared_server();
    let mut sluice = Sluice::start(&Config::for_server(server));
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5106);
    // 20 MB, and 2^24 - 5 bytes: with its 4-byte length prefix that row fills a packet
    // of exactly 0xFFFFFF bytes.
    let blobs: Vec<Vec<u8>> = [20_000_000usize, 0xFF_FFFF - 4]
        .iter()
        .map(|&len| {
            let mut blob = vec![0u8; len];
            rng.fill_bytes(&mut blob);
            blob
        })
        .collect();
    let client = |port: u16| {
        Client::native(port)
            .database(DATABASE)
            .arg("--max-allowed-packet=1G")
            .timeout(Duration::from_secs(120))
    };

    let mut summaries = Vec::new();
    for port in [server.port(), sluice.port()] {
        fresh_database(server, DATABASE);
        client(port).query_ok("CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB)");
        for (id, blob) in blobs.iter().enumerate() {
            // A 40 MB hex literal: the statement itself spans three packets.
            let insert = format!("INSERT INTO t VALUES ({id}, x'{}')", hex(blob));
            client(port).query_ok(&insert);
        }
        let summary = client(port).query_ok("SELECT id, SHA1(b), LENGTH(b) FROM t ORDER BY id");
        for (id, blob) in blobs.iter().enumerate() {
            let expected = format!("{id}\t{}\t{}", hex(&Sha1::digest(blob)), blob.len());
            assert_eq!(
                summary.lines().nth(id),
                Some(expected.as_str()),
                "port {port}"
            );
            // And the bytes themselves, back through every packet of the row.
            let raw = client(port)
                .args(["--batch", "--raw", "--skip-column-names"])
                .stdin(format!("SELECT b FROM t WHERE id = {id}"))
                .run();
            raw.assert_success();
            assert_eq!(
                raw.stdout_bytes.len(),
                blob.len() + 1,
                "port {port} id {id}"
            );
            assert!(
                raw.stdout_bytes[..blob.len()] == blob[..],
                "port {port} id {id}: bytes differ"
            );
        }
        summaries.push(summary);
    }
    assert_eq!(summaries[0], summaries[1]);
    sluice.assert_running();
}
