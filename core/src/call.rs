//! The Segment-spec call model: identify, track, page, screen, group, alias,
//! and the destination's delete notification.

use crate::json::{JsonError, JsonObject, Map, Parser, Quoted, Value};
use crate::timestamp::{Timestamp, TimestampError};
use serde::{Deserialize, Serialize};

/// The kind of a call, as written in its `type` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallKind {
    /// Who the user is, with traits.
    Identify,
    /// An event the user performed.
    Track,
    /// A web page view.
    Page,
    /// A mobile screen view.
    Screen,
    /// Associates the user with a group.
    Group,
    /// Merges two identities.
    Alias,
    /// A deletion request notification (destination side only).
    Delete,
}

impl CallKind {
    /// Every kind, in the order of the destination spec's body table.
    pub const ALL: [CallKind; 7] = [
        CallKind::Page,
        CallKind::Screen,
        CallKind::Identify,
        CallKind::Track,
        CallKind::Alias,
        CallKind::Group,
        CallKind::Delete,
    ];

    /// The `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Identify => "identify",
            CallKind::Track => "track",
            CallKind::Page => "page",
            CallKind::Screen => "screen",
            CallKind::Group => "group",
            CallKind::Alias => "alias",
            CallKind::Delete => "delete",
        }
    }

    /// Parses a `type` string (exact, lowercase).
    pub fn parse(s: &str) -> Option<CallKind> {
        CallKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One call. Fields follow Segment's camelCase JSON keys; all but `kind` are
/// optional here and [`Call::validate`] applies the per-kind rules.
///
/// An empty string counts as absent, as in Segment's libraries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// `type`.
    #[serde(rename = "type")]
    pub kind: CallKind,
    /// `userId`.
    pub user_id: Option<String>,
    /// `anonymousId`.
    pub anonymous_id: Option<String>,
    /// `event` (track).
    pub event: Option<String>,
    /// `name` (page, screen).
    pub name: Option<String>,
    /// `category` (page).
    pub category: Option<String>,
    /// `properties` (track, page, screen).
    pub properties: Option<Object>,
    /// `traits` (identify, group).
    pub traits: Option<Object>,
    /// `context`.
    pub context: Option<Map>,
    /// `integrations`: destination switches.
    pub integrations: Option<Map>,
    /// `groupId` (group).
    pub group_id: Option<String>,
    /// `previousId` (alias).
    pub previous_id: Option<String>,
    /// `timestamp`; absent means "now" at the point the call is stamped.
    pub timestamp: Option<Timestamp>,
    /// `messageId`; the batching client fills it in.
    pub message_id: Option<String>,
}

