use phaseo_agent::tool;

// Derived with schemars 0.8, whose `JsonSchema` is another trait than the schemars 1.x one
// phaseo-agent reads.
#[derive(serde::Deserialize, schemars08::JsonSchema)]
#[schemars(crate = "schemars08")]
struct Lookup {
    id: u32,
}

/// Look a ticket up.
#[tool]
async fn lookup(input: Lookup) -> u32 {
    input.id
}

fn main() {}
