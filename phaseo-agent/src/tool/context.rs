//! [`ToolContext`]: what a running tool knows about its run, and how it reports back.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::decode::text::{MAX_STORED_DEPTH, TOO_DEEP_TO_STORE, bounded, deeper_than, drop_deep};
use crate::error::AgentError;
use crate::model::message::ToolCall;
use crate::schema::validate::CheckFn;
use crate::tool::resource::{Res, Resources};

/// Where a call's progress goes as it is published: the run's event stream, set by the runner when
/// someone listens. This stage does not know the run's events, so the runner hands it a function.
pub(crate) type ProgressSink = dyn Fn(&ToolCall, &Value) + Send + Sync;

/// What a tool call knows about the run it belongs to, and its channel back to it.
///
/// Cheap to clone (one `Arc`). It carries the run id, agent id, step index,
/// the application context and the tool call, plus a cancellation token that fires when the call
/// times out or the run is dropped.
///
/// In unit tests of a tool, make one with [`ToolContext::detached`]:
///
/// ```
/// use phaseo_agent::ToolContext;
/// use serde_json::json;
///
/// let ctx = ToolContext::detached().with_context(json!({"tenant": "acme"}));
/// assert_eq!(ctx.context()["tenant"], "acme");
/// assert_eq!(ctx.step_index(), 0);
/// ctx.emit_progress(json!({"stage": "indexing"})).unwrap();
/// assert_eq!(ctx.progress(), vec![json!({"stage": "indexing"})]);
/// ```
#[derive(Clone)]
pub struct ToolContext {
    inner: Arc<Scope>,
}

struct Scope {
    run_id: String,
    nonce: Option<u128>,
    agent_id: Arc<str>,
    step_index: usize,
    context: Arc<Value>,
    call: ToolCall,
    attempt: u32,
    /// Made when first asked for (by the tool, or by the runtime to fire it): most calls never
    /// look at it, and a token is an allocation of its own.
    cancel: OnceLock<CancellationToken>,
    progress: Option<Arc<ProgressSink>>,
    event_checks: Vec<Arc<CheckFn>>,
    resources: Resources,
    record: Mutex<Record>,
}

/// See [`ToolContext::cancel_on_drop`]. Unlike `CancellationToken::drop_guard`, it needs no token
/// until it fires.
pub(crate) struct CancelOnDrop<'a>(Option<&'a ToolContext>);

impl CancelOnDrop<'_> {
    /// The call ended: nothing to fire.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(ctx) = self.0 {
            ctx.cancel();
        }
    }
}

/// What a call reported while it ran: read by the runtime after the call.
#[derive(Default)]
pub(crate) struct Record {
    pub(crate) progress: Vec<Value>,
    pub(crate) new_context: Option<Value>,
    pub(crate) event_error: Option<AgentError>,
}

pub(crate) struct ScopeParts {
    pub(crate) run_id: String,
    /// The run's nonce ([`RunState`](crate::RunState)'s), the run's part of idempotency keys.
    pub(crate) nonce: Option<u128>,
    /// Shared with every call of the agent's runs: an `Arc`'s copy is not an allocation.
    pub(crate) agent_id: Arc<str>,
    pub(crate) step_index: usize,
    pub(crate) context: Arc<Value>,
    pub(crate) call: ToolCall,
    /// How many times a person chose to run this call again after its outcome was lost.
    pub(crate) attempt: u32,
    pub(crate) progress: Option<Arc<ProgressSink>>,
    pub(crate) event_checks: Vec<Arc<CheckFn>>,
    pub(crate) resources: Resources,
}

impl ToolContext {
    pub(crate) fn new(parts: ScopeParts) -> Self {
        ToolContext {
            inner: Arc::new(Scope {
                run_id: parts.run_id,
                nonce: parts.nonce,
                agent_id: parts.agent_id,
                step_index: parts.step_index,
                context: parts.context,
                call: parts.call,
                attempt: parts.attempt,
                cancel: OnceLock::new(),
                progress: parts.progress,
                event_checks: parts.event_checks,
                resources: parts.resources,
                record: Mutex::new(Record::default()),
            }),
        }
    }

