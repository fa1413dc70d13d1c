//! Standard Webhooks signatures: `sign_standard`, `verify_standard`
//! (core `standard`).

use crate::error::{err, misuse};
use crate::signature::{bytes_of, header_pairs};
use crate::timestamp::now_of;
use callpost_core as core;
use core::standard::{StandardSecret, DEFAULT_TOLERANCE_MS};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// One `whsec_` secret (`str`) or an iterable of them.
pub(crate) fn standard_secrets(obj: &Bound<'_, PyAny>) -> PyResult<Vec<StandardSecret>> {
    let texts: Vec<String> = if let Ok(s) = obj.cast::<PyString>() {
        vec![s.to_cow()?.into_owned()]
    } else {
        obj.try_iter()
            .map_err(|_| misuse("secrets must be a whsec_ str or a list of them"))?
            .map(|s| {
                s?.extract::<String>()
                    .map_err(|_| misuse("secrets must be a whsec_ str or a list of them"))
            })
            .collect::<PyResult<_>>()?
    };
    texts
        .iter()
        .map(|t| StandardSecret::parse(t).map_err(err))
        .collect()
}

/// The `webhook-id`, `webhook-timestamp` and `webhook-signature` headers
/// for `body` sent at `now` (default: the clock), one signature per secret.
#[pyfunction]
#[pyo3(signature = (msg_id, body, secrets, now=None))]
pub(crate) fn sign_standard(
    msg_id: &str,
    body: &Bound<'_, PyAny>,
    secrets: &Bound<'_, PyAny>,
    now: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(&'static str, String)>> {
    let body = bytes_of(body, "body")?;
    let signed = core::standard::sign(msg_id, now_of(now)?, &body, &standard_secrets(secrets)?)
        .map_err(err)?;
    Ok(signed.into_iter().collect())
}

/// Verifies a request's Standard Webhooks headers against its raw `body`:
/// the timestamp within `tolerance_ms` of `now` (default: the clock), then
/// a `v1` signature under one of `secrets`. Returns `{"id", "timestamp"}`;
/// raises `SignatureError` otherwise.
#[pyfunction]
#[pyo3(signature = (body, headers, secrets, *, now=None, tolerance_ms=DEFAULT_TOLERANCE_MS))]
pub(crate) fn verify_standard<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    secrets: &Bound<'py, PyAny>,
    now: Option<&Bound<'py, PyAny>>,
    tolerance_ms: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let body = bytes_of(body, "body")?;
    let pairs = header_pairs(headers)?;
    let verified = core::standard::verify(
        &body,
        pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        &standard_secrets(secrets)?,
        now_of(now)?,
        tolerance_ms,
    )
    .map_err(err)?;
    let out = PyDict::new(py);
    out.set_item("id", verified.id)?;
    out.set_item("timestamp", verified.timestamp)?;
    Ok(out)
}
