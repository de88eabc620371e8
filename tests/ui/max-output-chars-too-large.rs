use phaseo_agent::tool;

/// Read a log file.
#[tool(max_output_chars = 100_000_000_000_000_000_000)]
fn read_log(path: String) -> String {
    path
}

fn main() {}
