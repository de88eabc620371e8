//! The parameter-schema shapes shared by `schema_golden.rs` and `differential.rs`: one Rust input type
//! per shape a tool's parameters commonly take, each listed in [`for_each_shape!`].

#![allow(dead_code)]

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// No parameters: a struct with no fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NoFields {}

/// Plain scalars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Scalars {
    pub name: String,
    pub count: i64,
    pub small: u8,
    pub ratio: f64,
    pub enabled: bool,
    pub initial: char,
}

/// Optional fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Optional {
    pub query: String,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    pub filter: Option<Inner>,
}

/// A nested struct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Nested {
    pub id: String,
    pub inner: Inner,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Inner {
    pub label: String,
    pub weight: i32,
}

/// A `Vec` of a struct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VecOfStruct {
    pub items: Vec<Inner>,
    pub tags: Vec<String>,
}

/// A unit enum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UnitEnum {
    pub mode: Mode,
    pub fallback: Option<Mode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Fast,
    Careful,
    DryRun,
}

/// An internally tagged enum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Shape {
    Circle { radius: f64 },
    Rectangle { width: f64, height: f64 },
    Point,
}

/// A `HashMap<String, T>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Labels {
    pub labels: HashMap<String, Inner>,
    pub counts: HashMap<String, u16>,
}

/// `serde_json::Value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AnyJson {
    pub payload: Value,
    pub note: Option<String>,
}

/// Doc-commented fields.
///
/// A doc comment of more than one paragraph: schemars makes its first paragraph a `title`, which
/// normalisation folds back into the description, here and on the fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Documented {
    /// The ticket to load.
    pub ticket_id: String,
    /// How many comments to include.
    ///
    /// Zero means none; the newest come first.
    pub comments: u16,
    /// Where to start.
    pub position: Inner,
    /// Only these fields.
    pub fields: Option<Vec<String>>,
}

/// Serde renames: `rename_all` on the struct, `rename` (and an `alias`) on fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Renamed {
    pub ticket_id: String,
    #[serde(rename = "max-results", alias = "limit")]
    pub max_results: u32,
    #[serde(alias = "includeDrafts")]
    pub with_drafts: Option<bool>,
}

/// A recursive type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tree {
    pub name: String,
    pub children: Vec<Tree>,
    pub parent: Option<Box<Tree>>,
}

/// A recursive type below the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Outline {
    pub title: String,
    pub root: Tree,
}

/// Calls `$callback!(name, Type)` for every shape: the golden file's name and the input type.
#[macro_export]
macro_rules! for_each_shape {
    ($callback:ident) => {
        $callback!(unit, ());
        $callback!(no_fields, NoFields);
        $callback!(scalars, Scalars);
        $callback!(optional, Optional);
        $callback!(nested, Nested);
        $callback!(vec_of_struct, VecOfStruct);
        $callback!(unit_enum, UnitEnum);
        $callback!(tagged_enum, Shape);
        $callback!(string_map, Labels);
        $callback!(any_json, AnyJson);
        $callback!(documented, Documented);
        $callback!(renamed, Renamed);
        $callback!(recursive, Tree);
        $callback!(recursive_nested, Outline);
    };
}
