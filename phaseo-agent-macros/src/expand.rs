//! Stage 3 (expand): the expansion of `#[tool]`. Uses: errors, doc, ast, args, valid, plain.
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
//! impl add {                                      // the function, as `add::add`
//!     async fn add(a: i64, b: i64, ctx: &ToolContext) -> Result<i64, String> { body }
//! }
//! /// The arguments of the [`add`] tool ...
//! #[derive(Deserialize, JsonSchema)]
//! pub struct AddArgs<__T0 = i64, __T1 = i64> { pub a: __T0, pub b: __T1 }
//! impl Deref for add {                              // so `add(1, 2, &ctx).await` calls the function
//!     type Target = for<'a> fn(i64, i64, &'a ToolContext) -> BoxFuture<'a, Result<i64, String>>;
//!     ...
//! }
//! impl IntoTool for add {                           // so `.tool(add)` takes it
//!     fn into_tool(self) -> Tool {
//!         trait __PhaseoCall<'__a, __T0, __T1> { type Fut: Future + Send + '__a; ... }
//!         fn __build<__T0: Arg, __T1: Arg, __F: for<'__a> __PhaseoCall<'__a, __T0, __T1>>(call: __F) -> Tool {
//!             typed_start::<AddArgs<__T0, __T1>>("add", "Add two numbers.", false, Box::new(
//!                 move |input, ctx: &ToolContext, want: bool| -> CallFuture {
//!                     let ctx = ToolContext::clone(ctx);
//!                     Box::pin(async move {
//!                         let AddArgs { a, b } = input;
//!                         produce::<i64, String>(call.__phaseo_call(a, b, <ToolContext as Context>::from_context(&ctx)).await, want)
//!                     })
//!                 }))
//!         }
//!         let _ = |a: i64, b: i64, ctx: &ToolContext| { let _ = must_be_send(add::add(a, b, ctx)); };
//!         __build::<i64, i64, _>(add::add)         // a type that is not an argument fails here, at its span
//!         // (the `must_be_send` check and this call are spanned at `add`: a future that is not
//!         // `Send` is one error, the same as `Deref`'s, which boxes through `must_be_send` too)
//!     }
//! }
//! impl ToolTypes for add {                          // so a pending call reads as `AddArgs`
//!     type Input = AddArgs;                         // (the typed input, for one)
//!     type Output = i64;                            // (`()` for none)
//!     fn id(&self) -> &str { "add" }
//!     fn tool(&self) -> Cow<'_, Tool> { Cow::Owned(IntoTool::into_tool(add)) }
//! }
//!
//! // The call's future is boxed here, in the user's crate (`Box::pin`, always inlined), and the
//! // runtime gets it as a `CallFuture`: the only code of the runtime instantiated over the
//! // future's type is `finish`'s small `poll`, in a module of its own, so an edit of one tool's
//! // body recompiles the user's own code and those polls, not the runtime's decoding code.
//! // Without reference parameters (no context, no `&str`), `__build` takes the hidden function
//! // itself.
//! // Without resources either, the call runs none of the function's code, so the runtime makes
//! // it as the arguments are parsed (`typed_start(.., true, ..)`: one allocation for the call):
//! //     typed_start::<AddArgs<..>>("add", "..", true, Box::new(move |input, _: &ToolContext, want| -> CallFuture {
//! //         let AddArgs { a, b } = input;
//! //         finish_ok::<i64, _>(call(a, b), want)     // boxed in there, always inlined
//! //     }))
//! // (`finish` when the function returns a `Result`). `finish_ok` makes a named future of the
//! // runtime's that polls the function's and serialises its output: no `async` block, so a tool
//! // adds no coroutine of its own to compile.
//! // With reference parameters (as `add` above), the `async` block owns the context and the
//! // strings, and the function's future borrows them, unboxed, through `__PhaseoCall`. A sync
//! // function is taken as a plain `fn` pointer.
//!
//! // With `#[tool(timeout_ms = 3_000, input_schema = check)]`, `into_tool` ends in builder calls:
//! let __tool = __build::<i64, i64, _>(add::add);
//! let __tool = Tool::timeout(__tool, Duration::from_millis(3_000));
//! input_schema(__tool, check)                       // the helper's bounds check `check`, at its path
//! ```

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, Item, LitStr, Type};

