//! The runtime's spans and metrics captured in memory: the OpenTelemetry SDK's in-memory
//! exporters behind the same `tracing-opentelemetry` layers a user installs, set as this thread's
//! subscriber (a `#[tokio::test]` runs on one thread, so a test sees only its own spans).

use std::collections::HashMap;

use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::layer::SubscriberExt;

/// What this thread's spans and metrics went to, while it lives.
pub struct Captured {
    spans: InMemorySpanExporter,
    metrics: InMemoryMetricExporter,
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    _guard: DefaultGuard,
}

/// Captures this thread's spans and metrics until the result is dropped.
pub fn capture() -> Captured {
    // tracing-core caches each callsite's interest over the dispatchers alive when it is
    // (re)computed. While tests on other threads set and drop their own subscribers, a callsite
    // first reached when no capturing subscriber was alive could keep "never" and be skipped for
    // this one. A dispatcher kept for the whole process that always says "sometimes" keeps every
    // callsite asking each thread's subscriber.
    static KEPT: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    KEPT.get_or_init(|| tracing::Dispatch::new(Sometimes));
    let spans = InMemorySpanExporter::default();
    let tracer_provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let metrics = InMemoryMetricExporter::default();
    let meter_provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics.clone()).build())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("test")))
        .with(tracing_opentelemetry::MetricsLayer::new(
            meter_provider.clone(),
        ));
    let guard = tracing::subscriber::set_default(subscriber);
    Captured {
        spans,
        metrics,
        tracer_provider,
        meter_provider,
        _guard: guard,
    }
}

/// One data point of a metric: its attributes (as text), and its value (a counter's sum, or a
/// histogram's count and sum).
#[derive(Debug, Clone)]
pub struct Point {
    pub attributes: HashMap<String, String>,
    pub count: u64,
    pub sum: f64,
    pub unit: String,
}

impl Captured {
    /// Every ended span so far, in the order they ended.
    pub fn spans(&self) -> Vec<SpanData> {
        self.tracer_provider.force_flush().expect("flush spans");
        self.spans.get_finished_spans().expect("spans")
    }

    /// The data points of the metric `name`, collected now (cumulative).
    pub fn points(&self, name: &str) -> Vec<Point> {
        self.meter_provider.force_flush().expect("flush metrics");
        let exported = self.metrics.get_finished_metrics().expect("metrics");
        // The latest collection holds every point so far (cumulative temporality).
        let Some(last) = exported.last() else {
            return Vec::new();
        };
        let text = |kvs: &mut dyn Iterator<Item = &KeyValue>| {
            kvs.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect::<HashMap<_, _>>()
        };
        let mut points = Vec::new();
        for scope in last.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                let unit = metric.unit().to_owned();
                match metric.data() {
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        points.extend(h.data_points().map(|p| Point {
                            attributes: text(&mut p.attributes()),
                            count: p.count(),
                            sum: p.sum(),
                            unit: unit.clone(),
                        }))
                    }
                    AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                        points.extend(h.data_points().map(|p| Point {
                            attributes: text(&mut p.attributes()),
                            count: p.count(),
                            sum: p.sum() as f64,
                            unit: unit.clone(),
                        }))
                    }
                    AggregatedMetrics::U64(MetricData::Sum(s)) => {
                        points.extend(s.data_points().map(|p| Point {
                            attributes: text(&mut p.attributes()),
                            count: p.value(),
                            sum: p.value() as f64,
                            unit: unit.clone(),
                        }))
                    }
                    AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                        points.extend(g.data_points().map(|p| Point {
                            attributes: text(&mut p.attributes()),
                            count: p.value(),
                            sum: p.value() as f64,
                            unit: unit.clone(),
                        }))
                    }
                    AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                        points.extend(g.data_points().map(|p| Point {
                            attributes: text(&mut p.attributes()),
                            count: 1,
                            sum: p.value(),
                            unit: unit.clone(),
                        }))
                    }
                    other => panic!("{name}: unexpected data {other:?}"),
                }
            }
        }
        points
    }
}

/// The spans named `name` (the OpenTelemetry name: `chat scripted`, `execute_tool deploy`).
pub fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// The one span named `name`.
pub fn one<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one span {name:?}, in {:?}", names(spans));
    found[0]
}

/// The names of the spans, in order.
pub fn names(spans: &[SpanData]) -> Vec<String> {
    spans.iter().map(|s| s.name.to_string()).collect()
}

/// A span's attribute.
pub fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

/// A span's attribute as text (`""` when absent).
pub fn text(span: &SpanData, key: &str) -> String {
    attr(span, key).map(Value::to_string).unwrap_or_default()
}

/// The spans whose parent is `parent`.
pub fn children<'a>(spans: &'a [SpanData], parent: &SpanData) -> Vec<&'a SpanData> {
    let id: SpanId = parent.span_context.span_id();
    spans.iter().filter(|s| s.parent_span_id == id).collect()
}

/// A subscriber that enables nothing but says every callsite's interest is "sometimes", so that
/// tracing-core never caches "never" for a callsite (see [`capture`]).
struct Sometimes;

impl tracing::Subscriber for Sometimes {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
