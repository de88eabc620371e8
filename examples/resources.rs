//! Tools that need things: a connection pool, an HTTP client, a configuration.
//!
//! - A tool set on a struct: `#[tools]` on its `impl` block, `#[tool]` on the methods that are
//!   tools. Every call uses the one value the agent holds, through `&self`.
//! - A resource: a value the agent lends its tools by type (`.resource(...)` on the builder), taken
//!   by a `#[tool]` function as a `Res<T>` parameter. An agent built without a resource one of its
//!   tools needs is refused by `build()`, naming the tool and the type.
//! - Resources are never part of a run's state: a paused run resumed by another agent (another
//!   process, after a deploy) uses that agent's pool and client.
//!
//! The HTTP client is a real `reqwest::Client` talking to a local mock carrier API; the pool is a
//! small stand-in for sqlx's `PgPool` or deadpool's `Pool` (bounded connections over shared
//! tables), so the example runs offline.
//!
//! Run with `cargo run --example resources`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use phaseo_agent::serde_json::json;
use phaseo_agent::{
    Agent, AgentError, Decisions, PendingKind, Res, RunState, ScriptedModel, ToolContext, tool,
    tools,
};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, SemaphorePermit};

/// A stand-in for a database connection pool: at most `size` connections at once.
struct Pool {
    connections: Semaphore,
    orders: Mutex<HashMap<u32, Order>>,
    served: AtomicUsize,
}

#[derive(Clone, Serialize, Debug, PartialEq)]
struct Order {
    id: u32,
    status: String,
    total_cents: u64,
    tracking: String,
}

/// One connection, returned to the pool when dropped.
struct Conn<'a> {
    pool: &'a Pool,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    fn new(size: usize) -> Self {
        let orders = [
            (1042, "shipped", 12_900, "ZX-881"),
            (1043, "processing", 54_000, ""),
        ]
        .into_iter()
        .map(|(id, status, total_cents, tracking)| {
            let order = Order {
                id,
                status: status.into(),
                total_cents,
                tracking: tracking.into(),
            };
            (id, order)
        })
        .collect();
        Pool {
            connections: Semaphore::new(size),
            orders: Mutex::new(orders),
            served: AtomicUsize::new(0),
        }
    }

    async fn get(&self) -> Result<Conn<'_>, String> {
        let permit = self
            .connections
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        self.served.fetch_add(1, Ordering::SeqCst);
        Ok(Conn {
            pool: self,
            _permit: permit,
        })
    }
}

impl Conn<'_> {
    fn order(&self, id: u32) -> Option<Order> {
        let orders = self.pool.orders.lock().unwrap_or_else(|e| e.into_inner());
        orders.get(&id).cloned()
    }

    fn set_status(&self, id: u32, status: &str) {
        let mut orders = self.pool.orders.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(order) = orders.get_mut(&id) {
            order.status = status.into();
        }
    }

    fn open_orders(&self) -> usize {
        let orders = self.pool.orders.lock().unwrap_or_else(|e| e.into_inner());
        orders.values().filter(|o| o.status != "refunded").count()
    }
}

/// The helpdesk's tools: one value holding the pool, an HTTP client and a setting.
struct Helpdesk {
    db: Res<Pool>,
    http: reqwest::Client,
    carrier_url: String,
}

#[tools]
impl Helpdesk {
    /// Look up an order's status and total.
    #[tool]
    async fn order_status(&self, order_id: u32) -> Result<Order, String> {
        let conn = self.db.get().await?;
        conn.order(order_id)
            .ok_or_else(|| format!("order {order_id} does not exist"))
    }

    /// Ask the carrier where a parcel is, by its tracking number.
    #[tool(timeout_ms = 5_000)]
    async fn track_parcel(&self, tracking: String) -> Result<String, String> {
        let url = format!("{}/parcels/{tracking}", self.carrier_url);
        let response = self.http.get(url).send().await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("the carrier answered {}", response.status()));
        }
        response.text().await.map_err(|e| e.to_string())
    }

    /// Refund an order in full. Large refunds wait for a person's approval.
    #[tool(require_approval = Self::is_large)]
    async fn refund(
        &self,
        order_id: u32,
        amount_cents: u64,
        ctx: &ToolContext,
    ) -> Result<String, String> {
        let conn = self.db.get().await?;
        let order = conn.order(order_id).ok_or("no such order")?;
        if amount_cents > order.total_cents {
            return Err(format!("the order's total is {} cents", order.total_cents));
        }
        conn.set_status(order_id, "refunded");
        Ok(format!(
            "refunded {amount_cents} cents on order {order_id} (run {})",
            ctx.run_id()
        ))
    }

    /// Refunds above $100 need a person. (An approval function may be an associated function.)
    fn is_large(args: &RefundArgs) -> bool {
        args.amount_cents > 10_000
    }
}

