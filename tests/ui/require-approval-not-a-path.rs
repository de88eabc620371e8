use phaseo_agent::tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Deploy {
    environment: String,
}

/// Deploy an environment.
#[tool(require_approval = |input: &Deploy| input.environment == "production")]
fn deploy(input: Deploy) -> String {
    input.environment
}

fn main() {}