/// A call that breaks the spec's rules or has fields of the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The call is not a JSON object. Pass an object (a dict in Python).
    #[error("call must be a json object, got {0}")]
    NotAnObject(&'static str),
    /// The call has no `type`. Set one of identify, track, page, screen, group, alias, delete.
    #[error("call has no type")]
    MissingType,
    /// `type` is not a known kind. Use one of identify, track, page, screen, group, alias, delete.
    #[error("unknown call type {}", Quoted(.0))]
    UnknownType(String),
    /// A field has the wrong JSON type. The message names the field and what it must be.
    #[error("field {field} must be {expected}, got {got}")]
    InvalidField {
        /// The camelCase field name.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it was.
        got: &'static str,
    },
    /// `timestamp` is not ISO 8601 with a zone. Send e.g. `2026-11-22T10:04:05.123Z`.
    #[error(transparent)]
    InvalidTimestamp(#[from] TimestampError),
    /// identify, track, page, screen and group need `userId` or `anonymousId`.
    #[error("{0} call needs userId or anonymousId")]
    MissingIdentity(&'static str),
    /// alias and delete need `userId`.
    #[error("{0} call needs userId")]
    MissingUserId(&'static str),
    /// track needs `event`.
    #[error("track call needs event")]
    MissingEvent,
    /// group needs `groupId`.
    #[error("group call needs groupId")]
    MissingGroupId,
    /// alias needs `previousId`.
    #[error("alias call needs previousId")]
    MissingPreviousId,
    /// A value inside the call is not representable (see [`JsonError`]).
    #[error(transparent)]
    Json(#[from] JsonError),
}

impl CallError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotAnObject(_) => "not_an_object",
            Self::MissingType => "missing_type",
            Self::UnknownType(_) => "unknown_type",
            Self::InvalidField { .. } => "invalid_field",
            Self::InvalidTimestamp(_) => "invalid_timestamp",
            Self::MissingIdentity(_) => "missing_identity",
            Self::MissingUserId(_) => "missing_user_id",
            Self::MissingEvent => "missing_event",
            Self::MissingGroupId => "missing_group_id",
            Self::MissingPreviousId => "missing_previous_id",
            Self::Json(e) => e.code(),
        }
    }
}

fn present(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

impl Call {
    /// An empty call of `kind`; set the fields, then [`Call::validate`].
    pub fn new(kind: CallKind) -> Call {
        Call {
            kind,
            user_id: None,
            anonymous_id: None,
            event: None,
            name: None,
            category: None,
            properties: None,
            traits: None,
            context: None,
            integrations: None,
            group_id: None,
            previous_id: None,
            timestamp: None,
            message_id: None,
        }
    }

    /// [`Call::from_json_str`] over bytes, which must be UTF-8
    /// (`invalid_unicode` otherwise).
    pub fn from_json_slice(bytes: &[u8]) -> Result<Call, CallError> {
        let text =
            std::str::from_utf8(bytes).map_err(|_| CallError::Json(JsonError::InvalidUnicode))?;
        Self::from_json_str(text)
    }

    /// Parses and validates a call from JSON text.
    ///
    /// The top-level object is read field by field into a [`CallBuilder`];
    /// `properties` and `traits` that are already in `JSON.stringify` form
    /// (as text from JavaScript always is) are kept as their text instead
    /// of being parsed into a map. The result is the same call as
    /// `Call::from_owned(Value::from_json_str(text)?)` would give, in the
    /// sense that every body and message written from it has the same
    /// bytes, and every error has the same code.
    pub fn from_json_str(text: &str) -> Result<Call, CallError> {
        let mut p = Parser::new(text);
        p.ws();
        if !p.eat(b'{') {
            let value = p.value(1)?;
            p.end()?;
            return Err(CallError::NotAnObject(value.type_name()));
        }
        let mut b = CallBuilder::new();
        // A repeated model key: JSON.parse keeps the last value, but the
        // builder has already judged the first. Rare; take the tree path.
        let mut seen = 0u32;
        let mut repeated = false;
        p.entries(|p, key| -> Result<(), CallError> {
            let kind = CallBuilder::field_kind(&key);
            if kind != FieldKind::Ignored {
                let bit = FIELDS
                    .iter()
                    .position(|f| *f == key)
                    .map_or(1 << FIELDS.len(), |i| 1 << i);
                repeated |= seen & bit != 0;
                seen |= bit;
            }
            p.ws();
            if kind == FieldKind::Object && !repeated {
                if let Some(text) = p.canonical_object(2) {
                    let object = JsonObject::from_canonical(text);
                    b.object(&key, Object::Json(object));
                    return Ok(());
                }
            }
            match (kind, p.value(2)?) {
                (FieldKind::Ignored, _) => {}
                (FieldKind::Object | FieldKind::Map, Value::Object(m)) => {
                    b.object(&key, Object::Map(m));
                }
                (_, value) => b.scalar(&key, Scalar::of(&value)),
            }
            Ok(())
        })?;
        p.end()?;
        if repeated {
            return Call::from_owned(Value::from_json_str(text)?);
        }
        b.finish()
    }

    /// Parses and validates a call from a JSON value with Segment's keys.
    /// Keys this model does not know are ignored.
    pub fn from_value(value: &Value) -> Result<Call, CallError> {
        Call::from_owned(value.clone())
    }

    /// [`Call::from_value`] taking ownership, so the free-form objects move
    /// into the call instead of being copied (the bindings' hot path).
    pub fn from_owned(value: Value) -> Result<Call, CallError> {
        let map = match value {
            Value::Object(m) => m,
            other => return Err(CallError::NotAnObject(other.type_name())),
        };
        let mut b = CallBuilder::new();
        for (key, value) in map {
            match (CallBuilder::field_kind(&key), value) {
                (FieldKind::Ignored, _) => {}
                (FieldKind::Object | FieldKind::Map, Value::Object(m)) => {
                    b.object(&key, Object::Map(m));
                }
                (_, value) => b.scalar(&key, Scalar::of(&value)),
            }
        }
        b.finish()
    }

    /// Applies the spec's rules for this kind (client-library.md, rule 1):
    /// identify, track, page, screen and group need userId or anonymousId;
    /// track needs event; group needs groupId; alias needs userId and
    /// previousId; delete needs userId.
    pub fn validate(&self) -> Result<(), CallError> {
        let kind = self.kind.as_str();
        match self.kind {
            CallKind::Alias | CallKind::Delete => {
                if !present(&self.user_id) {
                    return Err(CallError::MissingUserId(kind));
                }
            }
            _ => {
                if !present(&self.user_id) && !present(&self.anonymous_id) {
                    return Err(CallError::MissingIdentity(kind));
                }
            }
        }
        match self.kind {
            CallKind::Track if !present(&self.event) => Err(CallError::MissingEvent),
            CallKind::Group if !present(&self.group_id) => Err(CallError::MissingGroupId),
            CallKind::Alias if !present(&self.previous_id) => Err(CallError::MissingPreviousId),
            _ => Ok(()),
        }
    }

    /// Writes the call as a Segment-spec message (the form the tracking
    /// API's `/v1/batch` takes), in `JSON.stringify` form. Absent and empty
    /// fields are left out. Keys come in a fixed order: `type`, `messageId`,
    /// `timestamp`, ids, names, then the free-form objects.
    pub fn write_message(&self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        self.write_message_with_context(out, None)
    }

    /// [`Call::write_message`], with `context` written as the given JSON
    /// text when the call has none (the batcher's `{"library":…}`, written
    /// once instead of built as a map for every message).
    pub(crate) fn write_message_with_context(
        &self,
        out: &mut Vec<u8>,
        default_context: Option<&str>,
    ) -> Result<(), JsonError> {
        use crate::json::{write_map, write_string};
        out.push(b'{');
        out.extend_from_slice(b"\"type\":");
        write_string(self.kind.as_str(), out);
        let strings = [
            ("messageId", &self.message_id),
            ("userId", &self.user_id),
            ("anonymousId", &self.anonymous_id),
            ("event", &self.event),
            ("name", &self.name),
            ("category", &self.category),
            ("groupId", &self.group_id),
            ("previousId", &self.previous_id),
        ];
        for (i, (key, value)) in strings.into_iter().enumerate() {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                out.push(b',');
                write_string(key, out);
                out.push(b':');
                write_string(v, out);
            }
            if i == 0 {
                if let Some(ts) = self.timestamp {
                    out.extend_from_slice(b",\"timestamp\":\"");
                    ts.write_iso(out);
                    out.push(b'"');
                }
            }
        }
        for (key, value) in [("properties", &self.properties), ("traits", &self.traits)] {
            if let Some(o) = value {
                out.push(b',');
                write_string(key, out);
                out.push(b':');
                o.write(out)?;
            }
        }
        for (key, value) in [
            ("context", &self.context),
            ("integrations", &self.integrations),
        ] {
            if let Some(m) = value {
                out.push(b',');
                write_string(key, out);
                out.push(b':');
                write_map(m, out)?;
            } else if let Some(text) = default_context.filter(|_| key == "context") {
                out.extend_from_slice(b",\"context\":");
                out.extend_from_slice(text.as_bytes());
            }
        }
        out.push(b'}');
        Ok(())
    }

    /// Room to reserve for a body or message of this call: the free-form
    /// objects' text plus the rest, so writing it never reallocates (and
    /// copies) the buffer as it grows.
    pub(crate) fn capacity_hint(&self) -> usize {
        let text = |o: &Option<Object>| match o {
            Some(Object::Json(j)) => j.as_bytes().len(),
            _ => 0,
        };
        320 + text(&self.properties) + text(&self.traits)
    }

    /// The `userId`, when present and non-empty.
    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref().filter(|s| !s.is_empty())
    }
}

