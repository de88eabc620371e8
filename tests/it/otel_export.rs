//! `phaseo_agent::otel`: `Telemetry` with the SDK's in-memory exporters gets a paused and resumed
//! run's spans and its metrics with the conventions' bucket boundaries; its HTTP client, against
//! servers on loopback, follows no redirect (the credential header never reaches the second
//! server), refuses an oversized answer and gives up on a stalled server, each with its typed
//! error.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::Value;
use opentelemetry_http::{Bytes, HttpClient, Request};
use opentelemetry_sdk::metrics::InMemoryMetricExporter;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::trace::InMemorySpanExporter;
use phaseo_agent::durable::{EnqueueOptions, Runs};
use phaseo_agent::otel::{ExportClient, OtelError, Telemetry};
use phaseo_agent::store::{MemoryStore, StoredStatus};
use phaseo_agent::telemetry::semconv;
use phaseo_agent::worker::Worker;
use phaseo_agent::{Agent, Decisions, ModelResponse, RunState, ScriptedModel, ToolCall, Usage};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing_subscriber::layer::SubscriberExt;

use crate::support::agent::{Counter, deploy_tool, status_tool};

fn ops_agent(model: ScriptedModel) -> Agent {
    let counter = Counter::default();
    Agent::builder("ops")
        .model(model)
        .tool(status_tool(&counter))
        .tool(deploy_tool(&counter))
        .build()
        .unwrap()
}

#[tokio::test]
async fn in_memory_exporters_get_a_paused_runs_spans_and_metrics_with_the_buckets() {
    let spans = InMemorySpanExporter::default();
    let metrics = InMemoryMetricExporter::default();
    let telemetry = Telemetry::new("otel-export-test")
        .span_exporter(spans.clone())
        .metric_exporter(metrics.clone())
        .build()
        .unwrap();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(telemetry.layer()));

    let model = ScriptedModel::new()
        .turn(
            ModelResponse::tool_calls([ToolCall::new(
                "c1",
                "get_status",
                json!({"service": "api"}),
            )])
            .usage(Usage::new(120, 7)),
        )
        .tool_call("c2", "deploy", json!({"environment": "prod"}));
    let paused = ops_agent(model).run("Deploy").await.unwrap();
    assert!(paused.is_paused());
    let state = RunState::from_json(&paused.state.to_json()).unwrap();
    let done = ops_agent(ScriptedModel::new().text("Deployed."))
        .resume(&state, Decisions::for_run(state.run_id()).approve("c2"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Deployed."));
    telemetry.flush().unwrap();

    let spans = spans.get_finished_spans().unwrap();
    let named = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
    let runs = named("invoke_agent ops");
    assert_eq!(runs.len(), 2);
    assert_eq!(named("chat scripted").len(), 3);
    assert_eq!(named("execute_tool get_status").len(), 1);
    // Once when it paused, once when it ran.
    assert_eq!(named("execute_tool deploy").len(), 2);
    let resumed = runs[1];
    let link = resumed.links.iter().next().expect("the resumed span links");
    assert_eq!(link.span_context.span_id(), runs[0].span_context.span_id());
    let chat = named("chat scripted")[0];
    let input = chat
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == semconv::GEN_AI_USAGE_INPUT_TOKENS)
        .map(|kv| kv.value.clone());
    assert_eq!(input, Some(Value::I64(120)));

    // A queued run served by a worker: its claim wait and how long it was held.
    let runs = Runs::new(MemoryStore::new());
    let queued = runs
        .enqueue("ops", "Status?", EnqueueOptions::new())
        .await
        .unwrap();
    let serving = tokio::spawn(
        Worker::new(runs.clone())
            .agent(ops_agent(ScriptedModel::new().text("All green.")))
            .run(),
    );
    while runs.load(&queued).await.unwrap().status != StoredStatus::Completed {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    serving.abort();
    telemetry.flush().unwrap();

    let exported = metrics.get_finished_metrics().unwrap();
    let last = exported.last().expect("metrics were exported");
    // The resource names the service.
    assert_eq!(
        last.resource()
            .get(&opentelemetry::Key::new("service.name"))
            .map(|v| v.to_string()),
        Some("otel-export-test".to_owned())
    );
    let bounds = |name: &str| -> (Vec<f64>, String) {
        for scope in last.scope_metrics() {
            if let Some(metric) = scope.metrics().find(|m| m.name() == name) {
                let unit = metric.unit().to_owned();
                let bounds: Vec<f64> = match metric.data() {
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        h.data_points().next().unwrap().bounds().collect()
                    }
                    AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                        h.data_points().next().unwrap().bounds().collect()
                    }
                    AggregatedMetrics::I64(MetricData::Histogram(h)) => {
                        h.data_points().next().unwrap().bounds().collect()
                    }
                    other => panic!("{name}: not a histogram: {other:?}"),
                };
                return (bounds, unit);
            }
        }
        panic!("no metric {name}");
    };
    assert_eq!(
        bounds(semconv::GEN_AI_CLIENT_OPERATION_DURATION),
        (semconv::OPERATION_DURATION_BUCKETS.to_vec(), "s".to_owned())
    );
    assert_eq!(
        bounds(semconv::GEN_AI_CLIENT_TOKEN_USAGE),
        (semconv::TOKEN_USAGE_BUCKETS.to_vec(), "{token}".to_owned())
    );
    assert_eq!(
        bounds(semconv::PHASEO_TOOL_CALL_DURATION),
        (semconv::OPERATION_DURATION_BUCKETS.to_vec(), "s".to_owned())
    );
    assert_eq!(
        bounds(semconv::PHASEO_RUN_WAIT_DURATION),
        (semconv::WAIT_DURATION_BUCKETS.to_vec(), "s".to_owned())
    );
    assert_eq!(
        bounds(semconv::PHASEO_WORKER_CLAIM_WAIT),
        (semconv::CLAIM_WAIT_BUCKETS.to_vec(), "s".to_owned())
    );
    assert_eq!(
        bounds(semconv::PHASEO_WORKER_RUN_DURATION),
        (semconv::WAIT_DURATION_BUCKETS.to_vec(), "s".to_owned())
    );
}

