//! The receiving side: a received webhook verified by the core's one check
//! (`receive_any`: which header, which bytes, which scheme, the timestamp
//! window), its calls handed back only once verified.

use crate::webhooks::{segment_secrets, standard_secrets};
use crate::{
    guard, header_pairs, list, misuse, now_of, put, quiet, CallpostBytes, CallpostError,
    CallpostStatus, CallpostStr,
};
use callpost_core::standard::{self, StandardSecret, DEFAULT_TOLERANCE_MS};
use callpost_core::{
    json::write_value, receive_any, Error, Keys, ReceiveOptions, Secret, SignatureError,
};

/// What a receiver accepts beyond the default. Fill it with
/// `callpost_receiver_options_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CallpostReceiverOptions {
    /// Accept a batch whose `X-Signature` covers only its first event
    /// (Segment's Actions destination without "Use X-Segment-Signature
    /// Header"); its other events are then unauthenticated. Default false.
    pub allow_first_event_signature: bool,
    /// How far a Standard Webhooks `webhook-timestamp` may be from the
    /// receiver's clock, either way, in milliseconds (default: the
    /// specification's 5 minutes).
    pub tolerance_ms: u64,
}

/// The secrets and options of one endpoint's receiver, keyed once. Made by
/// `callpost_receiver_new`, freed by `callpost_receiver_free`; read-only,
/// so safe to use from several threads at once.
#[derive(Debug)]
pub struct CallpostReceiver {
    segment: Vec<Secret>,
    standard: Vec<StandardSecret>,
    options: ReceiveOptions,
}

/// One verified call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CallpostReceivedCall {
    /// The call as JSON text, in `JSON.stringify` form.
    pub json: CallpostStr,
    /// Its id for duplicate detection: its `messageId`, else the request's
    /// (`Idempotency-Key` or the verified `webhook-id`, `<id>.<index>` for
    /// a batch's element); `ptr` is NULL when it has none.
    pub id: CallpostStr,
}

/// The storage behind a `CallpostReceived`; freed with it.
#[derive(Debug)]
pub struct CallpostReceivedOwner {
    calls: Vec<CallpostReceivedCall>,
    // What `calls` points into; never changed after `calls` is made.
    _text: Vec<u8>,
    _ids: Vec<String>,
}

/// A verified webhook. Every string in it (but the static `header` and
/// `coverage`) lives until `callpost_received_free`.
#[repr(C)]
#[derive(Debug)]
pub struct CallpostReceived {
    /// The header whose signature was accepted: `X-Signature`,
    /// `X-Segment-Signature` or `webhook-signature` (static).
    pub header: CallpostStr,
    /// What it covers: `body`, or `first_event` (opted in) (static).
    pub coverage: CallpostStr,
    /// Whether the body is a batch (a JSON array of calls).
    pub batch: bool,
    /// Whether `timestamp` is set (the Standard scheme).
    pub has_timestamp: bool,
    /// The verified `webhook-timestamp`, seconds since the epoch.
    pub timestamp: i64,
    /// The calls, in body order.
    pub calls: *const CallpostReceivedCall,
    /// How many.
    pub count: usize,
    /// Owns what the strings point at.
    pub owner: *mut CallpostReceivedOwner,
}

/// Fills `options` with the defaults.
///
/// # Safety
/// `options` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_receiver_options_default(options: *mut CallpostReceiverOptions) {
    quiet((), || {
        let d = ReceiveOptions::default();
        // SAFETY: as the caller promised.
        if let Some(slot) = unsafe { options.as_mut() } {
            *slot = CallpostReceiverOptions {
                allow_first_event_signature: d.allow_first_event_signature,
                tolerance_ms: d.tolerance_ms,
            };
        }
    });
}

/// Makes a receiver from `X-Signature` secrets (any bytes but empty;
/// several while rotating) and Standard Webhooks `whsec_` secrets: give
/// either list or both (`no_secrets` for neither). With Standard
/// secrets only, a request must carry `webhook-signature`; with both, a
/// request carrying it is held to it, one without it to `X-Signature`.
/// `options` may be NULL (the defaults).
///
/// On success `*out` is the receiver, which the caller frees with
/// `callpost_receiver_free`. The secrets are keyed and not kept as text.
///
/// # Safety
/// The lists point at `count` readable strings each (or are NULL with
/// count 0); `options` is NULL or readable; `out` is writable; `err` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_receiver_new(
    secrets: *const CallpostStr,
    secret_count: usize,
    standard: *const CallpostStr,
    standard_count: usize,
    options: *const CallpostReceiverOptions,
    out: *mut *mut CallpostReceiver,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let segment = segment_secrets(list(secrets, secret_count))?;
            let standard = standard_secrets(list(standard, standard_count))?;
            // The core's refusal, at once rather than at every request.
            if segment.is_empty() && standard.is_empty() {
                return Err(SignatureError::NoSecrets.into());
            }
            let mut opts = ReceiveOptions::default();
            if let Some(o) = options.as_ref() {
                opts.allow_first_event_signature = o.allow_first_event_signature;
                opts.tolerance_ms = o.tolerance_ms;
            }
            let receiver = CallpostReceiver {
                segment,
                standard,
                options: opts,
            };
            put(out, "out", Box::into_raw(Box::new(receiver)))
        })
    }
}

/// Frees a receiver. NULL is ignored.
///
/// # Safety
/// `receiver` is NULL or came from `callpost_receiver_new` and is not used
/// again.
#[no_mangle]
pub unsafe extern "C" fn callpost_receiver_free(receiver: *mut CallpostReceiver) {
    if !receiver.is_null() {
        // SAFETY: made by Box::into_raw in callpost_receiver_new; the caller
        // gives up its only pointer.
        quiet((), || drop(unsafe { Box::from_raw(receiver) }));
    }
}

