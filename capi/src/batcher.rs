//! The batching client (client-library.md) as the core's state machine: the
//! host queues calls, polls requests, sends them, reports outcomes, and
//! sleeps until `callpost_batcher_poll_timeout`. Which batches form, when,
//! how often a batch is retried and when it gives up are all the core's.

use crate::webhooks::{request_out, CallpostRequest};
use crate::{
    guard, misuse, now_of, put, quiet, CallpostBytes, CallpostError, CallpostStatus, CallpostStr,
};
use callpost_core::batcher::{DEFAULT_BATCH_PATH, DEFAULT_ENDPOINT, DEFAULT_LIBRARY_NAME};
use callpost_core::{
    ApiMisuse, Batcher, BatcherConfig, Call, ConfigError, Error, KeyCase, Outcome,
};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The batching client's settings. `callpost_batcher_config_default` fills
/// in the core's defaults; change what you need, then pass it to
/// `callpost_batcher_new`. Numbers are signed so that a host's negative
/// value reaches the core's check (`invalid_config`) instead of wrapping.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CallpostBatcherConfig {
    /// The source's write key, sent as the Basic auth user. Required.
    pub write_key: CallpostStr,
    /// Base URL; batches go to `{endpoint}{batch_path}`.
    pub endpoint: CallpostStr,
    /// Path of the batch upload under `endpoint` (`/v1/batch`).
    pub batch_path: CallpostStr,
    /// Messages queued before a flush; 1 sends every message at once.
    pub flush_at: i64,
    /// Milliseconds since the last flush after which a flush happens.
    pub flush_after_ms: i64,
    /// Messages held before `queue_full`.
    pub max_queue: i64,
    /// Attempts per batch before it fails.
    pub max_attempts: i64,
    /// Milliseconds a batch may spend retrying, from its first attempt.
    pub max_retry_ms: i64,
    /// Milliseconds a request may go unanswered before it is a timeout.
    pub request_timeout_ms: i64,
    /// Batches uploading or waiting to retry at once.
    pub max_in_flight: i64,
    /// Retry backoff: first delay, in milliseconds (full jitter).
    pub backoff_base_ms: i64,
    /// Retry backoff: longest delay, in milliseconds.
    pub backoff_cap_ms: i64,
    /// `context.library.name` of the messages, and the User-Agent's name.
    pub library_name: CallpostStr,
    /// `context.library.version`, and the User-Agent's version.
    pub library_version: CallpostStr,
    /// Seed for backoff jitter: pass OS randomness, so that clients failing
    /// together do not retry at the same instants; tests pass a constant.
    pub jitter_seed: u64,
}

/// A batching client's state, sans I/O. Made by `callpost_batcher_new`,
/// freed by `callpost_batcher_free`. Safe to use from several threads at
/// once: each function holds its lock for the core call only (a call's
/// JSON is parsed before the lock is taken).
#[derive(Debug)]
pub struct CallpostBatcher {
    inner: Mutex<Batcher>,
}

impl CallpostBatcher {
    fn lock(&self) -> MutexGuard<'_, Batcher> {
        // A panic inside the core is already reported as CallpostInternal;
        // the state it left is what the next call sees, as in Python.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A batch upload to send: POST `request` and report its outcome with
/// `callpost_batcher_handle_response(batch_id, ...)`. Freed with
/// `callpost_batch_request_free`.
#[repr(C)]
#[derive(Debug)]
pub struct CallpostBatchRequest {
    /// Pass back to `callpost_batcher_handle_response`.
    pub batch_id: u64,
    /// Attempt number, 1-based.
    pub attempt: u32,
    /// Messages in the batch.
    pub message_count: usize,
    /// When to give up waiting and report a timeout (ms since the epoch).
    pub deadline_ms: i64,
    /// The HTTP request: its headers hold the write key (Basic auth).
    pub request: CallpostRequest,
}

/// Fills `config` with the core's defaults: the write key empty, the
/// strings static (never freed), the numbers those of client-library.md
/// and the core (flush at 20 messages or 5 s, ...).
///
/// # Safety
/// `config` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_config_default(config: *mut CallpostBatcherConfig) {
    quiet((), || {
        let d = BatcherConfig::new("");
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let value = CallpostBatcherConfig {
            write_key: CallpostStr::EMPTY,
            endpoint: CallpostStr::from_static(DEFAULT_ENDPOINT),
            batch_path: CallpostStr::from_static(DEFAULT_BATCH_PATH),
            flush_at: n(d.flush_at as u64),
            flush_after_ms: n(d.flush_after_ms),
            max_queue: n(d.max_queue as u64),
            max_attempts: n(u64::from(d.max_attempts)),
            max_retry_ms: n(d.max_retry_ms),
            request_timeout_ms: n(d.request_timeout_ms),
            max_in_flight: n(d.max_in_flight as u64),
            backoff_base_ms: n(d.backoff.base_ms),
            backoff_cap_ms: n(d.backoff.cap_ms),
            library_name: CallpostStr::from_static(DEFAULT_LIBRARY_NAME),
            library_version: CallpostStr::from_static(callpost_core::VERSION),
            jitter_seed: 0,
        };
        // SAFETY: the caller promises NULL or writable.
        if let Some(slot) = unsafe { config.as_mut() } {
            *slot = value;
        }
    });
}