/// How many orders are still open. A free function that takes the agent's pool as a resource.
#[tool]
async fn open_orders(db: Res<Pool>) -> Result<usize, String> {
    Ok(db.get().await?.open_orders())
}

/// The agent of one process: the same tools, this process's pool and client.
fn agent(model: ScriptedModel, db: &Res<Pool>, carrier_url: &str) -> Result<Agent, AgentError> {
    let helpdesk = Helpdesk {
        db: db.clone(),
        http: reqwest::Client::new(),
        carrier_url: carrier_url.to_owned(),
    };
    Agent::builder("helpdesk")
        .instructions("Help customers with their orders.")
        .model(model)
        .tools((helpdesk, open_orders))
        .resource_shared(db.clone())
        .build()
}

/// A stand-in for the carrier's HTTP API on loopback: `GET /parcels/ZX-881` is "out for delivery",
/// anything else a 404. Returns its base URL.
async fn carrier_api() -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let found = head.starts_with(b"GET /parcels/ZX-881 ");
                let (status, body) = if found {
                    ("200 OK", "out for delivery")
                } else {
                    ("404 Not Found", "no such parcel")
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(response.as_bytes()).await.ok();
            });
        }
    });
    Ok(url)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let carrier = carrier_api().await?;

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "order_status", json!({"order_id": 1042}))
        .tool_call("call_2", "track_parcel", json!({"tracking": "ZX-881"}))
        .tool_call("call_3", "open_orders", json!({}))
        .tool_call(
            "call_4",
            "refund",
            json!({"order_id": 1043, "amount_cents": 54_000}),
        )
        .text("Order 1043 is refunded; 1042 is out for delivery.");

    // A tool that needs a resource the agent lacks is refused when the agent is built.
    let missing = Agent::builder("helpdesk")
        .model(ScriptedModel::new().record_requests())
        .tool(open_orders)
        .build()
        .unwrap_err();
    println!("without the pool: {missing}");
    assert!(missing.to_string().contains("open_orders") && missing.to_string().contains("Pool"));

    // Process one: runs until the large refund needs a person.
    let first_pool = Res::new(Pool::new(4));
    let first = agent(model.clone(), &first_pool, &carrier)?;
    let paused = first.run("Where is 1042, and refund 1043 please").await?;
    assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    assert_eq!(paused.pending()[0].call.name, "refund");
    let results = format!("{:?}", model.requests()[3].messages);
    assert!(
        results.contains("shipped") && results.contains("out for delivery"),
        "{results}"
    );
    println!("paused for: {}", paused.pending()[0].call.name);
    let stored = paused.state.to_json();
    assert!(
        !stored.contains("Pool"),
        "resources are never part of the state"
    );

    // Process two, after a restart: its own pool (with the same data) and client resume the run.
    let second_pool = Res::new(Pool::new(4));
    let second = agent(model.clone(), &second_pool, &carrier)?;
    let state = RunState::from_json(&stored)?;
    let done = second
        .resume(&state, Decisions::for_run(state.run_id()).approve("call_4"))
        .await?;
    println!("{}", done.output().unwrap_or_default());
    assert_eq!(
        done.output(),
        Some("Order 1043 is refunded; 1042 is out for delivery.")
    );
    assert_eq!(
        first_pool.served.load(Ordering::SeqCst),
        2,
        "order_status and open_orders"
    );
    assert_eq!(
        second_pool.served.load(Ordering::SeqCst),
        1,
        "the refund ran on the second pool"
    );
    assert_eq!(
        second_pool
            .get()
            .await?
            .order(1043)
            .map(|o| o.status)
            .as_deref(),
        Some("refunded")
    );
    Ok(())
}
