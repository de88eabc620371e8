//! Validators: JSON Schemas compiled once, with errors that name a JSON path, and the type of the
//! custom checks tools add beside them.

use std::sync::Arc;

use jsonschema::ValidationError;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::Location;
use serde_json::Value;

/// A custom check of a value (a tool's input, output or event validator): the value to keep, or
/// why it is refused (`<path>: <reason>`).
pub(crate) type CheckFn = dyn Fn(Value) -> Result<Value, String> + Send + Sync;

/// A JSON Schema compiled once (the `jsonschema` crate), with errors that name a JSON path.
///
/// The draft is chosen by the schema's `$schema` (draft-07, 2019-09, 2020-12, ...); a schema without
/// one is read as draft 2020-12.
///
/// ```
/// use phaseo_agent::schema::Validator;
/// use serde_json::json;
///
/// let v = Validator::new(&json!({
///     "type": "object",
///     "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
///     "required": ["items"]
/// })).unwrap();
/// assert!(v.check(&json!({"items": [1, 2]})).is_ok());
/// assert_eq!(v.check(&json!({"items": [1, "x"]})).unwrap_err(), r#"$.items[1]: "x" is not of type "integer""#);
/// assert_eq!(v.check(&json!({})).unwrap_err(), r#"$: "items" is a required property"#);
/// ```
#[derive(Clone)]
pub struct Validator {
    inner: Arc<Compiled>,
}

/// A compiled schema and the schema it came from, which only a failure reads (to explain a
/// `oneOf`/`anyOf` by its branches).
struct Compiled {
    validator: jsonschema::Validator,
    schema: Value,
}

impl Validator {
    /// Compiles a schema; the error says why it is not a usable JSON Schema.
    pub fn new(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(|validator| Validator {
                inner: Arc::new(Compiled {
                    validator,
                    schema: schema.clone(),
                }),
            })
            .map_err(|e| format!("the schema does not compile: {e}"))
    }

    /// Checks a value; the error lists every failure, one per line, each as `<path>: <reason>`.
    ///
    /// The reason is written for a model to act on: an `enum` lists its allowed values (up to
    /// twenty), and a value that fits no branch of a `oneOf`/`anyOf` gets the branch it came closest
    /// to and each of that branch's own errors, at its full path. Only a failure pays for this: a
    /// valid value costs what jsonschema's check costs.
    ///
    /// The list is bounded: at most [`MAX_LISTED_ERRORS`] lines, then `(and N more errors)`. A
    /// value of more than 10,000 JSON values (counting every array element and object member) gets
    /// its first failure only, with a note saying so: listing them all would cost memory in
    /// proportion to the value.
    ///
    /// ```
    /// use phaseo_agent::schema::Validator;
    /// use serde_json::json;
    ///
    /// let v = Validator::new(&json!({
    ///     "type": "object",
    ///     "properties": {"name": {"type": "string"}, "environment": {"enum": ["staging", "production"]}}
    /// })).unwrap();
    /// assert_eq!(
    ///     v.check(&json!({"name": 42, "environment": "prod"})).unwrap_err(),
    ///     "$.environment: \"prod\" is not one of \"staging\", \"production\"\n$.name: 42 is not of type \"string\""
    /// );
    /// ```
    pub fn check(&self, value: &Value) -> Result<(), String> {
        let Err(first) = self.inner.validator.validate(value) else {
            return Ok(());
        };
        let mut report = Report::default();
        if has_more_values(value, MAX_VALUES_LISTED) {
            explain(&first, &self.inner.schema, "", &mut report);
            report.note = Some(format!(
                "(only the first error is listed: the value holds more than {MAX_VALUES_LISTED} \
                 JSON values)"
            ));
        } else {
            drop(first);
            let errors: Vec<ValidationError<'_>> =
                self.inner.validator.iter_errors(value).collect();
            report.explain_all(&errors, &self.inner.schema);
        }
        Err(report.finish())
    }

