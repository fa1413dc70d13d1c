//! Destination filters: which calls a destination receives, and which of
//! their fields it never sees, after Segment's Destination Filters and
//! RudderStack's event filtering.
//!
//! A destination's `filters` setting is a JSON array of rules, applied in
//! order to each call before its body is built:
//!
//! ```json
//! [
//!   {"action": "drop", "if": {"field": "type", "in": ["page", "screen"]}},
//!   {"action": "keep", "if": {"or": [
//!     {"field": "event", "equals": "Order Completed"},
//!     {"field": "properties.total", "gte": 100}
//!   ]}},
//!   {"action": "drop_fields", "fields": ["context.ip", "traits.email"]}
//! ]
//! ```
//!
//! * `drop` drops the call when its condition holds; `keep` drops it when
//!   its condition does not. The first rule that drops a call ends the
//!   list: the call is filtered, neither delivered nor dead.
//! * `drop_fields` removes fields under `properties`, `traits` or
//!   `context` (when its optional `if` holds). Later rules see the call
//!   without them. The ids, `type` and `event` cannot be dropped: the body
//!   would no longer be the call it was.
//!
//! A condition is a test on one field, or `and` / `or` over a list of
//! conditions, or `not` over one:
//!
//! * `field`: `type`, `event`, `name`, `category`, `userId`,
//!   `anonymousId`, `groupId`, `previousId`, or a dotted path into
//!   `properties`, `traits` or `context` (`properties.order.total`; a key
//!   holding a dot cannot be named);
//! * with one test: `equals` (any JSON value, compared as JavaScript's
//!   data model has it: `1` equals `1.0`), `in` (a list of them),
//!   `exists` (`true` or `false`), or `gt`, `gte`, `lt`, `lte` (a number;
//!   a field that is not a number fails them).
//!
//! Settings are checked when given: an unknown key or operator, a test on
//! a field that cannot be named, or more than the limits below is an
//! `invalid_settings` error naming the rule and the place. Evaluation only
//! reads the call. Where `properties`, `traits` and `context` are still
//! text (a parsed call's), a test parses only the value it names and a
//! dropped field is cut out of the text, so nothing else is parsed or
//! written again and a kept call's body is the same bytes as without
//! filters but for the dropped fields.

use crate::call::{Call, Object};
use crate::code::Code;
use crate::json::{Map, Value};
use std::borrow::Cow;

/// The most rules one destination takes. Segment's Destination Filters
/// are a handful per destination; 32 leaves room and bounds the work per
/// call.
pub const MAX_RULES: usize = 32;
/// The deepest nesting of `and`, `or` and `not`: a filter a person writes
/// is a few levels deep; this bounds the evaluator's recursion.
pub const MAX_DEPTH: usize = 8;
/// The most conditions (tests and their combinations) in all of a
/// destination's rules, which bounds the work per call.
pub const MAX_CONDITIONS: usize = 256;
/// The most values one `in` lists, and fields one `drop_fields` removes.
pub const MAX_LIST: usize = 256;
/// The most segments in a field path (`properties.a.b` has three).
pub const MAX_PATH_SEGMENTS: usize = 8;

/// A destination filter that cannot be used. Its code is
/// `invalid_settings`; the message names the rule and the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}{at}: {problem}")]
pub struct FilterError {
    what: &'static str,
    at: String,
    problem: String,
}

impl FilterError {
    fn new(at: &str, problem: impl Into<String>) -> Self {
        Self {
            what: "filters",
            at: at.to_owned(),
            problem: problem.into(),
        }
    }

    /// The stable code: `invalid_settings`.
    pub fn code(&self) -> Code {
        Code::InvalidSettings
    }
}

/// A destination's rules, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filters {
    rules: Vec<Rule>,
}

