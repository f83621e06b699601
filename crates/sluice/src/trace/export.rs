//! The exporter: a task that takes finished spans off the tracer's queue, in batches,
//! and sends each batch to the receiver over OTLP/HTTP (protobuf) or gRPC. A batch that
//! fails or takes longer than the timeout is dropped and counted; the queue before it is
//! bounded, so that nothing here ever holds a statement up.

use super::otlp;
use super::{Finished, Protocol};
use crate::stats::Stats;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Spans sent in one request at most.
const BATCH: usize = 512;
/// How long a batch waits for more spans after its first.
const LINGER: Duration = Duration::from_millis(200);

/// Where spans go: an OTLP/HTTP URL, or a gRPC endpoint.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Http {
        /// `host:port`, as connected to and as the `Host` header.
        authority: String,
        /// The traces path: the endpoint's own path with `/v1/traces` after it.
        path: String,
    },
    Grpc(String),
}

impl Endpoint {
    /// An endpoint as OpenTelemetry's exporters take it: `http://host:port[/path]`.
    pub fn parse(url: &str, protocol: Protocol) -> Result<Endpoint, String> {
        let rest = match url.strip_prefix("http://") {
            Some(rest) => rest,
            None if url.starts_with("https://") => {
                return Err("https is not supported: use http, or a collector beside Sluice".into())
            }
            None => return Err("must start with http://".into()),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let port_ok = authority
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err("needs a host and a port (http://host:4318)".into());
        }
        Ok(match protocol {
            Protocol::HttpProtobuf => Endpoint::Http {
                authority: authority.to_owned(),
                path: format!("{}/v1/traces", path.trim_end_matches('/')),
            },
            Protocol::Grpc => Endpoint::Grpc(format!("http://{authority}")),
        })
    }
}

pub struct Exporter {
    endpoint: Endpoint,
    resource: Resource,
    timeout: Duration,
    stats: Arc<Stats>,
    http: Option<SendRequest<Full<Bytes>>>,
    grpc: Option<TraceServiceClient<tonic::transport::Channel>>,
}

impl Exporter {
    pub fn new(
        endpoint: Endpoint,
        resource: Resource,
        timeout: Duration,
        stats: Arc<Stats>,
    ) -> Self {
        Exporter {
            endpoint,
            resource,
            timeout,
            stats,
            http: None,
            grpc: None,
        }
    }

    /// Until every sender is gone: a batch at a time.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Finished>) {
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(first) = rx.recv().await {
            batch.push(first);
            let linger = tokio::time::sleep(LINGER);
            tokio::pin!(linger);
            while batch.len() < BATCH {
                tokio::select! {
                    more = rx.recv() => match more {
                        Some(s) => batch.push(s),
                        None => break,
                    },
                    _ = &mut linger => break,
                }
            }
            let n = batch.len() as u64;
            let request = otlp::request(&self.resource, std::mem::take(&mut batch));
            match tokio::time::timeout(self.timeout, self.send(request)).await {
                Ok(Ok(())) => Stats::add(&self.stats.spans_exported, n),
                Ok(Err(why)) => self.failed(n, &why),
                Err(_) => self.failed(n, "timed out"),
            }
        }
    }

    fn failed(&mut self, n: u64, why: &str) {
        Stats::add(&self.stats.spans_dropped, n);
        // The connection may be anywhere in an exchange: a new one for the next batch.
        self.http = None;
        tracing::warn!(spans = n, %why, "trace export failed; spans dropped");
    }

    async fn send(
        &mut self,
        request: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
    ) -> Result<(), String> {
        match self.endpoint.clone() {
            Endpoint::Http { authority, path } => {
                self.send_http(&authority, &path, request.encode_to_vec())
                    .await
            }
            Endpoint::Grpc(uri) => {
                if self.grpc.is_none() {
                    let channel = tonic::transport::Channel::from_shared(uri)
                        .map_err(|e| e.to_string())?
                        .connect_timeout(self.timeout)
                        .connect_lazy();
                    self.grpc = Some(TraceServiceClient::new(channel));
                }
                let client = self.grpc.as_mut().expect("made above");
                client
                    .export(request)
                    .await
                    .map(drop)
                    .map_err(|s| s.to_string())
            }
        }
    }

    async fn send_http(
        &mut self,
        authority: &str,
        path: &str,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let ready = match self.http.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !ready {
            self.http = Some(connect(authority).await?);
        }
        let sender = self.http.as_mut().expect("connected above");
        let request = hyper::Request::post(path)
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        // Read to its end, so that the connection serves the next batch.
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body.to_bytes())
                .chars()
                .take(200)
                .collect::<String>();
            return Err(format!("the receiver answered {status}: {text}"));
        }
        Ok(())
    }
}

async fn connect(authority: &str) -> Result<SendRequest<Full<Bytes>>, String> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connecting to {authority}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let io = hyper_util::rt::TokioIo::new(stream);
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_read_as_opentelemetry_exporters_read_them() {
        match Endpoint::parse("http://127.0.0.1:4318", Protocol::HttpProtobuf).unwrap() {
            Endpoint::Http { authority, path } => {
                assert_eq!(
                    (authority.as_str(), path.as_str()),
                    ("127.0.0.1:4318", "/v1/traces")
                )
            }
            e => panic!("{e:?}"),
        }
        match Endpoint::parse("http://collector:4318/otlp/", Protocol::HttpProtobuf).unwrap() {
            Endpoint::Http { path, .. } => assert_eq!(path, "/otlp/v1/traces"),
            e => panic!("{e:?}"),
        }
        match Endpoint::parse("http://[::1]:4317", Protocol::Grpc).unwrap() {
            Endpoint::Grpc(uri) => assert_eq!(uri, "http://[::1]:4317"),
            e => panic!("{e:?}"),
        }
        for bad in [
            "127.0.0.1:4318",
            "https://x:4318",
            "http://x",
            "http://:4318",
            "http://x:port",
        ] {
            assert!(
                Endpoint::parse(bad, Protocol::HttpProtobuf).is_err(),
                "{bad}"
            );
        }
    }
}
