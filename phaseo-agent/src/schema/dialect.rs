//! Provider schema dialects: a tool's canonical parameter schema, rewritten into the subset of JSON
//! Schema a model provider accepts.
//!
//! A tool has one canonical schema (what [`schema_for`](super::schema_for) produces, or what
//! [`normalize`](super::normalize) made of a hand-written one), and the runtime always validates
//! arguments against that canonical schema. A dialect only changes what the *model is told*:
//!
//! - where a dialect is **looser** than the canonical schema (it drops a keyword the provider
//!   rejects, such as a `format` or a `default`), the model gets less guidance and the runtime still
//!   refuses what the canonical schema refuses; every such loosening is listed on the [`Dialect`]
//!   variant that does it;
//! - where a dialect **cannot express** something that changes the shape of the arguments (a map
//!   with arbitrary keys, a recursive type, a union, an arbitrary JSON value), [`convert`] refuses
//!   with a [`DialectError`] that names the schema it could not convert, instead of sending the
//!   model a schema for different arguments.
//!
//! The conversions are pure functions of the schema: no I/O, no state. Their recursion is bounded
//! ([`MAX_DEPTH`] levels of nested schemas, then an error), so a hostile schema cannot overflow the
//! stack.
//!
//! Paths in errors are JSONPath-like and name the schema, not the argument: `$` is the root,
//! `$.properties.tags` the schema of the field `tags`, `$.properties.tags.items` the schema of its
//! elements, `$.properties.shape.anyOf[1]` a branch, `$.properties["max-results"]` a field whose
//! name is not an identifier.
//!
//! ```
//! use phaseo_agent::schema::dialect::{Dialect, convert};
//! use serde_json::json;
//!
//! #[derive(schemars::JsonSchema)]
//! struct Search {
//!     /// What to look for.
//!     query: String,
//!     limit: Option<u32>,
//! }
//!
//! let canonical = phaseo_agent::schema::schema_for::<Search>();
//! let strict = convert(&canonical, Dialect::OpenAiStrict).expect("a plain struct converts");
//! assert_eq!(strict, json!({
//!     "type": "object",
//!     "properties": {
//!         "query": {"type": "string", "description": "What to look for."},
//!         // Optional, so nullable and required; `format: uint32` is not an OpenAI format.
//!         "limit": {"type": ["integer", "null"], "minimum": 0}
//!     },
//!     "required": ["limit", "query"],
//!     "additionalProperties": false
//! }));
//!
//! let gemini = Dialect::Gemini.convert(&canonical).expect("and so does it for Gemini");
//! assert_eq!(gemini["properties"]["limit"], json!({
//!     "type": "integer", "nullable": true, "format": "int64", "minimum": 0
//! }));
//!
//! // A map cannot be expressed in OpenAI's strict mode: the error names the field's schema.
//! #[derive(schemars::JsonSchema)]
//! struct Labels {
//!     tags: std::collections::HashMap<String, u32>,
//! }
//! let err = convert(&phaseo_agent::schema::schema_for::<Labels>(), Dialect::OpenAiStrict)
//!     .unwrap_err();
//! assert_eq!(err.path, "$.properties.tags");
//! ```

use std::fmt;

use serde_json::{Map, Value, json};

/// How many levels of nested schemas a conversion follows before it refuses the schema.
pub const MAX_DEPTH: usize = 128;

const OPENAI: Dialect = Dialect::OpenAiStrict;
const ANTHROPIC: Dialect = Dialect::Anthropic;
const GEMINI: Dialect = Dialect::Gemini;

