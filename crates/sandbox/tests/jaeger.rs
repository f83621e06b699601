//! The Jaeger harness against the real Jaeger `make deps` builds: spans sent over
//! OTLP/HTTP in the OTLP JSON encoding come back through the query API as they were
//! sent, every socket Jaeger opens is on loopback, and stopping it leaves neither its
//! process nor its files behind.

use std::collections::HashSet;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sluice_sandbox::jaeger::{span_parent, span_tag};
use sluice_sandbox::{process_alive, Jaeger};

const SERVICE: &str = "sluice-sandbox-test";
const TRACE_ID: &str = "5b8efff798038103d269b633813fc60c";
const PARENT_ID: &str = "eee19b7ec3c1b174";
const CHILD_ID: &str = "eee19b7ec3c1b175";

#[test]
fn spans_sent_over_otlp_http_are_read_back_and_stop_ends_jaeger() {
    let jaeger = Jaeger::start().expect("starting Jaeger");

    // Whole microseconds, since Jaeger keeps times in µs: what it answers is exact.
    let start_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let nanos = |after_us: u128| ((start_us + after_us) * 1000).to_string();
    let request = json!({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": SERVICE}},
        ]},
        "scopeSpans": [{
            "scope": {"name": "sluice"},
            "spans": [
                {
                    "traceId": TRACE_ID, "spanId": PARENT_ID, "name": "statement",
                    "kind": 2, "startTimeUnixNano": nanos(0), "endTimeUnixNano": nanos(5000),
                },
                {
                    "traceId": TRACE_ID, "spanId": CHILD_ID, "parentSpanId": PARENT_ID,
                    "name": "backend query", "kind": 3,
                    "startTimeUnixNano": nanos(1000), "endTimeUnixNano": nanos(3500),
                    "attributes": [
                        {"key": "db.system", "value": {"stringValue": "mysql"}},
                        {"key": "db.rows", "value": {"intValue": "7"}},
                    ],
                },
            ],
        }],
    }]});
    let (status, body) = post_json(
        &format!("{}/v1/traces", jaeger.otlp_http_endpoint()),
        &request,
    );
    assert_eq!(status, 200, "{body}");

    let spans = jaeger
        .wait_for_spans(SERVICE, 2, Duration::from_secs(10))
        .unwrap();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let span = |id: &str| {
        spans
            .iter()
            .find(|span| span["spanID"] == id)
            .unwrap_or_else(|| panic!("no span {id} in {spans:#?}"))
    };
    let (parent, child) = (span(PARENT_ID), span(CHILD_ID));
    assert_eq!(parent["operationName"], "statement");
    assert_eq!(span_parent(parent), None, "{parent:#}");
    assert_eq!(parent["duration"], 5000, "{parent:#}");
    assert_eq!(child["operationName"], "backend query");
    assert_eq!(child["traceID"], TRACE_ID);
    assert_eq!(span_parent(child), Some(PARENT_ID), "{child:#}");
    assert_eq!(child["startTime"], json!(start_us + 1000), "{child:#}");
    assert_eq!(child["duration"], 2500, "{child:#}");
    assert_eq!(
        span_tag(child, "db.system"),
        Some(&json!("mysql")),
        "{child:#}"
    );
    assert_eq!(span_tag(child, "db.rows"), Some(&json!(7)), "{child:#}");
    assert_eq!(
        span_tag(child, "span.kind"),
        Some(&json!("client")),
        "{child:#}"
    );

    // The service is the resource's, in the trace's process table.
    let traces = jaeger.traces(SERVICE).unwrap();
    let trace = &traces["data"][0];
    let process = &trace["processes"][child["processID"].as_str().unwrap()];
    assert_eq!(process["serviceName"], SERVICE, "{traces:#}");
    assert!(
        jaeger.spans("nobody").unwrap().is_empty(),
        "another service's traces hold ours"
    );
    // The wait is bounded, and says what it saw.
    let too_many = jaeger.wait_for_spans(SERVICE, 3, Duration::from_millis(200));
    let error = format!("{:#}", too_many.expect_err("a third span appeared"));
    assert!(error.contains("2 of them"), "{error}");

    // The gRPC receiver takes connections where the endpoint says.
    let grpc = jaeger.otlp_grpc_endpoint();
    let grpc_addr: SocketAddr = grpc.strip_prefix("http://").unwrap().parse().unwrap();
    assert!(grpc_addr.ip().is_loopback(), "{grpc}");
    TcpStream::connect(grpc_addr).expect("connecting to the OTLP/gRPC receiver");

    let bound = bound_addresses(jaeger.pid());
    let http = jaeger.otlp_http_endpoint();
    let http_addr: SocketAddr = http.strip_prefix("http://").unwrap().parse().unwrap();
    assert!(bound.contains(&http_addr), "{http_addr} not in {bound:?}");
    for address in &bound {
        assert!(address.ip().is_loopback(), "Jaeger listens on {address}");
    }

    let (pid, dir) = (jaeger.pid(), jaeger.dir().to_path_buf());
    assert!(jaeger.running());
    jaeger.stop();
    assert!(!process_alive(pid), "Jaeger {pid} survived stop()");
    assert!(!dir.exists(), "{} survived stop()", dir.display());
}

/// POST `body` as JSON; the status and the answer.
fn post_json(url: &str, body: &Value) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut response = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body.to_string())
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let answer = response.body_mut().read_to_string().unwrap();
    (response.status().as_u16(), answer)
}

/// The local addresses of the TCP sockets process `pid` listens on and of its UDP
/// sockets, read from procfs: its socket inodes, looked up in the kernel's tables.
fn bound_addresses(pid: u32) -> Vec<SocketAddr> {
    let inodes: HashSet<String> = fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let mut addresses = Vec::new();
    for table in ["tcp", "tcp6", "udp", "udp6"] {
        let text = fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            const LISTEN: &str = "0A";
            let listening = table.starts_with("udp") || fields[3] == LISTEN;
            if listening && inodes.contains(fields[9]) {
                addresses.push(proc_address(fields[1]));
            }
        }
    }
    addresses
}

/// An address as procfs prints it: the IP as 32-bit words in hex, each in the
/// machine's byte order, then `:` and the port in hex.
fn proc_address(text: &str) -> SocketAddr {
    let (ip, port) = text.split_once(':').unwrap();
    let mut bytes = Vec::new();
    for word in ip.as_bytes().chunks(8) {
        let word = u32::from_str_radix(std::str::from_utf8(word).unwrap(), 16).unwrap();
        bytes.extend(word.to_ne_bytes());
    }
    let ip = match <[u8; 16]>::try_from(bytes.as_slice()) {
        Ok(v6) => IpAddr::V6(Ipv6Addr::from(v6)),
        Err(_) => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
    };
    SocketAddr::new(ip, u16::from_str_radix(port, 16).unwrap())
}
