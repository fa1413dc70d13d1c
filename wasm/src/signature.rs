//! Signing and verification (the `signing` feature; see the crate doc).
//!
//! `sign` and single-secret `verify` take their inputs from a scratch
//! buffer in wasm memory that the JS layer writes the secret and body into
//! (`TextEncoder.encodeInto`), and `sign` leaves its 40 hex digits there:
//! handing them over as values (wasm-bindgen's type checks, copies and
//! mallocs, and a `String` back) cost half of a 423 B sign (BENCHMARKS.md).
//! The buffer is private to the JS layer; the package's API takes values.

use crate::error::{misuse, sig_err};
use callpost_core as core;
use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;

thread_local! {
    /// Where the JS layer writes a secret and a body for `signScratch` and
    /// friends, and reads a signature back.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };

    /// The last secret `sign` or `verify` was given, prekeyed (see
    /// `core::KeyCache`).
    static KEYS: std::cell::RefCell<core::KeyCache> = std::cell::RefCell::default();
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
/// one would have the next call zero-fill the difference again.
fn fit_scratch(s: &mut Vec<u8>, len: usize) {
    // One very large body should not pin its buffer for the life of the
    // page: a small one after it gets a fresh buffer, and the large one
    // goes back to the allocator.
    const KEEP: usize = 1 << 20;
    let len = len.max(core::SIGNATURE_HEX_LEN);
    if s.len() > KEEP && len <= KEEP / 8 {
        *s = Vec::new();
    }
    if s.len() < len {
        s.resize(len, 0);
    }
}

/// Runs `f` over the first `len` bytes of the scratch buffer (what the JS
/// layer wrote there), and puts the bytes it returns at the buffer's start,
/// returning their count. The buffer is fitted to the output before it is
/// written, so the JS layer's `scratch(count)` for the address is a no-op
/// and cannot swap the output away.
#[cfg(feature = "webhooks")]
pub(crate) fn through_scratch(
    len: usize,
    f: impl FnOnce(&[u8]) -> Result<Vec<u8>, JsValue>,
) -> Result<usize, JsValue> {
    let input = SCRATCH.with_borrow(|s| s.get(..len).map(<[u8]>::to_vec));
    let out = f(&input.ok_or_else(|| misuse("length exceeds the scratch buffer"))?)?;
    SCRATCH.with_borrow_mut(|s| {
        fit_scratch(s, out.len());
        s[..out.len()].copy_from_slice(&out);
    });
    Ok(out.len())
}

/// The WebAssembly memory, so the JS layer can write into `scratch`.
#[wasm_bindgen(js_name = wasmMemory)]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

/// The body and key the JS layer wrote into the scratch buffer: the key at
/// its start (`key_len` bytes), the body at `body_at` (`body_len` bytes).
/// The key comes first so that, for one secret, the body's place and the
/// JS view of it stay the same from call to call.
fn scratch_parts(
    s: &[u8],
    key_len: usize,
    body_at: usize,
    body_len: usize,
) -> Result<(&[u8], &[u8]), JsValue> {
    match body_at.checked_add(body_len) {
        Some(end) if key_len <= body_at && end <= s.len() => Ok((&s[body_at..end], &s[..key_len])),
        _ => Err(misuse("lengths exceed the scratch buffer")),
    }
}

/// Signs the body (and key) in the scratch buffer with `sign`, then puts
/// the 40 hex digits at the buffer's start.
fn sign_in_scratch(
    key_len: usize,
    body_at: usize,
    body_len: usize,
    sign: impl FnOnce(&[u8], &[u8]) -> Result<[u8; core::SIGNATURE_HEX_LEN], JsValue>,
) -> Result<(), JsValue> {
    SCRATCH.with_borrow_mut(|s| {
        let (body, key) = scratch_parts(s, key_len, body_at, body_len)?;
        let hex = sign(body, key)?;
        s[..hex.len()].copy_from_slice(&hex);
        Ok(())
    })
}

/// `sign` over the scratch buffer: a `key_len`-byte secret at its start
/// and a `body_len`-byte body at `body_at`. The 40 hex digits replace the
/// buffer's start.
#[wasm_bindgen(js_name = signScratch)]
pub fn sign_scratch(key_len: usize, body_at: usize, body_len: usize) -> Result<(), JsValue> {
    sign_in_scratch(key_len, body_at, body_len, |body, key| {
        KEYS.with_borrow_mut(|keys| Ok(keys.secret(key).map_err(sig_err)?.sign_hex(body)))
    })
}

/// `verify` with one secret over the scratch buffer (laid out as for
/// `signScratch`).
#[wasm_bindgen(js_name = verifyScratch)]
pub fn verify_scratch(
    key_len: usize,
    body_at: usize,
    body_len: usize,
    signature: &str,
) -> Result<bool, JsValue> {
    SCRATCH.with_borrow(|s| {
        let (body, key) = scratch_parts(s, key_len, body_at, body_len)?;
        KEYS.with_borrow_mut(|keys| {
            let secret = keys.secret(key).map_err(sig_err)?;
            core::verify(body, signature, std::slice::from_ref(secret)).map_err(sig_err)
        })
    })
}

/// `verify` over HMACs the host computed (Node's `node:crypto`, for large
/// bodies), laid out in the scratch buffer as for `signScratch`: the
/// signature in the key's place, and each secret's 40 lowercase hex digits
/// one after another in the body's. `undefined` when the digests are not
/// that, and the JS layer then verifies with the secrets. The core checks
/// the signature and compares.
#[wasm_bindgen(js_name = verifyDigestsScratch)]
pub fn verify_digests_scratch(
    signature_len: usize,
    digests_at: usize,
    digests_len: usize,
) -> Result<Option<bool>, JsValue> {
    SCRATCH.with_borrow(|s| {
        let (digests, signature) = scratch_parts(s, signature_len, digests_at, digests_len)?;
        // Bytes that are not UTF-8 are not 40 hex digits either: the core
        // then says `malformed_signature`.
        let signature = std::str::from_utf8(signature).unwrap_or_default();
        core::verify_digests(digests, signature)
            .transpose()
            .map_err(sig_err)
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
    pub fn new(secret: &JsValue) -> Result<Self, JsValue> {
        Ok(Self {
            secret: core::Secret::new(bytes_of(secret, "secret")?).map_err(sig_err)?,
        })
    }

    /// Signs the first `body_len` bytes of the scratch buffer; the 40 hex
    /// digits replace the buffer's start.
    #[wasm_bindgen(js_name = signScratch)]
    pub fn sign_scratch(&self, body_len: usize) -> Result<(), JsValue> {
        sign_in_scratch(0, 0, body_len, |body, _| Ok(self.secret.sign_hex(body)))
    }
}

/// Bytes from a `string` (UTF-8) or a `Uint8Array`.
pub(crate) fn bytes_of(v: &JsValue, what: &str) -> Result<Vec<u8>, JsValue> {
    if let Some(s) = v.as_string() {
        return Ok(s.into_bytes());
    }
    if let Some(a) = v.dyn_ref::<Uint8Array>() {
        return Ok(a.to_vec());
    }
    Err(misuse(&format!("{what} must be a string or Uint8Array")))
}

/// One secret or an array of them.
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

/// Constant-time verification over the raw body, with rotation.
#[wasm_bindgen]
pub fn verify(body: &JsValue, signature: &str, secrets: &JsValue) -> Result<bool, JsValue> {
    core::verify(&bytes_of(body, "body")?, signature, &secrets_of(secrets)?).map_err(sig_err)
}

/// Which of a request's headers carries the signature (the core's rule:
/// [`core::SIGNATURE_HEADER`], matched case-insensitively, the first), by
/// position, or undefined. The names come as one string, one per line
/// (a header name cannot hold a newline): one string crosses the boundary
/// where a list of them cost 2 KB of conversion code in the verify module.
#[wasm_bindgen(js_name = signatureHeaderIndex)]
pub fn signature_header_index(names: &str) -> Option<usize> {
    names
        .split('\n')
        .position(core::signature::is_signature_header)
}

/// Bodies from this size up are signed by the platform's HMAC where it has
/// one (the core's [`core::webhooks::HOST_HMAC_MIN_BYTES`]).
#[wasm_bindgen(js_name = hostHmacMinBytes)]
pub fn host_hmac_min_bytes() -> usize {
    core::webhooks::HOST_HMAC_MIN_BYTES
}
