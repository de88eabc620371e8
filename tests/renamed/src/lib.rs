//! A crate that depends on phaseo-agent as `renamed_agent` only, so `::phaseo_agent` does not exist
//! here: `#[tool(crate = renamed_agent)]` must expand to `renamed_agent::__private` paths alone.

use renamed_agent::{ToolContext, tool};

/// Add two numbers.
#[tool(crate = renamed_agent)]
pub fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Count the words of a text.
#[tool(crate = renamed_agent, id = "count-words", require_approval)]
pub async fn count_words(text: &str, ctx: &ToolContext) -> usize {
    let _ = ctx.step_index();
    text.split_whitespace().count()
}

/// Ask a person.
#[tool(crate = renamed_agent, external)]
pub async fn ask(question: String) -> String;

#[cfg(test)]
mod tests {
    use renamed_agent::{Agent, IntoTool, ScriptedModel};

    use super::*;

    #[test]
    fn the_tools_are_built_through_the_renamed_crate() {
        let agent = Agent::builder("renamed")
            .model(ScriptedModel::new())
            .tool(add)
            .tool(count_words)
            .tool(ask)
            .build()
            .unwrap();
        let ids: Vec<&str> = agent.tools().iter().map(|t| t.id()).collect();
        assert_eq!(ids, ["add", "count-words", "ask"]);
        assert!(ask.into_tool().is_external());
        assert_eq!(add(2, 3), 5);
        let tool = count_words.into_tool();
        assert_eq!(tool.parameters()["required"].to_string(), r#"["text"]"#);
    }
}
