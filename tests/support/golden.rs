//! Golden files, and a walk over every schema position of a JSON Schema.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `tests/golden/<relative>`.
pub fn golden_path(relative: impl AsRef<Path>) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(relative)
}

/// Whether golden files are being rewritten (`GOLDEN=overwrite`).
pub fn overwrite() -> bool {
    std::env::var("GOLDEN").as_deref() == Ok("overwrite")
}

/// Compares `value` with the golden file at `path`, or rewrites it under `GOLDEN=overwrite`.
/// `module` is the test module whose run rewrites it, for the message.
pub fn compare_with_golden(path: &Path, value: &Value, module: &str) {
    let text = serde_json::to_string_pretty(value).expect("a value serialises") + "\n";
    let rerun =
        format!("GOLDEN=overwrite cargo test -p phaseo-agent-tests --test it -- {module}::");
    if overwrite() {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("the folder is writable");
        std::fs::write(path, text).expect("the golden file is writable");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; run `{rerun}`", path.display()));
    let expected: Value = serde_json::from_str(&expected).expect("the golden file is JSON");
    assert!(
        *value == expected,
        "{} changed; if intended, run `{rerun}` and review the diff.\nnow:\n{text}",
        path.display()
    );
}

/// Calls `f` with every schema position under `node` (the node itself included) and its JSON
/// pointer. Under `properties`, `$defs` and the like the keys are names, not keywords; a boolean
/// in a schema position (`additionalProperties: false`) is not visited.
pub fn each_schema<'a>(node: &'a Value, pointer: String, f: &mut dyn FnMut(&'a Value, &str)) {
    f(node, &pointer);
    let Value::Object(map) = node else { return };
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    for (key, value) in map {
        let here = format!("{pointer}/{}", escape(key));
        match (key.as_str(), value) {
            (
                "properties" | "$defs" | "definitions" | "patternProperties" | "dependentSchemas",
                Value::Object(m),
            ) => {
                for (name, schema) in m {
                    each_schema(schema, format!("{here}/{}", escape(name)), f);
                }
            }
            (
                "items" | "additionalProperties" | "not" | "propertyNames" | "contains",
                v @ Value::Object(_),
            ) => each_schema(v, here, f),
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    each_schema(item, format!("{here}/{i}"), f);
                }
            }
            _ => {}
        }
    }
}
