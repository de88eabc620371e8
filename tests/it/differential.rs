//! Differential test of typed decoding against the full JSON Schema validator, which the fast path
//! that `benches/dispatch.rs` measures must agree with: for every golden schema shape
//! (`shapes/mod.rs`) and a few more (numbers, serde attributes, an untagged enum), many generated
//! arguments, valid and near-valid (wrong types, arrays in place of objects, missing and extra
//! keys, nulls, alias keys, wrong enum tags), now and then with a fragment of hostile text put
//! anywhere in them (text the JSON parser refuses: lone surrogates, numbers out of range, nesting
//! past its limit; and text it reads that is easy to misread: `1e2`, `-0`, `3.0`, `1e300`,
//! `1e-50`), go through `Tool::typed(..).invoke(..)`, and
//!
//! - whenever the JSON parser refuses the text, the tool does not run and the error is the
//!   parser's;
//! - whenever serde would read a key the schema does not list into a field (an alias), the tool
//!   does not run;
//! - whenever the validator rejects the arguments (on the tool's advertised schema), the tool does
//!   not run and the call fails with `Invalid tool input: $...`;
//! - whenever the validator accepts them and serde can decode them, the tool runs, on exactly
//!   what serde decodes (an integer-valued float read as the integer where the type wants one), but
//!   for what the input type cannot hold (an `f32` out of range), which is refused;
//! - whenever serde cannot decode them, the tool does not run.
//!
//! Inputs are generated from the advertised schema itself, so the generator covers every shape
//! the same way. Each shape runs `CASES` cases.

use crate::{for_each_shape, shapes};

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::support::sync::block_on;
use phaseo_agent::__internals::strict_accepts as __strict_accepts;
use phaseo_agent::schema::Validator;
use phaseo_agent::{Tool, ToolContext, ToolInput};
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};
use shapes::*;

const CASES: u32 = 2000;

/// How deep the generator follows a recursive schema before it stops nesting.
const MAX_DEPTH: u32 = 4;

/// Keys the generator adds beside the schema's own: serde aliases and Rust names of renamed fields
/// (`shapes::Renamed`), a tag, and plain strangers.
const EXTRA_KEYS: &[&str] = &[
    "limit",
    "includeDrafts",
    "ticket_id",
    "max_results",
    "with_drafts",
    "kind",
    "extra",
    "",
];

/// Any JSON value, small.
fn junk() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![0i64, 1, -1, 7, 256, 70_000, i64::MIN]).prop_map(Value::from),
        prop::sample::select(vec![0.5f64, -2.25, 1.0, 1e300]).prop_map(Value::from),
        prop::sample::select(vec!["", "x", "fast", "circle", "ab"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(EXTRA_KEYS), inner), 0..3).prop_map(
                |entries| Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect()
                )
            ),
        ]
    })
    .boxed()
}

/// Integers within the schema's bounds, mostly, and the mistakes around them: just outside, a
/// fraction, and an integer-valued float (an integer to the schema, not to serde).
fn integers(map: &Map<String, Value>) -> BoxedStrategy<Value> {
    let low = map
        .get("minimum")
        .and_then(Value::as_i64)
        .unwrap_or(i64::MIN);
    let high = map
        .get("maximum")
        .and_then(Value::as_i64)
        .unwrap_or(i64::MAX);
    let edges = vec![
        json!(low),
        json!(high),
        big(i128::from(low) - 1),
        big(i128::from(high) + 1),
        json!(u64::MAX),
        json!(2.0),
        json!(2.5),
    ];
    prop_oneof![
        6 => (low..=high).prop_map(Value::from),
        2 => (low.max(-3)..=high.min(300)).prop_map(Value::from),
        1 => prop::sample::select(edges),
    ]
    .boxed()
}

/// An integer beyond `i64` and `u64` too, as JSON reads it (a float).
fn big(n: i128) -> Value {
    serde_json::from_str(&n.to_string()).expect("an integer is JSON")
}

