//! Receiving a webhook: `receive` and `receive_webhook`, over
//! `core::receive`.

use crate::error::{err, misuse};
use crate::json::value_to_py;
use crate::signature::{bytes_of, header_pairs, secrets_of};
use callpost_core as core;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

/// The raw body, with a message that names the fix when the caller passed
/// what a framework had already parsed.
fn raw_body(body: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if body.is_instance_of::<PyDict>() || body.is_instance_of::<PyList>() {
        return Err(misuse(
            "body must be the raw request body (bytes or str) exactly as received, not a parsed \
             dict or list: re-serializing changes the bytes the signature covers. Read the raw \
             body (Flask: request.get_data(), Django: request.body, Starlette: await \
             request.body()), or verify a parsed body with verify_parsed(value, signature, secrets)",
        ));
    }
    bytes_of(body, "body")
}

fn check(
    body: &Bound<'_, PyAny>,
    headers: &Bound<'_, PyAny>,
    secrets: &Bound<'_, PyAny>,
    allow_first_event_signature: bool,
) -> PyResult<core::Received> {
    let body = raw_body(body)?;
    let pairs = header_pairs(headers)?;
    let secrets = secrets_of(secrets)?;
    let options = core::ReceiveOptions {
        allow_first_event_signature,
    };
    core::receive(
        &body,
        pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        &secrets,
        options,
    )
    .map_err(err)
}

/// Verifies a received webhook and returns its parsed body: a dict for one
/// call, a list for a batch. Raises `SignatureError` (`missing_signature`,
/// `malformed_signature`, `signature_mismatch`, `first_event_signature`)
/// or `JSONValueError` (a verified body that is not JSON).
#[pyfunction]
#[pyo3(signature = (body, headers, secrets, *, allow_first_event_signature = false))]
pub(crate) fn receive<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    secrets: &Bound<'py, PyAny>,
    allow_first_event_signature: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let received = check(body, headers, secrets, allow_first_event_signature)?;
    value_to_py(py, &received.value)
}

/// [`receive`] with what the framework helpers need besides the body:
/// `(value, header, coverage, message_ids)`, the ids in call order (None
/// for a call without one).
#[pyfunction]
#[pyo3(signature = (body, headers, secrets, *, allow_first_event_signature = false))]
pub(crate) fn receive_webhook<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    secrets: &Bound<'py, PyAny>,
    allow_first_event_signature: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let received = check(body, headers, secrets, allow_first_event_signature)?;
    let value = value_to_py(py, &received.value)?;
    let ids = received.message_ids();
    PyTuple::new(
        py,
        [
            value,
            received.header.into_pyobject(py)?.into_any(),
            received.coverage.as_str().into_pyobject(py)?.into_any(),
            PyList::new(py, ids)?.into_any(),
        ],
    )
}

/// The HTTP status a receiver answers a refused webhook with, by error code.
#[pyfunction]
pub(crate) fn refusal_status(code: &str) -> PyResult<u16> {
    let code =
        core::Code::parse(code).ok_or_else(|| misuse(format!("unknown error code {code:?}")))?;
    Ok(core::receive::refusal_status(code))
}
