//! Sizes: endless streams, huge whole bodies, huge error bodies.

use std::time::Duration;

use phaseo_agent::limits::{Limit, ModelLimits};
use phaseo_agent::{Agent, Event, ModelErrorKind};

use futures::StreamExt;

use super::server::start;
use super::{
    BOTH, Provider, anthropic_event, ask, assert_limit, case, fast_retries, model, openai_chunk,
};

const MIB: usize = 1024 * 1024;

/// The start of a streamed answer, before its endless part.
fn stream_start(provider: Provider) -> String {
    match provider {
        Provider::OpenAi => openai_chunk(r#"{"role":"assistant","content":""}"#, None),
        Provider::Anthropic => {
            anthropic_event(
                "message_start",
                r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}"#,
            ) + &anthropic_event(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            )
        }
    }
}

/// One event of text (`size` bytes of it).
fn text_event(provider: Provider, size: usize) -> String {
    let text = "x".repeat(size);
    match provider {
        Provider::OpenAi => openai_chunk(&format!(r#"{{"content":"{text}"}}"#), None),
        Provider::Anthropic => anthropic_event(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{text}"}}}}"#
            ),
        ),
    }
}

/// One event that adds nothing to the answer (a ping, an empty delta).
fn empty_event(provider: Provider) -> String {
    match provider {
        Provider::OpenAi => openai_chunk("{}", None),
        Provider::Anthropic => anthropic_event("ping", r#"{"type":"ping"}"#),
    }
}

/// A server that streams `start`, then `piece` forever.
async fn endless(start_text: String, piece: String) -> super::server::Server {
    start(move |_, mut out| {
        let (start_text, piece) = (start_text.clone(), piece.clone());
        async move {
            let _ = out
                .head("200 OK", &[("content-type", "text/event-stream")])
                .await;
            let _ = out.send(start_text.as_bytes()).await;
            let _ = out.repeat(piece.as_bytes(), u64::MAX).await;
        }
    })
    .await
}

#[test]
fn an_endless_stream_hits_the_response_limit_and_is_not_retried() {
    case(Duration::from_secs(60), async {
        for provider in BOTH {
            let limits = ModelLimits::default().max_response_bytes(MIB);
            let server = endless(stream_start(provider), text_event(provider, 1000)).await;
            let error = ask(&*model(provider, &server.url, limits), true)
                .await
                .expect_err("over the limit");
            assert_limit(&error, Limit::ResponseBytes);
            assert_eq!(error.limit.as_ref().map(|l| l.value), Some(MIB as u64));
            assert!(!error.is_retryable());

            // Through an agent that retries what can be retried: asked once.
            let server = endless(stream_start(provider), text_event(provider, 1000)).await;
            let agent = Agent::builder("a")
                .model(model(provider, &server.url, limits))
                .model_retries(fast_retries())
                .build()
                .expect("agent");
            let events: Vec<Event> = agent.run("Hi").stream().collect().await;
            match events.last() {
                Some(Event::Failed { error, .. }) => {
                    assert!(error.contains("ModelLimits::max_response_bytes"), "{error}")
                }
                other => panic!("{provider:?}: the run did not fail: {other:?}"),
            }
            assert_eq!(server.requests(), 1, "{provider:?}: retried");
        }
    });
}

#[test]
fn an_endless_stream_of_empty_events_hits_the_default_response_limit() {
    case(Duration::from_secs(120), async {
        for provider in BOTH {
            let server = endless(stream_start(provider), empty_event(provider).repeat(100)).await;
            let error = ask(&*model(provider, &server.url, ModelLimits::default()), true)
                .await
                .expect_err("over the limit");
            assert_limit(&error, Limit::ResponseBytes);
            assert_eq!(
                error.limit.as_ref().map(|l| l.value),
                Some(ModelLimits::default().response_bytes() as u64)
            );
            assert_eq!(server.requests(), 1);
        }
    });
}

/// A 200 JSON body of 500 MB: with its length announced, or chunked, or ended by the close.
async fn huge_body(framing: &'static str) -> super::server::Server {
    start(move |_, mut out| async move {
        let filler = vec![b' '; 64 * 1024];
        match framing {
            "length" => {
                let _ = out
                    .head(
                        "200 OK",
                        &[
                            ("content-type", "application/json"),
                            ("content-length", "500000000"),
                        ],
                    )
                    .await;
                let _ = out.repeat(&filler, 500_000_000).await;
            }
            "chunked" => {
                let _ = out
                    .head(
                        "200 OK",
                        &[
                            ("content-type", "application/json"),
                            ("transfer-encoding", "chunked"),
                        ],
                    )
                    .await;
                let mut chunk = format!("{:x}\r\n", filler.len()).into_bytes();
                chunk.extend_from_slice(&filler);
                chunk.extend_from_slice(b"\r\n");
                let _ = out.repeat(&chunk, 500_000_000).await;
            }
            _ => {
                let _ = out
                    .head("200 OK", &[("content-type", "application/json")])
                    .await;
                let _ = out.repeat(&filler, 500_000_000).await;
            }
        }
    })
    .await
}

#[test]
fn a_huge_body_is_refused_by_its_length_at_once() {
    case(Duration::from_secs(60), async {
        for provider in BOTH {
            let server = huge_body("length").await;
            let model = model(provider, &server.url, ModelLimits::default());
            let error = ask(&*model, false).await.expect_err("too large");
            assert_limit(&error, Limit::ResponseBytes);
            // Refused before reading: what the server got out is what the sockets buffer.
            assert!(server.sent() < 32 * MIB as u64, "{}", server.sent());
            assert_eq!(server.requests(), 1);
        }
    });
}

#[test]
fn a_huge_body_without_a_length_is_refused_by_counting() {
    case(Duration::from_secs(60), async {
        for provider in BOTH {
            for (framing, limits) in [
                ("chunked", ModelLimits::default()),
                ("close", ModelLimits::default().max_response_bytes(MIB)),
            ] {
                let server = huge_body(framing).await;
                let model = model(provider, &server.url, limits);
                let error = ask(&*model, false).await.expect_err("too large");
                assert_limit(&error, Limit::ResponseBytes);
                let bound = (limits.response_bytes() + 32 * MIB) as u64;
                assert!(server.sent() < bound, "{framing}: {}", server.sent());
            }
        }
    });
}

#[test]
fn a_huge_error_body_is_read_only_up_to_64_kib_on_each_attempt() {
    case(Duration::from_secs(60), async {
        for provider in BOTH {
            let server = start(|_, mut out| async move {
                let mut message = br#"{"error":{"type":"server_error","message":""#.to_vec();
                message.extend(std::iter::repeat_n(b'x', 100_000));
                let _ = out
                    .head(
                        "500 Internal Server Error",
                        &[
                            ("content-type", "application/json"),
                            ("content-length", "300000000"),
                        ],
                    )
                    .await;
                let _ = out.send(&message).await;
                let _ = out.repeat(&[b'x'; 65536], 300_000_000).await;
            })
            .await;
            let agent = Agent::builder("a")
                .model(model(provider, &server.url, ModelLimits::default()))
                .model_retries(fast_retries())
                .build()
                .expect("agent");
            let failed = agent.run("Hi").await.expect_err("a 500");
            let error = super::model_error(&failed.error);
            assert_eq!(error.kind, ModelErrorKind::Overloaded, "{error}");
            assert_eq!(error.status, Some(500));
            // The start of the body is the message (cut, as the body was).
            assert!(
                error.message.starts_with("{\"error\""),
                "{}",
                &error.message[..100]
            );
            assert!(error.message.len() <= 64 * 1024, "{}", error.message.len());
            // Four attempts (three retries), each stopped early.
            assert_eq!(server.requests(), 4);
            assert!(server.sent() < 4 * 16 * MIB as u64, "{}", server.sent());
        }
    });
}

/// `[[],[],...]`: within the size limits, but each `[]` of it is a 32-byte value once parsed
/// (eleven times its text), and the estimate counts more.
fn nested_empties(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 2);
    text.push('[');
    while text.len() + 3 < bytes {
        text.push_str("[],");
    }
    text.push_str("[]]");
    text
}

#[test]
fn a_body_within_its_size_that_would_parse_to_gigabytes_is_refused() {
    case(Duration::from_secs(60), async {
        let body = std::sync::Arc::new(nested_empties(60 * MIB));
        let server = start(move |_, mut out| {
            let body = body.clone();
            async move {
                let _ = out
                    .whole(
                        "200 OK",
                        &[("content-type", "application/json")],
                        body.as_bytes(),
                    )
                    .await;
            }
        })
        .await;
        for provider in BOTH {
            let model = model(provider, &server.url, ModelLimits::default());
            let error = ask(&*model, false).await.expect_err("too costly to parse");
            assert_limit(&error, Limit::ResponseBytes);
            assert!(error.message.contains("once parsed"), "{error}");
        }
    });
}

#[test]
fn an_event_within_its_size_that_would_parse_to_gigabytes_is_refused() {
    case(Duration::from_secs(60), async {
        for provider in BOTH {
            let data = nested_empties(7 * MIB);
            let event = match provider {
                Provider::OpenAi => format!("data: {data}\n\n"),
                Provider::Anthropic => anthropic_event("content_block_delta", &data),
            };
            let start_text = stream_start(provider);
            let server = start(move |_, mut out| {
                let (start_text, event) = (start_text.clone(), event.clone());
                async move {
                    let _ = out
                        .head("200 OK", &[("content-type", "text/event-stream")])
                        .await;
                    let _ = out.send(start_text.as_bytes()).await;
                    let _ = out.send(event.as_bytes()).await;
                    out.hold().await;
                }
            })
            .await;
            let model = model(provider, &server.url, ModelLimits::default());
            let error = ask(&*model, true).await.expect_err("too costly to parse");
            assert_limit(&error, Limit::EventBytes);
            assert!(error.message.contains("once parsed"), "{error}");
        }
    });
}