/// A model provider's dialect of JSON Schema for tool parameters.
///
/// Every dialect keeps `description`, and every dialect requires the root to be an object schema
/// (tool arguments are a JSON object).
///
/// ```
/// use phaseo_agent::schema::dialect::Dialect;
/// use serde_json::json;
///
/// let schema = json!({
///     "type": "object",
///     "properties": {"count": {"type": "integer", "format": "uint32", "minimum": 0}},
///     "required": ["count"]
/// });
/// // Anthropic takes the schema as it is; Gemini has no `uint32`, and reads it as an `int64`.
/// assert_eq!(Dialect::Anthropic.convert(&schema).unwrap(), schema);
/// assert_eq!(Dialect::Gemini.convert(&schema).unwrap()["properties"]["count"]["format"], "int64");
/// assert_eq!(Dialect::OpenAiStrict.to_string(), "OpenAI strict");
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenAI Structured Outputs: function tools with `strict: true` (and `response_format` with a
    /// `json_schema`).
    ///
    /// Followed: the OpenAI guide *Structured model outputs*, section *Supported schemas*
    /// (platform.openai.com/docs/guides/structured-outputs#supported-schemas, now served from
    /// developers.openai.com/api/docs/guides/structured-outputs): its supported types (string,
    /// number, boolean, integer, object, array, enum, `anyOf`), supported properties (`pattern`,
    /// `format`; `multipleOf`, `maximum`, `exclusiveMaximum`, `minimum`, `exclusiveMinimum`;
    /// `minItems`, `maxItems`), "Root objects must not be `anyOf` and must be an object", "All
    /// fields must be `required`" (an optional field emulated by a union with `null`),
    /// "`additionalProperties: false` must always be set in objects", "Definitions are supported"
    /// and "Recursive schemas are supported" (`#` or `#/$defs/...`), and "Some type-specific
    /// keywords are not yet supported" (composition: `allOf`, `not`, `dependentRequired`,
    /// `dependentSchemas`, `if`, `then`, `else`; `minLength`/`maxLength` are unsupported only for
    /// fine-tuned models, so they are kept). Cross-checked against `ensure_strict_json_schema` of
    /// the OpenAI Agents SDK (PyPI `openai-agents` 0.24.0), which must return every schema this
    /// dialect produces unchanged.
    ///
    /// The rewrite:
    ///
    /// - every object schema gets `additionalProperties: false`, `properties` (empty if it had
    ///   none) and `required` listing every property;
    /// - a property that was not required becomes nullable: `"null"` joins its `type` (and its
    ///   `enum`, if it has one), or, when it has no plain `type` (a `$ref`, an `anyOf`, a `const`),
    ///   it becomes `anyOf: [<schema>, {"type": "null"}]`; a property that already accepts `null`
    ///   is left alone. **Looser for the model**: it may send `null` for a field the canonical
    ///   schema only allowed to be *absent* (a `#[serde(default)]` field that is not an `Option`);
    ///   the runtime refuses that `null`, so a caller should drop the `null` members of such fields
    ///   before validating if it wants them read as absent;
    /// - `type: "object"` beside a union whose branches are all objects (how an enum of structs
    ///   can be written) is left to the branches, which each get the object rules above;
    /// - `oneOf` becomes `anyOf`. For the enums schemars describes with `oneOf` (tagged enums) the
    ///   branches are disjoint (each has its own tag, or its own key), so the two mean the same;
    ///   for a hand-written `oneOf` whose branches overlap, `anyOf` is **looser** (a value matching
    ///   two branches is accepted);
    /// - `format` is kept only for the string formats OpenAI supports (`date-time`, `time`,
    ///   `date`, `duration`, `email`, `hostname`, `ipv4`, `ipv6`, `uuid`); schemars' numeric
    ///   formats (`int32`, `uint32`, `int64`, `double`, ...) and other string formats (`uri`, ...)
    ///   are dropped: **looser** (the integer formats' ranges are no longer stated; schemars
    ///   already states `minimum: 0` for unsigned integers, and `maximum` for 8 and 16 bits);
    /// - removed, as OpenAI rejects or ignores them: `default` ("'default' is not permitted"),
    ///   `examples`, `$schema`, `$id`, `$anchor`, `$comment`, `deprecated`, `readOnly`,
    ///   `writeOnly`, `contentEncoding`, `contentMediaType`, `x-` extensions (annotations); and
    ///   the value constraints strict mode does not list, which are **looser** once removed:
    ///   `uniqueItems`, `contains`, `minContains`, `maxContains`, `minProperties`,
    ///   `maxProperties`, `propertyNames`; `dependentRequired` and `unevaluatedProperties: false`
    ///   are removed because every property is required and `additionalProperties` is `false`;
    /// - kept: `type` (arrays such as `["string", "null"]` included), `description`, `title`,
    ///   `enum`, `const`, `pattern`, `minimum`, `maximum`, `exclusiveMinimum`,
    ///   `exclusiveMaximum`, `multipleOf`, `minItems`, `maxItems`, `minLength`, `maxLength`,
    ///   `items`, `anyOf`, `$defs` (converted too) and `$ref`.
    ///
    /// Refused (a [`DialectError`] at the schema): a map (`additionalProperties` that is a schema or
    /// `true`: strict mode cannot express arbitrary keys), `patternProperties`, a schema that
    /// accepts any value (`true`, `{}`, `serde_json::Value`), a root that is not a plain object
    /// (not `type: object`, nullable, or a union such as a tagged enum), object properties beside
    /// a union, a `required` name that `properties` does not describe, a `$ref` with sibling
    /// keywords (even a `description`: OpenAI allows none) or outside the schema,
    /// tuples (`prefixItems`, `items` as an array), `allOf`, `not`, `if`/`then`/`else`,
    /// `dependentSchemas`, `unevaluatedItems`, and any keyword not listed here.
    ///
    /// Not checked: OpenAI's size limits (total properties, nesting depth, enum values, string
    /// length), which it states per request and has changed over time.
    OpenAiStrict,
    /// Anthropic Messages API: a tool's `input_schema`.
    ///
    /// Followed: the Messages API reference, where `tools[].input_schema` is "JSON schema for this
    /// tool's input" with `type: "object"` required, and the API's own refusal of a root union,
    /// `input_schema does not support oneOf, allOf, or anyOf at the top level` (the 400 error
    /// quoted in anthropics/claude-code#27337 and #40075; the restriction is not in the tool-use
    /// guide). Anthropic otherwise accepts JSON Schema draft 2020-12 as it is, `$defs`/`$ref`,
    /// maps and recursion included.
    ///
    /// The rewrite: none, beyond `type: "object"` added to a root that has no `type`. Refused: a
    /// root that is not an object schema, whose `type` is not `"object"`, or that has `oneOf`,
    /// `anyOf` or `allOf` (a tagged enum at the root). The stricter subset of Anthropic's *strict
    /// tool use* (`strict: true`) is not this dialect.
    Anthropic,
    /// Gemini API function declarations: `FunctionDeclaration.parameters`, a `Schema` that is a
    /// subset of the OpenAPI 3.0 schema object.
    ///
    /// Followed: the Gemini API reference of `Schema` (ai.google.dev/api/caching#Schema; the same
    /// fields as `google.ai.generativelanguage.v1beta.Schema`): `type` is required; `format` is
    /// "for NUMBER type: float, double; for INTEGER type: int32, int64; for STRING type: enum,
    /// date-time"; `nullable`; `enum` holds strings; `items`, `minItems`, `maxItems`,
    /// `properties`, `required`, `minProperties`, `maxProperties`, `minimum`, `maximum`,
    /// `minLength`, `maxLength`, `pattern`. The `Schema` is a protocol buffer message, so a field
    /// it does not have fails the whole request: `Invalid JSON payload received. Unknown name
    /// "additionalProperties"` (likewise `$schema`, `const`, `exclusiveMinimum`, `propertyNames`,
    /// as quoted in openswarm-ai/openswarm#24 and zed-industries/zed#44875), and a type array
    /// fails with `Proto field is not repeating, cannot start list` (zed-industries/zed#53919).
    /// The `parametersJsonSchema` alternative, which takes JSON Schema, is not this dialect.
    ///
    /// The rewrite:
    ///
    /// - `type: ["T", "null"]` becomes `type: "T", nullable: true`; `anyOf: [X, {"type": "null"}]`
    ///   becomes X (with the outer `description`) and `nullable: true`; a `null` in an `enum` goes
    ///   (the schema is nullable);
    /// - `const: "v"` becomes `enum: ["v"]`; an `enum` or `const` that is not all strings is
    ///   refused;
    /// - `format`: `int8`, `int16`, `int32`, `uint8`, `uint16` become `int32`; `int64`, `int`
    ///   (`isize`) and `uint32` (which does not fit `int32`) become `int64`; `float` and `double`
    ///   stay; `date-time` and `enum` stay on strings; every other format (`uint64`, `uint`,
    ///   `int128`, `uuid`, `email`, ...) is dropped: **looser**;
    /// - `additionalProperties: false` is removed (Gemini's objects have only their declared
    ///   properties);
    /// - a schema without a `type` gets one when it can only be one thing: `object` beside
    ///   `properties`, `array` beside `items`, `string` for an `enum` of strings;
    /// - removed: `$schema`, `$id`, `$anchor`, `$comment`, `title`, `default`, `examples`,
    ///   `deprecated`, `readOnly`, `writeOnly`, `contentEncoding`, `contentMediaType`, `x-`
    ///   extensions, `$defs` (nothing may refer to them); and, **looser**, `exclusiveMinimum`,
    ///   `exclusiveMaximum`, `multipleOf`, `uniqueItems`, `contains`, `minContains`,
    ///   `maxContains`, `dependentRequired`, `propertyNames`.
    ///
    /// Refused: `$ref` (a recursive type; the error is at the schema holding the `$ref`), maps
    /// (`additionalProperties` that is a schema or `true`), `patternProperties`, `oneOf`, `anyOf`
    /// other than "one schema or null", type arrays other than `["T", "null"]`, `type: "null"`, a
    /// schema that accepts any value, a root that is not a non-nullable object, tuples, `allOf`,
    /// `not`, `if`/`then`/`else`, `dependentSchemas`, `unevaluated*`, and any keyword not listed
    /// here.
    ///
    /// A tool without parameters converts to `{"type": "object", "properties": {}}`; Gemini also
    /// accepts a declaration whose `parameters` is left out, which a client may prefer.
    Gemini,
}

