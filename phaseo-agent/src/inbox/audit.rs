//! The audit log's page: who decided what, when, and what an edit changed, field by field.

use std::fmt::Write;

use serde_json::Value;

use crate::inbox::html::{escape, hidden_note, pct, show, utc};
use crate::run::state::Decision;
use crate::store::backend::DecisionRow;

/// At most this many changes of an edit are listed (the arguments are shown whole beside them).
const MAX_CHANGES: usize = 50;

/// What an edit changed, field by field: `<ul class="diff">` with one `<li>` per path whose value
/// was changed, added or removed (objects compared key by key, anything else whole).
pub(crate) fn diff_list(before: &Value, after: &Value) -> String {
    fn walk<'v>(
        path: &str,
        before: Option<&'v Value>,
        after: Option<&'v Value>,
        out: &mut Vec<(String, Option<&'v Value>, Option<&'v Value>)>,
    ) {
        match (before, after) {
            (Some(Value::Object(b)), Some(Value::Object(a))) => {
                let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
                for key in keys {
                    let path = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                    walk(&path, b.get(key), a.get(key), out);
                }
            }
            (b, a) if b != a => out.push((path.to_owned(), b, a)),
            _ => {}
        }
    }
    let mut changes = Vec::new();
    walk("", Some(before), Some(after), &mut changes);
    if changes.is_empty() {
        return "<p class=\"diff\">No change.</p>".into();
    }
    let value = |v: &Value| show(&v.to_string());
    let mut out = String::from("<ul class=\"diff\">");
    for (path, b, a) in changes.iter().take(MAX_CHANGES) {
        let path = if path.is_empty() { "(all)" } else { path };
        let change = match (b, a) {
            (Some(b), Some(a)) => format!("<del>{}</del> → <ins>{}</ins>", value(b), value(a)),
            (None, Some(a)) => format!("added <ins>{}</ins>", value(a)),
            (Some(b), None) => format!("removed <del>{}</del>", value(b)),
            (None, None) => continue,
        };
        let _ = write!(out, "<li><code>{}</code>: {change}</li>", show(path));
    }
    if changes.len() > MAX_CHANGES {
        let _ = write!(out, "<li>and {} more</li>", changes.len() - MAX_CHANGES);
    }
    out.push_str("</ul>");
    out
}

/// One decision of the audit log, with the arguments before an edit (when the run is still
/// stored) and after it.
pub(crate) struct AuditView<'a> {
    pub(crate) row: &'a DecisionRow,
    pub(crate) before: Option<String>,
}

/// The audit page's body.
pub(crate) fn audit(rows: &[AuditView<'_>], next: Option<&str>, base: &str) -> String {
    let mut body = String::from(
        "<table id=\"audit\"><thead><tr><th>When</th><th>Who</th><th>Decision</th><th>Tool</th>\
         <th>Run / call</th><th>Arguments before</th><th>Arguments after</th></tr></thead><tbody>",
    );
    for view in rows {
        let row = view.row;
        let decision: Option<Decision> = serde_json::from_str(&row.decision).ok();
        let (what, detail, after) = match &decision {
            Some(Decision::Approve) => ("approve", String::new(), None),
            Some(Decision::ApproveAlways) => ("approve_always", String::new(), None),
            Some(Decision::ApproveWithArguments { arguments }) => {
                ("edit", String::new(), Some(pretty_value(arguments)))
            }
            Some(Decision::Reject { message }) => ("reject", message.clone(), None),
            Some(Decision::Output { output }) => ("output", pretty_value(output), None),
            Some(Decision::RerunAfterDoubt) => (
                "rerun_after_doubt",
                "checked: it did not happen; run again as a new attempt".to_owned(),
                None,
            ),
            None => ("(unreadable)", row.decision.clone(), None),
        };
        let changes = match (&decision, &view.before) {
            (Some(Decision::ApproveWithArguments { arguments }), Some(before)) => {
                serde_json::from_str::<Value>(before)
                    .map(|before| diff_list(&before, arguments))
                    .unwrap_or_default()
            }
            _ => String::new(),
        };
        let (before, after) = match after {
            Some(after) => (
                view.before
                    .clone()
                    .unwrap_or_else(|| "(the run is no longer stored)".into()),
                after,
            ),
            None => (String::new(), String::new()),
        };
        let _ = write!(
            body,
            "<tr class=\"decision {what}\"><td class=\"when\">{}</td><td class=\"who\">{}</td>\
             <td class=\"what\">{what}{}</td><td class=\"tool\">{}</td><td class=\"ids\">{} / {}\
             </td><td>{note}<pre class=\"before\">{}</pre></td><td><pre class=\"after\">{}</pre>{changes}</td></tr>",
            utc(row.at_ms),
            show(&row.by),
            if detail.is_empty() {
                String::new()
            } else {
                format!(": <span class=\"detail\">{}</span>", show(&detail))
            },
            show(&row.tool),
            show(&row.run_id),
            show(&row.call_id),
            show(&before),
            show(&after),
            note = hidden_note([before.as_str(), after.as_str(), detail.as_str()]),
        );
    }
    body.push_str("</tbody></table>");
    if rows.is_empty() {
        body.push_str("<p id=\"empty\">No decision recorded yet.</p>");
    }
    if let Some(next) = next {
        let _ = write!(
            body,
            "<p><a id=\"next\" href=\"{}/audit?after={}\">Next page</a></p>",
            escape(base),
            escape(&pct(next))
        );
    }
    body
}

fn pretty_value(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[cfg(test)]
mod diff_tests {
    use super::diff_list;
    use serde_json::json;

    #[test]
    fn an_edit_is_listed_field_by_field_and_escaped() {
        let before = json!({"env": "production", "opts": {"force": true, "a/b": 1}, "gone": 1});
        let after = json!({"env": "staging", "opts": {"force": true, "a/b": 2}, "new": "<b>"});
        let diff = diff_list(&before, &after);
        assert!(diff.starts_with("<ul class=\"diff\">"), "{diff}");
        assert_eq!(diff.matches("<li>").count(), 4, "{diff}");
        assert!(
            diff.contains("<code>/opts/a~1b</code>: <del>1</del> → <ins>2</ins>"),
            "{diff}"
        );
        assert!(
            diff.contains("<code>/gone</code>: removed <del>1</del>"),
            "{diff}"
        );
        assert!(
            diff.contains("added <ins>") && !diff.contains("<b>"),
            "{diff}"
        );
        assert_eq!(
            diff_list(&before, &before),
            "<p class=\"diff\">No change.</p>"
        );
    }
}
