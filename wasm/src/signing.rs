//! Signing and verification (the `signing` feature; see the crate doc).

use crate::{scratch_parts, sig_err, usage_err, SCRATCH};
use callpost_core as core;
use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;

/// Bytes from a `string` (UTF-8) or a `Uint8Array`.
fn bytes_of(v: &JsValue, what: &str) -> Result<Vec<u8>, JsValue> {
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

/// Signs the body (and key) in the scratch buffer (see `scratch_parts`)
/// with `sign`, then puts the 40 hex digits at the buffer's start.
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

thread_local! {
    /// The last secret `sign` or `verify` was given, prekeyed (see
    /// `core::KeyCache`).
    static KEYS: std::cell::RefCell<core::KeyCache> = std::cell::RefCell::default();
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
        sign_in_scratch(0, 0, body_len, |body, _| Ok(self.secret.sign_hex(body)))
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
/// bodies), laid out in the scratch buffer as for `signScratch`: the
/// signature in the key's place, and each secret's 40 lowercase hex digits
/// one after another in the body's. `undefined` when the digests are not
/// that, and the JS API then verifies with the secrets. The core checks the
/// signature and compares.
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

/// Constant-time verification over the raw body, with rotation.
#[wasm_bindgen]
pub fn verify(body: &JsValue, signature: &str, secrets: &JsValue) -> Result<bool, JsValue> {
    core::verify(&bytes_of(body, "body")?, signature, &secrets_of(secrets)?).map_err(sig_err)
}