impl Dialect {
    /// Converts a canonical schema into this dialect; the same as [`convert`].
    ///
    /// ```
    /// use phaseo_agent::schema::dialect::Dialect;
    /// use serde_json::json;
    ///
    /// let canonical = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    /// assert_eq!(
    ///     Dialect::OpenAiStrict.convert(&canonical).unwrap(),
    ///     json!({
    ///         "type": "object",
    ///         "properties": {"n": {"type": ["integer", "null"]}},
    ///         "required": ["n"],
    ///         "additionalProperties": false
    ///     })
    /// );
    /// ```
    pub fn convert(self, schema: &Value) -> Result<Value, DialectError> {
        convert(schema, self)
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::OpenAiStrict => "OpenAI strict",
            Dialect::Anthropic => "Anthropic",
            Dialect::Gemini => "Gemini",
        })
    }
}

/// A schema a dialect cannot express: where, why, and in which dialect.
///
/// ```
/// use phaseo_agent::schema::dialect::{Dialect, convert};
/// use serde_json::json;
///
/// let map = json!({
///     "type": "object",
///     "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}},
///     "required": ["tags"]
/// });
/// let err = convert(&map, Dialect::Gemini).unwrap_err();
/// assert_eq!(err.path, "$.properties.tags");
/// assert_eq!(err.dialect, Dialect::Gemini);
/// assert!(err.to_string().starts_with("Gemini cannot express $.properties.tags: a map"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{dialect} cannot express {path}: {reason}")]
pub struct DialectError {
    /// The schema that could not be converted, as a JSONPath-like path from the root (`$`), for
    /// example `$.properties.tags.items`.
    pub path: String,
    /// Why, for a person reading it.
    pub reason: String,
    /// The dialect that refused it.
    pub dialect: Dialect,
}

