//! The memory a hostile argument text can cost: the parsed form of an argument text is bounded
//! (`max(64 MiB, 8 × its length)`, estimated from above before parsing), and the estimate is
//! checked here against what the allocator is really asked for.
//!
//! One test function, holding the binary's lock `SERIAL`: the counting allocator sees every thread,
//! so nothing else may run beside the measurements.

use std::sync::PoisonError;

use phaseo_agent::__internals::{parse_budget, parsed_size};
use phaseo_agent::{Tool, ToolContext};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ALLOCATOR, SERIAL};

/// The peak of memory in use while `f` runs, above what was in use when it started.
fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    let result = f();
    (result, ALLOCATOR.peak_usage() - base)
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(future)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Item {
    sku: String,
    #[schemars(range(min = 1))]
    qty: u32,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Order {
    items: Vec<Item>,
}

/// `{"items":[{"sku":"A","qty":1}, ...]}` with `count` items, the last with `qty: 0` (invalid).
fn million_objects(count: usize) -> String {
    let mut text = String::from("{\"items\":[");
    for _ in 1..count {
        text.push_str("{\"sku\":\"A\",\"qty\":1},");
    }
    text.push_str("{\"sku\":\"A\",\"qty\":0}]}");
    text
}

fn texts() -> Vec<(&'static str, String)> {
    let n = 20_000;
    vec![
        ("small objects", million_objects(n)),
        ("one wide object", {
            let entries: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
            format!("{{{}}}", entries.join(","))
        }),
        ("numbers", format!("[{}]", vec!["1"; n].join(","))),
        (
            "nested arrays",
            format!("{}0{}", "[".repeat(120), "]".repeat(120)),
        ),
        (
            "many small arrays",
            format!("[{}]", vec!["[[0]]"; n].join(",")),
        ),
        ("empty objects", format!("[{}]", vec!["{}"; n].join(","))),
        (
            "one-key objects",
            format!("[{}]", vec!["{\"a\":{\"b\":null}}"; n].join(",")),
        ),
        ("short strings", format!("[{}]", vec!["\"x\""; n].join(","))),
        (
            "escaped strings",
            format!("[{}]", vec!["\"\\u00e9\\n\""; n].join(",")),
        ),
        (
            "a long string",
            format!("{{\"doc\":\"{}\"}}", "lorem ipsum ".repeat(n)),
        ),
        (
            "a call's arguments",
            json!({"id": "T-1", "tags": ["a", "b"], "n": 3}).to_string(),
        ),
    ]
}

#[test]
fn memory_is_bounded_for_hostile_argument_text() {
    // The allocator's peak is the process's: the other suites' cases must not run meanwhile.
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    // 1. The estimate is an upper bound on what parsing really allocates.
    for (name, text) in texts() {
        let (value, used) = peak_of(|| serde_json::from_str::<Value>(&text).expect("valid JSON"));
        drop(value);
        let estimate = parsed_size(&text);
        eprintln!(
            "{name}: {} bytes of text, {used} bytes parsed, {estimate} estimated",
            text.len()
        );
        assert!(
            used <= estimate,
            "{name}: parsing took {used} bytes, estimated at most {estimate}"
        );
        // And not a wild over-estimate, or valid arguments would be refused for nothing.
        assert!(
            estimate <= 12 * used.max(1024),
            "{name}: estimated {estimate} bytes, parsing took {used}"
        );
    }

    // 2. The case: a million small objects, the last one invalid, at a typed tool. The
    // fast path decodes into the input type and fails at the last item; the slow path would parse
    // the text to a `Value` of about a gigabyte, and is refused before it starts.
    let text = million_objects(1_000_000);
    let tool = Tool::typed("order", "Places an order", |_order: Order, _ctx| async {
        Ok::<_, String>(json!("placed"))
    });
    let (result, used) = peak_of(|| block_on(tool.invoke(&text, &ToolContext::detached())));
    eprintln!("a million small objects at a typed tool: {used} bytes at the peak");
    let error = result.expect_err("the last item is invalid").to_string();
    assert!(error.contains("too large to check"), "{error}");
    let bound = parse_budget(text.len());
    assert!(
        used <= bound,
        "a {} byte argument cost {used} bytes at its peak (bound {bound})",
        text.len()
    );

    // A tool on a hand-written schema, which takes a `Value`: refused before parsing too.
    let json_tool = Tool::new(
        "order",
        "Places an order",
        json!({"type": "object", "properties": {"items": {"type": "array"}}}),
        |input, _ctx| Ok(input),
    );
    let (result, used) = peak_of(|| block_on(json_tool.invoke(&text, &ToolContext::detached())));
    let error = result.expect_err("too large").to_string();
    assert!(error.contains("too large to check"), "{error}");
    assert!(used <= bound, "{used} bytes at the peak (bound {bound})");

    // 3. A large argument that is cheap once parsed (a 20 MB document in a string) is accepted.
    let doc = json!({"items": ["x".repeat(20 << 20)]}).to_string();
    let (result, _) = peak_of(|| block_on(json_tool.invoke(&doc, &ToolContext::detached())));
    result.expect("a long string is not refused");
}
