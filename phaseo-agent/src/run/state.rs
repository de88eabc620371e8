//! Runs as data: [`RunState`] (versioned, serde), pending calls, [`Decision`]s and [`RunResult`].

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decode::text::bounded;
use crate::error::AgentError;
use crate::model::message::{Message, ToolCall};
use crate::model::request::{TurnParams, Usage};
use crate::telemetry::context::TraceContext;
use crate::tool::definition::ToolTypes;

/// The version of [`RunState`] this build writes and reads.
///
/// ```
/// use phaseo_agent::{RunState, STATE_VERSION};
///
/// let err = RunState::from_json(r#"{"version": 99}"#).unwrap_err();
/// assert!(err.to_string().contains(&format!("this build reads version {STATE_VERSION}")));
/// ```
pub const STATE_VERSION: u32 = 1;

/// Where a run stands.
///
/// ```
/// use phaseo_agent::{Agent, Decisions, RunStatus, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
/// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Deployed.");
/// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
///
/// let paused = agent.run("Deploy").await?;
/// assert_eq!(paused.status(), RunStatus::WaitingForHuman);
/// assert_eq!(serde_json::to_value(paused.status()).unwrap(), "waiting_for_human");
/// let done = agent.resume(&paused.state, Decisions::new().approve("call_1")).await?;
/// assert_eq!(done.status(), RunStatus::Completed);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The model answered without tool calls; the run has its output.
    Completed,
    /// The run paused: some calls wait for a person's decision (see [`RunState::pending`]).
    WaitingForHuman,
    /// The run failed: `run` and `resume` return the error, and the event stream's `run.failed`
    /// carries the state with this status. A failed state cannot be resumed.
    Failed,
}

/// Why a call is waiting.
///
/// Each kind takes its own decisions: [`Decision::Approve`] (or a rejection) for
/// `tool_approval`, [`Decision::Output`] for `external_output`, either for `hitl`, and
/// [`Decision::Output`] or [`Decision::RerunAfterDoubt`] (never an approval) for
/// `outcome_unknown`.
///
/// ```
/// use phaseo_agent::PendingKind;
///
/// assert_eq!(PendingKind::ExternalOutput.as_str(), "external_output");
/// let kind: PendingKind = serde_json::from_str(r#""tool_approval""#).unwrap();
/// assert_eq!(kind, PendingKind::ToolApproval);
/// // It prints as stored, as `PendingRow::kind` is: in messages, logs and `{:?}` alike.
/// assert_eq!(PendingKind::OutcomeUnknown.to_string(), "outcome_unknown");
/// assert_eq!(format!("{kind:?}"), "tool_approval");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PendingKind {
    /// A gated call waits for approval or rejection.
    ToolApproval,
    /// An external tool's call waits for its output.
    ExternalOutput,
    /// A call handed to a person (an interactive hook or the agent's `human_review`): they supply the
    /// output, reject it, or (if the tool has an executor) approve it to run.
    Hitl,
    /// A call that started before a crash and whose result was never recorded, of a tool not
    /// marked idempotent: it may or may not have done its work, and it is not run again on a
    /// guess. A person checks with the first attempt's
    /// [`idempotency key`](crate::ToolContext::idempotency_key) whether it happened, then
    /// supplies its output ([`Decision::Output`]), rejects it, or runs it again with
    /// [`Decision::RerunAfterDoubt`] (a new attempt, with a new key). An approval is refused: it
    /// would repeat the side effect on one click.
    OutcomeUnknown,
}

impl PendingKind {
    /// The kind's name as stored: `tool_approval`, `external_output`, `hitl` or
    /// `outcome_unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingKind::ToolApproval => "tool_approval",
            PendingKind::ExternalOutput => "external_output",
            PendingKind::Hitl => "hitl",
            PendingKind::OutcomeUnknown => "outcome_unknown",
        }
    }
}

impl std::fmt::Display for PendingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// As stored (`tool_approval`, ...), like [`PendingRow::kind`](crate::store::PendingRow::kind).
impl std::fmt::Debug for PendingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call waiting for a decision.
///
/// ```
/// use phaseo_agent::{Agent, PendingKind, ScriptedModel, Tool, ToolCall};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
/// // The model's argument text, as it sent it.
/// let call = ToolCall::raw("call_1", "deploy", r#" {"environment": "staging"} "#);
/// let model = ScriptedModel::new().tool_calls([call.clone()]);
/// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
///
/// let paused = agent.run("Deploy staging").await?;
/// let pending = &paused.pending()[0];
/// assert_eq!(pending.call, call);
/// assert_eq!(pending.kind, PendingKind::ToolApproval);
/// assert_eq!(pending.arguments, json!({"environment": "staging"})); // parsed and validated
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call, as the model made it.
    pub call: ToolCall,
    /// Why it waits.
    pub kind: PendingKind,
    /// Its parsed, validated arguments (what a person reviews).
    pub arguments: Value,
    /// How many times a person already chose to run this call again after its outcome was lost
    /// (0 for every other call). See [`ToolContext::attempt`](crate::ToolContext::attempt).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub attempt: u32,
    /// For a call whose outcome a crash left unknown: when the attempt that was in flight
    /// started (milliseconds since the Unix epoch), as its journal recorded it; `None` for every
    /// other call, and for journals written before the time was recorded. What a person reads
    /// beside the attempt's [idempotency key](crate::RunState::idempotency_key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

