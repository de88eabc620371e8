//! [`Tool`]: a tool's definition (id, description, parameter schema) and everything the runtime does
//! around its executor (approval, timeout, error policy, validators, hooks, output cap).

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::Value;

use crate::decode::text::{TOO_DEEP, bounded, drop_deep, parse_arguments, too_deep};
use crate::error::AgentError;
use crate::model::request::TurnParams;
use crate::schema::dialect::drop_strict_nulls;
use crate::schema::validate::{CheckFn, Validator};
use crate::tool::call::{Eager, Exec, InputType, Later, Parsed, Produced, panic_error};
use crate::tool::context::ToolContext;
use crate::tool::resource::Need;
use crate::tool::returns::{Answer, ToolReturn, sealed};

/// Parses a call's argument text. The `Option<bool>`: `Some(want_value)` when the call's future
/// may be made at once (see [`Parsed`]), `None` when something reads the input first.
pub(crate) type ParseFn = dyn Fn(&str, Option<bool>) -> Result<Parsed, String> + Send + Sync;

pub(crate) type ApprovalFn = dyn Fn(&Parsed, &ToolContext) -> Later<bool> + Send + Sync;
/// Decodes a call's arguments that passed the schema and the custom validators, as [`ParseFn`].
pub(crate) type FromValueFn = dyn Fn(Value, Option<bool>) -> Result<Parsed, String> + Send + Sync;
pub(crate) type OnCalledFn = dyn Fn(&Value, &ToolContext) -> Later<Option<Value>> + Send + Sync;
pub(crate) type NextTurnFn = dyn Fn(&Value, &TurnParams) -> TurnParams + Send + Sync;

/// What the runtime does when a tool call fails (an executor error, a timeout, a panic, a failed
/// validator).
///
/// The default is [`OnError::ReturnToModel`]: the model sees `{"error": "..."}` as the call's
/// result and can try something else. Set it per tool ([`Tool::on_error`]) or for the whole agent
/// ([`AgentBuilder::on_error`](crate::AgentBuilder::on_error)); as serde data it is `"return-to-model"` or `"fail-run"`.
///
/// ```
/// use phaseo_agent::{Agent, AgentError, OnError, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), AgentError> {
/// assert_eq!(OnError::default(), OnError::ReturnToModel);
/// assert_eq!(serde_json::to_value(OnError::FailRun).unwrap(), "fail-run");
///
/// let charge = Tool::new("charge", "Charge a card", json!({"type": "object"}),
///     |_, _| Err(AgentError::tool("card declined")));
/// let model = ScriptedModel::new().tool_call("call_1", "charge", json!({})).text("The card was declined.");
/// let agent = Agent::builder("billing").model(model).tool(charge).build()?;
/// // Returned to the model: the run goes on, and the model reads the error as the call's result.
/// let done = agent.run("Charge the card").await?;
/// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"error":"card declined"}"#));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Send the error back to the model as the call's result; the run goes on.
    #[default]
    ReturnToModel,
    /// Fail the run with the error.
    FailRun,
}

/// What a streaming tool yields (see [`Tool::streaming`]).
///
/// ```
/// use futures::stream;
/// use phaseo_agent::{Tool, ToolContext, ToolEvent};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let count = Tool::streaming("count", "Count to two", json!({"type": "object"}), |_input, _ctx| {
///     stream::iter([
///         Ok(ToolEvent::Progress(json!({"at": 1}))),
///         Ok(ToolEvent::Progress(json!({"at": 2}))),
///         Ok(ToolEvent::Result(json!("counted"))),
///     ])
/// });
/// let ctx = ToolContext::detached();
/// assert_eq!(count.invoke("{}", &ctx).await?, r#""counted""#);
/// // Each progress value was published, in order.
/// assert_eq!(ctx.progress(), vec![json!({"at": 1}), json!({"at": 2})]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEvent {
    /// A preliminary result.
    Progress(Value),
    /// The final result (the last one wins if several are yielded).
    Result(Value),
}