/// Strings of the schema's length, mostly.
fn strings(map: &Map<String, Value>) -> BoxedStrategy<Value> {
    let odd = prop::sample::select(vec!["", "ab", "é", "\u{1F600}", "a\"b", "Fast"])
        .prop_map(Value::from);
    if map.get("maxLength") == Some(&json!(1)) {
        return prop_oneof![6 => any::<char>().prop_map(|c| Value::from(c.to_string())), 1 => odd]
            .boxed();
    }
    prop_oneof![6 => "[a-z]{0,4}".prop_map(Value::from), 1 => odd].boxed()
}

/// Near-valid values for `schema` (a position in `root`): mostly what the schema describes, with
/// mistakes mixed in at every level.
fn arb(schema: &Value, root: &Value, depth: u32) -> BoxedStrategy<Value> {
    if depth > MAX_DEPTH {
        return prop_oneof![Just(Value::Null), Just(json!({})), Just(json!([]))].boxed();
    }
    let described = described(schema, root, depth);
    // Mistakes at the root are rarer per input than below it, where there are many nodes.
    let junk_weight = if depth == 0 { 6 } else { 1 };
    prop_oneof![40 => described, junk_weight => junk()].boxed()
}

/// What the schema describes (itself with mistakes further down).
fn described(schema: &Value, root: &Value, depth: u32) -> BoxedStrategy<Value> {
    let Value::Object(map) = schema else {
        return junk(); // `true`: anything goes.
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let target = reference
            .strip_prefix('#')
            .and_then(|fragment| root.pointer(fragment))
            .expect("golden schemas have no dangling `$ref`");
        return arb(target, root, depth + 1);
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(keyword) {
            return Union::new(branches.iter().map(|b| described(b, root, depth))).boxed();
        }
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return wrong_tags(values.clone());
    }
    if let Some(value) = map.get("const") {
        return wrong_tags(vec![value.clone()]);
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return junk(),
    };
    Union::new(types.into_iter().map(|t| {
        match t {
            "object" => object(map, root, depth),
            "array" => {
                let items = map.get("items").cloned().unwrap_or(Value::Bool(true));
                let rest = prop::collection::vec(arb(&items, root, depth + 1), 0..4);
                let prefix: Vec<BoxedStrategy<Value>> = map
                    .get("prefixItems")
                    .and_then(Value::as_array)
                    .map(|p| p.iter().map(|s| arb(s, root, depth + 1)).collect())
                    .unwrap_or_default();
                let cut = 0..=prefix.len();
                (prefix, cut, rest)
                    .prop_map(|(mut prefix, cut, rest)| {
                        // Sometimes short, sometimes with more items after the prefix.
                        if cut < prefix.len() {
                            prefix.truncate(cut);
                        } else {
                            prefix.extend(rest);
                        }
                        Value::Array(prefix)
                    })
                    .boxed()
            }
            "string" => strings(map),
            "integer" => integers(map),
            "number" => prop_oneof![
                integers(map),
                prop::sample::select(vec![0.5f64, -1.25, 1e300, -0.0]).prop_map(Value::from)
            ]
            .boxed(),
            "boolean" => any::<bool>().prop_map(Value::from).boxed(),
            _ => Just(Value::Null).boxed(),
        }
    }))
    .boxed()
}

/// An enum's values, and the mistakes a model makes with them: other case, other tags, the
/// externally tagged `{"tag": null}` form serde_json also reads a unit variant from.
fn wrong_tags(values: Vec<Value>) -> BoxedStrategy<Value> {
    let strings: Vec<String> = values
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let mut wrong = vec![json!("unknown"), json!(1), json!(null)];
    for s in &strings {
        let mut upper = s.clone();
        upper[..1].make_ascii_uppercase();
        wrong.push(Value::String(upper));
        wrong.push(json!({ s.as_str(): null }));
        wrong.push(json!([s]));
    }
    prop_oneof![12 => prop::sample::select(values), 1 => prop::sample::select(wrong)].boxed()
}