impl PendingCall {
    /// The call's arguments as the input of `tool`, the name of its `#[tool]` function: its typed
    /// input, or its generated `…Args` struct. A call of another tool is refused with
    /// [`AgentError::WrongTool`].
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct PageReceipt {
    ///     page_id: String,
    /// }
    ///
    /// /// Page the on-call person of a team.
    /// #[tool(external)]
    /// fn page_oncall(team: String, message: String) -> PageReceipt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "page_oncall", json!({"team": "db", "message": "disk full"}))
    ///     .text("The db team is paged.");
    /// let agent = Agent::builder("oncall").model(model).tool(page_oncall).build()?;
    /// let paused = agent.run("The db disk is full").await?;
    ///
    /// let pending = &paused.pending()[0];
    /// let args = pending.input(page_oncall)?;            // a `PageOncallArgs`
    /// let receipt = PageReceipt { page_id: format!("page for {}: {}", args.team, args.message) };
    /// let decisions = Decisions::for_run(paused.state.run_id())
    ///     .typed_output(&pending.call.id, page_oncall, receipt)?;
    /// let done = agent.resume(&paused.state, decisions).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"page_id":"page for db: disk full"}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn input<T>(&self, tool: T) -> Result<T::Input, AgentError>
    where
        T: ToolTypes,
        T::Input: DeserializeOwned,
    {
        if self.call.name != tool.id() {
            return Err(AgentError::WrongTool {
                call_id: self.call.id.clone(),
                expected: tool.id().to_owned(),
                found: self.call.name.clone(),
            });
        }
        self.input_as()
    }

    /// The call's arguments as `I`, for a tool with no item to name: a
    /// [`Tool::typed`](crate::Tool::typed) tool, a method of a `#[tools]` block (`SearchArgs` for
    /// `search`). They decode as the tool's own do (an integer written `2.0` is an integer, as the
    /// schema counts it); arguments that do not are refused with [`AgentError::InvalidInput`].
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Lookup {
    ///     ticket_id: String,
    /// }
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Ticket {
    ///     title: String,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let lookup = Tool::external_typed::<Lookup, Ticket>("lookup", "Load one ticket");
    /// let model = ScriptedModel::new().tool_call("call_1", "lookup", json!({"ticket_id": "T-7"}));
    /// let agent = Agent::builder("support").model(model).tool(lookup).build()?;
    /// let paused = agent.run("Load T-7").await?;
    ///
    /// let input: Lookup = paused.pending()[0].input_as()?;
    /// assert_eq!(input.ticket_id, "T-7");
    /// let err = paused.pending()[0].input_as::<Ticket>().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid tool input: $: missing field `title`");
    /// # Ok(())
    /// # }
    /// ```
    pub fn input_as<I: DeserializeOwned>(&self) -> Result<I, AgentError> {
        crate::decode::from_checked_value(&self.arguments).map_err(AgentError::InvalidInput)
    }
}

/// A person's decision about one pending call, bound to its call id in [`Decisions`].
///
/// As serde data a decision is tagged by `decision`, so a review UI can send it as JSON:
///
/// ```
/// use phaseo_agent::Decision;
/// use serde_json::json;
///
/// let decision: Decision = serde_json::from_value(json!({"decision": "reject", "message": "Not now"})).unwrap();
/// assert_eq!(decision, Decision::Reject { message: "Not now".into() });
/// assert_eq!(serde_json::to_value(Decision::ApproveAlways).unwrap(), json!({"decision": "approve_always"}));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Decision {
    /// Run the call as the model made it.
    Approve,
    /// Run the call with these arguments instead; they are validated like the model's own.
    ApproveWithArguments {
        /// The edited arguments.
        arguments: Value,
    },
    /// Run this call, and every later call of the same tool in this run without asking whether it
    /// may run: neither its approval gate nor the agent's `human_review` pauses them. A later
    /// call can still pause for its output (an interactive hook that defers, an external tool):
    /// that asks for a result, not for permission.
    ApproveAlways,
    /// Do not run the call; the model sees the message as the call's result.
    Reject {
        /// Why, for the model.
        message: String,
    },
    /// The call's output, supplied from outside (external and hand-off calls).
    Output {
        /// The output.
        output: Value,
    },
    /// Run again a call whose outcome a crash left unknown
    /// ([`PendingKind::OutcomeUnknown`]), as its next attempt with a new
    /// [`idempotency key`](crate::ToolContext::idempotency_key): the person checked, with the
    /// first attempt's key, that its side effect did not happen.
    ///
    /// It is the only decision that runs such a call: an [`Approve`](Self::Approve) of an
    /// in-doubt call is refused ([`AgentError::DecisionMismatch`]), so a click or a batch that
    /// approves cannot repeat a payment, and the audit log records a re-run as
    /// `rerun_after_doubt`, apart from approvals. If it did happen, supply its outcome with
    /// [`Output`](Self::Output) instead.
    RerunAfterDoubt,
}

impl Decision {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::ApproveWithArguments { .. } => "approve_with_arguments",
            Decision::ApproveAlways => "approve_always",
            Decision::Reject { .. } => "reject",
            Decision::Output { .. } => "output",
            Decision::RerunAfterDoubt => "rerun_after_doubt",
        }
    }
}

