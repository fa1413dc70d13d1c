//! One call's webhook delivery, sans I/O (the core's `Delivery`).

use crate::call::to_call;
use crate::error::err;
use crate::timestamp::{millis, now_of};
use crate::webhooks::{Batch, Request, Webhooks};
use callpost_core as core;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A host's report of an HTTP attempt as the core's outcome: a `status`
/// (with the raw `Retry-After` header), or an `error` kind.
pub(crate) fn outcome_of(
    status: Option<u16>,
    retry_after: Option<String>,
    error: Option<&str>,
    message: &str,
) -> PyResult<core::Outcome> {
    core::Outcome::from_report(status, retry_after, error, message).map_err(err)
}

/// Values the core hands out as JSON (outcomes, logs) reach Python through
/// `json.loads`, so their shape is the core's.
pub(crate) fn from_core_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// Eight bytes of OS randomness as a jitter seed: the core has none, and
/// deliveries or clients that share a seed retry at the same instants.
pub(crate) fn os_seed() -> PyResult<u64> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
    Ok(u64::from_le_bytes(b))
}

/// The core's delivery settings from the Python keywords; the jitter is
/// seeded from OS randomness unless `seed` is given.
fn config_of(
    timeout_ms: Option<u64>,
    retry_window_ms: Option<u64>,
    backoff_base_ms: Option<u64>,
    backoff_cap_ms: Option<u64>,
    seed: Option<u64>,
) -> PyResult<core::DeliveryConfig> {
    let mut config = core::DeliveryConfig::new(match seed {
        Some(s) => s,
        None => os_seed()?,
    });
    if let Some(v) = timeout_ms {
        config.timeout_ms = v;
    }
    if let Some(v) = retry_window_ms {
        config.retry_window_ms = v;
    }
    if let Some(v) = backoff_base_ms {
        config.backoff.base_ms = v;
    }
    if let Some(v) = backoff_cap_ms {
        config.backoff.cap_ms = v;
    }
    Ok(config)
}

/// One request to send for a `Delivery`.
#[pyclass(frozen, module = "callpost._callpost")]
pub(crate) struct Attempt {
    #[pyo3(get)]
    endpoint: usize,
    #[pyo3(get)]
    attempt: u32,
    #[pyo3(get)]
    request: Py<Request>,
    #[pyo3(get)]
    deadline_ms: i64,
}

/// One call's webhook delivery, sans I/O.
#[pyclass(module = "callpost._callpost")]
pub struct Delivery {
    inner: core::Delivery,
}

#[pymethods]
impl Delivery {
    #[new]
    #[pyo3(signature = (webhooks, call, now=None, *, timeout_ms=None, retry_window_ms=None,
                        backoff_base_ms=None, backoff_cap_ms=None, seed=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn new(
        webhooks: &Webhooks,
        call: &Bound<'_, PyAny>,
        now: Option<&Bound<'_, PyAny>>,
        timeout_ms: Option<u64>,
        retry_window_ms: Option<u64>,
        backoff_base_ms: Option<u64>,
        backoff_cap_ms: Option<u64>,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let config = config_of(
            timeout_ms,
            retry_window_ms,
            backoff_base_ms,
            backoff_cap_ms,
            seed,
        )?;
        let inner = core::Delivery::new(&webhooks.inner, &to_call(call)?, now_of(now)?, config)
            .map_err(err)?;
        Ok(Self { inner })
    }

    /// The delivery of `batch` (from `Webhooks.pack`): one POST of its
    /// body under its id, decided by one answer.
    #[staticmethod]
    #[pyo3(signature = (webhooks, batch, now=None, *, timeout_ms=None, retry_window_ms=None,
                        backoff_base_ms=None, backoff_cap_ms=None, seed=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn for_batch(
        webhooks: &Webhooks,
        batch: &Batch,
        now: Option<&Bound<'_, PyAny>>,
        timeout_ms: Option<u64>,
        retry_window_ms: Option<u64>,
        backoff_base_ms: Option<u64>,
        backoff_cap_ms: Option<u64>,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let config = config_of(
            timeout_ms,
            retry_window_ms,
            backoff_base_ms,
            backoff_cap_ms,
            seed,
        )?;
        let inner = core::Delivery::for_batch(&webhooks.inner, &batch.inner, now_of(now)?, config)
            .map_err(err)?;
        Ok(Self { inner })
    }

    /// A request to send at `now_ms`, or None; call until None.
    fn poll_request(&mut self, py: Python<'_>, now_ms: i64) -> PyResult<Option<Attempt>> {
        let Some(a) = self.inner.poll_request(millis(now_ms)?) else {
            return Ok(None);
        };
        Ok(Some(Attempt {
            endpoint: a.endpoint,
            attempt: a.attempt,
            request: Py::new(py, Request { inner: a.request })?,
            deadline_ms: a.deadline.as_millis(),
        }))
    }

    /// Reports attempt `attempt`'s outcome: a `status` (with the raw
    /// `retry_after` header), or `error` = 'timeout' | 'connection' | 'tls'.
    #[pyo3(signature = (now_ms, attempt, status=None, retry_after=None, error=None, message=""))]
    fn handle_response(
        &mut self,
        now_ms: i64,
        attempt: u32,
        status: Option<u16>,
        retry_after: Option<String>,
        error: Option<&str>,
        message: &str,
    ) -> PyResult<()> {
        let outcome = outcome_of(status, retry_after, error, message)?;
        self.inner
            .handle_response(millis(now_ms)?, attempt, outcome);
        Ok(())
    }

    fn handle_timeout(&mut self, now_ms: i64) -> PyResult<()> {
        self.inner.handle_timeout(millis(now_ms)?);
        Ok(())
    }

    fn poll_timeout(&self) -> Option<i64> {
        self.inner.poll_timeout().map(core::Timestamp::as_millis)
    }

    /// The final outcome as a dict, once.
    fn poll_outcome<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .poll_outcome()
            .map(|o| from_core_json(py, &o.to_json(core::KeyCase::Snake)))
            .transpose()
    }

    #[getter]
    fn outcome<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .outcome()
            .map(|o| from_core_json(py, &o.to_json(core::KeyCase::Snake)))
            .transpose()
    }

    /// What a host raises when the delivery gave up, or None.
    #[getter]
    fn error_message(&self) -> Option<String> {
        self.inner
            .outcome()
            .and_then(core::DeliveryOutcome::error_message)
    }

    #[getter]
    fn log<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_core_json(py, &self.inner.log_json(core::KeyCase::Snake))
    }

    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.body())
    }

    #[getter]
    fn message_id(&self) -> Option<&str> {
        self.inner.message_id()
    }

    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode().as_str()
    }

    #[getter]
    fn done(&self) -> bool {
        self.inner.is_done()
    }

    /// The whole state as JSON, to store and resume with `from_json`.
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// Restores a state saved with `to_json`, for the same settings.
    #[staticmethod]
    fn from_json(text: &str, webhooks: &Webhooks) -> PyResult<Self> {
        let inner = core::Delivery::from_json(text, &webhooks.inner).map_err(err)?;
        Ok(Self { inner })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}
