//! The approval inbox over HTTP, on loopback: sign-in, the list, decisions and every refusal the
//! inbox promises (a stale page, other arguments, a second decision, an edit the schema refuses,
//! a viewer, a form without its CSRF token, a link used twice or expired), a run resumed after its
//! last decision whose next model turn reads the rejection, and hostile text escaped on every
//! page. Built with the tests package's `inbox` feature.

use std::time::Duration;

use phaseo_agent::durable::{DurableAgent, Runs};
use phaseo_agent::inbox::{Inbox, LinkAction, User};
use phaseo_agent::serde_json::{Value, json};
use phaseo_agent::store::{AuditFilter, MemoryStore, PendingFilter, PendingRow, StoredStatus};
use phaseo_agent::{Agent, Message, ScriptedModel, Tool};
use reqwest::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, LOCATION, SET_COOKIE};

/// A gated tool whose schema allows two environments only.
fn deploy() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"environment": {"enum": ["staging", "production"]}},
        "required": ["environment"],
        "additionalProperties": false
    });
    Tool::new(
        "deploy",
        "Deploy a release to an environment",
        schema,
        |v, _| Ok(json!({"deployed": v})),
    )
    .require_approval()
}

/// A gated tool that takes any object.
fn notify() -> Tool {
    Tool::new(
        "notify",
        "Send a message to the team",
        json!({"type": "object"}),
        |v, _| Ok(v),
    )
    .require_approval()
}

struct Fixture {
    runs: Runs,
    agent: DurableAgent,
    model: ScriptedModel,
    inbox: Inbox,
    url: String,
    client: reqwest::Client,
}

struct Session {
    cookie: String,
    csrf: String,
}

struct Reply {
    status: u16,
    body: String,
    location: Option<String>,
}

/// Percent-encodes an id as one path segment, as the inbox's links do.
fn pct(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The text after `start` up to `end`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in {text}"))
        + start.len();
    let len = text[from..].find(end).expect("an end");
    &text[from..from + len]
}

async fn fixture(model: ScriptedModel, configure: impl FnOnce(Inbox) -> Inbox) -> Fixture {
    let runs = Runs::new(MemoryStore::new());
    let model = model.record_requests();
    let agent = Agent::builder("release")
        .model(model.clone())
        .tool(deploy())
        .tool(notify())
        .build()
        .unwrap();
    serve(runs.clone(), runs.attach(agent), model, configure).await
}

/// The inbox over `runs`, resuming `agent`'s runs, on a free port of loopback.
async fn serve(
    runs: Runs,
    agent: DurableAgent,
    model: ScriptedModel,
    configure: impl FnOnce(Inbox) -> Inbox,
) -> Fixture {
    let inbox = configure(users(Inbox::new(runs.clone()).agent(agent.clone())));
    serve_inbox(runs, agent, model, inbox).await
}

/// The test users, secret and poll interval on `inbox`.
fn users(inbox: Inbox) -> Inbox {
    inbox
        .secret(b"a test secret of thirty-two bytes")
        .user("alice-token", User::approver("alice"))
        .user("bob-token", User::approver("bob"))
        .user("victor-token", User::viewer("victor"))
        .poll_interval(Duration::from_millis(20))
}

/// `inbox` served on a free port of loopback.
async fn serve_inbox(
    runs: Runs,
    agent: DurableAgent,
    model: ScriptedModel,
    inbox: Inbox,
) -> Fixture {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = inbox.clone();
    tokio::spawn(async move { served.serve_listener(listener).await });
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Fixture {
        runs,
        agent,
        model,
        inbox,
        url,
        client,
    }
}

impl Fixture {
    /// A sign-in form as a browser loads it: the cookie it sets and the token in the form.
    async fn login_form(&self) -> Session {
        let reply = self
            .client
            .get(format!("{}/login", self.url))
            .send()
            .await
            .unwrap();
        let set = reply.headers()[SET_COOKIE].to_str().unwrap().to_owned();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        let body = reply.text().await.unwrap();
        Session {
            cookie: set.split(';').next().unwrap().to_owned(),
            csrf: between(&body, "name=\"csrf\" value=\"", "\"").to_owned(),
        }
    }

    async fn sign_in(&self, token: &str) -> Session {
        let form = self.login_form().await;
        let reply = self
            .client
            .post(format!("{}/login", self.url))
            .header("cookie", &form.cookie)
            .form(&[("token", token), ("csrf", form.csrf.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 303);
        let set = reply.headers()[SET_COOKIE].to_str().unwrap().to_owned();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        let cookie = set.split(';').next().unwrap().to_owned();
        let mut session = Session {
            cookie,
            csrf: String::new(),
        };
        let list = self.get(&session, "/").await;
        assert_eq!(list.status, 200, "{}", list.body);
        session.csrf = between(&list.body, "name=\"csrf\" value=\"", "\"").to_owned();
        session
    }

    async fn reply(request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get(LOCATION)
            .map(|l| l.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        Reply {
            status,
            body,
            location,
        }
    }

    async fn get(&self, session: &Session, path: &str) -> Reply {
        let request = self
            .client
            .get(format!("{}{path}", self.url))
            .header("cookie", &session.cookie);
        Fixture::reply(request).await
    }

    async fn post(&self, session: &Session, path: &str, fields: &[(&str, &str)]) -> Reply {
        let request = self
            .client
            .post(format!("{}{path}", self.url))
            .header("cookie", &session.cookie)
            .form(fields);
        Fixture::reply(request).await
    }

    /// Approves `row` through its item's form; the reply's status.
    async fn approve(&self, session: &Session, row: &PendingRow) -> u16 {
        self.decide(session, row, &[("action", "approve")])
            .await
            .status
    }

    /// Decides `row` through its item's form, with the session's CSRF token and what the row
    /// shows, plus `fields`.
    async fn decide(&self, session: &Session, row: &PendingRow, fields: &[(&str, &str)]) -> Reply {
        let version = row.version.to_string();
        let mut all = vec![
            ("csrf", session.csrf.as_str()),
            ("version", version.as_str()),
            ("digest", row.digest.as_str()),
        ];
        all.extend_from_slice(fields);
        self.post(session, &item_path(row), &all).await
    }

    /// Starts a run of the agent until it waits for a person; its id.
    async fn start(&self, input: impl Into<String>) -> String {
        let paused = self.agent.run(input).await.unwrap();
        paused.state.run_id().to_owned()
    }

    async fn waiting(&self) -> Vec<PendingRow> {
        let filter = PendingFilter {
            undecided_only: true,
            ..PendingFilter::default()
        };
        self.runs.pending(&filter).await.unwrap().items
    }

    async fn audit_len(&self) -> usize {
        self.runs
            .audit(&AuditFilter::default())
            .await
            .unwrap()
            .items
            .len()
    }

    /// Waits until the run is no longer paused, running or in doubt.
    async fn finished(&self, run_id: &str) -> StoredStatus {
        for _ in 0..500 {
            let status = self.runs.load(run_id).await.unwrap().status;
            if matches!(status, StoredStatus::Completed | StoredStatus::Failed) {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the run did not finish");
    }
}

/// What a batch form carries for a row: `run/call/version/digest`, the ids percent-encoded.
fn item_value(row: &PendingRow) -> String {
    let (run, call) = (pct(&row.run_id), pct(&row.call_id));
    format!("{run}/{call}/{}/{}", row.version, row.digest)
}

fn item_path(row: &PendingRow) -> String {
    format!("/runs/{}/calls/{}", pct(&row.run_id), pct(&row.call_id))
}

fn one_deploy(environment: &str) -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": environment}))
        .text("Done.")
}

#[tokio::test]
async fn pages_need_a_session_and_a_known_token_signs_in() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    let anonymous = Session {
        cookie: String::new(),
        csrf: String::new(),
    };
    for path in ["/", "/audit", "/runs/r/calls/c"] {
        let reply = f.get(&anonymous, path).await;
        assert_eq!(
            (reply.status, reply.location.as_deref()),
            (303, Some("/login"))
        );
    }
    let forged = Session {
        cookie: "phaseo_inbox=7b7d.00".into(),
        csrf: String::new(),
    };
    assert_eq!(f.get(&forged, "/").await.status, 303);

    let login = f.get(&anonymous, "/login").await;
    assert!(login.body.contains("name=\"token\"") && login.body.contains("id=\"sign-in\""));
    let form = f.login_form().await;
    let bad = f
        .post(&form, "/login", &[("token", "guess"), ("csrf", &form.csrf)])
        .await;
    assert_eq!(bad.status, 401);
    assert!(bad.body.contains("class=\"error\""));

    // A sign-in post that did not come from a form this inbox gave this browser (a page on
    // another site signing the person in as someone else) is refused, with no session.
    let other = f.login_form().await;
    for (cookie, csrf) in [
        ("", ""),
        (form.cookie.as_str(), ""),
        (form.cookie.as_str(), other.csrf.as_str()),
        ("", form.csrf.as_str()),
    ] {
        let session = Session {
            cookie: cookie.into(),
            csrf: String::new(),
        };
        let reply = f
            .post(
                &session,
                "/login",
                &[("token", "alice-token"), ("csrf", csrf)],
            )
            .await;
        assert_eq!(reply.status, 403, "{cookie:?} {csrf:?}");
        assert!(reply.location.is_none());
    }

    let alice = f.sign_in("alice-token").await;
    assert!(f.get(&alice, "/").await.body.contains("id=\"user\">alice<"));
}

#[tokio::test]
async fn every_response_carries_the_security_headers() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    let response = f
        .client
        .get(format!("{}/login", f.url))
        .send()
        .await
        .unwrap();
    let headers = response.headers();
    let csp = headers[CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers[CACHE_CONTROL], "no-store");
    let script = f
        .client
        .get(format!("{}/static/inbox.js", f.url))
        .send()
        .await
        .unwrap();
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("javascript")
    );
    assert!(script.text().await.unwrap().contains("EventSource"));
}

#[tokio::test]
async fn the_list_shows_what_waits_filters_and_pages() {
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": "staging"}))
        .tool_call("call_1", "notify", json!({"text": "hello"}))
        .tool_call("call_1", "deploy", json!({"environment": "production"}));
    let f = fixture(model, |i| i.page_size(2)).await;
    for input in ["one", "two", "three"] {
        f.agent.run(input).await.unwrap();
    }
    let alice = f.sign_in("alice-token").await;
    let list = f.get(&alice, "/").await.body;
    assert_eq!(list.matches("<tr class=\"item\"").count(), 2);
    assert!(list.contains("data-kind=\"tool_approval\""));
    assert!(list.contains("class=\"open\""));
    let next = between(&list, "id=\"next\" href=\"", "\"").replace("&amp;", "&");
    let rest = f.get(&alice, &next).await.body;
    assert_eq!(rest.matches("<tr class=\"item\"").count(), 1);
    assert!(!rest.contains("id=\"next\""));

    let deploys = f.get(&alice, "/?tool=deploy").await.body;
    assert_eq!(deploys.matches("data-tool=\"deploy\"").count(), 2);
    assert!(!deploys.contains("data-tool=\"notify\""));
    let none = f.get(&alice, "/?kind=hitl").await.body;
    assert!(none.contains("id=\"empty\""));
    let old = f.get(&alice, "/?older_than=3600").await.body;
    assert!(old.contains("id=\"empty\""));
    assert_eq!(f.get(&alice, "/?older_than=soon").await.status, 400);

    let row = &f.waiting().await[0];
    let item = f.get(&alice, &item_path(row)).await.body;
    for id in [
        "id=\"tool\"",
        "id=\"description\"",
        "id=\"arguments\"",
        "id=\"conversation\"",
        "id=\"since\"",
        "id=\"kind\"",
        "id=\"approve\"",
        "id=\"approve-always\"",
        "id=\"reject\"",
        "id=\"edit\"",
    ] {
        assert!(item.contains(id), "{id} in {item}");
    }
}

#[tokio::test]
async fn an_approval_resumes_the_run_to_its_end() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    let run_id = f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    let reply = f.decide(&alice, &row, &[("action", "approve")]).await;
    // A decision leads to the run's page: what happened next.
    let run_page = format!("/runs/{}", pct(&run_id));
    assert_eq!(
        (reply.status, reply.location.as_deref()),
        (303, Some(format!("{run_page}?flash=decided").as_str()))
    );
    let page = f.get(&alice, &format!("{run_page}?flash=decided")).await;
    assert!(
        page.body.contains("id=\"flash\" class=\"ok\""),
        "{}",
        page.body
    );
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let page = f.get(&alice, &run_page).await;
    assert!(
        page.body.contains("data-status=\"completed\""),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("Done."),
        "the final answer: {}",
        page.body
    );
    assert!(
        page.body.contains("deploy"),
        "the call and its result: {}",
        page.body
    );
    assert_eq!(
        f.runs.load(&run_id).await.unwrap().state.output(),
        Some("Done.")
    );
}

