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

/// Records the path of an error, or (for the fast path) does nothing at no cost.
pub(crate) trait Tracker: Copy {
    /// Whether paths are recorded (keys are then kept as they are read).
    const ON: bool;
    fn push(self, segment: impl FnOnce() -> Segment);
}

/// The fast path's tracker: records nothing.
#[derive(Clone, Copy)]
pub(crate) struct NoTrack;

impl Tracker for NoTrack {
    const ON: bool = false;
    #[inline(always)]
    fn push(self, _: impl FnOnce() -> Segment) {}
}

impl Tracker for &Track {
    const ON: bool = true;
    fn push(self, segment: impl FnOnce() -> Segment) {
        Track::push(self, segment());
    }
}

/// What the wrapper carries down: the shape, and the path tracker.
#[derive(Clone, Copy)]
pub(crate) struct Cx<'s, T> {
    pub(crate) shape: &'s Shape,
    pub(crate) track: T,
}

/// Why a value fails its node (only the slow path's message reaches the model).
#[cold]
#[inline(never)]
pub(super) fn reject<E: de::Error>(what: &str) -> E {
    E::custom(format_args!("{what} is not allowed here by the schema"))
}
