//! [`Inbox`]: its settings, its axum router, and the one path every decision takes (a form, a
//! batch, a signed link): who may decide, what the person was shown, what the call takes,
//! checked in that order before the store's compare-and-swap records it.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Form, FromRequestParts, OriginalUri, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::durable::approvals::{ApprovalError, Approvals, Choice, Decided, IN_DOUBT, Shown, User};
use crate::durable::journal::{arguments_digest, hex, now_ms};
use crate::durable::recover::Recovery;
use crate::durable::runs::{DurableAgent, Runs};
use crate::error::{AgentError, StoreError};
use crate::inbox::audit::{self, AuditView};
use crate::inbox::auth::{
    Ended, EndedWhat, Keys, Link, LinkAction, Session, random_bytes, token_key,
};
use crate::inbox::html::{SCRIPT, STYLE, escape, home, page, show, unpct};
use crate::inbox::pages::{self, Action, InDoubtView, ItemView, ListQuery};
use crate::inbox::recovery::Background;
use crate::inbox::runs::{self as run_pages, RunView};
use crate::run::state::PendingKind;
use crate::store::backend::{AuditFilter, LoadedRun, Page, PendingFilter, PendingRow};

/// The cookie that carries a session.
const COOKIE: &str = "phaseo_inbox";

/// The cookie that binds the sign-in form to the browser that loaded it: a random nonce, whose
/// HMAC the form carries. A page on another site cannot read it, nor (SameSite=Strict) have the
/// browser send it with a post of its own, so it cannot sign a person in as someone else.
const LOGIN_COOKIE: &str = "phaseo_inbox_login";

/// How long a sign-in form stays usable.
const LOGIN_FORM_SECS: u64 = 600;

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
/// background with [`DurableAgent::resume_decided`] (when it was given the run's agent with
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
    runs: Runs,
    agents: HashMap<String, DurableAgent>,
    keys: Keys,
    users: HashMap<[u8; 32], User>,
    names: HashMap<String, User>,
    /// Who may decide what, and the path every decision takes.
    approvals: Approvals,
    poll_interval: Duration,
    max_event_streams: usize,
    session_ttl: Duration,
    page_size: usize,
    secure_cookie: bool,
    ended: Arc<Ended>,
    max_ended_sessions: usize,
    summaries: HashMap<String, Arc<SummaryFn>>,
    recover_every: Duration,
    /// What the inbox does in the background and remembers of it (shared by its clones).
    background: Arc<Background>,
}

