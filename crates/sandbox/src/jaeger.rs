//! A real Jaeger on loopback for the tracing tests: the OpenTelemetry trace receiver
//! Sluice exports to (OTLP over HTTP and over gRPC), holding spans in memory, and the
//! query API that reads them back.
//!
//! [`Jaeger::start`] runs the all-in-one binary that `make deps` builds into
//! `.tools/bin`, every port of it on 127.0.0.1, under the same watchdog as the MariaDB
//! servers: it stops when its handle is dropped or when this process dies, however it
//! dies, and its directory (its log) goes with it.

use std::ffi::OsString;
use std::fs;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::{free_port, process_alive, tail, StartError, Supervised};

/// The program's name, as Jaeger's own v1 releases name it and as `make deps` installs
/// it. Not `jaeger`: that is Jaeger v2, whose command line is another.
pub const JAEGER_PROGRAM: &str = "jaeger-all-in-one";

/// Where `make deps` puts the programs it builds, relative to the workspace root.
const TOOLS_BIN: &str = ".tools/bin";
/// How long a fresh Jaeger may take to answer on every port.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Traces one query of [`Jaeger::traces`] asks for at most.
const QUERY_LIMIT: u32 = 1000;
/// Traces Jaeger keeps before dropping the oldest: it holds them in memory, so a test
/// that floods it must not take the machine's memory with it.
const MAX_TRACES: u32 = 100_000;

/// The ports we pick; Jaeger's other listeners take port 0 (any free one), since
/// nothing here connects to them.
#[derive(Debug, Clone, Copy)]
struct Ports {
    otlp_http: u16,
    otlp_grpc: u16,
    query: u16,
    /// Health check and Jaeger's own metrics.
    admin: u16,
    /// The collector's Jaeger-protocol gRPC port: the embedded agent connects to it, so
    /// it needs a port known before the start.
    collector_grpc: u16,
}

impl Ports {
    fn pick() -> Ports {
        Ports {
            otlp_http: free_port(),
            otlp_grpc: free_port(),
            query: free_port(),
            admin: free_port(),
            collector_grpc: free_port(),
        }
    }

    /// The command line: every listener on loopback. Jaeger's defaults listen on all
    /// interfaces, on fixed ports that two Jaegers (or a developer's own) would share.
    fn args(&self) -> Vec<OsString> {
        let loopback = |flag: &str, port: u16| format!("--{flag}=127.0.0.1:{port}");
        vec![
            loopback("collector.otlp.http.host-port", self.otlp_http),
            loopback("collector.otlp.grpc.host-port", self.otlp_grpc),
            loopback("query.http-server.host-port", self.query),
            loopback("admin.http.host-port", self.admin),
            loopback("collector.grpc-server.host-port", self.collector_grpc),
            loopback("collector.http-server.host-port", 0),
            loopback("query.grpc-server.host-port", 0),
            // The embedded agent: its sampling endpoint and its UDP span receivers.
            loopback("http-server.host-port", 0),
            loopback("processor.jaeger-compact.server-host-port", 0),
            loopback("processor.jaeger-binary.server-host-port", 0),
            loopback("processor.zipkin-compact.server-host-port", 0),
            // Off by default in this version: without it the OTLP ports stay closed.
            "--collector.otlp.enabled=true".to_owned(),
            format!("--memory.max-traces={MAX_TRACES}"),
        ]
        .into_iter()
        .map(OsString::from)
        .collect()
    }
}

/// The environment Jaeger runs with: memory storage whatever the caller's environment
/// says, and no tracing of its own query service, which would send its spans over UDP to
/// whatever listens on the default agent port of this machine.
fn jaeger_env() -> Vec<(OsString, OsString)> {
    [("SPAN_STORAGE_TYPE", "memory"), ("JAEGER_DISABLED", "true")]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// Path of the Jaeger all-in-one program: the workspace's `.tools/bin` first (where
/// `make deps` builds it), then `PATH`.
pub fn jaeger_path() -> Result<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("the crate is two levels below the workspace root");
    let mut dirs = vec![workspace.join(TOOLS_BIN)];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .map(|dir| dir.join(JAEGER_PROGRAM))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            anyhow!(
                "{JAEGER_PROGRAM} not found in the workspace's {TOOLS_BIN} or $PATH; \
                 `make deps` builds it"
            )
        })
}

/// A running Jaeger. Dropping it (or [`Jaeger::stop`]) stops the process and deletes its
/// directory.
pub struct Jaeger {
    /// Temporary directory holding the log; the watchdog deletes it after Jaeger exits.
    dir: PathBuf,
    process: Supervised,
    ports: Ports,
    http: ureq::Agent,
}

impl std::fmt::Debug for Jaeger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jaeger")
            .field("pid", &self.process.pid())
            .field("ports", &self.ports)
            .field("dir", &self.dir)
            .finish()
    }
}

