//! [`Inbox`]: its settings, and the one path every decision takes (a form, a batch, a signed
//! link) through the approvals service, with what people read when it refuses.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use serde_json::Value;

use crate::durable::approvals::{ApprovalError, Approvals, Choice, Decided, IN_DOUBT, Shown, User};
use crate::durable::recover::Recovery;
use crate::durable::runs::{DurableAgent, Runs};
use crate::error::{AgentError, StoreError};
use crate::inbox::auth::{Ended, Keys, Link, LinkAction, token_key};
use crate::inbox::pages::{self};
use crate::inbox::recovery::Background;
use crate::store::backend::PendingRow;
use crate::store::listing::{AuditFilter, PendingFilter};

pub(super) const COOKIE: &str = "phaseo_inbox";

/// The cookie that binds the sign-in form to the browser that loaded it: a random nonce, whose
/// HMAC the form carries. A page on another site cannot read it, nor (SameSite=Strict) have the
/// browser send it with a post of its own, so it cannot sign a person in as someone else.
pub(super) const LOGIN_COOKIE: &str = "phaseo_inbox_login";

/// How long a sign-in form stays usable.
pub(super) const LOGIN_FORM_SECS: u64 = 600;

/// Why the inbox could not do what its owner asked (the HTTP side answers with pages instead).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum InboxError {
    /// No user of that name was added with [`Inbox::user`].
    #[error("no user named {0:?} was added to the inbox")]
    UnknownUser(String),
    /// The user may not decide calls of this tool (a viewer, or not among its approvers).
    #[error("{user} may not decide calls of {tool}")]
    NotAllowed {
        /// The user.
        user: String,
        /// The tool.
        tool: String,
    },
    /// An approving link for a call whose outcome a crash left unknown: running it again needs a
    /// person who checked that it did not happen, on the call's own page, never a link or a
    /// batch. A rejecting link is allowed.
    #[error(
        "call {call_id} of run {run_id} is in doubt (its outcome is unknown): it is settled on \
         its page in the inbox, not by an approving link"
    )]
    InDoubt {
        /// The run.
        run_id: String,
        /// The call.
        call_id: String,
    },
}

/// An approval inbox: web pages where people see the calls stored runs wait for and decide
/// them, each decision bound to the arguments and run version the person was shown, recorded
/// once (the store's compare-and-swap), and audited. Mount [`router`](Self::router) in your own
/// axum server, or [`serve`](Self::serve) it alone.
///
/// Once a decision completes the decisions a run waits for, the inbox resumes the run in the
/// background with [`DurableAgent::resume`] (when it was given the run's agent with
/// [`agent`](Self::agent)), so the model's next turn follows; a run that pauses again shows up
/// in the list.
///
/// ```
/// use std::time::Duration;
///
/// use phaseo_agent::inbox::{Inbox, LinkAction, User};
/// use phaseo_agent::durable::Runs;
/// use phaseo_agent::store::{MemoryStore, PendingFilter};
/// use phaseo_agent::{Agent, ScriptedModel, Tool};
/// use phaseo_agent::serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runs = Runs::new(MemoryStore::new());
/// let deploy = Tool::new("deploy", "Deploy a release", json!({"type": "object"}), |v, _| Ok(v))
///     .require_approval();
/// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Deployed.");
/// let agent = runs.attach(Agent::builder("release").model(model).tool(deploy).build()?);
/// agent.run("Deploy").await?;
///
/// let inbox = Inbox::new(runs.clone())
///     .agent(agent)
///     .secret(b"a long random secret, from your secret store")
///     .user("alice-token", User::approver("alice"))
///     .user("victor-token", User::viewer("victor"))
///     .tool_approvers("deploy", ["alice"]);
/// let app: axum::Router = axum::Router::new().nest("/inbox", inbox.router());
///
/// // A link for an email: it approves this call, as alice, within the hour, once.
/// let waiting = runs.pending(&PendingFilter::default()).await?.items.remove(0);
/// let link = inbox.signed_link(&waiting, LinkAction::Approve, "alice", Duration::from_secs(3600))?;
/// assert!(link.starts_with("/link/"));
/// # drop(app);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Inbox {
    pub(super) runs: Runs,
    pub(super) agents: HashMap<String, DurableAgent>,
    pub(super) keys: Keys,
    pub(super) users: HashMap<[u8; 32], User>,
    pub(super) names: HashMap<String, User>,
    /// Who may decide what, and the path every decision takes.
    pub(super) approvals: Approvals,
    pub(super) poll_interval: Duration,
    pub(super) max_event_streams: usize,
    pub(super) session_ttl: Duration,
    pub(super) page_size: usize,
    pub(super) secure_cookie: bool,
    pub(super) ended: Arc<Ended>,
    pub(super) max_ended_sessions: usize,
    pub(super) summaries: HashMap<String, Arc<SummaryFn>>,
    pub(super) recover_every: Duration,
    /// What the inbox does in the background and remembers of it (shared by its clones).
    pub(super) background: Arc<Background>,
}

