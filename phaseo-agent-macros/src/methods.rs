//! Stage 3 (expand): the expansion of `#[tools]` on an `impl` block. Uses: errors, doc, ast, args,
//! valid, expand.
//!
//! ```text
//! // Input:
//! #[tools]
//! impl Helpdesk {
//!     /// Search the knowledge base.
//!     #[tool(timeout_ms = 3_000)]
//!     async fn search(&self, query: String, ctx: &ToolContext) -> Result<Vec<Hit>, DbError> { body }
//!     fn helper(&self) {}
//! }
//!
//! // Output (paths shortened):
//! impl Helpdesk {
//!     /// Search the knowledge base.
//!     async fn search(&self, query: String, ctx: &ToolContext) -> Result<Vec<Hit>, DbError> { body }
//!     fn helper(&self) {}
//! }
//! /// The arguments of the [`search`] tool ...
//! struct SearchArgs<__T0 = String> { pub query: __T0 }
//! const _: () = {
//!     impl MethodTools for Helpdesk {
//!         fn method_tools(__phaseo_this: &Arc<Self>, __phaseo_tools: &mut Vec<Tool>) {
//!             __phaseo_tools.push({
//!                 // as `into_tool` of a free function, with `__build` taking `Helpdesk::search`
//!                 // and `Arc<Helpdesk>`; each call clones the `Arc` into its future
//!                 fn __build<..>(__this: Arc<Helpdesk>, __call: __F) -> Tool { .. }
//!                 let __tool = __build::<String, _>(Arc::clone(__phaseo_this), <Helpdesk>::search);
//!                 Tool::timeout(__tool, Duration::from_millis(3_000))
//!             });
//!         }
//!     }
//!     impl IntoTools for Helpdesk {                 // `.tools(helpdesk)`
//!         fn add_to(self, tools: &mut Vec<Tool>) { MethodTools::method_tools(&Arc::new(self), tools) }
//!     }
//!     // and, in phaseo-agent, `impl<T: MethodTools> IntoTools for Arc<T>`: `.tools(shared.clone())`
//! };
//! ```

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::{Attribute, FnArg, ImplItem, ItemImpl, Path, Type};

use crate::args::Args;
use crate::ast::{Body, ItemTool, Param, ToolFn};
use crate::errors::Errors;
use crate::expand::Expansion;
use crate::valid;

/// `#[tools]`: the impl block with its `#[tool]` methods made tools, or (on any mistake) the block
/// with the attributes removed plus the errors.
pub(crate) fn tools(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let krate = parse_args(args, &mut errors);
    let mut block: ItemImpl = match syn::parse2(input.clone()) {
        Ok(block) => block,
        Err(_) => {
            let e = syn::Error::new(
                proc_macro2::Span::call_site(),
                "`#[tools]` goes on an `impl` block whose methods have `#[tool]`, as in \
                 `#[tools] impl Helpdesk { #[tool] async fn search(&self, query: String) -> ... }`",
            )
            .to_compile_error();
            return quote!(#e #input);
        }
    };
    impl_form(&block, &mut errors);
    let self_ty = (*block.self_ty).clone();

    // Take the tools out of the block: their `#[tool]` attributes, and `external` declarations.
    let mut tools = Vec::new();
    let mut kept = Vec::new();
    for item in std::mem::take(&mut block.items) {
        match take_tool(item) {
            Taken::Tool(tool) => {
                kept.extend(method_without_tool(&tool.item).map(ImplItem::Fn));
                tools.push(tool);
            }
            Taken::Other(item) => kept.push(item),
        }
    }
    block.items = kept;
    let p = match &krate {
        Some(path) => quote!(#path::__private),
        None => quote!(::phaseo_agent::__private),
    };

    let mut structs = Vec::new();
    let mut pushes = Vec::new();
    let mut sound = errors.len() == 0;
    for method in &tools {
        let mut method_errors = Errors::default();
        let args = Args::parse(method.args.clone(), &mut method_errors);
        let tool = ToolFn::method(&method.item, &self_ty);
        let before = method_errors.len();
        valid::signature(&tool, &args, &mut method_errors);
        let signature_ok = method_errors.len() == before;
        let id = valid::id(&tool, &args, &mut method_errors);
        let description = valid::description(&tool, &args, &mut method_errors);
        structs.push(method_errors.to_compile_errors());
        if !signature_ok {
            sound = false;
            continue;
        }
        let expansion = Expansion::with_private(&tool, &args, &id, description, krate.as_ref());
        structs.push(expansion.args_items());
        let built = expansion.build_tool(Some(&quote!(__phaseo_this)));
        let cfgs = method
            .item
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"));
        pushes.push(quote! {
            #(#cfgs)*
            __phaseo_tools.push({ #built });
        });
    }
    let compile_errors = errors.to_compile_errors();
    if !sound {
        return quote!(#compile_errors #block #(#structs)*);
    }
    let (impl_generics, _, where_clause) = block.generics.split_for_impl();
    quote! {
        #compile_errors
        #block
        #(#structs)*
        const _: () = {
            #[automatically_derived]
            #[allow(deprecated)]
            impl #impl_generics #p::MethodTools for #self_ty #where_clause {
                fn method_tools(
                    __phaseo_this: &#p::Arc<Self>,
                    __phaseo_tools: &mut #p::Vec<#p::Tool>,
                ) {
                    let _ = __phaseo_this;
                    #(#pushes)*
                }
            }
            #[automatically_derived]
            impl #impl_generics #p::IntoTools for #self_ty #where_clause {
                fn add_to(self, __phaseo_tools: &mut #p::Vec<#p::Tool>) {
                    <Self as #p::MethodTools>::method_tools(&#p::Arc::new(self), __phaseo_tools)
                }
            }
        };
    }
}

/// `#[tools]` or `#[tools(crate = path)]`.
fn parse_args(args: TokenStream, errors: &mut Errors) -> Option<Path> {
    let mut krate = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            krate = Some(meta.value()?.parse::<Path>()?);
            Ok(())
        } else {
            Err(meta.error(
                "`#[tools]` takes only `crate = path` (for a renamed dependency); the keys of \
                 each tool go on its method's `#[tool(...)]`",
            ))
        }
    });
    if let Err(e) = parser.parse2(args) {
        errors.push(e);
    }
    krate
}

