//! OpenTelemetry traces of what Sluice does with each statement: one span per client
//! statement, with children for the stages that take time (the cache's lookup and fill,
//! the lease and what it holds: the pool's queue, a GTID wait, the session's sync; the
//! server's round trip, each shard's part, a replay), exported over OTLP. Beside the
//! request path rather than on it: a session records its statement's span as plain
//! values (`StatementSpan`), and a task of its own ([`export`]) encodes and sends them,
//! so that a slow or absent receiver costs a statement nothing but a dropped span.
//!
//! An application's own trace goes on through Sluice: the `traceparent` of a
//! sqlcommenter comment in the statement ([`context`]) is the parent of its span.

pub mod context;
mod export;
mod otlp;

pub use context::{parent_in, rewrite_parent, TraceParent};

use crate::stats::Stats;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// `[tracing]`: where spans go, and which statements have one. Off unless `endpoint`
/// is set.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TracingConfig {
    /// The receiver, as OpenTelemetry's exporters take `OTEL_EXPORTER_OTLP_ENDPOINT`:
    /// `http://host:4318` for OTLP/HTTP (spans go to `/v1/traces` under it), or
    /// `http://host:4317` with `protocol = "grpc"`.
    pub endpoint: Option<String>,
    pub protocol: Protocol,
    /// The share of statements traced that no caller's trace decides: a statement whose
    /// `traceparent` says its caller recorded its span is always traced, one whose
    /// caller did not is never (parent-based, as OpenTelemetry's default sampler).
    pub sample_ratio: f64,
    /// `service.name` of every span.
    pub service_name: String,
    /// Other resource attributes (`deployment.environment.name = "prod"`, ...).
    pub resource: BTreeMap<String, String>,
    /// Puts the statement's text in `db.query.text`: off by default, since it holds the
    /// values the application sent.
    pub query_text: bool,
    /// Sends a statement's `traceparent` on to the server naming Sluice's span as the
    /// parent (the statement otherwise goes as the client sent it).
    pub propagate: bool,
    /// Spans waiting for export at most: a full queue drops new spans (counted) rather
    /// than slow a statement down.
    pub queue: usize,
    /// A batch's export is given up after this long (its spans counted as dropped).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            endpoint: None,
            protocol: Protocol::HttpProtobuf,
            sample_ratio: 0.01,
            service_name: "sluice".into(),
            resource: BTreeMap::new(),
            query_text: false,
            propagate: false,
            queue: 4096,
            timeout: Duration::from_secs(10),
        }
    }
}

impl TracingConfig {
    pub fn validate(&self, problems: &mut Vec<String>) {
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            problems.push("tracing.sample_ratio must be between 0 and 1".into());
        }
        if self.queue == 0 {
            problems.push("tracing.queue must be at least 1".into());
        }
        if let Some(e) = &self.endpoint {
            if let Err(why) = export::Endpoint::parse(e, self.protocol) {
                problems.push(format!("tracing.endpoint {e:?}: {why}"));
            }
        }
    }
}

/// OTLP's transports, named as `OTEL_EXPORTER_OTLP_PROTOCOL` names them.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum Protocol {
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    #[serde(rename = "grpc")]
    Grpc,
}

/// A value of a span's attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    /// A constant: no allocation on the statement's path.
    Static(&'static str),
    Int(i64),
    Bool(bool),
}

/// The stage that sends the statement to its server and reads the reply.
pub const SERVER_ROUND_TRIP: &str = "server round trip";

