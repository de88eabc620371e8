//! The property of the `decode` fuzz target, shared with `tests/it/fuzz_corpus.rs`: what a typed tool
//! receives is a value its schema accepts.
//!
//! The first input byte picks one of the input types below; the rest, if it is UTF-8, is the
//! model's argument text. The text is decoded as the runtime decodes a typed tool's arguments
//! (`phaseo_agent::__internals::typed_decoder`), and when that succeeds:
//!
//! - (a) the text (`{}` for blank text, as the runtime reads it) parses as JSON;
//! - (b) that JSON value is accepted by a JSON Schema validator of `schemars::schema_for!(T)`, and
//!   by the runtime's own validator of the schema the tool advertises
//!   (`phaseo_agent::schema::schema_for`);
//! - (c) the decoded value, serialised back to JSON text with serde_json, is accepted by both
//!   validators too.
//!
//! Each type exercises serde attributes that make serde read differently from the schema:
//! aliases, defaults, renames, flattening, skipped fields, tagged and untagged enums, number types
//! narrower than JSON's, strings with a pattern or a length, nested lists with bounds, recursion.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::OnceLock;

use phaseo_agent::__internals::typed_decoder;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// 0: an alias on a bounded optional field and on a defaulted one, a renamed field, a skipped one.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Search {
    #[schemars(length(max = 64))]
    query: String,
    /// serde also reads `max_results`, a key the schema does not describe.
    #[serde(alias = "max_results")]
    #[schemars(range(max = 10))]
    limit: Option<u32>,
    #[serde(alias = "with_drafts", default)]
    #[schemars(range(max = 10))]
    pages: u8,
    #[serde(rename = "includeDrafts", default)]
    include_drafts: bool,
    /// Never read from the arguments (nor written back).
    #[serde(skip)]
    #[allow(dead_code)]
    cache_hint: u64,
}

/// 1: `rename_all`, a flattened struct and a flattened map.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Listing {
    ticket_id: String,
    #[serde(flatten)]
    paging: Paging,
    #[serde(flatten)]
    rest: HashMap<String, Value>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Paging {
    #[schemars(range(min = 1, max = 100))]
    page: u8,
    #[serde(default)]
    per_page: Option<u16>,
}

/// 2: an untagged enum whose variants read different kinds of JSON value, and floats.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Measure {
    amount: Amount,
    #[schemars(range(min = -1.5, max = 1e30))]
    ratio: f32,
    #[schemars(range(min = 0.0, max = 1.0))]
    weight: f64,
    scale: f32,
    precise: Option<f64>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
enum Amount {
    Number(#[schemars(range(min = 0.0))] f64),
    Text(#[schemars(length(min = 1, max = 12))] String),
}

/// 3: an internally tagged enum at the root.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Action {
    Deploy {
        environment: String,
        #[schemars(range(min = 1, max = 5))]
        replicas: u8,
    },
    Rollback {
        to_version: u64,
    },
    Pause,
}

/// 4: an externally tagged enum and a unit enum, in fields.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Control {
    command: Command,
    #[serde(default)]
    level: Option<Level>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
enum Command {
    Start,
    Stop {
        #[schemars(range(max = 60))]
        grace_secs: u32,
    },
    Scale(i64),
    Rename(#[schemars(length(min = 1))] String),
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Level {
    Low,
    High,
}

/// 5: integer types, with and without ranges.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Counts {
    small: u8,
    signed: i64,
    big: u64,
    #[schemars(range(min = -100, max = 100))]
    bounded: i64,
    #[schemars(range(min = 10))]
    big_bounded: u64,
    maybe: Option<u8>,
    #[serde(default)]
    tries: u8,
}

/// 6: nested lists of structs with bounds, a JSON value, a string with a pattern.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Order {
    #[schemars(regex(pattern = r"^[A-Z]{2}-[0-9]{1,6}$"))]
    order_id: String,
    #[schemars(length(min = 1, max = 4))]
    items: Vec<Item>,
    #[serde(default)]
    #[schemars(length(max = 3))]
    batches: Vec<Vec<Item>>,
    note: Option<String>,
    metadata: Value,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Item {
    #[schemars(length(min = 1, max = 8))]
    name: String,
    #[schemars(range(min = 0, max = 1000))]
    qty: u16,
}

/// 7: a recursive type, with a default and a renamed field.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
struct Tree {
    #[schemars(length(max = 16))]
    label: String,
    #[serde(default)]
    children: Vec<Tree>,
    weight: Option<f32>,
}

/// The types above, by their index (the first input byte, modulo their number).
pub const TYPES: [&str; 8] = [
    "Search", "Listing", "Measure", "Action", "Control", "Counts", "Order", "Tree",
];

/// The runtime's typed decoder of one input type.
type DecodeFn<T> = dyn Fn(&str) -> Result<T, String> + Send + Sync;

/// One input type: the runtime's decoder, a validator of schemars' schema, and the runtime's
/// validator of the schema the tool advertises.
struct Case<T> {
    name: &'static str,
    decode: Box<DecodeFn<T>>,
    schemars_schema: jsonschema::Validator,
    advertised: phaseo_agent::schema::Validator,
}

trait Check: Send + Sync {
    fn check(&self, text: &str);
}

impl<T> Case<T>
where
    T: DeserializeOwned + Serialize + JsonSchema + Debug + Send + Sync + 'static,
{
    fn new(name: &'static str) -> Self {
        let decode = typed_decoder::<T>()
            .unwrap_or_else(|e| panic!("the runtime refuses to decode {name}: {e}"));
        let schema = serde_json::to_value(schemars::schema_for!(T)).expect("a schema is JSON");
        // As the runtime builds its validators (`schema::Validator::new`): the draft from
        // `$schema` (schemars writes 2020-12), and `format` an annotation.
        let schemars_schema = jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("the schema of {name} does not compile: {e}\n{schema}"));
        let advertised =
            phaseo_agent::schema::Validator::new(&phaseo_agent::schema::schema_for::<T>())
                .unwrap_or_else(|e| {
                    panic!("the advertised schema of {name} does not compile: {e}")
                });
        Case {
            name,
            decode: Box::new(decode),
            schemars_schema,
            advertised,
        }
    }

