//! The layering of both crates (ARCHITECTURE.md): a module uses only the modules declared before it
//! in its parent (`lib.rs`, or a folder's `mod.rs`) and its own submodules. The order of `mod`
//! declarations is the order of the stages, lowest first, so no stage imports a later one and no two
//! modules import each other.
//!
//! Every path that names a module of the crate counts: `use` items (anywhere, nested groups
//! included) and paths in code (`crate::tool::invoke::cap(..)`, `super::shape::Shape`, a child
//! module named without `self::`). A module never imports from one of its ancestors: what it needs
//! is imported from the module that defines it, so a parent's re-exports (which are for users) cannot
//! hide an import from a later stage. `#[cfg(test)]` modules may use their ancestors (`use super::*`).
//! Paths inside macro invocations are not seen (they are tokens until expanded).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One module of a crate: where its items are, and where it stands among its siblings.
struct Module {
    /// The file that holds its items (an inline module shares its parent's file).
    file: PathBuf,
    /// Its position among the `mod` declarations of its parent.
    rank: usize,
    /// `#[cfg(test)]` on it or on a module around it.
    test: bool,
    /// Its submodules, by name.
    children: Vec<String>,
    /// The crate paths its items name, with the line of each.
    paths: Vec<(Vec<String>, usize)>,
}

type ModPath = Vec<String>;

/// A crate's source files, by path relative to `src/`.
type Files = BTreeMap<PathBuf, String>;

/// Reads every `.rs` file under a crate's `src/`.
fn read_crate(crate_dir: &str) -> Files {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join(crate_dir)
        .join("src");
    let mut files = Files::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder can be read") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file can be read");
                let relative = path.strip_prefix(&src).expect("under src").to_path_buf();
                files.insert(relative, text);
            }
        }
    }
    files
}

/// Every layering violation of a crate (empty when it is layered), as readable lines.
fn check(files: &Files) -> Vec<String> {
    let (modules, mut errors) = modules(files);
    for file in files.keys() {
        if !modules.values().any(|m: &Module| &m.file == file) {
            errors.push(format!(
                "{}: not declared as a module anywhere (dead code, or a missing `mod`)",
                file.display()
            ));
        }
    }
    for (name, module) in &modules {
        for (path, line) in &module.paths {
            if let Some(target) = resolve(&modules, name, path) {
                if let Err(why) = allowed(&modules, name, &target) {
                    errors.push(format!(
                        "{}:{line}: `{}` uses `crate::{}`: {why}",
                        module.file.display(),
                        show(name),
                        path_text(&modules, name, path)
                    ));
                }
            }
        }
    }
    errors
}

/// Every module of a crate, by path, and the errors met while reading them.
fn modules(files: &Files) -> (BTreeMap<ModPath, Module>, Vec<String>) {
    let mut modules = BTreeMap::new();
    let mut errors = Vec::new();
    load(
        files,
        Path::new("lib.rs"),
        Vec::new(),
        0,
        false,
        &mut modules,
        &mut errors,
    );
    (modules, errors)
}

