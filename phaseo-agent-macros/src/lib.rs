//! The `#[tool]` attribute macro of phaseo-agent. Depend on `phaseo-agent` and use `phaseo_agent::tool`.
use proc_macro::TokenStream;

/// Placeholder until the macro lands (issue 3).
#[proc_macro_attribute]
pub fn tool(_args: TokenStream, input: TokenStream) -> TokenStream {
    input
}
