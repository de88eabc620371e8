//! Runs: the agent, the loop, execution of a turn's calls, pausing and resuming, the run's state
//! and its signing, and its events.
//!
//! Stage 5, the top: it may use every other stage. Its files, lowest first (each uses only the
//! ones before it):
//!
//! - `state`: [`RunState`](state::RunState) and the rest of a run as data (pending calls,
//!   decisions, steps, results);
//! - `signing`: HMAC signatures of stored states;
//! - `event`: the run's events and their stream;
//! - `journal`: the transitions a run reports as they happen, for a write-ahead journal, and
//!   what recovering an interrupted run starts from;
//! - `agent`: [`Agent`](agent::Agent), its builder and its settings;
//! - `execute`: the calls of one turn, under the concurrency limit, in call order;
//! - `runner`: the loop (model turn, plan each call, execute, pause or go on);
//! - `resume`: the resume half of the runner: decisions checked and turned into plans;
//! - `retry`: a failed run asked again, its interrupted turn answered from what was recorded;
//! - `continuation`: a completed run continued with a new user message;
//! - `entry`: the agent's entry points (`run`, `resume`, `retry`, and their streams).

pub(crate) mod state;
pub(crate) mod signing;
pub(crate) mod event;
pub(crate) mod journal;
pub(crate) mod agent;
pub(crate) mod observe;
pub(crate) mod execute;
pub(crate) mod runner;
pub(crate) mod resume;
pub(crate) mod retry;
pub(crate) mod continuation;
pub(crate) mod entry;