/// A host number as the core's: negative is out of range, as the core
/// reports a zero where it needs at least 1.
fn count<T: TryFrom<i64>>(v: i64, name: &'static str) -> Result<T, Error> {
    T::try_from(v).map_err(|_| ConfigError::OutOfRange(name).into())
}

/// Makes a batcher whose flush interval starts at `now_ms`. The core checks
/// the settings: `empty_write_key`, `invalid_endpoint` (not an absolute
/// http(s) URL without credentials, query or fragment), `invalid_config`
/// (a number out of range).
///
/// On success `*out` is the batcher, which the caller frees with
/// `callpost_batcher_free`. The config's strings are copied.
///
/// # Safety
/// `config` points at a valid config whose strings are readable; `out` is
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_new(
    config: *const CallpostBatcherConfig,
    now_ms: i64,
    out: *mut *mut CallpostBatcher,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let c = config
                .as_ref()
                .ok_or_else(|| misuse("config must not be NULL"))?;
            let mut b = BatcherConfig::new(c.write_key.text("write_key")?);
            b.endpoint = c.endpoint.text("endpoint")?.to_owned();
            b.batch_path = c.batch_path.text("batch_path")?.to_owned();
            b.flush_at = count(c.flush_at, "flush_at")?;
            b.flush_after_ms = count(c.flush_after_ms, "flush_after_ms")?;
            b.max_queue = count(c.max_queue, "max_queue")?;
            b.max_attempts = count(c.max_attempts, "max_attempts")?;
            b.max_retry_ms = count(c.max_retry_ms, "max_retry_ms")?;
            b.request_timeout_ms = count(c.request_timeout_ms, "request_timeout_ms")?;
            b.max_in_flight = count(c.max_in_flight, "max_in_flight")?;
            b.backoff.base_ms = count(c.backoff_base_ms, "backoff_base_ms")?;
            b.backoff.cap_ms = count(c.backoff_cap_ms, "backoff_cap_ms")?;
            b.library_name = c.library_name.text("library_name")?.to_owned();
            b.library_version = c.library_version.text("library_version")?.to_owned();
            b.jitter_seed = c.jitter_seed;
            let batcher = Batcher::new(b, now_of(now_ms))?;
            let handle = Box::new(CallpostBatcher {
                inner: Mutex::new(batcher),
            });
            put(out, "out", Box::into_raw(handle))
        })
    }
}

/// Frees a batcher. Whatever it still held is dropped without events: call
/// `callpost_batcher_shutdown` and drain `callpost_batcher_poll_event`
/// first to report it. NULL is ignored.
///
/// # Safety
/// `batcher` is NULL or came from `callpost_batcher_new`, is not used by
/// another thread, and is not used again.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_free(batcher: *mut CallpostBatcher) {
    if !batcher.is_null() {
        // SAFETY: made by Box::into_raw in callpost_batcher_new, and the
        // caller gives up its only pointer.
        quiet((), || drop(unsafe { Box::from_raw(batcher) }));
    }
}

/// # Safety
/// `batcher` is NULL or a live batcher.
unsafe fn handle<'a>(batcher: *const CallpostBatcher) -> Result<&'a CallpostBatcher, Error> {
    // SAFETY: the caller promises NULL or a live batcher.
    unsafe { batcher.as_ref() }.ok_or_else(|| misuse("batcher must not be NULL"))
}

