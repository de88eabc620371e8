//! Response headers: `retry-after` in every shape, and redirects.

use std::time::Duration;

use phaseo_agent::limits::ModelLimits;
use phaseo_agent::{Agent, ModelErrorKind};

use super::server::{Out, start};
use super::{BOTH, Provider, ask, case, fast_retries, model, model_error, path};

/// A 429 whose headers are `headers`.
async fn rate_limited(headers: &'static [(&'static str, &'static str)], mut out: Out) {
    let _ = out
        .whole(
            "429 Too Many Requests",
            headers,
            br#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#,
        )
        .await;
}

/// What `retry-after` of a 429 with `headers` becomes: the wait, or `None` when it is ignored.
async fn retry_after(
    provider: Provider,
    headers: &'static [(&'static str, &'static str)],
) -> Option<Duration> {
    let server = start(move |_, out| rate_limited(headers, out)).await;
    let model = model(provider, &server.url, ModelLimits::default());
    let error = ask(&*model, false).await.expect_err("a 429");
    assert_eq!(error.kind, ModelErrorKind::RateLimited, "{error}");
    assert_eq!(server.requests(), 1);
    error.retry_after
}

/// Header values a server may send, and whether each is read (`Some(wait)`), ignored (`None`),
/// or longer than any agent waits (`Some(Duration::MAX)` here: checked as "over a day").
/// A response's headers, by name and value.
type Headers = &'static [(&'static str, &'static str)];

const SHAPES: &[(Headers, Option<Duration>)] = &[
    (&[("retry-after", "2")], Some(Duration::from_secs(2))),
    (&[("retry-after", "0.25")], Some(Duration::from_millis(250))),
    (
        &[("retry-after-ms", "1500")],
        Some(Duration::from_millis(1500)),
    ),
    (&[("retry-after", "1e300")], Some(Duration::MAX)),
    (
        &[("retry-after", "18446744073709551616")],
        Some(Duration::MAX),
    ),
    (&[("retry-after", "1.8e19")], Some(Duration::MAX)),
    (&[("retry-after-ms", "1e25")], Some(Duration::MAX)),
    (&[("retry-after-ms", "1e300")], Some(Duration::MAX)),
    (&[("retry-after", "1e-400")], Some(Duration::ZERO)),
    (&[("retry-after", "-1")], None),
    (&[("retry-after", "-0.5")], None),
    (&[("retry-after-ms", "-1e25")], None),
    (&[("retry-after", "NaN")], None),
    (&[("retry-after", "nan")], None),
    (&[("retry-after", "inf")], None),
    (&[("retry-after", "infinity")], None),
    (&[("retry-after-ms", "-inf")], None),
    (&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], None),
    (&[("retry-after", "soon")], None),
    (&[("retry-after", "0x10")], None),
    (&[("retry-after", "")], None),
    (&[("retry-after", "   ")], None),
    (&[("retry-after", "1, 2")], None),
    (
        &[("retry-after", "1e300"), ("retry-after", "3")],
        Some(Duration::MAX),
    ),
    (
        &[("retry-after-ms", "garbage"), ("retry-after", "4")],
        Some(Duration::from_secs(4)),
    ),
];

fn check_shapes(provider: Provider) {
    case(Duration::from_secs(60), async move {
        for (headers, expected) in SHAPES {
            let wait = retry_after(provider, headers).await;
            match expected {
                Some(Duration::MAX) => {
                    let wait = wait.unwrap_or_else(|| panic!("{headers:?}: ignored"));
                    // Longer than any agent waits (so it fails at once), never a panic.
                    assert!(wait >= Duration::from_secs(86_400), "{headers:?}: {wait:?}");
                }
                expected => assert_eq!(wait, *expected, "{headers:?}"),
            }
        }
    });
}

#[test]
fn every_retry_after_shape_is_read_or_ignored_without_a_panic_openai() {
    check_shapes(Provider::OpenAi);
}

