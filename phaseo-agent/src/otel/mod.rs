//! The runtime's spans and metrics sent to an OpenTelemetry backend over OTLP/HTTP (feature
//! `otel`).
//!
//! ```no_run
//! # fn main() -> Result<(), phaseo_agent::otel::OtelError> {
//! use phaseo_agent::otel::Telemetry;
//!
//! // The endpoint comes from OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318.
//! let _telemetry = Telemetry::new("billing-agent")
//!     .header("x-api-key", "secret")
//!     .init()?; // hold it: dropped, it flushes and shuts the exporters down
//! // ... run agents: every run, model request and tool call is exported ...
//! # Ok(())
//! # }
//! ```
//!
//! [`Telemetry`] builds an OpenTelemetry tracer provider and meter provider that export over
//! OTLP/HTTP with protobuf bodies (to `{endpoint}/v1/traces` and `{endpoint}/v1/metrics`),
//! through [`ExportClient`]: no redirect followed, bounded responses, a timeout. What it records
//! is in [`telemetry`](crate::telemetry): spans and metrics in OpenTelemetry's GenAI
//! conventions, content only when [`CaptureContent`](crate::telemetry::CaptureContent) says so.
//! [`Telemetry::init`] installs them as the process's `tracing` subscriber;
//! [`TelemetryGuard::layer`] composes them into a subscriber of your own. Either way a run keeps
//! its trace context in its state, so the run that resumes it, in another process and days
//! later, links to the span that paused it.
//!
//! A program with its own meter provider gets the histograms' bucket boundaries from [`view`].

mod error;
mod http;

use std::collections::HashMap;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use opentelemetry::InstrumentationScope;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{
    Aggregation, Instrument, InstrumentKind, MeterProviderBuilder, PeriodicReader,
    SdkMeterProvider, Stream,
};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanExporter, TracerProviderBuilder};
use tracing::Subscriber;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

use crate::telemetry::semconv::{
    CLAIM_WAIT_BUCKETS, GEN_AI_CLIENT_OPERATION_DURATION, GEN_AI_CLIENT_TOKEN_USAGE,
    OPERATION_DURATION_BUCKETS, PHASEO_RUN_WAIT_DURATION, PHASEO_TOOL_CALL_DURATION,
    PHASEO_WORKER_CLAIM_WAIT, PHASEO_WORKER_RUN_DURATION, TOKEN_USAGE_BUCKETS,
    WAIT_DURATION_BUCKETS,
};

pub use error::OtelError;
pub use http::ExportClient;

/// The OTLP/HTTP endpoint used when neither [`Telemetry::endpoint`] nor
/// `OTEL_EXPORTER_OTLP_ENDPOINT` gives one: a collector on this machine.
///
/// ```
/// assert_eq!(phaseo_agent::otel::DEFAULT_ENDPOINT, "http://localhost:4318");
/// ```
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// The default of [`Telemetry::export_timeout`]: 10 seconds, as OTLP's.
///
/// ```
/// assert_eq!(phaseo_agent::otel::DEFAULT_EXPORT_TIMEOUT.as_secs(), 10);
/// ```
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The default of [`Telemetry::metric_interval`]: 60 seconds, as the SDK's.
///
/// ```
/// assert_eq!(phaseo_agent::otel::DEFAULT_METRIC_INTERVAL.as_secs(), 60);
/// ```
pub const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);

/// The default of [`Telemetry::flush_timeout`]: 5 seconds, as the SDK's own shutdown.
///
/// ```
/// assert_eq!(phaseo_agent::otel::DEFAULT_FLUSH_TIMEOUT.as_secs(), 5);
/// ```
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The default of [`Telemetry::max_response_bytes`]: 64 KiB. A collector answers an export with
/// a few bytes (a partial-success message at most).
///
/// ```
/// assert_eq!(phaseo_agent::otel::DEFAULT_MAX_RESPONSE_BYTES, 65_536);
/// ```
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Attaches an injected span exporter to the tracer provider being built.
type WithSpans = Box<dyn FnOnce(TracerProviderBuilder) -> TracerProviderBuilder + Send>;
/// Attaches an injected metric exporter, read every `interval`, to the meter provider.
type WithMetrics = Box<dyn FnOnce(MeterProviderBuilder, Duration) -> MeterProviderBuilder + Send>;