/// Converts a canonical tool parameter schema into a provider's dialect (see [`Dialect`] for
/// each dialect's rules), or says which part of it the dialect cannot express.
///
/// The input is left untouched; the result is a new schema. See the [module docs](self) for an
/// example.
pub fn convert(schema: &Value, dialect: Dialect) -> Result<Value, DialectError> {
    match dialect {
        Dialect::OpenAiStrict => strict_root(schema),
        Dialect::Anthropic => anthropic_root(schema),
        Dialect::Gemini => gemini_root(schema),
    }
}

fn error(dialect: Dialect, path: &str, reason: impl Into<String>) -> DialectError {
    DialectError {
        path: path.to_owned(),
        reason: reason.into(),
        dialect,
    }
}

fn too_deep(dialect: Dialect, path: &str) -> DialectError {
    error(
        dialect,
        path,
        format!("schemas nested more than {MAX_DEPTH} levels deep"),
    )
}

/// The path of a keyword's schema: `$.items`.
fn keyword_path(path: &str, keyword: &str) -> String {
    format!("{path}.{keyword}")
}

/// The path of a named schema under a keyword: `$.properties.tags`, `$.properties["max-results"]`.
fn named_path(path: &str, keyword: &str, name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{path}.{keyword}.{name}")
    } else {
        // A JSON string literal: quotes and control characters escaped.
        format!("{path}.{keyword}[{}]", Value::String(name.to_owned()))
    }
}

/// The path of a branch: `$.anyOf[1]`.
fn index_path(path: &str, keyword: &str, index: usize) -> String {
    format!("{path}.{keyword}[{index}]")
}

/// Annotations: text for people (or for nobody), no effect on which values are valid.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
];

fn is_annotation(keyword: &str) -> bool {
    ANNOTATIONS.contains(&keyword) || keyword.starts_with("x-")
}

/// Keywords that combine or condition schemas, which no dialect here rewrites.
const COMPOSITION: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "prefixItems",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
];

/// The JSON types a `type` may name.
const TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// The names in a `type` (one, or an array), checked.
fn type_names<'a>(
    dialect: Dialect,
    path: &str,
    t: &'a Value,
) -> Result<Vec<&'a str>, DialectError> {
    let names: Vec<&Value> = match t {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        match name.as_str() {
            Some(n) if TYPES.contains(&n) => out.push(n),
            _ => {
                return Err(error(
                    dialect,
                    path,
                    format!("`type` names {name}, which is not a JSON type"),
                ));
            }
        }
    }
    Ok(out)
}

/// A schema's property schemas, checked to be an object.
fn properties<'a>(
    dialect: Dialect,
    path: &str,
    map: &'a Map<String, Value>,
) -> Result<Option<&'a Map<String, Value>>, DialectError> {
    match map.get("properties") {
        None => Ok(None),
        Some(Value::Object(props)) => Ok(Some(props)),
        Some(_) => Err(error(dialect, path, "`properties` is not an object")),
    }
}

/// A schema's `required` names, checked to be strings.
fn required<'a>(
    dialect: Dialect,
    path: &str,
    map: &'a Map<String, Value>,
) -> Result<Vec<&'a str>, DialectError> {
    match map.get("required") {
        None => Ok(Vec::new()),
        Some(Value::Array(names)) => names
            .iter()
            .map(|n| {
                n.as_str().ok_or_else(|| {
                    error(
                        dialect,
                        path,
                        "`required` holds a name that is not a string",
                    )
                })
            })
            .collect(),
        Some(_) => Err(error(dialect, path, "`required` is not an array")),
    }
}

/// The reason a schema that accepts anything, or nothing, is refused.
fn boolean_schema(dialect: Dialect, path: &str, accepts: bool) -> DialectError {
    let reason = if accepts {
        format!(
            "it accepts any JSON value (`true`, `{{}}`, a `serde_json::Value`): {dialect} needs a `type` \
             on every schema"
        )
    } else {
        "it accepts no value (`false`)".to_owned()
    };
    error(dialect, path, reason)
}

/// The reason a map is refused.
fn map_reason(dialect: Dialect) -> String {
    format!(
        "a map (`additionalProperties` is a schema or `true`, as for a `HashMap<String, T>`): {dialect} \
         objects cannot have keys their schema does not name"
    )
}

// OpenAI Structured Outputs, `strict: true`.

/// The string formats strict mode supports.
const OPENAI_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

fn strict_root(schema: &Value) -> Result<Value, DialectError> {
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(accepts) => return Err(boolean_schema(OPENAI, "$", *accepts)),
        _ => return Err(error(OPENAI, "$", "the root is not a schema")),
    };
    for union in ["anyOf", "oneOf"] {
        if map.contains_key(union) {
            return Err(error(
                OPENAI,
                "$",
                format!(
                    "the root is a union (`{union}`, as for an enum): strict mode needs a plain object \
                     at the root (make the enum a field of a struct)"
                ),
            ));
        }
    }
    if map.contains_key("$ref") {
        return Err(error(
            OPENAI,
            "$",
            "the root is a `$ref`: strict mode needs a plain object at the root",
        ));
    }
    if let Some(t) = map.get("type") {
        if type_names(OPENAI, "$", t)? != ["object"] {
            return Err(error(
                OPENAI,
                "$",
                format!("the root's `type` is {t}: strict mode needs a non-nullable object"),
            ));
        }
    }
    // `["object"]`, or no `type` at all, read as "object" at the root.
    let mut root = map.clone();
    root.insert("type".into(), json!("object"));
    strict_node(&Value::Object(root), "$", 0)
}

