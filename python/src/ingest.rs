//! The relay's Tracking API side (the core's `ingest`): requests split into
//! calls, checked and enriched, and the address rule for destinations.

use crate::call::to_call;
use crate::error::err;
use crate::timestamp::now_of;
use callpost_core as core;
use callpost_core::ingest::{self, IngestError, Route};
use pyo3::prelude::*;

/// Runs `f` with a source of sixteen OS-random bytes for each `messageId`
/// the core fills in; an OS without randomness is an `OSError`, never
/// repeated ids.
fn with_ids<T>(f: impl FnOnce(&mut dyn FnMut() -> [u8; 16]) -> T) -> PyResult<T> {
    let mut failure = None;
    let mut ids = || {
        let mut b = [0u8; 16];
        if let Err(e) = getrandom::fill(&mut b) {
            failure = Some(e);
        }
        b
    };
    let out = f(&mut ids);
    match failure {
        Some(e) => Err(pyo3::exceptions::PyOSError::new_err(e.to_string())),
        None => Ok(out),
    }
}

/// A call accepted and enriched: what the relay stores.
#[pyclass(frozen, module = "callpost._callpost")]
pub(crate) struct Accepted {
    #[pyo3(get)]
    index: usize,
    #[pyo3(get)]
    kind: &'static str,
    #[pyo3(get)]
    message_id: String,
    #[pyo3(get)]
    message: String,
    #[pyo3(get)]
    webhooks_enabled: bool,
}

#[pymethods]
impl Accepted {
    // Customer data: the repr shows the id only.
    fn __repr__(&self) -> String {
        format!(
            "Accepted(index={}, kind={:?}, message_id={:?})",
            self.index, self.kind, self.message_id
        )
    }
}

impl From<ingest::Accepted> for Accepted {
    fn from(a: ingest::Accepted) -> Self {
        Self {
            index: a.index,
            kind: a.call.kind.as_str(),
            webhooks_enabled: a.webhooks_enabled(),
            message_id: a.message_id,
            message: a.message,
        }
    }
}

/// A call refused on its own; its batch's other calls were kept.
#[pyclass(frozen, module = "callpost._callpost")]
pub(crate) struct Rejected {
    #[pyo3(get)]
    index: usize,
    #[pyo3(get)]
    code: &'static str,
    #[pyo3(get)]
    reason: String,
    #[pyo3(get)]
    text: String,
}

#[pymethods]
impl Rejected {
    fn __repr__(&self) -> String {
        format!("Rejected(index={}, code={:?})", self.index, self.code)
    }
}

/// A request split into its calls.
#[pyclass(frozen, module = "callpost._callpost")]
pub(crate) struct Parsed {
    #[pyo3(get)]
    source: Py<PyAny>,
    #[pyo3(get)]
    accepted: Vec<Py<Accepted>>,
    #[pyo3(get)]
    rejected: Vec<Py<Rejected>>,
}

/// The refusals the relay decides itself, as the `IngestError` to answer
/// with (not raised): `overloaded` (storage behind), `unavailable`
/// (storage failed, or shutting down), `batch_too_large` (a body read past
/// `MAX_REQUEST_BYTES`).
#[pyfunction]
pub(crate) fn ingest_refusal(kind: &str) -> PyResult<PyErr> {
    let e = match kind {
        "overloaded" => IngestError::Overloaded,
        "unavailable" => IngestError::Unavailable,
        "batch_too_large" => IngestError::BatchTooLarge(ingest::MAX_REQUEST_BYTES + 1),
        _ => return Err(crate::error::misuse(format!("no ingest refusal {kind:?}"))),
    };
    Ok(ingest_err(&e))
}

/// An ingest error as `IngestError` (or the call's class, for a single-call
/// route), with the HTTP status the relay answers with.
fn ingest_err(e: &IngestError) -> PyErr {
    let py_err = err(e.clone());
    Python::attach(|py| {
        let value = py_err.value(py);
        let _ = value.setattr("status", e.status());
        let _ = value.setattr("retry_after", e.retry_after());
    });
    py_err
}

