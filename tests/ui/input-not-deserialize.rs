use phaseo_agent::tool;

#[derive(schemars::JsonSchema)]
struct FetchTicket {
    ticket_id: String,
}

/// Load one ticket.
#[tool]
async fn fetch_ticket(input: FetchTicket) -> String {
    input.ticket_id
}

fn main() {}
