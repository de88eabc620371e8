use phaseo_agent::{ToolContext, tool};

fn is_large(_ctx: &ToolContext, args: &TransferArgs) -> bool {
    args.amount > 1_000
}

/// Transfer money.
#[tool(require_approval = is_large)]
fn transfer(amount: u64) -> u64 {
    amount
}

fn main() {}
