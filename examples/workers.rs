//! Queued runs and workers on PostgreSQL: a front end queues runs and answers at once, workers on
//! any number of machines take them, a person decides what waits, and the decision hands each run
//! back to the workers, which finish it.
//!
//! ```text
//! export PHASEO_DATABASE_URL=postgres://USER@HOST/DB    # or DATABASE_URL; the tables are made on first use
//! cargo run --example workers --features postgres                 # all three parts in one process
//! cargo run --example workers --features postgres -- work         # a worker, until Ctrl-C or SIGTERM
//! cargo run --example workers --features postgres -- enqueue 8    # the front end: queues 8 runs, prints their ids
//! cargo run --example workers --features postgres -- approve      # the approver: decides, waits until all are done
//! ```
//!
//! Across processes and machines: start `work` as many times as the load needs, on any machine
//! that reaches the database (each takes up to 4 runs at once), then `enqueue` from anywhere, then
//! `approve`. Nothing passes between them but the database: a run is a row that a worker leases,
//! an idle worker hears of a new run by PostgreSQL's `LISTEN`/`NOTIFY`, and a worker that dies
//! loses its lease, so another takes its runs up. Ctrl-C (or SIGTERM) makes a worker drain: it
//! takes nothing more and lets its runs finish or pause first.
//!
//! Without arguments the three parts run in this process, the worker as a task. The program exits
//! with 0 when every run of the agent completed, and with 1 otherwise. The model is a stand-in
//! that reads the conversation by rule, so it runs offline; a real model plugs in the same way
//! (see the `real_model` example).

use std::error::Error;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use phaseo_agent::durable::{EnqueueOptions, Runs};
use phaseo_agent::store::{PendingFilter, PostgresStore, QueueCounts};
use phaseo_agent::worker::Worker;
use phaseo_agent::{
    Agent, AgentError, Decision, IntoTool, Message, Model, ModelError, ModelRequest, ModelResponse,
    StoreError, ToolCall, ToolContext, tool,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The agent's id: what `enqueue` names, and what a worker serves.
const AGENT: &str = "refunds";

/// The longest `approve` waits for every run to complete.
const WAIT_FOR_ALL: Duration = Duration::from_secs(120);

// --- The agent: the same code in every process that runs it ------------------------------------

/// Refund an order to the customer's card.
#[derive(Deserialize, schemars::JsonSchema)]
struct Refund {
    /// The order number.
    order: u32,
    /// The amount, in cents.
    amount_cents: u64,
}

#[derive(Serialize)]
struct Refunded {
    order: u32,
    amount_cents: u64,
    /// The key a payment API deduplicates on: a call run again after a crash cannot refund twice.
    request: String,
}

/// Refund an order to the customer's card. Waits for a person's approval before it runs.
#[tool(require_approval)]
async fn refund(input: Refund, ctx: &ToolContext) -> Result<Refunded, String> {
    // A real tool calls the payment provider here, with the idempotency key as its request key.
    println!(
        "refunded order {} ({}) in process {}",
        input.order,
        euros(input.amount_cents),
        std::process::id()
    );
    Ok(Refunded {
        order: input.order,
        amount_cents: input.amount_cents,
        request: ctx.idempotency_key(),
    })
}

/// A stand-in for a real model, answering by rule from the conversation: one model serves every
/// run, whichever turn each is at. The customer's message asks for a refund; the tool's result
/// (or a person's refusal) is reported back.
struct RefundDesk;

impl Model for RefundDesk {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let answer = match request.messages.last() {
            Some(Message::User { content }) => match read_request(content) {
                Some((order, amount_cents)) => ModelResponse::tool_calls([ToolCall::new(
                    "call_1",
                    "refund",
                    json!({"order": order, "amount_cents": amount_cents}),
                )]),
                None => ModelResponse::text("I found no order number and amount to refund."),
            },
            Some(Message::Tool { content, .. }) => {
                let result: serde_json::Value = serde_json::from_str(content).unwrap_or_default();
                match (result["order"].as_u64(), result["error"].as_str()) {
                    (Some(order), _) => ModelResponse::text(format!("Refunded order {order}.")),
                    (None, Some(error)) => ModelResponse::text(format!("No refund: {error}")),
                    (None, None) => ModelResponse::text("The refund's outcome is unclear."),
                }
            }
            _ => ModelResponse::text("Nothing to do."),
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// `Please refund order 1001: 30.00 EUR` as (1001, 3000).
fn read_request(text: &str) -> Option<(u32, u64)> {
    let (_, rest) = text.split_once("order ")?;
    let (order, amount) = rest.split_once(':')?;
    let (whole, cents) = amount.trim().strip_suffix(" EUR")?.split_once('.')?;
    let cents = whole.parse::<u64>().ok()? * 100 + cents.parse::<u64>().ok()?;
    Some((order.trim().parse().ok()?, cents))
}

fn euros(cents: u64) -> String {
    format!("{}.{:02} EUR", cents / 100, cents % 100)
}

fn agent() -> Result<Agent, AgentError> {
    Agent::builder(AGENT)
        .instructions("You refund orders.")
        .model(RefundDesk)
        .tool(refund.into_tool())
        // The stored states are signed: every process that runs the agent needs the same key.
        .state_key(b"an example key; read yours from a secret store")
        .build()
}

// --- The store ----------------------------------------------------------------------------------

async fn connect() -> Result<Runs, Box<dyn Error>> {
    let url = std::env::var("PHASEO_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .map_err(|_| {
            "set PHASEO_DATABASE_URL (or DATABASE_URL) to a PostgreSQL database's URL, like \
             postgres://postgres@127.0.0.1:5432/phaseo"
        })?;
    // Creates the tables on first use (one process does it; the others wait for it).
    Ok(Runs::new(PostgresStore::connect(&url).await?))
}

// --- The front end: queues runs and answers at once ---------------------------------------------

async fn enqueue(runs: &Runs, count: u32) -> Result<Vec<String>, AgentError> {
    let mut ids = Vec::new();
    for i in 0..count {
        let order = 1001 + i;
        // Some under 100 EUR (approved below), some over (refused).
        let cents = [3000, 25_000, 1250, 9999, 48_000, 4500][i as usize % 6];
        let input = format!("Please refund order {order}: {}", euros(cents));
        // No agent is needed here: a worker serving the agent `refunds` runs it.
        let run_id = runs.enqueue(AGENT, &input, EnqueueOptions::new()).await?;
        println!("enqueued run {run_id}: {input}");
        ids.push(run_id);
    }
    Ok(ids)
}

// --- The worker: takes runs, runs them under leases, takes the next -----------------------------

fn worker(runs: Runs) -> Result<Worker, AgentError> {
    Ok(Worker::new(runs).agent(agent()?).concurrency(4))
}

/// Ctrl-C, or SIGTERM (what a container's orchestrator sends).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                tokio::signal::ctrl_c().await.ok();
            }
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await.ok();
}