fn strict_node(schema: &Value, path: &str, depth: usize) -> Result<Value, DialectError> {
    if depth > MAX_DEPTH {
        return Err(too_deep(OPENAI, path));
    }
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(accepts) => return Err(boolean_schema(OPENAI, path, *accepts)),
        _ => {
            return Err(error(
                OPENAI,
                path,
                "not a schema (neither an object nor a boolean)",
            ));
        }
    };
    if let Some(reference) = map.get("$ref") {
        let Some(reference) = reference.as_str() else {
            return Err(error(OPENAI, path, "`$ref` is not a string"));
        };
        if !reference.starts_with('#') {
            return Err(error(
                OPENAI,
                path,
                format!("`$ref` {reference} points outside the schema"),
            ));
        }
        if let Some(sibling) = map.keys().find(|k| *k != "$ref") {
            return Err(error(
                OPENAI,
                path,
                format!(
                    "a `$ref` with a sibling keyword (`{sibling}`): strict mode allows nothing beside \
                     a `$ref`"
                ),
            ));
        }
        return Ok(json!({ "$ref": reference }));
    }

    let mut out = Map::new();
    let mut union: Option<(&str, &Vec<Value>)> = None;
    for (keyword, value) in map {
        match keyword.as_str() {
            "type" => {
                type_names(OPENAI, path, value)?;
                out.insert(keyword.clone(), value.clone());
            }
            "description" | "title" | "enum" | "const" | "pattern" | "minimum" | "maximum"
            | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" | "minItems" | "maxItems"
            | "minLength" | "maxLength" => {
                out.insert(keyword.clone(), value.clone());
            }
            "format" => {
                if value.as_str().is_some_and(|f| OPENAI_FORMATS.contains(&f)) {
                    out.insert(keyword.clone(), value.clone());
                }
            }
            // Rebuilt below, for objects.
            "properties" | "required" => {}
            "items" => {
                if value.is_array() {
                    return Err(error(OPENAI, path, "a tuple (`items` is an array)"));
                }
                let items = strict_node(value, &keyword_path(path, "items"), depth + 1)?;
                out.insert(keyword.clone(), items);
            }
            "anyOf" | "oneOf" => {
                let Value::Array(branches) = value else {
                    return Err(error(OPENAI, path, format!("`{keyword}` is not an array")));
                };
                if union.is_some() {
                    return Err(error(
                        OPENAI,
                        path,
                        "both `anyOf` and `oneOf`: strict mode has only `anyOf`",
                    ));
                }
                union = Some((keyword.as_str(), branches));
            }
            "$defs" | "definitions" => {
                let Value::Object(defs) = value else {
                    return Err(error(OPENAI, path, format!("`{keyword}` is not an object")));
                };
                let mut converted = Map::new();
                for (name, body) in defs {
                    let here = named_path(path, keyword, name);
                    converted.insert(name.clone(), strict_node(body, &here, depth + 1)?);
                }
                out.insert(keyword.clone(), Value::Object(converted));
            }
            "additionalProperties" => {
                if *value != Value::Bool(false) {
                    return Err(error(OPENAI, path, map_reason(OPENAI)));
                }
                out.insert(keyword.clone(), value.clone());
            }
            "patternProperties" => {
                return Err(error(
                    OPENAI,
                    path,
                    "`patternProperties`: strict mode objects cannot have keys their schema does not name",
                ));
            }
            "unevaluatedProperties" => {
                if *value != Value::Bool(false) {
                    return Err(error(OPENAI, path, map_reason(OPENAI)));
                }
            }
            "uniqueItems" | "contains" | "minContains" | "maxContains" | "minProperties"
            | "maxProperties" | "propertyNames" | "dependentRequired" => {}
            k if is_annotation(k) => {}
            k if COMPOSITION.contains(&k) => {
                return Err(error(
                    OPENAI,
                    path,
                    format!("`{k}`: strict mode does not support it"),
                ));
            }
            k => {
                return Err(error(
                    OPENAI,
                    path,
                    format!("`{k}`: a keyword strict mode does not list"),
                ));
            }
        }
    }

    if let Some((keyword, branches)) = union {
        let mut converted = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            converted.push(strict_node(
                branch,
                &index_path(path, keyword, i),
                depth + 1,
            )?);
        }
        out.insert("anyOf".into(), Value::Array(converted));
    }

    let own_properties = properties(OPENAI, path, map)?;
    let mut is_object = match out.get("type") {
        Some(t) => type_names(OPENAI, path, t)?.contains(&"object"),
        None => own_properties.is_some(),
    };
    if is_object && !out.contains_key("type") {
        // Only objects have properties: saying so changes nothing the model may send.
        out.insert("type".into(), json!("object"));
    }
    if is_object && out.contains_key("anyOf") {
        if own_properties.is_some_and(|p| !p.is_empty()) || !required(OPENAI, path, map)?.is_empty()
        {
            return Err(error(
                OPENAI,
                path,
                "object properties beside a union (a flattened enum): with `additionalProperties: \
                 false` on each, no value could satisfy both",
            ));
        }
        // `type: object` beside a union of objects (an enum of structs): the branches say it.
        let all_objects = out
            .get("anyOf")
            .and_then(Value::as_array)
            .is_some_and(|branches| branches.iter().all(only_objects));
        if out.get("type") != Some(&json!("object")) || !all_objects {
            return Err(error(
                OPENAI,
                path,
                "`type: object` beside a union whose branches are not all objects",
            ));
        }
        out.remove("type");
        out.remove("additionalProperties");
        is_object = false;
    }
    if is_object {
        let required = required(OPENAI, path, map)?;
        let empty = Map::new();
        let props = own_properties.unwrap_or(&empty);
        if let Some(missing) = required.iter().find(|name| !props.contains_key(**name)) {
            return Err(error(
                OPENAI,
                path,
                format!(
                    "`required` names `{missing}`, which `properties` does not describe: strict mode \
                     objects have only the properties they list"
                ),
            ));
        }
        let mut converted = Map::new();
        for (name, schema) in props {
            let mut property =
                strict_node(schema, &named_path(path, "properties", name), depth + 1)?;
            if !required.contains(&name.as_str()) {
                property = strict_nullable(property);
            }
            converted.insert(name.clone(), property);
        }
        let all: Vec<Value> = converted.keys().map(|k| json!(k)).collect();
        out.insert("properties".into(), Value::Object(converted));
        out.insert("required".into(), Value::Array(all));
        out.insert("additionalProperties".into(), json!(false));
    }
    if !["type", "enum", "const", "anyOf"]
        .iter()
        .any(|k| out.contains_key(*k))
    {
        return Err(boolean_schema(OPENAI, path, true));
    }
    Ok(Value::Object(out))
}

