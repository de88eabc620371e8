//! Validators: JSON Schemas compiled once, with errors that name a JSON path, and the type of the
//! custom checks tools add beside them.

use std::sync::Arc;

use serde_json::Value;

/// A custom check of a value (a tool's input, output or event validator): the value to keep, or
/// why it is refused (`<path>: <reason>`).
pub(crate) type CheckFn = dyn Fn(Value) -> Result<Value, String> + Send + Sync;

/// A JSON Schema compiled once (the `jsonschema` crate), with errors that name a JSON path.
///
/// The draft is chosen by the schema's `$schema` (draft-07, 2019-09, 2020-12, ...); a schema without
/// one is read as draft 2020-12.
///
/// ```
/// use phaseo_agent::schema::Validator;
/// use serde_json::json;
///
/// let v = Validator::new(&json!({
///     "type": "object",
///     "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
///     "required": ["items"]
/// })).unwrap();
/// assert!(v.check(&json!({"items": [1, 2]})).is_ok());
/// assert_eq!(v.check(&json!({"items": [1, "x"]})).unwrap_err(), r#"$.items[1]: "x" is not of type "integer""#);
/// assert_eq!(v.check(&json!({})).unwrap_err(), r#"$: "items" is a required property"#);
/// ```
#[derive(Clone)]
pub struct Validator {
    inner: Arc<jsonschema::Validator>,
}

impl Validator {
    /// Compiles a schema; the error says why it is not a usable JSON Schema.
    pub fn new(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(|v| Validator { inner: Arc::new(v) })
            .map_err(|e| format!("the schema does not compile: {e}"))
    }

    /// Checks a value; the error reads `<path>: <reason>` for the first failure.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match self.inner.validate(value) {
            Ok(()) => Ok(()),
            Err(e) => Err(format!("{}: {}", json_path(e.instance_path()), e)),
        }
    }

    /// Whether a value passes.
    pub fn is_valid(&self, value: &Value) -> bool {
        self.inner.is_valid(value)
    }
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Validator")
    }
}

/// `$`, `$.items[1]`, `$["a key"]`: a JSON path a model can read.
fn json_path(location: &jsonschema::paths::Location) -> String {
    use jsonschema::paths::LocationSegment;
    let mut out = String::from("$");
    for segment in location.iter() {
        match segment {
            LocationSegment::Index(i) => out.push_str(&format!("[{i}]")),
            LocationSegment::Property(p) => push_key(&mut out, &p),
        }
    }
    out
}

/// Appends a key to a JSON path: `.key` for a plain name, `["a key"]` otherwise.
pub(crate) fn push_key(out: &mut String, key: &str) {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        out.push('.');
        out.push_str(key);
    } else {
        out.push_str(&format!("[{}]", Value::String(key.into())));
    }
}