/// One stage of a statement: a child of its span, or of a stage that holds others.
#[derive(Debug, Clone)]
pub struct Stage {
    pub name: &'static str,
    pub start: Instant,
    pub end: Instant,
    pub attributes: Vec<(&'static str, Value)>,
    /// Its span id, when stages under it name it as their parent (an [`Open`] one).
    pub id: Option<[u8; 8]>,
    /// The stage it is part of; `None`: the statement itself.
    pub parent: Option<[u8; 8]>,
}

/// A stage that holds others (a lease holds its queue wait and its session sync),
/// opened by [`StatementSpan::open`]: the stages recorded until it is closed are its
/// children. Opened stages nest; one never closed (its statement ended early) leaves
/// its children to the statement.
#[derive(Debug)]
pub struct Open {
    id: [u8; 8],
    outer: Option<[u8; 8]>,
    start: Instant,
}

/// The span of a statement in flight, recorded by its session: ids, times and what the
/// stages learnt. Made only for a statement that is traced.
#[derive(Debug)]
pub struct StatementSpan {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The application's span, from the statement's `traceparent`.
    pub parent: Option<[u8; 8]>,
    pub start: Instant,
    /// `start` on the wall clock, in ns since the epoch: the stages' times follow from
    /// their `Instant`s, so that the clock is read once a span.
    start_unix_nanos: u64,
    pub stages: Vec<Stage>,
    pub attributes: Vec<(&'static str, Value)>,
    /// The server's round trip in progress: when the request went, and its first
    /// reply's arrival.
    pub server_sent: Option<Instant>,
    pub server_first: Option<Instant>,
    /// The server round trip's span id, made first so that it can be sent on to the
    /// server as the statement's parent (`propagate`).
    pub server_span_id: [u8; 8],
    /// Where, in the statement's text, the caller's `traceparent` can be written over
    /// (with `propagate`).
    pub propagate_at: Option<usize>,
    /// When the cache's lookup after the lease began.
    pub cache_at: Option<Instant>,
    /// The stage open now, the parent of the stages recorded.
    open: Option<[u8; 8]>,
    /// The server's error, when it answered one: its code and SQL state.
    pub server_error: Option<(u16, [u8; 5])>,
    /// The cache's lookups (before the lease, after it, or both), from the first's
    /// start to the last's decision: a stage at the span's end.
    pub cache_lookup: Option<(Instant, Instant)>,
}

impl StatementSpan {
    /// A stage from `start` until now.
    pub fn stage(
        &mut self,
        name: &'static str,
        start: Instant,
        attributes: Vec<(&'static str, Value)>,
    ) {
        self.stages.push(Stage {
            name,
            start,
            end: Instant::now(),
            attributes,
            id: None,
            parent: self.open,
        });
    }

    /// Opens a stage that holds the stages recorded until [`Self::close`].
    pub fn open(&mut self) -> Open {
        let id = new_span_id();
        Open {
            id,
            outer: self.open.replace(id),
            start: Instant::now(),
        }
    }

    /// Closes `open` as a stage named `name`, ending now.
    pub fn close(
        &mut self,
        open: Open,
        name: &'static str,
        attributes: Vec<(&'static str, Value)>,
    ) {
        self.open = open.outer;
        self.stages.push(Stage {
            name,
            start: open.start,
            end: Instant::now(),
            attributes,
            id: Some(open.id),
            parent: open.outer,
        });
    }

    pub fn set(&mut self, key: &'static str, value: Value) {
        self.attributes.push((key, value));
    }

    /// The server's round trip ended (its last reply read): a `server` stage, with the
    /// time to its first byte.
    pub fn server_done(&mut self, server: &str) {
        let Some(sent) = self.server_sent.take() else {
            return;
        };
        let mut attributes = vec![("server.address", Value::Str(server.to_owned()))];
        if let Some(first) = self.server_first.take() {
            let us = first.saturating_duration_since(sent).as_micros();
            attributes.push(("sluice.server.first_byte_us", Value::Int(us as i64)));
        }
        self.stage(SERVER_ROUND_TRIP, sent, attributes);
    }
}

/// A finished span as it is exported.
#[derive(Debug, Clone)]
pub struct Finished {
    pub name: String,
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub kind: Kind,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    pub attributes: Vec<(&'static str, Value)>,
    /// The statement failed: the span's status is an error, with this message.
    pub error: Option<String>,
}

/// OpenTelemetry's span kinds Sluice uses: a statement is served to a client and sent
/// to a server; its stages are internal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Server,
    Client,
    Internal,
}

/// The tracing of a running Sluice: the sampler, and the queue to the exporter.
pub struct Tracer {
    config: TracingConfig,
    /// `sample_ratio` scaled to the range of a trace id's last eight bytes.
    threshold: u64,
    queue: mpsc::Sender<Finished>,
    stats: Arc<Stats>,
}

impl Tracer {
    /// Starts the exporter when `[tracing]` names an endpoint; `None` when tracing is
    /// off. Needs a tokio runtime.
    pub fn start(config: &TracingConfig, stats: Arc<Stats>) -> Option<Arc<Tracer>> {
        let endpoint = config.endpoint.as_deref()?;
        let endpoint = match export::Endpoint::parse(endpoint, config.protocol) {
            Ok(e) => e,
            Err(why) => {
                tracing::error!(%why, "tracing.endpoint is not usable: no spans are exported");
                return None;
            }
        };
        let (tx, rx) = mpsc::channel(config.queue.max(1));
        let resource = otlp::resource(&config.service_name, &config.resource);
        let exporter = export::Exporter::new(endpoint, resource, config.timeout, stats.clone());
        tokio::spawn(exporter.run(rx));
        Some(Arc::new(Tracer {
            threshold: ratio_threshold(config.sample_ratio),
            config: config.clone(),
            queue: tx,
            stats,
        }))
    }

    pub fn config(&self) -> &TracingConfig {
        &self.config
    }

    /// A span for a statement starting now, when it is traced: always under a caller
    /// that recorded its own, never under one that did not, else at the sample ratio.
    pub fn start_statement(&self, parent: Option<TraceParent>) -> Option<Box<StatementSpan>> {
        let trace_id = match parent {
            Some(p) if !p.sampled => return None,
            Some(p) => p.trace_id,
            None => self.sample_new()?,
        };
        Some(Box::new(StatementSpan {
            trace_id,
            span_id: new_span_id(),
            parent: parent.map(|p| p.span_id),
            start: Instant::now(),
            start_unix_nanos: unix_nanos_now(),
            stages: Vec::new(),
            attributes: Vec::new(),
            server_sent: None,
            server_first: None,
            server_span_id: new_span_id(),
            propagate_at: None,
            cache_at: None,
            cache_lookup: None,
            open: None,
            server_error: None,
        }))
    }

    /// The statement's span ended: it and its stages go to the exporter, or are counted
    /// as dropped when its queue is full.
    pub fn finish(&self, span: StatementSpan, name: String, error: Option<String>) {
        let end = Instant::now();
        let StatementSpan {
            trace_id,
            span_id,
            parent,
            start,
            start_unix_nanos,
            stages,
            attributes,
            server_span_id,
            ..
        } = span;
        let unix = |at: Instant| {
            let since = at.saturating_duration_since(start).as_nanos() as u64;
            start_unix_nanos.saturating_add(since)
        };
        // A stage whose parent was never closed (its statement ended on the way) is the
        // statement's.
        let closed: Vec<[u8; 8]> = stages.iter().filter_map(|s| s.id).collect();
        for stage in stages {
            let round_trip = stage.name == SERVER_ROUND_TRIP;
            let parent = stage.parent.filter(|p| closed.contains(p));
            self.send(Finished {
                name: stage.name.to_owned(),
                trace_id,
                span_id: match (stage.id, round_trip) {
                    (Some(id), _) => id,
                    (None, true) => server_span_id,
                    (None, false) => new_span_id(),
                },
                parent: Some(parent.unwrap_or(span_id)),
                kind: if round_trip {
                    Kind::Client
                } else {
                    Kind::Internal
                },
                start_unix_nanos: unix(stage.start),
                end_unix_nanos: unix(stage.end),
                attributes: stage.attributes,
                error: None,
            });
        }
        self.send(Finished {
            name,
            trace_id,
            span_id,
            parent,
            kind: Kind::Server,
            start_unix_nanos,
            end_unix_nanos: unix(end),
            attributes,
            error,
        });
    }

    /// A span of its own (a session's login, its end), outside any statement.
    pub fn record(&self, span: Finished) {
        self.send(span);
    }

    fn send(&self, span: Finished) {
        if self.queue.try_send(span).is_err() {
            Stats::incr(&self.stats.spans_dropped);
        }
    }

    /// A new trace's id, when a trace with no caller is sampled (at the ratio, by the id).
    pub fn sample_new(&self) -> Option<[u8; 16]> {
        // The decision reads only the id's low half, so that half is drawn first, from a
        // cheap per-thread generator: most statements are not sampled and need nothing
        // more. The high half comes from `rand`'s generator for a sampled one only.
        let low = fastrand::u64(..);
        if (low >> 1) >= self.threshold {
            return None;
        }
        let high: u64 = rand::random();
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&high.to_be_bytes());
        id[8..].copy_from_slice(&low.to_be_bytes());
        // The all-zero id is invalid (W3C Trace Context).
        id[15] |= u8::from(id == [0; 16]);
        debug_assert!(sampled(&id, self.threshold));
        Some(id)
    }
}

/// OpenTelemetry's `TraceIdRatioBased`: a trace is sampled when its id's last eight bytes
/// fall under the ratio, so that every service applying the same ratio agrees.
fn sampled(trace_id: &[u8; 16], threshold: u64) -> bool {
    let low = u64::from_be_bytes(trace_id[8..].try_into().expect("eight bytes"));
    (low >> 1) < threshold
}

fn ratio_threshold(ratio: f64) -> u64 {
    if ratio >= 1.0 {
        return u64::MAX;
    }
    (ratio.max(0.0) * (1u64 << 63) as f64) as u64
}

pub fn new_span_id() -> [u8; 8] {
    rand::random::<u64>().max(1).to_be_bytes()
}

pub fn unix_nanos_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_decides_by_the_trace_id() {
        assert!(sampled(&[0xff; 16], ratio_threshold(1.0)));
        assert!(!sampled(&[0; 16], ratio_threshold(0.0)));
        let half = ratio_threshold(0.5);
        let mut low = [0u8; 16];
        low[8] = 0x7f;
        let mut high = [0u8; 16];
        high[8] = 0x80;
        high[9] = 1;
        assert!(sampled(&low, half));
        assert!(!sampled(&high, half));
        // Over many new statements, the share sampled is the ratio; each sampled id is
        // one the ratio samples (a receiver re-deciding by the id agrees), and new.
        let (tx, _rx) = mpsc::channel(1);
        let tracer = Tracer {
            config: TracingConfig::default(),
            threshold: ratio_threshold(0.1),
            queue: tx,
            stats: Arc::new(Stats::default()),
        };
        let ids: Vec<[u8; 16]> = (0..20_000).filter_map(|_| tracer.sample_new()).collect();
        let n = ids.len();
        assert!((1_500..2_500).contains(&n), "{n} of 20,000 sampled at 0.1");
        assert!(ids.iter().all(|id| sampled(id, tracer.threshold)));
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), n);
        assert!(
            ids.iter().all(|id| id[..8] != [0; 8]),
            "the high half is drawn too"
        );
    }

