//! Hostile stored state: a signature is accepted only in the one form the agent writes, a state
//! key cannot be empty (or short), and decisions name the run they answer, so one run's decisions
//! cannot be replayed on another run's state with the same call ids.

use crate::support::agent::{Counter, deploy_tool};
use phaseo_agent::{Agent, AgentError, Decisions, RunState, RunStatus, ScriptedModel};
use serde_json::{Value, json};

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

fn signed_agent(model: &ScriptedModel, deploy: &Counter) -> Agent {
    Agent::builder("release")
        .model(model.clone())
        .tool(deploy_tool(deploy))
        .state_key(KEY)
        .build()
        .unwrap()
}

/// A signed state paused on one gated call `c1`.
async fn paused_signed(deploy: &Counter) -> (ScriptedModel, RunState) {
    let model = ScriptedModel::new()
        .tool_call("c1", "deploy", json!({"environment": "staging"}))
        .text("done");
    let paused = signed_agent(&model, deploy).run("ship").await.unwrap();
    assert!(paused.state.is_signed());
    (model, paused.state)
}

/// The state with its signature text replaced by `edit(signature)`.
fn with_signature(state: &RunState, edit: impl Fn(&str) -> String) -> RunState {
    let mut value: Value = serde_json::from_str(&state.to_json()).unwrap();
    let signature = value["signature"].as_str().unwrap().to_owned();
    value["signature"] = json!(edit(&signature));
    RunState::from_json(&value.to_string()).unwrap()
}

// --- Point 7: the signature's text ---------------------------------------------------------------

#[tokio::test]
async fn a_signature_is_written_as_64_lower_case_hex_digits() {
    let (_, state) = paused_signed(&Counter::default()).await;
    let value: Value = serde_json::from_str(&state.to_json()).unwrap();
    let signature = value["signature"].as_str().unwrap();
    assert_eq!(signature.len(), 64, "{signature}");
    assert!(
        signature
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "{signature}"
    );
}

#[tokio::test]
async fn an_upper_case_signature_is_refused() {
    let deploy = Counter::default();
    let (model, state) = paused_signed(&deploy).await;
    let upper = with_signature(&state, str::to_ascii_uppercase);
    let err = signed_agent(&model, &deploy)
        .resume(&upper, Decisions::for_run(state.run_id()).approve("c1"))
        .await
        .unwrap_err();
    assert!(matches!(err.error, AgentError::StateSignature(_)), "{err}");
    assert!(err.to_string().contains("lower-case hex"), "{err}");
    assert_eq!(deploy.get(), 0);
}

#[tokio::test]
async fn a_signature_with_plus_signs_is_refused() {
    let deploy = Counter::default();
    let (model, state) = paused_signed(&deploy).await;
    // `u8::from_str_radix("+a", 16)` is `Ok(10)`: a `+` in front of every second digit that is a
    // `0` keeps the bytes, and so the MAC, the same.
    let plus_first = with_signature(&state, |s| format!("+{}", &s[1..]));
    let plus_extra = with_signature(&state, |s| format!("+{s}"));
    for (what, forged) in [("replacing", plus_first), ("added", plus_extra)] {
        let err = signed_agent(&model, &deploy)
            .resume(&forged, Decisions::for_run(state.run_id()).approve("c1"))
            .await
            .unwrap_err();
        assert!(
            matches!(err.error, AgentError::StateSignature(_)),
            "{what}: {err}"
        );
    }
    assert_eq!(deploy.get(), 0);
}

#[tokio::test]
async fn a_plus_sign_in_place_of_a_zero_digit_no_longer_verifies() {
    // Find a state whose signature has a byte below 0x10 (a leading `0` digit), so that `+` in its
    // place decodes to the same byte under `from_str_radix`; the run id changes the signature.
    let deploy = Counter::default();
    for attempt in 0..64 {
        let model = ScriptedModel::new()
            .tool_call("c1", "deploy", json!({"environment": "staging"}))
            .text("done");
        let agent = signed_agent(&model, &deploy);
        let paused = agent
            .run("ship")
            .run_id(format!("run-{attempt}"))
            .await
            .unwrap();
        let value: Value = serde_json::from_str(&paused.state.to_json()).unwrap();
        let signature = value["signature"].as_str().unwrap().to_owned();
        let Some(pair) = (0..signature.len())
            .step_by(2)
            .find(|&i| signature.as_bytes()[i] == b'0')
        else {
            continue;
        };
        let forged = with_signature(&paused.state, |s| {
            format!("{}+{}", &s[..pair], &s[pair + 1..])
        });
        let err = agent
            .resume(
                &forged,
                Decisions::for_run(paused.state.run_id()).approve("c1"),
            )
            .await
            .unwrap_err();
        assert!(matches!(err.error, AgentError::StateSignature(_)), "{err}");
        assert!(err.to_string().contains("lower-case hex"), "{err}");
        assert_eq!(deploy.get(), 0);
        return;
    }
    panic!("no signature with a leading zero digit in 64 runs");
}

