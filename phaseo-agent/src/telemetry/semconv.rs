//! The names the runtime's spans, attributes and metrics use: OpenTelemetry's GenAI semantic
//! conventions where they have a name for the fact, and the crate's own `phaseo.*` namespace where
//! they do not (a run's id and version, pauses, decisions, a call's outcome). No `gen_ai.*` name
//! here is invented: a test checks each one against the conventions' published registry.
//!
//! The GenAI conventions are at Development status and may still rename things; when they do,
//! this module changes, and the change is in the changelog.
//!
//! ```
//! use phaseo_agent::telemetry::semconv;
//!
//! assert_eq!(semconv::GEN_AI_TOOL_NAME, "gen_ai.tool.name");
//! assert_eq!(semconv::PHASEO_CALL_OUTCOME, "phaseo.call.outcome");
//! ```

// Operation names (`gen_ai.operation.name`), which are also the first word of span names.

/// The operation of a run: `invoke_agent`, the span `invoke_agent {agent}`.
pub const INVOKE_AGENT: &str = "invoke_agent";
/// The operation of one model request: `chat`, the span `chat {model}`.
pub const CHAT: &str = "chat";
/// The operation of one tool call: `execute_tool`, the span `execute_tool {tool}`.
pub const EXECUTE_TOOL: &str = "execute_tool";

// GenAI attributes.

/// The operation: [`INVOKE_AGENT`], [`CHAT`] or [`EXECUTE_TOOL`].
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// Who serves the model (`openai`, `anthropic`, ...), as the model says.
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The model asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// The model that answered, as the provider says.
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// The provider's id of a response.
pub const GEN_AI_RESPONSE_ID: &str = "gen_ai.response.id";
/// Why the model stopped (a list).
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// Tokens of input.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Tokens of output.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Input tokens read from the provider's prompt cache.
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// Input tokens written to the provider's prompt cache.
pub const GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: &str =
    "gen_ai.usage.cache_creation.input_tokens";
/// Output tokens spent on reasoning.
pub const GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
/// The agent's name: the agent's id.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// The conversation: the run id.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// A tool's name: the tool's id.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// A tool call's id, as the model gave it.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// What kind of tool: `function` (run in this process), `extension` (run by another process: an
/// MCP server's tool), or `datastore`.
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// A tool's description.
pub const GEN_AI_TOOL_DESCRIPTION: &str = "gen_ai.tool.description";
/// A call's arguments (content: recorded only when capture is on).
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// A call's result (content: recorded only when capture is on).
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// The messages sent to the model (content: recorded only when capture is on).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// The model's answer (content: recorded only when capture is on).
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// The instructions sent to the model (content: recorded only when capture is on).
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// Which tokens a `gen_ai.client.token.usage` measurement counts: `input` or `output`.
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
/// A failure's class: an [`AgentErrorKind`](crate::AgentErrorKind) or
/// [`ModelErrorKind`](crate::ModelErrorKind) name, low in cardinality.
pub const ERROR_TYPE: &str = "error.type";
/// The host a model is reached at.
pub const SERVER_ADDRESS: &str = "server.address";
/// The port a model is reached at.
pub const SERVER_PORT: &str = "server.port";

// GenAI metrics.

/// Histogram of one operation's duration, in seconds.
pub const GEN_AI_CLIENT_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
/// Histogram of the tokens of one model request, by [`GEN_AI_TOKEN_TYPE`].
pub const GEN_AI_CLIENT_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
/// The bucket boundaries the conventions give for [`GEN_AI_CLIENT_OPERATION_DURATION`].
pub const OPERATION_DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// The bucket boundaries the conventions give for [`GEN_AI_CLIENT_TOKEN_USAGE`].
pub const TOKEN_USAGE_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

// The crate's own namespace.

/// A run's id.
pub const PHASEO_RUN_ID: &str = "phaseo.run.id";
/// A run's version in its store, when it has one.
pub const PHASEO_RUN_VERSION: &str = "phaseo.run.version";
/// How a run's span ended: `completed`, `waiting_for_human` or `failed`.
pub const PHASEO_RUN_STATUS: &str = "phaseo.run.status";
/// Whether the span continues a run that paused, failed or stopped (`true`) or starts one.
pub const PHASEO_RUN_RESUMED: &str = "phaseo.run.resumed";
/// What a paused call waits for: a [`PendingKind`](crate::PendingKind) name.
pub const PHASEO_PAUSE_KIND: &str = "phaseo.pause.kind";
/// A person's decision on a call: a [`Decision`](crate::Decision) name (`approve`, `reject`, ...).
pub const PHASEO_DECISION: &str = "phaseo.decision";
/// Who decided, when the store knows.
pub const PHASEO_DECISION_BY: &str = "phaseo.decision.by";
/// When the decision was recorded, in milliseconds since the Unix epoch, when the store knows.
pub const PHASEO_DECISION_AT_MS: &str = "phaseo.decision.at_ms";
/// How a call ended: one of the `OUTCOME_*` values.
pub const PHASEO_CALL_OUTCOME: &str = "phaseo.call.outcome";
/// A call's attempt (0 for the first; an idempotent call run again after a crash counts up).
pub const PHASEO_CALL_ATTEMPT: &str = "phaseo.call.attempt";
/// A model request's retry (the span event's attribute): its number, from 1.
pub const PHASEO_RETRY_ATTEMPT: &str = "phaseo.retry.attempt";
/// A model request's retry: the wait before it, in milliseconds.
pub const PHASEO_RETRY_DELAY_MS: &str = "phaseo.retry.delay_ms";
/// What a span link points at: `paused` (the run's span before a pause), `failed` (before a
/// retry), `interrupted` (before a recovery) or `completed` (before a continuation).
pub const PHASEO_LINK_KIND: &str = "phaseo.link.kind";

