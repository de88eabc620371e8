//! Per-call dispatch of a small typed tool, from the model's argument text to the result text,
//! with schema validation on, against a hand-written baseline that only does
//! `serde_json::from_str` into the input struct, calls the function and serialises the output.
//!
//! Run with `cargo bench --bench dispatch`. As a bench of the tests package it is built with the
//! tests' dev-dependencies, whose features unify into crates the runtime shares with them (tokio's
//! `test-util`, `net` and `fs`, serde's `rc`; none of serde_json's today). The same call against
//! the same floor in a build of `phaseo-agent` alone is `cargo bench -p phaseo-agent --bench
//! run_cost`.
//!
//! All variants run in one run, side by side:
//!
//! - `baseline`: `from_str` + call + `to_string` (no validation);
//! - `naive_validate`: parse to `Value` + full JSON Schema validation + `from_value` + call +
//!   `to_string` (what validating every call naively costs);
//! - `tool_invoke`: `Tool::typed(..).invoke(args, &ctx)`, the runtime's whole per-call path, for a
//!   closure that takes the context;
//! - `tool_invoke_macro`: the same for a `#[tool]` function without a context parameter (what most
//!   tools are), which is not handed a context;
//! - `tool_invoke_macro_context`: the same for a `#[tool]` function that takes `&ToolContext` (its
//!   call owns a handle to the context, and the function's future borrows it);
//! - `tool_invoke_macro_resource`: a `#[tool]` function that also takes a `Res<T>` resource (taken
//!   from the context for each call);
//! - `tool_invoke_method`: a `#[tool]` method of a `#[tools]` block taking `&self` (each call holds
//!   a handle on the shared value);
//! - `typed_decode` and `from_str_only`: decoding alone, the runtime's (strict, schema-checked)
//!   against serde's, to split `tool_invoke`'s cost between decoding and the rest;
//! - `ladder/*`: the runtime's per-call steps rebuilt by hand, one added at a time (the typed
//!   decoder, then the `Box<dyn Any>` the parsed input travels in, then a boxed future polled to
//!   completion, then `catch_unwind` around it), to show what each costs inside `tool_invoke`.

use std::any::Any;
use std::hint::black_box;
use std::panic::AssertUnwindSafe;

