//! Stage 1 (parse): the item under `#[tool]`, and what each parameter is to the tool. Uses: doc.
//!
//! Nothing here rejects anything (that is `valid.rs`): this only reads the tokens, keeping references
//! to the user's own tokens so errors and generated code can carry their spans.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::{
    Attribute, Block, FnArg, GenericArgument, Ident, Pat, PatType, PathArguments, ReturnType,
    Signature, Token, Type, TypePath, Visibility,
};

use crate::doc;

/// A function with a body, or a declaration ending in `;` (an `external` tool).
pub(crate) struct ItemTool {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
    pub(crate) body: Body,
}

pub(crate) enum Body {
    Block(Box<Block>),
    Semi(Token![;]),
}

impl Parse for ItemTool {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        let body = if input.peek(Token![;]) {
            Body::Semi(input.parse()?)
        } else {
            Body::Block(input.parse()?)
        };
        Ok(ItemTool {
            attrs,
            vis,
            sig,
            body,
        })
    }
}

/// What a parameter is to the tool.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    /// A `&T` parameter other than `&str`: the compiler proves `T` is `ToolContext`.
    Context,
    /// The one typed input (a single parameter of a type that is not a plain std type).
    Input,
    /// A plain argument: a field of the generated arguments struct.
    Plain,
    /// A `&str` plain argument: a `String` field, passed on borrowed.
    Str,
    /// A `Res<T>` parameter: a resource of the agent, taken from the call's context.
    Resource,
}

/// One typed parameter of the function (a `self` receiver is not one).
pub(crate) struct Param<'a> {
    pub(crate) pat: &'a Pat,
    pub(crate) ty: &'a Type,
    pub(crate) attrs: &'a [Attribute],
    pub(crate) role: Role,
}

impl Param<'_> {
    /// The parameter's name, when its pattern is a plain `name` or `mut name`.
    pub(crate) fn ident(&self) -> Option<&Ident> {
        match self.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(&p.ident),
            _ => None,
        }
    }

    /// The attributes that describe a plain argument's field: doc comments, `#[serde(...)]` and
    /// `#[schemars(...)]`. They move to the generated struct (rustc rejects them on parameters).
    pub(crate) fn is_field_attr(attr: &Attribute) -> bool {
        doc::is_doc(attr) || attr.path().is_ident("serde") || attr.path().is_ident("schemars")
    }
}

/// What the function returns.
pub(crate) enum Returns<'a> {
    /// Nothing: the tool's output is `()` (JSON `null`).
    Unit,
    /// `T`: an infallible tool.
    Value(&'a Type),
    /// A type whose last path segment is `Result`: its first and second generic arguments, if written.
    Result {
        ok: Option<&'a Type>,
        err: Option<&'a Type>,
    },
}

/// The function under `#[tool]`, its parameters classified.
pub(crate) struct ToolFn<'a> {
    pub(crate) item: &'a ItemTool,
    pub(crate) params: Vec<Param<'a>>,
    pub(crate) returns: Returns<'a>,
    /// For a method of a `#[tools]` impl block: the block's self type (`None` for a free function).
    pub(crate) self_ty: Option<&'a Type>,
}

/// How a method takes its receiver.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Receiver {
    /// `&self`.
    Ref,
    /// `self: Arc<Self>`.
    Arc,
}

impl<'a> ToolFn<'a> {
    pub(crate) fn from_syn(item: &'a ItemTool) -> Self {
        let mut params: Vec<Param> = item
            .sig
            .inputs
            .iter()
            .filter_map(|arg| match arg {
                FnArg::Typed(PatType { attrs, pat, ty, .. }) => Some(Param {
                    pat,
                    ty,
                    attrs,
                    role: role_of(ty),
                }),
                FnArg::Receiver(_) => None,
            })
            .collect();
        let mut inputs = params
            .iter_mut()
            .filter(|p| !matches!(p.role, Role::Context | Role::Resource));
        if let (Some(only), None) = (inputs.next(), inputs.next()) {
            if only.role == Role::Plain && !is_plain_type(only.ty) {
                only.role = Role::Input;
            }
        }
        ToolFn {
            item,
            params,
            returns: returns_of(&item.sig.output),
            self_ty: None,
        }
    }