/// The settings of the export; [`build`](Telemetry::build) or [`init`](Telemetry::init) it.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::otel::Telemetry;
///
/// let telemetry = Telemetry::new("billing-agent")
///     .endpoint("https://otlp.example.com")
///     .header("authorization", "Bearer secret")
///     .export_timeout(Duration::from_secs(5))
///     .metric_interval(Duration::from_secs(30));
/// # drop(telemetry);
/// ```
pub struct Telemetry {
    service_name: String,
    endpoint: Option<String>,
    headers: Vec<(String, String)>,
    export_timeout: Duration,
    flush_timeout: Duration,
    metric_interval: Duration,
    max_response_bytes: usize,
    attributes: SpanAttributes,
    spans: Option<WithSpans>,
    metrics: Option<WithMetrics>,
}

/// Which attributes tracing-opentelemetry adds to every span (all off by default).
#[derive(Debug, Clone, Copy, Default)]
struct SpanAttributes {
    /// `code.file.path`, `code.line.number`, `code.module.name`.
    source_locations: bool,
    /// `thread.id`, `thread.name`.
    threads: bool,
    /// `busy_ns`, `idle_ns`.
    busy_idle: bool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are left out: they may be credentials.
        let headers: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Telemetry")
            .field("service_name", &self.service_name)
            .field("endpoint", &self.endpoint)
            .field("headers", &headers)
            .field("export_timeout", &self.export_timeout)
            .field("flush_timeout", &self.flush_timeout)
            .field("metric_interval", &self.metric_interval)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("source_locations", &self.attributes.source_locations)
            .field("thread_attributes", &self.attributes.threads)
            .field("busy_idle_times", &self.attributes.busy_idle)
            .field("span_exporter", &self.spans.as_ref().map(|_| "injected"))
            .field(
                "metric_exporter",
                &self.metrics.as_ref().map(|_| "injected"),
            )
            .finish()
    }
}

impl Telemetry {
    /// Settings for a service named `service_name` (the resource's `service.name`), with every
    /// other setting at its default.
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent");
    /// # drop(telemetry);
    /// ```
    pub fn new(service_name: impl Into<String>) -> Self {
        Telemetry {
            service_name: service_name.into(),
            endpoint: None,
            headers: Vec::new(),
            export_timeout: DEFAULT_EXPORT_TIMEOUT,
            flush_timeout: DEFAULT_FLUSH_TIMEOUT,
            metric_interval: DEFAULT_METRIC_INTERVAL,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            attributes: SpanAttributes::default(),
            spans: None,
            metrics: None,
        }
    }

    /// The OTLP/HTTP endpoint's base URL; `/v1/traces` and `/v1/metrics` are appended, as OTLP
    /// says of `OTEL_EXPORTER_OTLP_ENDPOINT`. Without it: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// and `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (each used as it is), else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent")
    ///     .endpoint("http://collector.internal:4318");
    /// # drop(telemetry);
    /// ```
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// A header sent with every export (an API key, a tenant). Headers in
    /// `OTEL_EXPORTER_OTLP_HEADERS` (`name=value,name=value`) are sent too, and win over these.
    /// They go to the endpoint only: redirects are never followed.
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent")
    ///     .header("x-honeycomb-team", "secret");
    /// # drop(telemetry);
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// How long one export may take, connecting, sending and reading the answer, retries
    /// included (default [`DEFAULT_EXPORT_TIMEOUT`]); past it, [`OtelError::Timeout`].
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent")
    ///     .export_timeout(std::time::Duration::from_secs(3));
    /// # drop(telemetry);
    /// ```
    pub fn export_timeout(mut self, timeout: Duration) -> Self {
        self.export_timeout = timeout;
        self
    }