/// Whether a converted schema only accepts objects.
fn only_objects(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().all(|t| t == "object"),
        _ => schema.get("$ref").is_some(),
    }
}

/// Whether a converted schema accepts `null`, as far as its own keywords tell (a `$ref` is
/// not followed).
fn accepts_null(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    if map.contains_key("$ref") {
        return false;
    }
    let by_type = match map.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => true,
    };
    let by_enum = match map.get("enum") {
        Some(Value::Array(values)) => values.contains(&Value::Null),
        _ => true,
    };
    let by_const = map.get("const").is_none_or(Value::is_null);
    let by_union = match map.get("anyOf") {
        Some(Value::Array(branches)) => branches.iter().any(accepts_null),
        _ => true,
    };
    by_type && by_enum && by_const && by_union
}

/// Makes an optional property's converted schema accept `null` (see [`Dialect::OpenAiStrict`]).
fn strict_nullable(schema: Value) -> Value {
    if accepts_null(&schema) {
        return schema;
    }
    let Value::Object(mut map) = schema else {
        return schema;
    };
    let plain_type =
        map.contains_key("type") && !map.contains_key("anyOf") && !map.contains_key("const");
    if plain_type {
        match map.get_mut("type") {
            Some(Value::String(t)) if t != "null" => {
                let t = std::mem::take(t);
                map.insert("type".into(), json!([t, "null"]));
            }
            Some(Value::Array(ts)) if !ts.iter().any(|t| t == "null") => ts.push(json!("null")),
            _ => {}
        }
        if let Some(Value::Array(values)) = map.get_mut("enum") {
            if !values.contains(&Value::Null) {
                values.push(Value::Null);
            }
        }
        return Value::Object(map);
    }
    let only_annotations = map
        .keys()
        .all(|k| matches!(k.as_str(), "anyOf" | "description" | "title"));
    if only_annotations {
        if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
            branches.push(json!({"type": "null"}));
            return Value::Object(map);
        }
    }
    // The field's text stays at the field, beside the union.
    let mut outer = Map::new();
    for key in ["description", "title"] {
        if let Some(text) = map.remove(key) {
            outer.insert(key.into(), text);
        }
    }
    outer.insert(
        "anyOf".into(),
        json!([Value::Object(map), {"type": "null"}]),
    );
    Value::Object(outer)
}

// Anthropic Messages API `input_schema`.

fn anthropic_root(schema: &Value) -> Result<Value, DialectError> {
    let map = match schema {
        Value::Object(map) => map,
        _ => {
            return Err(error(
                ANTHROPIC,
                "$",
                "the root is not an object schema (`input_schema` must be `type: object`)",
            ));
        }
    };
    for union in ["oneOf", "anyOf", "allOf"] {
        if map.contains_key(union) {
            return Err(error(
                ANTHROPIC,
                "$",
                format!(
                    "the root uses `{union}` (as for an enum): input_schema does not support oneOf, \
                     allOf, or anyOf at the top level (make the enum a field of a struct)"
                ),
            ));
        }
    }
    let mut out = map.clone();
    match map.get("type") {
        None => {
            out.insert("type".into(), json!("object"));
        }
        Some(t) if t == "object" => {}
        Some(t) => {
            return Err(error(
                ANTHROPIC,
                "$",
                format!("the root's `type` is {t}: input_schema must be `type: object`"),
            ));
        }
    }
    Ok(Value::Object(out))
}

