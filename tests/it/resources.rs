//! Resources (`Res<T>`, `ctx.resource`), methods as tools (`#[tools]`), and `AgentBuilder::tools`
//! taking anything `IntoTools`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use phaseo_agent::serde_json::{Value, json};
use phaseo_agent::{
    Agent, AgentError, Decisions, IntoTools, PendingKind, Res, Resources, RunState, ScriptedModel,
    Tool, ToolContext, tool, tools,
};
use serde::{Deserialize, Serialize};

/// A stand-in for a connection pool: counts the queries it served.
struct Pool {
    name: &'static str,
    queries: AtomicUsize,
}

impl Pool {
    fn new(name: &'static str) -> Self {
        Pool {
            name,
            queries: AtomicUsize::new(0),
        }
    }

    fn query(&self, q: &str) -> String {
        self.queries.fetch_add(1, Ordering::SeqCst);
        format!("{}: {q}", self.name)
    }
}

struct Region(String);

#[derive(Deserialize, schemars::JsonSchema)]
struct Lookup {
    /// The ticket id.
    id: u32,
}

#[derive(Serialize, PartialEq, Debug)]
struct Ticket {
    id: u32,
    source: String,
}

/// Look a ticket up in the pool.
#[tool]
async fn lookup(input: Lookup, db: Res<Pool>) -> Ticket {
    Ticket {
        id: input.id,
        source: db.query("ticket"),
    }
}

/// Where the service runs, from two resources and the context.
#[tool]
async fn whereami(ctx: &ToolContext, region: Res<Region>, db: Res<Pool>) -> Result<String, String> {
    tokio::task::yield_now().await;
    Ok(format!(
        "{} in {} for run {}",
        db.name,
        region.0,
        ctx.run_id()
    ))
}

/// Count queries, synchronously.
#[tool]
fn queries(db: Res<Pool>, plus: usize) -> usize {
    db.queries.load(Ordering::SeqCst) + plus
}

struct Helpdesk {
    greeting: String,
    calls: AtomicUsize,
}

#[tools]
impl Helpdesk {
    /// Greet a customer.
    #[tool]
    async fn greet(&self, name: String) -> String {
        self.calls.fetch_add(1, Ordering::SeqCst);
        format!("{}, {name}", self.greeting)
    }

    /// Fetch a ticket with the agent's pool.
    #[tool(id = "fetch-ticket", timeout_ms = 5_000)]
    async fn fetch(
        &self,
        input: Lookup,
        db: Res<Pool>,
        ctx: &ToolContext,
    ) -> Result<Ticket, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Ticket {
            id: input.id,
            source: format!("{} ({})", db.query("fetch"), ctx.agent_id()),
        })
    }

    /// Refund an order; large refunds need a person.
    #[tool(require_approval = Self::is_large)]
    fn refund(&self, amount: u32) -> String {
        self.calls.fetch_add(1, Ordering::SeqCst);
        format!("refunded {amount}")
    }

    /// Keep the service alive past the call.
    #[tool]
    async fn spawn_check(self: Arc<Self>, label: &str) -> String {
        let label = label.to_owned();
        tokio::spawn(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            format!("{label}: {}", self.greeting)
        })
        .await
        .unwrap_or_default()
    }

    /// Add two numbers (no receiver).
    #[tool]
    fn add(a: i64, b: i64) -> i64 {
        a + b
    }

    /// Look a customer up in the CRM; the answer comes from outside.
    #[tool(external)]
    async fn crm(&self, email: String) -> Value;

    fn is_large(args: &RefundArgs) -> bool {
        args.amount > 100
    }
}

fn helpdesk() -> Helpdesk {
    Helpdesk {
        greeting: "Hello".into(),
        calls: AtomicUsize::new(0),
    }
}

fn last_result(model: &ScriptedModel) -> String {
    let requests = model.requests();
    let messages = &requests.last().expect("a request").messages;
    format!("{:?}", messages.last().expect("a message"))
}