    /// How long [`TelemetryGuard::flush`], [`TelemetryGuard::shutdown`] and the guard's drop wait
    /// for what is buffered to be exported (default [`DEFAULT_FLUSH_TIMEOUT`]). At the limit they
    /// return, `flush` and `shutdown` with [`OtelError::FlushTimeout`] and the drop silently:
    /// spans and metrics not exported by then are lost, and the export still under way goes on,
    /// on a thread of its own, until it ends (bounded by
    /// [`export_timeout`](Self::export_timeout)) or the process exits. Raise it for a slow
    /// collector; a process that must exit promptly lowers it.
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent")
    ///     .flush_timeout(std::time::Duration::from_secs(2));
    /// # drop(telemetry);
    /// ```
    pub fn flush_timeout(mut self, timeout: Duration) -> Self {
        self.flush_timeout = timeout;
        self
    }

    /// Whether every span carries where in the source it was made: `code.file.path` (a path on
    /// the machine that built the program), `code.line.number` and `code.module.name`. Off by
    /// default: the span's name and attributes say what it is, and a build machine's paths are
    /// not for every trace backend to keep.
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").source_locations(true);
    /// # drop(telemetry);
    /// ```
    pub fn source_locations(mut self, on: bool) -> Self {
        self.attributes.source_locations = on;
        self
    }

    /// Whether every span carries the thread it was made on: `thread.id` and `thread.name`. Off
    /// by default: an async run moves between a runtime's threads, and the one it started on says
    /// little.
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").thread_attributes(true);
    /// # drop(telemetry);
    /// ```
    pub fn thread_attributes(mut self, on: bool) -> Self {
        self.attributes.threads = on;
        self
    }

    /// Whether every span carries how long it was entered and how long it was not, in
    /// nanoseconds: `busy_ns` and `idle_ns`. Off by default, which also spares the clock reads
    /// on each enter and exit. A run's own `invoke_agent` span never carries them: the run ends
    /// it itself once its last journal write is done, before `tracing` closes it, which is when
    /// they would be added.
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").busy_idle_times(true);
    /// # drop(telemetry);
    /// ```
    pub fn busy_idle_times(mut self, on: bool) -> Self {
        self.attributes.busy_idle = on;
        self
    }

    /// How often metrics are exported (default [`DEFAULT_METRIC_INTERVAL`]); they are also
    /// exported on [`TelemetryGuard::flush`] and when the guard is dropped.
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent")
    ///     .metric_interval(std::time::Duration::from_secs(10));
    /// # drop(telemetry);
    /// ```
    pub fn metric_interval(mut self, interval: Duration) -> Self {
        self.metric_interval = interval;
        self
    }

