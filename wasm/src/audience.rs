//! Audience membership as identify calls.

use crate::error::js_err;
use wasm_bindgen::prelude::*;

/// The snake_case trait name for an audience.
#[wasm_bindgen(js_name = traitName)]
pub fn trait_name(audience: &str) -> Result<String, JsValue> {
    callpost_core::audience::trait_name(audience).map_err(js_err)
}
