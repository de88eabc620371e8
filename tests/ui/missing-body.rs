use phaseo_agent::tool;

/// Look up a customer in the CRM.
#[tool]
fn crm_lookup(email: String) -> String;

fn main() {}
