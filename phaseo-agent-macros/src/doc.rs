//! Stage 0 (shared): doc comments to the descriptions of a tool and its arguments. Uses: nothing.
//!
//! As in schemars and clap: the `#[doc = "..."]` lines (what `///` becomes), in order, each with one
//! leading space stripped, joined with `\n`, with blank lines at either end trimmed.

use syn::{Attribute, Expr, ExprLit, Lit, Meta};

/// Whether an attribute is a doc comment line (`///`, `/** */` or `#[doc = ...]`). `#[doc(hidden)]`
/// and `#[doc(alias = ...)]` are not.
pub(crate) fn is_doc(attr: &Attribute) -> bool {
    attr.path().is_ident("doc") && matches!(attr.meta, Meta::NameValue(_))
}

/// The text of the doc comment lines among `attrs`, or `None` when there are none or they are all
/// blank. A computed line (`#[doc = include_str!("...")]`) cannot be read by a macro: it is an error
/// at that line.
pub(crate) fn text(attrs: &[Attribute]) -> syn::Result<Option<String>> {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| is_doc(a)) {
        let Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        let Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) = &nv.value
        else {
            return Err(syn::Error::new_spanned(
                &nv.value,
                "`#[tool]` cannot read a computed doc comment: write the description as \
                 `description = ...` in `#[tool(...)]`",
            ));
        };
        let value = lit.value();
        lines.push(match value.strip_prefix(' ') {
            Some(stripped) => stripped.to_owned(),
            None => value,
        });
    }
    Ok(join(&lines))
}

/// Joins lines with `\n`, dropping blank lines at either end; `None` if nothing is left.
fn join(lines: &[String]) -> Option<String> {
    let blank = |line: &&String| line.trim().is_empty();
    let start = lines.iter().position(|l| !blank(&l))?;
    let end = lines.iter().rposition(|l| !blank(&l))?;
    Some(lines[start..=end].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn attrs(item: syn::ItemFn) -> Vec<Attribute> {
        item.attrs
    }

    #[test]
    fn lines_are_joined_and_one_leading_space_is_stripped() {
        let attrs = attrs(parse_quote! {
            /// Load one ticket.
            ///
            ///   Indented stays indented.
            fn f() {}
        });
        assert_eq!(
            text(&attrs).unwrap().as_deref(),
            Some("Load one ticket.\n\n  Indented stays indented.")
        );
    }

    #[test]
    fn blank_edge_lines_are_trimmed() {
        let attrs = attrs(parse_quote! {
            ///
            ///
            /// Middle.
            ///
            fn f() {}
        });
        assert_eq!(text(&attrs).unwrap().as_deref(), Some("Middle."));
    }

    #[test]
    fn no_doc_or_only_blank_lines_is_none() {
        let none = attrs(parse_quote! {
            #[inline]
            #[doc(hidden)]
            fn f() {}
        });
        assert_eq!(text(&none).unwrap(), None);
        let blank = attrs(parse_quote! {
            ///
            #[doc = "    "]
            fn f() {}
        });
        assert_eq!(text(&blank).unwrap(), None);
    }

    #[test]
    fn explicit_doc_attributes_count_and_others_do_not() {
        let attrs = attrs(parse_quote! {
            #[doc = "First."]
            #[doc(alias = "other")]
            #[allow(dead_code)]
            /** Second. */
            fn f() {}
        });
        assert_eq!(text(&attrs).unwrap().as_deref(), Some("First.\nSecond. "));
        assert!(!is_doc(&attrs[1]));
        assert!(!is_doc(&attrs[2]));
    }

    #[test]
    fn a_computed_doc_line_is_an_error() {
        let attrs = attrs(parse_quote! {
            /// Fine.
            #[doc = include_str!("tool.md")]
            fn f() {}
        });
        let err = text(&attrs).unwrap_err();
        assert!(err.to_string().contains("description = ..."), "{err}");
    }
}
