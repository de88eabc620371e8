//! The wrapper around a value, and around the arrays and maps inside it: one recursive unit (an
//! element or a map value is a value again).

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};

use super::key::{KeySeed, Slot};
use super::track::{Cx, Segment, reject};
use crate::decode::shape::{self, Checks, Node, NodeId, Object, Scalar, Shape, types};

/// The wrapper around a deserializer, checking the value at `node`.
pub(crate) struct Strict<'s, D> {
    pub(crate) de: D,
    pub(crate) cx: Cx<'s>,
    pub(crate) node: NodeId,
}

/// The same around a seed (a map value, an array element, an `Option`'s content).
struct StrictSeed<'s, S> {
    seed: S,
    cx: Cx<'s>,
    node: NodeId,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrictSeed<'_, S> {
    type Value = S::Value;

    #[inline(always)]
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Strict {
            de,
            cx: self.cx,
            node: self.node,
        })
    }
}

impl<'s, D> Strict<'s, D> {
    #[inline(always)]
    fn visitor<V>(&self, inner: V) -> StrictVisitor<'s, V> {
        StrictVisitor {
            inner,
            cx: self.cx,
            node: self.node,
        }
    }
}

macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        #[inline(always)]
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            // Wrapped even where the schema allows anything: what the input type then skips must
            // still be parsed as strictly as the JSON parser does (see `deserialize_ignored_any`).
            let visitor = self.visitor(visitor);
            self.de.$method($($arg,)* visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<'_, D> {
    type Error = D::Error;

    forward_methods!(forward);

    /// An enum is read from a string only: serde_json also reads a unit variant from
    /// `{"Variant": null}`, which a schema of strings rejects. Data-carrying enums have schemas the
    /// shape does not compile (`oneOf`), so they never come here with checks.
    #[inline(always)]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if self.cx.shape.is_any(self.node) {
            // Any enum goes; its content is still read through the wrapper.
            let visitor = AnyEnumVisitor {
                inner: visitor,
                cx: self.cx,
            };
            return self.de.deserialize_enum(name, variants, visitor);
        }
        let visitor = EnumVisitor(self.visitor(visitor));
        self.de.deserialize_str(visitor)
    }

    /// A struct is read from an object only: serde_json also reads one from an array, which a
    /// struct's schema (an object) rejects. Asking for a map rather than a struct also leaves out
    /// the array branch, and with it a second decoding of every struct from its fields' positions,
    /// which keeps compile time down.
    #[inline(always)]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.de.deserialize_map(visitor)
    }

    /// A skipped value is still read and checked, and read in full: serde_json skips a value
    /// without the parser's checks (a lone surrogate escape, a number out of range, nesting past
    /// the recursion limit all pass), so a skipped value is read as any value is, through the
    /// wrapper, and then dropped.
    #[inline(always)]
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.de.deserialize_any(visitor)
    }

    /// Bytes are read from a string the parser checks (serde_json reads a string as bytes without
    /// refusing raw control characters or lone surrogates), or from an array of numbers.
    #[inline(always)]
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = BytesVisitor(self.visitor(visitor));
        self.de.deserialize_any(visitor)
    }

    #[inline(always)]
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = BytesVisitor(self.visitor(visitor));
        self.de.deserialize_any(visitor)
    }

    /// An `f32` is read as an `f64` (as it is from a parsed `Value`, so both paths decode the same
    /// number), and refused when it is out of `f32`'s range: a finite number that would become an
    /// infinity, or a nonzero one that would become zero.
    #[inline(always)]
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = F32Visitor(self.visitor(visitor));
        self.de.deserialize_f64(visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// The visitor wrapper: checks the value the deserializer found, then hands it on.
struct StrictVisitor<'s, V> {
    inner: V,
    cx: Cx<'s>,
    node: NodeId,
}

impl<'s, V> StrictVisitor<'s, V> {
    /// Where this value is checked, for the checks below (which do not depend on the visitor).
    #[inline(always)]
    fn at(&self) -> At<'s> {
        At {
            shape: self.cx.shape,
            node: self.node,
        }
    }
}