// Gemini function declarations (an OpenAPI 3.0 `Schema` subset).

fn gemini_root(schema: &Value) -> Result<Value, DialectError> {
    if let Value::Object(map) = schema {
        for union in ["anyOf", "oneOf"] {
            if map.contains_key(union) {
                return Err(error(
                    GEMINI,
                    "$",
                    format!(
                        "the root is a union (`{union}`, as for an enum): Gemini needs an object at \
                         the root (make the enum a field of a struct)"
                    ),
                ));
            }
        }
    }
    let converted = gemini_node(schema, "$", 0)?;
    let object = converted.get("type") == Some(&json!("object"))
        && converted.get("nullable").is_none_or(|n| *n == json!(false));
    if !object {
        return Err(error(
            GEMINI,
            "$",
            "the root is not a non-nullable `type: object` schema",
        ));
    }
    Ok(converted)
}

/// Whether a branch of an `anyOf` is `{"type": "null"}` (annotations aside).
fn is_null_branch(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    map.get("type") == Some(&json!("null"))
        && map
            .keys()
            .all(|k| k == "type" || k == "description" || k == "title" || is_annotation(k))
}

fn gemini_node(schema: &Value, path: &str, depth: usize) -> Result<Value, DialectError> {
    if depth > MAX_DEPTH {
        return Err(too_deep(GEMINI, path));
    }
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(accepts) => return Err(boolean_schema(GEMINI, path, *accepts)),
        _ => {
            return Err(error(
                GEMINI,
                path,
                "not a schema (neither an object nor a boolean)",
            ));
        }
    };
    if map.contains_key("$ref") {
        return Err(error(
            GEMINI,
            path,
            "a `$ref` (a recursive type): Gemini schemas have no definitions to refer to",
        ));
    }
    if let Some(branches) = map.get("anyOf") {
        return gemini_nullable_union(map, branches, path, depth);
    }

    let mut out = Map::new();
    let mut nullable = false;
    let mut format: Option<&str> = None;
    for (keyword, value) in map {
        match keyword.as_str() {
            "type" => {
                let names = type_names(GEMINI, path, value)?;
                let mut concrete = names.iter().filter(|n| **n != "null");
                nullable |= names.contains(&"null");
                match (concrete.next(), concrete.next()) {
                    (Some(one), None) => {
                        out.insert("type".into(), json!(one));
                    }
                    (None, _) => {
                        return Err(error(GEMINI, path, "`type: null`: Gemini has no null type"));
                    }
                    (Some(_), Some(_)) => {
                        return Err(error(
                            GEMINI,
                            path,
                            format!(
                                "a union of types ({value}): Gemini takes one type, maybe nullable"
                            ),
                        ));
                    }
                }
            }
            "nullable" => {
                if *value == json!(true) {
                    nullable = true;
                }
            }
            "description" | "pattern" | "minimum" | "maximum" | "minItems" | "maxItems"
            | "minLength" | "maxLength" | "minProperties" | "maxProperties" => {
                out.insert(keyword.clone(), value.clone());
            }
            "enum" => {
                let Value::Array(values) = value else {
                    return Err(error(GEMINI, path, "`enum` is not an array"));
                };
                if values.contains(&Value::Null) {
                    nullable = true;
                }
                let mut strings = Vec::with_capacity(values.len());
                for v in values.iter().filter(|v| !v.is_null()) {
                    if !v.is_string() {
                        return Err(error(
                            GEMINI,
                            path,
                            format!(
                                "an `enum` value that is not a string ({v}): Gemini enums hold strings"
                            ),
                        ));
                    }
                    strings.push(v.clone());
                }
                out.insert("enum".into(), Value::Array(strings));
            }
            "const" => match value {
                Value::String(_) => {
                    out.insert("enum".into(), json!([value]));
                }
                other => {
                    return Err(error(
                        GEMINI,
                        path,
                        format!(
                            "a `const` that is not a string ({other}): Gemini enums hold strings"
                        ),
                    ));
                }
            },
            "format" => format = value.as_str(),
            "properties" => {
                let Value::Object(props) = value else {
                    return Err(error(GEMINI, path, "`properties` is not an object"));
                };
                let mut converted = Map::new();
                for (name, schema) in props {
                    let here = named_path(path, "properties", name);
                    converted.insert(name.clone(), gemini_node(schema, &here, depth + 1)?);
                }
                out.insert(keyword.clone(), Value::Object(converted));
            }
            "required" => {
                let names = required(GEMINI, path, map)?;
                out.insert(keyword.clone(), json!(names));
            }
            "items" => {
                if value.is_array() {
                    return Err(error(GEMINI, path, "a tuple (`items` is an array)"));
                }
                let items = gemini_node(value, &keyword_path(path, "items"), depth + 1)?;
                out.insert(keyword.clone(), items);
            }
            "additionalProperties" | "unevaluatedProperties" => {
                if *value != Value::Bool(false) {
                    return Err(error(GEMINI, path, map_reason(GEMINI)));
                }
            }
            "patternProperties" => {
                return Err(error(
                    GEMINI,
                    path,
                    "`patternProperties`: Gemini objects cannot have keys their schema does not name",
                ));
            }
            "oneOf" => {
                return Err(error(
                    GEMINI,
                    path,
                    "a union (`oneOf`, as for an enum with data): Gemini function schemas have no \
                     `oneOf`",
                ));
            }
            "$defs" | "definitions" | "title" | "exclusiveMinimum" | "exclusiveMaximum"
            | "multipleOf" | "uniqueItems" | "contains" | "minContains" | "maxContains"
            | "dependentRequired" | "propertyNames" => {}
            k if is_annotation(k) => {}
            k if COMPOSITION.contains(&k) => {
                return Err(error(
                    GEMINI,
                    path,
                    format!("`{k}`: Gemini schemas do not support it"),
                ));
            }
            k => {
                return Err(error(
                    GEMINI,
                    path,
                    format!("`{k}`: a keyword Gemini schemas do not have"),
                ));
            }
        }
    }

    if !out.contains_key("type") {
        let inferred = if out.contains_key("properties") {
            "object"
        } else if out.contains_key("items") {
            "array"
        } else if out.contains_key("enum") {
            "string"
        } else {
            return Err(boolean_schema(GEMINI, path, true));
        };
        out.insert("type".into(), json!(inferred));
    }
    if let Some(format) = format.and_then(|f| gemini_format(out.get("type"), f)) {
        out.insert("format".into(), json!(format));
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    Ok(Value::Object(out))
}