#[tokio::test]
async fn a_rejection_is_read_by_the_models_next_turn() {
    let f = fixture(one_deploy("production"), |i| i).await;
    let run_id = f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    let message = "Not on a Friday: wait for Monday.";
    let reply = f
        .decide(&alice, &row, &[("action", "reject"), ("message", message)])
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let last = f.model.requests().pop().unwrap();
    let read = last.messages.iter().any(|m| {
        matches!(m, Message::Tool { call_id, content, .. } if call_id == "call_1" && content.contains(message))
    });
    assert!(
        read,
        "the model's next turn did not read the rejection: {:?}",
        last.messages
    );
}

#[tokio::test]
async fn a_stale_version_or_other_arguments_are_refused_and_record_nothing() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);

    let mut stale = row.clone();
    stale.version += 1;
    let reply = f.decide(&alice, &stale, &[("action", "approve")]).await;
    assert_eq!(reply.status, 409);
    assert!(reply.body.contains("class=\"error\""));

    let mut other = row.clone();
    other.digest = "0".repeat(64);
    assert_eq!(f.approve(&alice, &other).await, 409);

    assert_eq!(f.audit_len().await, 0);
    assert_eq!(f.waiting().await, vec![row]);
}

#[tokio::test]
async fn a_second_decision_is_told_who_decided_first() {
    // Two calls in one turn: deciding one leaves the run waiting, the decision on its row.
    let model = ScriptedModel::new()
        .tool_calls([
            phaseo_agent::ToolCall::new("call_1", "deploy", json!({"environment": "staging"})),
            phaseo_agent::ToolCall::new("call_2", "notify", json!({"text": "deployed"})),
        ])
        .text("Done.");
    let f = fixture(model, |i| i).await;
    let run_id = f.start("Deploy").await;
    let (alice, bob) = (f.sign_in("alice-token").await, f.sign_in("bob-token").await);
    let rows = f.waiting().await;
    let deploy = rows.iter().find(|r| r.call_id == "call_1").unwrap().clone();
    let notify = rows.iter().find(|r| r.call_id == "call_2").unwrap().clone();

    assert_eq!(f.approve(&alice, &deploy).await, 303);
    let second = f.decide(&bob, &deploy, &[("action", "approve")]).await;
    assert_eq!(second.status, 409);
    assert!(
        second.body.contains("already decided by alice"),
        "{}",
        second.body
    );
    assert_eq!(f.audit_len().await, 1);

    // The last decision resumes the run; a decision after that is told too.
    assert_eq!(f.approve(&bob, &notify).await, 303);
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let late = f.decide(&alice, &notify, &[("action", "reject")]).await;
    assert_eq!(late.status, 409);
    assert!(
        late.body.contains("already decided by bob"),
        "{}",
        late.body
    );
}

#[tokio::test]
async fn an_edit_is_checked_against_the_schema_before_anything_is_saved() {
    let f = fixture(one_deploy("production"), |i| i).await;
    let run_id = f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);

    for bad in [
        r#"{"environment": "moon"}"#,
        r#"{"environment": "staging", "force": true}"#,
        "not json",
    ] {
        let reply = f
            .decide(&alice, &row, &[("action", "edit"), ("arguments", bad)])
            .await;
        assert_eq!(reply.status, 422, "{bad}: {}", reply.body);
        assert!(reply.body.contains("class=\"error\""));
    }
    let refused = f
        .decide(
            &alice,
            &row,
            &[
                ("action", "edit"),
                ("arguments", r#"{"environment": "moon"}"#),
            ],
        )
        .await;
    assert!(refused.body.contains("$.environment"), "{}", refused.body);
    assert_eq!(f.audit_len().await, 0);
    assert_eq!(f.waiting().await, vec![row.clone()]);

    let edited = r#"{"environment": "staging"}"#;
    let reply = f
        .decide(&alice, &row, &[("action", "edit"), ("arguments", edited)])
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let result = f
        .runs
        .load(&run_id)
        .await
        .unwrap()
        .state
        .tool_result("call_1")
        .unwrap()
        .to_owned();
    assert!(result.contains("staging"), "{result}");

    let audit = f.get(&alice, "/audit").await.body;
    let row_html = between(&audit, "<tr class=\"decision edit\">", "</tr>");
    assert!(row_html.contains("alice"));
    let before = between(row_html, "<pre class=\"before\">", "</pre>");
    let after = between(row_html, "<pre class=\"after\">", "</pre>");
    assert!(
        before.contains("production") && after.contains("staging"),
        "{row_html}"
    );
    // And what changed, field by field.
    let diff = between(row_html, "<ul class=\"diff\">", "</ul>");
    assert!(
        diff.contains("production&quot;</del> → <ins>&quot;staging"),
        "{diff}"
    );
}

