//! A normalised parameter schema compiled into the checks the strict decoder makes while it reads
//! the argument text.
//!
//! Only schemas made of the keywords below compile; for any other keyword (`oneOf`, `allOf`,
//! `pattern`, `uniqueItems: true`, `patternProperties`, `multipleOf`, ...) [`Shape::compile`]
//! refuses, and the tool validates every call with the full JSON Schema validator instead. The
//! supported subset is what schemars derives for structs, scalars, `Option`, `Vec`, string-keyed
//! maps, unit enums, `serde_json::Value` and recursive types:
//!
//! - annotations, which assert nothing: `description`, `title`, `default`, `examples`,
//!   `deprecated`, `readOnly`, `writeOnly`, `$comment`, `format` (an annotation in draft 2020-12,
//!   which is how [`Validator`](crate::schema::Validator) reads a schema without `$schema`),
//!   `contentEncoding`, `contentMediaType`, and `$defs` at the root;
//! - `type` (one name or a list), `enum` and `const` of strings, booleans and null;
//! - `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`;
//! - `properties`, `required` (up to 64 names per object), `additionalProperties`;
//! - `items`, `prefixItems`, `minItems`, `maxItems`, `uniqueItems: false`;
//! - `$ref` to `#` or `#/$defs/<name>` and `anyOf: [<schema>, {"type": "null"}]` (how schemars
//!   writes `Option<T>`), each with only annotations beside it.
//!
//! The checks follow JSON Schema's semantics exactly (an integer-valued float is an `integer`,
//! string lengths count code points, keywords about one type ignore values of other types), so
//! that a value passes them exactly when the full validator accepts it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Map, Value};

use crate::decode::text::bounded;

/// Index of a node in [`Shape::nodes`].
pub(crate) type NodeId = u32;

/// The compiled schema: node 0 is the root.
#[derive(Debug)]
pub(crate) struct Shape {
    nodes: Vec<Node>,
    /// Per node, the scalar types ([`types`] bits) a value passes on its type alone, `null`
    /// included (through `Option`'s `anyOf`): one byte read settles most scalars, with no walk
    /// through [`Node::Nullable`] and no look into [`Checks`].
    plain: Box<[u8]>,
    /// Per node, the integers it accepts on their own, as an inclusive range: all of them where
    /// it checks only the type, its bounds where it has them, none where it needs a closer look
    /// (no integers, or an `enum`). One read settles an integer, as [`Shape::plain`] settles
    /// other scalars.
    integers: Box<[(i128, i128)]>,
}

#[derive(Debug)]
pub(crate) enum Node {
    /// Accepts every value.
    Any,
    /// Accepts no value (the schema `false`).
    Never,
    /// Accepts `null`, and every other value the target accepts.
    Nullable(NodeId),
    /// Accepts what passes every check.
    Check(Box<Checks>),
}

/// JSON types, as bits.
pub(crate) mod types {
    pub const NULL: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const OBJECT: u8 = 4;
    pub const ARRAY: u8 = 8;
    pub const NUMBER: u8 = 16;
    pub const INTEGER: u8 = 32;
    pub const STRING: u8 = 64;
    pub const ALL: u8 = 127;
}

/// A value of an `enum` or `const`.
#[derive(Debug, PartialEq)]
pub(crate) enum Scalar {
    Null,
    Bool(bool),
    Str(Box<str>),
}

#[derive(Debug, Default)]
pub(crate) struct Checks {
    /// The accepted types ([`types`] bits).
    pub(crate) types: u8,
    /// No `enum`, bounds or lengths: a scalar passes on its type alone.
    pub(crate) plain: bool,
    /// `enum` (or `const`, as one value): the value must be one of these.
    pub(crate) one_of: Option<Box<[Scalar]>>,
    pub(crate) minimum: Option<f64>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_minimum: Option<f64>,
    pub(crate) exclusive_maximum: Option<f64>,
    /// The bounds as an inclusive range of integers, for integer values.
    pub(crate) integers: (i128, i128),
    pub(crate) min_length: Option<u64>,
    pub(crate) max_length: Option<u64>,
    pub(crate) object: Object,
    pub(crate) array: Array,
}