    /// Panics unless both validators accept `value`.
    fn accepted(&self, what: &str, value: &Value, text: &str, decoded: &T) {
        if let Err(error) = self.schemars_schema.validate(value) {
            panic!(
                "{}: the decoder accepted {text:?} (decoded: {decoded:?}), but schemars' schema \
                 rejects {what} {value}: {error}",
                self.name
            );
        }
        if let Err(error) = self.advertised.check(value) {
            panic!(
                "{}: the decoder accepted {text:?} (decoded: {decoded:?}), but the advertised \
                 schema rejects {what} {value}: {error}",
                self.name
            );
        }
    }
}

impl<T> Check for Case<T>
where
    T: DeserializeOwned + Serialize + JsonSchema + Debug + Send + Sync + 'static,
{
    fn check(&self, text: &str) {
        let Ok(decoded) = (self.decode)(text) else {
            return;
        };
        // The runtime reads blank text (JSON whitespace only) as `{}`.
        let blank = text
            .bytes()
            .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        let json = if blank { "{}" } else { text };
        // (a)
        let value: Value = serde_json::from_str(json).unwrap_or_else(|e| {
            panic!(
                "{}: the decoder accepted {text:?} (decoded: {decoded:?}), which is not JSON: {e}",
                self.name
            )
        });
        // (b)
        self.accepted("the argument text's value", &value, text, &decoded);
        // (c) As JSON text: `serde_json::to_value` would widen an `f32` to the `f64` of its
        // binary value (`1e30_f32` to 1.0000000150474662e30), which no JSON text of it says.
        let back = serde_json::to_string(&decoded).unwrap_or_else(|e| {
            panic!(
                "{}: the decoded value of {text:?} (decoded: {decoded:?}) does not serialise: {e}",
                self.name
            )
        });
        let back: Value = serde_json::from_str(&back).unwrap_or_else(|e| {
            panic!(
                "{}: the decoded value of {text:?} serialises to {back}, which does not parse: {e}",
                self.name
            )
        });
        self.accepted("the decoded value, serialised back,", &back, text, &decoded);
    }
}

fn cases() -> &'static [Box<dyn Check>] {
    static CASES: OnceLock<Vec<Box<dyn Check>>> = OnceLock::new();
    CASES.get_or_init(|| {
        vec![
            Box::new(Case::<Search>::new(TYPES[0])),
            Box::new(Case::<Listing>::new(TYPES[1])),
            Box::new(Case::<Measure>::new(TYPES[2])),
            Box::new(Case::<Action>::new(TYPES[3])),
            Box::new(Case::<Control>::new(TYPES[4])),
            Box::new(Case::<Counts>::new(TYPES[5])),
            Box::new(Case::<Order>::new(TYPES[6])),
            Box::new(Case::<Tree>::new(TYPES[7])),
        ]
    })
}

/// Checks the property on one input: the first byte picks the type, the rest is the argument text.
pub fn check(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let cases = cases();
    cases[usize::from(pick) % cases.len()].check(text);
}
