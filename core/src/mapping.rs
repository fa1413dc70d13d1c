//! Mappings: a destination's request body built from each call, after the
//! directives of Segment's Actions destinations (its "mapping kit").
//!
//! A mapping is a JSON object. Each value in it is either a raw value,
//! written to the body as it is, or a directive: an object with exactly
//! one key, which starts with `@`:
//!
//! ```json
//! {
//!   "event_name": {"@path": "$.event"},
//!   "email": {"@default": [{"@path": "$.traits.email"}, {"@path": "$.context.traits.email"}, "unknown"]},
//!   "text": {"@template": "{{userId}} ordered {{properties.total}} {{properties.currency}}"},
//!   "items": {"@arrayPath": ["$.properties.products", {"id": {"@path": "$.product_id"}, "qty": {"@path": "quantity"}}]},
//!   "vip": {"@if": {"exists": {"@path": "$.traits.plan"}, "then": true, "else": false}},
//!   "raw": {"@literal": {"@path": "not a directive here"}}
//! }
//! ```
//!
//! * `@path`: the value at a path into the call, in the Segment message
//!   form (`type`, `event`, `name`, `category`, `userId`, `anonymousId`,
//!   `groupId`, `previousId`, `messageId`, `timestamp`, `properties`,
//!   `traits`, `context`, `integrations`). `$.` in front is optional; keys
//!   are separated by dots, array elements named by `[n]` (or a key that
//!   is a number); `$` alone is the whole call (its Segment message). A
//!   key holding a dot or a bracket cannot be named. `timestamp` is the
//!   call's, or the time the body is built, as the spec's body has it.
//! * `@template`: a string with `{{path}}` placeholders (spaces inside the
//!   braces allowed). A string is put in as it is, a number or boolean as
//!   JSON writes it, an object or array as its JSON text; a missing value
//!   or `null` as nothing.
//! * `@literal`: its value, as it is, directives inside it included.
//! * `@if`: `{"exists": m, "then": m, "else": m}`: `then` when `m` gives a
//!   value that is not `null`, else `else`. `"blank"` in place of
//!   `"exists"` also requires the value not to be the empty string (the
//!   name is Segment's). A branch left out gives nothing.
//! * `@arrayPath`: `[path, shape]`: the array at `path` with `shape` (a
//!   mapping) applied to each element, whose paths start at the element.
//!   An object at `path` is taken as an array of one; without a shape, or
//!   at a value that is neither, the value as it is.
//! * `@default`: a list; the first of its mappings that gives a value that
//!   is not `null`.
//!
//! A value that is missing is left out: of an object, its key; of an
//! array, its element. `null` is a value. The body is always an object
//! (the mapping's top level cannot be a directive). Keys come in
//! `JSON.stringify`'s order (array indices first), so a receiver that
//! checks `X-Signature` over `JSON.stringify(JSON.parse(body))` gets the
//! same bytes.
//!
//! A mapping is checked when it is given: anything but the above, or more
//! than the limits below, is an `invalid_settings` error naming the place
//! (`mapping.items.@arrayPath[1].id`). Evaluation only reads the call: a
//! value copied from a call's `properties`, `traits` or `context` text is
//! copied as its bytes, never parsed and written again, so what the call
//! held is what the receiver gets. A body over [`MAX_BODY_BYTES`] is
//! refused (`mapped_body_too_large`) rather than cut.
//!
//! Where Segment's mapping kit differs and callpost does not follow:
//! `@path` and `@template` take a string only, not a directive that makes
//! one; `@literal` does not resolve directives inside it (that is what
//! "literal" says; the kit resolves them); an `else` of `false`, `0` or
//! `""` is used (the kit skips falsy branches); `@template` writes an
//! object as JSON (the kit writes `[object Object]`).

use crate::call::{Call, CallError, Object};
use crate::code::Code;
use crate::json::{
    array_index, element_spans, element_start, member_start, value_end, write_map, write_number,
    write_string, write_value, Map, Value,
};
use crate::timestamp::Timestamp;

/// The most nodes (values, directives and template placeholders) in one
/// mapping. Segment's Actions mappings are tens of fields; this bounds the
/// work per call.
pub const MAX_NODES: usize = 1_024;
/// The deepest nesting of a mapping's objects, arrays and directives: a
/// mapping a person writes is a few levels deep; this bounds the
/// evaluator's recursion (with [`crate::json::MAX_DEPTH`] for what it
/// copies).
pub const MAX_DEPTH: usize = 16;
/// The most steps in one path (`properties.items[0].sku` has four).
pub const MAX_PATH_STEPS: usize = 16;
/// The most bytes of text a mapping holds in its keys, raw values and
/// templates: a mapping is settings, not data.
pub const MAX_MAPPING_BYTES: usize = 64 * 1024;
/// The largest body a mapping may build for one call: the spec's 500 KB
/// batch limit (`batcher::MAX_BATCH_BYTES`, equal by a test; not imported,
/// as the batcher sits above the destination's settings), the largest
/// request the destination sends. A mapping can copy a value many times
/// (`@arrayPath` over a long array, `@template`), so a 32 KB call can map
/// to more.
pub const MAX_BODY_BYTES: usize = 500_000;

