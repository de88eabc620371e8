//! A deserializer wrapper that checks every value it reads against a [`Shape`], while the input
//! type decodes itself from the same text: no `Value` is built, and no value is read twice.
//!
//! The wrapper sees each JSON value through the visitor call the underlying deserializer makes for
//! it (`visit_str` for a string, `visit_map` for an object, ...), so it checks what the text holds,
//! whatever the input type asked for. That closes the gaps where serde is looser than the schema:
//!
//! - a struct decoded from a JSON array (serde_json allows it): a struct is read from an object only,
//!   and an array is checked as an array;
//! - a key serde accepts for a field but the schema does not list (a `#[serde(alias)]`): in an
//!   object whose schema lists properties, the value of a key it does not list may be skipped or
//!   read whole (a `#[serde(flatten)]` map), not read as a field, so an alias is refused; and the
//!   schema's `required` is checked by the wrapper itself;
//! - values serde skips (unknown fields): read in full, as the JSON parser reads any value (serde_json
//!   skips a value without refusing a lone surrogate, a number out of range or nesting past its
//!   limit), and checked; bytes are read from a checked string the same way;
//! - numbers: an integer-valued float (`1.0`, `1e2`, `-0`, up to 2^53) at a node of integers is
//!   handed on as the integer, and an `f32` refuses a number it would turn into an infinity or zero;
//! - `{"Variant": null}` for a unit enum (serde_json's externally tagged form): an enum whose
//!   schema admits only strings is read from a string only.
//!
//! Any failure, including the wrapper's own, sends the call to the slow path (parse, validate,
//! decode), which reports the precise error or, when the wrapper was stricter than the schema
//! (a duplicate key), decodes the value. The slow path decodes the parsed value through this
//! wrapper too, so what the wrapper adds to the schema (aliases, integers, `f32`) holds there.
//!
//! With a [`Track`], the wrapper also records where an error happened, as a JSON path (a value in
//! [`Cx`], not a type: each input type's decoding is instantiated once).
//!
//! Files, lowest first: `track` (the error path, and what the wrappers carry down), `key` (the key
//! reader of objects), `value` (the wrapper around a value and around arrays and maps inside it,
//! one recursive unit).

/// The `Deserializer` methods both wrappers (this one and the key reader) forward with a wrapped
/// visitor; each handles `deserialize_enum`, `deserialize_struct`, `deserialize_ignored_any`,
/// `deserialize_f32` and the bytes methods on its own (the value wrapper reads those through
/// stricter methods).
macro_rules! forward_methods {
    ($forward:ident) => {
        $forward! {
            deserialize_any();
            deserialize_bool();
            deserialize_i8();
            deserialize_i16();
            deserialize_i32();
            deserialize_i64();
            deserialize_i128();
            deserialize_u8();
            deserialize_u16();
            deserialize_u32();
            deserialize_u64();
            deserialize_u128();
            deserialize_f64();
            deserialize_char();
            deserialize_str();
            deserialize_string();
            deserialize_option();
            deserialize_unit();
            deserialize_unit_struct(name: &'static str);
            deserialize_newtype_struct(name: &'static str);
            deserialize_seq();
            deserialize_tuple(len: usize);
            deserialize_tuple_struct(name: &'static str, len: usize);
            deserialize_map();
            deserialize_identifier();
        }
    };
}

mod track;
mod key;
mod value;

pub(crate) use track::{Cx, Track};
pub(crate) use value::Strict;