/// Verifies a received webhook: `body` is the raw request body exactly as
/// received, `headers` the request's headers as an HTTP/1.1 header block,
/// `now_ms` the receiver's clock (for the Standard timestamp window).
/// Refusals are `SignatureError`s (`missing_signature`,
/// `malformed_signature`, `signature_mismatch`, `first_event_signature`,
/// `timestamp_too_old`, `timestamp_too_new`) or, for a verified body that
/// is not JSON, a `JSONValueError` (`invalid_json`, ...).
///
/// On success `*out` holds the verified calls; the caller frees it with
/// `callpost_received_free`.
///
/// # Safety
/// `receiver` is live; `body` and `headers` are readable; `out` is
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_receiver_verify(
    receiver: *const CallpostReceiver,
    body: CallpostStr,
    headers: CallpostStr,
    now_ms: i64,
    out: *mut CallpostReceived,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let r = receiver
                .as_ref()
                .ok_or_else(|| misuse("receiver must not be NULL"))?;
            let pairs = header_pairs(headers.bytes())?;
            let keys = Keys {
                segment: &r.segment,
                standard: &r.standard,
            };
            let received = receive_any(
                body.bytes(),
                pairs.iter().map(|(n, v)| (n.as_ref(), v.as_ref())),
                keys,
                now_of(now_ms),
                r.options,
            )
            .map_err(Error::from)?;
            // Each call in JSON.stringify form, one after another; the
            // views are made once the text stops growing.
            let mut text = Vec::with_capacity(body.len);
            let mut ends = Vec::with_capacity(received.calls().len());
            for call in received.calls() {
                write_value(call, &mut text)?;
                ends.push(text.len());
            }
            let ids: Vec<Option<String>> = received.message_ids();
            let mut start = 0;
            let calls = ends
                .iter()
                .zip(&ids)
                .map(|(&end, id)| {
                    let json = CallpostStr::of(&text[start..end]);
                    start = end;
                    let id = id.as_deref().map_or(CallpostStr::EMPTY, |s| {
                        // An id is never empty (the core filters those),
                        // so a NULL ptr means "none" unambiguously.
                        CallpostStr::of(s.as_bytes())
                    });
                    CallpostReceivedCall { json, id }
                })
                .collect::<Vec<_>>();
            let owner = Box::new(CallpostReceivedOwner {
                calls,
                _text: text,
                _ids: ids.into_iter().flatten().collect(),
            });
            let value = CallpostReceived {
                header: CallpostStr::from_static(received.header),
                coverage: CallpostStr::from_static(received.coverage.as_str()),
                batch: received.is_batch(),
                has_timestamp: received.timestamp.is_some(),
                timestamp: received.timestamp.unwrap_or(0),
                calls: owner.calls.as_ptr(),
                count: owner.calls.len(),
                owner: Box::into_raw(owner),
            };
            put(out, "out", value)
        })
    }
}

/// Frees a verified webhook's storage; afterwards it is empty.
///
/// # Safety
/// `received` is NULL or was filled by `callpost_receiver_verify` and is
/// not freed by anything else.
#[no_mangle]
pub unsafe extern "C" fn callpost_received_free(received: *mut CallpostReceived) {
    // SAFETY: as the caller promised.
    if let Some(r) = unsafe { received.as_mut() } {
        let owner = std::mem::replace(&mut r.owner, std::ptr::null_mut());
        r.calls = std::ptr::null();
        r.count = 0;
        if !owner.is_null() {
            // SAFETY: made by Box::into_raw in callpost_receiver_verify, and
            // swapped out above, so this is its only owner.
            quiet((), || drop(unsafe { Box::from_raw(owner) }));
        }
    }
}

/// Checks a request's Standard Webhooks headers alone (the timestamp
/// within `tolerance_ms` of `now_ms`, then a `v1` signature under one of
/// the `whsec_` secrets), without reading the body as JSON. On success
/// `*id_out` is the verified `webhook-id` (the caller frees it with
/// `callpost_bytes_free`) and `*timestamp_out` the verified
/// `webhook-timestamp` in seconds.
///
/// # Safety
/// `secrets` points at `count` readable strings; `body` and `headers` are
/// readable; `id_out` and `timestamp_out` are writable; `err` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_standard_verify(
    secrets: *const CallpostStr,
    count: usize,
    body: CallpostStr,
    headers: CallpostStr,
    now_ms: i64,
    tolerance_ms: u64,
    id_out: *mut CallpostBytes,
    timestamp_out: *mut i64,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let keys = standard_secrets(list(secrets, count))?;
            let pairs = header_pairs(headers.bytes())?;
            let verified = standard::verify(
                body.bytes(),
                pairs.iter().map(|(n, v)| (n.as_ref(), v.as_ref())),
                &keys,
                now_of(now_ms),
                tolerance_ms,
            )?;
            put(timestamp_out, "timestamp_out", verified.timestamp)?;
            put(
                id_out,
                "id_out",
                CallpostBytes::from_vec(verified.id.into_bytes()),
            )
        })
    }
}

/// The default Standard Webhooks tolerance in milliseconds (5 minutes, the
/// specification's), the default of `CallpostReceiverOptions`.
#[no_mangle]
pub extern "C" fn callpost_standard_tolerance_ms() -> u64 {
    DEFAULT_TOLERANCE_MS
}