use criterion::{Criterion, criterion_group, criterion_main};
use futures::FutureExt;
use futures::future::BoxFuture;
use phaseo_agent::schema::Validator;
use phaseo_agent::{IntoTools, Res, Tool, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[path = "../tests/support/sync.rs"]
mod sync;
use sync::block_on;

/// The input of the benchmarked tool: a string, an integer, an `Option` and a `Vec`.
#[derive(Deserialize, JsonSchema)]
struct Lookup {
    query: String,
    limit: u32,
    cursor: Option<String>,
    tags: Vec<String>,
}

#[derive(Serialize)]
struct Found {
    query: String,
    count: u32,
    resumed: bool,
}

/// Look up documents.
#[phaseo_agent::tool]
async fn lookup_tool(input: Lookup) -> Found {
    lookup(input)
}

/// Look up documents, with the context at hand.
#[phaseo_agent::tool]
async fn lookup_with_context(input: Lookup, ctx: &ToolContext) -> Found {
    let _ = ctx.step_index();
    lookup(input)
}

/// What the resource-taking tool and the method read: a stand-in for a search index.
struct Index {
    extra: u32,
}

/// Look up documents in the agent's index.
#[phaseo_agent::tool]
async fn lookup_with_resource(input: Lookup, index: Res<Index>) -> Found {
    let mut found = lookup(input);
    found.count += index.extra;
    found
}

struct Search {
    index: Index,
}

#[phaseo_agent::tools]
impl Search {
    /// Look up documents in this service's index.
    #[tool]
    async fn lookup_method(&self, input: Lookup) -> Found {
        let mut found = lookup(input);
        found.count += self.index.extra;
        found
    }
}

fn lookup(input: Lookup) -> Found {
    Found {
        count: input.limit.min(input.tags.len() as u32 + 3),
        resumed: input.cursor.is_some(),
        query: input.query,
    }
}

const ARGS: &str =
    r#"{"query": "refund policy", "limit": 5, "cursor": null, "tags": ["billing", "eu"]}"#;

fn dispatch(c: &mut Criterion) {
    let tool = Tool::typed(
        "lookup",
        "Look up documents",
        |input: Lookup, _ctx| async move { Ok::<_, std::convert::Infallible>(lookup(input)) },
    );
    let ctx = ToolContext::detached();
    let validator = Validator::new(tool.parameters()).expect("the schema compiles");
    let decode = phaseo_agent::__internals::typed_decoder::<Lookup>().expect("the schema compiles");

    // Every variant computes the same result text.
    let expected = serde_json::to_string(&lookup(serde_json::from_str(ARGS).unwrap())).unwrap();
    assert_eq!(block_on(tool.invoke(ARGS, &ctx)).unwrap(), expected);

    let mut group = c.benchmark_group("dispatch");
    group.bench_function("baseline", |b| {
        b.iter(|| {
            let input: Lookup = serde_json::from_str(black_box(ARGS)).unwrap();
            serde_json::to_string(&lookup(input)).unwrap()
        })
    });
    group.bench_function("naive_validate", |b| {
        b.iter(|| {
            let value: Value = serde_json::from_str(black_box(ARGS)).unwrap();
            validator.check(&value).unwrap();
            let input = Lookup::deserialize(value).unwrap();
            serde_json::to_string(&lookup(input)).unwrap()
        })
    });
    group.bench_function("tool_invoke", |b| {
        b.iter(|| block_on(tool.invoke(black_box(ARGS), &ctx)).unwrap())
    });
    let macro_tool = phaseo_agent::IntoTool::into_tool(lookup_tool);
    assert_eq!(block_on(macro_tool.invoke(ARGS, &ctx)).unwrap(), expected);
    group.bench_function("tool_invoke_macro", |b| {
        b.iter(|| block_on(macro_tool.invoke(black_box(ARGS), &ctx)).unwrap())
    });
    let context_tool = phaseo_agent::IntoTool::into_tool(lookup_with_context);
    assert_eq!(block_on(context_tool.invoke(ARGS, &ctx)).unwrap(), expected);
    group.bench_function("tool_invoke_macro_context", |b| {
        b.iter(|| block_on(context_tool.invoke(black_box(ARGS), &ctx)).unwrap())
    });
    let ctx_with_index = ToolContext::detached().with_resource(Index { extra: 0 });
    let resource_tool = phaseo_agent::IntoTool::into_tool(lookup_with_resource);
    assert_eq!(
        block_on(resource_tool.invoke(ARGS, &ctx_with_index)).unwrap(),
        expected
    );
    group.bench_function("tool_invoke_macro_resource", |b| {
        b.iter(|| block_on(resource_tool.invoke(black_box(ARGS), &ctx_with_index)).unwrap())
    });
    let method_tool = Search {
        index: Index { extra: 0 },
    }
    .into_tools()
    .remove(0);
    assert_eq!(block_on(method_tool.invoke(ARGS, &ctx)).unwrap(), expected);
    group.bench_function("tool_invoke_method", |b| {
        b.iter(|| block_on(method_tool.invoke(black_box(ARGS), &ctx)).unwrap())
    });
    group.bench_function("typed_decode", |b| {
        b.iter(|| decode(black_box(ARGS)).unwrap())
    });
    group.bench_function("from_str_only", |b| {
        b.iter(|| serde_json::from_str::<Lookup>(black_box(ARGS)).unwrap())
    });
    group.finish();

    let mut ladder = c.benchmark_group("ladder");
    ladder.bench_function("1_decode_call_serialise", |b| {
        b.iter(|| serde_json::to_string(&lookup(decode(black_box(ARGS)).unwrap())).unwrap())
    });
    ladder.bench_function("2_plus_box_any", |b| {
        b.iter(|| {
            let parsed: Box<dyn Any + Send + Sync> = Box::new(decode(black_box(ARGS)).unwrap());
            let input = *parsed.downcast::<Lookup>().unwrap();
            serde_json::to_string(&lookup(input)).unwrap()
        })
    });
    ladder.bench_function("3_plus_boxed_future", |b| {
        b.iter(|| {
            let parsed: Box<dyn Any + Send + Sync> = Box::new(decode(black_box(ARGS)).unwrap());
            let input = *parsed.downcast::<Lookup>().unwrap();
            let ctx = ctx.clone();
            let future: BoxFuture<'static, String> = async move {
                let _ctx = ctx;
                serde_json::to_string(&lookup(input)).unwrap()
            }
            .boxed();
            block_on(future)
        })
    });
    ladder.bench_function("4_plus_catch_unwind", |b| {
        b.iter(|| {
            let parsed: Box<dyn Any + Send + Sync> = Box::new(decode(black_box(ARGS)).unwrap());
            let input = *parsed.downcast::<Lookup>().unwrap();
            let ctx = ctx.clone();
            let future: BoxFuture<'static, String> = async move {
                let _ctx = ctx;
                serde_json::to_string(&lookup(input)).unwrap()
            }
            .boxed();
            block_on(AssertUnwindSafe(future).catch_unwind()).unwrap()
        })
    });
    ladder.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
