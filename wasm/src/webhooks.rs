//! Webhook requests, deliveries and audiences (the `webhooks` feature; see
//! the crate doc).

use crate::calls::{call_of, millis, outcome_of, request_object, set, Options};
use crate::signing::secrets_of;
use crate::{fit_scratch, js_err, SCRATCH};
use callpost_core as core;
use js_sys::{Object, Uint8Array};
use wasm_bindgen::prelude::*;

/// A value from JSON text the core wrote (outcomes, logs): the core owns
/// their shape, so no second mapping lives here.
fn from_core_json(text: &str) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(text)
}

/// Verifies a parsed body given as its JSON text (re-stringified canonically).
#[wasm_bindgen(js_name = verifyJson)]
pub fn verify_json(text: &str, signature: &str, secrets: &JsValue) -> Result<bool, JsValue> {
    let value = core::Value::from_json_str(text).map_err(js_err)?;
    core::verify_value(&value, signature, &secrets_of(secrets)?).map_err(js_err)
}

/// The snake_case trait name for an audience.
#[wasm_bindgen(js_name = traitName)]
pub fn trait_name(audience: &str) -> Result<String, JsValue> {
    core::audience::trait_name(audience).map_err(js_err)
}

/// Webhooks destination settings.
#[wasm_bindgen(js_name = WebhooksCore)]
pub struct Webhooks {
    inner: core::Webhooks,
    native_hmac: Option<NativeHmac>,
}

/// The platform's HMAC-SHA1 (Node's `createHmac`, set by the JS API), used
/// for bodies of `from` bytes and more: OpenSSL with SHA extensions signs
/// a 32 KB body in 19 µs, SHA-1 in wasm in 34 µs.
struct NativeHmac {
    hmac: js_sys::Function,
    from: usize,
}

