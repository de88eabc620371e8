use phaseo_agent::tool;

#[derive(Debug)]
enum TicketError {
    NotFound,
}

/// Load one ticket.
#[tool]
fn fetch_ticket(ticket_id: String) -> Result<String, TicketError> {
    if ticket_id.is_empty() {
        return Err(TicketError::NotFound);
    }
    Ok(ticket_id)
}

fn main() {}