async fn work(runs: Runs) -> Result<(), Box<dyn Error>> {
    println!(
        "worker {} serving `{AGENT}`; Ctrl-C or SIGTERM drains it and stops",
        std::process::id()
    );
    worker(runs)?.run_until(shutdown_signal()).await?;
    println!("worker {} stopped", std::process::id());
    Ok(())
}

// --- The approver: what a web page does for a person --------------------------------------------

/// Decides each call waiting for approval (refunds up to 100 EUR approved, larger ones refused),
/// until none of the agent's runs is ready, running, paused or in doubt; then prints the counts.
/// Ok only if every run completed.
async fn approve(runs: &Runs) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + WAIT_FOR_ALL;
    let filter = PendingFilter {
        agent_id: Some(AGENT.into()),
        kind: Some("tool_approval".into()),
        undecided_only: true,
        ..PendingFilter::default()
    };
    loop {
        for item in runs.pending(&filter).await?.items {
            let args: serde_json::Value = serde_json::from_str(&item.arguments)?;
            let cents = args["amount_cents"].as_u64().unwrap_or(u64::MAX);
            let decision = if cents <= 10_000 {
                Decision::Approve
            } else {
                Decision::Reject {
                    message: "over 100 EUR: a manager refunds this one".into(),
                }
            };
            let verb = if decision == Decision::Approve {
                "approved"
            } else {
                "refused"
            };
            // The decision names what the person was shown (the arguments' digest, the version);
            // the last decision of a run hands it back to the workers.
            match runs.decide(&item, decision, "ada").await {
                Ok(_) => println!("{verb} run {} order {}", item.run_id, args["order"]),
                // Another approver decided it first: nothing was recorded for this one.
                Err(AgentError::Store(StoreError::StaleDecision { .. })) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let counts = counts(runs).await?;
        if counts.ready + counts.running + counts.paused + counts.in_doubt == 0 {
            print_counts(&counts);
            if counts.failed > 0 {
                return Err(format!("{} runs failed", counts.failed).into());
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            print_counts(&counts);
            return Err(format!("not every run completed within {WAIT_FOR_ALL:?}").into());
        }
        // A page would refresh on a timer, or as people come back to it.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn counts(runs: &Runs) -> Result<QueueCounts, AgentError> {
    let all = runs.queue_counts().await?;
    Ok(all
        .into_iter()
        .find(|c| c.agent_id == AGENT)
        .unwrap_or(QueueCounts {
            agent_id: AGENT.into(),
            ready: 0,
            running: 0,
            paused: 0,
            in_doubt: 0,
            failed: 0,
            completed: 0,
            oldest_ready_ms: None,
        }))
}

fn print_counts(c: &QueueCounts) {
    println!(
        "queue `{}`: {} ready, {} running, {} paused, {} in doubt, {} failed, {} completed",
        c.agent_id, c.ready, c.running, c.paused, c.in_doubt, c.failed, c.completed
    );
}

// --- All three in one process -------------------------------------------------------------------

async fn demo(runs: Runs, count: u32) -> Result<(), Box<dyn Error>> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(worker(runs.clone())?.run_until(async {
        stopped.await.ok();
    }));
    let ids = enqueue(&runs, count).await?;
    let approved = approve(&runs).await;
    // Drain the worker: it holds nothing by now.
    stop.send(()).ok();
    serving.await??;
    for id in &ids {
        let stored = runs.load(id).await?;
        println!(
            "run {id}: {} ({})",
            stored.state.output().unwrap_or("no answer"),
            stored.status.as_str()
        );
    }
    approved
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("workers: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let count = |n: Option<&&str>| -> Result<u32, Box<dyn Error>> {
        Ok(n.map(|n| n.parse()).transpose()?.unwrap_or(6))
    };
    match args.as_slice() {
        [] | ["demo"] | ["demo", _] => demo(connect().await?, count(args.get(1))?).await,
        ["work"] => work(connect().await?).await,
        ["enqueue"] | ["enqueue", _] => {
            enqueue(&connect().await?, count(args.get(1))?).await?;
            Ok(())
        }
        ["approve"] => approve(&connect().await?).await,
        _ => Err("usage: workers [demo [N] | work | enqueue [N] | approve]".into()),
    }
}
