//! [`Approvals`]: the one path a person's decision takes, whatever the channel (the inbox's
//! forms, its batch and its signed links, a chat bot, a command line): who may decide, what the
//! person was shown, what the call takes, checked in that order on one load of the run before
//! the store's compare-and-swap records the decision and its audit row. Also [`Runs::decide`],
//! the same record without the people.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::durable::entry::{Entry, now_ms};
use crate::durable::journal::Extra;
use crate::durable::rows::unfit;
use crate::durable::runs::{Runs, StoredRun};
use crate::error::{AgentError, StoreError};
use crate::run::agent::Agent;
use crate::run::state::Decision;
use crate::store::backend::{DecisionRow, PendingRow, utc};
use crate::store::listing::AuditFilter;
use crate::tool::definition::Tool;

/// What a person may do with the calls that wait.
///
/// ```
/// use phaseo_agent::durable::{Role, User};
///
/// assert_eq!(User::viewer("victor").role(), Role::Viewer);
/// assert!(!Role::Viewer.may_decide());
/// assert!(Role::Approver.may_decide() && Role::Admin.may_decide());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sees what waits and the audit log; decides nothing.
    Viewer,
    /// Decides, on the tools they may approve (every tool, unless
    /// [`Approvals::tool_approvers`] names who approves one).
    Approver,
    /// Decides on every tool.
    Admin,
}

impl Role {
    /// Whether the role may record decisions at all.
    pub fn may_decide(self) -> bool {
        !matches!(self, Role::Viewer)
    }

    /// `viewer`, `approver` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Approver => "approver",
            Role::Admin => "admin",
        }
    }
}

/// A person who decides, or looks: a name (what the audit log records) and a role. How they
/// proved who they are is the channel's business (the inbox gives each a token).
///
/// ```
/// use phaseo_agent::durable::{Role, User};
///
/// let alice = User::approver("alice");
/// assert_eq!((alice.name(), alice.role()), ("alice", Role::Approver));
/// assert_eq!(User::admin("root").role(), Role::Admin);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    name: String,
    role: Role,
}

impl User {
    /// A person with a role.
    pub fn new(name: impl Into<String>, role: Role) -> Self {
        User {
            name: name.into(),
            role,
        }
    }

    /// A person who only looks.
    pub fn viewer(name: impl Into<String>) -> Self {
        User::new(name, Role::Viewer)
    }

    /// A person who decides.
    pub fn approver(name: impl Into<String>) -> Self {
        User::new(name, Role::Approver)
    }

    /// A person who decides on every tool.
    pub fn admin(name: impl Into<String>) -> Self {
        User::new(name, Role::Admin)
    }

    /// The name decisions are recorded under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }
}

/// What a person was shown: the call, its run's version and its arguments' digest
/// ([`PendingRow::version`], [`PendingRow::digest`]). A decision is bound to it: on anything
/// else it is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The run.
    pub run_id: String,
    /// The waiting call.
    pub call_id: String,
    /// The run's version the person was shown.
    pub version: u64,
    /// The digest of the arguments the person was shown.
    pub digest: String,
}

impl From<&PendingRow> for Shown {
    fn from(row: &PendingRow) -> Self {
        Shown {
            run_id: row.run_id.clone(),
            call_id: row.call_id.clone(),
            version: row.version,
            digest: row.digest.clone(),
        }
    }
}

/// A decision as a person asks for it, before it is checked against the call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Choice {
    /// Approve the call as shown.
    Approve,
    /// Run a call whose outcome a crash left unknown again; `checked`: the person said they
    /// checked that it did not happen (refused without).
    RerunAfterDoubt {
        /// The person checked that the call's side effect did not happen.
        checked: bool,
    },
    /// Approve the call and the tool's later calls in this run.
    ApproveAlways,
    /// Reject the call with a message the model reads (empty: "Rejected by NAME.").
    Reject {
        /// What the model reads.
        message: String,
    },
    /// Approve the call with other arguments, as JSON text, checked against the tool's schema
    /// and input validators.
    Edit {
        /// The arguments, as JSON text.
        arguments: String,
    },
    /// Supply the call's output (JSON, or else plain text), checked by the tool's output
    /// checks.
    Output {
        /// The output, as JSON text or plain text.
        output: String,
    },
}

