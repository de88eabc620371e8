//! What a whole agent run costs, and what one typed call costs, against the serde floor, all
//! measured side by side in one run, in a build of this package alone.
//!
//! ```text
//! cargo bench -p phaseo-agent --bench run_cost
//! ```
//!
//! Built as a bench of `phaseo-agent` itself, the build holds only this package's dependencies
//! (and criterion): none of the features that the root package's dev-dependencies (HTTP mocks,
//! other SDKs) turn on in shared crates such as serde_json or tokio is unified in, so the floor
//! is the one a user's crate gets.
//!
//! - `floor`: `serde_json::from_str` of the small input + the function + `to_string` of its
//!   output, with no validation (the baseline of the root package's `benches/dispatch.rs`);
//! - `tool_macro`: the same call through a `#[tool]` function's `Tool::invoke`: argument text
//!   decoded and checked against the schema, the function run, its output serialised;
//! - `one_call_run`: `Agent::run` with a model that answers at once: turn 1 calls the tool
//!   above, turn 2 answers in text; no listener. Its heap allocations are counted (and bounded)
//!   by the root package's `tests/run_allocations.rs`. Driven by a current-thread tokio runtime's
//!   `block_on`, as an application's `main` would;
//! - `one_call_run_polled`: the same run polled by the minimal executor `tool_macro` uses (the
//!   run needs no runtime: no timeout, no retry), so that neither side of its ratio to
//!   `tool_macro` pays for entering a runtime.
//!
//! Criterion measures one variant after another, so on a shared machine a change of load between
//! them moves the ratios. The `interleaved` step that follows measures the three in turn, about a
//! millisecond each, for many rounds, and prints the median (and quartiles) of each round's ratio
//! to the floor: both sides of a ratio see the same load.

mod one_call;

use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use phaseo_agent::{IntoTool, ToolContext};

use one_call::{ARGS, Lookup, lookup, lookup_tool};

/// Polls a future that needs no runtime (a typed tool without a timeout) to completion.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::yield_now();
    }
}

fn run_cost(c: &mut Criterion) {
    let ctx = ToolContext::detached();
    let tool = lookup_tool.into_tool();
    let expected = serde_json::to_string(&lookup(serde_json::from_str(ARGS).unwrap())).unwrap();
    assert_eq!(block_on(tool.invoke(ARGS, &ctx)).unwrap(), expected);
    let agent = one_call::agent();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(one_call::run_once(&agent));

    let mut group = c.benchmark_group("run_cost");
    group.bench_function("floor", |b| {
        b.iter(|| {
            let input: Lookup = serde_json::from_str(black_box(ARGS)).unwrap();
            serde_json::to_string(&lookup(input)).unwrap()
        })
    });
    group.bench_function("tool_macro", |b| {
        b.iter(|| block_on(tool.invoke(black_box(ARGS), &ctx)).unwrap())
    });
    group.bench_function("one_call_run", |b| {
        b.iter(|| runtime.block_on(pin!(one_call::run_once(black_box(&agent)))))
    });
    group.bench_function("one_call_run_polled", |b| {
        b.iter(|| block_on(one_call::run_once(black_box(&agent))))
    });
    group.finish();
}

/// Seconds per call of `f`, over `iterations` calls.
fn per_call(iterations: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed().as_secs_f64() / f64::from(iterations)
}

/// The median and quartiles of `ratios`.
fn quartiles(mut ratios: Vec<f64>) -> (f64, f64, f64) {
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.25), at(0.75))
}

/// The three variants measured in turn, round after round: each round's ratios to the floor.
fn interleaved(_: &mut Criterion) {
    const ROUNDS: usize = 600;
    let ctx = ToolContext::detached();
    let tool = lookup_tool.into_tool();
    let agent = one_call::agent();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let floor = || {
        let input: Lookup = serde_json::from_str(black_box(ARGS)).unwrap();
        black_box(serde_json::to_string(&lookup(input)).unwrap());
    };
    let typed = || {
        black_box(block_on(tool.invoke(black_box(ARGS), &ctx)).unwrap());
    };
    let run = || runtime.block_on(pin!(one_call::run_once(black_box(&agent))));
    let polled = || block_on(one_call::run_once(black_box(&agent)));
    let (mut typed_ratios, mut run_ratios, mut polled_ratios) =
        (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let base = per_call(2_000, floor);
        typed_ratios.push(per_call(500, typed) / base);
        run_ratios.push(per_call(40, run) / base);
        polled_ratios.push(per_call(40, polled) / base);
    }
    let all = [
        ("tool_macro", typed_ratios),
        ("one_call_run", run_ratios),
        ("one_call_run_polled", polled_ratios),
    ];
    for (name, ratios) in all {
        let (median, low, high) = quartiles(ratios);
        println!(
            "interleaved, {ROUNDS} rounds: {name} / floor = {median:.2}x (quartiles {low:.2}-{high:.2})"
        );
    }
}

criterion_group!(benches, run_cost, interleaved);
criterion_main!(benches);
