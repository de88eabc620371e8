//! What the closures a tool is built from return: an answer (the closure is synchronous) or a
//! future of one (it is async). One method takes either form: its `Fn` bound names the closure's
//! arguments, so their types are inferred as usual, and the return type `R` implements one of these
//! sealed traits for the marker `How` ([`Blocking`] or [`Awaited`]), which the compiler infers.
//!
//! - [`ToolReturn`]: what a [`Tool::new`](crate::Tool::new) executor returns;
//! - [`TypedReturn`]: what a [`Tool::typed`](crate::Tool::typed) function returns;
//! - [`Answer`]: what an approval function or an interactive hook returns.
//!
//! The traits hold, sealed, how each form is run: a synchronous executor on Tokio's blocking pool,
//! a synchronous approval function or hook in place, and a future awaited.

use std::fmt::Display;
use std::sync::Arc;

use futures::FutureExt;
use serde::Serialize;
use serde_json::Value;

use crate::decode::ToolInput;
use crate::error::AgentError;
use crate::tool::call::{Exec, Later, Produced, Start, blocking};
use crate::tool::context::ToolContext;
use crate::tool::erase;

/// The form of a closure that returns its answer: it is synchronous.
///
/// [`Tool::new`](crate::Tool::new) and [`Tool::typed`](crate::Tool::typed) run such a closure on
/// Tokio's blocking pool, so it may block (file I/O, a synchronous client, heavy computation)
/// without stalling the run's other calls. Approval functions and hooks are called in place: keep
/// them quick, or make them async.
///
/// You never name it: it is inferred from the closure's return type (see [`ToolReturn`]).
#[derive(Debug, Clone, Copy)]
pub struct Blocking;

/// The form of a closure that returns a future: it is async, and its future is awaited.
///
/// You never name it: it is inferred from the closure's return type (see [`ToolReturn`]).
#[derive(Debug, Clone, Copy)]
pub struct Awaited;

/// How each form is run. Public traits in a module no user can name: the public traits above are
/// implemented only here.
pub(crate) mod sealed {
    use std::fmt::Display;
    use std::sync::Arc;

    use serde::Serialize;
    use serde_json::Value;

    use crate::decode::ToolInput;
    use crate::tool::call::{Exec, Later, Start};
    use crate::tool::context::ToolContext;

    /// A `Tool::new` executor's return type, and how its calls start.
    pub trait ToolReturn<How>: Sized {
        /// The executor, as a tool's JSON executor.
        fn exec<F>(executor: F) -> Arc<Exec<Value>>
        where
            F: Fn(Value, ToolContext) -> Self + Send + Sync + 'static;
    }

    /// A `Tool::typed` function's return type, and how its calls start.
    pub trait TypedReturn<O, E, How>: Sized {
        /// The function, with the type of its future erased.
        fn start<I, F>(f: F) -> Box<Start<I>>
        where
            I: ToolInput,
            O: Serialize,
            E: Display + 'static,
            F: Fn(I, ToolContext) -> Self + Send + Sync + 'static;
    }

    /// An answer of type `T`, now or later.
    pub trait Answer<T, How> {
        /// The answer, or the future of it.
        fn later(self) -> Later<T>;
    }
}

/// What a [`Tool::new`](crate::Tool::new) executor returns: `Result<Value, AgentError>` (a
/// synchronous executor, run on Tokio's blocking pool: it may block), or a future of it (an async
/// executor, awaited: `async move { ... }`, `Send + 'static`).
///
/// Sealed: these two forms are all there is. The marker `How` ([`Blocking`] or [`Awaited`]) is
/// inferred from the return type.
///
/// ```
/// use phaseo_agent::{AgentError, Tool, ToolReturn};
/// use serde_json::{Value, json};
///
/// // A helper that takes an executor of either form, as `Tool::new` does.
/// fn echo_tool<R: ToolReturn<How>, How>(
///     executor: impl Fn(Value, phaseo_agent::ToolContext) -> R + Send + Sync + 'static,
/// ) -> Tool {
///     Tool::new("echo", "Echo the input", json!({"type": "object"}), executor)
/// }
///
/// let sync = echo_tool(|input, _ctx| Ok(input));
/// let awaited = echo_tool(|input, _ctx| async move { Ok::<_, AgentError>(input) });
/// assert_eq!((sync.id(), awaited.id()), ("echo", "echo"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not what a tool's executor returns",
    label = "return `Result<Value, AgentError>`, or a future of it",
    note = "a synchronous executor returns `Result<serde_json::Value, AgentError>` (it runs on Tokio's blocking pool); an async one returns a future of it (`async move {{ ... }}`) that is `Send + 'static`",
    note = "a closure whose body only panics has no return type to infer: name it, as in `|input, ctx| -> Result<Value, AgentError> {{ ... }}`"
)]
pub trait ToolReturn<How>: sealed::ToolReturn<How> {}

impl ToolReturn<Blocking> for Result<Value, AgentError> {}

impl sealed::ToolReturn<Blocking> for Result<Value, AgentError> {
    fn exec<F>(executor: F) -> Arc<Exec<Value>>
    where
        F: Fn(Value, ToolContext) -> Self + Send + Sync + 'static,
    {
        let executor = Arc::new(executor);
        Arc::new(move |input, ctx, _| {
            let executor = executor.clone();
            blocking(move || executor(input, ctx).map(Produced::Value))
        })
    }
}

impl<Fut> ToolReturn<Awaited> for Fut where
    Fut: Future<Output = Result<Value, AgentError>> + Send + 'static
{
}

