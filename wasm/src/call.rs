//! Calls from JS: their JSON text, as a string or as UTF-8 bytes.

use crate::error::{js_err, misuse};
use callpost_core as core;
use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;

/// A call from its JSON text. The JS layer passes bytes: wasm-bindgen
/// copies a string into wasm memory one UTF-16 unit at a time in JS (48 µs
/// for a 32 KB call), while `TextEncoder` writes the UTF-8 natively and the
/// bytes cross with one copy.
pub(crate) fn call_of(v: &JsValue) -> Result<core::Call, JsValue> {
    if let Some(a) = v.dyn_ref::<Uint8Array>() {
        return core::Call::from_json_slice(&a.to_vec()).map_err(js_err);
    }
    match v.as_string() {
        Some(s) => core::Call::from_json_str(&s).map_err(js_err),
        None => Err(misuse("call must be JSON text (a string or UTF-8 bytes)")),
    }
}
