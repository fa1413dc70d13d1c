//! The canonical writer: `JSON.stringify` output from [`Value`]s, and
//! straight from a host's own values through [`Writer`].

use super::{write_number, write_string, JsonError, Map, Value, MAX_DEPTH};
use std::fmt;

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

    /// Text the parser wrote in `JSON.stringify` form
    /// (`Parser::transcode_object`).
    pub(crate) fn from_transcoded(text: Vec<u8>) -> Self {
        Self(text)
    }

    /// The JSON text, UTF-8 (every constructor writes only `&str`s and
    /// ASCII).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The value at `keys` (a path of object keys), parsed alone: the
    /// members before it on the way are skipped, not built (a destination
    /// filter reading one property of a 32 KB call).
    pub fn get_path(&self, keys: &[String]) -> Option<Value> {
        let text = std::str::from_utf8(&self.0).ok()?;
        let (_, value_at, end) = super::member_span(text, keys)?;
        Value::from_json_str(&text[value_at..end]).ok()
    }

    /// The object without the member at `keys`, cut out of the text: the
    /// rest stays the same bytes. `None` when there is no such member.
    pub fn without_path(&self, keys: &[String]) -> Option<Self> {
        let text = std::str::from_utf8(&self.0).ok()?;
        let (key_at, _, end) = super::member_span(text, keys)?;
        let bytes = text.as_bytes();
        // The text is compact (`JSON.stringify` form): a member follows a
        // `{` or a `,`, and is followed by a `,` or a `}`. Its own comma
        // goes with it.
        let (cut_from, cut_to) = match (bytes.get(key_at.wrapping_sub(1)), bytes.get(end)) {
            (Some(b','), _) => (key_at - 1, end),
            (_, Some(b',')) => (key_at, end + 1),
            _ => (key_at, end),
        };
        let mut out = Vec::with_capacity(bytes.len() - (cut_to - cut_from));
        out.extend_from_slice(&bytes[..cut_from]);
        out.extend_from_slice(&bytes[cut_to..]);
        Some(Self(out))
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::json::{stringify, Value};

    #[test]
    fn a_member_is_read_and_cut_from_the_text_alone() {
        let o =
            JsonObject::from_canonical(r#"{"0":1,"a\"b":{"x":[1,{"y":2}],"y":"ünï"},"c":null}"#);
        let path = |p: &[&str]| p.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
        assert_eq!(o.get_path(&path(&["a\"b", "y"])), Some(Value::from("ünï")));
        assert_eq!(o.get_path(&path(&["c"])), Some(Value::Null));
        assert_eq!(
            o.get_path(&path(&["a\"b", "x", "y"])),
            None,
            "no path through arrays"
        );
        assert_eq!(o.get_path(&path(&["d"])), None);
        let cut = |p: &[&str]| {
            let out = o.without_path(&path(p)).unwrap();
            String::from_utf8(out.as_bytes().to_vec()).unwrap()
        };
        assert_eq!(
            cut(&["0"]),
            r#"{"a\"b":{"x":[1,{"y":2}],"y":"ünï"},"c":null}"#
        );
        assert_eq!(cut(&["c"]), r#"{"0":1,"a\"b":{"x":[1,{"y":2}],"y":"ünï"}}"#);
        assert_eq!(
            cut(&["a\"b", "x"]),
            r#"{"0":1,"a\"b":{"y":"ünï"},"c":null}"#
        );
        let one = JsonObject::from_canonical(r#"{"only":{"k":true}}"#);
        let gone = one.without_path(&path(&["only", "k"])).unwrap();
        assert_eq!(gone.as_bytes(), br#"{"only":{}}"#);
        assert!(o.without_path(&path(&["nothing"])).is_none());
    }

    fn s(v: &Value) -> String {
        stringify(v).unwrap()
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
    fn the_writer_prints_integers_as_javascript_does() {
        let w = |n: i128| {
            let mut out = Vec::new();
            Writer::new(&mut out)
                .integer(n)
                .map(|()| String::from_utf8(out).unwrap())
                .map_err(|e| e.code().as_str())
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
