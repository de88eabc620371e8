//! `$ref` inlining within a budget: the part of [`normalize`](super::normalize) that reads a
//! schema's definitions.
//!
//! A schema from outside (an MCP server's) is hostile input: a chain of thousands of definitions
//! each referring to the next, or forty that each refer to the next one twice (2^40 values once
//! inlined), must cost an error, not the stack or the memory. So:
//!
//! - which definitions are recursive is found in one pass over the references (Tarjan's strongly
//!   connected components, with an explicit stack), linear in the definitions;
//! - a `$ref` that names another `$ref` is followed in a loop, not by recursion;
//! - the output is counted as it is built: every value written, every value of a definition merged
//!   beside a `$ref` (kept or shadowed by a sibling) and every reference followed is one unit of
//!   [`Budget::nodes`], and no value may sit deeper than [`Budget::depth`]. The recursion over the
//!   output is therefore at most `depth` calls deep, and the work at most `nodes` units plus one
//!   copy of the input.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::limits::{Limit, LimitExceeded};

/// A definition's key: the prefix its `$ref`s use (`#/$defs/` or `#/definitions/`) and its name.
pub(crate) type Key = (&'static str, String);

/// How large and how deep an inlined schema may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The most values (see the module docs for what counts).
    pub(crate) nodes: usize,
    /// The deepest nesting, the root at level 0.
    pub(crate) depth: usize,
}

impl Budget {
    /// The budget of [`McpClientLimits`](crate::limits::McpClientLimits)'s defaults, far above
    /// any schema schemars generates.
    pub(crate) const DEFAULT: Budget = Budget {
        nodes: 100_000,
        depth: 64,
    };

    /// No bound: for a trusted schema whose definitions are all kept (nothing is inlined, so the
    /// output is the size of the input).
    const UNBOUNDED: Budget = Budget {
        nodes: usize::MAX,
        depth: usize::MAX,
    };
}

/// The definitions of a schema (`$defs`, or draft-07's `definitions`), by (prefix, name).
#[derive(Default)]
pub(crate) struct Defs {
    pub(crate) prefixes: Vec<&'static str>,
    pub(crate) bodies: BTreeMap<Key, Value>,
}

impl Defs {
    /// The definition a `$ref` names, if it names one.
    fn target(&self, reference: &str) -> Option<Key> {
        self.prefixes.iter().find_map(|prefix| {
            let name = reference.strip_prefix(prefix)?;
            let key = (*prefix, name.to_owned());
            self.bodies.contains_key(&key).then_some(key)
        })
    }

    /// The definitions a schema refers to, directly (an explicit stack: `node` may be deep).
    fn refs_in(&self, node: &Value) -> Vec<Key> {
        let mut out = Vec::new();
        let mut todo = vec![node];
        while let Some(node) = todo.pop() {
            match node {
                Value::Object(map) => {
                    if let Some(target) = map
                        .get("$ref")
                        .and_then(Value::as_str)
                        .and_then(|r| self.target(r))
                    {
                        out.push(target);
                    }
                    todo.extend(map.values());
                }
                Value::Array(items) => todo.extend(items),
                _ => {}
            }
        }
        out
    }

    /// The definitions that reach themselves through `$ref`s (they cannot be inlined): those in
    /// a strongly connected component of more than one, or that refer to themselves.
    pub(crate) fn recursive(&self) -> BTreeSet<Key> {
        let keys: Vec<&Key> = self.bodies.keys().collect();
        let index: BTreeMap<&Key, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let edges: Vec<Vec<usize>> = self
            .bodies
            .values()
            .map(|body| self.refs_in(body).iter().map(|k| index[k]).collect())
            .collect();
        let mut recursive = BTreeSet::new();
        for component in components(&edges) {
            let cyclic = component.len() > 1 || edges[component[0]].contains(&component[0]);
            if cyclic {
                recursive.extend(component.into_iter().map(|i| keys[i].clone()));
            }
        }
        recursive
    }
}

