//! One call on its way through a tool: [`Parsed`] input ready to start, the future it becomes, and
//! what it produces. The plumbing under every kind of tool, with no `Tool` in it.

use std::any::Any;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::AgentError;
use crate::tool::context::ToolContext;

/// A call whose arguments passed parsing and validation, ready to start: its input (a `Value` for
/// JSON tools, the input type for typed ones) and what runs it.
///
/// One allocation per call: for a typed async tool the box also holds the room the tool's future
/// runs in (`tool::typed`), so starting the call allocates nothing more.
pub(crate) struct Parsed(pub(crate) Box<dyn Prepared>);

impl Parsed {
    /// The input, for approval functions to downcast.
    pub(crate) fn input(&self) -> &dyn Any {
        self.0.input()
    }

    /// Starts the call; `runs` is the tool's typed function, if it has one (`Tool::runs`).
    pub(crate) fn start(
        self,
        runs: Option<&(dyn Any + Send + Sync)>,
        ctx: &ToolContext,
        want_value: bool,
    ) -> CallFuture {
        self.0.start(runs, ctx, want_value)
    }
}

/// What [`Parsed`] holds.
pub(crate) trait Prepared: Send {
    fn input(&self) -> &dyn Any;
    /// `want_value`: produce a `Value` (something checks the output) rather than JSON text.
    fn start(
        self: Box<Self>,
        runs: Option<&(dyn Any + Send + Sync)>,
        ctx: &ToolContext,
        want_value: bool,
    ) -> CallFuture;
}

pub(crate) type CallFuture = BoxFuture<'static, Result<Produced, AgentError>>;

/// The type a tool's parsed input has (checked against an approval function's).
pub(crate) type InputType = crate::tool::resource::TypeKey;

/// An executor that starts from an input of type `I`.
pub(crate) type Exec<I> = dyn Fn(I, ToolContext, bool) -> CallFuture + Send + Sync;

/// An input and the executor it goes to (none for an external tool): JSON tools and blocking typed
/// tools, whose executors make their own future.
pub(crate) struct Eager<I> {
    pub(crate) input: I,
    pub(crate) exec: Option<Arc<Exec<I>>>,
}

impl<I: Any + Send> Prepared for Eager<I> {
    fn input(&self) -> &dyn Any {
        &self.input
    }

    fn start(
        self: Box<Self>,
        _runs: Option<&(dyn Any + Send + Sync)>,
        ctx: &ToolContext,
        want_value: bool,
    ) -> CallFuture {
        let Eager { input, exec } = *self;
        match exec {
            Some(exec) => exec(input, ctx.clone(), want_value),
            None => {
                futures::future::ready(Err(AgentError::tool("this tool has no executor"))).boxed()
            }
        }
    }
}

/// What an executor produced: a value, or (for typed tools, when nothing needs the value) its JSON text.
pub(crate) enum Produced {
    Value(Value),
    Text(String),
}

/// An answer a user function gives at once, or after some I/O (an async approval function or
/// hook). The sync kind costs no allocation; a panic in either counts as `on_panic`.
pub(crate) enum Later<T> {
    Now(T),
    Wait(BoxFuture<'static, T>),
}

impl<T> Later<T> {
    /// Runs the function (`make`) under a panic guard: a panic answers `on_panic`. What it borrows
    /// is released here, before anything is awaited.
    pub(crate) fn run(make: impl FnOnce() -> Later<T>, on_panic: T) -> Later<T> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(make)).unwrap_or(Later::Now(on_panic))
    }

    /// The answer; a panic inside the future answers `on_panic`.
    pub(crate) async fn get(self, on_panic: T) -> T {
        match self {
            Later::Now(answer) => answer,
            Later::Wait(future) => std::panic::AssertUnwindSafe(future)
                .catch_unwind()
                .await
                .unwrap_or(on_panic),
        }
    }
}

/// Runs synchronous tool code on Tokio's blocking pool so it cannot stall the async workers; a panic
/// comes back as an error. Outside a Tokio runtime it runs inline.
pub(crate) fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AgentError> + Send + 'static,
) -> BoxFuture<'static, Result<T, AgentError>> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle
            .spawn_blocking(work)
            .map(|joined| match joined {
                Ok(result) => result,
                Err(e) if e.is_panic() => Err(panic_error(e.into_panic())),
                Err(_) => Err(AgentError::tool("the tool's thread was cancelled")),
            })
            .boxed(),
        Err(_) => futures::future::ready(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
                .unwrap_or_else(|p| Err(panic_error(p))),
        )
        .boxed(),
    }
}

/// A panic payload as an error; the tool id is filled in by the runtime.
pub(crate) fn panic_error(payload: Box<dyn Any + Send>) -> AgentError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned());
    AgentError::Panicked {
        tool: String::new(),
        message,
    }
}
