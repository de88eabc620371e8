//! A streamed chunk as typed values borrowed from its text: read in one pass, without a
//! `serde_json::Value` tree, whatever its shape.
//!
//! No field refuses a shape while it is read: a field of the wrong type becomes [`Field::Other`]
//! or `Wrong`, so that the assembler, which knows which chunk it is, says what was wrong in its
//! own words (and a chunk's `error` is always seen, whatever else it holds).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

// Every struct borrows from the chunk's text (`'de: 'a`): its fields are `Field`s, `Object`s and
// `Array`s, whose own `Deserialize` borrows. A field that is missing or `null` is `None`.

/// One chunk of a streamed Chat Completions response.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Chunk<'a> {
    pub(super) choices: Option<Array<Object<Choice<'a>>>>,
    pub(super) id: Option<Field<'a>>,
    pub(super) model: Option<Field<'a>>,
    pub(super) object: Option<Field<'a>>,
    pub(super) usage: Option<Value>,
    pub(super) error: Option<Value>,
}

/// One of a chunk's `choices`.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Choice<'a> {
    pub(super) index: Option<Field<'a>>,
    pub(super) delta: Option<Object<Delta<'a>>>,
    pub(super) finish_reason: Option<Field<'a>>,
    pub(super) error: Option<Value>,
}

/// A choice's `delta`. Its legacy `function_call` is read only when it is an object.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Delta<'a> {
    pub(super) content: Option<Field<'a>>,
    pub(super) refusal: Option<Field<'a>>,
    pub(super) tool_calls: Option<Array<Object<Piece<'a>>>>,
    pub(super) function_call: Option<Object<Function<'a>>>,
}

/// A tool call's `function` (or the legacy `function_call`).
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Function<'a> {
    pub(super) name: Option<Field<'a>>,
    pub(super) arguments: Option<Field<'a>>,
}

/// A piece of a tool call, in `delta.tool_calls`.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Piece<'a> {
    pub(super) index: Option<Field<'a>>,
    pub(super) id: Option<Field<'a>>,
    pub(super) function: Option<Object<Function<'a>>>,
}

/// A scalar field: a string, borrowed when it has no escapes, or any other JSON value.
pub(super) enum Field<'a> {
    Str(Cow<'a, str>),
    Other(Value),
}

impl Field<'_> {
    /// The string, if the field is one (as `Value::as_str`).
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(text) => Some(text),
            Field::Other(_) => None,
        }
    }
}

/// A field that must be an object: read as `T`, or `Wrong` (anything else, skipped).
pub(super) enum Object<T> {
    Read(T),
    Wrong,
}

/// A field that must be an array: its elements read as `T`s, or `Wrong` (anything else,
/// skipped).
pub(super) enum Array<T> {
    Read(Vec<T>),
    Wrong,
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor;

        impl<'de> Visitor<'de> for FieldVisitor {
            type Value = Field<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Field::Str(Cow::Borrowed(text)))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Field::Str(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(Field::Str(Cow::Owned(text)))
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
                Ok(Field::Other(Value::Bool(value)))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
                Ok(Field::Other(Value::from(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
                Ok(Field::Other(Value::from(value)))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
                Ok(Field::Other(Value::from(value)))
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Field::Other(Value::Null))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(SeqAccessDeserializer::new(seq)).map(Field::Other)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(MapAccessDeserializer::new(map)).map(Field::Other)
            }
        }

        deserializer.deserialize_any(FieldVisitor)
    }
}

/// What [`Object`] and [`Array`] make of a JSON object, a JSON array, and anything else.
trait Shape<'de>: Sized {
    fn object<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
    fn array<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error>;
    fn other() -> Self;
}

impl<'de, T: Deserialize<'de>> Shape<'de> for Object<T> {
    fn object<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Object::Read)
    }

    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Object::Wrong)
    }

    fn other() -> Self {
        Object::Wrong
    }
}

impl<'de, T: Deserialize<'de>> Shape<'de> for Array<T> {
    fn object<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Array::Wrong)
    }

    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut read = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(16));
        while let Some(element) = seq.next_element()? {
            read.push(element);
        }
        Ok(Array::Read(read))
    }

    fn other() -> Self {
        Array::Wrong
    }
}

/// Reads a value as its [`Shape`] says.
struct ByShape<S>(PhantomData<S>);

impl<'de, S: Shape<'de>> Visitor<'de> for ByShape<S> {
    type Value = S;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<S, E> {
        Ok(S::other())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<S, E> {
        Ok(S::other())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<S, E> {
        Ok(S::other())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<S, E> {
        Ok(S::other())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<S, E> {
        Ok(S::other())
    }

    fn visit_unit<E: de::Error>(self) -> Result<S, E> {
        Ok(S::other())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<S, A::Error> {
        S::array(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<S, A::Error> {
        S::object(map)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ByShape(PhantomData))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Array<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ByShape(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_any_shape_are_read_without_an_error() {
        let chunk: Chunk<'_> = serde_json::from_str(
            r#"{"id": 5, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": "x", "finish_reason": ["stop"], "logprobs": null},
                {"delta": {"content": [{"type": "text", "text": "a"}], "tool_calls": {"index": 0},
                           "function_call": "legacy"}},
                {"delta": {"tool_calls": [7, {"index": "first", "function": [1], "id": "c\u0031"}]}},
                "not a choice"
            ]}"#,
        )
        .expect("any shape reads");
        assert!(matches!(chunk.id, Some(Field::Other(Value::Number(_)))));
        assert_eq!(
            chunk.object.as_ref().and_then(Field::as_str),
            Some("chat.completion.chunk")
        );
        let Some(Array::Read(choices)) = chunk.choices else {
            panic!("choices")
        };
        assert_eq!(choices.len(), 4);
        let [
            Object::Read(first),
            Object::Read(second),
            Object::Read(third),
            Object::Wrong,
        ] = &choices[..]
        else {
            panic!("choices' shapes")
        };
        assert!(matches!(first.delta, Some(Object::Wrong)));
        assert!(matches!(first.finish_reason, Some(Field::Other(_))));
        let Some(Object::Read(delta)) = &second.delta else {
            panic!("delta")
        };
        assert!(matches!(delta.content, Some(Field::Other(Value::Array(_)))));
        assert!(matches!(delta.tool_calls, Some(Array::Wrong)));
        assert!(matches!(delta.function_call, Some(Object::Wrong)));
        let Some(Object::Read(delta)) = &third.delta else {
            panic!("delta")
        };
        let Some(Array::Read(pieces)) = &delta.tool_calls else {
            panic!("pieces")
        };
        let [Object::Wrong, Object::Read(piece)] = &pieces[..] else {
            panic!("pieces' shapes")
        };
        assert_eq!(piece.index.as_ref().and_then(Field::as_str), Some("first"));
        assert_eq!(piece.id.as_ref().and_then(Field::as_str), Some("c1"));
        assert!(matches!(piece.function, Some(Object::Wrong)));
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let chunk: Chunk<'_> =
            serde_json::from_str(r#"{"id": "plain", "object": "esc\"aped"}"#).expect("a chunk");
        assert!(matches!(chunk.id, Some(Field::Str(Cow::Borrowed("plain")))));
        assert!(matches!(chunk.object, Some(Field::Str(Cow::Owned(_)))));
    }
}