impl Choice {
    /// The choice's name: `approve`, `rerun_after_doubt`, `approve_always`, `reject`, `edit`
    /// or `output`.
    pub fn name(&self) -> &'static str {
        match self {
            Choice::Approve => "approve",
            Choice::RerunAfterDoubt { .. } => "rerun_after_doubt",
            Choice::ApproveAlways => "approve_always",
            Choice::Reject { .. } => "reject",
            Choice::Edit { .. } => "edit",
            Choice::Output { .. } => "output",
        }
    }

    /// Whether a call waiting as `kind` (as stored) takes this choice. A decision the run would
    /// refuse on resume is refused before it is recorded: a recorded decision cannot be taken
    /// back.
    pub fn fits(&self, kind: &str) -> bool {
        match self {
            Choice::Reject { .. } => true,
            // A call in doubt is never approved: its side effect may have happened, and one
            // click would repeat it. It runs again only as `RerunAfterDoubt`, after a check.
            Choice::Approve | Choice::ApproveAlways | Choice::Edit { .. } => {
                kind == "tool_approval"
            }
            Choice::RerunAfterDoubt { .. } => kind == IN_DOUBT,
            Choice::Output { .. } => matches!(kind, "external_output" | "hitl" | IN_DOUBT),
        }
    }
}

/// The kind of a call whose outcome a crash left unknown, as stored.
pub(crate) const IN_DOUBT: &str = "outcome_unknown";

/// A decision recorded by [`Approvals::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decided {
    /// The run.
    pub run_id: String,
    /// The run's agent.
    pub agent_id: String,
    /// The run's version after the decision.
    pub version: u64,
    /// Every call the run waits on is decided now: it may be resumed
    /// ([`DurableAgent::resume`](crate::durable::DurableAgent::resume), without decisions given).
    pub ready: bool,
}

/// Why a decision was not recorded. Nothing was written in any case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// A viewer decides nothing.
    #[error("{user} is a viewer and may not decide")]
    Viewer {
        /// The person.
        user: String,
    },
    /// The person is not among the tool's approvers ([`Approvals::tool_approvers`]).
    #[error("{user} may not decide calls of {tool}")]
    NotApprover {
        /// The person.
        user: String,
        /// The tool.
        tool: String,
    },
    /// The call does not wait (any more), or its run is not stored.
    #[error("call {call_id} of run {run_id} does not wait for a decision")]
    NotWaiting {
        /// The run.
        run_id: String,
        /// The call.
        call_id: String,
        /// Who decided it, if the audit log says.
        decided_by: Option<String>,
    },
    /// Someone decided the call already.
    #[error("call {call_id} was already decided by {by}")]
    AlreadyDecided {
        /// The call.
        call_id: String,
        /// Who decided it.
        by: String,
    },
    /// The call's arguments or the run's version changed since the person was shown them.
    #[error("call {call_id} or its run changed since it was shown")]
    Changed {
        /// The call.
        call_id: String,
    },
    /// A call in doubt is settled one by one, after a check, never in a batch.
    #[error("call {call_id} is in doubt: it is not settled in a batch")]
    InDoubtInBatch {
        /// The call.
        call_id: String,
    },
    /// The choice does not fit why the call waits ([`Choice::fits`]).
    #[error("a call waiting as {kind} cannot be decided by {choice}")]
    WrongKind {
        /// Why the call waits, as stored.
        kind: String,
        /// The choice's name.
        choice: &'static str,
    },
    /// [`Choice::RerunAfterDoubt`] without the check.
    #[error("a call in doubt runs again only once the person checked that it did not happen")]
    Unchecked,
    /// The tool may not be approved for the rest of the run ([`Approvals::approve_always`]).
    #[error("{tool} may not be approved for the rest of the run")]
    NotAlways {
        /// The tool.
        tool: String,
    },
    /// Edited arguments, for a tool this service was not given ([`Approvals::agent`]): they
    /// cannot be checked.
    #[error("the tool {tool} of agent {agent_id} is not known here, so edits cannot be checked")]
    UnknownTool {
        /// The run's agent.
        agent_id: String,
        /// The tool.
        tool: String,
    },
    /// Edited arguments that are not JSON.
    #[error("the edited arguments are not json: {0}")]
    NotJson(String),
    /// Edited arguments the tool's schema or input validators refuse.
    #[error("the edited arguments do not fit the tool's schema: {0}")]
    Schema(String),
    /// A supplied output the tool's output checks refuse.
    #[error("the output does not fit the tool's checks: {0}")]
    Output(String),
    /// The store's compare-and-swap refused it, or the run would refuse it on resume
    /// ([`StoreError::StaleDecision`], [`AgentError::DecisionMismatch`]), or the store failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

