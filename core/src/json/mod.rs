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

mod parse;

pub(crate) use parse::Parser;

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
    Array(Vec<Value>),
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
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson(_) => "invalid_json",
            Self::IntegerOutOfRange(_) => "integer_out_of_range",
            Self::NonFiniteNumber => "non_finite_number",
            Self::TooDeep => "too_deep",
            Self::NotJson { .. } => "not_json",
            Self::Cycle(_) => "cyclic_value",
            Self::NonStringKey(_) => "non_string_key",
            Self::InvalidUnicode => "invalid_unicode",
        }
    }
}

impl Value {
    /// Parses JSON text with `JSON.parse`'s data model, then checks depth
    /// and integer range.
    pub fn from_json_str(text: &str) -> Result<Value, JsonError> {
        let mut p = Parser::new(text);
        let value = p.value(1)?;
        p.end()?;
        Ok(value)
    }

    /// Like [`Value::from_json_str`] over bytes, which must be UTF-8.
    pub fn from_json_slice(bytes: &[u8]) -> Result<Value, JsonError> {
        let text = std::str::from_utf8(bytes).map_err(|_| JsonError::InvalidUnicode)?;
        Self::from_json_str(text)
    }

    /// An integer as a number, rejecting values no double holds exactly.
    pub fn from_i64(n: i64) -> Result<Value, JsonError> {
        Self::from_i128(i128::from(n))
    }

    /// An unsigned integer as a number, rejecting values no double holds
    /// exactly.
    pub fn from_u64(n: u64) -> Result<Value, JsonError> {
        Self::from_i128(i128::from(n))
    }

    /// A 128-bit integer as a number, rejecting values that JavaScript
    /// would print with other digits (see the module docs).
    pub fn from_i128(n: i128) -> Result<Value, JsonError> {
        let f = n as f64;
        if n.unsigned_abs() <= 1 << 53 {
            return Ok(Value::Number(f));
        }
        let mut printed = Vec::with_capacity(24);
        write_number(f, &mut printed)?;
        if printed != n.to_string().as_bytes() {
            return Err(JsonError::IntegerOutOfRange(n.to_string()));
        }
        Ok(Value::Number(f))
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
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The object, when this is one.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The name of this value's JSON type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
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
        Value::String(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Number(n)
    }
}
impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Object(m)
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::Array(v)
    }
}

const RANGE_PREFIX: &str = "integer out of range: ";

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
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
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => s.serialize_f64(*n),
            Value::String(v) => s.serialize_str(v),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

/// Writes `JSON.stringify(value)` into `out`.
///
/// On error, `out` may hold a partial value; callers discard it.
pub fn write_value(value: &Value, out: &mut Vec<u8>) -> Result<(), JsonError> {
    write_at(value, out, 1)
}

fn write_at(value: &Value, out: &mut Vec<u8>, depth: usize) -> Result<(), JsonError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(*n, out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(JsonError::TooDeep);
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_at(item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            if depth > MAX_DEPTH {
                return Err(JsonError::TooDeep);
            }
            write_object(map, out, depth)?;
        }
    }
    Ok(())
}

/// Writes `JSON.stringify(map)` into `out` without wrapping it in a [`Value`].
pub fn write_map(map: &Map, out: &mut Vec<u8>) -> Result<(), JsonError> {
    write_object(map, out, 1)
}

fn write_object(map: &Map, out: &mut Vec<u8>, depth: usize) -> Result<(), JsonError> {
    let entries = map.iter().map(|(k, v)| (k.as_str(), v));
    write_entries(entries, out, |out, _, v| write_at(v, out, depth + 1))
}

/// `"k":` of an object entry, after a comma unless it is the `first`.
fn write_key(k: &str, first: &mut bool, out: &mut Vec<u8>) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    write_string(k, out);
    out.push(b':');
}