/// A tool's summary of a call, from its arguments (see [`Inbox::summary`]).
type SummaryFn = dyn Fn(&Value) -> Option<String> + Send + Sync;

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
    fn summary_of(&self, row: &PendingRow) -> Option<String> {
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
    fn may_approve_always(&self, row: &PendingRow) -> bool {
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

    /// The inbox as an axum router, to mount anywhere (`Router::new().nest("/inbox", ...)`):
    /// links and redirects follow where it is mounted.
    pub fn router(&self) -> Router {
        let app = Arc::new(App {
            inbox: self.clone(),
            streams: Arc::new(Semaphore::new(self.max_event_streams)),
        });
        Router::new()
            .route("/", get(list))
            .route("/login", get(login_page).post(login))
            .route("/logout", post(logout))
            .route("/events", get(events))
            .route("/runs/{run}", get(run_page))
            .route("/runs/{run}/retry", post(retry))
            .route("/runs/{run}/calls/{call}", get(item).post(decide_form))
            .route("/batch", post(batch))
            .route("/audit", get(audit))
            .route("/link/{token}", get(link_page).post(link_confirm))
            .route("/static/inbox.js", get(script))
            .route("/static/inbox.css", get(style))
            .layer(axum::middleware::map_response(security_headers))
            .with_state(app)
    }

    /// Serves the inbox alone at `addr` until the process ends.
    ///
    /// ```no_run
    /// # use phaseo_agent::inbox::{Inbox, User};
    /// # use phaseo_agent::durable::Runs;
    /// # use phaseo_agent::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).user("alice-token", User::admin("alice"));
    /// inbox.serve("127.0.0.1:8080").await
    /// # }
    /// ```
    pub async fn serve(&self, addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        self.serve_listener(listener).await
    }

    /// Serves the inbox alone on a listener already bound (port 0 picks a free port; read it
    /// with `local_addr` before handing the listener over).
    ///
    /// ```no_run
    /// # use phaseo_agent::inbox::{Inbox, User};
    /// # use phaseo_agent::durable::Runs;
    /// # use phaseo_agent::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).user("alice-token", User::admin("alice"));
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// println!("http://{}/", listener.local_addr()?);
    /// inbox.serve_listener(listener).await
    /// # }
    /// ```
    ///
    /// Beside serving, it takes up runs of its agents whose process stopped, at once and then
    /// every [`recover_every`](Self::recover_every)
    /// ([`keep_recovering`](Self::keep_recovering)).
    pub async fn serve_listener(&self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let inbox = self.clone();
        let recovering = tokio::spawn(async move { inbox.keep_recovering().await });
        let served = axum::serve(listener, self.router()).await;
        recovering.abort();
        served
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

    fn may_decide(&self, user: &User, tool: &str) -> bool {
        self.approvals.may_decide(user, tool)
    }

    /// The call as stored now, decided or not.
    async fn row(&self, run: &str, call: &str) -> Result<Option<PendingRow>, Refusal> {
        let filter = PendingFilter {
            run_id: Some(run.to_owned()),
            limit: 1000,
            ..PendingFilter::default()
        };
        let page = self.runs.pending(&filter).await.map_err(Refusal::store)?;
        Ok(page.items.into_iter().find(|p| p.call_id == call))
    }

    /// Why a call no longer waits: who decided it, if the audit log says.
    async fn gone(&self, run: &str, call: &str) -> Refusal {
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
    async fn decide(
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
    fn resume_if_decided(&self, decided: &Decided) {
        let Some(agent) = self.agents.get(&decided.agent_id) else {
            return;
        };
        if decided.ready {
            let (agent, run) = (agent.clone(), decided.run_id.clone());
            let inbox = self.clone();
            tokio::spawn(async move {
                if let Err(error) = agent.resume_decided(&run).await {
                    inbox.background.note_failure(&run, &error.error);
                }
            });
        }
    }
}

/// What a person reads when the approvals service refuses a decision, and its status.
fn refusal(error: ApprovalError, changed: &str) -> Refusal {
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
fn still_as_shown(
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

/// A form's choice, before it is checked.
fn choice_of(fields: &Fields) -> Result<Choice, Refusal> {
    let text = |name| fields.get(name).unwrap_or_default().to_owned();
    let action = fields.get("action").and_then(Action::parse);
    Ok(match action {
        Some(Action::Approve) => Choice::Approve,
        Some(Action::Rerun) => Choice::RerunAfterDoubt {
            checked: fields.get("checked") == Some("yes"),
        },
        Some(Action::ApproveAlways) => Choice::ApproveAlways,
        Some(Action::Reject) => Choice::Reject {
            message: text("message"),
        },
        Some(Action::Edit) => Choice::Edit {
            arguments: text("arguments"),
        },
        Some(Action::Output) => Choice::Output {
            output: text("output"),
        },
        None => return Err(Refusal::unprocessable("The form names no known action.")),
    })
}

/// A refused request: its status and what the person reads.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }
    fn forbidden(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::FORBIDDEN, message)
    }
    fn conflict(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::CONFLICT, message)
    }
    fn unprocessable(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }
    fn store(error: AgentError) -> Self {
        tracing::warn!(%error, "the inbox could not read or write the store");
        Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The run store failed; try again.",
        )
    }
    /// A listing's failure: a paging cursor the store did not make is the request's mistake
    /// (400, naming the parameter); anything else, the store's.
    fn listing(error: AgentError) -> Self {
        match error {
            AgentError::Store(StoreError::InvalidCursor { .. }) => Refusal::new(
                StatusCode::BAD_REQUEST,
                "The query parameter `after` is not a paging cursor this inbox made: start again \
                 from the first page.",
            ),
            other => Refusal::store(other),
        }
    }
    fn page(&self, ctx: &Ctx, back: Option<&str>) -> Response {
        let body = pages::refused(&self.message, back);
        let title = if self.status.is_server_error() {
            "Error"
        } else {
            "Refused"
        };
        (self.status, Html(page(title, &ctx.base, ctx.nav(), &body))).into_response()
    }
}

/// The router's state.
struct App {
    inbox: Inbox,
    streams: Arc<Semaphore>,
}

type Shared = Arc<App>;

/// A form's fields, repeated ones included (a batch's items).
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What every handler knows about a request: where the router is mounted, and who is signed in.
struct Ctx {
    base: String,
    signed_in: Option<(Session, User, String)>,
}

// The error is the response a handler returns at once, built once per request: boxing it would
// only add an allocation.
#[allow(clippy::result_large_err)]
impl Ctx {
    fn nav(&self) -> Option<(&str, &str)> {
        self.signed_in
            .as_ref()
            .map(|(_, user, csrf)| (user.name(), csrf.as_str()))
    }

    /// The signed-in person, or the redirect to the sign-in page.
    fn user(&self) -> Result<(&Session, &User, &str), Response> {
        match &self.signed_in {
            Some((session, user, csrf)) => Ok((session, user, csrf)),
            None => Err(see_other(&format!("{}/login", self.base), None)),
        }
    }

    /// The signed-in person, if the form carries their session's CSRF token; a 403 otherwise.
    fn posted(&self, app: &App, fields: &Fields) -> Result<&User, Response> {
        let (session, user, _) = self.user()?;
        let csrf = fields.get("csrf").unwrap_or_default();
        if !app.inbox.keys.csrf_ok(&session.id, csrf) {
            let refusal = Refusal::forbidden(
                "The form's CSRF token is missing or wrong: reload the page and try again.",
            );
            return Err(refusal.page(self, None));
        }
        Ok(user)
    }
}

impl FromRequestParts<Shared> for Ctx {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, Infallible> {
        let path = parts.uri.path();
        let full = parts
            .extensions
            .get::<OriginalUri>()
            .map(|o| o.0.path())
            .unwrap_or(path);
        let base = match full.strip_suffix(path) {
            Some(base) => base,
            None if path == "/" => full,
            None => "",
        };
        let base = base.trim_end_matches('/').to_owned();
        let now = now_secs();
        let signed_in = cookies(&parts.headers, COOKIE)
            .filter_map(|value| Session::read(&app.inbox.keys, value, now))
            .find(|session| !app.inbox.ended.is_ended(session))
            .and_then(|session| {
                let user = app.inbox.names.get(&session.user)?.clone();
                let csrf = app.inbox.keys.csrf(&session.id);
                Some((session, user, csrf))
            });
        Ok(Ctx { base, signed_in })
    }
}

/// The values of the cookies named `name` a request carries.
fn cookies<'h>(
    headers: &'h axum::http::HeaderMap,
    name: &'h str,
) -> impl Iterator<Item = &'h str> + 'h {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(move |c| c.trim().strip_prefix(name)?.strip_prefix('='))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn see_other(to: &str, cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

fn html(ctx: &Ctx, status: StatusCode, title: &str, body: &str) -> Response {
    (status, Html(page(title, &ctx.base, ctx.nav(), body))).into_response()
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SCRIPT,
    )
        .into_response()
}

async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        STYLE,
    )
        .into_response()
}

