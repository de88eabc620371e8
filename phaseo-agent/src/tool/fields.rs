//! The tool fields of the spec beyond id, description and parameters: validators, interactive hooks,
//! next-turn overrides, exclusivity and output caps. (Approval, timeout and error policy are in
//! `definition.rs`.)

use std::fmt::Display;
use std::sync::Arc;

use serde_json::Value;

use crate::model::request::TurnParams;
use crate::schema::dialect::{Dialect, convert};
use crate::schema::validate::{CheckFn, Validator};
use crate::tool::call::Later;
use crate::tool::context::ToolContext;
use crate::tool::definition::Tool;

/// A closure validator as an internal check: its error becomes `$: <reason>`.
fn check<E: Display>(
    f: impl Fn(Value) -> Result<Value, E> + Send + Sync + 'static,
) -> Arc<CheckFn> {
    Arc::new(move |value| f(value).map_err(|e| format!("$: {e}")))
}

/// A JSON Schema as an internal check, compiled now; a schema that does not compile makes the tool
/// invalid (building the agent says why).
fn schema_check(tool: &mut Tool, schema: &Value) -> Option<Arc<CheckFn>> {
    match Validator::new(schema) {
        Ok(validator) => Some(Arc::new(move |value: Value| {
            validator.check(&value).map(|()| value)
        })),
        Err(reason) => {
            tool.definition_error.get_or_insert(reason);
            None
        }
    }
}

impl Tool {
    /// A custom input validator (the spec's `input_schema`), run after the parameter schema check and
    /// before typed decoding. It returns the value to use (possibly transformed) or an error, which
    /// reads `Invalid tool input: $: <your message>` and follows the agent's invalid-arguments policy.
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::{json, Value};
    ///
    /// let search = Tool::new("search_tickets", "Search support tickets by keyword",
    ///     json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    ///     |input, _| Ok(json!([input["query"]])))
    ///     .input_schema(|mut input: Value| {
    ///         let query = input["query"].as_str().unwrap_or_default().trim().to_owned();
    ///         if query.is_empty() {
    ///             return Err("query must not be blank");
    ///         }
    ///         input["query"] = json!(query);
    ///         Ok(input)
    ///     });
    /// # let _ = search;
    /// ```
    pub fn input_schema<E: Display>(
        mut self,
        validate: impl Fn(Value) -> Result<Value, E> + Send + Sync + 'static,
    ) -> Self {
        self.input_checks.push(check(validate));
        self
    }

    /// A custom output validator (the spec's `output_schema`): it checks, and may transform, each
    /// result before the model sees it, including outputs a person supplies. A failure reads
    /// `Invalid tool output: $: <your message>` and follows the tool's error policy.
    pub fn output_schema<E: Display>(
        mut self,
        validate: impl Fn(Value) -> Result<Value, E> + Send + Sync + 'static,
    ) -> Self {
        self.output_checks.push(check(validate));
        self
    }

    /// Checks each result against a JSON Schema (compiled once, now; the draft is chosen by its
    /// `$schema`, 2020-12 if absent).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let status = Tool::new("get_status", "Service status", json!({"type": "object"}), |_, _| Ok(json!({"status": "up"})))
    ///     .output_json_schema(json!({"type": "object", "required": ["status"]}));
    /// # let _ = status;
    /// ```
    pub fn output_json_schema(mut self, schema: Value) -> Self {
        if let Some(check) = schema_check(&mut self, &schema) {
            self.output_checks.push(check);
        }
        self
    }

    /// A custom progress validator (the spec's `event_schema`) for values passed to
    /// [`ToolContext::emit_progress`]. A rejected value is not published, and the call fails with
    /// `Invalid tool event: $: <your message>`.
    pub fn event_schema<E: Display>(
        mut self,
        validate: impl Fn(Value) -> Result<Value, E> + Send + Sync + 'static,
    ) -> Self {
        self.event_checks.push(check(validate));
        self
    }

    /// Checks each progress value against a JSON Schema (compiled once, now).
    pub fn event_json_schema(mut self, schema: Value) -> Self {
        if let Some(check) = schema_check(&mut self, &schema) {
            self.event_checks.push(check);
        }
        self
    }

    /// An interactive hook, run instead of the executor when the model calls the tool: return
    /// `Some(value)` to answer at once (it goes through the output validators), or `None` to pause
    /// the run with pending kind `hitl` until a person supplies the output.
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::{json, Value};
    ///
    /// let refund = Tool::external("refund", "Refund an order",
    ///     json!({"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}))
    ///     // Small refunds are answered at once; larger ones wait for a person.
    ///     .on_tool_called(|input: &Value, _ctx| {
    ///         (input["amount"].as_f64()? <= 20.0).then(|| json!({"refunded": true}))
    ///     });
    /// # let _ = refund;
    /// ```
    ///
    /// The hook runs with the call's context: progress it emits is kept on the call's step, and a
    /// context it sets is kept like a tool's (see [`ToolContext::set_context`]).
    pub fn on_tool_called(
        mut self,
        hook: impl Fn(&Value, &ToolContext) -> Option<Value> + Send + Sync + 'static,
    ) -> Self {
        self.on_tool_called = Some(Arc::new(move |input: &Value, ctx: &ToolContext| {
            Later::Now(hook(input, ctx))
        }));
        self
    }

