//! The Segment-spec call model: identify, track, page, screen, group, alias,
//! and the destination's delete notification.

use crate::json::{JsonError, Map, Value};
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
    pub properties: Option<Map>,
    /// `traits` (identify, group).
    pub traits: Option<Map>,
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
    #[error("unknown call type {0:?}")]
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

    /// Parses and validates a call from JSON text.
    pub fn from_json_str(text: &str) -> Result<Call, CallError> {
        Call::from_owned(Value::from_json_str(text)?)
    }

    /// Parses and validates a call from a JSON value with Segment's keys.
    /// Keys this model does not know are ignored.
    pub fn from_value(value: &Value) -> Result<Call, CallError> {
        Call::from_owned(value.clone())
    }

    /// [`Call::from_value`] taking ownership, so the free-form objects move
    /// into the call instead of being copied (the bindings' hot path).
    pub fn from_owned(value: Value) -> Result<Call, CallError> {
        let mut map = match value {
            Value::Object(m) => m,
            other => return Err(CallError::NotAnObject(other.type_name())),
        };
        let kind = match map.get("type") {
            None | Some(Value::Null) => return Err(CallError::MissingType),
            Some(Value::String(s)) => {
                CallKind::parse(s).ok_or_else(|| CallError::UnknownType(s.clone()))?
            }
            Some(other) => {
                return Err(CallError::InvalidField {
                    field: "type",
                    expected: "a string",
                    got: other.type_name(),
                })
            }
        };
        let call = Call {
            kind,
            user_id: id_field(&mut map, "userId")?,
            anonymous_id: id_field(&mut map, "anonymousId")?,
            event: str_field(&mut map, "event")?,
            name: str_field(&mut map, "name")?,
            category: str_field(&mut map, "category")?,
            properties: obj_field(&mut map, "properties")?,
            traits: obj_field(&mut map, "traits")?,
            context: obj_field(&mut map, "context")?,
            integrations: obj_field(&mut map, "integrations")?,
            group_id: id_field(&mut map, "groupId")?,
            previous_id: id_field(&mut map, "previousId")?,
            timestamp: match map.get("timestamp") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(Timestamp::parse(s)?),
                Some(other) => {
                    return Err(CallError::InvalidField {
                        field: "timestamp",
                        expected: "an ISO 8601 string",
                        got: other.type_name(),
                    })
                }
            },
            message_id: str_field(&mut map, "messageId")?,
        };
        call.validate()?;
        Ok(call)
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
        let maps = [
            ("properties", &self.properties),
            ("traits", &self.traits),
            ("context", &self.context),
            ("integrations", &self.integrations),
        ];
        for (key, value) in maps {
            if let Some(m) = value {
                out.push(b',');
                write_string(key, out);
                out.push(b':');
                write_map(m, out)?;
            }
        }
        out.push(b'}');
        Ok(())
    }

    /// The `userId`, when present and non-empty.
    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref().filter(|s| !s.is_empty())
    }
}

// The field helpers take the value out of the map (swap_remove: the order
// of the keys left behind does not matter, they are ignored).
fn str_field(map: &mut Map, field: &'static str) -> Result<Option<String>, CallError> {
    match map.swap_remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(CallError::InvalidField {
            field,
            expected: "a string",
            got: other.type_name(),
        }),
    }
}

/// Identifiers may also be numbers, which become their JavaScript string form
/// (`42` → `"42"`), as Segment's Python and Node libraries do.
fn id_field(map: &mut Map, field: &'static str) -> Result<Option<String>, CallError> {
    match map.swap_remove(field) {
        Some(Value::Number(n)) => {
            let mut out = Vec::new();
            crate::json::write_number(n, &mut out)?;
            Ok(Some(
                String::from_utf8(out).map_err(|_| JsonError::InvalidUnicode)?,
            ))
        }
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(CallError::InvalidField {
            field,
            expected: "a string or number",
            got: other.type_name(),
        }),
    }
}

fn obj_field(map: &mut Map, field: &'static str) -> Result<Option<Map>, CallError> {
    match map.swap_remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(CallError::InvalidField {
            field,
            expected: "an object",
            got: other.type_name(),
        }),
    }
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
}