/// What a tool tells people and clients about itself beyond its description: a human-readable
/// title, and hints about its behaviour. MCP clients read them (`title` and the tool's
/// annotations); the agent loop does not act on them. `None` is "not said" (MCP's defaults then
/// apply: not read-only, destructive, not idempotent, open-world).
///
/// Set them with [`Tool::title`], [`Tool::read_only`], [`Tool::destructive`],
/// [`Tool::idempotent`] and [`Tool::open_world`] (or the `#[tool(...)]` keys of the same names);
/// read them with [`Tool::hints`].
///
/// ```
/// use phaseo_agent::{Tool, ToolHints};
/// use serde_json::json;
///
/// let status = Tool::new("get_status", "Get a service's status", json!({"type": "object"}),
///     |_, _| Ok(json!("up")))
///     .title("Service status")
///     .read_only(true);
/// let hints: &ToolHints = status.hints();
/// assert_eq!(hints.title.as_deref(), Some("Service status"));
/// assert_eq!((hints.read_only, hints.destructive), (Some(true), None));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolHints {
    /// A human-readable name for the tool, for people (the id is for the model).
    pub title: Option<String>,
    /// The tool does not change its environment.
    pub read_only: Option<bool>,
    /// The tool may destroy or overwrite (meaningful when it is not read-only).
    pub destructive: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    pub idempotent: Option<bool>,
    /// The tool reaches an open world of outside entities (the web), not a closed one (its own store).
    pub open_world: Option<bool>,
}

#[derive(Clone)]
pub(crate) enum Approval {
    Never,
    Always,
    When(Arc<ApprovalFn>),
}

/// A tool the model can call: its id, description and parameter schema, an executor (or none, for an
/// external tool), and the runtime settings around it.
///
/// Build one with [`Tool::new`] (a closure over JSON, synchronous or async), [`Tool::typed`]
/// (typed input and output; what `#[tool]` expands to), [`Tool::streaming`] or [`Tool::external`],
/// then chain settings:
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::Tool;
/// use serde_json::{json, Value};
///
/// let deploy = Tool::new(
///     "deploy",
///     "Deploy an application environment",
///     json!({"type": "object", "properties": {"environment": {"type": "string"}}, "required": ["environment"]}),
///     |input, _context| Ok(json!({"environment": input["environment"], "deployed": true})),
/// )
/// .approval(|input: &Value, _ctx| input["environment"] == "production")
/// .timeout(Duration::from_secs(30));
/// assert_eq!(deploy.id(), "deploy");
/// ```
#[derive(Clone)]
pub struct Tool {
    pub(crate) id: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    pub(crate) input_type: InputType,
    pub(crate) parse: Arc<ParseFn>,
    /// Whether the tool runs in this process (false for external tools).
    pub(crate) executable: bool,
    /// What telemetry calls the tool (`gen_ai.tool.type`): `function` (it runs here) unless
    /// another process runs it (`extension`: an MCP server's tool).
    pub(crate) tool_type: &'static str,
    /// A typed async tool's function, handed to its calls when they start (so a call holds no
    /// reference count of its own).
    pub(crate) runs: Option<Arc<dyn Any + Send + Sync>>,
    pub(crate) approval: Approval,
    pub(crate) timeout: Option<Duration>,
    pub(crate) on_error: Option<OnError>,
    pub(crate) from_value: Arc<FromValueFn>,
    /// The parameter schema, compiled once at construction (what custom input validators run after).
    pub(crate) params_validator: Option<Validator>,
    pub(crate) input_checks: Vec<Arc<CheckFn>>,
    pub(crate) output_checks: Vec<Arc<CheckFn>>,
    pub(crate) event_checks: Vec<Arc<CheckFn>>,
    pub(crate) on_tool_called: Option<Arc<OnCalledFn>>,
    pub(crate) on_response_received: Option<Arc<CheckFn>>,
    pub(crate) next_turn: Option<Arc<NextTurnFn>>,
    pub(crate) exclusive: bool,
    /// Held to its schema by the provider where it can (OpenAI's strict function calling).
    pub(crate) strict: bool,
    pub(crate) max_output_chars: Option<usize>,
    /// The resources the tool's calls use, checked against the agent's when it is built.
    pub(crate) needs: Vec<Need>,
    /// A title and behaviour hints for people and clients (what MCP calls `title` and annotations).
    pub(crate) hints: ToolHints,
    /// The JSON Schema of a typed output, generated when asked (`Tool::structured_output`).
    pub(crate) output_type: Option<fn() -> Option<Value>>,
    pub(crate) definition_error: Option<String>,
}