/// An object of the schema's properties (required ones mostly present, optional ones sometimes),
/// extra and alias keys now and then, additional properties for a map; or the same values as an
/// array, which serde_json decodes into a struct in field order.
fn object(map: &Map<String, Value>, root: &Value, depth: u32) -> BoxedStrategy<Value> {
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let properties: Vec<(String, Value)> = map
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    // Required properties first, in `required` order (schemars lists them in field order).
    // A required name that is not a property may hold anything the additional properties allow.
    let additional_schema = map
        .get("additionalProperties")
        .cloned()
        .unwrap_or(Value::Bool(true));
    let mut ordered: Vec<(String, Value)> = required
        .iter()
        .map(|name| {
            let schema = properties.iter().find(|(n, _)| n == name).map(|(_, s)| s);
            (name.clone(), schema.unwrap_or(&additional_schema).clone())
        })
        .collect();
    ordered.extend(
        properties
            .iter()
            .filter(|(n, _)| !required.contains(n))
            .cloned(),
    );
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = ordered
        .iter()
        .map(|(name, schema)| {
            let present = if required.contains(name) { 0.97 } else { 0.6 };
            // Now and then under another key: an alias, a Rust name, a stranger.
            let key = prop_oneof![
                30 => Just(name.clone()),
                1 => prop::sample::select(EXTRA_KEYS).prop_map(str::to_owned),
            ];
            (
                key,
                prop::option::weighted(present, arb(schema, root, depth + 1)),
            )
                .prop_map(|(key, v)| v.map(|v| (key, v)))
                .boxed()
        })
        .collect();
    let additional = match map.get("additionalProperties") {
        Some(schema @ Value::Object(_)) => {
            prop::collection::vec(("[a-z ]{0,3}", arb(schema, root, depth + 1)), 0..3).boxed()
        }
        _ => Just(Vec::new()).boxed(),
    };
    let plausible = prop_oneof![
        junk(),
        (0u32..100).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "[a-z]{1,3}".prop_map(Value::from),
    ];
    let extra = prop::collection::vec((prop::sample::select(EXTRA_KEYS), plausible), 0..2);
    let keyed = (fields.clone(), additional, prop::bool::weighted(0.1), extra).prop_map(
        |(fields, additional, with_extra, extra)| {
            let mut out = Map::new();
            for (k, v) in fields.into_iter().flatten().chain(additional) {
                out.insert(k, v);
            }
            if with_extra {
                for (k, v) in extra {
                    out.insert(k.to_owned(), v);
                }
            }
            Value::Object(out)
        },
    );
    let positional = fields
        .prop_map(|fields| Value::Array(fields.into_iter().flatten().map(|(_, v)| v).collect()));
    prop_oneof![25 => keyed, 1 => positional].boxed()
}

/// The argument texts a model may send for a value: compact, pretty, and `""` for `{}`.
fn texts(value: &Value) -> Vec<String> {
    let mut out = vec![value.to_string()];
    if let Ok(pretty) = serde_json::to_string_pretty(value) {
        out.push(pretty);
    }
    if value == &json!({}) {
        out.push(String::new());
        out.push(" \n".into());
    }
    out
}

/// What serde decodes from a value, as the runtime would: a unit-like input (`()`) decodes from
/// `null`, because it advertises (and so accepts) an empty object; and an integer-valued float
/// (`2.0`, an integer to the schema) is read as the integer where serde refuses the float.
fn serde_decodes<T: ToolInput>(value: &Value, unit_like: bool) -> Option<T> {
    let value = if unit_like && value.is_object() {
        Value::Null
    } else {
        value.clone()
    };
    serde_json::from_value(value.clone())
        .ok()
        .or_else(|| serde_json::from_value(integral(value)).ok())
}

/// The value with every integer-valued float within 2^53 (exact) made an integer.
fn integral(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().expect("a float");
            if f.fract() == 0.0 && f.abs() <= (1u64 << 53) as f64 {
                if f >= 0.0 {
                    json!(f as u64)
                } else {
                    json!(f as i64)
                }
            } else {
                Value::Number(n)
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(integral).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, integral(v))).collect())
        }
        other => other,
    }
}