/// Who may decide what, and the one path every decision takes: a person's [`Choice`] on what
/// they were [`Shown`], checked (their role and the tool's approvers, the call still waiting as
/// shown, the choice fitting why it waits, edited arguments against the tool's schema, approve
/// always allowed for the tool) on one load of the run, then recorded with its audit row by the
/// store's compare-and-swap: two people deciding at once get one outcome. The inbox's forms, its
/// batch and its signed links call it; so does any other channel (a chat bot, a command line).
///
/// ```
/// use phaseo_agent::durable::{Approvals, Choice, Runs, Shown, User};
/// use phaseo_agent::store::{MemoryStore, PendingFilter};
/// use phaseo_agent::{Agent, ScriptedModel, Tool};
/// use phaseo_agent::serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runs = Runs::new(MemoryStore::new());
/// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
/// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Deployed.");
/// let agent = runs.attach(Agent::builder("release").model(model).tool(deploy).build()?);
/// agent.run("Deploy").await?;
///
/// let approvals = Approvals::new(runs.clone())
///     .agent(agent.agent())
///     .tool_approvers("deploy", ["ada"]);
/// let item = runs.pending(&PendingFilter::default()).await?.items.remove(0);
///
/// // A chat bot: "ada" answered "approve" to the message that showed `item`.
/// let decided = approvals.decide(&User::approver("ada"), &Shown::from(&item), Choice::Approve).await?;
/// assert!(decided.ready);
/// // Grace is not among deploy's approvers; and the call is decided already.
/// assert!(approvals.decide(&User::approver("grace"), &Shown::from(&item), Choice::Approve).await.is_err());
///
/// let done = agent.resume(&decided.run_id).await?;
/// assert_eq!(done.output(), Some("Deployed."));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Approvals {
    runs: Runs,
    agents: HashMap<String, Agent>,
    approvers: HashMap<String, HashSet<String>>,
    approve_always: HashMap<String, bool>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("approvers", &self.approvers)
            .field("approve_always", &self.approve_always)
            .finish_non_exhaustive()
    }
}

impl Approvals {
    /// Decisions on the runs of `runs`: every approver decides every tool, edits are refused
    /// until the run's agent is given ([`agent`](Self::agent)).
    pub fn new(runs: Runs) -> Self {
        Approvals {
            runs,
            agents: HashMap::new(),
            approvers: HashMap::new(),
            approve_always: HashMap::new(),
        }
    }

    /// The run store decisions are recorded in.
    pub fn runs(&self) -> &Runs {
        &self.runs
    }

    /// The agent whose runs are decided here: its tools check edited arguments and supplied
    /// outputs, and say which are destructive (never approved for the rest of a run unless
    /// [`approve_always`](Self::approve_always) allows it).
    pub fn agent(mut self, agent: &Agent) -> Self {
        self.agents.insert(agent.id().to_owned(), agent.clone());
        self
    }

    /// Who may decide calls of `tool`: only these approvers (and admins). Without it, every
    /// approver may. A second list for a tool replaces the first.
    pub fn tool_approvers<I, S>(mut self, tool: &str, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.approvers
            .insert(tool.to_owned(), names.into_iter().map(Into::into).collect());
        self
    }

    /// Whether `tool` may be approved for the rest of a run ([`Choice::ApproveAlways`]).
    /// Default: yes for a tool of a known agent ([`agent`](Self::agent)) not marked
    /// destructive, no otherwise.
    pub fn approve_always(mut self, tool: &str, allowed: bool) -> Self {
        self.approve_always.insert(tool.to_owned(), allowed);
        self
    }

