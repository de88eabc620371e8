//! The approval inbox in a real browser: headless Chromium over WebDriver, against the inbox's
//! router served in this process on 127.0.0.1 (a port of its own per test), each test with a fresh
//! SQLite store in a directory of its own and a scripted model. What a person does with the page
//! (sign in, approve, reject with a message, edit, batch, a race of two browsers, a stale page,
//! a forged form, a viewer, a signed link, items arriving by server-sent events, the inbox nested
//! under a prefix) is checked both on the page and in the store.
//!
//! Run by `interop/run.sh` (`--ignored`); without `PHASEO_INTEROP_WEBDRIVER_URL` a test fails,
//! never passes. The list's and an item's screenshots are written to the temporary directory's
//! `phaseo-agent-screenshots/`, and with `PHASEO_UPDATE_SCREENSHOTS=1` to `docs/inbox-list.png`
//! and `docs/inbox-item.png` (the README shows them).

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fantoccini::Client;
use futures::future::BoxFuture;
use phaseo_agent::durable::{DurableAgent, Runs, StoredRun};
use phaseo_agent::inbox::{Inbox, LinkAction, User};
use phaseo_agent::serde_json::{self, Value, json};
use phaseo_agent::store::{AuditFilter, PendingRow, SqliteStore, StoredStatus};
use phaseo_agent::{
    Agent, Decision, Message, Model, ModelError, ModelRequest, ModelResponse, Tool, ToolCall,
};

use super::browser::{
    body_text, eventually, find, find_all, goto, path, serve, status, text, url, with_browsers,
};
use crate::durable_processes::scratch;

/// The agent of every run here.
const AGENT: &str = "release";

/// The tool every run calls: it needs approval, and its schema allows two environments only, so
/// an edit to `{"env": "moon"}` fails validation.
fn deploy() -> Tool {
    Tool::new(
        "deploy",
        "Deploy the current build to an environment.",
        json!({
            "type": "object",
            "properties": {"env": {"type": "string", "enum": ["staging", "production"]}},
            "required": ["env"],
            "additionalProperties": false
        }),
        |args: Value, _| Ok(json!({"deployed": args["env"]})),
    )
    .require_approval()
}

/// A model that follows the run's input and remembers every conversation it was asked:
///
/// - `deploy ENV`: one call `call_1` to deploy ENV, then a text;
/// - `deploy ENV then ENV2`: `call_1` for ENV, once that is decided `call_2` for ENV2, then a text.
///
/// Its text reads back every tool result it was given (`Done: RESULT | RESULT`), so a rejection's
/// message shows in the model's next turn.
#[derive(Clone, Default)]
struct Release {
    asked: Arc<Mutex<Vec<Vec<Message>>>>,
    /// When set, the next final answer fails instead (an unreachable model), once.
    fail_once: Arc<Mutex<bool>>,
}