/// What the filters decided for one call.
// Returned once per call and taken apart at once: boxing the kept call
// would add an allocation to every call a rule copies.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'a> {
    /// Send this call: the one given, or a copy without the dropped fields.
    Keep(Cow<'a, Call>),
    /// Do not send it: rule `rule` (from 0) dropped it.
    Drop {
        /// The rule's index in the list.
        rule: usize,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Rule {
    Drop(Cond),
    Keep(Cond),
    DropFields {
        fields: Vec<Path>,
        when: Option<Cond>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Cond {
    And(Vec<Self>),
    Or(Vec<Self>),
    Not(Box<Self>),
    Test(Path, Test),
}

#[derive(Debug, Clone, PartialEq)]
enum Test {
    Equals(Value),
    In(Vec<Value>),
    Exists(bool),
    Compare(Compare, f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    Gt,
    Gte,
    Lt,
    Lte,
}

/// A field: one of the call's own, or a path into one of its objects.
#[derive(Debug, Clone, PartialEq)]
enum Path {
    Own(Own),
    In(Root, Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    Type,
    Event,
    Name,
    Category,
    UserId,
    AnonymousId,
    GroupId,
    PreviousId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    Properties,
    Traits,
    Context,
}

impl Root {
    fn of(call: &Call) -> [(Self, Option<&Object>); 3] {
        [
            (Self::Properties, call.properties.as_ref()),
            (Self::Traits, call.traits.as_ref()),
            (Self::Context, call.context.as_ref()),
        ]
    }

    fn slot(self, call: &mut Call) -> &mut Option<Object> {
        match self {
            Self::Properties => &mut call.properties,
            Self::Traits => &mut call.traits,
            Self::Context => &mut call.context,
        }
    }
}

impl Filters {
    /// No rules: every call is kept as it is.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Reads and checks the JSON form (the module docs): an array of rules.
    pub fn from_value(value: &Value) -> Result<Self, FilterError> {
        let Value::Array(items) = value else {
            return Err(FilterError::new("", "must be an array of rules"));
        };
        if items.len() > MAX_RULES {
            return Err(FilterError::new(
                "",
                format!("at most {MAX_RULES} rules, not {}", items.len()),
            ));
        }
        let mut budget = MAX_CONDITIONS;
        let rules = items
            .iter()
            .enumerate()
            .map(|(i, item)| rule(item, &format!("[{i}]"), &mut budget))
            .collect::<Result<_, _>>()?;
        Ok(Self { rules })
    }

    /// Applies the rules to `call`, in order (the module docs).
    pub fn apply<'a>(&self, call: &'a Call) -> Decision<'a> {
        let mut call = Cow::Borrowed(call);
        for (i, rule) in self.rules.iter().enumerate() {
            match rule {
                Rule::Drop(c) if c.holds(&call) => return Decision::Drop { rule: i },
                Rule::Keep(c) if !c.holds(&call) => return Decision::Drop { rule: i },
                Rule::DropFields { fields, when }
                    if when.as_ref().is_none_or(|c| c.holds(&call)) =>
                {
                    for path in fields {
                        remove(&mut call, path);
                    }
                }
                _ => {}
            }
        }
        Decision::Keep(call)
    }
}

/// One condition of the language on its own: a destination's `trigger`,
/// which decides the calls it takes (Segment Actions' triggers, in the
/// filters' words). Checked as a filter's `if` is, with the same limits;
/// errors name `trigger`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    cond: Cond,
    given: Value,
}

impl Condition {
    /// Reads and checks a condition's JSON form (the module docs).
    pub fn from_value(value: &Value) -> Result<Self, FilterError> {
        let mut budget = MAX_CONDITIONS;
        let cond = cond(value, "", 1, &mut budget).map_err(|mut e| {
            e.what = "trigger";
            e
        })?;
        Ok(Self {
            cond,
            given: value.clone(),
        })
    }

    /// Whether `call` meets it.
    pub fn holds(&self, call: &Call) -> bool {
        self.cond.holds(call)
    }

    /// The condition as it was given.
    pub fn to_value(&self) -> &Value {
        &self.given
    }
}

impl Cond {
    fn holds(&self, call: &Call) -> bool {
        match self {
            Self::And(all) => all.iter().all(|c| c.holds(call)),
            Self::Or(any) => any.iter().any(|c| c.holds(call)),
            Self::Not(c) => !c.holds(call),
            Self::Test(path, test) => test.holds(lookup(call, path).as_deref()),
        }
    }
}

impl Test {
    fn holds(&self, value: Option<&Value>) -> bool {
        match (self, value) {
            (Self::Exists(want), v) => v.is_some() == *want,
            (_, None) => false,
            (Self::Equals(want), Some(v)) => v == want,
            (Self::In(list), Some(v)) => list.contains(v),
            (Self::Compare(op, n), Some(Value::Number(v))) => match op {
                Compare::Gt => v > n,
                Compare::Gte => v >= n,
                Compare::Lt => v < n,
                Compare::Lte => v <= n,
            },
            (Self::Compare(..), Some(_)) => false,
        }
    }
}

/// The field's value in `call`, or `None` where it is absent.
fn lookup<'a>(call: &'a Call, path: &Path) -> Option<Cow<'a, Value>> {
    let text = |s: &Option<String>| s.clone().map(Value::String).map(Cow::Owned);
    match path {
        Path::Own(own) => match own {
            Own::Type => Some(Cow::Owned(Value::String(call.kind.as_str().to_owned()))),
            Own::Event => text(&call.event),
            Own::Name => text(&call.name),
            Own::Category => text(&call.category),
            Own::UserId => text(&call.user_id),
            Own::AnonymousId => text(&call.anonymous_id),
            Own::GroupId => text(&call.group_id),
            Own::PreviousId => text(&call.previous_id),
        },
        Path::In(root, keys) => {
            let object = Root::of(call)
                .into_iter()
                .find(|(r, _)| r == root)
                .and_then(|(_, o)| o)?;
            match object {
                Object::Map(map) => walk(map, keys).map(Cow::Borrowed),
                // Text (a parsed call's objects): only the value named is
                // parsed, not the whole object.
                Object::Json(text) => text.get_path(keys).map(Cow::Owned),
            }
        }
    }
}

fn walk<'a>(map: &'a Map, keys: &[String]) -> Option<&'a Value> {
    let (first, rest) = keys.split_first()?;
    let mut value = map.get(first)?;
    for key in rest {
        let Value::Object(inner) = value else {
            return None;
        };
        value = inner.get(key)?;
    }
    Some(value)
}

