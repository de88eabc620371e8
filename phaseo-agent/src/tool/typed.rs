//! Typed tools: input `I: Deserialize + JsonSchema`, output `O: Serialize`, error `E: Display`.
//! This is what `#[tool]` expands to, and it is usable without the macro.

use std::fmt::Display;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::decode::{self, ToolInput};
use crate::error::AgentError;
use crate::schema;
use crate::schema::validate::Validator;
use crate::tool::call::{CallFuture, Eager, Exec, InputType, Parsed, Prepared, Produced, blocking};
use crate::tool::context::ToolContext;
use crate::tool::definition::{FromValueFn, ParseFn, Tool};

/// The output of a typed tool: serialised to JSON for the model.
///
/// Every `Serialize + Send + 'static` type is one: derive `Serialize` for your own.
///
/// ```
/// use phaseo_agent::{Tool, ToolContext, ToolOutput};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Lookup { ticket_id: String }
///
/// #[derive(serde::Serialize)]
/// struct Ticket { id: String, open: bool }
///
/// fn is_output<O: ToolOutput>(_: &O) {}
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// is_output(&Ticket { id: "T-1".into(), open: true });
/// let lookup = Tool::typed_without_context("lookup", "Load a ticket", |input: Lookup| async move {
///     Ok::<_, String>(Ticket { id: input.ticket_id, open: true })
/// });
/// let result = lookup.invoke(r#"{"ticket_id": "T-7"}"#, &ToolContext::detached()).await?;
/// assert_eq!(result, r#"{"id":"T-7","open":true}"#);
/// # Ok(())
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool output: derive `Serialize` for it",
    label = "this type is not a tool output",
    note = "add `#[derive(serde::Serialize)]` to `{Self}`"
)]
pub trait ToolOutput: Serialize + Send + 'static {}
impl<T: Serialize + Send + 'static> ToolOutput for T {}

