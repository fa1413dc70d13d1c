//! Calls from JSON text and JSON values, through [`CallBuilder`].

use super::{Call, CallBuilder, CallError, CallKind, FieldKind, Object, Scalar, CALL_FIELDS};
use crate::json::{JsonError, JsonObject, Parser, Value};

impl Call {
    /// [`Call::from_json_str`] over bytes, which must be UTF-8
    /// (`invalid_unicode` otherwise).
    pub fn from_json_slice(bytes: &[u8]) -> Result<Self, CallError> {
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
    pub fn from_json_str(text: &str) -> Result<Self, CallError> {
        Self::from_json_str_with(text, None, |_, _| Ok(false))
    }

    /// [`Call::from_json_str`], offering each key the model ignores to
    /// `extra` first, with the parser before its value: `extra` returns
    /// `true` when it consumed the value (through the parser's `value` or
    /// `string`). The ingest side reads `sentAt` and `writeKey` this way.
    /// `kind`, when given, is the call's type whatever its `type` says (the
    /// Tracking API's single-call routes, such as `/v1/track`).
    pub(crate) fn from_json_str_with(
        text: &str,
        kind: Option<CallKind>,
        mut extra: impl FnMut(&str, &mut Parser<'_>) -> Result<bool, CallError>,
    ) -> Result<Self, CallError> {
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
                let bit = CALL_FIELDS
                    .iter()
                    .position(|f| *f == key)
                    .map_or(1 << CALL_FIELDS.len(), |i| 1 << i);
                repeated |= seen & bit != 0;
                seen |= bit;
            }
            p.ws();
            if kind == FieldKind::Ignored && extra(&key, p)? {
                return Ok(());
            }
            if kind == FieldKind::Object && !repeated && p.peek() == Some(b'{') {
                // Already in JSON.stringify form (JavaScript's text, always):
                // kept as it is. Otherwise written in that form in one pass;
                // only an array-index or a repeated key needs the tree.
                let object = match p.canonical_object(2) {
                    Some(text) => Some(JsonObject::from_canonical(text)),
                    None => {
                        let mut out = Vec::with_capacity(256);
                        p.transcode_object(2, &mut out)?
                            .then(|| JsonObject::from_transcoded(out))
                    }
                };
                if let Some(object) = object {
                    b.object(&key, Object::Json(object));
                    return Ok(());
                }
            }
            // A string field (an id, the event, the timestamp) is handed
            // over borrowed when it has no escape: through `value` it would
            // be copied twice, into a `Value` and again into the call.
            if kind != FieldKind::Ignored && p.peek() == Some(b'"') {
                let s = p.string()?;
                b.scalar(&key, Scalar::Str(&s));
                return Ok(());
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
        if let Some(kind) = kind {
            b.scalar("type", Scalar::Str(kind.as_str()));
        }
        if repeated {
            let mut value = Value::from_json_str(text)?;
            if let (Some(kind), Value::Object(m)) = (kind, &mut value) {
                m.insert("type".into(), kind.as_str().into());
            }
            return Self::from_owned(value);
        }
        b.finish()
    }

    /// Parses and validates a call from a JSON value with Segment's keys.
    /// Keys this model does not know are ignored.
    pub fn from_value(value: &Value) -> Result<Self, CallError> {
        Self::from_owned(value.clone())
    }

    /// [`Call::from_value`] taking ownership, so the free-form objects move
    /// into the call instead of being copied (the bindings' hot path).
    pub fn from_owned(value: Value) -> Result<Self, CallError> {
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
}
