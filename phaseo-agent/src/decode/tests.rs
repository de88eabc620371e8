//! Unit tests of typed decoding: the shape compiler, the strict wrapper, and the slow path's errors.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Decoder, Shape, decode_strict};
use crate::schema::{Validator, schema_for};

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Item {
    label: String,
    weight: i32,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    Careful,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Call {
    name: String,
    small: u8,
    mode: Mode,
    fallback: Option<Mode>,
    item: Option<Item>,
    items: Vec<Item>,
    labels: HashMap<String, Item>,
    pair: (u8, String),
    any: Value,
}

fn call() -> Value {
    json!({
        "name": "n",
        "small": 255,
        "mode": "fast",
        "fallback": null,
        "item": {"label": "a", "weight": -3},
        "items": [{"label": "b", "weight": 1}, {"label": "c", "weight": 2}],
        "labels": {"x": {"label": "d", "weight": 4}},
        "pair": [1, "one"],
        "any": [{"free": "form"}]
    })
}

/// Sets `pointer` in a copy of `base`.
fn with(base: &Value, pointer: &str, value: Value) -> Value {
    let mut out = base.clone();
    *out.pointer_mut(pointer).expect("the pointer exists") = value;
    out
}

fn without(base: &Value, key: &str) -> Value {
    let mut out = base.clone();
    out.as_object_mut().expect("an object").remove(key);
    out
}

/// Whether the fast path alone accepts a text.
fn strict_accepts<I: serde::de::DeserializeOwned + JsonSchema>(text: &str) -> bool {
    let shape = Shape::compile(&schema_for::<I>()).expect("the schema compiles to a shape");
    decode_strict::<I>(&shape, text).is_ok()
}

/// The fast path and the validator agree on `value`, and the decoder's outcome matches.
fn agrees<I: super::ToolInput + std::fmt::Debug>(value: &Value) -> bool {
    let schema = schema_for::<I>();
    let valid = Validator::new(&schema).unwrap().is_valid(value);
    let text = value.to_string();
    let fast = strict_accepts::<I>(&text);
    assert!(
        !fast || valid,
        "the fast path accepted what the schema rejects: {text}"
    );
    let decoded = Decoder::<I>::new(&schema).unwrap().decode(&text);
    if !valid {
        assert!(decoded.is_err(), "decoded what the schema rejects: {text}");
    }
    fast
}

#[test]
fn the_call_shape_compiles_and_a_valid_call_takes_the_fast_path() {
    assert!(
        Decoder::<Call>::new(&schema_for::<Call>())
            .unwrap()
            .is_fast()
    );
    assert!(agrees::<Call>(&call()));
    let decoded = Decoder::<Call>::new(&schema_for::<Call>())
        .unwrap()
        .decode(&call().to_string())
        .unwrap();
    assert_eq!(decoded, serde_json::from_value::<Call>(call()).unwrap());
}

#[test]
fn arrays_in_place_of_structs_are_rejected_at_any_depth() {
    let base = call();
    // serde_json decodes a struct from an array of its fields in order; the schema says object.
    let positional = json!(["n", 255, "fast", null, null, [], {}, [1, "one"], null]);
    assert!(serde_json::from_value::<Call>(positional.clone()).is_ok());
    assert!(!agrees::<Call>(&positional));
    for (pointer, array) in [
        ("/item", json!(["a", 1])),
        ("/items/1", json!(["c", 2])),
        ("/labels/x", json!(["d", 4])),
    ] {
        let value = with(&base, pointer, array);
        assert!(
            serde_json::from_value::<Call>(value.clone()).is_ok(),
            "serde accepts {pointer}"
        );
        assert!(!agrees::<Call>(&value), "{pointer}");
    }
    let decoder = Decoder::<Call>::new(&schema_for::<Call>()).unwrap();
    let error = decoder
        .decode(&with(&base, "/items/1", json!(["c", 2])).to_string())
        .unwrap_err();
    assert_eq!(error, r#"$.items[1]: ["c",2] is not of type "object""#);
}

#[test]
fn a_unit_variant_is_read_from_a_string_only() {
    let base = call();
    let tagged = with(&base, "/mode", json!({"fast": null}));
    assert!(serde_json::from_value::<Call>(tagged.clone()).is_ok());
    assert!(!agrees::<Call>(&tagged));
    assert!(!agrees::<Call>(&with(&base, "/mode", json!("Fast"))));
    assert!(!agrees::<Call>(&with(
        &base,
        "/fallback",
        json!({"careful": null})
    )));
    assert!(agrees::<Call>(&with(&base, "/fallback", json!("careful"))));
}

#[test]
fn option_accepts_null_and_absence_and_checks_its_content() {
    let base = call();
    assert!(agrees::<Call>(&with(&base, "/item", Value::Null)));
    assert!(agrees::<Call>(&without(&base, "item")));
    assert!(agrees::<Call>(&without(&base, "fallback")));
    assert!(!agrees::<Call>(&with(
        &base,
        "/item",
        json!({"label": "a"})
    )));
    assert!(!agrees::<Call>(&with(&base, "/item/weight", json!("1"))));
    assert!(!agrees::<Call>(&with(&base, "/name", Value::Null)));
}

#[test]
fn scalars_follow_the_schema_exactly() {
    let base = call();
    assert!(!agrees::<Call>(&with(&base, "/small", json!(256))));
    assert!(!agrees::<Call>(&with(&base, "/small", json!(-1))));
    assert!(!agrees::<Call>(&with(&base, "/small", json!(1.5))));
    assert!(agrees::<Call>(&with(&base, "/small", json!(0))));
    assert!(!agrees::<Call>(&with(&base, "/name", json!(1))));
    assert!(!agrees::<Call>(&with(&base, "/pair", json!([1]))));
    assert!(!agrees::<Call>(&with(&base, "/pair", json!([1, "one", 2]))));
    assert!(!agrees::<Call>(&with(&base, "/pair", json!(["one", 1]))));
    assert!(agrees::<Call>(&with(&base, "/any", json!(null))));
    assert!(!agrees::<Call>(&without(&base, "any")));
}

#[test]
fn a_value_serde_skips_is_still_checked() {
    #[derive(Debug, Deserialize, JsonSchema)]
    #[schemars(extend("additionalProperties" = {"type": "integer"}))]
    struct Counted {
        #[allow(dead_code)]
        total: u32,
    }
    let schema = schema_for::<Counted>();
    assert_eq!(schema["additionalProperties"], json!({"type": "integer"}));
    assert!(agrees::<Counted>(&json!({"total": 1, "extra": 2})));
    assert!(!agrees::<Counted>(&json!({"total": 1, "extra": "two"})));
    assert!(!agrees::<Counted>(&json!({"total": 1, "extra": [2]})));
}

#[test]
fn an_alias_never_stands_in_for_a_required_property() {
    #[derive(Debug, Deserialize, JsonSchema)]
    struct Aliased {
        #[serde(alias = "n")]
        #[allow(dead_code)]
        count: u32,
        #[serde(alias = "l")]
        #[allow(dead_code)]
        label: Option<String>,
    }
    // serde accepts the alias for the required field; the schema says `count` is missing.
    assert!(serde_json::from_value::<Aliased>(json!({"n": 1})).is_ok());
    assert!(!agrees::<Aliased>(&json!({"n": 1})));
    // An optional field under its alias: the schema allows the unknown key as an unconstrained
    // additional property, serde would read it into the field; the decoder refuses it.
    assert!(serde_json::from_value::<Aliased>(json!({"count": 1, "l": "x"})).is_ok());
    assert!(!agrees::<Aliased>(&json!({"count": 1, "l": "x"})));
    let decoder = Decoder::<Aliased>::new(&schema_for::<Aliased>()).unwrap();
    let error = decoder.decode(r#"{"count": 1, "l": "x"}"#).unwrap_err();
    assert!(
        error.starts_with("$.l: this key is not a property"),
        "{error}"
    );
    assert!(
        decoder
            .decode(r#"{"count": 1, "label": "x", "other": 2}"#)
            .is_ok()
    );

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Closed {
        #[serde(alias = "l")]
        #[allow(dead_code)]
        label: Option<String>,
    }
    assert!(serde_json::from_value::<Closed>(json!({"l": "x"})).is_ok());
    assert!(!agrees::<Closed>(&json!({"l": "x"})));
    assert!(!agrees::<Closed>(&json!({"other": 1})));
    assert!(agrees::<Closed>(&json!({"label": "x"})));
}

#[test]
fn recursive_types_take_the_fast_path() {
    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Tree {
        name: String,
        children: Vec<Tree>,
    }
    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Outline {
        root: Tree,
        parent: Option<Box<Tree>>,
    }
    assert!(
        Decoder::<Tree>::new(&schema_for::<Tree>())
            .unwrap()
            .is_fast()
    );
    assert!(
        Decoder::<Outline>::new(&schema_for::<Outline>())
            .unwrap()
            .is_fast()
    );
    let leaf = json!({"name": "c", "children": []});
    let deep = json!({"name": "a", "children": [{"name": "b", "children": [leaf]}]});
    assert!(agrees::<Tree>(&deep));
    assert!(agrees::<Outline>(&json!({"root": deep, "parent": deep})));
    let positional = with(&deep, "/children/0/children/0", json!(["c", []]));
    assert!(serde_json::from_value::<Tree>(positional.clone()).is_ok());
    assert!(!agrees::<Tree>(&positional));
    assert!(!agrees::<Outline>(
        &json!({"root": deep, "parent": positional})
    ));
    assert!(!agrees::<Outline>(
        &json!({"root": deep, "parent": {"name": 1, "children": []}})
    ));
}

#[test]
fn keywords_the_strict_decoder_does_not_check_mean_full_validation() {
    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    #[allow(dead_code)]
    enum Tagged {
        A { x: u8 },
        B,
    }
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Patterned {
        #[schemars(regex(pattern = "^[a-z]+$"))]
        word: String,
    }
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Unique {
        set: std::collections::BTreeSet<u8>,
    }
    assert!(
        !Decoder::<Tagged>::new(&schema_for::<Tagged>())
            .unwrap()
            .is_fast()
    );
    assert!(
        !Decoder::<Patterned>::new(&schema_for::<Patterned>())
            .unwrap()
            .is_fast()
    );
    assert!(
        !Decoder::<Unique>::new(&schema_for::<Unique>())
            .unwrap()
            .is_fast()
    );
    // A set decodes `[1, 1]` by dropping the duplicate; the schema says the items are unique.
    let set = Decoder::<Unique>::new(&schema_for::<Unique>()).unwrap();
    assert!(set.decode(r#"{"set": [1, 1]}"#).is_err());
    assert!(set.decode(r#"{"set": [1, 2]}"#).is_ok());
    let word = Decoder::<Patterned>::new(&schema_for::<Patterned>()).unwrap();
    assert_eq!(
        word.decode(r#"{"word": "A"}"#).err().as_deref(),
        Some(r#"$.word: "A" does not match "^[a-z]+$""#)
    );
}

#[test]
fn format_is_an_annotation_for_the_validator_as_for_the_shape() {
    // The shape ignores `format`; that is only right while the validator does too.
    for format in ["uuid", "date-time", "email", "uint8", "int32", "double"] {
        let schema = json!({"type": "string", "format": format});
        let validator = Validator::new(&schema).unwrap();
        assert!(validator.is_valid(&json!("not that format")), "{format}");
        assert!(Shape::compile(&schema).is_ok());
    }
}

#[test]
fn integer_bounds_are_exact() {
    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Wide {
        big: u64,
        small: i8,
        #[schemars(range(min = 0.5, max = 2.5))]
        ranged: f64,
    }
    let ok = json!({"big": u64::MAX, "small": -128, "ranged": 0.5});
    assert!(agrees::<Wide>(&ok));
    assert!(!agrees::<Wide>(&with(&ok, "/big", json!(-1))));
    assert!(!agrees::<Wide>(&with(&ok, "/small", json!(-129))));
    assert!(!agrees::<Wide>(&with(&ok, "/ranged", json!(0.49))));
    assert!(!agrees::<Wide>(&with(&ok, "/ranged", json!(3))));
    assert!(agrees::<Wide>(&with(&ok, "/ranged", json!(2))));
}

#[test]
fn strings_count_code_points() {
    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Letter {
        initial: char,
    }
    assert!(agrees::<Letter>(&json!({"initial": "é"})));
    assert!(agrees::<Letter>(&json!({"initial": "\u{1F600}"})));
    assert!(!agrees::<Letter>(&json!({"initial": "ab"})));
    assert!(!agrees::<Letter>(&json!({"initial": ""})));
    // An escaped string reaches the wrapper through `visit_str`, not `visit_borrowed_str`.
    assert!(strict_accepts::<Letter>(r#"{"initial": "\u00e9"}"#));
}

#[test]
fn a_duplicate_key_goes_to_the_slow_path_which_keeps_the_last() {
    let decoder = Decoder::<Item>::new(&schema_for::<Item>()).unwrap();
    let text = r#"{"label": "a", "weight": 1, "weight": 2}"#;
    assert!(!strict_accepts::<Item>(text));
    assert_eq!(
        decoder.decode(text).unwrap(),
        Item {
            label: "a".into(),
            weight: 2
        }
    );
}

#[test]
fn empty_arguments_mean_an_empty_object() {
    #[derive(Debug, Deserialize, JsonSchema)]
    struct NoFields {}
    let decoder = Decoder::<NoFields>::new(&schema_for::<NoFields>()).unwrap();
    assert!(decoder.is_fast());
    for text in ["", "  \n", "{}", r#"{"ignored": 1}"#] {
        assert!(decoder.decode(text).is_ok(), "{text:?}");
    }
    for text in ["[]", "null", "1", "{"] {
        assert!(decoder.decode(text).is_err(), "{text:?}");
    }
}

#[test]
fn unit_inputs_advertise_and_accept_an_object() {
    #[derive(Debug, Deserialize, JsonSchema)]
    struct Unit;
    fn check<I: super::ToolInput>() {
        let schema = schema_for::<I>();
        assert_eq!(schema, json!({"type": "object", "properties": {}}));
        let decoder = Decoder::<I>::new(&schema).unwrap();
        for text in ["", "{}", r#"{"x": [1]}"#] {
            assert!(decoder.decode(text).is_ok(), "{text:?}");
        }
        for text in ["null", "[]", "0"] {
            assert_eq!(
                decoder.decode(text).err().as_deref(),
                Some(format!(r#"$: {text} is not of type "object""#).as_str())
            );
        }
    }
    check::<()>();
    check::<Unit>();
}

#[test]
fn errors_name_the_path() {
    let decoder = Decoder::<Call>::new(&schema_for::<Call>()).unwrap();
    let base = call();
    let cases = [
        (
            with(&base, "/items/1/weight", json!("x")),
            r#"$.items[1].weight: "x" is not of type "integer""#,
        ),
        (
            with(
                &base,
                "/labels",
                json!({"a key": {"label": 1, "weight": 1}}),
            ),
            r#"$.labels["a key"].label: 1 is not of type "string""#,
        ),
        (
            without(&base, "name"),
            r#"$: "name" is a required property"#,
        ),
    ];
    for (value, expected) in cases {
        assert_eq!(decoder.decode(&value.to_string()).unwrap_err(), expected);
    }
    assert!(
        decoder
            .decode("{")
            .unwrap_err()
            .starts_with("$: arguments are not valid JSON")
    );
}

#[test]
fn a_decoding_error_the_schema_does_not_explain_names_the_path() {
    fn even<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let n = u32::deserialize(d)?;
        if n % 2 == 0 {
            Ok(n)
        } else {
            Err(serde::de::Error::custom(format!("{n} is odd")))
        }
    }
    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Even {
        #[serde(deserialize_with = "even")]
        n: u32,
    }
    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Outer {
        list: Vec<Even>,
    }
    let decoder = Decoder::<Outer>::new(&schema_for::<Outer>()).unwrap();
    assert!(decoder.decode(r#"{"list": [{"n": 2}]}"#).is_ok());
    assert_eq!(
        decoder
            .decode(r#"{"list": [{"n": 2}, {"n": 3}]}"#)
            .unwrap_err(),
        "$.list[1].n: 3 is odd"
    );
    // An integer-valued float is an integer to the schema, and so to the decoder.
    assert!(decoder.decode(r#"{"list": [{"n": 2.0}]}"#).is_ok());
    assert_eq!(
        decoder.decode(r#"{"list": [{"n": 3e0}]}"#).unwrap_err(),
        "$.list[0].n: 3 is odd"
    );
}

#[test]
fn unsupported_shapes_are_refused_not_misread() {
    for schema in [
        json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/properties/b"}}}),
        json!({"type": "object", "properties": {"a": {"enum": [1, 2]}}}),
        json!({"type": "object", "properties": {"a": {"maximum": 9007199254740993u64}}}),
        json!({"type": "object", "anyOf": [{"type": "string"}, {"type": "integer"}]}),
        json!({"type": "object", "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}},
               "properties": {"a": {"$ref": "#/$defs/A"}}}),
    ] {
        assert!(Shape::compile(&schema).is_err(), "{schema}");
    }
}

#[test]
fn a_required_name_outside_the_properties_follows_additional_properties() {
    let schema = json!({"type": "object", "required": ["must"],
                        "additionalProperties": {"type": "integer"}});
    let shape = Shape::compile(&schema).unwrap();
    let accepts = |text: &str| decode_strict::<Value>(&shape, text).is_ok();
    assert!(accepts(r#"{"must": 1}"#));
    assert!(!accepts(r#"{"must": null}"#));
    assert!(!accepts(r#"{"other": 1}"#));
}

#[test]
fn at_most_64_properties_take_the_fast_path() {
    let object = |n: usize, required: &[&str]| {
        let properties: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        json!({"type": "object", "properties": properties, "required": required})
    };
    let shape = Shape::compile(&object(64, &["p0", "p63"])).unwrap();
    assert!(decode_strict::<Value>(&shape, r#"{"p0": 1, "p63": 2, "p40": 3}"#).is_ok());
    assert!(decode_strict::<Value>(&shape, r#"{"p0": 1, "p40": 3}"#).is_err());
    assert!(decode_strict::<Value>(&shape, r#"{"p0": 1, "p63": "x"}"#).is_err());
    assert!(Shape::compile(&object(65, &[])).is_err());
    assert!(Shape::compile(&object(64, &["extra"])).is_err());
}

/// The key reader looks first where the last arguments had each key, comparing keys of at most
/// 16 bytes word by word (bytes 0, n / 2 and n - 1 of keys of 1 to 3 bytes), and longer ones in
/// full: a key that differs from the property looked at in any one byte, at any length, must not
/// select it. Each property accepts only its own number, so a key that selected the wrong one
/// would be refused.
#[test]
fn a_key_selects_its_own_property_at_every_length_and_no_near_miss() {
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyz";
    let name = |n: usize| LETTERS[..n].to_owned();
    let properties: serde_json::Map<String, Value> = (1..=20)
        .map(|n| {
            (
                name(n),
                json!({"type": "integer", "minimum": n, "maximum": n}),
            )
        })
        .collect();
    let schema = json!({"type": "object", "properties": properties, "additionalProperties": false});
    let shape = Shape::compile(&schema).unwrap();
    let text = |pairs: &[(String, usize)]| {
        let fields: Vec<String> = pairs.iter().map(|(k, v)| format!("{k:?}: {v}")).collect();
        format!("{{{}}}", fields.join(", "))
    };
    let in_order: Vec<(String, usize)> = (1..=20).map(|n| (name(n), n)).collect();
    let reversed: Vec<(String, usize)> = in_order.iter().rev().cloned().collect();
    // In order twice (the second read follows the first's order), reversed, in order again.
    for pairs in [&in_order, &in_order, &reversed, &in_order] {
        assert!(decode_strict::<Value>(&shape, &text(pairs)).is_ok());
    }
    for n in 1..=20 {
        // Each property holds only its own number: one that selected another would refuse it.
        let mut wrong = in_order[..n].to_vec();
        wrong[n - 1].1 = n + 1;
        assert!(decode_strict::<Value>(&shape, &text(&wrong)).is_err());
        for at in 0..n {
            // The keys before it in order, so the property looked at first is `name(n)`.
            let mut pairs = in_order[..n].to_vec();
            let mut near = name(n).into_bytes();
            near[at] = b'Z';
            pairs[n - 1].0 = String::from_utf8(near).unwrap();
            assert!(
                decode_strict::<Value>(&shape, &text(&pairs)).is_err(),
                "{:?} selected {:?}",
                pairs[n - 1].0,
                name(n)
            );
            assert!(decode_strict::<Value>(&shape, &text(&in_order)).is_ok());
        }
    }
}

#[test]
fn the_value_parser_decodes_like_the_parser() {
    let unit = Decoder::<()>::new(&schema_for::<()>()).unwrap();
    assert!(unit.decode_value(&json!({})).is_ok());
    assert!(unit.decode_value(&json!({"ignored": 1})).is_ok());
    let decoder = Decoder::<Call>::new(&schema_for::<Call>()).unwrap();
    assert_eq!(
        decoder.decode_value(&call()).unwrap(),
        serde_json::from_value::<Call>(call()).unwrap()
    );
    let error = decoder
        .decode_value(&with(&call(), "/items/1/weight", json!(1.5)))
        .err()
        .unwrap();
    assert_eq!(
        error,
        "$.items[1].weight: a number is not allowed here by the schema"
    );
    // Read through the strict wrapper, as the text is: an integer-valued float is an integer.
    let decoded = decoder
        .decode_value(&with(&call(), "/items/1/weight", json!(2.0)))
        .unwrap();
    assert_eq!(decoded.items[1].weight, 2);
}

#[test]
fn a_long_error_is_cut_line_by_line_and_its_lines_counted() {
    use super::text::{MAX_ERROR_CHARS, bounded};
    let short = "$.a: 1 is not of type \"string\"\n$.b: 2 is not of type \"string\"".to_owned();
    assert_eq!(bounded(short.clone()), short);
    // One long line among short ones: only it is cut.
    let long = format!(
        "$.a: \"{}\" is too long\n$.b: 2 is wrong",
        "x".repeat(2_000)
    );
    let cut = bounded(long);
    let lines: Vec<&str> = cut.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("$.a: \"xxx") && lines[0].ends_with("\" is too long"));
    assert!(lines[0].contains("characters cut") && lines[0].chars().count() < MAX_ERROR_CHARS + 40);
    assert_eq!(lines[1], "$.b: 2 is wrong");
    // A message of more lines than a report has (a custom check's): the rest are counted.
    let many: Vec<String> = (0..40)
        .map(|i| format!("$.x{i}: {}", "y".repeat(30)))
        .collect();
    let cut = bounded(many.join("\n"));
    let lines: Vec<&str> = cut.lines().collect();
    assert_eq!(lines.len(), crate::schema::MAX_LISTED_ERRORS + 3);
    assert_eq!(lines.last(), Some(&"[... 28 more lines cut ...]"));
}

#[test]
fn integer_valued_floats_are_written_as_integers_when_there_are_any() {
    use super::text::integral_text;
    assert_eq!(integral_text(&json!({"a": 1, "b": [1.5, "x"]})), None);
    let value: Value = serde_json::from_str(
        r#"{"a": 1.0, "b": [-0.0, 1e2, 1.5, -3.0], "c": {"d": 9007199254740994.0}}"#,
    )
    .unwrap();
    assert_eq!(
        integral_text(&value).as_deref(),
        Some(r#"{"a":1,"b":[0,100,1.5,-3],"c":{"d":9007199254740994.0}}"#)
    );
}