/// Queues a call given as JSON text with Segment's keys. The core checks
/// it (the spec's rules and the 32,000-byte message limit: `missing_event`,
/// `message_too_large`, ...) and completes it into a message: `messageId`
/// (a UUID v4 from `random`, unless the call has one), `timestamp` (`now_ms`
/// unless the call has one) and `context.library`. On error nothing is
/// queued (`queue_full`, `closed`, or the call's own error).
///
/// `random` points at 16 bytes from a CSPRNG: the core has no entropy.
/// `id_out` (may be NULL) receives the messageId when it fits in `id_cap`
/// bytes (a generated one is 36); `*id_len` (may be NULL) is its length
/// either way. `*wake` (may be NULL) is set to whether the host's sender
/// must wake now: the call moved `callpost_batcher_poll_timeout` earlier
/// (the first queued message starts the flush timer, a full batch is due
/// at once). Nothing is allocated on success.
///
/// # Safety
/// `batcher` is live; `call_json` is readable; `random` points at 16
/// readable bytes; `id_out` is NULL or has `id_cap` writable bytes;
/// `id_len`, `wake` and `err` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_enqueue(
    batcher: *const CallpostBatcher,
    call_json: CallpostStr,
    now_ms: i64,
    random: *const u8,
    id_out: *mut u8,
    id_cap: usize,
    id_len: *mut usize,
    wake: *mut bool,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let b = handle(batcher)?;
            if random.is_null() {
                return Err(ApiMisuse::RandomLength(16).into());
            }
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(std::slice::from_raw_parts(random, 16));
            // Parsed before the lock: other threads queue meanwhile.
            let call = Call::from_json_slice(call_json.bytes())?;
            let (id, woke) = {
                let mut inner = b.lock();
                let id = inner.handle_call(now_of(now_ms), call, bytes)?;
                (id, inner.poll_wake())
            };
            if !id_out.is_null() && id.len() <= id_cap {
                std::ptr::copy_nonoverlapping(id.as_ptr(), id_out, id.len());
            }
            if let Some(slot) = id_len.as_mut() {
                *slot = id.len();
            }
            if let Some(slot) = wake.as_mut() {
                *slot = woke;
            }
            Ok(())
        })
    }
}

/// Makes everything queued due now, and brings batches waiting to retry
/// forward to `now_ms`. `*wake` (may be NULL) as for
/// `callpost_batcher_enqueue`. A NULL batcher is ignored.
///
/// # Safety
/// `batcher` is NULL or live; `wake` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_flush(
    batcher: *const CallpostBatcher,
    now_ms: i64,
    wake: *mut bool,
) {
    quiet((), || {
        // SAFETY: the pointers as the caller promised.
        if let Ok(b) = unsafe { handle(batcher) } {
            let woke = {
                let mut inner = b.lock();
                inner.flush(now_of(now_ms));
                inner.poll_wake()
            };
            // SAFETY: as above.
            if let Some(slot) = unsafe { wake.as_mut() } {
                *slot = woke;
            }
        }
    });
}

/// Gives up: every message still queued or in a batch is reported by a
/// `failed` event (code `shutdown`), and later calls are refused
/// (`closed`). Wait for in-flight responses first, or their batches are
/// reported failed even if the server accepts them.
///
/// # Safety
/// `batcher` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_shutdown(batcher: *const CallpostBatcher) {
    quiet((), || {
        // SAFETY: as the caller promised.
        if let Ok(b) = unsafe { handle(batcher) } {
            b.lock().shutdown();
        }
    });
}

/// The next batch to upload now: returns true and fills `*out`, which the
/// caller frees with `callpost_batch_request_free`; or returns false.
/// Call it until it returns false after every input.
///
/// # Safety
/// `batcher` is NULL or live; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_poll_request(
    batcher: *const CallpostBatcher,
    now_ms: i64,
    out: *mut CallpostBatchRequest,
) -> bool {
    quiet(false, || {
        // SAFETY: as the caller promised.
        let (Ok(b), Some(slot)) = (unsafe { handle(batcher) }, unsafe { out.as_mut() }) else {
            return false;
        };
        let Some(r) = b.lock().poll_request(now_of(now_ms)) else {
            return false;
        };
        *slot = CallpostBatchRequest {
            batch_id: r.batch_id,
            attempt: r.attempt,
            message_count: r.message_count,
            deadline_ms: r.deadline.as_millis(),
            request: request_out(r.request),
        };
        true
    })
}