/// Writes `{"k":v,...}` in the order JavaScript enumerates the keys: array
/// indices first, ascending, then the rest in the given order. One place for
/// that rule, used by [`Value`]s and by [`Writer`] alike.
fn write_entries<'k, V, E, I>(
    entries: I,
    out: &mut Vec<u8>,
    mut value: impl FnMut(&mut Vec<u8>, &'k str, V) -> Result<(), E>,
) -> Result<(), E>
where
    I: Iterator<Item = (&'k str, V)> + Clone,
{
    out.push(b'{');
    let mut first = true;
    let mut entry = |k: &'k str, v: V, out: &mut Vec<u8>| -> Result<(), E> {
        write_key(k, &mut first, out);
        value(out, k, v)
    };
    // Almost no real object has index-like keys; check before allocating.
    if !entries.clone().any(|(k, _)| array_index(k).is_some()) {
        for (k, v) in entries {
            entry(k, v, out)?;
        }
    } else {
        let mut indexed = Vec::new();
        let mut named = Vec::new();
        for (k, v) in entries {
            match array_index(k) {
                Some(i) => indexed.push((i, k, v)),
                None => named.push((k, v)),
            }
        }
        indexed.sort_unstable_by_key(|(i, _, _)| *i);
        for (_, k, v) in indexed {
            entry(k, v, out)?;
        }
        for (k, v) in named {
            entry(k, v, out)?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// Writes `JSON.stringify` output straight from a host's own values (a
/// Python dict, say), with no [`Value`] tree in between. The host walks its
/// value and calls one method per node; every rule about the output (number
/// form, the integer and non-finite refusals, key order, escaping, depth)
/// is applied here, so each binding only says what kind of value it holds.
///
/// On error the buffer may hold a partial value; callers discard it.
pub struct Writer<'o> {
    out: &'o mut Vec<u8>,
    depth: usize,
}

impl<'o> Writer<'o> {
    /// A writer appending to `out`.
    pub fn new(out: &'o mut Vec<u8>) -> Self {
        Self { out, depth: 0 }
    }

    /// `null`.
    pub fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }

    /// `true` or `false`.
    pub fn bool(&mut self, b: bool) {
        self.out
            .extend_from_slice(if b { b"true" } else { b"false" });
    }

    /// A string, escaped as `JSON.stringify` escapes it.
    pub fn string(&mut self, s: &str) {
        write_string(s, self.out);
    }

    /// A double; NaN and ±Infinity are refused.
    pub fn number(&mut self, n: f64) -> Result<(), JsonError> {
        write_number(n, self.out)
    }

    /// An integer; refused when JavaScript would print other digits.
    pub fn integer(&mut self, n: i128) -> Result<(), JsonError> {
        // Up to 2^53 every integer prints as its own digits (and -0 cannot
        // occur), so skip the trip through a double. As an i64: itoa's i128
        // path divides in 128 bits.
        if n.unsigned_abs() <= 1 << 53 {
            let n = n as i64; // in range: |n| <= 2^53
            self.out
                .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            return Ok(());
        }
        match Value::from_i128(n)? {
            Value::Number(f) => write_number(f, self.out),
            _ => Err(JsonError::IntegerOutOfRange(n.to_string())),
        }
    }

    /// An array: `each` writes item `i`.
    pub fn array<T, E: From<JsonError>>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut each: impl FnMut(&mut Writer<'_>, usize, T) -> Result<(), E>,
    ) -> Result<(), E> {
        self.enter()?;
        self.out.push(b'[');
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            each(self, i, item)?;
        }
        self.out.push(b']');
        self.depth -= 1;
        Ok(())
    }

    /// An object from `(key, value)` entries (which must be distinct keys,
    /// as in any dict): `each` writes the value of key `k`. The entries are
    /// walked twice when some key is an array index, hence `Clone`.
    pub fn object<'k, V, E, I>(
        &mut self,
        entries: I,
        mut each: impl FnMut(&mut Writer<'_>, &'k str, V) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<JsonError>,
        I: Iterator<Item = (&'k str, V)> + Clone,
    {
        self.enter()?;
        let depth = self.depth;
        write_entries(entries, self.out, |out, k, v| {
            each(&mut Writer { out, depth }, k, v)
        })?;
        self.depth -= 1;
        Ok(())
    }

    /// Starts an object whose entries the host writes in its own order,
    /// for hosts that walk a dict without collecting it first: call
    /// [`Writer::key`] then write the value, for each entry, then
    /// [`Writer::end_object`].
    ///
    /// JavaScript lists array-index keys (`"0"`, `"12"`) first, so the
    /// host's order holds only while no key is one. [`Writer::key`] returns
    /// `false` at the first such key and writes nothing; the host then calls
    /// [`Writer::abandon_object`] and writes the object with
    /// [`Writer::object`], which orders the keys.
    pub fn begin_object(&mut self) -> Result<ObjectMark, JsonError> {
        self.enter()?;
        let start = self.out.len();
        self.out.push(b'{');
        Ok(ObjectMark { start, first: true })
    }

    /// Writes `"key":` (after a comma when needed) for the next value, or
    /// returns `false` and writes nothing when `key` is an array index.
    pub fn key(&mut self, mark: &mut ObjectMark, key: &str) -> bool {
        if array_index(key).is_some() {
            return false;
        }
        write_key(key, &mut mark.first, self.out);
        true
    }

    /// Closes an object started by [`Writer::begin_object`].
    pub fn end_object(&mut self, mark: ObjectMark) {
        let _ = mark;
        self.out.push(b'}');
        self.depth -= 1;
    }

    /// Removes everything written since [`Writer::begin_object`].
    pub fn abandon_object(&mut self, mark: ObjectMark) {
        self.out.truncate(mark.start);
        self.depth -= 1;
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        if self.depth >= MAX_DEPTH {
            return Err(JsonError::TooDeep);
        }
        self.depth += 1;
        Ok(())
    }
}

/// An object being written by [`Writer::begin_object`]: where it starts,
/// and whether an entry has been written yet.
#[derive(Debug)]
#[must_use = "close the object with Writer::end_object or Writer::abandon_object"]
pub struct ObjectMark {
    start: usize,
    first: bool,
}

/// A JSON object's text in `JSON.stringify` form, made only by this crate's
/// writers, so it can be copied into a body as it is. Calls carry their
/// `properties` and `traits` this way when a binding wrote them straight
/// from host values.
#[derive(Clone, PartialEq, Eq)]
pub struct JsonObject(Vec<u8>);

impl JsonObject {
    /// Writes an object through [`Writer::object`].
    pub fn from_entries<'k, V, E, I>(
        entries: I,
        each: impl FnMut(&mut Writer<'_>, &'k str, V) -> Result<(), E>,
    ) -> Result<Self, E>
    where
        E: From<JsonError>,
        I: Iterator<Item = (&'k str, V)> + Clone,
    {
        let mut out = Vec::with_capacity(256);
        Writer::new(&mut out).object(entries, each)?;
        // Kept as bytes, not re-validated into a `String`: every byte comes
        // from `&str`s and ASCII punctuation, and the check cost 3% of a
        // 32 KB request.
        Ok(Self(out))
    }

    /// Writes an object with `write`, which writes exactly one object
    /// through the [`Writer`] it is given ([`Writer::object`], or
    /// [`Writer::begin_object`] and its entries).
    pub fn write_with<E: From<JsonError>>(
        write: impl FnOnce(&mut Writer<'_>) -> Result<(), E>,
    ) -> Result<Self, E> {
        let mut out = Vec::with_capacity(256);
        write(&mut Writer::new(&mut out))?;
        debug_assert!(out.first() == Some(&b'{') && out.last() == Some(&b'}'));
        Ok(Self(out))
    }

    /// A map's `JSON.stringify` text.
    pub fn from_map(map: &Map) -> Result<Self, JsonError> {
        let mut out = Vec::with_capacity(256);
        write_map(map, &mut out)?;
        Ok(Self(out))
    }

    /// Text the scanner found to be in `JSON.stringify` form already.
    pub(crate) fn from_canonical(text: &str) -> Self {
        Self(text.as_bytes().to_vec())
    }

    /// The JSON text, UTF-8 (every constructor writes only `&str`s and
    /// ASCII).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Parses the text back into a map (for reading fields; rare).
    pub fn to_map(&self) -> Map {
        match Value::from_json_slice(&self.0) {
            Ok(Value::Object(m)) => m,
            // Written by this crate as an object, so always an object.
            _ => Map::new(),
        }
    }
}

/// The length only: the text is customer data.
impl fmt::Debug for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonObject({} bytes)", self.0.len())
    }
}

