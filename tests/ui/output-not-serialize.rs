use phaseo_agent::tool;

struct Ticket {
    title: String,
}

/// Load one ticket.
#[tool]
async fn fetch_ticket(ticket_id: String) -> Result<Ticket, String> {
    Ok(Ticket { title: ticket_id })
}

fn main() {}