#[tokio::test]
async fn signatures_of_the_wrong_length_or_alphabet_are_refused() {
    let deploy = Counter::default();
    let (model, state) = paused_signed(&deploy).await;
    type Edit = (&'static str, fn(&str) -> String);
    let edits: [Edit; 6] = [
        ("empty", |_| String::new()),
        ("truncated", |s| s[..62].to_owned()),
        ("doubled", |s| format!("{s}{s}")),
        ("spaces", |s| format!(" {}", &s[1..])),
        ("0x prefix", |s| format!("0x{}", &s[2..])),
        ("non-ascii", |s| format!("é{}", &s[2..])),
    ];
    for (what, edit) in edits {
        let err = signed_agent(&model, &deploy)
            .resume(
                &with_signature(&state, edit),
                Decisions::for_run(state.run_id()).approve("c1"),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err.error, AgentError::StateSignature(_)),
            "{what}: {err}"
        );
    }
    assert_eq!(deploy.get(), 0);
}

#[test]
fn an_empty_state_key_is_refused_at_build() {
    let err = Agent::builder("release")
        .model(ScriptedModel::new())
        .state_key(b"")
        .build()
        .expect_err("an empty key is refused");
    assert!(matches!(err, AgentError::InvalidAgent(_)), "{err}");
    assert!(err.to_string().contains("must not be empty"), "{err}");
}

#[test]
fn a_short_state_key_is_refused_at_build() {
    for key in [&b"k"[..], b"0123456789abcdef", &[7u8; 31]] {
        let err = Agent::builder("release")
            .model(ScriptedModel::new())
            .state_key(key)
            .build()
            .expect_err("a short key is refused");
        assert!(matches!(err, AgentError::InvalidAgent(_)), "{err}");
        assert!(err.to_string().contains("at least 32 bytes"), "{err}");
        // The message never quotes the key.
        assert!(!err.to_string().contains("0123456789abcdef"), "{err}");
    }
    let at_least = Agent::builder("release")
        .model(ScriptedModel::new())
        .state_key([7u8; 32])
        .build();
    assert!(at_least.is_ok());
}

