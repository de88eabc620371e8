//! Typed decoding of model arguments: from the argument text to the tool's input type, enforcing the
//! advertised schema.

use std::sync::Arc;

use serde_json::Value;

use crate::schema::Validator;
use crate::tool::{ParseFn, Parsed, parse_arguments};
use crate::typed::ToolInput;

/// The parser of a typed tool: the argument text is checked against the tool's schema (compiled once,
/// here), then decoded into `I`.
pub(crate) fn typed_parser<I: ToolInput>(schema: &Value) -> Result<Arc<ParseFn>, String> {
    let validator = Validator::new(schema)?;
    Ok(Arc::new(move |args: &str| {
        let value = parse_arguments(args)?;
        validator.check(&value)?;
        let input = I::deserialize(value).map_err(|e| format!("$: {e}"))?;
        Ok(Parsed(Box::new(input)))
    }))
}
