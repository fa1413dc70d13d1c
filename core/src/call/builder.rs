//! [`CallBuilder`]: one top-level field at a time, with the field rules.

use super::{id_string, Call, CallError, CallKind, Object};
use crate::json::{JsonError, Value};
use crate::timestamp::Timestamp;

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
    /// A JSON number read from JSON text (already checked to be one JS
    /// would keep).
    Number(f64),
    /// An integer the host holds exactly (a Python `int`, a JS `bigint`),
    /// as its decimal text (`-?[0-9]+`, no leading zeros): an id field
    /// keeps every digit, any other field applies the JSON integer rule.
    Integer(&'a str),
    /// A double the host holds (a JS `number`, a Python `float`).
    Float(f64),
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

    pub(super) fn type_name(self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Str(_) => "string",
            Scalar::Number(_) | Scalar::Integer(_) | Scalar::Float(_) => "number",
            Scalar::Other(t) => t,
        }
    }

    /// The JSON rule for a host number outside an id field: an integer
    /// JavaScript would print with other digits is `integer_out_of_range`,
    /// NaN and ±Infinity are `non_finite_number`, as anywhere in a call.
    fn check_number(self) -> Result<(), JsonError> {
        match self {
            Scalar::Integer(digits) => match digits.parse::<i128>() {
                Ok(n) => Value::from_i128(n).map(drop),
                Err(_) => Err(JsonError::IntegerOutOfRange(digits.to_owned())),
            },
            Scalar::Float(f) if !f.is_finite() => Err(JsonError::NonFiniteNumber),
            _ => Ok(()),
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

/// The model's top-level keys other than `type`, in the order errors are
/// reported (the index is the rank). Bindings that pass a call as its
/// fields, without an object (Python's `Batcher.handle_fields`), pass them
/// in this order.
pub const CALL_FIELDS: [&str; 13] = [
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
            "properties" | "traits" | "context" => FieldKind::Object,
            "integrations" => FieldKind::Map,
            "type" => FieldKind::Scalar,
            k if CALL_FIELDS.contains(&k) => FieldKind::Scalar,
            _ => FieldKind::Ignored,
        }
    }

    fn fail(&mut self, field: &'static str, e: CallError) {
        let rank = CALL_FIELDS
            .iter()
            .position(|f| *f == field)
            .unwrap_or(usize::MAX);
        if self.error.as_ref().is_none_or(|(r, _)| rank < *r) {
            self.error = Some((rank, e));
        }
    }

    /// Sets top-level `key` from a scalar (or records why it cannot be).
    pub fn scalar(&mut self, key: &str, v: Scalar<'_>) {
        let Some(field) = CALL_FIELDS.iter().copied().find(|f| *f == key) else {
            if key == "type" {
                self.kind = match (v.check_number(), v) {
                    (Err(e), _) => Err(e.into()),
                    (_, Scalar::Null) => Ok(None),
                    (_, Scalar::Str(s)) => CallKind::parse(s)
                        .map(Some)
                        .ok_or_else(|| CallError::UnknownType(s.to_owned())),
                    (_, other) => Err(CallError::InvalidField {
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
        let result = match (field, v.check_number()) {
            // Identifiers may also be numbers (the id rule: `id_string`).
            ("userId" | "anonymousId" | "groupId" | "previousId" | "messageId", _) => {
                id_string(field, v).map(|value| match field {
                    "userId" => c.user_id = value,
                    "anonymousId" => c.anonymous_id = value,
                    "groupId" => c.group_id = value,
                    "previousId" => c.previous_id = value,
                    _ => c.message_id = value,
                })
            }
            // Any other field: a host number gets the JSON rule first, as
            // it would inside `properties`.
            (_, Err(e)) => Err(e.into()),
            ("event" | "name" | "category", _) => {
                let value = match v {
                    Scalar::Null => Ok(None),
                    Scalar::Str(s) => Ok(Some(s.to_owned())),
                    _ => Err(invalid("a string")),
                };
                value.map(|value| match field {
                    "event" => c.event = value,
                    "name" => c.name = value,
                    _ => c.category = value,
                })
            }
            ("timestamp", _) => match v {
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
        if let Some(field) = CALL_FIELDS.iter().copied().find(|f| *f == key) {
            self.set_object(field, Some(v));
        }
    }

    /// Records an error the binding met while converting `key`'s value
    /// (a value with no JSON form, say), in the same order as the rest.
    pub fn error(&mut self, key: &str, e: CallError) {
        let field = CALL_FIELDS
            .iter()
            .copied()
            .find(|f| *f == key)
            .unwrap_or("type");
        self.fail(field, e);
    }

    fn set_object(&mut self, field: &str, v: Option<Object>) {
        let c = &mut self.call;
        match field {
            "properties" => c.properties = v,
            "traits" => c.traits = v,
            "context" => c.context = v,
            "integrations" => c.integrations = v.map(Object::into_map),
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
