//! The inbox's pages as HTML: the list, one item, a link's confirmation, and the
//! sign-in form. Every value from a run (ids, arguments, messages, names) goes through
//! [`escape`]; nothing here reads the store or decides anything.

use std::fmt::Write;

use crate::durable::approvals::Choice;
use crate::inbox::html::{
    HIDDEN_NOTE, age, escape, has_hidden, hidden_note, home, json_visible, pct, pretty, show,
    show_attr, utc,
};
use crate::model::message::Message;

use crate::store::backend::PendingRow;
use crate::store::listing::{DamagedRow, Page};

/// The forms' actions, and which kinds of waiting call each fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Approve,
    /// Run a call in doubt again, once the person ticked that it did not happen.
    Rerun,
    ApproveAlways,
    Reject,
    Edit,
    Output,
}

impl Action {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "approve" => Action::Approve,
            "rerun_after_doubt" => Action::Rerun,
            "approve_always" => Action::ApproveAlways,
            "reject" => Action::Reject,
            "edit" => Action::Edit,
            "output" => Action::Output,
            _ => return None,
        })
    }

    /// Whether a call waiting as `kind` takes this decision: the approvals service's rule
    /// ([`Choice::fits`]), for which buttons an item's page shows.
    pub(crate) fn fits(self, kind: &str) -> bool {
        let choice = match self {
            Action::Approve => Choice::Approve,
            Action::Rerun => Choice::RerunAfterDoubt { checked: true },
            Action::ApproveAlways => Choice::ApproveAlways,
            Action::Reject => Choice::Reject {
                message: String::new(),
            },
            Action::Edit => Choice::Edit {
                arguments: String::new(),
            },
            Action::Output => Choice::Output {
                output: String::new(),
            },
        };
        choice.fits(kind)
    }
}

/// The value a batch form or the list carries for one item: `run/call/version/digest`, the ids
/// percent-encoded.
pub(crate) fn item_value(row: &PendingRow) -> String {
    format!(
        "{}/{}/{}/{}",
        pct(&row.run_id),
        pct(&row.call_id),
        row.version,
        row.digest
    )
}

/// Every kind of waiting call, as stored: what the list's filter takes.
pub(crate) const KINDS: [&str; 4] = [
    "tool_approval",
    "external_output",
    "hitl",
    "outcome_unknown",
];

/// Why a call waits, in words for people (`kind` as stored); an unknown kind as it is.
pub(crate) fn kind_words(kind: &str) -> &str {
    match kind {
        "tool_approval" => "Needs approval",
        "external_output" => "Waiting for an outside result",
        "hitl" => "Handed to a person",
        "outcome_unknown" => "Outcome unknown: may or may not have happened",
        other => other,
    }
}

/// The path of an item's page, under `base`.
pub(crate) fn item_path(base: &str, run: &str, call: &str) -> String {
    format!("{base}/runs/{}/calls/{}", pct(run), pct(call))
}

/// One row of the list's table (also what the event stream sends), on one line; with a
/// checkbox for the batch form when `selectable` (a viewer decides nothing, so sees none; the
/// table then has no column for it).
pub(crate) fn item_row(
    row: &PendingRow,
    summary: Option<&str>,
    base: &str,
    now_ms: i64,
    selectable: bool,
) -> String {
    let mut args: String = row.arguments.chars().take(160).collect();
    if args.len() < row.arguments.len() {
        args.push('…');
    }
    // A call in doubt is settled on its own page, never in a batch: it has no checkbox.
    let select = if selectable && row.kind == "outcome_unknown" {
        "<td class=\"select-cell\"><span class=\"no-batch\" title=\"Settled on its own page, \
         never in a batch\">&#9888;</span></td>"
            .to_owned()
    } else if selectable {
        // What tells this item from the others: the tool, the run, and what the call does (its
        // summary, else the start of its arguments); the call's id repeats from run to run.
        let what = summary.unwrap_or(&row.arguments);
        let mut what_short: String = what.chars().take(80).collect();
        if what_short.len() < what.len() {
            what_short.push('…');
        }
        format!(
            "<td class=\"select-cell\"><input type=\"checkbox\" class=\"select\" name=\"item\" \
             form=\"batch\" value=\"{value}\" aria-label=\"Select {tool} in run {run}: {what}\"></td>",
            value = escape(&item_value(row)),
            tool = show_attr(&row.tool),
            run = show_attr(&row.run_id),
            what = show_attr(&what_short),
        )
    } else {
        String::new()
    };
    format!(
        "<tr class=\"item\" data-run=\"{run}\" data-call=\"{call}\" data-kind=\"{kind}\" \
         data-tool=\"{tool}\">{select}<td class=\"tool\"><a class=\"open\" href=\"{href}\">{tool}</a>\
         </td><td class=\"what\">{summary}<code class=\"args\">{args}</code>{note}</td><td class=\"kind\">{words}\
         </td><td class=\"agent\">{agent} <span class=\"run\">{run_text}</span></td><td class=\"since\" \
         title=\"{at}\">{ago} ago</td></tr>",
        run = escape(&row.run_id),
        call = escape(&row.call_id),
        kind = escape(&row.kind),
        words = escape(kind_words(&row.kind)),
        tool = escape(&row.tool),
        agent = show(&row.agent_id),
        run_text = show(&row.run_id),
        href = escape(&item_path(base, &row.run_id, &row.call_id)),
        at = utc(row.since_ms),
        ago = age(row.since_ms, now_ms),
        args = show(&args),
        summary = summary
            .map(|s| format!("<span class=\"summary\">{}</span> ", show(s)))
            .unwrap_or_default(),
        note = if has_hidden(&args) || summary.is_some_and(has_hidden) {
            format!("<span class=\"hidden-note\" role=\"note\">{HIDDEN_NOTE}</span>")
        } else {
            String::new()
        },
    )
}