/// A free-form object of a call (`properties`, `traits`): a map, or the
/// JSON text a binding wrote straight from its own values (the fast path:
/// no tree is built, and the body copies the text). Two objects with the
/// same content in different variants are not `==`.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    /// A parsed or hand-built map.
    Map(Map),
    /// Text in `JSON.stringify` form.
    Json(JsonObject),
}

impl Object {
    /// Writes `JSON.stringify(self)`.
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        match self {
            Object::Map(m) => crate::json::write_map(m, out),
            Object::Json(j) => {
                out.extend_from_slice(j.as_bytes());
                Ok(())
            }
        }
    }

    /// The object as a map (parsing the text form).
    pub fn to_map(&self) -> std::borrow::Cow<'_, Map> {
        match self {
            Object::Map(m) => std::borrow::Cow::Borrowed(m),
            Object::Json(j) => std::borrow::Cow::Owned(j.to_map()),
        }
    }
}

impl From<Map> for Object {
    fn from(m: Map) -> Self {
        Object::Map(m)
    }
}

impl From<JsonObject> for Object {
    fn from(j: JsonObject) -> Self {
        Object::Json(j)
    }
}

impl Serialize for Object {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Object::Map)
    }
}

/// What [`CallBuilder`] wants for a top-level key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Not part of the model: skip the value without converting it.
    Ignored,
    /// A string, number or null: pass it to [`CallBuilder::scalar`].
    Scalar,
    /// `properties` or `traits`: an object, best as a [`JsonObject`]
    /// written straight from host values, for [`CallBuilder::object`].
    Object,
    /// `context` or `integrations`: an object as a [`Map`] (the core reads
    /// inside it), for [`CallBuilder::object`].
    Map,
}

