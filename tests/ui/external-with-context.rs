use phaseo_agent::tool;

/// Look up a customer in the CRM.
#[tool(external)]
fn crm_lookup(email: String, ctx: &phaseo_agent::ToolContext) -> String;

fn main() {}
