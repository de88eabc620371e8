//! What a refusal tells the one who got it: each of the store's refusals says what happened and
//! what to do about it (mostly: nothing, someone else did it; or load the run again and decide on
//! its current version), a resumer that lost a race runs nothing, and a failed run's error prints
//! short, whatever the size of its state.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use phaseo_agent::durable::Runs;
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{MemoryStore, PendingFilter, StoredStatus};
use phaseo_agent::{
    Agent, AgentError, Decision, Decisions, ModelError, ModelErrorKind, PendingKind, ScriptedModel,
    StoreError, Tool,
};

/// An agent whose `deploy` needs approval; `ran` counts its runs.
fn release(ran: &Arc<AtomicUsize>) -> Agent {
    let ran = ran.clone();
    let deploy = Tool::new(
        "deploy",
        "Deploys",
        json!({"type": "object"}),
        move |input, _| {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(input)
        },
    )
    .require_approval();
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"env": "staging"}))
        .text("Deployed.");
    Agent::builder("release")
        .model(model)
        .tool(deploy)
        .build()
        .unwrap()
}

#[test]
fn each_refusal_says_what_happened_and_what_to_do() {
    let cases = [
        (
            StoreError::Conflict {
                run_id: "run_1".into(),
                expected: 4,
                found: 5,
            },
            "Run `run_1` is at version 5, not 4: another process (a resume, a decision or a \
             recovery) changed it first, and nothing was written. A resumer that lost this race \
             has nothing to do; to decide, load the run again and decide on its current version",
        ),
        (
            StoreError::NotFound {
                run_id: "run_1".into(),
            },
            "No run `run_1` in the store: check the run id, and that this is the store the run \
             was saved in (a completed or failed run may have been pruned)",
        ),
        (
            StoreError::AlreadyExists {
                run_id: "run_1".into(),
            },
            "Run `run_1` is already in the store: it was stored before (an enqueue or a save \
             tried again), so there is nothing to do; to start another run, give it another id",
        ),
        (
            StoreError::WrongStatus {
                run_id: "run_1".into(),
                status: StoredStatus::Completed,
                needed: "only a paused run (or one in doubt, or ready) is resumed".into(),
            },
            "Run `run_1` is completed; only a paused run (or one in doubt, or ready) is resumed: \
             it has finished, so there is nothing to do",
        ),
        (
            StoreError::WrongStatus {
                run_id: "run_1".into(),
                status: StoredStatus::Running,
                needed: "only a paused run (or one in doubt, or ready) is resumed".into(),
            },
            "Run `run_1` is running; only a paused run (or one in doubt, or ready) is resumed: \
             another process runs it, so a resumer that lost the race has nothing to do (a run \
             whose process died is taken up with `recover`)",
        ),
        (
            StoreError::WrongStatus {
                run_id: "run_1".into(),
                status: StoredStatus::Paused,
                needed: "only a run that was running is recovered".into(),
            },
            "Run `run_1` is paused; only a run that was running is recovered: it waits for \
             people's decisions; decide its waiting calls, then resume it",
        ),
        (
            StoreError::WrongStatus {
                run_id: "run_1".into(),
                status: StoredStatus::Ready,
                needed: "only a run that was running is recovered".into(),
            },
            "Run `run_1` is ready; only a run that was running is recovered: a worker takes it, \
             so there is nothing to do",
        ),
        (
            StoreError::LeaseLost {
                run_id: "run_1".into(),
                token: 3,
            },
            "The lease 3 on run `run_1` is over (expired, or another worker took the run); \
             nothing was written: this worker stops the run, and the one that holds it now goes \
             on with it",
        ),
        (
            StoreError::StaleDecision {
                run_id: "run_1".into(),
                call_id: "call_1".into(),
                reason: "the call no longer waits for a decision: nothing to do".into(),
            },
            "Decision refused for call `call_1` of run `run_1`: the call no longer waits for a \
             decision: nothing to do",
        ),
    ];
    for (error, text) in cases {
        // What a model reads is the whole text, kept as it was; the message says what happened
        // (lowercase, no advice), and the advice what to do.
        assert_eq!(AgentError::Store(error.clone()).model_message(), text);
        let message = error.to_string();
        assert!(message.starts_with(char::is_lowercase), "{message}");
        assert!(!error.advice().is_empty());
        assert!(!message.contains(&error.advice()), "{message}");
        let said = format!("{message} {}", error.advice()).to_lowercase();
        for word in ["run_1", "nothing"] {
            assert_eq!(
                text.to_lowercase().contains(word),
                said.contains(word),
                "{word} in {text} and {said}"
            );
        }
    }
}

