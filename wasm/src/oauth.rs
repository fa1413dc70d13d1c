//! An OAuth 2.0 endpoint's bearer token (the core's `oauth::TokenSource`),
//! for the package's `deliver`: the JS side runs the token request.

use crate::error::js_err;
use crate::timestamp::millis;
use crate::util::set;
use callpost_core as core;
use js_sys::{Array, Object};
use wasm_bindgen::prelude::*;

/// One grant's token, fetched, cached and refreshed (sans I/O).
#[wasm_bindgen(js_name = TokenSourceCore)]
pub struct TokenSource {
    inner: core::oauth::TokenSource,
}

impl TokenSource {
    /// A source for the OAuth 2.0 grant of `ep`, if it has one.
    pub(crate) fn of(ep: &core::webhooks::Endpoint, seed: f64) -> Option<Self> {
        let core::webhooks::Auth::OAuth2(grant) = ep.auth()? else {
            return None;
        };
        // A JS number's integer bits, as the deliveries' seeds.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let seed = seed as u64;
        Some(Self {
            inner: core::oauth::TokenSource::new(grant.clone(), seed),
        })
    }
}

#[wasm_bindgen(js_class = TokenSourceCore)]
impl TokenSource {
    /// `{url, headers, body, deadlineMs}` of the token request to send now
    /// (a POST), or undefined.
    #[wasm_bindgen(js_name = pollRequest)]
    pub fn poll_request(&mut self, now_ms: f64) -> Result<JsValue, JsValue> {
        let Some(r) = self.inner.poll_request(millis(now_ms)?) else {
            return Ok(JsValue::UNDEFINED);
        };
        let o = Object::new();
        set(&o, "url", r.url);
        let headers = Array::new();
        for (k, v) in r.headers {
            headers.push(&Array::of2(&JsValue::from(k), &JsValue::from(v)));
        }
        set(&o, "headers", headers);
        // A form body: ASCII.
        set(&o, "body", String::from_utf8_lossy(&r.body).into_owned());
        #[allow(clippy::cast_precision_loss)]
        set(&o, "deadlineMs", r.deadline.as_millis() as f64);
        Ok(o.into())
    }

    /// The token endpoint's answer; throws `token_unavailable` when it is
    /// not a bearer token.
    #[wasm_bindgen(js_name = handleResponse)]
    pub fn handle_response(
        &mut self,
        now_ms: f64,
        status: u16,
        body: &[u8],
    ) -> Result<(), JsValue> {
        self.inner
            .handle_response(millis(now_ms)?, status, body)
            .map_err(js_err)
    }

    /// The token request failed without an answer.
    #[wasm_bindgen(js_name = handleFailure)]
    pub fn handle_failure(&mut self, now_ms: f64, message: &str) -> Result<(), JsValue> {
        self.inner.handle_failure(millis(now_ms)?, message);
        Ok(())
    }

    /// `Bearer …` to send now; throws `token_unavailable` with the last
    /// failure when there is none.
    pub fn authorization(&self, now_ms: f64) -> Result<String, JsValue> {
        self.inner
            .authorization(millis(now_ms)?)
            .map(str::to_owned)
            .map_err(js_err)
    }

    /// A receiver answered 401 to a request sent with `authorization`.
    #[wasm_bindgen(js_name = handleRejected)]
    pub fn handle_rejected(&mut self, authorization: &str) {
        self.inner.handle_rejected(authorization);
    }

    /// The most bytes of a token answer to read.
    #[wasm_bindgen(getter = answerBytes)]
    pub fn answer_bytes(&self) -> usize {
        core::oauth::TOKEN_ANSWER_BYTES
    }
}