    /// The longest answer read from the endpoint (default [`DEFAULT_MAX_RESPONSE_BYTES`]); a
    /// longer one is [`OtelError::ResponseTooLarge`].
    ///
    /// ```
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent")
    ///     .max_response_bytes(16 * 1024);
    /// # drop(telemetry);
    /// ```
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Spans go to `exporter` (through a batch processor) instead of OTLP/HTTP: another
    /// protocol, or the SDK's in-memory exporter in a test.
    ///
    /// ```
    /// use opentelemetry_sdk::trace::InMemorySpanExporter;
    /// use tracing_subscriber::layer::SubscriberExt;
    ///
    /// let spans = InMemorySpanExporter::default();
    /// let telemetry = phaseo_agent::otel::Telemetry::new("test")
    ///     .span_exporter(spans.clone())
    ///     .build()?;
    /// tracing::subscriber::with_default(
    ///     tracing_subscriber::registry().with(telemetry.layer()),
    ///     || tracing::info_span!("work").in_scope(|| {}),
    /// );
    /// telemetry.flush()?;
    /// assert_eq!(spans.get_finished_spans().unwrap()[0].name, "work");
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    ///
    /// (`InMemorySpanExporter` needs `opentelemetry_sdk`'s feature `testing`.)
    pub fn span_exporter<E: SpanExporter + 'static>(mut self, exporter: E) -> Self {
        self.spans = Some(Box::new(move |builder| {
            builder.with_batch_exporter(exporter)
        }));
        self
    }

    /// Metrics go to `exporter` (read every [`metric_interval`](Self::metric_interval)) instead
    /// of OTLP/HTTP.
    ///
    /// ```
    /// use opentelemetry_sdk::metrics::InMemoryMetricExporter;
    ///
    /// let metrics = InMemoryMetricExporter::default();
    /// let telemetry = phaseo_agent::otel::Telemetry::new("test")
    ///     .metric_exporter(metrics.clone())
    ///     .build()?;
    /// telemetry.flush()?;
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    ///
    /// (`InMemoryMetricExporter` needs `opentelemetry_sdk`'s feature `testing`.)
    pub fn metric_exporter<E: PushMetricExporter>(mut self, exporter: E) -> Self {
        self.metrics = Some(Box::new(move |builder, interval| {
            builder.with_reader(
                PeriodicReader::builder(exporter)
                    .with_interval(interval)
                    .build(),
            )
        }));
        self
    }

    /// The tracer and meter providers, with their exporters. Nothing is installed: compose
    /// [`TelemetryGuard::layer`] into your subscriber, or use [`init`](Self::init).
    ///
    /// ```
    /// use phaseo_agent::otel::Telemetry;
    /// use tracing_subscriber::layer::SubscriberExt;
    ///
    /// let telemetry = Telemetry::new("billing-agent").build()?;
    /// let subscriber = tracing_subscriber::registry().with(telemetry.layer());
    /// tracing::subscriber::with_default(subscriber, || {
    ///     // ... spans here are exported ...
    /// });
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    pub fn build(self) -> Result<TelemetryGuard, OtelError> {
        for (setting, value) in [
            ("export_timeout", self.export_timeout),
            ("flush_timeout", self.flush_timeout),
            ("metric_interval", self.metric_interval),
        ] {
            if value.is_zero() {
                return Err(OtelError::Setting {
                    setting,
                    reason: "must be more than zero".into(),
                });
            }
        }
        let mut headers = HashMap::new();
        for (name, value) in &self.headers {
            let valid = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && reqwest::header::HeaderValue::from_str(value).is_ok();
            if !valid {
                return Err(OtelError::Header { name: name.clone() });
            }
            headers.insert(name.clone(), value.clone());
        }
        // The URLs are checked before anything starts.
        let traces_url = match self.spans {
            None => Some(signal_url(self.endpoint.as_deref(), Signal::Traces)?),
            Some(_) => None,
        };
        let metrics_url = match self.metrics {
            None => Some(signal_url(self.endpoint.as_deref(), Signal::Metrics)?),
            Some(_) => None,
        };
        let client = if traces_url.is_some() || metrics_url.is_some() {
            Some(ExportClient::new(
                self.export_timeout,
                self.max_response_bytes,
            )?)
        } else {
            None
        };
        let resource = Resource::builder()
            .with_service_name(self.service_name.clone())
            .build();

        let mut tracer_builder = SdkTracerProvider::builder().with_resource(resource.clone());
        tracer_builder = match (self.spans, traces_url, &client) {
            (Some(attach), _, _) => attach(tracer_builder),
            (None, Some(url), Some(client)) => {
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_http_client(client.clone())
                    .with_endpoint(url)
                    .with_timeout(self.export_timeout)
                    .with_headers(headers.clone())
                    .build()
                    .map_err(|e| OtelError::Sdk(e.to_string()))?;
                tracer_builder.with_batch_exporter(exporter)
            }
            _ => unreachable!("a URL and a client when no span exporter is given"),
        };

        let mut meter_builder = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_view(view);
        meter_builder = match (self.metrics, metrics_url, &client) {
            (Some(attach), _, _) => attach(meter_builder, self.metric_interval),
            (None, Some(url), Some(client)) => {
                let exporter = opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .with_http_client(client.clone())
                    .with_endpoint(url)
                    .with_timeout(self.export_timeout)
                    .with_headers(headers)
                    .build()
                    .map_err(|e| OtelError::Sdk(e.to_string()))?;
                meter_builder.with_reader(
                    PeriodicReader::builder(exporter)
                        .with_interval(self.metric_interval)
                        .build(),
                )
            }
            _ => unreachable!("a URL and a client when no metric exporter is given"),
        };

        let tracer_provider = tracer_builder.build();
        let tracer = tracer_provider.tracer_with_scope(
            InstrumentationScope::builder("phaseo_agent")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        );
        Ok(TelemetryGuard {
            tracer_provider,
            meter_provider: meter_builder.build(),
            tracer,
            attributes: self.attributes,
            flush_timeout: self.flush_timeout,
            shut_down: false,
        })
    }

    /// [`build`](Self::build)s, then installs the process's global `tracing` subscriber: a
    /// registry with [`TelemetryGuard::layer`], at level INFO (the runtime's spans are at INFO;
    /// the DEBUG and TRACE spans of dependencies are not exported). Hold the guard for the life
    /// of the process: dropped, it flushes and shuts the exporters down, and nothing is exported
    /// after. Fails with [`OtelError::AlreadyInstalled`] when a global subscriber is already set
    /// (then compose [`TelemetryGuard::layer`] into it instead).
    ///
    /// ```no_run
    /// #[tokio::main]
    /// async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let _telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").init()?;
    ///     // ... run agents ...
    ///     Ok(())
    /// } // `_telemetry` is dropped here: what is left is exported
    /// ```
    pub fn init(self) -> Result<TelemetryGuard, OtelError> {
        let guard = self.build()?;
        let subscriber =
            tracing_subscriber::registry().with(guard.layer().with_filter(LevelFilter::INFO));
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|_| OtelError::AlreadyInstalled)?;
        Ok(guard)
    }
}