    /// Whether a value passes.
    pub fn is_valid(&self, value: &Value) -> bool {
        self.inner.validator.is_valid(value)
    }
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Validator")
    }
}

/// `$`, `$.items[1]`, `$["a key"]`: a JSON path a model can read.
fn json_path(location: &Location) -> String {
    use jsonschema::paths::LocationSegment;
    let mut out = String::from("$");
    for segment in location.iter() {
        match segment {
            LocationSegment::Index(i) => out.push_str(&format!("[{i}]")),
            LocationSegment::Property(p) => push_key(&mut out, &p),
        }
    }
    out
}

/// Appends a key to a JSON path: `.key` for a plain name, `["a key"]` otherwise.
pub(crate) fn push_key(out: &mut String, key: &str) {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        out.push('.');
        out.push_str(key);
    } else {
        out.push_str(&format!("[{}]", Value::String(key.into())));
    }
}

/// How many errors [`Validator::check`] lists; the rest are counted (`(and N more errors)`).
///
/// A model gets every error of its arguments in one message, so it can fix them all in one turn;
/// the bound keeps a message about a large value from filling the conversation (each listed error
/// is also cut to 600 characters when it reaches the model).
pub const MAX_LISTED_ERRORS: usize = 10;

/// Above this many JSON values, [`Validator::check`] reports the first error only: jsonschema
/// collects every error before handing one over, in memory in proportion to the value.
const MAX_VALUES_LISTED: usize = 10_000;

/// How many values of an `enum` an error lists; the rest are counted.
const MAX_LISTED_VALUES: usize = 20;

/// How many `$ref`s [`follow_refs`] follows before giving up (a cycle of bare `$ref`s).
const MAX_REF_HOPS: usize = 16;

/// The lines of an error report: at most [`MAX_LISTED_ERRORS`], the rest counted.
#[derive(Default)]
struct Report {
    lines: Vec<String>,
    more: usize,
    /// Why the list is not complete, when it is not for another reason than its bound.
    note: Option<String>,
}

impl Report {
    /// Adds a line, made only if there is room for it.
    fn push(&mut self, line: impl FnOnce() -> String) {
        if self.lines.len() < MAX_LISTED_ERRORS {
            self.lines.push(line());
        } else {
            self.more += 1;
        }
    }

    /// Explains every error of a value (see [`explain`]), but the type errors that an `enum` or
    /// `const` error at the same place says more than (see [`without_redundant_types`]).
    fn explain_all(&mut self, errors: &[ValidationError<'_>], root: &Value) {
        for error in without_redundant_types(errors) {
            explain(error, root, "", self);
        }
    }

    fn is_full(&self) -> bool {
        self.lines.len() >= MAX_LISTED_ERRORS
    }

    fn finish(mut self) -> String {
        if self.more > 0 {
            let s = if self.more == 1 { "" } else { "s" };
            self.lines
                .push(format!("(and {} more error{s})", self.more));
        }
        self.lines.extend(self.note);
        self.lines.join("\n")
    }
}

/// The errors but the type errors of a value that also fails an `enum` or `const`: the allowed
/// values, which that error lists, say what the type error says and more.
fn without_redundant_types<'e, 'i>(
    errors: &'e [ValidationError<'i>],
) -> impl Iterator<Item = &'e ValidationError<'i>> {
    let listed: std::collections::HashSet<&Location> = errors
        .iter()
        .filter(|e| {
            matches!(
                e.kind(),
                ValidationErrorKind::Enum { .. } | ValidationErrorKind::Constant { .. }
            )
        })
        .map(ValidationError::instance_path)
        .collect();
    errors.iter().filter(move |e| {
        !(matches!(e.kind(), ValidationErrorKind::Type { .. })
            && listed.contains(&e.instance_path()))
    })
}

