//! Stage 1 (parse): the arguments of `#[tool(...)]`, read into [`Args`]. Uses: errors, fields.
//!
//! Each key is one arm of [`Args::key`] and one entry of [`KEYS`]; a new key adds a field, an arm
//! and an entry (a key that takes a function's path adds a [`Hook`] variant instead of a field; the
//! keys of the runtime's tool fields are parsed in `fields.rs`). Mistakes are collected, not
//! returned at the first, so every bad key is underlined at once.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, ExprLit, ExprPath, Ident, Lit, LitInt, LitStr, Path, Token};

use crate::errors::Errors;
use crate::fields::{
    CAP, Hook, Policy, TIMEOUT, parse_count, parse_hook, parse_on_error, skip_value, value,
};

/// The keys `#[tool(...)]` accepts, as listed in the error for an unknown key.
pub(crate) const KEYS: &[&str] = &[
    "id",
    "description",
    "require_approval",
    "external",
    "timeout_ms",
    "on_error",
    "exclusive",
    "strict",
    "max_output_chars",
    "input_schema",
    "output_schema",
    "event_schema",
    "on_tool_called",
    "on_response_received",
    "next_turn",
    "title",
    "read_only",
    "destructive",
    "idempotent",
    "open_world",
    "crate",
];

/// The parsed arguments; each is `None` when not given.
#[derive(Default)]
pub(crate) struct Args {
    /// `id = "..."`.
    pub(crate) id: Option<LitStr>,
    /// `description = "..."` or `description = some_macro!(...)`.
    pub(crate) description: Option<Description>,
    /// `require_approval` or `require_approval = path`.
    pub(crate) approval: Option<Approval>,
    /// `external`: the span of the key.
    pub(crate) external: Option<Span>,
    /// `timeout_ms = 3_000`: a whole number of milliseconds, at least 1.
    pub(crate) timeout_ms: Option<LitInt>,
    /// `on_error = "fail-run"` or `on_error = "return-to-model"`.
    pub(crate) on_error: Option<Policy>,
    /// `exclusive`: the span of the key.
    pub(crate) exclusive: Option<Span>,
    /// `strict`: the span of the key.
    pub(crate) strict: Option<Span>,
    /// `max_output_chars = 2_000`: a whole number of characters, at least 1.
    pub(crate) max_output_chars: Option<LitInt>,
    /// The keys that take a function's path, in the order written, each once.
    pub(crate) hooks: Vec<(Hook, Path)>,
    /// `title = "..."`: a title for people (MCP clients show it).
    pub(crate) title: Option<LitStr>,
    /// The behaviour hints, `read_only`, `destructive`, `idempotent`, `open_world`: the span of
    /// each key written.
    pub(crate) read_only: Option<Span>,
    pub(crate) destructive: Option<Span>,
    pub(crate) idempotent: Option<Span>,
    pub(crate) open_world: Option<Span>,
    /// `crate = path`.
    pub(crate) krate: Option<Path>,
    /// Every known key written, valid or not: a key written with a bad value is reported once, not
    /// again as missing.
    given: Vec<String>,
}

/// An explicit description.
pub(crate) enum Description {
    /// A string literal, checked at compile time.
    Lit(LitStr),
    /// A macro that expands to a string literal (`include_str!`, `concat!`).
    Macro(syn::ExprMacro),
}

/// `require_approval`: every call, or the calls a function of the input selects.
pub(crate) enum Approval {
    Always,
    When(Path),
}

impl Args {
    /// Whether `key` was written, with a valid value or not.
    pub(crate) fn given(&self, key: &str) -> bool {
        self.given.iter().any(|k| k == key)
    }

    /// Parses the tokens inside `#[tool(...)]`, recording every mistake in `errors`.
    pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> Args {
        let mut args = Args::default();
        let parser = syn::meta::parser(|meta| args.key(&meta, errors));
        if let Err(e) = parser.parse2(tokens) {
            errors.push(e);
        }
        args
    }

    fn key(&mut self, meta: &ParseNestedMeta, errors: &mut Errors) -> syn::Result<()> {
        let Some(key) = meta
            .path
            .get_ident()
            .filter(|k| KEYS.contains(&&*k.to_string()))
        else {
            skip_value(meta)?;
            errors.push(unknown(&meta.path));
            return Ok(());
        };
        self.given.push(key.to_string());
        if let Err(e) = self.set_key(meta, key)? {
            errors.push(e);
        }
        Ok(())
    }

