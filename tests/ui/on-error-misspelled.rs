use phaseo_agent::tool;

/// Charge a card.
#[tool(on_error = "fail_run")]
fn charge(cents: u64) -> u64 {
    cents
}

fn main() {}
