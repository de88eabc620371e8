//! The runtime's metrics, as `tracing` events in the form `tracing-opentelemetry`'s
//! `MetricsLayer` turns into OpenTelemetry instruments (a `histogram.` or `monotonic_counter.`
//! field holds the measurement; the other fields are its attributes). They are events of no span
//! (so they never become span events) under the target [`METRICS_TARGET`], which a log formatter
//! can leave out. Without a subscriber nothing is formatted or recorded.

use crate::telemetry::semconv::*;

/// The target of every metric event.
pub const METRICS_TARGET: &str = "phaseo_agent::metrics";

/// `histogram.gen_ai.client.operation.duration`: the measurement field `MetricsLayer` reads.
const HISTOGRAM_GEN_AI_CLIENT_OPERATION_DURATION: &str =
    "histogram.gen_ai.client.operation.duration";
/// `histogram.gen_ai.client.token.usage`: the measurement field `MetricsLayer` reads.
const HISTOGRAM_GEN_AI_CLIENT_TOKEN_USAGE: &str = "histogram.gen_ai.client.token.usage";
/// `histogram.phaseo.run.wait.duration`: the measurement field `MetricsLayer` reads.
const HISTOGRAM_PHASEO_RUN_WAIT_DURATION: &str = "histogram.phaseo.run.wait.duration";
/// `histogram.phaseo.tool.call.duration`: the measurement field `MetricsLayer` reads.
const HISTOGRAM_PHASEO_TOOL_CALL_DURATION: &str = "histogram.phaseo.tool.call.duration";
/// `monotonic_counter.phaseo.run.pauses`: the measurement field `MetricsLayer` reads.
const MONOTONIC_COUNTER_PHASEO_RUN_PAUSES: &str = "monotonic_counter.phaseo.run.pauses";
/// `histogram.phaseo.worker.claim.wait`: the measurement field `MetricsLayer` reads.
const HISTOGRAM_PHASEO_WORKER_CLAIM_WAIT: &str = "histogram.phaseo.worker.claim.wait";
/// `histogram.phaseo.worker.run.duration`: the measurement field `MetricsLayer` reads.
const HISTOGRAM_PHASEO_WORKER_RUN_DURATION: &str = "histogram.phaseo.worker.run.duration";
/// `monotonic_counter.phaseo.worker.runs`: the measurement field `MetricsLayer` reads.
const MONOTONIC_COUNTER_PHASEO_WORKER_RUNS: &str = "monotonic_counter.phaseo.worker.runs";
/// `gauge.phaseo.queue.runs`: the measurement field `MetricsLayer` reads.
const GAUGE_PHASEO_QUEUE_RUNS: &str = "gauge.phaseo.queue.runs";
/// `gauge.phaseo.queue.oldest_ready`: the measurement field `MetricsLayer` reads.
const GAUGE_PHASEO_QUEUE_OLDEST_READY: &str = "gauge.phaseo.queue.oldest_ready";
/// `monotonic_counter.phaseo.tool.calls`: the measurement field `MetricsLayer` reads.
const MONOTONIC_COUNTER_PHASEO_TOOL_CALLS: &str = "monotonic_counter.phaseo.tool.calls";

/// `gen_ai.client.operation.duration` of one model request (with its retries). An `Option` field
/// is recorded only when it is `Some`: a failed request has `error.type` and no response model.
pub(crate) fn operation_duration(
    seconds: f64,
    provider: &str,
    request_model: &str,
    response_model: Option<&str>,
    error_type: Option<&str>,
) {
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { HISTOGRAM_GEN_AI_CLIENT_OPERATION_DURATION } = seconds,
        { GEN_AI_OPERATION_NAME } = CHAT,
        { GEN_AI_PROVIDER_NAME } = provider,
        { GEN_AI_REQUEST_MODEL } = request_model,
        { GEN_AI_RESPONSE_MODEL } = response_model,
        { ERROR_TYPE } = error_type,
    );
}

