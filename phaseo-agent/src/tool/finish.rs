//! The future of a started typed call (`#[tool]`, `Tool::typed`): the function's own future, its
//! output serialised when it is ready. A named type rather than an `async` block around the function's future, so a tool
//! adds no coroutine of its own to compile; in a module of its own, because its instantiations
//! are over the function's future, whose code changes with the tool's body: an edit recompiles
//! this module's small `poll`s in the user's crate, and nothing else of the runtime's.

use std::convert::Infallible;
use std::fmt::Display;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde::Serialize;

use crate::error::AgentError;
use crate::tool::call::{Produced, produce};

pin_project_lite::pin_project! {
    /// The call of a `#[tool]` function that returns its output.
    pub struct FinishOk<F> {
        #[pin]
        future: F,
        want_value: bool,
    }
}

pin_project_lite::pin_project! {
    /// The call of a `#[tool]` function that returns `Result<T, E>`.
    pub struct FinishResult<F> {
        #[pin]
        future: F,
        want_value: bool,
    }
}

impl<F> FinishOk<F> {
    /// The call of `future`; `want_value`: see [`Start`](crate::tool::call::Start).
    #[inline(always)]
    pub fn new(future: F, want_value: bool) -> Self {
        FinishOk { future, want_value }
    }
}

impl<F> FinishResult<F> {
    /// The call of `future`; `want_value`: see [`Start`](crate::tool::call::Start).
    #[inline(always)]
    pub fn new(future: F, want_value: bool) -> Self {
        FinishResult { future, want_value }
    }
}

impl<F, O> Future for FinishOk<F>
where
    F: Future<Output = O>,
    O: Serialize,
{
    type Output = Result<Produced, AgentError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.future.poll(cx) {
            Poll::Ready(output) => {
                Poll::Ready(produce(Ok::<O, Infallible>(output), *this.want_value))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F, O, E> Future for FinishResult<F>
where
    F: Future<Output = Result<O, E>>,
    O: Serialize,
    E: Display + 'static,
{
    type Output = Result<Produced, AgentError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.future.poll(cx) {
            Poll::Ready(result) => Poll::Ready(produce(result, *this.want_value)),
            Poll::Pending => Poll::Pending,
        }
    }
}