/// One row of the list for a waiting row the store could not read back as written: "damaged:
/// run X", with what is wrong. No checkbox and no link: it cannot be decided until someone
/// repairs or removes it.
pub(crate) fn damaged_row(row: &DamagedRow, selectable: bool) -> String {
    format!(
        "<tr class=\"item damaged\" data-run=\"{run_attr}\" data-damaged=\"true\">\
         <td colspan=\"{span}\"><span class=\"kind\">damaged: run {run}</span> \
         <span class=\"why\">{why}; it cannot be decided here until the row is repaired or \
         removed</span></td></tr>",
        run = show(&row.run_id),
        run_attr = show_attr(&row.run_id),
        why = show(&row.to_string()),
        span = if selectable { 6 } else { 5 },
    )
}

/// The list's filters, as the query string carries them.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub(crate) struct ListQuery {
    pub(crate) agent: Option<String>,
    pub(crate) tool: Option<String>,
    pub(crate) kind: Option<String>,
    /// Seconds.
    pub(crate) older_than: Option<String>,
    pub(crate) after: Option<String>,
    pub(crate) flash: Option<String>,
}

impl ListQuery {
    /// A filter's value, `None` when absent or blank.
    pub(crate) fn get(field: &Option<String>) -> Option<String> {
        field
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    }

    fn query_string(&self, after: &str) -> String {
        let mut out = String::new();
        for (name, value) in [
            ("agent", &self.agent),
            ("tool", &self.tool),
            ("kind", &self.kind),
            ("older_than", &self.older_than),
        ] {
            if let Some(value) = ListQuery::get(value) {
                let _ = write!(out, "{name}={}&", pct(&value));
            }
        }
        let _ = write!(out, "after={}", pct(after));
        out
    }
}

