//! The Webhooks destination's settings and signed requests.

use crate::call::to_call;
use crate::delivery::from_core_json;
use crate::error::{err, misuse};
use crate::json::to_value;
use crate::signature::bytes_of;
use crate::timestamp::now_of;
use callpost_core as core;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// An HTTP request to send. `repr` shows header names only.
#[pyclass(frozen, module = "callpost._callpost")]
pub struct Request {
    pub inner: core::Request,
}

#[pymethods]
impl Request {
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method
    }
    #[getter]
    fn url(&self) -> &str {
        &self.inner.url
    }
    #[getter]
    fn headers(&self) -> Vec<(&str, &str)> {
        self.inner
            .headers
            .iter()
            .map(|(n, v)| (&**n, &**v))
            .collect()
    }
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.body)
    }
    /// The first header named `name` (case-insensitive), or None.
    fn header(&self, name: &str) -> Option<String> {
        self.inner.header(name).map(str::to_owned)
    }
    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

fn endpoints_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<core::EndpointConfig>> {
    if obj.cast::<PyString>().is_ok() {
        return Err(misuse(
            "endpoints must be a list of urls or {'url', 'headers'} dicts, not a str",
        ));
    }
    let items = obj
        .try_iter()
        .map_err(|_| misuse("endpoints must be a list of urls or {'url', 'headers'} dicts"))?;
    let mut out = Vec::new();
    for item in items {
        let v = to_value(&item?)?;
        out.push(core::EndpointConfig::from_value(&v).map_err(err)?);
    }
    Ok(out)
}

/// A Webhooks destination's settings: 1–5 endpoints, an optional secret,
/// and the mode (`parallel` or `failover`).
#[pyclass(frozen, module = "callpost._callpost")]
pub struct Webhooks {
    pub inner: core::Webhooks,
}

#[pymethods]
impl Webhooks {
    #[new]
    #[pyo3(signature = (
        endpoints, shared_secret=None, *, mode=None, signature=None, signing_secrets=None,
        filters=None, batch_max_calls=None, batch_max_bytes=None, batch=false, mapping=None,
        method=None,
    ))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn new(
        endpoints: &Bound<'_, PyAny>,
        shared_secret: Option<&Bound<'_, PyAny>>,
        mode: Option<&str>,
        signature: Option<&str>,
        signing_secrets: Option<Vec<String>>,
        filters: Option<&Bound<'_, PyAny>>,
        batch_max_calls: Option<usize>,
        batch_max_bytes: Option<usize>,
        batch: bool,
        mapping: Option<&Bound<'_, PyAny>>,
        method: Option<&str>,
    ) -> PyResult<Self> {
        let secret = shared_secret
            .map(|s| bytes_of(s, "shared_secret"))
            .transpose()?;
        let mode = match mode {
            None => core::Mode::default(),
            Some(m) => core::Mode::parse(m)
                .ok_or_else(|| err(core::SettingsError::InvalidField("mode")))?,
        };
        let inner = core::Webhooks::with_mode(&endpoints_of(endpoints)?, secret.as_deref(), mode)
            .map_err(err)?;
        let signing = match signature {
            None => core::webhooks::Signing::default(),
            Some(v) => core::webhooks::Signing::parse(v)
                .ok_or_else(|| err(core::SettingsError::InvalidField("signature")))?,
        };
        let secrets: Vec<&str> = signing_secrets
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        let inner = inner.with_signing(signing, &secrets).map_err(err)?;
        let inner = match filters {
            None => inner,
            Some(f) => {
                let rules = core::filter::Filters::from_value(&to_value(f)?)
                    .map_err(|e| err(core::SettingsError::from(e)))?;
                inner.with_filters(rules)
            }
        };
        let mapping = mapping
            .map(|m| {
                core::mapping::Mapping::from_value(&to_value(m)?)
                    .map_err(|e| err(core::SettingsError::from(e)))
            })
            .transpose()?;
        let inner = inner.with_mapping(mapping);
        let inner = match method {
            None => inner,
            Some(m) => inner.with_method(
                core::webhooks::Method::parse(m)
                    .ok_or_else(|| err(core::SettingsError::InvalidField("method")))?,
            ),
        };
        let batching = (batch || batch_max_calls.is_some() || batch_max_bytes.is_some())
            .then(|| core::webhooks::Batching::new(batch_max_calls, batch_max_bytes))
            .transpose()
            .map_err(err)?;
        Ok(Self {
            inner: inner.with_batching(batching).map_err(err)?,
        })
    }

    /// Groups `calls` into batches (the destination's batching, or the
    /// default limits): the batches, and the calls that go in none as
    /// `(index, outcome)`.
    #[pyo3(signature = (calls, now=None))]
    fn pack<'py>(
        &self,
        py: Python<'py>,
        calls: &Bound<'py, PyAny>,
        now: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Vec<Batch>, Skipped<'py>)> {
        let calls = calls
            .try_iter()?
            .map(|c| to_call(&c?))
            .collect::<PyResult<Vec<_>>>()?;
        let packed = self.inner.pack(&calls, now_of(now)?).map_err(err)?;
        let skipped = packed
            .skipped
            .into_iter()
            .map(|(i, why)| {
                let outcome = core::DeliveryOutcome::from(why);
                Ok((
                    i,
                    from_core_json(py, &outcome.to_json(core::KeyCase::Snake))?,
                ))
            })
            .collect::<PyResult<_>>()?;
        let batches = packed
            .batches
            .into_iter()
            .map(|inner| Batch { inner })
            .collect();
        Ok((batches, skipped))
    }

    /// The signed request delivering `call` to endpoint `endpoint`.
    #[pyo3(signature = (call, endpoint=0, now=None))]
    fn request(
        &self,
        call: &Bound<'_, PyAny>,
        endpoint: usize,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Request> {
        let inner = self
            .inner
            .request(&to_call(call)?, endpoint, now_of(now)?)
            .map_err(err)?;
        Ok(Request { inner })
    }

    /// Whether `call`'s integrations let it reach this destination.
    fn is_enabled_for(&self, call: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.is_enabled_for(&to_call(call)?))
    }

    /// Raises SettingsError (`invalid_auth`) when an endpoint needs a
    /// client certificate, which this package's `deliver` does not present
    /// (callpost-relay does).
    fn check_sent_as_built(&self) -> PyResult<()> {
        self.inner.check_sent_as_built().map_err(err)
    }

    /// The token source of endpoint `endpoint`'s OAuth 2.0 grant, or None
    /// when its auth is not oauth2.
    #[pyo3(signature = (endpoint, *, seed=None))]
    fn token_source(
        &self,
        endpoint: usize,
        seed: Option<u64>,
    ) -> PyResult<Option<crate::oauth::TokenSource>> {
        let ep = self
            .inner
            .endpoints()
            .get(endpoint)
            .ok_or_else(|| err(core::ApiMisuse::EndpointOutOfRange(endpoint)))?;
        crate::oauth::TokenSource::of(ep, seed)
    }

    /// Normalised endpoint URLs, in the order given.
    #[getter]
    fn urls(&self) -> Vec<String> {
        self.inner
            .endpoints()
            .iter()
            .map(|e| e.url().to_owned())
            .collect()
    }

    /// Whether requests carry `X-Signature`.
    #[getter]
    fn signed(&self) -> bool {
        self.inner.is_signed()
    }

    /// `"parallel"` or `"failover"`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode().as_str()
    }

    /// `"POST"`, `"PUT"` or `"PATCH"`.
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method().as_str()
    }

    /// `"segment"`, `"standard"` or `"both"`.
    #[getter]
    fn signature(&self) -> &'static str {
        self.inner.signing().as_str()
    }

    fn __repr__(&self) -> String {
        format!(
            "Webhooks(urls={:?}, signed={}, mode={:?})",
            self.urls(),
            self.inner.is_signed(),
            self.mode()
        )
    }
}

