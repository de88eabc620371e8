use phaseo_agent::tool;

/// Shout a text.
#[tool]
fn shout<'a>(text: &'a str) -> String {
    text.to_uppercase()
}

fn main() {}
