//! Stage 1 (parse): a key's value, and the keys of the runtime's tool fields. Uses: nothing.
//!
//! The keys of `#[tool(...)]` for the runtime's tool fields beyond id, description and approval:
//! `timeout_ms` and `max_output_chars` (whole numbers), `on_error` (`"fail-run"` or
//! `"return-to-model"`, as `OnError` is spelled in serde data), and the keys that take a function's
//! path ([`Hook`]). `exclusive` is a flag, parsed with the others in `args.rs`. Each maps onto the
//! `Tool` builder method of the same name (see `expand.rs`). The reading of a key's value
//! ([`value`], [`skip_value`]) is here too, for these keys and `args.rs`'s.

use proc_macro2::{Span, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::{Expr, ExprLit, ExprPath, ExprUnary, Ident, Lit, LitInt, Path, Token, UnOp};

/// The error policies of `on_error`, spelled as `OnError` is in serde data (kebab-case).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Policy {
    FailRun,
    ReturnToModel,
}

impl Policy {
    const ALL: [Policy; 2] = [Policy::FailRun, Policy::ReturnToModel];

    /// The spelling `on_error` takes: `fail-run` or `return-to-model`.
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

/// Consumes whatever follows an unknown or malformed key (`= expr` or `(...)`), so parsing can go on.
pub(crate) fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<TokenTree>()?;
    }
    Ok(())
}

/// The value after `key =`; a key written without one is a mistake (`how` says how to write it),
/// and parsing goes on after it unless what follows is not the next key.
pub(crate) fn value(meta: &ParseNestedMeta, how: &str) -> syn::Result<syn::Result<Expr>> {
    if !meta.input.peek(Token![=]) {
        skip_value(meta)?;
        let error = meta.error(how);
        if meta.input.is_empty() || meta.input.peek(Token![,]) {
            return Ok(Err(error));
        }
        return Err(error);
    }
    Ok(Ok(meta.value()?.parse()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_case_spellings() {
        assert_eq!(kebab_case("FailRun"), "fail-run");
        assert_eq!(kebab_case("fail_run"), "fail-run");
        assert_eq!(kebab_case("RETURN_TO_MODEL"), "return-to-model");
        assert_eq!(kebab_case(" return to model "), "return-to-model");
        assert_eq!(kebab_case("fail-run"), "fail-run");
    }
}