impl Tool {
    /// A tool over JSON: its parameter schema, and an executor that takes the call's arguments and
    /// context and returns its result.
    ///
    /// The executor is a synchronous closure returning `Result<Value, AgentError>`, which runs on
    /// Tokio's blocking thread pool (so it may block without stalling other tools or the run), or
    /// an async one returning a future of it, which is awaited (see [`ToolReturn`]). Either gets
    /// the context by value (it is one `Arc`), so an async executor's future can own it.
    /// Arguments are validated against `parameters` before it runs; an `Err` it returns goes back
    /// to the model as `{"error": "..."}` (see [`OnError`]).
    ///
    /// ```
    /// use phaseo_agent::{AgentError, Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// // Synchronous: it may block (here, on nothing).
    /// let status = Tool::new("get_status", "Get the current service status",
    ///     json!({"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]}),
    ///     |input, _ctx| match input["service"].as_str() {
    ///         Some("api") => Ok(json!({"service": "api", "status": "healthy"})),
    ///         _ => Err(AgentError::tool("unknown service")),
    ///     });
    /// let ctx = ToolContext::detached();
    /// assert_eq!(status.invoke(r#"{"service": "api"}"#, &ctx).await?, r#"{"service":"api","status":"healthy"}"#);
    /// assert_eq!(status.invoke(r#"{"service": "db"}"#, &ctx).await.unwrap_err().to_string(), "unknown service");
    ///
    /// // Async: the future owns the context, and is awaited.
    /// let echo = Tool::new("echo", "Echo the input", json!({"type": "object"}), |input, ctx| async move {
    ///     ctx.emit_progress(json!({"stage": "echoing"}))?;
    ///     Ok(input)
    /// });
    /// let ctx = ToolContext::detached();
    /// assert_eq!(echo.invoke(r#"{"text": "hi"}"#, &ctx).await?, r#"{"text":"hi"}"#);
    /// assert_eq!(ctx.progress(), vec![json!({"stage": "echoing"})]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new<F, R, How>(
        id: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        executor: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> R + Send + Sync + 'static,
        R: ToolReturn<How>,
    {
        let exec = <R as sealed::ToolReturn<How>>::exec(executor);
        Self::json(id.into(), description.into(), parameters, Some(exec))
    }

    /// A tool written as a stream: it yields [`ToolEvent::Progress`] values while it works (each one a
    /// `tool.preliminary_result` event, checked by the event validators and kept on the step) and
    /// ends with its [`ToolEvent::Result`]. A stream that ends without a result is a tool error.
    ///
    /// ```
    /// use futures::stream;
    /// use phaseo_agent::{Tool, ToolContext, ToolEvent};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let index = Tool::streaming("index-repository", "Index a repository",
    ///     json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    ///     |_input, ctx| {
    ///         ctx.set_context(json!({"indexed": true})).ok();
    ///         stream::iter([
    ///             Ok(ToolEvent::Progress(json!({"phase": "scan"}))),
    ///             Ok(ToolEvent::Progress(json!({"phase": "embed"}))),
    ///             Ok(ToolEvent::Result(json!({"indexed": 248}))),
    ///         ])
    ///     });
    /// let ctx = ToolContext::detached();
    /// assert_eq!(index.invoke(r#"{"path": "."}"#, &ctx).await?, r#"{"indexed":248}"#);
    /// assert_eq!(ctx.progress().len(), 2);
    /// assert_eq!(ctx.context_update(), Some(json!({"indexed": true})));
    /// # Ok(())
    /// # }
    /// ```
    pub fn streaming<F, S>(
        id: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        executor: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> S + Send + Sync + 'static,
        S: futures::Stream<Item = Result<ToolEvent, AgentError>> + Send + 'static,
    {
        let exec: Arc<Exec<Value>> = Arc::new(move |input, ctx, _| {
            let events = executor(input, ctx.clone());
            async move {
                use futures::StreamExt;
                let mut events = std::pin::pin!(events);
                let mut result = None;
                while let Some(event) = events.next().await {
                    match event? {
                        ToolEvent::Progress(value) => ctx.emit_progress(value)?,
                        ToolEvent::Result(value) => result = Some(value),
                    }
                }
                result
                    .map(Produced::Value)
                    .ok_or_else(|| AgentError::tool("the tool's stream ended without a result"))
            }
            .boxed()
        });
        Self::json(id.into(), description.into(), parameters, Some(exec))
    }

    /// A tool with no executor: the result comes from outside the process. A call pauses the run
    /// with pending kind `external_output`; resume it with [`Decision::Output`](crate::Decision::Output).
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, PendingKind, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let lookup = Tool::external("ticket_lookup", "Load one support ticket",
    ///     json!({"type": "object", "properties": {"ticket_id": {"type": "string"}}, "required": ["ticket_id"]}));
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "ticket_lookup", json!({"ticket_id": "T-7"}))
    ///     .text("T-7 is about a printer.");
    /// let agent = Agent::builder("support").model(model).tool(lookup).build()?;
    /// let paused = agent.run("What is T-7 about?").await?;
    /// assert_eq!(paused.pending()[0].kind, PendingKind::ExternalOutput);
    ///
    /// let answer = Decisions::for_run(paused.state.run_id()).output("call_1", json!({"title": "Printer on fire"}));
    /// let done = agent.resume(&paused.state, answer).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"title":"Printer on fire"}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn external(
        id: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Self::json(id.into(), description.into(), parameters, None)
    }