    /// [`on_tool_called`](Self::on_tool_called) for a hook that does I/O (a cache, a lookup): it
    /// reads what it needs from the input and returns a future of its answer. A panic, before or
    /// inside the future, hands the call to a person (kind `hitl`).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::{json, Value};
    ///
    /// let status = Tool::external("status", "Service status", json!({"type": "object"}))
    ///     .on_tool_called_async(|input: &Value, _ctx| {
    ///         let service = input["service"].as_str().unwrap_or_default().to_owned();
    ///         async move { (service == "api").then(|| json!({"status": "cached"})) }
    ///     });
    /// # let _ = status;
    /// ```
    pub fn on_tool_called_async<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(&Value, &ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<Value>> + Send + 'static,
    {
        self.on_tool_called = Some(Arc::new(move |input: &Value, ctx: &ToolContext| {
            Later::Wait(Box::pin(hook(input, ctx)))
        }));
        self
    }

    /// Transforms (or refuses) an output a person or system supplies for a paused call, before the
    /// output validators check it. An error refuses the decision: `resume` returns
    /// `Invalid tool output: $: <your message>` and nothing changes.
    pub fn on_response_received<E: Display>(
        mut self,
        transform: impl Fn(Value) -> Result<Value, E> + Send + Sync + 'static,
    ) -> Self {
        self.on_response_received = Some(check(transform));
        self
    }

    /// Changes the next model request after a successful call, from the call's input and the
    /// overrides so far (several calls in one turn apply in call order). The overrides are kept in
    /// `RunState` across a pause, and apply to one request.
    ///
    /// ```
    /// use phaseo_agent::{Tool, TurnParams};
    /// use serde_json::{json, Value};
    ///
    /// let escalate = Tool::new("escalate", "Hand the conversation to the senior model",
    ///     json!({"type": "object", "properties": {}}), |_, _| Ok(json!("escalated")))
    ///     .next_turn(|_input: &Value, current: &TurnParams| TurnParams {
    ///         model: Some("senior-model".into()),
    ///         temperature: Some(0.0),
    ///         ..current.clone()
    ///     });
    /// # let _ = escalate;
    /// ```
    pub fn next_turn(
        mut self,
        change: impl Fn(&Value, &TurnParams) -> TurnParams + Send + Sync + 'static,
    ) -> Self {
        self.next_turn = Some(Arc::new(change));
        self
    }

    /// Runs this tool's calls alone: the calls before it in the turn finish first, and the calls
    /// after it wait, whatever the concurrency limit.
    pub fn exclusive(mut self) -> Self {
        self.exclusive = true;
        self
    }

    /// Asks providers that can to hold the model to this tool's schema exactly (OpenAI's strict
    /// function calling: the provider sends the schema in its strict dialect with `"strict": true`).
    ///
    /// The schema must be expressible in that dialect ([`Dialect::OpenAiStrict`]: no maps, no
    /// any-value fields, no union at the root); if it is not, the agent's `build()` fails naming the
    /// path. In strict mode every property is required and the optional ones nullable, so the model
    /// sends `null` for a field it leaves out: a `null` for a property the canonical schema does not
    /// require (and whose schema does not take `null`) is read as left out, and the arguments are
    /// then checked against the canonical schema as always.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Search {
    ///     query: String,
    ///     #[serde(default)]
    ///     limit: u32,
    /// }
    /// let tool = Tool::typed("search", "Search", |s: Search, _ctx| async move {
    ///     Ok::<_, String>(json!({"query": s.query, "limit": s.limit}))
    /// })
    /// .strict();
    /// // The model sends `null` for the optional `limit`: it is read as left out.
    /// let out = tool.invoke(r#"{"query": "q", "limit": null}"#, &ToolContext::detached()).await;
    /// assert_eq!(out.unwrap(), r#"{"limit":0,"query":"q"}"#);
    /// # }
    /// ```
    ///
    /// [`Dialect::OpenAiStrict`]: crate::schema::dialect::Dialect::OpenAiStrict
    pub fn strict(mut self) -> Self {
        self.strict = true;
        if let Err(e) = convert(&self.parameters, Dialect::OpenAiStrict) {
            self.definition_error.get_or_insert(format!(
                "`strict`: {e}; remove `strict`, or change the input type"
            ));
        }
        self
    }

    /// Caps the characters of this tool's results the model sees (overrides the agent's cap). A
    /// longer result keeps its first `max - max / 2` and last `max / 2` characters around a notice
    /// of how many were cut.
    pub fn max_output_chars(mut self, max: usize) -> Self {
        self.max_output_chars = Some(max);
        self
    }
}
