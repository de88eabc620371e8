//! Concurrency, output caps and next-turn overrides.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::agent::{result_ids, result_of, tool_results};
use phaseo_agent::{
    Agent, Decisions, RunState, ScriptedModel, Tool, ToolCall, ToolChoice, TurnParams,
};
use serde_json::{Value, json};

/// Tracks how many calls are in flight, and the most at once.
#[derive(Clone, Default)]
struct InFlight {
    now: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
}

impl InFlight {
    fn tool(&self, id: &str) -> Tool {
        let this = self.clone();
        Tool::new(
            id,
            "Sleeps for `ms`",
            json!({"type": "object", "properties": {"ms": {"type": "integer"}}}),
            move |input: Value, _| {
                let this = this.clone();
                async move {
                    let now = this.now.fetch_add(1, Ordering::SeqCst) + 1;
                    this.max.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(input["ms"].as_u64().unwrap_or(10)))
                        .await;
                    this.now.fetch_sub(1, Ordering::SeqCst);
                    Ok(input)
                }
            },
        )
    }

    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

fn calls(n: usize, tool: &str, ms: impl Fn(usize) -> u64) -> Vec<ToolCall> {
    (0..n)
        .map(|i| ToolCall::new(format!("c{i}"), tool, json!({"ms": ms(i)})))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn calls_run_concurrently_up_to_the_limit_and_results_keep_call_order() {
    let flight = InFlight::default();
    // The first calls take longest, so they finish last.
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls(calls(8, "sleep", |i| 100 - 10 * i as u64))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(flight.tool("sleep"))
        .tool_concurrency(3)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    agent.run("go").await.unwrap();
    assert_eq!(flight.max(), 3);
    assert!(
        started.elapsed() < Duration::from_millis(8 * 65),
        "ran concurrently: {:?}",
        started.elapsed()
    );
    let ids = result_ids(&model.requests()[1]);
    assert_eq!(ids, ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"]);
}

#[tokio::test(start_paused = true)]
async fn a_later_call_that_finishes_first_still_comes_second() {
    let flight = InFlight::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("slow", "sleep", json!({"ms": 200})),
            ToolCall::new("fast", "sleep", json!({"ms": 1})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(flight.tool("sleep"))
        .tool_concurrency(2)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let result = agent.run("go").await.unwrap();
    // Both ran at once, so `fast` finished long before `slow` did.
    assert_eq!(flight.max(), 2);
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    let ids = result_ids(&model.requests()[1]);
    assert_eq!(ids, ["slow", "fast"]);
    let steps: Vec<&str> = result
        .state
        .steps()
        .iter()
        .map(|s| s.call_id.as_str())
        .collect();
    assert_eq!(steps, ["slow", "fast"]);
}

#[tokio::test(start_paused = true)]
async fn the_default_runs_one_call_at_a_time_and_a_run_can_override_the_limit() {
    let flight = InFlight::default();
    let script = || {
        ScriptedModel::new()
            .record_requests()
            .tool_calls(calls(6, "sleep", |_| 10))
            .text("ok")
    };
    let agent = Agent::builder("t")
        .model(script())
        .tool(flight.tool("sleep"))
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(flight.max(), 1, "the default: one after another");

    let flight = InFlight::default();
    let agent = Agent::builder("t")
        .model(script())
        .tool(flight.tool("sleep"))
        .build()
        .unwrap();
    agent.run("go").tool_concurrency(6).await.unwrap();
    assert_eq!(flight.max(), 6);
}

#[tokio::test(start_paused = true)]
async fn an_exclusive_tool_runs_alone() {
    let flight = InFlight::default();
    let during_exclusive = Arc::new(AtomicUsize::new(usize::MAX));
    let seen = during_exclusive.clone();
    let probe = flight.clone();
    let migrate = Tool::new(
        "migrate",
        "Runs a migration",
        json!({"type": "object"}),
        move |_, _| {
            let (seen, probe) = (seen.clone(), probe.clone());
            async move {
                seen.store(probe.now.load(Ordering::SeqCst), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                seen.fetch_max(probe.now.load(Ordering::SeqCst), Ordering::SeqCst);
                Ok(json!("migrated"))
            }
        },
    )
    .exclusive();
    let mut turn = calls(3, "sleep", |_| 50);
    turn.push(ToolCall::new("m", "migrate", json!({})));
    turn.extend((3..6).map(|i| ToolCall::new(format!("c{i}"), "sleep", json!({"ms": 50}))));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls(turn)
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(flight.tool("sleep"))
        .tool(migrate)
        .tool_concurrency(8)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(
        during_exclusive.load(Ordering::SeqCst),
        0,
        "nothing else ran beside the exclusive call"
    );
    assert_eq!(
        flight.max(),
        3,
        "the others still ran concurrently on each side of it"
    );
    let ids = result_ids(&model.requests()[1]);
    assert_eq!(ids, ["c0", "c1", "c2", "m", "c3", "c4", "c5"]);
}

fn echo(id: &str) -> Tool {
    Tool::new(
        id,
        "Echoes `text`",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        |input, _| Ok(input["text"].clone()),
    )
}

async fn capped(text: &str, max: usize) -> String {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c", "echo", json!({"text": text}))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(echo("echo"))
        .max_output_chars(max)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    tool_results(&model.requests()[1]).remove(0).1
}

#[tokio::test]
async fn output_caps_cut_at_the_exact_boundaries() {
    // The JSON result of "abcdefgh" is `"abcdefgh"`: 10 characters with the quotes.
    assert_eq!(
        capped("abcdefgh", 10).await,
        "\"abcdefgh\"",
        "at the cap: unchanged"
    );
    assert_eq!(capped("abcdefgh", 11).await, "\"abcdefgh\"");
    assert_eq!(
        capped("abcdefgh", 9).await,
        "\"abcd\n[... 1 characters cut ...]\nfgh\""
    );
    assert_eq!(
        capped("abcdefgh", 4).await,
        "\"a\n[... 6 characters cut ...]\nh\""
    );
    assert_eq!(
        capped("abcdefgh", 1).await,
        "\"\n[... 9 characters cut ...]\n"
    );
    assert_eq!(
        capped("abcdefgh", 0).await,
        "\n[... 10 characters cut ...]\n"
    );
    // Characters, not bytes: a cut never splits one.
    assert_eq!(
        capped("ééééé", 5).await,
        "\"éé\n[... 2 characters cut ...]\né\""
    );
}

#[tokio::test]
async fn a_tool_cap_overrides_the_agent_cap() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "wide", json!({"text": "0123456789"})),
            ToolCall::new("c2", "narrow", json!({"text": "0123456789"})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(echo("wide").max_output_chars(100))
        .tool(echo("narrow"))
        .max_output_chars(6)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let results = tool_results(&model.requests()[1]);
    assert_eq!(results[0].1, "\"0123456789\"");
    assert_eq!(results[1].1, "\"01\n[... 6 characters cut ...]\n89\"");
}

fn override_tool(
    id: &str,
    change: impl Fn(&Value, &TurnParams) -> TurnParams + Send + Sync + 'static,
) -> Tool {
    Tool::new(
        id,
        "Changes the next turn",
        json!({"type": "object"}),
        |input, _| Ok(input),
    )
    .next_turn(change)
}

#[tokio::test]
async fn next_turn_overrides_change_only_the_next_request_in_call_order() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "escalate", json!({"model": "big"})),
            ToolCall::new("c2", "focus", json!({})),
        ])
        .tool_call("c3", "other", json!({}))
        .text("ok");
    let escalate = override_tool("escalate", |input, current| {
        let mut value = current.clone().temperature(0.7);
        value.model = input["model"].as_str().map(str::to_owned);
        value
    });
    // Runs after `escalate` (call order): sees its overrides and builds on them.
    let focus = override_tool("focus", |_, current| {
        let mut value = current
            .clone()
            .max_output_tokens(256)
            .instructions("Be brief.")
            .tool_choice(ToolChoice::Tool("other".into()))
            .active_tools(["other"]);
        value.temperature = current.temperature.map(|t| t / 7.0);
        value
    });
    let agent = Agent::builder("t")
        .instructions("Be thorough.")
        .model_name("small")
        .model(model.clone())
        .tool(escalate)
        .tool(focus)
        .tool(echo("other"))
        .tool_concurrency(2)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let requests = model.requests();
    let second = &requests[1];
    assert_eq!(second.model.as_deref(), Some("big"));
    assert_eq!(second.temperature, Some(0.1));
    assert_eq!(second.max_output_tokens, Some(256));
    assert_eq!(second.instructions, "Be brief.");
    assert_eq!(second.tool_choice, ToolChoice::Tool("other".into()));
    let names: Vec<&str> = second.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["other"]);
    let third = &requests[2];
    assert_eq!(
        third.model.as_deref(),
        Some("small"),
        "overrides apply to one request"
    );
    assert_eq!(third.instructions, "Be thorough.");
    assert_eq!(third.tools.len(), 3);
    assert_eq!(third.tool_choice, ToolChoice::Auto);
}

