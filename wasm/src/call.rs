//! Calls from JS: their JSON text, as a string or as UTF-8 bytes, and the
//! ids that JSON text cannot carry.

use crate::error::{js_err, misuse};
use callpost_core as core;
use js_sys::{BigInt, Uint8Array};
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

/// The core's id fields (`ID_FIELDS`), whose numbers and bigints the JS
/// layer hands to [`id_string`] before it writes a call as JSON text.
#[wasm_bindgen(js_name = idFields)]
pub fn id_fields() -> Vec<String> {
    core::ID_FIELDS.iter().map(|f| (*f).to_owned()).collect()
}

/// The string id field `key` holds for a JS `number` or `bigint`: the
/// core's id rule (`callpost_core::id_string`). JSON text cannot carry
/// either faithfully: a `bigint` has no JSON form, and `JSON.stringify`
/// writes the nearest double's digits for an unsafe integer.
#[wasm_bindgen(js_name = idString)]
pub fn id_string(key: &str, value: &JsValue) -> Result<String, JsValue> {
    let field = core::ID_FIELDS
        .iter()
        .copied()
        .find(|f| *f == key)
        .ok_or_else(|| misuse("not an id field"))?;
    let digits: String;
    let scalar = if let Some(b) = value.dyn_ref::<BigInt>() {
        digits = b
            .to_string(10)
            .map_err(|_| misuse("bigint has no decimal form"))?
            .into();
        core::Scalar::Integer(&digits)
    } else if let Some(n) = value.as_f64() {
        core::Scalar::Float(n)
    } else {
        return Err(misuse("an id given to idString must be a number or bigint"));
    };
    match core::id_string(field, scalar) {
        Ok(id) => Ok(id.unwrap_or_default()),
        Err(e) => Err(js_err(e)),
    }
}
