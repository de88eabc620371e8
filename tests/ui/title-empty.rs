use phaseo_agent::tool;

/// Deploy an environment.
#[tool(title = "  ")]
async fn deploy(environment: String) -> String {
    environment
}

fn main() {}