    /// A context that belongs to no run: for calling a tool function directly in a unit test.
    /// Progress and context updates are recorded and can be read back with [`progress`](Self::progress)
    /// and [`context_update`](Self::context_update).
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use phaseo_agent::serde_json::{Value, json};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let greet = Tool::new("greet", "Greet someone", json!({"type": "object"}), |input, ctx| {
    ///     ctx.emit_progress("greeting")?;
    ///     Ok(json!(format!("Hello, {}!", input["name"].as_str().unwrap_or("you"))))
    /// });
    /// let ctx = ToolContext::detached();
    /// assert_eq!(greet.invoke(r#"{"name": "Ada"}"#, &ctx).await?, r#""Hello, Ada!""#);
    /// assert_eq!(ctx.progress(), [json!("greeting")]);
    /// // It belongs to no run: placeholder ids, the first turn, no context.
    /// assert_eq!((ctx.run_id(), ctx.agent_id(), ctx.step_index()), ("detached", "detached", 0));
    /// assert_eq!(ctx.context(), &Value::Null);
    /// # Ok(())
    /// # }
    /// ```
    pub fn detached() -> Self {
        Self::new(ScopeParts {
            run_id: "detached".into(),
            nonce: None,
            agent_id: "detached".into(),
            step_index: 0,
            context: Arc::new(Value::Null),
            call: ToolCall::raw("detached", "detached", "{}"),
            attempt: 0,
            progress: None,
            event_checks: Vec::new(),
            resources: Resources::new(),
        })
    }

    /// This context with another application context (and a fresh cancellation token and record):
    /// for a unit test's detached context.
    ///
    /// ```
    /// use phaseo_agent::ToolContext;
    /// use phaseo_agent::serde_json::json;
    ///
    /// let ctx = ToolContext::detached();
    /// ctx.emit_progress("started")?;
    /// let acme = ctx.clone().with_context(json!({"tenant": "acme"}));
    /// assert_eq!(acme.context()["tenant"], "acme");
    /// assert!(acme.progress().is_empty()); // a fresh record
    /// assert!(ctx.context().is_null()); // the original is unchanged
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn with_context(self, context: Value) -> Self {
        self.remade(Arc::new(context), self.inner.resources.clone())
    }

    /// This context's scope with another application context and resources, and a fresh
    /// cancellation token and record.
    fn remade(&self, context: Arc<Value>, resources: Resources) -> Self {
        let scope = &self.inner;
        Self::new(ScopeParts {
            run_id: scope.run_id.clone(),
            nonce: scope.nonce,
            agent_id: scope.agent_id.clone(),
            step_index: scope.step_index,
            context,
            call: scope.call.clone(),
            attempt: scope.attempt,
            progress: scope.progress.clone(),
            event_checks: scope.event_checks.clone(),
            resources,
        })
    }

    /// This context with one more resource (and a fresh cancellation token and record): for a unit
    /// test's detached context. A value of the same type is replaced.
    ///
    /// ```
    /// use phaseo_agent::ToolContext;
    ///
    /// struct Pool { size: usize }
    ///
    /// let ctx = ToolContext::detached().with_resource(Pool { size: 4 });
    /// assert_eq!(ctx.resource::<Pool>().unwrap().size, 4);
    /// ```
    pub fn with_resource<T: Send + Sync + 'static>(self, value: T) -> Self {
        let resources = self.inner.resources.clone().with(value);
        self.with_resources(resources)
    }

    /// This context with these resources in place of its own (and a fresh cancellation token and
    /// record): for a unit test's detached context.
    ///
    /// ```
    /// use phaseo_agent::{Resources, ToolContext};
    ///
    /// struct Pool { size: usize }
    /// struct Region(&'static str);
    ///
    /// let resources = Resources::new().with(Pool { size: 4 }).with(Region("eu-west-1"));
    /// let ctx = ToolContext::detached().with_resource(7_u32).with_resources(resources);
    /// assert_eq!(ctx.resource::<Pool>()?.size, 4);
    /// assert_eq!(ctx.resource::<Region>()?.0, "eu-west-1");
    /// assert!(ctx.resource::<u32>().is_err()); // replaced, not merged
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn with_resources(self, resources: Resources) -> Self {
        self.remade(self.inner.context.clone(), resources)
    }

    /// The resource of type `T` of the agent running this call (see
    /// [`AgentBuilder::resource`](crate::AgentBuilder::resource)).
    ///
    /// A tool that declares the resources it uses ([`Tool::needs_resource`](crate::Tool::needs_resource),
    /// or a `Res<T>` parameter of a `#[tool]` function) is refused when the agent is built without
    /// them, so for those this never fails during a run. Asking for a resource the tool did not
    /// declare fails with [`AgentError::Tool`] when the agent has none of that type.
    ///
    /// ```
    /// use phaseo_agent::{AgentError, ToolContext};
    ///
    /// struct Pool { size: usize }
    ///
    /// fn pool_size(ctx: &ToolContext) -> Result<usize, AgentError> {
    ///     Ok(ctx.resource::<Pool>()?.size)
    /// }
    ///
    /// assert_eq!(pool_size(&ToolContext::detached().with_resource(Pool { size: 4 })), Ok(4));
    /// let missing = pool_size(&ToolContext::detached()).unwrap_err();
    /// assert!(missing.to_string().contains("Pool"));
    /// ```
    pub fn resource<T: Send + Sync + 'static>(&self) -> Result<Res<T>, AgentError> {
        self.inner.resources.get::<T>().ok_or_else(|| {
            AgentError::tool(format!(
                "the agent has no resource of type `{}`; add it with `.resource(...)` on the agent's builder",
                std::any::type_name::<T>()
            ))
        })
    }

