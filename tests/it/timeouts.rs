//! Timeouts: reported at once, the tool's future dropped, its token fired; queued time does not
//! count; a timeout is a tool error under the error policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::agent::result_of;
use phaseo_agent::{Agent, AgentError, OnError, ScriptedModel, Tool, ToolCall, ToolContext};
use serde_json::json;

/// Sets a flag when dropped: proves a future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn wait_for(flag: &AtomicBool) -> bool {
    eventually(|| flag.load(Ordering::SeqCst)).await
}

/// Whether `check` holds within a second.
async fn eventually(check: impl Fn() -> bool) -> bool {
    for _ in 0..200 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// A tool `long` that calls `at_start` with its context, reports progress, then sleeps 30 s.
fn long_running(at_start: impl Fn(&ToolContext) + Send + Sync + 'static) -> Tool {
    Tool::new(
        "long",
        "Runs long",
        json!({"type": "object"}),
        move |_, ctx: ToolContext| {
            at_start(&ctx);
            async move {
                ctx.emit_progress(json!("started"))?;
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(json!("done"))
            }
        },
    )
}

/// A run of `tool` (as `long`), read until the tool reports it started; dropping the stream
/// walks away from the run.
async fn started_run(tool: Tool) -> phaseo_agent::EventStream {
    use futures::StreamExt;
    let model = ScriptedModel::new()
        .tool_call("c1", "long", json!({}))
        .text("unreachable");
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let mut stream = agent.run("go").stream();
    while let Some(event) = stream.next().await {
        if event.name() == "tool.preliminary_result" {
            break;
        }
    }
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_ignores_cancellation_is_abandoned_at_its_deadline() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let (c, d, f) = (cancelled.clone(), dropped.clone(), finished.clone());
    let sleeper = Tool::new(
        "sleeper",
        "Sleeps for ten seconds",
        json!({"type": "object"}),
        move |_, ctx: ToolContext| {
            // Watch the token from outside the tool's future, which is dropped at the deadline.
            let token = ctx.cancellation_token().clone();
            let c = c.clone();
            tokio::spawn(async move {
                token.cancelled().await;
                c.store(true, Ordering::SeqCst);
            });
            let guard = DropFlag(d.clone());
            let f = f.clone();
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(10)).await; // never looks at the token
                f.store(true, Ordering::SeqCst);
                Ok(json!("woke up"))
            }
        },
    )
    .timeout(Duration::from_millis(100));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "sleeper", json!({}))
        .text("moved on");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(sleeper)
        .build()
        .unwrap();

    let started = Instant::now();
    let result = agent.run("go").await.unwrap();
    let elapsed = started.elapsed();

    assert_eq!(result.output(), Some("moved on"));
    // 100 ms of timeout; a second leaves room for a loaded machine, not for waiting on the tool.
    assert!(
        elapsed < Duration::from_secs(1),
        "the run waited {elapsed:?} for a 10 s tool"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the tool's future was dropped by the time the run went on"
    );
    assert!(wait_for(&cancelled).await, "the cancellation token fired");
    assert!(!finished.load(Ordering::SeqCst));
    assert_eq!(
        result_of(&model.requests()[1], "c1"),
        json!({"error": "Tool sleeper timed out after 100ms"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tool_cannot_be_stopped_but_the_run_does_not_wait_for_it() {
    let cancelled_seen = Arc::new(AtomicBool::new(false));
    let seen = cancelled_seen.clone();
    let blocking = Tool::new(
        "blocking",
        "Blocks its thread",
        json!({"type": "object"}),
        move |_, ctx| {
            std::thread::sleep(Duration::from_millis(1500));
            seen.store(ctx.is_cancelled(), Ordering::SeqCst);
            Ok(json!("late"))
        },
    )
    .timeout(Duration::from_millis(100));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "blocking", json!({}))
        .text("moved on");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(blocking)
        .build()
        .unwrap();
    let started = Instant::now();
    let result = agent.run("go").await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.output(), Some("moved on"));
    assert!(
        result_of(&model.requests()[1], "c1")["error"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    // The thread ran on, and could see the token had fired when it looked.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert!(cancelled_seen.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn time_queued_behind_the_concurrency_limit_does_not_count() {
    let slow = Tool::new(
        "slow",
        "Takes 300 ms",
        json!({"type": "object"}),
        |_, _| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(json!("slow done"))
        },
    );
    let quick = Tool::new(
        "quick",
        "Takes 50 ms",
        json!({"type": "object"}),
        |_, _| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(json!("quick done"))
        },
    )
    .timeout(Duration::from_millis(200));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "slow", json!({})),
            ToolCall::new("c2", "quick", json!({})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(slow)
        .tool(quick)
        .tool_concurrency(1)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    agent.run("go").await.unwrap();
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(350),
        "one after the other"
    );
    let req = &model.requests()[1];
    assert_eq!(result_of(req, "c1"), json!("slow done"));
    assert_eq!(
        result_of(req, "c2"),
        json!("quick done"),
        "queued 300 ms, ran 50 ms: within its 200 ms"
    );
}