use crate::args::{Approval, Args};
use crate::ast::{self, Body, ItemTool, Param, Receiver, Returns, Role, ToolFn};
use crate::doc;
use crate::errors::Errors;
use crate::plain::{self, Field};
use crate::valid;

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
    let message = if matches!(item, Item::Impl(_)) {
        "`#[tool]` goes on a function: for the methods of an `impl` block, write `#[tools]` on \
         the block and `#[tool]` on each method that is a tool"
    } else {
        "`#[tool]` goes on a function, as in `async fn fetch_ticket(input: FetchTicket) -> \
         Result<Ticket, TicketError> { ... }`"
    };
    Some(syn::Error::new_spanned(keyword, message))
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

/// The parts of `__build`: its generic parameters and inputs, and what `into_tool` passes it.
#[derive(Default)]
struct Build {
    /// Items declared in `into_tool` before `__build`.
    items: Vec<TokenStream>,
    params: Vec<TokenStream>,
    inputs: Vec<TokenStream>,
    args: Vec<TokenStream>,
    turbofish: Vec<TokenStream>,
}

pub(crate) struct Expansion<'a> {
    tool: &'a ToolFn<'a>,
    args: &'a Args,
    id: LitStr,
    description: TokenStream,
    /// `::phaseo_agent::__private`, or `<crate = path>::__private`.
    private: TokenStream,
    /// The `#[cfg]`s of the function, repeated on every generated item.
    cfgs: Vec<&'a Attribute>,
    /// The function, as an associated function of the unit struct: `add::add`.
    hidden: TokenStream,
    /// The plain arguments (none for a typed input).
    fields: Vec<Field<'a>>,
    /// `DeployArgs`: the struct of the plain arguments.
    args_struct: Ident,
}

impl<'a> Expansion<'a> {
    pub(crate) fn new(
        tool: &'a ToolFn<'a>,
        args: &'a Args,
        id: &str,
        description: TokenStream,
    ) -> Self {
        Self::with_private(tool, args, id, description, None)
    }