/// Removes the field at `path` (under an object root), copying the call
/// only when the field is there.
fn remove(call: &mut Cow<'_, Call>, path: &Path) {
    let Path::In(root, keys) = path else {
        return;
    };
    let owned: Option<Object> = match Root::of(call)
        .into_iter()
        .find(|(r, _)| r == root)
        .and_then(|(_, o)| o)
    {
        // Text stays text: the member is cut out and the rest keeps its
        // bytes, with nothing parsed but the members on the way.
        Some(Object::Json(text)) => text.without_path(keys).map(Object::Json),
        Some(Object::Map(map)) if walk(map, keys).is_some() => {
            let mut map = map.clone();
            remove_in(&mut map, keys);
            Some(Object::Map(map))
        }
        _ => None,
    };
    if let Some(object) = owned {
        *root.slot(call.to_mut()) = Some(object);
    }
}

fn remove_in(map: &mut Map, keys: &[String]) {
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut at = map;
    for key in parents {
        match at.get_mut(key) {
            Some(Value::Object(inner)) => at = inner,
            _ => return,
        }
    }
    // `shift_remove` keeps the other keys' order: the body stays the same
    // bytes but for the field.
    at.shift_remove(last);
}

// ---- reading the JSON form --------------------------------------------

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map, FilterError> {
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(FilterError::new(at, "must be an object")),
    }
}

