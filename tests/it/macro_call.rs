//! A `#[tool]` function stays callable by its own name, as a unit test would call it, and its tool is
//! what the attributes say.

use phaseo_agent::{IntoTool, ToolContext, tool};
use serde_json::json;

#[tokio::test]
async fn an_async_tool_with_a_typed_input_is_called_by_name() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct FetchTicket {
        ticket_id: String,
    }

    #[derive(serde::Serialize, Debug, PartialEq)]
    struct Ticket {
        id: String,
        run: String,
    }

    /// Load one internal support ticket.
    #[tool(id = "fetch-ticket")]
    async fn fetch_ticket(input: FetchTicket, ctx: &ToolContext) -> Result<Ticket, String> {
        ctx.emit_progress(json!({"loading": &input.ticket_id}))
            .map_err(|e| e.to_string())?;
        Ok(Ticket {
            id: input.ticket_id,
            run: ctx.run_id().to_owned(),
        })
    }

    let ctx = ToolContext::detached();
    let input = FetchTicket {
        ticket_id: "T-42".into(),
    };
    let ticket = fetch_ticket(input, &ctx).await.unwrap();
    assert_eq!(
        ticket,
        Ticket {
            id: "T-42".into(),
            run: "detached".into()
        }
    );
    assert_eq!(ctx.progress(), [json!({"loading": "T-42"})]);
}

#[tokio::test]
async fn plain_arguments_keep_their_own_types_in_a_direct_call() {
    /// Greet someone.
    #[tool]
    async fn greet(name: &str, times: Option<usize>) -> String {
        format!("Hello, {name}! ").repeat(times.unwrap_or(1))
    }

    /// Count the words of a text.
    #[tool]
    fn count_words(text: &str, ctx: &ToolContext) -> usize {
        let _ = ctx.step_index();
        text.split_whitespace().count()
    }

    let owned = String::from("Ada");
    assert_eq!(greet(&owned, Some(2)).await, "Hello, Ada! Hello, Ada! ");
    assert_eq!(greet("Bo", None).await, "Hello, Bo! ");
    assert_eq!(count_words("one two three", &ToolContext::detached()), 3);
}

#[tokio::test]
async fn the_call_through_the_name_is_the_function() {
    /// Double a number.
    #[tool]
    fn double(n: i64) -> i64 {
        n * 2
    }

    // The name dereferences to a plain function pointer: it can be passed around as one.
    let f: fn(i64) -> i64 = *double;
    assert_eq!([1, 2, 3].map(f), [2, 4, 6]);
}

