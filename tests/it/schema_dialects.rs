//! Provider schema dialects (`phaseo_agent::schema::dialect`): for every golden shape
//! (`shapes/mod.rs`, the canonical schemas checked in as `tests/golden/<name>.json`) and one more
//! (`Extras`, below), each dialect's conversion is either
//!
//! - a schema, compared with the checked-in `tests/golden/dialects/<dialect>/<name>.json`, or
//! - a refusal, whose path is asserted (`REFUSED`).
//!
//! Every converted schema is also checked for the dialect's rules (OpenAI strict: every object
//! closed and fully required, no unsupported `format`, no `default`, no `oneOf`; Gemini: no `$ref`,
//! `$defs`, `additionalProperties`, `anyOf`, `const` or type arrays; Anthropic: the canonical schema
//! itself), and against sample arguments: every sample the canonical schema accepts, with its
//! absent optional fields filled in by `null`, is accepted by the OpenAI strict schema; every sample
//! is accepted by the Gemini schema read as OpenAPI 3.0 (`nullable`).
//!
//! `tests/golden/dialects/openai_strict_all.json` holds the OpenAI strict schema of every shape
//! that converts, as `{name: schema}`, for `interop/strict_check.py` (OpenAI's own
//! `ensure_strict_json_schema` must return each unchanged).
//!
//! To regenerate the files after an intended change, run
//!
//! ```text
//! GOLDEN=overwrite cargo test -p phaseo-agent-tests --test it -- schema_dialects::
//! ```
//!
//! and review the diff of `tests/golden/dialects/` before committing it.

use crate::{for_each_shape, shapes};

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use crate::support::golden::{compare_with_golden, each_schema, golden_path, overwrite};
use phaseo_agent::schema::dialect::{Dialect, DialectError, MAX_DEPTH, convert};
use phaseo_agent::schema::{Validator, schema_for};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use shapes::*;

/// Every dialect, with the name of its golden folder.
const DIALECTS: [(Dialect, &str); 3] = [
    (Dialect::OpenAiStrict, "openai_strict"),
    (Dialect::Anthropic, "anthropic"),
    (Dialect::Gemini, "gemini"),
];

/// The shapes a dialect refuses: (dialect folder, shape, path of the refusal).
const REFUSED: &[(&str, &str, &str)] = &[
    // A root `oneOf`: strict mode needs a plain object root.
    ("openai_strict", "tagged_enum", "$"),
    // `HashMap<String, u16>` (the first map, in key order).
    ("openai_strict", "string_map", "$.properties.counts"),
    // `serde_json::Value`: any JSON value.
    ("openai_strict", "any_json", "$.properties.payload"),
    ("anthropic", "tagged_enum", "$"),
    ("gemini", "tagged_enum", "$"),
    ("gemini", "string_map", "$.properties.counts"),
    ("gemini", "any_json", "$.properties.payload"),
    // Recursion: the schema holding the first `$ref`.
    ("gemini", "recursive", "$.properties.children.items"),
    (
        "gemini",
        "recursive_nested",
        "$.properties.root.properties.children.items",
    ),
    // An externally tagged enum is a `oneOf`.
    ("gemini", "extras", "$.properties.action"),
];

/// The string formats OpenAI strict mode supports.
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

// ---------------------------------------------------------------------------------------------
// One more shape: what the golden shapes do not cover (unions below the root, defaults).
// ---------------------------------------------------------------------------------------------

/// Unions below the root, and fields that may be absent without being `Option`s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Extras {
    /// An internally tagged enum, as a field.
    shape: Shape,
    /// An optional one.
    maybe_shape: Option<Shape>,
    /// An externally tagged enum.
    action: Action,
    /// How often to retry.
    #[serde(default)]
    retries: u32,
    #[serde(default)]
    level: Level,
    tags: Option<Vec<String>>,
    at: Option<Inner>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