/// A node of a shape: what the checks of a value need. The checks are methods of this type, not of
/// the visitor wrapper, so they are compiled once rather than once per visitor type.
#[derive(Clone, Copy)]
struct At<'s> {
    shape: &'s Shape,
    node: NodeId,
}

impl<'s> At<'s> {
    /// The checks for a value that is not `null`, or `Err` if the node rejects every such value.
    #[inline]
    fn checks<E: de::Error>(&self, what: &str) -> Result<Option<&'s Checks>, E> {
        let shape = self.shape;
        match shape.node(shape.non_null(self.node)) {
            Node::Any => Ok(None),
            Node::Check(checks) => Ok(Some(checks)),
            Node::Never | Node::Nullable(_) => Err(reject(what)),
        }
    }

    /// Checks a value of one JSON type against the node's `type` (and that `enum` has no say on it).
    #[inline]
    fn typed<E: de::Error>(&self, bit: u8, what: &str) -> Result<Option<&'s Checks>, E> {
        match self.checks(what)? {
            Some(c) if c.types & bit == 0 || c.one_of.is_some() => Err(reject(what)),
            checks => Ok(checks),
        }
    }

    #[inline(always)]
    fn null<E: de::Error>(&self) -> Result<(), E> {
        // The common case (a node that checks only the type) inline; the rest out of line.
        if self.shape.plain(self.node, types::NULL) {
            Ok(())
        } else {
            self.null_checks()
        }
    }

    #[inline]
    fn null_checks<E: de::Error>(&self) -> Result<(), E> {
        let shape = self.shape;
        if shape.plain(self.node, types::NULL) {
            return Ok(());
        }
        let ok = match shape.node(self.node) {
            Node::Any | Node::Nullable(_) => true,
            Node::Never => false,
            Node::Check(c) => {
                c.types & types::NULL != 0
                    && c.one_of
                        .as_ref()
                        .is_none_or(|values| values.contains(&Scalar::Null))
            }
        };
        if ok { Ok(()) } else { Err(reject("null")) }
    }

    #[inline(always)]
    fn boolean<E: de::Error>(&self, v: bool) -> Result<(), E> {
        // The common case (a node that checks only the type) inline; the rest out of line.
        if self.shape.plain(self.node, types::BOOLEAN) {
            Ok(())
        } else {
            self.boolean_checks(v)
        }
    }

    #[inline]
    fn boolean_checks<E: de::Error>(&self, v: bool) -> Result<(), E> {
        if self.shape.plain(self.node, types::BOOLEAN) {
            return Ok(());
        }
        match self.checks("a boolean")? {
            Some(c) if c.types & types::BOOLEAN == 0 => Err(reject("a boolean")),
            Some(c)
                if c.one_of
                    .as_ref()
                    .is_some_and(|vs| !vs.contains(&Scalar::Bool(v))) =>
            {
                Err(reject("this boolean"))
            }
            _ => Ok(()),
        }
    }

    #[inline(always)]
    fn integer<E: de::Error>(&self, v: i128) -> Result<(), E> {
        // One read of the node's integer range; the refusal, with its reason, out of line.
        if self.shape.integer_passes(self.node, v) {
            Ok(())
        } else {
            Err(self.integer_refused())
        }
    }

    /// Why an integer the node's range refuses is refused: the node takes no integers, or not
    /// this one.
    #[cold]
    #[inline(never)]
    fn integer_refused<E: de::Error>(&self) -> E {
        match self.typed::<E>(types::INTEGER | types::NUMBER, "a number") {
            Err(refused) => refused,
            Ok(_) => reject("this number"),
        }
    }

    #[inline]
    fn float<E: de::Error>(&self, v: f64) -> Result<(), E> {
        let integral = v.is_finite() && v.fract() == 0.0;
        let bits = if integral {
            types::INTEGER | types::NUMBER
        } else {
            types::NUMBER
        };
        if v.is_finite() && self.shape.plain(self.node, bits) {
            return Ok(());
        }
        let Some(c) = self.typed(bits, "a number")? else {
            return Ok(());
        };
        let ok = v.is_finite()
            && c.minimum.is_none_or(|b| v >= b)
            && c.maximum.is_none_or(|b| v <= b)
            && c.exclusive_minimum.is_none_or(|b| v > b)
            && c.exclusive_maximum.is_none_or(|b| v < b);
        if ok {
            Ok(())
        } else {
            Err(reject("this number"))
        }
    }

    /// Whether the node (past `null`) admits integers but not other numbers.
    #[inline]
    fn integers_only(&self) -> bool {
        let shape = self.shape;
        matches!(
            shape.node(shape.non_null(self.node)),
            Node::Check(c) if c.types & (types::INTEGER | types::NUMBER) == types::INTEGER
        )
    }

    #[inline(always)]
    fn string<E: de::Error>(&self, v: &str) -> Result<(), E> {
        // The common case (a node that checks only the type) inline; the rest out of line.
        if self.shape.plain(self.node, types::STRING) {
            Ok(())
        } else {
            self.string_checks(v)
        }
    }

    #[inline]
    fn string_checks<E: de::Error>(&self, v: &str) -> Result<(), E> {
        if self.shape.plain(self.node, types::STRING) {
            return Ok(());
        }
        let Some(c) = self.checks("a string")? else {
            return Ok(());
        };
        if c.types & types::STRING == 0 {
            return Err(reject("a string"));
        }
        if c.plain {
            return Ok(());
        }
        if let Some(values) = &c.one_of {
            if !values
                .iter()
                .any(|s| matches!(s, Scalar::Str(s) if &**s == v))
            {
                return Err(reject("this string"));
            }
        }
        if c.min_length.is_some() || c.max_length.is_some() {
            let chars = v.chars().count() as u64;
            if c.min_length.is_some_and(|n| chars < n) || c.max_length.is_some_and(|n| chars > n) {
                return Err(reject("a string of this length"));
            }
        }
        Ok(())
    }

    #[inline]
    fn bytes<E: de::Error>(&self, v: &[u8]) -> Result<(), E> {
        // serde_json hands a string's content as bytes when the type asks for bytes.
        match std::str::from_utf8(v) {
            Ok(s) => self.string(s),
            Err(_) => Err(reject("a string that is not UTF-8")),
        }
    }
}

