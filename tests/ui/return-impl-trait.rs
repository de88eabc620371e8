use phaseo_agent::tool;

/// Say hello.
#[tool]
fn hello() -> impl serde::Serialize {
    "hello"
}

fn main() {}
