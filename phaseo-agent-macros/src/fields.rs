//! The keys of `#[tool(...)]` for the runtime's tool fields beyond id, description and approval:
//! `timeout_ms` and `max_output_chars` (whole numbers), `on_error` (the spec's spellings), and the
//! keys that take a function's path ([`Hook`]). `exclusive` is a flag, parsed with the others in
//! `args.rs`. Each maps onto the `Tool` builder method of the same name (see `expand.rs`).

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::{Expr, ExprLit, ExprPath, ExprUnary, Ident, Lit, LitInt, Path, UnOp};

use crate::args::value;

/// The error policies of `on_error`, spelled as in the spec.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Policy {
    FailRun,
    ReturnToModel,
}

impl Policy {
    const ALL: [Policy; 2] = [Policy::FailRun, Policy::ReturnToModel];

    /// The spec's spelling.
    fn spelling(self) -> &'static str {
        match self {
            Policy::FailRun => "fail-run",
            Policy::ReturnToModel => "return-to-model",
        }
    }

    /// The variant of the runtime's `OnError`.
    pub(crate) fn variant(self) -> Ident {
        let name = match self {
            Policy::FailRun => "FailRun",
            Policy::ReturnToModel => "ReturnToModel",
        };
        Ident::new(name, Span::call_site())
    }
}

/// A key that takes the path of a function: each maps onto the runtime's builder method of the same
/// name, through the `__private` helper of the same name, whose bounds check the signature.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Hook {
    InputSchema,
    OutputSchema,
    EventSchema,
    OnToolCalled,
    OnResponseReceived,
    NextTurn,
}

impl Hook {
    const ALL: [Hook; 6] = [
        Hook::InputSchema,
        Hook::OutputSchema,
        Hook::EventSchema,
        Hook::OnToolCalled,
        Hook::OnResponseReceived,
        Hook::NextTurn,
    ];

    /// The key, which is also the name of the builder method and of its `__private` helper.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Hook::InputSchema => "input_schema",
            Hook::OutputSchema => "output_schema",
            Hook::EventSchema => "event_schema",
            Hook::OnToolCalled => "on_tool_called",
            Hook::OnResponseReceived => "on_response_received",
            Hook::NextTurn => "next_turn",
        }
    }

    /// The function's signature and an example of its path, for the error of a value that is not
    /// a path.
    fn signature_and_example(self) -> (&'static str, &'static str) {
        match self {
            Hook::InputSchema => ("fn(Value) -> Result<Value, E>", "check_input"),
            Hook::OutputSchema => ("fn(Value) -> Result<Value, E>", "check_output"),
            Hook::EventSchema => ("fn(Value) -> Result<Value, E>", "check_progress"),
            Hook::OnToolCalled => (
                "fn(&Value, &ToolContext) -> Option<Value>",
                "answer_small_refunds",
            ),
            Hook::OnResponseReceived => ("fn(Value) -> Result<Value, E>", "clean_answer"),
            Hook::NextTurn => ("fn(&Value, &TurnParams) -> TurnParams", "escalate"),
        }
    }

    pub(crate) fn from_key(key: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|h| h.key() == key)
    }
}

/// A key that takes a whole number: what it counts, and what zero would mean.
pub(crate) struct Count {
    unit: &'static str,
    example: &'static str,
    zero: &'static str,
}

pub(crate) const TIMEOUT: Count = Count {
    unit: "milliseconds",
    example: "3_000",
    zero: "a timeout of 0 ms would fail every call",
};

pub(crate) const CAP: Count = Count {
    unit: "characters",
    example: "2_000",
    zero: "a cap of 0 characters would leave only the notice of the cut",
};

/// `timeout_ms = 3_000`, `max_output_chars = 2_000`: a whole number literal, at least 1, without
/// quotes or a suffix (it is emitted as written, so its type is the builder's).
pub(crate) fn parse_count(
    meta: &ParseNestedMeta,
    key: &Ident,
    count: &Count,
) -> syn::Result<syn::Result<LitInt>> {
    let what = format!(
        "a whole number of {}, as in `{key} = {}`",
        count.unit, count.example
    );
    let how = format!("`{key}` takes {what}");
    let expr = match value(meta, &how)? {
        Ok(expr) => expr,
        Err(e) => return Ok(Err(e)),
    };
    let message = match &expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => match whole_number(lit, key, count, &what) {
            Ok(()) => return Ok(Ok(lit.clone())),
            Err(message) => message,
        },
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) if lit.value().trim().parse::<u64>().is_ok() => format!(
            "write the number without quotes: `{key} = {}`",
            lit.value().trim()
        ),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_), ..
        }) => format!("`{key}` cannot be negative: write {what}"),
        _ => how,
    };
    Ok(Err(syn::Error::new_spanned(expr, message)))
}