/// The sign-in page, with a fresh nonce in its cookie and the nonce's MAC in the form.
fn login_form(app: &App, ctx: &Ctx, status: StatusCode, error: Option<&str>) -> Response {
    let nonce = hex(&random_bytes::<16>());
    let csrf = app.inbox.keys.csrf(&format!("login:{nonce}"));
    let body = pages::login(&ctx.base, &csrf, error);
    let mut response = html(ctx, status, "Sign in", &body);
    let cookie = format!(
        "{LOGIN_COOKIE}={nonce}; Path={}; Max-Age={LOGIN_FORM_SECS}; HttpOnly; SameSite=Strict{}",
        home(&ctx.base),
        if app.inbox.secure_cookie {
            "; Secure"
        } else {
            ""
        }
    );
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

async fn login_page(State(app): State<Shared>, ctx: Ctx) -> Response {
    login_form(&app, &ctx, StatusCode::OK, None)
}

async fn login(
    State(app): State<Shared>,
    ctx: Ctx,
    headers: axum::http::HeaderMap,
    Form(fields): Form<Fields>,
) -> Response {
    let form_ok = cookies(&headers, LOGIN_COOKIE).any(|nonce| {
        app.inbox.keys.csrf_ok(
            &format!("login:{nonce}"),
            fields.get("csrf").unwrap_or_default(),
        )
    });
    if !form_ok {
        return login_form(
            &app,
            &ctx,
            StatusCode::FORBIDDEN,
            Some(
                "This sign-in form is not one this inbox gave this browser (or it is older than ten minutes): sign in again here.",
            ),
        );
    }
    let token = fields.get("token").unwrap_or_default();
    let Some(user) = app.inbox.users.get(&token_key(token)) else {
        return login_form(
            &app,
            &ctx,
            StatusCode::UNAUTHORIZED,
            Some("That token is not one this inbox knows."),
        );
    };
    let ttl = app.inbox.session_ttl.as_secs();
    let session = Session::new(user.name(), now_secs().saturating_add(ttl));
    let cookie = format!(
        "{COOKIE}={}; Path={}; Max-Age={ttl}; HttpOnly; SameSite=Strict{}",
        session.cookie_value(&app.inbox.keys),
        home(&ctx.base),
        if app.inbox.secure_cookie {
            "; Secure"
        } else {
            ""
        }
    );
    see_other(&home(&ctx.base), Some(cookie))
}

async fn logout(State(app): State<Shared>, ctx: Ctx, Form(fields): Form<Fields>) -> Response {
    if let Err(response) = ctx.posted(&app, &fields) {
        return response;
    }
    if let Some((session, user, _)) = &ctx.signed_in {
        let max = app.inbox.max_ended_sessions;
        if app.inbox.ended.end(session, now_secs(), max) == EndedWhat::EveryDevice {
            tracing::warn!(
                user = %user.name(),
                max_ended_sessions = max,
                "the inbox's record of signed-out sessions is full (`max_ended_sessions`): \
                 signing out ended every session of this person"
            );
        }
    }
    let cookie = format!(
        "{COOKIE}=; Path={}; Max-Age=0; HttpOnly; SameSite=Strict",
        home(&ctx.base)
    );
    see_other(&format!("{}/login", ctx.base), Some(cookie))
}

fn filter_of(app: &App, query: &ListQuery) -> Result<PendingFilter, Refusal> {
    let older_than_ms = match ListQuery::get(&query.older_than) {
        Some(secs) => {
            let secs: u32 = secs.parse().map_err(|_| {
                Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "The query parameter `older_than` (\u{201c}Waiting more than\u{201d}) takes \
                     a whole number of seconds, 0 or more.",
                )
            })?;
            Some(now_ms().saturating_sub(i64::from(secs).saturating_mul(1000)))
        }
        None => None,
    };
    let kind = ListQuery::get(&query.kind);
    if let Some(kind) = &kind
        && !pages::KINDS.contains(&kind.as_str())
    {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!(
                "The query parameter `kind` takes one of {}, not {kind:?}.",
                pages::KINDS.join(", ")
            ),
        ));
    }
    Ok(PendingFilter {
        agent_id: ListQuery::get(&query.agent),
        tool: ListQuery::get(&query.tool),
        kind,
        older_than_ms,
        undecided_only: true,
        after: ListQuery::get(&query.after),
        limit: app.inbox.page_size,
        ..PendingFilter::default()
    })
}