#[tokio::test]
async fn a_viewer_and_an_approver_of_other_tools_are_refused() {
    let f = fixture(one_deploy("staging"), |i| {
        i.tool_approvers("deploy", ["alice"])
    })
    .await;
    f.start("Deploy").await;
    let row = f.waiting().await.remove(0);
    let victor = f.sign_in("victor-token").await;
    let page = f.get(&victor, &item_path(&row)).await.body;
    assert!(!page.contains("class=\"decide\""));
    // The list shows a viewer the items, and no batch form or checkboxes to decide them with.
    let list = f.get(&victor, "/").await.body;
    assert!(list.contains("class=\"item\""), "{list}");
    assert!(
        !list.contains("id=\"batch\"") && !list.contains("class=\"select\""),
        "{list}"
    );
    let alice = f.sign_in("alice-token").await;
    let list = f.get(&alice, "/").await.body;
    assert!(list.contains("id=\"batch-approve\"") && list.contains("class=\"select\""));
    assert_eq!(f.approve(&victor, &row).await, 403);
    let bob = f.sign_in("bob-token").await;
    assert_eq!(f.approve(&bob, &row).await, 403);
    assert_eq!(f.audit_len().await, 0);
    assert_eq!(f.approve(&alice, &row).await, 303);
}

#[tokio::test]
async fn a_post_without_its_csrf_token_is_refused_and_records_nothing() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    f.start("Deploy").await;
    let row = f.waiting().await.remove(0);
    let alice = f.sign_in("alice-token").await;
    let bob = f.sign_in("bob-token").await;
    let version = row.version.to_string();
    let path = item_path(&row);
    for csrf in [None, Some(""), Some("00"), Some(bob.csrf.as_str())] {
        let mut fields = vec![
            ("version", version.as_str()),
            ("digest", row.digest.as_str()),
            ("action", "approve"),
        ];
        if let Some(csrf) = csrf {
            fields.push(("csrf", csrf));
        }
        assert_eq!(f.post(&alice, &path, &fields).await.status, 403, "{csrf:?}");
        let item = item_value(&row);
        let mut batch = vec![("action", "approve"), ("item", item.as_str())];
        if let Some(csrf) = csrf {
            batch.push(("csrf", csrf));
        }
        assert_eq!(f.post(&alice, "/batch", &batch).await.status, 403);
    }
    assert_eq!(f.post(&alice, "/logout", &[]).await.status, 403);
    assert_eq!(f.audit_len().await, 0);
}

#[tokio::test]
async fn a_batch_decides_each_item_on_its_own() {
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": "staging"}))
        .tool_call("call_1", "deploy", json!({"environment": "production"}))
        .text("One.")
        .text("Two.");
    let f = fixture(model, |i| i).await;
    let first = f.start("one").await;
    let second = f.start("two").await;
    let alice = f.sign_in("alice-token").await;
    let rows = f.waiting().await;
    let (a, b) = (item_value(&rows[0]), item_value(&rows[1]));
    let mut moved = rows[0].clone();
    moved.version += 7;
    let stale = item_value(&moved);
    let reply = f
        .post(
            &alice,
            "/batch",
            &[
                ("csrf", &alice.csrf),
                ("action", "approve"),
                ("item", &stale),
                ("item", &a),
                ("item", &b),
                ("item", "nonsense"),
            ],
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body.matches("batch-result ok").count(),
        2,
        "{}",
        reply.body
    );
    assert_eq!(
        reply.body.matches("batch-result error").count(),
        2,
        "{}",
        reply.body
    );
    assert_eq!(f.finished(&first).await, StoredStatus::Completed);
    assert_eq!(f.finished(&second).await, StoredStatus::Completed);
}

#[tokio::test]
async fn a_signed_link_decides_once_and_not_after_it_expires() {
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": "staging"}))
        .text("Done.")
        .tool_call("call_1", "deploy", json!({"environment": "production"}));
    let f = fixture(model, |i| i).await;
    let run_id = f.start("one").await;
    let row = f.waiting().await.remove(0);
    let hour = Duration::from_secs(3600);
    let link = f
        .inbox
        .signed_link(&row, LinkAction::Approve, "alice", hour)
        .unwrap();
    assert!(
        f.inbox
            .signed_link(&row, LinkAction::Approve, "victor", hour)
            .is_err()
    );
    assert!(
        f.inbox
            .signed_link(&row, LinkAction::Approve, "nobody", hour)
            .is_err()
    );

    let anonymous = Session {
        cookie: String::new(),
        csrf: String::new(),
    };
    // A GET (a mail scanner's prefetch) shows the confirmation and decides nothing.
    for _ in 0..2 {
        let page = f.get(&anonymous, &link).await;
        assert_eq!(page.status, 200);
        assert!(page.body.contains("id=\"confirm\""));
    }
    assert_eq!(f.audit_len().await, 0);
    let done = f.post(&anonymous, &link, &[]).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("id=\"flash\" class=\"ok\""));
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let again = f.post(&anonymous, &link, &[]).await;
    assert_eq!(again.status, 409);
    assert!(
        again.body.contains("already decided by alice"),
        "{}",
        again.body
    );
    assert_eq!(f.get(&anonymous, &link).await.status, 409);
    assert_eq!(f.audit_len().await, 1);

    // Expired, or changed by a byte: refused.
    f.start("two").await;
    let row = f.waiting().await.remove(0);
    let expired = f
        .inbox
        .signed_link(&row, LinkAction::Reject, "alice", Duration::ZERO)
        .unwrap();
    assert_eq!(f.get(&anonymous, &expired).await.status, 410);
    assert_eq!(f.post(&anonymous, &expired, &[]).await.status, 410);
    let good = f
        .inbox
        .signed_link(&row, LinkAction::Reject, "alice", hour)
        .unwrap();
    let mut tampered = good.clone().into_bytes();
    let at = tampered.len() - 1;
    tampered[at] = if tampered[at] == b'0' { b'1' } else { b'0' };
    let tampered = String::from_utf8(tampered).unwrap();
    assert_eq!(f.post(&anonymous, &tampered, &[]).await.status, 403);
    assert_eq!(f.audit_len().await, 1);
}