/// Decisions for a paused run: one per pending call, each bound to its call id, and (with
/// [`for_run`](Self::for_run)) the whole set bound to the run it answers.
///
/// Name the run. Call ids only name a call within a run, and they repeat across runs (`call_1`
/// in one run and in the next): decisions made for one run, resumed with another run's state
/// (a row swapped in storage, a replayed message, a mix-up in a review queue), would approve that
/// run's calls. Decisions made with [`for_run`](Self::for_run) are refused on any other run's
/// state with [`AgentError::WrongRun`], before anything runs or changes:
///
/// ```
/// use phaseo_agent::{Agent, AgentError, Decisions, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), AgentError> {
/// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "deploy", json!({"environment": "staging"}))
///     .tool_call("call_1", "deploy", json!({"environment": "production"}));
/// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
/// let staging = agent.run("Deploy staging").await?.state;
/// let production = agent.run("Deploy production").await?.state;
///
/// // A reviewer approved the staging run's call_1 ...
/// let approved = Decisions::for_run(staging.run_id()).approve("call_1");
/// // ... and those decisions never approve the production run's call_1.
/// let err = agent.resume(&production, approved).await.unwrap_err();
/// assert!(matches!(err.error, AgentError::WrongRun { .. }));
/// # Ok(())
/// # }
/// ```
///
/// [`Decisions::new`] names no run: it is checked against the call ids alone. Use it only where
/// the decisions cannot meet another run's state (they are made right next to the state they
/// answer, in one function, as in a test); when decisions travel apart from the state (a review
/// UI, a queue, a database), use [`for_run`](Self::for_run).
///
/// ```
/// use phaseo_agent::Decisions;
/// use serde_json::json;
///
/// let decisions = Decisions::for_run("run_42")
///     .approve("call_1")
///     .reject("call_2", "Not during the freeze")
///     .output("call_3", json!({"title": "Printer on fire"}));
/// assert_eq!(decisions.len(), 3);
/// assert_eq!(decisions.run_id(), Some("run_42"));
/// ```
///
/// As serde data, decisions bound to a run are an object, `{"run_id": "...", "decisions": [...]}`
/// (other fields are refused, so a misspelt `run_id` cannot unbind them); decisions that name no run
/// are the list of `[call id, decision]` pairs alone, as before run ids were added. Both forms are
/// read back; reading them needs a self-describing format (JSON, YAML, MessagePack, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decisions {
    run_id: Option<String>,
    decisions: Vec<(String, Decision)>,
}

impl Decisions {
    /// No decisions yet, naming no run: checked against call ids only. Prefer
    /// [`for_run`](Self::for_run) when the decisions travel apart from the state they answer.
    pub fn new() -> Self {
        Self::default()
    }

    /// No decisions yet, for the run `run_id` (a state's [`RunState::run_id`]): a resume refuses
    /// them on any other run's state with [`AgentError::WrongRun`].
    pub fn for_run(run_id: impl Into<String>) -> Self {
        Decisions {
            run_id: Some(run_id.into()),
            decisions: Vec::new(),
        }
    }

    /// The run these decisions are for, if they name one.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// Adds a decision.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decision, Decisions, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let restart = Tool::new("restart", "Restart", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "restart", json!({"service": "api"}))
    ///     .tool_call("call_2", "restart", json!({"service": "db"}))
    ///     .text("Both restarted.");
    /// let agent = Agent::builder("ops").model(model).tool(restart).build()?;
    /// let paused = agent.run("Restart api, then db").await?;
    ///
    /// // Approve this call and every later call of `restart` in the run.
    /// let always = Decisions::new().decide("call_1", Decision::ApproveAlways);
    /// let done = agent.resume(&paused.state, always).await?;
    /// assert_eq!(done.output(), Some("Both restarted.")); // call_2 did not pause
    /// # Ok(())
    /// # }
    /// ```
    pub fn decide(mut self, call_id: impl Into<String>, decision: Decision) -> Self {
        self.decisions.push((call_id.into(), decision));
        self
    }

