//! `callpost._callpost`: thin pyo3 bindings over `callpost-core`. Each
//! function converts its arguments, calls the core once and converts the
//! result; the rules, limits and defaults are the core's. The files mirror
//! the core's modules. The I/O loops are Python (`callpost/_io.py`).

// The exports are `pub` items in private modules: `#[wasm_bindgen]` and
// `#[pyclass]`/`#[pyfunction]` export them by their own means, not through
// Rust visibility.
#![allow(unreachable_pub)]

mod audience;
mod batcher;
mod call;
mod delivery;
mod error;
mod json;
mod oauth;
mod receive;
mod signature;
mod standard;
mod timestamp;
mod webhooks;

use callpost_core as core;
use pyo3::prelude::*;
use pyo3::types::PyDict;

#[pymodule]
fn _callpost(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Windows has no fork, and no `register_at_fork`.
    let os = py.import("os")?;
    if os.hasattr("register_at_fork")? {
        let hook = PyDict::new(py);
        hook.set_item(
            "after_in_child",
            wrap_pyfunction!(batcher::after_fork_in_child, m)?,
        )?;
        os.call_method("register_at_fork", (), Some(&hook))?;
    }
    m.add_function(wrap_pyfunction!(json::stringify, m)?)?;
    m.add_function(wrap_pyfunction!(signature::sign, m)?)?;
    m.add_function(wrap_pyfunction!(signature::verify, m)?)?;
    m.add_function(wrap_pyfunction!(signature::verify_request, m)?)?;
    m.add_function(wrap_pyfunction!(signature::verify_parsed, m)?)?;
    m.add_function(wrap_pyfunction!(standard::sign_standard, m)?)?;
    m.add_function(wrap_pyfunction!(standard::verify_standard, m)?)?;
    m.add_function(wrap_pyfunction!(receive::receive, m)?)?;
    m.add_function(wrap_pyfunction!(receive::receive_webhook, m)?)?;
    m.add_function(wrap_pyfunction!(receive::refusal_status, m)?)?;
    m.add_function(wrap_pyfunction!(audience::trait_name, m)?)?;
    m.add_function(wrap_pyfunction!(timestamp::parse_timestamp, m)?)?;
    m.add_class::<webhooks::Request>()?;
    m.add_class::<webhooks::Webhooks>()?;
    m.add_class::<oauth::TokenSource>()?;
    m.add_class::<webhooks::Batch>()?;
    m.add_class::<delivery::Attempt>()?;
    m.add_class::<delivery::Delivery>()?;
    m.add_class::<batcher::BatchRequest>()?;
    m.add_class::<batcher::Message>()?;
    m.add_function(wrap_pyfunction!(webhooks::delete_notifications, m)?)?;
    m.add_class::<audience::AudienceSync>()?;
    m.add_class::<batcher::Batcher>()?;
    m.add("__version__", core::VERSION)?;
    m.add("USER_AGENT", core::webhooks::USER_AGENT)?;
    m.add("DEFAULT_ENDPOINT", core::batcher::DEFAULT_ENDPOINT)?;
    m.add("SIGNATURE_HEADER", core::SIGNATURE_HEADER)?;
    m.add("SEGMENT_SIGNATURE_HEADER", core::SEGMENT_SIGNATURE_HEADER)?;
    m.add(
        "STANDARD_TOLERANCE_MS",
        core::standard::DEFAULT_TOLERANCE_MS,
    )?;
    m.add("MAX_MESSAGE_BYTES", core::batcher::MAX_MESSAGE_BYTES)?;
    m.add("MAX_BATCH_BYTES", core::batcher::MAX_BATCH_BYTES)?;
    m.add("SUCCESS_BODY", core::ingest::SUCCESS_BODY)?;
    let defaults = PyDict::new(py);
    for (name, value) in core::DEFAULTS {
        defaults.set_item(name, value)?;
    }
    m.add("DEFAULTS", defaults)?;
    let segment = PyDict::new(py);
    for (name, value) in core::segment::PYTHON_DEFAULTS {
        segment.set_item(name, value)?;
    }
    m.add("SEGMENT_DEFAULTS", segment)?;
    m.add("CALL_FIELDS", core::CALL_FIELDS.to_vec())?;
    m.add("ERROR_CODES", error::registry(py)?)?;
    Ok(())
}
