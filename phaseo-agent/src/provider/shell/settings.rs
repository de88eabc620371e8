//! The settings every provider shares, and `Debug` (which shows neither the key nor a header's
//! value).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::limits::ModelLimits;
#[cfg(doc)]
use crate::model::request::ModelRequest;
use crate::provider::http::{self, Client};
use crate::provider::shell::header::{self, HeaderError};
use crate::provider::shell::model::{HttpModel, Key};
use crate::provider::shell::sampling::Sampling;
use crate::provider::shell::wire::Wire;

impl<W: Wire> HttpModel<W> {
    /// A model by name (`gpt-4.1`, `claude-sonnet-4-5`, `qwen3:8b`, ...), with no API key and the
    /// defaults.
    ///
    /// ```
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// let model = OpenAi::new("gpt-4.1");
    /// assert_eq!(model.model_name(), "gpt-4.1");
    /// assert_eq!(model.url(), "https://api.openai.com/v1/chat/completions");
    /// ```
    pub fn new(model: impl Into<String>) -> Self {
        HttpModel {
            model: model.into(),
            key: Key::None,
            base_url: W::API.default_base_url.to_owned(),
            limits: ModelLimits::default(),
            headers: Vec::new(),
            send_metadata: false,
            client: Client::default(),
            sampling: Sampling::default(),
            streaming: true,
            refused_stream: Arc::default(),
            wire: W::default(),
        }
    }