fn only(map: &Map, allowed: &[&str], at: &str) -> Result<(), FilterError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(FilterError::new(
            at,
            format!("unknown key {k:?} (expected {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn rule(v: &Value, at: &str, budget: &mut usize) -> Result<Rule, FilterError> {
    let map = object(v, at)?;
    let action = map
        .get("action")
        .and_then(Value::as_str)
        .ok_or_else(|| FilterError::new(at, "needs \"action\": drop, keep or drop_fields"))?;
    let when = |budget: &mut usize| -> Result<Option<Cond>, FilterError> {
        map.get("if")
            .map(|c| cond(c, &format!("{at}.if"), 1, budget))
            .transpose()
    };
    match action {
        "drop" | "keep" => {
            only(map, &["action", "if"], at)?;
            let c = when(budget)?.ok_or_else(|| {
                FilterError::new(at, format!("{action} needs an \"if\" condition"))
            })?;
            Ok(if action == "drop" {
                Rule::Drop(c)
            } else {
                Rule::Keep(c)
            })
        }
        "drop_fields" => {
            only(map, &["action", "fields", "if"], at)?;
            let at_fields = format!("{at}.fields");
            let Some(Value::Array(items)) = map.get("fields") else {
                return Err(FilterError::new(
                    &at_fields,
                    "must be a list of field paths",
                ));
            };
            if items.is_empty() || items.len() > MAX_LIST {
                return Err(FilterError::new(
                    &at_fields,
                    format!("must list 1 to {MAX_LIST} fields"),
                ));
            }
            let fields = items
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let at = format!("{at_fields}[{i}]");
                    match field(f, &at)? {
                        p @ Path::In(..) => Ok(p),
                        Path::Own(_) => Err(FilterError::new(
                            &at,
                            "only fields under properties, traits or context can be dropped",
                        )),
                    }
                })
                .collect::<Result<_, _>>()?;
            Ok(Rule::DropFields {
                fields,
                when: when(budget)?,
            })
        }
        other => Err(FilterError::new(
            at,
            format!("unknown action {other:?} (expected drop, keep or drop_fields)"),
        )),
    }
}

fn cond(v: &Value, at: &str, depth: usize, budget: &mut usize) -> Result<Cond, FilterError> {
    if depth > MAX_DEPTH {
        return Err(FilterError::new(
            at,
            format!("conditions nest at most {MAX_DEPTH} deep"),
        ));
    }
    if *budget == 0 {
        return Err(FilterError::new(
            at,
            format!("at most {MAX_CONDITIONS} conditions in all"),
        ));
    }
    *budget -= 1;
    let map = object(v, at)?;
    for (key, combine) in [("and", true), ("or", false)] {
        if let Some(list) = map.get(key) {
            only(map, &[key], at)?;
            let at = format!("{at}.{key}");
            let Value::Array(items) = list else {
                return Err(FilterError::new(&at, "must be a list of conditions"));
            };
            if items.is_empty() {
                return Err(FilterError::new(&at, "must not be empty"));
            }
            let all = items
                .iter()
                .enumerate()
                .map(|(i, c)| cond(c, &format!("{at}[{i}]"), depth + 1, budget))
                .collect::<Result<_, _>>()?;
            return Ok(if combine {
                Cond::And(all)
            } else {
                Cond::Or(all)
            });
        }
    }
    if let Some(inner) = map.get("not") {
        only(map, &["not"], at)?;
        let c = cond(inner, &format!("{at}.not"), depth + 1, budget)?;
        return Ok(Cond::Not(Box::new(c)));
    }
    let path = field(
        map.get("field").ok_or_else(|| {
            FilterError::new(
                at,
                "needs \"field\" and one test, or \"and\", \"or\" or \"not\"",
            )
        })?,
        &format!("{at}.field"),
    )?;
    const TESTS: [&str; 7] = ["equals", "in", "exists", "gt", "gte", "lt", "lte"];
    let mut tests = map.iter().filter(|(k, _)| k.as_str() != "field");
    let (Some((name, arg)), None) = (tests.next(), tests.next()) else {
        return Err(FilterError::new(
            at,
            format!("needs exactly one test of {}", TESTS.join(", ")),
        ));
    };
    let at = format!("{at}.{name}");
    let test = match name.as_str() {
        "equals" => Test::Equals(arg.clone()),
        "in" => match arg {
            Value::Array(items) if items.len() <= MAX_LIST => Test::In(items.clone()),
            _ => {
                return Err(FilterError::new(
                    &at,
                    format!("must be a list of at most {MAX_LIST} values"),
                ))
            }
        },
        "exists" => match arg {
            Value::Bool(b) => Test::Exists(*b),
            _ => return Err(FilterError::new(&at, "must be true or false")),
        },
        op @ ("gt" | "gte" | "lt" | "lte") => {
            let Value::Number(n) = arg else {
                return Err(FilterError::new(&at, "must be a number"));
            };
            let op = match op {
                "gt" => Compare::Gt,
                "gte" => Compare::Gte,
                "lt" => Compare::Lt,
                _ => Compare::Lte,
            };
            Test::Compare(op, *n)
        }
        other => {
            return Err(FilterError::new(
                &at,
                format!("unknown test {other:?} (expected {})", TESTS.join(", ")),
            ))
        }
    };
    Ok(Cond::Test(path, test))
}