#[tokio::test]
async fn a_free_tool_gets_the_agents_resource() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "lookup", json!({"id": 7}))
        .text("done");
    let agent = Agent::builder("desk")
        .model(model.clone())
        .tool(lookup)
        .resource(Pool::new("primary"))
        .build()
        .unwrap();
    agent.run("find 7").await.unwrap();
    assert!(
        last_result(&model).contains("primary: ticket"),
        "{}",
        last_result(&model)
    );
    let pool = agent.resources().get::<Pool>().unwrap();
    assert_eq!(pool.queries.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_missing_resource_is_an_error_at_build_naming_the_tool_and_the_type() {
    let err = Agent::builder("desk")
        .model(ScriptedModel::new().record_requests())
        .tool(whereami)
        .resource(Pool::new("primary"))
        .build()
        .unwrap_err();
    let AgentError::InvalidTool { tool, reason } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(tool, "whereami");
    assert!(reason.contains("resources::Region"), "{reason}");
    assert!(
        reason.contains("resources::Pool"),
        "names what the agent has: {reason}"
    );
    assert!(reason.contains(".resource("), "{reason}");

    // A method tool's resources are checked the same way.
    let err = Agent::builder("desk")
        .model(ScriptedModel::new().record_requests())
        .tools(helpdesk())
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::InvalidTool { tool, reason } if tool == "fetch-ticket" && reason.contains("Pool")),
        "{err:?}"
    );
}

#[tokio::test]
async fn resources_with_the_context_and_sync_tools() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "whereami", json!({}))
        .tool_call("c2", "queries", json!({"plus": 10}))
        .text("done");
    let agent = Agent::builder("desk")
        .model(model.clone())
        .tools((whereami, queries))
        .resource(Pool::new("primary"))
        .resource(Region("eu-west-1".into()))
        .build()
        .unwrap();
    let result = agent.run("where").await.unwrap();
    let text = format!("{:?}", model.requests()[1].messages);
    assert!(
        text.contains(&format!(
            "primary in eu-west-1 for run {}",
            result.state.run_id()
        )),
        "{text}"
    );
    let text = format!("{:?}", model.requests()[2].messages);
    assert!(text.contains("10"), "{text}");
}

#[tokio::test]
async fn the_tools_of_a_method_set_share_one_value() {
    let desk = Arc::new(helpdesk());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "greet", json!({"name": "Ada"}))
        .tool_call("c2", "fetch-ticket", json!({"id": 3}))
        .tool_call("c3", "refund", json!({"amount": 20}))
        .tool_call("c4", "spawn_check", json!({"label": "alive"}))
        .tool_call("c5", "add", json!({"a": 2, "b": 3}))
        .text("done");
    let agent = Agent::builder("desk")
        .model(model.clone())
        .tools(desk.clone())
        .resource(Pool::new("replica"))
        .build()
        .unwrap();
    let ids: Vec<&str> = agent.tools().iter().map(Tool::id).collect();
    assert_eq!(
        ids,
        [
            "greet",
            "fetch-ticket",
            "refund",
            "spawn_check",
            "add",
            "crm"
        ]
    );
    assert!(agent.tools()[5].is_external());
    assert_eq!(
        agent.tools()[1].description(),
        "Fetch a ticket with the agent's pool."
    );

    agent.run("go").await.unwrap();
    let results: Vec<String> = model.requests()[1..]
        .iter()
        .map(|r| format!("{:?}", r.messages.last().unwrap()))
        .collect();
    assert!(results[0].contains("Hello, Ada"), "{results:?}");
    assert!(results[1].contains("replica: fetch (desk)"), "{results:?}");
    assert!(results[2].contains("refunded 20"), "{results:?}");
    assert!(results[3].contains("alive: Hello"), "{results:?}");
    assert!(results[4].contains('5'), "{results:?}");
    assert_eq!(
        desk.calls.load(Ordering::SeqCst),
        4,
        "every call used the shared value"
    );

    // The methods stay methods.
    assert_eq!(desk.greet("Bob".into()).await, "Hello, Bob");
    assert_eq!(Helpdesk::add(1, 1), 2);
}

