//! The key reader: sees each object key as serde reads it, and records which property it selects.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

use crate::decode::shape::{self, Checks, NodeId};

/// Which node the key just read selects, and (when tracking) the key itself.
#[derive(Default)]
pub(super) struct Slot {
    /// The node the key's value is checked at.
    pub(super) node: NodeId,
    /// The key's bit among the properties seen (`1 << index`), or 0 if it is not a property.
    pub(super) bit: u64,
    /// The previous property read, for `Object::find`.
    pub(super) previous: usize,
    /// The key was read as a string and looked up among the properties of the object's checks
    /// (when it was not, or the object has no checks, `select_unread` decides).
    pub(super) selected: bool,
    /// The key is not among the properties of an object that lists some: its value may only be
    /// skipped or read whole (see `Stranger`).
    pub(super) stranger: bool,
    pub(super) key: Option<String>,
}

/// Reads a key: the wrapped seed decodes it as usual, and the wrapper looks it up.
pub(super) struct KeySeed<'s, 'c, K> {
    pub(super) seed: K,
    pub(super) checks: Option<&'s Checks>,
    pub(super) track: bool,
    pub(super) slot: &'c mut Slot,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, '_, K> {
    type Value = K::Value;

    #[inline(always)]
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<K::Value, D::Error> {
        self.seed.deserialize(KeyDe {
            de,
            checks: self.checks,
            track: self.track,
            slot: self.slot,
        })
    }
}

struct KeyDe<'s, 'c, D> {
    de: D,
    checks: Option<&'s Checks>,
    track: bool,
    slot: &'c mut Slot,
}

impl<'s, 'c, D> KeyDe<'s, 'c, D> {
    #[inline(always)]
    fn visitor<V>(self, inner: V) -> (D, KeyVisitor<'s, 'c, V>) {
        (
            self.de,
            KeyVisitor {
                inner,
                checks: self.checks,
                track: self.track,
                slot: self.slot,
            },
        )
    }
}

macro_rules! forward_key {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        #[inline(always)]
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            let (de, visitor) = self.visitor(visitor);
            de.$method($($arg,)* visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDe<'_, '_, D> {
    type Error = D::Error;

    forward_methods!(forward_key);

    forward_key! {
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_ignored_any();
        deserialize_f32();
        deserialize_bytes();
        deserialize_byte_buf();
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// Sees the key's text (when it arrives as a string) and records which property it is.
struct KeyVisitor<'s, 'c, V> {
    inner: V,
    checks: Option<&'s Checks>,
    track: bool,
    slot: &'c mut Slot,
}

impl<V> KeyVisitor<'_, '_, V> {
    #[inline(always)]
    fn read(&mut self, key: &str) {
        self.slot.read(key, self.checks, self.track);
    }
}

impl Slot {
    /// Records the key just read: the node its value is checked at and the property it is, if
    /// any, and (when tracking) its text. Not a method of the visitor, so it is compiled once,
    /// whatever reads the key.
    #[inline]
    fn read(&mut self, key: &str, checks: Option<&Checks>, track: bool) {
        if track {
            self.read_tracked(key, checks);
        } else if let Some(c) = checks {
            self.select(key, c);
        }
    }

    /// Selects the key's property where [`Object::guess`](shape::Object::guess) says it is,
    /// else through [`Slot::select_slow`]. Out of line and with no call on its common path, so
    /// that path is a leaf function: no registers saved, nothing spilled, which keeps per-call
    /// dispatch fast.
    #[inline(never)]
    fn select(&mut self, key: &str, c: &Checks) {
        self.selected = true;
        match c.object.guess(key, self.previous) {
            Some((i, node)) => self.property(i, node),
            None => self.select_slow(key, c),
        }
    }

    #[inline(never)]
    fn select_slow(&mut self, key: &str, c: &Checks) {
        match c.object.find_slow(key, self.previous) {
            Some((i, node)) => self.property(i, node),
            None => self.additional(c),
        }
    }

    /// The key is the `i`th property, checked at `node`.
    #[inline(always)]
    fn property(&mut self, i: usize, node: NodeId) {
        self.node = node;
        self.bit = 1 << i;
        self.previous = i;
        self.stranger = false;
    }

    /// [`Slot::read`] on the tracked retry that finds an error's path: the key is kept too.
    #[cold]
    #[inline(never)]
    fn read_tracked(&mut self, key: &str, checks: Option<&Checks>) {
        if let Some(c) = checks {
            self.select(key, c);
        }
        self.key = Some(key.to_owned());
    }

    /// A key that is not a property: its value is checked as an additional property.
    #[inline]
    fn additional(&mut self, c: &Checks) {
        self.node = c.object.additional;
        self.bit = 0;
        self.stranger = !c.object.properties.is_empty();
    }

    /// After a key that [`Slot::read`] did not select (it was not read as a string, or the object
    /// has no checks): the node its value is checked at; `Err` says what is refused. Not
    /// generic, so compiled once.
    #[inline(never)]
    pub(super) fn select_unread(&mut self, checks: Option<&Checks>) -> Result<(), &'static str> {
        self.bit = 0;
        self.stranger = false;
        match checks {
            None => self.node = shape::ANY,
            Some(c) if c.object.properties.is_empty() => self.node = c.object.additional,
            Some(_) => return Err("a key the strict decoder cannot read"),
        }
        Ok(())
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<'_, '_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    #[inline(always)]
    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<V::Value, E> {
        self.read(v);
        self.inner.visit_str(v)
    }

    #[inline(always)]
    fn visit_borrowed_str<E: de::Error>(mut self, v: &'de str) -> Result<V::Value, E> {
        self.read(v);
        self.inner.visit_borrowed_str(v)
    }

    #[inline(always)]
    fn visit_string<E: de::Error>(mut self, v: String) -> Result<V::Value, E> {
        self.read(&v);
        self.inner.visit_string(v)
    }

    #[inline(always)]
    fn visit_bytes<E: de::Error>(mut self, v: &[u8]) -> Result<V::Value, E> {
        if let Ok(s) = std::str::from_utf8(v) {
            self.read(s);
        }
        self.inner.visit_bytes(v)
    }

    #[inline(always)]
    fn visit_borrowed_bytes<E: de::Error>(mut self, v: &'de [u8]) -> Result<V::Value, E> {
        if let Ok(s) = std::str::from_utf8(v) {
            self.read(s);
        }
        self.inner.visit_borrowed_bytes(v)
    }

    #[inline(always)]
    fn visit_byte_buf<E: de::Error>(mut self, v: Vec<u8>) -> Result<V::Value, E> {
        if let Ok(s) = std::str::from_utf8(&v) {
            self.read(s);
        }
        self.inner.visit_byte_buf(v)
    }

    // A key read as a number or a boolean (serde_json parses `"1"` for a `u32` key) is not selected.
    #[inline(always)]
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.inner.visit_bool(v)
    }
    #[inline(always)]
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.inner.visit_i64(v)
    }
    #[inline(always)]
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.inner.visit_u64(v)
    }
    #[inline(always)]
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<V::Value, E> {
        self.inner.visit_i128(v)
    }
    #[inline(always)]
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<V::Value, E> {
        self.inner.visit_u128(v)
    }
    #[inline(always)]
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.inner.visit_f64(v)
    }
    #[inline(always)]
    fn visit_char<E: de::Error>(mut self, v: char) -> Result<V::Value, E> {
        self.read(v.encode_utf8(&mut [0; 4]));
        self.inner.visit_char(v)
    }
    #[inline(always)]
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    #[inline(always)]
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    #[inline(always)]
    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(KeyDe {
            de,
            checks: self.checks,
            track: self.track,
            slot: self.slot,
        })
    }
    #[inline(always)]
    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(KeyDe {
            de,
            checks: self.checks,
            track: self.track,
            slot: self.slot,
        })
    }
    #[inline(always)]
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }
    #[inline(always)]
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(map)
    }
    #[inline(always)]
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}