    /// Parses and sets the value of a known key. The outer result is a syntax error (parsing
    /// stops); the inner one is a mistake in the value.
    fn set_key(&mut self, meta: &ParseNestedMeta, key: &Ident) -> syn::Result<syn::Result<()>> {
        Ok(match key.to_string().as_str() {
            "id" => parse_string(meta, "`id` takes a string, as in `id = \"fetch-ticket\"`")?
                .and_then(|v| set(&mut self.id, key, v)),
            "description" => {
                parse_description(meta)?.and_then(|v| set(&mut self.description, key, v))
            }
            "require_approval" => {
                parse_approval(meta)?.and_then(|v| set(&mut self.approval, key, v))
            }
            // A flag written with a value is still meant: set it, and report the value.
            "external" => {
                let value = parse_flag(meta, key)?;
                set(&mut self.external, key, key.span()).and(value)
            }
            "exclusive" => {
                let value = parse_flag(meta, key)?;
                set(&mut self.exclusive, key, key.span()).and(value)
            }
            "strict" => {
                let value = parse_flag(meta, key)?;
                set(&mut self.strict, key, key.span()).and(value)
            }
            "title" => parse_string(
                meta,
                "`title` takes a string, as in `title = \"Deploy an environment\"`",
            )?
            .and_then(|v| set(&mut self.title, key, v)),
            "read_only" | "destructive" | "idempotent" | "open_world" => {
                let value = parse_flag(meta, key)?;
                let slot = match key.to_string().as_str() {
                    "read_only" => &mut self.read_only,
                    "destructive" => &mut self.destructive,
                    "idempotent" => &mut self.idempotent,
                    _ => &mut self.open_world,
                };
                set(slot, key, key.span()).and(value)
            }
            "timeout_ms" => {
                parse_count(meta, key, &TIMEOUT)?.and_then(|v| set(&mut self.timeout_ms, key, v))
            }
            "max_output_chars" => {
                let value = parse_count(meta, key, &CAP)?;
                value.and_then(|v| set(&mut self.max_output_chars, key, v))
            }
            "on_error" => parse_on_error(meta)?.and_then(|v| set(&mut self.on_error, key, v)),
            "crate" => parse_crate(meta)?.and_then(|v| set(&mut self.krate, key, v)),
            other => {
                let hook = Hook::from_key(other).expect("every other key in KEYS is a hook");
                parse_hook(meta, hook)?.and_then(|path| self.set_hook(hook, key, path))
            }
        })
    }

    /// The path of a function key, once; a second occurrence is an error at the key.
    fn set_hook(&mut self, hook: Hook, key: &Ident, path: Path) -> syn::Result<()> {
        if self.hooks.iter().any(|(h, _)| *h == hook) {
            return Err(duplicate(key));
        }
        self.hooks.push((hook, path));
        Ok(())
    }
}

/// Sets a key once; a second occurrence is an error at the key.
fn set<T>(slot: &mut Option<T>, key: &Ident, value: T) -> syn::Result<()> {
    if slot.is_some() {
        return Err(duplicate(key));
    }
    *slot = Some(value);
    Ok(())
}

fn duplicate(key: &Ident) -> syn::Error {
    syn::Error::new_spanned(key, format!("duplicate argument `{key}`: give it once"))
}

fn unknown(path: &Path) -> syn::Error {
    let name = quote::quote!(#path).to_string().replace(' ', "");
    let keys = KEYS
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let hint = suggestion(&name)
        .map(|key| format!(" (did you mean `{key}`?)"))
        .unwrap_or_default();
    syn::Error::new_spanned(
        path,
        format!("unknown argument `{name}`{hint}: `#[tool]` accepts {keys}"),
    )
}

/// The one key an unknown name most likely meant: the same but for case, `_` and `-`
/// (`maxOutputChars`), or the only key containing it, or contained in it (`timeout`, `approval`).
fn suggestion(name: &str) -> Option<&'static str> {
    let bare = |s: &str| s.replace(['_', '-'], "").to_lowercase();
    let name = bare(name);
    if let Some(key) = KEYS.iter().find(|k| bare(k) == name) {
        return Some(key);
    }
    // Four characters at least on the shorter side, so `hidden` does not suggest `id`.
    let mut near = KEYS.iter().filter(|k| {
        let key = bare(k);
        (name.len() >= 4 && key.contains(&name)) || (key.len() >= 4 && name.contains(&key))
    });
    match (near.next(), near.next()) {
        (Some(key), None) => Some(key),
        _ => None,
    }
}

