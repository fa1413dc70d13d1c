//! Shared by the `client` and `webhooks` features: calls from JS, requests
//! and outcomes to JS, options, and the small utility exports.

use crate::{js_err, scratch_parts, usage_err, SCRATCH};
use callpost_core as core;
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

pub(crate) fn set(o: &Object, k: &str, v: impl Into<JsValue>) {
    let _ = Reflect::set(o, &k.into(), &v.into());
}

/// The body as a JS string. Bodies are UTF-8 JSON the core wrote, so this
/// cannot fail today; if it ever did, the caller gets an error instead of an
/// empty body that would go out signed over other bytes.
pub(crate) fn body_string(body: Vec<u8>) -> Result<String, JsValue> {
    String::from_utf8(body).map_err(|_| js_err(core::JsonError::InvalidUnicode))
}

pub(crate) fn request_object(r: core::Request) -> Result<JsValue, JsValue> {
    let o = Object::new();
    set(&o, "method", r.method);
    set(&o, "url", r.url);
    let headers = Array::new();
    for (k, v) in r.headers {
        headers.push(&Array::of2(&JsValue::from(&*k), &JsValue::from(&*v)));
    }
    set(&o, "headers", headers);
    // A string body is what fetch encodes back to the same bytes.
    set(&o, "body", body_string(r.body)?);
    Ok(o.into())
}

/// A call from its JSON text, as a `string` or as UTF-8 bytes. The JS API
/// passes bytes: wasm-bindgen copies a string into wasm memory one UTF-16
/// unit at a time in JS (48 µs for a 32 KB call), while `TextEncoder`
/// writes the UTF-8 natively and the bytes cross with one copy.
///
/// A number is the length of the call's UTF-8 bytes that the JS API wrote
/// at the start of the scratch buffer (see `scratch`), which spares the
/// copy into a fresh allocation.
pub(crate) fn call_of(v: &JsValue) -> Result<core::Call, JsValue> {
    if let Some(n) = v.as_f64() {
        // `as` saturates: a negative or fractional count is caught below.
        let len = n as usize;
        if len as f64 != n {
            return Err(usage_err(
                "invalid_argument",
                "call length must be a whole number",
            ));
        }
        return SCRATCH.with_borrow(|s| {
            core::Call::from_json_slice(scratch_parts(s, 0, 0, len)?.0).map_err(js_err)
        });
    }
    if let Some(a) = v.dyn_ref::<Uint8Array>() {
        return core::Call::from_json_slice(&a.to_vec()).map_err(js_err);
    }
    match v.as_string() {
        Some(s) => core::Call::from_json_str(&s).map_err(js_err),
        None => Err(usage_err(
            "invalid_argument",
            "call must be JSON text (a string or UTF-8 bytes)",
        )),
    }
}

/// Reads the optional fields of a JS options object. Type conversion only:
/// the defaults and limits are the core's.
pub(crate) struct Options(Option<Object>);

impl Options {
    pub(crate) fn of(v: &JsValue) -> Result<Self, JsValue> {
        if v.is_undefined() || v.is_null() {
            return Ok(Self(None));
        }
        v.dyn_ref::<Object>()
            .map(|o| Self(Some(o.clone())))
            .ok_or_else(|| usage_err("invalid_argument", "options must be an object"))
    }

    pub(crate) fn get(&self, key: &str) -> Option<JsValue> {
        let v = Reflect::get(self.0.as_ref()?, &key.into()).ok()?;
        (!v.is_undefined() && !v.is_null()).then_some(v)
    }

    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, JsValue> {
        self.get(key)
            .map(|v| {
                v.as_string().ok_or_else(|| {
                    usage_err("invalid_argument", &format!("{key} must be a string"))
                })
            })
            .transpose()
    }

    /// A count or a duration in ms: a whole number from 0 to 2^53.
    pub(crate) fn uint(&self, key: &str) -> Result<Option<u64>, JsValue> {
        self.get(key)
            .map(|v| match v.as_f64() {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_992.0 => {
                    Ok(n as u64)
                }
                _ => Err(usage_err(
                    "invalid_argument",
                    &format!("{key} must be a whole number from 0 to 2^53"),
                )),
            })
            .transpose()
    }

    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn usize(&self, key: &str) -> Result<Option<usize>, JsValue> {
        Ok(self
            .uint(key)?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
    }
}

pub(crate) fn millis(now: f64) -> i64 {
    now as i64
}

/// Re-writes JSON text as `JSON.stringify` would, applying the core's rules
/// (integers JS would change, depth, lone surrogates).
#[wasm_bindgen]
pub fn canonicalize(text: &str) -> Result<String, JsValue> {
    core::Value::from_json_str(text)
        .and_then(|v| v.to_json_string())
        .map_err(js_err)
}

/// ISO 8601 (with an offset) to milliseconds since the epoch.
#[wasm_bindgen(js_name = parseTimestamp)]
pub fn parse_timestamp(text: &str) -> Result<f64, JsValue> {
    Ok(core::Timestamp::parse(text).map_err(js_err)?.as_millis() as f64)
}

pub(crate) fn outcome_of(
    status: Option<u16>,
    retry_after: Option<String>,
    error: Option<String>,
    message: String,
) -> Result<core::Outcome, JsValue> {
    core::Outcome::from_report(status, retry_after, error.as_deref(), &message).ok_or_else(|| {
        usage_err(
            "invalid_argument",
            "give a status, or error 'timeout' | 'connection' | 'tls'",
        )
    })
}

/// Limits, for the JS layer's docs and checks.
#[wasm_bindgen(js_name = maxMessageBytes)]
pub fn max_message_bytes() -> usize {
    core::batcher::MAX_MESSAGE_BYTES
}