/// Spans carry no source location, thread or busy/idle times unless a setting turns each on; a
/// run's own span, which the run ends itself, carries no busy/idle times even then.
#[tokio::test]
async fn source_locations_threads_and_busy_idle_times_only_when_asked() {
    async fn keys(telemetry: Telemetry) -> Vec<(String, Vec<String>)> {
        let spans = InMemorySpanExporter::default();
        let telemetry = telemetry
            .span_exporter(spans.clone())
            .metric_exporter(InMemoryMetricExporter::default())
            .build()
            .unwrap();
        {
            let _guard = tracing::subscriber::set_default(
                tracing_subscriber::registry().with(telemetry.layer()),
            );
            tracing::info_span!("work").in_scope(|| {});
            let done = ops_agent(ScriptedModel::new().text("Fine."))
                .run("Status?")
                .await
                .unwrap();
            assert_eq!(done.output(), Some("Fine."));
        }
        telemetry.flush().unwrap();
        spans
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .map(|span| {
                let keys = span.attributes.iter().map(|kv| kv.key.to_string());
                (span.name.into_owned(), keys.collect())
            })
            .collect()
    }
    let has = |spans: &[(String, Vec<String>)], name: &str, key: &str| {
        let (_, keys) = spans.iter().find(|(n, _)| n == name).expect(name);
        keys.iter().any(|k| k == key)
    };
    let optional = [
        "code.file.path",
        "code.line.number",
        "code.module.name",
        "thread.id",
        "thread.name",
        "busy_ns",
        "idle_ns",
    ];
    let plain = keys(Telemetry::new("x")).await;
    for (name, keys) in &plain {
        for key in optional {
            assert!(!keys.iter().any(|k| k == key), "{name} carries {key}");
        }
    }
    let located = keys(Telemetry::new("x").source_locations(true)).await;
    assert!(has(&located, "work", "code.file.path"));
    assert!(has(&located, "invoke_agent ops", "code.line.number"));
    assert!(!has(&located, "work", "thread.id") && !has(&located, "work", "busy_ns"));
    let threads = keys(Telemetry::new("x").thread_attributes(true)).await;
    assert!(has(&threads, "work", "thread.id") && has(&threads, "chat scripted", "thread.name"));
    assert!(!has(&threads, "work", "code.file.path") && !has(&threads, "work", "busy_ns"));
    let timed = keys(Telemetry::new("x").busy_idle_times(true)).await;
    assert!(has(&timed, "work", "busy_ns") && has(&timed, "chat scripted", "idle_ns"));
    assert!(!has(&timed, "work", "thread.id") && !has(&timed, "work", "code.file.path"));
    assert!(!has(&timed, "invoke_agent ops", "busy_ns"));
}

