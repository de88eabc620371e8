use phaseo_agent::tool;

/// Run a database migration.
#[tool(exclusive = true)]
async fn migrate(version: u32) -> u32 {
    version
}

fn main() {}