/// A tool set is one inherent, non-generic `impl` block.
fn impl_form(block: &ItemImpl, errors: &mut Errors) {
    if let Some((_, path, _)) = &block.trait_ {
        errors.push(syn::Error::new_spanned(
            path,
            "`#[tools]` goes on an inherent `impl` block (`impl Helpdesk { ... }`), not on a trait \
             implementation: move the `#[tool]` methods to an `impl` of the type itself",
        ));
    }
    for param in &block.generics.params {
        errors.push(syn::Error::new_spanned(
            param,
            "a tool set cannot be generic: its tools' input and output types must be concrete; \
             write `#[tools]` on an `impl` of a concrete type (`impl Helpdesk<Postgres>`)",
        ));
    }
    if let Some(w) = &block.generics.where_clause {
        errors.push(syn::Error::new_spanned(
            w.where_token,
            "a tool set cannot have a `where` clause: its types must be concrete",
        ));
    }
    if let Some(unsafety) = &block.unsafety {
        errors.push(syn::Error::new_spanned(
            unsafety,
            "`#[tools]` goes on a safe `impl` block",
        ));
    }
    if !matches!(&*block.self_ty, Type::Path(_)) {
        errors.push(syn::Error::new_spanned(
            &block.self_ty,
            "`#[tools]` goes on an `impl` of a named type (a struct or enum of yours)",
        ));
    }
}

/// A `#[tool]` method taken out of the block.
struct Method {
    item: ItemTool,
    /// The tokens inside `#[tool(...)]`.
    args: TokenStream,
}

enum Taken {
    Tool(Method),
    Other(ImplItem),
}

/// Whether an attribute is `#[tool]` (or `#[phaseo_agent::tool]`, or `#[tool(...)]`).
fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "tool")
}

fn take_tool(item: ImplItem) -> Taken {
    let (attrs, vis, sig, body) = match item {
        ImplItem::Fn(f) if f.attrs.iter().any(is_tool_attr) => {
            (f.attrs, f.vis, f.sig, Body::Block(Box::new(f.block)))
        }
        ImplItem::Verbatim(tokens) => match syn::parse2::<ItemTool>(tokens.clone()) {
            Ok(item) if item.attrs.iter().any(is_tool_attr) => {
                (item.attrs, item.vis, item.sig, item.body)
            }
            _ => return Taken::Other(ImplItem::Verbatim(tokens)),
        },
        other => return Taken::Other(other),
    };
    let mut args = TokenStream::new();
    let mut kept = Vec::new();
    for attr in attrs {
        if is_tool_attr(&attr) {
            if let syn::Meta::List(list) = &attr.meta {
                args = list.tokens.clone();
            }
        } else {
            kept.push(attr);
        }
    }
    Taken::Tool(Method {
        item: ItemTool {
            attrs: kept,
            vis,
            sig,
            body,
        },
        args,
    })
}

/// The method as it stays in the block: without `#[tool]` and its parameters' field attributes.
/// A declaration without a body (an `external` tool, or a mistake `valid::body` reports) leaves
/// the block: it is not a method Rust accepts.
fn method_without_tool(item: &ItemTool) -> Option<syn::ImplItemFn> {
    let Body::Block(block) = &item.body else {
        return None;
    };
    let mut sig = item.sig.clone();
    for arg in &mut sig.inputs {
        if let FnArg::Typed(p) = arg {
            p.attrs.retain(|a| !Param::is_field_attr(a));
        }
    }
    Some(syn::ImplItemFn {
        attrs: item.attrs.clone(),
        vis: item.vis.clone(),
        defaultness: None,
        sig,
        block: (**block).clone(),
    })
}
