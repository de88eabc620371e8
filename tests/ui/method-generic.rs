use phaseo_agent::tools;

struct Store;

#[tools]
impl Store {
    /// Echo a value.
    #[tool]
    async fn echo<T: serde::Serialize>(&self, value: T) -> T {
        value
    }
}

fn main() {}