/// A tool's summary of a call, from its arguments (see [`Inbox::summary`]).
pub(super) type SummaryFn = dyn Fn(&Value) -> Option<String> + Send + Sync;

/// The most characters of a summary shown; a longer one is cut there, with `…`.
pub const MAX_SUMMARY_CHARS: usize = 500;

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("users", &self.names.len())
            .field("poll_interval", &self.poll_interval)
            .field("max_event_streams", &self.max_event_streams)
            .field("session_ttl", &self.session_ttl)
            .field("page_size", &self.page_size)
            .field("max_ended_sessions", &self.max_ended_sessions)
            .field("summaries", &self.summaries.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The default interval at which an open event stream looks for new items.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// The default bound on event streams open at once.
pub const DEFAULT_MAX_EVENT_STREAMS: usize = 64;
/// The default lifetime of a session.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// The default interval between two looks for runs whose process stopped
/// ([`Inbox::recover_every`]).
pub const DEFAULT_RECOVER_EVERY: Duration = Duration::from_secs(30);
/// The default bound on signed-out sessions the inbox remembers
/// ([`Inbox::max_ended_sessions`]).
pub const DEFAULT_MAX_ENDED_SESSIONS: usize = 10_000;

impl Inbox {
    /// An inbox over a store, with no users yet and a secret drawn at random (sessions and links
    /// then last as long as the process: set [`secret`](Self::secret) for them to outlive it, or
    /// to run several processes behind one address).
    pub fn new(runs: Runs) -> Self {
        Inbox {
            approvals: Approvals::new(runs.clone()),
            runs,
            agents: HashMap::new(),
            keys: Keys::random(),
            users: HashMap::new(),
            names: HashMap::new(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            max_event_streams: DEFAULT_MAX_EVENT_STREAMS,
            session_ttl: DEFAULT_SESSION_TTL,
            page_size: 50,
            secure_cookie: false,
            recover_every: DEFAULT_RECOVER_EVERY,
            background: Arc::default(),
            ended: Arc::default(),
            max_ended_sessions: DEFAULT_MAX_ENDED_SESSIONS,
            summaries: HashMap::new(),
        }
    }

    /// How often [`keep_recovering`](Self::keep_recovering) (which [`serve`](Self::serve) runs)
    /// looks for runs whose process stopped. Default: [`DEFAULT_RECOVER_EVERY`], at least 100 ms.
    pub fn recover_every(mut self, every: Duration) -> Self {
        self.recover_every = every.max(Duration::from_millis(100));
        self
    }

    /// Takes up the runs of this inbox's agents ([`agent`](Self::agent)) whose process stopped
    /// (their lease expired), with [`Runs::recover_abandoned`]: each is recovered here, and runs
    /// of other agents are returned as [`Recovery::stuck`] (the list shows them as stuck). A run
    /// whose process is alive is left alone, so every replica of a service may call it at once.
    /// It waits for each run it took up to end or pause.
    ///
    /// [`serve`](Self::serve) takes up abandoned runs itself, when it starts and then every
    /// [`recover_every`](Self::recover_every); an inbox mounted in your own server runs
    /// [`keep_recovering`](Self::keep_recovering) beside it.
    pub async fn recover_abandoned(&self) -> Result<Recovery, AgentError> {
        self.background
            .recover_abandoned(&self.runs, &self.agents)
            .await
    }

    /// Takes up abandoned runs now and then every [`recover_every`](Self::recover_every), for
    /// as long as the future runs: spawn it beside an inbox mounted in your own server
    /// ([`serve`](Self::serve) runs it itself). Each run is recovered in a task of its own (8 at
    /// once), so a recovered run that takes long does not hold up the next look, and a run
    /// abandoned meanwhile is taken up then. A failed look is logged at `warn` and tried again
    /// at the next.
    ///
    /// ```no_run
    /// # use phaseo_agent::inbox::{Inbox, User};
    /// # use phaseo_agent::durable::Runs;
    /// # use phaseo_agent::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).user("alice-token", User::admin("alice"));
    /// let app = axum::Router::new().nest("/inbox", inbox.router());
    /// tokio::spawn({
    ///     let inbox = inbox.clone();
    ///     async move { inbox.keep_recovering().await }
    /// });
    /// # drop(app);
    /// # }
    /// ```
    pub async fn keep_recovering(&self) {
        loop {
            let look = self.background.take_up_abandoned(&self.runs, &self.agents);
            if let Err(error) = look.await {
                tracing::warn!(target: "phaseo_agent::inbox", %error, "looking for abandoned runs failed");
            }
            tokio::time::sleep(self.recover_every).await;
        }
    }

    /// An agent whose runs the inbox resumes once decided, and whose tools' descriptions it shows
    /// and whose tools' schemas (and input validators) it checks edited arguments and supplied
    /// outputs with. Runs of agents not given here are listed and decided, not resumed; their
    /// arguments cannot be edited.
    pub fn agent(mut self, agent: DurableAgent) -> Self {
        self.approvals = self.approvals.agent(agent.agent());
        self.agents.insert(agent.agent().id().to_owned(), agent);
        self
    }

    /// The key that signs session cookies, CSRF tokens and links (HMAC-SHA256): at least 32
    /// random bytes, kept secret. Changing it signs everyone out and voids every link.
    pub fn secret(mut self, key: impl AsRef<[u8]>) -> Self {
        self.keys = Keys::new(key.as_ref());
        self
    }

    /// A person who signs in with `token` (a long random string the operator hands them; only its
    /// SHA-256 is kept). A second user of the same name replaces the first.
    pub fn user(mut self, token: impl AsRef<str>, user: User) -> Self {
        self.users.retain(|_, u| u.name() != user.name());
        self.users.insert(token_key(token.as_ref()), user.clone());
        self.names.insert(user.name().to_owned(), user);
        self
    }

    /// Who may decide calls of `tool`: only these approvers (and admins). Without it, every
    /// approver may.
    pub fn tool_approvers<I, S>(mut self, tool: &str, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.approvals = self.approvals.tool_approvers(tool, names);
        self
    }

    /// How calls of `tool` read for people: `summary` turns a call's arguments into a line such
    /// as "EUR 42.50 to Jane Doe for A-1003", which the list, the item's page and a signed link's
    /// page show above the arguments (the arguments are always shown too: a summary can leave
    /// something out). It applies to the tool of that name of every agent. When it returns
    /// `None` or blank text, or panics (logged as a warning), the arguments are shown alone;
    /// a summary longer than [`MAX_SUMMARY_CHARS`] is cut there. Invisible and
    /// direction-changing characters in it are shown as escapes, as in the arguments. Default:
    /// none, every tool's calls shown by their arguments. A second summary for a tool replaces
    /// the first.
    ///
    /// ```
    /// use phaseo_agent::inbox::Inbox;
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    ///
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).summary("refund", |args| {
    ///     let cents = args["amount_cents"].as_u64()?;
    ///     Some(format!(
    ///         "{} {}.{:02} to {} for {}",
    ///         args["currency"].as_str()?,
    ///         cents / 100,
    ///         cents % 100,
    ///         args["customer"].as_str()?,
    ///         args["order"].as_str()?,
    ///     ))
    /// });
    /// # drop(inbox);
    /// ```
    pub fn summary<F>(mut self, tool: &str, summary: F) -> Self
    where
        F: Fn(&Value) -> Option<String> + Send + Sync + 'static,
    {
        self.summaries.insert(tool.to_owned(), Arc::new(summary));
        self
    }

    /// [`summary`](Self::summary) from the tool's input type: the call's arguments are read as
    /// `T` (the type a typed tool takes), and a call whose arguments do not read as `T` is shown
    /// by its arguments.
    ///
    /// ```
    /// use phaseo_agent::inbox::Inbox;
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Refund {
    ///     order: String,
    ///     amount_cents: u64,
    ///     currency: String,
    ///     customer: String,
    /// }
    ///
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).summary_as("refund", |r: &Refund| {
    ///     let (units, cents) = (r.amount_cents / 100, r.amount_cents % 100);
    ///     format!("{} {units}.{cents:02} to {} for {}", r.currency, r.customer, r.order)
    /// });
    /// # drop(inbox);
    /// ```
    pub fn summary_as<T, F>(self, tool: &str, summary: F) -> Self
    where
        T: serde::de::DeserializeOwned,
        F: Fn(&T) -> String + Send + Sync + 'static,
    {
        self.summary(tool, move |arguments| {
            let input = T::deserialize(arguments).ok()?;
            Some(summary(&input))
        })
    }

    /// The summary of a waiting call, if its tool has one that gives one (see
    /// [`summary`](Self::summary)).
    pub(super) fn summary_of(&self, row: &PendingRow) -> Option<String> {
        let summary = self.summaries.get(&row.tool)?;
        let arguments: Value = serde_json::from_str(&row.arguments).ok()?;
        let text =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| summary(&arguments))) {
                Ok(text) => text?,
                Err(_) => {
                    tracing::warn!(
                        tool = %row.tool,
                        run = %row.run_id,
                        call = %row.call_id,
                        "a tool's summary panicked; the inbox shows the call's arguments instead"
                    );
                    return None;
                }
            };
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let mut cut: String = text.chars().take(MAX_SUMMARY_CHARS).collect();
        if cut.len() < text.len() {
            cut.push('…');
        }
        Some(cut)
    }

    /// Whether people may approve `tool` "for the rest of the run" (its later calls in that run
    /// then run without asking). Off, the item's page offers no such button, and a form that asks
    /// for it anyway is refused (403) and records nothing. Default: on, except for a tool marked
    /// destructive ([`Tool::destructive`](crate::Tool::destructive)`(true)`) and for the tools of
    /// agents the inbox is not given ([`agent`](Self::agent)), whose hints it cannot read; this
    /// setting overrides both, for the tool of that name of every agent.
    ///
    /// ```
    /// use phaseo_agent::inbox::Inbox;
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    ///
    /// // Every refund is looked at, one by one.
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).approve_always("refund", false);
    /// # drop(inbox);
    /// ```
    pub fn approve_always(mut self, tool: &str, allowed: bool) -> Self {
        self.approvals = self.approvals.approve_always(tool, allowed);
        self
    }

    /// Who may decide what in this inbox, and the path its decisions take: the same service for
    /// another channel (a chat bot, a command line) to record decisions by the inbox's rules.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// Whether a call's tool may be approved for the rest of its run (see
    /// [`approve_always`](Self::approve_always)).
    pub(super) fn may_approve_always(&self, row: &PendingRow) -> bool {
        self.approvals.may_approve_always(row)
    }

    /// How often an open event stream reads the store for new items. Default:
    /// [`DEFAULT_POLL_INTERVAL`].
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(10));
        self
    }

    /// How many event streams may be open at once, per router; one more is answered 503.
    /// Default: [`DEFAULT_MAX_EVENT_STREAMS`].
    pub fn max_event_streams(mut self, streams: usize) -> Self {
        self.max_event_streams = streams;
        self
    }

    /// How long a session lasts. Default: [`DEFAULT_SESSION_TTL`].
    pub fn session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = ttl;
        self
    }

    /// How many signed-out sessions the inbox remembers at once (at least 1). Signing out ends
    /// the session on the server: its cookie, kept or copied, is refused from then on. A cookie
    /// is signed, not stored, so the inbox keeps each ended session's id until the session would
    /// have expired ([`session_ttl`](Self::session_ttl)); when this many are kept and none has
    /// expired, signing out ends every session of that person made until then, on every device,
    /// instead of only the one (logged as a warning naming this setting). Default:
    /// [`DEFAULT_MAX_ENDED_SESSIONS`].
    ///
    /// The record is kept in this process, shared by every router of this inbox and its clones:
    /// with several processes behind one address, a session signed out in one is refused by the
    /// others only once it expires.
    pub fn max_ended_sessions(mut self, sessions: usize) -> Self {
        self.max_ended_sessions = sessions.max(1);
        self
    }

    /// How many items a page of the list or the audit log shows (1 to 1,000). Default: 50.
    pub fn page_size(mut self, items: usize) -> Self {
        self.page_size = items.clamp(1, 1000);
        self
    }

    /// Marks the session cookie `Secure` (sent over HTTPS only): set it when the inbox is served
    /// over HTTPS, directly or behind a proxy. Default: off, so that it works on loopback.
    pub fn secure_cookie(mut self, on: bool) -> Self {
        self.secure_cookie = on;
        self
    }

    /// A signed one-time link that decides `row` as `user` once confirmed (a GET shows what it
    /// does; only the confirming POST decides, so a mail scanner that fetches links decides
    /// nothing): a path relative to where the router is mounted. It is bound to the arguments'
    /// digest and the run version in `row`; it is refused once used (the call is decided), and
    /// after `valid_for`.
    pub fn signed_link(
        &self,
        row: &PendingRow,
        action: LinkAction,
        user: &str,
        valid_for: Duration,
    ) -> Result<String, InboxError> {
        let person = self
            .names
            .get(user)
            .ok_or_else(|| InboxError::UnknownUser(user.to_owned()))?;
        if !self.may_decide(person, &row.tool) {
            return Err(InboxError::NotAllowed {
                user: user.to_owned(),
                tool: row.tool.clone(),
            });
        }
        if action == LinkAction::Approve && row.kind == IN_DOUBT {
            return Err(InboxError::InDoubt {
                run_id: row.run_id.clone(),
                call_id: row.call_id.clone(),
            });
        }
        let link = Link {
            run: row.run_id.clone(),
            call: row.call_id.clone(),
            version: row.version,
            digest: row.digest.clone(),
            action,
            user: user.to_owned(),
            expires: now_secs().saturating_add(valid_for.as_secs()),
        };
        Ok(format!("/link/{}", link.token(&self.keys)))
    }

    pub(super) fn may_decide(&self, user: &User, tool: &str) -> bool {
        self.approvals.may_decide(user, tool)
    }

    /// The call as stored now, decided or not.
    pub(super) async fn row(&self, run: &str, call: &str) -> Result<Option<PendingRow>, Refusal> {
        let filter = PendingFilter {
            run_id: Some(run.to_owned()),
            limit: 1000,
            ..PendingFilter::default()
        };
        let page = self.runs.pending(&filter).await.map_err(Refusal::store)?;
        Ok(page.items.into_iter().find(|p| p.call_id == call))
    }

    /// Why a call no longer waits: who decided it, if the audit log says.
    pub(super) async fn gone(&self, run: &str, call: &str) -> Refusal {
        let filter = AuditFilter {
            run_id: Some(run.to_owned()),
            limit: 1000,
            ..AuditFilter::default()
        };
        let by = self.runs.audit(&filter).await.ok().and_then(|page| {
            page.items
                .into_iter()
                .rev()
                .find(|d| d.call_id == call)
                .map(|d| d.by)
        });
        match by {
            Some(by) => Refusal::conflict(format!("This call was already decided by {by}.")),
            None => Refusal::new(
                StatusCode::CONFLICT,
                "This call does not wait for a decision (any more).",
            ),
        }
    }

    /// Every decision's one path, through the approvals service: `batch`, the decision comes
    /// from the list's batch form, which never settles a call in doubt; `changed`, what the
    /// person reads when the call changed since they were shown it.
    pub(super) async fn decide(
        &self,
        user: &User,
        shown: &Shown,
        choice: Choice,
        batch: bool,
        changed: &str,
    ) -> Result<(), Refusal> {
        let decided = if batch {
            self.approvals.decide_in_batch(user, shown, choice).await
        } else {
            self.approvals.decide(user, shown, choice).await
        };
        match decided {
            Ok(decided) => {
                self.resume_if_decided(&decided);
                Ok(())
            }
            Err(error) => Err(refusal(error, changed)),
        }
    }

    /// Resumes a run in the background once every call it waits on is decided.
    pub(super) fn resume_if_decided(&self, decided: &Decided) {
        let Some(agent) = self.agents.get(&decided.agent_id) else {
            return;
        };
        if decided.ready {
            let (agent, run) = (agent.clone(), decided.run_id.clone());
            let inbox = self.clone();
            tokio::spawn(async move {
                if let Err(error) = agent.resume(&run).await {
                    inbox.background.note_failure(&run, &error.error);
                }
            });
        }
    }
}

