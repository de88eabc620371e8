use phaseo_agent::tool;

/// Add two numbers.
#[tool]
fn add_two_numbers_together_and_return_their_sum_to_the_model_right_away(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
