//! Streams: one huge event, silence, trickling, and events that break the protocol.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use phaseo_agent::limits::{Limit, ModelLimits};
use phaseo_agent::provider::anthropic::Anthropic;
use phaseo_agent::provider::openai::OpenAi;
use phaseo_agent::provider::reqwest;
use phaseo_agent::{Agent, Event, Model, ModelErrorKind, Tool, ToolContext};
use serde_json::{Value, json};

use super::server::{Server, start};
use super::{
    BOTH, Provider, anthropic_event, ask, assert_limit, case, fast_retries, model, openai_chunk,
};

const MIB: usize = 1024 * 1024;

/// A server that streams `body` as an event stream, then closes.
async fn streams(body: String) -> Server {
    start(move |_, mut out| {
        let body = body.clone();
        async move {
            let _ = out
                .head("200 OK", &[("content-type", "text/event-stream")])
                .await;
            let _ = out.send(body.as_bytes()).await;
        }
    })
    .await
}

/// The parts of a streamed text answer around one text event: what comes before its text, and
/// what comes after.
fn answer_around_text(provider: Provider) -> (String, String) {
    match provider {
        Provider::OpenAi => (
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"".to_owned(),
            "\"},\"finish_reason\":null}]}\n\n".to_owned()
                + &openai_chunk("{}", Some("stop"))
                + "data: [DONE]\n\n",
        ),
        Provider::Anthropic => (
            anthropic_event(
                "message_start",
                r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}"#,
            ) + &anthropic_event(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ) + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"",
            "\"}}\n\n".to_owned()
                + &anthropic_event(
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":0}"#,
                )
                + &anthropic_event(
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}"#,
                )
                + &anthropic_event("message_stop", r#"{"type":"message_stop"}"#),
        ),
    }
}

/// A server that streams a text answer with one event of `size` bytes of text, written in
/// pieces (so the test itself never holds it).
async fn answer_with_event(provider: Provider, size: usize) -> Server {
    start(move |_, mut out| async move {
        let (before, after) = answer_around_text(provider);
        let _ = out
            .head("200 OK", &[("content-type", "text/event-stream")])
            .await;
        let _ = out.send(before.as_bytes()).await;
        let filler = [b'y'; 64 * 1024];
        let mut left = size;
        while left > 0 {
            let n = left.min(filler.len());
            if out.send(&filler[..n]).await.is_err() {
                return;
            }
            left -= n;
        }
        let _ = out.send(after.as_bytes()).await;
    })
    .await
}

#[test]
fn an_event_over_the_event_limit_is_refused() {
    case(Duration::from_secs(60), async {
        for provider in BOTH {
            // Just over the default 8 MiB, and 100 MB.
            for size in [8 * MIB + 1, 100_000_000] {
                let server = answer_with_event(provider, size).await;
                let model = model(provider, &server.url, ModelLimits::default());
                let error = ask(&*model, true).await.expect_err("too large");
                assert_limit(&error, Limit::EventBytes);
                assert_eq!(error.limit.as_ref().map(|l| l.value), Some(8 * MIB as u64));
            }
            // A small limit.
            let server = answer_with_event(provider, 2000).await;
            let limits = ModelLimits::default().max_event_bytes(1000);
            let error = ask(&*model(provider, &server.url, limits), true)
                .await
                .expect_err("too large");
            assert_limit(&error, Limit::EventBytes);
        }
    });
}

#[test]
fn a_large_event_under_the_limit_is_read_whole() {
    case(Duration::from_secs(60), async {
        for provider in BOTH {
            let size = 6 * MIB;
            let server = answer_with_event(provider, size).await;
            let model = model(provider, &server.url, ModelLimits::default());
            let response = ask(&*model, true).await.expect("an answer");
            assert_eq!(response.text.map(|t| t.len()), Some(size));
        }
    });
}

#[test]
fn a_server_silent_after_its_headers_hits_the_idle_limit() {
    case(Duration::from_secs(30), async {
        for provider in BOTH {
            for streamed in [true, false] {
                let server = start(|_, mut out| async move {
                    let kind = "text/event-stream";
                    let _ = out.head("200 OK", &[("content-type", kind)]).await;
                    out.hold().await;
                })
                .await;
                let limits = ModelLimits::default().stream_idle_timeout(Duration::from_millis(300));
                let error = ask(&*model(provider, &server.url, limits), streamed)
                    .await
                    .expect_err("silent");
                assert_limit(&error, Limit::StreamIdle);
                assert!(error.is_retryable(), "a timeout is retried");
            }
        }
    });
}

#[test]
fn a_server_that_never_answers_hits_the_idle_limit() {
    case(Duration::from_secs(30), async {
        for provider in BOTH {
            let server = start(|_, mut out| async move { out.hold().await }).await;
            let limits = ModelLimits::default().stream_idle_timeout(Duration::from_millis(300));
            let error = ask(&*model(provider, &server.url, limits), true)
                .await
                .expect_err("silent");
            assert_limit(&error, Limit::StreamIdle);
            assert_eq!(error.limit.as_ref().map(|l| l.value), Some(300));
        }
    });
}