/// The list page's body: the page's items, each with its tool's summary if it has one, and its
/// damaged rows (which cannot be decided).
pub(crate) fn list(
    page: &Page<(PendingRow, Option<String>)>,
    query: &ListQuery,
    base: &str,
    csrf: &str,
    now_ms: i64,
    may_decide: bool,
) -> String {
    let (rows, damaged, next) = (&page.items, &page.damaged, page.next.as_deref());
    let mut body = String::new();
    if let Some(flash) = ListQuery::get(&query.flash) {
        let text = match flash.as_str() {
            "decided" => "Decision recorded.",
            "signed-out" => "Signed out.",
            _ => "Done.",
        };
        let _ = write!(
            body,
            "<p id=\"flash\" class=\"ok\" role=\"status\">{text}</p>"
        );
    }
    let value = |v: &Option<String>| escape(&ListQuery::get(v).unwrap_or_default());
    let kind = ListQuery::get(&query.kind).unwrap_or_default();
    let options: String = std::iter::once(&"")
        .chain(KINDS.iter())
        .map(|k| {
            let selected = if *k == kind { " selected" } else { "" };
            let label = if k.is_empty() { "any" } else { kind_words(k) };
            format!("<option value=\"{k}\"{selected}>{label}</option>")
        })
        .collect();
    let _ = write!(
        body,
        "<form id=\"filters\" method=\"get\" action=\"{home}\">\
         <label>Agent <input name=\"agent\" value=\"{}\"></label> \
         <label>Tool <input name=\"tool\" value=\"{}\"></label> \
         <label>Kind <select name=\"kind\">{options}</select></label> \
         <label>Waiting more than <input name=\"older_than\" inputmode=\"numeric\" size=\"6\" \
         value=\"{}\"> s</label> <button id=\"filter\">Filter</button></form>",
        value(&query.agent),
        value(&query.tool),
        value(&query.older_than),
        home = escape(&home(base)),
    );
    if rows.is_empty() && damaged.is_empty() {
        body.push_str("<p id=\"empty\">Nothing waits for a decision.</p>");
    }
    // Column headers; the rows' cells in the same order (`item_row`).
    body.push_str("<table id=\"items\"><thead><tr>");
    if may_decide {
        body.push_str("<th scope=\"col\">Select</th>");
    }
    body.push_str(
        "<th scope=\"col\">Tool</th><th scope=\"col\">What it would do</th>\
         <th scope=\"col\">Why it waits</th><th scope=\"col\">Agent and run</th>\
         <th scope=\"col\">Waiting for</th></tr></thead><tbody>",
    );
    for (row, summary) in rows {
        body.push_str(&item_row(row, summary.as_deref(), base, now_ms, may_decide));
    }
    for row in damaged {
        body.push_str(&damaged_row(row, may_decide));
    }
    body.push_str("</tbody></table>");
    if let Some(next) = next {
        let _ = write!(
            body,
            "<p><a id=\"next\" href=\"{}?{}\">Next page</a></p>",
            escape(&home(base)),
            escape(&query.query_string(next))
        );
    }
    if !may_decide {
        return body;
    }
    let _ = write!(
        body,
        "<form id=\"batch\" method=\"post\" action=\"{}/batch\"><fieldset><legend>Selected items\
         </legend><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label for=\"batch-message\">Message to the model (for a rejection)</label>\
         <textarea id=\"batch-message\" name=\"message\"></textarea>\
         <button id=\"batch-approve\" name=\"action\" value=\"approve\">Approve selected</button> \
         <button id=\"batch-reject\" name=\"action\" value=\"reject\">Reject selected</button>\
         </fieldset></form>",
        escape(base),
        escape(csrf)
    );
    body
}

/// What the item page shows about a call beside its row.
pub(crate) struct ItemView<'a> {
    pub(crate) row: &'a PendingRow,
    /// The tool's summary of the call, if it has one ([`Inbox::summary`](crate::inbox::Inbox::summary)).
    pub(crate) summary: Option<String>,
    pub(crate) description: Option<&'a str>,
    pub(crate) messages: Option<&'a [Message]>,
    /// For a call in doubt: what the run's journal says of the attempt that was in flight.
    pub(crate) in_doubt: Option<InDoubtView>,
    /// An edit refused, to show again in the edit box.
    pub(crate) edit: Option<EditAgain<'a>>,
    /// Whether the call's tool may be approved for the rest of the run.
    pub(crate) approve_always: bool,
}

/// An edit the inbox refused: the text the person typed, and why.
#[derive(Clone, Copy)]
pub(crate) struct EditAgain<'a> {
    pub(crate) text: &'a str,
    pub(crate) error: &'a str,
}

/// The attempt of a call in doubt that was in flight when its process died.
pub(crate) struct InDoubtView {
    /// When it started (milliseconds since the Unix epoch), if the journal recorded it.
    pub(crate) started_at_ms: Option<i64>,
    /// Which attempt it was (0: the call's first run).
    pub(crate) attempt: u32,
    /// The idempotency key that attempt was given.
    pub(crate) key: String,
}

/// What a person reads of a call in doubt: what happened, the attempt and its key, and how to
/// settle it.
fn in_doubt_html(row: &PendingRow, view: Option<&InDoubtView>) -> String {
    let mut html =
        String::from("<section id=\"in-doubt\"><h2>What happened</h2><p id=\"what-happened\">");
    match view {
        Some(InDoubtView {
            started_at_ms: Some(at),
            ..
        }) => {
            let _ = write!(
                html,
                "This call started at <time id=\"started\">{}</time> and its process died before \
                 it reported. It may or may not have happened.",
                utc(*at)
            );
        }
        _ => html.push_str(
            "This call started and its process died before it reported (its start time was not \
             recorded). It may or may not have happened.",
        ),
    }
    html.push_str("</p>");
    if let Some(view) = view {
        let _ = write!(
            html,
            "<dl><dt>Attempt</dt><dd id=\"attempt\">{} (the call's {})</dd><dt>Idempotency key of \
             that attempt</dt><dd><code id=\"idempotency-key\">{}</code></dd></dl>",
            view.attempt + 1,
            if view.attempt == 0 {
                "first run".to_owned()
            } else {
                format!("run number {}", view.attempt + 1)
            },
            escape(&view.key),
        );
    }
    let _ = write!(
        html,
        "<p id=\"how-to-check\">Check with the system {tool} acts on whether a request with this \
         idempotency key arrived (a payment provider's request log, say). If it happened, supply \
         its outcome below. Run it again only if you checked that it did not: the new attempt gets \
         a new key, so the system cannot tell it from a second request.</p></section>",
        tool = escape(&row.tool)
    );
    html
}

