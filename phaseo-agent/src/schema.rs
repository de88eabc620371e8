//! Parameter schemas: generation from Rust types (schemars 1.x), normalisation, and compiled validators.
//!
//! A schema is generated and normalised once, when a tool is built, never per call:
//!
//! - no `$schema` and no root `title` (the type's name is noise to a model);
//! - subschemas inlined, so no `$ref` is left for a provider to reject (a recursive type keeps its
//!   `$defs`, at the root, so no `$ref` dangles);
//! - a nested `title` (schemars takes it from the first paragraph of a doc comment) is folded into
//!   `description`, so no text is lost;
//! - the root is always `"type": "object"`; a tool with no parameters advertises
//!   `{"type":"object","properties":{}}`.

use std::sync::Arc;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The normalised parameter schema of a Rust input type.
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Lookup {
///     /// The ticket to load.
///     ticket_id: String,
/// }
///
/// let schema = phaseo_agent::schema::schema_for::<Lookup>();
/// assert_eq!(schema, serde_json::json!({
///     "type": "object",
///     "properties": {"ticket_id": {"type": "string", "description": "The ticket to load."}},
///     "required": ["ticket_id"]
/// }));
/// ```
pub fn schema_for<T: JsonSchema + ?Sized>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    normalize(generator.into_root_schema_for::<T>().to_value())
}

/// Normalises a JSON Schema for use as a tool's parameters (see the module docs).
///
/// ```
/// use serde_json::json;
///
/// let raw = json!({
///     "$schema": "https://json-schema.org/draft/2020-12/schema",
///     "title": "Empty",
///     "type": "null"
/// });
/// assert_eq!(phaseo_agent::schema::normalize(raw), json!({"type": "object", "properties": {}}));
/// ```
pub fn normalize(schema: Value) -> Value {
    let Value::Object(mut root) = schema else {
        return json!({"type": "object", "properties": {}});
    };
    root.remove("$schema");
    root.remove("title");
    let defs = root.remove("$defs").and_then(|d| match d {
        Value::Object(defs) => Some(defs),
        _ => None,
    });
    let mut root = Value::Object(root);
    let mut kept = Map::new();
    if let Some(defs) = &defs {
        inline_refs(&mut root, defs, &mut Vec::new(), &mut kept);
    }
    fold_titles(&mut root, true);
    let Value::Object(mut root) = root else {
        unreachable!("the root stayed an object")
    };
    if !kept.is_empty() {
        let mut kept = Value::Object(kept);
        fold_titles(&mut kept, false);
        root.insert("$defs".into(), kept);
    }
    object_root(root)
}

/// Makes the root an object schema: unit-like inputs become an empty object; a root whose
/// alternatives are all objects (an internally tagged enum) gets `"type": "object"` beside them.
fn object_root(mut root: Map<String, Value>) -> Value {
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => {
            root.entry("properties").or_insert_with(|| json!({}));
        }
        Some(Value::String(t)) if t == "null" => return json!({"type": "object", "properties": {}}),
        None if root.is_empty() => return json!({"type": "object", "properties": {}}),
        None => {
            root.insert("type".into(), json!("object"));
        }
        Some(_) => {}
    }
    Value::Object(root)
}

const DEFS_PREFIX: &str = "#/$defs/";

/// Replaces each `$ref` into `$defs` with the definition, except where that would recurse forever;
/// those definitions are kept (in `kept`) and their `$ref`s stay.
fn inline_refs(
    node: &mut Value,
    defs: &Map<String, Value>,
    stack: &mut Vec<String>,
    kept: &mut Map<String, Value>,
) {
    match node {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(DEFS_PREFIX))
                .map(str::to_owned)
            {
                let Some(def) = defs.get(&name) else { return };
                if stack.contains(&name) {
                    if !kept.contains_key(&name) {
                        kept.insert(name.clone(), Value::Null);
                        let mut body = def.clone();
                        inline_refs(&mut body, defs, &mut vec![name.clone()], kept);
                        kept.insert(name, body);
                    }
                    return;
                }
                let mut body = def.clone();
                stack.push(name);
                inline_refs(&mut body, defs, stack, kept);
                stack.pop();
                map.remove("$ref");
                if let Value::Object(body) = body {
                    for (k, v) in body {
                        // Sibling keywords next to the `$ref` (a field's description) win.
                        map.entry(k).or_insert(v);
                    }
                }
                return;
            }
            for v in map.values_mut() {
                inline_refs(v, defs, stack, kept);
            }
        }
        Value::Array(items) => {
            for v in items {
                inline_refs(v, defs, stack, kept);
            }
        }
        _ => {}
    }
}

/// Folds `title` into `description` everywhere below the root (a title at the root is the type name).
/// Only schema positions are visited: under `properties` and `$defs` the keys are names, not keywords.
fn fold_titles(node: &mut Value, is_root: bool) {
    let Value::Object(map) = node else { return };
    if !is_root {
        if let Some(Value::String(title)) = map.remove("title") {
            let description = match map.remove("description") {
                Some(Value::String(d)) if !d.is_empty() => format!("{title}\n\n{d}"),
                _ => title,
            };
            map.insert("description".into(), Value::String(description));
        }
    }
    for (key, value) in map.iter_mut() {
        match (key.as_str(), value) {
            (
                "properties" | "$defs" | "patternProperties" | "dependentSchemas",
                Value::Object(m),
            ) => {
                m.values_mut().for_each(|v| fold_titles(v, false));
            }
            ("const" | "enum" | "default" | "examples" | "required", _) => {}
            (_, Value::Array(items)) => items.iter_mut().for_each(|v| fold_titles(v, false)),
            (_, v @ Value::Object(_)) => fold_titles(v, false),
            _ => {}
        }
    }
}

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
            LocationSegment::Property(p)
                if !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                out.push('.');
                out.push_str(&p);
            }
            LocationSegment::Property(p) => out.push_str(&format!("[{}]", Value::String(p.into()))),
        }
    }
    out
}
