//! Stage 2 (validate): every check the macro can make itself. Uses: errors, doc, ast, args.
//!
//! Each check is an error at the user's smallest token that says what to write. Checks that need
//! types (input traits, the context's type, the approval function's signature) are left to the
//! compiler, through the helper traits of `phaseo_agent::__private`.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{
    GenericArgument, GenericParam, Lifetime, PathArguments, ReturnType, Token, Type, TypePath,
};

use crate::args::{Args, Description};
use crate::ast::{Body, Param, Returns, Role, ToolFn};
use crate::doc;
use crate::errors::Errors;

fn error(tokens: impl ToTokens, message: &str) -> syn::Error {
    syn::Error::new_spanned(tokens, message)
}

/// The checks of the function's form: qualifiers, generics, receivers, parameters, return type,
/// body. When any fails, the macro emits the function as written instead of a tool.
pub(crate) fn signature(tool: &ToolFn, args: &Args, errors: &mut Errors) {
    let sig = &tool.item.sig;
    if let Some(t) = &sig.constness {
        errors.push(error(t, "a tool cannot be a `const fn`: remove `const`"));
    }
    if let Some(t) = &sig.unsafety {
        errors.push(error(
            t,
            "a tool cannot be an `unsafe fn`: the model calls it with any arguments; remove \
             `unsafe` and keep `unsafe` blocks inside the body",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(error(abi, "a tool cannot have an ABI: remove `extern`"));
    }
    generics(&sig.generics, errors);
    if let Some(v) = &sig.variadic {
        errors.push(error(
            v.dots,
            "a tool cannot be variadic: take a `Vec<T>` argument",
        ));
    }
    if let Some(receiver) = sig.receiver() {
        receiver_form(tool, receiver, errors);
    }
    params(tool, args, errors);
    returns(tool, args, errors);
    body(tool, args, errors);
    hints(args, errors);
}

/// A title says something, and the behaviour hints do not contradict each other.
fn hints(args: &Args, errors: &mut Errors) {
    if let Some(title) = args.title.as_ref().filter(|t| t.value().trim().is_empty()) {
        errors.push(error(
            title,
            "the title is empty: write a title for people, as in `title = \"Deploy an \
             environment\"`, or leave `title` out",
        ));
    }
    if let (Some(_), Some(destructive)) = (args.read_only, args.destructive) {
        errors.push(syn::Error::new(
            destructive,
            "a `read_only` tool changes nothing, so it cannot be `destructive`: remove one of the two",
        ));
    }
}

/// A method takes `&self` or `self: Arc<Self>`, and only in a `#[tools]` impl block.
fn receiver_form(tool: &ToolFn, receiver: &syn::Receiver, errors: &mut Errors) {
    if tool.self_ty.is_none() {
        errors.push(error(
            receiver.self_token,
            "`#[tool]` on a method needs `#[tools]` on its `impl` block: write `#[tools]` above \
             `impl ...` (with `use phaseo_agent::tools;`), and give the value to the agent with \
             `.tools(value)`",
        ));
        return;
    }
    if tool.receiver().is_some() {
        return;
    }
    let message = if receiver.mutability.is_some() && receiver.reference.is_some() {
        "a tool's calls may run at the same time, so a tool method cannot take `&mut self`: take \
         `&self`, and put what changes behind a lock (`Mutex`, `RwLock`) or an atomic"
    } else {
        "a tool method takes `&self` (or `self: Arc<Self>` to keep the value past the call): the \
         agent holds one value and lends it to every call"
    };
    let tokens: &dyn ToTokens = match (&receiver.reference, &receiver.mutability) {
        (Some(_), Some(m)) => m,
        _ => receiver,
    };
    errors.push(error(tokens, message));
}

fn generics(generics: &syn::Generics, errors: &mut Errors) {
    for param in &generics.params {
        errors.push(match param {
            GenericParam::Type(t) => error(
                &t.ident,
                "a tool cannot be generic: its input and output types must be concrete",
            ),
            GenericParam::Lifetime(l) => error(
                &l.lifetime,
                "a tool cannot have lifetime parameters: take owned arguments (`String`, not \
                 `&'a str`) and `&ToolContext` without a lifetime",
            ),
            GenericParam::Const(c) => error(
                &c.ident,
                "a tool cannot have const parameters: its input and output types must be concrete",
            ),
        });
    }
    if let Some(w) = &generics.where_clause {
        errors.push(error(
            w.where_token,
            "a tool cannot have a `where` clause: its input and output types must be concrete",
        ));
    }
}

fn params(tool: &ToolFn, args: &Args, errors: &mut Errors) {
    let mut seen_context = false;
    for param in &tool.params {
        if let Some(imp) = find_impl_trait(param.ty) {
            errors.push(error(
                imp,
                "a tool argument cannot be `impl Trait`: name a concrete type",
            ));
            continue;
        }
        match param.role {
            Role::Context => {
                context(param, seen_context, args, errors);
                seen_context = true;
            }
            Role::Str => str_param(param, errors),
            Role::Plain => {
                named(param, errors);
                owned(param.ty, errors);
            }
            Role::Input => owned(param.ty, errors),
            Role::Resource => {
                if args.external.is_some() {
                    errors.push(error(
                        param.ty,
                        "an `external` tool has no resources: it does not run in this process, \
                         so remove this parameter",
                    ));
                }
            }
        }
        if matches!(param.role, Role::Context | Role::Input | Role::Resource) {
            stray_attrs(param, errors);
        }
    }
}

fn context(param: &Param, seen_context: bool, args: &Args, errors: &mut Errors) {
    let Type::Reference(r) = param.ty else {
        return;
    };
    if let Some(message) = borrowed_argument(&r.elem) {
        errors.push(error(param.ty, &message));
        return;
    }
    if seen_context {
        errors.push(error(
            param.ty,
            "a tool takes at most one context parameter: remove this one",
        ));
    }
    if args.external.is_some() {
        errors.push(error(
            param.ty,
            "an `external` tool has no context parameter: its output comes from outside the \
             process, so remove this parameter",
        ));
    }
    if let Some(m) = &r.mutability {
        errors.push(error(
            m,
            "the context is shared: write `&ToolContext`, not `&mut ToolContext`",
        ));
    }
    if let Some(l) = &r.lifetime {
        errors.push(error(l, "remove the lifetime: write `&ToolContext`"));
    }
}

/// The error for a reference parameter that is plainly a borrowed argument, not the context:
/// `&[T]`, `&String`, `&Vec<T>`, `&i64`, ... (what to take instead).
fn borrowed_argument(elem: &Type) -> Option<String> {
    let owned = match elem {
        Type::Slice(s) => format!("Vec<{}>", tokens(&s.elem)),
        Type::Path(TypePath { qself: None, path }) if path.is_ident("String") => {
            return Some(
                "a tool's arguments are decoded from the model's JSON, so they cannot be borrowed \
                 (`&str` is the one exception): take `String`, or `&str`"
                    .to_owned(),
            );
        }
        ty if crate::ast::is_plain_type(ty) => tokens(ty),
        Type::Path(TypePath { qself: None, path })
            if path.segments.last().is_some_and(|s| s.ident == "Res") =>
        {
            return Some(
                "a resource is taken by value: write `Res<T>`, not `&Res<T>` (it is one `Arc`)"
                    .to_owned(),
            );
        }
        _ => return None,
    };
    Some(format!(
        "a tool's arguments are decoded from the model's JSON, so they cannot be borrowed (`&str` \
         is the one exception): take `{owned}`"
    ))
}

fn tokens(ty: &Type) -> String {
    let text = ty.to_token_stream().to_string();
    // `Vec < String >` → `Vec<String>`.
    text.replace(" < ", "<")
        .replace(" >", ">")
        .replace("< ", "<")
        .replace(" ,", ",")
        .replace(" :: ", "::")
}

fn str_param(param: &Param, errors: &mut Errors) {
    named(param, errors);
    let Type::Reference(r) = param.ty else {
        return;
    };
    if let Some(m) = &r.mutability {
        errors.push(error(m, "write `&str`, not `&mut str`"));
    }
    if let Some(l) = &r.lifetime {
        errors.push(error(
            l,
            "remove the lifetime: write `&str` (the argument is decoded into a `String` and lent)",
        ));
    }
}

/// A plain argument becomes a field: it needs a name.
fn named(param: &Param, errors: &mut Errors) {
    if param.ident().is_none() {
        errors.push(error(
            param.pat,
            "a plain argument needs a name, as in `environment: String`: the name is its property \
             in the tool's arguments",
        ));
    }
}

/// Arguments are decoded from the model's JSON, so they own their data.
fn owned(ty: &Type, errors: &mut Errors) {
    if let Some(l) = find_lifetime(ty) {
        errors.push(error(
            l,
            "a tool argument must own its data: remove the lifetime and use an owned type \
             (`String`, not `Cow<'a, str>`)",
        ));
    }
}

/// Doc comments and serde or schemars attributes describe plain arguments only.
fn stray_attrs(param: &Param, errors: &mut Errors) {
    for attr in param.attrs.iter().filter(|a| Param::is_field_attr(a)) {
        let message = if param.role == Role::Context {
            "the context parameter is not an argument the model sees: remove this attribute"
        } else if param.role == Role::Resource {
            "a resource is not an argument the model sees: remove this attribute"
        } else {
            "this attribute applies to plain arguments only: put it on the fields of the input type"
        };
        errors.push(error(attr, message));
    }
}

fn returns(tool: &ToolFn, args: &Args, errors: &mut Errors) {
    let ReturnType::Type(_, ty) = &tool.item.sig.output else {
        return;
    };
    if let Some(imp) = find_impl_trait(ty) {
        errors.push(error(
            imp,
            "a tool must return a concrete type, as in `-> Result<Ticket, TicketError>`",
        ));
    } else if let Some(r) = borrowed_output(ty) {
        errors.push(error(
            r.and_token,
            "a tool's output must be owned: return an owned type (`String`, not `&str`) or a \
             `&'static` one",
        ));
    } else if let Some(l) = find_lifetime(ty) {
        errors.push(error(
            l,
            "a tool's output must own its data: remove the lifetime",
        ));
    } else if args.external.is_some() && matches!(tool.returns, Returns::Result { .. }) {
        errors.push(error(
            ty,
            "an `external` tool returns its output type, not a `Result`: the output comes from \
             outside the process",
        ));
    }
}

/// A returned reference that is not `&'static`.
fn borrowed_output(ty: &Type) -> Option<&syn::TypeReference> {
    match ty {
        Type::Reference(r) if r.lifetime.as_ref().is_none_or(|l| l.ident != "static") => Some(r),
        _ => None,
    }
}

fn body(tool: &ToolFn, args: &Args, errors: &mut Errors) {
    match (&tool.item.body, args.external) {
        (Body::Block(block), Some(_)) => errors.push(syn::Error::new(
            block.brace_token.span.open(),
            "an `external` tool has no body: its output comes from outside the process; end the \
             declaration with `;`",
        )),
        (Body::Semi(semi), None) => errors.push(error(
            semi,
            "this function has no body: write one, or mark a declaration `#[tool(external)]` if \
             its output comes from outside the process",
        )),
        _ => {}
    }
}

/// The tool id: `id = "..."`, or the function's name. Checked like the runtime checks it.
pub(crate) fn id(tool: &ToolFn, args: &Args, errors: &mut Errors) -> String {
    if let Some(lit) = &args.id {
        let id = lit.value();
        if !is_valid_id(&id) {
            errors.push(error(
                lit,
                &format!(
                    "tool id `{id}` is invalid: write 1 to 64 characters of a-z, A-Z, 0-9, `_` \
                     or `-`"
                ),
            ));
        }
        return id;
    }
    let name = tool.ident().to_string();
    let name = name.strip_prefix("r#").unwrap_or(&name).to_owned();
    if !is_valid_id(&name) {
        errors.push(error(
            tool.ident(),
            &format!(
                "the function name `{name}` is not a valid tool id (1 to 64 characters of a-z, \
                 A-Z, 0-9, `_` or `-`): set one with `#[tool(id = \"...\")]`"
            ),
        ));
    }
    name
}

/// `^[a-zA-Z0-9_-]{1,64}$`, the ids providers accept.
pub(crate) fn is_valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The description expression: `description = ...`, or the doc comment. A tool with neither is an
/// error at the function's name: the model chooses tools by their description.
pub(crate) fn description(tool: &ToolFn, args: &Args, errors: &mut Errors) -> TokenStream {
    match &args.description {
        Some(Description::Lit(lit)) => {
            if lit.value().trim().is_empty() {
                errors.push(error(
                    lit,
                    "the description is empty: say what the tool does; the model chooses tools \
                     by their description",
                ));
            }
            lit.to_token_stream()
        }
        Some(Description::Macro(mac)) => mac.to_token_stream(),
        // Written with a bad value: already reported.
        None if args.given("description") => quote!(""),
        None => match doc::text(&tool.item.attrs) {
            Ok(Some(text)) => quote!(#text),
            Ok(None) => {
                errors.push(error(
                    tool.ident(),
                    "this tool has no description: add a `///` doc comment saying what it does, \
                     or `#[tool(description = \"...\")]`; the model chooses tools by their \
                     description",
                ));
                quote!("")
            }
            Err(e) => {
                errors.push(e);
                quote!("")
            }
        },
    }
}

/// The first `impl Trait` in a type, looking through references, tuples, arrays and generic
/// arguments.
fn find_impl_trait(ty: &Type) -> Option<&Token![impl]> {
    match ty {
        Type::ImplTrait(t) => Some(&t.impl_token),
        _ => inner_types(ty).iter().find_map(|t| find_impl_trait(t)),
    }
}

/// The first lifetime written in a type, other than `'static`.
fn find_lifetime(ty: &Type) -> Option<&Lifetime> {
    let own = match ty {
        Type::Reference(r) => r.lifetime.as_ref(),
        Type::Path(p) => p.path.segments.iter().find_map(|s| match &s.arguments {
            PathArguments::AngleBracketed(a) => a.args.iter().find_map(|arg| match arg {
                GenericArgument::Lifetime(l) => Some(l),
                _ => None,
            }),
            _ => None,
        }),
        _ => None,
    };
    own.filter(|l| l.ident != "static")
        .or_else(|| inner_types(ty).into_iter().find_map(find_lifetime))
}

fn inner_types(ty: &Type) -> Vec<&Type> {
    match ty {
        Type::Reference(r) => vec![&*r.elem],
        Type::Paren(p) => vec![&*p.elem],
        Type::Group(g) => vec![&*g.elem],
        Type::Slice(s) => vec![&*s.elem],
        Type::Array(a) => vec![&*a.elem],
        Type::Tuple(t) => t.elems.iter().collect(),
        Type::Path(p) => p
            .path
            .segments
            .iter()
            .flat_map(|s| match &s.arguments {
                PathArguments::AngleBracketed(a) => a
                    .args
                    .iter()
                    .filter_map(|arg| match arg {
                        GenericArgument::Type(t) => Some(t),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::ItemTool;
    use syn::parse_quote;

    fn check(item: ItemTool, args: TokenStream) -> Vec<String> {
        let mut errors = Errors::default();
        let args = Args::parse(args, &mut errors);
        let tool = ToolFn::from_syn(&item);
        signature(&tool, &args, &mut errors);
        id(&tool, &args, &mut errors);
        description(&tool, &args, &mut errors);
        errors.into_vec().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_blank_title_and_read_only_with_destructive_are_refused() {
        let item: ItemTool = parse_quote! {
            /// Ship.
            fn ship() {}
        };
        let errors = check(item, quote!(title = " ", read_only, destructive));
        assert_eq!(
            errors,
            [
                "the title is empty: write a title for people, as in `title = \"Deploy an \
                 environment\"`, or leave `title` out",
                "a `read_only` tool changes nothing, so it cannot be `destructive`: remove one of the two",
            ]
        );
    }

    #[test]
    fn ids() {
        assert!(is_valid_id("fetch-ticket_2"));
        assert!(is_valid_id(&"a".repeat(64)));
        assert!(!is_valid_id(&"a".repeat(65)));
        assert!(!is_valid_id(""));
        assert!(!is_valid_id("fetch ticket"));
        assert!(!is_valid_id("café"));
    }

    #[test]
    fn a_documented_function_passes() {
        let item = parse_quote! {
            /// Add two numbers.
            async fn add(a: i64, b: i64, ctx: &ToolContext) -> Result<i64, String> { Ok(a + b) }
        };
        assert_eq!(check(item, quote!()), Vec::<String>::new());
    }

    #[test]
    fn several_mistakes_are_all_reported() {
        let item = parse_quote! {
            const unsafe fn f<'a, T>((a, b): (i64, i64), x: impl Display, c: &mut ToolContext) -> &'a str {}
        };
        let errors = check(item, quote!(description = "d"));
        assert_eq!(errors.len(), 8, "{errors:#?}");
        assert!(errors[0].contains("`const fn`"));
        assert!(errors[2].contains("lifetime parameters"));
        assert!(errors[3].contains("cannot be generic"));
        assert!(errors[4].contains("needs a name"));
        assert!(errors[5].contains("`impl Trait`"));
        assert!(errors[6].contains("`&mut ToolContext`"));
        assert!(errors[7].contains("must be owned"));
    }

    #[test]
    fn missing_description_and_bad_default_id() {
        let item = parse_quote!(
            fn café() {}
        );
        let errors = check(item, quote!());
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors[0].contains("not a valid tool id"));
        assert!(errors[1].contains("has no description"));
    }

    #[test]
    fn external_declarations() {
        let item = parse_quote!(
            fn lookup(input: Lookup, ctx: &ToolContext) -> Result<Ticket, E>;
        );
        let errors = check(item, quote!(external, description = "Look up"));
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors[0].contains("no context parameter"));
        assert!(errors[1].contains("not a `Result`"));
        let item = parse_quote!(
            fn lookup(input: Lookup) -> Ticket {
                todo()
            }
        );
        let errors = check(item, quote!(external, description = "Look up"));
        assert_eq!(
            errors,
            [
                "an `external` tool has no body: its output comes from outside the process; end the declaration with `;`"
            ]
        );
        let item = parse_quote!(
            fn lookup(input: Lookup) -> Ticket;
        );
        let errors = check(item, quote!(description = "Look up"));
        assert!(errors[0].contains("has no body"), "{errors:#?}");
    }

    #[test]
    fn lifetimes_in_arguments() {
        let item = parse_quote!(
            fn f(name: &'static str, c: Cow<'a, str>, ok: Cow<'static, str>) {}
        );
        let errors = check(item, quote!(description = "d"));
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors[0].contains("write `&str`"));
        assert!(errors[1].contains("own its data"));
    }
}
