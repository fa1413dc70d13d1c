//! Calls from Python: a dict with Segment's keys, the call's JSON text
//! (`str` or `bytes`), or its fields as arguments. The core's
//! [`CallBuilder`] holds every field rule; this module only says what each
//! Python value is.

use crate::error::err;
use crate::json::{
    key_str, nested, py_str, raise, runs_no_python, unchanged, walk, write_dict, write_py,
    DefaultHook, Seg, Stack, Walk,
};
use callpost_core::json::JsonError;
use callpost_core::{
    Call, CallBuilder, FieldKind, JsonObject, Map, Object, Scalar, Value, Writer, CALL_FIELDS,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDate, PyDateTime, PyDict, PyFloat, PyInt, PyString};

/// A call as a core call: a dict with Segment's camelCase keys (where
/// `timestamp` may also be an aware `datetime`), or the call's JSON text as
/// `str` or `bytes`, which the core parses directly.
pub(crate) fn to_call(obj: &Bound<'_, PyAny>) -> PyResult<Call> {
    to_call_with(obj, None)
}

/// [`to_call`], with a `default=` hook for values that have no JSON form.
pub(crate) fn to_call_with(obj: &Bound<'_, PyAny>, default: DefaultHook<'_, '_>) -> PyResult<Call> {
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_cow().map_err(|_| err(JsonError::InvalidUnicode))?;
        return Call::from_json_str(&text).map_err(err);
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        // The streaming parse, as for `str`: a forwarder's raw body keeps
        // its canonical `properties` text instead of becoming a tree.
        return Call::from_json_slice(b.as_bytes()).map_err(err);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return call_from_dict(d, default);
    }
    Call::from_owned(walk(obj, default).map_err(raise)?).map_err(err)
}

/// A call from a dict with Segment's keys. The core's [`CallBuilder`] holds
/// the field rules; this only says what each value is. `properties` and
/// `traits` are written straight to JSON text, the hot path. Values under
/// keys the model ignores are still checked, so a dict is refused for the
/// same values in Python as its JSON would be in JS.
fn call_from_dict(d: &Bound<'_, PyDict>, default: DefaultHook<'_, '_>) -> PyResult<Call> {
    let mut b = CallBuilder::new();
    let mut scratch = Vec::new();
    let len = d.len();
    for (k, v) in d.iter().take(len) {
        call_entry(
            &mut b,
            key_str(&k).map_err(raise)?,
            &v,
            &mut scratch,
            default,
        )?;
        if !runs_no_python(&v) {
            unchanged(d, len)?;
        }
    }
    b.finish().map_err(err)
}

/// A call from its kind and [`CALL_FIELDS`]' values: what `call_from_dict`
/// makes of a dict holding them, without the dict. `None` fields are
/// absent, as a `None` value in the dict is.
pub(crate) fn call_from_fields(
    kind: &str,
    fields: [Option<&Bound<'_, PyAny>>; CALL_FIELDS.len()],
    default: DefaultHook<'_, '_>,
) -> PyResult<Call> {
    let mut b = CallBuilder::new();
    let mut scratch = Vec::new();
    b.scalar("type", Scalar::Str(kind));
    for (key, v) in CALL_FIELDS.iter().zip(fields) {
        if let Some(v) = v.filter(|v| !v.is_none()) {
            call_entry(&mut b, key, v, &mut scratch, default)?;
        }
    }
    b.finish().map_err(err)
}

/// One `key: value` of a call dict into the builder.
fn call_entry(
    b: &mut CallBuilder,
    key: &str,
    v: &Bound<'_, PyAny>,
    scratch: &mut Vec<u8>,
    default: DefaultHook<'_, '_>,
) -> PyResult<()> {
    let at = |e: Walk| raise(e.at(Seg::Key(key.to_owned())));
    let kind = CallBuilder::field_kind(key);
    if let (FieldKind::Object | FieldKind::Map, Ok(inner)) = (kind, v.cast::<PyDict>()) {
        let object = if kind == FieldKind::Object {
            let mut stack = Stack::with_default(default);
            Object::Json(
                JsonObject::write_with(|w| nested(v, &mut stack, |s| write_dict(w, inner, s)))
                    .map_err(at)?,
            )
        } else {
            match walk(v, default).map_err(at)? {
                Value::Object(m) => Object::Map(m),
                _ => Object::Map(Map::new()),
            }
        };
        b.object(key, object);
        return Ok(());
    }
    // Everything else: check it has a JSON form, then hand its scalar view.
    // Numbers go as the host holds them (an int's exact digits, a float's
    // double): the core's rule decides what an id or another field makes
    // of each.
    let iso;
    let digits;
    // None first: by pointer, as `py_str` tries an exact `str`.
    let scalar = if v.is_none() {
        Scalar::Null
    } else if let Some(s) = py_str(v) {
        Scalar::Str(s.to_str().map_err(|_| err(JsonError::InvalidUnicode))?)
    } else if v.cast::<PyBool>().is_ok() {
        Scalar::Other("boolean")
    } else if let Ok(i) = v.cast::<PyInt>() {
        digits = int_digits(i)?;
        Scalar::Integer(&digits)
    } else if let Ok(f) = v.cast::<PyFloat>() {
        Scalar::Float(f.value())
    } else if v.cast::<PyDateTime>().is_ok() || v.cast::<PyDate>().is_ok() {
        iso = match walk(v, default).map_err(at)? {
            Value::String(s) => s,
            _ => String::new(),
        };
        Scalar::Str(&iso)
    } else {
        scratch.clear();
        write_py(
            &mut Writer::new(scratch),
            v,
            &mut Stack::with_default(default),
        )
        .map_err(at)?;
        match scratch.first() {
            Some(b'{') => Scalar::Other("object"),
            Some(b'[') => Scalar::Other("array"),
            _ => Scalar::Other("value"),
        }
    };
    if kind != FieldKind::Ignored {
        b.scalar(key, scalar);
    }
    Ok(())
}

/// A Python `int`'s exact decimal digits, whatever its size.
fn int_digits(i: &Bound<'_, PyInt>) -> PyResult<String> {
    // i64 first: on the stable ABI, i128 takes the slow path.
    if let Ok(n) = i.extract::<i64>() {
        return Ok(n.to_string());
    }
    if let Ok(n) = i.extract::<i128>() {
        return Ok(n.to_string());
    }
    // `int.__repr__` rather than `str(i)`: a subclass (an `IntEnum`) may
    // print itself otherwise.
    i.py()
        .get_type::<PyInt>()
        .call_method1("__repr__", (i,))?
        .extract()
}