    /// `default_crate`: the `crate = path` of a `#[tools]` block, for methods that set none.
    pub(crate) fn with_private(
        tool: &'a ToolFn<'a>,
        args: &'a Args,
        id: &str,
        description: TokenStream,
        default_crate: Option<&syn::Path>,
    ) -> Self {
        let ident = tool.ident();
        let private = match args.krate.as_ref().or(default_crate) {
            Some(path) => quote!(#path::__private),
            None => quote!(::phaseo_agent::__private),
        };
        let camel = camel_case(&ident.to_string());
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
            hidden: quote_spanned!(ident.span()=> #ident::#ident),
            fields: plain::fields(tool),
            args_struct: format_ident!("{}Args", camel, span = ident.span()),
        }
    }

    fn tokens(&self) -> TokenStream {
        let unit = self.unit_struct();
        let into_tool = self.impl_into_tool();
        let types = self.impl_tool_types();
        let args_struct = self.args_items();
        if self.args.external.is_some() {
            return quote!(#unit #args_struct #into_tool #types);
        }
        let function = self.hidden_fn();
        let deref = self.deref();
        quote!(#unit #function #args_struct #deref #into_tool #types)
    }

    /// `ToolTypes`: the input (the typed input, or the arguments struct) and the output type, so a
    /// pending call is read and answered as the tool's own types. An output the return type does
    /// not spell (a `Result` alias without arguments) is JSON.
    fn impl_tool_types(&self) -> TokenStream {
        let p = &self.private;
        let (ident, cfgs, id) = (self.tool.ident(), &self.cfgs, &self.id);
        let input = match self.tool.typed_input() {
            Some(param) => param.ty.to_token_stream(),
            None => self.args_struct.to_token_stream(),
        };
        let output = match self.tool.returns {
            Returns::Unit => quote!(()),
            Returns::Value(ty) | Returns::Result { ok: Some(ty), .. } => ty.to_token_stream(),
            Returns::Result { ok: None, .. } => quote!(#p::serde_json::Value),
        };
        quote! {
            #(#cfgs)*
            #[automatically_derived]
            #[allow(deprecated)]
            impl #p::ToolTypes for #ident {
                type Input = #input;
                type Output = #output;

                fn id(&self) -> &str {
                    #id
                }

                fn tool(&self) -> #p::Cow<'_, #p::Tool> {
                    #p::Cow::Owned(#p::IntoTool::into_tool(#ident))
                }
            }
        }
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

    /// The function as written, with its parameters' field attributes moved away, as an associated
    /// function of the unit struct (so the compiler names it as the user did: `add`, in errors
    /// about its future; `Self` is the only name that resolves differently in its body).
    fn hidden_fn(&self) -> TokenStream {
        let item = self.tool.item;
        let mut sig = item.sig.clone();
        for arg in &mut sig.inputs {
            if let FnArg::Typed(p) = arg {
                p.attrs.retain(|a| !Param::is_field_attr(a));
            }
        }
        let cfgs = &self.cfgs;
        let attrs = item.attrs.iter().filter(|a| !is_struct_attr(a));
        let Body::Block(block) = &item.body else {
            unreachable!("valid::signature rejects a non-external declaration")
        };
        let ident = self.tool.ident();
        quote! {
            #(#cfgs)*
            #[allow(deprecated)]
            impl #ident {
                #(#attrs)*
                #sig #block
            }
        }
    }

    /// For plain arguments, the struct of the arguments.
    pub(crate) fn args_items(&self) -> TokenStream {
        if self.tool.typed_input().is_some() {
            return TokenStream::new();
        }
        let (name, fields) = (&self.args_struct, &self.fields);
        plain::item(self.tool, name, fields, &self.private, &self.cfgs)
    }

    /// The input type inside `__build`: the typed input, or the generic struct over its parameters.
    fn input_type(&self) -> TokenStream {
        match self.tool.typed_input() {
            Some(param) => param.ty.to_token_stream(),
            None => plain::generic_type(&self.args_struct, &self.fields),
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
        let types = self.param_types(false, self.tool.is_async());
        if !self.tool.is_async() {
            quote!(fn(#(#types),*) -> #ret)
        } else if self.borrows() {
            quote!(for<'__a> fn(#(#types),*) -> #p::futures::future::BoxFuture<'__a, #ret>)
        } else {
            quote!(fn(#(#types),*) -> #p::futures::future::BoxFuture<'static, #ret>)
        }
    }

    /// Each parameter's type, in order: with `generic`, a plain argument's type parameter (as
    /// `__build` names it) in place of its type; with `lifetime`, references borrowing for `'__a`.
    fn param_types(&self, generic: bool, lifetime: bool) -> Vec<TokenStream> {
        self.receiver_type(lifetime)
            .into_iter()
            .chain(self.tool.params.iter().map(|param| {
                let field = self.fields.iter().find(|f| std::ptr::eq(f.param, param));
                match field.and_then(|f| f.generic.as_ref()) {
                    Some(g) if generic => g.to_token_stream(),
                    _ if lifetime => with_lifetime(param.ty),
                    _ => param.ty.to_token_stream(),
                }
            }))
            .collect()
    }

    /// A method's receiver as the first parameter of the function `__build` takes
    /// (`Helpdesk::search`): `&Helpdesk` or `Arc<Helpdesk>`.
    fn receiver_type(&self, lifetime: bool) -> Option<TokenStream> {
        let p = &self.private;
        let self_ty = self.tool.self_ty?;
        match self.tool.receiver()? {
            Receiver::Ref if lifetime => Some(quote!(&'__a #self_ty)),
            Receiver::Ref => Some(quote!(&#self_ty)),
            Receiver::Arc => Some(quote!(#p::Arc<#self_ty>)),
        }
    }

    /// The value the function's receiver is, in `__build`: the tool's shared value.
    fn receiver(&self) -> Option<Receiver> {
        self.tool.self_ty.and(self.tool.receiver())
    }

    fn borrows(&self) -> bool {
        self.receiver() == Some(Receiver::Ref)
            || self
                .tool
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
        let boxed = self.send_check(&quote!(#hidden(#(#names),*)));
        quote! {
            fn __phaseo_boxed #generics (#(#names: #types),*) -> #p::futures::future::BoxFuture<#lifetime, #ret> {
                #boxed
            }
        }
    }

    /// `future` boxed through `must_be_send`, every token at the function's name. A future that
    /// is not `Send` is reported here, once: `into_tool` makes the same check at the same span
    /// (see [`send_check_in_build`](Self::send_check_in_build)), and the compiler drops the copy.
    fn send_check(&self, future: &TokenStream) -> TokenStream {
        let p = &self.private;
        respan(quote!(#p::must_be_send(#future)), self.tool.ident().span())
    }

    /// In `into_tool` of an async function: the check of [`send_check`](Self::send_check) on a call
    /// of the function with its parameters' types, before `__build` is called at the same span, so
    /// a future that is not `Send` is one error (the same one `Deref` reports) rather than a second
    /// one that names `__build`.
    fn send_check_in_build(&self) -> TokenStream {
        if !self.tool.is_async() || self.args.external.is_some() {
            return TokenStream::new();
        }
        let types: Vec<TokenStream> = self
            .receiver_type(false)
            .into_iter()
            .chain(
                self.tool
                    .params
                    .iter()
                    .map(|param| param.ty.to_token_stream()),
            )
            .collect();
        let names: Vec<Ident> = (0..types.len())
            .map(|i| format_ident!("__arg{}", i))
            .collect();
        let function = self.function();
        let check = self.send_check(&quote!(#function(#(#names),*)));
        quote! {
            let _ = |#(#names: #types),*| {
                let _ = #check;
            };
        }
    }

    /// `IntoTool`: the runtime's typed constructor, inside `__build`, a function generic over the
    /// plain arguments' type parameters that takes the hidden function. Instantiating it is where
    /// the compiler checks the user's types, at their own spans.
    fn impl_into_tool(&self) -> TokenStream {
        let p = &self.private;
        let (ident, cfgs) = (self.tool.ident(), &self.cfgs);
        let body = self.build_tool(None);
        quote! {
            #(#cfgs)*
            #[automatically_derived]
            #[allow(deprecated)]
            impl #p::IntoTool for #ident {
                fn into_tool(self) -> #p::Tool {
                    #body
                }
            }
        }
    }

    /// The statements that build the tool, ending in the tool: `__build` and its call. For a
    /// method, `this` is the expression of the shared value (`&Arc<Self>`) its calls use.
    pub(crate) fn build_tool(&self, this: Option<&TokenStream>) -> TokenStream {
        let p = &self.private;
        let mut build = Build::default();
        if let (Some(self_ty), Some(this)) = (self.tool.self_ty, this) {
            if self.receiver().is_some() {
                build.inputs.push(quote!(__this: #p::Arc<#self_ty>));
                build.args.push(quote!(#p::Arc::clone(#this)));
            }
        }
        let function = self.function();
        for field in &self.fields {
            if let Some(g) = &field.generic {
                build.params.push(quote!(#g: #p::Arg));
                build.turbofish.push(field.concrete(p));
            }
        }
        let mut callee = quote!(__call);
        let ret = self.return_type();
        if self.args.external.is_some() {
        } else if !self.tool.is_async() {
            // Called on Tokio's blocking pool, through a plain function pointer.
            let types = self.param_types(true, false);
            build.inputs.push(quote!(__call: fn(#(#types),*) -> #ret));
            build.args.push(function.clone());
        } else if !self.borrows() {
            // No reference parameters: the hidden function itself, generic, so each call awaits its
            // future where the runtime put it, instead of a second, boxed copy (what `Deref` gives).
            let types = self.param_types(true, false);
            build.params.push(quote! {
                __F: #p::core::ops::Fn(#(#types),*) -> __Fut
                    + #p::core::marker::Copy + #p::core::marker::Send + #p::core::marker::Sync + 'static
            });
            build.params.push(quote! {
                __Fut: #p::core::future::Future<Output = #ret> + #p::core::marker::Send + 'static
            });
            if !build.turbofish.is_empty() {
                build.turbofish.extend([quote!(_), quote!(_)]);
            }
            build.inputs.push(quote!(__call: __F));
            build.args.push(function.clone());
        } else {
            // Reference parameters (the context, `&str`): `__build` takes the hidden function
            // through a trait that names its future for every lifetime of the references, so the
            // future borrows what the call's `async` block owns, unboxed.
            let generics = self.fields.iter().filter_map(|f| f.generic.as_ref());
            build.params.push(
                quote!(__F: for<'__a> __PhaseoCall<'__a, #(#generics),*> + #p::core::marker::Copy),
            );
            if !build.turbofish.is_empty() {
                build.turbofish.push(quote!(_));
            }
            build.items.push(self.call_trait());
            build.inputs.push(quote!(__call: __F));
            build.args.push(function);
            callee = quote!(__call.__phaseo_call);
        }
        let tool = self.approval(&mut build);
        let constructor = self.constructor(&callee);
        let Build {
            items,
            params,
            inputs,
            args,
            turbofish,
        } = build;
        let turbofish = (!turbofish.is_empty()).then(|| quote!(::<#(#turbofish),*>));
        let mut call = quote!(__build #turbofish);
        if self.tool.is_async() && self.args.external.is_none() {
            call = respan(call, self.tool.ident().span());
        }
        let built = self.settings(quote!(#call (#(#args),*)));
        let send_check = self.send_check_in_build();
        quote! {
            #send_check
            #(#items)*
            fn __build<#(#params),*>(#(#inputs),*) -> #p::Tool {
                let __tool = #constructor;
                #tool
            }
            #built
        }
    }

    /// The function `__build` takes: the hidden function, or the method by its path.
    fn function(&self) -> TokenStream {
        match self.tool.self_ty {
            Some(self_ty) => {
                let ident = self.tool.ident();
                quote_spanned!(ident.span()=> <#self_ty>::#ident)
            }
            None => self.hidden.clone(),
        }
    }

    /// `__PhaseoCall`: the async function's call with one lifetime for every reference parameter
    /// and the plain arguments' type parameters, its future named for each lifetime.
    fn call_trait(&self) -> TokenStream {
        let p = &self.private;
        let ret = self.return_type();
        let generics: Vec<&Ident> = self
            .fields
            .iter()
            .filter_map(|f| f.generic.as_ref())
            .collect();
        let types = self.param_types(true, true);
        let names: Vec<Ident> = (0..types.len())
            .map(|i| format_ident!("__p{}", i))
            .collect();
        let (send, sync, future) = (
            quote!(#p::core::marker::Send),
            quote!(#p::core::marker::Sync),
            quote!(#p::core::future::Future),
        );
        quote! {
            trait __PhaseoCall<'__a, #(#generics),*>: #send + #sync + 'static {
                type Fut: #future<Output = #ret> + #send + '__a;
                fn __phaseo_call(&self, #(#names: #types),*) -> Self::Fut;
            }
            impl<'__a, __F, __Fut, #(#generics),*> __PhaseoCall<'__a, #(#generics),*> for __F
            where
                __F: #p::core::ops::Fn(#(#types),*) -> __Fut + #send + #sync + 'static,
                __Fut: #future<Output = #ret> + #send + '__a,
            {
                type Fut = __Fut;
                fn __phaseo_call(&self, #(#names: #types),*) -> __Fut {
                    self(#(#names),*)
                }
            }
        }
    }

    /// The tool `built` with the settings of the keys applied, each one builder call: `built`
    /// alone, or `let __tool = built; let __tool = step(__tool); ... last(__tool)`. A function key's
    /// call goes through its `__private` helper and is spanned at the user's path, so a wrong
    /// signature is one error there.
    fn settings(&self, built: TokenStream) -> TokenStream {
        let p = &self.private;
        let args = self.args;
        let mut steps = Vec::new();
        for param in self.tool.params.iter().filter(|p| p.role == Role::Resource) {
            let ty = param.ty;
            let declare = respan(quote!(#p::declare), ty.span());
            steps.push(quote_spanned!(ty.span()=> #declare::<#ty>(__tool)));
        }
        if let Some(ms) = &args.timeout_ms {
            steps.push(quote! {
                #p::Tool::timeout(__tool, #p::core::time::Duration::from_millis(#ms))
            });
        }
        if let Some(policy) = args.on_error {
            let variant = policy.variant();
            steps.push(quote!(#p::Tool::on_error(__tool, #p::OnError::#variant)));
        }
        if args.strict.is_some() {
            steps.push(quote!(#p::Tool::strict(__tool)));
        }
        if args.exclusive.is_some() {
            steps.push(quote!(#p::Tool::exclusive(__tool)));
        }
        if let Some(max) = &args.max_output_chars {
            steps.push(quote!(#p::Tool::max_output_chars(__tool, #max)));
        }
        if let Some(title) = &args.title {
            steps.push(quote!(#p::Tool::title(__tool, #title)));
        }
        let hints = [
            (args.read_only, "read_only"),
            (args.destructive, "destructive"),
            (args.idempotent, "idempotent"),
            (args.open_world, "open_world"),
        ];
        for (_, hint) in hints.iter().filter(|(given, _)| given.is_some()) {
            let method = Ident::new(hint, Span::call_site());
            steps.push(quote!(#p::Tool::#method(__tool, true)));
        }
        if let Some(output) = self.structured_output() {
            steps.push(output);
        }
        for (hook, path) in &args.hooks {
            // The whole call at the path: the compiler's notes about it underline the path alone.
            let p = respan(p.clone(), path.span());
            let helper = Ident::new(hook.key(), path.span());
            steps.push(quote_spanned!(path.span()=> #p::#helper(__tool, #path)));
        }
        let Some(last) = steps.pop() else {
            return built;
        };
        quote! {
            let __tool = #built;
            #(let __tool = #steps;)*
            #last
        }
    }

    /// `__tool` with `require_approval` applied. A function is checked outside `__build`, in a call
    /// spanned at its path, so a wrong signature is one error at the user's path; `__build` takes it
    /// boxed.
    fn approval(&self, build: &mut Build) -> TokenStream {
        let p = &self.private;
        match &self.args.approval {
            None => quote!(__tool),
            Some(Approval::Always) => quote!(#p::Tool::require_approval(__tool)),
            Some(Approval::When(path)) => {
                let (input, concrete) = match self.tool.typed_input() {
                    Some(param) => (param.ty.to_token_stream(), param.ty.to_token_stream()),
                    None => (self.input_type(), self.args_struct.to_token_stream()),
                };
                build.inputs.push(quote!(__approve: #p::Approver<#input>));
                build
                    .args
                    .push(quote_spanned!(path.span()=> #p::approver::<#concrete, _, _>(#path)));
                quote!(#p::approval::<#input>(__tool, __approve))
            }
        }
    }

    /// The runtime constructor call; `callee` is what the closure calls: `__call`, or
    /// `__call.__phaseo_call` (through `__PhaseoCall`).
    fn constructor(&self, callee: &TokenStream) -> TokenStream {
        let p = &self.private;
        let (id, description, input) = (&self.id, &self.description, self.input_type());
        let (output, error) = self.output_and_error();
        if self.args.external.is_some() {
            return quote!(#p::external::<#input, #output>(#id, #description));
        }
        let unpack = match self.tool.typed_input() {
            Some(_) => TokenStream::new(),
            None => plain::unpack(&self.args_struct, &self.fields),
        };
        let fallible = matches!(self.tool.returns, Returns::Result { .. });
        let takes_context = self
            .tool
            .params
            .iter()
            .any(|param| matches!(param.role, Role::Context | Role::Resource));
        if !self.tool.is_async() {
            let args = self.call_args(&quote!(&__ctx));
            let mut result = quote!(#callee(#(#args),*));
            if !fallible {
                let ret = self.return_type();
                result = quote!(#p::core::result::Result::Ok::<#ret, #p::core::convert::Infallible>(#result));
            }
            return quote! {
                #p::typed_blocking::<#input, #output, #error, _>(#id, #description,
                    move |__input: #input, __ctx: #p::ToolContext| { #unpack #result })
            };
        }
        // An async function: the closure starts the call and boxes its future here, in the user's
        // crate, so that the runtime's generic code is not instantiated over the future's type
        // (whose code changes with the body), except `finish`'s small `poll`: an edit of one
        // tool's body recompiles this crate's own code, not every tool's instantiations of the
        // runtime's.
        // The function's future and its output produced when it is ready: a named future of the
        // runtime (no `async` block, no coroutine of the tool's own), whose turbofish carries the
        // output and error types at the user's spans.
        let (finish, produce) = if fallible {
            (
                quote!(#p::finish::<#output, #error, _>),
                quote!(#p::produce::<#output, #error>),
            )
        } else {
            (
                quote!(#p::finish_ok::<#output, _>),
                quote!(#p::produce_ok::<#output>),
            )
        };
        // No reference parameters and no resources: the call runs none of the function's code, so
        // it is made as the arguments are parsed (`typed_start(.., true, ..)`), in one allocation.
        let early = !self.borrows() && !takes_context;
        let ctx_param = if takes_context {
            quote!(__ctx)
        } else {
            quote!(_)
        };
        let start = if !self.borrows() {
            // Resources, if any, are taken from the context before the future starts.
            let args = self.call_args(&quote!(__ctx));
            quote! {
                move |__input: #input, #ctx_param: &#p::ToolContext, __want: bool| -> #p::CallFuture {
                    #unpack
                    #finish(#callee(#(#args),*), __want)
                }
            }
        } else {
            // The `async` block owns what the function's future borrows: the context, the strings,
            // and for a `&self` method a handle on the shared value.
            let args = self.call_args(&quote!(&__ctx));
            let this = match self.receiver() {
                Some(_) => quote!(let __this = #p::Arc::clone(&__this);),
                None => TokenStream::new(),
            };
            let ctx = if takes_context {
                quote!(let __ctx = #p::ToolContext::clone(__ctx);)
            } else {
                TokenStream::new()
            };
            quote! {
                move |__input: #input, #ctx_param: &#p::ToolContext, __want: bool| -> #p::CallFuture {
                    #this
                    #ctx
                    #p::Box::pin(async move { #unpack #produce(#callee(#(#args),*).await, __want) })
                }
            }
        };
        quote! {
            #p::typed_start::<#input>(#id, #description, #early, #p::core::option::Option::Some(#p::Box::new(#start)))
        }
    }

    /// The step that records the output type's schema when the type implements `JsonSchema`
    /// (`Tool::structured_output`), chosen by autoref specialisation on the concrete type; none
    /// for an external tool, a `()` output or one the return type does not spell.
    fn structured_output(&self) -> Option<TokenStream> {
        let p = &self.private;
        let output = match self.tool.returns {
            _ if self.args.external.is_some() => return None,
            Returns::Value(ty) | Returns::Result { ok: Some(ty), .. } => ty,
            _ => return None,
        };
        Some(quote! {{
            use #p::{StructuredOutput as _, UnstructuredOutput as _};
            (&&#p::OutputType::<#output>::new()).__phaseo_structured_output(__tool)
        }})
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

    /// The call's arguments, in the function's parameter order (a method's receiver first); `ctx`
    /// is an expression of the call's `&ToolContext`.
    fn call_args(&self, ctx: &TokenStream) -> Vec<TokenStream> {
        let p = &self.private;
        let receiver = self.receiver().map(|receiver| match receiver {
            Receiver::Ref => quote!(&*__this),
            Receiver::Arc => quote!(#p::Arc::clone(&__this)),
        });
        let params = self.tool.params.iter().enumerate().map(|(i, param)| {
            let local = format_ident!("__arg{}", i);
            match (param.role, param.ty) {
                (Role::Context, Type::Reference(r)) => {
                    let elem = &r.elem;
                    quote_spanned!(elem.span()=> <#elem as #p::Context>::from_context(#ctx))
                }
                (Role::Resource, ty) => {
                    let resource = respan(quote!(#p::Resource), ty.span());
                    quote_spanned!(ty.span()=> <#ty as #resource>::fetch(#ctx))
                }
                (Role::Input, _) => quote!(__input),
                (Role::Str, _) => quote!(#p::String::as_str(&#local)),
                _ => quote!(#local),
            }
        });
        receiver.into_iter().chain(params).collect()
    }
}

/// Attributes that go on the unit struct: docs (the name users see is the struct), `#[deprecated]`
/// and `#[cfg]` (which also goes on every other item).
fn is_struct_attr(attr: &Attribute) -> bool {
    let path = attr.path();
    path.is_ident("doc") || path.is_ident("deprecated") || path.is_ident("cfg")
}

/// `tokens` with every span set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                token =
                    TokenTree::Group(Group::new(group.delimiter(), respan(group.stream(), span)));
            }
            token.set_span(span);
            token
        })
        .collect()
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
}