/// A mapping that cannot be used. Its code is `invalid_settings`; the
/// message names the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mapping{at}: {problem}")]
pub struct MappingError {
    at: String,
    problem: String,
}

impl MappingError {
    fn new(at: &str, problem: impl Into<String>) -> Self {
        Self {
            at: at.to_owned(),
            problem: problem.into(),
        }
    }

    /// The stable code: `invalid_settings`.
    pub fn code(&self) -> Code {
        Code::InvalidSettings
    }
}

/// Why a mapped body could not be built for a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MapError {
    /// The call itself is not valid.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The body would be over [`MAX_BODY_BYTES`].
    #[error("the mapped body is over {MAX_BODY_BYTES} bytes")]
    TooLarge,
}

impl MapError {
    /// The stable code: the call's, or `mapped_body_too_large`.
    pub fn code(&self) -> Code {
        match self {
            Self::Call(e) => e.code(),
            Self::TooLarge => Code::MappedBodyTooLarge,
        }
    }
}

/// A checked mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    /// The top level: an object's members, in `JSON.stringify` order.
    fields: Vec<(String, Node)>,
    /// The mapping as it was given, for showing it back.
    given: Value,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// A value with no directive in it, written once when checked.
    Raw(String),
    /// Members in `JSON.stringify` order.
    Object(Vec<(String, Self)>),
    Array(Vec<Self>),
    Path(Path),
    Template(Vec<Part>),
    If {
        test: Test,
        value: Box<Self>,
        then: Option<Box<Self>>,
        otherwise: Option<Box<Self>>,
    },
    ArrayPath {
        from: Box<Self>,
        shape: Option<Box<Self>>,
    },
    Default(Vec<Self>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Test {
    Exists,
    Blank,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Path(Path),
}

/// Steps from the scope's value; none is the value itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(Vec<Step>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(u32),
}

/// What checking counts against the limits.
struct Budget {
    nodes: usize,
    bytes: usize,
}

impl Budget {
    fn node(&mut self, at: &str) -> Result<(), MappingError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(MappingError::new(
                at,
                format!("more than {MAX_NODES} values and directives"),
            ));
        }
        Ok(())
    }

    fn text(&mut self, at: &str, n: usize) -> Result<(), MappingError> {
        self.bytes += n;
        if self.bytes > MAX_MAPPING_BYTES {
            return Err(MappingError::new(
                at,
                format!("more than {MAX_MAPPING_BYTES} bytes of text"),
            ));
        }
        Ok(())
    }
}

impl Mapping {
    /// Reads and checks the JSON form (the module docs): an object.
    pub fn from_value(value: &Value) -> Result<Self, MappingError> {
        let Value::Object(map) = value else {
            return Err(MappingError::new(
                "",
                format!("must be an object, not {}", value.type_name()),
            ));
        };
        if directive_key(map).is_some() {
            return Err(MappingError::new(
                "",
                "the top level is the body's object, not a directive",
            ));
        }
        let mut budget = Budget { nodes: 0, bytes: 0 };
        let fields = members(map, "", 1, &mut budget)?;
        Ok(Self {
            fields,
            given: value.clone(),
        })
    }

    /// The mapping as it was given (its keys in their order).
    pub fn to_value(&self) -> &Value {
        &self.given
    }

    /// Reads and checks a mapping from JSON text.
    pub fn from_json(text: &str) -> Result<Self, MappingError> {
        let value = Value::from_json_str(text)
            .map_err(|e| MappingError::new("", format!("is not JSON: {e}")))?;
        Self::from_value(&value)
    }

    /// Writes the body for `call` into `out`; `now` is the `timestamp` of a
    /// call without one. On error `out` is left as it was.
    pub fn write_body(
        &self,
        call: &Call,
        now: Timestamp,
        out: &mut Vec<u8>,
    ) -> Result<(), MapError> {
        call.validate()?;
        let start = out.len();
        let scope = Found::Call(call, now);
        let mut ev = Eval { start, out };
        let written = ev.members(&self.fields, &scope);
        match written {
            Ok(()) => Ok(()),
            Err(Overflow) => {
                out.truncate(start);
                Err(MapError::TooLarge)
            }
        }
    }

    /// The body for `call` (see [`Mapping::write_body`]).
    pub fn body(&self, call: &Call, now: Timestamp) -> Result<Vec<u8>, MapError> {
        let mut out = Vec::with_capacity(call.capacity_hint());
        self.write_body(call, now, &mut out)?;
        Ok(out)
    }
}

/// The one `@` key of a directive, if any key starts with `@`.
fn directive_key(map: &Map) -> Option<&str> {
    map.keys().find(|k| k.starts_with('@')).map(String::as_str)
}

/// An object's members checked, in `JSON.stringify`'s order: keys that
/// are array indices first, ascending, then the rest as given.
fn members(
    map: &Map,
    at: &str,
    depth: usize,
    budget: &mut Budget,
) -> Result<Vec<(String, Node)>, MappingError> {
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        let here = format!("{at}.{k}");
        budget.text(&here, k.len())?;
        out.push((k.clone(), node(v, &here, depth + 1, budget)?));
    }
    out.sort_by_key(|(k, _)| array_index(k).map_or((1, 0), |i| (0, i)));
    Ok(out)
}

