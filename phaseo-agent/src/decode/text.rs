//! Argument text as models send it (blank text means no arguments), the parser's depth limit,
//! which values the runtime stores or sends must keep too, and the bound on error text that quotes
//! what a model sent.

use serde_json::Value;

use crate::limits::{MAX_COST_PER_BYTE, parsed_size};
use crate::schema::validate::MAX_LISTED_ERRORS;

/// Model argument text to JSON: `""` (some models send it for no arguments) means `{}`.
///
/// A text whose parsed form would take more than [`parse_budget`] bytes is refused before it is
/// parsed: a `Value` can take 30 to 80 times the memory of its text (a small object is a B-tree
/// node of about 630 bytes), so a hostile model's 20 MB of tiny objects would otherwise cost
/// gigabytes.
pub(crate) fn parse_arguments(args: &str) -> Result<Value, String> {
    if is_blank(args) {
        return Ok(Value::Object(Default::default()));
    }
    check_parse_budget(args)?;
    serde_json::from_str(args).map_err(|e| format!("$: arguments are not valid JSON: {e}"))
}

/// The most memory the parsed form of argument text may take: 64 MiB, or eight times the
/// text's length for a longer text (a long document in a string costs about its length).
pub(crate) fn parse_budget(text_len: usize) -> usize {
    (64 << 20).max(text_len.saturating_mul(8))
}

/// Refuses a text whose parsed form would be over [`parse_budget`]. A short text (under about
/// 91 KB) cannot be, and is not scanned.
fn check_parse_budget(text: &str) -> Result<(), String> {
    let budget = parse_budget(text.len());
    if text.len().saturating_mul(MAX_COST_PER_BYTE) <= budget {
        return Ok(());
    }
    let size = parsed_size(text);
    if size <= budget {
        return Ok(());
    }
    Err(format!(
        "$: the arguments are too large to check: {} bytes of text would take about {} MB in \
         memory once parsed (at most {} MB); send fewer or smaller values",
        text.len(),
        size >> 20,
        budget >> 20
    ))
}

/// Empty or JSON whitespace only. Stops at the first other byte, so a call's arguments cost one
/// comparison (`str::trim` walks both ends, decoding UTF-8). Inlined into the typed decoders, which
/// are compiled in the crate that defines the tool.
#[inline]
pub(crate) fn is_blank(args: &str) -> bool {
    args.bytes()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// The text of a value with every integer-valued float within 2^53 (`1.0`, `1e2`, `-0`: an
/// integer to JSON Schema, and exactly the integer the text wrote) written as that integer;
/// `None` when the value holds no such float (the text would be the value's own).
pub(crate) fn integral_text(value: &Value) -> Option<String> {
    let mut stack = vec![value];
    let mut any = false;
    while let Some(value) = stack.pop() {
        match value {
            Value::Number(n) => any |= integral(n).is_some(),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
        if any {
            break;
        }
    }
    // The value nests at most as deep as the parser allows, so serialising it recurses safely.
    any.then(|| serde_json::to_string(&Integral(value)).unwrap_or_default())
}

/// The integer an integer-valued float within 2^53 stands for: `Ok` for one at or above zero
/// (`-0` included), `Err` for a negative one.
fn integral(n: &serde_json::Number) -> Option<Result<u64, i64>> {
    const EXACT: f64 = (1u64 << 53) as f64;
    let f = n.as_f64().filter(|_| n.is_f64())?;
    if f.fract() != 0.0 || !(-EXACT..=EXACT).contains(&f) {
        return None;
    }
    Some(if f >= 0.0 {
        Ok(f as u64)
    } else {
        Err(f as i64)
    })
}

/// A value serialised with its integer-valued floats as integers (see [`integral_text`]).
struct Integral<'a>(&'a Value);

impl serde::Serialize for Integral<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Number(n) => match integral(n) {
                Some(Ok(u)) => s.serialize_u64(u),
                Some(Err(i)) => s.serialize_i64(i),
                None => serde::Serialize::serialize(n, s),
            },
            Value::Array(items) => s.collect_seq(items.iter().map(Integral)),
            Value::Object(map) => s.collect_map(map.iter().map(|(k, v)| (k, Integral(v)))),
            other => serde::Serialize::serialize(other, s),
        }
    }
}

/// How many arrays and objects may nest in a value the runtime sends: serde_json's parser refuses
/// text nested deeper, so a deeper value could not be read back.
pub(crate) const MAX_DEPTH: usize = 127;

/// How many may nest in a value the run's state stores (progress, the application context, a pending
/// call's arguments): the state nests them up to six levels deep, and the whole state must parse.
pub(crate) const MAX_STORED_DEPTH: usize = 120;

/// The error of a value nested deeper than [`MAX_DEPTH`].
pub(crate) const TOO_DEEP: &str = "$: nested too deeply (at most 127 levels of arrays and objects)";

/// The error of a value to store nested deeper than [`MAX_STORED_DEPTH`].
pub(crate) const TOO_DEEP_TO_STORE: &str =
    "$: nested too deeply to keep in the run's state (at most 120 levels of arrays and objects)";

/// Whether a value nests arrays and objects more than `limit` deep ([`MAX_DEPTH`] or
/// [`MAX_STORED_DEPTH`]). Iterative: the value may be far deeper than the stack allows recursion.
pub(crate) fn deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if level > limit {
            return true;
        }
        stack.extend(children.map(|child| (child, level + 1)));
    }
    false
}

/// Drops a value without recursion (dropping a value nested 100,000 deep the usual way overflows
/// the stack).
pub(crate) fn drop_deep(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// Whether a value nests more than [`MAX_DEPTH`] deep.
pub(crate) fn too_deep(value: &Value) -> bool {
    deeper_than(value, MAX_DEPTH)
}

/// How many characters an error about a model's input or a tool's output may have, per line (a
/// line is one error: a validator lists every error of a value, one per line): errors quote the
/// offending value, and a hostile value can be megabytes long. The message is stored on the
/// call's step and sent back to the model on every later turn.
pub(crate) const MAX_ERROR_CHARS: usize = 600;

/// How many lines an error message keeps: a validator's list ([`MAX_LISTED_ERRORS`] errors) and
/// its count of the rest.
const MAX_ERROR_LINES: usize = MAX_LISTED_ERRORS + 2;

/// An error message bounded to [`MAX_ERROR_CHARS`] per line and [`MAX_ERROR_LINES`] lines: each
/// line keeps its start (the JSON path and the reason's beginning) and its end (how the reason
/// ends), around a note of what was cut.
pub(crate) fn bounded(message: String) -> String {
    if message.len() <= MAX_ERROR_CHARS {
        return message;
    }
    if !message.contains('\n') {
        return bounded_line(message);
    }
    let total = message.lines().count();
    let mut lines: Vec<String> = message
        .lines()
        .take(MAX_ERROR_LINES)
        .map(|line| bounded_line(line.to_owned()))
        .collect();
    if total > MAX_ERROR_LINES {
        lines.push(format!(
            "[... {} more lines cut ...]",
            total - MAX_ERROR_LINES
        ));
    }
    lines.join("\n")
}

/// One line of an error message, bounded to [`MAX_ERROR_CHARS`].
fn bounded_line(message: String) -> String {
    let total = message.chars().count();
    if total <= MAX_ERROR_CHARS {
        return message;
    }
    let (head, tail) = (MAX_ERROR_CHARS * 2 / 3, MAX_ERROR_CHARS / 3);
    let start: String = message.chars().take(head).collect();
    let end: String = message.chars().skip(total - tail).collect();
    format!(
        "{start} [... {} characters cut ...] {end}",
        total - head - tail
    )
}
