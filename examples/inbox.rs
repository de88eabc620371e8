//! The approval inbox: a durable agent on embedded SQLite whose `deploy` tool waits for a person,
//! and the inbox on loopback where that person signs in and decides.
//!
//! ```text
//! cargo run --example inbox --features "inbox sqlite" -- serve          # open the printed URL
//! cargo run --example inbox --features "inbox sqlite" -- serve --once   # exits once the run is done
//! cargo run --example inbox --features "inbox sqlite" -- replica DB ADDR  # one replica of a service
//! cargo run --example inbox --features "inbox sqlite"                   # two replicas, one killed
//! ```
//!
//! `serve` prints the inbox's address, a token to sign in with, and a signed link that approves
//! the waiting call from an email; it keeps serving until Ctrl-C (with `--once`, or
//! `PHASEO_INBOX_ONCE=1`, it exits once the run completes).
//!
//! `replica` is one process of a service run as several replicas on one database: it serves the
//! inbox at `ADDR` (`127.0.0.1:0` picks a port; it prints the address), and, as `Inbox::serve`
//! does, takes up the runs whose process died when it starts and every `recover_every`, leaving
//! alone the runs another replica is running (their lease is live).
//!
//! Without arguments (as `cargo test` runs it) it shows two replicas on one database, with a
//! scripted person signing in over HTTP: replica A serves the approval, and dies (SIGKILL) in the
//! middle of the deploy; replica B, started while A was in the deploy, took over nothing then; once
//! A's lease expires, B takes the run up, and the deploy is in doubt: the person checks, and runs
//! it again on B, which finishes the run. The model is scripted, so it runs offline.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use phaseo_agent::durable::Runs;
use phaseo_agent::inbox::{Inbox, LinkAction, User};
use phaseo_agent::store::{PendingFilter, SqliteStore, StoredStatus};
use phaseo_agent::{Agent, AgentError, IntoTool, ScriptedModel, tool};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Where a release goes.
#[derive(Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Environment {
    Staging,
    Production,
}

/// Deploy a release to an environment.
#[derive(Deserialize, schemars::JsonSchema)]
struct Deploy {
    environment: Environment,
    /// The release tag, like `v2.1.0`.
    release: String,
}

#[derive(Serialize)]
struct Deployed {
    environment: Environment,
    release: String,
}

/// Deploy a release to an environment.
#[tool(require_approval)]
async fn deploy(input: Deploy) -> Result<Deployed, String> {
    // For the two-replica demonstration: this replica "dies in the deploy" (it is killed while
    // the call runs).
    if std::env::var("PHASEO_EXAMPLE_HANG_IN_DEPLOY").is_ok_and(|v| v == "1") {
        println!("in-deploy");
        std::future::pending::<()>().await;
    }
    Ok(Deployed {
        environment: input.environment,
        release: input.release,
    })
}

fn agent(model: ScriptedModel) -> Result<Agent, AgentError> {
    Agent::builder("release")
        .instructions("You ship releases.")
        .model(model)
        .tool(deploy.into_tool())
        .build()
}

/// A token to sign in with, fresh for each start (an operator hands out long random tokens).
fn fresh_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!("alice-{:016x}", hasher.finish())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["serve", rest @ ..] => serve(rest.contains(&"--once")).await,
        ["replica", db, addr] => replica(db, addr).await,
        [] => two_replicas().await,
        _ => Err("usage: inbox [serve [--once] | replica DB ADDR]".into()),
    }
}

/// The lease of a run a replica runs: short here, so that the demonstration is quick (a killed
/// replica's run is taken up a second or two later); the default is 30 seconds.
const LEASE: Duration = Duration::from_secs(1);