#[tokio::test]
async fn a_correct_signature_is_accepted_also_after_a_json_round_trip() {
    let deploy = Counter::default();
    let (model, state) = paused_signed(&deploy).await;
    let done = signed_agent(&model, &deploy)
        .resume(&state, Decisions::for_run(state.run_id()).approve("c1"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("done"));

    let deploy = Counter::default();
    let (model, state) = paused_signed(&deploy).await;
    let reread = RunState::from_json(&state.to_json()).unwrap();
    let reread = RunState::from_json(&reread.to_json_pretty()).unwrap();
    assert_eq!(reread, state);
    let done = signed_agent(&model, &deploy)
        .resume(&reread, Decisions::for_run(reread.run_id()).approve("c1"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("done"));
    assert!(done.state.is_signed());
    assert_eq!(deploy.get(), 1);
}

// --- Point 8: decisions name their run -----------------------------------------------------------

/// Two runs of one agent, each paused on a gated call with the same id `call_1`: run A deploys
/// staging, run B deploys production.
async fn two_runs(deploy: &Counter) -> (Agent, RunState, RunState) {
    let model = ScriptedModel::new();
    let agent = signed_agent(&model, deploy);
    let mut states = Vec::new();
    for (run_id, environment) in [("run-a", "staging"), ("run-b", "production")] {
        let _ = model
            .clone()
            .tool_call("call_1", "deploy", json!({"environment": environment}));
        let paused = agent.run("ship").run_id(run_id).await.unwrap();
        assert_eq!(paused.state.run_id(), run_id);
        assert_eq!(paused.pending()[0].call.id, "call_1");
        states.push(paused.state);
    }
    // Each resume below ends its run with one answer.
    let _ = model.clone().text("done").text("done");
    let b = states.pop().unwrap();
    let a = states.pop().unwrap();
    (agent, a, b)
}

#[tokio::test]
async fn decisions_for_one_run_are_refused_on_another_runs_state_with_the_same_call_ids() {
    let deploy = Counter::default();
    let (agent, a, b) = two_runs(&deploy).await;
    let before = b.to_json();
    let for_a = Decisions::for_run(a.run_id()).approve("call_1");
    let err = agent.resume(&b, for_a.clone()).await.unwrap_err();
    assert_eq!(
        err.error,
        AgentError::WrongRun {
            expected: "run-b".into(),
            found: "run-a".into(),
        }
    );
    assert!(err.state.is_none(), "a refused resume starts no run");
    assert!(err.to_string().contains("run-a"), "{err}");
    assert!(err.to_string().contains("run-b"), "{err}");
    assert_eq!(b.to_json(), before, "the state is unchanged, byte for byte");
    assert_eq!(b.status(), RunStatus::WaitingForHuman);
    assert_eq!(deploy.get(), 0, "production was not deployed");

    // Stored and read back, the state is still refused, and still resumable with its own decisions.
    let stored = RunState::from_json(&before).unwrap();
    let err = agent.resume(&stored, for_a.clone()).await.unwrap_err();
    assert!(matches!(err.error, AgentError::WrongRun { .. }), "{err}");
    assert_eq!(deploy.get(), 0);

    // The stream reports the refusal and ends.
    use futures::StreamExt;
    let names: Vec<&str> = agent
        .resume(&b, for_a)
        .stream()
        .map(|e| e.name())
        .collect()
        .await;
    assert_eq!(names, ["run.refused"]);
    assert_eq!(deploy.get(), 0);
}

#[tokio::test]
async fn decisions_bound_to_the_right_run_are_accepted() {
    let deploy = Counter::default();
    let (agent, a, b) = two_runs(&deploy).await;
    let decisions = Decisions::for_run(a.run_id()).approve("call_1");
    assert_eq!(decisions.run_id(), Some("run-a"));
    let done = agent.resume(&a, decisions).await.unwrap();
    assert_eq!(
        done.state.tool_result("call_1"),
        Some(r#"{"deployed":true,"environment":"staging"}"#)
    );
    let rejected = agent
        .resume(
            &b,
            Decisions::for_run(b.run_id()).reject("call_1", "not production"),
        )
        .await
        .unwrap();
    assert!(
        rejected
            .state
            .tool_result("call_1")
            .unwrap()
            .contains("not production")
    );
    assert_eq!(deploy.get(), 1);
}

#[tokio::test]
async fn unbound_decisions_are_still_accepted_by_call_id_alone() {
    // Documented: `Decisions::new()` names no run; the caller vouches that the decisions answer
    // this state (as when the decision is made right next to it).
    let deploy = Counter::default();
    let (agent, a, _) = two_runs(&deploy).await;
    let decisions = Decisions::new().approve("call_1");
    assert_eq!(decisions.run_id(), None);
    let done = agent.resume(&a, decisions).await.unwrap();
    assert!(done.state.tool_result("call_1").is_some());
    assert_eq!(deploy.get(), 1);
}

#[tokio::test]
async fn the_run_check_comes_before_the_other_decision_checks() {
    // Another run's decisions are refused as such, even when their call ids would not fit.
    let deploy = Counter::default();
    let (agent, _, b) = two_runs(&deploy).await;
    let err = agent
        .resume(&b, Decisions::for_run("run-a").approve("call_9"))
        .await
        .unwrap_err();
    assert!(matches!(err.error, AgentError::WrongRun { .. }), "{err}");
    let err = agent
        .resume(&b, Decisions::for_run("run-a"))
        .await
        .unwrap_err();
    assert!(matches!(err.error, AgentError::WrongRun { .. }), "{err}");
    assert_eq!(deploy.get(), 0);
}

#[test]
fn decisions_keep_their_serde_form_and_carry_the_run_when_bound() {
    // Unbound decisions serialise as before: a list of `[call id, decision]` pairs.
    let unbound = Decisions::new().approve("c1").reject("c2", "no");
    let text = serde_json::to_string(&unbound).unwrap();
    assert_eq!(
        text,
        r#"[["c1",{"decision":"approve"}],["c2",{"decision":"reject","message":"no"}]]"#
    );
    assert_eq!(serde_json::from_str::<Decisions>(&text).unwrap(), unbound);

    // Bound decisions carry their run.
    let bound = Decisions::for_run("run-a").approve("c1");
    let value = serde_json::to_value(&bound).unwrap();
    assert_eq!(
        value,
        json!({"run_id": "run-a", "decisions": [["c1", {"decision": "approve"}]]})
    );
    let back: Decisions = serde_json::from_value(value).unwrap();
    assert_eq!(back, bound);
    assert_eq!(back.run_id(), Some("run-a"));

    // A misspelt field would silently unbind them: refused.
    let typo = json!({"run": "run-a", "decisions": []});
    assert!(serde_json::from_value::<Decisions>(typo).is_err());
    let no_run = json!({"decisions": []});
    assert!(serde_json::from_value::<Decisions>(no_run).is_err());
}
