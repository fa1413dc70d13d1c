//! Signing and verification: `sign`, `verify`, `verify_request`,
//! `verify_parsed`.

use crate::error::{err, misuse};
use crate::json::to_value;
use callpost_core as core;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// The last secret `sign` or `verify` was given, prekeyed (see
/// `core::KeyCache`). Calls hold the GIL, so the lock is uncontended; if it
/// is ever busy, the call keys its own secret instead of waiting.
static KEYS: std::sync::Mutex<core::KeyCache> = std::sync::Mutex::new(core::KeyCache::new());

/// `f` with `key`'s prekeyed secret.
fn with_secret<T>(key: &[u8], f: impl FnOnce(&core::Secret) -> T) -> PyResult<T> {
    match KEYS.try_lock() {
        Ok(mut keys) => Ok(f(keys.secret(key).map_err(err)?)),
        Err(_) => Ok(f(&core::Secret::new(key).map_err(err)?)),
    }
}

/// Bytes from `str` (UTF-8) or a bytes-like object.
pub(crate) fn bytes_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = obj.extract::<Vec<u8>>() {
        return Ok(b);
    }
    Err(misuse(format!("{what} must be str or bytes")))
}

fn is_one_secret(obj: &Bound<'_, PyAny>) -> bool {
    obj.cast::<PyString>().is_ok() || obj.cast::<PyBytes>().is_ok()
}

/// One secret (`str`/`bytes`) or an iterable of them.
pub(crate) fn secrets_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<core::Secret>> {
    let raw: Vec<Vec<u8>> = if is_one_secret(obj) {
        vec![bytes_of(obj, "secret")?]
    } else {
        obj.try_iter()
            .map_err(|_| misuse("secrets must be a str, bytes, or a list of them"))?
            .map(|s| bytes_of(&s?, "secret"))
            .collect::<PyResult<_>>()?
    };
    raw.into_iter()
        .map(|k| core::Secret::new(k).map_err(err))
        .collect()
}

/// Lowercase hex HMAC-SHA1 of `body`, keyed with `secret`.
#[pyfunction]
pub(crate) fn sign(secret: &Bound<'_, PyAny>, body: &Bound<'_, PyAny>) -> PyResult<String> {
    let key = bytes_of(secret, "secret")?;
    let body = bytes_of(body, "body")?;
    with_secret(&key, |s| s.sign(&body))
}

/// Verifies `signature` over the raw `body` against one secret or several.
#[pyfunction]
pub(crate) fn verify(
    body: &Bound<'_, PyAny>,
    signature: &str,
    secrets: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let body = bytes_of(body, "body")?;
    if is_one_secret(secrets) {
        let key = bytes_of(secrets, "secret")?;
        return with_secret(&key, |s| {
            core::verify(&body, signature, std::slice::from_ref(s))
        })?
        .map_err(err);
    }
    core::verify(&body, signature, &secrets_of(secrets)?).map_err(err)
}

/// Verifies a received webhook from its raw body and its headers (any
/// mapping, or name/value pairs). False when no signature header is there.
#[pyfunction]
pub(crate) fn verify_request(
    body: &Bound<'_, PyAny>,
    headers: &Bound<'_, PyAny>,
    secrets: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let pairs = header_pairs(headers)?;
    let found = core::signature_header(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    match found {
        Some(signature) => verify(body, signature, secrets),
        None => Ok(false),
    }
}

/// A request's headers as name/value pairs: a mapping (dict, Flask's
/// `EnvironHeaders`, Starlette's `Headers`, Django's `HttpHeaders`) or an
/// iterable of pairs (tuples or lists; `str`, or `bytes` as ASGI's raw
/// headers are, read as Latin-1 as HTTP/1.1 defines header bytes).
pub(crate) fn header_pairs(headers: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let items = if headers.hasattr("items")? {
        headers.call_method0("items")?
    } else {
        headers.clone()
    };
    let bad = || misuse("each header must be a (name, value) pair of str or bytes");
    let text = |v: Bound<'_, PyAny>| -> PyResult<String> {
        if let Ok(s) = v.cast::<PyString>() {
            return Ok(s.to_cow()?.into_owned());
        }
        if let Ok(b) = v.cast::<PyBytes>() {
            return Ok(b.as_bytes().iter().map(|&c| char::from(c)).collect());
        }
        Err(bad())
    };
    items
        .try_iter()
        .map_err(|_| misuse("headers must be a mapping or an iterable of (name, value) pairs"))?
        .map(|item| {
            let item = item?;
            if item.is_instance_of::<PyString>()
                || item.is_instance_of::<PyBytes>()
                || item.len().ok() != Some(2)
            {
                return Err(bad());
            }
            Ok((text(item.get_item(0)?)?, text(item.get_item(1)?)?))
        })
        .collect()
}

/// Verifies a parsed body by re-stringifying it as JavaScript does.
#[pyfunction]
pub(crate) fn verify_parsed(
    value: &Bound<'_, PyAny>,
    signature: &str,
    secrets: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    core::verify_value(&to_value(value)?, signature, &secrets_of(secrets)?).map_err(err)
}
