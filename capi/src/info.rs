//! What a binding reads once: the version, the core's defaults and limits,
//! and its registry of error codes, so no binding restates them.

use crate::{quiet, CallpostStr};
use callpost_core::{batcher, Code, DEFAULTS};

/// callpost's version (the workspace's), static.
#[no_mangle]
pub extern "C" fn callpost_version() -> CallpostStr {
    CallpostStr::from_static(callpost_core::VERSION)
}

/// The `i`-th of the core's numeric defaults and limits (`flush_at`,
/// `max_message_bytes`, `seen_capacity`, ...; durations in milliseconds):
/// writes its name (static) and value and returns true, or returns false
/// when `i` is past the last one. Walk `i` from 0 to read them all.
///
/// # Safety
/// `name` and `value` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_default_at(
    i: usize,
    name: *mut CallpostStr,
    value: *mut u64,
) -> bool {
    quiet(false, || {
        let Some((n, v)) = DEFAULTS.get(i) else {
            return false;
        };
        // SAFETY: the caller promises NULL or writable pointers.
        unsafe {
            if let Some(slot) = name.as_mut() {
                *slot = CallpostStr::from_static(n);
            }
            if let Some(slot) = value.as_mut() {
                *slot = *v;
            }
        }
        true
    })
}

/// The batching client's default endpoint (Segment's Tracking API base
/// URL), static.
#[no_mangle]
pub extern "C" fn callpost_default_endpoint() -> CallpostStr {
    CallpostStr::from_static(batcher::DEFAULT_ENDPOINT)
}

/// The `i`-th code of the core's error registry: writes the code and the
/// class it is raised as (both static) and returns true, or returns false
/// when `i` is past the last one.
///
/// # Safety
/// `code` and `class_name` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callpost_code_at(
    i: usize,
    code: *mut CallpostStr,
    class_name: *mut CallpostStr,
) -> bool {
    quiet(false, || {
        let Some(c) = Code::ALL.get(i) else {
            return false;
        };
        // SAFETY: the caller promises NULL or writable pointers.
        unsafe {
            if let Some(slot) = code.as_mut() {
                *slot = CallpostStr::from_static(c.as_str());
            }
            if let Some(slot) = class_name.as_mut() {
                *slot = CallpostStr::from_static(c.class().name());
            }
        }
        true
    })
}

/// The HTTP status a receiver answers a refused webhook with, for the
/// code of the error that refused it: 401 when it did not verify, 400
/// otherwise (including a code the registry does not know).
///
/// # Safety
/// `code` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn callpost_refusal_status(code: CallpostStr) -> u16 {
    quiet(400, || {
        // SAFETY: the caller promises readable bytes.
        let text = unsafe { code.bytes() };
        std::str::from_utf8(text)
            .ok()
            .and_then(Code::parse)
            .map_or(400, callpost_core::receive::refusal_status)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_the_cores() {
        let mut name = CallpostStr::EMPTY;
        let mut value = 0u64;
        let mut n = 0;
        // SAFETY: valid out-pointers; the strings point at static data.
        while unsafe { callpost_default_at(n, &mut name, &mut value) } {
            // SAFETY: static text.
            let name = unsafe { name.bytes() };
            assert_eq!((name, value), (DEFAULTS[n].0.as_bytes(), DEFAULTS[n].1));
            n += 1;
        }
        assert_eq!(n, DEFAULTS.len());
        let (mut code, mut class) = (CallpostStr::EMPTY, CallpostStr::EMPTY);
        n = 0;
        // SAFETY: as above.
        while unsafe { callpost_code_at(n, &mut code, &mut class) } {
            // SAFETY: static text.
            let code = unsafe { code.bytes() };
            assert_eq!(code, Code::ALL[n].as_str().as_bytes());
            n += 1;
        }
        assert_eq!(n, Code::ALL.len());
        // SAFETY: static text.
        let status =
            |c: &'static str| unsafe { callpost_refusal_status(CallpostStr::from_static(c)) };
        assert_eq!(status("signature_mismatch"), 401);
        assert_eq!(status("invalid_json"), 400);
        assert_eq!(status("no such code"), 400);
    }
}