#[derive(Debug)]
pub(crate) struct Object {
    /// Property names and their nodes, in the schema's order.
    pub(crate) properties: Box<[(Box<str>, NodeId)]>,
    /// By name, when there are many properties.
    index: Option<HashMap<Box<str>, usize>>,
    /// For each property (and [`Object::START`]), the property that followed it in the last
    /// arguments read: where [`Object::find`] looks first. Shared by concurrent calls; a stale
    /// guess only costs a scan.
    follow: Box<[AtomicU8]>,
    /// Bit `i` set: `properties[i]` is required.
    pub(crate) required: u64,
    /// The node for keys not among the properties.
    pub(crate) additional: NodeId,
}

#[derive(Debug)]
pub(crate) struct Array {
    pub(crate) prefix: Box<[NodeId]>,
    pub(crate) items: NodeId,
    pub(crate) min_items: Option<u64>,
    pub(crate) max_items: Option<u64>,
}

/// The node every shape has at this index: [`Node::Any`].
pub(crate) const ANY: NodeId = 1;
const ROOT: NodeId = 0;
const NEVER: NodeId = 2;

/// The most properties (described or required) an object may have: the strict decoder records
/// the ones it has seen in a `u64`.
const MAX_PROPERTIES: usize = 64;

/// Above this many properties, names are looked up in a hash map instead of one by one.
const LINEAR_LOOKUP: usize = 12;

impl Default for Object {
    fn default() -> Self {
        Object {
            properties: Box::default(),
            index: None,
            follow: Box::default(),
            required: 0,
            additional: ANY,
        }
    }
}

impl Default for Array {
    fn default() -> Self {
        Array {
            prefix: Box::default(),
            items: ANY,
            min_items: None,
            max_items: None,
        }
    }
}

impl Object {
    /// The index of a property, and its node, when it is where the last arguments had it: the
    /// property that followed `previous` (the property before it in this object, or
    /// [`Object::START`]) last time. Arguments tend to come in the same order call after call.
    /// `None` when it is not (or when the key is longer than 16 bytes): [`Object::find_slow`]
    /// decides. No call inside, so the key reader's common case is a leaf function.
    #[inline(always)]
    pub(crate) fn guess(&self, key: &str, previous: usize) -> Option<(usize, NodeId)> {
        let guess = self.follow.get(previous)?.load(Ordering::Relaxed) as usize;
        let (name, node) = self.properties.get(guess)?;
        short_same(name.as_bytes(), key.as_bytes()).then_some((guess, *node))
    }

    /// The index of a property, and its node, past [`Object::guess`]: a scan (or a hash lookup),
    /// then the guess that follows `previous` updated.
    #[inline(never)]
    pub(crate) fn find_slow(&self, key: &str, previous: usize) -> Option<(usize, NodeId)> {
        let found = match &self.index {
            Some(index) => index.get(key).copied(),
            None => self
                .properties
                .iter()
                .position(|(name, _)| name.as_bytes() == key.as_bytes()),
        };
        let i = found?;
        if let Some(follow) = self.follow.get(previous) {
            // Fewer than 64 properties, so the index fits.
            follow.store(i as u8, Ordering::Relaxed);
        }
        Some((i, self.properties[i].1))
    }

    /// The `previous` of an object's first key (after every property's index).
    pub(crate) const START: usize = MAX_PROPERTIES;
}

/// Byte equality of keys of at most 16 bytes, without a call to `memcmp` (and with no panic
/// path, so the key reader's `Slot::select` needs no stack frame); `false` for longer ones (the
/// caller compares those in full).
#[inline(always)]
fn short_same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        // Two overlapping words cover every byte.
        8..=16 => {
            a.first_chunk::<8>() == b.first_chunk::<8>()
                && a.last_chunk::<8>() == b.last_chunk::<8>()
        }
        4..=7 => {
            a.first_chunk::<4>() == b.first_chunk::<4>()
                && a.last_chunk::<4>() == b.last_chunk::<4>()
        }
        // Bytes 0, n / 2 and n - 1 are every byte of a key of 1 to 3 bytes.
        0..=3 => a.first() == b.first() && a.get(n / 2) == b.get(n / 2) && a.last() == b.last(),
        _ => false,
    }
}

impl Shape {
    /// A shape that accepts everything: the strict decoder over it only tracks paths.
    pub(crate) fn any() -> Self {
        Shape::new(vec![Node::Any, Node::Any, Node::Never])
    }

