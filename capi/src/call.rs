//! Calls and JSON values: the spec's rules for a call, and `JSON.stringify`.

use crate::{guard, put, CallpostBytes, CallpostError, CallpostStatus, CallpostStr};
use callpost_core::{Call, Error, Value};

/// Checks a call given as JSON text with Segment's keys (`type`, `userId`,
/// `event`, ...) against the spec's rules: the same check the batcher and
/// webhook requests make, with the same error codes (`missing_event`,
/// `invalid_timestamp`, `integer_out_of_range`, ...).
///
/// Returns `CallpostOk` when the call is valid. Allocates nothing on
/// success; on failure `err` (may be NULL) is filled, and the caller frees
/// it with `callpost_error_free`.
///
/// # Safety
/// `call_json` points at `len` readable bytes; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_call_validate(
    call_json: CallpostStr,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: `err` as the caller promised; `call_json` read inside.
    unsafe {
        guard(err, || {
            Call::from_json_slice(call_json.bytes())?;
            Ok(())
        })
    }
}

/// `JSON.stringify(JSON.parse(json))`, byte for byte as JavaScript writes
/// it: key order, number spelling, escapes. Refuses what JavaScript would
/// read as another value (`integer_out_of_range`, `too_deep`, ...).
///
/// On success `out` receives the text, which the caller frees with
/// `callpost_bytes_free`.
///
/// # Safety
/// `json` points at `len` readable bytes; `out` is writable; `err` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_stringify(
    json: CallpostStr,
    out: *mut CallpostBytes,
    err: *mut CallpostError,
) -> CallpostStatus {
    // SAFETY: the pointers as the caller promised.
    unsafe {
        guard(err, || {
            let value = Value::from_json_slice(json.bytes())?;
            let text = callpost_core::stringify(&value).map_err(Error::from)?;
            put(out, "out", CallpostBytes::from_vec(text.into_bytes()))
        })
    }
}
