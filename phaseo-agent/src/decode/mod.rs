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
//!   validator (whose error reads `<path>: <reason>`), and decoded through the same wrapper over
//!   the part of the schema it can check ([`Shape::compile_partial`]): from the text itself when
//!   the fast path was not tried, or else from the checked `Value`'s text (so a duplicate key
//!   keeps its last value). A decoding error after the validator accepted reads
//!   `<path>: <serde's message>`.
//!
//! Every path decodes from a text through the one wrapper, so an input type's `Deserialize` is
//! compiled once per tool, not once per path, which keeps down the compile time of a crate with
//! a hundred tools.
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

use crate::schema::validate::{Validator, check_defaults};
use text::{is_blank, parse_arguments};

pub(crate) use shape::{NodeId, Shape};
pub(crate) use strict::{Cx, Strict};

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
/// assert_eq!(err.to_string(), r#"invalid tool input: $.query: 7 is not of type "string""#);
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

/// A typed decoder for one input type and its normalised schema: [`Core`] with a slot for the
/// decoded input. The typed tools do not use it (they hand [`Core`] a function that makes the call
/// from the input, `tool::typed`); the tests and the benchmarks of decoding do.
pub(crate) struct Decoder<I> {
    core: Core,
    _input: std::marker::PhantomData<fn() -> I>,
}

impl<I: ToolInput> Decoder<I> {
    /// Compiles the validator (and, when the strict decoder can check the whole schema, its shape).
    pub(crate) fn new(schema: &Value) -> Result<Self, String> {
        Ok(Decoder {
            core: Core::new(schema, is_unit_like::<I>())?,
            _input: std::marker::PhantomData,
        })
    }

    /// Whether calls can take the fast path.
    #[cfg(test)]
    pub(crate) fn is_fast(&self) -> bool {
        self.core.exact
    }

    /// Decodes one call's argument text; `""` (some models send it for no arguments) means `{}`.
    pub(crate) fn decode(&self, args: &str) -> Result<I, String> {
        let mut slot = None;
        self.core.decode(args, &mut |text, cx, node| {
            slot = Some(decode_text::<I>(text, cx, node)?);
            Ok(())
        })?;
        slot.ok_or_else(nothing_decoded)
    }

    /// Decodes a value that already passed the schema ([`Core::decode_value`]).
    #[cfg(test)]
    pub(crate) fn decode_value(&self, value: &Value) -> Result<I, String> {
        let mut slot = None;
        self.core.decode_value(value, &mut |text, cx, node| {
            slot = Some(decode_text::<I>(text, cx, node)?);
            Ok(())
        })?;
        slot.ok_or_else(nothing_decoded)
    }
}

