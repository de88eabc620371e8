use phaseo_agent::tools;

struct Crm;

#[tools]
impl Crm {
    /// Look a customer up (forgot `external`).
    #[tool]
    async fn lookup(&self, email: String) -> String;
}

fn main() {}