    /// The resources of the agent running this call.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// struct Pool { size: usize }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let probe = Tool::new("probe", "Check the resources", json!({"type": "object"}),
    ///     |_, ctx| Ok(json!([ctx.resources().len(), ctx.resources().contains::<Pool>()])));
    /// let model = ScriptedModel::new().tool_call("call_1", "probe", json!({})).text("All there.");
    /// let agent = Agent::builder("ops").model(model).tool(probe)
    ///     .resource(Pool { size: 4 })
    ///     .resource("eu-west-1".to_owned())
    ///     .build()?;
    /// let done = agent.run("Check").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some("[2,true]"));
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn resources(&self) -> &Resources {
        &self.inner.resources
    }

    /// The run id: the same for every call of the run, across pauses and resumes.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let which = Tool::new("which_run", "The run id", json!({"type": "object"}),
    ///     |_, ctx| Ok(json!(ctx.run_id())));
    /// let model = ScriptedModel::new().tool_call("call_1", "which_run", json!({})).text("Run 42.");
    /// let agent = Agent::builder("ops").model(model).tool(which).build()?;
    /// let done = agent.run("Which run is this?").run_id("run-42").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#""run-42""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// The id of the agent running this call.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let whoami = Tool::new("whoami", "The agent's id", json!({"type": "object"}),
    ///     |_, ctx| Ok(json!(ctx.agent_id())));
    /// let model = ScriptedModel::new().tool_call("call_1", "whoami", json!({})).text("I am support.");
    /// let agent = Agent::builder("support").model(model).tool(whoami).build()?;
    /// let done = agent.run("Who are you?").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#""support""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn agent_id(&self) -> &str {
        &self.inner.agent_id
    }

    /// A stable key for this call's side effect: the same for every run of this call that may
    /// repeat it, different for any other call. Hand it to an API that deduplicates requests
    /// (an `Idempotency-Key` header, a unique column) and a call that runs again after a crash
    /// cannot do its work twice.
    ///
    /// It is derived from a nonce drawn at random when the run was made (journaled with it, and
    /// kept by [`Runs::save`](crate::durable::Runs::save)), the run id, the call id and the
    /// attempt, so the same run id in another store, under another agent or after a prune gives
    /// other keys. A run recovered from its
    /// store re-runs an interrupted call of an idempotent tool ([`Tool::idempotent`]) under the
    /// same key; when a person chooses to run a call again whose outcome was lost, that is a new
    /// attempt and a new key. 32 hexadecimal digits.
    ///
    /// [`Tool::idempotent`]: crate::Tool::idempotent
    ///
    /// ```
    /// use phaseo_agent::ToolContext;
    ///
    /// let ctx = ToolContext::detached();
    /// let key = ctx.idempotency_key();
    /// assert_eq!(key.len(), 32);
    /// assert_eq!(key, ToolContext::detached().idempotency_key()); // the same call, the same key
    /// assert_eq!(ctx.attempt(), 0);
    /// ```
    pub fn idempotency_key(&self) -> String {
        let scope = &self.inner;
        idempotency_key(scope.nonce, &scope.run_id, &scope.call.id, scope.attempt)
    }

    /// How many times a person chose to run this call again after its outcome was lost in a
    /// crash (0 for a call's first run). See [`idempotency_key`](Self::idempotency_key).
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// The index of the model turn that made this call (0 for the first turn).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let turn = Tool::new("turn", "Which turn is this", json!({"type": "object"}),
    ///     |_, ctx| Ok(json!(ctx.step_index())));
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "turn", json!({}))
    ///     .tool_call("call_2", "turn", json!({}))
    ///     .text("Two turns.");
    /// let agent = Agent::builder("a").model(model).tool(turn).build()?;
    /// let done = agent.run("Count the turns").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some("0"));
    /// assert_eq!(done.state.tool_result("call_2"), Some("1"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn step_index(&self) -> usize {
        self.inner.step_index
    }

    /// The application context as it was when this turn's calls started (`Value::Null` if none was set).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let plan = Tool::new("plan", "The customer's plan", json!({"type": "object"}),
    ///     |_, ctx| Ok(ctx.context()["plan"].clone()));
    /// let model = ScriptedModel::new().tool_call("call_1", "plan", json!({})).text("You are on Pro.");
    /// let agent = Agent::builder("support").model(model).tool(plan).build()?;
    /// let done = agent.run("Which plan am I on?").context(json!({"customer": "acme", "plan": "pro"})).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#""pro""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn context(&self) -> &Value {
        &self.inner.context
    }

    /// The application context decoded into your own type. A context that does not fit the type is
    /// a tool error ([`AgentError::Tool`]), so `?` sends it back to the model like any other.
    ///
    /// ```
    /// use phaseo_agent::ToolContext;
    /// use phaseo_agent::serde_json::json;
    /// use serde::Deserialize;
    ///
    /// #[derive(Debug, Deserialize)]
    /// struct Customer { name: String, seats: u32 }
    ///
    /// let ctx = ToolContext::detached().with_context(json!({"name": "acme", "seats": 12}));
    /// let customer: Customer = ctx.context_as()?;
    /// assert_eq!((customer.name.as_str(), customer.seats), ("acme", 12));
    ///
    /// let err = ToolContext::detached().context_as::<Customer>().unwrap_err(); // no context: null
    /// assert!(err.to_string().starts_with("application context: "));
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn context_as<T: DeserializeOwned>(&self) -> Result<T, AgentError> {
        T::deserialize(self.context())
            .map_err(|e| AgentError::tool(format!("application context: {e}")))
    }

    /// The tool call being answered (id, tool id, raw arguments).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, ToolCall};
    /// use phaseo_agent::serde_json::{self, json};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let echo = Tool::new("echo", "Echo the call", json!({"type": "object"}), |_, ctx| {
    ///     let call = ctx.tool_call();
    ///     Ok(json!([call.id, call.name, call.arguments]))
    /// });
    /// let model = ScriptedModel::new()
    ///     .tool_calls([ToolCall::raw("call_7", "echo", r#" {"x": 1} "#)])
    ///     .text("Echoed.");
    /// let agent = Agent::builder("a").model(model).tool(echo).build()?;
    /// let done = agent.run("Echo").await?;
    /// let seen: Vec<String> = serde_json::from_str(done.state.tool_result("call_7").unwrap()).unwrap();
    /// assert_eq!(seen, ["call_7", "echo", r#" {"x": 1} "#]); // the arguments as the model sent them
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_call(&self) -> &ToolCall {
        &self.inner.call
    }

    /// A token that is cancelled when this call times out or its run is dropped. Pass it to your own
    /// async work (`token.cancelled().await`), or check [`is_cancelled`](Self::is_cancelled) in loops.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Tool, ToolContext};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// let export = Tool::new("export", "Export a report", json!({"type": "object"}), move |_, ctx| {
    ///     let tx = tx.clone();
    ///     async move {
    ///         // Work that outlives the call's future stops with the call.
    ///         let token = ctx.cancellation_token().clone();
    ///         tokio::spawn(async move {
    ///             token.cancelled().await;
    ///             tx.send("export stopped").ok();
    ///         });
    ///         tokio::time::sleep(Duration::from_secs(60)).await;
    ///         Ok(json!("exported"))
    ///     }
    /// })
    /// .timeout(Duration::from_millis(20));
    /// let err = export.invoke("{}", &ToolContext::detached()).await.unwrap_err();
    /// assert_eq!(err.to_string(), "tool `export` timed out after 20 ms");
    /// assert_eq!(rx.recv().await, Some("export stopped"));
    /// # }
    /// ```
    pub fn cancellation_token(&self) -> &CancellationToken {
        self.inner.cancel.get_or_init(CancellationToken::new)
    }

    /// The call, taken out of the context when this is its last handle (as it is once the call
    /// ended, unless the tool kept a clone), else copied.
    pub(crate) fn into_call(self) -> ToolCall {
        Arc::try_unwrap(self.inner).map_or_else(|scope| scope.call.clone(), |scope| scope.call)
    }

    /// Fires the call's cancellation token (made now if nobody asked for it yet, so that a later
    /// [`cancellation_token`](Self::cancellation_token) is already cancelled).
    pub(crate) fn cancel(&self) {
        self.cancellation_token().cancel();
    }

    /// A guard that fires the call's cancellation token when dropped, unless disarmed: held while
    /// the call runs, so that a call whose future is dropped midway is told.
    pub(crate) fn cancel_on_drop(&self) -> CancelOnDrop<'_> {
        CancelOnDrop(Some(self))
    }

    /// Whether the call has been cancelled (timed out, or its run dropped). A synchronous tool's
    /// thread is not stopped at its timeout: a long loop should check this and return.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Tool, ToolContext};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// let crunch = Tool::new("crunch", "Crunch numbers", json!({"type": "object"}), move |_, ctx| {
    ///     while !ctx.is_cancelled() {
    ///         std::thread::sleep(Duration::from_millis(1)); // a slice of blocking work
    ///     }
    ///     tx.send("stopped").ok();
    ///     Ok(json!("crunched"))
    /// })
    /// .timeout(Duration::from_millis(20));
    /// let ctx = ToolContext::detached();
    /// assert!(!ctx.is_cancelled());
    /// assert!(crunch.invoke("{}", &ctx).await.is_err()); // timed out
    /// assert!(ctx.is_cancelled());
    /// assert_eq!(rx.recv().await, Some("stopped")); // and the thread noticed
    /// # }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.inner
            .cancel
            .get()
            .is_some_and(CancellationToken::is_cancelled)
    }

    /// Publishes a preliminary result: a `tool.preliminary_result` event on the run's event stream,
    /// also kept on the call's step.
    ///
    /// When the tool has an event validator, a value it rejects is not published, this returns the
    /// error, and the call fails with it (under the tool's error policy) even if you ignore it.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::{Value, json};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let index = Tool::new("index", "Index the docs", json!({"type": "object"}), |_, ctx| {
    ///     for stage in ["scan", "embed"] {
    ///         ctx.emit_progress(json!({"stage": stage}))?;
    ///     }
    ///     Ok(json!({"indexed": 248}))
    /// });
    /// let model = ScriptedModel::new().tool_call("call_1", "index", json!({})).text("Indexed.");
    /// let agent = Agent::builder("a").model(model).tool(index).build()?;
    /// let events: Vec<Event> = agent.run("Index the docs").stream().collect().await;
    /// let progress: Vec<&Value> = events.iter().filter_map(|event| match event {
    ///     Event::PreliminaryResult { value, .. } => Some(value),
    ///     _ => None,
    /// }).collect();
    /// assert_eq!(progress, [&json!({"stage": "scan"}), &json!({"stage": "embed"})]);
    /// let Some(Event::Completed { state, .. }) = events.last() else { panic!("{events:?}") };
    /// assert_eq!(state.steps()[0].preliminary_results.len(), 2); // kept on the call's step
    /// # Ok(())
    /// # }
    /// ```
    pub fn emit_progress(&self, value: impl Serialize) -> Result<(), AgentError> {
        let mut value = serde_json::to_value(value)
            .map_err(|e| AgentError::InvalidEvent(format!("$: cannot serialise: {e}")))?;
        // Progress is stored on the run's steps: it must read back like the rest of the state.
        if deeper_than(&value, MAX_STORED_DEPTH) {
            drop_deep(value);
            let err = AgentError::InvalidEvent(TOO_DEEP_TO_STORE.into());
            self.record().event_error.get_or_insert_with(|| err.clone());
            return Err(err);
        }
        for check in &self.inner.event_checks {
            match check(value) {
                Ok(checked) => value = checked,
                Err(reason) => {
                    let err = AgentError::InvalidEvent(bounded(reason));
                    self.record().event_error.get_or_insert_with(|| err.clone());
                    return Err(err);
                }
            }
        }
        if let Some(publish) = &self.inner.progress {
            publish(&self.inner.call, &value);
        }
        self.record().progress.push(value);
        Ok(())
    }

    /// Replaces the application context for later turns (and later resumes: it is kept in `RunState`).
    ///
    /// Calls of the same turn keep seeing the context the turn started with; when several calls of one
    /// turn set it, the last in call order wins.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let login = Tool::new("login", "Log in", json!({"type": "object"}), |input, ctx| {
    ///     ctx.set_context(json!({"user": input["user"]}))?;
    ///     Ok(json!("logged in"))
    /// });
    /// let whoami = Tool::new("whoami", "Who is logged in", json!({"type": "object"}),
    ///     |_, ctx| Ok(ctx.context()["user"].clone()));
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "login", json!({"user": "ada"}))
    ///     .tool_call("call_2", "whoami", json!({}))
    ///     .text("You are ada.");
    /// let agent = Agent::builder("a").model(model).tool(login).tool(whoami).build()?;
    /// let done = agent.run("Log me in").await?;
    /// assert_eq!(done.state.tool_result("call_2"), Some(r#""ada""#)); // the next turn sees it
    /// assert_eq!(done.state.context(), &json!({"user": "ada"})); // and the state keeps it
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_context(&self, value: impl Serialize) -> Result<(), AgentError> {
        let value = serde_json::to_value(value)
            .map_err(|e| AgentError::tool(format!("context cannot be serialised: {e}")))?;
        // The context is stored in the run's state: it must read back.
        if deeper_than(&value, MAX_STORED_DEPTH) {
            drop_deep(value);
            return Err(AgentError::tool(format!(
                "the context is {}",
                &TOO_DEEP_TO_STORE[3..]
            )));
        }
        self.record().new_context = Some(value);
        Ok(())
    }

    /// The progress values published so far by this call, in order.
    ///
    /// ```
    /// use phaseo_agent::ToolContext;
    /// use phaseo_agent::serde_json::json;
    ///
    /// let ctx = ToolContext::detached();
    /// assert!(ctx.progress().is_empty());
    /// ctx.emit_progress(json!({"done": 1, "of": 3}))?;
    /// ctx.emit_progress("almost there")?;
    /// assert_eq!(ctx.progress(), [json!({"done": 1, "of": 3}), json!("almost there")]);
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn progress(&self) -> Vec<Value> {
        self.record().progress.clone()
    }

    /// The context this call set with [`set_context`](Self::set_context), if any.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let remember = Tool::new("remember", "Remember a note", json!({"type": "object"}), |input, ctx| {
    ///     ctx.set_context(json!({"note": input["note"]}))?;
    ///     Ok(json!("noted"))
    /// });
    /// let ctx = ToolContext::detached();
    /// assert_eq!(ctx.context_update(), None);
    /// remember.invoke(r#"{"note": "call back"}"#, &ctx).await?;
    /// assert_eq!(ctx.context_update(), Some(json!({"note": "call back"})));
    /// assert!(ctx.context().is_null()); // the context the call started with is unchanged
    /// # Ok(())
    /// # }
    /// ```
    pub fn context_update(&self) -> Option<Value> {
        self.record().new_context.clone()
    }

    pub(crate) fn take_record(&self) -> Record {
        std::mem::take(&mut *self.record())
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.inner
            .record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("run_id", &self.inner.run_id)
            .field("agent_id", &self.inner.agent_id)
            .field("step_index", &self.inner.step_index)
            .field("tool_call", &self.inner.call)
            .finish_non_exhaustive()
    }
}

