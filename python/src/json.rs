//! Python values as `JSON.stringify` output: one walker over Python
//! objects (`write_py`) drives the core's streaming [`Writer`], and every
//! rule about the output (numbers, key order, escaping, depth, refusals) is
//! the core's.

use crate::error::err;
use crate::timestamp::datetime_millis;
use callpost_core::json::{JsonError, MAX_DEPTH};
use callpost_core::{Timestamp, Value, Writer};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDate, PyDateTime, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// `JSON.stringify(value)`, exactly. `default` is called, as by
/// `json.dumps`, with each value that has no JSON form, and its result is
/// written instead.
#[pyfunction]
#[pyo3(signature = (value, *, default=None))]
pub(crate) fn stringify(
    value: &Bound<'_, PyAny>,
    default: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let mut out = Vec::with_capacity(256);
    let mut stack = Stack::with_default(default.filter(|d| !d.is_none()));
    write_py(&mut Writer::new(&mut out), value, &mut stack).map_err(raise)?;
    // The writer emits only UTF-8 (str input, ASCII punctuation).
    String::from_utf8(out).map_err(|_| err(JsonError::InvalidUnicode))
}

/// Converts a Python object to a JSON value as `JSON.stringify` would see the
/// equivalent JS value: dict (str keys), list, tuple, str, int, float, bool,
/// None; aware datetimes and dates become ISO strings. Anything else is
/// `not_json`, naming the path to the bad value.
pub(crate) fn to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    walk(obj, None).map_err(raise)
}

pub(crate) fn raise(e: Walk) -> PyErr {
    match e {
        Walk::Json(j, mut segs) => {
            segs.reverse();
            err(with_path(j, path_string(&segs)))
        }
        Walk::Py(p) => p,
    }
}

/// A walk error. The path is collected only on the way out of a failed
/// walk (innermost segment first), so the success path allocates nothing
/// for it.
pub(crate) enum Walk {
    Json(JsonError, Vec<Seg>),
    Py(PyErr),
}

impl Walk {
    pub(crate) fn at(self, seg: Seg) -> Self {
        match self {
            Self::Json(e, mut segs) => {
                segs.push(seg);
                Self::Json(e, segs)
            }
            py => py,
        }
    }
}

impl From<JsonError> for Walk {
    fn from(e: JsonError) -> Self {
        Self::Json(e, Vec::new())
    }
}
impl From<PyErr> for Walk {
    fn from(e: PyErr) -> Self {
        Self::Py(e)
    }
}

pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

fn path_string(path: &[Seg]) -> String {
    let mut s = String::from("$");
    for seg in path {
        match seg {
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn with_path(e: JsonError, path: String) -> JsonError {
    match e {
        JsonError::NotJson { type_name, .. } => JsonError::NotJson { path, type_name },
        JsonError::Cycle(_) => JsonError::Cycle(path),
        JsonError::NonStringKey(_) => JsonError::NonStringKey(path),
        other => other,
    }
}

/// A Python value as a core [`Value`]: written by [`write_py`] (the one
/// walker over Python objects, so both forms follow the same rules and name
/// the same paths), then read back by the core's parser, which is lossless
/// for everything the writer emits. Used for small objects the core reads
/// inside (`context`, `integrations`, settings).
pub(crate) fn walk(obj: &Bound<'_, PyAny>, default: DefaultHook<'_, '_>) -> Result<Value, Walk> {
    let mut out = Vec::with_capacity(128);
    write_py(
        &mut Writer::new(&mut out),
        obj,
        &mut Stack::with_default(default),
    )?;
    Ok(Value::from_json_slice(&out)?)
}

/// Writes a Python value through the core's [`Writer`]: the hot path for
/// call bodies and `stringify`, and the basis of [`walk`].
/// Strings are borrowed from the `str` objects (abi3-py310 gives their
/// UTF-8 without a temporary `bytes`).
pub(crate) fn write_py(
    w: &mut Writer<'_>,
    obj: &Bound<'_, PyAny>,
    stack: &mut Stack<'_, '_>,
) -> Result<(), Walk> {
    // Exact built-in types by pointer first: on the stable ABI every
    // `isinstance`-style check is a call into the interpreter, and these
    // few types are nearly every value in a payload.
    if let Ok(s) = obj.cast_exact::<PyString>() {
        w.string(s.to_str().map_err(|_| JsonError::InvalidUnicode)?);
        return Ok(());
    }
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return Ok(w.number(f.value())?);
    }
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            return Ok(w.integer(i128::from(n))?);
        }
    }
    if obj.is_none() {
        w.null();
        return Ok(());
    }
    if let Ok(d) = obj.cast_exact::<PyDict>() {
        return nested(obj, stack, |stack| write_dict(w, d, stack));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        w.string(s.to_str().map_err(|_| JsonError::InvalidUnicode)?);
        return Ok(());
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        w.bool(b.is_true());
        return Ok(());
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            return Ok(w.integer(i128::from(n))?);
        }
        return match i.extract::<i128>() {
            Ok(n) => Ok(w.integer(n)?),
            Err(_) => Err(JsonError::IntegerOutOfRange(i.to_string()).into()),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(w.number(f.value())?);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return nested(obj, stack, |stack| write_dict(w, d, stack));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return nested(obj, stack, |stack| {
            w.array(l.iter(), |w, i, item| {
                write_py(w, &item, stack).map_err(|e| e.at(Seg::Index(i)))
            })
        });
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return nested(obj, stack, |stack| {
            w.array(t.iter(), |w, i, item| {
                write_py(w, &item, stack).map_err(|e| e.at(Seg::Index(i)))
            })
        });
    }
    if let Ok(dt) = obj.cast::<PyDateTime>() {
        match datetime_iso(dt) {
            Ok(iso) => w.string(&iso),
            // A naive datetime has no instant; the caller's `default` may
            // know which it means.
            Err(_) if stack.default.is_some() => return write_default(w, obj, stack),
            Err(e) => return Err(e),
        }
        return Ok(());
    }
    if let Ok(d) = obj.cast::<PyDate>() {
        let s: String = d.call_method0("isoformat")?.extract()?;
        w.string(&s);
        return Ok(());
    }
    write_default(w, obj, stack)
}

