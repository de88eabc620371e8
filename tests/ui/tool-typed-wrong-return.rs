use phaseo_agent::Tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Lookup {
    id: u32,
}

fn main() {
    let _ = Tool::typed("lookup", "Look a record up", |input: Lookup, _ctx| input.id);
}
