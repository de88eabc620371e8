//! A scripted HTTP server for the providers' tests (wiremock), and what they check a failed run
//! with.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use phaseo_agent::{AgentError, ModelError, RetryPolicy};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers each request with the next response of a script (a 418 when it runs out, which is not
/// retried).
pub struct Script(Mutex<VecDeque<ResponseTemplate>>);

impl Script {
    pub fn new(responses: Vec<ResponseTemplate>) -> Self {
        Self(Mutex::new(responses.into()))
    }
}

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.0
            .lock()
            .expect("script lock")
            .pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(418).set_body_string("script ran out"))
    }
}

/// A server that answers POSTs to `route` with `responses`, one each, in order.
pub async fn scripted_server(route: &str, responses: Vec<ResponseTemplate>) -> MockServer {
    answering_server(route, Script::new(responses)).await
}

/// A server that answers every POST, whatever its path, with `responses`, one each, in order.
pub async fn scripted_server_any_path(responses: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Script::new(responses))
        .mount(&server)
        .await;
    server
}

/// A server that answers POSTs to `route` with `responder`.
pub async fn answering_server(route: &str, responder: impl Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(responder)
        .mount(&server)
        .await;
    server
}

/// The requests a server received, in order.
pub async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.expect("recording is on")
}

/// The JSON bodies of the requests a server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<serde_json::Value> {
    let body = |r: &Request| serde_json::from_slice(&r.body).expect("a JSON request");
    requests(server).await.iter().map(body).collect()
}

/// A 200 with a JSON body.
pub fn json_ok(body: &str) -> ResponseTemplate {
    error(200, body)
}

/// A 200 with a server-sent-events body.
pub fn sse_ok(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), "text/event-stream")
}

/// A JSON body with `status` (an API's error answer).
pub fn error(status: u16, body: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.as_bytes().to_vec(), "application/json")
}

/// Retries that wait a millisecond, so tests that retry stay fast.
pub fn fast_retries() -> RetryPolicy {
    RetryPolicy::default()
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(2))
}

/// The model error of a failed run.
pub fn model_error(error: &AgentError) -> &ModelError {
    match error {
        AgentError::Model(e) => e,
        other => panic!("not a model error: {other}"),
    }
}
