//! The Segment-spec call model: identify, track, page, screen, group, alias,
//! and the destination's delete notification.
//!
//! The model and its rules are here; [`CallBuilder`] applies the field
//! rules for every source, [`id_string`] is the rule for ids, `parse`
//! reads calls from JSON text, and `message` writes the Segment message
//! form.

mod builder;
mod id;
mod message;
mod parse;

pub use builder::{CallBuilder, FieldKind, Scalar, CALL_FIELDS};
pub use id::{id_string, ID_FIELDS};

use crate::code::Code;
use crate::json::{JsonError, JsonObject, Map, Quoted};
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
    pub const ALL: [Self; 7] = [
        Self::Page,
        Self::Screen,
        Self::Identify,
        Self::Track,
        Self::Alias,
        Self::Group,
        Self::Delete,
    ];

    /// The `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Identify => "identify",
            Self::Track => "track",
            Self::Page => "page",
            Self::Screen => "screen",
            Self::Group => "group",
            Self::Alias => "alias",
            Self::Delete => "delete",
        }
    }

    /// Parses a `type` string (exact, lowercase).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
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
    /// `context`: carried whole into messages; the core reads inside it
    /// only for a screen's body (`device`, `os`, `app`) and to add
    /// `library` in the batcher.
    pub context: Option<Object>,
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
    pub fn code(&self) -> Code {
        match self {
            Self::NotAnObject(_) => Code::NotAnObject,
            Self::MissingType => Code::MissingType,
            Self::UnknownType(_) => Code::UnknownType,
            Self::InvalidField { .. } => Code::InvalidField,
            Self::InvalidTimestamp(_) => Code::InvalidTimestamp,
            Self::MissingIdentity(_) => Code::MissingIdentity,
            Self::MissingUserId(_) => Code::MissingUserId,
            Self::MissingEvent => Code::MissingEvent,
            Self::MissingGroupId => Code::MissingGroupId,
            Self::MissingPreviousId => Code::MissingPreviousId,
            Self::Json(e) => e.code(),
        }
    }
}

fn present(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

impl Call {
    /// An empty call of `kind`; set the fields, then [`Call::validate`].
    pub fn new(kind: CallKind) -> Self {
        Self {
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
            Self::Map(m) => crate::json::write_map(m, out),
            Self::Json(j) => {
                out.extend_from_slice(j.as_bytes());
                Ok(())
            }
        }
    }

    /// The object as a map, moved out (parsing the text form).
    pub fn into_map(self) -> Map {
        match self {
            Self::Map(m) => m,
            Self::Json(j) => j.to_map(),
        }
    }

    /// The object as a map (parsing the text form).
    pub fn to_map(&self) -> std::borrow::Cow<'_, Map> {
        match self {
            Self::Map(m) => std::borrow::Cow::Borrowed(m),
            Self::Json(j) => std::borrow::Cow::Owned(j.to_map()),
        }
    }
}

impl From<Map> for Object {
    fn from(m: Map) -> Self {
        Self::Map(m)
    }
}

impl From<JsonObject> for Object {
    fn from(j: JsonObject) -> Self {
        Self::Json(j)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn code(json: &str) -> &'static str {
        Call::from_json_str(json).unwrap_err().code().as_str()
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
        // JSON text keeps the JSON number rule (see `id_string`): a literal
        // JavaScript would read as another number is refused, not kept.
        assert_eq!(
            code(r#"{"type":"identify","userId":157963456373623802}"#),
            "integer_out_of_range"
        );
        assert_eq!(
            code(r#"{"type":"identify","userId":"u","messageId":5}"#),
            "invalid_field"
        );
    }

    #[test]
    fn host_integer_ids_keep_every_digit_and_other_fields_the_json_rule() {
        let build = |fields: &[(&str, Scalar<'_>)]| {
            let mut b = CallBuilder::new();
            for (k, v) in fields {
                b.scalar(k, *v);
            }
            b.finish()
        };
        let big = "1000000000000000000000000000000";
        let c = build(&[
            ("type", Scalar::Str("alias")),
            ("userId", Scalar::Integer("157963456373623802")),
            ("previousId", Scalar::Integer(big)),
            ("messageId", Scalar::Integer("-5")),
        ])
        .unwrap();
        assert_eq!(c.user_id.as_deref(), Some("157963456373623802"));
        assert_eq!(c.previous_id.as_deref(), Some(big));
        assert_eq!(c.message_id.as_deref(), Some("-5"));
        let code_of = |fields: &[(&str, Scalar<'_>)]| build(fields).unwrap_err().code().as_str();
        let track = ("type", Scalar::Str("track"));
        let user = ("userId", Scalar::Str("u"));
        assert_eq!(
            code_of(&[track, user, ("event", Scalar::Integer("9007199254740993"))]),
            "integer_out_of_range"
        );
        assert_eq!(
            code_of(&[track, user, ("event", Scalar::Integer(big))]),
            "integer_out_of_range"
        );
        assert_eq!(
            code_of(&[track, user, ("event", Scalar::Integer("5"))]),
            "invalid_field"
        );
        assert_eq!(
            code_of(&[track, user, ("event", Scalar::Float(f64::NAN))]),
            "non_finite_number"
        );
        assert_eq!(
            code_of(&[("type", Scalar::Integer(big)), user]),
            "integer_out_of_range"
        );
        assert_eq!(
            code_of(&[
                track,
                ("userId", Scalar::Float(1.5)),
                ("event", Scalar::Str("e"))
            ]),
            "invalid_field"
        );
        assert_eq!(
            code_of(&[
                track,
                ("userId", Scalar::Other("boolean")),
                ("event", Scalar::Str("e"))
            ]),
            "invalid_field"
        );
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