/// What a person reads when the approvals service refuses a decision, and its status.
pub(super) fn refusal(error: ApprovalError, changed: &str) -> Refusal {
    match error {
        ApprovalError::Viewer { .. } => Refusal::forbidden("A viewer may not decide."),
        ApprovalError::NotApprover { user, tool } => {
            Refusal::forbidden(format!("{user} may not decide calls of {tool}."))
        }
        ApprovalError::NotWaiting {
            decided_by: Some(by),
            ..
        }
        | ApprovalError::AlreadyDecided { by, .. } => {
            Refusal::conflict(format!("This call was already decided by {by}."))
        }
        ApprovalError::NotWaiting { .. } => Refusal::new(
            StatusCode::CONFLICT,
            "This call does not wait for a decision (any more).",
        ),
        ApprovalError::Changed { .. } => Refusal::conflict(changed),
        ApprovalError::InDoubtInBatch { .. } => Refusal::unprocessable(
            "Skipped: its outcome is unknown (its process died while it ran). A call in doubt \
             is settled on its own page, after checking whether it happened, never in a batch.",
        ),
        ApprovalError::WrongKind { kind, choice } => {
            let why = if kind == IN_DOUBT && choice == "approve" {
                " Its outcome is unknown: check whether it happened, then supply its outcome, or \
                 tick that you checked it did not happen and run it again."
            } else {
                ""
            };
            Refusal::unprocessable(format!(
                "This call cannot be decided that way (why it waits: {}).{why}",
                pages::kind_words(&kind)
            ))
        }
        ApprovalError::Unchecked => Refusal::unprocessable(
            "Not recorded: to run a call in doubt again, tick \u{201c}I checked: it did \
             not happen\u{201d} first. If it did happen, supply its outcome instead.",
        ),
        ApprovalError::NotAlways { tool } => Refusal::forbidden(format!(
            "Not recorded: {tool} may not be approved for the rest of the run here; approve \
             this call alone."
        )),
        ApprovalError::UnknownTool { .. } => Refusal::unprocessable(
            "The inbox does not know this run's agent, so it cannot check edited \
             arguments: approve or reject the call as it is.",
        ),
        ApprovalError::NotJson(e) => {
            Refusal::unprocessable(format!("The edited arguments are not JSON: {e}"))
        }
        ApprovalError::Schema(e) => Refusal::unprocessable(format!(
            "The edited arguments do not fit the tool's schema; nothing was \
             recorded.\n{e}"
        )),
        ApprovalError::Output(e) => Refusal::unprocessable(format!(
            "The output does not fit the tool's checks; nothing was recorded.\n{e}"
        )),
        ApprovalError::Agent(AgentError::Store(StoreError::StaleDecision { reason, .. })) => {
            Refusal::conflict(format!("Not recorded: {reason}."))
        }
        ApprovalError::Agent(error @ AgentError::DecisionMismatch { .. }) => {
            Refusal::unprocessable(format!("Not recorded: {error}."))
        }
        ApprovalError::Agent(other) => Refusal::store(other),
    }
}

