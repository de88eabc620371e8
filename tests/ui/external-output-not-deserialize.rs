use phaseo_agent::tool;

struct Customer {
    name: String,
}

/// Look up a customer in the CRM.
#[tool(external)]
fn crm_lookup(email: String) -> Customer;

fn main() {}
