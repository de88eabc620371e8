//! Golden tests of the parameter schemas tools advertise: for each shape in `shapes/mod.rs`, the
//! schema of `Tool::typed(..).parameters()` is compared with the checked-in
//! `tests/golden/<name>.json`, and checked structurally: an object root, no `$schema` or `title` at
//! the root, no `title` left anywhere (folded into `description`), every `$ref` resolving inside
//! the schema, and a schema the validator compiles.
//!
//! To regenerate the golden files after an intended change, run
//!
//! ```text
//! GOLDEN=overwrite cargo test -p phaseo-agent-tests --test it -- schema_golden::
//! ```
//!
//! and review the diff of `tests/golden/` before committing it.

use crate::{for_each_shape, shapes};

use crate::support::golden::{compare_with_golden, each_schema, golden_path};
use phaseo_agent::schema::{Validator, schema_for};
use phaseo_agent::{Tool, ToolInput};
use serde_json::{Value, json};
use shapes::*;

/// The schema a typed tool over `T` advertises; also checks it is `schema_for::<T>()`.
fn advertised<T: ToolInput>() -> Value {
    let tool = Tool::typed("shape", "A shape", |_: T, _ctx| async {
        Ok::<_, std::convert::Infallible>(())
    });
    let parameters = tool.parameters().clone();
    assert_eq!(parameters, schema_for::<T>(), "advertised != schema_for");
    parameters
}

/// The structural promises of a normalised schema.
fn assert_structure(name: &str, schema: &Value) {
    assert_eq!(schema["type"], "object", "{name}: the root is an object");
    let root = schema.as_object().expect("the root is a JSON object");
    assert!(
        !root.contains_key("$schema"),
        "{name}: `$schema` at the root"
    );
    let mut refs = 0;
    each_schema(schema, String::new(), &mut |node, pointer| {
        let Value::Object(map) = node else { return };
        assert!(
            !map.contains_key("title"),
            "{name}: a `title` at `{pointer}` (it belongs in the description)"
        );
        if let Some(reference) = map.get("$ref") {
            refs += 1;
            let reference = reference.as_str().expect("`$ref` is a string");
            let target = reference
                .strip_prefix('#')
                .and_then(|fragment| schema.pointer(fragment));
            assert!(
                target.is_some_and(|t| t.is_object() || t.is_boolean()),
                "{name}: `$ref` {reference} at `{pointer}` does not resolve inside the schema"
            );
        }
    });
    if refs == 0 {
        assert!(
            !root.contains_key("$defs"),
            "{name}: `$defs` nobody refers to"
        );
    }
    Validator::new(schema).unwrap_or_else(|e| panic!("{name}: {e}"));
}

macro_rules! golden_test {
    ($name:ident, $ty:ty) => {
        #[test]
        fn $name() {
            let schema = advertised::<$ty>();
            assert_structure(stringify!($name), &schema);
            compare_with_golden(
                &golden_path(concat!(stringify!($name), ".json")),
                &schema,
                "schema_golden",
            );
        }
    };
}

for_each_shape!(golden_test);

#[test]
fn every_golden_file_has_a_shape() {
    let mut names = Vec::new();
    macro_rules! name {
        ($name:ident, $ty:ty) => {
            names.push(format!("{}.json", stringify!($name)));
        };
    }
    for_each_shape!(name);
    let dir = golden_path("");
    for entry in std::fs::read_dir(&dir).expect("tests/golden exists") {
        let entry = entry.expect("a directory entry");
        if entry.path().is_dir() {
            continue; // tests/golden/dialects/ belongs to schema_dialects, errors/ to error_texts
        }
        let file = entry.file_name();
        let file = file.to_string_lossy();
        assert!(
            names.iter().any(|n| *n == file),
            "{file} has no shape: delete it"
        );
    }
}

#[test]
fn no_parameters_is_an_empty_object() {
    let empty = json!({"type": "object", "properties": {}});
    assert_eq!(advertised::<()>(), empty);
    // The struct's doc comment is its description; otherwise it is the same empty object.
    let mut no_fields = advertised::<NoFields>();
    no_fields.as_object_mut().map(|m| m.remove("description"));
    assert_eq!(no_fields, empty);
}

#[test]
fn doc_comments_become_descriptions_and_no_paragraph_is_lost() {
    let schema = advertised::<Documented>();
    assert_eq!(
        schema["properties"]["comments"]["description"],
        "How many comments to include.\n\nZero means none; the newest come first."
    );
    assert_eq!(
        schema["properties"]["ticket_id"]["description"],
        "The ticket to load."
    );
    // The root's first paragraph was schemars' root `title`: it is kept, as the first paragraph.
    let root = schema["description"].as_str().expect("a root description");
    assert!(root.starts_with("Doc-commented fields.\n\nA doc comment of more than one paragraph"));
}

#[test]
fn serde_renames_are_the_advertised_names() {
    let schema = advertised::<Renamed>();
    let names: Vec<&str> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["max-results", "ticketId", "withDrafts"]);
    assert_eq!(schema["required"], json!(["ticketId", "max-results"]));
}

#[test]
fn a_recursive_type_refers_to_itself_and_nothing_dangles() {
    let tree = advertised::<Tree>();
    assert_eq!(
        tree["properties"]["children"]["items"],
        json!({"$ref": "#"})
    );
    let outline = advertised::<Outline>();
    assert_eq!(
        outline["$defs"]["Tree"]["properties"]["children"]["items"],
        json!({"$ref": "#/$defs/Tree"})
    );
}

#[test]
#[should_panic(expected = "does not resolve inside the schema")]
fn the_structural_check_catches_a_dangling_ref() {
    assert_structure(
        "dangling",
        &json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Gone"}}}),
    );
}

#[test]
#[should_panic(expected = "a `title` at `/properties/a`")]
fn the_structural_check_catches_a_nested_title() {
    assert_structure(
        "titled",
        &json!({"type": "object", "properties": {"a": {"title": "A", "type": "string"}}}),
    );
}