    /// Approves a call.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool, ToolCall};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new()
    ///     .tool_calls(["call_1", "call_2"].map(|id| ToolCall::new(id, "deploy", json!({"region": id}))))
    ///     .text("Deployed.");
    /// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Deploy both regions").await?;
    ///
    /// // Every pending call needs a decision.
    /// let err = agent.resume(&paused.state, Decisions::new().approve("call_1")).await.unwrap_err();
    /// assert!(err.to_string().starts_with("no decision for pending tool calls call_2"));
    /// let both = Decisions::for_run(paused.state.run_id()).approve("call_1").approve("call_2");
    /// assert_eq!(agent.resume(&paused.state, both).await?.state.steps().len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn approve(self, call_id: impl Into<String>) -> Self {
        self.decide(call_id, Decision::Approve)
    }

    /// Approves a call with edited arguments. They are validated like the model's own; arguments
    /// the tool's schema refuses refuse the whole resume, and nothing changes.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy",
    ///     json!({"type": "object", "properties": {"environment": {"type": "string"}}, "required": ["environment"]}),
    ///     |input, _| Ok(json!({"deployed": input["environment"]})))
    ///     .require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({"environment": "production"})).text("Done.");
    /// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Deploy").await?;
    ///
    /// let bad = Decisions::new().approve_with_arguments("call_1", json!({"environment": 7}));
    /// let err = agent.resume(&paused.state, bad).await.unwrap_err();
    /// assert_eq!(err.to_string(), r#"invalid tool input: $.environment: 7 is not of type "string""#);
    /// let staging = Decisions::new().approve_with_arguments("call_1", json!({"environment": "staging"}));
    /// let done = agent.resume(&paused.state, staging).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"deployed":"staging"}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn approve_with_arguments(self, call_id: impl Into<String>, arguments: Value) -> Self {
        self.decide(call_id, Decision::ApproveWithArguments { arguments })
    }

    /// Rejects a call with a message the model sees.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("I will wait.");
    /// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Deploy").await?;
    ///
    /// let rejected = Decisions::new().reject("call_1", "Not during the freeze");
    /// let done = agent.resume(&paused.state, rejected).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"error":"Rejected by a person: Not during the freeze"}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn reject(self, call_id: impl Into<String>, message: impl Into<String>) -> Self {
        self.decide(
            call_id,
            Decision::Reject {
                message: message.into(),
            },
        )
    }

    /// Supplies a call's output: for an external tool, or a call handed to a person.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let quote = Tool::external("quote", "Ask sales for a price", json!({"type": "object"}));
    /// let model = ScriptedModel::new().tool_call("call_1", "quote", json!({"seats": 40})).text("It costs 1200 EUR.");
    /// let agent = Agent::builder("sales").model(model).tool(quote).build()?;
    /// let paused = agent.run("Price for 40 seats?").await?;
    ///
    /// let answer = Decisions::new().output("call_1", json!({"price_eur": 1200}));
    /// let done = agent.resume(&paused.state, answer).await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"price_eur":1200}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn output(self, call_id: impl Into<String>, output: Value) -> Self {
        self.decide(call_id, Decision::Output { output })
    }

    /// Runs again a call whose outcome a crash left unknown, once a person checked (with the
    /// first attempt's idempotency key) that its side effect did not happen:
    /// [`Decision::RerunAfterDoubt`]. Approving such a call is refused.
    ///
    /// ```
    /// use phaseo_agent::{Decision, Decisions};
    ///
    /// let decisions = Decisions::new().rerun_after_doubt("call_1");
    /// assert_eq!(decisions.iter().next(), Some(("call_1", &Decision::RerunAfterDoubt)));
    /// ```
    pub fn rerun_after_doubt(self, call_id: impl Into<String>) -> Self {
        self.decide(call_id, Decision::RerunAfterDoubt)
    }

    /// Supplies a call's output as the output type of `tool` (the name of its `#[tool]` function,
    /// or a `&Tool`), checked now as the resume would check it: through the tool's
    /// `on_response_received` transform, if any, then its output checks (an external typed tool's
    /// output type, an output validator, an output JSON Schema). An output they refuse is an error
    /// here, at decision time, and no decision is added. The call must be a call of `tool`: the
    /// resume checks the output against the call's own tool again.
    ///
    /// ```
    /// use phaseo_agent::{AgentError, Decisions, tool};
    /// use phaseo_agent::serde_json::Value;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct PageReceipt {
    ///     page_id: String,
    /// }
    ///
    /// fn has_a_page_id(output: Value) -> Result<Value, String> {
    ///     match output["page_id"].as_str() {
    ///         Some(id) if !id.is_empty() => Ok(output),
    ///         _ => Err("the page id is blank".to_owned()),
    ///     }
    /// }
    ///
    /// /// Page the on-call person of a team.
    /// #[tool(external, output_schema = has_a_page_id)]
    /// fn page_oncall(team: String, message: String) -> PageReceipt;
    ///
    /// let blank = PageReceipt { page_id: String::new() };
    /// let err = Decisions::for_run("run_1").typed_output("call_1", page_oncall, blank).unwrap_err();
    /// assert_eq!(err, AgentError::InvalidOutput("$: the page id is blank".into()));
    ///
    /// let receipt = PageReceipt { page_id: "P-12".into() };
    /// let decisions = Decisions::for_run("run_1").typed_output("call_1", page_oncall, receipt)?;
    /// assert_eq!(decisions.len(), 1);
    /// # Ok::<(), AgentError>(())
    /// ```
    pub fn typed_output<T>(
        self,
        call_id: impl Into<String>,
        tool: T,
        output: T::Output,
    ) -> Result<Self, AgentError>
    where
        T: ToolTypes,
        T::Output: Serialize,
    {
        let output = serde_json::to_value(output)
            .map_err(|e| AgentError::InvalidOutput(format!("$: {e}")))?;
        tool.tool().check_supplied(output.clone())?;
        Ok(self.output(call_id, output))
    }

    /// The decisions, each with its call id, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Decision)> {
        self.decisions.iter().map(|(id, d)| (id.as_str(), d))
    }

    /// How many decisions there are.
    pub fn len(&self) -> usize {
        self.decisions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }

    /// The run named, and the decisions.
    pub(crate) fn into_parts(self) -> (Option<String>, Vec<(String, Decision)>) {
        (self.run_id, self.decisions)
    }
}

impl Serialize for Decisions {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        match &self.run_id {
            None => self.decisions.serialize(serializer),
            Some(run_id) => {
                let mut bound = serializer.serialize_struct("Decisions", 2)?;
                bound.serialize_field("run_id", run_id)?;
                bound.serialize_field("decisions", &self.decisions)?;
                bound.end()
            }
        }
    }
}

/// The serde form of decisions bound to a run.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoundDecisions {
    run_id: String,
    decisions: Vec<(String, Decision)>,
}

impl<'de> Deserialize<'de> for Decisions {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        use serde::de::{MapAccess, SeqAccess, Visitor};

