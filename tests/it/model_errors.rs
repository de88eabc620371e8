//! Schema errors a model can act on: when a model's tool arguments fail the tool's schema, the
//! message (`Invalid tool input: <path>: <reason>`) names every allowed value of an enum, and for a
//! `oneOf`/`anyOf` the variant the value came closest to and what that variant lacks, at its full
//! path.

use phaseo_agent::schema::Validator;
use phaseo_agent::{AgentError, Tool, ToolContext};
use serde_json::{Value, json};

/// The error `Validator::check` gives for a value (the value must fail).
fn error_of(schema: &Value, value: &Value) -> String {
    Validator::new(schema)
        .expect("the schema compiles")
        .check(value)
        .expect_err("the value fails the schema")
}

/// An object schema with one property.
fn with_property(name: &str, schema: Value) -> Value {
    json!({"type": "object", "properties": {name: schema}, "required": [name]})
}

/// A tagged enum (`#[serde(tag = "kind")]` as a schema): email needs an address, sms a number.
fn contact_schema() -> Value {
    json!({"oneOf": [
        {
            "type": "object",
            "properties": {"kind": {"const": "email"}, "address": {"type": "string"}},
            "required": ["kind", "address"]
        },
        {
            "type": "object",
            "properties": {"kind": {"const": "sms"}, "number": {"type": "string"}},
            "required": ["kind", "number"]
        }
    ]})
}

#[test]
fn an_enum_mismatch_lists_every_allowed_value() {
    let schema = with_property(
        "priority",
        json!({"type": "string", "enum": ["low", "normal", "high", "critical"]}),
    );
    assert_eq!(
        error_of(&schema, &json!({"priority": "urgent"})),
        r#"$.priority: "urgent" is not one of "low", "normal", "high", "critical""#
    );
}

#[test]
fn a_long_enum_lists_the_first_twenty_and_counts_the_rest() {
    let options: Vec<Value> = (1..=25).map(|i| json!(format!("v{i}"))).collect();
    let schema = with_property("pick", json!({"enum": options}));
    let listed = (1..=20)
        .map(|i| format!("\"v{i}\""))
        .collect::<Vec<_>>()
        .join(", ");
    assert_eq!(
        error_of(&schema, &json!({"pick": "v99"})),
        format!("$.pick: \"v99\" is not one of {listed} (and 5 more)")
    );
}

#[test]
fn a_const_mismatch_names_the_expected_value_and_the_given_one() {
    let schema = with_property("version", json!({"const": 2}));
    assert_eq!(
        error_of(&schema, &json!({"version": 1})),
        "$.version: 1 is not 2, the only allowed value"
    );
}

#[test]
fn a_tagged_enum_failure_names_the_closest_variant_and_what_it_lacks() {
    let schema = with_property("contact", contact_schema());
    assert_eq!(
        error_of(&schema, &json!({"contact": {"kind": "sms"}})),
        r#"$.contact: matches no variant; closest is the variant with "kind": "sms", which fails: $.contact: "number" is a required property"#
    );
    // The closest variant's own error, at its full path (deeper than the `oneOf`).
    assert_eq!(
        error_of(
            &schema,
            &json!({"contact": {"kind": "email", "address": 5}})
        ),
        r#"$.contact: matches no variant; closest is the variant with "kind": "email", which fails: $.contact.address: 5 is not of type "string""#
    );
}

#[test]
fn an_unknown_tag_lists_every_tag() {
    let schema = with_property("contact", contact_schema());
    assert_eq!(
        error_of(&schema, &json!({"contact": {"kind": "fax", "number": "1"}})),
        r#"$.contact.kind: "fax" is not one of "email", "sms""#
    );
}

#[test]
fn a_missing_tag_lists_every_tag() {
    let schema = with_property("contact", contact_schema());
    assert_eq!(
        error_of(&schema, &json!({"contact": {"number": "1"}})),
        r#"$.contact: "kind" is a required property (one of "email", "sms")"#
    );
}