/// Whether a value holds more than `limit` JSON values (itself, and every element and member,
/// at any depth). Stops counting at the limit.
fn has_more_values(value: &Value, limit: usize) -> bool {
    let mut stack = vec![value];
    let mut count = 0;
    while let Some(value) = stack.pop() {
        count += 1;
        if count > limit {
            return true;
        }
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    false
}

/// Adds the lines that explain a failure to the report, each `<prefix><path>: <reason>`, written
/// for a model to act on (the error path only: a valid value never gets here).
///
/// - `enum`: every allowed value, up to [`MAX_LISTED_VALUES`] (`"x" is not one of "a", "b"`);
/// - `const`: the given value and the only allowed one;
/// - `oneOf`/`anyOf` that no branch matches (see [`no_branch`]): the branch the value came closest
///   to and each of that branch's own errors, explained the same way (a line each), so a nested
///   `oneOf` points at the deepest failures;
/// - `oneOf` that several branches match: which ones;
/// - anything else: jsonschema's message.
///
/// Once the report is full, an error is counted without being explained.
fn explain(e: &ValidationError<'_>, root: &Value, prefix: &str, report: &mut Report) {
    if report.is_full() {
        report.more += 1;
        return;
    }
    let path = json_path(e.instance_path());
    match e.kind() {
        ValidationErrorKind::Enum { options } => {
            let options = options.as_array().map(Vec::as_slice).unwrap_or_default();
            report.push(|| {
                format!(
                    "{prefix}{path}: {}",
                    not_one_of(e.instance(), options.iter())
                )
            });
        }
        ValidationErrorKind::Constant { expected_value } => report.push(|| {
            format!(
                "{prefix}{path}: {} is not {expected_value}, the only allowed value",
                e.instance()
            )
        }),
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            if !no_branch(e, context, root, &path, prefix, report) {
                report.push(|| format!("{prefix}{path}: {e}"));
            }
        }
        ValidationErrorKind::OneOfMultipleValid { context } => {
            let branches = Branches::new(e, root, context.len());
            let valid: Vec<String> = context
                .iter()
                .enumerate()
                .filter(|(_, errors)| errors.is_empty())
                .map(|(i, _)| branches.describe(i))
                .collect();
            report.push(|| {
                if valid.len() < 2 {
                    return format!("{prefix}{path}: {e}");
                }
                format!(
                    "{prefix}{path}: matches more than one variant ({}), but must match exactly one",
                    join_and(&valid)
                )
            });
        }
        _ => report.push(|| format!("{prefix}{path}: {e}")),
    }
}

/// `"x" is not one of "a", "b", "c"`, listing at most [`MAX_LISTED_VALUES`] and counting the rest.
fn not_one_of<'a>(value: &Value, options: impl ExactSizeIterator<Item = &'a Value>) -> String {
    let total = options.len();
    if total == 0 {
        return format!("{value} is not allowed (no value is)");
    }
    format!("{value} is not one of {}", list(options))
}