        struct Form;
        impl<'de> Visitor<'de> for Form {
            type Value = Decisions;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "decisions: {\"run_id\": ..., \"decisions\": [...]} or a list of [call id, decision] pairs",
                )
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Decisions, A::Error> {
                let decisions = Vec::deserialize(SeqAccessDeserializer::new(seq))?;
                Ok(Decisions {
                    run_id: None,
                    decisions,
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Decisions, A::Error> {
                let bound = BoundDecisions::deserialize(MapAccessDeserializer::new(map))?;
                Ok(Decisions {
                    run_id: Some(bound.run_id),
                    decisions: bound.decisions,
                })
            }
        }

        deserializer.deserialize_any(Form)
    }
}

/// What one tool call did: kept on the run's steps.
///
/// ```
/// use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolCall};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), AgentError> {
/// let lookup = Tool::new("lookup", "Load a ticket", json!({"type": "object"}), |input, _| {
///     match input["id"].as_str() {
///         Some("T-1") => Ok(json!({"title": "Printer on fire"})),
///         _ => Err(AgentError::tool("no such ticket")),
///     }
/// });
/// let model = ScriptedModel::new()
///     .tool_calls([ToolCall::new("call_1", "lookup", json!({"id": "T-1"})), ToolCall::new("call_2", "lookup", json!({"id": "T-9"}))])
///     .text("T-1 is about a printer; T-9 does not exist.");
/// let agent = Agent::builder("support").model(model).tool(lookup).build()?;
/// let done = agent.run("Load T-1 and T-9").await?;
///
/// let [found, missing] = done.state.steps() else { panic!("two steps") };
/// assert_eq!((found.step_index, found.tool.as_str(), found.is_error), (0, "lookup", false));
/// assert_eq!(found.content, r#"{"title":"Printer on fire"}"#);
/// assert_eq!((missing.call_id.as_str(), missing.is_error), ("call_2", true));
/// assert_eq!(missing.content, r#"{"error":"no such ticket"}"#);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStep {
    /// The model turn that made the call.
    pub step_index: usize,
    /// The call id.
    pub call_id: String,
    /// The tool id.
    pub tool: String,
    /// The progress values the call published, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preliminary_results: Vec<Value>,
    /// The result the model saw.
    pub content: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// For an error, the operator's diagnostic, which the model is not shown (a panic's message,
    /// the full text of a timeout or a refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A paused turn: its calls in order, and the results of those already answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PausedTurn {
    pub(crate) step_index: usize,
    pub(crate) calls: Vec<ToolCall>,
    pub(crate) results: Vec<Option<ToolStep>>,
}

/// The whole state of a run: plain, versioned serde data.
///
/// A paused run is stored as this state (anywhere: a file, a database row, a queue message) and
/// resumed later, in this process or another, with [`Agent::resume`](crate::Agent::resume).
/// Reading a state written by a newer version fails with
/// [`AgentError::UnsupportedStateVersion`] instead of misreading it.
///
/// ```
/// use phaseo_agent::RunState;
///
/// let err = RunState::from_json(r#"{"version": 99}"#).unwrap_err();
/// assert!(err.to_string().contains("unsupported run state version 99"));
/// ```
///
/// Stored and read back, a state is the same state:
///
/// ```
/// use phaseo_agent::{Agent, RunState, RunStatus, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
/// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({"environment": "staging"}));
/// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
/// let paused = agent.run("Deploy staging").await?;
///
/// let stored: String = paused.state.to_json();
/// let state = RunState::from_json(&stored)?;
/// assert_eq!(state, paused.state);
/// assert_eq!(state.agent_id(), "release");
/// assert_eq!(state.status(), RunStatus::WaitingForHuman);
/// assert_eq!(state.pending()[0].call.id, "call_1");
/// assert_eq!(state.turns(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Value")]
pub struct RunState {
    pub(crate) version: u32,
    pub(crate) run_id: String,
    pub(crate) agent_id: String,
    pub(crate) status: RunStatus,
    pub(crate) turns: usize,
    /// The turns taken before the latest user message (a continued run's `max_turns` counts from
    /// here).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) turn_base: usize,
    pub(crate) messages: Vec<Message>,
    pub(crate) context: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) pending: Vec<PendingCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) paused_turn: Option<PausedTurn>,
    #[serde(default, skip_serializing_if = "TurnParams::is_empty")]
    pub(crate) next_turn: TurnParams,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(crate) approved_tools: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) steps: Vec<ToolStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) output: Option<String>,
    #[serde(default, skip_serializing_if = "Usage::is_zero")]
    pub(crate) usage: Usage,
    /// The trace context of the run's last span, when spans go to OpenTelemetry: the span that
    /// resumes, retries or recovers the run links to it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_trace"
    )]
    pub(crate) trace: Option<Box<TraceContext>>,
    /// When the run paused to wait for people (milliseconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) paused_at_ms: Option<u64>,
    /// Drawn at random when the run is made, and journaled with it: the run's part of every
    /// idempotency key, so that the same run id in another store, under another agent or after
    /// a prune never gives a key of another side effect. A state made before it existed has
    /// none, and its keys are derived as they were then.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nonce_hex")]
    pub(crate) nonce: Option<u128>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) signature: Option<String>,
}

