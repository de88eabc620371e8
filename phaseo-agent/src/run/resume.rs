//! Resuming a paused run: decisions checked against the pending calls and turned into plans, before
//! anything runs or changes.

use std::collections::HashMap;

use crate::error::AgentError;
use crate::model::message::ToolCall;
use crate::run::execute::Effects;
use crate::run::runner::{Answered, Plan, Runner, rejection_content};
use crate::run::state::{Decision, Decisions, PendingCall, PendingKind};
use crate::tool::call::Parsed;
use crate::tool::context::ToolContext;

impl Runner {
    /// Validates decisions against the run (the run they name, if any) and its paused turn, and
    /// turns them into plans, changing nothing.
    #[allow(clippy::type_complexity)]
    pub(crate) async fn plan_resume(
        &self,
        decisions: Decisions,
    ) -> Result<(Vec<(String, Plan)>, Vec<String>), AgentError> {
        let (run_id, decisions) = decisions.into_parts();
        // Decisions that name a run answer that run only: call ids repeat across runs. First, so
        // another run's decisions are reported as such, whatever their call ids.
        if let Some(run_id) = run_id
            && run_id != self.state.run_id
        {
            return Err(AgentError::WrongRun {
                expected: self.state.run_id.clone(),
                found: run_id,
            });
        }
        let pending_ids: Vec<String> = self
            .state
            .pending
            .iter()
            .map(|p| p.call.id.clone())
            .collect();
        // Each decision finds its call in one lookup: a turn may have many calls.
        let slots: HashMap<&str, usize> = pending_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let mut chosen: Vec<Option<Decision>> = vec![None; self.state.pending.len()];
        for (call_id, decision) in decisions {
            let Some(&slot) = slots.get(call_id.as_str()) else {
                return Err(AgentError::NotPending {
                    call_id,
                    pending: pending_ids,
                });
            };
            if chosen[slot].is_some() {
                return Err(AgentError::DuplicateDecision(call_id));
            }
            chosen[slot] = Some(decision);
        }
        // Every pending call needs its own decision: nothing is approved by default.
        let Some(chosen) = chosen.iter().cloned().collect::<Option<Vec<Decision>>>() else {
            let missing = pending_ids
                .iter()
                .zip(&chosen)
                .filter(|(_, d)| d.is_none())
                .map(|(id, _)| id.clone())
                .collect();
            return Err(AgentError::MissingDecision { call_ids: missing });
        };
        let step_index = self.state.paused_turn.as_ref().map_or(0, |t| t.step_index);
        let mut plans = Vec::new();
        let mut always = Vec::new();
        for (pending, decision) in self.state.pending.iter().zip(chosen) {
            if decision == Decision::ApproveAlways {
                always.push(pending.call.name.clone());
            }
            plans.push((
                pending.call.id.clone(),
                self.plan_decision(step_index, pending, decision).await?,
            ));
        }
        Ok((plans, always))
    }

