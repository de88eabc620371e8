//! The pages of whole runs: a run's own page (what happened after a decision: its status, its
//! calls and their results, the final answer, or the failure and what a person can do), and the
//! list's sections of runs that need a person although no call waits: failed runs, and runs
//! whose process stopped that this inbox cannot take up.

use std::fmt::Write;

use crate::durable::StoredRun;
use crate::store::{AbandonedRun, StoredStatus};

use super::html::{escape, pct, show, utc};
use super::pages::{item_path, kind_words};

/// The most of a call's result the run page shows; the rest is cut, with a note.
const MAX_RESULT_SHOWN: usize = 2000;

/// A run's status as people read it.
pub(crate) fn status_words(status: StoredStatus) -> &'static str {
    match status {
        StoredStatus::Ready => "queued: a worker will run it",
        StoredStatus::Running => "running",
        StoredStatus::Paused => "waiting for a decision",
        StoredStatus::InDoubt => "waiting: a call's outcome is unknown",
        StoredStatus::Completed => "completed",
        StoredStatus::Failed => "failed",
    }
}

/// The path of a run's page.
pub(crate) fn run_path(base: &str, run: &str) -> String {
    format!("{base}/runs/{}", pct(run))
}

/// What the run page shows besides the stored run.
pub(crate) struct RunView<'a> {
    pub(crate) stored: &'a StoredRun,
    /// The inbox's own attempt to resume the run in the background, when it failed: when, and
    /// why.
    pub(crate) background_failure: Option<&'a (i64, String)>,
    /// Whether the run's agent is attached to this inbox (it can be retried here).
    pub(crate) attached: bool,
    /// Whether the person may decide (and so retry).
    pub(crate) may_decide: bool,
    pub(crate) flash: Option<&'a str>,
}

/// A text cut to `max` bytes at a character boundary, with a note of how much was left out.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… ({} more bytes not shown)",
        &text[..end],
        text.len() - end
    )
}