fn node(value: &Value, at: &str, depth: usize, budget: &mut Budget) -> Result<Node, MappingError> {
    budget.node(at)?;
    if depth > MAX_DEPTH {
        return Err(MappingError::new(
            at,
            format!("nested more than {MAX_DEPTH} deep"),
        ));
    }
    let built = match value {
        Value::Object(map) => match directive_key(map) {
            Some(key) => {
                if map.len() > 1 {
                    return Err(MappingError::new(
                        at,
                        format!("a directive ({key}) is an object with that one key"),
                    ));
                }
                let here = format!("{at}.{key}");
                directive(key, &map[key], &here, depth, budget)?
            }
            None => Node::Object(members(map, at, depth, budget)?),
        },
        Value::Array(items) => Node::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| node(v, &format!("{at}[{i}]"), depth + 1, budget))
                .collect::<Result<_, _>>()?,
        ),
        other => raw(other, at, budget)?,
    };
    // A part with no directive in it is written once, here, by the
    // canonical writer (its text was counted as its parts were checked).
    Ok(match built {
        Node::Object(_) | Node::Array(_) if !has_directive(&built) => Node::Raw(
            value
                .to_json_string()
                .map_err(|e| MappingError::new(at, e.to_string()))?,
        ),
        other => other,
    })
}

fn raw(value: &Value, at: &str, budget: &mut Budget) -> Result<Node, MappingError> {
    let text = value
        .to_json_string()
        .map_err(|e| MappingError::new(at, e.to_string()))?;
    budget.text(at, text.len())?;
    Ok(Node::Raw(text))
}

fn has_directive(node: &Node) -> bool {
    match node {
        Node::Raw(_) => false,
        Node::Object(members) => members.iter().any(|(_, n)| has_directive(n)),
        Node::Array(items) => items.iter().any(has_directive),
        _ => true,
    }
}

fn directive(
    key: &str,
    value: &Value,
    at: &str,
    depth: usize,
    budget: &mut Budget,
) -> Result<Node, MappingError> {
    match key {
        "@path" => {
            let Value::String(text) = value else {
                return Err(MappingError::new(at, "must be a path (a string)"));
            };
            budget.text(at, text.len())?;
            Ok(Node::Path(path(text, at)?))
        }
        "@template" => {
            let Value::String(text) = value else {
                return Err(MappingError::new(at, "must be a string"));
            };
            budget.text(at, text.len())?;
            template(text, at, budget)
        }
        "@literal" => raw(value, at, budget),
        "@if" => {
            let Value::Object(opts) = value else {
                return Err(MappingError::new(
                    at,
                    "must be an object with \"exists\" or \"blank\", and \"then\" or \"else\"",
                ));
            };
            let mut test = None;
            let (mut then, mut otherwise) = (None, None);
            for (k, v) in opts {
                let here = format!("{at}.{k}");
                let mut n = || node(v, &here, depth + 1, budget);
                match k.as_str() {
                    "exists" | "blank" if test.is_some() => {
                        return Err(MappingError::new(
                            at,
                            "takes one of \"exists\" and \"blank\"",
                        ));
                    }
                    "exists" => test = Some((Test::Exists, n()?)),
                    "blank" => test = Some((Test::Blank, n()?)),
                    "then" => then = Some(Box::new(n()?)),
                    "else" => otherwise = Some(Box::new(n()?)),
                    other => {
                        return Err(MappingError::new(
                            &here,
                            format!(
                                "unknown key {}: \"exists\", \"blank\", \"then\" and \"else\" are",
                                crate::json::Quoted(other)
                            ),
                        ));
                    }
                }
            }
            let Some((test, value)) = test else {
                return Err(MappingError::new(at, "needs \"exists\" or \"blank\""));
            };
            if then.is_none() && otherwise.is_none() {
                return Err(MappingError::new(at, "needs \"then\" or \"else\""));
            }
            Ok(Node::If {
                test,
                value: Box::new(value),
                then,
                otherwise,
            })
        }
        "@arrayPath" => {
            let (from, shape) = match value {
                Value::Array(items) if (1..=2).contains(&items.len()) => (&items[0], items.get(1)),
                _ => {
                    return Err(MappingError::new(
                        at,
                        "must be [path] or [path, shape]",
                    ))
                }
            };
            let from = match from {
                Value::String(text) => {
                    budget.text(at, text.len())?;
                    Node::Path(path(text, &format!("{at}[0]"))?)
                }
                other => node(other, &format!("{at}[0]"), depth + 1, budget)?,
            };
            let shape = match shape {
                None => None,
                Some(Value::Object(m)) if directive_key(m).is_none() => Some(Box::new(node(
                    &Value::Object(m.clone()),
                    &format!("{at}[1]"),
                    depth + 1,
                    budget,
                )?)),
                Some(_) => {
                    return Err(MappingError::new(
                        &format!("{at}[1]"),
                        "a shape is an object (a mapping for each element)",
                    ))
                }
            };
            Ok(Node::ArrayPath {
                from: Box::new(from),
                shape,
            })
        }
        "@default" => {
            let Value::Array(items) = value else {
                return Err(MappingError::new(at, "must be a list of mappings"));
            };
            if items.is_empty() {
                return Err(MappingError::new(at, "must list at least one mapping"));
            }
            Ok(Node::Default(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| node(v, &format!("{at}[{i}]"), depth + 1, budget))
                    .collect::<Result<_, _>>()?,
            ))
        }
        other => Err(MappingError::new(
            at,
            format!(
                "unknown directive {}: @path, @template, @literal, @if, @arrayPath and @default are",
                crate::json::Quoted(other)
            ),
        )),
    }
}

