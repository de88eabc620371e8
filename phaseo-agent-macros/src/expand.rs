//! The expansion of `#[tool]`.
//!
//! ```text
//! // Input:
//! /// Add two numbers.
//! #[tool]
//! pub async fn add(a: i64, b: i64, ctx: &ToolContext) -> Result<i64, String> { body }
//!
//! // Output (paths shortened; every one is absolute, through `::phaseo_agent::__private`):
//! /// Add two numbers.
//! pub struct add;                                   // the name `.tool(add)` and `add(..)` use
//! async fn __phaseo_tool_add(a: i64, b: i64, ctx: &ToolContext) -> Result<i64, String> { body }
//! /// The arguments of the [`add`] tool ...
//! #[derive(Deserialize, JsonSchema)]
//! pub struct AddArgs { pub a: i64, pub b: i64 }
//! impl Deref for add {                              // so `add(1, 2, &ctx).await` calls the function
//!     type Target = for<'a> fn(i64, i64, &'a ToolContext) -> BoxFuture<'a, Result<i64, String>>;
//!     ...
//! }
//! impl IntoTool for add {                           // so `.tool(add)` takes it
//!     fn into_tool(self) -> Tool {
//!         let call = *self;
//!         typed::<AddArgs, i64, String, _, _>("add", "Add two numbers.", move |input, ctx| async move {
//!             let AddArgs { a, b } = input;
//!             call(a, b, <ToolContext as Context>::from_context(&ctx)).await
//!         })
//!     }
//! }
//! ```

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, Item, LitStr, Type};

use crate::args::{Approval, Args};
use crate::ast::{self, Body, ItemTool, Param, Returns, Role, ToolFn};
use crate::doc;
use crate::valid::{self, Errors};

