use phaseo_agent::tool;

/// Echo a value back.
#[tool]
fn echo<T: Clone>(value: T) -> T {
    value
}

// Only the generic parameter is reported: the function is emitted as written, so calls still work.
fn main() {
    assert_eq!(echo(5), 5);
}