/// Reads `$`, `$.a.b[0]`, `a.b.0`.
fn path(text: &str, at: &str) -> Result<Path, MappingError> {
    let bad =
        |why: &str| MappingError::new(at, format!("path {}: {why}", crate::json::Quoted(text)));
    let rest = match text {
        "$" => return Ok(Path(Vec::new())),
        t => t.strip_prefix("$.").unwrap_or(t),
    };
    let mut steps = Vec::new();
    for segment in rest.split('.') {
        let (key, mut indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if key.is_empty() && indices.is_empty() {
            return Err(bad("an empty key"));
        }
        if key.contains(']') {
            return Err(bad("a key holding a bracket"));
        }
        if !key.is_empty() {
            steps.push(Step::Key(key.to_owned()));
        }
        while !indices.is_empty() {
            let close = indices
                .find(']')
                .filter(|_| indices.starts_with('['))
                .ok_or_else(|| bad("an unclosed or stray bracket"))?;
            let n = array_index(&indices[1..close])
                .ok_or_else(|| bad("an index that is not a whole number"))?;
            steps.push(Step::Index(n));
            indices = &indices[close + 1..];
        }
    }
    if steps.len() > MAX_PATH_STEPS {
        return Err(bad(&format!("more than {MAX_PATH_STEPS} steps")));
    }
    Ok(Path(steps))
}

/// A piece of a text with `{{path}}` placeholders: text, or a
/// placeholder's path as written (spaces trimmed).
enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// The pieces of `text`, in order: each `{{` opens a placeholder that the
/// first `}}` after it closes. The rule of templates and URL templates.
fn pieces(text: &str) -> Result<Vec<Piece<'_>>, &'static str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or("a {{ without its }}")?;
        out.push(Piece::Placeholder(after[..close].trim()));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

fn template(text: &str, at: &str, budget: &mut Budget) -> Result<Node, MappingError> {
    let mut parts = Vec::new();
    for piece in pieces(text).map_err(|e| MappingError::new(at, e))? {
        parts.push(match piece {
            Piece::Text(t) => Part::Text(t.to_owned()),
            Piece::Placeholder(p) => {
                budget.node(at)?;
                Part::Path(path(p, at)?)
            }
        });
    }
    Ok(Node::Template(parts))
}

/// Stands for the `i`th placeholder while a URL template is checked and
/// normalised as a plain URL: letters and digits, which the URL parser
/// leaves as they are in a path and a query.
const URL_SENTINEL: &str = "cpvar";

/// An endpoint URL whose path or query takes values from each call:
/// `https://api.example.com/users/{{userId}}?group={{groupId}}`. The
/// placeholders are paths as a mapping's (`{{traits.email}}`); each value
/// is put in as `@template` writes it, then percent-encoded (every byte but
/// RFC 3986's unreserved `A-Z a-z 0-9 - . _ ~`), so a value can never add a
/// path segment, a query parameter or a fragment. A value that is missing,
/// `null`, empty, `.` or `..` refuses the call (`invalid_url_value`): it
/// would send the request to another resource than the one the URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTemplate {
    parts: Vec<Part>,
}

/// Why a call's URL could not be made from its endpoint's template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the URL template's {{{{{placeholder}}}}} has no value a URL can take from this call (missing, null, empty, . or ..)")]
pub struct UrlValueError {
    placeholder: String,
}

impl UrlValueError {
    /// The stable code: `invalid_url_value`.
    pub fn code(&self) -> Code {
        Code::InvalidUrlValue
    }
}

/// A URL template with a sentinel for each placeholder, and each
/// placeholder's text and path.
pub(crate) type Sentineled = (String, Vec<(String, Path)>);

