//! Core errors as the Python exceptions of `callpost/_errors.py`.
//!
//! The class for each code is the core registry's
//! ([`callpost_core::Code::class`]); this module only looks the class up by
//! name, so no table of codes or classes lives in the binding.

use callpost_core::{ApiMisuse, Error, ErrorClass};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception class the registry names for `class`, from
/// `callpost._errors`.
fn class_object<'py>(py: Python<'py>, class: ErrorClass) -> PyResult<Bound<'py, PyAny>> {
    ERRORS
        .get_or_try_init(py, || py.import("callpost._errors").map(Bound::unbind))?
        .bind(py)
        .getattr(class.name())
}

/// Any core error as its exception, carrying the core's stable `code`.
pub(crate) fn to_py_err(e: &Error) -> PyErr {
    Python::attach(|py| {
        let code = e.code();
        match class_object(py, code.class())
            .and_then(|cls| cls.call1((code.as_str(), e.to_string())))
        {
            Ok(exc) => PyErr::from_value(exc),
            Err(lookup) => lookup,
        }
    })
}

/// Shorthand: any core error into a `PyErr`.
pub(crate) fn err<E: Into<Error>>(e: E) -> PyErr {
    to_py_err(&e.into())
}

/// An [`ApiMisuse::Argument`]: the API was called with an argument of the
/// wrong type or shape (`InvalidArgumentError`, code `invalid_argument`).
pub(crate) fn misuse(message: impl Into<String>) -> PyErr {
    err(ApiMisuse::Argument(message.into()))
}

/// The registry, for `callpost.ERROR_CODES`: code → (class name, base).
pub(crate) fn registry(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for code in callpost_core::Code::ALL {
        let class = code.class();
        d.set_item(code.as_str(), (class.name(), class.base()))?;
    }
    Ok(d)
}
