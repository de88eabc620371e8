//! Typed tools: input `I: Deserialize + JsonSchema`, output `O: Serialize`, error `E: Display`.
//! This is what `#[tool]` expands to, and it is usable without the macro.

use std::any::Any;
use std::fmt::Display;
use std::sync::Arc;

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::decode::{self, Cx, NodeId, ToolInput};
use crate::error::AgentError;
use crate::schema;
use crate::tool::call::{CallFuture, InputType, Parsed, Prepared, Start};
use crate::tool::context::ToolContext;
use crate::tool::definition::{FromValueFn, ParseFn, Tool};
use crate::tool::erase;
use crate::tool::returns::{TypedReturn, sealed};

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

/// The input type of a `#[tool]` function (its typed input, or the generated arguments struct).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool input: it needs serde's `Deserialize` and schemars 1.x's `JsonSchema`",
    label = "not a tool input",
    note = "add `#[derive(serde::Deserialize, schemars::JsonSchema)]` to `{Self}` (it must also be `Send + Sync + 'static`), or take plain arguments",
    note = "if `{Self}` already derives both, its `JsonSchema` is another version's: phaseo-agent reads schemars 1.x, so depend on `schemars = \"1\"` (see `cargo tree -i schemars`) or derive `phaseo_agent::schemars::JsonSchema`"
)]
pub trait Input: ToolInput {}
#[diagnostic::do_not_recommend]
impl<T: ToolInput> Input for T {}

/// A typed tool from its function with the future's type erased: what `#[tool]` and every typed
/// constructor of [`Tool`] build, the one function of a tool's construction compiled per input
/// type, with the input's `MakeCall` (the rest is `Tool::typed_from_parts`). The expansion of an
/// async `#[tool]` function boxes the function's future itself, so the only generic code of the
/// runtime instantiated over it is the small `poll` of
/// [`finish`](crate::tool::macro_support::finish), and a change to the body recompiles the user's
/// crate's own code and those polls.
///
/// `start`: none for an external tool. `early` for a function without context or resources: its
/// future is made as the call's arguments are parsed (`Parsed::Made`), and `start` must not read
/// the context it is handed (it is not the call's).
pub fn typed_start<I: Input>(
    id: impl Into<String>,
    description: impl Into<String>,
    early: bool,
    start: Option<Box<Start<I>>>,
) -> Tool {
    // A pattern, not `Option::is_some`: that would be one more function compiled per input type.
    #[allow(clippy::redundant_pattern_matching)]
    let executable = matches!(start, Some(_));
    // Made a `dyn MakeCall` here, so that nothing of the `Arc` is compiled per input type but
    // its allocation.
    let call: Arc<dyn MakeCall> = Arc::new(TypedCall {
        start,
        early,
        no_context: no_context(),
    });
    let input = TypedInput {
        schema: schema::generate::parameters_for::<I>(),
        key: InputType::of::<I>(),
        name: std::any::type_name::<I>(),
    };
    Tool::typed_from_parts(id.into(), description.into(), input, call, executable)
}