/// Why an integer literal is not a count `count` takes, if it is not.
fn whole_number(lit: &LitInt, key: &Ident, count: &Count, what: &str) -> Result<(), String> {
    if !lit.suffix().is_empty() {
        return Err(format!(
            "write the number without a suffix: `{key} = {}`",
            lit.base10_digits()
        ));
    }
    match lit.base10_parse::<u64>() {
        Ok(0) => Err(format!(
            "{}: write at least `{key} = 1`, or leave `{key}` out for the agent's setting",
            count.zero
        )),
        Ok(_) => Ok(()),
        Err(_) => Err(format!("`{key}` is too large: write {what}")),
    }
}

/// `on_error = "fail-run"` or `"return-to-model"`.
pub(crate) fn parse_on_error(meta: &ParseNestedMeta) -> syn::Result<syn::Result<Policy>> {
    let value = match value(meta, ON_ERROR)? {
        Ok(value) => value,
        Err(e) => return Ok(Err(e)),
    };
    if let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = &value
    {
        if let Some(policy) = Policy::ALL
            .into_iter()
            .find(|p| p.spelling() == lit.value())
        {
            return Ok(Ok(policy));
        }
    }
    let message = on_error_mistake(&value);
    Ok(Err(syn::Error::new_spanned(value, message)))
}

const ON_ERROR: &str =
    "`on_error` takes `\"fail-run\"` or `\"return-to-model\"`, as in `on_error = \"fail-run\"`";

/// What to write instead of `value`: a near miss (`"fail_run"`, `FailRun`, `OnError::FailRun`) is
/// told the spelling it meant.
fn on_error_mistake(value: &Expr) -> String {
    let written = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit.value()),
        Expr::Path(ExprPath {
            qself: None, path, ..
        }) => path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    };
    let meant = written
        .as_deref()
        .map(kebab_case)
        .and_then(|written| Policy::ALL.into_iter().find(|p| p.spelling() == written));
    match (meant, value) {
        (Some(policy), _) => format!("write `on_error = \"{}\"`", policy.spelling()),
        (
            None,
            Expr::Lit(ExprLit {
                lit: Lit::Str(lit), ..
            }),
        ) => format!(
            "unknown error policy `{}`: write `on_error = \"fail-run\"` or \
             `on_error = \"return-to-model\"`",
            lit.value()
        ),
        (None, _) => ON_ERROR.to_owned(),
    }
}

/// `FailRun`, `fail_run`, `FAIL_RUN` → `fail-run`.
fn kebab_case(text: &str) -> String {
    let camel = text.chars().any(char::is_lowercase);
    let mut out = String::new();
    for (i, c) in text.trim().chars().enumerate() {
        if camel && c.is_uppercase() && i > 0 {
            out.push('-');
        }
        out.extend(c.to_lowercase());
    }
    out.replace(['_', ' '], "-")
}

/// `input_schema = path` and the other function keys.
pub(crate) fn parse_hook(meta: &ParseNestedMeta, hook: Hook) -> syn::Result<syn::Result<Path>> {
    let (signature, example) = hook.signature_and_example();
    let key = hook.key();
    let how =
        format!("`{key}` takes the path of a function `{signature}`, as in `{key} = {example}`");
    let expr = match value(meta, &how)? {
        Ok(expr) => expr,
        Err(e) => return Ok(Err(e)),
    };
    Ok(match expr {
        Expr::Path(ExprPath {
            qself: None, path, ..
        }) => Ok(path),
        other => Err(syn::Error::new_spanned(other, how)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Args;
    use crate::valid::Errors;
    use proc_macro2::TokenStream;
    use quote::quote;

    fn parse(tokens: TokenStream) -> (Args, Vec<String>) {
        let mut errors = Errors::default();
        let args = Args::parse(tokens, &mut errors);
        let messages = errors.into_vec().iter().map(ToString::to_string).collect();
        (args, messages)
    }

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

    #[test]
    fn kebab_case_spellings() {
        assert_eq!(kebab_case("FailRun"), "fail-run");
        assert_eq!(kebab_case("fail_run"), "fail-run");
        assert_eq!(kebab_case("RETURN_TO_MODEL"), "return-to-model");
        assert_eq!(kebab_case(" return to model "), "return-to-model");
        assert_eq!(kebab_case("fail-run"), "fail-run");
    }
}