async fn list(State(app): State<Shared>, ctx: Ctx, Query(query): Query<ListQuery>) -> Response {
    let (csrf, may_decide) = match ctx.user() {
        Ok((_, user, csrf)) => (csrf.to_owned(), user.role().may_decide()),
        Err(response) => return response,
    };
    let filter = match filter_of(&app, &query) {
        Ok(filter) => filter,
        Err(refusal) => return refusal.page(&ctx, Some(&home(&ctx.base))),
    };
    match app.inbox.runs.pending(&filter).await {
        Ok(page) => {
            let rows: Vec<(PendingRow, Option<String>)> = page
                .items
                .into_iter()
                .map(|row| {
                    let summary = app.inbox.summary_of(&row);
                    (row, summary)
                })
                .collect();
            let mut rows_page = Page::new(rows, page.next);
            rows_page.damaged = page.damaged;
            let mut body = pages::list(&rows_page, &query, &ctx.base, &csrf, now_ms(), may_decide);
            // On the first page only: runs that need a person although no call of theirs waits.
            if query.after.as_deref().is_none_or(str::is_empty) {
                body.push_str(
                    &app.inbox
                        .background
                        .needing_a_person(&app.inbox.runs, &app.inbox.agents, &ctx.base)
                        .await,
                );
            }
            html(&ctx, StatusCode::OK, "Waiting for a decision", &body)
        }
        Err(error) => Refusal::listing(error).page(&ctx, Some(&home(&ctx.base))),
    }
}

#[derive(serde::Deserialize)]
struct RunQuery {
    flash: Option<String>,
}

async fn run_page(
    State(app): State<Shared>,
    ctx: Ctx,
    Path(run): Path<String>,
    Query(query): Query<RunQuery>,
) -> Response {
    let (user, csrf) = match ctx.user() {
        Ok((_, user, csrf)) => (user.clone(), csrf.to_owned()),
        Err(response) => return response,
    };
    let stored = match app.inbox.runs.load(&run).await {
        Ok(stored) => stored,
        Err(AgentError::Store(StoreError::NotFound { .. })) => {
            return Refusal::new(
                StatusCode::NOT_FOUND,
                "No such run: it was never stored here, or it was pruned.",
            )
            .page(&ctx, Some(&home(&ctx.base)));
        }
        Err(error) => return Refusal::store(error).page(&ctx, Some(&home(&ctx.base))),
    };
    let background_failure = app.inbox.background.failure_of(&run);
    let flash = match query.flash.as_deref() {
        Some("decided") => Some("Decision recorded."),
        Some("retried") => Some("Retry started."),
        _ => None,
    };
    let view = RunView {
        stored: &stored,
        background_failure: background_failure.as_ref(),
        attached: app.inbox.agents.contains_key(stored.state.agent_id()),
        may_decide: user.role().may_decide(),
        flash,
    };
    let body = run_pages::run(&view, &ctx.base, &csrf);
    html(&ctx, StatusCode::OK, &format!("Run {run}"), &body)
}

