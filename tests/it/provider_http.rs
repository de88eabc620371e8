//! What both providers share (`HttpModel`), through their public API against in-process servers
//! (wiremock): the user's own HTTP client (`http_client`) and what still holds with it, a
//! redirect that such a client follows, and headers and keys checked when they are set.

use std::time::Duration;

use futures::StreamExt;
use phaseo_agent::limits::{Limit, ModelLimits};
use phaseo_agent::provider::anthropic::Anthropic;
use phaseo_agent::provider::openai::OpenAi;
use phaseo_agent::provider::reqwest::{self, header};
use phaseo_agent::provider::{HeaderError, HttpModel, Wire};
use phaseo_agent::{Agent, Event, Message, Model, ModelErrorKind, ModelRequest};
use wiremock::{MockServer, ResponseTemplate};

use crate::support::wire::{answering_server, fast_retries, json_ok, model_error, requests};

const OPENAI_TEXT: &str = include_str!("../fixtures/openai/openai_text.json");
const ANTHROPIC_TEXT: &str = include_str!("../fixtures/anthropic/end_turn.json");
/// What a redirect's target answers, in both formats: it must never reach the run.
const STOLEN: &str = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"stolen"},"finish_reason":"stop"}],"type":"message","content":[{"type":"text","text":"stolen"}],"stop_reason":"end_turn"}"#;

/// The two providers, and what a test needs to know of each one's wire format.
#[derive(Debug, Clone, Copy)]
enum Provider {
    OpenAi,
    Anthropic,
}

const BOTH: [Provider; 2] = [Provider::OpenAi, Provider::Anthropic];

impl Provider {
    fn path(self) -> &'static str {
        match self {
            Provider::OpenAi => "/v1/chat/completions",
            Provider::Anthropic => "/v1/messages",
        }
    }

    /// A whole text answer.
    fn answer(self) -> ResponseTemplate {
        json_ok(match self {
            Provider::OpenAi => OPENAI_TEXT,
            Provider::Anthropic => ANTHROPIC_TEXT,
        })
    }

    /// The key's header, and what it carries for the key `test-key`.
    fn key_header(self) -> (&'static str, &'static str) {
        match self {
            Provider::OpenAi => ("authorization", "Bearer test-key"),
            Provider::Anthropic => ("x-api-key", "test-key"),
        }
    }

    /// A model of this provider for the server at `url`, with `settings`.
    fn model(self, url: &str, settings: Settings) -> Result<Box<dyn Model>, HeaderError> {
        Ok(match self {
            Provider::OpenAi => {
                let model = OpenAi::new("gpt-test").base_url(format!("{url}/v1"));
                Box::new(settings.apply(model)?)
            }
            Provider::Anthropic => {
                let model = Anthropic::new("claude-test").base_url(url);
                Box::new(settings.apply(model)?)
            }
        })
    }
}

/// The settings a test gives a model: the same for both providers, since they are
/// `HttpModel`'s.
#[derive(Default)]
struct Settings {
    key: Option<&'static str>,
    headers: Vec<(&'static str, &'static str)>,
    client: Option<reqwest::Client>,
    limits: Option<ModelLimits>,
}

impl Settings {
    fn apply<W: Wire>(self, mut model: HttpModel<W>) -> Result<HttpModel<W>, HeaderError> {
        if let Some(key) = self.key {
            model = model.api_key(key)?;
        }
        for (name, value) in self.headers {
            model = model.header(name, value)?;
        }
        if let Some(limits) = self.limits {
            model = model.limits(limits);
        }
        if let Some(client) = self.client {
            model = model.http_client(client);
        }
        Ok(model)
    }
}

/// A server that answers `provider`'s path with `response`, each time.
async fn server(provider: Provider, response: ResponseTemplate) -> MockServer {
    answering_server(provider.path(), response).await
}

fn request() -> ModelRequest<'static> {
    ModelRequest::new(vec![Message::User {
        content: "Hi".into(),
    }])
}

fn agent(model: Box<dyn Model>) -> Agent {
    Agent::builder("a")
        .model(model)
        .model_retries(fast_retries())
        .build()
        .expect("agent")
}