impl Tool {
    /// A typed tool from a function of its input and context.
    ///
    /// The function is synchronous, returning `Result<O, E>`, and runs on Tokio's blocking thread
    /// pool (so it may block: file or network I/O, heavy computation, without stalling the run's
    /// other tools), or async, returning a future of it, which is awaited (see [`TypedReturn`]).
    ///
    /// The parameter schema is generated from `I` once, here, and normalised (see
    /// [`schema`](crate::schema)). Arguments are validated against it and decoded into `I` before
    /// your code runs; the output is serialised; an `Err(e)` reaches the model as `{"error": e}`.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde::{Deserialize, Serialize};
    /// use serde_json::json;
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Add { a: i64, b: i64 }
    ///
    /// #[derive(Serialize)]
    /// struct Sum { sum: i64 }
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Path { path: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // Async: the future is awaited.
    /// let add = Tool::typed("add", "Add two numbers", |input: Add, _ctx| async move {
    ///     Ok::<_, std::convert::Infallible>(Sum { sum: input.a + input.b })
    /// });
    /// assert_eq!(add.parameters()["required"], json!(["a", "b"]));
    ///
    /// let ctx = ToolContext::detached();
    /// assert_eq!(add.invoke(r#"{"a": 2, "b": 3}"#, &ctx).await?, r#"{"sum":5}"#);
    /// let err = add.invoke(r#"{"a": 2}"#, &ctx).await.unwrap_err();
    /// assert_eq!(err.to_string(), r#"invalid tool input: $: "b" is a required property"#);
    ///
    /// // Synchronous: it runs on the blocking pool, where blocking file I/O is fine.
    /// let size = Tool::typed("file_size", "Size of a file in bytes", |input: Path, _ctx| {
    ///     std::fs::metadata(&input.path).map(|m| m.len())
    /// });
    /// let path = std::env::temp_dir().join("phaseo-agent-typed-example.txt");
    /// std::fs::write(&path, "hello").unwrap();
    /// let arguments = json!({"path": path}).to_string();
    /// assert_eq!(size.invoke(&arguments, &ctx).await?, "5");
    /// # std::fs::remove_file(&path).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub fn typed<I, O, E, F, R, How>(
        id: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        I: ToolInput,
        O: ToolOutput,
        E: Display + 'static,
        F: Fn(I, ToolContext) -> R + Send + Sync + 'static,
        R: TypedReturn<O, E, How>,
    {
        let start = <R as sealed::TypedReturn<O, E, How>>::start::<I, F>(f);
        typed_start::<I>(id, description, false, Some(start))
    }

    /// [`Tool::typed`] for an async function that does not take the context: each call skips
    /// handing one over (a reference count taken and dropped per call). `#[tool]` does the same for
    /// an async function without a `&ToolContext` parameter.
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
        E: Display + 'static,
        F: Fn(I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        typed_start::<I>(id, description, false, Some(erase::without_context(f)))
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
    /// assert_eq!(err.to_string(), "invalid tool output: $: missing field `title`");
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
        let mut tool = typed_start::<I>(id, description, false, None);
        tool.output_checks.push(Arc::new(|value: Value| {
            O::deserialize(&value)
                .map(|_| value)
                .map_err(|e| format!("$: {e}"))
        }));
        tool
    }

    /// The typed tool from its input type's parts, or (when the decoder did not compile) a tool
    /// whose calls are refused and whose definition error says why. Not generic: the parse
    /// functions make calls through `call`, the input's [`MakeCall`], which is also the tool's
    /// `runs` when it is `executable` (an input that waited for its call starts with it).
    pub(crate) fn typed_from_parts(
        id: String,
        description: String,
        input: TypedInput,
        call: Arc<dyn MakeCall>,
        executable: bool,
    ) -> Self {
        let runs: Option<Arc<dyn Any + Send + Sync>> =
            if executable { Some(call.clone()) } else { None };
        let TypedInput {
            schema: (parameters, unit_like),
            key,
            name,
        } = input;
        let (parse, from_value, validator, error): (Arc<ParseFn>, Arc<FromValueFn>, _, _) =
            match decode::Core::new(&parameters, unit_like) {
                Ok(core) => {
                    let validator = core.validator().clone();
                    let parse = Arc::new(TypedParse { core, call });
                    let by_value = parse.clone();
                    (
                        Arc::new(move |args: &str, early| parse.text(args, early)),
                        Arc::new(move |value: Value, early| by_value.value(&value, early)),
                        Some(validator),
                        None,
                    )
                }
                Err(e) => {
                    let unusable = "$: the tool is unusable";
                    (
                        Arc::new(move |_: &str, _| Err(unusable.to_owned())),
                        Arc::new(move |_: Value, _| Err(unusable.to_owned())),
                        None,
                        Some(e),
                    )
                }
            };
        let mut tool = Tool::from_parts(
            id,
            description,
            parameters,
            key,
            parse,
            from_value,
            executable,
        );
        tool.runs = runs;
        tool.params_validator = validator;
        tool.definition_error = tool
            .definition_error
            .or(error)
            .or_else(|| object_input(name, &tool.parameters));
        tool
    }
}

/// What a typed tool's input type gives the runtime's non-generic code, besides its
/// [`MakeCall`].
pub(crate) struct TypedInput {
    /// The normalised parameter schema, and whether the input is unit-like.
    pub(crate) schema: (Value, bool),
    pub(crate) key: InputType,
    pub(crate) name: &'static str,
}

/// How a typed tool's calls are made from their argument text: [`TypedCall`] with the type of
/// its input erased, so that the decoder core and the parse functions are not generic.
pub(crate) trait MakeCall: Any + Send + Sync {
    /// Decodes the input from a text through the strict wrapper, at a node of the schema, and
    /// makes the call. `early` (the output wanted as a `Value`) when the call may be made as it
    /// is parsed (see [`ParseFn`]): its future is made at once if the tool makes its calls early
    /// (see [`Parsed`]); otherwise the input is boxed until the call starts.
    fn decode(
        &self,
        text: &str,
        cx: Cx<'_>,
        node: NodeId,
        early: Option<bool>,
    ) -> Result<Parsed, serde_json::Error>;
}

/// A typed tool's start function, with its input type: the one piece of a typed tool's calls
/// compiled per input type ([`MakeCall::decode`]: `I`'s `Deserialize` over the strict wrapper,
/// then the call made from the input). Also the tool's `runs`, which an input that waited for
/// its call ([`Ready`]) starts with.
struct TypedCall<I> {
    /// None for an external tool.
    start: Option<Box<Start<I>>>,
    /// The function takes no context or resources: its future is made as the call's arguments
    /// are parsed, and `start` does not read the context it is handed (see [`typed_start`]).
    early: bool,
    /// The context such a call is handed ([`no_context`], looked up once).
    no_context: &'static ToolContext,
}

impl<I: ToolInput> MakeCall for TypedCall<I> {
    fn decode(
        &self,
        text: &str,
        cx: Cx<'_>,
        node: NodeId,
        early: Option<bool>,
    ) -> Result<Parsed, serde_json::Error> {
        // `decode::decode_text`, written out: one function fewer to compile per input type.
        let mut de = serde_json::Deserializer::from_str(text);
        let input = I::deserialize(decode::Strict {
            de: &mut de,
            cx,
            node,
        })?;
        de.end()?;
        if let Some(want_value) = early {
            if let (true, Some(start)) = (self.early, &self.start) {
                // Through the `dyn Fn`, not `Box`'s `Fn`: one function fewer per input type.
                return Ok(Parsed::Made((**start)(input, self.no_context, want_value)));
            }
        }
        Ok(Parsed::Ready(Box::new(Ready(input))))
    }
}

/// A typed tool's argument parsing: the decoder without its type, and how its calls are made.
struct TypedParse {
    core: decode::Core,
    call: Arc<dyn MakeCall>,
}

impl TypedParse {
    /// Decodes the argument text into a call ready to start. Inlined into the tool's parse
    /// function, its only caller.
    #[inline]
    fn text(&self, args: &str, early: Option<bool>) -> Result<Parsed, String> {
        let mut call = None;
        self.core.decode(args, &mut self.reader(early, &mut call))?;
        call.ok_or_else(decode::nothing_decoded)
    }

