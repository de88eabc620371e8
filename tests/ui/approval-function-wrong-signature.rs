use phaseo_agent::tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Deploy {
    environment: String,
}

fn is_production(environment: &str) -> bool {
    environment == "production"
}

/// Deploy an environment.
#[tool(require_approval = is_production)]
fn deploy(input: Deploy) -> String {
    input.environment
}

fn main() {}