impl<Fut> sealed::ToolReturn<Awaited> for Fut
where
    Fut: Future<Output = Result<Value, AgentError>> + Send + 'static,
{
    fn exec<F>(executor: F) -> Arc<Exec<Value>>
    where
        F: Fn(Value, ToolContext) -> Self + Send + Sync + 'static,
    {
        Arc::new(move |input, ctx, _| executor(input, ctx).map(|r| r.map(Produced::Value)).boxed())
    }
}

/// What a [`Tool::typed`](crate::Tool::typed) function returns: `Result<O, E>` (a synchronous
/// function, run on Tokio's blocking pool: it may block), or a future of it (an async function,
/// awaited; `Send + 'static`). `O` is the output, serialised for the model; `E` the error, whose
/// text the model reads.
///
/// Sealed: these two forms are all there is. The marker `How` ([`Blocking`] or [`Awaited`]) is
/// inferred from the return type, and `O` and `E` with it.
///
/// ```
/// use phaseo_agent::{Tool, ToolContext, ToolOutput, TypedReturn};
/// use std::fmt::Display;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Name { name: String }
///
/// // A helper that takes a function of either form, as `Tool::typed` does.
/// fn greeter<O: ToolOutput, E: Display + 'static, R: TypedReturn<O, E, How>, How>(
///     f: impl Fn(Name, ToolContext) -> R + Send + Sync + 'static,
/// ) -> Tool {
///     Tool::typed("greet", "Greet someone", f)
/// }
///
/// let sync = greeter(|input, _ctx| Ok::<_, String>(format!("Hello, {}!", input.name)));
/// let awaited = greeter(|input, _ctx| async move { Ok::<_, String>(input.name.len()) });
/// assert_eq!((sync.id(), awaited.id()), ("greet", "greet"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not what a typed tool's function returns",
    label = "return `Result<O, E>`, or a future of it",
    note = "a synchronous function returns `Result<O, E>` (it runs on Tokio's blocking pool); an async one returns a future of it (`async move {{ ... }}`) that is `Send + 'static`; `O: Serialize` is the output, `E: Display` the error",
    note = "a closure whose body only panics has no return type to infer: name it, as in `|input: I, ctx| -> Result<O, E> {{ ... }}`"
)]
pub trait TypedReturn<O, E, How>: sealed::TypedReturn<O, E, How> {}

impl<O, E> TypedReturn<O, E, Blocking> for Result<O, E> {}

impl<O, E> sealed::TypedReturn<O, E, Blocking> for Result<O, E> {
    #[inline]
    fn start<I, F>(f: F) -> Box<Start<I>>
    where
        I: ToolInput,
        O: Serialize,
        E: Display + 'static,
        F: Fn(I, ToolContext) -> Self + Send + Sync + 'static,
    {
        erase::blocking_with_context(f)
    }
}

impl<O, E, Fut> TypedReturn<O, E, Awaited> for Fut where
    Fut: Future<Output = Result<O, E>> + Send + 'static
{
}

impl<O, E, Fut> sealed::TypedReturn<O, E, Awaited> for Fut
where
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    #[inline]
    fn start<I, F>(f: F) -> Box<Start<I>>
    where
        I: ToolInput,
        O: Serialize,
        E: Display + 'static,
        F: Fn(I, ToolContext) -> Self + Send + Sync + 'static,
    {
        erase::with_context(f)
    }
}

/// What an approval function or an interactive hook returns: its answer `T` (a synchronous
/// function, called in place: keep it quick), or a future of it (an async function, awaited:
/// for a check that does I/O; `Send + 'static`, so it owns what it reads from its arguments).
///
/// `T` is `bool` for approval functions ([`Tool::approval`](crate::Tool::approval),
/// [`AgentBuilder::approval`](crate::AgentBuilder::approval),
/// [`AgentBuilder::approval_policy`](crate::AgentBuilder::approval_policy)) and `Option<Value>`
/// for [`Tool::on_tool_called`](crate::Tool::on_tool_called). Sealed: these two forms are all there
/// is. The marker `How` ([`Blocking`] or [`Awaited`]) is inferred from the return type.
///
/// ```
/// use phaseo_agent::{Answer, Tool, ToolContext};
/// use serde_json::{Value, json};
///
/// // A helper that takes an approval function of either form, as `Tool::approval` does.
/// fn gated<R: Answer<bool, How>, How>(
///     decide: impl Fn(&Value, &ToolContext) -> R + Send + Sync + 'static,
/// ) -> Tool {
///     Tool::new("deploy", "Deploy", json!({"type": "object"}), |input, _| Ok(input)).approval(decide)
/// }
///
/// let sync = gated(|input, _ctx| input["environment"] == "production");
/// let awaited = gated(|input, _ctx| {
///     let production = input["environment"] == "production";
///     async move { production }
/// });
/// assert_eq!((sync.id(), awaited.id()), ("deploy", "deploy"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an answer of type `{T}`",
    label = "return `{T}`, or a future of it",
    note = "a synchronous function returns `{T}` (it is called in place); an async one returns a future of it (`async move {{ ... }}`) that is `Send + 'static`: read what it needs from its arguments before the `async move` block",
    note = "a closure whose body only panics has no return type to infer: name it, as in `|input, ctx| -> {T} {{ ... }}`"
)]
pub trait Answer<T, How>: sealed::Answer<T, How> {}

impl<T> Answer<T, Blocking> for T {}

impl<T> sealed::Answer<T, Blocking> for T {
    #[inline]
    fn later(self) -> Later<T> {
        Later::Now(self)
    }
}

impl<T, Fut> Answer<T, Awaited> for Fut where Fut: Future<Output = T> + Send + 'static {}

impl<T, Fut> sealed::Answer<T, Awaited> for Fut
where
    Fut: Future<Output = T> + Send + 'static,
{
    #[inline]
    fn later(self) -> Later<T> {
        Later::Wait(Box::pin(self))
    }
}
