use phaseo_agent::{Res, tool};

struct Pool;

/// Ping the database.
#[tool]
async fn ping(db: &Res<Pool>) -> bool {
    let _ = db;
    true
}

fn main() {}