impl Tool {
    /// A typed tool from an async function of its input and context.
    ///
    /// The parameter schema is generated from `I` once, here, and normalised (see
    /// [`schema`](crate::schema)). Arguments are validated against it and decoded into `I` before
    /// your code runs; the output is serialised; an `Err(e)` reaches the model as `{"error": e}`.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Add { a: i64, b: i64 }
    ///
    /// #[derive(Serialize)]
    /// struct Sum { sum: i64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let add = Tool::typed("add", "Add two numbers", |input: Add, _ctx: ToolContext| async move {
    ///     Ok::<_, std::convert::Infallible>(Sum { sum: input.a + input.b })
    /// });
    /// assert_eq!(add.parameters()["required"], serde_json::json!(["a", "b"]));
    ///
    /// let ctx = ToolContext::detached();
    /// assert_eq!(add.invoke(r#"{"a": 2, "b": 3}"#, &ctx).await?, r#"{"sum":5}"#);
    /// let err = add.invoke(r#"{"a": 2}"#, &ctx).await.unwrap_err();
    /// assert_eq!(err.to_string(), r#"Invalid tool input: $: "b" is a required property"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn typed<I, O, E, F, Fut>(
        id: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        I: ToolInput,
        O: ToolOutput,
        E: Display,
        F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        Self::typed_async::<I, _>(
            id.into(),
            description.into(),
            Borrowing(move |input, ctx: &ToolContext| f(input, ctx.clone())),
        )
    }

    /// [`Tool::typed`] for a function that does not take the context: each call skips handing one
    /// over (a reference count taken and dropped per call). `#[tool]` uses it for functions without a
    /// `&ToolContext` parameter.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Add { a: i64, b: i64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let add = Tool::typed_without_context("add", "Add two numbers", |input: Add| async move {
    ///     Ok::<_, std::convert::Infallible>(input.a + input.b)
    /// });
    /// assert_eq!(add.invoke(r#"{"a": 2, "b": 3}"#, &ToolContext::detached()).await?, "5");
    /// # Ok(())
    /// # }
    /// ```
    pub fn typed_without_context<I, O, E, F, Fut>(
        id: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        I: ToolInput,
        O: ToolOutput,
        E: Display,
        F: Fn(I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        Self::typed_async::<I, _>(
            id.into(),
            description.into(),
            Borrowing(move |input, _: &ToolContext| f(input)),
        )
    }

    /// [`Tool::typed_without_context`] for a function whose future yields the output itself (what
    /// `#[tool]` uses for an async function that does not return a `Result`).
    pub(crate) fn typed_infallible<I, O, F, Fut>(id: String, description: String, f: F) -> Self
    where
        I: ToolInput,
        O: ToolOutput,
        F: Fn(I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        Self::typed_async::<I, _>(
            id,
            description,
            BorrowingInfallible(move |input, _: &ToolContext| f(input)),
        )
    }

    /// A typed tool from a function of its input and a borrowed context that returns a future
    /// owning what it needs (what `#[tool]` uses for resources and methods: the function takes
    /// them from the context, or clones its receiver, before the future starts).
    pub(crate) fn typed_borrowing<I, O, E, F, Fut>(id: String, description: String, f: F) -> Self
    where
        I: ToolInput,
        O: ToolOutput,
        E: Display,
        F: Fn(I, &ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        Self::typed_async::<I, _>(id, description, Borrowing(f))
    }

    /// [`Tool::typed_borrowing`] for a function whose future yields the output itself.
    pub(crate) fn typed_borrowing_infallible<I, O, F, Fut>(
        id: String,
        description: String,
        f: F,
    ) -> Self
    where
        I: ToolInput,
        O: ToolOutput,
        F: Fn(I, &ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        Self::typed_async::<I, _>(id, description, BorrowingInfallible(f))
    }

    fn typed_async<I: ToolInput, C: TypedFn<I>>(id: String, description: String, call: C) -> Self {
        let mut tool = Self::typed_parts::<I>(id, description, true, |input| {
            Parsed(Box::new(TypedCall::<I, C, C::Future>::Ready {
                input: Some(input),
                runs: PhantomData,
            }))
        });
        tool.runs = Some(Arc::new(call));
        tool
    }

    /// A typed tool from a synchronous function. It runs on Tokio's blocking thread pool, so it may
    /// block (file or network I/O, heavy computation) without stalling the run's other tools.
    ///
    /// ```
    /// use phaseo_agent::{AgentError, Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Path { path: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let size = Tool::typed_blocking("file_size", "Size of a file in bytes", |input: Path, _ctx: ToolContext| {
    ///     std::fs::metadata(&input.path).map(|m| m.len())
    /// });
    /// let path = std::env::temp_dir().join("phaseo-agent-typed-blocking-example.txt");
    /// std::fs::write(&path, "hello").unwrap();
    /// let arguments = json!({"path": path}).to_string();
    /// assert_eq!(size.invoke(&arguments, &ToolContext::detached()).await?, "5");
    /// # std::fs::remove_file(&path).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub fn typed_blocking<I, O, E, F>(
        id: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        I: ToolInput,
        O: ToolOutput,
        E: Display,
        F: Fn(I, ToolContext) -> Result<O, E> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let exec: Arc<Exec<I>> = Arc::new(move |input, ctx, want_value| {
            let f = f.clone();
            blocking(move || produce(f(input, ctx), want_value))
        });
        Self::typed_parts::<I>(id.into(), description.into(), true, move |input| {
            Parsed(Box::new(Eager {
                input,
                exec: Some(exec.clone()),
            }))
        })
    }

    /// A typed tool with no executor: calls pause with pending kind `external_output`, and the output
    /// a person or system supplies must decode as `O` (otherwise `Invalid tool output: ...`).
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Lookup { ticket_id: String }
    /// #[derive(serde::Deserialize)]
    /// struct Ticket { title: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let lookup = Tool::external_typed::<Lookup, Ticket>("ticket_lookup", "Load one support ticket");
    /// assert!(lookup.is_external());
    /// let model = ScriptedModel::new().tool_call("call_1", "ticket_lookup", json!({"ticket_id": "T-7"})).text("Found it.");
    /// let agent = Agent::builder("support").model(model).tool(lookup).build()?;
    /// let paused = agent.run("Load T-7").await?;
    ///
    /// // An output that does not decode as `Ticket` is refused, and nothing changes.
    /// let wrong = Decisions::new().output("call_1", json!({"name": "Printer"}));
    /// let err = agent.resume(&paused.state, wrong).await.unwrap_err();
    /// assert_eq!(err.to_string(), "Invalid tool output: $: missing field `title`");
    /// let right = Decisions::new().output("call_1", json!({"title": "Printer on fire"}));
    /// assert_eq!(agent.resume(&paused.state, right).await?.output(), Some("Found it."));
    /// # Ok(())
    /// # }
    /// ```
    pub fn external_typed<I, O>(id: impl Into<String>, description: impl Into<String>) -> Self
    where
        I: ToolInput,
        O: DeserializeOwned + 'static,
    {
        let mut tool = Self::typed_parts::<I>(id.into(), description.into(), false, |input: I| {
            Parsed(Box::new(Eager { input, exec: None }))
        });
        tool.output_checks.push(Arc::new(|value: Value| {
            O::deserialize(&value)
                .map(|_| value)
                .map_err(|e| format!("$: {e}"))
        }));
        tool
    }

    /// The parts every typed tool shares: the schema generated from `I` (once), the decoder compiled
    /// from it (once), and `wrap`, which makes a decoded input a call ready to start. Only the
    /// schema's generation and [`TypedParse`] depend on `I`; the rest is
    /// [`Tool::typed_from_parts`], compiled once.
    fn typed_parts<I: ToolInput>(
        id: String,
        description: String,
        executable: bool,
        wrap: impl Fn(I) -> Parsed + Send + Sync + 'static,
    ) -> Self {
        let (parameters, unit_like) = schema::generate::parameters_for::<I>();
        let parse = match decode::Decoder::<I>::with_unit_like(&parameters, unit_like) {
            Ok(decoder) => {
                let validator = decoder.validator().clone();
                let parse: Arc<dyn ParseArgs> = Arc::new(TypedParse { decoder, wrap });
                Ok((parse, validator))
            }
            Err(e) => Err(e),
        };
        let input = (InputType::of::<I>(), std::any::type_name::<I>());
        Self::typed_from_parts(id, description, parameters, input, parse, executable)
    }

    /// The typed tool from its parts, or (when the decoder did not compile) a tool whose calls are
    /// refused and whose definition error says why.
    fn typed_from_parts(
        id: String,
        description: String,
        parameters: Value,
        (input_type, type_name): (InputType, &str),
        parse: Result<(Arc<dyn ParseArgs>, Validator), String>,
        executable: bool,
    ) -> Self {
        let (parse, from_value, validator, error): (Arc<ParseFn>, Arc<FromValueFn>, _, _) =
            match parse {
                Ok((parse, validator)) => {
                    let by_value = parse.clone();
                    (
                        Arc::new(move |args: &str| parse.text(args)),
                        Arc::new(move |value: Value| by_value.value(value)),
                        Some(validator),
                        None,
                    )
                }
                Err(e) => {
                    let unusable = "$: the tool is unusable";
                    (
                        Arc::new(move |_: &str| Err(unusable.to_owned())),
                        Arc::new(move |_: Value| Err(unusable.to_owned())),
                        None,
                        Some(e),
                    )
                }
            };
        let mut tool = Tool::from_parts(
            id,
            description,
            parameters,
            input_type,
            parse,
            from_value,
            executable,
        );
        tool.params_validator = validator;
        tool.definition_error = tool
            .definition_error
            .or(error)
            .or_else(|| object_input(type_name, &tool.parameters));
        tool
    }
}

