use phaseo_agent::tool;

/// Read the status.
#[tool(read_only = true)]
fn status() -> String {
    "up".into()
}

fn main() {}