/// Checks `Content-Type`, `Content-Encoding` and `Content-Length` before
/// the body is read. Returns whether the body is gzipped.
#[pyfunction]
#[pyo3(signature = (content_type, content_encoding, content_length))]
pub(crate) fn check_headers(
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    content_length: Option<usize>,
) -> PyResult<bool> {
    ingest::check_headers(content_type, content_encoding, content_length)
        .map_err(|e| ingest_err(&e))
}

/// Parses a Tracking API request: `path`, the (decompressed) `body`, the
/// time it was received, and its `Authorization` header, for one of the
/// sources in `write_keys` (write key → source). The write key is the
/// Basic auth user, else the body's `writeKey`.
#[pyfunction]
#[pyo3(signature = (path, body, write_keys, received_at=None, authorization=None))]
pub(crate) fn parse_request(
    py: Python<'_>,
    path: &str,
    body: &[u8],
    write_keys: &Bound<'_, pyo3::types::PyDict>,
    received_at: Option<&Bound<'_, PyAny>>,
    authorization: Option<&str>,
) -> PyResult<Parsed> {
    let route = Route::from_path(path).ok_or_else(|| ingest_err(&IngestError::UnknownRoute))?;
    let now = now_of(received_at)?;
    let parsed = py
        .detach(|| with_ids(|ids| ingest::parse_request(route, body, now, ids)))?
        .map_err(|e| ingest_err(&e))?;
    let mut lookup_error = None;
    let source = ingest::authenticate(authorization, parsed.body_write_key.as_deref(), |key| {
        write_keys.get_item(key).unwrap_or_else(|e| {
            lookup_error = Some(e);
            None
        })
    });
    if let Some(e) = lookup_error {
        return Err(e);
    }
    let source = source.map_err(|e| ingest_err(&e))?.unbind();
    let mut accepted = Vec::with_capacity(parsed.calls.len());
    let mut rejected = Vec::new();
    for c in parsed.calls {
        match c {
            Ok(a) => accepted.push(Py::new(py, Accepted::from(a))?),
            Err(r) => rejected.push(Py::new(
                py,
                Rejected {
                    index: r.index,
                    code: r.error.code().as_str(),
                    reason: r.error.to_string(),
                    text: r.text,
                },
            )?),
        }
    }
    Ok(Parsed {
        source,
        accepted,
        rejected,
    })
}

/// Inflates a gzip request body, refusing it (`IngestError`, status 413)
/// as soon as it passes `MAX_REQUEST_BYTES`.
#[pyfunction]
pub(crate) fn inflate<'py>(
    py: Python<'py>,
    body: &[u8],
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let out = py
        .detach(|| ingest::inflate(body))
        .map_err(|e| ingest_err(&e))?;
    Ok(pyo3::types::PyBytes::new(py, &out))
}

/// The write key of a request: the Basic auth user, else `body_key`.
#[pyfunction]
#[pyo3(signature = (authorization, body_key=None))]
pub(crate) fn write_key(authorization: Option<&str>, body_key: Option<&str>) -> Option<String> {
    ingest::write_key(authorization, body_key)
}

/// A call the relay makes itself (delete notification, audience identify),
/// enriched as a received one: `messageId` filled in, `receivedAt` set.
#[pyfunction]
#[pyo3(signature = (call, now=None))]
pub(crate) fn originate(
    call: &Bound<'_, PyAny>,
    now: Option<&Bound<'_, PyAny>>,
) -> PyResult<Accepted> {
    let call = to_call(call)?;
    let now = now_of(now)?;
    Ok(with_ids(|ids| ingest::originate(call, now, ids))?
        .map_err(err)?
        .into())
}

/// Whether a destination may be reached at `address` (an IPv4 or IPv6
/// address) when private networks are not allowed.
#[pyfunction]
pub(crate) fn is_public_address(address: &str) -> PyResult<bool> {
    let ip: std::net::IpAddr = address
        .parse()
        .map_err(|_| crate::error::misuse(format!("{address:?} is not an IP address")))?;
    Ok(core::webhooks::is_public_address(ip))
}
