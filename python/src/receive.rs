//! Receiving a webhook: `receive` and `receive_webhook`, over
//! `core::receive`.

use crate::error::{err, misuse};
use crate::json::value_to_py;
use crate::signature::{bytes_of, header_pairs, secrets_of};
use crate::standard::standard_secrets;
use crate::timestamp::now_of;
use callpost_core as core;
use core::standard::DEFAULT_TOLERANCE_MS;
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

/// What a receiver verifies with, from the Python arguments: `secrets`
/// (X-Signature) and `standard_secrets` (`whsec_`), either may be None.
struct Check<'a, 'py> {
    secrets: Option<&'a Bound<'py, PyAny>>,
    standard_secrets: Option<&'a Bound<'py, PyAny>>,
    allow_first_event_signature: bool,
    now: Option<&'a Bound<'py, PyAny>>,
    tolerance_ms: u64,
}

impl Check<'_, '_> {
    fn run(&self, body: &Bound<'_, PyAny>, headers: &Bound<'_, PyAny>) -> PyResult<core::Received> {
        let body = raw_body(body)?;
        let pairs = header_pairs(headers)?;
        // pyo3 gives None for Python's None.
        let segment = self.secrets.map(secrets_of).transpose()?;
        let standard = self.standard_secrets.map(standard_secrets).transpose()?;
        let keys = core::Keys {
            segment: segment.as_deref().unwrap_or_default(),
            standard: standard.as_deref().unwrap_or_default(),
        };
        let now = now_of(self.now)?;
        let options = core::ReceiveOptions {
            allow_first_event_signature: self.allow_first_event_signature,
            tolerance_ms: self.tolerance_ms,
        };
        core::receive_any(
            &body,
            pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            keys,
            now,
            options,
        )
        .map_err(err)
    }
}

/// Verifies a received webhook and returns its parsed body: a dict for one
/// call, a list for a batch. Raises `SignatureError` (`missing_signature`,
/// `malformed_signature`, `signature_mismatch`, `first_event_signature`,
/// `timestamp_too_old`, `timestamp_too_new`) or `JSONValueError` (a
/// verified body that is not JSON).
#[pyfunction]
#[pyo3(signature = (
    body, headers, secrets=None, *, standard_secrets=None, allow_first_event_signature=false,
    now=None, tolerance_ms=DEFAULT_TOLERANCE_MS,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn receive<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    secrets: Option<&Bound<'py, PyAny>>,
    standard_secrets: Option<&Bound<'py, PyAny>>,
    allow_first_event_signature: bool,
    now: Option<&Bound<'py, PyAny>>,
    tolerance_ms: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let check = Check {
        secrets,
        standard_secrets,
        allow_first_event_signature,
        now,
        tolerance_ms,
    };
    value_to_py(py, &check.run(body, headers)?.value)
}

/// [`receive`] with what the framework helpers need besides the body:
/// `(value, header, coverage, message_ids)`, the ids in call order (None
/// for a call without one).
#[pyfunction]
#[pyo3(signature = (
    body, headers, secrets=None, *, standard_secrets=None, allow_first_event_signature=false,
    now=None, tolerance_ms=DEFAULT_TOLERANCE_MS,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn receive_webhook<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    secrets: Option<&Bound<'py, PyAny>>,
    standard_secrets: Option<&Bound<'py, PyAny>>,
    allow_first_event_signature: bool,
    now: Option<&Bound<'py, PyAny>>,
    tolerance_ms: u64,
) -> PyResult<Bound<'py, PyTuple>> {
    let check = Check {
        secrets,
        standard_secrets,
        allow_first_event_signature,
        now,
        tolerance_ms,
    };
    let received = check.run(body, headers)?;
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
