//! The `#[tool]` attribute macro of phaseo-agent. Depend on `phaseo-agent` and use `phaseo_agent::tool`:
//! the expansion names paths of `phaseo_agent` that are not public API, so the two crates are
//! released in lockstep.

// The declaration order of the modules is their layering, lowest first (parse → validate →
// expand, as in thiserror): a module uses only the modules declared above it. tests/architecture.rs
// checks this, and rustfmt.toml keeps rustfmt from sorting the declarations.

// Shared by every stage.
mod doc;
mod errors;
// Parse.
mod ast;
mod fields;
mod args;
// Validate.
mod valid;
// Expand.
mod plain;
mod expand;
mod methods;

use proc_macro::TokenStream;

/// Makes a function a tool: `.tool(fetch_ticket)` gives it to an agent, and `fetch_ticket(..)` still
/// calls it.
///
/// ```
/// use phaseo_agent::{Agent, ScriptedModel, ToolContext, tool};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, schemars::JsonSchema)]
/// struct FetchTicket {
///     /// The ticket's id, as in `T-42`.
///     ticket_id: String,
/// }
///
/// #[derive(Serialize)]
/// struct Ticket {
///     title: String,
/// }
///
/// /// Load one internal support ticket.
/// #[tool(id = "fetch-ticket")]
/// async fn fetch_ticket(input: FetchTicket, ctx: &ToolContext) -> Result<Ticket, String> {
///     ctx.emit_progress(serde_json::json!({"loading": input.ticket_id})).map_err(|e| e.to_string())?;
///     Ok(Ticket { title: format!("Printer on fire ({})", input.ticket_id) })
/// }
///
/// /// Add two numbers.
/// #[tool]
/// fn add(a: i64, b: i64) -> i64 {
///     a + b
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// // Unit tests call the functions by name.
/// let ctx = ToolContext::detached();
/// let ticket = fetch_ticket(FetchTicket { ticket_id: "T-42".into() }, &ctx).await.unwrap();
/// assert_eq!(ticket.title, "Printer on fire (T-42)");
/// assert_eq!(add(2, 3), 5);
///
/// // An agent takes them by name.
/// let model = ScriptedModel::new().record_requests()
///     .tool_call("call_1", "add", serde_json::json!({"a": 2, "b": 3}))
///     .text("2 + 3 = 5");
/// let agent = Agent::builder("helper").model(model).tool(fetch_ticket).tool(add).build()?;
/// assert_eq!(agent.tools()[0].id(), "fetch-ticket");
/// assert_eq!(agent.tools()[0].description(), "Load one internal support ticket.");
/// assert_eq!(agent.run("What is 2 + 3?").await?.output(), Some("2 + 3 = 5"));
/// # Ok(())
/// # }
/// ```
///
/// # Functions
///
/// `async fn` and plain `fn`. A plain `fn` runs on Tokio's blocking thread pool, so a synchronous
/// body never stalls the async workers. An async function's future must be `Send`: one that holds
/// an `Rc` or a `std::sync` lock guard across an `.await` is one error at the function's name,
/// pointing at that `.await` (`tests/ui/future-not-send.rs`).
///
/// Not accepted, each a compile error that says what to write instead: generic, lifetime or const
/// parameters, `where` clauses, `const`, `unsafe` and `extern` functions, variadic and
/// `impl Trait` arguments.
///
/// `#[tool]` on its own goes on a function in a module or a block. For methods, put
/// [`#[tools]`](macro@tools) on the `impl` block: a `#[tool]` method taking `self` in a block
/// without it is an error that says so.
///
/// # Inputs
///
/// The parameters are read in this order:
///
/// 1. **The context.** Every `&T` parameter other than `&str` is the context parameter, and the
///    compiler proves that `T` is `ToolContext`: write
///    `ctx: &ToolContext`. At most one, anywhere in the list; it is not part of the tool's arguments.
/// 2. **Resources.** Every parameter whose type's last segment is `Res` (`db: Res<Pool>`) is a
///    resource the agent lends the tool (`AgentBuilder::resource`), not an argument: the tool
///    declares the type, and building an agent without it fails, naming the tool and the type.
/// 3. **A typed input.** When exactly one other parameter is left and its type is not a plain std type,
///    that parameter is the tool's input, decoded from the model's arguments: any type that derives
///    `Deserialize` and `JsonSchema` (its field docs become property descriptions). The plain std
///    types are the primitives (`bool`, `char`, integers, floats), `String`, `&str`, `Option`,
///    `Vec`, `VecDeque`, `HashMap`, `BTreeMap`, `HashSet`, `BTreeSet`, `PathBuf`,
///    `serde_json::Value` and `Map` (recognised by the last segment of their path), tuples, arrays
///    and slices. A typed input's parameter may be a pattern (`Lookup { id }: Lookup`).
/// 4. **Plain arguments.** Otherwise every other parameter is a plain argument, and the macro generates
///    the input: `CamelCase(function name)` + `Args` (`deploy` → `DeployArgs`, `fetch_ticket` →
///    `FetchTicketArgs`), with the function's visibility and one `pub` field per argument, so an
///    approval function can take `&DeployArgs`. (The struct is generic over its fields' types, each
///    defaulting to the argument's type, `pub struct DeployArgs<__T0 = String>`, so that a type that
///    cannot be an argument is one error at that type; write it as `DeployArgs`, and where a
///    struct literal's field types cannot be inferred, say which: `let args: DeployArgs = ...`.) Each argument
///    needs a name; its type
///    must own its data and implement `Deserialize` and `JsonSchema` (`&str` is the exception: the
///    field is a `String`, lent to the function). An `Option<T>` argument is optional: the model may
///    leave it out, and the function gets `None`. Doc comments, `#[serde(...)]` and
///    `#[schemars(...)]` attributes on an argument move to its field, so they describe and shape the
///    property: `/// The environment.` then `#[serde(rename = "env")] environment: String`. A tool
///    with no parameters takes no arguments (`{"type": "object", "properties": {}}`).
///
/// A single custom argument is therefore the typed input, whose schema is the tool's parameters; to
/// make it one property of the arguments instead, wrap it in a struct of your own.
///
/// # Output
///
/// A return type whose last path segment is `Result` (`Result<T, E>`, `std::io::Result<T>`,
/// `anyhow::Result<T>`) is fallible: `T: Serialize` is the output and `E: Display` the error, which
/// reaches the model as `{"error": "..."}` (the runtime's error policy applies). Any other return type
/// `T: Serialize` is an infallible output; no return type is `()`, sent as `null`.
///
/// When the output type also implements `JsonSchema` and its schema is an object, the tool
/// records it (`Tool::structured_output`): an MCP server advertises it as the tool's
/// `outputSchema` and sends each result as `structuredContent` too.
///
/// # Arguments of `#[tool(...)]`
///
/// Each key but `id`, `description`, `external` and `crate` is one builder method of the runtime's
/// `Tool`, named in the last column, with what the method's docs say.
///
/// | key | meaning | builder |
/// |---|---|---|
/// | `id = "..."` | the id the model calls; default: the function's name. Checked at compile time: 1 to 64 characters of `a-z`, `A-Z`, `0-9`, `_`, `-`. | |
/// | `description = "..."` | what the model reads to choose the tool; a string, or a macro such as `include_str!("deploy.md")`. Default: the function's doc comment (its `///` lines in order, one leading space stripped, joined with `\n`, blank first and last lines dropped). | |
/// | `require_approval` | every call waits for a person's approval (pending kind `tool_approval`). | `require_approval` |
/// | `require_approval = path` | calls wait when the function at `path` says so: `fn(&Input) -> bool` or `fn(&Input, &ToolContext) -> bool`, where `Input` is the typed input or the generated `…Args` struct. | `approval` |
/// | `external` | a declaration without a body (`async fn lookup(input: Lookup) -> Ticket;`): calls pause with pending kind `external_output`, and the output supplied from outside must decode as the return type. No context parameter, and the return type is the output itself (not a `Result`). Read a pending call's input with `pending.input(lookup)` and answer it with `Decisions::typed_output(call_id, lookup, ticket)`. | |
/// | `timeout_ms = 3_000` | a call still running after this many milliseconds fails with `Tool <id> timed out after <n>ms` (its future is dropped, its cancellation token fires); overrides the agent's default. A whole number, at least 1. | `timeout` |
/// | `on_error = "fail-run"` or `"return-to-model"` | what a failed call does (an error, a timeout, a panic, a failed output check): fail the run, or send `{"error": "..."}` to the model; overrides the agent's policy. | `on_error` |
/// | `strict` | the model is held to the schema exactly where the provider can (OpenAI's strict function calling): the tool's schema must be expressible in that dialect, checked when the agent is built. | |
/// | `exclusive` | the tool's calls run alone: the calls before them in the turn finish first, the calls after wait. | `exclusive` |
/// | `max_output_chars = 2_000` | a longer result keeps its start and end around a notice of how much was cut; overrides the agent's cap. A whole number, at least 1. | `max_output_chars` |
/// | `input_schema = path` | a custom input validator `fn(Value) -> Result<Value, E>`: run after the parameter schema check and before decoding, it returns the arguments (changed or not) or an error, which the model reads as `Invalid tool input: $: <error>`. | `input_schema` |
/// | `output_schema = path` | the same for each result (`Invalid tool output: ...`), outputs supplied from outside included. | `output_schema` |
/// | `event_schema = path` | the same for each progress value of `ctx.emit_progress` (a rejected one is not published and fails the call). | `event_schema` |
/// | `on_tool_called = path` | `fn(&Value, &ToolContext) -> Option<Value>`, run instead of the function: `Some(result)` answers at once, `None` pauses the run with pending kind `hitl` until a person supplies the output. | `on_tool_called` |
/// | `on_response_received = path` | `fn(Value) -> Result<Value, E>`: transforms an output supplied for a paused call, or refuses it (`resume` returns the error). | `on_response_received` |
/// | `next_turn = path` | `fn(&Value, &TurnParams) -> TurnParams`: after a successful call, changes the next model request (model, temperature, instructions, tool choice, active tools) from the call's arguments. | `next_turn` |
/// | `title = "..."` | a title for people (MCP clients show it in place of the id). | `title` |
/// | `read_only`, `destructive`, `idempotent`, `open_world` | behaviour hints for clients (MCP's tool annotations): the tool changes nothing; it may destroy or overwrite; a repeated call has no further effect; it reaches outside entities. `read_only` and `destructive` together are an error. | `read_only(true)`, ... |
/// | `crate = path` | the path phaseo-agent is reached by, for a renamed dependency (`crate = my_agent`). | |
///
/// In the signatures, `Value` is `serde_json::Value`, which phaseo-agent re-exports as
/// `phaseo_agent::serde_json::Value` (a crate needs no serde_json dependency of its own), and `E` is
/// any error that implements `Display`. A function key takes the path of a function (not a
/// closure); a function with another signature is a compile error at that path. The keys that take
/// no function need no dependency beyond phaseo-agent.
///
/// ```
/// use phaseo_agent::serde_json::{Value, json};
/// use phaseo_agent::{Agent, AgentError, ScriptedModel, TurnParams, tool};
///
/// /// Search the knowledge base.
/// #[tool(
///     timeout_ms = 3_000,
///     max_output_chars = 2_000,
///     input_schema = trimmed_query,
///     next_turn = to_the_senior_model
/// )]
/// async fn search(query: String) -> Vec<String> {
///     vec![format!("How to fix: {query}")]
/// }
///
/// fn trimmed_query(input: Value) -> Result<Value, String> {
///     match input["query"].as_str().map(str::trim) {
///         Some("") | None => Err("the query is blank".to_owned()),
///         Some(query) => Ok(json!({"query": query})),
///     }
/// }
///
/// fn to_the_senior_model(_input: &Value, current: &TurnParams) -> TurnParams {
///     current.clone().model("senior-model")
/// }
///
/// /// Migrate the database to a version.
/// #[tool(exclusive, on_error = "fail-run", timeout_ms = 60_000)]
/// async fn migrate(version: u32) -> Result<String, String> {
///     Err(format!("version {version} does not exist"))
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), AgentError> {
/// let model = ScriptedModel::new().record_requests()
///     .tool_call("call_1", "search", json!({"query": "  printer on fire  "}))
///     .tool_call("call_2", "migrate", json!({"version": 7}))
///     .text("unreachable");
/// let agent = Agent::builder("support").model(model.clone()).tool(search).tool(migrate).build()?;
/// let error = agent.run("Help").await.unwrap_err();
/// assert_eq!(error, AgentError::Tool("version 7 does not exist".into()));   // `fail-run`
///
/// let requests = model.requests();
/// assert_eq!(requests[1].model.as_deref(), Some("senior-model"));            // `next_turn`
/// assert!(format!("{:?}", requests[1].messages).contains("How to fix: printer on fire"));
/// # Ok(())
/// # }
/// ```
///
/// **A tool must have a description.** With neither a doc comment nor `description = "..."`, the
/// macro fails at the function's name and asks for one: models choose tools by their description,
/// and the runtime would reject an empty one when the agent is built anyway, later and further from
/// the cause.
///
/// ```
/// use phaseo_agent::{Agent, Decisions, PendingKind, ScriptedModel, tool};
/// use serde_json::json;
///
/// /// Deploy an application environment.
/// #[tool(require_approval = is_production)]
/// async fn deploy(
///     /// `staging` or `production`.
///     environment: String,
/// ) -> String {
///     format!("{environment} deployed")
/// }
///
/// fn is_production(args: &DeployArgs) -> bool {
///     args.environment == "production"
/// }
///
/// /// Look up a customer in the CRM.
/// #[tool(external)]
/// async fn crm_lookup(email: String) -> serde_json::Value;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let model = ScriptedModel::new().record_requests()
///     .tool_call("call_1", "deploy", json!({"environment": "production"}))
///     .text("Deployed.");
/// let agent = Agent::builder("ops").model(model).tool(deploy).tool(crm_lookup).build()?;
/// let paused = agent.run("Ship it").await?;
/// assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
/// let done = agent.resume(&paused.state, Decisions::new().approve("call_1")).await?;
/// assert_eq!(done.output(), Some("Deployed."));
/// # Ok(())
/// # }
/// ```
///
/// # What it expands to
///
/// The function's name becomes a unit struct of the same name, with the function's docs and
/// visibility (`#[allow(non_camel_case_types)] pub struct fetch_ticket;`), and the function moves,
/// unchanged, into an `impl` of that struct as a private associated function of the same name
/// (`fetch_ticket::fetch_ticket`), so the compiler's messages about it name it as you did. The
/// struct:
///
/// - implements `IntoTool`, through the runtime's typed constructors (`Tool::typed`, which runs a
///   plain `fn` on Tokio's blocking pool, and `Tool::external_typed`), so
///   `AgentBuilder::tool(fetch_ticket)` takes it;
///   the keys of the table above are builder calls on the tool it builds, in a fixed order
///   (`Tool::timeout(tool, Duration::from_millis(3_000))`, ..., then the function keys in the order
///   written, each through a helper whose bounds check the function's signature at its path);
/// - implements `Deref` to a function pointer, so `fetch_ticket(input, &ctx)` still calls the function
///   (a call auto-dereferences its callee). For a plain `fn` the pointer has the function's own
///   signature; for an `async fn` it returns the future boxed:
///   `for<'a> fn(FetchTicket, &'a ToolContext) -> BoxFuture<'a, Result<Ticket, String>>`, so
///   `fetch_ticket(input, &ctx).await` works as before. An `external` declaration has no function to
///   call, only the struct, its `IntoTool` and its `ToolTypes`;
/// - implements `ToolTypes`: its `Input` is the typed input or the `…Args` struct, its `Output` the
///   output type (`T` of `-> T` or `-> Result<T, E>`, `()` for no return type), so that
///   `pending.input(fetch_ticket)` reads a pending call's arguments as the input, and
///   `Decisions::typed_output(call_id, fetch_ticket, output)` supplies an output of the output
///   type, checked when the decision is made.
///
/// As with any unit struct, the name is taken in both namespaces of its scope: a `let fetch_ticket = ...`
/// beside it is a pattern matching the struct, not a new variable, so name such variables otherwise.
///
/// Attributes on the function other than docs, `#[cfg]` and `#[deprecated]` stay on the function
/// (`#[cfg]` goes on every generated item). The expansion names only
/// `::phaseo_agent::__private::…` paths, so a crate that uses `#[tool]` with plain arguments needs
/// no dependency on serde, serde_json or schemars.
///
/// When the macro finds a mistake, it reports every one it can at once, each at the token to change,
/// and still emits the function as written, so the rest of the crate keeps type-checking.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, input: TokenStream) -> TokenStream {
    expand::tool(args.into(), input.into()).into()
}

