use phaseo_agent::tool;

/// Deploy an environment.
#[tool(title = "Deploy", title = "Deploy again")]
async fn deploy(environment: String) -> String {
    environment
}

fn main() {}
