//! Schema generation from Rust types (schemars 1.x) and normalisation for models.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::limits::LimitExceeded;
use crate::schema::inline::{Budget, Defs, inline};

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
    let (raw, name) = generate::<T>();
    finish(raw, &name)
}

/// The normalised parameter schema of a Rust input type, and whether the type's own schema is
/// `{"type": "null"}` (`()`, a unit struct: such an input advertises an empty object), from one
/// generation.
pub(crate) fn parameters_for<T: JsonSchema + ?Sized>() -> (Value, bool) {
    let (raw, name) = generate::<T>();
    parameters(raw, &name)
}

/// The normalised schema of an output type when schemars describes it as an object (MCP's
/// `outputSchema` must be one), from one generation.
pub(crate) fn object_schema_for<T: JsonSchema + ?Sized>() -> Option<Value> {
    let (raw, name) = generate::<T>();
    object_schema(raw, &name)
}

/// [`object_schema_for`] past the generation, compiled once.
fn object_schema(raw: Value, name: &str) -> Option<Value> {
    let is_object = raw.get("type").and_then(Value::as_str) == Some("object");
    is_object.then(|| finish(raw, name))
}

/// [`parameters_for`] past the generation, compiled once.
fn parameters(raw: Value, name: &str) -> (Value, bool) {
    let null = raw.get("type").and_then(Value::as_str) == Some("null");
    (finish(raw, name), null)
}

/// The type's schema as schemars writes it, and its name: the only part that depends on the type.
fn generate<T: JsonSchema + ?Sized>() -> (Value, std::borrow::Cow<'static, str>) {
    (
        generator().into_root_schema_for::<T>().to_value(),
        T::schema_name(),
    )
}

fn generator() -> schemars::SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
}

/// The type's raw schema, normalised.
fn finish(mut schema: Value, name: &str) -> Value {
    if let Value::Object(root) = &mut schema {
        // schemars titles the root with the type's name unless a doc comment of more than one
        // paragraph gave it a title (its first paragraph): that one is text for the model.
        match root.remove("title") {
            Some(Value::String(title)) if title != name => {
                fold_title(root, title);
            }
            _ => {}
        }
    }
    normalize(schema)
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
    // A trusted schema over the budget (no generated one comes near it) is not refused: it keeps
    // its definitions, as a recursive type does, and the output is the size of the input.
    match normalize_within(schema.clone(), Budget::DEFAULT) {
        Ok(normalized) => normalized,
        Err(_) => normalized(schema, Budget::DEFAULT, true)
            .unwrap_or_else(|_| unreachable!("keeping every definition has no budget")),
    }
}

/// [`normalize`] for a schema from outside: inlining that would pass `budget` is refused with
/// the limit it hit ([`Limit::SchemaNodes`](crate::limits::Limit::SchemaNodes) or
/// [`Limit::SchemaDepth`](crate::limits::Limit::SchemaDepth)).
pub(crate) fn normalize_within(schema: Value, budget: Budget) -> Result<Value, LimitExceeded> {
    normalized(schema, budget, false)
}

fn normalized(schema: Value, budget: Budget, inline_none: bool) -> Result<Value, LimitExceeded> {
    let Value::Object(mut root) = schema else {
        return Ok(json!({"type": "object", "properties": {}}));
    };
    root.remove("$schema");
    root.remove("title");
    let mut defs = Defs::default();
    for (key, prefix) in [("$defs", "#/$defs/"), ("definitions", "#/definitions/")] {
        if let Some(Value::Object(found)) = root.remove(key) {
            defs.prefixes.push(prefix);
            defs.bodies
                .extend(found.into_iter().map(|(k, v)| ((prefix, k), v)));
        }
    }
    let (mut root, kept) = inline(Value::Object(root), &defs, budget, inline_none)?;
    fold_titles(&mut root, true);
    let Value::Object(mut root) = root else {
        unreachable!("the root stayed an object")
    };
    if !kept.is_empty() {
        let mut kept = Value::Object(kept);
        fold_titles(&mut kept, false);
        root.insert("$defs".into(), kept);
    }
    Ok(object_root(root))
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

/// Puts a title before the description, as its first paragraph.
fn fold_title(map: &mut Map<String, Value>, title: String) {
    let description = match map.remove("description") {
        Some(Value::String(d)) if !d.is_empty() => format!("{title}\n\n{d}"),
        _ => title,
    };
    map.insert("description".into(), Value::String(description));
}

/// Folds `title` into `description` everywhere below the root (a title at the root is the type name).
/// Only schema positions are visited: under `properties` and `$defs` the keys are names, not keywords.
fn fold_titles(node: &mut Value, is_root: bool) {
    let Value::Object(map) = node else { return };
    if !is_root {
        if let Some(Value::String(title)) = map.remove("title") {
            fold_title(map, title);
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
