//! The Webhooks destination's side (webhooks-destination.md): a call's
//! signed request to an endpoint, `X-Signature` signing and checking, and
//! Standard Webhooks signatures.

use crate::{
    guard, header_block, list, misuse, now_of, put, quiet, CallpostBytes, CallpostError,
    CallpostStatus, CallpostStr,
};
use callpost_core::standard::{self, StandardSecret};
use callpost_core::{Call, Error, Request, Secret, Timestamp, Value, Webhooks};

/// An HTTP request to send. Freed with `callpost_request_free`.
#[repr(C)]
#[derive(Debug)]
pub struct CallpostRequest {
    /// `POST`, static.
    pub method: CallpostStr,
    /// The full URL.
    pub url: CallpostBytes,
    /// The headers, in order, as an HTTP/1.1 header block (`Name: value`
    /// lines ending in CRLF). They may hold credentials (Basic auth, an
    /// endpoint's static headers): do not log them.
    pub headers: CallpostBytes,
    /// The body: exactly the bytes the signatures cover.
    pub body: CallpostBytes,
}

/// Hands a core request to the caller.
pub(crate) fn request_out(r: Request) -> CallpostRequest {
    let headers = header_block(r.headers.iter().map(|(n, v)| (n.as_ref(), v.as_ref())));
    CallpostRequest {
        method: CallpostStr::from_static(r.method),
        url: CallpostBytes::from_vec(r.url.into_bytes()),
        headers: CallpostBytes::from_vec(headers),
        body: CallpostBytes::from_vec(r.body),
    }
}

/// Frees a request's buffers; afterwards it is empty.
///
/// # Safety
/// `request` is NULL or was filled by callpost and is not freed by
/// anything else.
#[no_mangle]
pub unsafe extern "C" fn callpost_request_free(request: *mut CallpostRequest) {
    // SAFETY: as the caller promised.
    if let Some(r) = unsafe { request.as_mut() } {
        quiet((), || {
            r.url.release();
            r.headers.release();
            r.body.release();
        });
    }
}

/// A Webhooks destination's settings, validated. Made by
/// `callpost_webhooks_new`, freed by `callpost_webhooks_free`; read-only,
/// so safe to use from several threads at once.
#[derive(Debug)]
pub struct CallpostWebhooks {
    inner: Webhooks,
}

/// Validates a destination's settings, given as JSON in the form the shared
/// vectors, the other bindings and the relay use: `{"endpoints": [url |
/// {"url", "headers"}], "sharedSecret": "...", "mode": "parallel" |
/// "failover", "signature": "segment" | "standard" | "both",
/// "signingSecrets": [...], "filters": ..., "batch": ...}`. Errors are the
/// core's settings codes (`no_endpoints`, `invalid_url`, ...).
///
/// On success `*out` is the settings, which the caller frees with
/// `callpost_webhooks_free`.
///
/// # Safety
/// `settings_json` is readable; `out` is writable; `err` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_webhooks_new(
    settings_json: CallpostStr,
    out: *mut *mut CallpostWebhooks,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let value = Value::from_json_slice(settings_json.bytes())?;
            let inner = Webhooks::from_value(&value)?;
            put(
                out,
                "out",
                Box::into_raw(Box::new(CallpostWebhooks { inner })),
            )
        })
    }
}

/// Frees settings made by `callpost_webhooks_new`. NULL is ignored.
///
/// # Safety
/// `webhooks` is NULL or came from `callpost_webhooks_new` and is not used
/// again.
#[no_mangle]
pub unsafe extern "C" fn callpost_webhooks_free(webhooks: *mut CallpostWebhooks) {
    if !webhooks.is_null() {
        // SAFETY: made by Box::into_raw in callpost_webhooks_new; the caller
        // gives up its only pointer.
        quiet((), || drop(unsafe { Box::from_raw(webhooks) }));
    }
}

