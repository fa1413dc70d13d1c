//! JSON values and a writer whose output equals JavaScript's `JSON.stringify`.
//!
//! Webhook receivers verify `X-Signature` by parsing the body and re-running
//! `JSON.stringify` over it, so every byte we sign must already be in the form
//! `JSON.stringify(JSON.parse(body))` produces. That means:
//!
//! * numbers are IEEE-754 doubles printed with ECMAScript `Number::toString`
//!   (`1` not `1.0`, `1e+21`, `1.5e-7`, `-0` printed as `0`);
//! * object keys that are array indices (`"0"` … `"4294967294"` in canonical
//!   form) come first in ascending order, the rest in insertion order;
//! * strings escape only `"`, `\` and U+0000–U+001F, with the short forms
//!   `\b \f \n \r \t` and lowercase `\u00xx` for the other controls.
//!
//! Two decisions go beyond what `JSON.stringify` does, because JavaScript
//! silently changes the data in these cases and we never do:
//!
//! * **Integers that JavaScript would print differently** are rejected with
//!   [`JsonError::IntegerOutOfRange`], whether they come as an integer type
//!   (Rust `i64`/`u64`, Python `int`) or as a JSON integer literal. An
//!   integer is kept when `JSON.stringify(Number(n))` writes the same digits:
//!   always for |n| ≤ 2^53, and for larger values such as
//!   `10000000000000000` or `1152921504606847000` that are already in the
//!   shortest form JS prints. `9007199254740993` (JS prints `…992`) and
//!   `2**60` (JS prints `1152921504606847000`) are rejected: the receiver
//!   would see a different number. Everything `JSON.stringify` writes passes
//!   this test, so our own bodies always re-parse. Literals too long for
//!   64 bits are read as the nearest double, as `JSON.parse` does.
//! * **NaN and ±Infinity** are rejected with [`JsonError::NonFiniteNumber`]
//!   where `JSON.stringify` would write `null`.

mod number;
mod parse;
mod string;
mod write;

pub use number::write_number;
pub(crate) use parse::{
    element_spans, element_start, member_span, member_start, value_end, Parser,
};
pub use string::write_string;
pub(crate) use string::{plain_until, write_char, Quoted};
pub use write::{array_index, write_map, write_value, JsonObject, ObjectMark, Writer};

use crate::code::Code;
use indexmap::IndexMap;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::fmt;

/// Deepest nesting of arrays and objects accepted in one value (the value
/// itself is level 1). serde_json stops at 128; real Segment payloads nest a
/// handful of levels, and 64 leaves room for the envelopes we add (webhook
/// body, batch) while keeping every recursive walk far from the stack limit,
/// including on wasm's small default stack.
pub const MAX_DEPTH: usize = 64;

/// An insertion-ordered JSON object. Inserting an existing key keeps its
/// position and replaces its value, which is what `JSON.parse` does with
/// duplicate keys.
pub type Map = IndexMap<String, Value>;

/// A JSON value with JavaScript's data model: every number is a double.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number. Must be finite when written.
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Self>),
    /// An object with insertion order kept.
    Object(Map),
}

/// Errors about JSON values: their syntax, numbers and nesting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not JSON. Fix the producer; the message says where.
    #[error("invalid json: {0}")]
    InvalidJson(String),
    /// An integer beyond ±2^53 that JavaScript receivers would read as a
    /// different number. Send it as a string, or as a float if rounding is
    /// acceptable.
    #[error(
        "integer {0} would reach javascript receivers as a different number; send it as a string"
    )]
    IntegerOutOfRange(String),
    /// NaN or ±Infinity has no JSON form. Replace it before sending.
    #[error("number is NaN or infinite, which JSON cannot represent")]
    NonFiniteNumber,
    /// Arrays and objects nest deeper than [`MAX_DEPTH`]. Flatten the value.
    #[error("value nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// A value of a type JSON has no form for (raised by the bindings: sets,
    /// bytes, BigInt, functions, cycles, ...). The path says where it is.
    #[error("value at {path} is not JSON: {type_name}")]
    NotJson {
        /// Where the value sits, as `$.a[0].b`.
        path: String,
        /// The host language's name of the offending type.
        type_name: String,
    },
    /// The same object or array appears inside itself (bindings only).
    #[error("value at {0} contains itself")]
    Cycle(String),
    /// An object key is not a string (bindings only).
    #[error("object key at {0} is not a string")]
    NonStringKey(String),
    /// Text is not valid UTF-8 or holds a lone surrogate; webhook bodies are
    /// UTF-8. Fix the string at the source.
    #[error("string is not valid unicode (invalid utf-8 or a lone surrogate)")]
    InvalidUnicode,
}