/// What a loopback server answers.
#[derive(Clone)]
enum Reply {
    /// 307 to this URL.
    Redirect(String),
    /// 200 with a body of this many bytes, announced with a content length or chunked.
    Body { bytes: usize, chunked: bool },
    /// Reads the request and never answers.
    Stall,
    /// 200, empty.
    Ok,
}

/// A loopback HTTP server, answering every request with its `Reply`; it keeps the head of every
/// request it read.
struct Server {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start(reply: Reply) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let kept = kept.clone();
                let reply = reply.clone();
                tokio::spawn(async move {
                    let mut read = Vec::new();
                    let mut buf = [0_u8; 4096];
                    // The head, then as many body bytes as it announces.
                    let head_end = loop {
                        let n = socket.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        read.extend_from_slice(&buf[..n]);
                        if let Some(at) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&read[..head_end]).to_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    while read.len() < head_end + length {
                        let n = socket.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        read.extend_from_slice(&buf[..n]);
                    }
                    kept.lock().unwrap().push(head);
                    let answer = match reply {
                        Reply::Redirect(to) => format!(
                            "HTTP/1.1 307 Temporary Redirect\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n"
                        )
                        .into_bytes(),
                        Reply::Ok => b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec(),
                        Reply::Body { bytes, chunked: false } => {
                            let mut a = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: {bytes}\r\n\r\n"
                            )
                            .into_bytes();
                            a.extend(std::iter::repeat_n(b'x', bytes));
                            a
                        }
                        Reply::Body { bytes, chunked: true } => {
                            let mut a = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                            for _ in 0..bytes / 1024 {
                                a.extend_from_slice(b"400\r\n");
                                a.extend(std::iter::repeat_n(b'x', 1024));
                                a.extend_from_slice(b"\r\n");
                            }
                            a.extend_from_slice(b"0\r\n\r\n");
                            a
                        }
                        Reply::Stall => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            return;
                        }
                    };
                    let _ = socket.write_all(&answer).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Server { addr, heads }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn post(url: &str) -> Request<Bytes> {
    Request::post(url)
        .header("authorization", "Bearer s3cret")
        .header("content-type", "application/x-protobuf")
        .body(Bytes::from_static(b"\x0a\x00"))
        .unwrap()
}

fn client(timeout: Duration) -> ExportClient {
    ExportClient::new(timeout, phaseo_agent::otel::DEFAULT_MAX_RESPONSE_BYTES).unwrap()
}

/// The error a failed exchange carries, as the exporter gets it; a panic naming the answer's
/// status and size if it succeeded.
fn otel_error(
    result: Result<opentelemetry_http::Response<Bytes>, opentelemetry_http::HttpError>,
) -> OtelError {
    let error = match result {
        Ok(answer) => panic!(
            "answered {} with {} bytes, where an error was expected",
            answer.status(),
            answer.body().len()
        ),
        Err(error) => error,
    };
    error
        .downcast_ref::<OtelError>()
        .unwrap_or_else(|| panic!("not an OtelError: {error}"))
        .clone()
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_credential_stays_with_the_endpoint() {
    let elsewhere = Server::start(Reply::Ok).await;
    let endpoint = Server::start(Reply::Redirect(elsewhere.url("/v1/traces"))).await;

    let error = client(Duration::from_secs(5))
        .send_bytes(post(&endpoint.url("/v1/traces")))
        .await;
    assert_eq!(otel_error(error), OtelError::Redirect { status: 307 });
    assert_eq!(endpoint.heads().len(), 1);
    assert!(endpoint.heads()[0].contains("authorization: bearer s3cret"));
    assert!(elsewhere.heads().is_empty(), "{:?}", elsewhere.heads());
}

/// The same through `Telemetry`'s exporter: the header set on it reaches the endpoint, never the
/// host the endpoint redirects to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_never_sends_its_headers_where_a_redirect_points() {
    let elsewhere = Server::start(Reply::Ok).await;
    let endpoint = Server::start(Reply::Redirect(elsewhere.url("/v1/traces"))).await;
    let telemetry = Telemetry::new("redirected")
        .endpoint(endpoint.url(""))
        .header("x-api-key", "s3cret")
        .export_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    {
        let _guard = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(telemetry.layer()),
        );
        tracing::info_span!("exported").in_scope(|| {});
    }
    let flushed = tokio::task::spawn_blocking(move || {
        let flushed = telemetry.flush();
        drop(telemetry);
        flushed
    })
    .await
    .unwrap();
    let heads = endpoint.heads();
    assert!(
        heads
            .iter()
            .any(|h| h.starts_with("post /v1/traces") && h.contains("x-api-key: s3cret")),
        "the endpoint got the spans with the header: {heads:?} (flush: {flushed:?})"
    );
    assert!(elsewhere.heads().is_empty(), "{:?}", elsewhere.heads());
}