#[tokio::test]
async fn a_tool_keeps_calling_itself_by_name() {
    /// The n-th Fibonacci number.
    #[tool]
    fn fibonacci(n: u32) -> u64 {
        if n < 2 {
            u64::from(n)
        } else {
            fibonacci(n - 1) + fibonacci(n - 2)
        }
    }

    assert_eq!(fibonacci(10), 55);
    let tool = fibonacci.into_tool();
    let result = tool
        .invoke(r#"{"n": 12}"#, &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(result, "144");
}

#[tokio::test]
async fn ids_and_descriptions_come_from_the_attributes_or_the_function() {
    /// Line one.
    ///
    /// Line three, after a blank line.
    #[tool]
    fn documented() {}

    /// Ignored: the attribute wins.
    #[tool(description = "Said explicitly", id = "explicit_ID-1")]
    fn explicit() {}

    #[tool(description = concat!("Built ", "by a macro"))]
    fn by_macro() {}

    /// Raw identifiers lose their prefix.
    #[tool]
    fn r#match() {}

    let from_docs = documented.into_tool();
    assert_eq!(from_docs.id(), "documented");
    assert_eq!(
        from_docs.description(),
        "Line one.\n\nLine three, after a blank line."
    );
    let given = explicit.into_tool();
    assert_eq!(
        (given.id(), given.description()),
        ("explicit_ID-1", "Said explicitly")
    );
    assert_eq!(by_macro.into_tool().description(), "Built by a macro");
    assert_eq!(r#match.into_tool().id(), "match");
}

#[tokio::test]
async fn the_tool_decodes_and_runs_like_the_agent_would() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    enum Unit {
        Celsius,
        Fahrenheit,
    }

    /// Convert a temperature.
    #[tool]
    async fn convert(degrees: f64, to: Unit) -> f64 {
        match to {
            Unit::Celsius => (degrees - 32.0) * 5.0 / 9.0,
            Unit::Fahrenheit => degrees * 9.0 / 5.0 + 32.0,
        }
    }

    let tool = convert.into_tool();
    let ctx = ToolContext::detached();
    let out = tool
        .invoke(r#"{"degrees": 100, "to": "Fahrenheit"}"#, &ctx)
        .await
        .unwrap();
    assert_eq!(out, "212.0");
    let err = tool
        .invoke(r#"{"degrees": 100, "to": "Kelvin"}"#, &ctx)
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("invalid tool input: $.to"),
        "{err}"
    );
    assert_eq!(convert(212.0, Unit::Celsius).await, 100.0);
}

/// `Tool::invoke` parses when it is called and starts the tool when its future is first polled:
/// the call of an async function without context is made as its arguments are parsed, and that
/// runs none of the function's code; nor does dropping the call unpolled.
#[tokio::test]
async fn a_call_runs_nothing_of_the_function_until_it_is_polled() {
    use std::sync::atomic::{AtomicU32, Ordering};
    static RUNS: AtomicU32 = AtomicU32::new(0);

    /// Count a run.
    #[tool]
    async fn counted(step: u32) -> u32 {
        RUNS.fetch_add(step, Ordering::SeqCst) + step
    }

    /// Count a run, with the context.
    #[tool]
    async fn counted_with_context(step: u32, ctx: &ToolContext) -> u32 {
        let _ = ctx.run_id();
        RUNS.fetch_add(step, Ordering::SeqCst) + step
    }

    let ctx = ToolContext::detached();
    for tool in [counted.into_tool(), counted_with_context.into_tool()] {
        RUNS.store(0, Ordering::SeqCst);
        let call = tool.invoke(r#"{"step": 2}"#, &ctx);
        assert_eq!(RUNS.load(Ordering::SeqCst), 0, "{}", tool.id());
        drop(call);
        assert_eq!(RUNS.load(Ordering::SeqCst), 0, "{}", tool.id());
        assert_eq!(tool.invoke(r#"{"step": 2}"#, &ctx).await.unwrap(), "2");
        assert_eq!(RUNS.load(Ordering::SeqCst), 2, "{}", tool.id());
        // A refused call does not run either.
        let err = tool.invoke(r#"{"step": -1}"#, &ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("invalid tool input"), "{err}");
        assert_eq!(RUNS.load(Ordering::SeqCst), 2, "{}", tool.id());
    }
}

/// An approval function reads the decoded input before the call starts, and an output validator
/// reads the output as a value: both work on an async function without context, whose call is
/// otherwise made as its arguments are parsed.
#[tokio::test]
async fn approval_functions_and_output_checks_see_a_context_free_async_call() {
    use phaseo_agent::{Agent, Decisions, ScriptedModel};

    /// Pay an amount.
    #[tool(require_approval = large, output_schema = positive)]
    async fn pay(amount: u32) -> u32 {
        amount
    }

    fn large(args: &PayArgs) -> bool {
        args.amount > 100
    }

    fn positive(value: serde_json::Value) -> Result<serde_json::Value, String> {
        match value.as_u64() {
            Some(n) if n > 0 => Ok(value),
            _ => Err("not positive".into()),
        }
    }

    let model = ScriptedModel::new()
        .tool_call("call_1", "pay", json!({"amount": 500}))
        .tool_call("call_2", "pay", json!({"amount": 5}))
        .text("Paid.");
    let agent = Agent::builder("payer")
        .model(model)
        .tool(pay)
        .build()
        .unwrap();
    let paused = agent.run("Pay").await.unwrap();
    assert!(paused.is_paused());
    assert_eq!(paused.pending().len(), 1);
    assert_eq!(paused.pending()[0].call.id, "call_1");
    let done = agent
        .resume(&paused.state, Decisions::new().approve("call_1"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Paid."));

    let ctx = ToolContext::detached();
    let checked = pay.into_tool();
    assert_eq!(checked.invoke(r#"{"amount": 7}"#, &ctx).await.unwrap(), "7");
    let err = checked.invoke(r#"{"amount": 0}"#, &ctx).await.unwrap_err();
    assert!(err.to_string().contains("not positive"), "{err}");
}