/// Makes the `#[tool]` methods of an `impl` block tools of one shared value: `.tools(helpdesk)`
/// gives them all to an agent.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use phaseo_agent::{Agent, ScriptedModel, ToolContext, tools};
/// use serde_json::json;
///
/// struct Counter {
///     total: AtomicU64,
/// }
///
/// #[tools]
/// impl Counter {
///     /// Add to the running total and return it.
///     #[tool(timeout_ms = 1_000)]
///     async fn add(&self, amount: u64) -> u64 {
///         self.total.fetch_add(amount, Ordering::SeqCst) + amount
///     }
///
///     /// Reset the total; a person approves it first.
///     #[tool(require_approval)]
///     fn reset(&self, ctx: &ToolContext) -> String {
///         self.total.store(0, Ordering::SeqCst);
///         format!("reset in run {}", ctx.run_id())
///     }
///
///     // Not a tool: an ordinary method.
///     fn total(&self) -> u64 {
///         self.total.load(Ordering::SeqCst)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let counter = std::sync::Arc::new(Counter { total: AtomicU64::new(0) });
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "add", json!({"amount": 5}))
///     .text("The total is 5.");
/// let agent = Agent::builder("counter").model(model).tools(counter.clone()).build()?;
/// agent.run("Add 5").await?;
/// assert_eq!(counter.total(), 5);                  // the agent's calls used this value
/// assert_eq!(counter.add(1).await, 6);             // the methods stay methods
/// # Ok(())
/// # }
/// ```
///
/// Give the agent the value itself (`.tools(counter)`: it is moved into an `Arc`) or an
/// `Arc<Counter>` you keep (`.tools(counter.clone())`, as above). Every call of every tool of the
/// set uses that one value, so a method takes `&self`, and state that changes sits behind a lock
/// or an atomic; `self: Arc<Self>` works too, for a method that hands the value to a spawned task.
///
/// A `#[tool]` method supports everything a `#[tool]` function does: a typed input or plain
/// arguments, a `&ToolContext`, `Res<T>` resources, every key of `#[tool(...)]` (function keys take
/// paths such as `Self::is_risky`), and `external` declarations without a body (removed from the
/// block; they have no receiver to call). Plain arguments generate `CamelCase(method)Args` beside
/// the block, as for a function. Methods without `#[tool]` stay as they are.
///
/// Not accepted, each a compile error that says what to write: a trait `impl`, a generic `impl`
/// or `where` clause, `&mut self`, `self` by value, and `#[tool]` on a method of a block without
/// `#[tools]`. `#[tools(crate = path)]` names a renamed dependency for every method.
#[proc_macro_attribute]
pub fn tools(args: TokenStream, input: TokenStream) -> TokenStream {
    methods::tools(args.into(), input.into()).into()
}