/// A top-level value as a binding sees it, for [`CallBuilder::scalar`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    /// `null`/`None`/`undefined`: the field is absent.
    Null,
    /// A string.
    Str(&'a str),
    /// A number (already checked by the binding to be one JS would keep).
    Number(f64),
    /// Anything else, by its JSON type name (`"boolean"`, `"array"`, …).
    Other(&'static str),
}

impl<'a> Scalar<'a> {
    /// The scalar view of a [`Value`].
    pub fn of(v: &'a Value) -> Self {
        match v {
            Value::Null => Scalar::Null,
            Value::String(s) => Scalar::Str(s),
            Value::Number(n) => Scalar::Number(*n),
            other => Scalar::Other(other.type_name()),
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Str(_) => "string",
            Scalar::Number(_) => "number",
            Scalar::Other(t) => t,
        }
    }
}

/// Builds a [`Call`] one top-level field at a time, applying the field rules
/// (types, numeric ids, timestamps) in one place for every source: JSON
/// values here, and the bindings' own dicts and objects, which can then
/// write `properties` and `traits` straight to JSON text.
///
/// Errors wait for [`CallBuilder::finish`], which reports them in a fixed
/// order (`type` first, then the fields in model order) whatever order the
/// keys came in.
#[derive(Debug)]
pub struct CallBuilder {
    kind: Result<Option<CallKind>, CallError>,
    call: Call,
    error: Option<(usize, CallError)>,
}

/// The model's keys in the order errors are reported; the index is the rank.
const FIELDS: [&str; 13] = [
    "userId",
    "anonymousId",
    "event",
    "name",
    "category",
    "properties",
    "traits",
    "context",
    "integrations",
    "groupId",
    "previousId",
    "timestamp",
    "messageId",
];

impl Default for CallBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl CallBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            kind: Ok(None),
            call: Call::new(CallKind::Track),
            error: None,
        }
    }

    /// How to pass the value of top-level key `key`.
    pub fn field_kind(key: &str) -> FieldKind {
        match key {
            "properties" | "traits" => FieldKind::Object,
            "context" | "integrations" => FieldKind::Map,
            "type" => FieldKind::Scalar,
            k if FIELDS.contains(&k) => FieldKind::Scalar,
            _ => FieldKind::Ignored,
        }
    }

    fn fail(&mut self, field: &'static str, e: CallError) {
        let rank = FIELDS
            .iter()
            .position(|f| *f == field)
            .unwrap_or(usize::MAX);
        if self.error.as_ref().is_none_or(|(r, _)| rank < *r) {
            self.error = Some((rank, e));
        }
    }

    /// Sets top-level `key` from a scalar (or records why it cannot be).
    pub fn scalar(&mut self, key: &str, v: Scalar<'_>) {
        let Some(field) = FIELDS.iter().copied().find(|f| *f == key) else {
            if key == "type" {
                self.kind = match v {
                    Scalar::Null => Ok(None),
                    Scalar::Str(s) => CallKind::parse(s)
                        .map(Some)
                        .ok_or_else(|| CallError::UnknownType(s.to_owned())),
                    other => Err(CallError::InvalidField {
                        field: "type",
                        expected: "a string",
                        got: other.type_name(),
                    }),
                };
            }
            return;
        };
        let invalid = |expected| CallError::InvalidField {
            field,
            expected,
            got: v.type_name(),
        };
        let c = &mut self.call;
        let result = match field {
            // Identifiers may also be numbers, which become their JavaScript
            // string form (`42` → `"42"`), as Segment's Python and Node
            // libraries do.
            "userId" | "anonymousId" | "groupId" | "previousId" => {
                let value = match v {
                    Scalar::Null => Ok(None),
                    Scalar::Str(s) => Ok(Some(s.to_owned())),
                    Scalar::Number(n) => number_string(n).map(Some),
                    Scalar::Other(_) => Err(invalid("a string or number")),
                };
                value.map(|value| match field {
                    "userId" => c.user_id = value,
                    "anonymousId" => c.anonymous_id = value,
                    "groupId" => c.group_id = value,
                    _ => c.previous_id = value,
                })
            }
            "event" | "name" | "category" | "messageId" => {
                let value = match v {
                    Scalar::Null => Ok(None),
                    Scalar::Str(s) => Ok(Some(s.to_owned())),
                    _ => Err(invalid("a string")),
                };
                value.map(|value| match field {
                    "event" => c.event = value,
                    "name" => c.name = value,
                    "category" => c.category = value,
                    _ => c.message_id = value,
                })
            }
            "timestamp" => match v {
                Scalar::Null => {
                    c.timestamp = None;
                    Ok(())
                }
                Scalar::Str(s) => Timestamp::parse(s)
                    .map(|t| c.timestamp = Some(t))
                    .map_err(CallError::from),
                _ => Err(invalid("an ISO 8601 string")),
            },
            // properties, traits, context, integrations
            _ => match v {
                Scalar::Null => {
                    self.set_object(field, None);
                    Ok(())
                }
                _ => Err(invalid("an object")),
            },
        };
        if let Err(e) = result {
            self.fail(field, e);
        }
    }

    /// Sets `properties`, `traits`, `context` or `integrations`.
    pub fn object(&mut self, key: &str, v: Object) {
        if let Some(field) = FIELDS.iter().copied().find(|f| *f == key) {
            self.set_object(field, Some(v));
        }
    }

    /// Records an error the binding met while converting `key`'s value
    /// (a value with no JSON form, say), in the same order as the rest.
    pub fn error(&mut self, key: &str, e: CallError) {
        let field = FIELDS.iter().copied().find(|f| *f == key).unwrap_or("type");
        self.fail(field, e);
    }

    fn set_object(&mut self, field: &str, v: Option<Object>) {
        let c = &mut self.call;
        match field {
            "properties" => c.properties = v,
            "traits" => c.traits = v,
            "context" => c.context = v.map(|o| o.to_map().into_owned()),
            "integrations" => c.integrations = v.map(|o| o.to_map().into_owned()),
            _ => {}
        }
    }

    /// The call, or the first problem: a missing or unknown `type`, then
    /// field errors in model order, then the per-kind rules.
    pub fn finish(self) -> Result<Call, CallError> {
        let kind = self.kind?.ok_or(CallError::MissingType)?;
        if let Some((_, e)) = self.error {
            return Err(e);
        }
        let call = Call { kind, ..self.call };
        call.validate()?;
        Ok(call)
    }
}