enum Action {
    Stop,
    Move { x: i32, y: i32 },
    Say(String),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Level {
    #[default]
    Low,
    High,
}

// ---------------------------------------------------------------------------------------------
// Sample arguments, written as Rust values so they follow the types.
// ---------------------------------------------------------------------------------------------

/// Arguments of a shape, as JSON (serde writes `None` as `null`).
trait Samples {
    fn samples() -> Vec<Value>;
}

fn to_json<T: Serialize>(values: Vec<T>) -> Vec<Value> {
    values
        .into_iter()
        .map(|v| serde_json::to_value(v).expect("a sample serialises"))
        .collect()
}

fn inner(label: &str, weight: i32) -> Inner {
    Inner {
        label: label.into(),
        weight,
    }
}

fn leaf(name: &str) -> Tree {
    Tree {
        name: name.into(),
        children: vec![],
        parent: None,
    }
}

impl Samples for () {
    fn samples() -> Vec<Value> {
        vec![json!({})]
    }
}

impl Samples for NoFields {
    fn samples() -> Vec<Value> {
        to_json(vec![NoFields {}])
    }
}

impl Samples for Scalars {
    fn samples() -> Vec<Value> {
        to_json(vec![Scalars {
            name: "a".into(),
            count: -5,
            small: 255,
            ratio: 0.5,
            enabled: true,
            initial: 'x',
        }])
    }
}

impl Samples for Optional {
    fn samples() -> Vec<Value> {
        to_json(vec![
            Optional {
                query: "q".into(),
                limit: Some(3),
                cursor: Some("c".into()),
                filter: Some(inner("f", 1)),
            },
            Optional {
                query: "q".into(),
                limit: None,
                cursor: None,
                filter: None,
            },
        ])
    }
}

impl Samples for Nested {
    fn samples() -> Vec<Value> {
        to_json(vec![Nested {
            id: "n".into(),
            inner: inner("i", -2),
        }])
    }
}

impl Samples for VecOfStruct {
    fn samples() -> Vec<Value> {
        to_json(vec![
            VecOfStruct {
                items: vec![inner("a", 1), inner("b", 2)],
                tags: vec!["t".into()],
            },
            VecOfStruct {
                items: vec![],
                tags: vec![],
            },
        ])
    }
}

impl Samples for UnitEnum {
    fn samples() -> Vec<Value> {
        to_json(vec![
            UnitEnum {
                mode: Mode::Fast,
                fallback: None,
            },
            UnitEnum {
                mode: Mode::DryRun,
                fallback: Some(Mode::Careful),
            },
        ])
    }
}

impl Samples for Shape {
    fn samples() -> Vec<Value> {
        to_json(vec![
            Shape::Circle { radius: 1.5 },
            Shape::Rectangle {
                width: 2.0,
                height: 3.0,
            },
            Shape::Point,
        ])
    }
}

impl Samples for Labels {
    fn samples() -> Vec<Value> {
        to_json(vec![Labels {
            labels: HashMap::from([("x".to_string(), inner("x", 0))]),
            counts: HashMap::from([("y".to_string(), 7)]),
        }])
    }
}

impl Samples for AnyJson {
    fn samples() -> Vec<Value> {
        to_json(vec![
            AnyJson {
                payload: json!({"x": [1, "two"]}),
                note: None,
            },
            AnyJson {
                payload: json!(3),
                note: Some("n".into()),
            },
        ])
    }
}

impl Samples for Documented {
    fn samples() -> Vec<Value> {
        to_json(vec![
            Documented {
                ticket_id: "T-1".into(),
                comments: 3,
                position: inner("p", 0),
                fields: None,
            },
            Documented {
                ticket_id: "T-2".into(),
                comments: 0,
                position: inner("p", 9),
                fields: Some(vec!["a".into(), "b".into()]),
            },
        ])
    }
}

impl Samples for Renamed {
    fn samples() -> Vec<Value> {
        to_json(vec![
            Renamed {
                ticket_id: "T".into(),
                max_results: 10,
                with_drafts: None,
            },
            Renamed {
                ticket_id: "T".into(),
                max_results: 0,
                with_drafts: Some(true),
            },
        ])
    }
}

fn tree() -> Tree {
    Tree {
        name: "root".into(),
        children: vec![
            leaf("a"),
            Tree {
                name: "b".into(),
                children: vec![leaf("b1")],
                parent: Some(Box::new(leaf("up"))),
            },
        ],
        parent: None,
    }
}

impl Samples for Tree {
    fn samples() -> Vec<Value> {
        to_json(vec![leaf("only"), tree()])
    }
}

impl Samples for Outline {
    fn samples() -> Vec<Value> {
        to_json(vec![Outline {
            title: "t".into(),
            root: tree(),
        }])
    }
}

impl Samples for Extras {
    fn samples() -> Vec<Value> {
        to_json(vec![
            Extras {
                shape: Shape::Point,
                maybe_shape: None,
                action: Action::Stop,
                retries: 0,
                level: Level::Low,
                tags: None,
                at: None,
            },
            Extras {
                shape: Shape::Circle { radius: 2.0 },
                maybe_shape: Some(Shape::Rectangle {
                    width: 1.0,
                    height: 1.0,
                }),
                action: Action::Move { x: 1, y: -1 },
                retries: 3,
                level: Level::High,
                tags: Some(vec!["a".into()]),
                at: Some(inner("at", 4)),
            },
            Extras {
                shape: Shape::Point,
                maybe_shape: Some(Shape::Point),
                action: Action::Say("hi".into()),
                retries: 1,
                level: Level::Low,
                tags: Some(vec![]),
                at: None,
            },
        ])
    }
}

// ---------------------------------------------------------------------------------------------
// Golden files.
// ---------------------------------------------------------------------------------------------

fn dialects_dir() -> PathBuf {
    golden_path("dialects")
}

fn dialect_path(folder: &str, name: &str) -> PathBuf {
    dialects_dir().join(folder).join(format!("{name}.json"))
}

/// Where a dialect refuses a shape, if it does.
fn refusal(folder: &str, name: &str) -> Option<&'static str> {
    REFUSED
        .iter()
        .find(|(f, n, _)| *f == folder && *n == name)
        .map(|(_, _, path)| *path)
}

