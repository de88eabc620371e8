//! `Tool::typed` functions as [`Start`]s: an async one with the type of its future erased, a
//! synchronous one sent to Tokio's blocking pool. A module of its own, because each module's
//! generic instantiations are compiled (and recompiled) together: an edit of one closure's body
//! recompiles this module's few small instantiations (and `tool::finish`'s polls) in the user's
//! crate, not the decoding code. `#[tool]` uses it for a synchronous function only: for an async
//! one, its expansion boxes the future in the user's crate.

use std::fmt::Display;

use serde::Serialize;

use crate::tool::call::{Start, blocking, produce};
use crate::tool::context::ToolContext;
use crate::tool::finish::FinishResult;

/// An async function of the input and the call's context (its own handle on it).
pub(crate) fn with_context<I, O, E, F, Fut>(f: F) -> Box<Start<I>>
where
    O: Serialize,
    E: Display + 'static,
    F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    Box::new(move |input, ctx, want_value| {
        Box::pin(FinishResult::new(f(input, ctx.clone()), want_value))
    })
}

/// A synchronous function of the input and the call's context, run on Tokio's blocking pool (it
/// may block).
pub(crate) fn blocking_with_context<I, O, E, F>(f: F) -> Box<Start<I>>
where
    I: Send + 'static,
    O: Serialize,
    E: Display + 'static,
    F: Fn(I, ToolContext) -> Result<O, E> + Send + Sync + 'static,
{
    let f = std::sync::Arc::new(f);
    Box::new(move |input, ctx, want_value| {
        let (f, ctx) = (f.clone(), ctx.clone());
        blocking(move || produce(f(input, ctx), want_value))
    })
}

/// An async function of the input alone.
pub(crate) fn without_context<I, O, E, F, Fut>(f: F) -> Box<Start<I>>
where
    O: Serialize,
    E: Display + 'static,
    F: Fn(I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    Box::new(move |input, _, want_value| Box::pin(FinishResult::new(f(input), want_value)))
}
