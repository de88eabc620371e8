//! The routes that decide: an item's page and form, a batch, the audit log, signed links.

use std::collections::HashMap;

use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use crate::durable::approvals::{Choice, Shown};
use crate::durable::entry::{arguments_digest, now_ms};
use crate::error::{AgentError, StoreError};
use crate::inbox::audit::{self, AuditView};
use crate::inbox::auth::{Link, LinkAction};
use crate::inbox::html::{escape, home, show, unpct};
use crate::inbox::pages::{self, InDoubtView, ItemView};
use crate::inbox::runs::{self as run_pages};
use crate::run::state::PendingKind;
use crate::store::backend::{LoadedRun, PendingRow};
use crate::store::listing::AuditFilter;

use crate::inbox::http::{App, Ctx, Fields, Shared, choice_of, html, see_other};
use crate::inbox::settings::{Refusal, now_secs, still_as_shown};

pub(super) async fn item(
    State(app): State<Shared>,
    ctx: Ctx,
    Path((run, call)): Path<(String, String)>,
) -> Response {
    item_page(&app, &ctx, &run, &call, StatusCode::OK, None).await
}

/// An item's page, answered with `status`; `edit`: an edit refused, shown again in the form
/// with why.
pub(super) async fn item_page(
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

pub(super) async fn decide_form(
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
pub(super) fn parse_item(value: &str) -> Option<Shown> {
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

pub(super) async fn batch(
    State(app): State<Shared>,
    ctx: Ctx,
    Form(fields): Form<Fields>,
) -> Response {
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
pub(super) struct AuditQuery {
    pub(super) after: Option<String>,
    pub(super) run: Option<String>,
}

pub(super) async fn audit(
    State(app): State<Shared>,
    ctx: Ctx,
    Query(query): Query<AuditQuery>,
) -> Response {
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
pub(super) fn arguments_shown(loaded: &LoadedRun, digest: &str) -> Option<String> {
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

pub(super) fn with_digest(value: &Value, digest: &str, depth: usize) -> Option<Value> {
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
pub(super) const PAGE_CHANGED: &str =
    "The call or its run changed since this page was shown: reload it and decide again.";

/// What the person reads when a call changed since a link to decide it was made.
pub(super) const LINK_CHANGED: &str =
    "The call changed since this link was made, so the link no longer applies.";

/// A link this inbox signed, not expired.
pub(super) fn signed(app: &App, token: &str) -> Result<Link, Refusal> {
    let link = Link::read(&app.inbox.keys, token)
        .ok_or_else(|| Refusal::forbidden("This link is not one this inbox signed."))?;
    if link.expires <= now_secs() {
        return Err(Refusal::new(StatusCode::GONE, "This link has expired."));
    }
    Ok(link)
}

/// A link's call, checked: signed, not expired, still waiting as the link was made.
pub(super) async fn checked_link(app: &App, token: &str) -> Result<(Link, PendingRow), Refusal> {
    let link = signed(app, token)?;
    let Some(row) = app.inbox.row(&link.run, &link.call).await? else {
        return Err(app.inbox.gone(&link.run, &link.call).await);
    };
    still_as_shown(&row, link.version, &link.digest, LINK_CHANGED)?;
    Ok((link, row))
}

pub(super) async fn link_page(
    State(app): State<Shared>,
    ctx: Ctx,
    Path(token): Path<String>,
) -> Response {
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

pub(super) async fn link_confirm(
    State(app): State<Shared>,
    ctx: Ctx,
    Path(token): Path<String>,
) -> Response {
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
