//! `Tool::typed` closures with the type of their future erased ([`Start`]). A module of its own,
//! because each module's generic instantiations are compiled (and recompiled) together: an edit
//! of one closure's body recompiles this module's few small instantiations (and `tool::finish`'s
//! polls) in the user's crate, not the decoding code. `#[tool]` does not use it: its expansion
//! boxes the future in the user's crate.

use std::fmt::Display;

use serde::Serialize;

use crate::tool::call::Start;
use crate::tool::context::ToolContext;
use crate::tool::finish::FinishResult;

/// A function of the input and the call's context (its own handle on it).
pub(crate) fn with_context<I, O, E, F, Fut>(f: F) -> Box<Start<I>>
where
    O: Serialize,
    E: Display,
    F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    Box::new(move |input, ctx, want_value| {
        Box::pin(FinishResult::new(f(input, ctx.clone()), want_value))
    })
}

/// A function of the input alone.
pub(crate) fn without_context<I, O, E, F, Fut>(f: F) -> Box<Start<I>>
where
    O: Serialize,
    E: Display,
    F: Fn(I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    Box::new(move |input, _, want_value| Box::pin(FinishResult::new(f(input), want_value)))
}
