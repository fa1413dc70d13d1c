//! JSON text in `JSON.stringify` form.

use crate::error::js_err;
use callpost_core as core;
use wasm_bindgen::prelude::*;

/// Re-writes JSON text as `JSON.stringify` would, applying the core's rules
/// (integers JS would change, depth, lone surrogates).
#[wasm_bindgen]
pub fn canonicalize(text: &str) -> Result<String, JsValue> {
    core::Value::from_json_str(text)
        .and_then(|v| v.to_json_string())
        .map_err(js_err)
}