/// Every shape's name and canonical schema (the golden shapes, then `Extras`).
fn all_shapes() -> Vec<(&'static str, Value)> {
    let mut shapes = Vec::new();
    macro_rules! shape {
        ($name:ident, $ty:ty) => {
            shapes.push((stringify!($name), schema_for::<$ty>()));
        };
    }
    for_each_shape!(shape);
    shape!(extras, Extras);
    shapes
}

// ---------------------------------------------------------------------------------------------
// Walking schemas.
// ---------------------------------------------------------------------------------------------

fn type_names(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

/// A schema's `$ref` target inside `root`, followed until it is not a `$ref`.
fn resolve<'a>(mut schema: &'a Value, root: &'a Value) -> &'a Value {
    for _ in 0..16 {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            return schema;
        };
        let fragment = reference.strip_prefix('#').expect("a local $ref");
        schema = root.pointer(fragment).expect("the $ref resolves");
    }
    panic!("a $ref chain that does not end")
}

/// Whether an object value could be the one an object schema describes: its type, required keys
/// and `const` tags fit (enough to pick a tagged enum's branch).
fn object_fits(schema: &Value, value: &Map<String, Value>) -> bool {
    let types = type_names(schema);
    if !types.is_empty() && !types.contains(&"object") {
        return false;
    }
    let required_present = schema
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(|names| {
            names
                .iter()
                .all(|n| n.as_str().is_some_and(|n| value.contains_key(n)))
        });
    let tags_match = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|props| {
            props.iter().all(|(k, p)| match p.get("const") {
                Some(c) => value.get(k) == Some(c),
                None => true,
            })
        });
    schema.get("properties").is_some() && required_present && tags_match
}

