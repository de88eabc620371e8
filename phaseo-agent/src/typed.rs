//! Typed tools: input `I: Deserialize + JsonSchema`, output `O: Serialize`, error `E: Display`.
//! This is what `#[tool]` expands to, and it is usable without the macro.

use std::any::TypeId;
use std::fmt::Display;
use std::sync::Arc;

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tool::{Parsed, Produced, blocking};
use crate::{AgentError, Tool, ToolContext, decode, schema};

/// The input of a typed tool: decoded from the model's arguments, with a JSON Schema to advertise.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool input: derive `Deserialize` and `JsonSchema` for it",
    label = "this type is not a tool input",
    note = "add `#[derive(serde::Deserialize, schemars::JsonSchema)]` to `{Self}`, or take plain arguments"
)]
pub trait ToolInput: DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static {}
impl<T: DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static> ToolInput for T {}

/// The output of a typed tool: serialised to JSON for the model.
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
    /// let add = Tool::typed("add", "Add two numbers", |input: Add, _ctx: ToolContext| async move {
    ///     Ok::<_, std::convert::Infallible>(Sum { sum: input.a + input.b })
    /// });
    /// assert_eq!(add.parameters()["required"], serde_json::json!(["a", "b"]));
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
        Self::typed_parts::<I>(id.into(), description.into()).with_exec(
            move |parsed, ctx, want_value| match take::<I>(parsed) {
                Ok(input) => f(input, ctx)
                    .map(move |result| produce(result, want_value))
                    .boxed(),
                Err(e) => futures::future::ready(Err(e)).boxed(),
            },
        )
    }

    /// A typed tool from a synchronous function. It runs on Tokio's blocking thread pool, so it may
    /// block (file or network I/O, heavy computation) without stalling the run's other tools.
    ///
    /// ```
    /// use phaseo_agent::{AgentError, Tool, ToolContext};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Path { path: String }
    ///
    /// let size = Tool::typed_blocking("file_size", "Size of a file in bytes", |input: Path, _ctx: ToolContext| {
    ///     std::fs::metadata(&input.path).map(|m| m.len())
    /// });
    /// # let _ = size;
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
        Self::typed_parts::<I>(id.into(), description.into()).with_exec(
            move |parsed, ctx, want_value| {
                let f = f.clone();
                blocking(move || produce(f(take::<I>(parsed)?, ctx), want_value))
            },
        )
    }

    /// A typed tool with no executor: calls pause with pending kind `external_output`, and the output
    /// a person or system supplies must decode as `O` (otherwise `Invalid tool output: ...`).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Lookup { ticket_id: String }
    /// #[derive(serde::Deserialize)]
    /// struct Ticket { title: String }
    ///
    /// let lookup = Tool::external_typed::<Lookup, Ticket>("ticket_lookup", "Load one support ticket");
    /// assert!(lookup.is_external());
    /// ```
    pub fn external_typed<I, O>(id: impl Into<String>, description: impl Into<String>) -> Self
    where
        I: ToolInput,
        O: DeserializeOwned + 'static,
    {
        let mut tool = Self::typed_parts::<I>(id.into(), description.into());
        tool.output_checks.push(Arc::new(|value: Value| {
            O::deserialize(&value)
                .map(|_| value)
                .map_err(|e| format!("$: {e}"))
        }));
        tool
    }

    fn typed_parts<I: ToolInput>(id: String, description: String) -> Self {
        let parameters = schema::schema_for::<I>();
        let parser = if unit_like::<I>() {
            Ok(unit_parser::<I>())
        } else {
            decode::typed_parser::<I>(&parameters)
        };
        let (parse, error) = match parser {
            Ok(parse) => (parse, None),
            Err(e) => {
                let parse: Arc<crate::tool::ParseFn> =
                    Arc::new(|_: &str| Err("$: the tool is unusable".to_owned()));
                (parse, Some(e))
            }
        };
        let mut tool = Tool::from_parts(
            id,
            description,
            parameters,
            TypeId::of::<I>(),
            std::any::type_name::<I>(),
            parse,
            Arc::new(|value: Value| {
                I::deserialize(value)
                    .map(|input| Parsed(Box::new(input)))
                    .map_err(|e| format!("$: {e}"))
            }),
        );
        tool.definition_error = tool
            .definition_error
            .or(error)
            .or_else(|| object_input::<I>(&tool.parameters));
        tool
    }
}

/// Tool arguments are a JSON object: a typed input must describe one.
fn object_input<I>(parameters: &Value) -> Option<String> {
    match parameters.get("type") {
        Some(Value::String(t)) if t == "object" => None,
        other => Some(format!(
            "the input type `{}` is not a JSON object (its schema's type is {}): a typed input must be a struct, a map or an enum of structs; wrap other types in a struct, or take plain arguments with `#[tool]`",
            std::any::type_name::<I>(),
            other.map_or_else(|| "not set".to_owned(), Value::to_string)
        )),
    }
}

/// `()` and unit structs take no parameters: they advertise `{}` but decode from `null`.
fn unit_like<I: ToolInput>() -> bool {
    I::deserialize(Value::Object(Default::default())).is_err()
        && I::deserialize(Value::Null).is_ok()
}

fn unit_parser<I: ToolInput>() -> Arc<crate::tool::ParseFn> {
    Arc::new(|args: &str| match crate::tool::parse_arguments(args)? {
        Value::Object(map) if map.is_empty() => I::deserialize(Value::Null)
            .map(|input| Parsed(Box::new(input)))
            .map_err(|e| format!("$: {e}")),
        other => Err(format!(
            "$: {other} is not an empty object; this tool takes no arguments"
        )),
    })
}

fn take<I: 'static>(parsed: Parsed) -> Result<I, AgentError> {
    parsed
        .0
        .downcast::<I>()
        .map(|b| *b)
        .map_err(|_| AgentError::InvalidInput("$: decoded into an unexpected type".into()))
}

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