    /// Decodes a value that passed the schema into a call ready to start.
    fn value(&self, value: &Value, early: Option<bool>) -> Result<Parsed, String> {
        let mut call = None;
        self.core
            .decode_value(value, &mut self.reader(early, &mut call))?;
        call.ok_or_else(decode::nothing_decoded)
    }

    /// What the decoder core calls with a text to decode: the input's [`MakeCall`], the call it
    /// makes kept in `call`. Not generic: compiled once for both paths.
    #[inline]
    fn reader<'a>(
        &'a self,
        early: Option<bool>,
        call: &'a mut Option<Parsed>,
    ) -> impl FnMut(&str, Cx<'_>, NodeId) -> Result<(), serde_json::Error> + 'a {
        #[inline(always)]
        move |text, cx, node| {
            *call = Some(self.call.decode(text, cx, node, early)?);
            Ok(())
        }
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

/// The future of a call that cannot start (outside any tool's generic code).
#[cold]
fn cannot_start() -> CallFuture {
    futures::future::ready(Err(AgentError::tool(
        "the call cannot start: its tool has no function",
    )))
    .boxed()
}

/// The context a call made early is handed (see [`typed_start`]): one, detached, for
/// every such call, since none reads it.
fn no_context() -> &'static ToolContext {
    static NONE: std::sync::OnceLock<ToolContext> = std::sync::OnceLock::new();
    NONE.get_or_init(ToolContext::detached)
}

/// A typed async call's decoded input, ready to start.
struct Ready<I>(I);

impl<I: ToolInput> Prepared for Ready<I> {
    fn input(&self) -> &dyn Any {
        &self.0
    }

    fn start(
        self: Box<Self>,
        runs: Option<&(dyn Any + Send + Sync)>,
        ctx: &ToolContext,
        want_value: bool,
    ) -> CallFuture {
        // `match`es, not `Option` combinators: a closure would be one more function compiled
        // per input type.
        let call = match runs {
            Some(runs) => runs.downcast_ref::<TypedCall<I>>(),
            None => None,
        };
        match call {
            Some(TypedCall {
                start: Some(start), ..
            }) => (**start)(self.0, ctx, want_value),
            _ => cannot_start(),
        }
    }
}