async fn retry(
    State(app): State<Shared>,
    ctx: Ctx,
    Path(run): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    let user = match ctx.posted(&app, &fields) {
        Ok(user) => user.clone(),
        Err(response) => return response,
    };
    let back = run_pages::run_path(&ctx.base, &run);
    if !user.role().may_decide() {
        return Refusal::forbidden("A viewer may not retry a run.").page(&ctx, Some(&back));
    }
    let Some(version) = fields.get("version").and_then(|v| v.parse::<u64>().ok()) else {
        return Refusal::new(
            StatusCode::BAD_REQUEST,
            "The form has no run version: reload it.",
        )
        .page(&ctx, Some(&back));
    };
    let agent = match app.inbox.runs.load(&run).await {
        Ok(stored) => match app.inbox.agents.get(stored.state.agent_id()) {
            Some(agent) => agent.clone(),
            None => {
                return Refusal::conflict(
                    "This inbox does not run this run's agent, so it cannot retry it.",
                )
                .page(&ctx, Some(&back));
            }
        },
        Err(error) => return Refusal::store(error).page(&ctx, Some(&back)),
    };
    // Taking the run is the compare-and-swap; what follows runs in the background.
    match agent.begin_retry(&run, version, user.name()).await {
        Ok(retrying) => {
            let inbox = app.inbox.clone();
            let run_id = run.clone();
            tokio::spawn(async move {
                if let Err(error) = retrying.await {
                    inbox.background.note_failure(&run_id, &error.error);
                }
            });
            see_other(&format!("{back}?flash=retried"), None)
        }
        Err(error) => {
            let text = match &error.error {
                AgentError::Store(StoreError::Conflict { .. }) => {
                    "Not retried: the run changed since this page was shown (someone else may \
                     have retried it). Reload the run's page."
                        .to_owned()
                }
                AgentError::Store(StoreError::LeaseHeld { owner, .. }) => format!(
                    "Not retried: {owner} is running this run now (someone else retried it, or \
                     it is being recovered). Reload the run's page."
                ),
                AgentError::Store(StoreError::WrongStatus { .. }) => {
                    "Not retried: the run is no longer failed. Reload the run's page.".to_owned()
                }
                other => format!("Not retried: {other}"),
            };
            Refusal::conflict(text).page(&ctx, Some(&back))
        }
    }
}