/// The signed request delivering a call (JSON text with Segment's keys) to
/// endpoint `endpoint` (0-based): the spec's body for the call's kind,
/// `X-Signature` and/or the Standard Webhooks headers, `Idempotency-Key`.
/// `now_ms` stamps a call that has no timestamp, and the Standard
/// signature. Errors are the call's own (`missing_event`, ...), or
/// `invalid_argument` for an endpoint past the configured ones.
///
/// On success `*out` is the request; the caller frees it with
/// `callpost_request_free`.
///
/// # Safety
/// `webhooks` is live; `call_json` is readable; `out` is writable; `err`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_webhooks_request(
    webhooks: *const CallpostWebhooks,
    call_json: CallpostStr,
    endpoint: usize,
    now_ms: i64,
    out: *mut CallpostRequest,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let w = webhooks
                .as_ref()
                .ok_or_else(|| misuse("webhooks must not be NULL"))?;
            let call = Call::from_json_slice(call_json.bytes())?;
            let request = w.inner.request(&call, endpoint, now_of(now_ms))?;
            put(out, "out", request_out(request))
        })
    }
}

/// The `X-Signature` value of `body` under `secret`: 40 lowercase hex
/// digits (HMAC-SHA1), written to `signature_out`, which has room for 40
/// bytes (no NUL is written). An empty secret is `empty_secret`.
///
/// # Safety
/// `secret` and `body` are readable; `signature_out` has 40 writable
/// bytes; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_sign(
    secret: CallpostStr,
    body: CallpostStr,
    signature_out: *mut u8,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            if signature_out.is_null() {
                return Err(misuse("signature_out must not be NULL"));
            }
            let hex = Secret::new(secret.bytes())?.sign_hex(body.bytes());
            std::ptr::copy_nonoverlapping(hex.as_ptr(), signature_out, hex.len());
            Ok(())
        })
    }
}

/// Checks an `X-Signature` value over the exact `body` bytes against each
/// of `count` secrets (several while rotating), in constant time. Writes
/// whether one matches to `*matched`. A signature that is not 40 hex
/// digits is `malformed_signature`; no secrets is `no_secrets`.
///
/// # Safety
/// `body`, `signature` and the `count` secrets are readable; `matched` is
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_verify(
    body: CallpostStr,
    signature: CallpostStr,
    secrets: *const CallpostStr,
    count: usize,
    matched: *mut bool,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let keys = segment_secrets(list(secrets, count))?;
            let signature = String::from_utf8_lossy(signature.bytes());
            let ok = callpost_core::verify(body.bytes(), &signature, &keys)?;
            put(matched, "matched", ok)
        })
    }
}

/// The three Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
/// `webhook-signature` with one `v1,` entry per secret) for `body` sent
/// with id `id` at `at_ms`, as an HTTP/1.1 header block in `*headers_out`,
/// which the caller frees with `callpost_bytes_free`. Secrets are
/// `whsec_` and base64 (`malformed_secret` otherwise).
///
/// # Safety
/// `secrets` points at `count` readable strings; `id` and `body` are
/// readable; `headers_out` is writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_standard_sign(
    secrets: *const CallpostStr,
    count: usize,
    id: CallpostStr,
    at_ms: i64,
    body: CallpostStr,
    headers_out: *mut CallpostBytes,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let keys = standard_secrets(list(secrets, count))?;
            let id = id.text("id")?;
            let at = Timestamp::from_millis(at_ms).map_err(Error::from)?;
            let headers = standard::sign(id, at, body.bytes(), &keys)?;
            let block = header_block(headers.iter().map(|(n, v)| (*n, v.as_str())));
            put(headers_out, "headers_out", CallpostBytes::from_vec(block))
        })
    }
}

/// X-Signature secrets, keyed once (`empty_secret` for an empty one).
pub(crate) fn segment_secrets(items: &[CallpostStr]) -> Result<Vec<Secret>, Error> {
    items
        .iter()
        // SAFETY: the exported functions' callers promise readable strings.
        .map(|s| Secret::new(unsafe { s.bytes() }).map_err(Error::from))
        .collect()
}

/// Standard Webhooks secrets, decoded and keyed once.
pub(crate) fn standard_secrets(items: &[CallpostStr]) -> Result<Vec<StandardSecret>, Error> {
    items
        .iter()
        .map(|s| {
            // SAFETY: as above.
            let text = unsafe { s.bytes() };
            let text = std::str::from_utf8(text)
                .map_err(|_| Error::from(standard::StandardError::MalformedSecret))?;
            StandardSecret::parse(text).map_err(Error::from)
        })
        .collect()
}
