//! Receiving a webhook (the `signing` feature): `receive`, over
//! `core::receive`. The JS layer parses the verified body with
//! `JSON.parse`; the core has already checked it is JSON.

use crate::error::{error_value, misuse};
use crate::signature::{bytes_of, secrets_of};
use crate::standard::{at, standard_secrets_of, tolerance};
use callpost_core as core;
use js_sys::Array;
use wasm_bindgen::prelude::*;

/// Verifies a webhook: `names` and `values` are the request's header names
/// and values, one per line (neither can hold a newline); `secrets` the
/// `X-Signature` ones and `standard_secrets` the `whsec_` ones (either may
/// be null), as `core::receive_any` takes them. Returns
/// `[header, coverage, ids]`, `ids` holding each call's id or null.
#[wasm_bindgen]
#[allow(clippy::too_many_arguments)]
pub fn receive(
    body: &JsValue,
    names: &str,
    values: &str,
    secrets: &JsValue,
    standard_secrets: &JsValue,
    now_ms: f64,
    tolerance_ms: f64,
    allow_first_event_signature: bool,
) -> Result<Array, JsValue> {
    let body = bytes_of(body, "body")?;
    let headers = header_lines(names, values)?;
    let options = core::ReceiveOptions {
        allow_first_event_signature,
        tolerance_ms: tolerance(tolerance_ms)?,
    };
    let segment = if secrets.is_undefined() || secrets.is_null() {
        Vec::new()
    } else {
        secrets_of(secrets)?
    };
    let standard = standard_secrets_of(standard_secrets)?;
    let keys = core::Keys {
        segment: &segment,
        standard: &standard,
    };
    let received = core::receive_any(&body, headers, keys, at(now_ms)?, options)
        .map_err(|e| error_value(e.code(), &e.to_string()))?;
    let ids: Array = received
        .message_ids()
        .into_iter()
        .map(|id| id.map_or(JsValue::NULL, JsValue::from))
        .collect();
    Ok(Array::of3(
        &received.header.into(),
        &received.coverage.as_str().into(),
        &ids,
    ))
}

/// A request's headers from the JS layer's two lists, one entry per line
/// (neither a name nor a value can hold a newline).
pub(crate) fn header_lines<'a>(
    names: &'a str,
    values: &'a str,
) -> Result<Vec<(&'a str, &'a str)>, JsValue> {
    let names: Vec<&str> = names.split('\n').collect();
    let values: Vec<&str> = values.split('\n').collect();
    if names.len() != values.len() {
        return Err(misuse("header names and values differ in number"));
    }
    Ok(names.into_iter().zip(values).collect())
}

/// The HTTP status a receiver answers a refused webhook with, by code.
#[wasm_bindgen(js_name = refusalStatus)]
pub fn refusal_status(code: &str) -> Result<u16, JsValue> {
    let code = core::Code::parse(code).ok_or_else(|| misuse("unknown error code"))?;
    Ok(core::receive::refusal_status(code))
}

/// How many ids the default duplicate filter remembers.
#[wasm_bindgen(js_name = seenCapacity)]
pub fn seen_capacity() -> usize {
    core::receive::DEFAULT_SEEN_CAPACITY
}
