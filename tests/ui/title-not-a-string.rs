use phaseo_agent::tool;

/// Deploy an environment.
#[tool(title = deploy_title)]
async fn deploy(environment: String) -> String {
    environment
}

fn main() {}