/// Parses the file of module `name` and registers it and its submodules.
fn load(
    files: &Files,
    file: &Path,
    name: ModPath,
    rank: usize,
    test: bool,
    modules: &mut BTreeMap<ModPath, Module>,
    errors: &mut Vec<String>,
) {
    let Some(text) = files.get(file) else {
        errors.push(format!(
            "{}: declared as a module, but missing",
            file.display()
        ));
        return;
    };
    let parsed = syn::parse_file(text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let owns_folder = file
        .file_name()
        .is_some_and(|f| f == "lib.rs" || f == "mod.rs");
    let folder = if owns_folder {
        file.parent().unwrap_or(Path::new("")).to_path_buf()
    } else {
        file.with_extension("")
    };
    add_module(
        files,
        file,
        &folder,
        &parsed.items,
        name,
        rank,
        test,
        modules,
        errors,
    );
}

#[allow(clippy::too_many_arguments)]
fn add_module(
    files: &Files,
    file: &Path,
    folder: &Path,
    items: &[syn::Item],
    name: ModPath,
    rank: usize,
    test: bool,
    modules: &mut BTreeMap<ModPath, Module>,
    errors: &mut Vec<String>,
) {
    let mut collector = Collector::default();
    for item in items {
        collector.visit_item(item);
    }
    let submodules: Vec<&syn::ItemMod> = items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) => Some(m),
            _ => None,
        })
        .collect();
    modules.insert(
        name.clone(),
        Module {
            file: file.to_path_buf(),
            rank,
            test,
            children: submodules.iter().map(|m| m.ident.to_string()).collect(),
            paths: collector.paths,
        },
    );
    for (child_rank, m) in submodules.into_iter().enumerate() {
        let child_test = test || is_cfg_test(&m.attrs);
        let mut child = name.clone();
        child.push(m.ident.to_string());
        if m.attrs.iter().any(|a| a.path().is_ident("path")) {
            errors.push(format!(
                "{}: `#[path]` on `mod {}`: use the default layout",
                file.display(),
                m.ident
            ));
            continue;
        }
        match &m.content {
            Some((_, inner)) => {
                let inner_folder = folder.join(m.ident.to_string());
                add_module(
                    files,
                    file,
                    &inner_folder,
                    inner,
                    child,
                    child_rank,
                    child_test,
                    modules,
                    errors,
                );
            }
            None => {
                let flat = folder.join(format!("{}.rs", m.ident));
                let nested = folder.join(m.ident.to_string()).join("mod.rs");
                let path = if files.contains_key(&flat) {
                    flat
                } else {
                    nested
                };
                load(files, &path, child, child_rank, child_test, modules, errors);
            }
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// Collects the paths a module's own items name, without entering its inline submodules (they are
/// modules of their own).
#[derive(Default)]
struct Collector {
    paths: Vec<(Vec<String>, usize)>,
}

impl Collector {
    fn add(&mut self, segments: Vec<String>, line: usize) {
        if !segments.is_empty() {
            self.paths.push((segments, line));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, &r.ident),
            syn::UseTree::Glob(_) => self.add(prefix.clone(), 0),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn use_leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut path = prefix.to_vec();
        // `use crate::decode::{self, ToolInput}`: `self` names the module itself.
        if ident != "self" {
            path.push(ident.to_string());
        }
        self.add(path, ident.span().start().line);
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    // `pub(crate)` and `pub(super)` name modules but import nothing.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path
                .segments
                .first()
                .map_or(0, |s| s.ident.span().start().line);
            self.add(segments, line);
        }
        syn::visit::visit_path(self, path);
    }
}

/// The module a path names (the longest prefix that is a module), if it names one of the crate's.
fn resolve(
    modules: &BTreeMap<ModPath, Module>,
    from: &ModPath,
    path: &[String],
) -> Option<ModPath> {
    let (mut at, rest): (ModPath, &[String]) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (from.clone(), &path[1..]),
        "super" => {
            let mut at = from.clone();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                at.pop();
                rest = &rest[1..];
            }
            (at, rest)
        }
        // A child module named without `self::` (2018 paths).
        first if modules[from].children.iter().any(|c| c == first) => (from.clone(), path),
        _ => return None,
    };
    for segment in rest {
        at.push(segment.clone());
        if !modules.contains_key(&at) {
            at.pop();
            break;
        }
    }
    Some(at)
}

/// Whether module `from` may use module `target`; the reason when not.
fn allowed(
    modules: &BTreeMap<ModPath, Module>,
    from: &ModPath,
    target: &ModPath,
) -> Result<(), String> {
    if target == from || target.starts_with(from) {
        return Ok(()); // itself, or its own submodules
    }
    if from.starts_with(target) {
        if modules[from].test {
            return Ok(());
        }
        return Err(format!(
            "`{}` is an ancestor of this module: import from the module that defines the item \
             (re-exports are for users, and would hide which stage it comes from)",
            show(target)
        ));
    }
    let common = from.iter().zip(target).take_while(|(a, b)| a == b).count();
    let mine = &modules[&from[..=common]];
    let theirs = &modules[&target[..=common]];
    if theirs.rank < mine.rank {
        return Ok(());
    }
    Err(format!(
        "`{}` is declared after `{}` in `{}`, so it is a later stage: move what both need into a \
         lower module, or move this code up",
        show(&target[..=common]),
        show(&from[..=common]),
        show(&from[..common]),
    ))
}

