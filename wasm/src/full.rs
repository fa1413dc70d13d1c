//! The bindings behind the default `full` feature: calls, webhooks,
//! delivery and batching (see the crate doc).

use crate::{js_err, scratch_parts, secrets_of, usage_err, SCRATCH};
use callpost_core as core;
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

fn set(o: &Object, k: &str, v: impl Into<JsValue>) {
    let _ = Reflect::set(o, &k.into(), &v.into());
}

fn request_object(r: core::Request) -> JsValue {
    let o = Object::new();
    set(&o, "method", r.method);
    set(&o, "url", r.url);
    let headers = Array::new();
    for (k, v) in r.headers {
        headers.push(&Array::of2(&k.into(), &v.into()));
    }
    set(&o, "headers", headers);
    // Bodies are UTF-8 JSON written by the core, so this cannot fail; a
    // string body is what fetch encodes back to the same bytes.
    set(&o, "body", String::from_utf8(r.body).unwrap_or_default());
    o.into()
}

/// A call from its JSON text, as a `string` or as UTF-8 bytes. The JS API
/// passes bytes: wasm-bindgen copies a string into wasm memory one UTF-16
/// unit at a time in JS (48 µs for a 32 KB call), while `TextEncoder`
/// writes the UTF-8 natively and the bytes cross with one copy.
///
/// A number is the length of the call's UTF-8 bytes that the JS API wrote
/// at the start of the scratch buffer (see `scratch`), which spares the
/// copy into a fresh allocation.
fn call_of(v: &JsValue) -> Result<core::Call, JsValue> {
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
            core::Call::from_json_slice(scratch_parts(s, len, 0)?.0).map_err(js_err)
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

/// A value from JSON text the core wrote (outcomes, logs): the core owns
/// their shape, so no second mapping lives here.
fn from_core_json(text: &str) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(text)
}

/// Reads the optional fields of a JS options object. Type conversion only:
/// the defaults and limits are the core's.
struct Options(Option<Object>);

impl Options {
    fn of(v: &JsValue) -> Result<Self, JsValue> {
        if v.is_undefined() || v.is_null() {
            return Ok(Self(None));
        }
        v.dyn_ref::<Object>()
            .map(|o| Self(Some(o.clone())))
            .ok_or_else(|| usage_err("invalid_argument", "options must be an object"))
    }

    fn get(&self, key: &str) -> Option<JsValue> {
        let v = Reflect::get(self.0.as_ref()?, &key.into()).ok()?;
        (!v.is_undefined() && !v.is_null()).then_some(v)
    }

    fn string(&self, key: &str) -> Result<Option<String>, JsValue> {
        self.get(key)
            .map(|v| {
                v.as_string().ok_or_else(|| {
                    usage_err("invalid_argument", &format!("{key} must be a string"))
                })
            })
            .transpose()
    }

