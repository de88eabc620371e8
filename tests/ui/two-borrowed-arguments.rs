use phaseo_agent::tool;

/// Tag a ticket.
#[tool]
fn tag(tags: &[String], owner: &String) -> String {
    format!("{owner}: {}", tags.join(", "))
}

fn main() {}
