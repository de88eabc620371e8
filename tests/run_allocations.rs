//! The heap allocations of a one-call agent run (a model that answers at once, one small typed
//! `#[tool]` call, then a text answer; nobody listens), counted by a counting allocator and
//! bounded, so that a change that makes the loop allocate more fails `cargo test`. Allocation
//! counts are deterministic; time is left to `cargo bench -p phaseo-agent --bench run_cost`, which
//! runs the same agent.
//!
//! The counter (allocation-counter) counts per thread, and the run is driven on this test's thread
//! by a current-thread runtime, so tests running beside it are not counted.

use std::future::IntoFuture;

#[path = "../phaseo-agent/benches/one_call/mod.rs"]
mod one_call;

/// The allocations of one run, after a first run has warmed up what is made once per process
/// (the runtime's thread-local state, lazily built statics).
fn allocations_of_one_run() -> u64 {
    let agent = one_call::agent();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(one_call::run_once(&agent));
    // Pinned here, the run's future is not boxed by `block_on` (tokio boxes a large future):
    // that box would be the test's, not the run's.
    let info = allocation_counter::measure(|| {
        runtime.block_on(std::pin::pin!(one_call::run_once(&agent)));
    });
    assert_eq!(info.count_current, 0, "a run leaks: {info:?}");
    println!(
        "one-call run: {} allocations, {} bytes",
        info.count_total, info.bytes_total
    );
    info.count_total
}

#[test]
fn a_one_call_run_makes_at_most_30_allocations() {
    let count = allocations_of_one_run();
    assert!(count <= 30, "a one-call run made {count} allocations");
}

/// The allocations of one scripted run (a call of `lookup_tool`, then a text answer), with or
/// without the model recording its requests.
fn allocations_of_scripted_run(record: bool) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let script = || {
        let model = phaseo_agent::ScriptedModel::new()
            .tool_call(
                "call_1",
                "lookup_tool",
                serde_json::from_str(one_call::ARGS).unwrap(),
            )
            .text("Found 2 documents.");
        if record {
            model.record_requests()
        } else {
            model
        }
    };
    let agent = |model| {
        phaseo_agent::Agent::builder("bench")
            .model(model)
            .tool(one_call::lookup_tool)
            .build()
            .expect("the agent builds")
    };
    let warm = agent(script());
    runtime
        .block_on(std::pin::pin!(warm.run("Hi").into_future()))
        .expect("the run completes");
    let agent = agent(script());
    allocation_counter::measure(|| {
        runtime
            .block_on(std::pin::pin!(agent.run("Hi").into_future()))
            .expect("the run completes");
    })
    .count_total
}

#[test]
fn a_scripted_model_copies_requests_only_when_asked_to_record_them() {
    let plain = allocations_of_scripted_run(false);
    let recording = allocations_of_scripted_run(true);
    // Recording copies the conversation and the tool's schema on each of the two turns.
    assert!(
        recording >= plain + 20,
        "recording: {recording} allocations, not recording: {plain}"
    );
}
