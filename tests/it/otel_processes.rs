//! What reaches a collector from short-lived processes (`tests/bin/otel_child.rs`): each holds
//! `Telemetry`'s guard for all of `main`, runs one durable run on SQLite (or in memory) and
//! returns from `main`. A collector on loopback, here, decodes their OTLP/HTTP exports. Every
//! process's `invoke_agent` span arrives (a resumed run's link points at a span that arrived),
//! and no span carries the build machine's source paths, thread ids or busy/idle times.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One span as the collector got it.
#[derive(Debug, Clone)]
struct Got {
    name: String,
    span_id: Vec<u8>,
    /// Its attributes, each value as text.
    attributes: BTreeMap<String, String>,
    /// The span ids its links point at.
    links: Vec<Vec<u8>>,
}

/// An OTLP/HTTP collector on loopback: it keeps every span posted to `/v1/traces` and answers
/// every request 200, on connections kept alive.
struct Collector {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Got>>>,
}

impl Collector {
    async fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, kept.clone()));
            }
        });
        Collector { addr, spans }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }
}

/// The requests of one connection, one after the other, until it closes.
async fn serve(mut socket: TcpStream, spans: Arc<Mutex<Vec<Got>>>) {
    let mut read = Vec::new();
    let mut buf = vec![0_u8; 64 * 1024];
    loop {
        let head_end = loop {
            if let Some(at) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        };
        let head = String::from_utf8_lossy(&read[..head_end]).to_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .expect("an OTLP export announces its length");
        // Bounded: an export of one short run is a few KiB.
        assert!(length <= 16 << 20, "an export of {length} bytes");
        while read.len() < head_end + length {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
        let body: Vec<u8> = read.drain(..head_end + length).skip(head_end).collect();
        if head.starts_with("post /v1/traces ") {
            let request = ExportTraceServiceRequest::decode(body.as_slice())
                .expect("an OTLP trace export decodes");
            let mut kept = spans.lock().unwrap();
            for resource in request.resource_spans {
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        let attributes = span
                            .attributes
                            .iter()
                            .map(|kv| {
                                let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                                    Some(Value::StringValue(s)) => s.clone(),
                                    Some(Value::BoolValue(b)) => b.to_string(),
                                    Some(Value::IntValue(i)) => i.to_string(),
                                    Some(other) => format!("{other:?}"),
                                    None => String::new(),
                                };
                                (kv.key.clone(), value)
                            })
                            .collect();
                        kept.push(Got {
                            name: span.name,
                            span_id: span.span_id,
                            attributes,
                            links: span.links.into_iter().map(|l| l.span_id).collect(),
                        });
                    }
                }
            }
        }
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if socket.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// The processes of one run, started one after the other: each is a command of `otel_child`, and
/// whether its span is one to find (a `crash` ends its process before anything is exported).
#[derive(Debug, Clone)]
struct Job {
    store: String,
    run_id: String,
    steps: Vec<(&'static str, bool)>,
}

/// Runs `otel_child ENDPOINT STORE COMMAND RUN_ID`, bounded; returns its exit code.
async fn child(endpoint: &str, store: &str, command: &str, run_id: &str) -> Option<i32> {
    let mut process = tokio::process::Command::new(env!("CARGO_BIN_EXE_otel_child"))
        .args([endpoint, store, command, run_id])
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(120), process.wait()).await {
        Ok(status) => status.unwrap().code(),
        Err(_) => panic!("otel_child {command} {run_id} did not end within 120 s"),
    }
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("phaseo-otel-processes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// 50 processes whose spans are looked for, four at a time: 20 runs to their end on SQLite, 5 in
/// memory, 10 runs paused then resumed by another process, 5 runs whose process crashed in a
/// tool call and that another recovered. Each exits by returning from `main`, and each one's
/// `invoke_agent` span must have reached the collector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_short_lived_process_exports_its_runs_root_span() {
    let collector = Collector::start().await;
    let dir = scratch();
    let mut jobs = Vec::new();
    let sqlite = |n: usize| format!("sqlite:{}", dir.join(format!("{n}.db")).display());
    for n in 0..20 {
        jobs.push(Job {
            store: sqlite(n),
            run_id: format!("run_{n}"),
            steps: vec![("run", true)],
        });
    }
    for n in 0..5 {
        jobs.push(Job {
            store: "memory".into(),
            run_id: format!("memory_{n}"),
            steps: vec![("run", true)],
        });
    }
    for n in 0..10 {
        jobs.push(Job {
            store: sqlite(100 + n),
            run_id: format!("paused_{n}"),
            steps: vec![("pause", true), ("resume", true)],
        });
    }
    for n in 0..5 {
        jobs.push(Job {
            store: sqlite(200 + n),
            run_id: format!("crashed_{n}"),
            steps: vec![("crash", false), ("recover", true)],
        });
    }
    let endpoint = collector.url();
    let ran: Vec<(Job, Vec<Option<i32>>)> = futures::stream::iter(jobs)
        .map(|job| {
            let endpoint = endpoint.clone();
            async move {
                let mut codes = Vec::new();
                for (command, _) in &job.steps {
                    codes.push(child(&endpoint, &job.store, command, &job.run_id).await);
                }
                (job, codes)
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;

    let spans = collector.spans();
    let roots = |run_id: &str, resumed: bool| -> Vec<Got> {
        spans
            .iter()
            .filter(|s| {
                s.name == "invoke_agent otel-child"
                    && s.attributes.get("phaseo.run.id").map(String::as_str) == Some(run_id)
                    && s.attributes.get("phaseo.run.resumed").map(String::as_str)
                        == Some(if resumed { "true" } else { "false" })
            })
            .cloned()
            .collect()
    };
    let mut looked_for = 0;
    let mut missing = Vec::new();
    let mut dangling = Vec::new();
    for (job, codes) in &ran {
        for ((command, counted), code) in job.steps.iter().zip(codes) {
            let expected = if *command == "crash" { 7 } else { 0 };
            assert_eq!(
                *code,
                Some(expected),
                "otel_child {command} {} exited with {code:?}",
                job.run_id
            );
            if !counted {
                continue;
            }
            looked_for += 1;
            let resumed = matches!(*command, "resume" | "recover");
            let found = roots(&job.run_id, resumed);
            if found.is_empty() {
                missing.push(format!("{command} {}", job.run_id));
            }
            // A resumed run links to the span that paused it: that span arrived too.
            if *command == "resume" {
                let paused = roots(&job.run_id, false);
                for span in &found {
                    let linked = span
                        .links
                        .iter()
                        .any(|l| paused.iter().any(|p| &p.span_id == l));
                    if !linked {
                        dangling.push(job.run_id.clone());
                    }
                }
            }
        }
    }
    assert_eq!(looked_for, 50);
    assert!(!spans.is_empty());

    // By default no span carries where the crate was built, the thread it ran on, or its
    // busy/idle times.
    let mut carried = BTreeMap::<&str, usize>::new();
    for span in &spans {
        for key in [
            "code.file.path",
            "code.filepath",
            "code.line.number",
            "code.lineno",
            "code.module.name",
            "code.namespace",
            "thread.id",
            "thread.name",
            "busy_ns",
            "idle_ns",
        ] {
            if span.attributes.contains_key(key) {
                *carried.entry(key).or_default() += 1;
            }
        }
    }
    assert!(
        missing.is_empty() && dangling.is_empty() && carried.is_empty(),
        "{} of {looked_for} processes' invoke_agent spans never arrived: {missing:?}; resumed \
         runs whose link points at a span that never arrived: {dangling:?}; of {} spans, how \
         many carry each attribute that should not be there: {carried:?}",
        missing.len(),
        spans.len(),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