/// The array index a key denotes, per ECMAScript's definition (a canonical
/// numeric string below 2^32 − 1). JS engines list these keys first.
pub fn array_index(key: &str) -> Option<u32> {
    let b = key.as_bytes();
    match b {
        [] => None,
        [b'0'] => Some(0),
        [b'1'..=b'9', rest @ ..] if rest.len() <= 9 && rest.iter().all(u8::is_ascii_digit) => {
            let n: u64 = key.parse().ok()?;
            (n <= 4_294_967_294).then_some(n as u32)
        }
        _ => None,
    }
}

/// Writes a finite double as ECMAScript `Number::toString` does.
pub fn write_number(n: f64, out: &mut Vec<u8>) -> Result<(), JsonError> {
    if !n.is_finite() {
        return Err(JsonError::NonFiniteNumber);
    }
    if n == 0.0 {
        // Covers -0, which JS prints as "0".
        out.push(b'0');
        return Ok(());
    }
    // Integral values below 1e15 print as plain digits in ECMAScript, exactly
    // as an i64 does; itoa is several times faster than the general path,
    // and most numbers in analytics payloads are such counts and ids.
    // (`as i64` truncates, so comparing back tests integrality without the
    // call to libm's `trunc` that `fract` makes.)
    if n.abs() < 1e15 && n as i64 as f64 == n {
        out.extend_from_slice(itoa::Buffer::new().format(n as i64).as_bytes());
        return Ok(());
    }
    write_shortest(n, out);
    Ok(())
}