#[tokio::test]
async fn next_turn_overrides_are_kept_in_the_state_across_a_pause() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "escalate", json!({})),
            ToolCall::new("c2", "gated", json!({})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(override_tool("escalate", |_, current| {
            current.clone().model("big")
        }))
        .tool(echo("gated").require_approval())
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    assert_eq!(paused.state.next_turn().model.as_deref(), Some("big"));
    let state = RunState::from_json(&paused.state.to_json()).unwrap();
    agent
        .resume(&state, Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert_eq!(model.requests()[1].model.as_deref(), Some("big"));
    assert_eq!(result_of(&model.requests()[1], "c1"), json!({}));
}

#[tokio::test(start_paused = true)]
async fn a_call_that_finished_early_frees_its_place_at_once() {
    let flight = InFlight::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("a", "sleep", json!({"ms": 300})),
            ToolCall::new("b", "sleep", json!({"ms": 50})),
            ToolCall::new("c", "sleep", json!({"ms": 50})),
            ToolCall::new("d", "sleep", json!({"ms": 50})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(flight.tool("sleep"))
        .tool_concurrency(2)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    agent.run("go").await.unwrap();
    // b, c and d run one after another beside a: the turn takes as long as a.
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    let ids = result_ids(&model.requests()[1]);
    assert_eq!(ids, ["a", "b", "c", "d"]);
}

/// Two calls that each wait for the other, on the test's current-thread runtime: the synchronous
/// side blocks its thread until the async side has run, then answers it; the async side sends its
/// ping and awaits that answer. Both finish, each having heard the other, only if the synchronous
/// side runs off the runtime's thread (on the blocking pool) and the async side's future is awaited
/// on it. A synchronous side run in place would block the only thread: it gives up after a while
/// and says it heard nothing.
#[derive(Clone)]
struct Handshake {
    runtime: std::thread::ThreadId,
    ping: std::sync::mpsc::Sender<()>,
    heard: Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
    answer: Arc<tokio::sync::Notify>,
}

impl Handshake {
    fn new() -> Self {
        let (ping, heard) = std::sync::mpsc::channel();
        Handshake {
            runtime: std::thread::current().id(),
            ping,
            heard: Arc::new(std::sync::Mutex::new(heard)),
            answer: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// The synchronous side: blocks its thread until the ping comes (or ten seconds pass).
    fn blocking_side(&self) -> Result<Value, String> {
        let heard = self
            .heard
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(10));
        self.answer.notify_one();
        let off_the_runtime = std::thread::current().id() != self.runtime;
        Ok(json!({"heard": heard.is_ok(), "off_the_runtime": off_the_runtime}))
    }

    /// The async side: pings, then awaits the synchronous side's answer.
    async fn awaited_side(self) -> Result<Value, String> {
        let on_the_runtime = std::thread::current().id() == self.runtime;
        self.ping.send(()).map_err(|e| e.to_string())?;
        self.answer.notified().await;
        Ok(json!({"answered": true, "on_the_runtime": on_the_runtime}))
    }

    /// Runs `wait` (the synchronous side) and `signal` (the async side) in one turn, two at once,
    /// and returns what each call answered.
    async fn run(wait: Tool, signal: Tool) -> (Value, Value) {
        let calls = [
            ToolCall::new("w", "wait", json!({})),
            ToolCall::new("s", "signal", json!({})),
        ];
        let model = ScriptedModel::new()
            .record_requests()
            .tool_calls(calls)
            .text("done");
        let agent = Agent::builder("t")
            .model(model.clone())
            .tools((wait, signal))
            .tool_concurrency(2)
            .build()
            .unwrap();
        agent.run("go").await.unwrap();
        let request = &model.requests()[1];
        (result_of(request, "w"), result_of(request, "s"))
    }
}

#[tokio::test]
async fn tool_new_runs_a_sync_executor_on_the_blocking_pool_and_awaits_an_async_one() {
    let hand = Handshake::new();
    let (h, object) = (hand.clone(), json!({"type": "object"}));
    let wait = Tool::new("wait", "Blocks", object.clone(), move |_, _| {
        h.blocking_side().map_err(phaseo_agent::AgentError::tool)
    });
    let signal = Tool::new("signal", "Awaits", object, move |_, _| {
        let hand = hand.clone();
        async move {
            let answered = hand.awaited_side().await;
            answered.map_err(phaseo_agent::AgentError::tool)
        }
    });
    let (waited, signalled) = Handshake::run(wait, signal).await;
    assert_eq!(waited, json!({"heard": true, "off_the_runtime": true}));
    assert_eq!(signalled, json!({"answered": true, "on_the_runtime": true}));
}

#[tokio::test]
async fn tool_typed_runs_a_sync_function_on_the_blocking_pool_and_awaits_an_async_one() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Nothing {}

    let hand = Handshake::new();
    let h = hand.clone();
    let wait = Tool::typed("wait", "Blocks", move |_: Nothing, _| h.blocking_side());
    let signal = Tool::typed("signal", "Awaits", move |_: Nothing, _| {
        hand.clone().awaited_side()
    });
    let (waited, signalled) = Handshake::run(wait, signal).await;
    assert_eq!(waited, json!({"heard": true, "off_the_runtime": true}));
    assert_eq!(signalled, json!({"answered": true, "on_the_runtime": true}));
}