/// One replica of a service: the inbox over a shared database, resuming and recovering runs.
async fn replica(db: &str, addr: &str) -> Result<(), Box<dyn std::error::Error>> {
    let runs = Runs::new(SqliteStore::open(db).await?)
        .lease(LEASE)
        .holder(format!("replica-{}", std::process::id()));
    let model = ScriptedModel::new().text("v2.1.0 is live in production.");
    let token = std::env::var("PHASEO_EXAMPLE_TOKEN")?;
    let inbox = Inbox::new(runs.clone())
        .agent(runs.attach(agent(model)?))
        .user(&token, User::approver("alice"))
        .recover_every(LEASE);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("serving http://{}", listener.local_addr()?);
    // Takes up abandoned runs at start and every `recover_every`, beside serving.
    inbox.serve_listener(listener).await?;
    Ok(())
}

/// A replica's process, killed when dropped (so that a failed check leaves none behind).
struct Replica(Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A replica in a process of its own; its first line (`serving URL`) read, the rest sent to
/// `lines`.
fn start_replica(
    db: &str,
    token: &str,
    hang_in_deploy: bool,
    lines: std::sync::mpsc::Sender<String>,
) -> Result<(Replica, String), Box<dyn std::error::Error>> {
    let mut child = Replica(
        Command::new(std::env::current_exe()?)
            .args(["replica", db, "127.0.0.1:0"])
            .env("PHASEO_EXAMPLE_TOKEN", token)
            .env(
                "PHASEO_EXAMPLE_HANG_IN_DEPLOY",
                if hang_in_deploy { "1" } else { "0" },
            )
            .stdout(Stdio::piped())
            .spawn()?,
    );
    let mut out = std::io::BufReader::new(child.0.stdout.take().ok_or("no stdout")?);
    let mut first = String::new();
    out.read_line(&mut first)?;
    let url = first
        .trim()
        .strip_prefix("serving ")
        .ok_or_else(|| format!("the replica said {first:?}"))?
        .to_owned();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    Ok((child, url))
}

/// Waits until the run is in `status`, for at most 20 seconds.
async fn wait_for(
    runs: &Runs,
    run_id: &str,
    status: StoredStatus,
) -> Result<(), Box<dyn std::error::Error>> {
    for _ in 0..400 {
        if runs.load(run_id).await?.status == status {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("run {run_id} never became {}", status.as_str()).into())
}

/// Two replicas on one database; one dies in the middle of the deploy, the other finishes.
async fn two_replicas() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("inbox-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("runs.db");
    let db = db
        .to_str()
        .ok_or("a temporary path that is not UTF-8")?
        .to_owned();
    let runs = Runs::new(SqliteStore::open(&db).await?);
    let model = ScriptedModel::new().tool_call(
        "call_1",
        "deploy",
        json!({"environment": "production", "release": "v2.1.0"}),
    );
    let paused = runs
        .attach(agent(model)?)
        .run("Ship v2.1.0 to production.")
        .await?;
    let run_id = paused.state.run_id().to_owned();
    println!("run {run_id} waits for a person");

    let token = fresh_token();
    let (a_lines, from_a) = std::sync::mpsc::channel();
    let (mut a, a_url) = start_replica(&db, &token, true, a_lines)?;
    println!("replica A: {a_url}");
    be_the_person(&a_url, &token, &runs, &run_id).await?;
    // A resumes the run and is now in the middle of the deploy.
    let line = from_a.recv_timeout(Duration::from_secs(20))?;
    assert_eq!(line, "in-deploy");
    println!("replica A is in the middle of the deploy");

    // B starts while A is in the deploy: it takes over nothing, now or at its later checks.
    let (b_lines, _from_b) = std::sync::mpsc::channel();
    let (b, b_url) = start_replica(&db, &token, false, b_lines)?;
    println!("replica B: {b_url}");
    tokio::time::sleep(LEASE * 3).await;
    assert_eq!(runs.load(&run_id).await?.status, StoredStatus::Running);
    assert!(runs.abandoned(10).await?.is_empty(), "A's lease is live");
    println!("replica B took over nothing: A is alive and holds the run");

    // A dies (SIGKILL) in the middle of the deploy. Once its lease expires, B takes the run up:
    // the deploy may or may not have happened, and waits for a person.
    a.0.kill()?;
    a.0.wait()?;
    println!("replica A was killed in the middle of the deploy");
    wait_for(&runs, &run_id, StoredStatus::InDoubt).await?;
    println!("replica B took the run up: the deploy is in doubt");
    settle_in_doubt(&b_url, &token).await?;
    wait_for(&runs, &run_id, StoredStatus::Completed).await?;
    let done = runs.load(&run_id).await?;
    println!(
        "run {run_id}, finished by replica B: {}",
        done.state.output().unwrap_or_default()
    );
    drop(b);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The person, at replica B: the call in doubt says what happened; they check (here: the deploy
/// API has no deployment under the call's idempotency key) and run it again, ticking "I checked".
async fn settle_in_doubt(url: &str, token: &str) -> Result<(), Box<dyn std::error::Error>> {
    let person = Person::sign_in(url, token).await?;
    let (item, page) = person.first_item().await?;
    assert!(page.contains("may or may not have happened"), "{page}");
    let key = page
        .split_once("id=\"idempotency-key\">")
        .and_then(|(_, rest)| rest.split_once('<'))
        .map(|(key, _)| key)
        .ok_or("no idempotency key on the page")?;
    println!("the person checks the deploy API for key {key}: no deployment; runs it again");
    let rerun = person
        .decide(
            &item,
            &page,
            &[("action", "rerun_after_doubt"), ("checked", "yes")],
        )
        .await?;
    assert_eq!(rerun.status(), 303);
    Ok(())
}

/// A person signed in to an inbox, over plain HTTP, as a browser would be.
struct Person {
    url: String,
    client: reqwest::Client,
    cookie: String,
}

impl Person {
    async fn sign_in(url: &str, token: &str) -> Result<Person, Box<dyn std::error::Error>> {
        let (client, cookie) = sign_in(url, token).await?;
        Ok(Person {
            url: url.to_owned(),
            client,
            cookie,
        })
    }

    async fn get(&self, path: &str) -> reqwest::Result<String> {
        let page = self.client.get(format!("{}{path}", self.url));
        page.header("cookie", &self.cookie)
            .send()
            .await?
            .text()
            .await
    }

    /// The list's first item: its path and its page.
    async fn first_item(&self) -> Result<(String, String), Box<dyn std::error::Error>> {
        let list = self.get("/").await?;
        let item = value_after(&list, "class=\"open\" href=\"").ok_or("no item in the list")?;
        let page = self.get(&item).await?;
        Ok((item, page))
    }

    /// Posts the item's form with `fields`. The form carries what the person was shown: the
    /// run's version and the arguments' digest, with the CSRF token.
    async fn decide(
        &self,
        item: &str,
        page: &str,
        fields: &[(&str, &str)],
    ) -> Result<reqwest::Response, Box<dyn std::error::Error>> {
        let field = |name: &str| value_after(page, &format!("name=\"{name}\" value=\""));
        let (csrf, version, digest) = (
            field("csrf").ok_or("no csrf")?,
            field("version").ok_or("no version")?,
            field("digest").ok_or("no digest")?,
        );
        let mut form = vec![
            ("csrf", csrf.as_str()),
            ("version", version.as_str()),
            ("digest", digest.as_str()),
        ];
        form.extend_from_slice(fields);
        let post = self.client.post(format!("{}{item}", self.url));
        Ok(post
            .header("cookie", &self.cookie)
            .form(&form)
            .send()
            .await?)
    }
}

/// The sign-in form, then the sign-in: a client and the session's cookie.
async fn sign_in(
    url: &str,
    token: &str,
) -> Result<(reqwest::Client, String), Box<dyn std::error::Error>> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    // The sign-in form sets a cookie and carries a token bound to it, as every form does.
    let form = client.get(format!("{url}/login")).send().await?;
    let form_cookie = cookie_of(&form)?;
    let form = form.text().await?;
    let form_csrf = value_after(&form, "name=\"csrf\" value=\"").ok_or("no csrf")?;
    let signed_in = client
        .post(format!("{url}/login"))
        .header("cookie", &form_cookie)
        .form(&[("token", token), ("csrf", form_csrf.as_str())])
        .send()
        .await?;
    assert_eq!(signed_in.status(), 303);
    let cookie = cookie_of(&signed_in)?;
    Ok((client, cookie))
}

/// One process: the run and the inbox, until Ctrl-C (or the run's end, with `once`).
async fn serve(once: bool) -> Result<(), Box<dyn std::error::Error>> {
    let once = once || std::env::var("PHASEO_INBOX_ONCE").is_ok_and(|v| v == "1");

    let dir = std::env::temp_dir().join(format!("inbox-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let runs = Runs::new(SqliteStore::open(dir.join("runs.db")).await?);
    let model = ScriptedModel::new()
        .tool_call(
            "call_1",
            "deploy",
            json!({"environment": "production", "release": "v2.1.0"}),
        )
        .text("v2.1.0 is live in production.");
    let agent = runs.attach(agent(model)?);

    let token = fresh_token();
    let inbox = Inbox::new(runs.clone())
        .agent(agent.clone())
        .user(&token, User::approver("alice"))
        .tool_approvers("deploy", ["alice"]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let served = inbox.clone();
    tokio::spawn(async move { served.serve_listener(listener).await });
    println!("The approval inbox: {url}/");
    println!("Sign in with the token: {token}");

    // A run that waits for a person: it is in the database, and in the inbox's list.
    let paused = agent.run("Ship v2.1.0 to production.").await?;
    let run_id = paused.state.run_id().to_owned();
    let waiting = runs
        .pending(&PendingFilter::default())
        .await?
        .items
        .remove(0);
    println!("run {run_id} waits: {} {}", waiting.tool, waiting.arguments);
    let link = inbox.signed_link(
        &waiting,
        LinkAction::Approve,
        "alice",
        Duration::from_secs(3600),
    )?;
    println!("Or approve from an email (once, within the hour): {url}{link}");

    // The inbox resumes the run once its call is decided; wait for the model's last turn.
    loop {
        let stored = runs.load(&run_id).await?;
        if stored.status == StoredStatus::Completed {
            println!(
                "run {run_id}: {}",
                stored.state.output().unwrap_or_default()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !once {
        println!("The run is done; the inbox keeps serving until Ctrl-C.");
        std::future::pending::<()>().await;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The `name=value` of the cookie a response sets.
fn cookie_of(response: &reqwest::Response) -> Result<String, Box<dyn std::error::Error>> {
    let set = response.headers()["set-cookie"].to_str()?;
    Ok(set.split(';').next().unwrap_or_default().to_owned())
}

/// What a person does in a browser, over plain HTTP: sign in, open the call, approve it.
async fn be_the_person(
    url: &str,
    token: &str,
    runs: &Runs,
    run_id: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let person = Person::sign_in(url, token).await?;
    let (item, page) = person.first_item().await?;
    assert!(page.contains("v2.1.0"), "{page}");
    let approve = || person.decide(&item, &page, &[("action", "approve")]);
    assert_eq!(approve().await?.status(), 303);
    println!("alice approved it in the inbox");

    // The same decision again: refused, and the page says who decided.
    let again = approve().await?;
    assert_eq!(again.status(), 409);
    assert!(again.text().await?.contains("already decided by alice"));
    let audit = runs.audit(&Default::default()).await?;
    assert_eq!(audit.items.len(), 1);
    assert_eq!(
        (audit.items[0].run_id.as_str(), audit.items[0].by.as_str()),
        (run_id, "alice")
    );
    Ok(())
}

/// The text after `marker` up to the next `"`, with `&amp;` read back.
fn value_after(html: &str, marker: &str) -> Option<String> {
    let start = html.find(marker)? + marker.len();
    let end = html[start..].find('"')?;
    Some(html[start..start + end].replace("&amp;", "&"))
}