    /// Stages opened nest; a stage recorded under one never closed is the statement's.
    #[test]
    fn opened_stages_hold_the_stages_recorded_inside_them() {
        let (tx, mut rx) = mpsc::channel(16);
        let tracer = Tracer {
            config: TracingConfig::default(),
            threshold: u64::MAX,
            queue: tx,
            stats: Arc::new(Stats::default()),
        };
        let mut span = tracer.start_statement(None).expect("sampled at 1");
        let shard = span.open();
        let lease = span.open();
        span.stage("queue wait", Instant::now(), Vec::new());
        span.close(lease, "lease", Vec::new());
        span.close(shard, "shard", Vec::new());
        let _never_closed = span.open();
        span.stage("orphan", Instant::now(), Vec::new());
        let statement = span.span_id;
        tracer.finish(*span, "SELECT ?".into(), None);
        let mut by_name = std::collections::HashMap::new();
        while let Ok(f) = rx.try_recv() {
            by_name.insert(f.name.clone(), f);
        }
        let id = |n: &str| by_name[n].span_id;
        let parent = |n: &str| by_name[n].parent;
        assert_eq!(parent("queue wait"), Some(id("lease")));
        assert_eq!(parent("lease"), Some(id("shard")));
        assert_eq!(parent("shard"), Some(statement));
        assert_eq!(parent("orphan"), Some(statement));
        assert_eq!(parent("SELECT ?"), None);
    }

    #[test]
    fn a_config_out_of_range_is_refused() {
        let mut p = Vec::new();
        let bad = TracingConfig {
            sample_ratio: 1.5,
            queue: 0,
            endpoint: Some("ftp://x".into()),
            ..TracingConfig::default()
        };
        bad.validate(&mut p);
        assert_eq!(p.len(), 3, "{p:?}");
        let mut p = Vec::new();
        let good = TracingConfig {
            endpoint: Some("http://127.0.0.1:4318".into()),
            ..TracingConfig::default()
        };
        good.validate(&mut p);
        assert!(p.is_empty(), "{p:?}");
    }
}
