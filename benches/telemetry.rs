//! What the runtime's spans and metrics cost: an agent run with 1 and with 10 tool calls in one
//! turn, with no subscriber and with the subscriber a user of the `otel` feature installs
//! (tracing-opentelemetry's span layer over the SDK's tracer, spans exported to memory and
//! dropped, and its metrics layer over an SDK meter provider).
//!
//! ```text
//! cargo bench --bench telemetry --features otel
//! ```
//!
//! Each variant runs in a process of its own (this binary, started again with `--child`): a
//! `tracing` dispatcher anywhere in a process raises tracing's global max level, so a variant
//! "without a subscriber" in the same process as one with it would still pay for what a span
//! records. The four variants alternate, round after round, so each difference sees the same
//! load. Prints the median time of each and the cost per tool call the subscriber adds:
//! `((with 10 - without 10) - (with 1 - without 1)) / 9`, the slope, so the run's own spans
//! (one `invoke_agent`, two `chat`) cancel out. The cost with no subscriber at all, against the
//! code before the spans, is `run_cost`'s (`benches/dispatch_layouts`).

use std::future::IntoFuture;
use std::hint::black_box;
use std::time::Instant;

use futures::future::BoxFuture;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use phaseo_agent::{
    Agent, Message, Model, ModelError, ModelRequest, ModelResponse, Tool, ToolCall,
};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

/// A model that answers at once: `calls` calls of `echo` on the first turn, then text.
struct AtOnce {
    calls: usize,
}

impl Model for AtOnce {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let response = match request.messages.last() {
            Some(Message::Tool { .. }) => ModelResponse::text("Done."),
            _ => ModelResponse::tool_calls(
                (0..self.calls).map(|i| ToolCall::raw(format!("c{i}"), "echo", r#"{"n": 1}"#)),
            ),
        };
        Box::pin(std::future::ready(Ok(response)))
    }
}

fn agent(calls: usize) -> Agent {
    let echo = Tool::new("echo", "Echo", json!({"type": "object"}), |input, _| {
        Ok(input)
    });
    Agent::builder("bench")
        .model(AtOnce { calls })
        .tool(echo)
        .max_calls_per_turn(16)
        .build()
        .expect("the agent builds")
}

fn per_run(runtime: &tokio::runtime::Runtime, agent: &Agent, runs: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..runs {
        let done = runtime
            .block_on(black_box(agent).run("Go").into_future())
            .expect("the run completes");
        black_box(done);
    }
    start.elapsed().as_secs_f64() / f64::from(runs)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One variant, in this process: `calls` calls per run, with the subscriber or not; prints the
/// median seconds per run over `batches` batches of `RUNS` runs.
fn child(calls: usize, traced: bool, batches: usize) {
    const RUNS: u32 = 50;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let agent = agent(calls);
    let spans = InMemorySpanExporter::default();
    let tracer_provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let meter_provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(InMemoryMetricExporter::default()).build())
        .build();
    if traced {
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("bench")))
            .with(tracing_opentelemetry::MetricsLayer::new(
                meter_provider.clone(),
            ));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    }
    per_run(&runtime, &agent, RUNS);
    let samples = (0..batches)
        .map(|_| {
            let seconds = per_run(&runtime, &agent, RUNS);
            spans.reset();
            seconds
        })
        .collect();
    println!("{}", median(samples));
}

/// Runs one variant in a child process and reads its median.
fn measure(calls: usize, traced: bool, batches: usize) -> f64 {
    let exe = std::env::current_exe().expect("this binary");
    let output = std::process::Command::new(exe)
        .args([
            "--child",
            &calls.to_string(),
            if traced { "on" } else { "off" },
            &batches.to_string(),
        ])
        .output()
        .expect("the child runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("the child prints seconds per run")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--child") {
        let arg = |i: usize| args[at + i].as_str();
        child(
            arg(1).parse().unwrap(),
            arg(2) == "on",
            arg(3).parse().unwrap(),
        );
        return;
    }
    const ROUNDS: usize = 15;
    const BATCHES: usize = 40;
    let mut samples: [Vec<f64>; 4] = Default::default();
    for _ in 0..ROUNDS {
        samples[0].push(measure(1, false, BATCHES));
        samples[1].push(measure(10, false, BATCHES));
        samples[2].push(measure(1, true, BATCHES));
        samples[3].push(measure(10, true, BATCHES));
    }
    let [bare1, bare10, traced1, traced10] = samples.map(median);
    let micros = |s: f64| s * 1e6;
    println!("telemetry, {ROUNDS} rounds of a process per variant, medians:");
    println!(
        "  1 call:   no subscriber {:8.1} µs, with spans and metrics {:8.1} µs ({:.2}x)",
        micros(bare1),
        micros(traced1),
        traced1 / bare1
    );
    println!(
        "  10 calls: no subscriber {:8.1} µs, with spans and metrics {:8.1} µs ({:.2}x)",
        micros(bare10),
        micros(traced10),
        traced10 / bare10
    );
    let per_call = ((traced10 - bare10) - (traced1 - bare1)) / 9.0;
    let bare_call = (bare10 - bare1) / 9.0;
    println!(
        "  per tool call: {:.2} µs without a subscriber, +{:.2} µs with one (an execute_tool span and its metric events)",
        micros(bare_call),
        micros(per_call)
    );
    println!(
        "  per run (one invoke_agent and two chat spans, one call): +{:.2} µs",
        micros(traced1 - bare1)
    );
}
