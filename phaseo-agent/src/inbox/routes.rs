//! The routes that show: sign-in and out, the list and its event stream, a run's page and its
//! retry.

use std::collections::HashSet;
use std::convert::Infallible;

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use crate::durable::entry::{hex, now_ms};
use crate::error::{AgentError, StoreError};
use crate::inbox::auth::{EndedWhat, Session, random_bytes, token_key};
use crate::inbox::html::home;
use crate::inbox::pages::{self, ListQuery};
use crate::inbox::runs::{self as run_pages, RunView};
use crate::run::event::Emitter;
use crate::store::backend::PendingRow;
use crate::store::listing::{Page, PendingFilter};

use crate::inbox::http::{App, Ctx, Fields, Shared, cookies, html, see_other};
use crate::inbox::settings::{COOKIE, LOGIN_COOKIE, LOGIN_FORM_SECS, Refusal, now_secs};

/// The sign-in page, with a fresh nonce in its cookie and the nonce's MAC in the form.
pub(super) fn login_form(
    app: &App,
    ctx: &Ctx,
    status: StatusCode,
    error: Option<&str>,
) -> Response {
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

pub(super) async fn login_page(State(app): State<Shared>, ctx: Ctx) -> Response {
    login_form(&app, &ctx, StatusCode::OK, None)
}

pub(super) async fn login(
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

pub(super) async fn logout(
    State(app): State<Shared>,
    ctx: Ctx,
    Form(fields): Form<Fields>,
) -> Response {
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

pub(super) fn filter_of(app: &App, query: &ListQuery) -> Result<PendingFilter, Refusal> {
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

pub(super) async fn list(
    State(app): State<Shared>,
    ctx: Ctx,
    Query(query): Query<ListQuery>,
) -> Response {
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
pub(super) struct RunQuery {
    pub(super) flash: Option<String>,
}

pub(super) async fn run_page(
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

pub(super) async fn retry(
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
    match agent
        .begin_retry(&run, Some(version), user.name(), Emitter::default())
        .await
    {
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

pub(super) async fn events(
    State(app): State<Shared>,
    ctx: Ctx,
    Query(query): Query<ListQuery>,
) -> Response {
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