/// Frees a batch request's buffers; afterwards it is empty.
///
/// # Safety
/// `request` is NULL or was filled by `callpost_batcher_poll_request` and
/// is not freed by anything else.
#[no_mangle]
pub unsafe extern "C" fn callpost_batch_request_free(request: *mut CallpostBatchRequest) {
    // SAFETY: as the caller promised.
    if let Some(r) = unsafe { request.as_mut() } {
        // SAFETY: its request was filled by callpost.
        unsafe { crate::webhooks::callpost_request_free(&mut r.request) };
    }
}

/// Reports the outcome of the upload of `batch_id`: an HTTP `status` (0
/// when there was none) with the raw `Retry-After` header (`retry_after`,
/// `ptr` NULL when absent); or, with status 0, an `error` kind `timeout`,
/// `connection` or `tls` and a `message` for logs. Any other combination
/// is `invalid_argument`. What the outcome means (retry, give up) is the
/// core's; unknown or stale batch ids are ignored.
///
/// # Safety
/// `batcher` is live; the strings are readable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_handle_response(
    batcher: *const CallpostBatcher,
    now_ms: i64,
    batch_id: u64,
    status: u16,
    retry_after: CallpostStr,
    error: CallpostStr,
    message: CallpostStr,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let b = handle(batcher)?;
            let retry_after = (!retry_after.ptr.is_null())
                .then(|| String::from_utf8_lossy(retry_after.bytes()).into_owned());
            let kind = error.text("error")?;
            let message = String::from_utf8_lossy(message.bytes());
            let outcome = Outcome::from_report(
                (status != 0).then_some(status),
                retry_after,
                (!kind.is_empty()).then_some(kind),
                &message,
            )?;
            b.lock().handle_response(now_of(now_ms), batch_id, outcome);
            Ok(())
        })
    }
}

/// Call when `now_ms` reaches `callpost_batcher_poll_timeout`: an upload
/// unanswered past its deadline counts as a timeout.
///
/// # Safety
/// `batcher` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_handle_timeout(
    batcher: *const CallpostBatcher,
    now_ms: i64,
) {
    quiet((), || {
        // SAFETY: as the caller promised.
        if let Ok(b) = unsafe { handle(batcher) } {
            b.lock().handle_timeout(now_of(now_ms));
        }
    });
}

/// When to call `callpost_batcher_handle_timeout` next: returns true and
/// writes the time (ms since the epoch; it may be in the past: wake now),
/// or returns false when nothing waits on time.
///
/// # Safety
/// `batcher` is NULL or live; `at_ms` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_poll_timeout(
    batcher: *const CallpostBatcher,
    at_ms: *mut i64,
) -> bool {
    quiet(false, || {
        // SAFETY: as the caller promised.
        let Ok(b) = (unsafe { handle(batcher) }) else {
            return false;
        };
        let Some(at) = b.lock().poll_timeout() else {
            return false;
        };
        // SAFETY: as the caller promised.
        if let Some(slot) = unsafe { at_ms.as_mut() } {
            *slot = at.as_millis();
        }
        true
    })
}

/// The next event as JSON text: returns true and fills `*json`, which the
/// caller frees with `callpost_bytes_free`; or returns false. The shapes
/// (the core's, the same in Python and JavaScript):
///
/// * `{"kind":"delivered","batch_id":n,"message_ids":[...]}`
/// * `{"kind":"retrying","batch_id":n,"attempt":n,"retry_at_ms":n,"reason":"..."}`
/// * `{"kind":"failed","batch_id":n|null,"code":"...","reason":"...",
///   "messages":[{"message_id":"...","json":"..."}]}`: these messages
///   will not be delivered; hand them to the user.
///
/// # Safety
/// `batcher` is NULL or live; `json` is writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_poll_event(
    batcher: *const CallpostBatcher,
    json: *mut CallpostBytes,
) -> bool {
    quiet(false, || {
        // SAFETY: as the caller promised.
        let (Ok(b), Some(slot)) = (unsafe { handle(batcher) }, unsafe { json.as_mut() }) else {
            return false;
        };
        // The lock is let go before the text is written.
        let Some(event) = b.lock().poll_event() else {
            return false;
        };
        *slot = CallpostBytes::from_vec(event.to_json(KeyCase::Snake).into_bytes());
        true
    })
}