    fn new(nodes: Vec<Node>) -> Self {
        let mut shape = Shape {
            nodes,
            plain: Box::default(),
            integers: Box::default(),
        };
        shape.plain = (0..shape.nodes.len())
            .map(|id| shape.plain_types(id as NodeId))
            .collect();
        shape.integers = (0..shape.nodes.len())
            .map(|id| shape.integer_range(id as NodeId))
            .collect();
        shape
    }

    /// The integers a node accepts on their own (see [`Shape::integers`]): a node's `integers`
    /// are all of them where it has no bounds.
    fn integer_range(&self, id: NodeId) -> (i128, i128) {
        match self.node(self.non_null(id)) {
            Node::Any => (i128::MIN, i128::MAX),
            Node::Check(c)
                if c.types & (types::INTEGER | types::NUMBER) != 0 && c.one_of.is_none() =>
            {
                c.integers
            }
            // None: the node's checks say why.
            Node::Never | Node::Nullable(_) | Node::Check(_) => (1, 0),
        }
    }

    /// Whether an integer passes the node. `false`: it is refused (`At::integer_refused` says
    /// why).
    #[inline(always)]
    pub(crate) fn integer_passes(&self, id: NodeId, v: i128) -> bool {
        let (low, high) = self.integers[id as usize];
        low <= v && v <= high
    }

    /// The scalar types a value of the node passes on its type alone (see [`Shape::plain`]).
    fn plain_types(&self, id: NodeId) -> u8 {
        const SCALARS: u8 =
            types::NULL | types::BOOLEAN | types::NUMBER | types::INTEGER | types::STRING;
        let target = self.non_null(id);
        let null = if target == id { 0 } else { types::NULL };
        match self.node(target) {
            Node::Any => SCALARS,
            Node::Check(c) if c.plain => (c.types & SCALARS) | null,
            Node::Never | Node::Nullable(_) | Node::Check(_) => null,
        }
    }

    /// Whether a scalar of type `bit` passes the node on its type alone. `false` means: look at
    /// the node's checks.
    #[inline(always)]
    pub(crate) fn plain(&self, id: NodeId, bit: u8) -> bool {
        self.plain[id as usize] & bit != 0
    }

    /// Compiles a normalised schema, or says which keyword the strict decoder does not check.
    pub(crate) fn compile(schema: &Value) -> Result<Shape, String> {
        Shape::build(schema, false)
    }

    /// Compiles the part of any schema the strict decoder can check, leaving out what it cannot
    /// (a keyword it does not check, `anyOf` other than `Option`'s, `additionalProperties` beside
    /// `patternProperties`): the shape accepts every value the schema accepts, and more. The slow
    /// path decodes a validated value through it, for what the wrapper adds to the schema's checks
    /// (aliases refused, integer-valued floats read as integers, `f32` range), with the object
    /// structure it still knows. A schema it cannot read at all gives [`Shape::any`].
    pub(crate) fn compile_partial(schema: &Value) -> Shape {
        Shape::build(schema, true).unwrap_or_else(|_| Shape::any())
    }

    fn build(schema: &Value, lenient: bool) -> Result<Shape, String> {
        let mut builder = Builder {
            lenient,
            nodes: vec![Node::Any, Node::Any, Node::Never],
            defs: match schema.get("$defs") {
                Some(Value::Object(defs)) => defs,
                Some(_) => return Err("`$defs` is not an object".into()),
                None => &EMPTY,
            },
            def_ids: HashMap::new(),
        };
        builder.compile_into(ROOT, schema, true)?;
        let nodes = builder.nodes;
        // `anyOf [$ref, null]` definitions could chain into a loop that checks nothing.
        for start in 0..nodes.len() {
            let mut id = start as NodeId;
            for _ in 0..=nodes.len() {
                match &nodes[id as usize] {
                    Node::Nullable(target) => id = *target,
                    _ => break,
                }
            }
            if matches!(nodes[id as usize], Node::Nullable(_)) {
                return Err("a loop of nullable references".into());
            }
        }
        Ok(Shape::new(nodes))
    }

    /// The root node.
    #[inline(always)]
    pub(crate) fn root(&self) -> NodeId {
        ROOT
    }

    #[inline(always)]
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// Whether the node accepts every value.
    #[inline(always)]
    pub(crate) fn is_any(&self, id: NodeId) -> bool {
        matches!(self.node(id), Node::Any)
    }