fn number_string(n: f64) -> Result<String, CallError> {
    let mut out = Vec::new();
    crate::json::write_number(n, &mut out)?;
    Ok(String::from_utf8(out).map_err(|_| JsonError::InvalidUnicode)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn code(json: &str) -> &'static str {
        Call::from_json_str(json).unwrap_err().code()
    }

    #[test]
    fn rules() {
        assert_eq!(code(r#"{"type":"identify"}"#), "missing_identity");
        assert_eq!(
            code(r#"{"type":"identify","userId":""}"#),
            "missing_identity"
        );
        assert_eq!(code(r#"{"type":"track","userId":"u"}"#), "missing_event");
        assert_eq!(
            code(r#"{"type":"group","anonymousId":"a"}"#),
            "missing_group_id"
        );
        assert_eq!(
            code(r#"{"type":"alias","userId":"u"}"#),
            "missing_previous_id"
        );
        assert_eq!(
            code(r#"{"type":"alias","anonymousId":"a","previousId":"p"}"#),
            "missing_user_id"
        );
        assert_eq!(code(r#"{"type":"delete"}"#), "missing_user_id");
        assert_eq!(code(r#"{"type":"bogus"}"#), "unknown_type");
        assert_eq!(code(r#"{"userId":"u"}"#), "missing_type");
        assert_eq!(code(r#"[1]"#), "not_an_object");
        assert_eq!(
            code(r#"{"type":"track","userId":"u","event":5}"#),
            "invalid_field"
        );
        assert_eq!(
            code(r#"{"type":"track","userId":"u","event":"e","properties":[]}"#),
            "invalid_field"
        );
        assert_eq!(
            code(r#"{"type":"track","userId":"u","event":"e","timestamp":"now"}"#),
            "invalid_timestamp"
        );
        assert_eq!(
            code(r#"{"type":"track","userId":"u","event":"e","properties":{"n":1e999}}"#),
            "invalid_json"
        );
    }

    #[test]
    fn numeric_ids_become_strings() {
        let c =
            Call::from_json_str(r#"{"type":"identify","userId":42,"anonymousId":1.5}"#).unwrap();
        assert_eq!(c.user_id.as_deref(), Some("42"));
        assert_eq!(c.anonymous_id.as_deref(), Some("1.5"));
    }

    #[test]
    fn builder_reports_errors_in_model_order_whatever_the_key_order() {
        let a = r#"{"timestamp":5,"userId":[],"type":"track","event":"e"}"#;
        let b = r#"{"type":"track","event":"e","userId":[],"timestamp":5}"#;
        let (ea, eb) = (
            Call::from_json_str(a).unwrap_err(),
            Call::from_json_str(b).unwrap_err(),
        );
        assert_eq!(ea, eb);
        assert!(ea.to_string().contains("userId"), "{ea}");
        // A bad type beats every field error.
        assert_eq!(code(r#"{"userId":[],"type":7}"#), "invalid_field");
        assert!(Call::from_json_str(r#"{"userId":[],"type":7}"#)
            .unwrap_err()
            .to_string()
            .contains("type"));
        assert_eq!(code(r#"{"userId":[],"type":"nope"}"#), "unknown_type");
    }

    #[test]
    fn depth_limit_is_the_same_for_the_streaming_writer() {
        use crate::json::{Writer, MAX_DEPTH};
        fn nest(w: &mut Writer<'_>, n: usize) -> Result<(), JsonError> {
            if n == 0 {
                w.null();
                return Ok(());
            }
            w.array([()], |w, _, ()| nest(w, n - 1))
        }
        let mut out = Vec::new();
        assert!(nest(&mut Writer::new(&mut out), MAX_DEPTH).is_ok());
        out.clear();
        assert_eq!(
            nest(&mut Writer::new(&mut out), MAX_DEPTH + 1).unwrap_err(),
            JsonError::TooDeep
        );
    }
}