/// How [`Core`] has a text decoded into the input type: through the strict wrapper with the given
/// context, checking the value at the given node. The caller keeps what it decoded (the input, or
/// the call made from it): the only code compiled per input type is its `Deserialize` over the
/// strict wrapper and what the caller does with the input. The fast path, the slow path (which
/// decodes the checked value's text), a unit-like input (decoded from `null`) and the tracked
/// retry that finds an error's path all come here, so each input's decoding is compiled once.
pub(crate) trait Read: FnMut(&str, Cx<'_>, NodeId) -> Result<(), serde_json::Error> {}
impl<R: FnMut(&str, Cx<'_>, NodeId) -> Result<(), serde_json::Error>> Read for R {}

/// The reason given when a decode reported success but kept nothing (a bug, not a model's fault).
#[cold]
/// A value the schema check accepted, decoded as `I` by plain serde (for a type known only as
/// `DeserializeOwned`, such as a pending call's input read back): when that fails, it is decoded
/// once more with its integer-valued floats as integers, as [`Core`] does, since the schema counts
/// `2.0` as an integer and a buffered enum would otherwise refuse it.
pub(crate) fn from_checked_value<I: DeserializeOwned>(value: &Value) -> Result<I, String> {
    I::deserialize(value).or_else(|error| {
        text::integral_text(value)
            .and_then(|integral| serde_json::from_str(&integral).ok())
            .ok_or_else(|| format!("$: {error}"))
    })
}

pub(crate) fn nothing_decoded() -> String {
    "$: the input was not decoded".to_owned()
}

/// The decoder without its type: the compiled schema, the shape the strict wrapper checks, and the
/// paths a call takes (see the module docs).
pub(crate) struct Core {
    validator: Validator,
    /// The schema as the strict decoder checks it: all of it when `exact` (calls may then take the
    /// fast path), or the part it can check ([`Shape::compile_partial`]), which the slow path's
    /// serde step still reads through.
    shape: Shape,
    exact: bool,
    /// The input decodes from `null` (`()`, a unit struct) but advertises an empty object.
    unit_like: bool,
}

impl Core {
    /// Compiles the validator and the shape of a normalised schema; `unit_like`: the input decodes
    /// from `null` (see [`is_unit_like`]).
    pub(crate) fn new(schema: &Value, unit_like: bool) -> Result<Self, String> {
        let validator = Validator::new(schema)?;
        shape::check_untagged(schema)?;
        check_defaults(schema)?;
        let (shape, exact) = match Shape::compile(schema) {
            Ok(shape) => (shape, true),
            Err(_) => (Shape::compile_partial(schema), false),
        };
        Ok(Core {
            validator,
            shape,
            exact,
            unit_like,
        })
    }

    /// The compiled parameter schema.
    pub(crate) fn validator(&self) -> &Validator {
        &self.validator
    }

    #[inline]
    fn cx(&self) -> Cx<'_> {
        Cx {
            shape: &self.shape,
            track: None,
        }
    }

    /// Decodes one call's argument text with `read`; `""` (some models send it for no arguments)
    /// means `{}`. The fast path is tried here, with `read` called directly (most calls take it);
    /// the others are behind `dyn`, compiled once.
    #[inline]
    pub(crate) fn decode(&self, args: &str, read: &mut impl Read) -> Result<(), String> {
        let text = if is_blank(args) { "{}" } else { args };
        if self.exact && !self.unit_like && read(text, self.cx(), self.shape.root()).is_ok() {
            return Ok(());
        }
        self.decode_slow(text, read)
    }

    /// The paths other than the fast one: a unit-like input, and parse, validate, decode.
    fn decode_slow(&self, text: &str, read: &mut dyn Read) -> Result<(), String> {
        if self.exact
            && self.unit_like
            && decode_strict::<IgnoredAny>(&self.shape, text).is_ok()
            && read("null", self.cx(), shape::ANY).is_ok()
        {
            return Ok(());
        }
        let value = parse_arguments(text)?;
        self.validator.check(&value)?;
        // The schema has keywords the wrapper does not check, and the validator passed: the text
        // itself decodes as on the fast path (in its own key order), unless the wrapper is
        // stricter than the schema (a duplicate key); the checked value then decides.
        if !self.exact && !self.unit_like && read(text, self.cx(), self.shape.root()).is_ok() {
            return Ok(());
        }
        self.decode_value(&value, read)
    }

    /// Decodes a value that already passed the tool's schema (edited arguments, arguments a custom
    /// validator transformed) with `read`, as [`decode`](Self::decode) would: a unit-like input
    /// (`()`) from any object, and a failure reads `<path>: <serde's message>`. It does not
    /// validate against the schema, but reads through the strict wrapper over `shape` (the whole
    /// schema, or the part the wrapper can check), as the slow path does: its checks pass, as the
    /// validator passed, but what the wrapper adds to them holds on this path too (an alias is
    /// refused, an integer-valued float reads as an integer, an `f32` must hold its number).
    /// `float_roundtrip` makes every number read back as the one the value holds. On failure,
    /// says where, as a JSON path.
    pub(crate) fn decode_value(&self, value: &Value, read: &mut dyn Read) -> Result<(), String> {
        if self.unit_like && value.is_object() {
            // Decodes from `null`: there are no fields to check.
            return read("null", self.cx(), shape::ANY).map_err(|e| format!("$: {}", message(&e)));
        }
        let text = value.to_string();
        let root = self.shape.root();
        let Err(error) = read(&text, self.cx(), root) else {
            return Ok(());
        };
        // A value serde buffers before it picks a variant (an internally tagged, adjacently tagged
        // or untagged enum, a flattened field) is decoded out of the wrapper's sight, so an
        // integer-valued float in it reaches an integer type as a float, which it refuses. The
        // schema counts such a float as an integer, so decode again with every one made an
        // integer, as the wrapper makes them at a node of integers. A type that wants a float
        // reads the integer as the same number.
        if let Some(integral) = text::integral_text(value) {
            if read(&integral, self.cx(), root).is_ok() {
                return Ok(());
            }
        }
        // Decode again, tracking the path, to say where it failed.
        let track = strict::Track::default();
        let cx = Cx {
            shape: &self.shape,
            track: Some(&track),
        };
        Err(match read(&text, cx, root) {
            Err(tracked) => format!("{}: {}", track.path(), message(&tracked)),
            Ok(()) => format!("$: {}", message(&error)),
        })
    }
}

/// serde's message, without the position serde_json adds for a text (the text is the value's,
/// not the model's).
fn message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    if error.line() == 0 {
        return text;
    }
    let position = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

/// Decodes `I` from the text through the strict wrapper, checking the value at `node`.
fn decode_text<I: DeserializeOwned>(
    text: &str,
    cx: Cx<'_>,
    node: NodeId,
) -> Result<I, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let input = I::deserialize(Strict {
        de: &mut de,
        cx,
        node,
    })?;
    de.end()?;
    Ok(input)
}

/// Decodes `I` from the text through the strict wrapper: `Ok` only if the schema accepts the text.
fn decode_strict<I: DeserializeOwned>(shape: &Shape, text: &str) -> Result<I, serde_json::Error> {
    decode_text(text, Cx { shape, track: None }, shape.root())
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
