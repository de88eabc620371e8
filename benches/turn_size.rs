//! The cost of a large turn, per call: a run whose one turn makes N approval-gated calls is paused,
//! stored, loaded and resumed with one decision per call. Linear work keeps the time per call flat
//! as N grows; the report prints it for each N.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use phaseo_agent::{Agent, Decisions, RunState, ScriptedModel, Tool, ToolCall};
use serde_json::json;

fn agent(count: usize) -> Agent {
    let calls = (0..count).map(|i| ToolCall::new(format!("c{i}"), "store", json!({})));
    let tool = Tool::new("store", "Stores", json!({"type": "object"}), |_, _| {
        Ok(json!("ok"))
    })
    .require_approval();
    Agent::builder("bench")
        .model(ScriptedModel::new().tool_calls(calls).text("done"))
        .tool(tool)
        .max_calls_per_turn(count)
        .build()
        .expect("an agent")
}

fn turn_size(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("pause_store_resume");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for count in [1_000, 4_000, 16_000] {
        group.throughput(Throughput::Elements(count as u64));
        group.bench_with_input(BenchmarkId::from_parameter(count), &count, |b, &count| {
            b.iter_batched(
                || agent(count),
                |agent| {
                    runtime.block_on(async {
                        let paused = agent.run("go").await.expect("paused");
                        let state = RunState::from_json(&paused.state.to_json()).expect("loads");
                        let mut decisions = Decisions::for_run(state.run_id());
                        for pending in state.pending() {
                            decisions = decisions.approve(pending.call.id.clone());
                        }
                        black_box(agent.resume(&state, decisions).await.expect("resumes"))
                    })
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, turn_size);
criterion_main!(benches);