macro_rules! visit_int {
    ($($method:ident: $ty:ty;)*) => {$(
        #[inline(always)]
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.at().integer(v as i128)?;
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for StrictVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    visit_int! {
        visit_i8: i8;
        visit_i16: i16;
        visit_i32: i32;
        visit_i64: i64;
        visit_u8: u8;
        visit_u16: u16;
        visit_u32: u32;
        visit_u64: u64;
    }

    #[inline(always)]
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<V::Value, E> {
        self.at().integer(v)?;
        self.inner.visit_i128(v)
    }

    #[inline(always)]
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<V::Value, E> {
        self.at()
            .integer(i128::try_from(v).map_err(|_| reject::<E>("this number"))?)?;
        self.inner.visit_u128(v)
    }

    #[inline(always)]
    fn visit_f32<E: de::Error>(self, v: f32) -> Result<V::Value, E> {
        self.at().float(v.into())?;
        self.inner.visit_f32(v)
    }

    /// An integer-valued number at a node of integers (`1.0`, `1e2`, `-0`: integers to the schema)
    /// is handed on as the integer, which integer types read (they refuse any float). Only up to
    /// 2^53, where the float is the number the text wrote: `-9223372036854775809` parses to the
    /// float -2^63, which must not become `i64::MIN`.
    #[inline(always)]
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.at().float(v)?;
        const EXACT: f64 = (1u64 << 53) as f64;
        if v.fract() == 0.0 && (-EXACT..=EXACT).contains(&v) && self.at().integers_only() {
            return if v >= 0.0 {
                self.inner.visit_u64(v as u64)
            } else {
                self.inner.visit_i64(v as i64)
            };
        }
        self.inner.visit_f64(v)
    }

    #[inline(always)]
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.at().boolean(v)?;
        self.inner.visit_bool(v)
    }

    #[inline(always)]
    fn visit_char<E: de::Error>(self, v: char) -> Result<V::Value, E> {
        self.at().string(v.encode_utf8(&mut [0; 4]))?;
        self.inner.visit_char(v)
    }

    #[inline(always)]
    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.at().string(v)?;
        self.inner.visit_str(v)
    }

    #[inline(always)]
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.at().string(v)?;
        self.inner.visit_borrowed_str(v)
    }

    #[inline(always)]
    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.at().string(&v)?;
        self.inner.visit_string(v)
    }

    #[inline(always)]
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<V::Value, E> {
        self.at().bytes(v)?;
        self.inner.visit_bytes(v)
    }

    #[inline(always)]
    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
        self.at().bytes(v)?;
        self.inner.visit_borrowed_bytes(v)
    }

    #[inline(always)]
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<V::Value, E> {
        self.at().bytes(&v)?;
        self.inner.visit_byte_buf(v)
    }

    #[inline(always)]
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.at().null()?;
        self.inner.visit_none()
    }

    /// `null`, as serde_json reports it to `()` and to `deserialize_any`.
    #[inline(always)]
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.at().null()?;
        self.inner.visit_unit()
    }

    #[inline(always)]
    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        // Not `null`: the content is checked as it is read.
        self.inner.visit_some(Strict {
            de,
            cx: self.cx,
            node: self.node,
        })
    }

    #[inline(always)]
    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Strict {
            de,
            cx: self.cx,
            node: self.node,
        })
    }

    #[inline(always)]
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let checks = self.at().typed(types::ARRAY, "an array")?;
        let count = Cell::new(0);
        let value = self.inner.visit_seq(StrictSeq {
            seq,
            cx: self.cx,
            checks,
            count: &count,
        })?;
        array_length(checks, count.get()).map_err(reject)?;
        Ok(value)
    }

    #[inline(always)]
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let checks = self.at().typed(types::OBJECT, "an object")?;
        let seen = Cell::new(0);
        let value = self.inner.visit_map(StrictMap {
            map,
            cx: self.cx,
            checks,
            seen: &seen,
            current: Slot {
                previous: Object::START,
                ..Slot::default()
            },
        })?;
        required_seen(checks, seen.get()).map_err(reject)?;
        Ok(value)
    }

    #[inline(always)]
    fn visit_enum<A: EnumAccess<'de>>(self, _data: A) -> Result<V::Value, A::Error> {
        // Reached only through a deserializer other than serde_json's text reader.
        Err(reject("an enum the strict decoder cannot see into"))
    }
}

