//! Typed decoding of model arguments: from the argument text to the tool's input type, enforcing the
//! advertised schema.
//!
//! Two paths, chosen per call:
//!
//! - **Fast**: when the tool's schema compiles to a [`Shape`] (the keywords schemars derives for
//!   structs, scalars, `Option`, `Vec`, string-keyed maps, unit enums, `serde_json::Value`,
//!   recursive types; see [`shape`]), the input is decoded straight from the text by serde, through
//!   the [`strict`] wrapper that checks every value it reads against the schema. No `Value` is
//!   built; the schema is enforced exactly, including where serde is looser than the schema.
//! - **Slow**: when the fast path fails (or the schema has keywords it does not check, such as
//!   `oneOf` or `pattern`), the text is parsed to a `Value`, checked with the full JSON Schema
//!   validator (whose error reads `<path>: <reason>`), and decoded from the `Value`, through the
//!   same wrapper over the part of the schema it can check ([`Shape::compile_partial`]). A
//!   decoding error after the validator accepted reads `<path>: <serde's message>`.
//!
//! A schema with an `anyOf` whose branches overlap (an untagged enum whose variants read the same
//! kind of JSON value) is refused when the decoder is made: serde's choice of variant cannot be
//! checked (see [`shape::check_untagged`]).
//!
//! The fast path only ever accepts what the validator accepts, and when it fails the slow path
//! decides, so a call gets the same outcome either way; the fast path only makes it cheaper.

pub(crate) mod text;

mod shape;
mod strict;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;

use crate::schema::validate::Validator;
use text::{is_blank, parse_arguments};

pub(crate) use shape::Shape;

/// The input of a typed tool: decoded from the model's arguments, with a JSON Schema to advertise.
///
/// Every `DeserializeOwned + JsonSchema + Send + Sync + 'static` type is one: derive
/// `Deserialize` and `JsonSchema` for your own. Arguments are checked against the schema before
/// they are decoded, so a tool never runs on a value its schema refuses.
///
/// ```
/// use phaseo_agent::{Tool, ToolContext, ToolInput};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Search {
///     query: String,
///     #[serde(default)]
///     limit: u32,
/// }
///
/// fn schema_of<I: ToolInput>() -> serde_json::Value {
///     phaseo_agent::schema::schema_for::<I>()
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// assert_eq!(schema_of::<Search>()["required"], serde_json::json!(["query"]));
/// let search = Tool::typed_without_context("search", "Search tickets", |s: Search| async move {
///     Ok::<_, String>(format!("{} (limit {})", s.query, s.limit))
/// });
/// let ctx = ToolContext::detached();
/// assert_eq!(search.invoke(r#"{"query": "printer"}"#, &ctx).await?, r#""printer (limit 0)""#);
/// let err = search.invoke(r#"{"query": 7}"#, &ctx).await.unwrap_err();
/// assert_eq!(err.to_string(), r#"Invalid tool input: $.query: 7 is not of type "string""#);
/// # Ok(())
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool input: it needs serde's `Deserialize` and schemars 1.x's `JsonSchema`",
    label = "this type is not a tool input",
    note = "add `#[derive(serde::Deserialize, schemars::JsonSchema)]` to `{Self}`, or take plain arguments"
)]
pub trait ToolInput: DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static {}
impl<T: DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static> ToolInput for T {}

/// A typed decoder for one input type and its normalised schema, compiled once.
pub(crate) struct Decoder<I> {
    validator: Validator,
    /// The schema as the strict decoder checks it: all of it when `exact` (calls may then take the
    /// fast path), or the part it can check ([`Shape::compile_partial`]), which the slow path's
    /// serde step still reads through.
    shape: Shape,
    exact: bool,
    /// `I` decodes from `null` (`()`, a unit struct) but advertises an empty object.
    unit_like: bool,
    _input: std::marker::PhantomData<fn() -> I>,
}

impl<I: ToolInput> Decoder<I> {
    /// Compiles the validator (and, when the strict decoder can check the whole schema, its shape).
    pub(crate) fn new(schema: &Value) -> Result<Self, String> {
        let validator = Validator::new(schema)?;
        shape::check_untagged(schema)?;
        let (shape, exact) = match Shape::compile(schema) {
            Ok(shape) => (shape, true),
            Err(_) => (Shape::compile_partial(schema), false),
        };
        Ok(Decoder {
            validator,
            shape,
            exact,
            unit_like: is_unit_like::<I>(),
            _input: std::marker::PhantomData,
        })
    }