    /// A method of a `#[tools]` impl block for `self_ty`.
    pub(crate) fn method(item: &'a ItemTool, self_ty: &'a Type) -> Self {
        ToolFn {
            self_ty: Some(self_ty),
            ..Self::from_syn(item)
        }
    }

    /// How the function takes `self`, when it does in a form a tool accepts (`valid.rs` reports
    /// the others).
    pub(crate) fn receiver(&self) -> Option<Receiver> {
        let receiver = self.item.sig.receiver()?;
        if receiver.reference.is_some() {
            return receiver.mutability.is_none().then_some(Receiver::Ref);
        }
        receiver.colon_token?;
        is_arc_self(&receiver.ty).then_some(Receiver::Arc)
    }

    pub(crate) fn ident(&self) -> &'a Ident {
        &self.item.sig.ident
    }

    pub(crate) fn is_async(&self) -> bool {
        self.item.sig.asyncness.is_some()
    }

    /// The typed input parameter, if the tool has one (otherwise its arguments are plain).
    pub(crate) fn typed_input(&self) -> Option<&Param<'a>> {
        self.params.iter().find(|p| p.role == Role::Input)
    }
}

fn role_of(ty: &Type) -> Role {
    match ty {
        Type::Reference(r) if is_str(&r.elem) => Role::Str,
        Type::Reference(_) => Role::Context,
        Type::Path(TypePath { qself: None, path })
            if path.segments.last().is_some_and(|s| s.ident == "Res") =>
        {
            Role::Resource
        }
        _ => Role::Plain,
    }
}

/// `Arc<Self>` (by its last segment).
fn is_arc_self(ty: &Type) -> bool {
    let Type::Path(TypePath { qself: None, path }) = ty else {
        return false;
    };
    let Some(last) = path.segments.last().filter(|s| s.ident == "Arc") else {
        return false;
    };
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    matches!(
        args.args.first(),
        Some(GenericArgument::Type(Type::Path(TypePath { qself: None, path }))) if path.is_ident("Self")
    ) && args.args.len() == 1
}

fn is_str(ty: &Type) -> bool {
    matches!(ty, Type::Path(TypePath { qself: None, path }) if path.is_ident("str"))
}

/// The std types that make a single parameter a plain argument rather than the typed input. A
/// single parameter of any other type is the typed input (see the macro docs).
const PLAIN: &[&str] = &[
    "bool", "char", "str", "String", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16",
    "u32", "u64", "u128", "usize", "f32", "f64", "Option", "Vec", "VecDeque", "HashMap",
    "BTreeMap", "HashSet", "BTreeSet", "Value", "Map", "PathBuf",
];

/// Whether a type is a plain std type: see [`PLAIN`]; tuples, arrays and slices too.
pub(crate) fn is_plain_type(ty: &Type) -> bool {
    match ty {
        Type::Path(TypePath { qself: None, path }) => path
            .segments
            .last()
            .is_some_and(|s| PLAIN.contains(&&*s.ident.to_string())),
        Type::Tuple(_) | Type::Array(_) | Type::Slice(_) | Type::Reference(_) => true,
        Type::Paren(p) => is_plain_type(&p.elem),
        Type::Group(g) => is_plain_type(&g.elem),
        _ => false,
    }
}

fn returns_of(output: &ReturnType) -> Returns<'_> {
    let ReturnType::Type(_, ty) = output else {
        return Returns::Unit;
    };
    let Type::Path(TypePath { qself: None, path }) = &**ty else {
        return Returns::Value(ty);
    };
    let Some(last) = path.segments.last().filter(|s| s.ident == "Result") else {
        return Returns::Value(ty);
    };
    let mut types = match &last.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect::<Vec<_>>(),
        _ => Vec::new(),
    }
    .into_iter();
    Returns::Result {
        ok: types.next(),
        err: types.next(),
    }
}