    /// Whether `user` may decide calls of `tool`.
    pub fn may_decide(&self, user: &User, tool: &str) -> bool {
        match user.role() {
            Role::Viewer => false,
            Role::Admin => true,
            Role::Approver => self
                .approvers
                .get(tool)
                .is_none_or(|names| names.contains(user.name())),
        }
    }

    /// Whether a call's tool may be approved for the rest of its run.
    pub fn may_approve_always(&self, row: &PendingRow) -> bool {
        if let Some(&allowed) = self.approve_always.get(&row.tool) {
            return allowed;
        }
        self.tool(&row.agent_id, &row.tool)
            .is_some_and(|tool| tool.hints().destructive != Some(true))
    }

    /// The tool `tool` of the agent `agent_id`, if that agent was given.
    pub(crate) fn tool(&self, agent_id: &str, tool: &str) -> Option<&Tool> {
        self.agents
            .get(agent_id)?
            .tools()
            .iter()
            .find(|t| t.id() == tool)
    }

    /// Records `user`'s `choice` on the call they were `shown`; see [`Approvals`].
    pub async fn decide(
        &self,
        user: &User,
        shown: &Shown,
        choice: Choice,
    ) -> Result<Decided, ApprovalError> {
        self.record(user, shown, choice, false).await
    }

    /// As [`decide`](Self::decide), for one item of a batch: a call in doubt is refused
    /// ([`ApprovalError::InDoubtInBatch`]), being settled on its own after a check.
    pub async fn decide_in_batch(
        &self,
        user: &User,
        shown: &Shown,
        choice: Choice,
    ) -> Result<Decided, ApprovalError> {
        self.record(user, shown, choice, true).await
    }

    async fn record(
        &self,
        user: &User,
        shown: &Shown,
        choice: Choice,
        batch: bool,
    ) -> Result<Decided, ApprovalError> {
        if !user.role().may_decide() {
            return Err(ApprovalError::Viewer {
                user: user.name().to_owned(),
            });
        }
        let (run_id, call_id) = (shown.run_id.as_str(), shown.call_id.as_str());
        let stored = match self.runs.load(run_id).await {
            Ok(stored) => stored,
            Err(AgentError::Store(StoreError::NotFound { .. })) => {
                return Err(self.gone(run_id, call_id).await);
            }
            Err(other) => return Err(other.into()),
        };
        let Some(row) = stored.pending.iter().find(|p| p.call_id == call_id) else {
            return Err(self.gone(run_id, call_id).await);
        };
        if !self.may_decide(user, &row.tool) {
            return Err(ApprovalError::NotApprover {
                user: user.name().to_owned(),
                tool: row.tool.clone(),
            });
        }
        if let Some(by) = &row.decided_by {
            return Err(ApprovalError::AlreadyDecided {
                call_id: call_id.to_owned(),
                by: by.clone(),
            });
        }
        if row.version != shown.version || row.digest != shown.digest {
            return Err(ApprovalError::Changed {
                call_id: call_id.to_owned(),
            });
        }
        if batch && row.kind == IN_DOUBT {
            return Err(ApprovalError::InDoubtInBatch {
                call_id: call_id.to_owned(),
            });
        }
        let decision = self.decision(row, choice, user)?;
        let version = self
            .runs
            .record(&stored, row, decision, user.name())
            .await?;
        let ready = stored
            .pending
            .iter()
            .all(|p| p.call_id == call_id || p.decision.is_some());
        Ok(Decided {
            run_id: run_id.to_owned(),
            agent_id: stored.state.agent_id().to_owned(),
            version,
            ready,
        })
    }

    /// Why a call no longer waits: who decided it, if the audit log says.
    async fn gone(&self, run_id: &str, call_id: &str) -> ApprovalError {
        let filter = AuditFilter {
            run_id: Some(run_id.to_owned()),
            limit: 1000,
            ..AuditFilter::default()
        };
        let decided_by = self.runs.audit(&filter).await.ok().and_then(|page| {
            page.items
                .into_iter()
                .rev()
                .find(|d| d.call_id == call_id)
                .map(|d| d.by)
        });
        ApprovalError::NotWaiting {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
            decided_by,
        }
    }

