use phaseo_agent::tools;

struct Counter;

#[tools]
impl Counter {
    /// Consume the counter.
    #[tool]
    fn finish(self) -> u64 {
        0
    }
}

fn main() {}
