//! Finished spans as OTLP messages (OpenTelemetry's own protobuf definitions), the same
//! for both transports.

use super::{Finished, Kind, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};
use std::collections::BTreeMap;

/// The resource every span of this process belongs to.
pub fn resource(service_name: &str, extra: &BTreeMap<String, String>) -> Resource {
    let mut attributes = vec![
        kv("service.name", Value::Str(service_name.to_owned())),
        kv(
            "service.version",
            Value::Str(env!("CARGO_PKG_VERSION").to_owned()),
        ),
        kv("process.pid", Value::Int(i64::from(std::process::id()))),
    ];
    for (k, v) in extra {
        attributes.retain(|a| &a.key != k);
        attributes.push(kv(k, Value::Str(v.clone())));
    }
    Resource {
        attributes,
        ..Default::default()
    }
}

/// One export request of `spans`.
pub fn request(resource: &Resource, spans: Vec<Finished>) -> ExportTraceServiceRequest {
    let spans = spans.into_iter().map(span).collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "sluice".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn span(f: Finished) -> Span {
    let kind = match f.kind {
        Kind::Server => span::SpanKind::Server,
        Kind::Client => span::SpanKind::Client,
        Kind::Internal => span::SpanKind::Internal,
    };
    let status = match f.error {
        Some(message) => Status {
            message,
            code: status::StatusCode::Error as i32,
        },
        None => Status::default(),
    };
    Span {
        trace_id: f.trace_id.to_vec(),
        span_id: f.span_id.to_vec(),
        parent_span_id: f.parent.map(|p| p.to_vec()).unwrap_or_default(),
        name: f.name,
        kind: kind as i32,
        start_time_unix_nano: f.start_unix_nanos,
        end_time_unix_nano: f.end_unix_nanos.max(f.start_unix_nanos),
        attributes: f.attributes.into_iter().map(|(k, v)| kv(k, v)).collect(),
        status: Some(status),
        ..Default::default()
    }
}

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(any(value)),
        ..Default::default()
    }
}

fn any(value: Value) -> AnyValue {
    AnyValue {
        value: Some(match value {
            Value::Str(s) => any_value::Value::StringValue(s),
            Value::Static(s) => any_value::Value::StringValue(s.to_owned()),
            Value::Int(i) => any_value::Value::IntValue(i),
            Value::Bool(b) => any_value::Value::BoolValue(b),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_span_keeps_its_ids_parent_times_attributes_and_error() {
        let f = Finished {
            name: "SELECT ? FROM t".into(),
            trace_id: [7; 16],
            span_id: [8; 8],
            parent: Some([9; 8]),
            kind: Kind::Server,
            start_unix_nanos: 1_000,
            end_unix_nanos: 5_000,
            attributes: vec![("db.system.name", Value::Str("mariadb".into()))],
            error: Some("1146".into()),
        };
        let resource = resource("sluice-test", &BTreeMap::from([("a".into(), "b".into())]));
        let bytes = request(&resource, vec![f]).encode_to_vec();
        let back = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("decodes");
        let rs = &back.resource_spans[0];
        let attrs = &rs.resource.as_ref().unwrap().attributes;
        assert!(attrs
            .iter()
            .any(|a| a.key == "service.name"
                && a.value == Some(any(Value::Str("sluice-test".into())))));
        assert!(attrs.iter().any(|a| a.key == "a"));
        let s = &rs.scope_spans[0].spans[0];
        assert_eq!(s.trace_id, vec![7; 16]);
        assert_eq!(s.parent_span_id, vec![9; 8]);
        assert_eq!(
            (s.start_time_unix_nano, s.end_time_unix_nano),
            (1_000, 5_000)
        );
        assert_eq!(s.kind, span::SpanKind::Server as i32);
        assert_eq!(
            s.status.as_ref().unwrap().code,
            status::StatusCode::Error as i32
        );
        assert_eq!(s.attributes[0].key, "db.system.name");
    }
}
