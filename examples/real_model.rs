//! A real model: an agent with `#[tool]` tools against an OpenAI-compatible endpoint (OpenAI,
//! OpenRouter, Ollama, vLLM, LM Studio, llama.cpp's server, llama-cpp-python's) or Anthropic,
//! streamed: the run's events (tool calls, results, retries) as they happen, and the answer as
//! it comes.
//!
//! ```text
//! OPENAI_API_KEY=sk-... cargo run --example real_model                     # OpenAI (gpt-4.1-mini)
//! OPENAI_BASE_URL=http://localhost:11434/v1 PHASEO_MODEL=qwen3:8b \
//!     cargo run --example real_model                                        # Ollama
//! OPENAI_BASE_URL=http://localhost:8000/v1 cargo run --example real_model   # llama-cpp-python
//! ANTHROPIC_API_KEY=sk-ant-... cargo run --example real_model              # Anthropic
//! ```
//!
//! `PHASEO_MODEL` picks the model name; `PHASEO_STREAM=0` asks for whole answers (the events
//! still come; only the answer's pieces do not). A server that refuses to stream a turn
//! (llama-cpp-python's, when tools are offered) is asked for it whole, by the provider itself:
//! no wrapper model is needed. With nothing configured, it says what to set and exits without
//! error, so `cargo test` (which runs every example) stays offline.

use std::io::Write;

use futures::StreamExt;
use phaseo_agent::provider::anthropic::Anthropic;
use phaseo_agent::provider::openai::OpenAi;
use phaseo_agent::{Agent, Event, Model, ModelDelta, tool};

/// Get the current weather in a city.
#[tool]
fn get_weather(city: String) -> String {
    // A real tool would call a weather service.
    format!("It is 21 °C and sunny in {city}.")
}

/// Convert a temperature from Celsius to Fahrenheit.
#[tool]
fn to_fahrenheit(celsius: f64) -> f64 {
    celsius * 9.0 / 5.0 + 32.0
}

fn set(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The configured model and a line saying which it is, or `None` when nothing is configured.
fn configured() -> Option<(Box<dyn Model>, String)> {
    let name = set("PHASEO_MODEL");
    let streaming = set("PHASEO_STREAM").is_none_or(|v| v != "0");
    if set("OPENAI_API_KEY").is_some() || set("OPENAI_BASE_URL").is_some() {
        let name = name.unwrap_or_else(|| "gpt-4.1-mini".into());
        // Sampling defaults for every turn; a small local model may otherwise write until its
        // context is full.
        let model = OpenAi::from_env(&name)
            .temperature(0.2)
            .max_output_tokens(1_024)
            .streaming(streaming);
        let line = format!("OpenAI-compatible: {name} at {}", model.url());
        return Some((Box::new(model), line));
    }
    if set("ANTHROPIC_API_KEY").is_some() {
        let name = name.unwrap_or_else(|| "claude-sonnet-4-5".into());
        let model = Anthropic::from_env(&name)
            .temperature(0.2)
            .max_output_tokens(1_024)
            .streaming(streaming);
        let line = format!("Anthropic: {name}");
        return Some((Box::new(model), line));
    }
    None
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some((model, which)) = configured() else {
        println!(
            "No model is configured. Set one of:\n\
             \x20 OPENAI_API_KEY=sk-...                       OpenAI\n\
             \x20 OPENAI_BASE_URL=http://localhost:11434/v1   an OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp)\n\
             \x20 ANTHROPIC_API_KEY=sk-ant-...                Anthropic\n\
             and optionally PHASEO_MODEL=<model name>. Then: cargo run --example real_model"
        );
        return Ok(());
    };
    println!("== {which}");
    let agent = Agent::builder("weather")
        .instructions("Answer weather questions with the tools. Be brief.")
        .model(model)
        .tool(get_weather)
        .tool(to_fahrenheit)
        .build()?;

    let mut events = agent
        .run("What is the weather in Oslo, in Fahrenheit?")
        .stream();
    // Whether this turn's text came in pieces; a turn answered whole brings it in `model.turn`.
    let mut streamed = false;
    while let Some(event) = events.next().await {
        match event {
            Event::ModelDelta {
                delta: ModelDelta::Text { text },
                ..
            } => {
                print!("{text}");
                std::io::stdout().flush()?;
                streamed = true;
            }
            Event::ModelTurn { text, .. } => {
                if let Some(text) = text.filter(|_| !streamed) {
                    print!("{text}");
                }
                streamed = false;
            }
            Event::ToolCalled { call, .. } => println!("\n-> {}({})", call.name, call.arguments),
            Event::ToolResult { content, .. } => println!("<- {content}"),
            Event::ModelRetry {
                error, delay_ms, ..
            } => {
                println!("\n(retrying in {delay_ms} ms: {error})")
            }
            Event::Completed { state, .. } => {
                let usage = state.usage();
                println!(
                    "\n== done in {} turns; {} input and {} output tokens",
                    state.turns(),
                    usage.input_tokens,
                    usage.output_tokens
                );
            }
            Event::Failed { error, .. } => {
                println!("\n== failed: {error}");
                std::process::exit(1);
            }
            _ => {}
        }
    }
    Ok(())
}