    /// A JSON tool: parameters validated by a compiled JSON Schema, then handed to `exec`.
    fn json(
        id: String,
        description: String,
        parameters: Value,
        exec: Option<Arc<Exec<Value>>>,
    ) -> Self {
        let (parameters, root_error) = object_root(parameters);
        let (validator, error) = match Validator::new(&parameters) {
            Ok(v) => (Some(v), root_error),
            Err(e) => (None, Some(e)),
        };
        let params_validator = validator.clone();
        let executable = exec.is_some();
        let exec_value = exec.clone();
        let parse = move |args: &str, _: Option<bool>| {
            let value = parse_arguments(args)?;
            if let Some(v) = &validator {
                v.check(&value)?;
            }
            Ok(Parsed::Ready(Box::new(Eager {
                input: value,
                exec: exec.clone(),
            })))
        };
        let mut tool = Self::from_parts(
            id,
            description,
            parameters,
            InputType::of::<Value>(),
            Arc::new(parse),
            Arc::new(move |value: Value, _: Option<bool>| {
                Ok(Parsed::Ready(Box::new(Eager {
                    input: value,
                    exec: exec_value.clone(),
                })))
            }),
            executable,
        );
        tool.params_validator = params_validator;
        tool.definition_error = tool.definition_error.or(error);
        tool
    }

    pub(crate) fn from_parts(
        id: String,
        description: String,
        parameters: Value,
        input_type: InputType,
        parse: Arc<ParseFn>,
        from_value: Arc<FromValueFn>,
        executable: bool,
    ) -> Self {
        let definition_error = check_id(&id).err();
        Tool {
            id,
            description,
            parameters,
            input_type,
            parse,
            executable,
            tool_type: "function",
            runs: None,
            approval: Approval::Never,
            timeout: None,
            on_error: None,
            from_value,
            params_validator: None,
            input_checks: Vec::new(),
            output_checks: Vec::new(),
            event_checks: Vec::new(),
            on_tool_called: None,
            on_response_received: None,
            next_turn: None,
            exclusive: false,
            strict: false,
            max_output_chars: None,
            needs: Vec::new(),
            hints: ToolHints::default(),
            output_type: None,
            definition_error,
        }
    }