/// An array's length against its node's checks, once its elements are read (not generic: compiled
/// once).
#[inline]
fn array_length(checks: Option<&Checks>, count: usize) -> Result<(), &'static str> {
    let Some(array) = checks.map(|c| &c.array) else {
        return Ok(());
    };
    let n = count as u64;
    if array.min_items.is_some_and(|m| n < m) || array.max_items.is_some_and(|m| n > m) {
        return Err("an array of this length");
    }
    Ok(())
}

/// An object's required properties against those seen, once its entries are read.
#[inline]
fn required_seen(checks: Option<&Checks>, seen: u64) -> Result<(), &'static str> {
    match checks {
        Some(c) if c.object.required & !seen != 0 => Err("an object without a required property"),
        _ => Ok(()),
    }
}

/// Reads an enum from a string, checked like any string.
struct EnumVisitor<'s, V>(StrictVisitor<'s, V>);

impl<'de, V: Visitor<'de>> Visitor<'de> for EnumVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.inner.expecting(f)
    }

    #[inline(always)]
    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.0.at().string(v)?;
        self.0.inner.visit_enum(v.into_deserializer())
    }

    #[inline(always)]
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.0.at().string(v)?;
        self.0
            .inner
            .visit_enum(de::value::BorrowedStrDeserializer::new(v))
    }

    #[inline(always)]
    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.0.at().string(&v)?;
        self.0.inner.visit_enum(v.into_deserializer())
    }
}