/// A typed tool's argument parsing, without its type: what the tool's parse functions call.
trait ParseArgs: Send + Sync {
    /// Decodes the argument text into a call ready to start.
    fn text(&self, args: &str) -> Result<Parsed, String>;
    /// Decodes a value that passed the schema into a call ready to start.
    fn value(&self, value: Value) -> Result<Parsed, String>;
}

/// The decoder of `I`, and what makes a decoded input a call.
struct TypedParse<I, W> {
    decoder: decode::Decoder<I>,
    wrap: W,
}

impl<I: ToolInput, W: Fn(I) -> Parsed + Send + Sync> ParseArgs for TypedParse<I, W> {
    fn text(&self, args: &str) -> Result<Parsed, String> {
        self.decoder.decode(args).map(&self.wrap)
    }

    fn value(&self, value: Value) -> Result<Parsed, String> {
        self.decoder.decode_value(&value).map(&self.wrap)
    }
}

/// Tool arguments are a JSON object: a typed input must describe one.
fn object_input(type_name: &str, parameters: &Value) -> Option<String> {
    match parameters.get("type") {
        Some(Value::String(t)) if t == "object" => None,
        other => Some(format!(
            "the input type `{type_name}` is not a JSON object (its schema's type is {}): a typed input must be a struct, a map or an enum of structs; wrap other types in a struct, or take plain arguments with `#[tool]`",
            other.map_or_else(|| "not set".to_owned(), Value::to_string)
        )),
    }
}