/// The shortest digits that read back as `n` (zmij, the formatter
/// serde_json uses; faster than ryu-js), laid out as ECMAScript
/// `Number::toString` lays them out. zmij writes plain decimals only inside
/// JavaScript's plain range and the same `e+21`/`e-7` exponent form
/// outside it, so only its `.0` suffix and the exponents JavaScript writes
/// out in full need changing.
fn write_shortest(n: f64, out: &mut Vec<u8>) {
    let mut buf = zmij::Buffer::new();
    let s = buf.format_finite(n).as_bytes();
    let Some(e) = s.iter().position(|&b| b == b'e') else {
        out.extend_from_slice(s.strip_suffix(b".0").unwrap_or(s));
        return;
    };
    let exp: i32 = std::str::from_utf8(&s[e + 1..])
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    // ECMAScript writes x = 0.d₁d₂… × 10^point in full when
    // -6 < point ≤ 21, that is for exponents -7 < exp < 21.
    if !(-7 < exp && exp < 21) {
        out.extend_from_slice(s);
        return;
    }
    let (sign, mantissa) = match s[..e].split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, &s[..e]),
    };
    if sign {
        out.push(b'-');
    }
    let digits: Vec<u8> = mantissa.iter().copied().filter(|&b| b != b'.').collect();
    let k = digits.len() as i32;
    let point = exp + 1;
    if point >= k {
        out.extend_from_slice(&digits);
        out.resize(out.len() + (point - k) as usize, b'0');
    } else if point > 0 {
        out.extend_from_slice(&digits[..point as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[point as usize..]);
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-point) as usize, b'0');
        out.extend_from_slice(&digits);
    }
}

// 0 = copy as is; otherwise the escape to write. `u` means \u00xx.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Whether any of the eight bytes in `x` is below 0x20, `"` or `\\`
/// (the classic SWAR zero-byte and less-than tests; exact about whether
/// such a byte exists).
#[inline]
fn needs_escape(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
    below_space || has_zero(x ^ (ONES * b'"' as u64)) || has_zero(x ^ (ONES * b'\\' as u64))
}

/// Bytes per step of [`plain_until`]'s vector scan, and how far its
/// eight-byte scan goes before switching to it.
const SCAN_BLOCK: usize = 64;

/// The index of the first byte at or after `i` that a JSON string cannot
/// hold as it is (`"`, `\\` or a control character), or `bytes.len()`. The
/// writer escapes there; the parser's string scan stops there. All three
/// are ASCII, so the index is always a char boundary.
#[inline]
pub(crate) fn plain_until(bytes: &[u8], mut i: usize) -> usize {
    // Eight bytes at a time (SWAR): most strings are keys and short values,
    // and end within 64 bytes, where the block scan's setup showed (a
    // 423-byte body: 346 -> 321 ns without it, one run). A run that gets
    // past 64 plain bytes goes through `skip_blocks` once, out of this hot
    // loop, which then finishes it.
    let mut blocks_from = i.saturating_add(SCAN_BLOCK);
    while let Some(Ok(chunk)) = bytes.get(i..i + 8).map(<[u8; 8]>::try_from) {
        if needs_escape(u64::from_le_bytes(chunk)) {
            break;
        }
        i += 8;
        if i >= blocks_from {
            #[cfg(any(target_feature = "sse2", target_feature = "neon"))]
            {
                i = skip_blocks(bytes, i);
            }
            blocks_from = usize::MAX;
        }
    }
    while let Some(&b) = bytes.get(i) {
        if ESCAPE[b as usize] != 0 {
            break;
        }
        i += 1;
    }
    i
}