impl JsonError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::InvalidJson(_) => Code::InvalidJson,
            Self::IntegerOutOfRange(_) => Code::IntegerOutOfRange,
            Self::NonFiniteNumber => Code::NonFiniteNumber,
            Self::TooDeep => Code::TooDeep,
            Self::NotJson { .. } => Code::NotJson,
            Self::Cycle(_) => Code::CyclicValue,
            Self::NonStringKey(_) => Code::NonStringKey,
            Self::InvalidUnicode => Code::InvalidUnicode,
        }
    }
}

impl Value {
    /// Parses JSON text with `JSON.parse`'s data model, then checks depth
    /// and integer range.
    pub fn from_json_str(text: &str) -> Result<Self, JsonError> {
        let mut p = Parser::new(text);
        let value = p.value(1)?;
        p.end()?;
        Ok(value)
    }

    /// Like [`Value::from_json_str`] over bytes, which must be UTF-8.
    pub fn from_json_slice(bytes: &[u8]) -> Result<Self, JsonError> {
        let text = std::str::from_utf8(bytes).map_err(|_| JsonError::InvalidUnicode)?;
        Self::from_json_str(text)
    }

    /// An integer as a number, rejecting values no double holds exactly.
    pub fn from_i64(n: i64) -> Result<Self, JsonError> {
        Self::from_i128(i128::from(n))
    }

    /// An unsigned integer as a number, rejecting values no double holds
    /// exactly.
    pub fn from_u64(n: u64) -> Result<Self, JsonError> {
        Self::from_i128(i128::from(n))
    }

    /// A 128-bit integer as a number, rejecting values that JavaScript
    /// would print with other digits (see the module docs).
    pub fn from_i128(n: i128) -> Result<Self, JsonError> {
        let f = n as f64;
        if n.unsigned_abs() <= 1 << 53 {
            return Ok(Self::Number(f));
        }
        let mut printed = Vec::with_capacity(24);
        write_number(f, &mut printed)?;
        if printed != n.to_string().as_bytes() {
            return Err(JsonError::IntegerOutOfRange(n.to_string()));
        }
        Ok(Self::Number(f))
    }

    /// Fails with [`JsonError::TooDeep`] when nesting exceeds [`MAX_DEPTH`].
    pub fn check_depth(&self) -> Result<(), JsonError> {
        fn walk(v: &Value, depth: usize) -> Result<(), JsonError> {
            match v {
                Value::Array(items) => {
                    if depth > MAX_DEPTH {
                        return Err(JsonError::TooDeep);
                    }
                    items.iter().try_for_each(|i| walk(i, depth + 1))
                }
                Value::Object(map) => {
                    if depth > MAX_DEPTH {
                        return Err(JsonError::TooDeep);
                    }
                    map.values().try_for_each(|i| walk(i, depth + 1))
                }
                _ => Ok(()),
            }
        }
        walk(self, 1)
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, when this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The object, when this is one.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Self::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The name of this value's JSON type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "boolean",
            Self::Number(_) => "number",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::Object(_) => "object",
        }
    }

    /// `JSON.stringify(self)` as a string.
    pub fn to_json_string(&self) -> Result<String, JsonError> {
        let mut out = Vec::with_capacity(128);
        write_value(self, &mut out)?;
        // The writer only emits UTF-8: input strings are `String`s and every
        // byte it adds itself is ASCII.
        String::from_utf8(out).map_err(|_| JsonError::InvalidUnicode)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}
impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Self::Number(n)
    }
}
impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Self::Object(m)
    }
}
impl From<Vec<Self>> for Value {
    fn from(v: Vec<Self>) -> Self {
        Self::Array(v)
    }
}