/// The calls `Webhooks.pack` put in no batch: `(index, outcome)`.
type Skipped<'py> = Vec<(usize, Bound<'py, PyAny>)>;

/// Several calls in one POST, from `Webhooks.pack`: deliver it with
/// `Delivery.for_batch`.
#[pyclass(frozen, module = "callpost._callpost")]
pub struct Batch {
    pub inner: core::webhooks::Batch,
}

#[pymethods]
impl Batch {
    /// The batch's id (`Idempotency-Key`, `webhook-id`).
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// The JSON array of the calls' bodies.
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.body)
    }

    /// The indexes of the calls it carries, into the list packed.
    #[getter]
    fn members(&self) -> Vec<usize> {
        self.inner.members.clone()
    }

    fn __repr__(&self) -> String {
        // Not the body: it is customer data.
        format!(
            "Batch(id={:?}, members={}, bytes={})",
            self.inner.id,
            self.inner.members.len(),
            self.inner.body.len()
        )
    }
}

/// The delete notifications for `user_id` (webhooks-destination.md,
/// Events): one delete call per source whose `integrations` settings leave
/// Webhooks on, as `(source_id, message JSON text)`, in the order given.
#[pyfunction]
#[pyo3(signature = (user_id, sources, now=None))]
pub(crate) fn delete_notifications(
    user_id: &str,
    sources: Vec<(String, Option<Bound<'_, PyAny>>)>,
    now: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(String, String)>> {
    let sources = sources
        .into_iter()
        .map(|(source_id, integrations)| {
            let integrations = match integrations.filter(|v| !v.is_none()) {
                None => None,
                Some(v) => match to_value(&v)? {
                    core::Value::Object(m) => Some(m),
                    _ => return Err(misuse("integrations must be a dict or None")),
                },
            };
            Ok(core::DeleteSource {
                source_id,
                integrations,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let calls = core::delete_notifications(user_id, &sources, now_of(now)?).map_err(err)?;
    calls
        .into_iter()
        .map(|(source, call)| {
            let mut out = Vec::new();
            call.write_message(&mut out).map_err(err)?;
            let text = String::from_utf8(out).map_err(|_| err(core::JsonError::InvalidUnicode))?;
            Ok((source, text))
        })
        .collect()
}
