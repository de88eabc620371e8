//! [`ToolContext`]: what a running tool knows about its run, and how it reports back.

use std::sync::{Arc, Mutex, PoisonError};

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
    agent_id: String,
    step_index: usize,
    context: Arc<Value>,
    call: ToolCall,
    cancel: CancellationToken,
    progress: Option<Arc<ProgressSink>>,
    event_checks: Vec<Arc<CheckFn>>,
    resources: Resources,
    record: Mutex<Record>,
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
    pub(crate) agent_id: String,
    pub(crate) step_index: usize,
    pub(crate) context: Arc<Value>,
    pub(crate) call: ToolCall,
    pub(crate) progress: Option<Arc<ProgressSink>>,
    pub(crate) event_checks: Vec<Arc<CheckFn>>,
    pub(crate) resources: Resources,
}

impl ToolContext {
    pub(crate) fn new(parts: ScopeParts) -> Self {
        ToolContext {
            inner: Arc::new(Scope {
                run_id: parts.run_id,
                agent_id: parts.agent_id,
                step_index: parts.step_index,
                context: parts.context,
                call: parts.call,
                cancel: CancellationToken::new(),
                progress: parts.progress,
                event_checks: parts.event_checks,
                resources: parts.resources,
                record: Mutex::new(Record::default()),
            }),
        }
    }

    /// A context that belongs to no run: for calling a tool function directly in a unit test.
    /// Progress and context updates are recorded and can be read back with [`progress`](Self::progress)
    /// and [`new_context`](Self::new_context).
    pub fn detached() -> Self {
        Self::new(ScopeParts {
            run_id: "detached".into(),
            agent_id: "detached".into(),
            step_index: 0,
            context: Arc::new(Value::Null),
            call: ToolCall::raw("detached", "detached", "{}"),
            progress: None,
            event_checks: Vec::new(),
            resources: Resources::new(),
        })
    }

    /// This context with another application context (and a fresh cancellation token and record):
    /// for a unit test's detached context.
    pub fn with_context(self, context: Value) -> Self {
        let scope = &self.inner;
        Self::new(ScopeParts {
            run_id: scope.run_id.clone(),
            agent_id: scope.agent_id.clone(),
            step_index: scope.step_index,
            context: Arc::new(context),
            call: scope.call.clone(),
            progress: scope.progress.clone(),
            event_checks: scope.event_checks.clone(),
            resources: scope.resources.clone(),
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
    pub fn with_resources(self, resources: Resources) -> Self {
        let scope = &self.inner;
        Self::new(ScopeParts {
            run_id: scope.run_id.clone(),
            agent_id: scope.agent_id.clone(),
            step_index: scope.step_index,
            context: scope.context.clone(),
            call: scope.call.clone(),
            progress: scope.progress.clone(),
            event_checks: scope.event_checks.clone(),
            resources,
        })
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
    pub fn resources(&self) -> &Resources {
        &self.inner.resources
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// The agent id.
    pub fn agent_id(&self) -> &str {
        &self.inner.agent_id
    }

    /// The index of the model turn that made this call (0 for the first turn).
    pub fn step_index(&self) -> usize {
        self.inner.step_index
    }

    /// The application context as it was when this turn's calls started (`Value::Null` if none was set).
    pub fn context(&self) -> &Value {
        &self.inner.context
    }

    /// The application context decoded into your own type.
    pub fn context_as<T: DeserializeOwned>(&self) -> Result<T, AgentError> {
        T::deserialize(self.context())
            .map_err(|e| AgentError::tool(format!("application context: {e}")))
    }

    /// The tool call being answered (id, tool id, raw arguments).
    pub fn tool_call(&self) -> &ToolCall {
        &self.inner.call
    }

    /// A token that is cancelled when this call times out or its run is dropped. Pass it to your own
    /// async work (`token.cancelled().await`), or check [`is_cancelled`](Self::is_cancelled) in loops.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Whether the call has been cancelled (timed out, or its run dropped).
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Publishes a preliminary result: a `tool.preliminary_result` event on the run's event stream,
    /// also kept on the call's step.
    ///
    /// When the tool has an event validator, a value it rejects is not published, this returns the
    /// error, and the call fails with it (under the tool's error policy) even if you ignore it.
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

    /// The progress values published so far by this call.
    pub fn progress(&self) -> Vec<Value> {
        self.record().progress.clone()
    }

    /// The context this call set with [`set_context`](Self::set_context), if any.
    pub fn new_context(&self) -> Option<Value> {
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