    /// A choice as a decision the run will take: the right kind, edited arguments that pass the
    /// tool's schema and input validators, an output its output checks accept.
    fn decision(
        &self,
        row: &PendingRow,
        choice: Choice,
        user: &User,
    ) -> Result<Decision, ApprovalError> {
        if !choice.fits(&row.kind) {
            return Err(ApprovalError::WrongKind {
                kind: row.kind.clone(),
                choice: choice.name(),
            });
        }
        let tool = self.tool(&row.agent_id, &row.tool);
        Ok(match choice {
            Choice::Approve => Decision::Approve,
            Choice::RerunAfterDoubt { checked: true } => Decision::RerunAfterDoubt,
            Choice::RerunAfterDoubt { checked: false } => return Err(ApprovalError::Unchecked),
            Choice::ApproveAlways if !self.may_approve_always(row) => {
                return Err(ApprovalError::NotAlways {
                    tool: row.tool.clone(),
                });
            }
            Choice::ApproveAlways => Decision::ApproveAlways,
            Choice::Reject { message } => Decision::Reject {
                message: if message.trim().is_empty() {
                    format!("Rejected by {}.", user.name())
                } else {
                    message
                },
            },
            Choice::Edit { arguments } => {
                let Some(tool) = tool else {
                    return Err(ApprovalError::UnknownTool {
                        agent_id: row.agent_id.clone(),
                        tool: row.tool.clone(),
                    });
                };
                let arguments: Value = serde_json::from_str(&arguments)
                    .map_err(|e| ApprovalError::NotJson(e.to_string()))?;
                tool.parse_call(&arguments.to_string())
                    .map_err(|e| ApprovalError::Schema(e.to_string()))?;
                Decision::ApproveWithArguments { arguments }
            }
            Choice::Output { output: text } => {
                let output = serde_json::from_str(&text).unwrap_or(Value::String(text));
                let output = match tool {
                    Some(tool) => tool
                        .check_supplied(output)
                        .map_err(|e| ApprovalError::Output(e.to_string()))?,
                    None => output,
                };
                Decision::Output { output }
            }
        })
    }
}

impl Runs {
    /// Records a person's decision on one waiting call, without resuming the run. The decision
    /// names the arguments' digest the person was shown ([`PendingRow::digest`]) and the run
    /// version they were shown at ([`PendingRow::version`]); a decision on other arguments, on a
    /// call no longer waiting, or on one already decided is refused with
    /// [`StoreError::StaleDecision`], and nothing is recorded. Two people deciding the same
    /// call: exactly one is recorded, and the other gets `StaleDecision` naming who decided and
    /// when. Each refusal's reason ends with what to do: nothing, or load the run again and
    /// decide on its current version.
    ///
    /// A decision that does not fit the call's kind is refused with
    /// [`AgentError::DecisionMismatch`] before anything is recorded: above all an approval of a
    /// call whose outcome a crash left unknown (it would repeat a side effect that may have
    /// happened), which only [`Decision::RerunAfterDoubt`] runs again.
    ///
    /// Who decides is not checked here: [`Approvals`] checks people, roles and tools' approvers,
    /// and edited arguments, and then records the same way.
    ///
    /// The run resumes with [`DurableAgent::resume`](crate::durable::DurableAgent::resume)
    /// once every waiting call is decided.
    pub async fn decide(
        &self,
        shown: &PendingRow,
        decision: Decision,
        by: &str,
    ) -> Result<u64, AgentError> {
        let (run_id, call_id) = (shown.run_id.as_str(), shown.call_id.as_str());
        let stored = self.load(run_id).await?;
        let Some(row) = stored.pending.iter().find(|p| p.call_id == call_id) else {
            return Err(stale(run_id, call_id, NOT_WAITING));
        };
        if row.version != shown.version || row.digest != shown.digest {
            return Err(stale(
                run_id,
                call_id,
                "the call's arguments or the run's version changed since it was shown: load the \
                 run again and decide on its current version",
            ));
        }
        if let Some(by) = &row.decided_by {
            let reason = self.decided_already(run_id, call_id, by).await;
            return Err(stale(run_id, call_id, &reason));
        }
        self.record(&stored, row, decision, by).await
    }

