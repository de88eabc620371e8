//! The pieces every page is made of: escaping text into HTML, percent-encoding ids into URLs,
//! times as people read them, the page frame, and the script and style sheet served beside the
//! pages (no inline script or style, so the content security policy allows none).

use std::fmt::Write;

/// Text as HTML text or attribute value: `&`, `<`, `>`, `"` and `'` become entities, so a value
/// can never close an element or an attribute, whatever it holds.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Whether a person could not see `c`, or it would change how the text around it reads:
/// controls (but tab and line ends), bidirectional controls (U+202A–202E, U+2066–2069, the marks
/// U+200E, U+200F and U+061C), zero-width and other format characters (U+200B–200D, U+2060–2064,
/// U+FEFF, the soft hyphen U+00AD, every other character of Unicode's category Cf), the line and
/// paragraph separators, and the blank fillers (U+034F, U+115F, U+1160, U+17B4, U+17B5,
/// U+3164, U+FFA0).
pub(crate) fn is_hidden(c: char) -> bool {
    match c {
        '\n' | '\r' | '\t' => false,
        c if c.is_control() => true,
        // Category Cf (Unicode 15.1), then separators and fillers that show as nothing.
        '\u{00AD}'
        | '\u{0600}'..='\u{0605}'
        | '\u{061C}'
        | '\u{06DD}'
        | '\u{070F}'
        | '\u{0890}'..='\u{0891}'
        | '\u{08E2}'
        | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{110BD}'
        | '\u{110CD}'
        | '\u{13430}'..='\u{1343F}'
        | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0001}'
        | '\u{E0020}'..='\u{E007F}'
        | '\u{2028}'
        | '\u{2029}'
        | '\u{034F}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{17B4}'
        | '\u{17B5}'
        | '\u{3164}'
        | '\u{FFA0}' => true,
        _ => false,
    }
}

/// Whether `text` holds a character [`is_hidden`] names.
pub(crate) fn has_hidden(text: &str) -> bool {
    text.chars().any(is_hidden)
}

/// How a hidden character reads: `\u{202E}`.
fn visible_escape(c: char) -> String {
    format!("\\u{{{:04X}}}", c as u32)
}

/// Text a person reads, as HTML text: [`escape`]d, and each character [`is_hidden`] names shown
/// as a visible escape (`\u{202E}`) in a styled `<span class="hidden-char">`, so that nothing
/// in it is invisible or turns the text around it.
pub(crate) fn show(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if is_hidden(c) => {
                let _ = write!(
                    out,
                    "<span class=\"hidden-char\" title=\"an invisible or direction-changing \
                     character\">{}</span>",
                    visible_escape(c)
                );
            }
            c => out.push(c),
        }
    }
    out
}

/// Text a person reads in an attribute (a label, a title): [`escape`]d, each hidden character
/// as a visible escape (no markup is possible there).
pub(crate) fn show_attr(text: &str) -> String {
    let mut visible = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hidden(c) {
            visible.push_str(&visible_escape(c));
        } else {
            visible.push(c);
        }
    }
    escape(&visible)
}

/// JSON text with each hidden character written as a JSON escape (`\u202E`; a pair of them
/// above U+FFFF): inside a string, the same JSON value, now visible in an edit box. (Outside a
/// string such a character was not JSON to begin with, and the escape shows where it was.)
pub(crate) fn json_visible(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04X}", unit);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The note beside a text that holds hidden characters.
pub(crate) const HIDDEN_NOTE: &str =
    "This text holds invisible or direction-changing characters, shown as escapes (\\u{…}).";

/// [`HIDDEN_NOTE`] as a paragraph when any of `texts` holds a hidden character, else nothing.
pub(crate) fn hidden_note<'t>(texts: impl IntoIterator<Item = &'t str>) -> String {
    if texts.into_iter().any(has_hidden) {
        format!("<p class=\"hidden-note\" role=\"note\">{HIDDEN_NOTE}</p>")
    } else {
        String::new()
    }
}

