use phaseo_agent::tool;

/// Load one ticket.
#[tool]
fn fetch_ticket(ticket_id: String, tenant: &String) -> String {
    format!("{tenant}/{ticket_id}")
}

fn main() {}
