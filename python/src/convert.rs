//! Python objects to core values, and core errors to the Python exceptions
//! defined once in `callpost/_errors.py`.

use callpost_core::json::{JsonError, MAX_DEPTH};
use callpost_core::{
    Call, CallBuilder, FieldKind, JsonObject, Map, Object, Scalar, Timestamp, Value, Writer,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDate, PyDateTime, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple,
};

pyo3::import_exception!(callpost._errors, InvalidCallError);
pyo3::import_exception!(callpost._errors, JSONValueError);
pyo3::import_exception!(callpost._errors, NotJSONError);
pyo3::import_exception!(callpost._errors, SettingsError);
pyo3::import_exception!(callpost._errors, SignatureError);
pyo3::import_exception!(callpost._errors, ConfigError);
pyo3::import_exception!(callpost._errors, MessageTooLargeError);
pyo3::import_exception!(callpost._errors, QueueFullError);
pyo3::import_exception!(callpost._errors, ClosedError);
pyo3::import_exception!(callpost._errors, CallpostError);

/// Maps a core error to its exception, carrying the core's stable code.
pub fn to_py_err(e: &callpost_core::Error) -> PyErr {
    use callpost_core::{EnqueueError, Error};
    let args = (e.code(), e.to_string());
    match e {
        Error::Json(j) => json_err(j),
        Error::Call(callpost_core::CallError::Json(j)) => json_err(j),
        Error::Call(_) => InvalidCallError::new_err(args),
        Error::Settings(_) | Error::Endpoint(_) => SettingsError::new_err(args),
        Error::Signature(_) => SignatureError::new_err(args),
        Error::Audience(_) | Error::State(_) => InvalidCallError::new_err(args),
        Error::Config(_) => ConfigError::new_err(args),
        Error::Enqueue(EnqueueError::Call(c)) => to_py_err(&Error::Call(c.clone())),
        Error::Enqueue(EnqueueError::MessageTooLarge(_)) => MessageTooLargeError::new_err(args),
        Error::Enqueue(EnqueueError::QueueFull(_)) => QueueFullError::new_err(args),
        Error::Enqueue(EnqueueError::Closed) => ClosedError::new_err(args),
        _ => CallpostError::new_err(args),
    }
}

fn json_err(e: &JsonError) -> PyErr {
    let args = (e.code(), e.to_string());
    match e {
        JsonError::NotJson { .. } | JsonError::Cycle(_) | JsonError::NonStringKey(_) => {
            NotJSONError::new_err(args)
        }
        _ => JSONValueError::new_err(args),
    }
}

/// Shorthand: any core error into a `PyErr`.
pub fn err<E: Into<callpost_core::Error>>(e: E) -> PyErr {
    to_py_err(&e.into())
}

/// Converts a Python object to a JSON value as `JSON.stringify` would see the
/// equivalent JS value: dict (str keys), list, tuple, str, int, float, bool,
/// None; aware datetimes and dates become ISO strings. Anything else is
/// `not_json`, naming the path to the bad value.
pub fn to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    walk(obj).map_err(raise)
}

fn raise(e: Walk) -> PyErr {
    match e {
        Walk::Json(j, mut segs) => {
            segs.reverse();
            json_err(&with_path(j, path_string(&segs)))
        }
        Walk::Py(p) => p,
    }
}

/// `JSON.stringify` of a Python value, written straight to bytes by the
/// core's streaming writer (no intermediate tree).
pub fn to_json(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    write_py(&mut Writer::new(&mut out), obj, &mut Stack::new()).map_err(raise)?;
    Ok(out)
}

/// A walk error. The path is collected only on the way out of a failed
/// walk (innermost segment first), so the success path allocates nothing
/// for it.
enum Walk {
    Json(JsonError, Vec<Seg>),
    Py(PyErr),
}

impl Walk {
    fn at(self, seg: Seg) -> Walk {
        match self {
            Walk::Json(e, mut segs) => {
                segs.push(seg);
                Walk::Json(e, segs)
            }
            py => py,
        }
    }
}

impl From<JsonError> for Walk {
    fn from(e: JsonError) -> Self {
        Walk::Json(e, Vec::new())
    }
}
impl From<PyErr> for Walk {
    fn from(e: PyErr) -> Self {
        Walk::Py(e)
    }
}