    /// Records `decision` on `row` of `stored` (as loaded, still undecided): the decision's
    /// entry, the pending rows and the audit row, in one compare-and-swap on the version loaded.
    pub(crate) async fn record(
        &self,
        stored: &StoredRun,
        row: &PendingRow,
        decision: Decision,
        by: &str,
    ) -> Result<u64, AgentError> {
        let (run_id, call_id) = (row.run_id.as_str(), row.call_id.as_str());
        // A decision the run would refuse on resume is refused now: once recorded, it cannot be
        // taken back. An approval of a call in doubt is one (it would repeat a side effect that
        // may have happened): only `Decision::RerunAfterDoubt` runs it again.
        if let Some(refused) = unfit(&stored.state, call_id, &decision) {
            return Err(refused);
        }
        let text = serde_json::to_string(&decision)
            .map_err(|e| AgentError::InvalidState(e.to_string()))?;
        let pending = stored
            .pending
            .iter()
            .cloned()
            .map(|mut p| {
                if p.call_id == call_id {
                    p.decision = Some(text.clone());
                    p.decided_by = Some(by.to_owned());
                }
                p
            })
            .collect();
        let audit = DecisionRow {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
            tool: row.tool.clone(),
            decision: text,
            by: by.to_owned(),
            at_ms: now_ms(),
            digest: row.digest.clone(),
            version: row.version,
        };
        let entry = Entry::Decision {
            call_id: call_id.to_owned(),
            decision,
            by: by.to_owned(),
            digest: row.digest.clone(),
        };
        let extra = Extra {
            pending: Some(pending),
            decisions: vec![audit],
            status: Some(stored.status),
        };
        match self.journal_at(stored).write(entry, extra).await {
            Ok(version) => Ok(version),
            // Two people deciding the same call at once: the one who lost is told who won, as
            // if they had been a moment later, rather than that some version moved on.
            Err(StoreError::Conflict { .. }) => {
                let now = self.load(run_id).await?;
                match now.pending.iter().find(|p| p.call_id == call_id) {
                    Some(PendingRow {
                        decided_by: Some(by),
                        ..
                    }) => {
                        let reason = self.decided_already(run_id, call_id, by).await;
                        Err(stale(run_id, call_id, &reason))
                    }
                    Some(_) => Err(stale(
                        run_id,
                        call_id,
                        "the run moved on while the decision was recorded: load the run again \
                         and decide on its current version",
                    )),
                    None => Err(stale(run_id, call_id, NOT_WAITING)),
                }
            }
            Err(other) => Err(AgentError::Store(other)),
        }
    }

    /// Why a decision on a call someone decided already is refused: who, when (the audit log's
    /// latest decision on the call, if its first page of the run's decisions holds it), and that
    /// there is nothing to do.
    async fn decided_already(&self, run_id: &str, call_id: &str, by: &str) -> String {
        let filter = AuditFilter {
            run_id: Some(run_id.to_owned()),
            after: None,
            limit: 1_000,
        };
        let at = self.audit(&filter).await.ok().and_then(|page| {
            let last = page
                .items
                .into_iter()
                .rev()
                .find(|d| d.call_id == call_id)?;
            Some(last.at_ms)
        });
        match at {
            Some(ms) => format!(
                "it was already decided by {by} at {}: nothing to do",
                utc(ms)
            ),
            None => format!("it was already decided by {by}: nothing to do"),
        }
    }
}

/// A decision refused as stale, with why.
fn stale(run_id: &str, call_id: &str, reason: &str) -> AgentError {
    AgentError::Store(StoreError::StaleDecision {
        run_id: run_id.to_owned(),
        call_id: call_id.to_owned(),
        reason: reason.to_owned(),
    })
}

/// A decision's refusal when its call waits no more.
const NOT_WAITING: &str =
    "the call no longer waits for a decision (it was decided, and the run went on): nothing to do";