    async fn plan_decision(
        &self,
        step_index: usize,
        pending: &PendingCall,
        decision: Decision,
    ) -> Result<Plan, AgentError> {
        let call = &pending.call;
        let index = self
            .inner()
            .index
            .get(&call.name)
            .copied()
            .ok_or_else(|| AgentError::UnknownTool(call.name.clone()))?;
        let tool = &self.inner().tools[index];
        let mismatch = |hint| AgentError::DecisionMismatch {
            call_id: call.id.clone(),
            decision: decision.name(),
            kind: pending.kind.as_str(),
            hint,
        };
        if let Some(hint) = refused_for(pending.kind, &decision) {
            return Err(mismatch(hint));
        }
        let runs = matches!(
            decision,
            Decision::Approve
                | Decision::ApproveWithArguments { .. }
                | Decision::ApproveAlways
                | Decision::RerunAfterDoubt
        );
        if runs
            && !tool.executable
            && matches!(
                pending.kind,
                PendingKind::Hitl | PendingKind::OutcomeUnknown
            )
        {
            return Err(mismatch(
                "this tool has no executor: supply its output with `Decision::Output`",
            ));
        }
        // Running a call whose outcome was lost again is a new attempt, with a new idempotency key.
        let attempt = match pending.kind {
            PendingKind::OutcomeUnknown => pending.attempt.saturating_add(1),
            _ => pending.attempt,
        };
        match decision {
            Decision::Reject { message } => Ok(Plan::Done {
                step: self.done_step(
                    step_index,
                    call,
                    rejection_content(&message),
                    true,
                    Some(index),
                ),
                error: Some(format!("Rejected by a person: {message}").into_boxed_str()),
                // A rejected call produced nothing: no next-turn override.
                effects: Effects::default(),
                how: Answered::Rejected,
            }),
            Decision::Output { output } => {
                let output = tool.check_supplied(output)?;
                Ok(Plan::Done {
                    step: self.done_step(step_index, call, output.to_string(), false, Some(index)),
                    error: None,
                    // A supplied output is the call's result: its tool's next-turn override runs.
                    effects: Effects::of(index, tool, call, None),
                    how: Answered::Result,
                })
            }
            Decision::ApproveWithArguments { arguments } => {
                let text = arguments.to_string();
                let parsed = tool.parse_call(&text)?;
                let edited = ToolCall {
                    arguments: text,
                    ..call.clone()
                };
                let ctx = self.context_at(step_index, edited, Some(index), attempt);
                self.approved(pending.kind, index, parsed, ctx).await
            }
            Decision::Approve | Decision::ApproveAlways | Decision::RerunAfterDoubt => {
                match tool.parse_call(&call.arguments) {
                    Ok(parsed) => {
                        let ctx = self.context_at(step_index, call.clone(), Some(index), attempt);
                        self.approved(pending.kind, index, parsed, ctx).await
                    }
                    Err(error) => {
                        let policy = self.policy_for(index, &error);
                        self.refuse(step_index, call, error, policy)
                    }
                }
            }
        }
    }

    /// An approved call: a call that waited for approval goes on to the next stage (a review, the
    /// interactive hook, or running); a call handed to a person and approved by them runs.
    async fn approved(
        &self,
        kind: PendingKind,
        index: usize,
        parsed: Parsed,
        ctx: ToolContext,
    ) -> Result<Plan, AgentError> {
        match kind {
            // The approval was the call's review.
            PendingKind::ToolApproval => self.after_approval(index, parsed, ctx, true).await,
            _ => Ok(Plan::Run {
                tool: index,
                parsed,
                ctx,
            }),
        }
    }
}

/// Why a call waiting as `kind` does not take `decision`, whatever its tool (`None`: it may). The
/// resume checks this, and so does every path that records a decision before a resume
/// ([`Runs::decide`](crate::durable::Runs::decide), the inbox's forms and links), so a decision the
/// run would refuse is never recorded.
pub(crate) fn refused_for(kind: PendingKind, decision: &Decision) -> Option<&'static str> {
    let runs = matches!(
        decision,
        Decision::Approve | Decision::ApproveWithArguments { .. } | Decision::ApproveAlways
    );
    match kind {
        // An in-doubt call is run again only on the decision that says a person checked: an
        // approval (one click, a batch, a link) must not repeat a side effect that may have
        // happened.
        PendingKind::OutcomeUnknown if runs => Some(
            "its outcome is unknown: check with the attempt's idempotency key whether it \
             happened, then supply its outcome with `Decision::Output`, reject it, or run it \
             again with `Decision::RerunAfterDoubt`",
        ),
        PendingKind::OutcomeUnknown => None,
        _ if *decision == Decision::RerunAfterDoubt => Some(
            "only a call whose outcome a crash left unknown is run again with \
             `Decision::RerunAfterDoubt`",
        ),
        PendingKind::ToolApproval if matches!(decision, Decision::Output { .. }) => {
            Some("approve or reject a call that waits for approval")
        }
        PendingKind::ExternalOutput if runs => {
            Some("an external tool has no executor: supply its output with `Decision::Output`")
        }
        _ => None,
    }
}
