use phaseo_agent::tool;

#[derive(serde::Deserialize)]
struct FetchTicket {
    ticket_id: String,
}

/// Load one ticket.
#[tool]
async fn fetch_ticket(input: FetchTicket) -> String {
    input.ticket_id
}

fn main() {}