fn show(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

fn path_text(modules: &BTreeMap<ModPath, Module>, from: &ModPath, path: &[String]) -> String {
    let target = resolve(modules, from, path).unwrap_or_default();
    let rest = path
        .iter()
        .skip_while(|s| *s == "crate" || *s == "self" || *s == "super");
    let item: Vec<&String> = rest.skip_while(|s| target.contains(s)).collect();
    let mut full: Vec<&str> = target.iter().map(String::as_str).collect();
    full.extend(item.iter().map(|s| s.as_str()));
    full.join("::")
}

#[test]
fn the_runtime_imports_run_from_later_stages_to_earlier_ones_only() {
    let errors = check(&read_crate("phaseo-agent"));
    assert!(
        errors.is_empty(),
        "layering violations:\n{}",
        errors.join("\n")
    );
}

#[test]
fn the_macro_crate_imports_run_from_later_stages_to_earlier_ones_only() {
    let errors = check(&read_crate("phaseo-agent-macros"));
    assert!(
        errors.is_empty(),
        "layering violations:\n{}",
        errors.join("\n")
    );
}

/// The stages `lib.rs` declares, in order.
fn declared_stages() -> Vec<String> {
    let lib = &read_crate("phaseo-agent")[Path::new("lib.rs")];
    let parsed = syn::parse_file(lib).expect("lib.rs parses");
    parsed
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

/// ARCHITECTURE.md, read from the repository root.
fn architecture_page() -> String {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../ARCHITECTURE.md"));
    std::fs::read_to_string(path).expect("ARCHITECTURE.md is readable")
}

/// The section of `page` under the heading `## title`, up to the next `## ` heading.
fn section<'a>(page: &'a str, title: &str) -> &'a str {
    let start = page
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section `## {title}`"));
    let rest = &page[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

#[test]
fn the_runtime_has_the_stages_the_architecture_names() {
    // The first column of the stage table: `limits.rs`, `error.rs`, `model/`, ...
    let page = architecture_page();
    let documented: Vec<String> = section(&page, "Bird's eye view")
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(|stage| {
            stage
                .trim_end_matches(".rs")
                .trim_end_matches('/')
                .to_string()
        })
        .collect();
    assert_eq!(
        declared_stages(),
        documented,
        "lib.rs declares these stages, in this order; ARCHITECTURE.md's table must list the same"
    );
}

/// The rows of the stage table: each stage and the stages its "may use" cell names (`None` for
/// "everything below").
fn documented_uses() -> Vec<(String, Option<BTreeSet<String>>)> {
    let page = architecture_page();
    section(&page, "Bird's eye view")
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let stage = cells[0].split('`').next().unwrap_or_default();
            let stage = stage.trim_end_matches(".rs").trim_end_matches('/');
            let may_use = cells.last().unwrap_or(&"").trim_end_matches('|').trim();
            let uses = (!may_use.starts_with("everything below")).then(|| {
                may_use
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(|name| {
                        name.trim_end_matches(".rs")
                            .trim_end_matches('/')
                            .to_string()
                    })
                    .collect()
            });
            (stage.to_string(), uses)
        })
        .collect()
}