impl UrlTemplate {
    /// The placeholders of `url`, if it has any: the URL with each one
    /// replaced by a sentinel (to check and normalise as a plain URL), and
    /// their paths. Placeholders must come after the host and port (in
    /// the path or the query); the error says why not.
    pub(crate) fn placeholders(url: &str) -> Result<Option<Sentineled>, String> {
        let Some(first) = url.find("{{") else {
            return Ok(None);
        };
        let authority_end = url
            .find("://")
            .map(|s| s + 3)
            .and_then(|from| url[from..].find(['/', '?', '#']).map(|i| from + i));
        if authority_end.is_none_or(|end| first < end) {
            return Err(
                "a URL template's values go in its path or query, not its scheme, host or port"
                    .into(),
            );
        }
        if url.contains(URL_SENTINEL) {
            return Err(format!(
                "a URL template cannot hold the text {URL_SENTINEL:?}"
            ));
        }
        let mut out = String::with_capacity(url.len());
        let mut paths = Vec::new();
        for piece in pieces(url)? {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Placeholder(text) => {
                    let p = path(text, "").map_err(|e| e.problem)?;
                    out.push_str(&format!("{URL_SENTINEL}{}z", paths.len()));
                    paths.push((text.to_owned(), p));
                }
            }
        }
        Ok(Some((out, paths)))
    }

    /// The template of `href` (the sentinel URL as the URL parser wrote
    /// it), and `href` with the placeholders written back as `{{path}}`.
    /// A placeholder the parser removed (a `..` after it) is an error: the
    /// URL would not take the value it names.
    pub(crate) fn from_normalized(
        href: &str,
        paths: Vec<(String, Path)>,
    ) -> Result<(Self, String), String> {
        // Checked again on the parser's form, where the host ends at the
        // first `/` after `://`: the text before the parse can put a
        // placeholder in the host (`http:///{{x}}` has the host `{{x}}`).
        let path_at = href
            .find("://")
            .and_then(|s| href[s + 3..].find('/').map(|i| s + 3 + i));
        if href
            .find(URL_SENTINEL)
            .is_some_and(|at| path_at.is_none_or(|p| at < p))
        {
            return Err(
                "a URL template's values go in its path or query, not its scheme, host or port"
                    .into(),
            );
        }
        let mut parts = Vec::new();
        let mut shown = String::with_capacity(href.len());
        let mut rest = href;
        for (i, (text, p)) in paths.into_iter().enumerate() {
            let sentinel = format!("{URL_SENTINEL}{i}z");
            // The parser keeps letters and digits, so each sentinel is
            // there once unless a dot segment removed it.
            let Some(at) = rest.find(&sentinel) else {
                return Err(format!(
                    "the placeholder {{{{{text}}}}} is removed by the URL's dot segments"
                ));
            };
            parts.push(Part::Text(rest[..at].to_owned()));
            shown.push_str(&rest[..at]);
            shown.push_str(&format!("{{{{{text}}}}}"));
            parts.push(Part::Path(p));
            rest = &rest[at + sentinel.len()..];
        }
        parts.push(Part::Text(rest.to_owned()));
        shown.push_str(rest);
        Ok((Self { parts }, shown))
    }

    /// The URL for `call` (whose `timestamp`, when it has none, is `now`).
    pub fn render(&self, call: &Call, now: Timestamp) -> Result<String, UrlValueError> {
        let mut url = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => url.push_str(t),
                Part::Path(p) => {
                    let mut value = String::new();
                    if let Some(found) = Found::Call(call, now).at(p) {
                        put_in_template(&found, &mut value);
                    }
                    if matches!(value.as_str(), "" | "." | "..") {
                        return Err(UrlValueError {
                            placeholder: p.to_string(),
                        });
                    }
                    for b in value.bytes() {
                        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                            url.push(char::from(b));
                        } else {
                            url.push_str(&format!("%{b:02X}"));
                        }
                    }
                }
            }
        }
        Ok(url)
    }
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("$");
        }
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(k) if i == 0 => f.write_str(k)?,
                Step::Key(k) => write!(f, ".{k}")?,
                Step::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A value found in the call: borrowed wherever it can be, so what is
