//! Schema generation from Rust types (schemars 1.x) and normalisation for models.

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
    let Value::Object(mut root) = schema else {
        return json!({"type": "object", "properties": {}});
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
    let mut root = Value::Object(root);
    let mut kept = Map::new();
    if !defs.bodies.is_empty() {
        let recursive = defs.recursive();
        inline_refs(&mut root, &defs, &recursive, &mut kept);
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

/// The definitions of a schema (`$defs`, or draft-07's `definitions`), by (prefix, name).
#[derive(Default)]
struct Defs {
    prefixes: Vec<&'static str>,
    bodies: std::collections::BTreeMap<(&'static str, String), Value>,
}

impl Defs {
    /// The definition a `$ref` names, if it names one.
    fn target(&self, reference: &str) -> Option<(&'static str, String)> {
        self.prefixes.iter().find_map(|prefix| {
            let name = reference.strip_prefix(prefix)?;
            let key = (*prefix, name.to_owned());
            self.bodies.contains_key(&key).then_some(key)
        })
    }

    /// The definitions a schema refers to, directly.
    fn refs_in(&self, node: &Value, out: &mut Vec<(&'static str, String)>) {
        match node {
            Value::Object(map) => {
                if let Some(target) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| self.target(r))
                {
                    out.push(target);
                }
                map.values().for_each(|v| self.refs_in(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| self.refs_in(v, out)),
            _ => {}
        }
    }

    /// The definitions that reach themselves through `$ref`s: they cannot be inlined.
    fn recursive(&self) -> std::collections::BTreeSet<(&'static str, String)> {
        let edges: std::collections::BTreeMap<_, _> = self
            .bodies
            .iter()
            .map(|(key, body)| {
                let mut out = Vec::new();
                self.refs_in(body, &mut out);
                (key.clone(), out)
            })
            .collect();
        let mut recursive = std::collections::BTreeSet::new();
        for start in edges.keys() {
            let mut seen = std::collections::BTreeSet::new();
            let mut todo: Vec<_> = edges[start].iter().collect();
            while let Some(next) = todo.pop() {
                if next == start {
                    recursive.insert(start.clone());
                    break;
                }
                if seen.insert(next) {
                    todo.extend(edges.get(next).into_iter().flatten());
                }
            }
        }
        recursive
    }
}

/// Replaces each `$ref` to a definition with the definition's body, except for recursive
/// definitions: those are kept (in `kept`, to become the root's `$defs`) and their `$ref`s stay,
/// rewritten to `#/$defs/<name>`.
fn inline_refs(
    node: &mut Value,
    defs: &Defs,
    recursive: &std::collections::BTreeSet<(&'static str, String)>,
    kept: &mut Map<String, Value>,
) {
    match node {
        Value::Object(map) => {
            if let Some(key) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| defs.target(r))
            {
                let mut body = defs.bodies[&key].clone();
                if recursive.contains(&key) {
                    let name = key.1;
                    map.insert("$ref".into(), Value::String(format!("#/$defs/{name}")));
                    if !kept.contains_key(&name) {
                        kept.insert(name.clone(), Value::Null);
                        inline_refs(&mut body, defs, recursive, kept);
                        kept.insert(name, body);
                    }
                    // Sibling keywords (a field's description) stay beside the `$ref`.
                    for (k, v) in map.iter_mut() {
                        if k != "$ref" {
                            inline_refs(v, defs, recursive, kept);
                        }
                    }
                    return;
                }
                inline_refs(&mut body, defs, recursive, kept);
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
                inline_refs(v, defs, recursive, kept);
            }
        }
        Value::Array(items) => {
            for v in items {
                inline_refs(v, defs, recursive, kept);
            }
        }
        _ => {}
    }
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
