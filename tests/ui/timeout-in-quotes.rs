use phaseo_agent::tool;

/// Fetch a page.
#[tool(timeout_ms = "3000")]
async fn fetch(url: String) -> String {
    url
}

fn main() {}
