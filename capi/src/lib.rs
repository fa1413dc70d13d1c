//! callpost's core behind a C ABI, for languages with an FFI: Go through cgo
//! today, Ruby, PHP, Java's FFM or .NET later. Like the Python and wasm
//! bindings it is a thin layer: every rule (validation, limits, bodies,
//! signatures, batching, retries) is the core's, and this crate only moves
//! bytes and errors across the boundary.
//!
//! The conventions, stated once here and on every function of the header
//! (`include/callpost.h`, generated from this source by cbindgen):
//!
//! * **Strings** go in as [`CallpostStr`] (a pointer and a length, UTF-8
//!   unless said otherwise, borrowed for the call only) and come out as
//!   [`CallpostStr`] pointing at static data, or as [`CallpostBytes`] that
//!   the caller owns and frees with [`callpost_bytes_free`] (or the free
//!   function of the struct holding them).
//! * **Errors**: a fallible function returns a [`CallpostStatus`] and fills
//!   the caller's [`CallpostError`] (which may be NULL) on failure, with
//!   the core's stable code and class (static) and a message the caller
//!   frees with [`callpost_error_free`]. Nothing is allocated on success.
//! * **Panics** never cross the boundary: every exported function catches
//!   them and returns [`CallpostStatus::CallpostInternal`], which is a bug
//!   in callpost to report.
//! * **Handles** ([`CallpostBatcher`], [`CallpostWebhooks`],
//!   [`CallpostReceiver`]) are made by a `_new` function and freed with
//!   their `_free`; all three are safe to use from several threads at once.
//! * **Headers** go both ways as an HTTP/1.1 header block: `Name: value`
//!   lines ending in CRLF (LF alone is accepted on input), in order.
//! * **Time** is milliseconds since the Unix epoch, passed in by the host:
//!   the core has no clock. Nor has it randomness: message ids take 16
//!   random bytes from the caller.

#![allow(unsafe_code)] // a C ABI; each unsafe block states why it is sound

pub mod batcher;
pub mod call;
pub mod info;
pub mod receive;
pub mod webhooks;

use callpost_core::{ApiMisuse, Error};
use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// How a fallible function ended.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallpostStatus {
    /// It succeeded; the error was not touched.
    CallpostOk = 0,
    /// It failed with one of the core's errors: the error holds its code,
    /// class and message.
    CallpostFailed = 1,
    /// callpost panicked (a bug): the error's code and class are empty and
    /// its message says what happened. The handle it was called on may be
    /// left in any state the core's own methods can leave it in.
    CallpostInternal = 2,
}

/// Bytes borrowed from whoever made them: `ptr` may be NULL only when `len`
/// is 0. Inputs are borrowed for the duration of the call; outputs that are
/// a `CallpostStr` point at static data or into the struct that holds them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CallpostStr {
    /// The first byte.
    pub ptr: *const u8,
    /// How many bytes.
    pub len: usize,
}

/// Bytes callpost allocated for the caller, who frees them with
/// `callpost_bytes_free` (or with the free function of the struct that
/// holds them). `ptr` is NULL when `len` is 0.
#[repr(C)]
#[derive(Debug)]
pub struct CallpostBytes {
    /// The first byte, or NULL.
    pub ptr: *mut u8,
    /// How many bytes.
    pub len: usize,
}

/// A failure, as the core reports it.
#[repr(C)]
#[derive(Debug)]
pub struct CallpostError {
    /// The stable code of the core's registry (`signature_mismatch`,
    /// `missing_event`, ...): static, never freed. Empty for
    /// `CallpostInternal`.
    pub code: CallpostStr,
    /// The class the registry names for the code (`SignatureError`,
    /// `InvalidCallError`, ...): static, never freed. Empty for
    /// `CallpostInternal`.
    pub class_name: CallpostStr,
    /// What went wrong and how to fix it, UTF-8. Never holds a secret.
    /// The caller frees it with `callpost_error_free`.
    pub message: CallpostBytes,
}

impl CallpostStr {
    const EMPTY: Self = Self {
        ptr: std::ptr::null(),
        len: 0,
    };