impl Release {
    /// Every tool result of every conversation the model was asked, as text.
    fn tool_results_seen(&self) -> Vec<String> {
        let asked = self.asked.lock().unwrap();
        asked
            .iter()
            .flatten()
            .filter_map(|m| match m {
                Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }
}

impl Model for Release {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.asked.lock().unwrap().push(request.messages.to_vec());
        let input = request
            .messages
            .iter()
            .find_map(|m| match m {
                Message::User { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let envs: Vec<&str> = input
            .trim_start_matches("deploy ")
            .split(" then ")
            .collect();
        let answer = match envs.get(turn) {
            Some(env) => ModelResponse::tool_calls([ToolCall::new(
                format!("call_{}", turn + 1),
                "deploy",
                json!({"env": env}),
            )]),
            None if std::mem::take(&mut *self.fail_once.lock().unwrap()) => {
                return Box::pin(async {
                    Err(ModelError::from_status(401, "the model's key was revoked"))
                });
            }
            None => {
                let results: Vec<&str> = request
                    .messages
                    .iter()
                    .filter_map(|m| match m {
                        Message::Tool { content, .. } => Some(content.as_str()),
                        _ => None,
                    })
                    .collect();
                ModelResponse::text(format!("Done: {}", results.join(" | ")))
            }
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// One test's world: a SQLite store in a fresh directory, the agent on it, and the inbox served
/// at `base` with four people: alice and bob approve, victor only views, root is an admin.
struct World {
    base: String,
    runs: Runs,
    agent: DurableAgent,
    inbox: Inbox,
    model: Release,
    dir: PathBuf,
}

impl World {
    async fn new(name: &str) -> World {
        World::mounted(name, "").await
    }

    /// The inbox nested under `prefix` (`""`: at the root) of the server's router.
    async fn mounted(name: &str, prefix: &str) -> World {
        let dir = scratch(&format!("inbox-{name}"));
        let store = SqliteStore::open(dir.join("runs.db"))
            .await
            .expect("a SQLite store");
        let runs = Runs::new(store);
        let model = Release::default();
        let agent = runs.attach(
            Agent::builder(AGENT)
                .instructions("Deploy what you are asked to.")
                .model(model.clone())
                .tool(deploy())
                .build()
                .expect("the agent"),
        );
        let inbox = Inbox::new(runs.clone())
            .agent(agent.clone())
            .secret(b"interop-inbox-secret-0123456789abcdef")
            .user("alice-token", User::approver("alice"))
            .user("bob-token", User::approver("bob"))
            .user("victor-token", User::viewer("victor"))
            .user("root-token", User::admin("root"));
        let app = if prefix.is_empty() {
            inbox.router()
        } else {
            axum::Router::new().nest(prefix, inbox.router())
        };
        let base = format!("{}{prefix}", serve(app).await);
        World {
            base,
            runs,
            agent,
            inbox,
            model,
            dir,
        }
    }

    /// Starts a run with `input`; it pauses for its first approval. Returns its id.
    async fn start(&self, input: &str) -> String {
        let paused = self.agent.run(input).await.expect("the run pauses");
        assert!(paused.is_paused(), "the run waits for an approval");
        paused.state.run_id().to_owned()
    }

    async fn load(&self, run_id: &str) -> StoredRun {
        self.runs.load(run_id).await.expect("the stored run")
    }

    /// The stored waiting row of a call.
    async fn row(&self, run_id: &str, call_id: &str) -> PendingRow {
        let stored = self.load(run_id).await;
        stored
            .pending
            .iter()
            .find(|p| p.call_id == call_id)
            .cloned()
            .unwrap_or_else(|| panic!("{run_id}/{call_id} is not waiting: {:?}", stored.pending))
    }

    /// Waits until the inbox's background resume has run the run to its end.
    async fn completed(&self, run_id: &str) -> StoredRun {
        eventually(&format!("run {run_id} to complete"), || async {
            self.load(run_id).await.status == StoredStatus::Completed
        })
        .await;
        self.load(run_id).await
    }

    async fn audit_len(&self) -> usize {
        self.runs
            .audit(&AuditFilter::default())
            .await
            .expect("the audit log")
            .items
            .len()
    }

    /// What a refused decision must leave as it was: the call's waiting row, the run's version
    /// and the length of the audit log.
    async fn seen(&self, run_id: &str, call_id: &str) -> Seen {
        Seen {
            run_id: run_id.to_owned(),
            row: self.row(run_id, call_id).await,
            version: self.load(run_id).await.version,
            audited: self.audit_len().await,
        }
    }

    /// Checks that nothing was recorded since `seen`.
    async fn assert_unchanged(&self, seen: &Seen, what: &str) {
        let now = self.seen(&seen.run_id, &seen.row.call_id).await;
        assert_eq!(now.row, seen.row, "{what}: the waiting row is unchanged");
        assert_eq!(
            now.version, seen.version,
            "{what}: nothing was written to the run"
        );
        assert_eq!(
            now.audited, seen.audited,
            "{what}: nothing was added to the audit log"
        );
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn item(&self, run_id: &str, call_id: &str) -> String {
        self.url(&format!("/runs/{run_id}/calls/{call_id}"))
    }
}

/// A call's stored state before a decision that must be refused ([`World::seen`]).
struct Seen {
    run_id: String,
    row: PendingRow,
    version: u64,
    audited: usize,
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Signs in with `token` on the login form; the list is shown.
async fn sign_in(client: &Client, world: &World, token: &str) {
    goto(client, &world.url("/login")).await;
    find(client, "input[name=token]")
        .await
        .send_keys(token)
        .await
        .unwrap();
    find(client, "button#sign-in").await.click().await.unwrap();
    find(client, "table#items").await;
    assert_eq!(
        url(client).await.trim_end_matches('/'),
        world.base,
        "signing in leads to the list"
    );
}

/// Types `value` into the field `css`, replacing what it held.
async fn fill(client: &Client, css: &str, value: &str) {
    let field = find(client, css).await;
    field.clear().await.unwrap();
    field.send_keys(value).await.unwrap();
}

async fn click(client: &Client, css: &str) {
    find(client, css).await.click().await.unwrap();
}

/// The list's item for a run's call.
fn item_css(run_id: &str, call_id: &str) -> String {
    format!("tr.item[data-run=\"{run_id}\"][data-call=\"{call_id}\"]")
}

/// The message the page shows for a refused decision, and its status.
async fn refusal(client: &Client) -> (u16, String) {
    let message = text(client, ".error").await;
    (status(client).await, message)
}

/// One browser, signed in with `token`, on a fresh world (`name`) where a run of each of `inputs`
/// waits; `scenario` gets the browser, the world and the runs' ids, in `inputs`' order.
async fn signed_in<F, Fut>(name: &str, token: &str, inputs: &[&str], scenario: F)
where
    F: FnOnce(Client, World, Vec<String>) -> Fut,
    Fut: Future<Output = ()>,
{
    let world = World::new(name).await;
    let mut runs = Vec::with_capacity(inputs.len());
    for input in inputs {
        runs.push(world.start(input).await);
    }
    with_browsers(1, |clients| async move {
        let client = clients[0].clone();
        sign_in(&client, &world, token).await;
        scenario(client, world, runs).await;
    })
    .await;
}

/// Saves a screenshot in the temporary directory's `phaseo-agent-screenshots/`, or, with
/// `PHASEO_UPDATE_SCREENSHOTS=1`, over the README's in `docs/` (their run ids and times change
/// at every run, so a plain run leaves the working tree alone).
fn save_screenshot(png: &[u8], name: &str) {
    assert!(png.starts_with(b"\x89PNG"), "a screenshot is a PNG");
    let dir = if std::env::var("PHASEO_UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs")
    } else {
        std::env::temp_dir().join("phaseo-agent-screenshots")
    };
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let path = dir.join(name);
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    eprintln!("screenshot: {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_sign_in() {
    let world = World::new("sign-in").await;
    with_browsers(1, |clients| async move {
        let client = &clients[0];
        // Without a session every page leads to the login form.
        goto(client, &world.url("/")).await;
        find(client, "input[name=token]").await;
        assert_eq!(path(client).await, "/login");
        goto(client, &world.url("/audit")).await;
        find(client, "input[name=token]").await;
        assert_eq!(path(client).await, "/login");
        // Nor does the event stream answer without one.
        let events = client
            .execute_async(
                "const done = arguments[0]; \
                 fetch('/events').then(r => done(r.status), e => done(String(e)));",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(events, json!(401), "the event stream without a session");

        // A wrong token is refused.
        fill(client, "input[name=token]", "mallory-token").await;
        click(client, "button#sign-in").await;
        let (code, _) = refusal(client).await;
        assert_eq!(code, 401, "a wrong token");

        // The right one signs in: an empty list, and the session cookie is not readable by script.
        sign_in(client, &world, "alice-token").await;
        find(client, "p#empty").await;
        assert_eq!(text(client, "#user").await, "alice", "who is signed in");
        let cookies = client
            .execute("return document.cookie;", vec![])
            .await
            .unwrap();
        assert_eq!(cookies, json!(""), "the session cookie is HttpOnly");
        goto(client, &world.url("/audit")).await;
        find(client, "table#audit").await;

        // Signing out ends the session.
        click(client, "button#sign-out").await;
        find(client, "input[name=token]").await;
        goto(client, &world.url("/")).await;
        find(client, "input[name=token]").await;
        assert_eq!(path(client).await, "/login", "signed out");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_approve() {
    let inputs = [
        "deploy staging",
        "deploy production",
        "deploy staging then production",
    ];
    signed_in(
        "approve",
        "alice-token",
        &inputs,
        |client, world, runs| async move {
            let (client, staging) = (&client, runs[0].clone());
            let items = find_all(client, "#items tr.item").await;
            assert_eq!(
                items.len(),
                3,
                "three runs wait: {}",
                body_text(client).await
            );
            // Newest first.
            let first = items[0].attr("data-run").await.unwrap();
            assert_ne!(
                first.as_deref(),
                Some(staging.as_str()),
                "the oldest run is not first"
            );
            save_screenshot(&client.screenshot().await.unwrap(), "inbox-list.png");

            find(client, &format!("{} a.open", item_css(&staging, "call_1")))
                .await
                .click()
                .await
                .unwrap();
            assert_eq!(text(client, "#tool").await, "deploy");
            assert!(
                text(client, "#description")
                    .await
                    .contains("Deploy the current build")
            );
            let shown: Value = serde_json::from_str(&text(client, "pre#arguments").await)
                .expect("the arguments, as JSON");
            assert_eq!(shown, json!({"env": "staging"}));
            assert!(
                text(client, "#conversation")
                    .await
                    .contains("deploy staging")
            );
            find(client, "#since").await;
            find(client, "#kind").await;
            save_screenshot(&client.screenshot().await.unwrap(), "inbox-item.png");

            click(client, "#approve").await;
            find(client, "#flash.ok").await;
            // A decision leads to the run's page.
            assert_eq!(path(client).await, format!("/runs/{staging}"));

            let done = world.completed(&staging).await;
            assert_eq!(
                done.state.output(),
                Some(r#"Done: {"deployed":"staging"}"#),
                "the approved call ran and the model's next turn followed"
            );
            let audit = world
                .runs
                .audit(&AuditFilter::default())
                .await
                .unwrap()
                .items;
            assert_eq!(audit.len(), 1);
            assert_eq!(
                (audit[0].by.as_str(), audit[0].call_id.as_str()),
                ("alice", "call_1")
            );
            // The decided item has left the list.
            goto(client, &world.url("/")).await;
            find(client, "table#items").await;
            assert!(
                find_all(client, &item_css(&staging, "call_1"))
                    .await
                    .is_empty()
            );
            assert_eq!(find_all(client, "#items tr.item").await.len(), 2);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_reject_with_a_message_the_model_reads() {
    let message = "Not on a Friday: use the blue-green rollout on Monday.";
    signed_in("reject", "alice-token", &["deploy production"], |client, world, runs| async move {
        let (client, run) = (&client, runs[0].clone());
        goto(client, &world.item(&run, "call_1")).await;
        fill(client, "textarea#message", message).await;
        click(client, "#reject").await;
        find(client, "#flash.ok").await;

        let done = world.completed(&run).await;
        let answered = done
            .state
            .messages()
            .iter()
            .any(|m| matches!(m, Message::Tool { call_id, content, .. } if call_id == "call_1" && content.contains(message)));
        assert!(answered, "the stored run's conversation carries the message: {:?}", done.state.messages());
        assert!(
            world.model.tool_results_seen().iter().any(|r| r.contains(message)),
            "the model's next turn was given the message"
        );
        assert!(
            done.state.output().unwrap_or_default().contains(message),
            "the model's answer used it: {:?}",
            done.state.output()
        );
        assert!(
            done.state.tool_result("call_1").is_none_or(|r| !r.contains("deployed")),
            "the rejected call did not run"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_edit_invalid_then_valid_arguments() {
    signed_in("edit", "alice-token", &["deploy staging"], |client, world, runs| async move {
        let (client, run) = (&client, runs[0].clone());
        let before = world.seen(&run, "call_1").await;

        // Arguments the tool's schema refuses: the error is shown, nothing is saved.
        goto(client, &world.item(&run, "call_1")).await;
        fill(client, "textarea#edited", r#"{"env": "moon"}"#).await;
        click(client, "#edit").await;
        let (code, error) = refusal(client).await;
        assert_eq!(code, 422, "invalid edited arguments: {error}");
        assert!(!error.is_empty(), "the validation error is shown");
        world.assert_unchanged(&before, "edited arguments the schema refuses").await;

        // Not JSON at all: refused the same way.
        goto(client, &world.item(&run, "call_1")).await;
        fill(client, "textarea#edited", "{env: production").await;
        click(client, "#edit").await;
        let (code, error) = refusal(client).await;
        assert_eq!(code, 422, "arguments that are not JSON: {error}");
        world.assert_unchanged(&before, "edited arguments that are not JSON").await;

        // Valid ones: saved, and the run completes with them.
        goto(client, &world.item(&run, "call_1")).await;
        fill(client, "textarea#edited", r#"{"env": "production"}"#).await;
        click(client, "#edit").await;
        find(client, "#flash.ok").await;
        let done = world.completed(&run).await;
        assert_eq!(done.state.tool_result("call_1"), Some(r#"{"deployed":"production"}"#));
        assert_eq!(done.state.output(), Some(r#"Done: {"deployed":"production"}"#));

        // The audit page shows the arguments before and after.
        goto(client, &world.url("/audit")).await;
        let row = text(client, "table#audit > tbody > tr").await;
        assert!(row.contains("alice"), "who: {row}");
        let before = text(client, "table#audit > tbody > tr pre.before").await;
        let after = text(client, "table#audit > tbody > tr pre.after").await;
        assert!(
            before.contains("staging") && after.contains("production"),
            "the audit shows the arguments before the edit and after it: before {before:?}, after {after:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_batch_approve_two_items() {
    let inputs = ["deploy staging", "deploy production"];
    signed_in(
        "batch",
        "alice-token",
        &inputs,
        |client, world, runs| async move {
            let (client, one, two) = (&client, runs[0].clone(), runs[1].clone());
            for run in [&one, &two] {
                let checkbox = format!("{} input.select[name=item]", item_css(run, "call_1"));
                let value = find(client, &checkbox).await.attr("value").await.unwrap();
                let row = world.row(run, "call_1").await;
                assert_eq!(
                    value,
                    Some(format!("{run}/call_1/{}/{}", row.version, row.digest)),
                    "the checkbox names the run, the call, the version and the digest shown"
                );
                click(client, &checkbox).await;
            }
            click(client, "button#batch-approve").await;
            find(client, "li.batch-result").await;
            assert_eq!(
                find_all(client, "li.batch-result.ok").await.len(),
                2,
                "{}",
                body_text(client).await
            );
            assert!(find_all(client, "li.batch-result.error").await.is_empty());

            for run in [&one, &two] {
                let done = world.completed(run).await;
                assert!(
                    done.state
                        .output()
                        .unwrap()
                        .starts_with("Done: {\"deployed\"")
                );
            }
            assert_eq!(world.audit_len().await, 2);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_two_browsers_race_on_one_item() {
    let world = World::new("race").await;
    let run = world.start("deploy production").await;
    with_browsers(2, |clients| async move {
        let (alice, bob) = (&clients[0], &clients[1]);
        sign_in(alice, &world, "alice-token").await;
        sign_in(bob, &world, "bob-token").await;
        let item = world.item(&run, "call_1");
        goto(alice, &item).await;
        goto(bob, &item).await;
        let (a, b) = (find(alice, "#approve").await, find(bob, "#reject").await);
        fill(bob, "textarea#message", "No.").await;
        let (ra, rb) = tokio::join!(a.click(), b.click());
        ra.unwrap();
        rb.unwrap();

        let mut outcomes = Vec::new();
        for client in [alice, bob] {
            find(client, "#flash.ok, .error").await;
            let ok = !find_all(client, "#flash.ok").await.is_empty();
            let error = if ok {
                String::new()
            } else {
                refusal(client).await.1
            };
            let code = status(client).await;
            outcomes.push((ok, code, error));
        }
        let winners = outcomes.iter().filter(|(ok, ..)| *ok).count();
        assert_eq!(winners, 1, "exactly one decision wins: {outcomes:?}");
        let (_, code, error) = outcomes.iter().find(|(ok, ..)| !ok).unwrap();
        assert_eq!(*code, 409, "the other is refused: {error}");
        assert!(
            error.contains("already decided"),
            "the other is told: {error}"
        );

        assert_eq!(world.audit_len().await, 1, "one decision recorded");
        let done = world.completed(&run).await;
        let approved = done.state.tool_result("call_1") == Some(r#"{"deployed":"production"}"#);
        assert_eq!(
            approved, outcomes[0].0,
            "the run followed the winner's decision"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_stale_page_refused() {
    signed_in(
        "stale",
        "alice-token",
        &["deploy staging then production"],
        |client, world, runs| async move {
            let (client, run) = (&client, runs[0].clone());
            goto(client, &world.item(&run, "call_1")).await;
            find(client, "#approve").await;

            // Behind the page's back, someone decides and the run moves on to its next call.
            let shown = world.row(&run, "call_1").await;
            world
                .runs
                .decide(&shown, Decision::Approve, "carol")
                .await
                .unwrap();
            world.agent.resume(&run).await.expect("the run resumes");
            let next = world.seen(&run, "call_2").await;
            assert!(next.version > shown.version);

            click(client, "#approve").await;
            let (code, error) = refusal(client).await;
            assert_eq!(code, 409, "a stale page: {error}");
            world.assert_unchanged(&next, "a stale page").await;
            assert_eq!(world.audit_len().await, 1, "only carol's decision");
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_form_without_csrf_token_refused() {
    signed_in(
        "csrf",
        "alice-token",
        &["deploy production"],
        |client, world, runs| async move {
            let (client, run) = (&client, runs[0].clone());
            goto(client, &world.item(&run, "call_1")).await;
            let before = world.seen(&run, "call_1").await;
            let removed = client
                .execute(
                    "const i = document.querySelector('form.decide input[name=csrf]'); \
                 if (!i) return false; i.remove(); return true;",
                    vec![],
                )
                .await
                .unwrap();
            assert_eq!(removed, json!(true), "the form carries a CSRF token");
            click(client, "#approve").await;
            let (code, error) = refusal(client).await;
            assert_eq!(code, 403, "a post without the CSRF token: {error}");

            // A wrong token is refused the same way.
            goto(client, &world.item(&run, "call_1")).await;
            client
                .execute(
                    "document.querySelector('form.decide input[name=csrf]').value = 'forged';",
                    vec![],
                )
                .await
                .unwrap();
            click(client, "#approve").await;
            let (code, error) = refusal(client).await;
            assert_eq!(code, 403, "a post with a wrong CSRF token: {error}");

            world
                .assert_unchanged(&before, "posts without a valid CSRF token")
                .await;
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_viewer_sees_no_buttons_and_a_forged_post_is_forbidden() {
    signed_in(
        "viewer",
        "victor-token",
        &["deploy production"],
        |client, world, runs| async move {
            let (client, run) = (&client, runs[0].clone());
            find(client, &item_css(&run, "call_1")).await;
            goto(client, &world.item(&run, "call_1")).await;
            find(client, "pre#arguments").await;
            assert!(
                find_all(client, "form.decide, button[name=action]")
                    .await
                    .is_empty(),
                "a viewer sees no decision buttons on an item"
            );

            // Posts forged from the viewer's own session, with a CSRF token of that session when any
            // page has one (so that the role, not the token, is what refuses them) and the row's
            // version and digest: forbidden, nothing recorded.
            let before = world.seen(&run, "call_1").await;
            let row = &before.row;
            let item_path = format!("/runs/{run}/calls/call_1");
            let item_value = format!("{run}/call_1/{}/{}", row.version, row.digest);
            goto(client, &world.url("/")).await;
            find(client, "table#items").await;
            let answer = client
                .execute_async(
                    "const [path, version, digest, item, done] = arguments; \
                 const input = document.querySelector('input[name=csrf]'); \
                 const csrf = input ? input.value : ''; \
                 const post = (url, fields) => fetch(url, {method: 'POST', \
                     body: new URLSearchParams(fields), credentials: 'same-origin', \
                     redirect: 'manual'}).then(r => r.text().then(body => ({status: r.status, \
                     ok: body.includes('batch-result ok'), \
                     refused: body.includes('batch-result error')}))); \
                 Promise.all([ \
                   post(path, {csrf, version, digest, action: 'approve'}), \
                   post('/batch', {csrf, action: 'approve', message: '', item}), \
                 ]).then(([decide, batch]) => done({decide, batch, csrf: csrf !== ''}), \
                         e => done({error: String(e)}));",
                    vec![
                        json!(item_path),
                        json!(row.version.to_string()),
                        json!(row.digest),
                        json!(item_value),
                    ],
                )
                .await
                .unwrap();
            assert_eq!(
                answer["decide"]["status"],
                json!(403),
                "a viewer's forged decision: {answer}"
            );
            // A batch reports per item: refused as a whole (403) or every item refused.
            let batch = &answer["batch"];
            assert!(
                batch["status"] == json!(403)
                    || (batch["refused"] == json!(true) && batch["ok"] == json!(false)),
                "a viewer's forged batch: {answer}"
            );
            world.assert_unchanged(&before, "a viewer's posts").await;

            // Nor batch buttons on the list.
            goto(client, &world.url("/")).await;
            find(client, "table#items").await;
            assert!(
                find_all(client, "button#batch-approve, button#batch-reject")
                    .await
                    .is_empty(),
                "a viewer sees no batch decision buttons on the list"
            );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_signed_link_works_once() {
    let world = World::new("link").await;
    let run = world.start("deploy staging").await;
    let row = world.row(&run, "call_1").await;
    let link = |ttl| {
        world
            .inbox
            .signed_link(&row, LinkAction::Approve, "alice", Duration::from_secs(ttl))
            .expect("a signed link")
    };
    let (link, short) = (link(3600), link(1));
    with_browsers(1, |clients| async move {
        // No session: the link alone. It shows what it decides.
        let client = &clients[0];
        goto(client, &world.url(&link)).await;
        find(client, "form#confirm").await;
        assert_eq!(status(client).await, 200);
        assert_eq!(text(client, "#tool").await, "deploy");
        assert!(text(client, "pre#arguments").await.contains("staging"));
        assert!(
            text(client, "#link-action")
                .await
                .to_lowercase()
                .contains("approve")
        );
        // Opening it decided nothing (a mail scanner's prefetch must not approve).
        goto(client, &world.url(&link)).await;
        find(client, "form#confirm").await;
        assert_eq!(
            world.row(&run, "call_1").await,
            row,
            "a GET decides nothing"
        );

        // Expired: refused, nothing recorded.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        goto(client, &world.url(&short)).await;
        let (code, error) = refusal(client).await;
        assert_eq!(code, 410, "an expired link: {error}");
        assert_eq!(
            world.row(&run, "call_1").await,
            row,
            "an expired link decides nothing"
        );

        goto(client, &world.url(&link)).await;
        click(client, "button#confirm").await;
        find(client, "#flash.ok").await;
        let done = world.completed(&run).await;
        assert_eq!(done.state.output(), Some(r#"Done: {"deployed":"staging"}"#));
        let audit = world
            .runs
            .audit(&AuditFilter::default())
            .await
            .unwrap()
            .items;
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].by, "alice");

        // Used once: refused afterwards.
        goto(client, &world.url(&link)).await;
        let (code, error) = refusal(client).await;
        assert_eq!(code, 409, "a used link: {error}");
        assert!(
            error.contains("already decided by alice"),
            "a used link: {error}"
        );
        assert!(find_all(client, "form#confirm").await.is_empty());
        // A tampered link is refused too.
        let tampered = link.replacen("link/", "link/x", 1);
        goto(client, &world.url(&tampered)).await;
        let (code, error) = refusal(client).await;
        assert_eq!(code, 403, "a tampered link: {error}");
        assert_eq!(world.audit_len().await, 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_new_items_appear_without_a_reload() {
    signed_in(
        "events",
        "alice-token",
        &[],
        |client, world, _| async move {
            let client = &client;
            find(client, "p#empty").await;
            // A mark on this page: a reload would lose it.
            client
                .execute("window.__phaseo_no_reload = 1;", vec![])
                .await
                .unwrap();
            // Give the page's event stream a moment to connect before the item is written.
            tokio::time::sleep(Duration::from_millis(500)).await;

            let run = world.start("deploy production").await;
            find(client, &item_css(&run, "call_1")).await;
            let kept = client
                .execute("return window.__phaseo_no_reload === 1;", vec![])
                .await
                .unwrap();
            assert_eq!(kept, json!(true), "the item arrived without a reload");

            let second = world.start("deploy staging").await;
            find(client, &item_css(&second, "call_1")).await;
            let items = find_all(client, "#items tr.item").await;
            assert_eq!(items.len(), 2);
            assert_eq!(
                items[0].attr("data-run").await.unwrap().as_deref(),
                Some(second.as_str()),
                "the newest first"
            );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_mounted_under_a_prefix() {
    let world = World::mounted("prefix", "/ops/inbox").await;
    let run = world.start("deploy staging").await;
    with_browsers(1, |clients| async move {
        let client = &clients[0];
        // Without a session: to the prefixed login form, not the server's root.
        goto(client, &world.base).await;
        find(client, "input[name=token]").await;
        assert_eq!(path(client).await, "/ops/inbox/login");
        sign_in(client, &world, "alice-token").await;
        find(client, &format!("{} a.open", item_css(&run, "call_1")))
            .await
            .click()
            .await
            .unwrap();
        assert_eq!(
            path(client).await,
            format!("/ops/inbox/runs/{run}/calls/call_1")
        );
        click(client, "#approve").await;
        find(client, "#flash.ok").await;
        assert_eq!(path(client).await, format!("/ops/inbox/runs/{run}"));
        let done = world.completed(&run).await;
        assert_eq!(done.state.output(), Some(r#"Done: {"deployed":"staging"}"#));
    })
    .await;
}

/// A call a crash left in doubt, as a person meets it: the list offers no checkbox for it and a
/// batch that carries it anyway (a forged form) skips it by name; its page says what happened,
/// with the attempt's idempotency key; "Run it again" without the confirmation ticked is refused
/// and records nothing; ticked, the call runs again and the run completes, audited as
/// `rerun_after_doubt`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_a_call_in_doubt_needs_a_check_and_is_refused_from_a_batch() {
    use crate::support::durable::Hooked;

    signed_in(
        "in-doubt",
        "alice-token",
        &["deploy production"],
        |client, world, runs| async move {
            let client = &client;
            let run = runs[0].clone();
            // Approved, and its process dies once the call has started: the deploy ran, its
            // result was never recorded. Another process recovers the run: in doubt.
            let version = world.load(&run).await.version;
            // Its lease (taken first, then the decision and the call's start are written) is
            // short, and runs out before the recovery.
            let dying =
                Runs::without_queue(Arc::new(Hooked::dies_after(world.runs.store().clone(), 3)))
                    .lease(Duration::from_millis(100));
            let _ = dying
                .attach(world.agent.agent().clone())
                .resume(&run)
                .decisions(phaseo_agent::Decisions::for_run(&run).approve("call_1"))
                .at(version)
                .by("alice")
                .await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            world.agent.recover(&run).await.expect("recovered");
            let row = world.row(&run, "call_1").await;
            assert_eq!(row.kind, "outcome_unknown");
            let key = world.load(&run).await.state.idempotency_key("call_1", 0);
            let audited = world.audit_len().await;
            let seen = world.seen(&run, "call_1").await;

            goto(client, &world.base).await;
            let item = item_css(&run, "call_1");
            find(client, &item).await;
            assert!(
                find_all(client, &format!("{item} input.select"))
                    .await
                    .is_empty(),
                "a call in doubt offers no checkbox"
            );
            assert!(
                text(client, &format!("{item} .kind"))
                    .await
                    .contains("Outcome unknown")
            );
            // A forged batch form carries it anyway: skipped, and named.
            let value = format!("{run}/call_1/{}/{}", row.version, row.digest);
            client
                .execute(
                    "var i = document.createElement('input'); i.type = 'hidden'; \
                     i.name = 'item'; i.value = arguments[0]; \
                     document.getElementById('batch').appendChild(i);",
                    vec![json!(value)],
                )
                .await
                .unwrap();
            click(client, "#batch-approve").await;
            let results = text(client, "#batch-results").await;
            assert!(results.contains("Skipped"), "{results}");
            assert!(results.contains(&format!("{run} / call_1")), "{results}");
            world
                .assert_unchanged(&seen, "a batch with a call in doubt")
                .await;

            // Its page: what happened, and the key to check with.
            goto(client, &world.item(&run, "call_1")).await;
            assert!(
                text(client, "#what-happened")
                    .await
                    .contains("its process died before it reported")
            );
            assert_eq!(text(client, "#idempotency-key").await, key);
            find(client, "#started").await;
            assert!(find_all(client, "button#approve").await.is_empty());
            save_screenshot(&client.screenshot().await.unwrap(), "inbox-in-doubt.png");
            // Not ticked: refused, nothing recorded.
            click(client, "button#rerun").await;
            let (code, error) = refusal(client).await;
            assert_eq!(code, 422, "{error}");
            assert!(error.contains("I checked"), "{error}");
            world
                .assert_unchanged(&seen, "a re-run not confirmed")
                .await;

            // Ticked: it runs again, as a new attempt, and the run completes.
            goto(client, &world.item(&run, "call_1")).await;
            click(client, "input#checked").await;
            click(client, "button#rerun").await;
            find(client, "#flash.ok").await;
            let done = world.completed(&run).await;
            assert_eq!(
                done.state.output(),
                Some(r#"Done: {"deployed":"production"}"#)
            );
            let audit = world
                .runs
                .audit(&AuditFilter::default())
                .await
                .unwrap()
                .items;
            assert_eq!(audit.len(), audited + 1);
            assert_eq!(
                audit.last().unwrap().decision,
                r#"{"decision":"rerun_after_doubt"}"#
            );
            assert_eq!(audit.last().unwrap().by, "alice");
        },
    )
    .await;
}

/// A call as a person reads it in the browser: its tool's summary on the list and the item, and
/// an argument holding a right-to-left override (`invoice\u{202E}fdp.exe`, which a browser draws
/// as "invoiceexe.pdf") shown as the visible escape `\u{202E}` on the list, the item and, as the
/// JSON escape `\u202E`, in the edit box, with a note that the text holds such characters; the
/// rendered text never holds the raw character. Approved as edited without a change, the tool
/// gets the very same value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_a_summary_and_a_hidden_character_as_a_person_reads_them() {
    const RLO: char = '\u{202E}';
    let file = format!("invoice{RLO}fdp.exe");
    let dir = scratch("inbox-hidden");
    let store = SqliteStore::open(dir.join("runs.db"))
        .await
        .expect("a SQLite store");
    let runs = Runs::new(store);
    let send = Tool::new(
        "send_invoice",
        "Send an invoice file to a customer.",
        json!({
            "type": "object",
            "properties": {
                "file": {"type": "string"},
                "customer": {"type": "string"},
                "amount_cents": {"type": "integer"}
            },
            "required": ["file", "customer", "amount_cents"]
        }),
        |args: Value, _| Ok(json!({"sent": args["file"]})),
    )
    .require_approval();
    let arguments = json!({"file": file, "customer": "Jane Doe", "amount_cents": 4250});
    let model = phaseo_agent::ScriptedModel::new()
        .tool_call("call_1", "send_invoice", arguments.clone())
        .text("Sent.");
    let agent = runs.attach(
        Agent::builder("billing")
            .model(model)
            .tool(send)
            .build()
            .expect("the agent"),
    );
    let run = agent
        .run("Send the invoice")
        .await
        .expect("the run pauses")
        .state
        .run_id()
        .to_owned();
    let inbox = Inbox::new(runs.clone())
        .agent(agent)
        .secret(b"interop-inbox-secret-0123456789abcdef")
        .user("alice-token", User::approver("alice"))
        .summary("send_invoice", |args| {
            let cents = args["amount_cents"].as_u64()?;
            Some(format!(
                "EUR {}.{:02} to {}: {}",
                cents / 100,
                cents % 100,
                args["customer"].as_str()?,
                args["file"].as_str()?
            ))
        });
    let base = serve(inbox.router()).await;

    with_browsers(1, |clients| async move {
        let client = &clients[0];
        goto(client, &format!("{base}/login")).await;
        find(client, "input[name=token]")
            .await
            .send_keys("alice-token")
            .await
            .unwrap();
        click(client, "button#sign-in").await;
        let item = item_css(&run, "call_1");
        find(client, &item).await;
        let visible = "invoice\\u{202E}fdp.exe";

        // The list: the summary, the arguments, the note; the raw character nowhere.
        let summary = text(client, &format!("{item} .summary")).await;
        assert_eq!(summary, format!("EUR 42.50 to Jane Doe: {visible}"));
        let args = text(client, &format!("{item} .args")).await;
        assert!(args.contains(visible), "{args}");
        let note = text(client, &format!("{item} .hidden-note")).await;
        assert!(
            note.contains("invisible or direction-changing characters"),
            "{note}"
        );
        let page = body_text(client).await;
        assert!(
            !page.contains(RLO),
            "the list shows the raw character: {page}"
        );
        save_screenshot(&client.screenshot().await.unwrap(), "inbox-hidden-list.png");

        // The item: the same, and the edit box holds JSON escapes, the same value.
        click(client, &format!("{item} a.open")).await;
        let shown = text(client, "#summary").await;
        assert_eq!(shown, format!("EUR 42.50 to Jane Doe: {visible}"));
        let pre = text(client, "#arguments").await;
        assert!(pre.contains(visible), "{pre}");
        find(client, ".hidden-note").await;
        let edit = find(client, "textarea#edited")
            .await
            .prop("value")
            .await
            .unwrap()
            .expect("the edit box's value");
        assert!(
            !edit.contains(RLO),
            "the edit box holds the raw character: {edit}"
        );
        assert!(edit.contains("invoice\\u202Efdp.exe"), "{edit}");
        let value: Value = serde_json::from_str(&edit).expect("the edit box holds JSON");
        assert_eq!(value, arguments);
        let page = body_text(client).await;
        assert!(
            !page.contains(RLO),
            "the item shows the raw character: {page}"
        );
        save_screenshot(&client.screenshot().await.unwrap(), "inbox-hidden-item.png");

        // Approved as edited, unchanged: the tool gets the very same file name.
        click(client, "button#edit").await;
        find(client, "#flash.ok").await;
        eventually("the run to complete", || async {
            runs.load(&run).await.unwrap().status == StoredStatus::Completed
        })
        .await;
        let result = runs
            .load(&run)
            .await
            .unwrap()
            .state
            .tool_result("call_1")
            .map(str::to_owned);
        let result: Value = serde_json::from_str(&result.expect("a result")).unwrap();
        assert_eq!(result, json!({"sent": file}));
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The model fails after the person's approval (the deploy ran): the decision leads to the run's
/// page, which shows the failure and why; an approver retries it there, and the run completes
/// without deploying again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn inbox_the_run_page_shows_a_failure_after_a_decision() {
    signed_in(
        "failure",
        "alice-token",
        &["deploy staging"],
        |client, world, runs| async move {
            let (client, run) = (&client, runs[0].clone());
            *world.model.fail_once.lock().unwrap() = true;
            goto(client, &world.item(&run, "call_1")).await;
            click(client, "#approve").await;
            find(client, "#flash.ok").await;
            assert_eq!(path(client).await, format!("/runs/{run}"));
            eventually("the run page to show the failure", || async {
                goto(client, &world.url(&format!("/runs/{run}"))).await;
                find_all(client, "#run-status[data-status=failed]")
                    .await
                    .len()
                    == 1
            })
            .await;
            let failure = text(client, "#failure").await;
            assert!(failure.contains("the model's key was revoked"), "{failure}");
            assert!(
                text(client, "#calls").await.contains("staging"),
                "the deploy's result is shown"
            );
            // The list shows it too, with why.
            goto(client, &world.url("/")).await;
            assert!(text(client, "#failed").await.contains("key was revoked"));
            goto(client, &world.url(&format!("/runs/{run}"))).await;
            click(client, "#retry-run").await;
            find(client, "#flash.ok").await;
            let done = world.completed(&run).await;
            assert_eq!(done.state.output(), Some(r#"Done: {"deployed":"staging"}"#));
            // The deploy ran once: the retry asked the model again, and did not re-run it.
            assert_eq!(done.state.steps().len(), 1);
        },
    )
    .await;
}
