use phaseo_agent::tool;

struct Service;

impl Service {
    /// Restart the service.
    #[tool]
    fn restart(&self) -> String {
        String::from("restarted")
    }
}

fn main() {}