#[test]
fn an_untagged_one_of_names_the_variant_with_the_fewest_errors() {
    let schema = with_property(
        "target",
        json!({"oneOf": [
            {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {"name": {"type": "string"}, "scope": {"type": "string"}},
                "required": ["name", "scope"],
                "additionalProperties": false
            }
        ]}),
    );
    assert_eq!(
        error_of(&schema, &json!({"target": {"name": "x", "scope": 5}})),
        r#"$.target: matches no variant; closest is variant 2 of 2, which fails: $.target.scope: 5 is not of type "string""#
    );
}

#[test]
fn a_nested_one_of_points_at_the_deepest_failure() {
    // A tagged enum whose `sms` variant holds another tagged enum.
    let schema = with_property(
        "contact",
        json!({"oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "email"}, "address": {"type": "string"}},
                "required": ["kind", "address"]
            },
            {
                "type": "object",
                "properties": {
                    "kind": {"const": "sms"},
                    "phone": {"oneOf": [
                        {
                            "type": "object",
                            "properties": {"plan": {"const": "mobile"}, "number": {"type": "string"}},
                            "required": ["plan", "number"]
                        },
                        {
                            "type": "object",
                            "properties": {"plan": {"const": "landline"}, "extension": {"type": "integer"}},
                            "required": ["plan", "extension"]
                        }
                    ]}
                },
                "required": ["kind", "phone"]
            }
        ]}),
    );
    let value =
        json!({"contact": {"kind": "sms", "phone": {"plan": "landline", "extension": "12"}}});
    assert_eq!(
        error_of(&schema, &value),
        r#"$.contact: matches no variant; closest is the variant with "kind": "sms", which fails: $.contact.phone: matches no variant; closest is the variant with "plan": "landline", which fails: $.contact.phone.extension: "12" is not of type "integer""#
    );
}

#[test]
fn a_recursive_one_of_under_defs_is_explained_too() {
    let schema = json!({
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "required": ["tree"],
        "$defs": {"Node": {"oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "leaf"}, "value": {"type": "integer"}},
                "required": ["kind", "value"]
            },
            {
                "type": "object",
                "properties": {
                    "kind": {"const": "branch"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                },
                "required": ["kind", "children"]
            }
        ]}}
    });
    let value = json!({"tree": {"kind": "branch", "children": [{"kind": "leaf", "value": "x"}]}});
    assert_eq!(
        error_of(&schema, &value),
        r#"$.tree: matches no variant; closest is the variant with "kind": "branch", which fails: $.tree.children[0]: matches no variant; closest is the variant with "kind": "leaf", which fails: $.tree.children[0].value: "x" is not of type "integer""#
    );
}

#[test]
fn an_option_like_any_of_reports_the_error_of_the_non_null_branch() {
    let schema = with_property(
        "window",
        json!({"anyOf": [
            {
                "type": "object",
                "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                "required": ["from", "to"]
            },
            {"type": "null"}
        ]}),
    );
    assert_eq!(
        error_of(&schema, &json!({"window": {"from": "monday"}})),
        r#"$.window: "to" is a required property"#
    );
}

