//! What can go wrong setting up or sending telemetry.

use std::time::Duration;

/// An error of [`otel`](crate::otel): a setting refused by
/// [`Telemetry::build`](crate::otel::Telemetry::build), or an export refused or failed by the
/// HTTP client ([`ExportClient`](crate::otel::ExportClient)). A bound that was hit names the
/// setting that sets it.
///
/// ```
/// use phaseo_agent::otel::{OtelError, Telemetry};
///
/// let refused = Telemetry::new("billing").endpoint("ftp://collector:4318").build();
/// assert!(matches!(refused, Err(OtelError::Endpoint { .. })));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// The OTLP endpoint is not an `http` or `https` URL.
    #[error("OTLP endpoint {url:?}: {reason}")]
    Endpoint {
        /// The endpoint as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// A header's name or value cannot be sent in HTTP (the value is not repeated here: it may
    /// be a credential).
    #[error("OTLP header {name:?}: not a valid HTTP header name and value")]
    Header {
        /// The header's name.
        name: String,
    },
    /// A setting out of its range.
    #[error("{setting}: {reason}")]
    Setting {
        /// The setting (`export_timeout`, `flush_timeout`, `metric_interval`,
        /// `max_response_bytes`).
        setting: &'static str,
        /// What it must be.
        reason: String,
    },
    /// The endpoint answered with a redirect, which is never followed: the request's headers may
    /// carry credentials, which must not reach another host.
    #[error("the OTLP endpoint answered {status} (a redirect), which is not followed")]
    Redirect {
        /// The HTTP status (301, 302, 303, 307, 308, ...).
        status: u16,
    },
    /// The endpoint's response body is longer than the setting `max_response_bytes`.
    #[error("the OTLP endpoint's response is longer than max_response_bytes ({limit} bytes)")]
    ResponseTooLarge {
        /// The setting's value, in bytes.
        limit: usize,
    },
    /// The request and its response took longer than the setting `export_timeout`.
    #[error("the OTLP export took longer than export_timeout ({}ms)", timeout.as_millis())]
    Timeout {
        /// The setting's value.
        timeout: Duration,
    },
    /// A flush or shutdown of the exporters ([`TelemetryGuard::flush`](crate::otel::TelemetryGuard::flush),
    /// [`shutdown`](crate::otel::TelemetryGuard::shutdown)) took longer than the setting
    /// `flush_timeout`: what was not exported by then is lost.
    #[error("the OpenTelemetry flush took longer than flush_timeout ({}ms)", timeout.as_millis())]
    FlushTimeout {
        /// The setting's value.
        timeout: Duration,
    },
    /// The request could not be sent or its response not read (connection refused, TLS, ...).
    #[error("the OTLP export failed: {0}")]
    Transport(String),
    /// The exporter or the SDK reported an error (building an exporter, flushing, shutting
    /// down): its text.
    #[error("OpenTelemetry: {0}")]
    Sdk(String),
    /// [`Telemetry::init`](crate::otel::Telemetry::init) found a global `tracing` subscriber
    /// already installed.
    #[error("a global tracing subscriber is already installed: compose `layer()` into it instead")]
    AlreadyInstalled,
}
