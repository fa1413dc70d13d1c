//! The Webhooks destination's settings and signed requests (the `webhooks`
//! feature; see the crate doc).

use crate::call::call_of;
use crate::error::{js_err, misuse};
use crate::signature::secrets_of;
use crate::timestamp::millis;
use crate::util::set;
use callpost_core as core;
use wasm_bindgen::prelude::*;

/// Verifies a parsed body given as its JSON text (re-stringified canonically).
#[wasm_bindgen(js_name = verifyJson)]
pub fn verify_json(text: &str, signature: &str, secrets: &JsValue) -> Result<bool, JsValue> {
    let value = core::Value::from_json_str(text).map_err(js_err)?;
    core::verify_value(&value, signature, &secrets_of(secrets)?).map_err(js_err)
}

/// Webhooks destination settings.
#[wasm_bindgen(js_name = WebhooksCore)]
pub struct Webhooks {
    pub(crate) inner: core::Webhooks,
    pub(crate) native_hmac: Option<js_sys::Function>,
}

/// The platform's HMAC-SHA1 (`hmac(at, len) -> hex`, over the `len` bytes
/// at address `at` of wasm memory), as the core's [`core::HostHmac`]: the
/// core decides which bodies it signs, and checks what it answers. The
/// body is not copied out: the JS layer hashes a view of wasm memory, which
/// made requests with 33 KB bodies 5-23% faster than a copy (Node 20, 24).
pub(crate) fn host_hmac(f: &js_sys::Function) -> impl FnMut(&[u8]) -> Option<String> + '_ {
    |body| {
        f.call2(
            &JsValue::NULL,
            &JsValue::from(body.as_ptr() as usize),
            &JsValue::from(body.len()),
        )
        .ok()?
        .as_string()
    }
}

#[wasm_bindgen(js_class = WebhooksCore)]
impl Webhooks {
    /// From `{"endpoints": [...], "sharedSecret": "...", "mode": "..."}` as
    /// JSON text.
    #[wasm_bindgen(constructor)]
    pub fn new(settings_json: &str) -> Result<Self, JsValue> {
        let v = core::Value::from_json_str(settings_json).map_err(js_err)?;
        Ok(Self {
            inner: core::Webhooks::from_value(&v).map_err(js_err)?,
            native_hmac: None,
        })
    }

    /// Lets `hmac(at, len) -> hex`, the platform's HMAC-SHA1 under the same
    /// shared secret, sign the bodies the core offers it (see
    /// [`host_hmac`]); it must not call into this module.
    #[wasm_bindgen(js_name = setNativeHmac)]
    pub fn set_native_hmac(&mut self, hmac: js_sys::Function) {
        self.native_hmac = Some(hmac);
    }

    /// The signed request for a call (JSON text or bytes) to endpoint
    /// `endpoint`, packed in one string: the header count, the URL, each
    /// header's name and value, one per line, then the body (URLs, header
    /// names and values never hold a newline: the core refuses CR and LF in
    /// them, and a URL has none after parsing). The JS layer splits it: one
    /// string crossing the boundary, where an object built property by
    /// property cost more than the core's whole job.
    pub fn request(&self, call: &JsValue, endpoint: usize, now_ms: f64) -> Result<String, JsValue> {
        let packed = self.packed(&call_of(call)?, endpoint, now_ms)?;
        String::from_utf8(packed).map_err(|_| js_err(core::JsonError::InvalidUnicode))
    }

    /// [`Webhooks::request`] through the scratch buffer: the call's JSON
    /// text is its first `len` bytes, and the packed request replaces it;
    /// returns the packed request's byte count. `Webhooks.request` takes
    /// this path: with no copies and mallocs of its own at the boundary, a
    /// 423 B call's request costs a third less (BENCHMARKS.md).
    #[wasm_bindgen(js_name = requestScratch)]
    pub fn request_scratch(
        &self,
        len: usize,
        endpoint: usize,
        now_ms: f64,
    ) -> Result<usize, JsValue> {
        crate::signature::through_scratch(len, |text| {
            let call = core::Call::from_json_slice(text).map_err(js_err)?;
            self.packed(&call, endpoint, now_ms)
        })
    }