/// `gen_ai.client.token.usage` of one model response, once for input and once for output.
pub(crate) fn token_usage(
    provider: &str,
    request_model: &str,
    response_model: &str,
    input: u64,
    output: u64,
) {
    for (token_type, tokens) in [("input", input), ("output", output)] {
        tracing::event!(
            target: METRICS_TARGET,
            parent: None,
            tracing::Level::INFO,
            { HISTOGRAM_GEN_AI_CLIENT_TOKEN_USAGE } = tokens,
            { GEN_AI_OPERATION_NAME } = CHAT,
            { GEN_AI_PROVIDER_NAME } = provider,
            { GEN_AI_REQUEST_MODEL } = request_model,
            { GEN_AI_RESPONSE_MODEL } = response_model,
            { GEN_AI_TOKEN_TYPE } = token_type,
        );
    }
}

/// `phaseo.tool.calls` for one call, and `phaseo.tool.call.duration` when it ran. `error.type`
/// only on a failure (`None` is not recorded): an empty one would be a series of its own.
pub(crate) fn tool_call(tool: &str, outcome: &str, error_type: Option<&str>, seconds: Option<f64>) {
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { MONOTONIC_COUNTER_PHASEO_TOOL_CALLS } = 1_u64,
        { GEN_AI_TOOL_NAME } = tool,
        { PHASEO_CALL_OUTCOME } = outcome,
        { ERROR_TYPE } = error_type,
    );
    if let Some(seconds) = seconds {
        tracing::event!(
            target: METRICS_TARGET,
            parent: None,
            tracing::Level::INFO,
            { HISTOGRAM_PHASEO_TOOL_CALL_DURATION } = seconds,
            { GEN_AI_TOOL_NAME } = tool,
            { PHASEO_CALL_OUTCOME } = outcome,
            { ERROR_TYPE } = error_type,
        );
    }
}

/// `phaseo.run.pauses`: a run stopped to wait for people.
pub(crate) fn pause(agent: &str, kind: &str) {
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { MONOTONIC_COUNTER_PHASEO_RUN_PAUSES } = 1_u64,
        { GEN_AI_AGENT_NAME } = agent,
        { PHASEO_PAUSE_KIND } = kind,
    );
}

/// `phaseo.run.wait.duration`: how long a paused run waited for people.
pub(crate) fn wait(agent: &str, seconds: f64) {
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { HISTOGRAM_PHASEO_RUN_WAIT_DURATION } = seconds,
        { GEN_AI_AGENT_NAME } = agent,
    );
}

/// `phaseo.worker.claim.wait`: how long a run waited for a worker to take it.
pub(crate) fn claim_wait(agent: &str, waited_ms: u64) {
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { HISTOGRAM_PHASEO_WORKER_CLAIM_WAIT } = waited_ms as f64 / 1000.0,
        { GEN_AI_AGENT_NAME } = agent,
    );
}

/// `phaseo.worker.runs` and `phaseo.worker.run.duration`: a worker handed a run back.
pub(crate) fn worker_run(agent: &str, outcome: &str, seconds: f64) {
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { MONOTONIC_COUNTER_PHASEO_WORKER_RUNS } = 1_u64,
        { GEN_AI_AGENT_NAME } = agent,
        { PHASEO_WORKER_OUTCOME } = outcome,
    );
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { HISTOGRAM_PHASEO_WORKER_RUN_DURATION } = seconds,
        { GEN_AI_AGENT_NAME } = agent,
        { PHASEO_WORKER_OUTCOME } = outcome,
    );
}

/// `phaseo.queue.runs` for each state of one agent's runs, and `phaseo.queue.oldest_ready`.
pub(crate) fn queue(agent: &str, states: &[(&str, u64)], oldest_ready_ms: Option<u64>) {
    for &(state, runs) in states {
        tracing::event!(
            target: METRICS_TARGET,
            parent: None,
            tracing::Level::INFO,
            { GAUGE_PHASEO_QUEUE_RUNS } = runs,
            { GEN_AI_AGENT_NAME } = agent,
            { PHASEO_QUEUE_STATE } = state,
        );
    }
    tracing::event!(
        target: METRICS_TARGET,
        parent: None,
        tracing::Level::INFO,
        { GAUGE_PHASEO_QUEUE_OLDEST_READY } = oldest_ready_ms.unwrap_or(0) as f64 / 1000.0,
        { GEN_AI_AGENT_NAME } = agent,
    );
}
