use phaseo_agent::tool;

/// Look up a customer in the CRM.
#[tool(external = true)]
fn crm_lookup(email: String) -> String;

fn main() {}