/// One item's page body.
pub(crate) fn item(
    view: &ItemView<'_>,
    base: &str,
    csrf: &str,
    may_decide: bool,
    now_ms: i64,
) -> String {
    let row = view.row;
    let mut body = String::new();
    if let Some(summary) = &view.summary {
        let _ = write!(
            body,
            "<p class=\"summary\" id=\"summary\">{}</p>",
            show(summary)
        );
    }
    body.push_str(&hidden_note(
        [row.arguments.as_str()]
            .into_iter()
            .chain(view.summary.as_deref()),
    ));
    let _ = write!(
        body,
        "<dl><dt>Tool</dt><dd id=\"tool\">{}</dd><dt>What it does</dt><dd id=\"description\">{}</dd>\
         <dt>Why it waits</dt><dd id=\"kind\">{}</dd><dt>Waiting since</dt><dd id=\"since\">{} \
         ({} ago)</dd><dt>Run</dt><dd id=\"run\">{} (agent {}, version {})</dd><dt>Call</dt>\
         <dd id=\"call\">{}</dd></dl><h2>Arguments</h2><pre id=\"arguments\">{}</pre>",
        escape(&row.tool),
        show(
            view.description
                .unwrap_or("(this tool's agent is not known to the inbox)")
        ),
        escape(kind_words(&row.kind)),
        utc(row.since_ms),
        age(row.since_ms, now_ms),
        show(&row.run_id),
        show(&row.agent_id),
        row.version,
        show(&row.call_id),
        show(&pretty(&row.arguments)),
    );
    if row.kind == "outcome_unknown" {
        body.push_str(&in_doubt_html(row, view.in_doubt.as_ref()));
    }
    if let Some(by) = &row.decided_by {
        let _ = write!(
            body,
            "<p class=\"decided\">Already decided by {}; the run resumes once every call it \
             waits on is decided.</p>",
            show(by)
        );
    } else if may_decide {
        body.push_str(&decide_form(
            row,
            base,
            csrf,
            view.edit,
            view.approve_always,
        ));
    } else {
        body.push_str("<p class=\"viewer\">You may look, not decide.</p>");
    }
    body.push_str("<h2>Conversation</h2><div id=\"conversation\">");
    match view.messages {
        Some(messages) => {
            for message in messages {
                body.push_str(&message_html(message));
            }
        }
        None => body.push_str("<p class=\"error\">The run's conversation could not be loaded.</p>"),
    }
    body.push_str("</div>");
    body
}