/// The run page's body.
pub(crate) fn run(view: &RunView<'_>, base: &str, csrf: &str) -> String {
    let stored = view.stored;
    let state = &stored.state;
    let run_id = state.run_id();
    let mut body = String::new();
    if let Some(flash) = view.flash {
        let _ = write!(
            body,
            "<p id=\"flash\" class=\"ok\" role=\"status\">{}</p>",
            escape(flash)
        );
    }
    let _ = write!(
        body,
        "<dl id=\"run\"><dt>Run</dt><dd id=\"run-id\">{}</dd><dt>Agent</dt><dd>{}</dd>\
         <dt>Status</dt><dd id=\"run-status\" data-status=\"{}\">{}</dd></dl>",
        show(run_id),
        show(state.agent_id()),
        stored.status.as_str(),
        status_words(stored.status),
    );
    if let Some((at_ms, error)) = view.background_failure {
        let _ = write!(
            body,
            "<section id=\"resume-failure\" class=\"error\" role=\"alert\"><h2>The inbox could \
             not resume this run</h2><p>At {}, resuming it after the decisions failed:</p>\
             <pre>{}</pre><p>The decisions are recorded. A process with this run's agent resumes \
             it; if this persists, tell whoever runs the service.</p></section>",
            utc(*at_ms),
            show(error)
        );
    }
    match stored.status {
        StoredStatus::Failed => {
            let why = stored
                .failure
                .as_deref()
                .unwrap_or("(not recorded: the run failed before failures were journaled)");
            let _ = write!(
                body,
                "<section id=\"failure\" class=\"error\"><h2>The run failed</h2><pre>{}</pre>",
                show(why)
            );
            if view.may_decide && view.attached {
                let _ = write!(
                    body,
                    "<p>Retrying asks the model again from where the run failed. Calls that \
                     finished do not run again.</p>\
                     <form id=\"retry\" method=\"post\" action=\"{}/retry\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                     <input type=\"hidden\" name=\"version\" value=\"{}\">\
                     <button id=\"retry-run\">Retry the run</button></form>",
                    escape(&run_path(base, run_id)),
                    escape(csrf),
                    stored.version
                );
            } else if view.may_decide {
                body.push_str(
                    "<p>This inbox does not run this run's agent, so it cannot retry it: a \
                     process with the agent can (<code>DurableAgent::retry</code>).</p>",
                );
            } else {
                body.push_str("<p>An approver can retry it.</p>");
            }
            body.push_str("</section>");
        }
        StoredStatus::Completed => {
            let _ = write!(
                body,
                "<section id=\"answer\"><h2>Final answer</h2><pre>{}</pre></section>",
                show(state.output().unwrap_or_default())
            );
        }
        StoredStatus::Running | StoredStatus::Ready => {
            body.push_str(
                "<p id=\"running\">The run is under way. This page shows what it did so far; \
                 reload it to see more.</p>",
            );
        }
        StoredStatus::Paused | StoredStatus::InDoubt => {}
    }
    let waiting: Vec<_> = stored
        .pending
        .iter()
        .filter(|p| p.decision.is_none())
        .collect();
    if !waiting.is_empty() {
        body.push_str("<section id=\"waiting\"><h2>Waiting for a decision</h2><ul>");
        for row in waiting {
            let _ = write!(
                body,
                "<li><a href=\"{}\">{} ({})</a>: {}</li>",
                escape(&item_path(base, &row.run_id, &row.call_id)),
                show(&row.tool),
                show(&row.call_id),
                show(kind_words(&row.kind)),
            );
        }
        body.push_str("</ul></section>");
    }
    body.push_str("<section id=\"calls\"><h2>Calls and their results</h2>");
    if state.steps().is_empty() {
        body.push_str("<p>No call has finished yet.</p>");
    } else {
        body.push_str(
            "<table><thead><tr><th scope=\"col\">Tool</th><th scope=\"col\">Call</th>\
             <th scope=\"col\">Result</th></tr></thead><tbody>",
        );
        for step in state.steps() {
            let class = if step.is_error {
                " class=\"error\""
            } else {
                ""
            };
            let _ = write!(
                body,
                "<tr{class}><td>{}</td><td>{}</td><td><pre>{}{}</pre></td></tr>",
                show(&step.tool),
                show(&step.call_id),
                if step.is_error { "error: " } else { "" },
                show(&cut(&step.content, MAX_RESULT_SHOWN)),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("</section>");
    let _ = write!(
        body,
        "<p><a href=\"{}/audit?run={}\">Decisions on this run</a></p>",
        escape(base),
        pct(run_id)
    );
    body
}

/// A failed run in the list.
pub(crate) struct FailedView {
    pub(crate) run_id: String,
    pub(crate) agent_id: String,
    pub(crate) updated_ms: i64,
    pub(crate) failure: Option<String>,
}

/// The list's sections of runs that need a person although no call of theirs waits: failed
/// runs (for those who may decide), and runs whose process stopped that no process here takes
/// up.
pub(crate) fn needing_a_person(
    failed: &[FailedView],
    stuck: &[(AbandonedRun, bool)],
    base: &str,
) -> String {
    let mut body = String::new();
    if !failed.is_empty() {
        body.push_str(
            "<section id=\"failed\"><h2>Failed runs</h2><table><thead><tr>\
             <th scope=\"col\">Run</th><th scope=\"col\">Agent</th>\
             <th scope=\"col\">Failed at</th><th scope=\"col\">Why</th></tr></thead><tbody>",
        );
        for run in failed {
            let why = run.failure.as_deref().unwrap_or("(not recorded)");
            let _ = write!(
                body,
                "<tr class=\"failed-run\"><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td>\
                 <td>{}</td></tr>",
                escape(&run_path(base, &run.run_id)),
                show(&run.run_id),
                show(&run.agent_id),
                utc(run.updated_ms),
                show(&cut(why, 300)),
            );
        }
        body.push_str("</tbody></table></section>");
    }
    if !stuck.is_empty() {
        body.push_str(
            "<section id=\"stuck\"><h2>Runs whose process stopped</h2><table><thead><tr>\
             <th scope=\"col\">Run</th><th scope=\"col\">Agent</th>\
             <th scope=\"col\">Last written</th><th scope=\"col\">What happens</th></tr>\
             </thead><tbody>",
        );
        for (run, attached) in stuck {
            let what = if *attached {
                "This inbox takes it up at its next check."
            } else {
                "Stuck: this inbox does not run this agent. Start a process with it, which takes \
                 the run up (Runs::recover_abandoned)."
            };
            let _ = write!(
                body,
                "<tr class=\"stuck-run\"><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td>\
                 <td>{what}</td></tr>",
                escape(&run_path(base, &run.run_id)),
                show(&run.run_id),
                show(&run.agent_id),
                utc(run.updated_ms),
            );
        }
        body.push_str("</tbody></table></section>");
    }
    body
}