/// A new run's nonce: 128 bits from the operating system's generator. Without one (it does not
/// fail on the platforms this crate runs on), a hash of the time, the process and a counter under
/// std's per-process random keys: unique, which is all a nonce needs to be.
pub(crate) fn draw_nonce() -> u128 {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_ok() {
        return u128::from_le_bytes(bytes);
    }
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = (
        std::time::SystemTime::now(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
    );
    let keys = std::collections::hash_map::RandomState::new();
    (u128::from(keys.hash_one(seed)) << 64) | u128::from(keys.hash_one((seed, 1u8)))
}

/// The key of one attempt of one call's side effect (see
/// [`ToolContext::idempotency_key`](crate::ToolContext::idempotency_key)): 32 hex digits.
pub(crate) fn idempotency_key(
    nonce: Option<u128>,
    run_id: &str,
    call_id: &str,
    attempt: u32,
) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    if let Some(nonce) = nonce {
        // Apart from the keys of a run without a nonce, whose first part is a length.
        hash.update(b"phaseo-agent idempotency key, nonce:");
        hash.update(nonce.to_le_bytes());
    }
    for part in [run_id.as_bytes(), call_id.as_bytes()] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.update(attempt.to_le_bytes());
    let digest = hash.finalize();
    let mut key = String::with_capacity(32);
    for b in &digest[..16] {
        use std::fmt::Write;
        let _ = write!(key, "{b:02x}");
    }
    key
}