    /// The node that checks a value which is not `null` (through `Option`'s `anyOf`).
    #[inline(always)]
    pub(crate) fn non_null(&self, mut id: NodeId) -> NodeId {
        while let Node::Nullable(target) = self.node(id) {
            id = *target;
        }
        id
    }
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

struct Builder<'a> {
    /// Leave out what does not compile, instead of refusing the schema.
    lenient: bool,
    nodes: Vec<Node>,
    defs: &'a Map<String, Value>,
    def_ids: HashMap<&'a str, NodeId>,
}

/// Keywords that assert nothing.
fn is_annotation(keyword: &str) -> bool {
    matches!(
        keyword,
        "description"
            | "title"
            | "default"
            | "examples"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "$comment"
            | "format"
            | "contentEncoding"
            | "contentMediaType"
    )
}

/// In a lenient build, a keyword that does not compile is left out (the shape then accepts more);
/// otherwise the schema is refused.
macro_rules! or_leave_out {
    ($self:ident, $result:expr) => {
        match $result {
            Ok(value) => value,
            Err(_) if $self.lenient => continue,
            Err(e) => return Err(e.into()),
        }
    };
}

impl<'a> Builder<'a> {
    fn compile(&mut self, schema: &'a Value) -> Result<NodeId, String> {
        let compiled = self.compile_strictly(schema);
        match compiled {
            Err(_) if self.lenient => Ok(ANY),
            compiled => compiled,
        }
    }

    fn compile_strictly(&mut self, schema: &'a Value) -> Result<NodeId, String> {
        match schema {
            Value::Bool(true) => return Ok(ANY),
            Value::Bool(false) => return Ok(NEVER),
            _ => {}
        }
        if let Some(reference) = schema.get("$ref") {
            // A `$ref` with only annotations beside it checks what its target checks.
            let map = schema.as_object().into_iter().flatten();
            if map.filter(|(k, _)| !is_annotation(k)).count() > 1 && !self.lenient {
                return Err("`$ref` beside other assertions".into());
            }
            return self.reference(reference);
        }
        let id = self.reserve();
        self.compile_into(id, schema, false)?;
        Ok(id)
    }

    /// The JSON types a compiled node may accept (all of them for a node still being compiled).
    fn types_of(&self, id: NodeId) -> u8 {
        match &self.nodes[id as usize] {
            Node::Any => types::ALL,
            Node::Never => 0,
            Node::Nullable(target) => types::NULL | self.types_of_target(*target),
            Node::Check(c) => c.types,
        }
    }

    fn types_of_target(&self, id: NodeId) -> u8 {
        match &self.nodes[id as usize] {
            Node::Check(c) => c.types,
            Node::Never => 0,
            Node::Any | Node::Nullable(_) => types::ALL,
        }
    }

    fn reserve(&mut self) -> NodeId {
        self.nodes.push(Node::Any);
        (self.nodes.len() - 1) as NodeId
    }