/// The value without the keys its schema does not list, in objects whose schema lists properties
/// and says nothing of other keys (the keys a `#[serde(alias)]` could stand in for a property
/// under). Inside `anyOf`/`oneOf` (but `Option`'s) and maps, nothing is removed.
fn without_strangers(value: &Value, schema: &Value, root: &Value, depth: u32) -> Value {
    let Value::Object(map) = schema else {
        return value.clone();
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        if depth > 16 {
            return value.clone();
        }
        let target = reference
            .strip_prefix('#')
            .and_then(|fragment| root.pointer(fragment))
            .expect("golden schemas have no dangling `$ref`");
        return without_strangers(value, target, root, depth + 1);
    }
    if let Some(Value::Array(branches)) = map.get("anyOf") {
        // `Option<T>`: the non-null branch.
        if let [a, b] = branches.as_slice() {
            let other = if b == &json!({"type": "null"}) { a } else { b };
            if value.is_null() {
                return Value::Null;
            }
            return without_strangers(value, other, root, depth + 1);
        }
        return value.clone();
    }
    match value {
        Value::Object(entries) => {
            let properties = map.get("properties").and_then(Value::as_object);
            let additional = map
                .get("additionalProperties")
                .cloned()
                .unwrap_or(json!(true));
            // With a schema for them, other keys are a map's (`#[serde(flatten)]`): kept.
            let listed = properties.is_some_and(|p| !p.is_empty()) && additional == json!(true);
            Value::Object(
                entries
                    .iter()
                    .filter(|(k, _)| !listed || properties.is_some_and(|p| p.contains_key(*k)))
                    .map(|(k, v)| {
                        let schema = properties.and_then(|p| p.get(k)).unwrap_or(&additional);
                        (k.clone(), without_strangers(v, schema, root, depth + 1))
                    })
                    .collect(),
            )
        }
        Value::Array(items) => {
            let prefix = map.get("prefixItems").and_then(Value::as_array);
            let rest = map.get("items").cloned().unwrap_or(json!(true));
            Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let schema = prefix.and_then(|p| p.get(i)).unwrap_or(&rest);
                        without_strangers(v, schema, root, depth + 1)
                    })
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// How the tool must treat the arguments of a unit-like input (`()`).
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    /// Not unit-like.
    No,
    /// Runs on `{}` (and `""`); other objects may be refused.
    EmptyObject,
    /// Runs on every object, as the advertised `{"type":"object","properties":{}}` allows.
    AnyObject,
}

/// Where a generated value gets a hostile fragment of text: this string, as JSON writes it, is
/// replaced by the fragment.
const HOLE: &str = "\u{0}hole";

/// Argument text the JSON parser refuses, and text it reads that is easy to misread: put in place
/// of a value (a property's, an element's, an unknown key's), anywhere in the arguments.
fn fragments() -> Vec<String> {
    let nested = |depth: usize| format!("{}0{}", "[".repeat(depth), "]".repeat(depth));
    vec![
        // Refused by the parser.
        "1e400".into(),
        "-1e400".into(),
        r#""\ud800""#.into(),
        r#""x\udfff""#.into(),
        r#"{"k": "\udc00"}"#.into(),
        nested(130),
        // Read by the parser.
        "1e2".into(),
        "-0".into(),
        "-0.0".into(),
        "3.0".into(),
        "1e-400".into(),
        "1e300".into(),
        "1e-50".into(),
        "1e39".into(),
        "4294967296.0".into(),
        "-9223372036854775809".into(),
        r#""\ud83d\ude00""#.into(),
        r#""\u00e9""#.into(),
        nested(100),
    ]
}