/// Hands each visit on to the wrapped [`StrictVisitor`] (`self.0`), but for the methods listed.
macro_rules! delegate_visits {
    ($($method:ident($($arg:ident: $ty:ty)?);)*) => {$(
        #[inline(always)]
        fn $method<E: de::Error>(self, $($arg: $ty)?) -> Result<V::Value, E> {
            self.0.$method($($arg)?)
        }
    )*};
}

/// The visits every delegating visitor below hands on unchanged.
macro_rules! delegate_common {
    () => {
        delegate_visits! {
            visit_bool(v: bool);
            visit_i8(v: i8);
            visit_i16(v: i16);
            visit_i32(v: i32);
            visit_i64(v: i64);
            visit_i128(v: i128);
            visit_u8(v: u8);
            visit_u16(v: u16);
            visit_u32(v: u32);
            visit_u64(v: u64);
            visit_u128(v: u128);
            visit_f32(v: f32);
            visit_char(v: char);
            visit_bytes(v: &[u8]);
            visit_borrowed_bytes(v: &'de [u8]);
            visit_byte_buf(v: Vec<u8>);
            visit_none();
            visit_unit();
        }

        #[inline(always)]
        fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
            self.0.visit_some(de)
        }

        #[inline(always)]
        fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
            self.0.visit_newtype_struct(de)
        }

        #[inline(always)]
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
            self.0.visit_seq(seq)
        }

        #[inline(always)]
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
            self.0.visit_map(map)
        }

        #[inline(always)]
        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
            self.0.visit_enum(data)
        }
    };
}

/// Reads bytes from a string (checked like any string) or from whatever else the input type
/// takes bytes from (an array of numbers).
struct BytesVisitor<'s, V>(StrictVisitor<'s, V>);

impl<'de, V: Visitor<'de>> Visitor<'de> for BytesVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.inner.expecting(f)
    }

    delegate_common!();

    delegate_visits! {
        visit_f64(v: f64);
    }

    #[inline(always)]
    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.0.at().string(v)?;
        self.0.inner.visit_bytes(v.as_bytes())
    }

    #[inline(always)]
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.0.at().string(v)?;
        self.0.inner.visit_borrowed_bytes(v.as_bytes())
    }

    #[inline(always)]
    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.0.at().string(&v)?;
        self.0.inner.visit_byte_buf(v.into_bytes())
    }
}

/// Reads an `f32` from an `f64`, refusing what `f32` cannot hold.
struct F32Visitor<'s, V>(StrictVisitor<'s, V>);

impl<'de, V: Visitor<'de>> Visitor<'de> for F32Visitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.inner.expecting(f)
    }

    delegate_common!();

    delegate_visits! {
        visit_str(v: &str);
        visit_borrowed_str(v: &'de str);
        visit_string(v: String);
    }

    #[inline(always)]
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        let single = v as f32;
        if v.is_finite() && (single.is_infinite() || (single == 0.0 && v != 0.0)) {
            return Err(out_of_f32(v));
        }
        self.0.visit_f64(v)
    }
}

#[cold]
#[inline(never)]
fn out_of_f32<E: de::Error>(v: f64) -> E {
    E::custom(format_args!(
        "the number {v:e} is out of range for a 32-bit float"
    ))
}

/// An enum where the schema allows anything: its content is still read through the wrapper.
struct AnyEnumVisitor<'s, V> {
    inner: V,
    cx: Cx<'s>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for AnyEnumVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(StrictEnum { data, cx: self.cx })
    }
}

struct StrictEnum<'s, A> {
    data: A,
    cx: Cx<'s>,
}