/// The providers [`Telemetry`] built. Dropped, it flushes what is buffered and shuts the
/// exporters down, waiting at most [`Telemetry::flush_timeout`]: hold it for as long as the
/// process runs agents. Every run ends its `invoke_agent` span once its last journal write is
/// done, before it returns, so a guard dropped after the runs returned exports all of them.
///
/// ```
/// use opentelemetry::trace::{Tracer as _, TracerProvider as _};
///
/// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").build()?;
/// let _tracer = telemetry.tracer_provider().tracer("my-app");
/// # Ok::<(), phaseo_agent::otel::OtelError>(())
/// ```
pub struct TelemetryGuard {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    tracer: SdkTracer,
    attributes: SpanAttributes,
    flush_timeout: Duration,
    shut_down: bool,
}

impl std::fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("shut_down", &self.shut_down)
            .finish_non_exhaustive()
    }
}

impl TelemetryGuard {
    /// The `tracing` layer that sends spans and metrics to these providers: tracing-opentelemetry's
    /// `OpenTelemetryLayer` and `MetricsLayer`, to compose into a subscriber of your own (with a
    /// log formatter, a filter). The runtime's metric events have the target
    /// [`METRICS_TARGET`](crate::telemetry::METRICS_TARGET), which a formatter can leave out.
    /// Spans carry no source location, thread or busy/idle times unless
    /// [`Telemetry::source_locations`], [`Telemetry::thread_attributes`] or
    /// [`Telemetry::busy_idle_times`] turned them on.
    ///
    /// ```
    /// use tracing::level_filters::LevelFilter;
    /// use tracing_subscriber::Layer as _;
    /// use tracing_subscriber::layer::SubscriberExt;
    ///
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").build()?;
    /// let subscriber = tracing_subscriber::registry()
    ///     .with(telemetry.layer().with_filter(LevelFilter::INFO));
    /// # drop(subscriber);
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_location(self.attributes.source_locations)
            .with_threads(self.attributes.threads)
            .with_tracked_inactivity(self.attributes.busy_idle)
            .and_then(tracing_opentelemetry::MetricsLayer::new(
                self.meter_provider.clone(),
            ))
    }

    /// The tracer provider, for spans of your own.
    ///
    /// ```
    /// use opentelemetry::trace::TracerProvider as _;
    ///
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").build()?;
    /// let _tracer = telemetry.tracer_provider().tracer("my-app");
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.tracer_provider
    }

    /// The meter provider (with [`view`]), for metrics of your own.
    ///
    /// ```
    /// use opentelemetry::metrics::MeterProvider as _;
    ///
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").build()?;
    /// let _meter = telemetry.meter_provider().meter("my-app");
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.meter_provider
    }

    /// Exports what is buffered now: ended spans, and metrics as they stand. Blocks until the
    /// exporters answered, at most [`Telemetry::flush_timeout`]; past it,
    /// [`OtelError::FlushTimeout`] (the export goes on, on a thread of its own).
    ///
    /// ```no_run
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").build()?;
    /// // ... a batch job's runs ...
    /// telemetry.flush()?;
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    pub fn flush(&self) -> Result<(), OtelError> {
        let tracer_provider = self.tracer_provider.clone();
        let meter_provider = self.meter_provider.clone();
        bounded(self.flush_timeout, move || {
            let spans = tracer_provider.force_flush();
            let metrics = meter_provider.force_flush();
            spans.and(metrics)
        })
    }

    /// Flushes and shuts the exporters down, saying whether it went well (dropping the guard
    /// does the same, silently). Waits at most [`Telemetry::flush_timeout`]; past it,
    /// [`OtelError::FlushTimeout`], and what was not exported by then is lost.
    ///
    /// ```no_run
    /// let telemetry = phaseo_agent::otel::Telemetry::new("billing-agent").build()?;
    /// telemetry.shutdown()?;
    /// # Ok::<(), phaseo_agent::otel::OtelError>(())
    /// ```
    pub fn shutdown(mut self) -> Result<(), OtelError> {
        self.close()
    }

    fn close(&mut self) -> Result<(), OtelError> {
        if std::mem::replace(&mut self.shut_down, true) {
            return Ok(());
        }
        let tracer_provider = self.tracer_provider.clone();
        let meter_provider = self.meter_provider.clone();
        let timeout = self.flush_timeout;
        bounded(timeout, move || {
            let spans = tracer_provider.shutdown_with_timeout(timeout);
            let metrics = meter_provider.shutdown_with_timeout(timeout);
            spans.and(metrics)
        })
    }
}

