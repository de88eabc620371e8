use phaseo_agent::{OnError, tool};

/// Charge a card.
#[tool(on_error = OnError::FailRun)]
fn charge(cents: u64) -> u64 {
    cents
}

fn main() {
    let _ = OnError::FailRun;
}