#[test]
fn a_decision_refused_says_who_decided_when_or_to_decide_again() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let ran = Arc::new(AtomicUsize::new(0));
            let runs = Runs::new(MemoryStore::new());
            let agent = runs.attach(release(&ran));
            agent.run("Deploy").run_id("r1").await.unwrap();
            let shown = runs.pending(&PendingFilter::default()).await.unwrap().items;
            runs.decide(&shown[0], Decision::Approve, "ada")
                .await
                .unwrap();

            // Someone else decided it: who, when, and that there is nothing to do.
            let late = runs
                .decide(&shown[0], Decision::Approve, "bob")
                .await
                .unwrap_err()
                .to_string();
            let prefix = "decision refused for call `call_1` of run `r1`: it was already \
                          decided by ada at ";
            assert!(late.starts_with(prefix), "{late}");
            assert!(late.ends_with(" UTC: nothing to do"), "{late}");
            let at = &late[prefix.len()..late.len() - " UTC: nothing to do".len()];
            assert_eq!(at.len(), "2026-12-05 20:40:01".len(), "{late}");

            // Shown at another version: load the run again and decide on its current version.
            let mut old = shown[0].clone();
            old.version += 7;
            let stale = runs
                .decide(&old, Decision::Approve, "bob")
                .await
                .unwrap_err()
                .to_string();
            assert!(
                stale.ends_with(
                    "the call's arguments or the run's version changed since it was shown: load \
                     the run again and decide on its current version"
                ),
                "{stale}"
            );

            // No longer waiting (resumed and done): nothing to do.
            agent.resume("r1").await.unwrap();
            let gone = runs
                .decide(&shown[0], Decision::Approve, "bob")
                .await
                .unwrap_err()
                .to_string();
            assert!(
                gone.ends_with(
                    "the call no longer waits for a decision (it was decided, and the run went \
                     on): nothing to do"
                ),
                "{gone}"
            );
            assert_eq!(ran.load(Ordering::SeqCst), 1);
        });
}

#[test]
fn a_resumer_that_lost_the_race_runs_nothing_and_is_told_so() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let ran = Arc::new(AtomicUsize::new(0));
            let runs = Runs::new(MemoryStore::new());
            let agent = runs.attach(release(&ran));
            agent.run("Deploy").run_id("r2").await.unwrap();
            let version = runs.load("r2").await.unwrap().version;
            let approve = || Decisions::for_run("r2").approve("call_1");
            let (a, b) = tokio::join!(
                agent
                    .resume("r2")
                    .decisions(approve())
                    .at(version)
                    .by("ada"),
                agent
                    .resume("r2")
                    .decisions(approve())
                    .at(version)
                    .by("bob"),
            );
            let lost = match (a, b) {
                (Ok(_), Err(lost)) | (Err(lost), Ok(_)) => lost,
                other => panic!("one resumer wins: {other:?}"),
            };
            assert!(lost.state.is_none(), "the loser started no run");
            let AgentError::Store(refused) = &lost.error else {
                panic!("a store's refusal: {lost}");
            };
            assert!(
                refused
                    .advice()
                    .contains("a resumer that lost this race has nothing to do"),
                "{lost}"
            );
            assert_eq!(ran.load(Ordering::SeqCst), 1);

            // Later, with the run finished: nothing to do either.
            let late = agent
                .resume("r2")
                .decisions(approve())
                .at(runs.load("r2").await.unwrap().version)
                .by("eve")
                .await
                .unwrap_err();
            let AgentError::Store(refused) = &late.error else {
                panic!("a store's refusal: {late}");
            };
            assert_eq!(
                refused.advice(),
                "it has finished, so there is nothing to do",
                "{late}"
            );
            assert_eq!(ran.load(Ordering::SeqCst), 1);
        });
}

#[test]
fn a_failed_runs_debug_is_short_and_its_state_is_still_there() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let model =
                ScriptedModel::new().error(ModelError::new(ModelErrorKind::BadRequest, "no"));
            let agent = Agent::builder("big").model(model).build().unwrap();
            let input = "x".repeat(4 * 1024 * 1024);
            let failed = agent.run(input).await.unwrap_err();
            let debug = format!("{failed:?}");
            assert!(
                debug.len() < 1024,
                "{} bytes: {}",
                debug.len(),
                &debug[..200]
            );
            let state = failed.state.as_deref().expect("the run had started");
            assert!(debug.contains(state.run_id()), "{debug}");
            assert!(debug.contains("bad_request"), "{debug}");
            assert!(debug.contains("messages: 1"), "{debug}");
            assert_eq!(failed.state().map(|s| s.messages().len()), Some(1));
            assert!(matches!(failed.error(), AgentError::Model(_)));

            // An error whose own text is huge is cut too.
            let mut huge = failed.clone();
            huge.error = AgentError::tool("y".repeat(1024 * 1024));
            assert!(format!("{huge:?}").len() < 1024);
        });
}

#[test]
fn a_pending_kind_prints_as_stored() {
    for (kind, text) in [
        (PendingKind::ToolApproval, "tool_approval"),
        (PendingKind::ExternalOutput, "external_output"),
        (PendingKind::Hitl, "hitl"),
        (PendingKind::OutcomeUnknown, "outcome_unknown"),
    ] {
        assert_eq!(kind.to_string(), text);
        assert_eq!(format!("{kind:?}"), text);
        assert_eq!(kind.as_str(), text);
    }
}
