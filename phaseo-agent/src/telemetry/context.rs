//! W3C trace context kept with a run and carried over MCP.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tracing::Span;

/// The longest `tracestate` kept or passed on, in bytes. W3C trace context lets a receiver cut
/// it at 512 characters; a longer one from outside (a stored state, an MCP peer's `_meta`) is
/// dropped, the `traceparent` kept.
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// A span's W3C trace context: its `traceparent` header (`00-<trace id>-<span id>-<flags>`) and
/// `tracestate`, when it has one.
///
/// A run keeps the context of its last span in its [`RunState`](crate::RunState), so the span of
/// the run that resumes it (in another process, days later) links to the span that paused it. It
/// is set only when spans are exported to OpenTelemetry (the feature `otel` with its layer
/// installed); otherwise a state carries none, and its stored form is as before.
///
/// ```
/// use phaseo_agent::telemetry::TraceContext;
///
/// let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// let context = TraceContext::parse(parent, Some("vendor=1")).unwrap();
/// assert_eq!(context.traceparent(), parent);
/// // What is not a W3C traceparent is refused, not passed on.
/// assert!(TraceContext::parse("00-xyz", None).is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    traceparent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracestate: Option<String>,
}

impl TraceContext {
    /// A trace context from its two headers; `None` unless `traceparent` is a well-formed
    /// version-00 header with a non-zero trace id and span id. A `tracestate` longer than
    /// [`MAX_TRACESTATE_BYTES`] or with characters outside printable ASCII is dropped.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let bytes = traceparent.as_bytes();
        let hex = |range: std::ops::Range<usize>| {
            bytes[range.clone()]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                && bytes[range].iter().any(|b| *b != b'0')
        };
        let well_formed = bytes.len() == 55
            && traceparent.starts_with("00-")
            && bytes[35] == b'-'
            && bytes[52] == b'-'
            && hex(3..35)
            && hex(36..52)
            && bytes[53..55]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
        if !well_formed {
            return None;
        }
        let tracestate = tracestate
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE_BYTES)
            .filter(|s| s.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .map(str::to_owned);
        Some(TraceContext {
            traceparent: traceparent.to_owned(),
            tracestate,
        })
    }

    /// The `traceparent` header.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header, when there is one.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace context of the current span, when spans go to OpenTelemetry (feature `otel`,
    /// with [`otel`](crate::otel)'s layer or `tracing-opentelemetry`'s installed); `None`
    /// otherwise.
    pub fn current() -> Option<Self> {
        Self::of(&Span::current())
    }

    /// The trace context of `span`, when spans go to OpenTelemetry; `None` otherwise.
    pub fn of(span: &Span) -> Option<Self> {
        #[cfg(feature = "otel")]
        {
            let (parent, state) = otel::of(span)?;
            Self::parse(&parent, state.as_deref())
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = span;
            None
        }
    }

    /// The trace context an MCP request or result carries in its `_meta` (the keys `traceparent`
    /// and `tracestate`, as MCP's trace-context convention names them), if well formed.
    pub fn from_meta(meta: &Map<String, Value>) -> Option<Self> {
        let traceparent = meta.get("traceparent")?.as_str()?;
        let tracestate = meta.get("tracestate").and_then(Value::as_str);
        Self::parse(traceparent, tracestate)
    }

    /// Writes this context into an MCP `_meta` object.
    pub fn to_meta(&self, meta: &mut Map<String, Value>) {
        meta.insert(
            "traceparent".into(),
            Value::String(self.traceparent.clone()),
        );
        if let Some(state) = &self.tracestate {
            meta.insert("tracestate".into(), Value::String(state.clone()));
        }
    }

    /// Adds a link from `span` to this context, with the link's kind (`phaseo.link.kind`).
    pub(crate) fn link_from(&self, span: &Span, kind: &'static str) {
        #[cfg(feature = "otel")]
        otel::link(&self.traceparent, self.tracestate.as_deref(), span, kind);
        #[cfg(not(feature = "otel"))]
        let _ = (span, kind);
    }

    /// Makes this (remote) context the parent of `span`, which must not have been entered yet.
    #[allow(dead_code)] // used by the MCP server span, next
    pub(crate) fn parent_of(&self, span: &Span) {
        #[cfg(feature = "otel")]
        otel::parent(&self.traceparent, self.tracestate.as_deref(), span);
        #[cfg(not(feature = "otel"))]
        let _ = span;
    }
}

/// The W3C propagator between headers and OpenTelemetry contexts (headers in, headers out: the
/// parsing and bounds are `TraceContext`'s).
#[cfg(feature = "otel")]
mod otel {
    use std::collections::HashMap;

    use opentelemetry::KeyValue;
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use crate::telemetry::semconv::PHASEO_LINK_KIND;

    /// The `traceparent` and `tracestate` of `span`'s context; `None` when the span has no valid
    /// OpenTelemetry context (no layer installed, or the span is disabled).
    pub(super) fn of(span: &Span) -> Option<(String, Option<String>)> {
        let context = span.context();
        if !context.span().span_context().is_valid() {
            return None;
        }
        let mut headers = HashMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut headers);
        let parent = headers.remove("traceparent")?;
        Some((
            parent,
            headers.remove("tracestate").filter(|s| !s.is_empty()),
        ))
    }

    fn extract(parent: &str, state: Option<&str>) -> opentelemetry::Context {
        let mut headers = HashMap::new();
        headers.insert("traceparent".to_owned(), parent.to_owned());
        if let Some(state) = state {
            headers.insert("tracestate".to_owned(), state.to_owned());
        }
        TraceContextPropagator::new().extract(&headers)
    }

    pub(super) fn link(parent: &str, state: Option<&str>, span: &Span, kind: &'static str) {
        let remote = extract(parent, state);
        let span_context = remote.span().span_context().clone();
        if span_context.is_valid() {
            span.add_link_with_attributes(
                span_context,
                vec![KeyValue::new(PHASEO_LINK_KIND, kind)],
            );
        }
    }

    #[allow(dead_code)] // used by the MCP server span, next
    pub(super) fn parent(parent: &str, state: Option<&str>, span: &Span) {
        let remote = extract(parent, state);
        if remote.span().span_context().is_valid() {
            // Refused only for a span already entered, which the callers never pass.
            let _ = span.set_parent(remote);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_refuses_what_is_not_a_traceparent() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(TraceContext::parse(good, None).is_some());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        ] {
            assert!(TraceContext::parse(bad, None).is_none(), "{bad:?}");
        }
        let long = "a=".to_owned() + &"b".repeat(MAX_TRACESTATE_BYTES);
        let kept = TraceContext::parse(good, Some(&long)).unwrap();
        assert_eq!(kept.tracestate(), None);
        let control = TraceContext::parse(good, Some("a=b\nc")).unwrap();
        assert_eq!(control.tracestate(), None);
    }

    #[test]
    fn meta_round_trip() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = TraceContext::parse(good, Some("k=v")).unwrap();
        let mut meta = Map::new();
        context.to_meta(&mut meta);
        assert_eq!(TraceContext::from_meta(&meta), Some(context));
        meta.insert("traceparent".into(), Value::from(7));
        assert_eq!(TraceContext::from_meta(&meta), None);
    }
}
