use phaseo_agent::tools;

struct Store<T>(T);

#[tools]
impl<T: Send + Sync + 'static> Store<T> {
    /// Count the items.
    #[tool]
    async fn count(&self) -> u64 {
        1
    }
}

fn main() {}
