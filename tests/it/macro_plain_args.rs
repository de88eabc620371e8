//! The arguments struct `#[tool]` generates for plain arguments reads as serde's derive would: its
//! `Deserialize` is written by the macro (so that rustc does not recompile every instantiation over
//! it after an edit above it; see `phaseo_agent::tool::plain_args`), and these tests hold it to a
//! derived twin with the same fields, value for value and error for error.

use phaseo_agent::{IntoTool, ToolContext, tool};
use serde::Deserialize;
use serde_json::{Value, json};

/// Labels one ticket.
#[tool]
async fn label(
    /// The ticket.
    ticket: String,
    count: i64,
    dry_run: Option<bool>,
    note: &str,
    r#type: Vec<u8>,
) -> String {
    format!("{ticket} {count} {dry_run:?} {note} {type:?}", type = r#type)
}

/// The derived twin of `LabelArgs`.
#[derive(Deserialize, Debug, PartialEq)]
struct Derived {
    ticket: String,
    count: i64,
    dry_run: Option<bool>,
    note: String,
    r#type: Vec<u8>,
}

fn written(args: LabelArgs) -> Derived {
    Derived {
        ticket: args.ticket,
        count: args.count,
        dry_run: args.dry_run,
        note: args.note,
        r#type: args.r#type,
    }
}

/// Both read `text` with serde_json, with no schema in between: values and errors are the same.
fn same_as_derived(text: &str) -> Result<Derived, String> {
    let ours = serde_json::from_str::<LabelArgs>(text)
        .map(written)
        .map_err(|e| e.to_string());
    let derived = serde_json::from_str::<Derived>(text).map_err(|e| e.to_string());
    match (&ours, &derived) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
        (Err(a), Err(b)) => assert_eq!(
            a.replace("struct LabelArgs", "struct Derived"),
            *b,
            "{text}"
        ),
        _ => panic!("{text}: the written impl gave {ours:?}, the derived one {derived:?}"),
    }
    ours
}

#[test]
fn the_written_deserialize_reads_as_the_derived_one() {
    let full = r#"{"ticket": "T-1", "count": 2, "dry_run": true, "note": "n", "type": [1, 2]}"#;
    assert_eq!(same_as_derived(full).unwrap().dry_run, Some(true));
    // An `Option` left out is `None`; anything else left out is an error naming it.
    let no_option = r#"{"ticket": "T-1", "count": 2, "note": "n", "type": []}"#;
    assert_eq!(same_as_derived(no_option).unwrap().dry_run, None);
    let no_count = r#"{"ticket": "T-1", "note": "n", "type": []}"#;
    assert!(
        same_as_derived(no_count)
            .unwrap_err()
            .contains("missing field `count`")
    );
    let no_type = r#"{"ticket": "T-1", "count": 1, "note": "n"}"#;
    assert!(
        same_as_derived(no_type)
            .unwrap_err()
            .contains("missing field `type`")
    );
    // A repeated argument is an error; an unknown key is skipped; an escaped key is the argument.
    let twice = r#"{"ticket": "a", "ticket": "b", "count": 1, "note": "n", "type": []}"#;
    assert!(
        same_as_derived(twice)
            .unwrap_err()
            .contains("duplicate field `ticket`")
    );
    let extra = r#"{"ticket": "a", "count": 1, "note": "n", "type": [], "other": {"x": [1]}}"#;
    assert!(same_as_derived(extra).is_ok());
    let escaped = r#"{"tick\u0065t": "a", "count": 1, "note": "n", "type": []}"#;
    assert_eq!(same_as_derived(escaped).unwrap().ticket, "a");
    // Wrong types, and not an object at all.
    for text in [
        r#"{"ticket": 1, "count": 1, "note": "n", "type": []}"#,
        r#"{"ticket": "a", "count": 1.5, "note": "n", "type": []}"#,
        r#"{"ticket": "a", "count": 1, "note": "n", "type": [300]}"#,
        r#"{"ticket": "a", "count": 1, "dry_run": "yes", "note": "n", "type": []}"#,
        "3",
        "null",
        r#""text""#,
        r#"{"ticket": "a""#,
    ] {
        assert!(same_as_derived(text).is_err(), "{text}");
    }
}

/// What the derive reads and the written impl does not: the arguments as an array, in order. The
/// tool's schema refuses an array before any decoding, so no call can send one.
#[test]
fn the_written_deserialize_reads_an_object_only() {
    let Err(err) = serde_json::from_str::<LabelArgs>(r#"["T-1", 2, null, "n", []]"#) else {
        panic!("an array was read");
    };
    assert_eq!(
        err.to_string(),
        "invalid type: sequence, expected struct LabelArgs at line 1 column 1"
    );
}

#[tokio::test]
async fn a_tool_with_plain_arguments_decodes_them_through_the_schema() {
    let tool = label.into_tool();
    let ctx = ToolContext::detached();
    let call = |args: Value| {
        let tool = &tool;
        let ctx = &ctx;
        async move { tool.invoke(&args.to_string(), ctx).await }
    };
    let ok = call(json!({"ticket": "T-1", "count": 2, "note": "n", "type": [7]})).await;
    assert_eq!(ok.unwrap(), r#""T-1 2 None n [7]""#);
    let missing = call(json!({"ticket": "T-1", "note": "n", "type": []})).await;
    assert_eq!(
        missing.unwrap_err().to_string(),
        r#"invalid tool input: $: "count" is a required property"#
    );
    let wrong = call(json!({"ticket": "T-1", "count": 2, "note": "n", "type": [300]})).await;
    assert!(
        wrong
            .unwrap_err()
            .to_string()
            .starts_with("invalid tool input: $.type[0]: 300"),
        "a byte out of range is refused by the schema"
    );
    // A repeated key: the strict reader refuses it, and the checked value (the last one) decides.
    let twice = r#"{"ticket": "a", "ticket": "b", "count": 1, "note": "n", "type": []}"#;
    assert_eq!(
        tool.invoke(twice, &ctx).await.unwrap(),
        r#""b 1 None n []""#
    );
}

/// An argument with a serde attribute keeps serde's derive, which reads the attribute.
#[tokio::test]
async fn an_argument_with_a_serde_attribute_keeps_the_derive() {
    /// Counts.
    #[tool]
    async fn tally(#[serde(default)] start: u32, #[serde(rename = "by")] step: u32) -> u32 {
        start + step
    }
    let tool = tally.into_tool();
    let ctx = ToolContext::detached();
    assert_eq!(tool.invoke(r#"{"by": 3}"#, &ctx).await.unwrap(), "3");
    let parameters = tool.parameters();
    assert!(parameters["properties"].get("by").is_some(), "{parameters}");
    let from_array = serde_json::from_str::<TallyArgs>(r#"[1, 2]"#).map(|a| a.start + a.step);
    assert_eq!(from_array.unwrap(), 3, "the derive also reads an array");
}