/// A key that takes a string literal; `how` is the error's text, with an example.
fn parse_string(meta: &ParseNestedMeta, how: &str) -> syn::Result<syn::Result<LitStr>> {
    let expr = match value(meta, how)? {
        Ok(expr) => expr,
        Err(e) => return Ok(Err(e)),
    };
    Ok(match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(lit),
        other => Err(syn::Error::new_spanned(other, how)),
    })
}

fn parse_description(meta: &ParseNestedMeta) -> syn::Result<syn::Result<Description>> {
    const HOW: &str = "`description` takes a string, as in `description = \"Load one ticket\"`, \
                       or a macro such as `include_str!(\"...\")`";
    let expr = match value(meta, HOW)? {
        Ok(expr) => expr,
        Err(e) => return Ok(Err(e)),
    };
    Ok(match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(Description::Lit(lit)),
        Expr::Macro(mac) => Ok(Description::Macro(mac)),
        other => Err(syn::Error::new_spanned(other, HOW)),
    })
}

fn parse_approval(meta: &ParseNestedMeta) -> syn::Result<syn::Result<Approval>> {
    if meta.input.peek(syn::token::Paren) {
        skip_value(meta)?;
        return Ok(Err(meta.error(
            "write `require_approval` or `require_approval = path::to::function`",
        )));
    }
    if !meta.input.peek(Token![=]) {
        return Ok(Ok(Approval::Always));
    }
    Ok(match meta.value()?.parse::<Expr>()? {
        Expr::Path(ExprPath {
            qself: None, path, ..
        }) => Ok(Approval::When(path)),
        other => Err(syn::Error::new_spanned(
            other,
            "`require_approval` takes the path of a function `fn(&Input) -> bool` or \
             `fn(&Input, &ToolContext) -> bool`, as in `require_approval = is_production`, or no \
             value to approve every call",
        )),
    })
}

fn parse_flag(meta: &ParseNestedMeta, key: &Ident) -> syn::Result<syn::Result<()>> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        skip_value(meta)?;
        return Ok(Err(
            meta.error(format!("`{key}` takes no value: write `#[tool({key})]`"))
        ));
    }
    Ok(Ok(()))
}

