//! A tool's fields beyond id, description and parameters: validators, interactive hooks,
//! next-turn overrides, exclusivity and output caps. (Approval, timeout and error policy are in
//! `definition.rs`.)

use std::fmt::Display;
use std::sync::Arc;

use serde_json::Value;

use crate::model::request::TurnParams;
use crate::schema::dialect::{Dialect, convert};
use crate::schema::generate::object_schema_for;
use crate::schema::validate::{CheckFn, Validator};
use crate::tool::context::ToolContext;
use crate::tool::definition::{Tool, ToolHints};
use crate::tool::returns::{Answer, sealed};

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
    /// A custom input validator (the `input_schema` field of a tool), run after the parameter schema
    /// check and before typed decoding. It returns the value to use (possibly transformed) or an
    /// error, which reads `Invalid tool input: $: <your message>` and follows the agent's
    /// invalid-arguments policy.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::{json, Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
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
    /// let ctx = ToolContext::detached();
    /// assert_eq!(search.invoke(r#"{"query": "  printer "}"#, &ctx).await?, r#"["printer"]"#);
    /// let err = search.invoke(r#"{"query": "   "}"#, &ctx).await.unwrap_err();
    /// assert_eq!(err.to_string(), "invalid tool input: $: query must not be blank");
    /// # Ok(())
    /// # }
    /// ```
    pub fn input_schema<E: Display>(
        mut self,
        validate: impl Fn(Value) -> Result<Value, E> + Send + Sync + 'static,
    ) -> Self {
        self.input_checks.push(check(validate));
        self
    }

    /// A custom output validator (the `output_schema` field of a tool): it checks, and may
    /// transform, each result before the model sees it, including outputs a person supplies. A
    /// failure reads `Invalid tool output: $: <your message>` and follows the tool's error policy.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::{json, Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let stock = Tool::new("stock", "Units in stock", json!({"type": "object"}), |_, _| Ok(json!({"units": -3})))
    ///     .output_schema(|output: Value| {
    ///         if output["units"].as_i64().unwrap_or(0) < 0 {
    ///             return Err("units must not be negative");
    ///         }
    ///         Ok(output)
    ///     });
    /// let err = stock.invoke("{}", &ToolContext::detached()).await.unwrap_err();
    /// assert_eq!(err.to_string(), "invalid tool output: $: units must not be negative");
    /// # }
    /// ```
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
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let status = Tool::new("get_status", "Service status", json!({"type": "object"}), |_, _| Ok(json!({"state": "up"})))
    ///     .output_json_schema(json!({"type": "object", "required": ["status"]}));
    /// let err = status.invoke("{}", &ToolContext::detached()).await.unwrap_err();
    /// assert_eq!(err.to_string(), r#"invalid tool output: $: "status" is a required property"#);
    /// # }
    /// ```
    pub fn output_json_schema(mut self, schema: Value) -> Self {
        if let Some(check) = schema_check(&mut self, &schema) {
            self.output_checks.push(check);
        }
        self
    }

    /// A custom progress validator (the `event_schema` field of a tool) for values passed to
    /// [`ToolContext::emit_progress`]. A rejected value is not published, and the call fails with
    /// `Invalid tool event: $: <your message>`.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use serde_json::{json, Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let upload = Tool::new("upload", "Upload a file", json!({"type": "object"}), |_, ctx| async move {
    ///     ctx.emit_progress(json!({"percent": 50}))?;
    ///     ctx.emit_progress(json!({"percent": 150}))?;
    ///     Ok(json!("uploaded"))
    /// })
    /// .event_schema(|event: Value| match event["percent"].as_u64() {
    ///     Some(0..=100) => Ok(event),
    ///     _ => Err("percent must be 0 to 100"),
    /// });
    /// let model = ScriptedModel::new().tool_call("call_1", "upload", json!({})).text("The upload failed.");
    /// let agent = Agent::builder("files").model(model).tool(upload).build()?;
    /// let done = agent.run("Upload the report").await?;
    /// let step = &done.state.steps()[0];
    /// assert_eq!(step.content, r#"{"error":"Invalid tool event: $: percent must be 0 to 100"}"#);
    /// assert_eq!(step.preliminary_results, vec![json!({"percent": 50})]); // the bad value was not kept
    /// # Ok(())
    /// # }
    /// ```
    pub fn event_schema<E: Display>(
        mut self,
        validate: impl Fn(Value) -> Result<Value, E> + Send + Sync + 'static,
    ) -> Self {
        self.event_checks.push(check(validate));
        self
    }

    /// Checks each progress value against a JSON Schema (compiled once, now).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let index = Tool::new("index", "Index a repository", json!({"type": "object"}), |_, ctx| {
    ///     ctx.emit_progress(json!({"phase": "scan"}))?;
    ///     ctx.emit_progress(json!({"phase": 2}))?;
    ///     Ok(json!({"indexed": 248}))
    /// })
    /// .event_json_schema(json!({"type": "object", "properties": {"phase": {"type": "string"}}}));
    /// let model = ScriptedModel::new().tool_call("call_1", "index", json!({})).text("Indexing failed.");
    /// let agent = Agent::builder("search").model(model).tool(index).build()?;
    /// let done = agent.run("Index the repository").await?;
    /// assert_eq!(
    ///     done.state.tool_result("call_1"),
    ///     Some(r#"{"error":"Invalid tool event: $.phase: 2 is not of type \"string\""}"#)
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn event_json_schema(mut self, schema: Value) -> Self {
        if let Some(check) = schema_check(&mut self, &schema) {
            self.event_checks.push(check);
        }
        self
    }

    /// An interactive hook, run instead of the executor when the model calls the tool: it answers
    /// `Some(value)` to answer at once (it goes through the output validators), or `None` to pause
    /// the run with pending kind `hitl` until a person supplies the output.
    ///
    /// The hook returns its answer, and is called in place (keep it quick), or a future of it,
    /// which is awaited: for a hook that does I/O (a cache, a lookup), read what it needs from the
    /// input and return an `async move` block (see [`Answer`]). A panic, before or inside the
    /// future, hands the call to a person (kind `hitl`).
    ///
    /// ```
    /// use phaseo_agent::{Agent, PendingKind, ScriptedModel, Tool, ToolCall};
    /// use serde_json::{json, Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // Synchronous: small refunds are answered at once; larger ones wait for a person.
    /// let refund = Tool::external("refund", "Refund an order",
    ///     json!({"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}))
    ///     .on_tool_called(|input: &Value, _ctx| {
    ///         (input["amount"].as_f64()? <= 20.0).then(|| json!({"refunded": true}))
    ///     });
    /// let model = ScriptedModel::new().tool_calls([
    ///     ToolCall::new("call_1", "refund", json!({"amount": 5})),
    ///     ToolCall::new("call_2", "refund", json!({"amount": 500})),
    /// ]);
    /// let agent = Agent::builder("support").model(model).tool(refund).build()?;
    /// let paused = agent.run("Refund both orders").await?;
    /// assert_eq!(paused.state.tool_result("call_1"), Some(r#"{"refunded":true}"#));
    /// assert_eq!(paused.pending()[0].call.id, "call_2");
    /// assert_eq!(paused.pending()[0].kind, PendingKind::Hitl);
    ///
    /// // Async: the future owns what it read from the input, and is awaited.
    /// let status = Tool::external("status", "Service status", json!({"type": "object"}))
    ///     .on_tool_called(|input: &Value, _ctx| {
    ///         let service = input["service"].as_str().unwrap_or_default().to_owned();
    ///         async move { (service == "api").then(|| json!({"status": "cached"})) }
    ///     });
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "status", json!({"service": "api"}))
    ///     .text("The API is up.");
    /// let agent = Agent::builder("ops").model(model).tool(status).build()?;
    /// let done = agent.run("Is the API up?").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"status":"cached"}"#));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// The hook runs with the call's context: progress it emits is kept on the call's step, and a
    /// context it sets is kept like a tool's (see [`ToolContext::set_context`]).
    pub fn on_tool_called<F, R, How>(mut self, hook: F) -> Self
    where
        F: Fn(&Value, &ToolContext) -> R + Send + Sync + 'static,
        R: Answer<Option<Value>, How>,
    {
        self.on_tool_called = Some(Arc::new(move |input: &Value, ctx: &ToolContext| {
            sealed::Answer::later(hook(input, ctx))
        }));
        self
    }

    /// Transforms (or refuses) an output a person or system supplies for a paused call, before the
    /// output validators check it. An error refuses the decision: `resume` returns
    /// `Invalid tool output: $: <your message>` and nothing changes.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
    /// use serde_json::{json, Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let ask = Tool::external("ask_manager", "Ask the manager", json!({"type": "object"}))
    ///     .on_response_received(|answer: Value| match answer.as_str() {
    ///         Some("yes") => Ok(json!({"approved": true})),
    ///         Some("no") => Ok(json!({"approved": false})),
    ///         _ => Err("answer yes or no"),
    ///     });
    /// let model = ScriptedModel::new().tool_call("call_1", "ask_manager", json!({})).text("Approved.");
    /// let agent = Agent::builder("hr").model(model).tool(ask).build()?;
    /// let paused = agent.run("May I take Friday off?").await?;
    ///
    /// let err = agent.resume(&paused.state, Decisions::new().output("call_1", json!("maybe"))).await.unwrap_err();
    /// assert_eq!(err.to_string(), "invalid tool output: $: answer yes or no");
    /// let done = agent.resume(&paused.state, Decisions::new().output("call_1", json!("yes"))).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"approved":true}"#));
    /// # Ok(())
    /// # }
    /// ```
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
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, TurnParams};
    /// use serde_json::{json, Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let escalate = Tool::new("escalate", "Hand the conversation to the senior model",
    ///     json!({"type": "object", "properties": {}}), |_, _| Ok(json!("escalated")))
    ///     .next_turn(|_input: &Value, current: &TurnParams| {
    ///         current.clone().model("senior-model").temperature(0.0)
    ///     });
    /// let model = ScriptedModel::new().record_requests().tool_call("call_1", "escalate", json!({})).text("Escalated.");
    /// let agent = Agent::builder("support").model(model.clone()).tool(escalate).build()?;
    /// agent.run("I want to speak to someone senior").await?;
    /// let requests = model.requests();
    /// assert_eq!(requests[0].model, None);
    /// assert_eq!(requests[1].model.as_deref(), Some("senior-model"));
    /// assert_eq!(requests[1].temperature, Some(0.0));
    /// # Ok(())
    /// # }
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
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, ToolCall};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    /// let (r, m) = (running.clone(), most.clone());
    /// let migrate = Tool::new("migrate", "Migrate a database", json!({"type": "object"}), move |_, _| {
    ///     let (r, m) = (r.clone(), m.clone());
    ///     async move {
    ///         m.fetch_max(r.fetch_add(1, SeqCst) + 1, SeqCst);
    ///         tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    ///         r.fetch_sub(1, SeqCst);
    ///         Ok(json!("migrated"))
    ///     }
    /// })
    /// .exclusive();
    /// let calls = ["call_1", "call_2"].map(|id| ToolCall::new(id, "migrate", json!({})));
    /// let model = ScriptedModel::new().tool_calls(calls).text("Both migrated.");
    /// let agent = Agent::builder("db").model(model).tool(migrate).tool_concurrency(4).build()?;
    /// agent.run("Migrate both databases").await?;
    /// assert_eq!(most.load(SeqCst), 1); // never two at once, though four calls may run together
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let alphabet = Tool::new("alphabet", "The alphabet", json!({"type": "object"}),
    ///     |_, _| Ok(json!("abcdefghijklmnopqrstuvwxyz")))
    ///     .max_output_chars(10);
    /// // The result text is the JSON string, quotes included: 28 characters, 18 of them cut.
    /// let result = alphabet.invoke("{}", &ToolContext::detached()).await?;
    /// assert_eq!(result, "\"abcd\n[... 18 characters cut ...]\nwxyz\"");
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_output_chars(mut self, max: usize) -> Self {
        self.max_output_chars = Some(max);
        self
    }

    /// A human-readable title for people choosing or approving the tool (MCP clients show it in
    /// place of the id). See [`ToolHints`].
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let deploy = Tool::new("deploy", "Deploy an environment", json!({"type": "object"}), |v, _| Ok(v))
    ///     .title("Deploy an environment");
    /// assert_eq!(deploy.hints().title.as_deref(), Some("Deploy an environment"));
    /// ```
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.hints.title = Some(title.into());
        self
    }

    /// Says whether the tool leaves its environment unchanged (a hint for clients: MCP's
    /// `readOnlyHint`).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let status = Tool::new("status", "Service status", json!({"type": "object"}), |_, _| Ok(json!("up")))
    ///     .read_only(true);
    /// assert_eq!(status.hints().read_only, Some(true));
    /// ```
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.hints.read_only = Some(read_only);
        self
    }

    /// Says whether the tool may destroy or overwrite (a hint for clients: MCP's
    /// `destructiveHint`, which clients assume when it is not said).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let append = Tool::new("append_note", "Append a note", json!({"type": "object"}), |_, _| Ok(json!("ok")))
    ///     .destructive(false);
    /// assert_eq!(append.hints().destructive, Some(false));
    /// ```
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.hints.destructive = Some(destructive);
        self
    }

    /// Says whether a second call with the same arguments has no further effect (a hint for
    /// clients: MCP's `idempotentHint`).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let set = Tool::new("set_flag", "Set a feature flag", json!({"type": "object"}), |_, _| Ok(json!("set")))
    ///     .idempotent(true);
    /// assert_eq!(set.hints().idempotent, Some(true));
    /// ```
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.hints.idempotent = Some(idempotent);
        self
    }

    /// Says whether the tool reaches an open world of outside entities, such as the web (a hint
    /// for clients: MCP's `openWorldHint`, which clients assume when it is not said).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let search = Tool::new("web_search", "Search the web", json!({"type": "object"}), |_, _| Ok(json!([])))
    ///     .open_world(true);
    /// assert_eq!(search.hints().open_world, Some(true));
    /// ```
    pub fn open_world(mut self, open_world: bool) -> Self {
        self.hints.open_world = Some(open_world);
        self
    }

    /// The tool's title and behaviour hints (see [`ToolHints`]).
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// assert_eq!(ping.hints().title, None); // nothing said
    /// ```
    pub fn hints(&self) -> &ToolHints {
        &self.hints
    }

    /// Records that the tool's output is an `O`, so that its JSON Schema can be advertised (as
    /// MCP's `outputSchema`) and its results sent as structured data. `#[tool]` records it by
    /// itself for a function whose output type implements `JsonSchema`; call this for a
    /// [`Tool::typed`] tool. Only a type whose schema is an object is recorded (MCP's
    /// `outputSchema` must be one); for another, this does nothing.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Add { a: i64, b: i64 }
    ///
    /// #[derive(serde::Serialize, schemars::JsonSchema)]
    /// struct Sum { sum: i64 }
    ///
    /// let add = Tool::typed("add", "Add two numbers", |input: Add, _ctx: ToolContext| async move {
    ///     Ok::<_, String>(Sum { sum: input.a + input.b })
    /// })
    /// .structured_output::<Sum>();
    /// assert_eq!(add.output_type_schema(), Some(json!({
    ///     "type": "object",
    ///     "properties": {"sum": {"type": "integer", "format": "int64"}},
    ///     "required": ["sum"]
    /// })));
    /// ```
    pub fn structured_output<O: schemars::JsonSchema>(mut self) -> Self {
        self.output_type = Some(object_schema_for::<O>);
        self
    }

    /// The JSON Schema of the tool's output, when it was recorded ([`Tool::structured_output`],
    /// or `#[tool]` with an output type that implements `JsonSchema`) and is an object schema.
    /// Generated on each call.
    ///
    /// ```
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// assert_eq!(ping.output_type_schema(), None);
    /// // A number is not an object: not recorded.
    /// assert_eq!(ping.structured_output::<i64>().output_type_schema(), None);
    /// ```
    pub fn output_type_schema(&self) -> Option<Value> {
        self.output_type.and_then(|schema| schema())
    }
}