/// The strongly connected components of a graph (Tarjan's algorithm, iterative).
fn components(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = edges.len();
    let mut order = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for start in 0..n {
        if order[start] != UNSEEN {
            continue;
        }
        // (node, how many of its edges are done)
        let mut calls = vec![(start, 0usize)];
        order[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (node, ref mut done)) = calls.last_mut() {
            if let Some(&to) = edges[node].get(*done) {
                *done += 1;
                if order[to] == UNSEEN {
                    order[to] = next;
                    low[to] = next;
                    next += 1;
                    stack.push(to);
                    on_stack[to] = true;
                    calls.push((to, 0));
                } else if on_stack[to] {
                    low[node] = low[node].min(order[to]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == order[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

/// Replaces each `$ref` to a definition with the definition's body, except for recursive
/// definitions: those are kept (returned, to become the root's `$defs`) and their `$ref`s stay,
/// rewritten to `#/$defs/<name>`. With `inline_none`, every definition is kept that way.
pub(crate) fn inline(
    root: Value,
    defs: &Defs,
    budget: Budget,
    inline_none: bool,
) -> Result<(Value, Map<String, Value>), LimitExceeded> {
    let recursive = if inline_none {
        defs.bodies.keys().cloned().collect()
    } else {
        defs.recursive()
    };
    let mut inliner = Inliner {
        defs,
        recursive: &recursive,
        budget: if inline_none {
            Budget::UNBOUNDED
        } else {
            budget
        },
        nodes: 0,
        wanted: Vec::new(),
        kept: Map::new(),
    };
    let root = inliner.build(root, 0)?;
    // A kept definition sits at `#/$defs/<name>`: two levels below the root.
    while let Some(key) = inliner.wanted.pop() {
        let body = inliner.build(defs.bodies[&key].clone(), 2)?;
        inliner.kept.insert(key.1, body);
    }
    Ok((root, inliner.kept))
}

struct Inliner<'a> {
    defs: &'a Defs,
    recursive: &'a BTreeSet<Key>,
    budget: Budget,
    nodes: usize,
    /// Recursive definitions referred to and not built yet.
    wanted: Vec<Key>,
    /// Recursive definitions built (or being built: `null` until then), by name.
    kept: Map<String, Value>,
}

impl Inliner<'_> {
    /// One more unit of work.
    fn charge(&mut self) -> Result<(), LimitExceeded> {
        self.nodes += 1;
        if self.nodes > self.budget.nodes {
            return Err(LimitExceeded::count(Limit::SchemaNodes, self.budget.nodes));
        }
        Ok(())
    }

    /// `node` with its `$ref`s inlined, `depth` levels below the root.
    fn build(&mut self, node: Value, depth: usize) -> Result<Value, LimitExceeded> {
        if depth > self.budget.depth {
            return Err(LimitExceeded::count(Limit::SchemaDepth, self.budget.depth));
        }
        self.charge()?;
        match node {
            Value::Object(mut map) => {
                self.resolve(&mut map)?;
                let mut out = Map::new();
                for (key, value) in map {
                    let built = self.build(value, depth + 1)?;
                    out.insert(key, built);
                }
                Ok(Value::Object(out))
            }
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for value in items {
                    out.push(self.build(value, depth + 1)?);
                }
                Ok(Value::Array(out))
            }
            other => Ok(other),
        }
    }

    /// Follows `map`'s `$ref` while it names a definition that can be inlined, merging each
    /// definition's keywords under the ones already there (a field's description beside its
    /// `$ref` wins); a `$ref` to a recursive definition stays, pointing at `#/$defs/<name>`.
    fn resolve(&mut self, map: &mut Map<String, Value>) -> Result<(), LimitExceeded> {
        while let Some(key) = map
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.defs.target(r))
        {
            self.charge()?;
            if self.recursive.contains(&key) {
                let name = key.1.clone();
                map.insert("$ref".into(), Value::String(format!("#/$defs/{name}")));
                if !self.kept.contains_key(&name) {
                    self.kept.insert(name, Value::Null);
                    self.wanted.push(key);
                }
                return Ok(());
            }
            map.remove("$ref");
            if let Value::Object(body) = &self.defs.bodies[&key] {
                for (k, v) in body {
                    self.charge()?;
                    if !map.contains_key(k) {
                        map.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs_of(value: Value) -> Defs {
        let Value::Object(found) = value else {
            unreachable!()
        };
        Defs {
            prefixes: vec!["#/$defs/"],
            bodies: found
                .into_iter()
                .map(|(k, v)| (("#/$defs/", k), v))
                .collect(),
        }
    }

    #[test]
    fn recursion_is_found_in_cycles_and_self_references_only() {
        let defs = defs_of(json!({
            "a": {"$ref": "#/$defs/b"},
            "b": {"items": {"$ref": "#/$defs/a"}},
            "c": {"$ref": "#/$defs/a"},
            "d": {"properties": {"d": {"$ref": "#/$defs/d"}}},
            "e": {"type": "string"}
        }));
        let names: Vec<String> = defs.recursive().into_iter().map(|k| k.1).collect();
        assert_eq!(names, ["a", "b", "d"]);
    }

    #[test]
    fn a_long_chain_is_found_without_recursion() {
        let mut chain = Map::new();
        for i in 0..100_000 {
            chain.insert(
                format!("d{i}"),
                json!({"$ref": format!("#/$defs/d{}", i + 1)}),
            );
        }
        chain.insert("d100000".into(), json!({"$ref": "#/$defs/d0"}));
        assert_eq!(defs_of(Value::Object(chain)).recursive().len(), 100_001);
    }

    #[test]
    fn the_budget_counts_values_and_levels() {
        let defs = defs_of(json!({"s": {"type": "string"}}));
        let root = json!({"properties": {"a": {"$ref": "#/$defs/s"}}});
        let (inlined, kept) = inline(root.clone(), &defs, Budget::DEFAULT, false).unwrap();
        assert_eq!(inlined, json!({"properties": {"a": {"type": "string"}}}));
        assert!(kept.is_empty());
        let deep = Budget {
            nodes: 100,
            depth: 2,
        };
        let err = inline(root.clone(), &defs, deep, false).unwrap_err();
        assert_eq!(err, LimitExceeded::new(Limit::SchemaDepth, 2));
        let small = Budget {
            nodes: 3,
            depth: 64,
        };
        let err = inline(root, &defs, small, false).unwrap_err();
        assert_eq!(err, LimitExceeded::new(Limit::SchemaNodes, 3));
    }
}
