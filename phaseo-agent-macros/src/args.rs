//! The arguments of `#[tool(...)]`.
//!
//! Each key is one arm of [`Args::key`] and one entry of [`KEYS`]; a new key (a timeout, an error
//! policy, ...) adds a field, an arm and an entry. Mistakes are collected, not returned at the first,
//! so every bad key is underlined at once.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, ExprLit, ExprPath, Ident, Lit, LitStr, Path, Token};

use crate::valid::Errors;

/// The keys `#[tool(...)]` accepts, as listed in the error for an unknown key.
pub(crate) const KEYS: &[&str] = &["id", "description", "require_approval", "external", "crate"];

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
        // The outer `?` is a syntax error (parsing stops); the inner result is a mistake in a value.
        let result = match key.to_string().as_str() {
            "id" => parse_id(meta)?.and_then(|v| set(&mut self.id, key, v)),
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
            _ => parse_crate(meta)?.and_then(|v| set(&mut self.krate, key, v)),
        };
        if let Err(e) = result {
            errors.push(e);
        }
        Ok(())
    }
}

/// Sets a key once; a second occurrence is an error at the key.
fn set<T>(slot: &mut Option<T>, key: &Ident, value: T) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new_spanned(
            key,
            format!("duplicate argument `{key}`: give it once"),
        ));
    }
    *slot = Some(value);
    Ok(())
}

fn unknown(path: &Path) -> syn::Error {
    let name = quote::quote!(#path).to_string().replace(' ', "");
    let keys = KEYS
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    syn::Error::new_spanned(
        path,
        format!("unknown argument `{name}`: `#[tool]` accepts {keys}"),
    )
}

/// Consumes whatever follows an unknown or malformed key (`= expr` or `(...)`), so parsing can go on.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<TokenTree>()?;
    }
    Ok(())
}

/// The value after `key =`, or an error saying how to write the key.
fn value(meta: &ParseNestedMeta, how: &str) -> syn::Result<Expr> {
    if !meta.input.peek(Token![=]) {
        skip_value(meta)?;
        return Err(meta.error(how));
    }
    meta.value()?.parse()
}

fn parse_id(meta: &ParseNestedMeta) -> syn::Result<syn::Result<LitStr>> {
    const HOW: &str = "`id` takes a string, as in `id = \"fetch-ticket\"`";
    Ok(match value(meta, HOW)? {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(lit),
        other => Err(syn::Error::new_spanned(other, HOW)),
    })
}

fn parse_description(meta: &ParseNestedMeta) -> syn::Result<syn::Result<Description>> {
    const HOW: &str = "`description` takes a string, as in `description = \"Load one ticket\"`, \
                       or a macro such as `include_str!(\"...\")`";
    Ok(match value(meta, HOW)? {
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
            "`require_approval` takes the path of a function `fn(&Input) -> bool`, as in \
             `require_approval = is_production`, or no value to approve every call",
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
    Ok(match value(meta, HOW)? {
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
        assert_eq!(
            errors,
            [
                "unknown argument `idd`: `#[tool]` accepts `id`, `description`, `require_approval`, `external`, `crate`",
                "`id` takes a string, as in `id = \"fetch-ticket\"`",
                "`external` takes no value: write `#[tool(external)]`",
                "`require_approval` takes the path of a function `fn(&Input) -> bool`, as in `require_approval = is_production`, or no value to approve every call",
                "write the path without quotes: `crate = my_agent`",
                "unknown argument `timeout`: `#[tool]` accepts `id`, `description`, `require_approval`, `external`, `crate`",
                "duplicate argument `description`: give it once",
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
    fn syntax_errors_are_reported() {
        let (_, errors) = parse(quote!(id = ));
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (_, errors) = parse(quote!(id "x"));
        assert_eq!(errors.len(), 1, "{errors:?}");
    }
}