/// copied keeps its bytes.
#[derive(Debug, Clone)]
enum Found<'a> {
    /// The call itself (`$`).
    Call(&'a Call, Timestamp),
    /// JSON text in `JSON.stringify` form: part of a call's object text,
    /// or of a value a directive wrote.
    Text(&'a str),
    Value(&'a Value),
    /// JSON text that starts with a value whose end is not known yet
    /// (what follows it is the rest of its container): a path steps on
    /// into it without the value being skipped to its end, which for the
    /// last member of a 30 KB object is the whole object.
    TextFrom(&'a str),
    Map(&'a Map),
    Owned(Value),
    /// A call's own string field.
    Str(&'a str),
    Time(Timestamp),
}

impl<'a> Found<'a> {
    fn object(o: &'a Object) -> Self {
        match o {
            Object::Map(m) => Self::Map(m),
            // Written by this crate's writers: UTF-8 in JSON.stringify form.
            Object::Json(j) => {
                std::str::from_utf8(j.as_bytes()).map_or(Self::Owned(Value::Null), Self::Text)
            }
        }
    }

    /// The call's field `key`, as the Segment message has it (absent and
    /// empty strings left out).
    fn field(call: &'a Call, now: Timestamp, key: &str) -> Option<Self> {
        let s = |v: &'a Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(Self::Str);
        match key {
            "type" => Some(Self::Str(call.kind.as_str())),
            "userId" => s(&call.user_id),
            "anonymousId" => s(&call.anonymous_id),
            "event" => s(&call.event),
            "name" => s(&call.name),
            "category" => s(&call.category),
            "groupId" => s(&call.group_id),
            "previousId" => s(&call.previous_id),
            "messageId" => s(&call.message_id),
            "timestamp" => Some(Self::Time(call.timestamp.unwrap_or(now))),
            "properties" => call.properties.as_ref().map(Self::object),
            "traits" => call.traits.as_ref().map(Self::object),
            "context" => call.context.as_ref().map(Self::object),
            "integrations" => call.integrations.as_ref().map(Self::Map),
            _ => None,
        }
    }

    fn step(self, step: &Step) -> Option<Self> {
        match self {
            Self::Call(call, now) => match step {
                Step::Key(k) => Self::field(call, now, k),
                Step::Index(_) => None,
            },
            Self::Text(text) | Self::TextFrom(text) => {
                let from = match step {
                    Step::Key(k) => match text.as_bytes().first() {
                        Some(b'[') => element_start(text, array_index(k)?)?,
                        _ => member_start(text, k)?,
                    },
                    Step::Index(i) => element_start(text, *i)?,
                };
                Some(Self::TextFrom(&text[from..]))
            }
            Self::Value(v) => value_step(v, step).map(Self::Value),
            Self::Map(m) => match step {
                Step::Key(k) => m.get(k).map(Self::Value),
                Step::Index(_) => None,
            },
            Self::Owned(v) => value_step(&v, step).cloned().map(Self::Owned),
            Self::Str(_) | Self::Time(_) => None,
        }
    }

    fn at(self, path: &Path) -> Option<Self> {
        match path.0.iter().try_fold(self, Self::step)? {
            Self::TextFrom(t) => Some(Self::Text(&t[..value_end(t)?])),
            found => Some(found),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Self::Call(call, _) => {
                // A call that validated writes; a failure leaves it out.
                let mark = out.len();
                if call.write_message(out).is_err() {
                    out.truncate(mark);
                    out.extend_from_slice(b"null");
                }
            }
            Self::Text(t) => out.extend_from_slice(t.as_bytes()),
            // `at` closes every path on its value's end.
            Self::TextFrom(_) => out.extend_from_slice(b"null"),
            Self::Value(v) => write_or_null(write_value(v, out).is_ok(), out),
            Self::Owned(v) => write_or_null(write_value(v, out).is_ok(), out),
            Self::Map(m) => write_or_null(write_map(m, out).is_ok(), out),
            Self::Str(s) => write_string(s, out),
            Self::Time(t) => {
                out.push(b'"');
                t.write_iso(out);
                out.push(b'"');
            }
        }
    }
}

/// Values in a call were checked when it was made; one that still fails
/// to write (a non-finite number built by hand) is written as `null`, as
/// `JSON.stringify` writes it.
fn write_or_null(ok: bool, out: &mut Vec<u8>) {
    if !ok {
        out.extend_from_slice(b"null");
    }
}

fn value_step<'v>(v: &'v Value, step: &Step) -> Option<&'v Value> {
    match (v, step) {
        (Value::Object(m), Step::Key(k)) => m.get(k),
        (Value::Array(a), Step::Index(i)) => a.get(*i as usize),
        (Value::Array(a), Step::Key(k)) => a.get(array_index(k)? as usize),
        _ => None,
    }
}

/// The body grew past [`MAX_BODY_BYTES`].
struct Overflow;

struct Eval<'o> {
    start: usize,
    out: &'o mut Vec<u8>,
}

impl Eval<'_> {
    fn check(&self) -> Result<(), Overflow> {
        if self.out.len() - self.start > MAX_BODY_BYTES {
            Err(Overflow)
        } else {
            Ok(())
        }
    }

    fn members(&mut self, members: &[(String, Node)], scope: &Found<'_>) -> Result<(), Overflow> {
        self.out.push(b'{');
        let mut first = true;
        for (k, n) in members {
            let mark = self.out.len();
            if !first {
                self.out.push(b',');
            }
            write_string(k, self.out);
            self.out.push(b':');
            if self.node(n, scope)? {
                first = false;
            } else {
                self.out.truncate(mark);
            }
        }
        self.out.push(b'}');
        self.check()
    }

    /// Writes `node`'s value; `false` (and nothing written) when it gives
    /// none.
    fn node(&mut self, node: &Node, scope: &Found<'_>) -> Result<bool, Overflow> {
        match node {
            Node::Raw(text) => self.out.extend_from_slice(text.as_bytes()),
            Node::Object(members) => self.members(members, scope)?,
            Node::Array(items) => {
                self.out.push(b'[');
                let mut first = true;
                for n in items {
                    first = self.element(n, scope, first)?;
                }
                self.out.push(b']');
            }
            Node::Path(p) => match scope.clone().at(p) {
                Some(found) => found.write(self.out),
                None => return Ok(false),
            },
            Node::Template(parts) => {
                let mut text = String::new();
                for part in parts {
                    match part {
                        Part::Text(t) => text.push_str(t),
                        Part::Path(p) => {
                            if let Some(found) = scope.clone().at(p) {
                                put_in_template(&found, &mut text);
                            }
                        }
                    }
                }
                write_string(&text, self.out);
            }
            Node::If {
                test,
                value,
                then,
                otherwise,
            } => {
                let mark = self.out.len();
                let holds = self.node(value, scope)? && {
                    let v = &self.out[mark..];
                    v != b"null" && (*test == Test::Exists || v != b"\"\"")
                };
                self.out.truncate(mark);
                let branch = if holds { then } else { otherwise };
                return match branch {
                    Some(n) => self.node(n, scope),
                    None => Ok(false),
                };
            }
            Node::ArrayPath { from, shape } => {
                return self.array_path(from, shape.as_deref(), scope)
            }
            Node::Default(candidates) => {
                for n in candidates {
                    let mark = self.out.len();
                    if self.node(n, scope)? && &self.out[mark..] != b"null" {
                        return Ok(true);
                    }
                    self.out.truncate(mark);
                }
                return Ok(false);
            }
        }
        self.check()?;
        Ok(true)
    }

    /// Writes one array element after a comma unless `first`; returns
    /// whether the next is still the first.
    fn element(&mut self, n: &Node, scope: &Found<'_>, first: bool) -> Result<bool, Overflow> {
        let mark = self.out.len();
        if !first {
            self.out.push(b',');
        }
        if self.node(n, scope)? {
            Ok(false)
        } else {
            self.out.truncate(mark);
            Ok(first)
        }
    }

    fn array_path(
        &mut self,
        from: &Node,
        shape: Option<&Node>,
        scope: &Found<'_>,
    ) -> Result<bool, Overflow> {
        // The array as text: found in the call, or written by a directive.
        let written;
        let found = match from {
            Node::Path(p) => match scope.clone().at(p) {
                Some(f) => f,
                None => return Ok(false),
            },
            other => {
                let mut scratch = Vec::new();
                let mut ev = Eval {
                    start: 0,
                    out: &mut scratch,
                };
                if !ev.node(other, scope)? {
                    return Ok(false);
                }
                written = String::from_utf8(scratch).unwrap_or_default();
                Found::Text(&written)
            }
        };
        let Some(shape) = shape else {
            found.write(self.out);
            self.check()?;
            return Ok(true);
        };
        match elements(&found) {
            Some(items) => {
                self.out.push(b'[');
                let mut first = true;
                for item in &items {
                    first = self.element(shape, item, first)?;
                }
                self.out.push(b']');
            }
            // An object is an array of one.
            None if is_object(&found) => {
                self.out.push(b'[');
                self.element(shape, &found, true)?;
                self.out.push(b']');
            }
            None => found.write(self.out),
        }
        self.check()?;
        Ok(true)
    }
}

/// The elements of an array value, each borrowed where the array is.
fn elements<'a>(found: &Found<'a>) -> Option<Vec<Found<'a>>> {
    match found {
        Found::Text(t) if t.starts_with('[') => Some(
            element_spans(t)?
                .into_iter()
                .map(|(a, b)| Found::Text(&t[a..b]))
                .collect(),
        ),
        Found::Value(Value::Array(items)) => Some(items.iter().map(Found::Value).collect()),
        Found::Owned(Value::Array(items)) => {
            Some(items.iter().cloned().map(Found::Owned).collect())
        }
        _ => None,
    }
}