impl<'de, 's, A: EnumAccess<'de>> EnumAccess<'de> for StrictEnum<'s, A> {
    type Error = A::Error;
    type Variant = StrictEnum<'s, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), A::Error> {
        let (value, data) = self.data.variant_seed(seed)?;
        Ok((value, StrictEnum { data, cx: self.cx }))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for StrictEnum<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.data.unit_variant()
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        self.data.newtype_variant_seed(StrictSeed {
            seed,
            cx: self.cx,
            node: shape::ANY,
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        let visitor = StrictVisitor {
            inner: visitor,
            cx: self.cx,
            node: shape::ANY,
        };
        self.data.tuple_variant(len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        let visitor = StrictVisitor {
            inner: visitor,
            cx: self.cx,
            node: shape::ANY,
        };
        self.data.struct_variant(fields, visitor)
    }
}

/// The array wrapper: each element is checked against its item node; the count is kept.
pub(super) struct StrictSeq<'s, 'c, A> {
    pub(super) seq: A,
    pub(super) cx: Cx<'s>,
    pub(super) checks: Option<&'s Checks>,
    pub(super) count: &'c Cell<usize>,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for StrictSeq<'_, '_, A> {
    type Error = A::Error;

    #[inline(always)]
    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        let index = self.count.get();
        let node = match self.checks {
            Some(c) => c.array.prefix.get(index).copied().unwrap_or(c.array.items),
            None => shape::ANY,
        };
        let seed = StrictSeed {
            seed,
            cx: self.cx,
            node,
        };
        match self.seq.next_element_seed(seed) {
            Ok(Some(value)) => {
                self.count.set(index + 1);
                Ok(Some(value))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.cx.push(|| Segment::Index(index));
                Err(e)
            }
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

/// The object wrapper: each key selects a property (or the additional-properties node), each
/// value is checked against it, and the properties seen are recorded for `required`.
pub(super) struct StrictMap<'s, 'c, A> {
    pub(super) map: A,
    pub(super) cx: Cx<'s>,
    pub(super) checks: Option<&'s Checks>,
    pub(super) seen: &'c Cell<u64>,
    pub(super) current: Slot,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StrictMap<'_, '_, A> {
    type Error = A::Error;

    #[inline(always)]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.current.selected = false;
        let seed = KeySeed {
            seed,
            checks: self.checks,
            track: self.cx.track.is_some(),
            slot: &mut self.current,
        };
        let key = self.map.next_key_seed(seed)?;
        if key.is_some() {
            if !self.current.selected {
                self.current.select_unread(self.checks).map_err(reject)?;
            }
            self.seen.set(self.seen.get() | self.current.bit);
        }
        Ok(key)
    }

    #[inline(always)]
    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        let strict = StrictSeed {
            seed,
            cx: self.cx,
            node: self.current.node,
        };
        let value = if self.current.stranger {
            self.map.next_value_seed(StrangerSeed(strict))
        } else {
            self.map.next_value_seed(strict)
        };
        value.inspect_err(|_| {
            let key = &mut self.current.key;
            self.cx
                .push(|| Segment::Key(key.take().unwrap_or_default()));
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// The value of a key the schema does not list, in an object whose schema lists properties: the
/// schema checks it as an additional property, so the input type may skip it, or read it whole as
/// serde reads a value it keeps aside (a `#[serde(flatten)]` map), but not read it as one of its
/// fields, which is what a `#[serde(alias)]` does: the field's own schema would never see it.
struct StrangerSeed<'s, S>(StrictSeed<'s, S>);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrangerSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        let StrictSeed { seed, cx, node } = self.0;
        seed.deserialize(Stranger(Strict { de, cx, node }))
    }
}

struct Stranger<'s, D>(Strict<'s, D>);

macro_rules! refuse_field {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $(_: $ty,)* _: V) -> Result<V::Value, D::Error> {
            Err(alias())
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Stranger<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_ignored_any(visitor)
    }

    refuse_field! {
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
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
    }

    fn is_human_readable(&self) -> bool {
        self.0.de.is_human_readable()
    }
}

#[cold]
#[inline(never)]
fn alias<E: de::Error>() -> E {
    E::custom(
        "this key is not a property in the schema, but the input reads it as one of its fields \
         (a serde alias): use the property's own name",
    )
}
