//! The OTLP exporters' HTTP client: reqwest's async client (the 0.12 the providers use) on a
//! thread of its own.
//!
//! The SDK's exporters call their client from wherever they export: the batch processors' own
//! threads (through a `block_on`), or the caller's thread, inside its Tokio runtime, for a simple
//! processor or a flush. A blocking reqwest client panics when it is created, used or dropped
//! inside a Tokio runtime, and an async one needs a runtime to run on. So the client lives on
//! one thread that runs a private current-thread runtime: a request is handed over a channel
//! and its answer awaited, from any thread, in any runtime or none, and nothing of reqwest ever
//! runs on the caller's. That thread records no `tracing` spans, so an export never exports
//! spans of its own HTTP stack.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use tokio::sync::{mpsc, oneshot};

use crate::error::with_causes;
use crate::otel::error::OtelError;

/// One request and where its answer goes.
type Job = (
    reqwest::Request,
    oneshot::Sender<Result<Response<Bytes>, OtelError>>,
);

/// The HTTP client [`Telemetry`](crate::otel::Telemetry) gives its OTLP exporters, usable with
/// any exporter that takes an [`opentelemetry_http::HttpClient`]. It follows no redirect (an
/// exporter's headers may carry an API key, which must not reach another host: a 3xx answer is
/// [`OtelError::Redirect`]), reads at most `max_response_bytes` of a response
/// ([`OtelError::ResponseTooLarge`]) and gives up on an exchange after `timeout`
/// ([`OtelError::Timeout`]), connecting and reading included. Clones share one client and its
/// thread, which ends when the last clone is dropped.
///
/// ```
/// use std::time::Duration;
/// use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
/// use phaseo_agent::otel::ExportClient;
///
/// let client = ExportClient::new(Duration::from_secs(10), 64 * 1024)?;
/// let exporter = opentelemetry_otlp::SpanExporter::builder()
///     .with_http()
///     .with_http_client(client)
///     .with_endpoint("http://localhost:4318/v1/traces")
///     .build()
///     .expect("an exporter");
/// # drop(exporter);
/// # Ok::<(), phaseo_agent::otel::OtelError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ExportClient {
    jobs: mpsc::UnboundedSender<Job>,
}

impl ExportClient {
    /// A client that gives up on an exchange after `timeout` and reads at most
    /// `max_response_bytes` of a response. Starts its thread.
    pub fn new(timeout: Duration, max_response_bytes: usize) -> Result<Self, OtelError> {
        if timeout.is_zero() {
            return Err(OtelError::Setting {
                setting: "export_timeout",
                reason: "must be more than zero".into(),
            });
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OtelError::Transport(chain(&e)))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| OtelError::Transport(format!("the export thread's runtime: {e}")))?;
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        std::thread::Builder::new()
            .name("phaseo-otel-http".into())
            .spawn(move || {
                // Nothing this thread does is traced: an export would otherwise export the spans
                // of its own HTTP stack, and so on.
                tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::new(), || {
                    runtime.block_on(async move {
                        while let Some((request, reply)) = queue.recv().await {
                            let client = client.clone();
                            tokio::spawn(async move {
                                let answer = tokio::time::timeout(
                                    timeout,
                                    exchange(&client, request, max_response_bytes),
                                )
                                .await
                                .unwrap_or(Err(OtelError::Timeout { timeout }));
                                let _ = reply.send(answer);
                            });
                        }
                    });
                    // The runtime, its connections and the client are dropped here, on this
                    // thread.
                });
            })
            .map_err(|e| OtelError::Transport(format!("the export thread: {e}")))?;
        Ok(ExportClient { jobs })
    }

    /// Sends `request` and reads its answer, whatever its status, but a redirect.
    async fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, OtelError> {
        let request =
            reqwest::Request::try_from(request).map_err(|e| OtelError::Transport(chain(&e)))?;
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send((request, reply))
            .map_err(|_| OtelError::Transport("the export thread has stopped".into()))?;
        answer
            .await
            .map_err(|_| OtelError::Transport("the export thread has stopped".into()))?
    }
}

impl HttpClient for ExportClient {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            self.send(request)
                .await
                .map_err(|e| Box::new(e) as HttpError)
        })
    }
}

/// One exchange on the export thread: the request, then its body, bounded.
async fn exchange(
    client: &reqwest::Client,
    request: reqwest::Request,
    max_response_bytes: usize,
) -> Result<Response<Bytes>, OtelError> {
    let mut response = client
        .execute(request)
        .await
        .map_err(|e| OtelError::Transport(chain(&e)))?;
    let status = response.status();
    if status.is_redirection() {
        return Err(OtelError::Redirect {
            status: status.as_u16(),
        });
    }
    let too_large = OtelError::ResponseTooLarge {
        limit: max_response_bytes,
    };
    let announced = response.content_length().unwrap_or(0);
    if announced > max_response_bytes as u64 {
        return Err(too_large);
    }
    let mut body = Vec::with_capacity(announced as usize);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| OtelError::Transport(chain(&e)))?
    {
        if body.len() + chunk.len() > max_response_bytes {
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
    let headers = std::mem::take(response.headers_mut());
    let mut answer = Response::new(Bytes::from(body));
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}

/// A reqwest error and its causes, without the URL (an endpoint may carry a token in its query).
fn chain(error: &reqwest::Error) -> String {
    let text = error.to_string();
    let text = match (error.url(), text.find(" for url (")) {
        (Some(_), Some(0)) => "request failed".to_owned(),
        (Some(_), Some(at)) => text[..at].to_owned(),
        _ => text,
    };
    with_causes(text, error)
}
