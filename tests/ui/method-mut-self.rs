use phaseo_agent::tools;

struct Counter {
    total: u64,
}

#[tools]
impl Counter {
    /// Add to the total.
    #[tool]
    async fn add(&mut self, amount: u64) -> u64 {
        self.total += amount;
        self.total
    }
}

fn main() {}
