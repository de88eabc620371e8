//! The path of an error (recorded as it bubbles up, or not at all on the fast path), and what the
//! wrappers carry down.

use std::cell::RefCell;

use serde::de;

use crate::decode::shape::Shape;

/// Where an error happened: segments are pushed innermost first as the error bubbles up.
#[derive(Default)]
pub(crate) struct Track {
    segments: RefCell<Vec<Segment>>,
}

pub(crate) enum Segment {
    Key(String),
    Index(usize),
}

impl Track {
    /// The recorded path: `$`, `$.items[1]`, `$["a key"]`.
    pub(crate) fn path(&self) -> String {
        let mut out = String::from("$");
        for segment in self.segments.borrow().iter().rev() {
            match segment {
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
                Segment::Key(k) => crate::schema::validate::push_key(&mut out, k),
            }
        }
        out
    }

    fn push(&self, segment: Segment) {
        self.segments.borrow_mut().push(segment);
    }
}

/// What the wrapper carries down: the shape, and where to record the path of an error (`None` on
/// the fast path, which records nothing). A value, not a type parameter: the input type's
/// `Deserialize` is instantiated once for both, so each input's decoding is compiled once.
#[derive(Clone, Copy)]
pub(crate) struct Cx<'s> {
    pub(crate) shape: &'s Shape,
    pub(crate) track: Option<&'s Track>,
}

impl Cx<'_> {
    /// Records a segment of an error's path, when tracking.
    #[inline(always)]
    pub(super) fn push(&self, segment: impl FnOnce() -> Segment) {
        if let Some(track) = self.track {
            track.push(segment());
        }
    }
}

/// Why a value fails its node (only the slow path's message reaches the model).
#[cold]
#[inline(never)]
pub(super) fn reject<E: de::Error>(what: &str) -> E {
    E::custom(format_args!("{what} is not allowed here by the schema"))
}