#[tokio::test]
async fn hostile_arguments_and_messages_are_escaped_on_every_page() {
    let script = "<script>alert(1)</script>";
    let model = ScriptedModel::new()
        .tool_call(
            "call_\"><b>",
            "notify",
            json!({"text": script, "a\"b": "'<img src=x onerror=alert(2)>"}),
        )
        .text("Sent.");
    let f = fixture(model, |i| i).await;
    let run_id = f.start(format!("Say {script}")).await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    let list = f.get(&alice, "/").await.body;
    let item = f.get(&alice, &item_path(&row)).await;
    assert_eq!(item.status, 200, "{}", item.body);
    for page in [&list, &item.body] {
        assert!(
            !page.contains("<script>alert")
                && !page.contains("<img")
                && !page.contains("call_\"><b>"),
            "{page}"
        );
    }
    assert!(item.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    let reply = f
        .decide(
            &alice,
            &row,
            &[
                ("action", "reject"),
                ("message", "no <script>alert(3)</script>"),
            ],
        )
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    f.finished(&run_id).await;
    let audit = f.get(&alice, "/audit").await.body;
    assert!(
        audit.contains("no &lt;script&gt;alert(3)&lt;/script&gt;"),
        "{audit}"
    );
    assert!(!audit.contains("<script>alert"));
}

#[tokio::test]
async fn new_items_stream_to_open_lists_and_streams_are_bounded() {
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": "staging"}))
        .tool_call("call_9", "notify", json!({"text": "later"}));
    let f = fixture(model, |i| i.max_event_streams(1)).await;
    f.start("one").await;
    let alice = f.sign_in("alice-token").await;
    let mut events = f
        .client
        .get(format!("{}/events", f.url))
        .header("cookie", &alice.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let second = f.get(&alice, "/events").await;
    assert_eq!(second.status, 503);

    let mut seen = String::new();
    let read_until = async |events: &mut reqwest::Response, seen: &mut String, needle: &str| {
        while !seen.contains(needle) {
            let chunk = tokio::time::timeout(Duration::from_secs(5), events.chunk())
                .await
                .expect("an event in time")
                .unwrap()
                .expect("the stream stays open");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    read_until(&mut events, &mut seen, "data-call=\"call_1\"").await;
    assert!(seen.contains("event: pending"));
    f.start("two").await;
    read_until(&mut events, &mut seen, "data-call=\"call_9\"").await;
    assert_eq!(
        seen.matches("data-call=\"call_1\"").count(),
        1,
        "an item is sent once"
    );

    drop(events);
    // The stream's slot is given back once the server notices the client left.
    let mut freed = false;
    for _ in 0..100 {
        let reply = f
            .client
            .get(format!("{}/events", f.url))
            .header("cookie", &alice.cookie)
            .send()
            .await
            .unwrap();
        if reply.status() == 200 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed, "a closed stream's slot was not given back");
}

#[tokio::test]
async fn an_external_call_takes_an_output_checked_by_its_kind() {
    let lookup = Tool::external("lookup", "Look up a customer", json!({"type": "object"}));
    let runs = Runs::new(MemoryStore::new());
    let model = ScriptedModel::new()
        .tool_call("call_1", "lookup", json!({"id": 7}))
        .text("Found.");
    let agent = runs.attach(
        Agent::builder("crm")
            .model(model.clone())
            .tool(lookup)
            .build()
            .unwrap(),
    );
    let run_id = agent
        .run("Who is 7?")
        .await
        .unwrap()
        .state
        .run_id()
        .to_owned();
    let f = serve(runs, agent, model, |i| i).await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    assert_eq!(row.kind, "external_output");
    let page = f.get(&alice, &item_path(&row)).await.body;
    assert!(page.contains("id=\"output\"") && !page.contains("id=\"approve\""));
    assert_eq!(f.approve(&alice, &row).await, 422);
    let reply = f
        .decide(
            &alice,
            &row,
            &[("action", "output"), ("output", r#"{"name": "Ada"}"#)],
        )
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let result: Value = serde_json::from_str(
        f.runs
            .load(&run_id)
            .await
            .unwrap()
            .state
            .tool_result("call_1")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(result, json!({"name": "Ada"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_deciders_get_exactly_one_outcome() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    let run_id = f.start("Deploy").await;
    let (alice, bob) = (f.sign_in("alice-token").await, f.sign_in("bob-token").await);
    let row = f.waiting().await.remove(0);
    let approve: &[(&str, &str)] = &[("action", "approve")];
    let reject: &[(&str, &str)] = &[("action", "reject"), ("message", "no")];
    let attempts = (0..8).map(|i| {
        let (who, fields) = if i % 2 == 0 {
            (&alice, approve)
        } else {
            (&bob, reject)
        };
        f.decide(who, &row, fields)
    });
    let replies = futures::future::join_all(attempts).await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 303).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        7,
        "{statuses:?}"
    );
    assert_eq!(f.audit_len().await, 1);
    f.finished(&run_id).await;
}

#[tokio::test]
async fn approve_always_lets_the_tools_later_calls_run_without_asking() {
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": "staging"}))
        .tool_call("call_2", "deploy", json!({"environment": "production"}))
        .text("Both deployed.");
    let f = fixture(model, |i| i).await;
    let run_id = f.start("Deploy twice").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    let reply = f
        .decide(&alice, &row, &[("action", "approve_always")])
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let state = f.runs.load(&run_id).await.unwrap().state;
    assert!(state.tool_result("call_2").unwrap().contains("production"));
    assert_eq!(
        f.audit_len().await,
        1,
        "the second call was not asked about"
    );
}

/// A call a crash left in doubt: its page says what happened, with the attempt's idempotency
/// key and when it started; an approval is refused on every path (the item's form, a batch, a
/// signed link), a batch names it as skipped, and running it again needs the person to tick that
/// they checked it did not happen, and is audited as `rerun_after_doubt`.
#[tokio::test]
async fn a_call_in_doubt_is_settled_on_its_page_only_after_a_check() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use phaseo_agent::inbox::InboxError;

    use crate::support::durable::Hooked;

    let memory = Arc::new(MemoryStore::new());
    let refunds = Arc::new(AtomicUsize::new(0));
    let counted = refunds.clone();
    let refund = Tool::new(
        "refund",
        "Refund an order",
        json!({"type": "object"}),
        move |v, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"refunded": v}))
        },
    );
    let model = ScriptedModel::new()
        .tool_call("call_1", "refund", json!({"order": "A-1003"}))
        .text("Refunded.");
    let agent = Agent::builder("payments")
        .model(model.clone())
        .tool(refund)
        .build()
        .unwrap();
    // started (1), the turn with the refund's start (2): the process dies while the refund runs.
    let _ = Runs::without_queue(Arc::new(Hooked::dies_after(memory.clone(), 2)))
        .lease(Duration::from_millis(100))
        .attach(agent.clone())
        .run("Refund A-1003")
        .run_id("r")
        .await;
    // The dead process's lease runs out.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(refunds.load(Ordering::SeqCst), 1);
    let runs = Runs::from_arc(memory.clone());
    let durable = runs.attach(agent);
    durable.recover("r").await.unwrap();
    let f = serve(runs.clone(), durable, model, |i| i).await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    assert_eq!(row.kind, "outcome_unknown");
    let key = runs
        .load("r")
        .await
        .unwrap()
        .state
        .idempotency_key("call_1", 0);

    // The page says what happened, and how to check.
    let page = f.get(&alice, &item_path(&row)).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("its process died before it reported"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(&key),
        "no idempotency key: {}",
        page.body
    );
    assert!(page.body.contains("id=\"started\""), "{}", page.body);
    assert!(page.body.contains("name=\"checked\""), "{}", page.body);
    assert!(!page.body.contains("value=\"approve\""), "{}", page.body);
    // The list offers no checkbox for it.
    let list = f.get(&alice, "/").await;
    assert!(!list.body.contains("name=\"item\""), "{}", list.body);

    // Approving is refused; so is running it again without the tick.
    let approved = f.decide(&alice, &row, &[("action", "approve")]).await;
    assert_eq!(approved.status, 422, "{}", approved.body);
    let unchecked = f
        .decide(&alice, &row, &[("action", "rerun_after_doubt")])
        .await;
    assert_eq!(unchecked.status, 422, "{}", unchecked.body);
    assert!(unchecked.body.contains("I checked"), "{}", unchecked.body);
    // A batch, approving or rejecting, skips it and names it.
    for action in ["approve", "reject"] {
        let batch = f
            .post(
                &alice,
                "/batch",
                &[
                    ("csrf", &alice.csrf),
                    ("action", action),
                    ("item", &item_value(&row)),
                ],
            )
            .await;
        assert_eq!(batch.status, 200);
        assert!(batch.body.contains("batch-result error"), "{}", batch.body);
        assert!(batch.body.contains("Skipped"), "{}", batch.body);
        assert!(batch.body.contains("r / call_1"), "{}", batch.body);
    }
    // No link approves it; a rejecting link may.
    let link = f
        .inbox
        .signed_link(&row, LinkAction::Approve, "alice", Duration::from_secs(60));
    assert!(matches!(link, Err(InboxError::InDoubt { .. })), "{link:?}");
    assert!(
        f.inbox
            .signed_link(&row, LinkAction::Reject, "alice", Duration::from_secs(60))
            .is_ok()
    );
    assert_eq!(f.audit_len().await, 0, "a refused decision was recorded");
    assert_eq!(refunds.load(Ordering::SeqCst), 1);

    // Checked, it did not happen: run again, as its own action in the audit log.
    let rerun = f
        .decide(
            &alice,
            &row,
            &[("action", "rerun_after_doubt"), ("checked", "yes")],
        )
        .await;
    assert_eq!(rerun.status, 303, "{}", rerun.body);
    assert_eq!(f.finished("r").await, StoredStatus::Completed);
    assert_eq!(refunds.load(Ordering::SeqCst), 2);
    let audit = f.runs.audit(&AuditFilter::default()).await.unwrap().items;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].decision, r#"{"decision":"rerun_after_doubt"}"#);
    let page = f.get(&alice, "/audit").await;
    assert!(page.body.contains("rerun_after_doubt"), "{}", page.body);
}

/// The model is unreachable after the person's approval: the tool ran, the next turn failed.
fn fails_after_the_call() -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": "staging"}))
        .error(phaseo_agent::ModelError::from_status(
            401,
            "the key was revoked",
        ))
        .text("Deployed, at last.")
}

#[tokio::test]
async fn a_failure_after_a_decision_is_shown_and_retried_once() {
    let f = fixture(fails_after_the_call(), |i| i).await;
    let run_id = f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    let reply = f.decide(&alice, &row, &[("action", "approve")]).await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(f.finished(&run_id).await, StoredStatus::Failed);

    // The run's page says it failed, why, and offers a retry; so does the list.
    let run_page = format!("/runs/{}", pct(&run_id));
    let page = f.get(&alice, &run_page).await;
    assert!(
        page.body.contains("data-status=\"failed\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("the key was revoked"), "{}", page.body);
    assert!(page.body.contains("id=\"retry-run\""), "{}", page.body);
    let list = f.get(&alice, "/").await;
    assert!(list.body.contains("id=\"failed\""), "{}", list.body);
    assert!(list.body.contains("the key was revoked"), "{}", list.body);
    // A viewer sees it, and no retry.
    let victor = f.sign_in("victor-token").await;
    let seen = f.get(&victor, &run_page).await;
    assert!(seen.body.contains("the key was revoked") && !seen.body.contains("id=\"retry-run\""));

    let version = between(&page.body, "name=\"version\" value=\"", "\"").to_owned();
    let retry_path = format!("{run_page}/retry");
    // A viewer may not; a form without its token is refused.
    let refused = f
        .post(
            &victor,
            &retry_path,
            &[("csrf", &victor.csrf), ("version", &version)],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let refused = f.post(&alice, &retry_path, &[("version", &version)]).await;
    assert_ne!(refused.status, 303, "{}", refused.body);

    let retried = f
        .post(
            &alice,
            &retry_path,
            &[("csrf", &alice.csrf), ("version", &version)],
        )
        .await;
    assert_eq!(
        (retried.status, retried.location.as_deref()),
        (303, Some(format!("{run_page}?flash=retried").as_str())),
        "{}",
        retried.body
    );
    // The same page's form again (a double click, a second person): refused, nothing runs.
    let again = f
        .post(
            &alice,
            &retry_path,
            &[("csrf", &alice.csrf), ("version", &version)],
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(f.finished(&run_id).await, StoredStatus::Completed);
    let stored = f.runs.load(&run_id).await.unwrap();
    assert_eq!(stored.state.output(), Some("Deployed, at last."));
    assert_eq!(stored.failure, None);
    // The approved call ran once: its one result, not run again by the retry.
    assert_eq!(stored.state.steps().len(), 1, "{:?}", stored.state.steps());
    let page = f.get(&alice, &run_page).await;
    assert!(page.body.contains("Deployed, at last."), "{}", page.body);
    assert!(!f.get(&alice, "/").await.body.contains("id=\"failed\""));
}

#[tokio::test]
async fn a_background_resume_that_fails_is_on_the_run_page() {
    // The inbox resumes runs through an agent whose store refuses every write (a full disk, say):
    // its resume after the last decision fails, is logged, and says so on the run's page.
    let memory = std::sync::Arc::new(MemoryStore::new());
    let runs = Runs::from_arc(memory.clone());
    let model = one_deploy("staging");
    let agent = || {
        Agent::builder("release")
            .model(model.clone())
            .tool(deploy())
            .build()
            .unwrap()
    };
    let paused = runs.attach(agent()).run("Deploy").await.unwrap();
    let run_id = paused.state.run_id().to_owned();
    let full = Runs::without_queue(std::sync::Arc::new(
        crate::support::durable::Hooked::new(memory.clone()).before_write(|_| {
            Err(phaseo_agent::StoreError::Database(
                "the disk is full".into(),
            ))
        }),
    ));
    let f = serve(runs.clone(), full.attach(agent()), model.clone(), |i| i).await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    let reply = f.decide(&alice, &row, &[("action", "approve")]).await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let run_page = format!("/runs/{}", pct(&run_id));
    let mut page = f.get(&alice, &run_page).await;
    for _ in 0..200 {
        if page.body.contains("id=\"resume-failure\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        page = f.get(&alice, &run_page).await;
    }
    assert!(page.body.contains("id=\"resume-failure\""), "{}", page.body);
    assert!(page.body.contains("the disk is full"), "{}", page.body);
}

#[tokio::test]
async fn runs_whose_process_stopped_are_taken_up_or_listed_as_stuck() {
    let memory = std::sync::Arc::new(MemoryStore::new());
    let model = || one_deploy("staging");
    let release = |model| {
        Agent::builder("release")
            .model(model)
            .tool(deploy())
            .build()
            .unwrap()
    };
    let other = Agent::builder("billing")
        .model(ScriptedModel::new().text("Hm."))
        .build()
        .unwrap();
    // Two processes die mid-run (after the run's start), with short leases: one of an agent the
    // inbox runs, one of an agent it does not.
    for (agent, run_id) in [(release(model()), "r-release"), (other, "r-billing")] {
        let _ = Runs::without_queue(std::sync::Arc::new(
            crate::support::durable::Hooked::dies_after(memory.clone(), 1),
        ))
        .lease(Duration::from_millis(100))
        .attach(agent)
        .run("Go")
        .run_id(run_id)
        .await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let runs = Runs::from_arc(memory.clone());
    let m = model();
    let f = serve(runs.clone(), runs.attach(release(m.clone())), m, |i| {
        i.recover_every(Duration::from_millis(100))
    })
    .await;
    // The inbox took up its agent's run at start: it waits for a person again.
    let mut status = StoredStatus::Running;
    for _ in 0..300 {
        status = runs.load("r-release").await.unwrap().status;
        if status != StoredStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, StoredStatus::Paused);
    // The other is listed as stuck, and stays running.
    let alice = f.sign_in("alice-token").await;
    let list = f.get(&alice, "/").await;
    assert!(list.body.contains("id=\"stuck\""), "{}", list.body);
    assert!(list.body.contains("r-billing"), "{}", list.body);
    assert!(
        list.body.contains("does not run this agent"),
        "{}",
        list.body
    );
    assert!(!between(&list.body, "id=\"stuck\"", "</section>").contains("r-release"));
    assert_eq!(
        runs.load("r-billing").await.unwrap().status,
        StoredStatus::Running
    );
}

/// A waiting row the store cannot read back as written (here an unknown kind) is listed as
/// "damaged: run X", with no checkbox and no link, beside the other runs' calls; deciding it is
/// refused and records nothing.
#[tokio::test]
async fn a_damaged_row_is_listed_as_damaged_and_cannot_be_decided() {
    use phaseo_agent::store::{JournalRow, NewRun};
    let f = fixture(one_deploy("staging"), |i| i).await;
    f.start("Deploy").await;
    let bad = PendingRow {
        run_id: "run-bad".into(),
        agent_id: "release".into(),
        call_id: "call_9".into(),
        tool: "deploy".into(),
        kind: "approval_please".into(),
        arguments: "{}".into(),
        digest: "d".into(),
        since_ms: 1,
        version: 1,
        decision: None,
        decided_by: None,
    };
    f.runs
        .store()
        .create(NewRun {
            run_id: "run-bad".into(),
            agent_id: "release".into(),
            status: StoredStatus::Paused,
            row: JournalRow {
                version: 1,
                kind: "started".into(),
                format: 1,
                body: "{}".into(),
                digest: "x".into(),
            },
            pending: vec![bad.clone()],
            at_ms: 1,
        })
        .await
        .unwrap();
    let alice = f.sign_in("alice-token").await;
    let list = f.get(&alice, "/").await.body;
    assert_eq!(list.matches("<tr class=\"item\"").count(), 1, "{list}");
    assert!(list.contains("damaged: run run-bad"), "{list}");
    assert!(list.contains("unknown kind `approval_please`"), "{list}");
    assert!(!list.contains("value=\"run-bad/"), "no checkbox: {list}");
    assert!(!list.contains("href=\"/runs/run-bad"), "no link: {list}");
    assert!(!list.contains("id=\"empty\""));

    let before = f.audit_len().await;
    let refused = f.approve(&alice, &bad).await;
    assert!(refused >= 400, "{refused}");
    assert_eq!(f.audit_len().await, before);
}

/// A paging cursor or a filter the inbox did not make is the person's mistake, not the server's:
/// 400, naming the parameter, on the list and the audit page, over the memory store and SQLite.
#[tokio::test]
async fn a_malformed_cursor_or_filter_is_a_400_naming_the_parameter() {
    let dir = crate::durable_processes::scratch("inbox-cursor");
    let sqlite = phaseo_agent::store::SqliteStore::open(dir.join("runs.db"))
        .await
        .unwrap();
    for runs in [Runs::new(MemoryStore::new()), Runs::new(sqlite)] {
        let model = one_deploy("staging");
        let agent = runs.attach(
            Agent::builder("release")
                .model(model.clone())
                .tool(deploy())
                .build()
                .unwrap(),
        );
        // The store says which mistake it is, with a type of its own.
        let filter = PendingFilter {
            after: Some("x".into()),
            ..PendingFilter::default()
        };
        let error = runs.pending(&filter).await.unwrap_err();
        assert!(
            matches!(
                error,
                phaseo_agent::AgentError::Store(phaseo_agent::StoreError::InvalidCursor { .. })
            ),
            "{error:?}"
        );
        let f = serve(runs, agent, model, |i| i).await;
        f.start("Deploy").await;
        let alice = f.sign_in("alice-token").await;
        for (path, parameter) in [
            ("/?after=x", "after"),
            ("/?after=p1.x", "after"),
            ("/?after=99999999999999999999", "after"),
            ("/audit?after=x", "after"),
            ("/?older_than=soon", "older_than"),
            ("/?older_than=-5", "older_than"),
            ("/?kind=tool_aproval", "kind"),
        ] {
            let reply = f.get(&alice, path).await;
            assert_eq!(reply.status, 400, "{path}: {}", reply.body);
            assert!(
                reply.body.contains(&format!("`{parameter}`")),
                "{path} does not name {parameter}: {}",
                reply.body
            );
        }
        // A kind the inbox knows still lists.
        assert_eq!(f.get(&alice, "/?kind=tool_approval").await.status, 200);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Signing out ends the session on the server: its cookie, kept by someone, opens nothing any
/// more; the same person's other sessions go on.
#[tokio::test]
async fn signing_out_ends_the_session_on_the_server() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    f.start("Deploy").await;
    let laptop = f.sign_in("alice-token").await;
    let phone = f.sign_in("alice-token").await;
    let out = f.post(&laptop, "/logout", &[("csrf", &laptop.csrf)]).await;
    assert_eq!((out.status, out.location.as_deref()), (303, Some("/login")));
    for path in ["/", "/audit", "/events"] {
        let reply = f.get(&laptop, path).await;
        assert!(
            reply.status == 303 || reply.status == 401,
            "{path} after sign-out: {} {}",
            reply.status,
            reply.body
        );
    }
    let row = f.waiting().await.remove(0);
    assert_eq!(f.approve(&laptop, &row).await, 303);
    assert_eq!(f.audit_len().await, 0, "an ended session decided");
    assert_eq!(f.get(&phone, "/").await.status, 200);
    assert_eq!(f.approve(&phone, &row).await, 303);
    assert_eq!(f.audit_len().await, 1);
}

/// An event stream opened by a session ends once that session signs out: no more rows reach a
/// browser that signed out, or a copy of its cookie.
#[tokio::test]
async fn an_open_event_stream_ends_when_its_session_signs_out() {
    let f = fixture(one_deploy("staging"), |i| i).await;
    f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let mut events = f
        .client
        .get(format!("{}/events", f.url))
        .header("cookie", &alice.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let mut seen = String::new();
    while !seen.contains("data-call=\"call_1\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), events.chunk())
            .await
            .expect("an event in time")
            .unwrap()
            .expect("the stream stays open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let out = f.post(&alice, "/logout", &[("csrf", &alice.csrf)]).await;
    assert_eq!(out.status, 303);
    // The stream ends (within a few of the fixture's 20 ms polls); until then it may only send
    // what it had.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match events.chunk().await {
                Ok(Some(_)) => continue,
                _ => return,
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream is still open after its session signed out"
    );
}

/// When the record of signed-out sessions is full (`max_ended_sessions`) of sessions not yet
/// expired, signing out ends every session the person had until then: a signed-out cookie is
/// never let back in. A new sign-in works.
#[tokio::test]
async fn a_full_record_of_signed_out_sessions_signs_the_person_out_everywhere() {
    let f = fixture(one_deploy("staging"), |i| i.max_ended_sessions(1)).await;
    let first = f.sign_in("alice-token").await;
    let second = f.sign_in("alice-token").await;
    let third = f.sign_in("alice-token").await;
    let bob = f.sign_in("bob-token").await;
    assert_eq!(
        f.post(&first, "/logout", &[("csrf", &first.csrf)])
            .await
            .status,
        303
    );
    assert_eq!(f.get(&first, "/").await.status, 303);
    assert_eq!(f.get(&third, "/").await.status, 200);
    // The record holds `first`: ending `second` ends every session of alice's.
    assert_eq!(
        f.post(&second, "/logout", &[("csrf", &second.csrf)])
            .await
            .status,
        303
    );
    for (name, session) in [("first", &first), ("second", &second), ("third", &third)] {
        assert_eq!(f.get(session, "/").await.status, 303, "{name}");
    }
    assert_eq!(
        f.get(&bob, "/").await.status,
        200,
        "bob's session is his own"
    );
    let again = f.sign_in("alice-token").await;
    assert_eq!(f.get(&again, "/").await.status, 200);
}

/// A refused edit (not JSON, or arguments the schema refuses) shows the form again, 422, with
/// the text the person typed and why it was refused, so nothing they typed is lost.
#[tokio::test]
async fn a_refused_edit_shows_the_form_again_with_the_text_typed() {
    let f = fixture(one_deploy("production"), |i| i).await;
    f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    for (typed, why) in [
        ("{\"environment\": \"moon\"\n}", "$.environment"),
        ("{\"environment\": \"staging\",", "not JSON"),
    ] {
        let reply = f
            .decide(&alice, &row, &[("action", "edit"), ("arguments", typed)])
            .await;
        assert_eq!(reply.status, 422, "{}", reply.body);
        let shown = between(
            &reply.body,
            "<textarea id=\"edited\" name=\"arguments\">",
            "</textarea>",
        );
        assert_eq!(
            shown.replace("&quot;", "\""),
            typed,
            "the edit box holds what was typed"
        );
        let error = between(&reply.body, "id=\"edit-error\"", "</p>");
        assert!(error.contains(why), "{error}");
        // The form is whole again: it decides with what the page shows.
        assert!(reply.body.contains("id=\"approve\""), "{}", reply.body);
        assert!(reply.body.contains(&row.digest), "{}", reply.body);
    }
    assert_eq!(f.audit_len().await, 0);
}

/// Why a call waits, in words a person reads, on the list and the item; the list's columns have
/// headers.
#[tokio::test]
async fn every_kind_of_pause_is_named_in_words_and_the_list_has_headers() {
    let lookup = Tool::external("lookup", "Look up a customer", json!({"type": "object"}));
    let runs = Runs::new(MemoryStore::new());
    let model = ScriptedModel::new()
        .tool_call("call_1", "lookup", json!({"id": 7}))
        .tool_call("call_1", "deploy", json!({"environment": "staging"}));
    let agent = runs.attach(
        Agent::builder("crm")
            .model(model.clone())
            .tool(lookup)
            .tool(deploy())
            .build()
            .unwrap(),
    );
    agent.run("one").await.unwrap();
    agent.run("two").await.unwrap();
    let f = serve(runs, agent, model, |i| i).await;
    let alice = f.sign_in("alice-token").await;
    let list = f.get(&alice, "/").await.body;
    let head = between(&list, "<thead>", "</thead>");
    for column in ["Tool", "What", "Why it waits", "Agent", "Waiting"] {
        assert!(head.contains(column), "{column} in {head}");
    }
    assert!(head.matches("<th").count() >= 5, "{head}");
    for words in ["Needs approval", "Waiting for an outside result"] {
        assert!(list.contains(words), "{words} in {list}");
    }
    for stored in [">tool_approval<", ">external_output<"] {
        assert!(!list.contains(stored), "{stored} in {list}");
    }
    for row in f.waiting().await {
        let item = f.get(&alice, &item_path(&row)).await.body;
        let kind = between(&item, "<dd id=\"kind\">", "</dd>");
        let expected = if row.tool == "lookup" {
            "Waiting for an outside result"
        } else {
            "Needs approval"
        };
        assert_eq!(kind, expected);
    }
    let filter = between(&list, "<select name=\"kind\">", "</select>");
    assert!(
        filter.contains("Outcome unknown: may or may not have happened"),
        "{filter}"
    );
}

/// A tool's summary renders its calls for people, on the list, the item and a signed link's
/// page, with the arguments beside it. A summary that gives `None` or panics, and a typed one
/// whose type the arguments do not read as, fall back to the arguments alone.
#[tokio::test]
async fn a_tools_summary_renders_its_calls_and_falls_back_to_the_arguments() {
    #[derive(serde::Deserialize)]
    struct Notice {
        text: String,
    }
    let refund = Tool::new(
        "refund",
        "Refund an order",
        json!({"type": "object"}),
        |v, _| Ok(v),
    )
    .require_approval();
    let refund_1003 = json!({"order": "A-1003", "amount_cents": 4250, "currency": "EUR",
        "customer": "Jane Doe"});
    let model = ScriptedModel::new().tool_calls([
        phaseo_agent::ToolCall::new("call_1", "refund", refund_1003),
        phaseo_agent::ToolCall::new("call_2", "refund", json!({"order": "A-1004"})),
        phaseo_agent::ToolCall::new("call_3", "deploy", json!({"environment": "staging"})),
        phaseo_agent::ToolCall::new("call_4", "notify", json!({"text": "hello"})),
        phaseo_agent::ToolCall::new("call_5", "notify", json!({"other": 1})),
    ]);
    let runs = Runs::new(MemoryStore::new());
    let agent = runs.attach(
        Agent::builder("payments")
            .model(model.clone())
            .tool(refund)
            .tool(deploy())
            .tool(notify())
            .build()
            .unwrap(),
    );
    agent.run("Refund").await.unwrap();
    let f = serve(runs, agent, model, |i| {
        i.summary("refund", |args| {
            let cents = args["amount_cents"].as_u64()?;
            Some(format!(
                "{} {}.{:02} to {} for {}",
                args["currency"].as_str()?,
                cents / 100,
                cents % 100,
                args["customer"].as_str()?,
                args["order"].as_str()?
            ))
        })
        .summary("deploy", |_| panic!("a summary with a bug"))
        .summary_as("notify", |n: &Notice| format!("Tell the team: {}", n.text))
    })
    .await;
    let alice = f.sign_in("alice-token").await;
    let list = f.get(&alice, "/").await.body;
    let refund_line = "EUR 42.50 to Jane Doe for A-1003";
    assert!(list.contains(refund_line), "{list}");
    assert!(list.contains("Tell the team: hello"), "{list}");
    assert_eq!(list.matches("class=\"summary\"").count(), 2, "{list}");
    assert!(
        list.contains("A-1004") && list.contains("staging"),
        "{list}"
    );

    let rows = f.waiting().await;
    for row in &rows {
        let page = f.get(&alice, &item_path(row)).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains("id=\"arguments\""));
        let summary = match row.call_id.as_str() {
            "call_1" => Some(refund_line),
            "call_4" => Some("Tell the team: hello"),
            _ => None,
        };
        match summary {
            Some(text) => assert_eq!(
                between(&page.body, "id=\"summary\">", "</p>"),
                text,
                "{}",
                row.call_id
            ),
            None => assert!(!page.body.contains("id=\"summary\""), "{}", row.call_id),
        }
    }
    let call_1 = rows.iter().find(|r| r.call_id == "call_1").unwrap();
    let link = f
        .inbox
        .signed_link(
            call_1,
            LinkAction::Approve,
            "alice",
            Duration::from_secs(60),
        )
        .unwrap();
    let anonymous = Session {
        cookie: String::new(),
        csrf: String::new(),
    };
    let confirm = f.get(&anonymous, &link).await.body;
    assert_eq!(between(&confirm, "id=\"summary\">", "</p>"), refund_line);
}

/// Each checkbox of the list is labelled with what tells its item apart (the tool, the run, what
/// the call does), not only the tool and the call's id, which repeat from run to run.
#[tokio::test]
async fn each_checkbox_is_labelled_with_what_tells_its_item_apart() {
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"environment": "staging"}))
        .tool_call("call_1", "deploy", json!({"environment": "production"}));
    let f = fixture(model, |i| i).await;
    let first = f.start("one").await;
    let second = f.start("two").await;
    let alice = f.sign_in("alice-token").await;
    let list = f.get(&alice, "/").await.body;
    let labels: Vec<&str> = list
        .split("class=\"select\"")
        .skip(1)
        .map(|rest| between(rest, "aria-label=\"", "\""))
        .collect();
    assert_eq!(labels.len(), 2, "{list}");
    assert_ne!(labels[0], labels[1]);
    for label in &labels {
        assert!(label.contains("deploy"), "{label}");
    }
    let staging = labels.iter().find(|l| l.contains("staging")).unwrap();
    let production = labels.iter().find(|l| l.contains("production")).unwrap();
    assert!(staging.contains(&first), "{staging}");
    assert!(production.contains(&second), "{production}");
}

/// "Approve for the rest of the run" is not offered, and a forged form asking for it is refused,
/// for a tool marked destructive and for a tool of an agent the inbox does not know.
#[tokio::test]
async fn approve_always_is_refused_for_destructive_tools_and_unknown_agents() {
    let wipe = Tool::new("wipe", "Wipe a disk", json!({"type": "object"}), |v, _| {
        Ok(v)
    })
    .require_approval()
    .destructive(true);
    let model = ScriptedModel::new().tool_call("call_1", "wipe", json!({"disk": "sda"}));
    let runs = Runs::new(MemoryStore::new());
    let agent = runs.attach(
        Agent::builder("ops")
            .model(model.clone())
            .tool(wipe)
            .build()
            .unwrap(),
    );
    agent.run("Wipe").await.unwrap();
    // A run of an agent the inbox is not given.
    let stranger = runs.attach(
        Agent::builder("stranger")
            .model(one_deploy("staging"))
            .tool(deploy())
            .build()
            .unwrap(),
    );
    stranger.run("Deploy").await.unwrap();
    let f = serve(runs, agent, model, |i| i).await;
    let alice = f.sign_in("alice-token").await;
    let rows = f.waiting().await;
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let page = f.get(&alice, &item_path(row)).await.body;
        assert!(page.contains("id=\"approve\""), "{page}");
        assert!(!page.contains("approve_always"), "{}: {page}", row.tool);
        let forged = f.decide(&alice, row, &[("action", "approve_always")]).await;
        assert_eq!(forged.status, 403, "{}: {}", row.tool, forged.body);
        assert!(forged.body.contains("rest of the run"), "{}", forged.body);
    }
    assert_eq!(f.audit_len().await, 0);
    // A plain approval still works.
    assert_eq!(f.approve(&alice, &rows[0]).await, 303);
}

/// `Inbox::approve_always(tool, on)` overrides the default both ways: off for a tool that is
/// not destructive (no button, a forged form refused), on for one that is.
#[tokio::test]
async fn the_approve_always_switch_overrides_the_default_per_tool() {
    let wipe = Tool::new("wipe", "Wipe a disk", json!({"type": "object"}), |v, _| {
        Ok(v)
    })
    .require_approval()
    .destructive(true);
    let model = ScriptedModel::new().tool_calls([
        phaseo_agent::ToolCall::new("call_1", "wipe", json!({"disk": "sdb"})),
        phaseo_agent::ToolCall::new("call_2", "deploy", json!({"environment": "staging"})),
    ]);
    let runs = Runs::new(MemoryStore::new());
    let agent = runs.attach(
        Agent::builder("ops")
            .model(model.clone())
            .tool(wipe)
            .tool(deploy())
            .build()
            .unwrap(),
    );
    agent.run("Wipe and deploy").await.unwrap();
    let f = serve(runs, agent, model, |i| {
        i.approve_always("wipe", true)
            .approve_always("deploy", false)
    })
    .await;
    let alice = f.sign_in("alice-token").await;
    let rows = f.waiting().await;
    let wipe = rows.iter().find(|r| r.tool == "wipe").unwrap();
    let deploy = rows.iter().find(|r| r.tool == "deploy").unwrap();
    let page = f.get(&alice, &item_path(deploy)).await.body;
    assert!(!page.contains("approve_always"), "{page}");
    let forged = f
        .decide(&alice, deploy, &[("action", "approve_always")])
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert_eq!(f.audit_len().await, 0);
    let page = f.get(&alice, &item_path(wipe)).await.body;
    assert!(page.contains("id=\"approve-always\""), "{page}");
    let allowed = f
        .decide(&alice, wipe, &[("action", "approve_always")])
        .await;
    assert_eq!(allowed.status, 303, "{}", allowed.body);
    assert_eq!(f.audit_len().await, 1);
}

/// Characters a person cannot see, or that turn the text around them (bidirectional controls,
/// zero-width ones, a soft hyphen), are shown as visible escapes on every page that shows what a
/// call does, with a note that the text holds them; the edit box holds the same JSON value with
/// `\uXXXX` escapes.
#[tokio::test]
async fn invisible_and_direction_changing_characters_are_shown_as_escapes() {
    let hidden = [
        '\u{202E}',
        '\u{2066}',
        '\u{200F}',
        '\u{061C}',
        '\u{200B}',
        '\u{FEFF}',
        '\u{2060}',
        '\u{00AD}',
        '\u{0007}',
        '\u{E0041}',
    ];
    let text: String = hidden.iter().map(|c| format!("x{c}")).collect::<String>();
    let model = ScriptedModel::new()
        .tool_call(
            "call_1",
            "notify",
            json!({"file": "invoice\u{202E}fdp.exe", "text": text}),
        )
        .text("Sent.");
    let f = fixture(model, |i| i).await;
    let run_id = f.start("Send").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    let link = f
        .inbox
        .signed_link(&row, LinkAction::Reject, "alice", Duration::from_secs(60))
        .unwrap();
    let anonymous = Session {
        cookie: String::new(),
        csrf: String::new(),
    };
    let list = f.get(&alice, "/").await.body;
    let item = f.get(&alice, &item_path(&row)).await.body;
    let confirm = f.get(&anonymous, &link).await.body;
    for (name, page) in [("list", &list), ("item", &item), ("link", &confirm)] {
        for c in hidden {
            assert!(!page.contains(c), "{name} holds U+{:04X}: {page}", c as u32);
        }
        assert!(page.contains("\\u{202E}"), "{name}: {page}");
        assert!(
            page.contains("invisible or direction-changing characters"),
            "{name} has no note: {page}"
        );
    }
    assert!(
        item.contains("\\u{E0041}") && item.contains("\\u{00AD}"),
        "{item}"
    );
    // The edit box: the same JSON value, its hidden characters as JSON escapes.
    let edit = between(
        &item,
        "<textarea id=\"edited\" name=\"arguments\">",
        "</textarea>",
    )
    .replace("&quot;", "\"");
    assert!(edit.contains("invoice\\u202Efdp.exe"), "{edit}");
    let value: Value = serde_json::from_str(&edit).unwrap();
    assert_eq!(value.to_string(), row.arguments);

    // Edited as shown, approved: the audit page shows the arguments before and after, escaped.
    let reply = f
        .decide(&alice, &row, &[("action", "edit"), ("arguments", &edit)])
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    f.finished(&run_id).await;
    let audit = f.get(&alice, "/audit").await.body;
    for c in hidden {
        assert!(
            !audit.contains(c),
            "the audit page holds U+{:04X}",
            c as u32
        );
    }
    assert!(audit.contains("\\u{202E}"), "{audit}");
    assert!(audit.contains("invisible or direction-changing characters"));
}

/// A recovered run that takes long (its tool waits) does not hold up the inbox's next looks: a
/// run abandoned while it runs is taken up too.
#[tokio::test]
async fn a_long_recovered_run_does_not_hold_up_the_next_recovery() {
    let memory = std::sync::Arc::new(MemoryStore::new());
    let release = tokio::sync::Semaphore::new(0);
    let release = std::sync::Arc::new(release);
    // The dying process's tool never waits; the recovering one's waits when asked to. Both are
    // idempotent: a call whose start was written with its turn runs again on recovery.
    let waits = |blocking: bool| {
        let release = release.clone();
        Tool::new(
            "wait",
            "Waits, when asked to, until the test lets it go",
            json!({"type": "object"}),
            move |args: Value, _| {
                if blocking && args["block"] == json!(true) {
                    // Blocks this call's thread until released (the tool is synchronous).
                    while release.try_acquire().is_err() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                Ok(json!("waited"))
            },
        )
        .idempotent(true)
    };
    let agent = |model: ScriptedModel, blocking: bool| {
        Agent::builder("release")
            .model(model)
            .tool(waits(blocking))
            .build()
            .unwrap()
    };
    // A process dies after the model's turn and its call's start (started, turn with the start)
    // with a short lease.
    let die_after_turn = |run_id: &'static str, block: bool| {
        let (memory, agent) = (memory.clone(), &agent);
        async move {
            let model = ScriptedModel::new().tool_call("c1", "wait", json!({"block": block}));
            let _ = Runs::without_queue(std::sync::Arc::new(
                crate::support::durable::Hooked::dies_after(memory, 2),
            ))
            .lease(Duration::from_millis(100))
            .attach(agent(model, false))
            .run("Go")
            .run_id(run_id)
            .await;
        }
    };
    die_after_turn("slow", true).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let runs = Runs::from_arc(memory.clone());
    let model = ScriptedModel::new().text("Done.").text("Done.");
    let _f = serve(
        runs.clone(),
        runs.attach(agent(model.clone(), true)),
        model,
        |i| i.recover_every(Duration::from_millis(100)),
    )
    .await;
    // The inbox takes up "slow", whose tool now waits; then another process dies.
    tokio::time::sleep(Duration::from_millis(300)).await;
    die_after_turn("quick", false).await;
    // However this test ends, the waiting tool is let go (a runtime waits for it to end).
    struct LetGo(std::sync::Arc<tokio::sync::Semaphore>);
    impl Drop for LetGo {
        fn drop(&mut self) {
            self.0.add_permits(1);
        }
    }
    let let_go = LetGo(release.clone());
    let mut status = StoredStatus::Running;
    for _ in 0..300 {
        status = runs.load("quick").await.unwrap().status;
        if status == StoredStatus::Completed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        status,
        StoredStatus::Completed,
        "the second run was never taken up"
    );
    assert_eq!(
        runs.load("slow").await.unwrap().status,
        StoredStatus::Running
    );
    drop(let_go);
    for _ in 0..300 {
        if runs.load("slow").await.unwrap().status == StoredStatus::Completed {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the slow run did not complete once let go");
}

/// The list reads a failed run's failure once, not at every render: a failed run changes only
/// when retried.
#[tokio::test]
async fn the_list_reads_a_failed_runs_failure_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let memory = std::sync::Arc::new(MemoryStore::new());
    let loads = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = loads.clone();
    let runs = Runs::without_queue(std::sync::Arc::new(
        crate::support::durable::Hooked::new(memory.clone()).on_load(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        }),
    ));
    let model = ScriptedModel::new().error(phaseo_agent::ModelError::other("the model is down"));
    let agent = runs.attach(
        Agent::builder("release")
            .model(model.clone())
            .tool(deploy())
            .build()
            .unwrap(),
    );
    assert!(agent.run("Deploy").await.is_err());
    let f = serve(runs.clone(), agent, model, |i| i).await;
    let alice = f.sign_in("alice-token").await;
    let before = loads.load(Ordering::SeqCst);
    for _ in 0..3 {
        let list = f.get(&alice, "/").await;
        assert!(list.body.contains("the model is down"), "{}", list.body);
    }
    assert_eq!(
        loads.load(Ordering::SeqCst),
        before,
        "read at sign-in's list, then kept"
    );
}

/// A store that counts the reads a decision makes: loads of a run, and listings.
struct Counting {
    inner: MemoryStore,
    loads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    listings: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl phaseo_agent::store::RunStore for Counting {
    fn create(
        &self,
        run: phaseo_agent::store::NewRun,
    ) -> futures::future::BoxFuture<'_, Result<(), phaseo_agent::StoreError>> {
        self.inner.create(run)
    }
    fn append(
        &self,
        append: phaseo_agent::store::Append,
    ) -> futures::future::BoxFuture<'_, Result<(), phaseo_agent::StoreError>> {
        self.inner.append(append)
    }
    fn load<'a>(
        &'a self,
        run_id: &'a str,
    ) -> futures::future::BoxFuture<
        'a,
        Result<phaseo_agent::store::LoadedRun, phaseo_agent::StoreError>,
    > {
        self.loads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.load(run_id)
    }
    fn pending<'a>(
        &'a self,
        filter: &'a PendingFilter,
    ) -> futures::future::BoxFuture<
        'a,
        Result<phaseo_agent::store::Page<PendingRow>, phaseo_agent::StoreError>,
    > {
        self.listings
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.pending(filter)
    }
    fn runs<'a>(
        &'a self,
        filter: &'a phaseo_agent::store::RunFilter,
    ) -> futures::future::BoxFuture<
        'a,
        Result<
            phaseo_agent::store::Page<phaseo_agent::store::RunSummary>,
            phaseo_agent::StoreError,
        >,
    > {
        self.listings
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.runs(filter)
    }
    fn audit<'a>(
        &'a self,
        filter: &'a AuditFilter,
    ) -> futures::future::BoxFuture<
        'a,
        Result<
            phaseo_agent::store::Page<phaseo_agent::store::DecisionRow>,
            phaseo_agent::StoreError,
        >,
    > {
        self.listings
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.audit(filter)
    }
    fn prune(
        &self,
        before_ms: i64,
    ) -> futures::future::BoxFuture<'_, Result<u64, phaseo_agent::StoreError>> {
        self.inner.prune(before_ms)
    }
}