/// For [`plain_until`], past 64 plain bytes: skips 64 bytes at a time while
/// none needs attention. The test is a branch-free OR over a fixed-size
/// block, which LLVM turns into vector compares (the workspace forbids
/// `unsafe`, so no hand-written intrinsics). 64, not 32: the reduction and
/// branch run half as often, and a 32 KB scan went from 2.53 to 1.12 µs in
/// a standalone A/B (128 gave 1.01). Only where vectors are baseline:
/// wasm32 without simd128 would run it byte by byte, slower than the SWAR,
/// so there it is not called.
#[cfg(any(target_feature = "sse2", target_feature = "neon"))]
fn skip_blocks(bytes: &[u8], mut i: usize) -> usize {
    while let Some(Ok(block)) = bytes
        .get(i..i + SCAN_BLOCK)
        .map(<&[u8; SCAN_BLOCK]>::try_from)
    {
        let mut hit = false;
        for &b in block {
            hit |= (b < 0x20) | (b == b'"') | (b == b'\\');
        }
        if hit {
            break;
        }
        i += SCAN_BLOCK;
    }
    i
}

/// A string shown in an error message, as a JSON string literal. Not
/// `{:?}`: the Python and JS users who see these messages write strings
/// this way, the three languages then print the same text (a shared error
/// vector checks it), and `str`'s Debug escaper stays out of the wasm
/// modules (0.9 KB raw).
pub(crate) struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        write_string(self.0, &mut out);
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

/// Writes a quoted string escaped exactly as `JSON.stringify` escapes it.
pub fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        let i = plain_until(bytes, start);
        let Some(&b) = bytes.get(i) else {
            break;
        };
        out.extend_from_slice(&bytes[start..i]);
        match ESCAPE[b as usize] {
            b'u' => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
            esc => out.extend_from_slice(&[b'\\', esc]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
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
    fn numbers_follow_ecmascript() {
        let cases = [
            (1.0, "1"),
            (-0.0, "0"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e16, "10000000000000000"),
            (-25.0, "-25"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
        ];
        for (n, want) in cases {
            assert_eq!(s(&Value::Number(n)), want, "{n:?}");
        }
    }

    #[test]
    fn non_finite_is_rejected() {
        for n in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                stringify(&Value::Number(n)).unwrap_err().code(),
                "non_finite_number"
            );
        }
    }

    #[test]
    fn integer_keys_come_first() {
        let v = Value::from_json_str(
            r#"{"b":1,"10":2,"a":3,"2":4,"01":5,"4294967295":6,"4294967294":7}"#,
        )
        .unwrap();
        assert_eq!(
            s(&v),
            r#"{"2":4,"10":2,"4294967294":7,"b":1,"a":3,"01":5,"4294967295":6}"#
        );
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let v = Value::from_json_str(r#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(s(&v), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn strings_escape_like_js() {
        let v = Value::String("q\"b\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é😀\u{2028}".into());
        assert_eq!(
            s(&v),
            "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}é😀\u{2028}\""
        );
    }

    #[test]
    fn the_writer_prints_integers_as_javascript_does() {
        let w = |n: i128| {
            let mut out = Vec::new();
            Writer::new(&mut out)
                .integer(n)
                .map(|()| String::from_utf8(out).unwrap())
                .map_err(|e| e.code())
        };
        let max = 1i128 << 53;
        for n in [0, 7, -7, 1 << 40, -(1 << 40), max, -max] {
            assert_eq!(w(n), Ok(n.to_string()));
        }
        // Past 2^53, only integers JavaScript prints with the same digits
        // pass (2^60 prints as 1152921504606847000 there).
        assert_eq!(w(max + 1), Err("integer_out_of_range"));
        assert_eq!(w(-max - 1), Err("integer_out_of_range"));
        assert_eq!(w(10i128.pow(16)), Ok("10000000000000000".into()));
        assert_eq!(w(1 << 60), Err("integer_out_of_range"));
        assert_eq!(w(i128::MAX), Err("integer_out_of_range"));
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

    #[test]
    fn array_index_rules() {
        assert_eq!(array_index("0"), Some(0));
        assert_eq!(array_index("4294967294"), Some(4_294_967_294));
        for k in [
            "",
            "00",
            "01",
            "-1",
            "1.0",
            "4294967295",
            "99999999999",
            "1a",
            " 1",
        ] {
            assert_eq!(array_index(k), None, "{k}");
        }
    }
}
