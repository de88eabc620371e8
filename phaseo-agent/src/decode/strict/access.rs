//! The wrappers around a sequence and a map, and the key reader: what [`super::Strict`] hands the
//! inner visitor in place of serde_json's own accessors.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

use super::{Cx, Segment, StrictSeed, Tracker, reject};
use crate::decode::shape::{self, Checks, NodeId};

/// The array wrapper: each element is checked against its item node; the count is kept.
pub(super) struct StrictSeq<'s, 'c, A, T> {
    pub(super) seq: A,
    pub(super) cx: Cx<'s, T>,
    pub(super) checks: Option<&'s Checks>,
    pub(super) count: &'c Cell<usize>,
}

impl<'de, A: SeqAccess<'de>, T: Tracker> SeqAccess<'de> for StrictSeq<'_, '_, A, T> {
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
                self.cx.track.push(|| Segment::Index(index));
                Err(e)
            }
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

/// Which node the key just read selects, and (when tracking) the key itself.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) node: NodeId,
    /// The property's index, if the key is one.
    pub(super) property: Option<usize>,
    /// The previous property read, for [`Object::find`](super::shape::Object::find).
    pub(super) previous: usize,
    /// The key was not a string the wrapper could read.
    pub(super) unread: bool,
    pub(super) key: Option<String>,
}

/// The object wrapper: each key selects a property (or the additional-properties node), each
/// value is checked against it, and the properties seen are recorded for `required`.
pub(super) struct StrictMap<'s, 'c, A, T> {
    pub(super) map: A,
    pub(super) cx: Cx<'s, T>,
    pub(super) checks: Option<&'s Checks>,
    pub(super) seen: &'c Cell<u64>,
    pub(super) current: Slot,
}

impl<'de, A: MapAccess<'de>, T: Tracker> MapAccess<'de> for StrictMap<'_, '_, A, T> {
    type Error = A::Error;

    #[inline(always)]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.current.unread = true;
        let seed = KeySeed {
            seed,
            checks: self.checks,
            track: T::ON,
            slot: &mut self.current,
        };
        let key = self.map.next_key_seed(seed)?;
        if key.is_some() {
            let slot = &mut self.current;
            match (self.checks, slot.unread) {
                (None, _) => slot.node = shape::ANY,
                (Some(c), false) => match slot.property {
                    Some(i) => {
                        slot.node = c.object.properties[i].1;
                        slot.previous = i;
                        self.seen.set(self.seen.get() | 1 << i);
                    }
                    None => slot.node = c.object.additional,
                },
                (Some(c), true) if c.object.properties.is_empty() => {
                    slot.node = c.object.additional
                }
                (Some(_), true) => return Err(reject("a key the strict decoder cannot read")),
            }
        }
        Ok(key)
    }

    #[inline(always)]
    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        let seed = StrictSeed {
            seed,
            cx: self.cx,
            node: self.current.node,
        };
        self.map.next_value_seed(seed).inspect_err(|_| {
            let key = &mut self.current.key;
            self.cx
                .track
                .push(|| Segment::Key(key.take().unwrap_or_default()));
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// Reads a key: the wrapped seed decodes it as usual, and the wrapper looks it up.
struct KeySeed<'s, 'c, K> {
    seed: K,
    checks: Option<&'s Checks>,
    track: bool,
    slot: &'c mut Slot,
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
        deserialize_ignored_any();
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
        self.slot.unread = false;
        self.slot.property = self
            .checks
            .and_then(|c| c.object.find(key, self.slot.previous));
        if self.track {
            self.slot.key = Some(key.to_owned());
        }
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

    // A key read as a number or a boolean (serde_json parses `"1"` for a `u32` key) stays unread.
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
