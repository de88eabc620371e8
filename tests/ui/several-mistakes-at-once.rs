use phaseo_agent::tool;

#[tool(id = "bad id", external = yes, retries = 3)]
fn add<T>(a: impl Into<i64>, (b, c): (i64, i64)) -> i64 {
    a.into() + b + c
}

fn main() {}