#[test]
fn each_stage_uses_only_the_stages_the_architecture_allows_it() {
    // The order of `mod` declarations says what a stage may not use (anything later); the
    // table's "may use" column says more where it lists stages: the run stores, for one, know
    // rows and errors, not runs, so `store/` naming `run` is refused here although `run` is
    // declared before it.
    let (modules, _) = modules(&read_crate("phaseo-agent"));
    let mut errors = Vec::new();
    for (stage, uses) in documented_uses() {
        let Some(uses) = uses else { continue };
        for (name, module) in modules
            .iter()
            .filter(|(name, _)| name.first() == Some(&stage))
        {
            if module.test {
                continue;
            }
            for (path, line) in &module.paths {
                let Some(target) = resolve(&modules, name, path) else {
                    continue;
                };
                let Some(top) = target.first() else { continue };
                if *top != stage && !uses.contains(top) {
                    errors.push(format!(
                        "{}:{line}: `{stage}` uses `{top}`, which ARCHITECTURE.md's table does not \
                         allow (it may use {uses:?})",
                        module.file.display()
                    ));
                }
            }
        }
    }
    errors.dedup();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn the_durable_layer_has_its_rooms_in_order() {
    // Drivers, then what their rows mean, then the processes that serve queued runs, then the
    // people's pages: each room builds on the one before and never reaches up.
    let stages = declared_stages();
    let at = |name: &str| {
        stages
            .iter()
            .position(|s| s == name)
            .unwrap_or_else(|| panic!("lib.rs declares no `{name}` stage"))
    };
    assert!(at("run") < at("store"));
    assert!(at("store") < at("durable"));
    assert!(at("durable") < at("worker"));
    assert!(at("worker") < at("inbox"));
}

/// The public methods of `ty` (in its inherent `impl` blocks under the folder `dir`), each with
/// the name of the type it returns (the last segment of its path), if it returns a path.
fn methods_of(ty: &str, dir: &str) -> BTreeMap<String, Option<String>> {
    let files = read_crate("phaseo-agent");
    let mut methods = BTreeMap::new();
    for (path, text) in &files {
        if !path.starts_with(dir) {
            continue;
        }
        let parsed = syn::parse_file(text).expect("a runtime file parses");
        for item in parsed.items {
            let syn::Item::Impl(block) = item else {
                continue;
            };
            let syn::Type::Path(self_ty) = &*block.self_ty else {
                continue;
            };
            if block.trait_.is_some() || !self_ty.path.is_ident(ty) {
                continue;
            }
            for item in block.items {
                if let syn::ImplItem::Fn(f) = item
                    && matches!(f.vis, syn::Visibility::Public(_))
                {
                    let returns = match &f.sig.output {
                        syn::ReturnType::Type(_, out) => match &**out {
                            syn::Type::Path(p) => {
                                p.path.segments.last().map(|s| s.ident.to_string())
                            }
                            _ => None,
                        },
                        syn::ReturnType::Default => None,
                    };
                    methods.insert(f.sig.ident.to_string(), returns);
                }
            }
        }
    }
    methods
}

/// The `Type::method`s that ARCHITECTURE.md's entry points name, for `ty`.
fn named_entry_points(ty: &str) -> BTreeSet<String> {
    let page = architecture_page();
    section(&page, "Entry points")
        .split(&format!("`{ty}::"))
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn every_entry_point_of_agent_is_in_the_architecture_and_exists() {
    let named = named_entry_points("Agent");
    let methods: BTreeSet<String> = methods_of("Agent", "run").into_keys().collect();
    assert!(
        methods.contains("run") && methods.contains("builder"),
        "{methods:?}"
    );
    let undocumented: Vec<_> = methods.difference(&named).collect();
    let gone: Vec<_> = named.difference(&methods).collect();
    assert!(
        undocumented.is_empty() && gone.is_empty(),
        "ARCHITECTURE.md's entry points do not match `Agent`: not named there: {undocumented:?}; \
         named there but not methods of `Agent`: {gone:?}"
    );
}

/// The types with a public `stream` method, and those that implement `IntoFuture` (by hand or
/// through a local `into_future!` macro), anywhere in the runtime.
fn requests() -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut streamed, mut awaited) = (BTreeSet::new(), BTreeSet::new());
    for text in read_crate("phaseo-agent").values() {
        let parsed = syn::parse_file(text).expect("a runtime file parses");
        for item in parsed.items {
            match item {
                syn::Item::Impl(block) => {
                    let syn::Type::Path(ty) = &*block.self_ty else {
                        continue;
                    };
                    let Some(name) = ty.path.segments.last().map(|s| s.ident.to_string()) else {
                        continue;
                    };
                    match &block.trait_ {
                        Some((_, path, _)) if path.is_ident("IntoFuture") => {
                            awaited.insert(name);
                        }
                        Some(_) => {}
                        None => {
                            let streams = block.items.iter().any(|item| {
                                matches!(item, syn::ImplItem::Fn(f)
                                    if f.sig.ident == "stream"
                                        && matches!(f.vis, syn::Visibility::Public(_)))
                            });
                            if streams {
                                streamed.insert(name);
                            }
                        }
                    }
                }
                syn::Item::Macro(call) if call.mac.path.is_ident("into_future") => {
                    for token in call.mac.tokens.clone() {
                        if let proc_macro2::TokenTree::Ident(ident) = token {
                            awaited.insert(ident.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
    }
    (streamed, awaited)
}

#[test]
fn every_verb_of_durable_agent_is_in_the_architecture_and_returns_a_request() {
    let named = named_entry_points("DurableAgent");
    let methods = methods_of("DurableAgent", "durable");
    let names: BTreeSet<String> = methods.keys().cloned().collect();
    let undocumented: Vec<_> = names.difference(&named).collect();
    let gone: Vec<_> = named.difference(&names).collect();
    assert!(
        undocumented.is_empty() && gone.is_empty(),
        "ARCHITECTURE.md's entry points do not match `DurableAgent`: not named there: \
         {undocumented:?}; named there but not methods of `DurableAgent`: {gone:?}"
    );
    let (streamed, awaited) = requests();
    let verbs = ["run", "resume", "retry", "recover"];
    for verb in verbs {
        let returns = methods.get(verb).cloned().flatten();
        let Some(request) = returns else {
            panic!("`DurableAgent::{verb}` returns no request: {methods:?}");
        };
        assert!(
            streamed.contains(&request) && awaited.contains(&request),
            "`DurableAgent::{verb}` returns `{request}`, which is not a request: awaited \
             {awaited:?}, streamed {streamed:?}"
        );
    }
    // Every other public method is an accessor, not a verb taking arguments in place of settings.
    for (name, returns) in &methods {
        if !verbs.contains(&name.as_str()) {
            assert!(
                matches!(name.as_str(), "agent" | "runs"),
                "`DurableAgent::{name}` (returning {returns:?}) is a new verb: make it return a \
                 request, and add it to this test"
            );
        }
    }
}

/// A crate made of the given files, for the checker's own tests.
fn fake(files: &[(&str, &str)]) -> Files {
    files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), (*t).to_string()))
        .collect()
}

#[test]
fn the_checker_refuses_an_import_from_a_later_stage() {
    let files = fake(&[
        ("lib.rs", "mod low; mod high;"),
        ("low.rs", "use crate::high::Thing;"),
        ("high.rs", "pub struct Thing;"),
    ]);
    let errors = check(&files);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "low.rs:1: `low` uses `crate::high::Thing`: `high` is declared after `low`"
        ),
        "{}",
        errors[0]
    );
}

#[test]
fn the_checker_sees_paths_in_code_groups_super_and_child_names() {
    let files = fake(&[
        ("lib.rs", "mod a; mod b;"),
        ("a/mod.rs", "mod x; mod y;"),
        ("a/x.rs", "fn f() { super::y::g(); }"),
        ("a/y.rs", "pub fn g() { crate::b::h() }"),
        ("b.rs", "use crate::{a::{self, x}}; pub fn h() {}"),
    ]);
    let mut errors = check(&files);
    errors.sort();
    // `b` may use `a` and `a::x` (declared before it); the other two paths go up.
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("a/x.rs:1: `a::x` uses `crate::a::y::g`"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with("a/y.rs:1: `a::y` uses `crate::b::h`"),
        "{}",
        errors[1]
    );
}

#[test]
fn the_checker_refuses_imports_through_an_ancestor_but_not_from_tests() {
    let files = fake(&[
        ("lib.rs", "mod a; pub use a::T;"),
        (
            "a/mod.rs",
            "mod inner; pub use inner::T; #[cfg(test)] mod tests { use super::*; }",
        ),
        ("a/inner.rs", "pub struct T; fn f() -> crate::T { T }"),
    ]);
    let errors = check(&files);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("`crate` is an ancestor of this module"),
        "{}",
        errors[0]
    );
}