/// An id as one URL path segment (or one part of a batch item): every byte but the unreserved
/// ones (`A-Z a-z 0-9 - . _ ~`) percent-encoded, so a `/`, `?` or `#` in a run or call id stays
/// inside its segment.
pub(crate) fn pct(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The text [`pct`] encoded; `None` for a malformed escape or bytes that are not UTF-8.
pub(crate) fn unpct(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The bytes of lower-case (or upper-case) hex text; `None` for anything else.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A time in milliseconds since the Unix epoch as `2026-12-02 17:20:39 UTC` (the store's
/// refusals write times the same way).
pub(crate) use crate::store::backend::utc;

/// How long ago, for a person: `40 s`, `12 min`, `3 h`, `2 d`.
pub(crate) fn age(since_ms: i64, now_ms: i64) -> String {
    let secs = (now_ms - since_ms).max(0) / 1000;
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}

/// JSON text pretty-printed, or as it is when it is not JSON.
pub(crate) fn pretty(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| json.to_owned())
}

/// The list's path: where the router is mounted (`/inbox`, which a nested axum router answers;
/// not `/inbox/`), or `/` at the root.
pub(crate) fn home(base: &str) -> String {
    if base.is_empty() {
        "/".to_owned()
    } else {
        base.to_owned()
    }
}

/// A whole page: `body` is HTML already escaped; `base` is where the inbox is mounted (`""` at
/// the root); `user` is who is signed in, if anyone.
pub(crate) fn page(title: &str, base: &str, user: Option<(&str, &str)>, body: &str) -> String {
    let base_attr = escape(base);
    let mut nav = String::new();
    if let Some((name, csrf)) = user {
        let _ = write!(
            nav,
            "<nav><a href=\"{}\">Waiting</a> <a href=\"{base_attr}/audit\">Audit</a> \
             <span id=\"user\">{}</span> <form method=\"post\" action=\"{base_attr}/logout\" \
             class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button id=\"sign-out\">Sign out</button></form></nav>",
            escape(&home(base)),
            escape(name),
            escape(csrf)
        );
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · Approval inbox</title>\
         <link rel=\"stylesheet\" href=\"{base_attr}/static/inbox.css\">\
         <script src=\"{base_attr}/static/inbox.js\" defer></script></head>\
         <body data-base=\"{base_attr}\">{nav}<main><h1>{}</h1>\n{body}\n</main></body></html>\n",
        escape(title),
        escape(title)
    )
}

/// The script of every page: new items from the event stream inserted into the list, and
/// the batch buttons enabled only with a selection. Served at `static/inbox.js`.
pub(crate) const SCRIPT: &str = r#""use strict";
(function () {
  var table = document.getElementById("items");
  if (!table || !window.EventSource) { return; }
  var list = table.tBodies[0] || table;
  var base = document.body.getAttribute("data-base") || "";
  var events = new EventSource(base + "/events" + window.location.search);
  events.addEventListener("pending", function (event) {
    var holder = document.createElement("template");
    holder.innerHTML = event.data.trim();
    var item = holder.content.firstElementChild;
    if (!item) { return; }
    var known = list.querySelectorAll("tr.item");
    for (var i = 0; i < known.length; i++) {
      if (known[i].dataset.run === item.dataset.run && known[i].dataset.call === item.dataset.call) { return; }
    }
    list.insertBefore(item, list.firstChild);
    var empty = document.getElementById("empty");
    if (empty) { empty.remove(); }
  });
})();
"#;

/// The style sheet: readable on a phone, focus visible for keyboard use. Served at
/// `static/inbox.css`.
pub(crate) const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:0.5rem 1rem;line-height:1.4}
nav{display:flex;gap:1rem;align-items:center;flex-wrap:wrap;border-bottom:1px solid #ccc;padding-bottom:0.5rem}
form.inline{display:inline}
pre,code{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;padding:0.2rem}
#items th{background:#f4f4f4}
.summary{font-weight:600}
.hidden-char{background:#fde68a;color:#7a2e00;outline:1px dashed #b45309;font-family:monospace;font-weight:normal}
.hidden-note{display:block;color:#7a2e00;background:#fff7e0;border-left:4px solid #b45309;padding-left:0.5rem;font-size:0.9em}
#items .run{display:block;font-size:0.85em;color:#555;word-break:break-all}
.error{color:#a00;border-left:4px solid #a00;padding-left:0.5rem;white-space:pre-line}
.ok{color:#060;border-left:4px solid #060;padding-left:0.5rem}
textarea{width:100%;min-height:5rem;font-family:monospace}
button{padding:0.4rem 0.8rem;margin:0.2rem 0}
:focus-visible{outline:3px solid #36c;outline-offset:2px}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:0.3rem;vertical-align:top;text-align:left}
.message{border-left:3px solid #ccc;padding-left:0.5rem;margin:0.3rem 0}
fieldset{border:1px solid #ccc;margin:0.5rem 0}
@media (max-width:40rem){table,tbody,tr,td,th{display:block}thead{position:absolute;left:-9999px}}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(escape("plain ünïcode"), "plain ünïcode");
    }

    #[test]
    fn hidden_characters_are_shown_as_escapes_and_stay_the_same_json() {
        let text = "invoice\u{202E}fdp.exe a\u{200B}b \u{E0041}\u{AD}\u{7F} tab\tline\n";
        assert!(has_hidden(text));
        assert!(!has_hidden(
            "plain ünïcode, an emoji 🙂, tab\tand lines\r\n"
        ));
        let shown = show(text);
        assert!(shown.contains(">\\u{202E}</span>fdp.exe"), "{shown}");
        for c in ["\u{202E}", "\u{200B}", "\u{E0041}", "\u{AD}", "\u{7F}"] {
            assert!(!shown.contains(c), "{shown}");
        }
        assert!(
            shown.contains("\\u{E0041}") && shown.contains("\\u{00AD}"),
            "{shown}"
        );
        assert!(shown.contains("tab\tline\n"));
        assert_eq!(show_attr("a\u{2066}<b"), "a\\u{2066}&lt;b");
        // Hidden characters of a JSON text become JSON escapes: the same value.
        let json = serde_json::json!({"file": text, "k\u{200F}": 1}).to_string();
        let visible = json_visible(&json);
        assert!(!has_hidden(&visible), "{visible}");
        assert!(visible.contains("invoice\\u202Efdp.exe"), "{visible}");
        assert!(visible.contains("\\uDB40\\uDC41"), "{visible}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&visible).unwrap(),
            serde_json::from_str::<serde_json::Value>(&json).unwrap()
        );
    }

    #[test]
    fn ids_survive_percent_encoding() {
        for id in ["call_1", "a/b?c#d", "é %2F", ""] {
            assert_eq!(unpct(&pct(id)).as_deref(), Some(id));
            assert!(!pct(id).contains('/'));
        }
        assert_eq!(unpct("%zz"), None);
        assert_eq!(unpct("%4"), None);
    }

    #[test]
    fn hex_round_trips() {
        use crate::durable::entry::hex;
        assert_eq!(hex(&[0, 171, 255]), "00abff");
        assert_eq!(unhex("00abff"), Some(vec![0, 171, 255]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn times_read_as_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_796_232_039_000), "2026-12-02 17:20:39 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(age(0, 59_000), "59 s");
        assert_eq!(age(0, 7_200_000), "2 h");
    }
}
