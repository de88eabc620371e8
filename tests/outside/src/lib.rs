//! A user's crate: a helpdesk tool set on a struct, with resources, built only from the
//! dependency lines the README gives.

use std::sync::Mutex;

use phaseo_agent::{Res, ToolContext, tool, tools};
use serde::{Deserialize, Serialize};

/// A stand-in for a connection pool.
pub struct Pool {
    pub tickets: Mutex<Vec<String>>,
}

/// A configuration value lent to the tools.
pub struct Config {
    pub team: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct NewTicket {
    /// What went wrong.
    pub title: String,
}

#[derive(Serialize)]
pub struct Created {
    pub id: usize,
    pub team: String,
}

pub struct Helpdesk {
    pub greeting: String,
}

#[tools]
impl Helpdesk {
    /// Open a ticket.
    #[tool(timeout_ms = 2_000)]
    pub async fn open_ticket(
        &self,
        input: NewTicket,
        db: Res<Pool>,
        config: Res<Config>,
    ) -> Result<Created, String> {
        let mut tickets = db.tickets.lock().map_err(|e| e.to_string())?;
        tickets.push(input.title);
        Ok(Created {
            id: tickets.len(),
            team: config.team.clone(),
        })
    }

    /// Greet a customer by name.
    #[tool]
    pub fn greet(&self, name: &str, ctx: &ToolContext) -> String {
        format!("{}, {name} ({})", self.greeting, ctx.agent_id())
    }
}

/// Count the open tickets.
#[tool]
pub async fn count_tickets(db: Res<Pool>) -> usize {
    db.tickets.lock().map(|t| t.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use phaseo_agent::serde_json::json;
    use phaseo_agent::{Agent, ScriptedModel};

    #[tokio::test]
    async fn a_method_tool_set_with_resources_runs() {
        let model = ScriptedModel::new().record_requests()
            .tool_call("c1", "open_ticket", json!({"title": "Printer on fire"}))
            .tool_call("c2", "greet", json!({"name": "Ada"}))
            .tool_call("c3", "count_tickets", json!({}))
            .text("Done.");
        let pool = Res::new(Pool {
            tickets: Mutex::new(Vec::new()),
        });
        let agent = Agent::builder("desk")
            .model(model.clone())
            .tools((
                Helpdesk {
                    greeting: "Hello".into(),
                },
                count_tickets,
            ))
            .resource_shared(pool.clone())
            .resource(Config {
                team: "hardware".into(),
            })
            .build()
            .unwrap();
        assert_eq!(agent.run("help").await.unwrap().output(), Some("Done."));
        let text = format!("{:?}", model.requests());
        assert!(text.contains(r#"{\"id\":1,\"team\":\"hardware\"}"#), "{text}");
        assert!(text.contains("Hello, Ada (desk)"), "{text}");
        assert_eq!(pool.tickets.lock().unwrap().as_slice(), ["Printer on fire"]);
    }

    #[test]
    fn a_missing_resource_is_refused_at_build() {
        let err = Agent::builder("desk")
            .model(ScriptedModel::new().record_requests())
            .tools(Helpdesk {
                greeting: "Hello".into(),
            })
            .resource(Pool {
                tickets: Mutex::new(Vec::new()),
            })
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("Config"), "{err}");
    }
}
