//! The conversation a run keeps: [`Message`]s and the [`ToolCall`]s a model makes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call made by a model: the id the model gave it, the tool id, and the raw argument text.
///
/// Arguments are kept as the model sent them (a JSON text, possibly malformed or empty); the runtime
/// parses and validates them before any tool code runs.
///
/// ```
/// use phaseo_agent::ToolCall;
/// use serde_json::json;
///
/// let call = ToolCall::new("call_1", "get_status", json!({"service": "api"}));
/// assert_eq!(call.arguments, r#"{"service":"api"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id, unique within a run; decisions are bound to it.
    pub id: String,
    /// The id of the tool called.
    pub name: String,
    /// The arguments as a JSON text.
    pub arguments: String,
}

impl ToolCall {
    /// A call with JSON arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::raw(id, name, arguments.to_string())
    }

    /// A call with argument text exactly as a model might send it (malformed text included).
    ///
    /// ```
    /// use phaseo_agent::ToolCall;
    ///
    /// let call = ToolCall::raw("call_1", "get_status", r#"{"service": "api""#);
    /// assert_eq!(call.arguments, r#"{"service": "api""#); // kept as sent, unclosed brace and all
    /// ```
    pub fn raw(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A message of the conversation a run keeps.
///
/// As serde data each message is tagged by its `role`: `user`, `assistant` or `tool`.
///
/// ```
/// use phaseo_agent::{Agent, Message, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let echo = Tool::new("echo", "Echo the input", json!({"type": "object"}), |input, _| Ok(input));
/// let model = ScriptedModel::new().tool_call("call_1", "echo", json!({"a": 1})).text("Echoed.");
/// let agent = Agent::builder("helper").model(model).tool(echo).build()?;
/// let done = agent.run("Echo a=1").await?;
///
/// let messages = done.state.messages();
/// assert_eq!(messages[0], Message::User { content: "Echo a=1".into() });
/// assert!(matches!(&messages[1], Message::Assistant { tool_calls, .. } if tool_calls[0].name == "echo"));
/// assert_eq!(messages[2], Message::Tool { call_id: "call_1".into(), name: "echo".into(), content: r#"{"a":1}"#.into() });
/// assert_eq!(messages[3], Message::Assistant { content: Some("Echoed.".into()), tool_calls: vec![] });
/// assert_eq!(serde_json::to_value(&messages[0]).unwrap(), json!({"role": "user", "content": "Echo a=1"}));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The user's input.
    User {
        /// The text.
        content: String,
    },
    /// A model turn: text, tool calls, or both.
    Assistant {
        /// The text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The tool calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, as the model sees it.
    Tool {
        /// The call this answers.
        call_id: String,
        /// The tool id.
        name: String,
        /// The result text (JSON); an error reads `{"error": "..."}`.
        content: String,
    },
}

impl Message {
    /// A user's message.
    ///
    /// ```
    /// use phaseo_agent::Message;
    ///
    /// assert_eq!(Message::user("Hi"), Message::User { content: "Hi".into() });
    /// ```
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// A model's text answer, without tool calls.
    ///
    /// ```
    /// use phaseo_agent::Message;
    ///
    /// let answer = Message::assistant("Thanks, noted.");
    /// assert_eq!(answer, Message::Assistant { content: Some("Thanks, noted.".into()), tool_calls: vec![] });
    /// ```
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }
}
