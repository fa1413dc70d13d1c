//! The batching client's state machine (the `client` feature; see the
//! crate doc).

use crate::call::call_of;
use crate::error::{js_err, misuse};
use crate::timestamp::millis;
use crate::util::{outcome_of, request_object, set, Options};
use callpost_core as core;
use js_sys::Object;
use wasm_bindgen::prelude::*;

/// A message `BatcherCore.prepare` made, until it is handed to
/// `handleMessage`.
#[wasm_bindgen]
pub struct MessageCore {
    inner: core::Message,
}

#[wasm_bindgen]
impl MessageCore {
    /// Its `messageId`.
    #[wasm_bindgen(getter, js_name = messageId)]
    pub fn message_id(&self) -> String {
        self.inner.message_id().to_owned()
    }

    /// The message as it will be sent (JSON text).
    #[wasm_bindgen(getter)]
    pub fn json(&self) -> String {
        self.inner.json().to_owned()
    }
}

fn random16(random: &[u8]) -> Result<[u8; 16], JsValue> {
    random
        .try_into()
        .map_err(|_| js_err(core::ApiMisuse::RandomLength(16)))
}

/// @segment/analytics-node's defaults (the core's `segment::NODE_DEFAULTS`)
/// as camelCase JSON text, for `callpost/segment`.
#[wasm_bindgen(js_name = segmentDefaults)]
pub fn segment_defaults() -> String {
    crate::defaults_json(core::segment::NODE_DEFAULTS)
}

/// The batching client's state machine (see the core's `Batcher`).
#[wasm_bindgen(js_name = BatcherCore)]
pub struct Batcher {
    inner: core::Batcher,
}

#[wasm_bindgen(js_class = BatcherCore)]
impl Batcher {
    /// From an options object: `writeKey`, and `seed` (required: the JS
    /// layer draws it from `crypto.getRandomValues`); `endpoint`,
    /// `flushAt`, `flushAfterMs`, `maxQueue`, `maxAttempts`, `maxRetryMs`,
    /// `requestTimeoutMs`, `maxInFlight`, `backoffBaseMs`, `backoffCapMs`,
    /// `libraryName`, `libraryVersion`, `batchPath` in place of the core's
    /// defaults.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue, now_ms: f64) -> Result<Self, JsValue> {
        let o = Options::of(&options)?;
        let write_key = o
            .string("writeKey")?
            .ok_or_else(|| misuse("writeKey is required"))?;
        let mut c = core::BatcherConfig::new(write_key);
        c.jitter_seed = o.uint("seed")?.ok_or_else(|| misuse("seed is required"))?;
        o.set_string("endpoint", &mut c.endpoint)?;
        o.set_string("batchPath", &mut c.batch_path)?;
        o.set_uint("flushAt", &mut c.flush_at)?;
        o.set_uint("flushAfterMs", &mut c.flush_after_ms)?;
        o.set_uint("maxQueue", &mut c.max_queue)?;
        o.set_uint("maxAttempts", &mut c.max_attempts)?;
        o.set_uint("maxRetryMs", &mut c.max_retry_ms)?;
        o.set_uint("requestTimeoutMs", &mut c.request_timeout_ms)?;
        o.set_uint("maxInFlight", &mut c.max_in_flight)?;
        o.set_uint("backoffBaseMs", &mut c.backoff.base_ms)?;
        o.set_uint("backoffCapMs", &mut c.backoff.cap_ms)?;
        o.set_string("libraryName", &mut c.library_name)?;
        o.set_string("libraryVersion", &mut c.library_version)?;
        Ok(Self {
            inner: core::Batcher::new(c, millis(now_ms)?).map_err(js_err)?,
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
        let random = random16(random)?;
        let call = call_of(call_json)?;
        self.inner
            .handle_call(millis(now_ms)?, call, random)
            .map_err(js_err)
    }

    /// The message `handleCall` would queue, checked and completed but not
    /// queued (the core's `Batcher::prepare`).
    pub fn prepare(
        &mut self,
        now_ms: f64,
        call_json: &JsValue,
        random: &[u8],
    ) -> Result<MessageCore, JsValue> {
        let random = random16(random)?;
        let call = call_of(call_json)?;
        let inner = self
            .inner
            .prepare(millis(now_ms)?, call, random)
            .map_err(js_err)?;
        Ok(MessageCore { inner })
    }

    /// Queues a message from `prepare`; the JS handle is spent.
    #[wasm_bindgen(js_name = handleMessage)]
    pub fn handle_message(&mut self, message: MessageCore) -> Result<(), JsValue> {
        self.inner.handle_message(message.inner).map_err(js_err)
    }

    /// Makes everything due now.
    pub fn flush(&mut self, now_ms: f64) -> Result<(), JsValue> {
        self.inner.flush(millis(now_ms)?);
        Ok(())
    }

    /// Reports whatever is left as failed; refuses later calls.
    pub fn shutdown(&mut self) {
        self.inner.shutdown();
    }

    /// `{batchId, attempt, messageCount, request, deadlineMs}`, or undefined.
    #[wasm_bindgen(js_name = pollRequest)]
    pub fn poll_request(&mut self, now_ms: f64) -> Result<JsValue, JsValue> {
        let Some(b) = self.inner.poll_request(millis(now_ms)?) else {
            return Ok(JsValue::UNDEFINED);
        };
        let o = Object::new();
        set(&o, "batchId", b.batch_id as f64);
        set(&o, "attempt", b.attempt);
        set(&o, "messageCount", b.message_count as f64);
        set(&o, "request", request_object(b.request)?);
        set(&o, "deadlineMs", b.deadline.as_millis() as f64);
        Ok(o.into())
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
        let outcome = outcome_of(status, retry_after, error, message)?;
        self.inner
            .handle_response(millis(now_ms)?, batch_id as u64, outcome);
        Ok(())
    }

    /// Call when `now` reaches `pollTimeout()`.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<(), JsValue> {
        self.inner.handle_timeout(millis(now_ms)?);
        Ok(())
    }

    /// When to wake next (ms), or undefined.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|t| t.as_millis() as f64)
    }

    /// Whether a call, prepared message or flush moved the wake-up time
    /// earlier since the last read: the sender must wake (the core's
    /// `Batcher::poll_wake`).
    #[wasm_bindgen(js_name = pollWake)]
    pub fn poll_wake(&mut self) -> bool {
        self.inner.poll_wake()
    }

    /// The next event: `{kind: "delivered" | "retrying" | "failed", ...}`,
    /// in the core's shape (`BatcherEvent::to_json`) with camelCase keys.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self) -> Result<JsValue, JsValue> {
        match self.inner.poll_event() {
            Some(ev) => js_sys::JSON::parse(&ev.to_json(core::KeyCase::Camel)),
            None => Ok(JsValue::UNDEFINED),
        }
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