#[inline]
fn produce<O: Serialize, E: Display>(
    result: Result<O, E>,
    want_value: bool,
) -> Result<Produced, AgentError> {
    let output = result.map_err(AgentError::tool)?;
    let cannot =
        |e: serde_json::Error| AgentError::InvalidOutput(format!("$: cannot serialise: {e}"));
    if want_value {
        serde_json::to_value(&output)
            .map(Produced::Value)
            .map_err(cannot)
    } else {
        serde_json::to_string(&output)
            .map(Produced::Text)
            .map_err(cannot)
    }
}

/// How a typed async tool's function is called: on its input and the call's context, its future
/// yielding a `Result` or the output itself. Every typed async constructor wraps its function in
/// one of the two, so each input type has one call path.
trait TypedFn<I>: Send + Sync + 'static {
    type Output: ToolOutput;
    type Error: Display;
    type Future: Future<Output = Result<Self::Output, Self::Error>> + Send + 'static;

    fn call(&self, input: I, ctx: &ToolContext) -> Self::Future;
}

/// A function of the input and the borrowed context.
struct Borrowing<F>(F);

impl<I, O, E, F, Fut> TypedFn<I> for Borrowing<F>
where
    O: ToolOutput,
    E: Display,
    F: Fn(I, &ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    type Output = O;
    type Error = E;
    type Future = Fut;

    fn call(&self, input: I, ctx: &ToolContext) -> Fut {
        (self.0)(input, ctx)
    }
}

/// A function of the input and the borrowed context whose future cannot fail.
struct BorrowingInfallible<F>(F);

impl<I, O, F, Fut> TypedFn<I> for BorrowingInfallible<F>
where
    O: ToolOutput,
    F: Fn(I, &ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
{
    type Output = O;
    type Error = std::convert::Infallible;
    type Future = AlwaysOk<Fut>;

    fn call(&self, input: I, ctx: &ToolContext) -> AlwaysOk<Fut> {
        AlwaysOk {
            inner: (self.0)(input, ctx),
        }
    }
}

pin_project_lite::pin_project! {
    /// A future's output as `Ok`.
    struct AlwaysOk<F> {
        #[pin]
        inner: F,
    }
}

impl<F: Future> Future for AlwaysOk<F> {
    type Output = Result<F::Output, std::convert::Infallible>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.project().inner.poll(cx).map(Ok)
    }
}

/// The future of a call that cannot start (outside any tool's generic code).
#[cold]
fn cannot_start() -> CallFuture {
    futures::future::ready(Err(AgentError::tool(
        "the call cannot start: it was started before, or its tool has no function",
    )))
    .boxed()
}

pin_project_lite::pin_project! {
    /// A typed async call, in one allocation made when its arguments were decoded: the input, then
    /// (once started) the tool's own future in the same place.
    #[project = CallState]
    enum TypedCall<I, C, Fut> {
        Ready { input: Option<I>, runs: PhantomData<fn() -> C> },
        Running { #[pin] call: Fut, want_value: bool },
    }
}

impl<I, C> Prepared for TypedCall<I, C, C::Future>
where
    I: ToolInput,
    C: TypedFn<I>,
{
    fn input(&self) -> &dyn std::any::Any {
        match self {
            TypedCall::Ready {
                input: Some(input), ..
            } => input,
            _ => &(),
        }
    }

    fn start(
        mut self: Box<Self>,
        runs: Option<&(dyn std::any::Any + Send + Sync)>,
        ctx: &ToolContext,
        want_value: bool,
    ) -> CallFuture {
        let call = runs.and_then(|runs| runs.downcast_ref::<C>());
        let input = match &mut *self {
            TypedCall::Ready { input, .. } => input.take(),
            TypedCall::Running { .. } => None,
        };
        let (Some(call), Some(input)) = (call, input) else {
            return cannot_start();
        };
        // Not pinned yet: the tool's future takes the input's place in the same allocation.
        *self = TypedCall::Running {
            call: call.call(input, ctx),
            want_value,
        };
        Box::into_pin(self)
    }
}

impl<I, C, O, E, Fut> Future for TypedCall<I, C, Fut>
where
    O: Serialize,
    E: Display,
    Fut: Future<Output = Result<O, E>>,
{
    type Output = Result<Produced, AgentError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.project() {
            CallState::Running { call, want_value } => {
                call.poll(cx).map(|result| produce(result, *want_value))
            }
            CallState::Ready { .. } => std::task::Poll::Ready(Err(AgentError::tool(
                "the call was polled before it started",
            ))),
        }
    }
}
