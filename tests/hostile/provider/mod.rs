//! Both providers against a hostile model server (see `server.rs`): every response header value,
//! redirects, endless and huge bodies, huge events, silence and trickling, and streams that
//! break the protocol. Each case checks the outcome (the typed error, the setting it names), the
//! time (a generous bound, never a speed) and the peak heap (under 200 MB).
//!
//! The counting allocator sees every thread of this binary, so the cases run one at a time (a
//! static lock), each on its own runtime, with the peak reset at its start.

mod events;
mod headers;
mod server;
mod sizes;

use std::future::Future;
use std::time::Duration;

use phaseo_agent::limits::{Limit, ModelLimits};
use phaseo_agent::provider::anthropic::Anthropic;
use phaseo_agent::provider::openai::OpenAi;
use phaseo_agent::{
    DeltaSink, Message, Model, ModelDelta, ModelError, ModelErrorKind, ModelRequest, ModelResponse,
    RequestMeta, ToolChoice,
};

use crate::ALLOCATOR;

use crate::SERIAL;
use crate::support::wire::{fast_retries, model_error};

/// The most heap a case may take at its peak.
const PEAK: usize = 200 * 1024 * 1024;

/// Runs one case on its own runtime, within `time`, and checks its peak heap.
fn case<F: Future<Output = ()>>(time: Duration, body: F) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let base = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    runtime.block_on(async {
        tokio::time::timeout(time, body)
            .await
            .unwrap_or_else(|_| panic!("the case took longer than {time:?}"));
    });
    let peak = ALLOCATOR.peak_usage().saturating_sub(base);
    assert!(peak < PEAK, "the case's heap peaked at {peak} bytes");
}

/// Which provider a case runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    OpenAi,
    Anthropic,
}

const BOTH: [Provider; 2] = [Provider::OpenAi, Provider::Anthropic];

/// A model of `provider` for a server at `url`, with `limits`, an API key and a custom header.
fn model(provider: Provider, url: &str, limits: ModelLimits) -> Box<dyn Model> {
    match provider {
        Provider::OpenAi => Box::new(
            OpenAi::new("gpt-test")
                .base_url(format!("{url}/v1"))
                .api_key("sk-secret-key")
                .and_then(|m| m.header("x-custom", "custom-secret"))
                .expect("settings")
                .limits(limits),
        ),
        Provider::Anthropic => Box::new(
            Anthropic::new("claude-test")
                .base_url(url)
                .api_key("sk-ant-secret-key")
                .and_then(|m| m.header("x-custom", "custom-secret"))
                .expect("settings")
                .limits(limits),
        ),
    }
}

/// The path each provider posts to.
fn path(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi => "/v1/chat/completions",
        Provider::Anthropic => "/v1/messages",
    }
}

/// A one-message request.
fn request() -> ModelRequest<'static> {
    ModelRequest::default()
        .instructions("")
        .messages(vec![Message::User {
            content: "Hi".into(),
        }])
        .tools(Vec::new())
        .tool_choice(ToolChoice::Auto)
        .meta(RequestMeta::default())
}

/// Asks `model` once, whole or streamed (the deltas are dropped).
async fn ask(model: &dyn Model, streamed: bool) -> Result<ModelResponse, ModelError> {
    let request = request();
    if streamed {
        let drop_delta = |_: ModelDelta| {};
        let sink = DeltaSink::new(&drop_delta);
        model.respond_streaming(&request, &sink).await
    } else {
        model.respond(&request).await
    }
}

/// Asserts that `error` is a hit of `limit`, whose message names its setting.
fn assert_limit(error: &ModelError, limit: Limit) {
    let hit = error
        .limit
        .as_ref()
        .unwrap_or_else(|| panic!("not a limit hit: {error}"));
    assert_eq!(hit.limit, limit, "{error}");
    assert!(
        error.to_string().contains(limit.setting()),
        "the message does not name `{}`: {error}",
        limit.setting()
    );
    let kind = if limit.unit() == "milliseconds" {
        ModelErrorKind::Timeout
    } else {
        ModelErrorKind::LimitExceeded
    };
    assert_eq!(error.kind, kind, "{error}");
}

/// The `data:` line of an OpenAI chunk whose delta is `delta` (JSON text).
fn openai_chunk(delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
    format!(
        "data: {{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

/// An Anthropic event.
fn anthropic_event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}
