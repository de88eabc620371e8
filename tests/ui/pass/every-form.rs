//! The forms a `#[tool]` function can take, together in one crate.

use std::collections::HashMap;

use phaseo_agent::{IntoTool, ToolContext, tool};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

#[derive(serde::Serialize)]
struct Hits {
    count: usize,
}

/// A typed input taken apart by a pattern.
#[tool]
async fn search(Query { text }: Query, _ctx: &ToolContext) -> Result<Hits, std::io::Error> {
    Ok(Hits { count: text.len() })
}

/// A single plain argument of a std type is a property, not the input.
#[tool]
fn tally(words: HashMap<String, u32>) -> u32 {
    words.values().sum()
}

/// The context first, then raw identifiers and an underscore.
#[tool]
pub(crate) fn classify(ctx: &ToolContext, r#type: String, _unused: bool) -> String {
    let _ = ctx;
    r#type
}

/// Attributes stay with the function; `#[cfg]` goes everywhere.
#[tool]
#[cfg(not(any()))]
#[allow(clippy::needless_pass_by_value)]
#[inline]
fn shout(text: String) -> String {
    text.to_uppercase()
}

/// A serde attribute on a plain argument moves to its field.
#[tool]
fn rename(#[serde(rename = "new_name")] name: String, #[serde(default)] keep: Option<bool>) -> String {
    format!("{name}{keep:?}")
}

mod nested {
    /// A tool in a module, public.
    #[phaseo_agent::tool(id = "nested-tool")]
    pub async fn nested(values: Vec<f64>) -> f64 {
        values.iter().sum()
    }
}

fn main() {
    let tools = [
        search.into_tool(),
        tally.into_tool(),
        classify.into_tool(),
        shout.into_tool(),
        rename.into_tool(),
        nested::nested.into_tool(),
    ];
    assert_eq!(tools[5].id(), "nested-tool");
    let _ = ClassifyArgs { r#type: String::new(), _unused: true };
    let _ = RenameArgs { name: String::new(), keep: None };
    // Where the field types cannot be inferred, name the struct's type (its defaults apply there).
    let _: nested::NestedArgs = nested::NestedArgs { values: vec![] };
    let _ = nested::NestedArgs::<Vec<f64>> { values: vec![] };
}
