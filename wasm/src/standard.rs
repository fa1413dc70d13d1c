//! Standard Webhooks signatures (the `signing` feature): `signStandard`,
//! `verifyStandard`, over `core::standard`. The JS layer reads the clock
//! and shapes the headers.

use crate::error::{error_value, misuse};
use crate::receive::header_lines;
use crate::signature::bytes_of;
use callpost_core as core;
use core::standard::{StandardError, StandardSecret};
use js_sys::Array;
use wasm_bindgen::prelude::*;

fn std_err(e: StandardError) -> JsValue {
    error_value(e.code(), &e.to_string())
}

/// A time from JS milliseconds (`Date.now()`), or `invalid_argument`.
/// Not the client's `millis`: its message shows the number as JavaScript
/// prints it, and the number writer that takes would stay in the
/// verify-only module for this one error.
pub(crate) fn at(ms: f64) -> Result<core::Timestamp, JsValue> {
    let whole = ms as i64;
    (whole as f64 == ms)
        .then(|| core::Timestamp::from_millis(whole).ok())
        .flatten()
        .ok_or_else(|| {
            misuse("now must be a Date or whole milliseconds since the epoch, in years 0000-9999")
        })
}

/// One `whsec_` secret (a string) or an array of them; `undefined` and
/// `null` are none.
pub(crate) fn standard_secrets_of(secrets: &JsValue) -> Result<Vec<StandardSecret>, JsValue> {
    if secrets.is_undefined() || secrets.is_null() {
        return Ok(Vec::new());
    }
    let texts: Vec<String> = if Array::is_array(secrets) {
        Array::from(secrets)
            .iter()
            .map(|s| s.as_string())
            .collect::<Option<_>>()
    } else {
        secrets.as_string().map(|s| vec![s])
    }
    .ok_or_else(|| misuse("standardSecrets must be a whsec_ string or an array of them"))?;
    texts
        .iter()
        .map(|t| StandardSecret::parse(t).map_err(std_err))
        .collect()
}

/// `[webhook-id, webhook-timestamp, webhook-signature]` for `body` sent at
/// `now_ms`, one signature per secret.
#[wasm_bindgen(js_name = signStandard)]
pub fn sign_standard(
    msg_id: &str,
    body: &JsValue,
    secrets: &JsValue,
    now_ms: f64,
) -> Result<Array, JsValue> {
    let body = bytes_of(body, "body")?;
    let secrets = standard_secrets_of(secrets)?;
    let [(_, id), (_, ts), (_, sig)] =
        core::standard::sign(msg_id, at(now_ms)?, &body, &secrets).map_err(std_err)?;
    Ok(Array::of3(&id.into(), &ts.into(), &sig.into()))
}

/// Verifies a request's Standard Webhooks headers (`names` and `values`,
/// one per line) against its raw `body` at `now_ms`. Returns
/// `[id, timestamp]`.
#[wasm_bindgen(js_name = verifyStandard)]
pub fn verify_standard(
    body: &JsValue,
    names: &str,
    values: &str,
    secrets: &JsValue,
    now_ms: f64,
    tolerance_ms: f64,
) -> Result<Array, JsValue> {
    let body = bytes_of(body, "body")?;
    let verified = core::standard::verify(
        &body,
        header_lines(names, values)?,
        &standard_secrets_of(secrets)?,
        at(now_ms)?,
        tolerance(tolerance_ms)?,
    )
    .map_err(std_err)?;
    Ok(Array::of2(
        &verified.id.into(),
        &(verified.timestamp as f64).into(),
    ))
}

/// A tolerance in milliseconds: a whole number, not negative.
pub(crate) fn tolerance(ms: f64) -> Result<u64, JsValue> {
    if ms.is_finite() && ms >= 0.0 && ms.fract() == 0.0 {
        Ok(ms as u64)
    } else {
        Err(misuse(
            "toleranceMs must be a whole number of milliseconds, not negative",
        ))
    }
}

/// The default tolerance, in milliseconds.
#[wasm_bindgen(js_name = standardToleranceMs)]
pub fn standard_tolerance_ms() -> f64 {
    core::standard::DEFAULT_TOLERANCE_MS as f64
}