    fn compile_into(&mut self, id: NodeId, schema: &'a Value, root: bool) -> Result<(), String> {
        let map = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                self.nodes[id as usize] = Node::Never;
                return Ok(());
            }
            Value::Object(map) if !map.contains_key("$ref") => map,
            _ if self.lenient => return Ok(()),
            Value::Object(_) => return Err("`$ref` at the root or as a whole definition".into()),
            _ => return Err("a schema that is not an object or a boolean".into()),
        };
        let assertions = || {
            map.keys()
                .filter(|k| !(is_annotation(k) || root && *k == "$defs"))
        };
        if let Some(branches) = map.get("anyOf") {
            match nullable(branches, assertions().count()) {
                Ok(other) => {
                    let target = self.compile(other)?;
                    self.nodes[id as usize] = Node::Nullable(target);
                    return Ok(());
                }
                // Left out: the other keywords still apply.
                Err(_) if self.lenient => {}
                Err(e) => return Err(e),
            }
        }
        let mut checks = Checks {
            types: types::ALL,
            ..Checks::default()
        };
        let mut properties: Option<&Map<String, Value>> = None;
        let mut required: &[Value] = &[];
        let mut any_assertion = false;
        let mut patterns = false;
        for (keyword, value) in map {
            if is_annotation(keyword) || (root && keyword == "$defs") {
                continue;
            }
            any_assertion = true;
            match keyword.as_str() {
                "type" => checks.types = or_leave_out!(self, type_bits(value)),
                "enum" => {
                    let values =
                        or_leave_out!(self, value.as_array().ok_or("`enum` is not an array"));
                    checks.one_of = Some(or_leave_out!(
                        self,
                        values.iter().map(scalar).collect::<Result<_, _>>()
                    ));
                }
                "const" => checks.one_of = Some(Box::new([or_leave_out!(self, scalar(value))])),
                "minimum" => checks.minimum = Some(or_leave_out!(self, bound(value))),
                "maximum" => checks.maximum = Some(or_leave_out!(self, bound(value))),
                "exclusiveMinimum" => {
                    checks.exclusive_minimum = Some(or_leave_out!(self, bound(value)))
                }
                "exclusiveMaximum" => {
                    checks.exclusive_maximum = Some(or_leave_out!(self, bound(value)))
                }
                "minLength" => checks.min_length = Some(or_leave_out!(self, count(value))),
                "maxLength" => checks.max_length = Some(or_leave_out!(self, count(value))),
                "minItems" => checks.array.min_items = Some(or_leave_out!(self, count(value))),
                "maxItems" => checks.array.max_items = Some(or_leave_out!(self, count(value))),
                "uniqueItems" if value == &Value::Bool(false) => {}
                "properties" => {
                    properties = Some(or_leave_out!(
                        self,
                        value.as_object().ok_or("`properties` is not an object")
                    ))
                }
                "required" => {
                    required =
                        or_leave_out!(self, value.as_array().ok_or("`required` is not an array"));
                }
                "additionalProperties" => checks.object.additional = self.compile(value)?,
                "items" => checks.array.items = self.compile(value)?,
                "prefixItems" => {
                    let items = or_leave_out!(
                        self,
                        value.as_array().ok_or("`prefixItems` is not an array")
                    );
                    checks.array.prefix = items
                        .iter()
                        .map(|item| self.compile(item))
                        .collect::<Result<_, _>>()?;
                }
                // Keys matching a pattern are not additional properties.
                "patternProperties" if self.lenient => patterns = true,
                // A value of the branches is of one of their types (an integer-valued float at a
                // node of integers then reads as an integer, as elsewhere).
                "anyOf" | "oneOf" if self.lenient => {
                    if let Value::Array(branches) = value {
                        let mut union = 0;
                        for branch in branches {
                            let node = self.compile(branch)?;
                            union |= self.types_of(node);
                        }
                        checks.types &= union;
                    }
                }
                other => or_leave_out!(self, Err(format!("the keyword `{other}`"))),
            }
        }
        if !any_assertion {
            return Ok(());
        }
        if patterns {
            checks.object.additional = ANY;
        }
        if self.lenient
            && (properties.is_some_and(|p| p.len() > MAX_PROPERTIES)
                || required.len() > MAX_PROPERTIES
                || required.iter().any(|name| !name.is_string()))
        {
            // Too many to record: the object's keys are left unchecked.
            properties = None;
            required = &[];
        }
        let mut props: Vec<(Box<str>, NodeId)> = Vec::new();
        if properties.is_some_and(|p| p.len() > MAX_PROPERTIES) {
            return Err(format!("more than {MAX_PROPERTIES} properties"));
        }
        for (name, schema) in properties.into_iter().flatten() {
            props.push((name.as_str().into(), self.compile(schema)?));
        }
        for name in required {
            let name = name.as_str().ok_or("a `required` entry is not a string")?;
            if props.len() >= MAX_PROPERTIES && !props.iter().any(|(n, _)| &**n == name) {
                if self.lenient {
                    // Too many to record: this name's presence is left unchecked.
                    continue;
                }
                return Err(format!("more than {MAX_PROPERTIES} properties"));
            }
            let i = match props.iter().position(|(n, _)| &**n == name) {
                Some(i) => i,
                None => {
                    // Required but not among the properties: present, and (like any key not
                    // among them) checked by `additionalProperties`.
                    props.push((name.into(), checks.object.additional));
                    props.len() - 1
                }
            };
            checks.object.required |= 1 << i;
        }
        if props.len() > LINEAR_LOOKUP {
            checks.object.index = Some(
                props
                    .iter()
                    .enumerate()
                    .map(|(i, (name, _))| (name.clone(), i))
                    .collect(),
            );
        }
        if !props.is_empty() {
            // One entry per property, and `START`'s for the first key (between them, unused
            // entries: a byte each).
            checks.object.follow = (0..=Object::START).map(|_| AtomicU8::new(0)).collect();
        }
        checks.object.properties = props.into();
        checks.integers = integer_range(&checks);
        checks.plain = checks.one_of.is_none()
            && checks.minimum.is_none()
            && checks.maximum.is_none()
            && checks.exclusive_minimum.is_none()
            && checks.exclusive_maximum.is_none()
            && checks.min_length.is_none()
            && checks.max_length.is_none();
        self.nodes[id as usize] = Node::Check(Box::new(checks));
        Ok(())
    }

    /// The node a `$ref` names: `#` (the root) or `#/$defs/<name>`.
    fn reference(&mut self, reference: &'a Value) -> Result<NodeId, String> {
        let reference = reference.as_str().ok_or("`$ref` is not a string")?;
        if reference == "#" {
            return Ok(ROOT);
        }
        let name = reference
            .strip_prefix("#/$defs/")
            .filter(|name| !name.contains(['~', '%', '/']))
            .ok_or_else(|| format!("the reference `{reference}`"))?;
        if let Some(&id) = self.def_ids.get(name) {
            return Ok(id);
        }
        let (name, body) = self
            .defs
            .get_key_value(name)
            .ok_or_else(|| format!("the dangling reference `{reference}`"))?;
        let id = self.reserve();
        self.def_ids.insert(name, id);
        self.compile_into(id, body, false)?;
        Ok(id)
    }
}