    /// Whether calls can take the fast path.
    #[cfg(test)]
    pub(crate) fn is_fast(&self) -> bool {
        self.exact
    }

    /// Decodes one call's argument text; `""` (some models send it for no arguments) means `{}`.
    pub(crate) fn decode(&self, args: &str) -> Result<I, String> {
        let text = if is_blank(args) { "{}" } else { args };
        if self.exact {
            let shape = &self.shape;
            let fast = if self.unit_like {
                decode_strict::<IgnoredAny>(shape, text)
                    .ok()
                    .and_then(|_| I::deserialize(Value::Null).ok())
            } else {
                decode_strict::<I>(shape, text).ok()
            };
            if let Some(input) = fast {
                return Ok(input);
            }
        }
        let value = parse_arguments(text)?;
        self.validator.check(&value)?;
        from_value(&self.shape, &value, self.unit_like)
    }

    /// The compiled parameter schema.
    pub(crate) fn validator(&self) -> &Validator {
        &self.validator
    }

    /// Decodes a value that already passed the tool's schema (edited arguments, arguments a custom
    /// validator transformed) into `I`, as [`decode`](Self::decode) would: a unit-like input (`()`)
    /// from any object, and a failure reads `<path>: <serde's message>`. It does not validate
    /// against the schema, but reads through the strict wrapper, as the slow path does.
    pub(crate) fn decode_value(&self, value: &Value) -> Result<I, String> {
        from_value(&self.shape, value, self.unit_like)
    }
}

/// Decodes `I` from the text through the strict wrapper: `Ok` only if the schema accepts the text.
fn decode_strict<I: DeserializeOwned>(shape: &Shape, text: &str) -> Result<I, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let input = I::deserialize(strict::Strict {
        de: &mut de,
        cx: strict::Cx {
            shape,
            track: strict::NoTrack,
        },
        node: shape.root(),
    })?;
    de.end()?;
    Ok(input)
}

/// Whether the strict decoder accepts a text for a schema, decoding a `Value` and an `IgnoredAny`.
pub(crate) fn strict_accepts(schema: &Value, text: &str) -> Result<bool, String> {
    let shape = Shape::compile(schema)?;
    let as_value = decode_strict::<Value>(&shape, text).is_ok();
    let ignored = decode_strict::<IgnoredAny>(&shape, text).is_ok();
    if as_value == ignored {
        Ok(as_value)
    } else {
        Err(format!(
            "as a Value: {as_value}, ignored: {ignored}, for {text}"
        ))
    }
}

/// Decodes a validated value, through the strict wrapper over `shape` (the whole schema, or the
/// part the wrapper can check): its checks pass, as the validator passed, but what the wrapper adds
/// to them holds on this path too (an alias is refused, an integer-valued float reads as an
/// integer, an `f32` must hold its number). On failure, says where, as a JSON path.
fn from_value<I: ToolInput>(shape: &Shape, value: &Value, unit_like: bool) -> Result<I, String> {
    if unit_like && value.is_object() {
        // Decodes from `null`: there are no fields to check.
        return I::deserialize(&Value::Null).map_err(|error| format!("$: {error}"));
    }
    I::deserialize(strict::Strict {
        de: value,
        cx: strict::Cx {
            shape,
            track: strict::NoTrack,
        },
        node: shape.root(),
    })
    .map_err(|error| {
        // Decode again, tracking the path, to say where it failed.
        let track = strict::Track::default();
        let tracked = I::deserialize(strict::Strict {
            de: value,
            cx: strict::Cx {
                shape,
                track: &track,
            },
            node: shape.root(),
        });
        match tracked {
            Err(tracked) => format!("{}: {tracked}", track.path()),
            Ok(_) => format!("$: {error}"),
        }
    })
}

/// Whether `I` is unit-like: its schema is `{"type": "null"}` (so the advertised schema is an empty
/// object), as for `()` and unit structs. Such a tool accepts any object, and `I` decodes from
/// `null`.
fn is_unit_like<I: ToolInput>() -> bool {
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<I>();
    schema.get("type") == Some(&Value::String("null".into()))
}

/// The typed decoder a `Tool::typed` tool uses (for the repository's benchmarks).
pub(crate) fn typed_decoder<I: ToolInput>() -> Result<impl Fn(&str) -> Result<I, String>, String> {
    let decoder = Decoder::<I>::new(&crate::schema::schema_for::<I>())?;
    Ok(move |args: &str| decoder.decode(args))
}

#[cfg(test)]
mod tests;