/// `anyOf: [X, {"type": "null"}]` (in either order) as X, nullable; any other union is refused.
fn gemini_nullable_union(
    map: &Map<String, Value>,
    branches: &Value,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    let Value::Array(branches) = branches else {
        return Err(error(GEMINI, path, "`anyOf` is not an array"));
    };
    let mut concrete = branches
        .iter()
        .enumerate()
        .filter(|(_, b)| !is_null_branch(b));
    let (index, base) = match (concrete.next(), concrete.next()) {
        (Some(one), None) if branches.len() > 1 => one,
        _ => {
            return Err(error(
                GEMINI,
                path,
                "a union (`anyOf`) other than \"one schema or null\": Gemini function schemas only \
                 express nullable",
            ));
        }
    };
    if let Some(other) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "anyOf" | "description" | "title") && !is_annotation(k))
    {
        return Err(error(
            GEMINI,
            path,
            format!("`{other}` beside a nullable `anyOf`"),
        ));
    }
    let mut converted = gemini_node(base, &index_path(path, "anyOf", index), depth + 1)?;
    if let Value::Object(out) = &mut converted {
        if let Some(description) = map.get("description") {
            // The field's description, rather than its type's.
            out.insert("description".into(), description.clone());
        }
        out.insert("nullable".into(), json!(true));
    }
    Ok(converted)
}

/// The Gemini format for a JSON Schema `format` on a value of `type`, if there is one.
fn gemini_format(t: Option<&Value>, format: &str) -> Option<&'static str> {
    match (t.and_then(Value::as_str)?, format) {
        ("integer", "int8" | "int16" | "int32" | "uint8" | "uint16") => Some("int32"),
        ("integer", "int64" | "int" | "uint32") => Some("int64"),
        ("number", "float") => Some("float"),
        ("number", "double") => Some("double"),
        ("string", "date-time") => Some("date-time"),
        ("string", "enum") => Some("enum"),
        _ => None,
    }
}

/// Drops, from arguments a model sent to a strict tool, each `null` given for a property that the
/// canonical `schema` does not require and whose own schema does not accept `null`: strict mode
/// makes such a property nullable for the model (see [`Dialect::OpenAiStrict`]), and `null` there
/// means "left out". Nested objects (through `properties`, `items`, a nullable `anyOf` and local
/// `$ref`s) are cleaned the same way, to [`MAX_DEPTH`]. Returns whether anything was dropped.
pub(crate) fn drop_strict_nulls(schema: &Value, value: &mut Value) -> bool {
    drop_nulls(schema, schema, value, 0)
}

fn drop_nulls(root: &Value, schema: &Value, value: &mut Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let schema = resolve(root, schema);
    let mut dropped = false;
    // The non-null branch of `anyOf: [X, {"type": "null"}]` (how schemars writes `Option<X>`).
    if let Some(Value::Array(branches)) = schema.get("anyOf") {
        for branch in branches.iter().filter(|b| !is_null_branch(b)) {
            dropped |= drop_nulls(root, branch, value, depth + 1);
        }
    }
    match value {
        Value::Object(fields) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return dropped;
            };
            let required: Vec<&str> = match schema.get("required") {
                Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            fields.retain(|name, field| {
                let keep = !field.is_null()
                    || required.contains(&name.as_str())
                    || props
                        .get(name)
                        .is_none_or(|prop| accepts_null(resolve(root, prop)));
                dropped |= !keep;
                keep
            });
            for (name, field) in fields.iter_mut() {
                if let Some(prop) = props.get(name) {
                    dropped |= drop_nulls(root, prop, field, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for element in items {
                    dropped |= drop_nulls(root, item, element, depth + 1);
                }
            }
        }
        _ => {}
    }
    dropped
}

/// A local `$ref` (`#/$defs/<name>`, or `#` for the root) resolved, once; anything else as is.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some("#") => root,
        Some(reference) => reference
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs")?.get(name))
            .unwrap_or(schema),
        None => schema,
    }
}
