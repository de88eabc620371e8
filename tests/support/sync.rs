//! A future polled to completion on the calling thread.

use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls a future that needs no runtime (a typed async tool without a timeout) to completion.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::yield_now();
    }
}