impl Jaeger {
    /// Start Jaeger on free 127.0.0.1 ports with memory storage, and wait (at most 30 s)
    /// until its OTLP receivers take connections and its query API answers.
    pub fn start() -> Result<Jaeger> {
        let program = jaeger_path()?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Self::start_once(&program) {
                Ok(jaeger) => return Ok(jaeger),
                Err(StartError::PortTaken(e)) if attempts < 5 => {
                    tracing::debug!(error = %e, "Jaeger's port taken, retrying on others");
                }
                Err(StartError::PortTaken(e) | StartError::Failed(e)) => return Err(e),
            }
        }
    }

    fn start_once(program: &Path) -> Result<Jaeger, StartError> {
        let dir = tempfile::Builder::new()
            .prefix("sluice-jaeger-")
            .tempdir()
            .context("creating Jaeger's directory")?;
        let ports = Ports::pick();
        let log = dir.path().join("jaeger.log");
        // The watchdog owns the directory from here on.
        let dir = dir.keep();
        let spawned =
            Supervised::spawn_with_env(program, &ports.args(), &jaeger_env(), Some(&dir), &log);
        let process = match spawned {
            Ok(process) => process,
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(e.into());
            }
        };
        let http = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(2)))
            .timeout_global(Some(Duration::from_secs(10)))
            // Refusals are answers: their status and body go into our errors.
            .http_status_as_error(false)
            // Jaeger is on loopback; a proxy from the environment has no business here.
            .proxy(None)
            .build()
            .into();
        let jaeger = Jaeger {
            dir,
            process,
            ports,
            http,
        };
        // On failure `jaeger` is dropped here, which stops it and deletes its files.
        jaeger.wait_ready()?;
        Ok(jaeger)
    }

    /// Poll until [`Jaeger::probe`] succeeds, failing early with the log if Jaeger
    /// exits, and after [`START_TIMEOUT`].
    fn wait_ready(&self) -> Result<(), StartError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if !process_alive(self.pid()) {
                let log = self.log();
                let err = anyhow!("Jaeger exited during startup; its log:\n{log}");
                // Another process took a port between free_port() and Jaeger's bind.
                return Err(if log.contains("address already in use") {
                    StartError::PortTaken(err)
                } else {
                    StartError::Failed(err)
                });
            }
            let probed = self.probe();
            if probed.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let last = probed.err().map(|e| format!("{e:#}")).unwrap_or_default();
                return Err(StartError::Failed(anyhow!(
                    "Jaeger did not answer within {START_TIMEOUT:?} (last attempt: {last}); \
                     its log:\n{}",
                    self.log()
                )));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether Jaeger serves: the OTLP receivers take connections, the health check says
    /// so, and the query API (started last) answers.
    fn probe(&self) -> Result<()> {
        for (what, port) in [
            ("OTLP/HTTP", self.ports.otlp_http),
            ("OTLP/gRPC", self.ports.otlp_grpc),
        ] {
            TcpStream::connect_timeout(&loopback(port), Duration::from_secs(1))
                .with_context(|| format!("connecting to the {what} receiver on port {port}"))?;
        }
        let (status, body) = self.get(self.ports.admin, "/", &[])?;
        if status != 200 {
            bail!("the health check answered {status}: {body}");
        }
        self.get_json(self.ports.query, "/api/services", &[])?;
        Ok(())
    }

    /// The status and body of `GET path?query` on 127.0.0.1:`port`.
    fn get(&self, port: u16, path: &str, query: &[(&str, &str)]) -> Result<(u16, String)> {
        let url = format!("http://{}{path}", loopback(port));
        let mut request = self.http.get(&url);
        for (key, value) in query {
            request = request.query(*key, *value);
        }
        let mut response = request.call().with_context(|| format!("GET {url}"))?;
        let body = response
            .body_mut()
            .read_to_string()
            .with_context(|| format!("reading the answer to GET {url}"))?;
        Ok((response.status().as_u16(), body))
    }

    /// `GET path?query`, answered 200 with JSON.
    fn get_json(&self, port: u16, path: &str, query: &[(&str, &str)]) -> Result<Value> {
        let (status, body) = self.get(port, path, query)?;
        if status != 200 {
            bail!("GET {path} {query:?} answered {status}: {body:.2000}");
        }
        serde_json::from_str(&body).with_context(|| format!("GET {path} answered non-JSON"))
    }

    /// Where to send OTLP over HTTP: `http://127.0.0.1:PORT` (the exporter adds
    /// `/v1/traces`).
    pub fn otlp_http_endpoint(&self) -> String {
        format!("http://{}", loopback(self.ports.otlp_http))
    }

    /// Where to send OTLP over gRPC: `http://127.0.0.1:PORT` (plaintext).
    pub fn otlp_grpc_endpoint(&self) -> String {
        format!("http://{}", loopback(self.ports.otlp_grpc))
    }

    /// The query API and UI: `http://127.0.0.1:PORT`.
    pub fn query_endpoint(&self) -> String {
        format!("http://{}", loopback(self.ports.query))
    }

    /// The query API's answer to `GET /api/traces?service=SERVICE`, up to 1000 traces:
    /// `data[]` holds the traces, each with `spans[]` (`traceID`, `spanID`,
    /// `operationName`, `references[]` with `refType` `CHILD_OF` naming the parent,
    /// `startTime` and `duration` in µs, `tags[]` of `{key, type, value}`) and
    /// `processes`, whose `serviceName` is the resource's `service.name`.
    pub fn traces(&self, service: &str) -> Result<Value> {
        let limit = QUERY_LIMIT.to_string();
        self.get_json(
            self.ports.query,
            "/api/traces",
            &[("service", service), ("limit", &limit)],
        )
        .with_context(|| format!("asking Jaeger for the traces of {service:?}"))
    }

    /// Every span of `service` Jaeger holds, of all its traces (see [`Jaeger::traces`]).
    pub fn spans(&self, service: &str) -> Result<Vec<Value>> {
        Ok(spans_of(&self.traces(service)?))
    }

    /// Wait until Jaeger holds at least `count` spans of `service`, for at most
    /// `timeout`, and return all of them. Spans are stored shortly after the receiver
    /// has acknowledged them, not before the acknowledgement.
    pub fn wait_for_spans(
        &self,
        service: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<Value>> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.spans(service) {
                Ok(spans) if spans.len() >= count => return Ok(spans),
                other => other,
            };
            if Instant::now() >= deadline {
                let seen = match last {
                    Ok(spans) => format!("{} of them: {spans:?}", spans.len()),
                    Err(e) => format!("the last query failed: {e:#}"),
                };
                bail!(
                    "Jaeger did not have {count} spans of {service:?} within {timeout:?}; \
                     {seen:.4000}\nits log:\n{}",
                    self.log()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Jaeger's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Whether Jaeger's process runs.
    pub fn running(&self) -> bool {
        self.process.running()
    }

    /// The directory holding Jaeger's log, deleted when it stops.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The end of what Jaeger printed so far (its log), for error messages.
    pub fn log(&self) -> String {
        tail(&self.dir.join("jaeger.log"), 8000)
    }

    /// Stop Jaeger (SIGTERM, then SIGKILL if it lingers) and delete its directory. Also
    /// done on Drop.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        self.process.stop();
        // Normally the watchdog has deleted it already; this covers a wedged watchdog.
        if self.dir.exists() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
}

/// The spans of all traces in an answer of [`Jaeger::traces`].
pub fn spans_of(traces: &Value) -> Vec<Value> {
    traces["data"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|trace| trace["spans"].as_array().into_iter().flatten())
        .cloned()
        .collect()
}

/// The value of a span's tag (an OTLP attribute) named `key`.
pub fn span_tag<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["tags"]
        .as_array()?
        .iter()
        .find(|tag| tag["key"] == key)
        .map(|tag| &tag["value"])
}

/// The span id of a span's parent: its `CHILD_OF` reference.
pub fn span_parent(span: &Value) -> Option<&str> {
    span["references"]
        .as_array()?
        .iter()
        .find(|reference| reference["refType"] == "CHILD_OF")?["spanID"]
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_listener_is_on_loopback() {
        let args = Ports::pick().args();
        let host_ports: Vec<_> = args
            .iter()
            .filter_map(|arg| arg.to_str()?.split_once("host-port="))
            .collect();
        assert_eq!(host_ports.len(), 11, "{args:?}");
        for (flag, address) in host_ports {
            assert!(address.starts_with("127.0.0.1:"), "{flag}={address}");
        }
    }

    #[test]
    fn spans_tags_and_parents_are_read_from_the_query_answer() {
        let answer = json!({"data": [
            {"spans": [{"spanID": "a", "references": [], "tags": []}]},
            {"spans": [{
                "spanID": "b",
                "references": [
                    {"refType": "FOLLOWS_FROM", "spanID": "x"},
                    {"refType": "CHILD_OF", "spanID": "a"},
                ],
                "tags": [{"key": "rows", "type": "int64", "value": 7}],
            }]},
        ]});
        let spans = spans_of(&answer);
        assert_eq!(spans.len(), 2);
        assert_eq!(span_parent(&spans[0]), None);
        assert_eq!(span_parent(&spans[1]), Some("a"));
        assert_eq!(span_tag(&spans[1], "rows"), Some(&json!(7)));
        assert_eq!(span_tag(&spans[1], "missing"), None);
        assert!(spans_of(&json!({"data": null})).is_empty());
    }
}
