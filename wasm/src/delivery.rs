//! One call's webhook delivery, sans I/O (the core's `Delivery`).

use crate::call::call_of;
use crate::error::{js_err, misuse};
use crate::timestamp::millis;
use crate::util::{outcome_of, request_object, set, Options};
use crate::webhooks::{host_hmac, Webhooks};
use callpost_core as core;
use js_sys::Object;
use wasm_bindgen::prelude::*;

/// A value from JSON text the core wrote (outcomes, logs), in camelCase:
/// the core owns their shape, so no second mapping lives here.
fn from_core_json(text: &str) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(text)
}

/// The core's delivery settings from `options`: `seed` (required: the JS
/// layer draws it from `crypto.getRandomValues`), and `timeoutMs`,
/// `retryWindowMs`, `backoffBaseMs`, `backoffCapMs` in place of the core's
/// defaults.
fn config_of(options: &JsValue) -> Result<core::DeliveryConfig, JsValue> {
    let o = Options::of(options)?;
    let seed = o.uint("seed")?.ok_or_else(|| misuse("seed is required"))?;
    let mut config = core::DeliveryConfig::new(seed);
    o.set_uint("timeoutMs", &mut config.timeout_ms)?;
    o.set_uint("retryWindowMs", &mut config.retry_window_ms)?;
    o.set_uint("backoffBaseMs", &mut config.backoff.base_ms)?;
    o.set_uint("backoffCapMs", &mut config.backoff.cap_ms)?;
    Ok(config)
}

/// One call's delivery.
#[wasm_bindgen(js_name = DeliveryCore)]
pub struct Delivery {
    inner: core::Delivery,
    native_hmac: Option<js_sys::Function>,
}

#[wasm_bindgen(js_class = DeliveryCore)]
impl Delivery {
    /// Starts a delivery of a call (JSON text), first round due at
    /// `now_ms`, with the settings [`config_of`] reads from `options`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        webhooks: &Webhooks,
        call: &JsValue,
        now_ms: f64,
        options: &JsValue,
    ) -> Result<Self, JsValue> {
        let config = config_of(options)?;
        let inner = core::Delivery::new(&webhooks.inner, &call_of(call)?, millis(now_ms)?, config)
            .map_err(js_err)?;
        Ok(Self {
            inner,
            native_hmac: webhooks.native_hmac.clone(),
        })
    }

    /// The delivery of a batch from `WebhooksCore.pack` (its `id` and
    /// `body`): one POST under its id, decided by one answer. `options` as
    /// the constructor's.
    #[wasm_bindgen(js_name = forBatch)]
    pub fn for_batch(
        webhooks: &Webhooks,
        id: String,
        body: String,
        now_ms: f64,
        options: &JsValue,
    ) -> Result<Self, JsValue> {
        let batch = core::webhooks::Batch {
            id,
            body: body.into_bytes(),
            members: Vec::new(),
        };
        let inner = core::Delivery::for_batch(
            &webhooks.inner,
            &batch,
            millis(now_ms)?,
            config_of(options)?,
        )
        .map_err(js_err)?;
        Ok(Self {
            inner,
            native_hmac: webhooks.native_hmac.clone(),
        })
    }

    /// `{endpoint, attempt, request, deadlineMs}` to send now, or undefined;
    /// call until undefined.
    #[wasm_bindgen(js_name = pollRequest)]
    pub fn poll_request(&mut self, now_ms: f64) -> Result<JsValue, JsValue> {
        let now = millis(now_ms)?;
        let polled = match &self.native_hmac {
            Some(f) => self.inner.poll_request_with(now, Some(&mut host_hmac(f))),
            None => self.inner.poll_request(now),
        };
        let Some(a) = polled else {
            return Ok(JsValue::UNDEFINED);
        };
        let o = Object::new();
        set(&o, "endpoint", a.endpoint as f64);
        set(&o, "attempt", a.attempt);
        set(&o, "request", request_object(a.request)?);
        set(&o, "deadlineMs", a.deadline.as_millis() as f64);
        Ok(o.into())
    }

    /// Reports attempt `attempt`'s status (with the raw Retry-After) or
    /// error kind.
    #[wasm_bindgen(js_name = handleResponse)]
    pub fn handle_response(
        &mut self,
        now_ms: f64,
        attempt: u32,
        status: Option<u16>,
        retry_after: Option<String>,
        error: Option<String>,
        message: Option<String>,
    ) -> Result<(), JsValue> {
        let outcome = outcome_of(status, retry_after, error, message)?;
        self.inner
            .handle_response(millis(now_ms)?, attempt, outcome);
        Ok(())
    }

    /// Call when `now` reaches `pollTimeout()`.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<(), JsValue> {
        self.inner.handle_timeout(millis(now_ms)?);
        Ok(())
    }

    /// When to wake next (ms), or undefined when done.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|t| t.as_millis() as f64)
    }

    /// The final outcome, once.
    #[wasm_bindgen(js_name = pollOutcome)]
    pub fn poll_outcome(&mut self) -> Result<JsValue, JsValue> {
        match self.inner.poll_outcome() {
            Some(o) => from_core_json(&o.to_json(core::KeyCase::Camel)),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// The final outcome, if there is one.
    #[wasm_bindgen(getter)]
    pub fn outcome(&self) -> Result<JsValue, JsValue> {
        match self.inner.outcome() {
            Some(o) => from_core_json(&o.to_json(core::KeyCase::Camel)),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// What a host throws when the delivery gave up, or undefined.
    #[wasm_bindgen(getter, js_name = errorMessage)]
    pub fn error_message(&self) -> Option<String> {
        self.inner
            .outcome()
            .and_then(core::DeliveryOutcome::error_message)
    }

    /// The attempts so far.
    #[wasm_bindgen(getter)]
    pub fn log(&self) -> Result<JsValue, JsValue> {
        from_core_json(&self.inner.log_json(core::KeyCase::Camel))
    }

    /// The body every attempt sends.
    #[wasm_bindgen(getter)]
    pub fn body(&self) -> String {
        String::from_utf8_lossy(self.inner.body()).into_owned()
    }

    /// The call's `messageId`.
    #[wasm_bindgen(getter, js_name = messageId)]
    pub fn message_id(&self) -> Option<String> {
        self.inner.message_id().map(str::to_owned)
    }

    /// `"parallel"` or `"failover"`.
    #[wasm_bindgen(getter)]
    pub fn mode(&self) -> String {
        self.inner.mode().as_str().to_owned()
    }

    /// True once the delivery has an outcome.
    #[wasm_bindgen(getter)]
    pub fn done(&self) -> bool {
        self.inner.is_done()
    }

    /// The whole state as JSON, to store and resume.
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// Restores a state saved with `toJSON`, for the same settings.
    #[wasm_bindgen(js_name = fromJSON)]
    pub fn from_json(text: &str, webhooks: &Webhooks) -> Result<Self, JsValue> {
        let inner = core::Delivery::from_json(text, &webhooks.inner).map_err(js_err)?;
        Ok(Self {
            inner,
            native_hmac: webhooks.native_hmac.clone(),
        })
    }
}