/// Puts [`HOLE`] somewhere in the value: in place of a value at any depth, or under a new key.
fn with_hole(value: &Value, choice: &[usize]) -> Value {
    // The path first, read-only; then the change, through a JSON pointer.
    let mut pointer = String::new();
    let mut at = value;
    for &pick in choice {
        if pick % 5 == 0 {
            break;
        }
        match at {
            Value::Object(map) if !map.is_empty() => {
                let (key, next) = map.iter().nth(pick % map.len()).expect("in range");
                pointer.push_str(&format!("/{}", key.replace('~', "~0").replace('/', "~1")));
                at = next;
            }
            Value::Array(items) if !items.is_empty() => {
                let i = pick % items.len();
                pointer.push_str(&format!("/{i}"));
                at = &items[i];
            }
            _ => break,
        }
    }
    let mut out = value.clone();
    let target = out.pointer_mut(&pointer).expect("the path exists");
    match target {
        Value::Object(map) if choice.len() % 2 == 0 => {
            let key = EXTRA_KEYS[choice.len() % EXTRA_KEYS.len()];
            map.insert(key.to_owned(), json!(HOLE));
        }
        other => *other = json!(HOLE),
    }
    out
}

/// A generated value, and now and then a hostile fragment of text in it.
fn arb_text(schema: &Value) -> BoxedStrategy<(Value, Option<String>)> {
    let value = arb(schema, schema, 0);
    let holed = (
        value.clone(),
        prop::collection::vec(any::<usize>(), 0..5),
        prop::sample::select(fragments()),
    )
        .prop_map(|(value, choice, fragment)| {
            let text = with_hole(&value, &choice)
                .to_string()
                .replace(&json!(HOLE).to_string(), &fragment);
            (value, Some(text))
        });
    prop_oneof![6 => value.prop_map(|v| (v, None)), 1 => holed].boxed()
}

fn differential<T: ToolInput + PartialEq + std::fmt::Debug + Clone>(name: &str, unit: Unit) {
    differential_refusing::<T>(name, unit, |_| false)
}