/// A call still undecided, at the version and digest a person was shown (409 otherwise, saying who
/// decided or that it `changed`).
pub(super) fn still_as_shown(
    row: &PendingRow,
    version: u64,
    digest: &str,
    changed: &str,
) -> Result<(), Refusal> {
    if let Some(by) = &row.decided_by {
        return Err(Refusal::conflict(format!(
            "This call was already decided by {by}."
        )));
    }
    if row.version != version || row.digest != digest {
        return Err(Refusal::conflict(changed));
    }
    Ok(())
}

/// A refused request: its status and what the person reads.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    pub(super) message: String,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }
    pub(super) fn forbidden(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::FORBIDDEN, message)
    }
    pub(super) fn conflict(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::CONFLICT, message)
    }
    pub(super) fn unprocessable(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }
    pub(super) fn store(error: AgentError) -> Self {
        tracing::warn!(%error, "the inbox could not read or write the store");
        Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The run store failed; try again.",
        )
    }
    /// A listing's failure: a paging cursor the store did not make is the request's mistake
    /// (400, naming the parameter); anything else, the store's.
    pub(super) fn listing(error: AgentError) -> Self {
        match error {
            AgentError::Store(StoreError::InvalidCursor { .. }) => Refusal::new(
                StatusCode::BAD_REQUEST,
                "The query parameter `after` is not a paging cursor this inbox made: start again \
                 from the first page.",
            ),
            other => Refusal::store(other),
        }
    }
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