fn is_object(found: &Found<'_>) -> bool {
    match found {
        Found::Text(t) => t.starts_with('{'),
        Found::Value(Value::Object(_)) | Found::Owned(Value::Object(_)) => true,
        Found::Map(_) | Found::Call(..) => true,
        _ => false,
    }
}

/// A value as a template puts it in: strings as they are, the rest as
/// JSON text, `null` as nothing.
fn put_in_template(found: &Found<'_>, text: &mut String) {
    let string_of = |v: &Value, text: &mut String| match v {
        Value::Null => {}
        Value::String(s) => text.push_str(s),
        Value::Number(n) => {
            let mut b = Vec::new();
            if write_number(*n, &mut b).is_ok() {
                text.push_str(&String::from_utf8_lossy(&b));
            }
        }
        other => text.push_str(&other.to_json_string().unwrap_or_default()),
    };
    match found {
        Found::Str(s) => text.push_str(s),
        Found::Text(t) if t.starts_with('"') => {
            if let Ok(v) = Value::from_json_str(t) {
                string_of(&v, text);
            }
        }
        Found::Text(t) if *t == "null" => {}
        Found::Text(t) => text.push_str(t),
        Found::Value(v) => string_of(v, text),
        Found::Owned(v) => string_of(v, text),
        Found::Time(t) => {
            let mut b = Vec::new();
            t.write_iso(&mut b);
            text.push_str(&String::from_utf8_lossy(&b));
        }
        other => {
            let mut b = Vec::new();
            other.write(&mut b);
            text.push_str(&String::from_utf8_lossy(&b));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::call::CallKind;
    use crate::json::JsonObject;

    fn call() -> Call {
        let mut c = Call::new(CallKind::Track);
        c.user_id = Some("u1".into());
        c.event = Some("Order Completed".into());
        c.message_id = Some("m1".into());
        c.timestamp = Some(Timestamp::from_millis(0).unwrap());
        let props = r#"{"total":1.50,"products":[{"sku":"a","n":1e2},{"sku":"b"}],"note":"ünï","nil":null,"empty":""}"#;
        let v = Value::from_json_str(props).unwrap();
        c.properties = Some(Object::Json(
            JsonObject::from_map(v.as_object().unwrap()).unwrap(),
        ));
        c
    }

    fn map(mapping: &str) -> String {
        let m = Mapping::from_json(mapping).unwrap();
        String::from_utf8(m.body(&call(), Timestamp::from_millis(5).unwrap()).unwrap()).unwrap()
    }

    #[test]
    fn paths_copy_what_the_call_holds() {
        assert_eq!(
            map(
                r#"{"e":{"@path":"$.event"},"t":{"@path":"properties.total"},"p":{"@path":"$.properties.products[1]"},"s":{"@path":"properties.products.0.sku"},"gone":{"@path":"traits.x"},"nil":{"@path":"properties.nil"}}"#
            ),
            r#"{"e":"Order Completed","t":1.5,"p":{"sku":"b"},"s":"a","nil":null}"#
        );
    }

    #[test]
    fn keys_come_in_stringify_order() {
        assert_eq!(
            map(r#"{"b":1,"2":{"@path":"event"},"a":2,"1":3}"#),
            r#"{"1":3,"2":"Order Completed","b":1,"a":2}"#
        );
    }

    #[test]
    fn templates_put_values_in_as_text() {
        assert_eq!(
            map(
                r#"{"text":{"@template":"{{ userId }} paid {{properties.total}} for {{properties.products[0]}} {{properties.missing}}{{properties.nil}}!"}}"#
            ),
            r#"{"text":"u1 paid 1.5 for {\"sku\":\"a\",\"n\":100} !"}"#
        );
    }

    #[test]
    fn if_default_and_array_path() {
        assert_eq!(
            map(
                r#"{"a":{"@if":{"exists":{"@path":"properties.nil"},"then":1,"else":false}},"b":{"@if":{"blank":{"@path":"properties.empty"},"then":1}},"c":{"@default":[{"@path":"traits.email"},{"@path":"properties.nil"},"none"]},"d":{"@arrayPath":["properties.products",{"id":{"@path":"sku"},"n":{"@path":"$.n"}}]}}"#
            ),
            r#"{"a":false,"c":"none","d":[{"id":"a","n":100},{"id":"b"}]}"#
        );
    }

    #[test]
    fn checking_names_the_place() {
        let err = |m: &str| Mapping::from_json(m).unwrap_err().to_string();
        assert_eq!(err(r#"{"a":{"b":{"@nope":1}}}"#), "mapping.a.b.@nope: unknown directive \"@nope\": @path, @template, @literal, @if, @arrayPath and @default are");
        assert!(err(r#"{"a":{"@path":"x","y":1}}"#).starts_with("mapping.a: a directive"));
        assert!(err(r#"{"@path":"x"}"#).contains("top level"));
        assert!(err(r#"{"a":{"@path":"x[1"}}"#).contains("bracket"));
        assert!(err(r#"{"a":{"@template":"{{x"}}"#).contains("{{ without"));
        assert!(err(r#"{"a":{"@if":{"exists":1}}}"#).contains("then"));
        assert!(err("[]").contains("must be an object"));
    }

    #[test]
    fn a_body_past_the_limit_is_refused_whole() {
        let big = "x".repeat(MAX_MAPPING_BYTES / 2);
        let fields: Vec<String> = (0..20)
            .map(|i| format!("\"k{i}\":{{\"@template\":\"{{{{$}}}}{big}\"}}"))
            .collect();
        let m = Mapping::from_json(&format!("{{{}}}", fields.join(",")));
        // The mapping itself is over its own text limit.
        assert!(m.is_err());
        let m = Mapping::from_json(
            r#"{"a":{"@arrayPath":["properties.products",{"a":{"@path":"$"},"b":{"@path":"$"}}]}}"#,
        )
        .unwrap();
        let mut c = call();
        let item = format!("{{\"s\":\"{}\"}}", "y".repeat(1000));
        let products = vec![item; 30].join(",");
        let v = Value::from_json_str(&format!("{{\"products\":[{products}]}}")).unwrap();
        c.properties = Some(Object::Json(
            JsonObject::from_map(v.as_object().unwrap()).unwrap(),
        ));
        assert!(
            m.body(&c, Timestamp::from_millis(0).unwrap())
                .unwrap()
                .len()
                > 60_000
        );
        let many = format!(
            "{{\"products\":[{}]}}",
            vec![format!("{{\"s\":\"{}\"}}", "y".repeat(30_000)); 1].join(",")
        );
        let v = Value::from_json_str(&many).unwrap();
        c.properties = Some(Object::Json(
            JsonObject::from_map(v.as_object().unwrap()).unwrap(),
        ));
        let fields: Vec<String> = (0..20)
            .map(|i| format!("\"k{i}\":{{\"@path\":\"properties\"}}"))
            .collect();
        let m = Mapping::from_json(&format!("{{{}}}", fields.join(","))).unwrap();
        let mut out = b"kept".to_vec();
        assert_eq!(
            m.write_body(&c, Timestamp::from_millis(0).unwrap(), &mut out),
            Err(MapError::TooLarge)
        );
        assert_eq!(out, b"kept");
    }
}