const RANGE_PREFIX: &str = "integer out of range: ";

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
                Ok(Value::Bool(b))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
                Value::from_i64(n).map_err(|_| E::custom(format_args!("{RANGE_PREFIX}{n}")))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
                Value::from_u64(n).map_err(|_| E::custom(format_args!("{RANGE_PREFIX}{n}")))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
                Ok(Value::Number(n))
            }
            fn visit_str<E>(self, s: &str) -> Result<Value, E> {
                Ok(Value::String(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Value, E> {
                Ok(Value::String(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Value::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
                let mut map = Map::with_capacity(access.size_hint().unwrap_or(0).min(1024));
                while let Some((k, v)) = access.next_entry::<String, Value>()? {
                    map.insert(k, v);
                }
                Ok(Value::Object(map))
            }
        }
        d.deserialize_any(V)
    }
}

/// Serializes through serde for persistence (for example a saved delivery).
/// This is not the canonical writer; use [`write_value`] for bodies.
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => s.serialize_unit(),
            Self::Bool(b) => s.serialize_bool(*b),
            Self::Number(n) => s.serialize_f64(*n),
            Self::String(v) => s.serialize_str(v),
            Self::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            Self::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

/// How the keys of the values the core hands to a binding are spelled
/// (attempt logs, outcomes). The core writes snake_case, Python's style;
/// JavaScript's is camelCase (`sentAt`, `retryAfter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCase {
    /// `sent_at`: Rust and Python.
    Snake,
    /// `sentAt`: JavaScript.
    Camel,
}

impl KeyCase {
    /// `value` with every object key (at any depth) in this case. The
    /// core's own keys are ASCII snake_case, so [`KeyCase::Snake`] keeps
    /// them and [`KeyCase::Camel`] only needs to drop each `_` and raise
    /// the letter after it (no Unicode case tables in the wasm modules).
    pub fn apply(self, value: Value) -> Value {
        fn camel(key: &str) -> String {
            let mut out = String::with_capacity(key.len());
            let mut up = false;
            for c in key.chars() {
                match c {
                    '_' => up = true,
                    c if up => {
                        out.push(c.to_ascii_uppercase());
                        up = false;
                    }
                    c => out.push(c),
                }
            }
            out
        }
        match (self, value) {
            (Self::Snake, v) => v,
            (Self::Camel, Value::Object(m)) => Value::Object(
                m.into_iter()
                    .map(|(k, v)| (camel(&k), self.apply(v)))
                    .collect(),
            ),
            (Self::Camel, Value::Array(items)) => {
                Value::Array(items.into_iter().map(|v| self.apply(v)).collect())
            }
            (_, v) => v,
        }
    }
}

/// `JSON.stringify` of a value, as a `String`.
pub fn stringify(value: &Value) -> Result<String, JsonError> {
    value.to_json_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn s(v: &Value) -> String {
        stringify(v).unwrap()
    }

    #[test]
    fn big_integers_are_rejected_and_safe_ones_kept() {
        let code = |t: &str| Value::from_json_str(t).unwrap_err().code();
        assert_eq!(code("9007199254740993"), "integer_out_of_range");
        assert_eq!(code("-9007199254740993"), "integer_out_of_range");
        assert_eq!(
            s(&Value::from_json_str("9007199254740992").unwrap()),
            "9007199254740992"
        );
        assert_eq!(
            s(&Value::from_json_str("10000000000000000").unwrap()),
            "10000000000000000"
        );
        assert_eq!(
            Value::from_u64(1 << 60).unwrap_err().code(),
            "integer_out_of_range"
        );
        assert_eq!(
            s(&Value::from_json_str("1152921504606847000").unwrap()),
            "1152921504606847000"
        );
        assert_eq!(
            Value::from_u64((1 << 60) + 1).unwrap_err().code(),
            "integer_out_of_range"
        );
        assert_eq!(
            Value::from_u64(u64::MAX).unwrap_err().code(),
            "integer_out_of_range"
        );
        assert_eq!(
            Value::from_i64(i64::MAX).unwrap_err().code(),
            "integer_out_of_range"
        );
        // -2^63 is exact as a double, but JS prints it as -9223372036854776000.
        assert_eq!(
            Value::from_i64(i64::MIN).unwrap_err().code(),
            "integer_out_of_range"
        );

        // A float literal is a double, as in JS.
        assert_eq!(s(&Value::from_json_str("1e300").unwrap()), "1e+300");
    }

    #[test]
    fn depth_is_limited() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(Value::from_json_str(&ok).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(Value::from_json_str(&deep).unwrap_err().code(), "too_deep");
        let very_deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert_eq!(
            Value::from_json_str(&very_deep).unwrap_err().code(),
            "too_deep"
        );
        let mut v = Value::Null;
        for _ in 0..=MAX_DEPTH {
            v = Value::Array(vec![v]);
        }
        assert_eq!(stringify(&v).unwrap_err().code(), "too_deep");
    }

    #[test]
    fn lone_surrogate_escape_is_rejected() {
        assert_eq!(
            Value::from_json_str(r#""\ud800""#).unwrap_err().code(),
            "invalid_unicode"
        );
        assert_eq!(
            Value::from_json_slice(b"\"\xff\"").unwrap_err().code(),
            "invalid_unicode"
        );
        assert_eq!(
            Value::from_json_str(r#""\ud800\n""#).unwrap_err().code(),
            "invalid_unicode"
        );
        // Text that ends before the pair could follow is unterminated.
        for t in [r#""\ud800"#, r#""\ud800\"#, r#""\ud800\u"#, r#""\ud800\ud"#] {
            assert_eq!(
                Value::from_json_str(t).unwrap_err().code(),
                "invalid_json",
                "{t}"
            );
        }
    }
}
