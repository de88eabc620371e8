//! [`Agent`] and its builder: id, instructions, model, tools, and how tools are executed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{AgentError, ModelError};
use crate::model::message::ToolCall;
use crate::model::request::{Model, ToolDefinition};
use crate::telemetry::content::CaptureContent;
use crate::tool::call::{Later, Parsed};
use crate::tool::context::ToolContext;
use crate::tool::definition::{Approval, IntoTool, IntoTools, OnError, Tool};
use crate::tool::resource::{Res, Resources};
use crate::tool::returns::{Answer, sealed};

pub(crate) type CallPredicate = dyn Fn(&ToolCall, &ToolContext) -> bool + Send + Sync;
/// The agent's approval rule: the call, its context and the tool's own verdict in, the final verdict out.
pub(crate) type ApprovalPolicy = dyn Fn(&ToolCall, &ToolContext, bool) -> Later<bool> + Send + Sync;

/// Whether a call waits for a person: the one approval verdict of the agent loop and the MCP
/// server. A standing approval of the tool (`Decision::ApproveAlways` in this run) holds whatever
/// the functions would say; otherwise the tool's own verdict (`require_approval`, or its approval
/// function), then the agent's rule, which sees it (`approval` adds to it, `approval_policy`
/// decides). A panic of either fails closed: the call waits.
pub(crate) fn needs_approval<'a>(
    tool: &Tool,
    parsed: &Parsed,
    ctx: &'a ToolContext,
    rule: Option<&'a ApprovalPolicy>,
    standing: bool,
) -> impl Future<Output = bool> + Send + 'a {
    // The tool's verdict is asked for now: the future holds neither the tool nor the arguments.
    let tool_says = (!standing).then(|| match &tool.approval {
        Approval::Never => Later::Now(false),
        Approval::Always => Later::Now(true),
        Approval::When(decide) => Later::run(|| decide(parsed, ctx), true),
    });
    async move {
        let Some(tool_says) = tool_says else {
            return false;
        };
        let tool_says = tool_says.get(true).await;
        match rule {
            Some(decide) => {
                let verdict = Later::run(|| decide(ctx.tool_call(), ctx, tool_says), true);
                verdict.get(true).await
            }
            None => tool_says,
        }
    }
}

/// An agent: a model, instructions and tools, and the loop that runs them.
///
/// Cheap to clone (one `Arc`); share one agent across tasks. Build it with [`Agent::builder`]:
///
/// ```
/// use phaseo_agent::{Agent, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let status = Tool::new("get_status", "Get the current service status",
///     json!({"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]}),
///     |input, _ctx| Ok(json!({"service": input["service"], "status": "healthy"})));
///
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "get_status", json!({"service": "api"}))
///     .text("The API is healthy.");
///
/// let agent = Agent::builder("ops")
///     .instructions("Answer questions about our services.")
///     .model(model)
///     .tool(status)
///     .build()?;
///
/// let result = agent.run("Is the API up?").await?;
/// assert_eq!(result.output(), Some("The API is healthy."));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<AgentInner>,
}

pub(crate) struct AgentInner {
    /// Shared, not a `String`: every call's context carries it, and a copy of an `Arc` is not an
    /// allocation.
    pub(crate) id: Arc<str>,
    pub(crate) instructions: String,
    pub(crate) model: Arc<dyn Model>,
    pub(crate) model_name: Option<String>,
    pub(crate) tools: Vec<Tool>,
    /// The tools as the model sees them, in the same order: built once, borrowed by every model
    /// request.
    pub(crate) definitions: Vec<ToolDefinition>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) settings: ToolExecution,
    pub(crate) approval: Option<Arc<ApprovalPolicy>>,
    pub(crate) human_review: Option<Arc<CallPredicate>>,
    pub(crate) max_turns: usize,
    pub(crate) state_key: Option<Arc<[u8]>>,
    pub(crate) retries: RetryPolicy,
    pub(crate) parallel_tool_calls: Option<bool>,
    pub(crate) resources: Resources,
    /// Whether spans record content (see `telemetry::CaptureContent`).
    pub(crate) capture: CaptureContent,
}

impl AgentInner {
    /// The index of the tool with this id. A few tools are found by comparing ids, which is
    /// quicker than hashing the name; many by the map.
    pub(crate) fn tool_index(&self, id: &str) -> Option<usize> {
        if self.tools.len() <= 8 {
            self.tools.iter().position(|tool| tool.id == id)
        } else {
            self.index.get(id).copied()
        }
    }
}