    /// Declares that the tool's calls use the resource of type `T`
    /// ([`ToolContext::resource`]): an agent built without one is refused
    /// ([`AgentError::InvalidTool`] naming the tool and the type), so the call never finds it
    /// missing. A `#[tool]` function's `Res<T>` parameters declare themselves.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// struct Pool { size: usize }
    ///
    /// let size = Tool::new("pool_size", "The size of the pool", json!({"type": "object"}),
    ///     |_, ctx: ToolContext| Ok(json!(ctx.resource::<Pool>()?.size)))
    ///     .needs_resource::<Pool>();
    ///
    /// let without = Agent::builder("ops").model(ScriptedModel::new()).tool(size.clone()).build();
    /// assert!(matches!(without, Err(AgentError::InvalidTool { .. })));
    /// let with = Agent::builder("ops").model(ScriptedModel::new()).tool(size)
    ///     .resource(Pool { size: 4 }).build();
    /// assert!(with.is_ok());
    /// ```
    pub fn needs_resource<T: Send + Sync + 'static>(mut self) -> Self {
        let need = Need::of::<T>();
        if !self.needs.contains(&need) {
            self.needs.push(need);
        }
        self
    }

    /// Every call pauses for a person's approval first (pending kind `tool_approval`).
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, PendingKind, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let restart = Tool::new("restart", "Restart a service", json!({"type": "object"}),
    ///     |_, _| Ok(json!({"restarted": true})))
    ///     .require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "restart", json!({})).text("Restarted.");
    /// let agent = Agent::builder("ops").model(model).tool(restart).build()?;
    /// let paused = agent.run("Restart the API").await?;
    /// assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    /// assert_eq!(paused.state.tool_result("call_1"), None); // it has not run
    ///
    /// let done = agent.resume(&paused.state, Decisions::new().approve("call_1")).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"restarted":true}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn require_approval(mut self) -> Self {
        self.approval = Approval::Always;
        self
    }

    /// Decides per call whether it needs approval, from the validated input: `&Value` for JSON tools,
    /// `&I` for typed tools. The function returns `bool`, and is called in place (keep it quick),
    /// or a future of `bool`, which is awaited: for a check that does I/O (a policy service, a
    /// database), read what it needs from the input and return an `async move` block (see
    /// [`Answer`]). A panic, before or inside the future, counts as "needs approval" (fail
    /// closed).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, ToolCall};
    /// use serde_json::{json, Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // Synchronous: answered in place.
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |input, _| Ok(input))
    ///     .approval(|input: &Value, _ctx| input["environment"] == "production");
    /// let model = ScriptedModel::new().tool_calls([
    ///     ToolCall::new("call_1", "deploy", json!({"environment": "staging"})),
    ///     ToolCall::new("call_2", "deploy", json!({"environment": "production"})),
    /// ]);
    /// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Deploy everywhere").await?;
    /// // Staging ran at once; production waits for a person.
    /// assert_eq!(paused.state.tool_result("call_1"), Some(r#"{"environment":"staging"}"#));
    /// assert_eq!(paused.pending().len(), 1);
    /// assert_eq!(paused.pending()[0].call.id, "call_2");
    ///
    /// // Async: the future owns what it read from the input, and is awaited.
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |input, _| Ok(input))
    ///     .approval(|input: &Value, _ctx| {
    ///         let environment = input["environment"].as_str().unwrap_or_default().to_owned();
    ///         async move { environment != "staging" /* ask the change calendar here */ }
    ///     });
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "deploy", json!({"environment": "production"}))
    ///     .text("Deployed.");
    /// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Deploy production").await?;
    /// assert!(paused.is_paused());
    /// assert_eq!(paused.pending()[0].arguments, json!({"environment": "production"}));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// If `I` is not the tool's input type, building the agent fails and says so.
    pub fn approval<I, F, R, How>(self, decide: F) -> Self
    where
        I: Any,
        F: Fn(&I, &ToolContext) -> R + Send + Sync + 'static,
        R: Answer<bool, How>,
    {
        self.approval_by(move |input: &I, ctx: &ToolContext| {
            sealed::Answer::later(decide(input, ctx))
        })
    }

    fn approval_by<I: Any>(
        mut self,
        decide: impl Fn(&I, &ToolContext) -> Later<bool> + Send + Sync + 'static,
    ) -> Self {
        if TypeId::of::<I>() != self.input_type.id {
            self.definition_error = Some(format!(
                "the approval function takes `&{}` but the tool's input is `{}`",
                std::any::type_name::<I>(),
                self.input_type.name
            ));
            return self;
        }
        self.approval =
            Approval::When(Arc::new(
                move |parsed: &Parsed, ctx: &ToolContext| match parsed.input().downcast_ref::<I>() {
                    Some(input) => decide(input, ctx),
                    None => Later::Now(true),
                },
            ));
        self
    }

    /// Fails the call if it runs longer than this (the agent's default applies otherwise). At the
    /// deadline the call is abandoned at once, its future dropped, and its cancellation token fired.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let slow = Tool::new("slow", "Never finishes in time", json!({"type": "object"}), |_, _| async {
    ///     tokio::time::sleep(Duration::from_secs(60)).await;
    ///     Ok(json!("too late"))
    /// })
    /// .timeout(Duration::from_millis(20));
    /// let err = slow.invoke("{}", &ToolContext::detached()).await.unwrap_err();
    /// assert_eq!(err.to_string(), "tool `slow` timed out after 20 ms");
    /// # }
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// What to do when this tool's call fails; overrides the agent's policy.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, OnError, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let charge = Tool::new("charge", "Charge a card", json!({"type": "object"}),
    ///     |_, _| Err(AgentError::tool("card declined")))
    ///     .on_error(OnError::FailRun);
    /// let model = ScriptedModel::new().tool_call("call_1", "charge", json!({})).text("Charged.");
    /// let agent = Agent::builder("billing").model(model).tool(charge).build()?;
    /// let failed = agent.run("Charge the card").await.unwrap_err();
    /// assert_eq!(failed.error, AgentError::tool("card declined"));
    /// // The failed run's state keeps the call, with the error.
    /// assert!(failed.state.unwrap().steps()[0].is_error);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_error(mut self, policy: OnError) -> Self {
        self.on_error = Some(policy);
        self
    }

    /// The tool id the model calls.
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let status = Tool::new("get_status", "Get the current service status", json!({}), |_, _| Ok(json!("up")));
    /// assert_eq!(status.id(), "get_status");
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The description the model reads.
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let status = Tool::new("get_status", "Get the current service status", json!({}), |_, _| Ok(json!("up")));
    /// assert_eq!(status.description(), "Get the current service status");
    /// ```
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the arguments, as advertised to the model. A hand-written schema whose root
    /// has no `type` gets `"type": "object"` (tool arguments are always a JSON object).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let status = Tool::new("get_status", "Get the current service status",
    ///     json!({"properties": {"service": {"type": "string"}}}), |_, _| Ok(json!("up")));
    /// assert_eq!(status.parameters(), &json!({"type": "object", "properties": {"service": {"type": "string"}}}));
    /// ```
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Whether the tool has no executor (its result comes from outside the process).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// assert!(Tool::external("ticket_lookup", "Load a ticket", json!({"type": "object"})).is_external());
    /// assert!(!Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong"))).is_external());
    /// ```
    pub fn is_external(&self) -> bool {
        !self.executable
    }

    /// Runs the output validators in order; each may transform the value.
    ///
    /// A value nested deeper than the JSON parser reads back is refused first (it could not be sent
    /// or stored, and serialising it could overflow the stack). A panicking validator is the tool's
    /// panic.
    pub(crate) fn check_output(&self, mut value: Value) -> Result<Value, AgentError> {
        if too_deep(&value) {
            drop_deep(value);
            return Err(AgentError::InvalidOutput(TOO_DEEP.into()));
        }
        for check in &self.output_checks {
            value = self
                .guard(|| check(value))?
                .map_err(AgentError::InvalidOutput)?;
        }
        Ok(value)
    }

    /// An output supplied from outside for a call of this tool, as a resume takes it: through the
    /// tool's transform (`on_response_received`), then its output checks.
    pub(crate) fn check_supplied(&self, output: Value) -> Result<Value, AgentError> {
        let output = match &self.on_response_received {
            // A panicking transform refuses the output, like an error from it.
            Some(transform) => self
                .guard(|| transform(output))?
                .map_err(AgentError::InvalidOutput)?,
            None => output,
        };
        self.check_output(output)
    }

    /// Runs a user function of this tool (a validator, a hook); a panic is the tool's panic
    /// ([`AgentError::Panicked`], which the model reads as "failed unexpectedly").
    pub(crate) fn guard<T>(&self, f: impl FnOnce() -> T) -> Result<T, AgentError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
            match panic_error(payload) {
                AgentError::Panicked { message, .. } => AgentError::Panicked {
                    tool: self.id.clone(),
                    message,
                },
                other => other,
            }
        })
    }

    /// A call's arguments as JSON after the custom input validators, which may transform them: what
    /// interactive hooks, pending calls and next-turn functions see. Only for arguments that passed
    /// [`parse_call`](Self::parse_call).
    pub(crate) fn input_value(&self, arguments: &str) -> Value {
        let mut value = parse_arguments(arguments).unwrap_or(Value::Null);
        for check in &self.input_checks {
            match self.guard(|| check(value)) {
                Ok(Ok(checked)) => value = checked,
                _ => return Value::Null,
            }
        }
        value
    }

    /// Parses and validates a call's argument text. With custom input validators, the text goes
    /// through JSON (schema check, then each validator, which may transform it) before typed
    /// decoding; without, straight through the tool's parser.
    ///
    /// Bad arguments are [`AgentError::InvalidInput`]; a panicking input validator is the tool's
    /// panic.
    #[inline]
    pub(crate) fn parse_call(&self, arguments: &str) -> Result<Parsed, AgentError> {
        if self.strict {
            return self.parse_strict(arguments);
        }
        if self.input_checks.is_empty() {
            return (self.parse)(arguments, self.early()).map_err(invalid_input);
        }
        self.parse_checked(arguments)
    }

    /// A strict tool's arguments: a `null` the model sent for a property the schema does not
    /// require (strict mode makes every property required, and optional ones nullable) is read as
    /// left out, then the arguments are parsed and checked against the canonical schema as any.
    #[cold]
    fn parse_strict(&self, arguments: &str) -> Result<Parsed, AgentError> {
        // Text without a `null` has none to drop: no parse to a `Value` first.
        let has_null = arguments.contains("null");
        let cleaned = has_null
            .then(|| parse_arguments(arguments).ok())
            .flatten()
            .and_then(|mut value| {
                drop_strict_nulls(&self.parameters, &mut value).then(|| value.to_string())
            });
        let arguments = cleaned.as_deref().unwrap_or(arguments);
        if self.input_checks.is_empty() {
            return (self.parse)(arguments, self.early()).map_err(invalid_input);
        }
        self.parse_checked(arguments)
    }

    fn parse_checked(&self, arguments: &str) -> Result<Parsed, AgentError> {
        let mut value = parse_arguments(arguments).map_err(invalid_input)?;
        if let Some(validator) = &self.params_validator {
            validator.check(&value).map_err(invalid_input)?;
        }
        for check in &self.input_checks {
            value = self.guard(|| check(value))?.map_err(invalid_input)?;
        }
        (self.from_value)(value, self.early()).map_err(invalid_input)
    }

    /// Whether a parse may make the call's future at once (`Some(want_value)`): not when an
    /// approval function reads the decoded input first.
    #[inline]
    fn early(&self) -> Option<bool> {
        match self.approval {
            Approval::When(_) => None,
            _ => Some(self.wants_value()),
        }
    }

    /// Whether a call produces its output as a `Value` (the output checks read one) rather than
    /// as JSON text: asked when a call's future is made, early or at its start.
    #[inline]
    pub(crate) fn wants_value(&self) -> bool {
        !self.output_checks.is_empty()
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("id", &self.id)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .field("external", &!self.executable)
            .field("timeout", &self.timeout)
            .field("on_error", &self.on_error)
            .finish_non_exhaustive()
    }
}

