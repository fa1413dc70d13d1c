//! wasm-bindgen bindings over `callpost-core`. Values cross as JSON text (one
//! string copy; `JSON.stringify` runs natively in the JS engine) or as plain
//! numbers; times are `number`s of milliseconds, never `bigint`. Each export
//! converts, calls the core once and converts back. The I/O loops (fetch,
//! timers) are in `js/api.mjs`.
//!
//! This file holds signing and verification, which is all a webhook
//! receiver needs. Everything else (calls, webhooks, delivery, batching) is
//! in `full.rs`, behind the default `full` feature: without it, link-time
//! optimisation leaves only the HMAC, so the npm package's `callpost/verify`
//! entry loads a module a fraction of the size (BENCHMARKS.md).

use callpost_core as core;
use js_sys::{Array, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

#[cfg(feature = "full")]
mod full;

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
#[cfg(feature = "full")]
pub(crate) fn js_err<E: Into<core::Error>>(e: E) -> JsValue {
    let e: core::Error = e.into();
    error_value(class_of(&e), e.code(), &e.to_string())
}

/// [`js_err`] for the signing exports. It skips the umbrella
/// `core::Error`, whose `Display` and codes span every concern: through it,
/// all of their messages stayed in the verify-only module (22.5 KB gzipped,
/// against 16.3 KB without).
fn sig_err(e: core::SignatureError) -> JsValue {
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

/// Bytes from a `string` (UTF-8) or a `Uint8Array`.
pub(crate) fn bytes_of(v: &JsValue, what: &str) -> Result<Vec<u8>, JsValue> {
    if let Some(s) = v.as_string() {
        return Ok(s.into_bytes());
    }
    if let Some(a) = v.dyn_ref::<Uint8Array>() {
        return Ok(a.to_vec());
    }
    Err(usage_err(
        "invalid_argument",
        &format!("{what} must be a string or Uint8Array"),
    ))
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
    // One very large body should not pin its buffer for the life of the
    // page: a small request after it gets a fresh buffer, and the large one
    // goes back to the allocator. Calls and bodies are usually a few KB,
    // so this is rare.
    const KEEP: usize = 1 << 20;
    let len = len.max(core::SIGNATURE_HEX_LEN);
    SCRATCH.with_borrow_mut(|s| {
        if s.len() > KEEP && len <= KEEP / 8 {
            *s = Vec::new();
        }
        if s.len() < len {
            s.resize(len, 0);
        }
        s.as_ptr()
    })
}

/// The WebAssembly memory, so the JS API can write into `scratch`.
#[wasm_bindgen(js_name = wasmMemory)]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

/// The body and key the JS API wrote at the start of the scratch buffer.
pub(crate) fn scratch_parts(
    s: &[u8],
    body_len: usize,
    key_len: usize,
) -> Result<(&[u8], &[u8]), JsValue> {
    match body_len.checked_add(key_len) {
        Some(end) if end <= s.len() => Ok((&s[..body_len], &s[body_len..end])),
        _ => Err(usage_err(
            "invalid_argument",
            "lengths exceed the scratch buffer",
        )),
    }
}

/// Signs the body (and key) in the scratch buffer with `sign`, then puts
/// the 40 hex digits at the buffer's start.
fn sign_in_scratch(
    body_len: usize,
    key_len: usize,
    sign: impl FnOnce(&[u8], &[u8]) -> Result<[u8; core::SIGNATURE_HEX_LEN], JsValue>,
) -> Result<(), JsValue> {
    SCRATCH.with_borrow_mut(|s| {
        let (body, key) = scratch_parts(s, body_len, key_len)?;
        let hex = sign(body, key)?;
        s[..hex.len()].copy_from_slice(&hex);
        Ok(())
    })
}

/// `sign` over the scratch buffer: a `body_len`-byte body then a
/// `key_len`-byte secret. The 40 hex digits replace the buffer's start.
#[wasm_bindgen(js_name = signScratch)]
pub fn sign_scratch(body_len: usize, key_len: usize) -> Result<(), JsValue> {
    sign_in_scratch(body_len, key_len, |body, key| {
        Ok(core::Secret::new(key).map_err(sig_err)?.sign_hex(body))
    })
}

/// `verify` with one secret over the scratch buffer (laid out as for
/// `signScratch`).
#[wasm_bindgen(js_name = verifyScratch)]
pub fn verify_scratch(body_len: usize, key_len: usize, signature: &str) -> Result<bool, JsValue> {
    SCRATCH.with_borrow(|s| {
        let (body, key) = scratch_parts(s, body_len, key_len)?;
        let secret = core::Secret::new(key).map_err(sig_err)?;
        core::verify(body, signature, &[secret]).map_err(sig_err)
    })
}

/// A prekeyed secret: the fastest way to sign many bodies with one key.
#[wasm_bindgen]
pub struct Signer {
    secret: core::Secret,
}

#[wasm_bindgen]
impl Signer {
    /// Keys the HMAC once.
    #[wasm_bindgen(constructor)]
    pub fn new(secret: &JsValue) -> Result<Signer, JsValue> {
        Ok(Signer {
            secret: core::Secret::new(bytes_of(secret, "secret")?).map_err(sig_err)?,
        })
    }

    /// Signs the first `body_len` bytes of the scratch buffer; the 40 hex
    /// digits replace the buffer's start.
    #[wasm_bindgen(js_name = signScratch)]
    pub fn sign_scratch(&self, body_len: usize) -> Result<(), JsValue> {
        sign_in_scratch(body_len, 0, |body, _| Ok(self.secret.sign_hex(body)))
    }
}

pub(crate) fn secrets_of(secrets: &JsValue) -> Result<Vec<core::Secret>, JsValue> {
    let raw: Vec<Vec<u8>> = if Array::is_array(secrets) {
        Array::from(secrets)
            .iter()
            .map(|s| bytes_of(&s, "secret"))
            .collect::<Result<_, _>>()?
    } else {
        vec![bytes_of(secrets, "secret")?]
    };
    raw.into_iter()
        .map(|k| core::Secret::new(k).map_err(sig_err))
        .collect()
}

/// `verify` over HMACs the host computed (Node's `node:crypto`, for large
/// bodies), laid out in the scratch buffer as for `signScratch`: each
/// secret's 40 lowercase hex digits one after another, then the signature.
/// `undefined` when the digests are not that, and the JS API then verifies
/// with the secrets. The core checks the signature and compares.
#[wasm_bindgen(js_name = verifyDigestsScratch)]
pub fn verify_digests_scratch(
    digests_len: usize,
    signature_len: usize,
) -> Result<Option<bool>, JsValue> {
    SCRATCH.with_borrow(|s| {
        let (digests, signature) = scratch_parts(s, digests_len, signature_len)?;
        // Bytes that are not UTF-8 are not 40 hex digits either: the core
        // then says `malformed_signature`.
        let signature = std::str::from_utf8(signature).unwrap_or_default();
        core::verify_digests(digests, signature)
            .transpose()
            .map_err(sig_err)
    })
}

/// Constant-time verification over the raw body, with rotation.
#[wasm_bindgen]
pub fn verify(body: &JsValue, signature: &str, secrets: &JsValue) -> Result<bool, JsValue> {
    core::verify(&bytes_of(body, "body")?, signature, &secrets_of(secrets)?).map_err(sig_err)
}