#[test]
fn a_value_of_no_variants_type_lists_the_types() {
    let schema = with_property(
        "limit",
        json!({"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    );
    assert_eq!(
        error_of(&schema, &json!({"limit": "ten"})),
        r#"$.limit: "ten" is not of type "integer" or "null""#
    );
}

#[test]
fn a_value_matching_two_branches_says_so() {
    let schema = with_property(
        "amount",
        json!({"oneOf": [{"type": "number"}, {"type": "integer", "minimum": 0}]}),
    );
    assert_eq!(
        error_of(&schema, &json!({"amount": 5})),
        "$.amount: matches more than one variant (variant 1 of 2 and variant 2 of 2), but must match exactly one"
    );
}

#[test]
fn a_valid_value_still_passes() {
    let schema = with_property("contact", contact_schema());
    let validator = Validator::new(&schema).unwrap();
    assert_eq!(
        validator.check(&json!({"contact": {"kind": "sms", "number": "1"}})),
        Ok(())
    );
    assert!(validator.is_valid(&json!({"contact": {"kind": "email", "address": "a@b"}})));
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)]
enum Contact {
    Email { address: String },
    Sms { number: String },
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Priority {
    Low,
    Normal,
    High,
    Critical,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Notify {
    contact: Contact,
    priority: Priority,
    message: String,
}

fn notify_tool() -> Tool {
    Tool::typed(
        "notify",
        "Notify someone",
        |input: Notify, _ctx: ToolContext| async move {
            Ok::<_, AgentError>(json!({"sent": input.message}))
        },
    )
}

#[tokio::test]
async fn a_typed_tool_explains_an_enum_and_a_tagged_enum_to_the_model() {
    let tool = notify_tool();
    let ctx = ToolContext::detached();
    assert_eq!(
        tool.invoke(
            r#"{"contact": {"kind": "sms", "number": "1"}, "priority": "normal", "message": "hi"}"#,
            &ctx
        )
        .await
        .unwrap(),
        r#"{"sent":"hi"}"#
    );
    let err = tool
        .invoke(
            r#"{"contact": {"kind": "sms", "number": "1"}, "priority": "urgent", "message": "hi"}"#,
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid tool input: $.priority: "urgent" is not one of "low", "normal", "high", "critical""#
    );
    let err = tool
        .invoke(
            r#"{"contact": {"kind": "sms"}, "priority": "normal", "message": "hi"}"#,
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid tool input: $.contact: matches no variant; closest is the variant with "kind": "sms", which fails: $.contact: "number" is a required property"#
    );
}

/// The error `Validator::check` gives for a value against the schema a tool with input `T`
/// advertises.
fn error_for<T: schemars::JsonSchema>(value: Value) -> String {
    error_of(&phaseo_agent::schema::schema_for::<T>(), &value)
}

/// serde's default representation of an enum: a unit variant is a string, a variant with data an
/// object with one key, the variant's name.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
enum Schedule {
    Off,
    Idle,
    Every { minutes: u32 },
    At { time: String },
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Plan {
    schedule: Schedule,
}

#[test]
fn an_externally_tagged_enum_names_the_variant_by_its_key() {
    assert_eq!(
        error_for::<Plan>(json!({"schedule": {"Every": {"minutes": "x"}}})),
        r#"$.schedule: matches no variant; closest is the variant "Every", which fails: $.schedule.Every.minutes: "x" is not of type "integer""#
    );
}

#[test]
fn an_unknown_external_key_lists_every_key() {
    assert_eq!(
        error_for::<Plan>(json!({"schedule": {"Never": {}}})),
        r#"$.schedule: the object must have one of the variant keys "Every", "At""#
    );
}

#[test]
fn an_unknown_unit_variant_lists_the_unit_variants() {
    // Only the string branch fits a string: its own error, alone.
    assert_eq!(
        error_for::<Plan>(json!({"schedule": "Never"})),
        r#"$.schedule: "Never" is not one of "Off", "Idle""#
    );
}

/// A unit enum with doc comments: schemars gives each variant its own `const` branch.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Level {
    /// Only errors.
    Quiet,
    /// The usual.
    Normal,
    /// Everything.
    Verbose,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Logging {
    level: Level,
}

#[test]
fn a_documented_unit_enum_lists_every_allowed_value() {
    assert_eq!(
        error_for::<Logging>(json!({"level": "loud"})),
        r#"$.level: "loud" is not one of "quiet", "normal", "verbose""#
    );
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct MaybeContact {
    contact: Option<Contact>,
}

#[test]
fn an_optional_tagged_enum_given_another_type_lists_the_types() {
    assert_eq!(
        error_for::<MaybeContact>(json!({"contact": 5})),
        r#"$.contact: 5 is not of type "object" or "null""#
    );
    assert_eq!(
        error_for::<MaybeContact>(json!({"contact": {"kind": "email"}})),
        r#"$.contact: matches no variant; closest is the variant with "kind": "email", which fails: $.contact: "address" is a required property"#
    );
}