#[tokio::test]
async fn one_click_loads_the_run_once_and_lists_nothing_before_it_is_recorded() {
    use std::sync::atomic::Ordering;
    let loads = std::sync::Arc::default();
    let listings = std::sync::Arc::default();
    let store = Counting {
        inner: MemoryStore::new(),
        loads: std::sync::Arc::clone(&loads),
        listings: std::sync::Arc::clone(&listings),
    };
    let runs = Runs::without_queue(std::sync::Arc::new(store));
    let model = one_deploy("staging");
    let agent = runs.attach(
        Agent::builder("release")
            .model(model.clone())
            .tool(deploy())
            .build()
            .unwrap(),
    );
    // No agent for the inbox: nothing resumes in the background, so every read counted is the
    // click's own.
    let f = serve_inbox(runs.clone(), agent, model, users(Inbox::new(runs))).await;
    f.start("Deploy").await;
    let alice = f.sign_in("alice-token").await;
    let row = f.waiting().await.remove(0);
    loads.store(0, Ordering::SeqCst);
    listings.store(0, Ordering::SeqCst);
    let reply = f.decide(&alice, &row, &[("action", "approve")]).await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(
        (
            loads.load(Ordering::SeqCst),
            listings.load(Ordering::SeqCst)
        ),
        (1, 0),
        "one click: one load of the run, no listing"
    );
    assert_eq!(f.audit_len().await, 1);
}