/// `refuse` says which arguments the schema accepts but the decoder must refuse (an `f32` out of
/// range, an alias the generic check cannot see).
fn differential_refusing<T: ToolInput + PartialEq + std::fmt::Debug + Clone>(
    name: &str,
    unit: Unit,
    refuse: fn(&Value) -> bool,
) {
    let unit_like = unit != Unit::No;
    let ran: Arc<Mutex<Option<T>>> = Arc::default();
    let record = ran.clone();
    let tool = Tool::typed(name, "A shape", move |input: T, _ctx| {
        let record = record.clone();
        async move {
            *record.lock().expect("not poisoned") = Some(input);
            Ok::<_, std::convert::Infallible>(())
        }
    });
    let schema = tool.parameters().clone();
    let validator = Validator::new(&schema).expect("the advertised schema compiles");
    // The same schema behind the validator alone: its refusals must read the same.
    let json_tool = Tool::new(name, "A shape", schema.clone(), |input, _ctx| Ok(input));
    let ctx = ToolContext::detached();
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let (accepted, ran_count) = (Cell::new(0u32), Cell::new(0u32));
    let result = runner.run(&arb_text(&schema), |(value, hostile)| {
        let texts = match &hostile {
            None => texts(&value),
            Some(text) => vec![text.clone()],
        };
        for (i, text) in texts.into_iter().enumerate() {
            let outcome = block_on(tool.invoke(&text, &ctx));
            let input = ran.lock().expect("not poisoned").take();
            ran_count.set(ran_count.get() + u32::from(input.is_some()));
            // What the text holds, as the JSON parser reads it.
            let parsed = if text.trim().is_empty() {
                Ok(json!({}))
            } else {
                serde_json::from_str::<Value>(&text)
            };
            let Ok(value) = parsed else {
                prop_assert!(input.is_none(), "ran on text the parser refuses: {text}");
                let error = outcome.expect_err("refused").to_string();
                prop_assert!(error.contains("not valid JSON"), "{text}: {error}");
                continue;
            };
            let valid = validator.is_valid(&value);
            if i == 0 {
                accepted.set(accepted.get() + u32::from(valid));
            }
            let nonblank = if text.trim().is_empty() { "{}" } else { &text };
            if let Ok(strict) = __strict_accepts(&schema, nonblank) {
                prop_assert_eq!(
                    strict,
                    valid,
                    "the strict decoder and the validator differ on {}",
                    text
                );
            }
            let decoded = serde_decodes::<T>(&value, unit_like);
            // The same without the keys the schema does not list: if serde decodes them into
            // something, they were aliases, and must be refused.
            let plain = without_strangers(&value, &schema, &schema, 0);
            let aliased = plain != value
                && decoded.as_ref() != serde_decodes::<T>(&plain, unit_like).as_ref();
            let must_run = unit != Unit::EmptyObject || value == json!({});
            if !valid || aliased || refuse(&value) {
                prop_assert!(input.is_none(), "ran on input the schema rejects: {text}");
                let error = outcome.expect_err("a rejected call fails").to_string();
                prop_assert!(error.starts_with("invalid tool input: $"), "{error}");
                if !valid {
                    // Every error, the same list on both paths: the typed tool's (its fast
                    // path fails, its slow path validates) and the validator's.
                    let listed = validator.check(&value).expect_err("invalid");
                    let by_validator = block_on(json_tool.invoke(&text, &ctx))
                        .expect_err("the validator refuses")
                        .to_string();
                    prop_assert_eq!(&error, &by_validator, "{}", text);
                    if listed.lines().all(|line| line.chars().count() <= 600) {
                        prop_assert_eq!(error, format!("invalid tool input: {listed}"));
                    }
                }
            } else if decoded.is_none() {
                prop_assert!(input.is_none(), "ran on input serde cannot decode: {text}");
            } else if plain != value && input.is_none() {
                // A key the schema does not list, which serde reads as nothing it keeps: refusing
                // it is allowed (the decoder cannot tell a harmless alias from a harmful one).
                let error = outcome.expect_err("a refused call fails").to_string();
                prop_assert!(error.contains("serde alias"), "{text}: {error}");
            } else if let (Some(decoded), true) = (&decoded, must_run) {
                prop_assert_eq!(input.as_ref(), Some(decoded), "{}: {:?}", text, outcome);
            }
        }
        Ok::<(), TestCaseError>(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    // The generator must produce both sides, or the test shows nothing.
    let accepted = accepted.get();
    eprintln!(
        "{name}: {accepted} of {CASES} inputs valid, the tool ran {} times",
        ran_count.get()
    );
    assert!(
        accepted > CASES / 20,
        "{name}: only {accepted} valid inputs"
    );
    assert!(
        accepted < CASES * 95 / 100,
        "{name}: only {} invalid inputs",
        CASES - accepted
    );
    assert!(ran_count.get() > 0, "{name}: the tool never ran");
}

macro_rules! differential_test {
    ($name:ident, $ty:ty) => {
        #[test]
        fn $name() {
            let unit = if stringify!($ty) == "()" {
                Unit::EmptyObject
            } else {
                Unit::No
            };
            differential::<$ty>(stringify!($name), unit);
        }
    };
}

for_each_shape!(differential_test);

/// The advertised schema of a tool without parameters, `{"type":"object","properties":{}}`,
/// accepts every object, as a struct without fields does (serde ignores unknown keys): a tool over
/// `()` runs on each of them.
#[test]
fn unit_runs_on_every_object_its_schema_accepts() {
    differential::<()>("unit", Unit::AnyObject);
}

/// Hand-written schemas with every keyword the strict decoder checks, in the forms schemars does
/// not produce for the golden shapes (custom ranges, lengths, enums without a type, `const`,
/// `prefixItems`, closed objects, typed additional properties, a required name that is not a
/// property, `false`).
fn keyword_schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {
            "ranged": {"type": "integer", "minimum": -2, "maximum": 300},
            "open": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 255},
            "real": {"type": "number", "minimum": -1.5, "exclusiveMaximum": 2.5},
            "word": {"type": "string", "minLength": 2, "maxLength": 3},
        }, "required": ["ranged", "word"]}),
        json!({"type": "object", "properties": {
            "tag": {"enum": ["a", "b", null, true]},
            "fixed": {"const": "fast"},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                     "items": false, "minItems": 1},
            "list": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2,
                     "uniqueItems": false},
        }, "required": ["tag"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"known": {"type": ["string", "null"]}},
               "required": ["must"], "additionalProperties": {"type": "integer", "minimum": 0}}),
        json!({"type": "object", "properties": {
            "never": false,
            "nullable": {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "null"}]},
            "format": {"type": "string", "format": "uuid"},
        }}),
        json!({"type": "object", "$defs": {"Node": {"type": "object", "properties": {
            "value": {"type": "integer", "minimum": 0},
            "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
        }, "required": ["value"]}},
        "properties": {"head": {"$ref": "#/$defs/Node", "description": "The first node."}}}),
    ]
}