#[tokio::test(start_paused = true)]
async fn the_agent_default_timeout_applies_to_tools_without_one_and_a_tool_timeout_wins() {
    let make = |id: &str, ms: u64| {
        Tool::new(
            id,
            "Sleeps",
            json!({"type": "object"}),
            move |_, _| async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(json!("done"))
            },
        )
    };
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "default", json!({})),
            ToolCall::new("c2", "own", json!({})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(make("default", 500))
        .tool(make("own", 500).timeout(Duration::from_secs(1)))
        .default_timeout(Duration::from_millis(250))
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let req = &model.requests()[1];
    assert_eq!(
        result_of(req, "c1"),
        json!({"error": "Tool default timed out after 250ms"})
    );
    assert_eq!(result_of(req, "c2"), json!("done"));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_under_fail_run_fails_the_run() {
    let tool = Tool::new(
        "sleepy",
        "Sleeps",
        json!({"type": "object"}),
        |_, _| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(json!("done"))
        },
    )
    .timeout(Duration::from_millis(10))
    .on_error(OnError::FailRun);
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "sleepy", json!({}))
        .text("unreachable");
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert_eq!(
        err,
        AgentError::Timeout {
            tool: "sleepy".into(),
            ms: 10
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_typed_tool_times_out_too() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Wait {
        ms: u64,
    }
    let tool = Tool::typed(
        "wait",
        "Waits",
        |input: Wait, _ctx: ToolContext| async move {
            tokio::time::sleep(Duration::from_millis(input.ms)).await;
            Ok::<_, AgentError>("waited")
        },
    )
    .timeout(Duration::from_millis(100));
    let ctx = ToolContext::detached();
    assert_eq!(
        tool.invoke(r#"{"ms": 10}"#, &ctx).await.unwrap(),
        "\"waited\""
    );
    let err = tool.invoke(r#"{"ms": 1000}"#, &ctx).await.unwrap_err();
    assert_eq!(err.to_string(), "tool `wait` timed out after 100 ms");
    assert!(ctx.is_cancelled());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_run_fires_the_tokens_of_its_running_calls() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let c = cancelled.clone();
    let tool = long_running(move |ctx| {
        let token = ctx.cancellation_token().clone();
        let c = c.clone();
        tokio::spawn(async move {
            token.cancelled().await;
            c.store(true, Ordering::SeqCst);
        });
    });
    drop(started_run(tool).await);
    assert!(
        wait_for(&cancelled).await,
        "the running call's token fired when the run was dropped"
    );
}

/// A tool that never yields on its own (every `.await` is ready at once) uses up the task's
/// cooperative budget on every poll; its deadline is polled outside that budget, so it still fires.
#[tokio::test]
async fn a_tool_that_uses_up_its_cooperative_budget_still_times_out() {
    let busy = Tool::new(
        "busy",
        "Reads a channel that is never empty",
        json!({"type": "object"}),
        |_, _| async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
            while !tx.is_closed() {
                let _ = tx.send(());
                rx.recv().await;
            }
            Ok(json!("unreachable"))
        },
    )
    .timeout(Duration::from_millis(50));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "busy", json!({}))
        .text("moved on");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(busy)
        .build()
        .unwrap();

    let result = tokio::time::timeout(Duration::from_secs(10), agent.run("go"))
        .await
        .expect("the tool's timeout never fired")
        .unwrap();

    assert_eq!(result.output(), Some("moved on"));
    assert_eq!(
        result_of(&model.requests()[1], "c1"),
        json!({"error": "Tool busy timed out after 50ms"})
    );
}

/// A call's token is made only when someone asks for it; one asked for after the call timed out
/// (or its run was dropped) is already cancelled.
#[tokio::test]
async fn a_token_asked_for_after_a_timeout_is_already_cancelled() {
    let tool = Tool::new("wait", "Waits", json!({"type": "object"}), |_, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(json!("waited"))
    })
    .timeout(Duration::from_millis(10));
    let ctx = ToolContext::detached();
    assert!(!ctx.is_cancelled());
    let err = tool.invoke("{}", &ctx).await.unwrap_err();
    assert!(matches!(err, AgentError::Timeout { .. }), "{err}");
    assert!(ctx.is_cancelled());
    assert!(ctx.cancellation_token().is_cancelled());
}

/// A call that never asked for its token is still told when its run is dropped: the context it
/// kept reports the cancellation, and a token it asks for then is already cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_run_cancels_a_call_that_never_asked_for_its_token() {
    let kept = Arc::new(std::sync::Mutex::new(None::<ToolContext>));
    let keep = kept.clone();
    let tool = long_running(move |ctx| *keep.lock().unwrap() = Some(ctx.clone()));
    let stream = started_run(tool).await;
    let ctx = kept.lock().unwrap().clone().expect("the tool ran");
    assert!(!ctx.is_cancelled(), "not cancelled while its run goes on");
    drop(stream);
    assert!(
        eventually(|| ctx.is_cancelled()).await,
        "cancelled once the run was dropped"
    );
    assert!(ctx.cancellation_token().is_cancelled());
}
