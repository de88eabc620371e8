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
        err.to_string().starts_with("Invalid tool input: $.to"),
        "{err}"
    );
    assert_eq!(convert(212.0, Unit::Celsius).await, 100.0);
}
