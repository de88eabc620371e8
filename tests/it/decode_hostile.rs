//! Hostile argument texts against typed decoding: no input the tool's JSON schema rejects (as the
//! validator reads it), and no text the JSON parser refuses, reaches a tool by either decoding
//! path; and values the schema accepts are not refused where serde can hold them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::support::sync::block_on;
use phaseo_agent::__internals::typed_decoder;
use phaseo_agent::{Tool, ToolContext, ToolInput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Decodes `text` as the runtime does for a typed tool over `I`.
fn decode<I: ToolInput>(text: &str) -> Result<I, String> {
    typed_decoder::<I>().expect("the schema compiles")(text)
}

/// Invokes a typed tool over `I` on `text`: the input it ran on, or the call's error.
fn invoke<I: ToolInput + Clone>(text: &str) -> Result<I, String> {
    let ran: Arc<Mutex<Option<I>>> = Arc::default();
    let record = ran.clone();
    let tool = Tool::typed("probe", "A probe", move |input: I, _ctx| {
        let record = record.clone();
        async move {
            *record.lock().expect("not poisoned") = Some(input);
            Ok::<_, std::convert::Infallible>(())
        }
    });
    let outcome = block_on(tool.invoke(text, &ToolContext::detached()));
    let input = ran.lock().expect("not poisoned").take();
    match (outcome, input) {
        (Ok(_), Some(input)) => Ok(input),
        (Ok(out), None) => panic!("the call succeeded without running the tool: {out}"),
        (Err(e), None) => Err(e.to_string()),
        (Err(e), Some(_)) => panic!("the tool ran but the call failed: {e}"),
    }
}

/// The text must not reach the tool, and the error must be the parser's.
#[track_caller]
fn refused_as_not_json<I: ToolInput + Clone + std::fmt::Debug>(text: &str) {
    assert!(
        serde_json::from_str::<Value>(text).is_err(),
        "the parser reads {text}"
    );
    let error = decode::<I>(text).expect_err(text);
    assert!(error.contains("not valid JSON"), "{text}: {error}");
    let error = invoke::<I>(text).expect_err(text);
    assert!(error.contains("not valid JSON"), "{text}: {error}");
}

// 1. The fast path refuses what the parser refuses.

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Deploy {
    environment: String,
}

/// `depth` arrays nested around `0`.
fn nested(depth: usize) -> String {
    format!("{}0{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn an_ignored_field_is_parsed_as_strictly_as_any_other() {
    for note in [
        "1e400".to_owned(),
        "-1e400".to_owned(),
        r#""\ud800""#.to_owned(),
        r#""\udc00x""#.to_owned(),
        r#"["\ud800"]"#.to_owned(),
        r#"{"k": 1e999}"#.to_owned(),
        nested(200),
        format!(r#"{{"a": {}}}"#, nested(127)),
    ] {
        refused_as_not_json::<Deploy>(&format!(
            r#"{{"environment": "production", "note": {note}}}"#
        ));
    }
    // Just within the parser's limits: accepted.
    let deep = format!(r#"{{"environment": "p", "note": {}}}"#, nested(126));
    assert!(serde_json::from_str::<Value>(&deep).is_ok());
    assert_eq!(invoke::<Deploy>(&deep).unwrap().environment, "p");
    let fine = r#"{"environment": "p", "note": ["\ud83d\ude00", 1e300, -0, {"k": "\u00e9"}]}"#;
    assert_eq!(invoke::<Deploy>(fine).unwrap().environment, "p");
}

#[test]
fn a_tool_without_parameters_parses_its_arguments_too() {
    refused_as_not_json::<()>(r#"{"a": "\ud800"}"#);
    refused_as_not_json::<()>(r#"{"a": 1e400}"#);
    refused_as_not_json::<()>(&format!(r#"{{"a": {}}}"#, nested(200)));
    assert!(invoke::<()>(r#"{"a": "x"}"#).is_ok());
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Free {
    payload: Value,
    rest: HashMap<String, Value>,
}

#[test]
fn values_of_any_shape_are_parsed_strictly() {
    refused_as_not_json::<Free>(r#"{"payload": "\ud800", "rest": {}}"#);
    refused_as_not_json::<Free>(r#"{"payload": 1, "rest": {"x": 1e400}}"#);
    refused_as_not_json::<Free>(&format!(r#"{{"payload": {}, "rest": {{}}}}"#, nested(200)));
}

/// Reads itself as bytes (as `serde_bytes` does), and describes a string.
#[derive(Debug, Clone, PartialEq)]
struct Raw(Vec<u8>);

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl serde::de::Visitor<'_> for Bytes {
            type Value = Raw;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Raw, E> {
                Ok(Raw(v.to_vec()))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Raw, E> {
                Ok(Raw(v.as_bytes().to_vec()))
            }
        }
        de.deserialize_bytes(Bytes)
    }
}

impl JsonSchema for Raw {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Raw".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Blob {
    data: Raw,
}

#[test]
fn a_string_read_as_bytes_is_parsed_strictly() {
    // A raw control character: the parser refuses it in a string; read as bytes, serde_json takes it.
    refused_as_not_json::<Blob>("{\"data\": \"a\u{1}b\"}");
    refused_as_not_json::<Blob>(r#"{"data": "\ud800"}"#);
    assert_eq!(
        invoke::<Blob>(r#"{"data": "a\nb"}"#).unwrap().data,
        Raw(b"a\nb".to_vec())
    );
}

// 2. A serde alias never carries a value past the schema.

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Limited {
    #[schemars(range(max = 10))]
    #[serde(alias = "lim")]
    limit: Option<u32>,
    #[schemars(range(max = 10))]
    #[serde(alias = "cnt", default)]
    count: u32,
}

/// The same, with a keyword the strict decoder does not check: every call takes the slow path.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct LimitedSlow {
    #[schemars(range(max = 10))]
    #[serde(alias = "lim")]
    limit: Option<u32>,
    #[schemars(regex(pattern = "^[a-z]*$"))]
    code: Option<String>,
}

#[test]
fn an_alias_is_refused_not_read_past_the_schema() {
    for text in [
        r#"{"lim": 200}"#,
        r#"{"cnt": 200}"#,
        r#"{"lim": 5}"#,
        r#"{"limit": 1, "cnt": 2}"#,
    ] {
        let error = invoke::<Limited>(text).expect_err(text);
        assert!(error.contains("invalid tool input: $."), "{text}: {error}");
    }
    for text in [r#"{"lim": 200}"#, r#"{"lim": 5, "code": "x"}"#] {
        let error = invoke::<LimitedSlow>(text).expect_err(text);
        assert!(error.contains("invalid tool input: $."), "{text}: {error}");
    }
    assert_eq!(
        invoke::<Limited>(r#"{"limit": 3, "count": 4, "other": [1e300]}"#).unwrap(),
        Limited {
            limit: Some(3),
            count: 4
        }
    );
    assert_eq!(
        invoke::<LimitedSlow>(r#"{"limit": 3, "code": "ab", "other": 1}"#)
            .unwrap()
            .limit,
        Some(3)
    );
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct WithExtra {
    name: String,
    #[serde(flatten)]
    extra: HashMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct WithAnything {
    name: String,
    #[serde(flatten)]
    extra: HashMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Flattened {
    name: String,
    #[serde(flatten)]
    inner: Deploy,
}

#[test]
fn flattened_maps_and_structs_still_read_their_keys() {
    let with = invoke::<WithExtra>(r#"{"name": "a", "x": 1, "y": 2}"#).unwrap();
    assert_eq!(
        with.extra,
        HashMap::from([("x".into(), 1), ("y".into(), 2)])
    );
    assert!(invoke::<WithExtra>(r#"{"name": "a", "x": -1}"#).is_err());
    let any = invoke::<WithAnything>(r#"{"name": "a", "x": [1.5]}"#).unwrap();
    assert_eq!(any.extra["x"], serde_json::json!([1.5]));
    let flat = invoke::<Flattened>(r#"{"name": "a", "environment": "e"}"#).unwrap();
    assert_eq!(flat.inner.environment, "e");
}

// 3. An untagged enum whose variants overlap is refused when the tool is made.

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Pick {
    Small {
        #[schemars(range(max = 10))]
        x: u8,
    },
    Named {
        y: String,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Picker {
    pick: Pick,
}

/// Untagged, but each variant is a different kind of JSON value: serde's choice is the schema's.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Id {
    Number(u64),
    Name(String),
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct ById {
    id: Id,
    other: Option<Id>,
}

#[test]
fn an_untagged_enum_with_overlapping_variants_is_refused() {
    let error = typed_decoder::<Picker>().err().expect("refused");
    assert!(error.contains("untagged"), "{error}");
    // The call never runs the tool, whatever its arguments.
    let error = invoke::<Picker>(r#"{"pick": {"x": 200, "y": "s"}}"#).unwrap_err();
    assert!(error.contains("unusable"), "{error}");
    let error = invoke::<Picker>(r#"{"pick": {"x": 1}}"#).unwrap_err();
    assert!(error.contains("unusable"), "{error}");

    assert_eq!(
        invoke::<ById>(r#"{"id": 7, "other": "seven"}"#).unwrap(),
        ById {
            id: Id::Number(7),
            other: Some(Id::Name("seven".into()))
        }
    );
    assert_eq!(invoke::<ById>(r#"{"id": 7.0}"#).unwrap().id, Id::Number(7));
    assert!(invoke::<ById>(r#"{"id": -7}"#).is_err());
}

// 4. Numbers: what an `f32` cannot hold is refused; integers written as floats are integers.

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Numbers {
    ratio: f32,
    count: u32,
    delta: i64,
    small: Option<u8>,
}

/// The same, always on the slow path.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct NumbersSlow {
    ratio: f32,
    count: u32,
    delta: i64,
    small: Option<u8>,
    #[schemars(regex(pattern = "^[a-z]*$"))]
    code: Option<String>,
}

#[test]
fn an_f32_out_of_range_is_refused_on_both_paths() {
    for ratio in ["1e300", "-1e300", "1e39", "1e-50", "-1e-46"] {
        let text = format!(r#"{{"ratio": {ratio}, "count": 1, "delta": 1}}"#);
        let error = invoke::<Numbers>(&text).expect_err(&text);
        assert!(
            error.contains("invalid tool input: $.ratio"),
            "{text}: {error}"
        );
        let error = invoke::<NumbersSlow>(&text).expect_err(&text);
        assert!(
            error.contains("invalid tool input: $.ratio"),
            "{text}: {error}"
        );
    }
    for (ratio, expected) in [
        ("1e38", 1e38f32),
        ("1e-40", 1e-40),
        ("-0", -0.0),
        ("0.5", 0.5),
    ] {
        let text = format!(r#"{{"ratio": {ratio}, "count": 1, "delta": 1}}"#);
        assert_eq!(invoke::<Numbers>(&text).unwrap().ratio, expected, "{text}");
        assert_eq!(
            invoke::<NumbersSlow>(&text).unwrap().ratio,
            expected,
            "{text}"
        );
    }
}

#[test]
fn integers_written_as_floats_are_integers() {
    for (text, count, delta, small) in [
        (r#"{"ratio": 1, "count": 1.0, "delta": -3.0}"#, 1, -3, None),
        (r#"{"ratio": 1, "count": 1e2, "delta": -0}"#, 100, 0, None),
        (
            r#"{"ratio": 1, "count": -0.0, "delta": 1E1, "small": 2.0}"#,
            0,
            10,
            Some(2),
        ),
        (
            r#"{"ratio": 1, "count": 4294967295.0, "delta": -9007199254740992.0}"#,
            u32::MAX,
            -(1 << 53),
            None,
        ),
    ] {
        let fast = invoke::<Numbers>(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            (fast.count, fast.delta, fast.small),
            (count, delta, small),
            "{text}"
        );
        let slow = invoke::<NumbersSlow>(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            (slow.count, slow.delta, slow.small),
            (count, delta, small),
            "{text}"
        );
    }
    for text in [
        r#"{"ratio": 1, "count": 1.5, "delta": 1}"#,
        r#"{"ratio": 1, "count": -1.0, "delta": 1}"#,
        r#"{"ratio": 1, "count": 4294967296.0, "delta": 1}"#,
        r#"{"ratio": 1, "count": 1, "delta": 1, "small": 256.0}"#,
        r#"{"ratio": 1, "count": 1, "delta": 1e19}"#,
        // Beyond 2^53 a float may not be the integer the text wrote: -2^63 - 1 parses as -2^63.
        r#"{"ratio": 1, "count": 1, "delta": -9223372036854775809}"#,
        r#"{"ratio": 1, "count": 1, "delta": 9007199254740994.0}"#,
    ] {
        let error = invoke::<Numbers>(text).expect_err(text);
        assert!(error.contains("invalid tool input: $."), "{text}: {error}");
        let error = invoke::<NumbersSlow>(text).expect_err(text);
        assert!(error.contains("invalid tool input: $."), "{text}: {error}");
    }
}

/// An internally tagged enum: serde buffers the object before it reads the variant, out of the
/// strict wrapper's sight.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(tag = "action", rename_all = "lowercase")]
enum Action {
    Scale { replicas: u32, surge: Option<i16> },
    Drain { grace: f64, note: Value },
}

/// An adjacently tagged enum and an untagged one, buffered the same way.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(tag = "unit", content = "amount", rename_all = "lowercase")]
enum Wait {
    Seconds(u64),
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Port {
    Number(u16),
    Name(String),
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Plan {
    action: Action,
    wait: Option<Wait>,
    port: Option<Port>,
}

#[test]
fn integers_written_as_floats_are_integers_inside_enums_too() {
    let plan = |action: &str, rest: &str| format!(r#"{{"action": {action}{rest}}}"#);
    for (text, replicas, surge) in [
        (plan(r#"{"action": "scale", "replicas": 1.0}"#, ""), 1, None),
        (
            plan(r#"{"action": "scale", "replicas": 1e2, "surge": -0}"#, ""),
            100,
            Some(0),
        ),
        (
            plan(r#"{"action": "scale", "replicas": 3, "surge": -2.0}"#, ""),
            3,
            Some(-2),
        ),
    ] {
        let input = invoke::<Plan>(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(input.action, Action::Scale { replicas, surge }, "{text}");
    }
    let text = plan(
        r#"{"action": "scale", "replicas": 2}"#,
        r#", "wait": {"unit": "seconds", "amount": 30.0}, "port": 8080.0"#,
    );
    let input = invoke::<Plan>(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(input.wait, Some(Wait::Seconds(30)));
    assert_eq!(input.port, Some(Port::Number(8080)));
    // A float the type wants stays the same number.
    let text = plan(r#"{"action": "drain", "grace": 2.0, "note": null}"#, "");
    let input = invoke::<Plan>(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(
        input.action,
        Action::Drain {
            grace: 2.0,
            note: Value::Null
        }
    );
    // What the schema refuses, or the type cannot hold, is still refused.
    for action in [
        r#"{"action": "scale", "replicas": 1.5}"#,
        r#"{"action": "scale", "replicas": -1.0}"#,
        r#"{"action": "scale", "replicas": 4294967296.0}"#,
        r#"{"action": "scale", "replicas": 1, "surge": 40000.0}"#,
        r#"{"action": "scale", "replicas": 9007199254740994.0}"#,
    ] {
        let text = plan(action, "");
        let error = invoke::<Plan>(&text).expect_err(&text);
        assert!(
            error.starts_with("invalid tool input: $"),
            "{text}: {error}"
        );
    }
}
