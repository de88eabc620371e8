use phaseo_agent::tools;

struct Store;

trait Countable {
    fn count(&self) -> u64;
}

#[tools]
impl Countable for Store {
    /// Count the items.
    #[tool]
    fn count(&self) -> u64 {
        1
    }
}

fn main() {}