enum Seg {
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
fn walk(obj: &Bound<'_, PyAny>) -> Result<Value, Walk> {
    let mut out = Vec::with_capacity(128);
    write_py(&mut Writer::new(&mut out), obj, &mut Stack::new())?;
    Ok(Value::from_json_slice(&out)?)
}

/// Writes a Python value through the core's [`Writer`]: the hot path for
/// call bodies and `stringify`, and the basis of [`walk`].
/// Strings are borrowed from the `str` objects (abi3-py310 gives their
/// UTF-8 without a temporary `bytes`).
fn write_py(w: &mut Writer<'_>, obj: &Bound<'_, PyAny>, stack: &mut Stack) -> Result<(), Walk> {
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
        w.string(&datetime_iso(dt)?);
        return Ok(());
    }
    if let Ok(d) = obj.cast::<PyDate>() {
        let s: String = d.call_method0("isoformat")?.extract()?;
        w.string(&s);
        return Ok(());
    }
    Err(not_json(obj))
}

/// The containers being written, outermost first: for cycles and depth.
/// At most [`MAX_DEPTH`] deep, so it is a fixed array, not a `Vec`: the
/// walk of every call then allocates nothing for it.
struct Stack {
    ids: [usize; MAX_DEPTH],
    len: usize,
}

impl Stack {
    fn new() -> Self {
        Self {
            ids: [0; MAX_DEPTH],
            len: 0,
        }
    }
}