/// A client as many applications build one: reqwest's defaults (redirects followed), and a
/// default header of its own.
fn followers_client() -> reqwest::Client {
    let mut headers = header::HeaderMap::new();
    headers.insert("x-team", header::HeaderValue::from_static("ops"));
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("a client")
}

// The user's client.

#[tokio::test]
async fn a_users_client_is_the_one_that_sends() {
    for provider in BOTH {
        let server = server(provider, provider.answer()).await;
        let settings = Settings {
            key: Some("test-key"),
            client: Some(followers_client()),
            ..Settings::default()
        };
        let model = provider.model(&server.uri(), settings).expect("settings");
        model.respond(&request()).await.expect("an answer");
        let requests = requests(&server).await;
        let headers = &requests[0].headers;
        // The client's default header goes with the request; one this crate sends replaces the
        // client's default of the same name.
        assert_eq!(headers["x-team"], "ops", "{provider:?}");
        assert_eq!(headers["content-type"], "application/json", "{provider:?}");
        let (name, value) = provider.key_header();
        assert_eq!(headers[name], value, "{provider:?}");
    }
}

#[tokio::test]
async fn a_redirect_a_users_client_follows_fails_the_run_and_its_answer_is_never_used() {
    for provider in BOTH {
        for streamed in [false, true] {
            let other = server(provider, json_ok(STOLEN)).await;
            let location = format!("{}{}", other.uri(), provider.path());
            let redirect = ResponseTemplate::new(307).insert_header("location", location.as_str());
            let first = server(provider, redirect).await;
            let settings = Settings {
                key: Some("test-key"),
                client: Some(followers_client()),
                ..Settings::default()
            };
            let model = provider.model(&first.uri(), settings).expect("settings");
            let agent = agent(model);
            let what = format!("{provider:?} streamed: {streamed}");
            let (error, deltas) = if streamed {
                let events: Vec<Event> = agent.run("Hi").stream().collect().await;
                let deltas = events
                    .iter()
                    .filter(|e| matches!(e, Event::ModelDelta { .. }))
                    .count();
                let Some(Event::Failed { error, .. }) = events.last() else {
                    panic!("{what}: the run did not fail: {events:?}");
                };
                (error.clone(), deltas)
            } else {
                let failed = agent.run("Hi").await.expect_err(&what);
                let kind = model_error(&failed.error).kind;
                assert_eq!(kind, ModelErrorKind::BadRequest, "{what}");
                (failed.error.to_string(), 0)
            };
            assert!(error.contains("bad_request"), "{what}: {error}");
            assert!(error.contains("http_client"), "{what}: {error}");
            assert!(error.contains("Policy::none()"), "{what}: {error}");
            assert!(error.contains(&other.uri()), "{what}: {error}");
            assert!(!error.contains("stolen"), "{what}: {error}");
            // Nothing of the other server's answer reached the run, and it was not asked again.
            assert_eq!(deltas, 0, "{what}");
            assert_eq!(requests(&first).await.len(), 1, "{what}: not retried");
            assert_eq!(requests(&other).await.len(), 1, "{what}");
        }
    }
}

#[tokio::test]
async fn a_users_client_without_redirects_gets_the_usual_redirect_error() {
    for provider in BOTH {
        let other = server(provider, json_ok(STOLEN)).await;
        let location = format!("{}{}", other.uri(), provider.path());
        let redirect = ResponseTemplate::new(308).insert_header("location", location.as_str());
        let first = server(provider, redirect).await;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client");
        let settings = Settings {
            client: Some(client),
            ..Settings::default()
        };
        let model = provider.model(&first.uri(), settings).expect("settings");
        let error = model.respond(&request()).await.expect_err("a redirect");
        assert_eq!(
            (error.kind, error.status),
            (ModelErrorKind::BadRequest, Some(308))
        );
        assert!(error.message.contains("base_url"), "{error}");
        assert!(requests(&other).await.is_empty(), "{provider:?}");
    }
}

