use phaseo_agent::tool;

/// Search tickets.
#[tool(input_schema = |input| Ok::<_, String>(input))]
fn search(query: String) -> String {
    query
}

fn main() {}