/// A run's nonce as 32 lower-case hex digits (a JSON number that large would lose digits in
/// JavaScript and in other JSON readers).
mod nonce_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        nonce: &Option<u128>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match nonce {
            Some(n) => serializer.serialize_str(&format!("{n:032x}")),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<u128>, D::Error> {
        let Some(text) = Option::<String>::deserialize(deserializer)? else {
            return Ok(None);
        };
        if text.len() != 32 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(serde::de::Error::custom(
                "a run's nonce is 32 lower-case hex digits",
            ));
        }
        u128::from_str_radix(&text, 16)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// The same fields, read after the version check.
#[derive(Deserialize)]
struct StateV1 {
    version: u32,
    run_id: String,
    agent_id: String,
    status: RunStatus,
    turns: usize,
    #[serde(default)]
    turn_base: usize,
    messages: Vec<Message>,
    context: Value,
    #[serde(default)]
    pending: Vec<PendingCall>,
    #[serde(default)]
    paused_turn: Option<PausedTurn>,
    #[serde(default)]
    next_turn: TurnParams,
    #[serde(default)]
    approved_tools: BTreeSet<String>,
    #[serde(default)]
    steps: Vec<ToolStep>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    usage: Usage,
    #[serde(default, deserialize_with = "lenient_trace")]
    trace: Option<Box<TraceContext>>,
    #[serde(default)]
    paused_at_ms: Option<u64>,
    #[serde(default, with = "nonce_hex")]
    nonce: Option<u128>,
    #[serde(default)]
    signature: Option<String>,
}

/// A stored trace context is kept only if well formed (see [`TraceContext::parse`]); one that is
/// not is dropped rather than refusing the run: it is telemetry, not the run's data.
fn lenient_trace<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Box<TraceContext>>, D::Error> {
    // Any value reads; only a well-formed one is kept.
    let raw = Option::<Value>::deserialize(deserializer)?;
    Ok(raw.and_then(|raw| {
        let parent = raw.get("traceparent")?.as_str()?;
        TraceContext::parse(parent, raw.get("tracestate").and_then(Value::as_str)).map(Box::new)
    }))
}

impl TryFrom<Value> for RunState {
    type Error = AgentError;

    fn try_from(value: Value) -> Result<Self, AgentError> {
        let version = value
            .get("version")
            .and_then(Value::as_u64)
            .ok_or_else(|| {
                AgentError::InvalidState(
                    "no `version` field: this is not a phaseo-agent run state".into(),
                )
            })?;
        if version != u64::from(STATE_VERSION) {
            return Err(AgentError::UnsupportedStateVersion {
                found: version,
                supported: STATE_VERSION,
            });
        }
        let s: StateV1 =
            serde_json::from_value(value).map_err(|e| AgentError::InvalidState(e.to_string()))?;
        RunState::from_v1(s)
    }
}

impl RunState {
    /// The state of fields read after the version check; checked as any stored state is.
    fn from_v1(s: StateV1) -> Result<Self, AgentError> {
        let state = RunState {
            version: s.version,
            run_id: s.run_id,
            agent_id: s.agent_id,
            status: s.status,
            turns: s.turns,
            turn_base: s.turn_base,
            messages: s.messages,
            context: s.context,
            pending: s.pending,
            paused_turn: s.paused_turn,
            next_turn: s.next_turn,
            approved_tools: s.approved_tools,
            steps: s.steps,
            output: s.output,
            usage: s.usage,
            trace: s.trace,
            paused_at_ms: s.paused_at_ms,
            nonce: s.nonce,
            signature: s.signature,
        };
        state.check_consistent()?;
        Ok(state)
    }
}

impl RunState {
    /// The state of a run not yet begun: its history, then the user's input; what a run started
    /// in this process and a queued run (`Runs::enqueue`) both begin from.
    pub(crate) fn starting(
        run_id: String,
        agent_id: String,
        context: Value,
        history: Vec<Message>,
        first_turn: Option<TurnParams>,
        input: String,
    ) -> Self {
        let mut state = RunState::new(run_id, agent_id, context);
        state.messages = history;
        state.next_turn = first_turn.unwrap_or_default();
        state.messages.push(Message::User { content: input });
        state
    }

    pub(crate) fn new(run_id: String, agent_id: String, context: Value) -> Self {
        RunState {
            version: STATE_VERSION,
            run_id,
            agent_id,
            status: RunStatus::Completed,
            turns: 0,
            turn_base: 0,
            messages: Vec::new(),
            context,
            pending: Vec::new(),
            paused_turn: None,
            next_turn: TurnParams::default(),
            approved_tools: BTreeSet::new(),
            steps: Vec::new(),
            output: None,
            usage: Usage::default(),
            trace: None,
            paused_at_ms: None,
            nonce: Some(crate::tool::context::draw_nonce()),
            signature: None,
        }
    }

    /// Reads a state from JSON, checking its version first.
    pub fn from_json(json: &str) -> Result<Self, AgentError> {
        // Straight into the fields: one pass over the text. Anything that does not read so (another
        // version, a field repeated) is read again the careful way, for the error it deserves.
        if let Ok(s) = serde_json::from_str::<StateV1>(json)
            && s.version == STATE_VERSION
        {
            return RunState::from_v1(s);
        }
        let value: Value =
            serde_json::from_str(json).map_err(|e| AgentError::InvalidState(e.to_string()))?;
        RunState::try_from(value)
    }

