use phaseo_agent::tool;

struct Helpdesk;

impl Helpdesk {
    /// Greet a customer.
    #[tool]
    async fn greet(&self, name: String) -> String {
        format!("Hello, {name}")
    }
}

fn main() {}