/// Runs `write` for a container, with `obj` on the cycle and depth stack.
fn nested(
    obj: &Bound<'_, PyAny>,
    stack: &mut Stack,
    write: impl FnOnce(&mut Stack) -> Result<(), Walk>,
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
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
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
fn write_dict(w: &mut Writer<'_>, d: &Bound<'_, PyDict>, stack: &mut Stack) -> Result<(), Walk> {
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
fn runs_no_python(v: &Bound<'_, PyAny>) -> bool {
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
fn unchanged(d: &Bound<'_, PyDict>, len: usize) -> Result<(), PyErr> {
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
    stack: &mut Stack,
) -> Result<(), Walk> {
    let items: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = d.iter().collect();
    let entries = entries_of(&items)?;
    w.object(entries.iter().copied(), |w, key, v| {
        write_py(w, v, stack).map_err(|e| e.at(Seg::Key(key.to_owned())))
    })
}

/// `v` as a `str`: an exact `str` by pointer first, where `cast` asks the
/// interpreter for the type's flags (a call on the stable ABI).
fn py_str<'a, 'py>(v: &'a Bound<'py, PyAny>) -> Option<&'a Bound<'py, PyString>> {
    v.cast_exact::<PyString>()
        .or_else(|_| v.cast::<PyString>())
        .ok()
}

fn key_str<'a>(k: &'a Bound<'_, PyAny>) -> Result<&'a str, Walk> {
    Ok(py_str(k)
        .ok_or_else(|| JsonError::NonStringKey(String::new()))?
        .to_str()
        .map_err(|_| JsonError::InvalidUnicode)?)
}

/// A call from a dict with Segment's keys. The core's [`CallBuilder`] holds
/// the field rules; this only says what each value is. `properties` and
/// `traits` are written straight to JSON text, the hot path. Values under
/// keys the model ignores are still checked, so a dict is refused for the
/// same values in Python as its JSON would be in JS.
fn call_from_dict(d: &Bound<'_, PyDict>) -> PyResult<Call> {
    let mut b = CallBuilder::new();
    let mut scratch = Vec::new();
    let len = d.len();
    for (k, v) in d.iter().take(len) {
        call_entry(&mut b, key_str(&k).map_err(raise)?, &v, &mut scratch)?;
        if !runs_no_python(&v) {
            unchanged(d, len)?;
        }
    }
    b.finish().map_err(err)
}

/// The fields `Batcher.handle_fields` takes after the kind, by their
/// Segment names, in the order the Python clients pass them.
const CALL_FIELDS: [&str; 13] = [
    "userId",
    "anonymousId",
    "event",
    "name",
    "category",
    "groupId",
    "previousId",
    "properties",
    "traits",
    "context",
    "integrations",
    "timestamp",
    "messageId",
];

/// A call from its kind and [`CALL_FIELDS`]' values: what `call_from_dict`
/// makes of a dict holding them, without the dict. `None` fields are
/// absent, as a `None` value in the dict is.
pub fn call_from_fields(
    kind: &str,
    fields: [Option<&Bound<'_, PyAny>>; CALL_FIELDS.len()],
) -> PyResult<Call> {
    let mut b = CallBuilder::new();
    let mut scratch = Vec::new();
    b.scalar("type", Scalar::Str(kind));
    for (key, v) in CALL_FIELDS.iter().zip(fields) {
        if let Some(v) = v.filter(|v| !v.is_none()) {
            call_entry(&mut b, key, v, &mut scratch)?;
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
) -> PyResult<()> {
    let at = |e: Walk| raise(e.at(Seg::Key(key.to_owned())));
    let kind = CallBuilder::field_kind(key);
    if let (FieldKind::Object | FieldKind::Map, Ok(inner)) = (kind, v.cast::<PyDict>()) {
        let object = if kind == FieldKind::Object {
            let mut stack = Stack::new();
            Object::Json(
                JsonObject::write_with(|w| nested(v, &mut stack, |s| write_dict(w, inner, s)))
                    .map_err(at)?,
            )
        } else {
            match walk(v).map_err(at)? {
                Value::Object(m) => Object::Map(m),
                _ => Object::Map(Map::new()),
            }
        };
        b.object(key, object);
        return Ok(());
    }
    // Everything else: check it has a JSON form, then hand its scalar view.
    let iso;
    // None first: by pointer, as `py_str` tries an exact `str`.
    let scalar = if v.is_none() {
        Scalar::Null
    } else if let Some(s) = py_str(v) {
        Scalar::Str(
            s.to_str()
                .map_err(|_| json_err(&JsonError::InvalidUnicode))?,
        )
    } else if v.cast::<PyBool>().is_ok() {
        Scalar::Other("boolean")
    } else if v.cast::<PyInt>().is_ok() || v.cast::<PyFloat>().is_ok() {
        match walk(v).map_err(at)? {
            Value::Number(n) => Scalar::Number(n),
            _ => Scalar::Other("number"),
        }
    } else if v.cast::<PyDateTime>().is_ok() || v.cast::<PyDate>().is_ok() {
        iso = match walk(v).map_err(at)? {
            Value::String(s) => s,
            _ => String::new(),
        };
        Scalar::Str(&iso)
    } else {
        scratch.clear();
        write_py(&mut Writer::new(scratch), v, &mut Stack::new()).map_err(at)?;
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

/// An aware datetime as `JSON.stringify` writes a JS `Date`: UTC with
/// milliseconds. A naive datetime is refused for the same reason the core
/// refuses an ISO string without an offset: its instant is unknown.
fn datetime_iso(dt: &Bound<'_, PyDateTime>) -> Result<String, Walk> {
    Ok(Timestamp::from_millis(datetime_millis(dt)?)
        .map_err(|e| {
            Walk::Py(InvalidCallError::new_err((
                "invalid_timestamp",
                e.to_string(),
            )))
        })?
        .to_string())
}

/// Milliseconds since the epoch of an aware datetime.
pub fn datetime_millis(dt: &Bound<'_, PyAny>) -> PyResult<i64> {
    if dt.getattr("tzinfo")?.is_none() || dt.call_method0("utcoffset")?.is_none() {
        return Err(InvalidCallError::new_err((
            "invalid_timestamp",
            "datetime has no timezone; pass an aware datetime (for example with tzinfo=timezone.utc)",
        )));
    }
    let ts: f64 = dt.call_method0("timestamp")?.extract()?;
    // timestamp() is a float of seconds; round to the millisecond it denotes.
    let micros: i64 = dt.getattr("microsecond")?.extract()?;
    Ok((ts.floor() as i64) * 1000 + micros / 1000)
}

/// Bytes from `str` (UTF-8) or `bytes`.
pub fn bytes_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = obj.extract::<Vec<u8>>() {
        return Ok(b);
    }
    Err(PyTypeError::new_err(format!("{what} must be str or bytes")))
}

/// A call as a core call: a dict with Segment's camelCase keys (where
/// `timestamp` may also be an aware `datetime`), or the call's JSON text as
/// `str` or `bytes`, which the core parses directly.
pub fn to_call(obj: &Bound<'_, PyAny>) -> PyResult<callpost_core::Call> {
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s
            .to_cow()
            .map_err(|_| json_err(&JsonError::InvalidUnicode))?;
        return callpost_core::Call::from_json_str(&text).map_err(err);
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        // The streaming parse, as for `str`: a forwarder's raw body keeps
        // its canonical `properties` text instead of becoming a tree.
        return callpost_core::Call::from_json_slice(b.as_bytes()).map_err(err);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return call_from_dict(d);
    }
    callpost_core::Call::from_owned(to_value(obj)?).map_err(err)
}

/// Milliseconds from an optional `int` (ms) or aware `datetime`; `None`
/// reads the host clock, which is the binding's job, not the core's.
pub fn now_ms(_py: Python<'_>, now: Option<&Bound<'_, PyAny>>) -> PyResult<i64> {
    match now {
        Some(v) if !v.is_none() => {
            if let Ok(ms) = v.extract::<i64>() {
                return Ok(ms);
            }
            datetime_millis(v)
        }
        // The host clock is the binding's to read (the core has none).
        _ => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string())),
    }
}