/// Messages queued and not yet in a batch (0 for NULL).
///
/// # Safety
/// `batcher` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_queued(batcher: *const CallpostBatcher) -> usize {
    quiet(0, || {
        // SAFETY: as the caller promised.
        let b = unsafe { handle(batcher) };
        b.map_or(0, |b| b.lock().queued())
    })
}

/// Messages in batches being uploaded or waiting to retry (0 for NULL).
///
/// # Safety
/// `batcher` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_in_batches(batcher: *const CallpostBatcher) -> usize {
    quiet(0, || {
        // SAFETY: as the caller promised.
        let b = unsafe { handle(batcher) };
        b.map_or(0, |b| b.lock().in_batches())
    })
}

/// True when nothing is queued, uploading or waiting to retry (and for
/// NULL).
///
/// # Safety
/// `batcher` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callpost_batcher_idle(batcher: *const CallpostBatcher) -> bool {
    quiet(true, || {
        // SAFETY: as the caller promised.
        let b = unsafe { handle(batcher) };
        b.map_or(true, |b| b.lock().is_idle())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn zeroed_error() -> CallpostError {
        CallpostError {
            code: CallpostStr::EMPTY,
            class_name: CallpostStr::EMPTY,
            message: CallpostBytes::EMPTY,
        }
    }

    #[test]
    fn a_call_goes_out_in_a_batch_and_comes_back_delivered() {
        let mut c = std::mem::MaybeUninit::<CallpostBatcherConfig>::uninit();
        // SAFETY: every pointer below is valid for the call it is passed to.
        unsafe {
            callpost_batcher_config_default(c.as_mut_ptr());
            let mut c = c.assume_init();
            c.write_key = CallpostStr::from_static("wk");
            c.flush_at = 1;
            let mut b = std::ptr::null_mut();
            let mut err = zeroed_error();
            let status = callpost_batcher_new(&c, 0, &mut b, &mut err);
            assert_eq!(status, CallpostStatus::CallpostOk);
            let call = CallpostStr::from_static(r#"{"type":"track","userId":"u","event":"e"}"#);
            let mut id = [0u8; 64];
            let (mut len, mut wake) = (0usize, false);
            let random = [7u8; 16];
            let status = callpost_batcher_enqueue(
                b,
                call,
                0,
                random.as_ptr(),
                id.as_mut_ptr(),
                id.len(),
                &mut len,
                &mut wake,
                &mut err,
            );
            assert_eq!(status, CallpostStatus::CallpostOk);
            assert_eq!(len, 36);
            assert!(wake);
            let mut req = std::mem::MaybeUninit::<CallpostBatchRequest>::uninit();
            assert!(callpost_batcher_poll_request(b, 0, req.as_mut_ptr()));
            let mut req = req.assume_init();
            assert_eq!(req.message_count, 1);
            let status = callpost_batcher_handle_response(
                b,
                0,
                req.batch_id,
                200,
                CallpostStr::EMPTY,
                CallpostStr::EMPTY,
                CallpostStr::EMPTY,
                &mut err,
            );
            assert_eq!(status, CallpostStatus::CallpostOk);
            callpost_batch_request_free(&mut req);
            let mut json = CallpostBytes::EMPTY;
            assert!(callpost_batcher_poll_event(b, &mut json));
            let text = std::slice::from_raw_parts(json.ptr, json.len);
            assert!(text.starts_with(br#"{"kind":"delivered""#));
            crate::callpost_bytes_free(&mut json);
            // A bad outcome report is the API's misuse.
            let status = callpost_batcher_handle_response(
                b,
                0,
                1,
                0,
                CallpostStr::EMPTY,
                CallpostStr::from_static("nope"),
                CallpostStr::EMPTY,
                &mut err,
            );
            assert_eq!(status, CallpostStatus::CallpostFailed);
            assert_eq!(err.code.bytes(), b"invalid_argument");
            crate::callpost_error_free(&mut err);
            // A negative number reaches the core's check.
            c.flush_at = -1;
            let mut other = std::ptr::null_mut();
            let status = callpost_batcher_new(&c, 0, &mut other, &mut err);
            assert_eq!(status, CallpostStatus::CallpostFailed);
            assert_eq!(err.code.bytes(), b"invalid_config");
            crate::callpost_error_free(&mut err);
            callpost_batcher_free(b);
        }
    }
}