/// Invalid arguments, with the reason bounded: it may quote a value of any size.
#[cold]
fn invalid_input(reason: String) -> AgentError {
    AgentError::InvalidInput(bounded(reason))
}

/// A hand-written parameter schema's root must describe an object: tool arguments are always a
/// JSON object. A root with no `type` gets `"type": "object"` (so arrays, `null` and scalars are
/// refused, and the model is told); a root that admits anything else is an error at `build()`.
fn object_root(mut parameters: Value) -> (Value, Option<String>) {
    let Some(root) = parameters.as_object_mut() else {
        let error = format!("the parameter schema must be an object schema, not `{parameters}`");
        return (parameters, Some(error));
    };
    match root.get("type") {
        None => {
            root.insert("type".into(), Value::String("object".into()));
            (parameters, None)
        }
        Some(Value::String(t)) if t == "object" => (parameters, None),
        Some(other) => {
            let error = format!(
                "the parameter schema's root must have `\"type\": \"object\"` (tool arguments are a JSON object), not `\"type\": {other}`"
            );
            (parameters, Some(error))
        }
    }
}

/// Tool ids are what providers accept: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn check_id(id: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tool id `{id}` must be 1 to 64 characters of a-z, A-Z, 0-9, `_` or `-`"
        ))
    }
}