#[test]
fn the_checker_reports_files_no_module_declares() {
    let files = fake(&[("lib.rs", "mod a;"), ("a.rs", ""), ("b.rs", "")]);
    assert_eq!(
        check(&files),
        ["b.rs: not declared as a module anywhere (dead code, or a missing `mod`)"]
    );
}

/// The repository stands alone: every document it names is in it. A document is a `.md` or `.txt`
/// name that is written in capitals (`README.md`) or has a folder (`docs/guide.md`); lower-case bare
/// names are left alone, since examples use them (`include_str!("deploy.md")`).
#[test]
fn every_document_named_in_the_repository_exists() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut missing = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder can be read") {
            let path = entry.expect("a folder entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    dirs.push(path);
                }
                continue;
            }
            // This file's own examples of names are test data.
            if path.ends_with(file!()) {
                continue;
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(text) if !name.ends_with(".lock") => text,
                _ => continue,
            };
            for (i, line) in text.lines().enumerate() {
                for named in document_names(line) {
                    let here = path.parent().unwrap_or(root).join(&named);
                    if !root.join(&named).exists() && !here.exists() {
                        let shown = path
                            .strip_prefix(root)
                            .unwrap_or(&path)
                            .display()
                            .to_string();
                        missing.push(format!("{shown}:{}: `{named}`", i + 1));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "documents named but not in the repository:\n{}",
        missing.join("\n")
    );
}

/// The document names on a line: runs of path characters ending in `.md` or `.txt`, written in
/// capitals or with a folder.
fn document_names(line: &str) -> Vec<String> {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    let mut names = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (is_path(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let word = line[s..i].trim_end_matches('.');
                let stem = word
                    .strip_suffix(".md")
                    .or_else(|| word.strip_suffix(".txt"));
                if let Some(stem) = stem {
                    let file = stem.rsplit('/').next().unwrap_or(stem);
                    let capitals = !file.is_empty()
                        && file
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c == '_' || c == '-');
                    // A web address (`https://host/docs/x.md`) names no file of this repository.
                    let address = line[..s].ends_with(':');
                    if (capitals || stem.contains('/')) && !address {
                        names.push(word.trim_start_matches("./").to_string());
                    }
                }
                start = None;
            }
            _ => {}
        }
    }
    names
}