impl Webhooks {
    /// Runs `f` with the host HMAC, when one is set: it signs bodies of
    /// `from` bytes and more, and leaves smaller ones (and any answer that
    /// is not 40 lowercase hex digits) to the core.
    fn with_hmac<T>(&self, f: impl FnOnce(Option<core::HostHmac<'_>>) -> T) -> T {
        let Some(native) = &self.native_hmac else {
            return f(None);
        };
        let mut sign = |body: &[u8]| -> Option<String> {
            if body.len() < native.from {
                return None;
            }
            let hex = native
                .hmac
                .call1(&JsValue::NULL, &Uint8Array::from(body))
                .ok()?
                .as_string()?;
            (hex.len() == 40 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                .then_some(hex)
        };
        f(Some(&mut sign))
    }

    /// The core's request for a call (JSON text or bytes), signed.
    fn signed_request(
        &self,
        call_json: &JsValue,
        endpoint: usize,
        now_ms: f64,
    ) -> Result<core::Request, JsValue> {
        let call = call_of(call_json)?;
        let now = core::Timestamp::from_millis(millis(now_ms)).map_err(js_err)?;
        self.with_hmac(|h| self.inner.request_with(&call, endpoint, now, h))
            .map_err(js_err)
    }
}

#[wasm_bindgen(js_class = WebhooksCore)]
impl Webhooks {
    /// From `{"endpoints": [...], "sharedSecret": "..."}` as JSON text.
    #[wasm_bindgen(constructor)]
    pub fn new(settings_json: &str) -> Result<Webhooks, JsValue> {
        let v = core::Value::from_json_str(settings_json).map_err(js_err)?;
        Ok(Webhooks {
            inner: core::Webhooks::from_value(&v).map_err(js_err)?,
            native_hmac: None,
        })
    }

    /// Signs bodies of `from_bytes` and more with `hmac(bytes) -> hex`, the
    /// platform's HMAC-SHA1 under the same shared secret.
    #[wasm_bindgen(js_name = setNativeHmac)]
    pub fn set_native_hmac(&mut self, hmac: js_sys::Function, from_bytes: usize) {
        self.native_hmac = Some(NativeHmac {
            hmac,
            from: from_bytes,
        });
    }

    /// The signed request for a call (JSON text) to endpoint `endpoint`,
    /// written into the scratch buffer (see `scratch`), returning its length
    /// in bytes: the header count, the URL, each header's name and value,
    /// one per line, then the body (URLs, header names and values never
    /// hold a newline: the core refuses CR and LF in them, and a URL has
    /// none after parsing). The JS `Webhooks.request` decodes it from
    /// there: one UTF-8 decode for the whole request, where returning a
    /// `String` (or a dozen values) cost a UTF-8 check of the body, a copy
    /// and a malloc/free in wasm as well.
    #[wasm_bindgen(js_name = requestScratch)]
    pub fn request_scratch(
        &self,
        call_json: &JsValue,
        endpoint: usize,
        now_ms: f64,
    ) -> Result<usize, JsValue> {
        let r = self.signed_request(call_json, endpoint, now_ms)?;
        let count = r.headers.len().to_string();
        let len = count.len()
            + 1
            + r.url.len()
            + r.headers
                .iter()
                .map(|(k, v)| 2 + k.len() + v.len())
                .sum::<usize>()
            + 1
            + r.body.len();
        SCRATCH.with_borrow_mut(|s| {
            // Fitted for the whole request before writing, so JS's
            // `scratch(len)` for the address keeps these bytes (it would
            // swap a buffer of over 1 MB, left by a large call, for a fresh
            // one if the request is small). Written over the buffer's bytes
            // rather than after a `clear()`, as `fit_scratch` never shrinks.
            fit_scratch(s, len);
            let mut at = 0;
            let mut put = |b: &[u8]| {
                let end = at + b.len();
                match s.get_mut(at..end) {
                    Some(dst) => dst.copy_from_slice(b),
                    // Only if `len` undercounted; still no panic.
                    None => {
                        s.truncate(at);
                        s.extend_from_slice(b);
                    }
                }
                at = end;
            };
            put(count.as_bytes());
            put(b"\n");
            put(r.url.as_bytes());
            for (k, v) in &r.headers {
                put(b"\n");
                put(k.as_bytes());
                put(b"\n");
                put(v.as_bytes());
            }
            put(b"\n");
            put(&r.body);
            Ok(at)
        })
    }

    /// Whether the call's integrations let it reach Webhooks.
    #[wasm_bindgen(js_name = isEnabledFor)]
    pub fn is_enabled_for(&self, call_json: &JsValue) -> Result<bool, JsValue> {
        Ok(self.inner.is_enabled_for(&call_of(call_json)?))
    }

    /// Normalised endpoint URLs.
    #[wasm_bindgen(getter)]
    pub fn urls(&self) -> Vec<String> {
        self.inner
            .endpoints()
            .iter()
            .map(|e| e.url().to_owned())
            .collect()
    }
}

/// One call's delivery (see the core's `Delivery`).
#[wasm_bindgen(js_name = DeliveryCore)]
pub struct Delivery {
    inner: core::Delivery,
}

#[wasm_bindgen(js_class = DeliveryCore)]
impl Delivery {
    /// Starts a delivery of a call (JSON text), first attempt due at `now_ms`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        webhooks: &Webhooks,
        call_json: &JsValue,
        now_ms: f64,
        options_obj: &JsValue,
    ) -> Result<Delivery, JsValue> {
        let o = Options::of(options_obj)?;
        let d = core::DeliveryConfig::default();
        let config = core::DeliveryConfig {
            timeout_ms: o.uint("timeoutMs")?.unwrap_or(d.timeout_ms),
            retry_window_ms: o.uint("retryWindowMs")?.unwrap_or(d.retry_window_ms),
            backoff: core::retry::Backoff {
                base_ms: o.uint("backoffBaseMs")?.unwrap_or(d.backoff.base_ms),
                cap_ms: o.uint("backoffCapMs")?.unwrap_or(d.backoff.cap_ms),
            },
            jitter_seed: o.uint("seed")?.unwrap_or(0),
        };
        let call = call_of(call_json)?;
        Ok(Delivery {
            inner: core::Delivery::new(&webhooks.inner, &call, millis(now_ms), config)
                .map_err(js_err)?,
        })
    }

    /// `{endpoint, attempt, request, deadlineMs}` to send now, or undefined.
    #[wasm_bindgen(js_name = pollRequest)]
    pub fn poll_request(&mut self, now_ms: f64, webhooks: &Webhooks) -> Result<JsValue, JsValue> {
        let now = millis(now_ms);
        let polled = webhooks.with_hmac(|h| self.inner.poll_request_with(now, &webhooks.inner, h));
        let Some(a) = polled else {
            return Ok(JsValue::UNDEFINED);
        };
        let o = Object::new();
        set(&o, "endpoint", a.endpoint as f64);
        set(&o, "attempt", a.attempt);
        set(&o, "request", request_object(a.request)?);
        set(&o, "deadlineMs", a.deadline as f64);
        Ok(o.into())
    }

    /// Reports a status (with the raw Retry-After) or an error kind.
    #[wasm_bindgen(js_name = handleResponse)]
    pub fn handle_response(
        &mut self,
        now_ms: f64,
        status: Option<u16>,
        retry_after: Option<String>,
        error: Option<String>,
        message: Option<String>,
    ) -> Result<(), JsValue> {
        self.inner.handle_response(
            millis(now_ms),
            outcome_of(status, retry_after, error, message.unwrap_or_default())?,
        );
        Ok(())
    }

    /// Call when `now` reaches `pollTimeout()`.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) {
        self.inner.handle_timeout(millis(now_ms));
    }

    /// When to wake next (ms), or undefined when done.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|t| t as f64)
    }

    /// The final outcome, once.
    #[wasm_bindgen(js_name = pollOutcome)]
    pub fn poll_outcome(&mut self) -> Result<JsValue, JsValue> {
        match self.inner.poll_outcome() {
            Some(o) => from_core_json(&o.to_json()),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// The attempts so far.
    #[wasm_bindgen(getter)]
    pub fn log(&self) -> Result<JsValue, JsValue> {
        from_core_json(&self.inner.log_json())
    }

    /// The body every attempt sends.
    #[wasm_bindgen(getter)]
    pub fn body(&self) -> String {
        String::from_utf8_lossy(self.inner.body()).into_owned()
    }

    /// The whole state as JSON, to store and resume.
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// Restores a state saved with `toJSON`.
    #[wasm_bindgen(js_name = fromJSON)]
    pub fn from_json(text: &str) -> Result<Delivery, JsValue> {
        let inner = core::Delivery::from_json(text).map_err(js_err)?;
        Ok(Delivery { inner })
    }
}