fn field(v: &Value, at: &str) -> Result<Path, FilterError> {
    let text = v
        .as_str()
        .ok_or_else(|| FilterError::new(at, "must be a field path (text)"))?;
    let own = match text {
        "type" => Some(Own::Type),
        "event" => Some(Own::Event),
        "name" => Some(Own::Name),
        "category" => Some(Own::Category),
        "userId" => Some(Own::UserId),
        "anonymousId" => Some(Own::AnonymousId),
        "groupId" => Some(Own::GroupId),
        "previousId" => Some(Own::PreviousId),
        _ => None,
    };
    if let Some(own) = own {
        return Ok(Path::Own(own));
    }
    let mut parts = text.split('.');
    let root = match parts.next() {
        Some("properties") => Root::Properties,
        Some("traits") => Root::Traits,
        Some("context") => Root::Context,
        _ => {
            return Err(FilterError::new(
                at,
                format!(
                    "unknown field {text:?}: type, event, name, category, userId, anonymousId, \
                     groupId, previousId, or a path under properties, traits or context"
                ),
            ))
        }
    };
    let keys: Vec<String> = parts.map(str::to_owned).collect();
    if keys.is_empty() || keys.iter().any(String::is_empty) {
        return Err(FilterError::new(
            at,
            format!("{text:?} must name a key under its object, as in properties.total"),
        ));
    }
    if keys.len() + 1 > MAX_PATH_SEGMENTS {
        return Err(FilterError::new(
            at,
            format!("a path has at most {MAX_PATH_SEGMENTS} segments"),
        ));
    }
    Ok(Path::In(root, keys))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn filters(json: &str) -> Filters {
        Filters::from_value(&Value::from_json_slice(json.as_bytes()).unwrap()).unwrap()
    }

    fn refused(json: &str) -> String {
        Filters::from_value(&Value::from_json_slice(json.as_bytes()).unwrap())
            .unwrap_err()
            .to_string()
    }

    fn call(json: &str) -> Call {
        Call::from_json_str(json).unwrap()
    }

    #[test]
    fn drop_keep_and_fields_in_order() {
        let f = filters(
            r#"[{"action":"drop","if":{"field":"type","in":["page","screen"]}},
                {"action":"drop_fields","fields":["context.ip","properties.card.number"]},
                {"action":"keep","if":{"or":[{"field":"event","equals":"Order Completed"},
                                             {"field":"properties.total","gte":100}]}}]"#,
        );
        let page = call(r#"{"type":"page","userId":"u","name":"Home"}"#);
        assert_eq!(f.apply(&page), Decision::Drop { rule: 0 });
        let small =
            call(r#"{"type":"track","userId":"u","event":"Viewed","properties":{"total":5}}"#);
        assert_eq!(f.apply(&small), Decision::Drop { rule: 2 });
        let order = call(
            r#"{"type":"track","userId":"u","event":"Order Completed","context":{"ip":"1.2.3.4","locale":"fr"},
                "properties":{"card":{"number":"4242","brand":"visa"},"total":1.5}}"#,
        );
        let Decision::Keep(kept) = f.apply(&order) else {
            panic!("kept");
        };
        let props = kept.properties.as_ref().unwrap().to_map().into_owned();
        assert_eq!(
            Value::Object(props).to_json_string().unwrap(),
            r#"{"card":{"brand":"visa"},"total":1.5}"#
        );
        let ctx = kept.context.as_ref().unwrap().to_map().into_owned();
        assert_eq!(
            Value::Object(ctx).to_json_string().unwrap(),
            r#"{"locale":"fr"}"#
        );
    }

    #[test]
    fn an_untouched_call_is_not_copied() {
        let f = filters(r#"[{"action":"drop_fields","fields":["traits.email"]}]"#);
        let c = call(r#"{"type":"identify","userId":"u","traits":{"name":"Zoë"}}"#);
        assert!(matches!(f.apply(&c), Decision::Keep(Cow::Borrowed(_))));
    }

    #[test]
    fn tests_on_absent_and_mistyped_fields() {
        let c =
            call(r#"{"type":"track","userId":"u","event":"E","properties":{"n":"12","x":null}}"#);
        let holds = |cond: &str| {
            let f = filters(&format!(r#"[{{"action":"keep","if":{cond}}}]"#));
            matches!(f.apply(&c), Decision::Keep(_))
        };
        assert!(
            holds(r#"{"field":"properties.x","exists":true}"#),
            "null exists"
        );
        assert!(holds(r#"{"field":"properties.y","exists":false}"#));
        assert!(
            !holds(r#"{"field":"properties.n","gt":1}"#),
            "text is not a number"
        );
        assert!(
            !holds(r#"{"field":"anonymousId","equals":null}"#),
            "absent is not null"
        );
        assert!(holds(
            r#"{"not":{"field":"properties.n.deeper","exists":true}}"#
        ));
        assert!(holds(
            r#"{"and":[{"field":"userId","equals":"u"},{"field":"type","equals":"track"}]}"#
        ));
    }

    #[test]
    fn settings_are_checked_with_the_place_named() {
        for (json, says) in [
            (r#"{}"#, "filters: must be an array"),
            (r#"[{"action":"drop"}]"#, "filters[0]: drop needs an \"if\""),
            (r#"[{"action":"skip","if":{}}]"#, "unknown action \"skip\""),
            (
                r#"[{"action":"drop","if":{"field":"event","eq":"A"}}]"#,
                "filters[0].if.eq: unknown test",
            ),
            (
                r#"[{"action":"drop","if":{"field":"email","equals":"A"}}]"#,
                "unknown field \"email\"",
            ),
            (
                r#"[{"action":"drop","if":{"field":"properties","exists":true}}]"#,
                "must name a key",
            ),
            (
                r#"[{"action":"drop","if":{"field":"event","equals":"A","in":[]}}]"#,
                "exactly one test",
            ),
            (
                r#"[{"action":"drop","if":{"and":[]}}]"#,
                "filters[0].if.and: must not be empty",
            ),
            (
                r#"[{"action":"drop_fields","fields":["userId"]}]"#,
                "filters[0].fields[0]: only fields under",
            ),
            (
                r#"[{"action":"drop","if":{"field":"properties.n","gt":"1"}}]"#,
                "must be a number",
            ),
            (
                r#"[{"action":"keep","if":{"field":"type","equals":"track"},"else":1}]"#,
                "unknown key \"else\"",
            ),
        ] {
            let got = refused(json);
            assert!(got.contains(says), "{json}: {got}");
        }
        let deep = format!(
            r#"[{{"action":"drop","if":{}{{"field":"type","exists":true}}{}}}]"#,
            r#"{"not":"#.repeat(MAX_DEPTH),
            "}".repeat(MAX_DEPTH)
        );
        assert!(refused(&deep).contains("nest at most"));
        let many = format!(
            "[{}]",
            vec![r#"{"action":"drop","if":{"field":"type","equals":"x"}}"#; MAX_RULES + 1]
                .join(",")
        );
        assert!(refused(&many).contains("at most 32 rules"));
    }
}