    /// A view of static text.
    fn from_static(s: &'static str) -> Self {
        Self {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// A view of `s`, valid while `s` is.
    fn of(s: &[u8]) -> Self {
        Self {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The bytes.
    ///
    /// # Safety
    /// `ptr` points at `len` readable bytes that outlive `'a` (or `len` is 0).
    unsafe fn bytes<'a>(self) -> &'a [u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the caller promises `len` readable bytes at `ptr`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The text, or `invalid_argument` naming `what` when it is not UTF-8.
    ///
    /// # Safety
    /// As for [`CallpostStr::bytes`].
    unsafe fn text<'a>(self, what: &str) -> Result<&'a str, Error> {
        // SAFETY: forwarded to the caller.
        let bytes = unsafe { self.bytes() };
        std::str::from_utf8(bytes).map_err(|_| misuse(format!("{what} must be UTF-8")))
    }
}

impl CallpostBytes {
    const EMPTY: Self = Self {
        ptr: std::ptr::null_mut(),
        len: 0,
    };

    /// Hands `bytes` to the caller.
    fn from_vec(bytes: Vec<u8>) -> Self {
        if bytes.is_empty() {
            return Self::EMPTY;
        }
        let boxed = bytes.into_boxed_slice();
        let len = boxed.len();
        Self {
            ptr: Box::into_raw(boxed).cast::<u8>(),
            len,
        }
    }

    /// Takes the bytes back and frees them; leaves `self` empty.
    fn release(&mut self) {
        let taken = std::mem::replace(self, Self::EMPTY);
        if !taken.ptr.is_null() {
            let slice = std::ptr::slice_from_raw_parts_mut(taken.ptr, taken.len);
            // SAFETY: `ptr` and `len` came from `from_vec`'s boxed slice and
            // were swapped out above, so this is the only owner.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

/// Frees bytes callpost handed out; afterwards `bytes` is empty (NULL,
/// 0). NULL, or bytes already freed, are left as they are.
///
/// # Safety
/// `bytes` is NULL or points at a `CallpostBytes` that callpost filled and
/// that nothing else frees.
#[no_mangle]
pub unsafe extern "C" fn callpost_bytes_free(bytes: *mut CallpostBytes) {
    // SAFETY: the caller promises a valid pointer or NULL.
    if let Some(b) = unsafe { bytes.as_mut() } {
        let _ = catch_unwind(AssertUnwindSafe(|| b.release()));
    }
}

/// Frees an error's message; afterwards `error` is empty. Safe to call on
/// an error that was never filled (its fields zeroed) or already freed.
///
/// # Safety
/// `error` is NULL or points at a `CallpostError` that is zeroed or was
/// filled by callpost, and that nothing else frees.
#[no_mangle]
pub unsafe extern "C" fn callpost_error_free(error: *mut CallpostError) {
    // SAFETY: the caller promises a valid pointer or NULL.
    if let Some(e) = unsafe { error.as_mut() } {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            e.message.release();
            e.code = CallpostStr::EMPTY;
            e.class_name = CallpostStr::EMPTY;
        }));
    }
}

/// `invalid_argument`: the API was called wrongly.
fn misuse(message: impl Into<String>) -> Error {
    ApiMisuse::Argument(message.into()).into()
}

/// Runs `f`, catching panics, and reports its error in `err`.
///
/// # Safety
/// `err` is NULL or valid for writes (its old contents are overwritten,
/// not freed).
unsafe fn guard(err: *mut CallpostError, f: impl FnOnce() -> Result<(), Error>) -> CallpostStatus {
    let (status, code, class, message) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return CallpostStatus::CallpostOk,
        Ok(Err(e)) => {
            let code = e.code();
            (
                CallpostStatus::CallpostFailed,
                CallpostStr::from_static(code.as_str()),
                CallpostStr::from_static(code.class().name()),
                e.to_string(),
            )
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            (
                CallpostStatus::CallpostInternal,
                CallpostStr::EMPTY,
                CallpostStr::EMPTY,
                format!("callpost internal error (a bug, please report it): {what}"),
            )
        }
    };
    // SAFETY: the caller promised a valid pointer or NULL.
    if let Some(out) = unsafe { err.as_mut() } {
        *out = CallpostError {
            code,
            class_name: class,
            message: CallpostBytes::from_vec(message.into_bytes()),
        };
    }
    status
}

/// Runs `f` where a panic has nothing to report through (getters, frees):
/// it is caught and `fallback` returned.
fn quiet<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Writes `value` through `out`, or reports that `out` is NULL.
///
/// # Safety
/// `out` is NULL or valid for writes.
unsafe fn put<T>(out: *mut T, what: &str, value: T) -> Result<(), Error> {
    // SAFETY: the caller promises a valid pointer or NULL.
    match unsafe { out.as_mut() } {
        Some(slot) => {
            *slot = value;
            Ok(())
        }
        None => Err(misuse(format!("{what} must not be NULL"))),
    }
}

/// The host's clock, in the core's type. A clock outside years 0000–9999
/// is clamped: `now` only stamps calls and times retries.
fn now_of(ms: i64) -> callpost_core::Timestamp {
    callpost_core::Timestamp::saturating_from_millis(ms)
}

/// A list of strings as the caller passed it.
///
/// # Safety
/// `items` is NULL (then `count` is 0) or points at `count` valid
/// `CallpostStr`s, each pointing at readable bytes.
unsafe fn list<'a>(items: *const CallpostStr, count: usize) -> &'a [CallpostStr] {
    if items.is_null() || count == 0 {
        return &[];
    }
    // SAFETY: the caller promises `count` entries at `items`.
    unsafe { std::slice::from_raw_parts(items, count) }
}

/// A header's name and value, borrowed from a header block when it is UTF-8.
type HeaderPair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// Parses an HTTP/1.1 header block into name/value pairs: `Name: value`
/// lines, CRLF or LF, optional whitespace around the value trimmed, empty
/// lines skipped. A value that is not UTF-8 keeps its valid part with
/// U+FFFD for the rest, so a mangled signature reads as malformed, not as
/// a misuse of the API. The pairs borrow from the block when it is UTF-8.
fn header_pairs(block: &[u8]) -> Result<Vec<HeaderPair<'_>>, Error> {
    let mut pairs = Vec::with_capacity(8);
    for line in block.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| misuse("each header line must be `Name: value`"))?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
        let start = value.iter().position(|b| !is_ows(b)).unwrap_or(value.len());
        let end = value
            .iter()
            .rposition(|b| !is_ows(b))
            .map_or(start, |i| i + 1);
        pairs.push((
            String::from_utf8_lossy(name),
            String::from_utf8_lossy(&value[start..end]),
        ));
    }
    Ok(pairs)
}

/// Writes headers as an HTTP/1.1 header block.
fn header_block<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn header_blocks_round_trip() {
        let block = header_block([("X-Signature", "ab"), ("Idempotency-Key", "m 1")]);
        assert_eq!(block, b"X-Signature: ab\r\nIdempotency-Key: m 1\r\n");
        let pairs = header_pairs(b"A:1\n\r\nB: \t two words \r\nC:\r\n").unwrap();
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(n, v)| (n.as_ref(), v.as_ref()))
            .collect();
        assert_eq!(pairs, [("A", "1"), ("B", "two words"), ("C", "")]);
        let e = header_pairs(b"no colon").unwrap_err();
        assert_eq!(e.code(), "invalid_argument");
    }

    #[test]
    fn errors_carry_the_registry_code_and_panics_are_caught() {
        let mut err = CallpostError {
            code: CallpostStr::EMPTY,
            class_name: CallpostStr::EMPTY,
            message: CallpostBytes::EMPTY,
        };
        // SAFETY: `err` is a valid, writable error.
        let status = unsafe { guard(&mut err, || Err(misuse("bad"))) };
        assert_eq!(status, CallpostStatus::CallpostFailed);
        // SAFETY: filled by `guard` from static text and an owned message.
        unsafe {
            assert_eq!(err.code.bytes(), b"invalid_argument");
            assert_eq!(err.class_name.bytes(), b"InvalidArgumentError");
            callpost_error_free(&mut err);
        }
        assert!(err.message.ptr.is_null());
        #[allow(clippy::panic)]
        // SAFETY: as above.
        let status = unsafe { guard(&mut err, || panic!("boom")) };
        assert_eq!(status, CallpostStatus::CallpostInternal);
        assert_eq!(err.code.len, 0);
        // SAFETY: as above.
        unsafe { callpost_error_free(&mut err) };
        // A NULL error is allowed: the status alone is reported.
        // SAFETY: NULL is allowed.
        let status = unsafe { guard(std::ptr::null_mut(), || Err(misuse("x"))) };
        assert_eq!(status, CallpostStatus::CallpostFailed);
    }
}