/// How the agent retries a model request that failed with a retryable error
/// ([`ModelError::is_retryable`]: rate limits, overload, transport failures, timeouts, empty
/// responses).
///
/// The wait before retry `n` (from 0) is `initial_backoff × 2ⁿ`, capped at `max_backoff`, of which
/// a random half is kept ("equal jitter", so many clients do not retry in step). When the provider
/// says how long to wait (`retry-after`), the agent waits that long instead, unless it is longer than
/// `max_retry_after`: then it fails at once rather than hang.
///
/// The default: 3 retries, from 500 ms, at most 20 s apart, honouring a `retry-after` of up to 60 s.
/// Three retries ride out a brief rate limit or overload (about 0.5 + 1 + 2 s of waiting) without
/// making a person wait minutes for a provider that is down.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::{ModelError, RetryPolicy};
///
/// let policy = RetryPolicy::default();
/// assert_eq!(policy.max_retries, 3);
/// assert_eq!(policy.initial_backoff, Duration::from_millis(500));
/// assert_eq!(policy.max_backoff, Duration::from_secs(20));
/// assert_eq!(policy.max_retry_after, Duration::from_secs(60));
///
/// // More patient with a provider that is often busy: a sixth retry (attempt 5) still happens.
/// let patient = RetryPolicy::default().max_retries(6);
/// let overloaded = ModelError::from_status(529, "overloaded");
/// assert_eq!(policy.delay(5, &overloaded, 0.0), None);
/// assert_eq!(patient.delay(5, &overloaded, 0.0), Some(Duration::from_secs(8))); // half of 16 s
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// How many times a request is retried (0: never).
    pub max_retries: u32,
    /// The wait before the first retry.
    pub initial_backoff: Duration,
    /// The longest wait between retries.
    pub max_backoff: Duration,
    /// The longest `retry-after` the agent honours.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Retry a request at most this many times (0: never).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Wait this long before the first retry (the wait doubles from there, with jitter).
    pub fn initial_backoff(mut self, wait: Duration) -> Self {
        self.initial_backoff = wait;
        self
    }

    /// Wait at most this long between retries.
    pub fn max_backoff(mut self, wait: Duration) -> Self {
        self.max_backoff = wait;
        self
    }

    /// Honour a provider's `retry-after` up to this long; a longer one fails the request.
    pub fn max_retry_after(mut self, wait: Duration) -> Self {
        self.max_retry_after = wait;
        self
    }

    /// Never retry.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ModelError, RetryPolicy, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let model = ScriptedModel::new().record_requests().error(ModelError::from_status(529, "overloaded")).text("Hello!");
    /// let agent = Agent::builder("a").model(model.clone()).model_retries(RetryPolicy::none()).build()?;
    /// let failed = agent.run("Hi").await.unwrap_err();
    /// assert!(matches!(failed.error, AgentError::Model(_)));
    /// assert_eq!(model.requests().len(), 1); // asked once, never again
    /// # Ok(())
    /// # }
    /// ```
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// How long to wait before retry `attempt` (from 0) of a request that failed with `error`, or
    /// `None` to fail now: the error is not retryable, the retries are used up, or the provider
    /// asked for a longer wait than [`max_retry_after`](Self::max_retry_after). `jitter` is a
    /// number in `[0, 1)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{ModelError, RetryPolicy};
    ///
    /// let policy = RetryPolicy::default();
    /// let overloaded = ModelError::from_status(529, "overloaded");
    /// // 500 ms × 2ⁿ, of which the jitter keeps between half and all.
    /// assert_eq!(policy.delay(0, &overloaded, 0.0), Some(Duration::from_millis(250)));
    /// assert_eq!(policy.delay(2, &overloaded, 0.5), Some(Duration::from_millis(1500)));
    /// assert_eq!(policy.delay(3, &overloaded, 0.0), None); // the 3 retries are used up
    /// // The provider's `retry-after` wins, unless it is longer than `max_retry_after`.
    /// let busy = |secs| ModelError::from_status(429, "slow down").with_retry_after(Duration::from_secs(secs));
    /// assert_eq!(policy.delay(0, &busy(5), 0.0), Some(Duration::from_secs(5)));
    /// assert_eq!(policy.delay(0, &busy(90), 0.0), None);
    /// // A bad request would fail the same way again.
    /// assert_eq!(policy.delay(0, &ModelError::from_status(400, "bad request"), 0.0), None);
    /// ```
    pub fn delay(&self, attempt: u32, error: &ModelError, jitter: f64) -> Option<Duration> {
        if !error.is_retryable() || attempt >= self.max_retries {
            return None;
        }
        if let Some(wait) = error.retry_after {
            return (wait <= self.max_retry_after).then_some(wait);
        }
        let backoff = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(self.max_backoff);
        Some(backoff / 2 + backoff.mul_f64(jitter.clamp(0.0, 1.0) / 2.0))
    }
}

/// How an agent executes tools: the settings of [`AgentBuilder::tool_concurrency`],
/// [`AgentBuilder::on_error`], [`AgentBuilder::on_unknown_tool`],
/// [`AgentBuilder::on_invalid_arguments`], [`AgentBuilder::default_timeout`],
/// [`AgentBuilder::max_output_chars`] and [`AgentBuilder::max_calls_per_turn`], whose docs give
/// each default.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolExecution {
    /// How many calls of one turn run at once.
    pub(crate) concurrency: usize,
    /// The error policy of tools that set none.
    pub(crate) on_error: OnError,
    /// What to do with a call to a tool id that is not in the list.
    pub(crate) on_unknown_tool: OnError,
    /// What to do with arguments that are not valid JSON or fail the parameter schema.
    pub(crate) on_invalid_arguments: OnError,
    /// The timeout of tools that set none.
    pub(crate) default_timeout: Option<Duration>,
    /// Cap on the characters of a result the model sees.
    pub(crate) max_output_chars: Option<usize>,
    /// The most tool calls one model turn may make.
    pub(crate) max_calls_per_turn: usize,
}

impl Default for ToolExecution {
    fn default() -> Self {
        ToolExecution {
            concurrency: 1,
            on_error: OnError::ReturnToModel,
            on_unknown_tool: OnError::FailRun,
            on_invalid_arguments: OnError::ReturnToModel,
            default_timeout: None,
            max_output_chars: None,
            max_calls_per_turn: 128,
        }
    }
}

impl ToolExecution {
    /// The cap on a result of `tool`: the tool's own, else the agent's.
    pub(crate) fn max_output_chars_of(&self, tool: Option<&Tool>) -> Option<usize> {
        tool.and_then(|tool| tool.max_output_chars)
            .or(self.max_output_chars)
    }
}

