//! Stage 0 (shared): [`Errors`], the mistakes every stage collects, reported at once. Uses: nothing.

use proc_macro2::TokenStream;

/// Errors collected across the stages, reported together.
#[derive(Default)]
pub(crate) struct Errors(Vec<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        self.0.push(error);
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    #[cfg(test)]
    pub(crate) fn into_vec(self) -> Vec<syn::Error> {
        self.0
    }

    /// One `compile_error!` per error.
    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.0.iter().map(syn::Error::to_compile_error).collect()
    }
}