/// `"a", "b", "c"`: at most [`MAX_LISTED_VALUES`], then `(and N more)`.
fn list<'a>(values: impl ExactSizeIterator<Item = &'a Value>) -> String {
    let total = values.len();
    let listed: Vec<String> = values
        .take(MAX_LISTED_VALUES)
        .map(Value::to_string)
        .collect();
    let mut out = listed.join(", ");
    if total > MAX_LISTED_VALUES {
        out.push_str(&format!(" (and {} more)", total - MAX_LISTED_VALUES));
    }
    out
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Explains a `oneOf`/`anyOf` that no branch matched, from each branch's errors (`context`, as
/// jsonschema collects them), into the report; `false` (and nothing added) when there is nothing
/// better to say than jsonschema's message.
///
/// Only the branches of the value's JSON type count. None: the types the branches take. One (an
/// `Option`-like `anyOf` with `null`, an enum's only string branch): that branch's errors alone.
/// Several that refuse nothing but the value itself (a unit enum whose variants have doc comments,
/// one `const` each): every allowed value. An object no branch is tagged for: the tags (see
/// [`Branches::bad_tag`]). Otherwise the closest branch, with each of its errors: one whose tag
/// the value carries, else the one with the fewest errors, then the deepest one, then the first.
fn no_branch(
    e: &ValidationError<'_>,
    context: &[Vec<ValidationError<'static>>],
    root: &Value,
    path: &str,
    prefix: &str,
    report: &mut Report,
) -> bool {
    let explain_all = |errors: &[ValidationError<'static>], prefix: &str, report: &mut Report| {
        for inner in errors {
            explain(inner, root, prefix, report);
        }
        !errors.is_empty()
    };
    if let [only] = context {
        return explain_all(only, prefix, report);
    }
    let value: &Value = e.instance();
    let base = e.instance_path();
    let other_types: Vec<Option<Vec<String>>> = context
        .iter()
        .map(|errors| other_type(errors, base))
        .collect();
    // The branches the value's JSON type fits: the others are not close.
    let of_type: Vec<usize> = (0..context.len())
        .filter(|&i| other_types[i].is_none())
        .collect();
    match of_type.as_slice() {
        [] => {
            let mut types: Vec<String> = Vec::new();
            for name in other_types.into_iter().flatten().flatten() {
                let name = format!("\"{name}\"");
                if !types.contains(&name) {
                    types.push(name);
                }
            }
            if types.is_empty() {
                return false;
            }
            report.push(|| {
                format!(
                    "{prefix}{path}: {value} is not of type {}",
                    types.join(" or ")
                )
            });
            return true;
        }
        [only] => return explain_all(&context[*only], prefix, report),
        _ => {}
    }
    if let Some(allowed) = only_values(&of_type, context, base) {
        report.push(|| format!("{prefix}{path}: {}", not_one_of(value, allowed.into_iter())));
        return true;
    }
    let branches = Branches::new(e, root, context.len());
    if let Some(message) = branches.bad_tag(value, path, &of_type) {
        report.push(|| format!("{prefix}{message}"));
        return true;
    }
    let depth = |errors: &[ValidationError<'static>]| {
        errors
            .iter()
            .map(|x| x.instance_path().iter().count())
            .max()
            .unwrap_or(0)
    };
    let closest = of_type
        .iter()
        .copied()
        .filter(|&i| !context[i].is_empty())
        .min_by_key(|&i| {
            (
                !branches.tag_matches(i, value),
                context[i].len(),
                std::cmp::Reverse(depth(&context[i])),
                i,
            )
        });
    let Some(closest) = closest else {
        return false;
    };
    let prefix = format!(
        "{prefix}{path}: matches no variant; closest is {}, which fails: ",
        branches.describe(closest)
    );
    explain_all(&context[closest], &prefix, report)
}

/// The JSON types a branch wanted when it failed only because the value is of another type: a type
/// error at the value itself, or a `oneOf`/`anyOf` there whose every branch did (an `Option` of a
/// tagged enum); `None` when the branch fits the value's type.
fn other_type(errors: &[ValidationError<'static>], at: &Location) -> Option<Vec<String>> {
    errors
        .iter()
        .filter(|x| x.instance_path() == at)
        .find_map(|x| match x.kind() {
            ValidationErrorKind::Type { kind } => Some(match kind {
                TypeKind::Single(t) => vec![t.to_string()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect(),
            }),
            ValidationErrorKind::OneOfNotValid { context }
            | ValidationErrorKind::AnyOf { context } => {
                let mut all = Vec::new();
                for errors in context {
                    all.extend(other_type(errors, at)?);
                }
                Some(all)
            }
            _ => None,
        })
}

/// The values allowed by branches that refuse nothing but the value itself (each a `const` or an
/// `enum`, such as the variants of a unit enum with doc comments); `None` if any refuses more.
fn only_values<'e>(
    branches: &[usize],
    context: &'e [Vec<ValidationError<'static>>],
    at: &Location,
) -> Option<Vec<&'e Value>> {
    let mut allowed: Vec<&Value> = Vec::new();
    for &i in branches {
        for error in &context[i] {
            if error.instance_path() != at {
                return None;
            }
            let values: Vec<&Value> = match error.kind() {
                ValidationErrorKind::Constant { expected_value } => vec![&**expected_value],
                ValidationErrorKind::Enum { options } => options.as_array()?.iter().collect(),
                _ => return None,
            };
            for v in values {
                if !allowed.contains(&v) {
                    allowed.push(v);
                }
            }
        }
    }
    (!allowed.is_empty()).then_some(allowed)
}

/// One branch of a failed `oneOf`/`anyOf`, as the schema gives it.
struct Branch<'s> {
    schema: &'s Value,
    /// `(property, allowed values)` for each property that is a `const` or an `enum`.
    tags: Vec<(&'s str, Vec<&'s Value>)>,
    /// The one property of an externally tagged variant (`{"Every": {...}}`: its only property,
    /// required, and no other allowed).
    key: Option<&'s str>,
}