/// Runs `work` (a flush or a shutdown of the providers) on a thread of its own and waits for it
/// at most `timeout`. The SDK bounds some of its waits and not others (a metric export, an
/// exporter's own shutdown); this bounds them all. Past `timeout` the thread is left to finish
/// alone, and [`OtelError::FlushTimeout`] says so.
fn bounded(
    timeout: Duration,
    work: impl FnOnce() -> OTelSdkResult + Send + 'static,
) -> Result<(), OtelError> {
    let (done, result) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("phaseo-otel-flush".into())
        .spawn(move || {
            let _ = done.send(work());
        })
        .map_err(|e| OtelError::Sdk(format!("the flush thread: {e}")))?;
    match result.recv_timeout(timeout) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(OTelSdkError::Timeout(_))) | Err(RecvTimeoutError::Timeout) => {
            Err(OtelError::FlushTimeout { timeout })
        }
        Ok(Err(error)) => Err(OtelError::Sdk(error.to_string())),
        Err(RecvTimeoutError::Disconnected) => {
            Err(OtelError::Sdk("the flush thread panicked".into()))
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The view [`Telemetry`] applies to its meter provider: the bucket boundaries the GenAI
/// conventions give for `gen_ai.client.operation.duration` (also used for
/// `phaseo.tool.call.duration`) and `gen_ai.client.token.usage`, the crate's own for
/// `phaseo.run.wait.duration`, and their units. Add it to a meter provider of your own with
/// `with_view(phaseo_agent::otel::view)`; it leaves every other instrument alone.
///
/// ```
/// use opentelemetry_sdk::metrics::SdkMeterProvider;
///
/// let provider = SdkMeterProvider::builder()
///     .with_view(phaseo_agent::otel::view)
///     .build();
/// # drop(provider);
/// ```
pub fn view(instrument: &Instrument) -> Option<Stream> {
    if instrument.kind() != InstrumentKind::Histogram {
        return None;
    }
    let (boundaries, unit, description): (&[f64], &str, &str) = match instrument.name() {
        GEN_AI_CLIENT_OPERATION_DURATION => (
            &OPERATION_DURATION_BUCKETS,
            "s",
            "GenAI operation duration.",
        ),
        GEN_AI_CLIENT_TOKEN_USAGE => (
            &TOKEN_USAGE_BUCKETS,
            "{token}",
            "Number of input and output tokens used.",
        ),
        PHASEO_TOOL_CALL_DURATION => (
            &OPERATION_DURATION_BUCKETS,
            "s",
            "Duration of a tool call that ran.",
        ),
        PHASEO_RUN_WAIT_DURATION => (
            &WAIT_DURATION_BUCKETS,
            "s",
            "Time a paused run waited for people.",
        ),
        PHASEO_WORKER_CLAIM_WAIT => (
            &CLAIM_WAIT_BUCKETS,
            "s",
            "Time a queued run waited for a worker to take it.",
        ),
        PHASEO_WORKER_RUN_DURATION => (&WAIT_DURATION_BUCKETS, "s", "Time a worker held a run."),
        _ => return None,
    };
    Stream::builder()
        .with_aggregation(Aggregation::ExplicitBucketHistogram {
            boundaries: boundaries.to_vec(),
            record_min_max: true,
        })
        .with_unit(unit)
        .with_description(description)
        .build()
        .ok()
}

#[derive(Clone, Copy)]
enum Signal {
    Traces,
    Metrics,
}

/// The URL a signal is posted to: the endpoint given, with the signal's path; else the signal's
/// own variable as it is; else `OTEL_EXPORTER_OTLP_ENDPOINT` with the path; else the default.
fn signal_url(endpoint: Option<&str>, signal: Signal) -> Result<String, OtelError> {
    let (path, own) = match signal {
        Signal::Traces => ("v1/traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        Signal::Metrics => ("v1/metrics", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
    };
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let url = match (endpoint, env(own)) {
        (Some(base), _) => join(base, path),
        (None, Some(url)) => url,
        (None, None) => join(
            &env("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned()),
            path,
        ),
    };
    let parsed = reqwest::Url::parse(&url).map_err(|e| OtelError::Endpoint {
        url: url.clone(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(OtelError::Endpoint {
            url,
            reason: "not an http or https URL".into(),
        });
    }
    Ok(url)
}

fn join(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim().trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_endpoint_gets_the_signal_path() {
        let traces = signal_url(Some("http://collector:4318/"), Signal::Traces).unwrap();
        assert_eq!(traces, "http://collector:4318/v1/traces");
        let metrics = signal_url(Some("https://x.example/otlp"), Signal::Metrics).unwrap();
        assert_eq!(metrics, "https://x.example/otlp/v1/metrics");
        assert!(matches!(
            signal_url(Some("collector:4318"), Signal::Traces),
            Err(OtelError::Endpoint { .. })
        ));
    }
}