fn parse_crate(meta: &ParseNestedMeta) -> syn::Result<syn::Result<Path>> {
    const HOW: &str = "`crate` takes the path phaseo-agent is reached by, as in `crate = my_agent`";
    let expr = match value(meta, HOW)? {
        Ok(expr) => expr,
        Err(e) => return Ok(Err(e)),
    };
    Ok(match expr {
        Expr::Path(ExprPath {
            qself: None, path, ..
        }) => Ok(path),
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Err(syn::Error::new_spanned(
            &lit,
            format!("write the path without quotes: `crate = {}`", lit.value()),
        )),
        other => Err(syn::Error::new_spanned(other, HOW)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse(tokens: TokenStream) -> (Args, Vec<String>) {
        let mut errors = Errors::default();
        let args = Args::parse(tokens, &mut errors);
        let messages = errors.into_vec().iter().map(ToString::to_string).collect();
        (args, messages)
    }

    #[test]
    fn no_arguments() {
        let (args, errors) = parse(quote!());
        assert!(errors.is_empty());
        assert!(args.id.is_none() && args.description.is_none() && args.approval.is_none());
        assert!(args.external.is_none() && args.krate.is_none());
    }

    #[test]
    fn every_key() {
        let (args, errors) = parse(quote!(
            id = "fetch-ticket",
            description = "Load one ticket",
            require_approval = checks::is_production,
            external,
            crate = my_agent
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.id.unwrap().value(), "fetch-ticket");
        assert!(
            matches!(args.description, Some(Description::Lit(l)) if l.value() == "Load one ticket")
        );
        let Some(Approval::When(path)) = args.approval else {
            panic!("expected a path")
        };
        assert_eq!(quote!(#path).to_string(), "checks :: is_production");
        assert!(args.external.is_some());
        assert!(args.krate.unwrap().is_ident("my_agent"));
    }

    #[test]
    fn flag_forms() {
        let (args, errors) = parse(quote!(require_approval, description = include_str!("d.md")));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(matches!(args.approval, Some(Approval::Always)));
        assert!(matches!(args.description, Some(Description::Macro(_))));
    }

    #[test]
    fn every_mistake_is_reported_and_parsing_goes_on() {
        let (args, errors) = parse(quote!(
            idd = "x",
            id = 3,
            external = true,
            require_approval = |_| true,
            crate = "my_agent",
            timeout(5),
            description = "ok",
            description = "again"
        ));
        let accepts = "`#[tool]` accepts `id`, `description`, `require_approval`, `external`, \
                       `timeout_ms`, `on_error`, `exclusive`, `strict`, `max_output_chars`, \
                       `input_schema`, `output_schema`, `event_schema`, `on_tool_called`, \
                       `on_response_received`, `next_turn`, `title`, `read_only`, `destructive`, \
                       `idempotent`, `open_world`, `crate`";
        assert_eq!(
            errors,
            [
                format!("unknown argument `idd`: {accepts}"),
                "`id` takes a string, as in `id = \"fetch-ticket\"`".to_owned(),
                "`external` takes no value: write `#[tool(external)]`".to_owned(),
                "`require_approval` takes the path of a function `fn(&Input) -> bool` or \
                 `fn(&Input, &ToolContext) -> bool`, as in `require_approval = is_production`, \
                 or no value to approve every call"
                    .to_owned(),
                "write the path without quotes: `crate = my_agent`".to_owned(),
                format!("unknown argument `timeout` (did you mean `timeout_ms`?): {accepts}"),
                "duplicate argument `description`: give it once".to_owned(),
            ]
        );
        assert!(matches!(&args.description, Some(Description::Lit(l)) if l.value() == "ok"));
        assert!(
            args.external.is_some(),
            "a flag written with a value is still set"
        );
        assert!(args.given("id") && args.id.is_none());
        assert!(!args.given("idd"));
    }

    #[test]
    fn title_and_hint_keys() {
        let (args, errors) = parse(quote!(
            title = "Ship an order",
            read_only,
            idempotent,
            open_world
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.title.unwrap().value(), "Ship an order");
        assert!(args.read_only.is_some() && args.idempotent.is_some());
        assert!(args.open_world.is_some() && args.destructive.is_none());
        let (_, errors) = parse(quote!(
            title = 3,
            destructive = true,
            title = "a",
            title = "b"
        ));
        assert_eq!(
            errors,
            [
                "`title` takes a string, as in `title = \"Deploy an environment\"`",
                "`destructive` takes no value: write `#[tool(destructive)]`",
                "duplicate argument `title`: give it once",
            ]
        );
    }

    #[test]
    fn near_misses_of_a_key_are_named() {
        assert_eq!(suggestion("timeout"), Some("timeout_ms"));
        assert_eq!(suggestion("maxOutputChars"), Some("max_output_chars"));
        assert_eq!(suggestion("max-output-chars"), Some("max_output_chars"));
        assert_eq!(suggestion("approval"), Some("require_approval"));
        assert_eq!(suggestion("exclusively"), Some("exclusive"));
        assert_eq!(suggestion("schema"), None, "three keys end in `schema`");
        assert_eq!(suggestion("hidden"), None, "`id` is too short to count");
        assert_eq!(suggestion("retries"), None);
    }

    #[test]
    fn syntax_errors_are_reported() {
        let (_, errors) = parse(quote!(id = ));
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (_, errors) = parse(quote!(id "x"));
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    // The keys of the runtime's tool fields (`fields.rs`), through `Args::parse`.

    #[test]
    fn every_field_key() {
        let (args, errors) = parse(quote!(
            timeout_ms = 3_000,
            on_error = "fail-run",
            exclusive,
            max_output_chars = 2_000,
            next_turn = turns::escalate,
            input_schema = check_input,
            output_schema = check_output,
            event_schema = check_progress,
            on_tool_called = answer,
            on_response_received = clean
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            args.timeout_ms.unwrap().base10_parse::<u64>().unwrap(),
            3_000
        );
        assert_eq!(args.on_error, Some(Policy::FailRun));
        assert!(args.exclusive.is_some());
        assert_eq!(args.max_output_chars.unwrap().to_string(), "2_000");
        let hooks: Vec<(&str, String)> = args
            .hooks
            .iter()
            .map(|(hook, path)| (hook.key(), quote!(#path).to_string()))
            .collect();
        assert_eq!(
            hooks,
            [
                ("next_turn", "turns :: escalate".to_owned()),
                ("input_schema", "check_input".to_owned()),
                ("output_schema", "check_output".to_owned()),
                ("event_schema", "check_progress".to_owned()),
                ("on_tool_called", "answer".to_owned()),
                ("on_response_received", "clean".to_owned()),
            ],
            "in the order written"
        );
        let (args, errors) = parse(quote!(on_error = "return-to-model"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.on_error, Some(Policy::ReturnToModel));
    }

    #[test]
    fn numbers_are_whole_positive_literals() {
        let cases = [
            (
                quote!(timeout_ms = 0),
                "a timeout of 0 ms would fail every call: write at least `timeout_ms = 1`, or \
                 leave `timeout_ms` out for the agent's setting",
            ),
            (
                quote!(timeout_ms = -5),
                "`timeout_ms` cannot be negative: write a whole number of milliseconds, as in \
                 `timeout_ms = 3_000`",
            ),
            (
                quote!(timeout_ms = 2.5),
                "`timeout_ms` takes a whole number of milliseconds, as in `timeout_ms = 3_000`",
            ),
            (
                quote!(timeout_ms = TIMEOUT),
                "`timeout_ms` takes a whole number of milliseconds, as in `timeout_ms = 3_000`",
            ),
            (
                quote!(timeout_ms = " 30 "),
                "write the number without quotes: `timeout_ms = 30`",
            ),
            (
                quote!(timeout_ms = 30_u64),
                "write the number without a suffix: `timeout_ms = 30`",
            ),
            (
                quote!(max_output_chars = 0),
                "a cap of 0 characters would leave only the notice of the cut: write at least \
                 `max_output_chars = 1`, or leave `max_output_chars` out for the agent's setting",
            ),
            (
                quote!(max_output_chars = 18446744073709551616),
                "`max_output_chars` is too large: write a whole number of characters, as in \
                 `max_output_chars = 2_000`",
            ),
            (
                quote!(max_output_chars),
                "`max_output_chars` takes a whole number of characters, as in \
                 `max_output_chars = 2_000`",
            ),
        ];
        for (tokens, expected) in cases {
            let (args, errors) = parse(tokens.clone());
            assert_eq!(errors, [expected], "{tokens}");
            assert!(args.timeout_ms.is_none() && args.max_output_chars.is_none());
        }
        let (args, errors) = parse(quote!(max_output_chars = 18446744073709551615));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(args.max_output_chars.is_some());
    }

    #[test]
    fn error_policies_are_the_specs_spellings() {
        let cases = [
            (
                quote!(on_error = "fail_run"),
                "write `on_error = \"fail-run\"`",
            ),
            (
                quote!(on_error = "FailRun"),
                "write `on_error = \"fail-run\"`",
            ),
            (
                quote!(on_error = OnError::ReturnToModel),
                "write `on_error = \"return-to-model\"`",
            ),
            (
                quote!(on_error = RETURN_TO_MODEL),
                "write `on_error = \"return-to-model\"`",
            ),
            (
                quote!(on_error = "retry"),
                "unknown error policy `retry`: write `on_error = \"fail-run\"` or \
                 `on_error = \"return-to-model\"`",
            ),
            (
                quote!(on_error = true),
                "`on_error` takes `\"fail-run\"` or `\"return-to-model\"`, as in \
                 `on_error = \"fail-run\"`",
            ),
        ];
        for (tokens, expected) in cases {
            let (args, errors) = parse(tokens.clone());
            assert_eq!(errors, [expected], "{tokens}");
            assert!(args.on_error.is_none());
        }
    }

    #[test]
    fn function_keys_take_paths_once() {
        let (args, errors) = parse(quote!(
            input_schema = |v| Ok(v),
            next_turn,
            on_tool_called = a,
            on_tool_called = b,
            exclusive = true
        ));
        assert_eq!(
            errors,
            [
                "`input_schema` takes the path of a function `fn(Value) -> Result<Value, E>`, as \
                 in `input_schema = check_input`",
                "`next_turn` takes the path of a function `fn(&Value, &TurnParams) -> \
                 TurnParams`, as in `next_turn = escalate`",
                "duplicate argument `on_tool_called`: give it once",
                "`exclusive` takes no value: write `#[tool(exclusive)]`",
            ]
        );
        assert_eq!(args.hooks.len(), 1);
        assert!(args.exclusive.is_some());
        assert!(args.given("input_schema") && args.given("next_turn"));
    }
}