    fn packed(&self, call: &core::Call, endpoint: usize, now_ms: f64) -> Result<Vec<u8>, JsValue> {
        let now = millis(now_ms)?;
        let r = match &self.native_hmac {
            Some(f) => self
                .inner
                .request_with(call, endpoint, now, Some(&mut host_hmac(f))),
            None => self.inner.request(call, endpoint, now),
        }
        .map_err(js_err)?;
        let mut out = Vec::with_capacity(
            r.body.len()
                + r.url.len()
                + 24
                + r.headers
                    .iter()
                    .map(|(k, v)| 2 + k.len() + v.len())
                    .sum::<usize>(),
        );
        out.extend_from_slice(r.headers.len().to_string().as_bytes());
        out.push(b'\n');
        out.extend_from_slice(r.url.as_bytes());
        for (k, v) in &r.headers {
            out.push(b'\n');
            out.extend_from_slice(k.as_bytes());
            out.push(b'\n');
            out.extend_from_slice(v.as_bytes());
        }
        out.push(b'\n');
        out.extend_from_slice(&r.body);
        Ok(out)
    }

    /// Whether the call's integrations let it reach Webhooks.
    /// Groups `calls` (an array of JSON texts or UTF-8 bytes) into batches
    /// at `now_ms`: `[batches, skipped]`, each batch `{id, body,
    /// members}`, each skipped call `[index, outcome]`.
    pub fn pack(&self, calls: &js_sys::Array, now_ms: f64) -> Result<js_sys::Array, JsValue> {
        let calls = calls
            .iter()
            .map(|c| call_of(&c))
            .collect::<Result<Vec<_>, _>>()?;
        let packed = self.inner.pack(&calls, millis(now_ms)?).map_err(js_err)?;
        let batches: js_sys::Array = packed
            .batches
            .into_iter()
            .map(|b| {
                let o = js_sys::Object::new();
                let members: js_sys::Array =
                    b.members.iter().map(|&i| JsValue::from(i as f64)).collect();
                // Bodies are written from `&str`s and ASCII, so UTF-8.
                let body =
                    String::from_utf8(b.body).map_err(|_| misuse("a batch body is not UTF-8"))?;
                set(&o, "id", b.id);
                set(&o, "body", body);
                set(&o, "members", members);
                Ok(JsValue::from(o))
            })
            .collect::<Result<_, JsValue>>()?;
        let skipped: js_sys::Array = packed
            .skipped
            .into_iter()
            .map(|(i, why)| {
                let outcome = core::DeliveryOutcome::from(why);
                let outcome = js_sys::JSON::parse(&outcome.to_json(core::KeyCase::Camel))?;
                Ok(JsValue::from(js_sys::Array::of2(
                    &(i as f64).into(),
                    &outcome,
                )))
            })
            .collect::<Result<_, JsValue>>()?;
        Ok(js_sys::Array::of2(&batches, &skipped))
    }

    #[wasm_bindgen(js_name = isEnabledFor)]
    pub fn is_enabled_for(&self, call: &JsValue) -> Result<bool, JsValue> {
        Ok(self.inner.is_enabled_for(&call_of(call)?))
    }

    /// Throws `invalid_auth` when an endpoint presents a client
    /// certificate, which the package's `deliver` does not.
    #[wasm_bindgen(js_name = checkSentAsBuilt)]
    pub fn check_sent_as_built(&self) -> Result<(), JsValue> {
        self.inner.check_sent_as_built().map_err(js_err)
    }

    /// The token source of endpoint `endpoint`'s OAuth 2.0 grant, or
    /// undefined when its auth is not oauth2.
    #[wasm_bindgen(js_name = tokenSource)]
    pub fn token_source(&self, endpoint: usize, seed: f64) -> Option<crate::oauth::TokenSource> {
        self.inner
            .endpoints()
            .get(endpoint)
            .and_then(|ep| crate::oauth::TokenSource::of(ep, seed))
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

    /// `"parallel"` or `"failover"`.
    #[wasm_bindgen(getter)]
    pub fn mode(&self) -> String {
        self.inner.mode().as_str().to_owned()
    }

    /// `"POST"`, `"PUT"` or `"PATCH"`.
    #[wasm_bindgen(getter)]
    pub fn method(&self) -> String {
        self.inner.method().as_str().to_owned()
    }
}