/// The branches of a failed `oneOf`/`anyOf`, read from the schema (`$ref`s to `#...` followed);
/// a branch the schema does not give (an unexpected location) is described by its number alone.
struct Branches<'s> {
    branches: Vec<Option<Branch<'s>>>,
    /// Properties that are a `const`/`enum` in at least two branches, not allowing the same values
    /// in all: the variants' tags.
    tag_keys: Vec<&'s str>,
}

impl<'s> Branches<'s> {
    fn new(e: &ValidationError<'_>, root: &'s Value, count: usize) -> Self {
        let listed = root
            .pointer(e.schema_path().as_str())
            .and_then(Value::as_array);
        let branches: Vec<Option<Branch<'_>>> = (0..count)
            .map(|i| {
                let schema = follow_refs(root, listed?.get(i)?)?;
                Some(Branch {
                    schema,
                    tags: tags(root, schema),
                    key: external_key(schema),
                })
            })
            .collect();
        let mut by_key: Vec<(&str, Vec<&Vec<&Value>>)> = Vec::new();
        for (key, allowed) in branches.iter().flatten().flat_map(|b| &b.tags) {
            match by_key.iter_mut().find(|(k, _)| k == key) {
                Some((_, sets)) => sets.push(allowed),
                None => by_key.push((key, vec![allowed])),
            }
        }
        let tag_keys = by_key
            .into_iter()
            .filter(|(_, sets)| sets.len() >= 2 && sets.iter().any(|s| *s != sets[0]))
            .map(|(key, _)| key)
            .collect();
        Branches { branches, tag_keys }
    }

    /// Branch `i`'s tags (properties that tag a variant), with their allowed values.
    fn tags(&self, i: usize) -> impl Iterator<Item = &(&'s str, Vec<&'s Value>)> {
        self.branches
            .get(i)
            .and_then(Option::as_ref)
            .into_iter()
            .flat_map(|b| &b.tags)
            .filter(|(key, _)| self.tag_keys.contains(key))
    }

