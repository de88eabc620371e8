//! Not public API: the parts of a plain-argument struct's `Deserialize` that do not depend on the
//! struct, called by the impl `#[tool]` writes for it (re-exported through `__private`).
//!
//! `#[tool]` writes that impl itself rather than deriving it, when no argument carries a `#[serde]`
//! or `#[schemars]` attribute. A derived impl's code is positioned by the derive's expansion, and
//! rustc then recompiles every instantiation over the struct (serde_json's whole deserializer
//! codegen unit among them) after any edit above it in the file that changes a line's length. The
//! written impl is positioned at the function's name, like the user's own code, and an edit above
//! it recompiles only what the edit touches.
//!
//! It reads as the derived one does: a key names an argument or is skipped, a repeated argument is
//! an error (`duplicate field`), a missing one is an error (`missing field`) unless its type reads
//! one as absent (`Option<T>` is `None`), and the expected value is `struct <Name>Args`. It reads
//! an object only, not an array of the arguments in order.

use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::forward_to_deserialize_any;

/// Reads one key of the arguments object: the index of the argument it names, or `None` for a
/// key that is none of them (its value is skipped).
pub struct ArgKey(pub &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for ArgKey {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Option<usize>, D::Error> {
        de.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for ArgKey {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field identifier")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<usize>, E> {
        Ok(usize::try_from(v).ok().filter(|&i| i < self.0.len()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|name| *name == v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|name| name.as_bytes() == v))
    }
}

/// Reads the value of argument `name` into `slot`: an error if it was read already.
#[inline]
pub fn arg_value<'de, T: de::Deserialize<'de>, A: MapAccess<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// Skips the value of a key that names no argument (it is still read, and checked, in full).
#[inline]
pub fn skip_value<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>().map(|_| ())
}

/// The argument read into `slot`, or, when it was not given, what its type reads from nothing:
/// `None` for an `Option`, a `missing field` error for the rest (as serde's derive does).
#[inline]
pub fn arg_or_missing<'de, T: de::Deserialize<'de>, E: de::Error>(
    slot: Option<T>,
    name: &'static str,
) -> Result<T, E> {
    match slot {
        Some(value) => Ok(value),
        None => T::deserialize(Missing(name, PhantomData)),
    }
}

/// A value that is not there: an `Option` reads it as `None`; anything else fails with
/// `missing field`.
struct Missing<E>(&'static str, PhantomData<E>);

impl<'de, E: de::Error> Deserializer<'de> for Missing<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, E> {
        Err(de::Error::missing_field(self.0))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::value::{Error, StrDeserializer};

    #[test]
    fn a_missing_option_is_none_and_anything_else_is_an_error() {
        assert_eq!(arg_or_missing::<Option<u32>, Error>(None, "n"), Ok(None));
        assert_eq!(arg_or_missing::<u32, Error>(Some(3), "n"), Ok(3));
        let err = arg_or_missing::<u32, Error>(None, "n").unwrap_err();
        assert_eq!(err.to_string(), "missing field `n`");
        let err = arg_or_missing::<String, Error>(None, "name").unwrap_err();
        assert_eq!(err.to_string(), "missing field `name`");
    }

    #[test]
    fn a_key_is_the_index_of_the_argument_it_names() {
        let key = |k: &'static str| {
            ArgKey(&["name", "count"]).deserialize(StrDeserializer::<Error>::new(k))
        };
        assert_eq!(key("count"), Ok(Some(1)));
        assert_eq!(key("name"), Ok(Some(0)));
        assert_eq!(key("other"), Ok(None));
        assert_eq!(ArgKey(&["a"]).visit_u64::<Error>(0), Ok(Some(0)));
        assert_eq!(ArgKey(&["a"]).visit_u64::<Error>(1), Ok(None));
        assert_eq!(ArgKey(&["a"]).visit_bytes::<Error>(b"a"), Ok(Some(0)));
    }
}