/// Reading any schema above (and every golden shape's, in `differential`) as a `Value`, the strict
/// decoder accepts exactly what the validator accepts: its checks have the validator's semantics,
/// both ways, whatever serde would add.
#[test]
fn the_strict_decoder_checks_exactly_what_the_validator_checks() {
    for schema in keyword_schemas() {
        let validator = Validator::new(&schema).expect("the schema compiles");
        assert!(
            __strict_accepts(&schema, "{}").is_ok(),
            "the strict decoder refuses {schema}"
        );
        let accepted = Cell::new(0u32);
        let mut runner = TestRunner::new(Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&arb(&schema, &schema, 0), |value| {
            let valid = validator.is_valid(&value);
            accepted.set(accepted.get() + u32::from(valid));
            let strict = __strict_accepts(&schema, &value.to_string());
            prop_assert_eq!(strict, Ok(valid), "{}", value);
            Ok::<(), TestCaseError>(())
        });
        if let Err(e) = result {
            panic!("{schema}: {e}");
        }
        let accepted = accepted.get();
        assert!(
            accepted > CASES / 20,
            "{schema}: only {accepted} valid inputs"
        );
        assert!(
            accepted < CASES * 95 / 100,
            "{schema}: only {} invalid",
            CASES - accepted
        );
    }
}

/// Numbers serde reads differently from the schema: an `f32` (which cannot hold every number the
/// schema's `"type": "number"` allows), integers the schema also accepts written as floats.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Numbers {
    ratio: f32,
    count: u32,
    #[schemars(range(min = -5, max = 300))]
    delta: i16,
    small: Option<u8>,
    wide: Option<f64>,
}

/// Serde attributes: an alias on a bounded optional field and on a defaulted one, a renamed
/// field, a field serde skips, and a flattened map.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Attributes {
    #[schemars(range(max = 10))]
    #[serde(alias = "max_results")]
    limit: Option<u32>,
    #[schemars(range(max = 10))]
    #[serde(alias = "extra", default)]
    count: u32,
    #[serde(rename = "kind")]
    label: Option<String>,
    #[serde(skip)]
    skipped: u8,
    #[serde(flatten)]
    more: HashMap<String, u16>,
}

/// An untagged enum whose variants are different kinds of JSON value.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum Id {
    Number(u32),
    Name(String),
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct ById {
    id: Id,
    other: Option<Id>,
}

/// Whether a value's `ratio` is a number an `f32` cannot hold (it would become infinite, or zero).
fn ratio_out_of_f32(value: &Value) -> bool {
    value.get("ratio").and_then(Value::as_f64).is_some_and(|v| {
        let single = v as f32;
        single.is_infinite() || (single == 0.0 && v != 0.0)
    })
}

#[test]
fn numbers() {
    differential_refusing::<Numbers>("numbers", Unit::No, ratio_out_of_f32);
}

/// Whether a value of `Attributes` holds one of its aliases (the flattened map's schema checks
/// them as its entries; serde reads them as the fields).
fn attribute_alias(value: &Value) -> bool {
    value.get("max_results").is_some() || value.get("extra").is_some()
}

#[test]
fn serde_attributes() {
    differential_refusing::<Attributes>("serde_attributes", Unit::No, attribute_alias);
}

#[test]
fn untagged_kinds() {
    differential::<ById>("untagged_kinds", Unit::No);
}