/// `#[tool]`: the item as a tool, or (on any mistake) the item as written plus the errors.
pub(crate) fn tool(args: TokenStream, input: TokenStream) -> TokenStream {
    let item: ItemTool = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(e) => {
            let e = not_a_function(input.clone())
                .unwrap_or(e)
                .to_compile_error();
            return quote!(#e #input);
        }
    };
    let mut errors = Errors::default();
    let args = Args::parse(args, &mut errors);
    let tool = ToolFn::from_syn(&item);
    let before = errors.len();
    valid::signature(&tool, &args, &mut errors);
    let sound = errors.len() == before;
    let id = valid::id(&tool, &args, &mut errors);
    let description = valid::description(&tool, &args, &mut errors);
    let compile_errors = errors.to_compile_errors();
    if !sound {
        // The signature cannot become a tool: keep the function as written, so the rest of the crate
        // still type-checks against it.
        let item = fallback(&tool);
        return quote!(#compile_errors #item);
    }
    let expanded = Expansion::new(&tool, &args, &id, description).tokens();
    quote!(#compile_errors #expanded)
}

/// The error for an item that is not a function, at its keyword.
fn not_a_function(input: TokenStream) -> Option<syn::Error> {
    let item: Item = syn::parse2(input).ok()?;
    let keyword: &dyn ToTokens = match &item {
        Item::Struct(i) => &i.struct_token,
        Item::Enum(i) => &i.enum_token,
        Item::Union(i) => &i.union_token,
        Item::Impl(i) => &i.impl_token,
        Item::Trait(i) => &i.trait_token,
        Item::Mod(i) => &i.mod_token,
        Item::Const(i) => &i.const_token,
        Item::Static(i) => &i.static_token,
        Item::Type(i) => &i.type_token,
        Item::Use(i) => &i.use_token,
        _ => &item,
    };
    Some(syn::Error::new_spanned(
        keyword,
        "`#[tool]` goes on a function, as in `async fn fetch_ticket(input: FetchTicket) -> \
         Result<Ticket, TicketError> { ... }`",
    ))
}

fn fallback(tool: &ToolFn) -> TokenStream {
    let item = tool.item;
    match item.body {
        Body::Block(_) => ast::without_param_attrs(item),
        // A declaration cannot be emitted as written; the name still resolves.
        Body::Semi(_) => {
            let (vis, ident) = (&item.vis, tool.ident());
            let docs = item.attrs.iter().filter(|a| doc::is_doc(a));
            quote!(#(#docs)* #[allow(non_camel_case_types, dead_code)] #vis struct #ident;)
        }
    }
}

struct Expansion<'a> {
    tool: &'a ToolFn<'a>,
    args: &'a Args,
    id: LitStr,
    description: TokenStream,
    /// `::phaseo_agent::__private`, or `<crate = path>::__private`.
    private: TokenStream,
    /// The `#[cfg]`s of the function, repeated on every generated item.
    cfgs: Vec<&'a Attribute>,
    /// The function, renamed.
    hidden: Ident,
    /// The generated input struct, for plain arguments.
    args_struct: Ident,
}

impl<'a> Expansion<'a> {
    fn new(tool: &'a ToolFn<'a>, args: &'a Args, id: &str, description: TokenStream) -> Self {
        let ident = tool.ident();
        let private = match &args.krate {
            Some(path) => quote!(#path::__private),
            None => quote!(::phaseo_agent::__private),
        };
        Expansion {
            tool,
            args,
            id: LitStr::new(id, ident.span()),
            description,
            private,
            cfgs: tool
                .item
                .attrs
                .iter()
                .filter(|a| a.path().is_ident("cfg"))
                .collect(),
            hidden: format_ident!("__phaseo_tool_{}", ident),
            args_struct: format_ident!(
                "{}Args",
                camel_case(&ident.to_string()),
                span = ident.span()
            ),
        }
    }

    fn tokens(&self) -> TokenStream {
        let unit = self.unit_struct();
        let into_tool = self.into_tool();
        let args_struct = self.args_struct_item();
        if self.args.external.is_some() {
            return quote!(#unit #args_struct #into_tool);
        }
        let function = self.hidden_fn();
        let deref = self.deref();
        quote!(#unit #function #args_struct #deref #into_tool)
    }

    /// The name users see: a unit struct with the function's docs.
    fn unit_struct(&self) -> TokenStream {
        let item = self.tool.item;
        let (vis, ident) = (&item.vis, self.tool.ident());
        let attrs = item.attrs.iter().filter(|a| is_struct_attr(a));
        quote! {
            #(#attrs)*
            #[allow(non_camel_case_types)]
            #vis struct #ident;
        }
    }

    /// The function as written, renamed, with its parameters' field attributes moved away.
    fn hidden_fn(&self) -> TokenStream {
        let item = self.tool.item;
        let mut sig = item.sig.clone();
        sig.ident = self.hidden.clone();
        for arg in &mut sig.inputs {
            if let FnArg::Typed(p) = arg {
                p.attrs.retain(|a| !Param::is_field_attr(a));
            }
        }
        let cfgs = &self.cfgs;
        let attrs = item
            .attrs
            .iter()
            .filter(|a| !is_struct_attr(a) && !a.path().is_ident("cfg"));
        let Body::Block(block) = &item.body else {
            unreachable!("valid::signature rejects a non-external declaration")
        };
        quote! {
            #(#cfgs)*
            #(#attrs)*
            #sig #block
        }
    }

    /// The input struct of a tool with plain arguments (none for a typed input).
    fn args_struct_item(&self) -> TokenStream {
        if self.tool.typed_input().is_some() {
            return TokenStream::new();
        }
        let p = &self.private;
        let (vis, name, cfgs) = (&self.tool.item.vis, &self.args_struct, &self.cfgs);
        let fields = self
            .plain()
            .map(|(param, ident, _)| self.field(param, ident));
        let serde = format!("{p}::serde").replace(' ', "");
        let schemars = format!("{p}::schemars").replace(' ', "");
        let doc = format!(
            " The arguments of the [`{}`] tool, one field per plain argument (generated by `#[tool]`).",
            self.tool.ident()
        );
        quote! {
            #(#cfgs)*
            #[doc = #doc]
            #[derive(#p::serde::Deserialize, #p::schemars::JsonSchema)]
            #[serde(crate = #serde)]
            #[schemars(crate = #schemars, title = "", description = "")]
            #[allow(missing_docs)]
            #vis struct #name {
                #(#fields)*
            }
        }
    }

    fn field(&self, param: &Param, ident: &Ident) -> TokenStream {
        let p = &self.private;
        let attrs = param.attrs.iter().filter(|a| Param::is_field_attr(a));
        let default = (is_option(param.ty) && !has_serde_default(param.attrs))
            .then(|| quote!(#[serde(default)]));
        let ty = match param.role {
            Role::Str => quote_spanned!(param.ty.span()=> #p::String),
            _ => param.ty.to_token_stream(),
        };
        quote!(#(#attrs)* #default pub #ident: #ty,)
    }

    /// The plain arguments, each with its name and the local it is unpacked into.
    fn plain(&self) -> impl Iterator<Item = (&Param<'a>, &'a Ident, Ident)> {
        self.tool
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.role, Role::Plain | Role::Str))
            .filter_map(|(i, p)| Some((p, p.ident()?, format_ident!("__arg{}", i))))
    }

    /// The input type: the typed input's, or the generated struct.
    fn input_type(&self) -> TokenStream {
        match self.tool.typed_input() {
            Some(param) => param.ty.to_token_stream(),
            None => self.args_struct.to_token_stream(),
        }
    }

    /// The output type as written, `()` if none.
    fn return_type(&self) -> TokenStream {
        match &self.tool.item.sig.output {
            syn::ReturnType::Type(_, ty) => ty.to_token_stream(),
            syn::ReturnType::Default => quote!(()),
        }
    }

    /// The function pointer `Deref` gives: the function's own parameters; an async function's future
    /// is boxed, borrowing for one lifetime shared by every reference parameter.
    fn pointer_type(&self) -> TokenStream {
        let p = &self.private;
        let ret = self.return_type();
        if !self.tool.is_async() {
            let types = self.tool.params.iter().map(|param| param.ty);
            return quote!(fn(#(#types),*) -> #ret);
        }
        let types = self.tool.params.iter().map(|param| with_lifetime(param.ty));
        if self.borrows() {
            quote!(for<'__a> fn(#(#types),*) -> #p::futures::future::BoxFuture<'__a, #ret>)
        } else {
            quote!(fn(#(#types),*) -> #p::futures::future::BoxFuture<'static, #ret>)
        }
    }

    fn borrows(&self) -> bool {
        self.tool
            .params
            .iter()
            .any(|p| matches!(p.ty, Type::Reference(_)))
    }

    /// `Deref` to a function pointer, so the name stays callable: `add(1, 2, &ctx)`.
    fn deref(&self) -> TokenStream {
        let p = &self.private;
        let (ident, cfgs, hidden) = (self.tool.ident(), &self.cfgs, &self.hidden);
        let pointer = self.pointer_type();
        let (boxing, target) = if self.tool.is_async() {
            (self.boxing(), quote!(__phaseo_boxed))
        } else {
            (TokenStream::new(), quote!(#hidden))
        };
        quote! {
            #(#cfgs)*
            #[automatically_derived]
            #[allow(deprecated)]
            impl #p::core::ops::Deref for #ident {
                type Target = #pointer;
                fn deref(&self) -> &Self::Target {
                    #boxing
                    static __PHASEO_TOOL: #pointer = #target;
                    &__PHASEO_TOOL
                }
            }
        }
    }

    /// The async function with its future boxed as a `Send` future. A future that is not `Send`
    /// fails here, at the function's name.
    fn boxing(&self) -> TokenStream {
        let p = &self.private;
        let (hidden, ret) = (&self.hidden, self.return_type());
        let names: Vec<Ident> = (0..self.tool.params.len())
            .map(|i| format_ident!("__arg{}", i))
            .collect();
        let types = self.tool.params.iter().map(|param| with_lifetime(param.ty));
        let (generics, lifetime) = if self.borrows() {
            (quote!(<'__a>), quote!('__a))
        } else {
            (TokenStream::new(), quote!('static))
        };
        let boxed = quote_spanned! {self.tool.ident().span()=>
            #p::futures::FutureExt::boxed(#hidden(#(#names),*))
        };
        quote! {
            fn __phaseo_boxed #generics (#(#names: #types),*) -> #p::futures::future::BoxFuture<#lifetime, #ret> {
                #boxed
            }
        }
    }

    /// `IntoTool`: the runtime's typed constructor, called through the pointer `Deref` gives.
    fn into_tool(&self) -> TokenStream {
        let p = &self.private;
        let (ident, cfgs) = (self.tool.ident(), &self.cfgs);
        let constructor = self.constructor();
        let tool = match &self.args.approval {
            None => quote!(__tool),
            Some(Approval::Always) => quote!(#p::Tool::require_approval(__tool)),
            Some(Approval::When(path)) => {
                let input = self.input_type();
                quote_spanned!(path.span()=> #p::approval::<#input, _>(__tool, #path))
            }
        };
        let call = if self.args.external.is_some() {
            TokenStream::new()
        } else {
            let pointer = self.pointer_type();
            quote!(let __call: #pointer = *self;)
        };
        quote! {
            #(#cfgs)*
            #[automatically_derived]
            #[allow(deprecated)]
            impl #p::IntoTool for #ident {
                fn into_tool(self) -> #p::Tool {
                    #call
                    let __tool = #constructor;
                    #tool
                }
            }
        }
    }

    fn constructor(&self) -> TokenStream {
        let p = &self.private;
        let (id, description, input) = (&self.id, &self.description, self.input_type());
        let (output, error) = self.output_and_error();
        if self.args.external.is_some() {
            return quote!(#p::external::<#input, #output>(#id, #description));
        }
        let unpack = self.unpack();
        let args = self.call_args();
        let mut result = quote!(__call(#(#args),*));
        if self.tool.is_async() {
            result = quote!(#result.await);
        }
        if !matches!(self.tool.returns, Returns::Result { .. }) {
            let ret = self.return_type();
            result = quote!(#p::core::result::Result::Ok::<#ret, #p::core::convert::Infallible>(#result));
        }
        if self.tool.is_async() {
            quote! {
                #p::typed::<#input, #output, #error, _, _>(#id, #description,
                    move |__input: #input, __ctx: #p::ToolContext| async move { #unpack #result })
            }
        } else {
            quote! {
                #p::typed_blocking::<#input, #output, #error, _>(#id, #description,
                    move |__input: #input, __ctx: #p::ToolContext| { #unpack #result })
            }
        }
    }

    /// The tool's output and error types for the constructor's turbofish, with the user's spans (so a
    /// missing `Serialize` or `Display` is reported at the type); `_` where the return type does not
    /// spell them.
    fn output_and_error(&self) -> (TokenStream, TokenStream) {
        let p = &self.private;
        let infallible = quote!(#p::core::convert::Infallible);
        let or_infer = |t: Option<&Type>| t.map_or_else(|| quote!(_), ToTokens::to_token_stream);
        match self.tool.returns {
            Returns::Unit => (quote!(()), infallible),
            Returns::Value(ty) => (ty.to_token_stream(), infallible),
            Returns::Result { ok, err } => (or_infer(ok), or_infer(err)),
        }
    }

    /// Unpacks the generated struct into one local per plain argument.
    fn unpack(&self) -> TokenStream {
        if self.tool.typed_input().is_some() {
            return TokenStream::new();
        }
        let name = &self.args_struct;
        let fields = self.plain().map(|(_, field, local)| quote!(#field: #local));
        quote!(let #name { #(#fields),* } = __input;)
    }

    /// The call's arguments, in the function's parameter order.
    fn call_args(&self) -> Vec<TokenStream> {
        let p = &self.private;
        self.tool
            .params
            .iter()
            .enumerate()
            .map(|(i, param)| {
                let local = format_ident!("__arg{}", i);
                match (param.role, param.ty) {
                    (Role::Context, Type::Reference(r)) => {
                        let elem = &r.elem;
                        quote_spanned!(elem.span()=> <#elem as #p::Context>::from_context(&__ctx))
                    }
                    (Role::Input, _) => quote!(__input),
                    (Role::Str, _) => quote!(#p::String::as_str(&#local)),
                    _ => quote!(#local),
                }
            })
            .collect()
    }
}

/// Attributes that go on the unit struct: docs (the name users see is the struct), `#[deprecated]`.
fn is_struct_attr(attr: &Attribute) -> bool {
    let path = attr.path();
    path.is_ident("doc") || path.is_ident("deprecated") || path.is_ident("cfg")
}

/// `&T` as `&'__a T` (the pointer type of an async tool borrows for one lifetime).
fn with_lifetime(ty: &Type) -> TokenStream {
    match ty {
        Type::Reference(r) => {
            let elem = &r.elem;
            quote!(&'__a #elem)
        }
        _ => ty.to_token_stream(),
    }
}

/// Whether a type is `Option<T>` (by its last path segment): an optional field, `#[serde(default)]`.
fn is_option(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "Option"))
}

fn has_serde_default(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(list) if list.path.is_ident("serde") => list
            .tokens
            .clone()
            .into_iter()
            .any(|t| matches!(t, TokenTree::Ident(i) if i == "default")),
        _ => false,
    })
}

/// `fetch_ticket` → `FetchTicket`.
pub(crate) fn camel_case(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_names() {
        assert_eq!(camel_case("fetch_ticket"), "FetchTicket");
        assert_eq!(camel_case("deploy"), "Deploy");
        assert_eq!(camel_case("__private_thing_"), "PrivateThing");
        assert_eq!(camel_case("r#type"), "Type");
        assert_eq!(camel_case("add2_numbers"), "Add2Numbers");
    }

    #[test]
    fn serde_default_is_not_repeated() {
        let attrs: Vec<Attribute> = vec![syn::parse_quote!(#[serde(default = "five")])];
        assert!(has_serde_default(&attrs));
        let attrs: Vec<Attribute> = vec![syn::parse_quote!(#[serde(rename = "default")])];
        assert!(!has_serde_default(&attrs));
    }
}
