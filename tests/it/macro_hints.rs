//! `#[tool(title = "...", read_only, destructive, idempotent, open_world)]` and the output schema
//! a `#[tool]` function records when its output type implements `JsonSchema`.

use phaseo_agent::{IntoTool, ToolHints, tool, tools};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Order {
    id: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Shipped {
    id: String,
}

/// A type the model may read that has no schema of its own.
#[derive(serde::Serialize)]
struct Opaque {
    id: String,
}

/// Ship an order.
#[tool(title = "Ship an order", destructive, idempotent, open_world)]
async fn ship(order: Order) -> Result<Shipped, String> {
    Ok(Shipped { id: order.id })
}

/// Read the status.
#[tool(read_only)]
fn status() -> String {
    "up".into()
}

/// Describe an order.
#[tool]
fn describe(id: String) -> Opaque {
    Opaque { id }
}

/// Ship an order, infallibly.
#[tool]
async fn ship_now(order: Order) -> Shipped {
    Shipped { id: order.id }
}

#[test]
fn the_keys_set_the_title_and_hints() {
    let shipping = ship.into_tool();
    let hints: &ToolHints = shipping.hints();
    assert_eq!(hints.title.as_deref(), Some("Ship an order"));
    assert_eq!(hints.read_only, None);
    assert_eq!(hints.destructive, Some(true));
    assert_eq!(hints.idempotent, Some(true));
    assert_eq!(hints.open_world, Some(true));
    let reading = status.into_tool();
    assert_eq!(reading.hints().read_only, Some(true));
    assert_eq!(reading.hints().title, None);
    assert_eq!(describe.into_tool().hints(), &ToolHints::default());
}

#[test]
fn an_output_type_with_an_object_schema_is_recorded() {
    let expected =
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]});
    assert_eq!(
        ship.into_tool().output_type_schema(),
        Some(expected.clone())
    );
    assert_eq!(ship_now.into_tool().output_type_schema(), Some(expected));
    // A string's schema is not an object; `Opaque` has no schema.
    assert_eq!(status.into_tool().output_type_schema(), None);
    assert_eq!(describe.into_tool().output_type_schema(), None);
}

struct Shop;

#[tools]
impl Shop {
    /// Ship an order from the shop.
    #[tool(title = "Ship from the shop", idempotent)]
    async fn ship_from(&self, order: Order) -> Shipped {
        Shipped { id: order.id }
    }
}

#[test]
fn methods_take_the_keys_and_record_their_output_too() {
    let tools = phaseo_agent::IntoTools::into_tools(std::sync::Arc::new(Shop));
    assert_eq!(
        tools[0].hints().title.as_deref(),
        Some("Ship from the shop")
    );
    assert_eq!(tools[0].hints().idempotent, Some(true));
    assert!(tools[0].output_type_schema().is_some());
}
