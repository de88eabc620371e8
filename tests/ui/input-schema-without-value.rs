use phaseo_agent::tool;

/// Search tickets.
#[tool(input_schema)]
fn search(query: String) -> String {
    query
}

fn main() {}
