//! Argument text as models send it (blank text means no arguments), and the parser's depth limit,
//! which values the runtime stores or sends must keep too.

use serde_json::Value;

/// Model argument text to JSON: `""` (some models send it for no arguments) means `{}`.
pub(crate) fn parse_arguments(args: &str) -> Result<Value, String> {
    if is_blank(args) {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(args).map_err(|e| format!("$: arguments are not valid JSON: {e}"))
}

/// Empty or JSON whitespace only. Stops at the first other byte, so a call's arguments cost one
/// comparison (`str::trim` walks both ends, decoding UTF-8). Inlined into the typed decoders, which
/// are compiled in the crate that defines the tool.
#[inline]
pub(crate) fn is_blank(args: &str) -> bool {
    args.bytes()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// How many arrays and objects may nest: serde_json's parser refuses text nested deeper, so a value
/// nested deeper could not be read back (from a stored state, or by the model).
pub(crate) const MAX_DEPTH: usize = 127;

/// The error of a value nested deeper than [`MAX_DEPTH`].
pub(crate) const TOO_DEEP: &str = "$: nested too deeply (at most 127 levels of arrays and objects)";

/// Whether a value nests arrays and objects more than [`MAX_DEPTH`] deep. Iterative: the value may
/// be far deeper than the stack allows recursion.
pub(crate) fn too_deep(value: &Value) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if level > MAX_DEPTH {
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
