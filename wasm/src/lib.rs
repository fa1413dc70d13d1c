//! wasm-bindgen bindings over `callpost-core`. Values cross as JSON text (one
//! string copy; `JSON.stringify` runs natively in the JS engine) or as plain
//! numbers; times are `number`s of milliseconds, never `bigint`. Each export
//! converts, calls the core once and converts back. The I/O loops (fetch,
//! timers) are in `js/api.mjs`.
//!
//! The exports come in three features, so the npm package can give each
//! kind of user only the module they need (link-time optimisation drops
//! what no export reaches):
//! * `signing` (`signing.rs`): sign, verify, `Signer`. Alone, it is the
//!   `callpost/verify` module for webhook receivers.
//! * `client` (`client.rs`): the batching client. With `calls.rs`, it is the
//!   `callpost/client` module for apps that send calls from a browser.
//! * `webhooks` (`webhooks.rs`): webhook requests, deliveries, audiences.
//!
//! The default `full` feature is all three: the main `callpost` module.

use callpost_core as core;
use js_sys::Reflect;
use wasm_bindgen::prelude::*;

#[cfg(any(feature = "client", feature = "webhooks"))]
mod calls;
#[cfg(feature = "client")]
mod client;
#[cfg(feature = "signing")]
mod signing;
#[cfg(feature = "webhooks")]
mod webhooks;

/// Error class names by concern, mirroring the Python exception classes.
pub(crate) fn class_of(e: &core::Error) -> &'static str {
    use core::{CallError, EnqueueError, Error, JsonError};
    match e {
        Error::Json(
            JsonError::NotJson { .. } | JsonError::Cycle(_) | JsonError::NonStringKey(_),
        ) => "NotJSONError",
        Error::Json(_) | Error::Call(CallError::Json(_)) => "JSONValueError",
        Error::Call(_) | Error::Audience(_) | Error::State(_) => "InvalidCallError",
        Error::Settings(_) | Error::Endpoint(_) => "SettingsError",
        Error::Signature(_) => "SignatureError",
        Error::Config(_) => "ConfigError",
        Error::Enqueue(EnqueueError::MessageTooLarge(_)) => "MessageTooLargeError",
        Error::Enqueue(EnqueueError::QueueFull(_)) => "QueueFullError",
        Error::Enqueue(EnqueueError::Closed) => "ClosedError",
        Error::Enqueue(EnqueueError::Call(CallError::Json(_))) => "JSONValueError",
        Error::Enqueue(_) => "InvalidCallError",
        _ => "CallpostError",
    }
}

/// A JS `Error` with `.name` by concern and `.code` from the core.
#[cfg(any(feature = "client", feature = "webhooks"))]
pub(crate) fn js_err<E: Into<core::Error>>(e: E) -> JsValue {
    let e: core::Error = e.into();
    error_value(class_of(&e), e.code(), &e.to_string())
}

/// [`js_err`] for the signing exports. It skips the umbrella
/// `core::Error`, whose `Display` and codes span every concern: through it,
/// all of their messages stayed in the verify-only module (22.5 KB gzipped,
/// against 16.3 KB without).
#[cfg(feature = "signing")]
pub(crate) fn sig_err(e: core::SignatureError) -> JsValue {
    error_value(
        class_of(&core::Error::Signature(e.clone())),
        e.code(),
        &e.to_string(),
    )
}

fn error_value(class: &str, code: &str, message: &str) -> JsValue {
    let err = js_sys::Error::new(message);
    err.set_name(class);
    // Setting a data property on a fresh Error cannot fail.
    let _ = Reflect::set(&err, &"code".into(), &code.into());
    err.into()
}

pub(crate) fn usage_err(code: &str, message: &str) -> JsValue {
    let err = js_sys::TypeError::new(message);
    let _ = Reflect::set(&err, &"code".into(), &code.into());
    err.into()
}

thread_local! {
    /// Where `signScratch`/`verifyScratch` read their inputs: the JS API
    /// encodes the secret and body straight into wasm memory here. Passing
    /// them as `JsValue`s (type checks, `to_vec`, a malloc each) and taking
    /// a `String` back cost 0.5 µs of a 1.0 µs sign of a 423 B body.
    pub(crate) static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The address in wasm memory of the scratch buffer, grown to at least
/// `len` bytes. It holds the caller's bytes until the next call here.
#[wasm_bindgen]
pub fn scratch(len: usize) -> *const u8 {
    SCRATCH.with_borrow_mut(|s| {
        fit_scratch(s, len);
        s.as_ptr()
    })
}

/// Grows the scratch buffer to at least `len` bytes. Short of swapping a
/// very large buffer for a fresh one, it never cuts the length: a shorter
/// one would have the next call zero-fill the difference again. Whatever
/// writes output here for JS to read fits it with this first, with the
/// output's length, so that the `scratch(len)` JS then calls for the
/// address finds it already fitted and keeps the bytes.
pub(crate) fn fit_scratch(s: &mut Vec<u8>, len: usize) {
    // One very large body should not pin its buffer for the life of the
    // page: a small request after it gets a fresh buffer, and the large one
    // goes back to the allocator. Calls and bodies are usually a few KB,
    // so this is rare.
    const KEEP: usize = 1 << 20;
    let len = len.max(core::SIGNATURE_HEX_LEN);
    if s.len() > KEEP && len <= KEEP / 8 {
        *s = Vec::new();
    }
    if s.len() < len {
        s.resize(len, 0);
    }
}

/// The WebAssembly memory, so the JS API can write into `scratch`.
#[wasm_bindgen(js_name = wasmMemory)]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

/// The body and key the JS API wrote into the scratch buffer: the key at
/// its start (`key_len` bytes), the body at `body_at` (`body_len` bytes).
/// The key comes first so that, for one secret, the body's place and the
/// JS view of it stay the same from call to call.
pub(crate) fn scratch_parts(
    s: &[u8],
    key_len: usize,
    body_at: usize,
    body_len: usize,
) -> Result<(&[u8], &[u8]), JsValue> {
    match body_at.checked_add(body_len) {
        Some(end) if key_len <= body_at && end <= s.len() => Ok((&s[body_at..end], &s[..key_len])),
        _ => Err(usage_err(
            "invalid_argument",
            "lengths exceed the scratch buffer",
        )),
    }
}