#[test]
fn a_trickling_server_hits_the_request_time_limit() {
    case(Duration::from_secs(30), async {
        for provider in BOTH {
            let server = start(|_, mut out| async move {
                let _ = out
                    .head("200 OK", &[("content-type", "text/event-stream")])
                    .await;
                // A comment byte at a time, each well within the idle limit, forever.
                loop {
                    if out.send(b":").await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await;
            let limits = ModelLimits::default()
                .stream_idle_timeout(Duration::from_secs(5))
                .request_timeout(Duration::from_millis(700));
            let error = ask(&*model(provider, &server.url, limits), true)
                .await
                .expect_err("too slow");
            assert_limit(&error, Limit::RequestTime);
            assert_eq!(error.limit.as_ref().map(|l| l.value), Some(700));
        }
    });
}

/// A tool that counts its calls.
fn counted_tool(calls: Arc<AtomicUsize>) -> Tool {
    Tool::new(
        "act",
        "Acts",
        json!({"type": "object"}),
        move |_input: Value, _ctx: ToolContext| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(json!("done"))
        },
    )
}

/// Streams `body` (every request) to an agent with a counted tool; returns the last event
/// and how many times the tool ran.
async fn run_with_tool(provider: Provider, body: String) -> (Event, usize, usize) {
    let server = streams(body).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder("a")
        .model(model(provider, &server.url, ModelLimits::default()))
        .tool(counted_tool(calls.clone()))
        .model_retries(fast_retries())
        .build()
        .expect("agent");
    let events: Vec<Event> = agent.run("Hi").stream().collect().await;
    let last = events.last().cloned().expect("events");
    (last, calls.load(Ordering::SeqCst), server.requests())
}

fn failed_with(event: &Event, kind: ModelErrorKind) {
    match event {
        Event::Failed { error, .. } => assert!(error.contains(kind.as_str()), "{error}"),
        other => panic!("the run did not fail: {other:?}"),
    }
}

#[test]
fn openai_deltas_after_the_finish_reason_are_refused() {
    case(Duration::from_secs(30), async {
        let tool_call = r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"act","arguments":""}}]}"#;
        for tail in ["", "data: [DONE]\n\n"] {
            // Text, the finish, then a call (and, in the first, the stream cut before `[DONE]`).
            let body = openai_chunk(r#"{"content":"Hello"}"#, None)
                + &openai_chunk("{}", Some("stop"))
                + &openai_chunk(tool_call, None)
                + tail;
            let (last, calls, _) = run_with_tool(Provider::OpenAi, body).await;
            assert_eq!(calls, 0, "a call after the finish ran");
            failed_with(&last, ModelErrorKind::InvalidResponse);
        }
        // Text after the finish, too.
        let body = openai_chunk("{}", Some("stop")) + &openai_chunk(r#"{"content":"late"}"#, None);
        let (last, _, _) = run_with_tool(Provider::OpenAi, body).await;
        failed_with(&last, ModelErrorKind::InvalidResponse);
    });
}

#[test]
fn a_truncated_tool_call_never_runs() {
    case(Duration::from_secs(30), async {
        // OpenAI: arguments cut mid-way, a finish reason, no `[DONE]`.
        let body = openai_chunk(
            r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"act","arguments":"{\"a\":"}}]}"#,
            None,
        ) + &openai_chunk("{}", Some("tool_calls"));
        let (last, calls, _) = run_with_tool(Provider::OpenAi, body).await;
        assert_eq!(calls, 0, "openai: a cut call ran");
        failed_with(&last, ModelErrorKind::Transport);

        // Anthropic: a `tool_use` block that never stopped (its input cut), then the message end.
        let start = anthropic_event(
            "message_start",
            r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}"#,
        ) + &anthropic_event(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"act","input":{}}}"#,
        );
        let end = anthropic_event(
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":1}}"#,
        ) + &anthropic_event("message_stop", r#"{"type":"message_stop"}"#);
        let piece = anthropic_event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
        );
        for body in [start.clone() + &end, start.clone() + &piece + &end] {
            let (last, calls, _) = run_with_tool(Provider::Anthropic, body).await;
            assert_eq!(calls, 0, "anthropic: a cut call ran");
            failed_with(&last, ModelErrorKind::InvalidResponse);
        }

        // Anthropic: an argument piece after its block stopped.
        let body = start
            + &anthropic_event(
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            )
            + &piece
            + &end;
        let (last, calls, _) = run_with_tool(Provider::Anthropic, body).await;
        assert_eq!(calls, 0, "anthropic: a call with a late piece ran");
        failed_with(&last, ModelErrorKind::InvalidResponse);
    });
}

#[test]
fn a_server_whose_backlog_is_full_hits_the_connect_limit() {
    case(Duration::from_secs(60), async {
        // A listener that never accepts: once its backlog is full, the kernel drops new SYNs and
        // a connection is never made.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let mut held = Vec::new();
        for _ in 0..1024 {
            let attempt = tokio::net::TcpStream::connect(address);
            match tokio::time::timeout(Duration::from_millis(100), attempt).await {
                Ok(Ok(stream)) => held.push(stream),
                _ => break,
            }
        }
        let url = format!("http://{address}");
        for provider in BOTH {
            let limits = ModelLimits::default().connect_timeout(Duration::from_millis(300));
            let error = ask(&*model(provider, &url, limits), false)
                .await
                .expect_err("never connected");
            assert_limit(&error, Limit::ConnectTime);
            assert_eq!(error.limit.as_ref().map(|l| l.value), Some(300));
        }
        // With the user's own client, connecting is the client's: its connect timeout, not the
        // limits' (10 s by default), and the error names no limit of this crate's.
        for provider in BOTH {
            let client = reqwest::Client::builder()
                .connect_timeout(Duration::from_millis(300))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a client");
            let model: Box<dyn Model> = match provider {
                Provider::OpenAi => Box::new(
                    OpenAi::new("gpt-test")
                        .base_url(format!("{url}/v1"))
                        .http_client(client),
                ),
                Provider::Anthropic => Box::new(
                    Anthropic::new("claude-test")
                        .base_url(&url)
                        .http_client(client),
                ),
            };
            let error = ask(&*model, false).await.expect_err("never connected");
            assert_eq!(error.kind, ModelErrorKind::Timeout, "{provider:?}: {error}");
            assert_eq!(error.limit, None, "{provider:?}: {error}");
        }
        drop((held, listener));
    });
}
