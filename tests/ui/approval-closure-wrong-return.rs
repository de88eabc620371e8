use phaseo_agent::Tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Transfer {
    amount: u64,
}

async fn transfer(input: Transfer, _ctx: phaseo_agent::ToolContext) -> Result<u64, String> {
    Ok(input.amount)
}

fn main() {
    let _ = Tool::typed("transfer", "Move money", transfer)
        .approval(|input: &Transfer, _ctx| if input.amount > 100 { "yes" } else { "no" });
}