async fn events(State(app): State<Shared>, ctx: Ctx, Query(query): Query<ListQuery>) -> Response {
    let Some((session, _, _)) = &ctx.signed_in else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let session = session.clone();
    let Ok(permit) = app.streams.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "10")],
            "too many event streams are open",
        )
            .into_response();
    };
    let mut filter = match filter_of(
        &app,
        &ListQuery {
            after: None,
            ..query
        },
    ) {
        Ok(filter) => filter,
        Err(refusal) => return refusal.status.into_response(),
    };
    filter.limit = filter.limit.max(100);
    struct Poll {
        app: Shared,
        filter: PendingFilter,
        base: String,
        may_decide: bool,
        seen: HashSet<(String, String, u64)>,
        queue: std::collections::VecDeque<Event>,
        first: bool,
        /// The session that opened the stream: it ends when the session does.
        session: Session,
        _permit: tokio::sync::OwnedSemaphorePermit,
    }
    let state = Poll {
        app: app.clone(),
        filter,
        base: ctx.base.clone(),
        may_decide: ctx
            .signed_in
            .as_ref()
            .is_some_and(|(_, user, _)| user.role().may_decide()),
        seen: HashSet::new(),
        queue: Default::default(),
        first: true,
        session,
        _permit: permit,
    };
    let stream = futures::stream::unfold(state, |mut poll| async move {
        loop {
            if let Some(event) = poll.queue.pop_front() {
                return Some((Ok::<Event, Infallible>(event), poll));
            }
            if !poll.first {
                tokio::time::sleep(poll.app.inbox.poll_interval).await;
            }
            poll.first = false;
            // Signed out or expired since the stream opened: it ends, and sends nothing more.
            if poll.session.expires <= now_secs() || poll.app.inbox.ended.is_ended(&poll.session) {
                return None;
            }
            let Ok(page) = poll.app.inbox.runs.pending(&poll.filter).await else {
                continue;
            };
            let now = now_ms();
            let mut seen = HashSet::with_capacity(page.items.len());
            // Oldest first: the page inserts each at the top, so the newest ends up first.
            for row in page.items.iter().rev() {
                let key = (row.run_id.clone(), row.call_id.clone(), row.version);
                if !poll.seen.contains(&key) {
                    let summary = poll.app.inbox.summary_of(row);
                    let tr =
                        pages::item_row(row, summary.as_deref(), &poll.base, now, poll.may_decide);
                    poll.queue
                        .push_back(Event::default().event("pending").data(tr));
                }
                seen.insert(key);
            }
            poll.seen = seen;
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn item(
    State(app): State<Shared>,
    ctx: Ctx,
    Path((run, call)): Path<(String, String)>,
) -> Response {
    item_page(&app, &ctx, &run, &call, StatusCode::OK, None).await
}

/// An item's page, answered with `status`; `edit`: an edit refused, shown again in the form
/// with why.
async fn item_page(
    app: &App,
    ctx: &Ctx,
    run: &str,
    call: &str,
    status: StatusCode,
    edit: Option<pages::EditAgain<'_>>,
) -> Response {
    let (run, call) = (run.to_owned(), call.to_owned());
    let (user, csrf) = match ctx.user() {
        Ok((_, user, csrf)) => (user.clone(), csrf.to_owned()),
        Err(response) => return response,
    };
    let row = match app.inbox.row(&run, &call).await {
        Ok(Some(row)) => row,
        Ok(None) => {
            let mut refusal = app.inbox.gone(&run, &call).await;
            refusal.status = StatusCode::NOT_FOUND;
            return refusal.page(ctx, Some(&home(&ctx.base)));
        }
        Err(refusal) => return refusal.page(ctx, None),
    };
    // The row is shown only if it is what the run's journal says waits: a row edited in the
    // database would show one thing and run another.
    let stored = match app.inbox.runs.load(&run).await {
        Ok(stored) => Some(stored),
        Err(AgentError::Store(error @ StoreError::Corrupt { .. })) => {
            tracing::warn!(run = %run, %error, "the inbox refused a damaged run");
            return Refusal::conflict(format!(
                "This run's stored data is damaged, so its calls are not shown or decided here: \
                 {error}"
            ))
            .page(ctx, Some(&home(&ctx.base)));
        }
        Err(_) => None,
    };
    let description = app
        .inbox
        .agents
        .get(&row.agent_id)
        .and_then(|a| a.agent().tools().iter().find(|t| t.id() == row.tool))
        .map(|t| t.description().to_owned());
    let in_doubt = stored.as_ref().and_then(|stored| {
        let call = stored
            .state
            .pending()
            .iter()
            .find(|p| p.call.id == row.call_id && p.kind == PendingKind::OutcomeUnknown)?;
        Some(InDoubtView {
            started_at_ms: call.started_at_ms.and_then(|at| i64::try_from(at).ok()),
            attempt: call.attempt,
            key: stored.state.idempotency_key(&call.call.id, call.attempt),
        })
    });
    let view = ItemView {
        row: &row,
        summary: app.inbox.summary_of(&row),
        description: description.as_deref(),
        messages: stored.as_ref().map(|s| s.state.messages()),
        in_doubt,
        edit,
        approve_always: app.inbox.may_approve_always(&row),
    };
    let may = app.inbox.may_decide(&user, &row.tool);
    let body = pages::item(&view, &ctx.base, &csrf, may, now_ms());
    html(ctx, status, &format!("{} waits", row.tool), &body)
}

async fn decide_form(
    State(app): State<Shared>,
    ctx: Ctx,
    Path((run, call)): Path<(String, String)>,
    Form(fields): Form<Fields>,
) -> Response {
    let user = match ctx.posted(&app, &fields) {
        Ok(user) => user.clone(),
        Err(response) => return response,
    };
    let back = pages::item_path(&ctx.base, &run, &call);
    let shown = Shown {
        run_id: run,
        call_id: call,
        version: fields
            .get("version")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        digest: fields.get("digest").unwrap_or_default().to_owned(),
    };
    let (run, call) = (shown.run_id.clone(), shown.call_id.clone());
    let choice = choice_of(&fields);
    // What the person typed into the edit box, to show again if the edit is refused.
    let typed = match &choice {
        Ok(Choice::Edit { arguments }) => Some(arguments.clone()),
        _ => None,
    };
    let result = match choice {
        Ok(choice) => {
            let changed = PAGE_CHANGED;
            app.inbox
                .decide(&user, &shown, choice, false, changed)
                .await
        }
        Err(refusal) => Err(refusal),
    };
    match (result, typed) {
        (Ok(()), _) => see_other(
            &format!("{}?flash=decided", run_pages::run_path(&ctx.base, &run)),
            None,
        ),
        // An edit refused for what it holds: the form again, with the text and why.
        (Err(refusal), Some(text)) if refusal.status == StatusCode::UNPROCESSABLE_ENTITY => {
            let edit = pages::EditAgain {
                text: &text,
                error: &refusal.message,
            };
            item_page(&app, &ctx, &run, &call, refusal.status, Some(edit)).await
        }
        (Err(refusal), _) => refusal.page(&ctx, Some(&back)),
    }
}

/// `run/call/version/digest`, the ids percent-encoded.
fn parse_item(value: &str) -> Option<Shown> {
    let mut parts = value.split('/');
    let (run, call, version, digest) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some(Shown {
        run_id: unpct(run)?,
        call_id: unpct(call)?,
        version: version.parse().ok()?,
        digest: digest.to_owned(),
    })
}

async fn batch(State(app): State<Shared>, ctx: Ctx, Form(fields): Form<Fields>) -> Response {
    let user = match ctx.posted(&app, &fields) {
        Ok(user) => user.clone(),
        Err(response) => return response,
    };
    let message = fields.get("message").unwrap_or_default().to_owned();
    let action = fields.get("action").unwrap_or_default();
    if action != "approve" && action != "reject" {
        return Refusal::unprocessable("A batch either approves or rejects.")
            .page(&ctx, Some(&home(&ctx.base)));
    }
    let mut body = String::from("<ul id=\"batch-results\">");
    let mut any = false;
    for value in fields.all("item") {
        any = true;
        let choice = if action == "approve" {
            Choice::Approve
        } else {
            Choice::Reject {
                message: message.clone(),
            }
        };
        let (label, result) = match parse_item(value) {
            Some(shown) => {
                let label = format!("{} / {}", shown.run_id, shown.call_id);
                let decided = app.inbox.decide(&user, &shown, choice, true, PAGE_CHANGED);
                (label, decided.await)
            }
            None => (
                value.to_owned(),
                Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "Not an item of this inbox.",
                )),
            ),
        };
        let (class, text) = match result {
            Ok(()) => ("ok", format!("{action}d")),
            Err(refusal) => ("error", refusal.message),
        };
        body.push_str(&format!(
            "<li class=\"batch-result {class}\"><code>{}</code>: {}</li>",
            show(&label),
            show(&text)
        ));
    }
    if !any {
        body.push_str("<li class=\"batch-result error\">No item was selected.</li>");
    }
    body.push_str(&format!(
        "</ul><p><a id=\"back\" href=\"{}\">Back to the list</a></p>",
        escape(&home(&ctx.base))
    ));
    html(&ctx, StatusCode::OK, "Batch decision", &body)
}

#[derive(serde::Deserialize)]
struct AuditQuery {
    after: Option<String>,
    run: Option<String>,
}

async fn audit(State(app): State<Shared>, ctx: Ctx, Query(query): Query<AuditQuery>) -> Response {
    if let Err(response) = ctx.user() {
        return response;
    }
    let filter = AuditFilter {
        run_id: query.run.filter(|r| !r.is_empty()),
        after: query.after.filter(|a| !a.is_empty()),
        limit: app.inbox.page_size,
    };
    let page = match app.inbox.runs.audit(&filter).await {
        Ok(page) => page,
        Err(error) => {
            let back = format!("{}/audit", ctx.base);
            return Refusal::listing(error).page(&ctx, Some(&back));
        }
    };
    let mut views = Vec::with_capacity(page.items.len());
    let mut journals = HashMap::new();
    for row in &page.items {
        let mut before = None;
        if row.decision.contains("\"approve_with_arguments\"") {
            if !journals.contains_key(&row.run_id) {
                let loaded = app.inbox.runs.store().load(&row.run_id).await.ok();
                journals.insert(row.run_id.clone(), loaded);
            }
            before = journals
                .get(&row.run_id)
                .and_then(Option::as_ref)
                .and_then(|loaded| arguments_shown(loaded, &row.digest));
        }
        views.push(AuditView { row, before });
    }
    let body = audit::audit(&views, page.next.as_deref(), &ctx.base);
    html(&ctx, StatusCode::OK, "Audit log", &body)
}

/// The arguments a decision was made on (those whose digest it names), pretty-printed: what an
/// edit started from. The run's conversation shows the call as it ran, edited, so they are looked
/// up in what the store keeps of the run (its snapshot and the journal entries after it), by
/// digest: any `arguments` there whose canonical JSON has that digest. `None` once the run is
/// pruned, or compacted past the pause.
fn arguments_shown(loaded: &LoadedRun, digest: &str) -> Option<String> {
    let bodies = loaded
        .snapshot
        .iter()
        .map(|s| s.body.as_str())
        .chain(loaded.rows.iter().map(|r| r.body.as_str()));
    bodies
        .filter_map(|body| serde_json::from_str::<Value>(body).ok())
        .find_map(|value| with_digest(&value, digest, 0))
        .and_then(|found| serde_json::to_string_pretty(&found).ok())
}

fn with_digest(value: &Value, digest: &str, depth: usize) -> Option<Value> {
    if depth > 64 {
        return None;
    }
    match value {
        Value::Object(map) => {
            if let Some(arguments) = map.get("arguments") {
                let candidate = match arguments {
                    Value::String(text) => serde_json::from_str(text).ok(),
                    other => Some(other.clone()),
                };
                // The digest a pending row names: of the arguments as stored (compact JSON).
                if let Some(candidate) =
                    candidate.filter(|c| arguments_digest(&c.to_string()) == digest)
                {
                    return Some(candidate);
                }
            }
            map.values().find_map(|v| with_digest(v, digest, depth + 1))
        }
        Value::Array(items) => items.iter().find_map(|v| with_digest(v, digest, depth + 1)),
        // A state kept as JSON text inside an entry.
        Value::String(text) if text.starts_with('{') => serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|inner| with_digest(&inner, digest, depth + 1)),
        _ => None,
    }
}