/// A caller's `default=` hook, as `json.dumps` takes it: called with a
/// value that has no JSON form, its result written in its place.
pub(crate) type DefaultHook<'a, 'py> = Option<&'a Bound<'py, PyAny>>;

/// `obj` through the stack's `default`, or `not_json` without one. The call counts as a level of
/// nesting with `obj` on the stack, so a hook that returns its argument is
/// a cycle and one that never settles runs into the depth limit, instead
/// of recursing for ever.
fn write_default(
    w: &mut Writer<'_>,
    obj: &Bound<'_, PyAny>,
    stack: &mut Stack<'_, '_>,
) -> Result<(), Walk> {
    let Some(default) = stack.default else {
        return Err(not_json(obj));
    };
    let replacement = match default.call1((obj,)) {
        Ok(r) => r,
        // `json.dumps`' contract: a hook raises TypeError for a value it
        // does not convert either; that is `not_json`, with the value's path.
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(default.py()) => {
            return Err(not_json(obj))
        }
        Err(e) => return Err(e.into()),
    };
    nested(obj, stack, |stack| write_py(w, &replacement, stack))
}

/// The containers being written, outermost first: for cycles and depth.
/// At most [`MAX_DEPTH`] deep, so it is a fixed array, not a `Vec`: the
/// walk of every call then allocates nothing for it. It also carries the
/// caller's `default=` hook down the walk.
pub(crate) struct Stack<'a, 'py> {
    ids: [usize; MAX_DEPTH],
    len: usize,
    default: DefaultHook<'a, 'py>,
}

impl<'a, 'py> Stack<'a, 'py> {
    pub(crate) fn with_default(default: DefaultHook<'a, 'py>) -> Self {
        Self {
            ids: [0; MAX_DEPTH],
            len: 0,
            default,
        }
    }
}

/// Runs `write` for a container, with `obj` on the cycle and depth stack.
pub(crate) fn nested<'a, 'py>(
    obj: &Bound<'_, PyAny>,
    stack: &mut Stack<'a, 'py>,
    write: impl FnOnce(&mut Stack<'a, 'py>) -> Result<(), Walk>,
) -> Result<(), Walk> {
    let id = obj.as_ptr() as usize;
    if stack.ids[..stack.len].contains(&id) {
        return Err(JsonError::Cycle(String::new()).into());
    }
    // The core's writer refuses the same depth; this keeps the array in
    // range whichever check comes first.
    let Some(slot) = stack.ids.get_mut(stack.len) else {
        return Err(JsonError::TooDeep.into());
    };
    *slot = id;
    stack.len += 1;
    write(stack)?;
    stack.len -= 1;
    Ok(())
}

fn not_json(obj: &Bound<'_, PyAny>) -> Walk {
    let type_name = obj
        .get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string());
    JsonError::NotJson {
        path: String::new(),
        type_name,
    }
    .into()
}