impl Agent {
    /// Starts building an agent with this id. Only the model is required; every other setting has
    /// a default (no instructions, no tools, 10 turns, tools run one at a time).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests().text("Hello!");
    /// let agent = Agent::builder("greeter").model(model.clone()).build()?;
    /// assert_eq!(agent.run("Hi").await?.output(), Some("Hello!"));
    /// let request = &model.requests()[0];
    /// assert_eq!(request.instructions, "");
    /// assert!(request.tools.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(id: impl Into<String>) -> AgentBuilder {
        AgentBuilder {
            id: id.into(),
            instructions: String::new(),
            model: None,
            model_name: None,
            tools: Vec::new(),
            settings: ToolExecution::default(),
            approval: None,
            human_review: None,
            max_turns: 10,
            state_key: None,
            retries: RetryPolicy::default(),
            parallel_tool_calls: None,
            resources: Resources::new(),
            capture: None,
        }
    }

    /// The agent id. Every state the agent returns carries it, and it refuses to resume another
    /// agent's.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let agent = Agent::builder("support").model(ScriptedModel::new().text("Hello!")).build()?;
    /// assert_eq!(agent.id(), "support");
    /// let done = agent.run("Hi").await?;
    /// assert_eq!(done.state.agent_id(), agent.id());
    /// # Ok(())
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The agent's tools, in the order they were added (the order the model sees them in).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// let status = Tool::new("get_status", "Service status", json!({"type": "object"}), |v, _| Ok(v));
    /// let deploy = Tool::new("deploy", "Deploy a service", json!({"type": "object"}), |v, _| Ok(v));
    /// let agent = Agent::builder("ops").model(ScriptedModel::new()).tool(status).tool(deploy).build()?;
    /// let tools: Vec<(&str, &str)> = agent.tools().iter().map(|t| (t.id(), t.description())).collect();
    /// assert_eq!(tools, [("get_status", "Service status"), ("deploy", "Deploy a service")]);
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn tools(&self) -> &[Tool] {
        &self.inner.tools
    }

    /// The agent's resources (see [`AgentBuilder::resource`]).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// struct Pool { size: usize }
    ///
    /// let agent = Agent::builder("ops").model(ScriptedModel::new()).resource(Pool { size: 4 }).build()?;
    /// assert_eq!(agent.resources().get::<Pool>().map(|pool| pool.size), Some(4));
    /// assert!(!agent.resources().contains::<String>());
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn resources(&self) -> &Resources {
        &self.inner.resources
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        f.debug_struct("Agent")
            .field("id", &inner.id)
            .field("model_name", &inner.model_name)
            .field(
                "tools",
                &inner.tools.iter().map(Tool::id).collect::<Vec<_>>(),
            )
            .field("resources", &inner.resources)
            .field("max_turns", &inner.max_turns)
            .field("settings", &inner.settings)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Agent`]; see [`Agent::builder`].
///
/// A plain value: set it up in steps (shared defaults, settings from configuration), then
/// [`build`](Self::build) it.
///
/// ```
/// use phaseo_agent::{Agent, AgentBuilder, ScriptedModel};
///
/// /// Settings every agent of this service shares.
/// fn house_style(builder: AgentBuilder) -> AgentBuilder {
///     builder.instructions("Answer in one sentence.").max_turns(4)
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let model = ScriptedModel::new().record_requests().text("It is up.");
/// let agent = house_style(Agent::builder("ops")).model(model.clone()).build()?;
/// agent.run("Is the API up?").await?;
/// assert_eq!(model.requests()[0].instructions, "Answer in one sentence.");
/// # Ok(())
/// # }
/// ```
#[must_use = "call `.build()` to get the agent"]
pub struct AgentBuilder {
    id: String,
    instructions: String,
    model: Option<Arc<dyn Model>>,
    model_name: Option<String>,
    tools: Vec<Tool>,
    settings: ToolExecution,
    approval: Option<Arc<ApprovalPolicy>>,
    human_review: Option<Arc<CallPredicate>>,
    max_turns: usize,
    state_key: Option<Arc<[u8]>>,
    retries: RetryPolicy,
    parallel_tool_calls: Option<bool>,
    resources: Resources,
    capture: Option<CaptureContent>,
}

impl AgentBuilder {
    /// Whether this agent's spans record content: the messages and instructions sent to the
    /// model, its answers, and tool calls' arguments and results. Unset, the environment decides
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` turns it on), read when the
    /// agent is built; by default nothing is recorded. See [`CaptureContent`] for redaction and
    /// the size cap.
    ///
    /// ```
    /// use phaseo_agent::telemetry::CaptureContent;
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// let agent = Agent::builder("support")
    ///     .model(ScriptedModel::new().text("Hello."))
    ///     .capture_content(CaptureContent::on().redact(|_, text| text.replace("@", " at ")))
    ///     .build()
    ///     .unwrap();
    /// # let _ = agent;
    /// ```
    pub fn capture_content(mut self, capture: CaptureContent) -> Self {
        self.capture = Some(capture);
        self
    }

    /// Whether the model may ask for several tool calls in one turn (sent as the provider's
    /// `parallel_tool_calls`, or Anthropic's `disable_parallel_tool_use`). Unset, each provider's
    /// default applies (they allow it). How many calls *run* at once is
    /// [`tool_concurrency`](Self::tool_concurrency).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests().text("One at a time.");
    /// let agent = Agent::builder("a").model(model.clone()).parallel_tool_calls(false).build()?;
    /// agent.run("Hi").await?;
    /// assert_eq!(model.requests()[0].parallel_tool_calls, Some(false));
    ///
    /// // Unset, the request leaves it to the provider.
    /// let model = ScriptedModel::new().record_requests().text("Any way you like.");
    /// Agent::builder("a").model(model.clone()).build()?.run("Hi").await?;
    /// assert_eq!(model.requests()[0].parallel_tool_calls, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn parallel_tool_calls(mut self, allowed: bool) -> Self {
        self.parallel_tool_calls = Some(allowed);
        self
    }

    /// How model requests that fail with a retryable error are retried (see [`RetryPolicy`] for the
    /// default); [`RetryPolicy::none`] turns retries off.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Agent, ModelError, RetryPolicy, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests()
    ///     .error(ModelError::from_status(429, "slow down"))
    ///     .error(ModelError::from_status(529, "overloaded"))
    ///     .text("Hello!");
    /// let quick = RetryPolicy::default().initial_backoff(Duration::from_millis(1));
    /// let agent = Agent::builder("a").model(model.clone()).model_retries(quick).build()?;
    /// assert_eq!(agent.run("Hi").await?.output(), Some("Hello!"));
    /// assert_eq!(model.requests().len(), 3); // two retries, then the answer
    /// # Ok(())
    /// # }
    /// ```
    pub fn model_retries(mut self, retries: RetryPolicy) -> Self {
        self.retries = retries;
        self
    }

    /// The instructions (system prompt), sent with every model request.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests().text("Hi.");
    /// let agent = Agent::builder("a").model(model.clone()).instructions("Be brief.").build()?;
    /// agent.run("Hello there!").await?;
    /// assert_eq!(model.requests()[0].instructions, "Be brief.");
    /// # Ok(())
    /// # }
    /// ```
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// The model: a provider ([`provider`](crate::provider)), a [`ScriptedModel`](crate::ScriptedModel)
    /// in tests, or your own [`Model`]. It is the one required setting.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let agent = Agent::builder("a").model(ScriptedModel::new().text("Hello!")).build()?;
    /// assert_eq!(agent.run("Hi").await?.output(), Some("Hello!"));
    ///
    /// let err = Agent::builder("a").build().unwrap_err();
    /// assert!(matches!(err, AgentError::InvalidAgent(_)));
    /// assert!(err.to_string().contains("has no model"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn model(mut self, model: impl Model + 'static) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// The model name sent with each request (a next-turn override can change it).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests().text("Hello!");
    /// let agent = Agent::builder("a").model(model.clone()).model_name("gpt-4o-mini").build()?;
    /// agent.run("Hi").await?;
    /// assert_eq!(model.requests()[0].model.as_deref(), Some("gpt-4o-mini"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn model_name(mut self, name: impl Into<String>) -> Self {
        self.model_name = Some(name.into());
        self
    }

    /// Adds a tool: a [`Tool`], or a `#[tool]` function by name. The model is offered the tools
    /// in the order they were added.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// /// Add two numbers.
    /// #[tool]
    /// fn add(a: i64, b: i64) -> i64 {
    ///     a + b
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let status = Tool::new("get_status", "Service status", json!({"type": "object"}), |_, _| Ok(json!("up")));
    /// let model = ScriptedModel::new().record_requests().tool_call("call_1", "add", json!({"a": 2, "b": 3})).text("5.");
    /// let agent = Agent::builder("calc").model(model.clone()).tool(add).tool(status).build()?;
    /// let done = agent.run("What is 2 + 3?").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some("5"));
    /// let offered: Vec<String> = model.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    /// assert_eq!(offered, ["add", "get_status"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Adds several tools: a tuple of tools of different kinds (`(fetch_ticket, deploy, status)`),
    /// a `Vec` or array, or a value whose `impl` block has `#[tools]` (see [`IntoTools`]). Collect
    /// an iterator of tools into a `Vec` first.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, tool, tools};
    ///
    /// /// Add two numbers.
    /// #[tool]
    /// fn add(a: i64, b: i64) -> i64 {
    ///     a + b
    /// }
    ///
    /// struct Greeter { greeting: String }
    ///
    /// #[tools]
    /// impl Greeter {
    ///     /// Greet someone by name.
    ///     #[tool]
    ///     async fn greet(&self, name: String) -> String {
    ///         format!("{}, {name}!", self.greeting)
    ///     }
    /// }
    ///
    /// let agent = Agent::builder("helper")
    ///     .model(ScriptedModel::new().text("Hi"))
    ///     .tools((add, Greeter { greeting: "Hello".into() }))
    ///     .build()?;
    /// let ids: Vec<&str> = agent.tools().iter().map(|t| t.id()).collect();
    /// assert_eq!(ids, ["add", "greet"]);
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn tools(mut self, tools: impl IntoTools) -> Self {
        tools.add_to(&mut self.tools);
        self
    }

    /// Adds a resource: a value the agent lends its tools' calls (a connection pool, an HTTP
    /// client, a configuration), by type. A `#[tool]` function takes it as a parameter
    /// (`db: Res<Pool>`), any tool through [`ToolContext::resource`]. One value per type: a second
    /// of the same type replaces the first. Pass an `Arc<T>` or a [`Res<T>`] through
    /// [`resource_shared`](Self::resource_shared) to share a value you keep.
    ///
    /// Resources are never serialised and never part of a [`RunState`](crate::RunState): a run
    /// resumed by another agent, in another process, gets that agent's resources. `build()` refuses
    /// an agent that lacks a resource one of its tools needs, naming the tool and the type.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Res, ScriptedModel, tool};
    /// use serde_json::json;
    ///
    /// struct Inventory { stock: u32 }
    ///
    /// /// How many items are in stock.
    /// #[tool]
    /// async fn stock(inventory: Res<Inventory>) -> u32 {
    ///     inventory.stock
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests().tool_call("call_1", "stock", json!({})).text("7 left.");
    /// let agent = Agent::builder("shop").model(model.clone()).tool(stock)
    ///     .resource(Inventory { stock: 7 })
    ///     .build()?;
    /// agent.run("How many?").await?;
    /// assert!(format!("{:?}", model.requests()[1].messages).contains("7"));
    ///
    /// // Without the resource, the agent is not built.
    /// let err = Agent::builder("shop").model(ScriptedModel::new().record_requests()).tool(stock).build().unwrap_err();
    /// assert!(err.to_string().contains("Inventory"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn resource<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.resources = self.resources.with(value);
        self
    }

    /// Adds a resource you keep a handle to: an `Arc<T>` or a [`Res<T>`] (see
    /// [`resource`](Self::resource)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use phaseo_agent::{Agent, Res, ScriptedModel, tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// struct Visits(AtomicUsize);
    ///
    /// /// Count a visit.
    /// #[tool]
    /// async fn visit(visits: Res<Visits>) -> usize {
    ///     visits.0.fetch_add(1, Ordering::SeqCst) + 1
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let visits = Arc::new(Visits(AtomicUsize::new(0)));
    /// let model = ScriptedModel::new().tool_call("call_1", "visit", json!({})).text("Counted.");
    /// let agent = Agent::builder("counter").model(model).tool(visit)
    ///     .resource_shared(visits.clone())
    ///     .build()?;
    /// agent.run("Visit").await?;
    /// assert_eq!(visits.0.load(Ordering::SeqCst), 1); // the tool used the value you kept
    /// # Ok(())
    /// # }
    /// ```
    pub fn resource_shared<T: Send + Sync + 'static>(mut self, value: impl Into<Res<T>>) -> Self {
        self.resources = self.resources.with_res(value);
        self
    }

    /// Adds every resource of a [`Resources`] set (replacing values of the same types).
    ///
    /// ```
    /// use phaseo_agent::{Agent, Res, Resources, ScriptedModel};
    ///
    /// struct Pool { size: usize }
    /// struct Region(&'static str);
    ///
    /// // One set, shared by two agents: they hold the same values.
    /// let shared = Resources::new().with(Pool { size: 4 }).with(Region("eu-west-1"));
    /// let support = Agent::builder("support").model(ScriptedModel::new()).resources(&shared).build()?;
    /// let billing = Agent::builder("billing").model(ScriptedModel::new())
    ///     .resource(Region("us-east-1"))
    ///     .resources(&shared) // replaces the region set before
    ///     .build()?;
    /// let (a, b) = (support.resources().get::<Pool>().unwrap(), billing.resources().get::<Pool>().unwrap());
    /// assert!(Res::ptr_eq(&a, &b));
    /// assert_eq!(billing.resources().get::<Region>().unwrap().0, "eu-west-1");
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn resources(mut self, resources: &Resources) -> Self {
        self.resources = self.resources.merge(resources);
        self
    }

    /// The most model turns a run may take (default 10). A run that would take more fails with
    /// [`AgentError::MaxTurnsExceeded`].
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "ping", json!({}))
    ///     .tool_call("call_2", "ping", json!({}))
    ///     .text("Done pinging.");
    /// let agent = Agent::builder("ops").model(model).tool(ping).max_turns(2).build()?;
    /// let failed = agent.run("Ping until it answers").await.unwrap_err();
    /// assert_eq!(failed.error, AgentError::MaxTurnsExceeded(2));
    /// assert_eq!(failed.state.unwrap().steps().len(), 2); // both turns' calls ran
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_turns(mut self, max_turns: usize) -> Self {
        self.max_turns = max_turns;
        self
    }

    /// How many calls of one turn run at once (values below 1 are raised to 1). Default 1: calls
    /// run one after another in call order, the safe default for tools that share state. Results
    /// reach the model in call order whatever the setting.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, ToolCall};
    /// use phaseo_agent::serde_json::json;
    /// use tokio::sync::Barrier;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let two_calls = |tool: &str| {
    ///     let calls = [ToolCall::new("c1", tool, json!({})), ToolCall::new("c2", tool, json!({}))];
    ///     ScriptedModel::new().tool_calls(calls).text("Done.")
    /// };
    ///
    /// // The default: one call at a time, however long each takes.
    /// let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    /// let (r, m) = (running.clone(), most.clone());
    /// let nap = Tool::new("nap", "Nap briefly", json!({"type": "object"}), move |_, _| {
    ///     let (r, m) = (r.clone(), m.clone());
    ///     async move {
    ///         m.fetch_max(r.fetch_add(1, SeqCst) + 1, SeqCst);
    ///         tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    ///         r.fetch_sub(1, SeqCst);
    ///         Ok(json!("rested"))
    ///     }
    /// });
    /// Agent::builder("a").model(two_calls("nap")).tool(nap).build()?.run("Nap").await?;
    /// assert_eq!(most.load(SeqCst), 1);
    ///
    /// // Each call waits for the other: one at a time, the first would wait forever.
    /// let barrier = Arc::new(Barrier::new(2));
    /// let meet = Tool::new("meet", "Wait for the other call", json!({"type": "object"}), move |_, _| {
    ///     let barrier = barrier.clone();
    ///     async move { barrier.wait().await; Ok(json!("met")) }
    /// });
    /// let agent = Agent::builder("a").model(two_calls("meet")).tool(meet).tool_concurrency(2).build()?;
    /// assert_eq!(agent.run("Meet").await?.output(), Some("Done."));
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_concurrency(mut self, concurrency: usize) -> Self {
        self.settings.concurrency = concurrency.max(1);
        self
    }

    /// The error policy of tools that set none ([`Tool::on_error`] wins). Default:
    /// [`OnError::ReturnToModel`], the error goes back to the model as the call's result and the
    /// run goes on.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, OnError, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let charge = Tool::new("charge", "Charge a card", json!({"type": "object"}),
    ///     |_, _| Err(AgentError::tool("card declined")));
    /// let script = ScriptedModel::new().tool_call("call_1", "charge", json!({})).text("Charged.");
    ///
    /// // The default: the model reads the error, and the run goes on.
    /// let agent = Agent::builder("billing").model(script.clone()).tool(charge.clone()).build()?;
    /// let done = agent.run("Charge the card").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"error":"card declined"}"#));
    ///
    /// let script = ScriptedModel::new().tool_call("call_1", "charge", json!({})).text("Charged.");
    /// let strict = Agent::builder("billing").model(script).tool(charge).on_error(OnError::FailRun).build()?;
    /// let failed = strict.run("Charge the card").await.unwrap_err();
    /// assert_eq!(failed.error, AgentError::tool("card declined"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_error(mut self, policy: OnError) -> Self {
        self.settings.on_error = policy;
        self
    }

    /// What to do with a call to a tool id the agent does not have (or the turn did not offer).
    /// Default: [`OnError::FailRun`], the run fails with `Unknown tool: <name>`;
    /// [`OnError::ReturnToModel`] answers the model with that error.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, OnError, ScriptedModel};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let script = || ScriptedModel::new().tool_call("call_1", "lookup", json!({})).text("No such tool.");
    ///
    /// // The default: the run fails.
    /// let agent = Agent::builder("a").model(script()).build()?;
    /// let failed = agent.run("Look it up").await.unwrap_err();
    /// assert_eq!(failed.error, AgentError::UnknownTool("lookup".into()));
    ///
    /// let agent = Agent::builder("a").model(script()).on_unknown_tool(OnError::ReturnToModel).build()?;
    /// let done = agent.run("Look it up").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"error":"Unknown tool: lookup"}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_unknown_tool(mut self, policy: OnError) -> Self {
        self.settings.on_unknown_tool = policy;
        self
    }

    /// What to do with arguments that are not valid JSON or fail the parameter schema. Default:
    /// [`OnError::ReturnToModel`], the error goes back to the model with the JSON path and the
    /// reason, so it can correct itself.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, OnError, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let double = Tool::new("double", "Double a number",
    ///     json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    ///     |input, _| Ok(json!(input["n"].as_i64().unwrap_or(0) * 2)));
    /// let script = || ScriptedModel::new().tool_call("call_1", "double", json!({"n": "two"})).text("4.");
    ///
    /// // The default: the model reads what was wrong, and where.
    /// let agent = Agent::builder("calc").model(script()).tool(double.clone()).build()?;
    /// let done = agent.run("Double two").await?;
    /// assert_eq!(
    ///     done.state.tool_result("call_1"),
    ///     Some(r#"{"error":"Invalid tool input: $.n: \"two\" is not of type \"integer\""}"#)
    /// );
    ///
    /// let agent = Agent::builder("calc").model(script()).tool(double)
    ///     .on_invalid_arguments(OnError::FailRun)
    ///     .build()?;
    /// let failed = agent.run("Double two").await.unwrap_err();
    /// assert!(matches!(failed.error, AgentError::InvalidInput(_)));
    /// assert!(failed.to_string().contains("$.n"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_invalid_arguments(mut self, policy: OnError) -> Self {
        self.settings.on_invalid_arguments = policy;
        self
    }

    /// The timeout of tools that set none ([`Tool::timeout`] wins). Default: none, a call runs
    /// until it finishes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // (The clock is paused: Tokio skips ahead to the next timer, so a day passes at once.)
    /// let slow = Tool::new("slow", "Takes a day", json!({"type": "object"}), |_, _| async {
    ///     tokio::time::sleep(Duration::from_secs(24 * 60 * 60)).await;
    ///     Ok(json!("finally"))
    /// });
    /// let script = || ScriptedModel::new().tool_call("call_1", "slow", json!({})).text("Done.");
    ///
    /// // The default: no timeout, the call takes its day.
    /// let agent = Agent::builder("a").model(script()).tool(slow.clone()).build()?;
    /// assert_eq!(agent.run("Go").await?.state.tool_result("call_1"), Some(r#""finally""#));
    ///
    /// let agent = Agent::builder("a").model(script()).tool(slow)
    ///     .default_timeout(Duration::from_millis(20))
    ///     .build()?;
    /// let done = agent.run("Go").await?; // the error goes back to the model
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"error":"Tool slow timed out after 20ms"}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.settings.default_timeout = Some(timeout);
        self
    }

    /// Caps the characters of each result the model sees ([`Tool::max_output_chars`] wins).
    /// A longer result keeps its start and its end around a notice of how many characters were
    /// cut. Default: none, results reach the model whole.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let logs = Tool::new("logs", "Read the logs", json!({"type": "object"}), |_, _| Ok(json!("x".repeat(100_000))));
    /// let script = || ScriptedModel::new().tool_call("call_1", "logs", json!({})).text("Lots of x.");
    ///
    /// // The default: no cap, all 100,002 characters of the JSON string `"xxx…"`.
    /// let agent = Agent::builder("a").model(script()).tool(logs.clone()).build()?;
    /// assert_eq!(agent.run("Read the logs").await?.state.tool_result("call_1").unwrap().len(), 100_002);
    ///
    /// let agent = Agent::builder("a").model(script()).tool(logs).max_output_chars(10).build()?;
    /// let done = agent.run("Read the logs").await?;
    /// // The first 5 and the last 5 characters are kept.
    /// assert_eq!(done.state.tool_result("call_1"), Some("\"xxxx\n[... 99992 characters cut ...]\nxxxx\""));
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_output_chars(mut self, max: usize) -> Self {
        self.settings.max_output_chars = Some(max);
        self
    }

    /// The most tool calls one model turn may make. Default: 128, far above what models send (a
    /// few, at most a few dozen), low enough that a runaway or hostile model cannot make one turn
    /// arbitrarily large. A turn with more fails the run with [`AgentError::TooManyToolCalls`]
    /// before any of its calls runs; the failed state can be retried with [`Agent::retry`].
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolCall};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| async { Ok(json!("pong")) });
    /// let turn = |n: usize| {
    ///     let calls = (0..n).map(|i| ToolCall::raw(format!("c{i}"), "ping", "{}"));
    ///     ScriptedModel::new().tool_calls(calls).text("Pinged.")
    /// };
    /// let agent = |n: usize| Agent::builder("a").model(turn(n)).tool(ping.clone());
    ///
    /// // The default: 128 calls run; 129 are refused, and none of them runs.
    /// let done = agent(128).build().unwrap().run("Ping").await.unwrap();
    /// assert_eq!(done.state.steps().len(), 128);
    /// let failed = agent(129).build().unwrap().run("Ping").await.unwrap_err();
    /// assert_eq!(failed.error, AgentError::TooManyToolCalls { count: 129, limit: 128 });
    ///
    /// let failed = agent(3).max_calls_per_turn(2).build().unwrap().run("Ping").await.unwrap_err();
    /// assert_eq!(failed.error, AgentError::TooManyToolCalls { count: 3, limit: 2 });
    /// # }
    /// ```
    pub fn max_calls_per_turn(mut self, max: usize) -> Self {
        self.settings.max_calls_per_turn = max;
        self
    }

    /// An agent-level approval rule, added to every tool's own: a call pauses for approval (kind
    /// `tool_approval`) when its tool requires it **or** this function says so. A rule written for
    /// one tool never removes another tool's `require_approval`. The function is not called when the
    /// tool already requires approval for the call. It replaces an earlier `approval` or
    /// [`approval_policy`](Self::approval_policy).
    ///
    /// The function returns `bool`, and is called in place (keep it quick), or a future of `bool`,
    /// which is awaited: for a rule that does I/O, read what it needs from the call and return an
    /// `async move` block (see [`Answer`]). A panic, before or inside the future, counts as "needs
    /// approval".
    ///
    /// ```
    /// use phaseo_agent::{Agent, PendingKind, ScriptedModel, Tool, ToolCall, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let status = Tool::new("get_status", "Service status", json!({"type": "object"}), |v, _| Ok(v));
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    ///
    /// // Synchronous: answered in place.
    /// let model = ScriptedModel::new().tool_calls([
    ///     ToolCall::new("c1", "get_status", json!({"service": "payments"})),
    ///     ToolCall::new("c2", "deploy", json!({"environment": "staging"})),
    /// ]);
    /// let agent = Agent::builder("ops")
    ///     .model(model)
    ///     .tool(status.clone())
    ///     .tool(deploy)
    ///     .approval(|call: &ToolCall, _ctx: &ToolContext| call.arguments.contains("payments"))
    ///     .build()?;
    /// let paused = agent.run("check payments, then deploy staging").await?;
    /// assert_eq!(paused.pending().len(), 2); // c1 by the agent's rule, c2 by deploy's own
    ///
    /// // Async: the future owns what it read from the call, and is awaited.
    /// let model = ScriptedModel::new().tool_call("c1", "get_status", json!({"service": "payments"}));
    /// let agent = Agent::builder("ops")
    ///     .model(model)
    ///     .tool(status)
    ///     .approval(|call: &ToolCall, _ctx: &ToolContext| {
    ///         let sensitive = call.arguments.contains("payments");
    ///         async move { sensitive /* or ask a policy service */ }
    ///     })
    ///     .build()?;
    /// let paused = agent.run("check payments").await?;
    /// assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// To decide against a tool's own setting, use [`approval_policy`](Self::approval_policy).
    pub fn approval<F, R, How>(mut self, decide: F) -> Self
    where
        F: Fn(&ToolCall, &ToolContext) -> R + Send + Sync + 'static,
        R: Answer<bool, How>,
    {
        self.approval = Some(Arc::new(
            move |call: &ToolCall, ctx: &ToolContext, tool_says: bool| {
                if tool_says {
                    Later::Now(true)
                } else {
                    sealed::Answer::later(decide(call, ctx))
                }
            },
        ));
        self
    }

    /// An agent-level approval policy with the last word: it sees each call, its context and the
    /// tool's own verdict (`require_approval`, or the tool's approval function), and returns whether
    /// the call pauses for approval. Use it to waive a tool's own gate on purpose (say, deploys to
    /// staging); prefer [`approval`](Self::approval), which can only add gates. It replaces an
    /// earlier `approval` or `approval_policy`.
    ///
    /// The policy returns `bool`, and is called in place (keep it quick), or a future of `bool`,
    /// which is awaited: for a policy that does I/O, read what it needs from the call and return
    /// an `async move` block (see [`Answer`]). A panic, before or inside the future, counts as
    /// "needs approval".
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, ToolCall, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    ///
    /// // Synchronous: answered in place.
    /// let model = ScriptedModel::new().tool_call("c1", "deploy", json!({"environment": "staging"})).text("done");
    /// let agent = Agent::builder("ops")
    ///     .model(model)
    ///     .tool(deploy.clone())
    ///     .approval_policy(|call: &ToolCall, _ctx: &ToolContext, tool_says: bool| {
    ///         tool_says && !call.arguments.contains("staging")
    ///     })
    ///     .build()?;
    /// assert_eq!(agent.run("deploy staging").await?.output(), Some("done"));
    ///
    /// // Async: the future owns what it read from the call, and is awaited.
    /// let model = ScriptedModel::new().tool_calls([
    ///     ToolCall::new("c1", "deploy", json!({"environment": "staging"})),
    ///     ToolCall::new("c2", "deploy", json!({"environment": "production"})),
    /// ]);
    /// let agent = Agent::builder("ops")
    ///     .model(model)
    ///     .tool(deploy)
    ///     .approval_policy(|call: &ToolCall, _ctx: &ToolContext, tool_says: bool| {
    ///         let staging = call.arguments.contains("staging");
    ///         async move { tool_says && !staging /* or ask a policy service */ }
    ///     })
    ///     .build()?;
    /// let paused = agent.run("deploy both").await?;
    /// let waiting: Vec<&str> = paused.pending().iter().map(|p| p.call.id.as_str()).collect();
    /// assert_eq!(waiting, ["c2"]); // staging's gate waived, production's kept
    /// # Ok(())
    /// # }
    /// ```
    pub fn approval_policy<F, R, How>(mut self, decide: F) -> Self
    where
        F: Fn(&ToolCall, &ToolContext, bool) -> R + Send + Sync + 'static,
        R: Answer<bool, How>,
    {
        self.approval = Some(Arc::new(
            move |call: &ToolCall, ctx: &ToolContext, tool_says: bool| {
                sealed::Answer::later(decide(call, ctx, tool_says))
            },
        ));
        self
    }

    /// Hands the calls it selects to a person (pending kind `hitl`): they supply the output, reject
    /// the call, or approve it to run.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, PendingKind, ScriptedModel, Tool, ToolCall, ToolContext};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let refund = Tool::new("refund", "Refund an order", json!({"type": "object"}),
    ///     |input, _| Ok(json!({"refunded": input["amount"]})));
    /// let model = ScriptedModel::new().tool_call("c1", "refund", json!({"amount": 900})).text("Refund sent.");
    /// let agent = Agent::builder("billing")
    ///     .model(model)
    ///     .tool(refund)
    ///     .human_review(|call: &ToolCall, _ctx: &ToolContext| call.name == "refund")
    ///     .build()?;
    /// let paused = agent.run("Refund order 7").await?;
    /// assert_eq!(paused.pending()[0].kind, PendingKind::Hitl);
    ///
    /// // The person answers in the tool's place: it does not run.
    /// let done = agent.resume(&paused.state, Decisions::new().output("c1", json!({"refunded": 100}))).await?;
    /// assert_eq!(done.state.tool_result("c1"), Some(r#"{"refunded":100}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn human_review(
        mut self,
        select: impl Fn(&ToolCall, &ToolContext) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.human_review = Some(Arc::new(select));
        self
    }

    /// Signs every run state this agent returns with HMAC-SHA256 under `key`, and makes `resume`
    /// refuse a state whose signature does not match (changed in storage, or signed with another key)
    /// or that is not signed. Use a secret of 32 random bytes (or more), kept out of the stored state.
    ///
    /// [`build`](Self::build) refuses a key shorter than 32 bytes (an empty one included) with
    /// [`AgentError::InvalidAgent`]: HMAC-SHA256 accepts any key, but a key shorter than the hash
    /// (32 bytes) weakens it (RFC 2104, section 3), and an empty or short one is almost always a
    /// mistake (an unset environment variable, a placeholder). To derive a key from a password,
    /// use a key-derivation function, not the password's bytes.
    ///
    /// A signature is 64 lower-case hex digits, as the agent writes it; any other text is refused.
    ///
    /// Without a key, states are not signed; a signed state is then refused (fail closed).
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, RunState, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new().tool_call("c1", "deploy", json!({})).text("done");
    /// let agent = Agent::builder("release").model(model).tool(deploy).state_key(b"a secret of 32 bytes or more....").build()?;
    ///
    /// let paused = agent.run("ship").await?;
    /// let mut stored: serde_json::Value = serde_json::from_str(&paused.state.to_json()).unwrap();
    /// stored["approved_tools"] = json!(["deploy"]);         // someone edits the stored row
    /// let forged = RunState::from_json(&stored.to_string())?;
    /// let decisions = Decisions::for_run(forged.run_id()).approve("c1");
    /// let err = agent.resume(&forged, decisions).await.unwrap_err();
    /// assert!(err.to_string().contains("signature"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn state_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.state_key = Some(Arc::from(key.as_ref()));
        self
    }

    /// Builds the agent, checking every tool definition: a tool with an invalid schema or an empty
    /// description, two tools with one id, a tool whose resource is missing, no model or a short
    /// [`state_key`](Self::state_key) are refused with an error that names the problem.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let agent = Agent::builder("ops").model(ScriptedModel::new()).tool(ping.clone()).build();
    /// assert!(agent.is_ok());
    ///
    /// let twice = Agent::builder("ops").model(ScriptedModel::new()).tool(ping.clone()).tool(ping);
    /// let err = twice.build().unwrap_err();
    /// assert!(matches!(&err, AgentError::InvalidTool { tool, .. } if tool == "ping"));
    /// assert!(err.to_string().contains("two tools have this id"));
    ///
    /// let silent = Tool::new("silent", " ", json!({"type": "object"}), |v, _| Ok(v));
    /// let err = Agent::builder("ops").model(ScriptedModel::new()).tool(silent).build().unwrap_err();
    /// assert!(err.to_string().contains("the description is empty"));
    /// ```
    pub fn build(self) -> Result<Agent, AgentError> {
        let model = self.model.ok_or_else(|| {
            AgentError::InvalidAgent(format!(
                "agent `{}` has no model; call `.model(...)`",
                self.id
            ))
        })?;
        if let Some(key) = &self.state_key {
            check_state_key(key)?;
        }
        let mut index = HashMap::new();
        for (i, tool) in self.tools.iter().enumerate() {
            if let Some(reason) = &tool.definition_error {
                return Err(AgentError::InvalidTool {
                    tool: tool.id.clone(),
                    reason: reason.clone(),
                });
            }
            if tool.description.trim().is_empty() {
                return Err(AgentError::InvalidTool {
                    tool: tool.id.clone(),
                    reason: "the description is empty; models choose tools by their description, so say what it does".into(),
                });
            }
            if let Some(need) = self.resources.missing(&tool.needs) {
                return Err(AgentError::InvalidTool {
                    tool: tool.id.clone(),
                    reason: self.resources.missing_message(need),
                });
            }
            if index.insert(tool.id.clone(), i).is_some() {
                return Err(AgentError::InvalidTool {
                    tool: tool.id.clone(),
                    reason: "two tools have this id; tool ids must be unique".into(),
                });
            }
        }
        let definitions = self
            .tools
            .iter()
            .map(|t| ToolDefinition {
                name: t.id.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
                strict: t.strict,
            })
            .collect();
        Ok(Agent {
            inner: Arc::new(AgentInner {
                id: self.id.into(),
                instructions: self.instructions,
                model,
                model_name: self.model_name,
                tools: self.tools,
                definitions,
                index,
                settings: self.settings,
                approval: self.approval,
                human_review: self.human_review,
                max_turns: self.max_turns,
                state_key: self.state_key,
                retries: self.retries,
                parallel_tool_calls: self.parallel_tool_calls,
                resources: self.resources,
                capture: self.capture.unwrap_or_default(),
            }),
        })
    }
}

/// The shortest state key [`AgentBuilder::build`] accepts: the length of an HMAC-SHA256.
const MIN_STATE_KEY_BYTES: usize = 32;

/// Refuses an empty or short state key, without quoting it.
fn check_state_key(key: &[u8]) -> Result<(), AgentError> {
    if key.is_empty() {
        return Err(AgentError::InvalidAgent(format!(
            "the state key must not be empty; use a secret of at least {MIN_STATE_KEY_BYTES} random bytes"
        )));
    }
    if key.len() < MIN_STATE_KEY_BYTES {
        return Err(AgentError::InvalidAgent(format!(
            "the state key is {} bytes; it must be at least {MIN_STATE_KEY_BYTES} bytes (use {MIN_STATE_KEY_BYTES} random bytes)",
            key.len()
        )));
    }
    Ok(())
}