/// What the person reads when a call changed since the page that decides it was shown.
const PAGE_CHANGED: &str =
    "The call or its run changed since this page was shown: reload it and decide again.";

/// What the person reads when a call changed since a link to decide it was made.
const LINK_CHANGED: &str =
    "The call changed since this link was made, so the link no longer applies.";

/// A link this inbox signed, not expired.
fn signed(app: &App, token: &str) -> Result<Link, Refusal> {
    let link = Link::read(&app.inbox.keys, token)
        .ok_or_else(|| Refusal::forbidden("This link is not one this inbox signed."))?;
    if link.expires <= now_secs() {
        return Err(Refusal::new(StatusCode::GONE, "This link has expired."));
    }
    Ok(link)
}

/// A link's call, checked: signed, not expired, still waiting as the link was made.
async fn checked_link(app: &App, token: &str) -> Result<(Link, PendingRow), Refusal> {
    let link = signed(app, token)?;
    let Some(row) = app.inbox.row(&link.run, &link.call).await? else {
        return Err(app.inbox.gone(&link.run, &link.call).await);
    };
    still_as_shown(&row, link.version, &link.digest, LINK_CHANGED)?;
    Ok((link, row))
}

async fn link_page(State(app): State<Shared>, ctx: Ctx, Path(token): Path<String>) -> Response {
    match checked_link(&app, &token).await {
        Ok((link, row)) => {
            let url = format!("{}/link/{token}", ctx.base);
            let summary = app.inbox.summary_of(&row);
            let body = pages::confirm(
                &row,
                summary.as_deref(),
                link.action.as_str(),
                &link.user,
                &url,
            );
            html(&ctx, StatusCode::OK, "Confirm", &body)
        }
        Err(refusal) => refusal.page(&ctx, None),
    }
}

