use phaseo_agent::tool;

/// Count the words of a text.
#[tool]
fn count(text: String) -> usize
where
    String: Clone,
{
    text.split_whitespace().count()
}

fn main() {}