fn decide_form(
    row: &PendingRow,
    base: &str,
    csrf: &str,
    edit: Option<EditAgain<'_>>,
    approve_always: bool,
) -> String {
    let fits = |a: Action| Action::fits(a, &row.kind);
    let mut form = format!(
        "<form class=\"decide\" method=\"post\" action=\"{}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <input type=\"hidden\" name=\"version\" value=\"{}\">\
         <input type=\"hidden\" name=\"digest\" value=\"{}\">",
        escape(&item_path(base, &row.run_id, &row.call_id)),
        escape(csrf),
        row.version,
        escape(&row.digest),
    );
    if fits(Action::Approve) {
        form.push_str("<button id=\"approve\" name=\"action\" value=\"approve\">Approve</button> ");
    }
    if fits(Action::Rerun) {
        form.push_str(
            "<fieldset id=\"rerun-box\"><legend>It did not happen: run it again</legend>\
             <label><input type=\"checkbox\" id=\"checked\" name=\"checked\" value=\"yes\"> \
             I checked: it did not happen</label> <button id=\"rerun\" name=\"action\" \
             value=\"rerun_after_doubt\">Run it again as a new attempt</button></fieldset>",
        );
    }
    if approve_always && fits(Action::ApproveAlways) {
        form.push_str(
            "<button id=\"approve-always\" name=\"action\" value=\"approve_always\">\
             Approve this tool for the rest of the run</button>",
        );
    }
    if fits(Action::Edit) {
        let (text, error) = match edit {
            Some(edit) => (
                edit.text.to_owned(),
                format!(
                    "<p class=\"error\" role=\"alert\" id=\"edit-error\">{}</p>",
                    show(edit.error)
                ),
            ),
            None => (pretty(&row.arguments), String::new()),
        };
        // The edit box holds JSON as it is sent back: its hidden characters as JSON escapes
        // (`\u202E`), the same value, visible.
        let note = hidden_note([text.as_str()]);
        let text = json_visible(&text);
        let _ = write!(
            form,
            "<fieldset><legend>Edit the arguments</legend>{error}{note}<label for=\"edited\">Arguments \
             (JSON, checked against the tool's schema)</label><textarea id=\"edited\" \
             name=\"arguments\">{}{}</textarea><button id=\"edit\" name=\"action\" \
             value=\"edit\">Approve as edited</button></fieldset>",
            // A textarea drops one newline at its start: one more keeps the text's own.
            if text.starts_with('\n') { "\n" } else { "" },
            escape(&text)
        );
    }
    if fits(Action::Output) {
        let legend = if row.kind == "outcome_unknown" {
            "It happened: supply its outcome"
        } else {
            "Supply the output"
        };
        let _ = write!(
            form,
            "<fieldset><legend>{legend}</legend><label for=\"output-value\">Output (JSON, \
             or plain text)</label><textarea id=\"output-value\" name=\"output\"></textarea>\
             <button id=\"output\" name=\"action\" value=\"output\">Use this output</button>\
             </fieldset>",
        );
    }
    form.push_str(
        "<fieldset><legend>Reject</legend><label for=\"message\">Message (the model reads it)\
         </label><textarea id=\"message\" name=\"message\"></textarea>\
         <button id=\"reject\" name=\"action\" value=\"reject\">Reject</button></fieldset></form>",
    );
    form
}

fn message_html(message: &Message) -> String {
    match message {
        Message::User { content } => format!(
            "<div class=\"message user\"><b>User</b><p>{}</p></div>",
            show(content)
        ),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut out = String::from("<div class=\"message assistant\"><b>Model</b>");
            if let Some(content) = content {
                let _ = write!(out, "<p>{}</p>", show(content));
            }
            for call in tool_calls {
                let _ = write!(
                    out,
                    "<p>calls <code>{}</code> ({}) with <code>{}</code></p>",
                    show(&call.name),
                    show(&call.id),
                    show(&call.arguments)
                );
            }
            out.push_str("</div>");
            out
        }
        Message::Tool {
            call_id,
            name,
            content,
        } => format!(
            "<div class=\"message tool\"><b>Result of {} ({})</b><pre>{}</pre></div>",
            show(name),
            show(call_id),
            show(content)
        ),
    }
}

/// A signed link's confirmation page body: what the link does, and the one button that does it.
pub(crate) fn confirm(
    row: &PendingRow,
    summary: Option<&str>,
    action: &str,
    user: &str,
    action_url: &str,
) -> String {
    format!(
        "<p>{} is about to <strong id=\"link-action\">{}</strong> this call of <code id=\"tool\">{}\
         </code> (run {}, call {}):</p>{}<pre id=\"arguments\">{}</pre>\
         <form id=\"confirm\" method=\"post\" action=\"{}\"><button id=\"confirm\">Confirm: {}\
         </button></form>",
        show(user),
        escape(action),
        show(&row.tool),
        show(&row.run_id),
        show(&row.call_id),
        summary
            .map(|s| format!("<p class=\"summary\" id=\"summary\">{}</p>", show(s)))
            .unwrap_or_default()
            + &hidden_note([row.arguments.as_str()].into_iter().chain(summary)),
        show(&pretty(&row.arguments)),
        escape(action_url),
        escape(action),
    )
}

/// The sign-in form's body, with an error when a token was refused.
pub(crate) fn login(base: &str, csrf: &str, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    format!(
        "{error}<form id=\"login\" method=\"post\" action=\"{}/login\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\"><label for=\"token\">Your \
         token</label> <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\
         \"current-password\" required> <button id=\"sign-in\">Sign in</button></form>",
        escape(base),
        escape(csrf)
    )
}

/// A refusal's body.
pub(crate) fn refused(message: &str, back: Option<&str>) -> String {
    let back = back
        .map(|href| format!("<p><a id=\"back\" href=\"{}\">Back</a></p>", escape(href)))
        .unwrap_or_default();
    format!(
        "<p class=\"error\" role=\"alert\">{}</p>{back}",
        show(message)
    )
}