    /// A count or a duration in ms: a whole number from 0 to 2^53.
    fn uint(&self, key: &str) -> Result<Option<u64>, JsValue> {
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

    fn usize(&self, key: &str) -> Result<Option<usize>, JsValue> {
        Ok(self
            .uint(key)?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
    }
}

fn millis(now: f64) -> i64 {
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

/// ISO 8601 (with an offset) to milliseconds since the epoch.
#[wasm_bindgen(js_name = parseTimestamp)]
pub fn parse_timestamp(text: &str) -> Result<f64, JsValue> {
    Ok(core::Timestamp::parse(text).map_err(js_err)?.as_millis() as f64)
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

    /// The signed request for a call (JSON text) to endpoint `endpoint`.
    pub fn request(
        &self,
        call_json: &JsValue,
        endpoint: usize,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        Ok(request_object(
            self.signed_request(call_json, endpoint, now_ms)?,
        ))
    }

    /// [`Webhooks::request`] as `[url, headers, body]`, the headers packed
    /// as `name\nvalue\n…` (header names and values never hold a newline:
    /// the core refuses CR and LF in them). The JS `Webhooks.request` uses
    /// this: three strings cross the boundary instead of a dozen values.
    #[wasm_bindgen(js_name = requestParts)]
    pub fn request_parts(
        &self,
        call_json: &JsValue,
        endpoint: usize,
        now_ms: f64,
    ) -> Result<Array, JsValue> {
        let r = self.signed_request(call_json, endpoint, now_ms)?;
        let mut packed = String::with_capacity(160);
        for (i, (k, v)) in r.headers.iter().enumerate() {
            if i > 0 {
                packed.push('\n');
            }
            packed.push_str(k);
            packed.push('\n');
            packed.push_str(v);
        }
        let body = String::from_utf8(r.body).unwrap_or_default();
        Ok(Array::of3(&r.url.into(), &packed.into(), &body.into()))
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

fn outcome_of(
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
    pub fn poll_request(&mut self, now_ms: f64, webhooks: &Webhooks) -> JsValue {
        let now = millis(now_ms);
        let polled = webhooks.with_hmac(|h| self.inner.poll_request_with(now, &webhooks.inner, h));
        let Some(a) = polled else {
            return JsValue::UNDEFINED;
        };
        let o = Object::new();
        set(&o, "endpoint", a.endpoint as f64);
        set(&o, "attempt", a.attempt);
        set(&o, "request", request_object(a.request));
        set(&o, "deadlineMs", a.deadline as f64);
        o.into()
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

/// The batching client's state machine (see the core's `Batcher`).
#[wasm_bindgen(js_name = BatcherCore)]
pub struct Batcher {
    inner: core::Batcher,
}

#[wasm_bindgen(js_class = BatcherCore)]
impl Batcher {
    /// From an options object (`writeKey`, `endpoint`, `flushAt`, ...).
    #[wasm_bindgen(constructor)]
    pub fn new(options_obj: JsValue, now_ms: f64) -> Result<Batcher, JsValue> {
        let o = Options::of(&options_obj)?;
        let write_key = o
            .string("writeKey")?
            .ok_or_else(|| usage_err("invalid_argument", "writeKey is required"))?;
        let d = core::BatcherConfig::new(write_key);
        let config = core::BatcherConfig {
            endpoint: o.string("endpoint")?.unwrap_or(d.endpoint.clone()),
            flush_at: o.usize("flushAt")?.unwrap_or(d.flush_at),
            flush_after_ms: o.uint("flushAfterMs")?.unwrap_or(d.flush_after_ms),
            max_queue: o.usize("maxQueue")?.unwrap_or(d.max_queue),
            max_attempts: o
                .uint("maxAttempts")?
                .map_or(d.max_attempts, |n| u32::try_from(n).unwrap_or(u32::MAX)),
            max_retry_ms: o.uint("maxRetryMs")?.unwrap_or(d.max_retry_ms),
            request_timeout_ms: o.uint("requestTimeoutMs")?.unwrap_or(d.request_timeout_ms),
            max_in_flight: o.usize("maxInFlight")?.unwrap_or(d.max_in_flight),
            backoff: core::retry::Backoff {
                base_ms: o.uint("backoffBaseMs")?.unwrap_or(d.backoff.base_ms),
                cap_ms: o.uint("backoffCapMs")?.unwrap_or(d.backoff.cap_ms),
            },
            library_name: o.string("libraryName")?.unwrap_or(d.library_name.clone()),
            library_version: o
                .string("libraryVersion")?
                .unwrap_or(d.library_version.clone()),
            jitter_seed: o.uint("seed")?.unwrap_or(0),
            ..d
        };
        Ok(Batcher {
            inner: core::Batcher::new(config, millis(now_ms)).map_err(js_err)?,
        })
    }

    /// Queues a call (JSON text); `random` is 16 bytes for its messageId.
    #[wasm_bindgen(js_name = handleCall)]
    pub fn handle_call(
        &mut self,
        now_ms: f64,
        call_json: &JsValue,
        random: &[u8],
    ) -> Result<String, JsValue> {
        let random: [u8; 16] = random
            .try_into()
            .map_err(|_| usage_err("invalid_argument", "random must be exactly 16 bytes"))?;
        let call = call_of(call_json)?;
        self.inner
            .handle_call(millis(now_ms), call, random)
            .map_err(js_err)
    }

    /// Makes everything due now.
    pub fn flush(&mut self, now_ms: f64) {
        self.inner.flush(millis(now_ms));
    }

    /// Reports whatever is left as failed; refuses later calls.
    pub fn shutdown(&mut self) {
        self.inner.shutdown();
    }

    /// `{batchId, attempt, messageCount, request, deadlineMs}`, or undefined.
    #[wasm_bindgen(js_name = pollRequest)]
    pub fn poll_request(&mut self, now_ms: f64) -> JsValue {
        let Some(b) = self.inner.poll_request(millis(now_ms)) else {
            return JsValue::UNDEFINED;
        };
        let o = Object::new();
        set(&o, "batchId", b.batch_id as f64);
        set(&o, "attempt", b.attempt);
        set(&o, "messageCount", b.message_count as f64);
        set(&o, "request", request_object(b.request));
        set(&o, "deadlineMs", b.deadline as f64);
        o.into()
    }

    /// Reports an upload's status (with the raw Retry-After) or error kind.
    #[wasm_bindgen(js_name = handleResponse)]
    pub fn handle_response(
        &mut self,
        now_ms: f64,
        batch_id: f64,
        status: Option<u16>,
        retry_after: Option<String>,
        error: Option<String>,
        message: Option<String>,
    ) -> Result<(), JsValue> {
        let outcome = outcome_of(status, retry_after, error, message.unwrap_or_default())?;
        self.inner
            .handle_response(millis(now_ms), batch_id as u64, outcome);
        Ok(())
    }

    /// Call when `now` reaches `pollTimeout()`.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) {
        self.inner.handle_timeout(millis(now_ms));
    }

    /// When to wake next (ms), or undefined.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|t| t as f64)
    }

    /// The next event: `{kind: "delivered" | "retrying" | "failed", ...}`.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self) -> JsValue {
        let Some(ev) = self.inner.poll_event() else {
            return JsValue::UNDEFINED;
        };
        let o = Object::new();
        match ev {
            core::BatcherEvent::Delivered {
                batch_id,
                message_ids,
            } => {
                set(&o, "kind", "delivered");
                set(&o, "batchId", batch_id as f64);
                set(
                    &o,
                    "messageIds",
                    message_ids
                        .into_iter()
                        .map(JsValue::from)
                        .collect::<Array>(),
                );
            }
            core::BatcherEvent::Retrying {
                batch_id,
                attempt,
                retry_at,
                outcome,
            } => {
                set(&o, "kind", "retrying");
                set(&o, "batchId", batch_id as f64);
                set(&o, "attempt", attempt);
                set(&o, "retryAtMs", retry_at as f64);
                set(&o, "reason", outcome.to_string());
            }
            core::BatcherEvent::Failed {
                batch_id,
                messages,
                reason,
            } => {
                set(&o, "kind", "failed");
                set(
                    &o,
                    "batchId",
                    batch_id.map_or(JsValue::NULL, |b| (b as f64).into()),
                );
                set(&o, "code", reason.code());
                set(&o, "reason", reason.to_string());
                let list = Array::new();
                for m in messages {
                    let item = Object::new();
                    set(&item, "messageId", m.message_id);
                    set(&item, "json", m.json);
                    list.push(&item);
                }
                set(&o, "messages", list);
            }
            _ => set(&o, "kind", "unknown"),
        }
        o.into()
    }

    /// Messages queued and not yet in a batch.
    #[wasm_bindgen(getter)]
    pub fn queued(&self) -> usize {
        self.inner.queued()
    }

    /// Messages in batches uploading or waiting to retry.
    #[wasm_bindgen(getter, js_name = inBatches)]
    pub fn in_batches(&self) -> usize {
        self.inner.in_batches()
    }

    /// True when nothing is queued, uploading or waiting.
    #[wasm_bindgen(getter)]
    pub fn idle(&self) -> bool {
        self.inner.is_idle()
    }
}

/// Limits, for the JS layer's docs and checks.
#[wasm_bindgen(js_name = maxMessageBytes)]
pub fn max_message_bytes() -> usize {
    core::batcher::MAX_MESSAGE_BYTES
}