/// The tokens of the item with the field attributes of its parameters removed (rustc rejects doc
/// comments on parameters), and without a variadic `...` (rustc rejects it outside `extern` blocks):
/// what is emitted beside the errors when the macro cannot expand.
pub(crate) fn without_param_attrs(item: &ItemTool) -> TokenStream {
    let mut sig = item.sig.clone();
    sig.variadic = None;
    for arg in &mut sig.inputs {
        if let FnArg::Typed(p) = arg {
            p.attrs.retain(|a| !Param::is_field_attr(a));
        }
    }
    let ItemTool {
        attrs, vis, body, ..
    } = item;
    let mut tokens = quote::quote!(#(#attrs)* #vis #sig);
    match body {
        Body::Block(block) => block.to_tokens(&mut tokens),
        Body::Semi(semi) => semi.to_tokens(&mut tokens),
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn roles(item: &ItemTool) -> Vec<Role> {
        ToolFn::from_syn(item)
            .params
            .iter()
            .map(|p| p.role)
            .collect()
    }

    #[test]
    fn a_single_parameter_of_a_non_std_type_is_the_typed_input() {
        let item: ItemTool = parse_quote!(
            async fn f(input: FetchTicket, ctx: &ToolContext) {}
        );
        assert_eq!(roles(&item), [Role::Input, Role::Context]);
        let item: ItemTool = parse_quote!(
            fn f(ctx: &ToolContext, input: my::Deploy) {}
        );
        assert_eq!(roles(&item), [Role::Context, Role::Input]);
    }

    #[test]
    fn std_types_and_several_parameters_are_plain() {
        let item: ItemTool = parse_quote!(
            fn f(n: i64) {}
        );
        assert_eq!(roles(&item), [Role::Plain]);
        let item: ItemTool = parse_quote!(
            fn f(names: std::vec::Vec<String>) {}
        );
        assert_eq!(roles(&item), [Role::Plain]);
        let item: ItemTool = parse_quote!(
            fn f(pair: (i64, i64)) {}
        );
        assert_eq!(roles(&item), [Role::Plain]);
        let item: ItemTool = parse_quote!(
            fn f(v: serde_json::Value, c: &ToolContext) {}
        );
        assert_eq!(roles(&item), [Role::Plain, Role::Context]);
        let item: ItemTool = parse_quote!(
            fn f(a: Deploy, b: Deploy) {}
        );
        assert_eq!(roles(&item), [Role::Plain, Role::Plain]);
        let item: ItemTool = parse_quote!(
            fn f(name: &str, c: &mut ToolContext) {}
        );
        assert_eq!(roles(&item), [Role::Str, Role::Context]);
    }

    #[test]
    fn result_returns_are_recognised_by_their_last_segment() {
        let item: ItemTool = parse_quote!(
            fn f() -> std::io::Result<u64> {}
        );
        let Returns::Result { ok, err } = ToolFn::from_syn(&item).returns else {
            panic!("not a result")
        };
        assert_eq!(ok.unwrap().to_token_stream().to_string(), "u64");
        assert!(err.is_none());
        let item: ItemTool = parse_quote!(
            fn f() -> Result<Sum, String> {}
        );
        assert!(matches!(
            ToolFn::from_syn(&item).returns,
            Returns::Result {
                ok: Some(_),
                err: Some(_)
            }
        ));
        let item: ItemTool = parse_quote!(
            fn f() -> Outcome {}
        );
        assert!(matches!(ToolFn::from_syn(&item).returns, Returns::Value(_)));
        let item: ItemTool = parse_quote!(
            fn f() {}
        );
        assert!(matches!(ToolFn::from_syn(&item).returns, Returns::Unit));
    }

    #[test]
    fn a_declaration_without_a_body_parses() {
        let item: ItemTool = parse_quote!(
            pub async fn lookup(input: Lookup) -> Ticket;
        );
        assert!(matches!(item.body, Body::Semi(_)));
    }

    #[test]
    fn parameter_field_attributes_are_removed_from_the_fallback() {
        let item: ItemTool = parse_quote! {
            /// Kept.
            fn f(/// Dropped.
                 #[serde(rename = "n")] #[allow(unused)] n: i64) {}
        };
        let tokens = without_param_attrs(&item).to_string();
        assert!(
            tokens.contains("Kept") && tokens.contains("allow"),
            "{tokens}"
        );
        assert!(
            !tokens.contains("Dropped") && !tokens.contains("serde"),
            "{tokens}"
        );
    }
}
