//! An approval inbox (feature `inbox`): web pages where people see what stored runs wait for
//! and decide it. An axum [`Router`](axum::Router) to mount in your own server
//! ([`Inbox::router`]), or a standalone server in one line ([`Inbox::serve`]).
//!
//! - **The list**: every call waiting in the store, of every run (several per run), newest first,
//!   with filters (agent, tool, kind, age) and paging; new items appear without a reload
//!   (server-sent events, the store read on an interval). Each item shows its tool and what it
//!   does, the tool's summary of the call when it has one ([`Inbox::summary`]), the arguments,
//!   the conversation so far, and since when it waits. Invisible and direction-changing
//!   characters in anything a run holds are shown as visible escapes (`\u{202E}`), with a note.
//! - **Decisions**: approve; reject with a message the model reads; edit the arguments (checked
//!   against the tool's schema and input validators on the server before anything is saved);
//!   supply an output; approve a tool for the rest of the run (per tool, off for destructive
//!   tools: [`Inbox::approve_always`]); approve or reject a batch. Each
//!   decision names the arguments' digest and the run's version the person was shown, and is
//!   recorded once by the store's compare-and-swap ([`Runs::decide`](crate::durable::Runs::decide)):
//!   a double click, two people or a stale page give one outcome, and the others are told who
//!   decided. The browser never sends the call itself, only which call it was shown.
//! - **Who may decide**: sign-in with tokens the operator issues; roles ([`Role`]) and per-tool
//!   approvers; signing out ends the session on the server ([`Inbox::max_ended_sessions`]); a
//!   CSRF token in every form; an audit page (who, what, when, the arguments before
//!   and after an edit); signed one-time links ([`Inbox::signed_link`]) for deciding from an email
//!   or a chat message, without a session, that a GET never uses up.
//! - **No build step**: server-rendered HTML, one small script and style sheet served by the
//!   router, a content security policy that allows no inline script.
//!
//! - **Runs**: a page per run (what happened after a decision: status, calls and results, the
//!   final answer, or the failure and a retry); the list also shows failed runs and runs whose
//!   process stopped.
//!
//! Once every call a run waits on is decided, the inbox resumes it in the background
//! ([`DurableAgent::resume`](crate::durable::DurableAgent::resume)), if it was given
//! the run's agent ([`Inbox::agent`]). [`Inbox::serve`] also takes up its agents' runs whose
//! process stopped, at start and then now and then ([`Inbox::keep_recovering`]); a failed
//! background resume is logged at `warn` and shown on the run's page.
//!
//! ```
//! use phaseo_agent::inbox::{Inbox, User};
//! use phaseo_agent::durable::Runs;
//! use phaseo_agent::store::MemoryStore;
//!
//! let runs = Runs::new(MemoryStore::new());
//! let inbox = Inbox::new(runs)
//!     .secret(b"32 or more random bytes, kept secret")
//!     .user("a-long-random-token", User::approver("alice"));
//! let app = axum::Router::new().nest("/inbox", inbox.router());
//! # drop(app);
//! ```

// The stage above `store`: it lists and decides through `Runs`, resumes through `DurableAgent`,
// and checks edits with the tools' own parsing. Its files, lowest first:
//
// - `html`: escaping, percent-encoding, times, the page frame, the script and style sheet;
// - `auth`: users and roles, and what the secret signs (sessions, CSRF tokens, links);
// - `pages`: each page's HTML from store rows;
// - `audit`: the audit log's page, and what an edit changed;
// - `runs`: the pages of whole runs (a run's page, failed and stuck runs in the list);
// - `recovery`: what the inbox does in the background (taking up abandoned runs) and
//   remembers of it (failed background resumes, failed runs' texts);
// - `settings`: `Inbox`, its settings, and the one path every decision takes (through
//   `durable::Approvals`), with what people read when it refuses;
// - `http`: the router's state, each request's context (session, CSRF), forms and responses;
// - `routes`: sign-in, the list and its events, a run's page and its retry;
// - `decisions`: an item's page and form, a batch, the audit log, signed links;
// - `server`: `Inbox`'s router and its standalone server.

mod html;
mod auth;
mod pages;
mod audit;
mod runs;
mod recovery;
mod settings;
mod http;
mod routes;
mod decisions;
mod server;

pub use crate::durable::approvals::{Role, User};
pub use auth::LinkAction;
pub use settings::{
    DEFAULT_MAX_ENDED_SESSIONS, DEFAULT_MAX_EVENT_STREAMS, DEFAULT_POLL_INTERVAL,
    DEFAULT_RECOVER_EVERY, DEFAULT_SESSION_TTL, Inbox, InboxError, MAX_SUMMARY_CHARS,
};