#[tokio::test]
async fn the_limits_hold_with_a_users_client() {
    for provider in BOTH {
        // The body's size.
        let server = server(provider, provider.answer()).await;
        let settings = Settings {
            client: Some(followers_client()),
            limits: Some(ModelLimits::default().max_response_bytes(64)),
            ..Settings::default()
        };
        let model = provider.model(&server.uri(), settings).expect("settings");
        let error = model.respond(&request()).await.expect_err("too large");
        assert_eq!(error.kind, ModelErrorKind::LimitExceeded, "{error}");
        assert_eq!(error.limit.map(|l| l.limit), Some(Limit::ResponseBytes));
        // The request's time.
        let slow = provider.answer().set_delay(Duration::from_secs(5));
        let server = self::server(provider, slow).await;
        let settings = Settings {
            client: Some(followers_client()),
            limits: Some(ModelLimits::default().request_timeout(Duration::from_millis(100))),
            ..Settings::default()
        };
        let model = provider.model(&server.uri(), settings).expect("settings");
        let error = model.respond(&request()).await.expect_err("too slow");
        assert_eq!(error.kind, ModelErrorKind::Timeout, "{error}");
        assert_eq!(error.limit.map(|l| l.limit), Some(Limit::RequestTime));
    }
}

#[tokio::test]
async fn a_key_in_a_users_client_is_not_seen_and_the_providers_own_url_is_not_asked() {
    let mut headers = header::HeaderMap::new();
    headers.insert(
        "x-api-key",
        header::HeaderValue::from_static("sk-ant-in-client"),
    );
    headers.insert(
        header::AUTHORIZATION,
        header::HeaderValue::from_static("Bearer sk-in-client"),
    );
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("a client");
    let openai = OpenAi::new("gpt-4.1").http_client(client.clone());
    let anthropic = Anthropic::new("claude-sonnet-4-5").http_client(client);
    for model in [&openai as &dyn Model, &anthropic] {
        let error = model.respond(&request()).await.expect_err("no key");
        assert_eq!(error.kind, ModelErrorKind::Authentication, "{error}");
        assert!(error.message.contains("api_key"), "{error}");
    }
}

// Headers and keys, checked when they are set.

#[test]
fn a_header_http_cannot_carry_is_refused_when_set_without_showing_its_value() {
    let secret = "sk-secret-value";
    let cases: [(&str, String, &str); 4] = [
        ("X-Bad\nName", "v".to_owned(), "X-Bad\\nName"),
        ("", "v".to_owned(), "empty"),
        ("X-Title", format!("{secret}\r\nX-Injected: 1"), "X-Title"),
        ("api-key", format!("{secret}\0"), "api-key"),
    ];
    for (name, value, named) in cases {
        let errors = [
            OpenAi::new("m").header(name, &value).map(drop).unwrap_err(),
            Anthropic::new("m")
                .header(name, &value)
                .map(drop)
                .unwrap_err(),
        ];
        for error in errors {
            let message = error.to_string();
            assert!(message.contains(named), "{name:?}: {message}");
            assert!(!message.contains(secret), "{name:?}: {message}");
        }
    }
    let error = Anthropic::new("m")
        .version("2023-06-01\nx-evil: 1")
        .map(drop)
        .unwrap_err();
    assert_eq!(error.name(), "anthropic-version");
}

#[test]
fn a_key_no_header_can_carry_is_refused_when_set_without_showing_it() {
    for key in ["sk-first\nsk-second", "sk-with\0nul", "sk-\x7fdel"] {
        let errors = [
            OpenAi::new("m").api_key(key).map(drop).unwrap_err(),
            Anthropic::new("m").api_key(key).map(drop).unwrap_err(),
        ];
        for error in errors {
            let message = error.to_string();
            assert!(message.contains("API key"), "{message}");
            assert!(!message.contains("sk-"), "{key:?}: {message}");
        }
    }
}

#[tokio::test]
async fn a_key_and_header_values_are_sent_without_the_whitespace_around_them() {
    for provider in BOTH {
        let server = server(provider, provider.answer()).await;
        let settings = Settings {
            key: Some("  test-key\r\n"),
            headers: vec![("X-Title", " Ops agent\n")],
            ..Settings::default()
        };
        let model = provider.model(&server.uri(), settings).expect("settings");
        model.respond(&request()).await.expect("an answer");
        let requests = requests(&server).await;
        let (name, value) = provider.key_header();
        assert_eq!(requests[0].headers[name], value, "{provider:?}");
        assert_eq!(requests[0].headers["x-title"], "Ops agent", "{provider:?}");
    }
}