#[test]
fn every_retry_after_shape_is_read_or_ignored_without_a_panic_anthropic() {
    check_shapes(Provider::Anthropic);
}

#[test]
fn a_huge_retry_after_fails_the_run_at_once() {
    case(Duration::from_secs(30), async {
        for provider in BOTH {
            for headers in [
                &[("retry-after", "1e300")][..],
                &[("retry-after-ms", "1e25")][..],
            ] {
                let server = start(move |_, out| rate_limited(headers, out)).await;
                let agent = Agent::builder("a")
                    .model(model(provider, &server.url, ModelLimits::default()))
                    .model_retries(fast_retries())
                    .build()
                    .expect("agent");
                let failed = agent.run("Hi").await.expect_err("a 429");
                let error = model_error(&failed.error);
                assert_eq!(error.kind, ModelErrorKind::RateLimited, "{error}");
                // Longer than the agent's 60 s: no retry.
                assert_eq!(server.requests(), 1, "{provider:?} {headers:?}");
            }
        }
    });
}

/// A body both providers read as a whole answer: what a redirect's target would answer.
const STOLEN: &str = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"stolen"},"finish_reason":"stop"}],"type":"message","content":[{"type":"text","text":"stolen"}],"stop_reason":"end_turn"}"#;

#[test]
fn redirects_are_not_followed_and_the_other_host_gets_nothing() {
    case(Duration::from_secs(60), async {
        // A different port is a different origin.
        let other = start(|_, mut out| async move {
            let _ = out
                .whole(
                    "200 OK",
                    &[("content-type", "application/json")],
                    STOLEN.as_bytes(),
                )
                .await;
        })
        .await;
        for provider in BOTH {
            for status in [
                "301 Moved Permanently",
                "302 Found",
                "303 See Other",
                "307 Temporary Redirect",
                "308 Permanent Redirect",
            ] {
                for streamed in [false, true] {
                    let target = format!("{}{}", other.url, path(provider));
                    let location = format!("{target}?token=abc123#part");
                    let first = start(move |_, mut out| {
                        let location = location.clone();
                        async move {
                            let _ = out.whole(status, &[("location", &location)], b"").await;
                        }
                    })
                    .await;
                    let model = model(provider, &first.url, ModelLimits::default());
                    let what = format!("{provider:?} {status} streamed: {streamed}");
                    let error = ask(&*model, streamed).await.expect_err(&what);
                    assert_eq!(error.kind, ModelErrorKind::BadRequest, "{what}: {error}");
                    assert!(!error.is_retryable(), "{what}");
                    let code: u16 = status[..3].parse().expect("a code");
                    assert_eq!(error.status, Some(code), "{what}: {error}");
                    let message = error.to_string();
                    assert!(message.contains(&target), "{what}: {message}");
                    assert!(!message.contains("abc123"), "{what}: {message}");
                    assert!(message.contains("base_url"), "{what}: {message}");
                    assert_eq!(first.requests(), 1, "{what}");
                    assert_eq!(other.connections(), 0, "{what}: the other host was asked");
                }
            }
        }
        // Through an agent too: the run fails, nothing reaches the other host.
        for provider in BOTH {
            let location = format!("{}{}", other.url, path(provider));
            let first = start(move |_, mut out| {
                let location = location.clone();
                async move {
                    let _ = out
                        .whole("307 Temporary Redirect", &[("location", &location)], b"")
                        .await;
                }
            })
            .await;
            let agent = Agent::builder("a")
                .model(model(provider, &first.url, ModelLimits::default()))
                .model_retries(fast_retries())
                .build()
                .expect("agent");
            let failed = agent.run("Hi").await.expect_err("a redirect");
            assert_eq!(model_error(&failed.error).kind, ModelErrorKind::BadRequest);
            assert_eq!(first.requests(), 1, "{provider:?}: not retried");
            assert_eq!(other.connections(), 0, "{provider:?}");
            let head = first.heads().concat().to_ascii_lowercase();
            assert!(head.contains("x-custom: custom-secret"), "{head}");
        }
    });
}