#[test]
fn document_names_are_found_in_prose_and_paths() {
    assert_eq!(document_names("see ARCHITECTURE.md."), ["ARCHITECTURE.md"]);
    assert_eq!(
        document_names("(`docs/a-b.txt`) and ../x/y.md"),
        ["docs/a-b.txt", "../x/y.md"]
    );
    assert!(document_names(r#"include_str!("deploy.md") or notes.txt"#).is_empty());
    assert!(document_names("the [reference](https://example.com/docs/reference.md#x)").is_empty());
}

/// No comment or document cites an item of a tracker the repository does not hold ("issue" and a
/// number): readers cannot look it up, so the text says the reason or the subject instead. Another
/// project's public issue, written `owner/repo#N`, can be looked up and is fine. The changelog and
/// the data folders (build output, fuzz corpora, golden files) are not read.
#[test]
fn no_issue_numbers_in_the_code() {
    const EXTENSIONS: [&str; 5] = ["rs", "md", "py", "sh", "toml"];
    const SKIPPED: [&str; 6] = [
        "CHANGELOG.md",
        "fuzz/corpus",
        "fuzz/artifacts",
        "fuzz/coverage",
        "tests/corpus",
        "tests/golden",
    ];
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder can be read") {
            let path = entry.expect("a folder entry").path();
            let shown = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if SKIPPED.iter().any(|skipped| shown == Path::new(skipped)) {
                continue;
            }
            if path.is_dir() {
                if name != "target" && name != ".git" {
                    dirs.push(path);
                }
                continue;
            }
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !EXTENSIONS.contains(&extension) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if cites_an_issue(line) {
                    found.push(format!("{}:{}: {}", shown.display(), i + 1, line.trim()));
                }
            }
        }
    }
    found.sort();
    assert!(
        found.is_empty(),
        "issue numbers of a tracker the repository does not hold (say the reason instead):\n{}",
        found.join("\n")
    );
}

/// Whether a line has the word "issue", a space and a digit, in any case. The pattern is built
/// here so that this file's own text does not match it.
fn cites_an_issue(line: &str) -> bool {
    let pattern = ["iss", "ue "].concat();
    let line = line.to_ascii_lowercase();
    line.match_indices(&pattern).any(|(at, _)| {
        let word_start = !line[..at].ends_with(|c: char| c.is_ascii_alphanumeric());
        let digit = line[at + pattern.len()..].starts_with(|c: char| c.is_ascii_digit());
        word_start && digit
    })
}
