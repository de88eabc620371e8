use phaseo_agent::tool;

struct Point {
    x: i64,
    y: i64,
}

/// Move a point.
#[tool]
fn shift(point: Point, by: i64) -> i64 {
    point.x + point.y + by
}

fn main() {}