    /// The state as JSON.
    pub fn to_json(&self) -> String {
        // A RunState is made of strings, numbers and JSON values only, so it always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The state as indented JSON, for people.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The idempotency key that attempt `attempt` of the call `call_id` in this run was (or will
    /// be) given ([`ToolContext::idempotency_key`](crate::ToolContext::idempotency_key)): what a
    /// person checks with the tool's target (a payment provider's request log, say) before they
    /// settle a call whose outcome a crash left unknown. Attempt 0 is the call's first run;
    /// [`PendingCall::attempt`] is the attempt that was in flight.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let keyed = Tool::new("keyed", "Its key", json!({"type": "object"}),
    ///     |_, ctx| Ok(json!(ctx.idempotency_key())));
    /// let model = ScriptedModel::new().tool_call("call_1", "keyed", json!({})).text("Done.");
    /// let agent = Agent::builder("pay").model(model).tool(keyed).build()?;
    /// let done = agent.run("Pay").await?;
    /// let key = done.state.idempotency_key("call_1", 0);
    /// assert_eq!(done.state.tool_result("call_1"), Some(format!("\"{key}\"").as_str()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn idempotency_key(&self, call_id: &str, attempt: u32) -> String {
        crate::tool::context::idempotency_key(self.nonce, &self.run_id, call_id, attempt)
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The trace context of the span the run last ran under, when spans went to OpenTelemetry
    /// (the feature `otel` with its layer installed): the span of whatever takes the run up
    /// next (a resume, a retry, a recovery, a continuation) links to it. See
    /// [`telemetry`](crate::telemetry).
    pub fn trace_context(&self) -> Option<&TraceContext> {
        self.trace.as_deref()
    }

    /// When the run paused to wait for people, in milliseconds since the Unix epoch (`None`
    /// unless it waits).
    pub fn paused_at_ms(&self) -> Option<u64> {
        self.paused_at_ms
    }

    /// The id of the agent that made the run.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Where the run stands.
    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// The calls waiting for a decision, in call order.
    pub fn pending(&self) -> &[PendingCall] {
        &self.pending
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The application context (as last set by a tool, or as the run started).
    pub fn context(&self) -> &Value {
        &self.context
    }

    /// The model's final text, once completed.
    pub fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    /// Tokens used by every model turn of the run so far, as providers counted them.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Model turns used so far.
    pub fn turns(&self) -> usize {
        self.turns
    }

    /// What each tool call did, in order.
    pub fn steps(&self) -> &[ToolStep] {
        &self.steps
    }

    /// Results of the paused turn's calls that already ran (or were answered) before the pause, in
    /// call order: what a reviewer may want to see next to the pending calls. They join
    /// [`steps`](Self::steps) when the turn completes.
    pub fn paused_results(&self) -> Vec<&ToolStep> {
        self.paused_turn
            .iter()
            .flat_map(|turn| turn.results.iter().flatten())
            .collect()
    }

    /// What the model saw (or, for a paused turn, will see) as the result of a call, by call id.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let echo = Tool::new("echo", "Echo", json!({"type": "object"}), |input, _| Ok(input));
    /// let model = ScriptedModel::new().tool_call("c1", "echo", json!({"a": 1})).text("done");
    /// let agent = Agent::builder("t").model(model).tool(echo).build()?;
    /// let done = agent.run("go").await?;
    /// assert_eq!(done.state.tool_result("c1"), Some(r#"{"a":1}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_result(&self, call_id: &str) -> Option<&str> {
        let completed = self.steps.iter().rev().find(|s| s.call_id == call_id);
        completed
            .or_else(|| {
                self.paused_results()
                    .into_iter()
                    .find(|s| s.call_id == call_id)
            })
            .map(|s| s.content.as_str())
    }

    /// Whether the state carries a signature (see `AgentBuilder::state_key`).
    pub fn is_signed(&self) -> bool {
        self.signature.is_some()
    }

    /// Overrides waiting to apply to the next model request.
    pub fn next_turn(&self) -> &TurnParams {
        &self.next_turn
    }

    /// A stored state must describe one paused turn whose pending calls are in it.
    pub(crate) fn check_consistent(&self) -> Result<(), AgentError> {
        if self.status != RunStatus::WaitingForHuman {
            return Ok(());
        }
        let Some(turn) = &self.paused_turn else {
            return Err(AgentError::InvalidState(
                "a paused state has no paused turn".into(),
            ));
        };
        if turn.calls.len() != turn.results.len() {
            return Err(AgentError::InvalidState(
                "paused turn: calls and results differ in length".into(),
            ));
        }
        // One pass over the turn's calls, one lookup per pending call: a turn may have many.
        let mut slots = std::collections::HashMap::with_capacity(turn.calls.len());
        for (i, call) in turn.calls.iter().enumerate() {
            if slots.insert(call.id.as_str(), i).is_some() {
                return Err(AgentError::InvalidState(format!(
                    "paused turn: two calls have the id `{}`",
                    bounded(call.id.clone())
                )));
            }
        }
        let mut claimed = vec![false; turn.calls.len()];
        for p in &self.pending {
            // The whole call, not only its id: a pending call is what runs once approved. And each
            // open call is pending once.
            let slot = slots
                .get(p.call.id.as_str())
                .copied()
                .filter(|&i| turn.calls[i] == p.call && turn.results[i].is_none() && !claimed[i]);
            let Some(i) = slot else {
                return Err(AgentError::InvalidState(format!(
                    "pending call `{}` is not an open call of the paused turn, or is pending twice",
                    bounded(p.call.id.clone())
                )));
            };
            claimed[i] = true;
        }
        let open = turn.results.iter().filter(|r| r.is_none()).count();
        if open != self.pending.len() {
            return Err(AgentError::InvalidState(
                "paused turn: open calls and pending calls differ".into(),
            ));
        }
        Ok(())
    }
}

/// Why `run`, `resume` or `retry` returned no result: the error, and the run's state when the run
/// had started (its status is `failed`).
///
/// The state holds the conversation and every step up to the failure (the calls of the failing turn
/// included, with operators' diagnostics in [`ToolStep::error`]): store it for diagnosis, or hand
/// it to [`Agent::retry`](crate::Agent::retry) to ask the model again without running any tool twice.
/// A refused resume or retry (a missing decision, a bad signature, ...) starts no run and has no
/// state: the one you passed is unchanged.
///
/// It compares equal to its [`AgentError`], gives it as its [`source`](std::error::Error::source),
/// and converts into it with `?`.
///
/// ```
/// use phaseo_agent::{Agent, AgentError, ScriptedModel};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let agent = Agent::builder("t").model(ScriptedModel::new()).build().unwrap();
/// let failed = agent.run("hello").await.unwrap_err();      // the script is empty
/// assert!(matches!(failed.error, AgentError::Model(_)));
/// // It reads as its error, and its source is the error's own, so an error report (anyhow,
/// // eyre) tells the failure once.
/// assert_eq!(failed.to_string(), failed.error.to_string());
/// assert!(std::error::Error::source(&failed).is_none());
/// let state = failed.state.expect("the run had started");
/// assert_eq!(state.messages().len(), 1);                     // the user's input
/// # }
/// ```
///
/// Its `{:?}` is short whatever the size of the state (under 1 KB: the error, cut; the run's
/// id and status; how many messages, steps and pending calls it holds): a log line or a panic
/// message never carries a whole conversation. The state is read through
/// [`state`](Self::state) (or the field).
#[derive(Clone, PartialEq)]
pub struct RunError {
    /// What went wrong.
    pub error: AgentError,
    /// The run's state at the failure, if the run had started.
    pub state: Option<Box<RunState>>,
}

impl RunError {
    /// An error before any run started (a refused resume or retry).
    pub(crate) fn refused(error: AgentError) -> Self {
        RunError { error, state: None }
    }