/// The span event of a model request's retry.
pub const EVENT_RETRY: &str = "phaseo.model.retry";
/// The span event of a person's decision, on the span of the run it resumes.
pub const EVENT_DECISION: &str = "phaseo.decision";

/// The call's result reached the model.
pub const OUTCOME_OK: &str = "ok";
/// The call failed (its error reached the model or failed the run).
pub const OUTCOME_ERROR: &str = "error";
/// A person rejected the call.
pub const OUTCOME_REJECTED: &str = "rejected";
/// The call ran past its deadline.
pub const OUTCOME_TIMED_OUT: &str = "timed_out";
/// The call waits for a person.
pub const OUTCOME_PAUSED: &str = "paused";
/// The call started and its process stopped before its end was recorded: it waits for a person.
pub const OUTCOME_IN_DOUBT: &str = "in_doubt";

/// Counter of tool calls, by [`GEN_AI_TOOL_NAME`] and [`PHASEO_CALL_OUTCOME`].
pub const PHASEO_TOOL_CALLS: &str = "phaseo.tool.calls";
/// Histogram of a run tool call's duration, in seconds, by tool and outcome.
pub const PHASEO_TOOL_CALL_DURATION: &str = "phaseo.tool.call.duration";
/// Counter of pauses (a run that stops to wait for people), by [`GEN_AI_AGENT_NAME`].
pub const PHASEO_RUN_PAUSES: &str = "phaseo.run.pauses";
/// Histogram of the time a paused run waited for people, in seconds, recorded when it resumes.
pub const PHASEO_RUN_WAIT_DURATION: &str = "phaseo.run.wait.duration";
/// The bucket boundaries of [`PHASEO_RUN_WAIT_DURATION`]: a second to a week.
pub const WAIT_DURATION_BUCKETS: [f64; 12] = [
    1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 43200.0, 86400.0, 259200.0, 604800.0,
];

/// Histogram of the time a queued run waited for a worker to take it (since it became ready, or
/// since its last worker's lease expired), in seconds, by [`GEN_AI_AGENT_NAME`].
pub const PHASEO_WORKER_CLAIM_WAIT: &str = "phaseo.worker.claim.wait";
/// Counter of runs a worker handed back, by [`GEN_AI_AGENT_NAME`] and [`PHASEO_WORKER_OUTCOME`].
pub const PHASEO_WORKER_RUNS: &str = "phaseo.worker.runs";
/// Histogram of the time a worker held a run, in seconds, by agent and outcome.
pub const PHASEO_WORKER_RUN_DURATION: &str = "phaseo.worker.run.duration";
/// How a worker's run ended: `completed`, `paused`, `failed`, `refused`, `conflict` (another
/// process moved the run on first) or `lease_lost`.
pub const PHASEO_WORKER_OUTCOME: &str = "phaseo.worker.outcome";
/// Gauge of the runs of an agent in one state of the queue, by [`GEN_AI_AGENT_NAME`] and
/// [`PHASEO_QUEUE_STATE`] (`ready`, `running`, `paused`, `in_doubt`, `failed`, `completed`):
/// what [`Runs::queue_counts`](crate::durable::Runs::queue_counts) returns, reported by a worker
/// with [`Worker::queue_metrics`](crate::worker::Worker::queue_metrics) on.
pub const PHASEO_QUEUE_RUNS: &str = "phaseo.queue.runs";
/// Gauge of how long an agent's oldest ready run has waited for a worker, in seconds (0 when
/// none waits).
pub const PHASEO_QUEUE_OLDEST_READY: &str = "phaseo.queue.oldest_ready";
/// The state a [`PHASEO_QUEUE_RUNS`] point counts.
pub const PHASEO_QUEUE_STATE: &str = "phaseo.queue.state";
/// The bucket boundaries of [`PHASEO_WORKER_CLAIM_WAIT`]: a millisecond to ten minutes.
pub const CLAIM_WAIT_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 10.0, 60.0, 600.0,
];

/// The environment variable the OpenTelemetry instrumentations of other languages read to record
/// messages and tool arguments: `true` turns capture on (see
/// [`CaptureContent`](crate::telemetry::CaptureContent)).
pub const CAPTURE_CONTENT_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
