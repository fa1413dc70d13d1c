//! Times: `number`s of milliseconds, and ISO 8601 text.

use crate::error::js_err;
use callpost_core as core;
use wasm_bindgen::prelude::*;

/// A time from JS milliseconds (`Date.now()`): whole milliseconds in years
/// 0000-9999, else `invalid_timestamp`.
pub(crate) fn millis(ms: f64) -> Result<core::Timestamp, JsValue> {
    core::Timestamp::from_millis_f64(ms).map_err(js_err)
}

/// ISO 8601 (with an offset) to milliseconds since the epoch.
#[wasm_bindgen(js_name = parseTimestamp)]
pub fn parse_timestamp(text: &str) -> Result<f64, JsValue> {
    Ok(core::Timestamp::parse(text).map_err(js_err)?.as_millis() as f64)
}