    /// A model by name, with the API key and the base URL of the provider's environment
    /// variables when they are set and not blank: `OPENAI_API_KEY` and `OPENAI_BASE_URL` for
    /// [`OpenAi`](crate::provider::openai::OpenAi), `ANTHROPIC_API_KEY` and
    /// `ANTHROPIC_BASE_URL` for [`Anthropic`](crate::provider::anthropic::Anthropic).
    ///
    /// The key loses the whitespace around it, as with [`api_key`](HttpModel::api_key). A key
    /// that no header can carry even then (a control character inside it: two lines pasted as
    /// one, say) is not sent: each request fails at once with
    /// [`ModelErrorKind::Authentication`](crate::ModelErrorKind::Authentication), naming the
    /// variable (never the key), until `api_key` sets another.
    ///
    /// ```no_run
    /// use phaseo_agent::Agent;
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// # fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let agent = Agent::builder("assistant").model(OpenAi::from_env("gpt-4.1")).build()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_env(model: impl Into<String>) -> Self {
        Self::from_variables(model, http::env_var)
    }

    /// [`from_env`](HttpModel::from_env), with the variables `read` gives (set and not blank).
    pub(crate) fn from_variables(
        model: impl Into<String>,
        read: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let mut provider = HttpModel::new(model);
        let variable = W::API.variable("API_KEY");
        if let Some(key) = read(&variable) {
            provider.key = match Self::key(&key) {
                Ok(key) => key,
                Err(error) => Key::Unusable(error.for_variable(&variable)),
            };
        }
        if let Some(url) = read(&W::API.variable("BASE_URL")) {
            provider = provider.base_url(url);
        }
        provider
    }

    /// The API key, sent in the provider's key header: `Authorization: Bearer <key>` for
    /// [`OpenAi`](crate::provider::openai::OpenAi), `x-api-key` for
    /// [`Anthropic`](crate::provider::anthropic::Anthropic).
    ///
    /// The whitespace around the key is dropped (a key read from a file often ends with a line
    /// break), and a blank key is no key. A key that no header can carry even then (a control
    /// character inside it) is a [`HeaderError`], which never shows the key.
    ///
    /// Without a key, a request to the provider's own URL fails at once with
    /// [`ModelErrorKind::Authentication`](crate::ModelErrorKind::Authentication), and nothing is
    /// sent; to any other URL (a local server, a proxy that authenticates another way) it is sent
    /// without the header.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ModelErrorKind};
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A line break from a key file is dropped; a control character inside a key is refused.
    /// assert!(OpenAi::new("gpt-4.1").api_key("sk-proj-abc\n").is_ok());
    /// assert!(OpenAi::new("gpt-4.1").api_key("sk-proj-abc\nsk-proj-def").is_err());
    ///
    /// let model = OpenAi::new("gpt-4.1").api_key("").unwrap(); // an empty key is no key
    /// let agent = Agent::builder("assistant").model(model).build().unwrap();
    /// let failed = agent.run("Hi").await.unwrap_err();
    /// let AgentError::Model(error) = &failed.error else { panic!("{failed}") };
    /// assert_eq!(error.kind, ModelErrorKind::Authentication);
    /// # }
    /// ```
    pub fn api_key(mut self, key: impl AsRef<str>) -> Result<Self, HeaderError> {
        self.key = Self::key(key.as_ref())?;
        Ok(self)
    }

    /// The key header's value for `key`: none for a blank key.
    fn key(key: &str) -> Result<Key, HeaderError> {
        let key = key.trim();
        if key.is_empty() {
            return Ok(Key::None);
        }
        header::key(&W::KEY.0, W::KEY.1, key).map(Key::Set)
    }

    /// The API's address (each provider's `DEFAULT_BASE_URL` by default; with its `/v1` for
    /// [`OpenAi`](crate::provider::openai::OpenAi), without for
    /// [`Anthropic`](crate::provider::anthropic::Anthropic)); a trailing `/` is ignored.
    ///
    /// ```
    /// use phaseo_agent::provider::anthropic::Anthropic;
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// let ollama = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1/");
    /// assert_eq!(ollama.url(), "http://localhost:11434/v1/chat/completions");
    /// let proxied = Anthropic::new("claude-sonnet-4-5").base_url("https://llm-proxy.example.com/");
    /// assert_eq!(proxied.url(), "https://llm-proxy.example.com/v1/messages");
    /// ```
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        // Another server: whether it streams is not known yet.
        self.refused_stream = Arc::new(AtomicBool::new(false));
        self
    }

    /// The sampling temperature of each request that does not set its own (default: unset, the
    /// server's own). A request's [`ModelRequest::temperature`] (a tool's next-turn override,
    /// a run's first turn) takes precedence. Sent as the decimal it was written as (`0.2`, not
    /// `0.20000000298`); a value that is not a finite number fails each request that would send
    /// it with [`ModelErrorKind::BadRequest`](crate::ModelErrorKind::BadRequest), before anything
    /// is sent.
    ///
    /// ```
    /// use phaseo_agent::{Message, ModelRequest};
    /// use phaseo_agent::provider::openai::{OpenAi, request_body};
    ///
    /// let model = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1").temperature(0.2);
    /// let request = ModelRequest::new(vec![Message::user("Hi")]);
    /// assert_eq!(request_body(&request, &model, false).unwrap()["temperature"], 0.2);
    /// // The turn's own wins.
    /// let request = request.temperature(0.9);
    /// assert_eq!(request_body(&request, &model, false).unwrap()["temperature"], 0.9);
    /// ```
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.sampling.temperature = Some(temperature);
        self
    }

    /// The nucleus sampling mass (`top_p`) of each request that does not set its own (default:
    /// unset, the server's own); [`ModelRequest::top_p`] takes precedence. Checked like
    /// [`temperature`](HttpModel::temperature). Anthropic advises setting `temperature` or
    /// `top_p`, not both, and some of its newer models refuse both at once.
    ///
    /// ```
    /// use phaseo_agent::{Message, ModelRequest};
    /// use phaseo_agent::provider::anthropic::{Anthropic, request_body};
    ///
    /// let model = Anthropic::new("claude-sonnet-4-5").top_p(0.9);
    /// let request = ModelRequest::new(vec![Message::user("Hi")]);
    /// assert_eq!(request_body(&request, &model, false).unwrap()["top_p"], 0.9);
    /// ```
    pub fn top_p(mut self, top_p: f32) -> Self {
        self.sampling.top_p = Some(top_p);
        self
    }

    /// The most output tokens of each request that does not set its own;
    /// [`ModelRequest::max_output_tokens`] takes precedence. Sent as OpenAI's `max_tokens` or
    /// `max_completion_tokens` (see `MaxTokensField`), Anthropic's `max_tokens`.
    ///
    /// Default: unset for [`OpenAi`](crate::provider::openai::OpenAi) (the server's own limit,
    /// often the model's whole context: set one for a small local model, which may otherwise
    /// write until its context is full), `DEFAULT_MAX_TOKENS` (4,096) for
    /// [`Anthropic`](crate::provider::anthropic::Anthropic), whose API requires one.
    ///
    /// ```
    /// use phaseo_agent::{Message, ModelRequest};
    /// use phaseo_agent::provider::anthropic::{Anthropic, request_body as anthropic_body};
    /// use phaseo_agent::provider::openai::{OpenAi, request_body as openai_body};
    ///
    /// let request = ModelRequest::new(vec![Message::user("Hi")]);
    /// let local = OpenAi::new("smollm2").base_url("http://localhost:8000/v1").max_output_tokens(512);
    /// assert_eq!(openai_body(&request, &local, false).unwrap()["max_tokens"], 512);
    /// let claude = Anthropic::new("claude-sonnet-4-5").max_output_tokens(8_192);
    /// assert_eq!(anthropic_body(&request, &claude, false).unwrap()["max_tokens"], 8_192);
    /// let request = request.max_output_tokens(64); // the turn's own wins
    /// assert_eq!(anthropic_body(&request, &claude, false).unwrap()["max_tokens"], 64);
    /// ```
    pub fn max_output_tokens(mut self, max: u32) -> Self {
        self.sampling.max_output_tokens = Some(max);
        self
    }

    /// The stop sequences of each request that does not set its own: the model stops before
    /// writing any of them. Sent as OpenAI's `stop`, Anthropic's `stop_sequences`;
    /// [`ModelRequest::stop`] takes precedence, and an empty list sends none. OpenAI takes at
    /// most 4 (the server refuses more).
    ///
    /// ```
    /// use phaseo_agent::{Message, ModelRequest};
    /// use phaseo_agent::provider::anthropic::{Anthropic, request_body};
    /// use phaseo_agent::serde_json::json;
    ///
    /// let model = Anthropic::new("claude-sonnet-4-5").stop(["\n\nHuman:", "END"]);
    /// let request = ModelRequest::new(vec![Message::user("Hi")]);
    /// let body = request_body(&request, &model, false).unwrap();
    /// assert_eq!(body["stop_sequences"], json!(["\n\nHuman:", "END"]));
    /// // A turn's empty list sends none.
    /// let request = request.stop(Vec::<String>::new());
    /// assert!(request_body(&request, &model, false).unwrap().get("stop_sequences").is_none());
    /// ```
    pub fn stop(mut self, sequences: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.sampling.stop = Some(sequences.into_iter().map(Into::into).collect());
        self
    }

    /// The seed of each request that does not set its own, for repeatable sampling where the
    /// server offers it ([`ModelRequest::seed`] takes precedence). Sent as OpenAI's `seed`
    /// (OpenAI, vLLM, llama.cpp and Ollama read it; OpenAI promises only a best effort).
    /// Anthropic's API has no seed: [`Anthropic`](crate::provider::anthropic::Anthropic) sends
    /// nothing for it (use `temperature(0.0)` for the most repeatable answers there).
    ///
    /// ```
    /// use phaseo_agent::{Message, ModelRequest};
    /// use phaseo_agent::provider::anthropic::{Anthropic, request_body as anthropic_body};
    /// use phaseo_agent::provider::openai::{OpenAi, request_body as openai_body};
    ///
    /// let request = ModelRequest::new(vec![Message::user("Hi")]);
    /// let model = OpenAi::new("gpt-4.1").seed(42);
    /// assert_eq!(openai_body(&request, &model, false).unwrap()["seed"], 42);
    /// let claude = Anthropic::new("claude-sonnet-4-5").seed(42);
    /// assert!(anthropic_body(&request, &claude, false).unwrap().get("seed").is_none());
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.sampling.seed = Some(seed);
        self
    }

    /// Whether a streamed run asks the server to stream its answers (default `true`).
    ///
    /// Off, each request asks for a whole answer, streamed run or not: the run's events
    /// (`tool.called`, `tool.result`, `run.paused`, `model.turn`, ...) flow as before, and only
    /// the model's deltas (`model.delta`) are absent. For a server that cannot stream what you
    /// ask of it; a server that refuses is also found out at its first refusal (see
    /// [`streams`](HttpModel::streams)).
    ///
    /// ```
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// let model = OpenAi::new("local").base_url("http://localhost:8000/v1").streaming(false);
    /// assert!(!model.streams());
    /// ```
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Whether the next streamed request asks the server to stream: `false` when
    /// [`streaming`](HttpModel::streaming) is off, or once the server refused to stream.
    ///
    /// A refusal is one of two answers to a streamed request, each of which says that the
    /// server will not stream it:
    ///
    /// - an HTTP error whose message says that streaming is not supported (`stream` with
    ///   `not supported`, `unsupported` or `not implemented`), as OpenAI answers for a model
    ///   that cannot stream;
    /// - an event stream that ends, or breaks, before its first event, as llama-cpp-python's
    ///   server does for a turn whose tool choice is automatic.
    ///
    /// The same request is then sent once more, whole, within the same turn (its answer is
    /// the turn's: no retry of the refused stream, and no delta; should that request fail in
    /// transport, as when the refused stream's connection closes under it, it is tried once
    /// more at once), the fall-back is logged with
    /// [`tracing::warn!`](https://docs.rs/tracing), and the model remembers it: every later
    /// request asks for a whole answer at once. A clone shares what it remembers (an agent holds
    /// one); setting [`base_url`](HttpModel::base_url) forgets it.
    ///
    /// A stream that broke after its first event is never asked again whole: deltas may have
    /// gone out already, and a second answer would repeat them. It fails as it did
    /// ([`ModelErrorKind::Transport`](crate::ModelErrorKind::Transport), retried by the agent).
    /// Nor is a time limit a refusal (a slow server is no refusing one).
    pub fn streams(&self) -> bool {
        self.streaming && !self.refused_stream.load(Ordering::Relaxed)
    }

    /// How long a whole request may take, a streamed body included (default 10 minutes, each
    /// provider's `DEFAULT_TIMEOUT`, as OpenAI's and Anthropic's own SDKs: a long answer streams
    /// for minutes, and a local server on a CPU is slow). A request that takes longer fails with
    /// [`ModelErrorKind::Timeout`](crate::ModelErrorKind::Timeout), its
    /// [`ModelError::limit`](crate::ModelError::limit) naming `ModelLimits::request_timeout`.
    ///
    /// One setting with the [limits](HttpModel::limits)' request time: `.timeout(t)` is
    /// `.limits(ModelLimits::default().request_timeout(t))` when no other limit was set, and
    /// otherwise changes only the request time of the limits set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Agent, AgentError, ModelErrorKind, RetryPolicy};
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A local server that takes connections and never answers.
    /// let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let model = OpenAi::new("local")
    ///     .base_url(format!("http://{}/v1", silent.local_addr().unwrap()))
    ///     .timeout(Duration::from_millis(200));
    /// let agent = Agent::builder("assistant").model(model).model_retries(RetryPolicy::none()).build().unwrap();
    /// let failed = agent.run("Hi").await.unwrap_err();
    /// let AgentError::Model(error) = &failed.error else { panic!("{failed}") };
    /// assert_eq!(error.kind, ModelErrorKind::Timeout);
    /// # }
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limits = self.limits.request_timeout(timeout);
        self
    }

    /// The bounds of each response (default [`ModelLimits::default`]): the bytes of a whole
    /// body or of a whole stream, the bytes of one streamed event, the longest silence (before
    /// the headers, and between two pieces of the body), the whole request's time, and
    /// connecting (with this crate's client only: see [`http_client`](HttpModel::http_client)).
    /// Over a size limit, a request fails with
    /// [`ModelErrorKind::LimitExceeded`](crate::ModelErrorKind::LimitExceeded) (not retried);
    /// over a time limit, with [`ModelErrorKind::Timeout`](crate::ModelErrorKind::Timeout)
    /// (retried); either way [`ModelError::limit`](crate::ModelError::limit) says which limit,
    /// and the message names its setting. An error body (a 4xx or 5xx) is read up to 64 KiB: its
    /// message is what is kept.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::limits::ModelLimits;
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// let model = OpenAi::new("qwen3:8b")
    ///     .base_url("http://localhost:11434/v1")
    ///     .limits(ModelLimits::default().max_response_bytes(16 << 20).stream_idle_timeout(Duration::from_secs(60)));
    /// assert_eq!(model.model_limits().response_bytes(), 16 << 20);
    /// // `timeout` is the limits' request time.
    /// let model = model.timeout(Duration::from_secs(90));
    /// assert_eq!(model.model_limits().request_time(), Duration::from_secs(90));
    /// assert_eq!(model.model_limits().stream_idle(), Duration::from_secs(60));
    /// ```
    pub fn limits(mut self, limits: ModelLimits) -> Self {
        self.limits = limits;
        // This crate's client is built with the connect time: built again on first use.
        self.client.limits_changed();
        self
    }

    /// The bounds of each response (see [`limits`](HttpModel::limits)).
    pub fn model_limits(&self) -> ModelLimits {
        self.limits
    }

    /// Another header sent with each request; one named like a header the provider sends
    /// (`authorization`, `x-api-key`, `anthropic-version`, `content-type`) replaces it. Setting
    /// a name twice sends both values.
    ///
    /// The whitespace around the value is dropped (HTTP does not count it as part of the
    /// value). A name that is not an HTTP token, or a value with a control character, is a
    /// [`HeaderError`] here, naming the header and never showing the value, so that no request
    /// is ever built with it.
    ///
    /// ```
    /// use std::io::{BufRead, BufReader};
    /// use phaseo_agent::{Agent, RetryPolicy};
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A local server that reads one request's headers, then hangs up.
    /// let server = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let url = format!("http://{}/v1", server.local_addr()?);
    /// let headers = std::thread::spawn(move || {
    ///     let lines = BufReader::new(server.accept().unwrap().0).lines().map_while(Result::ok);
    ///     lines.take_while(|line| !line.is_empty()).collect::<Vec<_>>()
    /// });
    /// let model = OpenAi::new("local").base_url(url).header("X-Title", "Ops agent")?;
    /// let agent = Agent::builder("assistant").model(model).model_retries(RetryPolicy::none()).build()?;
    /// assert!(agent.run("Hi").await.is_err()); // the server hung up
    /// assert!(headers.join().unwrap().iter().any(|h| h.eq_ignore_ascii_case("x-title: Ops agent")));
    ///
    /// // Refused when set, not when sent.
    /// let error = OpenAi::new("local").header("X Title", "Ops agent").unwrap_err();
    /// assert!(error.to_string().contains("`X Title`"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn header(
        mut self,
        name: impl AsRef<str>,
        value: impl AsRef<str>,
    ) -> Result<Self, HeaderError> {
        self.headers
            .push(header::header(name.as_ref(), value.as_ref())?);
        Ok(self)
    }

    /// Whether to send which agent and run a request is for (default `false`). Each provider
    /// says where and what: `"user": "<agent id>/<run id>"` for
    /// [`OpenAi`](crate::provider::openai::OpenAi), `metadata.user_id` (the run id) for
    /// [`Anthropic`](crate::provider::anthropic::Anthropic). Neither id holds anything about a
    /// person.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    /// use phaseo_agent::provider::openai::{OpenAi, request_body};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // A request as an agent makes it (recorded by a scripted model).
    /// let scripted = ScriptedModel::new().record_requests().text("Hello!");
    /// let done = Agent::builder("helper").model(scripted.clone()).build()?.run("Hi").await?;
    /// let request = &scripted.requests()[0];
    ///
    /// let body = request_body(request, &OpenAi::new("gpt-4.1").send_metadata(true), false)?;
    /// assert_eq!(body["user"], format!("helper/{}", done.state.run_id()));
    /// let body = request_body(request, &OpenAi::new("gpt-4.1"), false)?;
    /// assert!(body.get("user").is_none()); // off by default
    /// # Ok(())
    /// # }
    /// ```
    pub fn send_metadata(mut self, send: bool) -> Self {
        self.send_metadata = send;
        self
    }

    /// Your own HTTP client for every request (proxies, TLS roots, a connection pool shared
    /// with the rest of your application): a `reqwest` 0.12 client
    /// ([`provider::reqwest`](crate::provider::reqwest) is the one this crate uses).
    ///
    /// **Build it with `.redirect(reqwest::redirect::Policy::none())`.** reqwest's default policy
    /// follows up to ten redirects, and on a redirect to another host it drops only
    /// `Authorization`, `Cookie` and their like: not Anthropic's `x-api-key`, not your own
    /// headers, and on 307 and 308 it sends the whole conversation again. This crate cannot read
    /// or change a client's policy, so it checks the outcome: a response from another address than
    /// the one requested fails the request with
    /// [`ModelErrorKind::BadRequest`](crate::ModelErrorKind::BadRequest) (not retried), naming
    /// `http_client` and the policy to set, and nothing of that response is read. By then the
    /// redirect was followed: only the policy keeps the key from going.
    ///
    /// What still holds with your client: the [limits](HttpModel::limits) on a body's and an
    /// event's size, the idle timeout and the request timeout, which are this crate's, around the
    /// client. What is the client's: connecting (`ModelLimits::connect_timeout` is not used; a
    /// connect timeout of the client's is a `Timeout` error with the client's message), its own
    /// timeouts (they apply too), redirects, proxies, TLS, HTTP versions, and default headers,
    /// which go with each request unless this crate sends a header of the same name (the key,
    /// `content-type`, the provider's own, one set with [`header`](HttpModel::header)). A key
    /// among the client's default headers is not seen: to the provider's own URL, set it with
    /// [`api_key`](HttpModel::api_key).
    ///
    /// ```
    /// use phaseo_agent::provider::openai::OpenAi;
    /// use phaseo_agent::provider::reqwest::{self, header};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut headers = header::HeaderMap::new();
    /// headers.insert("x-team", header::HeaderValue::from_static("ops"));
    /// let client = reqwest::Client::builder()
    ///     .redirect(reqwest::redirect::Policy::none()) // never send the key elsewhere
    ///     .default_headers(headers)
    ///     .build()?;
    /// let model = OpenAi::new("gpt-4.1").api_key("sk-...")?.http_client(client);
    /// assert!(format!("{model:?}").contains("http_client: \"yours\""));
    /// # Ok(())
    /// # }
    /// ```
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.client = Client::Users(client);
        self
    }

    /// The configured model name (a request's own, the agent's `model_name` or a next-turn
    /// override, takes precedence).
    pub fn model_name(&self) -> &str {
        &self.model
    }

    /// Where requests go: `{base_url}/chat/completions` for
    /// [`OpenAi`](crate::provider::openai::OpenAi), `{base_url}/v1/messages` for
    /// [`Anthropic`](crate::provider::anthropic::Anthropic).
    ///
    /// ```
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// let vllm = OpenAi::new("Qwen/Qwen3-8B").base_url("http://localhost:8000/v1");
    /// assert_eq!(vllm.url(), "http://localhost:8000/v1/chat/completions");
    /// ```
    pub fn url(&self) -> String {
        W::url(&self.base_url, &self.model, false)
    }
}

impl<W: Wire> fmt::Debug for HttpModel<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = match &self.key {
            Key::None => None,
            Key::Set(_) => Some("<redacted>"),
            Key::Unusable(_) => Some("<unusable>"),
        };
        let headers: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        let mut fields = f.debug_struct(W::API.model_type);
        fields
            .field("model", &self.model)
            .field("api_key", &key)
            .field("base_url", &self.base_url)
            .field("limits", &self.limits)
            .field("headers", &headers);
        W::debug(self, &mut fields);
        let client = if self.client.is_users() {
            "yours"
        } else {
            "built-in"
        };
        fields
            .field("sampling", &self.sampling)
            .field("streams", &self.streams())
            .field("send_metadata", &self.send_metadata)
            .field("http_client", &client)
            .finish()
    }
}