/// A dict's entries with their keys as `&str`, borrowed from the key
/// objects that `items` keeps alive.
fn entries_of<'a, 'py>(
    items: &'a [(Bound<'py, PyAny>, Bound<'py, PyAny>)],
) -> Result<Vec<(&'a str, &'a Bound<'py, PyAny>)>, Walk> {
    items.iter().map(|(k, v)| Ok((key_str(k)?, v))).collect()
}

/// A dict as an object, in its own order while no key is an array index
/// (nearly always): no list of its entries is made.
pub(crate) fn write_dict(
    w: &mut Writer<'_>,
    d: &Bound<'_, PyDict>,
    stack: &mut Stack<'_, '_>,
) -> Result<(), Walk> {
    let mut mark = w.begin_object()?;
    let len = d.len();
    for (k, v) in d.iter().take(len) {
        let key = key_str(&k)?;
        if !w.key(&mut mark, key) {
            w.abandon_object(mark);
            return write_dict_ordered(w, d, stack);
        }
        write_py(w, &v, stack).map_err(|e| e.at(Seg::Key(key.to_owned())))?;
        if !runs_no_python(&v) {
            unchanged(d, len)?;
        }
    }
    w.end_object(mark);
    Ok(())
}

/// Whether writing `v` certainly ran no Python code: an exact `str`, `int`,
/// `float`, `bool` or `None` (type pointer checks, no calls). After any
/// other value, [`unchanged`] checks the dict; skipping it for these saves
/// a call into the interpreter per entry.
pub(crate) fn runs_no_python(v: &Bound<'_, PyAny>) -> bool {
    v.is_none()
        || v.is_exact_instance_of::<PyString>()
        || v.is_exact_instance_of::<PyInt>()
        || v.is_exact_instance_of::<PyFloat>()
        || v.is_exact_instance_of::<PyBool>()
}

/// Python code can run inside a walk (a datetime's `tzinfo.utcoffset`, a
/// date subclass's `isoformat`) and could resize the dict being walked;
/// pyo3's dict iterator panics on that. Checked after each value, with at
/// most `len` entries taken, it is Python's own error instead.
pub(crate) fn unchanged(d: &Bound<'_, PyDict>, len: usize) -> Result<(), PyErr> {
    if d.len() == len {
        return Ok(());
    }
    Err(pyo3::exceptions::PyRuntimeError::new_err(
        "dictionary changed size during iteration",
    ))
}

/// A dict with array-index keys, which JavaScript lists first.
fn write_dict_ordered(
    w: &mut Writer<'_>,
    d: &Bound<'_, PyDict>,
    stack: &mut Stack<'_, '_>,
) -> Result<(), Walk> {
    let items: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = d.iter().collect();
    let entries = entries_of(&items)?;
    w.object(entries.iter().copied(), |w, key, v| {
        write_py(w, v, stack).map_err(|e| e.at(Seg::Key(key.to_owned())))
    })
}

/// `v` as a `str`: an exact `str` by pointer first, where `cast` asks the
/// interpreter for the type's flags (a call on the stable ABI).
pub(crate) fn py_str<'a, 'py>(v: &'a Bound<'py, PyAny>) -> Option<&'a Bound<'py, PyString>> {
    v.cast_exact::<PyString>()
        .or_else(|_| v.cast::<PyString>())
        .ok()
}

pub(crate) fn key_str<'a>(k: &'a Bound<'_, PyAny>) -> Result<&'a str, Walk> {
    Ok(py_str(k)
        .ok_or_else(|| JsonError::NonStringKey(String::new()))?
        .to_str()
        .map_err(|_| JsonError::InvalidUnicode)?)
}

/// An aware datetime as `JSON.stringify` writes a JS `Date`: UTC with
/// milliseconds. A naive datetime is refused for the same reason the core
/// refuses an ISO string without an offset: its instant is unknown.
fn datetime_iso(dt: &Bound<'_, PyDateTime>) -> Result<String, Walk> {
    Ok(Timestamp::from_millis(datetime_millis(dt)?)
        .map_err(|e| Walk::Py(err(e)))?
        .to_string())
}

/// A JSON value as Python objects, as `json.loads` builds them: dict, list,
/// str, bool, None, and numbers as `int` when integral and within ±2^53
/// (the core keeps JavaScript's one number type), `float` otherwise.
pub(crate) fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) if n.fract() == 0.0 && n.abs() <= EXACT => {
            // Integral and within ±2^53, so the cast is exact.
            #[allow(clippy::cast_possible_truncation)]
            let i = *n as i64;
            i.into_pyobject(py)?.into_any()
        }
        Value::Number(n) => PyFloat::new(py, *n).into_any(),
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, value_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}