#[tokio::test]
async fn method_keys_apply_and_a_resumed_run_gets_the_resuming_agents_resources() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "refund", json!({"amount": 500}))
        .tool_call("c2", "fetch-ticket", json!({"id": 9}))
        .text("done");
    let first = Agent::builder("desk")
        .model(model.clone())
        .tools(helpdesk())
        .resource(Pool::new("first"))
        .build()
        .unwrap();
    let paused = first.run("refund").await.unwrap();
    assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    let stored = paused.state.to_json();
    assert!(!stored.contains("first"), "resources never enter the state");

    // Another agent (another process, say) resumes it with its own pool.
    let second = Agent::builder("desk")
        .model(model.clone())
        .tools(helpdesk())
        .resource(Pool::new("second"))
        .build()
        .unwrap();
    let state = RunState::from_json(&stored).unwrap();
    second
        .resume(&state, Decisions::new().approve("c1"))
        .await
        .unwrap();
    let text = format!("{:?}", model.requests().last().unwrap().messages);
    assert!(text.contains("second: fetch"), "{text}");
    assert!(!text.contains("first: fetch"), "{text}");
}

#[tokio::test]
async fn invoke_refuses_a_context_without_the_resource() {
    let tool = phaseo_agent::IntoTool::into_tool(lookup);
    let err = tool
        .invoke(r#"{"id": 1}"#, &ToolContext::detached())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Pool"), "{err}");
    let ctx = ToolContext::detached().with_resource(Pool::new("test"));
    assert_eq!(
        tool.invoke(r#"{"id": 1}"#, &ctx).await.unwrap(),
        r#"{"id":1,"source":"test: ticket"}"#
    );
}

#[tokio::test]
async fn tools_are_callable_directly_with_resources() {
    let ticket = lookup(Lookup { id: 4 }, Res::new(Pool::new("unit"))).await;
    assert_eq!(
        ticket,
        Ticket {
            id: 4,
            source: "unit: ticket".into()
        }
    );
    assert_eq!(queries(Res::new(Pool::new("unit")), 2), 2);
}

#[tokio::test]
async fn a_hand_written_tool_uses_ctx_resource_and_declares_it() {
    let tool = Tool::new(
        "pool_name",
        "The pool's name",
        json!({"type": "object"}),
        |_, ctx| async move { Ok(json!(ctx.resource::<Pool>()?.name)) },
    );
    // Undeclared: the agent builds, and the call fails with a tool error the model reads.
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "pool_name", json!({}))
        .text("done");
    let agent = Agent::builder("desk")
        .model(model.clone())
        .tool(tool.clone())
        .build()
        .unwrap();
    agent.run("name").await.unwrap();
    assert!(
        last_result(&model).contains("no resource of type"),
        "{}",
        last_result(&model)
    );
    // Declared: the agent is refused without it.
    let declared = tool.needs_resource::<Pool>();
    assert!(
        Agent::builder("desk")
            .model(ScriptedModel::new().record_requests())
            .tool(declared.clone())
            .build()
            .is_err()
    );
    let shared = Resources::new().with(Pool::new("shared"));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "pool_name", json!({}))
        .text("ok");
    let agent = Agent::builder("desk")
        .model(model.clone())
        .tool(declared)
        .resources(&shared)
        .build()
        .unwrap();
    agent.run("name").await.unwrap();
    assert!(
        last_result(&model).contains("shared"),
        "{}",
        last_result(&model)
    );
    // The agent holds the same value as the set it was given, not a copy.
    let (from_agent, from_set) = (agent.resources().get::<Pool>(), shared.get::<Pool>());
    assert!(Res::ptr_eq(&from_agent.unwrap(), &from_set.unwrap()));
}

#[test]
fn into_tools_takes_tuples_vectors_arrays_and_method_sets() {
    assert_eq!(lookup.into_tools().len(), 1);
    assert_eq!((lookup, queries, whereami).into_tools().len(), 3);
    assert_eq!(
        vec![Tool::new("a", "A", json!({}), |v, _| Ok(v))]
            .into_tools()
            .len(),
        1
    );
    assert_eq!([lookup, lookup].into_tools().len(), 2);
    assert_eq!(helpdesk().into_tools().len(), 6);
    assert_eq!(Arc::new(helpdesk()).into_tools().len(), 6);
    assert_eq!((helpdesk(), lookup, None::<Tool>).into_tools().len(), 7);
}