    /// Branch `i`'s external tag (its one property), if it is such a variant.
    fn key(&self, i: usize) -> Option<&'s str> {
        self.branches.get(i)?.as_ref()?.key
    }

    /// Whether the value carries one of branch `i`'s tags, or its external tag.
    fn tag_matches(&self, i: usize, value: &Value) -> bool {
        let Some(object) = value.as_object() else {
            return false;
        };
        self.key(i).is_some_and(|key| object.contains_key(key))
            || self.tags(i).any(|(key, allowed)| {
                object
                    .get(*key)
                    .is_some_and(|given| allowed.contains(&given))
            })
    }

    /// When the value is an object that no branch (of `candidates`) is tagged for: a tag property
    /// that every candidate requires, the value lacking it or giving a value no branch allows
    /// (`<path>.<tag>: "x" is not one of ...`, `<path>: "<tag>" is a required property (one of
    /// ...)`), or externally tagged candidates, none of whose keys the value has.
    fn bad_tag(&self, value: &Value, path: &str, candidates: &[usize]) -> Option<String> {
        let object = value.as_object()?;
        if candidates.iter().any(|&i| self.tag_matches(i, value)) {
            return None;
        }
        let keys: Option<Vec<&str>> = candidates.iter().map(|&i| self.key(i)).collect();
        if let Some(keys) = keys {
            let keys: Vec<Value> = keys.into_iter().map(|k| Value::String(k.into())).collect();
            return Some(format!(
                "{path}: the object must have one of the variant keys {}",
                list(keys.iter())
            ));
        }
        'keys: for key in &self.tag_keys {
            let mut allowed: Vec<&Value> = Vec::new();
            for &i in candidates {
                let (Some(branch), Some((_, values))) = (
                    self.branches[i].as_ref(),
                    self.tags(i).find(|(k, _)| k == key),
                ) else {
                    continue 'keys;
                };
                let required = branch
                    .schema
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|k| k == key));
                if !required {
                    continue 'keys;
                }
                for v in values {
                    if !allowed.contains(v) {
                        allowed.push(v);
                    }
                }
            }
            return Some(match object.get(*key) {
                Some(given) => {
                    let mut at = path.to_string();
                    push_key(&mut at, key);
                    format!("{at}: {}", not_one_of(given, allowed.into_iter()))
                }
                None => format!(
                    "{path}: {} is a required property (one of {})",
                    Value::String((*key).into()),
                    list(allowed.into_iter())
                ),
            });
        }
        None
    }

    /// `the variant with "kind": "sms"` (by its tag), `the variant "Every"` (by its external tag),
    /// `the variant "Title"`, or `variant 2 of 3`.
    fn describe(&self, i: usize) -> String {
        if let Some((key, allowed)) = self.tags(i).next() {
            let key = Value::String((*key).into());
            return match allowed.as_slice() {
                [one] => format!("the variant with {key}: {one}"),
                _ => format!(
                    "the variant with {key}: one of {}",
                    list(allowed.iter().copied())
                ),
            };
        }
        if let Some(key) = self.key(i) {
            return format!("the variant {}", Value::String(key.into()));
        }
        if let Some(title) = self.branches[i]
            .as_ref()
            .and_then(|b| b.schema.get("title"))
            .and_then(Value::as_str)
        {
            return format!("the variant {}", Value::String(title.into()));
        }
        format!("variant {} of {}", i + 1, self.branches.len())
    }
}

/// A schema's properties that are a `const` or an `enum`, with their allowed values.
fn tags<'s>(root: &'s Value, schema: &'s Value) -> Vec<(&'s str, Vec<&'s Value>)> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .filter_map(|(key, property)| {
            let property = follow_refs(root, property)?;
            let allowed: Vec<&Value> = if let Some(value) = property.get("const") {
                vec![value]
            } else {
                property.get("enum")?.as_array()?.iter().collect()
            };
            Some((key.as_str(), allowed))
        })
        .collect()
}

/// The one property of an externally tagged variant (serde's default for an enum variant with
/// data): the schema's only property, required, with `additionalProperties: false`.
fn external_key(schema: &Value) -> Option<&str> {
    if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return None;
    }
    let properties = schema.get("properties")?.as_object()?;
    let required = schema.get("required")?.as_array()?;
    match (properties.len(), required.as_slice()) {
        (1, [Value::String(key)]) if properties.contains_key(key) => Some(key),
        _ => None,
    }
}

/// Follows a schema's `$ref`s within the document (`#` or `#/json/pointer`); `None` for one that
/// leaves it or does not resolve.
fn follow_refs<'s>(root: &'s Value, mut schema: &'s Value) -> Option<&'s Value> {
    for _ in 0..MAX_REF_HOPS {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            return Some(schema);
        };
        schema = root.pointer(reference.strip_prefix('#')?)?;
    }
    None
}

/// The base URI a schema is registered under while its defaults are checked (see
/// [`check_defaults`]).
const DEFAULTS_BASE: &str = "urn:phaseo-agent:parameters";

