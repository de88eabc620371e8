use phaseo_agent::tool;

/// Look up a customer in the CRM.
#[tool(external)]
fn crm_lookup(email: String) -> String {
    email
}

fn main() {}