    /// What went wrong.
    pub fn error(&self) -> &AgentError {
        &self.error
    }

    /// The run's state at the failure, if the run had started.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let agent = Agent::builder("t").model(ScriptedModel::new()).build().unwrap();
    /// let failed = agent.run("hello").await.unwrap_err();
    /// let state = failed.state().expect("the run had started");
    /// assert!(format!("{failed:?}").contains(state.run_id()));
    /// # }
    /// ```
    pub fn state(&self) -> Option<&RunState> {
        self.state.as_deref()
    }

    /// The run's state at the failure, taken out of the error.
    pub fn into_state(self) -> Option<RunState> {
        self.state.map(|state| *state)
    }
}

/// Short: the error's text (its first 400 bytes), the run's id and status, and how many
/// messages, steps and pending calls its state holds, never the state itself.
impl std::fmt::Debug for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 400;
        let text = self.error.to_string();
        let mut cut = SHOWN.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let error = if cut < text.len() {
            format!("{}… ({} bytes)", &text[..cut], text.len())
        } else {
            text
        };
        let mut out = f.debug_struct("RunError");
        out.field("kind", &self.error.kind()).field("error", &error);
        match &self.state {
            Some(state) => out
                .field("run_id", &Cut(&state.run_id))
                .field("status", &state.status)
                .field("messages", &state.messages.len())
                .field("steps", &state.steps.len())
                .field("pending", &state.pending.len())
                .finish(),
            None => out.field("state", &None::<()>).finish(),
        }
    }
}

/// An id in a `Debug`, cut to its first 100 bytes.
struct Cut<'a>(&'a str);

impl std::fmt::Debug for Cut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut cut = 100.min(self.0.len());
        while !self.0.is_char_boundary(cut) {
            cut -= 1;
        }
        std::fmt::Debug::fmt(&self.0[..cut], f)
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

/// Transparent: it reads as its error and its source is the error's own (a failed run is told
/// once, not twice, by an error report that walks the sources).
impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

impl PartialEq<AgentError> for RunError {
    fn eq(&self, other: &AgentError) -> bool {
        self.error == *other
    }
}

impl From<RunError> for AgentError {
    fn from(failed: RunError) -> Self {
        failed.error
    }
}

/// The result of `run` or `resume`: completed with an output, or paused with pending calls.
///
/// ```
/// use phaseo_agent::{Agent, RunStatus, ScriptedModel};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let agent = Agent::builder("greeter").model(ScriptedModel::new().text("Hello!")).build()?;
/// let result = agent.run("Hi").await?;
/// assert_eq!(result.status(), RunStatus::Completed);
/// assert!(!result.is_paused());
/// assert!(result.pending().is_empty());
/// assert_eq!(result.output(), Some("Hello!"));
/// assert!(result.usage().is_zero()); // the scripted model counts no tokens
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The run's state: store it to resume a paused run.
    pub state: RunState,
}

impl RunResult {
    /// Where the run stands.
    pub fn status(&self) -> RunStatus {
        self.state.status
    }

    /// The model's final text, once completed.
    pub fn output(&self) -> Option<&str> {
        self.state.output()
    }

    /// Tokens used by every model turn of the run so far (across pauses), as providers counted
    /// them; zero for models that do not say.
    pub fn usage(&self) -> Usage {
        self.state.usage
    }

    /// The calls waiting for a decision.
    pub fn pending(&self) -> &[PendingCall] {
        self.state.pending()
    }

    /// Whether the run paused for a person.
    pub fn is_paused(&self) -> bool {
        self.state.status == RunStatus::WaitingForHuman
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
