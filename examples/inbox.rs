//! The approval inbox: a durable agent on embedded SQLite whose `deploy` tool waits for a person,
//! and the inbox on loopback where that person signs in and decides.
//!
//! ```text
//! cargo run --example inbox --features "inbox sqlite" -- serve          # open the printed URL
//! cargo run --example inbox --features "inbox sqlite" -- serve --once   # exits once the run is done
//! cargo run --example inbox --features "inbox sqlite"                   # a scripted person decides
//! ```
//!
//! `serve` prints the inbox's address, a token to sign in with, and a signed link that approves
//! the waiting call from an email; it keeps serving until Ctrl-C (with `--once`, or
//! `PHASEO_INBOX_ONCE=1`, it exits once the run completes). Without arguments (as `cargo test`
//! runs it) it is its own person: it signs in over HTTP, reads the call's page, approves it with
//! the form's CSRF token, version and digest, and checks that the run completed. The model is
//! scripted, so it runs offline.

use std::time::Duration;

use phaseo_agent::inbox::{Inbox, LinkAction, User};
use phaseo_agent::store::{PendingFilter, Runs, SqliteStore, StoredStatus};
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
    let serve = args.first().map(String::as_str) == Some("serve");
    let once = !serve
        || args.iter().any(|a| a == "--once")
        || std::env::var("PHASEO_INBOX_ONCE").is_ok_and(|v| v == "1");

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
    let listener = tokio::net::TcpListener::bind(if serve {
        "127.0.0.1:8080"
    } else {
        "127.0.0.1:0"
    })
    .await?;
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

    if !serve {
        be_the_person(&url, &token, &runs, &run_id).await?;
    }
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
    let get = async |path: &str| -> reqwest::Result<String> {
        let page = client.get(format!("{url}{path}")).header("cookie", &cookie);
        page.send().await?.text().await
    };

    let list = get("/").await?;
    let item = value_after(&list, "class=\"open\" href=\"").ok_or("no item in the list")?;
    let page = get(&item).await?;
    assert!(page.contains("v2.1.0"), "{page}");
    // The form carries what the person was shown: the run's version and the arguments' digest.
    let field = |name: &str| value_after(&page, &format!("name=\"{name}\" value=\""));
    let (csrf, version, digest) = (
        field("csrf").ok_or("no csrf")?,
        field("version").ok_or("no version")?,
        field("digest").ok_or("no digest")?,
    );
    let approve = || {
        client
            .post(format!("{url}{item}"))
            .header("cookie", &cookie)
            .form(&[
                ("csrf", csrf.as_str()),
                ("version", version.as_str()),
                ("digest", digest.as_str()),
                ("action", "approve"),
            ])
            .send()
    };
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