/// Something an agent takes as a tool: a [`Tool`], or the name of a `#[tool]` function.
///
/// ```
/// use phaseo_agent::{IntoTool, Tool, tool};
/// use serde_json::json;
///
/// /// Add two numbers.
/// #[tool]
/// fn add(a: i64, b: i64) -> i64 {
///     a + b
/// }
///
/// fn tool_id(tool: impl IntoTool) -> String {
///     tool.into_tool().id().to_owned()
/// }
///
/// assert_eq!(tool_id(add), "add");
/// assert_eq!(tool_id(Tool::new("ping", "Ping", json!({}), |_, _| Ok(json!("pong")))), "ping");
/// ```
pub trait IntoTool {
    /// The tool.
    fn into_tool(self) -> Tool;
}

impl IntoTool for Tool {
    fn into_tool(self) -> Tool {
        self
    }
}

/// A tool whose input and output types are known where its calls are decided: the name of a
/// `#[tool]` function (its input is its typed input or its generated `…Args` struct, its output
/// the type it returns), or a `&Tool` (JSON both ways). [`PendingCall::input`](crate::PendingCall::input)
/// reads a pending call's arguments as `Input`, and
/// [`Decisions::typed_output`](crate::Decisions::typed_output) supplies an `Output`, checked
/// against the tool when the decision is made.
///
/// `#[tool]` implements it for each function it makes a tool. The methods of a `#[tools]` block
/// have no item of their own: read their input with
/// [`PendingCall::input_as`](crate::PendingCall::input_as), and pass their `&Tool` (from
/// [`Agent::tools`](crate::Agent::tools)) to `typed_output`.
///
/// ```
/// use phaseo_agent::{ToolTypes, tool};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct PageReceipt {
///     page_id: String,
/// }
///
/// /// Page the on-call person of a team.
/// #[tool(external)]
/// fn page_oncall(team: String, message: String) -> PageReceipt;
///
/// fn id_of(tool: impl ToolTypes) -> String {
///     tool.id().to_owned()
/// }
///
/// let args: <page_oncall as ToolTypes>::Input = PageOncallArgs { team: "db".into(), message: "disk full".into() };
/// assert_eq!(args.team, "db");
/// assert_eq!(id_of(page_oncall), "page_oncall");
/// assert_eq!(page_oncall.tool().id(), "page_oncall");
/// ```
pub trait ToolTypes {
    /// What the tool's calls take.
    type Input;
    /// What a call gives back (for an external tool: what is supplied from outside).
    type Output;