async fn link_confirm(State(app): State<Shared>, ctx: Ctx, Path(token): Path<String>) -> Response {
    // The link's signature and age only: whether its call still waits as the link was made
    // is the approvals service's check, on its one load of the run.
    let link = match signed(&app, &token) {
        Ok(link) => link,
        Err(refusal) => return refusal.page(&ctx, None),
    };
    let Some(user) = app.inbox.names.get(&link.user).cloned() else {
        return Refusal::forbidden("This link's person may no longer decide.").page(&ctx, None);
    };
    let choice = match link.action {
        LinkAction::Approve => Choice::Approve,
        LinkAction::Reject => Choice::Reject {
            message: String::new(),
        },
    };
    let shown = Shown {
        run_id: link.run,
        call_id: link.call,
        version: link.version,
        digest: link.digest,
    };
    match app
        .inbox
        .decide(&user, &shown, choice, false, LINK_CHANGED)
        .await
    {
        Ok(()) => {
            let body = format!(
                "<p id=\"flash\" class=\"ok\" role=\"status\">Done: {} recorded for {}.</p>",
                link.action.as_str(),
                escape(user.name())
            );
            html(&ctx, StatusCode::OK, "Decision recorded", &body)
        }
        Err(refusal) => refusal.page(&ctx, None),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::SocketAddr;

    use super::*;
    use crate::store::memory::MemoryStore;

    /// One HTTP/1.1 exchange over a plain socket, the reply lower-cased.
    async fn exchange(addr: SocketAddr, request: String) -> String {
        tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).unwrap();
            reply.to_ascii_lowercase()
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn links_redirects_and_cookies_follow_where_the_router_is_mounted() {
        let inbox = Inbox::new(Runs::new(MemoryStore::new())).user("t0ken", User::admin("ada"));
        let app = Router::new().nest("/inbox", inbox.router());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let get = |path: &str, cookie: &str| {
            format!("GET {path} HTTP/1.1\r\nhost: x\r\n{cookie}connection: close\r\n\r\n")
        };
        for path in ["/inbox", "/inbox/audit"] {
            let reply = exchange(addr, get(path, "")).await;
            assert!(reply.starts_with("http/1.1 303"), "{reply}");
            assert!(reply.contains("location: /inbox/login\r\n"), "{reply}");
        }
        let form = exchange(addr, get("/inbox/login", "")).await;
        assert!(form.contains("path=/inbox;"), "{form}");
        let nonce = form
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .and_then(|c| c.split(';').next())
            .unwrap()
            .to_owned();
        let csrf = form
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned();
        let fields = format!("token=t0ken&csrf={csrf}");
        let login = format!(
            "POST /inbox/login HTTP/1.1\r\nhost: x\r\ncookie: {nonce}\r\ncontent-type: \
             application/x-www-form-urlencoded\r\ncontent-length: {}\r\nconnection: \
             close\r\n\r\n{fields}",
            fields.len()
        );
        let reply = exchange(addr, login).await;
        assert!(reply.contains("location: /inbox\r\n"), "{reply}");
        assert!(reply.contains("path=/inbox;"), "{reply}");
        let cookie = reply
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .and_then(|c| c.split(';').next())
            .unwrap()
            .to_owned();
        // The cookie's value is hex: lower-casing the reply left it intact.
        let page = exchange(addr, get("/inbox", &format!("cookie: {cookie}\r\n"))).await;
        assert!(page.starts_with("http/1.1 200"), "{page}");
        for link in [
            "href=\"/inbox\"",
            "href=\"/inbox/audit\"",
            "action=\"/inbox\"",
            "src=\"/inbox/static/inbox.js\"",
            "action=\"/inbox/batch\"",
        ] {
            assert!(page.contains(link), "{link} in {page}");
        }
    }
}