#[tokio::test]
async fn an_oversized_answer_is_refused_announced_or_not() {
    for chunked in [false, true] {
        let limit = phaseo_agent::otel::DEFAULT_MAX_RESPONSE_BYTES;
        let server = Server::start(Reply::Body {
            bytes: limit + 1024,
            chunked,
        })
        .await;
        let error = client(Duration::from_secs(5))
            .send_bytes(post(&server.url("/v1/traces")))
            .await;
        assert_eq!(
            otel_error(error),
            OtelError::ResponseTooLarge { limit },
            "chunked: {chunked}"
        );
        // An answer within the bound is read whole.
        let small = Server::start(Reply::Body {
            bytes: 4096,
            chunked,
        })
        .await;
        let answer = client(Duration::from_secs(5))
            .send_bytes(post(&small.url("/v1/traces")))
            .await
            .unwrap();
        assert_eq!(answer.body().len(), 4096);
    }
    let error = ExportClient::new(Duration::from_secs(5), 100)
        .unwrap()
        .send_bytes(post(
            &Server::start(Reply::Body {
                bytes: 1024,
                chunked: true,
            })
            .await
            .url("/v1/traces"),
        ))
        .await;
    let error = otel_error(error);
    assert!(
        error.to_string().contains("max_response_bytes (100 bytes)"),
        "{error}"
    );
}

#[tokio::test]
async fn a_stalled_server_is_given_up_on_at_the_timeout() {
    let server = Server::start(Reply::Stall).await;
    let timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let error = client(timeout)
        .send_bytes(post(&server.url("/v1/traces")))
        .await;
    let waited = started.elapsed();
    assert_eq!(otel_error(error), OtelError::Timeout { timeout });
    assert!(
        waited >= timeout && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_eq!(server.heads().len(), 1, "the request was sent");
}

/// A collector that takes a request and never answers: `flush` and `shutdown` give up at
/// `flush_timeout` with the error naming it, though one export may wait a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_collector_holds_a_flush_no_longer_than_flush_timeout() {
    let server = Server::start(Reply::Stall).await;
    let flush_timeout = Duration::from_millis(300);
    let telemetry = Telemetry::new("stalled")
        .endpoint(server.url(""))
        .export_timeout(Duration::from_secs(60))
        .flush_timeout(flush_timeout)
        .build()
        .unwrap();
    {
        let _guard = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(telemetry.layer()),
        );
        tracing::info_span!("exported").in_scope(|| {});
    }
    let (flushed, shut, waited) = tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let flushed = telemetry.flush();
        let shut = telemetry.shutdown();
        (flushed, shut, started.elapsed())
    })
    .await
    .unwrap();
    let timed_out = OtelError::FlushTimeout {
        timeout: flush_timeout,
    };
    assert_eq!(flushed, Err(timed_out.clone()));
    assert_eq!(shut, Err(timed_out.clone()));
    assert!(timed_out.to_string().contains("flush_timeout (300ms)"));
    // Not a measure of speed: only that neither waited for the export's own minute.
    assert!(waited < Duration::from_secs(30), "{waited:?}");
    assert!(!server.heads().is_empty(), "the export was sent");
}

#[test]
fn settings_out_of_range_are_refused_by_name() {
    for (setting, telemetry) in [
        (
            "export_timeout",
            Telemetry::new("x").export_timeout(Duration::ZERO),
        ),
        (
            "flush_timeout",
            Telemetry::new("x").flush_timeout(Duration::ZERO),
        ),
    ] {
        assert!(
            matches!(telemetry.build(), Err(OtelError::Setting { setting: s, .. }) if s == setting),
            "{setting}"
        );
    }
    let header = Telemetry::new("x").header("bad name", "v").build();
    assert!(matches!(header, Err(OtelError::Header { name }) if name == "bad name"));
    let endpoint = Telemetry::new("x").endpoint("ftp://collector").build();
    assert!(matches!(endpoint, Err(OtelError::Endpoint { .. })));
}