/// Fills in `null` for every property the canonical schema describes and `value` leaves out.
fn fill_nulls(schema: &Value, root: &Value, value: &mut Value) {
    let schema = resolve(schema, root);
    let mut candidates = vec![schema];
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(union) {
            candidates.extend(branches.iter().map(|b| resolve(b, root)));
        }
    }
    match value {
        Value::Object(object) => {
            let Some(described) = candidates.into_iter().find(|s| object_fits(s, object)) else {
                return;
            };
            let Some(Value::Object(props)) = described.get("properties") else {
                return;
            };
            for (name, property) in props {
                match object.get_mut(name) {
                    Some(v) => fill_nulls(property, root, v),
                    None => {
                        object.insert(name.clone(), Value::Null);
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = candidates.iter().find_map(|s| s.get("items")) else {
                return;
            };
            for item in items {
                fill_nulls(item_schema, root, item);
            }
        }
        _ => {}
    }
}

/// Removes every object member whose value is `null` (an absent optional field, as a caller
/// that leaves it out would send it).
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(object) => {
            object.retain(|_, v| !v.is_null());
            object.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// A Gemini (OpenAPI 3.0) schema read as JSON Schema: `nullable: true` becomes a `null` in the
/// type (and in the enum).
fn openapi_as_json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "properties" => Value::Object(
                            v.as_object()
                                .expect("properties")
                                .iter()
                                .map(|(name, s)| (name.clone(), openapi_as_json_schema(s)))
                                .collect(),
                        ),
                        "items" => openapi_as_json_schema(v),
                        _ => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect();
            if out.remove("nullable") == Some(json!(true)) {
                let t = out.remove("type").expect("a Gemini schema has a type");
                out.insert("type".into(), json!([t, "null"]));
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    values.push(Value::Null);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// The rules of each dialect, checked on a converted schema.
// ---------------------------------------------------------------------------------------------

fn assert_openai_strict_rules(name: &str, schema: &Value) {
    assert_eq!(schema["type"], "object", "{name}: the root is an object");
    assert!(
        schema.get("anyOf").is_none(),
        "{name}: the root is not a union"
    );
    each_schema(schema, String::new(), &mut |node, pointer| {
        let Value::Object(map) = node else {
            panic!("{name}: a boolean schema at `{pointer}`")
        };
        for keyword in ["oneOf", "default", "allOf", "patternProperties", "$schema"] {
            assert!(
                !map.contains_key(keyword),
                "{name}: `{keyword}` at `{pointer}`"
            );
        }
        if let Some(format) = map.get("format") {
            let format = format.as_str().expect("a format is a string");
            assert!(
                OPENAI_FORMATS.contains(&format),
                "{name}: format `{format}` at `{pointer}`"
            );
        }
        if map.contains_key("$ref") {
            assert_eq!(
                map.len(),
                1,
                "{name}: a `$ref` with siblings at `{pointer}`"
            );
        }
        if type_names(node).contains(&"object") {
            assert_eq!(
                map.get("additionalProperties"),
                Some(&json!(false)),
                "{name}: an open object at `{pointer}`"
            );
            let keys: BTreeSet<&str> = map["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("{name}: an object without properties at `{pointer}`"))
                .keys()
                .map(String::as_str)
                .collect();
            let required: BTreeSet<&str> = map["required"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: an object without required at `{pointer}`"))
                .iter()
                .map(|n| n.as_str().expect("a name"))
                .collect();
            assert_eq!(
                keys, required,
                "{name}: not every property is required at `{pointer}`"
            );
        }
    });
    Validator::new(schema).unwrap_or_else(|e| panic!("{name}: {e}"));
}

fn assert_gemini_rules(name: &str, schema: &Value) {
    assert_eq!(schema["type"], "object", "{name}: the root is an object");
    each_schema(schema, String::new(), &mut |node, pointer| {
        let Value::Object(map) = node else {
            panic!("{name}: a boolean schema at `{pointer}`")
        };
        for keyword in [
            "$ref",
            "$defs",
            "additionalProperties",
            "anyOf",
            "oneOf",
            "allOf",
            "const",
            "default",
            "title",
            "$schema",
        ] {
            assert!(
                !map.contains_key(keyword),
                "{name}: `{keyword}` at `{pointer}`"
            );
        }
        let t = map
            .get("type")
            .unwrap_or_else(|| panic!("{name}: no type at `{pointer}`"));
        let t = t
            .as_str()
            .unwrap_or_else(|| panic!("{name}: a type array at `{pointer}`"));
        assert_ne!(t, "null", "{name}: type null at `{pointer}`");
        if let Some(values) = map.get("enum") {
            assert!(
                values
                    .as_array()
                    .expect("an enum is an array")
                    .iter()
                    .all(Value::is_string),
                "{name}: an enum of non-strings at `{pointer}`"
            );
        }
        if let Some(format) = map.get("format") {
            let allowed: &[&str] = match t {
                "integer" => &["int32", "int64"],
                "number" => &["float", "double"],
                "string" => &["enum", "date-time"],
                _ => &[],
            };
            assert!(
                allowed.contains(&format.as_str().expect("a string")),
                "{name}: format {format} on {t} at `{pointer}`"
            );
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Per shape: every dialect.
// ---------------------------------------------------------------------------------------------

fn check_shape(name: &str, canonical: &Value, samples: &[Value]) {
    let canonical_validator = Validator::new(canonical).expect("the canonical schema compiles");
    // The samples, as serde writes them (`None` as `null`) and with absent optional fields.
    let mut arguments = Vec::new();
    for sample in samples {
        let mut absent = sample.clone();
        strip_nulls(&mut absent);
        for value in [sample, &absent] {
            canonical_validator
                .check(value)
                .unwrap_or_else(|e| panic!("{name}: a sample the canonical schema refuses: {e}"));
        }
        arguments.push(sample.clone());
        arguments.push(absent);
    }

    for (dialect, folder) in DIALECTS {
        let converted = convert(canonical, dialect);
        if let Some(path) = refusal(folder, name) {
            let err = converted.expect_err(&format!("{name}: {dialect} should refuse it"));
            assert_eq!(err.path, path, "{name}: {dialect}: {err}");
            assert_eq!(err.dialect, dialect);
            assert!(
                !dialect_path(folder, name).exists() || overwrite(),
                "{name}: {dialect} refuses it; delete {}",
                dialect_path(folder, name).display()
            );
            continue;
        }
        let converted =
            converted.unwrap_or_else(|e| panic!("{name}: {dialect} should convert it: {e}"));
        compare_with_golden(&dialect_path(folder, name), &converted, "schema_dialects");
        // A conversion is a function of the schema: converting again changes nothing more.
        assert_eq!(
            convert(&converted, dialect).as_ref(),
            Ok(&converted),
            "{name}: {dialect} is not idempotent"
        );

        match dialect {
            Dialect::OpenAiStrict => {
                assert_openai_strict_rules(name, &converted);
                let strict = Validator::new(&converted).expect("the strict schema compiles");
                for argument in &arguments {
                    let mut filled = argument.clone();
                    fill_nulls(canonical, canonical, &mut filled);
                    strict.check(&filled).unwrap_or_else(|e| {
                        panic!("{name}: the strict schema refuses {filled}: {e}")
                    });
                }
            }
            Dialect::Anthropic => assert_eq!(&converted, canonical, "{name}: Anthropic"),
            Dialect::Gemini => {
                assert_gemini_rules(name, &converted);
                let read = Validator::new(&openapi_as_json_schema(&converted))
                    .expect("the Gemini schema compiles");
                for argument in &arguments {
                    read.check(argument).unwrap_or_else(|e| {
                        panic!("{name}: the Gemini schema refuses {argument}: {e}")
                    });
                }
            }
            _ => unreachable!("a dialect this test does not know"),
        }
    }
}

macro_rules! dialect_test {
    ($name:ident, $ty:ty) => {
        #[test]
        fn $name() {
            check_shape(
                stringify!($name),
                &schema_for::<$ty>(),
                &<$ty as Samples>::samples(),
            );
        }
    };
}

for_each_shape!(dialect_test);
dialect_test!(extras, Extras);

#[test]
fn openai_strict_all_holds_every_shape_that_converts() {
    let mut all = Map::new();
    for (name, canonical) in all_shapes() {
        if let Ok(strict) = convert(&canonical, Dialect::OpenAiStrict) {
            all.insert(name.to_owned(), strict);
        }
    }
    let refused = REFUSED
        .iter()
        .filter(|(f, _, _)| *f == "openai_strict")
        .count();
    assert_eq!(all.len() + refused, all_shapes().len());
    compare_with_golden(
        &dialects_dir().join("openai_strict_all.json"),
        &Value::Object(all),
        "schema_dialects",
    );
}

#[test]
fn every_file_has_a_shape_and_every_canonical_golden_is_covered() {
    let names: Vec<&str> = all_shapes().iter().map(|(n, _)| *n).collect();
    for (_, folder) in DIALECTS {
        let dir = dialects_dir().join(folder);
        for entry in std::fs::read_dir(&dir).expect("a dialect's golden folder exists") {
            let file = entry.expect("a folder entry").file_name();
            let file = file.to_string_lossy();
            let shape = file.strip_suffix(".json").unwrap_or(&file);
            assert!(
                names.contains(&shape) && refusal(folder, shape).is_none(),
                "{folder}/{file} has no shape that converts: delete it"
            );
        }
    }
    // The canonical goldens (schema_golden.rs) are the shapes checked here.
    let canonical_dir = dialects_dir().parent().expect("tests/golden").to_owned();
    for entry in std::fs::read_dir(&canonical_dir).expect("tests/golden exists") {
        let entry = entry.expect("a folder entry");
        if entry.path().is_dir() {
            continue;
        }
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let shape = file.strip_suffix(".json").unwrap_or(&file);
        assert!(
            names.contains(&shape),
            "tests/golden/{file} is not checked here"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Refusals and their paths.
// ---------------------------------------------------------------------------------------------

#[derive(JsonSchema)]
#[allow(dead_code)]
struct WithMap {
    name: String,
    scores: HashMap<String, u32>,
}

#[test]
fn a_map_field_is_refused_at_its_path_by_openai_strict_and_gemini() {
    let canonical = schema_for::<WithMap>();
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
        let err = convert(&canonical, dialect).expect_err("a map");
        assert_eq!(err.path, "$.properties.scores", "{err}");
        assert!(err.reason.contains("map"), "{err}");
    }
    // Anthropic takes maps as they are.
    assert_eq!(convert(&canonical, Dialect::Anthropic), Ok(canonical));
}

#[test]
fn a_map_below_arrays_and_options_is_refused_at_its_own_path() {
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Deep {
        rows: Vec<Option<HashMap<String, u32>>>,
    }
    let err = convert(&schema_for::<Deep>(), Dialect::OpenAiStrict).expect_err("a map");
    assert_eq!(err.path, "$.properties.rows.items", "{err}");
}

#[test]
fn a_recursive_type_is_refused_by_gemini_at_its_ref() {
    let err = convert(&schema_for::<Tree>(), Dialect::Gemini).expect_err("recursion");
    assert_eq!(err.path, "$.properties.children.items");
    assert!(err.reason.contains("$ref"), "{err}");
    // The `$ref` inside a nullable `anyOf` is at its branch.
    let parent_only = json!({
        "type": "object",
        "properties": {"parent": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}
    });
    let err = convert(&parent_only, Dialect::Gemini).expect_err("recursion");
    assert_eq!(err.path, "$.properties.parent.anyOf[0]");
    // OpenAI strict and Anthropic keep the recursion.
    assert!(convert(&schema_for::<Tree>(), Dialect::OpenAiStrict).is_ok());
    assert!(convert(&schema_for::<Outline>(), Dialect::OpenAiStrict).is_ok());
}

#[test]
fn a_root_union_is_refused_by_every_dialect() {
    let canonical = schema_for::<Shape>();
    for (dialect, _) in DIALECTS {
        let err = convert(&canonical, dialect).expect_err("a root union");
        assert_eq!(err.path, "$");
        assert!(err.reason.contains("oneOf"), "{err}");
    }
}

#[test]
fn a_root_that_is_not_an_object_is_refused() {
    for root in [
        json!({"type": "string"}),
        json!({"type": ["object", "null"], "properties": {}}),
        json!(true),
        json!([]),
    ] {
        for (dialect, _) in DIALECTS {
            let err = convert(&root, dialect).expect_err("not an object root");
            assert_eq!(err.path, "$", "{dialect}: {root}: {err}");
        }
    }
}

#[test]
fn refusals_name_the_schema_and_the_keyword() {
    let cases = [
        (
            Dialect::OpenAiStrict,
            json!({"type": "object", "properties": {"a": {"$ref": "#", "description": "d"}}}),
            "$.properties.a",
            "sibling",
        ),
        (
            Dialect::OpenAiStrict,
            json!({"type": "object", "properties": {"a": {"type": "object", "patternProperties": {"^x": {}}}}}),
            "$.properties.a",
            "patternProperties",
        ),
        (
            Dialect::OpenAiStrict,
            json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}),
            "$.properties.a",
            "allOf",
        ),
        (
            Dialect::OpenAiStrict,
            json!({"type": "object", "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}]}}}),
            "$.properties.pair",
            "prefixItems",
        ),
        (
            Dialect::OpenAiStrict,
            json!({"type": "object", "properties": {"max-results": {}}}),
            "$.properties[\"max-results\"]",
            "any JSON value",
        ),
        (
            Dialect::Gemini,
            json!({"type": "object", "properties": {"id": {"type": ["string", "integer"]}}}),
            "$.properties.id",
            "union of types",
        ),
        (
            Dialect::Gemini,
            json!({"type": "object", "properties": {"n": {"enum": [1, 2]}}}),
            "$.properties.n",
            "not a string",
        ),
        (
            Dialect::Gemini,
            json!({"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}),
            "$.properties.v",
            "one schema or null",
        ),
        (
            Dialect::Gemini,
            json!({"type": "object", "$defs": {"X": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/X"}}}),
            "$.properties.x",
            "$ref",
        ),
        (
            Dialect::Anthropic,
            json!({"type": "object", "properties": {}, "anyOf": [{"required": ["a"]}]}),
            "$",
            "anyOf",
        ),
    ];
    for (dialect, schema, path, word) in cases {
        let err = convert(&schema, dialect).expect_err("refused");
        assert_eq!(err.path, path, "{err}");
        assert!(err.reason.contains(word), "`{word}` not in: {err}");
    }
}

#[test]
fn the_error_reads_dialect_path_reason() {
    let err = DialectError {
        path: "$.properties.tags".into(),
        reason: "a map".into(),
        dialect: Dialect::OpenAiStrict,
    };
    assert_eq!(
        err.to_string(),
        "OpenAI strict cannot express $.properties.tags: a map"
    );
    let err = convert(&schema_for::<WithMap>(), Dialect::Gemini).expect_err("a map");
    assert!(
        err.to_string()
            .starts_with("Gemini cannot express $.properties.scores: a map"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Rewrites in detail.
// ---------------------------------------------------------------------------------------------

#[test]
fn openai_strict_makes_optional_fields_nullable_once() {
    let canonical = json!({
        "type": "object",
        "properties": {
            "plain": {"type": "integer", "format": "uint32", "minimum": 0, "default": 3},
            "already": {"type": ["string", "null"]},
            "choice": {"type": "string", "enum": ["a", "b"]},
            "tag": {"type": "string", "const": "x", "description": "The tag."},
            "union": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "Either."},
            "node": {"$ref": "#"},
            "when": {"type": "string", "format": "date-time"},
            "uri": {"type": "string", "format": "uri"},
            "needed": {"type": "boolean"}
        },
        "required": ["needed"]
    });
    let strict = convert(&canonical, Dialect::OpenAiStrict).expect("converts");
    assert_eq!(
        strict,
        json!({
            "type": "object",
            "properties": {
                "plain": {"type": ["integer", "null"], "minimum": 0},
                "already": {"type": ["string", "null"]},
                "choice": {"type": ["string", "null"], "enum": ["a", "b", null]},
                "tag": {
                    "description": "The tag.",
                    "anyOf": [{"type": "string", "const": "x"}, {"type": "null"}]
                },
                "union": {
                    "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}],
                    "description": "Either."
                },
                "node": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
                "when": {"type": ["string", "null"], "format": "date-time"},
                "uri": {"type": ["string", "null"]},
                "needed": {"type": "boolean"}
            },
            "required": ["already", "choice", "needed", "node", "plain", "tag", "union", "uri", "when"],
            "additionalProperties": false
        })
    );
}

#[test]
fn openai_strict_lets_the_model_send_null_for_a_default_field_which_the_runtime_refuses() {
    // The documented loosening: `retries` may be absent (serde default) but not null.
    let canonical = schema_for::<Extras>();
    let strict = convert(&canonical, Dialect::OpenAiStrict).expect("converts");
    let mut args = to_json(vec![Extras {
        shape: Shape::Point,
        maybe_shape: None,
        action: Action::Stop,
        retries: 0,
        level: Level::Low,
        tags: None,
        at: None,
    }])
    .remove(0);
    args["retries"] = Value::Null;
    assert!(Validator::new(&strict).expect("compiles").is_valid(&args));
    assert!(
        !Validator::new(&canonical)
            .expect("compiles")
            .is_valid(&args)
    );
    // Without the null (as absent), the canonical schema accepts it.
    strip_nulls(&mut args);
    assert!(
        Validator::new(&canonical)
            .expect("compiles")
            .is_valid(&args)
    );
}

#[test]
fn openai_strict_turns_one_of_into_any_of_below_the_root() {
    let strict = convert(&schema_for::<Extras>(), Dialect::OpenAiStrict).expect("converts");
    let shape = &strict["properties"]["shape"];
    assert!(shape.get("oneOf").is_none());
    let branches = shape["anyOf"].as_array().expect("anyOf");
    assert_eq!(branches.len(), 3);
    assert!(
        branches
            .iter()
            .all(|b| b["additionalProperties"] == json!(false))
    );
}

#[test]
fn gemini_rewrites_nullable_const_and_formats() {
    let canonical = json!({
        "type": "object",
        "properties": {
            "a": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
            "b": {"anyOf": [{"type": "object", "properties": {"x": {"type": "number", "format": "double"}}, "additionalProperties": false}, {"type": "null"}], "description": "B."},
            "c": {"type": "string", "const": "only", "title": "C"},
            "d": {"type": ["string", "null"], "enum": ["x", null]},
            "e": {"type": "integer", "format": "uint64", "exclusiveMinimum": 0, "default": 1},
            "f": {"type": "integer", "format": "int16"},
            "g": {"type": "string", "format": "uuid"}
        },
        "required": ["c"],
        "additionalProperties": false,
        "$schema": "https://json-schema.org/draft/2020-12/schema"
    });
    assert_eq!(
        convert(&canonical, Dialect::Gemini).expect("converts"),
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "format": "int64", "minimum": 0, "nullable": true},
                "b": {
                    "type": "object",
                    "properties": {"x": {"type": "number", "format": "double"}},
                    "description": "B.",
                    "nullable": true
                },
                "c": {"type": "string", "enum": ["only"]},
                "d": {"type": "string", "enum": ["x"], "nullable": true},
                "e": {"type": "integer"},
                "f": {"type": "integer", "format": "int32"},
                "g": {"type": "string"}
            },
            "required": ["c"]
        })
    );
}

#[test]
fn anthropic_changes_nothing_but_a_missing_root_type() {
    for (_, canonical) in all_shapes() {
        if let Ok(converted) = convert(&canonical, Dialect::Anthropic) {
            assert_eq!(converted, canonical);
        }
    }
    assert_eq!(
        convert(&json!({"properties": {}}), Dialect::Anthropic),
        Ok(json!({"type": "object", "properties": {}}))
    );
}

#[test]
fn the_input_is_not_modified_and_method_and_function_agree() {
    let canonical = schema_for::<Optional>();
    let before = canonical.clone();
    for (dialect, _) in DIALECTS {
        assert_eq!(dialect.convert(&canonical), convert(&canonical, dialect));
    }
    assert_eq!(canonical, before);
}

// ---------------------------------------------------------------------------------------------
// Depth.
// ---------------------------------------------------------------------------------------------

/// An object schema with `levels` nested array schemas under one property.
fn nested_arrays(levels: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 0..levels {
        schema = json!({"type": "array", "items": schema});
    }
    json!({"type": "object", "properties": {"deep": schema}, "required": ["deep"]})
}

#[test]
fn nesting_is_bounded() {
    // The root and `deep` are two levels; `MAX_DEPTH` - 1 arrays stay within the bound.
    let within = nested_arrays(MAX_DEPTH - 1);
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini, Dialect::Anthropic] {
        assert!(convert(&within, dialect).is_ok(), "{dialect}");
    }
    for levels in [MAX_DEPTH, 1000] {
        let deep = nested_arrays(levels);
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            let err = convert(&deep, dialect).expect_err("too deep");
            assert!(err.reason.contains("nested more than 128"), "{err}");
            assert!(err.path.starts_with("$.properties.deep.items.items"));
            assert_eq!(err.path.matches(".items").count(), MAX_DEPTH);
        }
    }
}
