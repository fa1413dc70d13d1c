//! Audience membership as identify calls.

use crate::error::err;
use pyo3::prelude::*;

/// The snake_case trait name for an audience.
#[pyfunction]
pub(crate) fn trait_name(audience: &str) -> PyResult<String> {
    callpost_core::audience::trait_name(audience).map_err(err)
}