    /// The tool's id, the name its calls carry.
    fn id(&self) -> &str;

    /// The tool itself, whose output checks a supplied output goes through.
    fn tool(&self) -> Cow<'_, Tool>;
}

impl ToolTypes for &Tool {
    type Input = Value;
    type Output = Value;

    fn id(&self) -> &str {
        &self.id
    }

    fn tool(&self) -> Cow<'_, Tool> {
        Cow::Borrowed(self)
    }
}

/// Something that gives an agent tools: one tool (anything [`IntoTool`]), a `Vec` or array of
/// them, a tuple of different kinds (`(fetch_ticket, deploy, status_tool)`), or a type whose
/// `impl` block has `#[tools]` (its methods' tools), by value or in an `Arc`.
///
/// ```
/// use phaseo_agent::{Agent, ScriptedModel, Tool, tool};
/// use serde_json::json;
///
/// /// Add two numbers.
/// #[tool]
/// fn add(a: i64, b: i64) -> i64 {
///     a + b
/// }
///
/// /// Subtract a number from another.
/// #[tool]
/// fn sub(a: i64, b: i64) -> i64 {
///     a - b
/// }
///
/// let echo = Tool::new("echo", "Echo the input", json!({"type": "object"}), |input, _| Ok(input));
/// let agent = Agent::builder("calc")
///     .model(ScriptedModel::new().text("done"))
///     .tools((add, sub, echo))                  // no `.into_tool()`
///     .build()?;
/// assert_eq!(agent.tools().len(), 3);
/// # Ok::<(), phaseo_agent::AgentError>(())
/// ```
pub trait IntoTools {
    /// Adds the tools to `tools`, in order.
    fn add_to(self, tools: &mut Vec<Tool>);

    /// The tools, in order.
    fn into_tools(self) -> Vec<Tool>
    where
        Self: Sized,
    {
        let mut tools = Vec::new();
        self.add_to(&mut tools);
        tools
    }
}

impl<T: IntoTool> IntoTools for T {
    fn add_to(self, tools: &mut Vec<Tool>) {
        tools.push(self.into_tool());
    }
}

impl<T: IntoTools> IntoTools for Vec<T> {
    fn add_to(self, tools: &mut Vec<Tool>) {
        for item in self {
            item.add_to(tools);
        }
    }
}

impl<T: IntoTools, const N: usize> IntoTools for [T; N] {
    fn add_to(self, tools: &mut Vec<Tool>) {
        for item in self {
            item.add_to(tools);
        }
    }
}

impl<T: IntoTools> IntoTools for Option<T> {
    fn add_to(self, tools: &mut Vec<Tool>) {
        if let Some(item) = self {
            item.add_to(tools);
        }
    }
}

macro_rules! tuple_tools {
    ($($name:ident)+) => {
        impl<$($name: IntoTools),+> IntoTools for ($($name,)+) {
            #[allow(non_snake_case)]
            fn add_to(self, tools: &mut Vec<Tool>) {
                let ($($name,)+) = self;
                $($name.add_to(tools);)+
            }
        }
    };
}

tuple_tools!(A);
tuple_tools!(A B);
tuple_tools!(A B C);
tuple_tools!(A B C D);
tuple_tools!(A B C D E);
tuple_tools!(A B C D E F);
tuple_tools!(A B C D E F G);
tuple_tools!(A B C D E F G H);
tuple_tools!(A B C D E F G H I);
tuple_tools!(A B C D E F G H I J);
tuple_tools!(A B C D E F G H I J K);
tuple_tools!(A B C D E F G H I J K L);
tuple_tools!(A B C D E F G H I J K L M);
tuple_tools!(A B C D E F G H I J K L M N);
tuple_tools!(A B C D E F G H I J K L M N O);
tuple_tools!(A B C D E F G H I J K L M N O P);

/// A type whose `impl` block has `#[tools]`: the tools of its `#[tool]` methods, each calling
/// them on one shared value. Implemented by the macro; not meant to be implemented by hand.
#[doc(hidden)]
pub trait MethodTools: Send + Sync + 'static {
    /// The tools of the methods, on `this`.
    fn method_tools(this: &Arc<Self>, tools: &mut Vec<Tool>);
}

impl<T: MethodTools> IntoTools for Arc<T> {
    fn add_to(self, tools: &mut Vec<Tool>) {
        T::method_tools(&self, tools);
    }
}