/// Checks every `default` in a schema against the subschema that carries it, where the schema's
/// `$ref`s resolve as in the whole schema: the error names the first default its subschema
/// refuses, where it is, and why. schemars writes a field's `#[serde(default)]` value there, and
/// the input type decodes that value when the model leaves the field out, so a default the schema
/// refuses would reach the tool although the model could never send it.
///
/// Only a schema with a `default` pays for more than a walk: the schema registered once, and a
/// validator compiled per default.
pub(crate) fn check_defaults(schema: &Value) -> Result<(), String> {
    let defaults = defaults(schema);
    if defaults.is_empty() {
        return Ok(());
    }
    let registry = jsonschema::Registry::new()
        .add(DEFAULTS_BASE, schema)
        .and_then(|builder| builder.prepare())
        .map_err(|e| format!("the schema does not compile: {e}"))?;
    for (pointer, default) in defaults {
        let at = serde_json::json!({"$ref": format!("{DEFAULTS_BASE}#{}", fragment(&pointer))});
        let validator = jsonschema::options()
            .with_registry(&registry)
            .build(&at)
            .map_err(|e| format!("the schema does not compile: {e}"))?;
        let errors: Vec<ValidationError<'_>> = validator.iter_errors(default).collect();
        if errors.is_empty() {
            continue;
        }
        let mut report = Report::default();
        report.explain_all(&errors, schema);
        let field = match pointer.rsplit_once('/') {
            Some((parent, name)) if parent.ends_with("/properties") => {
                format!("the field {}", Value::String(unescape(name)))
            }
            _ => "the value".to_owned(),
        };
        // The default's own errors: `$` is the default itself.
        let reasons: Vec<String> = report
            .finish()
            .lines()
            .map(|line| line.strip_prefix("$: ").unwrap_or(line).to_owned())
            .collect();
        return Err(format!(
            "the default of {field} (at `{pointer}` in the parameter schema) fails its own \
             schema: {}; the tool would receive it whenever the model leaves the field out, \
             although the model may not send it: make the default pass the schema, or change the \
             schema",
            reasons.join("; ")
        ));
    }
    Ok(())
}

/// Every `default` of a schema, with the JSON pointer of the subschema that carries it: the
/// subschemas are read where JSON Schema puts them (under `properties`, `items`, `$defs`, `anyOf`
/// and the rest), so a property named `default` is not taken for one.
fn defaults(schema: &Value) -> Vec<(String, &Value)> {
    const ONE: &[&str] = &[
        "additionalProperties",
        "items",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "additionalItems",
    ];
    const LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
    const MAP: &[&str] = &[
        "properties",
        "patternProperties",
        "$defs",
        "definitions",
        "dependentSchemas",
    ];
    let mut found = Vec::new();
    let mut stack = vec![(String::new(), schema)];
    while let Some((pointer, schema)) = stack.pop() {
        let Some(map) = schema.as_object() else {
            continue;
        };
        if let Some(default) = map.get("default") {
            found.push((pointer.clone(), default));
        }
        for (keyword, value) in map {
            let keyword = keyword.as_str();
            let at = |key: &str| format!("{pointer}/{}", escape(key));
            if ONE.contains(&keyword) {
                stack.push((at(keyword), value));
            } else if LIST.contains(&keyword) {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    stack.push((format!("{}/{i}", at(keyword)), item));
                }
            } else if MAP.contains(&keyword) {
                for (name, item) in value.as_object().into_iter().flatten() {
                    stack.push((format!("{}/{}", at(keyword), escape(name)), item));
                }
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// A JSON pointer segment: `~` as `~0`, `/` as `~1`.
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// A JSON pointer as a URI fragment: every byte but the unreserved ones and `/` percent-encoded.
fn fragment(pointer: &str) -> String {
    let mut out = String::with_capacity(pointer.len());
    for byte in pointer.bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
