//! The router's state and what every handler shares: the request's context (where the router
//! is mounted, who is signed in), forms, redirects, pages and the security headers.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::durable::approvals::{Choice, User};
use crate::inbox::auth::Session;
use crate::inbox::html::{SCRIPT, STYLE, page};
use crate::inbox::pages::{self, Action};

use crate::inbox::settings::{COOKIE, Inbox, Refusal, now_secs};

/// The router's state.
pub(super) struct App {
    pub(super) inbox: Inbox,
    pub(super) streams: Arc<Semaphore>,
}

pub(super) type Shared = Arc<App>;

/// A form's fields, repeated ones included (a batch's items).
#[derive(serde::Deserialize)]
#[serde(transparent)]
pub(super) struct Fields(Vec<(String, String)>);

impl Fields {
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub(super) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What every handler knows about a request: where the router is mounted, and who is signed in.
pub(super) struct Ctx {
    pub(super) base: String,
    pub(super) signed_in: Option<(Session, User, String)>,
}

// The error is the response a handler returns at once, built once per request: boxing it would
// only add an allocation.
#[allow(clippy::result_large_err)]
impl Ctx {
    pub(super) fn nav(&self) -> Option<(&str, &str)> {
        self.signed_in
            .as_ref()
            .map(|(_, user, csrf)| (user.name(), csrf.as_str()))
    }

    /// The signed-in person, or the redirect to the sign-in page.
    pub(super) fn user(&self) -> Result<(&Session, &User, &str), Response> {
        match &self.signed_in {
            Some((session, user, csrf)) => Ok((session, user, csrf)),
            None => Err(see_other(&format!("{}/login", self.base), None)),
        }
    }

    /// The signed-in person, if the form carries their session's CSRF token; a 403 otherwise.
    pub(super) fn posted(&self, app: &App, fields: &Fields) -> Result<&User, Response> {
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
pub(super) fn cookies<'h>(
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

pub(super) fn see_other(to: &str, cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

pub(super) fn html(ctx: &Ctx, status: StatusCode, title: &str, body: &str) -> Response {
    (status, Html(page(title, &ctx.base, ctx.nav(), body))).into_response()
}

pub(super) async fn security_headers(mut response: Response) -> Response {
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

pub(super) async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SCRIPT,
    )
        .into_response()
}

pub(super) async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        STYLE,
    )
        .into_response()
}

impl Refusal {
    pub(super) fn page(&self, ctx: &Ctx, back: Option<&str>) -> Response {
        let body = pages::refused(&self.message, back);
        let title = if self.status.is_server_error() {
            "Error"
        } else {
            "Refused"
        };
        (self.status, Html(page(title, &ctx.base, ctx.nav(), &body))).into_response()
    }
}

/// A form's choice, before it is checked.
pub(super) fn choice_of(fields: &Fields) -> Result<Choice, Refusal> {
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
