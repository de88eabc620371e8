use std::rc::Rc;

use phaseo_agent::tools;

struct Counter;

#[tools]
impl Counter {
    /// Count to a number.
    #[tool]
    async fn count(&self, to: u32) -> u32 {
        let counter = Rc::new(to);
        tokio::task::yield_now().await;
        *counter
    }
}

fn main() {}
