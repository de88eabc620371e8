//! Argument text as models send it: blank text means no arguments.

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
