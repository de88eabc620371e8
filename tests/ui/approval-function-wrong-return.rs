use phaseo_agent::tool;

fn is_large(args: &TransferArgs) -> String {
    (args.amount > 1_000).to_string()
}

/// Transfer money.
#[tool(require_approval = is_large)]
fn transfer(amount: u64) -> u64 {
    amount
}

fn main() {}