/// The integers within a node's bounds, as an inclusive range (the bounds are exact floats, so
/// rounding them to integers is exact; `as` saturates beyond `i128`).
fn integer_range(checks: &Checks) -> (i128, i128) {
    let mut low = i128::MIN;
    let mut high = i128::MAX;
    if let Some(b) = checks.minimum {
        low = low.max(b.ceil() as i128);
    }
    if let Some(b) = checks.exclusive_minimum {
        low = low.max((b.floor() as i128).saturating_add(1));
    }
    if let Some(b) = checks.maximum {
        high = high.min(b.floor() as i128);
    }
    if let Some(b) = checks.exclusive_maximum {
        high = high.min((b.ceil() as i128).saturating_sub(1));
    }
    (low, high)
}

/// The other branch of `anyOf: [<schema>, {"type": "null"}]` (how schemars writes `Option<T>`),
/// when it is the schema's only assertion.
fn nullable(branches: &Value, assertions: usize) -> Result<&Value, String> {
    if assertions > 1 {
        return Err("`anyOf` beside other assertions".into());
    }
    let Some([a, b]) = branches.as_array().map(Vec::as_slice) else {
        return Err("`anyOf` other than `[<schema>, {\"type\": \"null\"}]`".into());
    };
    match (is_null_schema(a), is_null_schema(b)) {
        (false, true) => Ok(a),
        (true, false) => Ok(b),
        _ => Err("`anyOf` other than `[<schema>, {\"type\": \"null\"}]`".into()),
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.as_object().is_some_and(|map| {
        map.get("type") == Some(&Value::String("null".into()))
            && map.keys().all(|k| k == "type" || is_annotation(k))
    })
}

fn type_bits(value: &Value) -> Result<u8, String> {
    let one = |name: &Value| match name.as_str() {
        Some("null") => Ok(types::NULL),
        Some("boolean") => Ok(types::BOOLEAN),
        Some("object") => Ok(types::OBJECT),
        Some("array") => Ok(types::ARRAY),
        Some("number") => Ok(types::NUMBER),
        Some("integer") => Ok(types::INTEGER),
        Some("string") => Ok(types::STRING),
        _ => Err(format!("the type {name}")),
    };
    match value {
        Value::Array(names) => names.iter().try_fold(0, |bits, name| Ok(bits | one(name)?)),
        name => one(name),
    }
}

fn scalar(value: &Value) -> Result<Scalar, String> {
    match value {
        Value::Null => Ok(Scalar::Null),
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        Value::String(s) => Ok(Scalar::Str(s.as_str().into())),
        other => Err(format!("the enum value {other}")),
    }
}

/// A numeric bound, exactly representable as `f64` (so comparisons with it are exact).
fn bound(value: &Value) -> Result<f64, String> {
    let number = value.as_number().ok_or("a bound that is not a number")?;
    let exact = match (number.as_i64(), number.as_u64(), number.as_f64()) {
        (Some(i), _, _) => (i as f64) as i64 == i && i.unsigned_abs() <= 1 << 53,
        (_, Some(u), _) => u <= 1 << 53,
        (_, _, Some(f)) => f.is_finite(),
        _ => false,
    };
    match number.as_f64() {
        Some(f) if exact => Ok(f),
        _ => Err(format!("the bound {number}")),
    }
}

fn count(value: &Value) -> Result<u64, String> {
    value.as_u64().ok_or_else(|| format!("the count {value}"))
}

/// Refuses a schema with an `anyOf` (how schemars writes a `#[serde(untagged)]` enum) whose
/// branches may hold the same kind of JSON value, other than `Option`'s `[<schema>, null]`.
///
/// For such an enum no decoding path can keep the schema's promise: the validator accepts a value
/// that matches any branch, while serde decodes it into the first variant that reads it, whose own
/// branch may reject it (`{"x": 200, "y": "s"}` passes a `Named { y }` branch, and serde reads it
/// as `Small { x: 200 }` past `Small`'s `maximum`). Serde buffers the value and tries the variants
/// out of sight of any wrapper, so the choice cannot be checked at run time. Branches that hold
/// different kinds of value (a number and a string) cannot be confused; objects and arrays count as
/// one kind, since serde reads a struct from an array too.
pub(crate) fn check_untagged(schema: &Value) -> Result<(), String> {
    let defs = match schema.get("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => &*EMPTY,
    };
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                if let Some(Value::Array(branches)) = map.get("anyOf") {
                    if nullable(&map["anyOf"], 1).is_err() {
                        let mut seen = 0u8;
                        for branch in branches {
                            let kinds = kinds(branch, defs, 0);
                            if seen & kinds != 0 {
                                return Err(format!(
                                    "an `anyOf` whose branches overlap (an untagged enum whose \
                                     variants can read the same JSON value): serde may decode a \
                                     value into a variant whose schema rejects it. Give the enum a \
                                     tag (`#[serde(tag = \"...\")]`), or make each variant a \
                                     different kind of JSON value. The branches: {}",
                                    bounded(Value::Array(branches.clone()).to_string())
                                ));
                            }
                            seen |= kinds;
                        }
                    }
                }
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    Ok(())
}

/// The kinds of JSON value a schema may accept, as bits: null, boolean, number, string, and
/// object-or-array (one kind: serde reads structs from arrays).
fn kinds(schema: &Value, defs: &Map<String, Value>, depth: u32) -> u8 {
    const NULL: u8 = 1;
    const BOOLEAN: u8 = 2;
    const NUMBER: u8 = 4;
    const STRING: u8 = 8;
    const CONTAINER: u8 = 16;
    const ALL: u8 = 31;
    let Value::Object(map) = schema else {
        return if schema == &Value::Bool(false) {
            0
        } else {
            ALL
        };
    };
    if depth > 32 {
        return ALL;
    }
    let of_type = |name: &str| match name {
        "null" => NULL,
        "boolean" => BOOLEAN,
        "number" | "integer" => NUMBER,
        "string" => STRING,
        "object" | "array" => CONTAINER,
        _ => ALL,
    };
    let of_value = |value: &Value| match value {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Number(_) => NUMBER,
        Value::String(_) => STRING,
        Value::Array(_) | Value::Object(_) => CONTAINER,
    };
    let mut out = ALL;
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        out &= match reference
            .strip_prefix("#/$defs/")
            .and_then(|name| defs.get(name))
        {
            Some(target) => kinds(target, defs, depth + 1),
            None => ALL,
        };
    }
    match map.get("type") {
        Some(Value::String(name)) => out &= of_type(name),
        Some(Value::Array(names)) => {
            out &= names
                .iter()
                .map(|name| name.as_str().map_or(ALL, of_type))
                .fold(0, |a, b| a | b)
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        out &= values.iter().map(of_value).fold(0, |a, b| a | b);
    }
    if let Some(value) = map.get("const") {
        out &= of_value(value);
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(keyword) {
            out &= branches
                .iter()
                .map(|branch| kinds(branch, defs, depth + 1))
                .fold(0, |a, b| a | b);
        }
    }
    out
}
