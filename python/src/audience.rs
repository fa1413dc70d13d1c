//! Audience membership as identify calls (the core's `audience`).

use crate::error::err;
use crate::timestamp::now_of;
use callpost_core as core;
use pyo3::prelude::*;

/// The snake_case trait name for an audience.
#[pyfunction]
pub(crate) fn trait_name(audience: &str) -> PyResult<String> {
    core::audience::trait_name(audience).map_err(err)
}

/// Membership sync for one audience, sans I/O: give it the full member
/// list at each sync, then drain `poll_call()` for the identify calls of
/// the changes. `to_json()` / `from_json()` keep it between syncs.
#[pyclass(module = "callpost._callpost")]
pub struct AudienceSync {
    inner: core::AudienceSync,
}

#[pymethods]
impl AudienceSync {
    #[new]
    fn new(audience: &str) -> PyResult<Self> {
        Ok(Self {
            inner: core::AudienceSync::new(audience).map_err(err)?,
        })
    }

    /// Restores a state saved with `to_json()`.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        Ok(Self {
            inner: core::AudienceSync::from_json(text).map_err(err)?,
        })
    }

    /// The state, as JSON text.
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// The trait this audience sets.
    #[getter]
    fn trait_name(&self) -> &str {
        self.inner.trait_name()
    }

    /// Records the audience's current members as of `now` (ms or an aware
    /// datetime; `None`: the clock).
    #[pyo3(signature = (members, now=None))]
    fn handle_sync(
        &mut self,
        members: Vec<String>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let now = now_of(now)?;
        self.inner.handle_sync(now, members);
        Ok(())
    }

    /// The next identify call, as its Segment message JSON text, or `None`.
    fn poll_call(&mut self) -> PyResult<Option<String>> {
        let Some(call) = self.inner.poll_call() else {
            return Ok(None);
        };
        let mut out = Vec::new();
        call.write_message(&mut out).map_err(err)?;
        String::from_utf8(out)
            .map(Some)
            .map_err(|_| err(core::JsonError::InvalidUnicode))
    }

    fn __repr__(&self) -> String {
        format!("AudienceSync(trait_name={:?})", self.inner.trait_name())
    }
}
